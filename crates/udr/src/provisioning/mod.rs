//! The UDR's provisioning REST API (`/udr-prov/v1`, our own, specified in
//! docs/udr-provisioning.yaml): create, read, update and delete of SLF entries
//! ([`slf_entries`]) and of EIR entries, single IMEIs and IMEI ranges ([`eir_entries`]).
//!
//! Bodies are checked attribute by attribute and every wrong one is listed in one 400
//! (`invalidParams`, JSON pointers); unknown attributes are refused, since a misspelt optional
//! attribute would otherwise be dropped without a word. The same checks read the rows of a bulk
//! import ([`crate::import`]), so a file row and a REST body mean the same thing.

pub mod eir_entries;
pub mod slf_entries;

use http::{header, HeaderValue, StatusCode};
use sbi::problem::cause;
use sbi::router::RouterBuilder;
use sbi::{Body, InvalidParam, ProblemDetails, Response, SbiRequest};
use serde_json::{Map, Value};

use crate::context::Udr;

/// The API's path prefix.
pub const PREFIX: &str = "/udr-prov/v1";

/// 409 cause: a create names an entry (or an identity of one) that exists already.
pub const ENTRY_EXISTS: &str = "ENTRY_EXISTS";
/// 409 cause: an IMEI range would overlap another.
pub const RANGE_OVERLAP: &str = "RANGE_OVERLAP";

/// Adds every provisioning route to the UDR's router.
pub fn routes(b: RouterBuilder<Udr>) -> RouterBuilder<Udr> {
    eir_entries::routes(slf_entries::routes(b))
}

/// The wrong attributes of one body (or one import row).
#[derive(Debug, Default)]
pub struct Errors {
    params: Vec<InvalidParam>,
    missing: bool,
}

impl Errors {
    pub fn bad(&mut self, pointer: impl Into<String>, reason: impl Into<String>) {
        self.params.push(InvalidParam::new(pointer, reason));
    }

    pub fn missing(&mut self, pointer: impl Into<String>) {
        self.missing = true;
        self.params.push(InvalidParam::new(pointer, "mandatory attribute is missing"));
    }

    /// `value` when nothing was wrong, else the 400 listing every wrong attribute (cause
    /// MANDATORY_IE_MISSING when one is missing, else MANDATORY_IE_INCORRECT).
    pub fn finish<T>(self, value: Option<T>) -> Result<T, ProblemDetails> {
        match value {
            Some(v) if self.params.is_empty() => Ok(v),
            _ => Err(self.into_problem()),
        }
    }

    pub fn into_problem(self) -> ProblemDetails {
        let c =
            if self.missing { cause::MANDATORY_IE_MISSING } else { cause::MANDATORY_IE_INCORRECT };
        if self.params.is_empty() {
            return ProblemDetails::bad_request(c, "the body is not valid");
        }
        ProblemDetails::invalid_params(c, self.params)
    }
}

/// One line naming every wrong attribute of a problem (`/a: why; /b: why`), for import reports.
pub fn describe(p: &ProblemDetails) -> String {
    if p.invalid_params.is_empty() {
        return p.detail.clone().unwrap_or_else(|| "invalid".into());
    }
    p.invalid_params
        .iter()
        .map(|ip| format!("{}: {}", ip.param, ip.reason.as_deref().unwrap_or("invalid")))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The body's members when it is an object holding only `allowed` attributes (the others are
/// reported).
pub fn object<'a>(
    v: &'a Value,
    what: &str,
    allowed: &[&str],
    errs: &mut Errors,
) -> Option<&'a Map<String, Value>> {
    let Some(obj) = v.as_object() else {
        errs.bad("/", format!("{what} must be a JSON object"));
        return None;
    };
    for k in obj.keys().filter(|k| !allowed.contains(&k.as_str())) {
        errs.bad(format!("/{}", pointer_token(k)), format!("{what} has no attribute {k:?}"));
    }
    Some(obj)
}

/// A mandatory string attribute.
pub fn required_str<'a>(
    obj: &'a Map<String, Value>,
    name: &str,
    errs: &mut Errors,
) -> Option<&'a str> {
    match obj.get(name) {
        None | Some(Value::Null) => {
            errs.missing(format!("/{name}"));
            None
        }
        Some(Value::String(s)) => Some(s),
        Some(_) => {
            errs.bad(format!("/{name}"), "must be a string");
            None
        }
    }
}

