//! The message-copy tap: a hook through which an NF hands a copy of each request and its answer
//! to the Data Director. Until the Data Director lands no tap is installed and this layer passes
//! requests straight through without copying anything.
//!
//! A [`MessageTap`] must not block or await: it is called on the request path, so an
//! implementation queues the copy (a bounded channel, dropping and counting on overflow) and
//! returns.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::SystemTime;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode, Uri};
use tower::{Layer, Service};

use super::{Either, LayerFuture};
use crate::router::Response;

/// One copied exchange.
#[derive(Debug, Clone)]
pub struct MessageCopy {
    pub received_at: SystemTime,
    pub method: Method,
    pub uri: Uri,
    pub request_headers: HeaderMap,
    pub request_body: Bytes,
    pub status: StatusCode,
    pub response_headers: HeaderMap,
    pub response_body: Bytes,
}

pub trait MessageTap: Send + Sync + 'static {
    fn copy(&self, message: MessageCopy);
}

#[derive(Clone, Default)]
pub struct TapLayer {
    tap: Option<Arc<dyn MessageTap>>,
}

impl TapLayer {
    pub fn new(tap: Option<Arc<dyn MessageTap>>) -> Self {
        TapLayer { tap }
    }
}

impl<S> Layer<S> for TapLayer {
    type Service = TapService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        TapService { inner, tap: self.tap.clone() }
    }
}

#[derive(Clone)]
pub struct TapService<S> {
    inner: S,
    tap: Option<Arc<dyn MessageTap>>,
}

impl<S> Service<Request<Bytes>> for TapService<S>
where
    S: Service<Request<Bytes>, Response = Response, Error = std::convert::Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = Either<S::Future, LayerFuture>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Bytes>) -> Self::Future {
        let Some(tap) = self.tap.clone() else {
            return Either::Left { inner: self.inner.call(req) };
        };
        let received_at = SystemTime::now();
        let method = req.method().clone();
        let uri = req.uri().clone();
        let request_headers = req.headers().clone();
        let request_body = req.body().clone();
        let fut = self.inner.call(req);
        Either::Right {
            inner: Box::pin(async move {
                let resp = fut.await?;
                tap.copy(MessageCopy {
                    received_at,
                    method,
                    uri,
                    request_headers,
                    request_body,
                    status: resp.status(),
                    response_headers: resp.headers().clone(),
                    response_body: Bytes::copy_from_slice(resp.body().bytes()),
                });
                Ok(resp)
            }),
        }
    }
}
