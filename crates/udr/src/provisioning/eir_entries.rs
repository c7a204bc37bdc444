//! EIR entries: single IMEIs (`/udr-prov/v1/eir/imeis/{imei}`) and IMEI ranges
//! (`/udr-prov/v1/eir/imei-ranges/{start}`), each with an EquipmentStatus and optionally bound
//! to SUPIs and/or GPSIs (see [`crate::eir`] for how a lookup uses them).
//!
//! IMEIs are given as their 14 digits (TAC + serial number) or as 15 digits ending with the
//! right Luhn check digit, and always answered as 14 digits. A range is addressed by its first
//! IMEI; ranges never overlap (409 RANGE_OVERLAP names the one in the way).

use std::sync::Arc;

use http::{Method, StatusCode};
use nf::Answer;
use sbi::router::RouterBuilder;
use sbi::{empty_response, ProblemDetails, SbiRequest};
use serde_json::{Map, Value};

use super::{
    bad_path_param, conflict, identity_list, location, not_found, object, Errors, ENTRY_EXISTS,
    RANGE_OVERLAP,
};
use crate::config::ProvisioningLimits;
use crate::context::Udr;
use crate::eir::{
    self, format_imei, Binding, EquipmentStatus, ImeiEntry, RangeConflict, RangeEntry,
};

const IMEI_ATTRS: [&str; 4] = ["imei", "status", "supis", "gpsis"];
const RANGE_ATTRS: [&str; 5] = ["start", "end", "status", "supis", "gpsis"];

pub fn routes(b: RouterBuilder<Udr>) -> RouterBuilder<Udr> {
    const IMEIS: &str = "/udr-prov/v1/eir/imeis";
    const IMEI: &str = "/udr-prov/v1/eir/imeis/{imei}";
    const RANGES: &str = "/udr-prov/v1/eir/imei-ranges";
    const RANGE: &str = "/udr-prov/v1/eir/imei-ranges/{start}";
    b.route(Method::POST, IMEIS, "UdrProv_CreateEirImei", create_imei)
        .route(Method::GET, IMEI, "UdrProv_GetEirImei", get_imei)
        .route(Method::PUT, IMEI, "UdrProv_ReplaceEirImei", replace_imei)
        .route(Method::DELETE, IMEI, "UdrProv_DeleteEirImei", delete_imei)
        .route(Method::POST, RANGES, "UdrProv_CreateEirImeiRange", create_range)
        .route(Method::GET, RANGE, "UdrProv_GetEirImeiRange", get_range)
        .route(Method::PUT, RANGE, "UdrProv_ReplaceEirImeiRange", replace_range)
        .route(Method::DELETE, RANGE, "UdrProv_DeleteEirImeiRange", delete_range)
}

pub use crate::eir::EirItem;

/// Reads an EirImeiEntry (it has `imei`) or an EirImeiRange (it has `start`).
pub fn parse_item(v: &Value, limits: &ProvisioningLimits) -> Result<EirItem, ProblemDetails> {
    if v.get("imei").is_some() || v.get("start").is_none() {
        parse_imei_entry(v, None, limits).map(EirItem::Imei)
    } else {
        parse_range_entry(v, None, limits).map(EirItem::Range)
    }
}

/// An IMEI attribute: mandatory unless the URI names it (then it must agree).
fn imei_attr(
    obj: &Map<String, Value>,
    name: &str,
    from_uri: Option<u64>,
    errs: &mut Errors,
) -> Option<u64> {
    let at = format!("/{name}");
    match (obj.get(name), from_uri) {
        (None | Some(Value::Null), Some(k)) => Some(k),
        (None | Some(Value::Null), None) => {
            errs.missing(at);
            None
        }
        (Some(Value::String(s)), uri) => match eir::parse_imei(s) {
            Ok(k) if uri.is_none_or(|u| u == k) => Some(k),
            Ok(_) => {
                errs.bad(at, "differs from the IMEI in the URI");
                None
            }
            Err(why) => {
                errs.bad(at, why);
                None
            }
        },
        (Some(_), _) => {
            errs.bad(at, "must be a string of 14 or 15 digits");
            None
        }
    }
}

fn status_attr(obj: &Map<String, Value>, errs: &mut Errors) -> Option<EquipmentStatus> {
    match obj.get("status") {
        None | Some(Value::Null) => {
            errs.missing("/status");
            None
        }
        Some(v) => {
            let s = v.as_str().and_then(EquipmentStatus::parse);
            if s.is_none() {
                errs.bad("/status", "one of WHITELISTED, BLACKLISTED, GREYLISTED");
            }
            s
        }
    }
}

fn binding_attrs(obj: &Map<String, Value>, max: usize, errs: &mut Errors) -> Binding {
    Binding {
        supis: identity_list(obj, "supis", max, eir::check_supi, "SUPI", errs),
        gpsis: identity_list(obj, "gpsis", max, eir::check_gpsi, "GPSI", errs),
    }
}

