//! Schema migrations: DDL applied once, recorded by id.

use rusqlite::{params, Transaction};

use crate::error::Result;

/// One schema change. Its `id` is recorded when applied, so it runs once per
/// database; prefix ids with the owning crate (`nrf-0001-profiles`) since
/// all NFs of `fivecore up` may share one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migration {
    /// Unique, stable name.
    pub id: &'static str,
    /// One or more SQL statements separated by `;`.
    pub sql: &'static str,
}

impl Migration {
    /// A migration `id` running `sql`.
    pub const fn new(id: &'static str, sql: &'static str) -> Self {
        Self { id, sql }
    }
}

const CREATE_LEDGER: &str = "CREATE TABLE IF NOT EXISTS store_migrations (
    id TEXT PRIMARY KEY NOT NULL,
    applied_at INTEGER NOT NULL
)";

/// Applies the migrations of `list` not yet recorded; returns how many ran.
pub(crate) fn apply_migrations(tx: &Transaction<'_>, list: &[Migration]) -> Result<usize> {
    tx.execute_batch(CREATE_LEDGER)?;
    let mut applied = 0;
    for migration in list {
        let known = tx
            .prepare_cached("SELECT 1 FROM store_migrations WHERE id = ?1")?
            .exists([migration.id])?;
        if known {
            continue;
        }
        tx.execute_batch(migration.sql)?;
        tx.prepare_cached("INSERT INTO store_migrations (id, applied_at) VALUES (?1, ?2)")?
            .execute(params![migration.id, super::now_millis()])?;
        tracing::info!(id = migration.id, "applied schema migration");
        applied += 1;
    }
    Ok(applied)
}
