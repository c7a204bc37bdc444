//! The SBI client every NF uses to call other NFs (3GPP TS 29.500).
//!
//! One [`SbiClient`] per NF process is enough: it is cheap to clone and keeps one pooled HTTP/2
//! connection per producer authority (`scheme://host:port`). `http://` URIs use HTTP/2 with prior
//! knowledge (h2c, the 3GPP norm); `https://` URIs use TLS with ALPN `h2`, verified against the
//! configured root CAs, optionally presenting a client certificate for mutual TLS.
//!
//! Every request gets a `User-Agent` (`<NF type>-<NF instance id>`, see [`user_agent`]) and a
//! `3gpp-Sbi-Sender-Timestamp` when the caller did not set them, and times out after
//! `3gpp-Sbi-Max-Rsp-Time` milliseconds when the request carries that header, otherwise after
//! [`ClientConfig::request_timeout_ms`].
//!
//! [`SbiClient::send_with_alternates`] re-sends a request to alternate producers (the TS 29.500
//! reselection of an alternative NF service producer) when a producer cannot be reached, does
//! not answer in time, or answers 503 Service Unavailable or 504 Gateway Timeout. See [`is_retryable_status`]
//! for why 500 is not retried.
//!
//! ```no_run
//! # async fn demo() -> Result<(), sbi::client::ClientError> {
//! use sbi::client::{user_agent, ClientConfig, SbiClient};
//! use std::time::Duration;
//!
//! let config = ClientConfig {
//!     user_agent: Some(user_agent("PCF", "5a3c4c9e-8f1b-4a8e-9d3c-2f0e1b7a6c55")),
//!     ..ClientConfig::default()
//! };
//! let client = SbiClient::new(&config)?;
//! let rsp = client
//!     .get("http://127.0.0.1:7001/nudr-dr/v2/policy-data/ues/imsi-001010000000001/am-data")
//!     .max_rsp_time(Duration::from_millis(500))
//!     .send()
//!     .await?;
//! if rsp.status().is_success() {
//!     let _body: serde_json::Value = rsp.json()?;
//! } else if let Some(problem) = rsp.problem() {
//!     tracing::warn!(%problem, "UDR refused");
//! }
//! # Ok(())
//! # }
//! ```

use std::error::Error as StdError;
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, CONTENT_TYPE, USER_AGENT};
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{request, HeaderMap, Method, Request, StatusCode, Uri, Version};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

mod connect;
mod pool;
mod trace;

use connect::{Connector, KeepAlive, TlsReload};
use pool::Pool;

use crate::layer::tap::{Exchange, MessageCopy, MessageTap, Peer, TriggerPoint};
use crate::oauth2::TokenSource;

/// The TS 29.500 §5.2.2.2 `User-Agent` of an NF, `<NF type>-<NF instance id>`: `PCF-5a3c...`.
pub use crate::headers::user_agent;
use crate::headers::{format_sender_timestamp, MAX_RSP_TIME, SENDER_TIMESTAMP};

const APPLICATION_JSON: HeaderValue = HeaderValue::from_static("application/json");
const DEFAULT_USER_AGENT: &str = "fivecore";
/// RFC 9113 §6.9.1: a flow-control window may not exceed 2^31-1 octets.
const MAX_WINDOW: u32 = (1 << 31) - 1;
/// RFC 9113 §6.9.2: the initial window is 65 535 octets; smaller values only slow things down.
const MIN_WINDOW: u32 = 65_535;

type BoxError = Box<dyn StdError + Send + Sync>;

// ---------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------

/// How an NF's SBI client talks to other NFs. Every field is optional in a config file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientConfig {
    /// Time, in milliseconds, to wait for a complete answer when the request does not carry
    /// `3gpp-Sbi-Max-Rsp-Time` (which, when present, takes precedence). With alternate producers
    /// each attempt has this budget. Default 3000.
    #[serde(default = "default_request_timeout_ms")]
    pub request_timeout_ms: u64,
    /// Time, in milliseconds, allowed to open a TCP connection (and, for https, to complete the
    /// TLS handshake) to a producer before trying the next alternate. Default 1000.
    #[serde(default = "default_connect_timeout_ms")]
    pub connect_timeout_ms: u64,
    /// Interval, in milliseconds, between HTTP/2 PINGs on each pooled connection, also while
    /// idle, to detect a producer that silently went away. 0 disables PINGs. Default 10000.
    #[serde(default = "default_ping_interval_ms")]
    pub ping_interval_ms: u64,
    /// Time, in milliseconds, to wait for a PING acknowledgement before the connection is
    /// closed and the next request opens a new one. Default 5000.
    #[serde(default = "default_ping_timeout_ms")]
    pub ping_timeout_ms: u64,
    /// Time, in milliseconds, after which a connection with no request in flight is closed.
    /// 0 keeps idle connections open for ever. Default 90000.
    #[serde(default = "default_pool_idle_timeout_ms")]
    pub pool_idle_timeout_ms: u64,
    /// How many alternate producers `send_with_alternates` tries after the first one fails,
    /// so at most `1 + max_alternates` attempts per request. Default 2.
    #[serde(default = "default_max_alternates")]
    pub max_alternates: usize,
    /// HTTP/2 initial stream flow-control window, in bytes, granted to producers: how much of
    /// one answer may be in flight before the client acknowledges it. The default 1 MiB lets a
    /// 65 KB NRF discovery answer arrive in one round trip (the protocol default, 65 535 bytes,
    /// would stall it). Must be 65535..=2147483647.
    #[serde(default = "default_stream_window")]
    pub http2_initial_stream_window: u32,
    /// HTTP/2 initial connection flow-control window, in bytes, shared by all concurrent
    /// answers on one connection. Default 8 MiB. Must be 65535..=2147483647.
    #[serde(default = "default_connection_window")]
    pub http2_initial_connection_window: u32,
    /// HTTP/2 connections kept to each producer, requests spread over them round robin. One
    /// connection carries many streams; more spread a busy producer's frames over several
    /// connection tasks (and so over several cores), so one slow answer burst does not queue
    /// everything behind it. Default 1.
    #[serde(default = "default_connections_per_producer")]
    pub connections_per_producer: usize,
    /// `User-Agent` sent on requests that have none. TS 29.500 §5.2.2.2 wants
    /// `<NF type>-<NF instance id>`, e.g. `PCF-5a3c4c9e-...` (see `user_agent()`); the NF
    /// normally fills this in from its own profile. Unset: `fivecore`.
    #[serde(default)]
    pub user_agent: Option<String>,
    /// TLS towards `https://` producers.
    #[serde(default)]
    pub tls: TlsClientConfig,
}

