//! Application sessions, protocol-neutral: what Npcf_PolicyAuthorization (N5, TS 29.514) and
//! Rx (TS 29.214, [`crate::rx`]) share. An application session is bound to the SM policy
//! association of the UE's address (TS 29.513 §8.2); its media components become PCC rules
//! and QoS decisions (TS 29.513 §7.3) put in that association's decision, and the SMF gets
//! them in an Npcf_SMPolicyControl_UpdateNotify. The association's later decisions keep them
//! (the project's SM rules never see them) until the application session ends. What the SMF
//! reports of them (resources allocated or not, access or RAT type changes) goes to the AF as
//! events; the association's end terminates the application session.
//!
//! The service information is the N5 shape whatever the protocol: `medComponents` as TS 29.514
//! MediaComponent objects (an Rx front end maps Media-Component-Description onto it).
//!
//! The rules an application session adds are named `af-{appSessionId}-{medCompN}` (PCC rule
//! and QoS data alike), so a project's own rule ids must not start with `af-`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use chrono::Utc;
use http::StatusCode;
use nf::NfError;
use policy::{Input, Service};
use sbi::ProblemDetails;
use serde_json::{json, Map, Value};

use crate::context::Pcf;
use crate::models;
use crate::store::{AppSession, SmPolicy, UeAddress};

/// TS 29.514 §5.7.3: no PDU session of the UE's address (and DNN) to bind to.
pub const PDU_SESSION_NOT_AVAILABLE: &str = "PDU_SESSION_NOT_AVAILABLE";
/// TS 29.514 §5.7.3: no application session of that id.
pub const APPLICATION_SESSION_CONTEXT_NOT_FOUND: &str = "APPLICATION_SESSION_CONTEXT_NOT_FOUND";
/// TS 29.514 §5.7.3: the service information is not authorized (here: the project gives no
/// QoS for a media type).
pub const REQUESTED_SERVICE_NOT_AUTHORIZED: &str = "REQUESTED_SERVICE_NOT_AUTHORIZED";

/// Prefix of every PCC rule and QoS data id an application session adds.
pub const AF_RULE_PREFIX: &str = "af-";

/// The SMF trigger the AF's rules arm: it reports whether their resources were allocated.
const SUCC_RES_ALLO: &str = "SUCC_RES_ALLO";

/// Counters for the metrics.
#[derive(Debug, Default)]
pub struct Stats {
    pub created: AtomicU64,
    pub modified: AtomicU64,
    pub deleted: AtomicU64,
    /// Ended by their SM association's end.
    pub terminated: AtomicU64,
    pub notify_sent: AtomicU64,
    pub notify_failed: AtomicU64,
    pub terminate_sent: AtomicU64,
    pub terminate_failed: AtomicU64,
}

pub fn not_found(id: &str) -> NfError {
    ProblemDetails::new(
        StatusCode::NOT_FOUND,
        APPLICATION_SESSION_CONTEXT_NOT_FOUND,
        format!("no application session {id}"),
    )
    .into()
}

/// The SM policy association serving the UE's address (and DNN, when given).
pub async fn bind(
    pcf: &Pcf,
    ipv4: Option<&str>,
    ipv6: Option<&str>,
    dnn: Option<&str>,
) -> Result<SmPolicy, NfError> {
    match pcf.store.sm_of_ue(ipv4, ipv6, dnn).await? {
        Some(sm) => Ok(sm),
        None => Err(ProblemDetails::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            PDU_SESSION_NOT_AVAILABLE,
            format!(
                "no PDU session of UE address {} {}",
                ipv4.or(ipv6).unwrap_or("-"),
                dnn.map(|d| format!("on DNN {d}")).unwrap_or_default()
            ),
        )
        .into()),
    }
}

/// The stored rules of an application session whose AppSessionContextReqData is `asc` (N5's
/// request, or the one an Rx AAR maps to): [`decide`] on `{"ascReqData": asc}` with its media
/// components, serialised.
pub async fn rules_of(
    pcf: &Pcf,
    app_id: &str,
    supi: &str,
    sm_context: &[u8],
    asc: &Value,
) -> Result<Vec<u8>, NfError> {
    let request = serde_json::json!({"ascReqData": asc});
    let media = asc.get("medComponents").and_then(Value::as_object);
    let r = decide(pcf, app_id, supi, sm_context, &request, media).await?;
    Ok(serde_json::to_vec(&r)?)
}

