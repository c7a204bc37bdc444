//! TLS on Diameter connections (RFC 6733 §2.1, §13.1): TLS from the first byte on a port of its
//! own (5658 by convention), mutual (both ends present a certificate of the configured CA), and
//! the certificate tied to the Diameter identity: a peer's certificate must name, as a DNS
//! subjectAltName, the Origin-Host it sends in its CER or CEA. The older RFC 3588 way (TLS
//! negotiated with Inband-Security-Id after a plain CER/CEA) is not offered.
//!
//! [`TlsConfig`] is the configuration section every NF's Diameter node takes (`[pcf.diameter.tls]`,
//! `[bsf.rx.tls]`, `[udr.sh.tls]`); [`TlsCredentials`] holds the rustls configurations built from
//! its files and builds them again when the files change, so a renewed certificate is used by the
//! next connections without a restart (open connections keep theirs).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde::Deserialize;

/// A Diameter node's TLS section (`[<nf>.<interface>.tls]`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM certificate chain, leaf first. Its subjectAltName must hold the node's Origin-Host as
    /// a DNS name: peers check it (`fivecore cert nf --dns <origin-host>`).
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// PEM CA certificates the peers' certificates must be signed by, both ways: a peer
    /// connecting without a certificate of one of them fails the handshake, and so does a peer
    /// we connect to.
    pub ca: PathBuf,
    /// Where to accept TLS connections (TLS from the first byte). Absent: no TLS listener, only
    /// outbound peers with `tls = true` use TLS.
    #[serde(default)]
    pub listen: Option<SocketAddr>,
    /// Keep the plain TCP listener (the interface's `listen`) open beside the TLS one, as
    /// freeDiameter does with its Port and SecPort. False: TLS only. Default true.
    #[serde(default = "default_true")]
    pub plain_listen: bool,
    /// Close a TLS connection whose peer certificate does not name (DNS subjectAltName) the
    /// Origin-Host of its CER (answered 3010 DIAMETER_UNKNOWN_PEER) or CEA. Default true.
    #[serde(default = "default_true")]
    pub check_peer_identity: bool,
    /// Seconds between checks of the three files; a change is used by the next connections
    /// without a restart. 0: read once. Default 10 (as `[sbi.tls] reload_secs`).
    #[serde(default = "default_reload_secs")]
    pub reload_secs: u64,
}

fn default_true() -> bool {
    true
}

fn default_reload_secs() -> u64 {
    10
}

impl TlsConfig {
    /// The files, with the defaults for the rest (no TLS listener).
    pub fn new(cert: PathBuf, key: PathBuf, ca: PathBuf) -> TlsConfig {
        TlsConfig {
            cert,
            key,
            ca,
            listen: None,
            plain_listen: true,
            check_peer_identity: true,
            reload_secs: default_reload_secs(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {reason}")]
    Pem { path: PathBuf, reason: String },
    #[error("{path} holds no certificate")]
    NoCertificate { path: PathBuf },
    #[error("TLS configuration rejected: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("CA rejected: {0}")]
    Verifier(String),
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| TlsError::Pem { path: path.to_owned(), reason: e.to_string() })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate { path: path.to_owned() });
    }
    Ok(certs)
}

fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path)
        .map_err(|e| TlsError::Pem { path: path.to_owned(), reason: e.to_string() })
}

fn load_roots(path: &Path) -> Result<Arc<RootCertStore>, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in load_certs(path)? {
        roots.add(cert)?;
    }
    Ok(Arc::new(roots))
}

/// The server and client configurations of one set of files.
struct Configs {
    server: Arc<rustls::ServerConfig>,
    client: Arc<rustls::ClientConfig>,
}

fn build(files: &TlsConfig) -> Result<Configs, TlsError> {
    let provider = provider();
    let roots = load_roots(&files.ca)?;
    let (certs, key) = (load_certs(&files.cert)?, load_key(&files.key)?);
    let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
        .build()
        .map_err(|e| TlsError::Verifier(e.to_string()))?;
    let server = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs.clone(), key.clone_key())?;
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_client_auth_cert(certs, key)?;
    Ok(Configs { server: Arc::new(server), client: Arc::new(client) })
}

