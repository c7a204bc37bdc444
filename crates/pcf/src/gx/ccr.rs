//! Gx Credit-Control (TS 29.212 §4.5.1 CCR-I, §4.5.2 CCR-U, §4.5.7 CCR-T; commands §5.6.2,
//! §5.6.3) and the PCRF-initiated Re-Auth (§4.5.2.2, §5.6.4), decided as N7 decides.
//!
//! Errors (docs/pcf.md, "Gx"):
//! - a CCR-U or CCR-T of a Session-Id with no session: 5002 DIAMETER_UNKNOWN_SESSION_ID;
//! - a CCR-I without the subscriber's IMSI (Subscription-Id END_USER_IMSI): 5005
//!   DIAMETER_MISSING_AVP, Failed-AVP a Subscription-Id of that type; AVPs the command's
//!   grammar requires are checked by the node before this handler (5005 with Failed-AVP);
//! - Auth-Application-Id other than Gx's, or a CC-Request-Type Gx does not use (EVENT): 5004
//!   DIAMETER_INVALID_AVP_VALUE with the AVP in Failed-AVP (RFC 6733 §7.1.5);
//! - `[pcf.udr] on_unknown_subscriber = "reject"` and the UDR does not know the subscriber:
//!   Experimental-Result 5030 DIAMETER_USER_UNKNOWN (3GPP);
//! - `[pcf.udr] on_unreachable = "reject"` and no UDR answers: 3004 DIAMETER_TOO_BUSY (the
//!   Diameter counterpart of N7's 503: the PCEF may try another PCRF); with `fallback` (the
//!   default) the project's fallback decision answers, as on N7;
//! - a store failure: 5012 DIAMETER_UNABLE_TO_COMPLY.

use std::sync::Arc;

use chrono::Utc;
use diameter::dictionary::{base, dcca, gx};
use diameter::header::FLAG_ERROR;
use diameter::{
    builders::experimental_result, result_code as rc, Avp, CcRequestType, Message, VENDOR_3GPP,
};
use nf::NfError;
use policy::Service;
use serde_json::{json, Map, Value};

use super::mapping;
use crate::context::Pcf;
use crate::decide::{
    decide, decide_create, decide_reported, Decided, TARGET_NF_NOT_REACHABLE, USER_UNKNOWN,
};
use crate::store::{ParsedSm, SmPolicy};

/// Where a CCR-U's reported Event-Triggers are in the engine's view of the context (N7's
/// `repPolicyCtrlReqTriggers`): for that decision only, never stored.
const REPORTED: &str = "repPolicyCtrlReqTriggers";

/// TS 29.229 §6.2.2.1 / TS 29.212 §5.5.3: the subscriber is not known.
pub const DIAMETER_USER_UNKNOWN: u32 = 5030;

/// Re-Auth-Request-Type AUTHORIZE_ONLY (RFC 6733 §8.12): what TS 29.212 §5.6.4 asks for.
const AUTHORIZE_ONLY: u32 = 0;

/// The answer to `req` with `code` as Result-Code (E bit for a protocol error, 3xxx).
fn answer(req: &Message, code: u32) -> Message {
    let mut a = base_answer(req);
    if rc::is_protocol_error(code) {
        a.header.flags |= FLAG_ERROR;
    }
    a.avp(base::RESULT_CODE.u32(code))
}

/// A CCA's mandatory AVPs (§5.6.3), without a result.
fn base_answer(req: &Message) -> Message {
    let mut a = Message::answer_to(req).avp(base::AUTH_APPLICATION_ID.u32(gx::APP_ID));
    for def in [&dcca::CC_REQUEST_TYPE, &dcca::CC_REQUEST_NUMBER] {
        if let Some(v) = req.find(def) {
            a.push(v.clone());
        }
    }
    a
}

/// `code` with the AVP at fault in Failed-AVP.
fn failed(req: &Message, code: u32, avp: Avp) -> Message {
    answer(req, code).avp(base::FAILED_AVP.grouped(vec![avp]))
}

