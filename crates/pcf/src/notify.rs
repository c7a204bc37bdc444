//! PCF-initiated messages to the SMF (TS 29.512 §4.2.3, Npcf_SMPolicyControl_UpdateNotify):
//! the changed decision of an association POSTed to `{notificationUri}/update`. Sent once;
//! a failure is logged and counted (the SMF gets the decision in force at its next update).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sbi::client::SbiClient;
use serde_json::Value;

#[derive(Debug, Default)]
pub struct Stats {
    pub sent: AtomicU64,
    pub failed: AtomicU64,
}

pub struct Notifier {
    client: SbiClient,
    timeout: Duration,
    pub stats: Stats,
}

impl Notifier {
    pub fn new(client: SbiClient, timeout: Duration) -> Self {
        Notifier { client, timeout, stats: Stats::default() }
    }

    pub fn client(&self) -> &SbiClient {
        &self.client
    }

    /// POSTs an SmPolicyNotification to `uri`; 200 and 204 are success.
    pub async fn update_notify(&self, uri: &str, body: &Value) {
        let sent = self.client.post(uri).json(body).max_rsp_time(self.timeout).send().await;
        match sent {
            Ok(r) if r.status().is_success() => {
                self.stats.sent.fetch_add(1, Ordering::Relaxed);
            }
            other => {
                let why = match other {
                    Ok(r) => format!("the SMF answered {}", r.status()),
                    Err(e) => e.to_string(),
                };
                tracing::warn!(%uri, %why, "SM policy UpdateNotify not delivered");
                self.stats.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}
