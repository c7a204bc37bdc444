//! Sd (TS 29.212 §4b, §5b) over real sockets: a TDF on the diameter crate's node that the PCF
//! connects to, and a P-GW on Gx: the TSR at CCR-I with the project's ADC rules, the TDF's
//! application reports re-deciding the Gx session (Gx RAR, ADC rules in the CCA), a restart
//! that keeps the TDF session, its termination with the Gx session, a TDF that is down, and
//! the errors; Wireshark's dissector on every message the PCF sent (skipped without tshark).

mod common;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::wire::*;
use common::*;
use diameter::dictionary::{base, dcca, gx, nasreq, rx};
use diameter::{
    result_code as rc, ApplicationId, Avp, DiameterNode, Message, NodeConfig, Route, RouteAction,
};
use pcf::config::{SdConfig, TdfPeer};
use pcf::PcfConfig;
use serde_json::{json, Value};

const TDF_HOST: &str = "tdf.sd.example";
const TDF_REALM: &str = "sd.example";
const UE: &str = "001010000000007";

/// A TDF: listens for the PCF's Sd connection, answers its TSRs and RARs with 2001 and keeps
/// them; every message the PCF sent it is kept in `wire` for tshark.
struct Tdf {
    node: DiameterNode,
    got: Arc<Mutex<Vec<Message>>>,
    wire: Wire,
}

impl Tdf {
    async fn start(wire: Wire) -> Tdf {
        let mut c = NodeConfig::new(TDF_HOST, TDF_REALM);
        c.listen = Some("127.0.0.1:0".parse().unwrap());
        c.applications = vec![ApplicationId::tgpp(gx::SD_APP_ID)];
        c.accept_unknown_peers = true;
        c.routes = vec![Route::new(PCF_REALM, RouteAction::Relay(vec![PCF_HOST.into()]))];
        c.request_timeout = Duration::from_secs(3);
        let got = Arc::new(Mutex::new(Vec::new()));
        let (g, w) = (got.clone(), wire.clone());
        let node = DiameterNode::builder(c)
            .handler(gx::SD_APP_ID, move |req: Message| {
                let (g, w) = (g.clone(), w.clone());
                async move {
                    w.lock().unwrap().push(req.to_bytes().unwrap().to_vec());
                    g.lock().unwrap().push(req.clone());
                    let mut a = Message::answer_to(&req).origin(TDF_HOST, TDF_REALM);
                    if req.command_code() == gx::CMD_TDF_SESSION {
                        a.push(base::AUTH_APPLICATION_ID.u32(gx::SD_APP_ID));
                    }
                    a.result_code_avp(rc::DIAMETER_SUCCESS)
                }
            })
            .start()
            .await
            .unwrap();
        Tdf { node, got, wire }
    }

    fn addr(&self) -> SocketAddr {
        self.node.local_addr().unwrap()
    }

    async fn wait_pcf(&self) {
        assert!(
            self.node.wait_open(PCF_HOST, Duration::from_secs(5)).await,
            "the PCF connects to the TDF"
        );
    }

    /// Sends a request to the PCF; its answer (kept for tshark).
    async fn send(&self, m: Message) -> Message {
        let a = self.node.request(m).await.expect("an answer");
        self.wire.lock().unwrap().push(a.to_bytes().unwrap().to_vec());
        a
    }

