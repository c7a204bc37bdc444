//! Overload guard (TS 29.500 §6.4): at most `max_in_flight` requests are worked on at once; beyond
//! that a request is answered at once with 503 NF_CONGESTION, `Retry-After` and 3gpp-Sbi-Oci
//! rather than queued without bound. Requests with a 3gpp-Sbi-Message-Priority at or above
//! `priority_threshold` in importance (a lower number) may use an extra reserve, so signalling
//! that matters most gets through while the NF sheds. Answers also carry 3gpp-Sbi-Lci (§6.3),
//! at most once per `lci_interval_ms` (the clock is consulted on one answer in 32), so consumers
//! can balance load before overload.
//!
//! `max_in_flight` alone bounds memory, not latency: at twice the capacity a store-bound NF
//! (the BSF's single writer) kept 4,096 requests queued and every served answer waited about
//! 4,096 / capacity (~0.8 s at 5K/s). So the limit in force follows the answers' own latency
//! (`target_latency_ms`, AIMD over 100 ms windows): the queue stays near capacity × target,
//! and what does not fit is shed at once, which costs a fraction of serving it.
//!
//! A 503 still costs the NF most of what a request costs in the HTTP/2 stack (HPACK, stream
//! state, the answer): at twice the capacity, shedding half the offered load took ~40 % of the
//! core and goodput fell to half the capacity. So by default (`backpressure`) the limit in force
//! is not enforced with 503s but by not reading: while it is reached, connections stop reading
//! new requests ([`crate::backpressure`]), the excess waits in TCP and in the client, where it
//! costs the NF nothing, and 503 is kept for `max_in_flight`, the bound on memory.

use std::convert::Infallible;
use std::future::Ready;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{header, HeaderValue, Request, StatusCode};
use serde::Deserialize;
use tower::{Layer, Service};

use super::{AfterResponse, Either, OnResponse};
use crate::headers::{self, LCI, OCI};
use crate::problem::{cause, ProblemDetails};
use crate::router::{Response, UpstreamWait};

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
    /// Queue-delay bound, milliseconds: when more than 1 % of a 100 ms window's answers took
    /// longer (less the time waiting on other NFs), the in-flight limit is cut by a fifth;
    /// in windows where the limit was reached and answers were quick it grows by a sixteenth,
    /// up to `max_in_flight`. So at twice the capacity the NF keeps about capacity × this much
    /// work in progress, sheds the rest at once, and its served latency stays near this bound
    /// instead of growing to `max_in_flight` / capacity. 0 keeps the limit at `max_in_flight`.
    pub target_latency_ms: u64,
    /// Hold the latency-following limit by not reading new requests while it is reached
    /// (HTTP/2 and TCP flow control push back on the client), shedding with 503 only beyond
    /// `max_in_flight`. Off: every request beyond the limit in force is answered 503 at once,
    /// which tells a consumer sooner to go elsewhere but costs the NF a third of serving it.
    pub backpressure: bool,
    /// Longest a connection stops reading while nothing new is admitted, milliseconds: then it
    /// reads again and what exceeds `max_in_flight` is answered 503. Keeps connections from
    /// going silent while the work in flight is stuck (handlers waiting on other NFs), and lets
    /// a health probe through. While requests are admitted, held connections are woken in
    /// turn, oldest first, as room frees.
    pub hold_max_ms: u64,
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
            target_latency_ms: 200,
            backpressure: true,
            hold_max_ms: 500,
        }
    }
}

pub struct Guard {
    config: OverloadConfig,
    nf_instance: String,
    in_flight: AtomicUsize,
    /// The in-flight limit in force: `max_in_flight`, or lower while answers are slow.
    limit: AtomicUsize,
    /// The latency window (100 ms): its number, answers in it, answers over the target, and
    /// whether a request was shed in it.
    lat_window: AtomicU64,
    lat_answers: AtomicU64,
    lat_slow: AtomicU64,
    lat_shed: std::sync::atomic::AtomicBool,
    /// Requests admitted since start; read only when shedding, so admitting costs one addition.
    admitted: AtomicU64,
    /// The shedding window (one second): its start, the admitted count then, and sheds since.
    window_s: AtomicU64,
    window_admitted: AtomicU64,
    window_shed: AtomicU64,
    /// Answers since start; the clock is read for Lci on one answer in [`LCI_CHECK_EVERY`].
    answers: AtomicU64,
    lci_last_ms: AtomicU64,
    /// The shed answer's ProblemDetails, serialised once: a shed request must cost as little
    /// as possible (docs/sbi.md "Overload guard").
    shed_body: Bytes,
    retry_after: HeaderValue,
    /// The last 3gpp-Sbi-Oci made, with the second and reduction it was made for: it changes
    /// at most once per second and reduction step, not per shed answer.
    oci: Mutex<(u64, u8, Option<HeaderValue>)>,
    /// Connections that stopped reading while the limit was reached (`backpressure`).
    pub(crate) gate: crate::backpressure::ReadGate,
    /// Times a connection stopped reading (`sbi_reads_held`).
    holds: AtomicU64,
    /// Requests answered 503 NF_CONGESTION since start.
    shed_total: AtomicU64,
}

