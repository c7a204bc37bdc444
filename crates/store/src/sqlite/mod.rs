//! The embedded backend: SQLite in WAL mode behind one writer thread and a
//! pool of reader threads.

mod checkpoint;
mod document;
mod engine;
mod migrate;
mod read_queue;

use std::time::{SystemTime, UNIX_EPOCH};

pub use engine::{SqliteStore, StoreStats};
pub use migrate::Migration;

use crate::document::UnixMillis;

/// Wall-clock time; a clock set before 1970 reads as 0 rather than failing
/// writes.
fn now_millis() -> UnixMillis {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
