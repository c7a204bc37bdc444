//! Npcf_SMPolicyControl (TS 29.512 §4.2, resources §5.3): Create (POST sm-policies), Get (GET
//! sm-policies/{smPolicyId}), Update (POST sm-policies/{smPolicyId}/update) and Delete (POST
//! sm-policies/{smPolicyId}/delete).
//!
//! Every decision comes from the policy project in force (`policy::Deployed`): the request the
//! engine reads is the SmPolicyContextData (with an update's attributes over it), its state
//! variables are the subscriber's SSV, the node is the SMF. A script that fails answers the
//! project's fallback decision, counted; the association is kept either way.

use std::sync::Arc;

use chrono::Utc;
use http::{header, HeaderValue, StatusCode};
use nf::{Answer, NfError};
use policy::{Outcome, Service};
use sbi::{empty_response, json_response, ProblemDetails, Response, SbiRequest};
use serde_json::{json, Map, Value};

use crate::context::Pcf;
use crate::decide::{decide, decide_create, decide_reported, Decided};
use crate::models;
use crate::store::{new_policy_id, SmPolicy};

/// Features of TS 29.512 §5.8 this PCF supports: none of the optional ones yet, so the
/// negotiated list is empty ("0") whatever the SMF offers.
const SUPPORTED_FEATURES: &str = "0";

fn location(pcf: &Pcf, req: &SbiRequest, id: &str) -> String {
    format!("{}/npcf-smpolicycontrol/v1/sm-policies/{id}", pcf.api_root(Some(req)))
}

fn not_found(id: &str) -> NfError {
    ProblemDetails::not_found(format!("no SM policy association {id}")).into()
}

/// The SmPolicyDecision of an outcome: the engine's decision, with the features negotiated.
fn decision(outcome: Outcome, context: &Value) -> Value {
    let mut d = match outcome.decision {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    if context.get("suppFeat").is_some() {
        d.insert("suppFeat".into(), Value::from(SUPPORTED_FEATURES));
    }
    Value::Object(d)
}

fn json_bytes(status: StatusCode, bytes: Vec<u8>) -> Response {
    let mut resp = http::Response::new(sbi::Body::from(bytes));
    *resp.status_mut() = status;
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(sbi::body::JSON));
    resp
}

/// Npcf_SMPolicyControl_Create: 201 with the SmPolicyDecision and the association's URI in
/// Location.
pub async fn create(pcf: Arc<Pcf>, req: SbiRequest) -> Answer {
    let context: Value = req.json()?;
    models::check_context(&context)?;
    let supi = context["supi"].as_str().unwrap_or_default().to_string();
    let _held = pcf.hold(&supi).await;
    let sy = pcf.sy.creating(&pcf, &supi);
    // The binding depends on the context alone: registered while the UDR and the CHF are asked,
    // so their answers and the BSF's wake the PCF once, not in two rounds (a round of waiting
    // costs an NF ~60 µs of parking and waking on this machine whatever it carries; the sbi
    // crate's `client_cost` bench). A create that is then refused removes it again.
    let (decided, binding) =
        tokio::join!(decide_create(&pcf, &context, &supi), pcf.bindings.register(&context));
    let Decided { mut outcome, project, subscribe, data, subscribed, chf, ldap } = match decided {
        Ok(d) => d,
        Err(e) => {
            if let Some(uri) = &binding {
                pcf.bindings.deregister(uri).await;
            }
            return Err(e);
        }
    };
    let ssv_updates = std::mem::take(&mut outcome.ssv_updates);
    let decision = decision(outcome, &context);
    let body = serde_json::to_vec(&decision)?;
    let id = new_policy_id();
    let udr_subscription = if subscribe {
        let callback = format!("{}{}", pcf.api_root(None), crate::nudr_notify::CALLBACK_PATH);
        pcf.policy_data.subscribe(&supi, &callback).await
    } else {
        None
    };
    tracing::debug!(sm_policy = %id, %supi, policy_version = %project.version, "SM policy created");
    let keep = subscribed || udr_subscription.is_some();
    let stored = SmPolicy {
        id: id.clone(),
        supi: supi.clone(),
        context: serde_json::to_vec(&context)?,
        decision: body.clone(),
        policy_version: project.version.clone(),
        updated_ms: Utc::now().timestamp_millis(),
        binding,
    };
    pcf.chf.create_sm(&*pcf.store, stored, ssv_updates, udr_subscription, chf).await?;
    sy.done();
    // The subscription keeps the data true from now on: the session's updates read no UDR.
    if let (Some(d), true) = (data, keep) {
        pcf.policy_data.hold_sm(&supi, d);
    }
    if let Some(p) = ldap {
        pcf.ldap.keep(&supi, &id, p);
    }
    let mut resp = json_bytes(StatusCode::CREATED, body);
    if let Ok(v) = HeaderValue::from_str(&location(&pcf, &req, &id)) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    Ok(resp)
}

