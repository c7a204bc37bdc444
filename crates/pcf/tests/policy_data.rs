//! The PCF reads the subscriber's policy data (SmPolicyData) from a real UDR it finds through a
//! real NRF, and decides with it; an unknown subscriber and an unreachable UDR get what
//! `[pcf.udr]` says.

mod common;

use std::path::Path;
use std::time::Duration;

use common::peers::{nrf_client_config, start_nrf, start_udr};
use common::*;
use pcf::config::{OnUnknown, OnUnreachable, UdrConfig};
use pcf::PcfConfig;
use serde_json::{json, Value};
use testkit::specs::Specs;

/// The policy data of a gold subscriber on slice 1-000001, DNN internet (TS 29.519 SmPolicyData).
fn gold_sm_data() -> Value {
    json!({"smPolicySnssaiData": {"1-000001": {
        "snssai": {"sst": 1, "sd": "000001"},
        "smPolicyDnnData": {"internet": {"dnn": "internet", "subscCats": ["gold"]}}}}})
}

/// The default project, with gold subscribers' downlink raised from their policy data.
fn gold_project(into: &Path) -> std::path::PathBuf {
    let p = default_project(into);
    let sm = p.join("rules/sm.toml");
    let mut rules = std::fs::read_to_string(&sm).unwrap();
    rules.push_str(
        "\n[[rule]]\nname = \"gold\"\n\
         when = [\"subscriber.smPolicySnssaiData.1-000001.smPolicyDnnData.internet.subscCats[0] == 'gold'\"]\n\
         [[rule.then]]\nset = \"decision.sessRules.s1.authSessAmbr.downlink\"\nvalue = \"5 Gbps\"\n",
    );
    std::fs::write(&sm, rules).unwrap();
    // And in AM (rules in `first` mode: the gold rule goes first), a UE-AMBR from AmPolicyData.
    let am = p.join("rules/am.toml");
    let rules = std::fs::read_to_string(&am).unwrap().replacen(
        "mode = \"first\"\n",
        "mode = \"first\"\n[[rule]]\nname = \"gold-ambr\"\n\
         when = [\"subscriber.subscCats[0] == 'gold'\"]\n[[rule.then]]\nset = \"decision.ueAmbr\"\n\
         value = { uplink = \"1 Gbps\", downlink = \"4 Gbps\" }\n",
        1,
    );
    std::fs::write(&am, rules).unwrap();
    p
}

fn context(n: u32) -> Value {
    let mut c = open5gs_context(n);
    c["sliceInfo"] = json!({"sst": 1, "sd": "000001"});
    c
}

