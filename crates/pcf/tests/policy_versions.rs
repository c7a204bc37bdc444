//! Policy project versions through `/policy-admin/v1` over a real socket (h2c), as the console
//! (issue #27) uses them: upload, list, get, diff, the version's own test cases and a dry run,
//! activate (the next SM policy decision is the new version's), roll back, a restart that
//! keeps the versions and the one in force, and bad input answered with ProblemDetails.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::*;
use serde_json::{json, Value};

/// Every file below `dir`, path → text: what an upload sends.
fn files_of(dir: &Path) -> BTreeMap<String, String> {
    fn walk(root: &Path, d: &Path, out: &mut BTreeMap<String, String>) {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
                out.insert(rel, std::fs::read_to_string(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// The default project as version `version` with the default uplink `ul`: its own first
/// test case (which expects 100 Mbps) then fails unless `ul` is 100 Mbps.
fn version_files(project: &Path, version: &str, ul: &str) -> BTreeMap<String, String> {
    let mut files = files_of(project);
    let manifest = files.get_mut("project.toml").unwrap();
    *manifest = manifest
        .replace("version = \"1.0.0\"", &format!("version = \"{version}\""))
        .replace("defaultUl = \"100 Mbps\"", &format!("defaultUl = \"{ul}\""));
    files
}

/// The uplink AMBR an SM policy create without subscribed AMBR is given: the project's
/// default, so it tells which version decided.
async fn default_uplink(c: &sbi::client::SbiClient, pcf: &TestPcf, n: u32) -> String {
    let mut ctx = open5gs_context(n);
    ctx.as_object_mut().unwrap().remove("subsSessAmbr");
    let r = c.post(&pcf.sm("")).json(&ctx).send().await.unwrap();
    let d = body(&r);
    assert_eq!(r.status().as_u16(), 201, "{d}");
    d["sessRules"]["s1"]["authSessAmbr"]["uplink"].as_str().unwrap().to_string()
}

fn ids_and_active(list: &Value) -> Vec<(i64, bool)> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|v| (v["id"].as_i64().unwrap(), v["active"].as_bool().unwrap()))
        .collect()
}

async fn versions_are_uploaded_diffed_tested_activated_rolled_back_and_kept_over_a_restart() {
    let specs = specs();
    let d = state_dir();
    let project = default_project(&d.path().join("policy"));
    let pcf = TestPcf::start(d.path(), &project).await;
    let c = client();
    let admin = format!("{}/policy-admin/v1", pcf.base);

    // The configured project is version 1, in force.
    let list = body(&c.get(&format!("{admin}/versions")).send().await.unwrap());
    assert_eq!(ids_and_active(&list), [(1, true)], "{list}");
    let v1 = &list[0];
    assert_eq!(
        (v1["name"].as_str(), v1["projectVersion"].as_str()),
        (Some("default"), Some("1.0.0"))
    );
    assert_eq!(v1["dir"], project.display().to_string());
    assert!(v1["description"].as_str().unwrap().starts_with("Subscribed QoS"), "{v1}");
    chrono::DateTime::parse_from_rfc3339(v1["deployedAt"].as_str().unwrap()).unwrap();

    // Upload version 2: 201 with its Location, stored but not in force.
    let v2_files = version_files(&project, "2.0.0", "300 Mbps");
    let r = c
        .post(&format!("{admin}/versions"))
        .json(&json!({"files": v2_files, "description": "uplink 300 Mbps"}))
        .send()
        .await
        .unwrap();
    let v = body(&r);
    assert_eq!(r.status().as_u16(), 201, "{v}");
    assert_eq!(r.header("location"), Some(format!("{admin}/versions/2").as_str()));
    assert_eq!((v["id"].as_i64(), v["active"].as_bool()), (Some(2), Some(false)), "{v}");
    assert_eq!(v["description"], "uplink 300 Mbps");
    assert_eq!(v["dir"], Value::Null);
    let list = body(&c.get(&format!("{admin}/versions")).send().await.unwrap());
    assert_eq!(ids_and_active(&list), [(2, false), (1, true)], "newest first: {list}");
    assert_eq!(default_uplink(&c, &pcf, 1).await, "100 Mbps", "version 1 still decides");

    // Get: the files as uploaded.
    let v = body(&c.get(&format!("{admin}/versions/2")).send().await.unwrap());
    assert_eq!(v["files"], json!(v2_files));
    assert_eq!(v["projectVersion"], "2.0.0");

    // Diff 1 -> 2: only project.toml changed, as a unified diff.
    let r = c.get(&format!("{admin}/versions/1/diff/2")).send().await.unwrap();
    let diff = body(&r);
    assert_eq!(r.status().as_u16(), 200, "{diff}");
    let files = diff["files"].as_array().unwrap();
    assert_eq!(files.len(), 1, "{diff}");
    assert_eq!(
        (files[0]["path"].as_str(), files[0]["status"].as_str()),
        (Some("project.toml"), Some("changed"))
    );
    let u = files[0]["unifiedDiff"].as_str().unwrap();
    assert!(u.starts_with("--- a/project.toml\n+++ b/project.toml\n@@"), "{u}");
    assert!(u.contains("\n-version = \"1.0.0\"\n+version = \"2.0.0\"\n"), "{u}");
    assert!(u.contains("\n-defaultUl = \"100 Mbps\"\n+defaultUl = \"300 Mbps\"\n"), "{u}");
    // A file added shows as added.
    let mut v3_files = v2_files.clone();
    v3_files.insert("lists/vip.txt".into(), "imsi-999700000000001\n".into());
    let r = c
        .post(&format!("{admin}/versions"))
        .json(&json!({"files": v3_files}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201, "{}", body(&r));
    let diff = body(&c.get(&format!("{admin}/versions/2/diff/3")).send().await.unwrap());
    assert_eq!(
        diff["files"],
        json!([{"path": "lists/vip.txt", "status": "added",
        "unifiedDiff": "--- /dev/null\n+++ b/lists/vip.txt\n@@ -0,0 +1 @@\n+imsi-999700000000001\n"}])
    );
    // The description defaults to the project's own.
    let v = body(&c.get(&format!("{admin}/versions")).send().await.unwrap());
    assert_eq!(v[0]["description"], v1["description"]);

    // The test run: version 2's own cases, the one expecting the 100 Mbps default fails.
    let r = c.post(&format!("{admin}/versions/2/test")).send().await.unwrap();
    let t = body(&r);
    assert_eq!(r.status().as_u16(), 200, "{t}");
    assert_eq!((t["passed"].as_u64(), t["failed"].as_u64()), (Some(5), Some(1)), "{t}");
    let failing: Vec<&Value> =
        t["cases"].as_array().unwrap().iter().filter(|c| c["passed"] == false).collect();
    assert_eq!(failing[0]["name"], "no subscribed values: the defaults");
    let m = failing[0]["message"].as_str().unwrap();
    assert!(m.contains("decision.sessRules.s1") && m.contains("300 Mbps"), "{m}");
    // Version 1 passes all of its own.
    let t = body(&c.post(&format!("{admin}/versions/1/test")).send().await.unwrap());
    assert_eq!((t["passed"].as_u64(), t["failed"].as_u64()), (Some(6), Some(0)), "{t}");

    // A dry run on version 2: its decision and the rules fired, nothing stored or counted.
    let r = c
        .post(&format!("{admin}/versions/2/test"))
        .json(
            &json!({"service": "SM", "request": {"supi": "imsi-999700000000009", "dnn": "internet"},
            "subscriber": {}}),
        )
        .send()
        .await
        .unwrap();
    let e = body(&r);
    assert_eq!(r.status().as_u16(), 200, "{e}");
    assert_eq!(e["decision"]["sessRules"]["s1"]["authSessAmbr"]["uplink"], "300 Mbps", "{e}");
    assert_eq!(e["fired"], json!(["session-rule", "triggers"]));
    assert_eq!(e["fallback"], false);
    assert_eq!(e["trace"][0]["rule"], "session-rule");

    // Activate 2: in force, the next decision is its own; GET /project says so.
    let r = c.post(&format!("{admin}/versions/2/activate")).send().await.unwrap();
    let a = body(&r);
    assert_eq!(r.status().as_u16(), 200, "{a}");
    assert_eq!(a, json!({"active": 2, "previous": 1}));
    assert_eq!(default_uplink(&c, &pcf, 2).await, "300 Mbps");
    let p = body(&c.get(&format!("{admin}/project")).send().await.unwrap());
    assert_eq!((p["version"].as_str(), p["versionId"].as_i64()), (Some("2.0.0"), Some(2)), "{p}");
    let list = body(&c.get(&format!("{admin}/versions")).send().await.unwrap());
    assert_eq!(ids_and_active(&list), [(3, false), (2, true), (1, false)]);
    assert!(list[1]["activatedAt"].is_string(), "{list}");

    // Roll back: version 1 again, then nothing before it: 409.
    let r = c.post(&format!("{admin}/rollback")).send().await.unwrap();
    let a = body(&r);
    assert_eq!(r.status().as_u16(), 200, "{a}");
    assert_eq!(a, json!({"active": 1, "previous": 2}));
    assert_eq!(default_uplink(&c, &pcf, 3).await, "100 Mbps");
    let r = c.post(&format!("{admin}/rollback")).send().await.unwrap();
    problem(&specs, &r, 409, "NO_PREVIOUS_VERSION");
    assert_eq!(default_uplink(&c, &pcf, 4).await, "100 Mbps");

    // A deploy of a directory is a version too, in force.
    let v4 = d.path().join("policy-v4");
    copy_dir(&project, &v4);
    let manifest = v4.join("project.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replace("1.0.0", "4.0.0").replace("\"100 Mbps\"", "\"400 Mbps\""),
    )
    .unwrap();
    let r = c
        .post(&format!("{admin}/project/deploy"))
        .json(&json!({"dir": v4.display().to_string()}))
        .send()
        .await
        .unwrap();
    let v = body(&r);
    assert_eq!(r.status().as_u16(), 200, "{v}");
    assert_eq!(
        (v["versionId"].as_i64(), v["previousVersionId"].as_i64()),
        (Some(4), Some(1)),
        "{v}"
    );
    let list = body(&c.get(&format!("{admin}/versions")).send().await.unwrap());
    assert_eq!(list[0]["dir"], v4.display().to_string());
    assert_eq!(default_uplink(&c, &pcf, 5).await, "400 Mbps");

    // Activate 2 and restart with the same configuration: the versions and the one in force
    // are kept (the configured directory is unchanged since the PCF read it).
    let a = body(&c.post(&format!("{admin}/versions/2/activate")).send().await.unwrap());
    assert_eq!(a, json!({"active": 2, "previous": 4}));
    pcf.stop().await;
    let pcf = TestPcf::start(d.path(), &project).await;
    let admin = format!("{}/policy-admin/v1", pcf.base);
    let list = body(&c.get(&format!("{admin}/versions")).send().await.unwrap());
    assert_eq!(ids_and_active(&list), [(4, false), (3, false), (2, true), (1, false)], "{list}");
    assert_eq!(default_uplink(&c, &pcf, 6).await, "300 Mbps");
    // The rollback history survived too: back to 4.
    let a = body(&c.post(&format!("{admin}/rollback")).send().await.unwrap());
    assert_eq!(a, json!({"active": 4, "previous": 2}));
    assert_eq!(default_uplink(&c, &pcf, 7).await, "400 Mbps");

    // The configured directory edited while the PCF is down: a new version, in force.
    pcf.stop().await;
    let manifest = project.join("project.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replace("1.0.0", "1.1.0").replace("\"100 Mbps\"", "\"150 Mbps\""),
    )
    .unwrap();
    let pcf = TestPcf::start(d.path(), &project).await;
    let admin = format!("{}/policy-admin/v1", pcf.base);
    let list = body(&c.get(&format!("{admin}/versions")).send().await.unwrap());
    assert_eq!(ids_and_active(&list)[0], (5, true), "{list}");
    assert_eq!(list[0]["projectVersion"], "1.1.0");
    assert_eq!(default_uplink(&c, &pcf, 8).await, "150 Mbps");
    pcf.stop().await;
}

fn params(v: &Value) -> Vec<&str> {
    v["invalidParams"].as_array().unwrap().iter().filter_map(|p| p["param"].as_str()).collect()
}

#[tokio::test]
async fn bad_input_is_answered_with_problem_details_naming_the_field() {
    let specs = specs();
    let d = tempfile::tempdir().unwrap();
    let project = default_project(&d.path().join("policy"));
    let pcf = TestPcf::start(d.path(), &project).await;
    let c = client();
    let admin = format!("{}/policy-admin/v1", pcf.base);
    let post = |path: &str, body: Value| {
        let url = format!("{admin}{path}");
        let c = c.clone();
        async move { c.post(&url).json(&body).send().await.unwrap() }
    };

    let v = problem(&specs, &post("/versions", json!({})).await, 400, "MANDATORY_IE_MISSING");
    assert_eq!(params(&v), ["/dir", "/files"]);
    let r = post("/versions", json!({"files": {"../x.toml": "", "rules/sm.toml": 3}})).await;
    let v = problem(&specs, &r, 400, "MANDATORY_IE_INCORRECT");
    assert_eq!(params(&v), ["/files/..~1x.toml", "/files/rules~1sm.toml"]);
    let r = post("/versions", json!({"files": "project.toml"})).await;
    assert_eq!(params(&problem(&specs, &r, 400, "MANDATORY_IE_INCORRECT")), ["/files"]);
    let r = post("/versions", json!({"dir": 7})).await;
    assert_eq!(params(&problem(&specs, &r, 400, "MANDATORY_IE_INCORRECT")), ["/dir"]);
    let r = post("/versions", json!({"dir": "/x", "files": {}})).await;
    problem(&specs, &r, 400, "MANDATORY_IE_INCORRECT");
    let r = post("/versions", json!({"files": {}, "description": 5})).await;
    assert_eq!(params(&problem(&specs, &r, 400, "OPTIONAL_IE_INCORRECT")), ["/description"]);

    // A project that fails its check: each error's file and line, nothing stored.
    let mut broken = files_of(&project);
    broken.insert(
        "rules/sm.toml".into(),
        "[[rule]]\nname = \"x\"\nwhen = [\"request.dnn frobnicates 3\"]\n".into(),
    );
    let v = problem(
        &specs,
        &post("/versions", json!({"files": broken})).await,
        400,
        "POLICY_CHECK_FAILED",
    );
    assert_eq!(params(&v), ["rules/sm.toml:3"], "{v}");
    let v =
        problem(&specs, &post("/versions", json!({"files": {}})).await, 400, "POLICY_CHECK_FAILED");
    assert!(params(&v)[0].starts_with("project.toml:"), "{v}");
    // A broken test case fails the check as `fivecore policy check` does.
    let mut bad_case = files_of(&project);
    bad_case.insert("tests/x.toml".into(), "[[case]]\nname = \"c\"\nservice = \"XX\"\n".into());
    let v = problem(
        &specs,
        &post("/versions", json!({"files": bad_case})).await,
        400,
        "POLICY_CHECK_FAILED",
    );
    assert_eq!(params(&v), ["tests/x.toml:1"], "{v}");
    let missing = d.path().join("nowhere");
    let r = post("/versions", json!({"dir": missing.display().to_string()})).await;
    problem(&specs, &r, 400, "POLICY_CHECK_FAILED");
    let list = body(&c.get(&format!("{admin}/versions")).send().await.unwrap());
    assert_eq!(ids_and_active(&list), [(1, true)], "nothing refused was stored: {list}");

    // Unknown and malformed ids.
    let v = problem(
        &specs,
        &c.get(&format!("{admin}/versions/99")).send().await.unwrap(),
        404,
        "RESOURCE_NOT_FOUND",
    );
    assert_eq!(params(&v), ["id"]);
    let r = c.get(&format!("{admin}/versions/abc")).send().await.unwrap();
    assert_eq!(params(&problem(&specs, &r, 400, "MANDATORY_IE_INCORRECT")), ["id"]);
    let r = c.get(&format!("{admin}/versions/1/diff/99")).send().await.unwrap();
    assert_eq!(params(&problem(&specs, &r, 404, "RESOURCE_NOT_FOUND")), ["b"]);
    problem(&specs, &post("/versions/99/activate", json!({})).await, 404, "RESOURCE_NOT_FOUND");
    problem(&specs, &post("/versions/0/test", json!({})).await, 400, "MANDATORY_IE_INCORRECT");
    problem(&specs, &post("/rollback", json!({})).await, 409, "NO_PREVIOUS_VERSION");

    // A dry run's fields.
    let r = post("/versions/1/test", json!({"service": "XX", "request": []})).await;
    assert_eq!(
        params(&problem(&specs, &r, 400, "MANDATORY_IE_INCORRECT")),
        ["/service", "/request"]
    );
    let r = post("/versions/1/test", json!({"subscriber": {}, "now": "yesterday"})).await;
    assert_eq!(params(&problem(&specs, &r, 400, "MANDATORY_IE_MISSING")), ["/request", "/now"]);
    // Activating the version in force changes nothing.
    let a = body(&post("/versions/1/activate", json!({})).await);
    assert_eq!(a, json!({"active": 1, "previous": null}));
    pcf.stop().await;
}

testkit::on_both_backends!(
    versions_are_uploaded_diffed_tested_activated_rolled_back_and_kept_over_a_restart,
);
