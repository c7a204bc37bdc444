//! `[nrf]` in the configuration file. Every field has a default, so an empty (or absent) section
//! is a working NRF; unknown keys are errors so a typo never falls back to a default silently.
//! docs/nrf.md explains each setting.

use std::collections::BTreeMap;

use serde::Deserialize;

/// The NRF's own settings.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NrfConfig {
    /// `apiRoot` (`http://host:port`) used in `Location` headers and `_links`. Unset: taken from
    /// the request's authority (`Host`), which is what the consumer used to reach us.
    #[serde(default)]
    pub api_root: Option<String>,

    /// The PLMNs this NRF serves (`[{ mcc = "001", mnc = "01" }]`). A discovery without
    /// `target-plmn-list` looks for NFs of these PLMNs, and one without `requester-plmn-list`
    /// comes from them (TS 29.510 §6.2.3.2.3.1), which is what `allowedPlmns` is checked
    /// against. Empty (the default): neither default applies.
    #[serde(default)]
    pub plmn_list: Vec<PlmnId>,

    /// heartBeatTimer, seconds, the NRF answers when an NF proposes none or one outside
    /// `heartbeat_min_secs..=heartbeat_max_secs` (TS 29.510 §5.2.2.3.2). Default 10.
    #[serde(default = "default_heartbeat_timer_secs")]
    pub heartbeat_timer_secs: u32,
    /// Smallest heartBeatTimer an NF may propose, seconds. Default 5.
    #[serde(default = "default_heartbeat_min_secs")]
    pub heartbeat_min_secs: u32,
    /// Largest heartBeatTimer an NF may propose, seconds. Default 300.
    #[serde(default = "default_heartbeat_max_secs")]
    pub heartbeat_max_secs: u32,
    /// Extra time after a missed heartbeat before the NF is marked SUSPENDED, milliseconds.
    /// Default 5000.
    #[serde(default = "default_heartbeat_grace_ms")]
    pub heartbeat_grace_ms: u64,
    /// How often the heartbeat audit runs, milliseconds. Default 1000.
    #[serde(default = "default_audit_interval_ms")]
    pub audit_interval_ms: u64,

    /// Largest NF profile accepted, bytes of JSON: a larger NFRegister/NFUpdate body is answered
    /// 413, a PATCH whose result is larger 400. Default 65536.
    #[serde(default = "default_max_profile_bytes")]
    pub max_profile_bytes: usize,

    /// Subscriptions the NRF keeps at once; the next NFStatusSubscribe is answered 403
    /// `INSUFFICIENT_RESOURCES`. Default 1000.
    #[serde(default = "default_max_subscriptions")]
    pub max_subscriptions: usize,
    /// Longest subscription lifetime, seconds: the validityTime granted when none is asked for,
    /// and the cap on one that is. Default 86400.
    #[serde(default = "default_subscription_validity_secs")]
    pub subscription_validity_secs: u64,

    /// Nnrf_NFDiscovery settings.
    #[serde(default)]
    pub discovery: DiscoveryConfig,

    /// NFStatusNotify delivery.
    #[serde(default)]
    pub notify: NotifyConfig,

    /// Nnrf_AccessToken (OAuth2 client credentials) settings.
    #[serde(default)]
    pub access_token: AccessTokenConfig,

    /// Subscriber Location Function queries made during discovery.
    #[serde(default)]
    pub slf: SlfConfig,

    /// Forwarding of discovery to peer NRFs.
    #[serde(default)]
    pub forwarding: ForwardingConfig,
    /// Message copies to the Data Director (`[nrf.copy]`, docs/dd.md "Message copy"). Off by
    /// default.
    #[serde(default)]
    pub copy: dd_client::CopyConfig,
}

/// A PLMN identity (TS 29.571 PlmnId).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlmnId {
    pub mcc: String,
    pub mnc: String,
}