/// The TLS configurations a node's new connections use: the listener's (server) and the
/// outbound peers' (client). Built from a [`TlsConfig`]'s files and re-read when they change,
/// or fixed ([`TlsCredentials::fixed`], configurations made in code).
pub struct TlsCredentials {
    files: Option<TlsConfig>,
    current: RwLock<Arc<Configs>>,
    stamp: Mutex<Vec<Option<(SystemTime, u64)>>>,
}

impl std::fmt::Debug for TlsCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsCredentials").field("files", &self.files).finish_non_exhaustive()
    }
}

impl TlsCredentials {
    /// Reads the files of `cfg` (an error names the file that does not load).
    pub fn load(cfg: &TlsConfig) -> Result<Arc<TlsCredentials>, TlsError> {
        let stamp = stamps(cfg);
        let configs = build(cfg)?;
        Ok(Arc::new(TlsCredentials {
            files: Some(cfg.clone()),
            current: RwLock::new(Arc::new(configs)),
            stamp: Mutex::new(stamp),
        }))
    }

    /// Configurations made in code; never reloaded.
    pub fn fixed(
        server: Arc<rustls::ServerConfig>,
        client: Arc<rustls::ClientConfig>,
    ) -> Arc<TlsCredentials> {
        Arc::new(TlsCredentials {
            files: None,
            current: RwLock::new(Arc::new(Configs { server, client })),
            stamp: Mutex::new(Vec::new()),
        })
    }

    fn current(&self) -> Arc<Configs> {
        self.current.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The server configuration for a connection accepted now.
    pub fn server_config(&self) -> Arc<rustls::ServerConfig> {
        self.current().server.clone()
    }

    /// The client configuration for a connection opened now.
    pub fn client_config(&self) -> Arc<rustls::ClientConfig> {
        self.current().client.clone()
    }

    /// Seconds between file checks; 0 when never reloaded.
    pub fn reload_secs(&self) -> u64 {
        self.files.as_ref().map_or(0, |f| f.reload_secs)
    }

    /// Reads the files again if one changed since the last read (modification time or size):
    /// true when a new set is in force. A set that does not load (a certificate renewed before
    /// its key, a CA file half written) leaves the one in force and is tried at the next check.
    pub fn reload_if_changed(&self) -> Result<bool, TlsError> {
        let Some(files) = &self.files else { return Ok(false) };
        let now = stamps(files);
        let mut stamp = self.stamp.lock().unwrap_or_else(|p| p.into_inner());
        if *stamp == now {
            return Ok(false);
        }
        let configs = build(files)?;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(configs);
        *stamp = now;
        Ok(true)
    }

    /// Checks the files every `reload_secs` (on the blocking pool: it is file I/O) until the
    /// returned task is aborted; `None` when the credentials are not reloaded.
    pub fn spawn_reload(self: &Arc<Self>) -> Option<tokio::task::JoinHandle<()>> {
        let secs = self.reload_secs();
        if secs == 0 {
            return None;
        }
        let me = Arc::downgrade(self);
        Some(tokio::spawn(async move {
            let period = std::time::Duration::from_secs(secs);
            loop {
                tokio::time::sleep(period).await;
                let Some(creds) = me.upgrade() else { return };
                match tokio::task::spawn_blocking(move || creds.reload_if_changed()).await {
                    Ok(Ok(true)) => {
                        tracing::info!("diameter tls: certificate files changed, new set in force")
                    }
                    Ok(Ok(false)) => {}
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "diameter tls: changed files not used")
                    }
                    Err(e) => tracing::warn!(error = %e, "diameter tls: reload task failed"),
                }
            }
        }))
    }
}

/// Modification time and length of each file (a change of either is a change).
fn stamps(files: &TlsConfig) -> Vec<Option<(SystemTime, u64)>> {
    [&files.cert, &files.key, &files.ca]
        .into_iter()
        .map(|p| std::fs::metadata(p).ok().and_then(|m| Some((m.modified().ok()?, m.len()))))
        .collect()
}

/// Whether `cert` (a peer's leaf certificate, verified by the handshake already) names the
/// Diameter identity `host` as a DNS subjectAltName, by the rules a TLS client checks a server
/// name with (RFC 6125; a wildcard covers one label).
pub fn names_identity(cert: &CertificateDer<'_>, host: &str) -> bool {
    let Ok(name) = ServerName::try_from(host) else { return false };
    let Ok(parsed) = rustls::server::ParsedCertificate::try_from(cert) else { return false };
    rustls::client::verify_server_name(&parsed, &name).is_ok()
}
