//! The SBI server: one port accepting HTTP/2 with prior knowledge (the 3GPP norm), HTTP/1.1 (so
//! curl and HTTP/1 tools work without flags) and, when configured, TLS with ALPN. Each request
//! goes through the [`crate::layer`] stack; `/metrics` and `/healthz/*` are answered before it.

use std::convert::Infallible;
use std::future::{Future, Ready};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use serde::Deserialize;
use tokio::net::{TcpListener, TcpStream};
use tower::util::Oneshot;
use tower::{Service, ServiceBuilder, ServiceExt};

use crate::backpressure::{BodyPending, ConnGate, Gated};
use crate::connection::{self, Connections};
use crate::descriptors;
use crate::layer::content::ContentLayer;
use crate::layer::metrics::{MetricsLayer, SbiMetrics};
use crate::layer::oauth2::OAuth2Layer;
use crate::layer::overload::{OverloadConfig, OverloadLayer};
use crate::layer::rate_limit::{RateLimitConfig, RateLimitLayer};
use crate::layer::request_id::RequestIdLayer;
use crate::layer::route::RouteLayer;
use crate::layer::tap::{MessageTap, PeerAddr, TapLayer};
use crate::layer::trace::TraceLayer;
use crate::layer::Either;
use crate::oauth2::{OAuth2Config, Verifier};
use crate::observe::Observability;
use crate::router::{Dispatch, Response, Router};
use crate::tls::{self, TlsConfig};

/// `[sbi]` in an NF's configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Address of the SBI port (the `--listen` flag overrides it).
    pub listen: SocketAddr,
    /// TLS; absent means h2c and HTTP/1.1 in clear.
    pub tls: Option<TlsConfig>,
    /// Largest request body accepted, bytes (413 beyond).
    pub max_body_bytes: usize,
    pub http2: Http2Config,
    pub overload: OverloadConfig,
    /// Seconds open connections get to finish their requests at shutdown.
    pub shutdown_grace_secs: u64,
    /// Connections served at once; one more is accepted and closed at once (counted in
    /// `sbi_connections_refused_total`). 0 derives it from the soft RLIMIT_NOFILE:
    /// the limit less `descriptor_reserve`.
    pub max_connections: usize,
    /// Descriptors the derived `max_connections` leaves for the store, Diameter peers and
    /// connections to other NFs.
    pub descriptor_reserve: u64,
    /// Seconds a connection may go without starting a request before it is closed gracefully
    /// (HTTP/2 GOAWAY, HTTP/1.1 close; requests in progress finish); 0 keeps idle connections.
    pub idle_timeout_secs: u64,
    /// Seconds a client has to send a request head (HTTP/1.1) or the HTTP/2 preface.
    pub header_read_timeout_secs: u64,
    /// Access tokens required from consumers (off by default).
    pub oauth2: OAuth2Config,
    /// Per-consumer rate limits (off by default).
    pub rate_limit: RateLimitConfig,
    /// `[telemetry]` of the configuration file (a top-level section shared by every NF, not
    /// `[sbi.telemetry]`): the NF skeleton starts the span export from it and gives the server
    /// and client their tracer (docs/telemetry.md).
    #[serde(skip)]
    pub telemetry: telemetry::TelemetryConfig,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            tls: None,
            max_body_bytes: 2 * 1024 * 1024,
            http2: Http2Config::default(),
            overload: OverloadConfig::default(),
            shutdown_grace_secs: 5,
            max_connections: 0,
            descriptor_reserve: descriptors::DEFAULT_RESERVE,
            idle_timeout_secs: 60,
            header_read_timeout_secs: 10,
            oauth2: OAuth2Config::default(),
            rate_limit: RateLimitConfig::default(),
            telemetry: telemetry::TelemetryConfig::default(),
        }
    }
}

