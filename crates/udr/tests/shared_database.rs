//! Two UDR instances on one MariaDB database, and on two nodes of a Galera cluster (issue #25, docs/store.md "Several instances on one
//! database", docs/udr.md): an SLF entry provisioned, changed and removed at A is answered by
//! B's in-memory identity index within the feed's bound (and the other way round), while the
//! writer reads its own write at once; policy data written at A notifies exactly once a
//! subscriber that subscribed at B; and a UDR process killed with SIGKILL right after acknowledged writes loses
//! none of them: the other instance serves them all.
//!
//! MariaDB is started once per test binary by testkit; skipped without it unless
//! FIVECORE_REQUIRE_MARIADB=1.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use http::Method;
use serde_json::{json, Value};
use testkit::sink::Sink;
use udr::UdrConfig;

/// The bound a change must reach the other instance within: the target is 100 ms (measured by
/// `cargo bench -p fivecore-udr --bench coherence`), with room for a busy CI machine.
const DEADLINE: Duration = Duration::from_millis(500);
const T: Duration = Duration::from_secs(10);

/// The tests of this file take turns: each times how fast a change reaches another instance,
/// which another test's servers (a Galera cluster starting, a child UDR) would slow down.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Set in the child's environment to the database URL.
const CHILD_ENV: &str = "FIVECORE_UDR_SHARED_DB_CHILD";
const CHILD_TEST: &str = "child_udr_serves_until_killed";

fn lookup_url(udr: &TestUdr, id: &str) -> String {
    udr.url(&format!("/nudr-group-id-map/v1/nf-group-ids?nf-type=UDM&subscriberId={id}"))
}

async fn lookup(c: &sbi::client::SbiClient, udr: &TestUdr, id: &str) -> (u16, Value) {
    let r = get(c, &lookup_url(udr, id)).await;
    (r.status().as_u16(), body(&r))
}

