//! The MySQL-protocol backend: MariaDB (alone or as a Galera cluster), and any server speaking
//! the protocol with InnoDB or NDB tables.
//!
//! - **A pool per node, one node at a time.** Every call goes to the current node; a node that
//!   cannot be reached, drops the connection, or refuses work (Galera's `WSREP has not yet
//!   prepared node for application use` while it is not part of the primary component) makes
//!   the store move on to the next URL, round robin, and the call is tried again there. Staying
//!   on one node while it works keeps an instance's reads on the node that took its writes.
//! - **Each call is one transaction**, tried again as a whole (with a bounded, jittered
//!   backoff) when the server reports a deadlock or a Galera certification failure (1213), a
//!   lock wait timeout (1205) or a failed commit (1180): all of them roll the transaction back,
//!   so trying again cannot apply a write twice. A call re-reads what it checks (a version, an
//!   existing binding) on each try, so a conflict lost to another node ends as the same
//!   [`Error::VersionMismatch`] or [`Error::AlreadyExists`] SQLite would give.
//! - **Acknowledged means committed.** A write returns `Ok` only once the server answered its
//!   `COMMIT`. If the connection is lost (or the call times out) after `COMMIT` was sent and
//!   before its answer, the outcome is unknown: the caller gets [`Error::CommitUnknown`], never
//!   success, unless the call can show on another connection that its write is there (the
//!   document store re-reads the document by key: same body and write time means committed).
//! - **Async throughout**: `mysql_async` on the caller's runtime; no thread blocks.
//!
//! Schemas follow what NDB needs as well as InnoDB: a primary key on every table, no foreign
//! keys, `VARBINARY` keys (byte order, as SQLite's `BINARY`). Migrations are recorded in
//! `store_migrations` and applied under a named lock (`GET_LOCK`); Galera does not replicate
//! that lock, so every migration statement is also idempotent (`CREATE TABLE IF NOT EXISTS`),
//! which makes two instances starting at once on two nodes safe too.

mod document;
pub mod feed;
mod migrate;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mysql_async::{Conn, Opts, OptsBuilder, Pool, PoolConstraints, PoolOpts};

pub use migrate::MysqlMigration;
/// The driver, for NF schemas written against [`MysqlStore::write`] and [`MysqlStore::read`]
/// (one version for the workspace).
pub use mysql_async;

use crate::config::MysqlConfig;
use crate::error::{Error, Result};

/// A future borrowing the connection it runs on.
pub type ConnFuture<'c, T> = Pin<Box<dyn Future<Output = Result<T, TxError>> + Send + 'c>>;

/// How a transaction body fails.
#[derive(Debug)]
pub enum TxError {
    /// An answer of the store contract (not found, version mismatch, ...): the transaction is
    /// rolled back and the call returns it.
    Contract(Error),
    /// The database failed: retried, failed over or reported, by kind.
    Db(mysql_async::Error),
}

impl From<mysql_async::Error> for TxError {
    fn from(e: mysql_async::Error) -> Self {
        TxError::Db(e)
    }
}

impl From<Error> for TxError {
    fn from(e: Error) -> Self {
        TxError::Contract(e)
    }
}

/// Counters of what the backend had to do beyond the happy path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MysqlStats {
    /// Transactions tried again after a deadlock, certification failure or lock wait timeout.
    pub retries: u64,
    /// Moves to another node.
    pub failovers: u64,
    /// Writes whose `COMMIT` went unanswered.
    pub commit_unknown: u64,
}

/// The store over a MySQL-protocol server or cluster. Cheap to clone (shared pools).
#[derive(Clone)]
pub struct MysqlStore {
    inner: Arc<Inner>,
}

struct Inner {
    nodes: Vec<Pool>,
    current: AtomicUsize,
    config: MysqlConfig,
    closed: AtomicBool,
    retries: AtomicU64,
    failovers: AtomicU64,
    commit_unknown: AtomicU64,
    /// Set by [`MysqlStore::record_changes`]: document writes record changes in the feed.
    feed_writer: std::sync::OnceLock<Arc<str>>,
}

