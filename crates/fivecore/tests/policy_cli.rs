//! `fivecore policy check|test|eval|replay` as a user runs them: output and exit status.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fivecore(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fivecore")).args(args).output().expect("fivecore runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn corpus(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../policies")
        .join(name)
        .display()
        .to_string()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn check_says_ok_with_the_sizes_or_names_file_and_line() {
    let o = fivecore(&["policy", "check", &corpus("high")]);
    assert!(o.status.success(), "{}", stdout(&o));
    assert!(
        stdout(&o).contains(
            "high 2.5.0: ok (SM AM UE PA; 24 rules, 1 tables of 10000 rows, 3 match lists"
        ),
        "{}",
        stdout(&o)
    );

    let d = tempfile::tempdir().unwrap();
    copy_dir(Path::new(&corpus("low")), d.path());
    std::fs::write(
        d.path().join("rules/am.toml"),
        "[[rule]]\nname = \"r\"\nwhen = [\"request.ratType =~ 'NR'\"]\n",
    )
    .unwrap();
    let o = fivecore(&["policy", "check", &d.path().display().to_string()]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(out.contains("rules/am.toml:3: `=~` is not an operator"), "{out}");
    assert!(out.contains("1 error(s)"), "{out}");
}

#[test]
fn test_reports_each_case_and_fails_the_run_on_a_failed_case() {
    let o = fivecore(&["policy", "test", &corpus("high")]);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("pass  tests/sm.toml:")
            && out.contains("cases, ")
            && out.contains(" 0 failed"),
        "{out}"
    );

    let d = tempfile::tempdir().unwrap();
    copy_dir(Path::new(&corpus("low")), d.path());
    let cases = std::fs::read_to_string(d.path().join("tests/am.toml")).unwrap();
    std::fs::write(
        d.path().join("tests/am.toml"),
        cases.replace("\"decision.rfsp\" = 1", "\"decision.rfsp\" = 4"),
    )
    .unwrap();
    let o = fivecore(&["policy", "test", &d.path().display().to_string()]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("FAIL  tests/am.toml:1  NR gets RFSP 1"), "{out}");
    assert!(out.contains("decision.rfsp: expected 4, got 1"), "{out}");
    assert!(out.contains("1 failed"), "{out}");
}

#[test]
fn eval_prints_the_trace_and_the_decision() {
    let d = tempfile::tempdir().unwrap();
    let req = d.path().join("req.json");
    std::fs::write(&req, r#"{"supi":"imsi-001020000000001","dnn":"iot","ratType":"NR","sliceInfo":{"sst":1},"servingNetwork":{"mcc":"001","mnc":"01"},"userLocationInfo":{"nrLocation":{"tai":{"tac":"43500"}}}}"#).unwrap();
    let sub = d.path().join("sub.toml");
    std::fs::write(&sub, "plan = \"p0001\"\n").unwrap();
    let o = fivecore(&[
        "policy",
        "eval",
        &corpus("high"),
        "--request",
        &req.display().to_string(),
        "--subscriber",
        &sub.display().to_string(),
        "--service",
        "SM",
        "--now",
        "2026-11-26T10:00:00Z",
    ]);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("rule plan-qos (rules/sm.toml:"), "{out}");
    assert!(out.contains("table qos_plans: row at tables/qos_plans.csv:5942"), "{out}");
    let json: serde_json::Value = serde_json::from_str(&out[out.find('{').unwrap()..]).unwrap();
    assert_eq!(json["decision"]["qosDecs"]["qd1"]["5qi"], 7);
    assert_eq!(json["ssvUpdates"]["lastDnn"], "iot@00101");
}

#[test]
fn replay_reports_every_decision_that_differs() {
    let old = tempfile::tempdir().unwrap();
    copy_dir(Path::new(&corpus("low")), old.path());
    let new = tempfile::tempdir().unwrap();
    copy_dir(Path::new(&corpus("low")), new.path());
    // The new version gives IMS 5QI 69 instead of 5.
    let rules = std::fs::read_to_string(new.path().join("rules/sm.toml")).unwrap();
    std::fs::write(new.path().join("rules/sm.toml"), rules.replace("value = 5\n", "value = 69\n"))
        .unwrap();
    let sessions = old.path().join("sessions.jsonl");
    std::fs::write(
        &sessions,
        concat!(
            r#"{"service":"SM","request":{"supi":"imsi-001010000000001","dnn":"internet"}}"#, "\n",
            r#"{"service":"SM","request":{"supi":"imsi-001010000000002","dnn":"ims"},"now":"2026-11-26T10:00:00Z"}"#, "\n",
            r#"{"service":"AM","request":{"ratType":"NR"}}"#, "\n",
            "not json\n",
        ),
    )
    .unwrap();
    let o = fivecore(&[
        "policy",
        "replay",
        &old.path().display().to_string(),
        &new.path().display().to_string(),
        "--sessions",
        &sessions.display().to_string(),
    ]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("sessions.jsonl:2 (SM): differs"), "{out}");
    assert!(out.contains("decision.sessRules.s1.authDefQos.5qi: 5 -> 69"), "{out}");
    assert!(out.contains("sessions.jsonl:4: not a record"), "{out}");
    assert!(out.contains("3 requests, 1 decisions differ, 1 lines unread"), "{out}");
    // The same version against itself: nothing differs.
    std::fs::write(
        &sessions,
        r#"{"service":"SM","request":{"supi":"imsi-001010000000002","dnn":"ims"}}"#,
    )
    .unwrap();
    let o = fivecore(&[
        "policy",
        "replay",
        &corpus("low"),
        &corpus("low"),
        "--sessions",
        &sessions.display().to_string(),
    ]);
    assert!(o.status.success(), "{}", stdout(&o));
}
