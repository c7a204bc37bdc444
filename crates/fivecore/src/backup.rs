//! `fivecore backup`: an online, consistent copy of the NFs' embedded stores while they run and
//! write, into a backup directory with a manifest (docs/backup.md).
//!
//! Each store is copied from this process with SQLite's backup API over one read snapshot
//! (`store::sqlite::backup`), so the NF is neither stopped nor asked anything: the copy holds
//! every write the NF acknowledged before that store's copy began. Each copy is checked with
//! `PRAGMA integrity_check` before it counts. `manifest.json` is written last, so a directory
//! without it is a backup that did not finish, and `fivecore restore` refuses it.
//!
//! Exit status: 0 done; 1 failed (I/O, a copy failing its check: the manifest is not written);
//! 2 refused before copying (configuration, the MySQL backend, no store, `--out` not empty);
//! 3 a restore is in progress on a store.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use store::sqlite::backup::{self as engine, Pace};
use store::{Backend, StoreLock};

use crate::cli::{BackupArgs, StoreNf};
use crate::nf::{self, Nf};

pub const FAILED: u8 = 1;
pub const REFUSED: u8 = 2;
pub const IN_USE: u8 = 3;

/// The manifest's name in a backup directory, and its format tag.
pub const MANIFEST: &str = "manifest.json";
pub const FORMAT: &str = "fivecore-backup/1";

/// What a backup holds: `manifest.json`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub format: String,
    pub fivecore_version: String,
    /// When the backup finished (RFC 3339, UTC).
    pub created_at: String,
    /// The data directory it was taken from.
    pub data_dir: PathBuf,
    pub stores: Vec<StoreEntry>,
    /// What an NF keeps on disk that is not in the backup, and why (docs/backup.md).
    pub not_included: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoreEntry {
    /// The NFs keeping their state in this file (several when `[store] path` makes them share).
    pub nfs: Vec<String>,
    /// The file in the backup directory.
    pub file: String,
    /// Where it was copied from.
    pub source: PathBuf,
    pub bytes: u64,
    pub sha256: String,
    /// Its schema version: the migrations applied to it, oldest first.
    pub migrations: Vec<String>,
    /// When its snapshot was taken (RFC 3339, UTC): it holds every write acknowledged before.
    pub snapshot_at: String,
    pub copy_ms: u64,
    pub integrity_check: String,
}

/// One store under a data directory: its file and the NFs keeping their state in it.
#[derive(Debug, Clone)]
pub struct Located {
    pub nfs: Vec<Nf>,
    pub path: PathBuf,
}

impl Located {
    /// The file's name in a backup: the database's own (`bsf.db`).
    pub fn file_name(&self) -> String {
        self.path.file_name().map_or_else(|| "store.db".into(), |n| n.to_string_lossy().into())
    }

    pub fn nf_names(&self) -> Vec<String> {
        self.nfs.iter().map(|n| nf_key(*n).to_owned()).collect()
    }
}

/// The key of an NF in the manifest and in `--nf`.
pub fn nf_key(nf: Nf) -> &'static str {
    match nf {
        Nf::Nrf => "nrf",
        Nf::Udr => "udr",
        Nf::Bsf => "bsf",
        Nf::Pcf => "pcf",
        Nf::Dd => "dd",
    }
}

pub fn nf_of(key: StoreNf) -> Nf {
    match key {
        StoreNf::Nrf => Nf::Nrf,
        StoreNf::Udr => Nf::Udr,
        StoreNf::Bsf => Nf::Bsf,
        StoreNf::Pcf => Nf::Pcf,
        StoreNf::Dd => Nf::Dd,
    }
}

/// Every NF's store file under `data_dir` as `fivecore up` and `fivecore <nf>` would open it
/// with `config`; NFs sharing a file (a `[store] path` of its own) are one store.
pub fn locate(config: &crate::config::Config, data_dir: &Path) -> Vec<Located> {
    let mut stores: Vec<Located> = Vec::new();
    for info in &nf::ALL {
        let (_, store) = nf::nf_sbi_and_store(config, info.nf, Some(data_dir));
        match stores.iter_mut().find(|s| s.path == store.path) {
            Some(s) => s.nfs.push(info.nf),
            None => stores.push(Located { nfs: vec![info.nf], path: store.path }),
        }
    }
    stores
}

