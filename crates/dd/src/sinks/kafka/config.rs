//! A Kafka feed's configuration (`"type": "kafka"` in the admin API's feed, or a `[[dd.feeds]]`
//! entry): the topic its consumers read, how records are keyed, and the cluster (the Data
//! Director's own `[dd.kafka]` unless the feed names another).
//!
//! ```json
//! {"topic": "analytics.copies", "key": "supi", "partitions": 12, "retention_secs": 86400}
//! ```

use serde::{Deserialize, Serialize};

use crate::kafka::config::{check_topic_name, cluster_of, cluster_problems, SecurityConfig};
use crate::kafka::{KafkaConfig, TopicSpec};
use sbi::InvalidParam;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaSinkConfig {
    /// The topic the feed's consumers read. Created when missing. Required.
    pub topic: String,
    /// `supi` (default: one subscriber's copies go to one partition, in order) or `none` (the
    /// copies spread over every partition).
    #[serde(default)]
    pub key: SinkKey,
    /// Partitions of the topic: as many consumers of one group can share it. Default 6.
    #[serde(default = "default_partitions")]
    pub partitions: u32,
    /// How long the topic keeps a copy, seconds: how long a consumer may be away and lose
    /// nothing. Default 21600 (6 hours, as MAIN).
    #[serde(default = "default_retention_secs")]
    pub retention_secs: u64,
    /// Another cluster's brokers, `host:port,...`. Absent: the Data Director's `[dd.kafka]`.
    #[serde(default)]
    pub bootstrap_servers: Option<String>,
    /// How to authenticate to that other cluster. Absent: `[dd.kafka.security]` when the feed
    /// is on the Data Director's cluster, plaintext on another.
    #[serde(default)]
    pub security: Option<SecurityConfig>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SinkKey {
    #[default]
    Supi,
    None,
}

fn default_partitions() -> u32 {
    6
}
fn default_retention_secs() -> u64 {
    6 * 3600
}

impl KafkaSinkConfig {
    pub fn new(topic: impl Into<String>) -> Self {
        KafkaSinkConfig {
            topic: topic.into(),
            key: SinkKey::Supi,
            partitions: default_partitions(),
            retention_secs: default_retention_secs(),
            bootstrap_servers: None,
            security: None,
        }
    }

    /// What is wrong, each named under `at` (the feed's pointer in the admin API); `dd` is the
    /// Data Director's `[dd.kafka]`, if it has one.
    pub fn validate(&self, at: &str, dd: Option<&KafkaConfig>) -> Vec<InvalidParam> {
        let mut bad = Vec::new();
        let mut push = |f: &str, r: String| bad.push(InvalidParam::new(format!("{at}/{f}"), r));
        if let Err(e) = check_topic_name(&self.topic) {
            push("topic", e);
        }
        if self.partitions == 0 {
            push("partitions", "must be at least 1".into());
        }
        if self.retention_secs == 0 {
            push("retention_secs", "must be at least 1 second".into());
        }
        for (field, reason) in cluster_problems(&self.bootstrap_servers, &self.security, dd) {
            push(&field, reason);
        }
        bad
    }

    /// The cluster the feed writes to: `[dd.kafka]`'s, or the one the feed names.
    pub fn cluster(&self, dd: Option<&KafkaConfig>) -> KafkaConfig {
        cluster_of(&self.bootstrap_servers, &self.security, dd)
    }

    /// The topic as the feed wants it on the cluster.
    pub fn topic_spec(&self, cluster: &KafkaConfig) -> TopicSpec {
        TopicSpec {
            key: self.topic.clone(),
            name: self.topic.clone(),
            partitions: self.partitions,
            retention_ms: self.retention_secs.saturating_mul(1000),
            replication_factor: cluster.replication_factor,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::config::SecurityProtocol;

    fn params(c: &KafkaSinkConfig, dd: Option<&KafkaConfig>) -> Vec<String> {
        c.validate("/feeds/0/kafka", dd).into_iter().map(|p| p.param).collect()
    }

    #[test]
    fn the_example_of_the_module_doc_parses_with_its_defaults() {
        let doc = include_str!("config.rs");
        let json = doc.lines().find(|l| l.starts_with("//! {")).unwrap().trim_start_matches("//! ");
        let c: KafkaSinkConfig = serde_json::from_str(json).unwrap();
        assert_eq!(
            (c.topic.as_str(), c.key, c.partitions),
            ("analytics.copies", SinkKey::Supi, 12)
        );
        let dd = KafkaConfig::new("k:9092");
        assert!(params(&c, Some(&dd)).is_empty());
        let minimal: KafkaSinkConfig = serde_json::from_str(r#"{"topic":"t"}"#).unwrap();
        assert_eq!(minimal, KafkaSinkConfig::new("t"));
        let spec = minimal.topic_spec(&dd);
        assert_eq!((spec.partitions, spec.retention_ms), (6, 21_600_000));
    }

    #[test]
    fn bad_values_and_unknown_fields_are_named() {
        assert!(serde_json::from_str::<KafkaSinkConfig>(r#"{"topic":"t","keys":"supi"}"#).is_err());
        assert!(serde_json::from_str::<KafkaSinkConfig>(r#"{"topic":"t","key":"imsi"}"#).is_err());
        let mut c = KafkaSinkConfig::new("a b");
        c.partitions = 0;
        c.retention_secs = 0;
        assert_eq!(
            params(&c, None),
            [
                "/feeds/0/kafka/topic",
                "/feeds/0/kafka/partitions",
                "/feeds/0/kafka/retention_secs",
                "/feeds/0/kafka/bootstrap_servers"
            ]
        );
        let mut c = KafkaSinkConfig::new("t");
        c.security =
            Some(SecurityConfig { protocol: SecurityProtocol::SaslSsl, ..Default::default() });
        let dd = KafkaConfig::new("k:9092");
        assert_eq!(
            params(&c, Some(&dd)),
            ["/feeds/0/kafka/security", "/feeds/0/kafka/security/sasl_mechanism"]
        );
        c.bootstrap_servers = Some("other".into());
        assert_eq!(
            params(&c, Some(&dd)),
            ["/feeds/0/kafka/bootstrap_servers", "/feeds/0/kafka/security/sasl_mechanism"]
        );
    }

    #[test]
    fn the_cluster_is_the_data_directors_unless_the_feed_names_one() {
        let mut dd = KafkaConfig::new("dd:9092");
        dd.security.protocol = SecurityProtocol::Ssl;
        dd.producer.linger_ms = 20;
        let c = KafkaSinkConfig::new("t");
        assert_eq!(c.cluster(Some(&dd)), dd);
        let mut other = KafkaSinkConfig::new("t");
        other.bootstrap_servers = Some("consumer:9092".into());
        let cluster = other.cluster(Some(&dd));
        assert_eq!(cluster.bootstrap_servers, "consumer:9092");
        assert_eq!(cluster.security.protocol, SecurityProtocol::Plaintext);
        assert_eq!(cluster.producer.linger_ms, 20);
        assert_eq!(other.cluster(None).bootstrap_servers, "consumer:9092");
    }
}
