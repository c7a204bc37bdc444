//! The embedded backend: SQLite in WAL mode behind one writer thread and a
//! pool of reader threads.

pub mod alloc;
pub mod backup;
mod checkpoint;
mod document;
mod engine;
pub mod lock;
mod migrate;
mod read_queue;

use std::time::{SystemTime, UNIX_EPOCH};

pub use engine::{SqliteStore, StoreStats};
pub use lock::StoreLock;
pub use migrate::Migration;

use crate::document::UnixMillis;

/// The migrations the engine itself applies to every store (the document tables), before any
/// NF's own: part of every store's schema version.
pub fn engine_migrations() -> &'static [Migration] {
    document::MIGRATIONS
}

/// Wall-clock time; a clock set before 1970 reads as 0 rather than failing
/// writes.
fn now_millis() -> UnixMillis {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
