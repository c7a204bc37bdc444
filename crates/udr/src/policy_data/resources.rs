//! The policy data resources of TS29519_Policy_Data.yaml, one handler per operationId, over
//! generic read / put / merge-patch / JSON-patch / delete of one stored resource.
//!
//! Every answer carrying a resource carries its `ETag`; writes honour `If-Match` (412 when it
//! does not hold) and PUT honours `If-None-Match: *` (create only); GETs honour
//! `If-None-Match` (304). A UE with no policy data at all is 404 `USER_NOT_FOUND`, a known UE
//! without the data asked for (or an unknown PLMN, sponsor, BDT reference, slice, MBS session)
//! 404 `DATA_NOT_FOUND`. Beyond TS 29.519, `sm-data` also takes PUT and DELETE (the reference
//! call model T4b runs GET, PUT, PATCH and DELETE on it).

use std::sync::Arc;

use bytes::Bytes;
use http::{header, HeaderValue, StatusCode};
use nf::{Answer, NfError};
use sbi::body as sbi_body;
use sbi::problem::cause;
use sbi::{InvalidParam, ProblemDetails, SbiRequest};
use serde_json::{Map, Value};

use super::etag::{self, Conditions};
use super::ids::{self, Key, Kind};
use super::merge;
use super::model::{self, Ty};
use super::store::{self, Found};
use super::{
    conditional_read, data_not_found, empty_answer, json_answer, refused, user_not_found,
    NUDR_DR_ROOT,
};
use crate::context::Udr;

/// A URI variable that is not what the API defines: 400 naming it.
pub(crate) fn bad_variable(name: &str, why: String) -> ProblemDetails {
    ProblemDetails::invalid_params(
        cause::MANDATORY_IE_INCORRECT,
        vec![InvalidParam::new(name, why)],
    )
}

pub(crate) fn ue_id(req: &SbiRequest) -> Result<&str, ProblemDetails> {
    let id = req.param("ueId");
    ids::check_ue_id(id).map_err(|why| bad_variable("ueId", why))?;
    Ok(id)
}

/// The key of a resource addressed by its kind's URI variable.
pub(crate) fn other_key(req: &SbiRequest, kind: Kind) -> Result<Key, ProblemDetails> {
    let (name, id) = match kind {
        Kind::Plmn => ("plmnId", req.param("plmnId").to_owned()),
        Kind::Sponsor => ("sponsorId", req.param("sponsorId").to_owned()),
        Kind::Bdt => ("bdtReferenceId", req.param("bdtReferenceId").to_owned()),
        Kind::Slice => ("snssai", req.param("snssai").to_owned()),
        Kind::Mbs => ("polSessionId", req.param("polSessionId").to_owned()),
        Kind::Ue => ("ueId", req.param("ueId").to_owned()),
    };
    let id = match kind {
        Kind::Plmn => ids::check_plmn_id(&id).map(|()| id),
        Kind::Slice => ids::canonical_snssai(&id),
        Kind::Mbs => ids::canonical_mbs_id(&id),
        Kind::Ue => ids::check_ue_id(&id).map(|()| id),
        Kind::Sponsor | Kind::Bdt => ids::check_plain_id(&id, name).map(|()| id),
    }
    .map_err(|why| bad_variable(name, why))?;
    Ok(Key::other(kind, &id))
}

fn usage_mon_key(req: &SbiRequest) -> Result<Key, ProblemDetails> {
    let ue = ue_id(req)?;
    let um = req.param("usageMonId");
    ids::check_plain_id(um, "usageMonId").map_err(|why| bad_variable("usageMonId", why))?;
    Ok(Key::usage_mon(ue, um))
}

fn not_found(found: Found, req: &SbiRequest, what: &str) -> ProblemDetails {
    match found {
        Found::NoUser => user_not_found(req.param("ueId")),
        _ => data_not_found(what),
    }
}