/// The PCC rules and QoS decisions of an application session: the project's PA rules
/// (`Service::Pa`, `request` is the AF's request, e.g. an AppSessionContext) give the QoS of
/// each media type in `decision.medTypeQos`; each media component becomes one PCC rule.
pub async fn decide(
    pcf: &Pcf,
    app_id: &str,
    supi: &str,
    sm_context: &[u8],
    request: &Value,
    media: Option<&Map<String, Value>>,
) -> Result<Value, NfError> {
    let kept = pcf.store.subscriber(supi).await?;
    let node = request.pointer("/ascReqData/afAppId").and_then(Value::as_str).unwrap_or_default();
    let input = Input {
        request,
        subscriber: &Value::Null,
        ssv: &kept.ssv,
        node,
        now: Utc::now(),
        spending: Input::empty(),
        usage: None,
    };
    let (outcome, project) = pcf.policy.evaluate(Service::Pa, input);
    pcf.per.decision(crate::per::Event {
        service: Service::Pa,
        supi,
        request,
        subscriber: None,
        ssv: &kept.ssv,
        spending: Input::empty(),
        data: crate::per::DataState::None,
        outcome: &outcome,
        project: &project,
    });
    if let Some(e) = &outcome.error {
        tracing::warn!(policy = %project.name, version = %project.version, error = %e,
            "PA policy script failed: the project's fallback decision answers");
    }
    let qos = outcome.decision.get("medTypeQos").cloned().unwrap_or(Value::Null);
    let ue = UeAddress::of_context(sm_context).unwrap_or_default();
    media_rules(app_id, media, &qos, &ue)
}

fn is_gbr(fiveqi: u64) -> bool {
    matches!(fiveqi, 1..=4 | 65..=67 | 71..=76 | 82..=90)
}

