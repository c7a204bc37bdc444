//! The server side of the SBI framework benchmark (docs/BENCHMARKS.md): a trivial GET served
//! either through the full fivecore layer stack or by bare hyper, so h2load can compare the two
//! in one run.
//!
//!     cargo run --release -p fivecore-sbi --example bench_server -- stack 127.0.0.1:18080
//!     cargo run --release -p fivecore-sbi --example bench_server -- bare  127.0.0.1:18081
//!
//! `OTLP_ENDPOINT=http://127.0.0.1:4318` gives the stack a tracer exporting to that collector
//! (docs/telemetry.md), to measure what a server span per request costs.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{header, HeaderValue, Method, StatusCode};
use http_body_util::Full;
use hyper_util::rt::{TokioExecutor, TokioIo};
use sbi::{HandlerResult, NfIdentity, Observability, Router, SbiRequest, SbiServer, ServerConfig};

const BODY: &[u8] =
    br#"{"nfInstanceId":"5a3c6b1e-0000-4000-8000-000000000001","nfStatus":"REGISTERED"}"#;

async fn ping(_: Arc<()>, _: SbiRequest) -> HandlerResult {
    // The same pre-encoded body as the bare server, so only the framework differs.
    let mut resp = http::Response::new(sbi::Body::from(Bytes::from_static(BODY)));
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    *resp.status_mut() = StatusCode::OK;
    Ok(resp)
}

async fn stack(addr: SocketAddr) {
    let router = Router::builder(Arc::new(()))
        .route(Method::GET, "/nbench/v1/ping", "Nbench_Ping", ping)
        .build();
    let obs = Observability::new();
    obs.set_ready(true);
    let cfg = ServerConfig { listen: addr, ..Default::default() };
    let mut server =
        SbiServer::bind(cfg, NfIdentity::new("BENCH", "bench-1"), router, obs).await.expect("bind");
    let otlp = std::env::var("OTLP_ENDPOINT")
        .ok()
        .filter(|v| !v.is_empty())
        .map(telemetry::OtlpConfig::new);
    let config = telemetry::TelemetryConfig { otlp, ..Default::default() };
    let traces = telemetry::Traces::start(&config, "BENCH", "bench-1").expect("telemetry");
    if let Some(t) = &traces {
        server = server.with_tracer(t.tracer());
    }
    server.serve(std::future::pending()).await.expect("serve");
}

async fn bare(addr: SocketAddr) {
    let listener = tokio::net::TcpListener::bind(addr).await.expect("bind");
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let _ = tcp.set_nodelay(true);
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(|_req| async {
                let mut resp = http::Response::new(Full::new(Bytes::from_static(BODY)));
                resp.headers_mut()
                    .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
                Ok::<_, Infallible>(resp)
            });
            let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .max_concurrent_streams(1024)
                .serve_connection(TokioIo::new(tcp), svc)
                .await;
        });
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "stack".into());
    let addr: SocketAddr =
        args.next().unwrap_or_else(|| "127.0.0.1:18080".into()).parse().expect("address");
    let threads: usize = std::env::var("WORKERS").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .expect("runtime");
    // Stop on SIGTERM with a normal exit, so profilers (callgrind) write their output.
    rt.block_on(async move {
        tokio::select! {
            () = async { match mode.as_str() { "bare" => bare(addr).await, _ => stack(addr).await } } => {}
            _ = sigterm() => {}
        }
    });
    std::process::exit(0);
}

async fn sigterm() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut s) => {
            s.recv().await;
        }
        Err(_) => std::future::pending().await,
    }
}