/// A decision or store error as Gx says it.
fn error_answer(req: &Message, e: &NfError) -> Message {
    match e {
        NfError::Problem(p) if p.cause.as_deref() == Some(USER_UNKNOWN) => {
            base_answer(req).avp(experimental_result(VENDOR_3GPP, DIAMETER_USER_UNKNOWN))
        }
        NfError::Problem(p) if p.cause.as_deref() == Some(TARGET_NF_NOT_REACHABLE) => {
            answer(req, rc::DIAMETER_TOO_BUSY)
        }
        _ => {
            tracing::warn!(error = %e, session = req.session_id().unwrap_or(""), "Gx request failed");
            answer(req, rc::DIAMETER_UNABLE_TO_COMPLY)
        }
    }
}

/// The Gx handler: every Gx request the node routes to the PCF (validated by the node).
pub async fn handle(pcf: &Arc<Pcf>, req: Message) -> Message {
    // A PCEF sends only CCR on Gx; RAR goes the other way.
    if req.command_code() != gx::CMD_CREDIT_CONTROL {
        return answer(&req, rc::DIAMETER_COMMAND_UNSUPPORTED);
    }
    if let Some(a) = req.find(&base::AUTH_APPLICATION_ID) {
        if a.as_u32().ok() != Some(gx::APP_ID) {
            return failed(&req, rc::DIAMETER_INVALID_AVP_VALUE, a.clone());
        }
    }
    let Some(sid) = req.session_id().map(str::to_owned) else {
        return failed(&req, rc::DIAMETER_MISSING_AVP, base::SESSION_ID.zero_filled());
    };
    let result = match req.cc_request_type() {
        Some(CcRequestType::Initial) => initial(pcf, &req, &sid).await,
        Some(CcRequestType::Update) => update(pcf, &req, &sid).await,
        Some(CcRequestType::Termination) => terminate(pcf, &req, &sid).await,
        _ => {
            let a = req
                .find(&dcca::CC_REQUEST_TYPE)
                .cloned()
                .unwrap_or_else(|| dcca::CC_REQUEST_TYPE.zero_filled());
            return failed(&req, rc::DIAMETER_INVALID_AVP_VALUE, a);
        }
    };
    result.unwrap_or_else(|e| error_answer(&req, &e))
}

/// CCR-I (§4.5.1): the IP-CAN session's context decided as an SM policy association's create;
/// the session stored (committed) before the CCA says so.
async fn initial(pcf: &Arc<Pcf>, req: &Message, sid: &str) -> Result<Message, NfError> {
    let Some(imsi) = req.imsi() else {
        // RFC 6733 §7.5: Failed-AVP holds an example of the missing AVP; the type says which
        // (an empty Subscription-Id-Data would be a malformed UTF8String to a decoder).
        let example =
            dcca::SUBSCRIPTION_ID
                .grouped(vec![dcca::SUBSCRIPTION_ID_TYPE
                    .enumerated(dcca::subscription_id_type::END_USER_IMSI)]);
        return Ok(failed(req, rc::DIAMETER_MISSING_AVP, example));
    };
    let supi = format!("imsi-{imsi}");
    let id = super::policy_id(sid);
    // A CCR-I of a Session-Id still known: the PCEF set the session up again (it restarted
    // without a CCR-T); the old one ends first so nothing of it lingers (its UDR subscription
    // count, its bound application sessions).
    if pcf.store.supi_of_sm(&id).await?.is_some() {
        crate::npcf_smpolicycontrol::remove(pcf, &id).await?;
    }
    let mut context = mapping::context_of(req);
    context.insert(
        "gx".into(),
        json!({"originHost": req.origin_host().unwrap_or_default(),
               "originRealm": req.origin_realm().unwrap_or_default()}),
    );
    let mut context = Value::Object(context);
    let _held = pcf.hold(&supi).await;
    let sy = pcf.sy.creating(pcf, &supi);
    let Decided { mut outcome, project, subscribe, data, subscribed, chf, ldap } =
        decide_create(pcf, &context, &supi).await?;
    let ssv = std::mem::take(&mut outcome.ssv_updates);
    let decision = outcome.decision;
    // Its TDF session, when the decision asks for application detection (crate::sd).
    pcf.sd.establish(sid, &mut context, &decision).await;
    let (udr_subscription, binding) = tokio::join!(
        async {
            if subscribe {
                let callback =
                    format!("{}{}", pcf.api_root(None), crate::nudr_notify::CALLBACK_PATH);
                pcf.policy_data.subscribe(&supi, &callback).await
            } else {
                None
            }
        },
        super::binding::register(pcf, &context)
    );
    let keep = subscribed || udr_subscription.is_some();
    let stored = SmPolicy {
        id,
        supi: supi.clone(),
        context: serde_json::to_vec(&context)?,
        decision: serde_json::to_vec(&decision)?,
        policy_version: project.version.clone(),
        updated_ms: Utc::now().timestamp_millis(),
        binding,
    };
    let written = (stored.id.clone(), stored.context.clone(), stored.decision.clone());
    let created = pcf.chf.create_sm(&*pcf.store, stored, ssv, udr_subscription, chf).await;
    if created.is_err() {
        // Not kept, so not known to end later: its TDF session ends now.
        pcf.sd.release(&context);
    }
    created?;
    sy.done();
    if let (Some(d), true) = (data, keep) {
        pcf.policy_data.hold_sm(&supi, d);
    }
    if let Some(p) = ldap {
        pcf.ldap.keep(&supi, &super::policy_id(sid), p);
    }
    tracing::debug!(session = %sid, %supi, policy_version = %project.version, "Gx session created");
    let empty = Value::Object(Map::new());
    let cca =
        answer(req, rc::DIAMETER_SUCCESS).with_avps(mapping::decision_avps(&empty, &decision));
    let (id, c, d) = written;
    pcf.store.keep_parsed_sm(&id, &c, &d, ParsedSm { context, decision });
    Ok(cca)
}

