//! The BSF's Diameter Rx proxy over real sockets on 127.0.0.1: an AF (P-CSCF) test double and a
//! PCF test double, both DiameterNodes connecting to the BSF; bindings created over HTTP; on
//! SQLite and on MariaDB (where a restarted BSF loads its UE address index from MariaDB).

#[macro_use]
mod common;

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use diameter::builders::framed_ipv6_prefix;
use diameter::dictionary::{base, nasreq, rx};
use diameter::{
    result_code as rc, ApplicationId, DiameterNode, Message, NodeConfig, PeerConfig, Route,
    RouteAction, VENDOR_3GPP,
};
use serde_json::json;

use bsf::config::RxConfig;
use bsf::BsfConfig;
use common::*;

const T: Duration = Duration::from_secs(5);
const BSF_HOST: &str = "bsf.test.example";
const BSF_REALM: &str = "test.example";
const AF_HOST: &str = "pcscf.ims.example";
const AF_REALM: &str = "ims.example";
const PCF_HOST: &str = "pcf1.pcf.example";
const PCF_REALM: &str = "pcf.example";

/// What a test double received: (command code, Session-Id, Destination-Host, Route-Records).
type Seen = Arc<Mutex<Vec<(u32, String, Option<String>, Vec<String>)>>>;

async fn start_bsf(dir: &std::path::Path) -> TestBsf {
    start_bsf_with(dir, true).await
}

/// With `index`, AARs are answered from the in-memory binding index (once loaded); without,
/// by a store read each.
async fn start_bsf_with(dir: &std::path::Path, index: bool) -> TestBsf {
    let config = BsfConfig {
        rx: RxConfig {
            enabled: true,
            listen: "127.0.0.1:0".parse().unwrap(),
            origin_host: BSF_HOST.into(),
            origin_realm: BSF_REALM.into(),
            request_timeout_ms: 2000,
            binding_index: index,
            ..RxConfig::default()
        },
        // Without the index means none at all: discovery too reads the store.
        discovery_index: index,
        ..BsfConfig::default()
    };
    TestBsf::start(dir, config).await
}

