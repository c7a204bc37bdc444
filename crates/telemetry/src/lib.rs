//! Traces of the SBI requests an NF serves and sends (issue #27): W3C Trace Context on the
//! wire ([`propagation`]) and, when `[telemetry.otlp]` is configured ([`config`]), spans
//! exported by OTLP/HTTP to a collector ([`Traces`]).
//!
//! The spans themselves are made by the SBI stack (`sbi::layer::trace` for the requests an NF
//! serves, the SBI client for those it sends); this crate gives it a [`Tracer`] per NF, so
//! that in `fivecore up` each NF reports under its own `service.name` (`fivecore-pcf`, ...),
//! and owns the path from an ended span to the collector: a bounded queue that drops and counts
//! rather than wait ([`batch`]), and one exporting task on the NF's runtime.

mod batch;
pub mod config;
pub mod propagation;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider, SpanExporter as _};
use opentelemetry_sdk::Resource;
use prometheus_client::registry::Registry;

pub use config::{OtlpConfig, TelemetryConfig};
pub use opentelemetry::Context;

/// What makes an NF's spans: the SDK tracer of its provider (a cheap clone).
pub type Tracer = opentelemetry_sdk::trace::SdkTracer;

/// Why the trace export could not start.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("[telemetry] {0}: {1}")]
    Config(&'static str, String),
    #[error("[telemetry.otlp]: {0}")]
    Exporter(String),
}

/// An NF's span export: its tracer provider, the queue and the task that empties it.
pub struct Traces {
    provider: SdkTracerProvider,
    tracer: Tracer,
    shared: Arc<batch::Shared>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Traces {
    /// Starts exporting the spans of the NF `nf_type` (`"PCF"`), instance `instance_id`, when
    /// `config` has `[telemetry.otlp]`; `None` without it (nothing is recorded then). Must be
    /// called on the Tokio runtime the NF serves on: the exporting task runs there.
    pub fn start(
        config: &TelemetryConfig,
        nf_type: &str,
        instance_id: &str,
    ) -> Result<Option<Traces>, TelemetryError> {
        config.validate().map_err(|(name, why)| TelemetryError::Config(name, why))?;
        let Some(otlp) = &config.otlp else { return Ok(None) };
        let timeout = Duration::from_millis(otlp.timeout_ms);
        let headers: HashMap<String, String> =
            otlp.headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(otlp.traces_url())
            .with_timeout(timeout)
            .with_headers(headers)
            // One try per batch: the queue behind it is the buffer, and retries would hold
            // up the batches after it while a collector is down.
            .with_retry_policy(opentelemetry_otlp::RetryPolicy::disabled())
            .build()
            .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
        let resource = Resource::builder()
            .with_service_name(service_name(nf_type))
            .with_attributes([
                KeyValue::new("service.instance.id", instance_id.to_owned()),
                KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
                KeyValue::new("3gpp.nf.type", nf_type.to_owned()),
            ])
            .build();
        exporter.set_resource(&resource);
        let shared = batch::Shared::new(otlp.queue_size, otlp.batch_size);
        let provider = SdkTracerProvider::builder()
            .with_span_processor(batch::BoundedBatch { shared: shared.clone() })
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                config.sample_ratio,
            ))))
            .with_resource(resource)
            .build();
        let scope = InstrumentationScope::builder("fivecore-sbi")
            .with_version(env!("CARGO_PKG_VERSION"))
            .build();
        let tracer = provider.tracer_with_scope(scope);
        let task = tokio::spawn(batch::export_loop(
            shared.clone(),
            exporter,
            Duration::from_millis(otlp.interval_ms),
            timeout,
        ));
        tracing::info!(endpoint = %otlp.traces_url(), service = %service_name(nf_type), "telemetry: exporting spans by OTLP/HTTP");
        Ok(Some(Traces { provider, tracer, shared, task: Mutex::new(Some(task)) }))
    }

    /// The tracer the NF's SBI server and client make their spans with.
    pub fn tracer(&self) -> Tracer {
        self.tracer.clone()
    }

    /// `otlp_spans_exported_total`, `otlp_spans_dropped_total{reason}` (`queue_full`:
    /// ended while the queue was full; `export_failed`: in a batch the collector did not take)
    /// and `otlp_export_failures_total`.
    pub fn register_metrics(&self, registry: &mut Registry) {
        let s = &self.shared.stats;
        registry.register(
            "otlp_spans_exported",
            "Spans the OTLP collector accepted",
            s.exported.clone(),
        );
        registry.register("otlp_spans_dropped", "Spans not exported, by reason", s.dropped.clone());
        registry.register(
            "otlp_export_failures",
            "OTLP export requests that failed (no answer in time, refused, not 2xx)",
            s.failed_exports.clone(),
        );
    }

    /// Ends span recording and exports what is queued, waiting at most `within`.
    pub async fn shutdown(&self, within: Duration) {
        // The provider's shutdown closes the queue (BoundedBatch::shutdown_with_timeout).
        let _ = self.provider.shutdown();
        self.shared.close();
        let task = self.task.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(mut task) = task {
            if tokio::time::timeout(within, &mut task).await.is_err() {
                task.abort();
                tracing::warn!("telemetry: spans still queued at stop were not exported in time");
            }
        }
    }
}

/// `service.name` of an NF's spans: `fivecore-pcf`.
pub fn service_name(nf_type: &str) -> String {
    format!("fivecore-{}", nf_type.to_ascii_lowercase())
}
