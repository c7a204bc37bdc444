//! What a store says on its NF's `/metrics`: the SQLite engine's group commits (how long each
//! `COMMIT` took, how many writes it carried, what failed), its queues, and the MySQL backend's
//! retries and failovers. The figures are the engine's own counters ([`crate::StoreStats`],
//! [`crate::MysqlStats`]) read at scrape time; only the commit time is a histogram, observed
//! once per commit on the writer thread. docs/operations.md lists every name.

use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::{MysqlStats, StoreStats};

/// Upper bounds, seconds: the SBI and Diameter latency steps (1-2-5 from 50 µs to 5 s), so a
/// commit's share of an answer's time is read off the same boundaries.
pub const COMMIT_BUCKETS: [f64; 16] = [
    0.000_05, 0.000_1, 0.000_2, 0.000_5, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0,
    2.0, 5.0,
];

/// The time of each `COMMIT`, shared by the writer thread and the registry.
#[derive(Clone, Debug)]
pub struct CommitHistogram(Histogram);

impl Default for CommitHistogram {
    fn default() -> Self {
        CommitHistogram(Histogram::new(COMMIT_BUCKETS))
    }
}

impl CommitHistogram {
    pub fn observe(&self, took: Duration) {
        self.0.observe(took.as_secs_f64());
    }
}

/// Registers the SQLite engine's metrics: the commit histogram and the counters `stats` reads
/// (`None` once the store is gone).
pub(crate) fn register_sqlite(
    registry: &mut Registry,
    commit_seconds: CommitHistogram,
    stats: impl Fn() -> Option<StoreStats> + Send + Sync + 'static,
) {
    registry.register(
        "store_commit_duration_seconds",
        "Time of one group-commit COMMIT of the embedded store (WAL append and fsync)",
        commit_seconds.0,
    );
    registry.register_collector(Box::new(SqliteCollector(Box::new(stats))));
}

type StatsFn = Box<dyn Fn() -> Option<StoreStats> + Send + Sync>;

struct SqliteCollector(StatsFn);

impl std::fmt::Debug for SqliteCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SqliteCollector")
    }
}

impl Collector for SqliteCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(s) = (self.0)() else { return Ok(()) };
        for (name, help, value) in [
            ("store_commits", "Group-commit transactions committed by the writer thread", s.commits),
            ("store_writes", "Write jobs acknowledged as committed", s.writes),
            (
                "store_failed_writes",
                "Write jobs rolled back (their own error, or lost with a batch that could not commit)",
                s.failed_writes,
            ),
            ("store_failed_batches", "Group commits that could not commit", s.failed_batches),
            ("store_reads", "Read jobs run by the reader threads", s.reads),
            (
                "store_checkpoints",
                "WAL checkpoint passes of the background checkpointer thread",
                s.checkpoints,
            ),
            (
                "store_writer_checkpoints",
                "Checkpoints the writer made itself because the checkpointer fell far behind",
                s.writer_checkpoints,
            ),
        ] {
            let c = ConstCounter::new(value);
            c.encode(encoder.encode_descriptor(name, help, None, c.metric_type())?)?;
        }
        for (name, help, value) in [
            ("store_queued_writes", "Write jobs waiting for the writer thread", s.queued_writes),
            ("store_queued_reads", "Read jobs waiting for a reader thread", s.queued_reads),
            (
                "store_largest_batch",
                "Most write jobs one group commit has carried",
                s.largest_batch,
            ),
        ] {
            let g = ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX));
            g.encode(encoder.encode_descriptor(name, help, None, g.metric_type())?)?;
        }
        if let Some(bytes) = crate::sqlite::alloc::used_bytes() {
            let g = ConstGauge::new(i64::try_from(bytes).unwrap_or(i64::MAX));
            let help = "Memory SQLite holds in this process, every store together (page caches, statements, schemas)";
            g.encode(encoder.encode_descriptor(
                "store_sqlite_memory_bytes",
                help,
                None,
                g.metric_type(),
            )?)?;
        }
        let limit = crate::sqlite::alloc::soft_limit();
        let g = ConstGauge::new(i64::try_from(limit).unwrap_or(i64::MAX));
        let help = "SQLite's soft heap limit for this process ([store] memory_limit_mib; 0: none)";
        g.encode(encoder.encode_descriptor(
            "store_sqlite_memory_limit_bytes",
            help,
            None,
            g.metric_type(),
        )?)?;
        Ok(())
    }
}

/// Registers the MySQL backend's counters (`stats` reads them at scrape time).
pub(crate) fn register_mysql(
    registry: &mut Registry,
    stats: impl Fn() -> MysqlStats + Send + Sync + 'static,
) {
    registry.register_collector(Box::new(MysqlCollector(Box::new(stats))));
}

struct MysqlCollector(Box<dyn Fn() -> MysqlStats + Send + Sync>);

impl std::fmt::Debug for MysqlCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MysqlCollector")
    }
}

impl Collector for MysqlCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = (self.0)();
        for (name, help, value) in [
            (
                "store_mysql_retries",
                "MySQL transactions tried again (deadlock, certification failure, lock wait timeout)",
                s.retries,
            ),
            ("store_mysql_failovers", "Moves of the MySQL backend to another node", s.failovers),
            (
                "store_mysql_commit_unknown",
                "MySQL writes whose COMMIT went unanswered and could not be confirmed",
                s.commit_unknown,
            ),
        ] {
            let c = ConstCounter::new(value);
            c.encode(encoder.encode_descriptor(name, help, None, c.metric_type())?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_are_timed_and_counters_read_at_scrape_time() {
        let mut r = Registry::default();
        let h = CommitHistogram::default();
        let stats = StoreStats { commits: 3, writes: 7, queued_writes: 2, ..Default::default() };
        register_sqlite(&mut r, h.clone(), move || Some(stats));
        h.observe(Duration::from_micros(700));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &r).unwrap();
        assert!(text.contains("store_commit_duration_seconds_bucket{le=\"0.001\"} 1"), "{text}");
        assert!(text.contains("store_commit_duration_seconds_bucket{le=\"0.0005\"} 0"), "{text}");
        assert!(text.contains("store_commits_total 3"), "{text}");
        assert!(text.contains("store_writes_total 7"), "{text}");
        assert!(text.contains("store_queued_writes 2"), "{text}");
    }

    #[test]
    fn a_store_gone_shows_no_figures() {
        let mut r = Registry::default();
        register_sqlite(&mut r, CommitHistogram::default(), || None);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &r).unwrap();
        assert!(!text.contains("store_commits"), "{text}");
    }
}
