//! The subscriber-to-NF-group map behind the SLF role (Nudr_GroupIDmap, TS 29.504 §5.5).
//!
//! Sized for the reference's 37 million subscribers: a subscriber identity (SUPI, GPSI, IMPI or
//! IMPU, with its type prefix as in `SubscriberId`) is one narrow row pointing at a *group set*,
//! the map NF type -> NF group id. Operators provision a handful of distinct group sets, so the
//! sets are stored once and cached in memory once read (a set never changes: a different map is a
//! different set).
//!
//! Once [`SlfStore::start`]ed, lookups are answered from an in-memory identity index
//! ([`index`]) that [`sync`] keeps equal to the store; before, they read the store.

mod index;
mod sync;

pub use index::pack;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, Transaction};
use store::{Migration, SqliteStore};

/// NF type -> NF group id (`NfGroupIdMapResult`).
pub type Groups = BTreeMap<String, String>;

pub const MIGRATIONS: [Migration; 2] = [
    Migration::new(
        "udr-0001-slf",
        // WITHOUT ROWID clusters the rows by identity, as InnoDB and NDB do with a primary key.
        "CREATE TABLE udr_slf_group_set (
            set_id INTEGER PRIMARY KEY,
            groups TEXT NOT NULL UNIQUE
        );
        CREATE TABLE udr_slf_subscriber (
            subscriber_id TEXT PRIMARY KEY NOT NULL,
            set_id INTEGER NOT NULL
        ) WITHOUT ROWID;",
    ),
    Migration::new(
        "udr-0002-slf-entry",
        // Entries of several identities (a SUPI with its GPSI, IMPI, ...), for provisioning: each
        // member row names its entry by a small integer and the entry row lists the members in
        // order (the first is the entry's key), so an entry is read or removed from any of its
        // identities with primary-key reads only (no secondary index over tens of millions of
        // rows). A lone identity keeps `entry_id` NULL and has no entry row, so it costs what it
        // cost before. The lookup path (`SlfStore::get`) reads neither.
        "ALTER TABLE udr_slf_subscriber ADD COLUMN entry_id INTEGER;
        CREATE TABLE udr_slf_entry (
            entry_id INTEGER PRIMARY KEY,
            subscriber_ids TEXT NOT NULL
        );",
    ),
];

/// Separates the members in `udr_slf_entry.subscriber_ids`; identities never hold control
/// characters ([`check_subscriber_id`]).
const MEMBER_SEP: &str = "\n";

/// Most identities in one entry (a SUPI, GPSIs, IMPIs and IMPUs of one subscriber).
pub const MAX_IDS_PER_ENTRY: usize = 32;

/// Longest subscriber identity accepted (an IMPU/NAI is a URI; 255 fits every backend's key).
pub const MAX_ID_LEN: usize = 255;

/// Why an entry is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invalid {
    SubscriberId(String),
    Groups(String),
}

/// Checks one subscriber identity: the `SubscriberId` forms of TS 29.504 (`imsi-`, `msisdn-`,
/// `nai-`, `extid-`, `impi-`, `impu-`, or any other non-empty string), without control
/// characters and at most [`MAX_ID_LEN`] bytes.
pub fn check_subscriber_id(id: &str) -> Result<(), Invalid> {
    let bad = |why: &str| Err(Invalid::SubscriberId(format!("{id:?}: {why}")));
    if id.is_empty() || id.len() > MAX_ID_LEN {
        return bad("must be 1 to 255 bytes");
    }
    if id.chars().any(char::is_control) {
        return bad("must not contain control characters");
    }
    let digits = |s: &str, min: usize| {
        s.len() >= min && s.len() <= 15 && s.bytes().all(|b| b.is_ascii_digit())
    };
    if let Some(rest) = id.strip_prefix("imsi-") {
        if !digits(rest, 5) {
            return bad("imsi- must be followed by 5 to 15 digits");
        }
    }
    if let Some(rest) = id.strip_prefix("msisdn-") {
        if !digits(rest, 5) {
            return bad("msisdn- must be followed by 5 to 15 digits");
        }
    }
    Ok(())
}

