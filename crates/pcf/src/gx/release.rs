//! PCRF-initiated IP-CAN session termination (TS 29.212 §4.5.6): when the UDR removes a
//! subscriber's policy data, each of its Gx sessions' PCEF gets an RAR with
//! Session-Release-Cause, as each N7 association's SMF gets a TerminationNotification
//! (crate::npcf_smpolicycontrol::terminate_all).
//!
//! The session is not removed when the RAR is sent: the PCEF answers the RAA, removes the
//! session's rules and sends a CCR-T, and that CCR-T removes it (answered 2001, as any). Only
//! an RAA saying 5002 DIAMETER_UNKNOWN_SESSION_ID (the PCEF has no such session: no CCR-T
//! will come) removes it at once. An RAR unanswered after its resends (crate::resend), or
//! a PCEF that answers but never sends the CCR-T, leaves the session to the Gx session audit
//! (crate::gx::audit), which removes it once the PCEF says it does not know it.

use std::sync::Arc;

use diameter::dictionary::gx;
use diameter::result_code as rc;
use serde_json::Value;

use crate::context::Pcf;
use crate::resend::{self, Command};
use crate::store::SmPolicy;

/// Session-Release-Cause (TS 29.212 §5.3.33) for an N7 termination cause (TS 29.512
/// SmPolicyAssociationReleaseCause): UE_SUBSCRIPTION → UE_SUBSCRIPTION_REASON,
/// INSUFFICIENT_RES → INSUFFICIENT_SERVER_RESOURCES, anything else UNSPECIFIED_REASON.
pub fn release_cause(n7_cause: &str) -> u32 {
    match n7_cause {
        "UE_SUBSCRIPTION" => 1,
        "INSUFFICIENT_RES" => 2,
        _ => 0,
    }
}

/// Asks the PCEF of each Gx session in `sessions` (all of one subscriber) to end it, with
/// the Session-Release-Cause of `cause` (an N7 termination cause).
pub(crate) async fn release(pcf: &Arc<Pcf>, sessions: Vec<SmPolicy>, cause: &str) {
    let Some(node) = pcf.gx.get() else { return };
    for p in sessions {
        let Ok(context) = serde_json::from_slice::<Value>(&p.context) else { continue };
        let Some(rar) = super::ccr::bare_rar(node, &p.id, &context) else { continue };
        let rar = rar.avp(gx::SESSION_RELEASE_CAUSE.enumerated(release_cause(cause)));
        let sid = rar.session_id().unwrap_or_default().to_owned();
        tracing::info!(session = %sid, supi = %p.supi, %cause, "Gx session released by the PCRF");
        match resend::request(pcf, node, Command::GxRar, rar).await {
            Ok(raa) if raa.is_success() => {
                tracing::debug!(session = %sid, "release RAR answered: the CCR-T ends it")
            }
            Ok(raa) if raa.result_code() == Some(rc::DIAMETER_UNKNOWN_SESSION_ID) => {
                match crate::npcf_smpolicycontrol::remove(pcf, &p.id).await {
                    Ok(_) => tracing::info!(session = %sid, "the PCEF does not know it: removed"),
                    Err(e) => tracing::warn!(session = %sid, error = %e, "not removed"),
                }
            }
            Ok(raa) => tracing::warn!(session = %sid, result = ?raa.any_result_code(),
                "release RAR refused: the session stays for its CCR-T or the audit"),
            Err(e) => tracing::warn!(session = %sid, error = %e,
                "release RAR not answered: the session stays for its CCR-T or the audit"),
        }
    }
}
