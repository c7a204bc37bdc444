//! Npcf_UEPolicyControl over a real socket, with URSP delivered through an AMF simulated here:
//! the AMF checks each N1N2MessageTransfer against TS 29.518 and answers for the UE (MANAGE UE
//! POLICY COMPLETE, COMMAND REJECT, or a transfer failure). Answers checked against TS 29.525.

mod common;

use std::path::Path;
use std::time::Duration;

use base64::Engine;
use common::amf::{Amf, Seen, Ue};
use common::*;
use pcf::config::AmfConfig;
use pcf::ue_policy_delivery::{parse, Message};
use pcf::PcfConfig;
use serde_json::{json, Value};
use testkit::specs::Specs;

fn ue_specs() -> Specs {
    Specs::load(&[
        "TS29525_Npcf_UEPolicyControl",
        "TS29518_Namf_Communication",
        "TS29571_CommonData",
    ])
}

/// The default project with UE rules: on NR, the enterprise DNN goes to slice 2 (SSC mode 1,
/// IPv4, 3GPP access); once the UE reports a PLMN change, everything else goes to the
/// internet DNN too (match-all, lowest precedence).
fn ue_project(dir: &Path) -> std::path::PathBuf {
    let p = default_project(dir);
    std::fs::write(
        p.join("rules/ue.toml"),
        r#"
[[rule]]
name = "enterprise"
when = ["request.ratType == 'NR'"]
[[rule.then]]
set = "decision.urspRules"
value = [{ precedence = 1, trafficDescriptor = { dnns = ["enterprise"], connectionCapabilities = ["INTERNET"] }, routeSelectionDescriptors = [{ precedence = 1, sscMode = 1, sNssai = { sst = 2, sd = "000001" }, dnn = "enterprise", pduSessionType = "IPV4", accessType = "3GPP_ACCESS" }] }]
[[rule]]
name = "roaming-default"
when = ["request.plmnId exists"]
[[rule.then]]
append = "decision.urspRules"
value = { precedence = 255, trafficDescriptor = { matchAll = true }, routeSelectionDescriptors = [{ precedence = 1, dnn = "internet" }] }
"#,
    )
    .unwrap();
    p
}

/// PolicyAssociationRequest as an AMF sends it for UE `n`, its callbacks at `amf`.
fn amf_request(n: u32, amf: &str) -> Value {
    json!({
        "notificationUri": format!("{amf}/namf-callback/v1/imsi-99970000000{n:04}/ue-policy-notify"),
        "supi": format!("imsi-99970000000{n:04}"),
        "accessType": "3GPP_ACCESS",
        "pei": "imeisv-4370816125816151",
        "userLoc": {"nrLocation": {
            "tai": {"plmnId": {"mcc": "999", "mnc": "70"}, "tac": "000001"},
            "ncgi": {"plmnId": {"mcc": "999", "mnc": "70"}, "nrCellId": "000000010"}}},
        "timeZone": "+00:00",
        "servingPlmn": {"mcc": "999", "mnc": "70"},
        "ratType": "NR",
        "guami": {"plmnId": {"mcc": "999", "mnc": "70"}, "amfId": "020040"},
        "suppFeat": "0"
    })
}

fn ue(pcf: &TestPcf, path: &str) -> String {
    format!("{}/npcf-ue-policy-control/v1/policies{path}", pcf.base)
}

async fn metric(pcf: &TestPcf, result: &str) -> u64 {
    let m = client().get(&format!("{}/metrics", pcf.base)).send().await.unwrap();
    let text = String::from_utf8_lossy(m.body()).to_string();
    let key = format!("pcf_ursp_deliveries_total{{result=\"{result}\"}} ");
    text.lines().find_map(|l| l.strip_prefix(&key)).map_or(0, |v| v.trim().parse().unwrap())
}

