//! WAL checkpoints on the checkpointer thread: they happen while writes go
//! on, the WAL starts over once copied, nothing written is lost, and the
//! old behaviour (SQLite's checkpoints inside commits) stays available.

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};
use store::{SqliteConfig, SqliteStore};
use tokio::task::JoinSet;

fn config(path: &Path, background: bool) -> SqliteConfig {
    SqliteConfig {
        background_checkpoint: Some(background),
        checkpoint_pages: 16,
        ..SqliteConfig::new(path)
    }
}

/// 4000 rows of 1 KB from 8 concurrent writers: about 1000 pages of WAL.
async fn write_rows(store: &SqliteStore) {
    store
        .write(|tx| {
            tx.execute_batch("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v BLOB)")?;
            Ok(())
        })
        .await
        .expect("create table");
    let mut tasks = JoinSet::new();
    for w in 0..8 {
        let store = store.clone();
        tasks.spawn(async move {
            for n in 0..500 {
                let id = w * 500 + n;
                store
                    .write(move |tx| {
                        tx.execute("INSERT INTO t (id, v) VALUES (?1, zeroblob(1024))", [id])?;
                        Ok(())
                    })
                    .await
                    .expect("insert");
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.expect("writer task");
    }
}

/// Frames in the WAL as a separate connection sees them (a passive
/// checkpoint that finds nothing to copy reports the WAL's length).
fn wal_frames(path: &Path) -> i64 {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE).expect("open");
    let (_busy, log, _copied): (i64, i64, i64) = conn
        .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .expect("checkpoint");
    log
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checkpointer_copies_while_writes_go_on_and_the_wal_starts_over() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("c.db");
    let store = SqliteStore::open(config(&path, true)).await.expect("open");
    write_rows(&store).await;

    let stats = store.stats();
    assert!(stats.checkpoints >= 10, "checkpoint passes: {}", stats.checkpoints);
    assert_eq!(stats.failed_writes, 0);

    // Once writes stop, the WAL gets copied to its end (the checkpointer's
    // idle pass), so the next commit starts it over from the beginning.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        store
            .write(|tx| {
                tx.execute("INSERT OR REPLACE INTO t (id, v) VALUES (-1, x'00')", [])?;
                Ok(())
            })
            .await
            .expect("write");
        let frames = wal_frames(&path);
        if frames <= 16 {
            break;
        }
        assert!(Instant::now() < deadline, "the WAL never started over: {frames} frames");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    store.close().await.expect("close");
    let store = SqliteStore::open(config(&path, true)).await.expect("reopen");
    let rows: i64 = store
        .read(|c| Ok(c.query_row("SELECT count(*) FROM t WHERE id >= 0", [], |r| r.get(0))?))
        .await
        .expect("count");
    assert_eq!(rows, 4000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wal_stays_bounded_under_steady_writes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("b.db");
    let store = SqliteStore::open(config(&path, true)).await.expect("open");
    write_rows(&store).await;
    // 4000 rows of 1 KB wrote well over 1000 frames; had the WAL never
    // started over during the run, it would hold all of them.
    let wal = std::fs::metadata(dir.path().join("b.db-wal")).expect("wal").len();
    println!("WAL file {wal} bytes, {:?}", store.stats());
    assert!(wal < 900 * 4096, "WAL file of {wal} bytes");
    store.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_checkpointer_sqlite_checkpoints_in_the_commits() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("w.db");
    let store = SqliteStore::open(config(&path, false)).await.expect("open");
    write_rows(&store).await;
    let stats = store.stats();
    assert_eq!((stats.checkpoints, stats.writer_checkpoints), (0, 0));
    // SQLite's automatic checkpoint at 16 pages kept the WAL short.
    assert!(wal_frames(&path) < 200, "{} frames", wal_frames(&path));
    let rows: i64 = store
        .read(|c| Ok(c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))?))
        .await
        .expect("count");
    assert_eq!(rows, 4000);
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checkpointer_runs_at_low_priority() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SqliteStore::open(config(&dir.path().join("p.db"), true)).await.expect("open");
    // (policy, nice) of every checkpointer thread of this process.
    let priorities = || -> Vec<(i32, i64)> {
        std::fs::read_dir("/proc/self/task")
            .expect("tasks")
            .filter_map(|t| {
                let t = t.ok()?;
                let comm = std::fs::read_to_string(t.path().join("comm")).ok()?;
                if comm.trim() != "store-checkpoin" {
                    return None;
                }
                let tid: i32 = t.file_name().to_str()?.parse().ok()?;
                // Field 19 of stat, counted after the parenthesised name.
                let stat = std::fs::read_to_string(t.path().join("stat")).ok()?;
                let nice = stat.rsplit_once(')')?.1.split_whitespace().nth(16)?.parse().ok()?;
                // SAFETY: a query of another thread's policy by its id.
                Some((unsafe { libc::sched_getscheduler(tid) }, nice))
            })
            .collect()
    };
    // The thread lowers its own priority as it starts; other tests of this
    // binary may have checkpointers of their own, lowered as well.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let p = priorities();
        if !p.is_empty() && p.iter().all(|&p| p == (libc::SCHED_BATCH, 19)) {
            break;
        }
        assert!(Instant::now() < deadline, "checkpointer (policy, nice): {p:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    store.close().await.expect("close");
}

#[test]
fn checkpoint_pages_must_be_positive() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = SqliteConfig { checkpoint_pages: 0, ..SqliteConfig::new(dir.path().join("x.db")) };
    let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    let err = rt.block_on(SqliteStore::open(config)).expect_err("rejected");
    assert!(err.to_string().contains("checkpoint_pages"), "{err}");
}
