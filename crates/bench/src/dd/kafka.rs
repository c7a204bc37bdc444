//! Kafka in a Data Director scenario: the broker the kit starts (or one it is given), and the
//! Kafka consumer behind a feed of `"type": "kafka"`.
//!
//! A scenario needs a broker when a feed is a Kafka feed, or when its Data Director's
//! configuration names `{kafka_bootstrap}` (the Kafka mode, `[nf_config.dd.kafka]
//! bootstrap_servers = "{kafka_bootstrap}"`). The kit then starts a single-node KRaft broker on
//! 127.0.0.1 (crate `fivecore-kafka-broker`, the recipe the Data Director's tests use) with its
//! directory in a temporary directory of the run, reports its CPU and RSS beside the Data
//! Director's (the reference's D6 counts its Kafka brokers' cores), and stops it by its PID at
//! the end. `--kafka-bootstrap HOST:PORT` uses a running broker instead (its CPU is then not
//! known); `--kafka-home DIR` (or `FIVECORE_KAFKA_HOME`) an installed Kafka's jars.
//!
//! The consumer reads the feed's topic from its beginning (the topic is the run's own, created
//! with the feed), a partition set per consumer, and counts each record as the TCP and HTTP/2
//! consumers count a frame (crate::dd::consumer): its envelope's timestamp and sequence, the
//! end-to-end latency, distinct copies and duplicates per source.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};

use super::config::FeedKind;
use super::consumer::{envelope_info, FeedCounters, FrameInfo};
use crate::scenario::Scenario;

/// The placeholder of the broker's `host:port` in a scenario's NF configuration.
pub const BOOTSTRAP_VAR: &str = "{kafka_bootstrap}";

/// The environment variable naming an installed Kafka (`--kafka-home`).
pub const HOME_ENV: &str = "FIVECORE_KAFKA_HOME";

/// Whether scenario `s` needs a broker: a Kafka feed, or its configuration naming
/// [`BOOTSTRAP_VAR`].
pub fn needed(s: &Scenario) -> bool {
    let feeds = s.dd.as_ref().is_some_and(|d| d.feeds.iter().any(|f| f.kind == FeedKind::Kafka));
    let named = |t: &toml::Table| toml::to_string(t).is_ok_and(|x| x.contains(BOOTSTRAP_VAR));
    feeds || s.nf_config.values().any(named) || s.nf_sections.values().any(named)
}

/// Where the broker comes from.
#[derive(Debug, Clone, Default)]
pub struct KafkaOptions {
    /// An installed Kafka (its `libs`), over the jars `scripts/kafka/fetch.sh` fetched.
    pub home: Option<PathBuf>,
    /// A running broker: none is started.
    pub bootstrap: Option<String>,
    /// The started broker's client port (default: one the system chooses).
    pub port: Option<u16>,
}

/// The run's broker.
pub enum KitKafka {
    Started {
        broker: kafka_broker::Broker,
        // Removed after the broker (whose own directory is in it) has stopped.
        _dir: tempfile::TempDir,
    },
    Given(String),
}

impl KitKafka {
    pub fn bootstrap(&self) -> &str {
        match self {
            KitKafka::Started { broker, .. } => &broker.bootstrap,
            KitKafka::Given(b) => b,
        }
    }

    /// The broker's PID when the kit started it.
    pub fn pid(&self) -> Option<u32> {
        match self {
            KitKafka::Started { broker, .. } => Some(broker.pid),
            KitKafka::Given(_) => None,
        }
    }

    /// Stops a broker the kit started, by its PID, and removes its directory.
    pub fn stop(&self) {
        if let KitKafka::Started { broker, .. } = self {
            broker.stop();
        }
    }
}