/// TLS settings for `https://` producers. There are no built-in root CAs: list the CAs that
/// sign your producers' certificates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsClientConfig {
    /// PEM files of the CA certificates trusted to sign producer certificates (each file may
    /// hold several certificates).
    #[serde(default)]
    pub ca_files: Vec<PathBuf>,
    /// PEM file with the client certificate chain (leaf first) presented for mutual TLS.
    /// Requires `key_file`.
    #[serde(default)]
    pub cert_file: Option<PathBuf>,
    /// PEM file with the private key (PKCS#8, PKCS#1 or SEC1) of `cert_file`.
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// Seconds between checks of the files above, made when a connection is opened: a renewed
    /// client certificate (or CA file) is used for the connections opened after it changed,
    /// without a restart (open connections keep theirs). 0: read once. Default 10.
    #[serde(default = "default_tls_reload_secs")]
    pub reload_secs: u64,
}

impl Default for TlsClientConfig {
    fn default() -> Self {
        TlsClientConfig {
            ca_files: Vec::new(),
            cert_file: None,
            key_file: None,
            reload_secs: default_tls_reload_secs(),
        }
    }
}

fn default_tls_reload_secs() -> u64 {
    10
}

fn default_request_timeout_ms() -> u64 {
    3_000
}
fn default_connect_timeout_ms() -> u64 {
    1_000
}
fn default_ping_interval_ms() -> u64 {
    10_000
}
fn default_ping_timeout_ms() -> u64 {
    5_000
}
fn default_pool_idle_timeout_ms() -> u64 {
    90_000
}
fn default_connections_per_producer() -> usize {
    1
}

fn default_max_alternates() -> usize {
    2
}
fn default_stream_window() -> u32 {
    1 << 20
}
fn default_connection_window() -> u32 {
    8 << 20
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            request_timeout_ms: default_request_timeout_ms(),
            connect_timeout_ms: default_connect_timeout_ms(),
            ping_interval_ms: default_ping_interval_ms(),
            ping_timeout_ms: default_ping_timeout_ms(),
            pool_idle_timeout_ms: default_pool_idle_timeout_ms(),
            max_alternates: default_max_alternates(),
            http2_initial_stream_window: default_stream_window(),
            http2_initial_connection_window: default_connection_window(),
            connections_per_producer: default_connections_per_producer(),
            user_agent: None,
            tls: TlsClientConfig::default(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// What can go wrong when calling another NF.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The client could not be built from its configuration (bad value, unreadable PEM, ...).
    #[error("SBI client configuration: {0}")]
    Config(String),
    /// The URI is not an absolute `http://` or `https://` URI (or, for alternates, a
    /// producer apiRoot is unusable).
    #[error("invalid URI `{uri}`: {reason}")]
    InvalidUri { uri: String, reason: String },
    /// The request could not be built (bad header name or value, JSON serialization).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// No connection could be opened to the producer: refused, unreachable, connect timeout,
    /// TLS handshake failure. The request was not sent.
    #[error("cannot connect to {producer}")]
    Connect {
        producer: String,
        #[source]
        source: BoxError,
    },
    /// No complete answer within the request's response time.
    #[error("no answer from {producer} within {after:?}")]
    Timeout { producer: String, after: Duration },
    /// The HTTP/2 exchange failed after the connection was up (reset, GOAWAY, connection lost,
    /// peer rejected our TLS client certificate, ...). The producer may have seen the request.
    #[error("HTTP exchange with {producer} failed")]
    Http {
        producer: String,
        #[source]
        source: BoxError,
    },
    /// `send_with_alternates` was given no producer.
    #[error("no producer to send the request to")]
    NoProducers,
    /// Every producer tried failed or gave a retryable answer; `attempts` lists them in order.
    /// `last_response` is the last retryable answer (503/504) received, if any, e.g. to read
    /// its ProblemDetails or Retry-After.
    #[error("all {} producers tried failed: {}", attempts.len(), DisplayAttempts(attempts))]
    AllProducersFailed { attempts: Vec<Attempt>, last_response: Option<Box<SbiResponse>> },
    /// The answer body is not the JSON expected.
    #[error("JSON body: {0}")]
    Json(#[from] serde_json::Error),
}

impl ClientError {
    /// True for failures after which trying an alternate producer makes sense: connect
    /// failure, timeout, transport failure, unusable producer URI.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ClientError::Connect { .. }
                | ClientError::Timeout { .. }
                | ClientError::Http { .. }
                | ClientError::InvalidUri { .. }
        )
    }

    /// True for a timeout (also when every alternate timed out).
    pub fn is_timeout(&self) -> bool {
        match self {
            ClientError::Timeout { .. } => true,
            ClientError::AllProducersFailed { attempts, .. } => attempts
                .iter()
                .all(|a| matches!(&a.outcome, AttemptOutcome::Failed(e) if e.is_timeout())),
            _ => false,
        }
    }
}

/// One try of `send_with_alternates` on one producer.
#[derive(Debug)]
pub struct Attempt {
    /// The producer's apiRoot as given (`scheme://authority[/prefix]`).
    pub producer: String,
    pub outcome: AttemptOutcome,
}

/// Why an attempt did not end the request.
#[derive(Debug)]
pub enum AttemptOutcome {
    /// The producer answered with a retryable status (503 or 504).
    Status(StatusCode),
    /// The request failed without an answer.
    Failed(Box<ClientError>),
}

impl fmt::Display for Attempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.producer)?;
        match &self.outcome {
            AttemptOutcome::Status(s) => write!(f, "answered {s}"),
            AttemptOutcome::Failed(e) => write!(f, "{}", ErrorChain(&**e)),
        }
    }
}

struct DisplayAttempts<'a>(&'a [Attempt]);

impl fmt::Display for DisplayAttempts<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, a) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "[{}] {a}", i + 1)?;
        }
        Ok(())
    }
}