/// Waits until `pcf_ursp_deliveries_total{result}` reaches `n`.
async fn until(pcf: &TestPcf, result: &str, n: u64) {
    for _ in 0..100 {
        if metric(pcf, result).await >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("pcf_ursp_deliveries_total{{result={result:?}}} never reached {n}");
}

/// The next request the AMF saw, a transfer checked against TS 29.518: its SUPI, the
/// command's PTI and its URSP rules decoded.
async fn transfer(amf: &mut Amf, specs: &Specs) -> (String, u8, Option<Vec<Value>>) {
    let Seen::Transfer { supi, json, n1 } = amf.next().await else { panic!("not a transfer") };
    specs.assert_valid("TS29518_Namf_Communication", "N1N2MessageTransferReqData", &json);
    assert_eq!(json["n1MessageContainer"]["n1MessageClass"], "UPDP");
    assert!(json["n1n2FailureTxfNotifURI"].as_str().unwrap().contains("/npcf-callback/"), "{json}");
    let Message::Command { pti, plmn, upsc, ursp } = parse(&n1).unwrap() else { panic!("{n1:?}") };
    // The serving PLMN 999/70 (TS 24.008 digit order), the PCF's one URSP section.
    assert_eq!((plmn, upsc), ([0x99, 0xf9, 0x07], 1));
    (supi, pti, ursp.map(|b| pcf::ursp::decode(&b).unwrap()))
}

async fn start(d: &Path, project: &Path, amf: AmfConfig) -> TestPcf {
    let config = PcfConfig { policy: Some(project.to_path_buf()), amf, ..PcfConfig::default() };
    TestPcf::start_with(d, config).await
}

async fn a_ue_policy_association_delivers_its_ursp_from_create_to_delete() {
    let specs = ue_specs();
    let d = state_dir();
    let project = ue_project(&d.path().join("policy"));
    let mut amf = Amf::start(Ue::Complete).await;
    // No [pcf.amf] api_root and no NRF: the AMF is the notificationUri's authority.
    let pcf = start(d.path(), &project, AmfConfig::default()).await;
    let c = client();

    let r = c.post(&ue(&pcf, "")).json(&amf_request(1, &amf.root)).send().await.unwrap();
    let a = body(&r);
    assert_eq!(r.status().as_u16(), 201, "{a}");
    specs.assert_valid("TS29525_Npcf_UEPolicyControl", "PolicyAssociation", &a);
    assert_eq!(a, json!({"suppFeat": "0"}), "no URSP in the answer: it goes to the UE");
    let loc = r.header("location").unwrap().to_string();
    assert!(loc.starts_with(&ue(&pcf, "/")), "{loc}");

    // The PCF subscribes for the UE's UPDP answers, then transfers the command.
    let Seen::Subscribe { supi, body: sub } = amf.next().await else { panic!("no subscription") };
    assert_eq!(supi, "imsi-999700000000001");
    specs.assert_valid("TS29518_Namf_Communication", "UeN1N2InfoSubscriptionCreateData", &sub);
    assert_eq!(sub["n1MessageClass"], "UPDP");
    let (supi, pti, rules) = transfer(&mut amf, &specs).await;
    assert_eq!((supi.as_str(), pti), ("imsi-999700000000001", 1));
    let rules = rules.unwrap();
    assert_eq!(rules.len(), 1);
    assert_eq!(
        rules[0]["trafficDescriptor"],
        json!({"dnns": ["enterprise"], "connectionCapabilities": ["INTERNET"]})
    );
    assert_eq!(
        rules[0]["routeSelectionDescriptors"][0],
        json!({"precedence": 1, "sscMode": 1, "sNssais": [{"sst": 2, "sd": "000001"}],
            "dnns": ["enterprise"], "pduSessionType": "IPV4", "accessType": "3GPP_ACCESS"})
    );
    until(&pcf, "initiated", 1).await;
    until(&pcf, "complete", 1).await;

    let got = body(&c.get(&loc).send().await.unwrap());
    specs.assert_valid("TS29525_Npcf_UEPolicyControl", "PolicyAssociation", &got);
    assert_eq!(got["request"]["supi"], "imsi-999700000000001");

    // A PLMN change adds the match-all rule: a new command with the next PTI, both rules.
    let r = c
        .post(&format!("{loc}/update"))
        .json(&json!({"triggers": ["PLMN_CH"], "plmnId": {"mcc": "999", "mnc": "70"}}))
        .send()
        .await
        .unwrap();
    let u = body(&r);
    assert_eq!(r.status().as_u16(), 200, "{u}");
    specs.assert_valid("TS29525_Npcf_UEPolicyControl", "PolicyUpdate", &u);
    assert_eq!(u, json!({"resourceUri": loc}));
    let (_, pti, rules) = transfer(&mut amf, &specs).await;
    assert_eq!(pti, 2, "the subscription is made once per association");
    let rules = rules.unwrap();
    assert_eq!(rules[1]["trafficDescriptor"], json!({"matchAll": true}));
    assert_eq!(rules[1]["precedence"], 255);
    until(&pcf, "complete", 2).await;

    // Nothing changes in the URSP: nothing is sent.
    let r = c
        .post(&format!("{loc}/update"))
        .json(&json!({"triggers": ["LOC_CH"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(body(&r), json!({"resourceUri": loc}));
    amf.quiet().await;

    // A restart keeps the association and what was delivered: still nothing to send.
    pcf.stop().await;
    let pcf = start(d.path(), &project, AmfConfig::default()).await;
    let loc = loc.replace(&loc[..loc.find("/npcf").unwrap()], &pcf.base);
    assert_eq!(body(&c.get(&loc).send().await.unwrap())["request"]["plmnId"]["mcc"], "999");
    let r = c
        .post(&format!("{loc}/update"))
        .json(&json!({"triggers": ["LOC_CH"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    amf.quiet().await;

    // Delete ends it, and the N1 subscription at the AMF with it.
    assert_eq!(c.delete(&loc).send().await.unwrap().status().as_u16(), 204);
    let Seen::Unsubscribe { path } = amf.next().await else { panic!("no unsubscribe") };
    assert!(path.ends_with("/n1-n2-messages/subscriptions/1"), "{path}");
    problem(&specs, &c.get(&loc).send().await.unwrap(), 404, "RESOURCE_NOT_FOUND");
    problem(&specs, &c.delete(&loc).send().await.unwrap(), 404, "RESOURCE_NOT_FOUND");
    let r = c.post(&format!("{loc}/update")).json(&json!({})).send().await.unwrap();
    problem(&specs, &r, 404, "RESOURCE_NOT_FOUND");
    pcf.stop().await;
}

#[tokio::test]
async fn bad_requests_name_each_field_and_unknown_ids_are_404() {
    let specs = ue_specs();
    let d = tempfile::tempdir().unwrap();
    let project = ue_project(&d.path().join("policy"));
    let amf = Amf::start(Ue::Complete).await;
    let pcf = start(d.path(), &project, AmfConfig::default()).await;
    let c = client();

    let mut bad = amf_request(2, &amf.root);
    bad.as_object_mut().unwrap().remove("suppFeat");
    bad["supi"] = json!("imsi-12");
    bad["guami"]["amfId"] = json!("xyz");
    let r = c.post(&ue(&pcf, "")).json(&bad).send().await.unwrap();
    let v = problem(&specs, &r, 400, "MANDATORY_IE_MISSING");
    let params: Vec<&str> =
        v["invalidParams"].as_array().unwrap().iter().filter_map(|p| p["param"].as_str()).collect();
    assert_eq!(params, ["/supi", "/suppFeat", "/guami/amfId"]);

    let r = c.post(&ue(&pcf, "")).json(&amf_request(3, &amf.root)).send().await.unwrap();
    let loc = r.header("location").unwrap().to_string();
    let r = c
        .post(&format!("{loc}/update"))
        .json(&json!({"triggers": ["UE_POLICY", "RFSP_CH"], "uePolDelResult": "AQ==",
            "uePolTransFailNotif": {"cause": "UE_NOT_RESPONDING", "ptis": []}}))
        .send()
        .await
        .unwrap();
    let v = problem(&specs, &r, 400, "MANDATORY_IE_INCORRECT");
    let params: Vec<&str> =
        v["invalidParams"].as_array().unwrap().iter().filter_map(|p| p["param"].as_str()).collect();
    assert_eq!(params, ["/triggers/1", "/uePolDelResult", "/uePolTransFailNotif/ptis"]);

    let none = ue(&pcf, "/0190a000-0000-7000-8000-000000000000");
    problem(&specs, &c.get(&none).send().await.unwrap(), 404, "RESOURCE_NOT_FOUND");
    problem(&specs, &c.delete(&none).send().await.unwrap(), 404, "RESOURCE_NOT_FOUND");
    let r = c.post(&format!("{none}/update")).json(&json!({})).send().await.unwrap();
    problem(&specs, &r, 404, "RESOURCE_NOT_FOUND");
    let r = c
        .post(&format!("{}/npcf-callback/v1/ue-policy/nope/failure/1", pcf.base))
        .json(&json!({"cause": "UE_NOT_RESPONDING", "n1n2MsgDataUri": "http://amf/x"}))
        .send()
        .await
        .unwrap();
    problem(&specs, &r, 404, "RESOURCE_NOT_FOUND");
    pcf.stop().await;
}

#[tokio::test]
async fn rejects_and_transfer_failures_are_recorded_and_a_down_amf_fails_no_create() {
    let specs = ue_specs();
    let d = tempfile::tempdir().unwrap();
    let project = ue_project(&d.path().join("policy"));
    let mut amf = Amf::start(Ue::Reject).await;
    let pcf = start(d.path(), &project, AmfConfig::default()).await;
    let c = client();

    // The UE rejects the command.
    let r = c.post(&ue(&pcf, "")).json(&amf_request(4, &amf.root)).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 201);
    assert!(matches!(amf.next().await, Seen::Subscribe { .. }));
    transfer(&mut amf, &specs).await;
    until(&pcf, "rejected", 1).await;

    // The AMF cannot reach the UE: its failure notification is counted, and the next update
    // sends the same URSP again (it never arrived).
    *amf.ue.lock().unwrap() = Ue::Unreachable;
    let r = c.post(&ue(&pcf, "")).json(&amf_request(5, &amf.root)).send().await.unwrap();
    let loc = r.header("location").unwrap().to_string();
    assert!(matches!(amf.next().await, Seen::Subscribe { .. }));
    let (_, pti, _) = transfer(&mut amf, &specs).await;
    until(&pcf, "transfer_failed", 1).await;
    *amf.ue.lock().unwrap() = Ue::Silent;
    c.post(&format!("{loc}/update")).json(&json!({"triggers": ["LOC_CH"]})).send().await.unwrap();
    let (_, again, _) = transfer(&mut amf, &specs).await;
    assert_eq!(again, pti + 1);
    // The AMF relays the UE's COMPLETE in an update (TS 29.525 uePolDelResult).
    let complete = base64::engine::general_purpose::STANDARD.encode([again, 0x02]);
    let r = c
        .post(&format!("{loc}/update"))
        .json(&json!({"triggers": ["UE_POLICY"], "uePolDelResult": complete}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{}", body(&r));
    until(&pcf, "complete", 1).await;
    amf.quiet().await;
    pcf.stop().await;

    // An AMF that takes the connection and never answers: the create is answered at once all
    // the same (waiting for the AMF would take its 2 s timeout), the delivery counted after.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_root = format!("http://{}", silent.local_addr().unwrap());
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((tcp, _)) = silent.accept().await {
            open.push(tcp);
        }
    });
    let down = PcfConfig {
        policy: Some(project.clone()),
        amf: AmfConfig { api_root: Some(silent_root), timeout_ms: 2000, n1_subscribe: false },
        ..PcfConfig::default()
    };
    let d2 = tempfile::tempdir().unwrap();
    let pcf = TestPcf::start_with(d2.path(), down).await;
    let t = std::time::Instant::now();
    let r = c.post(&ue(&pcf, "")).json(&amf_request(6, &amf.root)).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 201);
    assert!(t.elapsed() < Duration::from_millis(1500), "{:?}", t.elapsed());
    assert_eq!(metric(&pcf, "unreachable").await, 0);
    until(&pcf, "unreachable", 1).await;
    // The configured AMF is the one asked, not the notificationUri's.
    amf.quiet().await;
    pcf.stop().await;
    held.abort();
}

#[tokio::test]
async fn the_amf_is_found_through_the_nrf_by_the_guami() {
    let specs = ue_specs();
    let d = tempfile::tempdir().unwrap();
    let project = ue_project(&d.path().join("policy"));
    let nrf = common::peers::start_nrf(d.path()).await;
    let mut amf = Amf::start(Ue::Complete).await;
    // The AMF's profile, serving the request's GUAMI (TS 29.510 AmfInfo.guamiList).
    let port: u16 = amf.root.rsplit(':').next().unwrap().parse().unwrap();
    let id = "5f0c6a2e-1b7d-4c3e-9a51-3d2f8e6b7a10";
    let profile = json!({
        "nfInstanceId": id, "nfType": "AMF", "nfStatus": "REGISTERED",
        "ipv4Addresses": ["127.0.0.1"],
        "amfInfo": {"amfSetId": "001", "amfRegionId": "02",
            "guamiList": [{"plmnId": {"mcc": "999", "mnc": "70"}, "amfId": "020040"}]},
        "nfServices": [{"serviceInstanceId": "namf-comm-1", "serviceName": "namf-comm",
            "versions": [{"apiVersionInUri": "v1", "apiFullVersion": "1.2.0"}],
            "scheme": "http", "nfServiceStatus": "REGISTERED",
            "ipEndPoints": [{"ipv4Address": "127.0.0.1", "port": port}]}]
    });
    let c = client();
    let r = c
        .put(&format!("{}/nnrf-nfm/v1/nf-instances/{id}", nrf.base))
        .json(&profile)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201, "{}", String::from_utf8_lossy(r.body()));
    let config = PcfConfig {
        policy: Some(project.clone()),
        nrf: Some(common::peers::nrf_client_config(&nrf.base)),
        // No UDR here: the decision is the rules' alone.
        udr: pcf::config::UdrConfig { enabled: false, ..Default::default() },
        ..PcfConfig::default()
    };
    let pcf = TestPcf::start_with(d.path(), config).await;
    // The notificationUri names no AMF that answers: the discovered one gets the URSP.
    let r = c.post(&ue(&pcf, "")).json(&amf_request(7, "http://127.0.0.1:9")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 201, "{}", body(&r));
    assert!(matches!(amf.next().await, Seen::Subscribe { .. }));
    let (supi, pti, _) = transfer(&mut amf, &specs).await;
    assert_eq!((supi.as_str(), pti), ("imsi-999700000000007", 1));
    until(&pcf, "complete", 1).await;
    pcf.stop().await;
    nrf.stop().await;
}

testkit::on_both_backends!(a_ue_policy_association_delivers_its_ursp_from_create_to_delete,);
