//! Gx (TS 29.212) served by the PCF as a converged PCRF, over real sockets on 127.0.0.1: a
//! PCEF (P-GW) test double on the diameter crate's node, a real UDR with the subscriber's
//! policy data. CCR-I/U/T, every error path, a restart, the RAR a data change sends, and
//! Wireshark's dissector on every message the PCF sent (skipped without tshark).

mod common;

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::peers::start_udr;
use common::wire::*;
use common::*;
use diameter::dictionary::{base, dcca, gx, nasreq};
use diameter::{result_code as rc, Avp, Message};
use pcf::config::{OnUnknown, OnUnreachable, UdrConfig};
use pcf::PcfConfig;
use serde_json::{json, Value};

fn ambr(ul: u32, dl: u32) -> Avp {
    gx::QOS_INFORMATION.grouped(vec![
        gx::APN_AGGREGATE_MAX_BITRATE_UL.u32(ul),
        gx::APN_AGGREGATE_MAX_BITRATE_DL.u32(dl),
    ])
}

/// A CCR-I as a P-GW sends it for UE `imsi` at 10.45.0.`host`.
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
        .avp(ambr(1_000_000_000, 2_000_000_000))
        .avp(gx::DEFAULT_EPS_BEARER_QOS.grouped(vec![
            gx::QOS_CLASS_IDENTIFIER.enumerated(9),
            gx::ALLOCATION_RETENTION_PRIORITY.grouped(vec![
                gx::PRIORITY_LEVEL.u32(8),
                gx::PRE_EMPTION_CAPABILITY.enumerated(1),
                gx::PRE_EMPTION_VULNERABILITY.enumerated(0),
            ]),
        ]))
}

/// SmPolicyData of a subscriber in category `cat` for DNN internet on slice 1-000001.
fn sm_data(cat: &str) -> Value {
    json!({"smPolicySnssaiData": {"1-000001": {
        "snssai": {"sst": 1, "sd": "000001"},
        "smPolicyDnnData": {"internet": {"dnn": "internet", "subscCats": [cat]}}}}})
}

/// The default project, with a video PCC rule (and its QoS decision) for gold subscribers.
fn gold_project(into: &Path) -> PathBuf {
    let p = default_project(into);
    let sm = p.join("rules/sm.toml");
    let mut rules = std::fs::read_to_string(&sm).unwrap();
    rules.push_str(
        "\n[[rule]]\nname = \"gold-video\"\n\
         when = [\"subscriber.smPolicySnssaiData.1-000001.smPolicyDnnData.internet.subscCats[0] == 'gold'\"]\n\
         [[rule.then]]\nset = \"decision.pccRules.video\"\n\
         value = { pccRuleId = \"video\", precedence = 100, refQosData = [\"q1\"], flowInfos = [{ flowDescription = \"permit out 17 from any to assigned 5000\", flowDirection = \"DOWNLINK\" }] }\n\
         [[rule.then]]\nset = \"decision.qosDecs.q1\"\n\
         value = { qosId = \"q1\", \"5qi\" = 2, maxbrUl = \"1 Mbps\", maxbrDl = \"4 Mbps\", gbrUl = \"1 Mbps\", gbrDl = \"2 Mbps\", arp = { priorityLevel = 5, preemptCap = \"MAY_PREEMPT\", preemptVuln = \"NOT_PREEMPTABLE\" } }\n",
    );
    std::fs::write(&sm, rules).unwrap();
    p
}

fn codes(m: &Message) -> Vec<u32> {
    m.avps.iter().map(Avp::code).collect()
}

fn installed(m: &Message) -> Vec<String> {
    m.charging_rule_installs()
        .flat_map(|i| i.children_of(&gx::CHARGING_RULE_DEFINITION))
        .filter_map(|d| {
            Some(
                String::from_utf8(d.child(&gx::CHARGING_RULE_NAME)?.as_slice().ok()?.to_vec())
                    .unwrap(),
            )
        })
        .collect()
}

fn removed(m: &Message) -> Vec<String> {
    m.find_all(&gx::CHARGING_RULE_REMOVE)
        .flat_map(|r| r.children_of(&gx::CHARGING_RULE_NAME))
        .map(|n| String::from_utf8(n.as_slice().unwrap().to_vec()).unwrap())
        .collect()
}

fn apn_ambr_dl(m: &Message) -> Option<u32> {
    m.find_all(&gx::QOS_INFORMATION)
        .find_map(|q| q.child(&gx::APN_AGGREGATE_MAX_BITRATE_DL)?.as_u32().ok())
}

fn failed_avp_code(m: &Message) -> Option<u32> {
    m.failed_avps().first().map(Avp::code)
}

