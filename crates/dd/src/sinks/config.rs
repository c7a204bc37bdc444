//! What a feed's sink is: [`SinkConfig`], the object a feed carries in the admin API
//! (`/dd-admin/v1/feeds`) and in the configuration file, tagged by `type`. Field names are
//! snake_case like the rest of fivecore's configuration; every field but `type` and `endpoints`
//! may be left out and takes the default shown.
//!
//! A TCP feed to two consumers sharing the load 60/40, each acknowledging what it processed, over
//! TLS:
//!
//! ```json
//! {
//!   "type": "tcp",
//!   "endpoints": [
//!     { "address": "10.0.0.5:9000", "weight": 60 },
//!     { "address": "probe-b.example:9000", "weight": 40 }
//!   ],
//!   "balance": "weighted",
//!   "delivery": "acknowledged",
//!   "tls": { "ca_files": ["/etc/fivecore/probe-ca.pem"] },
//!   "connect_timeout_ms": 1000,
//!   "write_timeout_ms": 5000,
//!   "max_batch": 1024,
//!   "max_in_flight": 8,
//!   "backoff_min_ms": 100,
//!   "backoff_max_ms": 5000
//! }
//! ```
//!
//! An HTTP/2 feed (h2c with prior knowledge for `http://`, TLS with ALPN `h2` for `https://`),
//! round robin over its endpoints:
//!
//! ```json
//! {
//!   "type": "http2",
//!   "endpoints": [
//!     { "uri": "http://10.0.0.7:8080/copies" },
//!     { "uri": "http://10.0.0.8:8080/copies" }
//!   ],
//!   "balance": "round_robin",
//!   "connect_timeout_ms": 1000,
//!   "request_timeout_ms": 5000,
//!   "max_batch": 256,
//!   "max_in_flight": 16,
//!   "backoff_min_ms": 100,
//!   "backoff_max_ms": 5000
//! }
//! ```
//!
//! [`SinkConfig::validate`] lists every wrong field at once as `InvalidParam`s whose `param` is
//! a JSON pointer into the sink object (`/endpoints/1/weight`); the admin API puts the sink's own
//! place in front (`/sink/endpoints/1/weight`) and answers 400 with them.

use std::path::{Path, PathBuf};

use sbi::InvalidParam;
use serde::{Deserialize, Serialize};

pub use super::http2::config::{Http2Endpoint, Http2SinkConfig};
pub use super::tcp::config::{Delivery, TcpEndpoint, TcpSinkConfig, TcpTlsConfig};

/// A feed's sink.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SinkConfig {
    /// Length-framed envelopes over a TCP (or TLS) connection per endpoint.
    Tcp(TcpSinkConfig),
    /// One HTTP/2 POST of framed envelopes per batch.
    Http2(Http2SinkConfig),
}

impl SinkConfig {
    /// Every wrong field, as JSON pointers into this object; empty when the sink can be built.
    /// Reads the TLS files it names (a missing or unreadable CA is a wrong field, not a failure
    /// on the first batch).
    pub fn validate(&self) -> Vec<InvalidParam> {
        let mut errs = Vec::new();
        match self {
            SinkConfig::Tcp(c) => c.validate(&mut errs),
            SinkConfig::Http2(c) => c.validate(&mut errs),
        }
        errs
    }

    /// `tcp` or `http2`.
    pub fn kind(&self) -> &'static str {
        match self {
            SinkConfig::Tcp(_) => "tcp",
            SinkConfig::Http2(_) => "http2",
        }
    }
}

/// How batches are spread over a feed's endpoints.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Balance {
    /// Each batch to the next endpoint in turn; weights are ignored.
    #[default]
    RoundRobin,
    /// Each endpoint gets `weight / sum of weights` of the batches (smooth weighted round
    /// robin: 60/40 is 3 batches of 5 to the first, 2 to the second, interleaved).
    Weighted,
}

/// The most endpoints a feed may list (the balancer keeps one bit per endpoint a batch tried).
pub const MAX_ENDPOINTS: usize = 64;

