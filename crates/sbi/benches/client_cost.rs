//! What one SBI client request costs the NF that sends it (issue #22: a PCF's SM create + delete
//! pair makes about seven outbound requests and must cost ≤ 100 µs of CPU in all).
//!
//!     cargo bench -p fivecore-sbi --bench client_cost
//!
//! A bare hyper h2c server (an SBI port's HTTP/2 settings, a 79-byte JSON answer) runs on its own
//! runtime and thread, as a producer in another process would; the client runs on another
//! runtime, so only the client runtime's threads are counted. For each scenario a fresh runtime
//! and client open one connection, send `CLIENT_COST_N` requests (default 20,000) after a
//! warm-up, and the bench prints per request, summed over the client's threads:
//!
//! - `cpu_us`: time on CPU, user and kernel (`/proc/self/task/<tid>/schedstat`, nanoseconds);
//! - `sys`: system calls entered (a per-thread `raw_syscalls:sys_enter` perf counter; needs
//!   root or `perf_event_paranoid` ≤ 1, else `-`);
//! - `csw`: context switches, voluntary and not (`/proc/self/task/<tid>/status`): each voluntary
//!   one is a thread parking, i.e. a wake-up to pay for later;
//! - `srv_us`: the server's CPU per request, for scale (not the client's cost).
//!
//! Scenarios: `sbi-*` go through [`SbiClient`] (pool, default headers, timeout, answer read);
//! `h2-*` through a bare `h2` client with the connection task spawned as hyper does: the floor.
//! `-seq` sends one request at a time, `-c16` keeps 16 in flight; `-mt2` runs the client on a
//! multi-thread runtime with two workers (an NF's runtime on this 2-CPU machine), `-ct` on a
//! current-thread runtime. `sbi-post-*` sends a 320-byte JSON body, as the PCF's calls do.
//!
//! `CLIENT_COST_ROUNDS` (default 3) repeats the whole list, alternating, and prints each round
//! and the median. `CLIENT_COST_ONLY=sbi-get-c16` runs only the scenarios whose name contains
//! that text. Instructions: this VM exposes no hardware counters to perf, so count them under
//! callgrind against an external server (`CLIENT_COST_TARGET`), at two request counts, and
//! divide the difference (the start-up cancels out):
//!
//!     CLIENT_COST_SERVE=127.0.0.1:18090 target/release/deps/client_cost-* &   # the producer alone
//!     for n in 2000 12000; do CLIENT_COST_TARGET=http://127.0.0.1:18090/nbench/v1/ping \
//!       CLIENT_COST_N=$n CLIENT_COST_ROUNDS=1 CLIENT_COST_ONLY=sbi-get-c16-ct \
//!       valgrind --tool=callgrind --callgrind-out-file=cg.$n target/release/deps/client_cost-*; done

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, Uri};
use http_body_util::{BodyExt, Full};
use sbi::client::{ClientConfig, SbiClient};

const BODY: &[u8] =
    br#"{"nfInstanceId":"5a3c6b1e-0000-4000-8000-000000000001","nfStatus":"REGISTERED"}"#;
const IN_FLIGHT: usize = 16;
const WARMUP: usize = 1_000;

// === Per-thread accounting ===

/// A thread the bench counts, found by its role.
struct Counted {
    role: &'static str,
    tid: i32,
    /// `raw_syscalls:sys_enter` counter of this thread, when the kernel allows one.
    syscalls: Option<std::fs::File>,
}

static THREADS: Mutex<Vec<Counted>> = Mutex::new(Vec::new());
static SYSCALL_TRACEPOINT: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();

fn register_thread(role: &'static str) {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    let syscalls = syscall_counter();
    THREADS.lock().unwrap().push(Counted { role, tid, syscalls });
}

fn forget_threads(role: &str) {
    THREADS.lock().unwrap().retain(|t| t.role != role);
}

/// `struct perf_event_attr` up to `config1` (PERF_ATTR_SIZE_VER1); the kernel zero-extends.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

