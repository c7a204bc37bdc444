//! The policy data store over the MySQL-protocol backend: the tables of [`super::sqlite`] with
//! `VARBINARY` keys, a primary key each and no foreign keys (NDB-friendly), and every
//! [`PolicyDataStore`] call as one transaction of [`MysqlStore`] (tried again as a whole after a
//! deadlock or a Galera certification failure; a write's edit runs once, see `replay.rs`).
//!
//! Several UDR instances on one database:
//! - A write reads its resource `FOR UPDATE`, so conditional writes (ETags) of two instances take
//!   turns and the second sees the first's version.
//! - Its notifications are recorded, in its transaction, for the subscriptions the writing
//!   instance knows (its own and, through the change feed, the others'), and owned by that
//!   instance (`udr_policy_outbox.owner`, its nfInstanceId): only the owner delivers them, so
//!   each is sent once, by the instance that took the change; a restarted instance with the same
//!   nfInstanceId resumes its undelivered ones.
//! - An instance that stops for good (killed, scaled in) would leave its undelivered rows
//!   behind: every instance stamps `udr_policy_owner` every [`KEEP_ALIVE`], and one that finds
//!   an owner not seen for [`OWNER_TIMEOUT`] takes its rows over (one `UPDATE` of their owner:
//!   when two instances adopt at once, the first takes them and the second finds none) and
//!   delivers them. Delivery stays at least once: an instance cut off from the database for
//!   longer than the timeout may have rows in flight that another then sends again.
//! - Subscription writes record the subscription's id in the change feed; the other instances
//!   re-read it (`crate::coherence`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde_json::Value;
use store::mysql::feed::{self, Op};
use store::mysql::mysql_async::prelude::Queryable;
use store::mysql::mysql_async::{Conn, Params, Value as SqlValue};
use store::mysql::TxError;
use store::{MysqlMigration, MysqlStore};

use super::etag::{self, Conditions};
use super::ids::{Key, Kind};
use super::notify;
use super::provisioning;
use super::store::{
    check_preconditions, row_write, EditOne, EditUe, Found, OutboxRow, PolicyDataStore, Refusal,
    Row, RowWrite, StoredSubscription, UeWritten, Written,
};
use super::subs_to_notify::{SubsIndex, Subscription};
use crate::coherence::POLICY_SUBSCRIPTION;
use crate::replay::Replay;
use crate::StoreFuture;

pub const MIGRATIONS: &[MysqlMigration] = &[MysqlMigration::new(
    "udr-policy-0001-data-subscriptions-outbox",
    &[
        "CREATE TABLE IF NOT EXISTS udr_policy_data (
            kind VARBINARY(16) NOT NULL,
            id VARBINARY(255) NOT NULL,
            part VARBINARY(255) NOT NULL,
            version BIGINT NOT NULL,
            json_content LONGBLOB NOT NULL,
            PRIMARY KEY (kind, id, part)
        ) ENGINE=InnoDB",
        "CREATE TABLE IF NOT EXISTS udr_policy_subscription (
            subs_id VARBINARY(255) NOT NULL PRIMARY KEY,
            expiry_ms BIGINT NULL,
            json_content LONGBLOB NOT NULL
        ) ENGINE=InnoDB",
        // owner: the nfInstanceId of the instance that recorded the row and delivers it.
        "CREATE TABLE IF NOT EXISTS udr_policy_outbox (
            seq BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
            owner VARBINARY(64) NOT NULL,
            subs_id VARBINARY(255) NOT NULL,
            created_ms BIGINT NOT NULL,
            item LONGBLOB NOT NULL,
            KEY udr_policy_outbox_owner (owner, seq)
        ) ENGINE=InnoDB",
        // When each owner of notifications was last seen (server time), for adoption.
        "CREATE TABLE IF NOT EXISTS udr_policy_owner (
            owner VARBINARY(64) NOT NULL PRIMARY KEY,
            seen_ms BIGINT NOT NULL
        ) ENGINE=InnoDB",
    ],
)];