/// The migration ids this binary knows for `nf`'s store: the engine's and the NF's own. A
/// backup recording any other was made by a newer fivecore.
pub fn known_migrations(nf: Nf) -> Vec<&'static str> {
    let own: Vec<store::Migration> = match nf {
        Nf::Nrf => Vec::new(),
        Nf::Udr => udr::stores::migrations(),
        Nf::Bsf => bsf::store::sqlite::MIGRATIONS.to_vec(),
        Nf::Pcf => pcf::store::sqlite::MIGRATIONS.to_vec(),
        Nf::Dd => dd::sinks::xdr_store::sqlite::MIGRATIONS.to_vec(),
    };
    store::sqlite::engine_migrations().iter().chain(&own).map(|m| m.id).collect()
}

/// What an NF keeps under its data directory besides its store, left out of a backup.
pub const NOT_INCLUDED: [&str; 2] = [
    "dd-log/: the Data Director's log, a buffer of copies on their way to the feeds (its \
     feeds, filters and correlations, and the xDRs, are in dd.db)",
    "policy-default/: the PCF's built-in policy project, written again at every start",
];

/// The configuration of `--config`, or the defaults.
pub fn load_config(path: Option<&Path>) -> Result<crate::config::Config, String> {
    match path {
        Some(p) => crate::config::Config::load(p).map_err(|e| e.to_string()),
        None => Ok(crate::config::Config::default()),
    }
}

/// The MySQL backend's data is the database server's to back up.
pub fn mysql_refusal(config: &crate::config::Config, what: &str) -> Option<String> {
    (config.store.backend == Backend::Mysql).then(|| {
        format!(
            "[store] backend = \"mysql\": the NFs' state is in the MySQL/MariaDB database, which \
             `fivecore {what}` does not {what}; use the server's tools (mariabackup --backup / \
             --prepare / --copy-back, or mysqldump --single-transaction), docs/backup.md"
        )
    })
}

/// Fails with an exit status and a message.
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    pub fn new(code: u8, message: impl Into<String>) -> Failure {
        Failure { code, message: message.into() }
    }
}

