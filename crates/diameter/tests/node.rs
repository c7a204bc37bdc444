//! Peers, transport and routing over real sockets on 127.0.0.1.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use diameter::dictionary::{base, nasreq, rx, sh};
use diameter::{
    frame_len, result_code as rc, ApplicationId, DiameterNode, Message, NodeConfig, PeerConfig,
    PeerState, RequestError, Route, RouteAction, VENDOR_3GPP,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const T: Duration = Duration::from_secs(5);
const LOCAL: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 0);

fn init_log() {
    let _ =
        tracing_subscriber::fmt().with_env_filter("diameter=debug").with_test_writer().try_init();
}

fn cfg(host: &str, realm: &str) -> NodeConfig {
    let mut c = NodeConfig::new(host, realm);
    c.applications = vec![ApplicationId::tgpp(rx::APP_ID)];
    c.reconnect_min = Duration::from_millis(50);
    c.reconnect_max = Duration::from_millis(200);
    c.request_timeout = Duration::from_secs(3);
    c
}

fn server_cfg(host: &str, realm: &str) -> NodeConfig {
    let mut c = cfg(host, realm);
    c.listen = Some(LOCAL);
    c.accept_unknown_peers = true;
    c
}

/// A server answering Rx requests with 2001 and its own Origin-Host; records Route-Records.
async fn rx_server(c: NodeConfig, seen: Arc<Mutex<Vec<String>>>) -> DiameterNode {
    let (h, r) = (c.origin_host.clone(), c.origin_realm.clone());
    DiameterNode::builder(c)
        .handler(rx::APP_ID, move |req: Message| {
            let (h, r, seen) = (h.clone(), r.clone(), seen.clone());
            async move {
                for rr in req.find_all(&base::ROUTE_RECORD) {
                    seen.lock().unwrap().push(rr.as_str().unwrap().to_owned());
                }
                Message::answer_to(&req).result_code_avp(rc::DIAMETER_SUCCESS).origin(&h, &r)
            }
        })
        .start()
        .await
        .unwrap()
}

fn str_req(node: &DiameterNode, realm: &str) -> Message {
    Message::request(rx::APP_ID, rx::CMD_SESSION_TERMINATION)
        .session_id_avp(&node.new_session_id())
        .origin(node.origin_host(), node.origin_realm())
        .destination(realm, None)
        .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
        .avp(base::TERMINATION_CAUSE.enumerated(1))
}

fn aar(node: &DiameterNode, realm: &str, ip: Ipv4Addr) -> Message {
    Message::request(rx::APP_ID, rx::CMD_AA)
        .session_id_avp(&node.new_session_id())
        .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
        .origin(node.origin_host(), node.origin_realm())
        .destination(realm, None)
        .avp(nasreq::FRAMED_IP_ADDRESS.ipv4_octets(ip))
}

async fn client(
    host: &str,
    realm: &str,
    peers: &[(&str, SocketAddr)],
    tw: Duration,
) -> DiameterNode {
    let mut c = cfg(host, realm);
    c.watchdog_interval = tw;
    c.peers = peers.iter().map(|(h, a)| PeerConfig::connect(*h, *a)).collect();
    DiameterNode::builder(c).start().await.unwrap()
}

