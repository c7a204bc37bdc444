//! The SLF role: [`nudr_group_id_map`] serves Nudr_GroupIDmap_GetNfGroupIDs (TS 29.504 §5.5) from
//! the subscriber-to-NF-group map kept here.
//!
//! Sized for the reference's 37 million subscribers: a subscriber identity (SUPI, GPSI, IMPI or
//! IMPU, with its type prefix as in `SubscriberId`) is one narrow row pointing at a *group set*,
//! the map NF type -> NF group id. Operators provision a handful of distinct group sets, so the
//! sets are stored once and cached in memory once read (a set never changes: a different map is a
//! different set).
//!
//! [`Slf`] is the service's state: the store behind the [`SlfStore`] trait (its SQLite
//! implementation, with the tables, is [`sqlite`], its MySQL one [`mysql`]) and, once [`Slf::start`]ed, an in-memory
//! identity index ([`index`]) that `sync` keeps equal to the store from the store's changes
//! feed; lookups are answered from the index, before it is loaded from the store.

pub mod index;
pub mod mysql;
pub mod nudr_group_id_map;
pub mod sqlite;
mod sync;

pub use index::pack;

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use sbi::ProblemDetails;

use crate::StoreFuture;

/// NF type -> NF group id (`NfGroupIdMapResult`).
pub type Groups = BTreeMap<String, String>;

/// Most identities in one entry unless configured (`[udr.provisioning] max_slf_ids_per_entry`):
/// a SUPI, GPSIs, IMPIs and IMPUs of one subscriber.
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