pub fn run(args: &BackupArgs) -> ExitCode {
    match backup(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("fivecore backup: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

fn backup(args: &BackupArgs) -> Result<(), Failure> {
    let config = load_config(args.config.as_deref()).map_err(|e| Failure::new(REFUSED, e))?;
    if let Some(m) = mysql_refusal(&config, "backup") {
        return Err(Failure::new(REFUSED, m));
    }
    let wanted: Vec<Nf> = args.nf.iter().map(|k| nf_of(*k)).collect();
    let mut stores = Vec::new();
    for s in locate(&config, &args.data_dir) {
        let asked = s.nfs.iter().any(|n| wanted.contains(n));
        if !s.path.exists() {
            if asked {
                return Err(Failure::new(
                    REFUSED,
                    format!("no store of {} at {}", s.nf_names().join(", "), s.path.display()),
                ));
            }
            continue;
        }
        if wanted.is_empty() || asked {
            stores.push(s);
        }
    }
    if stores.is_empty() {
        return Err(Failure::new(
            REFUSED,
            format!(
                "no NF store in {} (looked for {})",
                args.data_dir.display(),
                locate(&config, &args.data_dir)
                    .iter()
                    .map(Located::file_name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    prepare_out(&args.out)?;
    background_priority();
    // Shared, as every NF holds it: a restore cannot replace a store under its copy.
    let mut locks = Vec::new();
    for s in &stores {
        match StoreLock::shared(&s.path) {
            Ok(l) => locks.push(l),
            Err(e) => return Err(Failure::new(IN_USE, e.to_string())),
        }
    }
    let pace = Pace { pages: args.step_pages.max(1), pause: Duration::from_millis(args.pause_ms) };
    let started = Instant::now();
    let mut entries = Vec::new();
    for s in &stores {
        let entry = copy_one(s, &args.out, pace)?;
        let _ = writeln!(
            std::io::stdout(),
            "{:<8} {:<14} {:>12} bytes  {:>7} ms  integrity ok  sha256 {}",
            entry.file,
            entry.nfs.join(","),
            entry.bytes,
            entry.copy_ms,
            entry.sha256
        );
        entries.push(entry);
    }
    let manifest = Manifest {
        format: FORMAT.into(),
        fivecore_version: env!("CARGO_PKG_VERSION").into(),
        created_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        data_dir: fs::canonicalize(&args.data_dir).unwrap_or_else(|_| args.data_dir.clone()),
        stores: entries,
        not_included: NOT_INCLUDED.iter().map(|s| (*s).to_owned()).collect(),
    };
    write_manifest(&args.out, &manifest)?;
    drop(locks);
    let _ = writeln!(
        std::io::stdout(),
        "backup complete: {} ({} stores, {:.1} s)",
        args.out.display(),
        manifest.stores.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The backup is background work beside a serving NF, often on the NF's own cores: it runs in
/// `SCHED_BATCH` at nice 19 (as the store's checkpointer does), so an NF worker that wakes
/// preempts it, and it still gets a share of a busy core. The process has one thread here.
fn background_priority() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: system calls on the calling thread (pid 0) with valid parameters.
    let (policy, nice) = unsafe {
        (
            libc::sched_setscheduler(0, libc::SCHED_BATCH, &param),
            libc::setpriority(libc::PRIO_PROCESS, 0, 19),
        )
    };
    if policy != 0 || nice != 0 {
        eprintln!(
            "fivecore backup: runs at its normal priority ({})",
            std::io::Error::last_os_error()
        );
    }
}

/// `--out` is made, or must be an empty directory: a backup never mixes with another's files.
fn prepare_out(out: &Path) -> Result<(), Failure> {
    if out.exists() {
        let empty = fs::read_dir(out).map(|mut d| d.next().is_none()).unwrap_or(false);
        if !empty {
            return Err(Failure::new(
                REFUSED,
                format!("{} exists and is not an empty directory", out.display()),
            ));
        }
        return Ok(());
    }
    fs::create_dir_all(out)
        .map_err(|e| Failure::new(FAILED, format!("cannot create {}: {e}", out.display())))
}

fn copy_one(s: &Located, out: &Path, pace: Pace) -> Result<StoreEntry, Failure> {
    let file = s.file_name();
    let partial = out.join(format!("{file}.partial"));
    let snapshot_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let copied = engine::backup(&s.path, &partial, pace).map_err(|e| {
        let _ = fs::remove_file(&partial);
        Failure::new(FAILED, format!("{}: {e}", s.path.display()))
    })?;
    let done = out.join(&file);
    fs::rename(&partial, &done)
        .map_err(|e| Failure::new(FAILED, format!("cannot rename {}: {e}", partial.display())))?;
    let (bytes, sha256) = sha256_file(&done).map_err(|e| Failure::new(FAILED, e))?;
    Ok(StoreEntry {
        nfs: s.nf_names(),
        file,
        source: s.path.clone(),
        bytes,
        sha256,
        migrations: copied.migrations,
        snapshot_at,
        copy_ms: u64::try_from(copied.copy_time.as_millis()).unwrap_or(u64::MAX),
        integrity_check: "ok".into(),
    })
}

fn write_manifest(out: &Path, manifest: &Manifest) -> Result<(), Failure> {
    let fail = |e: std::io::Error| Failure::new(FAILED, format!("cannot write the manifest: {e}"));
    let text = serde_json::to_vec_pretty(manifest)
        .map_err(|e| Failure::new(FAILED, format!("cannot encode the manifest: {e}")))?;
    let tmp = out.join(format!("{MANIFEST}.partial"));
    let mut f = File::create(&tmp).map_err(fail)?;
    f.write_all(&text).and_then(|()| f.sync_all()).map_err(fail)?;
    fs::rename(&tmp, out.join(MANIFEST)).map_err(fail)?;
    sync_dir(out).map_err(fail)
}

/// Makes a directory's entries (files renamed into it) durable.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// The size and SHA-256 (lowercase hex) of a file.
pub fn sha256_file(path: &Path) -> Result<(u64, String), String> {
    let mut f = File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut hasher = Sha256::default();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher.finish())
}

/// A running SHA-256 and the bytes it has seen.
pub struct Sha256 {
    ctx: ring::digest::Context,
    bytes: u64,
}

impl Default for Sha256 {
    fn default() -> Self {
        Sha256 { ctx: ring::digest::Context::new(&ring::digest::SHA256), bytes: 0 }
    }
}

impl Sha256 {
    pub fn update(&mut self, data: &[u8]) {
        self.ctx.update(data);
        self.bytes += data.len() as u64;
    }

    pub fn finish(self) -> (u64, String) {
        use std::fmt::Write as _;
        let digest = self.ctx.finish();
        let mut hex = String::with_capacity(64);
        for b in digest.as_ref() {
            let _ = write!(hex, "{b:02x}");
        }
        (self.bytes, hex)
    }
}
