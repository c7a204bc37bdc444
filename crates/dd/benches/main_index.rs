//! What MAIN as an index saves: bytes written and Data Director CPU per copy through the whole
//! embedded pipeline, `[dd.main] store = "copy"` against `"index"` (docs/dd.md, "MAIN"):
//!
//! ```text
//! cargo bench -p fivecore-dd --bench main_index
//! ```
//!
//! For each store, a Data Director runs in this process on a runtime of its own (`dd::bind`: the
//! ingest API, the NF topics and MAIN on disk, aggregation, feeds), with a TCP feed of every copy
//! and a TCP feed of 1 % (sampled by SUPI). Load runs on another runtime: senders POST batches
//! of 256 copies of 1,200 B (SCP copies, 10,000 subscribers) to the ingest API, as fast as it
//! takes them, and two consumers count the frames. After a warm-up, `COPIES` copies are timed
//! until the unfiltered feed has them all.
//!
//! Counted, not timed: the Data Director's CPU (this process's user + system time less the load
//! runtime's threads), the bytes the process wrote to storage (`write_bytes` of
//! `/proc/self/io`: page-cache pages dirtied, the database's included) and the bytes of the log's
//! segment files (NF topics and MAIN), each per copy. The wall-clock rate is printed too but on a
//! shared machine it says little.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use dd::envelope::{encode_framed, CopyMeta, Protocol, TriggerPoint, CONTENT_TYPE};
use sbi::client::{ClientConfig, SbiClient};
use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;

const COPY_BYTES: usize = 1200;
const BATCH: u64 = 256;
const SENDERS: u64 = 4;
const WARMUP: u64 = 20_480;
const COPIES: u64 = 204_800;
const ROUNDS: usize = 3;
const LOAD_THREAD: &str = "bench-load";

fn main() {
    let mut results: Vec<(&str, Vec<Round>)> = vec![("copy", Vec::new()), ("index", Vec::new())];
    for _ in 0..ROUNDS {
        for (store, rounds) in results.iter_mut() {
            rounds.push(run(store));
        }
    }
    for (store, mut rounds) in results {
        let median = |rounds: &mut Vec<Round>, f: fn(&Round) -> f64| {
            rounds.sort_by(|a, b| f(a).total_cmp(&f(b)));
            f(&rounds[rounds.len() / 2])
        };
        println!(
            "median of {ROUNDS}, store = {store}: DD CPU {:.2} µs/copy (user {:.2}, system {:.2}); \
             written to storage {:.0} B/copy",
            median(&mut rounds, |r| r.user_us + r.system_us),
            median(&mut rounds, |r| r.user_us),
            median(&mut rounds, |r| r.system_us),
            median(&mut rounds, |r| r.written),
        );
    }
}

/// One store's round, per copy.
struct Round {
    user_us: f64,
    system_us: f64,
    written: f64,
}

