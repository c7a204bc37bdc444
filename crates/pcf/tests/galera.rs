//! The PCF's store on a real three-node MariaDB Galera cluster (started once for this binary by
//! testkit; skipped without MariaDB unless FIVECORE_REQUIRE_MARIADB=1): the one-instance lease
//! holds across nodes (a named lock would not: Galera does not replicate it), and a node killed
//! with SIGKILL while SM associations are created through it costs no acknowledged association
//! nor the state variables committed with it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pcf::store::mysql::owner::{Ownership, TakeError};
use pcf::store::{MysqlPcfStore, PcfStore, SmPolicy};
use serde_json::json;
use store::{Error, MysqlConfig, MysqlStore};

async fn open(urls: &[&String]) -> MysqlPcfStore {
    let mut config = MysqlConfig::new(urls.iter().map(|u| u.to_string()));
    config.causal_reads = true;
    let db = MysqlStore::open(config).await.expect("store opens");
    MysqlPcfStore::on(db).await.expect("the PCF's schema is applied")
}

fn session(id: &str, supi: &str) -> SmPolicy {
    SmPolicy {
        id: id.into(),
        supi: supi.into(),
        context: br#"{"dnn":"internet"}"#.to_vec(),
        decision: br#"{"sessRules":{}}"#.to_vec(),
        policy_version: "1.0.0".into(),
        updated_ms: 1,
        binding: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_instance_across_nodes_and_a_killed_node_loses_no_acknowledged_session() {
    let Some(cluster) = tokio::task::spawn_blocking(testkit::mariadb::cluster).await.unwrap()
    else {
        return;
    };
    let urls = cluster.database("pcf_galera");

    // The lease taken through node 1 is seen through node 2: a second instance there is refused.
    let (one, two) = (open(&[&urls[0]]).await, open(&[&urls[1]]).await);
    let lease = Duration::from_millis(1500);
    let held = Ownership::take(one.db().clone(), lease).await.expect("node 1 takes it");
    match Ownership::take(two.db().clone(), lease).await {
        Err(TakeError::Held { .. }) => {}
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("two instances hold one database through two Galera nodes"),
    }
    held.release().await;
    let taken = Ownership::take(two.db().clone(), lease).await.expect("released: node 2 takes it");
    taken.release().await;
    one.db().close().await;
    two.db().close().await;

    // Writers create SM associations with a state variable through node 3, which is killed.
    let store = open(&[&urls[2], &urls[0], &urls[1]]).await;
    let stop = Arc::new(AtomicBool::new(false));
    let acks = Arc::new(AtomicU64::new(0));
    let mut writers = Vec::new();
    for w in 0..4 {
        let (store, stop, acks) = (store.clone(), stop.clone(), acks.clone());
        writers.push(tokio::spawn(async move {
            let (mut acked, mut unknown) = (Vec::new(), 0u32);
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let (id, supi) = (format!("w{w}-{n:06}"), format!("imsi-00101{w}{n:09}"));
                n += 1;
                let ssv = [("n".to_string(), json!(n))].into_iter().collect();
                match store
                    .create_sm(session(&id, &supi), ssv, Some(format!("http://udr/{n}")))
                    .await
                {
                    Ok(()) => {
                        acked.push((id, supi, n, Instant::now()));
                        acks.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(Error::CommitUnknown) => unknown += 1,
                    Err(e) => panic!("create {id}: {e}"),
                }
            }
            (acked, unknown)
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let killed_at = Instant::now();
    let before = acks.load(Ordering::Relaxed);
    cluster.nodes[2].kill();
    let deadline = Instant::now() + Duration::from_secs(30);
    while acks.load(Ordering::Relaxed) < before + 100 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, Ordering::Relaxed);
    let (mut acked, mut unknown) = (Vec::new(), 0);
    for w in writers {
        let (a, u) = w.await.expect("writer");
        acked.extend(a);
        unknown += u;
    }
    let stats = store.db().stats();
    assert!(stats.failovers >= 1, "{stats:?}");
    let after = acked.iter().filter(|a| a.3 > killed_at).count();
    assert!(after >= 100, "{after} sessions acknowledged after the kill ({} in all)", acked.len());

    // Every acknowledged session is there through another node, with what it committed.
    let check = open(&[&urls[1]]).await;
    for (id, supi, n, _) in &acked {
        let (p, kept) = check.get_sm_with_subscriber(id).await.expect("read").expect(id);
        assert_eq!(&p.supi, supi);
        assert_eq!(kept.ssv["n"], json!(n), "{id}'s state variable");
        assert_eq!(kept.udr_subscription, Some(format!("http://udr/{n}")));
    }
    let stored = check.count_sm().await.expect("count");
    let acked_n = acked.len() as u64;
    assert!(
        stored >= acked_n && stored <= acked_n + u64::from(unknown),
        "{stored} stored, {acked_n} acknowledged, {unknown} unknown"
    );
    eprintln!(
        "{acked_n} sessions acknowledged ({after} after the kill), {unknown} unknown outcomes, \
         {stats:?}"
    );
    store.db().close().await;
    check.db().close().await;
}
