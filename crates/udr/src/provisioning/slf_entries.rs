//! SLF entries, `/udr-prov/v1/slf-entries`: a subscriber's identities (SUPI, GPSIs, IMPIs,
//! IMPUs) and the NF group of each NF type, as the SLF lookup (Nudr_GroupIDmap) answers them.
//!
//! An entry is addressed by any of its identities (`/slf-entries/msisdn-...` is the same entry
//! as `/slf-entries/imsi-...`); its first identity is its key, named in `Location`.

use std::sync::Arc;

use http::{Method, StatusCode};
use nf::Answer;
use sbi::body::{self, MERGE_PATCH_JSON};
use sbi::router::RouterBuilder;
use sbi::{empty_response, ProblemDetails, SbiRequest};
use serde_json::{json, Value};

use super::{
    bad_path_param, conflict, encode_segment, location, not_found, object, pointer_token, Errors,
    ENTRY_EXISTS,
};
use crate::config::ProvisioningLimits;
use crate::context::Udr;
use crate::slf::{self, Entry, Groups, Updated};

const ATTRS: [&str; 2] = ["subscriberIds", "nfGroupIds"];

pub fn routes(b: RouterBuilder<Udr>) -> RouterBuilder<Udr> {
    const COLLECTION: &str = "/udr-prov/v1/slf-entries";
    const ENTRY: &str = "/udr-prov/v1/slf-entries/{subscriberId}";
    b.route(Method::POST, COLLECTION, "UdrProv_CreateSlfEntry", create)
        .route(Method::GET, ENTRY, "UdrProv_GetSlfEntry", get)
        .route(Method::PUT, ENTRY, "UdrProv_ReplaceSlfEntry", replace)
        .route(Method::PATCH, ENTRY, "UdrProv_UpdateSlfEntry", update)
        .route(Method::DELETE, ENTRY, "UdrProv_DeleteSlfEntry", delete)
}

/// Reads an SlfEntry: `subscriberIds` (1 to `max_slf_ids_per_entry` identities) and
/// `nfGroupIds` (NF type -> group id, at least one); the 400 lists every wrong attribute.
pub fn parse_entry(v: &Value, limits: &ProvisioningLimits) -> Result<Entry, ProblemDetails> {
    let mut errs = Errors::default();
    let Some(obj) = object(v, "SlfEntry", &ATTRS, &mut errs) else {
        return Err(errs.into_problem());
    };
    let ids = match obj.get("subscriberIds") {
        None | Some(Value::Null) => {
            errs.missing("/subscriberIds");
            None
        }
        Some(Value::Array(items)) if items.len() > limits.max_slf_ids_per_entry => {
            // Refused as a whole: checking each of 100,000 items would be the cost to avoid.
            let max = limits.max_slf_ids_per_entry;
            errs.bad(
                "/subscriberIds",
                format!("an entry has 1 to {max} identities, not {}", items.len()),
            );
            None
        }
        Some(Value::Array(items)) => {
            let strings: Option<Vec<String>> =
                items.iter().map(|x| x.as_str().map(str::to_owned)).collect();
            match strings {
                Some(ids) => {
                    for (at, why) in slf::check_subscriber_ids(&ids, limits.max_slf_ids_per_entry) {
                        let at =
                            at.map_or("/subscriberIds".into(), |i| format!("/subscriberIds/{i}"));
                        errs.bad(at, why);
                    }
                    Some(ids)
                }
                None => {
                    for (i, _) in items.iter().enumerate().filter(|(_, x)| !x.is_string()) {
                        errs.bad(format!("/subscriberIds/{i}"), "must be a string");
                    }
                    None
                }
            }
        }
        Some(_) => {
            errs.bad("/subscriberIds", "must be an array of subscriber identities");
            None
        }
    };
    let groups = match obj.get("nfGroupIds") {
        None | Some(Value::Null) => {
            errs.missing("/nfGroupIds");
            None
        }
        Some(Value::Object(map)) => {
            if map.is_empty() {
                errs.bad("/nfGroupIds", "at least one NF type -> group id");
            }
            let mut groups = Groups::new();
            for (t, g) in map {
                let at = || format!("/nfGroupIds/{}", pointer_token(t));
                if !slf::is_nf_type(t) {
                    errs.bad(at(), format!("{t:?} is not an NF type (UDM, AUSF, PCF, ...)"));
                    continue;
                }
                match g.as_str() {
                    Some(g) if slf::check_group_id(g) => {
                        groups.insert(t.clone(), g.to_owned());
                    }
                    _ => errs.bad(at(), "a group id is a string of 1 to 255 printable bytes"),
                }
            }
            Some(groups)
        }
        Some(_) => {
            errs.bad("/nfGroupIds", "must be an object of NF type -> group id");
            None
        }
    };
    errs.finish(ids.zip(groups).map(|(subscriber_ids, groups)| Entry { subscriber_ids, groups }))
}

