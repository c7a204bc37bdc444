//! What a node refuses to protect itself, over real sockets on 127.0.0.1: a first message longer
//! than a CER can be, messages over their application's size limit after CER, too many
//! connections waiting for their CER, and the state of peers that have gone.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use diameter::dictionary::{base, rx, sy};
use diameter::{
    frame_len, result_code as rc, ApplicationId, DiameterNode, Error, Message, NodeConfig,
    PeerConfig, PeerState, RequestError, VENDOR_3GPP,
};
use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const T: Duration = Duration::from_secs(5);
const LOCAL: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 0);

fn init_log() {
    let _ =
        tracing_subscriber::fmt().with_env_filter("diameter=info").with_test_writer().try_init();
}

fn server_cfg() -> NodeConfig {
    let mut c = NodeConfig::new("server.limits", "limits");
    c.listen = Some(LOCAL);
    c.applications = vec![ApplicationId::tgpp(rx::APP_ID)];
    c.accept_unknown_peers = true;
    c
}

/// A server answering Rx requests with 2001, or with a Class AVP of `pad` bytes when the
/// request carries Termination-Cause 2.
async fn server(c: NodeConfig, pad: usize) -> DiameterNode {
    DiameterNode::builder(c)
        .handler(rx::APP_ID, move |req: Message| async move {
            let a = Message::answer_to(&req).result_code_avp(rc::DIAMETER_SUCCESS);
            if req.get_u32(&base::TERMINATION_CAUSE) == Some(2) {
                a.avp(base::CLASS.bytes(vec![7u8; pad]))
            } else {
                a
            }
        })
        .start()
        .await
        .unwrap()
}

fn metrics_text(node: &DiameterNode) -> String {
    let mut r = Registry::default();
    node.register_metrics(&mut r);
    let mut s = String::new();
    prometheus_client::encoding::text::encode(&mut s, &r).unwrap();
    s
}

fn str_req(host: &str, hbh: u32, cause: u32) -> Message {
    Message::request(rx::APP_ID, rx::CMD_SESSION_TERMINATION)
        .ids(hbh, hbh + 1000)
        .session_id_avp(&format!("{host};1;{hbh}"))
        .origin(host, "raw")
        .destination("limits", None)
        .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
        .avp(base::TERMINATION_CAUSE.enumerated(cause))
}

fn raw_cer(host: &str) -> Message {
    Message::request(base::APP_ID, base::CMD_CAPABILITIES_EXCHANGE)
        .ids(1, 1)
        .origin(host, "raw")
        .avp(base::HOST_IP_ADDRESS.address(Ipv4Addr::LOCALHOST.into()))
        .avp(base::VENDOR_ID.u32(0))
        .avp(base::PRODUCT_NAME.utf8("raw"))
        .avp(diameter::builders::vendor_specific_auth_app(VENDOR_3GPP, rx::APP_ID))
}

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
    /// Next message, or None at EOF (or a reset); panics after 5 s.
    async fn recv(&mut self) -> Option<Message> {
        tokio::time::timeout(T, async {
            loop {
                if let Some(n) = frame_len(&self.buf).unwrap() {
                    return Some(Message::decode(self.buf.split_to(n).freeze()).unwrap());
                }
                match self.s.read_buf(&mut self.buf).await {
                    Ok(0) | Err(_) => return None,
                    Ok(_) => {}
                }
            }
        })
        .await
        .expect("timed out")
    }
    /// CER, then the CEA's Result-Code.
    async fn open(&mut self, host: &str) -> Option<u32> {
        self.send_msg(&raw_cer(host)).await;
        self.recv().await?.result_code()
    }
}

/// A request of `len` bytes (padded with a Class AVP) with the given ids.
fn padded(app: u32, cmd: u32, hbh: u32, len: usize) -> Vec<u8> {
    let m = Message::request(app, cmd).ids(hbh, hbh + 1000).origin("raw.client", "raw");
    let base_len = m.to_bytes().unwrap().len();
    let m = m.avp(base::CLASS.bytes(vec![0u8; len - base_len - 8]));
    let b = m.to_bytes().unwrap();
    assert_eq!(b.len(), len);
    b.to_vec()
}

