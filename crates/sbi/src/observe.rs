//! What every SBI port says about itself: `/metrics` (Prometheus text, including process CPU and
//! RSS read from /proc), `/healthz/live` and `/healthz/ready`. These are answered before the layer
//! stack so that an overloaded NF still reports its state to its orchestrator.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use http::{header, HeaderValue, StatusCode};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use crate::body::Body;
use crate::problem::{cause, ProblemDetails};
use crate::router::{empty_response, Response};

pub const METRICS_PATH: &str = "/metrics";
pub const LIVE_PATH: &str = "/healthz/live";
pub const READY_PATH: &str = "/healthz/ready";

/// Shared by an NF's SBI server and its internals: the metric registry and the readiness flag.
#[derive(Clone)]
pub struct Observability {
    registry: Arc<Mutex<Registry>>,
    ready: Arc<AtomicBool>,
    /// Set once the NF begins to stop: from then on it is not ready, whatever `ready` says (a
    /// deferred loader finishing during the stop must not make it ready again).
    stopping: Arc<AtomicBool>,
}

impl Default for Observability {
    fn default() -> Self {
        Self::new()
    }
}

impl Observability {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let ready = Arc::new(AtomicBool::new(false));
        let stopping = Arc::new(AtomicBool::new(false));
        registry.register_collector(Box::new(ProcessCollector {
            ready: ready.clone(),
            stopping: stopping.clone(),
        }));
        Observability { registry: Arc::new(Mutex::new(registry)), ready, stopping }
    }

    /// Registers NF-specific metrics. Registration happens at start-up, never per request.
    pub fn with_registry<T>(&self, f: impl FnOnce(&mut Registry) -> T) -> T {
        let mut reg = self.registry.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut reg)
    }

    /// An NF calls this once its state is loaded and it can serve.
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    /// The NF has begun to stop (shutdown asked): /healthz/ready answers 503 from now on, so a
    /// load balancer stops sending it new work while it drains.
    pub fn set_stopping(&self) {
        self.stopping.store(true, Ordering::Release);
    }

    pub fn is_ready(&self) -> bool {
        ready_now(&self.ready, &self.stopping)
    }

    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(8 * 1024);
        let reg = self.registry.lock().unwrap_or_else(|e| e.into_inner());
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &reg);
        out
    }

    /// Answers the three built-in paths; `None` for anything else.
    pub fn answer(&self, path: &str) -> Option<Response> {
        match path {
            METRICS_PATH => {
                let mut resp = http::Response::new(Body::from(self.encode()));
                resp.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    ),
                );
                Some(resp)
            }
            LIVE_PATH => Some(empty_response(StatusCode::OK)),
            READY_PATH if self.is_ready() => Some(empty_response(StatusCode::OK)),
            READY_PATH => Some(
                ProblemDetails::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    cause::NF_CONGESTION,
                    if self.stopping.load(Ordering::Acquire) {
                        "not ready: stopping"
                    } else {
                        "not ready: state is still loading"
                    },
                )
                .into_response(),
            ),
            _ => None,
        }
    }
}

/// Process CPU time and resident memory, read at scrape time, and the readiness flag: what
/// /healthz/ready answers, as a series an alert rule can watch.
#[derive(Debug)]
struct ProcessCollector {
    ready: Arc<AtomicBool>,
    stopping: Arc<AtomicBool>,
}

fn ready_now(ready: &AtomicBool, stopping: &AtomicBool) -> bool {
    ready.load(Ordering::Acquire) && !stopping.load(Ordering::Acquire)
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let ready = ConstGauge::new(i64::from(ready_now(&self.ready, &self.stopping)));
        let m = encoder.encode_descriptor(
            "nf_ready",
            "1 when /healthz/ready answers 200 (state loaded, serving), 0 while it answers 503",
            None,
            ready.metric_type(),
        )?;
        ready.encode(m)?;
        if let Some(usage) = ProcessUsage::read_self() {
            let cpu = ConstCounter::new(usage.cpu_seconds());
            let m = encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds.",
                None,
                cpu.metric_type(),
            )?;
            cpu.encode(m)?;
            let rss = ConstGauge::new(usage.rss_bytes as i64);
            let m = encoder.encode_descriptor(
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                None,
                rss.metric_type(),
            )?;
            rss.encode(m)?;
            let threads = ConstGauge::new(usage.threads as i64);
            let m = encoder.encode_descriptor(
                "process_threads",
                "Number of OS threads in the process.",
                None,
                threads.metric_type(),
            )?;
            threads.encode(m)?;
        }
        // Growth of these two over a soak is a leak (issue #27): descriptors left open, tasks
        // that never end.
        if let Some(fds) = open_fds("self") {
            let g = ConstGauge::new(fds as i64);
            let m = encoder.encode_descriptor(
                "process_open_fds",
                "Number of open file descriptors.",
                None,
                g.metric_type(),
            )?;
            g.encode(m)?;
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let g = ConstGauge::new(rt.metrics().num_alive_tasks() as i64);
            let m = encoder.encode_descriptor(
                "tokio_alive_tasks",
                "Tasks alive on the runtime that serves this port (in `fivecore up`, every NF's).",
                None,
                g.metric_type(),
            )?;
            g.encode(m)?;
        }
        Ok(())
    }
}

