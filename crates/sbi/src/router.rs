//! Routing by method and path template (`/nbsf-management/v1/pcfBindings/{bindingId}`), with the
//! answers TS 29.500 §5.2.7 gives when nothing matches: 400 INVALID_API for an API name this port
//! serves under another version, 404 for an unknown resource, 405 (with `Allow`) for a known
//! resource and an unsupported method.

use std::convert::Infallible;
use std::future::{Future, Ready};
use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use futures_util::FutureExt;

use bytes::Bytes;
use http::{header, HeaderValue, Method, StatusCode};
use serde::de::DeserializeOwned;
use smallvec::SmallVec;

use crate::body::{self, Body};
use crate::layer::Either;
use crate::problem::{cause, ProblemDetails};
use crate::query::Query;

pub type Response = http::Response<Body>;
pub type HandlerResult = Result<Response, ProblemDetails>;
type BoxFuture = Pin<Box<dyn Future<Output = HandlerResult> + Send + 'static>>;
type ErasedHandler = dyn Fn(SbiRequest) -> BoxFuture + Send + Sync;

/// What a handler receives: the request head, its path parameters and the whole body.
pub struct SbiRequest {
    pub head: http::request::Parts,
    pub body: Bytes,
    params: Vec<(&'static str, String)>,
}

impl SbiRequest {
    pub fn new(
        head: http::request::Parts,
        body: Bytes,
        params: Vec<(&'static str, String)>,
    ) -> Self {
        SbiRequest { head, body, params }
    }

    /// A path parameter of the matched template; percent-decoded.
    pub fn param(&self, name: &str) -> &str {
        self.params.iter().find(|(n, _)| *n == name).map_or("", |(_, v)| v.as_str())
    }

    pub fn headers(&self) -> &http::HeaderMap {
        &self.head.headers
    }

    pub fn method(&self) -> &Method {
        &self.head.method
    }

    pub fn query(&self) -> Query {
        Query::parse(self.head.uri.query())
    }

    /// The authority the consumer addressed: `:authority` (HTTP/2) or `Host` (HTTP/1.1).
    pub fn authority(&self) -> Option<&str> {
        self.head
            .uri
            .authority()
            .map(|a| a.as_str())
            .or_else(|| self.headers().get(http::header::HOST).and_then(|h| h.to_str().ok()))
    }

    /// The body as JSON of type `T`: 415 unless sent as application/json, 400 with
    /// `invalidParams` when it does not decode.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, ProblemDetails> {
        body::require_media_type(&self.head.headers, &[body::JSON])?;
        body::decode_json(&self.body)
    }
}

/// Time a handler spent waiting on other NFs (an SLF query, a discovery forwarded to a peer),
/// set on its response so that the metrics layer can tell the NF's own latency from its
/// dependencies': the reference times an NRF's discovery with its SLF simulator's 150 ms in it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UpstreamWait(pub std::time::Duration);

impl SbiRequest {
    /// `result` marked with the time spent waiting on other NFs. A problem becomes its response
    /// here (with this request's path as `instance`, as dispatch would give it) to carry the mark.
    pub fn with_upstream_wait(
        &self,
        result: HandlerResult,
        waited: std::time::Duration,
    ) -> HandlerResult {
        if waited.is_zero() {
            return result;
        }
        let mut resp = match result {
            Ok(resp) => resp,
            Err(p) if p.instance.is_some() => p.into_response(),
            Err(p) => p.with_instance(self.head.uri.path()).into_response(),
        };
        resp.extensions_mut().insert(UpstreamWait(waited));
        Ok(resp)
    }
}

/// The response builders handlers use.
pub fn json_response<T: serde::Serialize>(status: StatusCode, value: &T) -> HandlerResult {
    let bytes = serde_json::to_vec(value)
        .map_err(|e| ProblemDetails::internal(format!("response encoding failed: {e}")))?;
    let mut resp = http::Response::new(Body::from(bytes));
    *resp.status_mut() = status;
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(body::JSON));
    Ok(resp)
}

