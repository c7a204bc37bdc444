//! [`Http2SinkConfig`]: an HTTP/2 feed's endpoints, TLS and limits.

use http::uri::Scheme;
use http::Uri;
use sbi::client::{ClientConfig, TlsClientConfig};
use sbi::InvalidParam;
use serde::{Deserialize, Serialize};

use crate::sinks::config::{
    check_ca_files, check_identity, default_backoff_max_ms, default_backoff_min_ms,
    default_connect_timeout_ms, default_weight, Balance, Common,
};

/// An HTTP/2 feed (`"type": "http2"`): one POST per batch, the body the batch's envelopes each
/// framed as a u32 big-endian length and the envelope, content-type
/// `application/vnd.fivecore.dd-copies.v1` (the ingest API's own format).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Http2SinkConfig {
    /// The consumers; each batch goes to one of them.
    pub endpoints: Vec<Http2Endpoint>,
    /// How batches are spread over the endpoints. Default `round_robin`.
    #[serde(default)]
    pub balance: Balance,
    /// TLS towards `https://` endpoints (CAs, optional client certificate); needed by them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsClientConfig>,
    /// Time to open a connection (and finish the TLS handshake). Default 1000.
    #[serde(default = "default_connect_timeout_ms")]
    pub connect_timeout_ms: u64,
    /// Time from sending a batch to the consumer's whole answer; past it the batch is tried on
    /// the next endpoint. Default 5000.
    #[serde(default = "default_request_timeout_ms")]
    pub request_timeout_ms: u64,
    /// Most envelopes per request: a larger batch is sent as several requests, one after the
    /// other, each balanced on its own. Default 256.
    #[serde(default = "default_max_batch")]
    pub max_batch: usize,
    /// Requests in progress at once across the endpoints; a delivery beyond it waits. Default 16.
    #[serde(default = "default_max_in_flight")]
    pub max_in_flight: usize,
    /// Backoff after an endpoint's first failure in a row, in milliseconds; it doubles with
    /// each further failure up to `backoff_max_ms`. A 429 or 503 with `Retry-After` sets it
    /// instead. Default 100.
    #[serde(default = "default_backoff_min_ms")]
    pub backoff_min_ms: u64,
    /// Default 5000.
    #[serde(default = "default_backoff_max_ms")]
    pub backoff_max_ms: u64,
}

/// One consumer of an HTTP/2 feed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Http2Endpoint {
    /// Where batches are POSTed: `http://` (h2c, prior knowledge) or `https://` (TLS, ALPN h2).
    pub uri: String,
    /// Its share with `balance = "weighted"`. Default 1.
    #[serde(default = "default_weight")]
    pub weight: u32,
}

fn default_request_timeout_ms() -> u64 {
    5_000
}
fn default_max_batch() -> usize {
    256
}
fn default_max_in_flight() -> usize {
    16
}

/// The endpoint's URI when it is one a feed can POST to.
pub(crate) fn parse_uri(uri: &str) -> Result<Uri, &'static str> {
    let u: Uri = uri.parse().map_err(|_| "not a URI")?;
    match u.scheme() {
        Some(s) if *s == Scheme::HTTP || *s == Scheme::HTTPS => {}
        _ => return Err("an absolute http:// or https:// URI"),
    }
    match u.authority() {
        Some(a) if !a.host().is_empty() && a.port_u16() != Some(0) => Ok(u),
        _ => Err("the URI names no host (or port 0)"),
    }
}

impl Http2SinkConfig {
    pub(crate) fn validate(&self, errs: &mut Vec<InvalidParam>) {
        let weights: Vec<u32> = self.endpoints.iter().map(|e| e.weight).collect();
        Common {
            weights: &weights,
            max_batch: self.max_batch,
            max_in_flight: self.max_in_flight,
            timeouts: [
                ("connect_timeout_ms", self.connect_timeout_ms),
                ("request_timeout_ms", self.request_timeout_ms),
            ],
            backoff_min_ms: self.backoff_min_ms,
            backoff_max_ms: self.backoff_max_ms,
        }
        .validate(errs);
        let mut https = false;
        for (i, e) in self.endpoints.iter().enumerate() {
            match parse_uri(&e.uri) {
                Ok(u) => https |= u.scheme() == Some(&Scheme::HTTPS),
                Err(why) => errs.push(InvalidParam::new(format!("/endpoints/{i}/uri"), why)),
            }
        }
        let ca_files = self.tls.as_ref().map_or(&[][..], |t| &t.ca_files[..]);
        if https && ca_files.is_empty() {
            errs.push(InvalidParam::new(
                "/tls/ca_files",
                "an https endpoint needs the CA that signs its certificate",
            ));
        }
        if let Some(tls) = &self.tls {
            check_ca_files(&tls.ca_files, "/tls/ca_files", errs);
            check_identity(tls.cert_file.as_deref(), tls.key_file.as_deref(), "/tls", errs);
        }
    }

    /// The SBI client's configuration for this feed: its own pool, one connection per
    /// endpoint, the feed's timeouts, no alternates (the feed balances and fails over itself).
    pub(crate) fn client_config(&self) -> ClientConfig {
        ClientConfig {
            request_timeout_ms: self.request_timeout_ms,
            connect_timeout_ms: self.connect_timeout_ms,
            max_alternates: 0,
            connections_per_producer: 1,
            user_agent: Some("fivecore-dd-feed".into()),
            tls: self.tls.clone().unwrap_or_default(),
            ..ClientConfig::default()
        }
    }
}