/// The `Location` of a resource: `{apiRoot}{root}/policy-data/{path}`.
pub(crate) fn location(udr: &Udr, req: &SbiRequest, root: &str, key: &Key) -> Option<HeaderValue> {
    HeaderValue::from_str(&format!("{}{root}/policy-data/{}", udr.api_root(Some(req)), key.path()))
        .ok()
}

/// GET of one resource, answered with its stored bytes.
pub(crate) async fn read(
    udr: &Udr,
    req: &SbiRequest,
    key: Key,
    what: &str,
    query: &[&str],
) -> Answer {
    if req.head.uri.query().is_some() {
        req.query().deny_unknown(query)?;
    }
    let cond = Conditions::from_headers(req.headers())?;
    match udr.policy.store.get(key).await? {
        Found::Row(row) => {
            let tag = etag::etag(row.version);
            if let Some(resp) = conditional_read(&cond, &tag, req.head.uri.path()) {
                return Ok(resp);
            }
            Ok(json_answer(StatusCode::OK, row.json, Some(&tag)))
        }
        other => Err(not_found(other, req, what).into()),
    }
}

/// PUT of one resource: created (201 + Location) or replaced (200), answered with the
/// document and its ETag. The document is stored as received.
pub(crate) async fn put(udr: &Udr, req: &SbiRequest, key: Key, ty: &Ty, root: &str) -> Answer {
    let cond = Conditions::from_headers(req.headers())?;
    sbi_body::require_media_type(req.headers(), &[sbi_body::JSON])?;
    let doc: Value = sbi_body::decode_json(&req.body)?;
    model::validate(&doc, ty)?;
    let loc = location(udr, req, root, &key);
    let body = req.body.clone();
    let w = udr.policy.write_one(key, cond, false, move |_| Ok(Some(body))).await?;
    let w = match w {
        Ok(w) => w,
        Err(r) => return refused(r, req.param("ueId"), "resource", req.head.uri.path()),
    };
    udr.policy.recorded(w.notified);
    let tag = w.version.map(etag::etag);
    let status = if w.existed { StatusCode::OK } else { StatusCode::CREATED };
    let mut resp = json_answer(status, req.body.clone(), tag.as_deref());
    if !w.existed {
        if let Some(loc) = loc {
            resp.headers_mut().insert(header::LOCATION, loc);
        }
    }
    Ok(resp)
}

/// How a successful PATCH is answered.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchAnswer {
    NoContent,
    Document,
}

