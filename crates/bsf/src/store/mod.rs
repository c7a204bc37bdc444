//! The BSF's persistence, behind its own trait: [`BindingStore`] is everything the handlers, the
//! subscriptions, the audit and the Rx proxy ask of the store, [`BulkLoad`] what `fivecore bsf
//! preload` needs. No signature here names an engine: [`sqlite`] (the default: schema,
//! migrations, SQL, bulk load) and [`mysql`] (`[store] backend = "mysql"`: MariaDB / Galera)
//! implement it.
//!
//! The trait is object-safe and the context holds an `Arc<dyn BindingStore>`: one boxed future
//! per store call, next to the hop to the store's thread that every call makes anyway.

pub mod mysql;
pub mod sqlite;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use nf::NfError;

use crate::models::Keys;
use crate::ue_address_index::UeAddressIndex;

pub use mysql::MysqlBindingStore;
pub use sqlite::SqliteBindingStore;

/// What a store call returns.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = store::Result<T>> + Send + 'a>>;

/// An Update's read-modify-write of a PDU session binding: gets the stored document, returns the
/// new one with its keys, or refuses (nothing changes then).
pub type Patch = Box<dyn FnOnce(Vec<u8>) -> Result<(Keys, Vec<u8>), NfError> + Send>;

/// The same for a Rel-17 binding, whose keys do not change.
pub type KeyedPatch = Box<dyn FnOnce(Vec<u8>) -> Result<Vec<u8>, NfError> + Send>;

/// A new binding's id: a time-ordered UUID (version 7), so a Register adds its entry at the end
/// of the binding-id index, on a page the writer already holds, instead of on a random page of
/// an index of tens of millions of entries (a random UUID made that one page read and one
/// page write per Register). Clustered by id on an InnoDB backend, it keeps inserts in order too.
pub fn new_binding_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// A stored binding: its id and its document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub id: String,
    pub json: Vec<u8>,
}

/// A PDU session binding to store: the document as Register validated and encoded it, and the
/// keys it is looked up by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewBinding {
    pub id: String,
    pub keys: Keys,
    pub created_ms: i64,
    /// Shared by the answer, the store and the UE address index: encoded once, never copied.
    pub json: Bytes,
}

/// What a Register did.
#[derive(Debug)]
pub enum Created {
    /// Inserted; `replaced` are the bindings of the same UE address, DNN and S-NSSAI (or the
    /// same key, for Rel-17 bindings) it removed.
    Inserted { replaced: Vec<Stored> },
    /// Refused: this binding already holds the UE address, DNN and S-NSSAI (or the key).
    Exists(Stored),
}

/// What an Update did.
#[derive(Debug)]
pub enum Updated {
    Done(Vec<u8>),
    NotFound,
    /// The patch refused the change (it says why); nothing changed.
    Refused(NfError),
}

/// What a Discovery looks for: one UE address and optional filters.
#[derive(Debug, Clone, Default)]
pub struct Lookup {
    pub ipv4: Option<String>,
    /// Only with `ipv4`: match this IP domain (absent: any).
    pub ip_domain: Option<String>,
    /// Candidate prefixes (the query's network at the lengths bindings use).
    pub ipv6: Vec<String>,
    /// The IPv6 prefix the query gave (address, length), which `ipv6` was made from.
    pub ipv6_query: Option<(std::net::Ipv6Addr, u8)>,
    pub mac: Option<String>,
    pub dnn: Option<String>,
    pub snssai: Option<(u8, String)>,
    pub supi: Option<String>,
    pub gpsi: Option<String>,
}

/// The Rel-17 bindings kept by one key (`key1`, one binding per key unless replaced) and an
/// optional second lookup key (`key2`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keyed {
    /// PCF for a UE bindings: `key1` the SUPI, `key2` the GPSI.
    PcfForUe,
    /// PCF for an MBS session bindings: `key1` the normalised MBS session id.
    PcfForMbs,
}

/// The BSF's persistence. Every call is atomic and, once its future resolves `Ok`, durable.
///
/// A store built with a [`UeAddressIndex`] keeps it in step with every binding write, in the
/// order the writes take effect, and turns it off when a write fails after it changed it.
pub trait BindingStore: Send + Sync {
    /// Registers a PDU session binding: checks for bindings of the same UE address, DNN and
    /// S-NSSAI and, unless `reject` finds one, removes them and inserts the new one, atomically
    /// (two concurrent Registers for one UE cannot both win).
    fn create(&self, binding: NewBinding, reject: bool) -> StoreFuture<'_, Created>;

