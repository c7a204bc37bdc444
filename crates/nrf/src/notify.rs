//! NFStatusNotify (TS 29.510 §5.2.2.6): POSTs of NotificationData to each subscriber's
//! nfStatusNotificationUri. Delivery never blocks the request that caused it: each notification
//! is a spawned task, at most `max_in_flight` at once (beyond that it is dropped and logged, not
//! queued without bound), tried `attempts` times with doubling backoff on a transport failure or
//! a 5xx/429.
//!
//! Of those in flight, at most `max_sending` have a POST outstanding; the others wait, in the
//! order they were queued. One SMF or PCF write notifies a seventh of all subscriptions at once;
//! sending them all together would put a hundred-odd sends ahead of the discoveries arriving
//! meanwhile on the NF's core, and show as their latency tail. A notification gives its turn
//! back while it waits out a backoff.

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
    sending: Arc<Semaphore>,
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
        let sending = Arc::new(Semaphore::new(config.max_sending.max(1)));
        Notifier { client, config, permits, sending, stats: Arc::default() }
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
        let sending = self.sending.clone();
        let uri = uri.to_owned();
        tokio::spawn(async move {
            let _permit = permit;
            let mut backoff = Duration::from_millis(config.backoff_ms);
            for attempt in 1..=config.attempts {
                // Never closed, so acquiring fails only if the notifier is gone.
                let Ok(turn) = sending.acquire().await else { return };
                let result = client
                    .post(&uri)
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .body(body.clone())
                    .send()
                    .await;
                drop(turn);
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
