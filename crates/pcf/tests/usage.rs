//! Usage monitoring (TS 29.212 §4.5.17; TS 29.512 §4.2.2, §4.2.4) over real sockets,
//! with the repository's High project (a monthly cap on key `monthly`: what is left granted,
//! the AMBR throttled at the cap): the reference's 3.6.1 flow (Gx CCR-I, three CCR-Us
//! reporting usage, the third crossing the cap, CCR-T) with an N7 session of the same
//! subscriber told of the crossing; an N7-only flow with accuUsageReports; a restart keeping
//! the totals; the errors. Answers are checked against TS 29.512's schemas, and every
//! Diameter message through Wireshark's dissector (skipped without tshark).

mod common;

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::Arc;

use common::wire::*;
use common::*;
use diameter::dictionary::{base, dcca, gx, nasreq};
use diameter::{result_code as rc, Avp, Message};
use pcf::config::UsageConfig;
use pcf::PcfConfig;
use serde_json::{json, Value};

const GB: u64 = 1_000_000_000;

fn high() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../policies/high")
}

fn config(diameter: bool) -> PcfConfig {
    PcfConfig {
        policy: Some(high()),
        usage: UsageConfig { enabled: true },
        diameter: if diameter { diameter_on() } else { Default::default() },
        ..PcfConfig::default()
    }
}

/// A CCR-I as a P-GW sends it for UE `imsi` on APN internet.
fn ccr_i(sid: &str, imsi: &str) -> Message {
    ccr(sid, 1, 0)
        .avp(dcca::SUBSCRIPTION_ID.grouped(vec![
            dcca::SUBSCRIPTION_ID_TYPE.enumerated(dcca::subscription_id_type::END_USER_IMSI),
            dcca::SUBSCRIPTION_ID_DATA.utf8(imsi),
        ]))
        .avp(nasreq::FRAMED_IP_ADDRESS.ipv4_octets(Ipv4Addr::new(10, 46, 0, 1)))
        .avp(gx::IP_CAN_TYPE.enumerated(gx::ip_can_type::TGPP_EPS))
        .avp(gx::RAT_TYPE.enumerated(gx::rat_type::EUTRAN))
        .avp(nasreq::CALLED_STATION_ID.utf8("internet"))
        .avp(gx::TGPP_SGSN_MCC_MNC.utf8("00102"))
}

/// Usage-Monitoring-Information reporting `total` octets (a quarter up, the rest down) on
/// `key`, as a PCEF does when the threshold is reached.
fn umi(key: &str, total: u64) -> Avp {
    gx::USAGE_MONITORING_INFORMATION.grouped(vec![
        gx::MONITORING_KEY.bytes(key.as_bytes().to_vec()),
        dcca::USED_SERVICE_UNIT.grouped(vec![
            dcca::CC_TOTAL_OCTETS.u64(total),
            dcca::CC_INPUT_OCTETS.u64(total / 4),
            dcca::CC_OUTPUT_OCTETS.u64(total - total / 4),
        ]),
    ])
}

/// A CCR-U reporting usage (Event-Trigger USAGE_REPORT).
fn ccr_u(sid: &str, n: u32, reports: Vec<Avp>) -> Message {
    ccr(sid, 2, n)
        .avp(gx::EVENT_TRIGGER.enumerated(gx::event_trigger::USAGE_REPORT))
        .with_avps(reports)
}

/// The CC-Total-Octets granted on `key`.
fn granted(m: &Message, key: &str) -> Option<u64> {
    m.usage_monitoring_information()
        .find(|u| {
            u.child(&gx::MONITORING_KEY)
                .and_then(|k| k.as_slice().ok().map(|s| s == key.as_bytes()))
                == Some(true)
        })
        .and_then(|u| u.child(&dcca::GRANTED_SERVICE_UNIT))
        .and_then(|g| g.child(&dcca::CC_TOTAL_OCTETS))
        .and_then(|t| t.as_u64().ok())
}

fn apn_ambr(m: &Message) -> Option<(u32, u32)> {
    m.find_all(&gx::QOS_INFORMATION).find_map(|q| {
        Some((
            q.child(&gx::APN_AGGREGATE_MAX_BITRATE_UL)?.as_u32().ok()?,
            q.child(&gx::APN_AGGREGATE_MAX_BITRATE_DL)?.as_u32().ok()?,
        ))
    })
}

