//! Request id and tracing span: each request runs in one DEBUG span carrying its id, method,
//! path and status. A consumer's `x-request-id` is used and echoed; without one, the NF makes an
//! id (`<per-process prefix>-<counter>`) for its own logs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{HeaderValue, Request};
use tower::{Layer, Service};
use tracing::Instrument;

use super::{AfterResponse, OnResponse};
use crate::headers::REQUEST_ID;
use crate::router::Response;

#[derive(Clone)]
pub struct RequestIdLayer {
    ids: Arc<IdSource>,
}

struct IdSource {
    prefix: u32,
    next: AtomicU64,
}

impl RequestIdLayer {
    pub fn new() -> Self {
        // A random per-process prefix keeps ids unique across NF instances without a UUID per
        // request.
        let prefix = uuid::Uuid::new_v4().as_u128() as u32;
        RequestIdLayer { ids: Arc::new(IdSource { prefix, next: AtomicU64::new(1) }) }
    }
}

impl Default for RequestIdLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl<S> Layer<S> for RequestIdLayer {
    type Service = RequestIdService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        RequestIdService { inner, ids: self.ids.clone() }
    }
}

#[derive(Clone)]
pub struct RequestIdService<S> {
    inner: S,
    ids: Arc<IdSource>,
}

impl<S, B> Service<Request<B>> for RequestIdService<S>
where
    S: Service<Request<B>, Response = Response, Error = std::convert::Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = tracing::instrument::Instrumented<AfterResponse<S::Future, EchoId>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        // A consumer's id is logged and echoed; otherwise the span carries our own id. Echoing a
        // generated id on every answer would cost about 5% of a trivial request's CPU (a
        // never-indexed, Huffman-coded HPACK literal), for an id the consumer never asked for.
        let echoed = match req.headers().get(&REQUEST_ID) {
            Some(v) if !v.is_empty() && v.len() <= 128 => {
                let mut v = v.clone();
                v.set_sensitive(true);
                Some(v)
            }
            _ => None,
        };
        let span = match &echoed {
            Some(id) => request_span(&req, &id.to_str().unwrap_or("-")),
            None => {
                let n = self.ids.next.fetch_add(1, Ordering::Relaxed);
                request_span(&req, &format_args!("{:08x}-{n:x}", self.ids.prefix))
            }
        };
        let inner = {
            let _enter = span.enter();
            self.inner.call(req)
        };
        AfterResponse::new(inner, EchoId { id: echoed, span: span.clone() }).instrument(span)
    }
}

// DEBUG, not INFO: an enabled span costs every request a slab slot and its fields formatted to
// text (about 12 % of an NRF UDM discovery's CPU under the default `info` filter: 20.4 against
// 18.0 µs, docs/BENCHMARKS.md) though almost no request logs anything. `RUST_LOG=info,sbi::layer=debug` tags each log line with its request.
fn request_span<B>(req: &Request<B>, id: &dyn std::fmt::Display) -> tracing::Span {
    tracing::debug_span!(
        "sbi",
        method = %req.method(),
        path = %req.uri().path(),
        request_id = %id,
        status = tracing::field::Empty,
    )
}

/// Echoes the request id and records the status on the span.
pub struct EchoId {
    id: Option<HeaderValue>,
    span: tracing::Span,
}

impl OnResponse for EchoId {
    fn on_response(self, resp: &mut Response) {
        self.span.record("status", resp.status().as_u16());
        if let Some(id) = self.id {
            resp.headers_mut().insert(&REQUEST_ID, id);
        }
    }
}
