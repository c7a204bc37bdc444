//! `[bsf]` in the configuration file. Every field has a default, so an empty (or absent) section
//! is a working BSF; unknown keys are errors so a typo never falls back to a default silently.
//! docs/bsf.md explains each setting.

use std::net::SocketAddr;

use nrf_client::NrfClientConfig;
use serde::Deserialize;

/// The BSF's own settings.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BsfConfig {
    /// `apiRoot` (`http://host:port`) used in `Location` headers. Unset: taken from the
    /// request's authority (`Host`).
    #[serde(default)]
    pub api_root: Option<String>,

    /// What a Register does when a binding already exists for the same UE address, DNN and
    /// S-NSSAI: `replace` it (the old one is removed, subscribers hear its deregistration) or
    /// `reject` with 403 `EXISTING_BINDING_INFO_FOUND` (TS 29.521 Nbsf_Management_Register). Default replace.
    #[serde(default)]
    pub on_existing_binding: ExistingBinding,

    /// Binding event subscriptions held at once; the next is answered 403
    /// `INSUFFICIENT_RESOURCES`. Default 10000.
    #[serde(default = "default_max_subscriptions")]
    pub max_subscriptions: usize,

    /// BsfNotification delivery.
    #[serde(default)]
    pub notify: NotifyConfig,

    /// The background audit of old bindings.
    #[serde(default)]
    pub audit: AuditConfig,

    /// Registration with the NRF (`[bsf.nrf]`, the nrf-client settings, docs/nrf-client.md).
    /// Absent: the BSF does not register.
    #[serde(default)]
    pub nrf: Option<NrfClientConfig>,

    /// Discovery (`GET pcfBindings` by `ipv4Addr` or `ipv6Prefix`) answered from memory: the
    /// UE address index (the Rx proxy's, `ue_address_index.rs`) also keeps every binding's
    /// document, ~400 bytes per binding, loaded in the background at start (the BSF reports
    /// ready once it is in). Embedded (SQLite) store only: with `[store] backend = "mysql"`
    /// other BSF instances write the same bindings, so Discovery reads the store. Default true.
    #[serde(default = "default_true")]
    pub discovery_index: bool,

    /// The Diameter Rx proxy (`[bsf.rx]`). Disabled by default.
    #[serde(default)]
    pub rx: RxConfig,
    /// Message copies to the Data Director (`[bsf.copy]`, docs/dd.md "Message copy"). Off by
    /// default.
    #[serde(default)]
    pub copy: dd_client::CopyConfig,
}

/// `[bsf.rx]`: the Diameter Rx proxy between AFs (P-CSCF) and PCFs (docs/bsf.md).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RxConfig {
    /// Run the proxy. Default false.
    #[serde(default)]
    pub enabled: bool,
    /// Diameter listening address (TCP). Default 127.0.0.1:3869.
    #[serde(default = "default_rx_listen")]
    pub listen: SocketAddr,
    /// This BSF's Diameter identity (Origin-Host). Default `bsf.fivecore.local`.
    #[serde(default = "default_rx_origin_host")]
    pub origin_host: String,
    /// Origin-Realm. Default `fivecore.local`.
    #[serde(default = "default_rx_origin_realm")]
    pub origin_realm: String,
    /// Accept a CER from a host not listed in `peers`/`accept` (AFs and PCFs connecting to us).
    /// Default true.
    #[serde(default = "default_true")]
    pub accept_unknown_peers: bool,
    /// Hosts allowed to connect to us when `accept_unknown_peers` is false.
    #[serde(default)]
    pub accept: Vec<String>,
    /// PCFs the BSF connects to itself (`[[bsf.rx.peers]]` with `host` and `addr`).
    #[serde(default)]
    pub peers: Vec<RxPeer>,
    /// An Rx session with no message for this long is forgotten, seconds. Default 3600.
    #[serde(default = "default_rx_session_idle_secs")]
    pub session_idle_secs: u64,
    /// Rx sessions remembered at once; a new session beyond it is still proxied but not
    /// remembered (its later requests look the binding up again). Default 1000000.
    #[serde(default = "default_rx_max_sessions")]
    pub max_sessions: usize,
    /// Wait for a PCF's (or an AF's) answer, milliseconds. Default 5000.
    #[serde(default = "default_rx_request_timeout_ms")]
    pub request_timeout_ms: u64,
    /// Diameter watchdog interval (Tw), seconds. Default 30.
    #[serde(default = "default_rx_watchdog_secs")]
    pub watchdog_secs: u64,
    /// `proxy` (default): requests go through the BSF to the PCF. `redirect`: the BSF answers
    /// 3006 DIAMETER_REDIRECT_INDICATION naming the bound PCF (TS 29.213 §7.4.2) and the AF sends
    /// to it directly.
    #[serde(default)]
    pub mode: RxMode,
    /// Answer AARs from an in-memory index of the bindings by UE address (IPv4 with IP domain,
    /// IPv6 prefixes) instead of a store read each: about 60-120 bytes of memory per binding,
    /// loaded in the background at start (the BSF reports ready once it is in; AARs read the
    /// store until then). Default true.
    #[serde(default = "default_true")]
    pub binding_index: bool,
    /// The Diameter node's size and connection limits (`[bsf.rx.limits]`, docs/diameter.md).
    #[serde(default)]
    pub limits: nf::DiameterLimits,
    /// Mutual TLS (`[bsf.rx.tls]`, docs/security.md): a TLS listener beside or instead of
    /// `listen`, and the certificate presented to `peers` with `tls = true`. Absent: no TLS.
    #[serde(default)]
    pub tls: Option<diameter::TlsConfig>,
}

