//! Sy (TS 29.219): the PCF as the PCRF of an OCS, over real sockets on 127.0.0.1. The PCEF is
//! common::wire's DiameterPeer, the OCS a small peer here on the diameter crate's node that
//! answers SLR with the statuses the test sets, STR, and sends SNRs. A project whose rule caps
//! the AMBR when counter `data-cap` is `exhausted` shows which statuses each decision read.
//! Wireshark's dissector checks every message the PCF sent (skipped without tshark).

mod common;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::wire::*;
use common::*;
use diameter::builders::experimental_result;
use diameter::dictionary::{base, dcca, gx, nasreq, sy};
use diameter::{
    result_code as rc, ApplicationId, Avp, DiameterNode, Message, NodeConfig, PeerConfig,
    VENDOR_3GPP,
};
use pcf::config::{OcsPeer, SyConfig};
use pcf::PcfConfig;
use serde_json::json;

const OCS_HOST: &str = "ocs.charging.example";
const OCS_REALM: &str = "charging.example";

/// An OCS: answers SLR with `statuses` (or `code` when it is not 2001) and STR with 2001;
/// keeps every request it got, and every message the PCF sent it (requests and the SNAs).
struct Ocs {
    node: DiameterNode,
    addr: SocketAddr,
    statuses: Arc<Mutex<Vec<(String, String)>>>,
    code: Arc<AtomicU32>,
    got: Arc<Mutex<Vec<Message>>>,
    wire: Wire,
}

impl Ocs {
    async fn start(wire: Wire) -> Ocs {
        let mut c = NodeConfig::new(OCS_HOST, OCS_REALM);
        c.listen = Some("127.0.0.1:0".parse().unwrap());
        c.applications = vec![ApplicationId::tgpp(sy::APP_ID)];
        c.peers = vec![PeerConfig::accept(PCF_HOST)];
        c.request_timeout = Duration::from_secs(3);
        let statuses: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
        let code = Arc::new(AtomicU32::new(rc::DIAMETER_SUCCESS));
        let got: Arc<Mutex<Vec<Message>>> = Arc::default();
        let (s, k, g, w) = (statuses.clone(), code.clone(), got.clone(), wire.clone());
        let node = DiameterNode::builder(c)
            .handler(sy::APP_ID, move |req: Message| {
                let (s, k, g, w) = (s.clone(), k.clone(), g.clone(), w.clone());
                async move {
                    w.lock().unwrap().push(req.to_bytes().unwrap().to_vec());
                    g.lock().unwrap().push(req.clone());
                    let a = Message::answer_to(&req).origin(OCS_HOST, OCS_REALM);
                    if req.command_code() != sy::CMD_SPENDING_LIMIT {
                        return a.result_code_avp(rc::DIAMETER_SUCCESS);
                    }
                    let code = k.load(Ordering::SeqCst);
                    if code == sy::experimental_result::DIAMETER_ERROR_UNKNOWN_POLICY_COUNTERS {
                        return a.avp(experimental_result(VENDOR_3GPP, code));
                    }
                    if code != rc::DIAMETER_SUCCESS {
                        return a.result_code_avp(code);
                    }
                    let asked = req.policy_counter_identifiers();
                    let reports = s
                        .lock()
                        .unwrap()
                        .iter()
                        .filter(|(id, _)| asked.contains(&id.as_str()))
                        .map(|(id, st)| report(id, st))
                        .collect::<Vec<_>>();
                    a.result_code_avp(rc::DIAMETER_SUCCESS).with_avps(reports)
                }
            })
            .start()
            .await
            .unwrap();
        let addr = node.local_addr().unwrap();
        Ocs { node, addr, statuses, code, got, wire }
    }

    fn set(&self, counter: &str, status: &str) {
        let mut s = self.statuses.lock().unwrap();
        s.retain(|(c, _)| c != counter);
        s.push((counter.into(), status.into()));
    }

    fn received(&self) -> Vec<Message> {
        self.got.lock().unwrap().clone()
    }

    /// Sends an SNR (with `reports`) for Sy session `sid` to the PCF; its SNA.
    async fn snr(&self, sid: &str, reports: Vec<Avp>) -> Message {
        self.snr_into(sid, reports, &self.wire).await
    }