/// How often an instance stamps itself as the live owner of its notifications.
pub const KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(1);
/// An owner not seen for this long is taken over.
pub const OWNER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The policy data tables over a MySQL-protocol database.
pub struct MysqlPolicyData {
    db: MysqlStore,
    /// This instance's id in the change feed.
    writer: Arc<str>,
    /// The owner of the notifications this instance records (its nfInstanceId).
    owner: Arc<str>,
    /// Outbox rows handed to the delivery and not yet deleted. The delivery reads by `seq`
    /// order, but `AUTO_INCREMENT` allocates at insert, not at commit: a row may become visible
    /// after one with a larger `seq`. So reads start from this owner's first row every time and
    /// skip what was handed already (the owner's rows are only those not yet delivered).
    handed: Mutex<BTreeSet<i64>>,
}

impl MysqlPolicyData {
    /// Over `db`, which must have [`MIGRATIONS`] applied.
    pub fn new(db: MysqlStore, writer: Arc<str>, owner: Arc<str>) -> Self {
        MysqlPolicyData { db, writer, owner, handed: Mutex::default() }
    }

    /// Stamps this instance as a live owner and takes over the notifications of owners not seen
    /// for [`OWNER_TIMEOUT`]; returns how many rows it took (see the module docs).
    pub async fn keep_alive(&self) -> store::Result<u64> {
        let owner = self.owner.clone();
        let timeout = OWNER_TIMEOUT.as_millis() as i64;
        self.db
            .write(move |c| {
                let owner = owner.clone();
                Box::pin(async move {
                    const NOW: &str = "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)";
                    c.exec_drop(
                        format!(
                            "INSERT INTO udr_policy_owner (owner, seen_ms) VALUES (?, {NOW})
                             ON DUPLICATE KEY UPDATE seen_ms = VALUES(seen_ms)"
                        ),
                        (owner.as_ref(),),
                    )
                    .await?;
                    let gone: Vec<String> = c
                        .exec(
                            format!(
                                "SELECT owner FROM udr_policy_owner
                                 WHERE seen_ms < {NOW} - ? AND owner <> ? FOR UPDATE"
                            ),
                            (timeout, owner.as_ref()),
                        )
                        .await?;
                    let mut taken = 0;
                    for g in &gone {
                        c.exec_drop(
                            "UPDATE udr_policy_outbox SET owner = ? WHERE owner = ?",
                            (owner.as_ref(), g.as_str()),
                        )
                        .await?;
                        taken += c.affected_rows();
                        c.exec_drop("DELETE FROM udr_policy_owner WHERE owner = ?", (g.as_str(),))
                            .await?;
                        tracing::info!(owner = %g, "took over the policy data notifications of a UDR instance not seen for {} s", OWNER_TIMEOUT.as_secs());
                    }
                    Ok(taken)
                })
            })
            .await
    }
}

type Tx<T> = Result<T, TxError>;

async fn select_row(c: &mut Conn, key: &Key, lock: bool) -> Tx<Option<Row>> {
    let sql = if lock {
        "SELECT version, json_content FROM udr_policy_data
         WHERE kind = ? AND id = ? AND part = ? FOR UPDATE"
    } else {
        "SELECT version, json_content FROM udr_policy_data WHERE kind = ? AND id = ? AND part = ?"
    };
    let row: Option<(i64, Vec<u8>)> =
        c.exec_first(sql, (key.kind.as_str(), key.id.as_str(), key.part.as_str())).await?;
    Ok(row.map(|(version, json)| Row { version, json }))
}

async fn ue_exists(c: &mut Conn, ue_id: &str) -> Tx<bool> {
    let one: Option<i64> = c
        .exec_first("SELECT 1 FROM udr_policy_data WHERE kind = 'ue' AND id = ? LIMIT 1", (ue_id,))
        .await?;
    Ok(one.is_some())
}

