//! ProblemDetails (TS 29.571 §5.2.4.1) and the causes of TS 29.500 §5.2.7.2.
//!
//! Every error an SBI port answers goes through [`ProblemDetails`], so a consumer can always read
//! `status` and `cause` from an `application/problem+json` body.

use http::{header, HeaderValue, StatusCode};
use serde::{Deserialize, Serialize};

use crate::body::Body;

/// TS 29.500 Table 5.2.7.2-1 causes, plus the few fivecore uses where that table defines none
/// (405, 406, 413, 415): those are documented in docs/sbi.md so consumers can rely on them.
pub mod cause {
    pub const INVALID_API: &str = "INVALID_API";
    pub const INVALID_MSG_FORMAT: &str = "INVALID_MSG_FORMAT";
    pub const INVALID_QUERY_PARAM: &str = "INVALID_QUERY_PARAM";
    pub const MANDATORY_QUERY_PARAM_INCORRECT: &str = "MANDATORY_QUERY_PARAM_INCORRECT";
    pub const OPTIONAL_QUERY_PARAM_INCORRECT: &str = "OPTIONAL_QUERY_PARAM_INCORRECT";
    pub const MANDATORY_QUERY_PARAM_MISSING: &str = "MANDATORY_QUERY_PARAM_MISSING";
    pub const MANDATORY_IE_INCORRECT: &str = "MANDATORY_IE_INCORRECT";
    pub const OPTIONAL_IE_INCORRECT: &str = "OPTIONAL_IE_INCORRECT";
    pub const MANDATORY_IE_MISSING: &str = "MANDATORY_IE_MISSING";
    pub const UNSPECIFIED_MSG_FAILURE: &str = "UNSPECIFIED_MSG_FAILURE";
    pub const MODIFICATION_NOT_ALLOWED: &str = "MODIFICATION_NOT_ALLOWED";
    pub const RESOURCE_NOT_FOUND: &str = "RESOURCE_NOT_FOUND";
    pub const RESOURCE_URI_STRUCTURE_NOT_FOUND: &str = "RESOURCE_URI_STRUCTURE_NOT_FOUND";
    pub const INCORRECT_LENGTH: &str = "INCORRECT_LENGTH";
    pub const SYSTEM_FAILURE: &str = "SYSTEM_FAILURE";
    pub const INSUFFICIENT_RESOURCES: &str = "INSUFFICIENT_RESOURCES";
    pub const NF_CONGESTION: &str = "NF_CONGESTION";
    pub const NF_SERVICE_FAILOVER: &str = "NF_SERVICE_FAILOVER";
    pub const TIMED_OUT_REQUEST: &str = "TIMED_OUT_REQUEST";
    // No cause is defined by TS 29.500 for these statuses; fivecore's own, see docs/sbi.md.
    pub const METHOD_NOT_ALLOWED: &str = "METHOD_NOT_ALLOWED";
    pub const NOT_ACCEPTABLE: &str = "NOT_ACCEPTABLE";
    pub const PAYLOAD_TOO_LARGE: &str = "PAYLOAD_TOO_LARGE";
    pub const UNSUPPORTED_MEDIA_TYPE: &str = "UNSUPPORTED_MEDIA_TYPE";
    pub const PRECONDITION_FAILED: &str = "PRECONDITION_FAILED";
}

/// The `cause` of a ProblemDetails answer, kept on the response so the metrics layer counts
/// errors by cause (`sbi_problems_total`) without reading the body. The causes of this crate's
/// table are borrowed; any other (an NF's own, or one relayed from a producer) is the answer's
/// own string moved here after serialising, so neither case allocates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProblemCause(pub std::borrow::Cow<'static, str>);

impl ProblemCause {
    fn of(cause: String) -> Self {
        use std::borrow::Cow;
        const KNOWN: [&str; 24] = [
            cause::INVALID_API,
            cause::INVALID_MSG_FORMAT,
            cause::INVALID_QUERY_PARAM,
            cause::MANDATORY_QUERY_PARAM_INCORRECT,
            cause::OPTIONAL_QUERY_PARAM_INCORRECT,
            cause::MANDATORY_QUERY_PARAM_MISSING,
            cause::MANDATORY_IE_INCORRECT,
            cause::OPTIONAL_IE_INCORRECT,
            cause::MANDATORY_IE_MISSING,
            cause::UNSPECIFIED_MSG_FAILURE,
            cause::MODIFICATION_NOT_ALLOWED,
            cause::RESOURCE_NOT_FOUND,
            cause::RESOURCE_URI_STRUCTURE_NOT_FOUND,
            cause::INCORRECT_LENGTH,
            cause::SYSTEM_FAILURE,
            cause::INSUFFICIENT_RESOURCES,
            cause::NF_CONGESTION,
            cause::NF_SERVICE_FAILOVER,
            cause::TIMED_OUT_REQUEST,
            cause::METHOD_NOT_ALLOWED,
            cause::NOT_ACCEPTABLE,
            cause::PAYLOAD_TOO_LARGE,
            cause::UNSUPPORTED_MEDIA_TYPE,
            cause::PRECONDITION_FAILED,
        ];
        match KNOWN.iter().copied().find(|k| *k == cause) {
            Some(k) => ProblemCause(Cow::Borrowed(k)),
            // A label value comes from the code or a producer's answer: keep it to the shape of
            // a 3GPP cause, so a peer cannot put arbitrary text (or unbounded variety) into it.
            None if cause.len() <= 64
                && !cause.is_empty()
                && cause
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_') =>
            {
                ProblemCause(Cow::Owned(cause))
            }
            None => ProblemCause(Cow::Borrowed("OTHER")),
        }
    }
}

