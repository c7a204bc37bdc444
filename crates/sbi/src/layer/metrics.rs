//! Per service operation: a request counter by status class and a latency histogram, the figures
//! an operator compares with the reference's per-procedure tables.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use http::Request;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use tower::{Layer, Service};

use super::LayerFuture;
use crate::observe::Observability;
use crate::router::{Operation, Response};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub operation: &'static str,
    pub status_class: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationLabels {
    pub operation: &'static str,
}

type LatencyFamily = Family<OperationLabels, Histogram, fn() -> Histogram>;

/// The metric families, registered once per SBI server.
pub struct SbiMetrics {
    requests: Family<RequestLabels, Counter>,
    latency: LatencyFamily,
}

fn latency_histogram() -> Histogram {
    // 50 µs .. ~1.6 s, doubling: covers an in-memory lookup and a slow store write alike.
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.000_05, 2.0, 16,
    ))
}

impl SbiMetrics {
    pub fn register(obs: &Observability) -> Arc<Self> {
        let m = Arc::new(SbiMetrics {
            requests: Family::default(),
            latency: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
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
        });
        m
    }
}

#[derive(Clone)]
pub struct MetricsLayer {
    metrics: Arc<SbiMetrics>,
}

impl MetricsLayer {
    pub fn new(metrics: Arc<SbiMetrics>) -> Self {
        MetricsLayer { metrics }
    }
}

impl<S> Layer<S> for MetricsLayer {
    type Service = MetricsService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        MetricsService {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

#[derive(Clone)]
pub struct MetricsService<S> {
    inner: S,
    metrics: Arc<SbiMetrics>,
}

fn status_class(status: u16) -> &'static str {
    match status {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        _ => "5xx",
    }
}

impl<S, B> Service<Request<B>> for MetricsService<S>
where
    S: Service<Request<B>, Response = Response, Error = std::convert::Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = LayerFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let start = Instant::now();
        let fut = self.inner.call(req);
        let metrics = self.metrics.clone();
        Box::pin(async move {
            let resp = fut.await?;
            let operation = resp
                .extensions()
                .get::<Operation>()
                .map_or("unrouted", |o| o.0);
            let class = status_class(resp.status().as_u16());
            metrics
                .requests
                .get_or_create(&RequestLabels {
                    operation,
                    status_class: class,
                })
                .inc();
            metrics
                .latency
                .get_or_create(&OperationLabels { operation })
                .observe(start.elapsed().as_secs_f64());
            Ok(resp)
        })
    }
}
