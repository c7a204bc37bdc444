//! Nbsf_Management for PDU session bindings (TS 29.521 §5.2.2.2-5, resources §6.1.3.2-3):
//! Register (POST pcfBindings), Discovery (GET pcfBindings?...), Update (PATCH
//! pcfBindings/{bindingId}, merge patch) and Deregister (DELETE pcfBindings/{bindingId}).

use std::sync::Arc;

use http::{header, HeaderValue, StatusCode};
use nf::{Answer, NfError};
use sbi::body::{self, MERGE_PATCH_JSON};
use sbi::problem::cause;
use sbi::{empty_response, Body, InvalidParam, ProblemDetails, Response, SbiRequest};
use serde_json::Value;

use crate::config::ExistingBinding;
use crate::context::Bsf;
use crate::models::{self, Errors};
use crate::store::{Created, Lookup, NewBinding, Updated};
use crate::subscriptions::BindingEvent;
use crate::ue_address_index::{Discovered, Filter, UeAddressIndex};

/// The TS 29.521 cause of a 403 for an existing binding (Nbsf_Management_Register).
pub const EXISTING_BINDING_INFO_FOUND: &str = "EXISTING_BINDING_INFO_FOUND";

/// Query parameters of GetPCFBindings.
const DISCOVERY_PARAMS: [&str; 9] = [
    "ipv4Addr",
    "ipv6Prefix",
    "macAddr48",
    "dnn",
    "supi",
    "gpsi",
    "snssai",
    "ipDomain",
    "supp-feat",
];

/// IPv6 prefix lengths tried when a consumer looks a UE up by one of its addresses (the BSF
/// stores the prefix the PCF registered, typically /64; consumers send the address as /128).
pub(crate) const PREFIX_LENGTHS: [u8; 6] = [128, 64, 60, 56, 48, 32];

/// The prefixes a binding for `addr/len` may be stored under: the network at `len`, then at the
/// shorter [`PREFIX_LENGTHS`] (Discovery's ipv6Prefix and the Rx proxy's Framed-IPv6-Prefix).
pub(crate) fn candidate_prefixes(addr: std::net::Ipv6Addr, len: u8) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for l2 in std::iter::once(len).chain(PREFIX_LENGTHS.into_iter().filter(|x| *x < len)) {
        let p = models::network_prefix(addr, l2);
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn location(bsf: &Bsf, req: &SbiRequest, id: &str) -> String {
    format!("{}/nbsf-management/v1/pcfBindings/{id}", bsf.api_root(Some(req)))
}

/// A response carrying an already-encoded JSON document.
fn raw_json(status: StatusCode, json: impl Into<Body>) -> Response {
    let mut resp = http::Response::new(json.into());
    *resp.status_mut() = status;
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(body::JSON));
    resp
}

fn set_location(resp: &mut Response, loc: &str) {
    if let Ok(v) = HeaderValue::from_str(loc) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
}

/// POST /pcfBindings: 201 with Location and the binding; an existing binding for the same UE
/// address, DNN and S-NSSAI is replaced or answered 403 per `on_existing_binding`.
pub async fn register(bsf: Arc<Bsf>, req: SbiRequest) -> Answer {
    let mut binding: Value = req.json()?;
    let keys = models::validate_binding(&mut binding)?;
    let id = crate::store::new_binding_id();
    // Encoded once: the store, the UE address index and the answer share this buffer.
    let json = bytes::Bytes::from(serde_json::to_vec(&binding)?);
    let reject = bsf.config.on_existing_binding == ExistingBinding::Reject;
    let new = NewBinding { id: id.clone(), keys, created_ms: now_ms(), json: json.clone() };
    let created = bsf.store.create(new, reject).await?;
    match created {
        Created::Inserted { replaced } => {
            for old in &replaced {
                tracing::debug!(old = %old.id, new = %id, "existing binding replaced");
                bsf.binding_event_stored(BindingEvent::Deregistered, &old.json);
            }
            // The keys went to the store; an event (rare: a subscription for this SUPI) reads
            // them again from the validated document.
            bsf.binding_event_stored(BindingEvent::Registered, &json);
            let mut resp = raw_json(StatusCode::CREATED, json);
            set_location(&mut resp, &location(&bsf, &req, &id));
            Ok(resp)
        }
        Created::Exists(existing) => Ok(existing_binding(&bsf, &req, &existing.id, &existing.json)),
    }
}

