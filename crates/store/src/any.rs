//! [`AnyStore`]: the document store `[store] backend` names, for an NF whose state goes through
//! [`DocumentStore`] only (the NRF). An enum of the two backends rather than a trait object, so a
//! call costs a branch and no allocation: the SQLite path stays as fast as a bare
//! [`SqliteStore`].

use crate::config::{Backend, SqliteConfig};
use crate::document::{Document, DocumentData, DocumentStore, UnixMillis, Upserted};
use crate::error::Result;
use crate::mysql::MysqlStore;
use crate::sqlite::SqliteStore;

/// The store of either backend, opened from one `[store]` table.
#[derive(Clone)]
pub enum AnyStore {
    Sqlite(SqliteStore),
    Mysql(MysqlStore),
}

impl AnyStore {
    /// Opens the backend `config.backend` names: the SQLite file at `path`, or the MySQL
    /// nodes at `url` (with the store's own migrations applied).
    pub async fn open(config: SqliteConfig) -> Result<Self> {
        match config.backend {
            Backend::Sqlite => Ok(AnyStore::Sqlite(SqliteStore::open(config).await?)),
            Backend::Mysql => Ok(AnyStore::Mysql(MysqlStore::open(config.mysql()?).await?)),
        }
    }

    pub fn backend(&self) -> Backend {
        match self {
            AnyStore::Sqlite(_) => Backend::Sqlite,
            AnyStore::Mysql(_) => Backend::Mysql,
        }
    }

    /// The backend's metrics on an NF's `/metrics` (docs/operations.md).
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        match self {
            AnyStore::Sqlite(s) => s.register_metrics(registry),
            AnyStore::Mysql(s) => s.register_metrics(registry),
        }
    }

    /// Closes the store; everything acknowledged is already committed on either backend.
    pub async fn close(&self) -> Result<()> {
        match self {
            AnyStore::Sqlite(s) => s.close().await,
            AnyStore::Mysql(s) => {
                s.close().await;
                Ok(())
            }
        }
    }
}

/// Each call is the backend's own.
macro_rules! either {
    ($self:ident, $s:ident => $call:expr) => {
        match $self {
            AnyStore::Sqlite($s) => $call.await,
            AnyStore::Mysql($s) => $call.await,
        }
    };
}

impl DocumentStore for AnyStore {
    async fn create(&self, collection: &str, id: &str, data: DocumentData) -> Result<Document> {
        either!(self, s => s.create(collection, id, data))
    }

    async fn upsert(&self, collection: &str, id: &str, data: DocumentData) -> Result<Upserted> {
        either!(self, s => s.upsert(collection, id, data))
    }

    async fn get(&self, collection: &str, id: &str) -> Result<Option<Document>> {
        either!(self, s => s.get(collection, id))
    }

    async fn replace(
        &self,
        collection: &str,
        id: &str,
        data: DocumentData,
        expected_version: Option<u64>,
    ) -> Result<Document> {
        either!(self, s => s.replace(collection, id, data, expected_version))
    }

    async fn delete(
        &self,
        collection: &str,
        id: &str,
        expected_version: Option<u64>,
    ) -> Result<()> {
        either!(self, s => s.delete(collection, id, expected_version))
    }

    async fn find(
        &self,
        collection: &str,
        index: &str,
        value: &str,
        limit: usize,
    ) -> Result<Vec<Document>> {
        either!(self, s => s.find(collection, index, value, limit))
    }

    async fn count(&self, collection: &str) -> Result<u64> {
        either!(self, s => s.count(collection))
    }

    async fn scan_expired(
        &self,
        collection: &str,
        at: UnixMillis,
        limit: usize,
    ) -> Result<Vec<Document>> {
        either!(self, s => s.scan_expired(collection, at, limit))
    }

    async fn list(
        &self,
        collection: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Document>> {
        either!(self, s => s.list(collection, after, limit))
    }
}
