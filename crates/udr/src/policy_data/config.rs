//! `[udr.policy]`: the policy data service's subscriptions and the delivery of their
//! notifications. Every field has a default; unknown keys are errors. docs/udr.md explains each.

use serde::Deserialize;

/// `[udr.policy]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// Policy data subscriptions (subs-to-notify) held at once; the next POST is answered 403
    /// `INSUFFICIENT_RESOURCES`. Default 100000.
    #[serde(default = "default_max_subscriptions")]
    pub max_subscriptions: usize,

    /// Longest subscription lifetime granted, seconds: a subscription asking for none, or for a
    /// later `expiry`, gets now + this (and the answer says so). 0 (the default): as asked, and
    /// a subscription without `expiry` lives until deleted.
    #[serde(default)]
    pub max_expiry_secs: u64,

    /// PolicyDataChangeNotification delivery.
    #[serde(default)]
    pub notify: NotifyConfig,
}

/// `[udr.policy.notify]`: notifications wait in the store's outbox until delivered, so these
/// bound the work in progress, never what is kept.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyConfig {
    /// Notification requests in flight at once (one per subscription at a time, so each
    /// subscriber gets its notifications in order). Default 256.
    #[serde(default = "default_max_in_flight")]
    pub max_in_flight: usize,
    /// Most PolicyDataChangeNotifications in one request (the callback takes an array).
    /// Default 32.
    #[serde(default = "default_batch_size")]
    pub batch_size: usize,
    /// Attempts per notification before it is dropped (and logged); 0 retries until the
    /// subscription ends. Default 10.
    #[serde(default = "default_attempts")]
    pub attempts: u32,
    /// Wait before the first retry, milliseconds; doubled at each retry. Default 200.
    #[serde(default = "default_backoff_ms")]
    pub backoff_ms: u64,
    /// Longest wait between retries, milliseconds. Default 30000.
    #[serde(default = "default_max_backoff_ms")]
    pub max_backoff_ms: u64,
    /// Undelivered notifications held in memory; beyond it they stay in the outbox table only
    /// and are read back as the queue drains. Default 65536.
    #[serde(default = "default_max_queued")]
    pub max_queued: usize,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            max_subscriptions: default_max_subscriptions(),
            max_expiry_secs: 0,
            notify: NotifyConfig::default(),
        }
    }
}

impl Default for NotifyConfig {
    fn default() -> Self {
        NotifyConfig {
            max_in_flight: default_max_in_flight(),
            batch_size: default_batch_size(),
            attempts: default_attempts(),
            backoff_ms: default_backoff_ms(),
            max_backoff_ms: default_max_backoff_ms(),
            max_queued: default_max_queued(),
        }
    }
}

impl PolicyConfig {
    /// Rejects settings that cannot work, naming the field.
    pub fn validate(&self) -> Result<(), String> {
        let n = &self.notify;
        if self.max_subscriptions == 0 {
            return Err("udr.policy: max_subscriptions must be at least 1".into());
        }
        if n.max_in_flight == 0 || n.batch_size == 0 || n.max_queued == 0 {
            return Err(
                "udr.policy.notify: max_in_flight, batch_size and max_queued must be at least 1"
                    .into(),
            );
        }
        if n.backoff_ms == 0 || n.max_backoff_ms < n.backoff_ms {
            return Err(
                "udr.policy.notify: backoff_ms must be at least 1 and at most max_backoff_ms"
                    .into(),
            );
        }
        Ok(())
    }
}

fn default_max_subscriptions() -> usize {
    100_000
}
fn default_max_in_flight() -> usize {
    256
}
fn default_batch_size() -> usize {
    32
}
fn default_attempts() -> u32 {
    10
}
fn default_backoff_ms() -> u64 {
    200
}
fn default_max_backoff_ms() -> u64 {
    30_000
}
fn default_max_queued() -> usize {
    65_536
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_unknown_keys_and_limits() {
        let c: PolicyConfig = toml::from_str("").unwrap();
        assert_eq!(c, PolicyConfig::default());
        assert!(c.validate().is_ok());
        let c: PolicyConfig =
            toml::from_str("max_expiry_secs = 3600\n[notify]\nattempts = 0\nbatch_size = 8\n")
                .unwrap();
        assert_eq!(c.max_expiry_secs, 3600);
        assert_eq!(c.notify.attempts, 0);
        assert_eq!(c.notify.batch_size, 8);
        assert!(toml::from_str::<PolicyConfig>("[notify]\nbatch = 8").is_err());
        let bad = PolicyConfig {
            notify: NotifyConfig { max_backoff_ms: 10, ..NotifyConfig::default() },
            ..PolicyConfig::default()
        };
        assert!(bad.validate().is_err());
    }
}