// Defaults shared by both kinds, as named functions so serde and the docs agree.
pub(crate) fn default_weight() -> u32 {
    1
}
pub(crate) fn default_connect_timeout_ms() -> u64 {
    1_000
}
pub(crate) fn default_backoff_min_ms() -> u64 {
    100
}
pub(crate) fn default_backoff_max_ms() -> u64 {
    5_000
}

/// The checks both kinds share: endpoints (count and weights), batch and in-flight bounds,
/// timeouts and backoff.
pub(crate) struct Common<'a> {
    pub weights: &'a [u32],
    pub max_batch: usize,
    pub max_in_flight: usize,
    pub timeouts: [(&'static str, u64); 2],
    pub backoff_min_ms: u64,
    pub backoff_max_ms: u64,
}

impl Common<'_> {
    pub fn validate(&self, errs: &mut Vec<InvalidParam>) {
        if self.weights.is_empty() {
            errs.push(InvalidParam::new("/endpoints", "a feed needs at least one endpoint"));
        } else if self.weights.len() > MAX_ENDPOINTS {
            errs.push(InvalidParam::new(
                "/endpoints",
                format!("at most {MAX_ENDPOINTS} endpoints per feed"),
            ));
        }
        for (i, w) in self.weights.iter().enumerate() {
            if *w == 0 {
                errs.push(InvalidParam::new(
                    format!("/endpoints/{i}/weight"),
                    "a weight is a positive integer",
                ));
            }
        }
        if !(1..=65_536).contains(&self.max_batch) {
            errs.push(InvalidParam::new("/max_batch", "envelopes per batch, 1..=65536"));
        }
        if !(1..=4_096).contains(&self.max_in_flight) {
            errs.push(InvalidParam::new("/max_in_flight", "batches in flight, 1..=4096"));
        }
        for (name, ms) in self.timeouts {
            if !(1..=600_000).contains(&ms) {
                errs.push(InvalidParam::new(format!("/{name}"), "milliseconds, 1..=600000"));
            }
        }
        if !(1..=600_000).contains(&self.backoff_min_ms) {
            errs.push(InvalidParam::new("/backoff_min_ms", "milliseconds, 1..=600000"));
        }
        if !(1..=600_000).contains(&self.backoff_max_ms)
            || self.backoff_max_ms < self.backoff_min_ms
        {
            errs.push(InvalidParam::new(
                "/backoff_max_ms",
                "milliseconds, at least backoff_min_ms and at most 600000",
            ));
        }
    }
}

/// `host:port` with a non-zero port, the host an IP address (IPv6 in brackets) or a DNS name.
pub(crate) fn check_address(address: &str) -> Result<(), &'static str> {
    if address.parse::<std::net::SocketAddr>().is_ok() {
        return if address.ends_with(":0") {
            Err("port 0 is not a port to connect to")
        } else {
            Ok(())
        };
    }
    let Some((host, port)) = address.rsplit_once(':') else {
        return Err("host:port, e.g. 10.0.0.5:9000 or probe.example:9000");
    };
    match port.parse::<u16>() {
        Ok(0) | Err(_) => return Err("the port is a number 1..=65535"),
        Ok(_) => {}
    }
    let dns = !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    if dns {
        Ok(())
    } else {
        Err("the host is an IP address (IPv6 in brackets) or a DNS name")
    }
}

/// Each file exists and holds at least one PEM certificate.
pub(crate) fn check_ca_files(files: &[PathBuf], at: &str, errs: &mut Vec<InvalidParam>) {
    for (i, f) in files.iter().enumerate() {
        if let Err(e) = sbi::tls::load_certs(f) {
            errs.push(InvalidParam::new(format!("{at}/{i}"), e.to_string()));
        }
    }
}