/// One entry of `invalidParams`: `param` is a JSON pointer into the body (or a query parameter
/// name), `reason` says what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvalidParam {
    pub param: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl InvalidParam {
    pub fn new(param: impl Into<String>, reason: impl Into<String>) -> Self {
        InvalidParam { param: param.into(), reason: Some(reason.into()) }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ProblemDetails {
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub invalid_params: Vec<InvalidParam>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supported_features: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nrf_id: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub supported_api_versions: Vec<String>,
}

impl ProblemDetails {
    pub fn new(status: StatusCode, cause: &str, detail: impl Into<String>) -> Self {
        ProblemDetails {
            title: status.canonical_reason().map(str::to_owned),
            status: Some(status.as_u16()),
            detail: Some(detail.into()),
            cause: Some(cause.to_owned()),
            ..Default::default()
        }
    }

    pub fn bad_request(cause: &str, detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, cause, detail)
    }

    /// A 400 listing every wrong field, the answer to a body or query that fails validation.
    pub fn invalid_params(cause: &str, params: Vec<InvalidParam>) -> Self {
        let detail = match params.as_slice() {
            [one] => format!("invalid parameter {}", one.param),
            many => format!("{} invalid parameters", many.len()),
        };
        ProblemDetails { invalid_params: params, ..Self::bad_request(cause, detail) }
    }

    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, cause::RESOURCE_NOT_FOUND, detail)
    }

    pub fn internal(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, cause::SYSTEM_FAILURE, detail)
    }

    /// The same problem answered with another status (title follows).
    pub fn with_status(mut self, status: StatusCode) -> Self {
        self.status = Some(status.as_u16());
        self.title = status.canonical_reason().map(str::to_owned);
        self
    }

    pub fn with_instance(mut self, instance: impl Into<String>) -> Self {
        self.instance = Some(instance.into());
        self
    }

    pub fn status_code(&self) -> StatusCode {
        self.status
            .and_then(|s| StatusCode::from_u16(s).ok())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    /// The `application/problem+json` response carrying this problem.
    pub fn into_response(self) -> http::Response<Body> {
        let status = self.status_code();
        // Serialising a struct of strings and integers cannot fail.
        let bytes = serde_json::to_vec(&self).unwrap_or_default();
        let mut resp = http::Response::new(Body::from(bytes));
        *resp.status_mut() = status;
        resp.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(crate::body::PROBLEM_JSON));
        if let Some(cause) = self.cause {
            resp.extensions_mut().insert(ProblemCause::of(cause));
        }
        resp
    }
}

impl std::fmt::Display for ProblemDetails {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.status.unwrap_or(0),
            self.cause.as_deref().unwrap_or("-"),
            self.detail.as_deref().unwrap_or("")
        )
    }
}

impl std::error::Error for ProblemDetails {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_params_serialise_in_camel_case() {
        let p = ProblemDetails::invalid_params(
            cause::MANDATORY_IE_INCORRECT,
            vec![InvalidParam::new("/ipv4Addr", "not an IPv4 address")],
        );
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v["status"], 400);
        assert_eq!(v["cause"], "MANDATORY_IE_INCORRECT");
        assert_eq!(v["invalidParams"][0]["param"], "/ipv4Addr");
        assert!(v.get("supportedApiVersions").is_none());
    }

    #[test]
    fn the_answer_keeps_its_cause_for_the_metrics_without_letting_any_text_through() {
        let cause_of = |c: &str| {
            let resp = ProblemDetails::new(StatusCode::NOT_FOUND, c, "x").into_response();
            resp.extensions().get::<ProblemCause>().map(|p| p.0.to_string())
        };
        assert_eq!(cause_of(cause::RESOURCE_NOT_FOUND).as_deref(), Some("RESOURCE_NOT_FOUND"));
        assert_eq!(
            cause_of("PDU_SESSION_NOT_AVAILABLE").as_deref(),
            Some("PDU_SESSION_NOT_AVAILABLE")
        );
        assert_eq!(cause_of("not a cause\n{}").as_deref(), Some("OTHER"));
        let none = ProblemDetails { status: Some(400), ..Default::default() }.into_response();
        assert!(none.extensions().get::<ProblemCause>().is_none());
    }
}
