//! Request id and tracing span: each request is logged under one span carrying its id, method,
//! path and (later) status, and the id is echoed in `x-request-id` for correlation across NFs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{HeaderValue, Request};
use tower::{Layer, Service};
use tracing::Instrument;

use super::LayerFuture;
use crate::headers::REQUEST_ID;
use crate::router::Response;

/// The id of the request being served, in the request's extensions.
#[derive(Clone, Debug)]
pub struct RequestId(pub HeaderValue);

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
        RequestIdLayer {
            ids: Arc::new(IdSource {
                prefix,
                next: AtomicU64::new(1),
            }),
        }
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
        RequestIdService {
            inner,
            ids: self.ids.clone(),
        }
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
    type Future = LayerFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        let id = match req.headers().get(&REQUEST_ID) {
            Some(v) if !v.is_empty() && v.len() <= 128 => v.clone(),
            _ => {
                let n = self.ids.next.fetch_add(1, Ordering::Relaxed);
                let s = format!("{:08x}-{n:x}", self.ids.prefix);
                HeaderValue::from_str(&s).unwrap_or_else(|_| HeaderValue::from_static("-"))
            }
        };
        let span = tracing::info_span!(
            "sbi",
            method = %req.method(),
            path = %req.uri().path(),
            request_id = id.to_str().unwrap_or("-"),
            status = tracing::field::Empty,
        );
        req.extensions_mut().insert(RequestId(id.clone()));
        let fut = {
            let _enter = span.enter();
            self.inner.call(req)
        };
        let span2 = span.clone();
        Box::pin(
            async move {
                let mut resp = fut.await?;
                span2.record("status", resp.status().as_u16());
                resp.headers_mut().insert(&REQUEST_ID, id);
                Ok(resp)
            }
            .instrument(span),
        )
    }
}
