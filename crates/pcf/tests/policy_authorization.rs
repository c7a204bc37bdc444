//! Npcf_PolicyAuthorization (N5) over real sockets: an AF's voice call (audio + video) bound to
//! an SM policy association by the UE's address, its PCC rules in the SMF's UpdateNotify, the
//! SMF's reports turned into events to the AF, PATCH, the events subscription, delete, a
//! restart that keeps the session and its rules, and the SM association's end terminating it.
//! Every message the SMF and the AF get, and every answer, is checked against Rel-17 schemas.

mod common;

use common::{body, client, default_project, open5gs_context, state_dir, TestPcf};
use serde_json::{json, Value};
use testkit::sink::Sink;
use testkit::specs::Specs;

fn specs() -> Specs {
    Specs::load(&[
        "TS29514_Npcf_PolicyAuthorization",
        "TS29512_Npcf_SMPolicyControl",
        "TS29571_CommonData",
        "TS29122_CommonData",
    ])
}

const PA: &str = "TS29514_Npcf_PolicyAuthorization";
const SM: &str = "TS29512_Npcf_SMPolicyControl";

fn problem(specs: &Specs, r: &sbi::client::SbiResponse, status: u16, cause: &str) -> Value {
    let v = body(r);
    assert_eq!(r.status().as_u16(), status, "{v}");
    assert_eq!(v["cause"], cause, "{v}");
    specs.assert_valid("TS29571_CommonData", "ProblemDetails", &v);
    v
}

fn params(v: &Value) -> Vec<String> {
    v["invalidParams"]
        .as_array()
        .map(|l| l.iter().map(|p| p["param"].as_str().unwrap_or("").to_string()).collect())
        .unwrap_or_default()
}

/// A P-CSCF's voice call with video: AppSessionContext as TS 29.514 Annex shows it.
fn voice_call(ue: &str, af: &str) -> Value {
    json!({"ascReqData": {
        "afAppId": "ims-voice",
        "notifUri": af,
        "suppFeat": "0",
        "ueIpv4": ue,
        "dnn": "ims",
        "sliceInfo": {"sst": 1},
        "medComponents": {
            "1": {"medCompN": 1, "medType": "AUDIO", "marBwUl": "41 Kbps", "marBwDl": "41 Kbps",
                  "codecs": ["downlink\noffer\nm=audio 49152 RTP/AVP 116\r\n"],
                  "medSubComps": {
                      "1": {"fNum": 1, "fDescs": [
                          format!("permit out 17 from 198.51.100.10 50000 to {ue} 49152"),
                          format!("permit out 17 from {ue} 49152 to 198.51.100.10 50000")]},
                      "2": {"fNum": 2, "flowUsage": "RTCP", "fDescs": [
                          format!("permit out 17 from 198.51.100.10 50001 to {ue} 49153")]}}},
            "2": {"medCompN": 2, "medType": "VIDEO", "marBwUl": "2 Mbps", "marBwDl": "2 Mbps",
                  "mirBwDl": "512 Kbps",
                  "medSubComps": {"1": {"fNum": 1, "fDescs": [
                      format!("permit out 17 from 198.51.100.10 50002 to {ue} 49154")]}}}
        },
        "evSubsc": {"events": [
            {"event": "SUCCESSFUL_RESOURCES_ALLOCATION", "notifMethod": "EVENT_DETECTION"},
            {"event": "FAILED_RESOURCES_ALLOCATION", "notifMethod": "EVENT_DETECTION"},
            {"event": "ACCESS_TYPE_CHANGE", "notifMethod": "EVENT_DETECTION"}
        ]}
    }})
}

/// The SM context of an IMS PDU session of UE `n`, notifying `smf`.
fn ims_session(n: u32, smf: &str) -> Value {
    let mut ctx = open5gs_context(n);
    ctx["dnn"] = json!("ims");
    ctx["notificationUri"] = json!(smf);
    ctx
}

