//! `[dd.aggregate]`: how the NF topics are merged into MAIN.

use serde::Deserialize;

/// Which MAIN partition a copy goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Ordering {
    /// Each batch read from an NF topic goes whole to the next partition in turn: the most even
    /// spread, and each NF's own order kept within a batch (the reference's default).
    #[default]
    RoundRobin,
    /// By the copy's SUPI (its session id when it has none, else its transaction), hashed: all of
    /// one subscriber's copies are in one partition, in the order its NF topic had them.
    Key,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AggregateConfig {
    /// MAIN's partitions: each is its own log with its own writer and each feed reads each with its
    /// own task, so more partitions use more threads. Default 1: one stream in one order, which
    /// correlation needs unless ordering is by key (one MAIN writer takes well over 200,000
    /// copies/s: it writes to the page cache and syncs every 10 ms).
    #[serde(default = "default_main_partitions")]
    pub main_partitions: usize,
    /// Round-robin or by key. Default round_robin.
    #[serde(default)]
    pub ordering: Ordering,
    /// Copies read from an NF topic at once (and appended to MAIN as one batch). Default 1024.
    #[serde(default = "default_batch")]
    pub batch: usize,
}

fn default_main_partitions() -> usize {
    1
}
fn default_batch() -> usize {
    1024
}

impl Default for AggregateConfig {
    fn default() -> Self {
        AggregateConfig {
            main_partitions: default_main_partitions(),
            ordering: Ordering::default(),
            batch: default_batch(),
        }
    }
}

impl AggregateConfig {
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=64).contains(&self.main_partitions) {
            return Err("[dd.aggregate] main_partitions must be between 1 and 64".into());
        }
        if !(1..=65_536).contains(&self.batch) {
            return Err("[dd.aggregate] batch must be between 1 and 65536".into());
        }
        Ok(())
    }
}
