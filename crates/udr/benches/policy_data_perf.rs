//! A short measurement of the reference's 17.2K policy-data mix (T4c): subs-to-notify POST 26 %,
//! sm-data GET 27 %, subs-to-notify DELETE 8 %, sm-data PATCH 39 % with one notification per
//! PATCH, over real sockets, the client and the notification sink in the same process.
//! A benchmark program (`harness = false`), not a test: run it alone, optimised:
//!
//! ```text
//! POLICY_UES=100000 POLICY_OPS=200000 cargo bench -p fivecore-udr --bench policy_data_perf
//! ```
//!
//! It prints operations per second and the CPU per operation of the UDR's threads (its tokio
//! workers and the store's threads); the client and the notification sink run on a runtime of
//! their own (threads named `load`), counted apart. The load is closed (`POLICY_CONCURRENCY`
//! requests outstanding), so on a shared machine it slows down instead of timing out, and the
//! CPU per operation stays comparable. For A/B runs of one build: `POLICY_COMMIT_DELAY_US`
//! (`[store] commit_delay_us`), `POLICY_NOTIFY_BATCH` (`[udr.policy.notify] batch_size`; 1 sends
//! one notification per request), `POLICY_READERS` (`[store] readers`, default 1).

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// About 2.5 KB of SmPolicyData, the size of the reference's T4b/T4c profile (the kit's too).
fn sm_data(volume: u64) -> Value {
    udr::preload::sm_data_document(volume)
}

fn ue(i: usize) -> String {
    format!("imsi-00101{i:010}")
}

fn main() {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(t4c_policy_data_mix());
}

