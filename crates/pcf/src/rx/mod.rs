//! Rx (TS 29.214) served by the PCF as a converged PCRF, on the Diameter node Gx runs on
//! (`[pcf.diameter]`): AAR-I / AAR-U / STR from the AF (P-CSCF, §4.4.1, §4.4.2, §4.4.4), ASR
//! to the AF when the bound session ends (§4.4.6.2) and RAR on the bearer events it asked for
//! (Specific-Action, §4.4.6.x).
//!
//! An Rx session is an application session of [`crate::app_session`], as an N5 one is: its id
//! is `rx:` + the AF's Session-Id, its context the AppSessionContextReqData-shaped request the
//! AAR maps to ([`mapping`], TS 29.513 §7.3) with the AF's identity and Specific-Actions under
//! `rx`. So it binds by UE address to a Gx session or an N7 association alike, its rules enter
//! the bound decision in the same commit, it is durable, and it ends in the bound session's
//! delete commit (no Rx session outlives its IP-CAN session).
//!
//! The AAA answers once the rules are committed and the PCEF's RAA (or the SMF's answer to
//! the UpdateNotify) is in: not once the bearer is up (the PCEF's Charging-Rule-Report comes
//! later and is told the AF with an Rx RAR if it subscribed). Waiting for the gateway's answer
//! keeps one session's pushes in commit order; waiting for the bearer would hold the AF's
//! SIP transaction on radio set-up, as the reference does not.

pub mod mapping;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::Utc;
use diameter::dictionary::{base, rx};
use diameter::header::FLAG_ERROR;
use diameter::{builders::experimental_result, result_code as rc, Avp, Message, VENDOR_3GPP};
use nf::NfError;
use serde_json::{json, Map, Value};

use crate::app_session::{self, Change};
use crate::context::Pcf;
use crate::store::AppSession;
use mapping::Invalid;

/// What an application session's id starts with when it is an Rx session.
pub const SESSION_PREFIX: &str = "rx:";

/// Rx-Request-Type (TS 29.214 §5.3.50).
const INITIAL_REQUEST: u32 = 0;
const UPDATE_REQUEST: u32 = 1;

/// Abort-Cause BEARER_RELEASED (TS 29.214 §5.3.1): the IP-CAN session ended.
const BEARER_RELEASED: u32 = 0;

/// How long an aborted session's STR is still answered 2001 (the AF answers an ASR with its
/// STR at once; a later one is for a session long gone).
const ABORTED_KEPT: Duration = Duration::from_secs(300);

/// Whether an application session is an Rx session.
pub fn is_rx(app_id: &str) -> bool {
    app_id.starts_with(SESSION_PREFIX)
}

/// The application session id of the Rx session `session_id`.
pub fn app_id(session_id: &str) -> String {
    format!("{SESSION_PREFIX}{session_id}")
}

/// The Rx sessions the PCF aborted (ASR) whose STR has not come yet: the bound session's
/// delete took them from the store, and the AF's STR must still be answered 2001 (§4.4.6.2:
/// the AF answers the ASR, then ends the session with an STR). Kept in memory: after a
/// restart such an STR gets 5002, which ends the AF's session as well.
#[derive(Default)]
pub struct Aborted(Mutex<HashMap<String, Instant>>);

impl Aborted {
    fn insert(&self, sid: &str) {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        m.retain(|_, t| now.duration_since(*t) < ABORTED_KEPT);
        m.insert(sid.to_owned(), now);
    }

    fn take(&self, sid: &str) -> bool {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.remove(sid).is_some_and(|t| t.elapsed() < ABORTED_KEPT)
    }
}

/// An answer with `code` as Result-Code (E bit for a protocol error). AAA carries
/// Auth-Application-Id (§5.6.2), STA does not (§5.6.6).
fn answer(req: &Message, code: u32) -> Message {
    let mut a = Message::answer_to(req);
    if req.command_code() == rx::CMD_AA {
        a = a.avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID));
    }
    if rc::is_protocol_error(code) {
        a.header.flags |= FLAG_ERROR;
    }
    a.avp(base::RESULT_CODE.u32(code))
}