/// CCR-U (§4.5.2): the reported changes merged into the session's context, decided again with
/// the reported Event-Triggers in the engine's view (`repPolicyCtrlReqTriggers`, not kept);
/// the CCA carries only what changed.
async fn update(pcf: &Arc<Pcf>, req: &Message, sid: &str) -> Result<Message, NfError> {
    let reports = match crate::usage::gx_reports(pcf, req) {
        Ok(r) => r,
        Err(e) => return Ok(crate::usage::gx_refusal(base_answer(req), e)),
    };
    let id = super::policy_id(sid);
    let Some(supi) = pcf.store.supi_of_sm(&id).await? else {
        return Ok(answer(req, rc::DIAMETER_UNKNOWN_SESSION_ID));
    };
    let _held = pcf.hold(&supi).await;
    let Some((stored, kept)) = pcf.store.get_sm_with_subscriber(&id).await? else {
        return Ok(answer(req, rc::DIAMETER_UNKNOWN_SESSION_ID));
    };
    // As the session's last CCR left them, or parsed from the store's bytes.
    let (mut context, old) = match pcf.store.take_parsed_sm(&id) {
        Some(p) => (p.context, p.decision),
        None => (
            serde_json::from_slice::<Value>(&stored.context)?,
            serde_json::from_slice::<Value>(&stored.decision)?,
        ),
    };
    let before = crate::nbsf_management::Bindings::addresses(&context);
    let mut changed = false;
    if let Some(c) = context.as_object_mut() {
        // The subscriber is the session's: a CCR-U naming another IMSI does not move it.
        for (k, v) in mapping::context_of(req).into_iter().filter(|(k, _)| k != "supi") {
            if c.get(&k) != Some(&v) {
                c.insert(k, v);
                changed = true;
            }
        }
    }
    // In the context while the engine decides, out again after: no copy of the context.
    if let Some(c) = context.as_object_mut() {
        c.insert(REPORTED.into(), Value::Array(mapping::reported_triggers(req)));
    }
    // Reported usage is added to the subscriber's totals, which this decision reads.
    let pending = pcf.usage.pending(&supi, &stored.decision, reports);
    let usage = match &pending {
        Some(p) => Some(p.view.clone()),
        None => pcf.usage.view(&supi),
    };
    let decided = decide_reported(pcf, Service::Sm, &context, &supi, Some(kept), usage).await;
    let reported = context.as_object_mut().and_then(|c| c.remove(REPORTED)).unwrap_or_default();
    let Decided { mut outcome, project, data, subscribed, ldap, .. } = decided?;
    if let (Some(d), true) = (data, subscribed) {
        pcf.policy_data.cache_if_absent(&supi, d);
    }
    let ssv = std::mem::take(&mut outcome.ssv_updates);
    let mut new = outcome.decision;
    // Rules an application session (N5 today, Rx next) installed stay until it ends.
    crate::app_session::keep_af_rules(&old, &mut new);
    let mut avps = mapping::decision_avps(&old, &new);
    if let Some(p) = &pending {
        avps.extend(crate::usage::gx_rearm(&old, &new, &p.keys));
    }
    let new_bytes = serde_json::to_vec(&new)?;
    let binding = super::binding::rebind(pcf, before, &context, stored.binding.clone()).await;
    let now = Utc::now().timestamp_millis();
    // The bytes the session has once this CCR-U is done, for its parsed form to be kept.
    let written;
    if !changed
        && binding == stored.binding
        && new_bytes == stored.decision
        && ssv.is_empty()
        && project.version == stored.policy_version
        && pending.is_none()
    {
        if !pcf.store.touch_sm(&id, now).await? {
            return Ok(answer(req, rc::DIAMETER_UNKNOWN_SESSION_ID));
        }
        written = (stored.context, stored.decision);
    } else {
        let updated = SmPolicy {
            context: if changed { serde_json::to_vec(&context)? } else { stored.context },
            decision: new_bytes,
            policy_version: project.version.clone(),
            updated_ms: now,
            binding,
            ..stored
        };
        written = (updated.context.clone(), updated.decision.clone());
        let done = match &pending {
            Some(p) => pcf.store.update_sm_with_usage(updated, ssv, p.rows.clone()).await?,
            None => pcf.store.update_sm(updated, ssv).await?,
        };
        if !done {
            return Ok(answer(req, rc::DIAMETER_UNKNOWN_SESSION_ID));
        }
        if let Some(p) = &pending {
            pcf.usage.committed(p);
            if crate::usage::crossed(&old, &new) {
                crate::usage::redecide_subscriber(pcf, &supi);
            }
        }
    }
    // Kept once the session is known to live on (after a restart the cache starts empty).
    if let Some(p) = ldap {
        pcf.ldap.keep(&supi, &id, p);
    }
    drop(_held);
    if let Some(m) = pcf.sd.rar(&context, &old, &new) {
        pcf.sd.send(m);
    }
    // What the PCEF reports of the rules (Charging-Rule-Report) and the resources, as an SMF's
    // update would say it: the bound application sessions' AFs hear of it (N5 events, Rx RAR).
    let reports = mapping::rule_reports(req);
    if !reports.is_empty() {
        let change = json!({"ruleReports": reports, "repPolicyCtrlReqTriggers": reported});
        crate::app_session::sm_updated(pcf, &id, &change, &context).await;
    }
    tracing::debug!(session = %sid, %supi, "Gx session updated");
    pcf.store.keep_parsed_sm(&id, &written.0, &written.1, ParsedSm { context, decision: new });
    Ok(answer(req, rc::DIAMETER_SUCCESS).with_avps(avps))
}