/// An error and its sources, `outer: inner: innermost`.
struct ErrorChain<'a>(&'a (dyn StdError + 'static));

impl fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut src = self.0.source();
        while let Some(e) = src {
            write!(f, ": {e}")?;
            src = e.source();
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Responses
// ---------------------------------------------------------------------------------------------

/// A complete answer from a producer: status, headers and the whole body.
#[derive(Debug, Clone)]
pub struct SbiResponse {
    status: StatusCode,
    version: Version,
    headers: HeaderMap,
    body: Bytes,
}

impl SbiResponse {
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The HTTP version the answer came over (HTTP/2 for every SBI exchange).
    pub fn version(&self) -> Version {
        self.version
    }

    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The value of header `name` if present and visible ASCII.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name)?.to_str().ok()
    }

    pub fn body(&self) -> &Bytes {
        &self.body
    }

    pub fn into_body(self) -> Bytes {
        self.body
    }

    /// Decodes the body as JSON.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, ClientError> {
        Ok(serde_json::from_slice(&self.body)?)
    }

    /// The ProblemDetails (TS 29.571) of an `application/problem+json` answer, if this is one
    /// and its body is JSON.
    pub fn problem(&self) -> Option<serde_json::Value> {
        let ct = self.headers.get(CONTENT_TYPE)?.to_str().ok()?;
        let media = ct.split(';').next().unwrap_or("").trim();
        if !media.eq_ignore_ascii_case("application/problem+json") {
            return None;
        }
        serde_json::from_slice(&self.body).ok()
    }
}

// ---------------------------------------------------------------------------------------------
// The client
// ---------------------------------------------------------------------------------------------

/// Pooled HTTP/2 client for SBI calls. Clone it freely: clones share the connection pool.
#[derive(Clone)]
pub struct SbiClient {
    inner: Arc<Inner>,
}

struct Inner {
    /// `connections_per_producer` HTTP/2 connections per producer (`client/pool.rs`).
    pool: Pool,
    default_timeout: Duration,
    user_agent: HeaderValue,
    max_alternates: usize,
    /// The message-copy tap (egress request and response), once installed.
    tap: OnceLock<Arc<dyn MessageTap>>,
    /// Where access tokens come from (the nrf-client), once installed.
    tokens: OnceLock<Arc<dyn TokenSource>>,
    /// What makes the client spans, once installed (docs/telemetry.md).
    tracer: OnceLock<telemetry::Tracer>,
    /// Requests started, and whether the [`keep_timer_armed`] task runs.
    requests: AtomicU64,
    timer_kept: AtomicBool,
}

/// How often the task of [`keep_timer_armed`] wakes while the client is in use; request
/// timeouts at least this long never wake the runtime's driver when they are registered.
const KEEP_ARMED_EVERY: Duration = Duration::from_millis(500);
/// Periods without a request after which that task ends (a later request starts it again).
const KEEP_ARMED_IDLE_PERIODS: u32 = 20;

/// Keeps a timer due within [`KEEP_ARMED_EVERY`] in the runtime's timer wheel while the client
/// is in use. Tokio's time driver wakes its parked thread (an eventfd write, then an epoll_wait
/// that returns at once, or another worker woken) whenever a new timer is due before every other
/// one, which at low rates is every request's timeout: measured with the `client_cost` bench,
/// one extra `write` and `epoll_wait` per request. With this task's timer due sooner, a request's
/// timeout is registered without waking anything; the task itself costs two wake-ups a second.
fn keep_timer_armed(inner: &Arc<Inner>) {
    keep_timer_armed_every(inner, KEEP_ARMED_EVERY);
}

fn keep_timer_armed_every(inner: &Arc<Inner>, every: Duration) {
    inner.requests.fetch_add(1, Ordering::Relaxed);
    if inner.timer_kept.load(Ordering::Relaxed) {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
    if inner.timer_kept.swap(true, Ordering::AcqRel) {
        return;
    }
    /// Clears the flag however the task ends (also dropped with its runtime), so the next
    /// request, on whatever runtime, starts it again.
    struct Ended(std::sync::Weak<Inner>);
    impl Drop for Ended {
        fn drop(&mut self) {
            if let Some(inner) = self.0.upgrade() {
                inner.timer_kept.store(false, Ordering::Release);
            }
        }
    }
    let ended = Ended(Arc::downgrade(inner));
    runtime.spawn(async move {
        let weak = &ended.0;
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let (mut seen, mut idle) = (u64::MAX, 0);
        loop {
            tick.tick().await;
            let Some(inner) = weak.upgrade() else { return };
            let now = inner.requests.load(Ordering::Relaxed);
            idle = if now == seen { idle + 1 } else { 0 };
            seen = now;
            if idle >= KEEP_ARMED_IDLE_PERIODS {
                return;
            }
        }
    });
}

impl fmt::Debug for SbiClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SbiClient")
            .field("default_timeout", &self.inner.default_timeout)
            .field("user_agent", &self.inner.user_agent)
            .field("max_alternates", &self.inner.max_alternates)
            .finish_non_exhaustive()
    }
}

/// Builds an [`SbiClient`] from a [`ClientConfig`] plus PEM material given in memory (in
/// addition to the files named in `config.tls`).
#[derive(Debug)]
pub struct SbiClientBuilder {
    config: ClientConfig,
    root_ca_pems: Vec<Vec<u8>>,
    identity_pem: Option<(Vec<u8>, Vec<u8>)>,
}