/// HTTP/2 settings. The windows suit large NRF answers (an NRF discovery result with ten SMF
/// profiles is about 65 KB). `max_concurrent_streams` bounds what one connection can have
/// outstanding: with backpressure, requests beyond what the NF takes wait in the client, and a
/// client's connections × this limit / capacity is how long its last request waits (64
/// connections × 128 at 17K/s: 0.5 s). At 1,024, 64 reconnecting connections with 2 s timeouts
/// queued 3.6 s of work and gave up on most of it; at 256 an NRF at 11K/s still lost half its
/// answers to them (docs/sbi.md, "Overload guard").
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Http2Config {
    pub max_concurrent_streams: u32,
    pub initial_stream_window: u32,
    pub initial_connection_window: u32,
    pub max_frame_size: u32,
    /// Seconds between PINGs on an idle connection; 0 disables them.
    pub keep_alive_interval_secs: u64,
    pub keep_alive_timeout_secs: u64,
}

impl Default for Http2Config {
    fn default() -> Self {
        Http2Config {
            max_concurrent_streams: 128,
            initial_stream_window: 1024 * 1024,
            initial_connection_window: 16 * 1024 * 1024,
            max_frame_size: 64 * 1024,
            keep_alive_interval_secs: 30,
            keep_alive_timeout_secs: 10,
        }
    }
}

/// Who is serving: the NF type and instance id, used in User-Agent, Lci/Oci and logs.
#[derive(Debug, Clone)]
pub struct NfIdentity {
    pub nf_type: String,
    pub instance_id: String,
}

impl NfIdentity {
    pub fn new(nf_type: impl Into<String>, instance_id: impl Into<String>) -> Self {
        NfIdentity { nf_type: nf_type.into(), instance_id: instance_id.into() }
    }
}

pub struct SbiServer {
    listener: TcpListener,
    tls: Option<Arc<tls::ReloadingServerConfig>>,
    config: ServerConfig,
    router: Router,
    identity: NfIdentity,
    observability: Observability,
    tap: Option<Arc<dyn MessageTap>>,
    tracer: Option<telemetry::Tracer>,
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
}

