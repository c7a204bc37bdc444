//! Diameter messages checked by Wireshark's dissector (skipped without tshark).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use diameter::dictionary::{base, dcca, gx};
use diameter::{
    result_code as rc, ApplicationId, DiameterNode, Message, NodeConfig, PeerConfig, Route,
    RouteAction,
};
use pcf::config::DiameterConfig;

pub const PCF_HOST: &str = "pcf.pcf.example";
pub const PCF_REALM: &str = "pcf.example";
pub const PGW_HOST: &str = "pgw.epc.example";
pub const PGW_REALM: &str = "epc.example";

/// `[pcf.diameter]` on an ephemeral loopback port, as `PCF_HOST` in `PCF_REALM`.
pub fn diameter_on() -> DiameterConfig {
    DiameterConfig {
        enabled: true,
        listen: "127.0.0.1:0".parse().unwrap(),
        origin_host: PCF_HOST.into(),
        origin_realm: PCF_REALM.into(),
        ..DiameterConfig::default()
    }
}

/// A Gx CCR of the PGW's session `sid`: CC-Request-Type `kind` (1 initial, 2 update, 3
/// termination, 4 event), CC-Request-Number `n`.
pub fn ccr(sid: &str, kind: u32, n: u32) -> Message {
    Message::request(gx::APP_ID, gx::CMD_CREDIT_CONTROL)
        .session_id_avp(sid)
        .avp(base::AUTH_APPLICATION_ID.u32(gx::APP_ID))
        .origin(PGW_HOST, PGW_REALM)
        .destination(PCF_REALM, None)
        .avp(dcca::CC_REQUEST_TYPE.enumerated(kind))
        .avp(dcca::CC_REQUEST_NUMBER.u32(n))
}

/// Every Diameter message a test saw, as bytes, for [`tshark_check`].
pub type Wire = Arc<Mutex<Vec<Vec<u8>>>>;

/// Wireshark decodes every message with no malformed or unknown AVP and no error or warning
/// (testkit's check, shared with the diameter and BSF tests).
pub fn tshark_check(messages: &[Vec<u8>]) {
    testkit::tshark::tshark_check(messages);
}

/// [`tshark_check`], tolerating the complaints whose line contains one of `tolerated`.
pub fn tshark_check_tolerating(messages: &[Vec<u8>], tolerated: &[&str]) {
    testkit::tshark::tshark_check_tolerating(messages, tolerated);
}

/// A Diameter peer of the PCF (the PGW on Gx or the AF on Rx): answers the PCF's requests
/// with 2001 and keeps them.
pub struct DiameterPeer {
    pub node: DiameterNode,
    got: Arc<Mutex<Vec<Message>>>,
    wire: Wire,
}

impl DiameterPeer {
    /// Connects to the PCF at `pcf` (Origin-Host `pcf_host`) as `host` in `realm`, serving the
    /// 3GPP application `app`; every message either way is kept in `wire` for tshark.
    /// The PGW on Gx ([`PGW_HOST`], [`PGW_REALM`]), connected to the PCF's Diameter node.
    pub async fn pgw(pcf: SocketAddr, wire: &Wire) -> DiameterPeer {
        Self::start(pcf, PCF_HOST, PGW_HOST, PGW_REALM, gx::APP_ID, wire.clone()).await
    }

    pub async fn start(
        pcf: SocketAddr,
        pcf_host: &'static str,
        host: &'static str,
        realm: &'static str,
        app: u32,
        wire: Wire,
    ) -> DiameterPeer {
        let mut c = NodeConfig::new(host, realm);
        c.applications = vec![ApplicationId::tgpp(app)];
        c.peers = vec![PeerConfig::connect(pcf_host, pcf)];
        c.routes = vec![Route::new("*", RouteAction::Relay(vec![pcf_host.into()]))];
        c.reconnect_min = Duration::from_millis(50);
        c.reconnect_max = Duration::from_millis(200);
        c.request_timeout = Duration::from_secs(3);
        let got = Arc::new(Mutex::new(Vec::new()));
        let (g, w) = (got.clone(), wire.clone());
        let node = DiameterNode::builder(c)
            .handler(app, move |req: Message| {
                let (g, w) = (g.clone(), w.clone());
                async move {
                    w.lock().unwrap().push(req.to_bytes().unwrap().to_vec());
                    g.lock().unwrap().push(req.clone());
                    Message::answer_to(&req)
                        .origin(host, realm)
                        .result_code_avp(rc::DIAMETER_SUCCESS)
                }
            })
            .start()
            .await
            .unwrap();
        assert!(
            node.wait_open(pcf_host, Duration::from_secs(5)).await,
            "{host} connects to the PCF"
        );
        DiameterPeer { node, got, wire }
    }

    pub async fn send(&self, m: Message) -> Message {
        let a = self.node.request(m).await.expect("an answer");
        self.wire.lock().unwrap().push(a.to_bytes().unwrap().to_vec());
        a
    }

    /// The next request the PCF sent this peer.
    pub async fn next(&self) -> Message {
        for _ in 0..100 {
            {
                let mut g = self.got.lock().unwrap();
                if !g.is_empty() {
                    return g.remove(0);
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no request came");
    }

    /// Nothing more comes for a while.
    pub async fn quiet(&self) {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let g = self.got.lock().unwrap();
        assert!(g.is_empty(), "unexpected: {:?}", *g);
    }
}
