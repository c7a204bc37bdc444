//! `[dd]` in the configuration file. Every field has a default, so an empty (or absent) section is
//! a working Data Director in its embedded mode; unknown keys are errors so a typo never falls
//! back to a default silently. docs/dd.md explains each setting.

use std::path::PathBuf;

use serde::Deserialize;

use crate::kafka::KafkaConfig;
use crate::log::LogConfig;
use crate::main_index::{check_retention, MainConfig, MainStore};
use crate::sinks::xdr_store::config::XdrStoreConfig;
use crate::sources::ingest::IngestConfig;
use crate::sources::kafka::KafkaSourceConfig;
use crate::transforms::aggregate::AggregateConfig;

/// The Data Director's own settings.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DdConfig {
    /// Directory of the embedded logs (NF topics and MAIN) and their consumer offsets. Unset:
    /// `dd-log` beside the store's database.
    #[serde(default)]
    pub log_dir: Option<PathBuf>,

    /// The ingest API (`POST /dd-ingest/v1/copies`).
    #[serde(default)]
    pub ingest: IngestConfig,

    /// Per-NF aggregation into MAIN.
    #[serde(default)]
    pub aggregate: AggregateConfig,

    /// What MAIN's partitions hold in the embedded mode (`[dd.main] store`: `index`, the
    /// default, or `copy`).
    #[serde(default)]
    pub main: MainConfig,

    /// The embedded log of the NF topics and MAIN (`[dd.log]`: fsync, segments, retention
    /// per topic; `[dd.log.topics.MAIN]` applies to every MAIN partition).
    #[serde(default)]
    pub log: LogConfig,

    /// The scale-out mode (`[dd.kafka]`): the NF topics and MAIN on a Kafka cluster, shared by
    /// every Data Director instance through consumer groups. Absent: the embedded log.
    #[serde(default)]
    pub kafka: Option<KafkaConfig>,

    /// A Kafka source (`[dd.kafka_source]`): copies NFs write to Kafka topics (one envelope per
    /// record), taken into the NF topics as the ingest API takes its batches. Absent: none.
    #[serde(default)]
    pub kafka_source: Option<KafkaSourceConfig>,

    /// The xDR store (`[dd.xdr_store]`: retention).
    #[serde(default)]
    pub xdr_store: XdrStoreConfig,

    /// How a feed consumer reads MAIN: at most this many copies per delivery. Default 1024.
    #[serde(default = "default_feed_batch")]
    pub feed_batch: usize,
}

fn default_feed_batch() -> usize {
    1024
}

impl Default for DdConfig {
    fn default() -> Self {
        DdConfig {
            log_dir: None,
            ingest: IngestConfig::default(),
            aggregate: AggregateConfig::default(),
            main: MainConfig::default(),
            log: LogConfig::default(),
            kafka: None,
            kafka_source: None,
            xdr_store: XdrStoreConfig::default(),
            feed_batch: default_feed_batch(),
        }
    }
}

impl DdConfig {
    /// What is wrong with the section, naming the key.
    pub fn validate(&self) -> Result<(), String> {
        self.ingest.validate()?;
        self.aggregate.validate()?;
        if self.kafka.is_none() && self.main.store == MainStore::Index {
            check_retention(&self.log)?;
        }
        if let Err(p) = self.xdr_store.validate() {
            let what: Vec<String> = p
                .iter()
                .map(|p| {
                    format!(
                        "[dd.xdr_store] {}: {}",
                        p.param.trim_start_matches('/'),
                        p.reason.clone().unwrap_or_default()
                    )
                })
                .collect();
            return Err(what.join("; "));
        }
        if let Some(k) = &self.kafka {
            let bad = k.validate("[dd.kafka]");
            if let Some(p) = bad.first() {
                return Err(format!("{}: {}", p.param, p.reason.clone().unwrap_or_default()));
            }
        }
        if let Some(src) = &self.kafka_source {
            let bad = src.validate("[dd.kafka_source]", self.kafka.as_ref());
            if let Some(p) = bad.first() {
                return Err(format!("{}: {}", p.param, p.reason.clone().unwrap_or_default()));
            }
        }
        if self.feed_batch == 0 || self.feed_batch > 65_536 {
            return Err("[dd] feed_batch must be between 1 and 65536".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_section_is_the_default_and_typos_are_refused() {
        let c: DdConfig = toml::from_str("").unwrap();
        assert_eq!(c, DdConfig::default());
        c.validate().unwrap();
        assert!(toml::from_str::<DdConfig>("feed_bach = 3").is_err());
        let bad: DdConfig = toml::from_str("feed_batch = 0").unwrap();
        assert!(bad.validate().unwrap_err().contains("feed_batch"));
    }

    #[test]
    fn main_indexes_by_default_and_an_nf_topic_kept_shorter_than_main_is_refused() {
        let c: DdConfig = toml::from_str("").unwrap();
        assert_eq!(c.main.store, MainStore::Index);
        let c: DdConfig = toml::from_str("[main]\nstore = \"copy\"").unwrap();
        assert_eq!(c.main.store, MainStore::Copy);
        assert!(toml::from_str::<DdConfig>("[main]\nstore = \"twice\"").is_err());
        let short = "[log]\nretention_secs = 300";
        let e = toml::from_str::<DdConfig>(short).unwrap().validate().unwrap_err();
        assert!(e.contains("[dd.log] retention_secs = 300"), "{e}");
        // Copying, an NF topic may be kept as briefly as the reference's 5 minutes.
        let copy: DdConfig = toml::from_str(&format!("{short}\n[main]\nstore = \"copy\"")).unwrap();
        copy.validate().unwrap();
    }
}
