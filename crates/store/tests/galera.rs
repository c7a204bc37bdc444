//! The MySQL backend on a real three-node MariaDB Galera cluster (started once for this binary
//! by testkit; skipped without MariaDB unless FIVECORE_REQUIRE_MARIADB=1): writes through one
//! node are read at another, a conflict between two nodes ends as a version mismatch, a node
//! refusing work is failed over, and a node killed with SIGKILL while writes go on costs no
//! acknowledged write.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use store::{DocumentData, DocumentStore, Error, MysqlConfig, MysqlStore};
use testkit::mariadb::Cluster;

async fn cluster() -> Option<&'static Cluster> {
    tokio::task::spawn_blocking(testkit::mariadb::cluster).await.expect("start")
}

async fn open(urls: &[&String], causal_reads: bool) -> MysqlStore {
    let mut config = MysqlConfig::new(urls.iter().map(|u| u.to_string()));
    config.causal_reads = causal_reads;
    MysqlStore::open(config).await.expect("store opens")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_through_one_node_is_read_at_another() {
    let Some(cluster) = cluster().await else { return };
    let urls = cluster.database("galera_read");
    let (one, two) = (open(&[&urls[0]], false).await, open(&[&urls[1]], true).await);

    let created = one
        .create("c", "doc", DocumentData::new("v1").index("k", "v").expires_at(9))
        .await
        .expect("created at node 1");
    let seen = two.get("c", "doc").await.expect("get at node 2").expect("replicated");
    assert_eq!(seen, created);
    assert_eq!(two.find("c", "k", "v", 10).await.expect("find").len(), 1);

    // Two conditional writes of version 1 through two nodes: one wins, the other (refused by
    // Galera's certification or by the row it re-reads) sees the winner's version.
    let (a, b) = tokio::join!(
        one.replace("c", "doc", DocumentData::new("from 1"), Some(1)),
        two.replace("c", "doc", DocumentData::new("from 2"), Some(1)),
    );
    let outcomes = [&a, &b];
    assert_eq!(outcomes.iter().filter(|r| r.is_ok()).count(), 1, "{a:?} {b:?}");
    let lost = outcomes.iter().find_map(|r| r.as_ref().err()).expect("one lost");
    assert!(matches!(lost, Error::VersionMismatch { current: 2 }), "{lost:?}");
    let winner = outcomes.iter().find_map(|r| r.as_ref().ok()).expect("one won");
    let now = one.get("c", "doc").await.expect("get").expect("present");
    assert_eq!((now.version, &now.body), (2, &winner.body));
    one.close().await;
    two.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_during_writes_loses_no_acknowledged_write() {
    let Some(cluster) = cluster().await else { return };
    let urls = cluster.database("galera_kill");
    // The writers start on the third node, the one killed.
    let store = open(&[&urls[2], &urls[0], &urls[1]], false).await;
    assert_eq!(store.current_node(), 0);

    let stop = Arc::new(AtomicBool::new(false));
    let acks = Arc::new(AtomicU64::new(0));
    let mut writers = Vec::new();
    for w in 0..4 {
        let (store, stop, acks) = (store.clone(), stop.clone(), acks.clone());
        writers.push(tokio::spawn(async move {
            let (mut acked, mut unknown) = (Vec::new(), 0u32);
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let id = format!("w{w}-{n:06}");
                n += 1;
                let data = DocumentData::new(id.clone()).index("writer", w.to_string());
                match store.create("acked", &id, data).await {
                    Ok(doc) => {
                        acked.push((doc.id, Instant::now()));
                        acks.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(Error::CommitUnknown) => unknown += 1,
                    Err(e) => panic!("write {id}: {e}"),
                }
            }
            (acked, unknown)
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let killed_at = Instant::now();
    let before = acks.load(Ordering::Relaxed);
    cluster.nodes[2].kill();
    // Writes go on through the surviving nodes until a good number are acknowledged there.
    let deadline = Instant::now() + Duration::from_secs(30);
    while acks.load(Ordering::Relaxed) < before + 200 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let resumed_in = killed_at.elapsed();
    stop.store(true, Ordering::Relaxed);
    let mut acked = Vec::new();
    let mut unknown = 0;
    for w in writers {
        let (a, u) = w.await.expect("writer");
        acked.extend(a);
        unknown += u;
    }
    let stats = store.stats();
    assert!(stats.failovers >= 1, "{stats:?}");
    assert_ne!(store.current_node(), 0, "moved off the killed node");
    let after = acked.iter().filter(|(_, at)| *at > killed_at).count();
    assert!(after >= 200, "{after} writes acknowledged after the kill ({} in all)", acked.len());

    // Every acknowledged write is there, read through another node.
    let check = open(&[&urls[1]], true).await;
    for (id, _) in &acked {
        let doc = check.get("acked", id).await.expect("get");
        assert!(doc.is_some(), "acknowledged {id} lost");
    }
    let stored = check.count("acked").await.expect("count");
    assert!(
        stored >= acked.len() as u64 && stored <= acked.len() as u64 + u64::from(unknown),
        "{stored} stored, {} acknowledged, {unknown} unknown",
        acked.len()
    );
    eprintln!(
        "{} writes acknowledged ({after} after the kill, 200 of them within {resumed_in:?}), \
         {unknown} unknown outcomes, {stats:?}",
        acked.len()
    );
    store.close().await;
    check.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_refusing_work_is_failed_over() {
    let Some(cluster) = cluster().await else { return };
    let urls = cluster.database("galera_refuse");
    let store = open(&[&urls[1], &urls[0]], false).await;
    store.create("c", "before", DocumentData::new("x")).await.expect("through node 2");
    assert_eq!(store.current_node(), 0);

    // Node 2 stays in the cluster but answers every query with 1047 ("WSREP has not yet
    // prepared node for application use"), as a node outside the primary component does.
    let node2 = &cluster.nodes[1];
    node2.client("SET GLOBAL wsrep_reject_queries = ALL").expect("reject queries");
    let written = store.create("c", "during", DocumentData::new("y")).await;
    node2.client("SET GLOBAL wsrep_reject_queries = NONE").expect("accept queries");
    written.expect("written through node 1");
    assert_eq!(store.current_node(), 1, "moved to node 1");
    assert_eq!(store.stats().failovers, 1);
    assert_eq!(store.count("c").await.expect("count"), 2);
    store.close().await;
}
