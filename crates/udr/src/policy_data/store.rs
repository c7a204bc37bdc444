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

/// What storing a resource's new document (`None`: none) over its stored row does to the row;
/// both store backends run the statement it names ([`row_write`]).
#[derive(Debug, PartialEq, Eq)]
pub enum RowWrite<'a> {
    /// Absent and staying so, or the same document: nothing to write, nobody to notify; the
    /// version it keeps.
    Unchanged(Option<i64>),
    Delete,
    /// The row's new version and document.
    Update(i64, &'a [u8]),
    Insert(i64, &'a [u8]),
}

impl RowWrite<'_> {
    /// The resource's version after the write; `None` when it is absent.
    pub fn version(&self) -> Option<i64> {
        match self {
            RowWrite::Unchanged(v) => *v,
            RowWrite::Delete => None,
            RowWrite::Update(v, _) | RowWrite::Insert(v, _) => Some(*v),
        }
    }
}

/// The write that takes a resource from `old` to `new`, drawing the new version (an ETag)
/// when the document changes.
pub fn row_write<'a>(old: Option<&Row>, new: Option<&'a [u8]>) -> RowWrite<'a> {
    match (old, new) {
        (None, None) => RowWrite::Unchanged(None),
        (Some(o), Some(n)) if o.json == n => RowWrite::Unchanged(Some(o.version)),
        (Some(_), None) => RowWrite::Delete,
        (Some(_), Some(n)) => RowWrite::Update(super::etag::next_version(), n),
        (None, Some(n)) => RowWrite::Insert(super::etag::next_version(), n),
    }
}

/// The preconditions of a write of one resource against its stored row: refused with the
/// resource's current ETag when they do not hold.
pub fn check_preconditions(cond: &Conditions, old: Option<&Row>) -> Result<(), Refusal> {
    let current = old.map(|o| super::etag::etag(o.version));
    match cond.write_allowed(current.as_deref()) {
        true => Ok(()),
        false => Err(Refusal::Precondition(current)),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_changes_the_row_only_when_the_document_changes() {
        let old = Row { version: 7, json: b"{\"a\":1}".to_vec() };
        assert_eq!(row_write(None, None), RowWrite::Unchanged(None));
        assert_eq!(row_write(Some(&old), Some(b"{\"a\":1}")), RowWrite::Unchanged(Some(7)));
        assert_eq!(row_write(Some(&old), None), RowWrite::Delete);
        assert_eq!(row_write(Some(&old), None).version(), None);
        match (row_write(Some(&old), Some(b"{\"a\":2}")), row_write(None, Some(b"{}"))) {
            (RowWrite::Update(u, b"{\"a\":2}"), RowWrite::Insert(i, b"{}")) => {
                // Fresh versions: a new ETag for each change.
                assert!(u != 7 && i != u);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn preconditions_are_checked_against_the_stored_version() {
        let old = Row { version: 7, json: Vec::new() };
        let tag = crate::policy_data::etag::etag(7);
        let any = Conditions::default();
        assert!(check_preconditions(&any, Some(&old)).is_ok());
        let other =
            Conditions { if_match: Some(vec!["\"other\"".into()]), ..Conditions::default() };
        match check_preconditions(&other, Some(&old)) {
            Err(Refusal::Precondition(Some(t))) => assert_eq!(t, tag),
            r => panic!("{r:?}"),
        }
        assert!(matches!(check_preconditions(&other, None), Err(Refusal::Precondition(None))));
    }
}