/// TS 29.513 §7.3: one PCC rule per media component, with the flows of its enabled
/// subcomponents; its QoS data has the media type's 5QI and ARP, MBR from the maximum
/// requested bandwidth (`marBwUl`/`marBwDl`) and, for a GBR 5QI, GBR from the minimum
/// requested (`mirBwUl`/`mirBwDl`), else the maximum.
pub fn media_rules(
    app_id: &str,
    media: Option<&Map<String, Value>>,
    med_type_qos: &Value,
    ue: &UeAddress,
) -> Result<Value, NfError> {
    let mut pcc = Map::new();
    let mut qos = Map::new();
    for (key, mc) in media.into_iter().flatten() {
        if matches!(mc.get("fStatus").and_then(Value::as_str), Some("REMOVED" | "DISABLED")) {
            continue;
        }
        let n = mc.get("medCompN").and_then(Value::as_u64).unwrap_or_default();
        let med_type = mc.get("medType").and_then(Value::as_str).unwrap_or("OTHER");
        let Some(q) = med_type_qos.get(med_type).filter(|q| q.get("5qi").is_some()) else {
            return Err(ProblemDetails::new(
                StatusCode::FORBIDDEN,
                REQUESTED_SERVICE_NOT_AUTHORIZED,
                format!("the policy gives no QoS to media type {med_type} (/medComponents/{key})"),
            )
            .into());
        };
        let mut flows = Vec::new();
        for sub in
            mc.get("medSubComps").and_then(Value::as_object).into_iter().flat_map(|m| m.values())
        {
            if matches!(sub.get("fStatus").and_then(Value::as_str), Some("REMOVED" | "DISABLED")) {
                continue;
            }
            for d in sub.get("fDescs").and_then(Value::as_array).into_iter().flatten() {
                let Some(d) = d.as_str() else { continue };
                let mut f = Map::new();
                f.insert("flowDescription".into(), Value::from(d));
                f.insert("flowDirection".into(), Value::from(direction(d, ue)));
                if let Some(t) = sub.get("tosTrCl") {
                    f.insert("tosTrafficClass".into(), t.clone());
                }
                flows.push(Value::Object(f));
            }
        }
        if flows.is_empty() {
            // A component without a flow to filter on makes no rule (nothing to bind QoS to).
            continue;
        }
        let id = format!("{AF_RULE_PREFIX}{app_id}-{n}");
        let fiveqi = q.get("5qi").and_then(Value::as_u64).unwrap_or(9);
        let mut arp =
            json!({"priorityLevel": 8, "preemptCap": "NOT_PREEMPT", "preemptVuln": "PREEMPTABLE"});
        if let Some(a) = q.get("arp").and_then(Value::as_object) {
            for (k, v) in a {
                arp[k] = v.clone();
            }
        }
        for k in ["preemptCap", "preemptVuln"] {
            if let Some(v) = mc.get(k) {
                arp[k] = v.clone();
            }
        }
        let mut qd = Map::new();
        qd.insert("qosId".into(), Value::from(id.clone()));
        qd.insert("5qi".into(), Value::from(fiveqi));
        qd.insert("arp".into(), arp);
        for (to, from) in [("maxbrUl", "marBwUl"), ("maxbrDl", "marBwDl")] {
            if let Some(v) = mc.get(from) {
                qd.insert(to.into(), v.clone());
            }
        }
        if is_gbr(fiveqi) {
            for (to, min, max) in [("gbrUl", "mirBwUl", "marBwUl"), ("gbrDl", "mirBwDl", "marBwDl")]
            {
                if let Some(v) = mc.get(min).or_else(|| mc.get(max)) {
                    qd.insert(to.into(), v.clone());
                }
            }
        }
        qos.insert(id.clone(), Value::Object(qd));
        pcc.insert(
            id.clone(),
            json!({
                "pccRuleId": id,
                "flowInfos": flows,
                // AF rules go before the project's (lower is first), in component order.
                "precedence": 100 + n.min(1000),
                "refQosData": [id],
            }),
        );
    }
    Ok(json!({"pccRules": pcc, "qosDecs": qos}))
}

/// TS 29.512 FlowDirection of an IPFilterRule as the AF writes it (`permit out <proto> from
/// <src> [ports] to <dst> [ports]`): towards the UE's address is downlink, from it uplink.
fn direction(desc: &str, ue: &UeAddress) -> &'static str {
    let mut words = desc.split_whitespace();
    let src = words.by_ref().skip_while(|w| *w != "from").nth(1);
    let dst = words.skip_while(|w| *w != "to").nth(1);
    let is_ue = |w: Option<&str>| {
        let Some(a) = w.map(|w| w.split('/').next().unwrap_or(w)) else { return false };
        UeAddress::of_request(Some(a), Some(a), None).is_some_and(|r| r.matches(ue))
    };
    if is_ue(dst) {
        "DOWNLINK"
    } else if is_ue(src) {
        "UPLINK"
    } else {
        "UNSPECIFIED"
    }
}

/// Takes `rules` (`{"pccRules", "qosDecs"}`) out of `decision` and puts `add` in; arms
/// SUCC_RES_ALLO while the decision holds AF rules, and asks for the report of the rules
/// added or changed (`lastReqRuleData`, a TS 29.512 RequestedRuleData).
fn rewrite(decision: &mut Value, remove: Option<&Value>, add: Option<&Value>) {
    let Some(d) = decision.as_object_mut() else { return };
    let mut changed = Vec::new();
    for member in ["pccRules", "qosDecs"] {
        let mut m = match d.remove(member) {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        };
        for id in remove
            .and_then(|r| r.get(member))
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|r| r.keys())
        {
            m.remove(id);
        }
        for (id, v) in
            add.and_then(|r| r.get(member)).and_then(Value::as_object).into_iter().flatten()
        {
            let old = remove.and_then(|r| r.get(member)).and_then(|r| r.get(id));
            if member == "pccRules" && old != Some(v) {
                changed.push(Value::from(id.clone()));
            }
            m.insert(id.clone(), v.clone());
        }
        if !m.is_empty() {
            d.insert(member.into(), Value::Object(m));
        }
    }
    d.remove("lastReqRuleData");
    if !changed.is_empty() {
        d.insert(
            "lastReqRuleData".into(),
            json!([{"refPccRuleIds": changed, "reqData": [SUCC_RES_ALLO]}]),
        );
    }
    arm(d);
}

