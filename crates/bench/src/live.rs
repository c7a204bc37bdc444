//! `fivecore bench --metrics-listen ADDR`: the run's live figures in Prometheus text on
//! `http://ADDR/metrics`, for a dashboard (deploy/grafana/fivecore-bench.json) to follow a long
//! run (a soak) while it lasts, rather than reading the report at its end:
//! - `bench_requests_total{procedure, outcome}`: answers by procedure, `ok` (the procedure's
//!   expected answer) or `failed` (anything else: another status, a timeout, a lost connection);
//! - `bench_latency_seconds{procedure}`: from the intended send time (the open loop's schedule)
//!   to the answer, as the report measures it;
//! - `bench_outstanding`: requests sent and not answered yet;
//! - `bench_target_rate`: the arrival rate asked for (requests/s; 0 in the closed loop).
//!
//! Served by the SBI crate's own server (so `/healthz/*`, process CPU and RSS come with it), on
//! its own thread and runtime: scraping never runs on the generator's threads. Each procedure's
//! handles are made when the run starts, so recording an answer costs two atomic additions and
//! a histogram observation, no label hashing.

use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::{Context, Result};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;

/// Upper bounds, seconds: the NFs' 1-2-5 steps from 50 µs to 5 s, then 10 s and 30 s (a
/// request the kit gives up on waits its timeout).
const BUCKETS: [f64; 18] = [
    0.000_05, 0.000_1, 0.000_2, 0.000_5, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0,
    2.0, 5.0, 10.0, 30.0,
];

type Labels = Vec<(&'static str, String)>;

/// The families, registered once on the metrics server's registry.
struct Families {
    requests: Family<Labels, Counter>,
    latency: Family<Labels, Histogram, fn() -> Histogram>,
    outstanding: Gauge,
    /// The target rate, requests per second.
    target: Gauge<f64, AtomicU64>,
}

static LIVE: OnceLock<Families> = OnceLock::new();

fn histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

/// Starts the metrics server on `addr` (port 0: one the system chooses) and returns the address
/// it is bound to. Once per process: the figures of every run that follows are served there.
pub fn serve(addr: SocketAddr) -> Result<SocketAddr> {
    let obs = sbi::Observability::new();
    let families = Families {
        requests: Family::default(),
        latency: Family::new_with_constructor(histogram as fn() -> Histogram),
        outstanding: Gauge::default(),
        target: Gauge::default(),
    };
    obs.with_registry(|r| {
        r.register(
            "bench_requests",
            "Answers the kit received, by procedure and outcome (ok: the expected answer)",
            families.requests.clone(),
        );
        r.register(
            "bench_latency_seconds",
            "Time from a request's intended send time to its answer, by procedure",
            families.latency.clone(),
        );
        r.register(
            "bench_outstanding",
            "Requests sent and not answered yet",
            families.outstanding.clone(),
        );
        r.register(
            "bench_target_rate",
            "The arrival rate the run asks for, requests per second (0: closed loop)",
            families.target.clone(),
        );
    });
    if LIVE.set(families).is_err() {
        anyhow::bail!("--metrics-listen: the metrics server is already running");
    }
    let (bound_tx, bound_rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("bench-metrics".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(r) => r,
                Err(e) => {
                    let _ = bound_tx.send(Err(anyhow::Error::from(e)));
                    return;
                }
            };
            runtime.block_on(async move {
                let config = sbi::ServerConfig { listen: addr, ..Default::default() };
                let router = sbi::Router::builder(Arc::new(())).build();
                let identity = sbi::NfIdentity::new("BENCH", "fivecore-bench");
                match sbi::SbiServer::bind(config, identity, router, obs.clone()).await {
                    Ok(server) => {
                        obs.set_ready(true);
                        let _ = bound_tx.send(Ok(server.local_addr()));
                        // Serves until the process ends.
                        if let Err(e) = server.serve(std::future::pending()).await {
                            eprintln!("fivecore bench: the metrics server stopped: {e}");
                        }
                    }
                    Err(e) => {
                        let _ = bound_tx.send(Err(anyhow::Error::from(e)));
                    }
                }
            });
        })
        .context("cannot start the metrics server's thread")?;
    bound_rx
        .recv_timeout(Duration::from_secs(10))
        .context("the metrics server did not start")?
        .with_context(|| format!("--metrics-listen {addr}"))
}

/// One run's handles: per procedure (in the scenario's order) its two outcome counters and its
/// latency histogram. `None` when no metrics server runs.
pub struct RunMetrics {
    procs: Vec<([Counter; 2], Histogram)>,
    outstanding: Gauge,
}

/// The handles of a run of `procedures` at `rate` requests/s, when `--metrics-listen` is on.
pub fn run(procedures: &[&str], rate: f64) -> Option<Arc<RunMetrics>> {
    let f = LIVE.get()?;
    f.target.set(rate);
    let procs = procedures
        .iter()
        .map(|name| {
            let counter = |outcome: &'static str| {
                f.requests
                    .get_or_create(&vec![
                        ("procedure", name.to_string()),
                        ("outcome", outcome.into()),
                    ])
                    .clone()
            };
            let latency = f.latency.get_or_create(&vec![("procedure", name.to_string())]).clone();
            ([counter("ok"), counter("failed")], latency)
        })
        .collect();
    Some(Arc::new(RunMetrics { procs, outstanding: f.outstanding.clone() }))
}

impl RunMetrics {
    pub fn sending(&self) {
        self.outstanding.inc();
    }

    /// One answer of procedure `pi` (its index in the scenario).
    pub fn answered(&self, pi: usize, ok: bool, latency: Duration) {
        self.outstanding.dec();
        if let Some((outcomes, hist)) = self.procs.get(pi) {
            outcomes[usize::from(!ok)].inc();
            hist.observe(latency.as_secs_f64());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_figures_of_a_run_are_served_while_it_lasts() {
        let addr = serve("127.0.0.1:0".parse().unwrap()).unwrap();
        let m = run(&["Nbsf_Register", "Nbsf_Discovery"], 250.0).unwrap();
        m.sending();
        m.sending();
        m.answered(0, true, Duration::from_micros(700));
        m.answered(1, false, Duration::from_millis(30));
        m.sending();
        let text = get(addr, "/metrics");
        for line in [
            "bench_requests_total{procedure=\"Nbsf_Register\",outcome=\"ok\"} 1",
            "bench_requests_total{procedure=\"Nbsf_Register\",outcome=\"failed\"} 0",
            "bench_requests_total{procedure=\"Nbsf_Discovery\",outcome=\"failed\"} 1",
            "bench_latency_seconds_bucket{le=\"0.001\",procedure=\"Nbsf_Register\"} 1",
            "bench_latency_seconds_bucket{le=\"0.02\",procedure=\"Nbsf_Discovery\"} 0",
            "bench_latency_seconds_bucket{le=\"0.05\",procedure=\"Nbsf_Discovery\"} 1",
            "bench_outstanding 1",
            "bench_target_rate 250.0",
            "process_resident_memory_bytes",
        ] {
            assert!(text.contains(line), "{line} missing:\n{text}");
        }
        assert!(get(addr, "/healthz/ready").starts_with("HTTP/1.1 200"));
        // A second server in the same process is refused.
        assert!(serve("127.0.0.1:0".parse().unwrap()).is_err());
    }

    fn get(addr: SocketAddr, path: &str) -> String {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }
}
