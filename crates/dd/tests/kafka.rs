//! The Kafka mode against a real single-node KRaft broker (crates/testkit/src/kafka.rs: Kafka
//! 4.3.1 from Maven Central jars, started once for this test binary, stopped by PID when it
//! exits). Each test uses its own topics and groups on the shared broker. Skipped without Java
//! or the jars unless `FIVECORE_REQUIRE_KAFKA=1` (./test.sh fetches the jars and sets it).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dd::kafka::{ensure_topics, Consumer, KafkaConfig, KafkaError, Producer};
use dd::sinks::kafka::{KafkaSink, KafkaSinkConfig};
use dd::sources::kafka::{Downstream, KafkaSource, KafkaSourceConfig, SourceCounters};
use rdkafka::admin::{AdminClient, AdminOptions, AlterConfig, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::ClientConfig;
use testkit::kafka::Broker;

#[path = "kafka/copies.rs"]
mod copies;
#[path = "kafka/mode.rs"]
mod mode;
#[path = "kafka/setup.rs"]
mod setup;
use copies::copy;
use setup::{config, spec};

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
    assert_eq!(report.created.len(), dd::kafka::NF_TOPICS.len() + 1, "{report:?}");
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
    // The broker applies an alter after answering it: wait until a describe shows it, as an
    // operator's change would long have been by the next start (ensure_topics reads, then
    // writes the whole dynamic configuration back).
    let deadline = Instant::now() + Duration::from_secs(10);
    while describe(broker, "ensure.MAIN").await.2 != "2000000" && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    c.main_partitions = 6;
    c.main_retention_secs = 3600;
    c.nf_partitions = 2; // fewer than there are: kept
    let changed = ensure_topics(&c, &c.topics()).await.unwrap();
    assert_eq!(changed.created, Vec::<String>::new());
    assert_eq!(changed.grown, vec![("ensure.MAIN".to_string(), 4, 6)]);
    assert_eq!(changed.retention_set, vec!["ensure.MAIN".to_string()]);
    assert_eq!(changed.more_partitions.len(), dd::kafka::NF_TOPICS.len(), "{changed:?}");
    // The broker applies a topic's new configuration asynchronously: a describe right after the
    // AlterConfigs may still show the old retention.
    let deadline = Instant::now() + Duration::from_secs(10);
    while describe(broker, "ensure.MAIN").await.1 != "3600000" && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (parts, retention, max_bytes) = describe(broker, "ensure.MAIN").await;
    assert_eq!((parts, retention.as_str(), max_bytes.as_str()), (6, "3600000", "2000000"));
    assert_eq!(describe(broker, "ensure.PCF").await.0, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_ensuring_the_same_topics_at_once_both_succeed() {
    let Some(broker) = testkit::kafka::broker() else { return };
    let c = config(broker, "race.");
    let topics = c.topics();
    let (a, b) = tokio::join!(ensure_topics(&c, &topics), ensure_topics(&c, &topics));
    let (a, b) = (a.unwrap(), b.unwrap());
    let mut created: Vec<String> = a.created.into_iter().chain(b.created).collect();
    created.sort();
    created.dedup();
    assert_eq!(created.len(), dd::kafka::NF_TOPICS.len() + 1, "{created:?}");
    for t in c.topics() {
        assert_eq!(describe(broker, &t.name).await.0, 6);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_larger_than_the_producers_queue_waits_for_room_and_is_delivered_whole() {
    let Some(broker) = testkit::kafka::broker() else { return };
    let mut c = config(broker, "queue.");
    c.producer.queue_max_messages = 100;
    let topic = spec(&c, "main", 2);
    ensure_topics(&c, std::slice::from_ref(&topic)).await.unwrap();
    let producer = Producer::connect(&c, "test").await.unwrap();
    let payloads: Vec<Vec<u8>> = (0..3000).map(|i| format!("{i}").into_bytes()).collect();
    let delivered = producer
        .append_batch(&topic.name, payloads.iter().map(|p| (None, p.as_slice())))
        .await
        .unwrap();
    assert_eq!(delivered.len(), 3000);
    let consumer = Consumer::join(&c, &c.group("queue"), &[&topic.name]).await.unwrap();
    let got = read(&consumer, 3000, Duration::from_secs(30)).await;
    let mut seen: Vec<usize> =
        got.iter().map(|r| std::str::from_utf8(&r.payload).unwrap().parse().unwrap()).collect();
    seen.sort();
    assert_eq!(seen, (0..3000).collect::<Vec<_>>());
    consumer.close().await.unwrap();
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
    c.request_timeout_ms = 3000;
    let producer = Producer::connect(&c, "test").await.unwrap();
    let started = Instant::now();
    let e = producer
        .append_batch("missing.NOPE", [(None, &b"x"[..]), (None, &b"y"[..])])
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    assert!(matches!(e, KafkaError::Delivery { index: 0, .. }), "{e}");
    assert!(e.to_string().contains("missing.NOPE"), "{e}");
    // The consumer waits request_timeout_ms for the topic to appear (one just created takes a
    // moment to be everywhere), then says which is missing.
    let started = Instant::now();
    let e = Consumer::join(&c, "g", &["missing.NOPE"]).await.err().unwrap();
    assert!(started.elapsed() < Duration::from_secs(8), "{:?}", started.elapsed());
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

/// Every record of `topic` from its start, read by a plain librdkafka consumer of its own group:
/// (key, partition, payload).
async fn read_raw(broker: &Broker, topic: &str, n: usize) -> Vec<(Option<Vec<u8>>, i32, Vec<u8>)> {
    use rdkafka::consumer::{Consumer as _, StreamConsumer};
    use rdkafka::Message;
    let raw: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", &broker.bootstrap)
        .set("group.id", format!("raw-reader-{topic}"))
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    raw.subscribe(&[topic]).unwrap();
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while out.len() < n && Instant::now() < deadline {
        if let Ok(m) = tokio::time::timeout(Duration::from_millis(500), raw.recv()).await {
            let m = m.unwrap();
            out.push((m.key().map(<[u8]>::to_vec), m.partition(), m.payload().unwrap().to_vec()));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kafka_feed_writes_each_envelope_as_one_record_keyed_by_its_supi() {
    let Some(broker) = testkit::kafka::broker() else { return };
    let c = config(broker, "feed.");
    let mut feed = KafkaSinkConfig::new("feed.analytics");
    feed.partitions = 3;
    let sink = KafkaSink::build(&feed, Some(&c), "analytics").await.unwrap();
    assert_eq!(describe(broker, "feed.analytics").await.0, 3, "the feed's topic is created");
    sink.healthcheck().await.unwrap();
    let supis: Vec<String> = (0..5).map(|s| format!("imsi-00101000000100{s}")).collect();
    let envelopes: Vec<bytes::Bytes> = (0..110u64)
        .map(|i| {
            let supi = if i % 11 == 10 { "" } else { &supis[i as usize % 5] };
            bytes::Bytes::from(copies::copy_of(i, supi, 600))
        })
        .collect();
    for part in envelopes.chunks(40) {
        sink.deliver(part).await.unwrap();
    }
    let got = read_raw(broker, "feed.analytics", envelopes.len()).await;
    assert_eq!(got.len(), envelopes.len());
    let mut partition_of: HashMap<Vec<u8>, i32> = HashMap::new();
    let mut last_seq: HashMap<Vec<u8>, u64> = HashMap::new();
    let mut seen = BTreeSet::new();
    for (key, partition, payload) in &got {
        let copy = dd::envelope::Copy::decode(bytes::Bytes::from(payload.clone())).unwrap();
        assert_eq!(payload, &envelopes[copy.sequence as usize][..], "the envelope as it was");
        assert!(seen.insert(copy.sequence));
        match key {
            None => assert_eq!(copy.supi(), "", "only copies without SUPI have no key"),
            Some(k) => {
                assert_eq!(k.as_slice(), copy.supi().as_bytes());
                assert_eq!(*partition_of.entry(k.clone()).or_insert(*partition), *partition);
                let last = last_seq.insert(k.clone(), copy.sequence);
                assert!(last.is_none_or(|l| l < copy.sequence), "one subscriber's copies in order");
            }
        }
    }
    assert_eq!(partition_of.len(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kafka_feed_to_a_cluster_that_does_not_answer_is_refused_at_build() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut dd = KafkaConfig::new(format!("127.0.0.1:{port}"));
    dd.request_timeout_ms = 1000;
    let e = KafkaSink::build(&KafkaSinkConfig::new("t"), Some(&dd), "f").await.err().unwrap();
    assert!(matches!(e, KafkaError::Unreachable { .. }), "{e}");
    assert!(e.retryable());
    let e = KafkaSink::build(&KafkaSinkConfig::new("t"), None, "f").await.err().unwrap();
    assert!(e.to_string().contains("/bootstrap_servers: required"), "{e}");
    assert!(!e.retryable());
}

/// The pipeline's side of the source, for the tests: keeps what it takes, refuses while told to.
#[derive(Default)]
struct Pipeline {
    taken: std::sync::Mutex<Vec<dd::envelope::Copy>>,
    refuse: std::sync::atomic::AtomicI64,
}

impl Downstream for Pipeline {
    type Error = String;
    async fn accept(&self, copies: &[dd::envelope::Copy]) -> Result<(), String> {
        use std::sync::atomic::Ordering;
        if self.refuse.load(Ordering::SeqCst) != 0 {
            self.refuse.fetch_sub(1, Ordering::SeqCst);
            return Err("the NF topic's queue is full".into());
        }
        self.taken.lock().unwrap().extend_from_slice(copies);
        Ok(())
    }
}

/// Runs a source over `pipeline` until `until` holds of its counters (or 30 s pass), then stops it.
async fn run_source(
    cfg: &KafkaSourceConfig,
    dd: &KafkaConfig,
    pipeline: Arc<Pipeline>,
    until: impl Fn(&SourceCounters) -> bool,
) -> Arc<SourceCounters> {
    let source = KafkaSource::build(cfg, Some(dd)).await.unwrap();
    let counters = source.counters();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        source
            .run(&*pipeline, async {
                let _ = stopped.await;
            })
            .await
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    while !until(&counters) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
    counters
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_nfs_write_to_kafka_reach_the_pipeline_and_other_records_are_passed_over() {
    use std::sync::atomic::Ordering::SeqCst;
    let Some(broker) = testkit::kafka::broker() else { return };
    let c = config(broker, "source.");
    let topic = spec(&c, "nf-copies", 2);
    ensure_topics(&c, std::slice::from_ref(&topic)).await.unwrap();
    let producer = Producer::connect(&c, "nf").await.unwrap();
    let mut records: Vec<Vec<u8>> = (0..40).map(|i| copy(i, 900)).collect();
    records.insert(7, b"not an envelope".to_vec());
    records.insert(30, vec![2; 40]); // version 2
    producer.append_batch(&topic.name, records.iter().map(|r| (None, r.as_slice()))).await.unwrap();

    let pipeline = Arc::new(Pipeline::default());
    let cfg = KafkaSourceConfig::new(&[&topic.name]);
    let counters = run_source(&cfg, &c, pipeline.clone(), |k| k.received.load(SeqCst) == 42).await;
    assert_eq!(
        [&counters.received, &counters.invalid, &counters.accepted, &counters.refused]
            .map(|a| a.load(SeqCst)),
        [42, 2, 40, 0]
    );
    let mut seqs: Vec<u64> = pipeline.taken.lock().unwrap().iter().map(|c| c.sequence).collect();
    seqs.sort();
    assert_eq!(seqs, (0..40).collect::<Vec<_>>());
    let first = &pipeline.taken.lock().unwrap()[0];
    assert_eq!((first.nf_type(), first.operation()), ("PCF", "Npcf_SMPolicyControl_Create"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_the_pipeline_refused_are_offered_again_and_a_restart_reads_only_what_it_did_not_take(
) {
    use std::sync::atomic::Ordering::SeqCst;
    let Some(broker) = testkit::kafka::broker() else { return };
    let c = config(broker, "retry.");
    let topic = spec(&c, "nf-copies", 1);
    ensure_topics(&c, std::slice::from_ref(&topic)).await.unwrap();
    let producer = Producer::connect(&c, "nf").await.unwrap();
    let first: Vec<Vec<u8>> = (0..30).map(|i| copy(i, 700)).collect();
    producer.append_batch(&topic.name, first.iter().map(|r| (None, r.as_slice()))).await.unwrap();
    let cfg = KafkaSourceConfig::new(&[&topic.name]);
    let taken = |p: &Pipeline| {
        let mut s: Vec<u64> = p.taken.lock().unwrap().iter().map(|c| c.sequence).collect();
        s.sort();
        s
    };

    // The pipeline refuses everything; the source stops while offering.
    let down = Arc::new(Pipeline { refuse: (-1).into(), ..Default::default() });
    let counters = run_source(&cfg, &c, down.clone(), |k| k.refused.load(SeqCst) >= 2).await;
    assert!(counters.refused.load(SeqCst) >= 2);
    assert_eq!(counters.accepted.load(SeqCst), 0);

    // Started again, nothing was lost; one more refusal is offered again.
    let back = Arc::new(Pipeline { refuse: 1.into(), ..Default::default() });
    let counters = run_source(&cfg, &c, back.clone(), |k| k.accepted.load(SeqCst) == 30).await;
    assert_eq!(counters.refused.load(SeqCst), 1);
    assert_eq!(taken(&back), (0..30).collect::<Vec<_>>());

    // What it took was committed: a restart reads only the new copies.
    let more: Vec<Vec<u8>> = (30..40).map(|i| copy(i, 700)).collect();
    producer.append_batch(&topic.name, more.iter().map(|r| (None, r.as_slice()))).await.unwrap();
    let again = Arc::new(Pipeline::default());
    let counters = run_source(&cfg, &c, again.clone(), |k| k.accepted.load(SeqCst) >= 10).await;
    assert_eq!(counters.received.load(SeqCst), 10);
    assert_eq!(taken(&again), (30..40).collect::<Vec<_>>());
}
