//! The requests a node answered (with its local application handlers) or relayed to a peer:
//! answers by application, command and result class, and the time from the request reaching the
//! handler or relay to its answer. These are the figures of the reference's "Diameter GW" latency
//! rows; for a proxy handler (the BSF's Rx) or a relay the time includes the next hop's.
//!
//! And what the node refused to protect itself: connections closed before their capabilities
//! exchange (too many waiting for it, or a first message longer than a CER can be), messages
//! over the size limit after it, and the connections waiting for their CER now. Every label
//! value is fixed in the code: nothing a peer sends (its Origin-Host, an Application-Id) becomes
//! a label, so the families' sizes are bounded whatever peers come and go.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::message::Message;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CommandLabels {
    pub application: u32,
    pub command: u32,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AnswerLabels {
    pub application: u32,
    pub command: u32,
    /// `2xxx` .. `5xxx` of the Result-Code or Experimental-Result-Code; `none` without either.
    pub result_class: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusedLabels {
    /// `awaiting_cer_limit`, `first_message_too_long`, `tls_handshake` or `peer_identity`.
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OversizeLabels {
    /// `request` (answered 5015) or `answer` (its request failed).
    pub kind: &'static str,
}

/// Why a connection was closed before its capabilities exchange.
pub(crate) const AWAITING_CER_LIMIT: &str = "awaiting_cer_limit";
pub(crate) const FIRST_MESSAGE_TOO_LONG: &str = "first_message_too_long";
/// The TLS handshake failed (no client certificate, one of another CA, or a server certificate
/// not naming the peer we connect to).
pub(crate) const TLS_HANDSHAKE: &str = "tls_handshake";
/// A TLS peer's certificate does not name the Origin-Host of its CER (answered 3010).
pub(crate) const PEER_IDENTITY: &str = "peer_identity";

type LatencyFamily = Family<CommandLabels, Histogram, fn() -> Histogram>;

/// Upper bounds, seconds: 1-2-5 steps from 50 µs to 5 s, so that "under 1 ms" or "under 5 ms"
/// is read off a bucket boundary rather than interpolated. The same as the SBI layer's
/// (`sbi::layer::metrics::LATENCY_BUCKETS`; the crates do not depend on each other): the bench
/// kit, which reads both, checks that they agree.
pub const LATENCY_BUCKETS: [f64; 16] = [
    0.000_05, 0.000_1, 0.000_2, 0.000_5, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0,
    2.0, 5.0,
];

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

/// The node's metric families. They exist whether or not they are registered anywhere, so the
/// request path never checks; registering makes them visible on an NF's `/metrics`.
pub struct NodeMetrics {
    answers: Family<AnswerLabels, Counter>,
    latency: LatencyFamily,
    refused: Family<RefusedLabels, Counter>,
    oversize: Family<OversizeLabels, Counter>,
    /// Also the count `max_connections_before_cer` is enforced with.
    pub(crate) awaiting_cer: Gauge,
}

impl Default for NodeMetrics {
    fn default() -> Self {
        NodeMetrics {
            answers: Family::default(),
            latency: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
            refused: Family::default(),
            oversize: Family::default(),
            awaiting_cer: Gauge::default(),
        }
    }
}

const CLASSES: [&str; 4] = ["2xxx", "3xxx", "4xxx", "5xxx"];

fn result_class(answer: &Message) -> &'static str {
    match answer.any_result_code() {
        Some(c @ 2000..=5999) => CLASSES[(c / 1000 - 2) as usize],
        _ => "none",
    }
}

impl NodeMetrics {
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "diameter_answers",
            "Answers to requests handled locally or relayed, by application, command and result class",
            self.answers.clone(),
        );
        registry.register(
            "diameter_request_duration_seconds",
            "Time from a request reaching its handler or relay to its answer, by application and command",
            self.latency.clone(),
        );
        registry.register(
            "diameter_connections_refused",
            "Connections closed before their capabilities exchange, by reason",
            self.refused.clone(),
        );
        registry.register(
            "diameter_oversize_messages",
            "Messages over the size limit of their application after the capabilities exchange, skipped unread",
            self.oversize.clone(),
        );
        registry.register(
            "diameter_connections_awaiting_cer",
            "Accepted connections whose capabilities exchange is not done",
            self.awaiting_cer.clone(),
        );
    }

    pub(crate) fn refused(&self, reason: &'static str) {
        self.refused.get_or_create(&RefusedLabels { reason }).inc();
    }

    pub(crate) fn oversize(&self, request: bool) {
        let kind = if request { "request" } else { "answer" };
        self.oversize.get_or_create(&OversizeLabels { kind }).inc();
    }

    /// One request answered (locally or by the peer it was relayed to) after `elapsed`.
    pub(crate) fn answered(
        &self,
        application: u32,
        command: u32,
        answer: &Message,
        elapsed: Duration,
    ) {
        let result_class = result_class(answer);
        self.answers.get_or_create(&AnswerLabels { application, command, result_class }).inc();
        self.latency
            .get_or_create(&CommandLabels { application, command })
            .observe(elapsed.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dictionary::base;

    fn text(m: &NodeMetrics) -> String {
        let mut r = Registry::default();
        m.register(&mut r);
        let mut s = String::new();
        prometheus_client::encoding::text::encode(&mut s, &r).unwrap();
        s
    }

    #[test]
    fn answers_are_counted_by_result_class_and_timed_by_command() {
        let m = NodeMetrics::default();
        let ok = Message::request(16777236, 265).avp(base::RESULT_CODE.u32(2001));
        let exp =
            Message::request(16777236, 265).avp(crate::builders::experimental_result(10415, 5065));
        m.answered(16777236, 265, &ok, Duration::from_micros(300));
        m.answered(16777236, 265, &ok, Duration::from_millis(3));
        m.answered(16777236, 265, &exp, Duration::from_millis(30));
        m.answered(16777236, 275, &Message::request(16777236, 275), Duration::ZERO);
        let s = text(&m);
        assert!(s.contains(r#"diameter_answers_total{application="16777236",command="265",result_class="2xxx"} 2"#), "{s}");
        assert!(s.contains(r#"result_class="5xxx"} 1"#), "{s}");
        assert!(s.contains(r#"command="275",result_class="none"} 1"#), "{s}");
        // 300 µs and 3 ms are both at or under 5 ms; 30 ms is not.
        assert!(s.contains(r#"diameter_request_duration_seconds_bucket{le="0.005",application="16777236",command="265"} 2"#), "{s}");
        assert!(
            s.contains(
                r#"diameter_request_duration_seconds_count{application="16777236",command="265"} 3"#
            ),
            "{s}"
        );
    }
}
