//! Overload guard (TS 29.500 §6.4): at most `max_in_flight` requests are worked on at once; beyond
//! that a request is answered at once with 503 NF_CONGESTION, `Retry-After` and 3gpp-Sbi-Oci
//! rather than queued without bound. Requests with a 3gpp-Sbi-Message-Priority at or above
//! `priority_threshold` in importance (a lower number) may use an extra reserve, so signalling
//! that matters most gets through while the NF sheds. Answers also carry 3gpp-Sbi-Lci (§6.3),
//! at most once per `lci_interval_ms` (the clock is consulted on one answer in 32), so consumers
//! can balance load before overload.

use std::convert::Infallible;
use std::future::Ready;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{header, HeaderValue, Request, StatusCode};
use serde::Deserialize;
use tower::{Layer, Service};

use super::{AfterResponse, Either, OnResponse};
use crate::headers::{self, LCI, OCI};
use crate::problem::{cause, ProblemDetails};
use crate::router::Response;

/// `[sbi.overload]` in an NF's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OverloadConfig {
    /// Requests worked on at once before shedding begins.
    pub max_in_flight: usize,
    /// Extra requests admitted above `max_in_flight` for messages of high priority.
    pub priority_reserve: usize,
    /// Message priority (0 most important .. 31) at or below which the reserve may be used.
    pub priority_threshold: u8,
    /// Seconds a shed consumer is asked to wait (Retry-After).
    pub retry_after_secs: u64,
    /// Period of validity of the 3gpp-Sbi-Oci sent with a shed answer, seconds.
    pub oci_validity_secs: u64,
    /// Minimum time between two 3gpp-Sbi-Lci headers, milliseconds; 0 disables Lci.
    pub lci_interval_ms: u64,
}

impl Default for OverloadConfig {
    fn default() -> Self {
        OverloadConfig {
            max_in_flight: 4096,
            priority_reserve: 256,
            priority_threshold: 7,
            retry_after_secs: 1,
            oci_validity_secs: 5,
            lci_interval_ms: 1000,
        }
    }
}

pub struct Guard {
    config: OverloadConfig,
    nf_instance: String,
    in_flight: AtomicUsize,
    /// Requests admitted since start; read only when shedding, so admitting costs one addition.
    admitted: AtomicU64,
    /// The shedding window (one second): its start, the admitted count then, and sheds since.
    window_s: AtomicU64,
    window_admitted: AtomicU64,
    window_shed: AtomicU64,
    /// Answers since start; the clock is read for Lci on one answer in [`LCI_CHECK_EVERY`].
    answers: AtomicU64,
    lci_last_ms: AtomicU64,
}

/// Reading the clock on every answer costs more than the rest of this layer; a coarser check is
/// enough for a header sent at most once per `lci_interval_ms`.
const LCI_CHECK_EVERY: u64 = 32;

impl Guard {
    /// The share of requests shed in the current one-second window, in percent (1..=100).
    fn reduction_pct(&self) -> u8 {
        let now_s = now_ms() / 1000;
        let admitted = self.admitted.load(Ordering::Relaxed);
        if self.window_s.swap(now_s, Ordering::Relaxed) != now_s {
            self.window_admitted.store(admitted, Ordering::Relaxed);
            self.window_shed.store(0, Ordering::Relaxed);
        }
        let shed = self.window_shed.fetch_add(1, Ordering::Relaxed) + 1;
        let admitted = admitted.saturating_sub(self.window_admitted.load(Ordering::Relaxed));
        ((shed * 100) / (admitted + shed).max(1)).clamp(1, 100) as u8
    }