#[tokio::test]
async fn cer_cea_requests_watchdog_and_dpr() {
    init_log();
    let s = rx_server(server_cfg("pcrf.test", "test"), Default::default()).await;
    let c = client(
        "af.test",
        "af",
        &[("pcrf.test", s.local_addr().unwrap())],
        Duration::from_millis(200),
    )
    .await;
    assert!(c.wait_open("pcrf.test", T).await);
    assert!(s.wait_peer("af.test", T, |st| st == PeerState::ROpen).await);
    let caps = c.peers()[0].capabilities.clone().unwrap();
    assert_eq!(caps.origin_realm, "test");
    assert!(caps.applications.contains(&rx::APP_ID));

    let a = c.request(str_req(&c, "test")).await.unwrap();
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS));
    assert_eq!(a.origin_host(), Some("pcrf.test"));
    // many outstanding requests on one connection
    let mut tasks = Vec::new();
    for _ in 0..500 {
        let c = c.clone();
        tasks.push(tokio::spawn(async move { c.request(str_req(&c, "test")).await }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap().unwrap().result_code(), Some(2001));
    }
    // idle for several Tw: DWR/DWA keep the peer open (an unanswered DWR would make it Suspect)
    let mut st = c.peer_state("pcrf.test").unwrap();
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        st = c.peer_state("pcrf.test").unwrap();
        assert_eq!(st, PeerState::IOpen);
    }
    assert_eq!(st, PeerState::IOpen);

    assert!(c.disconnect("pcrf.test", 0).await);
    assert_eq!(c.peer_state("pcrf.test"), Some(PeerState::Closed));
    assert!(s.wait_peer("af.test", T, |st| st == PeerState::Closed).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(c.peer_state("pcrf.test"), Some(PeerState::Closed), "no reconnection after DPR");
    assert_eq!(c.request(str_req(&c, "test")).await.unwrap_err(), RequestError::UnableToDeliver);
}

#[tokio::test]
async fn dead_peer_is_detected_and_reconnected() {
    init_log();
    let s = rx_server(server_cfg("pcrf.test", "test"), Default::default()).await;
    let c = client(
        "af.test",
        "af",
        &[("pcrf.test", s.local_addr().unwrap())],
        Duration::from_millis(150),
    )
    .await;
    assert!(c.wait_open("pcrf.test", T).await);
    s.set_answer_watchdogs(false);
    assert!(c.wait_peer("pcrf.test", T, |st| st == PeerState::Suspect).await);
    // no route while suspect
    assert_eq!(c.request(str_req(&c, "test")).await.unwrap_err(), RequestError::UnableToDeliver);
    assert!(c.wait_peer("pcrf.test", T, |st| st == PeerState::Closed).await);
    // reconnects, but stays in Reopen until the watchdog is answered again
    assert!(c.wait_peer("pcrf.test", T, |st| st == PeerState::Reopen).await);
    s.set_answer_watchdogs(true);
    assert!(c.wait_peer("pcrf.test", T, |st| st == PeerState::IOpen).await);
    let a = c.request(str_req(&c, "test")).await.unwrap();
    assert_eq!(a.result_code(), Some(2001));
}

#[tokio::test]
async fn relay_through_a_middle_node() {
    init_log();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = rx_server(server_cfg("pcrf.s", "s"), seen.clone()).await;
    let mut rc_ = server_cfg("dra.r", "r");
    rc_.relay = true;
    rc_.applications.clear();
    rc_.peers = vec![PeerConfig::connect("pcrf.s", s.local_addr().unwrap())];
    rc_.routes = vec![Route::new("s", RouteAction::Relay(vec!["pcrf.s".into()]))];
    let r = DiameterNode::builder(rc_).start().await.unwrap();
    let mut cc = cfg("af.a", "a");
    cc.peers = vec![PeerConfig::connect("dra.r", r.local_addr().unwrap())];
    cc.routes = vec![Route::new("s", RouteAction::Relay(vec!["dra.r".into()]))];
    let c = DiameterNode::builder(cc).start().await.unwrap();
    assert!(c.wait_open("dra.r", T).await);
    assert!(r.wait_open("pcrf.s", T).await);
    for _ in 0..20 {
        let a = c.request(str_req(&c, "s")).await.unwrap();
        assert_eq!(a.result_code(), Some(2001));
        assert_eq!(a.origin_host(), Some("pcrf.s"));
    }
    assert!(seen.lock().unwrap().iter().all(|h| h == "af.a"), "Route-Record names the client");
    assert_eq!(seen.lock().unwrap().len(), 20);
    // next hop down: the relay answers 3002 with the E bit
    s.shutdown().await;
    assert!(r.wait_peer("pcrf.s", T, |st| st != PeerState::IOpen).await);
    let a = c.request(str_req(&c, "s")).await.unwrap();
    assert_eq!(a.result_code(), Some(rc::DIAMETER_UNABLE_TO_DELIVER));
    assert!(a.is_error());
    assert_eq!(a.origin_host(), Some("dra.r"));
}