impl SbiClientBuilder {
    /// Trusts the CA certificates in `pem` (one or more `CERTIFICATE` blocks).
    pub fn add_root_ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.root_ca_pems.push(pem.into());
        self
    }

    /// Presents this certificate chain (leaf first) and key for mutual TLS; replaces
    /// `config.tls.cert_file`/`key_file`.
    pub fn client_identity_pem(
        mut self,
        cert_chain_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Self {
        self.identity_pem = Some((cert_chain_pem.into(), key_pem.into()));
        self
    }

    /// Overrides `config.user_agent`, typically with `user_agent(nf_type, instance_id)`.
    pub fn user_agent(mut self, value: impl Into<String>) -> Self {
        self.config.user_agent = Some(value.into());
        self
    }

    /// Reads the PEM files named in the config (blocking file reads: call this at start-up)
    /// and builds the client. Needs no runtime; the first request must run inside Tokio.
    pub fn build(self) -> Result<SbiClient, ClientError> {
        let c = &self.config;
        if c.request_timeout_ms == 0 {
            return Err(ClientError::Config("request_timeout_ms must be > 0".into()));
        }
        if c.connect_timeout_ms == 0 {
            return Err(ClientError::Config("connect_timeout_ms must be > 0".into()));
        }
        if c.connections_per_producer == 0 || c.connections_per_producer > 64 {
            return Err(ClientError::Config("connections_per_producer must be 1..=64".into()));
        }
        if c.ping_interval_ms > 0 && c.ping_timeout_ms == 0 {
            return Err(ClientError::Config(
                "ping_timeout_ms must be > 0 when ping_interval_ms is".into(),
            ));
        }
        for (name, v) in [
            ("http2_initial_stream_window", c.http2_initial_stream_window),
            ("http2_initial_connection_window", c.http2_initial_connection_window),
        ] {
            if !(MIN_WINDOW..=MAX_WINDOW).contains(&v) {
                return Err(ClientError::Config(format!(
                    "{name} = {v} is outside {MIN_WINDOW}..={MAX_WINDOW}"
                )));
            }
        }
        let ua = c.user_agent.as_deref().unwrap_or(DEFAULT_USER_AGENT);
        let user_agent = HeaderValue::from_str(ua)
            .map_err(|_| ClientError::Config(format!("user_agent {ua:?} is not a header value")))?;

        let source = TlsSource {
            config: c.tls.clone(),
            root_ca_pems: self.root_ca_pems.clone(),
            identity_pem: self.identity_pem.clone(),
        };
        let tls = source.build()?;
        let reload = (c.tls.reload_secs > 0 && !source.files().is_empty())
            .then(|| TlsReload::new(source, Duration::from_secs(c.tls.reload_secs)));

        let keep_alive = (c.ping_interval_ms > 0).then(|| KeepAlive {
            interval: Duration::from_millis(c.ping_interval_ms),
            timeout: Duration::from_millis(c.ping_timeout_ms),
        });
        let connector = Connector::new(
            tls,
            reload,
            Duration::from_millis(c.connect_timeout_ms),
            c.http2_initial_stream_window,
            c.http2_initial_connection_window,
            keep_alive,
            (c.pool_idle_timeout_ms > 0).then(|| Duration::from_millis(c.pool_idle_timeout_ms)),
        );

        Ok(SbiClient {
            inner: Arc::new(Inner {
                pool: Pool::new(connector, c.connections_per_producer),
                default_timeout: Duration::from_millis(c.request_timeout_ms),
                user_agent,
                max_alternates: c.max_alternates,
                tap: OnceLock::new(),
                tokens: OnceLock::new(),
                tracer: OnceLock::new(),
                requests: AtomicU64::new(0),
                timer_kept: AtomicBool::new(false),
            }),
        })
    }
}

/// What a client's TLS configuration is made of: the files of `[client.tls]` and PEM given in
/// memory ([`SbiClientBuilder`]); built again when the files change (`reload_secs`).
#[derive(Debug, Clone)]
pub(crate) struct TlsSource {
    config: TlsClientConfig,
    root_ca_pems: Vec<Vec<u8>>,
    identity_pem: Option<(Vec<u8>, Vec<u8>)>,
}

impl TlsSource {
    /// The files read: CA files, and the certificate and key unless given in memory.
    pub(crate) fn files(&self) -> Vec<PathBuf> {
        let mut f = self.config.ca_files.clone();
        if self.identity_pem.is_none() {
            f.extend(self.config.cert_file.iter().chain(&self.config.key_file).cloned());
        }
        f
    }

    pub(crate) fn build(&self) -> Result<rustls::ClientConfig, ClientError> {
        let tls = &self.config;
        let mut roots = rustls::RootCertStore::empty();
        let mut add_roots = |pem: &[u8], origin: &str| -> Result<(), ClientError> {
            let mut n = 0;
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(|e| ClientError::Config(format!("{origin}: {e}")))?;
                roots.add(cert).map_err(|e| ClientError::Config(format!("{origin}: {e}")))?;
                n += 1;
            }
            if n == 0 {
                return Err(ClientError::Config(format!("{origin}: no PEM CERTIFICATE found")));
            }
            Ok(())
        };
        for path in &tls.ca_files {
            let pem = read_file(path)?;
            add_roots(&pem, &path.display().to_string())?;
        }
        for pem in &self.root_ca_pems {
            add_roots(pem, "root CA PEM")?;
        }

        let identity = match (&self.identity_pem, &tls.cert_file, &tls.key_file) {
            (Some((cert, key)), _, _) => Some(parse_identity(cert, key, "client identity PEM")?),
            (None, Some(cert), Some(key)) => Some(parse_identity(
                &read_file(cert)?,
                &read_file(key)?,
                &cert.display().to_string(),
            )?),
            (None, None, None) => None,
            (None, _, _) => {
                return Err(ClientError::Config(
                    "tls.cert_file and tls.key_file go together".into(),
                ))
            }
        };

        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| ClientError::Config(format!("TLS: {e}")))?
            .with_root_certificates(roots);
        match identity {
            Some((chain, key)) => builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| ClientError::Config(format!("TLS client certificate: {e}"))),
            None => Ok(builder.with_no_client_auth()),
        }
    }
}

fn read_file(path: &std::path::Path) -> Result<Vec<u8>, ClientError> {
    std::fs::read(path).map_err(|e| ClientError::Config(format!("{}: {e}", path.display())))
}

fn parse_identity(
    cert_pem: &[u8],
    key_pem: &[u8],
    origin: &str,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), ClientError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ClientError::Config(format!("{origin}: certificate: {e}")))?;
    if chain.is_empty() {
        return Err(ClientError::Config(format!("{origin}: no PEM CERTIFICATE found")));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| ClientError::Config(format!("{origin}: private key: {e}")))?;
    Ok((chain, key))
}

/// True for the answers after which `send_with_alternates` tries the next producer:
/// 503 Service Unavailable (producer overloaded or shutting down: TS 29.500 overload control
/// expects the consumer to divert traffic; the request was not processed) and 504 Gateway Timeout (the producer's own
/// upstream did not answer). 500 Internal Server Error is NOT retried: the producer has
/// processed the request (re-sending a non-idempotent POST could, e.g., create two
/// sessions), and a deterministic fault would fail on every instance anyway.
pub fn is_retryable_status(status: StatusCode) -> bool {
    matches!(status, StatusCode::SERVICE_UNAVAILABLE | StatusCode::GATEWAY_TIMEOUT)
}

impl SbiClient {
    /// Builds a client from `config`, reading its PEM files.
    pub fn new(config: &ClientConfig) -> Result<Self, ClientError> {
        Self::builder(config.clone()).build()
    }

    /// Starts a builder, to add PEM material held in memory.
    pub fn builder(config: ClientConfig) -> SbiClientBuilder {
        SbiClientBuilder { config, root_ca_pems: Vec::new(), identity_pem: None }
    }

    /// The response time used when a request carries no `3gpp-Sbi-Max-Rsp-Time`.
    pub fn default_timeout(&self) -> Duration {
        self.inner.default_timeout
    }

    /// The `User-Agent` added to requests that have none.
    pub fn user_agent(&self) -> &HeaderValue {
        &self.inner.user_agent
    }

    /// Copies every request this client (and each of its clones) sends and every answer it
    /// gets to `tap` from now on (the Data Director's egress trigger points; see
    /// [`crate::layer::tap`]). Set once: false, and nothing changes, when a tap is already in.
    pub fn set_tap(&self, tap: Arc<dyn MessageTap>) -> bool {
        self.inner.tap.set(tap).is_ok()
    }

