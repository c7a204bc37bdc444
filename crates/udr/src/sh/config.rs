//! `[udr.sh]`: the Diameter Sh server (TS 29.328 / TS 29.329). docs/udr.md explains each key.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde::Deserialize;

/// The Sh server's settings. Every field has a default; unknown keys are refused.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShConfig {
    /// Run the Sh server. Default false (as the BSF's Rx proxy: a Diameter port is opened only
    /// when asked for).
    #[serde(default)]
    pub enabled: bool,
    /// Diameter listening address (TCP). Default 127.0.0.1:3870.
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
    /// Origin-Host. Default `udr.fivecore.local`.
    #[serde(default = "default_origin_host")]
    pub origin_host: String,
    /// Origin-Realm. Default `fivecore.local`.
    #[serde(default = "default_origin_realm")]
    pub origin_realm: String,
    /// Accept a CER from a host not listed in `peers` / `accept`. Default true.
    #[serde(default = "default_true")]
    pub accept_unknown_peers: bool,
    /// Hosts allowed to connect when `accept_unknown_peers` is false.
    #[serde(default)]
    pub accept: Vec<String>,
    /// Peers the UDR connects to itself (`[[udr.sh.peers]]`: `host`, `addr`), e.g. a Diameter
    /// agent in front of the application servers.
    #[serde(default)]
    pub peers: Vec<ShPeer>,
    /// Realm routes for what the UDR sends (PNR): `[[udr.sh.routes]]` with `realm` and the
    /// `peers` (hosts) that relay to it. An AS connected directly needs none.
    #[serde(default)]
    pub routes: Vec<ShRoute>,
    /// The AS permission list (TS 29.328 §6.2): AS Origin-Host (or `*`) -> the procedures it may
    /// use, among `pull` (UDR), `update` (PUR) and `subs-notif` (SNR). Empty: every AS may use
    /// every procedure. A procedure not allowed is answered DIAMETER_ERROR_OPERATION_NOT_ALLOWED.
    #[serde(default)]
    pub as_permissions: BTreeMap<String, Vec<Procedure>>,
    /// Largest ServiceData of one RepositoryData, bytes; a larger PUR gets
    /// DIAMETER_ERROR_TOO_MUCH_DATA. Default 16384.
    #[serde(default = "default_max_repository_data_bytes")]
    pub max_repository_data_bytes: usize,
    /// Subscriptions to notifications held at once; the next SNR gets DIAMETER_UNABLE_TO_COMPLY.
    /// Default 1000000.
    #[serde(default = "default_max_subscriptions")]
    pub max_subscriptions: usize,
    /// Longest subscription granted, seconds: the Expiry-Time answered is capped to it (and set
    /// when the AS asked for none). 0: no limit. Default 0.
    #[serde(default)]
    pub max_subscription_secs: u64,
    /// PNRs being delivered at once; beyond it a notification is dropped and logged.
    /// Default 1024.
    #[serde(default = "default_max_pnr_in_flight")]
    pub max_pnr_in_flight: usize,
    /// Wait for an AS's PNA, milliseconds. Default 5000.
    #[serde(default = "default_request_timeout_ms")]
    pub request_timeout_ms: u64,
    /// Diameter watchdog interval (Tw), seconds (at least 6). Default 30.
    #[serde(default = "default_watchdog_secs")]
    pub watchdog_secs: u64,
    /// The Diameter node's size and connection limits (`[udr.sh.limits]`, docs/diameter.md).
    #[serde(default)]
    pub limits: nf::DiameterLimits,
    /// Mutual TLS (`[udr.sh.tls]`, docs/security.md): a TLS listener beside or instead of
    /// `listen`, and the certificate presented to `peers` with `tls = true`. Absent: no TLS.
    #[serde(default)]
    pub tls: Option<diameter::TlsConfig>,
}

/// An outbound Diameter peer.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShPeer {
    pub host: String,
    pub addr: SocketAddr,
    /// Connect with TLS from the first byte (its TLS port), presenting `[udr.sh.tls]`'s
    /// certificate; its certificate must name `host`. Default false.
    #[serde(default)]
    pub tls: bool,
}

/// A realm route: requests for `realm` go to one of `peers`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShRoute {
    pub realm: String,
    pub peers: Vec<String>,
}

