//! The consumers of MAIN: one task per feed and MAIN partition reads from the feed's committed
//! offset, keeps what the feed's filter passes, hands it to the feed's sink and commits once the
//! sink has delivered it. A sink that fails gets the same batch again after a backoff (at-least-
//! once), and while it fails the feed reads nothing more: its lag grows on disk, within MAIN's
//! retention, not in memory.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use dd_client::Copy;
use tokio::sync::watch;

use crate::metrics::Metrics;
use crate::sinks::xdr_store::XdrStore;
use crate::topics::{BoxFuture, TopicLog};
use crate::transforms::correlate::Correlator;

/// Largest read from MAIN, bytes.
const MAX_READ_BYTES: usize = 8 * 1024 * 1024;

/// How often a feed commits its offset while it delivers.
const COMMIT_EVERY: Duration = Duration::from_millis(200);

/// Why a batch was not delivered, and when the sink expects to take it again.
#[derive(Debug, Clone)]
pub struct Undelivered {
    pub reason: String,
    /// The sink's own estimate (an endpoint's backoff, a Retry-After); none: the feed's backoff.
    pub retry_in: Option<Duration>,
}

/// Where a feed's copies go (a TCP, HTTP/2 or Kafka sink; an xDR correlator).
pub trait Deliver: Send + Sync + 'static {
    /// Resolves Ok once the whole batch is delivered; Err means none of it counts.
    fn deliver<'a>(&'a self, batch: &'a [Bytes]) -> BoxFuture<'a, Result<(), Undelivered>>;
}

/// Which copies a feed takes.
pub trait Select: Send + Sync + 'static {
    fn select(&self, copy: &Copy) -> bool;
}

/// Where a new feed starts reading MAIN.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Start {
    /// The oldest copy MAIN still holds.
    Earliest,
    /// Copies that arrive from now on.
    #[default]
    Latest,
}

/// One feed's consumer of one MAIN partition.
pub struct Consumer {
    pub consumer: String,
    pub partition: Arc<dyn TopicLog>,
    pub select: Option<Arc<dyn Select>>,
    pub sink: Arc<dyn Deliver>,
    pub start: Start,
    pub batch: usize,
    pub metrics: Arc<Metrics>,
}

impl Consumer {
    /// Runs until `stop` turns true; returns at a batch boundary, its offset committed.
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        let part = &self.partition;
        let mut offset = part.committed(&self.consumer).unwrap_or(match self.start {
            Start::Earliest => part.start_offset(),
            Start::Latest => part.end_offset(),
        });
        // A feed created at "latest" keeps that place across restarts even before it delivers.
        if part.committed(&self.consumer).is_none() {
            let _ = part.commit(&self.consumer, offset).await;
        }
        let mut committed = offset;
        let mut last_commit = std::time::Instant::now();
        loop {
            enum Woken {
                Data,
                CommitDue,
                Stop,
            }
            let woken = tokio::select! {
                _ = part.wait_for(offset) => Woken::Data,
                _ = tokio::time::sleep(COMMIT_EVERY), if committed != offset => Woken::CommitDue,
                _ = stop.wait_for(|s| *s) => Woken::Stop,
            };
            match woken {
                Woken::Data => {}
                Woken::CommitDue => {
                    self.commit(offset, &mut committed).await;
                    last_commit = std::time::Instant::now();
                    continue;
                }
                Woken::Stop => {
                    self.commit(offset, &mut committed).await;
                    return;
                }
            }
            let batch = match part.read(offset, MAX_READ_BYTES, self.batch).await {
                Ok(b) => b,
                Err(e) => {
                    tracing::error!(feed = %self.consumer, topic = part.name(), error = %e, "feed cannot read MAIN");
                    if pause(&mut stop, Duration::from_secs(1)).await {
                        self.commit(offset, &mut committed).await;
                        return;
                    }
                    continue;
                }
            };
            if batch.skipped > 0 {
                self.metrics.consumer_skipped(part.name(), &self.consumer, batch.skipped);
            }
            if batch.unresolved > 0 {
                self.metrics.consumer_unresolved(part.name(), &self.consumer, batch.unresolved);
            }
            let records = match &self.select {
                None => batch.records,
                Some(s) => batch
                    .records
                    .into_iter()
                    .filter(|r| Copy::decode(r.clone()).is_ok_and(|c| s.select(&c)))
                    .collect(),
            };
            if !deliver_until_done(&*self.sink, &records, &self.consumer, &mut stop).await {
                self.commit(offset, &mut committed).await;
                return;
            }
            offset = batch.next;
            // Each commit syncs a file: one every COMMIT_EVERY is enough for at-least-once (a
            // restart delivers at most that much again) and keeps the sync off each batch.
            if last_commit.elapsed() >= COMMIT_EVERY {
                self.commit(offset, &mut committed).await;
                last_commit = std::time::Instant::now();
            }
        }
    }

    async fn commit(&self, offset: u64, committed: &mut u64) {
        if offset == *committed {
            return;
        }
        match self.partition.commit(&self.consumer, offset).await {
            Ok(()) => *committed = offset,
            Err(e) => {
                tracing::warn!(feed = %self.consumer, error = %e, "feed offset not committed")
            }
        }
    }
}