    fn shed_answer(&self, own: Option<crate::router::ProblemRenderer>) -> Response {
        // Ask consumers to cut the share of traffic we are currently refusing.
        let reduction = self.reduction_pct();
        let p = ProblemDetails::new(
            StatusCode::SERVICE_UNAVAILABLE,
            cause::NF_CONGESTION,
            format!("overloaded: more than {} requests in progress", self.config.max_in_flight),
        );
        let mut resp = match own {
            Some(render) => render(p),
            None => p.into_response(),
        };
        let h = resp.headers_mut();
        h.insert(header::RETRY_AFTER, HeaderValue::from(self.config.retry_after_secs));
        let oci = headers::format_oci(
            SystemTime::now(),
            Duration::from_secs(self.config.oci_validity_secs),
            reduction,
            &self.nf_instance,
        );
        if let Ok(v) = HeaderValue::from_str(&oci) {
            h.insert(&OCI, v);
        }
        resp
    }

    fn maybe_lci(&self, resp: &mut Response) {
        let interval = self.config.lci_interval_ms;
        if interval == 0
            || !self.answers.fetch_add(1, Ordering::Relaxed).is_multiple_of(LCI_CHECK_EVERY)
        {
            return;
        }
        let now = now_ms();
        let last = self.lci_last_ms.load(Ordering::Relaxed);
        if now.saturating_sub(last) < interval
            || self
                .lci_last_ms
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let load = self.in_flight.load(Ordering::Relaxed) * 100 / self.config.max_in_flight.max(1);
        let lci = headers::format_lci(SystemTime::now(), load.min(100) as u8, &self.nf_instance);
        if let Ok(v) = HeaderValue::from_str(&lci) {
            resp.headers_mut().insert(&LCI, v);
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Releases an in-flight slot when the request ends, however it ends (including cancellation).
pub struct Slot(Arc<Guard>);
impl Drop for Slot {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Release);
    }
}

#[derive(Clone)]
pub struct OverloadLayer {
    guard: Arc<Guard>,
}

impl OverloadLayer {
    pub fn new(config: OverloadConfig, nf_instance: impl Into<String>) -> Self {
        OverloadLayer {
            guard: Arc::new(Guard {
                config,
                nf_instance: nf_instance.into(),
                in_flight: AtomicUsize::new(0),
                admitted: AtomicU64::new(0),
                window_s: AtomicU64::new(0),
                window_admitted: AtomicU64::new(0),
                window_shed: AtomicU64::new(0),
                answers: AtomicU64::new(0),
                lci_last_ms: AtomicU64::new(0),
            }),
        }
    }

    /// Requests currently being worked on.
    pub fn in_flight(&self) -> usize {
        self.guard.in_flight.load(Ordering::Relaxed)
    }
}

impl<S> Layer<S> for OverloadLayer {
    type Service = OverloadService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        OverloadService { inner, guard: self.guard.clone() }
    }
}

#[derive(Clone)]
pub struct OverloadService<S> {
    inner: S,
    guard: Arc<Guard>,
}

impl<S, B> Service<Request<B>> for OverloadService<S>
where
    S: Service<Request<B>, Response = Response, Error = std::convert::Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = Either<Ready<Result<Response, Infallible>>, AfterResponse<S::Future, Slot>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let g = &self.guard;
        let mut limit = g.config.max_in_flight;
        if headers::message_priority(req.headers()) <= g.config.priority_threshold {
            limit += g.config.priority_reserve;
        }
        let n = g.in_flight.fetch_add(1, Ordering::Acquire) + 1;
        if n > limit {
            g.in_flight.fetch_sub(1, Ordering::Release);
            let own = req.extensions().get::<crate::router::Matched>().and_then(|m| m.problems);
            return Either::Left { inner: std::future::ready(Ok(g.shed_answer(own))) };
        }
        g.admitted.fetch_add(1, Ordering::Relaxed);
        let slot = Slot(g.clone());
        Either::Right { inner: AfterResponse::new(self.inner.call(req), slot) }
    }
}

/// Adds Lci when due; the slot is released when the answer is ready (or the request dropped).
impl OnResponse for Slot {
    fn on_response(self, resp: &mut Response) {
        self.0.maybe_lci(resp);
    }
}
