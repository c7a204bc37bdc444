//! Feeds' sinks: where a feed's consumer (which reads MAIN from its committed offset and filters)
//! hands its batches of envelopes, and what delivers them to third-party consumers: [`tcp`]
//! (length-framed over TCP or TLS) and [`http2`] (one POST per batch). Both spread batches over
//! their endpoints with [`balance`] (round robin or weighted, skipping an endpoint that failed
//! until its backoff ends) and count what they do in [`metrics`].
//!
//! The contract is [`Sink::deliver`]: `Ok` once the batch is delivered as the sink's kind defines
//! it (a TCP write flushed, or acknowledged by the consumer; an HTTP/2 2xx), `Err` when it is not,
//! and then nothing of it counts as delivered: the feed's consumer keeps its offset and hands the
//! same batch again after [`SinkError::retry_in`], so delivery is at least once (a batch that
//! failed half-way, or on a consumer that processed it but did not say so, is delivered again).
//!
//! One batch goes to one endpoint (per `max_batch` envelopes), tried on the next endpoint in the
//! balance order when its endpoint fails, until every endpoint has been tried or is backing off.

pub mod balance;
pub mod config;
pub mod http2;
pub mod metrics;
pub mod tcp;
pub mod xdr_store;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::future::BoxFuture;
use sbi::InvalidParam;
use serde::Serialize;

use self::balance::Balancer;
pub use self::config::{Balance, SinkConfig};
use self::metrics::FeedHandles;
pub use self::metrics::FeedMetrics;

/// What a feed's consumer hands its batches to.
pub trait Sink: Send + Sync + 'static {
    /// Delivers a batch of envelopes (each `Bytes` one unframed envelope, see
    /// `dd_client::envelope`) in order. Resolves `Ok` only when the batch is delivered as the
    /// feed's delivery guarantee defines it, or refused for good by the consumer (an HTTP 4xx
    /// other than 408 and 429: the consumer's final word on that batch, counted as
    /// `result="rejected"` and not retried, since retrying would stop the feed for ever). `Err`
    /// means none of it may be counted as delivered: the caller retries the same batch after
    /// [`SinkError::retry_in`], so delivery is at least once. Waits while `max_in_flight`
    /// batches are in progress (back-pressure).
    fn deliver<'a>(&'a self, batch: &'a [Bytes]) -> BoxFuture<'a, Result<(), SinkError>>;

    /// Each endpoint's state, for the admin API and health checks.
    fn health(&self) -> Vec<EndpointHealth>;
}

/// Builds the sink of feed `feed` (the name its metrics carry), or lists every wrong field of
/// `cfg` as JSON pointers into it ([`SinkConfig::validate`]). Reads the TLS files named; needs
/// no runtime until the first delivery.
pub fn build(
    feed: &str,
    cfg: &SinkConfig,
    metrics: &FeedMetrics,
) -> Result<Arc<dyn Sink>, Vec<InvalidParam>> {
    let errs = cfg.validate();
    if !errs.is_empty() {
        return Err(errs);
    }
    Ok(match cfg {
        SinkConfig::Tcp(c) => Arc::new(tcp::TcpSink::new(feed, c, metrics)?),
        SinkConfig::Http2(c) => Arc::new(http2::Http2Sink::new(feed, c, metrics)?),
    })
}

/// A batch no endpoint took.
#[derive(Debug, Clone, thiserror::Error)]
#[error("feed {feed}: batch not delivered ({}); retry in {retry_in:?}", Failures(failures))]
pub struct SinkError {
    pub feed: String,
    /// Each endpoint tried for this batch, in order; empty when every endpoint was backing off
    /// from earlier failures and none was tried.
    pub failures: Vec<EndpointFailure>,
    /// Time until an endpoint is back in rotation: when the caller should hand the batch again.
    pub retry_in: Duration,
}

impl SinkError {
    pub fn retry_in(&self) -> Duration {
        self.retry_in
    }
}

struct Failures<'a>(&'a [EndpointFailure]);

impl std::fmt::Display for Failures<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            return f.write_str("every endpoint is backing off");
        }
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{}: {}: {}", e.endpoint, e.kind.as_str(), e.detail)?;
        }
        Ok(())
    }
}

/// Why one endpoint did not take a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointFailure {
    pub endpoint: String,
    pub kind: FailureKind,
    pub detail: String,
}

/// The kinds of failure, the `kind` label of `dd_feed_errors_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// No TCP connection (refused, unreachable, name not resolved).
    Connect,
    /// The TLS handshake failed (certificate not trusted, wrong name).
    Tls,
    /// Connect, write, acknowledgement or answer took longer than configured.
    Timeout,
    /// The connection failed while a batch was written or answered.
    Io,
    /// The consumer closed the connection before acknowledging the batch.
    Closed,
    /// The consumer broke the acknowledgement protocol (acknowledged more than was sent, or
    /// counted backwards); the connection is closed.
    Protocol,
    /// HTTP 429 or 503: the consumer is overloaded (its `Retry-After` is honoured).
    Overloaded,
    /// Another HTTP answer that is not a delivery: 5xx, 408, 3xx.
    Status,
    /// HTTP 4xx other than 408 and 429: refused for good (the batch is dropped, not retried).
    Rejected,
}

