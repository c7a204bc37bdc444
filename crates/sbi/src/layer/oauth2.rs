//! Refuses requests without a valid access token when `[sbi.oauth2] required = true`
//! ([`crate::oauth2`] checks the token). Sits below [`route`](super::route) (unknown paths are
//! 404 whoever asks, and the service is known) and above [`overload`](super::overload), so a
//! flood of requests without tokens never takes an admission slot.

use std::convert::Infallible;
use std::future::Ready;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{header, HeaderValue, Request, StatusCode};
use tower::{Layer, Service};

use super::{Either, LayerFuture};
use crate::oauth2::{Claims, Refusal, Verifier};
use crate::problem::ProblemDetails;
use crate::router::Response;
use crate::tls::PeerCertificate;

/// The claims of the request's verified access token (a request extension), for the layers
/// and handlers below: the consumer is `sub`.
#[derive(Clone, Debug)]
pub struct VerifiedToken(pub Arc<Claims>);

#[derive(Clone)]
pub struct OAuth2Layer {
    verifier: Option<Verifier>,
}

impl OAuth2Layer {
    /// `None`: tokens are not checked (the default).
    pub fn new(verifier: Option<Verifier>) -> Self {
        OAuth2Layer { verifier: verifier.filter(|v| v.config().required) }
    }
}

impl<S> Layer<S> for OAuth2Layer {
    type Service = OAuth2Service<S>;
    fn layer(&self, inner: S) -> Self::Service {
        OAuth2Service { inner, verifier: self.verifier.clone() }
    }
}

#[derive(Clone)]
pub struct OAuth2Service<S> {
    inner: S,
    verifier: Option<Verifier>,
}

type Refused = Ready<Result<Response, Infallible>>;

impl<S, B> Service<Request<B>> for OAuth2Service<S>
where
    S: Service<Request<B>, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<S::Future, Either<Refused, LayerFuture>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let Some(verifier) = &self.verifier else {
            return Either::Left { inner: self.inner.call(req) };
        };
        let service = service_of(req.uri().path());
        if verifier.exempt(service) {
            return Either::Left { inner: self.inner.call(req) };
        }
        let auth = req.headers().get(header::AUTHORIZATION).map(HeaderValue::as_bytes);
        match verifier.check(auth, service) {
            Ok(Some(claims)) => match bound(verifier, &claims, &req) {
                Ok(()) => {
                    let mut req = req;
                    req.extensions_mut().insert(VerifiedToken(claims));
                    Either::Left { inner: self.inner.call(req) }
                }
                Err(refusal) => Either::Right {
                    inner: Either::Left {
                        inner: std::future::ready(Ok(refused(refusal, req.uri().path()))),
                    },
                },
            },
            Err(refusal) => Either::Right {
                inner: Either::Left {
                    inner: std::future::ready(Ok(refused(refusal, req.uri().path()))),
                },
            },
            // A key id not known yet: the NRF may have rotated its key. Read the keys again
            // (at most one refresh per interval, shared by the requests waiting), then check
            // once more. Our stack's services are always ready, so the clone is called as is.
            Ok(None) => {
                let verifier = verifier.clone();
                let mut inner = self.inner.clone();
                Either::Right {
                    inner: Either::Right {
                        inner: Box::pin(async move {
                            let mut req = req;
                            verifier.refresh_for_unknown_key().await;
                            let service = service_of(req.uri().path());
                            let auth =
                                req.headers().get(header::AUTHORIZATION).map(HeaderValue::as_bytes);
                            match verifier.check(auth, service) {
                                Ok(Some(claims)) => match bound(&verifier, &claims, &req) {
                                    Ok(()) => {
                                        req.extensions_mut().insert(VerifiedToken(claims));
                                        inner.call(req).await
                                    }
                                    Err(refusal) => Ok(refused(refusal, req.uri().path())),
                                },
                                Ok(None) => Ok(refused(
                                    Refusal::Unauthorized {
                                        missing: false,
                                        detail: "the access token is signed with a key this \
                                                 producer does not know"
                                            .into(),
                                    },
                                    req.uri().path(),
                                )),
                                Err(refusal) => Ok(refused(refusal, req.uri().path())),
                            }
                        }),
                    },
                }
            }
        }
    }
}