    /// [`Ocs::snr`], keeping the SNA in `wire`.
    async fn snr_into(&self, sid: &str, reports: Vec<Avp>, wire: &Wire) -> Message {
        assert!(self.node.wait_open(PCF_HOST, Duration::from_secs(5)).await, "the PCF connects");
        let m = Message::request(sy::APP_ID, sy::CMD_SPENDING_STATUS_NOTIFICATION)
            .session_id_avp(sid)
            .avp(base::AUTH_APPLICATION_ID.u32(sy::APP_ID))
            .origin(OCS_HOST, OCS_REALM)
            .destination(PCF_REALM, Some(PCF_HOST))
            .with_avps(reports);
        let a = self.node.request(m).await.expect("an SNA");
        wire.lock().unwrap().push(a.to_bytes().unwrap().to_vec());
        a
    }
}

fn report(counter: &str, status: &str) -> Avp {
    sy::POLICY_COUNTER_STATUS_REPORT.grouped(vec![
        sy::POLICY_COUNTER_IDENTIFIER.utf8(counter),
        sy::POLICY_COUNTER_STATUS.utf8(status),
    ])
}

/// The default project reading `counters`; `data-cap` exhausted caps the AMBR at 1 Mbps.
fn capped_project(into: &Path, version: &str, counters: &[&str]) -> PathBuf {
    let p = default_project(into);
    let manifest = p.join("project.toml");
    let m = std::fs::read_to_string(&manifest).unwrap();
    let m = m.replace("version = \"1.0.0\"", &format!("version = \"{version}\""));
    let list: Vec<String> = counters.iter().map(|c| format!("\"{c}\"")).collect();
    let m = format!("{m}\n[spending]\ncounters = [{}]\n", list.join(", "));
    std::fs::write(&manifest, m).unwrap();
    let sm = p.join("rules/sm.toml");
    let mut rules = std::fs::read_to_string(&sm).unwrap();
    rules.push_str(
        "\n[[rule]]\nname = \"capped\"\nwhen = [\"spending.data-cap == 'exhausted'\"]\n\
         [[rule.then]]\nset = \"decision.sessRules.s1.authSessAmbr\"\n\
         value = { uplink = \"1 Mbps\", downlink = \"1 Mbps\" }\n",
    );
    std::fs::write(&sm, rules).unwrap();
    p
}

fn config(policy: PathBuf, ocs: SocketAddr, n7: bool) -> PcfConfig {
    PcfConfig {
        policy: Some(policy),
        diameter: diameter_on(),
        sy: SyConfig {
            enabled: true,
            n7,
            ocs: vec![OcsPeer {
                host: OCS_HOST.into(),
                realm: OCS_REALM.into(),
                addr: ocs,
                tls: false,
            }],
            ..SyConfig::default()
        },
        ..PcfConfig::default()
    }
}

/// A CCR-I of UE `imsi` (MSISDN `msisdn`), subscribed AMBR 1/2 Gbps.
fn ccr_i(sid: &str, imsi: &str, msisdn: &str) -> Message {
    ccr(sid, 1, 0)
        .avp(dcca::SUBSCRIPTION_ID.grouped(vec![
            dcca::SUBSCRIPTION_ID_TYPE.enumerated(dcca::subscription_id_type::END_USER_IMSI),
            dcca::SUBSCRIPTION_ID_DATA.utf8(imsi),
        ]))
        .avp(dcca::SUBSCRIPTION_ID.grouped(vec![
            dcca::SUBSCRIPTION_ID_TYPE.enumerated(dcca::subscription_id_type::END_USER_E164),
            dcca::SUBSCRIPTION_ID_DATA.utf8(msisdn),
        ]))
        .avp(nasreq::FRAMED_IP_ADDRESS.ipv4_octets(Ipv4Addr::new(10, 46, 0, 9)))
        .avp(gx::IP_CAN_TYPE.enumerated(gx::ip_can_type::TGPP_EPS))
        .avp(gx::RAT_TYPE.enumerated(gx::rat_type::EUTRAN))
        .avp(nasreq::CALLED_STATION_ID.utf8("internet"))
        .avp(gx::QOS_INFORMATION.grouped(vec![
            gx::APN_AGGREGATE_MAX_BITRATE_UL.u32(1_000_000_000),
            gx::APN_AGGREGATE_MAX_BITRATE_DL.u32(2_000_000_000),
        ]))
}

fn ccr_t(sid: &str, n: u32) -> Message {
    ccr(sid, 3, n).avp(base::TERMINATION_CAUSE.enumerated(1))
}