/// The subscriber's accumulated total on `key`, as the next decision reads it.
fn total(pcf: &TestPcf, supi: &str, key: &str) -> Option<u64> {
    pcf.pcf.usage.view(supi).and_then(|m| m.get(key)?["volUsage"].as_u64())
}

async fn metrics(base: &str) -> String {
    let r = client().get(&format!("{base}/metrics")).send().await.unwrap();
    String::from_utf8(r.body().to_vec()).unwrap()
}

/// An SMF's SmPolicyContextData for `supi` on DNN internet, its notifications to `smf`.
fn n7_context(supi: &str, smf: &str) -> Value {
    let mut c = open5gs_context(1);
    c["supi"] = json!(supi);
    c["notificationUri"] = json!(smf);
    c["servingNetwork"] = json!({"mcc": "001", "mnc": "02"});
    c
}

async fn gx_usage_adds_up_the_third_report_crosses_the_cap_and_the_n7_session_is_told() {
    let d = state_dir();
    let specs = specs();
    let c = client();
    let imsi = "001020000000001";
    let supi = format!("imsi-{imsi}");
    let pcf = TestPcf::start_with(d.path(), config(true)).await;
    let mut smf = testkit::sink::Sink::start().await;

    // The subscriber's 5G session: the whole cap granted at session level, US_RE armed.
    let r = c.post(&pcf.sm("")).json(&n7_context(&supi, &smf.url)).send().await.unwrap();
    let v = body(&r);
    assert_eq!(r.status(), 201, "{v}");
    // The High project's plan table gives qd1 an ARP of priorityLevel only (not a valid Arp):
    // the rest of the decision is checked.
    let mut checked = v.clone();
    checked.as_object_mut().unwrap().remove("qosDecs");
    specs.assert_valid("TS29512_Npcf_SMPolicyControl", "SmPolicyDecision", &checked);
    assert_eq!(v["umDecs"]["monthly"], json!({"umId": "monthly", "volumeThreshold": 10 * GB}));
    assert_eq!(v["sessRules"]["s1"]["refUmData"], "monthly");
    assert!(v["policyCtrlReqTriggers"].as_array().unwrap().contains(&json!("US_RE")), "{v}");
    let n7 = r.header("location").unwrap().to_string();

    let wire: Wire = Arc::default();
    let pgw = DiameterPeer::pgw(pcf.diameter(), &wire).await;
    let sid = "pgw.epc.example;um;1";

    // Gx-init: the same cap granted on the PCEF, session level, USAGE_REPORT armed.
    let hour_before = chrono::Timelike::hour(&chrono::Utc::now());
    let a = pgw.send(ccr_i(sid, imsi)).await;
    let hour_after = chrono::Timelike::hour(&chrono::Utc::now());
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    assert_eq!(granted(&a, "monthly"), Some(10 * GB));
    let u = a.usage_monitoring_information().next().unwrap();
    assert_eq!(u.child(&gx::USAGE_MONITORING_LEVEL).unwrap().as_u32().unwrap(), 0);
    assert!(a.event_triggers().contains(&gx::event_trigger::USAGE_REPORT), "{a:?}");
    // The High project's night-boost rule raises the internet downlink to 500 Mbps from 00:00 to
    // 06:00 UTC (policies/high/rules/sm.toml); checked only when the hour did not change during
    // the exchange.
    if hour_before == hour_after {
        let downlink = if hour_before < 6 { 500_000_000 } else { 200_000_000 };
        assert_eq!(apn_ambr(&a), Some((100_000_000, downlink)), "at hour {hour_before}");
    }

    // Gx-Update 1 and 2: 4 GB each, added up; what is left is granted, full speed. A report
    // of a key the session was never given is ignored.
    let a = pgw.send(ccr_u(sid, 1, vec![umi("monthly", 4 * GB), umi("video", GB)])).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    assert_eq!(granted(&a, "monthly"), Some(6 * GB));
    assert_eq!(granted(&a, "video"), None);
    assert_eq!(apn_ambr(&a), None, "no QoS change below the cap: {a:?}");
    let a = pgw.send(ccr_u(sid, 2, vec![umi("monthly", 4 * GB)])).await;
    assert_eq!(granted(&a, "monthly"), Some(2 * GB));
    assert_eq!(total(&pcf, &supi, "monthly"), Some(8 * GB));
    let uplink = pcf.pcf.usage.view(&supi).unwrap()["monthly"]["volUsageUplink"].clone();
    assert_eq!(uplink, json!(2 * GB), "CC-Input-Octets added up too");
    smf.quiet().await;

    // Gx-Update 3: 12 GB, over the cap: the CCA throttles the APN-AMBR and still grants a
    // slice, so usage keeps being reported.
    let a = pgw.send(ccr_u(sid, 3, vec![umi("monthly", 4 * GB)])).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    assert_eq!(apn_ambr(&a), Some((512_000, 1_000_000)));
    assert_eq!(granted(&a, "monthly"), Some(GB));

    // The subscriber's 5G session is decided again on the same totals and its SMF told.
    let n = smf.next().await;
    specs.assert_valid("TS29512_Npcf_SMPolicyControl", "SmPolicyNotification", &n);
    assert_eq!(n["resourceUri"], n7);
    let dec = &n["smPolicyDecision"];
    assert_eq!(
        dec["sessRules"]["s1"]["authSessAmbr"],
        json!({"uplink": "512 Kbps", "downlink": "1 Mbps"})
    );
    assert_eq!(dec["umDecs"]["monthly"]["volumeThreshold"], GB);
    // The Gx session's own decision was stored with the report: no RAR to repeat it.
    pgw.quiet().await;

    // An N7 report on the same key adds to the same totals (4G and 5G summed).
    let r = c
        .post(&format!("{n7}/update"))
        .json(&json!({"repPolicyCtrlReqTriggers": ["US_RE"],
                      "accuUsageReports": [{"refUmIds": "monthly", "volUsage": GB / 2}]}))
        .send()
        .await
        .unwrap();
    let v = body(&r);
    assert_eq!(r.status(), 200, "{v}");
    specs.assert_valid("TS29512_Npcf_SMPolicyControl", "SmPolicyDecision", &v);
    // Unchanged (still over the cap), yet re-armed: without it the SMF stops monitoring.
    assert_eq!(v, json!({"umDecs": {"monthly": {"umId": "monthly", "volumeThreshold": GB}}}));
    assert_eq!(total(&pcf, &supi, "monthly"), Some(12 * GB + GB / 2));

    // Restart: the totals are kept with the subscriber.
    drop(pgw);
    pcf.stop().await;
    let pcf = TestPcf::start_with(d.path(), config(true)).await;
    assert_eq!(total(&pcf, &supi, "monthly"), Some(12 * GB + GB / 2));
    let pgw = DiameterPeer::pgw(pcf.diameter(), &wire).await;
    // A report with nothing else changing is re-armed with the same grant.
    let a = pgw.send(ccr_u(sid, 4, vec![umi("monthly", GB / 2)])).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    assert_eq!(granted(&a, "monthly"), Some(GB));
    assert_eq!(apn_ambr(&a), None, "throttled already");

    // Gx-Terminate with the final usage: added with the session's removal.
    let a = pgw
        .send(ccr(sid, 3, 5).avp(base::TERMINATION_CAUSE.enumerated(1)).avp(umi("monthly", GB)))
        .await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    assert_eq!(total(&pcf, &supi, "monthly"), Some(14 * GB));
    let m = metrics(&pcf.base).await;
    assert!(m.contains("pcf_usage_reports_total{result=\"added\"} 2"), "{m}");
    assert!(m.contains("pcf_usage_subscribers 1"), "{m}");
    // (The restarted PCF listens on another port.)
    let n7 = pcf.sm(&format!("/{}/delete", n7.rsplit('/').next().unwrap()));
    assert_eq!(c.post(&n7).send().await.unwrap().status(), 204);

    drop(pgw);
    pcf.stop().await;
    tshark_check(&wire.lock().unwrap());
}