/// An NF type as TS 29.510 spells it (`UDM`, `5G_EIR`, `CUSTOM_...`).
pub fn is_nf_type(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

/// Checks a group map: at least one entry, NF type keys, non-empty group ids.
pub fn check_groups(groups: &Groups) -> Result<(), Invalid> {
    if groups.is_empty() {
        return Err(Invalid::Groups("at least one NF type -> group id".into()));
    }
    for (t, g) in groups {
        if !is_nf_type(t) {
            return Err(Invalid::Groups(format!("{t:?} is not an NF type")));
        }
        if !check_group_id(g) {
            return Err(Invalid::Groups(format!(
                "group id of {t} must be 1 to 255 printable bytes"
            )));
        }
    }
    Ok(())
}

/// Checks an entry's identities: 1 to [`MAX_IDS_PER_ENTRY`], each valid, none twice. Returns
/// every fault: the index of the identity at fault (`None`: the list as a whole) and why.
pub fn check_subscriber_ids(ids: &[String]) -> Vec<(Option<usize>, String)> {
    let mut faults = Vec::new();
    if ids.is_empty() || ids.len() > MAX_IDS_PER_ENTRY {
        faults.push((None, format!("an entry has 1 to {MAX_IDS_PER_ENTRY} identities")));
    }
    for (i, id) in ids.iter().enumerate() {
        if let Err(Invalid::SubscriberId(why) | Invalid::Groups(why)) = check_subscriber_id(id) {
            faults.push((Some(i), why));
        } else if ids[..i].contains(id) {
            faults.push((Some(i), format!("{id:?} is listed twice")));
        }
    }
    faults
}

/// A group id: 1 to 255 bytes without control characters.
pub fn check_group_id(g: &str) -> bool {
    !g.is_empty() && g.len() <= MAX_ID_LEN && !g.chars().any(char::is_control)
}

/// One provisioned SLF entry: identities of one subscriber and their groups. The first identity
/// is the entry's key (its provisioning URI names it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub subscriber_ids: Vec<String>,
    pub groups: Groups,
}

/// What [`SlfStore::put`] / [`put_entries_counted`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PutStats {
    /// Identities that did not exist before.
    pub new: usize,
    /// Existing entries replaced because the written entry shares an identity with them.
    pub replaced: usize,
    /// Identities of replaced entries that the written entry does not list: removed.
    pub removed: usize,
}

/// The outcome of [`SlfStore::update_entry`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Updated<E> {
    /// Written; the entry as it is now.
    Done(Entry),
    /// No entry has this identity.
    NotFound,
    /// The new entry lists an identity that belongs to another entry.
    Conflict(String),
    /// The update function refused the change.
    Rejected(E),
}

#[derive(Clone)]
pub struct SlfStore {
    db: SqliteStore,
    sets: Arc<RwLock<HashMap<i64, Arc<Groups>>>>,
    /// The identity index, once started.
    live: Arc<OnceLock<Arc<sync::Live>>>,
}

impl SlfStore {
    pub fn new(db: SqliteStore) -> Self {
        SlfStore { db, sets: Arc::default(), live: Arc::default() }
    }

    /// Loads the identity index and keeps it in step with the store from now on, draining the
    /// changes of other writers every `interval` (see [`sync`]). Lookups use it from then on.
    /// Call once, within a tokio runtime.
    pub async fn start(&self, interval: Duration) -> store::Result<()> {
        let live = sync::start(&self.db, interval).await?;
        self.live
            .set(live)
            .map_err(|_| store::Error::backend_msg("the SLF index is started already"))
    }

    /// Identities in the index and its memory in bytes, once started.
    pub fn index_size(&self) -> Option<(usize, usize)> {
        let ix = self.live.get()?.index();
        Some((ix.len(), ix.memory_bytes()))
    }

    /// The groups of `subscriber_id` as the index holds them, when started and up to date
    /// (`None` otherwise; then [`get`](Self::get) reads the store).
    pub fn indexed(&self, subscriber_id: &str) -> Option<Option<Arc<Groups>>> {
        let ix = self.live.get()?.fresh_index()?;
        Some(ix.get(subscriber_id).cloned())
    }

    /// After a committed write: asks the index to take it in now. Lookups read the store until
    /// it has (see [`sync`]), so they see the write already.
    async fn synced<T>(&self, written: T) -> store::Result<T> {
        if let Some(live) = self.live.get() {
            live.nudge();
        }
        Ok(written)
    }

