//! The node's message-copy tap over real sockets: each application request and answer, either
//! way, with its wire bytes; never CER/CEA, DWR/DWA or DPR/DPA.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use diameter::dictionary::{base, rx};
use diameter::{
    result_code as rc, ApplicationId, DiameterNode, DiameterTap, Direction, Message, NodeConfig,
    PeerConfig, TappedMessage,
};

const T: Duration = Duration::from_secs(5);

/// What a tap saw: direction, the message decoded from the copied bytes, connection and peer.
type Seen = Arc<Mutex<Vec<(Direction, Message, u64, SocketAddr, String)>>>;

struct Recorder(Seen);

impl DiameterTap for Recorder {
    fn copy(&self, m: &TappedMessage<'_>) {
        let msg = Message::decode(bytes::Bytes::copy_from_slice(m.wire)).expect("whole message");
        self.0.lock().unwrap().push((
            m.direction,
            msg,
            m.connection,
            m.peer_addr,
            m.peer_host.to_owned(),
        ));
    }
}

fn cfg(host: &str, realm: &str) -> NodeConfig {
    let mut c = NodeConfig::new(host, realm);
    c.applications = vec![ApplicationId::tgpp(rx::APP_ID)];
    c.watchdog_interval = Duration::from_millis(100);
    c
}

fn str_req(node: &DiameterNode) -> Message {
    Message::request(rx::APP_ID, rx::CMD_SESSION_TERMINATION)
        .session_id_avp(&node.new_session_id())
        .origin(node.origin_host(), node.origin_realm())
        .destination("test", None)
        .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
        .avp(base::TERMINATION_CAUSE.enumerated(1))
}

#[tokio::test]
async fn both_sides_see_each_application_message_once_and_no_base_protocol() {
    let mut sc = cfg("pcrf.test", "test");
    sc.listen = Some(SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 0));
    sc.accept_unknown_peers = true;
    let server = DiameterNode::builder(sc)
        .handler(rx::APP_ID, |req: Message| async move {
            Message::answer_to(&req).result_code_avp(rc::DIAMETER_SUCCESS)
        })
        .start()
        .await
        .unwrap();
    let server_seen = Seen::default();
    assert!(server.set_tap(Arc::new(Recorder(server_seen.clone()))));
    assert!(!server.set_tap(Arc::new(Recorder(Seen::default()))), "installed once");

    let mut cc = cfg("af.test", "af");
    cc.peers = vec![PeerConfig::connect("pcrf.test", server.local_addr().unwrap())];
    let client = DiameterNode::builder(cc).start().await.unwrap();
    let client_seen = Seen::default();
    client.set_tap(Arc::new(Recorder(client_seen.clone())));
    assert!(client.wait_open("pcrf.test", T).await);

    let req = str_req(&client);
    let sid = req.session_id().unwrap().to_owned();
    let ans = client.request(req).await.unwrap();
    assert_eq!(ans.result_code(), Some(rc::DIAMETER_SUCCESS));
    // Several watchdog intervals: DWR/DWA go both ways and are not copied.
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert!(client.disconnect("pcrf.test", 0).await);

    let client_seen = client_seen.lock().unwrap().clone();
    let server_seen = server_seen.lock().unwrap().clone();
    let dirs = |s: &[(Direction, Message, u64, SocketAddr, String)]| -> Vec<(Direction, bool)> {
        s.iter().map(|(d, m, ..)| (*d, m.is_request())).collect()
    };
    assert_eq!(dirs(&client_seen), [(Direction::Sent, true), (Direction::Received, false)]);
    assert_eq!(dirs(&server_seen), [(Direction::Received, true), (Direction::Sent, false)]);
    for (_, m, ..) in client_seen.iter().chain(&server_seen) {
        assert_eq!(m.application_id(), rx::APP_ID);
        assert_eq!(m.session_id(), Some(sid.as_str()));
    }
    // A request and its answer: same connection, same hop-by-hop and end-to-end ids.
    for s in [&client_seen, &server_seen] {
        assert_eq!(s[0].2, s[1].2);
        assert_eq!(s[0].1.hop_by_hop_id(), s[1].1.hop_by_hop_id());
        assert_eq!(s[0].1.end_to_end_id(), s[1].1.end_to_end_id());
    }
    assert_eq!(client_seen[0].3, server.local_addr().unwrap());
    assert_eq!(client_seen[0].4, "pcrf.test");
    assert_eq!(server_seen[0].4, "af.test");
    assert_eq!(server_seen[1].1.result_code(), Some(rc::DIAMETER_SUCCESS));
}
