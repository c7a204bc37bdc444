//! Rx (TS 29.214) served by the PCF as a converged PCRF, over real sockets on 127.0.0.1: an AF
//! (P-CSCF) and a PCEF (P-GW) test double on the diameter crate's node, and an SMF sink for a
//! session bound to an N7 association. AAR-I / AAR-U / STR pushed to the PCEF as Gx RARs, the
//! PCEF's rule reports told the AF in Rx RARs, ASR when the bound session ends, every error
//! path, a restart, and Wireshark's dissector on every message the PCF sent (skipped without
//! tshark).

mod common;

use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::Arc;

use common::wire::{DiameterPeer as Peer, *};
use common::*;
use diameter::dictionary::{base, dcca, gx, nasreq, rx};
use diameter::{result_code as rc, Avp, Message};
use pcf::PcfConfig;
use serde_json::json;
use testkit::sink::Sink;

const AF_HOST: &str = "pcscf.ims.example";
const AF_REALM: &str = "ims.example";

/// The Rx sessions bound to the SM association or Gx session `sm`.
async fn rx_sessions(pcf: &TestPcf, sm: &str) -> Vec<String> {
    pcf.pcf.store.apps_of(sm).await.unwrap().into_iter().map(|a| a.id).collect()
}

/// A PCF with the default project and `[pcf.diameter]` on.
async fn start_pcf(dir: &Path) -> TestPcf {
    let config = PcfConfig {
        policy: Some(default_project(&dir.join("policy"))),
        diameter: diameter_on(),
        ..PcfConfig::default()
    };
    TestPcf::start_with(dir, config).await
}

/// The CCR-I of UE `imsi`'s IMS PDN connection at 10.45.0.`host`.
fn ccr_i(sid: &str, imsi: &str, host: u8) -> Message {
    ccr(sid, 1, 0)
        .avp(dcca::SUBSCRIPTION_ID.grouped(vec![
            dcca::SUBSCRIPTION_ID_TYPE.enumerated(dcca::subscription_id_type::END_USER_IMSI),
            dcca::SUBSCRIPTION_ID_DATA.utf8(imsi),
        ]))
        .avp(nasreq::FRAMED_IP_ADDRESS.ipv4_octets(Ipv4Addr::new(10, 45, 0, host)))
        .avp(gx::IP_CAN_TYPE.enumerated(gx::ip_can_type::TGPP_EPS))
        .avp(gx::RAT_TYPE.enumerated(gx::rat_type::EUTRAN))
        .avp(nasreq::CALLED_STATION_ID.utf8("ims"))
}

fn rule_report(rule: &str, status: u32, failure: Option<u32>) -> Avp {
    let mut kids = vec![
        gx::CHARGING_RULE_NAME.bytes(rule.as_bytes().to_vec()),
        gx::PCC_RULE_STATUS.enumerated(status),
    ];
    if let Some(f) = failure {
        kids.push(gx::RULE_FAILURE_CODE.enumerated(f));
    }
    gx::CHARGING_RULE_REPORT.grouped(kids)
}

fn aar(sid: &str, kind: Option<u32>) -> Message {
    let mut m = Message::request(rx::APP_ID, rx::CMD_AA)
        .session_id_avp(sid)
        .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
        .origin(AF_HOST, AF_REALM)
        .destination(PCF_REALM, None);
    if let Some(k) = kind {
        m = m.avp(rx::RX_REQUEST_TYPE.enumerated(k));
    }
    m
}

/// An AAR-I of a voice call to UE 10.45.0.`host` on APN ims: one audio component with its
/// RTP and RTCP flows, asking to hear of successful allocation, loss and release of bearer.
fn call(sid: &str, host: u8) -> Message {
    let ue = format!("10.45.0.{host}");
    aar(sid, Some(0))
        .avp(rx::AF_APPLICATION_IDENTIFIER.bytes(b"ims-voice".to_vec()))
        .avp(nasreq::FRAMED_IP_ADDRESS.ipv4_octets(ue.parse().unwrap()))
        .avp(nasreq::CALLED_STATION_ID.utf8("ims"))
        .avp(audio(&ue))
        .avp(rx::SPECIFIC_ACTION.enumerated(8))
        .avp(rx::SPECIFIC_ACTION.enumerated(2))
        .avp(rx::SPECIFIC_ACTION.enumerated(4))
}

