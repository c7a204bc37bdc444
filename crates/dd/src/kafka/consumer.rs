//! One member of a consumer group: batches in, offsets stored when the caller is done with a
//! batch, stored offsets committed every `commit_interval_ms` and at close (at-least-once: a
//! consumer that dies re-reads what it had not finished, and at most one commit interval of
//! what it had; nothing is skipped).
//!
//! When the group rebalances, librdkafka commits the stored offsets of the partitions it takes
//! away first; a batch from a partition already taken cannot store its offsets any more
//! ([`Consumer::done`] says so with a debug line) and the partition's new owner reads those
//! records again.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::FutureExt;
use rdkafka::consumer::{CommitMode, Consumer as _, StreamConsumer};
use rdkafka::error::{KafkaError as RdError, RDKafkaErrorCode};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::{Offset, TopicPartitionList};

use super::{
    config::check_topic_name, not_ready, readiness, validated, KafkaConfig, KafkaError, LogContext,
};

/// One record read: where it was and its payload (a slice of the batch's one buffer).
#[derive(Debug, Clone)]
pub struct Record {
    pub topic: Arc<str>,
    pub partition: i32,
    pub offset: i64,
    pub payload: Bytes,
}

/// Records read together, and per partition the offset to resume from once they are done.
#[derive(Debug, Default)]
pub struct Batch {
    pub records: Vec<Record>,
    next: Vec<(Arc<str>, i32, i64)>,
}

impl Batch {
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
    pub fn len(&self) -> usize {
        self.records.len()
    }
}

pub struct Consumer {
    inner: Arc<StreamConsumer<LogContext>>,
    topics: Vec<Arc<str>>,
    group: String,
}

impl Consumer {
    /// Joins `group_id` for `topics`, once the cluster has answered and every topic exists
    /// (the Data Director creates its topics with [`super::ensure_topics`]; it never relies on
    /// a cluster creating topics on first use). The partitions come with the group's first
    /// rebalance, during the first calls of [`Consumer::next_batch`].
    pub async fn join(
        cfg: &KafkaConfig,
        group_id: &str,
        topics: &[&str],
    ) -> Result<Consumer, KafkaError> {
        validated(cfg)?;
        if group_id.is_empty() {
            return Err(KafkaError::Config("a consumer group id must not be empty".into()));
        }
        for t in topics {
            check_topic_name(t).map_err(KafkaError::Config)?;
        }
        let inner: StreamConsumer<LogContext> = cfg
            .consumer_config(group_id)
            .create_with_context(LogContext::new(format!("consumer {group_id}")))
            .map_err(KafkaError::client(format!(
                "creating the Kafka consumer of group {group_id}"
            )))?;
        let inner = Arc::new(inner);
        let c = inner.clone();
        let wanted: Vec<String> = topics.iter().map(|t| t.to_string()).collect();
        let missing = not_ready(cfg, &wanted, move |t| {
            c.client().fetch_metadata(None, t).map(|md| readiness(&md))
        })
        .await?;
        if let Some(t) = missing.first() {
            return Err(KafkaError::Topic {
                topic: t.clone(),
                reason: format!("does not exist on the cluster at {}", cfg.bootstrap_servers),
            });
        }
        inner
            .subscribe(topics)
            .map_err(KafkaError::client(format!("subscribing group {group_id} to {topics:?}")))?;
        Ok(Consumer {
            inner,
            topics: topics.iter().map(|t| Arc::from(*t)).collect(),
            group: group_id.to_string(),
        })
    }

    /// Up to `max_records` records: waits up to `max_wait` for the first, then takes what is
    /// already fetched. Empty when nothing came. A consumer error (a partition or topic gone, a
    /// fatal client error) with no record read yet is returned; after some, it is logged and the
    /// records are returned (the error comes again if it lasts).
    pub async fn next_batch(
        &self,
        max_records: usize,
        max_wait: Duration,
    ) -> Result<Batch, KafkaError> {
        let mut read = Reading::default();
        match tokio::time::timeout(max_wait, self.inner.recv()).await {
            Err(_) => return Ok(Batch::default()),
            Ok(Err(e)) => {
                return Err(KafkaError::Client {
                    what: format!("consumer of group {}", self.group),
                    source: e,
                })
            }
            Ok(Ok(m)) => read.push(&self.topics, &m),
        }
        while read.count() < max_records.max(1) {
            match self.inner.recv().now_or_never() {
                Some(Ok(m)) => read.push(&self.topics, &m),
                Some(Err(e)) => {
                    tracing::warn!(group = %self.group, "Kafka consumer: {e}");
                    break;
                }
                None => break,
            }
        }
        Ok(read.finish())
    }

