//! MAIN as an index of the NF topics (`[dd.main] store = "index"`, the embedded default), end to
//! end over real sockets: each copy is on disk once (MAIN holds index records), a feed created
//! after a restart gets every copy resolved from the NF topics, a MAIN record whose copy was
//! deleted is skipped and counted while the feed goes on, a log written under the other `store`
//! is refused, and a Data Director killed with SIGKILL while copies are ingested delivers every
//! acknowledged copy after its restart.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use dd::envelope::{self, encode_framed, Copy, CopyMeta, Protocol, TriggerPoint};
use sbi::client::{ClientConfig, SbiClient};
use serde_json::{json, Value};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

const CHILD_ENV: &str = "DD_MAIN_INDEX_CRASH_CHILD_DIR";
const CHILD_TEST: &str = "crash_child_serves_a_data_director";

fn run_config(dir: &Path, config: dd::DdConfig) -> dd::RunConfig {
    dd::RunConfig {
        dd: config,
        sbi: sbi::ServerConfig::default(),
        client: ClientConfig::default(),
        store: store::SqliteConfig { readers: 1, ..store::SqliteConfig::new(dir.join("dd.db")) },
        instance_id: None,
    }
}

struct TestDd {
    base: String,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), dd::DdError>>>,
}

impl TestDd {
    async fn start(dir: &Path, config: dd::DdConfig) -> TestDd {
        let bound = dd::bind(run_config(dir, config)).await.expect("the Data Director starts");
        let base = format!("http://{}", bound.local_addr());
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(bound.serve(async {
            let _ = rx.await;
        }));
        TestDd { base, stop: Some(tx), task: Some(task) }
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.task.take().unwrap().await.unwrap().unwrap();
    }
}

fn client() -> SbiClient {
    SbiClient::new(&ClientConfig::default()).unwrap()
}

/// A framed copy from `nf` whose body names `n`, padded to about `body` bytes.
fn copy(nf: &str, n: u64, body: usize, out: &mut BytesMut) {
    let mut text = format!("{{\"n\":{n},\"pad\":\"");
    text.extend(std::iter::repeat_n('x', body.saturating_sub(text.len() + 2)));
    text.push_str("\"}");
    let meta = CopyMeta {
        trigger: TriggerPoint::IngressRequest,
        protocol: Protocol::Http2,
        timestamp_ns: 1_800_000_000_000_000_000 + n,
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
    encode_framed(&meta, [(b":method".as_slice(), b"POST".as_slice())], text.as_bytes(), out)
        .unwrap();
}

fn batch(nf: &str, ns: impl Iterator<Item = u64>, body: usize) -> Bytes {
    let mut b = BytesMut::new();
    for n in ns {
        copy(nf, n, body, &mut b);
    }
    b.freeze()
}

async fn ingest(base: &str, body: Bytes) -> u16 {
    client()
        .post(&format!("{base}/dd-ingest/v1/copies"))
        .header("content-type", envelope::CONTENT_TYPE)
        .body(body)
        .send()
        .await
        .map_or(0, |r| r.status().as_u16())
}

fn n_of(c: &Copy) -> u64 {
    serde_json::from_slice::<Value>(&c.body()).unwrap()["n"].as_u64().unwrap()
}

/// A TCP feed consumer: each envelope it reads, decoded, on a channel.
async fn tcp_consumer(listener: TcpListener) -> mpsc::UnboundedReceiver<Copy> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            tokio::spawn(read_frames(stream, tx.clone()));
        }
    });
    rx
}

async fn read_frames(mut stream: TcpStream, tx: mpsc::UnboundedSender<Copy>) {
    loop {
        let mut len = [0u8; 4];
        if stream.read_exact(&mut len).await.is_err() {
            return;
        }
        let mut buf = vec![0u8; u32::from_be_bytes(len) as usize];
        if stream.read_exact(&mut buf).await.is_err() {
            return;
        }
        let _ = tx.send(Copy::decode(Bytes::from(buf)).expect("the feed sends envelopes"));
    }
}

async fn receive(rx: &mut mpsc::UnboundedReceiver<Copy>, n: usize) -> Vec<Copy> {
    let mut got = Vec::new();
    while got.len() < n {
        match tokio::time::timeout(Duration::from_secs(10), rx.recv()).await {
            Ok(Some(c)) => got.push(c),
            _ => panic!("{} of {n} copies arrived", got.len()),
        }
    }
    got
}

async fn nothing_more(rx: &mut mpsc::UnboundedReceiver<Copy>) {
    if let Ok(Some(c)) = tokio::time::timeout(Duration::from_millis(500), rx.recv()).await {
        panic!("an unexpected copy arrived: n = {}", n_of(&c));
    }
}

