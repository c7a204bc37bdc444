//! Interop with Debian's freeDiameter (`freeDiameterd`, package `freediameter`): it connects to
//! our node (CER/CEA, DWR/DWA, DPR/DPA) and relays between our client and our server.
//! Prints "skipped" when freeDiameterd is not installed (fails instead with
//! FIVECORE_REQUIRE_FREEDIAMETER=1, as ./test.sh sets). freeDiameterd runs on 127.0.0.1 only and
//! is stopped by PID; every wait has a timeout.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use diameter::dictionary::{base, rx};
use diameter::{
    result_code as rc, ApplicationId, DiameterNode, Message, NodeConfig, PeerConfig, PeerState,
    Route, RouteAction,
};

const T: Duration = Duration::from_secs(15);
use testkit::freediameter::{HOST as FD_HOST, REALM as FD_REALM};

use testkit::freediameter::{binary_or_skip as fd_binary_or_skip, start as start_fd};

fn our_cfg(host: &str, realm: &str) -> NodeConfig {
    let mut c = NodeConfig::new(host, realm);
    c.listen = Some(SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 0));
    c.applications = vec![ApplicationId::tgpp(rx::APP_ID)];
    c.peers = vec![PeerConfig::accept(FD_HOST)];
    c
}

#[tokio::test]
async fn freediameter_peer_cer_dwr_dpr() {
    let Some(bin) = fd_binary_or_skip() else { return };
    let mut cfg = our_cfg("ours.ourrealm", "ourrealm");
    cfg.watchdog_interval = Duration::from_millis(300);
    let node = DiameterNode::builder(cfg).start().await.unwrap();
    let _fd = start_fd(&bin, &[("ours.ourrealm", node.local_addr().unwrap())]);
    assert!(node.wait_open(FD_HOST, T).await, "freeDiameterd completes CER/CEA");
    let info = node.peers().into_iter().find(|p| p.host == FD_HOST).unwrap();
    assert_eq!(info.capabilities.as_ref().unwrap().origin_realm, FD_REALM);
    // our Tw is 300 ms: freeDiameterd must answer our DWRs or the peer turns Suspect
    let deadline = tokio::time::Instant::now() + Duration::from_secs(8);
    while tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(node.peer_state(FD_HOST), Some(PeerState::ROpen));
    }
    let info = node.peers().into_iter().find(|p| p.host == FD_HOST).unwrap();
    assert!(info.watchdogs_answered >= 5, "DWAs from freeDiameterd: {info:?}");
    assert!(node.disconnect(FD_HOST, 2).await, "DPR/DPA");
    assert_eq!(node.peer_state(FD_HOST), Some(PeerState::Closed));
}

#[tokio::test]
async fn freediameter_sends_dwr_and_we_answer() {
    let Some(bin) = fd_binary_or_skip() else { return };
    // our Tw (30 s) is longer than freeDiameterd's (6 s ± 2 s), so it sends the DWRs
    let node = DiameterNode::builder(our_cfg("wd.ourrealm", "ourrealm")).start().await.unwrap();
    let _fd = start_fd(&bin, &[("wd.ourrealm", node.local_addr().unwrap())]);
    assert!(node.wait_open(FD_HOST, T).await);
    let deadline = tokio::time::Instant::now() + T;
    loop {
        let info = node.peers().into_iter().find(|p| p.host == FD_HOST).unwrap();
        if info.watchdogs_received >= 1 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "no DWR from freeDiameterd: {info:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // answered: freeDiameterd keeps the connection (it would close it after an unanswered DWR)
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(node.peer_state(FD_HOST), Some(PeerState::ROpen));
    node.shutdown().await;
}

#[tokio::test]
async fn client_reaches_server_through_freediameter_relay() {
    let Some(bin) = fd_binary_or_skip() else { return };
    let scfg = our_cfg("pcrf.srealm", "srealm");
    let s = DiameterNode::builder(scfg)
        .handler(rx::APP_ID, |req: Message| async move {
            Message::answer_to(&req).result_code_avp(rc::DIAMETER_SUCCESS)
        })
        .start()
        .await
        .unwrap();
    let mut ccfg = our_cfg("af.crealm", "crealm");
    ccfg.routes = vec![Route::new("srealm", RouteAction::Relay(vec![FD_HOST.into()]))];
    let c = DiameterNode::builder(ccfg).start().await.unwrap();
    let _fd = start_fd(
        &bin,
        &[("pcrf.srealm", s.local_addr().unwrap()), ("af.crealm", c.local_addr().unwrap())],
    );
    assert!(s.wait_open(FD_HOST, T).await && c.wait_open(FD_HOST, T).await);
    let str_req = || {
        Message::request(rx::APP_ID, rx::CMD_SESSION_TERMINATION)
            .session_id_avp(&c.new_session_id())
            .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
            .origin("af.crealm", "crealm")
            .destination("srealm", None)
            .avp(base::TERMINATION_CAUSE.enumerated(1))
    };
    // our server is R-Open once it sent its CEA; freeDiameterd opens its side when it has read
    // it: until then it answers 3002 ("No suitable candidate")
    let deadline = tokio::time::Instant::now() + T;
    loop {
        let a = tokio::time::timeout(T, c.request(str_req())).await.expect("timed out").unwrap();
        if a.result_code() != Some(rc::DIAMETER_UNABLE_TO_DELIVER) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "freeDiameterd never routes: {a:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for i in 0..10 {
        let a = tokio::time::timeout(T, c.request(str_req())).await.expect("timed out").unwrap();
        assert_eq!(a.result_code(), Some(2001), "answer {i}: {a:?}");
        assert_eq!(a.origin_host(), Some("pcrf.srealm"));
    }
}
