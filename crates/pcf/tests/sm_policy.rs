//! Npcf_SMPolicyControl over a real socket (h2c), with the contexts an SMF sends, answers
//! checked against the Rel-17 schemas; and the policy admin endpoint: the version in force in
//! the answers and the metrics, a new version deployed, a broken one refused.

mod common;

use std::path::Path;

use common::*;
use pcf::PcfConfig;
use serde_json::json;

async fn an_sm_policy_association_lives_through_create_get_update_delete_and_a_restart() {
    let specs = specs();
    let d = state_dir();
    let project = default_project(&d.path().join("policy"));
    let pcf = TestPcf::start(d.path(), &project).await;
    let c = client();

    // Create: 201, Location, a decision from the project with the subscribed QoS and AMBR.
    let r = c.post(&pcf.sm("")).json(&open5gs_context(1)).send().await.unwrap();
    let decision = body(&r);
    assert_eq!(r.status().as_u16(), 201, "{decision}");
    let loc = r.header("location").expect("Location").to_string();
    assert!(loc.starts_with(&pcf.sm("/")), "{loc}");
    specs.assert_valid("TS29512_Npcf_SMPolicyControl", "SmPolicyDecision", &decision);
    assert_eq!(
        decision["sessRules"]["s1"]["authSessAmbr"],
        json!({"uplink": "1 Gbps", "downlink": "2 Gbps"})
    );
    assert_eq!(decision["sessRules"]["s1"]["authDefQos"]["5qi"], 9);
    assert_eq!(
        decision["policyCtrlReqTriggers"],
        json!(["PLMN_CH", "RES_MO_RE", "AC_TY_CH", "UE_IP_CH"])
    );
    assert_eq!(decision["suppFeat"], "0");

    // Get: the context as sent and the decision in force.
    let r = c.get(&loc).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let got = body(&r);
    specs.assert_valid("TS29512_Npcf_SMPolicyControl", "SmPolicyControl", &got);
    assert_eq!(got["policy"], decision);
    assert_eq!(got["context"]["supi"], "imsi-999700000000001");

    // Update with a trigger that changes nothing the project reads: an empty delta.
    let r = c
        .post(&format!("{loc}/update"))
        .json(&json!({"repPolicyCtrlReqTriggers": ["RAT_TY_CH"], "ratType": "EUTRA"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{}", body(&r));
    specs.assert_valid("TS29512_Npcf_SMPolicyControl", "SmPolicyDecision", &body(&r));
    assert_eq!(body(&r), json!({}));
    // The subscribed AMBR changes: the session rule is answered again, the rest is not.
    let r = c
        .post(&format!("{loc}/update"))
        .json(&json!({"repPolicyCtrlReqTriggers": ["SE_AMBR_CH"],
            "subsSessAmbr": {"uplink": "500 Mbps", "downlink": "1 Gbps"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let delta = body(&r);
    specs.assert_valid("TS29512_Npcf_SMPolicyControl", "SmPolicyDecision", &delta);
    assert_eq!(
        delta["sessRules"]["s1"]["authSessAmbr"],
        json!({"uplink": "500 Mbps", "downlink": "1 Gbps"})
    );
    assert!(delta.get("policyCtrlReqTriggers").is_none(), "{delta}");
    let got = body(&c.get(&loc).send().await.unwrap());
    assert_eq!(got["context"]["ratType"], "EUTRA");
    assert_eq!(got["policy"]["sessRules"]["s1"]["authSessAmbr"]["uplink"], "500 Mbps");

    // Restart: the association is in the store.
    pcf.stop().await;
    let pcf = TestPcf::start(d.path(), &project).await;
    let loc = loc.replace(&loc[..loc.find("/npcf").unwrap()], &pcf.base);
    let r = c.get(&loc).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200, "{}", body(&r));
    assert_eq!(body(&r)["policy"]["sessRules"]["s1"]["authSessAmbr"]["uplink"], "500 Mbps");

    // Delete: 204, then the association is gone for every operation.
    let r = c.post(&format!("{loc}/delete")).json(&json!({})).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 204);
    problem(&specs, &c.get(&loc).send().await.unwrap(), 404, "RESOURCE_NOT_FOUND");
    let r = c.post(&format!("{loc}/delete")).send().await.unwrap();
    problem(&specs, &r, 404, "RESOURCE_NOT_FOUND");
    let r = c.post(&format!("{loc}/update")).json(&json!({})).send().await.unwrap();
    problem(&specs, &r, 404, "RESOURCE_NOT_FOUND");
    pcf.stop().await;
}

#[tokio::test]
async fn bad_contexts_and_triggers_are_answered_400_naming_each_field() {
    let specs = specs();
    let d = tempfile::tempdir().unwrap();
    let project = default_project(&d.path().join("policy"));
    let pcf = TestPcf::start(d.path(), &project).await;
    let c = client();

    let mut ctx = open5gs_context(2);
    ctx.as_object_mut().unwrap().remove("supi");
    ctx["sliceInfo"] = json!({"sst": 1, "sd": "12345"});
    let r = c.post(&pcf.sm("")).json(&ctx).send().await.unwrap();
    let v = problem(&specs, &r, 400, "MANDATORY_IE_MISSING");
    let params: Vec<&str> =
        v["invalidParams"].as_array().unwrap().iter().filter_map(|p| p["param"].as_str()).collect();
    assert_eq!(params, ["/supi", "/sliceInfo/sd"]);

    let mut ctx = open5gs_context(3);
    ctx["subsSessAmbr"]["uplink"] = json!("fast");
    ctx["notificationUri"] = json!("not a uri");
    let r = c.post(&pcf.sm("")).json(&ctx).send().await.unwrap();
    let v = problem(&specs, &r, 400, "MANDATORY_IE_INCORRECT");
    assert_eq!(v["invalidParams"].as_array().unwrap().len(), 2, "{v}");

    // Not JSON at all.
    let r = c
        .post(&pcf.sm(""))
        .header("content-type", "application/json")
        .body(b"{".to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);

    let r = c.post(&pcf.sm("")).json(&open5gs_context(4)).send().await.unwrap();
    let loc = r.header("location").unwrap().to_string();
    let r = c
        .post(&format!("{loc}/update"))
        .json(&json!({"repPolicyCtrlReqTriggers": ["UE_IP_CH", "NOT_A_TRIGGER"], "ipv4Address": "10.0.0.300"}))
        .send()
        .await
        .unwrap();
    let v = problem(&specs, &r, 400, "MANDATORY_IE_INCORRECT");
    let params: Vec<&str> =
        v["invalidParams"].as_array().unwrap().iter().filter_map(|p| p["param"].as_str()).collect();
    assert_eq!(params, ["/repPolicyCtrlReqTriggers/1", "/ipv4Address"]);
    // Nothing of the refused update was kept.
    let got = body(&c.get(&loc).send().await.unwrap());
    assert_eq!(got["context"]["ipv4Address"], "10.45.0.4");
    pcf.stop().await;
}

/// The default project as version `version`, its default uplink `ul`, and a rule that arms
/// the usage report trigger for a subscriber whose state says it had a session before.
fn version(dir: &Path, version: &str, ul: &str) {
    let p = dir.join("project.toml");
    let text = std::fs::read_to_string(&p).unwrap();
    let text = text
        .replace("version = \"1.0.0\"", &format!("version = \"{version}\""))
        .replace("defaultUl = \"100 Mbps\"", &format!("defaultUl = \"{ul}\""));
    std::fs::write(&p, text).unwrap();
    let sm = dir.join("rules/sm.toml");
    let mut rules = std::fs::read_to_string(&sm).unwrap();
    rules.push_str(
        "\n[[rule]]\nname = \"returning\"\nwhen = [\"ssv.lastDnn exists\"]\n[[rule.then]]\n\
         append = \"decision.policyCtrlReqTriggers\"\nvalue = \"US_RE\"\n\
         [[rule]]\nname = \"remember\"\n[[rule.then]]\nssv = \"lastDnn\"\nfrom = \"request.dnn\"\n",
    );
    std::fs::write(&sm, rules).unwrap();
}

#[tokio::test]
async fn the_admin_endpoint_deploys_a_new_version_and_refuses_a_broken_one() {
    let specs = specs();
    let d = tempfile::tempdir().unwrap();
    let project = default_project(&d.path().join("policy"));
    let pcf = TestPcf::start(d.path(), &project).await;
    let c = client();
    let admin = format!("{}/policy-admin/v1/project", pcf.base);

    let v = body(&c.get(&admin).send().await.unwrap());
    assert_eq!((v["name"].as_str(), v["version"].as_str()), (Some("default"), Some("1.0.0")));
    let metrics = String::from_utf8(
        c.get(&format!("{}/metrics", pcf.base)).send().await.unwrap().body().to_vec(),
    )
    .unwrap();
    assert!(
        metrics.contains("policy_project_info{project=\"default\",version=\"1.0.0\"} 1"),
        "{metrics}"
    );

    // Version 2 in another directory: deployed, and the next decision is its own.
    let v2 = d.path().join("policy-v2");
    copy_dir(&project, &v2);
    version(&v2, "2.0.0", "300 Mbps");
    let r = c
        .post(&format!("{admin}/deploy"))
        .json(&json!({"dir": v2.display().to_string()}))
        .send()
        .await
        .unwrap();
    let v = body(&r);
    assert_eq!(r.status().as_u16(), 200, "{v}");
    assert_eq!(
        (v["version"].as_str(), v["previousVersion"].as_str()),
        (Some("2.0.0"), Some("1.0.0"))
    );
    let mut ctx = open5gs_context(5);
    ctx.as_object_mut().unwrap().remove("subsSessAmbr");
    let r = c.post(&pcf.sm("")).json(&ctx).send().await.unwrap();
    let decision = body(&r);
    assert_eq!(r.status().as_u16(), 201, "{decision}");
    specs.assert_valid("TS29512_Npcf_SMPolicyControl", "SmPolicyDecision", &decision);
    assert_eq!(decision["sessRules"]["s1"]["authSessAmbr"]["uplink"], "300 Mbps");
    assert!(!decision["policyCtrlReqTriggers"].as_array().unwrap().contains(&json!("US_RE")));
    // The state variable the first decision set is the subscriber's, persisted: the second
    // session of the same subscriber sees it.
    ctx["pduSessionId"] = json!(2);
    let decision = body(&c.post(&pcf.sm("")).json(&ctx).send().await.unwrap());
    assert!(
        decision["policyCtrlReqTriggers"].as_array().unwrap().contains(&json!("US_RE")),
        "{decision}"
    );

    // A broken version 3: refused with the file and line, version 2 stays in force.
    let v3 = d.path().join("policy-v3");
    copy_dir(&v2, &v3);
    std::fs::write(
        v3.join("rules/sm.toml"),
        "[[rule]]\nname = \"x\"\nwhen = [\"request.dnn frobnicates 3\"]\n",
    )
    .unwrap();
    let r = c
        .post(&format!("{admin}/deploy"))
        .json(&json!({"dir": v3.display().to_string()}))
        .send()
        .await
        .unwrap();
    let v = problem(&specs, &r, 400, "POLICY_CHECK_FAILED");
    assert!(v["invalidParams"][0]["param"].as_str().unwrap().starts_with("rules/sm.toml:"), "{v}");
    assert_eq!(body(&c.get(&admin).send().await.unwrap())["version"], "2.0.0");
    let r = c.post(&format!("{admin}/deploy")).json(&json!({"dir": 7})).send().await.unwrap();
    problem(&specs, &r, 400, "MANDATORY_IE_INCORRECT");

    let metrics = String::from_utf8(
        c.get(&format!("{}/metrics", pcf.base)).send().await.unwrap().body().to_vec(),
    )
    .unwrap();
    assert!(
        metrics.contains("policy_project_info{project=\"default\",version=\"2.0.0\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("policy_evaluations_total{version=\"2.0.0\"} 2"), "{metrics}");
    assert!(metrics.contains("policy_deploys_total{outcome=\"ok\"} 1"), "{metrics}");
    assert!(metrics.contains("policy_deploys_total{outcome=\"refused\"} 1"), "{metrics}");
    pcf.stop().await;
}

#[tokio::test]
async fn a_changed_project_file_is_deployed_and_a_broken_change_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let project = default_project(&d.path().join("policy"));
    let config =
        PcfConfig { policy: Some(project.clone()), policy_watch_ms: 20, ..PcfConfig::default() };
    let pcf = TestPcf::start_with(d.path(), config).await;
    let c = client();
    let admin = format!("{}/policy-admin/v1/project", pcf.base);
    let version_now = || async { body(&c.get(&admin).send().await.unwrap())["version"].clone() };
    let wait_for = |want: &'static str| {
        let version_now = &version_now;
        async move {
            for _ in 0..250 {
                if version_now().await == want {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            panic!("version {want} never came in force");
        }
    };
    assert_eq!(version_now().await, "1.0.0");
    // Modification times have a coarse clock on some file systems: the watch compares the
    // newest time and the file count, so a new file makes the change certain.
    version(&project, "1.1.0", "150 Mbps");
    std::fs::write(project.join("CHANGES.txt"), "1.1.0: default uplink 150 Mbps\n").unwrap();
    wait_for("1.1.0").await;
    // The change is recorded as a version, the one in force.
    let versions = format!("{}/policy-admin/v1/versions", pcf.base);
    let list = body(&c.get(&versions).send().await.unwrap());
    assert_eq!(list.as_array().unwrap().len(), 2, "{list}");
    assert_eq!(
        (list[0]["projectVersion"].as_str(), list[0]["active"].as_bool()),
        (Some("1.1.0"), Some(true))
    );
    let mut ctx = open5gs_context(9);
    ctx.as_object_mut().unwrap().remove("subsSessAmbr");
    let decision = body(&c.post(&pcf.sm("")).json(&ctx).send().await.unwrap());
    assert_eq!(decision["sessRules"]["s1"]["authSessAmbr"]["uplink"], "150 Mbps");
    // A broken edit: refused, 1.1.0 stays and keeps deciding.
    std::fs::write(project.join("rules/sm.toml"), "[[rule]]\nname = 3\n").unwrap();
    std::fs::remove_file(project.join("CHANGES.txt")).unwrap();
    let metrics_url = format!("{}/metrics", pcf.base);
    let mut refused = false;
    for _ in 0..250 {
        let m =
            String::from_utf8(c.get(&metrics_url).send().await.unwrap().body().to_vec()).unwrap();
        if m.contains("policy_deploys_total{outcome=\"refused\"} 1") {
            refused = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(refused, "the broken edit was never seen");
    assert_eq!(version_now().await, "1.1.0");
    let list = body(&c.get(&versions).send().await.unwrap());
    assert_eq!(list.as_array().unwrap().len(), 2, "a refused edit is no version: {list}");
    let r = c.post(&pcf.sm("")).json(&ctx).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 201);
    pcf.stop().await;
}

/// The default project, counting each subscriber's SM policy decisions in a state variable.
fn counting_project(into: &Path) -> std::path::PathBuf {
    let p = default_project(into);
    std::fs::create_dir_all(p.join("scripts")).unwrap();
    std::fs::write(
        p.join("scripts/count.rhai"),
        "let n = ssv.sessions; if n == () { 1 } else { n + 1 }",
    )
    .unwrap();
    let sm = p.join("rules/sm.toml");
    let mut rules = std::fs::read_to_string(&sm).unwrap();
    rules.push_str(
        "\n[[rule]]\nname = \"count\"\n[[rule.then]]\nscript = \"count\"\ninto = \"decision.count\"\n\
         [[rule.then]]\nssv = \"sessions\"\nfrom = \"decision.count\"\n\
         [[rule.then]]\nremove = \"decision.count\"\n",
    );
    std::fs::write(&sm, rules).unwrap();
    p
}

async fn one_subscribers_concurrent_requests_are_decided_one_at_a_time() {
    let d = state_dir();
    let project = counting_project(&d.path().join("policy"));
    let pcf = TestPcf::start(d.path(), &project).await;
    let c = client();
    let n = 24;
    let mut tasks = Vec::new();
    for i in 0..n {
        let (c, url) = (c.clone(), pcf.sm(""));
        let mut ctx = open5gs_context(7);
        ctx["pduSessionId"] = json!(i + 1);
        tasks.push(tokio::spawn(async move { c.post(&url).json(&ctx).send().await.unwrap() }));
    }
    let mut locations = Vec::new();
    for t in tasks {
        let r = t.await.unwrap();
        assert_eq!(r.status().as_u16(), 201, "{}", body(&r));
        assert!(body(&r).get("count").is_none());
        locations.push(r.header("location").unwrap().to_string());
    }
    // Updates of the same subscriber's sessions, concurrent with each other, count too.
    let mut tasks = Vec::new();
    for loc in &locations[..8] {
        let (c, url) = (c.clone(), format!("{loc}/update"));
        tasks.push(tokio::spawn(async move {
            c.post(&url)
                .json(&json!({"repPolicyCtrlReqTriggers": ["RES_MO_RE"]}))
                .send()
                .await
                .unwrap()
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap().status().as_u16(), 200);
    }
    let metrics = String::from_utf8(
        c.get(&format!("{}/metrics", pcf.base)).send().await.unwrap().body().to_vec(),
    )
    .unwrap();
    pcf.stop().await;
    // Not one read-modify-write of the counter was lost.
    let kept = stored_subscriber(d.path(), "imsi-999700000000007").await;
    assert_eq!(kept.ssv["sessions"], n + 8);
    assert!(metrics.contains("pcf_collision_lease_expired_total 0"), "{metrics}");
}

// By hand rather than `testkit::on_both_backends!`: the concurrent requests run on a
// multi-threaded runtime.
mod sqlite {
    #[tokio::test]
    async fn an_sm_policy_association_lives_through_create_get_update_delete_and_a_restart() {
        super::an_sm_policy_association_lives_through_create_get_update_delete_and_a_restart()
            .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_subscribers_concurrent_requests_are_decided_one_at_a_time() {
        super::one_subscribers_concurrent_requests_are_decided_one_at_a_time().await;
    }
}

mod mariadb {
    #[tokio::test]
    async fn an_sm_policy_association_lives_through_create_get_update_delete_and_a_restart() {
        if testkit::backends::use_mariadb() {
            super::an_sm_policy_association_lives_through_create_get_update_delete_and_a_restart()
                .await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_subscribers_concurrent_requests_are_decided_one_at_a_time() {
        if testkit::backends::use_mariadb() {
            super::one_subscribers_concurrent_requests_are_decided_one_at_a_time().await;
        }
    }
}