/// A 3GPP Experimental-Result-Code (§5.5.3) answer, with the AVP at fault when there is one.
fn experimental(req: &Message, code: u32, avp: Option<Avp>) -> Message {
    let mut a = Message::answer_to(req).avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID));
    a = a.avp(experimental_result(VENDOR_3GPP, code));
    if let Some(avp) = avp {
        a = a.avp(base::FAILED_AVP.grouped(vec![avp]));
    }
    a
}

fn invalid(req: &Message, e: Invalid) -> Message {
    if e.experimental {
        experimental(req, e.code, Some(e.avp))
    } else {
        answer(req, e.code).avp(base::FAILED_AVP.grouped(vec![e.avp]))
    }
}

/// A binding, policy or store error as Rx says it (§5.5).
fn error_answer(req: &Message, e: &NfError) -> Message {
    let cause = match e {
        NfError::Problem(p) => p.cause.as_deref(),
        _ => None,
    };
    match cause {
        Some(app_session::PDU_SESSION_NOT_AVAILABLE) => {
            experimental(req, rx::experimental_result::IP_CAN_SESSION_NOT_AVAILABLE, None)
        }
        Some(app_session::REQUESTED_SERVICE_NOT_AUTHORIZED) => {
            experimental(req, rx::experimental_result::REQUESTED_SERVICE_NOT_AUTHORIZED, None)
        }
        Some(app_session::APPLICATION_SESSION_CONTEXT_NOT_FOUND) => {
            answer(req, rc::DIAMETER_UNKNOWN_SESSION_ID)
        }
        _ => {
            tracing::warn!(error = %e, session = req.session_id().unwrap_or(""), "Rx request failed");
            answer(req, rc::DIAMETER_UNABLE_TO_COMPLY)
        }
    }
}

/// The Rx handler: every Rx request the node routes to the PCF (validated against the
/// command's grammar by the node: a missing mandatory AVP is 5005 with Failed-AVP there).
pub async fn handle(pcf: &Arc<Pcf>, req: Message) -> Message {
    let code = req.command_code();
    // An AF sends AAR and STR; RAR and ASR go the other way.
    if code != rx::CMD_AA && code != rx::CMD_SESSION_TERMINATION {
        return answer(&req, rc::DIAMETER_COMMAND_UNSUPPORTED);
    }
    if let Some(a) = req.find(&base::AUTH_APPLICATION_ID) {
        if a.as_u32().ok() != Some(rx::APP_ID) {
            return answer(&req, rc::DIAMETER_INVALID_AVP_VALUE)
                .avp(base::FAILED_AVP.grouped(vec![a.clone()]));
        }
    }
    let Some(sid) = req.session_id().map(str::to_owned) else {
        return answer(&req, rc::DIAMETER_MISSING_AVP)
            .avp(base::FAILED_AVP.grouped(vec![base::SESSION_ID.zero_filled()]));
    };
    let result = if code == rx::CMD_AA {
        aa(pcf, &req, &sid).await
    } else {
        terminate(pcf, &req, &sid).await
    };
    result.unwrap_or_else(|e| error_answer(&req, &e))
}

/// The `rx` member of an Rx session's context: the AF to send ASR / RAR to and what it
/// subscribed to.
fn rx_member(req: &Message, actions: Vec<u32>) -> Value {
    json!({
        "originHost": req.origin_host().unwrap_or_default(),
        "originRealm": req.origin_realm().unwrap_or_default(),
        "specificActions": actions,
    })
}

