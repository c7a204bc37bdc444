//! The SLF store over the MySQL-protocol backend: the tables of [`super::sqlite`] (identities,
//! entries, group sets) with `VARBINARY` keys, a primary key each and no foreign keys (NDB-
//! friendly: a group set is found by a hash column, not a unique index over its text; two
//! instances adding one set at once make two equal sets, which is harmless, as a set never
//! changes). Every call is one transaction of [`MysqlStore`], tried again as a whole after a
//! deadlock or a Galera certification failure; the identities a write reads are read
//! `FOR UPDATE`, so concurrent writes of one entry take turns.
//!
//! The identity index's changes feed (`sync.rs`) on this backend:
//! - **This instance's writes.** A write returns the identities it changed; once it has
//!   committed they are queued for the next drain and *then* counted into `noted` (so a drain
//!   that has read the count finds their identities queued, and re-reads rows already
//!   committed). A lookup that sees more notes than the index has taken in reads the store, as
//!   on SQLite: the writing instance reads its own write at once.
//! - **Other instances' writes.** Each write also records its identities in the store's change
//!   feed (`store_changes`, as the transaction's last statement), or, for a bulk write of more
//!   than [`BULK_IDENTITIES`], one row asking for a reload. `crate::coherence` reads the feed and
//!   queues the identities here ([`MysqlSlf::changed_elsewhere`]) or counts a reload
//!   ([`MysqlSlf::reload_elsewhere`], the version [`Changes::version`] reports), and nudges the
//!   syncer: the other instances follow within the feed's poll plus a drain.
//! - A drain re-reads the queued identities' rows (the database's state now, so a change read
//!   twice or late cannot roll the index back).

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use store::mysql::feed::{self, Op};
use store::mysql::mysql_async::prelude::Queryable;
use store::mysql::mysql_async::{self, Conn, Params, Value};
use store::mysql::TxError;
use store::{MysqlMigration, MysqlStore};

use super::index::Index;
use super::{Changes, Entry, EntryChange, Expect, Groups, PutStats, SlfStore, Updated};
use crate::coherence::{SLF_IDENTITY, SLF_RELOAD};
use crate::replay::Replay;
use crate::StoreFuture;

pub const MIGRATIONS: &[MysqlMigration] = &[MysqlMigration::new(
    "udr-0001-slf",
    &[
        "CREATE TABLE IF NOT EXISTS udr_slf_group_set (
            set_id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
            groups_hash BIGINT NOT NULL,
            groups MEDIUMBLOB NOT NULL,
            KEY udr_slf_group_set_hash (groups_hash)
        ) ENGINE=InnoDB",
        "CREATE TABLE IF NOT EXISTS udr_slf_subscriber (
            subscriber_id VARBINARY(255) NOT NULL PRIMARY KEY,
            set_id BIGINT NOT NULL,
            entry_id BIGINT NULL
        ) ENGINE=InnoDB",
        "CREATE TABLE IF NOT EXISTS udr_slf_entry (
            entry_id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
            subscriber_ids MEDIUMBLOB NOT NULL
        ) ENGINE=InnoDB",
    ],
)];

/// A write changing more identities than this records one reload in the feed instead of a row
/// per identity (a bulk import): the other instances reload their index from the database.
pub const BULK_IDENTITIES: usize = 1000;

const MEMBER_SEP: &str = "\n";

type Tx<T> = Result<T, TxError>;

/// The SLF tables over a MySQL-protocol database.
pub struct MysqlSlf {
    db: MysqlStore,
    writer: Arc<str>,
    sets: Arc<RwLock<HashMap<i64, Arc<Groups>>>>,
    /// Set by `capture`: committed writes count their identities into it.
    noted: OnceLock<Arc<AtomicU64>>,
    /// Identities to re-read at the next drain.
    pending: Mutex<BTreeSet<String>>,
    /// Reloads asked for (by another instance's bulk write, or a write whose commit went
    /// unanswered): the version a drain reports.
    reloads: AtomicI64,
}

impl MysqlSlf {
    /// Over `db`, which must have [`MIGRATIONS`] applied; `writer` is this instance's id in the
    /// change feed.
    pub fn new(db: MysqlStore, writer: Arc<str>) -> Self {
        MysqlSlf {
            db,
            writer,
            sets: Arc::default(),
            noted: OnceLock::new(),
            pending: Mutex::default(),
            reloads: AtomicI64::new(0),
        }
    }