/// A node connecting to the BSF, answering every Rx request with 2001 and recording it; its
/// default route relays everything to the BSF.
async fn double(host: &str, realm: &str, bsf: SocketAddr, seen: Seen) -> DiameterNode {
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
            let (h, r, seen) = (h.clone(), r.clone(), seen.clone());
            async move {
                let rr = req
                    .find_all(&base::ROUTE_RECORD)
                    .filter_map(|a| a.as_str().ok().map(str::to_owned))
                    .collect();
                seen.lock().unwrap().push((
                    req.command_code(),
                    req.session_id().unwrap_or_default().to_owned(),
                    req.destination_host().map(str::to_owned),
                    rr,
                ));
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

fn aar_base(af: &DiameterNode, sid: &str) -> Message {
    Message::request(rx::APP_ID, rx::CMD_AA)
        .session_id_avp(sid)
        .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
        .origin(af.origin_host(), af.origin_realm())
        .destination(BSF_REALM, None)
}

fn aar(af: &DiameterNode, sid: &str, ip: Ipv4Addr) -> Message {
    aar_base(af, sid).avp(nasreq::FRAMED_IP_ADDRESS.ipv4_octets(ip))
}

fn str_req(af: &DiameterNode, sid: &str) -> Message {
    Message::request(rx::APP_ID, rx::CMD_SESSION_TERMINATION)
        .session_id_avp(sid)
        .origin(af.origin_host(), af.origin_realm())
        .destination(BSF_REALM, None)
        .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
        .avp(base::TERMINATION_CAUSE.enumerated(1))
}

async fn create_binding(b: &TestBsf, n: u32, pcf_host: &str) -> String {
    let mut body = binding(n);
    body["pcfDiamHost"] = json!(pcf_host);
    body["pcfDiamRealm"] = json!(PCF_REALM);
    let r = post(&client(), &b.url("/pcfBindings"), &body).await;
    assert_eq!(r.status().as_u16(), 201, "{}", String::from_utf8_lossy(r.body()));
    r.header("location").unwrap().to_owned()
}

fn ip(n: u32) -> Ipv4Addr {
    Ipv4Addr::new(10, 0, (n / 256) as u8, (n % 256) as u8)
}

async fn aar_update_rar_asr_and_str_follow_the_session_through_the_bsf() {
    let dir = state_dir();
    let b = start_bsf(dir.path()).await;
    let addr = b.rx.expect("Rx enabled");
    let (af_seen, pcf_seen): (Seen, Seen) = Default::default();
    let pcf = double(PCF_HOST, PCF_REALM, addr, pcf_seen.clone()).await;
    let af = double(AF_HOST, AF_REALM, addr, af_seen.clone()).await;
    let location = create_binding(&b, 1, PCF_HOST).await;

    // AAR (initial): routed by the binding of Framed-IP-Address to the PCF; its AAA comes back.
    let sid = af.new_session_id();
    let a = af.request(aar(&af, &sid, ip(1))).await.unwrap();
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS));
    assert_eq!(a.origin_host(), Some(PCF_HOST));
    assert_eq!(a.session_id(), Some(sid.as_str()));
    {
        let seen = pcf_seen.lock().unwrap();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].0, rx::CMD_AA);
        assert_eq!(seen[0].1, sid);
        assert_eq!(seen[0].2.as_deref(), Some(PCF_HOST));
        assert!(seen[0].3.contains(&AF_HOST.to_owned()), "Route-Record {:?}", seen[0].3);
    }

    // The binding goes away: the session still follows the remembered PCF (no lookup).
    assert_eq!(delete(&client(), &location).await.status().as_u16(), 204);
    let a = af.request(aar(&af, &sid, ip(1))).await.unwrap();
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS));
    assert_eq!(a.origin_host(), Some(PCF_HOST));
    assert_eq!(pcf_seen.lock().unwrap().len(), 2);

    // PCF-initiated RAR toward the AF (Destination-Host = the AF) and its RAA.
    let rar = Message::request(rx::APP_ID, rx::CMD_RE_AUTH)
        .session_id_avp(&sid)
        .origin(PCF_HOST, PCF_REALM)
        .destination(AF_REALM, Some(AF_HOST))
        .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
        .avp(base::RE_AUTH_REQUEST_TYPE.enumerated(0))
        .avp(rx::SPECIFIC_ACTION.enumerated(1));
    let raa = pcf.request(rar).await.unwrap();
    assert_eq!(raa.result_code(), Some(rc::DIAMETER_SUCCESS));
    assert_eq!(raa.origin_host(), Some(AF_HOST));
    {
        let seen = af_seen.lock().unwrap();
        assert_eq!(seen.len(), 1);
        assert_eq!((seen[0].0, seen[0].1.as_str()), (rx::CMD_RE_AUTH, sid.as_str()));
    }

    // An ASR addressed to the BSF itself goes to the AF the session map names.
    let asr = Message::request(rx::APP_ID, rx::CMD_ABORT_SESSION)
        .session_id_avp(&sid)
        .origin(PCF_HOST, PCF_REALM)
        .destination(BSF_REALM, Some(BSF_HOST))
        .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
        .avp(rx::ABORT_CAUSE.enumerated(0));
    let asa = pcf.request(asr).await.unwrap();
    assert_eq!(asa.result_code(), Some(rc::DIAMETER_SUCCESS));
    assert_eq!(asa.origin_host(), Some(AF_HOST));
    assert_eq!(af_seen.lock().unwrap().last().unwrap().0, rx::CMD_ABORT_SESSION);

    // STR follows the session; the STA ends it: a second STR is an unknown session.
    let sta = af.request(str_req(&af, &sid)).await.unwrap();
    assert_eq!(sta.result_code(), Some(rc::DIAMETER_SUCCESS));
    assert_eq!(sta.origin_host(), Some(PCF_HOST));
    assert_eq!(pcf_seen.lock().unwrap().last().unwrap().0, rx::CMD_SESSION_TERMINATION);
    let sta = af.request(str_req(&af, &sid)).await.unwrap();
    assert_eq!(sta.result_code(), Some(rc::DIAMETER_UNKNOWN_SESSION_ID));
    assert_eq!(sta.origin_host(), Some(BSF_HOST));
    assert_eq!(pcf_seen.lock().unwrap().len(), 3);

    af.shutdown().await;
    pcf.shutdown().await;
    b.stop().await;
}