/// RFC 7396 merge patch, taking the patch by value (no copies of its values).
pub(crate) fn merge(target: &mut Value, patch: Value) {
    let Value::Object(patch) = patch else {
        *target = patch;
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(t) = target {
        for (k, v) in patch {
            if v.is_null() {
                t.remove(&k);
            } else {
                merge(t.entry(k).or_insert(Value::Null), v);
            }
        }
    }
}

/// The stored document of a resource; one we cannot read back is our fault, not the consumer's.
fn stored_doc(old: Option<&[u8]>) -> Result<Value, NfError> {
    serde_json::from_slice(old.unwrap_or_default())
        .map_err(|e| NfError::internal(format!("stored document unreadable: {e}")))
}

fn encode(doc: &Value) -> Result<Option<Bytes>, NfError> {
    Ok(Some(Bytes::from(serde_json::to_vec(doc)?)))
}

/// PATCH (application/merge-patch+json) of an existing resource: `check` says what the patch
/// type allows; the patched document must still be a valid `ty`.
pub(crate) async fn merge_patch(
    udr: &Udr,
    req: &SbiRequest,
    key: Key,
    check: fn(&Value) -> Result<(), ProblemDetails>,
    ty: &'static Ty,
    answer: PatchAnswer,
    what: &str,
) -> Answer {
    let cond = Conditions::from_headers(req.headers())?;
    sbi_body::require_media_type(req.headers(), &[sbi_body::MERGE_PATCH_JSON])?;
    let patch: Value = sbi_body::decode_json(&req.body)?;
    check(&patch)?;
    let w = udr
        .policy
        .write_one(key, cond, true, move |old| {
            if let (Some(old), Value::Object(p)) = (old, &patch) {
                if let Some(merged) = merge::merge_stored(old, p, ty) {
                    return Ok(Some(Bytes::from(merged?)));
                }
            }
            let mut doc = stored_doc(old)?;
            merge(&mut doc, patch);
            model::validate(&doc, ty)?;
            encode(&doc)
        })
        .await?;
    written(udr, req, w, answer, what)
}

fn written(
    udr: &Udr,
    req: &SbiRequest,
    w: Result<store::Written, store::Refusal>,
    answer: PatchAnswer,
    what: &str,
) -> Answer {
    let w = match w {
        Ok(w) => w,
        Err(r) => return refused(r, req.param("ueId"), what, req.head.uri.path()),
    };
    udr.policy.recorded(w.notified);
    let tag = w.version.map(etag::etag);
    Ok(match (answer, w.json) {
        (PatchAnswer::Document, Some(json)) => json_answer(StatusCode::OK, json, tag.as_deref()),
        _ => empty_answer(StatusCode::NO_CONTENT, tag.as_deref()),
    })
}

/// PATCH (application/json-patch+json) of an existing resource; the result must be a valid
/// `ty`. A failing operation leaves the resource as it was (409).
async fn json_patch(udr: &Udr, req: &SbiRequest, key: Key, ty: &'static Ty, what: &str) -> Answer {
    let cond = Conditions::from_headers(req.headers())?;
    sbi_body::require_media_type(req.headers(), &[sbi_body::JSON_PATCH_JSON])?;
    // Checked here so a malformed patch is a 400 before the store is touched.
    let _: Vec<Value> = sbi_body::decode_json(&req.body)?;
    let body = req.body.clone();
    let w = udr
        .policy
        .write_one(key, cond, true, move |old| {
            let mut doc = stored_doc(old)?;
            sbi_body::apply_json_patch(&mut doc, &body)?;
            model::validate(&doc, ty)?;
            encode(&doc)
        })
        .await?;
    written(udr, req, w, PatchAnswer::NoContent, what)
}

/// DELETE of one resource: 204.
pub(crate) async fn delete(udr: &Udr, req: &SbiRequest, key: Key, what: &str) -> Answer {
    let cond = Conditions::from_headers(req.headers())?;
    let w = udr.policy.write_one(key, cond, true, |_| Ok(None)).await?;
    written(udr, req, w, PatchAnswer::NoContent, what)
}

// --- PolicyDataForIndividualUe ---------------------------------------------------------------

/// PolicyDataSubset -> the UE parts it covers (`None`: the usage monitoring resources).
fn subset_part(name: &str) -> Option<Option<&'static str>> {
    Some(match name {
        "AM_POLICY_DATA" => Some(ids::AM_DATA),
        "SM_POLICY_DATA" => Some(ids::SM_DATA),
        "UE_POLICY_DATA" => Some(ids::UE_POLICY_SET),
        "OPERATOR_SPECIFIC_DATA" => Some(ids::OPERATOR_SPECIFIC_DATA),
        "UM_DATA" => None,
        _ => return None,
    })
}

