//! The UDR's stores, one per service, each behind its service's trait: [`SlfStore`],
//! [`EirStore`], [`PolicyDataStore`] and [`ShDataStore`]. [`Stores::open_sqlite`] opens them
//! all over one SQLite file (each service's SQLite implementation and migrations live in that
//! service's `sqlite` module); another backend is another constructor here.

use std::sync::Arc;

use store::{Migration, SqliteConfig, SqliteStore, StoreStats};

use crate::eir::{self, EirStore};
use crate::policy_data::{self, store::PolicyDataStore};
use crate::sh::{self, data::ShDataStore};
use crate::slf::{self, SlfStore};

/// Every store of the UDR.
#[derive(Clone)]
pub struct Stores {
    pub slf: Arc<dyn SlfStore>,
    pub eir: Arc<dyn EirStore>,
    pub policy: Arc<dyn PolicyDataStore>,
    pub sh: Arc<dyn ShDataStore>,
    backend: SqliteStore,
}

/// Every table of the UDR, each service's migrations in turn (append only); `fivecore restore`
/// checks a backup's schema against them.
pub fn migrations() -> Vec<Migration> {
    slf::sqlite::MIGRATIONS
        .into_iter()
        .chain(sh::sqlite::MIGRATIONS)
        .chain(eir::sqlite::MIGRATIONS)
        .chain(policy_data::sqlite::MIGRATIONS)
        .collect()
}

impl Stores {
    /// Opens the SQLite file of `config` (creating it), applying the UDR's schema.
    pub async fn open_sqlite(config: SqliteConfig) -> store::Result<Stores> {
        let db = SqliteStore::open(config).await?;
        match Stores::sqlite(db.clone()).await {
            Ok(s) => Ok(s),
            Err(e) => {
                let _ = db.close().await;
                Err(e)
            }
        }
    }

    /// The UDR's stores on an open SQLite store (the NF skeleton's), applying the UDR's schema.
    pub async fn sqlite(db: SqliteStore) -> store::Result<Stores> {
        db.migrate(migrations()).await?;
        Ok(Stores {
            slf: Arc::new(slf::sqlite::SqliteSlf::new(db.clone())),
            eir: Arc::new(eir::sqlite::SqliteEir::new(db.clone())),
            policy: Arc::new(policy_data::sqlite::SqlitePolicyData::new(db.clone())),
            sh: Arc::new(sh::sqlite::SqliteSh::new(db.clone())),
            backend: db,
        })
    }

    /// The backend's engine counters.
    pub fn stats(&self) -> StoreStats {
        self.backend.stats()
    }

    /// Finishes the work queued, then closes the backend; later calls fail with `Closed`.
    pub async fn close(&self) -> store::Result<()> {
        self.backend.close().await
    }
}
