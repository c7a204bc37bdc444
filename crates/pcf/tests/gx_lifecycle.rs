//! A Gx session's life beyond CCR-I/U/T, over real sockets on 127.0.0.1: its PCF binding at a
//! real BSF (and an AF's AAR routed to it by the BSF's Rx proxy), its release when the UDR
//! removes the subscriber (RAR with Session-Release-Cause, TS 29.212 §4.5.6), RARs sent again
//! when unanswered, and the session audit asking the PCEF with an RAR. A PCEF test double that
//! answers each session as the test says; Wireshark's dissector on every message the PCF sent
//! (skipped without tshark).

mod common;

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::peers::start_udr;
use common::wire::*;
use common::*;
use diameter::dictionary::{base, dcca, gx, nasreq, rx};
use diameter::{
    result_code as rc, ApplicationId, DiameterNode, Message, NodeConfig, PeerConfig, Route,
    RouteAction,
};
use pcf::config::{AuditConfig, BsfConfig, OnUnknown, UdrConfig};
use pcf::PcfConfig;
use serde_json::{json, Value};
use testkit::specs::Specs;

const BSF_HOST: &str = "bsf.pcf.example";
const AF_HOST: &str = "pcscf.ims.example";
const AF_REALM: &str = "ims.example";

/// A CCR-I of UE `imsi` at 10.45.0.`host` on APN internet.
fn ccr_i(sid: &str, imsi: &str, host: u8) -> Message {
    ccr(sid, 1, 0)
        .avp(dcca::SUBSCRIPTION_ID.grouped(vec![
            dcca::SUBSCRIPTION_ID_TYPE.enumerated(dcca::subscription_id_type::END_USER_IMSI),
            dcca::SUBSCRIPTION_ID_DATA.utf8(imsi),
        ]))
        .avp(nasreq::FRAMED_IP_ADDRESS.ipv4_octets(Ipv4Addr::new(10, 45, 0, host)))
        .avp(gx::IP_CAN_TYPE.enumerated(gx::ip_can_type::TGPP_EPS))
        .avp(gx::RAT_TYPE.enumerated(gx::rat_type::EUTRAN))
        .avp(nasreq::CALLED_STATION_ID.utf8("internet"))
}

fn ccr_t(sid: &str, n: u32) -> Message {
    ccr(sid, 3, n).avp(base::TERMINATION_CAUSE.enumerated(1))
}

/// What the PCEF answers a session's requests with, one code per request in turn (the last
/// repeats); 0: no answer before the PCF gives up (the answer comes after 1.5 s).
type Script = Arc<Mutex<HashMap<String, Vec<u32>>>>;

/// A PCEF (P-GW) that answers the PCF's RARs as its [`Script`] says (2001 for a session the
/// script does not name), keeping each request.
struct Pcef {
    node: DiameterNode,
    script: Script,
    got: Arc<Mutex<Vec<Message>>>,
    wire: Wire,
}

impl Pcef {
    async fn start(pcf: SocketAddr, wire: Wire) -> Pcef {
        let mut c = NodeConfig::new(PGW_HOST, PGW_REALM);
        c.applications = vec![ApplicationId::tgpp(gx::APP_ID)];
        c.peers = vec![PeerConfig::connect(PCF_HOST, pcf)];
        c.routes = vec![Route::new("*", RouteAction::Relay(vec![PCF_HOST.into()]))];
        c.request_timeout = Duration::from_secs(3);
        let script: Script = Arc::default();
        let got: Arc<Mutex<Vec<Message>>> = Arc::default();
        let (s, g, w) = (script.clone(), got.clone(), wire.clone());
        let node = DiameterNode::builder(c)
            .handler(gx::APP_ID, move |req: Message| {
                let (s, g, w) = (s.clone(), g.clone(), w.clone());
                async move {
                    w.lock().unwrap().push(req.to_bytes().unwrap().to_vec());
                    g.lock().unwrap().push(req.clone());
                    let sid = req.session_id().unwrap_or_default().to_string();
                    let code = {
                        let mut s = s.lock().unwrap();
                        match s.get_mut(&sid) {
                            Some(codes) if codes.len() > 1 => codes.remove(0),
                            Some(codes) => codes[0],
                            None => rc::DIAMETER_SUCCESS,
                        }
                    };
                    if code == 0 {
                        tokio::time::sleep(Duration::from_millis(1500)).await;
                    }
                    Message::answer_to(&req)
                        .origin(PGW_HOST, PGW_REALM)
                        .result_code_avp(if code == 0 { rc::DIAMETER_SUCCESS } else { code })
                }
            })
            .start()
            .await
            .unwrap();
        assert!(node.wait_open(PCF_HOST, Duration::from_secs(5)).await, "the PCEF connects");
        Pcef { node, script, got, wire }
    }

