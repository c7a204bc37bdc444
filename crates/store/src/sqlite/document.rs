//! [`DocumentStore`] over the SQLite engine.
//!
//! The SQL is SQLite's (`ON CONFLICT`, `RETURNING`, `WITHOUT ROWID`); what
//! carries over to a MySQL backend is the layout: two plain tables keyed by
//! `(collection, id)`, no foreign keys, every access through a primary key
//! or one secondary index, so it maps onto InnoDB and NDB as is.

use rusqlite::{params, Connection, OptionalExtension, Row, Transaction};

use super::engine::SqliteStore;
use super::migrate::Migration;
use super::now_millis;
use crate::document::{
    check_data, check_index, check_key, Document, DocumentData, DocumentStore, IndexKey,
    UnixMillis, Upserted,
};
use crate::error::{Error, Result};

pub(crate) const MIGRATIONS: &[Migration] = &[Migration::new(
    "store-0001-documents",
    "CREATE TABLE documents (
        collection TEXT NOT NULL,
        id TEXT NOT NULL,
        version INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        expires_at INTEGER,
        body BLOB NOT NULL,
        PRIMARY KEY (collection, id)
    );
    -- id makes the audit order total, with no sort step.
    CREATE INDEX documents_expiry ON documents (collection, expires_at, id);
    -- Clustered by document, so replacing a document's entries is one range.
    CREATE TABLE document_index (
        collection TEXT NOT NULL,
        id TEXT NOT NULL,
        index_name TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (collection, id, index_name, value)
    ) WITHOUT ROWID;
    -- Carries the primary key, so lookups return ids in order from the index.
    CREATE INDEX document_index_lookup ON document_index (collection, index_name, value);",
)];

/// A query of whole documents; [`document_row`] maps its rows.
macro_rules! select_documents {
    ($tail:literal) => {
        concat!(
            "SELECT id, version, created_at, updated_at, expires_at, body FROM documents ",
            $tail
        )
    };
}

const GET: &str = select_documents!("WHERE collection = ?1 AND id = ?2");

const FIND: &str = "SELECT d.id, d.version, d.created_at, d.updated_at, d.expires_at, d.body
    FROM document_index i
    JOIN documents d ON d.collection = i.collection AND d.id = i.id
    WHERE i.collection = ?1 AND i.index_name = ?2 AND i.value = ?3
    ORDER BY i.id LIMIT ?4";

const COUNT: &str = "SELECT COUNT(*) FROM documents WHERE collection = ?1";

const EXPIRED: &str = select_documents!(
    "WHERE collection = ?1 AND expires_at <= ?2 ORDER BY expires_at, id LIMIT ?3"
);

// Two statements rather than `?2 IS NULL OR id > ?2`, which would hide the
// range from the query planner.
const LIST_FIRST: &str = select_documents!("WHERE collection = ?1 ORDER BY id LIMIT ?2");
const LIST_AFTER: &str =
    select_documents!("WHERE collection = ?1 AND id > ?2 ORDER BY id LIMIT ?3");

const INSERT: &str = "INSERT INTO documents
    (collection, id, version, created_at, updated_at, expires_at, body)
    VALUES (?1, ?2, 1, ?3, ?3, ?4, ?5)
    ON CONFLICT (collection, id) DO NOTHING";

const UPSERT: &str = "INSERT INTO documents
    (collection, id, version, created_at, updated_at, expires_at, body)
    VALUES (?1, ?2, 1, ?3, ?3, ?4, ?5)
    ON CONFLICT (collection, id) DO UPDATE SET
        version = version + 1,
        updated_at = excluded.updated_at,
        expires_at = excluded.expires_at,
        body = excluded.body
    RETURNING version, created_at";

const REPLACE: &str = "UPDATE documents
    SET version = version + 1, updated_at = ?3, expires_at = ?4, body = ?5
    WHERE collection = ?1 AND id = ?2 AND (?6 IS NULL OR version = ?6)
    RETURNING version, created_at";

const DELETE: &str = "DELETE FROM documents
    WHERE collection = ?1 AND id = ?2 AND (?3 IS NULL OR version = ?3)";

const VERSION: &str = "SELECT version FROM documents WHERE collection = ?1 AND id = ?2";

const INSERT_INDEX: &str =
    "INSERT INTO document_index (collection, id, index_name, value) VALUES (?1, ?2, ?3, ?4)";

const DELETE_INDEX: &str = "DELETE FROM document_index WHERE collection = ?1 AND id = ?2";

const SELECT_INDEX: &str = "SELECT index_name, value FROM document_index
    WHERE collection = ?1 AND id = ?2 ORDER BY index_name, value";

impl DocumentStore for SqliteStore {
    async fn create(&self, collection: &str, id: &str, mut data: DocumentData) -> Result<Document> {
        check_key(collection, Some(id))?;
        check_data(&mut data)?;
        let (collection, id) = (collection.to_owned(), id.to_owned());
        self.write(move |tx| {
            let now = now_millis();
            let inserted = tx.prepare_cached(INSERT)?.execute(params![
                collection,
                id,
                now,
                data.expires_at,
                data.body
            ])?;
            if inserted == 0 {
                return Err(Error::AlreadyExists);
            }
            insert_index(tx, &collection, &id, &data.index)?;
            Ok(written(id, 1, now, now, data))
        })
        .await
    }