pub fn empty_response(status: StatusCode) -> Response {
    let mut resp = http::Response::new(Body::empty());
    *resp.status_mut() = status;
    resp
}

/// Path segments split without allocating; a longer path spills to the heap.
const STACK_SEGMENTS: usize = 8;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(String),
    Param(&'static str),
}

pub(crate) struct Route {
    method: Method,
    segments: Vec<Segment>,
    /// The 3GPP service operation, e.g. `Nbsf_Management_Register`, for metrics and logs.
    pub(crate) operation: &'static str,
    /// The path template, `/nbsf-management/v1/pcfBindings/{bindingId}` (a span's `http.route`).
    pub(crate) template: &'static str,
    pub(crate) handler: Arc<ErasedHandler>,
    pub(crate) problems: Option<ProblemRenderer>,
}

/// Renders a problem answered before the handler ran (411, 413, 503) in a route's own media
/// type, for routes that do not speak JSON (SOAP provisioning answers SOAP faults).
pub type ProblemRenderer = fn(ProblemDetails) -> Response;

/// The route a request resolved to, carried in the request's extensions down the layer stack.
#[derive(Clone)]
pub struct Matched {
    pub operation: &'static str,
    pub template: &'static str,
    pub index: usize,
    pub(crate) handler: Arc<ErasedHandler>,
    pub(crate) params: Vec<(&'static str, String)>,
    /// Set for a route answering in its own media type ([`RouterBuilder::own_media`]).
    pub problems: Option<ProblemRenderer>,
}

/// The service operation that served a response, set on it for the metrics layer: its name and
/// its index in [`Router::operations`] (one past the last for requests that matched no route).
#[derive(Clone, Copy, Debug)]
pub struct Operation {
    pub name: &'static str,
    /// The route's path template.
    pub route: &'static str,
    pub index: usize,
}

#[derive(Default, Clone)]
pub struct Router {
    routes: Arc<Vec<Route>>,
}

pub struct RouterBuilder<S> {
    state: Arc<S>,
    routes: Vec<Route>,
}

impl Router {
    pub fn builder<S: Send + Sync + 'static>(state: Arc<S>) -> RouterBuilder<S> {
        RouterBuilder { state, routes: Vec::new() }
    }

    /// Resolves a request to its route or to the problem answering it.
    pub fn resolve(&self, method: &Method, path: &str) -> Result<Matched, ProblemDetails> {
        // Every request is resolved: split on the stack (SBI paths have a handful of segments).
        let segs: SmallVec<[&str; STACK_SEGMENTS]> =
            path.trim_start_matches('/').split('/').collect();
        let mut allowed: Vec<&Method> = Vec::new();
        for (index, route) in self.routes.iter().enumerate() {
            if let Some(params) = match_segments(&route.segments, &segs) {
                if route.method == *method {
                    return Ok(Matched {
                        operation: route.operation,
                        template: route.template,
                        index,
                        handler: route.handler.clone(),
                        params,
                        problems: route.problems,
                    });
                }
                allowed.push(&route.method);
            }
        }
        if !allowed.is_empty() {
            let list: Vec<&str> = allowed.iter().map(|m| m.as_str()).collect();
            let mut p = ProblemDetails::new(
                StatusCode::METHOD_NOT_ALLOWED,
                cause::METHOD_NOT_ALLOWED,
                format!("{method} is not allowed on {path}; allowed: {}", list.join(", ")),
            );
            p.instance = Some(path.to_owned());
            return Err(p);
        }
        let api = segs.first().copied().unwrap_or("");
        let known_api = self
            .routes
            .iter()
            .any(|r| matches!(r.segments.first(), Some(Segment::Literal(l)) if l == api));
        let version_ok = self.routes.iter().any(|r| {
            matches!((r.segments.first(), r.segments.get(1), segs.get(1)),
                (Some(Segment::Literal(a)), Some(Segment::Literal(v)), Some(sv)) if a == api && v == sv)
        });
        if known_api && !version_ok {
            return Err(ProblemDetails::bad_request(
                cause::INVALID_API,
                format!("API version {} of {api} is not served here", segs.get(1).unwrap_or(&"")),
            ));
        }
        Err(ProblemDetails::new(
            StatusCode::NOT_FOUND,
            cause::RESOURCE_URI_STRUCTURE_NOT_FOUND,
            format!("no resource at {path}"),
        ))
    }

