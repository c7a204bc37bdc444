//! Content checks that need no knowledge of the operation: the answer can be JSON (406), the body
//! is framed (411) and within the size limit (413). The body is then read whole, so handlers get
//! `Bytes` and never stream.

use std::convert::Infallible;
use std::future::Ready;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::Request;
use tower::{Layer, Service};

use super::{Either, LayerFuture};
use crate::body;
use crate::router::{Matched, Response};
use crate::ProblemDetails;

#[derive(Clone)]
pub struct ContentLayer {
    max_body_bytes: usize,
}

impl ContentLayer {
    pub fn new(max_body_bytes: usize) -> Self {
        ContentLayer { max_body_bytes }
    }
}

impl<S> Layer<S> for ContentLayer {
    type Service = ContentService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        ContentService { inner, max_body_bytes: self.max_body_bytes }
    }
}

#[derive(Clone)]
pub struct ContentService<S> {
    inner: S,
    max_body_bytes: usize,
}

impl<S, B> Service<Request<B>> for ContentService<S>
where
    S: Service<Request<Bytes>, Response = Response, Error = std::convert::Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = Either<Ready<Result<Response, Infallible>>, Either<S::Future, LayerFuture>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let (head, b) = req.into_parts();
        // A route with its own media type negotiates it itself and renders our refusals.
        let own = head.extensions.get::<Matched>().and_then(|m| m.problems);
        let answer = move |p: ProblemDetails| match own {
            Some(render) => render(p),
            None => p.into_response(),
        };
        let accepted = if own.is_some() { Ok(()) } else { body::check_accept(&head.headers) };
        let checked = accepted.and_then(|()| {
            body::check_framing(&head.method, head.version, &head.headers, self.max_body_bytes)
        });
        if let Err(p) = checked {
            let resp = answer(p.with_instance(head.uri.path().to_owned()));
            return Either::Left { inner: std::future::ready(Ok(resp)) };
        }
        if b.is_end_stream() {
            // GET, DELETE and most SBI reads: nothing to read, no need to leave this task.
            let fut = self.inner.call(Request::from_parts(head, Bytes::new()));
            return Either::Right { inner: Either::Left { inner: fut } };
        }
        // The inner service was made ready for this call; take it and leave a clone behind
        // (tower's rule for services called from a spawned future).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let limit = self.max_body_bytes;
        let fut: LayerFuture = Box::pin(async move {
            let collected = body::collect(b, limit).await;
            // The body is in (or refused): its connection may be held again.
            let mut head = head;
            drop(head.extensions.remove::<crate::backpressure::BodyPending>());
            match collected {
                Ok(bytes) => inner.call(Request::from_parts(head, bytes)).await,
                Err(p) => Ok(answer(p.with_instance(head.uri.path().to_owned()))),
            }
        });
        Either::Right { inner: Either::Right { inner: fut } }
    }
}
