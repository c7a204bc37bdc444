//! [`TcpSinkConfig`]: a TCP feed's endpoints, delivery guarantee, TLS and limits.

use std::path::PathBuf;
use std::sync::Arc;

use rustls_pki_types::ServerName;
use sbi::InvalidParam;
use serde::{Deserialize, Serialize};

use crate::sinks::config::{
    check_address, check_ca_files, check_identity, default_backoff_max_ms, default_backoff_min_ms,
    default_connect_timeout_ms, default_weight, Balance, Common,
};

/// A TCP feed (`"type": "tcp"`): each envelope framed as a u32 big-endian length and the
/// envelope, written over one persistent connection per endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpSinkConfig {
    /// The consumers; each batch goes to one of them.
    pub endpoints: Vec<TcpEndpoint>,
    /// How batches are spread over the endpoints. Default `round_robin`.
    #[serde(default)]
    pub balance: Balance,
    /// When a batch counts as delivered. Default `written`.
    #[serde(default)]
    pub delivery: Delivery,
    /// TLS towards the consumers; absent means plain TCP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TcpTlsConfig>,
    /// Time to open a connection (and finish the TLS handshake). Default 1000.
    #[serde(default = "default_connect_timeout_ms")]
    pub connect_timeout_ms: u64,
    /// Time for one batch to be written and flushed, and in `acknowledged` mode acknowledged;
    /// past it the connection is closed and the batch tried on the next endpoint. Default 5000.
    #[serde(default = "default_write_timeout_ms")]
    pub write_timeout_ms: u64,
    /// Most envelopes written at once: a larger batch is split into writes of this many, each
    /// balanced on its own. Default 1024.
    #[serde(default = "default_max_batch")]
    pub max_batch: usize,
    /// Writes (in `acknowledged` mode: writes not yet acknowledged) in progress at once across
    /// the endpoints; a delivery beyond it waits. Default 8.
    #[serde(default = "default_max_in_flight")]
    pub max_in_flight: usize,
    /// Backoff after an endpoint's first failure in a row, in milliseconds; it doubles with
    /// each further failure up to `backoff_max_ms`. Default 100.
    #[serde(default = "default_backoff_min_ms")]
    pub backoff_min_ms: u64,
    /// Default 5000.
    #[serde(default = "default_backoff_max_ms")]
    pub backoff_max_ms: u64,
}

/// One consumer of a TCP feed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpEndpoint {
    /// `host:port`: an IP address (IPv6 in brackets) or a DNS name, resolved at each connect.
    pub address: String,
    /// Its share with `balance = "weighted"`. Default 1.
    #[serde(default = "default_weight")]
    pub weight: u32,
}

/// When a TCP feed counts a batch as delivered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Delivery {
    /// Once the batch is written and flushed into the socket. Cheap, but what is still in the
    /// kernel's buffers or the consumer's when the consumer dies is lost.
    #[default]
    Written,
    /// Once the consumer acknowledged it: the consumer writes back, on the same connection, the
    /// u64 big-endian count of frames it has processed since the connection opened (whenever it
    /// likes: per frame, per batch). Nothing unacknowledged is counted as delivered.
    Acknowledged,
}

/// TLS towards a TCP feed's consumers (the reference's TLS on TCP feeds, D8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpTlsConfig {
    /// PEM files of the CAs trusted to sign the consumers' certificates. There is no built-in
    /// trust store: a consumer's CA must be listed.
    pub ca_files: Vec<PathBuf>,
    /// The name the consumers' certificates must carry; default: the endpoint's host (a DNS
    /// name or an IP address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
    /// A client certificate chain (PEM, leaf first) for consumers that want mutual TLS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_file: Option<PathBuf>,
    /// Its private key (PEM: PKCS#8, PKCS#1 or SEC1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_file: Option<PathBuf>,
}

fn default_write_timeout_ms() -> u64 {
    5_000
}
fn default_max_batch() -> usize {
    1_024
}
fn default_max_in_flight() -> usize {
    8
}

impl TcpSinkConfig {
    pub(crate) fn validate(&self, errs: &mut Vec<InvalidParam>) {
        let weights: Vec<u32> = self.endpoints.iter().map(|e| e.weight).collect();
        Common {
            weights: &weights,
            max_batch: self.max_batch,
            max_in_flight: self.max_in_flight,
            timeouts: [
                ("connect_timeout_ms", self.connect_timeout_ms),
                ("write_timeout_ms", self.write_timeout_ms),
            ],
            backoff_min_ms: self.backoff_min_ms,
            backoff_max_ms: self.backoff_max_ms,
        }
        .validate(errs);
        for (i, e) in self.endpoints.iter().enumerate() {
            if let Err(why) = check_address(&e.address) {
                errs.push(InvalidParam::new(format!("/endpoints/{i}/address"), why));
            }
        }
        if let Some(tls) = &self.tls {
            if tls.ca_files.is_empty() {
                errs.push(InvalidParam::new(
                    "/tls/ca_files",
                    "list the CA that signs the consumers' certificates",
                ));
            }
            check_ca_files(&tls.ca_files, "/tls/ca_files", errs);
            check_identity(tls.cert_file.as_deref(), tls.key_file.as_deref(), "/tls", errs);
            if let Some(name) = &tls.server_name {
                if ServerName::try_from(name.as_str()).is_err() {
                    errs.push(InvalidParam::new("/tls/server_name", "a DNS name or an IP address"));
                }
            }
        }
    }

    /// The rustls client configuration, once [`validate`](Self::validate) found nothing wrong.
    pub(crate) fn rustls(&self) -> Result<Option<Arc<rustls::ClientConfig>>, InvalidParam> {
        let Some(tls) = &self.tls else { return Ok(None) };
        let bad = |at: &str, e: &dyn std::fmt::Display| InvalidParam::new(at, e.to_string());
        let mut roots = rustls::RootCertStore::empty();
        for (i, f) in tls.ca_files.iter().enumerate() {
            let at = format!("/tls/ca_files/{i}");
            for cert in sbi::tls::load_certs(f).map_err(|e| bad(&at, &e))? {
                roots.add(cert).map_err(|e| bad(&at, &e))?;
            }
        }
        let builder = rustls::ClientConfig::builder_with_provider(sbi::tls::provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| bad("/tls", &e))?
            .with_root_certificates(roots);
        let config = match (&tls.cert_file, &tls.key_file) {
            (Some(c), Some(k)) => {
                let chain = sbi::tls::load_certs(c).map_err(|e| bad("/tls/cert_file", &e))?;
                let key = sbi::tls::load_key(k).map_err(|e| bad("/tls/key_file", &e))?;
                builder.with_client_auth_cert(chain, key).map_err(|e| bad("/tls/cert_file", &e))?
            }
            _ => builder.with_no_client_auth(),
        };
        Ok(Some(Arc::new(config)))
    }
}

/// The TLS name to verify an endpoint's certificate against.
pub(crate) fn server_name(
    tls: &TcpTlsConfig,
    address: &str,
) -> Result<ServerName<'static>, InvalidParam> {
    let host = match &tls.server_name {
        Some(n) => n.as_str(),
        None => {
            let host = address.rsplit_once(':').map_or(address, |(h, _)| h);
            host.trim_start_matches('[').trim_end_matches(']')
        }
    };
    ServerName::try_from(host.to_owned())
        .map_err(|_| InvalidParam::new("/tls/server_name", "a DNS name or an IP address"))
}
