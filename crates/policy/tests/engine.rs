//! The engine from outside: scripts that loop for ever or allocate without bound are stopped by
//! their limits and answered with the fallback, counted; a hot swap under concurrent
//! evaluations loses and mixes nothing; check errors name file and line; the corpus's own
//! cases pass.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Timelike;
use policy::testcase::{load_cases, load_cases_from};
use policy::{Deployed, Input, Project, ProjectFiles, Service};
use serde_json::{json, Value};

fn corpus(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../policies").join(name)
}

/// Writes a project from (relative path, text) pairs.
fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), files);
    d
}

fn write(dir: &Path, files: &[(&str, &str)]) {
    for (rel, text) in files {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

fn now() -> chrono::DateTime<chrono::Utc> {
    policy::testcase::default_now()
}

const MANIFEST: &str = r#"
name = "limits"
version = "1"
services = ["SM"]
[limits]
script_max_operations = 100000
script_timeout_us = 20000
script_max_string_bytes = 65536
script_max_array_len = 1000
[fallback.SM]
sessRules = { s1 = { authSessAmbr = { uplink = "1 Mbps", downlink = "1 Mbps" } } }
"#;

#[test]
fn every_corpus_project_checks_and_passes_its_own_cases() {
    for name in ["low", "medium", "high", "default", "pcrf-ldap", "pcrf-data"] {
        let dir = corpus(name);
        let p = Project::load(&dir).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        let cases = load_cases(&dir).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert!(cases.len() >= 3, "{name}: {} cases", cases.len());
        for c in &cases {
            let r = c.run(&p);
            assert!(r.passed(), "{name} {}:{} {}: {:?}", r.file, r.line, r.name, r.failures);
        }
    }
}

#[test]
fn a_project_read_into_files_decides_as_its_directory_does() {
    for name in ["low", "medium", "high", "default", "pcrf-ldap", "pcrf-data"] {
        let dir = corpus(name);
        let files = ProjectFiles::read_dir(&dir).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert!(files.get("project.toml").is_some(), "{name}");
        let from_dir = Project::load(&dir).unwrap();
        let p = Project::from_files(&files, &dir).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert_eq!(
            (p.stats.rules, p.stats.table_rows),
            (from_dir.stats.rules, from_dir.stats.table_rows)
        );
        let cases = load_cases_from(&files).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert_eq!(cases.len(), load_cases(&dir).unwrap().len(), "{name}");
        for c in &cases {
            let r = c.run(&p);
            assert!(r.passed(), "{name} {}:{} {}: {:?}", r.file, r.line, r.name, r.failures);
            assert_eq!(p.evaluate(c.service, c.input()), from_dir.evaluate(c.service, c.input()));
        }
    }
    // A case's data file among the files, `..` resolved inside the project and no further.
    let d = project(&[
        ("project.toml", "name = \"f\"\nversion = \"1\"\nservices = [\"SM\"]\n"),
        ("rules/sm.toml", "[[rule]]\nname = \"dnn\"\n[[rule.then]]\nset = \"decision.dnn\"\nfrom = \"request.dnn\"\n"),
        ("data/req.json", "{\"dnn\": \"ims\"}"),
        ("tests/a.toml", "[[case]]\nname = \"a\"\nservice = \"SM\"\nrequest_file = \"../data/req.json\"\n[case.expect]\n\"decision.dnn\" = \"ims\"\n"),
        ("tests/b.toml", "[[case]]\nname = \"b\"\nservice = \"SM\"\nrequest_file = \"../../etc/passwd\"\n"),
        (".git/HEAD", "ref: refs/heads/main\n"),
    ]);
    let files = ProjectFiles::read_dir(d.path()).unwrap();
    assert!(files.get(".git/HEAD").is_none(), "hidden files are not the project's");
    let errors = load_cases_from(&files).unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].file, "tests/b.toml");
    let mut map = files.into_map();
    map.remove("tests/b.toml");
    let files = ProjectFiles::new(map).unwrap();
    let p = Project::from_files(&files, "").unwrap();
    let cases = load_cases_from(&files).unwrap();
    assert!(cases[0].run(&p).passed());
    // A file that is not text is an error naming it.
    std::fs::write(d.path().join("lists.bin"), [0xff, 0xfe, 0x00]).unwrap();
    let e = ProjectFiles::read_dir(d.path()).unwrap_err();
    assert_eq!((e[0].file.as_str(), e[0].message.as_str()), ("lists.bin", "not UTF-8 text"));
}

