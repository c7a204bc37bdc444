//! Two Data Director instances on one MariaDB database (issue #25), in the embedded mode: a
//! filter and a feed made through A's admin API are shown and run by B (over the copies B takes)
//! within [`DEADLINE`], and so are their edits and deletes, both ways; a Data Director killed
//! with SIGKILL right after acknowledged admin writes loses none of them. Skipped without
//! MariaDB unless `FIVECORE_REQUIRE_MARIADB=1`.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use dd::envelope::{self, encode_framed, Copy, CopyMeta, Protocol, TriggerPoint};
use sbi::client::{ClientConfig, SbiClient};
use serde_json::{json, Value};
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

/// The bound the brief sets for an admin change to run on another instance (the feed polls
/// every 25 ms; the rest is room for a loaded CI machine).
const DEADLINE: Duration = Duration::from_secs(1);

/// The tests take turns: each times how fast a change reaches the other instance.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Set in the child's environment to the database URL.
const CHILD_ENV: &str = "FIVECORE_DD_SHARED_DB_CHILD";
const CHILD_TEST: &str = "child_dd_serves_until_killed";

struct TestDd {
    base: String,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), dd::DdError>>>,
    _log: tempfile::TempDir,
}

impl TestDd {
    /// A Data Director on the database at `url`, its log in a directory of its own.
    async fn start(url: &str) -> TestDd {
        let log = tempfile::tempdir().unwrap();
        let sqlite = store::SqliteConfig {
            readers: 1,
            ..store::SqliteConfig::new(log.path().join("dd.db"))
        };
        let run = dd::RunConfig {
            dd: dd::DdConfig::default(),
            sbi: sbi::ServerConfig::default(),
            client: ClientConfig::default(),
            store: common::on_mysql(sqlite, url),
            instance_id: None,
        };
        let bound = dd::bind(run).await.expect("the Data Director starts");
        assert!(!log.path().join("dd.db").exists(), "no SQLite file on MySQL");
        let base = format!("http://{}", bound.local_addr());
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(bound.serve(async {
            let _ = rx.await;
        }));
        TestDd { base, stop: Some(tx), task: Some(task), _log: log }
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.task.take().unwrap().await.unwrap().unwrap();
    }
}

fn client() -> SbiClient {
    SbiClient::new(&ClientConfig { request_timeout_ms: 30_000, ..ClientConfig::default() }).unwrap()
}

fn copy(nf: &str, n: u64, out: &mut BytesMut) {
    let body = format!("{{\"n\":{n}}}");
    let meta = CopyMeta {
        trigger: TriggerPoint::IngressRequest,
        protocol: Protocol::Http2,
        timestamp_ns: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
        sequence: n,
        transaction: n,
        stream_id: 1,
        status: 0,
        nf_type: nf,
        nf_instance: "11111111-2222-3333-4444-555555555555",
        service: "npcf-smpolicycontrol",
        operation: "Npcf_SMPolicyControl_Create",
        method: "POST",
        path: "/npcf-smpolicycontrol/v1/sm-policies",
        peer: "127.0.0.1:1",
        supi: "imsi-001010000000001",
        gpsi: "",
        session_id: "",
    };
    encode_framed(&meta, [], body.as_bytes(), out).unwrap();
}

/// Posts copies numbered `ns` from `nf` to `dd`'s ingest API.
async fn ingest(dd: &TestDd, nf: &str, ns: impl IntoIterator<Item = u64>) {
    let mut b = BytesMut::new();
    for n in ns {
        copy(nf, n, &mut b);
    }
    let r = client()
        .post(&format!("{}/dd-ingest/v1/copies", dd.base))
        .header("content-type", envelope::CONTENT_TYPE)
        .body(b.freeze())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204, "{:?}", r.body());
}

/// A TCP feed consumer: the `n` of every copy it reads, on a channel.
async fn consumer() -> (String, mpsc::UnboundedReceiver<(String, u64)>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else { return };
            let tx = tx.clone();
            tokio::spawn(async move {
                loop {
                    let mut len = [0u8; 4];
                    if s.read_exact(&mut len).await.is_err() {
                        return;
                    }
                    let mut buf = vec![0u8; u32::from_be_bytes(len) as usize];
                    if s.read_exact(&mut buf).await.is_err() {
                        return;
                    }
                    let c = Copy::decode(Bytes::from(buf)).unwrap();
                    let n =
                        serde_json::from_slice::<Value>(&c.body()).unwrap()["n"].as_u64().unwrap();
                    let _ = tx.send((c.nf_type().to_owned(), n));
                }
            });
        }
    });
    (addr, rx)
}

async fn receive(rx: &mut mpsc::UnboundedReceiver<(String, u64)>, n: usize) -> Vec<(String, u64)> {
    let mut got = Vec::new();
    while got.len() < n {
        match tokio::time::timeout(Duration::from_secs(10), rx.recv()).await {
            Ok(Some(c)) => got.push(c),
            _ => panic!("{} of {n} copies arrived: {got:?}", got.len()),
        }
    }
    got.sort_by_key(|(_, n)| *n);
    got
}

