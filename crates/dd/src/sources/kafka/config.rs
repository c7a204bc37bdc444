//! The Kafka source's configuration (`[[dd.sources]] type = "kafka"`): the topics NFs write
//! their copies to, and the cluster (the Data Director's own `[dd.kafka]` unless it names
//! another).
//!
//! ```toml
//! topics = ["nf-copies.smf", "nf-copies.amf"]
//! group_id = "fivecore-dd.source.core1"
//! ```

use serde::{Deserialize, Serialize};

use crate::kafka::config::{check_topic_name, cluster_of, cluster_problems, SecurityConfig};
use crate::kafka::KafkaConfig;
use sbi::InvalidParam;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaSourceConfig {
    /// The topics to read copies from: one envelope (dd_client::envelope, unframed) per record.
    /// Required, at least one.
    pub topics: Vec<String>,
    /// The consumer group: instances with the same one share the topics' partitions. Default
    /// `<[dd.kafka.consumer] group_id>.source`.
    #[serde(default)]
    pub group_id: Option<String>,
    /// Copies handed to the pipeline at once, at most. Default 2000.
    #[serde(default = "default_max_batch")]
    pub max_batch: usize,
    /// Another cluster's brokers, `host:port,...`. Absent: the Data Director's `[dd.kafka]`.
    #[serde(default)]
    pub bootstrap_servers: Option<String>,
    /// How to authenticate to that other cluster; plaintext when absent.
    #[serde(default)]
    pub security: Option<SecurityConfig>,
}

fn default_max_batch() -> usize {
    2000
}

impl KafkaSourceConfig {
    pub fn new(topics: &[&str]) -> Self {
        KafkaSourceConfig {
            topics: topics.iter().map(|t| t.to_string()).collect(),
            group_id: None,
            max_batch: default_max_batch(),
            bootstrap_servers: None,
            security: None,
        }
    }

    /// What is wrong, each named under `at`; `dd` is the Data Director's `[dd.kafka]`, if any.
    pub fn validate(&self, at: &str, dd: Option<&KafkaConfig>) -> Vec<InvalidParam> {
        let mut bad = Vec::new();
        let mut push = |f: &str, r: String| bad.push(InvalidParam::new(format!("{at}/{f}"), r));
        if self.topics.is_empty() {
            push("topics", "at least one topic".into());
        }
        for (i, t) in self.topics.iter().enumerate() {
            if let Err(e) = check_topic_name(t) {
                push(&format!("topics/{i}"), e);
            }
        }
        if self.group_id.as_deref() == Some("") {
            push("group_id", "must not be empty".into());
        }
        if self.max_batch == 0 {
            push("max_batch", "must be at least 1".into());
        }
        for (field, reason) in cluster_problems(&self.bootstrap_servers, &self.security, dd) {
            push(&field, reason);
        }
        bad
    }

    /// The cluster to read from.
    pub fn cluster(&self, dd: Option<&KafkaConfig>) -> KafkaConfig {
        cluster_of(&self.bootstrap_servers, &self.security, dd)
    }

    /// The consumer group of the source on `cluster`.
    pub fn group(&self, cluster: &KafkaConfig) -> String {
        self.group_id.clone().unwrap_or_else(|| cluster.group("source"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_of_the_module_doc_parses_with_its_defaults() {
        let doc = include_str!("config.rs");
        let example: String = doc
            .lines()
            .skip_while(|l| !l.starts_with("//! ```toml"))
            .skip(1)
            .take_while(|l| !l.starts_with("//! ```"))
            .map(|l| l.trim_start_matches("//! ").to_string() + "\n")
            .collect();
        let c: KafkaSourceConfig = toml::from_str(&example).unwrap();
        assert_eq!(c.topics, ["nf-copies.smf", "nf-copies.amf"]);
        assert_eq!(c.max_batch, 2000);
        let dd = KafkaConfig::new("k:9092");
        assert!(c.validate("/dd/sources/0", Some(&dd)).is_empty());
        assert_eq!(c.group(&dd), "fivecore-dd.source.core1");
        assert_eq!(KafkaSourceConfig::new(&["t"]).group(&dd), "fivecore-dd.source");
    }

    #[test]
    fn bad_values_are_named() {
        let mut c = KafkaSourceConfig::new(&["ok", "not ok"]);
        c.max_batch = 0;
        c.group_id = Some(String::new());
        let p: Vec<String> = c.validate("/s", None).into_iter().map(|p| p.param).collect();
        assert_eq!(p, ["/s/topics/1", "/s/group_id", "/s/max_batch", "/s/bootstrap_servers"]);
        let p: Vec<String> = KafkaSourceConfig::new(&[])
            .validate("/s", Some(&KafkaConfig::new("k:1")))
            .into_iter()
            .map(|p| p.param)
            .collect();
        assert_eq!(p, ["/s/topics"]);
        assert!(
            toml::from_str::<KafkaSourceConfig>("topics = [\"t\"]\nformat = \"framed\"").is_err()
        );
    }
}
