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
}
