//! The policy data store over SQLite: the schema, every statement it runs, and the
//! [`PolicyDataStore`] implementation over them.
//!
//! - `udr_policy_data`: one row per resource, keyed `(kind, id, part)` (see `ids`), with its
//!   version (the ETag) and its JSON as received or as last patched, served without re-encoding.
//!   A read is one primary-key lookup; a UE's whole policy data is one range of the same key.
//! - `udr_policy_subscription`: the subs-to-notify resources, loaded into memory at start.
//! - `udr_policy_outbox`: notifications not yet delivered. A change writes its rows in the same
//!   write job (so the same transaction) as the change itself; the delivery task deletes them once
//!   the subscriber has acknowledged them. `seq` only grows (AUTOINCREMENT), which orders them.
//!   No index on `subs_id`: the rows of a deleted subscription are never sent, and the delivery
//!   task deletes them as it reaches them (by `seq`), so no write has to find a subscription's
//!   rows. An index would cost two random page writes per notification (its insert and its
//!   delete), the largest share of the WAL a PATCH writes after its own row.
//!
//! Plain SQL without engine-specific features (no UPSERT, no partial index, no foreign key), for
//! the MySQL-protocol backend to come. Every write is one job on the store's writer thread: the
//! precondition check, the change, and the outbox rows are atomic, and a refused write changes
//! nothing.

use std::collections::BTreeMap;
use std::sync::Arc;

use rusqlite::{params, Connection, OptionalExtension, Transaction};
use serde_json::Value;
use store::{Migration, SqliteStore};

use super::etag::{self, Conditions};
use super::ids::{Key, Kind};
use super::notify;
use super::provisioning;
use super::store::{
    check_preconditions, row_write, EditOne, EditUe, Found, OutboxRow, PolicyDataStore, Refusal,
    Row, RowWrite, StoredSubscription, UeWritten, Written,
};
use super::subs_to_notify::{SubsIndex, Subscription};
use crate::StoreFuture;

pub const MIGRATIONS: [Migration; 2] = [
    Migration::new(
        "udr-policy-0001-data-subscriptions-outbox",
        "CREATE TABLE udr_policy_data (
        kind TEXT NOT NULL,
        id TEXT NOT NULL,
        part TEXT NOT NULL,
        version INTEGER NOT NULL,
        json_content BLOB NOT NULL,
        PRIMARY KEY (kind, id, part)
    );
    CREATE TABLE udr_policy_subscription (
        subs_id TEXT PRIMARY KEY NOT NULL,
        expiry_ms INTEGER,
        json_content BLOB NOT NULL
    );
    CREATE TABLE udr_policy_outbox (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        subs_id TEXT NOT NULL,
        created_ms INTEGER NOT NULL,
        item BLOB NOT NULL
    );
    CREATE INDEX udr_policy_outbox_subs ON udr_policy_outbox (subs_id);",
    ),
    Migration::new(
        "udr-policy-0002-outbox-without-subs-index",
        "DROP INDEX IF EXISTS udr_policy_outbox_subs;",
    ),
];

/// The policy data tables of the UDR's SQLite store.
#[derive(Clone)]
pub struct SqlitePolicyData {
    db: SqliteStore,
}

impl SqlitePolicyData {
    /// Over `db`, which must have [`MIGRATIONS`] applied.
    pub fn new(db: SqliteStore) -> Self {
        SqlitePolicyData { db }
    }
}