async fn aar_by_ipv6_prefix_and_ip_domain() {
    let dir = state_dir();
    let b = start_bsf(dir.path()).await;
    let addr = b.rx.unwrap();
    let (af_seen, pcf_seen): (Seen, Seen) = Default::default();
    let _pcf = double(PCF_HOST, PCF_REALM, addr, pcf_seen.clone()).await;
    let af = double(AF_HOST, AF_REALM, addr, af_seen).await;
    let c = client();
    let r = post(
        &c,
        &b.url("/pcfBindings"),
        &json!({"dnn": "ims", "snssai": {"sst": 1}, "ipv6Prefix": "2001:db8:7::/64",
                "pcfFqdn": "pcf1.example.com", "pcfDiamHost": PCF_HOST, "pcfDiamRealm": PCF_REALM}),
    )
    .await;
    assert_eq!(r.status().as_u16(), 201, "{}", String::from_utf8_lossy(r.body()));
    let mut v4 = binding(3);
    v4["ipDomain"] = json!("domain-a");
    v4["pcfDiamHost"] = json!(PCF_HOST);
    assert_eq!(post(&c, &b.url("/pcfBindings"), &v4).await.status().as_u16(), 201);

    // The UE's address as a /128 finds the /64 binding.
    let ue: Ipv6Addr = "2001:db8:7::42".parse().unwrap();
    let sid = af.new_session_id();
    let a = af.request(aar_base(&af, &sid).avp(framed_ipv6_prefix(ue, 128))).await.unwrap();
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS));
    assert_eq!(a.origin_host(), Some(PCF_HOST));

    // IPv4 with IP-Domain-Id: the matching domain reaches the PCF, another one has no binding.
    let ok = aar(&af, &af.new_session_id(), ip(3)).avp(rx::IP_DOMAIN_ID.bytes(&b"domain-a"[..]));
    assert_eq!(af.request(ok).await.unwrap().result_code(), Some(rc::DIAMETER_SUCCESS));
    let other = aar(&af, &af.new_session_id(), ip(3)).avp(rx::IP_DOMAIN_ID.bytes(&b"domain-b"[..]));
    let a = af.request(other).await.unwrap();
    assert_eq!(a.experimental_result().map(|e| e.code), Some(5065));
    assert_eq!(pcf_seen.lock().unwrap().len(), 2);
    b.stop().await;
}

async fn no_binding_is_5065_and_an_unconnected_pcf_is_3002() {
    let dir = state_dir();
    let b = start_bsf(dir.path()).await;
    let addr = b.rx.unwrap();
    let (af_seen, pcf_seen): (Seen, Seen) = Default::default();
    let _pcf = double(PCF_HOST, PCF_REALM, addr, pcf_seen.clone()).await;
    let af = double(AF_HOST, AF_REALM, addr, af_seen).await;

    // No binding for the UE address: AAA with Experimental-Result 5065 from the BSF.
    let a = af.request(aar(&af, &af.new_session_id(), ip(9))).await.unwrap();
    let er = a.experimental_result().expect("Experimental-Result");
    assert_eq!(
        (er.vendor_id, er.code),
        (VENDOR_3GPP, rx::experimental_result::IP_CAN_SESSION_NOT_AVAILABLE)
    );
    assert_eq!(a.result_code(), None);
    assert_eq!(a.origin_host(), Some(BSF_HOST));
    assert!(!a.is_error());

    // A binding naming a PCF that is not connected to the BSF: 3002, E bit.
    create_binding(&b, 2, "pcf2.pcf.example").await;
    let sid = af.new_session_id();
    let a = af.request(aar(&af, &sid, ip(2))).await.unwrap();
    assert_eq!(a.result_code(), Some(rc::DIAMETER_UNABLE_TO_DELIVER));
    assert!(a.is_error());
    assert_eq!(a.origin_host(), Some(BSF_HOST));
    // The failed session was not remembered: its STR is an unknown session.
    let sta = af.request(str_req(&af, &sid)).await.unwrap();
    assert_eq!(sta.result_code(), Some(rc::DIAMETER_UNKNOWN_SESSION_ID));
    assert!(pcf_seen.lock().unwrap().is_empty());
    b.stop().await;
}

async fn rx_disabled_by_default() {
    let dir = state_dir();
    let b = TestBsf::start(dir.path(), BsfConfig::default()).await;
    assert!(b.rx.is_none());
    b.stop().await;
}