fn has_af_rules(d: &Map<String, Value>) -> bool {
    d.get("pccRules")
        .and_then(Value::as_object)
        .is_some_and(|m| m.keys().any(|k| k.starts_with(AF_RULE_PREFIX)))
}

/// SUCC_RES_ALLO armed exactly while AF rules are in force.
fn arm(d: &mut Map<String, Value>) {
    let want = has_af_rules(d);
    let triggers = d.get_mut("policyCtrlReqTriggers");
    match (triggers, want) {
        (Some(Value::Array(t)), true) => {
            if !t.iter().any(|v| v == SUCC_RES_ALLO) {
                t.push(Value::from(SUCC_RES_ALLO));
            }
        }
        (Some(Value::Array(t)), false) => {
            t.retain(|v| v != SUCC_RES_ALLO);
            if t.is_empty() {
                d.remove("policyCtrlReqTriggers");
            }
        }
        (_, true) => {
            d.insert("policyCtrlReqTriggers".into(), json!([SUCC_RES_ALLO]));
        }
        (_, false) => {}
    }
}

/// Whether a stored SM decision may hold AF rules, from its bytes: false only when no key
/// starts with the AF rules' prefix (`"af-`), so a decision without them is not parsed to
/// find out.
pub fn may_hold_af_rules(decision: &[u8]) -> bool {
    let prefix = AF_RULE_PREFIX.as_bytes();
    decision
        .iter()
        .enumerate()
        .filter(|&(_, &b)| b == b'"')
        .any(|(i, _)| decision[i + 1..].starts_with(prefix))
}

/// Puts the AF rules of the decision in force (`old`) into a new SM decision: called by every
/// SM decision of an association, so its application sessions' rules stay until they end.
/// Costs a map lookup when the association has none.
pub fn keep_af_rules(old: &Value, new: &mut Value) {
    let Some(o) = old.as_object() else { return };
    if !has_af_rules(o) {
        return;
    }
    let Some(n) = new.as_object_mut() else { return };
    for member in ["pccRules", "qosDecs"] {
        let Some(om) = o.get(member).and_then(Value::as_object) else { continue };
        let nm = n.entry(member).or_insert_with(|| Value::Object(Map::new()));
        let Some(nm) = nm.as_object_mut() else { continue };
        for (id, v) in om {
            if id.starts_with(AF_RULE_PREFIX) {
                nm.insert(id.clone(), v.clone());
            }
        }
    }
    arm(n);
}

/// What to do to an application session.
pub enum Change {
    Create(AppSession),
    /// Its new context and rules.
    Update(AppSession),
    Delete(String),
}