    /// The groups of `subscriber_id`, or `None` for an unknown subscriber: from the index once
    /// started and up to date with every write of this process, else from the store.
    pub async fn get(&self, subscriber_id: &str) -> store::Result<Option<Arc<Groups>>> {
        if let Some(ix) = self.live.get().and_then(|l| l.fresh_index()) {
            return Ok(ix.get(subscriber_id).cloned());
        }
        self.read(subscriber_id).await
    }

    /// The groups of `subscriber_id`, read from the store.
    async fn read(&self, subscriber_id: &str) -> store::Result<Option<Arc<Groups>>> {
        let id = subscriber_id.to_owned();
        let set_id = self
            .db
            .read(move |c| {
                let mut st = c.prepare_cached(
                    "SELECT set_id FROM udr_slf_subscriber WHERE subscriber_id = ?1",
                )?;
                Ok(st.query_row([id], |r| r.get::<_, i64>(0)).optional()?)
            })
            .await?;
        let Some(set_id) = set_id else { return Ok(None) };
        if let Some(g) = self.cached(set_id) {
            return Ok(Some(g));
        }
        let sets = self.sets.clone();
        self.db.read(move |c| group_set(c, &sets, set_id)).await
    }

    fn cached(&self, set_id: i64) -> Option<Arc<Groups>> {
        self.sets.read().unwrap_or_else(|p| p.into_inner()).get(&set_id).cloned()
    }

    /// Writes entries in one transaction; each replaces every existing entry it shares an
    /// identity with (see [`put_entries_counted`]). Returns how many identities were new.
    /// Entries must have been checked.
    pub async fn put(&self, entries: Vec<Entry>) -> store::Result<usize> {
        let new = self.db.write(move |tx| put_entries(tx, &entries)).await?;
        self.synced(new).await
    }

    /// Removes identities (each leaves the entry it belonged to; the other members stay);
    /// returns how many existed.
    pub async fn delete(&self, subscriber_ids: Vec<String>) -> store::Result<usize> {
        let n = self
            .db
            .write(move |tx| {
                let mut n = 0;
                for id in &subscriber_ids {
                    let Some(m) = member(tx, id)? else { continue };
                    n += 1;
                    let old = members(tx, id, m.entry_id)?;
                    remove_entry(tx, m.entry_id, &old)?;
                    let rest: Vec<String> = old.into_iter().filter(|o| o != id).collect();
                    if !rest.is_empty() {
                        insert_entry(tx, &rest, m.set_id)?;
                    }
                }
                Ok(n)
            })
            .await?;
        self.synced(n).await
    }

    /// Identities held.
    pub async fn count(&self) -> store::Result<u64> {
        self.db
            .read(|c| Ok(c.query_row("SELECT COUNT(*) FROM udr_slf_subscriber", [], |r| r.get(0))?))
            .await
    }

    /// The whole entry `subscriber_id` belongs to (all its identities, first the key), or `None`.
    pub async fn get_entry(&self, subscriber_id: &str) -> store::Result<Option<Entry>> {
        let id = subscriber_id.to_owned();
        let sets = self.sets.clone();
        self.db.read(move |c| Ok(read_entry(c, &sets, &id)?.map(|(_, e)| e))).await
    }

    /// Creates an entry unless one of its identities exists already: `Err(that identity)`.
    /// The entry must have been checked.
    pub async fn create_entry(&self, entry: Entry) -> store::Result<Result<(), String>> {
        let created = self
            .db
            .write(move |tx| {
                for id in &entry.subscriber_ids {
                    if member(tx, id)?.is_some() {
                        return Ok(Err(id.clone()));
                    }
                }
                let set_id = group_set_id(tx, &entry.groups)?;
                insert_entry(tx, &entry.subscriber_ids, set_id)?;
                Ok(Ok(()))
            })
            .await?;
        self.synced(created).await
    }

