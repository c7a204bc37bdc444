//! Messages per second through one TCP sink and one HTTP/2 sink, and the sink's CPU per message
//! (docs/dd.md, "Feeds"): `cargo bench -p fivecore-dd --bench sink_throughput`.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use dd::sinks::{build, FeedMetrics, SinkConfig};
use serde_json::json;

#[allow(dead_code)]
#[path = "../tests/common/consumers.rs"]
mod consumers;
use consumers::{envelope, Http2Consumer, TcpBehaviour, TcpConsumer};

/// Messages per second through one TCP sink and one HTTP/2 sink to a consumer on this host,
/// 1.2 KB envelopes in batches of 256, and the sink's own CPU per message: the sink runs alone on
/// this thread's runtime (its connection tasks too), the consumer on another thread.
fn main() {
    let consumer_rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let (tcp, h2) = consumer_rt.block_on(async {
        let tcp =
            TcpConsumer::start(TcpBehaviour { count_only: true, ..Default::default() }, None).await;
        let h2 = Http2Consumer::start(None).await;
        h2.requests.count_only.store(true, Ordering::SeqCst);
        (tcp, h2)
    });
    let batch: Vec<Bytes> = (0..256).map(|i| envelope(i, 1200 - envelope(0, 0).len())).collect();
    assert_eq!(batch[0].len(), 1200);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let batches = 2_000u64;
    for (name, cfg, delivered) in [
        (
            "tcp",
            json!({"type": "tcp", "endpoints": [{"address": tcp.addr.to_string()}]}),
            &tcp.received.frames as &std::sync::atomic::AtomicU64,
        ),
        (
            "http2",
            json!({"type": "http2", "endpoints": [{"uri": h2.uri("http")}]}),
            &h2.requests.frames,
        ),
    ] {
        let cfg: SinkConfig = serde_json::from_value(cfg).unwrap();
        let sink = build(name, &cfg, &FeedMetrics::default()).unwrap_or_else(|e| panic!("{e:?}"));
        rt.block_on(async {
            for _ in 0..50 {
                sink.deliver(&batch).await.unwrap();
            }
        });
        let before = delivered.load(Ordering::SeqCst);
        let (wall, cpu) = (Instant::now(), thread_cpu());
        rt.block_on(async {
            for _ in 0..batches {
                sink.deliver(&batch).await.unwrap();
            }
        });
        let cpu = thread_cpu() - cpu;
        let n = batches * 256;
        // The TCP sink's Ok is "written": the time counts until the consumer has it all.
        while delivered.load(Ordering::SeqCst) - before < n {
            std::thread::sleep(Duration::from_micros(200));
        }
        let all = wall.elapsed();
        println!(
            "{name}: {n} messages of 1,200 B in {:.3} s: {:.0} messages/s; sink CPU {:.2} µs/message ({:.0} MB/s)",
            all.as_secs_f64(),
            n as f64 / all.as_secs_f64(),
            cpu.as_secs_f64() * 1e6 / n as f64,
            n as f64 * 1204.0 / all.as_secs_f64() / 1e6,
        );
    }
    drop((tcp, h2));
    drop(consumer_rt);
}

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}
