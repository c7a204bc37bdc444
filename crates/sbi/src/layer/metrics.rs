//! Per service operation: a request counter by status class and a latency histogram, the figures
//! an operator compares with the reference's per-procedure tables.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::Request;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use tower::{Layer, Service};

use super::{AfterResponse, OnResponse};
use crate::observe::Observability;
use crate::router::{Operation, Response, UpstreamWait};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub operation: &'static str,
    pub status_class: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationLabels {
    pub operation: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProblemLabels {
    pub operation: &'static str,
    pub cause: std::borrow::Cow<'static, str>,
}

type LatencyFamily = Family<OperationLabels, Histogram, fn() -> Histogram>;

/// The metric families, registered once per SBI server.
pub struct SbiMetrics {
    requests: Family<RequestLabels, Counter>,
    latency: LatencyFamily,
    own_latency: LatencyFamily,
    problems: Family<ProblemLabels, Counter>,
}

/// Upper bounds, seconds: 1-2-5 steps from 50 µs to 5 s cover an in-memory lookup and a slow
/// store write alike, and put "under 1 ms" or "under 5 ms" on a bucket boundary. The Diameter
/// node's histograms use the same steps, so SBI and Diameter rows of a report line up.
pub const LATENCY_BUCKETS: [f64; 16] = [
    0.000_05, 0.000_1, 0.000_2, 0.000_5, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0,
    2.0, 5.0,
];

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

impl SbiMetrics {
    pub fn register(obs: &Observability) -> Arc<Self> {
        let m = Arc::new(SbiMetrics {
            requests: Family::default(),
            latency: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
            own_latency: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
            problems: Family::default(),
        });
        obs.with_registry(|r| {
            r.register(
                "sbi_requests",
                "SBI requests served, by service operation and status class",
                m.requests.clone(),
            );
            r.register(
                "sbi_request_duration_seconds",
                "Time from request head to answer, by service operation",
                m.latency.clone(),
            );
            r.register(
                "sbi_request_own_duration_seconds",
                "Time from request head to answer less the time spent waiting on other NFs \
                 (an SLF query, a forwarded discovery), by service operation",
                m.own_latency.clone(),
            );
            r.register(
                "sbi_problems",
                "SBI answers carrying a ProblemDetails, by service operation and cause",
                m.problems.clone(),
            );
        });
        m
    }
}

/// The metric handles of one service operation, resolved once at start so that counting a
/// request costs two atomic additions and no label hashing.
struct OperationMetrics {
    by_class: [Counter; 5],
    latency: Histogram,
    own_latency: Histogram,
}

const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// Per-operation handles, indexed like [`crate::router::Router::operations`], plus one for
/// requests that matched no route.
pub struct OperationTable {
    ops: Vec<OperationMetrics>,
    names: Vec<&'static str>,
    /// Errors are counted by cause through the family: only an error answer hashes a label set.
    problems: Family<ProblemLabels, Counter>,
}

impl OperationTable {
    fn new(metrics: &SbiMetrics, operations: &[&'static str]) -> Self {
        let ops = operations
            .iter()
            .copied()
            .chain(std::iter::once("unrouted"))
            .map(|operation| OperationMetrics {
                by_class: CLASSES.map(|status_class| {
                    metrics
                        .requests
                        .get_or_create(&RequestLabels { operation, status_class })
                        .clone()
                }),
                latency: metrics.latency.get_or_create(&OperationLabels { operation }).clone(),
                own_latency: metrics
                    .own_latency
                    .get_or_create(&OperationLabels { operation })
                    .clone(),
            })
            .collect();
        let names = operations.iter().copied().chain(std::iter::once("unrouted")).collect();
        OperationTable { ops, names, problems: metrics.problems.clone() }
    }

    fn get(&self, index: usize) -> &OperationMetrics {
        // The last entry is "unrouted"; an out-of-range index counts there too.
        &self.ops[index.min(self.ops.len() - 1)]
    }
}

#[derive(Clone)]
pub struct MetricsLayer {
    metrics: Arc<OperationTable>,
}

impl MetricsLayer {
    pub fn new(metrics: &SbiMetrics, operations: &[&'static str]) -> Self {
        MetricsLayer { metrics: Arc::new(OperationTable::new(metrics, operations)) }
    }
}

impl<S> Layer<S> for MetricsLayer {
    type Service = MetricsService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        MetricsService { inner, metrics: self.metrics.clone() }
    }
}

#[derive(Clone)]
pub struct MetricsService<S> {
    inner: S,
    metrics: Arc<OperationTable>,
}

fn status_class(status: u16) -> usize {
    (status / 100).clamp(1, 5) as usize - 1
}

impl<S, B> Service<Request<B>> for MetricsService<S>
where
    S: Service<Request<B>, Response = Response, Error = std::convert::Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = AfterResponse<S::Future, Measure>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let measure = Measure { start: Instant::now(), metrics: self.metrics.clone() };
        AfterResponse::new(self.inner.call(req), measure)
    }
}

/// Counts the answer under its operation and status class, and times it twice: as answered,
/// and less the time the handler waited on other NFs ([`UpstreamWait`]).
pub struct Measure {
    start: Instant,
    metrics: Arc<OperationTable>,
}

impl OnResponse for Measure {
    fn on_response(self, resp: &mut Response) {
        let index = resp.extensions().get::<Operation>().map_or(usize::MAX, |o| o.index);
        let m = self.metrics.get(index);
        m.by_class[status_class(resp.status().as_u16())].inc();
        if let Some(cause) = resp.extensions().get::<crate::problem::ProblemCause>() {
            let operation = self.metrics.names[index.min(self.metrics.names.len() - 1)];
            self.metrics
                .problems
                .get_or_create(&ProblemLabels { operation, cause: cause.0.clone() })
                .inc();
        }
        let elapsed = self.start.elapsed();
        m.latency.observe(elapsed.as_secs_f64());
        let waited = resp.extensions().get::<UpstreamWait>().map_or(Duration::ZERO, |w| w.0);
        m.own_latency.observe(elapsed.saturating_sub(waited).as_secs_f64());
    }
}
