//! Two BSF instances on one MariaDB database (issue #25, docs/store.md "Several instances on one
//! database"): a binding created at A is found by discovery at B and by B's Rx proxy (an AAR over
//! Diameter, answered from B's in-memory UE address index) within the feed's bound; deleted
//! likewise; a subscription made at B is notified once of a binding registered at A.
//!
//! MariaDB is started once per test binary by testkit; skipped without it unless
//! FIVECORE_REQUIRE_MARIADB=1.

mod common;

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use diameter::dictionary::{base, nasreq, rx};
use diameter::{result_code as rc, ApplicationId, DiameterNode, Message, NodeConfig, PeerConfig};
use diameter::{Route, RouteAction};
use serde_json::json;

use bsf::config::RxConfig;
use bsf::BsfConfig;
use common::*;

/// The bound a change must reach the other instance within: the feed's target is 100 ms
/// (measured by `cargo bench -p fivecore-bsf --bench coherence`), with room for a busy CI
/// machine.
const DEADLINE: Duration = Duration::from_millis(500);
const T: Duration = Duration::from_secs(5);
const BSF_HOST: &str = "bsf.test.example";
const BSF_REALM: &str = "test.example";
const AF_HOST: &str = "pcscf.ims.example";
const AF_REALM: &str = "ims.example";
const PCF_HOST: &str = "pcf1.pcf.example";
const PCF_REALM: &str = "pcf.example";

fn rx_config() -> BsfConfig {
    BsfConfig {
        rx: RxConfig {
            enabled: true,
            listen: "127.0.0.1:0".parse().unwrap(),
            origin_host: BSF_HOST.into(),
            origin_realm: BSF_REALM.into(),
            request_timeout_ms: 2000,
            binding_index: true,
            ..RxConfig::default()
        },
        ..BsfConfig::default()
    }
}

/// A Diameter peer of the BSF answering every Rx request with 2001.
async fn peer(host: &str, realm: &str, bsf: SocketAddr) -> DiameterNode {
    let mut c = NodeConfig::new(host, realm);
    c.applications = vec![ApplicationId::tgpp(rx::APP_ID)];
    c.peers = vec![PeerConfig::connect(BSF_HOST, bsf)];
    c.routes = vec![Route::new("*", RouteAction::Relay(vec![BSF_HOST.into()]))];
    c.reconnect_min = Duration::from_millis(50);
    c.reconnect_max = Duration::from_millis(200);
    c.request_timeout = Duration::from_secs(3);
    let (h, r) = (host.to_owned(), realm.to_owned());
    let node = DiameterNode::builder(c)
        .handler(rx::APP_ID, move |req: Message| {
            let (h, r) = (h.clone(), r.clone());
            async move {
                Message::answer_to(&req)
                    .origin(&h, &r)
                    .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
                    .result_code_avp(rc::DIAMETER_SUCCESS)
            }
        })
        .start()
        .await
        .unwrap();
    assert!(node.wait_open(BSF_HOST, T).await, "{host} connects to the BSF");
    node
}

/// The outcome of an AAR for `ip` sent through the BSF: 2001 when it reached the bound PCF,
/// 5065 when the BSF has no binding for the address.
async fn aar_outcome(af: &DiameterNode, ip: Ipv4Addr) -> u32 {
    let req = Message::request(rx::APP_ID, rx::CMD_AA)
        .session_id_avp(&af.new_session_id())
        .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
        .origin(af.origin_host(), af.origin_realm())
        .destination(BSF_REALM, None)
        .avp(nasreq::FRAMED_IP_ADDRESS.ipv4_octets(ip));
    let a = af.request(req).await.unwrap();
    a.result_code().or(a.experimental_result().map(|e| e.code)).expect("a result")
}

