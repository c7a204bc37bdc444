//! Adaptive group commit (`commit_delay_us`): under concurrent load, writes that follow a commit
//! closely wait for the delay and share the next commit; an idle store and a lone caller commit
//! at once; nothing is acknowledged, nor visible to readers, before its commit; a failing job
//! still fails alone.

mod common;

use std::time::{Duration, Instant};

use common::{hold_writer, wait_for_queued_writes};
use store::{DocumentData, DocumentStore, Error, SqliteConfig, SqliteStore};
use tokio::task::JoinSet;

/// Long enough that the scheduling noise of a shared machine cannot blur the assertions.
const DELAY: Duration = Duration::from_secs(1);

async fn open_with_delay(dir: &tempfile::TempDir) -> SqliteStore {
    let config = SqliteConfig {
        commit_delay_us: Some(DELAY.as_micros() as u64),
        ..SqliteConfig::new(dir.path().join("d.db"))
    };
    SqliteStore::open(config).await.expect("store opens")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_to_an_idle_store_is_not_held_back() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = open_with_delay(&dir).await;
    let t = Instant::now();
    store.create("c", "first", DocumentData::new("x")).await.expect("write");
    assert!(t.elapsed() < DELAY / 2, "first write took {:?}", t.elapsed());

    // A lone caller's writes one after another: nobody would join them, so none waits.
    let t = Instant::now();
    for n in 0..3 {
        store.create("c", &format!("next-{n}"), DocumentData::new("x")).await.expect("write");
    }
    assert!(t.elapsed() < DELAY, "sequential writes took {:?}", t.elapsed());

    // After concurrent load, once idle for longer than the delay, a write commits at once.
    two_writes_in_one_batch(&store).await;
    tokio::time::sleep(DELAY + Duration::from_millis(100)).await;
    let t = Instant::now();
    store.create("c", "second", DocumentData::new("x")).await.expect("write");
    assert!(t.elapsed() < DELAY / 2, "write after idle took {:?}", t.elapsed());
}

/// Concurrent load: two writes committed together, which arms the delay for the next batch.
async fn two_writes_in_one_batch(store: &SqliteStore) {
    let (gate, holder) = hold_writer(store).await;
    let mut tasks = JoinSet::new();
    for n in 0..2 {
        let s = store.clone();
        tasks.spawn(async move { s.upsert("load", &n.to_string(), DocumentData::new("x")).await });
    }
    wait_for_queued_writes(store, 2).await;
    let before = store.stats().commits;
    drop(gate);
    holder.await.expect("holder");
    while let Some(r) = tasks.join_next().await {
        r.expect("task").expect("write");
    }
    assert_eq!(store.stats().commits - before, 2, "the holder, then both writes together");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_following_a_commit_wait_for_it_and_are_not_acknowledged_before_theirs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = open_with_delay(&dir).await;
    store.create("c", "taken", DocumentData::new("x")).await.expect("write");
    two_writes_in_one_batch(&store).await;
    let before = store.stats();

    // Right after that commit: these wait for the delay, then go in one transaction.
    let started = Instant::now();
    let mut tasks = JoinSet::new();
    for n in 0..20 {
        let s = store.clone();
        tasks
            .spawn(async move { s.create("c", &format!("doc-{n}"), DocumentData::new("x")).await });
    }
    let s = store.clone();
    // A failing job among them fails alone.
    let duplicate =
        tokio::spawn(async move { s.create("c", "taken", DocumentData::new("y")).await });

    tokio::time::sleep(DELAY / 5).await;
    assert!(!duplicate.is_finished(), "answered before the batch committed");
    assert_eq!(store.stats().writes, before.writes, "acknowledged before its commit");
    assert_eq!(store.get("c", "doc-0").await.expect("read"), None, "visible before its commit");

    while let Some(r) = tasks.join_next().await {
        r.expect("task").expect("write");
    }
    assert!(matches!(duplicate.await.expect("task"), Err(Error::AlreadyExists)));
    assert!(started.elapsed() >= DELAY / 2, "not held back: {:?}", started.elapsed());

    let stats = store.stats();
    assert_eq!(stats.commits - before.commits, 1, "one commit for the 21 jobs");
    assert_eq!(stats.writes - before.writes, 20);
    assert_eq!(stats.failed_writes - before.failed_writes, 1);
    assert_eq!(store.count("c").await.expect("count"), 21);
    assert_eq!(store.get("c", "taken").await.expect("read").expect("present").body, b"x");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_batch_is_not_held_back() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = SqliteConfig {
        commit_delay_us: Some(1_000_000),
        max_batch: 1,
        ..SqliteConfig::new(dir.path().join("f.db"))
    };
    let store = SqliteStore::open(config).await.expect("store opens");
    let t = Instant::now();
    // Each write fills its batch, so none waits for the delay after the previous commit.
    for n in 0..3 {
        store.create("c", &n.to_string(), DocumentData::new("x")).await.expect("write");
    }
    assert!(t.elapsed() < DELAY, "full batches were held back: {:?}", t.elapsed());
}
