//! The kit's PCEFs (`crates/bench/src/gx/`) against a stand-in PCRF on the diameter crate's
//! node, over real sockets on 127.0.0.1: CER/CEA, a CCR-I, the PCRF's RAR installing a rule
//! (answered RAA 2001 and reported ACTIVE in the next CCR-U), a CCR-U with usage, a CCR-T,
//! each CCA judged by its Result-Code and Origin-Host; and Wireshark's dissector on every
//! message the PCEF sent (skipped without tshark).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bench::gx::messages::{UpdateEvent, UsageReport};
use bench::gx::{GxSims, GxUpdate};
use bench::scenario::{GxOp, Scenario};
use bench::sched::Rng;
use diameter::dictionary::{base, dcca, gx};
use diameter::{result_code as rc, ApplicationId, DiameterNode, Message, NodeConfig};

const PCRF_HOST: &str = "pcf.fivecore.local";
const PCRF_REALM: &str = "fivecore.local";

/// A PCRF that answers every CCR with `code` and keeps what it received, as sent.
async fn stand_in_pcrf(code: u32, got: Arc<Mutex<Vec<Message>>>) -> DiameterNode {
    let mut c = NodeConfig::new(PCRF_HOST, PCRF_REALM);
    c.listen = Some("127.0.0.1:0".parse().unwrap());
    c.applications = vec![ApplicationId::tgpp(gx::APP_ID)];
    c.accept_unknown_peers = true;
    c.request_timeout = Duration::from_secs(3);
    DiameterNode::builder(c)
        .handler(gx::APP_ID, move |req: Message| {
            let got = got.clone();
            async move {
                got.lock().unwrap().push(req.clone());
                let mut a = Message::answer_to(&req)
                    .avp(base::AUTH_APPLICATION_ID.u32(gx::APP_ID))
                    .origin(PCRF_HOST, PCRF_REALM)
                    .result_code_avp(code);
                for def in [&dcca::CC_REQUEST_TYPE, &dcca::CC_REQUEST_NUMBER] {
                    a.push(req.find(def).unwrap().clone());
                }
                a
            }
        })
        .start()
        .await
        .unwrap()
}