/// GET /policy-data/ues/{ueId} (ReadPolicyData): the UE's policy data sets in one
/// PolicyDataForIndividualUe, `data-subset-names` choosing some (at least two).
pub async fn read_policy_data(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let ue = ue_id(&req)?.to_owned();
    let q = req.query();
    q.deny_unknown(&["supp-feat", "data-subset-names"])?;
    let names = q.array("data-subset-names");
    let mut wanted: Vec<Option<&str>> = Vec::new();
    if q.get("data-subset-names")?.is_some() || !names.is_empty() {
        let mut bad = None;
        for n in &names {
            match subset_part(n) {
                Some(p) => wanted.push(p),
                None => bad = Some(format!("{n:?} is not a PolicyDataSubset")),
            }
        }
        if names.len() < 2 {
            bad = Some("name at least two PolicyDataSubsets (or none: all)".into());
        }
        if let Some(why) = bad {
            return Err(ProblemDetails::invalid_params(
                cause::INVALID_QUERY_PARAM,
                vec![InvalidParam::new("data-subset-names", why)],
            )
            .into());
        }
    }
    let cond = Conditions::from_headers(req.headers())?;
    let rows = udr.policy.store.get_ue(ue.clone()).await?;
    if rows.is_empty() {
        return Err(user_not_found(&ue).into());
    }
    let include = |part: &str| {
        wanted.is_empty()
            || wanted.iter().any(|w| match w {
                Some(p) => *p == part,
                None => part.starts_with(ids::USAGE_MON_PREFIX),
            })
    };
    let rows: Vec<&(String, store::Row)> = rows.iter().filter(|(p, _)| include(p)).collect();
    if rows.is_empty() {
        return Err(
            data_not_found(&format!("policy data of the requested subsets for UE {ue}")).into()
        );
    }
    let tag = etag::composite_etag(rows.iter().map(|(p, r)| (p.as_str(), r.version)));
    if let Some(resp) = conditional_read(&cond, &tag, req.head.uri.path()) {
        return Ok(resp);
    }
    let mut out =
        Vec::with_capacity(rows.iter().map(|(_, r)| r.json.len() + 32).sum::<usize>() + 2);
    let mut first = true;
    let mut field = |out: &mut Vec<u8>, name: &str| {
        out.extend_from_slice(if first { b"{\"" } else { b",\"" });
        first = false;
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"\":");
    };
    for (part, attr) in [
        (ids::AM_DATA, "amPolicyDataSet"),
        (ids::UE_POLICY_SET, "uePolicyDataSet"),
        (ids::SM_DATA, "smPolicyDataSet"),
        (ids::OPERATOR_SPECIFIC_DATA, "operatorSpecificDataSet"),
    ] {
        if let Some((_, r)) = rows.iter().find(|(p, _)| p == part) {
            field(&mut out, attr);
            out.extend_from_slice(&r.json);
        }
    }
    let mut um = rows
        .iter()
        .filter_map(|(p, r)| Some((p.strip_prefix(ids::USAGE_MON_PREFIX)?, r)))
        .peekable();
    if um.peek().is_some() {
        field(&mut out, "umData");
        for (i, (id, r)) in um.enumerate() {
            out.push(if i == 0 { b'{' } else { b',' });
            let _ = serde_json::to_writer(&mut out, id);
            out.push(b':');
            out.extend_from_slice(&r.json);
        }
        out.push(b'}');
    }
    out.push(b'}');
    Ok(json_answer(StatusCode::OK, out, Some(&tag)))
}

// --- AccessAndMobilityPolicyData, UEPolicySet -------------------------------------------------

/// GET /policy-data/ues/{ueId}/am-data (ReadAccessAndMobilityPolicyData).
pub async fn read_access_and_mobility_policy_data(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let key = Key::ue(ue_id(&req)?, ids::AM_DATA);
    read(&udr, &req, key, "access and mobility policy data", &[]).await
}

/// GET /policy-data/ues/{ueId}/ue-policy-set (ReadUEPolicySet).
pub async fn read_ue_policy_set(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let key = Key::ue(ue_id(&req)?, ids::UE_POLICY_SET);
    read(&udr, &req, key, "UE policy set", &["supp-feat"]).await
}

/// PUT /policy-data/ues/{ueId}/ue-policy-set (CreateOrReplaceUEPolicySet).
pub async fn create_or_replace_ue_policy_set(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let key = Key::ue(ue_id(&req)?, ids::UE_POLICY_SET);
    put(&udr, &req, key, &model::UE_POLICY_SET, NUDR_DR_ROOT).await
}

/// PATCH /policy-data/ues/{ueId}/ue-policy-set (UpdateUEPolicySet, UePolicySetPatch): 204.
pub async fn update_ue_policy_set(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let key = Key::ue(ue_id(&req)?, ids::UE_POLICY_SET);
    let check = |p: &Value| model::check_patch(p, &model::UE_POLICY_SET_PATCH, "UePolicySetPatch");
    merge_patch(
        &udr,
        &req,
        key,
        check,
        &model::UE_POLICY_SET,
        PatchAnswer::NoContent,
        "UE policy set",
    )
    .await
}