#[tokio::test]
async fn proxy_picks_next_hop_per_request() {
    init_log();
    let s1 = rx_server(server_cfg("pcf1.s", "s"), Default::default()).await;
    let s2 = rx_server(server_cfg("pcf2.s", "s"), Default::default()).await;
    let mut pc = server_cfg("bsf.p", "p");
    pc.relay = true;
    pc.peers = vec![
        PeerConfig::connect("pcf1.s", s1.local_addr().unwrap()),
        PeerConfig::connect("pcf2.s", s2.local_addr().unwrap()),
    ];
    let hook = |req: &Message| {
        let ip = req.framed_ip_address()?;
        Some(if ip.octets()[3] % 2 == 1 { "pcf1.s".to_string() } else { "pcf2.s".to_string() })
    };
    pc.routes = vec![Route::new(
        "s",
        RouteAction::Proxy { peers: vec!["pcf1.s".into()], next_hop: Some(Arc::new(hook)) },
    )
    .application(rx::APP_ID)];
    let p = DiameterNode::builder(pc).start().await.unwrap();
    let c =
        client("af.a", "a", &[("bsf.p", p.local_addr().unwrap())], Duration::from_secs(30)).await;
    let mut cc = c.config().clone();
    cc.routes = vec![Route::new("s", RouteAction::Relay(vec!["bsf.p".into()]))];
    c.shutdown().await;
    let c = DiameterNode::builder(cc).start().await.unwrap();
    assert!(c.wait_open("bsf.p", T).await);
    assert!(p.wait_open("pcf1.s", T).await && p.wait_open("pcf2.s", T).await);
    for (ip, want) in [(1, "pcf1.s"), (2, "pcf2.s"), (3, "pcf1.s"), (4, "pcf2.s")] {
        let a = c.request(aar(&c, "s", Ipv4Addr::new(10, 0, 0, ip))).await.unwrap();
        assert_eq!(a.result_code(), Some(2001), "{a:?}");
        assert_eq!(a.origin_host(), Some(want));
    }
    // no Framed-IP-Address: the hook declines, the route's peer list is used
    let a = c.request(str_req(&c, "s")).await.unwrap();
    assert_eq!(a.origin_host(), Some("pcf1.s"));
}

#[tokio::test]
async fn redirect_agent_answers_3006_and_client_follows() {
    init_log();
    let s = rx_server(server_cfg("pcrf.s", "s"), Default::default()).await;
    let uri = format!("aaa://pcrf.s:{};transport=tcp", s.local_addr().unwrap().port());
    let mut dc = server_cfg("redirect.d", "d");
    dc.relay = true;
    dc.routes = vec![Route::new("s", RouteAction::Redirect(vec![uri.clone()]))];
    let d = DiameterNode::builder(dc).start().await.unwrap();
    // a client that does not follow redirects sees the 3006
    let mut nc = cfg("af.n", "a");
    nc.follow_redirects = false;
    nc.peers = vec![PeerConfig::connect("redirect.d", d.local_addr().unwrap())];
    nc.routes = vec![Route::new("*", RouteAction::Relay(vec!["redirect.d".into()]))];
    let n = DiameterNode::builder(nc).start().await.unwrap();
    assert!(n.wait_open("redirect.d", T).await);
    let a = n.request(str_req(&n, "s")).await.unwrap();
    assert_eq!(a.result_code(), Some(rc::DIAMETER_REDIRECT_INDICATION));
    assert!(a.is_error());
    assert_eq!(a.get_str(&base::REDIRECT_HOST), Some(uri.as_str()));
    // a client connected to both follows it to the server
    let mut fc = cfg("af.f", "a");
    fc.peers = vec![
        PeerConfig::connect("redirect.d", d.local_addr().unwrap()),
        PeerConfig::connect("pcrf.s", s.local_addr().unwrap()),
    ];
    fc.routes = vec![Route::new("s", RouteAction::Relay(vec!["redirect.d".into()]))];
    let f = DiameterNode::builder(fc).start().await.unwrap();
    assert!(f.wait_open("redirect.d", T).await && f.wait_open("pcrf.s", T).await);
    let a = f.request(str_req(&f, "s")).await.unwrap();
    assert_eq!(a.result_code(), Some(2001));
    assert_eq!(a.origin_host(), Some("pcrf.s"));
}