#[tokio::test]
async fn the_pcef_runs_a_gx_session_answers_rars_and_reports_the_rules_they_install() {
    let got = Arc::new(Mutex::new(Vec::new()));
    let pcrf = stand_in_pcrf(rc::DIAMETER_SUCCESS, got.clone()).await;
    let addr = pcrf.local_addr().unwrap();
    let mut s = Scenario::load("pcrf-data-7.5k").unwrap();
    s.simulators.truncate(1);
    let sims = Arc::new(GxSims::start(&s, addr).await.unwrap());
    let pgw = sims.pcefs[0].id.host.clone();
    let mut rng = Rng::new(7);
    let plain = GxUpdate::default();

    // CCR-I: a new session, accepted.
    let call = sims.prepare(GxOp::CcrInitial, &plain, &mut rng).unwrap();
    assert_eq!(call.send(&sims, &[2001]).await, (true, "2001".into()));
    assert_eq!(sims.sessions.open(), 1);
    let ccr_i = got.lock().unwrap()[0].clone();
    let sid = ccr_i.session_id().unwrap().to_owned();
    assert!(sid.starts_with(&pgw), "{sid}");
    assert!(ccr_i.imsi().unwrap().starts_with("00101"));
    let ue = ccr_i.framed_ip_address().unwrap();
    assert_eq!(sims.pick_ue(&mut rng).map(|u| u.0), Some(ue), "the AFs may bind to it");

    // The PCRF installs a rule and arms SUCCESSFUL_RESOURCE_ALLOCATION (what it does when an
    // AF's AAR asks to hear of the allocation): RAA 2001 from the PGW.
    let rar =
        Message::request(gx::APP_ID, gx::CMD_RE_AUTH)
            .session_id_avp(&sid)
            .avp(base::AUTH_APPLICATION_ID.u32(gx::APP_ID))
            .origin(PCRF_HOST, PCRF_REALM)
            .destination("epc.fivecore.local", Some(&pgw))
            .avp(base::RE_AUTH_REQUEST_TYPE.enumerated(0))
            .avp(gx::EVENT_TRIGGER.enumerated(gx::event_trigger::SUCCESSFUL_RESOURCE_ALLOCATION))
            .avp(gx::CHARGING_RULE_INSTALL.grouped(vec![gx::CHARGING_RULE_DEFINITION
            .grouped(vec![gx::CHARGING_RULE_NAME.utf8("af-rx:call-1")])]));
    let raa = pcrf.request(rar).await.unwrap();
    assert_eq!((raa.result_code(), raa.origin_host()), (Some(2001), Some(pgw.as_str())));
    assert_eq!(sims.report().peers[0].received_rar, 1);

    // CCR-U: the session with the rule goes first, reports it ACTIVE, with its usage.
    let with_usage = GxUpdate {
        event: Some(UpdateEvent::UserLocationChange),
        usage: Some(UsageReport {
            monitoring_key: "mk-data".into(),
            input_octets: 10,
            output_octets: 90,
        }),
    };
    let call = sims.prepare(GxOp::CcrUpdate, &with_usage, &mut rng).unwrap();
    assert!(call.send(&sims, &[2001]).await.0);
    let ccr_u = got.lock().unwrap()[1].clone();
    assert_eq!(ccr_u.session_id(), Some(sid.as_str()));
    assert_eq!(ccr_u.cc_request_number(), Some(1));
    let report = ccr_u.charging_rule_reports().next().expect("the installed rule reported");
    let name = report.child(&gx::CHARGING_RULE_NAME).unwrap();
    assert_eq!(name.as_slice().unwrap(), b"af-rx:call-1");
    assert!(ccr_u.usage_monitoring_information().next().is_some());
    assert_eq!(sims.report().rules_reported, 1);
    // Reported once: the next update has nothing to report.
    let call = sims.prepare(GxOp::CcrUpdate, &plain, &mut rng).unwrap();
    assert!(call.send(&sims, &[2001]).await.0);
    assert!(got.lock().unwrap()[2].charging_rule_reports().next().is_none());

    // CCR-T: the session ends; nothing is left to update.
    let call = sims.prepare(GxOp::CcrTerminate, &plain, &mut rng).unwrap();
    assert!(call.send(&sims, &[2001]).await.0);
    let ccr_t = got.lock().unwrap()[3].clone();
    assert_eq!((ccr_t.cc_request_number(), ccr_t.termination_cause()), (Some(3), Some(1)));
    assert_eq!(sims.sessions.open(), 0);
    assert!(sims.prepare(GxOp::CcrUpdate, &plain, &mut rng).is_none(), "skipped, not failed");

    // Wireshark decodes every CCR the PCEF sent and its RAA.
    let mut wire: Vec<Vec<u8>> =
        got.lock().unwrap().iter().map(|m| m.to_bytes().unwrap().to_vec()).collect();
    wire.push(raa.to_bytes().unwrap().to_vec());
    if let Some(text) = testkit::tshark::tshark_check(&wire) {
        for avp in [
            "Subscription-Id",
            "Supported-Features",
            "3GPP-User-Location-Info",
            "Charging-Rule-Report",
            "Usage-Monitoring-Information",
            "Default-EPS-Bearer-QoS",
        ] {
            assert!(text.contains(avp), "tshark names {avp}");
        }
    }
    sims.shutdown().await;
    pcrf.shutdown().await;
}

/// A CCA with another code, or the expected code from a host that is not the PCRF, is a
/// failure; a refused CCR-I opens no session.
#[tokio::test]
async fn a_cca_counts_only_with_the_expected_code_from_the_pcrf() {
    let got = Arc::new(Mutex::new(Vec::new()));
    let pcrf = stand_in_pcrf(rc::DIAMETER_UNABLE_TO_COMPLY, got.clone()).await;
    let mut s = Scenario::load("pcrf-data-7.5k").unwrap();
    s.simulators.truncate(1);
    let sims = Arc::new(GxSims::start(&s, pcrf.local_addr().unwrap()).await.unwrap());
    let mut rng = Rng::new(1);
    let plain = GxUpdate::default();
    let call = sims.prepare(GxOp::CcrInitial, &plain, &mut rng).unwrap();
    assert_eq!(call.send(&sims, &[2001]).await, (false, "5012".into()));
    assert_eq!(sims.sessions.open(), 0);
    let err = sims.open_sessions(3, &mut rng, &[2001]).await.unwrap_err();
    assert!(format!("{err:#}").contains("5012"), "{err:#}");
    sims.shutdown().await;
    pcrf.shutdown().await;

    // 2001 from a host that is not the scenario's PCRF.
    let got = Arc::new(Mutex::new(Vec::new()));
    let pcrf = stand_in_pcrf(rc::DIAMETER_SUCCESS, got).await;
    let mut s = Scenario::load("pcrf-data-7.5k").unwrap();
    s.simulators.truncate(1);
    s.diameter.as_mut().unwrap().answer_host = Some("other.fivecore.local".into());
    let sims = Arc::new(GxSims::start(&s, pcrf.local_addr().unwrap()).await.unwrap());
    let call = sims.prepare(GxOp::CcrInitial, &plain, &mut rng).unwrap();
    let (ok, why) = call.send(&sims, &[2001]).await;
    assert!(!ok && why.contains("wrong host"), "{why}");
    sims.shutdown().await;
    pcrf.shutdown().await;
}
