//! Nbsf_Management for PCF for an MBS session bindings (TS 29.521 Rel-17, `pcf-mbs-bindings`):
//! register (POST; an existing binding for the MBS session is replaced or answered 403
//! MbsExtProblemDetails per `on_existing_binding`), retrieval by `mbs-session-id` (GET, an
//! array), update (PATCH, PcfMbsBindingPatch), deletion (DELETE).

use std::sync::Arc;

use http::StatusCode;
use nf::Answer;
use sbi::body;
use sbi::problem::cause;
use sbi::{empty_response, InvalidParam, ProblemDetails, SbiRequest};
use serde_json::Value;

use crate::config::ExistingBinding;
use crate::context::Bsf;
use crate::models::{
    self, check_fqdn, check_uuid, parse_ipv4, parse_ipv6_prefix, string_field, Errors,
};
use crate::nbsf_management::EXISTING_BINDING_INFO_FOUND;
use crate::pcf_ue_bindings::{merge_patch, raw_json, with_location};
use crate::store::{Created, Keyed};

fn location(bsf: &Bsf, req: &SbiRequest, id: &str) -> String {
    format!("{}/nbsf-management/v1/pcf-mbs-bindings/{id}", bsf.api_root(Some(req)))
}

fn ip_addr(v: &Value, at: &str, errs: &mut Errors) -> String {
    let o = v.as_object();
    let one = |k: &str| o.and_then(|o| o.get(k)).and_then(Value::as_str);
    if let Some(a) = one("ipv4Addr").filter(|a| parse_ipv4(a).is_some()) {
        return a.to_owned();
    }
    if let Some(a) = one("ipv6Addr").and_then(|a| a.parse::<std::net::Ipv6Addr>().ok()) {
        return a.to_string();
    }
    if let Some((a, l)) = one("ipv6Prefix").and_then(parse_ipv6_prefix) {
        return models::canonical_prefix(a, l);
    }
    errs.bad(at, "must be an IpAddr with one of ipv4Addr, ipv6Addr, ipv6Prefix");
    String::new()
}

/// Checks an MbsSessionId (TS 29.571: tmgi and/or ssm, optional nid) at `at`; returns its
/// normalised key (`tmgi:<service id>:<mcc>-<mnc>|ssm:<source>><dest>|nid:<nid>`).
pub fn mbs_session_key(v: &Value, at: &str, errs: &mut Errors) -> String {
    let Some(o) = v.as_object() else {
        errs.bad(at, "must be an MbsSessionId object");
        return String::new();
    };
    let mut key = Vec::new();
    if let Some(t) = o.get("tmgi") {
        let svc = t.get("mbsServiceId").and_then(Value::as_str);
        let mcc = t.pointer("/plmnId/mcc").and_then(Value::as_str);
        let mnc = t.pointer("/plmnId/mnc").and_then(Value::as_str);
        let hex6 = |s: &str| s.len() == 6 && s.bytes().all(|b| b.is_ascii_hexdigit());
        let digits =
            |s: &str, n: &[usize]| n.contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit());
        match (svc, mcc, mnc) {
            (Some(s), Some(c), Some(n)) if hex6(s) && digits(c, &[3]) && digits(n, &[2, 3]) => {
                key.push(format!("tmgi:{}:{c}-{n}", s.to_ascii_lowercase()))
            }
            _ => errs.bad(
                format!("{at}/tmgi"),
                "must be a Tmgi: mbsServiceId six hex digits, plmnId mcc/mnc",
            ),
        }
    }
    if let Some(s) = o.get("ssm") {
        let src = ip_addr(
            s.get("sourceIpAddr").unwrap_or(&Value::Null),
            &format!("{at}/ssm/sourceIpAddr"),
            errs,
        );
        let dst = ip_addr(
            s.get("destIpAddr").unwrap_or(&Value::Null),
            &format!("{at}/ssm/destIpAddr"),
            errs,
        );
        key.push(format!("ssm:{src}>{dst}"));
    }
    if let Some(n) = o.get("nid") {
        match n.as_str().filter(|n| n.len() == 11 && n.bytes().all(|b| b.is_ascii_hexdigit())) {
            Some(n) => key.push(format!("nid:{}", n.to_ascii_lowercase())),
            None => errs.bad(format!("{at}/nid"), "must be a Nid (eleven hex digits)"),
        }
    }
    if !o.contains_key("tmgi") && !o.contains_key("ssm") {
        errs.missing(format!("{at}/tmgi"));
    }
    key.join("|")
}

