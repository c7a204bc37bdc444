//! The PCF's persistence, behind its own trait: [`PcfStore`] is everything the handlers ask of
//! the store. No signature names an engine: [`sqlite`] and [`mysql`] (MariaDB / Galera) implement
//! it, and [`PolicyVersionStore`], with the same tables and guarantees; the PCF opens the one
//! `[store] backend` names ([`open`]).
//!
//! An SM policy association is stored with the context the SMF gave (create, then each update
//! merged in), the decision in force and the policy version that made it. A subscriber's state
//! variables (SSV) are one JSON object per SUPI, written in the same transaction as the
//! association whose decision set them, so an acknowledged decision never loses its state.

pub mod mysql;
pub mod policy_version;
pub mod resident;
pub mod sqlite;

use std::future::Future;
use std::pin::Pin;

pub use mysql::MysqlPcfStore;
pub use policy_version::{Activation, NewVersion, PolicyVersion, PolicyVersionStore};
pub use resident::Resident;
pub use sqlite::SqlitePcfStore;

use std::sync::Arc;

/// The PCF's durable store on the backend the NF skeleton opened, with its migrations applied:
/// its state and its policy versions (one store underneath, two traits).
pub async fn open(
    db: &store::AnyStore,
) -> store::Result<(Arc<dyn PcfStore>, Arc<dyn PolicyVersionStore>)> {
    Ok(match db {
        store::AnyStore::Sqlite(db) => {
            let s = SqlitePcfStore::on(db.clone()).await?;
            (Arc::new(s.clone()), Arc::new(s))
        }
        store::AnyStore::Mysql(db) => {
            let s = MysqlPcfStore::on(db.clone()).await?;
            (Arc::new(s.clone()), Arc::new(s))
        }
    })
}

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

/// An SM association's context and decision parsed, as a Gx CCR last wrote them: kept by
/// [`Resident`] beside their bytes, so the session's next CCR-U does not parse them again
/// (docs/BENCHMARKS.md, s24: parsing and serializing JSON was a fifth of the PCRF's CPU).
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedSm {
    pub context: serde_json::Value,
    pub decision: serde_json::Value,
}

/// The kinds of policy association kept in the generic association table (SM associations
/// have their own, with the binding and the UDR subscription).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
    /// Its subscription at the UDR to the policy data it decides with (AM: the subscriber's
    /// AmPolicyData), removed with it.
    pub udr_subscription: Option<String>,
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

/// A subscriber's Sy session with an OCS (TS 29.219), kept while it has sessions that read
/// their spending limit statuses over Sy.
#[derive(Debug, Clone, PartialEq)]
pub struct SySession {
    pub supi: String,
    /// The Sy Session-Id (the PCF's, made at the initial SLR).
    pub session_id: String,
    /// The OCS that answered the initial SLR: where the session's later requests go.
    pub ocs_host: String,
    pub ocs_realm: String,
    /// The policy counters last asked for (SLR's Policy-Counter-Identifiers).
    pub counters: Vec<String>,
    /// Policy-Counter-Identifier → Policy-Counter-Status, as the OCS last said.
    pub statuses: serde_json::Map<String, serde_json::Value>,
}

/// A stored application session (Npcf_PolicyAuthorization, TS 29.514; Rx later): bound to one
/// SM policy association, whose decision carries the PCC rules made for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppSession {
    pub id: String,
    /// The SM policy association it is bound to.
    pub sm_policy_id: String,
    pub supi: String,
    /// The AF's request as the PCF keeps it (for N5 the AppSessionContextReqData, PATCHes
    /// merged in).
    pub context: Vec<u8>,
    /// The PCC rules and QoS decisions made for it: `{"pccRules": {..}, "qosDecs": {..}}`.
    pub rules: Vec<u8>,
    pub updated_ms: i64,
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

/// A subscriber's usage accumulated on one monitoring key (Gx Used-Service-Unit, N7
/// accuUsageReports, added up over all its sessions, 4G and 5G): the totals so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UsageTotals {
    /// Octets, both directions (CC-Total-Octets, `volUsage`).
    pub total: u64,
    /// Octets from the UE (CC-Input-Octets, `volUsageUplink`).
    pub uplink: u64,
    /// Octets to the UE (CC-Output-Octets, `volUsageDownlink`).
    pub downlink: u64,
    /// Seconds (CC-Time, `timeUsage`).
    pub time: u64,
}