async fn n7_accu_usage_reports_add_up_throttle_at_the_cap_and_survive_a_restart() {
    let d = state_dir();
    let specs = specs();
    let c = client();
    let supi = "imsi-001020000000002";
    let pcf = TestPcf::start_with(d.path(), config(false)).await;
    let smf = testkit::sink::Sink::start().await;
    let r = c.post(&pcf.sm("")).json(&n7_context(supi, &smf.url)).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let loc = r.header("location").unwrap().to_string();
    let update = |reports: Value| {
        let (c, loc) = (c.clone(), loc.clone());
        async move {
            let body = json!({"repPolicyCtrlReqTriggers": ["US_RE"], "accuUsageReports": reports});
            let r = c.post(&format!("{loc}/update")).json(&body).send().await.unwrap();
            (r.status().as_u16(), common::body(&r))
        }
    };

    let (s, v) = update(json!([{"refUmIds": "monthly", "volUsage": 6 * GB,
                                "volUsageUplink": GB, "volUsageDownlink": 5 * GB}]))
    .await;
    assert_eq!(s, 200, "{v}");
    specs.assert_valid("TS29512_Npcf_SMPolicyControl", "SmPolicyDecision", &v);
    assert_eq!(v, json!({"umDecs": {"monthly": {"umId": "monthly", "volumeThreshold": 4 * GB}}}));
    // nextVolUsage (after the monitoring time) is usage too.
    let (s, v) =
        update(json!([{"refUmIds": "monthly", "volUsage": 3 * GB, "nextVolUsage": GB}])).await;
    assert_eq!(s, 200, "{v}");
    specs.assert_valid("TS29512_Npcf_SMPolicyControl", "SmPolicyDecision", &v);
    assert_eq!(
        v["sessRules"]["s1"]["authSessAmbr"],
        json!({"uplink": "512 Kbps", "downlink": "1 Mbps"})
    );
    assert_eq!(v["umDecs"]["monthly"]["volumeThreshold"], GB);
    // A key the session was not given: ignored, nothing changes, nothing stored.
    let (s, v) = update(json!([{"refUmIds": "other", "volUsage": GB}])).await;
    assert_eq!((s, v), (200, json!({})));
    assert_eq!(pcf.pcf.usage.view(supi).unwrap().get("other"), None);
    // Malformed reports: 400 naming each attribute; nothing is added.
    let (s, v) = update(json!([{"volUsage": -1}, {"refUmIds": "monthly", "timeUsage": "x"}])).await;
    assert_eq!(s, 400, "{v}");
    specs.assert_valid("TS29571_CommonData", "ProblemDetails", &v);
    assert_eq!(v["cause"], "MANDATORY_IE_MISSING");
    let params: Vec<&str> = v["invalidParams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["param"].as_str().unwrap())
        .collect();
    assert_eq!(
        params,
        [
            "/accuUsageReports/0/refUmIds",
            "/accuUsageReports/0/volUsage",
            "/accuUsageReports/1/timeUsage"
        ]
    );
    assert_eq!(total(&pcf, supi, "monthly"), Some(10 * GB));

    // The delete's final report is added with it.
    let r = c
        .post(&format!("{loc}/delete"))
        .json(&json!({"accuUsageReports": [{"refUmIds": "monthly", "volUsage": GB}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(total(&pcf, supi, "monthly"), Some(11 * GB));
    let m = metrics(&pcf.base).await;
    assert!(m.contains("pcf_usage_reports_total{result=\"added\"} 3"), "{m}");
    assert!(m.contains("pcf_usage_reports_total{result=\"ignored\"} 1"), "{m}");

    // After a restart the subscriber's next session starts throttled: the totals outlive
    // its sessions and the process.
    pcf.stop().await;
    let pcf = TestPcf::start_with(d.path(), config(false)).await;
    let r = c.post(&pcf.sm("")).json(&n7_context(supi, &smf.url)).send().await.unwrap();
    let v = body(&r);
    assert_eq!(r.status(), 201, "{v}");
    assert_eq!(v["sessRules"]["s1"]["authSessAmbr"]["downlink"], "1 Mbps");
    assert_eq!(v["umDecs"]["monthly"]["volumeThreshold"], GB);
    pcf.stop().await;

    // With usage monitoring off, the project grants nothing and reports are not read.
    let d2 = state_dir();
    let off = PcfConfig { usage: UsageConfig { enabled: false }, ..config(false) };
    let pcf = TestPcf::start_with(d2.path(), off).await;
    let r = c.post(&pcf.sm("")).json(&n7_context(supi, &smf.url)).send().await.unwrap();
    let v = body(&r);
    assert_eq!(r.status(), 201, "{v}");
    assert!(v.get("umDecs").is_none(), "{v}");
    let loc = r.header("location").unwrap().to_string();
    let body = json!({"accuUsageReports": [{"refUmIds": "monthly", "volUsage": GB}]});
    let r = c.post(&format!("{loc}/update")).json(&body).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(pcf.pcf.usage.view(supi), None);
    pcf.stop().await;
}

#[tokio::test]
async fn malformed_gx_usage_reports_get_5005_or_5009_with_failed_avp() {
    let d = tempfile::tempdir().unwrap();
    let pcf = TestPcf::start_with(d.path(), config(true)).await;
    let wire: Wire = Arc::default();
    let pgw = DiameterPeer::pgw(pcf.diameter(), &wire).await;
    let sid = "pgw.epc.example;um;2";
    let imsi = "001020000000003";
    let a = pgw.send(ccr_i(sid, imsi)).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    let usu = || dcca::USED_SERVICE_UNIT.grouped(vec![dcca::CC_TOTAL_OCTETS.u64(GB)]);

    // No Monitoring-Key: 5005, Failed-AVP the report refused.
    let a =
        pgw.send(ccr_u(sid, 1, vec![gx::USAGE_MONITORING_INFORMATION.grouped(vec![usu()])])).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_MISSING_AVP), "{a:?}");
    let f = &a.failed_avps()[0];
    assert_eq!(f.code(), gx::USAGE_MONITORING_INFORMATION.code);
    assert!(f.child(&dcca::USED_SERVICE_UNIT).is_some(), "{f:?}");
    // Two Monitoring-Keys, three Used-Service-Units: 5009, Failed-AVP the one too many.
    let two_keys = gx::USAGE_MONITORING_INFORMATION.grouped(vec![
        gx::MONITORING_KEY.bytes(b"monthly".to_vec()),
        gx::MONITORING_KEY.bytes(b"second".to_vec()),
        usu(),
    ]);
    let a = pgw.send(ccr_u(sid, 2, vec![two_keys])).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_AVP_OCCURS_TOO_MANY_TIMES), "{a:?}");
    assert_eq!(a.failed_avps()[0].as_slice().unwrap(), b"second");
    let three = gx::USAGE_MONITORING_INFORMATION.grouped(vec![
        gx::MONITORING_KEY.bytes(b"monthly".to_vec()),
        usu(),
        usu(),
        usu(),
    ]);
    let a = pgw.send(ccr_u(sid, 3, vec![three])).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_AVP_OCCURS_TOO_MANY_TIMES), "{a:?}");
    assert_eq!(a.failed_avps()[0].code(), dcca::USED_SERVICE_UNIT.code);
    // A CC-Total-Octets of 4 octets (Unsigned64 has 8): the node refuses it, naming it.
    let short = gx::USAGE_MONITORING_INFORMATION.grouped(vec![
        gx::MONITORING_KEY.bytes(b"monthly".to_vec()),
        dcca::USED_SERVICE_UNIT.grouped(vec![dcca::CC_TOTAL_OCTETS.bytes(vec![0, 0, 0, 1])]),
    ]);
    let a = pgw.send(ccr_u(sid, 4, vec![short])).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_INVALID_AVP_LENGTH), "{a:?}");
    assert!(!a.failed_avps().is_empty(), "{a:?}");
    // Nothing of the refused reports was added.
    assert_eq!(pcf.pcf.usage.view(&format!("imsi-{imsi}")), Some(Default::default()));
    // The Two-Usage-Units report (before and after a monitoring time) is one report.
    let two = gx::USAGE_MONITORING_INFORMATION.grouped(vec![
        gx::MONITORING_KEY.bytes(b"monthly".to_vec()),
        usu(),
        usu(),
    ]);
    let a = pgw.send(ccr_u(sid, 5, vec![two])).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    assert_eq!(granted(&a, "monthly"), Some(8 * GB));
    // Input and output octets without a total (as the kit's PCEF reports): their sum is used.
    let in_out = gx::USAGE_MONITORING_INFORMATION.grouped(vec![
        gx::MONITORING_KEY.bytes(b"monthly".to_vec()),
        dcca::USED_SERVICE_UNIT.grouped(vec![
            dcca::CC_INPUT_OCTETS.u64(GB / 2),
            dcca::CC_OUTPUT_OCTETS.u64(3 * GB / 2),
        ]),
    ]);
    let a = pgw.send(ccr_u(sid, 6, vec![in_out])).await;
    assert_eq!(granted(&a, "monthly"), Some(6 * GB));
    let view = pcf.pcf.usage.view(&format!("imsi-{imsi}")).unwrap();
    assert_eq!(view["monthly"]["volUsageDownlink"], json!(3 * GB / 2));
    assert_eq!(view["monthly"]["volUsage"], json!(4 * GB));

    drop(pgw);
    pcf.stop().await;
    // The 5014's Failed-AVP carries the peer's malformed AVP, as RFC 6733 §7.5 wants: every
    // other answer goes through the dissector.
    let ok: Vec<Vec<u8>> = wire
        .lock()
        .unwrap()
        .iter()
        .filter(|b| {
            let m = Message::decode(bytes::Bytes::copy_from_slice(b)).unwrap();
            m.result_code() != Some(rc::DIAMETER_INVALID_AVP_LENGTH)
        })
        .cloned()
        .collect();
    tshark_check(&ok);
}