    /// Replaces the entry `subscriber_id` belongs to with `change(current entry)`, read and
    /// written in one job so concurrent updates cannot interleave. The new entry may drop
    /// identities (they are removed) and add ones that no other entry has. `change` must
    /// return a checked entry.
    pub async fn update_entry<E, F>(
        &self,
        subscriber_id: &str,
        change: F,
    ) -> store::Result<Updated<E>>
    where
        E: Send + 'static,
        F: FnOnce(Entry) -> Result<Entry, E> + Send + 'static,
    {
        let id = subscriber_id.to_owned();
        let sets = self.sets.clone();
        let updated = self
            .db
            .write(move |tx| {
                let Some((key, current)) = read_entry(tx, &sets, &id)? else {
                    return Ok(Updated::NotFound);
                };
                let old_ids = current.subscriber_ids.clone();
                let new = match change(current) {
                    Ok(n) => n,
                    Err(e) => return Ok(Updated::Rejected(e)),
                };
                for nid in new.subscriber_ids.iter().filter(|n| !old_ids.contains(n)) {
                    if member(tx, nid)?.is_some() {
                        return Ok(Updated::Conflict(nid.clone()));
                    }
                }
                let set_id = group_set_id(tx, &new.groups)?;
                remove_entry(tx, key, &old_ids)?;
                insert_entry(tx, &new.subscriber_ids, set_id)?;
                Ok(Updated::Done(new))
            })
            .await?;
        self.synced(updated).await
    }

    /// Removes the entry `subscriber_id` belongs to, all its identities; `false` when unknown.
    pub async fn delete_entry(&self, subscriber_id: &str) -> store::Result<bool> {
        let id = subscriber_id.to_owned();
        let deleted = self
            .db
            .write(move |tx| {
                let Some(m) = member(tx, &id)? else { return Ok(false) };
                let old = members(tx, &id, m.entry_id)?;
                remove_entry(tx, m.entry_id, &old)?;
                Ok(true)
            })
            .await?;
        self.synced(deleted).await
    }
}

/// Where an identity stands: its group set, and its entry (`None`: an entry of its own).
struct Member {
    set_id: i64,
    entry_id: Option<i64>,
}

fn member(c: &Connection, id: &str) -> store::Result<Option<Member>> {
    let mut st = c.prepare_cached(
        "SELECT set_id, entry_id FROM udr_slf_subscriber WHERE subscriber_id = ?1",
    )?;
    Ok(st.query_row([id], |r| Ok(Member { set_id: r.get(0)?, entry_id: r.get(1)? })).optional()?)
}

/// The identities of the entry `entry_id` that `id` belongs to, key first.
fn members(c: &Connection, id: &str, entry_id: Option<i64>) -> store::Result<Vec<String>> {
    let Some(key) = entry_id else { return Ok(vec![id.to_owned()]) };
    let list: Option<String> = c
        .prepare_cached("SELECT subscriber_ids FROM udr_slf_entry WHERE entry_id = ?1")?
        .query_row([key], |r| r.get(0))
        .optional()?;
    match list {
        Some(l) => Ok(l.split(MEMBER_SEP).map(str::to_owned).collect()),
        // Entry rows are written and removed with their members, in the same job.
        None => Err(store::Error::backend_msg(format!("SLF entry {key} of {id:?} is missing"))),
    }
}

/// Removes an entry's identity rows and its entry row.
fn remove_entry(tx: &Transaction<'_>, key: Option<i64>, ids: &[String]) -> store::Result<()> {
    let mut del = tx.prepare_cached("DELETE FROM udr_slf_subscriber WHERE subscriber_id = ?1")?;
    for id in ids {
        del.execute([id])?;
    }
    if let Some(key) = key {
        tx.prepare_cached("DELETE FROM udr_slf_entry WHERE entry_id = ?1")?.execute([key])?;
    }
    Ok(())
}

const INSERT_MEMBER: &str =
    "INSERT INTO udr_slf_subscriber (subscriber_id, set_id, entry_id) VALUES (?1, ?2, ?3)";

/// Inserts an entry whose identities exist nowhere: the entry row when it has more than one
/// identity, then one row per identity.
fn insert_entry(tx: &Transaction<'_>, ids: &[String], set_id: i64) -> store::Result<()> {
    let entry_id = entry_row(tx, ids)?;
    let mut ins = tx.prepare_cached(INSERT_MEMBER)?;
    for id in ids {
        ins.execute(params![id, set_id, entry_id])?;
    }
    Ok(())
}

/// Writes the entry row of a multi-identity entry; returns its id (`None` for a lone identity).
fn entry_row(tx: &Transaction<'_>, ids: &[String]) -> store::Result<Option<i64>> {
    if ids.len() < 2 {
        return Ok(None);
    }
    tx.prepare_cached("INSERT INTO udr_slf_entry (subscriber_ids) VALUES (?1)")?
        .execute([ids.join(MEMBER_SEP)])?;
    Ok(Some(tx.last_insert_rowid()))
}

