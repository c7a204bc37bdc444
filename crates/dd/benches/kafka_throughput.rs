//! Kafka throughput with the broker on this machine (docs/dd.md, "Kafka mode"; figures in
//! docs/BENCHMARKS.md): a benchmark, not a test, so `cargo test` neither runs nor skips it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use dd::kafka::{ensure_topics, Consumer, Producer};

#[path = "../tests/kafka/copies.rs"]
mod copies;
#[path = "../tests/kafka/setup.rs"]
mod setup;
use copies::copy;
use setup::{config, spec};

fn main() {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(throughput_of_1_2_kb_records_produced_and_consumed());
}

/// Records of 1.2 KB produced (acks=all, 8 batches of 1,000 in flight) and consumed through the
/// broker on this machine, three runs each with compression none and lz4; prints each run, the
/// median and the broker's CPU. `cargo bench` builds librdkafka optimised (test builds do not, which
/// halves what it does):
///
/// ```text
/// cargo bench -p fivecore-dd --bench kafka_throughput
/// ```
///
/// `KAFKA_BENCH_RECORDS` sets the records per run (default 300,000), `KAFKA_BENCH_LINGER_MS` the
/// producer's `linger_ms` (default 5).
async fn throughput_of_1_2_kb_records_produced_and_consumed() {
    let Some(broker) = testkit::kafka::broker() else {
        eprintln!("no Java or no broker jars (scripts/kafka/fetch.sh): nothing measured");
        return;
    };
    let n: usize =
        std::env::var("KAFKA_BENCH_RECORDS").ok().and_then(|v| v.parse().ok()).unwrap_or(300_000);
    // Distinct envelopes like an NF's (JSON bodies with ids that differ), so lz4 compresses them
    // as much as real copies and no more.
    let payloads: Arc<Vec<Vec<u8>>> = Arc::new((0..1000).map(|i| copy(i, 1200)).collect());
    for p in payloads.iter() {
        assert_eq!(p.len(), 1200);
        dd::envelope::Copy::decode(bytes::Bytes::copy_from_slice(p)).unwrap();
    }
    // What one run of one direction took: records/s, and CPU per record of the broker and of
    // this process (the client: librdkafka's threads and ours), in microseconds.
    struct Run {
        rate: f64,
        broker_us: f64,
        client_us: f64,
        broker_cores: f64,
    }
    let me = std::process::id();
    let measure = |records: usize, secs: f64, broker: f64, client: f64| Run {
        rate: records as f64 / secs,
        broker_us: broker * 1e6 / records as f64,
        client_us: client * 1e6 / records as f64,
        broker_cores: broker / secs,
    };
    let cpu = || (broker.cpu_seconds(), testkit::kafka::cpu_seconds(me), Instant::now());
    let show = |what: &str, r: &Run| {
        format!(
            "{what}: {:.0} records/s ({:.0} MB/s); CPU per record: broker {:.1} µs, client {:.1} µs; broker {:.0} % of one core",
            r.rate,
            r.rate * 1200.0 / 1e6,
            r.broker_us,
            r.client_us,
            100.0 * r.broker_cores
        )
    };
    let total = n / 1000 * 1000;
    for compression in ["none", "lz4"] {
        let mut produced = Vec::new();
        let mut consumed = Vec::new();
        for run in 0..3 {
            let mut c = config(broker, &format!("bench{run}{compression}."));
            c.producer.compression = if compression == "lz4" {
                dd::kafka::config::Compression::Lz4
            } else {
                dd::kafka::config::Compression::None
            };
            if let Some(ms) =
                std::env::var("KAFKA_BENCH_LINGER_MS").ok().and_then(|v| v.parse().ok())
            {
                c.producer.linger_ms = ms;
            }
            let topic = spec(&c, "main", 6);
            ensure_topics(&c, std::slice::from_ref(&topic)).await.unwrap();
            let producer = Arc::new(Producer::connect(&c, "bench").await.unwrap());
            let (b0, c0, t0) = cpu();
            // Several batches in flight, as the aggregation of several NF topics would have.
            let tasks: Vec<_> = (0..8)
                .map(|t| {
                    let (producer, payloads, name) =
                        (producer.clone(), payloads.clone(), topic.name.clone());
                    tokio::spawn(async move {
                        let mut i = t;
                        while i < n / 1000 {
                            let records = payloads.iter().map(|p| (None, p.as_slice()));
                            producer.append_batch(&name, records).await.unwrap();
                            i += 8;
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
            let (b1, c1, t1) = cpu();
            let r = measure(total, (t1 - t0).as_secs_f64(), b1 - b0, c1 - c0);
            println!("{}", show(&format!("produce {compression} run {run}"), &r));
            produced.push(r);

            let consumer = Consumer::join(&c, &c.group("bench"), &[&topic.name]).await.unwrap();
            let (b0, c0, t0) = cpu();
            let mut got = 0;
            while got < total {
                let b = consumer.next_batch(10_000, Duration::from_secs(5)).await.unwrap();
                assert!(!b.is_empty(), "stalled at {got}");
                got += b.len();
                consumer.done(&b).unwrap();
            }
            let (b1, c1, t1) = cpu();
            let r = measure(got, (t1 - t0).as_secs_f64(), b1 - b0, c1 - c0);
            println!("{}", show(&format!("consume {compression} run {run}"), &r));
            consumed.push(r);
            consumer.close().await.unwrap();
        }
        for (what, mut runs) in [("produce", produced), ("consume", consumed)] {
            runs.sort_by(|a, b| a.rate.total_cmp(&b.rate));
            println!("{}", show(&format!("{what} {compression}, median of 3"), &runs[1]));
        }
    }
    println!("load average at the end: {}", std::fs::read_to_string("/proc/loadavg").unwrap());
}