/// The window over which answers' latency is judged.
const LATENCY_WINDOW_MS: u64 = 100;
/// The in-flight limit is never cut below this (or `max_in_flight` if lower).
const MIN_LIMIT: usize = 16;

/// Reading the clock on every answer costs more than the rest of this layer; a coarser check is
/// enough for a header sent at most once per `lci_interval_ms`.
const LCI_CHECK_EVERY: u64 = 32;

impl Guard {
    /// Where connections stop reading: the limit in force, less an eighth of `max_in_flight`
    /// so that what they read before stopping is admitted, not shed.
    fn gate_limit(&self) -> usize {
        let max = self.config.max_in_flight;
        self.limit.load(Ordering::Relaxed).min(max - max / 8).max(1)
    }

    /// Whether new requests may be read.
    pub(crate) fn open(&self) -> bool {
        self.in_flight.load(Ordering::SeqCst) < self.gate_limit()
    }

    /// Requests admitted since start: a held connection whose hold ran out reads again only
    /// if none was admitted meanwhile (the work in flight is stuck); otherwise its turn comes.
    pub(crate) fn admitted(&self) -> u64 {
        self.admitted.load(Ordering::Relaxed)
    }

    pub(crate) fn hold_max(&self) -> Duration {
        Duration::from_millis(self.config.hold_max_ms.max(1))
    }

    /// A connection stopped reading: for the limit's growth this counts as shedding.
    pub(crate) fn held_back(&self, started: bool) {
        if started {
            self.holds.fetch_add(1, Ordering::Relaxed);
        }
        if !self.lat_shed.load(Ordering::Relaxed) {
            self.lat_shed.store(true, Ordering::Relaxed);
        }
    }

    /// The second, and the share of requests shed in its window, in percent (1..=100).
    fn reduction_pct(&self) -> (u64, u8) {
        let now_s = now_ms() / 1000;
        let admitted = self.admitted.load(Ordering::Relaxed);
        if self.window_s.swap(now_s, Ordering::Relaxed) != now_s {
            self.window_admitted.store(admitted, Ordering::Relaxed);
            self.window_shed.store(0, Ordering::Relaxed);
        }
        let shed = self.window_shed.fetch_add(1, Ordering::Relaxed) + 1;
        let admitted = admitted.saturating_sub(self.window_admitted.load(Ordering::Relaxed));
        (now_s, ((shed * 100) / (admitted + shed).max(1)).clamp(1, 100) as u8)
    }

