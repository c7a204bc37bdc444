//! Evaluation cost (issue #21): the High project deciding an SM create (target ≤ 10 µs median),
//! the Low one (≤ 2 µs), and a table lookup at 1,000, 10,000 and 100,000 rows (flat).
//! `cargo bench -p fivecore-policy --bench evaluate`; results in docs/BENCHMARKS.md.

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

/// The allocator of the fivecore binary, so the figures are the NF's (glibc's malloc and free
/// were 13 % of this benchmark's profile).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use policy::{Input, Project, Service};
use serde_json::{json, Map, Value};

fn corpus(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../policies").join(name)
}

fn sm_create() -> Value {
    // What an SMF sends in SmPolicyContextData, the members the rules read.
    json!({
        "supi": "imsi-001010000000007", "gpsi": "msisdn-447700900123", "pei": "imeisv-4370816125816151",
        "pduSessionId": 5, "dnn": "video", "ratType": "NR", "pduSessionType": "IPV4",
        "sliceInfo": {"sst": 1, "sd": "000001"}, "servingNetwork": {"mcc": "001", "mnc": "01"},
        "ipv4Address": "100.64.1.7", "notificationUri": "http://smf.example/notify",
        "userLocationInfo": {"nrLocation": {"tai": {"plmnId": {"mcc": "001", "mnc": "01"}, "tac": "000001"},
            "ncgi": {"plmnId": {"mcc": "001", "mnc": "01"}, "nrCellId": "000000010"}}},
        "subsSessAmbr": {"uplink": "100 Mbps", "downlink": "200 Mbps"},
        "subsDefQos": {"5qi": 9, "arp": {"priorityLevel": 8, "preemptCap": "NOT_PREEMPT", "preemptVuln": "PREEMPTABLE"}, "priorityLevel": 8},
        "accessType": "3GPP_ACCESS", "smfId": "c0a8f3e1-0000-4000-8000-000000000001"
    })
}

