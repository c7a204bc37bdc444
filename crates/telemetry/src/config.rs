//! `[telemetry]`: what an NF records of the SBI requests it serves and sends, and where it sends
//! it. Without `[telemetry.otlp]` nothing is recorded or exported; an incoming `traceparent` is
//! still passed on to the NFs called for the request (docs/telemetry.md).

use std::collections::BTreeMap;

use serde::Deserialize;

/// `[telemetry]`, shared by every NF of a configuration file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// Share of the traces this NF starts (requests that come without a `traceparent`) that are
    /// recorded, 0.0 to 1.0. A trace started elsewhere follows its `traceparent`'s sampled flag,
    /// so one trace is recorded whole or not at all. Default 1.0.
    pub sample_ratio: f64,
    /// The OTLP collector; absent: no span is recorded or exported.
    pub otlp: Option<OtlpConfig>,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig { sample_ratio: 1.0, otlp: None }
    }
}

/// `[telemetry.otlp]`: spans exported by OTLP/HTTP, in batches, from a bounded queue.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OtlpConfig {
    /// The collector's OTLP/HTTP endpoint, `http://host:4318`; spans are POSTed to
    /// `<endpoint>/v1/traces` unless the endpoint already has a path.
    pub endpoint: String,
    /// Only `http/protobuf` (OTLP/HTTP, binary protobuf). gRPC would add tonic to the build.
    #[serde(default)]
    pub protocol: Protocol,
    /// How long one export may take, ms (connect, send, answer). Default 3000.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Spans waiting to be exported, at most; a span ended while the queue is full is dropped
    /// and counted (`otlp_spans_dropped_total{reason="queue_full"}`), never waited for.
    /// Default 8192.
    #[serde(default = "default_queue_size")]
    pub queue_size: usize,
    /// Spans per export request. Default 512.
    #[serde(default = "default_batch_size")]
    pub batch_size: usize,
    /// Longest a span waits in the queue before an export, ms, when fewer than `batch_size`
    /// are queued. Default 1000.
    #[serde(default = "default_interval_ms")]
    pub interval_ms: u64,
    /// Headers sent with every export (an API key of a hosted collector).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

/// The OTLP transport.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum Protocol {
    #[default]
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
}

fn default_timeout_ms() -> u64 {
    3_000
}
fn default_queue_size() -> usize {
    8_192
}
fn default_batch_size() -> usize {
    512
}
fn default_interval_ms() -> u64 {
    1_000
}

impl OtlpConfig {
    /// An exporter to `endpoint` with every other setting at its default.
    pub fn new(endpoint: impl Into<String>) -> Self {
        OtlpConfig {
            endpoint: endpoint.into(),
            protocol: Protocol::default(),
            timeout_ms: default_timeout_ms(),
            queue_size: default_queue_size(),
            batch_size: default_batch_size(),
            interval_ms: default_interval_ms(),
            headers: BTreeMap::new(),
        }
    }

    /// The URL spans are POSTed to.
    pub fn traces_url(&self) -> String {
        let e = self.endpoint.trim_end_matches('/');
        let has_path = e.split_once("://").is_some_and(|(_, rest)| rest.contains('/'));
        if has_path {
            e.to_owned()
        } else {
            format!("{e}/v1/traces")
        }
    }
}

impl TelemetryConfig {
    /// The first setting that cannot work, as `(name, why)`.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if !(0.0..=1.0).contains(&self.sample_ratio) {
            return Err(("sample_ratio", format!("{} is outside 0.0..=1.0", self.sample_ratio)));
        }
        let Some(o) = &self.otlp else { return Ok(()) };
        match o.endpoint.parse::<http::Uri>() {
            Ok(u) if u.scheme_str() == Some("http") && u.authority().is_some() => {}
            Ok(u) if u.scheme_str() == Some("https") => {
                return Err((
                    "otlp.endpoint",
                    "https is not supported: export to a local collector over http".into(),
                ))
            }
            _ => {
                return Err((
                    "otlp.endpoint",
                    format!("{:?} is not an http://host:port URL", o.endpoint),
                ))
            }
        }
        if o.timeout_ms == 0 {
            return Err(("otlp.timeout_ms", "must be > 0".into()));
        }
        if o.interval_ms == 0 {
            return Err(("otlp.interval_ms", "must be > 0".into()));
        }
        if o.batch_size == 0 {
            return Err(("otlp.batch_size", "must be > 0".into()));
        }
        if o.queue_size < o.batch_size {
            return Err((
                "otlp.queue_size",
                format!("{} is less than batch_size ({})", o.queue_size, o.batch_size),
            ));
        }
        for name in o.headers.keys() {
            if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err(("otlp.headers", format!("{name:?} is not a header name")));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_a_full_section() {
        let c: TelemetryConfig = toml::from_str("").unwrap();
        assert_eq!(c, TelemetryConfig::default());
        assert!(c.validate().is_ok());
        let c: TelemetryConfig = toml::from_str(
            "sample_ratio = 0.25\n[otlp]\nendpoint = \"http://collector:4318\"\n\
             protocol = \"http/protobuf\"\nqueue_size = 100\nbatch_size = 10\n\
             headers = { x-api-key = \"k\" }",
        )
        .unwrap();
        let o = c.otlp.as_ref().unwrap();
        assert_eq!((o.queue_size, o.batch_size, o.timeout_ms), (100, 10, 3000));
        assert_eq!(o.traces_url(), "http://collector:4318/v1/traces");
        assert!(c.validate().is_ok());
    }

    #[test]
    fn the_traces_path_is_added_only_to_a_bare_endpoint() {
        assert_eq!(OtlpConfig::new("http://h:4318/").traces_url(), "http://h:4318/v1/traces");
        assert_eq!(OtlpConfig::new("http://h:4318/otlp/t").traces_url(), "http://h:4318/otlp/t");
    }

    #[test]
    fn what_cannot_work_is_refused_naming_the_setting() {
        let bad = |text: &str| {
            let c: TelemetryConfig = toml::from_str(text).unwrap();
            c.validate().unwrap_err().0
        };
        assert_eq!(bad("sample_ratio = 1.5"), "sample_ratio");
        assert_eq!(bad("[otlp]\nendpoint = \"collector:4318\""), "otlp.endpoint");
        assert_eq!(bad("[otlp]\nendpoint = \"https://c:4318\""), "otlp.endpoint");
        assert_eq!(bad("[otlp]\nendpoint = \"http://c\"\nbatch_size = 0"), "otlp.batch_size");
        assert_eq!(
            bad("[otlp]\nendpoint = \"http://c\"\nqueue_size = 4\nbatch_size = 8"),
            "otlp.queue_size"
        );
        assert!(toml::from_str::<TelemetryConfig>(
            "[otlp]\nendpoint = \"http://c\"\nprotocol = \"grpc\""
        )
        .is_err());
        assert!(toml::from_str::<TelemetryConfig>("[otlp]\nendpoint = \"http://c\"\nqueue = 1")
            .is_err());
    }
}