/// `[bsf.rx]`'s Diameter limits reach the node: a first message declaring more than
/// `max_cer_bytes` is closed at once, and with `max_connections_before_cer = 1` a second silent
/// connection is closed at once while the first waits; an AF still opens.
async fn rx_diameter_limits_come_from_the_config() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;
    let dir = state_dir();
    let config = BsfConfig {
        rx: RxConfig {
            enabled: true,
            listen: "127.0.0.1:0".parse().unwrap(),
            origin_host: BSF_HOST.into(),
            origin_realm: BSF_REALM.into(),
            limits: nf::DiameterLimits {
                max_cer_bytes: 4096,
                max_connections_before_cer: 1,
                ..nf::DiameterLimits::default()
            },
            ..RxConfig::default()
        },
        ..BsfConfig::default()
    };
    let b = TestBsf::start(dir.path(), config).await;
    let addr = b.rx.unwrap();
    /// Whether the BSF closes the connection within a second.
    async fn closed(s: &mut TcpStream) -> bool {
        let mut buf = [0u8; 64];
        matches!(
            tokio::time::timeout(Duration::from_secs(1), s.read(&mut buf)).await,
            Ok(Ok(0) | Err(_))
        )
    }
    // A CER header declaring 8 KiB (a 16-byte stand-in body follows).
    let mut header = vec![1u8, 0, 0x20, 0, 0x80, 0, 1, 1];
    header.resize(36, 0);
    let mut big = TcpStream::connect(addr).await.unwrap();
    big.write_all(&header).await.unwrap();
    assert!(closed(&mut big).await, "8 KiB first message over max_cer_bytes = 4096");

    // A silent connection the BSF keeps (a retry in case the one above still counted) ...
    let mut one = None;
    for _ in 0..5 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        if !closed(&mut s).await {
            one = Some(s);
            break;
        }
    }
    assert!(one.is_some(), "a silent connection is kept until the CER timeout");
    // ... and the next is refused while it waits.
    let mut two = TcpStream::connect(addr).await.unwrap();
    assert!(closed(&mut two).await, "beyond max_connections_before_cer = 1");
    drop((one, two));

    let seen: Seen = Default::default();
    let af = double(AF_HOST, AF_REALM, addr, seen).await;
    assert!(af.wait_open(BSF_HOST, T).await, "an AF still connects");
    af.shutdown().await;
    b.stop().await;
}

