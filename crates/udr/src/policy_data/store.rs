//! The policy data store: what the service keeps (resources with their versions for ETags, the
//! subs-to-notify resources, the notification outbox) behind [`PolicyDataStore`]. The SQLite
//! implementation, with the schema, is [`super::sqlite`].

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use nf::NfError;
use serde_json::Value;

use super::etag::Conditions;
use super::ids::{Key, Kind};
use super::subs_to_notify::{SubsIndex, Subscription};
use crate::StoreFuture;

/// One stored resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub version: i64,
    pub json: Vec<u8>,
}

/// The answer to a read of one resource.
#[derive(Debug)]
pub enum Found {
    Row(Row),
    /// The UE (or, for the other kinds, nothing at all) has no such resource.
    NoData,
    /// The UE has no policy data at all.
    NoUser,
}

/// Why a write was refused; nothing was changed.
#[derive(Debug)]
pub enum Refusal {
    NoUser,
    NoData,
    /// The precondition does not hold; the resource's current ETag, if it exists.
    Precondition(Option<String>),
    /// The edit refused the change (the resulting document is not valid, a patch could not
    /// apply) or failed.
    Edit(NfError),
}

/// What a write of one resource did.
#[derive(Debug)]
pub struct Written {
    /// The resource existed before.
    pub existed: bool,
    /// Its version now; `None` when deleted.
    pub version: Option<i64>,
    /// Its document now (as stored), when it exists.
    pub json: Option<Bytes>,
    /// Notifications recorded for subscribers.
    pub notified: usize,
}

/// What a write of a UE's whole policy data did.
#[derive(Debug)]
pub struct UeWritten {
    pub existed: bool,
    /// The composite ETag now; `None` when no data is left.
    pub etag: Option<String>,
    /// The parts now.
    pub parts: BTreeMap<String, Vec<u8>>,
    pub notified: usize,
}

/// One undelivered notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxRow {
    pub seq: i64,
    pub subs_id: String,
    /// One PolicyDataChangeNotification.
    pub item: Vec<u8>,
}

/// A stored subscription: its id, expiry (unix ms) and PolicyDataSubscription as received.
pub type StoredSubscription = (String, Option<i64>, Vec<u8>);

/// The edit of one resource in [`PolicyDataStore::write_one`]: the new document from the
/// current one (`None`: absent / remove it), or why not (the answer refusing the change, or a
/// fault).
pub type EditOne = Box<dyn FnOnce(Option<&[u8]>) -> Result<Option<Bytes>, NfError> + Send>;

/// The edit of a UE's whole policy data in [`PolicyDataStore::write_ue`]: the desired parts
/// from the current ones (an empty map removes the UE's policy data).
pub type EditUe =
    Box<dyn FnOnce(&BTreeMap<String, &[u8]>) -> Result<BTreeMap<String, Vec<u8>>, NfError> + Send>;

/// The policy data service's persistence.
///
/// Each write is atomic with what it implies: the precondition check, the change, and one outbox
/// row per subscription of `subs` that must hear of it (recorded by [`super::notify::record`]),
/// so a notification exists exactly when its change was committed and a refused write changes
/// nothing. The subscription index changes inside the same job as the subscription rows, so the
/// index and the table see creations, replacements and deletions in one order; should the job
/// then fail to commit, the index change is undone.
pub trait PolicyDataStore: Send + Sync + 'static {
    /// Reads one resource (one primary-key lookup; a second, on a miss, tells an unknown UE from
    /// a known one without this resource).
    fn get(&self, key: Key) -> StoreFuture<'_, Found>;
    /// Every resource of a UE, by part.
    fn get_ue(&self, ue_id: String) -> StoreFuture<'_, Vec<(String, Row)>>;
    /// The resources of a kind (the BDT data collection), by id; only `ids` when given.
    fn get_kind(&self, kind: Kind, ids: Option<Vec<String>>)
        -> StoreFuture<'_, Vec<(String, Row)>>;
    /// Writes one resource in one job: reads it, checks existence (`must_exist`) and the
    /// preconditions, computes the new document with `edit`, stores it and records the
    /// notifications.
    fn write_one(
        &self,
        subs: Arc<SubsIndex>,
        key: Key,
        cond: Conditions,
        must_exist: bool,
        edit: EditOne,
    ) -> StoreFuture<'_, Result<Written, Refusal>>;
    /// Writes a UE's whole policy data in one job; the preconditions apply to the composite ETag
    /// of the UE's parts.
    fn write_ue(
        &self,
        subs: Arc<SubsIndex>,
        ue_id: String,
        cond: Conditions,
        must_exist: bool,
        edit: EditUe,
    ) -> StoreFuture<'_, Result<UeWritten, Refusal>>;
    /// Bulk load in one transaction: each `(ueId, profile)` (the provisioning API's
    /// PolicyDataProfile) replaces that UE's policy data. Returns how many UEs had no policy data
    /// before, and the rows for the caller to free. Every profile is checked; a bad one fails the
    /// call (`InvalidArgument` naming its index and ueId) and nothing of the batch is written.
    /// Subscribers are not notified: this is for loading, not for live changes.
    fn put_profiles(
        &self,
        profiles: Vec<(String, Value)>,
    ) -> StoreFuture<'_, (usize, Vec<(String, Value)>)>;
    /// Stores and indexes a new subscription, unless `max` are held (`false`).
    fn create_subscription(
        &self,
        subs: Arc<SubsIndex>,
        sub: Subscription,
        max: usize,
    ) -> StoreFuture<'_, bool>;
    /// Replaces a stored subscription; `false` when there is none (never was, or deleted
    /// meanwhile).
    fn replace_subscription(
        &self,
        subs: Arc<SubsIndex>,
        sub: Subscription,
    ) -> StoreFuture<'_, bool>;
    /// Removes subscriptions (from `subs` too, when given); returns how many were stored. Their
    /// undelivered notifications stay in the outbox until the delivery task reaches them and,
    /// finding no subscription, deletes them unsent: a subscription id is never reused (a UUID),
    /// so nothing can claim them.
    fn delete_subscriptions(
        &self,
        subs: Option<Arc<SubsIndex>>,
        ids: Vec<String>,
    ) -> StoreFuture<'_, usize>;
    /// Every stored subscription: (id, expiry, PolicyDataSubscription).
    fn load_subscriptions(&self) -> StoreFuture<'_, Vec<StoredSubscription>>;
    /// Bulk load in one transaction of checked subscriptions (each replaces the one of its id),
    /// not indexed in memory: a UDR started afterwards loads them like its own.
    fn put_subscriptions(&self, subs: Vec<Subscription>) -> StoreFuture<'_, usize>;
    /// The undelivered notifications after `after_seq`, oldest first, at most `limit`.
    fn read_outbox(&self, after_seq: i64, limit: usize) -> StoreFuture<'_, Vec<OutboxRow>>;
    /// Removes delivered (or given up) notifications.
    fn delete_outbox(&self, seqs: Vec<i64>) -> StoreFuture<'_, ()>;
    /// Undelivered notifications held (for tests and the operator).
    fn outbox_len(&self) -> StoreFuture<'_, u64>;
}