/// A client identity: both files or neither, each readable.
pub(crate) fn check_identity(
    cert: Option<&Path>,
    key: Option<&Path>,
    at: &str,
    errs: &mut Vec<InvalidParam>,
) {
    match (cert, key) {
        (Some(c), Some(k)) => {
            if let Err(e) = sbi::tls::load_certs(c) {
                errs.push(InvalidParam::new(format!("{at}/cert_file"), e.to_string()));
            }
            if let Err(e) = sbi::tls::load_key(k) {
                errs.push(InvalidParam::new(format!("{at}/key_file"), e.to_string()));
            }
        }
        (Some(_), None) => errs.push(InvalidParam::new(
            format!("{at}/key_file"),
            "a client certificate needs its key",
        )),
        (None, Some(_)) => errs.push(InvalidParam::new(
            format!("{at}/cert_file"),
            "a client key needs its certificate",
        )),
        (None, None) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON examples of the module documentation, verbatim.
    fn doc_examples() -> Vec<String> {
        let src = include_str!("config.rs");
        let mut out = Vec::new();
        let mut cur: Option<String> = None;
        for line in src.lines() {
            let Some(text) = line.strip_prefix("//!") else { continue };
            let text = text.strip_prefix(' ').unwrap_or(text);
            match (&mut cur, text) {
                (None, "```json") => cur = Some(String::new()),
                (Some(_), "```") => out.push(cur.take().unwrap_or_default()),
                (Some(buf), t) => {
                    buf.push_str(t);
                    buf.push('\n');
                }
                (None, _) => {}
            }
        }
        out
    }

    #[test]
    fn the_documented_examples_parse_and_spell_out_the_defaults() {
        let examples = doc_examples();
        assert_eq!(examples.len(), 2);
        let tcp: SinkConfig = serde_json::from_str(&examples[0]).unwrap();
        let SinkConfig::Tcp(t) = &tcp else { panic!("{tcp:?}") };
        assert_eq!(t.balance, Balance::Weighted);
        assert_eq!(t.delivery, Delivery::Acknowledged);
        assert_eq!(t.endpoints[1].weight, 40);
        let http: SinkConfig = serde_json::from_str(&examples[1]).unwrap();
        // The HTTP/2 example lists every default: the shortest form is the same sink.
        let short: SinkConfig = serde_json::from_str(
            r#"{"type":"http2","endpoints":[{"uri":"http://10.0.0.7:8080/copies"},{"uri":"http://10.0.0.8:8080/copies"}]}"#,
        )
        .unwrap();
        assert_eq!(http, short);
        // So does the TCP example, but for what it sets on purpose.
        let mut t_short: TcpSinkConfig = serde_json::from_str(
            r#"{"endpoints":[{"address":"10.0.0.5:9000","weight":60},{"address":"probe-b.example:9000","weight":40}]}"#,
        )
        .unwrap();
        t_short.balance = Balance::Weighted;
        t_short.delivery = Delivery::Acknowledged;
        t_short.tls = t.tls.clone();
        assert_eq!(&t_short, t);
        // And it survives a round trip through the admin API's JSON.
        let back: SinkConfig = serde_json::from_value(serde_json::to_value(&tcp).unwrap()).unwrap();
        assert_eq!(back, tcp);
    }

    #[test]
    fn unknown_fields_and_kinds_are_refused() {
        for bad in [
            r#"{"type":"tcp","endpoints":[{"address":"a:1"}],"delivry":"written"}"#,
            r#"{"type":"tcp","endpoints":[{"address":"a:1","wieght":2}]}"#,
            r#"{"type":"udp","endpoints":[]}"#,
            r#"{"endpoints":[{"address":"a:1"}]}"#,
            r#"{"type":"http2","endpoints":[{"uri":"http://a/"}],"balance":"random"}"#,
        ] {
            assert!(serde_json::from_str::<SinkConfig>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn addresses_are_host_and_port() {
        for ok in ["10.0.0.5:9000", "[2001:db8::1]:9000", "probe-b.example:9000", "localhost:1"] {
            assert_eq!(check_address(ok), Ok(()), "{ok}");
        }
        for bad in [
            "10.0.0.5",
            "10.0.0.5:0",
            "probe:",
            ":9000",
            "probe:65536",
            "2001:db8::1:9000x",
            "bad host:9000",
            "-probe:9000",
            "a..b:9000",
        ] {
            assert!(check_address(bad).is_err(), "{bad}");
        }
    }
}