    /// The service operation of each route, in route order.
    pub fn operations(&self) -> Vec<&'static str> {
        self.routes.iter().map(|r| r.operation).collect()
    }

    /// The methods a path supports, for the `Allow` header of a 405.
    pub fn allowed_methods(&self, path: &str) -> Vec<Method> {
        let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        self.routes
            .iter()
            .filter(|r| match_segments(&r.segments, &segs).is_some())
            .map(|r| r.method.clone())
            .collect()
    }
}

impl<S: Send + Sync + 'static> RouterBuilder<S> {
    /// Adds `method template` served by `handler`, named after its 3GPP service operation.
    ///
    /// A handler fails with its NF's own error type; the route turns it into the answer through
    /// that type's one `Into<ProblemDetails>`, so every fault of a kind is answered the same way
    /// wherever it arises (the error edge, docs/ARCHITECTURE.md).
    ///
    /// # Panics
    /// On a malformed template: routes are fixed at start-up, so this is a programming error.
    pub fn route<F, Fut, E>(
        mut self,
        method: Method,
        template: &'static str,
        operation: &'static str,
        handler: F,
    ) -> Self
    where
        F: Fn(Arc<S>, SbiRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Response, E>> + Send + 'static,
        E: Into<ProblemDetails> + 'static,
    {
        let segments = parse_template(template);
        let state = self.state.clone();
        // A named future, not an `async` block around the handler's: the block made the compiler
        // build the (large) handler future on the stack and copy it into the box, ~8.4K
        // instructions per NRF discovery under callgrind; this one is built in place, as the
        // handler's own future was before errors were converted here.
        let handler: Arc<ErasedHandler> = Arc::new(move |req| {
            Box::pin(IntoProblem { inner: handler(state.clone(), req), _error: PhantomData })
                as BoxFuture
        });
        self.routes.push(Route { method, segments, operation, template, handler, problems: None });
        self
    }

    /// The route added last answers in its own media type, not JSON: the layers leave the
    /// `Accept` header to its handler (no 406 for a client asking for, say, `text/xml`) and
    /// render what they refuse before the handler runs with `render`.
    ///
    /// # Panics
    /// Before any route: a programming error.
    pub fn own_media(mut self, render: ProblemRenderer) -> Self {
        self.routes.last_mut().expect("own_media follows a route").problems = Some(render);
        self
    }

    pub fn build(self) -> Router {
        Router { routes: Arc::new(self.routes) }
    }
}

pin_project_lite::pin_project! {
    /// A handler's future whose error becomes the ProblemDetails answer (the error edge).
    struct IntoProblem<F, E> {
        #[pin]
        inner: F,
        _error: PhantomData<fn() -> E>,
    }
}

impl<F, E> Future for IntoProblem<F, E>
where
    F: Future<Output = Result<Response, E>>,
    E: Into<ProblemDetails>,
{
    type Output = HandlerResult;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<HandlerResult> {
        self.project().inner.poll(cx).map_err(Into::into)
    }
}

fn parse_template(template: &'static str) -> Vec<Segment> {
    assert!(template.starts_with('/'), "route template must start with '/': {template}");
    template[1..]
        .split('/')
        .map(|s| match s.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            Some(name) => {
                assert!(!name.is_empty(), "empty parameter name in {template}");
                Segment::Param(name)
            }
            None => Segment::Literal(s.to_owned()),
        })
        .collect()
}

