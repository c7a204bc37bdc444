//! The one error type of the store, shared by every backend.

use std::sync::Arc;

/// A boxed backend error that can be cloned, so a failed group commit can be
/// reported to every job of the batch.
pub type BackendError = Arc<dyn std::error::Error + Send + Sync + 'static>;

/// Everything a store operation can fail with.
///
/// The first variants are outcomes callers are expected to handle (they map
/// onto HTTP 404, 409 and 412 in the SBI layer); the rest are faults.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The document (or row) does not exist.
    #[error("not found")]
    NotFound,
    /// A document with this collection and id already exists.
    #[error("already exists")]
    AlreadyExists,
    /// A conditional write named a version that is no longer current.
    #[error("version mismatch: current version is {current}")]
    VersionMismatch {
        /// The version stored now.
        current: u64,
    },
    /// The caller passed something the store contract rejects (empty id,
    /// over-long key, bad configuration).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The store has been closed, or its worker threads are gone.
    #[error("store is closed")]
    Closed,
    /// The connection to the database was lost after a write's `COMMIT` was sent and before its
    /// answer came, and re-reading the written keys on another connection could not show the
    /// write took effect: it may or may not be committed. Never reported as success; a caller
    /// retries conditionally on the version (or re-reads), as after a network timeout.
    #[error("commit outcome unknown: the connection was lost after COMMIT was sent")]
    CommitUnknown,
    /// The storage engine failed (I/O error, disk full, corrupt file...).
    #[error("storage backend: {0}")]
    Backend(#[source] BackendError),
}

impl Error {
    /// Wraps any engine error.
    pub fn backend(err: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Backend(Arc::new(err))
    }

    /// A backend error that only has a message.
    pub fn backend_msg(msg: impl Into<String>) -> Self {
        Self::Backend(Arc::new(Message(msg.into())))
    }
}

impl From<rusqlite::Error> for Error {
    fn from(err: rusqlite::Error) -> Self {
        Self::backend(err)
    }
}

/// Short alias used across the crate and by NF schema code.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Plain message as an `std::error::Error`, for faults with no source.
#[derive(Debug)]
struct Message(String);

impl std::fmt::Display for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Message {}
