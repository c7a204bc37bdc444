//! `[nrf_client]`: how an NF reaches its NRF. Every field has a default, so an empty section
//! talks to the NRF of `fivecore up` (`http://127.0.0.1:7000`); unknown keys are errors.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The NRF client's settings (docs/nrf-client.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NrfClientConfig {
    /// apiRoots (`scheme://host:port[/prefix]`) of the NRFs, primary first; each request goes
    /// to the next one when the previous cannot be reached or answers 503/504 (at most
    /// `1 + client.max_alternates` of them per request). Default `["http://127.0.0.1:7000"]`.
    #[serde(default = "default_api_roots")]
    pub api_roots: Vec<String>,

    /// Register with the NRF at start and keep the registration alive with heartbeats.
    /// `false` leaves discovery and subscriptions only (a consumer that is not a producer).
    /// Default true.
    #[serde(default = "default_true")]
    pub register: bool,
    /// heartBeatTimer, seconds, proposed in NFRegister when the profile has none; the NRF's
    /// answer is what counts. Unset: propose none (the NRF picks).
    #[serde(default)]
    pub heartbeat_timer_secs: Option<u32>,
    /// Heartbeats are sent every heartBeatTimer × this percentage, so one arrives before the
    /// NRF's timer runs out even with some delay on the way. 10..=100, default 90.
    #[serde(default = "default_heartbeat_percent")]
    pub heartbeat_percent: u32,
    /// Consecutive failed heartbeats (NRF unreachable or 5xx) after which the client reports
    /// `Suspended`; it keeps trying, and re-registers when the NRF answers 404. Default 2.
    #[serde(default = "default_heartbeat_failures")]
    pub heartbeat_failures_to_suspend: u32,
    /// First wait, milliseconds, before re-sending a failed NFRegister; doubled after each
    /// failure up to `register_retry_max_ms`. Default 500.
    #[serde(default = "default_register_retry_initial_ms")]
    pub register_retry_initial_ms: u64,
    /// Longest wait between NFRegister attempts, milliseconds. Default 30000.
    #[serde(default = "default_register_retry_max_ms")]
    pub register_retry_max_ms: u64,
    /// Send NFDeregister (DELETE) on shutdown. Default true.
    #[serde(default = "default_true")]
    pub deregister_on_shutdown: bool,
    /// Response time, milliseconds, allowed for each NRF request (sent as
    /// `3gpp-Sbi-Max-Rsp-Time`). Default 2000.
    #[serde(default = "default_request_timeout_ms")]
    pub request_timeout_ms: u64,

    /// Discovery answers kept (one per distinct query), least recently used evicted first.
    /// 0 disables the cache. Default 1024.
    #[serde(default = "default_discovery_cache_entries")]
    pub discovery_cache_entries: usize,
    /// Longest time, seconds, a discovery answer is reused, whatever its validityPeriod says.
    /// Default 86400.
    #[serde(default = "default_discovery_max_validity_secs")]
    pub discovery_max_validity_secs: u64,

    /// validityTime, seconds from now, asked for in NFStatusSubscribe (the NRF may grant
    /// less). Default 86400.
    #[serde(default = "default_subscription_validity_secs")]
    pub subscription_validity_secs: u64,
    /// A subscription is renewed (PATCH validityTime) when less than this many seconds of it
    /// remain; one the NRF no longer knows is created again. Default 60.
    #[serde(default = "default_subscription_renew_before_secs")]
    pub subscription_renew_before_secs: u64,
    /// How often subscriptions are checked for renewal, milliseconds. Default 1000.
    #[serde(default = "default_subscription_check_ms")]
    pub subscription_check_ms: u64,

    /// Ask the NRF for OAuth2 access tokens (Nnrf_AccessToken) and send them with requests to
    /// other NFs' services (the SBI client's token source). Default false.
    #[serde(default)]
    pub access_tokens: bool,
    /// A token is asked for again this many seconds before it expires (or half-way through a
    /// shorter lifetime). Default 60.
    #[serde(default = "default_access_token_renew_before_secs")]
    pub access_token_renew_before_secs: u64,
}

