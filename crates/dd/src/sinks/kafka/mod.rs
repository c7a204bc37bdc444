//! The Kafka feed: the feed's envelopes written to a topic its consumers read (the guide's
//! "Kafka feed: the consumer reads from Kafka", D6), one envelope per record, keyed by SUPI
//! ([`encode`]). [`KafkaSink::deliver`] is the feeds' sink contract: it resolves once the brokers
//! have acknowledged every record of the batch (acks from every in-sync replica), and the feed
//! commits its offset on MAIN only then; an error means the batch is to be delivered again.
//!
//! Each Kafka feed has its own producer, so a feed whose cluster is slow or away holds up only
//! itself.

pub mod config;
pub mod encode;

use bytes::Bytes;

use crate::kafka::{ensure_topics, KafkaConfig, KafkaError, Producer};
pub use config::{KafkaSinkConfig, SinkKey};

pub struct KafkaSink {
    producer: Producer,
    topic: String,
    key: SinkKey,
}

impl KafkaSink {
    /// Checks `cfg`, makes sure its topic exists (created with its partitions and retention) and
    /// connects. `dd` is the Data Director's `[dd.kafka]`, if any; `name` is the feed's.
    pub async fn build(
        cfg: &KafkaSinkConfig,
        dd: Option<&KafkaConfig>,
        name: &str,
    ) -> Result<KafkaSink, KafkaError> {
        let bad = cfg.validate("", dd);
        if !bad.is_empty() {
            let list: Vec<String> = bad
                .into_iter()
                .map(|p| format!("{}: {}", p.param, p.reason.unwrap_or_default()))
                .collect();
            return Err(KafkaError::Config(list.join("; ")));
        }
        let cluster = cfg.cluster(dd);
        ensure_topics(&cluster, &[cfg.topic_spec(&cluster)]).await?;
        let producer = Producer::connect(&cluster, &format!("feed.{name}")).await?;
        Ok(KafkaSink { producer, topic: cfg.topic.clone(), key: cfg.key })
    }

    /// Writes `envelopes` (each one unframed envelope), one record each; Ok once the brokers
    /// have acknowledged all of them.
    pub async fn deliver(&self, envelopes: &[Bytes]) -> Result<(), KafkaError> {
        let records = envelopes.iter().map(|e| (encode::key(e, self.key), e.as_ref()));
        self.producer.append_batch(&self.topic, records).await.map(drop)
    }

    /// Whether the cluster answers now (the feed's health).
    pub async fn healthcheck(&self) -> Result<(), KafkaError> {
        self.producer.check().await
    }

    pub fn topic(&self) -> &str {
        &self.topic
    }
}