/// `[nrf.slf]`: for a discovery of `nf_types` carrying a SUPI or GPSI and no group-id-list,
/// the NRF asks the SLF (Nudr_GroupIDmap, TS 29.504) for the subscriber's NF group and keeps
/// only the profiles of that group (TS 29.510 §5.3.2.2.2).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlfConfig {
    /// Off by default: with no SLF deployed, every such discovery would fail.
    #[serde(default)]
    pub enabled: bool,
    /// Target NF types that need an SLF query. Default AUSF, UDM, UDR, PCF.
    #[serde(default = "default_slf_nf_types")]
    pub nf_types: Vec<String>,
    /// SLF apiRoots (`http://host:port`), tried in order. Empty: the registered NFs offering
    /// the `nudr-group-id-map` service are used.
    #[serde(default)]
    pub api_roots: Vec<String>,
    /// Send an access token (minted by this NRF, cached until shortly before it expires).
    #[serde(default)]
    pub access_token: bool,
    /// Time allowed for the SLF's answer, milliseconds. Default 2000.
    #[serde(default = "default_slf_timeout_ms")]
    pub timeout_ms: u64,
    /// When no SLF answers: `reject` (504 with cause TARGET_NF_NOT_REACHABLE, the default) or
    /// `skip` (discover as if no SLF were configured).
    #[serde(default)]
    pub on_failure: SlfFailure,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum SlfFailure {
    #[default]
    Reject,
    Skip,
}

impl Default for SlfConfig {
    fn default() -> Self {
        SlfConfig {
            enabled: false,
            nf_types: default_slf_nf_types(),
            api_roots: Vec::new(),
            access_token: false,
            timeout_ms: default_slf_timeout_ms(),
            on_failure: SlfFailure::default(),
        }
    }
}

fn default_slf_nf_types() -> Vec<String> {
    ["AUSF", "UDM", "UDR", "PCF"].map(String::from).to_vec()
}

fn default_slf_timeout_ms() -> u64 {
    2000
}

/// `[nrf.forwarding]`: a discovery of `nf_types` that finds nothing here is forwarded to a peer
/// NRF (TS 29.510 §5.3.2.2.3). A request that already went through an NRF (its `Via` names one)
/// is never forwarded again, so two NRFs forwarding to each other cannot loop.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ForwardingConfig {
    /// Target NF types to forward. Empty: forwarding is off.
    #[serde(default)]
    pub nf_types: Vec<String>,
    /// Peer NRF apiRoots, tried in order.
    #[serde(default)]
    pub peers: Vec<String>,
}

/// `[nrf.access_token]`: the OAuth2 authorization server of TS 29.510 §5.4.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessTokenConfig {
    /// PEM file with the ES256 signing key (PKCS#8, EC P-256). Unset: a key is generated on
    /// first start and kept in the NRF's store, so tokens stay verifiable across restarts.
    #[serde(default)]
    pub signing_key: Option<std::path::PathBuf>,
    /// Lifetime of an issued token, seconds (`expires_in`). Default 3600; at most 86400.
    #[serde(default = "default_token_expiry_secs")]
    pub expiry_secs: u64,
    /// Who may get a token for which target and scope. Empty: every registered NF may get a
    /// token for any target NF type and scope (the target's `allowedNfTypes` still applies).
    #[serde(default)]
    pub rules: Vec<AuthRule>,
}

/// One authorization rule: consumers of `consumer_nf_types` may get tokens for services of
/// `target_nf_type`, limited to `scopes` when given.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthRule {
    /// Consumer NF types (e.g. `["AMF", "SMF"]`); empty means any.
    #[serde(default)]
    pub consumer_nf_types: Vec<String>,
    /// The target NF type (e.g. `"UDM"`).
    pub target_nf_type: String,
    /// Allowed service names (OAuth2 scopes, e.g. `["nudm-sdm"]`); empty means any.
    #[serde(default)]
    pub scopes: Vec<String>,
}

impl Default for AccessTokenConfig {
    fn default() -> Self {
        AccessTokenConfig {
            signing_key: None,
            expiry_secs: default_token_expiry_secs(),
            rules: Vec::new(),
        }
    }
}

