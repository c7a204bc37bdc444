//! `fivecore bsf preload`: bulk load of PCF bindings from JSON lines into the BSF's store
//! (`bsf::preload` over the store's bulk load), while no BSF serves from it. The store is the
//! one `fivecore bsf` would serve from with the same `--config` and `--data-dir`.
//!
//! Output: bad lines and progress (on a terminal, or with `--progress`) on stderr, then one
//! JSON line on stdout, `{"bindings":N,"skipped":K,"seconds":S,"indexSeconds":I,"dbBytes":B}`.
//! Exit status: 0 when every line was loaded, 3 when bad lines were skipped, 1 when the load
//! failed or stopped at a bad line (the lines before it stay loaded).

use std::fs::File;
use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use bsf::preload::{self, Event, OnBadLine, Progress, Report};
use bsf::store::sqlite::SqliteBulkLoad;

use crate::cli::{OnBadRow, PreloadArgs};

/// Exit status of a load that skipped bad lines.
pub const SKIPPED_LINES: u8 = 3;

const READ_BUFFER: usize = 1 << 20;

type Input = Box<dyn BufRead + Send>;

pub fn run(args: &PreloadArgs) -> ExitCode {
    match load(args) {
        Ok(report) => {
            // Not println!: it panics when stdout is a closed pipe; the bindings are loaded.
            let _ = writeln!(std::io::stdout(), "{}", summary(&report));
            if let Some(bad) = &report.stopped_at {
                eprintln!(
                    "fivecore bsf preload: stopped at line {}: {}; the {} bindings before it are \
                     loaded",
                    bad.line, bad.reason, report.bindings
                );
                ExitCode::from(1)
            } else if report.skipped > 0 {
                ExitCode::from(SKIPPED_LINES)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("fivecore bsf preload: {e}");
            ExitCode::from(1)
        }
    }
}

fn load(args: &PreloadArgs) -> Result<Report, String> {
    let config = match &args.config {
        Some(path) => crate::config::Config::load(path).map_err(|e| e.to_string())?,
        None => crate::config::Config::default(),
    };
    // The same file `fivecore bsf` would serve from with these flags.
    let mut store =
        crate::nf::bsf_run_config(&config, Some(&crate::nf::data_dir(args.data_dir.as_deref())))
            .store;
    store.readers = 1;
    if let Some(dir) = store.path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let (input, total): (Input, Option<u64>) = if args.input.as_os_str() == "-" {
        (Box::new(BufReader::with_capacity(READ_BUFFER, std::io::stdin())), None)
    } else {
        let f = File::open(&args.input)
            .map_err(|e| format!("cannot read {}: {e}", args.input.display()))?;
        let len = f.metadata().ok().map(|m| m.len());
        (Box::new(BufReader::with_capacity(READ_BUFFER, f)), len)
    };
    let path = store.path.clone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    let bulk = runtime
        .block_on(SqliteBulkLoad::open(store))
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    drop(runtime);
    let on_bad_line = match args.on_bad_row {
        OnBadRow::Stop => OnBadLine::Stop,
        OnBadRow::Skip => OnBadLine::Skip,
    };
    let mut bar = Bar::new(total, args.progress);
    let report = preload::run(input, Box::new(bulk), on_bad_line, |e| match e {
        Event::Progress(p) => bar.update(p),
        Event::BadLine(b) => {
            // With `stop` the final message names it.
            if on_bad_line == OnBadLine::Skip {
                bar.message(&format!("line {}: {}", b.line, b.reason), true);
            }
        }
        Event::Indexing => bar.message("building the store's indexes", false),
    });
    bar.end();
    report.map_err(|e| format!("{}: {e}", path.display()))
}

/// The one JSON line on stdout.
fn summary(r: &Report) -> String {
    format!(
        r#"{{"bindings":{},"skipped":{},"seconds":{:.3},"indexSeconds":{:.3},"dbBytes":{}}}"#,
        r.bindings, r.skipped, r.seconds, r.index_seconds, r.db_bytes
    )
}

/// Progress on stderr: redrawn in place on a terminal (at most every 100 ms), otherwise (with
/// `--progress`) a plain line every 5 s.
struct Bar {
    tty: bool,
    on: bool,
    total: Option<u64>,
    last: Instant,
    drawn: bool,
}

impl Bar {
    fn new(total: Option<u64>, forced: bool) -> Self {
        let tty = std::io::stderr().is_terminal();
        Bar { tty, on: tty || forced, total, last: Instant::now(), drawn: false }
    }

    fn update(&mut self, p: &Progress) {
        let every = if self.tty { Duration::from_millis(100) } else { Duration::from_secs(5) };
        if !self.on || self.last.elapsed() < every {
            return;
        }
        self.last = Instant::now();
        let line = line(p, self.total);
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[2K{line}");
            self.drawn = true;
        } else {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
    }

    /// A line of its own: a bad line (`always`), or a step of the load shown with the progress.
    fn message(&mut self, text: &str, always: bool) {
        if !always && !self.on {
            return;
        }
        self.end();
        eprintln!("{text}");
    }

    /// Leaves the cursor on a fresh line.
    fn end(&mut self) {
        if self.drawn {
            eprintln!();
            self.drawn = false;
        }
    }
}

fn line(p: &Progress, total: Option<u64>) -> String {
    let secs = p.elapsed.as_secs_f64().max(1e-3);
    let mut line =
        format!("{} bindings  {:.0} bindings/s  {secs:.1} s", p.bindings, p.bindings as f64 / secs);
    if let Some(total) = total.filter(|t| *t > 0) {
        let done = (p.bytes as f64 / total as f64).min(1.0);
        line = format!("{:3.0}%  {line}", done * 100.0);
    }
    if p.skipped > 0 {
        line.push_str(&format!("  {} skipped", p.skipped));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_and_progress_lines() {
        let r = Report {
            bindings: 10,
            skipped: 2,
            stopped_at: None,
            seconds: 1.5,
            index_seconds: 0.25,
            db_bytes: 4096,
        };
        assert_eq!(
            summary(&r),
            r#"{"bindings":10,"skipped":2,"seconds":1.500,"indexSeconds":0.250,"dbBytes":4096}"#
        );
        let p =
            Progress { bindings: 5000, skipped: 1, bytes: 500, elapsed: Duration::from_secs(2) };
        assert_eq!(line(&p, Some(1000)), " 50%  5000 bindings  2500 bindings/s  2.0 s  1 skipped");
    }
}
