//! Traces (W3C Trace Context, OpenTelemetry; docs/telemetry.md). A request continues the trace
//! its `traceparent` names. With a tracer (`[telemetry.otlp]`), it is served in a server span
//! named after its 3GPP service operation (`Npcf_SMPolicyControl_Create`; the method alone when
//! no route matched), a child of the consumer's span, with the method, route, status and, on
//! an error, the ProblemDetails `cause`; the NF's type and instance are the span's resource.
//! The span is the handler's current context, so the SBI client makes its spans under it and
//! sends its `traceparent` on: the NFs called for one request report one trace.
//!
//! Without a tracer nothing is recorded, but a consumer's `traceparent` is still handed on as
//! it came (the NF is transparent: the producers' spans become children of the consumer's), at
//! the cost of parsing the header; a request without one costs a header lookup.

use std::borrow::Cow;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context as TaskContext, Poll};

use http::{Method, Request};
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer as _};
use opentelemetry::{Context, KeyValue};
use telemetry::Tracer;
use tower::{Layer, Service};

use super::Either;
use crate::router::{Operation, Response};

#[derive(Clone, Default)]
pub struct TraceLayer {
    tracer: Option<Tracer>,
}

impl TraceLayer {
    /// Spans made with `tracer`; `None` only passes trace context on.
    pub fn new(tracer: Option<Tracer>) -> Self {
        TraceLayer { tracer }
    }
}

impl<S> Layer<S> for TraceLayer {
    type Service = TraceService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        TraceService { inner, tracer: self.tracer.clone() }
    }
}

#[derive(Clone)]
pub struct TraceService<S> {
    inner: S,
    tracer: Option<Tracer>,
}

impl<S, B> Service<Request<B>> for TraceService<S>
where
    S: Service<Request<B>, Response = Response, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<S::Future, Traced<S::Future>>;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let parent = telemetry::propagation::extract(req.headers());
        let cx = match (&self.tracer, parent) {
            (None, None) => return Either::Left { inner: self.inner.call(req) },
            (None, Some(parent)) => parent,
            (Some(tracer), parent) => {
                let parent = parent.unwrap_or_default();
                let method = method_name(req.method());
                let mut attributes = vec![
                    KeyValue::new("http.request.method", method),
                    KeyValue::new("url.path", req.uri().path().to_owned()),
                ];
                if let Some(ua) = req.headers().get(http::header::USER_AGENT) {
                    if let Ok(ua) = ua.to_str() {
                        attributes.push(KeyValue::new("user_agent.original", ua.to_owned()));
                    }
                }
                let span = tracer
                    .span_builder(method)
                    .with_kind(SpanKind::Server)
                    .with_attributes(attributes)
                    .start_with_context(tracer, &parent);
                parent.with_span(span)
            }
        };
        let inner = {
            let _current = cx.clone().attach();
            self.inner.call(req)
        };
        Either::Right { inner: Traced { inner, cx } }
    }
}

pin_project_lite::pin_project! {
    /// The inner future, polled with the request's trace context current; its answer ends the
    /// server span.
    pub struct Traced<F> {
        #[pin]
        inner: F,
        cx: Context,
    }
}

impl<F> Future for Traced<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, task: &mut TaskContext<'_>) -> Poll<F::Output> {
        let this = self.project();
        let polled = {
            let _current = this.cx.clone().attach();
            this.inner.poll(task)
        };
        let resp = ready!(polled)?;
        end_server_span(this.cx, &resp);
        Poll::Ready(Ok(resp))
    }
}

fn end_server_span(cx: &Context, resp: &Response) {
    let span = cx.span();
    if !span.is_recording() {
        return;
    }
    if let Some(op) = resp.extensions().get::<Operation>() {
        span.update_name(op.name);
        span.set_attribute(KeyValue::new("http.route", op.route));
    }
    let status = resp.status().as_u16();
    span.set_attribute(KeyValue::new("http.response.status_code", i64::from(status)));
    if status >= 400 {
        let cause = problem_cause(resp.body().bytes());
        if let Some(cause) = &cause {
            span.set_attribute(KeyValue::new("3gpp.sbi.cause", cause.clone()));
        }
        // A server span is in error only for 5xx: a 4xx is the consumer's (semantic
        // conventions for HTTP).
        if status >= 500 {
            span.set_status(Status::error(cause.unwrap_or_default()));
        }
    }
    span.end();
}

/// The `cause` of a ProblemDetails body, when the body is one.
pub(crate) fn problem_cause(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Problem<'a> {
        #[serde(borrow)]
        cause: Option<Cow<'a, str>>,
    }
    serde_json::from_slice::<Problem>(body).ok()?.cause.map(Cow::into_owned)
}

/// The method as the semantic conventions name it, without allocating.
pub(crate) fn method_name(m: &Method) -> &'static str {
    match *m {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => "_OTHER",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cause_is_read_from_a_problem_body() {
        let body = br#"{"status":404,"cause":"RESOURCE_NOT_FOUND","detail":"x"}"#;
        assert_eq!(problem_cause(body).as_deref(), Some("RESOURCE_NOT_FOUND"));
        assert_eq!(problem_cause(br#"{"status":500}"#), None);
        assert_eq!(problem_cause(b"<soap:Fault/>"), None);
    }
}
