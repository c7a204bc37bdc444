//! `[pcf]` in the configuration file. Every field has a default, so an empty (or absent) section
//! is a working PCF running the default policy project; unknown keys are errors so a typo never
//! falls back to a default silently. docs/pcf.md explains each setting.

use std::path::PathBuf;

use nrf_client::NrfClientConfig;
use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PcfConfig {
    /// `apiRoot` (`http://host:port`) used in `Location` headers. Unset: taken from the
    /// request's authority (`Host`).
    #[serde(default)]
    pub api_root: Option<String>,

    /// The directory of the policy project the PCF decides with (docs/policy.md). Absent: the
    /// built-in default project (the repository's `policies/default`), written at first start
    /// to `policy-default/` beside the PCF's database and loaded from there.
    #[serde(default)]
    pub policy: Option<PathBuf>,

    /// Deploy the project again when one of its files changes, looking every this many
    /// milliseconds; 0 turns it off (the admin endpoint still deploys). Default 0.
    #[serde(default)]
    pub policy_watch_ms: u64,

    /// Serve the policy admin endpoint (`/policy-admin/v1/...`) on the SBI port. Default true.
    #[serde(default = "default_true")]
    pub policy_admin: bool,

    /// Registration with the NRF (`[pcf.nrf]`, the nrf-client settings, docs/nrf-client.md).
    /// Absent: the PCF does not register.
    #[serde(default)]
    pub nrf: Option<NrfClientConfig>,

    /// How long one request may hold a subscriber before the next request of the same
    /// subscriber goes ahead anyway (collision control), ms. Default 3000.
    #[serde(default = "default_collision_lease_ms")]
    pub collision_lease_ms: u64,

    /// With `[store] backend = "mysql"`: how long this instance's hold on the database lasts
    /// without renewal, ms (renewed every third of it). One PCF instance serves from one
    /// database; an instance killed without releasing it makes the next one wait up to this
    /// long (docs/pcf.md, "On MySQL"). Default 10000.
    #[serde(default = "default_instance_lease_ms")]
    pub instance_lease_ms: u64,

    /// With `[store] backend = "mysql"`: several PCF instances serve from one database, each
    /// following the others' writes through the store's change feed (crate::coherence; what is
    /// and is not followed: docs/pcf.md, "Several instances"). Off (default): one instance per
    /// database, held by a lease (`instance_lease_ms`).
    #[serde(default)]
    pub shared_database: bool,

    /// The policy data source (`[pcf.udr]`): the UDR's policy data, N36.
    #[serde(default)]
    pub udr: UdrConfig,

    /// PCF bindings at the BSF (`[pcf.bsf]`, N7-Nbsf).
    #[serde(default)]
    pub bsf: BsfConfig,

    /// The session audit (`[pcf.audit]`).
    #[serde(default)]
    pub audit: AuditConfig,
    /// URSP delivery through the AMF (`[pcf.amf]`, Namf_Communication).
    #[serde(default)]
    pub amf: AmfConfig,
    /// Policy Event Records (`[pcf.per]`, crate::per).
    #[serde(default)]
    pub per: crate::per::PerConfig,
    /// The subscriber activity log (`[pcf.sal]`, crate::per).
    #[serde(default)]
    pub sal: crate::per::SalConfig,
    /// Spending limit subscriptions at the CHF (`[pcf.chf]`, N28).
    #[serde(default)]
    pub chf: ChfConfig,
    /// The Diameter side, the converged PCRF (`[pcf.diameter]`: Gx today).
    #[serde(default)]
    pub diameter: DiameterConfig,
    /// Usage monitoring on Gx and N7 (`[pcf.usage]`, crate::usage).
    #[serde(default)]
    pub usage: UsageConfig,
    /// Spending limits from an OCS over Sy (`[pcf.sy]`, TS 29.219), for Gx sessions and,
    /// with `n7`, N7 ones.
    #[serde(default)]
    pub sy: SyConfig,
    /// Subscriber profiles from an LDAP directory (`[pcf.ldap]`, for Gx sessions; N7 too when
    /// configured).
    #[serde(default)]
    pub ldap: crate::ldap::LdapConfig,
    /// Application detection by a TDF over Sd (`[pcf.sd]`, TS 29.212 §4b, §5b), for Gx
    /// sessions whose decision has application detection rules.
    #[serde(default)]
    pub sd: SdConfig,
    /// Message copies to the Data Director (`[pcf.copy]`, docs/dd.md "Message copy"). Off by
    /// default.
    #[serde(default)]
    pub copy: dd_client::CopyConfig,
}