/// Reads an EirImeiEntry; `uri` is the IMEI of the URI (PUT), when there is one.
pub fn parse_imei_entry(
    v: &Value,
    uri: Option<u64>,
    limits: &ProvisioningLimits,
) -> Result<ImeiEntry, ProblemDetails> {
    let mut errs = Errors::default();
    let Some(obj) = object(v, "EirImeiEntry", &IMEI_ATTRS, &mut errs) else {
        return Err(errs.into_problem());
    };
    let imei = imei_attr(obj, "imei", uri, &mut errs);
    let status = status_attr(obj, &mut errs);
    let binding = binding_attrs(obj, limits.max_eir_bound_ids, &mut errs);
    errs.finish(imei.zip(status).map(|(imei, status)| ImeiEntry { imei, status, binding }))
}

/// Reads an EirImeiRange; `uri` is the start of the URI (PUT), when there is one.
pub fn parse_range_entry(
    v: &Value,
    uri: Option<u64>,
    limits: &ProvisioningLimits,
) -> Result<RangeEntry, ProblemDetails> {
    let mut errs = Errors::default();
    let Some(obj) = object(v, "EirImeiRange", &RANGE_ATTRS, &mut errs) else {
        return Err(errs.into_problem());
    };
    let start = imei_attr(obj, "start", uri, &mut errs);
    let end = imei_attr(obj, "end", None, &mut errs);
    if let (Some(s), Some(e)) = (start, end) {
        if e < s {
            errs.bad("/end", "the range ends before it starts");
        }
    }
    let status = status_attr(obj, &mut errs);
    let binding = binding_attrs(obj, limits.max_eir_bound_ids, &mut errs);
    let entry = start.zip(end).zip(status).map(|((start, end), status)| RangeEntry {
        start,
        end,
        status,
        binding,
    });
    errs.finish(entry)
}

fn with_binding(mut v: Map<String, Value>, status: EquipmentStatus, b: &Binding) -> Value {
    v.insert("status".into(), status.as_str().into());
    if !b.supis.is_empty() {
        v.insert("supis".into(), b.supis.clone().into());
    }
    if !b.gpsis.is_empty() {
        v.insert("gpsis".into(), b.gpsis.clone().into());
    }
    Value::Object(v)
}

pub fn imei_json(e: &ImeiEntry) -> Value {
    let mut v = Map::new();
    v.insert("imei".into(), format_imei(e.imei).into());
    with_binding(v, e.status, &e.binding)
}

pub fn range_json(e: &RangeEntry) -> Value {
    let mut v = Map::new();
    v.insert("start".into(), format_imei(e.start).into());
    v.insert("end".into(), format_imei(e.end).into());
    with_binding(v, e.status, &e.binding)
}

fn path_imei(req: &SbiRequest, name: &str) -> Result<u64, ProblemDetails> {
    eir::parse_imei(req.param(name)).map_err(|why| bad_path_param(name, why))
}

fn ok(v: &Value) -> Answer {
    Ok(super::json(StatusCode::OK, v, None))
}

/// POST /eir/imeis: 201 + Location; 409 ENTRY_EXISTS when the IMEI is listed already.
async fn create_imei(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let v: Value = req.json()?;
    let e = parse_imei_entry(&v, None, &udr.config.provisioning)?;
    if !udr.eir.create_imei(e.clone()).await? {
        let imei = format_imei(e.imei);
        return Err(
            conflict(ENTRY_EXISTS, "/imei", format!("IMEI {imei} is listed already")).into()
        );
    }
    let loc = location(&udr, &req, &format!("/eir/imeis/{}", format_imei(e.imei)));
    Ok(super::json(StatusCode::CREATED, &imei_json(&e), Some(&loc)))
}

async fn get_imei(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let imei = path_imei(&req, "imei")?;
    match udr.eir.get_imei(imei).await? {
        Some(e) => ok(&imei_json(&e)),
        None => Err(not_found(format!("IMEI {} is not listed", format_imei(imei))).into()),
    }
}

/// PUT /eir/imeis/{imei}: replaces status and binding; 404 when the IMEI is not listed.
async fn replace_imei(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let imei = path_imei(&req, "imei")?;
    let v: Value = req.json()?;
    let e = parse_imei_entry(&v, Some(imei), &udr.config.provisioning)?;
    if udr.eir.update_imei(e.clone()).await? {
        ok(&imei_json(&e))
    } else {
        Err(not_found(format!("IMEI {} is not listed", format_imei(imei))).into())
    }
}

async fn delete_imei(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let imei = path_imei(&req, "imei")?;
    if udr.eir.delete_imei(imei).await? {
        Ok(empty_response(StatusCode::NO_CONTENT))
    } else {
        Err(not_found(format!("IMEI {} is not listed", format_imei(imei))).into())
    }
}