// --- SessionManagementPolicyData and usage monitoring ------------------------------------------

/// The `snssai`, `dnn` and `fields` filters of ReadSessionManagementPolicyData, applied to a
/// stored SmPolicyData; `None` when nothing is left.
fn filter_sm_data(
    doc: Value,
    snssai: Option<&str>,
    dnn: Option<&str>,
    fields: &[String],
) -> Option<Value> {
    let mut doc = doc;
    if snssai.is_some() || dnn.is_some() {
        let map = doc.get_mut("smPolicySnssaiData")?.as_object_mut()?;
        map.retain(|_, v| {
            if let Some(want) = snssai {
                let s = v
                    .get("snssai")
                    .map(Value::to_string)
                    .and_then(|s| ids::canonical_snssai(&s).ok());
                if s.as_deref() != Some(want) {
                    return false;
                }
            }
            if let Some(want) = dnn {
                let Some(dnns) = v.get_mut("smPolicyDnnData").and_then(Value::as_object_mut) else {
                    return false;
                };
                dnns.retain(|k, d| {
                    let name = d.get("dnn").and_then(Value::as_str).unwrap_or(k);
                    name.eq_ignore_ascii_case(want)
                });
                return !dnns.is_empty();
            }
            true
        });
        if map.is_empty() {
            return None;
        }
    }
    if fields.is_empty() {
        return Some(doc);
    }
    let mut out = Value::Object(Map::new());
    for f in fields {
        if let Some(v) = doc.pointer(f) {
            put_at(&mut out, f, v.clone());
        }
    }
    (out.as_object().is_some_and(|o| !o.is_empty())).then_some(out)
}

/// Sets `v` at JSON pointer `ptr` of `out`, creating the objects on the way.
fn put_at(out: &mut Value, ptr: &str, v: Value) {
    let tokens: Vec<String> =
        ptr.split('/').skip(1).map(|t| t.replace("~1", "/").replace("~0", "~")).collect();
    let mut cur = out;
    for (i, t) in tokens.iter().enumerate() {
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
        let Value::Object(m) = cur else { return };
        if i + 1 == tokens.len() {
            m.insert(t.clone(), v);
            return;
        }
        cur = m.entry(t.clone()).or_insert(Value::Object(Map::new()));
    }
}

/// The `fields` query parameter as JSON pointers (an attribute name stands for `/name`).
fn fields_param(q: &sbi::query::Query) -> Vec<String> {
    q.array("fields")
        .into_iter()
        .map(|f| if f.starts_with('/') { f.to_owned() } else { format!("/{f}") })
        .collect()
}

/// GET /policy-data/ues/{ueId}/sm-data (ReadSessionManagementPolicyData): one indexed read,
/// the stored bytes answered as they are unless `snssai`, `dnn` or `fields` filter them.
pub async fn read_session_management_policy_data(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let key = Key::ue(ue_id(&req)?, ids::SM_DATA);
    const QUERY: [&str; 4] = ["snssai", "dnn", "fields", "supp-feat"];
    let filtered = req
        .head
        .uri
        .query()
        .is_some_and(|q| q.contains("snssai") || q.contains("dnn") || q.contains("fields"));
    if !filtered {
        return read(&udr, &req, key, "session management policy data", &QUERY).await;
    }
    let q = req.query();
    q.deny_unknown(&QUERY)?;
    let snssai = match q.get("snssai")? {
        None => None,
        Some(s) => Some(ids::canonical_snssai(s).map_err(|why| {
            ProblemDetails::invalid_params(
                cause::INVALID_QUERY_PARAM,
                vec![InvalidParam::new("snssai", why)],
            )
        })?),
    };
    let dnn = q.get("dnn")?;
    let fields = fields_param(&q);
    let cond = Conditions::from_headers(req.headers())?;
    let row = match udr.policy.store.get(key).await? {
        Found::Row(row) => row,
        other => return Err(not_found(other, &req, "session management policy data").into()),
    };
    let tag = etag::etag(row.version);
    if let Some(resp) = conditional_read(&cond, &tag, req.head.uri.path()) {
        return Ok(resp);
    }
    let doc: Value = stored_doc(Some(&row.json))?;
    let out = filter_sm_data(doc, snssai.as_deref(), dnn, &fields)
        .ok_or_else(|| data_not_found("session management policy data matching the query"))?;
    let bytes = serde_json::to_vec(&out)?;
    Ok(json_answer(StatusCode::OK, bytes, Some(&tag)))
}

