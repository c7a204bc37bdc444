//! The layer stack every SBI request passes through, one concern per layer, outermost first:
//!
//! 1. [`request_id`]: takes (and echoes) or makes a request id, opens the tracing span.
//! 2. [`trace`]: continues the consumer's W3C trace; with a tracer, the OpenTelemetry server
//!    span (so answers refused by the layers below are in the trace too).
//! 3. [`metrics`]: counts and times each service operation by status class.
//! 4. [`route`]: resolves method and path to a service operation (404/405/400 INVALID_API here).
//! 5. [`oauth2`]: the access token, when the NF requires one (401/403 here).
//! 6. [`rate_limit`]: per consumer and service, when configured (429 here).
//! 7. [`overload`]: bounded in-flight work; sheds with 503, Retry-After and 3gpp-Sbi-Oci.
//! 8. [`content`]: Accept, Content-Length and size limits; reads the body whole (406/411/413).
//! 9. [`tap`]: hands a copy of request and answer to the Data Director (off unless configured).
//!
//! and then the operation's handler ([`crate::router::Dispatch`]). Every layer is a plain tower
//! `Layer`, so an NF can add its own where it belongs.

pub mod content;
pub mod metrics;
pub mod oauth2;
pub mod overload;
pub mod rate_limit;
pub mod request_id;
pub mod route;
pub mod tap;
pub mod trace;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;

use crate::router::Response;

/// The future every layer returns. SBI services never fail at the tower level: errors are
/// answers (ProblemDetails), so the error type is `Infallible`.
pub type LayerFuture = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

pin_project_lite::pin_project! {
    /// One of two futures, without boxing: a layer that answers at once (Left) or passes the
    /// request on (Right).
    #[project = EitherProj]
    pub enum Either<L, R> {
        Left { #[pin] inner: L },
        Right { #[pin] inner: R },
    }
}

impl<L, R, T> Future for Either<L, R>
where
    L: Future<Output = T>,
    R: Future<Output = T>,
{
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<T> {
        match self.project() {
            EitherProj::Left { inner } => inner.poll(cx),
            EitherProj::Right { inner } => inner.poll(cx),
        }
    }
}

/// What a layer does to the answer once the inner service has produced it. Each layer that
/// post-processes names its hook type, so layer futures stay nameable and unboxed.
pub trait OnResponse {
    fn on_response(self, response: &mut crate::router::Response);
}

pin_project_lite::pin_project! {
    /// The inner service's future, then the layer's [`OnResponse`] hook on its answer.
    pub struct AfterResponse<F, H> {
        #[pin]
        inner: F,
        hook: Option<H>,
    }
}

impl<F, H> AfterResponse<F, H> {
    pub fn new(inner: F, hook: H) -> Self {
        AfterResponse { inner, hook: Some(hook) }
    }
}

impl<F, H> Future for AfterResponse<F, H>
where
    F: Future<Output = Result<crate::router::Response, std::convert::Infallible>>,
    H: OnResponse,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<F::Output> {
        let this = self.project();
        let mut resp = std::task::ready!(this.inner.poll(cx))?;
        if let Some(hook) = this.hook.take() {
            hook.on_response(&mut resp);
        }
        std::task::Poll::Ready(Ok(resp))
    }
}