#[tokio::test]
async fn an_n7_report_crossing_the_cap_sends_the_subscribers_gx_session_an_rar() {
    let d = tempfile::tempdir().unwrap();
    let c = client();
    let imsi = "001020000000004";
    let supi = format!("imsi-{imsi}");
    let pcf = TestPcf::start_with(d.path(), config(true)).await;
    let wire: Wire = Arc::default();
    let pgw = DiameterPeer::pgw(pcf.diameter(), &wire).await;
    let sid = "pgw.epc.example;um;4";
    let a = pgw.send(ccr_i(sid, imsi)).await;
    assert_eq!(granted(&a, "monthly"), Some(10 * GB));
    let smf = testkit::sink::Sink::start().await;
    let r = c.post(&pcf.sm("")).json(&n7_context(&supi, &smf.url)).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let loc = r.header("location").unwrap().to_string();

    // The 5G session reports 11 GB: its answer throttles it, and the 4G session of the same
    // subscriber gets an RAR with the throttled APN-AMBR and what is left to report.
    let body = json!({"repPolicyCtrlReqTriggers": ["US_RE"],
                      "accuUsageReports": [{"refUmIds": "monthly", "volUsage": 11 * GB}]});
    let r = c.post(&format!("{loc}/update")).json(&body).send().await.unwrap();
    let v = common::body(&r);
    assert_eq!(r.status(), 200, "{v}");
    assert_eq!(v["sessRules"]["s1"]["authSessAmbr"]["downlink"], "1 Mbps");
    let rar = pgw.next().await;
    assert_eq!(rar.command_code(), gx::CMD_RE_AUTH);
    assert_eq!(rar.session_id(), Some(sid));
    assert_eq!(apn_ambr(&rar), Some((512_000, 1_000_000)));
    assert_eq!(granted(&rar, "monthly"), Some(GB));
    pgw.quiet().await;
    // The RAR's decision is the one in force: the PCEF's next report is answered from it.
    let a = pgw.send(ccr_u(sid, 1, vec![umi("monthly", GB / 2)])).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    assert_eq!(apn_ambr(&a), None, "throttled already: {a:?}");
    assert_eq!(granted(&a, "monthly"), Some(GB));
    assert_eq!(total(&pcf, &supi, "monthly"), Some(11 * GB + GB / 2));

    drop(pgw);
    pcf.stop().await;
    tshark_check(&wire.lock().unwrap());
}