impl PolicyDataStore for SqlitePolicyData {
    fn get(&self, key: Key) -> StoreFuture<'_, Found> {
        Box::pin(get(&self.db, key))
    }

    fn get_ue(&self, ue_id: String) -> StoreFuture<'_, Vec<(String, Row)>> {
        Box::pin(get_ue(&self.db, ue_id))
    }

    fn get_kind(
        &self,
        kind: Kind,
        ids: Option<Vec<String>>,
    ) -> StoreFuture<'_, Vec<(String, Row)>> {
        Box::pin(get_kind(&self.db, kind, ids))
    }

    fn write_one(
        &self,
        subs: Arc<SubsIndex>,
        key: Key,
        cond: Conditions,
        must_exist: bool,
        edit: EditOne,
    ) -> StoreFuture<'_, Result<Written, Refusal>> {
        Box::pin(write_one(&self.db, subs, key, cond, must_exist, edit))
    }

    fn write_ue(
        &self,
        subs: Arc<SubsIndex>,
        ue_id: String,
        cond: Conditions,
        must_exist: bool,
        edit: EditUe,
    ) -> StoreFuture<'_, Result<UeWritten, Refusal>> {
        Box::pin(write_ue(&self.db, subs, ue_id, cond, must_exist, edit))
    }

    fn put_profiles(
        &self,
        profiles: Vec<(String, Value)>,
    ) -> StoreFuture<'_, (usize, Vec<(String, Value)>)> {
        Box::pin(self.db.write(move |tx| Ok((put_profiles(tx, &profiles)?, profiles))))
    }

    fn create_subscription(
        &self,
        subs: Arc<SubsIndex>,
        sub: Subscription,
        max: usize,
    ) -> StoreFuture<'_, bool> {
        Box::pin(create_subscription(&self.db, subs, sub, max))
    }

    fn replace_subscription(
        &self,
        subs: Arc<SubsIndex>,
        sub: Subscription,
    ) -> StoreFuture<'_, bool> {
        Box::pin(replace_subscription(&self.db, subs, sub))
    }

    fn delete_subscriptions(
        &self,
        subs: Option<Arc<SubsIndex>>,
        ids: Vec<String>,
    ) -> StoreFuture<'_, usize> {
        Box::pin(delete_subscriptions(&self.db, subs, ids))
    }

    fn load_subscriptions(&self) -> StoreFuture<'_, Vec<StoredSubscription>> {
        Box::pin(load_subscriptions(&self.db))
    }

    fn put_subscriptions(&self, subs: Vec<Subscription>) -> StoreFuture<'_, usize> {
        Box::pin(self.db.write(move |tx| {
            let mut del =
                tx.prepare_cached("DELETE FROM udr_policy_subscription WHERE subs_id = ?1")?;
            let mut ins = tx.prepare_cached(
                "INSERT INTO udr_policy_subscription (subs_id, expiry_ms, json_content)
                 VALUES (?1, ?2, ?3)",
            )?;
            for sub in &subs {
                del.execute([&sub.id])?;
                ins.execute(params![sub.id, sub.expiry_ms, sub.json.as_ref()])?;
            }
            Ok(subs.len())
        }))
    }

    fn read_outbox(&self, after_seq: i64, limit: usize) -> StoreFuture<'_, Vec<OutboxRow>> {
        Box::pin(read_outbox(&self.db, after_seq, limit))
    }

    fn delete_outbox(&self, seqs: Vec<i64>) -> StoreFuture<'_, ()> {
        Box::pin(delete_outbox(&self.db, seqs))
    }

    fn outbox_len(&self) -> StoreFuture<'_, u64> {
        Box::pin(outbox_len(&self.db))
    }
}

fn select_row(c: &Connection, key: &Key) -> rusqlite::Result<Option<Row>> {
    Ok(select_row_for_update(c, key)?.map(|(_, row)| row))
}

/// The row of `key` with its rowid, so that a write that follows need not look the key up
/// again.
fn select_row_for_update(c: &Connection, key: &Key) -> rusqlite::Result<Option<(i64, Row)>> {
    c.prepare_cached(
        "SELECT rowid, version, json_content FROM udr_policy_data
         WHERE kind = ?1 AND id = ?2 AND part = ?3",
    )?
    .query_row(params![key.kind.as_str(), key.id, key.part], |r| {
        Ok((r.get(0)?, Row { version: r.get(1)?, json: r.get(2)? }))
    })
    .optional()
}

