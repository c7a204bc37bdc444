//! Several NRF instances on one MySQL-protocol database (issue #25): each serves from its own
//! in-memory view, kept coherent with the others' writes by the store's change feed
//! ([`store::mysql::feed`]), and judges heartbeats by the latest any instance received.
//!
//! - **Views.** Every profile and subscription write records a change in the feed (the store
//!   does, once [`MysqlStore::record_changes`] is on). [`apply`] re-reads each changed key under
//!   the key's write lock and installs what the database holds now, so a change read late or
//!   twice cannot roll the view back: what is installed is always the latest committed state.
//! - **Notifications once.** Only the instance that handled a change publishes it (it holds the
//!   change's request); applying the feed never publishes. Subscriptions reach every instance
//!   through the feed, so a subscription made at one is notified of changes made at another.
//! - **Heartbeats.** A heartbeat that changes nothing writes nothing at the instance that takes
//!   it (a stamp in memory). Each instance writes the stamps it took since its last flush in one
//!   statement per [`HEARTBEAT_FLUSH`] (`nrf_heartbeats`, the latest kept), and an audit about to
//!   suspend a silent NF first reads that table for it: an NF heartbeating to another instance
//!   is not suspended. The suspension is a conditional write on the version the audit saw, so
//!   two instances' audits suspend (and notify) once.
//!
//! On SQLite (one instance per file) none of this runs.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use store::mysql::feed::{self, Change, FeedReader};
use store::mysql::mysql_async::prelude::Queryable;
use store::mysql::mysql_async::{Params, Value as SqlValue};
use store::{AnyStore, MysqlMigration, MysqlStore};

use crate::context::{now_ms, Entry, Nrf};
use crate::models::NfProfile;
use crate::store::{PROFILES, SUBSCRIPTIONS};
use crate::subscriptions::Subscription;

/// How often an instance writes the heartbeat stamps it took: well inside the audit's grace
/// (5 s by default), so another instance's audit always finds a stamp younger than the grace.
pub const HEARTBEAT_FLUSH: Duration = Duration::from_millis(1000);
/// Stamps older than this are removed (their NF deregistered or long suspended).
const HEARTBEAT_KEEP_MS: i64 = 24 * 3600 * 1000;
const HEARTBEAT_PRUNE_EVERY: u32 = 600;
const ROWS_PER_STATEMENT: usize = 500;

pub const MIGRATIONS: &[MysqlMigration] = &[MysqlMigration::new(
    "nrf-0001-heartbeats",
    &["CREATE TABLE IF NOT EXISTS nrf_heartbeats (
            id VARBINARY(255) NOT NULL PRIMARY KEY,
            last_ms BIGINT NOT NULL
        ) ENGINE=InnoDB"],
)];

/// The MySQL store under the NRF, if that is its backend.
pub fn mysql(nrf: &Nrf) -> Option<&MysqlStore> {
    match nrf.store.backend() {
        AnyStore::Mysql(m) => Some(m),
        AnyStore::Sqlite(_) => None,
    }
}

/// Prepares a MySQL-backed NRF to share its database: its tables, its writes recorded in the
/// feed, and a reader positioned before the view is loaded (so every later change is either in
/// what is loaded or read from the feed). `None` on SQLite.
pub async fn prepare(store: &AnyStore) -> Result<Option<FeedReader>, store::Error> {
    let AnyStore::Mysql(m) = store else { return Ok(None) };
    m.migrate(MIGRATIONS).await?;
    // A writer id per process, not the nfInstanceId: two instances configured with one id
    // must still read each other's changes.
    let writer = uuid::Uuid::new_v4().simple().to_string();
    m.record_changes(&writer);
    Ok(Some(FeedReader::start(m, &writer).await?))
}

/// Follows the feed and flushes heartbeat stamps until `stop`.
pub async fn run(nrf: Arc<Nrf>, reader: FeedReader, stop: tokio::sync::watch::Receiver<bool>) {
    let flusher = tokio::spawn(flush_heartbeats(nrf.clone(), stop.clone()));
    feed::follow(reader, stop, |changes| apply(&nrf, changes)).await;
    let _ = flusher.await;
}

/// Installs the current state of each changed key; returns the changes that failed.
pub async fn apply(nrf: &Arc<Nrf>, changes: Vec<Change>) -> Vec<Change> {
    let mut failed = Vec::new();
    for ch in changes {
        let done = match ch.entity.as_str() {
            PROFILES => refresh_profile(nrf, &ch.id).await,
            SUBSCRIPTIONS => refresh_subscription(nrf, &ch.id).await,
            _ => Ok(()),
        };
        if let Err(e) = done {
            tracing::warn!(entity = %ch.entity, id = %ch.id, error = %e,
                "change feed: cannot re-read a changed key; will try again");
            failed.push(ch);
        }
    }
    failed
}

async fn refresh_profile(nrf: &Nrf, key: &str) -> Result<(), store::Error> {
    let _guard = nrf.lock_key(key).await;
    match nrf.store.get(PROFILES, key).await? {
        Some((version, value)) => {
            if nrf.entry(key).is_some_and(|e| e.version == version && e.value == value) {
                return Ok(());
            }
            match serde_json::from_value::<NfProfile>(value.clone()) {
                Ok(p) => {
                    nrf.write_index().insert(Arc::new(Entry::new(
                        key.to_owned(),
                        p,
                        value,
                        version,
                    )));
                }
                Err(e) => tracing::error!(id = %key, error = %e, "stored profile unreadable"),
            }
        }
        None => {
            nrf.write_index().remove(key);
        }
    }
    Ok(())
}