/// The default project with a PCC rule level key: a video rule monitored on key `video` until
/// 5 GB, removed (and its monitoring with it) at 5 GB.
fn video_project(into: &std::path::Path) -> PathBuf {
    let p = default_project(into);
    let sm = p.join("rules/sm.toml");
    let mut rules = std::fs::read_to_string(&sm).unwrap();
    rules.push_str(
        r#"
[[rule]]
name = "video-monitored"
when = ["usage exists"]
[[rule.then]]
set = "decision.pccRules.video"
value = { pccRuleId = "video", precedence = 100, refQosData = ["q1"], refUmData = ["video"], flowInfos = [{ flowDescription = "permit out 17 from any to assigned 5000", flowDirection = "DOWNLINK" }] }
[[rule.then]]
set = "decision.qosDecs.q1"
value = { qosId = "q1", "5qi" = 2, maxbrUl = "1 Mbps", maxbrDl = "4 Mbps", arp = { priorityLevel = 5, preemptCap = "MAY_PREEMPT", preemptVuln = "NOT_PREEMPTABLE" } }
[[rule.then]]
set = "decision.umDecs.video"
value = { umId = "video", volumeThreshold = 5000000000 }
[[rule.then]]
append = "decision.policyCtrlReqTriggers"
value = "US_RE"

[[rule]]
name = "video-cap"
when = ["usage.video.volUsage >= 5000000000"]
[[rule.then]]
remove = "decision.pccRules.video"
[[rule.then]]
remove = "decision.umDecs.video"
"#,
    );
    std::fs::write(&sm, rules).unwrap();
    p
}

