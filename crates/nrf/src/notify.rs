//! NFStatusNotify (TS 29.510 §5.2.2.6): POSTs of NotificationData to each subscriber's
//! nfStatusNotificationUri. Delivery never blocks the request that caused it: each notification
//! is a spawned task, at most `max_in_flight` at once (beyond that it is dropped and logged, not
//! queued), tried `attempts` times with doubling backoff on a transport failure or a 5xx/429.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use sbi::client::SbiClient;
use tokio::sync::Semaphore;

use crate::config::NotifyConfig;

#[derive(Clone)]
pub struct Notifier {
    client: SbiClient,
    config: NotifyConfig,
    permits: Arc<Semaphore>,
    stats: Arc<NotifyStats>,
}

/// Counters of notification outcomes (read by tests and logs).
#[derive(Default, Debug)]
pub struct NotifyStats {
    pub delivered: AtomicU64,
    pub failed: AtomicU64,
    pub dropped: AtomicU64,
}

impl Notifier {
    pub fn new(client: SbiClient, config: NotifyConfig) -> Notifier {
        let permits = Arc::new(Semaphore::new(config.max_in_flight));
        Notifier { client, config, permits, stats: Arc::default() }
    }

    pub fn stats(&self) -> &NotifyStats {
        &self.stats
    }

    /// Sends `body` (NotificationData JSON) to `uri` in the background.
    pub fn send(&self, uri: &str, body: Bytes) {
        let Ok(permit) = self.permits.clone().try_acquire_owned() else {
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(uri, "too many notifications in flight; this one is dropped");
            return;
        };
        let client = self.client.clone();
        let config = self.config.clone();
        let stats = self.stats.clone();
        let uri = uri.to_owned();
        tokio::spawn(async move {
            let _permit = permit;
            let mut backoff = Duration::from_millis(config.backoff_ms);
            for attempt in 1..=config.attempts {
                let result = client
                    .post(&uri)
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .body(body.clone())
                    .send()
                    .await;
                let retry = match result {
                    Ok(r) if r.status().is_success() => {
                        stats.delivered.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    Ok(r) => {
                        let s = r.status();
                        tracing::debug!(%uri, status = %s, attempt, "notification refused");
                        s.is_server_error() || s == http::StatusCode::TOO_MANY_REQUESTS
                    }
                    Err(e) => {
                        tracing::debug!(%uri, error = %e, attempt, "notification not delivered");
                        true
                    }
                };
                if !retry || attempt == config.attempts {
                    break;
                }
                tokio::time::sleep(backoff).await;
                backoff *= 2;
            }
            stats.failed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%uri, "notification could not be delivered");
        });
    }
}