/// CCR-T (§4.5.7): the session and what it holds at other NFs removed, as an N7 delete.
async fn terminate(pcf: &Arc<Pcf>, req: &Message, sid: &str) -> Result<Message, NfError> {
    // The session's final usage (§4.5.17) is added with its removal.
    let reports = match crate::usage::gx_reports(pcf, req) {
        Ok(r) => r,
        Err(e) => return Ok(crate::usage::gx_refusal(base_answer(req), e)),
    };
    let id = super::policy_id(sid);
    if !crate::npcf_smpolicycontrol::remove_reporting(pcf, &id, reports).await? {
        return Ok(answer(req, rc::DIAMETER_UNKNOWN_SESSION_ID));
    }
    tracing::debug!(session = %sid, "Gx session terminated");
    Ok(answer(req, rc::DIAMETER_SUCCESS))
}

/// A Gx session decided again (its subscriber's data changed), its caller holding the
/// subscriber: the RAR carrying what changed, None when nothing did. The new decision is
/// stored before the RAR goes: a CCR-U after it sees the decision the RAR announced.
pub(crate) async fn redecide_one(pcf: &Pcf, stored: SmPolicy) -> Result<Option<Message>, NfError> {
    let Some(node) = pcf.gx.get() else { return Ok(None) };
    let context: Value = serde_json::from_slice(&stored.context)?;
    let Decided { mut outcome, project, .. } =
        decide(pcf, Service::Sm, &context, &stored.supi).await?;
    let ssv = std::mem::take(&mut outcome.ssv_updates);
    let old: Value = serde_json::from_slice(&stored.decision)?;
    let mut new = outcome.decision;
    crate::app_session::keep_af_rules(&old, &mut new);
    let rar = rar(node, &stored.id, &context, &old, &new);
    // Its TDF's ADC rules may change alone (crate::sd).
    let sd_rar = pcf.sd.rar(&context, &old, &new);
    if rar.is_none() && sd_rar.is_none() {
        return Ok(None);
    }
    let updated = SmPolicy {
        decision: serde_json::to_vec(&new)?,
        policy_version: project.version.clone(),
        updated_ms: Utc::now().timestamp_millis(),
        ..stored
    };
    if !pcf.store.update_sm(updated, ssv).await? {
        return Ok(None);
    }
    if let Some(m) = sd_rar {
        pcf.sd.send(m);
    }
    Ok(rar)
}