    async fn next(&self) -> Message {
        for _ in 0..100 {
            {
                let mut g = self.got.lock().unwrap();
                if !g.is_empty() {
                    return g.remove(0);
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no request came to the TDF");
    }

    async fn quiet(&self) {
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(self.got.lock().unwrap().is_empty(), "unexpected: {:?}", self.got.lock().unwrap());
    }
}

/// `[pcf.sd]` with one TDF at `addr`.
fn sd_on(addr: SocketAddr) -> SdConfig {
    SdConfig {
        enabled: true,
        tdf: vec![TdfPeer { host: TDF_HOST.into(), realm: TDF_REALM.into(), addr, tls: false }],
        request_timeout_ms: 1000,
        ..SdConfig::default()
    }
}

/// The default project with two ADC rules (PCC rules with an appId): video streaming enabled
/// and monitored, P2P redirected to a portal; while video runs (the TDF said it started) the
/// session's downlink AMBR is 5 Mbps and the video rule is downlink only; the last
/// application the TDF reported started is kept in a state variable.
fn adc_project(into: &Path) -> PathBuf {
    let p = default_project(into);
    let sm = p.join("rules/sm.toml");
    let mut rules = std::fs::read_to_string(&sm).unwrap();
    rules.push_str(
        r#"
[[rule]]
name = "detect-video-and-p2p"
[[rule.then]]
set = "decision.pccRules.adc-video"
value = { pccRuleId = "adc-video", appId = "video-streaming", precedence = 50, refTcData = ["tc-video"], refUmData = ["um-video"] }
[[rule.then]]
set = "decision.traffContDecs.tc-video"
value = { tcId = "tc-video", flowStatus = "ENABLED" }
[[rule.then]]
set = "decision.umDecs.um-video"
value = { umId = "mk-video" }
[[rule.then]]
set = "decision.pccRules.adc-p2p"
value = { pccRuleId = "adc-p2p", appId = "p2p", precedence = 60, refTcData = ["tc-p2p"] }
[[rule.then]]
set = "decision.traffContDecs.tc-p2p"
value = { tcId = "tc-p2p", redirectInfo = { redirectEnabled = true, redirectAddressType = "URL", redirectServerAddress = "http://portal.example/p2p" } }

[[rule]]
name = "video-running"
when = ["request.sd.running contains 'video-streaming'"]
[[rule.then]]
set = "decision.sessRules.s1.authSessAmbr.downlink"
value = "5 Mbps"
[[rule.then]]
set = "decision.traffContDecs.tc-video.flowStatus"
value = "ENABLED-DOWNLINK"

[[rule]]
name = "no-p2p-on-wlan"
when = ["request.ratType == 'WLAN'"]
[[rule.then]]
remove = "decision.pccRules.adc-p2p"

[[rule]]
name = "last-detected"
when = ["request.appDetection.started exists"]
[[rule.then]]
ssv = "lastDetected"
from = "request.appDetection.started"
"#,
    );
    std::fs::write(&sm, rules).unwrap();
    p
}

/// The CCR-I of UE `UE`'s internet PDN connection at 10.45.0.7.
fn ccr_i(sid: &str) -> Message {
    ccr(sid, 1, 0)
        .avp(dcca::SUBSCRIPTION_ID.grouped(vec![
            dcca::SUBSCRIPTION_ID_TYPE.enumerated(dcca::subscription_id_type::END_USER_IMSI),
            dcca::SUBSCRIPTION_ID_DATA.utf8(UE),
        ]))
        .avp(nasreq::FRAMED_IP_ADDRESS.ipv4_octets(Ipv4Addr::new(10, 45, 0, 7)))
        .avp(gx::IP_CAN_TYPE.enumerated(gx::ip_can_type::TGPP_EPS))
        .avp(gx::RAT_TYPE.enumerated(gx::rat_type::EUTRAN))
        .avp(nasreq::CALLED_STATION_ID.utf8("internet"))
        .avp(gx::QOS_INFORMATION.grouped(vec![
            gx::APN_AGGREGATE_MAX_BITRATE_UL.u32(50_000_000),
            gx::APN_AGGREGATE_MAX_BITRATE_DL.u32(100_000_000),
        ]))
}

/// A CCR the TDF sends on Sd session `sid`.
fn sd_ccr(sid: &str, kind: u32, n: u32) -> Message {
    Message::request(gx::SD_APP_ID, gx::CMD_CREDIT_CONTROL)
        .session_id_avp(sid)
        .avp(base::AUTH_APPLICATION_ID.u32(gx::SD_APP_ID))
        .origin(TDF_HOST, TDF_REALM)
        .destination(PCF_REALM, Some(PCF_HOST))
        .avp(dcca::CC_REQUEST_TYPE.enumerated(kind))
        .avp(dcca::CC_REQUEST_NUMBER.u32(n))
}

fn detected(app: &str) -> Avp {
    gx::APPLICATION_DETECTION_INFORMATION
        .grouped(vec![gx::TDF_APPLICATION_IDENTIFIER.with_slice(app.as_bytes())])
}

/// An application report: CCR-U with Event-Trigger `trigger` and the applications.
fn report(sid: &str, n: u32, trigger: u32, app: &str) -> Message {
    sd_ccr(sid, 2, n).avp(gx::EVENT_TRIGGER.enumerated(trigger)).avp(detected(app))
}

fn text(a: &Avp) -> String {
    String::from_utf8(a.as_slice().unwrap().to_vec()).unwrap()
}

/// The ADC-Rule-Definitions of a TSR or CCA, by ADC-Rule-Name.
fn adc_installed(m: &Message) -> Vec<(String, Avp)> {
    let mut v: Vec<(String, Avp)> = m
        .find_all(&gx::ADC_RULE_INSTALL)
        .flat_map(|i| i.children_of(&gx::ADC_RULE_DEFINITION))
        .map(|d| (text(&d.child(&gx::ADC_RULE_NAME).unwrap()), d))
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

fn charging_rules(m: &Message) -> Vec<String> {
    m.charging_rule_installs()
        .flat_map(|i| i.children_of(&gx::CHARGING_RULE_DEFINITION))
        .map(|d| text(&d.child(&gx::CHARGING_RULE_NAME).unwrap()))
        .collect()
}

fn apn_ambr_dl(m: &Message) -> Option<u32> {
    m.find_all(&gx::QOS_INFORMATION)
        .find_map(|q| q.child(&gx::APN_AGGREGATE_MAX_BITRATE_DL)?.as_u32().ok())
}

fn failed_avp_code(m: &Message) -> Option<u32> {
    m.failed_avps().first().map(Avp::code)
}

/// The Gx session's context as stored.
async fn context(pcf: &TestPcf, gx_sid: &str) -> Option<Value> {
    let p = pcf.pcf.store.get_sm(&format!("gx:{gx_sid}")).await.unwrap()?;
    Some(serde_json::from_slice(&p.context).unwrap())
}

async fn metrics(pcf: &TestPcf) -> String {
    let r = client().get(&format!("{}/metrics", pcf.base)).send().await.unwrap();
    String::from_utf8(r.body().to_vec()).unwrap()
}

async fn pgw(pcf: &TestPcf, wire: &Wire) -> DiameterPeer {
    DiameterPeer::pgw(pcf.diameter(), wire).await
}

#[tokio::test]
async fn a_tdf_gets_the_adc_rules_reports_applications_and_ends_with_the_gx_session() {
    let d = tempfile::tempdir().unwrap();
    let wire: Wire = Arc::default();
    let tdf = Tdf::start(wire.clone()).await;
    let config = PcfConfig {
        policy: Some(adc_project(&d.path().join("policy"))),
        diameter: diameter_on(),
        sd: sd_on(tdf.addr()),
        ..PcfConfig::default()
    };
    let pcf = TestPcf::start_with(d.path(), config.clone()).await;
    tdf.wait_pcf().await;
    let pgw1 = pgw(&pcf, &wire).await;

    // CCR-I: the TSR carries the subscriber, its address and APN, and both ADC rules; the
    // PCEF's CCA does not (the ADC rules are the TDF's).
    let gx_sid = "pgw.epc.example;1;77";
    let cca = pgw1.send(ccr_i(gx_sid)).await;
    assert_eq!(cca.result_code(), Some(rc::DIAMETER_SUCCESS));
    assert!(charging_rules(&cca).is_empty(), "{cca:?}");
    let tsr = tdf.next().await;
    assert_eq!(tsr.command_code(), gx::CMD_TDF_SESSION);
    assert_eq!(tsr.imsi().as_deref(), Some(UE));
    assert_eq!(tsr.framed_ip_address(), Some(Ipv4Addr::new(10, 45, 0, 7)));
    assert_eq!(tsr.called_station_id(), Some("internet"));
    assert_eq!(tsr.destination_realm(), Some(TDF_REALM));
    let rules = adc_installed(&tsr);
    assert_eq!(rules.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(), ["adc-p2p", "adc-video"]);
    let (p2p, video) = (&rules[0].1, &rules[1].1);
    assert_eq!(text(&video.child(&gx::TDF_APPLICATION_IDENTIFIER).unwrap()), "video-streaming");
    assert_eq!(video.child(&rx::FLOW_STATUS).unwrap().as_u32().unwrap(), 2, "ENABLED");
    assert_eq!(text(&video.child(&gx::MONITORING_KEY).unwrap()), "mk-video");
    assert_eq!(video.child(&gx::PRECEDENCE).unwrap().as_u32().unwrap(), 50);
    let redirect = p2p.child(&gx::REDIRECT_INFORMATION).unwrap();
    assert_eq!(redirect.child(&gx::REDIRECT_SUPPORT).unwrap().as_u32().unwrap(), 1);
    assert_eq!(redirect.child(&dcca::REDIRECT_ADDRESS_TYPE).unwrap().as_u32().unwrap(), 2);
    assert_eq!(
        text(&redirect.child(&dcca::REDIRECT_SERVER_ADDRESS).unwrap()),
        "http://portal.example/p2p"
    );
    let sd_sid = tsr.session_id().unwrap().to_owned();
    let ctx = context(&pcf, gx_sid).await.unwrap();
    assert_eq!(ctx["sd"]["sessionId"], sd_sid);
    assert_eq!(ctx["sd"]["tdfHost"], TDF_HOST);

    // APPLICATION_START of video: the CCA changes the video rule to downlink only, the PCEF
    // gets an RAR with the 5 Mbps AMBR, and the engine saw the report.
    let cca =
        tdf.send(report(&sd_sid, 1, gx::event_trigger::APPLICATION_START, "video-streaming")).await;
    assert_eq!(cca.result_code(), Some(rc::DIAMETER_SUCCESS), "{cca:?}");
    assert_eq!(cca.cc_request_number(), Some(1));
    let changed = adc_installed(&cca);
    assert_eq!(changed.len(), 1, "only the video rule changed: {cca:?}");
    assert_eq!(changed[0].0, "adc-video");
    assert_eq!(changed[0].1.child(&rx::FLOW_STATUS).unwrap().as_u32().unwrap(), 1);
    let rar = pgw1.next().await;
    assert_eq!(rar.command_code(), gx::CMD_RE_AUTH);
    assert_eq!(rar.session_id(), Some(gx_sid));
    assert_eq!(apn_ambr_dl(&rar), Some(5_000_000));
    assert!(charging_rules(&rar).is_empty(), "{rar:?}");
    let kept = pcf.pcf.store.subscriber(&format!("imsi-{UE}")).await.unwrap();
    assert_eq!(kept.ssv["lastDetected"], json!(["video-streaming"]));
    assert_eq!(context(&pcf, gx_sid).await.unwrap()["sd"]["running"], json!(["video-streaming"]));

    // A report changing nothing (P2P started: no rule reads it) answers no ADC rule, no RAR.
    let cca = tdf.send(report(&sd_sid, 2, gx::event_trigger::APPLICATION_START, "p2p")).await;
    assert_eq!(cca.result_code(), Some(rc::DIAMETER_SUCCESS));
    assert!(adc_installed(&cca).is_empty() && cca.find(&gx::ADC_RULE_REMOVE).is_none());
    pgw1.quiet().await;

    // The PCEF's CCR-U moving the UE to WLAN takes the P2P rule away: the TDF hears it in an
    // RAR (ADC-Rule-Remove), the PCEF nothing of it.
    let cca = pgw1.send(ccr(gx_sid, 2, 1).avp(gx::RAT_TYPE.enumerated(gx::rat_type::WLAN))).await;
    assert_eq!(cca.result_code(), Some(rc::DIAMETER_SUCCESS));
    assert!(charging_rules(&cca).is_empty() && cca.find(&gx::CHARGING_RULE_REMOVE).is_none());
    let rar = tdf.next().await;
    assert_eq!((rar.command_code(), rar.application_id()), (gx::CMD_RE_AUTH, gx::SD_APP_ID));
    assert_eq!(rar.session_id(), Some(sd_sid.as_str()));
    assert_eq!(rar.get_u32(&gx::SESSION_RELEASE_CAUSE), None);
    let removed: Vec<String> = rar
        .find_all(&gx::ADC_RULE_REMOVE)
        .flat_map(|r| r.children_of(&gx::ADC_RULE_NAME))
        .map(|n| text(&n))
        .collect();
    assert_eq!(removed, ["adc-p2p"]);
    assert!(adc_installed(&rar).is_empty());

    // A restart keeps the TDF session: the PCF connects to the TDF again, and video stopping
    // restores the rule and the AMBR.
    pcf.stop().await;
    let pcf = TestPcf::start_with(d.path(), config.clone()).await;
    tdf.wait_pcf().await;
    let pgw2 = pgw(&pcf, &wire).await;
    let cca =
        tdf.send(report(&sd_sid, 3, gx::event_trigger::APPLICATION_STOP, "video-streaming")).await;
    assert_eq!(cca.result_code(), Some(rc::DIAMETER_SUCCESS), "{cca:?}");
    let changed = adc_installed(&cca);
    assert_eq!(changed.len(), 1);
    assert_eq!(changed[0].1.child(&rx::FLOW_STATUS).unwrap().as_u32().unwrap(), 2);
    let rar = pgw2.next().await;
    assert_eq!(apn_ambr_dl(&rar), Some(100_000_000));
    assert_eq!(context(&pcf, gx_sid).await.unwrap()["sd"]["running"], json!(["p2p"]));

    // CCR-T: the TDF gets an RAR releasing its session (IP_CAN_SESSION_TERMINATION), its CCR-T
    // is answered 2001, and a report after it is a report of an unknown session.
    let cca = pgw2.send(ccr(gx_sid, 3, 2)).await;
    assert_eq!(cca.result_code(), Some(rc::DIAMETER_SUCCESS));
    let release = tdf.next().await;
    assert_eq!(release.command_code(), gx::CMD_RE_AUTH);
    assert_eq!(release.application_id(), gx::SD_APP_ID);
    assert_eq!(release.session_id(), Some(sd_sid.as_str()));
    assert_eq!(release.destination_host(), Some(TDF_HOST));
    assert_eq!(release.get_u32(&gx::SESSION_RELEASE_CAUSE), Some(3));
    let cca = tdf.send(sd_ccr(&sd_sid, 3, 4)).await;
    assert_eq!(cca.result_code(), Some(rc::DIAMETER_SUCCESS));
    let cca = tdf.send(report(&sd_sid, 5, gx::event_trigger::APPLICATION_START, "p2p")).await;
    assert_eq!(cca.result_code(), Some(rc::DIAMETER_UNKNOWN_SESSION_ID));
    assert!(context(&pcf, gx_sid).await.is_none());
    tdf.quiet().await;

    let m = metrics(&pcf).await;
    // Since the restart: the release.
    assert!(m.contains("pcf_sd_requests_total{command=\"RAR\",result=\"ok\"} 1"), "{m}");
    assert!(m.contains("pcf_sd_reports_total{result=\"ok\"} 2"), "{m}");
    pcf.stop().await;
    tshark_check(&wire.lock().unwrap());
}

#[tokio::test]
async fn a_tdf_that_is_down_fails_no_gx_session() {
    let d = tempfile::tempdir().unwrap();
    // An address nothing listens on.
    let down = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let config = PcfConfig {
        policy: Some(adc_project(&d.path().join("policy"))),
        diameter: diameter_on(),
        sd: sd_on(down),
        ..PcfConfig::default()
    };
    let pcf = TestPcf::start_with(d.path(), config).await;
    let wire: Wire = Arc::default();
    let pgw = pgw(&pcf, &wire).await;
    let gx_sid = "pgw.epc.example;1;78";
    let cca = pgw.send(ccr_i(gx_sid)).await;
    assert_eq!(cca.result_code(), Some(rc::DIAMETER_SUCCESS));
    let ctx = context(&pcf, gx_sid).await.unwrap();
    assert!(ctx.get("sd").is_none(), "{ctx}");
    let m = metrics(&pcf).await;
    assert!(m.contains("pcf_sd_requests_total{command=\"TSR\",result=\"failed\"} 1"), "{m}");
    // Its CCR-T sends no RAR anywhere and ends it.
    let cca = pgw.send(ccr(gx_sid, 3, 1)).await;
    assert_eq!(cca.result_code(), Some(rc::DIAMETER_SUCCESS));
    assert!(context(&pcf, gx_sid).await.is_none());
    pcf.stop().await;
}

#[tokio::test]
async fn bad_sd_requests_get_the_result_code_and_failed_avp() {
    let d = tempfile::tempdir().unwrap();
    let wire: Wire = Arc::default();
    let tdf = Tdf::start(wire.clone()).await;
    let config = PcfConfig {
        policy: Some(adc_project(&d.path().join("policy"))),
        diameter: diameter_on(),
        sd: sd_on(tdf.addr()),
        ..PcfConfig::default()
    };
    let pcf = TestPcf::start_with(d.path(), config).await;
    tdf.wait_pcf().await;
    let pgw = pgw(&pcf, &wire).await;
    let gx_sid = "pgw.epc.example;1;79";
    assert_eq!(pgw.send(ccr_i(gx_sid)).await.result_code(), Some(rc::DIAMETER_SUCCESS));
    let sd_sid = tdf.next().await.session_id().unwrap().to_owned();
    let start = gx::event_trigger::APPLICATION_START;

    // An Sd session the PCF does not know, one naming a Gx session that does not exist, and
    // one naming a Gx session whose TDF session is another.
    for sid in [
        "tdf.sd.example;1;1".to_string(),
        format!("{PCF_HOST};1;1;gx=pgw.epc.example;9;9"),
        format!("{PCF_HOST};1;1;gx={gx_sid}"),
    ] {
        let a = tdf.send(report(&sid, 1, start, "video-streaming")).await;
        assert_eq!(a.result_code(), Some(rc::DIAMETER_UNKNOWN_SESSION_ID), "{sid}");
    }
    // Missing: a report without the application (5005, Failed-AVP the ADI), an application
    // without its trigger (5005, Event-Trigger), CC-Request-Number (the node's check).
    let a = tdf.send(sd_ccr(&sd_sid, 2, 1).avp(gx::EVENT_TRIGGER.enumerated(start))).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_MISSING_AVP));
    assert_eq!(failed_avp_code(&a), Some(gx::APPLICATION_DETECTION_INFORMATION.code));
    let a = tdf.send(sd_ccr(&sd_sid, 2, 2).avp(detected("video-streaming"))).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_MISSING_AVP));
    assert_eq!(failed_avp_code(&a), Some(gx::EVENT_TRIGGER.code));
    let no_number = Message::request(gx::SD_APP_ID, gx::CMD_CREDIT_CONTROL)
        .session_id_avp(&sd_sid)
        .avp(base::AUTH_APPLICATION_ID.u32(gx::SD_APP_ID))
        .origin(TDF_HOST, TDF_REALM)
        .destination(PCF_REALM, Some(PCF_HOST))
        .avp(dcca::CC_REQUEST_TYPE.enumerated(2));
    let a = tdf.send(no_number).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_MISSING_AVP));
    assert_eq!(failed_avp_code(&a), Some(dcca::CC_REQUEST_NUMBER.code));
    // Invalid values (5004 with the AVP): both triggers at once, an empty application,
    // Auth-Application-Id of Gx, a TDF-initiated session (CCR-I, unsolicited reporting).
    let both = report(&sd_sid, 3, start, "video-streaming")
        .avp(gx::EVENT_TRIGGER.enumerated(gx::event_trigger::APPLICATION_STOP));
    let a = tdf.send(both).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_INVALID_AVP_VALUE));
    assert_eq!(failed_avp_code(&a), Some(gx::EVENT_TRIGGER.code));
    // Not kept for tshark: its Failed-AVP is the TDF's own empty AVP, echoed (RFC 6733 §7.5).
    let a = tdf.node.request(report(&sd_sid, 4, start, "")).await.unwrap();
    assert_eq!(a.result_code(), Some(rc::DIAMETER_INVALID_AVP_VALUE));
    assert_eq!(failed_avp_code(&a), Some(gx::TDF_APPLICATION_IDENTIFIER.code));
    let wrong_app = Message::request(gx::SD_APP_ID, gx::CMD_CREDIT_CONTROL)
        .session_id_avp(&sd_sid)
        .avp(base::AUTH_APPLICATION_ID.u32(gx::APP_ID))
        .origin(TDF_HOST, TDF_REALM)
        .destination(PCF_REALM, Some(PCF_HOST))
        .avp(dcca::CC_REQUEST_TYPE.enumerated(2))
        .avp(dcca::CC_REQUEST_NUMBER.u32(5));
    let a = tdf.send(wrong_app).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_INVALID_AVP_VALUE));
    assert_eq!(failed_avp_code(&a), Some(base::AUTH_APPLICATION_ID.code));
    let a = tdf.send(sd_ccr("tdf.sd.example;2;2", 1, 0)).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_INVALID_AVP_VALUE));
    assert_eq!(failed_avp_code(&a), Some(dcca::CC_REQUEST_TYPE.code));
    // A TSR sent to the PCF is not the PCF's to answer.
    let tsr = Message::request(gx::SD_APP_ID, gx::CMD_TDF_SESSION)
        .session_id_avp("tdf.sd.example;3;3")
        .avp(base::AUTH_APPLICATION_ID.u32(gx::SD_APP_ID))
        .origin(TDF_HOST, TDF_REALM)
        .destination(PCF_REALM, Some(PCF_HOST));
    assert_eq!(tdf.send(tsr).await.result_code(), Some(rc::DIAMETER_COMMAND_UNSUPPORTED));
    // None of it changed the session: still nothing running, still its TDF session; and the
    // TDF ending its session itself leaves the Gx session going without one.
    let ctx = context(&pcf, gx_sid).await.unwrap();
    assert_eq!(ctx["sd"]["running"], json!([]));
    // A CCR-U reporting no application is answered and decides nothing (no write).
    let before = pcf.pcf.store.get_sm(&format!("gx:{gx_sid}")).await.unwrap().unwrap();
    let a = tdf.send(sd_ccr(&sd_sid, 2, 6)).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS));
    assert!(adc_installed(&a).is_empty());
    let after = pcf.pcf.store.get_sm(&format!("gx:{gx_sid}")).await.unwrap().unwrap();
    assert_eq!(after.updated_ms, before.updated_ms);
    assert_eq!(tdf.send(sd_ccr(&sd_sid, 3, 7)).await.result_code(), Some(rc::DIAMETER_SUCCESS));
    assert!(context(&pcf, gx_sid).await.unwrap().get("sd").is_none());
    assert_eq!(pgw.send(ccr(gx_sid, 3, 1)).await.result_code(), Some(rc::DIAMETER_SUCCESS));
    tdf.quiet().await;
    pgw.quiet().await;
    pcf.stop().await;
    tshark_check(&wire.lock().unwrap());
}

