//! The embedded mode's topics: [`crate::topics::Topics`] over the on-disk log of [`crate::log`].
//! MAIN is partitioned here (`MAIN-0`, `MAIN-1`, ...), each partition a log topic of its own with
//! its own writer thread; `[dd.log.topics.MAIN]` (and MAIN's default retention, 6 hours) applies
//! to every partition unless one has its own section.

use std::io;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::config::DdConfig;
use crate::log::{Fsync, LogConfig, LogDir, LogError, Topic, TopicOverrides, MAIN};
use crate::main_index::{covers_age, MainStore};
use crate::topics::{main_partition, Batch, BoxFuture, TopicLog, Topics, NF_TOPICS};

/// MAIN's retention when `[dd.log.topics.MAIN]` does not set one (the reference's 6 hours).
const MAIN_RETENTION_SECS: u64 = 6 * 3600;

/// MAIN's sync interval when `[dd.log.topics.MAIN]` does not set `fsync`. MAIN need not sync each
/// batch: aggregation commits an NF topic's offset only once MAIN's copies of those records are
/// synced (`synced_end`), so an OS crash that loses MAIN's last interval has them aggregated again
/// from the NF topic, which did sync before the ingest API acknowledged them. One fdatasync per
/// copy's path instead of two keeps ~4 ms (this disk's fdatasync) out of every copy's E2E latency.
const MAIN_FSYNC_MS: u64 = 10;

pub struct LogTopics {
    dir: Arc<LogDir>,
}

fn io_error(e: LogError) -> io::Error {
    io::Error::other(e.to_string())
}

/// `[dd.log]` with MAIN's settings given to each of its partitions.
pub fn partitioned(config: &LogConfig, partitions: usize) -> LogConfig {
    let mut c = config.clone();
    let main = c.topics.get(MAIN).cloned().unwrap_or_default();
    for i in 0..partitions {
        c.topics.entry(main_partition(i)).or_insert_with(|| TopicOverrides {
            retention_secs: Some(main.retention_secs.unwrap_or(MAIN_RETENTION_SECS)),
            fsync: Some(
                main.fsync.unwrap_or(Fsync::Interval(Duration::from_millis(MAIN_FSYNC_MS))),
            ),
            ..main.clone()
        });
    }
    c
}

/// [`partitioned`], and with MAIN as an index (`[dd.main] store = "index"`) the NF topics kept at
/// least as long, and at least as large, as MAIN would keep its copies: MAIN's records point
/// into them. Values an operator set lower are refused by
/// [`crate::main_index::check_retention`] before this runs; what it raises are the defaults.
pub fn embedded(config: &DdConfig) -> LogConfig {
    let mut c = partitioned(&config.log, config.aggregate.main_partitions);
    if config.main.store != MainStore::Index {
        return c;
    }
    let main_age = c.topic(MAIN).retention_age.map_or(0, |a| a.as_secs());
    let main_bytes = c.topic(MAIN).retention_bytes;
    for t in NF_TOPICS {
        let own = c.topic(t);
        let own_age = own.retention_age.map_or(0, |a| a.as_secs());
        let o = c.topics.entry(t.to_string()).or_default();
        if !covers_age(own_age, main_age) {
            o.retention_secs = Some(main_age);
        }
        if let (Some(own), Some(min)) = (own.retention_bytes, main_bytes) {
            if own < min {
                o.retention_mib = Some(min >> 20);
            }
        }
    }
    c
}

impl LogTopics {
    /// Opens (and recovers) the log: blocking, call it off the async threads.
    pub fn open(dir: &Path, config: &DdConfig) -> Result<Arc<LogTopics>, LogError> {
        let log = LogDir::open(dir, embedded(config))?;
        Ok(Arc::new(LogTopics { dir: Arc::new(log) }))
    }

    /// The log under the topics (its topics' stats, retention passes).
    pub fn log(&self) -> &Arc<LogDir> {
        &self.dir
    }

    /// Applies every topic's retention every `period`.
    pub fn spawn_retention(&self, period: Duration) -> tokio::task::JoinHandle<()> {
        self.dir.spawn_retention(period)
    }
}

impl Topics for LogTopics {
    fn topic(&self, name: &str) -> io::Result<Arc<dyn TopicLog>> {
        let t = self.dir.topic(name).map_err(io_error)?;
        Ok(Arc::new(LogTopic(t)))
    }
}

struct LogTopic(Topic);

impl TopicLog for LogTopic {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn append(&self, records: Vec<Bytes>) -> BoxFuture<'_, io::Result<Range<u64>>> {
        Box::pin(async move { self.0.append(records).await.map_err(io_error) })
    }

    fn read(
        &self,
        from: u64,
        max_bytes: usize,
        max_records: usize,
    ) -> BoxFuture<'_, io::Result<Batch>> {
        Box::pin(async move {
            let b = self.0.read(from, max_bytes, max_records).await.map_err(io_error)?;
            Ok(Batch { records: b.records, next: b.next_offset, skipped: b.skipped, unresolved: 0 })
        })
    }

    fn wait_for(&self, offset: u64) -> BoxFuture<'_, ()> {
        // A failed topic returns at once: its reader's next read fails, is logged, backs off.
        Box::pin(async move {
            let _ = self.0.wait_for(offset).await;
        })
    }

    fn end_offset(&self) -> u64 {
        self.0.end_offset()
    }

    fn start_offset(&self) -> u64 {
        self.0.start_offset()
    }

    fn synced_end(&self) -> u64 {
        self.0.synced_end()
    }

    fn commit(&self, consumer: &str, offset: u64) -> BoxFuture<'_, io::Result<()>> {
        let consumer = consumer.to_string();
        Box::pin(async move { self.0.commit(&consumer, offset).await.map_err(io_error) })
    }

    fn committed(&self, consumer: &str) -> Option<u64> {
        self.0.committed(consumer)
    }
}