/// The RAR telling the PCEF of Gx session `policy_id` (its context `context`) what changed
/// from decision `old` to `new`; None when nothing did or the PCEF is not known.
pub(crate) fn rar(
    node: &diameter::DiameterNode,
    policy_id: &str,
    context: &Value,
    old: &Value,
    new: &Value,
) -> Option<Message> {
    let avps = mapping::decision_avps(old, new);
    if avps.is_empty() {
        return None;
    }
    Some(bare_rar(node, policy_id, context)?.with_avps(avps))
}

/// An RAR (AUTHORIZE_ONLY) to the PCEF of Gx session `policy_id` (its context `context`)
/// with nothing in it yet; None when the PCEF is not known.
pub(crate) fn bare_rar(
    node: &diameter::DiameterNode,
    policy_id: &str,
    context: &Value,
) -> Option<Message> {
    let host = context["gx"]["originHost"].as_str().filter(|s| !s.is_empty())?;
    let realm = context["gx"]["originRealm"].as_str().filter(|s| !s.is_empty())?;
    let sid = policy_id.strip_prefix(super::SESSION_PREFIX)?;
    Some(
        Message::request(gx::APP_ID, gx::CMD_RE_AUTH)
            .session_id_avp(sid)
            .avp(base::AUTH_APPLICATION_ID.u32(gx::APP_ID))
            .origin(node.origin_host(), node.origin_realm())
            .destination(realm, Some(host))
            .avp(base::RE_AUTH_REQUEST_TYPE.enumerated(AUTHORIZE_ONLY)),
    )
}

/// Sends the RARs [`redecide_one`] made, once the subscriber is let go (a PCEF's answer holds
/// up none of its requests). An RAA's failure is logged: the decision stays stored, and the
/// PCEF's next CCR-U is answered from it.
pub(crate) async fn send_rars(pcf: &Pcf, rars: Vec<Message>) {
    let Some(node) = pcf.gx.get() else { return };
    for rar in rars {
        let sid = rar.session_id().unwrap_or_default().to_owned();
        match crate::resend::request(pcf, node, crate::resend::Command::GxRar, rar).await {
            Ok(raa) if raa.is_success() => tracing::debug!(session = %sid, "Gx RAR answered"),
            Ok(raa) => {
                tracing::warn!(session = %sid, result = ?raa.any_result_code(), "Gx RAR refused")
            }
            Err(e) => tracing::warn!(session = %sid, error = %e, "Gx RAR not answered"),
        }
    }
}