    /// Identities another instance changed: re-read at the next drain.
    pub fn changed_elsewhere(&self, ids: impl IntoIterator<Item = String>) {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).extend(ids);
    }

    /// Another instance changed too many identities to list: the next drain reloads the index.
    pub fn reload_elsewhere(&self) {
        self.reloads.fetch_add(1, Ordering::AcqRel);
    }

    /// Runs a write whose body returns its outcome and the identities it changed; queues and
    /// counts them once committed (see the module docs).
    async fn write<T, F>(&self, mut body: F) -> store::Result<T>
    where
        T: Send,
        F: for<'c> FnMut(&'c mut Conn) -> store::mysql::ConnFuture<'c, (T, Vec<String>)> + Send,
    {
        let r = self.db.write(move |c| body(c)).await;
        match r {
            Ok((t, changed)) => {
                self.noted_write(changed);
                Ok(t)
            }
            Err(e) => {
                if matches!(e, store::Error::CommitUnknown) {
                    // The write may be in: the next drain reloads the index from the database.
                    self.reload_elsewhere();
                }
                Err(e)
            }
        }
    }

    fn noted_write(&self, changed: Vec<String>) {
        let Some(noted) = self.noted.get() else { return };
        if changed.is_empty() {
            return;
        }
        let n = changed.len() as u64;
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).extend(changed);
        noted.fetch_add(n, Ordering::AcqRel);
    }
}

/// Records `changed` in the feed, as the transaction's last statement; see [`BULK_IDENTITIES`].
async fn record(c: &mut Conn, writer: &str, changed: &[String]) -> Tx<()> {
    if changed.is_empty() {
        return Ok(());
    }
    if changed.len() > BULK_IDENTITIES {
        return feed::record(c, writer, SLF_RELOAD, "*", Op::Put, None).await;
    }
    let rows: Vec<(&str, &str, Op, Option<&[u8]>)> =
        changed.iter().map(|id| (SLF_IDENTITY, id.as_str(), Op::Put, None)).collect();
    feed::record_many(c, writer, &rows).await
}

/// FNV-1a of a group set's text: stable across builds and processes (it is stored).
fn groups_hash(text: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h as i64
}

fn parse_groups(bytes: &[u8]) -> store::Result<Groups> {
    serde_json::from_slice(bytes).map_err(store::Error::backend)
}

struct Member {
    set_id: i64,
    entry_id: Option<i64>,
}

async fn member(c: &mut Conn, id: &str, lock: bool) -> Tx<Option<Member>> {
    let sql = if lock {
        "SELECT set_id, entry_id FROM udr_slf_subscriber WHERE subscriber_id = ? FOR UPDATE"
    } else {
        "SELECT set_id, entry_id FROM udr_slf_subscriber WHERE subscriber_id = ?"
    };
    let row: Option<(i64, Option<i64>)> = c.exec_first(sql, (id,)).await?;
    Ok(row.map(|(set_id, entry_id)| Member { set_id, entry_id }))
}

async fn members(c: &mut Conn, id: &str, entry_id: Option<i64>) -> Tx<Vec<String>> {
    let Some(key) = entry_id else { return Ok(vec![id.to_owned()]) };
    let list: Option<String> =
        c.exec_first("SELECT subscriber_ids FROM udr_slf_entry WHERE entry_id = ?", (key,)).await?;
    match list {
        Some(l) => Ok(l.split(MEMBER_SEP).map(str::to_owned).collect()),
        None => {
            Err(store::Error::backend_msg(format!("SLF entry {key} of {id:?} is missing")).into())
        }
    }
}

async fn remove_entry(
    c: &mut Conn,
    key: Option<i64>,
    ids: &[String],
    changed: &mut Vec<String>,
) -> Tx<()> {
    for id in ids {
        c.exec_drop("DELETE FROM udr_slf_subscriber WHERE subscriber_id = ?", (id.as_str(),))
            .await?;
        changed.push(id.clone());
    }
    if let Some(key) = key {
        c.exec_drop("DELETE FROM udr_slf_entry WHERE entry_id = ?", (key,)).await?;
    }
    Ok(())
}