async fn t4c_policy_data_mix() {
    let ues = env("POLICY_UES", 20_000);
    let ops = env("POLICY_OPS", 40_000);
    let concurrency = env("POLICY_CONCURRENCY", 64);
    let dir = tempfile::tempdir().unwrap();
    let mut config = policy_config();
    config.policy.max_subscriptions = 10_000_000;
    config.policy.notify.batch_size = env("POLICY_NOTIFY_BATCH", config.policy.notify.batch_size);
    let defaults = store::SqliteConfig::default();
    let store = store::SqliteConfig {
        readers: env("POLICY_READERS", 1),
        commit_delay_us: Some(env(
            "POLICY_COMMIT_DELAY_US",
            defaults.commit_delay().as_micros() as usize,
        ) as u64),
        ..store::SqliteConfig::new(dir.path().join("udr.db"))
    };
    eprintln!("store: {store:?}; notify batch_size {}", config.policy.notify.batch_size);
    let udr = PerfUdr::start(config, store).await;
    let started = Instant::now();
    let doc = sm_data(1);
    for chunk in (0..ues).collect::<Vec<_>>().chunks(20_000) {
        let profiles: Vec<(String, Value)> =
            chunk.iter().map(|i| (ue(*i), json!({"smData": doc}))).collect();
        udr.udr.stores.policy.put_profiles(profiles).await.unwrap();
    }
    eprintln!(
        "preload: {ues} UEs ({} bytes of sm-data each) in {:?}",
        doc.to_string().len(),
        started.elapsed()
    );

    // Notifications go to an in-process sink that counts them.
    let received = Arc::new(AtomicU64::new(0));

    // The load (client and sink) on its own runtime, so its CPU is not the UDR's.
    let load = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("load")
        .enable_all()
        .build()
        .unwrap();
    let c = client();
    // Subscriptions live in a pool: POST adds one (on a random UE), DELETE removes the oldest,
    // PATCH changes the sm-data of a subscribed UE (one notification per PATCH).
    let pool: Arc<Mutex<std::collections::VecDeque<(usize, String)>>> = Arc::default();
    let next = Arc::new(AtomicUsize::new(0));
    let patches = Arc::new(AtomicU64::new(0));
    let cpu0 = thread_cpu();
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    let sink = load.spawn(sink_addr(received.clone())).await.unwrap();
    let notify_url = format!("http://{sink}/notify");
    for w in 0..concurrency {
        let (c, pool, next, patches) = (c.clone(), pool.clone(), next.clone(), patches.clone());
        let base = udr.base.clone();
        let notify_url = notify_url.clone();
        tasks.push(load.spawn(async move {
            let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ (w as u64 + 1);
            let mut rand = move || {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng
            };
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= ops {
                    return;
                }
                let pick = (rand() % 100) as u32;
                let u = (rand() as usize) % ues;
                let smd = |u: usize| format!("{base}/nudr-dr/v2/policy-data/ues/{}/sm-data", ue(u));
                if pick < 26 {
                    let sub = json!({"notificationUri": notify_url, "monitoredResourceUris": [smd(u)]});
                    let r = post_json(&c, &format!("{base}/nudr-dr/v2/policy-data/subs-to-notify"), &sub).await;
                    assert_eq!(r.status(), 201);
                    pool.lock().unwrap().push_back((u, r.header("location").unwrap().to_owned()));
                } else if pick < 53 {
                    let r = get(&c, &smd(u)).await;
                    assert_eq!(r.status(), 200);
                } else if pick < 61 {
                    let victim = pool.lock().unwrap().pop_front();
                    if let Some((_, loc)) = victim {
                        assert_eq!(delete(&c, &loc).await.status(), 204);
                    }
                } else {
                    let target = {
                        let p = pool.lock().unwrap();
                        if p.is_empty() { u } else { p[(rand() as usize) % p.len()].0 }
                    };
                    let patch = json!({"umData": {"lim1": {"limitId": "lim1", "allowedUsage": {"totalVolume": rand() % 1_000_000}}}});
                    let r = merge_patch(&c, &smd(target), &patch).await;
                    assert_eq!(r.status(), 204);
                    patches.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let elapsed = t0.elapsed();
    // Let the notifications drain (delivered, or gone with their subscription) before reading
    // the CPU.
    let recorded = udr.udr.policy.stats.recorded.get();
    for _ in 0..1000 {
        if udr.udr.stores.policy.outbox_len().await.unwrap() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let drained = t0.elapsed();
    let cpu1 = thread_cpu();
    let (udr_cpu, load_cpu) = (cpu1.0 - cpu0.0, cpu1.1 - cpu0.1);
    let got = received.load(Ordering::Relaxed);
    eprintln!(
        "{ops} operations ({} PATCH), {concurrency} concurrent: {:.0} ops/s; {got} of {recorded} notifications \
         delivered (the others' subscriptions ended first; {:.2} s with the drain); UDR CPU {:.2} s = \
         {:.1} us per operation ({:.0} operations per UDR CPU second); load CPU {:.2} s",
        patches.load(Ordering::Relaxed),
        ops as f64 / elapsed.as_secs_f64(),
        drained.as_secs_f64(),
        udr_cpu,
        udr_cpu * 1e6 / ops as f64,
        ops as f64 / udr_cpu,
        load_cpu,
    );
    let st = &udr.udr.policy.stats;
    eprintln!(
        "notifications: delivered {}, retried {}, dropped {}; store: {:?}",
        st.delivered.get(),
        st.retried.get(),
        st.dropped.get(),
        udr.udr.stores.stats()
    );
    udr.stop().await;
    load.shutdown_background();
}

/// The UDR under measurement, with the store settings given.
struct PerfUdr {
    base: String,
    udr: Arc<udr::Udr>,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), udr::UdrError>>,
}

impl PerfUdr {
    async fn start(config: udr::UdrConfig, store: store::SqliteConfig) -> PerfUdr {
        let run = udr::RunConfig {
            udr: config,
            sbi: sbi::ServerConfig::default(),
            client: sbi::client::ClientConfig {
                request_timeout_ms: 1000,
                ..sbi::client::ClientConfig::default()
            },
            store,
            instance_id: None,
        };
        let bound = udr::bind(run).await.expect("UDR starts");
        let base = format!("http://{}", bound.local_addr());
        let udr = bound.udr().clone();
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(bound.serve(async {
            let _ = rx.await;
        }));
        PerfUdr { base, udr, stop, task }
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.unwrap().unwrap();
    }
}

/// A counting notification sink (answers 204), its address.
async fn sink_addr(counter: Arc<AtomicU64>) -> std::net::SocketAddr {
    use http_body_util::BodyExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { return };
            let counter = counter.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let counter = counter.clone();
                        async move {
                            let b = req
                                .into_body()
                                .collect()
                                .await
                                .map(|c| c.to_bytes())
                                .unwrap_or_default();
                            // Count the notifications: top-level objects of the array.
                            let n = serde_json::from_slice::<Value>(&b)
                                .ok()
                                .and_then(|v| v.as_array().map(Vec::len))
                                .unwrap_or(0);
                            counter.fetch_add(n as u64, Ordering::Relaxed);
                            let mut resp = hyper::Response::new(http_body_util::Full::new(
                                bytes::Bytes::new(),
                            ));
                            *resp.status_mut() = hyper::StatusCode::NO_CONTENT;
                            Ok::<_, std::convert::Infallible>(resp)
                        }
                    },
                );
                let _ = hyper_util::server::conn::auto::Builder::new(
                    hyper_util::rt::TokioExecutor::new(),
                )
                .serve_connection(hyper_util::rt::TokioIo::new(tcp), svc)
                .await;
            });
        }
    });
    addr
}

/// User + system CPU seconds of this process's threads: (the UDR's, the load's), from
/// /proc/self/task/*/stat.
fn thread_cpu() -> (f64, f64) {
    let (mut udr, mut load) = (0.0, 0.0);
    for t in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        let Some((head, rest)) = stat.rsplit_once(')') else { continue };
        let name = head.split_once('(').map_or("", |(_, n)| n);
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        // utime and stime, fields 14 and 15 of stat: the 12th and 13th after the ")".
        let secs = (ticks(11) + ticks(12)) / 100.0;
        match name {
            "load" => load += secs,
            n if n.starts_with("tokio-r") || n.starts_with("store-") => udr += secs,
            _ => {}
        }
    }
    (udr, load)
}