fn audio(ue: &str) -> Avp {
    rx::MEDIA_COMPONENT_DESCRIPTION.grouped(vec![
        rx::MEDIA_COMPONENT_NUMBER.u32(1),
        rx::MEDIA_TYPE.enumerated(0),
        rx::MAX_REQUESTED_BANDWIDTH_UL.u32(41_000),
        rx::MAX_REQUESTED_BANDWIDTH_DL.u32(41_000),
        rx::CODEC_DATA.bytes(b"uplink\noffer\nm=audio 49152 RTP/AVP 116\r\n".to_vec()),
        rx::MEDIA_SUB_COMPONENT.grouped(vec![
            rx::FLOW_NUMBER.u32(1),
            rx::FLOW_DESCRIPTION.with_slice(
                format!("permit out 17 from 198.51.100.10 50000 to {ue} 49152").as_bytes(),
            ),
            rx::FLOW_DESCRIPTION.with_slice(
                format!("permit out 17 from {ue} 49152 to 198.51.100.10 50000").as_bytes(),
            ),
        ]),
        rx::MEDIA_SUB_COMPONENT.grouped(vec![
            rx::FLOW_NUMBER.u32(2),
            rx::FLOW_USAGE.enumerated(1),
            rx::FLOW_DESCRIPTION.with_slice(
                format!("permit out 17 from 198.51.100.10 50001 to {ue} 49153").as_bytes(),
            ),
        ]),
    ])
}

fn video(ue: &str) -> Avp {
    rx::MEDIA_COMPONENT_DESCRIPTION.grouped(vec![
        rx::MEDIA_COMPONENT_NUMBER.u32(2),
        rx::MEDIA_TYPE.enumerated(1),
        rx::MAX_REQUESTED_BANDWIDTH_DL.u32(2_000_000),
        rx::MAX_REQUESTED_BANDWIDTH_UL.u32(2_000_000),
        rx::MEDIA_SUB_COMPONENT.grouped(vec![
            rx::FLOW_NUMBER.u32(1),
            rx::FLOW_DESCRIPTION.with_slice(
                format!("permit out 17 from 198.51.100.10 50002 to {ue} 49154").as_bytes(),
            ),
        ]),
    ])
}

fn str_(sid: &str) -> Message {
    Message::request(rx::APP_ID, rx::CMD_SESSION_TERMINATION)
        .session_id_avp(sid)
        .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
        .origin(AF_HOST, AF_REALM)
        .destination(PCF_REALM, None)
        .avp(base::TERMINATION_CAUSE.enumerated(1))
}

fn installed(m: &Message) -> Vec<(String, u32)> {
    m.charging_rule_installs()
        .flat_map(|i| i.children_of(&gx::CHARGING_RULE_DEFINITION))
        .map(|d| {
            let name = d.child(&gx::CHARGING_RULE_NAME).unwrap().as_slice().unwrap().to_vec();
            let qci = d
                .child(&gx::QOS_INFORMATION)
                .and_then(|q| q.child(&gx::QOS_CLASS_IDENTIFIER))
                .map(|q| q.as_u32().unwrap())
                .unwrap_or(0);
            (String::from_utf8(name).unwrap(), qci)
        })
        .collect()
}

fn removed(m: &Message) -> Vec<String> {
    m.find_all(&gx::CHARGING_RULE_REMOVE)
        .flat_map(|r| r.children_of(&gx::CHARGING_RULE_NAME))
        .map(|n| String::from_utf8(n.as_slice().unwrap().to_vec()).unwrap())
        .collect()
}

fn experimental(a: &Message) -> Option<u32> {
    a.experimental_result().map(|e| e.code)
}

fn failed_avp_code(m: &Message) -> Option<u32> {
    m.failed_avps().first().map(Avp::code)
}