/// A counter of the system calls the calling thread enters, counting from now.
fn syscall_counter() -> Option<std::fs::File> {
    use std::os::fd::FromRawFd;
    let id = (*SYSCALL_TRACEPOINT.get_or_init(|| {
        ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"].iter().find_map(|root| {
            std::fs::read_to_string(format!("{root}/events/raw_syscalls/sys_enter/id"))
                .ok()?
                .trim()
                .parse()
                .ok()
        })
    }))?;
    let attr = PerfEventAttr {
        kind: 2, // PERF_TYPE_TRACEPOINT
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: id,
        ..Default::default()
    };
    // SAFETY: perf_event_open reads `attr` (a valid, sized struct) and returns a new fd or -1;
    // pid 0 and cpu -1 count this thread on any CPU.
    let fd = unsafe {
        libc::syscall(libc::SYS_perf_event_open, &attr as *const PerfEventAttr, 0, -1, -1, 0)
    };
    // SAFETY: a non-negative return is an fd we own.
    (fd >= 0).then(|| unsafe { std::fs::File::from_raw_fd(fd as i32) })
}

#[derive(Clone, Copy, Default)]
struct Usage {
    cpu_ns: u64,
    syscalls: Option<u64>,
    switches: u64,
}

/// The summed usage of the live threads of `role`.
fn usage(role: &str) -> Usage {
    use std::io::Read;
    let threads = THREADS.lock().unwrap();
    let mut u = Usage { syscalls: Some(0), ..Usage::default() };
    for t in threads.iter().filter(|t| t.role == role) {
        let task = format!("/proc/self/task/{}", t.tid);
        let Ok(sched) = std::fs::read_to_string(format!("{task}/schedstat")) else {
            continue; // the thread has exited; it is not counted in either snapshot
        };
        u.cpu_ns += sched.split_whitespace().next().and_then(|v| v.parse().ok()).unwrap_or(0);
        let status = std::fs::read_to_string(format!("{task}/status")).unwrap_or_default();
        for line in status.lines() {
            if line.starts_with("voluntary_ctxt_switches") || line.starts_with("nonvoluntary") {
                u.switches +=
                    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0);
            }
        }
        u.syscalls = match (&t.syscalls, u.syscalls) {
            (Some(f), Some(sum)) => {
                let mut buf = [0u8; 8];
                (&*f).read_exact(&mut buf).ok().map(|()| sum + u64::from_ne_bytes(buf))
            }
            _ => None,
        };
    }
    u
}

// === The producer ===

/// A bare hyper h2c server with an SBI port's HTTP/2 settings, on its own thread and runtime.
fn start_server(addr: SocketAddr, requests: Arc<AtomicU64>) -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("server".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("server")
                .on_thread_start(|| register_thread("server"))
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
                tx.send(listener.local_addr().unwrap()).unwrap();
                loop {
                    let Ok((tcp, _)) = listener.accept().await else { continue };
                    let _ = tcp.set_nodelay(true);
                    let requests = requests.clone();
                    tokio::spawn(async move {
                        let svc = hyper::service::service_fn(move |req: Request<_>| {
                            let requests = requests.clone();
                            async move {
                                // Read the whole request body, as a producer does.
                                let _ = BodyExt::collect(req.into_body()).await;
                                requests.fetch_add(1, Ordering::Relaxed);
                                let mut rsp = Response::new(Full::new(Bytes::from_static(BODY)));
                                rsp.headers_mut().insert(
                                    header::CONTENT_TYPE,
                                    HeaderValue::from_static("application/json"),
                                );
                                Ok::<_, Infallible>(rsp)
                            }
                        });
                        let _ = hyper::server::conn::http2::Builder::new(
                            hyper_util::rt::TokioExecutor::new(),
                        )
                        .max_concurrent_streams(128)
                        .max_frame_size(64 * 1024)
                        .initial_stream_window_size(1024 * 1024)
                        .initial_connection_window_size(16 * 1024 * 1024)
                        .serve_connection(hyper_util::rt::TokioIo::new(tcp), svc)
                        .await;
                    });
                }
            });
        })
        .unwrap();
    rx.recv().unwrap()
}

// === The consumers ===

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    SbiGet,
    SbiPost,
    H2Get,
}

