//! What the feeds say on `/metrics`: messages by feed, endpoint and result, bytes, the time a
//! batch takes to be delivered, errors by kind, and the end-to-end latency of each message (the
//! NF's copy timestamp to delivery).
//!
//! One [`FeedMetrics`] for the Data Director, registered once; each sink resolves its own
//! handles when it is built, so delivering a batch hashes no label set. Label values are the
//! feed's name and its configured endpoints, never anything a consumer sends.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Upper bounds, seconds: the SBI layer's 1-2-5 steps from 50 µs to 5 s, then 10 s, 30 s and
/// 60 s, because a consumer that was down is fed a backlog whose end-to-end latency is its
/// outage.
pub const BUCKETS: [f64; 19] = [
    0.000_05, 0.000_1, 0.000_2, 0.000_5, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0,
    2.0, 5.0, 10.0, 30.0, 60.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FeedLabels {
    pub feed: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MessageLabels {
    pub feed: String,
    pub endpoint: String,
    /// `delivered`; `failed` (this endpoint failed the batch: it is tried elsewhere or handed
    /// back for a retry, so the same message may be counted again); `rejected` (the consumer
    /// refused it for good: an HTTP 4xx other than 408 and 429; not retried, so dropped).
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    pub feed: String,
    pub endpoint: String,
    /// [`FailureKind::as_str`](super::FailureKind::as_str).
    pub kind: &'static str,
}

type HistogramFamily = Family<FeedLabels, Histogram, fn() -> Histogram>;

fn histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

/// The feeds' metric families, shared by every sink.
#[derive(Clone)]
pub struct FeedMetrics {
    messages: Family<MessageLabels, Counter>,
    bytes: Family<FeedLabels, Counter>,
    delivery: HistogramFamily,
    errors: Family<ErrorLabels, Counter>,
    e2e: HistogramFamily,
}

impl Default for FeedMetrics {
    fn default() -> Self {
        FeedMetrics {
            messages: Family::default(),
            bytes: Family::default(),
            delivery: Family::new_with_constructor(histogram as fn() -> Histogram),
            errors: Family::default(),
            e2e: Family::new_with_constructor(histogram as fn() -> Histogram),
        }
    }
}

impl FeedMetrics {
    pub fn register(&self, r: &mut Registry) {
        r.register(
            "dd_feed_messages",
            "Envelopes handed to a feed's endpoint, by feed, endpoint and result",
            self.messages.clone(),
        );
        r.register(
            "dd_feed_bytes",
            "Bytes delivered by a feed (frames: length prefixes and envelopes)",
            self.bytes.clone(),
        );
        r.register(
            "dd_feed_delivery_seconds",
            "Time from a batch reaching a feed's sink to its delivery, failovers included",
            self.delivery.clone(),
        );
        r.register(
            "dd_feed_errors",
            "Failed attempts to deliver a batch, by feed, endpoint and kind",
            self.errors.clone(),
        );
        r.register(
            "dd_feed_e2e_seconds",
            "Time from the NF's copy of a message (its envelope timestamp) to its delivery",
            self.e2e.clone(),
        );
    }

    /// The handles of one feed and its endpoints.
    pub(crate) fn feed(&self, feed: &str, endpoints: &[String]) -> FeedHandles {
        let labels = FeedLabels { feed: feed.to_owned() };
        let per = |result| {
            endpoints
                .iter()
                .map(|e| {
                    self.messages
                        .get_or_create(&MessageLabels {
                            feed: feed.to_owned(),
                            endpoint: e.clone(),
                            result,
                        })
                        .clone()
                })
                .collect()
        };
        FeedHandles {
            feed: feed.to_owned(),
            endpoints: endpoints.to_vec(),
            delivered: per("delivered"),
            failed: per("failed"),
            rejected: per("rejected"),
            bytes: self.bytes.get_or_create(&labels).clone(),
            delivery: self.delivery.get_or_create(&labels).clone(),
            e2e: self.e2e.get_or_create(&labels).clone(),
            errors: self.errors.clone(),
        }
    }
}

/// One feed's resolved handles.
pub(crate) struct FeedHandles {
    feed: String,
    endpoints: Vec<String>,
    delivered: Vec<Counter>,
    failed: Vec<Counter>,
    rejected: Vec<Counter>,
    bytes: Counter,
    delivery: Histogram,
    e2e: Histogram,
    errors: Family<ErrorLabels, Counter>,
}

impl FeedHandles {
    /// `batch` was delivered through endpoint `ep`, `bytes` on the wire, `elapsed` after it
    /// reached the sink.
    pub fn delivered(&self, ep: usize, batch: &[Bytes], bytes: usize, elapsed: Duration) {
        self.delivered[ep].inc_by(batch.len() as u64);
        self.bytes.inc_by(bytes as u64);
        self.delivery.observe(elapsed.as_secs_f64());
        self.observe_e2e(batch);
    }

    pub fn rejected(&self, ep: usize, n: usize) {
        self.rejected[ep].inc_by(n as u64);
    }

    /// Endpoint `ep` failed `n` messages for this reason.
    pub fn failed(&self, ep: usize, n: usize, kind: &'static str) {
        self.failed[ep].inc_by(n as u64);
        self.errors
            .get_or_create(&ErrorLabels {
                feed: self.feed.clone(),
                endpoint: self.endpoints[ep].clone(),
                kind,
            })
            .inc();
    }

    /// The envelope's timestamp (bytes 4..12: nanoseconds since the epoch, big-endian) against
    /// the clock now; only the timestamp is read. A timestamp ahead of this host's clock (the NF
    /// runs elsewhere, clocks differ) counts as zero.
    fn observe_e2e(&self, batch: &[Bytes]) {
        let Ok(now) = SystemTime::now().duration_since(UNIX_EPOCH) else { return };
        let now = now.as_nanos() as u64;
        for env in batch {
            let Some(ts) = env.get(4..12) else { continue };
            let ts = u64::from_be_bytes(ts.try_into().expect("8 bytes"));
            self.e2e.observe(now.saturating_sub(ts) as f64 / 1e9);
        }
    }
}