fn match_segments(template: &[Segment], path: &[&str]) -> Option<Vec<(&'static str, String)>> {
    if template.len() != path.len() {
        return None;
    }
    let mut params = Vec::new();
    for (t, p) in template.iter().zip(path) {
        match t {
            Segment::Literal(l) if l == p => {}
            Segment::Literal(_) => return None,
            Segment::Param(_) if p.is_empty() => return None,
            Segment::Param(name) => {
                let decoded = percent_decode(p)?;
                params.push((*name, decoded));
            }
        }
    }
    Some(params)
}

fn percent_decode(s: &str) -> Option<String> {
    if !s.contains('%') {
        return Some(s.to_owned());
    }
    let decoded: Vec<u8> =
        form_urlencoded::parse(format!("x={}", s.replace('+', "%2B")).as_bytes())
            .next()
            .map(|(_, v)| v.into_owned().into_bytes())?;
    String::from_utf8(decoded).ok()
}

/// The innermost service: runs the matched operation's handler. A handler's error becomes its
/// ProblemDetails answer; a handler that panics answers 500 instead of taking the connection down.
#[derive(Clone, Default)]
pub struct Dispatch;

impl tower::Service<http::Request<Bytes>> for Dispatch {
    type Response = Response;
    type Error = Infallible;
    type Future = Either<Ready<Result<Response, Infallible>>, DispatchFuture>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Bytes>) -> Self::Future {
        let (mut head, body) = req.into_parts();
        let Some(matched) = head.extensions.remove::<Matched>() else {
            // Only reachable if the stack is assembled without the route layer.
            let p = ProblemDetails::internal("request reached dispatch without a route");
            return Either::Left { inner: std::future::ready(Ok(p.into_response())) };
        };
        // Uri clones share their bytes: the path is kept for an error's `instance` at no cost.
        let uri = head.uri.clone();
        let fut = (matched.handler)(SbiRequest::new(head, body, matched.params));
        Either::Right { inner: DispatchFuture { inner: AssertUnwindSafe(fut).catch_unwind(), uri } }
    }
}

pin_project_lite::pin_project! {
    pub struct DispatchFuture {
        #[pin]
        inner: futures_util::future::CatchUnwind<AssertUnwindSafe<BoxFuture>>,
        uri: http::Uri,
    }
}

impl Future for DispatchFuture {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let resp = match ready!(this.inner.poll(cx)) {
            Ok(Ok(resp)) => resp,
            Ok(Err(problem)) if problem.instance.is_some() => problem.into_response(),
            Ok(Err(problem)) => problem.with_instance(this.uri.path()).into_response(),
            Err(_) => {
                tracing::error!(path = this.uri.path(), "handler panicked");
                ProblemDetails::internal("internal error while serving the request")
                    .with_instance(this.uri.path())
                    .into_response()
            }
        };
        Poll::Ready(Ok(resp))
    }
}