#[tokio::test]
async fn a_pcc_rule_level_key_is_the_rules_monitoring_key_and_is_disabled_with_it() {
    let d = tempfile::tempdir().unwrap();
    let specs = specs();
    let c = client();
    let imsi = "001020000000005";
    let config = PcfConfig { policy: Some(video_project(&d.path().join("p"))), ..config(true) };
    let pcf = TestPcf::start_with(d.path(), config).await;
    let wire: Wire = Arc::default();
    let pgw = DiameterPeer::pgw(pcf.diameter(), &wire).await;
    let sid = "pgw.epc.example;um;5";

    // CCA-I: the rule carries its Monitoring-Key, the grant says PCC_RULE_LEVEL.
    let a = pgw.send(ccr_i(sid, imsi)).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    let def =
        a.charging_rule_installs().next().unwrap().child(&gx::CHARGING_RULE_DEFINITION).unwrap();
    assert_eq!(def.child(&gx::MONITORING_KEY).unwrap().as_slice().unwrap(), b"video");
    let u = a.usage_monitoring_information().next().unwrap();
    assert_eq!(u.child(&gx::USAGE_MONITORING_LEVEL).unwrap().as_u32().unwrap(), 1);
    assert_eq!(granted(&a, "video"), Some(5 * GB));

    // 5 GB on the rule: the rule goes and its monitoring is disabled; nothing is re-armed.
    let a = pgw.send(ccr_u(sid, 1, vec![umi("video", 5 * GB)])).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    let gone: Vec<Avp> = a
        .find_all(&gx::CHARGING_RULE_REMOVE)
        .flat_map(|r| r.children_of(&gx::CHARGING_RULE_NAME))
        .collect();
    assert_eq!(gone.len(), 1);
    let u: Vec<&Avp> = a.usage_monitoring_information().collect();
    assert_eq!(u.len(), 1, "{a:?}");
    assert_eq!(u[0].child(&gx::USAGE_MONITORING_SUPPORT).unwrap().as_u32().unwrap(), 0);
    assert_eq!(granted(&a, "video"), None);

    // N7 alike: the SMF's delta removes the rule and its usage monitoring data.
    let smf = testkit::sink::Sink::start().await;
    let supi = "imsi-001020000000006";
    let r = c.post(&pcf.sm("")).json(&n7_context(supi, &smf.url)).send().await.unwrap();
    let v = body(&r);
    assert_eq!(r.status(), 201, "{v}");
    specs.assert_valid("TS29512_Npcf_SMPolicyControl", "SmPolicyDecision", &v);
    assert_eq!(v["pccRules"]["video"]["refUmData"], json!(["video"]));
    let loc = r.header("location").unwrap().to_string();
    let body = json!({"repPolicyCtrlReqTriggers": ["US_RE"],
                      "accuUsageReports": [{"refUmIds": "video", "volUsage": 6 * GB}]});
    let r = c.post(&format!("{loc}/update")).json(&body).send().await.unwrap();
    let v = common::body(&r);
    assert_eq!(r.status(), 200, "{v}");
    specs.assert_valid("TS29512_Npcf_SMPolicyControl", "SmPolicyDecision", &v);
    assert_eq!(v["pccRules"], json!({"video": null}));
    assert_eq!(v["umDecs"], json!({"video": null}));

    drop(pgw);
    pcf.stop().await;
    tshark_check(&wire.lock().unwrap());
}

testkit::on_both_backends!(
    gx_usage_adds_up_the_third_report_crosses_the_cap_and_the_n7_session_is_told,
    n7_accu_usage_reports_add_up_throttle_at_the_cap_and_survive_a_restart,
);