/// Npcf_SMPolicyControl_Get (TS 29.512 §4.2.5): the SmPolicyControl, context and decision.
pub async fn get(pcf: Arc<Pcf>, req: SbiRequest) -> Answer {
    let id = req.param("smPolicyId");
    let Some(p) = pcf.store.get_sm(id).await? else { return Err(not_found(id)) };
    let context: Value = serde_json::from_slice(&p.context)?;
    let policy: Value = serde_json::from_slice(&p.decision)?;
    Ok(json_response(StatusCode::OK, &json!({"context": context, "policy": policy}))?)
}

/// Npcf_SMPolicyControl_Update (TS 29.512 §4.2.4): the SMF reports triggers and what changed;
/// the PCF decides again on the context with the change in it and answers 200 with what
/// differs from the decision in force.
pub async fn update(pcf: Arc<Pcf>, req: SbiRequest) -> Answer {
    let change: Value = req.json()?;
    models::check_update(&change)?;
    let reports = crate::usage::n7_reports(&pcf, &change)?;
    let id = req.param("smPolicyId").to_string();
    // The subscriber is known only from the association: read it, hold the subscriber, and
    // read again (a request that held it first may have changed or deleted the association).
    let Some(supi) = pcf.store.supi_of_sm(&id).await? else { return Err(not_found(&id)) };
    let _held = pcf.hold(&supi).await;
    let Some((stored, kept)) = pcf.store.get_sm_with_subscriber(&id).await? else {
        return Err(not_found(&id));
    };
    let mut context: Value = serde_json::from_slice(&stored.context)?;
    let before = crate::nbsf_management::Bindings::addresses(&context);
    let context_changed = models::merge_update(&mut context, &change);
    // The engine reads the context with every attribute of the update over it (the reported
    // triggers, usage reports, ...); the stored context keeps what is the session's.
    let displaced = models::overlay(&mut context, &change);
    // Reported usage is added to the subscriber's totals, which this decision reads.
    let pending = pcf.usage.pending(&stored.supi, &stored.decision, reports);
    let usage = match &pending {
        Some(p) => Some(p.view.clone()),
        None => pcf.usage.view(&stored.supi),
    };
    let decided =
        decide_reported(&pcf, Service::Sm, &context, &stored.supi, Some(kept), usage).await;
    models::restore(&mut context, displaced);
    let Decided { mut outcome, project, data, subscribed, ldap, .. } = decided?;
    if let (Some(d), true) = (data, subscribed) {
        pcf.policy_data.cache_if_absent(&stored.supi, d);
    }
    let ssv_updates = std::mem::take(&mut outcome.ssv_updates);
    let mut new = decision(outcome, &context);
    // The decision in force is parsed only when needed: it holds AF rules to keep, or the new
    // decision differs from it (a serialized decision is canonical: its keys are sorted).
    let mut old: Option<Value> = None;
    if crate::app_session::may_hold_af_rules(&stored.decision) {
        let o = old.insert(serde_json::from_slice(&stored.decision)?);
        crate::app_session::keep_af_rules(o, &mut new);
    }
    let new_bytes = serde_json::to_vec(&new)?;
    let decision_changed = new_bytes != stored.decision;
    let mut crossed = false;
    let mut delta = match old {
        _ if !decision_changed => Value::Object(Map::new()),
        Some(o) => {
            crossed = crate::usage::crossed(&o, &new);
            models::delta(&o, &new)
        }
        None => {
            let o = serde_json::from_slice(&stored.decision)?;
            crossed = crate::usage::crossed(&o, &new);
            models::delta(&o, &new)
        }
    };
    if let Some(p) = &pending {
        crate::usage::rearm_n7(&mut delta, &new, &p.keys);
    }
    let binding = pcf.bindings.rebind(before, &context, stored.binding.clone()).await;
    let now = Utc::now().timestamp_millis();
    if !context_changed
        && !decision_changed
        && ssv_updates.is_empty()
        && binding == stored.binding
        && project.version == stored.policy_version
        && pending.is_none()
    {
        // Nothing the store holds changed (a trigger reported with no new attribute): nothing
        // to commit; only the time of this update is kept.
        if !pcf.store.touch_sm(&id, now).await? {
            return Err(not_found(&id));
        }
        if let Some(p) = ldap {
            pcf.ldap.keep(&stored.supi, &id, p);
        }
        crate::app_session::sm_updated(&pcf, &id, &change, &context).await;
        return Ok(json_response(StatusCode::OK, &delta)?);
    }
    // Kept once the update is committed (the SUPI moves into the stored association).
    let ldap = ldap.map(|p| (stored.supi.clone(), p));
    let updated = SmPolicy {
        id: id.clone(),
        supi: stored.supi,
        context: if context_changed { serde_json::to_vec(&context)? } else { stored.context },
        decision: new_bytes,
        policy_version: project.version.clone(),
        updated_ms: now,
        binding,
    };
    let supi = updated.supi.clone();
    let written = match &pending {
        Some(p) => pcf.store.update_sm_with_usage(updated, ssv_updates, p.rows.clone()).await?,
        None => pcf.store.update_sm(updated, ssv_updates).await?,
    };
    if !written {
        return Err(not_found(&id));
    }
    if let Some(p) = &pending {
        pcf.usage.committed(p);
        if crossed {
            crate::usage::redecide_subscriber(&pcf, &supi);
        }
    }
    if let Some((supi, p)) = ldap {
        pcf.ldap.keep(&supi, &id, p);
    }
    tracing::debug!(sm_policy = %id, policy_version = %project.version, "SM policy updated");
    crate::app_session::sm_updated(&pcf, &id, &change, &context).await;
    Ok(json_response(StatusCode::OK, &delta)?)
}