    async fn upsert(&self, collection: &str, id: &str, mut data: DocumentData) -> Result<Upserted> {
        check_key(collection, Some(id))?;
        check_data(&mut data)?;
        let (collection, id) = (collection.to_owned(), id.to_owned());
        self.write(move |tx| {
            let now = now_millis();
            let (version, created_at): (u64, UnixMillis) = tx
                .prepare_cached(UPSERT)?
                .query_row(params![collection, id, now, data.expires_at, data.body], |row| {
                    Ok((row.get(0)?, row.get(1)?))
                })?;
            let created = version == 1;
            if !created {
                delete_index(tx, &collection, &id)?;
            }
            insert_index(tx, &collection, &id, &data.index)?;
            Ok(Upserted { document: written(id, version, created_at, now, data), created })
        })
        .await
    }

    async fn get(&self, collection: &str, id: &str) -> Result<Option<Document>> {
        check_key(collection, Some(id))?;
        let (collection, id) = (collection.to_owned(), id.to_owned());
        self.read(move |conn| {
            let doc = conn
                .prepare_cached(GET)?
                .query_row(params![collection, id], document_row)
                .optional()?;
            doc.map(|doc| with_index(conn, &collection, doc)).transpose()
        })
        .await
    }

    async fn replace(
        &self,
        collection: &str,
        id: &str,
        mut data: DocumentData,
        expected_version: Option<u64>,
    ) -> Result<Document> {
        check_key(collection, Some(id))?;
        check_data(&mut data)?;
        let (collection, id) = (collection.to_owned(), id.to_owned());
        self.write(move |tx| {
            let now = now_millis();
            let updated: Option<(u64, UnixMillis)> = tx
                .prepare_cached(REPLACE)?
                .query_row(
                    params![collection, id, now, data.expires_at, data.body, expected_version],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .optional()?;
            let Some((version, created_at)) = updated else {
                return Err(why_not_written(tx, &collection, &id));
            };
            delete_index(tx, &collection, &id)?;
            insert_index(tx, &collection, &id, &data.index)?;
            Ok(written(id, version, created_at, now, data))
        })
        .await
    }

    async fn delete(
        &self,
        collection: &str,
        id: &str,
        expected_version: Option<u64>,
    ) -> Result<()> {
        check_key(collection, Some(id))?;
        let (collection, id) = (collection.to_owned(), id.to_owned());
        self.write(move |tx| {
            let deleted =
                tx.prepare_cached(DELETE)?.execute(params![collection, id, expected_version])?;
            if deleted == 0 {
                return Err(why_not_written(tx, &collection, &id));
            }
            delete_index(tx, &collection, &id)
        })
        .await
    }

    async fn find(
        &self,
        collection: &str,
        index: &str,
        value: &str,
        limit: usize,
    ) -> Result<Vec<Document>> {
        check_key(collection, None)?;
        check_index(index, value)?;
        if limit == 0 {
            return Ok(Vec::new());
        }
        let (collection, index, value) =
            (collection.to_owned(), index.to_owned(), value.to_owned());
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(FIND)?;
            let rows = stmt.query(params![collection, index, value, sql_limit(limit)])?;
            collect(conn, &collection, rows)
        })
        .await
    }

    async fn count(&self, collection: &str) -> Result<u64> {
        check_key(collection, None)?;
        let collection = collection.to_owned();
        self.read(move |conn| {
            let count = conn.prepare_cached(COUNT)?.query_row([collection], |row| row.get(0))?;
            Ok(count)
        })
        .await
    }

    async fn scan_expired(
        &self,
        collection: &str,
        at: UnixMillis,
        limit: usize,
    ) -> Result<Vec<Document>> {
        check_key(collection, None)?;
        if limit == 0 {
            return Ok(Vec::new());
        }
        // Every stored expiry fits in an i64, so a larger `at` means "all".
        let at = i64::try_from(at).unwrap_or(i64::MAX);
        let collection = collection.to_owned();
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(EXPIRED)?;
            let rows = stmt.query(params![collection, at, sql_limit(limit)])?;
            collect(conn, &collection, rows)
        })
        .await
    }

    async fn list(
        &self,
        collection: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Document>> {
        check_key(collection, None)?;
        if limit == 0 {
            return Ok(Vec::new());
        }
        let collection = collection.to_owned();
        let after = after.map(str::to_owned);
        self.read(move |conn| {
            let limit = sql_limit(limit);
            match after {
                Some(after) => {
                    let mut stmt = conn.prepare_cached(LIST_AFTER)?;
                    let rows = stmt.query(params![collection, after, limit])?;
                    collect(conn, &collection, rows)
                }
                None => {
                    let mut stmt = conn.prepare_cached(LIST_FIRST)?;
                    let rows = stmt.query(params![collection, limit])?;
                    collect(conn, &collection, rows)
                }
            }
        })
        .await
    }
}