/// `[pcf.sd]`: the PCF as the PCRF of TS 29.212's Sd, giving TDFs the ADC rules of its Gx
/// sessions (solicited application reporting) and re-deciding a session when its TDF reports
/// an application's start or stop. The PCF connects out to each TDF (CER, DWR, reconnection)
/// with the Diameter identity of `[pcf.diameter]`.
///
/// Which sessions get a TDF session: with `enabled`, a Gx session whose decision holds a PCC
/// rule with an `appId` (TS 29.512 PccRule: an application detection rule, TS 29.513 §6.x's
/// ADC rule); its TDF session is made at the CCR-I.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SdConfig {
    /// Default false.
    #[serde(default)]
    pub enabled: bool,
    /// The TDFs, in order of preference: a session's TSR goes to the first one open, its later
    /// requests to the TDF that answered it.
    #[serde(default)]
    pub tdf: Vec<TdfPeer>,
    /// How long a TSR or RAR waits for its answer, ms. Default 1000.
    #[serde(default = "default_udr_timeout_ms")]
    pub request_timeout_ms: u64,
    /// DWR interval (RFC 3539 Tw), seconds. Default 30.
    #[serde(default = "default_diameter_watchdog_secs")]
    pub watchdog_secs: u64,
}

/// One TDF of `[pcf.sd]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TdfPeer {
    /// Its Diameter identity (the Origin-Host its CEA must carry).
    pub host: String,
    /// Its realm (Destination-Realm of the requests it gets).
    pub realm: String,
    /// Where to connect.
    pub addr: std::net::SocketAddr,
    /// Connect with TLS from the first byte (its TLS port), presenting `[pcf.diameter.tls]`'s
    /// certificate; its certificate must name `host`. Default false.
    #[serde(default)]
    pub tls: bool,
}

impl Default for SdConfig {
    fn default() -> Self {
        SdConfig {
            enabled: false,
            tdf: Vec::new(),
            request_timeout_ms: default_udr_timeout_ms(),
            watchdog_secs: default_diameter_watchdog_secs(),
        }
    }
}

/// `[pcf.usage]`: usage monitoring (TS 29.212 §4.5.17; TS 29.512 §4.2.2, §4.2.4).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageConfig {
    /// Add up the usage reports of a subscriber's sessions (Gx Used-Service-Unit per
    /// Monitoring-Key, N7 accuUsageReports) and give the totals to the policy project as
    /// `usage.<monitoringKey>`; a report re-decides. Off: reports are not read and `usage
    /// exists` is false to the project. Default false (the reference's "Usage Monitoring"
    /// toggle, off but in its 3.6.1).
    #[serde(default)]
    pub enabled: bool,
}

/// `[pcf.sy]`: the PCF as the PCRF of TS 29.219, asking OCSs for the statuses of the policy
/// counters the project reads (`[spending] counters`). The PCF connects out to each OCS (CER,
/// DWR, reconnection) with the Diameter identity of `[pcf.diameter]`.
///
/// Which sessions read their statuses from the OCS: with `enabled`, Gx sessions; N7 SM
/// associations too when `n7` is true (the reference's "Sy (PCF N7-Sy)" toggle), else they
/// keep reading them from the CHF (`[pcf.chf]`, N28).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyConfig {
    /// Default false.
    #[serde(default)]
    pub enabled: bool,
    /// N7 SM associations use Sy too, not N28. Default false.
    #[serde(default)]
    pub n7: bool,
    /// The OCSs, in order of preference: a subscriber's first SLR goes to the first one open,
    /// its later requests to the OCS that answered it.
    #[serde(default)]
    pub ocs: Vec<OcsPeer>,
    /// How long an SLR or STR waits for its answer, ms. Default 1000.
    #[serde(default = "default_udr_timeout_ms")]
    pub request_timeout_ms: u64,
    /// DWR interval (RFC 3539 Tw), seconds. Default 30.
    #[serde(default = "default_diameter_watchdog_secs")]
    pub watchdog_secs: u64,
}