#[tokio::test]
async fn error_answers_from_a_server() {
    init_log();
    let mut sc = server_cfg("pcrf.test", "test");
    sc.applications.push(ApplicationId::tgpp(sh::APP_ID)); // advertised, no handler
    sc.max_inflight_per_peer = 1;
    let s = DiameterNode::builder(sc)
        .handler(rx::APP_ID, |req: Message| async move {
            if req.command_code() == rx::CMD_AA {
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Message::answer_to(&req).result_code_avp(2001)
        })
        .start()
        .await
        .unwrap();
    let mut cc = cfg("af.test", "af");
    cc.applications.push(ApplicationId::tgpp(sh::APP_ID));
    cc.peers = vec![PeerConfig::connect("pcrf.test", s.local_addr().unwrap())];
    let c = DiameterNode::builder(cc).start().await.unwrap();
    assert!(c.wait_open("pcrf.test", T).await);

    // 3007: application advertised but not served
    let udr = Message::request(sh::APP_ID, sh::CMD_USER_DATA)
        .session_id_avp("x;1")
        .destination("test", None);
    let a = c.request(udr).await.unwrap();
    assert_eq!(a.result_code(), Some(rc::DIAMETER_APPLICATION_UNSUPPORTED));
    assert!(a.is_error());
    // 3001: unknown command of a known application
    let mut m = str_req(&c, "test");
    m.header.command_code = 999;
    let a = c.request(m).await.unwrap();
    assert_eq!(a.result_code(), Some(rc::DIAMETER_COMMAND_UNSUPPORTED));
    assert!(a.is_error());
    // 5005 with Failed-AVP naming Termination-Cause
    let mut m = str_req(&c, "test");
    m.avps.retain(|a| !a.is(&base::TERMINATION_CAUSE));
    let a = c.request(m).await.unwrap();
    assert_eq!(a.result_code(), Some(rc::DIAMETER_MISSING_AVP));
    assert_eq!(a.failed_avps()[0].code(), base::TERMINATION_CAUSE.code);
    // 5004 with Failed-AVP: Session-Id not UTF-8
    let mut m = str_req(&c, "test");
    m.avps[0] = base::SESSION_ID.bytes(Bytes::from_static(&[0xff, 0xfe]));
    let a = c.request(m).await.unwrap();
    assert_eq!(a.result_code(), Some(rc::DIAMETER_INVALID_AVP_VALUE));
    assert_eq!(a.failed_avps()[0].code(), base::SESSION_ID.code);
    // 3002: no route for the realm
    assert_eq!(c.request(str_req(&c, "nowhere")).await.unwrap_err(), RequestError::UnableToDeliver);
    // 3004: one request in processing at a time on the server side
    let (a1, a2) = tokio::join!(
        c.request(aar(&c, "test", Ipv4Addr::new(10, 0, 0, 1))),
        c.request(aar(&c, "test", Ipv4Addr::new(10, 0, 0, 2)))
    );
    let mut codes = vec![a1.unwrap().result_code(), a2.unwrap().result_code()];
    codes.sort();
    assert_eq!(codes, vec![Some(2001), Some(rc::DIAMETER_TOO_BUSY)]);
    assert!(c.peer_state("pcrf.test").unwrap().is_open(), "errors keep the connection");
}

#[tokio::test]
async fn client_pending_table_is_bounded() {
    init_log();
    let s = DiameterNode::builder(server_cfg("pcrf.test", "test"))
        .handler(rx::APP_ID, |req: Message| async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            Message::answer_to(&req).result_code_avp(2001)
        })
        .start()
        .await
        .unwrap();
    let mut cc = cfg("af.test", "af");
    cc.max_pending_per_peer = 1;
    cc.peers = vec![PeerConfig::connect("pcrf.test", s.local_addr().unwrap())];
    let c = DiameterNode::builder(cc).start().await.unwrap();
    assert!(c.wait_open("pcrf.test", T).await);
    let (a1, a2) = tokio::join!(c.request(str_req(&c, "test")), async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        c.request(str_req(&c, "test")).await
    });
    assert_eq!(a1.unwrap().result_code(), Some(2001));
    assert_eq!(a2.unwrap_err(), RequestError::TooBusy);
    assert_eq!(RequestError::TooBusy.result_code(), rc::DIAMETER_TOO_BUSY);
}