fn default_api_roots() -> Vec<String> {
    vec!["http://127.0.0.1:7000".to_owned()]
}
fn default_true() -> bool {
    true
}
fn default_heartbeat_percent() -> u32 {
    90
}
fn default_heartbeat_failures() -> u32 {
    2
}
fn default_register_retry_initial_ms() -> u64 {
    500
}
fn default_register_retry_max_ms() -> u64 {
    30_000
}
fn default_request_timeout_ms() -> u64 {
    2_000
}
fn default_discovery_cache_entries() -> usize {
    1024
}
fn default_discovery_max_validity_secs() -> u64 {
    86_400
}
fn default_subscription_validity_secs() -> u64 {
    86_400
}
fn default_subscription_renew_before_secs() -> u64 {
    60
}
fn default_access_token_renew_before_secs() -> u64 {
    60
}
fn default_subscription_check_ms() -> u64 {
    1_000
}

impl Default for NrfClientConfig {
    fn default() -> Self {
        NrfClientConfig {
            api_roots: default_api_roots(),
            register: true,
            heartbeat_timer_secs: None,
            heartbeat_percent: default_heartbeat_percent(),
            heartbeat_failures_to_suspend: default_heartbeat_failures(),
            register_retry_initial_ms: default_register_retry_initial_ms(),
            register_retry_max_ms: default_register_retry_max_ms(),
            deregister_on_shutdown: true,
            request_timeout_ms: default_request_timeout_ms(),
            discovery_cache_entries: default_discovery_cache_entries(),
            discovery_max_validity_secs: default_discovery_max_validity_secs(),
            subscription_validity_secs: default_subscription_validity_secs(),
            subscription_renew_before_secs: default_subscription_renew_before_secs(),
            subscription_check_ms: default_subscription_check_ms(),
            access_tokens: false,
            access_token_renew_before_secs: default_access_token_renew_before_secs(),
        }
    }
}

impl NrfClientConfig {
    /// Rejects settings that cannot work, naming the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.api_roots.is_empty() {
            return Err("nrf_client: api_roots must list at least one NRF".into());
        }
        for r in &self.api_roots {
            let ok = r.parse::<http::Uri>().is_ok_and(|u| {
                matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some()
            });
            if !ok {
                return Err(format!("nrf_client: api_roots: `{r}` is not an http(s) apiRoot"));
            }
        }
        if !(10..=100).contains(&self.heartbeat_percent) {
            return Err("nrf_client: heartbeat_percent must be 10..=100".into());
        }
        if self.heartbeat_timer_secs == Some(0) {
            return Err("nrf_client: heartbeat_timer_secs must be at least 1".into());
        }
        if self.register_retry_initial_ms == 0
            || self.register_retry_initial_ms > self.register_retry_max_ms
        {
            return Err(
                "nrf_client: register_retry_initial_ms must be 1..=register_retry_max_ms".into()
            );
        }
        if self.request_timeout_ms == 0 || self.subscription_check_ms == 0 {
            return Err(
                "nrf_client: request_timeout_ms and subscription_check_ms must be at least 1"
                    .into(),
            );
        }
        Ok(())
    }

    pub(crate) fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.request_timeout_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_unknown_fields() {
        let c: NrfClientConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(c, NrfClientConfig::default());
        c.validate().unwrap();
        assert!(serde_json::from_str::<NrfClientConfig>(r#"{"api_root":"x"}"#).is_err());
        let bad = NrfClientConfig { api_roots: vec!["nrf:7000".into()], ..Default::default() };
        assert!(bad.validate().is_err());
        let bad = NrfClientConfig { api_roots: vec![], ..Default::default() };
        assert!(bad.validate().is_err());
    }
}
