//! Policy Event Records and the subscriber activity log (`[pcf.per]`, `[pcf.sal]`): every
//! decision of an SM create, update and delete over HTTP/2 leaves one JSON line naming the
//! subscriber, the project version and the rules that fired, with the decision; a traced
//! subscriber's decisions also go to the activity log with what the engine read; an untraced
//! one's do not. Off by default: no file is written.

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;
use pcf::per::{PerConfig, SalConfig};
use pcf::PcfConfig;
use serde_json::{json, Value};

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is one JSON record"))
        .collect()
}

/// Waits until `path` holds `n` lines (the writer thread flushes when its queue runs dry).
async fn wait_lines(path: &Path, n: usize) -> Vec<Value> {
    for _ in 0..200 {
        let l = lines(path);
        if l.len() >= n {
            return l;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    lines(path)
}

#[tokio::test]
async fn one_record_per_decision_and_the_traced_subscribers_activity() {
    let d = tempfile::tempdir().unwrap();
    let policy = default_project(&d.path().join("policy"));
    let traced = open5gs_context(41);
    let other = open5gs_context(42);
    let config = PcfConfig {
        policy: Some(policy),
        per: PerConfig { enabled: true, ..PerConfig::default() },
        sal: SalConfig {
            subscribers: vec![traced["supi"].as_str().unwrap().to_string()],
            ..SalConfig::default()
        },
        ..PcfConfig::default()
    };
    let pcf = TestPcf::start_with(d.path(), config).await;
    let c = client();

    let mut locations = Vec::new();
    for ctx in [&traced, &other] {
        let r = c.post(&pcf.sm("")).json(ctx).send().await.unwrap();
        assert_eq!(r.status(), 201, "{}", body(&r));
        locations.push(r.header("location").unwrap().to_string());
    }
    let change = json!({"repPolicyCtrlReqTriggers": ["RAT_TY_CH"], "ratType": "EUTRA"});
    let r = c.post(&format!("{}/update", locations[0])).json(&change).send().await.unwrap();
    assert_eq!(r.status(), 200, "{}", body(&r));

    // Beside the database: three decisions, three records, in order.
    let per = wait_lines(&d.path().join("pcf-per.jsonl"), 3).await;
    assert_eq!(per.len(), 3, "{per:?}");
    for (rec, ctx) in per.iter().zip([&traced, &other, &traced]) {
        assert_eq!(rec["service"], "SM", "{rec}");
        assert_eq!(rec["supi"], ctx["supi"], "{rec}");
        assert_eq!(rec["dnn"], "internet");
        assert_eq!(rec["policy"], "default");
        assert!(rec["version"].as_str().is_some_and(|v| !v.is_empty()), "{rec}");
        assert!(rec["time"].as_str().is_some_and(|t| t.ends_with('Z')), "{rec}");
        // The default project's rules: the session rule always fires.
        let rules = rec["rules"].as_array().unwrap();
        assert!(rules.contains(&json!("session-rule")), "{rec}");
        assert!(rules.contains(&json!("triggers")), "{rec}");
        assert!(rec["decision"]["sessRules"]["s1"].is_object(), "{rec}");
        assert!(rec.get("fallback").is_none(), "{rec}");
        assert!(rec.get("input").is_none(), "a PER carries no input: {rec}");
    }
    // The update's record names what the SMF reported.
    assert_eq!(per[2]["triggers"], json!(["RAT_TY_CH"]), "{}", per[2]);
    assert_eq!(per[2]["ratType"], "EUTRA", "{}", per[2]);

    // The activity log: the traced subscriber's two decisions, with what the engine read.
    let sal = wait_lines(&d.path().join("pcf-sal.jsonl"), 2).await;
    assert_eq!(sal.len(), 2, "{sal:?}");
    for rec in &sal {
        assert_eq!(rec["supi"], traced["supi"], "{rec}");
        assert_eq!(rec["input"]["request"]["supi"], traced["supi"], "{rec}");
        assert!(rec["input"]["ssv"].is_object(), "{rec}");
        assert!(rec["decision"].is_object(), "{rec}");
    }
    assert_eq!(sal[1]["input"]["request"]["ratType"], "EUTRA");

    let m = c.get(&format!("{}/metrics", pcf.base)).send().await.unwrap();
    let m = String::from_utf8(m.body().to_vec()).unwrap();
    assert!(
        m.lines().any(|l| l == r#"pcf_per_records_total{sink="per",result="written"} 3"#),
        "{m}"
    );
    assert!(
        m.lines().any(|l| l == r#"pcf_per_records_total{sink="sal",result="written"} 2"#),
        "{m}"
    );
    assert!(
        m.lines().any(|l| l == r#"pcf_per_records_total{sink="per",result="dropped"} 0"#),
        "{m}"
    );
    pcf.stop().await;
}

#[tokio::test]
async fn off_by_default() {
    let d = tempfile::tempdir().unwrap();
    let policy = default_project(&d.path().join("policy"));
    let pcf = TestPcf::start(d.path(), &policy).await;
    let r = client().post(&pcf.sm("")).json(&open5gs_context(43)).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let m = client().get(&format!("{}/metrics", pcf.base)).send().await.unwrap();
    let m = String::from_utf8(m.body().to_vec()).unwrap();
    assert!(!m.contains("pcf_per_records"), "{m}");
    pcf.stop().await;
    assert!(!d.path().join("pcf-per.jsonl").exists());
    assert!(!d.path().join("pcf-sal.jsonl").exists());
}