/// Checks an entry's identities: 1 to `max`, each valid, none twice. Returns every fault: the
/// index of the identity at fault (`None`: the list as a whole) and why. A list longer than `max`
/// is one fault, its items unchecked, so an oversized entry costs no more than one at the limit.
pub fn check_subscriber_ids(ids: &[String], max: usize) -> Vec<(Option<usize>, String)> {
    if ids.is_empty() || ids.len() > max {
        return vec![(None, format!("an entry has 1 to {max} identities, not {}", ids.len()))];
    }
    let mut faults = Vec::new();
    let mut seen = rustc_hash::FxHashSet::default();
    for (i, id) in ids.iter().enumerate() {
        if let Err(Invalid::SubscriberId(why) | Invalid::Groups(why)) = check_subscriber_id(id) {
            faults.push((Some(i), why));
        } else if !seen.insert(id.as_str()) {
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

/// What [`SlfStore::put`] did.
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
#[derive(Debug, Clone, PartialEq)]
pub enum Updated {
    /// Written; the entry as it is now.
    Done(Entry),
    /// No entry has this identity.
    NotFound,
    /// The new entry lists an identity that belongs to another entry.
    Conflict(String),
    /// The update function refused the change.
    Rejected(ProblemDetails),
}

/// The change [`SlfStore::update_entry`] makes: the new entry (checked) from the current one, or
/// the answer refusing it.
pub type EntryChange = Box<dyn FnOnce(Entry) -> Result<Entry, ProblemDetails> + Send>;

/// What [`SlfStore::put_expecting`] requires of the identities it writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Every identity is new (a create): else `store::Error::AlreadyExists`, nothing written.
    AllNew,
    /// Every identity exists (an update): else `store::Error::NotFound`, nothing written.
    NoneNew,
}

/// What one read of the store's changes feed found (see `sync.rs`).
#[derive(Debug)]
pub struct Changes {
    /// Moves when another writer (another process) committed since the last read: its writes
    /// are not in the feed, the index must be reloaded.
    pub version: i64,
    /// The change counter when the feed was read: every change counted up to it is in `changes`.
    pub noted: u64,
    /// The feed is still in place (a new writer connection would not have it).
    pub capturing: bool,
    /// Identities changed with their group set now (`None`: removed).
    pub changes: Vec<(String, Option<i64>)>,
    /// Group sets the changes point at that the index did not know.
    pub sets: Vec<(i64, Groups)>,
}

/// The SLF's persistence: entries, lookups, bulk loads, and the changes feed the identity index
/// syncs from. Group sets are numbered by the store (`i64` set ids the index keys by).
pub trait SlfStore: Send + Sync + 'static {
    /// The groups of `subscriber_id`, or `None` for an unknown subscriber.
    fn groups(&self, subscriber_id: &str) -> StoreFuture<'_, Option<Arc<Groups>>>;
    /// Writes a batch of checked entries in one transaction (bulk import, SOAP): each replaces
    /// every existing entry it shares an identity with, so re-importing a file is idempotent and
    /// an entry that lost an identity in the source loses it here too. The entries come back so
    /// that the caller frees them.
    fn put(&self, entries: Vec<Entry>) -> StoreFuture<'_, (PutStats, Vec<Entry>)>;
    /// [`put`](Self::put), written only when the identities are as `expect` says.
    fn put_expecting(&self, entries: Vec<Entry>, expect: Expect) -> StoreFuture<'_, ()>;
    /// Removes identities (each leaves the entry it belonged to; the other members stay);
    /// returns how many existed.
    fn delete(&self, subscriber_ids: Vec<String>) -> StoreFuture<'_, usize>;
    /// Identities held.
    fn count(&self) -> StoreFuture<'_, u64>;
    /// The whole entry `subscriber_id` belongs to (all its identities, first the key), or `None`.
    fn get_entry(&self, subscriber_id: &str) -> StoreFuture<'_, Option<Entry>>;
    /// Creates a checked entry unless one of its identities exists already: `Err(that identity)`.
    fn create_entry(&self, entry: Entry) -> StoreFuture<'_, Result<(), String>>;
    /// Replaces the entry `subscriber_id` belongs to with `change(current entry)`, read and
    /// written in one transaction so concurrent updates cannot interleave. The new entry may
    /// drop identities (they are removed) and add ones that no other entry has.
    fn update_entry(&self, subscriber_id: &str, change: EntryChange) -> StoreFuture<'_, Updated>;
    /// Removes the entry `subscriber_id` belongs to, all its identities; `false` when unknown.
    fn delete_entry(&self, subscriber_id: &str) -> StoreFuture<'_, bool>;

    /// Starts the changes feed: from now on each identity written through this store counts one
    /// into `noted` as it is written (before its write is acknowledged). Returns the version
    /// [`Changes::version`] starts from.
    fn capture(&self, noted: Arc<AtomicU64>) -> StoreFuture<'_, i64>;
    /// Resolves once every write counted so far has committed; returns `noted` as of then.
    fn noted_committed(&self, noted: Arc<AtomicU64>) -> StoreFuture<'_, u64>;
    /// Reads and empties the changes feed; `known_sets` are the group sets the index holds.
    fn changes(&self, known_sets: Vec<i64>, noted: Arc<AtomicU64>) -> StoreFuture<'_, Changes>;
    /// Every identity and group set, read from one snapshot.
    fn load_index(&self) -> StoreFuture<'_, index::Index>;
}

/// The SLF service's state: its store and, once started, the identity index.
#[derive(Clone)]
pub struct Slf {
    store: Arc<dyn SlfStore>,
    /// The identity index, once started.
    live: Arc<OnceLock<Arc<sync::Live>>>,
}

impl Slf {
    pub fn new(store: Arc<dyn SlfStore>) -> Self {
        Slf { store, live: Arc::default() }
    }

    /// The store, for what the service does not wrap (bulk loads).
    pub fn store(&self) -> &Arc<dyn SlfStore> {
        &self.store
    }

    /// Loads the identity index and keeps it in step with the store from now on, draining the
    /// changes of other writers every `interval` (see `sync.rs`). Lookups use it from then on.
    /// Call once, within a tokio runtime.
    pub async fn start(&self, interval: Duration) -> store::Result<()> {
        let live = sync::start(self.store.clone(), interval).await?;
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

    /// Asks the index to drain its store's changes now (another instance's writes, read from
    /// the change feed on MySQL).
    pub fn nudge(&self) {
        if let Some(live) = self.live.get() {
            live.nudge();
        }
    }

    /// After a committed write: asks the index to take it in now. Lookups read the store until
    /// it has (see `sync.rs`), so they see the write already.
    fn synced<T>(&self, written: T) -> store::Result<T> {
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
        self.store.groups(subscriber_id).await
    }

    /// See [`SlfStore::put`]; returns how many identities were new.
    pub async fn put(&self, entries: Vec<Entry>) -> store::Result<usize> {
        let (stats, entries) = self.store.put(entries).await?;
        drop(entries);
        self.synced(stats.new)
    }

    /// See [`SlfStore::put_expecting`].
    pub async fn put_expecting(&self, entries: Vec<Entry>, expect: Expect) -> store::Result<()> {
        self.store.put_expecting(entries, expect).await?;
        self.synced(())
    }

    /// See [`SlfStore::delete`].
    pub async fn delete(&self, subscriber_ids: Vec<String>) -> store::Result<usize> {
        let n = self.store.delete(subscriber_ids).await?;
        self.synced(n)
    }

    /// Identities held.
    pub async fn count(&self) -> store::Result<u64> {
        self.store.count().await
    }

    /// See [`SlfStore::get_entry`].
    pub async fn get_entry(&self, subscriber_id: &str) -> store::Result<Option<Entry>> {
        self.store.get_entry(subscriber_id).await
    }

    /// See [`SlfStore::create_entry`].
    pub async fn create_entry(&self, entry: Entry) -> store::Result<Result<(), String>> {
        let created = self.store.create_entry(entry).await?;
        self.synced(created)
    }

    /// See [`SlfStore::update_entry`].
    pub async fn update_entry(
        &self,
        subscriber_id: &str,
        change: impl FnOnce(Entry) -> Result<Entry, ProblemDetails> + Send + 'static,
    ) -> store::Result<Updated> {
        let updated = self.store.update_entry(subscriber_id, Box::new(change)).await?;
        self.synced(updated)
    }

    /// See [`SlfStore::delete_entry`].
    pub async fn delete_entry(&self, subscriber_id: &str) -> store::Result<bool> {
        let deleted = self.store.delete_entry(subscriber_id).await?;
        self.synced(deleted)
    }
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

    #[test]
    fn entry_identities() {
        let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(check_subscriber_ids(&ids(&["imsi-00101", "msisdn-12345"]), MAX_IDS_PER_ENTRY)
            .is_empty());
        assert_eq!(check_subscriber_ids(&[], MAX_IDS_PER_ENTRY)[0].0, None);
        let faults = check_subscriber_ids(
            &ids(&["imsi-00101", "imsi-1", "x", "imsi-00101"]),
            MAX_IDS_PER_ENTRY,
        );
        let at: Vec<_> = faults.iter().map(|f| f.0).collect();
        assert_eq!(at, [Some(1), Some(3)]);
        let many: Vec<String> = (0..100_000).map(|_| "x".to_owned()).collect();
        assert_eq!(
            check_subscriber_ids(&many, 32),
            [(None, "an entry has 1 to 32 identities, not 100000".to_owned())]
        );
    }
}
