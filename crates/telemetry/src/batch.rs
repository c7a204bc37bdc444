//! The queue between the request path and the OTLP exporter. Ending a span appends it to a
//! bounded queue under a short lock and returns: a full queue drops the span and counts it, so
//! a slow or absent collector never holds up an answer. One task on the NF's runtime exports
//! what is queued, a batch at a time, every `interval` or as soon as a batch is full.
//!
//! The SDK's own `BatchSpanProcessor` is not used: it exports from a thread of its own through
//! `block_on`, which the hyper client (it needs a Tokio runtime) cannot run on, and it counts
//! the spans it drops only in a log line at shutdown, where an operator's alert cannot see them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry::Context;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tokio::sync::Notify;

/// What the queue counts, served on the NF's `/metrics`.
#[derive(Clone)]
pub(crate) struct Stats {
    pub exported: Counter,
    /// `otlp_spans_dropped_total{reason}`; the two counters below are its series, resolved
    /// once, so counting a drop hashes no labels.
    pub dropped: Family<ReasonLabels, Counter>,
    pub dropped_queue_full: Counter,
    pub dropped_export_failed: Counter,
    pub failed_exports: Counter,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ReasonLabels {
    reason: &'static str,
}

impl Default for Stats {
    fn default() -> Self {
        let dropped = Family::<ReasonLabels, Counter>::default();
        let series = |reason| dropped.get_or_create(&ReasonLabels { reason }).clone();
        Stats {
            exported: Counter::default(),
            dropped_queue_full: series("queue_full"),
            dropped_export_failed: series("export_failed"),
            dropped,
            failed_exports: Counter::default(),
        }
    }
}

pub(crate) struct Shared {
    queue: Mutex<Vec<SpanData>>,
    capacity: usize,
    batch_size: usize,
    wake: Notify,
    closed: AtomicBool,
    pub stats: Stats,
}

impl Shared {
    pub fn new(capacity: usize, batch_size: usize) -> Arc<Shared> {
        Arc::new(Shared {
            queue: Mutex::new(Vec::new()),
            capacity,
            batch_size,
            wake: Notify::new(),
            closed: AtomicBool::new(false),
            stats: Stats::default(),
        })
    }

    fn push(&self, span: SpanData) {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        if q.len() >= self.capacity {
            drop(q);
            self.stats.dropped_queue_full.inc();
            return;
        }
        q.push(span);
        let full_batch = q.len() == self.batch_size;
        drop(q);
        // Once per batch, not per span: the exporting task sleeps until then.
        if full_batch {
            self.wake.notify_one();
        }
    }

    /// Up to a batch of the oldest spans.
    fn take(&self) -> Vec<SpanData> {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        if q.len() <= self.batch_size {
            std::mem::take(&mut *q)
        } else {
            q.drain(..self.batch_size).collect()
        }
    }

    fn queued(&self) -> usize {
        self.queue.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Stops taking spans; the exporting task sends what is queued and ends.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.wake.notify_one();
    }
}

/// The span processor the tracer provider hands ended spans to.
#[derive(Clone)]
pub(crate) struct BoundedBatch {
    pub shared: Arc<Shared>,
}

impl std::fmt::Debug for BoundedBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundedBatch").field("capacity", &self.shared.capacity).finish()
    }
}

impl SpanProcessor for BoundedBatch {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() || self.shared.closed.load(Ordering::Relaxed) {
            return;
        }
        self.shared.push(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.shared.wake.notify_one();
        Ok(())
    }

    /// Called by the provider's shutdown (or drop): the exporting task flushes on its own,
    /// bounded by [`crate::Traces::shutdown`]; nothing here may block a runtime thread.
    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        self.shared.close();
        Ok(())
    }
}

/// Exports the queue until it is closed and empty.
pub(crate) async fn export_loop<E: SpanExporter>(
    shared: Arc<Shared>,
    exporter: E,
    interval: Duration,
    timeout: Duration,
) {
    let mut failing = false;
    loop {
        let closed = shared.closed.load(Ordering::Acquire);
        if !closed {
            tokio::select! {
                () = tokio::time::sleep(interval) => {}
                () = shared.wake.notified() => {}
            }
        }
        loop {
            let batch = shared.take();
            if batch.is_empty() {
                break;
            }
            let n = batch.len() as u64;
            let result = match tokio::time::timeout(timeout, exporter.export(batch)).await {
                Ok(r) => r.map_err(|e| e.to_string()),
                Err(_) => Err(format!("no answer within {timeout:?}")),
            };
            match result {
                Ok(()) => {
                    shared.stats.exported.inc_by(n);
                    if failing {
                        tracing::info!("telemetry: OTLP export works again");
                        failing = false;
                    }
                }
                Err(e) => {
                    shared.stats.failed_exports.inc();
                    shared.stats.dropped_export_failed.inc_by(n);
                    // Once per run of failures: a collector that is down would otherwise log
                    // every second.
                    if !failing {
                        tracing::warn!(error = %e, spans = n, "telemetry: OTLP export failed; spans dropped and counted until it works");
                        failing = true;
                    }
                }
            }
            // A partial batch waits for the next interval, unless the queue is closing.
            if !closed && shared.queued() < shared.batch_size {
                break;
            }
        }
        if closed {
            let _ = exporter.shutdown();
            return;
        }
    }
}