fn run(store: &str) -> Round {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let config: dd::DdConfig = toml::from_str(&format!("[main]\nstore = \"{store}\"")).unwrap();
    let dd_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("dd")
        .enable_all()
        .build()
        .unwrap();
    let load = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(LOAD_THREAD)
        .enable_all()
        .build()
        .unwrap();
    let run = dd::RunConfig {
        dd: config,
        sbi: sbi::ServerConfig::default(),
        client: ClientConfig::default(),
        store: store::SqliteConfig {
            readers: 1,
            ..store::SqliteConfig::new(dir.path().join("dd.db"))
        },
        instance_id: None,
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (base, serving) = dd_rt.block_on(async {
        let bound = dd::bind(run).await.expect("the Data Director starts");
        let base = format!("http://{}", bound.local_addr());
        (
            base,
            tokio::spawn(bound.serve(async {
                let _ = stopped.await;
            })),
        )
    });

    let (all, sampled) = load.block_on(async {
        let all = counting_consumer().await;
        let sampled = counting_consumer().await;
        let c = SbiClient::new(&ClientConfig::default()).unwrap();
        let admin = |kind: &str| format!("{base}/dd-admin/v1/{kind}");
        let filter = json!({"name": "one-percent",
            "filter": {"conditions": [{"sample": {"percent": 1, "by": "supi"}}]}});
        let r = c.post(&admin("filters")).json(&filter).send().await.unwrap();
        assert_eq!(r.status(), 201);
        for (name, addr, filter) in
            [("all", all.0, None), ("sampled", sampled.0, Some("one-percent"))]
        {
            let mut feed = json!({"name": name, "start": "earliest",
                "sink": {"type": "tcp", "endpoints": [{"address": addr.to_string()}]}});
            if let Some(f) = filter {
                feed["filter"] = json!(f);
            }
            let r = c.post(&admin("feeds")).json(&feed).send().await.unwrap();
            assert_eq!(r.status(), 201);
        }
        (all.1, sampled.1)
    });

    send(&load, &base, 0, WARMUP);
    wait_for(&all, WARMUP);
    let (cpu0, load0, io0, wall) =
        (process_cpu(), threads_cpu(LOAD_THREAD), write_bytes(), Instant::now());
    send(&load, &base, WARMUP, COPIES);
    wait_for(&all, WARMUP + COPIES);
    let wall = wall.elapsed();
    let (cpu1, load1) = (process_cpu(), threads_cpu(LOAD_THREAD));
    let user = (cpu1.0 - cpu0.0).saturating_sub(load1.0 - load0.0);
    let system = (cpu1.1 - cpu0.1).saturating_sub(load1.1 - load0.1);
    let written = write_bytes() - io0;
    let _ = stop.send(());
    dd_rt.block_on(serving).unwrap().unwrap();

    let log = dir.path().join("dd-log");
    let (mut nf, mut main) = (0u64, 0u64);
    for topic in std::fs::read_dir(&log).unwrap().filter_map(|e| e.ok()) {
        let name = topic.file_name().to_string_lossy().into_owned();
        let Ok(files) = std::fs::read_dir(topic.path()) else { continue };
        let bytes: u64 = files
            .filter_map(|e| e.ok())
            .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
            .map(|e| e.metadata().unwrap().len())
            .sum();
        if name.starts_with("MAIN") {
            main += bytes;
        } else {
            nf += bytes;
        }
    }
    let total = WARMUP + COPIES;
    println!(
        "store = {store}: {COPIES} copies of {COPY_BYTES} B in {:.2} s ({:.0}/s); DD CPU {:.2} µs/copy \
         (user {:.2}, system {:.2}); \
         written to storage {:.0} B/copy; log files: NF topics {:.0} B/copy, MAIN {:.0} B/copy; \
         1 % feed {} of {total}",
        wall.as_secs_f64(),
        COPIES as f64 / wall.as_secs_f64(),
        (user + system).as_secs_f64() * 1e6 / COPIES as f64,
        user.as_secs_f64() * 1e6 / COPIES as f64,
        system.as_secs_f64() * 1e6 / COPIES as f64,
        written as f64 / COPIES as f64,
        nf as f64 / total as f64,
        main as f64 / total as f64,
        sampled.load(Ordering::SeqCst),
    );
    drop(load);
    drop(dd_rt);
    let per = |d: Duration| d.as_secs_f64() * 1e6 / COPIES as f64;
    Round { user_us: per(user), system_us: per(system), written: written as f64 / COPIES as f64 }
}

/// A TCP consumer that counts the frames it reads.
async fn counting_consumer() -> (std::net::SocketAddr, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let frames = Arc::new(AtomicU64::new(0));
    let counted = frames.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else { return };
            let frames = counted.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 1 << 20];
                loop {
                    let mut len = [0u8; 4];
                    if stream.read_exact(&mut len).await.is_err() {
                        return;
                    }
                    let n = u32::from_be_bytes(len) as usize;
                    if buf.len() < n {
                        buf.resize(n, 0);
                    }
                    if stream.read_exact(&mut buf[..n]).await.is_err() {
                        return;
                    }
                    frames.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    (addr, frames)
}

/// Copies `first..first + n` POSTed by `SENDERS` senders, batches of `BATCH`, each answered 204.
fn send(load: &tokio::runtime::Runtime, base: &str, first: u64, n: u64) {
    load.block_on(async {
        let client = SbiClient::new(&ClientConfig::default()).unwrap();
        let next = Arc::new(AtomicU64::new(first));
        let mut senders = Vec::new();
        for _ in 0..SENDERS {
            let (client, next, uri) =
                (client.clone(), next.clone(), format!("{base}/dd-ingest/v1/copies"));
            senders.push(tokio::spawn(async move {
                loop {
                    let from = next.fetch_add(BATCH, Ordering::Relaxed);
                    if from >= first + n {
                        return;
                    }
                    let body = batch(from, BATCH.min(first + n - from));
                    loop {
                        let r = client
                            .post(&uri)
                            .header("content-type", CONTENT_TYPE)
                            .body(body.clone())
                            .send()
                            .await
                            .unwrap();
                        match r.status().as_u16() {
                            204 => break,
                            503 => tokio::time::sleep(Duration::from_millis(20)).await,
                            s => panic!("ingest answered {s}"),
                        }
                    }
                }
            }));
        }
        for s in senders {
            s.await.unwrap();
        }
    });
}

fn batch(from: u64, n: u64) -> Bytes {
    let mut out = BytesMut::with_capacity(n as usize * (COPY_BYTES + 4));
    for i in from..from + n {
        let supi = format!("imsi-00101{:010}", i % 10_000);
        let meta = CopyMeta {
            trigger: TriggerPoint::IngressRequest,
            protocol: Protocol::Http2,
            timestamp_ns: 1_800_000_000_000_000_000 + i,
            sequence: i,
            transaction: i,
            stream_id: 1,
            status: 0,
            nf_type: "SCP",
            nf_instance: "11111111-2222-3333-4444-555555555555",
            service: "npcf-smpolicycontrol",
            operation: "Npcf_SMPolicyControl_Create",
            method: "POST",
            path: "/npcf-smpolicycontrol/v1/sm-policies",
            peer: "127.0.0.1:1",
            supi: &supi,
            gpsi: "",
            session_id: "",
        };
        let at = out.len();
        encode_framed(&meta, [], &[], &mut out).unwrap();
        // Pad the body so the envelope is COPY_BYTES long.
        let empty = out.len() - at - 4;
        out.truncate(at);
        let body = vec![b'x'; COPY_BYTES - empty];
        encode_framed(&meta, [], &body, &mut out).unwrap();
    }
    out.freeze()
}

fn wait_for(frames: &AtomicU64, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(300);
    while frames.load(Ordering::SeqCst) < n {
        assert!(Instant::now() < deadline, "the feed got {} of {n}", frames.load(Ordering::SeqCst));
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// CPU time (user, system) of this process so far, exited threads included.
fn process_cpu() -> (Duration, Duration) {
    // SAFETY: getrusage fills the struct it is given; zeroed is a valid initial value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage owned by this frame.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    (tv(usage.ru_utime), tv(usage.ru_stime))
}

/// CPU time (user, system) of this process's live threads named `name`
/// (`/proc/self/task/*/stat`).
fn threads_cpu(name: &str) -> (Duration, Duration) {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let (mut user, mut system) = (0u64, 0u64);
    for task in std::fs::read_dir("/proc/self/task").unwrap().filter_map(|e| e.ok()) {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else { continue };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else { continue };
        if &stat[open + 1..close] != name {
            continue;
        }
        // After the name: state, then fields 4.. ; utime and stime are fields 14 and 15.
        let fields: Vec<&str> = stat[close + 2..].split(' ').collect();
        user += fields[11].parse::<u64>().unwrap_or(0);
        system += fields[12].parse::<u64>().unwrap_or(0);
    }
    (Duration::from_millis(user * 1000 / hz), Duration::from_millis(system * 1000 / hz))
}

/// Bytes this process has caused to be written to storage (`write_bytes` of `/proc/self/io`).
fn write_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("write_bytes: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}