async fn sm_update_notify(specs: &Specs, smf: &mut Sink) -> Value {
    let n = smf.next().await;
    specs.assert_valid(SM, "SmPolicyNotification", &n);
    n["smPolicyDecision"].clone()
}

async fn an_af_voice_call_from_create_to_termination() {
    let specs = specs();
    let d = state_dir();
    let project = default_project(&d.path().join("policy"));
    let pcf = TestPcf::start(d.path(), &project).await;
    let c = client();
    let mut smf = Sink::start().await;
    let mut af = Sink::start().await;
    let apps = format!("{}/npcf-policyauthorization/v1/app-sessions", pcf.base);

    // No PDU session has the address yet: TS 29.514's PDU_SESSION_NOT_AVAILABLE.
    let r = c.post(&apps).json(&voice_call("10.45.0.1", &af.url)).send().await.unwrap();
    problem(&specs, &r, 500, "PDU_SESSION_NOT_AVAILABLE");

    let r = c.post(&pcf.sm("")).json(&ims_session(1, &smf.url)).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let sm_loc = r.header("location").unwrap().to_string();
    assert!(body(&r).get("pccRules").is_none());

    // The same address on another DNN does not bind.
    let mut call = voice_call("10.45.0.1", &af.url);
    call["ascReqData"]["dnn"] = json!("internet");
    let r = c.post(&apps).json(&call).send().await.unwrap();
    problem(&specs, &r, 500, "PDU_SESSION_NOT_AVAILABLE");

    // The call: 201, its URI, and the SMF gets the PCC rules of both media.
    let r = c.post(&apps).json(&voice_call("10.45.0.1", &af.url)).send().await.unwrap();
    let created = body(&r);
    assert_eq!(r.status(), 201, "{created}");
    specs.assert_valid(PA, "AppSessionContext", &created);
    assert_eq!(created["ascRespData"]["suppFeat"], "0");
    let loc = r.header("location").unwrap().to_string();
    assert!(loc.starts_with(&apps), "{loc}");
    let id = loc.rsplit('/').next().unwrap().to_string();
    let (audio, video) = (format!("af-{id}-1"), format!("af-{id}-2"));
    let n = sm_update_notify(&specs, &mut smf).await;
    let rule = &n["pccRules"][&audio];
    assert_eq!(rule["refQosData"], json!([audio]));
    assert_eq!(rule["flowInfos"].as_array().unwrap().len(), 3, "{rule}");
    assert_eq!(rule["flowInfos"][0]["flowDirection"], "DOWNLINK");
    assert_eq!(rule["flowInfos"][1]["flowDirection"], "UPLINK");
    // The default project: AUDIO 5QI 1, VIDEO 5QI 2; GBR from the requested bandwidth.
    assert_eq!(n["qosDecs"][&audio]["5qi"], 1);
    assert_eq!(n["qosDecs"][&audio]["arp"]["priorityLevel"], 2);
    assert_eq!(n["qosDecs"][&audio]["maxbrDl"], "41 Kbps");
    assert_eq!(n["qosDecs"][&audio]["gbrUl"], "41 Kbps");
    assert_eq!(n["qosDecs"][&video]["5qi"], 2);
    assert_eq!(n["qosDecs"][&video]["gbrDl"], "512 Kbps");
    assert!(n["policyCtrlReqTriggers"].as_array().unwrap().contains(&json!("SUCC_RES_ALLO")));
    assert_eq!(n["lastReqRuleData"][0]["reqData"], json!(["SUCC_RES_ALLO"]));
    assert!(n.get("sessRules").is_none(), "only what changed: {n}");

    let r = c.get(&loc).send().await.unwrap();
    assert_eq!(r.status(), 200);
    specs.assert_valid(PA, "AppSessionContext", &body(&r));
    assert_eq!(body(&r)["ascReqData"], created["ascReqData"]);

    // The SMF reports the audio installed, the video not: one event each to the AF.
    let report = json!({
        "repPolicyCtrlReqTriggers": ["SUCC_RES_ALLO"],
        "ruleReports": [
            {"pccRuleIds": [audio], "ruleStatus": "ACTIVE"},
            {"pccRuleIds": [video], "ruleStatus": "INACTIVE", "failureCode": "RES_ALLO_FAIL"}
        ]
    });
    let r = c.post(&format!("{sm_loc}/update")).json(&report).send().await.unwrap();
    let delta = body(&r);
    assert_eq!(r.status(), 200, "{delta}");
    assert!(delta.get("pccRules").is_none(), "the AF's rules stay: {delta}");
    let ev = af.next().await;
    specs.assert_valid(PA, "EventsNotification", &ev);
    assert_eq!(ev["evSubsUri"], format!("{loc}/events-subscription"));
    let events: Vec<&str> =
        ev["evNotifs"].as_array().unwrap().iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(events, ["SUCCESSFUL_RESOURCES_ALLOCATION", "FAILED_RESOURCES_ALLOCATION"]);
    assert_eq!(ev["succResourcAllocReports"][0]["flows"], json!([{"medCompN": 1}]));
    assert_eq!(ev["failedResourcAllocReports"][0]["flows"], json!([{"medCompN": 2}]));

    // A RAT change reaches the AF as ACCESS_TYPE_CHANGE.
    let rat = json!({"repPolicyCtrlReqTriggers": ["RAT_TY_CH"], "ratType": "EUTRA"});
    let r = c.post(&format!("{sm_loc}/update")).json(&rat).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let ev = af.next().await;
    specs.assert_valid(PA, "EventsNotification", &ev);
    assert_eq!(ev["evNotifs"][0]["event"], "ACCESS_TYPE_CHANGE");
    assert_eq!(
        (ev["ratType"].clone(), ev["accessType"].clone()),
        (json!("EUTRA"), json!("3GPP_ACCESS"))
    );

    // PATCH drops the video: its rule and QoS leave the SM decision.
    let patch = json!({"ascReqData": {"medComponents": {"2": null}}});
    let r = c
        .patch(&loc)
        .header("content-type", "application/merge-patch+json")
        .body(serde_json::to_vec(&patch).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", body(&r));
    specs.assert_valid(PA, "AppSessionContext", &body(&r));
    assert!(body(&r)["ascReqData"]["medComponents"].get("2").is_none());
    let n = sm_update_notify(&specs, &mut smf).await;
    assert_eq!(n["pccRules"], json!({video.clone(): null}), "{n}");
    assert_eq!(n["qosDecs"], json!({video.clone(): null}), "{n}");

    // The events subscription: replaced (200), removed (204), then no event reaches the AF.
    let es = format!("{loc}/events-subscription");
    let sub = json!({"events": [{"event": "ACCESS_TYPE_CHANGE"}], "notifUri": af.url});
    let r = c.put(&es).json(&sub).send().await.unwrap();
    assert_eq!(r.status(), 200, "{}", body(&r));
    specs.assert_valid(PA, "EventsSubscPutData", &body(&r));
    assert_eq!(c.delete(&es).send().await.unwrap().status(), 204);
    let r = c.post(&format!("{sm_loc}/update")).json(&rat).send().await.unwrap();
    assert_eq!(r.status(), 200);
    af.quiet().await;
    let r = c.put(&es).json(&sub).send().await.unwrap();
    assert_eq!(r.status(), 201, "a new subscription");
    assert_eq!(r.header("location"), Some(es.as_str()));

    // A restart keeps the application session, and the SM decision keeps its rule through the
    // SMF's next update.
    pcf.stop().await;
    let pcf = TestPcf::start(d.path(), &project).await;
    let loc = loc.replace(&apps, &format!("{}/npcf-policyauthorization/v1/app-sessions", pcf.base));
    let sm_loc = sm_loc.replace(&sm_loc[..sm_loc.find("/npcf-").unwrap()], &pcf.base);
    let r = c.get(&loc).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let r = c
        .post(&format!("{sm_loc}/update"))
        .json(&json!({"repPolicyCtrlReqTriggers": ["UE_IP_CH"], "ueTimeZone": "+01:00"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", body(&r));
    let policy = body(&c.get(&sm_loc).send().await.unwrap())["policy"].clone();
    specs.assert_valid(SM, "SmPolicyDecision", &policy);
    assert!(policy["pccRules"].get(&audio).is_some(), "{policy}");
    assert!(policy["pccRules"].get(&video).is_none(), "{policy}");

    // Delete asking for the access type: 200 with it; the rule leaves the SM decision.
    let r = c
        .post(&format!("{loc}/delete"))
        .json(&json!({"events": [{"event": "ACCESS_TYPE_CHANGE"}]}))
        .send()
        .await
        .unwrap();
    let gone = body(&r);
    assert_eq!(r.status(), 200, "{gone}");
    specs.assert_valid(PA, "AppSessionContext", &gone);
    assert_eq!(gone["evsNotif"]["evNotifs"][0]["event"], "ACCESS_TYPE_CHANGE");
    let n = sm_update_notify(&specs, &mut smf).await;
    assert_eq!(n["pccRules"], json!({audio.clone(): null}), "{n}");
    assert!(n["policyCtrlReqTriggers"]
        .as_array()
        .is_none_or(|t| !t.contains(&json!("SUCC_RES_ALLO"))));
    for r in [
        c.get(&loc).send().await.unwrap(),
        c.post(&format!("{loc}/delete")).send().await.unwrap(),
        c.put(
            &es.replace(&apps, &format!("{}/npcf-policyauthorization/v1/app-sessions", pcf.base)),
        )
        .json(&sub)
        .send()
        .await
        .unwrap(),
    ] {
        problem(&specs, &r, 404, "APPLICATION_SESSION_CONTEXT_NOT_FOUND");
    }

    // A second call; the PDU session ends: the AF is told and the session is gone.
    let r = c
        .post(&format!("{}/npcf-policyauthorization/v1/app-sessions", pcf.base))
        .json(&voice_call("10.45.0.1", &af.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let loc2 = r.header("location").unwrap().to_string();
    sm_update_notify(&specs, &mut smf).await;
    assert_eq!(c.post(&format!("{sm_loc}/delete")).send().await.unwrap().status(), 204);
    let t = af.next().await;
    specs.assert_valid(PA, "TerminationInfo", &t);
    assert_eq!(t["termCause"], "PDU_SESSION_TERMINATION");
    assert_eq!(t["resUri"], loc2);
    problem(
        &specs,
        &c.get(&loc2).send().await.unwrap(),
        404,
        "APPLICATION_SESSION_CONTEXT_NOT_FOUND",
    );
    let m = String::from_utf8(
        c.get(&format!("{}/metrics", pcf.base)).send().await.unwrap().body().to_vec(),
    )
    .unwrap();
    assert!(m.contains("pcf_app_sessions_total{operation=\"terminate\"} 1"), "{m}");
    assert!(m.contains("pcf_af_notifications_total{kind=\"terminate\",result=\"ok\"} 1"), "{m}");
    pcf.stop().await;
}

#[tokio::test]
async fn bad_app_session_requests_name_each_field() {
    let specs = specs();
    let d = tempfile::tempdir().unwrap();
    let pcf = TestPcf::start(d.path(), &default_project(&d.path().join("policy"))).await;
    let c = client();
    let apps = format!("{}/npcf-policyauthorization/v1/app-sessions", pcf.base);
    let mut smf = Sink::start().await;
    let r = c.post(&pcf.sm("")).json(&ims_session(2, &smf.url)).send().await.unwrap();
    assert_eq!(r.status(), 201);

    let mut call = voice_call("10.45.0.2", "http://af.example/n5");
    let o = call["ascReqData"].as_object_mut().unwrap();
    o.remove("notifUri");
    o.remove("suppFeat");
    call["ascReqData"]["medComponents"]["1"]["medType"] = json!("SMELL");
    call["ascReqData"]["medComponents"]["2"]["marBwDl"] = json!("fast");
    call["ascReqData"]["medComponents"]["2"]["medSubComps"]["1"]["fDescs"] = json!(["deny all"]);
    call["ascReqData"]["evSubsc"]["events"][0]["event"] = json!("NOT_AN_EVENT");
    let r = c.post(&apps).json(&call).send().await.unwrap();
    let v = problem(&specs, &r, 400, "MANDATORY_IE_MISSING");
    let mut got = params(&v);
    got.sort();
    assert_eq!(
        got,
        [
            "/ascReqData/evSubsc/events/0/event",
            "/ascReqData/medComponents/1/medType",
            "/ascReqData/medComponents/2/marBwDl",
            "/ascReqData/medComponents/2/medSubComps/1/fDescs/0",
            "/ascReqData/notifUri",
            "/ascReqData/suppFeat",
        ]
    );
    let r = c
        .post(&apps)
        .json(&json!({"ascReqData": {"notifUri": "http://af/n5", "suppFeat": "0"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(params(&problem(&specs, &r, 400, "MANDATORY_IE_MISSING")), ["/ascReqData/ueIpv4"]);

    // A media type the project gives no QoS: not authorized.
    let mut call = voice_call("10.45.0.2", "http://af.example/n5");
    call["ascReqData"]["medComponents"]["1"]["medType"] = json!("TEXT");
    let r = c.post(&apps).json(&call).send().await.unwrap();
    problem(&specs, &r, 403, "REQUESTED_SERVICE_NOT_AUTHORIZED");
    smf.quiet().await;

    // A PATCH may not move the session to another UE, and is a merge patch.
    let r =
        c.post(&apps).json(&voice_call("10.45.0.2", "http://af.example/n5")).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let loc = r.header("location").unwrap().to_string();
    let r = c
        .patch(&loc)
        .header("content-type", "application/merge-patch+json")
        .body(serde_json::to_vec(&json!({"ascReqData": {"ueIpv4": "10.45.0.3"}})).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(params(&problem(&specs, &r, 400, "MANDATORY_IE_INCORRECT")), ["/ascReqData/ueIpv4"]);
    let r = c
        .patch(&format!("{apps}/nope"))
        .header("content-type", "application/merge-patch+json")
        .body(b"{}".to_vec())
        .send()
        .await
        .unwrap();
    problem(&specs, &r, 404, "APPLICATION_SESSION_CONTEXT_NOT_FOUND");
    pcf.stop().await;
}

/// An AF finds the PCF through the NRF by the N5 service.
#[tokio::test]
async fn the_nrf_profile_advertises_npcf_policyauthorization() {
    let d = tempfile::tempdir().unwrap();
    let nrf = common::peers::start_nrf(d.path()).await;
    let config = pcf::PcfConfig {
        policy: Some(default_project(&d.path().join("policy"))),
        nrf: Some(common::peers::nrf_client_config(&nrf.base)),
        ..pcf::PcfConfig::default()
    };
    let pcf = TestPcf::start_with(d.path(), config).await;
    let c = client();
    let url = format!(
        "{}/nnrf-disc/v1/nf-instances?target-nf-type=PCF&requester-nf-type=AF&service-names=npcf-policyauthorization",
        nrf.base
    );
    let mut found = Value::Null;
    for _ in 0..200 {
        let r = c.get(&url).send().await.unwrap();
        found = body(&r);
        if found["nfInstances"].as_array().is_some_and(|l| !l.is_empty()) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let services = &found["nfInstances"][0]["nfServices"];
    let n5 = services
        .as_array()
        .and_then(|l| l.iter().find(|s| s["serviceName"] == "npcf-policyauthorization"))
        .unwrap_or_else(|| panic!("no N5 service in {found}"));
    assert_eq!(n5["versions"][0]["apiVersionInUri"], "v1");
    assert_eq!(n5["versions"][0]["apiFullVersion"], "1.2.3");
    pcf.stop().await;
    nrf.stop().await;
}

testkit::on_both_backends!(an_af_voice_call_from_create_to_termination,);
