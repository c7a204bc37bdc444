//! [`DocumentStore`] over the MySQL backend: the two tables of the SQLite layout, keyed by
//! `(collection, id)` in byte order, no foreign keys, every access through a primary key or one
//! secondary index, so InnoDB and NDB serve it alike.
//!
//! A conditional write reads the current version with `SELECT ... FOR UPDATE` and decides on
//! it. On Galera that row lock is local to the node; a concurrent write through another node
//! makes one of the two fail certification at `COMMIT` (1213), and the loser's call runs again
//! from the start, re-reads the version and answers [`Error::VersionMismatch`] as SQLite would.

use std::sync::Arc;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Params, Value};

use super::feed::{self, Op};
use super::migrate::MysqlMigration;
use super::{now_millis, MysqlStore, TxError};
use crate::document::{
    check_data, check_index, check_key, Document, DocumentData, DocumentStore, IndexKey,
    UnixMillis, Upserted,
};
use crate::error::{Error, Result};

pub(crate) const MIGRATIONS: &[MysqlMigration] = &[MysqlMigration::new(
    "store-0001-documents",
    &[
        "CREATE TABLE IF NOT EXISTS documents (
            collection VARBINARY(64) NOT NULL,
            id VARBINARY(255) NOT NULL,
            version BIGINT UNSIGNED NOT NULL,
            created_at BIGINT NOT NULL,
            updated_at BIGINT NOT NULL,
            expires_at BIGINT NULL,
            body LONGBLOB NOT NULL,
            PRIMARY KEY (collection, id),
            KEY documents_expiry (collection, expires_at, id)
        ) ENGINE=InnoDB",
        "CREATE TABLE IF NOT EXISTS document_index (
            collection VARBINARY(64) NOT NULL,
            id VARBINARY(255) NOT NULL,
            index_name VARBINARY(64) NOT NULL,
            value VARBINARY(255) NOT NULL,
            PRIMARY KEY (collection, id, index_name, value),
            KEY document_index_lookup (collection, index_name, value, id)
        ) ENGINE=InnoDB",
    ],
)];

const GET: &str = "SELECT id, version, created_at, updated_at, expires_at, body FROM documents
    WHERE collection = ? AND id = ?";

const FIND: &str = "SELECT d.id, d.version, d.created_at, d.updated_at, d.expires_at, d.body
    FROM document_index i
    JOIN documents d ON d.collection = i.collection AND d.id = i.id
    WHERE i.collection = ? AND i.index_name = ? AND i.value = ?
    ORDER BY i.id LIMIT ?";

const COUNT: &str = "SELECT COUNT(*) FROM documents WHERE collection = ?";

const EXPIRED: &str = "SELECT id, version, created_at, updated_at, expires_at, body FROM documents
    WHERE collection = ? AND expires_at <= ? ORDER BY expires_at, id LIMIT ?";

const LIST_FIRST: &str = "SELECT id, version, created_at, updated_at, expires_at, body
    FROM documents WHERE collection = ? ORDER BY id LIMIT ?";
const LIST_AFTER: &str = "SELECT id, version, created_at, updated_at, expires_at, body
    FROM documents WHERE collection = ? AND id > ? ORDER BY id LIMIT ?";

const INSERT: &str = "INSERT INTO documents
    (collection, id, version, created_at, updated_at, expires_at, body)
    VALUES (?, ?, 1, ?, ?, ?, ?)";

const CURRENT: &str =
    "SELECT version, created_at FROM documents WHERE collection = ? AND id = ? FOR UPDATE";

const UPDATE: &str = "UPDATE documents SET version = ?, updated_at = ?, expires_at = ?, body = ?
    WHERE collection = ? AND id = ?";

const DELETE: &str = "DELETE FROM documents WHERE collection = ? AND id = ?";

const INSERT_INDEX: &str =
    "INSERT INTO document_index (collection, id, index_name, value) VALUES (?, ?, ?, ?)";

const DELETE_INDEX: &str = "DELETE FROM document_index WHERE collection = ? AND id = ?";

const SELECT_INDEX: &str = "SELECT index_name, value FROM document_index
    WHERE collection = ? AND id = ? ORDER BY index_name, value";