#[derive(Clone, Copy)]
enum Runtime {
    MultiThread(usize),
    CurrentThread,
}

#[derive(Clone, Copy)]
enum Pace {
    /// `n` requests in flight all the time, each task sending its next as soon as it has its
    /// answer: the most a connection carries, every thread busy.
    Saturated(usize),
    /// `n` concurrent requests every millisecond (a PCF's create fans out to the UDR, the CHF
    /// and the BSF at once): the threads park between ticks, as an NF's do below saturation.
    EveryMs(usize),
}

struct Scenario {
    kind: Kind,
    pace: Pace,
    runtime: Runtime,
}

impl Scenario {
    /// Paced scenarios send `CLIENT_COST_PACED_N` requests (default 3,000: 1 to 3 s).
    fn requests(&self, n: usize) -> usize {
        match self.pace {
            Pace::Saturated(_) => n,
            Pace::EveryMs(_) => env("CLIENT_COST_PACED_N", 3_000),
        }
    }

    fn name(&self) -> String {
        let kind = match self.kind {
            Kind::SbiGet => "sbi-get",
            Kind::SbiPost => "sbi-post",
            Kind::H2Get => "h2-get",
        };
        let conc = match self.pace {
            Pace::Saturated(1) => "seq".to_owned(),
            Pace::Saturated(n) => format!("c{n}"),
            Pace::EveryMs(n) => format!("{n}perms"),
        };
        let rt = match self.runtime {
            Runtime::MultiThread(n) => format!("mt{n}"),
            Runtime::CurrentThread => "ct".to_owned(),
        };
        format!("{kind}-{conc}-{rt}")
    }
}

/// A PCF's typical request body: a BSF PcfBinding, ~320 bytes of JSON.
fn post_body() -> serde_json::Value {
    serde_json::json!({
        "supi": "imsi-001010000000001", "gpsi": "msisdn-491511234567", "dnn": "internet",
        "ipv4Addr": "10.45.0.7", "snssai": {"sst": 1, "sd": "000001"},
        "pcfFqdn": "pcf.example.com", "pcfId": "5a3c6b1e-0000-4000-8000-000000000001",
        "pcfIpEndPoints": [{"ipv4Address": "127.0.0.1", "port": 7003}],
        "pcfDiamHost": "pcf.example.com", "pcfDiamRealm": "example.com",
        "recoveryTime": "2026-11-26T10:00:00Z", "suppFeat": "0"
    })
}

/// One request the way the scenario's client sends it.
enum Client {
    Sbi(SbiClient, String, serde_json::Value),
    H2(h2::client::SendRequest<Bytes>, Uri),
}

impl Client {
    async fn open(kind: Kind, url: &str) -> Client {
        match kind {
            Kind::SbiGet | Kind::SbiPost => {
                let c = SbiClient::new(&ClientConfig::default()).unwrap();
                Client::Sbi(c, url.to_owned(), post_body())
            }
            Kind::H2Get => {
                let uri: Uri = url.parse().unwrap();
                let a = uri.authority().unwrap();
                let tcp = tokio::net::TcpStream::connect((a.host(), a.port_u16().unwrap()))
                    .await
                    .unwrap();
                tcp.set_nodelay(true).unwrap();
                let (send, conn) = h2::client::Builder::new()
                    .initial_window_size(1 << 20)
                    .initial_connection_window_size(8 << 20)
                    .enable_push(false)
                    .handshake(tcp)
                    .await
                    .unwrap();
                tokio::spawn(conn);
                Client::H2(send, uri)
            }
        }
    }