async fn create_feed(base: &str, name: &str, addr: std::net::SocketAddr) {
    let body = json!({"name": name, "start": "earliest",
        "sink": {"type": "tcp", "endpoints": [{"address": addr.to_string()}]}});
    let r = client().post(&format!("{base}/dd-admin/v1/feeds")).json(&body).send().await.unwrap();
    assert_eq!(r.status(), 201, "{:?}", r.body());
}

async fn metrics(base: &str) -> String {
    let r = client().get(&format!("{base}/metrics")).send().await.unwrap();
    String::from_utf8(r.body().to_vec()).unwrap()
}

/// Bytes of the segment files of one topic of the log.
fn log_bytes(topic: &Path) -> u64 {
    std::fs::read_dir(topic)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_copy_is_on_disk_once_and_a_feed_created_after_a_restart_gets_them_all() {
    let dir = tempfile::tempdir().unwrap();
    let dd = TestDd::start(dir.path(), dd::DdConfig::default()).await;
    assert_eq!(ingest(&dd.base, batch("SCP", 1..=150, 1000)).await, 204);
    assert_eq!(ingest(&dd.base, batch("PCF", 1001..=1050, 1000)).await, 204);
    // Aggregation indexes them; the stop waits for it to commit what it moved.
    tokio::time::sleep(Duration::from_millis(300)).await;
    dd.stop().await;

    let log = dir.path().join("dd-log");
    let (scp, main) = (log_bytes(&log.join("scp")), log_bytes(&log.join("MAIN-0")));
    assert!(scp > 150 * 1000, "the SCP topic holds the copies: {scp} bytes");
    assert!(main <= 200 * 40, "MAIN holds 200 index records, not copies: {main} bytes");

    let dd = TestDd::start(dir.path(), dd::DdConfig::default()).await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut rx = tcp_consumer(listener).await;
    create_feed(&dd.base, "after-restart", addr).await;
    let got = receive(&mut rx, 200).await;
    let scp: Vec<u64> = got.iter().filter(|c| c.nf_type() == "SCP").map(n_of).collect();
    let pcf: Vec<u64> = got.iter().filter(|c| c.nf_type() == "PCF").map(n_of).collect();
    assert_eq!(scp, (1..=150).collect::<Vec<_>>(), "the SCP copies, in their order");
    assert_eq!(pcf, (1001..=1050).collect::<Vec<_>>(), "the PCF copies, in their order");
    assert_eq!(got[0].body().len(), 1000, "whole envelopes");
    nothing_more(&mut rx).await;
    assert!(!metrics(&dd.base).await.contains("dd_main_unresolved_total{"), "nothing skipped");
    dd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_main_record_whose_copy_was_deleted_is_skipped_and_counted_and_the_feed_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let dd = TestDd::start(dir.path(), dd::DdConfig::default()).await;
    assert_eq!(ingest(&dd.base, batch("SCP", 1..=20, 300)).await, 204);
    tokio::time::sleep(Duration::from_millis(300)).await;
    dd.stop().await;
    // An operator deletes the SCP topic while MAIN still points into it; the topic starts again
    // at offset 0, so the new copies sit where MAIN's old records point.
    std::fs::remove_dir_all(dir.path().join("dd-log").join("scp")).unwrap();

    let dd = TestDd::start(dir.path(), dd::DdConfig::default()).await;
    assert_eq!(ingest(&dd.base, batch("SCP", 101..=105, 300)).await, 204);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut rx = tcp_consumer(listener).await;
    create_feed(&dd.base, "all", addr).await;
    let got: Vec<u64> = receive(&mut rx, 5).await.iter().map(n_of).collect();
    assert_eq!(got, vec![101, 102, 103, 104, 105], "only the copies that exist, once each");
    nothing_more(&mut rx).await;
    let text = metrics(&dd.base).await;
    let line = text
        .lines()
        .find(|l| l.starts_with("dd_main_unresolved_total{") && l.contains("consumer=\"feed:all\""))
        .unwrap_or_else(|| panic!("no unresolved count for the feed:\n{text}"));
    assert!(line.ends_with(" 20"), "the 20 deleted copies are counted: {line}");
    assert!(line.contains("topic=\"MAIN-0\""), "{line}");
    dd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_written_under_the_other_store_is_refused_and_a_short_nf_retention_too() {
    let dir = tempfile::tempdir().unwrap();
    let dd = TestDd::start(dir.path(), dd::DdConfig::default()).await;
    assert_eq!(ingest(&dd.base, batch("SCP", 1..=3, 100)).await, 204);
    tokio::time::sleep(Duration::from_millis(300)).await;
    dd.stop().await;
    let copy: dd::DdConfig = toml::from_str("[main]\nstore = \"copy\"").unwrap();
    let e = dd::bind(run_config(dir.path(), copy)).await.err().expect("refused");
    let e = e.to_string();
    assert!(e.contains("[dd.main] store = \"copy\"") && e.contains("MAIN-0"), "{e}");

    let short: dd::DdConfig = toml::from_str("[log.topics.scp]\nretention_secs = 60").unwrap();
    let other = tempfile::tempdir().unwrap();
    let e = dd::bind(run_config(other.path(), short)).await.err().expect("refused").to_string();
    assert!(e.contains("[dd.log.topics.scp] retention_secs = 60"), "{e}");
}

/// Not a test by itself: the Data Director of the SIGKILL test, in a child process. Without the
/// environment variable (a normal test run) it returns at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_child_serves_a_data_director() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let bound =
        dd::bind(run_config(Path::new(&dir), dd::DdConfig::default())).await.expect("child starts");
    println!("READY http://{}", bound.local_addr());
    bound.serve(std::future::pending()).await.expect("serves");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_ingest_then_every_acknowledged_copy_is_delivered() {
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut rx = tcp_consumer(listener).await;

    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", CHILD_TEST, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("child starts");
    let stdout = child.stdout.take().unwrap();
    let ready = tokio::task::spawn_blocking(move || {
        let mut lines = BufReader::new(stdout).lines();
        loop {
            let line = lines.next().expect("child prints READY").expect("line");
            // The harness prints the test's name on the same line, before it.
            if let Some(base) = line.split_once("READY ").map(|(_, b)| b.to_string()) {
                // The pipe stays open (and drained) until the child dies.
                std::thread::spawn(move || lines.for_each(drop));
                return base;
            }
        }
    });
    let Ok(Ok(base)) = tokio::time::timeout(Duration::from_secs(30), ready).await else {
        child.kill().expect("SIGKILL");
        panic!("the child Data Director did not start");
    };
    create_feed(&base, "all", addr).await;

    // Four senders POST batches of 40 until the kill; a batch answered 204 is acknowledged.
    let acked = Arc::new(Mutex::new(BTreeSet::new()));
    let mut senders = Vec::new();
    for s in 0..4u64 {
        let (base, acked) = (base.clone(), acked.clone());
        senders.push(tokio::spawn(async move {
            for b in 0u64.. {
                let first = (s * 1_000_000) + b * 40;
                if ingest(&base, batch("SCP", first..first + 40, 1000)).await != 204 {
                    return;
                }
                acked.lock().unwrap().extend(first..first + 40);
            }
        }));
    }
    let start = Instant::now();
    while acked.lock().unwrap().len() < 8_000 && start.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    for s in senders {
        s.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() >= 400, "only {} copies acknowledged before the kill", acked.len());

    // What the feed delivered before the kill (frames the child had written reach the consumer
    // after its death: let them), then after the restart.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut before: BTreeMap<u64, u32> = BTreeMap::new();
    while let Ok(c) = rx.try_recv() {
        *before.entry(n_of(&c)).or_default() += 1;
    }
    let dd = TestDd::start(dir.path(), dd::DdConfig::default()).await;
    let mut after: BTreeMap<u64, u32> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while acked.iter().any(|n| !before.contains_key(n) && !after.contains_key(n))
        && Instant::now() < deadline
    {
        if let Ok(Some(c)) = tokio::time::timeout(Duration::from_millis(200), rx.recv()).await {
            *after.entry(n_of(&c)).or_default() += 1;
        }
    }
    while let Ok(Some(c)) = tokio::time::timeout(Duration::from_millis(500), rx.recv()).await {
        *after.entry(n_of(&c)).or_default() += 1;
    }
    let missing: Vec<u64> = acked
        .iter()
        .copied()
        .filter(|n| !before.contains_key(n) && !after.contains_key(n))
        .collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged copies never delivered: {:?}...",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    // At least once across the kill (what the feed had delivered since its last commit comes
    // again), never twice within one run: MAIN indexes each copy once, aggregation resuming
    // after what MAIN already holds.
    let twice: Vec<_> = before.iter().chain(after.iter()).filter(|(_, &k)| k > 1).collect();
    assert!(twice.is_empty(), "delivered twice within one run: {twice:?}");
    eprintln!(
        "SIGKILL after {} acknowledged copies: {} delivered before, {} after the restart ({} again)",
        acked.len(),
        before.len(),
        after.len(),
        after.keys().filter(|n| before.contains_key(n)).count()
    );
    dd.stop().await;
}
