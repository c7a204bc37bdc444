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
}

/// What was delivered to a UE of its UE policy association's URSP (TS 24.501 Annex D) and
/// how it went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UeDelivery {
    pub assoc_id: String,
    /// The PTI of the last MANAGE UE POLICY COMMAND (1..=254; the next one is allocated after it).
    pub pti: u8,
    /// Digest of the URSP that command carried (empty: the section was deleted), so an
    /// unchanged decision is not sent again.
    pub ursp_digest: String,
    /// The policy version that decided it.
    pub policy_version: String,
    /// `pending` (being sent), `initiated` (the AMF took it), `complete`, `rejected`,
    /// `transfer_failed` or `unreachable`.
    pub outcome: String,
    /// The N1 message subscription at the AMF (N1N2MessageSubscribe), to remove at delete.
    pub n1_subscription: Option<String>,
    pub updated_ms: i64,
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

    /// The URSP delivery record of a UE policy association.
    fn ue_delivery(&self, assoc_id: &str) -> StoreFuture<'_, Option<UeDelivery>>;

    /// Writes a UE policy association's delivery record (replacing the one before).
    fn put_ue_delivery(&self, d: UeDelivery) -> StoreFuture<'_, ()>;

    /// Sets the outcome of the command with `pti`, when it is still the last one sent (and,
    /// with `only_from`, when its outcome is that one: a late AMF answer does not overwrite the
    /// UE's); false when nothing changed.
    fn ue_delivery_outcome(
        &self,
        assoc_id: &str,
        pti: u8,
        outcome: &'static str,
        only_from: Option<&'static str>,
    ) -> StoreFuture<'_, bool>;

    /// Removes a delivery record (its association was deleted); what it was.
    fn delete_ue_delivery(&self, assoc_id: &str) -> StoreFuture<'_, Option<UeDelivery>>;

    /// Associations stored (for the log line at start and for tests).
    fn count_sm(&self) -> StoreFuture<'_, u64>;
}

/// A new association's id: time-ordered (UUID v7), so inserts land at the end of the index.
pub fn new_policy_id() -> String {
    uuid::Uuid::now_v7().to_string()
}