    /// The caller is done with `batch` (its records are delivered, appended, acknowledged):
    /// its offsets are stored, and committed with the next commit.
    pub fn done(&self, batch: &Batch) -> Result<(), KafkaError> {
        if batch.next.is_empty() {
            return Ok(());
        }
        let mut tpl = TopicPartitionList::new();
        for (topic, partition, next) in &batch.next {
            tpl.add_partition_offset(topic, *partition, Offset::Offset(*next))
                .map_err(KafkaError::client("building the offsets to store"))?;
        }
        match self.inner.store_offsets(&tpl) {
            Ok(()) => Ok(()),
            Err(RdError::StoreOffset(
                RDKafkaErrorCode::State | RDKafkaErrorCode::UnknownPartition,
            )) => {
                tracing::debug!(
                    group = %self.group,
                    "offsets of a batch not stored: its partitions went to another consumer, which reads them again"
                );
                Ok(())
            }
            Err(e) => Err(KafkaError::Client {
                what: format!("storing the offsets of group {}", self.group),
                source: e,
            }),
        }
    }

    /// Commits the stored offsets now, waiting for the group coordinator's answer.
    pub async fn commit(&self) -> Result<(), KafkaError> {
        let c = self.inner.clone();
        let r = tokio::task::spawn_blocking(move || c.commit_consumer_state(CommitMode::Sync))
            .await
            .expect("commit panicked");
        match r {
            Ok(()) | Err(RdError::ConsumerCommit(RDKafkaErrorCode::NoOffset)) => Ok(()),
            Err(e) => Err(KafkaError::Client {
                what: format!("committing the offsets of group {}", self.group),
                source: e,
            }),
        }
    }

    /// The partitions this member holds now, as `(topic, partition)`.
    pub fn assignment(&self) -> Vec<(String, i32)> {
        self.inner
            .assignment()
            .map(|tpl| {
                tpl.elements().iter().map(|e| (e.topic().to_string(), e.partition())).collect()
            })
            .unwrap_or_default()
    }

    pub fn group(&self) -> &str {
        &self.group
    }

    /// Commits what is done and leaves the group, so its partitions go to the other members at
    /// once (dropping the consumer does the same, blocking the thread it is dropped on).
    pub async fn close(self) -> Result<(), KafkaError> {
        let committed = self.commit().await;
        let inner = self.inner;
        tokio::task::spawn_blocking(move || drop(inner)).await.expect("consumer close panicked");
        committed
    }
}

/// The payloads of a batch go into one buffer, so a batch is one allocation, not one per record.
#[derive(Default)]
struct Reading {
    buf: Vec<u8>,
    at: Vec<(Arc<str>, i32, i64, usize, usize)>,
}

impl Reading {
    fn count(&self) -> usize {
        self.at.len()
    }

    fn push(&mut self, topics: &[Arc<str>], m: &BorrowedMessage<'_>) {
        let topic = topics
            .iter()
            .find(|t| ***t == *m.topic())
            .cloned()
            .unwrap_or_else(|| Arc::from(m.topic()));
        let payload = m.payload().unwrap_or_default();
        let start = self.buf.len();
        self.buf.extend_from_slice(payload);
        self.at.push((topic, m.partition(), m.offset(), start, self.buf.len()));
    }

    fn finish(self) -> Batch {
        let buf = Bytes::from(self.buf);
        let mut next: Vec<(Arc<str>, i32, i64)> = Vec::new();
        let records = self
            .at
            .into_iter()
            .map(|(topic, partition, offset, s, e)| {
                match next.iter_mut().find(|(t, p, _)| *p == partition && *t == topic) {
                    Some(n) => n.2 = n.2.max(offset + 1),
                    None => next.push((topic.clone(), partition, offset + 1)),
                }
                Record { topic, partition, offset, payload: buf.slice(s..e) }
            })
            .collect();
        Batch { records, next }
    }
}