/// One subscriber's totals on one monitoring key, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageRow {
    pub supi: String,
    pub key: String,
    pub totals: UsageTotals,
    pub updated_ms: i64,
}

/// A subscriber's state variables to merge (a value of `null` removes one).
pub type SsvUpdates = serde_json::Map<String, serde_json::Value>;

/// Everything the store holds, read at start by [`Resident`].
#[derive(Debug, Default)]
pub struct Snapshot {
    pub sm: Vec<SmPolicy>,
    pub associations: Vec<Association>,
    /// Every subscriber with state variables or a policy data subscription.
    pub subscribers: Vec<(String, Subscriber)>,
    pub apps: Vec<AppSession>,
    pub ue_deliveries: Vec<UeDelivery>,
}

/// Merges `updates` into `ssv` as the store does: a `null` removes the variable.
pub fn merge_ssv(ssv: &mut serde_json::Map<String, serde_json::Value>, updates: SsvUpdates) {
    for (k, v) in updates {
        if v.is_null() {
            ssv.remove(&k);
        } else {
            ssv.insert(k, v);
        }
    }
}

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

    /// The subscriber of an SM association: what an update or delete holds before reading it.
    fn supi_of_sm<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<String>> {
        Box::pin(async move { Ok(self.get_sm(id).await?.map(|p| p.supi)) })
    }

    /// An association and what is kept of its subscriber, from one snapshot.
    fn get_sm_with_subscriber(&self, id: &str) -> StoreFuture<'_, Option<(SmPolicy, Subscriber)>>;

    /// The parsed context and decision of SM association `id` that [`PcfStore::keep_parsed_sm`]
    /// kept, taken out (the caller owns them); None when none is kept: the caller parses the
    /// bytes. A store without memory keeps none.
    fn take_parsed_sm(&self, id: &str) -> Option<ParsedSm> {
        let _ = id;
        None
    }

    /// Keeps `parsed` for SM association `id` if `context` and `decision`, the bytes it was
    /// made from or written as, are still the association's; any later change of the
    /// association drops it.
    fn keep_parsed_sm(&self, id: &str, context: &[u8], decision: &[u8], parsed: ParsedSm) {
        let _ = (id, context, decision, parsed);
    }

    /// Replaces an association's context, decision and binding and merges `ssv`; false when
    /// the association no longer exists (nothing changed).
    fn update_sm(&self, policy: SmPolicy, ssv: SsvUpdates) -> StoreFuture<'_, bool>;

    /// Records that an association was updated at `updated_ms` with nothing else changed (the
    /// session audit's clock); false when it no longer exists. [`Resident`] keeps it in memory
    /// only: it is written with the association's next change, and a restart that loses it
    /// only makes the audit ask the SMF sooner.
    fn touch_sm(&self, id: &str, updated_ms: i64) -> StoreFuture<'_, bool>;

    /// Removes an association (and, with the subscriber's last, its policy data subscription
    /// row); None when there was none.
    fn delete_sm(&self, id: &str) -> StoreFuture<'_, Option<Deleted>>;

    /// [`PcfStore::delete_sm`] (with `usage` non-empty, [`PcfStore::delete_sm_with_usage`]) by
    /// a caller that knows whether `id` is its subscriber's `last` SM association ([`Resident`]
    /// holds them all, its caller holding the subscriber): the durable store then keeps no
    /// index of associations by subscriber to find out.
    fn delete_sm_known(
        &self,
        id: &str,
        last: bool,
        usage: Vec<UsageRow>,
    ) -> StoreFuture<'_, Option<Deleted>> {
        let _ = last;
        match usage.is_empty() {
            true => self.delete_sm(id),
            false => self.delete_sm_with_usage(id, usage),
        }
    }

    /// Stores a new AM or UE association and merges `ssv`, in one commit.
    fn create_assoc(&self, a: Association, ssv: SsvUpdates) -> StoreFuture<'_, ()>;

    fn get_assoc(&self, kind: Kind, id: &str) -> StoreFuture<'_, Option<Association>>;

    /// The subscriber's associations of `kind` (to decide again when its data changes).
    fn assoc_of(&self, kind: Kind, supi: &str) -> StoreFuture<'_, Vec<Association>>;

    /// Replaces an association's context and decision and merges `ssv`; false when it no
    /// longer exists.
    fn update_assoc(&self, a: Association, ssv: SsvUpdates) -> StoreFuture<'_, bool>;

    /// Removes an association; what it was, None when there was none.
    fn delete_assoc(&self, kind: Kind, id: &str) -> StoreFuture<'_, Option<Association>>;

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

    /// Everything stored, from one snapshot (read once at start).
    fn snapshot(&self) -> StoreFuture<'_, Snapshot>;

    /// At most `limit` SM associations last written before `before_ms`, oldest first (the
    /// session audit's candidates).
    fn stale_sm(&self, before_ms: i64, limit: usize) -> StoreFuture<'_, Vec<SmPolicy>>;

    /// The same for AM and UE associations.
    fn stale_assoc(&self, before_ms: i64, limit: usize) -> StoreFuture<'_, Vec<Association>>;
    /// The SM policy association of a UE address: its IPv4 address, or an IPv6 address within
    /// its prefix; with `dnn`, only an association of that DNN. The newest when several match.
    fn sm_of_ue(
        &self,
        ipv4: Option<&str>,
        ipv6: Option<&str>,
        dnn: Option<&str>,
    ) -> StoreFuture<'_, Option<SmPolicy>>;

    /// Stores a new application session and its association's decision with the session's
    /// rules in it (`sm`: context kept, decision replaced), in one commit; false when the
    /// association no longer exists (nothing stored).
    fn create_app(&self, app: AppSession, sm: SmPolicy) -> StoreFuture<'_, bool>;

    /// Replaces an application session and its association's decision, in one commit; false
    /// when either no longer exists.
    fn update_app(&self, app: AppSession, sm: SmPolicy) -> StoreFuture<'_, bool>;

    /// Removes an application session and, with `sm`, replaces its association's decision (the
    /// session's rules out of it), in one commit; None when there was none.
    fn delete_app(&self, id: &str, sm: Option<SmPolicy>) -> StoreFuture<'_, Option<AppSession>>;

    fn get_app(&self, id: &str) -> StoreFuture<'_, Option<AppSession>>;

    /// The application sessions bound to an SM policy association.
    fn apps_of(&self, sm_policy_id: &str) -> StoreFuture<'_, Vec<AppSession>>;

    /// Writes the subscriber's Sy session (replacing the one it had).
    fn put_sy_session(&self, s: SySession) -> StoreFuture<'_, ()>;

    /// Forgets the subscriber's Sy session `session_id`; false when it has none of that id.
    fn drop_sy_session(&self, supi: &str, session_id: &str) -> StoreFuture<'_, bool>;

    /// Every Sy session kept (read at start: a restart decides with the same statuses and
    /// takes the OCS's notifications).
    fn sy_sessions(&self) -> StoreFuture<'_, Vec<SySession>>;

    /// Every subscriber's accumulated usage (read once at start: the usage monitoring keeps
    /// it in memory, `crate::usage`).
    fn usage_all(&self) -> StoreFuture<'_, Vec<UsageRow>>;

    /// [`PcfStore::update_sm`] with the subscriber's new usage totals (the report the update
    /// carried, added), in one commit: a report is acknowledged only with the decision it
    /// made, so a retried report after a failed commit is not counted twice. False when the
    /// association no longer exists (nothing written).
    fn update_sm_with_usage(
        &self,
        policy: SmPolicy,
        ssv: SsvUpdates,
        usage: Vec<UsageRow>,
    ) -> StoreFuture<'_, bool>;

    /// [`PcfStore::delete_sm`] with the new usage totals of the session's final report, in one
    /// commit; None when there was no association (nothing written).
    fn delete_sm_with_usage(
        &self,
        id: &str,
        usage: Vec<UsageRow>,
    ) -> StoreFuture<'_, Option<Deleted>>;
}