    fn shed_answer(&self, own: Option<crate::router::ProblemRenderer>) -> Response {
        // Ask consumers to cut the share of traffic we are currently refusing.
        let (now_s, reduction) = self.reduction_pct();
        let rendered = own.is_some();
        let mut resp = match own {
            // A route answering in its own media type (SOAP) renders the problem itself.
            Some(render) => render(ProblemDetails::new(
                StatusCode::SERVICE_UNAVAILABLE,
                cause::NF_CONGESTION,
                "overloaded: too many requests in progress",
            )),
            None => {
                let mut resp = http::Response::new(crate::Body::from(self.shed_body.clone()));
                *resp.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                resp.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(crate::body::PROBLEM_JSON),
                );
                resp
            }
        };
        if !rendered {
            // The rendered problem carries its cause already (into_response).
            resp.extensions_mut().insert(crate::problem::ProblemCause(std::borrow::Cow::Borrowed(
                cause::NF_CONGESTION,
            )));
        }
        self.shed_total.fetch_add(1, Ordering::Relaxed);
        let h = resp.headers_mut();
        h.insert(header::RETRY_AFTER, self.retry_after.clone());
        if let Some(v) = self.oci(now_s, reduction) {
            h.insert(&OCI, v);
        }
        resp
    }

    /// The Oci header for this second and reduction (rounded to 5 % steps above 5 %, so a
    /// changing share does not make a new header per answer).
    fn oci(&self, now_s: u64, reduction: u8) -> Option<HeaderValue> {
        let reduction = if reduction > 5 { reduction.div_ceil(5) * 5 } else { reduction };
        let mut cached = self.oci.lock().unwrap_or_else(|e| e.into_inner());
        if cached.0 != now_s || cached.1 != reduction || cached.2.is_none() {
            let oci = headers::format_oci(
                SystemTime::now(),
                Duration::from_secs(self.config.oci_validity_secs),
                reduction,
                &self.nf_instance,
            );
            *cached = (now_s, reduction, HeaderValue::from_str(&oci).ok());
        }
        cached.2.clone()
    }

    /// Counts one answer's own latency in the current 100 ms window; the first answer of a new
    /// window judges the one before and moves the limit.
    fn observe(&self, took: Duration) {
        let now = now_ms() / LATENCY_WINDOW_MS;
        let prev = self.lat_window.load(Ordering::Relaxed);
        if prev != now
            && self
                .lat_window
                .compare_exchange(prev, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            let answers = self.lat_answers.swap(0, Ordering::Relaxed);
            let slow = self.lat_slow.swap(0, Ordering::Relaxed);
            let shed = self.lat_shed.swap(false, Ordering::Relaxed);
            self.adjust(answers, slow, shed);
        }
        self.lat_answers.fetch_add(1, Ordering::Relaxed);
        if took > Duration::from_millis(self.config.target_latency_ms) {
            self.lat_slow.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// AIMD on the in-flight limit: cut by a fifth when over 1 % of a window's answers were
    /// slow, grow by a sixteenth when the limit was reached and answers were quick.
    fn adjust(&self, answers: u64, slow: u64, shed: bool) {
        let max = self.config.max_in_flight;
        let min = max.min(MIN_LIMIT);
        let limit = self.limit.load(Ordering::Relaxed);
        let next = if answers > 0 && slow * 100 > answers {
            (limit - limit / 5).max(min)
        } else if shed {
            (limit + limit / 16 + 1).min(max)
        } else {
            return;
        };
        if next != limit {
            self.limit.store(next, Ordering::Relaxed);
            tracing::debug!(limit = next, answers, slow, "overload guard: in-flight limit moved");
        }
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
        let load = self.in_flight.load(Ordering::Relaxed) * 100
            / self.limit.load(Ordering::Relaxed).max(1);
        let lci = headers::format_lci(SystemTime::now(), load.min(100) as u8, &self.nf_instance);
        if let Ok(v) = HeaderValue::from_str(&lci) {
            resp.headers_mut().insert(&LCI, v);
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Releases an in-flight slot when the request ends, however it ends (including cancellation);
/// holds when the request was admitted when the limit follows latency.
pub struct Slot(Arc<Guard>, Option<Instant>);
impl Drop for Slot {
    fn drop(&mut self) {
        let g = &self.0;
        let left = g.in_flight.fetch_sub(1, Ordering::SeqCst) - 1;
        if g.gate.has_waiters() {
            // Reopen with some room below the limit, so that a connection woken has room
            // for what it reads.
            let limit = g.gate_limit();
            if left <= limit - limit / 8 {
                g.gate.wake_one();
            }
        }
    }
}

#[derive(Clone)]
pub struct OverloadLayer {
    guard: Arc<Guard>,
}

impl OverloadLayer {
    pub fn new(config: OverloadConfig, nf_instance: impl Into<String>) -> Self {
        let problem = ProblemDetails::new(
            StatusCode::SERVICE_UNAVAILABLE,
            cause::NF_CONGESTION,
            "overloaded: more requests in progress than can be answered in time",
        );
        // Serialising a struct of strings and integers cannot fail.
        let shed_body = Bytes::from(serde_json::to_vec(&problem).unwrap_or_default());
        let max_in_flight = config.max_in_flight;
        OverloadLayer {
            guard: Arc::new(Guard {
                shed_body,
                retry_after: HeaderValue::from(config.retry_after_secs),
                oci: Mutex::new((0, 0, None)),
                config,
                nf_instance: nf_instance.into(),
                in_flight: AtomicUsize::new(0),
                limit: AtomicUsize::new(max_in_flight),
                lat_window: AtomicU64::new(0),
                lat_answers: AtomicU64::new(0),
                lat_slow: AtomicU64::new(0),
                lat_shed: std::sync::atomic::AtomicBool::new(false),
                admitted: AtomicU64::new(0),
                window_s: AtomicU64::new(0),
                window_admitted: AtomicU64::new(0),
                window_shed: AtomicU64::new(0),
                answers: AtomicU64::new(0),
                lci_last_ms: AtomicU64::new(0),
                gate: crate::backpressure::ReadGate::default(),
                holds: AtomicU64::new(0),
                shed_total: AtomicU64::new(0),
            }),
        }
    }

    /// Exports the work in flight, the limit in force and the holds at scrape time (reading
    /// three atomics then costs the requests nothing).
    pub fn register(&self, obs: &crate::observe::Observability) {
        let guard = self.guard.clone();
        obs.with_registry(|r| r.register_collector(Box::new(GuardCollector(guard))));
    }

    /// The read gate connections consult, when the guard holds its limit by backpressure.
    pub(crate) fn backpressure(&self) -> Option<crate::backpressure::Backpressure> {
        self.guard
            .config
            .backpressure
            .then(|| crate::backpressure::Backpressure::new(self.guard.clone()))
    }

    /// Requests currently being worked on.
    pub fn in_flight(&self) -> usize {
        self.guard.in_flight.load(Ordering::Relaxed)
    }

    /// The in-flight limit in force (`max_in_flight`, or lower while answers are slow).
    pub fn limit(&self) -> usize {
        self.guard.limit.load(Ordering::Relaxed)
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
        // With backpressure the limit in force is held by not reading; what was read before
        // the gate closed is admitted up to `max_in_flight`.
        let mut limit = if g.config.backpressure {
            g.config.max_in_flight
        } else {
            g.limit.load(Ordering::Relaxed)
        };
        if headers::message_priority(req.headers()) <= g.config.priority_threshold {
            limit += g.config.priority_reserve;
        }
        let n = g.in_flight.fetch_add(1, Ordering::Acquire) + 1;
        if n > limit {
            g.in_flight.fetch_sub(1, Ordering::Release);
            if !g.lat_shed.load(Ordering::Relaxed) {
                g.lat_shed.store(true, Ordering::Relaxed);
            }
            let own = req.extensions().get::<crate::router::Matched>().and_then(|m| m.problems);
            return Either::Left { inner: std::future::ready(Ok(g.shed_answer(own))) };
        }
        g.admitted.fetch_add(1, Ordering::Relaxed);
        let started = (g.config.target_latency_ms > 0).then(Instant::now);
        let slot = Slot(g.clone(), started);
        Either::Right { inner: AfterResponse::new(self.inner.call(req), slot) }
    }
}

#[derive(Debug)]
struct GuardCollector(Arc<Guard>);

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard").field("in_flight", &self.in_flight).finish_non_exhaustive()
    }
}

impl prometheus_client::collector::Collector for GuardCollector {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::counter::ConstCounter;
        use prometheus_client::metrics::gauge::ConstGauge;
        let g = &self.0;
        for (name, help, value) in [
            (
                "sbi_requests_in_flight",
                "SBI requests being worked on",
                g.in_flight.load(Ordering::Relaxed),
            ),
            (
                "sbi_in_flight_limit",
                "The overload guard's in-flight limit in force (follows latency)",
                g.limit.load(Ordering::Relaxed),
            ),
        ] {
            let m = ConstGauge::new(value as i64);
            m.encode(encoder.encode_descriptor(name, help, None, m.metric_type())?)?;
        }
        let shed = ConstCounter::new(g.shed_total.load(Ordering::Relaxed));
        shed.encode(encoder.encode_descriptor(
            "sbi_requests_shed",
            "Requests answered 503 NF_CONGESTION by the overload guard (beyond the in-flight limit)",
            None,
            shed.metric_type(),
        )?)?;
        let held = ConstCounter::new(g.holds.load(Ordering::Relaxed));
        held.encode(encoder.encode_descriptor(
            "sbi_reads_held",
            "Times a connection stopped reading new requests at the in-flight limit (backpressure)",
            None,
            held.metric_type(),
        )?)?;
        Ok(())
    }
}

/// Adds Lci when due; the slot is released when the answer is ready (or the request dropped).
impl OnResponse for Slot {
    fn on_response(self, resp: &mut Response) {
        if let Some(started) = self.1 {
            let waited = resp.extensions().get::<UpstreamWait>().map_or(Duration::ZERO, |w| w.0);
            self.0.observe(started.elapsed().saturating_sub(waited));
        }
        self.0.maybe_lci(resp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_falls_while_answers_are_slow_and_climbs_back_when_shedding_quickly() {
        let layer = OverloadLayer::new(
            OverloadConfig { max_in_flight: 1000, target_latency_ms: 50, ..Default::default() },
            "nf",
        );
        let g = &layer.guard;
        // 2 of 100 answers slow: cut by a fifth, down to the floor at most.
        g.adjust(100, 2, true);
        assert_eq!(layer.limit(), 800);
        for _ in 0..50 {
            g.adjust(100, 50, true);
        }
        assert_eq!(layer.limit(), MIN_LIMIT);
        // 1 % slow is tolerated; quick answers without shedding leave the limit alone.
        g.adjust(100, 1, false);
        g.adjust(0, 0, false);
        assert_eq!(layer.limit(), MIN_LIMIT);
        // Quick answers while shedding: it grows by a sixteenth (+1) per window, to the maximum.
        g.adjust(100, 0, true);
        assert_eq!(layer.limit(), MIN_LIMIT + 2);
        for _ in 0..200 {
            g.adjust(100, 0, true);
        }
        assert_eq!(layer.limit(), 1000);
    }
}
