//! Schema migrations on the MySQL backend: each applied once, recorded in `store_migrations`.

use mysql_async::prelude::Queryable;

use super::{now_millis, MysqlStore, TxError};
use crate::error::{Error, Result};

/// One schema step: a name recorded once applied, and its statements (MySQL runs DDL outside
/// transactions, one statement at a time).
///
/// Every statement must be idempotent (`CREATE TABLE IF NOT EXISTS`, indexes declared in the
/// `CREATE TABLE`): the named lock that keeps two instances from migrating at once is local to
/// one Galera node, and a crash between a statement and the record re-runs it.
#[derive(Debug, Clone, Copy)]
pub struct MysqlMigration {
    pub name: &'static str,
    pub statements: &'static [&'static str],
}

impl MysqlMigration {
    pub const fn new(name: &'static str, statements: &'static [&'static str]) -> Self {
        Self { name, statements }
    }
}

const LOCK: &str = "fivecore-store-migrate";
/// Long enough for another instance's migrations of a large table.
const LOCK_WAIT_S: u32 = 300;

const CREATE_LOG: &str = "CREATE TABLE IF NOT EXISTS store_migrations (
    name VARBINARY(128) NOT NULL PRIMARY KEY,
    applied_at BIGINT NOT NULL
) ENGINE=InnoDB";

impl MysqlStore {
    /// Applies the migrations not applied yet, in order, under the named lock; returns how many
    /// it applied. Safe when several instances start at once.
    pub async fn migrate(&self, migrations: &'static [MysqlMigration]) -> Result<usize> {
        // DDL commits by itself, so this runs outside the transaction wrapper, on a connection
        // of the current node, with failover of the connection only.
        let mut last = None;
        for _ in 0..self.inner.nodes.len() {
            let node = self.current_node();
            let conn = tokio::time::timeout(
                self.inner.config.connect_timeout,
                self.inner.nodes[node].get_conn(),
            )
            .await;
            let mut conn = match conn {
                Ok(Ok(c)) => c,
                Ok(Err(e)) => {
                    last = Some(Error::backend(e));
                    self.fail_over(node);
                    continue;
                }
                Err(_) => {
                    last = Some(Error::backend_msg("connect timed out"));
                    self.fail_over(node);
                    continue;
                }
            };
            return apply(&mut conn, migrations).await.map_err(|e| match e {
                TxError::Contract(e) => e,
                TxError::Db(e) => Error::backend(e),
            });
        }
        Err(last.unwrap_or(Error::Closed))
    }
}

async fn apply(
    conn: &mut mysql_async::Conn,
    migrations: &[MysqlMigration],
) -> Result<usize, TxError> {
    let locked: Option<Option<i64>> =
        conn.exec_first("SELECT GET_LOCK(?, ?)", (LOCK, LOCK_WAIT_S)).await?;
    if locked.flatten() != Some(1) {
        return Err(Error::backend_msg(format!(
            "store migrations: lock {LOCK} not obtained within {LOCK_WAIT_S} s"
        ))
        .into());
    }
    let applied = run(conn, migrations).await;
    let released = conn.exec_drop("SELECT RELEASE_LOCK(?)", (LOCK,)).await;
    let n = applied?;
    released?;
    Ok(n)
}

async fn run(
    conn: &mut mysql_async::Conn,
    migrations: &[MysqlMigration],
) -> Result<usize, TxError> {
    conn.query_drop(CREATE_LOG).await?;
    let mut n = 0;
    for m in migrations {
        let done: Option<i64> = conn
            .exec_first("SELECT applied_at FROM store_migrations WHERE name = ?", (m.name,))
            .await?;
        if done.is_some() {
            continue;
        }
        for statement in m.statements {
            conn.query_drop(*statement).await?;
        }
        conn.exec_drop(
            "INSERT IGNORE INTO store_migrations (name, applied_at) VALUES (?, ?)",
            (m.name, now_millis()),
        )
        .await?;
        n += 1;
    }
    Ok(n)
}