/// The document as just written, handing back the caller's body rather
/// than reading it again.
fn written(
    id: String,
    version: u64,
    created_at: UnixMillis,
    updated_at: UnixMillis,
    data: DocumentData,
) -> Document {
    Document {
        id,
        version,
        created_at,
        updated_at,
        expires_at: data.expires_at,
        index: data.index,
        body: data.body,
    }
}

/// Tells a missing document from a stale version after a conditional write
/// touched no row.
fn why_not_written(tx: &Transaction<'_>, collection: &str, id: &str) -> Error {
    let current = tx.prepare_cached(VERSION).and_then(|mut stmt| {
        stmt.query_row(params![collection, id], |row| row.get::<_, u64>(0)).optional()
    });
    match current {
        Ok(Some(current)) => Error::VersionMismatch { current },
        Ok(None) => Error::NotFound,
        Err(err) => err.into(),
    }
}

fn insert_index(
    tx: &Transaction<'_>,
    collection: &str,
    id: &str,
    index: &[IndexKey],
) -> Result<()> {
    if index.is_empty() {
        return Ok(());
    }
    let mut stmt = tx.prepare_cached(INSERT_INDEX)?;
    for key in index {
        stmt.execute(params![collection, id, key.name, key.value])?;
    }
    Ok(())
}

fn delete_index(tx: &Transaction<'_>, collection: &str, id: &str) -> Result<()> {
    tx.prepare_cached(DELETE_INDEX)?.execute(params![collection, id])?;
    Ok(())
}

/// Maps a row of [`select_documents!`]; index entries come separately.
fn document_row(row: &Row<'_>) -> rusqlite::Result<Document> {
    Ok(Document {
        id: row.get(0)?,
        version: row.get(1)?,
        created_at: row.get(2)?,
        updated_at: row.get(3)?,
        expires_at: row.get(4)?,
        index: Vec::new(),
        body: row.get(5)?,
    })
}

fn with_index(conn: &Connection, collection: &str, mut doc: Document) -> Result<Document> {
    let mut stmt = conn.prepare_cached(SELECT_INDEX)?;
    let keys = stmt.query_map(params![collection, doc.id], |row| {
        Ok(IndexKey { name: row.get(0)?, value: row.get(1)? })
    })?;
    doc.index = keys.collect::<rusqlite::Result<_>>()?;
    Ok(doc)
}

/// Reads all documents of `rows`, then their index entries. Runs inside the
/// reader's snapshot, so entries always match the document version.
fn collect(conn: &Connection, collection: &str, rows: rusqlite::Rows<'_>) -> Result<Vec<Document>> {
    let docs = rows.mapped(document_row).collect::<rusqlite::Result<Vec<_>>>()?;
    docs.into_iter().map(|doc| with_index(conn, collection, doc)).collect()
}

fn sql_limit(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use rusqlite::{Connection, TransactionBehavior};

    use super::*;
    use crate::sqlite::migrate::apply_migrations;

    fn schema() -> Connection {
        let conn = Connection::open_in_memory().expect("in-memory db");
        let tx = Transaction::new_unchecked(&conn, TransactionBehavior::Immediate).expect("tx");
        apply_migrations(&tx, MIGRATIONS).expect("schema");
        tx.commit().expect("commit");
        conn
    }

    fn plan(conn: &Connection, sql: &str) -> String {
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).expect("plan");
        // Parameter values do not change the plan; NULL satisfies the count.
        let nulls = vec![rusqlite::types::Null; stmt.parameter_count()];
        let details = stmt
            .query_map(rusqlite::params_from_iter(nulls), |row| row.get::<_, String>(3))
            .expect("rows")
            .collect::<rusqlite::Result<Vec<_>>>()
            .expect("details");
        details.join("; ")
    }

    /// Every statement must reach rows through an index: a full scan would
    /// pass the functional tests and collapse at a million sessions.
    #[test]
    fn every_statement_uses_an_index_and_no_sort_step() {
        let conn = schema();
        for sql in [
            GET,
            FIND,
            COUNT,
            EXPIRED,
            LIST_FIRST,
            LIST_AFTER,
            VERSION,
            SELECT_INDEX,
            DELETE,
            DELETE_INDEX,
            REPLACE,
        ] {
            let plan = plan(&conn, sql);
            assert!(!plan.contains("SCAN"), "full scan in {sql}: {plan}");
            assert!(!plan.contains("TEMP B-TREE"), "sort step in {sql}: {plan}");
        }
        assert!(plan(&conn, FIND).contains("document_index_lookup"));
        assert!(plan(&conn, EXPIRED).contains("documents_expiry"));
    }

    #[test]
    fn schema_migration_is_recorded_once() {
        let conn = schema();
        let tx = Transaction::new_unchecked(&conn, TransactionBehavior::Immediate).expect("tx");
        assert_eq!(apply_migrations(&tx, MIGRATIONS).expect("again"), 0);
    }
}