fn evaluate(c: &mut Criterion) {
    let high = Project::load(corpus("high")).expect("the high project loads");
    let low = Project::load(corpus("low")).expect("the low project loads");
    let req = sm_create();
    let sub = json!({"plan": "p0001", "planRateMbps": 400, "usage": [{"bytes": 30000000000u64}, {"bytes": 25000000000u64}]});
    let ssv = Map::new();
    let now = chrono::DateTime::parse_from_rfc3339("2026-11-26T10:00:00Z")
        .unwrap()
        .with_timezone(&chrono::Utc);
    let input = Input {
        request: &req,
        subscriber: &sub,
        ssv: &ssv,
        node: "smf-1",
        now,
        spending: Input::empty(),
        usage: None,
    };
    // The High decision must be the full one: the table row, the script, the JSON operations.
    let o = high.evaluate(Service::Sm, input);
    assert!(o.error.is_none(), "{:?}", o.error);
    assert_eq!(o.fired.len(), 8, "{:?}", o.fired);
    let mut g = c.benchmark_group("sm_create");
    g.bench_function("high", |b| {
        b.iter(|| black_box(high.evaluate(Service::Sm, black_box(input))))
    });
    let no_scripts = json!({"plan": "p0001"});
    let input_ns = Input { subscriber: &no_scripts, ..input };
    g.bench_function("high_without_scripts", |b| {
        b.iter(|| black_box(high.evaluate(Service::Sm, black_box(input_ns))))
    });
    let low_req = json!({"supi": "imsi-001010000000001", "dnn": "internet", "ratType": "NR"});
    let low_in = Input { request: &low_req, subscriber: &Value::Null, ..input };
    g.bench_function("low", |b| b.iter(|| black_box(low.evaluate(Service::Sm, black_box(low_in)))));
    g.finish();

    // Each of the High project's scripts alone, in a project of one rule.
    let mut g = c.benchmark_group("script");
    for (name, rule) in [
        ("fair_use", "[[rule]]\nname = \"r\"\nwhen = [\"script:fair_use\"]\n"),
        ("mbr", "[[rule]]\nname = \"r\"\n[[rule.then]]\nscript = \"mbr\"\ninto = \"decision.a\"\n"),
        ("trivial", "[[rule]]\nname = \"r\"\nwhen = [\"script:trivial\"]\n"),
    ] {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        std::fs::create_dir_all(p.join("rules")).unwrap();
        std::fs::create_dir_all(p.join("scripts")).unwrap();
        std::fs::write(p.join("project.toml"), "name = \"s\"\nversion = \"1\"\nservices = [\"SM\"]\n[constants]\nfairUseBytes = 50000000000\n").unwrap();
        std::fs::write(p.join("rules/sm.toml"), rule).unwrap();
        for s in ["fair_use", "mbr"] {
            std::fs::copy(
                corpus("high").join(format!("scripts/{s}.rhai")),
                p.join(format!("scripts/{s}.rhai")),
            )
            .unwrap();
        }
        std::fs::write(p.join("scripts/trivial.rhai"), "true").unwrap();
        let proj = Project::load(p).expect("loads");
        assert!(proj.evaluate(Service::Sm, input).error.is_none());
        g.bench_function(name, |b| {
            b.iter(|| black_box(proj.evaluate(Service::Sm, black_box(input))))
        });
    }
    g.finish();

    let mut g = c.benchmark_group("table_lookup");
    for rows in [1_000usize, 10_000, 100_000] {
        let dir = table_project(rows);
        let p = Project::load(dir.path()).expect("the table project loads");
        let req = json!({"dnn": "d3", "ratType": "NR", "sliceInfo": {"sst": 1}, "servingNetwork": {"mnc": "02"}, "supi": "imsi-001010000000001", "tac": "500"});
        let sub = json!({"plan": format!("p{:06}", rows / 7)});
        let input = Input { request: &req, subscriber: &sub, ..input };
        assert!(p.evaluate(Service::Sm, input).decision.get("q").is_some());
        g.bench_with_input(BenchmarkId::from_parameter(rows), &rows, |b, _| {
            b.iter(|| black_box(p.evaluate(Service::Sm, black_box(input))))
        });
    }
    g.finish();
}

/// A project whose one rule looks a table of `rows` rows up: 5 exact columns with wildcards in
/// a share of the rows, a prefix and a range column.
fn table_project(rows: usize) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    std::fs::create_dir_all(p.join("rules")).unwrap();
    std::fs::create_dir_all(p.join("tables")).unwrap();
    std::fs::write(p.join("project.toml"), "name = \"t\"\nversion = \"1\"\nservices = [\"SM\"]\n")
        .unwrap();
    std::fs::write(
        p.join("rules/sm.toml"),
        "[[rule]]\nname = \"t\"\n[[rule.then]]\ntable = \"t\"\ninto = \"decision.q\"\n",
    )
    .unwrap();
    let mut csv = String::from("subscriber.plan, request.dnn, request.ratType, request.sliceInfo.sst, request.servingNetwork.mnc, request.supi ~prefix, request.tac ~range, priority, =v\n");
    let rats = ["NR", "EUTRA", "WLAN"];
    for i in 0..rows {
        let (rat, sst, mnc, prio) = match i % 10 {
            0 => ("*", "1", "02", 20),
            1 => ("*", "*", "*", 30),
            _ => (rats[i % 3], "1", "02", 10),
        };
        let pre = if i % 20 == 7 { "imsi-00101" } else { "*" };
        let tac = if i % 20 == 9 { "100..900" } else { "*" };
        csv.push_str(&format!(
            "p{:06},d{},{rat},{sst},{mnc},{pre},{tac},{prio},{i}\n",
            i / 7,
            i % 7
        ));
    }
    csv.push_str("*,*,*,*,*,*,*,1000,-1\n");
    std::fs::write(p.join("tables/t.csv"), csv).unwrap();
    d
}

criterion_group!(benches, evaluate);
criterion_main!(benches);