/// A UE's address as an SM association's context holds it (`ipv4Address`,
/// `ipv6AddressPrefix`, `dnn`), or as an application session asks for it (`ueIpv4`, `ueIpv6`,
/// `dnn`): what binds the two (TS 29.513 §8.2).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UeAddress {
    pub ipv4: Option<u32>,
    /// The prefix's network bits and length (a request's address has length 128).
    pub ipv6: Option<(u128, u8)>,
    pub dnn: Option<Box<str>>,
}

#[derive(serde::Deserialize)]
struct ContextAddress<'a> {
    #[serde(rename = "ipv4Address", borrow, default)]
    ipv4: Option<std::borrow::Cow<'a, str>>,
    #[serde(rename = "ipv6AddressPrefix", borrow, default)]
    ipv6: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    dnn: Option<std::borrow::Cow<'a, str>>,
}

fn mask(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len.min(128)))
    }
}

impl UeAddress {
    /// The address in an SmPolicyContextData (JSON bytes); None when it has none. Only the
    /// three attributes are read, nothing else of the context is built.
    pub fn of_context(context: &[u8]) -> Option<UeAddress> {
        Self::parse_context(context, None).flatten()
    }

    /// As [`UeAddress::of_context`], but None when it is `same` (nothing built: an SM update
    /// that keeps the UE's address allocates nothing here).
    pub fn changed_in(context: &[u8], same: Option<&UeAddress>) -> Option<Option<UeAddress>> {
        Self::parse_context(context, Some(same))
    }