impl SbiServer {
    /// Binds the port; serving starts with [`SbiServer::serve`].
    pub async fn bind(
        config: ServerConfig,
        identity: NfIdentity,
        router: Router,
        observability: Observability,
    ) -> Result<Self, ServerError> {
        let tls = match &config.tls {
            Some(t) => Some(Arc::new(tls::ReloadingServerConfig::new(t.clone())?)),
            None => None,
        };
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|source| ServerError::Bind { addr: config.listen, source })?;
        Ok(SbiServer {
            listener,
            tls,
            config,
            router,
            identity,
            observability,
            tap: None,
            tracer: None,
        })
    }

    /// Installs the message-copy tap (the Data Director's hook).
    pub fn with_tap(mut self, tap: Arc<dyn MessageTap>) -> Self {
        self.tap = Some(tap);
        self
    }

    /// Makes a server span of each request with `tracer` (docs/telemetry.md); without one,
    /// requests only pass a consumer's trace context on.
    pub fn with_tracer(mut self, tracer: telemetry::Tracer) -> Self {
        self.tracer = Some(tracer);
        self
    }

    pub fn local_addr(&self) -> SocketAddr {
        // A bound listener always has an address.
        self.listener.local_addr().unwrap_or(self.config.listen)
    }

    /// The connection cap this server applies (`max_connections`, or derived from the
    /// descriptor limit when 0).
    pub fn max_connections(&self) -> usize {
        match self.config.max_connections {
            0 => descriptors::default_max_connections(self.config.descriptor_reserve),
            n => n,
        }
    }

    /// Serves until `shutdown` completes, then stops accepting and gives open connections
    /// `shutdown_grace_secs` to finish (HTTP/2 GOAWAY, HTTP/1.1 close).
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> std::io::Result<()> {
        let metrics = SbiMetrics::register(&self.observability);
        let overload = OverloadLayer::new(self.config.overload.clone(), &self.identity.instance_id);
        overload.register(&self.observability);
        let gate = overload.backpressure();
        self.config.rate_limit.validate().map_err(std::io::Error::other)?;
        let rate_limit = RateLimitLayer::new(&self.config.rate_limit);
        rate_limit.register(&self.observability);
        let mut oauth2 = self.config.oauth2.clone();
        // The NF that publishes the JWK set (the NRF) checks tokens against its own, by default.
        if oauth2.required
            && oauth2.jwks_url.is_none()
            && oauth2.jwks_file.is_none()
            && self.router.resolve(&http::Method::GET, JWKS_PATH).is_ok()
        {
            let scheme = if self.tls.is_some() { "https" } else { "http" };
            let addr = self.local_addr();
            let host = match addr.ip() {
                ip if ip.is_unspecified() && ip.is_ipv4() => format!("127.0.0.1:{}", addr.port()),
                ip if ip.is_unspecified() => format!("[::1]:{}", addr.port()),
                _ => addr.to_string(),
            };
            oauth2.jwks_url = Some(format!("{scheme}://{host}{JWKS_PATH}"));
        }
        let verifier = match oauth2.required {
            true => Some(
                Verifier::new(oauth2, &self.identity.nf_type, &self.identity.instance_id)
                    .await
                    .map_err(std::io::Error::other)?,
            ),
            false => None,
        };
        // Aborted when serve returns (the guards drop).
        let _refresh = verifier.as_ref().map(|v| AbortOnDrop(v.spawn_refresh()));
        let _tls_reload = self
            .tls
            .as_ref()
            .filter(|t| t.reload_secs() > 0)
            .map(|t| AbortOnDrop(spawn_tls_reload(t.clone())));
        let stack = ServiceBuilder::new()
            .layer(RequestIdLayer::new())
            .layer(TraceLayer::new(self.tracer.clone()))
            .layer(MetricsLayer::new(&metrics, &self.router.operations()))
            .layer(RouteLayer::new(self.router.clone()))
            .layer(OAuth2Layer::new(verifier))
            .layer(rate_limit)
            .layer(overload)
            .layer(ContentLayer::new(self.config.max_body_bytes))
            .layer(TapLayer::new(self.tap.clone()))
            .service(Dispatch);
        let max_connections = self.max_connections();
        let connections = Connections::new(max_connections, &self.observability);
        let timing = connection::Timing {
            idle: (self.config.idle_timeout_secs > 0)
                .then(|| Duration::from_secs(self.config.idle_timeout_secs)),
            header_read: Duration::from_secs(self.config.header_read_timeout_secs.max(1)),
        };
        let builders = Arc::new(ConnectionBuilders::new(&self.config.http2, timing.header_read));
        tokio::pin!(shutdown);
        tracing::info!(addr = %self.local_addr(), tls = self.tls.is_some(), nf = %self.identity.nf_type, max_connections, "SBI server listening");
        let mut accept_failures = 0u64;
        loop {
            let (tcp, peer) = tokio::select! {
                accepted = self.listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Typically EMFILE/ENFILE (the cap should keep us below the limit; other
                        // processes share ENFILE): back off instead of spinning, and say so once
                        // per run of failures, not 20 times a second.
                        accept_failures += 1;
                        if accept_failures == 1 {
                            tracing::warn!(error = %e, "accept failed; retrying every 50 ms");
                        }
                        connections.accept_failed();
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                () = &mut shutdown => break,
            };
            if accept_failures > 0 {
                tracing::info!(failures = accept_failures, "accept works again");
                accept_failures = 0;
            }
            // At the cap the connection is closed at once: the client learns now instead of
            // timing out in the backlog, and the descriptors kept for the store stay free.
            let Some(permit) = connections.admit() else {
                drop(tcp);
                continue;
            };
            let _ = tcp.set_nodelay(true);
            let conn_gate = gate.as_ref().map(|_| Arc::new(ConnGate::default()));
            let svc = SbiService {
                stack: stack.clone(),
                observability: self.observability.clone(),
                activity: Arc::default(),
                conn_gate: conn_gate.clone(),
                // The tap and the rate limit need the peer; the extension costs an insert.
                peer: (self.tap.is_some() || self.config.rate_limit.enabled).then_some(peer),
                peer_cert: None,
            };
            let (io_gate, io_conn) = (gate.clone(), conn_gate.unwrap_or_default());
            let builders = builders.clone();
            let tls = self.tls.as_ref().map(|t| tokio_rustls::TlsAcceptor::from(t.current()));
            let activity = svc.activity.clone();
            let mut stop = connections.stop_signal();
            tokio::spawn(async move {
                let _permit = permit;
                let idle = timing.idle;
                let result = match tls {
                    None => match sniff_h2_preface(&tcp, timing.header_read).await {
                        Ok(true) => {
                            let conn = builders.h2.serve_connection(
                                TokioIo::new(Gated::new(tcp, io_gate, io_conn)),
                                svc,
                            );
                            connection::drive(conn, &activity, idle, &mut stop).await
                        }
                        Ok(false) => {
                            let conn = builders.h1.serve_connection(
                                TokioIo::new(Gated::new(tcp, io_gate, io_conn)),
                                svc,
                            );
                            connection::drive(conn, &activity, idle, &mut stop).await
                        }
                        Err(e) => Err(BoxError::from(e)),
                    },
                    Some(acceptor) => match handshake(acceptor, tcp).await {
                        Ok(tls) if tls.get_ref().1.alpn_protocol() == Some(b"h2") => {
                            let mut svc = svc;
                            svc.peer_cert = peer_certificate(&tls);
                            let conn = builders.h2.serve_connection(
                                TokioIo::new(Gated::new(tls, io_gate, io_conn)),
                                svc,
                            );
                            connection::drive(conn, &activity, idle, &mut stop).await
                        }
                        Ok(tls) => {
                            let mut svc = svc;
                            svc.peer_cert = peer_certificate(&tls);
                            let conn = builders.h1.serve_connection(
                                TokioIo::new(Gated::new(tls, io_gate, io_conn)),
                                svc,
                            );
                            connection::drive(conn, &activity, idle, &mut stop).await
                        }
                        Err(e) => Err(BoxError::from(e)),
                    },
                };
                if let Err(e) = result {
                    tracing::debug!(%peer, error = %e, "connection ended with error");
                }
            });
        }
        drop(self.listener);
        let grace = Duration::from_secs(self.config.shutdown_grace_secs);
        if !connections.drain(grace).await {
            tracing::warn!("connections still open after the shutdown grace period");
        }
        Ok(())
    }
}