impl FailureKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Connect => "connect",
            FailureKind::Tls => "tls",
            FailureKind::Timeout => "timeout",
            FailureKind::Io => "io",
            FailureKind::Closed => "closed",
            FailureKind::Protocol => "protocol",
            FailureKind::Overloaded => "overloaded",
            FailureKind::Status => "status",
            FailureKind::Rejected => "rejected",
        }
    }
}

/// One endpoint's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EndpointHealth {
    /// As configured (`address` or `uri`).
    pub endpoint: String,
    /// In rotation (not backing off).
    pub up: bool,
    /// Failures in a row since its last success.
    pub failures: u32,
    /// Milliseconds left before it is offered batches again, when it is backing off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub down_for_ms: Option<u64>,
    /// TCP feeds: whether a connection to it is open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connected: Option<bool>,
}

/// How one attempt on one endpoint ended.
pub(crate) enum Outcome {
    /// Delivered, `bytes` on the wire.
    Delivered { bytes: usize },
    /// Refused for good; the batch is not retried.
    Rejected { detail: String },
    /// Not delivered; try the next endpoint. `retry_after`: the consumer's own backoff.
    Failed { kind: FailureKind, detail: String, retry_after: Option<Duration> },
}

impl Outcome {
    pub(crate) fn failed(kind: FailureKind, detail: impl std::fmt::Display) -> Self {
        Outcome::Failed { kind, detail: detail.to_string(), retry_after: None }
    }
}

/// What both kinds share: the feed's name, endpoints, balancer and metrics.
pub(crate) struct Spread {
    pub feed: String,
    pub endpoints: Vec<String>,
    pub balancer: Balancer,
    pub metrics: FeedHandles,
}

impl Spread {
    /// Offers `chunk` to endpoints in balance order through `attempt` until one takes it.
    pub(crate) async fn deliver<'a, F, Fut>(
        &'a self,
        chunk: &'a [Bytes],
        reached: Instant,
        mut attempt: F,
    ) -> Result<(), SinkError>
    where
        F: FnMut(usize) -> Fut,
        Fut: Future<Output = Outcome> + 'a,
    {
        let mut tried = 0u64;
        let mut failures = Vec::new();
        while let Some(i) = self.balancer.pick(Instant::now(), tried) {
            tried |= 1 << i;
            match attempt(i).await {
                Outcome::Delivered { bytes } => {
                    if self.balancer.succeeded(i) > 0 {
                        tracing::info!(feed = %self.feed, endpoint = %self.endpoints[i], "feed endpoint delivers again");
                    }
                    self.metrics.delivered(i, chunk, bytes, reached.elapsed());
                    return Ok(());
                }
                Outcome::Rejected { detail } => {
                    self.balancer.succeeded(i);
                    self.metrics.rejected(i, chunk.len());
                    tracing::warn!(feed = %self.feed, endpoint = %self.endpoints[i], %detail, messages = chunk.len(), "feed consumer refused a batch; dropped");
                    return Ok(());
                }
                Outcome::Failed { kind, detail, retry_after } => {
                    let in_a_row = self.balancer.failed(i, Instant::now(), retry_after);
                    self.metrics.failed(i, chunk.len(), kind.as_str());
                    if in_a_row == 1 {
                        tracing::warn!(feed = %self.feed, endpoint = %self.endpoints[i], kind = kind.as_str(), %detail, "feed endpoint failed; backing off");
                    } else {
                        tracing::debug!(feed = %self.feed, endpoint = %self.endpoints[i], kind = kind.as_str(), %detail, in_a_row, "feed endpoint failed again");
                    }
                    failures.push(EndpointFailure {
                        endpoint: self.endpoints[i].clone(),
                        kind,
                        detail,
                    });
                }
            }
        }
        Err(SinkError {
            feed: self.feed.clone(),
            failures,
            retry_in: self.balancer.next_up(Instant::now()),
        })
    }

    pub(crate) fn health(&self, connected: impl Fn(usize) -> Option<bool>) -> Vec<EndpointHealth> {
        self.balancer
            .health(Instant::now())
            .into_iter()
            .enumerate()
            .map(|(i, h)| EndpointHealth {
                endpoint: self.endpoints[i].clone(),
                up: h.down_for.is_none(),
                failures: h.failures,
                down_for_ms: h.down_for.map(|d| d.as_millis() as u64),
                connected: connected(i),
            })
            .collect()
    }
}