    /// The newest binding matching `q`.
    fn find(&self, q: Lookup) -> StoreFuture<'_, Option<Stored>>;

    fn get(&self, id: String) -> StoreFuture<'_, Option<Stored>>;

    /// Read-modify-write of one binding, atomically.
    fn update(&self, id: String, patch: Patch) -> StoreFuture<'_, Updated>;

    /// Removes a binding; returns it, or `None` when it was not stored.
    fn delete(&self, id: String) -> StoreFuture<'_, Option<Stored>>;

    /// Removes up to `limit` bindings created before `before_ms`, oldest first; returns them.
    fn remove_older_than(&self, before_ms: i64, limit: u32) -> StoreFuture<'_, Vec<Stored>>;

    /// PDU session bindings stored.
    fn count(&self) -> StoreFuture<'_, u64>;

    /// Inserts bindings without the existing-binding check, in one transaction (ids must be
    /// new): a migration from another BSF, a test's preload into a running store.
    fn insert_many(&self, rows: Vec<NewBinding>) -> StoreFuture<'_, usize>;

    /// The Rx proxy's index, when this store keeps one.
    fn index(&self) -> Option<&Arc<UeAddressIndex>>;

    /// Reads every stored binding into the index and makes it answer; returns how many.
    fn load_index(&self) -> StoreFuture<'_, u64>;

    /// Registers a Rel-17 binding: unless `reject` finds a binding with the same `key1` (then
    /// returns it), bindings with that key are replaced.
    fn create_keyed(
        &self,
        kind: Keyed,
        id: String,
        key1: String,
        key2: Option<String>,
        json: Vec<u8>,
        reject: bool,
    ) -> StoreFuture<'_, Created>;

    /// Rel-17 bindings whose `key1` and/or `key2` match, newest first.
    fn find_keyed(
        &self,
        kind: Keyed,
        key1: Option<String>,
        key2: Option<String>,
    ) -> StoreFuture<'_, Vec<Stored>>;

    fn update_keyed(&self, kind: Keyed, id: String, patch: KeyedPatch) -> StoreFuture<'_, Updated>;

    fn delete_keyed(&self, kind: Keyed, id: String) -> StoreFuture<'_, Option<Stored>>;

    /// Stores (or replaces) a binding event subscription.
    fn put_subscription(&self, id: String, json: Vec<u8>) -> StoreFuture<'_, ()>;

    /// Removes a subscription; false when it was not stored.
    fn delete_subscription(&self, id: String) -> StoreFuture<'_, bool>;

    /// Every stored subscription (id, document).
    fn load_subscriptions(&self) -> StoreFuture<'_, Vec<(String, Vec<u8>)>>;

    /// Stops the store once everything acknowledged is committed.
    fn close(&self) -> StoreFuture<'_, ()>;
}

/// Bulk loading into a store no BSF is serving from (`fivecore bsf preload`): the store may set
/// aside what makes single writes safe and indexes cheap to keep (a journal, secondary indexes)
/// and put it back in [`BulkLoad::finish`].
pub trait BulkLoad: Send {
    /// Stores one batch of bindings in one transaction, without the existing-binding check;
    /// a binding whose id is stored already replaces it.
    fn insert(&mut self, rows: &[NewBinding]) -> store::Result<()>;

    /// Builds what the load set aside and leaves the store as the BSF opens it.
    fn finish(self: Box<Self>) -> store::Result<BulkLoaded>;
}

/// What [`BulkLoad::finish`] reports.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BulkLoaded {
    /// Seconds spent building the indexes set aside.
    pub index_seconds: f64,
    /// The store's size on disk afterwards.
    pub bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binding_ids_are_unique_and_sort_in_creation_order() {
        let ids: Vec<String> = (0..1000).map(|_| new_binding_id()).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids out of order");
        for id in &ids {
            let u = uuid::Uuid::parse_str(id).expect("a UUID");
            assert_eq!((u.get_version_num(), id.len()), (7, 36), "{id}");
        }
    }
}