/// 403 ExtProblemDetails (ProblemDetails + BindingResp) naming the PCF of the existing binding,
/// with its URI in Location.
fn existing_binding(bsf: &Bsf, req: &SbiRequest, id: &str, json: &[u8]) -> Response {
    let existing: Value = serde_json::from_slice(json).unwrap_or(Value::Null);
    let problem = ProblemDetails::new(
        StatusCode::FORBIDDEN,
        EXISTING_BINDING_INFO_FOUND,
        "a PCF binding already exists for this UE address, DNN and S-NSSAI",
    );
    let mut v = serde_json::to_value(&problem).unwrap_or(Value::Null);
    let fqdn = existing.get("pcfSmFqdn").or_else(|| existing.get("pcfFqdn"));
    let eps = existing.get("pcfSmIpEndPoints").or_else(|| existing.get("pcfIpEndPoints"));
    if let Some(f) = fqdn {
        v["pcfSmFqdn"] = f.clone();
    }
    if let Some(e) = eps {
        v["pcfSmIpEndPoints"] = e.clone();
    }
    let mut resp = raw_json(StatusCode::FORBIDDEN, serde_json::to_vec(&v).unwrap_or_default());
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(body::PROBLEM_JSON));
    set_location(&mut resp, &location(bsf, req, id));
    resp
}

fn query_error(params: Vec<InvalidParam>) -> ProblemDetails {
    ProblemDetails::invalid_params(cause::INVALID_QUERY_PARAM, params)
}

/// The Lookup a GetPCFBindings query asks for, or the 400 naming every wrong parameter.
pub fn lookup(req: &SbiRequest) -> Result<Lookup, ProblemDetails> {
    let q = req.query();
    q.deny_unknown(&DISCOVERY_PARAMS)?;
    let mut bad = Vec::new();
    let mut l = Lookup::default();
    if let Some(v) = q.get("ipv4Addr")? {
        match models::parse_ipv4(v) {
            Some(_) => l.ipv4 = Some(v.to_owned()),
            None => {
                bad.push(InvalidParam::new("ipv4Addr", "must be a dotted-decimal IPv4 address"))
            }
        }
    }
    if let Some(v) = q.get("ipDomain")? {
        if q.get("ipv4Addr")?.is_none() {
            bad.push(InvalidParam::new("ipDomain", "only allowed with ipv4Addr"));
        } else {
            l.ip_domain = Some(v.to_owned());
        }
    }
    if let Some(v) = q.get("ipv6Prefix")? {
        match models::parse_ipv6_prefix(v) {
            Some((addr, len)) => {
                l.ipv6 = candidate_prefixes(addr, len);
                l.ipv6_query = Some((addr, len));
            }
            None => {
                bad.push(InvalidParam::new("ipv6Prefix", "must be an IPv6 prefix address/length"))
            }
        }
    }
    if let Some(v) = q.get("macAddr48")? {
        if models::check_mac(v) {
            l.mac = Some(v.to_ascii_lowercase());
        } else {
            bad.push(InvalidParam::new("macAddr48", "must be a MAC address xx-xx-xx-xx-xx-xx"));
        }
    }
    if let Some(v) = q.get("dnn")? {
        if models::check_dnn(v) {
            l.dnn = Some(v.to_ascii_lowercase());
        } else {
            bad.push(InvalidParam::new("dnn", "must be a DNN"));
        }
    }
    if let Some(v) = q.get("supi")? {
        if models::check_supi(v) {
            l.supi = Some(v.to_owned());
        } else {
            bad.push(InvalidParam::new("supi", "must be a SUPI (imsi-<digits>, nai-...)"));
        }
    }
    if let Some(v) = q.get("gpsi")? {
        if models::check_gpsi(v) {
            l.gpsi = Some(v.to_owned());
        } else {
            bad.push(InvalidParam::new("gpsi", "must be a GPSI (msisdn-<digits>, extid-...)"));
        }
    }
    if let Some(s) = q.json::<Value>("snssai")? {
        let mut errs = Errors::default();
        match models::check_snssai(&s, "snssai", &mut errs) {
            Some(x) if errs.is_empty() => l.snssai = Some(x),
            _ => bad.push(InvalidParam::new(
                "snssai",
                "must be an Snssai: sst 0..255, sd six hex digits",
            )),
        }
    }
    if !bad.is_empty() {
        return Err(query_error(bad));
    }
    if l.ipv4.is_none() && l.ipv6.is_empty() && l.mac.is_none() {
        return Err(ProblemDetails::invalid_params(
            cause::MANDATORY_QUERY_PARAM_MISSING,
            vec![InvalidParam::new(
                "ipv4Addr",
                "one of ipv4Addr, ipv6Prefix or macAddr48 is required",
            )],
        ));
    }
    Ok(l)
}

