//! The Kafka mode against a real single-node KRaft broker (crates/testkit/src/kafka.rs: Kafka
//! 4.3.1 from Maven Central jars, started once for this test binary, stopped by PID when it
//! exits). Each test uses its own topics and groups on the shared broker. Skipped without Java
//! or the jars unless `FIVECORE_REQUIRE_KAFKA=1` (./test.sh fetches the jars and sets it).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dd::kafka::{ensure_topics, Consumer, KafkaConfig, KafkaError, Producer, TopicSpec};
use rdkafka::admin::{AdminClient, AdminOptions, AlterConfig, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::ClientConfig;
use testkit::kafka::Broker;

fn config(broker: &Broker, prefix: &str) -> KafkaConfig {
    let mut c = KafkaConfig::new(broker.bootstrap.clone());
    c.topic_prefix = prefix.to_string();
    c.consumer.group_id = prefix.trim_end_matches('.').to_string();
    c.consumer.commit_interval_ms = 200;
    c.consumer.session_timeout_ms = 6000;
    c.request_timeout_ms = 10_000;
    c.producer.delivery_timeout_ms = 15_000;
    c
}

fn spec(c: &KafkaConfig, name: &str, partitions: u32) -> TopicSpec {
    TopicSpec {
        key: name.to_string(),
        name: format!("{}{name}", c.topic_prefix),
        partitions,
        retention_ms: 3_600_000,
        replication_factor: 1,
    }
}

/// What the broker says about a topic: partitions and its `retention.ms` and `max.message.bytes`.
async fn describe(broker: &Broker, topic: &str) -> (usize, String, String) {
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", &broker.bootstrap).create().unwrap();
    let md = admin.inner().fetch_metadata(Some(topic), Duration::from_secs(10)).unwrap();
    let partitions = md.topics()[0].partitions().len();
    let r = admin
        .describe_configs([&ResourceSpecifier::Topic(topic)], &AdminOptions::new())
        .await
        .unwrap()
        .remove(0)
        .unwrap();
    let get = |k: &str| r.get(k).and_then(|e| e.value.clone()).unwrap_or_default();
    (partitions, get("retention.ms"), get("max.message.bytes"))
}

/// Reads from `c` until `n` records came or `within` passed, marking each batch done.
async fn read(c: &Consumer, n: usize, within: Duration) -> Vec<dd::kafka::Record> {
    let deadline = Instant::now() + within;
    let mut out = Vec::new();
    while out.len() < n && Instant::now() < deadline {
        let b = c.next_batch(1000, Duration::from_millis(200)).await.unwrap();
        c.done(&b).unwrap();
        out.extend(b.records);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_are_created_with_their_partitions_and_retention_then_brought_in_line() {
    let Some(broker) = testkit::kafka::broker() else { return };
    let mut c = config(broker, "ensure.");
    c.nf_partitions = 3;
    c.main_partitions = 4;
    let report = ensure_topics(&c, &c.topics()).await.unwrap();
    assert_eq!(report.created.len(), 8, "{report:?}");
    assert_eq!(describe(broker, "ensure.PCF").await.0, 3);
    assert_eq!(describe(broker, "ensure.PCF").await.1, "300000");
    let (parts, retention, _) = describe(broker, "ensure.MAIN").await;
    assert_eq!((parts, retention.as_str()), (4, "21600000"));

    // Again: nothing to do.
    let again = ensure_topics(&c, &c.topics()).await.unwrap();
    assert_eq!(again, Default::default());

    // An operator's own setting on a topic survives a retention change.
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", &broker.bootstrap).create().unwrap();
    let own = AlterConfig::new(ResourceSpecifier::Topic("ensure.MAIN"))
        .set("max.message.bytes", "2000000");
    admin.alter_configs([&own], &AdminOptions::new()).await.unwrap().remove(0).unwrap();

    c.main_partitions = 6;
    c.main_retention_secs = 3600;
    c.nf_partitions = 2; // fewer than there are: kept
    let changed = ensure_topics(&c, &c.topics()).await.unwrap();
    assert_eq!(changed.created, Vec::<String>::new());
    assert_eq!(changed.grown, vec![("ensure.MAIN".to_string(), 4, 6)]);
    assert_eq!(changed.retention_set, vec!["ensure.MAIN".to_string()]);
    assert_eq!(changed.more_partitions.len(), 7, "{changed:?}");
    let (parts, retention, max_bytes) = describe(broker, "ensure.MAIN").await;
    assert_eq!((parts, retention.as_str(), max_bytes.as_str()), (6, "3600000", "2000000"));
    assert_eq!(describe(broker, "ensure.PCF").await.0, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_round_trip_in_order_per_key_each_key_in_one_partition() {
    let Some(broker) = testkit::kafka::broker() else { return };
    let c = config(broker, "order.");
    let topic = spec(&c, "copies", 4);
    ensure_topics(&c, std::slice::from_ref(&topic)).await.unwrap();
    let producer = Producer::connect(&c, "test").await.unwrap();
    let keys: Vec<String> = (0..6).map(|k| format!("imsi-00101000000000{k}")).collect();
    let mut sent = Vec::new();
    let mut acked = HashMap::new();
    for round in 0..5 {
        let batch: Vec<(String, Vec<u8>)> = (0..120)
            .map(|i| {
                let k = &keys[i % keys.len()];
                (k.clone(), format!("{k}/{}", round * 120 + i).into_bytes())
            })
            .collect();
        let delivered = producer
            .append_batch(
                &topic.name,
                batch.iter().map(|(k, p)| (Some(k.as_bytes()), p.as_slice())),
            )
            .await
            .unwrap();
        assert_eq!(delivered.len(), batch.len());
        for ((_, p), d) in batch.iter().zip(&delivered) {
            assert!(d.offset >= 0 && (0..4).contains(&d.partition));
            acked.insert(p.clone(), (d.partition, d.offset));
        }
        sent.extend(batch);
    }
    let consumer = Consumer::join(&c, &c.group("order"), &[&topic.name]).await.unwrap();
    let got = read(&consumer, sent.len(), Duration::from_secs(30)).await;
    assert_eq!(got.len(), sent.len());
    let mut per_key: BTreeMap<String, (BTreeSet<i32>, Vec<usize>)> = BTreeMap::new();
    for r in &got {
        let text = std::str::from_utf8(&r.payload).unwrap();
        let (k, n) = text.split_once('/').unwrap();
        assert_eq!(
            acked[r.payload.as_ref()],
            (r.partition, r.offset),
            "the producer's report is where it is"
        );
        let e = per_key.entry(k.to_string()).or_default();
        e.0.insert(r.partition);
        e.1.push(n.parse().unwrap());
        assert_eq!(&*r.topic, topic.name.as_str());
    }
    assert_eq!(per_key.len(), keys.len());
    for (k, (partitions, seq)) in per_key {
        assert_eq!(partitions.len(), 1, "{k} in {partitions:?}");
        assert!(seq.windows(2).all(|w| w[0] < w[1]), "{k} out of order: {seq:?}");
        assert_eq!(seq.len(), 100);
    }
    consumer.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_members_of_a_group_share_the_partitions_and_together_read_everything_once() {
    let Some(broker) = testkit::kafka::broker() else { return };
    let c = config(broker, "group.");
    let topic = spec(&c, "main", 4);
    ensure_topics(&c, std::slice::from_ref(&topic)).await.unwrap();
    let group = c.group("feed.shared");
    let a = Consumer::join(&c, &group, &[&topic.name]).await.unwrap();
    let b = Consumer::join(&c, &group, &[&topic.name]).await.unwrap();
    // The group settles once both members hold partitions, none twice, all four between them.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (x, y) = tokio::join!(
            a.next_batch(100, Duration::from_millis(100)),
            b.next_batch(100, Duration::from_millis(100))
        );
        assert!(x.unwrap().is_empty() && y.unwrap().is_empty(), "nothing produced yet");
        let (pa, pb) = (a.assignment(), b.assignment());
        let all: BTreeSet<_> = pa.iter().chain(&pb).map(|(_, p)| *p).collect();
        if !pa.is_empty() && !pb.is_empty() && pa.len() + pb.len() == 4 && all.len() == 4 {
            break;
        }
        assert!(Instant::now() < deadline, "the group did not settle: {pa:?} {pb:?}");
    }
    let producer = Producer::connect(&c, "test").await.unwrap();
    let payloads: Vec<Vec<u8>> = (0..400).map(|i| format!("copy {i}").into_bytes()).collect();
    let keys: Vec<String> = (0..400).map(|i| format!("imsi-{}", i % 40)).collect();
    producer
        .append_batch(
            &topic.name,
            keys.iter().zip(&payloads).map(|(k, p)| (Some(k.as_bytes()), p.as_slice())),
        )
        .await
        .unwrap();
    let (mut from_a, mut from_b) = (Vec::new(), Vec::new());
    let deadline = Instant::now() + Duration::from_secs(30);
    while from_a.len() + from_b.len() < payloads.len() && Instant::now() < deadline {
        let (x, y) = tokio::join!(
            a.next_batch(1000, Duration::from_millis(200)),
            b.next_batch(1000, Duration::from_millis(200))
        );
        let (x, y) = (x.unwrap(), y.unwrap());
        a.done(&x).unwrap();
        b.done(&y).unwrap();
        from_a.extend(x.records);
        from_b.extend(y.records);
    }
    assert!(!from_a.is_empty() && !from_b.is_empty(), "{} / {}", from_a.len(), from_b.len());
    let pa: BTreeSet<i32> = from_a.iter().map(|r| r.partition).collect();
    let pb: BTreeSet<i32> = from_b.iter().map(|r| r.partition).collect();
    assert!(pa.is_disjoint(&pb), "a partition read by both: {pa:?} {pb:?}");
    let mut all: Vec<Vec<u8>> = from_a.iter().chain(&from_b).map(|r| r.payload.to_vec()).collect();
    all.sort();
    let mut want = payloads.clone();
    want.sort();
    assert_eq!(all, want, "every record once");
    a.close().await.unwrap();
    b.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_restarted_resumes_at_the_committed_offset_and_loses_nothing() {
    let Some(broker) = testkit::kafka::broker() else { return };
    let c = config(broker, "resume.");
    let topic = spec(&c, "main", 1);
    ensure_topics(&c, std::slice::from_ref(&topic)).await.unwrap();
    let producer = Producer::connect(&c, "test").await.unwrap();
    let payloads: Vec<Vec<u8>> = (0..100).map(|i| format!("{i}").into_bytes()).collect();
    producer
        .append_batch(&topic.name, payloads.iter().map(|p| (None, p.as_slice())))
        .await
        .unwrap();
    let group = c.group("feed.resume");

    let first = Consumer::join(&c, &group, &[&topic.name]).await.unwrap();
    let mut finished = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while finished.len() < 60 && Instant::now() < deadline {
        let b = first.next_batch(60 - finished.len(), Duration::from_millis(200)).await.unwrap();
        first.done(&b).unwrap();
        finished.extend(b.records);
    }
    assert_eq!(finished.len(), 60);
    // Read, never finished (the sink failed, the instance stopped): not committed.
    let mut unfinished = first.next_batch(20, Duration::from_secs(5)).await.unwrap();
    while unfinished.len() < 20 {
        let more = first.next_batch(20 - unfinished.len(), Duration::from_secs(5)).await.unwrap();
        assert!(!more.is_empty());
        unfinished.records.extend(more.records);
    }
    assert_eq!(unfinished.records[0].offset, 60);
    first.close().await.unwrap();

    let second = Consumer::join(&c, &group, &[&topic.name]).await.unwrap();
    let rest = read(&second, 40, Duration::from_secs(30)).await;
    let offsets: Vec<i64> = rest.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, (60..100).collect::<Vec<_>>(), "resumes after the last finished batch");
    let seen: Vec<&[u8]> = finished.iter().chain(&rest).map(|r| r.payload.as_ref()).collect();
    assert_eq!(seen, payloads.iter().map(|p| p.as_slice()).collect::<Vec<_>>());
    second.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_that_does_not_exist_is_an_error_for_producer_and_consumer() {
    let Some(broker) = testkit::kafka::broker() else { return };
    let mut c = config(broker, "missing.");
    c.producer.delivery_timeout_ms = 3000;
    let producer = Producer::connect(&c, "test").await.unwrap();
    let started = Instant::now();
    let e = producer
        .append_batch("missing.NOPE", [(None, &b"x"[..]), (None, &b"y"[..])])
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    assert!(matches!(e, KafkaError::Delivery { index: 0, .. }), "{e}");
    assert!(e.to_string().contains("missing.NOPE"), "{e}");
    let e = Consumer::join(&c, "g", &["missing.NOPE"]).await.err().unwrap();
    assert_eq!(
        e.to_string(),
        format!("topic missing.NOPE: does not exist on the cluster at {}", broker.bootstrap)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_that_does_not_answer_is_a_clear_error_within_the_timeout() {
    // No broker needed: a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut c = KafkaConfig::new(format!("127.0.0.1:{port}"));
    c.request_timeout_ms = 1500;
    let started = Instant::now();
    let errors = [
        Producer::connect(&c, "test").await.err().unwrap(),
        Consumer::join(&c, "g", &["MAIN"]).await.err().unwrap(),
        ensure_topics(&c, &c.topics()).await.unwrap_err(),
    ];
    assert!(started.elapsed() < Duration::from_secs(15), "{:?}", started.elapsed());
    for e in errors {
        let text = e.to_string();
        assert!(matches!(e, KafkaError::Unreachable { .. }), "{text}");
        assert!(
            text.starts_with(&format!(
                "the Kafka cluster at 127.0.0.1:{port} did not answer within 1500 ms"
            )),
            "{text}"
        );
    }
    // A configuration that cannot work is refused before any connection.
    let bad = KafkaConfig::new("no-port");
    let e = Producer::connect(&bad, "test").await.err().unwrap();
    assert!(e.to_string().contains("/dd/kafka/bootstrap_servers"), "{e}");
}

/// `cargo test -p fivecore-dd --test kafka -- --ignored --nocapture throughput`: records of
/// 1.2 KB produced (acks=all) and consumed through the broker on this machine, three runs each
/// with compression none and lz4; prints each run, the median and the broker's CPU.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn throughput_of_1_2_kb_records_produced_and_consumed() {
    let Some(broker) = testkit::kafka::broker() else { return };
    let n: usize =
        std::env::var("KAFKA_BENCH_RECORDS").ok().and_then(|v| v.parse().ok()).unwrap_or(300_000);
    let payload = Arc::new(vec![b'x'; 1200]);
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
            let topic = spec(&c, "main", 6);
            ensure_topics(&c, std::slice::from_ref(&topic)).await.unwrap();
            let producer = Arc::new(Producer::connect(&c, "bench").await.unwrap());
            let cpu0 = broker.cpu_seconds();
            let started = Instant::now();
            // Several batches in flight, as the aggregation of several NF topics would have.
            let tasks: Vec<_> = (0..8)
                .map(|t| {
                    let (producer, payload, name) =
                        (producer.clone(), payload.clone(), topic.name.clone());
                    tokio::spawn(async move {
                        let mut i = t;
                        while i < n / 1000 {
                            let records = (0..1000).map(|_| (None, payload.as_slice()));
                            producer.append_batch(&name, records).await.unwrap();
                            i += 8;
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
            let secs = started.elapsed().as_secs_f64();
            let cpu = broker.cpu_seconds() - cpu0;
            let rate = (n / 1000 * 1000) as f64 / secs;
            println!(
                "produce {compression} run {run}: {rate:.0} records/s, broker CPU {:.0} % of one core",
                100.0 * cpu / secs
            );
            produced.push((rate, 100.0 * cpu / secs));

            let consumer = Consumer::join(&c, &c.group("bench"), &[&topic.name]).await.unwrap();
            let cpu0 = broker.cpu_seconds();
            let started = Instant::now();
            let mut got = 0;
            while got < n / 1000 * 1000 {
                let b = consumer.next_batch(10_000, Duration::from_secs(5)).await.unwrap();
                assert!(!b.is_empty(), "stalled at {got}");
                got += b.len();
                consumer.done(&b).unwrap();
            }
            let secs = started.elapsed().as_secs_f64();
            let cpu = broker.cpu_seconds() - cpu0;
            let rate = got as f64 / secs;
            println!(
                "consume {compression} run {run}: {rate:.0} records/s, broker CPU {:.0} % of one core",
                100.0 * cpu / secs
            );
            consumed.push((rate, 100.0 * cpu / secs));
            consumer.close().await.unwrap();
        }
        for (what, mut runs) in [("produce", produced), ("consume", consumed)] {
            runs.sort_by(|a, b| a.0.total_cmp(&b.0));
            println!(
                "{what} {compression}: median {:.0} records/s of 1.2 KB ({:.0} MB/s), broker CPU {:.0} % of one core",
                runs[1].0,
                runs[1].0 * 1200.0 / 1e6,
                runs[1].1
            );
        }
    }
}