/// `mode = "redirect"`: the AAR is answered 3006 naming the bound PCF (Redirect-Host-Usage
/// ALL_SESSION); an AF connected to that PCF follows it and the PCF answers; no binding is still
/// 5065; a later request of the session that reaches the BSF is redirected to the same PCF.
async fn redirect_mode_names_the_bound_pcf() {
    use bsf::config::RxMode;
    let dir = state_dir();
    let config = BsfConfig {
        rx: RxConfig {
            enabled: true,
            listen: "127.0.0.1:0".parse().unwrap(),
            origin_host: BSF_HOST.into(),
            origin_realm: BSF_REALM.into(),
            session_idle_secs: 600,
            mode: RxMode::Redirect,
            ..RxConfig::default()
        },
        ..BsfConfig::default()
    };
    let b = TestBsf::start(dir.path(), config).await;
    let bsf_addr = b.rx.unwrap();
    create_binding(&b, 7, PCF_HOST).await;

    // The PCF listens; AFs connect to it and to the BSF.
    let pcf_seen: Seen = Default::default();
    let mut pc = NodeConfig::new(PCF_HOST, PCF_REALM);
    pc.applications = vec![ApplicationId::tgpp(rx::APP_ID)];
    pc.listen = Some("127.0.0.1:0".parse().unwrap());
    pc.accept_unknown_peers = true;
    let seen = pcf_seen.clone();
    let pcf = DiameterNode::builder(pc)
        .handler(rx::APP_ID, move |req: Message| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push((
                    req.command_code(),
                    req.session_id().unwrap_or_default().to_owned(),
                    req.destination_host().map(str::to_owned),
                    Vec::new(),
                ));
                Message::answer_to(&req)
                    .origin(PCF_HOST, PCF_REALM)
                    .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
                    .result_code_avp(rc::DIAMETER_SUCCESS)
            }
        })
        .start()
        .await
        .unwrap();
    let pcf_addr = pcf.local_addr().unwrap();
    let af = |host: &str, follow: bool| {
        let mut c = NodeConfig::new(host, AF_REALM);
        c.applications = vec![ApplicationId::tgpp(rx::APP_ID)];
        c.peers =
            vec![PeerConfig::connect(BSF_HOST, bsf_addr), PeerConfig::connect(PCF_HOST, pcf_addr)];
        c.routes = vec![Route::new("*", RouteAction::Relay(vec![BSF_HOST.into()]))];
        c.follow_redirects = follow;
        DiameterNode::builder(c).start()
    };
    let plain = af("af-plain.ims.example", false).await.unwrap();
    let follower = af(AF_HOST, true).await.unwrap();
    for n in [&plain, &follower] {
        assert!(n.wait_open(BSF_HOST, T).await && n.wait_open(PCF_HOST, T).await);
    }

    let sid = plain.new_session_id();
    let a = plain.request(aar(&plain, &sid, ip(7))).await.unwrap();
    assert_eq!(a.result_code(), Some(rc::DIAMETER_REDIRECT_INDICATION));
    assert!(a.is_error());
    assert_eq!(a.origin_host(), Some(BSF_HOST));
    let expected = format!("aaa://{PCF_HOST}");
    assert_eq!(a.get_str(&base::REDIRECT_HOST), Some(expected.as_str()));
    assert_eq!(a.get_u32(&base::REDIRECT_HOST_USAGE), Some(1));
    assert_eq!(a.get_u32(&base::REDIRECT_MAX_CACHE_TIME), Some(600));
    assert!(pcf_seen.lock().unwrap().is_empty(), "the BSF proxies nothing in redirect mode");
    // The session is remembered: its STR reaching the BSF is redirected to the same PCF.
    let a = plain.request(str_req(&plain, &sid)).await.unwrap();
    assert_eq!(a.result_code(), Some(rc::DIAMETER_REDIRECT_INDICATION));
    assert_eq!(a.get_str(&base::REDIRECT_HOST), Some(expected.as_str()));

    // An AF that follows redirects gets the PCF's own answer.
    // (Its AAR names the PCFs' realm, as an AF's does when the BSF and the PCFs share the
    // operator's realm: the PCF only serves its own realm.)
    let sid = follower.new_session_id();
    let req = Message::request(rx::APP_ID, rx::CMD_AA)
        .session_id_avp(&sid)
        .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
        .origin(follower.origin_host(), follower.origin_realm())
        .destination(PCF_REALM, None)
        .avp(nasreq::FRAMED_IP_ADDRESS.ipv4_octets(ip(7)));
    let a = follower.request(req).await.unwrap();
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS));
    assert_eq!(a.origin_host(), Some(PCF_HOST));
    assert_eq!(pcf_seen.lock().unwrap().len(), 1);

    // No binding: 5065 as in proxy mode.
    let a = plain.request(aar(&plain, &plain.new_session_id(), ip(99))).await.unwrap();
    assert_eq!(a.experimental_result().map(|e| e.code), Some(5065));

    plain.shutdown().await;
    follower.shutdown().await;
    pcf.shutdown().await;
    b.stop().await;
}

/// A new Rx session's AAR for UE `ip`: the Result-Code, or the Experimental-Result-Code.
async fn aar_outcome(af: &DiameterNode, ip: Ipv4Addr) -> u32 {
    let a = af.request(aar(af, &af.new_session_id(), ip)).await.unwrap();
    a.result_code().or(a.experimental_result().map(|e| e.code)).expect("a result")
}

