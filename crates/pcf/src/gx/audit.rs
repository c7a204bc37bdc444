//! The session audit (crate::audit) for Gx sessions: Gx has no query, so a session with no
//! CCR for `[pcf.audit] stale_after_ms` is asked about with an RAR (AUTHORIZE_ONLY) that
//! carries no change. Its RAA says:
//! - success: the PCEF knows it; its last-update time is renewed as an N7 association's;
//! - 5002 DIAMETER_UNKNOWN_SESSION_ID: the PCEF lost it (a restart, a missed CCR-T); it is
//!   removed as a CCR-T removes it (its BSF binding, Rx sessions, UDR subscription go too);
//! - anything else, or no answer: nothing changes; the next pass asks again. The RAR is not
//!   resent (crate::resend): the next pass is its retry.
//!
//! It takes its place in the audit's pass and rate (`max_per_s`) with the N7 associations.

use std::sync::Arc;

use diameter::result_code as rc;
use serde_json::Value;

use crate::audit::Found;
use crate::context::Pcf;
use crate::store::SmPolicy;

/// Asks the PCEF of stale Gx session `p` whether it still has it.
pub(crate) async fn check(pcf: &Arc<Pcf>, p: SmPolicy) {
    // Diameter off now (it was on when the session was made): no PCEF to ask.
    let Some(node) = pcf.gx.get() else { return };
    let Ok(context) = serde_json::from_slice::<Value>(&p.context) else { return };
    let Some(rar) = super::ccr::bare_rar(node, &p.id, &context) else { return };
    let found = match node.request(rar).await {
        Ok(raa) if raa.is_success() => Found::Known,
        Ok(raa) if raa.result_code() == Some(rc::DIAMETER_UNKNOWN_SESSION_ID) => Found::Gone,
        Ok(raa) => Found::NoAnswer(format!("the PCEF answered {:?}", raa.any_result_code())),
        Err(e) => Found::NoAnswer(e.to_string()),
    };
    crate::audit::found_sm(pcf, p, found, "PCEF").await;
}
