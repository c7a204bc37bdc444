//! The binding audit: bindings created more than `audit.max_age_secs` ago are removed in the
//! background, oldest first (the creation-time index), in small batches at no more than
//! `audit.max_per_sec`, and their deregistration is notified. Each batch is one short write job
//! in the writer's group commit, then the task sleeps long enough to hold the rate, so
//! Register/Deregister never wait behind a long audit transaction.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::context::Bsf;
use crate::subscriptions::BindingEvent;

/// One audit batch: removes up to `batch` stale bindings; returns how many.
pub async fn run_once(bsf: &Bsf) -> store::Result<usize> {
    let cfg = &bsf.config.audit;
    let age_ms = i64::try_from(cfg.max_age_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
    let cutoff = chrono::Utc::now().timestamp_millis().saturating_sub(age_ms);
    let removed = bsf.store.remove_older_than(cutoff, cfg.batch).await?;
    for old in &removed {
        tracing::debug!(id = %old.id, "audit removed a stale binding");
        bsf.binding_event_stored(BindingEvent::Deregistered, &old.json);
    }
    bsf.audit_removed.fetch_add(removed.len() as u64, Ordering::Relaxed);
    Ok(removed.len())
}

/// Runs the audit until `stop` turns true; returns at once when the audit is disabled.
pub async fn run(bsf: Arc<Bsf>, mut stop: watch::Receiver<bool>) {
    let cfg = bsf.config.audit.clone();
    if cfg.max_age_secs == 0 {
        return;
    }
    let idle = Duration::from_millis(cfg.idle_ms);
    loop {
        let pause = match run_once(&bsf).await {
            // A full second's budget spread over the batches: n removals cost n / rate seconds.
            Ok(n) if n > 0 => Duration::from_secs_f64(n as f64 / f64::from(cfg.max_per_sec)),
            Ok(_) => idle,
            Err(e) => {
                tracing::warn!(error = %e, "binding audit failed; retrying later");
                idle
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
    }
}