/// The groups of a set, from the cache or read (and cached: a set never changes).
fn group_set(
    c: &Connection,
    sets: &RwLock<HashMap<i64, Arc<Groups>>>,
    set_id: i64,
) -> store::Result<Option<Arc<Groups>>> {
    if let Some(g) = sets.read().unwrap_or_else(|p| p.into_inner()).get(&set_id) {
        return Ok(Some(g.clone()));
    }
    let text: Option<String> = c
        .prepare_cached("SELECT groups FROM udr_slf_group_set WHERE set_id = ?1")?
        .query_row([set_id], |r| r.get(0))
        .optional()?;
    // A set is only ever written together with the rows pointing at it.
    let Some(text) = text else { return Ok(None) };
    let groups: Groups = serde_json::from_str(&text).map_err(store::Error::backend)?;
    let groups = Arc::new(groups);
    sets.write().unwrap_or_else(|p| p.into_inner()).insert(set_id, groups.clone());
    Ok(Some(groups))
}

/// The entry `id` belongs to, with its entry id (`None` for a lone identity).
fn read_entry(
    c: &Connection,
    sets: &RwLock<HashMap<i64, Arc<Groups>>>,
    id: &str,
) -> store::Result<Option<(Option<i64>, Entry)>> {
    let Some(m) = member(c, id)? else { return Ok(None) };
    let subscriber_ids = members(c, id, m.entry_id)?;
    let groups = group_set(c, sets, m.set_id)?
        .ok_or_else(|| store::Error::backend_msg(format!("group set {} is missing", m.set_id)))?;
    Ok(Some((m.entry_id, Entry { subscriber_ids, groups: (*groups).clone() })))
}

/// The writer-thread half of [`SlfStore::put`]: returns how many identities were new.
pub fn put_entries(tx: &Transaction<'_>, entries: &[Entry]) -> store::Result<usize> {
    Ok(put_entries_counted(tx, entries)?.new)
}

