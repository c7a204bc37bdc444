//! The SQLite engine: group commit, savepoint isolation, durability across
//! restarts, escape hatches, migrations and shutdown.

mod common;

use std::time::Duration;

use common::{hold_writer, open_at, open_temp, wait_for_queued_writes};
use store::{DocumentData, DocumentStore, Error, Migration, SqliteConfig, SqliteStore};
use tokio::task::JoinSet;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writes_share_commits() {
    let (_dir, store) = open_temp().await;
    let before = store.stats();
    let mut tasks = JoinSet::new();
    for n in 0..1000 {
        let store = store.clone();
        tasks.spawn(async move {
            store
                .create("c", &format!("doc-{n}"), DocumentData::new("x").index("n", n.to_string()))
                .await
        });
    }
    while let Some(result) = tasks.join_next().await {
        result.expect("task").expect("write");
    }
    let stats = store.stats();
    let commits = stats.commits - before.commits;
    assert_eq!(stats.writes - before.writes, 1000);
    // Each commit fsyncs; while it does, the next writes queue up and then
    // go in together. One commit per write would be 1000.
    assert!(commits <= 100, "{commits} commits for 1000 writes");
    println!("1000 concurrent writes: {commits} commits, largest batch {}", stats.largest_batch);
    assert!(stats.largest_batch > 1);
    assert_eq!(store.count("c").await.expect("count"), 1000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_writes_commit_in_batches_of_at_most_max_batch() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = SqliteConfig { max_batch: 100, ..SqliteConfig::new(dir.path().join("t.db")) };
    let store = SqliteStore::open(config).await.expect("open");
    let (gate, holder) = hold_writer(&store).await;
    let before = store.stats();

    let mut tasks = JoinSet::new();
    for n in 0..250 {
        let store = store.clone();
        tasks
            .spawn(async move { store.upsert("c", &format!("{n}"), DocumentData::new("x")).await });
    }
    wait_for_queued_writes(&store, 250).await;
    drop(gate);
    while let Some(result) = tasks.join_next().await {
        result.expect("task").expect("write");
    }
    holder.await.expect("holder");

    let stats = store.stats();
    // 100 + 100 + 50, plus the holding job's own commit.
    assert_eq!(stats.commits - before.commits, 4);
    assert_eq!(stats.largest_batch, 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_failing_job_is_rolled_back_with_its_transaction() {
    // One job per batch: no savepoint, the transaction is the unit undone.
    let (_dir, store) = open_temp().await;
    store.create("c", "kept", DocumentData::new("k")).await.expect("created");
    let before = store.stats();
    let failed = store
        .write(|tx| {
            tx.execute(
                "INSERT INTO documents (collection, id, version, created_at, updated_at, body)
                 VALUES ('c', 'partial', 1, 0, 0, x'00')",
                [],
            )?;
            tx.execute("DELETE FROM documents WHERE id = 'kept'", [])?;
            Err::<(), _>(Error::InvalidArgument("changed my mind".into()))
        })
        .await;
    assert!(matches!(failed, Err(Error::InvalidArgument(_))), "{failed:?}");
    let stats = store.stats();
    assert_eq!(stats.failed_writes - before.failed_writes, 1);
    assert_eq!((stats.commits, stats.writes), (before.commits, before.writes), "nothing committed");
    assert_eq!(stats.failed_batches, 0);
    assert_eq!(store.get("c", "partial").await.expect("get"), None);
    assert!(store.get("c", "kept").await.expect("get").is_some(), "its delete was undone");

    // The next lone write commits normally, and so does a duplicate's refusal.
    store.create("c", "after", DocumentData::new("a")).await.expect("created");
    let dup = store.create("c", "after", DocumentData::new("b")).await;
    assert!(matches!(dup, Err(Error::AlreadyExists)), "{dup:?}");
    let stats = store.stats();
    assert_eq!(stats.commits - before.commits, 1);
    assert_eq!(stats.writes - before.writes, 1);
    let after = store.get("c", "after").await.expect("get").expect("present");
    assert_eq!(after.body, b"a".to_vec());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_job_rolls_back_only_itself() {
    let (_dir, store) = open_temp().await;
    store.create("c", "versioned", DocumentData::new("v1")).await.expect("created");
    store.create("c", "taken", DocumentData::new("x")).await.expect("created");
    let (gate, holder) = hold_writer(&store).await;
    let before = store.stats();

    let s = store.clone();
    let ok_a = tokio::spawn(async move { s.create("c", "a", DocumentData::new("a")).await });
    let s = store.clone();
    // Changes something, then fails: its change must disappear.
    let partial = tokio::spawn(async move {
        s.write(|tx| {
            tx.execute(
                "INSERT INTO documents (collection, id, version, created_at, updated_at, body)
                 VALUES ('c', 'partial', 1, 0, 0, x'00')",
                [],
            )?;
            Err::<(), _>(Error::InvalidArgument("changed my mind".into()))
        })
        .await
    });
    let s = store.clone();
    let stale = tokio::spawn(async move {
        s.replace("c", "versioned", DocumentData::new("lost"), Some(9)).await
    });
    let s = store.clone();
    let duplicate =
        tokio::spawn(async move { s.create("c", "taken", DocumentData::new("y")).await });
    let s = store.clone();
    let ok_b = tokio::spawn(async move { s.create("c", "b", DocumentData::new("b")).await });

    wait_for_queued_writes(&store, 5).await;
    drop(gate);
    holder.await.expect("holder");

    ok_a.await.expect("task").expect("a committed");
    ok_b.await.expect("task").expect("b committed");
    assert!(matches!(partial.await.expect("task"), Err(Error::InvalidArgument(_))));
    assert!(matches!(stale.await.expect("task"), Err(Error::VersionMismatch { current: 1 })));
    assert!(matches!(duplicate.await.expect("task"), Err(Error::AlreadyExists)));

    let stats = store.stats();
    assert_eq!(stats.commits - before.commits, 2, "holder + one batch of five");
    assert_eq!(stats.writes - before.writes, 3, "holder, a and b");
    assert_eq!(stats.failed_writes - before.failed_writes, 3);
    assert_eq!(stats.failed_batches, 0);

    assert!(store.get("c", "a").await.expect("get").is_some());
    assert!(store.get("c", "b").await.expect("get").is_some());
    assert_eq!(store.get("c", "partial").await.expect("get"), None);
    let versioned = store.get("c", "versioned").await.expect("get").expect("present");
    assert_eq!((versioned.version, versioned.body), (1, b"v1".to_vec()));
    let taken = store.get("c", "taken").await.expect("get").expect("present");
    assert_eq!(taken.body, b"x");
}

#[tokio::test]
async fn data_survives_close_and_reopen() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("restart.db");
    {
        let store = open_at(&path).await;
        store
            .create("c", "kept", DocumentData::new("body").index("k", "v").expires_at(42))
            .await
            .expect("created");
        store
            .replace(
                "c",
                "kept",
                DocumentData::new("body2").index("k", "v").expires_at(42),
                Some(1),
            )
            .await
            .expect("replaced");
        store.create("c", "gone", DocumentData::new("x")).await.expect("created");
        store.delete("c", "gone", None).await.expect("deleted");
        store.close().await.expect("closed");
    }
    let store = open_at(&path).await;
    let kept = store.get("c", "kept").await.expect("get").expect("present");
    assert_eq!((kept.version, kept.body.as_slice()), (2, b"body2".as_slice()));
    assert_eq!(store.find("c", "k", "v", 10).await.expect("find").len(), 1);
    assert_eq!(store.scan_expired("c", 42, 10).await.expect("scan").len(), 1);
    assert_eq!(store.get("c", "gone").await.expect("get"), None);
    let next = store.upsert("c", "kept", DocumentData::new("body3")).await.expect("upsert");
    assert_eq!(next.document.version, 3, "versions continue after restart");
}

#[tokio::test]
async fn dropping_the_last_handle_still_commits_queued_writes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("drop.db");
    let store = open_at(&path).await;
    let (gate, holder) = hold_writer(&store).await;
    let s = store.clone();
    let write = tokio::spawn(async move { s.create("c", "queued", DocumentData::new("x")).await });
    wait_for_queued_writes(&store, 1).await;
    drop(store);
    drop(gate);
    write.await.expect("task").expect("committed though the store was dropped");
    holder.await.expect("holder");

    let store = open_at(&path).await;
    assert!(store.get("c", "queued").await.expect("get").is_some());
}

#[tokio::test]
async fn escape_hatches_run_nf_sql() {
    let (_dir, store) = open_temp().await;
    const NF: &[Migration] = &[
        Migration::new(
            "test-0001-sessions",
            "CREATE TABLE sessions (id TEXT PRIMARY KEY, ue TEXT NOT NULL);
             CREATE INDEX sessions_ue ON sessions (ue);",
        ),
        Migration::new("test-0002-column", "ALTER TABLE sessions ADD COLUMN dnn TEXT"),
    ];
    assert_eq!(store.migrate(NF.iter().copied()).await.expect("migrate"), 2);
    assert_eq!(store.migrate(NF.iter().copied()).await.expect("migrate"), 0, "idempotent");

    let inserted = store
        .write(|tx| {
            let n = tx.execute(
                "INSERT INTO sessions (id, ue, dnn) VALUES ('s1', 'imsi-1', 'internet'), ('s2', 'imsi-1', 'ims')",
                [],
            )?;
            Ok(n)
        })
        .await
        .expect("write");
    assert_eq!(inserted, 2);

    let dnns = store
        .read(|conn| {
            let mut stmt = conn.prepare("SELECT dnn FROM sessions WHERE ue = ?1 ORDER BY dnn")?;
            let rows = stmt.query_map(["imsi-1"], |row| row.get::<_, String>(0))?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        })
        .await
        .expect("read");
    assert_eq!(dnns, ["ims", "internet"]);
}

#[tokio::test]
async fn migrations_apply_all_or_nothing() {
    let (_dir, store) = open_temp().await;
    let broken = [
        Migration::new("test-0001-good", "CREATE TABLE good (x INTEGER)"),
        Migration::new("test-0002-bad", "CREATE TABLE oops ("),
    ];
    assert!(matches!(store.migrate(broken).await, Err(Error::Backend(_))));
    let good_exists = store
        .read(|conn| {
            let n: i64 = conn.query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE name = 'good'",
                [],
                |row| row.get(0),
            )?;
            Ok(n)
        })
        .await
        .expect("read");
    assert_eq!(good_exists, 0);
    let fixed = [
        Migration::new("test-0001-good", "CREATE TABLE good (x INTEGER)"),
        Migration::new("test-0002-bad", "CREATE TABLE oops (y INTEGER)"),
    ];
    assert_eq!(store.migrate(fixed).await.expect("migrate"), 2);
}

#[tokio::test]
async fn readers_cannot_write() {
    let (_dir, store) = open_temp().await;
    let result = store
        .read(|conn| {
            conn.execute("CREATE TABLE sneaky (x INTEGER)", [])?;
            Ok(())
        })
        .await;
    assert!(matches!(result, Err(Error::Backend(_))), "{result:?}");
}

#[tokio::test]
async fn a_panicking_job_fails_alone_and_the_store_keeps_working() {
    let (_dir, store) = open_temp().await;
    let write = store.write(|_| -> store::Result<()> { panic!("bug in NF code") }).await;
    assert!(matches!(write, Err(Error::Backend(_))), "{write:?}");
    let read = store.read(|_| -> store::Result<()> { panic!("bug in NF code") }).await;
    assert!(matches!(read, Err(Error::Backend(_))), "{read:?}");
    store.create("c", "after", DocumentData::new("x")).await.expect("writer alive");
    assert!(store.get("c", "after").await.expect("reader alive").is_some());
}

#[tokio::test]
async fn reads_see_each_acknowledged_write() {
    let (_dir, store) = open_temp().await;
    for version in 1..=50u64 {
        let doc =
            store.upsert("c", "x", DocumentData::new(version.to_string())).await.expect("upsert");
        assert_eq!(doc.document.version, version);
        let seen = store.get("c", "x").await.expect("get").expect("present");
        assert_eq!(seen.version, version);
    }
    assert!(store.stats().reads >= 50);
}

#[tokio::test]
async fn closed_store_refuses_work() {
    let (_dir, store) = open_temp().await;
    let other = store.clone();
    store.close().await.expect("closed");
    assert!(matches!(other.create("c", "x", DocumentData::new("x")).await, Err(Error::Closed)));
    assert!(matches!(other.get("c", "x").await, Err(Error::Closed)));
    // Closing twice is harmless.
    other.close().await.expect("closed again");
}

#[tokio::test]
async fn open_rejects_bad_config_and_unusable_paths() {
    let zero_readers = SqliteConfig { readers: 0, ..SqliteConfig::new("/tmp/never-created.db") };
    assert!(matches!(SqliteStore::open(zero_readers).await, Err(Error::InvalidArgument(_))));
    let missing_dir = SqliteConfig::new("/nonexistent-dir/for/sure/x.db");
    assert!(matches!(SqliteStore::open(missing_dir).await, Err(Error::Backend(_))));
}

#[tokio::test]
async fn the_database_is_in_wal_mode_with_the_configured_sync() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = SqliteConfig {
        synchronous: store::Synchronous::Normal,
        ..SqliteConfig::new(dir.path().join("w.db"))
    };
    let store = SqliteStore::open(config).await.expect("open");
    let (mode, sync) = store
        .write(|tx| {
            let mode: String = tx.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
            let sync: i64 = tx.query_row("PRAGMA synchronous", [], |r| r.get(0))?;
            Ok((mode, sync))
        })
        .await
        .expect("pragmas");
    assert_eq!(mode, "wal");
    assert_eq!(sync, 1, "NORMAL");
    assert!(dir.path().join("w.db-wal").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_reads_are_skipped() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = SqliteConfig { readers: 1, ..SqliteConfig::new(dir.path().join("r.db")) };
    let store = SqliteStore::open(config).await.expect("open");

    // Occupy the only reader until the gate drops.
    let (held_tx, held_rx) = tokio::sync::oneshot::channel();
    let (gate, gate_rx) = std::sync::mpsc::channel::<()>();
    let s = store.clone();
    let holder = tokio::spawn(async move {
        s.read(move |_| {
            let _ = held_tx.send(());
            let _ = gate_rx.recv();
            Ok(())
        })
        .await
    });
    held_rx.await.expect("reader held");

    // A caller that gives up (a timeout) while its read is queued...
    let queued = store.get("c", "x");
    assert!(tokio::time::timeout(Duration::from_millis(20), queued).await.is_err());
    assert_eq!(store.stats().queued_reads, 1);
    drop(gate);
    holder.await.expect("task").expect("holder read");

    // ...costs nothing: only the holder and this read ever ran.
    store.get("c", "x").await.expect("store still serves reads");
    assert_eq!(store.stats().reads, 2);
}

/// Statistics from ANALYZE (what `PRAGMA optimize` gathers when a store closes) must not make
/// cached statements whose plan could depend on a bound value (a prefix of a key, a range) parse
/// again at every use, on the readers or on the writer.
#[tokio::test]
async fn cached_statements_are_not_reprepared_after_analyze() {
    use rusqlite::StatementStatus;
    let (_dir, store) = open_temp().await;
    store
        .migrate([Migration::new(
            "t-kv",
            "CREATE TABLE t_kv (a TEXT NOT NULL, b TEXT NOT NULL, v INTEGER NOT NULL,
                PRIMARY KEY (a, b))",
        )])
        .await
        .expect("migrate");
    store
        .write(|tx| {
            let mut st = tx.prepare("INSERT INTO t_kv (a, b, v) VALUES (?1, ?2, ?3)")?;
            for n in 0..2000 {
                st.execute(rusqlite::params![format!("k{}", n % 7), format!("{n}"), n])?;
            }
            tx.execute_batch("ANALYZE")?;
            Ok(())
        })
        .await
        .expect("load");
    const QUERIES: [&str; 2] = [
        "SELECT count(*) FROM t_kv WHERE a = ?1",
        "SELECT count(*) FROM (SELECT v FROM t_kv WHERE rowid > ?1 ORDER BY rowid LIMIT ?2)",
    ];
    let lookups = |c: &rusqlite::Connection| -> store::Result<Vec<i32>> {
        let mut reprepared = Vec::new();
        for sql in QUERIES {
            for n in 0..20 {
                let mut st = c.prepare_cached(sql)?;
                let count: i64 = match sql.contains("a = ") {
                    true => st.query_row([format!("k{}", n % 7)], |r| r.get(0))?,
                    false => st.query_row([n * 100, 10], |r| r.get(0))?,
                };
                assert!(count > 0);
            }
            reprepared.push(c.prepare_cached(sql)?.get_status(StatementStatus::RePrepare));
        }
        Ok(reprepared)
    };
    let read = store.read(move |c| lookups(c)).await.expect("read");
    let written = store.write(move |tx| lookups(tx)).await.expect("write");
    assert_eq!((read, written), (vec![0, 0], vec![0, 0]), "re-prepared (reader, writer)");
}
