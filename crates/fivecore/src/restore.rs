//! `fivecore restore`: puts a backup's stores in place of an NF data directory's, while no NF
//! runs on them (docs/backup.md).
//!
//! Refuses while any process has a store open: every NF (and bulk load, and backup) holds a
//! shared lock on `<store>.lock` (`store::StoreLock`), this command takes it alone and keeps
//! it until the end, so no NF can start on a half-restored directory either. Every file of the
//! backup is checked before any store is touched: its size and SHA-256 against the manifest
//! (a corrupt or truncated copy), its schema migrations against the ones this binary knows (a
//! backup of a newer fivecore), `PRAGMA integrity_check`. Each store is then replaced by a
//! rename of a synced copy beside it, so a crash leaves the old store or the new one: the old
//! store's WAL is first folded into its file (it holds the last commits of an NF killed with
//! SIGKILL, and a WAL left beside the new file would be applied to it).
//!
//! Exit status: 0 done; 1 failed (I/O); 2 refused (configuration, the MySQL backend, `--nf`
//! naming a store the backup lacks); 3 an NF has a store open; 4 the backup is incomplete,
//! corrupt or truncated, or of a newer schema (nothing was replaced).

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use store::sqlite::backup as engine;
use store::StoreLock;

use crate::backup::{
    known_migrations, load_config, locate, mysql_refusal, nf_key, nf_of, sync_dir, Failure,
    Manifest, Sha256, StoreEntry, FAILED, FORMAT, IN_USE, MANIFEST, REFUSED,
};
use crate::cli::RestoreArgs;
use crate::nf::{Nf, ALL};

pub const BAD_BACKUP: u8 = 4;

pub fn run(args: &RestoreArgs) -> ExitCode {
    match restore(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("fivecore restore: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

/// A store of the backup, checked and copied beside the file it replaces.
struct Staged<'m> {
    entry: &'m StoreEntry,
    target: PathBuf,
    staged: PathBuf,
}

fn restore(args: &RestoreArgs) -> Result<(), Failure> {
    let config = load_config(args.config.as_deref()).map_err(|e| Failure::new(REFUSED, e))?;
    if let Some(m) = mysql_refusal(&config, "restore") {
        return Err(Failure::new(REFUSED, m));
    }
    let manifest = read_manifest(&args.from)?;
    let wanted: Vec<Nf> = args.nf.iter().map(|k| nf_of(*k)).collect();
    for nf in &wanted {
        if !manifest.stores.iter().any(|e| e.nfs.iter().any(|k| k == nf_key(*nf))) {
            return Err(Failure::new(
                REFUSED,
                format!("the backup {} has no store of the {}", args.from.display(), nf_key(*nf)),
            ));
        }
    }
    let located = locate(&config, &args.data_dir);
    let mut plan = Vec::new();
    for entry in &manifest.stores {
        let nfs = entry
            .nfs
            .iter()
            .map(|k| {
                nf_named(k).ok_or_else(|| bad(format!("the manifest names an unknown NF {k:?}")))
            })
            .collect::<Result<Vec<Nf>, Failure>>()?;
        if !wanted.is_empty() && !nfs.iter().any(|n| wanted.contains(n)) {
            continue;
        }
        let target = located
            .iter()
            .find(|l| nfs.iter().all(|n| l.nfs.contains(n)))
            .map(|l| l.path.clone())
            .ok_or_else(|| {
                Failure::new(
                    REFUSED,
                    format!(
                        "{} holds the stores of {} in one file; with this configuration they \
                         are in different files",
                        entry.file,
                        entry.nfs.join(", ")
                    ),
                )
            })?;
        plan.push((entry, nfs, target));
    }
    if plan.is_empty() {
        return Err(bad(format!("the backup {} holds no store", args.from.display())));
    }
    fs::create_dir_all(&args.data_dir).map_err(|e| {
        Failure::new(FAILED, format!("cannot create {}: {e}", args.data_dir.display()))
    })?;
    let mut locks = Vec::new();
    for (_, _, target) in &plan {
        if let Some(dir) = target.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(|e| {
                Failure::new(FAILED, format!("cannot create {}: {e}", dir.display()))
            })?;
        }
        match StoreLock::exclusive(target) {
            Ok(Some(l)) => locks.push(l),
            Ok(None) => {
                return Err(Failure::new(
                    IN_USE,
                    format!(
                        "{} is in use: an NF (or a backup or bulk load) has it open ({} is \
                         locked); stop it first",
                        target.display(),
                        store::sqlite::lock::lock_path(target).display()
                    ),
                ))
            }
            Err(e) => return Err(Failure::new(FAILED, e.to_string())),
        }
    }
    let mut staged = Vec::new();
    for (entry, nfs, target) in &plan {
        match stage(&args.from, &manifest, entry, nfs, target) {
            Ok(s) => staged.push(s),
            Err(f) => {
                for s in &staged {
                    let _ = fs::remove_file(&s.staged);
                }
                return Err(f);
            }
        }
    }
    // Every file is checked: only now is any store replaced.
    for s in &staged {
        swap(s)?;
        let _ = writeln!(
            std::io::stdout(),
            "restored {} ({}) from the snapshot of {}",
            s.target.display(),
            s.entry.nfs.join(","),
            s.entry.snapshot_at
        );
    }
    drop(locks);
    Ok(())
}

fn bad(message: String) -> Failure {
    Failure::new(BAD_BACKUP, message)
}

fn nf_named(key: &str) -> Option<Nf> {
    ALL.iter().map(|i| i.nf).find(|nf| nf_key(*nf) == key)
}

fn read_manifest(from: &Path) -> Result<Manifest, Failure> {
    let path = from.join(MANIFEST);
    let text = match fs::read(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(bad(format!(
                "{} is not a complete fivecore backup: it has no {MANIFEST} (a backup that did \
                 not finish has none)",
                from.display()
            )))
        }
        Err(e) => return Err(bad(format!("cannot read {}: {e}", path.display()))),
    };
    let manifest: Manifest = serde_json::from_slice(&text)
        .map_err(|e| bad(format!("{} is not a valid manifest: {e}", path.display())))?;
    if manifest.format != FORMAT {
        return Err(bad(format!(
            "{} is of format {:?}; this fivecore ({}) reads {FORMAT:?}",
            path.display(),
            manifest.format,
            env!("CARGO_PKG_VERSION")
        )));
    }
    Ok(manifest)
}

