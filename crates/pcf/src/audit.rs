//! Session audit (the reference's Audit service): an association its SMF or AMF has not
//! updated for `[pcf.audit] stale_after_ms` may be one the peer lost (a restart, a missed
//! delete). The PCF asks the peer, at most `max_per_s` associations a second:
//! - SM: an Npcf_SMPolicyControl_UpdateNotify (`POST {notificationUri}/update`) carrying the
//!   association's `resourceUri` and an empty decision, which changes nothing at the SMF;
//! - AM and UE: the same with a PolicyUpdate holding only `resourceUri`.
//!
//! A 2xx means the peer knows it: the association's last-update time is renewed, so it is not
//! asked again before `stale_after_ms`. A 404 means the peer has no such session: the
//! association is removed as a delete removes it (its BSF binding and, with the subscriber's
//! last, its UDR subscription go too). Anything else (no answer, 5xx) changes nothing: an
//! unreachable SMF does not lose its sessions; the next pass asks again.
//! A Gx session (converged PCRF) is asked with an RAR instead, in the same pass and rate
//! (crate::gx::audit): success is Known, 5002 DIAMETER_UNKNOWN_SESSION_ID is Gone.
//! Counted in `pcf_audit_checks_total{result="known"|"removed"|"no_answer"}`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use serde_json::{json, Value};

use crate::context::Pcf;
use crate::notify::Probe;
use crate::store::{Association, Kind, SmPolicy};
use crate::{npcf_ampolicycontrol, npcf_smpolicycontrol, npcf_uepolicycontrol};

#[derive(Debug, Default)]
pub struct Stats {
    pub known: AtomicU64,
    pub removed: AtomicU64,
    pub no_answer: AtomicU64,
}

/// Runs a pass every `interval_ms` until the task is aborted.
pub fn spawn(pcf: Arc<Pcf>) -> tokio::task::JoinHandle<()> {
    let every = Duration::from_millis(pcf.config.audit.interval_ms);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            pass(&pcf).await;
        }
    })
}

/// One pass: the stale associations of now, oldest first, as many as the rate allows within
/// one interval.
pub async fn pass(pcf: &Arc<Pcf>) {
    let cfg = &pcf.config.audit;
    let before = Utc::now().timestamp_millis() - cfg.stale_after_ms as i64;
    let budget = (cfg.max_per_s as u64 * cfg.interval_ms / 1000).max(1) as usize;
    let mut pace = tokio::time::interval(Duration::from_secs_f64(1.0 / cfg.max_per_s as f64));
    let sm = match pcf.store.stale_sm(before, budget).await {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(error = %e, "session audit: stale SM associations not read");
            Vec::new()
        }
    };
    let left = budget.saturating_sub(sm.len());
    for p in sm {
        pace.tick().await;
        check_sm(pcf, p).await;
    }
    if left == 0 {
        return;
    }
    let other = match pcf.store.stale_assoc(before, left).await {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(error = %e, "session audit: stale AM/UE associations not read");
            Vec::new()
        }
    };
    for a in other {
        pace.tick().await;
        check_assoc(pcf, a).await;
    }
}

fn notification_uri(context: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(context).ok()?;
    Some(v.get("notificationUri")?.as_str()?.trim_end_matches('/').to_string())
}

/// What the peer of a stale SM association said of it.
pub(crate) enum Found {
    Known,
    Gone,
    NoAnswer(String),
}

async fn check_sm(pcf: &Arc<Pcf>, p: SmPolicy) {
    if crate::gx::is_gx(&p.id) {
        return crate::gx::audit::check(pcf, p).await;
    }
    let Some(smf) = notification_uri(&p.context) else { return };
    let body = json!({
        "resourceUri": npcf_smpolicycontrol::resource_uri(pcf, &p.id),
        "smPolicyDecision": {}
    });
    let found = match pcf.notifier.probe(&format!("{smf}/update"), &body).await {
        Probe::Known => Found::Known,
        Probe::Gone => Found::Gone,
        Probe::NoAnswer(why) => Found::NoAnswer(why.to_string()),
    };
    found_sm(pcf, p, found, "SMF").await
}

/// Acts on what `peer` (the SMF, or a Gx session's PCEF) said of stale association `p`.
pub(crate) async fn found_sm(pcf: &Arc<Pcf>, p: SmPolicy, found: Found, peer: &str) {
    match found {
        Found::Known => {
            pcf.audit.known.fetch_add(1, Ordering::Relaxed);
            let _held = pcf.hold(&p.supi).await;
            // Renewed only if nothing wrote it since it was read: a write renews it anyway.
            if let Ok(Some(now)) = pcf.store.get_sm(&p.id).await {
                if now.updated_ms == p.updated_ms {
                    let renewed = SmPolicy { updated_ms: Utc::now().timestamp_millis(), ..now };
                    if let Err(e) = pcf.store.update_sm(renewed, Default::default()).await {
                        tracing::warn!(sm_policy = %p.id, error = %e, "session audit: not renewed");
                    }
                }
            }
        }
        Found::Gone => match npcf_smpolicycontrol::remove(pcf, &p.id).await {
            Ok(gone) => {
                if gone {
                    pcf.audit.removed.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(sm_policy = %p.id, supi = %p.supi, %peer, "session audit: the peer no longer knows the session: removed");
                }
            }
            Err(e) => tracing::warn!(sm_policy = %p.id, error = %e, "session audit: not removed"),
        },
        Found::NoAnswer(why) => {
            pcf.audit.no_answer.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(sm_policy = %p.id, %why, %peer, "session audit: the peer did not say");
        }
    }
}

async fn check_assoc(pcf: &Arc<Pcf>, a: Association) {
    let Some(peer) = notification_uri(&a.context) else { return };
    let resource = match a.kind {
        Kind::Am => npcf_ampolicycontrol::resource(pcf, None, &a.id),
        Kind::Ue => format!("{}/npcf-ue-policy-control/v1/policies/{}", pcf.api_root(None), a.id),
    };
    let body = json!({ "resourceUri": resource });
    match pcf.notifier.probe(&format!("{peer}/update"), &body).await {
        Probe::Known => {
            pcf.audit.known.fetch_add(1, Ordering::Relaxed);
            let _held = pcf.hold(&a.supi).await;
            if let Ok(Some(now)) = pcf.store.get_assoc(a.kind, &a.id).await {
                if now.updated_ms == a.updated_ms {
                    let renewed = Association { updated_ms: Utc::now().timestamp_millis(), ..now };
                    if let Err(e) = pcf.store.update_assoc(renewed, Default::default()).await {
                        tracing::warn!(association = %a.id, error = %e, "session audit: not renewed");
                    }
                }
            }
        }
        Probe::Gone => {
            let removed = match a.kind {
                Kind::Am => npcf_ampolicycontrol::remove(pcf, &a.id).await,
                Kind::Ue => npcf_uepolicycontrol::remove(pcf, &a.id).await,
            };
            match removed {
                Ok(true) => {
                    pcf.audit.removed.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(association = %a.id, kind = a.kind.as_str(), supi = %a.supi,
                        "session audit: the AMF no longer knows the association: removed");
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(association = %a.id, error = %e, "session audit: not removed")
                }
            }
        }
        Probe::NoAnswer(why) => {
            pcf.audit.no_answer.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(association = %a.id, %why, "session audit: the AMF did not say");
        }
    }
}