async fn wait_registered(nrf: &str, nf_type: &str) {
    let c = client();
    let url = format!("{nrf}/nnrf-nfm/v1/nf-instances?nf-type={nf_type}");
    for _ in 0..200 {
        let r = c.get(&url).send().await.unwrap();
        if r.status() == 200 && String::from_utf8_lossy(r.body()).contains("/nf-instances/") {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{nf_type} never registered");
}

#[tokio::test]
async fn decisions_read_the_policy_data_of_a_udr_found_through_the_nrf() {
    let specs = specs();
    let d = tempfile::tempdir().unwrap();
    let nrf = start_nrf(d.path()).await;
    let udr = start_udr(d.path(), Some(&nrf.base)).await;
    let c = client();
    let ue = "imsi-999700000000001";
    let url = format!("{}/nudr-dr/v2/policy-data/ues/{ue}/sm-data", udr.base);
    let r = c.put(&url).json(&gold_sm_data()).send().await.unwrap();
    assert_eq!(r.status(), 201, "{}", String::from_utf8_lossy(r.body()));
    wait_registered(&nrf.base, "UDR").await;

    let config = PcfConfig {
        policy: Some(gold_project(&d.path().join("policy"))),
        nrf: Some(nrf_client_config(&nrf.base)),
        ..PcfConfig::default()
    };
    let pcf = TestPcf::start_with(d.path(), config).await;
    // The gold subscriber's decision comes from its policy data.
    let r = c.post(&pcf.sm("")).json(&context(1)).send().await.unwrap();
    let decision = body(&r);
    assert_eq!(r.status(), 201, "{decision}");
    specs.assert_valid("TS29512_Npcf_SMPolicyControl", "SmPolicyDecision", &decision);
    assert_eq!(decision["sessRules"]["s1"]["authSessAmbr"]["downlink"], "5 Gbps");
    // A subscriber the UDR does not know: decided without data (the default).
    let r = c.post(&pcf.sm("")).json(&context(2)).send().await.unwrap();
    let decision = body(&r);
    assert_eq!(r.status(), 201, "{decision}");
    assert_eq!(decision["sessRules"]["s1"]["authSessAmbr"]["downlink"], "2 Gbps");
    // The policy data changes: the next update decides with the new data.
    let loc = r.header("location").unwrap().to_string();
    let r =
        c.put(&url.replace("0000000001", "0000000002")).json(&gold_sm_data()).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let r = c
        .post(&format!("{loc}/update"))
        .json(&json!({"repPolicyCtrlReqTriggers": ["RES_MO_RE"]}))
        .send()
        .await
        .unwrap();
    let delta = body(&r);
    assert_eq!(r.status(), 200, "{delta}");
    assert_eq!(delta["sessRules"]["s1"]["authSessAmbr"]["downlink"], "5 Gbps");
    let metrics = String::from_utf8(
        c.get(&format!("{}/metrics", pcf.base)).send().await.unwrap().body().to_vec(),
    )
    .unwrap();
    assert!(metrics.contains("pcf_policy_data_reads_total{result=\"found\"} 2"), "{metrics}");
    assert!(metrics.contains("pcf_policy_data_reads_total{result=\"unknown\"} 1"), "{metrics}");
    pcf.stop().await;

    // With on_unknown_subscriber = reject, the unknown subscriber is refused.
    let config = PcfConfig {
        policy: Some(d.path().join("policy")),
        udr: UdrConfig {
            api_root: Some(udr.base.clone()),
            on_unknown_subscriber: OnUnknown::Reject,
            ..UdrConfig::default()
        },
        ..PcfConfig::default()
    };
    let pcf = TestPcf::start_with(d.path(), config).await;
    let r = c.post(&pcf.sm("")).json(&context(3)).send().await.unwrap();
    problem(&specs, &r, 400, "USER_UNKNOWN");
    pcf.stop().await;
    udr.stop().await;
    nrf.stop().await;
}

#[tokio::test]
async fn an_unreachable_udr_gets_the_fallback_or_503_as_configured() {
    let specs = specs();
    let d = tempfile::tempdir().unwrap();
    let project = default_project(&d.path().join("policy"));
    // A port nothing listens on.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let udr = |on: OnUnreachable| UdrConfig {
        api_root: Some(format!("http://{closed}")),
        timeout_ms: 300,
        on_unreachable: on,
        ..UdrConfig::default()
    };
    let config = PcfConfig {
        policy: Some(project.clone()),
        udr: udr(OnUnreachable::Fallback),
        ..PcfConfig::default()
    };
    let pcf = TestPcf::start_with(d.path(), config).await;
    let c = client();
    let r = c.post(&pcf.sm("")).json(&context(4)).send().await.unwrap();
    let decision = body(&r);
    assert_eq!(r.status(), 201, "{decision}");
    specs.assert_valid("TS29512_Npcf_SMPolicyControl", "SmPolicyDecision", &decision);
    // The default project's [fallback.SM].
    assert_eq!(
        decision["sessRules"]["s1"]["authSessAmbr"],
        json!({"uplink": "1 Mbps", "downlink": "1 Mbps"})
    );
    let metrics = String::from_utf8(
        c.get(&format!("{}/metrics", pcf.base)).send().await.unwrap().body().to_vec(),
    )
    .unwrap();
    assert!(metrics.contains("pcf_policy_data_reads_total{result=\"unreachable\"} 1"), "{metrics}");
    pcf.stop().await;

    let config = PcfConfig {
        policy: Some(project),
        udr: udr(OnUnreachable::Reject),
        ..PcfConfig::default()
    };
    let pcf = TestPcf::start_with(d.path(), config).await;
    let r = c.post(&pcf.sm("")).json(&context(5)).send().await.unwrap();
    problem(&specs, &r, 503, "TARGET_NF_NOT_REACHABLE");
    pcf.stop().await;
}

#[tokio::test]
async fn a_change_of_policy_data_redecides_and_notifies_the_smf() {
    let specs = specs();
    let d = tempfile::tempdir().unwrap();
    let nrf = start_nrf(d.path()).await;
    let udr = start_udr(d.path(), Some(&nrf.base)).await;
    let c = client();
    let ue = "imsi-999700000000021";
    let url = format!("{}/nudr-dr/v2/policy-data/ues/{ue}/sm-data", udr.base);
    // A subscriber with policy data, not gold yet.
    let mut data = gold_sm_data();
    data["smPolicySnssaiData"]["1-000001"]["smPolicyDnnData"]["internet"]["subscCats"] =
        json!(["silver"]);
    assert_eq!(c.put(&url).json(&data).send().await.unwrap().status(), 201);
    let config = PcfConfig {
        policy: Some(gold_project(&d.path().join("policy"))),
        udr: UdrConfig { api_root: Some(udr.base.clone()), ..UdrConfig::default() },
        ..PcfConfig::default()
    };
    let pcf = TestPcf::start_with(d.path(), config).await;
    let mut smf = testkit::sink::Sink::start().await;
    let mut ctx = context(21);
    ctx["notificationUri"] = json!(smf.url);
    let r = c.post(&pcf.sm("")).json(&ctx).send().await.unwrap();
    let decision = body(&r);
    assert_eq!(r.status(), 201, "{decision}");
    assert_eq!(decision["sessRules"]["s1"]["authSessAmbr"]["downlink"], "2 Gbps");
    let loc = r.header("location").unwrap().to_string();
    // A second session of the subscriber shares its one subscription.
    let mut ctx2 = ctx.clone();
    ctx2["pduSessionId"] = json!(2);
    let r = c.post(&pcf.sm("")).json(&ctx2).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let loc2 = r.header("location").unwrap().to_string();
    let subs = String::from_utf8(
        c.get(&format!("{}/metrics", pcf.base)).send().await.unwrap().body().to_vec(),
    )
    .unwrap();
    assert!(subs.contains("pcf_policy_data_subscriptions_total{result=\"ok\"} 1"), "{subs}");

    // The operator makes the subscriber gold at the UDR (a PUT of its SmPolicyData; TS 29.519's
    // PATCH may not change subscCats): the PCF hears it, decides again,
    // and tells the SMF of each session what changed.
    let r = c.put(&url).json(&gold_sm_data()).send().await.unwrap();
    assert!(r.status().is_success(), "{}", String::from_utf8_lossy(r.body()));
    let mut resources = Vec::new();
    for _ in 0..2 {
        let n = smf.next().await;
        specs.assert_valid("TS29512_Npcf_SMPolicyControl", "SmPolicyNotification", &n);
        assert_eq!(
            n["smPolicyDecision"]["sessRules"]["s1"]["authSessAmbr"]["downlink"], "5 Gbps",
            "{n}"
        );
        assert!(
            n["smPolicyDecision"].get("policyCtrlReqTriggers").is_none(),
            "only the change: {n}"
        );
        resources.push(n["resourceUri"].as_str().unwrap().to_string());
    }
    resources.sort();
    let mut want = vec![loc.clone(), loc2.clone()];
    want.sort();
    assert_eq!(resources, want);
    // The decision in force is the new one.
    let got = body(&c.get(&loc).send().await.unwrap());
    assert_eq!(got["policy"]["sessRules"]["s1"]["authSessAmbr"]["downlink"], "5 Gbps");

    // The subscriber's last session ends: its subscription at the UDR goes with it.
    assert_eq!(c.post(&format!("{loc}/delete")).send().await.unwrap().status(), 204);
    assert_eq!(c.post(&format!("{loc2}/delete")).send().await.unwrap().status(), 204);
    // A later change reaches no SMF.
    data["smPolicySnssaiData"]["1-000001"]["smPolicyDnnData"]["internet"]["subscCats"] =
        json!(["bronze"]);
    let r = c.put(&url).json(&data).send().await.unwrap();
    assert!(r.status().is_success());
    tokio::time::sleep(Duration::from_millis(300)).await;
    smf.quiet().await;
    let m = String::from_utf8(
        c.get(&format!("{}/metrics", pcf.base)).send().await.unwrap().body().to_vec(),
    )
    .unwrap();
    assert!(m.contains("pcf_sm_update_notify_total{result=\"ok\"} 2"), "{m}");
    // The UDR sent one notification (the gold change), none for the bronze one: unsubscribed,
    // and the cache holds nothing of the subscriber.
    assert!(m.contains("pcf_policy_data_notifications_total 1"), "{m}");
    assert!(m.contains("pcf_policy_data_cached_subscribers 0"), "{m}");
    pcf.stop().await;
    udr.stop().await;
    nrf.stop().await;
}

/// An AM association whose AmPolicyData the UDR holds watches it: a change re-decides and
/// the AMF gets an UpdateNotify with what changed; the data removed ends the association
/// (terminate, UE_SUBSCRIPTION: unknown subscribers are refused here); after the delete
/// nothing is watched any more.
#[tokio::test]
async fn a_change_of_am_data_redecides_and_notifies_the_amf() {
    let specs = Specs::load(&[
        "TS29507_Npcf_AMPolicyControl",
        "TS29571_CommonData",
        "TS29534_Npcf_AMPolicyAuthorization",
    ]);
    let d = tempfile::tempdir().unwrap();
    let udr = start_udr(d.path(), None).await;
    let c = client();
    let ue = "imsi-999700000000031";
    // AmPolicyData is read-only on N36: the operator provisions it (docs/udr.md).
    let url = format!("{}/udr-prov/v1/policy-data/ues/{ue}", udr.base);
    let r = c.put(&url).json(&json!({"amData": {"subscCats": ["silver"]}})).send().await.unwrap();
    assert_eq!(r.status(), 201, "{}", String::from_utf8_lossy(r.body()));
    let config = PcfConfig {
        policy: Some(gold_project(&d.path().join("policy"))),
        udr: UdrConfig {
            api_root: Some(udr.base.clone()),
            on_unknown_subscriber: OnUnknown::Reject,
            ..UdrConfig::default()
        },
        ..PcfConfig::default()
    };
    let pcf = TestPcf::start_with(d.path(), config).await;
    let mut amf = testkit::sink::Sink::start().await;
    let request = json!({
        "notificationUri": amf.url, "supi": ue, "accessType": "3GPP_ACCESS", "ratType": "NR",
        "servingPlmn": {"mcc": "999", "mnc": "70"},
        "guami": {"plmnId": {"mcc": "999", "mnc": "70"}, "amfId": "020040"},
        "suppFeat": "4000000"
    });
    let am = format!("{}/npcf-am-policy-control/v1/policies", pcf.base);
    let r = c.post(&am).json(&request).send().await.unwrap();
    let created = body(&r);
    assert_eq!(r.status(), 201, "{created}");
    assert!(created.get("ueAmbr").is_none(), "{created}");
    let loc = r.header("location").unwrap().to_string();

    // The operator makes the subscriber gold: the AMF hears the UE-AMBR it gets now.
    let r = c.put(&url).json(&json!({"amData": {"subscCats": ["gold"]}})).send().await.unwrap();
    assert!(r.status().is_success(), "{}", String::from_utf8_lossy(r.body()));
    let n = amf.next().await;
    specs.assert_valid("TS29507_Npcf_AMPolicyControl", "PolicyUpdate", &n);
    assert_eq!(n["resourceUri"], loc.as_str(), "{n}");
    assert_eq!(n["ueAmbr"]["downlink"], "4 Gbps", "{n}");
    let r = c.get(&loc).send().await.unwrap();
    assert_eq!(body(&r)["ueAmbr"]["downlink"], "4 Gbps", "the new decision is the one in force");

    // The data is removed: the association is ended at the AMF.
    let r = c.delete(&url).send().await.unwrap();
    assert!(r.status().is_success(), "{}", String::from_utf8_lossy(r.body()));
    let n = amf.next().await;
    specs.assert_valid("TS29507_Npcf_AMPolicyControl", "TerminationNotification", &n);
    assert_eq!(n, json!({"resourceUri": loc, "cause": "UE_SUBSCRIPTION"}));
    // Both went to the AMF and count as the AMF's, none as an SMF's.
    let m = String::from_utf8(
        c.get(&format!("{}/metrics", pcf.base)).send().await.unwrap().body().to_vec(),
    )
    .unwrap();
    assert!(m.contains("pcf_am_update_notify_total{result=\"ok\"} 2"), "{m}");
    assert!(m.contains("pcf_sm_update_notify_total{result=\"ok\"} 0"), "{m}");

    // The AMF deletes it; the subscription goes with it, so a later change notifies nothing.
    let r = c.delete(&loc).send().await.unwrap();
    assert_eq!(r.status(), 204);
    let r = c.put(&url).json(&json!({"amData": {"subscCats": ["gold"]}})).send().await.unwrap();
    assert!(r.status().is_success());
    amf.quiet().await;
    pcf.stop().await;
    udr.stop().await;
}

/// With unknown subscribers refused, a subscriber whose SmPolicyData is removed at the UDR has
/// its sessions ended by the PCF: the SMF gets a terminate (TS 29.512 §4.2.3.3) and deletes.
#[tokio::test]
async fn removed_sm_data_ends_the_sessions_when_unknown_subscribers_are_refused() {
    let specs = specs();
    let d = tempfile::tempdir().unwrap();
    let udr = start_udr(d.path(), None).await;
    let c = client();
    let ue = "imsi-999700000000041";
    let url = format!("{}/nudr-dr/v2/policy-data/ues/{ue}/sm-data", udr.base);
    let r = c.put(&url).json(&gold_sm_data()).send().await.unwrap();
    assert_eq!(r.status(), 201, "{}", String::from_utf8_lossy(r.body()));
    let config = PcfConfig {
        policy: Some(gold_project(&d.path().join("policy"))),
        udr: UdrConfig {
            api_root: Some(udr.base.clone()),
            on_unknown_subscriber: OnUnknown::Reject,
            ..UdrConfig::default()
        },
        ..PcfConfig::default()
    };
    let pcf = TestPcf::start_with(d.path(), config).await;
    let mut smf = testkit::sink::Sink::start().await;
    let mut ctx = context(41);
    ctx["notificationUri"] = json!(smf.url);
    let r = c.post(&pcf.sm("")).json(&ctx).send().await.unwrap();
    assert_eq!(r.status(), 201, "{}", body(&r));
    let loc = r.header("location").unwrap().to_string();

    // The operator removes the subscriber's policy data.
    let r =
        c.delete(&format!("{}/udr-prov/v1/policy-data/ues/{ue}", udr.base)).send().await.unwrap();
    assert!(r.status().is_success(), "{}", String::from_utf8_lossy(r.body()));
    let n = smf.next().await;
    specs.assert_valid("TS29512_Npcf_SMPolicyControl", "TerminationNotification", &n);
    assert_eq!(n, json!({"resourceUri": loc, "cause": "UE_SUBSCRIPTION"}));
    // The SMF answers with the delete; a new session of the subscriber is now refused.
    let r = c.post(&format!("{loc}/delete")).send().await.unwrap();
    assert_eq!(r.status(), 204);
    let r = c.post(&pcf.sm("")).json(&ctx).send().await.unwrap();
    problem(&specs, &r, 400, "USER_UNKNOWN");
    pcf.stop().await;
    udr.stop().await;
}