async fn entry_row(c: &mut Conn, ids: &[String]) -> Tx<Option<i64>> {
    if ids.len() < 2 {
        return Ok(None);
    }
    c.exec_drop("INSERT INTO udr_slf_entry (subscriber_ids) VALUES (?)", (ids.join(MEMBER_SEP),))
        .await?;
    let id = c.last_insert_id().ok_or_else(|| store::Error::backend_msg("no entry id"))?;
    Ok(Some(id as i64))
}

/// Inserts one identity unless it exists; whether it was inserted.
async fn insert_member(c: &mut Conn, id: &str, set_id: i64, entry_id: Option<i64>) -> Tx<bool> {
    c.exec_drop(
        "INSERT INTO udr_slf_subscriber (subscriber_id, set_id, entry_id) VALUES (?, ?, ?)
         ON DUPLICATE KEY UPDATE subscriber_id = subscriber_id",
        (id, set_id, entry_id),
    )
    .await?;
    Ok(c.affected_rows() == 1)
}

async fn insert_entry(
    c: &mut Conn,
    ids: &[String],
    set_id: i64,
    changed: &mut Vec<String>,
) -> Tx<()> {
    let entry_id = entry_row(c, ids).await?;
    let mut sql =
        String::from("INSERT INTO udr_slf_subscriber (subscriber_id, set_id, entry_id) VALUES ");
    let mut p = Vec::with_capacity(ids.len() * 3);
    for (i, id) in ids.iter().enumerate() {
        sql.push_str(if i == 0 { "(?, ?, ?)" } else { ", (?, ?, ?)" });
        p.extend([Value::from(id.as_str()), Value::from(set_id), Value::from(entry_id)]);
        changed.push(id.clone());
    }
    c.exec_drop(sql, Params::Positional(p)).await?;
    Ok(())
}

async fn group_set_id(c: &mut Conn, groups: &Groups) -> Tx<i64> {
    let text = serde_json::to_string(groups).map_err(store::Error::backend)?;
    let h = groups_hash(&text);
    let found: Option<i64> = c
        .exec_first(
            "SELECT set_id FROM udr_slf_group_set WHERE groups_hash = ? AND groups = ? LIMIT 1",
            (h, text.as_str()),
        )
        .await?;
    if let Some(id) = found {
        return Ok(id);
    }
    c.exec_drop(
        "INSERT INTO udr_slf_group_set (groups_hash, groups) VALUES (?, ?)",
        (h, text.as_str()),
    )
    .await?;
    Ok(c.last_insert_id().ok_or_else(|| store::Error::backend_msg("no group set id"))? as i64)
}

async fn group_set(
    c: &mut Conn,
    sets: &RwLock<HashMap<i64, Arc<Groups>>>,
    set_id: i64,
) -> Tx<Option<Arc<Groups>>> {
    if let Some(g) = sets.read().unwrap_or_else(|p| p.into_inner()).get(&set_id) {
        return Ok(Some(g.clone()));
    }
    let text: Option<Vec<u8>> =
        c.exec_first("SELECT groups FROM udr_slf_group_set WHERE set_id = ?", (set_id,)).await?;
    let Some(text) = text else { return Ok(None) };
    let groups = Arc::new(parse_groups(&text)?);
    sets.write().unwrap_or_else(|p| p.into_inner()).insert(set_id, groups.clone());
    Ok(Some(groups))
}

async fn read_entry(
    c: &mut Conn,
    sets: &RwLock<HashMap<i64, Arc<Groups>>>,
    id: &str,
    lock: bool,
) -> Tx<Option<(Option<i64>, Entry)>> {
    let Some(m) = member(c, id, lock).await? else { return Ok(None) };
    let subscriber_ids = members(c, id, m.entry_id).await?;
    let groups = group_set(c, sets, m.set_id)
        .await?
        .ok_or_else(|| store::Error::backend_msg(format!("group set {} is missing", m.set_id)))?;
    Ok(Some((m.entry_id, Entry { subscriber_ids, groups: (*groups).clone() })))
}