fn ue_exists(c: &Connection, ue_id: &str) -> rusqlite::Result<bool> {
    c.prepare_cached("SELECT 1 FROM udr_policy_data WHERE kind = 'ue' AND id = ?1 LIMIT 1")?
        .exists([ue_id])
}

fn select_ue(c: &Connection, ue_id: &str) -> rusqlite::Result<Vec<(String, Row)>> {
    let mut st = c.prepare_cached(
        "SELECT part, version, json_content FROM udr_policy_data WHERE kind = 'ue' AND id = ?1
         ORDER BY part",
    )?;
    let rows =
        st.query_map([ue_id], |r| Ok((r.get(0)?, Row { version: r.get(1)?, json: r.get(2)? })))?;
    rows.collect()
}

fn insert_row(tx: &Connection, key: &Key, version: i64, json: &[u8]) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "INSERT INTO udr_policy_data (kind, id, part, version, json_content) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![key.kind.as_str(), key.id, key.part, version, json])?;
    Ok(())
}

/// Updates the row of `key`, found by `rowid` when the caller has just read it (one b-tree
/// descent instead of the key's index and then the table).
fn update_row(
    tx: &Connection,
    key: &Key,
    rowid: Option<i64>,
    version: i64,
    json: &[u8],
) -> rusqlite::Result<()> {
    if let Some(rowid) = rowid {
        tx.prepare_cached(
            "UPDATE udr_policy_data SET version = ?2, json_content = ?3 WHERE rowid = ?1",
        )?
        .execute(params![rowid, version, json])?;
        return Ok(());
    }
    tx.prepare_cached(
        "UPDATE udr_policy_data SET version = ?4, json_content = ?5
         WHERE kind = ?1 AND id = ?2 AND part = ?3",
    )?
    .execute(params![key.kind.as_str(), key.id, key.part, version, json])?;
    Ok(())
}

fn delete_row(tx: &Connection, key: &Key) -> rusqlite::Result<()> {
    tx.prepare_cached("DELETE FROM udr_policy_data WHERE kind = ?1 AND id = ?2 AND part = ?3")?
        .execute(params![key.kind.as_str(), key.id, key.part])?;
    Ok(())
}

/// Sets one resource to `new` (`None`: removes it) given its current row (and its rowid, when
/// known), and records the notifications of its subscribers. Returns the new version (the old one when nothing
/// changed), `None` when removed.
fn set(
    tx: &Transaction<'_>,
    subs: Option<&SubsIndex>,
    key: &Key,
    old: Option<&Row>,
    rowid: Option<i64>,
    new: Option<&[u8]>,
) -> store::Result<(Option<i64>, usize)> {
    let write = row_write(old, new);
    match write {
        RowWrite::Unchanged(v) => return Ok((v, 0)),
        RowWrite::Delete => delete_row(tx, key)?,
        RowWrite::Update(v, n) => update_row(tx, key, rowid, v, n)?,
        RowWrite::Insert(v, n) => insert_row(tx, key, v, n)?,
    }
    let version = write.version();
    let notified = match subs {
        Some(s) => notify::record(
            &mut |id, item| insert_outbox(tx, id, item),
            s,
            key,
            old.map(|o| o.json.as_slice()),
            new,
        )?,
        None => 0,
    };
    Ok((version, notified))
}

/// Reads one resource (one primary-key lookup; a second, on a miss, tells an unknown UE from a
/// known one without this resource).
async fn get(db: &SqliteStore, key: Key) -> store::Result<Found> {
    db.read(move |c| {
        if let Some(row) = select_row(c, &key)? {
            return Ok(Found::Row(row));
        }
        if key.kind == Kind::Ue && !ue_exists(c, &key.id)? {
            return Ok(Found::NoUser);
        }
        Ok(Found::NoData)
    })
    .await
}

/// Every resource of a UE, by part.
async fn get_ue(db: &SqliteStore, ue_id: String) -> store::Result<Vec<(String, Row)>> {
    db.read(move |c| Ok(select_ue(c, &ue_id)?)).await
}

