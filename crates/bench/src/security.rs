//! `--oauth2` and `--tls` (docs/bench.md, "Access tokens and TLS"): the NFs the kit starts
//! require access tokens and/or mutual TLS, and the kit talks to them as a consumer would, so
//! that the cost of both can be measured on the same mixes as without them.
//!
//! - **Tokens.** The NFs get `[sbi.oauth2] required = true`. The kit is a consumer with an NF
//!   instance of its own, registered at the scenario's NRF (or at one it starts for the purpose
//!   when the scenario has none) through the NFs' own NRF client (`nrf-client`: registration,
//!   heartbeats, Nnrf_AccessToken client credentials, the token cache and its renewal). Tokens
//!   are asked for before the load, one per (target NF type, service) the mix calls, and each
//!   request carries its procedure's as `Authorization: Bearer`.
//! - **TLS.** A lab PKI made with `fivecore cert` (the CLI an operator uses): a CA, a certificate
//!   per NF, one for the kit naming its instance (the token's subject, which the producers bind
//!   to the client certificate). The NFs serve TLS only and require client certificates signed
//!   by the CA; the kit's connections are TLS 1.3 with its certificate, and rustls' session
//!   cache lets a reconnect resume instead of paying a full handshake.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use http::HeaderValue;
use nrf_client::{NfState, NrfClient, NrfClientConfig, ProfileBuilder};
use rustls::pki_types::ServerName;
use sbi::client::{ClientConfig, SbiClient, TlsClientConfig};
use serde::Serialize;
use tokio::net::TcpStream;

/// The NF type the kit registers as: one no scenario discovers or subscribes to, so its
/// profile changes no discovery answer and causes no NF status notification.
pub const CONSUMER_NF_TYPE: &str = "AF";

/// Services a producer answers without a token by default (`[sbi.oauth2] exempt_services`):
/// an NF registers (`nnrf-nfm`) before it may ask for a token (`oauth2`).
const DEFAULT_EXEMPT: [&str; 2] = ["oauth2", "nnrf-nfm"];

/// The name of an NRF the kit starts only to issue tokens: its certificate, log and
/// configuration files.
pub const DEFAULT_ISSUER: &str = "nrf";

/// What the flags asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Modes {
    pub oauth2: bool,
    pub tls: bool,
}

impl Modes {
    pub fn any(self) -> bool {
        self.oauth2 || self.tls
    }

    /// `plain`, `oauth2`, `tls` or `oauth2+tls`.
    pub fn name(self) -> &'static str {
        match (self.oauth2, self.tls) {
            (false, false) => "plain",
            (true, false) => "oauth2",
            (false, true) => "tls",
            (true, true) => "oauth2+tls",
        }
    }
}

/// The run's security mode and what the kit checked of it (`report.json` `security`).
#[derive(Debug, Clone, Serialize)]
pub struct SecurityReport {
    pub mode: String,
    /// The kit's own NF instance (a token's `sub`, its client certificate's `urn:uuid:`).
    pub consumer_instance: Option<String>,
    pub consumer_nf_type: Option<String>,
    /// Where tokens came from: the scenario's NRF, or one the kit started for them.
    pub token_issuer: Option<String>,
    /// One per (target NF type, service) the mix calls.
    pub tokens: Vec<TokenReport>,
    /// A request of the mix sent without a token before the load: its status (401 expected;
    /// anything else stops the run).
    pub no_token_probe: Option<ProbeReport>,
    /// TLS connections the kit opened to the NFs: full handshakes and resumed ones.
    pub tls_full_handshakes: u64,
    pub tls_resumed_handshakes: u64,
    /// A connection opened after the kit's first ones: `resumed` when the session cache worked.
    pub tls_reconnect_probe: Option<String>,
    /// A client without a certificate: what the NF did (`refused: ...` expected).
    pub tls_no_certificate_probe: Option<String>,
}