async fn within<F, Fut>(what: &str, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if check().await {
            return start.elapsed();
        }
        assert!(start.elapsed() < DEADLINE, "{what}: not within {DEADLINE:?}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

async fn index_ready(b: &TestBsf) {
    let ix = b.bsf.store.index().expect("index on").clone();
    tokio::time::timeout(T, async {
        while !ix.is_ready() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the index loads");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_written_at_one_instance_is_served_by_the_others_index() {
    if !testkit::backends::use_mariadb() {
        return;
    }
    let dir = state_dir();
    let a = TestBsf::start(dir.path(), rx_config()).await;
    let b = TestBsf::start(dir.path(), rx_config()).await;
    index_ready(&a).await;
    index_ready(&b).await;
    let rx_b = b.rx.expect("Rx on");
    let pcf = peer(PCF_HOST, PCF_REALM, rx_b).await;
    let af_node = peer(AF_HOST, AF_REALM, rx_b).await;
    let af = &af_node;
    let c = client();
    let unbound = rx::experimental_result::IP_CAN_SESSION_NOT_AVAILABLE;
    let ip = Ipv4Addr::new(10, 0, 0, 42);
    assert_eq!(aar_outcome(af, ip).await, unbound);

    let mut binding = binding(42);
    binding["pcfDiamHost"] = json!(PCF_HOST);
    binding["pcfDiamRealm"] = json!(PCF_REALM);
    let r = post(&c, &a.url("/pcfBindings"), &binding).await;
    assert_eq!(r.status(), 201, "{:?}", body(&r));
    let loc = r.header("location").unwrap().to_owned();
    // Discovery at B reads the database: there at once.
    let r = get(&c, &b.url("/pcfBindings?ipv4Addr=10.0.0.42")).await;
    assert_eq!(r.status(), 200, "{:?}", body(&r));
    // B's Rx index learns it from the feed.
    within("binding in B's Rx index", || async move {
        aar_outcome(af, ip).await == rc::DIAMETER_SUCCESS
    })
    .await;

    // Moved to another address at A: B's index drops the old one and serves the new.
    let r = merge_patch(&c, &loc, &json!({"ipv4Addr": "10.0.0.43"})).await;
    assert_eq!(r.status(), 200, "{:?}", body(&r));
    let moved = Ipv4Addr::new(10, 0, 0, 43);
    within("update in B's Rx index", || async move {
        aar_outcome(af, moved).await == rc::DIAMETER_SUCCESS && aar_outcome(af, ip).await == unbound
    })
    .await;

    assert_eq!(delete(&c, &loc).await.status(), 204);
    within("deletion in B's Rx index", || async move { aar_outcome(af, moved).await == unbound })
        .await;
    let r = get(&c, &b.url("/pcfBindings?ipv4Addr=10.0.0.43")).await;
    assert_eq!(r.status(), 204);
    assert_eq!(b.bsf.store.index().unwrap().len(), (0, 0));
    af_node.shutdown().await;
    pcf.shutdown().await;
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_at_one_instance_is_notified_once_of_a_binding_at_the_other() {
    if !testkit::backends::use_mariadb() {
        return;
    }
    let dir = state_dir();
    let a = TestBsf::start(dir.path(), BsfConfig::default()).await;
    let b = TestBsf::start(dir.path(), BsfConfig::default()).await;
    let c = client();
    let mut sink = Sink::start().await;
    let supi = binding(7)["supi"].as_str().unwrap().to_owned();
    let sub = json!({
        "events": ["PCF_PDU_SESSION_BINDING_REGISTRATION", "PCF_PDU_SESSION_BINDING_DEREGISTRATION"],
        "notifUri": sink.url, "notifCorreId": "corr-7", "supi": supi,
        "snssaiDnnPairs": {"dnn": "internet", "snssai": {"sst": 1, "sd": "000001"}},
    });
    let r = post(&c, &b.url("/subscriptions"), &sub).await;
    assert_eq!(r.status(), 201, "{:?}", body(&r));
    let sub_loc = r.header("location").unwrap().to_owned();
    let sub_id = &sub_loc.rsplit('/').next().unwrap().to_owned();
    let a_subs = &a.bsf.subscriptions;
    within("subscription reaches A", || async move { a_subs.get(sub_id).is_some() }).await;

    let r = post(&c, &a.url("/pcfBindings"), &binding(7)).await;
    assert_eq!(r.status(), 201);
    let loc = r.header("location").unwrap().to_owned();
    let n = sink.next().await;
    assert_eq!(n["eventNotifs"][0]["event"], "PCF_PDU_SESSION_BINDING_REGISTRATION");
    assert_eq!(delete(&c, &loc).await.status(), 204);
    let n = sink.next().await;
    assert_eq!(n["eventNotifs"][0]["event"], "PCF_PDU_SESSION_BINDING_DEREGISTRATION");
    sink.quiet().await;

    // Unsubscribed at B: A stops notifying.
    assert_eq!(delete(&c, &sub_loc).await.status(), 204);
    within("unsubscription reaches A", || async move { a_subs.get(sub_id).is_none() }).await;
    assert_eq!(post(&c, &a.url("/pcfBindings"), &binding(7)).await.status(), 201);
    sink.quiet().await;
    a.stop().await;
    b.stop().await;
}
