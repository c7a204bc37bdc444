//! The Data Director end to end over real sockets: copies POSTed to the ingest API reach a TCP
//! feed created through the admin API, through the NF topics and MAIN on disk; bad batches are
//! refused naming the frame; a consumer that is down gets everything when it is back; a restart
//! keeps feeds, filters and offsets. The tests that keep admin objects or xDRs run on both
//! store backends (`sqlite::` and `mariadb::`, a real MariaDB server).

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use dd::envelope::{self, encode_framed, Copy, CopyMeta, Protocol, TriggerPoint};
use sbi::client::{ClientConfig, SbiClient};
use serde_json::{json, Value};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

static START: std::sync::LazyLock<u64> = std::sync::LazyLock::new(|| {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
});

struct TestDd {
    base: String,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), dd::DdError>>>,
}

impl TestDd {
    async fn start(dir: &Path, config: dd::DdConfig) -> TestDd {
        let run = dd::RunConfig {
            dd: config,
            sbi: sbi::ServerConfig::default(),
            client: ClientConfig::default(),
            store: common::store_config(dir),
            instance_id: None,
        };
        let bound = dd::bind(run).await.expect("the Data Director starts");
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

/// One framed copy from `nf` about `supi`, its body naming `n`.
fn copy(nf: &str, supi: &str, n: u64, out: &mut BytesMut) {
    exchange(nf, supi, n, TriggerPoint::IngressRequest, 0, out);
}

/// A copy of transaction `n` at `trigger` with `status` (0 for a request).
fn exchange(nf: &str, supi: &str, n: u64, trigger: TriggerPoint, status: u32, out: &mut BytesMut) {
    let body = format!("{{\"n\":{n}}}");
    let meta = CopyMeta {
        trigger,
        protocol: Protocol::Http2,
        // Now-ish: the xDR store's retention deletes records that ended long ago.
        timestamp_ns: *START + n * 1000 + status as u64,
        sequence: n,
        transaction: n,
        stream_id: 1,
        status,
        nf_type: nf,
        nf_instance: "11111111-2222-3333-4444-555555555555",
        service: "npcf-smpolicycontrol",
        operation: "Npcf_SMPolicyControl_Create",
        method: "POST",
        path: "/npcf-smpolicycontrol/v1/sm-policies",
        peer: "127.0.0.1:1",
        supi,
        gpsi: "",
        session_id: "",
    };
    let headers: [(&[u8], &[u8]); 2] =
        [(b":method", b"POST"), (b"content-type", b"application/json")];
    encode_framed(&meta, headers, body.as_bytes(), out).unwrap();
}

async fn ingest(base: &str, body: Bytes) -> sbi::client::SbiResponse {
    client()
        .post(&format!("{base}/dd-ingest/v1/copies"))
        .header("content-type", envelope::CONTENT_TYPE)
        .body(body)
        .send()
        .await
        .unwrap()
}

/// A TCP feed consumer: every envelope it reads, decoded, on a channel.
async fn tcp_consumer(listener: TcpListener) -> mpsc::UnboundedReceiver<Copy> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            let tx = tx.clone();
            tokio::spawn(read_frames(stream, tx));
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
        panic!("an unexpected copy arrived: {}", c.nf_type());
    }
}

fn tcp_sink(addr: SocketAddr) -> Value {
    json!({"type": "tcp", "endpoints": [{"address": addr.to_string()}]})
}

async fn create(base: &str, kind: &str, body: Value) -> sbi::client::SbiResponse {
    client().post(&format!("{base}/dd-admin/v1/{kind}")).json(&body).send().await.unwrap()
}

