//! Npcf_AMPolicyControl (TS 29.507 §4.2, resources §5.3): Create (POST policies), Get (GET
//! policies/{polAssoId}), Update (POST policies/{polAssoId}/update) and Delete (DELETE
//! policies/{polAssoId}).
//!
//! The decision is the project's AM rules on the PolicyAssociationRequest (an update's
//! attributes over it), with the subscriber's AmPolicyData from the UDR and its state
//! variables: a PolicyAssociation at create (RFSP, service area restrictions, UE-AMBR,
//! triggers, ...), and at update a PolicyUpdate holding what changed. A change of the
//! subscriber's AmPolicyData at the UDR decides again and tells the AMF ([`redecide`]).

use std::sync::Arc;

use chrono::Utc;
use http::{header, HeaderValue, StatusCode};
use nf::{Answer, NfError};
use policy::Service;
use sbi::{empty_response, json_response, ProblemDetails, SbiRequest};
use serde_json::{json, Map, Value};

use crate::context::Pcf;
use crate::decide::{decide, Decided};
use crate::models;
use crate::store::{new_policy_id, Association, Kind};

/// Features of TS 29.507 §5.8 this PCF supports: none of the optional ones yet.
const SUPPORTED_FEATURES: &str = "0";

pub(crate) fn resource(pcf: &Pcf, req: Option<&SbiRequest>, id: &str) -> String {
    format!("{}/npcf-am-policy-control/v1/policies/{id}", pcf.api_root(req))
}

fn not_found(id: &str) -> NfError {
    ProblemDetails::not_found(format!("no AM policy association {id}")).into()
}

/// The PolicyAssociation of a decision: the engine's, with the negotiated features.
fn association(decision: Value) -> Value {
    let mut d = match decision {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    d.insert("suppFeat".into(), Value::from(SUPPORTED_FEATURES));
    Value::Object(d)
}

/// Npcf_AMPolicyControl_Create: 201 with the PolicyAssociation and its URI in Location.
pub async fn create(pcf: Arc<Pcf>, req: SbiRequest) -> Answer {
    let request: Value = req.json()?;
    models::check_am_request(&request)?;
    let supi = request["supi"].as_str().unwrap_or_default().to_string();
    let _held = pcf.hold(&supi).await;
    let Decided { mut outcome, project, data, .. } =
        decide(&pcf, Service::Am, &request, &supi).await?;
    let ssv = std::mem::take(&mut outcome.ssv_updates);
    let decision = association(outcome.decision);
    let body = serde_json::to_vec(&decision)?;
    let id = new_policy_id();
    // The AmPolicyData the decision read is watched for the life of the association.
    let udr_subscription = match data {
        Some(_) => {
            let callback = format!("{}{}", pcf.api_root(None), crate::nudr_notify::CALLBACK_PATH);
            pcf.policy_data.subscribe_to(&supi, &callback, "am-data").await
        }
        None => None,
    };
    let a = Association {
        kind: Kind::Am,
        id: id.clone(),
        supi,
        context: serde_json::to_vec(&request)?,
        decision: body.clone(),
        policy_version: project.version.clone(),
        updated_ms: Utc::now().timestamp_millis(),
        udr_subscription,
    };
    pcf.store.create_assoc(a, ssv).await?;
    tracing::debug!(am_policy = %id, policy_version = %project.version, "AM policy created");
    let mut resp = http::Response::new(sbi::Body::from(body));
    *resp.status_mut() = StatusCode::CREATED;
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(sbi::body::JSON));
    if let Ok(v) = HeaderValue::from_str(&resource(&pcf, Some(&req), &id)) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    Ok(resp)
}

/// Npcf_AMPolicyControl_Get (TS 29.507 §4.2.5): the PolicyAssociation in force, with the
/// request it answers.
pub async fn get(pcf: Arc<Pcf>, req: SbiRequest) -> Answer {
    let id = req.param("polAssoId");
    let Some(a) = pcf.store.get_assoc(Kind::Am, id).await? else { return Err(not_found(id)) };
    let mut decision: Value = serde_json::from_slice(&a.decision)?;
    decision["request"] = serde_json::from_slice(&a.context)?;
    Ok(json_response(StatusCode::OK, &decision)?)
}