/// Npcf_SMPolicyControl_Delete (TS 29.512 §4.2.6): 204; the body (SmPolicyDeleteData: usage
/// reports, release cause) is checked as JSON when present. It holds the subscriber like a
/// create or update: the subscriber's last delete ends its UDR subscription, which a create
/// deciding at the same time must not count on.
pub async fn delete(pcf: Arc<Pcf>, req: SbiRequest) -> Answer {
    let mut reports = Vec::new();
    if !req.body.is_empty() {
        let body: Value = req.json()?;
        if !body.is_object() {
            return Err(ProblemDetails::bad_request(
                sbi::problem::cause::INVALID_MSG_FORMAT,
                "the body must be an SmPolicyDeleteData object",
            )
            .into());
        }
        reports = crate::usage::n7_reports(&pcf, &body)?;
    }
    let id = req.param("smPolicyId");
    if !remove_reporting(&pcf, id, reports).await? {
        return Err(not_found(id));
    }
    tracing::debug!(sm_policy = %id, "SM policy deleted");
    Ok(empty_response(StatusCode::NO_CONTENT))
}

/// Removes an SM policy association, holding its subscriber, and ends what it holds at other
/// NFs (its BSF binding; the UDR subscription with the subscriber's last association); false
/// when there was none. The delete's work, and the session audit's for a session its SMF no
/// longer knows.
pub(crate) async fn remove(pcf: &Arc<Pcf>, id: &str) -> Result<bool, NfError> {
    remove_reporting(pcf, id, Vec::new()).await
}

