//! The PCF's persistence, behind its own trait: [`PcfStore`] is everything the handlers ask of
//! the store. No signature names an engine: [`sqlite`] is the one implementation today, a
//! MySQL-protocol one goes next to it (issue #25).
//!
//! An SM policy association is stored with the context the SMF gave (create, then each update
//! merged in), the decision in force and the policy version that made it. A subscriber's state
//! variables (SSV) are one JSON object per SUPI, written in the same transaction as the
//! association whose decision set them, so an acknowledged decision never loses its state.

pub mod sqlite;

use std::future::Future;
use std::pin::Pin;

pub use sqlite::SqlitePcfStore;

/// What a store call returns.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = store::Result<T>> + Send + 'a>>;

/// A stored SM policy association.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmPolicy {
    pub id: String,
    pub supi: String,
    /// SmPolicyContextData, with the updates merged in.
    pub context: Vec<u8>,
    /// The SmPolicyDecision in force.
    pub decision: Vec<u8>,
    /// The policy project version that made the decision.
    pub policy_version: String,
    pub updated_ms: i64,
    /// The PCF binding registered at the BSF for this association (its URI), if any.
    pub binding: Option<String>,
}

/// The kinds of policy association kept in the generic association table (SM associations
/// have their own, with the binding and the UDR subscription).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Npcf_AMPolicyControl (TS 29.507).
    Am,
    /// Npcf_UEPolicyControl (TS 29.525).
    Ue,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Am => "AM",
            Kind::Ue => "UE",
        }
    }
}

/// A stored AM or UE policy association: the request the AMF sent (updates merged in), the
/// decision in force and the policy version that made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Association {
    pub kind: Kind,
    pub id: String,
    pub supi: String,
    pub context: Vec<u8>,
    pub decision: Vec<u8>,
    pub policy_version: String,
    pub updated_ms: i64,
}

/// What the PCF keeps of a subscriber besides its associations.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Subscriber {
    pub ssv: serde_json::Map<String, serde_json::Value>,
    pub udr_subscription: Option<String>,
}

/// What a delete removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deleted {
    pub supi: String,
    /// The association's PCF binding at the BSF, to deregister.
    pub binding: Option<String>,
    /// The subscriber's policy data subscription at the UDR, when this was the subscriber's
    /// last association (its row is gone with it): to unsubscribe.
    pub udr_subscription: Option<String>,
    /// Likewise its spending limit subscription at the CHF (N28).
    pub chf_subscription: Option<String>,
}

/// A subscriber's spending limit subscription at the CHF (TS 29.594), kept with the subscriber
/// while it has SM associations.
#[derive(Debug, Clone, PartialEq)]
pub struct ChfSubscription {
    pub supi: String,
    /// The individual subscription's URI (the CHF's `Location`).
    pub uri: String,
    /// policyCounterId → currentStatus, as the CHF last said.
    pub statuses: serde_json::Map<String, serde_json::Value>,
}

/// A subscriber's state variables to merge (a value of `null` removes one).
pub type SsvUpdates = serde_json::Map<String, serde_json::Value>;

pub trait PcfStore: Send + Sync {
    /// What the PCF keeps of `supi`: its state variables (empty when it has none) and its
    /// policy data subscription, read together from one snapshot.
    fn subscriber(&self, supi: &str) -> StoreFuture<'_, Subscriber>;

    /// Stores a new association and merges `ssv` into its subscriber's state, in one commit;
    /// with `udr_subscription`, records the subscriber's policy data subscription too.
    fn create_sm(
        &self,
        policy: SmPolicy,
        ssv: SsvUpdates,
        udr_subscription: Option<String>,
    ) -> StoreFuture<'_, ()>;

    /// [`PcfStore::create_sm`] with the subscriber's new spending limit subscription at the
    /// CHF, recorded in the same commit.
    fn create_sm_with_chf(
        &self,
        policy: SmPolicy,
        ssv: SsvUpdates,
        udr_subscription: Option<String>,
        chf: ChfSubscription,
    ) -> StoreFuture<'_, ()>;

    /// Replaces the statuses of the subscriber's CHF subscription; false when it has none.
    fn set_chf_statuses(
        &self,
        supi: &str,
        statuses: serde_json::Map<String, serde_json::Value>,
    ) -> StoreFuture<'_, bool>;

    /// Forgets the subscriber's CHF subscription at `uri` (the CHF terminated it); false when
    /// the subscriber has none there.
    fn drop_chf_subscription(&self, supi: &str, uri: &str) -> StoreFuture<'_, bool>;

    /// Every CHF subscription kept (read at start, so a restart decides with the same statuses).
    fn chf_subscriptions(&self) -> StoreFuture<'_, Vec<ChfSubscription>>;

    /// Every SM policy association of the subscriber (to decide again when its data changes).
    fn sm_of(&self, supi: &str) -> StoreFuture<'_, Vec<SmPolicy>>;

    fn get_sm(&self, id: &str) -> StoreFuture<'_, Option<SmPolicy>>;

    /// An association and what is kept of its subscriber, from one snapshot.
    fn get_sm_with_subscriber(&self, id: &str) -> StoreFuture<'_, Option<(SmPolicy, Subscriber)>>;

    /// Replaces an association's context and decision and merges `ssv` (its binding stays);
    /// false when the association no longer exists (nothing changed).
    fn update_sm(&self, policy: SmPolicy, ssv: SsvUpdates) -> StoreFuture<'_, bool>;

    /// Removes an association (and, with the subscriber's last, its policy data subscription
    /// row); None when there was none.
    fn delete_sm(&self, id: &str) -> StoreFuture<'_, Option<Deleted>>;

    /// Stores a new AM or UE association and merges `ssv`, in one commit.
    fn create_assoc(&self, a: Association, ssv: SsvUpdates) -> StoreFuture<'_, ()>;

    fn get_assoc(&self, kind: Kind, id: &str) -> StoreFuture<'_, Option<Association>>;

    /// Replaces an association's context and decision and merges `ssv`; false when it no
    /// longer exists.
    fn update_assoc(&self, a: Association, ssv: SsvUpdates) -> StoreFuture<'_, bool>;

    /// Removes an association; false when there was none.
    fn delete_assoc(&self, kind: Kind, id: &str) -> StoreFuture<'_, bool>;

    /// Associations stored (for the log line at start and for tests).
    fn count_sm(&self) -> StoreFuture<'_, u64>;
}

/// A new association's id: time-ordered (UUID v7), so inserts land at the end of the index.
pub fn new_policy_id() -> String {
    uuid::Uuid::now_v7().to_string()
}
