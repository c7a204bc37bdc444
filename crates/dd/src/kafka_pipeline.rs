//! The pipeline over Kafka (`[dd.kafka]` set: the scale-out mode). The same stages as the
//! embedded mode, with Kafka's topics and consumer groups in place of the on-disk log, so several
//! Data Director instances on one cluster share the work:
//!
//! - ingest appends each copy to its NF topic (keyed by SUPI, so one subscriber's copies keep
//!   their order in one partition) and answers 204 once the brokers acknowledged the batch;
//! - aggregation is the consumer group `<group_id>.aggregate` over every NF topic: what a member
//!   reads it appends to MAIN (keyed by SUPI under key ordering, spread by the sticky partitioner
//!   under round-robin), then marks done, so an NF topic's offset moves only past copies MAIN
//!   acknowledged;
//! - a feed is the consumer group `<group_id>.feed.<name>` over MAIN: filter, sink, done. Each
//!   instance's member gets its share of MAIN's partitions; a feed's consumers across the
//!   instances deliver each copy once (at least once across a rebalance or a crash).
//!
//! Correlation needs every copy of a transaction in one consumer, in order, and its resume offset
//! per partition; over Kafka it is refused at the admin API (docs/dd.md says why and what to use).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use dd_client::Copy;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::kafka::{ensure_topics, Consumer, KafkaConfig, KafkaError, Producer, MAIN};
use crate::metrics::Metrics;
use crate::pipeline::{deliver_until_done, pause, Deliver, Select};
use crate::sinks::kafka::encode;
use crate::topics::NF_TOPICS;
use crate::transforms::aggregate::Ordering;

/// Longest wait for a first record before a consumer loop looks at its stop signal again.
const POLL: Duration = Duration::from_millis(200);

pub struct KafkaPipeline {
    cfg: KafkaConfig,
    ingest: Producer,
    /// NF topic names by index of [`NF_TOPICS`].
    nf_topics: Vec<String>,
    main: String,
}

impl KafkaPipeline {
    /// Creates the topics that are missing (partitions and retention as configured) and connects
    /// the ingest producer: fails when the cluster does not answer.
    pub async fn start(cfg: &KafkaConfig) -> Result<KafkaPipeline, KafkaError> {
        ensure_topics(cfg, &cfg.topics()).await?;
        let ingest = Producer::connect(cfg, "ingest").await?;
        let nf_topics = NF_TOPICS
            .iter()
            .map(|k| cfg.topic(k).map(|t| t.name).unwrap_or_else(|| k.to_ascii_uppercase()))
            .collect();
        let main = cfg.topic(MAIN).map(|t| t.name).unwrap_or_else(|| "MAIN".into());
        Ok(KafkaPipeline { cfg: cfg.clone(), ingest, nf_topics, main })
    }

    pub fn config(&self) -> &KafkaConfig {
        &self.cfg
    }

    pub fn main_topic(&self) -> &str {
        &self.main
    }

    /// Appends a batch of copies to the NF topic at `index`; Ok once every one is acknowledged.
    pub async fn append_nf(&self, index: usize, records: &[Bytes]) -> Result<(), KafkaError> {
        let topic = &self.nf_topics[index];
        let keyed = records.iter().map(|r| (encode::supi(r).filter(|k| !k.is_empty()), r.as_ref()));
        self.ingest.append_batch(topic, keyed).await.map(drop)
    }

    /// Starts this instance's member of the aggregation group.
    pub fn spawn_aggregation(
        self: &Arc<Self>,
        ordering: Ordering,
        batch: usize,
        metrics: Arc<Metrics>,
        stop: watch::Receiver<bool>,
    ) -> JoinHandle<()> {
        let me = self.clone();
        tokio::spawn(async move { me.aggregate(ordering, batch, metrics, stop).await })
    }