/// The jars: `home`'s (`<home>/libs`, or `home` itself), else `$FIVECORE_KAFKA_LIBS`, else
/// `target/kafka-<version>/libs` of the workspace this kit was built in or of the current
/// directory (where `scripts/kafka/fetch.sh` puts them).
pub fn libs(home: Option<&Path>) -> Result<PathBuf> {
    if let Some(h) = home {
        return [h.join("libs"), h.to_path_buf()]
            .into_iter()
            .find(|d| kafka_broker::libs_ready(d))
            .with_context(|| {
                format!("--kafka-home {}: no Kafka jars in {0}/libs nor in {0}", h.display())
            });
    }
    if let Some(d) = std::env::var_os("FIVECORE_KAFKA_LIBS").map(PathBuf::from) {
        if kafka_broker::libs_ready(&d) {
            return Ok(d);
        }
        bail!("FIVECORE_KAFKA_LIBS={}: no complete set of Kafka jars there", d.display());
    }
    let built_in = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let candidates =
        [kafka_broker::fetched_libs(&built_in), kafka_broker::fetched_libs(Path::new("."))];
    if let Some(d) = candidates.iter().find(|d| kafka_broker::libs_ready(d)) {
        return Ok(d.clone());
    }
    Err(not_found(&candidates))
}

fn not_found(candidates: &[PathBuf]) -> anyhow::Error {
    let places: Vec<String> = candidates.iter().map(|d| d.display().to_string()).collect();
    anyhow::anyhow!(
        "the scenario needs a Kafka broker and the Kafka {} jars are not in {}: fetch them with \
         scripts/kafka/fetch.sh (Maven), or give --kafka-home of an installed Kafka, or \
         --kafka-bootstrap of a running broker",
        kafka_broker::VERSION,
        places.join(" nor in ")
    )
}

/// Starts the run's broker (blocking: a JVM's start, seconds), or takes the one given.
pub fn start(o: &KafkaOptions) -> Result<KitKafka> {
    if let Some(b) = &o.bootstrap {
        return Ok(KitKafka::Given(b.clone()));
    }
    let home = o.home.clone().or_else(|| std::env::var_os(HOME_ENV).map(PathBuf::from));
    let libs = libs(home.as_deref())?;
    let java = kafka_broker::java().map_err(anyhow::Error::msg)?;
    let dir = tempfile::Builder::new().prefix("fivecore-bench-kafka-").tempdir()?;
    let mut opts = kafka_broker::Options::new(java, libs, dir.path().to_path_buf());
    opts.port = o.port;
    let broker = kafka_broker::start(&opts).map_err(anyhow::Error::msg)?;
    Ok(KitKafka::Started { broker, _dir: dir })
}

fn client(bootstrap: &str, group: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        // A fetch waits at most 5 ms for more records: the broker's default (500 ms) would be
        // most of the end-to-end latency measured at a low rate.
        .set("fetch.wait.max.ms", "5")
        .set("log_level", "3");
    c
}

