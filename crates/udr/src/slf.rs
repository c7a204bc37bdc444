//! The subscriber-to-NF-group map behind the SLF role (Nudr_GroupIDmap, TS 29.504 §5.5).
//!
//! Sized for the reference's 37 million subscribers: a subscriber identity (SUPI, GPSI, IMPI or
//! IMPU, with its type prefix as in `SubscriberId`) is one narrow row pointing at a *group set*,
//! the map NF type -> NF group id. Operators provision a handful of distinct group sets, so the
//! sets are stored once and cached in memory once read (a set never changes: a different map is a
//! different set), and a lookup is one primary-key read.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use rusqlite::{params, OptionalExtension, Transaction};
use store::{Migration, SqliteStore};

/// NF type -> NF group id (`NfGroupIdMapResult`).
pub type Groups = BTreeMap<String, String>;

pub const MIGRATIONS: [Migration; 1] = [Migration::new(
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
)];

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
        if g.is_empty() || g.len() > MAX_ID_LEN || g.chars().any(char::is_control) {
            return Err(Invalid::Groups(format!(
                "group id of {t} must be 1 to 255 printable bytes"
            )));
        }
    }
    Ok(())
}

/// One provisioned SLF entry: identities of one subscriber and their groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub subscriber_ids: Vec<String>,
    pub groups: Groups,
}

#[derive(Clone)]
pub struct SlfStore {
    db: SqliteStore,
    sets: Arc<RwLock<HashMap<i64, Arc<Groups>>>>,
}

impl SlfStore {
    pub fn new(db: SqliteStore) -> Self {
        SlfStore { db, sets: Arc::default() }
    }

    /// The groups of `subscriber_id`, or `None` for an unknown subscriber.
    pub async fn get(&self, subscriber_id: &str) -> store::Result<Option<Arc<Groups>>> {
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
        let text = self
            .db
            .read(move |c| {
                let mut st =
                    c.prepare_cached("SELECT groups FROM udr_slf_group_set WHERE set_id = ?1")?;
                Ok(st.query_row([set_id], |r| r.get::<_, String>(0)).optional()?)
            })
            .await?;
        // A set is only ever written together with the rows pointing at it.
        let Some(text) = text else { return Ok(None) };
        let groups: Groups = serde_json::from_str(&text).map_err(store::Error::backend)?;
        let groups = Arc::new(groups);
        self.sets.write().unwrap_or_else(|p| p.into_inner()).insert(set_id, groups.clone());
        Ok(Some(groups))
    }

    fn cached(&self, set_id: i64) -> Option<Arc<Groups>> {
        self.sets.read().unwrap_or_else(|p| p.into_inner()).get(&set_id).cloned()
    }

    /// Writes entries (creating or replacing each identity's groups) in one transaction; returns
    /// how many identities were new. Entries must have been checked.
    pub async fn put(&self, entries: Vec<Entry>) -> store::Result<usize> {
        self.db.write(move |tx| put_entries(tx, &entries)).await
    }

    /// Removes identities; returns how many existed.
    pub async fn delete(&self, subscriber_ids: Vec<String>) -> store::Result<usize> {
        self.db
            .write(move |tx| {
                let mut st =
                    tx.prepare_cached("DELETE FROM udr_slf_subscriber WHERE subscriber_id = ?1")?;
                let mut n = 0;
                for id in &subscriber_ids {
                    n += st.execute([id])?;
                }
                Ok(n)
            })
            .await
    }

    /// Identities held.
    pub async fn count(&self) -> store::Result<u64> {
        self.db
            .read(|c| Ok(c.query_row("SELECT COUNT(*) FROM udr_slf_subscriber", [], |r| r.get(0))?))
            .await
    }
}

/// The writer-thread half of [`SlfStore::put`], also used by bulk import.
pub fn put_entries(tx: &Transaction<'_>, entries: &[Entry]) -> store::Result<usize> {
    let mut set_cache: HashMap<&Groups, i64> = HashMap::new();
    let mut new = 0;
    for e in entries {
        let set_id = match set_cache.get(&e.groups) {
            Some(id) => *id,
            None => {
                let id = group_set_id(tx, &e.groups)?;
                set_cache.insert(&e.groups, id);
                id
            }
        };
        let mut exists =
            tx.prepare_cached("SELECT 1 FROM udr_slf_subscriber WHERE subscriber_id = ?1")?;
        let mut upsert = tx.prepare_cached(
            "INSERT INTO udr_slf_subscriber (subscriber_id, set_id) VALUES (?1, ?2)
             ON CONFLICT (subscriber_id) DO UPDATE SET set_id = excluded.set_id",
        )?;
        for id in &e.subscriber_ids {
            if exists.query_row([id], |_| Ok(())).optional()?.is_none() {
                new += 1;
            }
            upsert.execute(params![id, set_id])?;
        }
    }
    Ok(new)
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
}