/// [`remove`] with the session's final usage reports (N7 delete, Gx CCR-T), committed with
/// the delete; the subscriber's other sessions are then decided again on the new totals.
pub(crate) async fn remove_reporting(
    pcf: &Arc<Pcf>,
    id: &str,
    reports: Vec<crate::usage::Report>,
) -> Result<bool, NfError> {
    let Some(supi) = pcf.store.supi_of_sm(id).await? else { return Ok(false) };
    let held = pcf.hold(&supi).await;
    // Read before: the delete takes them in its commit.
    let apps = crate::app_session::bound(pcf, id).await;
    let tdf = crate::sd::before_delete(pcf, id).await?;
    let pending = match reports.is_empty() {
        true => None,
        false => match pcf.store.get_sm(id).await? {
            Some(p) => pcf.usage.pending(&supi, &p.decision, reports),
            None => None,
        },
    };
    let deleted = match &pending {
        Some(p) => pcf.store.delete_sm_with_usage(id, p.rows.clone()).await?,
        None => pcf.store.delete_sm(id).await?,
    };
    let Some(deleted) = deleted else { return Ok(false) };
    if let Some(p) = &pending {
        pcf.usage.committed(p);
        if !pcf.store.sm_of(&supi).await?.is_empty() {
            crate::usage::redecide_subscriber(pcf, &supi);
        }
    }
    crate::app_session::sm_deleted(pcf, apps);
    if let Some(c) = &tdf {
        pcf.sd.release(c);
    }
    pcf.policy_data.release_sm(&deleted.supi, deleted.udr_subscription.is_some());
    pcf.ldap.release(&deleted.supi, id);
    let sy_ended = pcf.sy.after_delete(pcf, &deleted.supi).await;
    drop(held);
    let unbind = async {
        if let Some(uri) = &deleted.binding {
            pcf.bindings.deregister(uri).await;
        }
    };
    let unsubscribe = async {
        if let Some(uri) = &deleted.udr_subscription {
            pcf.policy_data.unsubscribe(uri).await;
        }
    };
    let unsubscribe_chf = pcf.chf.deleted(&deleted.supi, deleted.chf_subscription.as_deref());
    tokio::join!(unbind, unsubscribe, unsubscribe_chf, pcf.sy.terminate(sy_ended));
    Ok(true)
}

/// The URI of an SM policy association, as `Location` gave it.
pub(crate) fn resource_uri(pcf: &Pcf, id: &str) -> String {
    format!("{}/npcf-smpolicycontrol/v1/sm-policies/{id}", pcf.api_root(None))
}

/// Decides again every SM policy association of `supi` (its policy data changed) and tells
/// the SMF of each whose decision changed (TS 29.512 §4.2.3.2, UpdateNotify: POST
/// `{notificationUri}/update` with an SmPolicyNotification holding what changed).
pub async fn redecide(pcf: &Arc<Pcf>, supi: &str, data: Option<Value>) {
    let held = pcf.hold(supi).await;
    // Under the hold: a create of the subscriber that read the data before the change has
    // cached it by now, and this replaces it.
    pcf.policy_data.changed_sm(supi, data);
    redecide_held(pcf, supi, held).await
}

