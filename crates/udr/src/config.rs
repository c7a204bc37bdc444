//! `[udr]` in the configuration file. Every field has a default, so an empty (or absent) section
//! is a working UDR; unknown keys are errors so a typo never falls back to a default silently.
//! docs/udr.md explains each setting. Each service keeps its own sub-section here
//! (`[udr.slf]`, ...), next to the others.

use nrf_client::NrfClientConfig;
use serde::Deserialize;

/// The UDR's own settings.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct UdrConfig {
    /// `apiRoot` (`http://host:port`) used in `Location` headers. Unset: taken from the
    /// request's authority (`Host`).
    #[serde(default)]
    pub api_root: Option<String>,

    /// Registration with the NRF (`[udr.nrf]`, the nrf-client settings, docs/nrf-client.md).
    /// Absent: the UDR does not register.
    #[serde(default)]
    pub nrf: Option<NrfClientConfig>,

    /// The subscriber-to-NF-group map (Nudr_GroupIDmap, the SLF role).
    #[serde(default)]
    pub slf: SlfConfig,

    /// The Diameter Sh server (`[udr.sh]`). Disabled by default.
    #[serde(default)]
    pub sh: crate::sh::ShConfig,
    /// The 5G-EIR role (`[udr.eir]`, N5g-eir_EquipmentIdentityCheck).
    #[serde(default)]
    pub eir: crate::eir::EirConfig,
    /// Policy data (N36): subscriptions and notification delivery (`[udr.policy]`).
    #[serde(default)]
    pub policy: crate::policy_data::PolicyConfig,
    /// Sizes of what one provisioning request (REST, SOAP, import row) may carry
    /// (`[udr.provisioning]`).
    #[serde(default)]
    pub provisioning: ProvisioningLimits,
    /// What the `udrInfo` of the NRF profile says beyond the data sets (`[udr.udr_info]`).
    #[serde(default)]
    pub udr_info: UdrInfoConfig,
    /// Message copies to the Data Director (`[udr.copy]`, docs/dd.md "Message copy"). Off by
    /// default.
    #[serde(default)]
    pub copy: dd_client::CopyConfig,
}

/// `[udr.udr_info]`: the subscribers this UDR holds, for NRFs to select it by (TS 29.510
/// UdrInfo). Empty: any subscriber.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct UdrInfoConfig {
    /// `groupId`: the UDR group, for discoveries with `group-id-list` (and SLF answers).
    #[serde(default)]
    pub group_id: Option<String>,
    /// `supiRanges`: the SUPIs held (IMSI digits, no `imsi-` prefix).
    #[serde(default)]
    pub supi_ranges: Vec<SupiRangeConfig>,
}

/// One SupiRange: `start` and `end` (digits, both included), or a regular expression `pattern`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SupiRangeConfig {
    #[serde(default)]
    pub start: Option<String>,
    #[serde(default)]
    pub end: Option<String>,
    #[serde(default)]
    pub pattern: Option<String>,
}

impl UdrInfoConfig {
    fn validate(&self) -> Result<(), String> {
        if self.group_id.as_deref().is_some_and(str::is_empty) {
            return Err("udr.udr_info.group_id must not be empty".into());
        }
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        for (i, r) in self.supi_ranges.iter().enumerate() {
            let ok = match (&r.start, &r.end, &r.pattern) {
                (Some(a), Some(b), None) => {
                    digits(a) && digits(b) && a.len() == b.len() && a.as_str() <= b.as_str()
                }
                (None, None, Some(p)) => !p.is_empty(),
                _ => false,
            };
            if !ok {
                return Err(format!(
                    "udr.udr_info.supi_ranges[{i}]: give start and end (digits of the same \
                     length, start <= end) or a pattern"
                ));
            }
        }
        Ok(())
    }

    /// The NRF profile's `udrInfo`: the data sets served and what is configured here.
    pub fn udr_info(&self, data_sets: &[&str]) -> serde_json::Value {
        let mut info = serde_json::json!({ "supportedDataSets": data_sets });
        if let Some(g) = &self.group_id {
            info["groupId"] = g.as_str().into();
        }
        if !self.supi_ranges.is_empty() {
            let ranges: Vec<serde_json::Value> = self
                .supi_ranges
                .iter()
                .map(|r| {
                    let mut v = serde_json::Map::new();
                    for (k, x) in [("start", &r.start), ("end", &r.end), ("pattern", &r.pattern)] {
                        if let Some(x) = x {
                            v.insert(k.into(), x.as_str().into());
                        }
                    }
                    serde_json::Value::Object(v)
                })
                .collect();
            info["supiRanges"] = ranges.into();
        }
        info
    }
}

