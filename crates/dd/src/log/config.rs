//! Configuration of the embedded log: defaults for every topic, overrides per topic.
//!
//! ```toml
//! fsync = "always"                  # or { interval_ms = 10 }
//! segment_mib = 128
//! retention_secs = 300              # the NF topics'
//!
//! [topics.MAIN]
//! retention_secs = 21600            # MAIN's own (its default)
//! retention_mib = 200000
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

/// The topic the aggregation writes and the feeds read: kept longer than the NF topics.
pub const MAIN: &str = "MAIN";
/// The reference's retention of an NF topic (5 minutes) and of MAIN (6 hours).
const NF_TOPIC_RETENTION_SECS: u64 = 5 * 60;
const MAIN_RETENTION_SECS: u64 = 6 * 3600;

/// When an appended batch is flushed to disk, and so what a crash can lose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "FsyncRepr")]
pub enum Fsync {
    /// Acknowledge a batch only after `fdatasync` has returned: neither `kill -9` nor an OS
    /// crash or power loss loses an acknowledged record. Concurrent appenders share one
    /// `fdatasync` (group commit).
    Always,
    /// Acknowledge a batch once it is written to the file (the page cache) and `fdatasync` at
    /// most this often: `kill -9` still loses nothing acknowledged, an OS crash or power loss
    /// loses at most the last interval's acknowledged records.
    Interval(Duration),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum FsyncRepr {
    Word(String),
    Interval { interval_ms: u64 },
}

impl TryFrom<FsyncRepr> for Fsync {
    type Error = String;

    fn try_from(repr: FsyncRepr) -> Result<Self, String> {
        match repr {
            FsyncRepr::Word(w) if w == "always" => Ok(Fsync::Always),
            FsyncRepr::Word(w) => {
                Err(format!("fsync: {w:?} is neither \"always\" nor {{ interval_ms = N }}"))
            }
            FsyncRepr::Interval { interval_ms: 0 } => {
                Err("fsync: interval_ms must be at least 1 (\"always\" syncs every batch)".into())
            }
            FsyncRepr::Interval { interval_ms } => {
                Ok(Fsync::Interval(Duration::from_millis(interval_ms)))
            }
        }
    }
}

/// The log's configuration: every field is every topic's default, `topics` overrides them for
/// a topic by name.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// When appends reach the disk (`"always"` or `{ interval_ms = N }`), default `"always"`.
    pub fsync: Fsync,
    /// A segment is closed and a new one started once it holds this many MiB (default 128).
    pub segment_mib: u64,
    /// ... or once its first record is this old, in seconds, so that retention by age can
    /// delete it (default: a fifth of the topic's retention by age, else one hour).
    pub segment_secs: Option<u64>,
    /// The sparse index has an entry every this many KiB of a segment (default 4): a read from
    /// any offset reads at most this much before its first record.
    pub index_interval_kib: u64,
    /// Whole segments whose last record is older than this are deleted, 0 for never (default
    /// 300 s, the reference's 5 minutes for an NF topic). It does not apply to MAIN, whose
    /// retention is `[topics.MAIN] retention_secs`, default 6 hours (the reference's).
    pub retention_secs: Option<u64>,
    /// Oldest segments are deleted while the topic holds more than this many MiB (default none).
    pub retention_mib: Option<u64>,
    /// The writer takes the appends queued while it was busy, up to this many MiB, into one
    /// write and one `fdatasync` (default 4).
    pub max_write_mib: u64,
    /// Appends queued per topic before appenders wait (default 1024).
    pub queue_capacity: usize,
    /// The latest writes kept in memory per topic, in MiB, so that readers keeping up read no
    /// file (default 16; 0 turns it off). At 200,000 records/s of 1.2 KB into one topic 16 MiB
    /// hold the last ~70 ms.
    pub tail_cache_mib: u64,
    /// Overrides by topic name.
    pub topics: BTreeMap<String, TopicOverrides>,
}

/// What a topic may set differently from the log's defaults.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicOverrides {
    pub fsync: Option<Fsync>,
    pub segment_mib: Option<u64>,
    pub segment_secs: Option<u64>,
    pub index_interval_kib: Option<u64>,
    pub retention_secs: Option<u64>,
    pub retention_mib: Option<u64>,
    pub max_write_mib: Option<u64>,
    pub queue_capacity: Option<usize>,
    pub tail_cache_mib: Option<u64>,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            fsync: Fsync::Always,
            segment_mib: 128,
            segment_secs: None,
            index_interval_kib: 4,
            retention_secs: None,
            retention_mib: None,
            max_write_mib: 4,
            queue_capacity: 1024,
            tail_cache_mib: 16,
            topics: BTreeMap::new(),
        }
    }
}