/// The client certificate's identity, when the client presented one.
fn peer_certificate(
    tls: &tokio_rustls::server::TlsStream<TcpStream>,
) -> Option<Arc<tls::PeerCertificate>> {
    let leaf = tls.get_ref().1.peer_certificates()?.first()?;
    Some(Arc::new(tls::PeerCertificate::from_der(leaf)))
}

async fn handshake(
    acceptor: tokio_rustls::TlsAcceptor,
    tcp: TcpStream,
) -> std::io::Result<tokio_rustls::server::TlsStream<TcpStream>> {
    match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "TLS handshake timed out")),
    }
}

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The HTTP/2 connection preface (RFC 9113 §3.4) starts with this; no HTTP/1 method does.
const H2_PREFACE_START: &[u8] = b"PRI * HTTP/2.0";

/// Tells h2c with prior knowledge from HTTP/1.1 by peeking at the first bytes, leaving them in
/// the socket. (hyper-util's auto builder does the same through a rewinding wrapper, which cost
/// a third more instructions per request in our measurements: docs/BENCHMARKS.md.)
async fn sniff_h2_preface(tcp: &TcpStream, within: Duration) -> std::io::Result<bool> {
    let mut buf = [0u8; H2_PREFACE_START.len()];
    let read = async {
        loop {
            let n = tcp.peek(&mut buf).await?;
            if n == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "connection closed before a request",
                ));
            }
            // Decide as soon as the bytes seen can only be one or the other.
            if !H2_PREFACE_START.starts_with(&buf[..n]) {
                return Ok(false);
            }
            if n == buf.len() {
                return Ok(true);
            }
            // A partial preface: wait for more bytes to arrive.
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    };
    match tokio::time::timeout(within, read).await {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "no request in time")),
    }
}