    fn answer(&self, sid: &str, codes: &[u32]) {
        self.script.lock().unwrap().insert(sid.to_string(), codes.to_vec());
    }

    async fn send(&self, m: Message) -> Message {
        let a = self.node.request(m).await.expect("an answer");
        self.wire.lock().unwrap().push(a.to_bytes().unwrap().to_vec());
        a
    }

    /// The requests the PCF sent for session `sid` so far.
    fn got(&self, sid: &str) -> Vec<Message> {
        self.got.lock().unwrap().iter().filter(|m| m.session_id() == Some(sid)).cloned().collect()
    }

    /// Waits until the PCF has sent `n` requests for session `sid`.
    async fn wait_for(&self, sid: &str, n: usize) -> Vec<Message> {
        for _ in 0..200 {
            let g = self.got(sid);
            if g.len() >= n {
                return g;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("{n} requests for {sid} did not come: {:?}", self.got(sid));
    }
}

async fn metrics(pcf: &TestPcf) -> String {
    let r = client().get(&format!("{}/metrics", pcf.base)).send().await.unwrap();
    String::from_utf8_lossy(r.body()).into_owned()
}

fn has(text: &str, line: &str) -> bool {
    text.lines().any(|l| l == line)
}

async fn stored(pcf: &TestPcf, sid: &str) -> bool {
    pcf.pcf.store.get_sm(&format!("gx:{sid}")).await.unwrap().is_some()
}

/// A free port on 127.0.0.1, for the PCF's Diameter listener: the BSF is configured with it
/// before the PCF starts (the PCF needs the BSF's address first).
fn free_port() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

/// With `[pcf.bsf]` on, a Gx session is bound at the BSF at CCR-I (with the PCF's Diameter
/// identity and the configured S-NSSAI) and unbound at CCR-T; in between, an AF's AAR sent to
/// the BSF's Rx proxy reaches the PCF, whose rules reach the PCEF in an RAR.
async fn a_gx_session_is_bound_at_the_bsf_and_an_af_reaches_it_through_the_rx_proxy() {
    let specs = Specs::load(&["TS29521_Nbsf_Management", "TS29571_CommonData"]);
    let d = state_dir();
    let pcf_diameter = free_port();
    let run = bsf::RunConfig {
        bsf: bsf::BsfConfig {
            rx: bsf::config::RxConfig {
                enabled: true,
                listen: "127.0.0.1:0".parse().unwrap(),
                origin_host: BSF_HOST.into(),
                origin_realm: PCF_REALM.into(),
                peers: vec![bsf::config::RxPeer {
                    host: PCF_HOST.into(),
                    addr: pcf_diameter,
                    tls: false,
                }],
                ..bsf::config::RxConfig::default()
            },
            ..bsf::BsfConfig::default()
        },
        sbi: sbi::ServerConfig::default(),
        client: sbi::client::ClientConfig::default(),
        store: store::SqliteConfig {
            readers: 1,
            ..store::SqliteConfig::new(d.path().join("b.db"))
        },
        instance_id: None,
    };
    let bound = bsf::bind(run).await.unwrap();
    let bsf_base = format!("http://{}", bound.local_addr());
    let bsf_rx = bound.rx_local_addr().unwrap();
    let (stop_bsf, stopped) = tokio::sync::oneshot::channel::<()>();
    let bsf_task = tokio::spawn(bound.serve(async {
        let _ = stopped.await;
    }));

    let config = PcfConfig {
        policy: Some(default_project(&d.path().join("policy"))),
        bsf: BsfConfig { enabled: true, api_root: Some(bsf_base.clone()), ..BsfConfig::default() },
        diameter: pcf::config::DiameterConfig { listen: pcf_diameter, ..diameter_on() },
        ..PcfConfig::default()
    };
    let pcf = TestPcf::start_with(d.path(), config).await;
    let wire: Wire = Arc::default();
    let pgw = Pcef::start(pcf.diameter(), wire.clone()).await;
    let sid = "pgw.epc.example;bsf;1";
    let a = pgw.send(ccr_i(sid, "001010000000031", 31)).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");

    let c = client();
    let find = format!("{bsf_base}/nbsf-management/v1/pcfBindings?ipv4Addr=10.45.0.31");
    let r = c.get(&find).send().await.unwrap();
    let binding: Value = body(&r);
    assert_eq!(r.status().as_u16(), 200, "{binding}");
    specs.assert_valid("TS29521_Nbsf_Management", "PcfBinding", &binding);
    assert_eq!(binding["supi"], "imsi-001010000000031");
    assert_eq!(binding["dnn"], "internet");
    assert_eq!(binding["snssai"], json!({"sst": 1}));
    assert_eq!(binding["pcfDiamHost"], PCF_HOST);
    assert_eq!(binding["pcfDiamRealm"], PCF_REALM);
    // The session's context (what the rules read) has no slice: only the binding names one.
    let s = pcf.pcf.store.get_sm(&format!("gx:{sid}")).await.unwrap().unwrap();
    let ctx: Value = serde_json::from_slice(&s.context).unwrap();
    assert!(ctx.get("sliceInfo").is_none(), "{ctx}");
    assert!(s.binding.is_some());

    // The AF knows only the BSF: its AAR for the UE's address reaches the PCF holding the Gx
    // session, which installs the call's rule at the PCEF.
    let node = pcf.pcf.gx.get().unwrap();
    assert!(node.wait_open(BSF_HOST, Duration::from_secs(5)).await, "the BSF connects");
    let af =
        DiameterPeer::start(bsf_rx, BSF_HOST, AF_HOST, AF_REALM, rx::APP_ID, wire.clone()).await;
    let af_sid = "pcscf.ims.example;bsf;1";
    let aar = Message::request(rx::APP_ID, rx::CMD_AA)
        .session_id_avp(af_sid)
        .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
        .origin(AF_HOST, AF_REALM)
        .destination(PCF_REALM, None)
        .avp(rx::RX_REQUEST_TYPE.enumerated(0))
        .avp(nasreq::FRAMED_IP_ADDRESS.ipv4_octets(Ipv4Addr::new(10, 45, 0, 31)))
        .avp(rx::MEDIA_COMPONENT_DESCRIPTION.grouped(vec![
            rx::MEDIA_COMPONENT_NUMBER.u32(1),
            rx::MEDIA_TYPE.enumerated(0),
            rx::MAX_REQUESTED_BANDWIDTH_UL.u32(41_000),
            rx::MAX_REQUESTED_BANDWIDTH_DL.u32(41_000),
            rx::MEDIA_SUB_COMPONENT.grouped(vec![
                rx::FLOW_NUMBER.u32(1),
                rx::FLOW_DESCRIPTION
                    .with_slice(b"permit out 17 from 198.51.100.10 50000 to 10.45.0.31 49152"),
            ]),
        ]));
    let a = af.send(aar).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    let rar = pgw.wait_for(sid, 1).await.remove(0);
    assert_eq!(rar.command_code(), gx::CMD_RE_AUTH);
    let rule = rar.charging_rule_installs().next().expect("Charging-Rule-Install");
    let name = rule
        .child(&gx::CHARGING_RULE_DEFINITION)
        .and_then(|d| d.child(&gx::CHARGING_RULE_NAME))
        .map(|n| String::from_utf8_lossy(n.as_slice().unwrap()).into_owned());
    assert_eq!(name.as_deref(), Some(&*format!("af-rx:{af_sid}-1")));
    let str_ = Message::request(rx::APP_ID, rx::CMD_SESSION_TERMINATION)
        .session_id_avp(af_sid)
        .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
        .origin(AF_HOST, AF_REALM)
        .destination(PCF_REALM, None)
        .avp(base::TERMINATION_CAUSE.enumerated(1));
    assert_eq!(af.send(str_).await.result_code(), Some(rc::DIAMETER_SUCCESS));

    // CCR-T: the binding goes with the session.
    let a = pgw.send(ccr_t(sid, 1)).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    let r = c.get(&find).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 204, "{}", body(&r));
    let m = metrics(&pcf).await;
    for line in [
        "pcf_bsf_bindings_total{operation=\"register\",result=\"ok\"} 1",
        "pcf_bsf_bindings_total{operation=\"deregister\",result=\"ok\"} 1",
    ] {
        assert!(has(&m, line), "{line} not in {m}");
    }
    drop(af);
    drop(pgw);
    pcf.stop().await;
    let _ = stop_bsf.send(());
    bsf_task.await.unwrap().unwrap();
    tshark_check(&wire.lock().unwrap());
}

/// The UDR removes a subscriber (unknown subscribers refused): each Gx session's PCEF gets an
/// RAR with Session-Release-Cause UE_SUBSCRIPTION_REASON. An RAA 2001 leaves the session for
/// the CCR-T that follows; 5002 (the PCEF has no such session) removes it at once; no answer
/// sends the RAR again, `retries` times with the same end-to-end id and the T flag, then
/// gives up (counted) and leaves the session; an answer to a resend ends the resending.
#[tokio::test]
async fn a_subscriber_removed_at_the_udr_has_its_gx_sessions_released() {
    let d = tempfile::tempdir().unwrap();
    let udr = start_udr(d.path(), None).await;
    let c = client();
    let ue = "001010000000041";
    let url = format!("{}/nudr-dr/v2/policy-data/ues/imsi-{ue}/sm-data", udr.base);
    let data = json!({"smPolicySnssaiData": {"1": {"snssai": {"sst": 1},
        "smPolicyDnnData": {"internet": {"dnn": "internet"}}}}});
    assert_eq!(c.put(&url).json(&data).send().await.unwrap().status(), 201);
    let config = PcfConfig {
        policy: Some(default_project(&d.path().join("policy"))),
        udr: UdrConfig {
            api_root: Some(udr.base.clone()),
            on_unknown_subscriber: OnUnknown::Reject,
            ..UdrConfig::default()
        },
        diameter: pcf::config::DiameterConfig {
            request_timeout_ms: 300,
            retries: 2,
            retry_backoff_ms: 50,
            ..diameter_on()
        },
        ..PcfConfig::default()
    };
    let pcf = TestPcf::start_with(d.path(), config).await;
    let wire: Wire = Arc::default();
    let pgw = Pcef::start(pcf.diameter(), wire.clone()).await;
    let [ends, unknown, silent, late] = ["pgw;rel;1", "pgw;rel;2", "pgw;rel;3", "pgw;rel;4"];
    for (i, sid) in [ends, unknown, silent, late].into_iter().enumerate() {
        let a = pgw.send(ccr_i(sid, ue, 41 + i as u8)).await;
        assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    }
    pgw.answer(unknown, &[rc::DIAMETER_UNKNOWN_SESSION_ID]);
    pgw.answer(silent, &[0]);
    pgw.answer(late, &[0, rc::DIAMETER_SUCCESS]);

    let r = c.delete(&format!("{}/udr-prov/v1/policy-data/ues/imsi-{ue}", udr.base)).send().await;
    assert!(r.unwrap().status().is_success());

    let rar = pgw.wait_for(ends, 1).await.remove(0);
    assert_eq!(rar.command_code(), gx::CMD_RE_AUTH);
    assert_eq!(rar.destination_host(), Some(PGW_HOST));
    assert_eq!(rar.get_u32(&gx::SESSION_RELEASE_CAUSE), Some(1), "{rar:?}");
    assert_eq!(rar.get_u32(&base::RE_AUTH_REQUEST_TYPE), Some(0));
    assert!(rar.charging_rule_installs().next().is_none());

    // Unanswered: three sends in all, one end-to-end id, the T flag on the resends.
    let sent = pgw.wait_for(silent, 3).await;
    assert_eq!(sent.len(), 3);
    assert!(sent.iter().all(|m| m.end_to_end_id() == sent[0].end_to_end_id()));
    assert!(!sent[0].header.is_retransmit());
    assert!(sent[1].header.is_retransmit() && sent[2].header.is_retransmit());
    // Answered at its second send: not sent a third time.
    assert_eq!(pgw.wait_for(late, 2).await.len(), 2);
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(pgw.got(late).len(), 2);
    assert_eq!(pgw.got(silent).len(), 3);

    // 5002: removed at once. 2001: still there until its CCR-T. No answer: still there.
    assert!(!stored(&pcf, unknown).await);
    assert!(stored(&pcf, ends).await);
    assert!(stored(&pcf, silent).await);
    let a = pgw.send(ccr_t(ends, 1)).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    assert!(!stored(&pcf, ends).await);
    let m = metrics(&pcf).await;
    for line in [
        "pcf_diameter_resent_total{command=\"Gx-RAR\"} 3",
        "pcf_diameter_unanswered_total{command=\"Gx-RAR\"} 1",
        "pcf_diameter_resent_total{command=\"Rx-ASR\"} 0",
    ] {
        assert!(has(&m, line), "{line} not in {m}");
    }
    drop(pgw);
    pcf.stop().await;
    udr.stop().await;
    tshark_check(&wire.lock().unwrap());
}

/// Gx sessions with no CCR for `stale_after_ms` are asked about with an RAR that changes
/// nothing: 2001 renews the session, 5002 removes it as a CCR-T would, no answer leaves it
/// for the next pass. Counted with the N7 audit's checks.
async fn stale_gx_sessions_are_audited_with_an_rar() {
    let d = state_dir();
    let config = PcfConfig {
        policy: Some(default_project(&d.path().join("policy"))),
        diameter: pcf::config::DiameterConfig {
            request_timeout_ms: 300,
            retries: 2,
            ..diameter_on()
        },
        audit: AuditConfig { enabled: true, stale_after_ms: 500, interval_ms: 200, max_per_s: 100 },
        ..PcfConfig::default()
    };
    let pcf = TestPcf::start_with(d.path(), config).await;
    let wire: Wire = Arc::default();
    let pgw = Pcef::start(pcf.diameter(), wire.clone()).await;
    let [known, lost, silent] = ["pgw;audit;1", "pgw;audit;2", "pgw;audit;3"];
    pgw.answer(lost, &[rc::DIAMETER_UNKNOWN_SESSION_ID]);
    pgw.answer(silent, &[0]);
    for (i, sid) in [known, lost, silent].into_iter().enumerate() {
        let a = pgw.send(ccr_i(sid, &format!("00101000000005{i}"), 51 + i as u8)).await;
        assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    }
    let before = pcf.pcf.store.get_sm(&format!("gx:{known}")).await.unwrap().unwrap();

    let rar = pgw.wait_for(lost, 1).await.remove(0);
    assert_eq!(rar.command_code(), gx::CMD_RE_AUTH);
    // Nothing but the RAR's own AVPs: no rule, no QoS, no trigger, no release.
    let codes: Vec<u32> = rar.avps.iter().map(|a| a.code()).collect();
    assert_eq!(codes, vec![263, 258, 264, 296, 283, 293, 285], "{rar:?}");
    for _ in 0..100 {
        if !stored(&pcf, lost).await {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!stored(&pcf, lost).await, "the session the PCEF lost is removed");
    // The known one is renewed; the silent one is kept and asked again at a later pass (no
    // resend within a pass: the next pass is its retry).
    pgw.wait_for(known, 1).await;
    let s = pgw.wait_for(silent, 2).await;
    assert!(s.iter().all(|m| !m.header.is_retransmit()));
    assert!(stored(&pcf, silent).await);
    let after = pcf.pcf.store.get_sm(&format!("gx:{known}")).await.unwrap().unwrap();
    assert!(after.updated_ms > before.updated_ms);
    let m = metrics(&pcf).await;
    assert!(has(&m, "pcf_audit_checks_total{result=\"removed\"} 1"), "{m}");
    assert!(!has(&m, "pcf_audit_checks_total{result=\"known\"} 0"), "{m}");
    assert!(!has(&m, "pcf_audit_checks_total{result=\"no_answer\"} 0"), "{m}");
    drop(pgw);
    pcf.stop().await;
    tshark_check(&wire.lock().unwrap());
}

testkit::on_both_backends!(
    a_gx_session_is_bound_at_the_bsf_and_an_af_reaches_it_through_the_rx_proxy,
    stale_gx_sessions_are_audited_with_an_rar,
);
