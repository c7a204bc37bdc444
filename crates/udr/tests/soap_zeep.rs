//! A stock SOAP client given only docs/udr.wsdl: Python zeep in its default strict mode drives
//! every operation family (SLF entries, EIR single IMEIs and ranges, policy profiles, Sh
//! profiles) against a UDR on a real socket (tests/zeep/every_operation.py).
//!
//! zeep missing: the test is skipped with a note, unless `FIVECORE_REQUIRE_ZEEP=1` (./test.sh
//! installs zeep and sets it), where it fails.

mod common;

use std::process::Command;

use common::*;
use udr::UdrConfig;

fn zeep_available() -> bool {
    let found = Command::new("python3")
        .args(["-c", "import zeep"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !found {
        assert!(
            std::env::var("FIVECORE_REQUIRE_ZEEP").as_deref() != Ok("1"),
            "FIVECORE_REQUIRE_ZEEP=1 but python3 cannot import zeep (python3 -m pip install zeep)"
        );
        eprintln!("skipped: python3 with zeep not found (python3 -m pip install zeep)");
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zeep_strict_drives_every_operation_from_the_wsdl() {
    if !zeep_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let u = TestUdr::start(dir.path(), UdrConfig::default()).await;
    let manifest = env!("CARGO_MANIFEST_DIR");
    let wsdl = format!("{manifest}/../../docs/udr.wsdl");
    let script = format!("{manifest}/tests/zeep/every_operation.py");
    let endpoint = u.url("/udr-soap/v1");
    let out = tokio::task::spawn_blocking(move || {
        Command::new("python3").arg(script).arg(wsdl).arg(endpoint).output().unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "zeep failed:\n{stdout}\n{stderr}");
    for family in ["slf", "eir_single", "eir_range", "policy", "sh"] {
        assert!(stdout.contains(&format!("{family}: ok")), "{family} not run:\n{stdout}");
    }
    u.stop().await;
}