#[tokio::test]
async fn a_ccr_i_replacing_a_gx_session_releases_its_tdf_session() {
    let d = tempfile::tempdir().unwrap();
    let wire: Wire = Arc::default();
    let tdf = Tdf::start(wire.clone()).await;
    let config = PcfConfig {
        policy: Some(adc_project(&d.path().join("policy"))),
        diameter: diameter_on(),
        sd: sd_on(tdf.addr()),
        ..PcfConfig::default()
    };
    let pcf = TestPcf::start_with(d.path(), config).await;
    tdf.wait_pcf().await;
    let pgw = pgw(&pcf, &wire).await;
    let gx_sid = "pgw.epc.example;1;80";
    assert_eq!(pgw.send(ccr_i(gx_sid)).await.result_code(), Some(rc::DIAMETER_SUCCESS));
    let first = tdf.next().await.session_id().unwrap().to_owned();
    // The PCEF set the session up again without a CCR-T: the old TDF session is released, a
    // new one made (the two requests in either order).
    assert_eq!(pgw.send(ccr_i(gx_sid)).await.result_code(), Some(rc::DIAMETER_SUCCESS));
    let (a, b) = (tdf.next().await, tdf.next().await);
    let (release, tsr) = if a.command_code() == gx::CMD_RE_AUTH { (a, b) } else { (b, a) };
    assert_eq!(release.session_id(), Some(first.as_str()));
    assert_eq!(release.get_u32(&gx::SESSION_RELEASE_CAUSE), Some(3));
    assert_eq!(tsr.command_code(), gx::CMD_TDF_SESSION);
    let second = tsr.session_id().unwrap().to_owned();
    assert_ne!(first, second);
    assert_eq!(context(&pcf, gx_sid).await.unwrap()["sd"]["sessionId"], second);
    // The old session's CCR-T is answered; its reports are of an unknown session, the new
    // one's are taken.
    assert_eq!(tdf.send(sd_ccr(&first, 3, 1)).await.result_code(), Some(rc::DIAMETER_SUCCESS));
    let start = gx::event_trigger::APPLICATION_START;
    let a = tdf.send(report(&first, 2, start, "video-streaming")).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_UNKNOWN_SESSION_ID));
    let a = tdf.send(report(&second, 1, start, "video-streaming")).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS));
    assert_eq!(apn_ambr_dl(&pgw.next().await), Some(5_000_000));
    pcf.stop().await;
    tshark_check(&wire.lock().unwrap());
}