    async fn one(&self, kind: Kind) {
        match self {
            Client::Sbi(c, url, body) => {
                let rsp = if kind == Kind::SbiPost {
                    c.post(url).json(body).send().await
                } else {
                    c.get(url).send().await
                };
                let rsp = rsp.expect("request");
                assert!(rsp.status().is_success(), "{}", rsp.status());
                assert_eq!(rsp.body().len(), BODY.len());
            }
            Client::H2(send, uri) => {
                let mut send = send.clone().ready().await.expect("ready");
                let req = Request::builder().method(Method::GET).uri(uri.clone()).body(()).unwrap();
                let (rsp, _) = send.send_request(req, true).expect("send");
                let rsp = rsp.await.expect("answer");
                assert!(rsp.status().is_success());
                let mut body = rsp.into_body();
                let mut n = 0;
                while let Some(chunk) = body.data().await {
                    let chunk = chunk.expect("body");
                    n += chunk.len();
                    let _ = body.flow_control().release_capacity(chunk.len());
                }
                assert_eq!(n, BODY.len());
            }
        }
    }
}

async fn drive(client: &Arc<Client>, kind: Kind, pace: Pace, n: usize) {
    let in_flight = match pace {
        Pace::Saturated(k) => k,
        Pace::EveryMs(k) => {
            // Ticks from a thread outside the runtime (not counted), as requests arriving from
            // the network would wake the NF: a tokio interval would add its own timer's costs.
            let ticks = n.div_ceil(k);
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            std::thread::spawn(move || {
                let start = Instant::now();
                for i in 1..=ticks {
                    let at = start + std::time::Duration::from_millis(i as u64);
                    std::thread::sleep(at.saturating_duration_since(Instant::now()));
                    if tx.send(()).is_err() {
                        return;
                    }
                }
            });
            for _ in 0..ticks {
                rx.recv().await.expect("pacer");
                futures_util::future::join_all((0..k).map(|_| client.one(kind))).await;
            }
            return;
        }
    };
    let tasks: Vec<_> = (0..in_flight)
        .map(|i| {
            let client = client.clone();
            let mine = n / in_flight + usize::from(i < n % in_flight);
            tokio::spawn(async move {
                for _ in 0..mine {
                    client.one(kind).await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("client task");
    }
}

async fn drive_task(client: &Arc<Client>, kind: Kind, pace: Pace, n: usize) {
    let client = client.clone();
    tokio::spawn(async move { drive(&client, kind, pace, n).await }).await.expect("client task");
}

struct Measured {
    client: Usage,
    server_ns: u64,
    wall_s: f64,
}

fn run(s: &Scenario, url: &str, n: usize) -> Measured {
    let n = s.requests(n);
    let (kind, pace, runtime) = (s.kind, s.pace, s.runtime);
    let url = url.to_owned();
    // The client runs on a thread of its own so a current-thread runtime is counted too.
    std::thread::Builder::new()
        .name("client".into())
        .spawn(move || {
            let mut b = match runtime {
                Runtime::MultiThread(workers) => {
                    let mut b = tokio::runtime::Builder::new_multi_thread();
                    b.worker_threads(workers).on_thread_start(|| register_thread("client"));
                    b
                }
                Runtime::CurrentThread => {
                    register_thread("client");
                    tokio::runtime::Builder::new_current_thread()
                }
            };
            let rt = b.thread_name("client").enable_all().build().unwrap();
            // The paced loop runs in a spawned task: on a multi-thread runtime `block_on`'s own
            // thread is not a worker (and not counted).
            let m = rt.block_on(async {
                let client = Arc::new(Client::open(kind, &url).await);
                let warmup = if matches!(pace, Pace::EveryMs(_)) { WARMUP / 10 } else { WARMUP };
                drive_task(&client, kind, pace, warmup).await;
                let (c0, s0, t0) = (usage("client"), usage("server"), Instant::now());
                drive_task(&client, kind, pace, n).await;
                let (c1, s1, wall) = (usage("client"), usage("server"), t0.elapsed());
                Measured {
                    client: Usage {
                        cpu_ns: c1.cpu_ns - c0.cpu_ns,
                        syscalls: c1.syscalls.zip(c0.syscalls).map(|(a, b)| a - b),
                        switches: c1.switches - c0.switches,
                    },
                    server_ns: s1.cpu_ns - s0.cpu_ns,
                    wall_s: wall.as_secs_f64(),
                }
            });
            drop(rt);
            forget_threads("client");
            m
        })
        .unwrap()
        .join()
        .unwrap()
}

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; this bench takes its settings from the environment.
    let n: usize = env("CLIENT_COST_N", 20_000);
    let rounds: usize = env("CLIENT_COST_ROUNDS", 3).max(1);
    let only = std::env::var("CLIENT_COST_ONLY").unwrap_or_default();
    let served = Arc::new(AtomicU64::new(0));
    if let Ok(addr) = std::env::var("CLIENT_COST_SERVE") {
        // Only the producer, for a client counted under callgrind in another process.
        let addr = start_server(addr.parse().expect("CLIENT_COST_SERVE address"), served);
        println!("client_cost: serving http://{addr}/nbench/v1/ping");
        loop {
            std::thread::park();
        }
    }
    let url = match std::env::var("CLIENT_COST_TARGET") {
        Ok(url) => url,
        Err(_) => {
            let addr = start_server("127.0.0.1:0".parse().unwrap(), served.clone());
            format!("http://{addr}/nbench/v1/ping")
        }
    };

    let mut scenarios = Vec::new();
    for runtime in [Runtime::MultiThread(2), Runtime::CurrentThread] {
        for kind in [Kind::SbiGet, Kind::H2Get, Kind::SbiPost] {
            for pace in [Pace::Saturated(1), Pace::Saturated(IN_FLIGHT)] {
                scenarios.push(Scenario { kind, pace, runtime });
            }
        }
    }
    for runtime in [Runtime::MultiThread(1), Runtime::MultiThread(2)] {
        for (kind, pace) in [
            (Kind::H2Get, Pace::EveryMs(1)),
            (Kind::SbiGet, Pace::EveryMs(1)),
            (Kind::SbiPost, Pace::EveryMs(1)),
            (Kind::SbiPost, Pace::EveryMs(3)),
        ] {
            scenarios.push(Scenario { kind, pace, runtime });
        }
    }
    scenarios.retain(|s| s.name().contains(&only));

    println!("client_cost: {n} requests per scenario, {rounds} rounds; per request:");
    let mut results: Vec<Vec<Measured>> = scenarios.iter().map(|_| Vec::new()).collect();
    for round in 1..=rounds {
        for (s, res) in scenarios.iter().zip(&mut results) {
            let m = run(s, &url, n);
            let n = s.requests(n);
            println!(
                "  round {round} {:<18} cpu_us {:>6.2}  sys {:>5}  csw {:>5.2}  srv_us {:>6.2}  req/s {:>7.0}",
                s.name(),
                m.client.cpu_ns as f64 / n as f64 / 1e3,
                m.client.syscalls.map_or("-".into(), |v| format!("{:.2}", v as f64 / n as f64)),
                m.client.switches as f64 / n as f64,
                m.server_ns as f64 / n as f64 / 1e3,
                n as f64 / m.wall_s,
            );
            res.push(m);
        }
    }
    println!("median of {rounds} rounds:");
    println!("  {:<18} {:>7} {:>6} {:>6} {:>7}", "scenario", "cpu_us", "sys", "csw", "srv_us");
    for (s, res) in scenarios.iter().zip(&results) {
        let n = s.requests(n);
        let per = |f: &dyn Fn(&Measured) -> f64| {
            median(&mut res.iter().map(|m| f(m) / n as f64).collect::<Vec<_>>())
        };
        let sys = res.iter().all(|m| m.client.syscalls.is_some());
        println!(
            "  {:<18} {:>7.2} {:>6} {:>6.2} {:>7.2}",
            s.name(),
            per(&|m| m.client.cpu_ns as f64 / 1e3),
            if sys {
                format!("{:.2}", per(&|m| m.client.syscalls.unwrap_or(0) as f64))
            } else {
                "-".into()
            },
            per(&|m| m.client.switches as f64),
            per(&|m| m.server_ns as f64 / 1e3),
        );
    }
    let expected: u64 = scenarios.iter().map(|s| (rounds * s.requests(n)) as u64).sum();
    if std::env::var("CLIENT_COST_TARGET").is_err() {
        // Every request reached the producer (so none was answered by anything else).
        assert!(served.load(Ordering::Relaxed) >= expected, "the server saw too few requests");
    }
}