/// The PCF an AAR reaches follows the bindings as they are updated, deleted and reloaded after
/// a restart, with the index (where the writes change it in place and a restart loads it from
/// the store) and without it (a store read per AAR).
async fn aar_lookups_follow_update_delete_and_restart(index: bool) {
    let dir = state_dir();
    let b = start_bsf_with(dir.path(), index).await;
    let addr = b.rx.unwrap();
    let (af_seen, pcf_seen): (Seen, Seen) = Default::default();
    let pcf = double(PCF_HOST, PCF_REALM, addr, pcf_seen.clone()).await;
    let af = double(AF_HOST, AF_REALM, addr, af_seen.clone()).await;
    let c = client();
    let loc5 = create_binding(&b, 5, PCF_HOST).await;
    create_binding(&b, 6, PCF_HOST).await;
    assert_eq!(aar_outcome(&af, ip(5)).await, rc::DIAMETER_SUCCESS);

    // The binding now names a PCF that is not connected: 3002.
    let r = merge_patch(&c, &loc5, &json!({"pcfDiamHost": "pcf9.pcf.example"})).await;
    assert_eq!(r.status().as_u16(), 200, "{}", String::from_utf8_lossy(r.body()));
    assert_eq!(aar_outcome(&af, ip(5)).await, rc::DIAMETER_UNABLE_TO_DELIVER);
    // ... and back.
    let r = merge_patch(&c, &loc5, &json!({"pcfDiamHost": PCF_HOST})).await;
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(aar_outcome(&af, ip(5)).await, rc::DIAMETER_SUCCESS);
    // A new binding for the same UE address replaces it (same DNN and S-NSSAI).
    let mut again = binding(5);
    again["pcfDiamHost"] = json!("pcf8.pcf.example");
    assert_eq!(post(&c, &b.url("/pcfBindings"), &again).await.status().as_u16(), 201);
    assert_eq!(aar_outcome(&af, ip(5)).await, rc::DIAMETER_UNABLE_TO_DELIVER);
    // The UE address moves in an update: the old one has no binding any more.
    let loc7 = create_binding(&b, 7, PCF_HOST).await;
    let r = merge_patch(&c, &loc7, &json!({"ipv4Addr": "10.0.0.8"})).await;
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(
        aar_outcome(&af, ip(7)).await,
        rx::experimental_result::IP_CAN_SESSION_NOT_AVAILABLE
    );
    assert_eq!(aar_outcome(&af, ip(8)).await, rc::DIAMETER_SUCCESS);
    assert_eq!(delete(&c, &loc7).await.status().as_u16(), 204);
    assert_eq!(
        aar_outcome(&af, ip(8)).await,
        rx::experimental_result::IP_CAN_SESSION_NOT_AVAILABLE
    );
    if index {
        let ix = b.bsf.store.index().expect("index on");
        assert!(ix.is_ready());
        assert_eq!(ix.len(), (2, 0), "bindings 5 (the new one) and 6");
    } else {
        assert!(b.bsf.store.index().is_none());
    }
    af.shutdown().await;
    pcf.shutdown().await;
    b.stop().await;

    // After a restart the bindings are read back from the store.
    let b = start_bsf_with(dir.path(), index).await;
    if index {
        let ix = b.bsf.store.index().unwrap().clone();
        tokio::time::timeout(T, async {
            while !ix.is_ready() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("the index loads");
        assert_eq!(ix.len(), (2, 0));
    }
    let addr = b.rx.unwrap();
    let pcf = double(PCF_HOST, PCF_REALM, addr, pcf_seen.clone()).await;
    let af = double(AF_HOST, AF_REALM, addr, af_seen).await;
    assert_eq!(aar_outcome(&af, ip(6)).await, rc::DIAMETER_SUCCESS);
    assert_eq!(aar_outcome(&af, ip(5)).await, rc::DIAMETER_UNABLE_TO_DELIVER);
    assert_eq!(
        aar_outcome(&af, ip(7)).await,
        rx::experimental_result::IP_CAN_SESSION_NOT_AVAILABLE
    );
    af.shutdown().await;
    pcf.shutdown().await;
    b.stop().await;
}

async fn aar_lookups_from_the_binding_index_follow_every_write() {
    aar_lookups_follow_update_delete_and_restart(true).await;
}

async fn aar_lookups_from_the_store_follow_every_write() {
    aar_lookups_follow_update_delete_and_restart(false).await;
}

testkit::on_both_backends!(
    aar_update_rar_asr_and_str_follow_the_session_through_the_bsf,
    aar_by_ipv6_prefix_and_ip_domain,
    no_binding_is_5065_and_an_unconnected_pcf_is_3002,
    rx_disabled_by_default,
    rx_diameter_limits_come_from_the_config,
    redirect_mode_names_the_bound_pcf,
    aar_lookups_from_the_binding_index_follow_every_write,
    aar_lookups_from_the_store_follow_every_write,
);