/// One topic's settings, resolved from the defaults and its overrides, in the units the code
/// uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicConfig {
    pub fsync: Fsync,
    pub segment_bytes: u64,
    pub segment_age: Duration,
    pub index_interval_bytes: u64,
    pub retention_age: Option<Duration>,
    pub retention_bytes: Option<u64>,
    pub max_write_bytes: usize,
    pub queue_capacity: usize,
    pub tail_cache_bytes: usize,
}

impl LogConfig {
    /// The settings of topic `name`.
    pub fn topic(&self, name: &str) -> TopicConfig {
        let o = self.topics.get(name).cloned().unwrap_or_default();
        // MAIN's retention is its own: the default for the NF topics does not shorten it.
        let retention_secs = if name == MAIN {
            o.retention_secs.unwrap_or(MAIN_RETENTION_SECS)
        } else {
            o.retention_secs.or(self.retention_secs).unwrap_or(NF_TOPIC_RETENTION_SECS)
        };
        // 0 keeps everything: retention by size alone, or none.
        let retention_age = (retention_secs > 0).then(|| Duration::from_secs(retention_secs));
        let segment_secs = o.segment_secs.or(self.segment_secs).unwrap_or(match retention_age {
            Some(age) => (age.as_secs() / 5).max(1),
            None => 3600,
        });
        TopicConfig {
            fsync: o.fsync.unwrap_or(self.fsync),
            segment_bytes: o.segment_mib.unwrap_or(self.segment_mib).max(1) << 20,
            segment_age: Duration::from_secs(segment_secs.max(1)),
            index_interval_bytes: o.index_interval_kib.unwrap_or(self.index_interval_kib).max(1)
                << 10,
            retention_age,
            retention_bytes: o.retention_mib.or(self.retention_mib).map(|m| m << 20),
            max_write_bytes: (o.max_write_mib.unwrap_or(self.max_write_mib).max(1) << 20) as usize,
            queue_capacity: o.queue_capacity.unwrap_or(self.queue_capacity).max(1),
            tail_cache_bytes: (o.tail_cache_mib.unwrap_or(self.tail_cache_mib) << 20) as usize,
        }
    }
}

impl TopicConfig {
    /// Settings in bytes and durations directly, for tests and tools.
    pub fn new(fsync: Fsync) -> TopicConfig {
        TopicConfig {
            fsync,
            segment_bytes: 128 << 20,
            segment_age: Duration::from_secs(3600),
            index_interval_bytes: 4096,
            retention_age: None,
            retention_bytes: None,
            max_write_bytes: 4 << 20,
            queue_capacity: 1024,
            tail_cache_bytes: 16 << 20,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_module_example_parses_with_main_kept_longer() {
        let text = "fsync = \"always\"\nsegment_mib = 128\nretention_secs = 300\n\n\
                    [topics.MAIN]\nretention_secs = 21600\nretention_mib = 200000\n";
        let config: LogConfig = toml::from_str(text).expect("example parses");
        let nrf = config.topic("nrf");
        assert_eq!(nrf.retention_age, Some(Duration::from_secs(300)));
        assert_eq!(nrf.segment_age, Duration::from_secs(60));
        assert_eq!(nrf.segment_bytes, 128 << 20);
        let main = config.topic(MAIN);
        assert_eq!(main.retention_age, Some(Duration::from_secs(21600)));
        assert_eq!(main.retention_bytes, Some(200_000 << 20));
    }

    #[test]
    fn defaults_follow_the_reference_retention() {
        let config = LogConfig::default();
        assert_eq!(config.topic("udr").retention_age, Some(Duration::from_secs(300)));
        assert_eq!(config.topic(MAIN).retention_age, Some(Duration::from_secs(6 * 3600)));
        assert_eq!(config.topic("udr").fsync, Fsync::Always);
        assert_eq!(config.topic("udr").index_interval_bytes, 4096);
    }

    #[test]
    fn fsync_takes_always_or_an_interval_and_nothing_else() {
        #[derive(Deserialize)]
        struct T {
            fsync: Fsync,
        }
        let t: T = toml::from_str("fsync = { interval_ms = 10 }").expect("interval");
        assert_eq!(t.fsync, Fsync::Interval(Duration::from_millis(10)));
        let t: T = toml::from_str("fsync = \"always\"").expect("always");
        assert_eq!(t.fsync, Fsync::Always);
        assert!(toml::from_str::<T>("fsync = \"never\"").is_err());
        assert!(toml::from_str::<T>("fsync = { interval_ms = 0 }").is_err());
        assert!(toml::from_str::<LogConfig>("segment_mb = 1").is_err(), "unknown keys refused");
    }

    #[test]
    fn zero_retention_keeps_everything() {
        let config: LogConfig = toml::from_str("retention_secs = 0").expect("parses");
        assert_eq!(config.topic("pcf").retention_age, None);
        assert_eq!(config.topic("pcf").segment_age, Duration::from_secs(3600));
        assert_eq!(config.topic(MAIN).retention_age, Some(Duration::from_secs(6 * 3600)));
    }
}
