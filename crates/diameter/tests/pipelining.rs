//! Many requests pipelined on one connection (one write carrying hundreds of them): every one is
//! answered once, a slow one does not hold up those behind it, and a relay forwards them all.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use bytes::BytesMut;
use diameter::dictionary::{base, rx};
use diameter::{
    frame_len, ApplicationId, DiameterNode, Message, NodeConfig, PeerConfig, Route, RouteAction,
    VENDOR_3GPP,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const T: Duration = Duration::from_secs(10);
const LOCAL: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 0);

fn server_cfg(host: &str, realm: &str) -> NodeConfig {
    let mut c = NodeConfig::new(host, realm);
    c.applications = vec![ApplicationId::tgpp(rx::APP_ID)];
    c.listen = Some(LOCAL);
    c.accept_unknown_peers = true;
    c
}

/// Answers Rx requests 2001 with its Origin-Host; a Session-Id ending in ";slow" waits 300 ms.
async fn server(host: &'static str, realm: &'static str) -> DiameterNode {
    DiameterNode::builder(server_cfg(host, realm))
        .handler(rx::APP_ID, move |req: Message| async move {
            if req.session_id().is_some_and(|s| s.ends_with(";slow")) {
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Message::answer_to(&req).result_code_avp(2001).origin(host, realm)
        })
        .start()
        .await
        .unwrap()
}

/// A peer speaking raw Diameter over TCP.
struct Raw {
    s: TcpStream,
    buf: BytesMut,
}

impl Raw {
    /// Connects and exchanges CER/CEA as `host`.
    async fn open(addr: SocketAddr, host: &str) -> Raw {
        let mut r = Raw { s: TcpStream::connect(addr).await.unwrap(), buf: BytesMut::new() };
        let cer = Message::request(base::APP_ID, base::CMD_CAPABILITIES_EXCHANGE)
            .ids(1, 1)
            .origin(host, "raw")
            .avp(base::HOST_IP_ADDRESS.address(Ipv4Addr::LOCALHOST.into()))
            .avp(base::VENDOR_ID.u32(0))
            .avp(base::PRODUCT_NAME.utf8("raw"))
            .avp(diameter::builders::vendor_specific_auth_app(VENDOR_3GPP, rx::APP_ID));
        r.s.write_all(&cer.to_bytes().unwrap()).await.unwrap();
        assert_eq!(r.recv().await.result_code(), Some(2001), "CEA");
        r
    }

    async fn recv(&mut self) -> Message {
        tokio::time::timeout(T, async {
            loop {
                if let Some(n) = frame_len(&self.buf).unwrap() {
                    return Message::decode(self.buf.split_to(n).freeze()).unwrap();
                }
                assert!(self.s.read_buf(&mut self.buf).await.unwrap() > 0, "connection closed");
            }
        })
        .await
        .expect("timed out")
    }

    /// The next answer (DWRs from the node are skipped).
    async fn recv_answer(&mut self) -> Message {
        loop {
            let m = self.recv().await;
            if !m.is_request() {
                return m;
            }
        }
    }
}

fn str_req(hbh: u32, sid: &str, realm: &str) -> Message {
    Message::request(rx::APP_ID, rx::CMD_SESSION_TERMINATION)
        .ids(hbh, 0x1000 + hbh)
        .session_id_avp(sid)
        .origin("raw.client", "raw")
        .destination(realm, None)
        .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
        .avp(base::TERMINATION_CAUSE.enumerated(1))
}

/// `n` STRs (hop-by-hop ids 100..100+n) in one buffer.
fn pipelined(n: u32, realm: &str) -> Vec<u8> {
    let mut wire = BytesMut::new();
    for i in 0..n {
        str_req(100 + i, &format!("raw.client;{i}"), realm).encode(&mut wire).unwrap();
    }
    wire.to_vec()
}

#[tokio::test]
async fn pipelined_requests_are_all_answered_in_order_of_arrival() {
    let s = server("pcrf.p", "p").await;
    let mut r = Raw::open(s.local_addr().unwrap(), "raw.client").await;
    let n = 2_000;
    r.s.write_all(&pipelined(n, "p")).await.unwrap();
    for i in 0..n {
        let a = r.recv_answer().await;
        assert_eq!(a.hop_by_hop_id(), 100 + i, "answers in order of arrival");
        assert_eq!(a.end_to_end_id(), 0x1000 + 100 + i);
        assert_eq!(a.result_code(), Some(2001));
        assert_eq!(a.session_id(), Some(format!("raw.client;{i}").as_str()));
    }
}

#[tokio::test]
async fn a_slow_request_does_not_hold_up_the_ones_behind_it() {
    let s = server("pcrf.p", "p").await;
    let mut r = Raw::open(s.local_addr().unwrap(), "raw.client").await;
    let mut wire = BytesMut::new();
    str_req(1, "raw.client;slow", "p").encode(&mut wire).unwrap();
    for i in 0..50 {
        str_req(2 + i, &format!("raw.client;{i}"), "p").encode(&mut wire).unwrap();
    }
    r.s.write_all(&wire).await.unwrap();
    for i in 0..50 {
        assert_eq!(r.recv_answer().await.hop_by_hop_id(), 2 + i);
    }
    let a = r.recv_answer().await;
    assert_eq!((a.hop_by_hop_id(), a.result_code()), (1, Some(2001)));
}

#[tokio::test]
async fn a_relay_forwards_every_pipelined_request() {
    let s = server("pcrf.s", "s").await;
    let mut rc = server_cfg("dra.r", "r");
    rc.relay = true;
    rc.applications.clear();
    rc.peers = vec![PeerConfig::connect("pcrf.s", s.local_addr().unwrap())];
    rc.routes = vec![Route::new("s", RouteAction::Relay(vec!["pcrf.s".into()]))];
    let relay = DiameterNode::builder(rc).start().await.unwrap();
    assert!(relay.wait_open("pcrf.s", T).await);
    let mut r = Raw::open(relay.local_addr().unwrap(), "raw.client").await;
    let n = 1_000;
    r.s.write_all(&pipelined(n, "s")).await.unwrap();
    let mut seen = vec![false; n as usize];
    for _ in 0..n {
        let a = r.recv_answer().await;
        assert_eq!(a.result_code(), Some(2001));
        assert_eq!(a.origin_host(), Some("pcrf.s"));
        let i = (a.hop_by_hop_id() - 100) as usize;
        assert_eq!(a.session_id(), Some(format!("raw.client;{i}").as_str()));
        assert!(!std::mem::replace(&mut seen[i], true), "hop-by-hop id {} answered twice", i + 100);
    }
    assert!(seen.iter().all(|x| *x));
}
