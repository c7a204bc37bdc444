//! The Data Director in its Kafka mode, end to end: two instances on one cluster share the
//! ingest, the aggregation and a feed through their consumer groups; copies an NF writes to Kafka
//! come in through a Kafka source; each copy reaches the feed's TCP consumer once, and a Kafka feed
//! writes it to its topic. On one MariaDB database the instances share their admin objects too: a
//! feed made at one is run by the other.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use dd::kafka::{ensure_topics, Consumer, KafkaConfig, Producer, TopicSpec};
use sbi::client::{ClientConfig, SbiClient};
use serde_json::{json, Value};
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

use super::copies::copy;

struct Instance {
    base: String,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), dd::DdError>>,
}

async fn start(dir: &Path, kafka: &KafkaConfig, source: Option<&str>) -> Instance {
    let mut config = dd::DdConfig {
        kafka: Some(kafka.clone()),
        kafka_source: source.map(|t| dd::sources::kafka::KafkaSourceConfig::new(&[t])),
        ..Default::default()
    };
    config.aggregate.batch = 256;
    let run = dd::RunConfig {
        dd: config,
        sbi: sbi::ServerConfig::default(),
        client: ClientConfig::default(),
        store: store_config(dir),
        instance_id: None,
    };
    let bound = dd::bind(run).await.expect("the Data Director starts in the Kafka mode");
    let base = format!("http://{}", bound.local_addr());
    let (stop, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(bound.serve(async {
        let _ = rx.await;
    }));
    Instance { base, stop, task }
}

/// `dd.db` in `dir`, or the MariaDB database `dir` names (`testkit::backends::state_dir`).
fn store_config(dir: &Path) -> store::SqliteConfig {
    let sqlite = store::SqliteConfig { readers: 1, ..store::SqliteConfig::new(dir.join("dd.db")) };
    match testkit::backends::mysql_url(dir) {
        Some(url) => {
            store::SqliteConfig { backend: store::Backend::Mysql, url: vec![url], ..sqlite }
        }
        None => sqlite,
    }
}

impl Instance {
    async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.unwrap().unwrap();
    }
}

fn client() -> SbiClient {
    SbiClient::new(&ClientConfig::default()).unwrap()
}

async fn post(base: &str, path: &str, body: Value) -> sbi::client::SbiResponse {
    client().post(&format!("{base}{path}")).json(&body).send().await.unwrap()
}

/// Every envelope a TCP consumer reads, by sequence number.
async fn tcp_consumer(listener: TcpListener) -> mpsc::UnboundedReceiver<u64> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else { return };
            let tx = tx.clone();
            tokio::spawn(async move {
                loop {
                    let mut len = [0u8; 4];
                    if stream.read_exact(&mut len).await.is_err() {
                        return;
                    }
                    let mut buf = vec![0u8; u32::from_be_bytes(len) as usize];
                    if stream.read_exact(&mut buf).await.is_err() {
                        return;
                    }
                    let c = dd::envelope::Copy::decode(Bytes::from(buf)).unwrap();
                    let _ = tx.send(c.sequence);
                }
            });
        }
    });
    rx
}