/// Npcf_AMPolicyControl_Update (TS 29.507 §4.2.3): the AMF reports triggers and changes; the
/// PCF decides again and answers 200 with a PolicyUpdate of what changed.
pub async fn update(pcf: Arc<Pcf>, req: SbiRequest) -> Answer {
    let change: Value = req.json()?;
    models::check_am_update(&change)?;
    let id = req.param("polAssoId").to_string();
    let Some(first) = pcf.store.get_assoc(Kind::Am, &id).await? else { return Err(not_found(&id)) };
    let _held = pcf.hold(&first.supi).await;
    let Some(stored) = pcf.store.get_assoc(Kind::Am, &id).await? else {
        return Err(not_found(&id));
    };
    let mut request: Value = serde_json::from_slice(&stored.context)?;
    if let (Some(r), Some(c)) = (request.as_object_mut(), change.as_object()) {
        // What the AMF reports replaces what it sent before (PolicyAssociationUpdateRequest's
        // attributes are PolicyAssociationRequest's, but for `triggers` and `praStatuses`).
        for (k, v) in c {
            r.insert(k.clone(), v.clone());
        }
    }
    let Decided { mut outcome, project, .. } =
        decide(&pcf, Service::Am, &request, &stored.supi).await?;
    let ssv = std::mem::take(&mut outcome.ssv_updates);
    let new = association(outcome.decision);
    let old: Value = serde_json::from_slice(&stored.decision)?;
    let mut update = models::delta(&old, &new);
    if let Some(u) = update.as_object_mut() {
        u.remove("suppFeat");
        u.insert("resourceUri".into(), Value::from(resource(&pcf, Some(&req), &id)));
    }
    let a = Association {
        context: serde_json::to_vec(&request)?,
        decision: serde_json::to_vec(&new)?,
        policy_version: project.version.clone(),
        updated_ms: Utc::now().timestamp_millis(),
        ..stored
    };
    if !pcf.store.update_assoc(a, ssv).await? {
        return Err(not_found(&id));
    }
    Ok(json_response(StatusCode::OK, &update)?)
}

/// Npcf_AMPolicyControl_Delete (TS 29.507 §4.2.4): 204.
pub async fn delete(pcf: Arc<Pcf>, req: SbiRequest) -> Answer {
    let id = req.param("polAssoId");
    if !remove(&pcf, id).await? {
        return Err(not_found(id));
    }
    tracing::debug!(am_policy = %id, "AM policy deleted");
    Ok(empty_response(StatusCode::NO_CONTENT))
}

/// Removes an AM policy association, holding its subscriber, and its AM data subscription at
/// the UDR; false when there was none (the delete's work, and the session audit's).
pub(crate) async fn remove(pcf: &Pcf, id: &str) -> Result<bool, NfError> {
    let Some(first) = pcf.store.get_assoc(Kind::Am, id).await? else { return Ok(false) };
    let held = pcf.hold(&first.supi).await;
    let Some(gone) = pcf.store.delete_assoc(Kind::Am, id).await? else { return Ok(false) };
    drop(held);
    if let Some(uri) = &gone.udr_subscription {
        pcf.policy_data.unsubscribe(uri).await;
    }
    Ok(true)
}

/// The subscriber's AmPolicyData changed at the UDR. Each of its AM associations is decided
/// again and its AMF told (TS 29.507 §4.2.4): an Npcf_AMPolicyControl_UpdateNotify (`POST
/// {notificationUri}/update`, a PolicyUpdate of what changed) when the decision changed. With
/// `removed` (the data is gone and `on_unknown_subscriber = "reject"`), the association is ended
/// instead (`POST {notificationUri}/terminate`, a TerminationNotification with cause
/// UE_SUBSCRIPTION), and the AMF deletes it.
pub async fn redecide(pcf: &Arc<Pcf>, supi: &str, removed: bool) {
    let mut send = Vec::new();
    {
        let _held = pcf.hold(supi).await;
        let associations = match pcf.store.assoc_of(Kind::Am, supi).await {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(%supi, error = %e, "AM data changed, associations not read");
                return;
            }
        };
        for stored in associations {
            let Some(amf) = serde_json::from_slice::<Value>(&stored.context)
                .ok()
                .and_then(|c| c.get("notificationUri")?.as_str().map(str::to_string))
            else {
                continue;
            };
            let amf = amf.trim_end_matches('/').to_string();
            let resource_uri = resource(pcf, None, &stored.id);
            if removed {
                let body = json!({"resourceUri": resource_uri, "cause": "UE_SUBSCRIPTION"});
                send.push((format!("{amf}/terminate"), body));
                continue;
            }
            match redecide_one(pcf, stored).await {
                Ok(Some(mut update)) => {
                    if let Some(u) = update.as_object_mut() {
                        u.insert("resourceUri".into(), Value::from(resource_uri));
                    }
                    send.push((format!("{amf}/update"), update));
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(%supi, error = %e, "AM data changed, not decided again"),
            }
        }
    }
    // Sent once the subscriber is let go: an AMF's answer holds up none of its requests.
    for (uri, body) in send {
        pcf.notifier.am_update_notify(&uri, &body).await;
    }
}

/// One AM association decided again: what changed, if anything (stored before it is sent).
async fn redecide_one(pcf: &Pcf, stored: Association) -> Result<Option<Value>, NfError> {
    let request: Value = serde_json::from_slice(&stored.context)?;
    let Decided { mut outcome, project, .. } =
        decide(pcf, Service::Am, &request, &stored.supi).await?;
    let ssv = std::mem::take(&mut outcome.ssv_updates);
    let new = association(outcome.decision);
    let old: Value = serde_json::from_slice(&stored.decision)?;
    let mut update = models::delta(&old, &new);
    if let Some(u) = update.as_object_mut() {
        u.remove("suppFeat");
    }
    if update.as_object().is_none_or(|u| u.is_empty()) {
        return Ok(None);
    }
    let a = Association {
        decision: serde_json::to_vec(&new)?,
        policy_version: project.version.clone(),
        updated_ms: Utc::now().timestamp_millis(),
        ..stored
    };
    if !pcf.store.update_assoc(a, ssv).await? {
        return Ok(None);
    }
    Ok(Some(update))
}