/// The media component numbers of an Rx RAR's Flows.
fn flows(m: &Message) -> Vec<u32> {
    m.find_all(&rx::FLOWS)
        .map(|f| f.child(&rx::MEDIA_COMPONENT_NUMBER).unwrap().as_u32().unwrap())
        .collect()
}

#[tokio::test]
async fn an_rx_call_over_gx_from_aar_to_asr() {
    let d = tempfile::tempdir().unwrap();
    let pcf = start_pcf(d.path()).await;
    let wire: Wire = Arc::default();
    let pgw =
        Peer::start(pcf.diameter(), PCF_HOST, PGW_HOST, PGW_REALM, gx::APP_ID, wire.clone()).await;
    let af =
        Peer::start(pcf.diameter(), PCF_HOST, AF_HOST, AF_REALM, rx::APP_ID, wire.clone()).await;
    let gx_sid = "pgw.epc.example;ims;1";
    let a = pgw.send(ccr_i(gx_sid, "001010000000001", 7)).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");

    // AAR-I: the PCEF gets an RAR installing the audio rule (QCI 1), then the AF its AAA.
    let sid = "pcscf.ims.example;call;1";
    let a = af.send(call(sid, 7)).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    assert_eq!(a.auth_application_id(), Some(rx::APP_ID));
    let audio_rule = format!("af-rx:{sid}-1");
    let video_rule = format!("af-rx:{sid}-2");
    let rar = pgw.next().await;
    assert_eq!(rar.command_code(), gx::CMD_RE_AUTH);
    assert_eq!(rar.session_id(), Some(gx_sid));
    assert_eq!(installed(&rar), vec![(audio_rule.clone(), 1)]);
    let def =
        rar.charging_rule_installs().next().unwrap().child(&gx::CHARGING_RULE_DEFINITION).unwrap();
    assert_eq!(def.children_of(&gx::FLOW_INFORMATION).len(), 3);
    let q = def.child(&gx::QOS_INFORMATION).unwrap();
    assert_eq!(q.child(&gx::GUARANTEED_BITRATE_DL).unwrap().as_u32().unwrap(), 41_000);
    // The PCEF is asked to report the allocation.
    assert!(rar.event_triggers().contains(&gx::event_trigger::SUCCESSFUL_RESOURCE_ALLOCATION));
    // The rule is in the Gx session's stored decision, with the Rx session bound to it.
    let gx_id = format!("gx:{gx_sid}");
    assert_eq!(rx_sessions(&pcf, &gx_id).await, vec![format!("rx:{sid}")]);

    // AAR-U adding video (no Rx-Request-Type: a known Session-Id is a modification).
    let a = af.send(aar(sid, None).avp(video("10.45.0.7"))).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    let rar = pgw.next().await;
    assert_eq!(installed(&rar), vec![(video_rule.clone(), 2)], "only what changed");
    assert!(removed(&rar).is_empty());

    // The PCEF reports the audio rule active: the AF (subscribed) hears of it.
    let a = pgw
        .send(
            ccr(gx_sid, 2, 1)
                .avp(
                    gx::EVENT_TRIGGER.enumerated(gx::event_trigger::SUCCESSFUL_RESOURCE_ALLOCATION),
                )
                .avp(rule_report(&audio_rule, 0, None)),
        )
        .await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS));
    let r = af.next().await;
    assert_eq!(r.command_code(), rx::CMD_RE_AUTH);
    assert_eq!(r.session_id(), Some(sid));
    assert_eq!(r.destination_host(), Some(AF_HOST));
    assert_eq!(r.specific_actions(), vec![8]);
    assert_eq!(flows(&r), vec![1]);
    // The video bearer lost (temporarily inactive): INDICATION_OF_LOSS_OF_BEARER.
    pgw.send(ccr(gx_sid, 2, 2).avp(rule_report(&video_rule, 2, Some(5)))).await;
    let r = af.next().await;
    assert_eq!((r.specific_actions(), flows(&r)), (vec![2], vec![2]));
    // A rule that is not the AF's: nothing for the AF.
    pgw.send(ccr(gx_sid, 2, 3).avp(rule_report("default", 1, Some(10)))).await;
    af.quiet().await;

    // Restart: the Rx session is still there and its STR removes both rules.
    drop((pgw, af));
    pcf.stop().await;
    let pcf = start_pcf(d.path()).await;
    let pgw =
        Peer::start(pcf.diameter(), PCF_HOST, PGW_HOST, PGW_REALM, gx::APP_ID, wire.clone()).await;
    let af =
        Peer::start(pcf.diameter(), PCF_HOST, AF_HOST, AF_REALM, rx::APP_ID, wire.clone()).await;
    assert_eq!(rx_sessions(&pcf, &gx_id).await, vec![format!("rx:{sid}")]);
    let a = af.send(str_(sid)).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    let rar = pgw.next().await;
    let mut gone = removed(&rar);
    gone.sort();
    assert_eq!(gone, vec![audio_rule.clone(), video_rule.clone()]);
    assert!(rx_sessions(&pcf, &gx_id).await.is_empty());
    let a = af.send(str_(sid)).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_UNKNOWN_SESSION_ID));

    // A second call, then the PDN connection ends (CCR-T): the AF gets an ASR, and no Rx
    // session outlives the Gx session; the AF's STR is answered 2001, a second one 5002.
    let sid2 = "pcscf.ims.example;call;2";
    let a = af.send(call(sid2, 7)).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    pgw.next().await;
    let a = pgw.send(ccr(gx_sid, 3, 4).avp(base::TERMINATION_CAUSE.enumerated(1))).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS));
    let asr = af.next().await;
    assert_eq!(asr.command_code(), rx::CMD_ABORT_SESSION);
    assert_eq!(asr.session_id(), Some(sid2));
    assert_eq!(asr.abort_cause(), Some(0));
    assert!(pcf.pcf.store.get_app(&format!("rx:{sid2}")).await.unwrap().is_none());
    assert!(rx_sessions(&pcf, &gx_id).await.is_empty());
    let a = af.send(str_(sid2)).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    let a = af.send(str_(sid2)).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_UNKNOWN_SESSION_ID));
    pgw.quiet().await;

    drop((pgw, af));
    pcf.stop().await;
    tshark_check(&wire.lock().unwrap());
}