/// On a connection whose client certificate names NF instances, the token must be one of
/// theirs: a token copied from another NF is refused.
fn bound<B>(verifier: &Verifier, claims: &Claims, req: &Request<B>) -> Result<(), Refusal> {
    if !verifier.config().bind_to_client_certificate {
        return Ok(());
    }
    let Some(cert) = req.extensions().get::<Arc<PeerCertificate>>() else { return Ok(()) };
    if cert.instance_ids.is_empty() || claims.sub.as_deref().is_some_and(|s| cert.names(s)) {
        return Ok(());
    }
    Err(Refusal::Unauthorized {
        missing: false,
        detail: "the access token's subject is not the NF instance of the client certificate"
            .into(),
    })
}

/// The API name a path belongs to (`/nbsf-management/v1/pcfBindings` → `nbsf-management`),
/// which is the service name scopes list (TS 29.510 §6.3.5.2.4).
fn service_of(path: &str) -> &str {
    path.trim_start_matches('/').split('/').next().unwrap_or("")
}

/// 401 or 403 with the WWW-Authenticate challenge of RFC 6750 §3 and a ProblemDetails body.
fn refused(refusal: Refusal, path: &str) -> Response {
    let (problem, challenge) = match refusal {
        Refusal::Unauthorized { missing: true, detail } => (
            ProblemDetails::new(StatusCode::UNAUTHORIZED, "INVALID_TOKEN", detail),
            "Bearer".to_owned(),
        ),
        Refusal::Unauthorized { missing: false, detail } => {
            let challenge = format!(
                "Bearer error=\"invalid_token\", error_description=\"{}\"",
                quoted(&detail)
            );
            (ProblemDetails::new(StatusCode::UNAUTHORIZED, "INVALID_TOKEN", detail), challenge)
        }
        Refusal::InsufficientScope { scope } => (
            ProblemDetails::new(
                StatusCode::FORBIDDEN,
                "INSUFFICIENT_SCOPE",
                format!("the access token's scope does not include {scope}"),
            ),
            format!("Bearer error=\"insufficient_scope\", scope=\"{}\"", quoted(&scope)),
        ),
    };
    let mut resp = problem.with_instance(path).into_response();
    if let Ok(v) = HeaderValue::from_str(&challenge) {
        resp.headers_mut().insert(header::WWW_AUTHENTICATE, v);
    }
    resp
}

/// What may go inside a quoted-string of the challenge: visible ASCII without `"` and `\`.
fn quoted(s: &str) -> String {
    s.chars().filter(|c| (c.is_ascii_graphic() && *c != '"' && *c != '\\') || *c == ' ').collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_is_the_paths_first_segment() {
        assert_eq!(service_of("/nbsf-management/v1/pcfBindings"), "nbsf-management");
        assert_eq!(service_of("/oauth2/token"), "oauth2");
        assert_eq!(service_of("/"), "");
    }

    #[test]
    fn challenges_follow_rfc_6750() {
        let r = refused(
            Refusal::InsufficientScope { scope: "nbsf-management".into() },
            "/nbsf-management/v1/pcfBindings",
        );
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
        assert_eq!(
            r.headers()[header::WWW_AUTHENTICATE],
            "Bearer error=\"insufficient_scope\", scope=\"nbsf-management\""
        );
        let r = refused(Refusal::Unauthorized { missing: true, detail: "x".into() }, "/a");
        assert_eq!(
            (r.status(), &r.headers()[header::WWW_AUTHENTICATE]),
            (StatusCode::UNAUTHORIZED, &HeaderValue::from_static("Bearer"))
        );
        let r =
            refused(Refusal::Unauthorized { missing: false, detail: "say \"no\"".into() }, "/a");
        assert_eq!(
            r.headers()[header::WWW_AUTHENTICATE],
            "Bearer error=\"invalid_token\", error_description=\"say no\""
        );
    }
}
