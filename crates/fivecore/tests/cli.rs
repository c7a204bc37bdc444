//! The `fivecore` binary as a user meets it.

use std::process::Command;

fn fivecore(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fivecore")).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn version_and_help() {
    let (code, out, _) = fivecore(&["version"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("fivecore "));
    for sub in ["up", "nrf", "udr", "bsf", "pcf", "dd", "bench", "version"] {
        let (code, out, _) = fivecore(&[sub, "--help"]);
        assert_eq!(code, 0, "{sub} --help");
        assert!(out.contains("Usage: fivecore"), "{sub}: {out}");
    }
    let (_, out, _) = fivecore(&["bsf", "--help"]);
    for flag in ["--config", "--listen", "--data-dir", "--log-format"] {
        assert!(out.contains(flag), "bsf --help lacks {flag}");
    }
}

#[test]
fn an_nf_that_has_not_landed_exits_2_and_says_so() {
    for sub in ["nrf", "udr", "bsf", "pcf", "dd"] {
        let (code, out, err) = fivecore(&[sub, "--listen", "127.0.0.1:0", "--log-format", "json"]);
        assert_eq!(code, 2, "{sub}");
        assert!(out.is_empty());
        assert!(err.contains("has not landed"), "{sub}: {err}");
    }
    let (code, _, err) = fivecore(&["bench", "nrf-5k"]);
    assert_eq!(code, 2);
    assert!(err.contains("benchmark kit"));
}

#[test]
fn up_prints_the_endpoint_table() {
    let dir = tempfile_dir();
    let (code, out, err) = fivecore(&["up", "--data-dir", &dir]);
    assert_eq!(code, 2, "no NF has landed yet: {err}");
    for line in ["NRF", "http://127.0.0.1:7000", "127.0.0.1:3869 (Rx proxy)", "/healthz/ready"] {
        assert!(out.contains(line), "table lacks {line}: {out}");
    }
}

#[test]
fn a_bad_configuration_is_an_error() {
    let dir = tempfile_dir();
    let path = format!("{dir}/bad.toml");
    std::fs::write(&path, "[sbi]\nlisten = \"not an address\"\n").unwrap();
    let (code, _, err) = fivecore(&["nrf", "--config", &path]);
    assert_eq!(code, 1);
    assert!(err.contains("invalid configuration") && err.contains("listen"), "{err}");
    let (code, _, err) = fivecore(&["up", "--config", "/nonexistent/fivecore.toml"]);
    assert_eq!(code, 1);
    assert!(err.contains("cannot read"), "{err}");
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/fivecore.toml");
    let (code, _, _) = fivecore(&["nrf", "--config", example]);
    assert_eq!(code, 2, "the example configuration is valid");
}

fn tempfile_dir() -> String {
    let dir = std::env::temp_dir().join(format!("fivecore-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.to_string_lossy().into_owned()
}
