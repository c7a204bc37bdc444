//! Appending batches of records to a topic, resolved when the brokers have acknowledged all.
//!
//! librdkafka's producer queues each record and reports its fate once (the delivery report,
//! on the producer's polling thread). A batch shares one [`BatchAck`]: each report fills in its
//! record's partition and offset, or the batch's first error, and the last one wakes the
//! caller. One small allocation per record (its place in the batch), no channel per record.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::{KafkaError as RdError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{
    BaseRecord, DeliveryResult, Producer as _, ProducerContext, ThreadedProducer,
};
use tokio::sync::oneshot;

use super::{ask_cluster, validated, KafkaConfig, KafkaError};

/// Where one record went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivered {
    pub partition: i32,
    pub offset: i64,
}

/// A producer for any topic of the cluster, to share (in an `Arc`) between the callers writing to
/// that cluster: librdkafka batches the records of every caller per partition.
pub struct Producer {
    inner: Arc<ThreadedProducer<AckContext>>,
    delivery_timeout: Duration,
    cfg: KafkaConfig,
}

type Outcome = Result<Vec<Delivered>, (usize, RdError)>;

pub(super) struct AckState {
    remaining: usize,
    delivered: Vec<Delivered>,
    error: Option<(usize, RdError)>,
    done: Option<oneshot::Sender<Outcome>>,
}

/// The batch's state, shared by its records' slots only: when librdkafka drops slots without a
/// report (the producer destroyed), the last drop drops the sender and the caller wakes.
pub(super) struct BatchAck(Mutex<AckState>);

impl BatchAck {
    /// `n` records fewer to wait for; at zero, hands the outcome to the caller.
    fn settle(&self, n: usize, outcome: Option<(usize, Result<Delivered, RdError>)>) {
        let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match outcome {
            Some((i, Ok(d))) => s.delivered[i] = d,
            Some((i, Err(e))) => {
                s.error.get_or_insert((i, e));
            }
            None => {}
        }
        s.remaining -= n;
        if s.remaining == 0 {
            if let Some(done) = s.done.take() {
                let outcome = match s.error.take() {
                    Some(e) => Err(e),
                    None => Ok(std::mem::take(&mut s.delivered)),
                };
                let _ = done.send(outcome);
            }
        }
    }

    fn failed(&self) -> bool {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).error.is_some()
    }
}

/// One record's place: its batch and index.
type Slot = Box<(Arc<BatchAck>, usize)>;

struct AckContext {
    role: String,
}

impl ClientContext for AckContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        super::log(&self.role, level, fac, message);
    }
    fn error(&self, error: RdError, reason: &str) {
        tracing::warn!(target: "librdkafka", client = %self.role, "{error}: {reason}");
    }
}

impl ProducerContext for AckContext {
    type DeliveryOpaque = Slot;

    fn delivery(&self, result: &DeliveryResult<'_>, slot: Slot) {
        let (ack, i) = *slot;
        let outcome = match result {
            Ok(m) => Ok(Delivered { partition: m.partition(), offset: m.offset() }),
            Err((e, _)) => Err(e.clone()),
        };
        ack.settle(1, Some((i, outcome)));
    }
}

impl Producer {
    /// A producer for the cluster of `cfg`, once the cluster has answered. `role` names it in
    /// the logs (`ingest`, `aggregate.pcf`, `feed.audit`).
    pub async fn connect(cfg: &KafkaConfig, role: &str) -> Result<Producer, KafkaError> {
        validated(cfg)?;
        let inner: ThreadedProducer<AckContext> = cfg
            .producer_config()
            .create_with_context(AckContext { role: role.to_string() })
            .map_err(KafkaError::client("creating the Kafka producer"))?;
        let producer = Producer {
            inner: Arc::new(inner),
            delivery_timeout: Duration::from_millis(cfg.producer.delivery_timeout_ms),
            cfg: cfg.clone(),
        };
        producer.check().await?;
        Ok(producer)
    }

    /// Whether the cluster answers a metadata request within `request_timeout_ms` now.
    pub async fn check(&self) -> Result<(), KafkaError> {
        let p = self.inner.clone();
        ask_cluster(&self.cfg, move |t| p.client().fetch_metadata(None, t).map(drop)).await
    }

    /// Appends `records` (an optional key, the payload) to `topic`, each to the partition its key
    /// hashes to (librdkafka's default partitioner: one key's records stay in one partition, in
    /// order) or, without a key, to the partition librdkafka's sticky partitioner picks for the
    /// moment, which spreads the records over every partition in turn.
    ///
    /// Resolves once every record is acknowledged, with where each went, in order; fails when
    /// any record could not be delivered within `delivery_timeout_ms`. Records of a failed batch
    /// may have been written all the same: a retry of the batch can write them twice, which
    /// at-least-once allows.
    pub async fn append_batch<'a, I>(
        &self,
        topic: &str,
        records: I,
    ) -> Result<Vec<Delivered>, KafkaError>
    where
        I: IntoIterator<Item = (Option<&'a [u8]>, &'a [u8])>,
    {
        let records: Vec<(Option<&[u8]>, &[u8])> = records.into_iter().collect();
        let n = records.len();
        if n == 0 {
            return Ok(Vec::new());
        }
        let (tx, rx) = oneshot::channel();
        let ack = Arc::new(BatchAck(Mutex::new(AckState {
            remaining: n,
            delivered: vec![Delivered { partition: -1, offset: -1 }; n],
            error: None,
            done: Some(tx),
        })));
        let deadline = Instant::now() + self.delivery_timeout;
        'records: for (i, (key, payload)) in records.into_iter().enumerate() {
            let mut slot: Slot = Box::new((ack.clone(), i));
            loop {
                let mut record = BaseRecord::with_opaque_to(topic, slot).payload(payload);
                if let Some(k) = key {
                    record = record.key(k);
                }
                match self.inner.send(record) {
                    Ok(()) => break,
                    // The producer holds queue_max_messages unacknowledged records: wait for
                    // the brokers to take some, within the delivery timeout.
                    Err((RdError::MessageProduction(RDKafkaErrorCode::QueueFull), r))
                        if Instant::now() < deadline =>
                    {
                        slot = r.delivery_opaque;
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                    Err((e, r)) => {
                        drop(r);
                        // Records i.. get no report: settle them now; the ones queued before
                        // still report.
                        ack.settle(n - i, Some((i, Err(e))));
                        break 'records;
                    }
                }
            }
            // A record already failed: the batch fails, the rest need not be sent.
            if ack.failed() {
                ack.settle(n - i - 1, None);
                break;
            }
        }
        drop(ack);
        match rx.await {
            Ok(Ok(delivered)) => Ok(delivered),
            Ok(Err((index, source))) => {
                Err(KafkaError::Delivery { topic: topic.to_string(), index, source })
            }
            Err(_) => Err(KafkaError::Delivery {
                topic: topic.to_string(),
                index: 0,
                source: RdError::Canceled,
            }),
        }
    }
}