    /// Attaches an OAuth2 access token from `source` to every request without an
    /// `Authorization` header from now on, and tells it when a producer answers 401 to one
    /// (docs/security.md). Set once: false, and nothing changes, when a source is already in.
    pub fn set_token_source(&self, source: Arc<dyn TokenSource>) -> bool {
        self.inner.tokens.set(source).is_ok()
    }

    /// Makes a client span of every attempt from now on, a child of the span being served,
    /// whose `traceparent` goes with the request (docs/telemetry.md). Without a tracer the
    /// client only passes on a consumer's trace context. Set once: false, and nothing changes,
    /// when a tracer is already in.
    pub fn set_tracer(&self, tracer: telemetry::Tracer) -> bool {
        self.inner.tracer.set(tracer).is_ok()
    }

    /// Starts a request. `url` is absolute (`http://host:port/path?query`) for
    /// [`RequestBuilder::send`], or may be just `/path?query` for
    /// [`RequestBuilder::send_with_alternates`].
    pub fn request(&self, method: Method, url: &str) -> RequestBuilder {
        let uri = url
            .parse::<Uri>()
            .map_err(|e| ClientError::InvalidUri { uri: url.to_owned(), reason: e.to_string() });
        RequestBuilder {
            client: self.clone(),
            method,
            uri,
            headers: HeaderMap::new(),
            body: Bytes::new(),
            error: None,
        }
    }

    pub fn get(&self, url: &str) -> RequestBuilder {
        self.request(Method::GET, url)
    }

    pub fn post(&self, url: &str) -> RequestBuilder {
        self.request(Method::POST, url)
    }

    pub fn put(&self, url: &str) -> RequestBuilder {
        self.request(Method::PUT, url)
    }

    pub fn patch(&self, url: &str) -> RequestBuilder {
        self.request(Method::PATCH, url)
    }

    pub fn delete(&self, url: &str) -> RequestBuilder {
        self.request(Method::DELETE, url)
    }

    /// Sends `req` (absolute `http://` or `https://` URI) to its producer and reads the whole
    /// answer. Any status is `Ok`; errors are transport failures and timeouts.
    pub async fn send(&self, req: Request<Bytes>) -> Result<SbiResponse, ClientError> {
        let (mut parts, body) = req.into_parts();
        let (scheme, authority) = absolute_target(&parts.uri)?;
        let timeout = self.response_time(&parts.headers);
        self.add_default_headers(&mut parts.headers, true);
        let authorized = self.authorize(parts.uri.path(), &mut parts.headers).await;
        let uri = std::mem::take(&mut parts.uri);
        let result = self
            .attempt(parts.method, uri, &scheme, &authority, parts.headers, body, timeout)
            .await;
        self.report_refused(authorized, &result);
        result
    }

    /// Sends the request to `producers` in order until one gives a non-retryable answer,
    /// at most `1 + max_alternates` of them.
    ///
    /// Each producer is an apiRoot, `scheme://authority[/prefix]`; the request goes to
    /// `apiRoot + path-and-query of parts.uri` (scheme and authority of `parts.uri`, if any,
    /// are ignored). Method, headers and body are the same on every attempt, apart from a
    /// fresh `3gpp-Sbi-Sender-Timestamp` unless the caller set one. Each attempt has the full
    /// response time (`3gpp-Sbi-Max-Rsp-Time` or the default).
    ///
    /// The next producer is tried after a connect failure, a timeout, a transport failure or
    /// a 503/504 answer ([`is_retryable_status`]); any other answer, 4xx and 500 included, is
    /// returned as is. When all fail: [`ClientError::AllProducersFailed`] listing each attempt.
    pub async fn send_with_alternates(
        &self,
        mut parts: request::Parts,
        body: Bytes,
        producers: &[Uri],
    ) -> Result<SbiResponse, ClientError> {
        if producers.is_empty() {
            return Err(ClientError::NoProducers);
        }
        let timeout = self.response_time(&parts.headers);
        let caller_timestamp = parts.headers.contains_key(&SENDER_TIMESTAMP);
        self.add_default_headers(&mut parts.headers, false);
        let authorized = self.authorize(parts.uri.path(), &mut parts.headers).await;
        let result =
            self.send_to_alternates(parts, body, producers, timeout, caller_timestamp).await;
        self.report_refused(authorized, &result);
        result
    }

    async fn send_to_alternates(
        &self,
        mut parts: request::Parts,
        body: Bytes,
        producers: &[Uri],
        timeout: Duration,
        caller_timestamp: bool,
    ) -> Result<SbiResponse, ClientError> {
        let path =
            parts.uri.path_and_query().cloned().unwrap_or_else(|| PathAndQuery::from_static("/"));

        let n = producers.len().min(1 + self.inner.max_alternates);
        let mut attempts = Vec::new();
        let mut last_response = None;
        for (i, producer) in producers[..n].iter().enumerate() {
            let last = i + 1 == n;
            let outcome = match alternate_target(producer, &path) {
                Err(e) => Err(e),
                Ok((uri, scheme, authority)) => {
                    let mut headers = if last {
                        std::mem::take(&mut parts.headers)
                    } else {
                        parts.headers.clone()
                    };
                    if !caller_timestamp {
                        headers.insert(&SENDER_TIMESTAMP, sender_timestamp_now());
                    }
                    self.attempt(
                        parts.method.clone(),
                        uri,
                        &scheme,
                        &authority,
                        headers,
                        body.clone(),
                        timeout,
                    )
                    .await
                }
            };
            let outcome = match outcome {
                Ok(rsp) if is_retryable_status(rsp.status) => {
                    let status = rsp.status;
                    last_response = Some(Box::new(rsp));
                    AttemptOutcome::Status(status)
                }
                Ok(rsp) => return Ok(rsp),
                Err(e) if e.is_retryable() => AttemptOutcome::Failed(Box::new(e)),
                Err(e) => return Err(e),
            };
            let attempt = Attempt { producer: producer.to_string(), outcome };
            tracing::debug!(
                method = %parts.method,
                path = %path,
                attempt = i + 1,
                %attempt,
                alternates_left = n - i - 1,
                "SBI request failed on producer"
            );
            attempts.push(attempt);
        }
        Err(ClientError::AllProducersFailed { attempts, last_response })
    }

    fn response_time(&self, headers: &HeaderMap) -> Duration {
        crate::headers::max_rsp_time(headers)
            .filter(|d| !d.is_zero())
            .unwrap_or(self.inner.default_timeout)
    }

