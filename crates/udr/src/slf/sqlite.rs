//! The SLF store over SQLite: the subscriber-to-group-set tables, every statement they run, and
//! the change capture the identity index syncs from (see `slf/sync.rs` for the protocol).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use rusqlite::functions::FunctionFlags;
use rusqlite::{params, Connection, OptionalExtension, Transaction};
use store::{Migration, SqliteStore};

use super::index::Index;
use super::{Changes, Entry, EntryChange, Expect, Groups, PutStats, SlfStore, Updated};
use crate::StoreFuture;

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
        // cost before. The lookup path (`SlfStore::groups`) reads neither.
        "ALTER TABLE udr_slf_subscriber ADD COLUMN entry_id INTEGER;
        CREATE TABLE udr_slf_entry (
            entry_id INTEGER PRIMARY KEY,
            subscriber_ids TEXT NOT NULL
        );",
    ),
];

/// Separates the members in `udr_slf_entry.subscriber_ids`; identities never hold control
/// characters ([`super::check_subscriber_id`]).
const MEMBER_SEP: &str = "\n";

/// The SLF tables of the UDR's SQLite store. Group sets are cached once read: a set never
/// changes (a different map is a different set).
#[derive(Clone)]
pub struct SqliteSlf {
    db: SqliteStore,
    sets: Arc<RwLock<HashMap<i64, Arc<Groups>>>>,
}

impl SqliteSlf {
    /// Over `db`, which must have [`MIGRATIONS`] applied.
    pub fn new(db: SqliteStore) -> Self {
        SqliteSlf { db, sets: Arc::default() }
    }

    fn cached(&self, set_id: i64) -> Option<Arc<Groups>> {
        self.sets.read().unwrap_or_else(|p| p.into_inner()).get(&set_id).cloned()
    }
}

impl SlfStore for SqliteSlf {
    fn groups(&self, subscriber_id: &str) -> StoreFuture<'_, Option<Arc<Groups>>> {
        let id = subscriber_id.to_owned();
        Box::pin(async move {
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
        })
    }

    fn put(&self, entries: Vec<Entry>) -> StoreFuture<'_, (PutStats, Vec<Entry>)> {
        // The rows come back to be freed by the caller, not on the writer thread.
        Box::pin(self.db.write(move |tx| Ok((put_entries_counted(tx, &entries)?, entries))))
    }

    fn put_expecting(&self, entries: Vec<Entry>, expect: Expect) -> StoreFuture<'_, ()> {
        let ids: usize = entries.iter().map(|e| e.subscriber_ids.len()).sum();
        Box::pin(self.db.write(move |tx| {
            let new = put_entries_counted(tx, &entries)?.new;
            // Any other count: this job rolls back, nothing is written.
            match (expect, new) {
                (Expect::AllNew, x) if x == ids => Ok(()),
                (Expect::AllNew, _) => Err(store::Error::AlreadyExists),
                (Expect::NoneNew, 0) => Ok(()),
                (Expect::NoneNew, _) => Err(store::Error::NotFound),
            }
        }))
    }

    fn delete(&self, subscriber_ids: Vec<String>) -> StoreFuture<'_, usize> {
        Box::pin(self.db.write(move |tx| {
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
        }))
    }

    fn count(&self) -> StoreFuture<'_, u64> {
        Box::pin(self.db.read(|c| {
            Ok(c.query_row("SELECT COUNT(*) FROM udr_slf_subscriber", [], |r| r.get(0))?)
        }))
    }

    fn get_entry(&self, subscriber_id: &str) -> StoreFuture<'_, Option<Entry>> {
        let id = subscriber_id.to_owned();
        let sets = self.sets.clone();
        Box::pin(self.db.read(move |c| Ok(read_entry(c, &sets, &id)?.map(|(_, e)| e))))
    }

    fn create_entry(&self, entry: Entry) -> StoreFuture<'_, Result<(), String>> {
        Box::pin(self.db.write(move |tx| {
            for id in &entry.subscriber_ids {
                if member(tx, id)?.is_some() {
                    return Ok(Err(id.clone()));
                }
            }
            let set_id = group_set_id(tx, &entry.groups)?;
            insert_entry(tx, &entry.subscriber_ids, set_id)?;
            Ok(Ok(()))
        }))
    }

    fn update_entry(&self, subscriber_id: &str, change: EntryChange) -> StoreFuture<'_, Updated> {
        let id = subscriber_id.to_owned();
        let sets = self.sets.clone();
        Box::pin(self.db.write(move |tx| {
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
        }))
    }

    fn delete_entry(&self, subscriber_id: &str) -> StoreFuture<'_, bool> {
        let id = subscriber_id.to_owned();
        Box::pin(self.db.write(move |tx| {
            let Some(m) = member(tx, &id)? else { return Ok(false) };
            let old = members(tx, &id, m.entry_id)?;
            remove_entry(tx, m.entry_id, &old)?;
            Ok(true)
        }))
    }

    fn capture(&self, noted: Arc<AtomicU64>) -> StoreFuture<'_, i64> {
        Box::pin(self.db.write(move |tx| capture(tx, &noted)))
    }

    fn noted_committed(&self, noted: Arc<AtomicU64>) -> StoreFuture<'_, u64> {
        // A write job resolves after the COMMIT of its batch, so every write noted before it
        // (they ran before it on the same writer) is committed by then.
        Box::pin(self.db.write(move |_| Ok(noted.load(Ordering::Acquire))))
    }

    fn changes(&self, known_sets: Vec<i64>, noted: Arc<AtomicU64>) -> StoreFuture<'_, Changes> {
        Box::pin(self.db.write(move |tx| drain(tx, &known_sets, &noted)))
    }

    fn load_index(&self) -> StoreFuture<'_, Index> {
        Box::pin(self.db.read(load))
    }
}

