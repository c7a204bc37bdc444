//! The engine against a tiny in-test hyper server (not the NRF): ~2 s at a low rate, then the
//! report files and their numbers.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;

const SCENARIO: &str = r#"
name = "tiny"
description = "in-test scenario"
nfs = ["nrf"]

[load]
rate = 100
duration_s = 2
warmup_s = 0.5

[[simulators]]
name = "notify"
kind = "notification_sink"
latency_ms = 0

[[procedures]]
name = "ok"
row = "E"
tps = 75
method = "GET"
path = "/ok/{seq}"
expect = [200]
[[procedures.variants]]
query = 'supi={supi}&x={"a":1}'

[[procedures]]
name = "create"
tps = 20
method = "POST"
path = "/items"
body = '{"id":"{uuid}","n":{rand:1:9}}'
expect = [201]
produces = "items"

[[procedures]]
name = "token"
row = "P"
tps = 5
method = "POST"
path = "/oauth2/token"
body = "grant_type=client_credentials"
content_type = "application/x-www-form-urlencoded"
expect = [200]
optional_feature = "access token"

[[egress]]
name = "notifications"
row = "M"
sim = "notify"
tps = 10
feature = "NfStatusNotify"
"#;

async fn server(hits: Arc<AtomicU64>) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let hits = hits.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    // The kit reads /metrics at the start and end of the measured window: a
                    // histogram of one operation that puts every answer so far under 1 ms.
                    let metrics = req.uri().path() == "/metrics";
                    let n = if metrics {
                        hits.load(Ordering::Relaxed)
                    } else {
                        hits.fetch_add(1, Ordering::Relaxed)
                    };
                    async move {
                        let path = req.uri().path().to_string();
                        let rsp = if metrics {
                            let text = format!(
                                "sbi_request_duration_seconds_bucket{{le=\"0.001\",operation=\"Op\"}} {n}\n\
                                 sbi_request_duration_seconds_bucket{{le=\"0.005\",operation=\"Op\"}} {n}\n\
                                 sbi_request_duration_seconds_bucket{{le=\"+Inf\",operation=\"Op\"}} {n}\n"
                            );
                            Response::builder().status(200).body(Full::new(Bytes::from(text)))
                        } else if path.starts_with("/ok/") {
                            assert!(
                                req.uri().query().unwrap().contains("x=%7B%22a%22%3A1%7D"),
                                "query encoded"
                            );
                            Response::builder()
                                .status(200)
                                .body(Full::new(Bytes::from_static(b"{}")))
                        } else if path == "/items" {
                            Response::builder()
                                .status(201)
                                .header("location", "/items/abc")
                                .body(Full::new(Bytes::new()))
                        } else {
                            Response::builder()
                                .status(StatusCode::NOT_FOUND)
                                .body(Full::new(Bytes::new()))
                        };
                        Ok::<_, Infallible>(rsp.unwrap())
                    }
                });
                let _ = Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_runs_open_loop_and_writes_the_reports() {
    let hits = Arc::new(AtomicU64::new(0));
    let addr = server(hits.clone()).await;
    let scenario = bench::scenario::Scenario::from_toml(SCENARIO).unwrap();
    let out = tempfile::tempdir().unwrap();
    let r = bench::run_against(
        scenario,
        vec![("nrf".into(), format!("http://{addr}"))],
        100.0,
        2.0,
        0.5,
        out.path(),
    )
    .await
    .unwrap();

    for f in ["report.json", "report.md", "report.html"] {
        assert!(out.path().join(f).metadata().unwrap().len() > 500, "{f}");
    }
    let html = std::fs::read_to_string(out.path().join("report.html")).unwrap();
    assert!(html.contains("<svg") && !html.contains("<script"));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("report.json")).unwrap())
            .unwrap();
    assert_eq!(json["scenario"], "tiny");

    // 2.5 s at 100/s = 250 requests sent, 200 of them in the measured 2 s.
    assert_eq!(hits.load(Ordering::Relaxed), 250);
    let sent: u64 = r.procedures.iter().map(|p| p.sent).sum();
    assert_eq!(sent, 200);
    let ok = &r.procedures[0];
    assert!((ok.share_pct - 75.0).abs() < 1e-9);
    assert!(ok.sent > 120 && ok.sent < 180, "75 % of 200 ± noise: {}", ok.sent);
    assert_eq!(ok.success_rate, 1.0);
    assert!(ok.latency.p50_ms > 0.0 && ok.latency.p50_ms < 100.0);
    assert!(ok.latency.p50_ms <= ok.latency.p99_ms && ok.latency.p99_ms <= ok.latency.max_ms);
    assert_eq!(ok.verdict, "pass");
    // The optional feature answered only 404: marked, not failed.
    let token = &r.procedures[2];
    assert!(token.status.starts_with("not served by this build"), "{}", token.status);
    assert_eq!(token.success_rate, 0.0);
    assert!(r.criteria_passed, "{:?}", r.failures);
    // Nothing reached the notification sink: marked as not served, not hidden.
    assert!(r.egress[0].status.starts_with("not served by this build"));
    // Achieved TPS counts answers with an expected status in the measured window.
    let want = (r.procedures[0].ok + r.procedures[1].ok) as f64 / 2.0;
    assert!((r.totals.achieved_tps - want).abs() < 1e-9);
    assert!(r.totals.achieved_tps > 80.0 && r.totals.achieved_tps < 100.0);
    assert!(r.totals.nf_cpu_s.is_none(), "external target: NF CPU unknown");
    // Its own latency, from the two reads of its /metrics: the requests between them.
    assert_eq!(r.nf_latency.len(), 1, "{:?}", r.nf_latency);
    let own = &r.nf_latency[0];
    assert_eq!((own.nf.as_str(), own.operation.as_str()), ("nrf", "Op"));
    assert!(own.count > 180 && own.count < 220, "{own:?}");
    assert_eq!(own.under_5ms_pct, 100.0);
    assert!(own.p99_ms <= 1.0, "{own:?}");
    // At 100/s the generator itself never runs short: no slot waits, little CPU. Late sends
    // are left to the host's scheduler (a CI box running other tests stalls a thread for
    // 100 ms now and then), so they may flag the run, but then the warning must say so.
    let g = &r.generator;
    assert_eq!(g.slot_waits, 0, "{:?}", r.warnings);
    assert!(g.cpu_pct < 85.0, "{:?}", r.warnings);
    assert_eq!(g.saturated, g.late_sends >= 10 && g.late_sends as f64 / 250.0 > 0.01, "{g:?}");
    assert_eq!(r.warnings.iter().any(|w| w.contains("saturated")), g.saturated, "{:?}", r.warnings);
    assert!(r.timeline.len() >= 3);
    assert_eq!(r.timeline.iter().map(|t| t.offered).sum::<u64>(), 250);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generator_that_falls_behind_stops_and_fails_the_run() {
    // Answers never come in time: 2 slots, each held for the 1 s timeout, at 100/s offered.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let svc = service_fn(|_req: http::Request<hyper::body::Incoming>| async {
                    tokio::time::sleep(std::time::Duration::from_secs(10)).await;
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())))
                });
                let _ = Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    let toml = r#"
name = "slow"
description = "answers never come"
nfs = ["nrf"]
[load]
rate = 100
duration_s = 1
warmup_s = 0
max_outstanding = 2
timeout_ms = 1000
[[procedures]]
name = "slow"
tps = 100
method = "GET"
path = "/slow"
expect = [200]
"#;
    let scenario = bench::scenario::Scenario::from_toml(toml).unwrap();
    let out = tempfile::tempdir().unwrap();
    let t = std::time::Instant::now();
    let r = bench::run_against(
        scenario,
        vec![("nrf".into(), format!("http://{addr}"))],
        100.0,
        1.0,
        0.0,
        out.path(),
    )
    .await
    .unwrap();
    assert!(t.elapsed() < std::time::Duration::from_secs(8), "gave up in time: {:?}", t.elapsed());
    assert!(!r.criteria_passed);
    assert!(r.generator.saturated);
    assert!(r.generator.unsent > 80, "{:?}", r.generator);
    assert!(r.failures.iter().any(|f| f.contains("never sent")), "{:?}", r.failures);
    assert_eq!(r.procedures[0].outcomes.get("timeout").copied().unwrap_or(0), r.procedures[0].sent);
}
