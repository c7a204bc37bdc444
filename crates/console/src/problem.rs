//! The console's own refusals, as ProblemDetails (TS 29.571) like every fivecore answer.

use axum::response::{IntoResponse, Response};
use http::header::{CACHE_CONTROL, CONTENT_TYPE};
use http::StatusCode;
use sbi::{InvalidParam, ProblemDetails};

pub fn problem(status: StatusCode, cause: &str, detail: impl Into<String>) -> Response {
    render(ProblemDetails::new(status, cause, detail))
}

pub fn invalid(cause: &str, params: Vec<InvalidParam>) -> Response {
    render(ProblemDetails::invalid_params(cause, params))
}

fn render(p: ProblemDetails) -> Response {
    let status = p.status_code();
    let body = serde_json::to_vec(&p).unwrap_or_default();
    (status, [(CONTENT_TYPE, "application/problem+json"), (CACHE_CONTROL, "no-store")], body)
        .into_response()
}