fn range_conflict(c: RangeConflict, e: &RangeEntry) -> ProblemDetails {
    match c {
        RangeConflict::NotFound => not_found(no_range(e.start)),
        RangeConflict::Exists => conflict(
            ENTRY_EXISTS,
            "/start",
            format!("a range starting at {} exists already", format_imei(e.start)),
        ),
        RangeConflict::Overlaps(s, end) => conflict(
            RANGE_OVERLAP,
            "/end",
            format!("overlaps the range {}..{}", format_imei(s), format_imei(end)),
        ),
    }
}

fn no_range(start: u64) -> String {
    format!("no IMEI range starts at {}", format_imei(start))
}

/// POST /eir/imei-ranges: 201 + Location; 409 when a range starts there or it would overlap one.
async fn create_range(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let v: Value = req.json()?;
    let e = parse_range_entry(&v, None, &udr.config.provisioning)?;
    match udr.eir.create_range(e.clone()).await? {
        Ok(()) => {
            let loc = location(&udr, &req, &format!("/eir/imei-ranges/{}", format_imei(e.start)));
            Ok(super::json(StatusCode::CREATED, &range_json(&e), Some(&loc)))
        }
        Err(c) => Err(range_conflict(c, &e).into()),
    }
}

async fn get_range(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let start = path_imei(&req, "start")?;
    match udr.eir.get_range(start).await? {
        Some(e) => ok(&range_json(&e)),
        None => Err(not_found(no_range(start)).into()),
    }
}

/// PUT /eir/imei-ranges/{start}: replaces end, status and binding.
async fn replace_range(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let start = path_imei(&req, "start")?;
    let v: Value = req.json()?;
    let e = parse_range_entry(&v, Some(start), &udr.config.provisioning)?;
    match udr.eir.update_range(e.clone()).await? {
        Ok(()) => ok(&range_json(&e)),
        Err(c) => Err(range_conflict(c, &e).into()),
    }
}

async fn delete_range(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let start = path_imei(&req, "start")?;
    if udr.eir.delete_range(start).await? {
        Ok(empty_response(StatusCode::NO_CONTENT))
    } else {
        Err(not_found(no_range(start)).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const L: ProvisioningLimits = ProvisioningLimits {
        max_slf_ids_per_entry: 32,
        max_ids_per_request: 1000,
        max_eir_bound_ids: 100,
        max_sh_identities: 100,
        max_sh_profile_bytes: 1 << 18,
    };

    #[test]
    fn entries_parse_and_report_every_fault() {
        let e = parse_item(
            &json!({"imei": "352099001761481", "status": "BLACKLISTED",
            "supis": ["imsi-001010000000001"]}),
            &L,
        )
        .unwrap();
        let EirItem::Imei(e) = e else { panic!("an IMEI entry") };
        assert_eq!(e.imei, 35209900176148);
        assert_eq!(
            imei_json(&e),
            json!({"imei": "35209900176148", "status": "BLACKLISTED",
                "supis": ["imsi-001010000000001"]})
        );
        let r = parse_item(
            &json!({"start": "35209900000000", "end": "35209900999999",
            "status": "GREYLISTED"}),
            &L,
        )
        .unwrap();
        assert!(matches!(r, EirItem::Range(RangeEntry { start: 35209900000000, .. })));

        let p = parse_imei_entry(
            &json!({"imei": "352099001761482", "status": "OK", "supis": ["x"], "gpsis": "m"}),
            None,
            &L,
        )
        .unwrap_err();
        let params: Vec<&str> = p.invalid_params.iter().map(|p| p.param.as_str()).collect();
        assert_eq!(params, ["/imei", "/status", "/supis/0", "/gpsis"]);
        let p = parse_range_entry(
            &json!({"start": "35209900000009", "end": "35209900000001"}),
            None,
            &L,
        )
        .unwrap_err();
        let params: Vec<&str> = p.invalid_params.iter().map(|p| p.param.as_str()).collect();
        assert_eq!(params, ["/end", "/status"]);
        assert_eq!(p.cause.as_deref(), Some("MANDATORY_IE_MISSING"));
        // PUT: the URI names the IMEI; a different one in the body is refused.
        let put = json!({"imei": "35209900176149", "status": "WHITELISTED"});
        assert!(parse_imei_entry(&put, Some(35209900176148), &L).is_err());
        let put = json!({"status": "WHITELISTED"});
        assert_eq!(parse_imei_entry(&put, Some(35209900176148), &L).unwrap().imei, 35209900176148);
        // Past the limit: one fault for the list, its 100,000 items unchecked.
        let many: Vec<&str> = vec!["imsi-001010000000001"; 100_000];
        let p = parse_item(
            &json!({"imei": "35209900176148", "status": "BLACKLISTED",
            "supis": many}),
            &L,
        )
        .unwrap_err();
        assert_eq!(p.invalid_params.len(), 1);
        assert_eq!(p.invalid_params[0].param, "/supis");
    }
}
