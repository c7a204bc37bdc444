//! TLS for SBI ports (TS 33.501 §13.1: TLS 1.2 or 1.3), with ALPN `h2` and `http/1.1` and
//! optional mutual TLS, on rustls with the ring provider.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;

/// `[sbi.tls]`: present means the port speaks TLS only.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM certificate chain, leaf first.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// PEM CA certificates; when set, clients must present a certificate signed by one of them
    /// (mutual TLS).
    #[serde(default)]
    pub client_ca: Option<PathBuf>,
    /// Seconds between checks of the three files; a change (a renewed certificate, a rotated
    /// CA) is used for the next connections without a restart. 0: read once. Default 10.
    #[serde(default = "default_reload_secs")]
    pub reload_secs: u64,
}

fn default_reload_secs() -> u64 {
    10
}

impl TlsConfig {
    /// The files of a port, checked every 10 s.
    pub fn new(cert: PathBuf, key: PathBuf, client_ca: Option<PathBuf>) -> TlsConfig {
        TlsConfig { cert, key, client_ca, reload_secs: default_reload_secs() }
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
    #[error("client CA rejected: {0}")]
    Verifier(String),
}

pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| TlsError::Pem { path: path.to_owned(), reason: e.to_string() })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate { path: path.to_owned() });
    }
    Ok(certs)
}

pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path)
        .map_err(|e| TlsError::Pem { path: path.to_owned(), reason: e.to_string() })
}

pub fn load_roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in load_certs(path)? {
        roots.add(cert)?;
    }
    Ok(roots)
}

/// The rustls server configuration for an SBI port.
pub fn server_config(cfg: &TlsConfig) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let provider = provider();
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let builder = match &cfg.client_ca {
        Some(ca) => {
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(load_roots(ca)?), provider)
                    .build()
                    .map_err(|e| TlsError::Verifier(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(load_certs(&cfg.cert)?, load_key(&cfg.key)?)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A port's TLS configuration that follows its files: each new connection gets the one in
/// force. Connections already open keep the certificate they were made with.
pub struct ReloadingServerConfig {
    files: TlsConfig,
    current: RwLock<Arc<rustls::ServerConfig>>,
    stamp: Mutex<Vec<Option<(SystemTime, u64)>>>,
}

impl ReloadingServerConfig {
    pub fn new(files: TlsConfig) -> Result<ReloadingServerConfig, TlsError> {
        let stamp = stamps(&files);
        let config = server_config(&files)?;
        Ok(ReloadingServerConfig { files, current: RwLock::new(config), stamp: Mutex::new(stamp) })
    }

    /// The configuration for a new connection.
    pub fn current(&self) -> Arc<rustls::ServerConfig> {
        self.current.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn reload_secs(&self) -> u64 {
        self.files.reload_secs
    }

    /// Reads the files again if any changed since the last read: true when a new configuration
    /// is in force. A set that does not load (a certificate renewed before its key, a CA file
    /// half written) leaves the one in force and is tried again at the next check.
    pub fn reload_if_changed(&self) -> Result<bool, TlsError> {
        let now = stamps(&self.files);
        let mut stamp = self.stamp.lock().unwrap_or_else(|p| p.into_inner());
        if *stamp == now {
            return Ok(false);
        }
        let config = server_config(&self.files)?;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = config;
        *stamp = now;
        Ok(true)
    }
}

/// Modification time and length of each file (a change of either is a change).
fn stamps(files: &TlsConfig) -> Vec<Option<(SystemTime, u64)>> {
    [Some(&files.cert), Some(&files.key), files.client_ca.as_ref()]
        .into_iter()
        .flatten()
        .map(|p| std::fs::metadata(p).ok().and_then(|m| Some((m.modified().ok()?, m.len()))))
        .collect()
}

/// What a client certificate says about the consumer: the NF instance ids in its
/// subjectAltName (`urn:uuid:<id>` URIs, TS 33.310 §6.1.3c). A request extension on connections
/// that presented a certificate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerCertificate {
    pub instance_ids: Vec<String>,
}

impl PeerCertificate {
    /// Reads the leaf certificate's subjectAltName; a certificate that does not parse (rustls
    /// verified its signature already) names no instance.
    pub fn from_der(der: &[u8]) -> PeerCertificate {
        use x509_parser::extensions::GeneralName;
        let Ok((_, cert)) = x509_parser::parse_x509_certificate(der) else {
            return PeerCertificate::default();
        };
        let mut instance_ids = Vec::new();
        if let Ok(Some(san)) = cert.subject_alternative_name() {
            for name in &san.value.general_names {
                if let GeneralName::URI(uri) = name {
                    let lower = uri.to_ascii_lowercase();
                    if let Some(id) = lower.strip_prefix("urn:uuid:") {
                        instance_ids.push(id.to_owned());
                    }
                }
            }
        }
        PeerCertificate { instance_ids }
    }

    pub fn names(&self, instance_id: &str) -> bool {
        self.instance_ids.iter().any(|i| i.eq_ignore_ascii_case(instance_id))
    }
}