// ---- raw-socket peer: exact bytes on the wire ----------------------------------------------

struct Raw {
    s: TcpStream,
    buf: BytesMut,
}

impl Raw {
    async fn connect(addr: SocketAddr) -> Raw {
        Raw { s: TcpStream::connect(addr).await.unwrap(), buf: BytesMut::new() }
    }
    async fn send(&mut self, b: &[u8]) {
        self.s.write_all(b).await.unwrap();
    }
    async fn send_msg(&mut self, m: &Message) {
        self.send(&m.to_bytes().unwrap()).await;
    }
    /// Next message, or None at EOF; panics after 5 s.
    async fn recv(&mut self) -> Option<Message> {
        tokio::time::timeout(T, async {
            loop {
                if let Some(n) = frame_len(&self.buf).unwrap() {
                    return Some(Message::decode(self.buf.split_to(n).freeze()).unwrap());
                }
                if self.s.read_buf(&mut self.buf).await.unwrap() == 0 {
                    return None;
                }
            }
        })
        .await
        .expect("timed out")
    }
    async fn recv_answer(&mut self) -> Message {
        loop {
            let m = self.recv().await.expect("connection closed");
            if !m.is_request() {
                return m;
            }
        }
    }
}

fn raw_cer(host: &str, app: u32) -> Message {
    Message::request(base::APP_ID, base::CMD_CAPABILITIES_EXCHANGE)
        .ids(1, 1)
        .origin(host, "raw")
        .avp(base::HOST_IP_ADDRESS.address(Ipv4Addr::LOCALHOST.into()))
        .avp(base::VENDOR_ID.u32(0))
        .avp(base::PRODUCT_NAME.utf8("raw"))
        .avp(diameter::builders::vendor_specific_auth_app(VENDOR_3GPP, app))
}