    /// The access token for the service `path` belongs to, unless the caller set
    /// `Authorization` or no token source is installed. Returns that service when a token went
    /// with the request.
    async fn authorize(&self, path: &str, headers: &mut HeaderMap) -> Option<String> {
        let source = self.inner.tokens.get()?;
        if headers.contains_key(http::header::AUTHORIZATION) {
            return None;
        }
        let service = path.trim_start_matches('/').split('/').next().unwrap_or("");
        let token = source.token(service).await?;
        headers.insert(http::header::AUTHORIZATION, token);
        Some(service.to_owned())
    }

    /// A 401 to a request that carried a token: the source must not hand that token out again.
    fn report_refused(&self, service: Option<String>, result: &Result<SbiResponse, ClientError>) {
        if let (Some(service), Ok(rsp), Some(source)) = (service, result, self.inner.tokens.get()) {
            if rsp.status() == StatusCode::UNAUTHORIZED {
                source.rejected(&service);
            }
        }
    }

    fn add_default_headers(&self, headers: &mut HeaderMap, timestamp: bool) {
        if !headers.contains_key(USER_AGENT) {
            headers.insert(USER_AGENT, self.inner.user_agent.clone());
        }
        if timestamp && !headers.contains_key(&SENDER_TIMESTAMP) {
            headers.insert(&SENDER_TIMESTAMP, sender_timestamp_now());
        }
    }

    /// One try on one producer, in a client span when tracing (made here, not in a wrapping
    /// function, whose future would hold the arguments beside this one's).
    #[allow(clippy::too_many_arguments)]
    async fn attempt(
        &self,
        method: Method,
        uri: Uri,
        scheme: &Scheme,
        authority: &Authority,
        mut headers: HeaderMap,
        body: Bytes,
        timeout: Duration,
    ) -> Result<SbiResponse, ClientError> {
        let span = trace::start(self.inner.tracer.get(), &method, &uri, &mut headers);
        let mut req = Request::new(());
        *req.method_mut() = method;
        *req.uri_mut() = uri;
        *req.headers_mut() = headers;
        let producer = || format!("{scheme}://{authority}");
        // h2 takes the request's head by value: a tap gets its own copy of it, made only when
        // one is installed.
        let tap = self.inner.tap.get().map(|tap| {
            (tap.clone(), req.method().clone(), req.uri().clone(), req.headers().clone())
        });
        let exchange = async {
            let https = *scheme == Scheme::HTTPS;
            let slot = self.inner.pool.slot(https, authority);
            let mut req = Some(req);
            let mut retried = false;
            let (rsp, lease, sent_at) = loop {
                let lease = slot
                    .lease(&self.inner.pool, https, authority)
                    .await
                    .map_err(|source| ClientError::Connect { producer: producer(), source })?;
                // `ready` fails when the connection is already gone (GOAWAY received, reset,
                // peer closed) and waits while the peer's MAX_CONCURRENT_STREAMS is reached.
                let mut send = match lease.send.clone().ready().await {
                    Ok(send) => send,
                    Err(e) => {
                        slot.forget(&lease.state);
                        // Not sent: once on a fresh connection, as hyper's pool does.
                        if !retried {
                            retried = true;
                            continue;
                        }
                        return Err(ClientError::Http { producer: producer(), source: e.into() });
                    }
                };
                let req = req.take().expect("the request is sent once");
                let sent_at = SystemTime::now();
                let sent = send.send_request(req, body.is_empty()).and_then(|(rsp, mut stream)| {
                    if !body.is_empty() {
                        // h2 buffers what the windows do not let out yet.
                        stream.send_data(body.clone(), true)?;
                    }
                    Ok(rsp)
                });
                match sent {
                    Ok(rsp) => break (rsp, lease, sent_at),
                    Err(e) => {
                        slot.forget(&lease.state);
                        return Err(ClientError::Http { producer: producer(), source: e.into() });
                    }
                }
            };
            let http_err = |e: h2::Error| {
                // A stream reset ends this exchange only; anything else ends the connection.
                if !e.is_reset() || e.is_go_away() {
                    slot.forget(&lease.state);
                }
                ClientError::Http { producer: producer(), source: e.into() }
            };
            let stream_id = u32::from(rsp.stream_id());
            let mut copied = tap.map(|(tap, method, uri, headers)| {
                let mut exchange = Exchange::default();
                tap.copy(
                    &MessageCopy {
                        trigger: TriggerPoint::EgressRequest,
                        request_at: sent_at,
                        answer_at: None,
                        method: &method,
                        uri: &uri,
                        operation: "",
                        stream_id,
                        peer: Peer::Authority(authority.as_str()),
                        status: None,
                        headers: &headers,
                        body: &body,
                    },
                    &mut exchange,
                );
                (tap, method, uri, exchange)
            });
            let (parts, mut recv) = rsp.await.map_err(http_err)?.into_parts();
            let answer = read_body(&mut recv).await.map_err(http_err)?;
            drop(lease);
            if let Some((tap, method, uri, exchange)) = &mut copied {
                tap.copy(
                    &MessageCopy {
                        trigger: TriggerPoint::EgressResponse,
                        request_at: sent_at,
                        answer_at: Some(SystemTime::now()),
                        method,
                        uri,
                        operation: "",
                        stream_id,
                        peer: Peer::Authority(authority.as_str()),
                        status: Some(parts.status),
                        headers: &parts.headers,
                        body: &answer,
                    },
                    exchange,
                );
            }
            let body = answer;
            Ok(SbiResponse {
                status: parts.status,
                version: parts.version,
                headers: parts.headers,
                body,
            })
        };
        keep_timer_armed(&self.inner);
        let result = match tokio::time::timeout(timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(ClientError::Timeout { producer: producer(), after: timeout }),
        };
        if let Some(span) = span {
            trace::end(span, &result);
        }
        result
    }
}

/// The whole answer body. Flow-control capacity is given back as each DATA frame is taken,
/// so a large answer keeps flowing; a body in one frame (most SBI answers) is not copied.
async fn read_body(recv: &mut h2::RecvStream) -> Result<Bytes, h2::Error> {
    let mut first: Option<Bytes> = None;
    let mut more: Option<bytes::BytesMut> = None;
    while let Some(chunk) = recv.data().await {
        let chunk = chunk?;
        let _ = recv.flow_control().release_capacity(chunk.len());
        match (&mut first, &mut more) {
            (None, _) => first = Some(chunk),
            (Some(f), None) => {
                let mut m = bytes::BytesMut::with_capacity(f.len() + chunk.len());
                m.extend_from_slice(f);
                m.extend_from_slice(&chunk);
                more = Some(m);
            }
            (Some(_), Some(m)) => m.extend_from_slice(&chunk),
        }
    }
    Ok(match more {
        Some(m) => m.freeze(),
        None => first.unwrap_or_default(),
    })
}

