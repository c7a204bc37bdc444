//! Bulk load of PDU session bindings straight into the BSF's database file, while no BSF serves
//! from it (`fivecore bsf preload`: a lab's or a benchmark's tens of millions of bindings, which
//! Register over HTTP would take hours to create, or a migration from another BSF).
//!
//! Every row is what Register stores (the store's own INSERT of the keys and document it is
//! given). Speed comes from how the file is written, not from skipping work: the file is opened
//! alone (no journal, no fsync until one at the end, a large page cache), the binding table's
//! secondary indexes are dropped and built again at the end from their own DDL (sorting once is
//! far cheaper than millions of random B-tree inserts), and rows go in large transactions
//! through prepared statements.

use std::path::{Path, PathBuf};
use std::time::Instant;

use rusqlite::{Connection, ErrorCode, OpenFlags};
use store::{SqliteConfig, SqliteStore};

use super::{delete_id, insert, MIGRATIONS};
use crate::store::{BulkLoad, BulkLoaded, NewBinding};

/// Page cache of the loading connection: the primary key index of ten million bindings fits.
const CACHE_KIB: i64 = 1024 * 1024;

/// A bulk load into one BSF database file; see the module documentation.
pub struct SqliteBulkLoad {
    conn: Connection,
    path: PathBuf,
    /// Name and DDL of the indexes dropped for the load.
    indexes: Vec<(String, String)>,
}

impl SqliteBulkLoad {
    /// Opens the database file of `config` (created with the BSF's schema when absent) for a
    /// bulk load. Nothing else may have the file open: a BSF serving from it makes this fail.
    pub async fn open(config: SqliteConfig) -> store::Result<Self> {
        let path = config.path.clone();
        // The schema exactly as the BSF creates it: its migrations through the store engine.
        let db = SqliteStore::open(SqliteConfig { readers: 1, ..config }).await?;
        let migrated = db.migrate(MIGRATIONS).await;
        db.close().await?;
        migrated?;
        Self::open_alone(&path).map_err(|e| match e.sqlite_error_code() {
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
                store::Error::InvalidArgument(format!(
                    "{} is in use (is a BSF serving from it?): {e}",
                    path.display()
                ))
            }
            _ => store::Error::from(e),
        })
    }

    fn open_alone(path: &Path) -> rusqlite::Result<Self> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags)?;
        // Alone on a file that is thrown away if this fails: no journal, no fsync.
        conn.pragma_update(None, "locking_mode", "EXCLUSIVE")?;
        conn.pragma_update(None, "journal_mode", "OFF")?;
        conn.pragma_update(None, "synchronous", "OFF")?;
        conn.pragma_update(None, "cache_size", -CACHE_KIB)?;
        conn.pragma_update(None, "threads", 2)?;
        let indexes = secondary_indexes(&conn)?;
        for (name, _) in &indexes {
            conn.execute_batch(&format!("DROP INDEX {name}"))?;
        }
        Ok(SqliteBulkLoad { conn, path: path.to_owned(), indexes })
    }

    fn insert_batch(&mut self, rows: &[NewBinding]) -> rusqlite::Result<()> {
        let t = self.conn.transaction()?;
        for b in rows {
            match insert(&t, &b.id, &b.keys, b.created_ms, &b.json) {
                // The id is stored already (an earlier line, an earlier load): the new one wins.
                Err(e) if e.sqlite_error_code() == Some(ErrorCode::ConstraintViolation) => {
                    delete_id(&t, &b.id)?;
                    insert(&t, &b.id, &b.keys, b.created_ms, &b.json)?;
                }
                r => r?,
            }
        }
        t.commit()
    }

    fn rebuild(self) -> rusqlite::Result<f64> {
        let t = Instant::now();
        for (_, sql) in &self.indexes {
            self.conn.execute_batch(sql)?;
        }
        let index_seconds = t.elapsed().as_secs_f64();
        // Back to the mode the store runs in, so the BSF opens the file as it left it.
        self.conn.pragma_update(None, "locking_mode", "NORMAL")?;
        self.conn.pragma_update(None, "journal_mode", "WAL")?;
        Ok(index_seconds)
    }
}

impl BulkLoad for SqliteBulkLoad {
    fn insert(&mut self, rows: &[NewBinding]) -> store::Result<()> {
        Ok(self.insert_batch(rows)?)
    }

    fn finish(self: Box<Self>) -> store::Result<BulkLoaded> {
        let path = self.path.clone();
        let index_seconds = self.rebuild()?;
        // Gigabytes written without fsync would otherwise be flushed by the kernel while the BSF
        // runs, stalling its own commits: flush them now, as part of the load.
        std::fs::File::open(&path)
            .and_then(|f| f.sync_all())
            .map_err(|e| store::Error::backend_msg(format!("{}: {e}", path.display())))?;
        Ok(BulkLoaded { index_seconds, bytes: db_bytes(&path) })
    }
}

/// The database file's size with its `-wal` and `-shm` companions.
pub fn db_bytes(path: &Path) -> u64 {
    ["", "-wal", "-shm"]
        .iter()
        .filter_map(|s| {
            let mut p = path.as_os_str().to_owned();
            p.push(s);
            std::fs::metadata(p).ok()
        })
        .map(|m| m.len())
        .sum()
}

/// Name and DDL of each index of the binding table except its primary key.
pub(super) fn secondary_indexes(conn: &Connection) -> rusqlite::Result<Vec<(String, String)>> {
    let mut st = conn.prepare(
        "SELECT name, sql FROM sqlite_master
         WHERE type = 'index' AND tbl_name = 'bsf_pcf_binding' AND sql IS NOT NULL
         ORDER BY name",
    )?;
    let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}