fn n_of(c: &Copy) -> u64 {
    serde_json::from_slice::<Value>(&c.body()).unwrap()["n"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_reach_a_tcp_feed_with_their_metadata_each_nf_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let dd = TestDd::start(dir.path(), dd::DdConfig::default()).await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut rx = tcp_consumer(listener).await;
    let r = create(
        &dd.base,
        "feeds",
        json!({"name": "all", "sink": tcp_sink(addr), "start": "earliest"}),
    )
    .await;
    assert_eq!(r.status(), 201, "{:?}", r.body());
    assert!(r.header("location").unwrap().ends_with("/dd-admin/v1/feeds/all"));

    let mut n = 0;
    for _ in 0..3 {
        let mut b = BytesMut::new();
        for _ in 0..10 {
            n += 1;
            copy(if n % 3 == 0 { "BSF" } else { "PCF" }, &format!("imsi-00101{n:010}"), n, &mut b);
        }
        let r = ingest(&dd.base, b.freeze()).await;
        assert_eq!(r.status(), 204, "{:?}", r.body());
    }
    let got = receive(&mut rx, 30).await;
    for nf in ["PCF", "BSF"] {
        let ns: Vec<u64> = got.iter().filter(|c| c.nf_type() == nf).map(n_of).collect();
        assert!(ns.windows(2).all(|w| w[0] < w[1]), "{nf} out of order: {ns:?}");
    }
    let c = got.iter().find(|c| n_of(c) == 7).unwrap();
    assert_eq!(c.supi(), "imsi-001010000000007");
    assert_eq!(c.operation(), "Npcf_SMPolicyControl_Create");
    assert_eq!(c.trigger, TriggerPoint::IngressRequest);
    assert_eq!(c.header("content-type"), Some(&b"application/json"[..]));
    nothing_more(&mut rx).await;

    // The feed reports where it is.
    let r = client().get(&format!("{}/dd-admin/v1/feeds/all", dd.base)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().unwrap();
    let lag: u64 = v["status"]["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["lag"].as_u64().unwrap())
        .sum();
    assert_eq!(lag, 0, "{v}");
    dd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_batch_is_refused_naming_its_frame_and_nothing_of_it_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let dd = TestDd::start(dir.path(), dd::DdConfig::default()).await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut rx = tcp_consumer(listener).await;
    assert_eq!(
        create(&dd.base, "feeds", json!({"name": "f", "sink": tcp_sink(addr)})).await.status(),
        201
    );

    let mut b = BytesMut::new();
    copy("PCF", "imsi-001010000000001", 1, &mut b);
    let second = b.len();
    copy("PCF", "imsi-001010000000002", 2, &mut b);
    b[second + 4] = 7; // the second envelope's version
    let r = ingest(&dd.base, b.freeze()).await;
    assert_eq!(r.status(), 400);
    let p: Value = r.json().unwrap();
    assert_eq!(p["cause"], "INVALID_MSG_FORMAT");
    assert_eq!(p["invalidParams"][0]["param"], "copies[1]");

    let r = client()
        .post(&format!("{}/dd-ingest/v1/copies", dd.base))
        .json(&json!({"not": "copies"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 415);
    let r = ingest(&dd.base, Bytes::new()).await;
    assert_eq!(r.status(), 400);

    let mut b = BytesMut::new();
    copy("PCF", "imsi-001010000000003", 3, &mut b);
    assert_eq!(ingest(&dd.base, b.freeze()).await.status(), 204);
    let got = receive(&mut rx, 1).await;
    assert_eq!(n_of(&got[0]), 3, "only the good batch arrives");
    nothing_more(&mut rx).await;
    dd.stop().await;
}

async fn a_consumer_down_then_back_gets_everything_and_a_restart_keeps_feeds_and_offsets() {
    let dir = testkit::backends::state_dir("dd");
    // A port nothing listens on yet: the consumer starts there later.
    let addr = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
    let dd = TestDd::start(dir.path(), dd::DdConfig::default()).await;
    let r = create(
        &dd.base,
        "feeds",
        json!({"name": "late", "sink": tcp_sink(addr), "start": "earliest"}),
    )
    .await;
    assert_eq!(r.status(), 201, "{:?}", r.body());
    let mut b = BytesMut::new();
    for n in 1..=20 {
        copy("NRF", "", n, &mut b);
    }
    assert_eq!(ingest(&dd.base, b.freeze()).await.status(), 204);
    tokio::time::sleep(Duration::from_millis(300)).await;

    let mut rx = tcp_consumer(TcpListener::bind(addr).await.unwrap()).await;
    let got = receive(&mut rx, 20).await;
    let mut ns: Vec<u64> = got.iter().map(n_of).collect();
    ns.sort_unstable();
    assert_eq!(ns, (1..=20).collect::<Vec<_>>());

    // Restart: the feed is still there and resumes after what it delivered.
    dd.stop().await;
    let dd = TestDd::start(dir.path(), dd::DdConfig::default()).await;
    let r = client().get(&format!("{}/dd-admin/v1/feeds", dd.base)).send().await.unwrap();
    let feeds: Value = r.json().unwrap();
    assert_eq!(feeds[0]["name"], "late", "{feeds}");
    let mut b = BytesMut::new();
    copy("NRF", "", 21, &mut b);
    assert_eq!(ingest(&dd.base, b.freeze()).await.status(), 204);
    let got = receive(&mut rx, 1).await;
    assert_eq!(n_of(&got[0]), 21, "nothing delivered before the restart comes again");
    nothing_more(&mut rx).await;
    dd.stop().await;
}

async fn the_admin_api_refuses_what_it_cannot_run_naming_the_field() {
    let dir = testkit::backends::state_dir("dd");
    let dd = TestDd::start(dir.path(), dd::DdConfig::default()).await;
    let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();

    let r =
        create(&dd.base, "feeds", json!({"name": "f", "sink": tcp_sink(addr), "filter": "nope"}))
            .await;
    assert_eq!(r.status(), 400);
    assert_eq!(r.json::<Value>().unwrap()["invalidParams"][0]["param"], "/filter");

    let r = create(&dd.base, "feeds", json!({"name": "f", "sink": {"type": "pigeon"}})).await;
    assert_eq!(r.status(), 400);
    let p: Value = r.json().unwrap();
    assert!(p["invalidParams"][0]["param"].as_str().unwrap().starts_with("/sink"), "{p}");

    let r = create(&dd.base, "feeds", json!({"name": "a/b", "sink": tcp_sink(addr)})).await;
    assert_eq!(r.status(), 400);
    assert_eq!(r.json::<Value>().unwrap()["invalidParams"][0]["param"], "/name");

    let r = create(&dd.base, "feeds", json!({"sink": tcp_sink(addr)})).await;
    assert_eq!(r.json::<Value>().unwrap()["cause"], "MANDATORY_IE_MISSING");

    assert_eq!(
        create(&dd.base, "feeds", json!({"name": "f", "sink": tcp_sink(addr)})).await.status(),
        201
    );
    assert_eq!(
        create(&dd.base, "feeds", json!({"name": "f", "sink": tcp_sink(addr)})).await.status(),
        409
    );

    let r = client()
        .put(&format!("{}/dd-admin/v1/feeds/g", dd.base))
        .json(&json!({"name": "h", "sink": tcp_sink(addr)}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(r.json::<Value>().unwrap()["invalidParams"][0]["param"], "/name");

    let r = client().delete(&format!("{}/dd-admin/v1/feeds/none", dd.base)).send().await.unwrap();
    assert_eq!(r.status(), 404);
    let r = client().delete(&format!("{}/dd-admin/v1/feeds/f", dd.base)).send().await.unwrap();
    assert_eq!(r.status(), 204);
    let r = client().get(&format!("{}/dd-admin/v1/feeds/f", dd.base)).send().await.unwrap();
    assert_eq!(r.status(), 404);
    dd.stop().await;
}

async fn a_filtered_feed_beside_a_full_one_gets_its_share_and_a_used_filter_cannot_go() {
    let dir = testkit::backends::state_dir("dd");
    let dd = TestDd::start(dir.path(), dd::DdConfig::default()).await;
    let full = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let part = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (full_addr, part_addr) = (full.local_addr().unwrap(), part.local_addr().unwrap());
    let (mut full_rx, mut part_rx) = (tcp_consumer(full).await, tcp_consumer(part).await);
    // One percent of the subscribers, plus every BSF copy.
    let filter = json!({"name": "one-percent", "filter": {"conditions": [
        {"any": [{"nf_type": "BSF"}, {"sample": {"percent": 1, "by": "supi"}}]}
    ]}});
    assert_eq!(create(&dd.base, "filters", filter).await.status(), 201);
    let r = create(
        &dd.base,
        "filters",
        json!({"name": "bad", "filter": {"conditions": [{"status": ["abc"]}]}}),
    )
    .await;
    assert_eq!(r.status(), 400);
    let p: Value = r.json().unwrap();
    assert!(
        p["invalidParams"][0]["param"].as_str().unwrap().starts_with("/filter/conditions/0/status"),
        "{p}"
    );
    for (name, addr, filter) in
        [("full", full_addr, None), ("sampled", part_addr, Some("one-percent"))]
    {
        let mut f = json!({"name": name, "sink": tcp_sink(addr), "start": "earliest"});
        if let Some(x) = filter {
            f["filter"] = json!(x);
        }
        assert_eq!(create(&dd.base, "feeds", f).await.status(), 201);
    }
    let mut b = BytesMut::new();
    for n in 1..=2000u64 {
        copy(if n % 500 == 0 { "BSF" } else { "PCF" }, &format!("imsi-00101{n:010}"), n, &mut b);
    }
    assert_eq!(ingest(&dd.base, b.freeze()).await.status(), 204);
    let all = receive(&mut full_rx, 2000).await;
    assert_eq!(all.len(), 2000);
    // Let the sampled feed drain, then count what it got.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut sampled = Vec::new();
    while let Ok(c) = part_rx.try_recv() {
        sampled.push(c);
    }
    let bsf = sampled.iter().filter(|c| c.nf_type() == "BSF").count();
    assert_eq!(bsf, 4, "every BSF copy passes");
    let pcf = sampled.len() - bsf;
    assert!((5..=45).contains(&pcf), "about 1 % of 1,996 subscribers, got {pcf}");
    // Sampled by subscriber: the same subscribers again pass again, the others do not.
    let chosen: Vec<String> =
        sampled.iter().filter(|c| c.nf_type() == "PCF").map(|c| c.supi().to_string()).collect();
    let mut b = BytesMut::new();
    for (i, supi) in chosen.iter().enumerate() {
        copy("PCF", supi, 10_000 + i as u64, &mut b);
    }
    copy("PCF", "imsi-001019999999999", 99_999, &mut b);
    assert_eq!(ingest(&dd.base, b.freeze()).await.status(), 204);
    let again = receive(&mut part_rx, chosen.len()).await;
    assert!(again.iter().all(|c| chosen.contains(&c.supi().to_string())));

    let r = client()
        .delete(&format!("{}/dd-admin/v1/filters/one-percent", dd.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    let r =
        client().delete(&format!("{}/dd-admin/v1/feeds/sampled", dd.base)).send().await.unwrap();
    assert_eq!(r.status(), 204);
    let r = client()
        .delete(&format!("{}/dd-admin/v1/filters/one-percent", dd.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    dd.stop().await;
}

async fn a_correlation_turns_a_request_and_its_answer_into_one_xdr_kept_across_a_restart() {
    let dir = testkit::backends::state_dir("dd");
    let dd = TestDd::start(dir.path(), dd::DdConfig::default()).await;
    let r = create(
        &dd.base,
        "correlations",
        json!({"name": "txn", "correlation": {"key": "transaction"}}),
    )
    .await;
    assert_eq!(r.status(), 201, "{:?}", r.body());
    let r = create(
        &dd.base,
        "correlations",
        json!({"name": "bad", "correlation": {"window_secs": "soon"}}),
    )
    .await;
    assert_eq!(r.status(), 400);
    assert_eq!(r.json::<Value>().unwrap()["invalidParams"][0]["param"], "/correlation/window_secs");

    let supi = "imsi-001010000000042";
    let mut b = BytesMut::new();
    exchange("PCF", supi, 1, TriggerPoint::IngressRequest, 0, &mut b);
    exchange("PCF", supi, 1, TriggerPoint::IngressResponse, 201, &mut b);
    exchange("PCF", supi, 2, TriggerPoint::IngressRequest, 0, &mut b);
    exchange("PCF", supi, 2, TriggerPoint::IngressResponse, 403, &mut b);
    assert_eq!(ingest(&dd.base, b.freeze()).await.status(), 204);

    let xdrs = |base: String| async move {
        let r = client().get(&format!("{base}/dd-admin/v1/xdrs?supi={supi}")).send().await.unwrap();
        assert_eq!(r.status(), 200, "{:?}", r.body());
        r.json::<Vec<Value>>().unwrap()
    };
    let mut got = Vec::new();
    for _ in 0..100 {
        got = xdrs(dd.base.clone()).await;
        if got.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(got.len(), 2, "{got:?}");
    let outcomes: Vec<&str> = got.iter().map(|x| x["outcome"].as_str().unwrap()).collect();
    assert!(outcomes.contains(&"success") && outcomes.contains(&"failure"), "{got:?}");
    assert!(got.iter().all(|x| x["supi"] == supi), "{got:?}");

    // A restart re-reads nothing it had stored as a second record.
    dd.stop().await;
    let dd = TestDd::start(dir.path(), dd::DdConfig::default()).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(xdrs(dd.base.clone()).await.len(), 2);
    let r =
        client().delete(&format!("{}/dd-admin/v1/correlations/txn", dd.base)).send().await.unwrap();
    assert_eq!(r.status(), 204);
    dd.stop().await;
}

on_both_backends_mt!(
    a_consumer_down_then_back_gets_everything_and_a_restart_keeps_feeds_and_offsets,
    the_admin_api_refuses_what_it_cannot_run_naming_the_field,
    a_filtered_feed_beside_a_full_one_gets_its_share_and_a_used_filter_cannot_go,
    a_correlation_turns_a_request_and_its_answer_into_one_xdr_kept_across_a_restart,
);