/// Carries out `change` on the application session and its SM association's decision in one
/// commit, holding the subscriber; then tells the SMF what changed in the decision
/// (UpdateNotify). Returns the application session as stored (or as it was, for a delete).
pub async fn commit(
    pcf: &Pcf,
    sm_policy_id: &str,
    supi: &str,
    change: Change,
) -> Result<AppSession, NfError> {
    let notify = {
        let _held = pcf.hold(supi).await;
        let id = match &change {
            Change::Create(a) | Change::Update(a) => a.id.clone(),
            Change::Delete(id) => id.clone(),
        };
        let Some(sm) = pcf.store.get_sm(sm_policy_id).await? else {
            return Err(match change {
                Change::Create(_) => ProblemDetails::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    PDU_SESSION_NOT_AVAILABLE,
                    "the PDU session ended",
                )
                .into(),
                _ => not_found(&id),
            });
        };
        let before = match &change {
            Change::Create(_) => None,
            _ => match pcf.store.get_app(&id).await? {
                Some(a) => Some(a),
                None => return Err(not_found(&id)),
            },
        };
        let old_rules: Option<Value> =
            before.as_ref().map(|a| serde_json::from_slice(&a.rules)).transpose()?;
        let new_rules: Option<Value> = match &change {
            Change::Create(a) | Change::Update(a) => Some(serde_json::from_slice(&a.rules)?),
            Change::Delete(_) => None,
        };
        let old: Value = serde_json::from_slice(&sm.decision)?;
        let mut new = old.clone();
        rewrite(&mut new, old_rules.as_ref(), new_rules.as_ref());
        let delta = models::delta(&old, &new);
        let updated = SmPolicy {
            decision: serde_json::to_vec(&new)?,
            updated_ms: Utc::now().timestamp_millis(),
            ..sm.clone()
        };
        let done = match change {
            Change::Create(a) => {
                if !pcf.store.create_app(a.clone(), updated).await? {
                    return Err(ProblemDetails::new(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        PDU_SESSION_NOT_AVAILABLE,
                        "the PDU session ended",
                    )
                    .into());
                }
                pcf.apps.created.fetch_add(1, Ordering::Relaxed);
                a
            }
            Change::Update(a) => {
                if !pcf.store.update_app(a.clone(), updated).await? {
                    return Err(not_found(&id));
                }
                pcf.apps.modified.fetch_add(1, Ordering::Relaxed);
                a
            }
            Change::Delete(_) => match pcf.store.delete_app(&id, Some(updated)).await? {
                Some(a) => {
                    pcf.apps.deleted.fetch_add(1, Ordering::Relaxed);
                    a
                }
                None => return Err(not_found(&id)),
            },
        };
        // A Gx session (converged PCRF) hears of the rules in an RAR, an N7 association's SMF
        // in an UpdateNotify.
        let push = if crate::gx::is_gx(&sm.id) {
            let context: Value = serde_json::from_slice(&sm.context)?;
            pcf.gx
                .get()
                .and_then(|node| crate::gx::ccr::rar(node, &sm.id, &context, &old, &new))
                .map(Push::Gx)
        } else {
            sm_notification(pcf, &sm, delta)?.map(Push::Smf)
        };
        (done, push)
    };
    let (done, push) = notify;
    // Sent once the subscriber is let go, as a policy data change's UpdateNotify is; awaited
    // (not the bearer, only the peer's answer) so one session's pushes reach its SMF or PCEF
    // in the order they were committed.
    match push {
        Some(Push::Smf((uri, body))) => pcf.notifier.update_notify(&uri, &body).await,
        Some(Push::Gx(rar)) => crate::gx::ccr::send_rars(pcf, vec![rar]).await,
        None => {}
    }
    Ok(done)
}

/// How a committed change reaches the bound session's gateway.
enum Push {
    Smf((String, Value)),
    Gx(diameter::Message),
}

/// The UpdateNotify for `delta` of `sm`'s decision, if anything changed and the SMF gave a URI.
fn sm_notification(
    pcf: &Pcf,
    sm: &SmPolicy,
    delta: Value,
) -> Result<Option<(String, Value)>, NfError> {
    if delta.as_object().is_none_or(|d| d.is_empty()) {
        return Ok(None);
    }
    let context: Value = serde_json::from_slice(&sm.context)?;
    let Some(smf) = context.get("notificationUri").and_then(Value::as_str) else {
        return Ok(None);
    };
    let resource = format!("{}/npcf-smpolicycontrol/v1/sm-policies/{}", pcf.api_root(None), sm.id);
    Ok(Some((
        format!("{}/update", smf.trim_end_matches('/')),
        json!({"resourceUri": resource, "smPolicyDecision": delta}),
    )))
}

/// The URI of an application session's events subscription (`evSubsUri`).
pub fn events_uri(pcf: &Pcf, id: &str) -> String {
    format!(
        "{}/npcf-policyauthorization/v1/app-sessions/{id}/events-subscription",
        pcf.api_root(None)
    )
}

/// The N5 context of an application session, as stored.
pub fn context_of(app: &AppSession) -> Value {
    serde_json::from_slice(&app.context).unwrap_or(Value::Null)
}