/// The apiRoot consumers reach an NF at (for `Location` headers): `configured` when set, else
/// `scheme://` + the authority the request was sent to, else the NF's bound address.
pub fn api_root(
    configured: Option<&str>,
    scheme: &str,
    req: Option<&SbiRequest>,
    bound: Option<&str>,
) -> String {
    if let Some(root) = configured {
        return root.trim_end_matches('/').to_owned();
    }
    let authority = req.and_then(SbiRequest::authority).or(bound).unwrap_or("localhost");
    format!("{scheme}://{authority}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn router() -> Router {
        async fn ok(_: Arc<()>, _: SbiRequest) -> HandlerResult {
            Ok(empty_response(StatusCode::NO_CONTENT))
        }
        Router::builder(Arc::new(()))
            .route(Method::GET, "/nbsf-management/v1/pcfBindings", "Nbsf_Management_Discovery", ok)
            .route(Method::POST, "/nbsf-management/v1/pcfBindings", "Nbsf_Management_Register", ok)
            .route(
                Method::DELETE,
                "/nbsf-management/v1/pcfBindings/{bindingId}",
                "Nbsf_Management_Deregister",
                ok,
            )
            .build()
    }

    #[test]
    fn api_root_prefers_configured_then_request_authority_then_bound_address() {
        let req = |uri: &str, host: Option<&str>| {
            let mut b = http::Request::builder().uri(uri);
            if let Some(h) = host {
                b = b.header(http::header::HOST, h);
            }
            let (head, ()) = b.body(()).unwrap().into_parts();
            SbiRequest::new(head, Bytes::new(), Vec::new())
        };
        let h2 = req("http://nrf.example:7000/nnrf-nfm/v1/nf-instances", None);
        let h1 = req("/nnrf-nfm/v1/nf-instances", Some("10.0.0.1:7000"));
        let bare = req("/nnrf-nfm/v1/nf-instances", None);
        assert_eq!(
            api_root(Some("https://a.example/"), "http", Some(&h2), None),
            "https://a.example"
        );
        assert_eq!(api_root(None, "http", Some(&h2), Some("x:1")), "http://nrf.example:7000");
        assert_eq!(api_root(None, "https", Some(&h1), None), "https://10.0.0.1:7000");
        assert_eq!(api_root(None, "http", Some(&bare), Some("127.0.0.1:9")), "http://127.0.0.1:9");
        assert_eq!(api_root(None, "http", None, None), "http://localhost");
    }

    #[test]
    fn resolves_templates_and_decodes_params() {
        let r = router();
        let m = r.resolve(&Method::DELETE, "/nbsf-management/v1/pcfBindings/a%2Fb").unwrap();
        assert_eq!(m.operation, "Nbsf_Management_Deregister");
        assert_eq!(m.params, vec![("bindingId", "a/b".to_owned())]);
    }

    #[test]
    fn paths_longer_than_the_stack_split_still_resolve() {
        async fn ok(_: Arc<()>, _: SbiRequest) -> HandlerResult {
            Ok(empty_response(StatusCode::NO_CONTENT))
        }
        let r = Router::builder(Arc::new(()))
            .route(Method::GET, "/a/v1/b/{x}/c/d/e/f/g/{y}", "Long", ok)
            .route(Method::GET, "/a/v1/b/{x}/c/d/e/f", "Eight", ok)
            .build();
        let m = r.resolve(&Method::GET, "/a/v1/b/1/c/d/e/f/g/2").unwrap();
        assert_eq!((m.operation, m.params), ("Long", vec![("x", "1".into()), ("y", "2".into())]));
        assert_eq!(r.resolve(&Method::GET, "/a/v1/b/1/c/d/e/f").unwrap().operation, "Eight");
        let e = r.resolve(&Method::GET, "/a/v1/b/1/c/d/e/f/g/2/h").err().unwrap();
        assert_eq!(e.status, Some(404));
        let e = r.resolve(&Method::POST, "/a/v1/b/1/c/d/e/f/g/2").err().unwrap();
        assert_eq!(e.status, Some(405));
    }

    #[test]
    fn answers_405_404_and_invalid_api() {
        let r = router();
        let e = r.resolve(&Method::PUT, "/nbsf-management/v1/pcfBindings").err().unwrap();
        assert_eq!(e.status, Some(405));
        assert_eq!(r.allowed_methods("/nbsf-management/v1/pcfBindings").len(), 2);
        let e = r.resolve(&Method::GET, "/nbsf-management/v1/nothing").err().unwrap();
        assert_eq!(e.status, Some(404));
        let e = r.resolve(&Method::GET, "/nbsf-management/v9/pcfBindings").err().unwrap();
        assert_eq!(e.cause.as_deref(), Some(cause::INVALID_API));
        let e = r.resolve(&Method::DELETE, "/nbsf-management/v1/pcfBindings/").err().unwrap();
        assert_eq!(e.status, Some(404));
    }
}
