//! Nbsf_Management for PCF for a UE bindings (TS 29.521 Rel-17, `pcf-ue-bindings`): register
//! (POST), discovery by SUPI and/or GPSI (GET, an array), update (PATCH, merge patch of
//! PcfForUeBindingPatch), deregister (DELETE). One binding per SUPI: an existing one is
//! replaced or refused per `on_existing_binding`, as for PDU session bindings.

use std::sync::Arc;

use http::{header, HeaderValue, StatusCode};
use nf::Answer;
use sbi::body::{self, MERGE_PATCH_JSON};
use sbi::problem::cause;
use sbi::{empty_response, Body, InvalidParam, ProblemDetails, Response, SbiRequest};
use serde_json::Value;

use crate::config::ExistingBinding;
use crate::context::Bsf;
use crate::models::{self, check_fqdn, check_gpsi, check_supi, check_uuid, string_field, Errors};
use crate::nbsf_management::stored_document;
use crate::nbsf_management::EXISTING_BINDING_INFO_FOUND;
use crate::store::{Created, Keyed, Updated};
use crate::subscriptions::BindingEvent;

fn location(bsf: &Bsf, req: &SbiRequest, id: &str) -> String {
    format!("{}/nbsf-management/v1/pcf-ue-bindings/{id}", bsf.api_root(Some(req)))
}

pub(crate) fn raw_json(status: StatusCode, content_type: &'static str, json: Vec<u8>) -> Response {
    let mut resp = http::Response::new(Body::from(json));
    *resp.status_mut() = status;
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

pub(crate) fn with_location(mut resp: Response, loc: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(loc) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    resp
}

/// Checks a PcfForUeBinding; returns (SUPI, GPSI).
pub fn validate(v: &Value) -> Result<(String, Option<String>), ProblemDetails> {
    let Some(obj) = v.as_object() else {
        return Err(ProblemDetails::bad_request(
            cause::INVALID_MSG_FORMAT,
            "PcfForUeBinding must be a JSON object",
        ));
    };
    let mut errs = Errors::default();
    if !obj.contains_key("supi") {
        errs.missing("/supi");
    }
    let supi =
        string_field(obj, "supi", check_supi, "must be a SUPI (imsi-<digits>, nai-...)", &mut errs);
    let gpsi = string_field(
        obj,
        "gpsi",
        check_gpsi,
        "must be a GPSI (msisdn-<digits>, extid-...)",
        &mut errs,
    );
    string_field(obj, "pcfForUeFqdn", check_fqdn, "must be an FQDN", &mut errs);
    if let Some(eps) = obj.get("pcfForUeIpEndPoints") {
        models::check_ip_endpoints(eps, "/pcfForUeIpEndPoints", &mut errs);
    }
    if !obj.contains_key("pcfForUeFqdn") && !obj.contains_key("pcfForUeIpEndPoints") {
        errs.missing("/pcfForUeFqdn");
    }
    string_field(obj, "pcfId", check_uuid, "must be an NfInstanceId (UUID)", &mut errs);
    string_field(obj, "pcfSetId", |s| !s.is_empty(), "must be an NfSetId", &mut errs);
    string_field(obj, "bindLevel", |s| !s.is_empty(), "must be a BindingLevel", &mut errs);
    string_field(
        obj,
        "suppFeat",
        |s| s.bytes().all(|b| b.is_ascii_hexdigit()),
        "must be hexadecimal",
        &mut errs,
    );
    let (supi, gpsi) = (supi.map(str::to_owned), gpsi.map(str::to_owned));
    errs.finish()?;
    Ok((supi.unwrap_or_default(), gpsi))
}

/// POST /pcf-ue-bindings: 201 with Location and the binding.
pub async fn register(bsf: Arc<Bsf>, req: SbiRequest) -> Answer {
    let binding: Value = req.json()?;
    let (supi, gpsi) = validate(&binding)?;
    let id = crate::store::new_binding_id();
    let json = serde_json::to_vec(&binding)?;
    let reject = bsf.config.on_existing_binding == ExistingBinding::Reject;
    match bsf
        .store
        .create_keyed(Keyed::PcfForUe, id.clone(), supi, gpsi, json.clone(), reject)
        .await?
    {
        Created::Inserted { replaced } => {
            for old in replaced {
                if let Ok(v) = serde_json::from_slice::<Value>(&old.json) {
                    bsf.ue_binding_event(BindingEvent::Deregistered, &v);
                }
            }
            bsf.ue_binding_event(BindingEvent::Registered, &binding);
            Ok(with_location(
                raw_json(StatusCode::CREATED, body::JSON, json),
                &location(&bsf, &req, &id),
            ))
        }
        Created::Exists(existing) => {
            let p = ProblemDetails::new(
                StatusCode::FORBIDDEN,
                EXISTING_BINDING_INFO_FOUND,
                "a PCF for the UE binding already exists for this SUPI",
            );
            Ok(with_location(p.into_response(), &location(&bsf, &req, &existing.id)))
        }
    }
}

/// GET /pcf-ue-bindings?supi=&gpsi=: 200 with the matching bindings (possibly none).
pub async fn discover(bsf: Arc<Bsf>, req: SbiRequest) -> Answer {
    let q = req.query();
    q.deny_unknown(&["supi", "gpsi", "supp-feat"])?;
    let mut bad = Vec::new();
    let supi = q.get("supi")?.map(str::to_owned);
    let gpsi = q.get("gpsi")?.map(str::to_owned);
    if supi.as_deref().is_some_and(|s| !check_supi(s)) {
        bad.push(InvalidParam::new("supi", "must be a SUPI (imsi-<digits>, nai-...)"));
    }
    if gpsi.as_deref().is_some_and(|g| !check_gpsi(g)) {
        bad.push(InvalidParam::new("gpsi", "must be a GPSI (msisdn-<digits>, extid-...)"));
    }
    if !bad.is_empty() {
        return Err(ProblemDetails::invalid_params(cause::INVALID_QUERY_PARAM, bad).into());
    }
    if supi.is_none() && gpsi.is_none() {
        return Err(ProblemDetails::invalid_params(
            cause::MANDATORY_QUERY_PARAM_MISSING,
            vec![InvalidParam::new("supi", "supi or gpsi is required")],
        )
        .into());
    }
    let found = bsf.store.find_keyed(Keyed::PcfForUe, supi, gpsi).await?;
    let mut out = Vec::with_capacity(2 + found.iter().map(|s| s.json.len() + 1).sum::<usize>());
    out.push(b'[');
    for (i, s) in found.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&s.json);
    }
    out.push(b']');
    Ok(raw_json(StatusCode::OK, body::JSON, out))
}

