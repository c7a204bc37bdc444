//! `fivecore bench --oauth2` / `--tls` end to end: the kit starts the NFs requiring access
//! tokens and/or mutual TLS, gets its tokens from the NRF as a registered consumer, connects
//! with its own certificate, and the mix must still meet its success criteria at a low rate.
//! What proves the modes are real: a request of the mix without a token is refused 401 by the
//! same NF (the kit stops the run otherwise), a client without a certificate is refused, and
//! the NF's own metrics counted the requests the kit sent with its tokens.

use std::path::PathBuf;
use std::process::Command;

/// Runs `fivecore bench SCENARIO ARGS --quiet --out DIR`; exit 0 expected.
fn run_bench(scenario: &str, tag: &str, args: &[&str]) -> (PathBuf, serde_json::Value) {
    let out = std::env::temp_dir()
        .join(format!("fivecore-bench-security-{scenario}-{tag}-{}", std::process::id()));
    let run = Command::new(env!("CARGO_BIN_EXE_fivecore"))
        .args(["bench", scenario])
        .args(args)
        .args(["--quiet", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert_eq!(run.status.code(), Some(0), "stderr:\n{stderr}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    (out, json)
}

/// The NF's own count of answers for `operation` over the measured window (its /metrics).
fn nf_count(json: &serde_json::Value, nf: &str, operation: &str) -> u64 {
    json["nf_latency"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["nf"] == nf && r["operation"] == operation)
        .unwrap_or_else(|| panic!("no {nf} {operation} in {}", json["nf_latency"]))["count"]
        .as_u64()
        .unwrap()
}

fn sent(json: &serde_json::Value, name_part: &str) -> u64 {
    json["procedures"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["name"].as_str().unwrap().contains(name_part))
        .map(|p| p["sent"].as_u64().unwrap())
        .sum()
}

#[test]
fn bench_oauth2_sends_the_nrfs_tokens_and_the_nrf_refuses_a_request_without_one() {
    let (out, json) = run_bench(
        "nrf-5k",
        "oauth2",
        &[
            "--scale",
            "0.005",
            "--duration",
            "3",
            "--warmup",
            "1",
            "--max-p99-ms",
            "1000",
            "--oauth2",
        ],
    );
    assert_eq!(json["criteria_passed"], true, "{}", json["failures"]);
    let sec = &json["security"];
    assert_eq!(sec["mode"], "oauth2");
    // The same NRF refused a discovery without a token before the load.
    assert_eq!(sec["no_token_probe"]["status"], 401, "{sec}");
    assert!(sec["no_token_probe"]["procedure"].as_str().unwrap().starts_with("NFDiscover"));
    // The kit's token for discovery came from the scenario's NRF (NFRegister and the like,
    // nnrf-nfm, need none).
    let tokens = sec["tokens"].as_array().unwrap();
    assert_eq!(tokens.len(), 1, "{sec}");
    assert_eq!(
        (&tokens[0]["service"], &tokens[0]["target_nf_type"]),
        (&"nnrf-disc".into(), &"NRF".into())
    );
    assert!(sec["token_issuer"].as_str().unwrap().starts_with("the scenario's NRF"), "{sec}");
    assert_eq!(sec["consumer_nf_type"], "AF");
    // The NRF required tokens and served the discoveries the kit sent with its token.
    let cfg = std::fs::read_to_string(out.join("nrf.toml")).unwrap();
    assert!(cfg.contains("required = true"), "{cfg}");
    let (count, sent) =
        (nf_count(&json, "nrf", "Nnrf_NFDiscovery_NFDiscover"), sent(&json, "Discover"));
    assert!(sent > 0 && count * 10 >= sent * 8, "{count} served of {sent}");
    // Discovery answers still held the reference's profiles: the kit's own AF profile is in none.
    for c in json["profile_counts"].as_array().unwrap() {
        assert_eq!(c["as_expected"], true, "{c}");
    }
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("- security: oauth2"), "{md}");
    let _ = std::fs::remove_dir_all(&out);
}

/// The BSF S9 mix over mutual TLS, with access tokens from an NRF the kit starts for them (the
/// scenario has none): both modes at once.
#[test]
fn bench_tls_and_oauth2_on_the_bsf_mix_resume_sessions_and_refuse_the_anonymous() {
    let (out, json) = run_bench(
        "bsf-s9-54k-25m",
        "tls-oauth2",
        &[
            "--rate",
            "100",
            "--duration",
            "2",
            "--warmup",
            "1",
            "--bindings",
            "1000",
            "--max-p99-ms",
            "1000",
            "--tls",
            "--oauth2",
        ],
    );
    assert_eq!(json["criteria_passed"], true, "{}", json["failures"]);
    let sec = &json["security"];
    assert_eq!(sec["mode"], "oauth2+tls");
    assert_eq!(sec["no_token_probe"]["status"], 401, "{sec}");
    assert_eq!(sec["tokens"][0]["service"], "nbsf-management", "{sec}");
    assert!(sec["token_issuer"].as_str().unwrap().contains("started by the kit"), "{sec}");
    // The BSF serves TLS only: the kit's connections were TLS handshakes, a client without a
    // certificate was refused, and a reconnect resumed its session.
    let bsf = json["targets"].as_array().unwrap().iter().find(|t| t["nf"] == "bsf").unwrap();
    assert!(bsf["url"].as_str().unwrap().starts_with("https://"), "{bsf}");
    assert!(sec["tls_full_handshakes"].as_u64().unwrap() >= 1, "{sec}");
    assert!(sec["tls_no_certificate_probe"].as_str().unwrap().starts_with("refused"), "{sec}");
    assert_eq!(sec["tls_reconnect_probe"], "resumed", "{sec}");
    // The issuer NRF is not a target: its CPU is not the BSF's.
    assert!(json["targets"].as_array().unwrap().iter().all(|t| t["nf"] != "nrf"));
    let cfg = std::fs::read_to_string(out.join("bsf.toml")).unwrap();
    assert!(cfg.contains("client_ca") && cfg.contains("required = true"), "{cfg}");
    // The BSF registered the bindings the kit created with its token over TLS.
    let (count, sent) =
        (nf_count(&json, "bsf", "Nbsf_Management_Register"), sent(&json, "Binding Create"));
    assert!(sent > 0 && count * 10 >= sent * 8, "{count} served of {sent}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn bench_tls_alone_on_the_nrf_mix() {
    let (out, json) = run_bench(
        "nrf-5k",
        "tls",
        &["--scale", "0.005", "--duration", "2", "--warmup", "1", "--max-p99-ms", "1000", "--tls"],
    );
    assert_eq!(json["criteria_passed"], true, "{}", json["failures"]);
    let sec = &json["security"];
    assert_eq!(sec["mode"], "tls");
    assert!(sec["no_token_probe"].is_null() && sec["tokens"].as_array().unwrap().is_empty());
    assert!(sec["tls_no_certificate_probe"].as_str().unwrap().starts_with("refused"), "{sec}");
    let nrf = json["targets"].as_array().unwrap().iter().find(|t| t["nf"] == "nrf").unwrap();
    assert!(nrf["url"].as_str().unwrap().starts_with("https://"), "{nrf}");
    let (count, sent) =
        (nf_count(&json, "nrf", "Nnrf_NFDiscovery_NFDiscover"), sent(&json, "Discover"));
    assert!(sent > 0 && count * 10 >= sent * 8, "{count} served of {sent}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn bench_refuses_security_modes_for_nfs_it_does_not_start() {
    let run = Command::new(env!("CARGO_BIN_EXE_fivecore"))
        .args(["bench", "nrf-5k", "--oauth2", "--target", "nrf=http://127.0.0.1:1"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("not with --target"), "{stderr}");
}
