//! Store throughput: group-commit writes and point reads.
//!
//! `cargo bench -p fivecore-store --bench store -- --warm-up-time 1 --measurement-time 5`
//!
//! Each iteration is one round of [`CALLERS`] concurrent tasks issuing
//! [`OPS_PER_CALLER`] operations each, so criterion's throughput figure is
//! operations per second with that many callers in flight.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use store::{DocumentData, DocumentStore, SqliteConfig, SqliteStore, Synchronous};
use tokio::runtime::Runtime;
use tokio::task::JoinSet;

const CALLERS: u64 = 64;
const OPS_PER_CALLER: u64 = 16;
const PRELOADED: u64 = 10_000;

/// About the size of a BSF PCF binding.
fn body(n: u64) -> DocumentData {
    let json = format!(
        r#"{{"supi":"imsi-00101{n:010}","gpsi":"msisdn-33{n:09}","ipv4Addr":"10.{}.{}.{}","dnn":"internet","pcfFqdn":"pcf-1.fivecore.local","pcfIpEndPoints":[{{"ipv4Address":"127.0.0.1","port":7003}}],"snssai":{{"sst":1,"sd":"000001"}}}}"#,
        (n >> 16) & 255,
        (n >> 8) & 255,
        n & 255
    );
    DocumentData::new(json)
        .index("supi", format!("imsi-00101{n:010}"))
        .index("ipv4", format!("10.{}.{}.{}", (n >> 16) & 255, (n >> 8) & 255, n & 255))
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn open(
    rt: &Runtime,
    dir: &tempfile::TempDir,
    name: &str,
    synchronous: Synchronous,
) -> SqliteStore {
    let config = SqliteConfig { synchronous, ..SqliteConfig::new(dir.path().join(name)) };
    rt.block_on(SqliteStore::open(config)).expect("store opens")
}

/// Runs `iters` rounds of `CALLERS` concurrent callers and times them.
fn rounds<F, Fut>(rt: &Runtime, iters: u64, op: F) -> Duration
where
    F: Fn(u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    rt.block_on(async {
        let start = Instant::now();
        for _ in 0..iters {
            let mut callers = JoinSet::new();
            for caller in 0..CALLERS {
                let op = op.clone();
                callers.spawn(async move {
                    for n in 0..OPS_PER_CALLER {
                        op(caller * OPS_PER_CALLER + n).await;
                    }
                });
            }
            while let Some(done) = callers.join_next().await {
                done.expect("caller task");
            }
        }
        start.elapsed()
    })
}

fn group_commit(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("temp dir");
    let mut group = c.benchmark_group("write");
    group.throughput(Throughput::Elements(CALLERS * OPS_PER_CALLER));
    group.sample_size(10);
    for (name, synchronous) in [("full", Synchronous::Full), ("normal", Synchronous::Normal)] {
        let store = open(&rt, &dir, &format!("write-{name}.db"), synchronous);
        let next = Arc::new(AtomicU64::new(0));
        group.bench_function(format!("upsert_64_callers_sync_{name}"), |b| {
            b.iter_custom(|iters| {
                let store = store.clone();
                let next = Arc::clone(&next);
                rounds(&rt, iters, move |_| {
                    let store = store.clone();
                    // Fresh ids: the table grows as it would with new sessions.
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    async move {
                        store.upsert("bindings", &format!("b{n}"), body(n)).await.expect("upsert");
                    }
                })
            });
        });
        let stats = store.stats();
        eprintln!(
            "sync {name}: {} writes in {} commits (mean batch {:.1}, largest {})",
            stats.writes,
            stats.commits,
            stats.writes as f64 / stats.commits.max(1) as f64,
            stats.largest_batch
        );
    }
    group.finish();
}

fn point_reads(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("temp dir");
    let store = open(&rt, &dir, "read.db", Synchronous::Full);
    rt.block_on(async {
        let mut writers = JoinSet::new();
        for w in 0..CALLERS {
            let store = store.clone();
            writers.spawn(async move {
                for n in (w..PRELOADED).step_by(CALLERS as usize) {
                    store.create("bindings", &format!("b{n}"), body(n)).await.expect("preload");
                }
            });
        }
        while let Some(done) = writers.join_next().await {
            done.expect("preload task");
        }
    });

    let mut group = c.benchmark_group("read");
    group.throughput(Throughput::Elements(CALLERS * OPS_PER_CALLER));
    group.bench_function("get_64_callers", |b| {
        b.iter_custom(|iters| {
            let store = store.clone();
            rounds(&rt, iters, move |n| {
                let store = store.clone();
                // A fixed scatter over the collection, same for every round.
                let id = format!("b{}", n.wrapping_mul(7919) % PRELOADED);
                async move {
                    let doc = store.get("bindings", &id).await.expect("get");
                    assert!(doc.is_some());
                }
            })
        });
    });
    group.throughput(Throughput::Elements(1));
    group.bench_function("get_one_caller", |b| {
        let mut n = 0u64;
        b.iter(|| {
            n = (n + 7919) % PRELOADED;
            rt.block_on(store.get("bindings", &format!("b{n}"))).expect("get")
        });
    });
    group.finish();
}

criterion_group!(benches, group_commit, point_reads);
criterion_main!(benches);