async fn nothing_more(rx: &mut mpsc::UnboundedReceiver<(String, u64)>) {
    if let Ok(Some(c)) = tokio::time::timeout(Duration::from_millis(500), rx.recv()).await {
        panic!("an unexpected copy arrived: {c:?}");
    }
}

async fn send(method: &str, url: String, body: Option<Value>) -> (u16, Value) {
    let c = client();
    let req = match method {
        "POST" => c.post(&url),
        "PUT" => c.put(&url),
        "DELETE" => c.delete(&url),
        _ => c.get(&url),
    };
    let req = match body {
        Some(b) => req.json(&b),
        None => req,
    };
    let r = req.send().await.unwrap();
    let v = serde_json::from_slice(r.body()).unwrap_or(Value::Null);
    (r.status().as_u16(), v)
}

/// Waits until `dd` answers `GET /dd-admin/v1/{path}` as `want` says; how long it took.
async fn seen_within(dd: &TestDd, path: &str, want: impl Fn(u16, &Value) -> bool) -> Duration {
    let start = Instant::now();
    loop {
        let (status, v) = send("GET", format!("{}/dd-admin/v1/{path}", dd.base), None).await;
        if want(status, &v) {
            return start.elapsed();
        }
        assert!(start.elapsed() < DEADLINE, "{path}: not within {DEADLINE:?} (got {status} {v})");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn tcp_sink(addr: &str) -> Value {
    json!({"type": "tcp", "endpoints": [{"address": addr}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_feed_made_edited_and_deleted_at_one_instance_runs_so_at_the_other() {
    let _turn = SERIAL.lock().await;
    if !testkit::backends::use_mariadb() {
        return;
    }
    let dir = testkit::backends::state_dir("dd_shared");
    let url = testkit::backends::mysql_url(dir.path()).unwrap();
    let (a, b) = (TestDd::start(&url).await, TestDd::start(&url).await);
    let (addr1, mut rx1) = consumer().await;
    let (addr2, mut rx2) = consumer().await;
    let mut took = Vec::new();

    // Made at A: a filter and a feed using it.
    let filter = json!({"name": "pcf-only", "filter": {"conditions": [{"nf_type": "PCF"}]}});
    let (s, v) = send("POST", format!("{}/dd-admin/v1/filters", a.base), Some(filter)).await;
    assert_eq!(s, 201, "{v}");
    let feed =
        json!({"name": "f", "sink": tcp_sink(&addr1), "filter": "pcf-only", "start": "earliest"});
    let (s, v) = send("POST", format!("{}/dd-admin/v1/feeds", a.base), Some(feed)).await;
    assert_eq!(s, 201, "{v}");
    took.push(("create", seen_within(&b, "feeds/f", |s, _| s == 200).await));
    // B runs it over the copies B takes, through the filter.
    ingest(&b, "PCF", 1..=10).await;
    ingest(&b, "BSF", 11..=15).await;
    let got = receive(&mut rx1, 10).await;
    assert_eq!(got, (1..=10).map(|n| ("PCF".to_owned(), n)).collect::<Vec<_>>());
    nothing_more(&mut rx1).await;

    // The filter edited at A: B's feed takes it.
    let bsf = json!({"name": "pcf-only", "filter": {"conditions": [{"nf_type": "BSF"}]}});
    let (s, v) = send("PUT", format!("{}/dd-admin/v1/filters/pcf-only", a.base), Some(bsf)).await;
    assert_eq!(s, 200, "{v}");
    took.push((
        "filter edit",
        seen_within(&b, "filters/pcf-only", |_, v| {
            v["filter"]["conditions"][0]["nf_type"] == "BSF"
        })
        .await,
    ));
    ingest(&b, "PCF", 20..=21).await;
    ingest(&b, "BSF", 22..=23).await;
    assert_eq!(receive(&mut rx1, 2).await, [("BSF".to_owned(), 22), ("BSF".to_owned(), 23)]);
    nothing_more(&mut rx1).await;

    // The feed edited at A: another sink, no filter; B delivers there from where it was.
    let edited = json!({"name": "f", "sink": tcp_sink(&addr2), "start": "earliest"});
    let (s, v) = send("PUT", format!("{}/dd-admin/v1/feeds/f", a.base), Some(edited)).await;
    assert_eq!(s, 200, "{v}");
    took.push((
        "feed edit",
        seen_within(&b, "feeds/f", |_, v| v["sink"]["endpoints"][0]["address"] == addr2.as_str())
            .await,
    ));
    ingest(&b, "PCF", 30..=32).await;
    assert_eq!(
        receive(&mut rx2, 3).await.iter().map(|(_, n)| *n).collect::<Vec<_>>(),
        [30, 31, 32]
    );
    nothing_more(&mut rx1).await;

    // Deleted at A: gone at B, which delivers no more.
    let (s, _) = send("DELETE", format!("{}/dd-admin/v1/feeds/f", a.base), None).await;
    assert_eq!(s, 204);
    let (s, _) = send("DELETE", format!("{}/dd-admin/v1/filters/pcf-only", a.base), None).await;
    assert_eq!(s, 204);
    took.push(("delete", seen_within(&b, "feeds/f", |s, _| s == 404).await));
    seen_within(&b, "filters/pcf-only", |s, _| s == 404).await;
    ingest(&b, "PCF", 40..=41).await;
    nothing_more(&mut rx2).await;

    // And the other way: made at B, shown and run by A (from A's end: B runs it too, over the
    // copies B took before).
    let (addr3, mut rx3) = consumer().await;
    let feed = json!({"name": "g", "sink": tcp_sink(&addr3)});
    let (s, v) = send("POST", format!("{}/dd-admin/v1/feeds", b.base), Some(feed)).await;
    assert_eq!(s, 201, "{v}");
    took.push(("create, B to A", seen_within(&a, "feeds/g", |s, _| s == 200).await));
    ingest(&a, "UDR", 50..=51).await;
    assert_eq!(receive(&mut rx3, 2).await, [("UDR".to_owned(), 50), ("UDR".to_owned(), 51)]);
    nothing_more(&mut rx3).await;
    eprintln!("admin change seen at the other instance after: {took:?}");
    a.stop().await;
    b.stop().await;
}

/// Not a test by itself: the body of the child process (a Data Director on the database named
/// by [`CHILD_ENV`], printing its address, serving until killed). Without the variable it
/// returns at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_dd_serves_until_killed() {
    let Ok(url) = std::env::var(CHILD_ENV) else { return };
    let dd = TestDd::start(&url).await;
    println!("BASE {}", dd.base);
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
async fn a_data_director_killed_after_acknowledged_admin_writes_loses_none_of_them() {
    let _turn = SERIAL.lock().await;
    if !testkit::backends::use_mariadb() {
        return;
    }
    let dir = testkit::backends::state_dir("dd_killed");
    let url = testkit::backends::mysql_url(dir.path()).unwrap();
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", CHILD_TEST, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, &url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the child Data Director starts");
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
    let base = rx.recv_timeout(Duration::from_secs(60)).expect("the child Data Director serves");

    // Acknowledged writes, four at a time: filters, feeds naming them, a correlation, edits.
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(4));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..12u64 {
        let (base, slots) = (base.clone(), slots.clone());
        tasks.spawn(async move {
            let _slot = slots.acquire().await.unwrap();
            let filter =
                json!({"name": format!("flt-{i}"), "filter": {"conditions": [{"nf_type": "PCF"}]}});
            let (s, v) = send("POST", format!("{base}/dd-admin/v1/filters"), Some(filter)).await;
            assert_eq!(s, 201, "{v}");
            let feed = json!({"name": format!("feed-{i}"), "sink": tcp_sink("127.0.0.1:9"),
                              "filter": format!("flt-{i}")});
            let (s, v) = send("POST", format!("{base}/dd-admin/v1/feeds"), Some(feed)).await;
            assert_eq!(s, 201, "{v}");
            // The last write before the kill for this feed: its start moved to earliest.
            let edited = json!({"name": format!("feed-{i}"), "sink": tcp_sink("127.0.0.1:9"),
                                "filter": format!("flt-{i}"), "start": "earliest"});
            let (s, v) =
                send("PUT", format!("{base}/dd-admin/v1/feeds/feed-{i}"), Some(edited)).await;
            assert_eq!(s, 200, "{v}");
        });
    }
    let corr = json!({"name": "txn", "correlation": {"key": "transaction"}});
    let (s, v) = send("POST", format!("{base}/dd-admin/v1/correlations"), Some(corr)).await;
    assert_eq!(s, 201, "{v}");
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    child.0.kill().expect("SIGKILL");
    child.0.wait().unwrap();

    // A new instance on the database has every one of them, as last acknowledged.
    let dd = TestDd::start(&url).await;
    let (_, feeds) = send("GET", format!("{}/dd-admin/v1/feeds", dd.base), None).await;
    let feeds = feeds.as_array().unwrap().clone();
    assert_eq!(feeds.len(), 12, "{feeds:?}");
    for f in &feeds {
        let i = f["name"].as_str().unwrap().strip_prefix("feed-").unwrap();
        assert_eq!(f["filter"], format!("flt-{i}"), "{f}");
        assert_eq!(f["start"], "earliest", "the edit survived: {f}");
    }
    let (_, filters) = send("GET", format!("{}/dd-admin/v1/filters", dd.base), None).await;
    assert_eq!(filters.as_array().unwrap().len(), 12, "{filters}");
    let (s, _) = send("GET", format!("{}/dd-admin/v1/correlations/txn", dd.base), None).await;
    assert_eq!(s, 200);
    dd.stop().await;
}