/// The resources of a kind (the BDT data collection), by id; only `ids` when given.
async fn get_kind(
    db: &SqliteStore,
    kind: Kind,
    ids: Option<Vec<String>>,
) -> store::Result<Vec<(String, Row)>> {
    db.read(move |c| {
        let row = |r: &rusqlite::Row<'_>| Ok((r.get(0)?, Row { version: r.get(1)?, json: r.get(2)? }));
        match ids {
            None => {
                let mut st = c.prepare_cached(
                    "SELECT id, version, json_content FROM udr_policy_data WHERE kind = ?1 ORDER BY id",
                )?;
                let rows = st.query_map([kind.as_str()], row)?;
                Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
            }
            Some(ids) => {
                let mut out = Vec::new();
                for id in ids {
                    let key = Key::other(kind, &id);
                    if let Some(r) = select_row(c, &key)? {
                        out.push((id, r));
                    }
                }
                Ok(out)
            }
        }
    })
    .await
}

/// Writes one resource in one job: reads it, checks existence (`must_exist`) and the
/// preconditions, computes the new document with `edit` (given the current one; `None` out
/// removes it), stores it and records the notifications.
async fn write_one(
    db: &SqliteStore,
    subs: Arc<SubsIndex>,
    key: Key,
    cond: Conditions,
    must_exist: bool,
    edit: EditOne,
) -> store::Result<Result<Written, Refusal>> {
    db.write(move |tx| {
        let (rowid, old) = match select_row_for_update(tx, &key)? {
            Some((rowid, row)) => (Some(rowid), Some(row)),
            None => (None, None),
        };
        if old.is_none() && must_exist {
            let user_known = key.kind != Kind::Ue || ue_exists(tx, &key.id)?;
            return Ok(Err(if user_known { Refusal::NoData } else { Refusal::NoUser }));
        }
        if let Err(r) = check_preconditions(&cond, old.as_ref()) {
            return Ok(Err(r));
        }
        let new = match edit(old.as_ref().map(|o| o.json.as_slice())) {
            Ok(n) => n,
            Err(p) => return Ok(Err(Refusal::Edit(p))),
        };
        let (version, notified) = set(tx, Some(&subs), &key, old.as_ref(), rowid, new.as_deref())?;
        Ok(Ok(Written { existed: old.is_some(), version, json: new, notified }))
    })
    .await
}

/// The current parts of a UE and their composite ETag.
fn ue_state(
    tx: &Connection,
    ue_id: &str,
) -> rusqlite::Result<(BTreeMap<String, Row>, Option<String>)> {
    let rows: BTreeMap<String, Row> = select_ue(tx, ue_id)?.into_iter().collect();
    let tag = (!rows.is_empty())
        .then(|| etag::composite_etag(rows.iter().map(|(p, r)| (p.as_str(), r.version))));
    Ok((rows, tag))
}

/// Makes a UE's parts exactly `desired` (parts absent from it are removed), recording the
/// notifications of each changed part. Returns the new state's versions and the count recorded.
fn apply_ue(
    tx: &Transaction<'_>,
    subs: Option<&SubsIndex>,
    ue_id: &str,
    current: &BTreeMap<String, Row>,
    desired: &BTreeMap<String, Vec<u8>>,
) -> store::Result<(Vec<(String, i64)>, usize)> {
    let mut versions = Vec::with_capacity(desired.len());
    let mut notified = 0;
    for (part, row) in current {
        if !desired.contains_key(part) {
            notified += set(tx, subs, &Key::ue(ue_id, part), Some(row), None, None)?.1;
        }
    }
    for (part, json) in desired {
        let (v, n) = set(tx, subs, &Key::ue(ue_id, part), current.get(part), None, Some(json))?;
        notified += n;
        if let Some(v) = v {
            versions.push((part.clone(), v));
        }
    }
    Ok((versions, notified))
}