/// One OCS of `[pcf.sy]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OcsPeer {
    /// Its Diameter identity (the Origin-Host its CEA must carry).
    pub host: String,
    /// Its realm (Destination-Realm of the requests it gets).
    pub realm: String,
    /// Where to connect.
    pub addr: std::net::SocketAddr,
    /// Connect with TLS from the first byte (its TLS port), presenting `[pcf.diameter.tls]`'s
    /// certificate; its certificate must name `host`. Default false.
    #[serde(default)]
    pub tls: bool,
}

impl Default for SyConfig {
    fn default() -> Self {
        SyConfig {
            enabled: false,
            n7: false,
            ocs: Vec::new(),
            request_timeout_ms: default_udr_timeout_ms(),
            watchdog_secs: default_diameter_watchdog_secs(),
        }
    }
}

/// `[pcf.diameter]`: the PCF serving Gx (TS 29.212) as a converged PCRF, on the same policy
/// engine, subscriber data and state as N7. What an unknown subscriber gets is
/// `[pcf.udr] on_unknown_subscriber`, answered the Diameter way (docs/pcf.md).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiameterConfig {
    /// Serve Diameter at all. Default false: a 5G-only PCF opens no Diameter port.
    #[serde(default)]
    pub enabled: bool,
    /// Where to listen. Default 127.0.0.1:3868.
    #[serde(default = "default_diameter_listen")]
    pub listen: std::net::SocketAddr,
    /// Origin-Host. Default `pcf.localdomain`.
    #[serde(default = "default_diameter_origin_host")]
    pub origin_host: String,
    /// Origin-Realm. Default `localdomain`.
    #[serde(default = "default_diameter_origin_realm")]
    pub origin_realm: String,
    /// Take CERs from peers not listed in `accept` (PCEFs). Default true.
    #[serde(default = "default_true")]
    pub accept_unknown_peers: bool,
    /// Origin-Hosts of the peers allowed to connect when `accept_unknown_peers` is false.
    #[serde(default)]
    pub accept: Vec<String>,
    /// How long a PCRF-initiated request (RAR) waits for its answer, ms. Default 2000.
    #[serde(default = "default_diameter_request_timeout_ms")]
    pub request_timeout_ms: u64,
    /// DWR interval (RFC 3539 Tw), seconds. Default 30.
    #[serde(default = "default_diameter_watchdog_secs")]
    pub watchdog_secs: u64,
    /// The node's size and connection limits (`[pcf.diameter.limits]`, as the BSF's Rx).
    #[serde(default)]
    pub limits: nf::DiameterLimits,
    /// How many times an unanswered RAR (Gx, Rx) or ASR (Rx) is sent again. Default 2.
    #[serde(default = "default_diameter_retries")]
    pub retries: u32,
    /// The wait before the first resend, ms, doubled before each next. Default 200.
    #[serde(default = "default_diameter_retry_backoff_ms")]
    pub retry_backoff_ms: u64,
    /// Mutual TLS (`[pcf.diameter.tls]`, docs/security.md): a TLS listener beside or instead of
    /// `listen`, and the certificate the PCF presents to the OCSs and TDFs it connects to with
    /// `tls = true` (Gx, Rx, Sy and Sd share the PCF's one Diameter identity). Absent: no TLS.
    #[serde(default)]
    pub tls: Option<diameter::TlsConfig>,
}

fn default_diameter_retries() -> u32 {
    2
}

fn default_diameter_retry_backoff_ms() -> u64 {
    200
}

fn default_diameter_listen() -> std::net::SocketAddr {
    std::net::SocketAddr::from(([127, 0, 0, 1], 3868))
}

fn default_diameter_origin_host() -> String {
    "pcf.localdomain".into()
}

fn default_diameter_origin_realm() -> String {
    "localdomain".into()
}

fn default_diameter_request_timeout_ms() -> u64 {
    2000
}

fn default_diameter_watchdog_secs() -> u64 {
    30
}

impl Default for DiameterConfig {
    fn default() -> Self {
        DiameterConfig {
            enabled: false,
            listen: default_diameter_listen(),
            origin_host: default_diameter_origin_host(),
            origin_realm: default_diameter_origin_realm(),
            accept_unknown_peers: true,
            accept: Vec::new(),
            request_timeout_ms: default_diameter_request_timeout_ms(),
            watchdog_secs: default_diameter_watchdog_secs(),
            limits: nf::DiameterLimits::default(),
            retries: default_diameter_retries(),
            retry_backoff_ms: default_diameter_retry_backoff_ms(),
            tls: None,
        }
    }
}

