//! `[bsf.copy]`: the BSF's message copies reach a Data Director (a stand-in ingest API on
//! 127.0.0.1, testkit::dd_ingest) over real sockets: a binding create and the notification it
//! sends, at the four trigger points with their metadata; copies kept while the Data Director
//! is down and delivered once it is back; dropped and counted beyond the bound; nothing at all
//! with copying off.

mod common;

use std::time::Duration;

use common::*;
use dd_client::{Copy, CopyConfig, Protocol, TriggerPoint};
use serde_json::{json, Value};
use testkit::dd_ingest::Ingest;

const T: Duration = Duration::from_secs(10);
const INSTANCE: &str = "8370e6ad-be17-4f89-9541-0c008a3dece0";

fn copying(uri: String) -> CopyConfig {
    CopyConfig { enabled: true, uri, ..CopyConfig::default() }
}

async fn start(dir: &std::path::Path, copy: CopyConfig) -> TestBsf {
    let config = bsf::BsfConfig { copy, ..bsf::BsfConfig::default() };
    TestBsf::start_as(dir, config, Some(INSTANCE.into())).await
}

async fn metrics(bsf: &TestBsf) -> String {
    let r = get(&client(), &format!("{}/metrics", bsf.base)).await;
    String::from_utf8(r.body().to_vec()).unwrap()
}

fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

fn json_of(c: &Copy) -> Value {
    serde_json::from_slice(&c.body()).unwrap()
}

fn find<'a>(copies: &'a [Copy], trigger: TriggerPoint, operation: &str) -> Vec<&'a Copy> {
    copies.iter().filter(|c| c.trigger == trigger && c.operation() == operation).collect()
}

#[tokio::test]
async fn a_binding_create_and_the_notification_it_sends_are_copied_at_four_trigger_points() {
    let dir = tempfile::tempdir().unwrap();
    let ingest = Ingest::start().await;
    let bsf = start(dir.path(), copying(ingest.uri())).await;
    let c = client();
    let mut sink = Sink::start().await;
    let supi = binding(7)["supi"].as_str().unwrap().to_owned();
    let sub = json!({
        "events": ["PCF_PDU_SESSION_BINDING_REGISTRATION"],
        "notifUri": sink.url, "notifCorreId": "corr-7", "supi": supi,
    });
    assert_eq!(post(&c, &bsf.url("/subscriptions"), &sub).await.status(), 201);
    let r = post(&c, &bsf.url("/pcfBindings"), &binding(7)).await;
    assert_eq!(r.status(), 201);
    let binding_id = r.header("location").unwrap().rsplit('/').next().unwrap().to_owned();
    sink.next().await;

    let copies = ingest
        .wait_for(T, |c| {
            c.iter().filter(|c| c.trigger == TriggerPoint::EgressResponse).count() == 1
                && c.iter().filter(|c| c.trigger == TriggerPoint::IngressResponse).count() == 2
        })
        .await;

    // Every copy: this BSF, one sequence each.
    for (i, x) in copies.iter().enumerate() {
        assert_eq!((x.nf_type(), x.nf_instance()), ("BSF", INSTANCE));
        assert_eq!(x.protocol, Protocol::Http2);
        assert_eq!(x.sequence, i as u64, "{}", testkit::dd_ingest::summary(x));
    }

    let req = find(&copies, TriggerPoint::IngressRequest, "Nbsf_Management_Register");
    let ans = find(&copies, TriggerPoint::IngressResponse, "Nbsf_Management_Register");
    let (req, ans) = (req[0], ans[0]);
    for x in [req, ans] {
        assert_eq!(x.service(), "nbsf-management");
        assert_eq!((x.method(), x.path()), ("POST", "/nbsf-management/v1/pcfBindings"));
        assert_eq!(x.supi(), supi);
        assert_eq!(x.gpsi(), binding(7)["gpsi"].as_str().unwrap());
        assert!(x.peer().starts_with("127.0.0.1:"), "{}", x.peer());
        assert_eq!(x.stream_id, 0, "hyper does not expose a served stream's id");
    }
    assert_eq!(req.transaction, ans.transaction);
    assert_eq!((req.status, ans.status), (0, 201));
    assert_eq!(req.session_id(), "");
    assert_eq!(ans.session_id(), binding_id, "from the 201's Location");
    assert!(ans.timestamp_ns >= req.timestamp_ns);
    assert_eq!(req.header(":method"), Some(&b"POST"[..]));
    assert_eq!(req.header(":path"), Some(&b"/nbsf-management/v1/pcfBindings"[..]));
    assert_eq!(req.header(":scheme"), Some(&b"http"[..]));
    assert!(req.header(":authority").is_some());
    assert_eq!(req.header("content-type"), Some(&b"application/json"[..]));
    assert_eq!(json_of(req), binding(7));
    assert_eq!(ans.header(":status"), Some(&b"201"[..]));
    assert!(ans.header("location").is_some());
    assert_eq!(json_of(ans)["supi"], supi);

    // The notification the binding caused: what the BSF sent and what the sink answered.
    let out: Vec<&Copy> = copies
        .iter()
        .filter(|c| matches!(c.trigger, TriggerPoint::EgressRequest | TriggerPoint::EgressResponse))
        .collect();
    assert_eq!(out.len(), 2);
    let sink_authority = sink.url.trim_start_matches("http://").split('/').next().unwrap();
    for x in &out {
        assert_eq!((x.method(), x.path(), x.service()), ("POST", "/notify", "notify"));
        assert_eq!(x.peer(), sink_authority);
        assert_eq!(x.operation(), "", "the client is not told the operation");
        assert_eq!(x.stream_id % 2, 1, "the BSF's own h2 stream");
    }
    assert_eq!(out[0].trigger, TriggerPoint::EgressRequest);
    assert_eq!(out[0].transaction, out[1].transaction);
    assert_eq!(out[0].stream_id, out[1].stream_id);
    assert_eq!((out[0].status, out[1].status), (0, 204));
    assert_eq!(json_of(out[0])["notifCorreId"], "corr-7");
    assert_eq!(out[0].header(":method"), Some(&b"POST"[..]));
    assert_eq!(out[1].header(":status"), Some(&b"204"[..]));

    let text = metrics(&bsf).await;
    assert_eq!(metric(&text, "dd_copies_total{trigger=\"ingress_request\"}"), Some(2.0));
    assert_eq!(metric(&text, "dd_copies_total{trigger=\"egress_response\"}"), Some(1.0));
    assert_eq!(metric(&text, "dd_copy_buffer_bytes"), Some(0.0));
    bsf.stop().await;
    ingest.stop();
}