/// [`SlfStore::put`]: each entry replaces every entry it shares an identity with (as on
/// SQLite).
async fn put_entries(c: &mut Conn, entries: &[Entry], changed: &mut Vec<String>) -> Tx<PutStats> {
    let mut set_cache: HashMap<&Groups, i64> = HashMap::new();
    let mut stats = PutStats::default();
    let mut taken: Vec<&String> = Vec::new();
    let mut gone: Vec<String> = Vec::new();
    for e in entries {
        let set_id = match set_cache.get(&e.groups) {
            Some(id) => *id,
            None => {
                let id = group_set_id(c, &e.groups).await?;
                set_cache.insert(&e.groups, id);
                id
            }
        };
        let entry_id = entry_row(c, &e.subscriber_ids).await?;
        taken.clear();
        for id in &e.subscriber_ids {
            if insert_member(c, id, set_id, entry_id).await? {
                stats.new += 1;
                changed.push(id.clone());
            } else {
                taken.push(id);
            }
        }
        if taken.is_empty() {
            continue;
        }
        gone.clear();
        for id in &taken {
            if gone.contains(id) {
                continue;
            }
            let m = member(c, id, true)
                .await?
                .ok_or_else(|| store::Error::backend_msg(format!("{id:?} vanished")))?;
            let old = members(c, id, m.entry_id).await?;
            remove_entry(c, m.entry_id, &old, changed).await?;
            stats.replaced += 1;
            stats.removed += old.iter().filter(|o| !e.subscriber_ids.contains(o)).count();
            gone.extend(old);
        }
        for id in &taken {
            insert_member(c, id, set_id, entry_id).await?;
        }
    }
    Ok(stats)
}

fn in_list(n: usize) -> String {
    vec!["?"; n].join(",")
}