#[test]
fn the_high_project_is_high_by_the_reference_definition() {
    let p = Project::load(corpus("high")).unwrap();
    let s = &p.stats;
    assert!(s.table_rows >= 10_000, "{s:?}");
    assert!(s.lists >= 3 && s.regexes >= 6 && s.scripts >= 1, "{s:?}");
    // ≥ 5 wildcard match fields in its table: the header's exact columns.
    let header = std::fs::read_to_string(corpus("high").join("tables/qos_plans.csv")).unwrap();
    let header = header.lines().find(|l| !l.starts_with('#')).unwrap();
    let exact = header
        .split(',')
        .map(str::trim)
        .filter(|c| !c.starts_with('=') && *c != "priority" && !c.contains('~'))
        .count();
    assert!(exact >= 5, "{header}");
}

fn run_script(script: &str) -> policy::Outcome {
    let d = project(&[
        ("project.toml", MANIFEST),
        (
            "rules/sm.toml",
            "[[rule]]\nname = \"r\"\n[[rule.then]]\nscript = \"s\"\ninto = \"decision.x\"\n",
        ),
        ("scripts/s.rhai", script),
    ]);
    let p = Project::load(d.path()).unwrap();
    let req = json!({"dnn": "internet"});
    let t0 = Instant::now();
    let o = p.evaluate(Service::Sm, Input::request(&req, now()));
    assert!(t0.elapsed() < Duration::from_secs(2), "the limit took {:?}", t0.elapsed());
    assert_eq!(p.counters(), (1, u64::from(o.error.is_some())));
    o
}

#[test]
fn a_script_that_loops_for_ever_is_stopped_and_the_fallback_answers() {
    let o = run_script("let i = 0; loop { i += 1; }");
    let e = o.error.as_deref().expect("stopped");
    assert!(e.contains("operation limit") || e.contains("time limit"), "{e}");
    assert_eq!(
        o.decision,
        json!({"sessRules": {"s1": {"authSessAmbr": {"uplink": "1 Mbps", "downlink": "1 Mbps"}}}})
    );
    // A slow loop that stays under the operation limit is stopped by the clock.
    let o = run_script("let s = 0; for i in 0..99999 { s += i * 2; s -= i; } s");
    assert!(o.error.is_none() || o.error.as_deref().unwrap().contains("limit"), "{:?}", o.error);
}