#[tokio::test]
async fn copies_wait_while_the_data_director_is_down_and_arrive_in_order_once_it_is_back() {
    let dir = tempfile::tempdir().unwrap();
    let ingest = Ingest::start().await;
    let addr = ingest.addr;
    ingest.stop();
    let bsf = start(dir.path(), copying(format!("http://{addr}"))).await;
    let c = client();
    for n in 0..20 {
        assert_eq!(post(&c, &bsf.url("/pcfBindings"), &binding(n)).await.status(), 201);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let text = metrics(&bsf).await;
    assert!(metric(&text, "dd_copy_batches_total{result=\"unreachable\"}").unwrap() >= 1.0);
    assert!(metric(&text, "dd_copy_buffer_bytes").unwrap() > 0.0, "{text}");

    let ingest = Ingest::start_on(addr).await;
    let copies = ingest.wait_for(T, |c| c.len() == 40).await;
    for (i, x) in copies.iter().enumerate() {
        assert_eq!(x.sequence, i as u64, "nothing lost, nothing reordered");
    }
    let supis: Vec<&str> = copies
        .iter()
        .filter(|c| c.trigger == TriggerPoint::IngressRequest)
        .map(Copy::supi)
        .collect();
    let sent: Vec<String> =
        (0..20).map(|n| binding(n)["supi"].as_str().unwrap().to_owned()).collect();
    assert_eq!(supis, sent);
    let text = metrics(&bsf).await;
    assert_eq!(metric(&text, "dd_copy_buffer_bytes"), Some(0.0));
    assert_eq!(metric(&text, "dd_copies_dropped_total{reason=\"buffer_full\"}"), Some(0.0));
    bsf.stop().await;
    ingest.stop();
}

#[tokio::test]
async fn beyond_the_bound_copies_are_dropped_and_counted_and_the_bsf_answers_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let ingest = Ingest::start().await;
    let addr = ingest.addr;
    ingest.stop();
    let bound = dd_client::config::MIN_BUFFER_BYTES;
    let bsf =
        start(dir.path(), CopyConfig { buffer_bytes: bound, ..copying(format!("http://{addr}")) })
            .await;
    let c = client();
    for n in 0..100 {
        assert_eq!(post(&c, &bsf.url("/pcfBindings"), &binding(n)).await.status(), 201);
    }
    let text = metrics(&bsf).await;
    let dropped = metric(&text, "dd_copies_dropped_total{reason=\"buffer_full\"}").unwrap();
    let taken = metric(&text, "dd_copies_total{trigger=\"ingress_request\"}").unwrap()
        + metric(&text, "dd_copies_total{trigger=\"ingress_response\"}").unwrap();
    assert!(dropped > 0.0, "{text}");
    assert_eq!(dropped + taken, 200.0, "every copy is taken or counted as dropped");
    assert!(metric(&text, "dd_copy_buffer_bytes").unwrap() <= bound as f64);

    // Back: what was kept arrives, a contiguous run from the first copy.
    let ingest = Ingest::start_on(addr).await;
    let copies = ingest.wait_for(T, |c| c.len() == taken as usize).await;
    for (i, x) in copies.iter().enumerate() {
        assert_eq!(x.sequence, i as u64);
    }
    bsf.stop().await;
    ingest.stop();
}

#[tokio::test]
async fn with_copying_off_nothing_is_sent_and_no_copier_exists() {
    let dir = tempfile::tempdir().unwrap();
    let ingest = Ingest::start().await;
    let off = CopyConfig { enabled: false, ..copying(ingest.uri()) };
    let bsf = start(dir.path(), off).await;
    let c = client();
    for n in 0..5 {
        assert_eq!(post(&c, &bsf.url("/pcfBindings"), &binding(n)).await.status(), 201);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(ingest.posts(), 0);
    let text = metrics(&bsf).await;
    assert!(!text.contains("dd_copies"), "no copier, no tap: {text}");
    bsf.stop().await;
    ingest.stop();
}

#[tokio::test]
async fn an_invalid_copy_section_stops_the_start_naming_each_field() {
    let dir = tempfile::tempdir().unwrap();
    let config = bsf::BsfConfig {
        copy: CopyConfig {
            enabled: true,
            uri: "dd:7004".into(),
            triggers: vec!["ingress".into()],
            ..CopyConfig::default()
        },
        ..bsf::BsfConfig::default()
    };
    let run = bsf::RunConfig {
        bsf: config,
        sbi: sbi::ServerConfig::default(),
        client: sbi::client::ClientConfig::default(),
        store: store::SqliteConfig::new(dir.path().join("bsf.db")),
        instance_id: None,
    };
    let err = bsf::bind(run).await.err().expect("refused").to_string();
    assert!(err.contains("[bsf.copy] uri: "), "{err}");
    assert!(err.contains("triggers[0]: \"ingress\" is not one of"), "{err}");
}
