//! `fivecore udr import`: bulk load of SLF or EIR entries, policy data, Sh profiles or policy
//! data subscriptions into the UDR's store file (`udr::import`), with a progress bar on stderr. Exit status: 0 when every row was imported,
//! 3 when bad rows were skipped (each reported with its line), 1 when the import failed or
//! stopped at a bad row (the rows before it stay imported).

use std::fs::File;
use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use udr::import::{self, BadRow, Event, Format, Kind, Options, Progress, Report};

use crate::cli::{ImportArgs, ImportFormat, ImportKind, OnBadRow};

/// Exit status of an import that skipped bad rows.
pub const SKIPPED_ROWS: u8 = 3;

const READ_BUFFER: usize = 1 << 20;

pub fn run(args: &ImportArgs) -> ExitCode {
    match prepare(args) {
        Ok((opts, store, input, total)) => import(opts, store, input, total),
        Err(e) => {
            eprintln!("fivecore udr import: {e}");
            ExitCode::from(1)
        }
    }
}

type Input = Box<dyn BufRead + Send>;

fn prepare(
    args: &ImportArgs,
) -> Result<(Options, store::SqliteConfig, Input, Option<u64>), String> {
    let config = match &args.config {
        Some(path) => crate::config::Config::load(path).map_err(|e| e.to_string())?,
        None => crate::config::Config::default(),
    };
    let stdin = args.file.as_os_str() == "-";
    let format = match args.format {
        Some(ImportFormat::Csv) => Format::Csv,
        Some(ImportFormat::Jsonl) => Format::Jsonl,
        None => format_of(&args.file).ok_or_else(|| {
            format!("cannot tell the format of {}: say --format csv or jsonl", args.file.display())
        })?,
    };
    let kind = match args.kind {
        ImportKind::Slf => Kind::Slf,
        ImportKind::Eir => Kind::Eir,
        ImportKind::Policy => Kind::Policy,
        ImportKind::Sh => Kind::Sh,
        ImportKind::PolicySubscriptions => Kind::PolicySubscriptions,
    };
    if format == Format::Csv {
        let what = match kind {
            Kind::Policy => Some("policy data is"),
            Kind::Sh => Some("Sh profiles are"),
            Kind::PolicySubscriptions => Some("policy data subscriptions are"),
            Kind::Slf | Kind::Eir => None,
        };
        if let Some(what) = what {
            return Err(format!("{what} imported from JSON lines only: say --format jsonl"));
        }
    }
    if args.batch == 0 {
        return Err("--batch must be at least 1".into());
    }
    let opts = Options {
        batch_rows: args.batch,
        stop_on_bad_row: args.on_bad_row == OnBadRow::Stop,
        max_service_data_bytes: config.udr.sh.max_repository_data_bytes,
        limits: config.udr.provisioning,
        ..Options::new(kind, format)
    };
    // The same file `fivecore udr` would serve from with these flags.
    let mut store =
        crate::nf::udr_run_config(&config, Some(&crate::nf::data_dir(args.data_dir.as_deref())))
            .store;
    if let Some(db) = &args.db {
        store.path = db.clone();
    }
    // The import only writes; one reader thread is the store's minimum.
    store.readers = 1;
    if let Some(dir) = store.path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let (input, total): (Input, Option<u64>) = if stdin {
        (Box::new(BufReader::with_capacity(READ_BUFFER, std::io::stdin())), None)
    } else {
        let f = File::open(&args.file)
            .map_err(|e| format!("cannot read {}: {e}", args.file.display()))?;
        let len = f.metadata().ok().map(|m| m.len());
        (Box::new(BufReader::with_capacity(READ_BUFFER, f)), len)
    };
    Ok((opts, store, input, total))
}

fn format_of(file: &Path) -> Option<Format> {
    match file.extension()?.to_str()?.to_ascii_lowercase().as_str() {
        "csv" => Some(Format::Csv),
        "jsonl" | "ndjson" => Some(Format::Jsonl),
        _ => None,
    }
}

