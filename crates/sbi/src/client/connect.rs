//! Opening one HTTP/2 connection to a producer: TCP, TLS with ALPN `h2` for `https://`, the
//! HTTP/2 handshake, and the task that drives the connection (I/O, keep-alive PINGs, idle close).

use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use h2::client::Connection;
use http::uri::Authority;
use rustls_pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::pool::{ConnState, Live, Slot};
use super::{BoxError, TlsSource};

/// Everything needed to open a connection, shared by every slot of the pool.
pub(super) struct Connector {
    /// The TLS configuration in force for new connections (`reload` replaces it).
    tls: RwLock<TlsConnector>,
    reload: Option<TlsReload>,
    connect_timeout: Duration,
    stream_window: u32,
    connection_window: u32,
    keep_alive: Option<KeepAlive>,
    idle_timeout: Option<Duration>,
}

/// PING every `interval`, give up on the connection after `timeout` without the ACK.
#[derive(Clone, Copy)]
pub(super) struct KeepAlive {
    pub interval: Duration,
    pub timeout: Duration,
}

impl Connector {
    pub(super) fn new(
        tls: rustls::ClientConfig,
        reload: Option<TlsReload>,
        connect_timeout: Duration,
        stream_window: u32,
        connection_window: u32,
        keep_alive: Option<KeepAlive>,
        idle_timeout: Option<Duration>,
    ) -> Self {
        Self {
            tls: RwLock::new(tls_connector(tls)),
            reload,
            connect_timeout,
            stream_window,
            connection_window,
            keep_alive,
            idle_timeout,
        }
    }

    /// Opens a connection for `slot` and spawns its driver. The whole of TCP connect and TLS
    /// handshake is bounded by the connect timeout; the HTTP/2 preface is only written, the
    /// handshake does not wait for the peer.
    pub(super) async fn connect(
        &self,
        https: bool,
        authority: &Authority,
        slot: &Arc<Slot>,
    ) -> Result<Live, BoxError> {
        let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
        let host = authority.host();
        let opened = tokio::time::timeout(self.connect_timeout, async {
            let tcp =
                TcpStream::connect((host.trim_start_matches('[').trim_end_matches(']'), port))
                    .await?;
            tcp.set_nodelay(true)?;
            if !https {
                return Ok::<_, BoxError>(self.handshake(tcp, slot).await?);
            }
            let name = ServerName::try_from(
                host.trim_start_matches('[').trim_end_matches(']').to_owned(),
            )?;
            if let Some(config) = match &self.reload {
                Some(r) => r.changed().await,
                None => None,
            } {
                *self.tls.write().unwrap() = tls_connector(config);
            }
            let connector = self.tls.read().unwrap().clone();
            let tls = connector.connect(name, tcp).await?;
            Ok(self.handshake(tls, slot).await?)
        })
        .await;
        match opened {
            Ok(r) => r,
            Err(_) => Err(format!("connect timeout after {:?}", self.connect_timeout).into()),
        }
    }

    async fn handshake<T>(&self, io: T, slot: &Arc<Slot>) -> Result<Live, h2::Error>
    where
        T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (send, conn) = h2::client::Builder::new()
            .initial_window_size(self.stream_window)
            .initial_connection_window_size(self.connection_window)
            .enable_push(false)
            .handshake::<_, Bytes>(io)
            .await?;
        let state = Arc::new(ConnState::default());
        tokio::spawn(drive(
            conn,
            state.clone(),
            Arc::downgrade(slot),
            self.keep_alive,
            self.idle_timeout,
        ));
        Ok(Live { send, state })
    }
}

fn tls_connector(mut config: rustls::ClientConfig) -> TlsConnector {
    // TS 29.500 §5.2.3: HTTP/2 over TLS is negotiated with ALPN.
    config.alpn_protocols = vec![b"h2".to_vec()];
    TlsConnector::from(Arc::new(config))
}