/// CPU and memory of a process from /proc, shared with the benchmark kit which reads its NFs'.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessUsage {
    pub utime_ticks: u64,
    pub stime_ticks: u64,
    pub rss_bytes: u64,
    pub threads: u64,
}

impl ProcessUsage {
    pub fn read_self() -> Option<Self> {
        Self::read("self")
    }

    pub fn read_pid(pid: u32) -> Option<Self> {
        Self::read(&pid.to_string())
    }

    fn read(pid: &str) -> Option<Self> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name may contain spaces and parentheses: fields start after the last ')'.
        let rest = &stat[stat.rfind(')')? + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // After the name: state(3) ... utime(14) stime(15) ... rss(24), 1-based in proc(5).
        let utime_ticks = fields.get(11)?.parse().ok()?;
        let stime_ticks = fields.get(12)?.parse().ok()?;
        let threads = fields.get(17)?.parse().ok()?;
        let rss_pages: u64 = fields.get(21)?.parse().ok()?;
        Some(ProcessUsage { utime_ticks, stime_ticks, rss_bytes: rss_pages * page_size(), threads })
    }

    pub fn cpu_seconds(&self) -> f64 {
        (self.utime_ticks + self.stime_ticks) as f64 / clock_ticks() as f64
    }
}

/// Resident memory of a process by kind, from /proc/<pid>/status: anonymous pages (heap and
/// stacks: what a leak grows), file-backed pages (mapped files such as SQLite's memory map,
/// which fill up to the map's size as pages are read and are given back under pressure) and
/// shared memory.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RssSplit {
    pub anon_bytes: u64,
    pub file_bytes: u64,
    pub shmem_bytes: u64,
}

impl RssSplit {
    /// `self` or a pid; None where the kernel has no such lines (before Linux 4.5).
    pub fn read(pid: &str) -> Option<Self> {
        Self::parse(&std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?)
    }

    fn parse(status: &str) -> Option<Self> {
        let kib = |key: &str| -> Option<u64> {
            let line = status.lines().find(|l| l.starts_with(key))?;
            let v = line[key.len()..].trim().trim_end_matches("kB").trim();
            v.parse::<u64>().ok().map(|k| k * 1024)
        };
        Some(RssSplit {
            anon_bytes: kib("RssAnon:")?,
            file_bytes: kib("RssFile:")?,
            shmem_bytes: kib("RssShmem:")?,
        })
    }
}

/// Open file descriptors of a process (`self` or a pid): the entries of /proc/<pid>/fd.
pub fn open_fds(pid: &str) -> Option<u64> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64)
}

fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions; it only reads a system constant.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

fn page_size() -> u64 {
    // SAFETY: as above.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_include_process_cpu_and_rss() {
        let o = Observability::new();
        let text = o.encode();
        assert!(text.contains("process_cpu_seconds_total"), "{text}");
        assert!(text.contains("process_resident_memory_bytes"), "{text}");
        assert!(text.contains("process_open_fds"), "{text}");
        assert!(text.contains("process_threads"), "{text}");
        let usage = ProcessUsage::read_self().unwrap();
        assert!(usage.threads >= 1, "threads {}", usage.threads);
        assert!(open_fds("self").unwrap() >= 3);
        let rss = ProcessUsage::read_self().unwrap().rss_bytes;
        assert!(rss > 1024 * 1024, "rss {rss}");
    }

    #[test]
    fn resident_memory_by_kind() {
        let status = "Name:\tfivecore\nVmRSS:\t  2040 kB\nRssAnon:\t    1000 kB\nRssFile:\t    1024 kB\nRssShmem:\t      16 kB\n";
        let r = RssSplit::parse(status).unwrap();
        assert_eq!(
            r,
            RssSplit { anon_bytes: 1_024_000, file_bytes: 1_048_576, shmem_bytes: 16_384 }
        );
        assert_eq!(RssSplit::parse("Name:\tx\nVmRSS:\t1 kB\n"), None);
        // This process's own, read from the kernel: the heap of a test binary is anonymous.
        let own = RssSplit::read("self").unwrap();
        assert!(own.anon_bytes > 0 && own.file_bytes > 0, "{own:?}");
    }

    #[tokio::test]
    async fn metrics_count_the_runtime_tasks() {
        let o = Observability::new();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let t = tokio::spawn(async move {
            let _ = rx.await;
        });
        let text = o.encode();
        let line = text.lines().find(|l| l.starts_with("tokio_alive_tasks ")).expect(&text);
        let n: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        assert!(n >= 1, "{line}");
        let _ = tx.send(());
        t.await.unwrap();
    }

    #[test]
    fn readiness_follows_the_flag() {
        let o = Observability::new();
        assert_eq!(o.answer(READY_PATH).unwrap().status(), 503);
        assert!(o.encode().contains("nf_ready 0"));
        o.set_ready(true);
        assert_eq!(o.answer(READY_PATH).unwrap().status(), 200);
        assert!(o.encode().contains("nf_ready 1"));
        assert_eq!(o.answer(LIVE_PATH).unwrap().status(), 200);
        assert!(o.answer("/other").is_none());
    }
}