/// Tries of one call: enough to go round a three-node cluster several times while Galera
/// evicts a lost node (about a second with the timeouts the tests use).
const MAX_ATTEMPTS: u32 = 12;
const BACKOFF_FIRST: Duration = Duration::from_millis(2);
const BACKOFF_MAX: Duration = Duration::from_millis(400);

/// What to do after a failed try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// Rolled back by the server: try again on the same node.
    Retry,
    /// The node is lost or refuses work: try the next one.
    Failover,
    /// A fault trying again will not mend.
    Fail,
}

fn classify(e: &mysql_async::Error) -> Next {
    use mysql_async::Error as E;
    match e {
        E::Server(s) => match s.code {
            // ER_LOCK_DEADLOCK (also Galera's certification failure and brute-force abort),
            // ER_LOCK_WAIT_TIMEOUT, ER_ERROR_DURING_COMMIT: the transaction was rolled back.
            1213 | 1205 | 1180 => Next::Retry,
            // ER_UNKNOWN_COM_ERROR is what a Galera node not in the primary component answers
            // ("WSREP has not yet prepared node for application use"); then the server going
            // away: ER_SERVER_SHUTDOWN, ER_CONNECTION_KILLED, ER_QUERY_INTERRUPTED,
            // ER_CLIENT_INTERACTION_TIMEOUT, ER_CON_COUNT_ERROR, ER_OPTION_PREVENTS_STATEMENT
            // (a read-only node).
            1047 | 1053 | 1927 | 1317 | 4031 | 1040 | 1290 => Next::Failover,
            _ => Next::Fail,
        },
        E::Io(_) | E::Driver(_) => Next::Failover,
        E::Other(_) | E::Url(_) => Next::Fail,
    }
}

impl MysqlStore {
    /// Opens a pool per node (connections are made on demand) and applies the store's own
    /// migrations, which reaches a node or fails.
    pub async fn open(config: MysqlConfig) -> Result<Self> {
        config.validate()?;
        let mut nodes = Vec::with_capacity(config.urls.len());
        for url in &config.urls {
            let opts = Opts::from_url(url)
                .map_err(|e| Error::InvalidArgument(format!("store url {}: {e}", redact(url))))?;
            let mut init = vec![
                // Byte order and no silent truncation, whatever the server's defaults.
                "SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'".to_owned(),
            ];
            if config.causal_reads {
                init.push(
                    "SET SESSION wsrep_sync_wait = IF(@@wsrep_on, 1, @@wsrep_sync_wait)".to_owned(),
                );
            }
            let constraints = PoolConstraints::new(0, config.pool_size)
                .ok_or_else(|| Error::InvalidArgument("store pool_size".to_owned()))?;
            // The pool's reset of a returned connection (the default) stays on: a try dropped
            // by its timeout leaves a transaction open that the driver does not know of (it
            // was begun by a statement), and only the reset rolls it back before the
            // connection's next `START TRANSACTION` would commit it.
            let opts = OptsBuilder::from_opts(opts)
                .init(init)
                .stmt_cache_size(64)
                .tcp_nodelay(true)
                .pool_opts(PoolOpts::default().with_constraints(constraints));
            nodes.push(Pool::new(opts));
        }
        let store = MysqlStore {
            inner: Arc::new(Inner {
                nodes,
                current: AtomicUsize::new(0),
                config,
                closed: AtomicBool::new(false),
                retries: AtomicU64::new(0),
                failovers: AtomicU64::new(0),
                commit_unknown: AtomicU64::new(0),
                feed_writer: std::sync::OnceLock::new(),
            }),
        };
        let mut migrated = store.migrate(document::MIGRATIONS).await;
        if migrated.is_ok() {
            migrated = store.migrate(feed::MIGRATIONS).await;
        }
        if let Err(e) = migrated {
            store.close().await;
            return Err(e);
        }
        Ok(store)
    }

    /// The settings the store was opened with.
    pub fn config(&self) -> &MysqlConfig {
        &self.inner.config
    }