/// PATCH /pcf-ue-bindings/{bindingId} (PcfForUeBindingPatch): 200 with the binding; 404.
pub async fn update(bsf: Arc<Bsf>, req: SbiRequest) -> Answer {
    let allowed = ["pcfForUeFqdn", "pcfForUeIpEndPoints", "pcfId"];
    let what = "PCF for a UE binding";
    merge_patch(&bsf, Keyed::PcfForUe, &req, &allowed, |d| validate(d).map(drop), what).await
}

/// A merge patch of a Rel-17 binding (PCF for a UE, PCF for an MBS session): only `allowed`
/// attributes, the result checked by `validate`, all in one write job; 200 with the binding, 404
/// naming `what` for an unknown id.
pub(crate) async fn merge_patch(
    bsf: &Bsf,
    kind: Keyed,
    req: &SbiRequest,
    allowed: &[&str],
    validate: fn(&Value) -> Result<(), ProblemDetails>,
    what: &str,
) -> Answer {
    body::require_media_type(req.headers(), &[MERGE_PATCH_JSON])?;
    let patch: Value = body::decode_json(&req.body)?;
    check_patch(&patch, allowed)?;
    let id = req.param("bindingId").to_owned();
    let patch_bytes = req.body.clone();
    let outcome = bsf
        .store
        .update_keyed(
            kind,
            id.clone(),
            Box::new(move |old| {
                let mut doc = stored_document(&old)?;
                body::apply_merge_patch(&mut doc, &patch_bytes)?;
                validate(&doc)?;
                Ok(serde_json::to_vec(&doc)?)
            }),
        )
        .await?;
    match outcome {
        Updated::Done(json) => Ok(raw_json(StatusCode::OK, body::JSON, json)),
        Updated::NotFound => Err(ProblemDetails::not_found(format!("no {what} {id}")).into()),
        Updated::Refused(e) => Err(e),
    }
}

/// DELETE /pcf-ue-bindings/{bindingId}: 204; 404.
pub async fn deregister(bsf: Arc<Bsf>, req: SbiRequest) -> Answer {
    let id = req.param("bindingId").to_owned();
    match bsf.store.delete_keyed(Keyed::PcfForUe, id.clone()).await? {
        Some(old) => {
            if let Ok(v) = serde_json::from_slice::<Value>(&old.json) {
                bsf.ue_binding_event(BindingEvent::Deregistered, &v);
            }
            Ok(empty_response(StatusCode::NO_CONTENT))
        }
        None => Err(ProblemDetails::not_found(format!("no PCF for a UE binding {id}")).into()),
    }
}

/// A merge patch may only set (never remove) the `allowed` attributes: 400 naming the others.
pub fn check_patch(patch: &Value, allowed: &[&str]) -> Result<(), ProblemDetails> {
    let Some(obj) = patch.as_object() else {
        return Err(ProblemDetails::bad_request(
            cause::INVALID_MSG_FORMAT,
            "the patch must be a JSON object",
        ));
    };
    let mut errs = Errors::default();
    for (k, v) in obj {
        if !allowed.contains(&k.as_str()) {
            errs.bad(format!("/{k}"), "not a patchable attribute: cannot be modified");
        } else if v.is_null() {
            errs.bad(format!("/{k}"), "cannot be removed");
        }
    }
    errs.finish()
}