/// PATCH /policy-data/ues/{ueId}/sm-data (UpdateSessionManagementPolicyData,
/// SmPolicyDataPatch): 204.
pub async fn update_session_management_policy_data(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let key = Key::ue(ue_id(&req)?, ids::SM_DATA);
    let check =
        |p: &Value| model::check_patch(p, &model::SM_POLICY_DATA_PATCH, "SmPolicyDataPatch");
    merge_patch(
        &udr,
        &req,
        key,
        check,
        &model::SM_POLICY_DATA,
        PatchAnswer::NoContent,
        "session management policy data",
    )
    .await
}

/// PUT /policy-data/ues/{ueId}/sm-data: creates or replaces the SmPolicyData (beyond TS 29.519,
/// as the reference call model uses it).
pub async fn replace_session_management_policy_data(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let key = Key::ue(ue_id(&req)?, ids::SM_DATA);
    put(&udr, &req, key, &model::SM_POLICY_DATA, NUDR_DR_ROOT).await
}

/// DELETE /policy-data/ues/{ueId}/sm-data (beyond TS 29.519, as the reference call model uses it).
pub async fn delete_session_management_policy_data(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let key = Key::ue(ue_id(&req)?, ids::SM_DATA);
    delete(&udr, &req, key, "session management policy data").await
}

/// GET /policy-data/ues/{ueId}/sm-data/{usageMonId} (ReadUsageMonitoringInformation).
pub async fn read_usage_monitoring_information(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let key = usage_mon_key(&req)?;
    read(&udr, &req, key, "usage monitoring information", &["supp-feat"]).await
}

/// PUT /policy-data/ues/{ueId}/sm-data/{usageMonId} (CreateUsageMonitoringResource): 201, or
/// 200 when it replaced one.
pub async fn create_usage_monitoring_resource(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let key = usage_mon_key(&req)?;
    put(&udr, &req, key, &model::USAGE_MON_DATA, NUDR_DR_ROOT).await
}

/// DELETE /policy-data/ues/{ueId}/sm-data/{usageMonId} (DeleteUsageMonitoringInformation).
pub async fn delete_usage_monitoring_information(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let key = usage_mon_key(&req)?;
    delete(&udr, &req, key, "usage monitoring information").await
}

// --- OperatorSpecificData --------------------------------------------------------------------

/// GET /policy-data/ues/{ueId}/operator-specific-data (ReadOperatorSpecificData); `fields`
/// names the data elements (map keys, or JSON pointers below them) to return.
pub async fn read_operator_specific_data(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let key = Key::ue(ue_id(&req)?, ids::OPERATOR_SPECIFIC_DATA);
    const QUERY: [&str; 2] = ["fields", "supp-feat"];
    let q = req.query();
    let fields = fields_param(&q);
    if fields.is_empty() {
        return read(&udr, &req, key, "operator specific data", &QUERY).await;
    }
    q.deny_unknown(&QUERY)?;
    let cond = Conditions::from_headers(req.headers())?;
    let row = match udr.policy.store.get(key).await? {
        Found::Row(row) => row,
        other => return Err(not_found(other, &req, "operator specific data").into()),
    };
    let tag = etag::etag(row.version);
    if let Some(resp) = conditional_read(&cond, &tag, req.head.uri.path()) {
        return Ok(resp);
    }
    let doc: Value = stored_doc(Some(&row.json))?;
    let mut out = Value::Object(Map::new());
    for f in &fields {
        if let Some(v) = doc.pointer(f) {
            put_at(&mut out, f, v.clone());
        }
    }
    if out.as_object().is_none_or(Map::is_empty) {
        return Err(data_not_found("operator specific data of the requested fields").into());
    }
    let bytes = serde_json::to_vec(&out)?;
    Ok(json_answer(StatusCode::OK, bytes, Some(&tag)))
}

