//! Online backup of a store's database file, from a process other than the NF's.
//!
//! SQLite's backup API copies pages a few at a time; between two steps the NF keeps
//! committing. A step that finds the source changed by another connection starts the copy over,
//! so under a steady stream of writes a paced backup of a large store would never end. Here the
//! source connection opens a read transaction first and keeps it until the last page: in WAL
//! mode that pins one snapshot (the last commit before the backup began) for the whole copy,
//! without blocking the NF's writer (readers never block the writer in WAL mode; the WAL grows
//! meanwhile, as the NF's checkpoints cannot copy frames the snapshot still needs, and starts
//! over at the next checkpoint after). The pause between steps leaves the disk and the CPU to
//! the NF.
//!
//! The copy is then made a self-contained file (rollback journal mode: no `-wal` beside it,
//! readable anywhere), synced, and checked with `PRAGMA integrity_check` on a new connection.

use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags};

use crate::error::{Error, Result};

/// How fast a backup copies: `pages` per step, then a pause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pace {
    pub pages: u32,
    pub pause: Duration,
}

impl Default for Pace {
    /// 4 MiB at a time (1024 pages of 4 KiB), then 10 ms: a 400 MB store in about 2 s of
    /// pauses, the copy itself a few milliseconds a step.
    fn default() -> Self {
        Pace { pages: 1024, pause: Duration::from_millis(10) }
    }
}

/// What one backup copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copied {
    /// Pages of the snapshot (the copy's size is `pages * page_size`).
    pub pages: u64,
    pub page_size: u64,
    /// Backup steps taken (at least one).
    pub steps: u64,
    /// The migrations applied to the copy, oldest first: its schema version.
    pub migrations: Vec<String>,
    /// From the snapshot's start to the last page copied.
    pub copy_time: Duration,
}

/// How long the backup waits for a lock held by the writer (a checkpoint resetting the WAL
/// can hold the source briefly).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Copies the database at `src`, which an NF may be writing meanwhile, into the new file `dst`
/// (which must not exist), as of one commit; `dst` is synced and checked before this returns.
/// Blocking: run it on a thread of its own.
pub fn backup(src: &Path, dst: &Path, pace: Pace) -> Result<Copied> {
    if dst.exists() {
        return Err(Error::InvalidArgument(format!("{} exists already", dst.display())));
    }
    let source = Connection::open_with_flags(
        src,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| open_error(src, e))?;
    source.busy_timeout(BUSY_TIMEOUT)?;
    let started = Instant::now();
    // The read transaction starts at the first read; everything below sees its snapshot.
    source.execute_batch("BEGIN")?;
    let migrations = migrations_on(&source)?;
    let mut dest = Connection::open(dst)?;
    let (pages, steps) = {
        let copy = Backup::new(&source, &mut dest)?;
        let pages = i32::try_from(pace.pages.max(1)).unwrap_or(i32::MAX);
        let mut steps = 0u64;
        loop {
            steps += 1;
            // More, or Busy/Locked (the writer resetting the WAL): pause, then go on.
            match copy.step(pages)? {
                StepResult::Done => break,
                _ => thread::sleep(pace.pause),
            }
        }
        let p = copy.progress();
        (u64::try_from(p.pagecount).unwrap_or(0), steps)
    };
    source.execute_batch("COMMIT")?;
    drop(source);
    let copy_time = started.elapsed();
    let page_size: u64 = dest.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    // The copy carries the source's WAL flag; the backup is one file, so back to a rollback
    // journal (the NF's writer turns WAL on again when it opens a restored store).
    let mode: String =
        dest.pragma_update_and_check(None, "journal_mode", "DELETE", |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("delete") {
        return Err(Error::backend_msg(format!(
            "cannot make {} a single file (journal mode {mode})",
            dst.display()
        )));
    }
    dest.close().map_err(|(_, e)| Error::from(e))?;
    std::fs::File::open(dst)
        .and_then(|f| f.sync_all())
        .map_err(|e| Error::backend_msg(format!("cannot sync {}: {e}", dst.display())))?;
    integrity_check(dst)?;
    Ok(Copied { pages, page_size, steps, migrations, copy_time })
}

/// `PRAGMA integrity_check` of the database file at `path` (a backup, not a live store):
/// `Ok` when SQLite finds nothing wrong, else an error listing the first problems.
pub fn integrity_check(path: &Path) -> Result<()> {
    let conn = open_file(path)?;
    let mut stmt = conn.prepare("PRAGMA integrity_check(20)")?;
    let rows: Vec<String> = stmt.query_map([], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
    if rows.len() == 1 && rows[0] == "ok" {
        return Ok(());
    }
    Err(Error::backend_msg(format!(
        "{} fails SQLite's integrity check: {}",
        path.display(),
        rows.join("; ")
    )))
}

/// Copies what the WAL beside the database at `path` holds into the file itself, so the file
/// alone is the whole store (after an NF killed with SIGKILL, its last commits are only in the
/// WAL). For a store no process has open: `fivecore restore` does it before it replaces the
/// file, as a WAL left beside the new file would be applied to it.
pub fn fold_wal(path: &Path) -> Result<()> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| open_error(path, e))?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    let (busy, log, copied): (i64, i64, i64) =
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?;
    if busy != 0 || copied < log {
        return Err(Error::backend_msg(format!(
            "cannot fold the WAL of {} into it ({copied} of {log} frames copied)",
            path.display()
        )));
    }
    conn.close().map_err(|(_, e)| Error::from(e))
}