/// `3gpp-Sbi-Sender-Timestamp` for now. Every outbound request carries one, and chrono's
/// strftime interprets its format string on each call: the part up to the seconds is formatted
/// once per second per thread and only the milliseconds are written per request.
fn sender_timestamp_now() -> HeaderValue {
    use std::cell::RefCell;
    use std::time::{SystemTime, UNIX_EPOCH};
    thread_local! {
        /// The second (since the epoch) and its `Sun, 04 Aug 2019 08:49:37` prefix.
        static SECOND: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
    }
    let now = SystemTime::now();
    let Ok(since) = now.duration_since(UNIX_EPOCH) else {
        return timestamp_value(format_sender_timestamp(now).into_bytes());
    };
    let (secs, ms) = (since.as_secs(), since.subsec_millis());
    SECOND.with(|cell| {
        let mut cached = cell.borrow_mut();
        if cached.0 != secs {
            let full = format_sender_timestamp(UNIX_EPOCH + Duration::from_secs(secs));
            // `... 08:49:37.000 GMT`: keep what precedes the milliseconds.
            let cut = full.rfind('.').unwrap_or(full.len());
            *cached = (secs, full[..cut].to_owned());
        }
        let mut v = Vec::with_capacity(cached.1.len() + 8);
        v.extend_from_slice(cached.1.as_bytes());
        v.extend_from_slice(&[
            b'.',
            b'0' + (ms / 100) as u8,
            b'0' + (ms / 10 % 10) as u8,
            b'0' + (ms % 10) as u8,
        ]);
        v.extend_from_slice(b" GMT");
        timestamp_value(v)
    })
}

/// Marked sensitive, so HPACK sends it as a never-indexed literal: a value that changes every
/// millisecond would otherwise be added to the connection's dynamic table on every request,
/// evicting the headers that do repeat (User-Agent, Accept, ...) and making each lookup compare
/// against dozens of stale timestamps under the same name.
fn timestamp_value(v: Vec<u8>) -> HeaderValue {
    let mut v =
        HeaderValue::from_maybe_shared(Bytes::from(v)).expect("timestamp is a valid header value");
    v.set_sensitive(true);
    v
}

fn check_scheme(uri: &Uri) -> Result<Scheme, ClientError> {
    match uri.scheme() {
        Some(s) if *s == Scheme::HTTP || *s == Scheme::HTTPS => Ok(s.clone()),
        Some(s) => Err(ClientError::InvalidUri {
            uri: uri.to_string(),
            reason: format!("scheme `{s}` is neither http nor https"),
        }),
        None => Err(ClientError::InvalidUri {
            uri: uri.to_string(),
            reason: "not an absolute URI (no scheme)".into(),
        }),
    }
}

fn absolute_target(uri: &Uri) -> Result<(Scheme, Authority), ClientError> {
    let scheme = check_scheme(uri)?;
    let authority = uri.authority().cloned().ok_or_else(|| ClientError::InvalidUri {
        uri: uri.to_string(),
        reason: "no authority".into(),
    })?;
    Ok((scheme, authority))
}

/// `apiRoot` + `path`: scheme and authority from the apiRoot, its path (if any, without a
/// trailing `/`) as a prefix of `path`.
fn alternate_target(
    api_root: &Uri,
    path: &PathAndQuery,
) -> Result<(Uri, Scheme, Authority), ClientError> {
    let (scheme, authority) = absolute_target(api_root)?;
    let prefix = api_root.path().trim_end_matches('/');
    let pq = if prefix.is_empty() {
        path.clone()
    } else {
        let joined = format!("{prefix}{}", path.as_str());
        PathAndQuery::from_maybe_shared(Bytes::from(joined)).map_err(|e| {
            ClientError::InvalidUri { uri: api_root.to_string(), reason: e.to_string() }
        })?
    };
    let mut p = http::uri::Parts::default();
    p.scheme = Some(scheme.clone());
    p.authority = Some(authority.clone());
    p.path_and_query = Some(pq);
    let uri = Uri::from_parts(p).map_err(|e| ClientError::InvalidUri {
        uri: api_root.to_string(),
        reason: e.to_string(),
    })?;
    Ok((uri, scheme, authority))
}

// ---------------------------------------------------------------------------------------------
// Request builder
// ---------------------------------------------------------------------------------------------

/// A request being built; see [`SbiClient::request`]. Errors (bad URI, header, JSON) surface
/// when it is sent.
#[derive(Debug)]
#[must_use = "a request does nothing until sent"]
pub struct RequestBuilder {
    client: SbiClient,
    method: Method,
    uri: Result<Uri, ClientError>,
    headers: HeaderMap,
    body: Bytes,
    error: Option<ClientError>,
}

impl RequestBuilder {
    /// Adds a header (repeating a name adds another value).
    pub fn header<K, V>(mut self, name: K, value: V) -> Self
    where
        K: TryInto<HeaderName>,
        V: TryInto<HeaderValue>,
    {
        if self.error.is_some() {
            return self;
        }
        match (name.try_into(), value.try_into()) {
            (Ok(n), Ok(v)) => {
                self.headers.append(n, v);
            }
            (Err(_), _) => self.error = Some(ClientError::InvalidRequest("bad header name".into())),
            (Ok(n), Err(_)) => {
                self.error = Some(ClientError::InvalidRequest(format!("bad value for header {n}")))
            }
        }
        self
    }

    /// Adds all these headers.
    pub fn headers(mut self, headers: HeaderMap) -> Self {
        self.headers.extend(headers);
        self
    }

    /// Sets a JSON body and, unless already set, `Content-Type: application/json`.
    pub fn json<T: Serialize + ?Sized>(mut self, value: &T) -> Self {
        match serde_json::to_vec(value) {
            Ok(v) => {
                self.body = Bytes::from(v);
                if !self.headers.contains_key(CONTENT_TYPE) {
                    self.headers.insert(CONTENT_TYPE, APPLICATION_JSON);
                }
            }
            Err(e) => {
                if self.error.is_none() {
                    self.error = Some(ClientError::InvalidRequest(format!("JSON body: {e}")));
                }
            }
        }
        self
    }