/// `[client.tls] reload_secs`: the client's certificate, key and CA files are checked (their
/// modification time and size) when a connection is opened, at most once per `every`; a change
/// builds a new TLS configuration for the connections opened from then on, as the server's
/// `reload_secs` does for its port. A set that does not load (a certificate written before its
/// key) keeps the one in force and is tried again at the next check.
pub(crate) struct TlsReload {
    source: Arc<TlsSource>,
    files: Vec<PathBuf>,
    every: Duration,
    /// When the files were last checked, and what they were when last loaded.
    state: Mutex<(Instant, Vec<Stamp>)>,
}

/// A file's modification time and size (`None`: it could not be read).
type Stamp = Option<(SystemTime, u64)>;

impl TlsReload {
    /// Reads the files' stamps now (at start-up, with the configuration just built from them).
    pub(crate) fn new(source: TlsSource, every: Duration) -> Self {
        let files = source.files();
        let stamps = files.iter().map(|f| stamp(std::fs::metadata(f).ok())).collect();
        TlsReload {
            source: Arc::new(source),
            files,
            every,
            state: Mutex::new((Instant::now(), stamps)),
        }
    }

    /// A new configuration when the files changed since they were loaded and the check is due.
    async fn changed(&self) -> Option<rustls::ClientConfig> {
        {
            let mut st = self.state.lock().unwrap();
            if st.0.elapsed() < self.every {
                return None;
            }
            st.0 = Instant::now();
        }
        let mut now = Vec::with_capacity(self.files.len());
        for f in &self.files {
            now.push(stamp(tokio::fs::metadata(f).await.ok()));
        }
        if self.state.lock().unwrap().1 == now {
            return None;
        }
        let source = self.source.clone();
        match tokio::task::spawn_blocking(move || source.build()).await {
            Ok(Ok(config)) => {
                self.state.lock().unwrap().1 = now;
                tracing::info!(files = ?self.files, "SBI client: TLS files changed, reloaded");
                Some(config)
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "SBI client: changed TLS files do not load; keeping the previous ones");
                None
            }
            Err(_) => None,
        }
    }
}

fn stamp(m: Option<std::fs::Metadata>) -> Stamp {
    let m = m?;
    Some((m.modified().ok()?, m.len()))
}

/// Drives one connection until the peer closes it, it fails, a PING goes unanswered, or it
/// has been idle too long; then takes it out of its slot so the next request reconnects.
async fn drive<T>(
    mut conn: Connection<T, Bytes>,
    state: Arc<ConnState>,
    slot: Weak<Slot>,
    keep_alive: Option<KeepAlive>,
    idle_timeout: Option<Duration>,
) where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let mut ping_pong = conn.ping_pong();
    let pings = async {
        let (Some(ka), Some(pp)) = (keep_alive, ping_pong.as_mut()) else {
            return std::future::pending().await;
        };
        loop {
            tokio::time::sleep(ka.interval).await;
            match tokio::time::timeout(ka.timeout, pp.ping(h2::Ping::opaque())).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => return format!("PING failed: {e}"),
                Err(_) => return format!("no PING ACK within {:?}", ka.timeout),
            }
        }
    };
    let idle = async {
        let Some(period) = idle_timeout else {
            return std::future::pending().await;
        };
        let mut seen = state.started();
        loop {
            tokio::time::sleep(period).await;
            // Nothing started for a whole period and nothing in flight: let it go. When the
            // slot drops its handle, h2 sends GOAWAY and closes once no handle is left.
            let now = state.started();
            if now == seen && slot.upgrade().is_some_and(|s| s.release_if_idle(&state)) {
                return;
            }
            seen = now;
        }
    };
    tokio::pin!(pings, idle);
    let mut idle_released = false;
    loop {
        tokio::select! {
            r = &mut conn => {
                if let Err(e) = r {
                    tracing::debug!(error = %e, "SBI client connection ended");
                }
                break;
            }
            why = &mut pings => {
                tracing::debug!(%why, "SBI client connection dropped");
                break;
            }
            () = &mut idle, if !idle_released => idle_released = true,
        }
    }
    if let Some(slot) = slot.upgrade() {
        slot.forget(&state);
    }
    // Dropping `conn` fails the streams still open on it.
}
