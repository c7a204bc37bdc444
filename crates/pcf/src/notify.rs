//! PCF-initiated messages to the SMF (TS 29.512 §4.2.3, Npcf_SMPolicyControl_UpdateNotify) and
//! the AMF (TS 29.507 §4.2.4, Npcf_AMPolicyControl_UpdateNotify): the changed decision of an
//! association POSTed to `{notificationUri}/update`, or its termination to `/terminate`. Sent
//! once; a failure is logged and counted (the peer gets the decision in force at its next
//! update).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sbi::client::SbiClient;
use serde_json::Value;

#[derive(Debug, Default)]
pub struct Stats {
    /// To SMFs.
    pub sent: AtomicU64,
    pub failed: AtomicU64,
    /// To AMFs.
    pub am_sent: AtomicU64,
    pub am_failed: AtomicU64,
}

/// What a peer said of an association it was told about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// 2xx: it still has the session.
    Known,
    /// 404: it has no such session.
    Gone,
    /// Anything else, or no answer.
    NoAnswer(String),
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

    /// POSTs `body` to `uri` and says what the peer answered: whether it still knows the
    /// association (the session audit's check).
    pub async fn probe(&self, uri: &str, body: &Value) -> Probe {
        match self.client.post(uri).json(body).max_rsp_time(self.timeout).send().await {
            Ok(r) if r.status().is_success() => Probe::Known,
            Ok(r) if r.status() == http::StatusCode::NOT_FOUND => Probe::Gone,
            Ok(r) => Probe::NoAnswer(format!("the peer answered {}", r.status())),
            Err(e) => Probe::NoAnswer(e.to_string()),
        }
    }

    /// POSTs a notification to another consumer (an AF's events or termination, TS 29.514
    /// §4.2.4, §4.2.5); 2xx is success, anything else the reason it failed.
    pub async fn post(&self, uri: &str, body: &Value) -> Result<(), String> {
        match self.client.post(uri).json(body).max_rsp_time(self.timeout).send().await {
            Ok(r) if r.status().is_success() => Ok(()),
            Ok(r) => Err(format!("answered {}", r.status())),
            Err(e) => Err(e.to_string()),
        }
    }

    pub fn client(&self) -> &SbiClient {
        &self.client
    }

    /// POSTs an SmPolicyNotification (or a TerminationNotification) to an SMF's `uri`; 200 and
    /// 204 are success.
    pub async fn update_notify(&self, uri: &str, body: &Value) {
        self.deliver(uri, body, "SMF", &self.stats.sent, &self.stats.failed).await
    }

    /// POSTs a PolicyUpdate (or a TerminationNotification) to an AMF's `uri`.
    pub async fn am_update_notify(&self, uri: &str, body: &Value) {
        self.deliver(uri, body, "AMF", &self.stats.am_sent, &self.stats.am_failed).await
    }

    async fn deliver(
        &self,
        uri: &str,
        body: &Value,
        peer: &str,
        sent: &AtomicU64,
        failed: &AtomicU64,
    ) {
        let answer = self.client.post(uri).json(body).max_rsp_time(self.timeout).send().await;
        match answer {
            Ok(r) if r.status().is_success() => {
                sent.fetch_add(1, Ordering::Relaxed);
            }
            other => {
                let why = match other {
                    Ok(r) => format!("the {peer} answered {}", r.status()),
                    Err(e) => e.to_string(),
                };
                tracing::warn!(%uri, %why, "policy UpdateNotify or terminate not delivered");
                failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}
