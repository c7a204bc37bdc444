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
        Ok(())
    }
}