async fn refresh_subscription(nrf: &Nrf, id: &str) -> Result<(), store::Error> {
    let _guard = nrf.lock_key(id).await;
    match nrf.store.get(SUBSCRIPTIONS, id).await? {
        Some((_, value)) => match Subscription::from_stored(value) {
            Ok(s) if s.expires_ms > now_ms() => {
                nrf.write_subscriptions().insert(id.to_owned(), Arc::new(s));
            }
            Ok(_) => {
                nrf.write_subscriptions().remove(id);
            }
            Err(e) => tracing::error!(%id, error = %e, "stored subscription unreadable"),
        },
        None => {
            nrf.write_subscriptions().remove(id);
        }
    }
    Ok(())
}

/// Writes the stamps of the heartbeats taken since the last flush, every [`HEARTBEAT_FLUSH`].
async fn flush_heartbeats(nrf: Arc<Nrf>, mut stop: tokio::sync::watch::Receiver<bool>) {
    let Some(db) = mysql(&nrf).cloned() else { return };
    let mut tick = tokio::time::interval(HEARTBEAT_FLUSH);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut flushes = 0u32;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        let stamps: Vec<(String, i64)> = nrf
            .read_index()
            .all()
            .filter(|e| e.heard.swap(false, Ordering::Relaxed))
            .map(|e| (e.key.clone(), e.last_seen() as i64))
            .collect();
        if let Err(e) = write_stamps(&db, stamps).await {
            tracing::warn!(error = %e, "heartbeat stamps not written");
        }
        flushes = flushes.wrapping_add(1);
        if flushes.is_multiple_of(HEARTBEAT_PRUNE_EVERY) {
            let before = now_ms() as i64 - HEARTBEAT_KEEP_MS;
            let pruned = db
                .write(move |c| {
                    Box::pin(async move {
                        c.exec_drop("DELETE FROM nrf_heartbeats WHERE last_ms < ?", (before,))
                            .await?;
                        Ok(())
                    })
                })
                .await;
            if let Err(e) = pruned {
                tracing::debug!(error = %e, "old heartbeat stamps not pruned");
            }
        }
    }
}

/// One multi-row upsert per [`ROWS_PER_STATEMENT`] stamps, keeping the later of two.
pub async fn write_stamps(db: &MysqlStore, stamps: Vec<(String, i64)>) -> store::Result<()> {
    if stamps.is_empty() {
        return Ok(());
    }
    let stamps = Arc::new(stamps);
    db.write(move |c| {
        let stamps = stamps.clone();
        Box::pin(async move {
            for chunk in stamps.chunks(ROWS_PER_STATEMENT) {
                let mut sql = String::from("INSERT INTO nrf_heartbeats (id, last_ms) VALUES ");
                let mut p = Vec::with_capacity(chunk.len() * 2);
                for (i, (id, at)) in chunk.iter().enumerate() {
                    sql.push_str(if i == 0 { "(?, ?)" } else { ", (?, ?)" });
                    p.push(SqlValue::from(id.as_str()));
                    p.push(SqlValue::from(*at));
                }
                sql.push_str(
                    " ON DUPLICATE KEY UPDATE last_ms = GREATEST(last_ms, VALUES(last_ms))",
                );
                c.exec_drop(sql, Params::Positional(p)).await?;
            }
            Ok(())
        })
    })
    .await
}

/// Before the audit suspends `late` entries: raises each one's stamp to the latest heartbeat
/// any instance wrote for it.
pub async fn catch_up_heartbeats(nrf: &Nrf, late: &[Arc<Entry>]) -> store::Result<()> {
    let Some(db) = mysql(nrf) else { return Ok(()) };
    if late.is_empty() {
        return Ok(());
    }
    let ids: Arc<Vec<String>> = Arc::new(late.iter().map(|e| e.key.clone()).collect());
    let stamps: Vec<(String, i64)> = db
        .read(move |c| {
            let ids = ids.clone();
            Box::pin(async move {
                let mut out = Vec::new();
                for chunk in ids.chunks(ROWS_PER_STATEMENT) {
                    let mut sql =
                        String::from("SELECT id, last_ms FROM nrf_heartbeats WHERE id IN (");
                    for i in 0..chunk.len() {
                        sql.push_str(if i == 0 { "?" } else { ",?" });
                    }
                    sql.push(')');
                    let p = chunk.iter().map(|id| SqlValue::from(id.as_str())).collect();
                    let rows: Vec<(String, i64)> = c.exec(sql, Params::Positional(p)).await?;
                    out.extend(rows);
                }
                Ok(out)
            })
        })
        .await?;
    for (id, at) in stamps {
        if let Some(e) = late.iter().find(|e| e.key == id) {
            e.last_seen_ms.fetch_max(u64::try_from(at).unwrap_or(0), Ordering::Relaxed);
        }
    }
    Ok(())
}