fn batch(from: u64, n: u64) -> Bytes {
    let mut b = BytesMut::new();
    for i in from..from + n {
        dd::envelope::frame(&copy(i, 1200), &mut b);
    }
    b.freeze()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_share_ingest_aggregation_and_a_feed_each_copy_delivered_once() {
    let Some(broker) = testkit::kafka::broker() else { return };
    let mut kafka = super::config(broker, "mode.");
    kafka.nf_partitions = 2;
    kafka.main_partitions = 4;
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // A topic an NF writes its copies to, one envelope per record: instance A's Kafka source.
    let src = TopicSpec {
        key: "src".into(),
        name: "mode.SRC".into(),
        partitions: 2,
        retention_ms: 3_600_000,
        replication_factor: 1,
    };
    ensure_topics(&kafka, &[src]).await.unwrap();
    let (a, b) = tokio::join!(
        start(dir_a.path(), &kafka, Some("mode.SRC")),
        start(dir_b.path(), &kafka, None)
    );

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let mut rx = tcp_consumer(listener).await;
    let feed = json!({"name": "probe", "sink": {"type": "tcp", "endpoints": [{"address": addr.to_string()}]}});
    // The same feed on both instances: one consumer group, MAIN's partitions shared.
    for i in [&a, &b] {
        let r = post(&i.base, "/dd-admin/v1/feeds", feed.clone()).await;
        assert_eq!(r.status(), 201, "{:?}", r.body());
    }
    let out =
        json!({"name": "out", "sink": {"type": "kafka", "topic": "mode.OUT", "partitions": 2}});
    assert_eq!(post(&a.base, "/dd-admin/v1/feeds", out).await.status(), 201);
    let r =
        post(&a.base, "/dd-admin/v1/correlations", json!({"name": "c", "correlation": {}})).await;
    assert_eq!(r.status(), 400, "correlation is refused over Kafka");

    // Half the copies to each instance's ingest.
    let n = 2_000u64;
    for (k, i) in (0..n).step_by(250).zip([&a, &b].into_iter().cycle()) {
        let r = client()
            .post(&format!("{}/dd-ingest/v1/copies", i.base))
            .header("content-type", dd::envelope::CONTENT_TYPE)
            .body(batch(k, 250))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 204, "{:?}", r.body());
    }
    // And 200 copies an NF wrote to Kafka itself.
    let nf = Producer::connect(&kafka, "nf").await.unwrap();
    let written: Vec<Vec<u8>> = (n..n + 200).map(|i| copy(i, 1200)).collect();
    nf.append_batch("mode.SRC", written.iter().map(|c| (None, c.as_slice()))).await.unwrap();
    let n = n + 200;

    let mut seen: BTreeMap<u64, usize> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.len() < n as usize && Instant::now() < deadline {
        if let Ok(Some(s)) = tokio::time::timeout(Duration::from_secs(1), rx.recv()).await {
            *seen.entry(s).or_default() += 1;
        }
    }
    assert_eq!(seen.len(), n as usize, "every copy reaches the TCP feed");
    let twice = seen.values().filter(|c| **c > 1).count();
    assert_eq!(twice, 0, "no copy delivered twice in a steady group");

    let out = Consumer::join(&kafka, "mode.reader", &["mode.OUT"]).await.unwrap();
    let mut got = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while got < n as usize && Instant::now() < deadline {
        let b = out.next_batch(1000, Duration::from_secs(1)).await.unwrap();
        got += b.len();
        out.done(&b).unwrap();
    }
    assert_eq!(got, n as usize, "the Kafka feed wrote every copy to its topic");
    out.close().await.unwrap();
    tokio::join!(a.stop(), b.stop());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_one_mariadb_database_a_feed_made_at_one_instance_is_run_by_the_other() {
    let Some(broker) = testkit::kafka::broker() else { return };
    if !testkit::backends::use_mariadb() {
        return;
    }
    let mut kafka = super::config(broker, "mysqlmode.");
    kafka.nf_partitions = 2;
    kafka.main_partitions = 2;
    let dir_a = testkit::backends::state_dir("dd_kafka");
    let dir_b = tempfile::tempdir().unwrap();
    let url = testkit::backends::mysql_url(dir_a.path()).unwrap();
    std::fs::write(dir_b.path().join("mysql-url"), url).unwrap();
    let (a, b) = tokio::join!(start(dir_a.path(), &kafka, None), start(dir_b.path(), &kafka, None));

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let mut rx = tcp_consumer(listener).await;
    let feed = json!({"name": "shared", "sink": {"type": "tcp", "endpoints": [{"address": addr.to_string()}]}});
    let r = post(&a.base, "/dd-admin/v1/feeds", feed).await;
    assert_eq!(r.status(), 201, "{:?}", r.body());
    let start = Instant::now();
    loop {
        let r = client().get(&format!("{}/dd-admin/v1/feeds/shared", b.base)).send().await.unwrap();
        if r.status() == 200 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(1), "B does not show A's feed");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // A gone, B is the feed's group alone: what B takes is delivered only if B runs the feed it
    // learnt of through the database.
    a.stop().await;
    let n = 500u64;
    for k in (0..n).step_by(250) {
        let r = client()
            .post(&format!("{}/dd-ingest/v1/copies", b.base))
            .header("content-type", dd::envelope::CONTENT_TYPE)
            .body(batch(k, 250))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 204, "{:?}", r.body());
    }
    let mut seen: BTreeMap<u64, usize> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.len() < n as usize && Instant::now() < deadline {
        if let Ok(Some(s)) = tokio::time::timeout(Duration::from_secs(1), rx.recv()).await {
            *seen.entry(s).or_default() += 1;
        }
    }
    assert_eq!(seen.len(), n as usize, "B's feed delivers every copy B took");
    assert!(seen.values().all(|c| *c == 1), "each once");
    b.stop().await;
}