async fn select_ue(c: &mut Conn, ue_id: &str, lock: bool) -> Tx<Vec<(String, Row)>> {
    let sql = if lock {
        "SELECT part, version, json_content FROM udr_policy_data WHERE kind = 'ue' AND id = ?
         ORDER BY part FOR UPDATE"
    } else {
        "SELECT part, version, json_content FROM udr_policy_data WHERE kind = 'ue' AND id = ?
         ORDER BY part"
    };
    let rows: Vec<(String, i64, Vec<u8>)> = c.exec(sql, (ue_id,)).await?;
    Ok(rows.into_iter().map(|(p, version, json)| (p, Row { version, json })).collect())
}

/// Sets one resource to `new` given its current row; the notifications of its subscribers are
/// pushed to `outbox`. Returns the new version (the old one when nothing changed), `None` when
/// removed, and how many notifications.
async fn set(
    c: &mut Conn,
    subs: Option<&SubsIndex>,
    key: &Key,
    old: Option<&Row>,
    new: Option<&[u8]>,
    outbox: &mut Vec<(String, Vec<u8>)>,
) -> Tx<(Option<i64>, usize)> {
    let k = (key.kind.as_str(), key.id.as_str(), key.part.as_str());
    let write = row_write(old, new);
    match write {
        RowWrite::Unchanged(v) => return Ok((v, 0)),
        RowWrite::Delete => {
            c.exec_drop("DELETE FROM udr_policy_data WHERE kind = ? AND id = ? AND part = ?", k)
                .await?
        }
        RowWrite::Update(v, n) => {
            c.exec_drop(
                "UPDATE udr_policy_data SET version = ?, json_content = ?
                 WHERE kind = ? AND id = ? AND part = ?",
                (v, n, k.0, k.1, k.2),
            )
            .await?
        }
        RowWrite::Insert(v, n) => {
            c.exec_drop(
                "INSERT INTO udr_policy_data (kind, id, part, version, json_content)
                 VALUES (?, ?, ?, ?, ?)",
                (k.0, k.1, k.2, v, n),
            )
            .await?
        }
    }
    let version = write.version();
    let notified = match subs {
        Some(s) => notify::record(
            &mut |id, item| {
                outbox.push((id.to_owned(), item.to_vec()));
                Ok(())
            },
            s,
            key,
            old.map(|o| o.json.as_slice()),
            new,
        )?,
        None => 0,
    };
    Ok((version, notified))
}

/// Appends the notifications, owned by `owner`, in a statement per 500.
async fn insert_outbox(c: &mut Conn, owner: &str, rows: &[(String, Vec<u8>)]) -> Tx<()> {
    let now = chrono::Utc::now().timestamp_millis();
    for chunk in rows.chunks(500) {
        let mut sql = String::from(
            "INSERT INTO udr_policy_outbox (owner, subs_id, created_ms, item) VALUES ",
        );
        let mut p = Vec::with_capacity(chunk.len() * 4);
        for (i, (subs_id, item)) in chunk.iter().enumerate() {
            sql.push_str(if i == 0 { "(?, ?, ?, ?)" } else { ", (?, ?, ?, ?)" });
            p.extend([
                SqlValue::from(owner),
                SqlValue::from(subs_id.as_str()),
                SqlValue::from(now),
                SqlValue::from(item.as_slice()),
            ]);
        }
        c.exec_drop(sql, Params::Positional(p)).await?;
    }
    Ok(())
}

/// The current parts of a UE (locked) and their composite ETag.
async fn ue_state(
    c: &mut Conn,
    ue_id: &str,
    lock: bool,
) -> Tx<(BTreeMap<String, Row>, Option<String>)> {
    let rows: BTreeMap<String, Row> = select_ue(c, ue_id, lock).await?.into_iter().collect();
    let tag = (!rows.is_empty())
        .then(|| etag::composite_etag(rows.iter().map(|(p, r)| (p.as_str(), r.version))));
    Ok((rows, tag))
}