/// The Sh procedures of the AS permission list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Procedure {
    /// Sh-Pull (UDR).
    Pull,
    /// Sh-Update (PUR).
    Update,
    /// Sh-Subs-Notif (SNR).
    SubsNotif,
}

impl Default for ShConfig {
    fn default() -> Self {
        ShConfig {
            enabled: false,
            listen: default_listen(),
            origin_host: default_origin_host(),
            origin_realm: default_origin_realm(),
            accept_unknown_peers: true,
            accept: Vec::new(),
            peers: Vec::new(),
            routes: Vec::new(),
            as_permissions: BTreeMap::new(),
            max_repository_data_bytes: default_max_repository_data_bytes(),
            max_subscriptions: default_max_subscriptions(),
            max_subscription_secs: 0,
            max_pnr_in_flight: default_max_pnr_in_flight(),
            request_timeout_ms: default_request_timeout_ms(),
            watchdog_secs: default_watchdog_secs(),
            limits: nf::DiameterLimits::default(),
            tls: None,
        }
    }
}

impl ShConfig {
    /// Checks what serde cannot.
    pub fn validate(&self) -> Result<(), String> {
        self.limits.validate("udr.sh.limits")?;
        if self.tls.is_none() && self.peers.iter().any(|p| p.tls) {
            return Err("udr.sh: a peer with tls = true needs [udr.sh.tls]".into());
        }
        if self.origin_host.is_empty() || self.origin_realm.is_empty() {
            return Err("udr.sh: origin_host and origin_realm must not be empty".into());
        }
        if self.watchdog_secs < 6 {
            return Err("udr.sh: watchdog_secs must be at least 6 (RFC 3539)".into());
        }
        if self.max_pnr_in_flight == 0 || self.request_timeout_ms == 0 {
            return Err("udr.sh: max_pnr_in_flight and request_timeout_ms must be positive".into());
        }
        if self.max_repository_data_bytes == 0 {
            return Err("udr.sh: max_repository_data_bytes must be positive".into());
        }
        if let Some(r) = self.routes.iter().find(|r| r.realm.is_empty() || r.peers.is_empty()) {
            return Err(format!("udr.sh.routes: realm {:?} needs a realm and peers", r.realm));
        }
        Ok(())
    }

    /// Whether the AS `host` may use `procedure` (the AS permission list).
    pub fn allows(&self, host: &str, procedure: Procedure) -> bool {
        if self.as_permissions.is_empty() {
            return true;
        }
        let listed = self
            .as_permissions
            .iter()
            .find(|(h, _)| h.eq_ignore_ascii_case(host))
            .or_else(|| self.as_permissions.get_key_value("*"));
        listed.is_some_and(|(_, p)| p.contains(&procedure))
    }
}

fn default_true() -> bool {
    true
}
fn default_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 3870))
}
fn default_origin_host() -> String {
    "udr.fivecore.local".into()
}
fn default_origin_realm() -> String {
    "fivecore.local".into()
}
fn default_max_repository_data_bytes() -> usize {
    16384
}
fn default_max_subscriptions() -> usize {
    1_000_000
}
fn default_max_pnr_in_flight() -> usize {
    1024
}
fn default_request_timeout_ms() -> u64 {
    5000
}
fn default_watchdog_secs() -> u64 {
    30
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn section_and_permissions() {
        let c: ShConfig = toml::from_str(
            r#"
            enabled = true
            listen = "127.0.0.1:0"
            routes = [{ realm = "as.example", peers = ["dra.example"] }]
            [as_permissions]
            "as1.example" = ["pull", "subs-notif"]
            "*" = ["pull"]
            "#,
        )
        .unwrap();
        assert!(c.enabled);
        assert!(c.validate().is_ok());
        assert!(c.allows("AS1.example", Procedure::SubsNotif));
        assert!(!c.allows("as1.example", Procedure::Update));
        assert!(c.allows("other", Procedure::Pull));
        assert!(!c.allows("other", Procedure::Update));
        assert!(ShConfig::default().allows("any", Procedure::Update));
        assert!(toml::from_str::<ShConfig>("enable = true").is_err());
        assert!(toml::from_str::<ShConfig>("as_permissions = { x = [\"write\"] }").is_err());
        let bad = ShConfig { watchdog_secs: 1, ..ShConfig::default() };
        assert!(bad.validate().is_err());
    }
}