#[tokio::test]
async fn rx_errors_and_a_session_bound_to_an_n7_association() {
    let d = tempfile::tempdir().unwrap();
    let pcf = start_pcf(d.path()).await;
    let wire: Wire = Arc::default();
    let af =
        Peer::start(pcf.diameter(), PCF_HOST, AF_HOST, AF_REALM, rx::APP_ID, wire.clone()).await;

    // No IP-CAN session has the address: 5065 IP-CAN_SESSION_NOT_AVAILABLE.
    let a = af.send(call("af;e;1", 9)).await;
    assert_eq!(experimental(&a), Some(5065), "{a:?}");
    // AAR-U and STR of a Session-Id never set up: 5002.
    let a = af.send(aar("af;e;2", Some(1)).avp(audio("10.45.0.9"))).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_UNKNOWN_SESSION_ID), "{a:?}");
    let a = af.send(str_("af;e;2")).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_UNKNOWN_SESSION_ID));
    // An AAR-I without the UE's address: 5005 naming Framed-IP-Address.
    let a = af.send(aar("af;e;3", Some(0)).avp(audio("10.45.0.9"))).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_MISSING_AVP), "{a:?}");
    assert_eq!(failed_avp_code(&a), Some(nasreq::FRAMED_IP_ADDRESS.code));
    // An STR without Termination-Cause (the grammar's): 5005 naming it.
    let mut m = str_("af;e;4");
    m.avps.retain(|a| a.code() != base::TERMINATION_CAUSE.code);
    let a = af.send(m).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_MISSING_AVP), "{a:?}");
    assert_eq!(failed_avp_code(&a), Some(base::TERMINATION_CAUSE.code));

    // The UE's IMS PDU session on N7, notifying an SMF sink.
    let mut smf = Sink::start().await;
    let mut ctx = open5gs_context(9);
    ctx["dnn"] = json!("ims");
    ctx["ipv4Address"] = json!("10.45.0.9");
    ctx["notificationUri"] = json!(smf.url);
    let c = client();
    let sms = format!("{}/npcf-smpolicycontrol/v1/sm-policies", pcf.base);
    let r = c.post(&sms).json(&ctx).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let sm_loc = r.header("location").unwrap().to_string();
    let sm_id = sm_loc.rsplit('/').next().unwrap().to_string();

    // A filter that is not "permit out": 5062 FILTER_RESTRICTIONS, with the AVP.
    let bad = rx::MEDIA_COMPONENT_DESCRIPTION.grouped(vec![
        rx::MEDIA_COMPONENT_NUMBER.u32(1),
        rx::MEDIA_TYPE.enumerated(0),
        rx::MEDIA_SUB_COMPONENT.grouped(vec![
            rx::FLOW_NUMBER.u32(1),
            rx::FLOW_DESCRIPTION.with_slice(b"permit in 17 from any to 10.45.0.9 49152"),
        ]),
    ]);
    let m = aar("af;e;5", Some(0))
        .avp(nasreq::FRAMED_IP_ADDRESS.ipv4_octets(Ipv4Addr::new(10, 45, 0, 9)))
        .avp(bad);
    let a = af.send(m).await;
    assert_eq!(experimental(&a), Some(5062), "{a:?}");
    assert_eq!(failed_avp_code(&a), Some(rx::FLOW_DESCRIPTION.code));
    // A media type the policy gives no QoS (TEXT): 5063 REQUESTED_SERVICE_NOT_AUTHORIZED.
    let text = rx::MEDIA_COMPONENT_DESCRIPTION.grouped(vec![
        rx::MEDIA_COMPONENT_NUMBER.u32(1),
        rx::MEDIA_TYPE.enumerated(5),
        rx::MEDIA_SUB_COMPONENT.grouped(vec![
            rx::FLOW_NUMBER.u32(1),
            rx::FLOW_DESCRIPTION.with_slice(b"permit out 6 from any to 10.45.0.9 5060"),
        ]),
    ]);
    let m = aar("af;e;6", Some(0))
        .avp(nasreq::FRAMED_IP_ADDRESS.ipv4_octets(Ipv4Addr::new(10, 45, 0, 9)))
        .avp(text);
    let a = af.send(m).await;
    assert_eq!(experimental(&a), Some(5063), "{a:?}");
    assert!(rx_sessions(&pcf, &sm_id).await.is_empty(), "no session kept by an error");

    // The call binds to the N7 association: its SMF gets the rule in an UpdateNotify.
    let sid = "pcscf.ims.example;n7;1";
    let a = af.send(call(sid, 9)).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    let n = smf.next().await;
    let rule = format!("af-rx:{sid}-1");
    assert_eq!(n["smPolicyDecision"]["qosDecs"][&rule]["5qi"], 1, "{n}");
    // The same AAR-I again: 5064 DUPLICATED_AF_SESSION.
    let a = af.send(call(sid, 9)).await;
    assert_eq!(experimental(&a), Some(5064), "{a:?}");
    // The SMF reports the rule failed for want of resources: the AF asked for release of
    // bearer (not failed allocation), so that is what it hears.
    let upd = json!({"ruleReports": [{"pccRuleIds": [rule], "ruleStatus": "INACTIVE",
        "failureCode": "RES_ALLO_FAIL"}]});
    let r = c.post(&format!("{sm_loc}/update")).json(&upd).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let r = af.next().await;
    assert_eq!((r.specific_actions(), flows(&r)), (vec![4], vec![1]));
    // The N7 association is deleted: ASR to the AF, the Rx session gone with it.
    let r = c.post(&format!("{sm_loc}/delete")).send().await.unwrap();
    assert_eq!(r.status(), 204);
    let asr = af.next().await;
    assert_eq!(asr.command_code(), rx::CMD_ABORT_SESSION);
    assert_eq!(asr.session_id(), Some(sid));
    assert!(pcf.pcf.store.get_app(&format!("rx:{sid}")).await.unwrap().is_none());
    let a = af.send(str_(sid)).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS));

    drop(af);
    pcf.stop().await;
    tshark_check(&wire.lock().unwrap());
}