/// `[udr.provisioning]`: list sizes of one provisioning request. A list is read up to its limit
/// and refused beyond it (a 400 or a SOAP fault naming the field), before any per-item work, so
/// an oversized request costs no more than one at the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProvisioningLimits {
    /// Identities of one SLF entry (`subscriberIds`). Default 32.
    #[serde(default = "default_slf_ids_per_entry")]
    pub max_slf_ids_per_entry: usize,
    /// `subscriberId`s named by one SOAP GetSlfEntry or DeleteSlfEntry. Default 1000.
    #[serde(default = "default_ids_per_request")]
    pub max_ids_per_request: usize,
    /// SUPIs, and GPSIs, bound to one EIR entry (each list). Default 100.
    #[serde(default = "default_eir_bound_ids")]
    pub max_eir_bound_ids: usize,
    /// Identities of one Sh profile (public identities and MSISDNs together). Default 100.
    #[serde(default = "default_sh_identities")]
    pub max_sh_identities: usize,
    /// Bytes of one Sh profile (its identities, names and ServiceData). Default 262144.
    #[serde(default = "default_sh_profile_bytes")]
    pub max_sh_profile_bytes: usize,
}

impl Default for ProvisioningLimits {
    fn default() -> Self {
        ProvisioningLimits {
            max_slf_ids_per_entry: default_slf_ids_per_entry(),
            max_ids_per_request: default_ids_per_request(),
            max_eir_bound_ids: default_eir_bound_ids(),
            max_sh_identities: default_sh_identities(),
            max_sh_profile_bytes: default_sh_profile_bytes(),
        }
    }
}

fn default_slf_ids_per_entry() -> usize {
    32
}
fn default_ids_per_request() -> usize {
    1000
}
fn default_eir_bound_ids() -> usize {
    100
}
fn default_sh_identities() -> usize {
    100
}
fn default_sh_profile_bytes() -> usize {
    256 * 1024
}

impl ProvisioningLimits {
    fn validate(&self) -> Result<(), String> {
        let limits = [
            ("max_slf_ids_per_entry", self.max_slf_ids_per_entry, 1_000),
            ("max_ids_per_request", self.max_ids_per_request, 100_000),
            ("max_eir_bound_ids", self.max_eir_bound_ids, 10_000),
            ("max_sh_identities", self.max_sh_identities, 10_000),
            ("max_sh_profile_bytes", self.max_sh_profile_bytes, 16 << 20),
        ];
        for (name, v, most) in limits {
            if !(1..=most).contains(&v) {
                return Err(format!("udr.provisioning.{name} must be 1 to {most}"));
            }
        }
        Ok(())
    }
}

/// `[udr.slf]`: the SLF role.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlfConfig {
    /// Register the nudr-group-id-map service with the NRF, so NRFs find this UDR as an SLF.
    /// Default true.
    #[serde(default = "default_true")]
    pub register_service: bool,
    /// How often the lookup index takes in writes it was not told about (SOAP, another
    /// process importing into the store), in milliseconds: their staleness bound (docs/udr.md).
    #[serde(default = "default_sync_interval_ms")]
    pub sync_interval_ms: u64,
}

impl Default for SlfConfig {
    fn default() -> Self {
        SlfConfig { register_service: true, sync_interval_ms: default_sync_interval_ms() }
    }
}

fn default_sync_interval_ms() -> u64 {
    100
}

fn default_true() -> bool {
    true
}

impl UdrConfig {
    /// Checks what serde cannot: values that parse but make no sense.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(nrf) = &self.nrf {
            if nrf.api_roots.is_empty() {
                return Err("udr.nrf: api_roots must name at least one NRF".into());
            }
        }
        if !(1..=60_000).contains(&self.slf.sync_interval_ms) {
            return Err("udr.slf.sync_interval_ms must be 1 to 60000".into());
        }
        self.sh.validate()?;
        self.eir.validate(self.nrf.is_some())?;
        self.policy.validate()?;
        self.provisioning.validate()?;
        self.udr_info.validate()?;
        Ok(())
    }
}