/// Writes a UE's whole policy data in one job: `edit` turns the current parts into the desired
/// ones (an empty map removes the UE's policy data). The preconditions apply to the composite
/// ETag of the UE's parts.
async fn write_ue(
    db: &SqliteStore,
    subs: Arc<SubsIndex>,
    ue_id: String,
    cond: Conditions,
    must_exist: bool,
    edit: EditUe,
) -> store::Result<Result<UeWritten, Refusal>> {
    db.write(move |tx| {
        let (current, tag) = ue_state(tx, &ue_id)?;
        if current.is_empty() && must_exist {
            return Ok(Err(Refusal::NoUser));
        }
        if !cond.write_allowed(tag.as_deref()) {
            return Ok(Err(Refusal::Precondition(tag)));
        }
        let view: BTreeMap<String, &[u8]> =
            current.iter().map(|(p, r)| (p.clone(), r.json.as_slice())).collect();
        let desired = match edit(&view) {
            Ok(d) => d,
            Err(p) => return Ok(Err(Refusal::Edit(p))),
        };
        let (versions, notified) = apply_ue(tx, Some(&subs), &ue_id, &current, &desired)?;
        let etag = (!versions.is_empty())
            .then(|| etag::composite_etag(versions.iter().map(|(p, v)| (p.as_str(), *v))));
        Ok(Ok(UeWritten { existed: !current.is_empty(), etag, parts: desired, notified }))
    })
    .await
}

/// Bulk load for an import tool, run on the writer thread inside its transaction: each
/// `(ueId, profile)` (the provisioning API's PolicyDataProfile: `amData`, `uePolicySet`,
/// `smData`, `umData`, `operatorSpecificData`) replaces that UE's policy data. Returns how many
/// UEs had no policy data before. Every profile is checked first; a bad one fails the call
/// (`InvalidArgument` naming its index and ueId) and the caller's savepoint undoes the batch.
/// Subscribers are not notified: this is for loading, not for live changes (use the
/// provisioning API for those).
fn put_profiles(tx: &Transaction<'_>, profiles: &[(String, Value)]) -> store::Result<usize> {
    let mut new = 0;
    for (i, (ue_id, profile)) in profiles.iter().enumerate() {
        let desired = provisioning::profile_parts(ue_id, profile)
            .map_err(|p| store::Error::InvalidArgument(format!("profile {i} ({ue_id}): {p}")))?;
        let (current, _) = ue_state(tx, ue_id)?;
        if current.is_empty() {
            new += 1;
        }
        apply_ue(tx, None, ue_id, &current, &desired)?;
    }
    Ok(new)
}

// --- subscriptions -------------------------------------------------------------------------------

// The index changes inside the same store job as the rows, so the index and the table see
// creations, replacements and deletions in one order (a replacement racing a deletion cannot
// leave a subscription in memory that the table no longer has). Should the batch then fail to
// commit, the index change is undone.

/// Stores and indexes a new subscription, unless `max` are held (`false`).
async fn create_subscription(
    db: &SqliteStore,
    subs: Arc<SubsIndex>,
    sub: Subscription,
    max: usize,
) -> store::Result<bool> {
    let id = sub.id.clone();
    let index = subs.clone();
    let r = db
        .write(move |tx| {
            if index.len() >= max {
                return Ok(false);
            }
            tx.prepare_cached(
                "INSERT INTO udr_policy_subscription (subs_id, expiry_ms, json_content)
                 VALUES (?1, ?2, ?3)",
            )?
            .execute(params![sub.id, sub.expiry_ms, sub.json.as_ref()])?;
            index.insert(sub);
            Ok(true)
        })
        .await;
    if r.is_err() {
        subs.restore(&id, None);
    }
    r
}

