//! The change feed: how several instances of one NF on one database keep their in-memory views
//! coherent (issue #25, docs/store.md "Several instances on one database").
//!
//! A write that an instance's view must learn of adds a row to `store_changes` in the same
//! transaction ([`record`]): its entity (a collection or table), key, operation, the writing
//! instance and, where the reader cannot re-read what it needs (a deleted row), a payload. Every
//! instance polls the table ([`FeedReader::poll`]) every [`POLL_INTERVAL`] from the last row it
//! saw, skipping its own rows (it applied them when it wrote them, so it reads its own writes at
//! once), and rows older than [`RETENTION`] are pruned.
//!
//! **Order of commits, not of ids.** `seq` is an `AUTO_INCREMENT`, allocated when the row is
//! inserted, not when its transaction commits: two concurrent transactions can commit in the
//! other order, and on Galera each node allocates from its own counter (`auto_increment_offset`
//! per node), so a row committed later can carry a smaller `seq` than one already read. A
//! reader that only asked for `seq > last` would miss such a row for good. So the reader keeps
//! the seqs it saw in the last [`WINDOW`] and, every [`RESCAN_EVERY`]-th poll, asks again for
//! every seq above the oldest of them (seqs only: one 8-byte column from the primary key),
//! fetching the rows it had not seen. A row is missed only if it becomes visible more than
//! [`WINDOW`] after a row with a larger seq did: a transaction that stays between its feed row's
//! insert (its last statement) and its commit for that long, or a Galera node that lags the
//! others that much. The cost is that rescan's read of the window's seqs: write rate × WINDOW
//! ids, every RESCAN_EVERY × POLL_INTERVAL.
//!
//! Rows of one key written in two conflicting transactions are read in commit order: the second
//! waited for the first's lock (or, on Galera, was certified after it and applies after it on
//! every node), so its feed row was allocated after the first was visible.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Params, Value};

use super::migrate::MysqlMigration;
use super::{now_millis, MysqlStore, TxError};
use crate::error::{Error, Result};

pub(crate) const MIGRATIONS: &[MysqlMigration] = &[MysqlMigration::new(
    "store-0002-changes",
    &["CREATE TABLE IF NOT EXISTS store_changes (
            seq BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
            at_ms BIGINT NOT NULL,
            writer VARBINARY(64) NOT NULL,
            entity VARBINARY(64) NOT NULL,
            id VARBINARY(255) NOT NULL,
            op TINYINT UNSIGNED NOT NULL,
            payload MEDIUMBLOB NULL,
            KEY store_changes_age (at_ms)
        ) ENGINE=InnoDB"],
)];

/// How often a follower polls: half the poll is the mean delay a change waits to be read.
pub const POLL_INTERVAL: Duration = Duration::from_millis(25);
/// How long a seq is remembered, and so how late a row may become visible after a larger one
/// and still be read.
pub const WINDOW: Duration = Duration::from_millis(1000);
/// Every how many polls the window is read again (4 × 25 ms: a row committed out of order is
/// read within 100 ms).
pub const RESCAN_EVERY: u64 = 4;
/// How long rows are kept: far beyond any follower's lag, short enough to keep the table small.
pub const RETENTION: Duration = Duration::from_secs(300);
/// How often a follower prunes (each instance does; the deletes of two are harmless).
pub const PRUNE_INTERVAL: Duration = Duration::from_secs(10);

/// Rows read by one poll at most; the next poll continues.
const BATCH: u64 = 2000;
/// Seqs read by one rescan at most.
const RESCAN_LIMIT: u64 = 100_000;
/// Rows pruned by one statement.
const PRUNE_BATCH: u64 = 10_000;

/// What a change did to its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Created or changed.
    Put,
    /// Removed.
    Delete,
}

impl Op {
    fn code(self) -> u8 {
        match self {
            Op::Put => 1,
            Op::Delete => 2,
        }
    }
}

/// One row of the feed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub seq: u64,
    pub entity: String,
    pub id: String,
    pub op: Op,
    pub payload: Option<Vec<u8>>,
}

const INSERT: &str =
    "INSERT INTO store_changes (at_ms, writer, entity, id, op, payload) VALUES (?, ?, ?, ?, ?, ?)";