/// The partitions of `topic`, once the cluster knows it (the feed created it).
pub fn partitions(bootstrap: &str, topic: &str, within: Duration) -> Result<Vec<i32>> {
    let c: BaseConsumer = client(bootstrap, "fivecore-bench-metadata").create()?;
    let deadline = Instant::now() + within;
    loop {
        let md = c.fetch_metadata(Some(topic), Duration::from_secs(5));
        if let Ok(md) = &md {
            if let Some(t) = md.topics().iter().find(|t| t.name() == topic) {
                if t.error().is_none() && !t.partitions().is_empty() {
                    return Ok(t.partitions().iter().map(|p| p.id()).collect());
                }
            }
        }
        if Instant::now() >= deadline {
            bail!("topic {topic} is not on the broker {bootstrap} ({:?})", md.err());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A consumer of some of a feed's topic's partitions, on a thread of its own (polling
/// librdkafka's queue costs less there than through the runtime); stopped when dropped.
pub struct KafkaConsumer {
    /// `topic[partitions]`, the report's endpoint.
    pub label: String,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for KafkaConsumer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Records polled at most before they are counted together.
const BATCH: usize = 4096;

/// Starts a consumer of `topic`'s `parts` from their beginning, counting into `endpoint` of
/// `feed`.
pub fn consume(
    bootstrap: &str,
    topic: &str,
    parts: &[i32],
    feed: Arc<FeedCounters>,
    endpoint: usize,
) -> Result<KafkaConsumer> {
    let c: BaseConsumer = client(bootstrap, &format!("fivecore-bench.{topic}")).create()?;
    let mut list = TopicPartitionList::new();
    for p in parts {
        list.add_partition_offset(topic, *p, Offset::Beginning)?;
    }
    // Assigned, not subscribed: no group rebalance to wait for, and the whole topic is read.
    c.assign(&list)?;
    let stop = Arc::new(AtomicBool::new(false));
    let label =
        format!("{topic}[{}]", parts.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(","));
    let thread = {
        let stop = stop.clone();
        std::thread::Builder::new().name(format!("kafka-consumer-{endpoint}")).spawn(move || {
            let mut frames: Vec<FrameInfo> = Vec::with_capacity(BATCH);
            while !stop.load(Ordering::Relaxed) {
                frames.clear();
                let mut malformed = 0;
                let mut wait = Duration::from_millis(100);
                while frames.len() < BATCH {
                    match c.poll(wait) {
                        Some(Ok(m)) => {
                            let e = m.payload().unwrap_or_default();
                            match envelope_info(e, e.len()) {
                                Some(f) => frames.push(f),
                                None => malformed += 1,
                            }
                        }
                        // librdkafka retries on its own; the drain's count tells what was lost.
                        Some(Err(_)) | None => break,
                    }
                    wait = Duration::ZERO;
                }
                if !frames.is_empty() || malformed > 0 {
                    feed.record(endpoint, &frames, malformed);
                }
            }
        })?
    };
    Ok(KafkaConsumer { label, stop, thread: Some(thread) })
}

/// Splits `parts` over `n` consumers, round-robin.
pub fn split(parts: &[i32], n: usize) -> Vec<Vec<i32>> {
    let mut out = vec![Vec::new(); n];
    for (i, p) in parts.iter().enumerate() {
        out[i % n].push(*p);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_shared_round_robin() {
        assert_eq!(split(&[0, 1, 2, 3, 4, 5], 4), vec![vec![0, 4], vec![1, 5], vec![2], vec![3]]);
        assert_eq!(split(&[0, 1], 1), vec![vec![0, 1]]);
    }

    #[test]
    fn a_scenario_needs_a_broker_for_a_kafka_feed_or_the_kafka_mode() {
        let d6 = Scenario::load("dd-d6-270k-scp-kafka").unwrap();
        assert!(needed(&d6));
        let k = Scenario::load("dd-kafka-80k").unwrap();
        assert!(needed(&k));
        let embedded = Scenario::load("dd-embedded-200k").unwrap();
        assert!(!needed(&embedded));
        let mut tcp_only = k.clone();
        for f in &mut tcp_only.dd.as_mut().unwrap().feeds {
            f.kind = FeedKind::Tcp;
        }
        assert!(needed(&tcp_only), "the Kafka mode alone needs it");
    }

    #[test]
    fn missing_jars_name_the_fetch_script_and_a_home_its_directory() {
        let empty = std::env::temp_dir().join(format!("fivecore-no-kafka-{}", std::process::id()));
        std::fs::create_dir_all(&empty).unwrap();
        let e = libs(Some(&empty)).unwrap_err().to_string();
        assert!(e.contains("--kafka-home") && e.contains(&empty.display().to_string()), "{e}");
        std::fs::create_dir_all(empty.join("libs")).unwrap();
        std::fs::write(empty.join("libs/kafka_2.13-4.3.1.jar"), b"").unwrap();
        assert_eq!(libs(Some(&empty)).unwrap(), empty.join("libs"));
        std::fs::remove_dir_all(&empty).unwrap();
        let e = not_found(&[PathBuf::from("/a/libs"), PathBuf::from("b/libs")]).to_string();
        assert!(e.contains("scripts/kafka/fetch.sh") && e.contains("/a/libs nor in b/libs"), "{e}");
    }
}