/// How the Rx side of the BSF reaches the PCF (TS 29.213 §7.3.1: a DRA is a proxy or a redirect
/// agent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum RxMode {
    #[default]
    Proxy,
    Redirect,
}

/// An outbound Diameter peer (a PCF) of the Rx proxy.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RxPeer {
    /// Its Origin-Host.
    pub host: String,
    /// Where it listens.
    pub addr: SocketAddr,
    /// Connect with TLS from the first byte (its TLS port), presenting `[bsf.rx.tls]`'s
    /// certificate; its certificate must name `host`. Default false.
    #[serde(default)]
    pub tls: bool,
}

impl Default for RxConfig {
    fn default() -> Self {
        RxConfig {
            enabled: false,
            listen: default_rx_listen(),
            origin_host: default_rx_origin_host(),
            origin_realm: default_rx_origin_realm(),
            accept_unknown_peers: true,
            accept: Vec::new(),
            peers: Vec::new(),
            session_idle_secs: default_rx_session_idle_secs(),
            max_sessions: default_rx_max_sessions(),
            request_timeout_ms: default_rx_request_timeout_ms(),
            watchdog_secs: default_rx_watchdog_secs(),
            mode: RxMode::default(),
            binding_index: true,
            limits: nf::DiameterLimits::default(),
            tls: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ExistingBinding {
    #[default]
    Replace,
    Reject,
}

/// `[bsf.notify]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyConfig {
    /// Notifications being delivered at once; beyond it new ones are dropped (and logged)
    /// rather than queued without bound. Default 1024.
    #[serde(default = "default_notify_max_in_flight")]
    pub max_in_flight: usize,
    /// Attempts per notification (first send included). Default 3.
    #[serde(default = "default_notify_attempts")]
    pub attempts: u32,
    /// Wait before the first retry, milliseconds; doubled at each retry. Default 200.
    #[serde(default = "default_notify_backoff_ms")]
    pub backoff_ms: u64,
}

/// `[bsf.audit]`: bindings created more than `max_age_secs` ago are removed (and their
/// deregistration notified), oldest first, at most `max_per_sec` per second in batches of
/// `batch`, so the audit never competes with Register/Discovery for the writer for long.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditConfig {
    /// Age after which a binding is considered stale, seconds. 0 (the default) disables the
    /// audit: a PDU session may legitimately last for weeks, so the operator chooses.
    #[serde(default)]
    pub max_age_secs: u64,
    /// Most bindings removed per second. Default 200.
    #[serde(default = "default_audit_max_per_sec")]
    pub max_per_sec: u32,
    /// Most bindings removed in one store transaction. Default 50.
    #[serde(default = "default_audit_batch")]
    pub batch: u32,
    /// Pause when nothing is stale, milliseconds. Default 1000.
    #[serde(default = "default_audit_idle_ms")]
    pub idle_ms: u64,
}

impl Default for BsfConfig {
    fn default() -> Self {
        BsfConfig {
            api_root: None,
            on_existing_binding: ExistingBinding::default(),
            max_subscriptions: default_max_subscriptions(),
            notify: NotifyConfig::default(),
            audit: AuditConfig::default(),
            nrf: None,
            discovery_index: true,
            rx: RxConfig::default(),
            copy: dd_client::CopyConfig::default(),
        }
    }
}

impl Default for NotifyConfig {
    fn default() -> Self {
        NotifyConfig {
            max_in_flight: default_notify_max_in_flight(),
            attempts: default_notify_attempts(),
            backoff_ms: default_notify_backoff_ms(),
        }
    }
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            max_age_secs: 0,
            max_per_sec: default_audit_max_per_sec(),
            batch: default_audit_batch(),
            idle_ms: default_audit_idle_ms(),
        }
    }
}

impl BsfConfig {
    /// Rejects settings that cannot work, naming the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.notify.attempts == 0 || self.notify.max_in_flight == 0 {
            return Err("bsf.notify: attempts and max_in_flight must be at least 1".into());
        }
        if self.audit.max_per_sec == 0 || self.audit.batch == 0 || self.audit.idle_ms == 0 {
            return Err("bsf.audit: max_per_sec, batch and idle_ms must be at least 1".into());
        }
        if let Some(nrf) = &self.nrf {
            if nrf.api_roots.is_empty() {
                return Err("bsf.nrf: api_roots must name at least one NRF".into());
            }
        }
        let rx = &self.rx;
        if rx.enabled {
            if rx.origin_host.is_empty() || rx.origin_realm.is_empty() {
                return Err("bsf.rx: origin_host and origin_realm must not be empty".into());
            }
            if rx.session_idle_secs == 0 || rx.max_sessions == 0 || rx.request_timeout_ms == 0 {
                return Err(
                    "bsf.rx: session_idle_secs, max_sessions and request_timeout_ms must be at least 1"
                        .into(),
                );
            }
            if rx.watchdog_secs < 6 {
                return Err("bsf.rx: watchdog_secs must be at least 6 (RFC 3539)".into());
            }
            rx.limits.validate("bsf.rx.limits")?;
            if rx.tls.is_none() && rx.peers.iter().any(|p| p.tls) {
                return Err("bsf.rx: a peer with tls = true needs [bsf.rx.tls]".into());
            }
        }
        Ok(())
    }
}