#[tokio::test]
async fn capabilities_exchange_rejections() {
    init_log();
    let mut sc = server_cfg("pcrf.test", "test");
    sc.accept_unknown_peers = false;
    sc.peers = vec![PeerConfig::accept("known.raw")];
    let s = rx_server(sc, Default::default()).await;
    let addr = s.local_addr().unwrap();
    let mut r = Raw::connect(addr).await;
    r.send_msg(&raw_cer("stranger.raw", rx::APP_ID)).await;
    let cea = r.recv().await.unwrap();
    assert_eq!(cea.result_code(), Some(rc::DIAMETER_UNKNOWN_PEER));
    assert!(cea.is_error());
    assert!(r.recv().await.is_none(), "closed after 3010");

    let mut r = Raw::connect(addr).await;
    r.send_msg(&raw_cer("known.raw", sh::APP_ID)).await;
    let cea = r.recv().await.unwrap();
    assert_eq!(cea.result_code(), Some(rc::DIAMETER_NO_COMMON_APPLICATION));
    assert!(r.recv().await.is_none(), "closed after 5010");

    let mut r = Raw::connect(addr).await;
    r.send_msg(&raw_cer("known.raw", rx::APP_ID)).await;
    let cea = r.recv().await.unwrap();
    assert_eq!(cea.result_code(), Some(2001));
    assert_eq!(cea.origin_host(), Some("pcrf.test"));
    assert!(cea.find(&base::HOST_IP_ADDRESS).is_some());
    assert!(cea.find(&base::VENDOR_SPECIFIC_APPLICATION_ID).is_some());
    assert_eq!(cea.get_u32(&base::INBAND_SECURITY_ID), Some(0));
    assert!(s.wait_peer("known.raw", T, |st| st == PeerState::ROpen).await);
}

#[tokio::test]
async fn malformed_messages_are_answered_and_duplicates_detected() {
    init_log();
    let calls = Arc::new(AtomicUsize::new(0));
    let calls2 = calls.clone();
    let s = DiameterNode::builder(server_cfg("pcrf.test", "test"))
        .handler(rx::APP_ID, move |req: Message| {
            let n = calls2.fetch_add(1, Ordering::SeqCst);
            async move {
                Message::answer_to(&req).result_code_avp(2001).avp(base::CLASS.bytes(vec![n as u8]))
            }
        })
        .start()
        .await
        .unwrap();
    let mut r = Raw::connect(s.local_addr().unwrap()).await;
    r.send_msg(&raw_cer("raw.client", rx::APP_ID)).await;
    assert_eq!(r.recv().await.unwrap().result_code(), Some(2001));

    let req = Message::request(rx::APP_ID, rx::CMD_SESSION_TERMINATION)
        .ids(10, 777)
        .session_id_avp("raw;1")
        .origin("raw.client", "raw")
        .destination("test", None)
        .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
        .avp(base::TERMINATION_CAUSE.enumerated(1));
    // an AVP whose length runs past the message: 5014, the connection lives
    let mut bad = BytesMut::from(&req.to_bytes().unwrap()[..]);
    let last = bad.len() - 12;
    bad[last + 7] = 200; // AVP length low byte of Termination-Cause
    r.send(&bad).await;
    let a = r.recv_answer().await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_INVALID_AVP_LENGTH));
    assert_eq!(a.hop_by_hop_id(), 10);

    // duplicate detection: same end-to-end id and Origin-Host with the T bit
    r.send_msg(&req.clone().ids(11, 777)).await;
    let a1 = r.recv_answer().await;
    assert_eq!(a1.result_code(), Some(2001));
    let mut dup = req.clone().ids(12, 777);
    dup.set_retransmit(true);
    r.send_msg(&dup).await;
    let a2 = r.recv_answer().await;
    assert_eq!(a2.hop_by_hop_id(), 12);
    assert_eq!(a2.get_bytes(&base::CLASS), a1.get_bytes(&base::CLASS));
    assert_eq!(calls.load(Ordering::SeqCst), 1, "handler not called for the duplicate");

    // a DWR still gets its DWA
    let dwr = Message::request(base::APP_ID, base::CMD_DEVICE_WATCHDOG)
        .ids(13, 778)
        .origin("raw.client", "raw");
    r.send_msg(&dwr).await;
    let dwa = r.recv_answer().await;
    assert_eq!((dwa.command_code(), dwa.result_code()), (base::CMD_DEVICE_WATCHDOG, Some(2001)));

    // a bad version breaks framing: the connection is closed
    let mut v2 = BytesMut::from(&req.clone().ids(14, 779).to_bytes().unwrap()[..]);
    v2[0] = 2;
    r.send(&v2).await;
    // (Header::peek refuses a non-1 version, so there is no header to answer on: closed, logged)
    if let Some(a) = r.recv().await {
        assert_eq!(a.result_code(), Some(rc::DIAMETER_UNSUPPORTED_VERSION));
        assert!(r.recv().await.is_none());
    }
    assert!(s.wait_peer("raw.client", T, |st| st == PeerState::Closed).await);
}