/// `[pcf.audit]`: asking the SMF or AMF about associations it has not updated for long, and
/// removing those it no longer knows (crate::audit).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditConfig {
    /// Default true.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// An association with no update for this long is checked, ms. Default 3,600,000 (1 h).
    #[serde(default = "default_stale_after_ms")]
    pub stale_after_ms: u64,
    /// How often to look for stale associations, ms. Default 60,000.
    #[serde(default = "default_audit_interval_ms")]
    pub interval_ms: u64,
    /// At most this many checks a second. Default 50.
    #[serde(default = "default_audit_max_per_s")]
    pub max_per_s: u32,
}

fn default_stale_after_ms() -> u64 {
    3_600_000
}

fn default_audit_interval_ms() -> u64 {
    60_000
}

fn default_audit_max_per_s() -> u32 {
    50
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            enabled: true,
            stale_after_ms: default_stale_after_ms(),
            interval_ms: default_audit_interval_ms(),
            max_per_s: default_audit_max_per_s(),
        }
    }
}

/// `[pcf.amf]`: where UE policy (URSP) goes to reach the UE.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AmfConfig {
    /// The AMF's apiRoot for every UE. Unset: the AMF the NRF finds for the request's `guami`,
    /// else the authority of the request's `notificationUri`.
    #[serde(default)]
    pub api_root: Option<String>,
    /// How long one Namf_Communication request may take, ms. Default 1000.
    #[serde(default = "default_udr_timeout_ms")]
    pub timeout_ms: u64,
    /// Subscribe (N1N2MessageSubscribe, class UPDP) before the first delivery to a UE, so the
    /// AMF sends the UE's answer to this PCF. Default true; false when the AMF relays it in
    /// an Npcf_UEPolicyControl_Update (`uePolDelResult`) or is configured with the callback.
    #[serde(default = "default_true")]
    pub n1_subscribe: bool,
}

impl Default for AmfConfig {
    fn default() -> Self {
        AmfConfig { api_root: None, timeout_ms: default_udr_timeout_ms(), n1_subscribe: true }
    }
}

/// `[pcf.chf]`: subscribing to the subscriber's spending limit statuses at the CHF
/// (Nchf_SpendingLimitControl, TS 29.594) for the policy counters the project reads.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChfConfig {
    /// Subscribe with a subscriber's first SM association when the project lists `[spending]
    /// counters`, unsubscribe with its last. Default false (the reference's "SM-Nchf" toggle).
    #[serde(default)]
    pub enabled: bool,
    /// The CHF's apiRoot. Unset: discovered through `[pcf.nrf]`.
    #[serde(default)]
    pub api_root: Option<String>,
    /// How long a subscribe or unsubscribe may take, ms. Default 1000.
    #[serde(default = "default_udr_timeout_ms")]
    pub timeout_ms: u64,
}

impl Default for ChfConfig {
    fn default() -> Self {
        ChfConfig { enabled: false, api_root: None, timeout_ms: default_udr_timeout_ms() }
    }
}

/// `[pcf.bsf]`: registering this PCF's bindings at the BSF.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BsfConfig {
    /// Register a binding for each SM policy association with a UE address, deregister it at
    /// delete. Default false (the reference's "BSF (N7-Nbsf)" toggle); `fivecore up` turns it on.
    #[serde(default)]
    pub enabled: bool,
    /// The BSF's apiRoot. Unset: discovered through `[pcf.nrf]`.
    #[serde(default)]
    pub api_root: Option<String>,
    /// How long a register or deregister may take, ms. Default 1000.
    #[serde(default = "default_udr_timeout_ms")]
    pub timeout_ms: u64,
    /// The S-NSSAI a Gx session's binding names: a CCR carries none (TS 29.212 has no S-NSSAI
    /// AVP) and a PcfBinding requires one (TS 29.521). Default `{ sst = 1 }`.
    #[serde(default)]
    pub gx_snssai: GxSnssai,
}

/// `[pcf.bsf] gx_snssai`: an S-NSSAI (TS 29.571 Snssai).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct GxSnssai {
    pub sst: u8,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sd: Option<String>,
}

impl Default for GxSnssai {
    fn default() -> Self {
        GxSnssai { sst: 1, sd: None }
    }
}