fn default_true() -> bool {
    true
}
fn default_rx_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 3869))
}
fn default_rx_origin_host() -> String {
    "bsf.fivecore.local".into()
}
fn default_rx_origin_realm() -> String {
    "fivecore.local".into()
}
fn default_rx_session_idle_secs() -> u64 {
    3600
}
fn default_rx_max_sessions() -> usize {
    1_000_000
}
fn default_rx_request_timeout_ms() -> u64 {
    5000
}
fn default_rx_watchdog_secs() -> u64 {
    30
}

fn default_max_subscriptions() -> usize {
    10_000
}
fn default_notify_max_in_flight() -> usize {
    1024
}
fn default_notify_attempts() -> u32 {
    3
}
fn default_notify_backoff_ms() -> u64 {
    200
}
fn default_audit_max_per_sec() -> u32 {
    200
}
fn default_audit_batch() -> u32 {
    50
}
fn default_audit_idle_ms() -> u64 {
    1000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_section_is_the_default_and_valid() {
        let c: BsfConfig = toml::from_str("").unwrap();
        assert_eq!(c, BsfConfig::default());
        assert!(c.validate().is_ok());
        assert_eq!(c.on_existing_binding, ExistingBinding::Replace);
        assert!(c.nrf.is_none());
    }

    #[test]
    fn policy_nrf_and_unknown_keys() {
        let c: BsfConfig = toml::from_str(
            "on_existing_binding = \"reject\"\n[nrf]\napi_roots = [\"http://127.0.0.1:7000\"]\n",
        )
        .unwrap();
        assert_eq!(c.on_existing_binding, ExistingBinding::Reject);
        assert_eq!(c.nrf.unwrap().api_roots.len(), 1);
        assert!(toml::from_str::<BsfConfig>("on_existing = \"reject\"").is_err());
        let bad = BsfConfig {
            audit: AuditConfig { max_per_sec: 0, ..AuditConfig::default() },
            ..BsfConfig::default()
        };
        assert!(bad.validate().is_err());
    }

    #[test]
    fn rx_section() {
        let c: BsfConfig = toml::from_str(
            "[rx]\nenabled = true\nlisten = \"127.0.0.1:0\"\norigin_host = \"bsf.test\"\n\
             [[rx.peers]]\nhost = \"pcf1.test\"\naddr = \"127.0.0.1:3868\"\n",
        )
        .unwrap();
        assert!(c.rx.enabled);
        assert_eq!(c.rx.origin_host, "bsf.test");
        assert_eq!(c.rx.peers[0].host, "pcf1.test");
        assert_eq!(c.rx.session_idle_secs, 3600);
        assert!(c.validate().is_ok());
        assert!(!BsfConfig::default().rx.enabled);
        assert!(BsfConfig::default().discovery_index);
        let c: BsfConfig = toml::from_str("discovery_index = false").unwrap();
        assert!(!c.discovery_index && c.rx.binding_index);
        assert!(toml::from_str::<BsfConfig>("[rx]\nenable = true").is_err());
        let bad = BsfConfig {
            rx: RxConfig { enabled: true, session_idle_secs: 0, ..RxConfig::default() },
            ..BsfConfig::default()
        };
        assert!(bad.validate().is_err());
    }

    #[test]
    fn rx_diameter_limits() {
        // The keys, defaults and checks are nf::DiameterLimits' (tested there): here, that they
        // are read from [bsf.rx.limits] and checked with the BSF's configuration.
        let d = RxConfig::default();
        assert_eq!(d.limits, nf::DiameterLimits::default());
        let c: BsfConfig = toml::from_str(
            "[rx]
enabled = true
[rx.limits]
max_cer_bytes = 8192
max_connections_before_cer = 16
[rx.limits.max_message_bytes_per_application]
16777236 = 65536
",
        )
        .unwrap();
        assert!(c.validate().is_ok());
        assert_eq!(c.rx.limits.per_application("x").unwrap(), vec![(16_777_236, 65_536)]);
        assert_eq!((c.rx.limits.max_cer_bytes, c.rx.limits.max_connections_before_cer), (8192, 16));
        let c: BsfConfig = toml::from_str(
            "[rx]
enabled = true
[rx.limits]
max_cer_bytes = 10",
        )
        .unwrap();
        assert!(c.validate().unwrap_err().starts_with("bsf.rx.limits.max_cer_bytes"));
    }
}