#[tokio::test]
async fn pending_requests_fail_over_with_t_bit() {
    init_log();
    let slow = DiameterNode::builder(server_cfg("pcrf1.s", "s"))
        .handler(rx::APP_ID, |req: Message| async move {
            tokio::time::sleep(Duration::from_secs(2)).await;
            Message::answer_to(&req).result_code_avp(2001).origin("pcrf1.s", "s")
        })
        .start()
        .await
        .unwrap();
    let ok = DiameterNode::builder(server_cfg("pcrf2.s", "s"))
        .handler(rx::APP_ID, |req: Message| async move {
            let t = req.is_retransmit() as u8;
            Message::answer_to(&req)
                .result_code_avp(2001)
                .origin("pcrf2.s", "s")
                .avp(base::CLASS.bytes(vec![t]))
        })
        .start()
        .await
        .unwrap();
    let mut cc = cfg("af.a", "a");
    cc.watchdog_interval = Duration::from_millis(100);
    cc.peers = vec![
        PeerConfig::connect("pcrf1.s", slow.local_addr().unwrap()),
        PeerConfig::connect("pcrf2.s", ok.local_addr().unwrap()),
    ];
    cc.routes = vec![Route::new("s", RouteAction::Relay(vec!["pcrf1.s".into(), "pcrf2.s".into()]))];
    let c = DiameterNode::builder(cc).start().await.unwrap();
    assert!(c.wait_open("pcrf1.s", T).await && c.wait_open("pcrf2.s", T).await);
    let req = str_req(&c, "s");
    let e2e_before = c.next_end_to_end_id();
    let pending = tokio::spawn({
        let c = c.clone();
        async move { c.request(req).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    slow.set_answer_watchdogs(false); // pcrf1 goes silent with the request outstanding
    let a = pending.await.unwrap().unwrap();
    assert_eq!(a.origin_host(), Some("pcrf2.s"), "answered by the alternate peer");
    assert_eq!(a.get_bytes(&base::CLASS).as_deref(), Some(&[1u8][..]), "re-sent with the T bit");
    assert_eq!(a.end_to_end_id(), e2e_before.wrapping_add(1), "same end-to-end id");
}

#[tokio::test]
async fn framing_error_is_answered_then_closed() {
    init_log();
    let s = rx_server(server_cfg("pcrf.test", "test"), Default::default()).await;
    let mut r = Raw::connect(s.local_addr().unwrap()).await;
    r.send_msg(&raw_cer("raw.client", rx::APP_ID)).await;
    assert_eq!(r.recv().await.unwrap().result_code(), Some(2001));
    // a header whose length is not a multiple of 4: 5015 with our ids, then the stream is closed
    let mut m = BytesMut::from(
        &Message::request(rx::APP_ID, rx::CMD_SESSION_TERMINATION).ids(42, 43).to_bytes().unwrap()
            [..],
    );
    m[3] = 22;
    m.extend_from_slice(&[0, 0]);
    r.send(&m).await;
    let a = r.recv().await.expect("an answer before the close");
    assert_eq!(a.result_code(), Some(rc::DIAMETER_INVALID_MESSAGE_LENGTH));
    assert_eq!((a.hop_by_hop_id(), a.end_to_end_id()), (42, 43));
    assert!(r.recv().await.is_none());
    assert!(s.wait_peer("raw.client", T, |st| st == PeerState::Closed).await);
}