/// Whether an SMF's update reports something an application session may want to hear.
fn interesting(change: &Value) -> bool {
    change.get("ruleReports").is_some()
        || change.get("repPolicyCtrlReqTriggers").and_then(Value::as_array).is_some_and(|t| {
            t.iter().any(|v| {
                matches!(
                    v.as_str(),
                    Some("SUCC_RES_ALLO" | "RES_RELEASE" | "AC_TY_CH" | "RAT_TY_CH")
                )
            })
        })
}

/// An SMF's update of `sm_policy_id` (`change`, its SmPolicyUpdateContextData; `context`, the
/// association's context after it): the events it means for each bound application session
/// that subscribed to them go to its AF (`POST {notifUri}/notify`, EventsNotification), in
/// the background so the SMF's answer does not wait for an AF.
pub async fn sm_updated(pcf: &Arc<Pcf>, sm_policy_id: &str, change: &Value, context: &Value) {
    if !interesting(change) {
        return;
    }
    let apps = match pcf.store.apps_of(sm_policy_id).await {
        Ok(a) if a.is_empty() => return,
        Ok(a) => a,
        Err(e) => {
            tracing::warn!(sm_policy = %sm_policy_id, error = %e, "application sessions not read");
            return;
        }
    };
    let pcf = pcf.clone();
    let change = change.clone();
    let access = (context.get("accessType").cloned(), context.get("ratType").cloned());
    tokio::spawn(async move {
        for app in apps {
            // An Rx session's AF hears of it in an Rx RAR (its Specific-Actions).
            if crate::rx::is_rx(&app.id) {
                crate::rx::bearer_events(&pcf, &app, &change).await;
                continue;
            }
            if let Some((uri, body)) = events_for(&pcf, &app, &change, &access) {
                notify_af(&pcf, &uri, &body, false).await;
            }
        }
    });
}

/// The EventsNotification an SMF's update means for `app`, and where it goes.
fn events_for(
    pcf: &Pcf,
    app: &AppSession,
    change: &Value,
    (access_type, rat_type): &(Option<Value>, Option<Value>),
) -> Option<(String, Value)> {
    let ctx = context_of(app);
    let subsc = ctx.get("evSubsc")?;
    let wants = |e: &str| {
        subsc
            .get("events")
            .and_then(Value::as_array)
            .is_some_and(|l| l.iter().any(|s| s.get("event").and_then(Value::as_str) == Some(e)))
    };
    let prefix = format!("{AF_RULE_PREFIX}{}-", app.id);
    let mut succ = Vec::new();
    let mut failed = Vec::new();
    for report in change.get("ruleReports").and_then(Value::as_array).into_iter().flatten() {
        let comps: Vec<Value> = report
            .get("pccRuleIds")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|r| r.as_str()?.strip_prefix(prefix.as_str())?.parse::<u64>().ok())
            .map(|n| json!({"medCompN": n}))
            .collect();
        if comps.is_empty() {
            continue;
        }
        match report.get("ruleStatus").and_then(Value::as_str) {
            Some("ACTIVE") => succ.extend(comps),
            _ => failed.extend(comps),
        }
    }
    let triggers: Vec<&str> = change
        .get("repPolicyCtrlReqTriggers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut notif = Map::new();
    let mut events = Vec::new();
    if !succ.is_empty() && wants("SUCCESSFUL_RESOURCES_ALLOCATION") {
        events.push(json!({"event": "SUCCESSFUL_RESOURCES_ALLOCATION", "flows": succ}));
        notif.insert(
            "succResourcAllocReports".into(),
            json!([{"mcResourcStatus": "ACTIVE", "flows": succ}]),
        );
    }
    if !failed.is_empty() && wants("FAILED_RESOURCES_ALLOCATION") {
        events.push(json!({"event": "FAILED_RESOURCES_ALLOCATION", "flows": failed}));
        notif.insert(
            "failedResourcAllocReports".into(),
            json!([{"mcResourcStatus": "INACTIVE", "flows": failed}]),
        );
    }
    // ACCESS_TYPE_CHANGE carries the access type and the RAT type (TS 29.514 EventsNotification).
    if triggers.iter().any(|t| *t == "AC_TY_CH" || *t == "RAT_TY_CH") && wants("ACCESS_TYPE_CHANGE")
    {
        events.push(json!({"event": "ACCESS_TYPE_CHANGE"}));
        if let Some(a) = change.get("accessType").or(access_type.as_ref()) {
            notif.insert("accessType".into(), a.clone());
        }
        if let Some(r) = change.get("ratType").or(rat_type.as_ref()) {
            notif.insert("ratType".into(), r.clone());
        }
    }
    if events.is_empty() {
        return None;
    }
    notif.insert("evSubsUri".into(), Value::from(events_uri(pcf, &app.id)));
    notif.insert("evNotifs".into(), Value::Array(events));
    let base = subsc
        .get("notifUri")
        .or_else(|| ctx.get("notifUri"))
        .and_then(Value::as_str)?
        .trim_end_matches('/');
    Some((format!("{base}/notify"), Value::Object(notif)))
}