/// An entry as the API shows it.
pub fn entry_json(e: &Entry) -> Value {
    json!({ "subscriberIds": e.subscriber_ids, "nfGroupIds": e.groups })
}

fn entry_location(udr: &Udr, req: &SbiRequest, e: &Entry) -> String {
    location(udr, req, &format!("/slf-entries/{}", encode_segment(&e.subscriber_ids[0])))
}

/// The identity in the URI, checked.
fn path_id(req: &SbiRequest) -> Result<String, ProblemDetails> {
    let id = req.param("subscriberId");
    match slf::check_subscriber_id(id) {
        Ok(()) => Ok(id.to_owned()),
        Err(slf::Invalid::SubscriberId(why) | slf::Invalid::Groups(why)) => {
            Err(bad_path_param("subscriberId", why))
        }
    }
}

fn identity_taken(e: &Entry, id: &str) -> ProblemDetails {
    let i = e.subscriber_ids.iter().position(|x| x == id).unwrap_or(0);
    conflict(
        ENTRY_EXISTS,
        &format!("/subscriberIds/{i}"),
        format!("{id} is already provisioned in another entry"),
    )
}

fn unknown(id: &str) -> ProblemDetails {
    not_found(format!("no SLF entry has the identity {id}"))
}

/// POST /slf-entries: 201 + Location; 409 when one of its identities is provisioned already.
async fn create(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let v: Value = req.json()?;
    let entry = parse_entry(&v, &udr.config.provisioning)?;
    match udr.slf.create_entry(entry.clone()).await? {
        Ok(()) => {
            let loc = entry_location(&udr, &req, &entry);
            Ok(super::json(StatusCode::CREATED, &entry_json(&entry), Some(&loc)))
        }
        Err(id) => Err(identity_taken(&entry, &id).into()),
    }
}

/// GET /slf-entries/{subscriberId}: the whole entry the identity belongs to.
async fn get(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let id = path_id(&req)?;
    match udr.slf.get_entry(&id).await? {
        Some(e) => Ok(super::json(StatusCode::OK, &entry_json(&e), None)),
        None => Err(unknown(&id).into()),
    }
}

/// PUT /slf-entries/{subscriberId}: replaces the entry (it must keep the URI's identity;
/// identities it no longer lists are removed; new ones must not belong to another entry).
async fn replace(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let id = path_id(&req)?;
    let v: Value = req.json()?;
    let entry = parse_entry(&v, &udr.config.provisioning)?;
    keeps_uri_identity(&entry, &id)?;
    let sent = entry.clone();
    match udr.slf.update_entry(&id, move |_| Ok(entry)).await {
        Ok(Updated::Done(e)) => Ok(super::json(StatusCode::OK, &entry_json(&e), None)),
        Ok(Updated::NotFound) => Err(unknown(&id).into()),
        Ok(Updated::Conflict(taken)) => Err(identity_taken(&sent, &taken).into()),
        Ok(Updated::Rejected(p)) => Err(p.into()),
        Err(e) => Err(e.into()),
    }
}

