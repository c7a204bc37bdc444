//! Appends and reads per second of the embedded log, for the figures in docs/BENCHMARKS.md: a
//! benchmark (it writes a few hundred MB and wants an optimised build):
//!
//! ```text
//! cargo bench -p fivecore-dd --bench log_throughput
//! ```
//!
//! For each flush policy and batch size, three rounds of: `APPENDERS` tasks append 1.2 KB records
//! in batches until `RECORDS` are in; one reader reads them all back from the start (1 MiB
//! reads: the segment files, through the page cache); then the same appends into a second topic
//! with a reader following them (what a feed that keeps up does: reads from the tail cache). It
//! prints the medians; CPU is this process's user + system time per record.

use std::time::{Duration, Instant};

use bytes::Bytes;
use dd::log::{Fsync, LogConfig, LogDir};

const RECORD: usize = 1200;
const RECORDS: u64 = 200_000;
const APPENDERS: u64 = 4;
const ROUNDS: usize = 3;

/// CPU time (user + system) of this process so far: on a shared machine the cost per record is
/// steadier than the rate.
fn cpu() -> Duration {
    // SAFETY: getrusage fills the struct it is given; zeroed is a valid initial value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage owned by this frame.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

struct Round {
    appends_per_sec: f64,
    reads_per_sec: f64,
    append_cpu_us: f64,
    read_cpu_us: f64,
    fdatasyncs: f64,
    /// With a reader following the appenders.
    followed_appends_per_sec: f64,
    followed_cpu_us: f64,
    followed_from_memory: f64,
}

/// Appends `RECORDS` from `APPENDERS` tasks; returns when all are acknowledged.
async fn append_all(topic: &dd::log::Topic, batch: u64) {
    let payload = Bytes::from(vec![b'x'; RECORD]);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..APPENDERS {
        let topic = topic.clone();
        let payload = payload.clone();
        tasks.spawn(async move {
            for _ in 0..RECORDS / batch / APPENDERS {
                // Clones of one Bytes: the log's cost, not the generator's.
                let records = vec![payload.clone(); batch as usize];
                topic.append(records).await.expect("append");
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("appender");
    }
}

/// Reads from `from` until `until` records are read, waiting for them as a feed does.
async fn read_all(topic: &dd::log::Topic, until: u64) {
    let mut at = 0;
    while at < until {
        topic.wait_for(at).await.expect("wait");
        let b = topic.read(at, 1 << 20, usize::MAX).await.expect("read");
        assert!(b.records.iter().all(|r| r.len() == RECORD));
        at = b.next_offset;
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

async fn round(fsync: Fsync, batch: u64) -> Round {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = LogDir::open(dir.path(), LogConfig { fsync, ..LogConfig::default() }).expect("open");
    let topic = log.topic("scp").expect("topic");
    let (started, cpu0) = (Instant::now(), cpu());
    append_all(&topic, batch).await;
    let (append_secs, append_cpu) = (started.elapsed().as_secs_f64(), cpu() - cpu0);
    let appended = topic.end_offset();
    let syncs = topic.stats().fdatasyncs;
    let (started, cpu0) = (Instant::now(), cpu());
    read_all(&topic, appended).await;
    let (read_secs, read_cpu) = (started.elapsed().as_secs_f64(), cpu() - cpu0);

    let followed = log.topic("bsf").expect("topic");
    let (started, cpu0) = (Instant::now(), cpu());
    let reader = {
        let followed = followed.clone();
        let until = RECORDS / batch / APPENDERS * batch * APPENDERS;
        tokio::spawn(async move { read_all(&followed, until).await })
    };
    append_all(&followed, batch).await;
    reader.await.expect("reader");
    let (followed_secs, followed_cpu) = (started.elapsed().as_secs_f64(), cpu() - cpu0);
    let stats = followed.stats();
    let reads = (stats.reads_from_memory + stats.reads_from_disk) as f64;
    let n = appended as f64;
    Round {
        appends_per_sec: n / append_secs,
        reads_per_sec: n / read_secs,
        append_cpu_us: append_cpu.as_secs_f64() * 1e6 / n,
        read_cpu_us: read_cpu.as_secs_f64() * 1e6 / n,
        fdatasyncs: syncs as f64,
        followed_appends_per_sec: n / followed_secs,
        followed_cpu_us: followed_cpu.as_secs_f64() * 1e6 / n,
        followed_from_memory: stats.reads_from_memory as f64 / reads,
    }
}

fn main() {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(appends_and_reads_per_second());
}

async fn appends_and_reads_per_second() {
    println!(
        "{RECORDS} records of {RECORD} B, {APPENDERS} appenders, 1 reader (1 MiB reads); medians of {ROUNDS}"
    );
    println!(
        "{:<14} {:>5}  {:>9}  {:>10}  {:>8}  {:>10}  {:>9}  {:>11}  {:>9}",
        "fsync",
        "batch",
        "appends/s",
        "fdatasyncs",
        "µs/append",
        "file reads/s",
        "µs/read",
        "followed: appends/s",
        "µs/append+read",
    );
    for fsync in [Fsync::Always, Fsync::Interval(Duration::from_millis(10))] {
        for batch in [64, 256, 1024] {
            let mut rounds = Vec::new();
            for _ in 0..ROUNDS {
                rounds.push(round(fsync, batch).await);
            }
            let m = |f: fn(&Round) -> f64| median(rounds.iter().map(f).collect());
            let name = match fsync {
                Fsync::Always => "always".to_owned(),
                Fsync::Interval(d) => format!("interval {}ms", d.as_millis()),
            };
            println!(
                "{name:<14} {batch:>5}  {:>9.0}  {:>10.0}  {:>8.2}  {:>12.0}  {:>9.2}  {:>19.0}  {:>9.2} ({:.0} % of reads from memory)",
                m(|r| r.appends_per_sec),
                m(|r| r.fdatasyncs),
                m(|r| r.append_cpu_us),
                m(|r| r.reads_per_sec),
                m(|r| r.read_cpu_us),
                m(|r| r.followed_appends_per_sec),
                m(|r| r.followed_cpu_us),
                m(|r| r.followed_from_memory * 100.0),
            );
        }
    }
}