/// PATCH /policy-data/ues/{ueId}/operator-specific-data (UpdateOperatorSpecificData, JSON
/// patch): 204; applied atomically (a failing operation is 409 and changes nothing).
pub async fn update_operator_specific_data(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let key = Key::ue(ue_id(&req)?, ids::OPERATOR_SPECIFIC_DATA);
    json_patch(&udr, &req, key, &model::OPERATOR_SPECIFIC_DATA, "operator specific data").await
}

/// PUT /policy-data/ues/{ueId}/operator-specific-data (ReplaceOperatorSpecificData).
pub async fn replace_operator_specific_data(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let key = Key::ue(ue_id(&req)?, ids::OPERATOR_SPECIFIC_DATA);
    put(&udr, &req, key, &model::OPERATOR_SPECIFIC_DATA, NUDR_DR_ROOT).await
}

/// DELETE /policy-data/ues/{ueId}/operator-specific-data (DeleteOperatorSpecificData).
pub async fn delete_operator_specific_data(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let key = Key::ue(ue_id(&req)?, ids::OPERATOR_SPECIFIC_DATA);
    delete(&udr, &req, key, "operator specific data").await
}

// --- PLMN, sponsor, BDT, slice and MBS data --------------------------------------------------

/// GET /policy-data/plmns/{plmnId}/ue-policy-set (ReadPlmnUePolicySet).
pub async fn read_plmn_ue_policy_set(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let key = other_key(&req, Kind::Plmn)?;
    read(&udr, &req, key, "UE policy set for this PLMN", &[]).await
}

/// GET /policy-data/sponsor-connectivity-data/{sponsorId} (ReadSponsorConnectivityData).
pub async fn read_sponsor_connectivity_data(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let key = other_key(&req, Kind::Sponsor)?;
    read(&udr, &req, key, "sponsor connectivity data for this sponsor", &[]).await
}

/// GET /policy-data/bdt-data (ReadBdtData): every BDT data, or those of `bdt-ref-ids`, as an
/// array (empty when none).
pub async fn read_bdt_data(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let q = req.query();
    q.deny_unknown(&["bdt-ref-ids", "supp-feat"])?;
    let wanted: Vec<String> = q.array("bdt-ref-ids").into_iter().map(str::to_owned).collect();
    if q.get("bdt-ref-ids").is_ok_and(|v| v.is_some()) && wanted.is_empty() {
        return Err(ProblemDetails::invalid_params(
            cause::INVALID_QUERY_PARAM,
            vec![InvalidParam::new("bdt-ref-ids", "name at least one BDT reference id")],
        )
        .into());
    }
    let ids = (!wanted.is_empty()).then_some(wanted);
    let rows = udr.policy.store.get_kind(Kind::Bdt, ids).await?;
    let mut out = Vec::with_capacity(rows.iter().map(|(_, r)| r.json.len() + 1).sum::<usize>() + 2);
    out.push(b'[');
    for (i, (_, r)) in rows.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&r.json);
    }
    out.push(b']');
    Ok(json_answer(StatusCode::OK, out, None))
}

/// GET /policy-data/bdt-data/{bdtReferenceId} (ReadIndividualBdtData).
pub async fn read_individual_bdt_data(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let key = other_key(&req, Kind::Bdt)?;
    read(&udr, &req, key, "BDT data for this BDT reference", &["supp-feat"]).await
}