#[tokio::test]
async fn an_oversize_first_message_closes_at_once_and_the_node_still_serves() {
    init_log();
    let s = server(server_cfg(), 0).await; // cer_timeout 10 s, max_cer_len 64 KiB
    let addr = s.local_addr().unwrap();
    // A CER header declaring 16 MiB - 4, and a little of its body.
    let mut m = BytesMut::from(&raw_cer("big.raw").to_bytes().unwrap()[..]);
    m[1..4].copy_from_slice(&[0xff, 0xff, 0xfc]);
    let t0 = Instant::now();
    let mut r = Raw::connect(addr).await;
    r.send(&m).await;
    assert!(r.recv().await.is_none(), "closed without an answer");
    assert!(t0.elapsed() < Duration::from_secs(2), "closed at once, not at the CER timeout");
    // Just over the limit is refused too; at the limit it would be read.
    let mut m = BytesMut::from(&raw_cer("big.raw").to_bytes().unwrap()[..]);
    m[1..4].copy_from_slice(&(64u32 * 1024 + 4).to_be_bytes()[1..]);
    let mut r = Raw::connect(addr).await;
    r.send(&m).await;
    assert!(r.recv().await.is_none());
    let text = metrics_text(&s);
    assert!(
        text.contains(r#"diameter_connections_refused_total{reason="first_message_too_long"} 2"#),
        "{text}"
    );
    assert_eq!(s.connections_awaiting_cer(), 0);
    // A normal peer is still served.
    let mut r = Raw::connect(addr).await;
    assert_eq!(r.open("normal.raw").await, Some(rc::DIAMETER_SUCCESS));
    r.send_msg(&str_req("normal.raw", 5, 1)).await;
    assert_eq!(r.recv().await.unwrap().result_code(), Some(rc::DIAMETER_SUCCESS));
}

#[tokio::test]
async fn an_oversize_message_after_cer_gets_5015_and_the_connection_goes_on() {
    init_log();
    let mut c = server_cfg();
    c.max_message_len = 2048;
    c.max_message_len_per_application = vec![(rx::APP_ID, 100_000)];
    let s = server(c, 0).await;
    let mut r = Raw::connect(s.local_addr().unwrap()).await;
    assert_eq!(r.open("raw.client").await, Some(rc::DIAMETER_SUCCESS));

    // Rx over its own limit, sent as a header first and then the body in pieces: answered
    // 5015 with its ids once the header is in, and the body skipped as it comes.
    let big = padded(rx::APP_ID, rx::CMD_SESSION_TERMINATION, 10, 300_000);
    r.send(&big[..20]).await;
    let a = r.recv().await.expect("answered from the header alone");
    assert_eq!(a.result_code(), Some(rc::DIAMETER_INVALID_MESSAGE_LENGTH));
    assert_eq!((a.hop_by_hop_id(), a.end_to_end_id()), (10, 1010));
    assert!(!a.is_error(), "5015 is a permanent failure, not a protocol error (no E bit)");
    assert_eq!(a.origin_host(), Some("server.limits"));
    for chunk in big[20..].chunks(65_536) {
        r.send(chunk).await;
    }
    // The stream is in sync: the next request is served.
    r.send_msg(&str_req("raw.client", 11, 1)).await;
    let a = r.recv().await.unwrap();
    assert_eq!((a.hop_by_hop_id(), a.result_code()), (11, Some(rc::DIAMETER_SUCCESS)));
    // Under Rx's own limit but over the node default: taken.
    let mut under = Message::decode(padded(rx::APP_ID, 275, 12, 50_000).into()).unwrap();
    for a in [
        base::SESSION_ID.utf8("raw.client;1;12"),
        base::DESTINATION_REALM.identity("limits"),
        base::AUTH_APPLICATION_ID.u32(rx::APP_ID),
        base::TERMINATION_CAUSE.enumerated(1),
    ] {
        under.push(a);
    }
    r.send_msg(&under).await;
    let a = r.recv().await.unwrap();
    assert_eq!((a.hop_by_hop_id(), a.result_code()), (12, Some(rc::DIAMETER_SUCCESS)));
    // Another application gets the node default (2048), whole in one write.
    r.send(&padded(sy::APP_ID, sy::CMD_SPENDING_LIMIT, 13, 4096)).await;
    let a = r.recv().await.unwrap();
    assert_eq!((a.hop_by_hop_id(), a.result_code()), (13, Some(5015)));
    // Base protocol still works after it.
    let dwr = Message::request(base::APP_ID, base::CMD_DEVICE_WATCHDOG)
        .ids(14, 1014)
        .origin("raw.client", "raw");
    r.send_msg(&dwr).await;
    let a = r.recv().await.unwrap();
    assert_eq!((a.command_code(), a.result_code()), (base::CMD_DEVICE_WATCHDOG, Some(2001)));
    assert_eq!(s.peer_state("raw.client"), Some(PeerState::ROpen));
    let text = metrics_text(&s);
    assert!(text.contains(r#"diameter_oversize_messages_total{kind="request"} 2"#), "{text}");
}

#[tokio::test]
async fn an_oversize_answer_fails_its_request_and_the_connection_goes_on() {
    init_log();
    let s = server(server_cfg(), 10_000).await;
    let mut c = NodeConfig::new("client.limits", "raw");
    c.applications = vec![ApplicationId::tgpp(rx::APP_ID)];
    c.peers = vec![PeerConfig::connect("server.limits", s.local_addr().unwrap())];
    c.max_message_len_per_application = vec![(rx::APP_ID, 4096)];
    let client = DiameterNode::builder(c).start().await.unwrap();
    assert!(client.wait_open("server.limits", T).await);
    let r = client.request(str_req("client.limits", 0, 2)).await;
    assert!(
        matches!(r, Err(RequestError::MalformedAnswer(Error::MessageTooLong { limit: 4096, .. }))),
        "{r:?}"
    );
    let a = client.request(str_req("client.limits", 0, 1)).await.unwrap();
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS));
    assert!(client.peer_state("server.limits").unwrap().is_open());
    let text = metrics_text(&client);
    assert!(text.contains(r#"diameter_oversize_messages_total{kind="answer"} 1"#), "{text}");
}

async fn wait_until(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + T;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn connections_waiting_for_their_cer_are_capped() {
    init_log();
    let mut c = server_cfg();
    c.max_connections_before_cer = 4;
    let s = server(c, 0).await; // cer_timeout 10 s: the silent ones stay for the whole test
    let addr = s.local_addr().unwrap();
    let mut silent = Vec::new();
    for _ in 0..4 {
        silent.push(Raw::connect(addr).await);
    }
    wait_until("4 connections awaiting CER", || s.connections_awaiting_cer() == 4).await;
    // The fifth is closed at once, even with a CER on it.
    let t0 = Instant::now();
    let mut fifth = Raw::connect(addr).await;
    fifth.send_msg(&raw_cer("fifth.raw")).await;
    assert!(fifth.recv().await.is_none(), "closed without a CEA");
    assert!(t0.elapsed() < Duration::from_secs(2));
    assert_eq!(s.connections_awaiting_cer(), 4);
    let text = metrics_text(&s);
    assert!(
        text.contains(r#"diameter_connections_refused_total{reason="awaiting_cer_limit"} 1"#),
        "{text}"
    );
    assert!(text.contains("diameter_connections_awaiting_cer 4"), "{text}");

    // One silent peer goes: a new connection is taken again and opens.
    drop(silent.pop());
    wait_until("3 connections awaiting CER", || s.connections_awaiting_cer() == 3).await;
    let mut opened = Raw::connect(addr).await;
    assert_eq!(opened.open("sixth.raw").await, Some(rc::DIAMETER_SUCCESS));
    // An open peer does not count: the fourth place is free again for the next one.
    wait_until("back to 3", || s.connections_awaiting_cer() == 3).await;
    let mut another = Raw::connect(addr).await;
    assert_eq!(another.open("seventh.raw").await, Some(rc::DIAMETER_SUCCESS));
    assert_eq!(s.peer_state("sixth.raw"), Some(PeerState::ROpen));
    assert_eq!(s.peer_state("seventh.raw"), Some(PeerState::ROpen));
}

/// The families and label sets of the node's metrics, without their values.
fn metric_series(node: &DiameterNode) -> Vec<String> {
    metrics_text(node)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.rsplit_once(' ').map_or(l, |(series, _)| series).to_owned())
        .collect()
}

#[tokio::test]
async fn peers_with_ever_new_origin_hosts_leave_nothing_behind() {
    init_log();
    let mut c = server_cfg();
    c.peers = vec![PeerConfig::accept("configured.raw")];
    let s = server(c, 0).await;
    let addr = s.local_addr().unwrap();
    let node = &s;
    // One peer's life: CER/CEA, a request, then DPR/DPA or a plain close.
    let cycle = |i: u32| async move {
        let host = format!("churn-{i}.raw");
        let mut r = Raw::connect(addr).await;
        assert_eq!(r.open(&host).await, Some(rc::DIAMETER_SUCCESS));
        r.send_msg(&str_req(&host, 2, 1)).await;
        assert_eq!(r.recv().await.unwrap().result_code(), Some(rc::DIAMETER_SUCCESS));
        // While connected, a learnt peer is in the table.
        assert_eq!(node.peer_state(&host), Some(PeerState::ROpen));
        if i % 2 == 0 {
            let dpr = Message::request(base::APP_ID, base::CMD_DISCONNECT_PEER)
                .ids(3, 3)
                .origin(&host, "raw")
                .avp(base::DISCONNECT_CAUSE.enumerated(0));
            r.send_msg(&dpr).await;
            assert_eq!(r.recv().await.unwrap().command_code(), base::CMD_DISCONNECT_PEER);
            assert!(r.recv().await.is_none(), "closed after DPA");
        }
    };
    cycle(1_000_000).await;
    let hosts = || s.peers().into_iter().map(|p| p.host).collect::<Vec<_>>();
    wait_until("the first peer gone", || hosts() == ["configured.raw"]).await;
    let series = metric_series(&s);
    for i in 0..1000 {
        cycle(i).await;
    }
    wait_until("every churned peer gone", || hosts() == ["configured.raw"]).await;
    assert_eq!(s.peer_state("configured.raw"), Some(PeerState::Closed), "configured peers stay");
    assert_eq!(s.peer_state("churn-0.raw"), None);
    assert!(s.wait_peer("churn-1.raw", T, |st| st == PeerState::Closed).await);
    assert_eq!(s.connections_awaiting_cer(), 0);
    assert_eq!(metric_series(&s), series, "no metric series per peer");
    // ... and a peer that comes back is served as new.
    cycle(7).await;
}
