//! W3C Trace Context (`traceparent`, `tracestate`) on HTTP headers: read with the SDK's
//! [`TraceContextPropagator`], written by hand. A request without `traceparent` costs one header lookup: nothing
//! is parsed or allocated for it.

use http::header::{HeaderMap, HeaderName, HeaderValue};
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{SpanContext, TraceContextExt, TraceFlags};
use opentelemetry::Context;
use opentelemetry_sdk::propagation::TraceContextPropagator;

pub const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
pub const TRACESTATE: HeaderName = HeaderName::from_static("tracestate");

/// The remote parent a request's `traceparent` (and `tracestate`) names; `None` without one,
/// or when it is malformed (W3C: the receiver then starts a new trace).
pub fn extract(headers: &HeaderMap) -> Option<Context> {
    if !headers.contains_key(TRACEPARENT) {
        return None;
    }
    let cx = TraceContextPropagator::new().extract(&Headers(headers));
    cx.span().span_context().is_valid().then_some(cx)
}

/// Sets `traceparent` (and `tracestate` when not empty) to the span of `cx`; nothing when it
/// has no valid span.
pub fn inject(cx: &Context, headers: &mut HeaderMap) {
    inject_span_context(cx.span().span_context(), headers);
}

/// Sets `traceparent` (and `tracestate` when not empty) to `sc`: a span of ours, or a
/// consumer's passed on. Written here rather than through the propagator, which formats the
/// header into a `String` and gives it to an `Injector` by name to parse again.
pub fn inject_span_context(sc: &SpanContext, headers: &mut HeaderMap) {
    if !sc.is_valid() {
        return;
    }
    let mut v = [0u8; 55];
    v[..3].copy_from_slice(b"00-");
    hex(&sc.trace_id().to_bytes(), &mut v[3..35]);
    v[35] = b'-';
    hex(&sc.span_id().to_bytes(), &mut v[36..52]);
    v[52] = b'-';
    hex(&[(sc.trace_flags() & TraceFlags::SAMPLED).to_u8()], &mut v[53..55]);
    if let Ok(v) = HeaderValue::from_bytes(&v) {
        headers.insert(TRACEPARENT, v);
    }
    let state = sc.trace_state().header();
    if !state.is_empty() {
        if let Ok(v) = HeaderValue::from_str(&state) {
            headers.insert(TRACESTATE, v);
        }
    }
}

fn hex(bytes: &[u8], out: &mut [u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (b, o) in bytes.iter().zip(out.chunks_exact_mut(2)) {
        o[0] = DIGITS[usize::from(b >> 4)];
        o[1] = DIGITS[usize::from(b & 0xf)];
    }
}

struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{SpanId, TraceId, TraceState};

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_traceparent_round_trips_with_its_tracestate() {
        let mut h = HeaderMap::new();
        h.insert(TRACEPARENT, HeaderValue::from_static(PARENT));
        h.insert(TRACESTATE, HeaderValue::from_static("amf=7,vendor=x"));
        let cx = extract(&h).expect("valid");
        let sc = cx.span().span_context().clone();
        assert_eq!(sc.trace_id(), TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap());
        assert_eq!(sc.span_id(), SpanId::from_hex("00f067aa0ba902b7").unwrap());
        assert!(sc.is_sampled() && sc.is_remote());
        let mut out = HeaderMap::new();
        inject(&cx, &mut out);
        assert_eq!(out[TRACEPARENT], PARENT);
        assert_eq!(out[TRACESTATE], "amf=7,vendor=x");
    }

    #[test]
    fn missing_or_malformed_traceparents_start_nothing() {
        assert!(extract(&HeaderMap::new()).is_none());
        for bad in [
            "00-00000000000000000000000000000000-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "garbage",
        ] {
            let mut h = HeaderMap::new();
            h.insert(TRACEPARENT, HeaderValue::from_static(bad));
            assert!(extract(&h).is_none(), "{bad}");
        }
    }

    #[test]
    fn an_unsampled_parent_is_passed_on_unsampled_and_without_an_empty_tracestate() {
        let sc = SpanContext::new(
            TraceId::from(7),
            SpanId::from(9),
            TraceFlags::default(),
            true,
            TraceState::default(),
        );
        let mut out = HeaderMap::new();
        inject(&Context::new().with_remote_span_context(sc), &mut out);
        assert_eq!(out[TRACEPARENT], "00-00000000000000000000000000000007-0000000000000009-00");
        assert!(!out.contains_key(TRACESTATE));
        let mut none = HeaderMap::new();
        inject(&Context::new(), &mut none);
        assert!(none.is_empty());
    }
}