/// [`redecide`] for a subscriber its caller holds already (having changed what decisions read
/// of it: its spending limit statuses); the hold is let go before the SMFs are told.
pub(crate) async fn redecide_held(pcf: &Arc<Pcf>, supi: &str, held: crate::collision::Held<'_>) {
    let mut notify = Vec::new();
    let mut rars = Vec::new();
    {
        let _held = held;
        let associations = match pcf.store.sm_of(supi).await {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(%supi, error = %e, "policy data changed, associations not read");
                return;
            }
        };
        for stored in associations {
            // A Gx session (converged PCRF) is told with an RAR instead (crate::gx).
            if crate::gx::is_gx(&stored.id) {
                match crate::gx::ccr::redecide_one(pcf, stored).await {
                    Ok(r) => rars.extend(r),
                    Err(e) => {
                        tracing::warn!(%supi, error = %e, "policy data changed, Gx session not decided again")
                    }
                }
                continue;
            }
            match redecide_one(pcf, stored).await {
                Ok(Some(n)) => notify.push(n),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(%supi, error = %e, "policy data changed, not decided again")
                }
            }
        }
    }
    // Sent once the subscriber is let go: an SMF's answer holds up none of its requests.
    for (uri, body) in notify {
        pcf.notifier.update_notify(&uri, &body).await;
    }
    crate::gx::ccr::send_rars(pcf, rars).await;
}

/// Ends every SM policy association of `supi` (TS 29.512 §4.2.3.3, PCF-initiated
/// termination): its SMF gets `POST {notificationUri}/terminate` with a TerminationNotification
/// (`resourceUri`, `cause`) and answers with the association's delete. The subscriber's cached
/// data goes first: it no longer exists at the UDR.
pub async fn terminate_all(pcf: &Arc<Pcf>, supi: &str, cause: &str) {
    let associations = {
        let _held = pcf.hold(supi).await;
        pcf.policy_data.changed_sm(supi, None);
        match pcf.store.sm_of(supi).await {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(%supi, error = %e, "policy data removed, associations not read");
                return;
            }
        }
    };
    // A Gx session's PCEF is asked with an RAR instead (TS 29.212 §4.5.6).
    let (gx, associations): (Vec<_>, Vec<_>) =
        associations.into_iter().partition(|p| crate::gx::is_gx(&p.id));
    crate::gx::release::release(pcf, gx, cause).await;
    for p in associations {
        let Ok(context) = serde_json::from_slice::<Value>(&p.context) else { continue };
        let Some(smf) = context.get("notificationUri").and_then(Value::as_str) else { continue };
        let body = json!({"resourceUri": resource_uri(pcf, &p.id), "cause": cause});
        tracing::info!(sm_policy = %p.id, %supi, %cause, "SM policy association terminated by the PCF");
        pcf.notifier
            .update_notify(&format!("{}/terminate", smf.trim_end_matches('/')), &body)
            .await;
    }
}

/// One association decided again: the UpdateNotify to send, if its decision changed.
async fn redecide_one(pcf: &Pcf, stored: SmPolicy) -> Result<Option<(String, Value)>, NfError> {
    let context: Value = serde_json::from_slice(&stored.context)?;
    let Decided { mut outcome, project, .. } =
        decide(pcf, Service::Sm, &context, &stored.supi).await?;
    let ssv_updates = std::mem::take(&mut outcome.ssv_updates);
    let mut new = decision(outcome, &context);
    let old: Value = serde_json::from_slice(&stored.decision)?;
    crate::app_session::keep_af_rules(&old, &mut new);
    let delta = models::delta(&old, &new);
    if delta.as_object().is_none_or(|d| d.is_empty()) {
        return Ok(None);
    }
    let Some(smf) = context.get("notificationUri").and_then(Value::as_str).map(str::to_string)
    else {
        return Ok(None);
    };
    let id = stored.id.clone();
    let updated = SmPolicy {
        decision: serde_json::to_vec(&new)?,
        policy_version: project.version.clone(),
        updated_ms: Utc::now().timestamp_millis(),
        ..stored
    };
    if !pcf.store.update_sm(updated, ssv_updates).await? {
        return Ok(None);
    }
    let body = json!({"resourceUri": resource_uri(pcf, &id), "smPolicyDecision": delta});
    Ok(Some((format!("{}/update", smf.trim_end_matches('/')), body)))
}
