//! `fivecore bench` end to end: the kit starts `fivecore nrf` itself, preloads it, runs each NRF
//! call mix at about 25 requests per second for a few seconds, and must meet the success
//! criteria.

use std::process::Command;

#[test]
fn bench_nrf_5k_smoke_meets_its_success_criteria() {
    smoke("nrf-5k", "0.005");
}

#[test]
fn bench_nrf_51_6k_smoke_meets_its_success_criteria() {
    smoke("nrf-51.6k", "0.0005");
}

fn smoke(scenario: &str, scale: &str) {
    let out = std::env::temp_dir()
        .join(format!("fivecore-bench-smoke-{scenario}-{}", std::process::id()));
    let run = Command::new(env!("CARGO_BIN_EXE_fivecore"))
        .args([
            "bench",
            scenario,
            "--scale",
            scale,
            "--duration",
            "3",
            "--warmup",
            "1",
            "--quiet",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "stderr:\n{stderr}");
    assert!(stderr.contains("success criteria met"), "{stderr}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(json["scenario"], scenario);
    assert_eq!(json["criteria_passed"], true);
    assert_eq!(json["preload"]["profiles"], 260);
    assert!(json["totals"]["achieved_tps"].as_f64().unwrap() > 20.0, "{}", json["totals"]);
    assert!(json["totals"]["nf_cpu_s"].as_f64().is_some(), "the kit measured the NRF it started");
    for f in ["report.md", "report.html"] {
        assert!(out.join(f).exists(), "{f}");
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn bench_lists_the_scenarios_and_rejects_unknown_ones() {
    let list =
        Command::new(env!("CARGO_BIN_EXE_fivecore")).args(["bench", "--list"]).output().unwrap();
    assert!(list.status.success());
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(text.lines().any(|l| l.starts_with("nrf-5k ")), "{text}");
    assert!(text.lines().any(|l| l.starts_with("nrf-51.6k ")), "{text}");
    let bad = Command::new(env!("CARGO_BIN_EXE_fivecore"))
        .args(["bench", "no-such-scenario"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown scenario"));
}
