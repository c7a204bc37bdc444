//! The message-copy tap: the hook through which an NF hands a copy of each request it serves and
//! of its answer to the Data Director (issue #24, "trigger points" ingress request and ingress
//! response). The SBI client has the same hook for what the NF sends (egress request and egress
//! response, `SbiClient::set_tap`). With no tap installed this layer passes requests straight
//! through and copies nothing.
//!
//! A [`MessageTap`] is called on the request path, so it must not block or await: it copies what
//! it keeps out of the borrowed [`MessageCopy`] (the NF's own request and answer, never cloned
//! for it) and returns. The request is copied before its handler runs and the answer once it is
//! made, with one [`Exchange`] carried from one to the other: the tap's transaction id and the
//! correlation ids it found in the request, so the answer's copy has them too. A request whose
//! answer never comes (the consumer reset the stream) leaves its request's copy alone.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::SystemTime;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode, Uri};
use tower::{Layer, Service};

use super::Either;
use crate::router::{Matched, Response};

/// Where in the NF a message was copied (the reference's trigger points).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TriggerPoint {
    /// A request the NF received.
    IngressRequest,
    /// The NF's answer to it.
    IngressResponse,
    /// A request the NF sent to another NF.
    EgressRequest,
    /// The answer it got.
    EgressResponse,
}

/// The other side of an exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer<'a> {
    /// The consumer's address, for what the NF serves.
    Addr(SocketAddr),
    /// The producer's authority as addressed (`host:port`), for what the NF sends.
    Authority(&'a str),
    /// A stack that does not say (a layer stack assembled without the server).
    Unknown,
}

/// The consumer's address, set on a request by the server when a tap is installed.
#[derive(Debug, Clone, Copy)]
pub struct PeerAddr(pub SocketAddr);

/// One message of an exchange, borrowed from the NF: a tap copies what it keeps.
#[derive(Debug, Clone, Copy)]
pub struct MessageCopy<'a> {
    pub trigger: TriggerPoint,
    /// When the request was received (ingress) or sent (egress).
    pub request_at: SystemTime,
    /// When the answer was sent (ingress) or received (egress); `None` in a request's copy.
    pub answer_at: Option<SystemTime>,
    /// The request's method and URI, in the answer's copy too.
    pub method: &'a Method,
    pub uri: &'a Uri,
    /// The service operation the route layer resolved (`Npcf_SMPolicyControl_Create`); empty
    /// for what the NF sends, where the client is not told which operation it calls.
    pub operation: &'a str,
    /// The HTTP/2 stream id where the stack knows it: the client's streams (its own h2
    /// connections). hyper does not expose a served request's stream id: 0 there.
    pub stream_id: u32,
    pub peer: Peer<'a>,
    /// The answer's status; `None` in a request's copy.
    pub status: Option<StatusCode>,
    /// This message's own header list (the request's or the answer's).
    pub headers: &'a HeaderMap,
    /// This message's own body.
    pub body: &'a [u8],
}

/// What a tap keeps of a request for its answer's copy: set when the request is copied, read
/// when the answer is.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Exchange {
    /// The same in the copies of a request and of its answer.
    pub transaction: u64,
    pub supi: Option<Box<str>>,
    pub gpsi: Option<Box<str>>,
    /// The session or association the exchange is about (an SM policy association, a binding).
    pub session_id: Option<Box<str>>,
}

pub trait MessageTap: Send + Sync + 'static {
    /// Called with each request and then with its answer, the same `exchange` for both.
    fn copy(&self, message: &MessageCopy<'_>, exchange: &mut Exchange);
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
    type Future = Either<S::Future, TapFuture<S::Future>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Bytes>) -> Self::Future {
        let Some(tap) = &self.tap else {
            return Either::Left { inner: self.inner.call(req) };
        };
        let request_at = SystemTime::now();
        let operation = req.extensions().get::<Matched>().map_or("", |m| m.operation);
        let peer = req.extensions().get::<PeerAddr>().map(|p| p.0);
        let mut exchange = Exchange::default();
        tap.copy(
            &MessageCopy {
                trigger: TriggerPoint::IngressRequest,
                request_at,
                answer_at: None,
                method: req.method(),
                uri: req.uri(),
                operation,
                stream_id: 0,
                peer: peer_of(peer),
                status: None,
                headers: req.headers(),
                body: req.body(),
            },
            &mut exchange,
        );
        let pending = Pending {
            tap: tap.clone(),
            exchange,
            method: req.method().clone(),
            // A clone shares the URI's bytes.
            uri: req.uri().clone(),
            operation,
            peer,
            request_at,
        };
        Either::Right { inner: TapFuture { inner: self.inner.call(req), pending: Some(pending) } }
    }
}