fn default_token_expiry_secs() -> u64 {
    3600
}

/// `[nrf.discovery]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscoveryConfig {
    /// SearchResult validityPeriod, seconds, for target NF types not listed in
    /// `validity_period_per_type`. Default 3600.
    #[serde(default = "default_validity_period_secs")]
    pub validity_period_secs: u32,
    /// validityPeriod per target NF type, e.g. `{ UDR = 600, PCF = 60 }`.
    #[serde(default)]
    pub validity_period_per_type: BTreeMap<String, u32>,
    /// Most profiles in one SearchResult (the `limit` query parameter may ask for fewer).
    /// Default 12.
    #[serde(default = "default_max_profiles")]
    pub max_profiles: usize,
    /// The "empty list" option: when no REGISTERED profile matches, answer with the matching
    /// SUSPENDED ones instead of an empty list. Default false.
    #[serde(default)]
    pub suspended_when_empty: bool,
    /// Extended preferred locality: for a `preferred-locality` value, the localities to prefer
    /// in order (e.g. `{ "site-a" = ["site-a", "site-b", "region-1"] }`). Profiles in the first
    /// listed locality come first, then the second, ...; unlisted localities last. A value with
    /// no entry here prefers exactly itself.
    #[serde(default)]
    pub locality_preferences: BTreeMap<String, Vec<String>>,
}

/// `[nrf.notify]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyConfig {
    /// Notifications being delivered at once; beyond it new ones are dropped (and counted in
    /// the logs) rather than queued without bound. Default 1024.
    #[serde(default = "default_notify_max_in_flight")]
    pub max_in_flight: usize,
    /// Notifications being sent at once (a POST outstanding); the rest of those in flight wait
    /// their turn in order, so the burst one NF write causes (one notification per matching
    /// subscription) interleaves with discoveries instead of filling the run queue. Default 16.
    #[serde(default = "default_notify_max_sending")]
    pub max_sending: usize,
    /// Attempts per notification (first send included). Default 3.
    #[serde(default = "default_notify_attempts")]
    pub attempts: u32,
    /// Wait before the first retry, milliseconds; doubled at each retry. Default 200.
    #[serde(default = "default_notify_backoff_ms")]
    pub backoff_ms: u64,
}

impl Default for NrfConfig {
    fn default() -> Self {
        NrfConfig {
            api_root: None,
            plmn_list: Vec::new(),
            heartbeat_timer_secs: default_heartbeat_timer_secs(),
            heartbeat_min_secs: default_heartbeat_min_secs(),
            heartbeat_max_secs: default_heartbeat_max_secs(),
            heartbeat_grace_ms: default_heartbeat_grace_ms(),
            audit_interval_ms: default_audit_interval_ms(),
            max_profile_bytes: default_max_profile_bytes(),
            max_subscriptions: default_max_subscriptions(),
            subscription_validity_secs: default_subscription_validity_secs(),
            discovery: DiscoveryConfig::default(),
            notify: NotifyConfig::default(),
            access_token: AccessTokenConfig::default(),
            slf: SlfConfig::default(),
            forwarding: ForwardingConfig::default(),
            copy: dd_client::CopyConfig::default(),
        }
    }
}

impl Default for DiscoveryConfig {
    fn default() -> Self {
        DiscoveryConfig {
            validity_period_secs: default_validity_period_secs(),
            validity_period_per_type: BTreeMap::new(),
            max_profiles: default_max_profiles(),
            suspended_when_empty: false,
            locality_preferences: BTreeMap::new(),
        }
    }
}

impl Default for NotifyConfig {
    fn default() -> Self {
        NotifyConfig {
            max_in_flight: default_notify_max_in_flight(),
            max_sending: default_notify_max_sending(),
            attempts: default_notify_attempts(),
            backoff_ms: default_notify_backoff_ms(),
        }
    }
}