fn import(opts: Options, store: store::SqliteConfig, input: Input, total: Option<u64>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("fivecore udr import: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let path = store.path.clone();
    let mut bar = Bar::new(total);
    let result: Result<Report, String> = runtime.block_on(async {
        // On MySQL too: a running UDR instance on the database follows the import through the
        // change feed (its SLF index reloads after a bulk batch).
        let where_ = match store.backend {
            store::Backend::Sqlite => path.display().to_string(),
            store::Backend::Mysql => "the MySQL store".to_owned(),
        };
        let db = udr::Stores::open(store, "fivecore-udr-import")
            .await
            .map_err(|e| format!("cannot open {where_}: {e}"))?;
        let report = import::run(&db, input, opts, |e| match e {
            Event::BadRow(b) => bar.bad_row(b),
            Event::Progress(p) => bar.update(&p, false),
        })
        .await;
        // Everything acknowledged is committed already; closing checkpoints and stops threads.
        if let Err(e) = db.close().await {
            eprintln!("fivecore udr import: closing {}: {e}", path.display());
        }
        report.map_err(|e| e.to_string())
    });
    match result {
        Err(e) => {
            bar.end();
            eprintln!("fivecore udr import: {e}");
            ExitCode::from(1)
        }
        Ok(report) => {
            bar.update(&report.progress, true);
            bar.end();
            eprintln!("{}", summary(&report, opts.kind, &path));
            // For scripts and the benchmark kit: the same figures as one JSON line, the way
            // `fivecore bsf preload` reports.
            // Not println!: it panics when stdout is a closed pipe; the rows are imported.
            let _ = writeln!(std::io::stdout(), "{}", summary_json(&report));
            if let Some(line) = report.stopped_at {
                eprintln!(
                    "fivecore udr import: stopped at the bad row on line {line}; the rows before \
                     it are imported (fix it and run the same file again: rows are upserts)"
                );
                ExitCode::from(1)
            } else if report.progress.bad > 0 {
                ExitCode::from(SKIPPED_ROWS)
            } else {
                ExitCode::SUCCESS
            }
        }
    }
}

fn summary(r: &Report, kind: Kind, path: &Path) -> String {
    let p = &r.progress;
    let secs = p.elapsed.as_secs_f64();
    let rate = if secs > 0.0 { (p.rows as f64 / secs) as u64 } else { p.rows };
    let what = match kind {
        Kind::Slf => format!(
            "{} identities new, {} entries replaced, {} identities removed",
            group(r.slf.new as u64),
            group(r.slf.replaced as u64),
            group(r.slf.removed as u64)
        ),
        Kind::Eir => format!("{} IMEIs, {} IMEI ranges", group(r.imeis), group(r.ranges)),
        Kind::Policy => format!(
            "{} UEs new, {} replaced",
            group(r.policy_new),
            group(p.rows.saturating_sub(r.policy_new))
        ),
        Kind::Sh => {
            format!("{} Sh profiles new, {} replaced", group(r.sh_new), group(r.sh_replaced))
        }
        Kind::PolicySubscriptions => {
            format!("{} policy data subscriptions", group(r.subscriptions))
        }
    };
    format!(
        "imported {} rows into {} in {secs:.1} s ({} rows/s): {what}; {} bad rows",
        group(p.rows),
        path.display(),
        group(rate),
        group(p.bad)
    )
}

/// The summary as one JSON object: rows imported and bad, seconds, and what the rows did.
fn summary_json(r: &Report) -> serde_json::Value {
    serde_json::json!({
        "rows": r.progress.rows,
        "bad": r.progress.bad,
        "seconds": r.progress.elapsed.as_secs_f64(),
        "stoppedAtLine": r.stopped_at,
        "slfIdentitiesNew": r.slf.new,
        "slfEntriesReplaced": r.slf.replaced,
        "slfIdentitiesRemoved": r.slf.removed,
        "imeis": r.imeis,
        "imeiRanges": r.ranges,
        "policyUesNew": r.policy_new,
        "shProfilesNew": r.sh_new,
        "shProfilesReplaced": r.sh_replaced,
        "policySubscriptions": r.subscriptions,
    })
}

/// `1234567` as `1,234,567`.
fn group(n: u64) -> String {
    let digits = n.to_string();
    let groups: Vec<&str> = digits
        .as_bytes()
        .rchunks(3)
        .rev()
        .map(|g| std::str::from_utf8(g).unwrap_or_default())
        .collect();
    groups.join(",")
}

/// The progress line on stderr: redrawn in place on a terminal (at most every 100 ms),
/// otherwise a plain line every 10 s, so a log file gets a readable trace.
struct Bar {
    tty: bool,
    total: Option<u64>,
    last: Option<Instant>,
    drawn: bool,
}

const BAR_WIDTH: usize = 30;

impl Bar {
    fn new(total: Option<u64>) -> Self {
        let tty = std::io::stderr().is_terminal();
        // Off a terminal the first line comes after one period: a short import prints only its
        // summary.
        let last = if tty { None } else { Some(Instant::now()) };
        Bar { tty, total, last, drawn: false }
    }

    fn update(&mut self, p: &Progress, force: bool) {
        let every = if self.tty { Duration::from_millis(100) } else { Duration::from_secs(10) };
        if !force && self.last.is_some_and(|t| t.elapsed() < every) {
            return;
        }
        self.last = Some(Instant::now());
        let line = self.line(p);
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[2K{line}");
            self.drawn = true;
        } else if !force {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
    }

    fn line(&self, p: &Progress) -> String {
        let secs = p.elapsed.as_secs_f64().max(1e-3);
        let rate = p.rows as f64 / secs;
        let mut line = String::new();
        if let Some(total) = self.total.filter(|t| *t > 0) {
            let done = (p.bytes as f64 / total as f64).min(1.0);
            let filled = (done * BAR_WIDTH as f64) as usize;
            line.push('[');
            line.push_str(&"#".repeat(filled));
            line.push_str(&".".repeat(BAR_WIDTH - filled));
            line.push_str(&format!("] {:3.0}%  ", done * 100.0));
            if done > 0.0 && done < 1.0 {
                let eta = secs * (1.0 - done) / done;
                line.push_str(&format!("ETA {}:{:02}  ", eta as u64 / 60, eta as u64 % 60));
            }
        }
        line.push_str(&format!(
            "{} rows  {} rows/s  {secs:.1} s",
            group(p.rows),
            group(rate as u64)
        ));
        if p.bad > 0 {
            line.push_str(&format!("  {} bad", group(p.bad)));
        }
        line
    }

    fn bad_row(&mut self, b: &BadRow) {
        let mut err = std::io::stderr().lock();
        if self.tty && self.drawn {
            let _ = write!(err, "\r\x1b[2K");
            self.drawn = false;
        }
        let _ = writeln!(err, "line {}: {}", b.line, b.reason);
    }

    /// Leaves the cursor on a fresh line.
    fn end(&mut self) {
        if self.tty && self.drawn {
            eprintln!();
            self.drawn = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands() {
        assert_eq!(group(0), "0");
        assert_eq!(group(999), "999");
        assert_eq!(group(1000), "1,000");
        assert_eq!(group(10_000_000), "10,000,000");
    }

    #[test]
    fn bar_line() {
        let bar = Bar { tty: true, total: Some(1000), last: None, drawn: false };
        let p = Progress { rows: 5000, bad: 2, bytes: 500, elapsed: Duration::from_secs(2) };
        let line = bar.line(&p);
        assert!(line.starts_with("[###############...............]  50%  ETA 0:02"), "{line}");
        assert!(line.ends_with("5,000 rows  2,500 rows/s  2.0 s  2 bad"), "{line}");
        assert_eq!(format_of(Path::new("a.CSV")), Some(Format::Csv));
        assert_eq!(format_of(Path::new("a.ndjson")), Some(Format::Jsonl));
        assert_eq!(format_of(Path::new("-")), None);
    }
}