fn peer_of(addr: Option<SocketAddr>) -> Peer<'static> {
    addr.map_or(Peer::Unknown, Peer::Addr)
}

/// What the answer's copy needs of its request.
struct Pending {
    tap: Arc<dyn MessageTap>,
    exchange: Exchange,
    method: Method,
    uri: Uri,
    operation: &'static str,
    peer: Option<SocketAddr>,
    request_at: SystemTime,
}

pin_project_lite::pin_project! {
    /// The handler's future, then the answer's copy.
    pub struct TapFuture<F> {
        #[pin]
        inner: F,
        pending: Option<Pending>,
    }
}

impl<F> std::future::Future for TapFuture<F>
where
    F: std::future::Future<Output = Result<Response, std::convert::Infallible>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let resp = std::task::ready!(this.inner.poll(cx))?;
        if let Some(mut p) = this.pending.take() {
            p.tap.copy(
                &MessageCopy {
                    trigger: TriggerPoint::IngressResponse,
                    request_at: p.request_at,
                    answer_at: Some(SystemTime::now()),
                    method: &p.method,
                    uri: &p.uri,
                    operation: p.operation,
                    stream_id: 0,
                    peer: peer_of(p.peer),
                    status: Some(resp.status()),
                    headers: resp.headers(),
                    body: resp.body().bytes(),
                },
                &mut p.exchange,
            );
        }
        Poll::Ready(Ok(resp))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::{empty_response, Dispatch, Router, SbiRequest};
    use std::sync::Mutex;
    use tower::ServiceExt;

    /// Trigger, operation, status, body, transaction, peer.
    type Seen = (TriggerPoint, String, Option<u16>, Vec<u8>, u64, Option<SocketAddr>);

    /// Records what it is given, as owned values.
    #[derive(Default)]
    struct Recorder {
        seen: Mutex<Vec<Seen>>,
    }

    impl MessageTap for Recorder {
        fn copy(&self, m: &MessageCopy<'_>, ex: &mut Exchange) {
            if m.trigger == TriggerPoint::IngressRequest {
                ex.transaction = 77;
                assert!(m.answer_at.is_none());
            } else {
                assert!(m.answer_at.unwrap() >= m.request_at);
            }
            let peer = match m.peer {
                Peer::Addr(a) => Some(a),
                Peer::Authority(_) | Peer::Unknown => None,
            };
            self.seen.lock().unwrap().push((
                m.trigger,
                m.operation.to_owned(),
                m.status.map(|s| s.as_u16()),
                m.body.to_vec(),
                ex.transaction,
                peer,
            ));
        }
    }

    fn router() -> Router {
        async fn created(_: Arc<()>, req: SbiRequest) -> crate::HandlerResult {
            let mut r = empty_response(StatusCode::CREATED);
            *r.body_mut() = crate::Body::from(req.body.to_vec());
            Ok(r)
        }
        Router::builder(Arc::new(())).route(Method::POST, "/a/v1/x", "A_Create", created).build()
    }

    #[tokio::test]
    async fn the_request_and_its_answer_are_copied_with_one_exchange() {
        let rec = Arc::new(Recorder::default());
        let r = router();
        let svc = tower::ServiceBuilder::new()
            .layer(super::super::route::RouteLayer::new(r))
            .layer(TapLayer::new(Some(rec.clone())))
            .service(Dispatch);
        let peer: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        let mut req = Request::post("/a/v1/x").body(Bytes::from_static(b"{\"k\":1}")).unwrap();
        req.extensions_mut().insert(PeerAddr(peer));
        let resp = svc.oneshot(req).await.unwrap();
        assert_eq!(resp.status(), 201);
        let seen = rec.seen.lock().unwrap().clone();
        assert_eq!(
            seen,
            vec![
                (
                    TriggerPoint::IngressRequest,
                    "A_Create".into(),
                    None,
                    b"{\"k\":1}".to_vec(),
                    77,
                    Some(peer)
                ),
                (
                    TriggerPoint::IngressResponse,
                    "A_Create".into(),
                    Some(201),
                    b"{\"k\":1}".to_vec(),
                    77,
                    Some(peer)
                ),
            ]
        );
    }

    #[tokio::test]
    async fn without_a_tap_nothing_is_copied_and_the_answer_is_the_same() {
        let svc = tower::ServiceBuilder::new()
            .layer(super::super::route::RouteLayer::new(router()))
            .layer(TapLayer::new(None))
            .service(Dispatch);
        let req = Request::post("/a/v1/x").body(Bytes::from_static(b"x")).unwrap();
        let resp = svc.oneshot(req).await.unwrap();
        assert_eq!((resp.status(), resp.body().bytes()), (StatusCode::CREATED, &b"x"[..]));
    }
}