/// PUT /policy-data/bdt-data/{bdtReferenceId} (CreateIndividualBdtData): 201, or 200 when it
/// replaced one.
pub async fn create_individual_bdt_data(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let key = other_key(&req, Kind::Bdt)?;
    put(&udr, &req, key, &model::BDT_DATA, NUDR_DR_ROOT).await
}

/// PATCH /policy-data/bdt-data/{bdtReferenceId} (UpdateIndividualBdtData, BdtDataPatch): 200
/// with the BdtData.
pub async fn update_individual_bdt_data(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let key = other_key(&req, Kind::Bdt)?;
    let check = |p: &Value| model::check_patch(p, &model::BDT_DATA_PATCH, "BdtDataPatch");
    merge_patch(
        &udr,
        &req,
        key,
        check,
        &model::BDT_DATA,
        PatchAnswer::Document,
        "BDT data for this BDT reference",
    )
    .await
}

/// DELETE /policy-data/bdt-data/{bdtReferenceId} (DeleteIndividualBdtData).
pub async fn delete_individual_bdt_data(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let key = other_key(&req, Kind::Bdt)?;
    delete(&udr, &req, key, "BDT data for this BDT reference").await
}

/// GET /policy-data/slice-control-data/{snssai} (ReadSlicePolicyControlData).
pub async fn read_slice_policy_control_data(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let key = other_key(&req, Kind::Slice)?;
    read(&udr, &req, key, "slice policy control data for this S-NSSAI", &["supp-feat"]).await
}

/// PATCH /policy-data/slice-control-data/{snssai} (UpdateSlicePolicyControlData,
/// SlicePolicyDataPatch): 200 with the SlicePolicyData.
pub async fn update_slice_policy_control_data(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let key = other_key(&req, Kind::Slice)?;
    merge_patch(
        &udr,
        &req,
        key,
        model::check_slice_patch,
        &model::SLICE_POLICY_DATA,
        PatchAnswer::Document,
        "slice policy control data for this S-NSSAI",
    )
    .await
}

/// GET /policy-data/mbs-session-pol-data/{polSessionId} (GetMBSSessPolCtrlData).
pub async fn get_mbs_sess_pol_ctrl_data(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let key = other_key(&req, Kind::Mbs)?;
    read(&udr, &req, key, "MBS session policy control data for this session", &[]).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_semantics() {
        let mut doc = json!({"a": 1, "b": {"c": 2, "d": 3}, "e": [1]});
        merge(&mut doc, json!({"a": null, "b": {"c": 5, "x": {"y": 1}}, "e": [2]}));
        assert_eq!(doc, json!({"b": {"c": 5, "d": 3, "x": {"y": 1}}, "e": [2]}));
    }

    #[test]
    fn sm_data_filters() {
        let doc = json!({"smPolicySnssaiData": {
            "1-000001": {"snssai": {"sst": 1, "sd": "000001"}, "smPolicyDnnData": {
                "internet": {"dnn": "internet"}, "ims": {"dnn": "ims"}}},
            "2": {"snssai": {"sst": 2}, "smPolicyDnnData": {"internet": {"dnn": "internet"}}}
        }, "umData": {"u": {"limitId": "u"}}});
        let got = filter_sm_data(doc.clone(), Some("1-000001"), Some("IMS"), &[]).unwrap();
        assert_eq!(
            got["smPolicySnssaiData"],
            json!({"1-000001": {"snssai": {"sst": 1, "sd": "000001"}, "smPolicyDnnData": {"ims": {"dnn": "ims"}}}})
        );
        let got = filter_sm_data(doc.clone(), None, Some("internet"), &[]).unwrap();
        assert_eq!(got["smPolicySnssaiData"].as_object().unwrap().len(), 2);
        assert!(filter_sm_data(doc.clone(), Some("3"), None, &[]).is_none());
        let got = filter_sm_data(doc.clone(), None, None, &["/umData".into()]).unwrap();
        assert_eq!(got, json!({"umData": {"u": {"limitId": "u"}}}));
        assert!(filter_sm_data(doc, None, None, &["/nothing".into()]).is_none());
    }
}
