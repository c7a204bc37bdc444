//! The Kafka tests' and benchmark's cluster settings: short timeouts and commit intervals, one
//! prefix per test so tests share the broker without sharing topics or groups.

use dd::kafka::{KafkaConfig, TopicSpec};
use testkit::kafka::Broker;

pub fn config(broker: &Broker, prefix: &str) -> KafkaConfig {
    let mut c = KafkaConfig::new(broker.bootstrap.clone());
    c.topic_prefix = prefix.to_string();
    c.consumer.group_id = prefix.trim_end_matches('.').to_string();
    c.consumer.commit_interval_ms = 200;
    c.consumer.session_timeout_ms = 6000;
    c.request_timeout_ms = 10_000;
    c.producer.delivery_timeout_ms = 15_000;
    c
}

pub fn spec(c: &KafkaConfig, name: &str, partitions: u32) -> TopicSpec {
    TopicSpec {
        key: name.to_string(),
        name: format!("{}{name}", c.topic_prefix),
        partitions,
        retention_ms: 3_600_000,
        replication_factor: 1,
    }
}