/// Replaces a stored subscription; `false` when there is none (never was, or deleted meanwhile).
async fn replace_subscription(
    db: &SqliteStore,
    subs: Arc<SubsIndex>,
    sub: Subscription,
) -> store::Result<bool> {
    let id = sub.id.clone();
    let index = subs.clone();
    let (tx_out, rx) = std::sync::mpsc::channel();
    let r = db
        .write(move |tx| {
            let n = tx
                .prepare_cached(
                    "UPDATE udr_policy_subscription SET expiry_ms = ?2, json_content = ?3
                     WHERE subs_id = ?1",
                )?
                .execute(params![sub.id, sub.expiry_ms, sub.json.as_ref()])?;
            if n == 1 {
                let _ = tx_out.send(index.insert(sub));
            }
            Ok(n == 1)
        })
        .await;
    if r.is_err() {
        if let Ok(before) = rx.try_recv() {
            subs.restore(&id, before);
        }
    }
    r
}

/// Removes subscriptions (from `subs` too, when given); returns how many were stored. Their
/// undelivered notifications stay in the outbox until the delivery task reaches them and, finding
/// no subscription, deletes them unsent: a subscription id is never reused (a UUID), so nothing
/// can claim them.
async fn delete_subscriptions(
    db: &SqliteStore,
    subs: Option<Arc<SubsIndex>>,
    ids: Vec<String>,
) -> store::Result<usize> {
    let index = subs.clone();
    let (tx_out, rx) = std::sync::mpsc::channel();
    let r = db
        .write(move |tx| {
            let mut sub =
                tx.prepare_cached("DELETE FROM udr_policy_subscription WHERE subs_id = ?1")?;
            let mut n = 0;
            for id in &ids {
                n += sub.execute([id])?;
                if let Some(index) = &index {
                    if let Some(old) = index.remove(id) {
                        let _ = tx_out.send(old);
                    }
                }
            }
            Ok(n)
        })
        .await;
    if let (Err(_), Some(subs)) = (&r, &subs) {
        for old in rx.try_iter() {
            let id = old.id.clone();
            subs.restore(&id, Some(old));
        }
    }
    r
}

/// Every stored subscription: (id, expiry, PolicyDataSubscription).
async fn load_subscriptions(
    db: &SqliteStore,
) -> store::Result<Vec<(String, Option<i64>, Vec<u8>)>> {
    db.read(|c| {
        let mut st = c.prepare_cached(
            "SELECT subs_id, expiry_ms, json_content FROM udr_policy_subscription",
        )?;
        let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    })
    .await
}

// --- outbox --------------------------------------------------------------------------------------

/// Appends a notification; returns its seq. Runs inside the change's transaction.
fn insert_outbox(tx: &Connection, subs_id: &str, item: &[u8]) -> store::Result<()> {
    tx.prepare_cached(
        "INSERT INTO udr_policy_outbox (subs_id, created_ms, item) VALUES (?1, ?2, ?3)",
    )?
    .execute(params![subs_id, chrono::Utc::now().timestamp_millis(), item])?;
    Ok(())
}

/// The undelivered notifications after `after_seq`, oldest first, at most `limit`.
async fn read_outbox(
    db: &SqliteStore,
    after_seq: i64,
    limit: usize,
) -> store::Result<Vec<OutboxRow>> {
    db.read(move |c| {
        let mut st = c.prepare_cached(
            "SELECT seq, subs_id, item FROM udr_policy_outbox WHERE seq > ?1 ORDER BY seq LIMIT ?2",
        )?;
        let rows = st.query_map(params![after_seq, limit as i64], |r| {
            Ok(OutboxRow { seq: r.get(0)?, subs_id: r.get(1)?, item: r.get(2)? })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    })
    .await
}

/// Removes delivered (or given up) notifications.
async fn delete_outbox(db: &SqliteStore, seqs: Vec<i64>) -> store::Result<()> {
    db.write(move |tx| {
        let mut st = tx.prepare_cached("DELETE FROM udr_policy_outbox WHERE seq = ?1")?;
        for s in &seqs {
            st.execute([s])?;
        }
        Ok(())
    })
    .await
}

/// Undelivered notifications held (for tests and the operator).
async fn outbox_len(db: &SqliteStore) -> store::Result<u64> {
    db.read(|c| Ok(c.query_row("SELECT COUNT(*) FROM udr_policy_outbox", [], |r| r.get(0))?)).await
}