    /// Sets a raw body (set `Content-Type` with [`header`](Self::header)).
    pub fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    /// Sets `3gpp-Sbi-Max-Rsp-Time` (whole milliseconds, at least 1): the producer learns how
    /// long we wait, and the client times out after it.
    pub fn max_rsp_time(mut self, d: Duration) -> Self {
        let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1);
        self.headers.insert(&MAX_RSP_TIME, HeaderValue::from(ms));
        self
    }

    /// The request as built (`User-Agent` and timestamp are added at send time).
    pub fn build(self) -> Result<Request<Bytes>, ClientError> {
        self.into_parts().map(|(_, req)| req)
    }

    fn into_parts(self) -> Result<(SbiClient, Request<Bytes>), ClientError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let mut req = Request::new(self.body);
        *req.method_mut() = self.method;
        *req.uri_mut() = self.uri?;
        *req.headers_mut() = self.headers;
        Ok((self.client, req))
    }

    /// Sends to the absolute URL given to [`SbiClient::request`].
    pub async fn send(self) -> Result<SbiResponse, ClientError> {
        let (client, req) = self.into_parts()?;
        client.send(req).await
    }

    /// Sends to the first producer that gives a non-retryable answer; see
    /// [`SbiClient::send_with_alternates`]. The URL given to [`SbiClient::request`] only
    /// contributes its path and query.
    pub async fn send_with_alternates(self, producers: &[Uri]) -> Result<SbiResponse, ClientError> {
        let (client, req) = self.into_parts()?;
        let (parts, body) = req.into_parts();
        client.send_with_alternates(parts, body, producers).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_defaults_and_unknown_fields() {
        let c: ClientConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(c, ClientConfig::default());
        assert!(serde_json::from_str::<ClientConfig>(r#"{"request_timeout":1}"#).is_err());
        assert!(serde_json::from_str::<ClientConfig>(r#"{"tls":{"ca_file":"x"}}"#).is_err());
    }

    #[test]
    fn alternate_target_joins_prefix() {
        let pq = PathAndQuery::from_static("/nudr-dr/v2/x?a=1");
        let (u, _, _) = alternate_target(&"http://h:1".parse().unwrap(), &pq).unwrap();
        assert_eq!(u.to_string(), "http://h:1/nudr-dr/v2/x?a=1");
        let (u, _, _) = alternate_target(&"https://h:2/pre/".parse().unwrap(), &pq).unwrap();
        assert_eq!(u.to_string(), "https://h:2/pre/nudr-dr/v2/x?a=1");
        assert!(alternate_target(&"/rel".parse().unwrap(), &pq).is_err());
        assert!(alternate_target(&"ftp://h/".parse().unwrap(), &pq).is_err());
    }

    #[test]
    fn sender_timestamp_matches_the_full_format() {
        use std::time::SystemTime;
        for _ in 0..3 {
            let before = SystemTime::now();
            let v = sender_timestamp_now();
            let after = SystemTime::now();
            let s = v.to_str().unwrap();
            let t = crate::headers::parse_sender_timestamp(s).expect(s);
            // The header has millisecond precision: truncate the bounds the same way.
            let ms = |t: SystemTime| t.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
            assert!(ms(before) <= ms(t) && ms(t) <= ms(after), "{s}");
            assert_eq!(s, format_sender_timestamp(t));
            assert!(v.is_sensitive(), "sent as a never-indexed HPACK literal");
            std::thread::sleep(Duration::from_millis(7));
        }
    }

    /// Every request's future is moved whole into the box its caller's handler runs in; the
    /// rarely needed connect (TCP, TLS, HTTP/2 handshakes) must not make it several KB.
    #[tokio::test]
    async fn a_request_future_does_not_embed_the_connect_future() {
        let c = SbiClient::new(&ClientConfig::default()).unwrap();
        let a: Authority = "127.0.0.1:1".parse().unwrap();
        let slot = c.inner.pool.slot(false, &a);
        let connect = std::mem::size_of_val(&c.inner.pool.connector().connect(false, &a, &slot));
        let lease = std::mem::size_of_val(&slot.lease(&c.inner.pool, false, &a));
        assert!(lease * 4 < connect, "lease future {lease} B, connect future {connect} B");
        let roots: Vec<Uri> = vec!["http://127.0.0.1:1".parse().unwrap()];
        let request = std::mem::size_of_val(&c.get("/x").send_with_alternates(&roots));
        assert!(request < connect, "request future {request} B, connect future {connect} B");
    }

    /// The task keeping a timer armed runs while requests come, ends after
    /// `KEEP_ARMED_IDLE_PERIODS` without one (so an idle NF is not woken), starts again with
    /// the next request, and ends with the client.
    #[tokio::test]
    async fn the_timer_is_kept_armed_while_the_client_is_used() {
        let every = Duration::from_millis(10);
        let c = SbiClient::new(&ClientConfig::default()).unwrap();
        let running = |c: &SbiClient| Arc::weak_count(&c.inner) == 1;
        keep_timer_armed_every(&c.inner, every);
        tokio::task::yield_now().await;
        assert!(running(&c));
        for _ in 0..KEEP_ARMED_IDLE_PERIODS * 2 {
            tokio::time::sleep(every).await;
            keep_timer_armed_every(&c.inner, every);
        }
        assert!(running(&c), "still in use");
        tokio::time::sleep(every * (KEEP_ARMED_IDLE_PERIODS + 5)).await;
        assert!(!running(&c), "idle: ended");
        assert!(!c.inner.timer_kept.load(Ordering::Acquire));
        // Started on another runtime, which then shuts down: the next request starts it again.
        let other = c.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                keep_timer_armed_every(&other.inner, every);
                tokio::task::yield_now().await;
                assert!(running(&other));
            });
        })
        .join()
        .unwrap();
        assert!(!running(&c) && !c.inner.timer_kept.load(Ordering::Acquire), "runtime gone");
        keep_timer_armed_every(&c.inner, every);
        tokio::task::yield_now().await;
        assert!(running(&c), "started again");
        let tasks = || tokio::runtime::Handle::current().metrics().num_alive_tasks();
        assert_eq!(tasks(), 1);
        drop(c);
        tokio::time::sleep(every * 3).await;
        assert_eq!(tasks(), 0, "the task ended with the client");
    }

    #[test]
    fn bad_config_rejected() {
        let c = ClientConfig { http2_initial_stream_window: 10, ..ClientConfig::default() };
        assert!(matches!(SbiClient::new(&c), Err(ClientError::Config(_))));
        let c = ClientConfig {
            tls: TlsClientConfig { cert_file: Some("c.pem".into()), ..Default::default() },
            ..ClientConfig::default()
        };
        assert!(matches!(SbiClient::new(&c), Err(ClientError::Config(_))));
    }
}