async fn notify_af(pcf: &Pcf, uri: &str, body: &Value, terminate: bool) {
    let (ok, failed) = if terminate {
        (&pcf.apps.terminate_sent, &pcf.apps.terminate_failed)
    } else {
        (&pcf.apps.notify_sent, &pcf.apps.notify_failed)
    };
    match pcf.notifier.post(uri, body).await {
        Ok(()) => {
            ok.fetch_add(1, Ordering::Relaxed);
        }
        Err(why) => {
            tracing::warn!(%uri, %why, "notification to the AF not delivered");
            failed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The application sessions bound to an SM association (read before it is deleted: the
/// delete takes them in its commit).
pub async fn bound(pcf: &Pcf, sm_policy_id: &str) -> Vec<AppSession> {
    pcf.store.apps_of(sm_policy_id).await.unwrap_or_default()
}

/// The SM association of `apps` ended (and they with it, in its commit): each AF gets
/// `POST {notifUri}/terminate` with a TerminationInfo (TS 29.514 §4.2.5.3), in the background.
pub fn sm_deleted(pcf: &Arc<Pcf>, apps: Vec<AppSession>) {
    if apps.is_empty() {
        return;
    }
    let pcf = pcf.clone();
    tokio::spawn(async move {
        for app in apps {
            pcf.apps.terminated.fetch_add(1, Ordering::Relaxed);
            // An Rx session's AF gets an ASR (TS 29.214 §4.4.6.2) and ends it with an STR.
            if crate::rx::is_rx(&app.id) {
                crate::rx::abort(&pcf, &app).await;
                continue;
            }
            let ctx = context_of(&app);
            let Some(base) = ctx.get("notifUri").and_then(Value::as_str) else { continue };
            let res = format!(
                "{}/npcf-policyauthorization/v1/app-sessions/{}",
                pcf.api_root(None),
                app.id
            );
            let body = json!({"termCause": "PDU_SESSION_TERMINATION", "resUri": res});
            let uri = format!("{}/terminate", base.trim_end_matches('/'));
            notify_af(&pcf, &uri, &body, true).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_without_af_rules_is_told_from_its_bytes() {
        let with = json!({"pccRules": {"af-app1-0": {"pccRuleId": "af-app1-0"}, "internet": {}}});
        let without = json!({"pccRules": {"internet": {"pccRuleId": "internet"}}, "x": "af-"});
        assert!(may_hold_af_rules(&serde_json::to_vec(&with).unwrap()));
        assert!(has_af_rules(with.as_object().unwrap()));
        // A value that merely starts with the prefix may answer true (then the decision is
        // parsed); a decision whose keys do not, never answers false wrongly.
        assert!(!has_af_rules(without.as_object().unwrap()));
        assert!(!may_hold_af_rules(br#"{"pccRules":{"internet":{}}}"#));
        assert!(!may_hold_af_rules(b""));
    }

    fn ue() -> UeAddress {
        UeAddress::of_context(br#"{"ipv4Address":"10.45.0.7","dnn":"ims"}"#).unwrap()
    }

    #[test]
    fn audio_and_video_make_gbr_rules_with_their_flows_directed() {
        let media = json!({
            "1": {"medCompN": 1, "medType": "AUDIO", "marBwUl": "64 Kbps", "marBwDl": "64 Kbps",
                  "medSubComps": {"1": {"fNum": 1, "fDescs": [
                      "permit out 17 from 198.51.100.1 30000 to 10.45.0.7 40000",
                      "permit out 17 from 10.45.0.7 40000 to 198.51.100.1 30000"]}}},
            "2": {"medCompN": 2, "medType": "VIDEO", "marBwUl": "2 Mbps", "marBwDl": "2 Mbps",
                  "mirBwDl": "1 Mbps",
                  "medSubComps": {"1": {"fNum": 1, "fDescs": ["permit out 17 from any to 10.45.0.7 40002"]},
                                  "2": {"fNum": 2, "fStatus": "DISABLED", "fDescs": ["permit out 17 from any to 10.45.0.7 40003"]}}},
            "3": {"medCompN": 3, "medType": "DATA", "fStatus": "REMOVED"}
        });
        let qos = json!({"AUDIO": {"5qi": 1, "arp": {"priorityLevel": 2}}, "VIDEO": {"5qi": 2}});
        let r = media_rules("s", media.as_object(), &qos, &ue()).unwrap();
        let a = &r["pccRules"]["af-s-1"];
        assert_eq!(a["flowInfos"][0]["flowDirection"], "DOWNLINK");
        assert_eq!(a["flowInfos"][1]["flowDirection"], "UPLINK");
        assert_eq!(a["refQosData"], json!(["af-s-1"]));
        let q = &r["qosDecs"]["af-s-1"];
        assert_eq!((q["5qi"].clone(), q["gbrDl"].clone()), (json!(1), json!("64 Kbps")));
        assert_eq!(q["arp"]["priorityLevel"], 2);
        assert_eq!(r["qosDecs"]["af-s-2"]["gbrDl"], "1 Mbps");
        assert_eq!(r["qosDecs"]["af-s-2"]["gbrUl"], "2 Mbps");
        assert_eq!(r["pccRules"]["af-s-2"]["flowInfos"].as_array().unwrap().len(), 1);
        assert!(r["pccRules"].get("af-s-3").is_none());
        // A media type the project gives no QoS is refused.
        let e = media_rules(
            "s",
            json!({"1": {"medCompN": 1, "medType": "TEXT",
            "medSubComps": {"1": {"fNum": 1, "fDescs": ["permit out 6 from any to any"]}}}})
            .as_object(),
            &qos,
            &ue(),
        )
        .unwrap_err();
        assert_eq!(
            ProblemDetails::from(e).cause.as_deref(),
            Some(REQUESTED_SERVICE_NOT_AUTHORIZED)
        );
    }

    #[test]
    fn af_rules_go_in_stay_through_new_decisions_and_go_out() {
        let rules = json!({"pccRules": {"af-s-1": {"pccRuleId": "af-s-1"}}, "qosDecs": {"af-s-1": {"qosId": "af-s-1"}}});
        let mut d = json!({"sessRules": {"s1": {}}, "policyCtrlReqTriggers": ["PLMN_CH"]});
        rewrite(&mut d, None, Some(&rules));
        assert_eq!(d["policyCtrlReqTriggers"], json!(["PLMN_CH", "SUCC_RES_ALLO"]));
        assert_eq!(d["lastReqRuleData"][0]["refPccRuleIds"], json!(["af-s-1"]));
        let mut next = json!({"sessRules": {"s1": {}}, "policyCtrlReqTriggers": ["PLMN_CH"]});
        keep_af_rules(&d, &mut next);
        assert_eq!(next["pccRules"], rules["pccRules"]);
        assert_eq!(next["qosDecs"], rules["qosDecs"]);
        rewrite(&mut next, Some(&rules), None);
        assert_eq!(next, json!({"sessRules": {"s1": {}}, "policyCtrlReqTriggers": ["PLMN_CH"]}));
    }
}
