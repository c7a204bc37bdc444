//! Npcf_AMPolicyControl over a real socket, with the request an AMF sends; answers checked
//! against the Rel-17 schemas.

mod common;

use common::*;
use serde_json::{json, Value};
use testkit::specs::Specs;

fn am_specs() -> Specs {
    Specs::load(&[
        "TS29507_Npcf_AMPolicyControl",
        "TS29571_CommonData",
        "TS29534_Npcf_AMPolicyAuthorization",
    ])
}

/// PolicyAssociationRequest as Open5GS v2.8's AMF builds it (amf/npcf-build.c), for UE `n`.
fn amf_request(n: u32) -> Value {
    json!({
        "notificationUri": format!("http://127.0.0.5:7777/namf-callback/v1/imsi-99970000000{n:04}/am-policy-notify"),
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
        "rfsp": 7,
        "suppFeat": "4000000"
    })
}

fn am(pcf: &TestPcf, path: &str) -> String {
    format!("{}/npcf-am-policy-control/v1/policies{path}", pcf.base)
}

async fn an_am_policy_association_from_create_to_delete() {
    let specs = am_specs();
    let d = state_dir();
    let project = default_project(&d.path().join("policy"));
    let pcf = TestPcf::start(d.path(), &project).await;
    let c = client();

    let r = c.post(&am(&pcf, "")).json(&amf_request(1)).send().await.unwrap();
    let a = body(&r);
    assert_eq!(r.status().as_u16(), 201, "{a}");
    specs.assert_valid("TS29507_Npcf_AMPolicyControl", "PolicyAssociation", &a);
    assert_eq!((a["rfsp"].as_u64(), a["suppFeat"].as_str()), (Some(7), Some("0")));
    let loc = r.header("location").unwrap().to_string();
    assert!(loc.starts_with(&am(&pcf, "/")), "{loc}");

    let got = body(&c.get(&loc).send().await.unwrap());
    specs.assert_valid("TS29507_Npcf_AMPolicyControl", "PolicyAssociation", &got);
    assert_eq!(got["request"]["supi"], "imsi-999700000000001");

    // The AMF reports a new subscribed RFSP: the PolicyUpdate holds it and the resource.
    let r = c
        .post(&format!("{loc}/update"))
        .json(&json!({"triggers": ["RFSP_CH"], "rfsp": 9}))
        .send()
        .await
        .unwrap();
    let u = body(&r);
    assert_eq!(r.status().as_u16(), 200, "{u}");
    specs.assert_valid("TS29507_Npcf_AMPolicyControl", "PolicyUpdate", &u);
    assert_eq!(u, json!({"resourceUri": loc, "rfsp": 9}));
    // Nothing changes: only the resource.
    let r = c
        .post(&format!("{loc}/update"))
        .json(&json!({"triggers": ["LOC_CH"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(body(&r), json!({"resourceUri": loc}));

    // Bad input: each field named.
    let r = c
        .post(&format!("{loc}/update"))
        .json(&json!({"triggers": ["NOPE"], "rfsp": 0}))
        .send()
        .await
        .unwrap();
    let v = problem(&specs, &r, 400, "MANDATORY_IE_INCORRECT");
    let params: Vec<&str> =
        v["invalidParams"].as_array().unwrap().iter().filter_map(|p| p["param"].as_str()).collect();
    assert_eq!(params, ["/triggers/0", "/rfsp"]);
    let mut bad = amf_request(2);
    bad.as_object_mut().unwrap().remove("suppFeat");
    bad["supi"] = json!("imsi-12");
    let r = c.post(&am(&pcf, "")).json(&bad).send().await.unwrap();
    let v = problem(&specs, &r, 400, "MANDATORY_IE_MISSING");
    let params: Vec<&str> =
        v["invalidParams"].as_array().unwrap().iter().filter_map(|p| p["param"].as_str()).collect();
    assert_eq!(params, ["/supi", "/suppFeat"]);

    // Restart keeps it; delete ends it.
    pcf.stop().await;
    let pcf = TestPcf::start(d.path(), &project).await;
    let loc = loc.replace(&loc[..loc.find("/npcf").unwrap()], &pcf.base);
    assert_eq!(body(&c.get(&loc).send().await.unwrap())["rfsp"], 9);
    assert_eq!(c.delete(&loc).send().await.unwrap().status().as_u16(), 204);
    problem(&specs, &c.get(&loc).send().await.unwrap(), 404, "RESOURCE_NOT_FOUND");
    problem(&specs, &c.delete(&loc).send().await.unwrap(), 404, "RESOURCE_NOT_FOUND");
    let r = c.post(&format!("{loc}/update")).json(&json!({})).send().await.unwrap();
    problem(&specs, &r, 404, "RESOURCE_NOT_FOUND");
    pcf.stop().await;
}

testkit::on_both_backends!(an_am_policy_association_from_create_to_delete,);
