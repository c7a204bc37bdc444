//! Kit-free measurement of Nbsf_Management throughput over real sockets with a large preloaded
//! binding table: `BSF_PRELOAD` bindings (default 1,000,000) are bulk-inserted, then
//! `BSF_CYCLES` create → discover → delete cycles (default 20,000) run from `BSF_CONCURRENCY`
//! concurrent h2c streams (default 64) of one SbiClient, each operation timed separately.
//!
//! `cargo bench -p fivecore-bsf --bench bindings` (release). docs/bsf.md has the figures.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bsf::models::validate_binding;
use serde_json::{json, Value};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn binding(n: u64) -> Value {
    json!({
        "supi": format!("imsi-00101{n:010}"),
        "gpsi": format!("msisdn-3361{n:08}"),
        "ipv4Addr": format!("10.{}.{}.{}", (n >> 16) & 255, (n >> 8) & 255, n & 255),
        "ipv6Prefix": format!("2001:db8:{:x}:{:x}::/64", (n >> 16) & 0xffff, n & 0xffff),
        "dnn": "internet",
        "snssai": {"sst": 1, "sd": "000001"},
        "pcfFqdn": "pcf1.example.com",
        "pcfIpEndPoints": [{"ipv4Address": "192.0.2.10", "port": 8080}],
        "pcfDiamHost": "pcf1.example.com",
        "pcfDiamRealm": "example.com",
    })
}

#[derive(Default)]
struct Timer {
    total_us: AtomicU64,
    max_us: AtomicU64,
}

impl Timer {
    fn add(&self, d: Duration) {
        let us = d.as_micros() as u64;
        self.total_us.fetch_add(us, Ordering::Relaxed);
        self.max_us.fetch_max(us, Ordering::Relaxed);
    }
}

fn main() {
    let preload = env("BSF_PRELOAD", 1_000_000);
    let cycles = env("BSF_CYCLES", 20_000);
    let concurrency = env("BSF_CONCURRENCY", 64);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async move {
        let dir = tempfile::tempdir().unwrap();
        let run = bsf::RunConfig {
            bsf: bsf::BsfConfig::default(),
            sbi: sbi::ServerConfig::default(),
            client: sbi::client::ClientConfig::default(),
            store: store::SqliteConfig::new(dir.path().join("bsf.db")),
            instance_id: None,
        };
        let bound = bsf::bind(run).await.unwrap();
        let base = format!("http://{}/nbsf-management/v1", bound.local_addr());
        let store = bound.bsf().store.clone();
        let started = Instant::now();
        let now = chrono::Utc::now().timestamp_millis();
        let chunk = 50_000;
        let mut n = 0;
        while n < preload {
            let rows: Vec<_> = (n..(n + chunk).min(preload))
                .map(|i| {
                    let mut b = binding(i);
                    let keys = validate_binding(&mut b).unwrap();
                    let json = serde_json::to_vec(&b).unwrap();
                    bsf::store::NewBinding {
                        id: format!("preload-{i}"),
                        keys,
                        created_ms: now,
                        json: json.into(),
                    }
                })
                .collect();
            n += store.insert_many(rows).await.unwrap() as u64;
        }
        let preload_secs = started.elapsed().as_secs_f64();
        let db_bytes: u64 = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok()?.metadata().ok())
            .map(|m| m.len())
            .sum();
        println!(
            "preloaded {preload} bindings in {preload_secs:.1} s; database {:.0} MiB",
            db_bytes as f64 / 1048576.0
        );
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(bound.serve(async {
            let _ = rx.await;
        }));

        let client = sbi::client::SbiClient::new(&sbi::client::ClientConfig::default()).unwrap();
        let timers: Arc<[Timer; 3]> = Arc::new(Default::default());
        let next = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let cpu0 = sbi::observe::ProcessUsage::read_self().map(|u| u.cpu_seconds());
        let mut tasks = Vec::new();
        for _ in 0..concurrency {
            let (client, base, timers, next) = (client.clone(), base.clone(), timers.clone(), next.clone());
            tasks.push(tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= cycles {
                        return;
                    }
                    let n = preload + i;
                    let b = binding(n);
                    let t = Instant::now();
                    let r = client.post(&format!("{base}/pcfBindings")).json(&b).send().await.unwrap();
                    timers[0].add(t.elapsed());
                    assert_eq!(r.status(), 201);
                    let loc = r.header("location").unwrap().to_owned();
                    let t = Instant::now();
                    let ip = b["ipv4Addr"].as_str().unwrap();
                    let r = client.get(&format!("{base}/pcfBindings?ipv4Addr={ip}")).send().await.unwrap();
                    timers[1].add(t.elapsed());
                    assert_eq!(r.status(), 200);
                    let t = Instant::now();
                    let r = client.delete(&loc).send().await.unwrap();
                    timers[2].add(t.elapsed());
                    assert_eq!(r.status(), 204);
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let secs = started.elapsed().as_secs_f64();
        let cpu = cpu0.and_then(|c0| Some(sbi::observe::ProcessUsage::read_self()?.cpu_seconds() - c0));
        println!(
            "{cycles} create/discover/delete cycles, {concurrency} concurrent: {secs:.2} s, {:.0} operations/s \
             ({:.0} cycles/s); process CPU (client + BSF) {}",
            3.0 * cycles as f64 / secs,
            cycles as f64 / secs,
            cpu.map_or("n/a".into(), |c| format!("{c:.2} s = {:.0} us per operation", c * 1e6 / (3.0 * cycles as f64)))
        );
        for (name, t) in ["create", "discover", "delete"].iter().zip(timers.iter()) {
            println!(
                "  {name:<9} mean {:>7.0} us  max {:>7} us",
                t.total_us.load(Ordering::Relaxed) as f64 / cycles as f64,
                t.max_us.load(Ordering::Relaxed)
            );
        }
        let _ = stop.send(());
        server.await.unwrap().unwrap();
    });
}
