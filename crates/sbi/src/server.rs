//! The SBI server: one port accepting HTTP/2 with prior knowledge (the 3GPP norm), HTTP/1.1 (so
//! curl and HTTP/1 tools work without flags) and, when configured, TLS with ALPN. Each request
//! goes through the [`crate::layer`] stack; `/metrics` and `/healthz/*` are answered before it.

use std::convert::Infallible;
use std::future::{Future, Ready};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use serde::Deserialize;
use tokio::net::{TcpListener, TcpStream};
use tower::util::Oneshot;
use tower::{Service, ServiceBuilder, ServiceExt};

use crate::layer::content::ContentLayer;
use crate::layer::metrics::{MetricsLayer, SbiMetrics};
use crate::layer::overload::{OverloadConfig, OverloadLayer};
use crate::layer::request_id::RequestIdLayer;
use crate::layer::route::RouteLayer;
use crate::layer::tap::{MessageTap, TapLayer};
use crate::layer::Either;
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
        }
    }
}

/// HTTP/2 settings. The defaults suit large NRF answers (an NRF discovery result with ten SMF
/// profiles is about 65 KB) and consumers that keep hundreds of streams on one connection.
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
            max_concurrent_streams: 1024,
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
    tls: Option<tokio_rustls::TlsAcceptor>,
    config: ServerConfig,
    router: Router,
    identity: NfIdentity,
    observability: Observability,
    tap: Option<Arc<dyn MessageTap>>,
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
            Some(t) => Some(tokio_rustls::TlsAcceptor::from(tls::server_config(t)?)),
            None => None,
        };
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|source| ServerError::Bind { addr: config.listen, source })?;
        Ok(SbiServer { listener, tls, config, router, identity, observability, tap: None })
    }

    /// Installs the message-copy tap (the Data Director's hook).
    pub fn with_tap(mut self, tap: Arc<dyn MessageTap>) -> Self {
        self.tap = Some(tap);
        self
    }

    pub fn local_addr(&self) -> SocketAddr {
        // A bound listener always has an address.
        self.listener.local_addr().unwrap_or(self.config.listen)
    }

    /// Serves until `shutdown` completes, then stops accepting and gives open connections
    /// `shutdown_grace_secs` to finish (HTTP/2 GOAWAY, HTTP/1.1 close).
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> std::io::Result<()> {
        let metrics = SbiMetrics::register(&self.observability);
        let stack = ServiceBuilder::new()
            .layer(RequestIdLayer::new())
            .layer(MetricsLayer::new(&metrics, &self.router.operations()))
            .layer(RouteLayer::new(self.router.clone()))
            .layer(OverloadLayer::new(self.config.overload.clone(), &self.identity.instance_id))
            .layer(ContentLayer::new(self.config.max_body_bytes))
            .layer(TapLayer::new(self.tap.clone()))
            .service(Dispatch);
        let service = SbiService { stack, observability: self.observability.clone() };
        let builders = Arc::new(ConnectionBuilders::new(&self.config.http2));
        let graceful = GracefulShutdown::new();
        tokio::pin!(shutdown);
        tracing::info!(addr = %self.local_addr(), tls = self.tls.is_some(), nf = %self.identity.nf_type, "SBI server listening");
        loop {
            let (tcp, peer) = tokio::select! {
                accepted = self.listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Typically EMFILE: back off instead of spinning.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                () = &mut shutdown => break,
            };
            let _ = tcp.set_nodelay(true);
            let svc = service.clone();
            let builders = builders.clone();
            let watcher = graceful.watcher();
            let tls = self.tls.clone();
            tokio::spawn(async move {
                let result = match tls {
                    None => match sniff_h2_preface(&tcp).await {
                        Ok(true) => watcher
                            .watch(builders.h2.serve_connection(TokioIo::new(tcp), svc))
                            .await
                            .map_err(BoxError::from),
                        Ok(false) => watcher
                            .watch(builders.h1.serve_connection(TokioIo::new(tcp), svc))
                            .await
                            .map_err(BoxError::from),
                        Err(e) => Err(BoxError::from(e)),
                    },
                    Some(acceptor) => match handshake(acceptor, tcp).await {
                        Ok(tls) if tls.get_ref().1.alpn_protocol() == Some(b"h2") => watcher
                            .watch(builders.h2.serve_connection(TokioIo::new(tls), svc))
                            .await
                            .map_err(BoxError::from),
                        Ok(tls) => watcher
                            .watch(builders.h1.serve_connection(TokioIo::new(tls), svc))
                            .await
                            .map_err(BoxError::from),
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
        if tokio::time::timeout(grace, graceful.shutdown()).await.is_err() {
            tracing::warn!("connections still open after the shutdown grace period");
        }
        Ok(())
    }
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

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The HTTP/2 connection preface (RFC 9113 §3.4) starts with this; no HTTP/1 method does.
const H2_PREFACE_START: &[u8] = b"PRI * HTTP/2.0";

/// Tells h2c with prior knowledge from HTTP/1.1 by peeking at the first bytes, leaving them in
/// the socket. (hyper-util's auto builder does the same through a rewinding wrapper, which cost
/// a third more instructions per request in our measurements: docs/BENCHMARKS.md.)
async fn sniff_h2_preface(tcp: &TcpStream) -> std::io::Result<bool> {
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
    match tokio::time::timeout(Duration::from_secs(30), read).await {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "no request in 30 s")),
    }
}

/// The HTTP/1.1 and HTTP/2 connection settings of a server, built once.
struct ConnectionBuilders {
    h1: hyper::server::conn::http1::Builder,
    h2: hyper::server::conn::http2::Builder<TokioExecutor>,
}

impl ConnectionBuilders {
    fn new(h2: &Http2Config) -> Self {
        let mut b1 = hyper::server::conn::http1::Builder::new();
        b1.timer(TokioTimer::new()).header_read_timeout(Duration::from_secs(30));
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
}

impl<S> hyper::service::Service<Request<Incoming>> for SbiService<S>
where
    S: Service<Request<Incoming>, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<Ready<Result<Response, Infallible>>, Oneshot<S, Request<Incoming>>>;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        if req.method() == http::Method::GET {
            if let Some(resp) = self.observability.answer(req.uri().path()) {
                return Either::Left { inner: std::future::ready(Ok(resp)) };
            }
        }
        Either::Right { inner: self.stack.clone().oneshot(req) }
    }
}