impl NrfConfig {
    /// Rejects settings that cannot work, naming the field.
    pub fn validate(&self) -> Result<(), String> {
        for (i, p) in self.plmn_list.iter().enumerate() {
            let digits = |s: &str, n: std::ops::RangeInclusive<usize>| {
                n.contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit())
            };
            if !digits(&p.mcc, 3..=3) || !digits(&p.mnc, 2..=3) {
                return Err(format!("nrf: plmn_list[{i}] needs a 3-digit mcc and 2-3 digit mnc"));
            }
        }
        if !self.forwarding.nf_types.is_empty() && self.forwarding.peers.is_empty() {
            return Err("nrf: forwarding.nf_types needs at least one forwarding.peers entry".into());
        }
        if !(1..=86_400).contains(&self.access_token.expiry_secs) {
            return Err("nrf: access_token.expiry_secs must be 1..=86400".into());
        }
        if self.heartbeat_min_secs == 0 || self.heartbeat_min_secs > self.heartbeat_max_secs {
            return Err("nrf: heartbeat_min_secs must be 1..=heartbeat_max_secs".into());
        }
        if !(self.heartbeat_min_secs..=self.heartbeat_max_secs).contains(&self.heartbeat_timer_secs)
        {
            return Err("nrf: heartbeat_timer_secs must lie within heartbeat_min/max_secs".into());
        }
        if self.audit_interval_ms == 0 {
            return Err("nrf: audit_interval_ms must be at least 1".into());
        }
        if self.discovery.max_profiles == 0 {
            return Err("nrf.discovery: max_profiles must be at least 1".into());
        }
        if self.notify.attempts == 0
            || self.notify.max_in_flight == 0
            || self.notify.max_sending == 0
        {
            return Err(
                "nrf.notify: attempts, max_in_flight and max_sending must be at least 1".into()
            );
        }
        Ok(())
    }

    /// The validityPeriod of a discovery answer for `target` NF type.
    pub fn validity_period(&self, target: &str) -> u32 {
        self.discovery
            .validity_period_per_type
            .get(target)
            .copied()
            .unwrap_or(self.discovery.validity_period_secs)
    }
}

fn default_heartbeat_timer_secs() -> u32 {
    10
}
fn default_heartbeat_min_secs() -> u32 {
    5
}
fn default_heartbeat_max_secs() -> u32 {
    300
}
fn default_heartbeat_grace_ms() -> u64 {
    5000
}
fn default_audit_interval_ms() -> u64 {
    1000
}
fn default_max_profile_bytes() -> usize {
    64 * 1024
}
fn default_max_subscriptions() -> usize {
    1000
}
fn default_subscription_validity_secs() -> u64 {
    86_400
}
fn default_validity_period_secs() -> u32 {
    3600
}
fn default_max_profiles() -> usize {
    12
}
fn default_notify_max_in_flight() -> usize {
    1024
}
fn default_notify_max_sending() -> usize {
    16
}
fn default_notify_attempts() -> u32 {
    3
}
fn default_notify_backoff_ms() -> u64 {
    200
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_section_is_the_default_and_valid() {
        let c: NrfConfig = toml::from_str("").unwrap();
        assert_eq!(c, NrfConfig::default());
        assert!(c.validate().is_ok());
        assert_eq!(c.max_subscriptions, 1000);
        assert_eq!(c.discovery.max_profiles, 12);
    }

    #[test]
    fn per_type_validity_and_unknown_keys() {
        let c: NrfConfig =
            toml::from_str("[discovery]\nvalidity_period_per_type = { UDR = 60 }\n").unwrap();
        assert_eq!(c.validity_period("UDR"), 60);
        assert_eq!(c.validity_period("PCF"), 3600);
        assert!(toml::from_str::<NrfConfig>("heartbeat_timer = 3").is_err());
        let bad = NrfConfig { heartbeat_timer_secs: 1, ..NrfConfig::default() };
        assert!(bad.validate().is_err());
    }
}
