//! Provisioning of policy data (`/udr-prov/v1/policy-data`, docs/udr-provisioning-policy.yaml):
//! the operator's create, read, update and delete of a UE's whole policy profile, and of the
//! resources N36 only reads (PLMN UE policy sets, sponsor connectivity, BDT, slice and MBS
//! session policy data).
//!
//! A PolicyDataProfile gathers a UE's data sets: `amData` (AmPolicyData), `uePolicySet`
//! (UePolicySet), `smData` (SmPolicyData), `umData` (usageMonId -> UsageMonData) and
//! `operatorSpecificData`; each is stored as the N36 resource it is, so a provisioning change is
//! a change of those resources and notifies their subscribers exactly as an N36 write does. The
//! profile's ETag is the composite of its resources' versions.

use std::collections::BTreeMap;
use std::sync::Arc;

use http::{header, HeaderValue, StatusCode};
use nf::{Answer, NfError};
use sbi::body as sbi_body;
use sbi::problem::cause;
use sbi::{InvalidParam, ProblemDetails, SbiRequest};
use serde_json::{Map, Value};

use super::etag::{self, Conditions};
use super::ids::{self, Kind};
use super::model::{self, Errors, Ty};
use super::resources::{self, merge, other_key, ue_id};
use super::store;
use super::{conditional_read, empty_answer, json_answer, refused, user_not_found, PROV_ROOT};
use crate::context::Udr;

/// The sections of a PolicyDataProfile: attribute, UE part, type. `umData` (a map of usage
/// monitoring resources) is handled apart.
const SECTIONS: [(&str, &str, &Ty); 4] = [
    ("amData", ids::AM_DATA, &model::AM_POLICY_DATA),
    ("uePolicySet", ids::UE_POLICY_SET, &model::UE_POLICY_SET),
    ("smData", ids::SM_DATA, &model::SM_POLICY_DATA),
    ("operatorSpecificData", ids::OPERATOR_SPECIFIC_DATA, &model::OPERATOR_SPECIFIC_DATA),
];
const UM_DATA: &str = "umData";

fn known_attribute(k: &str) -> bool {
    k == UM_DATA || SECTIONS.iter().any(|(a, _, _)| *a == k)
}

/// Checks a PolicyDataProfile for `ue_id` and splits it into the UE's parts, each the JSON of
/// one N36 resource. Every wrong attribute is listed; at least one section is required.
pub fn profile_parts(
    ue_id: &str,
    profile: &Value,
) -> Result<BTreeMap<String, Vec<u8>>, ProblemDetails> {
    ids::check_ue_id(ue_id).map_err(|why| resources::bad_variable("ueId", why))?;
    let Some(obj) = profile.as_object() else {
        return Err(ProblemDetails::invalid_params(
            cause::MANDATORY_IE_INCORRECT,
            vec![InvalidParam::new("/", "a PolicyDataProfile must be a JSON object")],
        ));
    };
    let mut errs = Errors::default();
    for k in obj.keys().filter(|k| !known_attribute(k)) {
        errs.bad(format!("/{}", model::escape(k)), "not a PolicyDataProfile attribute");
    }
    let mut parts = BTreeMap::new();
    for (attr, part, ty) in SECTIONS {
        if let Some(v) = obj.get(attr) {
            model::check(v, ty, &mut format!("/{attr}"), &mut errs);
            parts.insert(part.to_owned(), serde_json::to_vec(v).unwrap_or_default());
        }
    }
    match obj.get(UM_DATA) {
        None => {}
        Some(Value::Object(um)) if !um.is_empty() => {
            for (id, v) in um {
                let mut at = format!("/{UM_DATA}/{}", model::escape(id));
                if let Err(why) = ids::check_plain_id(id, "usageMonId") {
                    errs.bad(at.clone(), why);
                }
                model::check(v, &model::USAGE_MON_DATA, &mut at, &mut errs);
                parts.insert(
                    format!("{}{id}", ids::USAGE_MON_PREFIX),
                    serde_json::to_vec(v).unwrap_or_default(),
                );
            }
        }
        Some(_) => {
            errs.bad(format!("/{UM_DATA}"), "must be a non-empty map of usageMonId to UsageMonData")
        }
    }
    if parts.is_empty() && errs.is_empty() {
        return Err(ProblemDetails::invalid_params(
            cause::MANDATORY_IE_MISSING,
            vec![InvalidParam::new(
                "/",
                "a PolicyDataProfile needs at least one of amData, uePolicySet, smData, umData, \
                 operatorSpecificData (DELETE removes a UE's policy data)",
            )],
        ));
    }
    errs.finish()?;
    Ok(parts)
}

