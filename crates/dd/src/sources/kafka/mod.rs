//! The Kafka source: copies that NFs (ours or a third party's) write to Kafka topics, one
//! envelope per record, taken into the pipeline.
//!
//! One envelope per record rather than framed batches: Kafka batches records itself, a record's
//! key and partition can follow the copy's subscriber, a consumer in any language reads it with
//! no framing of ours, and it is what the Kafka feed writes, so one Data Director's feed is
//! another's source.
//!
//! A batch goes to the pipeline ([`Downstream::accept`]) as decoded copies; the source marks its
//! records done only once the pipeline has taken them (appended them to their NF topic). Until
//! then it offers the same copies again, waiting longer each time: at-least-once, and the
//! pipeline's back-pressure reaches the topic (records wait in Kafka, within its retention). A
//! record that is not an envelope can never become one: it is counted, logged, and passed over.

pub mod config;

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use dd_client::Copy;

use crate::kafka::{Consumer, KafkaConfig, KafkaError};
pub use config::KafkaSourceConfig;

/// Where the source's copies go: the pipeline's ingest side.
pub trait Downstream: Send + Sync {
    type Error: std::fmt::Display + Send;
    /// Takes `copies`; Ok once they are durably in the pipeline.
    fn accept(&self, copies: &[Copy]) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

/// What the source has done since it started.
#[derive(Debug, Default)]
pub struct SourceCounters {
    /// Records read from Kafka (envelopes or not).
    pub received: AtomicU64,
    /// Records that were not an envelope, passed over.
    pub invalid: AtomicU64,
    /// Copies the pipeline took.
    pub accepted: AtomicU64,
    /// Batches the pipeline refused (and that were offered again).
    pub refused: AtomicU64,
}

pub struct KafkaSource {
    consumer: Consumer,
    max_batch: usize,
    counters: Arc<SourceCounters>,
}

const FIRST_RETRY: Duration = Duration::from_millis(50);
const LAST_RETRY: Duration = Duration::from_secs(5);

impl KafkaSource {
    /// Checks `cfg` and joins its consumer group; `dd` is the Data Director's `[dd.kafka]`.
    pub async fn build(
        cfg: &KafkaSourceConfig,
        dd: Option<&KafkaConfig>,
    ) -> Result<KafkaSource, KafkaError> {
        let bad = cfg.validate("", dd);
        if !bad.is_empty() {
            let list: Vec<String> = bad
                .into_iter()
                .map(|p| format!("{}: {}", p.param, p.reason.unwrap_or_default()))
                .collect();
            return Err(KafkaError::Config(list.join("; ")));
        }
        let cluster = cfg.cluster(dd);
        let topics: Vec<&str> = cfg.topics.iter().map(String::as_str).collect();
        let consumer = Consumer::join(&cluster, &cfg.group(&cluster), &topics).await?;
        Ok(KafkaSource { consumer, max_batch: cfg.max_batch, counters: Arc::default() })
    }

    pub fn counters(&self) -> Arc<SourceCounters> {
        self.counters.clone()
    }

    /// Reads and hands over copies until `shutdown` resolves, then commits what the pipeline
    /// took and leaves the group. A batch being offered when `shutdown` comes is not marked
    /// done: the next start reads it again.
    pub async fn run<D: Downstream>(
        self,
        downstream: &D,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), KafkaError> {
        tokio::pin!(shutdown);
        let mut backoff = FIRST_RETRY;
        'read: loop {
            let batch = tokio::select! {
                _ = &mut shutdown => break,
                b = self.consumer.next_batch(self.max_batch, Duration::from_millis(200)) => b,
            };
            let batch = match batch {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!(group = %self.consumer.group(), "Kafka source: {e}");
                    tokio::select! {
                        _ = &mut shutdown => break,
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(LAST_RETRY);
                    continue;
                }
            };
            if batch.is_empty() {
                continue;
            }
            backoff = FIRST_RETRY;
            self.counters.received.fetch_add(batch.len() as u64, Ordering::Relaxed);
            let mut copies = Vec::with_capacity(batch.len());
            let mut invalid = 0u64;
            for r in &batch.records {
                match Copy::decode(r.payload.clone()) {
                    Ok(c) => copies.push(c),
                    Err(e) => {
                        if invalid == 0 {
                            tracing::warn!(
                                topic = %r.topic,
                                partition = r.partition,
                                offset = r.offset,
                                "Kafka source: a record is not a copy envelope ({e}); passed over"
                            );
                        }
                        invalid += 1;
                    }
                }
            }
            self.counters.invalid.fetch_add(invalid, Ordering::Relaxed);
            let mut retry = FIRST_RETRY;
            while !copies.is_empty() {
                match downstream.accept(&copies).await {
                    Ok(()) => {
                        self.counters.accepted.fetch_add(copies.len() as u64, Ordering::Relaxed);
                        break;
                    }
                    Err(e) => {
                        self.counters.refused.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(
                            group = %self.consumer.group(),
                            "Kafka source: the pipeline refused {} copies ({e}); offered again in {retry:?}",
                            copies.len()
                        );
                        tokio::select! {
                            _ = &mut shutdown => break 'read,
                            _ = tokio::time::sleep(retry) => {}
                        }
                        retry = (retry * 2).min(LAST_RETRY);
                    }
                }
            }
            self.consumer.done(&batch)?;
        }
        self.consumer.close().await
    }
}