// ---- change capture for the identity index (protocol in super::sync) --------------------------

const CAPTURE: &str = "
    CREATE TEMP TABLE IF NOT EXISTS udr_slf_changed (subscriber_id TEXT NOT NULL, note INTEGER);
    CREATE TEMP TRIGGER IF NOT EXISTS udr_slf_changed_insert
        AFTER INSERT ON main.udr_slf_subscriber
        BEGIN INSERT INTO udr_slf_changed VALUES (NEW.subscriber_id, udr_slf_noted()); END;
    CREATE TEMP TRIGGER IF NOT EXISTS udr_slf_changed_delete
        AFTER DELETE ON main.udr_slf_subscriber
        BEGIN INSERT INTO udr_slf_changed VALUES (OLD.subscriber_id, udr_slf_noted()); END;
    CREATE TEMP TRIGGER IF NOT EXISTS udr_slf_changed_update
        AFTER UPDATE ON main.udr_slf_subscriber
        BEGIN
            INSERT INTO udr_slf_changed VALUES (OLD.subscriber_id, udr_slf_noted());
            INSERT INTO udr_slf_changed VALUES (NEW.subscriber_id, udr_slf_noted());
        END;
    DELETE FROM temp.udr_slf_changed;";

const TRIGGERS: i64 = 3;

/// Installs the change triggers on the writer connection (with `udr_slf_noted()` counting
/// into `noted`); returns the connection's `data_version`.
fn capture(tx: &Transaction<'_>, noted: &Arc<AtomicU64>) -> store::Result<i64> {
    let noted = noted.clone();
    tx.create_scalar_function("udr_slf_noted", 0, FunctionFlags::SQLITE_UTF8, move |_| {
        Ok(noted.fetch_add(1, Ordering::AcqRel) as i64 + 1)
    })?;
    tx.execute_batch(CAPTURE)?;
    data_version(tx)
}

/// Reads every identity and group set, in one snapshot of a reader.
fn load(c: &Connection) -> store::Result<Index> {
    let mut ix = Index::default();
    let mut st = c.prepare("SELECT set_id, groups FROM udr_slf_group_set")?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        ix.add_set(
            r.get(0)?,
            parse_groups(r.get_ref(1)?.as_str().map_err(rusqlite::Error::from)?)?,
        );
    }
    let mut st = c.prepare("SELECT subscriber_id, set_id FROM udr_slf_subscriber")?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        let id = r.get_ref(0)?.as_str().map_err(rusqlite::Error::from)?;
        ix.set(id, Some(r.get(1)?)).map_err(store::Error::backend_msg)?;
    }
    Ok(ix)
}

fn parse_groups(text: &str) -> store::Result<Groups> {
    serde_json::from_str(text).map_err(store::Error::backend)
}

/// `PRAGMA data_version` of the writer connection: moves only when another connection commits.
fn data_version(c: &Connection) -> store::Result<i64> {
    Ok(c.query_row("PRAGMA data_version", [], |r| r.get(0))?)
}

