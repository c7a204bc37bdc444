//! The console's only way to change anything: it forwards the page's request to the NF's own
//! REST API over the SBI client and hands back the NF's answer unchanged (status, ProblemDetails,
//! ETag), so the NF's validation is the console's validation. Only the NF APIs the pages use are
//! reachable: the console is not an open proxy into the core.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::response::Response;
use http::header::{
    ACCEPT, ALLOW, CACHE_CONTROL, CONTENT_TYPE, ETAG, IF_MATCH, IF_NONE_MATCH, LINK, LOCATION,
    RETRY_AFTER,
};
use http::{HeaderMap, Method, StatusCode, Uri};

use crate::problem::problem;
use crate::App;

/// The NFs the console knows, by the name in its URLs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Nf {
    Nrf,
    Udr,
    Bsf,
    Pcf,
    Dd,
}

pub const ALL: [Nf; 5] = [Nf::Nrf, Nf::Udr, Nf::Bsf, Nf::Pcf, Nf::Dd];

impl Nf {
    pub fn parse(s: &str) -> Option<Nf> {
        ALL.into_iter().find(|n| n.key() == s)
    }

    pub fn key(self) -> &'static str {
        match self {
            Nf::Nrf => "nrf",
            Nf::Udr => "udr",
            Nf::Bsf => "bsf",
            Nf::Pcf => "pcf",
            Nf::Dd => "dd",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Nf::Nrf => "NRF",
            Nf::Udr => "UDR",
            Nf::Bsf => "BSF",
            Nf::Pcf => "PCF",
            Nf::Dd => "Data Director",
        }
    }

    /// The API roots under this NF the pages may reach (each NF's `/metrics` too).
    fn apis(self) -> &'static [&'static str] {
        match self {
            Nf::Nrf => &["nnrf-nfm/v1/nf-instances"],
            Nf::Bsf => &[
                "nbsf-management/v1/pcfBindings",
                "nbsf-management/v1/pcf-ue-bindings",
                "nbsf-management/v1/pcf-mbs-bindings",
            ],
            Nf::Udr => &["udr-prov/v1"],
            Nf::Pcf => &["policy-admin/v1"],
            Nf::Dd => &["dd-admin/v1"],
        }
    }
}

/// Whether `rest` (the NF path after `/console/api/nf/{nf}/`, still percent-encoded) is one of
/// the NF's APIs the console serves, with no dot segment that could climb out of it.
pub fn allowed(nf: Nf, rest: &str) -> bool {
    let dot = |seg: &str| {
        let s = seg.to_ascii_lowercase().replace("%2e", ".");
        s == "." || s == ".."
    };
    if rest.split('/').any(dot) {
        return false;
    }
    rest == "metrics"
        || nf.apis().iter().any(|api| {
            rest.strip_prefix(api).is_some_and(|tail| tail.is_empty() || tail.starts_with('/'))
        })
}

const PREFIX: &str = "/console/api/nf/";

const REQUEST_HEADERS: [http::HeaderName; 4] = [CONTENT_TYPE, ACCEPT, IF_MATCH, IF_NONE_MATCH];
const ANSWER_HEADERS: [http::HeaderName; 6] =
    [CONTENT_TYPE, ETAG, LOCATION, RETRY_AFTER, LINK, ALLOW];

/// `/console/api/nf/{nf}/{path}`: the request, as it came, to the NF's `/{path}`.
pub async fn forward(
    State(app): State<Arc<App>>,
    Path((nf_key, _)): Path<(String, String)>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(nf) = Nf::parse(&nf_key) else {
        return problem(StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND", format!("no NF {nf_key}"));
    };
    // The raw path, not the extractor's decoded one: an identity like `impu-sip%3Aa%40b` must
    // reach the NF as it was encoded.
    let rest = uri.path().strip_prefix(PREFIX).and_then(|r| r.split_once('/')).map_or("", |x| x.1);
    if !allowed(nf, rest) {
        return problem(
            StatusCode::NOT_FOUND,
            "RESOURCE_NOT_FOUND",
            format!("the console does not serve /{rest} of the {}", nf.name()),
        );
    }
    let Some(root) = app.urls.get(nf) else {
        return problem(
            StatusCode::NOT_FOUND,
            "NF_NOT_CONFIGURED",
            format!("the console has no address for the {} ([console.nfs])", nf.name()),
        );
    };
    let mut url = format!("{}/{rest}", root.trim_end_matches('/'));
    if let Some(q) = uri.query() {
        url.push('?');
        url.push_str(q);
    }
    let mut out = HeaderMap::new();
    for name in REQUEST_HEADERS {
        if let Some(v) = headers.get(&name) {
            out.insert(name, v.clone());
        }
    }
    let mut req = app.client.request(method.clone(), &url).headers(out);
    if !body.is_empty() {
        req = req.body(body);
    }
    match req.send().await {
        Ok(answer) => {
            let mut builder = Response::builder().status(answer.status());
            for name in ANSWER_HEADERS {
                if let Some(v) = answer.headers().get(&name) {
                    builder = builder.header(name, v);
                }
            }
            builder
                .header(CACHE_CONTROL, "no-store")
                .body(Body::from(answer.into_body()))
                .unwrap_or_else(|_| {
                    problem(StatusCode::BAD_GATEWAY, "SYSTEM_FAILURE", "unreadable answer")
                })
        }
        Err(e) => {
            tracing::warn!(nf = nf.name(), %method, %url, error = %e, "console: NF not reached");
            let (status, cause) = if e.is_timeout() {
                (StatusCode::GATEWAY_TIMEOUT, "TIMED_OUT_REQUEST")
            } else {
                (StatusCode::GATEWAY_TIMEOUT, "TARGET_NF_NOT_REACHABLE")
            };
            problem(status, cause, format!("the {} at {root} did not answer: {e}", nf.name()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_pages_apis_are_reachable() {
        assert!(allowed(Nf::Udr, "udr-prov/v1/slf-entries/imsi-001"));
        assert!(allowed(Nf::Udr, "udr-prov/v1"));
        assert!(allowed(Nf::Bsf, "nbsf-management/v1/pcfBindings"));
        assert!(allowed(Nf::Pcf, "metrics"));
        assert!(allowed(Nf::Nrf, "nnrf-nfm/v1/nf-instances/abc"));
        assert!(!allowed(Nf::Nrf, "nnrf-disc/v1/nf-instances"));
        assert!(!allowed(Nf::Udr, "udr-prov/v10/x"));
        assert!(!allowed(Nf::Udr, "nudr-dr/v1/policy-data/ues/x"));
        assert!(!allowed(Nf::Udr, "udr-prov/v1/../../nudr-dr/v1/x"));
        assert!(!allowed(Nf::Udr, "udr-prov/v1/%2E%2e/x"));
        assert!(!allowed(Nf::Bsf, "udr-prov/v1/slf-entries"));
    }
}