impl Default for SecurityReport {
    fn default() -> Self {
        SecurityReport {
            mode: Modes::default().name().into(),
            consumer_instance: None,
            consumer_nf_type: None,
            token_issuer: None,
            tokens: Vec::new(),
            no_token_probe: None,
            tls_full_handshakes: 0,
            tls_resumed_handshakes: 0,
            tls_reconnect_probe: None,
            tls_no_certificate_probe: None,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct TokenReport {
    pub target_nf_type: String,
    pub service: String,
    /// Milliseconds the first token took (NRF round trip and signing), before the load.
    pub first_fetch_ms: f64,
    /// Tokens asked for again while the run lasted (renewals before expiry); outside the
    /// requests the kit measures, inside the NRF's CPU when the NRF is the NF measured.
    pub renewals: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProbeReport {
    pub procedure: String,
    pub status: u16,
}

/// The lab PKI of a run, made by `fivecore cert` in `<out>/pki`.
struct Pki {
    dir: PathBuf,
}

impl Pki {
    fn ca(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    fn cert(&self, name: &str) -> (PathBuf, PathBuf) {
        (self.dir.join(format!("{name}.crt")), self.dir.join(format!("{name}.key")))
    }
}

/// Runs `exe cert ARGS`, failing with its output.
fn cert_cli(exe: &Path, args: &[&str]) -> Result<()> {
    let out = Command::new(exe)
        .arg("cert")
        .args(args)
        .output()
        .with_context(|| format!("running {} cert", exe.display()))?;
    if !out.status.success() {
        bail!(
            "`fivecore cert {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// The kit's TLS client side: its certificate, the lab CA, ALPN `h2`, and rustls' default
/// session cache (in memory, 256 sessions): a connection opened after the first ones to an NF
/// resumes a session (TLS 1.3 tickets) instead of a full handshake with certificates.
pub struct TlsClient {
    connector: tokio_rustls::TlsConnector,
    full: AtomicU64,
    resumed: AtomicU64,
}

impl TlsClient {
    fn new(ca: &Path, cert: &Path, key: &Path) -> Result<TlsClient> {
        let roots = sbi::tls::load_roots(ca)?;
        let mut config = rustls::ClientConfig::builder_with_provider(sbi::tls::provider())
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_client_auth_cert(sbi::tls::load_certs(cert)?, sbi::tls::load_key(key)?)?;
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(TlsClient {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
            full: AtomicU64::new(0),
            resumed: AtomicU64::new(0),
        })
    }

    /// A client trusting the CA in `ca` (PEM), presenting `client` (certificate and key, PEM)
    /// when given: `fivecore bench replay` against an https:// server.
    pub fn from_files(ca: &Path, client: Option<(&Path, &Path)>) -> Result<TlsClient> {
        let Some((cert, key)) = client else {
            let mut config = rustls::ClientConfig::builder_with_provider(sbi::tls::provider())
                .with_safe_default_protocol_versions()?
                .with_root_certificates(sbi::tls::load_roots(ca)?)
                .with_no_client_auth();
            config.alpn_protocols = vec![b"h2".to_vec()];
            return Ok(TlsClient {
                connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
                full: AtomicU64::new(0),
                resumed: AtomicU64::new(0),
            });
        };
        Self::new(ca, cert, key)
    }

    /// The TLS handshake on `tcp` with `host` (an address or a DNS name), counted as full or
    /// resumed.
    pub async fn connect(
        &self,
        tcp: TcpStream,
        host: &str,
    ) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
        let name = ServerName::try_from(host.to_owned())
            .map_err(|e| std::io::Error::other(format!("{host}: {e}")))?;
        let tls = self.connector.connect(name, tcp).await?;
        match tls.get_ref().1.handshake_kind() {
            Some(rustls::HandshakeKind::Resumed) => self.resumed.fetch_add(1, Ordering::Relaxed),
            _ => self.full.fetch_add(1, Ordering::Relaxed),
        };
        Ok(tls)
    }

    /// (full, resumed) handshakes so far.
    pub fn handshakes(&self) -> (u64, u64) {
        (self.full.load(Ordering::Relaxed), self.resumed.load(Ordering::Relaxed))
    }
}

/// A procedure's `Authorization` value, kept current by [`Security::keep_tokens`]. Reading it
/// costs a lock and a reference count.
pub struct TokenSlot {
    target_nf_type: String,
    service: String,
    value: Mutex<HeaderValue>,
    first_fetch_ms: f64,
    renewals: AtomicU64,
}

impl TokenSlot {
    pub fn get(&self) -> HeaderValue {
        self.value.lock().unwrap().clone()
    }
}

/// The security side of one run.
pub struct Security {
    modes: Modes,
    exe: PathBuf,
    instance_id: String,
    pki: Option<Pki>,
    tls: Option<Arc<TlsClient>>,
    /// The NRF's JWK set, written by the kit once the NRF serves: every NF it starts reads its
    /// keys from here (a producer fetching `GET /oauth2/jwks` itself would need the NRF's CA and
    /// a client certificate of its own under mutual TLS).
    jwks_file: PathBuf,
    nrf: OnceLock<NrfClient>,
    slots: Mutex<Vec<Arc<TokenSlot>>>,
    report: Mutex<SecurityReport>,
}

impl Security {
    /// Makes what the modes need under `out`: the lab PKI (`fivecore cert ca`, a certificate
    /// for the kit) for TLS.
    pub fn prepare(modes: Modes, exe: &Path, out: &Path) -> Result<Security> {
        let instance_id = uuid::Uuid::new_v4().to_string();
        let (pki, tls) = match modes.tls {
            true => {
                let dir = out.join("pki");
                let d = dir.to_str().context("the report directory is not UTF-8")?;
                cert_cli(exe, &["ca", "--out", d, "--name", "fivecore bench lab CA"])?;
                let args = ["nf", "--ca", d, "--nf-type", CONSUMER_NF_TYPE, "--name", "kit"];
                cert_cli(exe, &[&args[..], &["--instance-id", &instance_id]].concat())?;
                let pki = Pki { dir };
                let (cert, key) = pki.cert("kit");
                let tls = TlsClient::new(&pki.ca(), &cert, &key)
                    .context("the kit's TLS client configuration")?;
                (Some(pki), Some(Arc::new(tls)))
            }
            false => (None, None),
        };
        let report = SecurityReport {
            mode: modes.name().into(),
            consumer_instance: modes.oauth2.then(|| instance_id.clone()),
            consumer_nf_type: modes.oauth2.then(|| CONSUMER_NF_TYPE.into()),
            ..Default::default()
        };
        Ok(Security {
            modes,
            exe: exe.to_owned(),
            instance_id,
            pki,
            tls,
            jwks_file: out.join("jwks.json"),
            nrf: OnceLock::new(),
            slots: Mutex::default(),
            report: Mutex::new(report),
        })
    }

    pub fn modes(&self) -> Modes {
        self.modes
    }

    /// `https` with TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.modes.tls {
            "https"
        } else {
            "http"
        }
    }

    pub fn tls(&self) -> Option<Arc<TlsClient>> {
        self.tls.clone()
    }

    /// `base` with the kit's client certificate and the lab CA, for the kit's own `SbiClient`s
    /// (readiness, preload, `/metrics`).
    pub fn client_config(&self, mut base: ClientConfig) -> ClientConfig {
        if let Some(pki) = &self.pki {
            let (cert, key) = pki.cert("kit");
            base.tls = TlsClientConfig {
                ca_files: vec![pki.ca()],
                cert_file: Some(cert),
                key_file: Some(key),
                ..Default::default()
            };
        }
        base
    }

    /// Adds `[sbi.tls]`, `[client.tls]` and `[sbi.oauth2]` to the configuration file of `nf`
    /// (`root`, the whole file), making its certificate first. `exempt` lists the services the
    /// mix calls at this NF that are not 3GPP services (no token can name them).
    pub fn configure_nf(&self, nf: &str, root: &mut toml::Table, exempt: &[String]) -> Result<()> {
        self.configure(nf, root, self.modes.oauth2.then_some(exempt))
    }

    /// As [`Security::configure_nf`]; tokens required when `oauth2` names the exempt services.
    fn configure(&self, nf: &str, root: &mut toml::Table, oauth2: Option<&[String]>) -> Result<()> {
        let table = |root: &mut toml::Table, key: &str| -> Result<toml::Table> {
            match root.remove(key) {
                None => Ok(toml::Table::new()),
                Some(toml::Value::Table(t)) => Ok(t),
                Some(_) => bail!("[{key}] of the {nf} configuration is not a table"),
            }
        };
        let path = |p: &Path| toml::Value::String(p.display().to_string());
        let mut sbi = table(root, "sbi")?;
        if let Some(pki) = &self.pki {
            let d = pki.dir.to_str().context("the report directory is not UTF-8")?;
            cert_cli(&self.exe, &["nf", "--ca", d, "--nf-type", &nf.to_ascii_uppercase()])?;
            let (cert, key) = pki.cert(nf);
            let mut tls = toml::Table::new();
            tls.insert("cert".into(), path(&cert));
            tls.insert("key".into(), path(&key));
            tls.insert("client_ca".into(), path(&pki.ca()));
            sbi.insert("tls".into(), toml::Value::Table(tls));
            // Its own calls to other NFs of the run (a PCF's to its UDR) with its certificate.
            let mut client = table(root, "client")?;
            let mut ctls = toml::Table::new();
            ctls.insert("ca_files".into(), toml::Value::Array(vec![path(&pki.ca())]));
            ctls.insert("cert_file".into(), path(&cert));
            ctls.insert("key_file".into(), path(&key));
            client.insert("tls".into(), toml::Value::Table(ctls));
            root.insert("client".into(), toml::Value::Table(client));
        }
        if let Some(exempt) = oauth2 {
            let mut o = toml::Table::new();
            o.insert("required".into(), toml::Value::Boolean(true));
            o.insert("jwks_file".into(), path(&self.jwks_file));
            let mut services: Vec<String> = DEFAULT_EXEMPT.iter().map(|s| s.to_string()).collect();
            services.extend(
                exempt.iter().filter(|s| !services.contains(s)).cloned().collect::<Vec<_>>(),
            );
            o.insert(
                "exempt_services".into(),
                toml::Value::Array(services.into_iter().map(toml::Value::String).collect()),
            );
            sbi.insert("oauth2".into(), toml::Value::Table(o));
        }
        root.insert("sbi".into(), toml::Value::Table(sbi));
        Ok(())
    }

    /// The configuration of an NRF the kit starts only to issue tokens (a scenario without an
    /// NRF of its own): TLS like the others; it checks no tokens itself.
    pub fn issuer_config(&self) -> Result<toml::Table> {
        let mut root = toml::Table::new();
        self.configure(DEFAULT_ISSUER, &mut root, None)?;
        Ok(root)
    }

    /// Once the NRF at `nrf_url` serves: writes its JWK set where the NFs read their keys,
    /// registers the kit's instance (the NRF issues tokens to registered NFs only) and keeps it
    /// registered with heartbeats.
    pub async fn start_consumer(&self, nrf_url: &str, started_for_tokens: bool) -> Result<()> {
        let http = SbiClient::new(&self.client_config(ClientConfig::default()))?;
        let jwks = http
            .get(&format!("{nrf_url}/oauth2/jwks"))
            .send()
            .await
            .with_context(|| format!("reading the NRF's JWK set at {nrf_url}"))?;
        if !jwks.status().is_success() {
            bail!("the NRF's JWK set at {nrf_url}: status {}", jwks.status());
        }
        // Written whole, then renamed: an NF reading it sees the old file or the new one.
        let tmp = self.jwks_file.with_extension("json.tmp");
        std::fs::write(&tmp, jwks.body())?;
        std::fs::rename(&tmp, &self.jwks_file)?;
        let profile =
            ProfileBuilder::new(CONSUMER_NF_TYPE, &self.instance_id).ipv4("127.0.0.1").build();
        let config = NrfClientConfig {
            api_roots: vec![nrf_url.to_owned()],
            access_tokens: true,
            ..Default::default()
        };
        let nrf = NrfClient::new(config, http, profile)?;
        nrf.start();
        if !nrf.wait_for_state(NfState::Registered, Duration::from_secs(10)).await {
            bail!("the kit could not register its consumer instance at the NRF {nrf_url}");
        }
        let _ = self.nrf.set(nrf);
        let issuer = match started_for_tokens {
            true => format!("NRF started by the kit for tokens at {nrf_url} (not measured)"),
            false => format!("the scenario's NRF at {nrf_url}"),
        };
        self.report.lock().unwrap().token_issuer = Some(issuer);
        Ok(())
    }

    /// The token slot for requests to `service` (a path's first segment), asking the NRF for
    /// the token the first time: `None` for services that need none (exempt, or not a 3GPP
    /// service).
    pub async fn slot_for(&self, service: &str) -> Result<Option<Arc<TokenSlot>>> {
        if !self.modes.oauth2 || DEFAULT_EXEMPT.contains(&service) {
            return Ok(None);
        }
        let Some(target) = sbi::oauth2::nf_type_of_service(service) else { return Ok(None) };
        if let Some(s) = self.slots.lock().unwrap().iter().find(|s| s.service == service) {
            return Ok(Some(s.clone()));
        }
        let nrf = self.nrf.get().context("the kit is not registered at an NRF")?;
        let t0 = std::time::Instant::now();
        let value = nrf
            .access_token(&target, service)
            .await
            .with_context(|| format!("an access token for {service} ({target})"))?;
        let slot = Arc::new(TokenSlot {
            target_nf_type: target,
            service: service.to_owned(),
            value: Mutex::new(value),
            first_fetch_ms: t0.elapsed().as_secs_f64() * 1e3,
            renewals: AtomicU64::new(0),
        });
        self.slots.lock().unwrap().push(slot.clone());
        Ok(Some(slot))
    }

    /// Keeps every slot's token current until the task is aborted: once a second the NRF
    /// client's cache is asked (no request while the token is fresh; a new token before it
    /// expires, counted as a renewal).
    pub fn keep_tokens(self: &Arc<Self>) -> Option<tokio::task::JoinHandle<()>> {
        self.nrf.get()?;
        let me = self.clone();
        Some(tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                let Some(nrf) = me.nrf.get() else { return };
                let slots: Vec<Arc<TokenSlot>> = me.slots.lock().unwrap().clone();
                for s in slots {
                    match nrf.access_token(&s.target_nf_type, &s.service).await {
                        Ok(v) => {
                            let mut cur = s.value.lock().unwrap();
                            if *cur != v {
                                *cur = v;
                                s.renewals.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        Err(e) => {
                            eprintln!("fivecore bench: renewing the {} token: {e}", s.service)
                        }
                    }
                }
            }
        }))
    }

    pub fn record_no_token_probe(&self, procedure: &str, status: u16) {
        self.report.lock().unwrap().no_token_probe =
            Some(ProbeReport { procedure: procedure.into(), status });
    }

    /// Checks TLS as a consumer meets it, against the NF at `base` (`https://host:port`): a
    /// client without a certificate is refused, and a new connection resumes a session.
    pub async fn probe_tls(&self, base: &str) -> Result<()> {
        let Some(tls) = &self.tls else { return Ok(()) };
        let pki = self.pki.as_ref().context("TLS without a PKI")?;
        let uri: http::Uri = base.parse()?;
        let host = uri.host().context("no host")?.to_owned();
        let port = uri.port_u16().unwrap_or(443);
        // A client that trusts the CA but has no certificate of its own.
        let anonymous = SbiClient::new(&ClientConfig {
            tls: TlsClientConfig { ca_files: vec![pki.ca()], ..Default::default() },
            ..ClientConfig::default()
        })?;
        let refused = match anonymous
            .get(&format!("{base}/healthz/live"))
            .max_rsp_time(Duration::from_secs(3))
            .send()
            .await
        {
            Ok(r) => format!("served: status {}", r.status()),
            Err(e) => format!("refused: {e}"),
        };
        let (_, before) = tls.handshakes();
        let tcp = TcpStream::connect((host.as_str(), port)).await?;
        let probe = match tls.connect(tcp, &host).await {
            Ok(_) if tls.handshakes().1 > before => "resumed".to_string(),
            Ok(_) => "full handshake".to_string(),
            Err(e) => format!("failed: {e}"),
        };
        let mut r = self.report.lock().unwrap();
        r.tls_no_certificate_probe = Some(refused);
        r.tls_reconnect_probe = Some(probe);
        Ok(())
    }

    /// The report's section, with the handshakes and renewals counted so far.
    pub fn report(&self) -> SecurityReport {
        let mut r = self.report.lock().unwrap().clone();
        if let Some(tls) = &self.tls {
            (r.tls_full_handshakes, r.tls_resumed_handshakes) = tls.handshakes();
        }
        r.tokens = self
            .slots
            .lock()
            .unwrap()
            .iter()
            .map(|s| TokenReport {
                target_nf_type: s.target_nf_type.clone(),
                service: s.service.clone(),
                first_fetch_ms: s.first_fetch_ms,
                renewals: s.renewals.load(Ordering::Relaxed),
            })
            .collect();
        r
    }

    /// Deregisters the kit's instance (before the NRF stops).
    pub async fn shutdown(&self) {
        if let Some(nrf) = self.nrf.get() {
            nrf.shutdown().await;
        }
    }
}

/// The first segment of a request path (`/nbsf-management/v1/...` → `nbsf-management`): the
/// service, as the producers' token check reads it.
pub fn service_of(path: &str) -> &str {
    path.trim_start_matches('/').split(['/', '?']).next().unwrap_or("")
}

/// The services of `paths` that are not 3GPP services (no token can name them), for an NF's
/// `exempt_services`.
pub fn non_3gpp_services<'a>(paths: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for p in paths {
        let s = service_of(p);
        if !s.is_empty()
            && !s.starts_with('{')
            && sbi::oauth2::nf_type_of_service(s).is_none()
            && !DEFAULT_EXEMPT.contains(&s)
            && !out.iter().any(|o| o == s)
        {
            out.push(s.to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_is_the_first_path_segment() {
        assert_eq!(service_of("/nnrf-disc/v1/nf-instances?target-nf-type=UDM"), "nnrf-disc");
        assert_eq!(
            service_of("/nbsf-management/v1/pcfBindings/{take:bindings}"),
            "nbsf-management"
        );
        assert_eq!(service_of("/oauth2/token"), "oauth2");
    }

    #[test]
    fn services_without_an_nf_type_are_exempted() {
        let paths = ["/nudr-dr/v1/x", "/soap/ProvisioningService", "/nnrf-nfm/v1/x", "/soap/y"];
        assert_eq!(non_3gpp_services(paths.into_iter()), vec!["soap".to_string()]);
    }

    #[test]
    fn modes_are_named_as_the_report_says() {
        let m = |oauth2, tls| Modes { oauth2, tls }.name();
        assert_eq!(
            [m(false, false), m(true, false), m(false, true), m(true, true)],
            ["plain", "oauth2", "tls", "oauth2+tls"]
        );
    }
}