impl SlfStore for MysqlSlf {
    fn groups(&self, subscriber_id: &str) -> StoreFuture<'_, Option<Arc<Groups>>> {
        let id: Arc<str> = subscriber_id.into();
        Box::pin(async move {
            let sets = self.sets.clone();
            self.db
                .read(move |c| {
                    let (id, sets) = (id.clone(), sets.clone());
                    Box::pin(async move {
                        let set_id: Option<i64> = c
                            .exec_first(
                                "SELECT set_id FROM udr_slf_subscriber WHERE subscriber_id = ?",
                                (id.as_ref(),),
                            )
                            .await?;
                        let Some(set_id) = set_id else { return Ok(None) };
                        group_set(c, &sets, set_id).await
                    })
                })
                .await
        })
    }

    fn put(&self, entries: Vec<Entry>) -> StoreFuture<'_, (PutStats, Vec<Entry>)> {
        let entries = Arc::new(entries);
        let writer = self.writer.clone();
        Box::pin(async move {
            let e = entries.clone();
            let stats = self
                .write(move |c| {
                    let (e, writer) = (e.clone(), writer.clone());
                    Box::pin(async move {
                        let mut changed = Vec::new();
                        let stats = put_entries(c, &e, &mut changed).await?;
                        record(c, &writer, &changed).await?;
                        Ok((stats, changed))
                    })
                })
                .await?;
            let entries = Arc::try_unwrap(entries).unwrap_or_else(|a| (*a).clone());
            Ok((stats, entries))
        })
    }

    fn put_expecting(&self, entries: Vec<Entry>, expect: Expect) -> StoreFuture<'_, ()> {
        let ids: usize = entries.iter().map(|e| e.subscriber_ids.len()).sum();
        let entries = Arc::new(entries);
        let writer = self.writer.clone();
        Box::pin(self.write(move |c| {
            let (e, writer) = (entries.clone(), writer.clone());
            Box::pin(async move {
                let mut changed = Vec::new();
                let new = put_entries(c, &e, &mut changed).await?.new;
                match (expect, new) {
                    (Expect::AllNew, x) if x == ids => {}
                    (Expect::AllNew, _) => return Err(store::Error::AlreadyExists.into()),
                    (Expect::NoneNew, 0) => {}
                    (Expect::NoneNew, _) => return Err(store::Error::NotFound.into()),
                }
                record(c, &writer, &changed).await?;
                Ok(((), changed))
            })
        }))
    }

    fn delete(&self, subscriber_ids: Vec<String>) -> StoreFuture<'_, usize> {
        let ids = Arc::new(subscriber_ids);
        let writer = self.writer.clone();
        Box::pin(self.write(move |c| {
            let (ids, writer) = (ids.clone(), writer.clone());
            Box::pin(async move {
                let mut n = 0;
                let mut changed = Vec::new();
                for id in ids.iter() {
                    let Some(m) = member(c, id, true).await? else { continue };
                    n += 1;
                    let old = members(c, id, m.entry_id).await?;
                    remove_entry(c, m.entry_id, &old, &mut changed).await?;
                    let rest: Vec<String> = old.into_iter().filter(|o| o != id).collect();
                    if !rest.is_empty() {
                        insert_entry(c, &rest, m.set_id, &mut changed).await?;
                    }
                }
                record(c, &writer, &changed).await?;
                Ok((n, changed))
            })
        }))
    }

    fn count(&self) -> StoreFuture<'_, u64> {
        Box::pin(self.db.scan(|c| {
            Box::pin(async move {
                let n: Option<u64> =
                    c.query_first("SELECT COUNT(*) FROM udr_slf_subscriber").await?;
                Ok(n.unwrap_or(0))
            })
        }))
    }

    fn get_entry(&self, subscriber_id: &str) -> StoreFuture<'_, Option<Entry>> {
        let id: Arc<str> = subscriber_id.into();
        let sets = self.sets.clone();
        Box::pin(self.db.read(move |c| {
            let (id, sets) = (id.clone(), sets.clone());
            Box::pin(async move { Ok(read_entry(c, &sets, &id, false).await?.map(|(_, e)| e)) })
        }))
    }

    fn create_entry(&self, entry: Entry) -> StoreFuture<'_, Result<(), String>> {
        let entry = Arc::new(entry);
        let writer = self.writer.clone();
        Box::pin(self.write(move |c| {
            let (entry, writer) = (entry.clone(), writer.clone());
            Box::pin(async move {
                for id in &entry.subscriber_ids {
                    if member(c, id, true).await?.is_some() {
                        return Ok((Err(id.clone()), Vec::new()));
                    }
                }
                let set_id = group_set_id(c, &entry.groups).await?;
                let mut changed = Vec::new();
                insert_entry(c, &entry.subscriber_ids, set_id, &mut changed).await?;
                record(c, &writer, &changed).await?;
                Ok((Ok(()), changed))
            })
        }))
    }

    fn update_entry(&self, subscriber_id: &str, change: EntryChange) -> StoreFuture<'_, Updated> {
        let id: Arc<str> = subscriber_id.into();
        let sets = self.sets.clone();
        let writer = self.writer.clone();
        let change = Arc::new(Replay::<EntryChange, Entry, Entry>::new(change));
        Box::pin(self.write(move |c| {
            let (id, sets, writer, change) =
                (id.clone(), sets.clone(), writer.clone(), change.clone());
            Box::pin(async move {
                let Some((key, current)) = read_entry(c, &sets, &id, true).await? else {
                    return Ok((Updated::NotFound, Vec::new()));
                };
                let old_ids = current.subscriber_ids.clone();
                let new = match change.apply(current.clone(), |f| f(current))? {
                    Ok(n) => n,
                    Err(e) => return Ok((Updated::Rejected(e), Vec::new())),
                };
                for nid in new.subscriber_ids.iter().filter(|n| !old_ids.contains(n)) {
                    if member(c, nid, true).await?.is_some() {
                        return Ok((Updated::Conflict(nid.clone()), Vec::new()));
                    }
                }
                let set_id = group_set_id(c, &new.groups).await?;
                let mut changed = Vec::new();
                remove_entry(c, key, &old_ids, &mut changed).await?;
                insert_entry(c, &new.subscriber_ids, set_id, &mut changed).await?;
                record(c, &writer, &changed).await?;
                Ok((Updated::Done(new), changed))
            })
        }))
    }

    fn delete_entry(&self, subscriber_id: &str) -> StoreFuture<'_, bool> {
        let id: Arc<str> = subscriber_id.into();
        let writer = self.writer.clone();
        Box::pin(self.write(move |c| {
            let (id, writer) = (id.clone(), writer.clone());
            Box::pin(async move {
                let Some(m) = member(c, &id, true).await? else { return Ok((false, Vec::new())) };
                let old = members(c, &id, m.entry_id).await?;
                let mut changed = Vec::new();
                remove_entry(c, m.entry_id, &old, &mut changed).await?;
                record(c, &writer, &changed).await?;
                Ok((true, changed))
            })
        }))
    }

    fn capture(&self, noted: Arc<AtomicU64>) -> StoreFuture<'_, i64> {
        let _ = self.noted.set(noted);
        Box::pin(async move { Ok(self.reloads.load(Ordering::Acquire)) })
    }

    fn noted_committed(&self, noted: Arc<AtomicU64>) -> StoreFuture<'_, u64> {
        // Writes are counted only once committed.
        Box::pin(async move { Ok(noted.load(Ordering::Acquire)) })
    }

    fn changes(&self, known_sets: Vec<i64>, noted: Arc<AtomicU64>) -> StoreFuture<'_, Changes> {
        Box::pin(async move {
            // The count first: every identity counted up to it is queued by now.
            let through = noted.load(Ordering::Acquire);
            let version = self.reloads.load(Ordering::Acquire);
            let ids: Vec<String> =
                std::mem::take(&mut *self.pending.lock().unwrap_or_else(|p| p.into_inner()))
                    .into_iter()
                    .collect();
            if ids.is_empty() {
                return Ok(Changes {
                    version,
                    noted: through,
                    capturing: true,
                    changes: Vec::new(),
                    sets: Vec::new(),
                });
            }
            let shared = Arc::new((ids, known_sets));
            let read = self
                .db
                .read({
                    let shared = shared.clone();
                    move |c| {
                        let shared = shared.clone();
                        Box::pin(async move {
                            let (ids, known) = &*shared;
                            let mut now: HashMap<String, i64> = HashMap::new();
                            for chunk in ids.chunks(500) {
                                let p = chunk.iter().map(|i| Value::from(i.as_str())).collect();
                                let rows: Vec<(String, i64)> = c
                                    .exec(
                                        format!(
                                            "SELECT subscriber_id, set_id FROM udr_slf_subscriber \
                                             WHERE subscriber_id IN ({})",
                                            in_list(chunk.len())
                                        ),
                                        Params::Positional(p),
                                    )
                                    .await?;
                                now.extend(rows);
                            }
                            let mut wanted: Vec<i64> =
                                now.values().copied().filter(|s| !known.contains(s)).collect();
                            wanted.sort_unstable();
                            wanted.dedup();
                            let mut sets = Vec::new();
                            for chunk in wanted.chunks(500) {
                                let p = chunk.iter().map(|s| Value::from(*s)).collect();
                                let rows: Vec<(i64, Vec<u8>)> = c
                                    .exec(
                                        format!(
                                            "SELECT set_id, groups FROM udr_slf_group_set \
                                             WHERE set_id IN ({})",
                                            in_list(chunk.len())
                                        ),
                                        Params::Positional(p),
                                    )
                                    .await?;
                                for (id, text) in rows {
                                    sets.push((id, parse_groups(&text)?));
                                }
                            }
                            let changes =
                                ids.iter().map(|i| (i.clone(), now.get(i).copied())).collect();
                            Ok(Changes { version, noted: through, capturing: true, changes, sets })
                        })
                    }
                })
                .await;
            if read.is_err() {
                // Tried again at the next drain.
                self.changed_elsewhere(shared.0.iter().cloned());
            }
            read
        })
    }

    fn load_index(&self) -> StoreFuture<'_, Index> {
        Box::pin(self.db.scan(|c| {
            Box::pin(async move {
                let mut ix = Index::default();
                let sets: Vec<(i64, Vec<u8>)> =
                    c.query("SELECT set_id, groups FROM udr_slf_group_set").await?;
                for (id, text) in sets {
                    ix.add_set(id, parse_groups(&text)?);
                }
                // Streamed: tens of millions of rows are not collected first.
                let mut fault: Option<String> = None;
                let mut rows =
                    c.query_iter("SELECT subscriber_id, set_id FROM udr_slf_subscriber").await?;
                rows.for_each(|row| {
                    if fault.is_some() {
                        return;
                    }
                    match mysql_async::from_row_opt::<(Vec<u8>, i64)>(row) {
                        Ok((id, set)) => match std::str::from_utf8(&id) {
                            Ok(id) => {
                                if let Err(e) = ix.set(id, Some(set)) {
                                    fault = Some(e);
                                }
                            }
                            Err(e) => fault = Some(e.to_string()),
                        },
                        Err(e) => fault = Some(e.to_string()),
                    }
                })
                .await?;
                drop(rows);
                if let Some(f) = fault {
                    return Err(store::Error::backend_msg(f).into());
                }
                Ok(ix)
            })
        }))
    }
}