impl Default for BsfConfig {
    fn default() -> Self {
        BsfConfig {
            enabled: false,
            api_root: None,
            timeout_ms: default_udr_timeout_ms(),
            gx_snssai: GxSnssai::default(),
        }
    }
}

/// `[pcf.udr]`: where the subscriber's policy data comes from, and what to do without it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UdrConfig {
    /// Read the subscriber's policy data at all. Default true (it is read when a UDR is
    /// configured here or an NRF can find one).
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// The UDR's apiRoot (`http://udr:7001`). Unset: discovered through `[pcf.nrf]`.
    #[serde(default)]
    pub api_root: Option<String>,
    /// How long a read may take before the next UDR is tried or the read fails, ms. Default 1000.
    #[serde(default = "default_udr_timeout_ms")]
    pub timeout_ms: u64,
    /// When no UDR answers: `fallback` (the project's fallback decision, counted; default) or
    /// `reject` (503 TARGET_NF_NOT_REACHABLE, so the SMF can try another PCF).
    #[serde(default)]
    pub on_unreachable: OnUnreachable,
    /// When the UDR does not know the subscriber: `decide` without policy data (default) or
    /// `reject` with 400 USER_UNKNOWN.
    #[serde(default)]
    pub on_unknown_subscriber: OnUnknown,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnUnreachable {
    #[default]
    Fallback,
    Reject,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnUnknown {
    #[default]
    Decide,
    Reject,
}

fn default_instance_lease_ms() -> u64 {
    10_000
}

fn default_collision_lease_ms() -> u64 {
    3000
}

fn default_udr_timeout_ms() -> u64 {
    1000
}

impl Default for UdrConfig {
    fn default() -> Self {
        UdrConfig {
            enabled: true,
            api_root: None,
            timeout_ms: default_udr_timeout_ms(),
            on_unreachable: OnUnreachable::default(),
            on_unknown_subscriber: OnUnknown::default(),
        }
    }
}

fn default_true() -> bool {
    true
}

impl Default for PcfConfig {
    fn default() -> Self {
        PcfConfig {
            api_root: None,
            policy: None,
            policy_watch_ms: 0,
            policy_admin: true,
            nrf: None,
            collision_lease_ms: default_collision_lease_ms(),
            instance_lease_ms: default_instance_lease_ms(),
            shared_database: false,
            udr: UdrConfig::default(),
            bsf: BsfConfig::default(),
            audit: AuditConfig::default(),
            amf: AmfConfig::default(),
            chf: ChfConfig::default(),
            diameter: DiameterConfig::default(),
            per: Default::default(),
            sal: Default::default(),
            sy: SyConfig::default(),
            ldap: crate::ldap::LdapConfig::default(),
            usage: UsageConfig::default(),
            sd: SdConfig::default(),
            copy: dd_client::CopyConfig::default(),
        }
    }
}

impl PcfConfig {
    pub fn validate(&self) -> Result<(), String> {
        if let Some(root) = &self.api_root {
            if !(root.starts_with("http://") || root.starts_with("https://")) {
                return Err(format!("[pcf] api_root {root:?} must start with http:// or https://"));
            }
        }
        if let Some(root) = &self.udr.api_root {
            if !(root.starts_with("http://") || root.starts_with("https://")) {
                return Err(format!(
                    "[pcf.udr] api_root {root:?} must start with http:// or https://"
                ));
            }
        }
        if let Some(root) = &self.bsf.api_root {
            if !(root.starts_with("http://") || root.starts_with("https://")) {
                return Err(format!(
                    "[pcf.bsf] api_root {root:?} must start with http:// or https://"
                ));
            }
        }
        if let Some(sd) = &self.bsf.gx_snssai.sd {
            if sd.len() != 6 || !sd.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(format!("[pcf.bsf] gx_snssai.sd {sd:?} must be 6 hex digits"));
            }
        }
        self.per.validate()?;
        // Renewed every third: below this a renewal's own round trips are a fair part of it.
        if self.instance_lease_ms < 300 {
            return Err("[pcf] instance_lease_ms must be at least 300".into());
        }
        // Their totals and statuses are kept in each instance's memory, not followed through
        // the change feed: a second instance would overwrite the first's (crate::coherence).
        if self.shared_database {
            let per_instance = [
                (self.usage.enabled, "[pcf.usage]"),
                (self.chf.enabled, "[pcf.chf]"),
                (self.sy.enabled, "[pcf.sy]"),
            ];
            if let Some((_, section)) = per_instance.iter().find(|(on, _)| *on) {
                return Err(format!(
                    "[pcf] shared_database cannot be combined with {section} enabled yet: its \
                     state is kept per instance (docs/pcf.md, \"Several instances\")"
                ));
            }
        }
        if self.audit.interval_ms == 0 || self.audit.max_per_s == 0 {
            return Err("[pcf.audit] interval_ms and max_per_s must be > 0".into());
        }
        if let Some(root) = &self.amf.api_root {
            let parses = root.parse::<http::Uri>().is_ok_and(|u| u.authority().is_some());
            if !(root.starts_with("http://") || root.starts_with("https://")) || !parses {
                return Err(format!(
                    "[pcf.amf] api_root {root:?} must be an http:// or https:// apiRoot"
                ));
            }
        }
        if let Some(root) = &self.chf.api_root {
            if !(root.starts_with("http://") || root.starts_with("https://")) {
                return Err(format!(
                    "[pcf.chf] api_root {root:?} must start with http:// or https://"
                ));
            }
        }
        if self.diameter.enabled {
            let d = &self.diameter;
            if d.origin_host.is_empty() || d.origin_realm.is_empty() {
                return Err("[pcf.diameter] origin_host and origin_realm must be set".into());
            }
            if d.request_timeout_ms == 0 || d.watchdog_secs == 0 {
                return Err(
                    "[pcf.diameter] request_timeout_ms and watchdog_secs must be > 0".into()
                );
            }
            d.limits.validate("pcf.diameter.limits")?;
        }
        let tls_peer = self.sy.enabled && self.sy.ocs.iter().any(|o| o.tls)
            || self.sd.enabled && self.sd.tdf.iter().any(|t| t.tls);
        if tls_peer && self.diameter.tls.is_none() {
            return Err("[[pcf.sy.ocs]] or [[pcf.sd.tdf]] with tls = true needs [pcf.diameter.tls] (the PCF's certificate)".into());
        }
        if self.sy.enabled {
            let (d, sy) = (&self.diameter, &self.sy);
            if sy.ocs.is_empty() {
                return Err("[pcf.sy] enabled needs at least one [[pcf.sy.ocs]]".into());
            }
            if sy.ocs.iter().any(|o| o.host.is_empty() || o.realm.is_empty()) {
                return Err("[[pcf.sy.ocs]] host and realm must be set".into());
            }
            if sy.request_timeout_ms == 0 || sy.watchdog_secs == 0 {
                return Err("[pcf.sy] request_timeout_ms and watchdog_secs must be > 0".into());
            }
            if d.origin_host.is_empty() || d.origin_realm.is_empty() {
                return Err("[pcf.sy] takes the PCF's Diameter identity from [pcf.diameter] origin_host and origin_realm, which must be set".into());
            }
        }
        self.ldap.validate()?;
        if self.sd.enabled {
            let sd = &self.sd;
            if !self.diameter.enabled {
                return Err(
                    "[pcf.sd] needs [pcf.diameter] enabled: Sd serves its Gx sessions".into()
                );
            }
            if sd.tdf.is_empty() {
                return Err("[pcf.sd] enabled needs at least one [[pcf.sd.tdf]]".into());
            }
            if sd.tdf.iter().any(|t| t.host.is_empty() || t.realm.is_empty()) {
                return Err("[[pcf.sd.tdf]] host and realm must be set".into());
            }
            if sd.request_timeout_ms == 0 || sd.watchdog_secs == 0 {
                return Err("[pcf.sd] request_timeout_ms and watchdog_secs must be > 0".into());
            }
        }
        if self.udr.timeout_ms == 0
            || self.bsf.timeout_ms == 0
            || self.amf.timeout_ms == 0
            || self.chf.timeout_ms == 0
        {
            return Err(
                "[pcf.udr], [pcf.bsf], [pcf.amf] and [pcf.chf] timeout_ms must be > 0".into()
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_section_is_the_default_and_typos_are_refused() {
        let c: PcfConfig = toml::from_str("").unwrap();
        assert_eq!(c, PcfConfig::default());
        assert!(toml::from_str::<PcfConfig>("polcy = \"x\"").is_err());
        let c: PcfConfig = toml::from_str("policy = \"/p\"\npolicy_watch_ms = 500").unwrap();
        assert_eq!((c.policy, c.policy_watch_ms), (Some(PathBuf::from("/p")), 500));
        assert!(PcfConfig { api_root: Some("ftp://x".into()), ..Default::default() }
            .validate()
            .is_err());
    }

    #[test]
    fn sy_needs_an_ocs() {
        let c: PcfConfig = toml::from_str(
            "[sy]\nenabled = true\nn7 = true\n[[sy.ocs]]\nhost = \"ocs.example\"\n\
             realm = \"example\"\naddr = \"127.0.0.1:3870\"",
        )
        .unwrap();
        assert!(c.validate().is_ok());
        assert_eq!((c.sy.n7, c.sy.request_timeout_ms, c.sy.ocs.len()), (true, 1000, 1));
        let none = PcfConfig { sy: SyConfig { enabled: true, ..SyConfig::default() }, ..c };
        assert!(none.validate().is_err());
        assert!(toml::from_str::<PcfConfig>("[sy]\nenabeld = true").is_err());
    }

    #[test]
    fn a_shared_database_refuses_what_is_kept_per_instance_and_a_short_lease() {
        let c: PcfConfig = toml::from_str("shared_database = true").unwrap();
        assert!(c.validate().is_ok());
        let usage = PcfConfig { usage: UsageConfig { enabled: true }, ..c.clone() };
        assert!(usage.validate().unwrap_err().contains("[pcf.usage]"));
        let chf = PcfConfig { chf: ChfConfig { enabled: true, ..c.chf.clone() }, ..c.clone() };
        assert!(chf.validate().unwrap_err().contains("[pcf.chf]"));
        let alone = PcfConfig { shared_database: false, ..chf };
        assert!(alone.validate().is_ok());
        let short: PcfConfig = toml::from_str("instance_lease_ms = 100").unwrap();
        assert!(short.validate().unwrap_err().contains("instance_lease_ms"));
    }

    #[test]
    fn sd_needs_gx_and_a_tdf() {
        let c: PcfConfig = toml::from_str(
            "[diameter]\nenabled = true\n[sd]\nenabled = true\n[[sd.tdf]]\n\
             host = \"tdf.example\"\nrealm = \"example\"\naddr = \"127.0.0.1:3871\"",
        )
        .unwrap();
        assert!(c.validate().is_ok());
        assert_eq!((c.sd.request_timeout_ms, c.sd.tdf.len()), (1000, 1));
        let no_gx = PcfConfig { diameter: DiameterConfig::default(), ..c.clone() };
        assert!(no_gx.validate().is_err());
        let no_tdf = PcfConfig { sd: SdConfig { enabled: true, ..SdConfig::default() }, ..c };
        assert!(no_tdf.validate().is_err());
        assert!(toml::from_str::<PcfConfig>("[sd]\nenabeld = true").is_err());
    }

    #[test]
    fn diameter_tls_section_and_tls_peers() {
        let c: PcfConfig = toml::from_str(
            "[diameter]\nenabled = true\n[diameter.tls]\ncert = \"p/pcf.crt\"\n\
             key = \"p/pcf.key\"\nca = \"p/ca.crt\"\nlisten = \"127.0.0.1:5658\"\n\
             [sy]\nenabled = true\n[[sy.ocs]]\nhost = \"ocs.example\"\nrealm = \"example\"\n\
             addr = \"127.0.0.1:3872\"\ntls = true",
        )
        .unwrap();
        assert!(c.validate().is_ok());
        let tls = c.diameter.tls.clone().unwrap();
        assert_eq!(tls.listen, Some("127.0.0.1:5658".parse().unwrap()));
        assert!(tls.plain_listen && tls.check_peer_identity);
        assert_eq!(tls.reload_secs, 10);
        // A TLS peer without the PCF's certificate cannot be connected to.
        let no_cert =
            PcfConfig { diameter: DiameterConfig { tls: None, ..c.diameter.clone() }, ..c.clone() };
        assert!(no_cert.validate().unwrap_err().contains("[pcf.diameter.tls]"));
        assert!(toml::from_str::<PcfConfig>("[diameter.tls]\ncert = \"a\"\nkey = \"b\"").is_err());
    }
}