/// The migrations recorded in the database file at `path` (a backup), oldest first.
pub fn migrations(path: &Path) -> Result<Vec<String>> {
    migrations_on(&open_file(path)?)
}

fn migrations_on(conn: &Connection) -> Result<Vec<String>> {
    let known = conn
        .prepare("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'store_migrations'")?
        .exists([])?;
    if !known {
        return Ok(Vec::new());
    }
    let mut stmt = conn.prepare("SELECT id FROM store_migrations ORDER BY applied_at, rowid")?;
    let ids = stmt.query_map([], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
    Ok(ids)
}

/// A read-only connection to a file no NF has open; a file that is not a database is an
/// error here rather than at the first query.
fn open_file(path: &Path) -> Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| open_error(path, e))?;
    conn.query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get::<_, i64>(0)).map_err(
        |e| Error::backend_msg(format!("{} is not a usable database: {e}", path.display())),
    )?;
    Ok(conn)
}

fn open_error(path: &Path, e: rusqlite::Error) -> Error {
    Error::backend_msg(format!("cannot open {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_is_one_checked_file_with_the_migrations_of_the_source() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("s.db");
        let conn = Connection::open(&src).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.execute_batch(
            "CREATE TABLE store_migrations (id TEXT PRIMARY KEY, applied_at INTEGER);
             INSERT INTO store_migrations VALUES ('a-0001', 1), ('a-0002', 2);
             CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB);
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
             INSERT INTO t SELECT i, randomblob(300) FROM n;",
        )
        .unwrap();
        let dst = dir.path().join("copy.db");
        let pace = Pace { pages: 7, pause: Duration::ZERO };
        let copied = backup(&src, &dst, pace).unwrap();
        assert!(copied.steps > 10, "{copied:?}");
        assert_eq!(copied.migrations, ["a-0001", "a-0002"]);
        assert_eq!(migrations(&dst).unwrap(), ["a-0001", "a-0002"]);
        assert!(!dir.path().join("copy.db-wal").exists());
        let size = std::fs::metadata(&dst).unwrap().len();
        assert_eq!(size, copied.pages * copied.page_size);
        let n: i64 = Connection::open(&dst)
            .unwrap()
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 2000);
        assert!(backup(&src, &dst, pace).unwrap_err().to_string().contains("exists already"));

        // Cut short, the copy is no database any more.
        let f = std::fs::OpenOptions::new().write(true).open(&dst).unwrap();
        f.set_len(size / 2).unwrap();
        assert!(integrity_check(&dst).is_err());
        std::fs::write(&dst, b"not a database at all").unwrap();
        let e = integrity_check(&dst).unwrap_err().to_string();
        assert!(e.contains("not a usable database"), "{e}");
    }
}