/// The HTTP/1.1 and HTTP/2 connection settings of a server, built once.
struct ConnectionBuilders {
    h1: hyper::server::conn::http1::Builder,
    h2: hyper::server::conn::http2::Builder<TokioExecutor>,
}

impl ConnectionBuilders {
    fn new(h2: &Http2Config, header_read: Duration) -> Self {
        let mut b1 = hyper::server::conn::http1::Builder::new();
        b1.timer(TokioTimer::new()).header_read_timeout(header_read);
        let mut b2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
        b2.timer(TokioTimer::new())
            .max_concurrent_streams(h2.max_concurrent_streams)
            .initial_stream_window_size(h2.initial_stream_window)
            .initial_connection_window_size(h2.initial_connection_window)
            .max_frame_size(h2.max_frame_size);
        if h2.keep_alive_interval_secs > 0 {
            b2.keep_alive_interval(Duration::from_secs(h2.keep_alive_interval_secs))
                .keep_alive_timeout(Duration::from_secs(h2.keep_alive_timeout_secs));
        }
        ConnectionBuilders { h1: b1, h2: b2 }
    }
}

/// The per-connection hyper service: built-in paths first, then the layer stack.
#[derive(Clone)]
struct SbiService<S> {
    stack: S,
    observability: Observability,
    /// Requests started on this connection, for its idle timeout ([`connection::drive`]).
    activity: Arc<AtomicU64>,
    /// The connection's read gate, when the overload guard holds its limit by backpressure.
    conn_gate: Option<Arc<ConnGate>>,
    /// The consumer's address, given to each request for the message-copy tap (only when one
    /// is installed: an extension costs an allocation per request).
    peer: Option<SocketAddr>,
    /// The consumer's TLS client certificate, read once per connection (mutual TLS).
    peer_cert: Option<Arc<tls::PeerCertificate>>,
}

impl<S> hyper::service::Service<Request<Incoming>> for SbiService<S>
where
    S: Service<Request<Incoming>, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<Ready<Result<Response, Infallible>>, Oneshot<S, Request<Incoming>>>;

    fn call(&self, mut req: Request<Incoming>) -> Self::Future {
        // Only this connection's task calls this: a load and a store, no locked instruction.
        self.activity.store(self.activity.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        if let Some(conn) = &self.conn_gate {
            // The connection keeps reading until this body is in (the content layer drops it).
            if !hyper::body::Body::is_end_stream(req.body()) {
                req.extensions_mut().insert(BodyPending::new(conn));
            }
        }
        if let Some(cert) = &self.peer_cert {
            req.extensions_mut().insert(cert.clone());
        }
        if let Some(peer) = self.peer {
            req.extensions_mut().insert(PeerAddr(peer));
        }
        if req.method() == http::Method::GET {
            if let Some(resp) = self.observability.answer(req.uri().path()) {
                return Either::Left { inner: std::future::ready(Ok(resp)) };
            }
        }
        Either::Right { inner: self.stack.clone().oneshot(req) }
    }
}

/// Where an NRF publishes the keys that verify its access tokens (TS 29.510 leaves the path to
/// the deployment; fivecore's NRF serves it here).
const JWKS_PATH: &str = "/oauth2/jwks";

/// Checks the TLS files every `reload_secs` and puts a changed set in force.
fn spawn_tls_reload(tls: Arc<tls::ReloadingServerConfig>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let period = Duration::from_secs(tls.reload_secs());
        loop {
            tokio::time::sleep(period).await;
            // Reading three small files every few seconds: cheap, but file I/O all the same.
            let t = tls.clone();
            match tokio::task::spawn_blocking(move || t.reload_if_changed()).await {
                Ok(Ok(true)) => {
                    tracing::info!("sbi.tls: certificate files changed, new set in force")
                }
                Ok(Ok(false)) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "sbi.tls: changed files not used"),
                Err(e) => tracing::warn!(error = %e, "sbi.tls: reload task failed"),
            }
        }
    })
}

/// Aborts a background task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