async fn gx_sessions_are_decided_like_n7_live_through_a_restart_and_get_rars() {
    let d = state_dir();
    let udr = start_udr(d.path(), None).await;
    let c = client();
    let ue = "001010000000001";
    let url = format!("{}/nudr-dr/v2/policy-data/ues/imsi-{ue}/sm-data", udr.base);
    assert_eq!(c.put(&url).json(&sm_data("gold")).send().await.unwrap().status(), 201);
    let config = PcfConfig {
        policy: Some(gold_project(&d.path().join("policy"))),
        udr: UdrConfig { api_root: Some(udr.base.clone()), ..UdrConfig::default() },
        ..PcfConfig::default()
    };
    let pcf =
        TestPcf::start_with(d.path(), PcfConfig { diameter: diameter_on(), ..config.clone() })
            .await;
    let wire: Wire = Arc::default();
    let pgw = DiameterPeer::pgw(pcf.diameter(), &wire).await;
    let sid = "pgw.epc.example;1;1";

    // CCR-I: the whole decision: the gold subscriber's video rule with its QoS, the AMBR and
    // default bearer QoS as subscribed, the project's triggers.
    let a = pgw.send(ccr_i(sid, ue, 7)).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    assert_eq!(a.session_id(), Some(sid));
    assert_eq!(a.cc_request_type(), Some(diameter::CcRequestType::Initial));
    assert_eq!(installed(&a), vec!["video"]);
    let def =
        a.charging_rule_installs().next().unwrap().child(&gx::CHARGING_RULE_DEFINITION).unwrap();
    let q = def.child(&gx::QOS_INFORMATION).unwrap();
    assert_eq!(q.child(&gx::QOS_CLASS_IDENTIFIER).unwrap().as_u32().unwrap(), 2);
    assert_eq!(q.child(&gx::GUARANTEED_BITRATE_DL).unwrap().as_u32().unwrap(), 2_000_000);
    assert_eq!(def.child(&gx::PRECEDENCE).unwrap().as_u32().unwrap(), 100);
    assert_eq!(apn_ambr_dl(&a), Some(2_000_000_000));
    let dq = a.find(&gx::DEFAULT_EPS_BEARER_QOS).expect("Default-EPS-Bearer-QoS");
    assert_eq!(dq.child(&gx::QOS_CLASS_IDENTIFIER).unwrap().as_u32().unwrap(), 9);
    // PLMN_CH, RES_MO_RE, AC_TY_CH, UE_IP_CH.
    assert_eq!(a.event_triggers(), vec![4, 23, 7, 18, 19]);

    // The session is in the UE-address index N5 (and Rx next) binds by, with its context
    // shaped as N7's, and shares the subscriber's state with N7.
    let s = pcf
        .pcf
        .store
        .sm_of_ue(Some("10.45.0.7"), None, Some("internet"))
        .await
        .unwrap()
        .expect("indexed");
    assert_eq!(s.id, format!("gx:{sid}"));
    assert_eq!(s.supi, format!("imsi-{ue}"));
    let ctx: Value = serde_json::from_slice(&s.context).unwrap();
    assert_eq!(ctx["ratType"], "EUTRA");
    assert_eq!(ctx["subsSessAmbr"], json!({"uplink": "1 Gbps", "downlink": "2 Gbps"}));
    assert_eq!(ctx["gx"]["originHost"], PGW_HOST);

    // CCR-U reporting nothing that changes the decision: success, nothing to install.
    let a = pgw
        .send(
            ccr(sid, 2, 1)
                .avp(gx::EVENT_TRIGGER.enumerated(gx::event_trigger::RAT_CHANGE))
                .avp(gx::RAT_TYPE.enumerated(gx::rat_type::EUTRAN)),
        )
        .await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS));
    assert_eq!(
        codes(&a),
        vec![263, 258, 416, 415, 268, 264, 296],
        "only the CCA's own AVPs: {a:?}"
    );
    // CCR-U with a new subscribed APN-AMBR: only the AMBR is answered.
    let a = pgw.send(ccr(sid, 2, 2).avp(ambr(1_000_000_000, 3_000_000_000))).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS));
    assert_eq!(apn_ambr_dl(&a), Some(3_000_000_000));
    assert!(installed(&a).is_empty() && removed(&a).is_empty(), "{a:?}");

    // The subscriber stops being gold at the UDR: the PCF is told, decides again and sends the
    // PCEF an RAR removing the video rule.
    // (Before the restart: the UDR subscription's callback names this PCF's SBI port.)
    let r = c.put(&url).json(&sm_data("silver")).send().await.unwrap();
    assert!(r.status().is_success());
    let rar = pgw.next().await;
    assert_eq!(rar.command_code(), gx::CMD_RE_AUTH);
    assert_eq!(rar.session_id(), Some(sid));
    assert_eq!(rar.destination_host(), Some(PGW_HOST));
    assert_eq!(removed(&rar), vec!["video"]);
    assert!(installed(&rar).is_empty());
    // The decision the RAR announced is the one in force: a CCR-U finds nothing to remove.
    let a = pgw.send(ccr(sid, 2, 3)).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS));
    assert!(removed(&a).is_empty(), "{a:?}");

    // Restart: the session is still known (durable), and the new PCF decides it.
    drop(pgw);
    pcf.stop().await;
    let pcf =
        TestPcf::start_with(d.path(), PcfConfig { diameter: diameter_on(), ..config.clone() })
            .await;
    let pgw = DiameterPeer::pgw(pcf.diameter(), &wire).await;
    let a = pgw.send(ccr(sid, 2, 4).avp(ambr(1_000_000_000, 2_000_000_000))).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    assert_eq!(apn_ambr_dl(&a), Some(2_000_000_000));

    // CCR-T: gone; its next CCR-U and CCR-T are for an unknown session.
    let a = pgw.send(ccr(sid, 3, 5).avp(base::TERMINATION_CAUSE.enumerated(1))).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS));
    assert!(pcf.pcf.store.sm_of_ue(Some("10.45.0.7"), None, None).await.unwrap().is_none());
    for kind in [2, 3] {
        let a = pgw.send(ccr(sid, kind, 6)).await;
        assert_eq!(a.result_code(), Some(rc::DIAMETER_UNKNOWN_SESSION_ID), "{a:?}");
    }

    drop(pgw);
    pcf.stop().await;
    udr.stop().await;
    tshark_check(&wire.lock().unwrap());
}

