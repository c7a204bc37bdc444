//! What an online backup costs a running BSF: `fivecore bsf preload` loads BINDINGS bindings
//! (default 100,000), a `fivecore bsf` serves them, and an open-loop client sends RATE requests
//! a second (default 400: half Nbsf Register of new bindings, half Discovery of preloaded ones)
//! for BASELINE seconds (default 10), then while `fivecore backup` copies the store, then for
//! BASELINE seconds after. Prints each phase's latency percentiles and the backup's duration.
//!
//! `cargo bench -p fivecore --bench backup` (or with `--profile dev` for the unoptimized binary);
//! `BINDINGS=100000 RATE=400 BASELINE=10` in the environment change the figures.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn ip(i: u64) -> String {
    format!("10.{}.{}.{}", (i >> 16) & 255, (i >> 8) & 255, i & 255)
}

struct Phase {
    name: &'static str,
    latency: Mutex<Histogram<u64>>,
    errors: AtomicU64,
}

fn main() {
    // `cargo bench` passes `--bench`; anything else (a name filter) is ignored.
    let bindings = env_or("BINDINGS", 100_000);
    let rate = env_or("RATE", 400).max(1);
    let baseline = Duration::from_secs(env_or("BASELINE", 10));
    let exe = env!("CARGO_BIN_EXE_fivecore");
    let dir = std::env::temp_dir().join(format!("fivecore-backup-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("data");
    let config = dir.join("fivecore.toml");
    std::fs::write(&config, "[bsf.rx]\nlisten = \"127.0.0.1:0\"\n").unwrap();

    let t = Instant::now();
    let mut preload = Command::new(exe)
        .args(["bsf", "preload", "--data-dir"])
        .arg(&data)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    {
        let mut input = std::io::BufWriter::new(preload.stdin.take().unwrap());
        for i in 0..bindings {
            writeln!(
                input,
                r#"{{"bindingId":"pre-{i}","pcfBinding":{{"ipv4Addr":"{}","supi":"imsi-001010{i:09}","dnn":"internet","snssai":{{"sst":1}},"pcfFqdn":"pcf{}.example.com"}}}}"#,
                ip(i),
                i % 16
            )
            .unwrap();
        }
    }
    let out = preload.wait_with_output().unwrap();
    assert!(out.status.success(), "preload failed");
    println!(
        "preloaded {bindings} bindings in {:.1} s: {}",
        t.elapsed().as_secs_f64(),
        String::from_utf8_lossy(&out.stdout).trim()
    );

    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let listen = format!("127.0.0.1:{port}");
    let mut bsf = Command::new(exe)
        .args(["bsf", "--listen", &listen, "--config"])
        .arg(&config)
        .arg("--data-dir")
        .arg(&data)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = sbi::client::SbiClient::new(&sbi::client::ClientConfig::default()).unwrap();
    let base = format!("http://{listen}/nbsf-management/v1/pcfBindings");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ready = rt.block_on(client.get(&format!("http://{listen}/healthz/ready")).send());
        if matches!(ready, Ok(r) if r.status() == 200) {
            break;
        }
        assert!(Instant::now() < deadline, "the BSF did not become ready");
        std::thread::sleep(Duration::from_millis(100));
    }

    let phases: Arc<Vec<Phase>> = Arc::new(
        ["before", "during backup", "after"]
            .into_iter()
            .map(|name| Phase {
                name,
                latency: Mutex::new(Histogram::new_with_bounds(1, 60_000_000, 3).unwrap()),
                errors: AtomicU64::new(0),
            })
            .collect(),
    );
    let current = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicUsize::new(0));
    let load = {
        let (phases, current, stop, client) =
            (phases.clone(), current.clone(), stop.clone(), client.clone());
        rt.spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            let mut n = 0u64;
            while stop.load(Ordering::Relaxed) == 0 {
                tick.tick().await;
                n += 1;
                let (phases, current, client, base) =
                    (phases.clone(), current.clone(), client.clone(), base.clone());
                tokio::spawn(async move {
                    let sent = Instant::now();
                    // Even: a Register; odd: a Discovery (n & 1: Rust 1.85 lacks is_multiple_of).
                    let ok = if n & 1 == 0 {
                        let body = format!(
                            r#"{{"ipv4Addr":"{}","dnn":"internet","snssai":{{"sst":1}},"pcfFqdn":"pcf.example.com"}}"#,
                            ip((1 << 23) + n)
                        );
                        let r = client
                            .post(&base)
                            .header("content-type", "application/json")
                            .body(body)
                            .send()
                            .await;
                        matches!(r, Ok(r) if r.status() == 201)
                    } else {
                        let url = format!("{base}?ipv4Addr={}", ip(n * 7919 % bindings));
                        matches!(client.get(&url).send().await, Ok(r) if r.status() == 200)
                    };
                    let us = sent.elapsed().as_micros() as u64;
                    // The phase the request was sent in.
                    let phase = &phases[current.load(Ordering::Relaxed)];
                    if ok {
                        let _ = phase.latency.lock().unwrap().record(us.max(1));
                    } else {
                        phase.errors.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        })
    };

    std::thread::sleep(baseline);
    current.store(1, Ordering::Relaxed);
    let out_dir = dir.join("backup");
    let t = Instant::now();
    let backup = Command::new(exe)
        .arg("backup")
        .arg("--data-dir")
        .arg(&data)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    let took = t.elapsed();
    current.store(2, Ordering::Relaxed);
    assert!(backup.status.success(), "{}", String::from_utf8_lossy(&backup.stderr));
    std::thread::sleep(baseline);
    stop.store(1, Ordering::Relaxed);
    let _ = rt.block_on(load);
    std::thread::sleep(Duration::from_millis(500));

    print!("{}", String::from_utf8_lossy(&backup.stdout));
    println!("backup of {bindings} bindings: {:.2} s (wall, the command)", took.as_secs_f64());
    println!("offered {rate}/s, half Register, half Discovery; latency in ms:");
    println!(
        "{:<14} {:>8} {:>7} {:>7} {:>7} {:>7} {:>7}",
        "phase", "answers", "errors", "p50", "p99", "p99.9", "max"
    );
    for p in phases.iter() {
        let h = p.latency.lock().unwrap();
        let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
        println!(
            "{:<14} {:>8} {:>7} {:>7.2} {:>7.2} {:>7.2} {:>7.2}",
            p.name,
            h.len(),
            p.errors.load(Ordering::Relaxed),
            ms(0.5),
            ms(0.99),
            ms(0.999),
            h.max() as f64 / 1000.0
        );
    }
    let _ = Command::new("kill").args(["-TERM", &bsf.id().to_string()]).status();
    let _ = bsf.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