/// ER_DUP_ENTRY.
const DUPLICATE: u16 = 1062;

type Row = (String, u64, u64, u64, Option<u64>, Vec<u8>);

/// What a write call owns, shared by its tries.
struct Write {
    collection: String,
    id: String,
    data: DocumentData,
}

impl DocumentStore for MysqlStore {
    async fn create(&self, collection: &str, id: &str, mut data: DocumentData) -> Result<Document> {
        check_key(collection, Some(id))?;
        check_data(&mut data)?;
        let w = Arc::new(Write { collection: collection.to_owned(), id: id.to_owned(), data });
        let now = now_millis();
        let body = w.clone();
        let feed = self.feed_writer().cloned();
        let r = self
            .write(move |c| {
                let (w, feed) = (body.clone(), feed.clone());
                Box::pin(async move {
                    let inserted = c
                        .exec_drop(
                            INSERT,
                            (&w.collection, &w.id, now, now, w.data.expires_at, &w.data.body),
                        )
                        .await;
                    match inserted {
                        Err(mysql_async::Error::Server(e)) if e.code == DUPLICATE => {
                            return Err(Error::AlreadyExists.into())
                        }
                        r => r?,
                    }
                    insert_index(c, &w.collection, &w.id, &w.data.index).await?;
                    changed(c, feed.as_deref(), &w.collection, &w.id, Op::Put).await?;
                    Ok(1)
                })
            })
            .await;
        let w = Arc::try_unwrap(w).unwrap_or_else(|w| clone_write(&w));
        let version = self.confirmed(r, &w, now).await?;
        Ok(written(w, version, now as u64, now as u64))
    }

    async fn upsert(&self, collection: &str, id: &str, mut data: DocumentData) -> Result<Upserted> {
        check_key(collection, Some(id))?;
        check_data(&mut data)?;
        let w = Arc::new(Write { collection: collection.to_owned(), id: id.to_owned(), data });
        let now = now_millis();
        let body = w.clone();
        let feed = self.feed_writer().cloned();
        let r = self
            .write(move |c| {
                let (w, feed) = (body.clone(), feed.clone());
                Box::pin(async move {
                    let current = lock_current(c, &w.collection, &w.id).await?;
                    let (version, created_at) = match current {
                        Some((version, created_at)) => {
                            update(c, &w, version + 1, now).await?;
                            delete_index(c, &w.collection, &w.id).await?;
                            (version + 1, created_at)
                        }
                        None => {
                            c.exec_drop(
                                INSERT,
                                (&w.collection, &w.id, now, now, w.data.expires_at, &w.data.body),
                            )
                            .await?;
                            (1, now as u64)
                        }
                    };
                    insert_index(c, &w.collection, &w.id, &w.data.index).await?;
                    changed(c, feed.as_deref(), &w.collection, &w.id, Op::Put).await?;
                    Ok((version, created_at))
                })
            })
            .await;
        let w = Arc::try_unwrap(w).unwrap_or_else(|w| clone_write(&w));
        let (version, created_at) = match r {
            Err(Error::CommitUnknown) => {
                let doc = self.confirm(&w, now).await?;
                (doc.version, doc.created_at)
            }
            r => r?,
        };
        Ok(Upserted {
            document: written(w, version, created_at, now as u64),
            created: version == 1,
        })
    }