/// Makes a UE's parts exactly `desired`; see the SQLite store's `apply_ue`.
async fn apply_ue(
    c: &mut Conn,
    subs: Option<&SubsIndex>,
    ue_id: &str,
    current: &BTreeMap<String, Row>,
    desired: &BTreeMap<String, Vec<u8>>,
    outbox: &mut Vec<(String, Vec<u8>)>,
) -> Tx<(Vec<(String, i64)>, usize)> {
    let mut versions = Vec::with_capacity(desired.len());
    let mut notified = 0;
    for (part, row) in current {
        if !desired.contains_key(part) {
            notified += set(c, subs, &Key::ue(ue_id, part), Some(row), None, outbox).await?.1;
        }
    }
    for (part, json) in desired {
        let key = Key::ue(ue_id, part);
        let (v, n) = set(c, subs, &key, current.get(part), Some(json), outbox).await?;
        notified += n;
        if let Some(v) = v {
            versions.push((part.clone(), v));
        }
    }
    Ok((versions, notified))
}

impl PolicyDataStore for MysqlPolicyData {
    fn get(&self, key: Key) -> StoreFuture<'_, Found> {
        let key = Arc::new(key);
        Box::pin(self.db.read(move |c| {
            let key = key.clone();
            Box::pin(async move {
                if let Some(row) = select_row(c, &key, false).await? {
                    return Ok(Found::Row(row));
                }
                if key.kind == Kind::Ue && !ue_exists(c, &key.id).await? {
                    return Ok(Found::NoUser);
                }
                Ok(Found::NoData)
            })
        }))
    }

    fn get_ue(&self, ue_id: String) -> StoreFuture<'_, Vec<(String, Row)>> {
        let ue_id = Arc::new(ue_id);
        Box::pin(self.db.read(move |c| {
            let ue_id = ue_id.clone();
            Box::pin(async move { select_ue(c, &ue_id, false).await })
        }))
    }

    fn get_kind(
        &self,
        kind: Kind,
        ids: Option<Vec<String>>,
    ) -> StoreFuture<'_, Vec<(String, Row)>> {
        let ids = Arc::new(ids);
        Box::pin(self.db.read(move |c| {
            let ids = ids.clone();
            Box::pin(async move {
                match &*ids {
                    None => {
                        let rows: Vec<(String, i64, Vec<u8>)> = c
                            .exec(
                                "SELECT id, version, json_content FROM udr_policy_data
                                 WHERE kind = ? ORDER BY id",
                                (kind.as_str(),),
                            )
                            .await?;
                        Ok(rows
                            .into_iter()
                            .map(|(id, version, json)| (id, Row { version, json }))
                            .collect())
                    }
                    Some(ids) => {
                        let mut out = Vec::new();
                        for id in ids {
                            if let Some(r) = select_row(c, &Key::other(kind, id), false).await? {
                                out.push((id.clone(), r));
                            }
                        }
                        Ok(out)
                    }
                }
            })
        }))
    }

    fn write_one(
        &self,
        subs: Arc<SubsIndex>,
        key: Key,
        cond: Conditions,
        must_exist: bool,
        edit: EditOne,
    ) -> StoreFuture<'_, Result<Written, Refusal>> {
        let state =
            Arc::new((key, cond, Replay::<EditOne, Option<Vec<u8>>, Option<Bytes>>::new(edit)));
        let owner = self.owner.clone();
        Box::pin(self.db.write(move |c| {
            let (state, subs, owner) = (state.clone(), subs.clone(), owner.clone());
            Box::pin(async move {
                let (key, cond, edit) = &*state;
                let old = select_row(c, key, true).await?;
                if old.is_none() && must_exist {
                    let user_known = key.kind != Kind::Ue || ue_exists(c, &key.id).await?;
                    return Ok(Err(if user_known { Refusal::NoData } else { Refusal::NoUser }));
                }
                if let Err(r) = check_preconditions(cond, old.as_ref()) {
                    return Ok(Err(r));
                }
                let seen = old.as_ref().map(|o| o.json.clone());
                let new = match edit.apply(seen, |f| f(old.as_ref().map(|o| o.json.as_slice())))? {
                    Ok(n) => n,
                    Err(p) => return Ok(Err(Refusal::Edit(p))),
                };
                let mut outbox = Vec::new();
                let (version, notified) =
                    set(c, Some(&subs), key, old.as_ref(), new.as_deref(), &mut outbox).await?;
                insert_outbox(c, &owner, &outbox).await?;
                Ok(Ok(Written { existed: old.is_some(), version, json: new, notified }))
            })
        }))
    }

    fn write_ue(
        &self,
        subs: Arc<SubsIndex>,
        ue_id: String,
        cond: Conditions,
        must_exist: bool,
        edit: EditUe,
    ) -> StoreFuture<'_, Result<UeWritten, Refusal>> {
        type Seen = Vec<(String, Vec<u8>)>;
        let state =
            Arc::new((ue_id, cond, Replay::<EditUe, Seen, BTreeMap<String, Vec<u8>>>::new(edit)));
        let owner = self.owner.clone();
        Box::pin(self.db.write(move |c| {
            let (state, subs, owner) = (state.clone(), subs.clone(), owner.clone());
            Box::pin(async move {
                let (ue_id, cond, edit) = &*state;
                let (current, tag) = ue_state(c, ue_id, true).await?;
                if current.is_empty() && must_exist {
                    return Ok(Err(Refusal::NoUser));
                }
                if !cond.write_allowed(tag.as_deref()) {
                    return Ok(Err(Refusal::Precondition(tag)));
                }
                let seen: Seen = current.iter().map(|(p, r)| (p.clone(), r.json.clone())).collect();
                let view: BTreeMap<String, &[u8]> =
                    current.iter().map(|(p, r)| (p.clone(), r.json.as_slice())).collect();
                let desired = match edit.apply(seen, |f| f(&view))? {
                    Ok(d) => d,
                    Err(p) => return Ok(Err(Refusal::Edit(p))),
                };
                let mut outbox = Vec::new();
                let (versions, notified) =
                    apply_ue(c, Some(&subs), ue_id, &current, &desired, &mut outbox).await?;
                insert_outbox(c, &owner, &outbox).await?;
                let etag = (!versions.is_empty())
                    .then(|| etag::composite_etag(versions.iter().map(|(p, v)| (p.as_str(), *v))));
                Ok(Ok(UeWritten { existed: !current.is_empty(), etag, parts: desired, notified }))
            })
        }))
    }

    fn put_profiles(
        &self,
        profiles: Vec<(String, Value)>,
    ) -> StoreFuture<'_, (usize, Vec<(String, Value)>)> {
        let profiles = Arc::new(profiles);
        Box::pin(async move {
            let new = self
                .db
                .write({
                    let profiles = profiles.clone();
                    move |c| {
                        let profiles = profiles.clone();
                        Box::pin(async move {
                            let mut new = 0;
                            let mut none = Vec::new();
                            for (i, (ue_id, profile)) in profiles.iter().enumerate() {
                                let desired =
                                    provisioning::profile_parts(ue_id, profile).map_err(|p| {
                                        store::Error::InvalidArgument(format!(
                                            "profile {i} ({ue_id}): {p}"
                                        ))
                                    })?;
                                let (current, _) = ue_state(c, ue_id, true).await?;
                                if current.is_empty() {
                                    new += 1;
                                }
                                apply_ue(c, None, ue_id, &current, &desired, &mut none).await?;
                            }
                            Ok(new)
                        })
                    }
                })
                .await?;
            let profiles = Arc::try_unwrap(profiles).unwrap_or_else(|a| (*a).clone());
            Ok((new, profiles))
        })
    }

    fn create_subscription(
        &self,
        subs: Arc<SubsIndex>,
        sub: Subscription,
        max: usize,
    ) -> StoreFuture<'_, bool> {
        let id = sub.id.clone();
        let sub = Arc::new(sub);
        let writer = self.writer.clone();
        let index = subs.clone();
        Box::pin(async move {
            let r = self
                .db
                .write(move |c| {
                    let (sub, index, writer) = (sub.clone(), index.clone(), writer.clone());
                    Box::pin(async move {
                        if index.len() >= max {
                            return Ok(false);
                        }
                        c.exec_drop(
                            "INSERT INTO udr_policy_subscription (subs_id, expiry_ms, json_content)
                             VALUES (?, ?, ?)",
                            (sub.id.as_str(), sub.expiry_ms, sub.json.as_ref()),
                        )
                        .await?;
                        feed::record(c, &writer, POLICY_SUBSCRIPTION, &sub.id, Op::Put, None)
                            .await?;
                        index.insert((*sub).clone());
                        Ok(true)
                    })
                })
                .await;
            if r.is_err() {
                subs.restore(&id, None);
            }
            r
        })
    }

    fn replace_subscription(
        &self,
        subs: Arc<SubsIndex>,
        sub: Subscription,
    ) -> StoreFuture<'_, bool> {
        let id = sub.id.clone();
        let sub = Arc::new(sub);
        let writer = self.writer.clone();
        let index = subs.clone();
        let before = Arc::new(Mutex::new(None));
        let undo = before.clone();
        Box::pin(async move {
            let r = self
                .db
                .write(move |c| {
                    let (sub, index, writer, before) =
                        (sub.clone(), index.clone(), writer.clone(), before.clone());
                    Box::pin(async move {
                        let found: Option<i64> = c
                            .exec_first(
                                "SELECT 1 FROM udr_policy_subscription WHERE subs_id = ? \
                                 FOR UPDATE",
                                (sub.id.as_str(),),
                            )
                            .await?;
                        if found.is_none() {
                            return Ok(false);
                        }
                        c.exec_drop(
                            "UPDATE udr_policy_subscription SET expiry_ms = ?, json_content = ?
                             WHERE subs_id = ?",
                            (sub.expiry_ms, sub.json.as_ref(), sub.id.as_str()),
                        )
                        .await?;
                        feed::record(c, &writer, POLICY_SUBSCRIPTION, &sub.id, Op::Put, None)
                            .await?;
                        let old = index.insert((*sub).clone());
                        let mut b = before.lock().unwrap_or_else(|p| p.into_inner());
                        if b.is_none() {
                            *b = Some(old);
                        }
                        Ok(true)
                    })
                })
                .await;
            if r.is_err() {
                if let Some(old) = undo.lock().unwrap_or_else(|p| p.into_inner()).take() {
                    subs.restore(&id, old);
                }
            }
            r
        })
    }

    fn delete_subscriptions(
        &self,
        subs: Option<Arc<SubsIndex>>,
        ids: Vec<String>,
    ) -> StoreFuture<'_, usize> {
        let ids = Arc::new(ids);
        let writer = self.writer.clone();
        let index = subs.clone();
        let removed: Arc<Mutex<Vec<Arc<Subscription>>>> = Arc::default();
        let undo = removed.clone();
        Box::pin(async move {
            let r = self
                .db
                .write(move |c| {
                    let (ids, index, writer, removed) =
                        (ids.clone(), index.clone(), writer.clone(), removed.clone());
                    Box::pin(async move {
                        let mut n = 0;
                        let mut gone: Vec<&str> = Vec::new();
                        for id in ids.iter() {
                            c.exec_drop(
                                "DELETE FROM udr_policy_subscription WHERE subs_id = ?",
                                (id.as_str(),),
                            )
                            .await?;
                            if c.affected_rows() > 0 {
                                n += 1;
                                gone.push(id);
                            }
                            if let Some(index) = &index {
                                if let Some(old) = index.remove(id) {
                                    removed.lock().unwrap_or_else(|p| p.into_inner()).push(old);
                                }
                            }
                        }
                        let rows: Vec<(&str, &str, Op, Option<&[u8]>)> = gone
                            .iter()
                            .map(|id| (POLICY_SUBSCRIPTION, *id, Op::Delete, None))
                            .collect();
                        feed::record_many(c, &writer, &rows).await?;
                        Ok(n)
                    })
                })
                .await;
            if let (Err(_), Some(subs)) = (&r, &subs) {
                for old in undo.lock().unwrap_or_else(|p| p.into_inner()).drain(..) {
                    let id = old.id.clone();
                    subs.restore(&id, Some(old));
                }
            }
            r
        })
    }

    fn load_subscriptions(&self) -> StoreFuture<'_, Vec<StoredSubscription>> {
        Box::pin(self.db.scan(|c| {
            Box::pin(async move {
                Ok(c.query("SELECT subs_id, expiry_ms, json_content FROM udr_policy_subscription")
                    .await?)
            })
        }))
    }

    fn put_subscriptions(&self, subs: Vec<Subscription>) -> StoreFuture<'_, usize> {
        let subs = Arc::new(subs);
        let writer = self.writer.clone();
        Box::pin(self.db.write(move |c| {
            let (subs, writer) = (subs.clone(), writer.clone());
            Box::pin(async move {
                for sub in subs.iter() {
                    c.exec_drop(
                        "INSERT INTO udr_policy_subscription (subs_id, expiry_ms, json_content)
                         VALUES (?, ?, ?)
                         ON DUPLICATE KEY UPDATE expiry_ms = VALUES(expiry_ms),
                            json_content = VALUES(json_content)",
                        (sub.id.as_str(), sub.expiry_ms, sub.json.as_ref()),
                    )
                    .await?;
                }
                // Running instances index them too (on SQLite only a UDR started afterwards does).
                let rows: Vec<(&str, &str, Op, Option<&[u8]>)> = subs
                    .iter()
                    .map(|s| (POLICY_SUBSCRIPTION, s.id.as_str(), Op::Put, None))
                    .collect();
                feed::record_many(c, &writer, &rows).await?;
                Ok(subs.len())
            })
        }))
    }

    fn read_outbox(&self, _after_seq: i64, limit: usize) -> StoreFuture<'_, Vec<OutboxRow>> {
        let owner = self.owner.clone();
        Box::pin(async move {
            let skip = self.handed.lock().unwrap_or_else(|p| p.into_inner()).len();
            let want = (limit + skip) as u64;
            let rows: Vec<(i64, String, Vec<u8>)> = self
                .db
                .read(move |c| {
                    let owner = owner.clone();
                    Box::pin(async move {
                        Ok(c.exec(
                            "SELECT seq, subs_id, item FROM udr_policy_outbox WHERE owner = ?
                             ORDER BY seq LIMIT ?",
                            (owner.as_ref(), want),
                        )
                        .await?)
                    })
                })
                .await?;
            let mut handed = self.handed.lock().unwrap_or_else(|p| p.into_inner());
            let mut out = Vec::with_capacity(limit.min(rows.len()));
            for (seq, subs_id, item) in rows {
                if out.len() == limit {
                    break;
                }
                if handed.insert(seq) {
                    out.push(OutboxRow { seq, subs_id, item });
                }
            }
            Ok(out)
        })
    }

    fn delete_outbox(&self, seqs: Vec<i64>) -> StoreFuture<'_, ()> {
        let seqs = Arc::new(seqs);
        Box::pin(async move {
            let s = seqs.clone();
            self.db
                .write(move |c| {
                    let s = s.clone();
                    Box::pin(async move {
                        for chunk in s.chunks(500) {
                            let marks = vec!["?"; chunk.len()].join(",");
                            let p = chunk.iter().map(|q| SqlValue::from(*q)).collect();
                            c.exec_drop(
                                format!("DELETE FROM udr_policy_outbox WHERE seq IN ({marks})"),
                                Params::Positional(p),
                            )
                            .await?;
                        }
                        Ok(())
                    })
                })
                .await?;
            let mut handed = self.handed.lock().unwrap_or_else(|p| p.into_inner());
            for s in seqs.iter() {
                handed.remove(s);
            }
            Ok(())
        })
    }

    fn outbox_len(&self) -> StoreFuture<'_, u64> {
        Box::pin(self.db.read(|c| {
            Box::pin(async move {
                let n: Option<u64> =
                    c.query_first("SELECT COUNT(*) FROM udr_policy_outbox").await?;
                Ok(n.unwrap_or(0))
            })
        }))
    }
}