/// Waits until `udr` answers `want` for `id`; how long it took.
async fn answered_within(udr: &TestUdr, id: &str, want: (u16, Value)) -> Duration {
    let c = client();
    let start = Instant::now();
    loop {
        let got = lookup(&c, udr, id).await;
        if got.0 == want.0 && (want.0 != 200 || got.1 == want.1) {
            return start.elapsed();
        }
        assert!(start.elapsed() < DEADLINE, "{id}: {want:?} not within {DEADLINE:?} (got {got:?})");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Waits until `udr`'s SLF index is loaded: from then on its lookups are answered from memory,
/// so another instance's write is seen only through the change feed.
async fn index_loaded(udr: &TestUdr) {
    let start = Instant::now();
    while udr.udr.slf.index_size().is_none() {
        assert!(start.elapsed() < T, "the SLF index loads");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Two instances on one MariaDB server's database (`None`: no MariaDB, the test is skipped).
async fn two_udrs(config: UdrConfig) -> Option<(Vec<tempfile::TempDir>, TestUdr, TestUdr)> {
    if !testkit::backends::use_mariadb() {
        return None;
    }
    let dir = common::state_dir();
    let (a, b) = start_pair(dir.path(), dir.path(), config).await;
    Some((vec![dir], a, b))
}

/// Two instances on two nodes of the three-node Galera cluster.
async fn two_udrs_on_galera(
    config: UdrConfig,
) -> Option<(Vec<tempfile::TempDir>, TestUdr, TestUdr)> {
    let cluster = tokio::task::spawn_blocking(testkit::mariadb::cluster).await.unwrap()?;
    let urls = cluster.database("udr_coherence");
    let dirs: Vec<tempfile::TempDir> = urls[..2]
        .iter()
        .map(|url| {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("mysql-url"), url).unwrap();
            dir
        })
        .collect();
    let (a, b) = start_pair(dirs[0].path(), dirs[1].path(), config).await;
    Some((dirs, a, b))
}

async fn start_pair(
    dir_a: &std::path::Path,
    dir_b: &std::path::Path,
    config: UdrConfig,
) -> (TestUdr, TestUdr) {
    let a = TestUdr::start_as(dir_a, config.clone(), Some(uuid::Uuid::new_v4().to_string())).await;
    let b = TestUdr::start_as(dir_b, config, Some(uuid::Uuid::new_v4().to_string())).await;
    index_loaded(&a).await;
    index_loaded(&b).await;
    (a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_slf_entry_written_at_one_instance_is_served_by_the_others_index() {
    let _turn = SERIAL.lock().await;
    let Some((_dirs, a, b)) = two_udrs(UdrConfig::default()).await else { return };
    slf_entries_at_one_are_served_by_the_other(&a, &b).await;
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn galera_changes_at_one_node_are_served_and_notified_at_another() {
    let _turn = SERIAL.lock().await;
    let Some((_dirs, a, b)) = two_udrs_on_galera(notify_config()).await else { return };
    slf_entries_at_one_are_served_by_the_other(&a, &b).await;
    policy_data_at_one_notifies_a_subscriber_of_the_other_once(&a, &b).await;
    a.stop().await;
    b.stop().await;
}

async fn slf_entries_at_one_are_served_by_the_other(a: &TestUdr, b: &TestUdr) {
    let c = client();
    let mut seen = Vec::new();
    for (i, (writer, reader)) in [(a, b), (b, a)].into_iter().enumerate() {
        let imsi = format!("imsi-00101000000010{i}");
        let gpsi = format!("msisdn-336000001{i:02}");
        let entry = json!({"subscriberIds": [imsi, gpsi], "nfGroupIds": {"UDM": "udm-1"}});
        let r = send_json(&c, Method::POST, &writer.url("/udr-prov/v1/slf-entries"), Some(&entry))
            .await;
        assert_eq!(r.status(), 201, "{:?}", body(&r));
        // The writer reads its own write at once.
        assert_eq!(lookup(&c, writer, &imsi).await, (200, json!({"UDM": "udm-1"})));
        seen.push(answered_within(reader, &imsi, (200, json!({"UDM": "udm-1"}))).await);
        seen.push(answered_within(reader, &gpsi, (200, json!({"UDM": "udm-1"}))).await);

        // A change of group (a group set the reader has not seen yet) and a dropped identity.
        let url = writer.url(&format!("/udr-prov/v1/slf-entries/{imsi}"));
        let new = json!({"subscriberIds": [imsi], "nfGroupIds": {"UDM": format!("udm-x{i}")}});
        let r = send_json(&c, Method::PUT, &url, Some(&new)).await;
        assert!(r.status().is_success(), "{}: {:?}", r.status(), body(&r));
        assert_eq!(lookup(&c, writer, &gpsi).await.0, 404);
        let want = json!({"UDM": format!("udm-x{i}")});
        seen.push(answered_within(reader, &imsi, (200, want)).await);
        seen.push(answered_within(reader, &gpsi, (404, Value::Null)).await);

        assert_eq!(delete(&c, &url).await.status(), 204);
        assert_eq!(lookup(&c, writer, &imsi).await.0, 404);
        seen.push(answered_within(reader, &imsi, (404, Value::Null)).await);
    }
    println!("SLF changes seen by the other instance after {seen:?}");
}

fn n36(path: &str) -> String {
    format!("/nudr-dr/v2/policy-data/{path}")
}

fn sm_data(volume: u64) -> Value {
    json!({"smPolicySnssaiData": {"1": {"snssai": {"sst": 1},
        "smPolicyDnnData": {"internet": {"dnn": "internet"}}}},
        "umData": {"lim1": {"limitId": "lim1", "allowedUsage": {"totalVolume": volume}}}})
}

fn volumes(notification_body: &Value) -> Vec<u64> {
    let items = notification_body.as_array().expect("an array of notifications");
    items
        .iter()
        .map(|n| {
            assert_valid("TS29519_Policy_Data", "PolicyDataChangeNotification", n);
            n["smPolicyData"]["umData"]["lim1"]["allowedUsage"]["totalVolume"]
                .as_u64()
                .expect("the new volume")
        })
        .collect()
}

async fn wait_for(what: &str, cond: impl Fn() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < DEADLINE, "{what}: not within {DEADLINE:?}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn notify_config() -> UdrConfig {
    let mut config = policy_config();
    config.policy.notify.batch_size = 1;
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_data_written_at_one_instance_notifies_a_subscriber_of_the_other_once() {
    let _turn = SERIAL.lock().await;
    let Some((_dirs, a, b)) = two_udrs(notify_config()).await else { return };
    policy_data_at_one_notifies_a_subscriber_of_the_other_once(&a, &b).await;
    a.stop().await;
    b.stop().await;
}

async fn policy_data_at_one_notifies_a_subscriber_of_the_other_once(a: &TestUdr, b: &TestUdr) {
    let c = client();
    let mut sink = Sink::start().await;
    let ue = "imsi-001010000000201";
    let at_b = b.url(&n36(&format!("ues/{ue}/sm-data")));
    let r = post_json(
        &c,
        &b.url(&n36("subs-to-notify")),
        &json!({"notificationUri": sink.url, "monitoredResourceUris": [at_b]}),
    )
    .await;
    assert_eq!(r.status(), 201, "{:?}", body(&r));
    let sub = r.header("location").unwrap().to_owned();
    // A learns of B's subscription through the feed.
    wait_for("A indexes B's subscription", || a.udr.policy.subs.len() == 1).await;

    let at_a = a.url(&n36(&format!("ues/{ue}/sm-data")));
    assert_eq!(put_json(&c, &at_a, &sm_data(1)).await.status(), 201);
    assert_eq!(volumes(&sink.next().await), [1]);
    // At B too (its own subscription): one each, whichever instance took the write.
    let r = merge_patch(
        &c,
        &at_b,
        &json!({"umData": {"lim1": {"limitId": "lim1",
        "allowedUsage": {"totalVolume": 2}}}}),
    )
    .await;
    assert!(r.status().is_success(), "{:?}", body(&r));
    assert_eq!(volumes(&sink.next().await), [2]);
    let r = merge_patch(
        &c,
        &at_a,
        &json!({"umData": {"lim1": {"limitId": "lim1",
        "allowedUsage": {"totalVolume": 3}}}}),
    )
    .await;
    assert!(r.status().is_success(), "{:?}", body(&r));
    assert_eq!(volumes(&sink.next().await), [3]);
    sink.quiet().await;

    // Unsubscribed at A: neither instance notifies any more.
    let at_a_sub = sub.replace(&b.base, &a.base);
    assert_eq!(delete(&c, &at_a_sub).await.status(), 204);
    wait_for("B drops the subscription", || b.udr.policy.subs.is_empty()).await;
    assert!(put_json(&c, &at_b, &sm_data(4)).await.status().is_success());
    assert!(put_json(&c, &at_a, &sm_data(5)).await.status().is_success());
    sink.quiet().await;
}

/// Not a test by itself: the body of the child process (a UDR on the database named by
/// [`CHILD_ENV`], printing its address, serving until killed). Without the variable it returns
/// at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_udr_serves_until_killed() {
    let Ok(url) = std::env::var(CHILD_ENV) else { return };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("mysql-url"), url).unwrap();
    let udr = TestUdr::start(dir.path(), UdrConfig::default()).await;
    index_loaded(&udr).await;
    println!("BASE {}", udr.base);
    std::future::pending::<()>().await;
}

/// The child process, killed (SIGKILL) when dropped, so a failed test leaves none behind.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_udr_killed_after_acknowledged_writes_loses_none_of_them() {
    let _turn = SERIAL.lock().await;
    if !testkit::backends::use_mariadb() {
        return;
    }
    let dir = common::state_dir();
    let url = testkit::backends::mysql_url(dir.path()).unwrap();
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", CHILD_TEST, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, &url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the child UDR starts");
    let mut child = Killed(child);
    let stdout = child.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            // The harness prints the test's name on the same line before the test's output.
            if let Some((_, base)) = line.split_once("BASE ") {
                let _ = tx.send(base.to_owned());
            }
        }
    });
    let a = rx.recv_timeout(Duration::from_secs(30)).expect("the child UDR serves");
    let b = TestUdr::start(dir.path(), UdrConfig::default()).await;
    index_loaded(&b).await;

    // Acknowledged writes at A, four at a time; then SIGKILL. The answers may be slow on a busy
    // machine: what counts is that each was given.
    let c = sbi::client::SbiClient::new(&sbi::client::ClientConfig {
        request_timeout_ms: 30_000,
        ..sbi::client::ClientConfig::default()
    })
    .unwrap();
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(4));
    let mut written = Vec::new();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..40u64 {
        let (c, a, slots) = (c.clone(), a.clone(), slots.clone());
        tasks.spawn(async move {
            let _slot = slots.acquire().await.unwrap();
            let imsi = format!("imsi-0010100000{i:05}");
            let entry = json!({"subscriberIds": [imsi], "nfGroupIds": {"UDM": format!("udm-{i}")}});
            let r =
                send_json(&c, Method::POST, &format!("{a}/udr-prov/v1/slf-entries"), Some(&entry))
                    .await;
            assert_eq!(r.status(), 201, "{:?}", body(&r));
            let sm = format!("{a}/nudr-dr/v2/policy-data/ues/{imsi}/sm-data");
            let r = put_json(&c, &sm, &sm_data(i)).await;
            assert_eq!(r.status(), 201, "{:?}", body(&r));
            (i, imsi)
        });
    }
    while let Some(done) = tasks.join_next().await {
        written.push(done.unwrap());
    }
    child.0.kill().expect("SIGKILL");
    child.0.wait().unwrap();

    // B serves every one of them: SLF lookups from its index (through the feed), policy data
    // from the database.
    for (i, imsi) in &written {
        let want = json!({"UDM": format!("udm-{i}")});
        let start = Instant::now();
        while lookup(&c, &b, imsi).await != (200, want.clone()) {
            assert!(start.elapsed() < T, "{imsi} lost after the kill");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let r = get(&c, &b.url(&n36(&format!("ues/{imsi}/sm-data")))).await;
        assert_eq!(r.status(), 200, "{imsi}: {:?}", body(&r));
        assert_eq!(body(&r), sm_data(*i), "{imsi}");
    }
    assert_eq!(written.len(), 40);
    b.stop().await;
}