    /// The node calls go to now (an index into the configured URLs).
    pub fn current_node(&self) -> usize {
        self.inner.current.load(Ordering::Relaxed) % self.inner.nodes.len()
    }

    pub fn stats(&self) -> MysqlStats {
        MysqlStats {
            retries: self.inner.retries.load(Ordering::Relaxed),
            failovers: self.inner.failovers.load(Ordering::Relaxed),
            commit_unknown: self.inner.commit_unknown.load(Ordering::Relaxed),
        }
    }

    /// The backend's counters on an NF's `/metrics` (`store_mysql_*`, docs/operations.md).
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        let store = self.clone();
        crate::metrics::register_mysql(registry, move || store.stats());
    }

    /// Runs `body` in a read-write transaction and commits it; see the module docs for what is
    /// retried. `body` may run several times, each time from the start of a new transaction.
    /// A lost `COMMIT` answer is [`Error::CommitUnknown`].
    pub async fn write<T, F>(&self, body: F) -> Result<T>
    where
        T: Send,
        F: for<'c> FnMut(&'c mut Conn) -> ConnFuture<'c, T> + Send,
    {
        self.run(true, Some(self.inner.config.query_timeout), body).await
    }

    /// Runs `body` in a read-only transaction (one consistent snapshot).
    pub async fn read<T, F>(&self, body: F) -> Result<T>
    where
        T: Send,
        F: for<'c> FnMut(&'c mut Conn) -> ConnFuture<'c, T> + Send,
    {
        self.run(false, Some(self.inner.config.query_timeout), body).await
    }

    /// [`MysqlStore::read`] without the per-try `query_timeout`, for a pass over a whole table
    /// (loading an in-memory index), which may take longer than any single call should.
    pub async fn scan<T, F>(&self, body: F) -> Result<T>
    where
        T: Send,
        F: for<'c> FnMut(&'c mut Conn) -> ConnFuture<'c, T> + Send,
    {
        self.run(false, None, body).await
    }

    async fn run<T, F>(&self, write: bool, limit: Option<Duration>, mut body: F) -> Result<T>
    where
        T: Send,
        F: for<'c> FnMut(&'c mut Conn) -> ConnFuture<'c, T> + Send,
    {
        let inner = &self.inner;
        let mut backoff = BACKOFF_FIRST;
        // Nodes tried in a row without success: a full round without one makes the next
        // failover wait, so a cluster that is down entirely is not hammered.
        let mut lost_in_a_row = 0usize;
        let mut last: Option<mysql_async::Error> = None;
        for _ in 0..MAX_ATTEMPTS {
            if inner.closed.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            let node = self.current_node();
            let commit_sent = AtomicBool::new(false);
            let attempt = self.attempt(node, write, &mut body, &commit_sent);
            let outcome = match limit {
                Some(limit) => tokio::time::timeout(limit, attempt).await,
                None => Ok(attempt.await),
            };
            let err = match outcome {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(TxError::Contract(e))) => return Err(e),
                Ok(Err(TxError::Db(e))) => Some(e),
                // Dropping the try drops its connection: the server rolls back what was not
                // committed when it sees the connection close.
                Err(_) => None,
            };
            let next = err.as_ref().map_or(Next::Failover, classify);
            // The server's own answer to COMMIT is definite (1213 or 1180: rolled back); only
            // no answer leaves the outcome open.
            let answered = matches!(err, Some(mysql_async::Error::Server(_)));
            if write && commit_sent.load(Ordering::Acquire) && !answered {
                inner.commit_unknown.fetch_add(1, Ordering::Relaxed);
                self.fail_over(node);
                return Err(Error::CommitUnknown);
            }
            match next {
                Next::Fail => return Err(err.map_or(Error::CommitUnknown, Error::backend)),
                Next::Retry => {
                    inner.retries.fetch_add(1, Ordering::Relaxed);
                    lost_in_a_row = 0;
                    tokio::time::sleep(jitter(backoff)).await;
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                }
                Next::Failover => {
                    tracing::warn!(
                        node = %redact(&inner.config.urls[node]),
                        error = %err.as_ref().map_or("timed out".to_owned(), ToString::to_string),
                        "store: database node lost, failing over"
                    );
                    self.fail_over(node);
                    lost_in_a_row += 1;
                    if lost_in_a_row >= inner.nodes.len() {
                        tokio::time::sleep(jitter(backoff)).await;
                        backoff = (backoff * 2).min(BACKOFF_MAX);
                    }
                }
            }
            last = err;
        }
        Err(last
            .map_or_else(|| Error::backend_msg("every database node timed out"), Error::backend))
    }

    /// One try: a connection from `node`'s pool, the transaction, `body`, the commit.
    async fn attempt<T, F>(
        &self,
        node: usize,
        write: bool,
        body: &mut F,
        commit_sent: &AtomicBool,
    ) -> Result<T, TxError>
    where
        F: for<'c> FnMut(&'c mut Conn) -> ConnFuture<'c, T> + Send,
    {
        use mysql_async::prelude::Queryable;
        let pool = &self.inner.nodes[node];
        let mut conn =
            match tokio::time::timeout(self.inner.config.connect_timeout, pool.get_conn()).await {
                Ok(conn) => conn?,
                Err(_) => {
                    return Err(TxError::Db(mysql_async::Error::Driver(
                        mysql_async::DriverError::ConnectionClosed,
                    )))
                }
            };
        conn.query_drop(if write { "START TRANSACTION" } else { "START TRANSACTION READ ONLY" })
            .await?;
        match body(&mut conn).await {
            Ok(v) => {
                commit_sent.store(true, Ordering::Release);
                conn.query_drop("COMMIT").await?;
                Ok(v)
            }
            Err(e) => {
                // A lost connection rolls back on the server; a live one is rolled back here
                // so it goes back to the pool clean.
                if let TxError::Contract(_) = e {
                    conn.query_drop("ROLLBACK").await?;
                }
                Err(e)
            }
        }
    }

    fn fail_over(&self, from: usize) {
        let n = self.inner.nodes.len();
        if n > 1
            && self
                .inner
                .current
                .compare_exchange(from, (from + 1) % n, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            self.inner.failovers.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Disconnects every pool; calls made afterwards fail with [`Error::Closed`].
    pub async fn close(&self) {
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        for pool in &self.inner.nodes {
            let _ = pool.clone().disconnect().await;
        }
    }
}

/// `backoff` less a random part of up to half of it, so clients that collided do not collide
/// again in step.
fn jitter(backoff: Duration) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(backoff.as_nanos() as u64);
    let frac = (h.finish() % 1000) as u32;
    backoff - backoff / 2 * frac / 1000
}

