//! The engine's Diameter side against a BSF in this process (its Rx proxy on 127.0.0.1:0):
//! bindings registered over Nbsf (the `--target` path), Rx sessions opened, then ~2 s of
//! Binding Create/Delete and AAR-I, AAR-U, RAR, STR through the BSF to the simulated PCFs and
//! AFs.

use std::net::SocketAddr;

const SCENARIO: &str = r#"
name = "tiny-bsf"
description = "in-test BSF scenario"
nfs = ["bsf"]

[load]
rate = 120
duration_s = 2
warmup_s = 0.5
mix = "shuffled_deck"

[diameter]
nf = "bsf"
origin_host = "bsf.test.example"
origin_realm = "test.example"
session_hold_s = 1.0

[preload.bindings]
reference_count = 300
scale = 1.0
pool = "bindings"
deletable = 20
pcf_sims = ["pcf1", "pcf2"]
dnn = "ims"
sst = 1
ipv4_first = "10.1.0.1"
dual_stack = true

[[simulators]]
name = "af"
kind = "af_rx"
latency_ms = 0
origin_host = "pcscf.ims.test.example"
origin_realm = "ims.test.example"

[[simulators]]
name = "pcf1"
kind = "pcf_rx"
latency_ms = 2
origin_host = "pcf1.pcf.test.example"
origin_realm = "pcf.test.example"

[[simulators]]
name = "pcf2"
kind = "pcf_rx"
latency_ms = 0
origin_host = "pcf2.pcf.test.example"
origin_realm = "pcf.test.example"

[[procedures]]
name = "Binding Create"
tps = 10
method = "POST"
path = "/nbsf-management/v1/pcfBindings"
body_binding = true
expect = [201]
produces = "bindings"

[[procedures]]
name = "Binding Delete"
tps = 10
method = "DELETE"
path = "/nbsf-management/v1/pcfBindings/{take:bindings}"
expect = [204]

[[procedures]]
name = "AAR-I"
tps = 25
rx = "aar_initial"
expect = [2001]

[[procedures]]
name = "AAR-U"
tps = 25
rx = "aar_update"
expect = [2001]

[[procedures]]
name = "RAR"
tps = 25
rx = "rar"
expect = [2001]

[[procedures]]
name = "STR"
tps = 25
rx = "str"
expect = [2001]
"#;

async fn start_bsf(
    dir: &std::path::Path,
) -> (String, SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let config = bsf::BsfConfig {
        rx: bsf::config::RxConfig {
            enabled: true,
            listen: "127.0.0.1:0".parse().unwrap(),
            origin_host: "bsf.test.example".into(),
            origin_realm: "test.example".into(),
            ..Default::default()
        },
        ..Default::default()
    };
    let run = bsf::RunConfig {
        bsf: config,
        sbi: sbi::ServerConfig::default(),
        client: sbi::client::ClientConfig::default(),
        store: store::SqliteConfig { readers: 1, ..store::SqliteConfig::new(dir.join("bsf.db")) },
        instance_id: None,
    };
    let bound = bsf::bind(run).await.unwrap();
    let url = format!("http://{}", bound.local_addr());
    let rx = bound.rx_local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(bound.serve(async {
        let _ = stopped.await;
    }));
    (url, rx, stop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rx_procedures_go_through_the_bsf_to_the_simulated_peers() {
    let dir = tempfile::tempdir().unwrap();
    let (url, rx, _stop) = start_bsf(dir.path()).await;
    let scenario = bench::scenario::Scenario::from_toml(SCENARIO).unwrap();
    let out = tempfile::tempdir().unwrap();
    let r = bench::run_against(
        scenario,
        vec![("bsf".into(), url.clone()), ("bsf-diameter".into(), rx.to_string())],
        120.0,
        2.0,
        0.5,
        out.path(),
    )
    .await
    .unwrap();
    assert!(r.criteria_passed, "{:?}\n{:?}", r.failures, r.procedures);
    let b = r.preload.bindings.as_ref().unwrap();
    assert_eq!((b.count, b.method.as_str()), (300, "Nbsf Register"));
    // Rx sessions opened first: 25/s x 1 s, at least 64.
    assert_eq!(r.preload.rx_sessions, 64);
    for p in &r.procedures {
        assert!(p.sent > 0 && p.skipped == 0, "{}: {p:?}", p.name);
        assert_eq!(p.success_rate, 1.0, "{}: {:?}", p.name, p.outcomes);
    }
    // The deck keeps the shares exact: decks of 24 (2 + 2 + 4 x 5).
    let sent = |n: &str| r.procedures.iter().find(|p| p.name == n).unwrap().sent as i64;
    assert!((sent("AAR-I") - sent("STR")).abs() <= 5, "paired");
    let rx_report = r.rx.as_ref().unwrap();
    let (pcfs, afs): (Vec<_>, Vec<_>) = rx_report.peers.iter().partition(|p| p.kind == "pcf_rx");
    assert_eq!((pcfs.len(), afs.len()), (2, 1));
    // AAR-Is (preload + load) and AAR-Us reached the PCFs, spread over both by the bindings.
    assert!(pcfs.iter().all(|p| p.received_aar > 10 && p.received_str > 0), "{pcfs:?}");
    let aars: u64 = pcfs.iter().map(|p| p.received_aar).sum();
    assert!(aars >= 64 + (sent("AAR-I") + sent("AAR-U")) as u64, "{aars}");
    assert!(afs[0].received_rar as i64 >= sent("RAR"));
    // Sessions stay bounded: what was opened before the load, give or take one deck.
    assert!(rx_report.sessions_peak <= 64 + 24, "{}", rx_report.sessions_peak);
    assert!(rx_report.sessions_open_at_end >= 40, "{}", rx_report.sessions_open_at_end);
}
