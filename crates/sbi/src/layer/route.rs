//! Resolves each request to its service operation before any work is done for it, so that
//! unknown resources are answered at once and the layers below know which operation they serve.

use std::task::{Context, Poll};

use http::{header, HeaderValue, Request, StatusCode};
use tower::{Layer, Service};

use super::LayerFuture;
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
        RouteService {
            inner,
            router: self.router.clone(),
        }
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
    type Future = LayerFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        match self.router.resolve(req.method(), req.uri().path()) {
            Ok(matched) => {
                let op = Operation(matched.operation);
                req.extensions_mut().insert(matched);
                let fut = self.inner.call(req);
                Box::pin(async move {
                    let mut resp = fut.await?;
                    resp.extensions_mut().insert(op);
                    Ok(resp)
                })
            }
            Err(problem) => {
                let path = req.uri().path().to_owned();
                let mut resp = problem.with_instance(path.clone()).into_response();
                if resp.status() == StatusCode::METHOD_NOT_ALLOWED {
                    let allow: Vec<String> = self
                        .router
                        .allowed_methods(&path)
                        .iter()
                        .map(|m| m.to_string())
                        .collect();
                    if let Ok(v) = HeaderValue::from_str(&allow.join(", ")) {
                        resp.headers_mut().insert(header::ALLOW, v);
                    }
                }
                Box::pin(std::future::ready(Ok(resp)))
            }
        }
    }
}