#[tokio::test]
async fn gx_errors_are_answered_as_the_spec_and_the_configuration_say() {
    let d = tempfile::tempdir().unwrap();
    let udr = start_udr(d.path(), None).await;
    let config = PcfConfig {
        policy: Some(default_project(&d.path().join("policy"))),
        udr: UdrConfig {
            api_root: Some(udr.base.clone()),
            on_unknown_subscriber: OnUnknown::Reject,
            ..UdrConfig::default()
        },
        ..PcfConfig::default()
    };
    let pcf = TestPcf::start_with(d.path(), PcfConfig { diameter: diameter_on(), ..config }).await;
    let wire: Wire = Arc::default();
    let pgw = DiameterPeer::pgw(pcf.diameter(), &wire).await;

    // A mandatory AVP of the grammar missing (CC-Request-Number): 5005, Failed-AVP names it.
    let m = Message::request(gx::APP_ID, gx::CMD_CREDIT_CONTROL)
        .session_id_avp("pgw;e;1")
        .avp(base::AUTH_APPLICATION_ID.u32(gx::APP_ID))
        .origin(PGW_HOST, PGW_REALM)
        .destination(PCF_REALM, None)
        .avp(dcca::CC_REQUEST_TYPE.enumerated(1));
    let a = pgw.send(m).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_MISSING_AVP));
    assert_eq!(failed_avp_code(&a), Some(dcca::CC_REQUEST_NUMBER.code));
    // A CCR-I without an IMSI: 5005 naming Subscription-Id.
    let a = pgw.send(ccr("pgw;e;2", 1, 0)).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_MISSING_AVP));
    assert_eq!(failed_avp_code(&a), Some(dcca::SUBSCRIPTION_ID.code));
    // Another application's Auth-Application-Id: 5004 with it.
    let mut m = ccr_i("pgw;e;3", "001010000000009", 9);
    m.avps.retain(|a| a.code() != base::AUTH_APPLICATION_ID.code);
    let a = pgw.send(m.avp(base::AUTH_APPLICATION_ID.u32(4))).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_INVALID_AVP_VALUE));
    assert_eq!(failed_avp_code(&a), Some(base::AUTH_APPLICATION_ID.code));
    // EVENT_REQUEST is not a Gx request type: 5004.
    let a = pgw.send(ccr("pgw;e;4", 4, 0)).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_INVALID_AVP_VALUE));
    assert_eq!(failed_avp_code(&a), Some(dcca::CC_REQUEST_TYPE.code));
    // CCR-U of a session never set up: 5002.
    let a = pgw.send(ccr("pgw;e;5", 2, 1)).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_UNKNOWN_SESSION_ID));
    // A subscriber the UDR does not know, with on_unknown_subscriber = reject: 5030, and no
    // session is kept.
    let a = pgw.send(ccr_i("pgw;e;6", "001010000000099", 6)).await;
    let e = a.experimental_result().expect("Experimental-Result");
    assert_eq!((e.vendor_id, e.code), (diameter::VENDOR_3GPP, 5030), "{a:?}");
    assert!(pcf.pcf.store.sm_of_ue(Some("10.45.0.6"), None, None).await.unwrap().is_none());
    drop(pgw);
    pcf.stop().await;

    // No UDR answers, with on_unreachable = reject: 3004 DIAMETER_TOO_BUSY (E bit).
    udr.stop().await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let d2 = tempfile::tempdir().unwrap();
    let config = PcfConfig {
        policy: Some(default_project(&d2.path().join("policy"))),
        udr: UdrConfig {
            api_root: Some(format!("http://{closed}")),
            on_unreachable: OnUnreachable::Reject,
            ..UdrConfig::default()
        },
        ..PcfConfig::default()
    };
    let pcf = TestPcf::start_with(d2.path(), PcfConfig { diameter: diameter_on(), ..config }).await;
    let pgw = DiameterPeer::pgw(pcf.diameter(), &wire).await;
    let a = pgw.send(ccr_i("pgw;e;7", "001010000000007", 7)).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_TOO_BUSY), "{a:?}");
    assert!(a.is_error());
    drop(pgw);
    pcf.stop().await;
    tshark_check(&wire.lock().unwrap());
}

testkit::on_both_backends!(gx_sessions_are_decided_like_n7_live_through_a_restart_and_get_rars,);