/// A URL without its password, for logs and errors.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{}{user}@{}", &url[..scheme + 3], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

pub(crate) fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_sorted_into_retry_failover_and_fail() {
        let server = |code| {
            mysql_async::Error::Server(mysql_async::ServerError {
                code,
                message: String::new(),
                state: String::new(),
            })
        };
        assert_eq!(classify(&server(1213)), Next::Retry);
        assert_eq!(classify(&server(1205)), Next::Retry);
        assert_eq!(classify(&server(1180)), Next::Retry);
        assert_eq!(classify(&server(1047)), Next::Failover);
        assert_eq!(classify(&server(1062)), Next::Fail);
        assert_eq!(classify(&server(1146)), Next::Fail);
        let closed = mysql_async::Error::Driver(mysql_async::DriverError::ConnectionClosed);
        assert_eq!(classify(&closed), Next::Failover);
    }

    #[test]
    fn urls_lose_their_password_in_logs() {
        assert_eq!(redact("mysql://fc:secret@10.0.0.1:3306/db"), "mysql://fc@10.0.0.1:3306/db");
        assert_eq!(redact("mysql://10.0.0.1/db"), "mysql://10.0.0.1/db");
    }

    #[test]
    fn jitter_stays_within_half_of_the_backoff() {
        for _ in 0..100 {
            let d = jitter(Duration::from_millis(100));
            assert!(d <= Duration::from_millis(100) && d >= Duration::from_millis(50), "{d:?}");
        }
    }
}