/// An optional array of identities, each passing `check`, at most `max`, none twice. A longer
/// array is one fault, its items unchecked, so an oversized body costs no more than one at the
/// limit.
pub fn identity_list(
    obj: &Map<String, Value>,
    name: &str,
    max: usize,
    check: impl Fn(&str) -> bool,
    what: &str,
    errs: &mut Errors,
) -> Vec<String> {
    let Some(v) = obj.get(name).filter(|v| !v.is_null()) else { return Vec::new() };
    let Some(items) = v.as_array() else {
        errs.bad(format!("/{name}"), "must be an array");
        return Vec::new();
    };
    if items.len() > max {
        errs.bad(format!("/{name}"), format!("at most {max} entries, not {}", items.len()));
        return Vec::new();
    }
    let mut out: Vec<String> = Vec::with_capacity(items.len());
    let mut seen = rustc_hash::FxHashSet::default();
    for (i, item) in items.iter().enumerate() {
        match item.as_str() {
            Some(s) if check(s) && seen.insert(s) => out.push(s.to_owned()),
            Some(s) if check(s) => {
                errs.bad(format!("/{name}/{i}"), format!("{s:?} is listed twice"))
            }
            _ => errs.bad(format!("/{name}/{i}"), format!("not a {what}")),
        }
    }
    out
}

/// An object key as a JSON pointer token (RFC 6901).
pub fn pointer_token(k: &str) -> String {
    k.replace('~', "~0").replace('/', "~1")
}

/// A path segment percent-encoded (identities such as `impu-sip:a@b` or `nai-x/y`).
pub fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b':' | b'@' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// `{apiRoot}/udr-prov/v1{path}`.
pub fn location(udr: &Udr, req: &SbiRequest, path: &str) -> String {
    format!("{}{PREFIX}{path}", udr.api_root(Some(req)))
}

/// An answer carrying `value` as JSON, with `Location` when given.
pub fn json(status: StatusCode, value: &Value, location: Option<&str>) -> Response {
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    let mut resp = http::Response::new(Body::from(bytes));
    *resp.status_mut() = status;
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(sbi::body::JSON));
    if let Some(loc) = location.and_then(|l| HeaderValue::from_str(l).ok()) {
        resp.headers_mut().insert(header::LOCATION, loc);
    }
    resp
}

/// 404 RESOURCE_NOT_FOUND.
pub fn not_found(what: impl Into<String>) -> ProblemDetails {
    ProblemDetails::not_found(what)
}

/// 400 for a path parameter that cannot name a resource.
pub fn bad_path_param(name: &str, why: impl Into<String>) -> ProblemDetails {
    ProblemDetails::invalid_params(
        cause::MANDATORY_IE_INCORRECT,
        vec![InvalidParam::new(name, why)],
    )
}

/// 409 with `cause`, naming the attribute at fault.
pub fn conflict(cause: &str, pointer: &str, detail: String) -> ProblemDetails {
    let mut p = ProblemDetails::new(StatusCode::CONFLICT, cause, detail.clone());
    p.invalid_params = vec![InvalidParam::new(pointer, detail)];
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_encoded() {
        assert_eq!(encode_segment("imsi-001010000000001"), "imsi-001010000000001");
        assert_eq!(encode_segment("impu-sip:a@b.org"), "impu-sip:a@b.org");
        assert_eq!(encode_segment("nai-a/b c+d"), "nai-a%2Fb%20c%2Bd");
    }

    #[test]
    fn errors_list_every_attribute() {
        let v = serde_json::json!({"a": 1, "b/c": 2});
        let mut errs = Errors::default();
        let obj = object(&v, "X", &["a"], &mut errs).unwrap();
        assert!(required_str(obj, "a", &mut errs).is_none());
        assert!(required_str(obj, "z", &mut errs).is_none());
        let p = errs.into_problem();
        assert_eq!(p.cause.as_deref(), Some(cause::MANDATORY_IE_MISSING));
        assert_eq!(describe(&p), "/b~1c: X has no attribute \"b/c\"; /a: must be a string; /z: mandatory attribute is missing");
    }
}
