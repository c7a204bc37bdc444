//! The UDR's stores, one per service, each behind its service's trait: [`SlfStore`],
//! [`EirStore`], [`PolicyDataStore`] and [`ShDataStore`]. [`Stores::open_sqlite`] opens them
//! all over one SQLite file (each service's SQLite implementation and migrations live in that
//! service's `sqlite` module); [`Stores::mysql`] over a MySQL-protocol database (the services'
//! `mysql` modules), shared by several UDR instances (`crate::coherence`).

use std::sync::Arc;

use store::{
    AnyStore, Migration, MysqlMigration, MysqlStore, SqliteConfig, SqliteStore, StoreStats,
};

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
    backend: AnyStore,
    /// On MySQL: the stores the change feed updates, and this instance's id in the feed.
    mysql: Option<MysqlParts>,
}

#[derive(Clone)]
struct MysqlParts {
    slf: Arc<slf::mysql::MysqlSlf>,
    sh: Arc<sh::mysql::MysqlSh>,
    policy: Arc<policy_data::mysql::MysqlPolicyData>,
    writer: Arc<str>,
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

/// Every table of the UDR on the MySQL-protocol backend: each service's migrations, in turn.
pub const MYSQL_MIGRATIONS: [&[MysqlMigration]; 4] = [
    slf::mysql::MIGRATIONS,
    sh::mysql::MIGRATIONS,
    eir::mysql::MIGRATIONS,
    policy_data::mysql::MIGRATIONS,
];

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
            backend: AnyStore::Sqlite(db),
            mysql: None,
        })
    }

    /// The UDR's stores on an open MySQL-protocol store, applying the UDR's schema. `owner`
    /// owns the policy data notifications this instance records (its nfInstanceId: only it
    /// delivers them, and resumes them after a restart).
    pub async fn mysql(db: MysqlStore, owner: &str) -> store::Result<Stores> {
        for m in MYSQL_MIGRATIONS {
            db.migrate(m).await?;
        }
        let writer = crate::coherence::writer_id();
        let slf = Arc::new(slf::mysql::MysqlSlf::new(db.clone(), writer.clone()));
        let sh = Arc::new(sh::mysql::MysqlSh::new(db.clone(), writer.clone()));
        let policy = Arc::new(policy_data::mysql::MysqlPolicyData::new(
            db.clone(),
            writer.clone(),
            owner.into(),
        ));
        Ok(Stores {
            slf: slf.clone(),
            eir: Arc::new(eir::mysql::MysqlEir::new(db.clone())),
            policy: policy.clone(),
            sh: sh.clone(),
            backend: AnyStore::Mysql(db),
            mysql: Some(MysqlParts { slf, sh, policy, writer }),
        })
    }

    /// The UDR's stores on the backend `[store]` names (a tool's, such as `fivecore udr import`;
    /// the UDR itself opens its store through the NF skeleton).
    pub async fn open(config: SqliteConfig, owner: &str) -> store::Result<Stores> {
        match AnyStore::open(config).await? {
            AnyStore::Sqlite(db) => match Stores::sqlite(db.clone()).await {
                Ok(s) => Ok(s),
                Err(e) => {
                    let _ = db.close().await;
                    Err(e)
                }
            },
            AnyStore::Mysql(db) => match Stores::mysql(db.clone(), owner).await {
                Ok(s) => Ok(s),
                Err(e) => {
                    db.close().await;
                    Err(e)
                }
            },
        }
    }

    /// The backend underneath.
    pub fn backend(&self) -> &AnyStore {
        &self.backend
    }

    /// On MySQL: this instance's id in the change feed.
    pub fn feed_writer(&self) -> Option<&Arc<str>> {
        self.mysql.as_ref().map(|m| &m.writer)
    }

    pub(crate) fn mysql_slf(&self) -> Option<&Arc<slf::mysql::MysqlSlf>> {
        self.mysql.as_ref().map(|m| &m.slf)
    }

    pub(crate) fn mysql_policy(&self) -> Option<&Arc<policy_data::mysql::MysqlPolicyData>> {
        self.mysql.as_ref().map(|m| &m.policy)
    }

    pub(crate) fn mysql_sh(&self) -> Option<&Arc<sh::mysql::MysqlSh>> {
        self.mysql.as_ref().map(|m| &m.sh)
    }

    /// The SQLite engine's counters (zero on MySQL, whose counters are `store_mysql_*`).
    pub fn stats(&self) -> StoreStats {
        match &self.backend {
            AnyStore::Sqlite(db) => db.stats(),
            AnyStore::Mysql(_) => StoreStats::default(),
        }
    }

    /// Finishes the work queued, then closes the backend; later calls fail with `Closed`.
    pub async fn close(&self) -> store::Result<()> {
        self.backend.close().await
    }
}