/// Copies one store of the backup beside its target, checking it on the way.
fn stage<'m>(
    from: &Path,
    manifest: &Manifest,
    entry: &'m StoreEntry,
    nfs: &[Nf],
    target: &Path,
) -> Result<Staged<'m>, Failure> {
    let source = from.join(&entry.file);
    if entry.file.contains('/') || entry.file.starts_with('.') {
        return Err(bad(format!("the manifest names an odd file {:?}", entry.file)));
    }
    let mut staged_name = target.as_os_str().to_owned();
    staged_name.push(".restoring");
    let staged = PathBuf::from(staged_name);
    let checked = copy_checked(&source, &staged, entry).and_then(|()| {
        check_schema(&staged, manifest, entry, nfs)?;
        engine::integrity_check(&staged).map_err(|e| bad(format!("{}: {e}", source.display())))
    });
    if let Err(f) = checked {
        let _ = fs::remove_file(&staged);
        return Err(f);
    }
    Ok(Staged { entry, target: target.to_owned(), staged })
}

/// Copies `source` to `staged` (synced), failing when its size or SHA-256 differ from the
/// manifest's: a truncated or damaged copy.
fn copy_checked(source: &Path, staged: &Path, entry: &StoreEntry) -> Result<(), Failure> {
    let mut input = File::open(source).map_err(|e| {
        bad(format!("the backup lacks {} ({e}): it is incomplete", source.display()))
    })?;
    let io = |e: std::io::Error| Failure::new(FAILED, format!("{}: {e}", staged.display()));
    let mut out =
        OpenOptions::new().write(true).create(true).truncate(true).open(staged).map_err(io)?;
    let mut hasher = Sha256::default();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = input
            .read(&mut buf)
            .map_err(|e| Failure::new(FAILED, format!("{}: {e}", source.display())))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n]).map_err(io)?;
    }
    out.sync_all().map_err(io)?;
    let (bytes, sha256) = hasher.finish();
    if bytes != entry.bytes || sha256 != entry.sha256 {
        return Err(bad(format!(
            "{} is corrupt or truncated: {bytes} bytes, sha256 {sha256}; the manifest says \
             {} bytes, sha256 {}",
            source.display(),
            entry.bytes,
            entry.sha256
        )));
    }
    Ok(())
}

/// Refuses a store carrying a migration this binary does not know: a newer fivecore's schema,
/// which this one would misread.
fn check_schema(
    staged: &Path,
    manifest: &Manifest,
    entry: &StoreEntry,
    nfs: &[Nf],
) -> Result<(), Failure> {
    let applied = engine::migrations(staged).map_err(|e| bad(format!("{}: {e}", entry.file)))?;
    let known: Vec<&str> = nfs.iter().flat_map(|nf| known_migrations(*nf)).collect();
    let unknown: Vec<&str> =
        applied.iter().map(String::as_str).filter(|id| !known.contains(id)).collect();
    if unknown.is_empty() {
        return Ok(());
    }
    Err(bad(format!(
        "{} has a newer schema than this fivecore ({}) knows (migrations {}); it was made by \
         fivecore {}: restore it with that version or a newer one",
        entry.file,
        env!("CARGO_PKG_VERSION"),
        unknown.join(", "),
        manifest.fivecore_version
    )))
}

/// Puts the staged copy in place of the store by a rename. The old store's WAL is folded into
/// its file first, so that up to the rename the old store is whole without it.
fn swap(s: &Staged<'_>) -> Result<(), Failure> {
    let side = |suffix: &str| {
        let mut p = s.target.as_os_str().to_owned();
        p.push(suffix);
        PathBuf::from(p)
    };
    let (wal, shm) = (side("-wal"), side("-shm"));
    if s.target.exists() && wal.exists() {
        if let Err(e) = engine::fold_wal(&s.target) {
            // A damaged store (often why one restores) may not take it: its WAL is kept aside.
            let aside = side("-wal.before-restore");
            eprintln!(
                "fivecore restore: {e}; the old WAL is kept as {} and the old store replaced",
                aside.display()
            );
            fs::rename(&wal, &aside).map_err(|e| {
                Failure::new(FAILED, format!("cannot move {} aside: {e}", wal.display()))
            })?;
        }
    }
    for leftover in [&wal, &shm] {
        match fs::remove_file(leftover) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(Failure::new(
                    FAILED,
                    format!("cannot remove {}: {e}", leftover.display()),
                ))
            }
        }
    }
    fs::rename(&s.staged, &s.target)
        .map_err(|e| Failure::new(FAILED, format!("cannot rename {}: {e}", s.staged.display())))?;
    let dir = s.target.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    sync_dir(dir).map_err(|e| Failure::new(FAILED, format!("cannot sync {}: {e}", dir.display())))
}
