//! The error edge: every fault an NF's handler meets, and the one place each kind becomes an
//! answer (after linkerd2-proxy's `ServerRescue`).
//!
//! Handlers return [`Answer`] and propagate with `?`: a store failure, a response that cannot be
//! encoded and a decision already taken as a [`ProblemDetails`] all travel as [`NfError`], and
//! `sbi::Router` turns it into the HTTP answer through `From<NfError> for ProblemDetails` below.
//! So every NF answers the same fault the same way, and a fault is logged once, where it is
//! answered.

use http::StatusCode;
use sbi::problem::cause;
use sbi::{ProblemDetails, Response};

/// What an SBI handler returns.
pub type Answer = Result<Response, NfError>;

/// Why a handler did not answer with success.
#[derive(Debug, thiserror::Error)]
pub enum NfError {
    /// An answer the handler decided itself (validation, not found, conflict, ...): sent as is.
    #[error("{}", .0.detail.as_deref().unwrap_or("problem"))]
    Problem(Box<ProblemDetails>),
    /// The NF's store failed.
    #[error("store: {0}")]
    Store(#[from] store::Error),
    /// A response body could not be encoded.
    #[error("response encoding: {0}")]
    Encode(#[from] serde_json::Error),
    /// A fault of the NF itself that has no better kind (a broken invariant, a gone worker).
    #[error("{0}")]
    Internal(String),
}

impl NfError {
    pub fn internal(detail: impl Into<String>) -> Self {
        NfError::Internal(detail.into())
    }
}

impl From<ProblemDetails> for NfError {
    fn from(p: ProblemDetails) -> Self {
        NfError::Problem(Box::new(p))
    }
}

impl From<NfError> for ProblemDetails {
    fn from(e: NfError) -> Self {
        match e {
            NfError::Problem(p) => *p,
            NfError::Store(e) => store_problem(e),
            NfError::Encode(e) => {
                tracing::error!(error = %e, "response encoding failed");
                ProblemDetails::internal(format!("response encoding failed: {e}"))
            }
            NfError::Internal(detail) => {
                tracing::error!(%detail, "internal error");
                ProblemDetails::internal(detail)
            }
        }
    }
}

/// A store outcome no handler turned into a decision of its own.
///
/// Outcomes a caller can act on keep their meaning (a missing resource is 404, a stale version
/// 412); a store that is shutting down is 503 so the consumer tries another instance
/// (TS 29.500 §5.2.7.2 NF_SERVICE_FAILOVER); every other fault is 500 SYSTEM_FAILURE, logged.
fn store_problem(e: store::Error) -> ProblemDetails {
    match e {
        store::Error::NotFound => ProblemDetails::new(
            StatusCode::NOT_FOUND,
            cause::RESOURCE_NOT_FOUND,
            "the resource does not exist",
        ),
        store::Error::VersionMismatch { current } => ProblemDetails::new(
            StatusCode::PRECONDITION_FAILED,
            cause::PRECONDITION_FAILED,
            format!("the resource changed (version {current} now)"),
        ),
        store::Error::Closed => {
            tracing::warn!("store closed while serving a request");
            ProblemDetails::new(
                StatusCode::SERVICE_UNAVAILABLE,
                cause::NF_SERVICE_FAILOVER,
                "the NF is stopping",
            )
        }
        e => {
            tracing::error!(error = %e, "store failure");
            ProblemDetails::internal(format!("storage failure: {e}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(e: impl Into<NfError>) -> ProblemDetails {
        ProblemDetails::from(e.into())
    }

    #[test]
    fn a_decided_problem_is_sent_as_is() {
        let p = ProblemDetails::bad_request(cause::MANDATORY_IE_MISSING, "supi is missing");
        assert_eq!(answer(p.clone()), p);
    }

    #[test]
    fn store_outcomes_keep_their_meaning() {
        let p = answer(store::Error::NotFound);
        assert_eq!((p.status, p.cause.as_deref()), (Some(404), Some(cause::RESOURCE_NOT_FOUND)));
        let p = answer(store::Error::VersionMismatch { current: 7 });
        assert_eq!((p.status, p.cause.as_deref()), (Some(412), Some(cause::PRECONDITION_FAILED)));
        let p = answer(store::Error::Closed);
        assert_eq!((p.status, p.cause.as_deref()), (Some(503), Some(cause::NF_SERVICE_FAILOVER)));
    }

    #[test]
    fn faults_are_system_failures() {
        let p = answer(store::Error::backend_msg("disk I/O error"));
        assert_eq!((p.status, p.cause.as_deref()), (Some(500), Some(cause::SYSTEM_FAILURE)));
        assert!(p.detail.unwrap().contains("disk I/O error"));
        let p = answer(NfError::internal("worker gone"));
        assert_eq!((p.status, p.cause.as_deref()), (Some(500), Some(cause::SYSTEM_FAILURE)));
        let bad = serde_json::from_str::<serde_json::Value>("{").unwrap_err();
        let p = answer(bad);
        assert_eq!(p.status, Some(500));
    }
}