    fn parse_context(
        context: &[u8],
        same: Option<Option<&UeAddress>>,
    ) -> Option<Option<UeAddress>> {
        let Ok(c) = serde_json::from_slice::<ContextAddress<'_>>(context) else {
            return match same {
                Some(None) => None,
                _ => Some(None),
            };
        };
        let ipv4 = c.ipv4.as_deref().and_then(nf::common_data::parse_ipv4).map(u32::from);
        let ipv6 = c
            .ipv6
            .as_deref()
            .and_then(nf::common_data::parse_ipv6_prefix)
            .map(|(a, len)| (u128::from(a) & mask(len), len));
        let found = ipv4.is_some() || ipv6.is_some();
        match same {
            Some(None) if !found => return None,
            Some(Some(old))
                if found
                    && old.ipv4 == ipv4
                    && old.ipv6 == ipv6
                    && match (&old.dnn, &c.dnn) {
                        (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
                        (None, None) => true,
                        _ => false,
                    } =>
            {
                return None
            }
            _ => {}
        }
        if !found {
            return Some(None);
        }
        Some(Some(UeAddress { ipv4, ipv6, dnn: c.dnn.map(|d| d.to_ascii_lowercase().into()) }))
    }

    /// What an application session asks for: the UE's IPv4 or IPv6 address, and the DNN.
    pub fn of_request(
        ipv4: Option<&str>,
        ipv6: Option<&str>,
        dnn: Option<&str>,
    ) -> Option<UeAddress> {
        let ipv4 = ipv4.and_then(|a| a.parse::<std::net::Ipv4Addr>().ok()).map(u32::from);
        let ipv6 = ipv6
            .and_then(|a| a.split('/').next()?.parse::<std::net::Ipv6Addr>().ok())
            .map(|a| (u128::from(a), 128));
        if ipv4.is_none() && ipv6.is_none() {
            return None;
        }
        Some(UeAddress { ipv4, ipv6, dnn: dnn.map(|d| d.to_ascii_lowercase().into()) })
    }

    /// Whether a session with the addresses of `context` serves this request: the same IPv4
    /// address, or the request's IPv6 address within the context's prefix; and the DNN, when
    /// the request names one.
    pub fn matches(&self, context: &UeAddress) -> bool {
        let v4 = matches!((self.ipv4, context.ipv4), (Some(a), Some(b)) if a == b);
        let v6 = matches!((self.ipv6, context.ipv6),
            (Some((a, _)), Some((net, len))) if a & mask(len) == net);
        (v4 || v6)
            && match (&self.dnn, &context.dnn) {
                (Some(want), Some(have)) => want == have,
                (Some(_), None) => false,
                (None, _) => true,
            }
    }
}

/// A new association's id: time-ordered (UUID v7), so inserts land at the end of the index.
pub fn new_policy_id() -> String {
    uuid::Uuid::now_v7().to_string()
}