/// AAR (§4.4.1 initial, §4.4.2 modification): Rx-Request-Type says which; without it (an AF
/// before Rel-11) a known Session-Id is a modification.
async fn aa(pcf: &Arc<Pcf>, req: &Message, sid: &str) -> Result<Message, NfError> {
    let id = app_id(sid);
    let existing = pcf.store.get_app(&id).await?;
    let kind = req.rx_request_type();
    if let Some(k) = kind.filter(|k| *k != INITIAL_REQUEST && *k != UPDATE_REQUEST) {
        // PCSCF_RESTORATION (§4.4.7) is not served: said, not pretended.
        tracing::debug!(session = %sid, kind = k, "Rx-Request-Type not served");
        let a = req.find(&rx::RX_REQUEST_TYPE).cloned().expect("read above");
        return Ok(
            answer(req, rc::DIAMETER_INVALID_AVP_VALUE).avp(base::FAILED_AVP.grouped(vec![a]))
        );
    }
    let info = match mapping::service_info(req) {
        Ok(i) => i,
        Err(e) => return Ok(invalid(req, e)),
    };
    match (kind, existing) {
        // §5.5.3 DUPLICATED_AF_SESSION: an initial request for a session already there.
        (Some(INITIAL_REQUEST), Some(_)) => {
            Ok(experimental(req, rx::experimental_result::DUPLICATED_AF_SESSION, None))
        }
        (Some(UPDATE_REQUEST), None) => Ok(answer(req, rc::DIAMETER_UNKNOWN_SESSION_ID)),
        (_, Some(app)) => modify(pcf, req, app, info).await,
        (_, None) => create(pcf, req, &id, info).await,
    }
}

async fn create(
    pcf: &Arc<Pcf>,
    req: &Message,
    id: &str,
    mut info: Map<String, Value>,
) -> Result<Message, NfError> {
    let (v4, v6) = (info.get("ueIpv4").cloned(), info.get("ueIpv6").cloned());
    if v4.is_none() && v6.is_none() {
        return Ok(answer(req, rc::DIAMETER_MISSING_AVP)
            .avp(base::FAILED_AVP.grouped(vec![mapping::missing_address()])));
    }
    let sm = app_session::bind(
        pcf,
        v4.as_ref().and_then(Value::as_str),
        v6.as_ref().and_then(Value::as_str),
        info.get("dnn").and_then(Value::as_str),
    )
    .await?;
    info.insert("rx".into(), rx_member(req, req.specific_actions()));
    let asc = Value::Object(info);
    let app = AppSession {
        id: id.to_owned(),
        sm_policy_id: sm.id.clone(),
        supi: sm.supi.clone(),
        context: serde_json::to_vec(&asc)?,
        rules: app_session::rules_of(pcf, id, &sm.supi, &sm.context, &asc).await?,
        updated_ms: Utc::now().timestamp_millis(),
    };
    app_session::commit(pcf, &sm.id, &sm.supi, Change::Create(app)).await?;
    tracing::debug!(rx_session = %id, bound = %sm.id, "Rx session created");
    Ok(answer(req, rc::DIAMETER_SUCCESS))
}

async fn modify(
    pcf: &Arc<Pcf>,
    req: &Message,
    app: AppSession,
    mut info: Map<String, Value>,
) -> Result<Message, NfError> {
    // The UE's address and DNN bound the session; an AAR-U does not move it.
    for k in ["ueIpv4", "ueIpv6", "dnn", "supi", "gpsi"] {
        info.remove(k);
    }
    let mut asc = match app_session::context_of(&app) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let actions = req.specific_actions();
    mapping::merge(&mut asc, info);
    if !actions.is_empty() {
        // Specific-Actions given replace the subscription (§4.4.2).
        asc.insert("rx".into(), rx_member(req, actions));
    }
    let Some(sm) = pcf.store.get_sm(&app.sm_policy_id).await? else {
        return Ok(answer(req, rc::DIAMETER_UNKNOWN_SESSION_ID));
    };
    let asc = Value::Object(asc);
    let updated = AppSession {
        context: serde_json::to_vec(&asc)?,
        rules: app_session::rules_of(pcf, &app.id, &app.supi, &sm.context, &asc).await?,
        updated_ms: Utc::now().timestamp_millis(),
        ..app
    };
    let id = updated.id.clone();
    app_session::commit(pcf, &sm.id, &sm.supi, Change::Update(updated)).await?;
    tracing::debug!(rx_session = %id, "Rx session modified");
    Ok(answer(req, rc::DIAMETER_SUCCESS))
}