    async fn aggregate(
        &self,
        ordering: Ordering,
        batch: usize,
        metrics: Arc<Metrics>,
        mut stop: watch::Receiver<bool>,
    ) {
        let topics: Vec<&str> = self.nf_topics.iter().map(String::as_str).collect();
        let Some((consumer, producer)) = self.join("aggregate", &topics, &mut stop).await else {
            return;
        };
        let producer = match producer {
            Some(p) => p,
            None => return,
        };
        while !*stop.borrow() {
            let b = match consumer.next_batch(batch, POLL).await {
                Ok(b) if b.is_empty() => continue,
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!(error = %e, "Kafka aggregation cannot read the NF topics");
                    if pause(&mut stop, Duration::from_secs(1)).await {
                        break;
                    }
                    continue;
                }
            };
            let keyed = b.records.iter().map(|r| {
                let key = match ordering {
                    Ordering::Key => encode::supi(&r.payload).filter(|k| !k.is_empty()),
                    Ordering::RoundRobin => None,
                };
                (key, r.payload.as_ref())
            });
            let keyed: Vec<_> = keyed.collect();
            loop {
                match producer.append_batch(&self.main, keyed.iter().copied()).await {
                    Ok(_) => break,
                    Err(e) => {
                        tracing::warn!(error = %e, "Kafka aggregation cannot append to MAIN; retrying");
                        if pause(&mut stop, Duration::from_secs(1)).await {
                            // Not marked done: another member (or the restart) takes it again.
                            let _ = consumer.close().await;
                            return;
                        }
                    }
                }
            }
            let mut counts = [0usize; NF_TOPICS.len()];
            for r in &b.records {
                let i = self
                    .nf_topics
                    .iter()
                    .position(|t| **t == *r.topic)
                    .unwrap_or(NF_TOPICS.len() - 1);
                counts[i] += 1;
            }
            for (i, n) in counts.into_iter().enumerate().filter(|(_, n)| *n > 0) {
                metrics.aggregated(i, n);
            }
            if let Err(e) = consumer.done(&b) {
                tracing::warn!(error = %e, "Kafka aggregation offsets not stored");
            }
        }
        if let Err(e) = consumer.close().await {
            tracing::warn!(error = %e, "Kafka aggregation consumer did not close cleanly");
        }
    }

    /// Starts this instance's member of feed `name`'s group over MAIN.
    pub fn spawn_feed(
        self: &Arc<Self>,
        name: &str,
        select: Option<Arc<dyn Select>>,
        sink: Arc<dyn Deliver>,
        batch: usize,
        stop: watch::Receiver<bool>,
    ) -> JoinHandle<()> {
        let me = self.clone();
        let role = format!("feed.{name}");
        tokio::spawn(async move { me.feed(role, select, sink, batch, stop).await })
    }

    async fn feed(
        &self,
        role: String,
        select: Option<Arc<dyn Select>>,
        sink: Arc<dyn Deliver>,
        batch: usize,
        mut stop: watch::Receiver<bool>,
    ) {
        let main = [self.main.as_str()];
        let Some((consumer, _)) = self.join(&role, &main, &mut stop).await else { return };
        'read: while !*stop.borrow() {
            let b = match consumer.next_batch(batch, POLL).await {
                Ok(b) if b.is_empty() => continue,
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!(feed = %role, error = %e, "Kafka feed cannot read MAIN");
                    if pause(&mut stop, Duration::from_secs(1)).await {
                        break;
                    }
                    continue;
                }
            };
            let records: Vec<Bytes> = match &select {
                None => b.records.iter().map(|r| r.payload.clone()).collect(),
                Some(s) => b
                    .records
                    .iter()
                    .filter(|r| Copy::decode(r.payload.clone()).is_ok_and(|c| s.select(&c)))
                    .map(|r| r.payload.clone())
                    .collect(),
            };
            if !deliver_until_done(&*sink, &records, &role, &mut stop).await {
                break 'read;
            }
            if let Err(e) = consumer.done(&b) {
                tracing::warn!(feed = %role, error = %e, "Kafka feed offsets not stored");
            }
        }
        if let Err(e) = consumer.close().await {
            tracing::warn!(feed = %role, error = %e, "Kafka feed consumer did not close cleanly");
        }
    }

    /// Joins `<group_id>.<role>` over `topics` (and, for aggregation, connects a producer),
    /// retrying while the cluster is away; None when stopped first.
    async fn join(
        &self,
        role: &str,
        topics: &[&str],
        stop: &mut watch::Receiver<bool>,
    ) -> Option<(Consumer, Option<Producer>)> {
        let group = self.cfg.group(role);
        loop {
            let joined = async {
                let c = Consumer::join(&self.cfg, &group, topics).await?;
                let p = if role == "aggregate" {
                    Some(Producer::connect(&self.cfg, role).await?)
                } else {
                    None
                };
                Ok::<_, KafkaError>((c, p))
            }
            .await;
            match joined {
                Ok(x) => return Some(x),
                Err(e) => {
                    tracing::error!(group = %group, error = %e, "cannot join the Kafka consumer group; retrying");
                    if pause(stop, Duration::from_secs(2)).await {
                        return None;
                    }
                }
            }
        }
    }
}