/// Writes entries (bulk import, [`SlfStore::put`]): each entry replaces every existing entry it
/// shares an identity with, so re-importing a file is idempotent and an entry that lost an
/// identity in the source loses it here too. Entries must have been checked.
///
/// Each identity is inserted first and only an identity that exists already costs more (its
/// old entry is read and removed), so a fresh load is one B-tree insert per identity.
pub fn put_entries_counted(tx: &Transaction<'_>, entries: &[Entry]) -> store::Result<PutStats> {
    let mut set_cache: HashMap<&Groups, i64> = HashMap::new();
    let mut last_set: Option<(&Groups, i64)> = None;
    let mut stats = PutStats::default();
    let mut insert = tx.prepare_cached(
        "INSERT INTO udr_slf_subscriber (subscriber_id, set_id, entry_id) VALUES (?1, ?2, ?3)
         ON CONFLICT (subscriber_id) DO NOTHING",
    )?;
    // Identities of the current entry that exist already, and those of the entries they
    // belonged to (removed).
    let mut taken: Vec<&String> = Vec::new();
    let mut gone: Vec<String> = Vec::new();
    for e in entries {
        let set_id = match last_set {
            Some((g, id)) if *g == e.groups => id,
            _ => match set_cache.get(&e.groups) {
                Some(id) => *id,
                None => {
                    let id = group_set_id(tx, &e.groups)?;
                    set_cache.insert(&e.groups, id);
                    id
                }
            },
        };
        last_set = Some((&e.groups, set_id));
        let entry_id = entry_row(tx, &e.subscriber_ids)?;
        taken.clear();
        for id in &e.subscriber_ids {
            if insert.execute(params![id, set_id, entry_id])? == 1 {
                stats.new += 1;
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
            // The insert conflicted, so the row exists.
            let m = member(tx, id)?
                .ok_or_else(|| store::Error::backend_msg(format!("{id:?} vanished")))?;
            let old = members(tx, id, m.entry_id)?;
            remove_entry(tx, m.entry_id, &old)?;
            stats.replaced += 1;
            stats.removed += old.iter().filter(|o| !e.subscriber_ids.contains(o)).count();
            gone.extend(old);
        }
        for id in &taken {
            insert.execute(params![id, set_id, entry_id])?;
        }
    }
    Ok(stats)
}

fn group_set_id(tx: &Transaction<'_>, groups: &Groups) -> store::Result<i64> {
    let text = serde_json::to_string(groups).map_err(store::Error::backend)?;
    tx.prepare_cached(
        "INSERT INTO udr_slf_group_set (groups) VALUES (?1) ON CONFLICT (groups) DO NOTHING",
    )?
    .execute([&text])?;
    Ok(tx
        .prepare_cached("SELECT set_id FROM udr_slf_group_set WHERE groups = ?1")?
        .query_row([&text], |r| r.get(0))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscriber_ids() {
        assert!(check_subscriber_id("imsi-001010000000001").is_ok());
        assert!(check_subscriber_id("msisdn-491711234567").is_ok());
        assert!(check_subscriber_id("impu-sip:alice@ims.example.org").is_ok());
        assert!(check_subscriber_id("imsi-12ab").is_err());
        assert!(check_subscriber_id("msisdn-1234").is_err());
        assert!(check_subscriber_id("").is_err());
        assert!(check_subscriber_id("a\nb").is_err());
    }

    #[test]
    fn groups() {
        let mut g = Groups::new();
        assert!(check_groups(&g).is_err());
        g.insert("UDM".into(), "udm-1".into());
        assert!(check_groups(&g).is_ok());
        g.insert("udm".into(), "x".into());
        assert!(check_groups(&g).is_err());
    }

    #[tokio::test]
    async fn put_get_delete_share_group_sets() {
        let dir = tempfile::tempdir().unwrap();
        let db =
            SqliteStore::open(store::SqliteConfig::new(dir.path().join("u.db"))).await.unwrap();
        db.migrate(MIGRATIONS).await.unwrap();
        let slf = SlfStore::new(db.clone());
        let g: Groups = [("UDM".to_owned(), "udm-1".to_owned())].into();
        let entries = (0..3)
            .map(|i| Entry {
                subscriber_ids: vec![format!("imsi-00101000000000{i}")],
                groups: g.clone(),
            })
            .collect();
        assert_eq!(slf.put(entries).await.unwrap(), 3);
        assert_eq!(*slf.get("imsi-001010000000001").await.unwrap().unwrap(), g);
        let sets: i64 = db
            .read(|c| Ok(c.query_row("SELECT COUNT(*) FROM udr_slf_group_set", [], |r| r.get(0))?))
            .await
            .unwrap();
        assert_eq!(sets, 1);
        let g2: Groups = [("UDM".to_owned(), "udm-2".to_owned())].into();
        let again =
            vec![Entry { subscriber_ids: vec!["imsi-001010000000001".into()], groups: g2.clone() }];
        assert_eq!(slf.put(again).await.unwrap(), 0);
        assert_eq!(*slf.get("imsi-001010000000001").await.unwrap().unwrap(), g2);
        assert_eq!(
            slf.delete(vec!["imsi-001010000000001".into(), "imsi-9".into()]).await.unwrap(),
            1
        );
        assert!(slf.get("imsi-001010000000001").await.unwrap().is_none());
        assert_eq!(slf.count().await.unwrap(), 2);
    }

    async fn open(dir: &std::path::Path) -> (SqliteStore, SlfStore) {
        let db = SqliteStore::open(store::SqliteConfig::new(dir.join("u.db"))).await.unwrap();
        db.migrate(MIGRATIONS).await.unwrap();
        (db.clone(), SlfStore::new(db))
    }

    fn entry(ids: &[&str], udm: &str) -> Entry {
        Entry {
            subscriber_ids: ids.iter().map(|s| s.to_string()).collect(),
            groups: [("UDM".to_owned(), udm.to_owned())].into(),
        }
    }

    #[tokio::test]
    async fn entries_are_read_updated_and_removed_from_any_identity() {
        let dir = tempfile::tempdir().unwrap();
        let (_db, slf) = open(dir.path()).await;
        let e = entry(&["imsi-001010000000001", "msisdn-33600000001", "impi-a@b"], "udm-1");
        assert_eq!(slf.create_entry(e.clone()).await.unwrap(), Ok(()));
        for id in &e.subscriber_ids {
            assert_eq!(slf.get_entry(id).await.unwrap().as_ref(), Some(&e), "{id}");
        }
        // Any identity taken: refused, nothing written.
        let clash = entry(&["imsi-001010000000002", "msisdn-33600000001"], "udm-2");
        assert_eq!(slf.create_entry(clash).await.unwrap(), Err("msisdn-33600000001".into()));
        assert!(slf.get("imsi-001010000000002").await.unwrap().is_none());

        // Drop one identity, add one, change the group.
        let other = entry(&["imsi-001010000000009"], "udm-9");
        slf.create_entry(other).await.unwrap().unwrap();
        let r = slf
            .update_entry::<(), _>("msisdn-33600000001", |mut cur| {
                cur.subscriber_ids = vec!["msisdn-33600000001".into(), "impu-tel:+1".into()];
                cur.groups = [("UDM".to_owned(), "udm-3".to_owned())].into();
                Ok(cur)
            })
            .await
            .unwrap();
        let now = entry(&["msisdn-33600000001", "impu-tel:+1"], "udm-3");
        assert_eq!(r, Updated::Done(now.clone()));
        assert!(slf.get("imsi-001010000000001").await.unwrap().is_none());
        assert_eq!(slf.get_entry("impu-tel:+1").await.unwrap(), Some(now.clone()));
        let r = slf
            .update_entry::<(), _>("impu-tel:+1", |mut cur| {
                cur.subscriber_ids.push("imsi-001010000000009".into());
                Ok(cur)
            })
            .await
            .unwrap();
        assert_eq!(r, Updated::Conflict("imsi-001010000000009".into()));
        let r = slf.update_entry("impu-tel:+1", |_| Err("no")).await.unwrap();
        assert_eq!(r, Updated::Rejected("no"));
        let r = slf.update_entry::<(), _>("imsi-001010000000005", Ok).await.unwrap();
        assert_eq!(r, Updated::NotFound);

        // Removing one identity leaves the rest as an entry; removing the entry removes all.
        let e = entry(&["imsi-001010000000003", "msisdn-33600000003", "msisdn-33600000004"], "u");
        slf.create_entry(e).await.unwrap().unwrap();
        assert_eq!(slf.delete(vec!["imsi-001010000000003".into()]).await.unwrap(), 1);
        let rest = entry(&["msisdn-33600000003", "msisdn-33600000004"], "u");
        assert_eq!(slf.get_entry("msisdn-33600000004").await.unwrap(), Some(rest));
        assert!(slf.delete_entry("msisdn-33600000004").await.unwrap());
        assert!(!slf.delete_entry("msisdn-33600000003").await.unwrap());
        assert!(slf.get("msisdn-33600000003").await.unwrap().is_none());
        assert!(slf.delete_entry("msisdn-33600000001").await.unwrap());
        assert_eq!(slf.count().await.unwrap(), 1);
    }

    #[tokio::test]
    async fn put_replaces_every_entry_it_shares_an_identity_with() {
        let dir = tempfile::tempdir().unwrap();
        let (db, _slf) = open(dir.path()).await;
        let slf = SlfStore::new(db.clone());
        let first = vec![
            entry(&["imsi-001010000000001", "msisdn-1111111"], "a"),
            entry(&["imsi-001010000000002"], "b"),
        ];
        assert_eq!(slf.put(first).await.unwrap(), 3);
        // One entry now holds identities of both: both are replaced, msisdn-1111111 removed.
        let merged = vec![entry(&["imsi-001010000000002", "imsi-001010000000001"], "c")];
        let stats = db.write(move |tx| put_entries_counted(tx, &merged)).await.unwrap();
        assert_eq!(stats, PutStats { new: 0, replaced: 2, removed: 1 });
        assert!(slf.get("msisdn-1111111").await.unwrap().is_none());
        let now = entry(&["imsi-001010000000002", "imsi-001010000000001"], "c");
        assert_eq!(slf.get_entry("imsi-001010000000001").await.unwrap(), Some(now));
        // The same again changes nothing.
        let again = vec![entry(&["imsi-001010000000002", "imsi-001010000000001"], "c")];
        let stats = db.write(move |tx| put_entries_counted(tx, &again)).await.unwrap();
        assert_eq!(stats, PutStats { new: 0, replaced: 1, removed: 0 });
        assert_eq!(slf.count().await.unwrap(), 2);
    }

    #[test]
    fn entry_identities() {
        let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(check_subscriber_ids(&ids(&["imsi-00101", "msisdn-12345"])).is_empty());
        assert_eq!(check_subscriber_ids(&[])[0].0, None);
        let faults = check_subscriber_ids(&ids(&["imsi-00101", "imsi-1", "x", "imsi-00101"]));
        let at: Vec<_> = faults.iter().map(|f| f.0).collect();
        assert_eq!(at, [Some(1), Some(3)]);
    }
}
