//! A Gx session's PCF binding at the BSF (TS 29.521 Nbsf_Management, TS 29.513 EPC
//! interworking), made as an N7 association's is (crate::nbsf_management): registered at
//! CCR-I with `[pcf.bsf] enabled`, moved when a CCR-U changes the UE's address, deregistered
//! with the session (CCR-T, the session audit, a CCR-I replacing it). With `[pcf.diameter]` on
//! the binding carries `pcfDiamHost` / `pcfDiamRealm`, so the BSF's Rx proxy routes an AF's
//! AAR for the UE's address to this PCF.
//!
//! A CCR carries no S-NSSAI (TS 29.212 defines no such AVP) while a PcfBinding requires one;
//! the binding names `[pcf.bsf] gx_snssai` (default SST 1), the S-NSSAI the operator
//! associates with its PDN connections, in the role TS 23.502 §4.11.0a gives the S-NSSAI an
//! SMF+PGW-C picks for a PDN connection. The session's context (what the rules read) does not
//! get it: a 4G session keeps telling its rules it has no slice.

use serde_json::Value;

use crate::context::Pcf;
use crate::nbsf_management::Addresses;

/// `context` as the binding sees it: with the configured S-NSSAI when it has none.
fn with_snssai(pcf: &Pcf, context: &Value) -> Value {
    let mut c = context.clone();
    if let Some(m) = c.as_object_mut() {
        if !m.contains_key("sliceInfo") {
            let s = serde_json::to_value(&pcf.config.bsf.gx_snssai).unwrap_or(Value::Null);
            m.insert("sliceInfo".into(), s);
        }
    }
    c
}

/// Registers the binding of the Gx session whose context is `context`; its URI at the BSF,
/// or None (binding off, no UE address, the BSF failing: counted and logged there).
pub(crate) async fn register(pcf: &Pcf, context: &Value) -> Option<String> {
    if !pcf.config.bsf.enabled {
        return None;
    }
    pcf.bindings.register(&with_snssai(pcf, context)).await
}

/// After a CCR-U changed the session's context from addresses `before`: the binding the
/// session keeps (moved to the new address when it changed).
pub(crate) async fn rebind(
    pcf: &Pcf,
    before: Addresses,
    context: &Value,
    binding: Option<String>,
) -> Option<String> {
    if !pcf.config.bsf.enabled {
        return binding;
    }
    pcf.bindings.rebind(before, &with_snssai(pcf, context), binding).await
}