fn drain(tx: &Transaction<'_>, known_sets: &[i64], noted: &AtomicU64) -> store::Result<Changes> {
    let version = data_version(tx)?;
    // Notes are made on this thread only, so none comes between this load and the reads.
    let noted = noted.load(Ordering::Acquire);
    let triggers: i64 = tx
        .prepare_cached(
            "SELECT COUNT(*) FROM temp.sqlite_master
             WHERE type = 'trigger' AND name LIKE 'udr_slf_changed_%'",
        )?
        .query_row([], |r| r.get(0))?;
    if triggers != TRIGGERS {
        return Ok(Changes {
            version,
            noted,
            capturing: false,
            changes: Vec::new(),
            sets: Vec::new(),
        });
    }
    let mut changes = Vec::new();
    let mut st = tx.prepare_cached(
        "SELECT c.subscriber_id, s.set_id
         FROM (SELECT DISTINCT subscriber_id FROM temp.udr_slf_changed) c
         LEFT JOIN main.udr_slf_subscriber s ON s.subscriber_id = c.subscriber_id",
    )?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        changes.push((r.get::<_, String>(0)?, r.get::<_, Option<i64>>(1)?));
    }
    drop(rows);
    let mut sets: Vec<(i64, Groups)> = Vec::new();
    let mut read_set =
        tx.prepare_cached("SELECT groups FROM udr_slf_group_set WHERE set_id = ?1")?;
    for set_id in changes.iter().filter_map(|c| c.1) {
        if known_sets.contains(&set_id) || sets.iter().any(|s| s.0 == set_id) {
            continue;
        }
        let text: String = read_set.query_row([set_id], |r| r.get(0))?;
        sets.push((set_id, parse_groups(&text)?));
    }
    if !changes.is_empty() {
        tx.prepare_cached("DELETE FROM temp.udr_slf_changed")?.execute([])?;
    }
    Ok(Changes { version, noted, capturing: true, changes, sets })
}

// ---- entries ----------------------------------------------------------------------------------

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

/// Writes entries (bulk import, [`SlfStore::put`](super::SlfStore::put)): each entry replaces every existing entry it
/// shares an identity with, so re-importing a file is idempotent and an entry that lost an
/// identity in the source loses it here too. Entries must have been checked.
///
/// Each identity is inserted first and only an identity that exists already costs more (its
/// old entry is read and removed), so a fresh load is one B-tree insert per identity.
fn put_entries_counted(tx: &Transaction<'_>, entries: &[Entry]) -> store::Result<PutStats> {
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
    use crate::slf::Slf;
    use sbi::ProblemDetails;

    fn entry(ids: &[&str], udm: &str) -> Entry {
        Entry {
            subscriber_ids: ids.iter().map(|s| s.to_string()).collect(),
            groups: [("UDM".to_owned(), udm.to_owned())].into(),
        }
    }

    #[tokio::test]
    async fn put_get_delete_share_group_sets() {
        let dir = tempfile::tempdir().unwrap();
        let db =
            SqliteStore::open(store::SqliteConfig::new(dir.path().join("u.db"))).await.unwrap();
        db.migrate(MIGRATIONS).await.unwrap();
        let slf = Slf::new(Arc::new(SqliteSlf::new(db.clone())));
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

    async fn open(dir: &std::path::Path) -> (SqliteStore, Slf) {
        let db = SqliteStore::open(store::SqliteConfig::new(dir.join("u.db"))).await.unwrap();
        db.migrate(MIGRATIONS).await.unwrap();
        (db.clone(), Slf::new(Arc::new(SqliteSlf::new(db))))
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
            .update_entry("msisdn-33600000001", |mut cur| {
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
            .update_entry("impu-tel:+1", |mut cur| {
                cur.subscriber_ids.push("imsi-001010000000009".into());
                Ok(cur)
            })
            .await
            .unwrap();
        assert_eq!(r, Updated::Conflict("imsi-001010000000009".into()));
        let no = ProblemDetails::bad_request("x", "no");
        let refusal = no.clone();
        let r = slf.update_entry("impu-tel:+1", move |_| Err(refusal)).await.unwrap();
        assert_eq!(r, Updated::Rejected(no));
        let r = slf.update_entry("imsi-001010000000005", Ok).await.unwrap();
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
        let slf = Slf::new(Arc::new(SqliteSlf::new(db.clone())));
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
}