/// Checks a PcfMbsBinding; returns its MBS session key.
pub fn validate(v: &Value) -> Result<String, ProblemDetails> {
    let Some(obj) = v.as_object() else {
        return Err(ProblemDetails::bad_request(
            cause::INVALID_MSG_FORMAT,
            "PcfMbsBinding must be a JSON object",
        ));
    };
    let mut errs = Errors::default();
    let key = match obj.get("mbsSessionId") {
        None => {
            errs.missing("/mbsSessionId");
            String::new()
        }
        Some(m) => mbs_session_key(m, "/mbsSessionId", &mut errs),
    };
    string_field(obj, "pcfFqdn", check_fqdn, "must be an FQDN", &mut errs);
    if let Some(eps) = obj.get("pcfIpEndPoints") {
        models::check_ip_endpoints(eps, "/pcfIpEndPoints", &mut errs);
    }
    string_field(obj, "pcfId", check_uuid, "must be an NfInstanceId (UUID)", &mut errs);
    string_field(obj, "pcfSetId", |s| !s.is_empty(), "must be an NfSetId", &mut errs);
    string_field(obj, "bindLevel", |s| !s.is_empty(), "must be a BindingLevel", &mut errs);
    string_field(
        obj,
        "recoveryTime",
        |s| chrono::DateTime::parse_from_rfc3339(s).is_ok(),
        "must be an RFC 3339 date-time",
        &mut errs,
    );
    string_field(
        obj,
        "suppFeat",
        |s| s.bytes().all(|b| b.is_ascii_hexdigit()),
        "must be hexadecimal",
        &mut errs,
    );
    errs.finish().map(|()| key)
}

/// POST /pcf-mbs-bindings: 201 with Location and the binding; 403 MbsExtProblemDetails when
/// the MBS session has a binding and the policy is `reject`.
pub async fn register(bsf: Arc<Bsf>, req: SbiRequest) -> Answer {
    let binding: Value = req.json()?;
    let key = validate(&binding)?;
    let id = crate::store::new_binding_id();
    let json = serde_json::to_vec(&binding)?;
    let reject = bsf.config.on_existing_binding == ExistingBinding::Reject;
    match bsf
        .store
        .create_keyed(Keyed::PcfForMbs, id.clone(), key, None, json.clone(), reject)
        .await?
    {
        Created::Inserted { .. } => Ok(with_location(
            raw_json(StatusCode::CREATED, body::JSON, json),
            &location(&bsf, &req, &id),
        )),
        Created::Exists(existing) => {
            let old: Value = serde_json::from_slice(&existing.json).unwrap_or(Value::Null);
            let p = ProblemDetails::new(
                StatusCode::FORBIDDEN,
                EXISTING_BINDING_INFO_FOUND,
                "a PCF binding already exists for this MBS session",
            );
            let mut v = serde_json::to_value(&p).unwrap_or(Value::Null);
            for k in ["pcfFqdn", "pcfIpEndPoints"] {
                if let Some(x) = old.get(k) {
                    v[k] = x.clone();
                }
            }
            let resp = raw_json(
                StatusCode::FORBIDDEN,
                body::PROBLEM_JSON,
                serde_json::to_vec(&v).unwrap_or_default(),
            );
            Ok(with_location(resp, &location(&bsf, &req, &existing.id)))
        }
    }
}

/// GET /pcf-mbs-bindings?mbs-session-id=<JSON>: 200 with the matching bindings.
pub async fn discover(bsf: Arc<Bsf>, req: SbiRequest) -> Answer {
    let q = req.query();
    q.deny_unknown(&["mbs-session-id", "supp-feat"])?;
    let Some(id) = q.json::<Value>("mbs-session-id")? else {
        return Err(ProblemDetails::invalid_params(
            cause::MANDATORY_QUERY_PARAM_MISSING,
            vec![InvalidParam::new("mbs-session-id", "mandatory query parameter is missing")],
        )
        .into());
    };
    let mut errs = Errors::default();
    let key = mbs_session_key(&id, "mbs-session-id", &mut errs);
    if !errs.is_empty() {
        return Err(ProblemDetails::invalid_params(
            cause::INVALID_QUERY_PARAM,
            vec![InvalidParam::new("mbs-session-id", "must be an MbsSessionId (tmgi and/or ssm)")],
        )
        .into());
    }
    let found = bsf.store.find_keyed(Keyed::PcfForMbs, Some(key), None).await?;
    let docs: Vec<Value> =
        found.iter().filter_map(|s| serde_json::from_slice(&s.json).ok()).collect();
    Ok(sbi::json_response(StatusCode::OK, &docs)?)
}

/// PATCH /pcf-mbs-bindings/{bindingId} (PcfMbsBindingPatch): 200 with the binding; 404.
pub async fn update(bsf: Arc<Bsf>, req: SbiRequest) -> Answer {
    let allowed = ["pcfFqdn", "pcfIpEndPoints", "pcfId"];
    let what = "PCF for an MBS session binding";
    merge_patch(&bsf, Keyed::PcfForMbs, &req, &allowed, |d| validate(d).map(drop), what).await
}

/// DELETE /pcf-mbs-bindings/{bindingId}: 204; 404.
pub async fn deregister(bsf: Arc<Bsf>, req: SbiRequest) -> Answer {
    let id = req.param("bindingId").to_owned();
    match bsf.store.delete_keyed(Keyed::PcfForMbs, id.clone()).await? {
        Some(_) => Ok(empty_response(StatusCode::NO_CONTENT)),
        None => {
            Err(ProblemDetails::not_found(format!("no PCF for an MBS session binding {id}")).into())
        }
    }
}