#[test]
fn a_script_that_allocates_without_bound_is_stopped_by_the_size_limits() {
    let o = run_script(r#"let s = "x"; loop { s += s; }"#);
    assert!(o.error.as_deref().unwrap().contains("size limit"), "{:?}", o.error);
    // Whichever limit comes first (a debug build on a busy machine may hit the clock first).
    let o = run_script("let a = []; loop { a.push(1); }");
    let e = o.error.as_deref().unwrap();
    assert!(e.contains("limit"), "{e}");
    // The process did not grow by anything like an unbounded string (RSS well under 100 MB).
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    if let Some(kb) = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
    {
        assert!(kb < 100_000, "RSS {kb} kB");
    }
}

#[test]
fn a_script_has_no_modules_no_eval_and_no_files() {
    // Neither import nor eval is accepted by the check.
    for (text, word) in [(r#"import "/etc/passwd" as y; 1"#, "import"), ("eval(\"1\")", "eval")] {
        let d =
            project(&[("project.toml", MANIFEST), ("rules/sm.toml", ""), ("scripts/e.rhai", text)]);
        let e = Project::load(d.path()).unwrap_err();
        assert!(e[0].message.contains(word), "{e:?}");
    }
    // A script that fails at compile time fails the check, with its line.
    let d = project(&[
        ("project.toml", MANIFEST),
        ("rules/sm.toml", ""),
        ("scripts/bad.rhai", "let a = 1;\nlet b = ;\n"),
    ]);
    let e = Project::load(d.path()).unwrap_err();
    assert_eq!((e[0].file.as_str(), e[0].line), ("scripts/bad.rhai", 2), "{e:?}");
}

#[test]
fn scripts_read_their_inputs_and_cannot_change_them_for_the_next_script() {
    // The first script copies the subscriber and changes its copy, and adds a member to its
    // own view of the input (Rhai lets a constant map gain a member): the second still sees the
    // subscriber as it came.
    let d = project(&[
        ("project.toml", MANIFEST),
        (
            "rules/sm.toml",
            "[[rule]]\nname = \"a\"\n[[rule.then]]\nscript = \"copy\"\ninto = \"decision.a\"\n\
             [[rule]]\nname = \"b\"\n[[rule.then]]\nscript = \"read\"\ninto = \"decision.b\"\n",
        ),
        (
            "scripts/copy.rhai",
            "let s = subscriber; s.plan = \"changed\"; s.usage.push(#{bytes: 1}); \
             let u = subscriber.usage; u.push(2); subscriber.fresh = 1; \
             [s.plan, s.usage.len(), u.len()]",
        ),
        (
            "scripts/read.rhai",
            "[subscriber.plan, subscriber.usage.len(), request.dnn, now.hour, \"fresh\" in subscriber]",
        ),
    ]);
    let p = Project::load(d.path()).unwrap();
    let req = json!({"dnn": "internet"});
    let sub = json!({"plan": "gold", "usage": [{"bytes": 5}]});
    let input = Input { subscriber: &sub, ..Input::request(&req, now()) };
    let o = p.evaluate(Service::Sm, input);
    assert!(o.error.is_none(), "{:?}", o.error);
    assert_eq!(o.decision["a"], json!(["changed", 2, 2]));
    assert_eq!(o.decision["b"], json!(["gold", 1, "internet", now().hour(), false]));

    // Changing an input's members, or the input, is an error: the fallback answers, counted.
    for script in [
        "subscriber.plan = \"x\"; 1",
        "request.dnn = \"x\"; 1",
        "subscriber.usage.push(1); 1",
        "request = 1; 1",
        "subscriber.usage[0].bytes = 1; 1",
        "now.hour = 1; 1",
    ] {
        let o = run_script_with(script, &req, &sub);
        assert!(o.error.is_some(), "{script} was allowed: {:?}", o.decision);
    }
}

fn run_script_with(script: &str, req: &Value, sub: &Value) -> policy::Outcome {
    let d = project(&[
        ("project.toml", MANIFEST),
        (
            "rules/sm.toml",
            "[[rule]]\nname = \"r\"\n[[rule.then]]\nscript = \"s\"\ninto = \"decision.x\"\n",
        ),
        ("scripts/s.rhai", script),
    ]);
    let p = Project::load(d.path()).unwrap();
    p.evaluate(Service::Sm, Input { subscriber: sub, ..Input::request(req, now()) })
}

#[test]
fn check_errors_name_the_file_and_the_line() {
    let d = project(&[
        ("project.toml", "name = \"x\"\nversion = \"1\"\nservices = [\"SM\"]\n"),
        (
            "rules/sm.toml",
            "[[rule]]\nname = \"a\"\nwhen = [\n  \"request.dnn == 'x'\",\n  \"request.supi in list:nope\",\n]\n\n[[rule]]\nname = \"b\"\n[[rule.then]]\nset = \"request.x\"\nvalue = 1\n",
        ),
        ("regex.toml", "ok = '^a'\nbad = '('\n"),
        ("tables/t.csv", "request.dnn, =v\ninternet, 1\nims\n"),
        ("rules/zz.toml", ""),
    ]);
    let mut e: Vec<String> =
        Project::load(d.path()).unwrap_err().iter().map(|e| e.to_string()).collect();
    e.sort();
    let want = [
        "regex.toml:2: regex `(`",
        "rules/sm.toml:10: `request.x`: actions write under decision.",
        "rules/sm.toml:5: no match list `nope` (lists/nope.txt)",
        "rules/zz.toml: not a service",
        "tables/t.csv:3:",
    ];
    assert_eq!(e.len(), want.len(), "{e:#?}");
    for (got, want) in e.iter().zip(want) {
        assert!(got.starts_with(want), "{got} does not start with {want}");
    }
}

fn version(v: &str) -> Vec<(&'static str, String)> {
    vec![
        ("project.toml", format!("name = \"swap\"\nversion = \"{v}\"\nservices = [\"SM\"]\n")),
        (
            "rules/sm.toml",
            format!(
                "[[rule]]\nname = \"a\"\n[[rule.then]]\nset = \"decision.a\"\nvalue = \"{v}\"\n[[rule]]\nname = \"b\"\nwhen = [\"decision.a == '{v}'\"]\n[[rule.then]]\nset = \"decision.b\"\nvalue = \"{v}\"\n"
            ),
        ),
    ]
}

fn write_version(dir: &Path, v: &str) {
    for (rel, text) in version(v) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

#[test]
fn a_hot_swap_under_concurrent_evaluations_loses_and_mixes_nothing() {
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_version(d1.path(), "1");
    write_version(d2.path(), "2");
    let deployed = Arc::new(Deployed::load(d1.path()).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (deployed, stop) = (deployed.clone(), stop.clone());
            std::thread::spawn(move || {
                let req = json!({});
                let (mut n, mut seen) = (0u64, std::collections::BTreeSet::new());
                while !stop.load(Ordering::Relaxed) {
                    let (o, p) = deployed.evaluate(Service::Sm, Input::request(&req, now()));
                    // Both rules of one version, never one of each, and the version reported
                    // is the one that decided.
                    let v = Value::String(p.version.clone());
                    assert_eq!(o.decision, json!({"a": v, "b": v}));
                    seen.insert(p.version.clone());
                    n += 1;
                }
                (n, seen)
            })
        })
        .collect();
    for i in 0..200 {
        let dir = if i % 2 == 0 { d2.path() } else { d1.path() };
        deployed.deploy(dir).unwrap();
    }
    // A version that fails its check is refused; the one in force stays.
    let bad = project(&[
        ("project.toml", "name = \"swap\"\nversion = \"3\"\nservices = [\"SM\"]\n"),
        ("rules/sm.toml", "[[rule]]\nname = 1\n"),
    ]);
    assert!(deployed.deploy(bad.path()).is_err());
    assert_eq!(deployed.current().version, "1", "the last good deploy (i = 199) was version 1");
    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    for w in workers {
        let (n, seen) = w.join().unwrap();
        total += n;
        assert!(!seen.is_empty());
    }
    assert!(total > 0);
}

#[test]
fn a_file_change_deploys_the_new_version_and_a_broken_one_is_refused() {
    let d = tempfile::tempdir().unwrap();
    write_version(d.path(), "1");
    let deployed = Arc::new(Deployed::load(d.path()).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = deployed.watch(Duration::from_millis(20), stop.clone());
    let wait_for = |v: &str| {
        let t0 = Instant::now();
        while deployed.current().version != v {
            assert!(t0.elapsed() < Duration::from_secs(10), "never version {v}");
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    // Later modification times than the first files', whatever the clock's resolution.
    std::thread::sleep(Duration::from_millis(50));
    write_version(d.path(), "2");
    wait_for("2");
    std::thread::sleep(Duration::from_millis(50));
    write(d.path(), &[("rules/sm.toml", "[[rule]]\nname = \"a\"\nwhen = [\"request.x ?? 1\"]\n")]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(deployed.current().version, "2");
    stop.store(true, Ordering::Relaxed);
    watcher.join().unwrap();
}

#[test]
fn rules_scripts_and_cases_read_spending_statuses_of_the_listed_counters() {
    let manifest = "name = \"sp\"\nversion = \"1\"\nservices = [\"SM\"]\n\
                    [spending]\ncounters = [\"data-cap\", \"roaming\"]\n";
    let d = project(&[
        ("project.toml", manifest),
        (
            "rules/sm.toml",
            r#"
[[rule]]
name = "ambr"
[[rule.then]]
set = "decision.sessRules.s1.authSessAmbr"
value = { uplink = "100 Mbps", downlink = "200 Mbps" }
[[rule]]
name = "capped"
when = ["spending.data-cap == 'exhausted'"]
[[rule.then]]
set = "decision.sessRules.s1.authSessAmbr"
value = { uplink = "1 Mbps", downlink = "1 Mbps" }
[[rule]]
name = "roaming-status"
[[rule.then]]
script = "roaming"
into = "decision.roaming"
"#,
        ),
        (
            "scripts/roaming.rhai",
            "if \"roaming\" in spending { spending.roaming } else { \"none\" }",
        ),
        (
            "tests/cases.toml",
            r#"
[[case]]
name = "an exhausted cap lowers the AMBR"
service = "SM"
request = { dnn = "internet" }
spending = { "data-cap" = "exhausted", roaming = "valid" }
fired = ["ambr", "capped", "roaming-status"]
[case.expect]
"decision.sessRules.s1.authSessAmbr.uplink" = "1 Mbps"
"decision.roaming" = "valid"
"#,
        ),
    ]);
    let p = Project::load(d.path()).unwrap();
    assert_eq!(p.spending_counters(), ["data-cap", "roaming"]);
    let req = json!({"dnn": "internet"});
    // No statuses: the counters are absent, nothing fires on them.
    let o = p.evaluate(Service::Sm, Input::request(&req, now()));
    assert_eq!(o.decision["sessRules"]["s1"]["authSessAmbr"]["uplink"], "100 Mbps");
    assert_eq!(o.decision["roaming"], "none");
    let spending = json!({"data-cap": "valid"});
    let input = Input { spending: spending.as_object().unwrap(), ..Input::request(&req, now()) };
    assert_eq!(
        p.evaluate(Service::Sm, input).decision["sessRules"]["s1"]["authSessAmbr"]["uplink"],
        "100 Mbps"
    );
    let spending = json!({"data-cap": "exhausted"});
    let input = Input { spending: spending.as_object().unwrap(), ..Input::request(&req, now()) };
    assert_eq!(
        p.evaluate(Service::Sm, input).decision["sessRules"]["s1"]["authSessAmbr"]["uplink"],
        "1 Mbps"
    );
    for c in load_cases(d.path()).unwrap() {
        let r = c.run(&p);
        assert!(r.passed(), "{}: {:?}", r.name, r.failures);
    }

    // A rule on a counter the project does not list, and a bad list, fail the check.
    let bad = project(&[
        (
            "project.toml",
            "name = \"sp\"\nversion = \"1\"\nservices = [\"SM\"]\n[spending]\ncounters = [\"a\", \"a\", \"\"]\n",
        ),
        ("rules/sm.toml", "[[rule]]\nname = \"r\"\nwhen = [\"spending.b == 'x'\"]\n"),
    ]);
    let errors = Project::load(bad.path()).unwrap_err();
    let text: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    assert!(text.iter().any(|e| e.contains("`a` is listed twice")), "{text:?}");
    assert!(text.iter().any(|e| e.contains("is empty")), "{text:?}");
    assert!(
        text.iter().any(|e| e.starts_with("rules/sm.toml:1:")
            && e.contains("`b` is not in [spending] counters")),
        "{text:?}"
    );
    // No [spending]: no counters.
    assert!(Project::load(corpus("default")).unwrap().spending_counters().is_empty());
}

#[test]
fn rules_scripts_and_cases_read_accumulated_usage_when_the_nf_monitors_it() {
    let d = project(&[
        (
            "project.toml",
            "name = \"um\"\nversion = \"1\"\nservices = [\"SM\"]\n[constants]\ncap = 100\n",
        ),
        (
            "rules/sm.toml",
            r#"
[[rule]]
name = "monitor"
when = ["usage exists"]
[[rule.then]]
script = "left"
into = "decision.umDecs.k.volumeThreshold"
[[rule]]
name = "capped"
when = ["usage.k.volUsage >= const.cap"]
[[rule.then]]
set = "decision.capped"
value = true
"#,
        ),
        (
            "scripts/left.rhai",
            "let used = if \"k\" in usage { usage.k.volUsage } else { 0 }; constants.cap - used",
        ),
        (
            "tests/cases.toml",
            r#"
[[case]]
name = "over the cap"
service = "SM"
request = {}
usage = { k = { volUsage = 130 } }
fired = ["monitor", "capped"]
[case.expect]
"decision.umDecs.k.volumeThreshold" = -30
"decision.capped" = true

[[case]]
name = "not monitored"
service = "SM"
request = {}
fired = []
absent = ["decision.umDecs"]
"#,
        ),
    ]);
    let p = Project::load(d.path()).unwrap();
    let req = json!({});
    // The NF monitors no usage: `usage exists` is false, nothing fires.
    let o = p.evaluate(Service::Sm, Input::request(&req, now()));
    assert_eq!(o.decision, json!({}));
    // Monitored, nothing reported yet: an empty map; the whole cap is left.
    let none = serde_json::Map::new();
    let o = p.evaluate(Service::Sm, Input { usage: Some(&none), ..Input::request(&req, now()) });
    assert_eq!(o.decision, json!({"umDecs": {"k": {"volumeThreshold": 100}}}));
    let used = json!({"k": {"volUsage": 40}});
    let input = Input { usage: used.as_object(), ..Input::request(&req, now()) };
    assert_eq!(p.evaluate(Service::Sm, input).decision["umDecs"]["k"]["volumeThreshold"], 60);
    let used = json!({"k": {"volUsage": 100}});
    let input = Input { usage: used.as_object(), ..Input::request(&req, now()) };
    assert_eq!(p.evaluate(Service::Sm, input).decision["capped"], true, "at the cap");
    for c in load_cases(d.path()).unwrap() {
        let r = c.run(&p);
        assert!(r.passed(), "{}: {:?}", r.name, r.failures);
    }
}