/// PATCH /slf-entries/{subscriberId} (application/merge-patch+json, RFC 7396) over the entry's
/// JSON, e.g. `{"nfGroupIds": {"PCF": "pcf-2", "CHF": null}}`; the result must be a valid entry
/// keeping the URI's identity. Read, patched and written in one store job.
async fn update(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let id = path_id(&req)?;
    body::require_media_type(req.headers(), &[MERGE_PATCH_JSON])?;
    let patch: Value = body::decode_json(&req.body)?;
    if !patch.is_object() {
        return Err(ProblemDetails::bad_request(
            sbi::problem::cause::MANDATORY_IE_INCORRECT,
            "a merge patch of an SLF entry is a JSON object",
        )
        .into());
    }
    let uri_id = id.clone();
    let limits = udr.config.provisioning;
    let result = udr
        .slf
        .update_entry(&id, move |current| {
            let mut v = entry_json(&current);
            json_merge(&mut v, &patch);
            let e = parse_entry(&v, &limits)?;
            keeps_uri_identity(&e, &uri_id)?;
            Ok::<_, ProblemDetails>(e)
        })
        .await?;
    match result {
        Updated::Done(e) => Ok(super::json(StatusCode::OK, &entry_json(&e), None)),
        Updated::NotFound => Err(unknown(&id).into()),
        Updated::Conflict(taken) => Err(conflict(
            ENTRY_EXISTS,
            "/subscriberIds",
            format!("{taken} is already provisioned in another entry"),
        )
        .into()),
        Updated::Rejected(p) => Err(p.into()),
    }
}

/// DELETE /slf-entries/{subscriberId}: removes the entry, every identity of it.
async fn delete(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let id = path_id(&req)?;
    if udr.slf.delete_entry(&id).await? {
        Ok(empty_response(StatusCode::NO_CONTENT))
    } else {
        Err(unknown(&id).into())
    }
}

fn keeps_uri_identity(e: &Entry, id: &str) -> Result<(), ProblemDetails> {
    if e.subscriber_ids.iter().any(|x| x == id) {
        return Ok(());
    }
    let mut errs = Errors::default();
    errs.bad("/subscriberIds", format!("must list {id}, the identity in the URI"));
    Err(errs.into_problem())
}

/// RFC 7396 merge patch.
fn json_merge(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Default::default());
    }
    if let Value::Object(t) = target {
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                json_merge(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_parse_and_report_every_fault() {
        let e = parse_entry(
            &json!({
                "subscriberIds": ["imsi-001010000000001", "msisdn-33600000001"],
                "nfGroupIds": {"UDM": "udm-1", "PCF": "pcf-1"}
            }),
            &ProvisioningLimits::default(),
        )
        .unwrap();
        assert_eq!(e.subscriber_ids.len(), 2);
        assert_eq!(e.groups["PCF"], "pcf-1");
        let p = parse_entry(
            &json!({
                "subscriberIds": ["imsi-1", "imsi-001010000000001", "x", "imsi-001010000000001"],
                "nfGroupIds": {"udm": "x", "PCF": "", "AUSF": "a"},
                "extra": true
            }),
            &ProvisioningLimits::default(),
        )
        .unwrap_err();
        let params: Vec<&str> = p.invalid_params.iter().map(|p| p.param.as_str()).collect();
        assert_eq!(
            params,
            [
                "/extra",
                "/subscriberIds/0",
                "/subscriberIds/3",
                "/nfGroupIds/PCF",
                "/nfGroupIds/udm"
            ]
        );
        assert_eq!(p.cause.as_deref(), Some("MANDATORY_IE_INCORRECT"));
        let p = parse_entry(&json!({"nfGroupIds": {"UDM": "u"}}), &ProvisioningLimits::default())
            .unwrap_err();
        assert_eq!(p.cause.as_deref(), Some("MANDATORY_IE_MISSING"));
        assert!(parse_entry(&json!([1]), &ProvisioningLimits::default()).is_err());
        let p = parse_entry(
            &json!({"subscriberIds": ["imsi-00101", 7], "nfGroupIds": {"UDM": "u"}}),
            &ProvisioningLimits::default(),
        )
        .unwrap_err();
        assert_eq!(p.invalid_params[0].param, "/subscriberIds/1");
    }

    #[test]
    fn merge_patch() {
        let mut v = json!({"a": 1, "g": {"x": 1, "y": 2}});
        json_merge(&mut v, &json!({"g": {"x": null, "z": 3}, "b": [1]}));
        assert_eq!(v, json!({"a": 1, "g": {"y": 2, "z": 3}, "b": [1]}));
    }
}