/// Hands `records` to `sink` until it takes them, waiting between tries what the sink says (else
/// 50 ms doubling to 5 s). False when a stop came first: nothing of the batch counts.
pub(crate) async fn deliver_until_done(
    sink: &dyn Deliver,
    records: &[Bytes],
    feed: &str,
    stop: &mut watch::Receiver<bool>,
) -> bool {
    let mut backoff = Duration::from_millis(50);
    while !records.is_empty() {
        match sink.deliver(records).await {
            Ok(()) => return true,
            Err(e) => {
                tracing::warn!(feed, error = %e.reason, "feed delivery failed; retrying");
                let wait = e
                    .retry_in
                    .unwrap_or(backoff)
                    .clamp(Duration::from_millis(10), Duration::from_secs(30));
                if pause(stop, wait).await {
                    return false;
                }
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
    true
}

/// Sleeps, or returns true at once when asked to stop.
pub(crate) async fn pause(stop: &mut watch::Receiver<bool>, d: Duration) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => false,
        _ = stop.wait_for(|s| *s) => true,
    }
}

/// One correlation's consumer of one MAIN partition: copies into its [`Correlator`], the xDRs it
/// closes into the xDR store, and MAIN's offset committed at the correlator's resume offset (the
/// first copy of its oldest open record), so a restart re-reads what open records need and
/// stores the same xDRs again (their ids come from their first copy: a replay replaces, never
/// duplicates).
pub struct CorrelationConsumer {
    pub consumer: String,
    pub partition: Arc<dyn TopicLog>,
    pub correlator: Correlator,
    pub store: Arc<dyn XdrStore>,
    pub batch: usize,
    pub metrics: Arc<Metrics>,
    /// Set before `stop` when the correlation is deleted: its open records close (`flushed`)
    /// and are stored; on a plain stop they stay open to be rebuilt after the restart.
    pub removing: Arc<std::sync::atomic::AtomicBool>,
}

impl CorrelationConsumer {
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let part = self.partition.clone();
        let mut offset = part.committed(&self.consumer).unwrap_or_else(|| part.start_offset());
        let mut committed = offset;
        let mut last_commit = std::time::Instant::now();
        loop {
            enum Woken {
                Data,
                Idle,
                Stop,
            }
            let woken = tokio::select! {
                _ = part.wait_for(offset) => Woken::Data,
                // No traffic: time still moves, so records whose window ended close.
                _ = tokio::time::sleep(Duration::from_secs(1)) => Woken::Idle,
                _ = stop.wait_for(|s| *s) => Woken::Stop,
            };
            match woken {
                Woken::Stop => {
                    if self.removing.load(std::sync::atomic::Ordering::Acquire) {
                        self.correlator.flush();
                    }
                    self.store_closed(&mut stop, true).await;
                    self.commit(&mut committed).await;
                    return;
                }
                Woken::Idle => self.correlator.advance(now_ns()),
                Woken::Data => {
                    let batch = match part.read(offset, MAX_READ_BYTES, self.batch).await {
                        Ok(b) => b,
                        Err(e) => {
                            tracing::error!(correlation = %self.consumer, error = %e, "correlation cannot read MAIN");
                            // A stop during the pause is seen at the top of the loop.
                            let _ = pause(&mut stop, Duration::from_secs(1)).await;
                            continue;
                        }
                    };
                    if batch.skipped > 0 {
                        self.metrics.consumer_skipped(part.name(), &self.consumer, batch.skipped);
                    }
                    if batch.unresolved > 0 {
                        self.metrics.consumer_unresolved(
                            part.name(),
                            &self.consumer,
                            batch.unresolved,
                        );
                    }
                    let first = batch.next - batch.records.len() as u64;
                    self.correlator.push_batch(first, &batch.records);
                    offset = batch.next;
                }
            }
            if !self.store_closed(&mut stop, false).await {
                continue;
            }
            if last_commit.elapsed() >= COMMIT_EVERY {
                self.commit(&mut committed).await;
                last_commit = std::time::Instant::now();
            }
        }
    }

    /// Stores the xDRs the correlator closed; retries while the store fails (the correlator
    /// keeps them). False when a stop came first.
    async fn store_closed(&mut self, stop: &mut watch::Receiver<bool>, stopping: bool) -> bool {
        let xdrs = self.correlator.drain();
        if xdrs.is_empty() {
            return true;
        }
        let mut backoff = Duration::from_millis(50);
        loop {
            match self.store.insert(xdrs.clone()).await {
                Ok(_) => return true,
                Err(e) => {
                    tracing::warn!(correlation = %self.consumer, error = %e, "xDRs not stored; retrying");
                    if stopping {
                        // Not committed past them: the restart rebuilds them from MAIN.
                        return false;
                    }
                    if pause(stop, backoff).await {
                        return false;
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
    }

    async fn commit(&self, committed: &mut u64) {
        let at = self.correlator.resume_offset().max(*committed);
        if at == *committed {
            return;
        }
        match self.partition.commit(&self.consumer, at).await {
            Ok(()) => *committed = at,
            Err(e) => {
                tracing::warn!(correlation = %self.consumer, error = %e, "correlation offset not committed")
            }
        }
    }
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