/// GET /pcfBindings?...: 200 with the (newest) matching binding, 204 when none; from the UE
/// address index when it keeps documents and covers the query, else from the store.
pub async fn discover(bsf: Arc<Bsf>, req: SbiRequest) -> Answer {
    let l = lookup(&req)?;
    if let Some(ix) = bsf.store.index() {
        match from_index(ix, &l) {
            Discovered::Found(doc) => return Ok(raw_json(StatusCode::OK, doc)),
            Discovered::None => return Ok(empty_response(StatusCode::NO_CONTENT)),
            Discovered::Unknown => {}
        }
    }
    match bsf.store.find(l).await? {
        Some(found) => Ok(raw_json(StatusCode::OK, found.json)),
        None => Ok(empty_response(StatusCode::NO_CONTENT)),
    }
}

/// Discovery by one UE address (IPv4 or IPv6; the index holds no MAC addresses) from the index.
fn from_index(ix: &UeAddressIndex, l: &Lookup) -> Discovered {
    if l.mac.is_some() {
        return Discovered::Unknown;
    }
    let filter = Filter {
        dnn: l.dnn.as_deref(),
        snssai: l.snssai.as_ref().map(|(sst, sd)| (*sst, sd.as_str())),
        supi: l.supi.as_deref(),
        gpsi: l.gpsi.as_deref(),
    };
    let v4 = l.ipv4.as_deref().and_then(models::parse_ipv4).map(|a| (a, l.ip_domain.as_deref()));
    let v6 = l.ipv6_query.map(|(a, len)| (a, len, &PREFIX_LENGTHS[..]));
    ix.discover(v4, v6, filter)
}

/// PATCH /pcfBindings/{bindingId} (application/merge-patch+json, PcfBindingPatch): 200 with the
/// updated binding; 404 for an unknown one.
pub async fn update(bsf: Arc<Bsf>, req: SbiRequest) -> Answer {
    body::require_media_type(req.headers(), &[MERGE_PATCH_JSON])?;
    let patch: Value = body::decode_json(&req.body)?;
    models::check_patch(&patch)?;
    let id = req.param("bindingId").to_owned();
    let patch_bytes = req.body.clone();
    let outcome = bsf
        .store
        .update(
            id.clone(),
            Box::new(move |old| {
                let mut doc = stored_document(&old)?;
                body::apply_merge_patch(&mut doc, &patch_bytes)?;
                let keys = models::validate_binding(&mut doc)?;
                Ok((keys, serde_json::to_vec(&doc)?))
            }),
        )
        .await?;
    match outcome {
        Updated::Done(json) => Ok(raw_json(StatusCode::OK, json)),
        Updated::NotFound => Err(ProblemDetails::not_found(format!("no PCF binding {id}")).into()),
        Updated::Refused(e) => Err(e),
    }
}

/// A document the store gave back; it was valid JSON when stored, so failing here is the
/// store's fault, not the consumer's.
pub(crate) fn stored_document(json: &[u8]) -> Result<Value, NfError> {
    serde_json::from_slice(json)
        .map_err(|e| NfError::internal(format!("stored binding unreadable: {e}")))
}

/// DELETE /pcfBindings/{bindingId}: 204; 404 for an unknown one.
pub async fn deregister(bsf: Arc<Bsf>, req: SbiRequest) -> Answer {
    let id = req.param("bindingId").to_owned();
    match bsf.store.delete(id.clone()).await? {
        Some(old) => {
            bsf.binding_event_stored(BindingEvent::Deregistered, &old.json);
            Ok(empty_response(StatusCode::NO_CONTENT))
        }
        None => Err(ProblemDetails::not_found(format!("no PCF binding {id}")).into()),
    }
}