/// The PolicyDataProfile of a UE's parts, from their stored bytes.
pub fn profile_json<'a>(parts: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> Vec<u8> {
    let parts: Vec<(&str, &[u8])> = parts.into_iter().collect();
    let mut out = Vec::with_capacity(parts.iter().map(|(_, j)| j.len() + 24).sum::<usize>() + 2);
    out.push(b'{');
    let mut first = true;
    let mut field = |out: &mut Vec<u8>, name: &str| {
        if !first {
            out.push(b',');
        }
        first = false;
        let _ = serde_json::to_writer(&mut *out, name);
        out.push(b':');
    };
    for (attr, part, _) in SECTIONS {
        if let Some((_, json)) = parts.iter().find(|(p, _)| *p == part) {
            field(&mut out, attr);
            out.extend_from_slice(json);
        }
    }
    let mut um = parts
        .iter()
        .filter_map(|(p, j)| Some((p.strip_prefix(ids::USAGE_MON_PREFIX)?, j)))
        .peekable();
    if um.peek().is_some() {
        field(&mut out, UM_DATA);
        for (i, (id, json)) in um.enumerate() {
            out.push(if i == 0 { b'{' } else { b',' });
            let _ = serde_json::to_writer(&mut out, id);
            out.push(b':');
            out.extend_from_slice(json);
        }
        out.push(b'}');
    }
    out.push(b'}');
    out
}

fn profile_location(udr: &Udr, req: &SbiRequest, ue: &str) -> Option<HeaderValue> {
    let mut path = String::new();
    ids::push_segment(&mut path, ue);
    HeaderValue::from_str(&format!("{}{PROV_ROOT}/policy-data/ues/{path}", udr.api_root(Some(req))))
        .ok()
}

/// GET /udr-prov/v1/policy-data/ues/{ueId}: the PolicyDataProfile; 404 USER_NOT_FOUND.
pub async fn read_policy_profile(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let ue = ue_id(&req)?.to_owned();
    let cond = Conditions::from_headers(req.headers())?;
    let rows = udr.policy.store.get_ue(ue.clone()).await?;
    if rows.is_empty() {
        return Err(user_not_found(&ue).into());
    }
    let tag = etag::composite_etag(rows.iter().map(|(p, r)| (p.as_str(), r.version)));
    if let Some(resp) = conditional_read(&cond, &tag, req.head.uri.path()) {
        return Ok(resp);
    }
    let body = profile_json(rows.iter().map(|(p, r)| (p.as_str(), r.json.as_slice())));
    Ok(json_answer(StatusCode::OK, body, Some(&tag)))
}

fn profile_written(
    udr: &Udr,
    req: &SbiRequest,
    ue: &str,
    w: Result<store::UeWritten, store::Refusal>,
    created_answer: bool,
) -> Answer {
    let w = match w {
        Ok(w) => w,
        Err(r) => return refused(r, ue, "policy data", req.head.uri.path()),
    };
    udr.policy.recorded(w.notified);
    if w.parts.is_empty() {
        return Ok(empty_answer(StatusCode::NO_CONTENT, None));
    }
    let body = profile_json(w.parts.iter().map(|(p, j)| (p.as_str(), j.as_slice())));
    let created = created_answer && !w.existed;
    let mut resp = json_answer(
        if created { StatusCode::CREATED } else { StatusCode::OK },
        body,
        w.etag.as_deref(),
    );
    if created {
        if let Some(loc) = profile_location(udr, req, ue) {
            resp.headers_mut().insert(header::LOCATION, loc);
        }
    }
    Ok(resp)
}

/// PUT /udr-prov/v1/policy-data/ues/{ueId}: creates (201 + Location) or replaces (200) the UE's
/// whole policy data with the PolicyDataProfile; data sets absent from it are removed.
pub async fn create_or_replace_policy_profile(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let ue = ue_id(&req)?.to_owned();
    let cond = Conditions::from_headers(req.headers())?;
    sbi_body::require_media_type(req.headers(), &[sbi_body::JSON])?;
    let profile: Value = sbi_body::decode_json(&req.body)?;
    let desired = profile_parts(&ue, &profile)?;
    let w = udr.policy.write_ue(ue.clone(), cond, false, move |_| Ok(desired)).await?;
    profile_written(&udr, &req, &ue, w, true)
}

