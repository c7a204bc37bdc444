//! Who may do what: the CSRF check on every change, the session check on every API call but
//! log-in, and the one rule of roles ([`may`]).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http::header::{COOKIE, HOST, ORIGIN};
use http::{Method, StatusCode};

use crate::config::Role;
use crate::problem::problem;
use crate::session::{id_from_cookies, Session};
use crate::App;

/// The header every change must carry. A cross-site form cannot set it, and a cross-site
/// script cannot send it without a CORS preflight, which the console never grants; with
/// `SameSite=Strict` on the cookie it is the console's CSRF defence.
pub const CSRF_HEADER: &str = "x-fivecore-console";

pub const LOGOUT_PATH: &str = "/console/api/logout";

/// GET and HEAD read; everything else changes something.
pub fn is_read(method: &Method) -> bool {
    method == Method::GET || method == Method::HEAD
}

/// The role rule, in one place: an admin may do anything the NFs' APIs allow; a read-only
/// user may read, and end its own session.
pub fn may(role: Role, method: &Method, path: &str) -> bool {
    match role {
        Role::Admin => true,
        Role::ReadOnly => is_read(method) || (method == Method::POST && path == LOGOUT_PATH),
    }
}

/// Refuses a change without the console's header, or sent from another origin.
pub async fn csrf(req: Request, next: Next) -> Response {
    if !is_read(req.method()) {
        if !req.headers().contains_key(CSRF_HEADER) {
            return problem(
                StatusCode::FORBIDDEN,
                "CSRF_HEADER_MISSING",
                format!("a change must carry the {CSRF_HEADER} header"),
            );
        }
        if let Some(origin) = req.headers().get(ORIGIN).and_then(|v| v.to_str().ok()) {
            let host = req.headers().get(HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
            let origin_host = origin.split_once("://").map_or(origin, |(_, h)| h);
            if origin_host != host {
                return problem(
                    StatusCode::FORBIDDEN,
                    "CROSS_ORIGIN_REQUEST",
                    format!("a change from {origin} is not accepted"),
                );
            }
        }
    }
    next.run(req).await
}

/// The logged-in user of a request, for the handlers after [`authorize`].
#[derive(Clone)]
pub struct Current {
    pub session_id: String,
    pub session: Session,
}

/// 401 without a live session, 403 when the role does not allow the request.
pub async fn authorize(State(app): State<Arc<App>>, mut req: Request, next: Next) -> Response {
    let id = req
        .headers()
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(id_from_cookies)
        .map(str::to_owned);
    let Some((id, session)) = id.and_then(|id| app.sessions.touch(&id).map(|s| (id, s))) else {
        return problem(StatusCode::UNAUTHORIZED, "NOT_LOGGED_IN", "log in first");
    };
    if !may(session.role, req.method(), req.uri().path()) {
        return problem(
            StatusCode::FORBIDDEN,
            "ROLE_NOT_ALLOWED",
            format!("user {} is {}: it may only read", session.user, session.role.as_str()),
        );
    }
    req.extensions_mut().insert(Current { session_id: id, session });
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_only_reads_and_logs_out_only() {
        for m in [Method::GET, Method::HEAD] {
            assert!(may(Role::ReadOnly, &m, "/console/api/nf/udr/udr-prov/v1/slf-entries/x"));
        }
        for m in [Method::POST, Method::PUT, Method::PATCH, Method::DELETE] {
            assert!(!may(Role::ReadOnly, &m, "/console/api/nf/udr/udr-prov/v1/slf-entries/x"));
            assert!(may(Role::Admin, &m, "/console/api/nf/udr/udr-prov/v1/slf-entries/x"));
        }
        assert!(may(Role::ReadOnly, &Method::POST, LOGOUT_PATH));
        assert!(!may(Role::ReadOnly, &Method::DELETE, LOGOUT_PATH));
    }
}