fn apn_ambr_dl(m: &Message) -> Option<u32> {
    m.find_all(&gx::QOS_INFORMATION)
        .find_map(|q| q.child(&gx::APN_AGGREGATE_MAX_BITRATE_DL)?.as_u32().ok())
}

fn subscription_ids(m: &Message) -> Vec<(u32, String)> {
    m.subscription_ids().into_iter().map(|s| (s.id_type, s.data)).collect()
}

async fn metrics(pcf: &TestPcf) -> String {
    let r = client().get(&format!("{}/metrics", pcf.base)).send().await.unwrap();
    String::from_utf8(r.body().to_vec()).unwrap()
}

fn has(text: &str, line: &str) -> bool {
    text.lines().any(|l| l == line)
}

/// Waits for the PCF's Sy node to have its connection to the OCS open.
async fn sy_open(pcf: &TestPcf) {
    let node = pcf.pcf.sy.node().expect("the Sy node runs");
    assert!(node.wait_open(OCS_HOST, Duration::from_secs(5)).await, "the PCF connects to the OCS");
}

async fn slr_at_the_first_gx_session_snr_sends_a_rar_str_at_the_last_and_a_restart_keeps_it() {
    let d = state_dir();
    let wire: Wire = Arc::default();
    let ocs = Ocs::start(wire.clone()).await;
    ocs.set("data-cap", "exhausted");
    let project = capped_project(&d.path().join("policy"), "1.0.0", &["data-cap"]);
    let cfg = config(project, ocs.addr, false);
    let pcf = TestPcf::start_with(d.path(), cfg.clone()).await;
    sy_open(&pcf).await;
    let pgw = DiameterPeer::pgw(pcf.diameter(), &wire).await;
    let supi = "imsi-001010000000701";

    // CCR-I: an Initial SLR with the subscriber and the project's counter; the decision
    // reads the status the SLA reported (the AMBR capped).
    let a = pgw.send(ccr_i("pgw;sy;1", "001010000000701", "447700900701")).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    assert_eq!(apn_ambr_dl(&a), Some(1_000_000));
    let got = ocs.received();
    assert_eq!(got.len(), 1, "{got:?}");
    let slr = &got[0];
    assert_eq!(slr.command_code(), sy::CMD_SPENDING_LIMIT);
    assert_eq!(slr.sl_request_type(), Some(sy::sl_request_type::INITIAL_REQUEST));
    assert_eq!(slr.policy_counter_identifiers(), vec!["data-cap"]);
    assert_eq!(slr.destination_realm(), Some(OCS_REALM));
    assert_eq!(slr.origin_host(), Some(PCF_HOST));
    assert_eq!(
        subscription_ids(slr),
        vec![(1, "001010000000701".to_string()), (0, "447700900701".to_string())]
    );
    let sid = slr.session_id().unwrap().to_string();
    let kept = pcf.pcf.sy.session_of(supi).expect("the Sy session is kept");
    assert_eq!((kept.session_id.as_str(), kept.ocs_host.as_str()), (sid.as_str(), OCS_HOST));

    // A second Gx session of the subscriber reuses the Sy session; an N7 session (n7 off)
    // reads N28, here off: it is not capped and asks the OCS nothing.
    let a = pgw.send(ccr_i("pgw;sy;2", "001010000000701", "447700900701")).await;
    assert_eq!(apn_ambr_dl(&a), Some(1_000_000));
    let mut n7 = open5gs_context(701);
    n7["supi"] = json!(supi);
    let r = client().post(&pcf.sm("")).json(&n7).send().await.unwrap();
    let b = body(&r);
    assert_eq!(r.status(), 201, "{b}");
    assert_eq!(b["sessRules"]["s1"]["authSessAmbr"]["downlink"], "2 Gbps", "{b}");
    let n7_loc = r.header("location").unwrap().to_string();
    assert_eq!(ocs.received().len(), 1, "no second SLR");

    // SNR: the status is no longer exhausted: SNA 2001, and each Gx session's PCEF gets an RAR
    // with the AMBR restored.
    let sna = ocs.snr(&sid, vec![report("data-cap", "normal")]).await;
    assert_eq!(sna.result_code(), Some(rc::DIAMETER_SUCCESS), "{sna:?}");
    assert_eq!(sna.session_id(), Some(sid.as_str()));
    let mut rars = [pgw.next().await, pgw.next().await];
    rars.sort_by(|a, b| a.session_id().cmp(&b.session_id()));
    for (rar, s) in rars.iter().zip(["pgw;sy;1", "pgw;sy;2"]) {
        assert_eq!(rar.command_code(), gx::CMD_RE_AUTH);
        assert_eq!(rar.session_id(), Some(s));
        assert_eq!(apn_ambr_dl(rar), Some(2_000_000_000), "{rar:?}");
    }
    pgw.quiet().await;
    // The N7 session's decision did not change: its SMF hears nothing (and its decision stays).
    let r = client().get(&n7_loc).send().await.unwrap();
    assert_eq!(body(&r)["policy"]["sessRules"]["s1"]["authSessAmbr"]["downlink"], "2 Gbps");

    // SNRs the PCF refuses: an unknown session 5002; no report 5005 naming it; an empty status
    // 5004 naming it; a report without its status 5005 (the node's grammar check). The last
    // three answers' Failed-AVPs are empty by RFC 6733 §7.5 (a zero-filled example of a
    // missing grouped or UTF8String AVP; the peer's own empty status), which Wireshark notes
    // as "Data is empty": checked apart, tolerating only that.
    let echoes: Wire = Arc::default();
    let a = ocs.snr("ocs;unknown;1", vec![report("data-cap", "normal")]).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_UNKNOWN_SESSION_ID), "{a:?}");
    let a = ocs.snr_into(&sid, vec![], &echoes).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_MISSING_AVP), "{a:?}");
    assert_eq!(a.failed_avps().first().map(Avp::code), Some(sy::POLICY_COUNTER_STATUS_REPORT.code));
    let a = ocs.snr_into(&sid, vec![report("data-cap", "")], &echoes).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_INVALID_AVP_VALUE), "{a:?}");
    assert_eq!(a.failed_avps().first().map(Avp::code), Some(sy::POLICY_COUNTER_STATUS.code));
    let no_status = sy::POLICY_COUNTER_STATUS_REPORT
        .grouped(vec![sy::POLICY_COUNTER_IDENTIFIER.utf8("data-cap")]);
    let a = ocs.snr_into(&sid, vec![no_status], &echoes).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_MISSING_AVP), "{a:?}");
    // An SLR sent to the PCF is not its to answer: 3001.
    let slr = Message::request(sy::APP_ID, sy::CMD_SPENDING_LIMIT)
        .session_id_avp("ocs;slr;1")
        .avp(base::AUTH_APPLICATION_ID.u32(sy::APP_ID))
        .origin(OCS_HOST, OCS_REALM)
        .destination(PCF_REALM, Some(PCF_HOST))
        .avp(sy::SL_REQUEST_TYPE.enumerated(sy::sl_request_type::INITIAL_REQUEST));
    let a = ocs.node.request(slr).await.unwrap();
    wire.lock().unwrap().push(a.to_bytes().unwrap().to_vec());
    assert_eq!(a.result_code(), Some(rc::DIAMETER_COMMAND_UNSUPPORTED), "{a:?}");
    pgw.quiet().await;
    let m = metrics(&pcf).await;
    assert!(has(&m, "pcf_sy_notifications_total{result=\"ok\"} 1"), "{m}");
    // The SLR is counted refused too; the report without status was refused by the node's
    // grammar check, before the Sy handler.
    assert!(has(&m, "pcf_sy_notifications_total{result=\"refused\"} 4"), "{m}");
    assert!(has(&m, "pcf_sy_requests_total{command=\"SLR-initial\",result=\"ok\"} 1"), "{m}");
    assert!(has(&m, "pcf_sy_sessions 1"), "{m}");

    // Restart: the Sy session and its statuses are kept; the OCS's next SNR is taken.
    drop(pgw);
    pcf.stop().await;
    let pcf = TestPcf::start_with(d.path(), cfg.clone()).await;
    let again = pcf.pcf.sy.session_of(supi).expect("kept over the restart");
    assert_eq!(again.session_id, sid);
    assert_eq!(again.statuses, json!({"data-cap": "normal"}).as_object().unwrap().clone());
    sy_open(&pcf).await;
    let pgw = DiameterPeer::pgw(pcf.diameter(), &wire).await;
    let sna = ocs.snr(&sid, vec![report("data-cap", "exhausted")]).await;
    assert_eq!(sna.result_code(), Some(rc::DIAMETER_SUCCESS), "{sna:?}");
    let rars = [pgw.next().await, pgw.next().await];
    assert!(rars.iter().all(|r| apn_ambr_dl(r) == Some(1_000_000)), "{rars:?}");

    // A new project version lists another counter too: the subscriber's next session sends an
    // Intermediate SLR on the same Sy session with the whole new list.
    ocs.set("roaming-cap", "normal");
    let v2 = capped_project(&d.path().join("policy-v2"), "2.0.0", &["data-cap", "roaming-cap"]);
    let r = client()
        .post(&format!("{}/policy-admin/v1/project/deploy", pcf.base))
        .json(&json!({"dir": v2}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", body(&r));
    let a = pgw.send(ccr_i("pgw;sy;3", "001010000000701", "447700900701")).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    let slr = ocs.received().pop().unwrap();
    assert_eq!(slr.sl_request_type(), Some(sy::sl_request_type::INTERMEDIATE_REQUEST));
    assert_eq!(slr.session_id(), Some(sid.as_str()));
    assert_eq!(slr.destination_host(), Some(OCS_HOST));
    assert_eq!(slr.policy_counter_identifiers(), vec!["data-cap", "roaming-cap"]);
    let s = pcf.pcf.sy.session_of(supi).unwrap();
    assert_eq!(s.counters, vec!["data-cap", "roaming-cap"]);
    assert_eq!(s.statuses["roaming-cap"], "normal");
    // The decision reads the statuses after it: data-cap still exhausted.
    assert_eq!(apn_ambr_dl(&a), Some(1_000_000));

    // CCR-T of the Gx sessions: the Sy session ends with the last one (the N7 session left
    // does not read Sy), an STR with DIAMETER_LOGOUT.
    let before = ocs.received().len();
    for (s, n) in [("pgw;sy;1", 1), ("pgw;sy;2", 1)] {
        let a = pgw.send(ccr_t(s, n)).await;
        assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    }
    assert_eq!(ocs.received().len(), before, "no STR while a Gx session is left");
    let a = pgw.send(ccr_t("pgw;sy;3", 1)).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    let mut str_ = None;
    for _ in 0..100 {
        if let Some(m) = ocs.received().get(before) {
            str_ = Some(m.clone());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let str_ = str_.expect("an STR");
    assert_eq!(str_.command_code(), sy::CMD_SESSION_TERMINATION);
    assert_eq!(str_.session_id(), Some(sid.as_str()));
    assert_eq!(str_.termination_cause(), Some(1));
    assert_eq!(str_.destination_host(), Some(OCS_HOST));
    assert!(pcf.pcf.sy.session_of(supi).is_none());
    assert!(pcf.pcf.store.sy_sessions().await.unwrap().is_empty(), "gone from the store");
    // The OCS's SNR for it now: 5002.
    let a = ocs.snr(&sid, vec![report("data-cap", "normal")]).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_UNKNOWN_SESSION_ID));
    let n7_id = n7_loc.rsplit('/').next().unwrap();
    let r = client().post(&pcf.sm(&format!("/{n7_id}/delete"))).send().await.unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(ocs.received().len(), before + 1, "the N7 delete sends nothing on Sy");

    drop(pgw);
    pcf.stop().await;
    ocs.node.shutdown().await;
    tshark_check(&wire.lock().unwrap());
    tshark_check_tolerating(&echoes.lock().unwrap(), &["Data is empty"]);
}

#[tokio::test]
async fn n7_uses_sy_when_asked_and_an_ocs_error_or_down_falls_back_to_no_statuses() {
    let d = tempfile::tempdir().unwrap();
    let wire: Wire = Arc::default();
    let ocs = Ocs::start(wire.clone()).await;
    ocs.set("data-cap", "exhausted");
    let project = capped_project(&d.path().join("policy"), "1.0.0", &["data-cap"]);
    let pcf = TestPcf::start_with(d.path(), config(project.clone(), ocs.addr, true)).await;
    sy_open(&pcf).await;
    let c = client();
    let mut a = open5gs_context(702);
    a["gpsi"] = json!("msisdn-447700900702");
    let supi = a["supi"].as_str().unwrap().to_string();

    // The OCS refuses (Experimental-Result 5570 DIAMETER_ERROR_UNKNOWN_POLICY_COUNTERS): the
    // create is decided without statuses, counted.
    ocs.code
        .store(sy::experimental_result::DIAMETER_ERROR_UNKNOWN_POLICY_COUNTERS, Ordering::SeqCst);
    let r = c.post(&pcf.sm("")).json(&a).send().await.unwrap();
    assert_eq!(r.status(), 201);
    assert_eq!(body(&r)["sessRules"]["s1"]["authSessAmbr"]["downlink"], "2 Gbps");
    assert!(pcf.pcf.sy.session_of(&supi).is_none());
    // A Result-Code error (5012) likewise.
    ocs.code.store(rc::DIAMETER_UNABLE_TO_COMPLY, Ordering::SeqCst);
    let r = c.post(&pcf.sm("")).json(&a).send().await.unwrap();
    assert_eq!(r.status(), 201);
    assert_eq!(body(&r)["sessRules"]["s1"]["authSessAmbr"]["downlink"], "2 Gbps");

    // The OCS answers again: with `n7`, the subscriber's next N7 create asks it (the
    // subscriber had no Sy session) and is capped; the SLR carries the GPSI's MSISDN.
    ocs.code.store(rc::DIAMETER_SUCCESS, Ordering::SeqCst);
    let r = c.post(&pcf.sm("")).json(&a).send().await.unwrap();
    let b = body(&r);
    assert_eq!(r.status(), 201, "{b}");
    assert_eq!(b["sessRules"]["s1"]["authSessAmbr"]["downlink"], "1 Mbps", "{b}");
    let got = ocs.received();
    assert_eq!(got.len(), 3);
    assert!(subscription_ids(&got[2]).contains(&(0, "447700900702".to_string())));
    let m = metrics(&pcf).await;
    assert!(has(&m, "pcf_sy_requests_total{command=\"SLR-initial\",result=\"failed\"} 2"), "{m}");
    assert!(has(&m, "pcf_sy_requests_total{command=\"SLR-initial\",result=\"ok\"} 1"), "{m}");

    // The SNR re-decides the N7 session: its SMF gets an UpdateNotify with the AMBR restored.
    let mut smf = testkit::sink::Sink::start().await;
    let mut b2 = a.clone();
    b2["pduSessionId"] = json!(2);
    b2["notificationUri"] = json!(smf.url);
    let r = c.post(&pcf.sm("")).json(&b2).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let sid = pcf.pcf.sy.session_of(&supi).unwrap().session_id;
    let sna = ocs.snr(&sid, vec![report("data-cap", "normal")]).await;
    assert_eq!(sna.result_code(), Some(rc::DIAMETER_SUCCESS));
    let n = smf.next().await;
    assert_eq!(n["smPolicyDecision"]["sessRules"]["s1"]["authSessAmbr"]["downlink"], "2 Gbps");

    // Every session deleted: the Sy session ends with the last (one STR).
    let before = ocs.received().len();
    let ids = pcf.pcf.store.sm_of(&supi).await.unwrap();
    assert_eq!(ids.len(), 4);
    for p in ids {
        let r = c.post(&pcf.sm(&format!("/{}/delete", p.id))).send().await.unwrap();
        assert_eq!(r.status(), 204);
    }
    assert_eq!(ocs.received().len(), before + 1);
    assert_eq!(ocs.received()[before].command_code(), sy::CMD_SESSION_TERMINATION);
    pcf.stop().await;

    // An OCS that is down (nothing listens): the create is decided without statuses.
    ocs.node.shutdown().await;
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let pcf = TestPcf::start_with(d.path(), config(project, closed, true)).await;
    let t0 = std::time::Instant::now();
    let r = c.post(&pcf.sm("")).json(&a).send().await.unwrap();
    assert_eq!(r.status(), 201);
    assert_eq!(body(&r)["sessRules"]["s1"]["authSessAmbr"]["downlink"], "2 Gbps");
    assert!(t0.elapsed() < Duration::from_secs(1), "no OCS open: no wait");
    let m = metrics(&pcf).await;
    assert!(has(&m, "pcf_sy_requests_total{command=\"SLR-initial\",result=\"failed\"} 1"), "{m}");
    pcf.stop().await;
    tshark_check(&wire.lock().unwrap());
}

testkit::on_both_backends!(
    slr_at_the_first_gx_session_snr_sends_a_rar_str_at_the_last_and_a_restart_keeps_it,
);