/// STR (§4.4.4): the session's rules leave the bound decision (the PCEF or SMF told); an
/// unknown Session-Id is 5002 unless the PCF aborted it (ASR) and this is the AF's answer.
async fn terminate(pcf: &Arc<Pcf>, req: &Message, sid: &str) -> Result<Message, NfError> {
    let id = app_id(sid);
    let Some(app) = pcf.store.get_app(&id).await? else {
        let code = if pcf.rx_aborted.take(sid) {
            rc::DIAMETER_SUCCESS
        } else {
            rc::DIAMETER_UNKNOWN_SESSION_ID
        };
        return Ok(answer(req, code));
    };
    match app_session::commit(pcf, &app.sm_policy_id, &app.supi, Change::Delete(id.clone())).await {
        Ok(_) => {}
        // Its bound session ended meanwhile, taking it along: ended either way.
        Err(NfError::Problem(p))
            if p.cause.as_deref() == Some(app_session::APPLICATION_SESSION_CONTEXT_NOT_FOUND) =>
        {
            pcf.rx_aborted.take(sid);
        }
        Err(e) => return Err(e),
    }
    tracing::debug!(rx_session = %id, "Rx session terminated");
    Ok(answer(req, rc::DIAMETER_SUCCESS))
}

/// The AF's identity of an Rx session, from its context.
fn af_of(ctx: &Value) -> Option<(&str, &str)> {
    let host = ctx["rx"]["originHost"].as_str().filter(|s| !s.is_empty())?;
    let realm = ctx["rx"]["originRealm"].as_str().filter(|s| !s.is_empty())?;
    Some((host, realm))
}

/// A request from the PCF to the AF of Rx session `app`.
fn to_af(
    node: &diameter::DiameterNode,
    app: &AppSession,
    ctx: &Value,
    cmd: u32,
) -> Option<Message> {
    let (host, realm) = af_of(ctx)?;
    let sid = app.id.strip_prefix(SESSION_PREFIX)?;
    Some(
        Message::request(rx::APP_ID, cmd)
            .session_id_avp(sid)
            .origin(node.origin_host(), node.origin_realm())
            .destination(realm, Some(host))
            .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID)),
    )
}

/// The bound session of Rx session `app` ended (its delete took `app` along): the AF gets an
/// ASR (§4.4.6.2, Abort-Cause BEARER_RELEASED) and ends the session with an STR, answered 2001.
pub(crate) async fn abort(pcf: &Pcf, app: &AppSession) {
    let Some(node) = pcf.gx.get() else { return };
    let ctx = app_session::context_of(app);
    let Some(asr) = to_af(node, app, &ctx, rx::CMD_ABORT_SESSION) else { return };
    let asr = asr.avp(rx::ABORT_CAUSE.enumerated(BEARER_RELEASED));
    let sid = asr.session_id().unwrap_or_default().to_owned();
    pcf.rx_aborted.insert(&sid);
    match crate::resend::request(pcf, node, crate::resend::Command::RxAsr, asr).await {
        Ok(asa) if asa.is_success() => {
            pcf.apps.terminate_sent.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(session = %sid, "Rx ASR answered");
        }
        Ok(asa) => {
            pcf.apps.terminate_failed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(session = %sid, result = ?asa.any_result_code(), "Rx ASR refused");
        }
        Err(e) => {
            pcf.apps.terminate_failed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(session = %sid, error = %e, "Rx ASR not answered");
        }
    }
}

/// The Specific-Action (§5.3.13) a rule report means: ACTIVE is a successful allocation
/// (8); TEMPORARILY_INACTIVE a lost bearer (2); INACTIVE for want of resources a failed
/// allocation (9) when the AF asked for that, else a released bearer (4).
fn action_of(report: &Value, subscribed: &[u32]) -> u32 {
    use rx::specific_action as sa;
    if report["ruleStatus"] == "ACTIVE" {
        return sa::INDICATION_OF_SUCCESSFUL_RESOURCES_ALLOCATION;
    }
    if report["temporarily"] == true {
        return sa::INDICATION_OF_LOSS_OF_BEARER;
    }
    let allocation = matches!(
        report["failureCode"].as_str(),
        Some("RES_ALLO_FAIL" | "RES_LIM" | "MAX_NR_QoS_FLOW" | "UNSUCC_QOS_VAL")
    );
    if allocation && subscribed.contains(&sa::INDICATION_OF_FAILED_RESOURCES_ALLOCATION) {
        sa::INDICATION_OF_FAILED_RESOURCES_ALLOCATION
    } else {
        sa::INDICATION_OF_RELEASE_OF_BEARER
    }
}