/// Adds a change to the feed, in the caller's transaction: make it the transaction's last
/// statement, so the time between its seq and its commit is short (see the module docs).
pub async fn record(
    c: &mut Conn,
    writer: &str,
    entity: &str,
    id: &str,
    op: Op,
    payload: Option<&[u8]>,
) -> Result<(), TxError> {
    c.exec_drop(INSERT, (now_millis(), writer, entity, id, op.code(), payload)).await?;
    Ok(())
}

/// Several changes in one statement per 500 (a write that changes many rows at once).
pub async fn record_many(
    c: &mut Conn,
    writer: &str,
    changes: &[(&str, &str, Op, Option<&[u8]>)],
) -> Result<(), TxError> {
    let now = now_millis();
    for chunk in changes.chunks(500) {
        let mut sql = String::from(
            "INSERT INTO store_changes (at_ms, writer, entity, id, op, payload) VALUES ",
        );
        let mut p = Vec::with_capacity(chunk.len() * 6);
        for (i, (entity, id, op, payload)) in chunk.iter().enumerate() {
            sql.push_str(if i == 0 { "(?, ?, ?, ?, ?, ?)" } else { ", (?, ?, ?, ?, ?, ?)" });
            p.extend([
                Value::from(now),
                Value::from(writer),
                Value::from(*entity),
                Value::from(*id),
                Value::from(op.code()),
                payload.map_or(Value::NULL, Value::from),
            ]);
        }
        c.exec_drop(sql, Params::Positional(p)).await?;
    }
    Ok(())
}

type Row = (u64, Vec<u8>, String, String, u8, Option<Vec<u8>>);

/// Reads the feed from where this instance is, skipping its own rows.
pub struct FeedReader {
    store: MysqlStore,
    own: Arc<str>,
    /// Every seq at or below was read or is past the window.
    floor: u64,
    max_seen: u64,
    /// Seqs above `floor` read so far, with when.
    recent: BTreeMap<u64, Instant>,
    polls: u64,
}

impl FeedReader {
    /// A reader that will return every change committed from now on, and those of the last
    /// [`WINDOW`] (an NF loads its view after this, so a change is either in what it loads or
    /// read from the feed; reading one twice is harmless, as applying re-reads the key).
    pub async fn start(store: &MysqlStore, own: &str) -> Result<FeedReader> {
        let since = now_millis() - WINDOW.as_millis() as i64;
        let floor = store
            .read(move |c| {
                Box::pin(async move {
                    let n: Option<Option<u64>> = c
                        .exec_first("SELECT MAX(seq) FROM store_changes WHERE at_ms < ?", (since,))
                        .await?;
                    Ok(n.flatten().unwrap_or(0))
                })
            })
            .await?;
        Ok(FeedReader {
            store: store.clone(),
            own: own.into(),
            floor,
            max_seen: floor,
            recent: BTreeMap::new(),
            polls: 0,
        })
    }

    /// The changes of other instances not read yet, in seq order.
    pub async fn poll(&mut self) -> Result<Vec<Change>> {
        self.polls += 1;
        let rescan = self.polls.is_multiple_of(RESCAN_EVERY) && !self.recent.is_empty();
        let (floor, max_seen) = (self.floor, self.max_seen);
        let seen: Arc<Vec<u64>> = if rescan {
            Arc::new(self.recent.keys().copied().collect())
        } else {
            Arc::new(Vec::new())
        };
        let rows: Vec<Row> = self
            .store
            .read(move |c| {
                let seen = seen.clone();
                Box::pin(async move {
                    let mut rows: Vec<Row> = Vec::new();
                    if rescan {
                        let seqs: Vec<u64> = c
                            .exec(
                                "SELECT seq FROM store_changes WHERE seq > ? AND seq <= ? \
                                 ORDER BY seq LIMIT ?",
                                (floor, max_seen, RESCAN_LIMIT),
                            )
                            .await?;
                        let late: Vec<u64> =
                            seqs.into_iter().filter(|s| seen.binary_search(s).is_err()).collect();
                        for chunk in late.chunks(500) {
                            rows.extend(fetch(c, chunk).await?);
                        }
                    }
                    let newer: Vec<Row> = c
                        .exec(
                            "SELECT seq, writer, entity, id, op, payload FROM store_changes \
                             WHERE seq > ? ORDER BY seq LIMIT ?",
                            (max_seen, BATCH),
                        )
                        .await?;
                    rows.extend(newer);
                    Ok(rows)
                })
            })
            .await?;
        let now = Instant::now();
        let mut out = Vec::with_capacity(rows.len());
        for (seq, writer, entity, id, op, payload) in rows {
            if self.recent.insert(seq, now).is_some() {
                continue;
            }
            self.max_seen = self.max_seen.max(seq);
            if *writer == *self.own.as_bytes() {
                continue;
            }
            let op = if op == 2 { Op::Delete } else { Op::Put };
            out.push(Change { seq, entity, id, op, payload });
        }
        out.sort_unstable_by_key(|c| c.seq);
        self.advance(now);
        Ok(out)
    }

