//! Overload guard (TS 29.500 §6.4): at most `max_in_flight` requests are worked on at once; beyond
//! that a request is answered at once with 503 NF_CONGESTION, `Retry-After` and 3gpp-Sbi-Oci
//! rather than queued without bound. Requests with a 3gpp-Sbi-Message-Priority at or above
//! `priority_threshold` in importance (a lower number) may use an extra reserve, so signalling
//! that matters most gets through while the NF sheds. Answers also carry 3gpp-Sbi-Lci (§6.3),
//! at most once per `lci_interval`, so consumers can balance load before overload.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{header, HeaderValue, Request, StatusCode};
use serde::Deserialize;
use tower::{Layer, Service};

use super::LayerFuture;
use crate::headers::{self, LCI, OCI};
use crate::problem::{cause, ProblemDetails};
use crate::router::Response;

/// `[sbi.overload]` in an NF's configuration.
#[derive(Debug, Clone, Deserialize)]
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

struct Guard {
    config: OverloadConfig,
    nf_instance: String,
    in_flight: AtomicUsize,
    /// Admitted and shed counts in the current one-second window, packed (admitted << 32 | shed)
    /// with the window's second in `window`, to compute the Oci reduction without a lock.
    counts: AtomicU64,
    window: AtomicU64,
    lci_last_ms: AtomicU64,
}

impl Guard {
    fn note(&self, shed: bool) -> (u64, u64) {
        let now_s = now_ms() / 1000;
        if self.window.load(Ordering::Relaxed) != now_s
            && self.window.swap(now_s, Ordering::Relaxed) != now_s
        {
            self.counts.store(0, Ordering::Relaxed);
        }
        let add = if shed { 1 } else { 1 << 32 };
        let v = self.counts.fetch_add(add, Ordering::Relaxed) + add;
        (v >> 32, v & 0xffff_ffff)
    }

    fn shed_answer(&self) -> Response {
        let (admitted, shed) = self.note(true);
        // Ask consumers to cut the share of traffic we are currently refusing.
        let reduction = ((shed * 100) / (admitted + shed).max(1)).clamp(1, 100) as u8;
        let mut resp = ProblemDetails::new(
            StatusCode::SERVICE_UNAVAILABLE,
            cause::NF_CONGESTION,
            format!(
                "overloaded: more than {} requests in progress",
                self.config.max_in_flight
            ),
        )
        .into_response();
        let h = resp.headers_mut();
        h.insert(
            header::RETRY_AFTER,
            HeaderValue::from(self.config.retry_after_secs),
        );
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
        if interval == 0 {
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
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Releases an in-flight slot when the request ends, however it ends (including cancellation).
struct Slot(Arc<Guard>);
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
                counts: AtomicU64::new(0),
                window: AtomicU64::new(0),
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
        OverloadService {
            inner,
            guard: self.guard.clone(),
        }
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
    type Future = LayerFuture;

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
            return Box::pin(std::future::ready(Ok(g.shed_answer())));
        }
        g.note(false);
        let slot = Slot(g.clone());
        let fut = self.inner.call(req);
        Box::pin(async move {
            let mut resp = fut.await?;
            slot.0.maybe_lci(&mut resp);
            drop(slot);
            Ok(resp)
        })
    }
}