/// The bound session's gateway reported on the rules (`change`: an SMF update's shape,
/// `ruleReports`): for each Specific-Action the AF of `app` subscribed to that a report of
/// its rules means, an Rx RAR (§4.4.6) with the media components' Flows.
pub(crate) async fn bearer_events(pcf: &Pcf, app: &AppSession, change: &Value) {
    let Some(node) = pcf.gx.get() else { return };
    let ctx = app_session::context_of(app);
    let subscribed: Vec<u32> = ctx["rx"]["specificActions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_u64().and_then(|v| u32::try_from(v).ok()))
        .collect();
    if subscribed.is_empty() {
        return;
    }
    let prefix = format!("{}{}-", app_session::AF_RULE_PREFIX, app.id);
    let mut by_action: Vec<(u32, Vec<u64>)> = Vec::new();
    for report in change["ruleReports"].as_array().into_iter().flatten() {
        let comps: Vec<u64> = report["pccRuleIds"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r.as_str()?.strip_prefix(prefix.as_str())?.parse().ok())
            .collect();
        if comps.is_empty() {
            continue;
        }
        let action = action_of(report, &subscribed);
        if !subscribed.contains(&action) {
            continue;
        }
        match by_action.iter_mut().find(|(a, _)| *a == action) {
            Some((_, c)) => c.extend(comps),
            None => by_action.push((action, comps)),
        }
    }
    for (action, comps) in by_action {
        let Some(rar) = to_af(node, app, &ctx, rx::CMD_RE_AUTH) else { return };
        let rar = rar
            .avp(rx::SPECIFIC_ACTION.enumerated(action))
            .with_avps(mapping::flows(&ctx["medComponents"], &comps));
        let sid = rar.session_id().unwrap_or_default().to_owned();
        match crate::resend::request(pcf, node, crate::resend::Command::RxRar, rar).await {
            Ok(raa) if raa.is_success() => {
                pcf.apps.notify_sent.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(session = %sid, action, "Rx RAR answered");
            }
            Ok(raa) => {
                pcf.apps.notify_failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(session = %sid, result = ?raa.any_result_code(), "Rx RAR refused");
            }
            Err(e) => {
                pcf.apps.notify_failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(session = %sid, error = %e, "Rx RAR not answered");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rx::specific_action as sa;

    #[test]
    fn rule_reports_become_specific_actions() {
        let all = [2, 4, 8, 9];
        assert_eq!(
            action_of(&json!({"ruleStatus": "ACTIVE"}), &all),
            sa::INDICATION_OF_SUCCESSFUL_RESOURCES_ALLOCATION
        );
        assert_eq!(
            action_of(&json!({"ruleStatus": "INACTIVE", "temporarily": true}), &all),
            sa::INDICATION_OF_LOSS_OF_BEARER
        );
        let failed = json!({"ruleStatus": "INACTIVE", "failureCode": "RES_ALLO_FAIL"});
        assert_eq!(action_of(&failed, &all), sa::INDICATION_OF_FAILED_RESOURCES_ALLOCATION);
        // Not asked for the failed allocation: the bearer is released all the same.
        assert_eq!(action_of(&failed, &[4]), sa::INDICATION_OF_RELEASE_OF_BEARER);
        assert_eq!(
            action_of(&json!({"ruleStatus": "INACTIVE"}), &all),
            sa::INDICATION_OF_RELEASE_OF_BEARER
        );
    }

    #[test]
    fn an_aborted_session_is_answered_once() {
        let a = Aborted::default();
        a.insert("af;1");
        assert!(a.take("af;1"));
        assert!(!a.take("af;1"));
        assert!(!a.take("af;2"));
    }
}
