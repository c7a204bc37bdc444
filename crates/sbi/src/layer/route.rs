//! Resolves each request to its service operation before any work is done for it, so that
//! unknown resources are answered at once and the layers below know which operation they serve.

use std::convert::Infallible;
use std::future::Ready;
use std::task::{Context, Poll};

use http::{header, HeaderValue, Request, StatusCode};
use tower::{Layer, Service};

use super::{AfterResponse, Either, OnResponse};
use crate::router::{Operation, Response, Router};

#[derive(Clone)]
pub struct RouteLayer {
    router: Router,
}

impl RouteLayer {
    pub fn new(router: Router) -> Self {
        RouteLayer { router }
    }
}

impl<S> Layer<S> for RouteLayer {
    type Service = RouteService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        RouteService { inner, router: self.router.clone() }
    }
}

#[derive(Clone)]
pub struct RouteService<S> {
    inner: S,
    router: Router,
}

impl<S, B> Service<Request<B>> for RouteService<S>
where
    S: Service<Request<B>, Response = Response, Error = std::convert::Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = Either<Ready<Result<Response, Infallible>>, AfterResponse<S::Future, Operation>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        match self.router.resolve(req.method(), req.uri().path()) {
            Ok(matched) => {
                let operation = Operation {
                    name: matched.operation,
                    route: matched.template,
                    index: matched.index,
                };
                req.extensions_mut().insert(matched);
                Either::Right { inner: AfterResponse::new(self.inner.call(req), operation) }
            }
            Err(problem) => {
                let path = req.uri().path().to_owned();
                let mut resp = problem.with_instance(path.clone()).into_response();
                if resp.status() == StatusCode::METHOD_NOT_ALLOWED {
                    let allow: Vec<String> =
                        self.router.allowed_methods(&path).iter().map(|m| m.to_string()).collect();
                    if let Ok(v) = HeaderValue::from_str(&allow.join(", ")) {
                        resp.headers_mut().insert(header::ALLOW, v);
                    }
                }
                Either::Left { inner: std::future::ready(Ok(resp)) }
            }
        }
    }
}

/// Tags the answer with the service operation, for the metrics layer above.
impl OnResponse for Operation {
    fn on_response(self, resp: &mut Response) {
        resp.extensions_mut().insert(self);
    }
}