    async fn get(&self, collection: &str, id: &str) -> Result<Option<Document>> {
        check_key(collection, Some(id))?;
        let key = Arc::new((collection.to_owned(), id.to_owned()));
        self.read(move |c| {
            let key = key.clone();
            Box::pin(async move { get(c, &key.0, &key.1).await })
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
        let w = Arc::new(Write { collection: collection.to_owned(), id: id.to_owned(), data });
        let now = now_millis();
        let body = w.clone();
        let feed = self.feed_writer().cloned();
        let r = self
            .write(move |c| {
                let (w, feed) = (body.clone(), feed.clone());
                Box::pin(async move {
                    let Some((version, created_at)) = lock_current(c, &w.collection, &w.id).await?
                    else {
                        return Err(Error::NotFound.into());
                    };
                    if expected_version.is_some_and(|v| v != version) {
                        return Err(Error::VersionMismatch { current: version }.into());
                    }
                    update(c, &w, version + 1, now).await?;
                    delete_index(c, &w.collection, &w.id).await?;
                    insert_index(c, &w.collection, &w.id, &w.data.index).await?;
                    changed(c, feed.as_deref(), &w.collection, &w.id, Op::Put).await?;
                    Ok((version + 1, created_at))
                })
            })
            .await;
        let w = Arc::try_unwrap(w).unwrap_or_else(|w| clone_write(&w));
        let (version, created_at) = match r {
            Err(Error::CommitUnknown) => {
                let doc = self.confirm(&w, now).await?;
                (doc.version, doc.created_at)
            }
            r => r?,
        };
        Ok(written(w, version, created_at, now as u64))
    }

    async fn delete(
        &self,
        collection: &str,
        id: &str,
        expected_version: Option<u64>,
    ) -> Result<()> {
        check_key(collection, Some(id))?;
        let key = Arc::new((collection.to_owned(), id.to_owned()));
        let body = key.clone();
        let feed = self.feed_writer().cloned();
        let r = self
            .write(move |c| {
                let (key, feed) = (body.clone(), feed.clone());
                Box::pin(async move {
                    let Some((version, _)) = lock_current(c, &key.0, &key.1).await? else {
                        return Err(Error::NotFound.into());
                    };
                    if expected_version.is_some_and(|v| v != version) {
                        return Err(Error::VersionMismatch { current: version }.into());
                    }
                    c.exec_drop(DELETE, (&key.0, &key.1)).await?;
                    delete_index(c, &key.0, &key.1).await?;
                    changed(c, feed.as_deref(), &key.0, &key.1, Op::Delete).await?;
                    Ok(())
                })
            })
            .await;
        match r {
            // Gone is what the delete was for; still there means it did not happen.
            Err(Error::CommitUnknown) => match self.get_causal(&key.0, &key.1).await? {
                None => Ok(()),
                Some(_) => Err(Error::CommitUnknown),
            },
            r => r,
        }
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
        let q = Arc::new((collection.to_owned(), index.to_owned(), value.to_owned()));
        self.read(move |c| {
            let q = q.clone();
            Box::pin(async move {
                let rows: Vec<Row> = c.exec(FIND, (&q.0, &q.1, &q.2, sql_limit(limit))).await?;
                with_indexes(c, &q.0, rows).await
            })
        })
        .await
    }

    async fn count(&self, collection: &str) -> Result<u64> {
        check_key(collection, None)?;
        let collection = Arc::new(collection.to_owned());
        self.read(move |c| {
            let collection = collection.clone();
            Box::pin(async move {
                let n: Option<u64> = c.exec_first(COUNT, (collection.as_str(),)).await?;
                Ok(n.unwrap_or(0))
            })
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
        let at = i64::try_from(at).unwrap_or(i64::MAX);
        let collection = Arc::new(collection.to_owned());
        self.read(move |c| {
            let collection = collection.clone();
            Box::pin(async move {
                let rows: Vec<Row> =
                    c.exec(EXPIRED, (collection.as_str(), at, sql_limit(limit))).await?;
                with_indexes(c, &collection, rows).await
            })
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
        let q = Arc::new((collection.to_owned(), after.map(str::to_owned)));
        self.read(move |c| {
            let q = q.clone();
            Box::pin(async move {
                let rows: Vec<Row> = match &q.1 {
                    Some(after) => c.exec(LIST_AFTER, (&q.0, after, sql_limit(limit))).await?,
                    None => c.exec(LIST_FIRST, (&q.0, sql_limit(limit))).await?,
                };
                with_indexes(c, &q.0, rows).await
            })
        })
        .await
    }
}

impl MysqlStore {
    /// A create's outcome; an unanswered commit is re-checked by key.
    async fn confirmed(&self, r: Result<u64>, w: &Write, now: i64) -> Result<u64> {
        match r {
            Err(Error::CommitUnknown) => self.confirm(w, now).await.map(|d| d.version),
            r => r,
        }
    }

    /// Re-reads a document whose write went unanswered, waiting for the cluster's writes to be
    /// applied first (Galera): the write is there when the document has its body, expiry and
    /// index entries and the write's timestamp. Anything else stays [`Error::CommitUnknown`].
    async fn confirm(&self, w: &Write, now: i64) -> Result<Document> {
        match self.get_causal(&w.collection, &w.id).await? {
            Some(doc)
                if doc.updated_at == now as u64
                    && doc.body == w.data.body
                    && doc.expires_at == w.data.expires_at
                    && doc.index == w.data.index =>
            {
                Ok(doc)
            }
            _ => Err(Error::CommitUnknown),
        }
    }

    async fn get_causal(&self, collection: &str, id: &str) -> Result<Option<Document>> {
        let key = Arc::new((collection.to_owned(), id.to_owned()));
        self.read(move |c| {
            let key = key.clone();
            Box::pin(async move {
                c.query_drop("SET SESSION wsrep_sync_wait = IF(@@wsrep_on, 1, @@wsrep_sync_wait)")
                    .await?;
                let doc = get(c, &key.0, &key.1).await;
                c.query_drop("SET SESSION wsrep_sync_wait = DEFAULT").await?;
                doc
            })
        })
        .await
    }
}

fn clone_write(w: &Write) -> Write {
    Write { collection: w.collection.clone(), id: w.id.clone(), data: w.data.clone() }
}

fn written(w: Write, version: u64, created_at: UnixMillis, updated_at: UnixMillis) -> Document {
    Document {
        id: w.id,
        version,
        created_at,
        updated_at,
        expires_at: w.data.expires_at,
        index: w.data.index,
        body: w.data.body,
    }
}

/// The feed row of a document write, when this store records changes.
async fn changed(
    c: &mut Conn,
    writer: Option<&str>,
    collection: &str,
    id: &str,
    op: Op,
) -> Result<(), TxError> {
    match writer {
        Some(w) => feed::record(c, w, collection, id, op, None).await,
        None => Ok(()),
    }
}

async fn lock_current(
    c: &mut Conn,
    collection: &str,
    id: &str,
) -> Result<Option<(u64, u64)>, TxError> {
    Ok(c.exec_first(CURRENT, (collection, id)).await?)
}

async fn update(c: &mut Conn, w: &Write, version: u64, now: i64) -> Result<(), TxError> {
    c.exec_drop(UPDATE, (version, now, w.data.expires_at, &w.data.body, &w.collection, &w.id))
        .await?;
    Ok(())
}

async fn insert_index(
    c: &mut Conn,
    collection: &str,
    id: &str,
    index: &[IndexKey],
) -> Result<(), TxError> {
    if index.is_empty() {
        return Ok(());
    }
    let params = index.iter().map(|k| {
        Params::Positional(vec![
            Value::from(collection),
            Value::from(id),
            Value::from(k.name.as_str()),
            Value::from(k.value.as_str()),
        ])
    });
    c.exec_batch(INSERT_INDEX, params).await?;
    Ok(())
}

async fn delete_index(c: &mut Conn, collection: &str, id: &str) -> Result<(), TxError> {
    c.exec_drop(DELETE_INDEX, (collection, id)).await?;
    Ok(())
}

async fn get(c: &mut Conn, collection: &str, id: &str) -> Result<Option<Document>, TxError> {
    let row: Option<Row> = c.exec_first(GET, (collection, id)).await?;
    match row {
        Some(row) => Ok(with_indexes(c, collection, vec![row]).await?.pop()),
        None => Ok(None),
    }
}

/// The documents of `rows` with their index entries, read in the same transaction (one
/// snapshot), so entries always match the document version.
async fn with_indexes(
    c: &mut Conn,
    collection: &str,
    rows: Vec<Row>,
) -> Result<Vec<Document>, TxError> {
    let mut docs = Vec::with_capacity(rows.len());
    for (id, version, created_at, updated_at, expires_at, body) in rows {
        let keys: Vec<(String, String)> = c.exec(SELECT_INDEX, (collection, id.as_str())).await?;
        let index = keys.into_iter().map(|(name, value)| IndexKey { name, value }).collect();
        docs.push(Document { id, version, created_at, updated_at, expires_at, index, body });
    }
    Ok(docs)
}

fn sql_limit(limit: usize) -> u64 {
    u64::try_from(limit).unwrap_or(u64::MAX)
}