    /// Forgets the seqs read more than [`WINDOW`] ago: the floor rises to the largest of them.
    fn advance(&mut self, now: Instant) {
        let Some(cutoff) = now.checked_sub(WINDOW) else { return };
        let Some(new_floor) =
            self.recent.iter().filter(|(_, at)| **at <= cutoff).map(|(s, _)| *s).max()
        else {
            return;
        };
        self.recent = self.recent.split_off(&(new_floor + 1));
        self.floor = self.floor.max(new_floor);
    }

    /// Seqs remembered (the window): what a rescan compares against.
    pub fn window_len(&self) -> usize {
        self.recent.len()
    }
}

async fn fetch(c: &mut Conn, seqs: &[u64]) -> Result<Vec<Row>, TxError> {
    if seqs.is_empty() {
        return Ok(Vec::new());
    }
    let mut sql = String::from(
        "SELECT seq, writer, entity, id, op, payload FROM store_changes WHERE seq IN (",
    );
    for i in 0..seqs.len() {
        sql.push_str(if i == 0 { "?" } else { ",?" });
    }
    sql.push(')');
    let params = Params::Positional(seqs.iter().map(|s| Value::from(*s)).collect());
    Ok(c.exec(sql, params).await?)
}

impl MysqlStore {
    /// From now on, every document write of this store also records a change in the feed,
    /// as written by `writer` (this instance's id). An NF whose instances share a database and
    /// keep views of its documents calls it once, at start.
    pub fn record_changes(&self, writer: &str) {
        let _ = self.inner.feed_writer.set(writer.into());
    }

    /// The writer id document writes record changes as, once [`MysqlStore::record_changes`].
    pub fn feed_writer(&self) -> Option<&Arc<str>> {
        self.inner.feed_writer.get()
    }

    /// Removes feed rows older than [`RETENTION`]; returns how many.
    pub async fn prune_changes(&self) -> Result<u64> {
        let before = now_millis() - RETENTION.as_millis() as i64;
        self.write(move |c| {
            Box::pin(async move {
                c.exec_drop(
                    "DELETE FROM store_changes WHERE at_ms < ? LIMIT ?",
                    (before, PRUNE_BATCH),
                )
                .await?;
                Ok(c.affected_rows())
            })
        })
        .await
    }
}

/// Polls `reader` every [`POLL_INTERVAL`] and hands each batch of changes to `apply`, which
/// returns the changes it could not apply (a store error): they are handed again at the next
/// poll. Prunes the feed every [`PRUNE_INTERVAL`]. Returns when `stop` turns true.
pub async fn follow<F, Fut>(
    mut reader: FeedReader,
    mut stop: tokio::sync::watch::Receiver<bool>,
    mut apply: F,
) where
    F: FnMut(Vec<Change>) -> Fut,
    Fut: std::future::Future<Output = Vec<Change>>,
{
    let mut tick = tokio::time::interval(POLL_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_prune = Instant::now();
    let mut pending: Vec<Change> = Vec::new();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
        match reader.poll().await {
            Ok(changes) => pending.extend(changes),
            Err(Error::Closed) => return,
            Err(e) => tracing::warn!(error = %e, "change feed: poll failed"),
        }
        if !pending.is_empty() {
            pending = apply(std::mem::take(&mut pending)).await;
        }
        if last_prune.elapsed() >= PRUNE_INTERVAL {
            last_prune = Instant::now();
            if let Err(e) = reader.store.prune_changes().await {
                tracing::debug!(error = %e, "change feed: prune failed");
            }
        }
    }
}