/// PATCH /udr-prov/v1/policy-data/ues/{ueId} (application/merge-patch+json): merges into the
/// PolicyDataProfile (`null` removes a data set); 200 with the profile.
pub async fn update_policy_profile(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let ue = ue_id(&req)?.to_owned();
    let cond = Conditions::from_headers(req.headers())?;
    sbi_body::require_media_type(req.headers(), &[sbi_body::MERGE_PATCH_JSON])?;
    let patch: Value = sbi_body::decode_json(&req.body)?;
    let mut errs = Errors::default();
    match patch.as_object() {
        None => errs.bad("/", "a PolicyDataProfile merge patch must be a JSON object"),
        Some(o) => {
            for k in o.keys().filter(|k| !known_attribute(k)) {
                errs.bad(format!("/{}", model::escape(k)), "not a PolicyDataProfile attribute");
            }
        }
    }
    errs.finish()?;
    let ue_in = ue.clone();
    let w = udr.policy.write_ue(ue.clone(), cond, true, move |current| {
        let mut doc: Value = serde_json::from_slice(&profile_json(current.iter().map(|(p, j)| (p.as_str(), *j))))
            .map_err(|e| NfError::internal(format!("stored policy data unreadable: {e}")))?;
        merge(&mut doc, patch);
        if doc.as_object().is_none_or(Map::is_empty) {
            return Err(ProblemDetails::bad_request(
                cause::MANDATORY_IE_INCORRECT,
                "the patch would remove every data set of the UE; DELETE removes a UE's policy data",
            ).into());
        }
        Ok(profile_parts(&ue_in, &doc)?)
    })
    .await?;
    profile_written(&udr, &req, &ue, w, false)
}

/// DELETE /udr-prov/v1/policy-data/ues/{ueId}: removes every policy data set of the UE; 204.
pub async fn delete_policy_profile(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let ue = ue_id(&req)?.to_owned();
    let cond = Conditions::from_headers(req.headers())?;
    let w = udr.policy.write_ue(ue.clone(), cond, true, |_| Ok(BTreeMap::new())).await?;
    profile_written(&udr, &req, &ue, w, false)
}

// --- the resources N36 only reads -------------------------------------------------------------

macro_rules! provisioned {
    ($read:ident, $put:ident, $delete:ident, $kind:expr, $ty:expr, $what:literal) => {
        #[doc = concat!("GET of ", $what, " (provisioning).")]
        pub async fn $read(udr: Arc<Udr>, req: SbiRequest) -> Answer {
            let key = other_key(&req, $kind)?;
            resources::read(&udr, &req, key, $what, &[]).await
        }
        #[doc = concat!("PUT of ", $what, " (provisioning): 201 + Location, or 200 when replaced.")]
        pub async fn $put(udr: Arc<Udr>, req: SbiRequest) -> Answer {
            let key = other_key(&req, $kind)?;
            resources::put(&udr, &req, key, $ty, PROV_ROOT).await
        }
        #[doc = concat!("DELETE of ", $what, " (provisioning): 204.")]
        pub async fn $delete(udr: Arc<Udr>, req: SbiRequest) -> Answer {
            let key = other_key(&req, $kind)?;
            resources::delete(&udr, &req, key, $what).await
        }
    };
}

provisioned!(
    read_plmn,
    put_plmn,
    delete_plmn,
    Kind::Plmn,
    &model::UE_POLICY_SET,
    "the UE policy set of a PLMN"
);
provisioned!(
    read_sponsor,
    put_sponsor,
    delete_sponsor,
    Kind::Sponsor,
    &model::SPONSOR_CONNECTIVITY_DATA,
    "sponsor connectivity data"
);
provisioned!(read_bdt, put_bdt, delete_bdt, Kind::Bdt, &model::BDT_DATA, "BDT data");
provisioned!(
    read_slice,
    put_slice,
    delete_slice,
    Kind::Slice,
    &model::SLICE_POLICY_DATA,
    "slice policy control data"
);
provisioned!(
    read_mbs,
    put_mbs,
    delete_mbs,
    Kind::Mbs,
    &model::MBS_SESS_POL_CTRL_DATA,
    "MBS session policy control data"
);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn profiles_split_and_join() {
        let p = json!({"amData": {"subscCats": ["gold"]}, "umData": {"u1": {"limitId": "u1"}},
            "smData": {"smPolicySnssaiData": {"1": {"snssai": {"sst": 1}}}}});
        let parts = profile_parts("imsi-001010000000001", &p).unwrap();
        assert_eq!(parts.keys().collect::<Vec<_>>(), ["am-data", "sm-data", "sm-data/u1"]);
        let back: Value = serde_json::from_slice(&profile_json(
            parts.iter().map(|(k, v)| (k.as_str(), v.as_slice())),
        ))
        .unwrap();
        assert_eq!(back, p);
    }

    #[test]
    fn bad_profiles_list_every_error() {
        let e = profile_parts("imsi-001010000000001", &json!({})).unwrap_err();
        assert_eq!(e.cause.as_deref(), Some("MANDATORY_IE_MISSING"));
        let e = profile_parts(
            "imsi-001010000000001",
            &json!({"amData": {"subscCats": []}, "smData": {}, "umData": {"u": {}}, "other": 1}),
        )
        .unwrap_err();
        let mut got: Vec<String> = e.invalid_params.into_iter().map(|p| p.param).collect();
        got.sort();
        assert_eq!(
            got,
            ["/amData/subscCats", "/other", "/smData/smPolicySnssaiData", "/umData/u/limitId"]
        );
        assert!(profile_parts("imsi-1", &json!({"amData": {}})).is_err());
    }
}
