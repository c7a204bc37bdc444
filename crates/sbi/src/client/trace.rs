//! The client side of traces (docs/telemetry.md): each attempt of a request is a client span,
//! a child of the span the NF is serving (the current OpenTelemetry context), and its
//! `traceparent` goes with the request, so the producer's server span is its child. Without a
//! tracer, a consumer's trace context the server layer took is passed on as it came; with no
//! current context either, a request costs a thread-local read.

use http::{HeaderMap, Method, Uri};
use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt, Tracer as _};
use opentelemetry::{Context, KeyValue};
use telemetry::propagation::{inject, inject_span_context, TRACEPARENT};
use telemetry::Tracer;

use super::{ClientError, SbiResponse};
use crate::layer::trace::{method_name, problem_cause};

/// A client span in progress. Boxed: the SDK span is a few hundred bytes, and every request's
/// future is moved whole into its caller's.
pub(super) type ClientSpan = Box<<Tracer as opentelemetry::trace::Tracer>::Span>;

/// Starts the attempt's span and puts its context in `headers`. A `traceparent` the caller set
/// itself is left alone (and no span made).
pub(super) fn start(
    tracer: Option<&Tracer>,
    method: &Method,
    uri: &Uri,
    headers: &mut HeaderMap,
) -> Option<ClientSpan> {
    if headers.contains_key(TRACEPARENT) {
        return None;
    }
    let Some(tracer) = tracer else {
        Context::map_current(|cx| {
            if cx.has_active_span() {
                inject(cx, headers);
            }
        });
        return None;
    };
    let method = method_name(method);
    let path = uri.path();
    // `POST nudr-dr`: the API the request is for (its first path segment), not the path, whose
    // ids would make every span name different.
    let api = path.trim_start_matches('/').split('/').next().unwrap_or("");
    let mut attributes = vec![
        KeyValue::new("http.request.method", method),
        KeyValue::new("url.full", uri.to_string()),
    ];
    if let Some(host) = uri.host() {
        attributes.push(KeyValue::new("server.address", host.to_owned()));
    }
    if let Some(port) = uri.port_u16() {
        attributes.push(KeyValue::new("server.port", i64::from(port)));
    }
    let span = Context::map_current(|parent| {
        tracer
            .span_builder(format!("{method} {api}"))
            .with_kind(SpanKind::Client)
            .with_attributes(attributes)
            .start_with_context(tracer, parent)
    });
    inject_span_context(span.span_context(), headers);
    Some(Box::new(span))
}

/// Ends the span with the attempt's outcome.
pub(super) fn end(mut span: ClientSpan, result: &Result<SbiResponse, ClientError>) {
    if span.is_recording() {
        match result {
            Ok(rsp) => {
                let status = rsp.status().as_u16();
                span.set_attribute(KeyValue::new("http.response.status_code", i64::from(status)));
                if status >= 400 {
                    let cause = problem_cause(rsp.body());
                    if let Some(cause) = &cause {
                        span.set_attribute(KeyValue::new("3gpp.sbi.cause", cause.clone()));
                    }
                    span.set_status(Status::error(cause.unwrap_or_default()));
                }
            }
            Err(e) => {
                let kind = match e {
                    ClientError::Connect { .. } => "connect",
                    ClientError::Timeout { .. } => "timeout",
                    ClientError::Http { .. } => "http",
                    _ => "request",
                };
                span.set_attribute(KeyValue::new("error.type", kind));
                span.set_status(Status::error(e.to_string()));
            }
        }
    }
    span.end();
}
