//! The PCF's state kept in memory in front of its durable store: [`Resident`] answers every
//! read from memory and writes through, so an acknowledged write is still a committed one.
//!
//! Why: an Npcf_SMPolicyControl_Update read the association twice and the subscriber once
//! from the store (three hops to a reader thread, each read emptying that reader's page cache
//! after the writer's last commit) before its one write. At the 3.2.4 mix's 74 updates per
//! session those reads were over a quarter of the PCF's CPU (docs/BENCHMARKS.md, s21).
//!
//! The memory is the whole store, loaded once at start ([`PcfStore::snapshot`]): every
//! association and every subscriber with state variables or a policy data subscription. A
//! subscriber absent from memory has no state, so no read ever goes to the store.
//!
//! Ordering: memory changes after the store's commit has returned, under a short lock never
//! held across an await. The PCF's collision control serializes the writes of one subscriber,
//! so the order of their commits is the order of their memory changes. An update replaces an
//! association in memory only if it is still there, so an update racing a delete of the same
//! association cannot bring it back.
//!
//! One instance owns what it holds, unless several share one MySQL database
//! (`[pcf] shared_database`): then `crate::coherence` installs here what the database holds
//! after another instance's change (the `apply_*` methods), under the subscriber's collision
//! hold, so such an install never interleaves with this instance's own write of the
//! subscriber.

use std::sync::{Arc, Mutex, MutexGuard};

use rustc_hash::FxHashMap;
use serde_json::{Map, Value};

use super::{
    merge_ssv, AppSession, Association, ChfSubscription, Deleted, Kind, ParsedSm, PcfStore,
    SmPolicy, Snapshot, SsvUpdates, StoreFuture, Subscriber, SySession, UeAddress, UeDelivery,
    UsageRow,
};

/// At most this many SM associations have their parsed form kept ([`ParsedSm`], a few KB
/// each beside their bytes): past it, a CCR-U of the others parses the bytes as before.
const PARSED_MAX: usize = 65_536;

#[derive(Default)]
struct State {
    sm: FxHashMap<String, SmPolicy>,
    /// The parsed context and decision of SM associations, while they are the bytes in `sm`.
    parsed: FxHashMap<String, ParsedSm>,
    /// SM association ids per subscriber.
    sm_of: FxHashMap<String, Vec<String>>,
    assoc: FxHashMap<(Kind, String), Association>,
    /// AM and UE association ids per subscriber.
    assoc_of: FxHashMap<String, Vec<(Kind, String)>>,
    subscribers: FxHashMap<String, Kept>,
    /// SM associations by UE address, for binding application sessions (N5, Rx).
    ues: UeIndex,
    apps: FxHashMap<String, AppSession>,
    /// Application session ids per SM association.
    apps_of: FxHashMap<String, Vec<String>>,
    /// URSP delivery records by UE policy association.
    deliveries: FxHashMap<String, UeDelivery>,
}

/// SM association ids by the UE address of their context: IPv4 addresses, and IPv6 prefixes
/// by their first 64 bits (a UE's prefix is a /64, TS 23.501 §5.8.2.2.3); a shorter prefix is
/// kept aside and looked through.
#[derive(Default)]
struct UeIndex {
    of: FxHashMap<String, UeAddress>,
    v4: FxHashMap<u32, Vec<String>>,
    v6: FxHashMap<u64, Vec<String>>,
    v6_short: Vec<String>,
}

fn unlist<K: std::hash::Hash + Eq>(m: &mut FxHashMap<K, Vec<String>>, k: K, id: &str) {
    if let Some(ids) = m.get_mut(&k) {
        ids.retain(|i| i != id);
        if ids.is_empty() {
            m.remove(&k);
        }
    }
}

impl UeIndex {
    fn set(&mut self, id: &str, context: &[u8]) {
        let Some(addr) = UeAddress::changed_in(context, self.of.get(id)) else { return };
        self.remove(id);
        let Some(addr) = addr else { return };
        if let Some(v4) = addr.ipv4 {
            self.v4.entry(v4).or_default().push(id.to_string());
        }
        match addr.ipv6 {
            Some((net, len)) if len >= 64 => {
                self.v6.entry((net >> 64) as u64).or_default().push(id.to_string())
            }
            Some(_) => self.v6_short.push(id.to_string()),
            None => {}
        }
        self.of.insert(id.to_string(), addr);
    }

    fn remove(&mut self, id: &str) {
        let Some(old) = self.of.remove(id) else { return };
        if let Some(v4) = old.ipv4 {
            unlist(&mut self.v4, v4, id);
        }
        match old.ipv6 {
            Some((net, len)) if len >= 64 => unlist(&mut self.v6, (net >> 64) as u64, id),
            Some(_) => self.v6_short.retain(|i| i != id),
            None => {}
        }
    }

    /// The newest matching association (ids are time-ordered).
    fn find(&self, want: &UeAddress) -> Option<&str> {
        let v4 = want.ipv4.and_then(|a| self.v4.get(&a)).into_iter().flatten();
        let v6 =
            want.ipv6.and_then(|(a, _)| self.v6.get(&((a >> 64) as u64))).into_iter().flatten();
        let short = self.v6_short.iter().filter(|_| want.ipv6.is_some());
        v4.chain(v6)
            .chain(short)
            .filter(|id| self.of.get(*id).is_some_and(|a| want.matches(a)))
            .max()
            .map(String::as_str)
    }
}

#[derive(Default)]
struct Kept {
    ssv: Arc<Map<String, Value>>,
    udr_subscription: Option<String>,
}

impl State {
    fn merge(&mut self, supi: &str, updates: SsvUpdates) {
        if updates.is_empty() {
            return;
        }
        let kept = self.subscribers.entry(supi.to_string()).or_default();
        merge_ssv(Arc::make_mut(&mut kept.ssv), updates);
    }

    fn subscriber(&self, supi: &str) -> Subscriber {
        match self.subscribers.get(supi) {
            Some(k) => {
                Subscriber { ssv: (*k.ssv).clone(), udr_subscription: k.udr_subscription.clone() }
            }
            None => Subscriber::default(),
        }
    }

    /// A new association committed, with its subscriber's state updates and new UDR
    /// subscription.
    fn created_sm(&mut self, p: SmPolicy, ssv: SsvUpdates, udr_subscription: Option<String>) {
        if let Some(uri) = udr_subscription {
            self.subscribers.entry(p.supi.clone()).or_default().udr_subscription = Some(uri);
        }
        self.merge(&p.supi, ssv);
        self.insert_sm(p);
    }

    fn insert_assoc(&mut self, a: Association) {
        self.assoc_of.entry(a.supi.clone()).or_default().push((a.kind, a.id.clone()));
        self.assoc.insert((a.kind, a.id.clone()), a);
    }

    fn remove_assoc(&mut self, key: &(Kind, String)) {
        let Some(a) = self.assoc.remove(key) else { return };
        if let Some(keys) = self.assoc_of.get_mut(&a.supi) {
            keys.retain(|k| k != key);
            if keys.is_empty() {
                self.assoc_of.remove(&a.supi);
            }
        }
    }

    fn insert_sm(&mut self, p: SmPolicy) {
        self.parsed.remove(&p.id);
        self.sm_of.entry(p.supi.clone()).or_default().push(p.id.clone());
        self.ues.set(&p.id, &p.context);
        self.sm.insert(p.id.clone(), p);
    }

    fn insert_app(&mut self, a: AppSession) {
        let ids = self.apps_of.entry(a.sm_policy_id.clone()).or_default();
        if !ids.contains(&a.id) {
            ids.push(a.id.clone());
        }
        self.apps.insert(a.id.clone(), a);
    }

    fn remove_app(&mut self, id: &str) -> Option<AppSession> {
        let a = self.apps.remove(id)?;
        unlist(&mut self.apps_of, a.sm_policy_id.clone(), id);
        Some(a)
    }

    /// An association's update committed (only if it is still here: a delete racing the
    /// update took it).
    fn updated_sm(&mut self, policy: SmPolicy, ssv: SsvUpdates) {
        self.merge(&policy.supi, ssv);
        self.parsed.remove(&policy.id);
        if self.sm.contains_key(&policy.id) {
            self.ues.set(&policy.id, &policy.context);
        }
        if let Some(held) = self.sm.get_mut(&policy.id) {
            *held = policy;
        }
    }

    /// Whether SM association `id` is the only one its subscriber has (true when it is not
    /// held: a delete of it then finds nothing).
    fn last_of_subscriber(&self, id: &str) -> bool {
        let Some(p) = self.sm.get(id) else { return true };
        self.sm_of.get(&p.supi).is_none_or(|ids| ids.iter().all(|i| i == id))
    }

    /// An association's delete committed.
    fn deleted_sm(&mut self, id: &str, deleted: Option<&Deleted>) {
        self.ues.remove(id);
        self.parsed.remove(id);
        // Its application sessions went in the same commit.
        for app in self.apps_of.remove(id).unwrap_or_default() {
            self.apps.remove(&app);
        }
        if let Some(p) = self.sm.remove(id) {
            if let Some(ids) = self.sm_of.get_mut(&p.supi) {
                ids.retain(|i| *i != id);
                if ids.is_empty() {
                    self.sm_of.remove(&p.supi);
                }
            }
        }
        if let Some(d) = deleted {
            if d.udr_subscription.is_some() {
                if let Some(k) = self.subscribers.get_mut(&d.supi) {
                    k.udr_subscription = None;
                }
            }
        }
    }

    /// An association's new decision (an application session's rules in or out of it).
    fn put_decision(&mut self, p: SmPolicy) {
        self.parsed.remove(&p.id);
        if let Some(held) = self.sm.get_mut(&p.id) {
            held.decision = p.decision;
            held.policy_version = p.policy_version;
            held.updated_ms = p.updated_ms;
        }
    }
}

/// Memory in front of a [`PcfStore`]: reads from memory, writes through.
pub struct Resident {
    inner: Arc<dyn PcfStore>,
    state: Mutex<State>,
}

impl Resident {
    /// Loads everything `inner` holds.
    pub async fn load(inner: Arc<dyn PcfStore>) -> store::Result<Self> {
        let snap = inner.snapshot().await?;
        let mut state = State::default();
        for p in snap.sm {
            state.insert_sm(p);
        }
        for a in snap.associations {
            state.insert_assoc(a);
        }
        for (supi, s) in snap.subscribers {
            state
                .subscribers
                .insert(supi, Kept { ssv: Arc::new(s.ssv), udr_subscription: s.udr_subscription });
        }
        for a in snap.apps {
            state.insert_app(a);
        }
        for d in snap.ue_deliveries {
            state.deliveries.insert(d.assoc_id.clone(), d);
        }
        Ok(Resident { inner, state: Mutex::new(state) })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Associations of every kind held (for the log line at start).
    pub fn counts(&self) -> (usize, usize) {
        let s = self.state();
        (s.sm.len(), s.assoc.len())
    }

    /// Installs SM association `id` as the database holds it now (None: removed, with its
    /// application sessions).
    pub fn apply_sm(&self, id: &str, now: Option<SmPolicy>) {
        let mut s = self.state();
        match now {
            Some(p) if s.sm.contains_key(id) => {
                s.parsed.remove(id);
                s.ues.set(id, &p.context);
                s.sm.insert(id.to_string(), p);
            }
            Some(p) => s.insert_sm(p),
            None => s.deleted_sm(id, None),
        }
    }

    /// Installs what the database holds of subscriber `supi` now.
    pub fn apply_subscriber(&self, supi: &str, now: Subscriber) {
        let mut s = self.state();
        if now.ssv.is_empty() && now.udr_subscription.is_none() {
            s.subscribers.remove(supi);
        } else {
            let kept = Kept { ssv: Arc::new(now.ssv), udr_subscription: now.udr_subscription };
            s.subscribers.insert(supi.to_string(), kept);
        }
    }

    /// Installs an AM or UE association as the database holds it now (None: removed).
    pub fn apply_assoc(&self, kind: Kind, id: &str, now: Option<Association>) {
        let mut s = self.state();
        s.remove_assoc(&(kind, id.to_string()));
        if let Some(a) = now {
            s.insert_assoc(a);
        }
    }

    /// Installs an application session as the database holds it now (None: removed).
    pub fn apply_app(&self, id: &str, now: Option<AppSession>) {
        let mut s = self.state();
        s.remove_app(id);
        if let Some(a) = now {
            s.insert_app(a);
        }
    }

    /// Installs a URSP delivery record as the database holds it now (None: removed).
    pub fn apply_delivery(&self, assoc_id: &str, now: Option<UeDelivery>) {
        let mut s = self.state();
        match now {
            Some(d) => s.deliveries.insert(assoc_id.to_string(), d),
            None => s.deliveries.remove(assoc_id),
        };
    }

    /// The subscriber of an application session held.
    pub fn supi_of_app(&self, id: &str) -> Option<String> {
        self.state().apps.get(id).map(|a| a.supi.clone())
    }

    /// The subscriber of an AM or UE association held.
    pub fn supi_of_assoc(&self, kind: Kind, id: &str) -> Option<String> {
        self.state().assoc.get(&(kind, id.to_string())).map(|a| a.supi.clone())
    }
}

/// The `limit` oldest of `items` by `at`, oldest first, cloned.
fn oldest<'a, T: Clone + 'a>(
    items: impl Iterator<Item = &'a T>,
    limit: usize,
    at: impl Fn(&T) -> i64,
) -> Vec<T> {
    let mut all: Vec<&T> = items.collect();
    all.sort_unstable_by_key(|t| at(t));
    all.into_iter().take(limit).cloned().collect()
}

fn ready<'a, T: Send + 'a>(v: T) -> StoreFuture<'a, T> {
    Box::pin(std::future::ready(Ok(v)))
}

impl PcfStore for Resident {
    fn subscriber(&self, supi: &str) -> StoreFuture<'_, Subscriber> {
        ready(self.state().subscriber(supi))
    }

    fn create_sm(
        &self,
        policy: SmPolicy,
        ssv: SsvUpdates,
        udr_subscription: Option<String>,
    ) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            self.inner.create_sm(policy.clone(), ssv.clone(), udr_subscription.clone()).await?;
            self.state().created_sm(policy, ssv, udr_subscription);
            Ok(())
        })
    }

    fn create_sm_with_chf(
        &self,
        policy: SmPolicy,
        ssv: SsvUpdates,
        udr_subscription: Option<String>,
        chf: ChfSubscription,
    ) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            self.inner
                .create_sm_with_chf(policy.clone(), ssv.clone(), udr_subscription.clone(), chf)
                .await?;
            self.state().created_sm(policy, ssv, udr_subscription);
            Ok(())
        })
    }

    // The CHF subscriptions and their statuses are held in memory by the CHF client
    // (nchf_spendinglimitcontrol), loaded once at start: these only write through.
    fn set_chf_statuses(&self, supi: &str, statuses: Map<String, Value>) -> StoreFuture<'_, bool> {
        self.inner.set_chf_statuses(supi, statuses)
    }

    fn drop_chf_subscription(&self, supi: &str, uri: &str) -> StoreFuture<'_, bool> {
        self.inner.drop_chf_subscription(supi, uri)
    }

    fn chf_subscriptions(&self) -> StoreFuture<'_, Vec<ChfSubscription>> {
        self.inner.chf_subscriptions()
    }

    fn sm_of(&self, supi: &str) -> StoreFuture<'_, Vec<SmPolicy>> {
        let s = self.state();
        let all = s
            .sm_of
            .get(supi)
            .map(|ids| ids.iter().filter_map(|id| s.sm.get(id).cloned()).collect())
            .unwrap_or_default();
        ready(all)
    }

    fn get_sm(&self, id: &str) -> StoreFuture<'_, Option<SmPolicy>> {
        ready(self.state().sm.get(id).cloned())
    }

    fn supi_of_sm<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<String>> {
        ready(self.state().sm.get(id).map(|p| p.supi.clone()))
    }

    fn get_sm_with_subscriber(&self, id: &str) -> StoreFuture<'_, Option<(SmPolicy, Subscriber)>> {
        let s = self.state();
        let found = s.sm.get(id).map(|p| (p.clone(), s.subscriber(&p.supi)));
        ready(found)
    }

    fn take_parsed_sm(&self, id: &str) -> Option<ParsedSm> {
        self.state().parsed.remove(id)
    }

    fn keep_parsed_sm(&self, id: &str, context: &[u8], decision: &[u8], parsed: ParsedSm) {
        let mut s = self.state();
        let current = s.sm.get(id).is_some_and(|p| p.context == context && p.decision == decision);
        if current && (s.parsed.len() < PARSED_MAX || s.parsed.contains_key(id)) {
            s.parsed.insert(id.to_string(), parsed);
        }
    }

    fn update_sm(&self, policy: SmPolicy, ssv: SsvUpdates) -> StoreFuture<'_, bool> {
        Box::pin(async move {
            if !self.inner.update_sm(policy.clone(), ssv.clone()).await? {
                return Ok(false);
            }
            self.state().updated_sm(policy, ssv);
            Ok(true)
        })
    }

    fn touch_sm(&self, id: &str, updated_ms: i64) -> StoreFuture<'_, bool> {
        let found = match self.state().sm.get_mut(id) {
            Some(p) => {
                p.updated_ms = updated_ms;
                true
            }
            None => false,
        };
        ready(found)
    }

    fn delete_sm(&self, id: &str) -> StoreFuture<'_, Option<Deleted>> {
        self.delete_sm_with_usage(id, Vec::new())
    }

    fn create_assoc(&self, a: Association, ssv: SsvUpdates) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            self.inner.create_assoc(a.clone(), ssv.clone()).await?;
            let mut s = self.state();
            s.merge(&a.supi, ssv);
            s.insert_assoc(a);
            Ok(())
        })
    }

    fn get_assoc(&self, kind: Kind, id: &str) -> StoreFuture<'_, Option<Association>> {
        ready(self.state().assoc.get(&(kind, id.to_string())).cloned())
    }

    fn update_assoc(&self, a: Association, ssv: SsvUpdates) -> StoreFuture<'_, bool> {
        Box::pin(async move {
            if !self.inner.update_assoc(a.clone(), ssv.clone()).await? {
                return Ok(false);
            }
            let mut s = self.state();
            s.merge(&a.supi, ssv);
            if let Some(held) = s.assoc.get_mut(&(a.kind, a.id.clone())) {
                *held = a;
            }
            Ok(true)
        })
    }

    fn delete_assoc(&self, kind: Kind, id: &str) -> StoreFuture<'_, Option<Association>> {
        let key = (kind, id.to_string());
        Box::pin(async move {
            let gone = self.inner.delete_assoc(kind, &key.1).await?;
            self.state().remove_assoc(&key);
            Ok(gone)
        })
    }

    fn assoc_of(&self, kind: Kind, supi: &str) -> StoreFuture<'_, Vec<Association>> {
        let s = self.state();
        let found = s
            .assoc_of
            .get(supi)
            .map(|keys| {
                keys.iter()
                    .filter(|k| k.0 == kind)
                    .filter_map(|k| s.assoc.get(k).cloned())
                    .collect()
            })
            .unwrap_or_default();
        ready(found)
    }

    fn count_sm(&self) -> StoreFuture<'_, u64> {
        ready(self.state().sm.len() as u64)
    }

    fn stale_sm(&self, before_ms: i64, limit: usize) -> StoreFuture<'_, Vec<SmPolicy>> {
        let s = self.state();
        let found =
            oldest(s.sm.values().filter(|p| p.updated_ms < before_ms), limit, |p| p.updated_ms);
        ready(found)
    }

    fn stale_assoc(&self, before_ms: i64, limit: usize) -> StoreFuture<'_, Vec<Association>> {
        let s = self.state();
        let found =
            oldest(s.assoc.values().filter(|a| a.updated_ms < before_ms), limit, |a| a.updated_ms);
        ready(found)
    }

    fn snapshot(&self) -> StoreFuture<'_, Snapshot> {
        let s = self.state();
        let snap = Snapshot {
            sm: s.sm.values().cloned().collect(),
            associations: s.assoc.values().cloned().collect(),
            subscribers: s.subscribers.keys().map(|k| (k.clone(), s.subscriber(k))).collect(),
            apps: s.apps.values().cloned().collect(),
            ue_deliveries: s.deliveries.values().cloned().collect(),
        };
        ready(snap)
    }

    fn ue_delivery(&self, assoc_id: &str) -> StoreFuture<'_, Option<UeDelivery>> {
        ready(self.state().deliveries.get(assoc_id).cloned())
    }

    fn put_ue_delivery(&self, d: UeDelivery) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            self.inner.put_ue_delivery(d.clone()).await?;
            self.state().deliveries.insert(d.assoc_id.clone(), d);
            Ok(())
        })
    }

    fn ue_delivery_outcome(
        &self,
        assoc_id: &str,
        pti: u8,
        outcome: &'static str,
        only_from: Option<&'static str>,
    ) -> StoreFuture<'_, bool> {
        let id = assoc_id.to_string();
        Box::pin(async move {
            if !self.inner.ue_delivery_outcome(&id, pti, outcome, only_from).await? {
                return Ok(false);
            }
            if let Some(d) = self.state().deliveries.get_mut(&id) {
                // The store's condition held: the same holds here.
                d.outcome = outcome.to_string();
                d.updated_ms = chrono::Utc::now().timestamp_millis();
            }
            Ok(true)
        })
    }

    fn delete_ue_delivery(&self, assoc_id: &str) -> StoreFuture<'_, Option<UeDelivery>> {
        let id = assoc_id.to_string();
        Box::pin(async move {
            let gone = self.inner.delete_ue_delivery(&id).await?;
            self.state().deliveries.remove(&id);
            Ok(gone)
        })
    }

    fn sm_of_ue(
        &self,
        ipv4: Option<&str>,
        ipv6: Option<&str>,
        dnn: Option<&str>,
    ) -> StoreFuture<'_, Option<SmPolicy>> {
        let Some(want) = UeAddress::of_request(ipv4, ipv6, dnn) else { return ready(None) };
        let s = self.state();
        let found = s.ues.find(&want).and_then(|id| s.sm.get(id)).cloned();
        ready(found)
    }

    fn create_app(&self, app: AppSession, sm: SmPolicy) -> StoreFuture<'_, bool> {
        Box::pin(async move {
            if !self.inner.create_app(app.clone(), sm.clone()).await? {
                return Ok(false);
            }
            let mut s = self.state();
            s.put_decision(sm);
            s.insert_app(app);
            Ok(true)
        })
    }

    fn update_app(&self, app: AppSession, sm: SmPolicy) -> StoreFuture<'_, bool> {
        Box::pin(async move {
            if !self.inner.update_app(app.clone(), sm.clone()).await? {
                return Ok(false);
            }
            let mut s = self.state();
            s.put_decision(sm);
            // Only if still there: an association's delete racing this took it.
            if s.apps.contains_key(&app.id) {
                s.insert_app(app);
            }
            Ok(true)
        })
    }

    fn delete_app(&self, id: &str, sm: Option<SmPolicy>) -> StoreFuture<'_, Option<AppSession>> {
        let id = id.to_string();
        Box::pin(async move {
            let gone = self.inner.delete_app(&id, sm.clone()).await?;
            let mut s = self.state();
            s.remove_app(&id);
            if let (Some(sm), Some(_)) = (sm, &gone) {
                s.put_decision(sm);
            }
            Ok(gone)
        })
    }

    fn get_app(&self, id: &str) -> StoreFuture<'_, Option<AppSession>> {
        ready(self.state().apps.get(id).cloned())
    }

    fn apps_of(&self, sm_policy_id: &str) -> StoreFuture<'_, Vec<AppSession>> {
        let s = self.state();
        let all = s
            .apps_of
            .get(sm_policy_id)
            .map(|ids| ids.iter().filter_map(|id| s.apps.get(id).cloned()).collect())
            .unwrap_or_default();
        ready(all)
    }

    // The Sy sessions and their statuses are held in memory by crate::sy, loaded once at
    // start: these only write through.
    fn put_sy_session(&self, s: SySession) -> StoreFuture<'_, ()> {
        self.inner.put_sy_session(s)
    }

    fn drop_sy_session(&self, supi: &str, session_id: &str) -> StoreFuture<'_, bool> {
        self.inner.drop_sy_session(supi, session_id)
    }

    fn sy_sessions(&self) -> StoreFuture<'_, Vec<SySession>> {
        self.inner.sy_sessions()
    }

    // The usage totals are held in memory by the usage monitoring (crate::usage), loaded once
    // at start: the store is only written through.
    fn usage_all(&self) -> StoreFuture<'_, Vec<UsageRow>> {
        self.inner.usage_all()
    }

    fn update_sm_with_usage(
        &self,
        policy: SmPolicy,
        ssv: SsvUpdates,
        usage: Vec<UsageRow>,
    ) -> StoreFuture<'_, bool> {
        Box::pin(async move {
            if !self.inner.update_sm_with_usage(policy.clone(), ssv.clone(), usage).await? {
                return Ok(false);
            }
            self.state().updated_sm(policy, ssv);
            Ok(true)
        })
    }

    fn delete_sm_with_usage(
        &self,
        id: &str,
        usage: Vec<UsageRow>,
    ) -> StoreFuture<'_, Option<Deleted>> {
        let id = id.to_string();
        // Memory holds every association of the subscriber, and the caller holds the
        // subscriber (collision control): no create or delete of its sessions commits between
        // this count and the delete's commit.
        let last = self.state().last_of_subscriber(&id);
        Box::pin(async move {
            let deleted = self.inner.delete_sm_known(&id, last, usage).await?;
            self.state().deleted_sm(&id, deleted.as_ref());
            Ok(deleted)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SqlitePcfStore;

    fn sm(id: &str, supi: &str, decision: &str) -> SmPolicy {
        SmPolicy {
            id: id.into(),
            supi: supi.into(),
            context: b"{}".to_vec(),
            decision: decision.as_bytes().to_vec(),
            policy_version: "1".into(),
            updated_ms: 1,
            binding: Some("http://bsf/b/1".into()),
        }
    }

    fn ssv(k: &str, v: Value) -> SsvUpdates {
        let mut m = Map::new();
        m.insert(k.into(), v);
        m
    }

    /// What memory answers is what the store holds, before and after a restart (a new load).
    #[tokio::test]
    async fn memory_matches_the_store_across_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = ::store::SqliteConfig::new(dir.path().join("pcf.db"));
        let db = ::store::SqliteStore::open(cfg.clone()).await.unwrap();
        let sqlite: Arc<dyn PcfStore> = Arc::new(SqlitePcfStore::on(db.clone()).await.unwrap());
        let r = Resident::load(sqlite.clone()).await.unwrap();

        r.create_sm(sm("a", "imsi-1", "{}"), ssv("n", 1.into()), Some("http://udr/s/1".into()))
            .await
            .unwrap();
        r.create_sm(sm("b", "imsi-1", "{}"), ssv("n", 2.into()), None).await.unwrap();
        let mut changed = sm("a", "imsi-1", r#"{"x":1}"#);
        changed.binding = Some("http://bsf/b/2".into());
        assert!(r.update_sm(changed, ssv("m", true.into())).await.unwrap());
        assert!(!r.update_sm(sm("zz", "imsi-1", "{}"), Map::new()).await.unwrap());
        let a = Association {
            kind: Kind::Am,
            id: "am1".into(),
            supi: "imsi-2".into(),
            context: b"{}".to_vec(),
            decision: b"{}".to_vec(),
            policy_version: "1".into(),
            updated_ms: 1,
            udr_subscription: None,
        };
        r.create_assoc(a.clone(), Map::new()).await.unwrap();

        let check = |r: &Resident| {
            let s = r.state();
            let p = s.sm.get("a").unwrap();
            assert_eq!(p.decision, br#"{"x":1}"#);
            assert_eq!(p.binding.as_deref(), Some("http://bsf/b/2"), "an update moved the binding");
            let k = s.subscribers.get("imsi-1").unwrap();
            assert_eq!(k.ssv.get("n"), Some(&Value::from(2)));
            assert_eq!(k.ssv.get("m"), Some(&Value::from(true)));
            assert_eq!(k.udr_subscription.as_deref(), Some("http://udr/s/1"));
            assert_eq!(s.sm_of.get("imsi-1").map(Vec::len), Some(2));
            assert!(s.assoc.contains_key(&(Kind::Am, "am1".to_string())));
        };
        check(&r);
        let again = Resident::load(sqlite.clone()).await.unwrap();
        check(&again);

        // The last delete of a subscriber ends its subscription, in memory as in the store.
        assert!(r.delete_sm("a").await.unwrap().unwrap().udr_subscription.is_none());
        let d = r.delete_sm("b").await.unwrap().unwrap();
        assert_eq!(d.udr_subscription.as_deref(), Some("http://udr/s/1"));
        assert!(r.delete_sm("b").await.unwrap().is_none());
        assert!(r.get_sm("a").await.unwrap().is_none());
        assert!(r.sm_of("imsi-1").await.unwrap().is_empty());
        let kept = r.subscriber("imsi-1").await.unwrap();
        assert!(kept.udr_subscription.is_none());
        assert_eq!(kept.ssv.get("n"), Some(&Value::from(2)), "state variables outlive sessions");
        assert!(r.delete_assoc(Kind::Am, "am1").await.unwrap().is_some());
        let reloaded = Resident::load(sqlite).await.unwrap();
        assert_eq!(reloaded.counts(), (0, 0));
        assert_eq!(reloaded.subscriber("imsi-1").await.unwrap(), kept);
    }

    fn on_ue(id: &str, context: &str) -> SmPolicy {
        SmPolicy { context: context.as_bytes().to_vec(), binding: None, ..sm(id, "imsi-9", "{}") }
    }

    fn app(id: &str, sm: &str) -> AppSession {
        AppSession {
            id: id.into(),
            sm_policy_id: sm.into(),
            supi: "imsi-9".into(),
            context: b"{}".to_vec(),
            rules: br#"{"pccRules":{}}"#.to_vec(),
            updated_ms: 1,
        }
    }

    /// The UE address index answers as the store's scan does, follows an update's new address,
    /// forgets a deleted association; application sessions survive a reload and go with their
    /// association.
    #[tokio::test]
    async fn ue_addresses_and_app_sessions_in_memory_as_in_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = ::store::SqliteConfig::new(dir.path().join("pcf.db"));
        let db = ::store::SqliteStore::open(cfg).await.unwrap();
        let sqlite: Arc<dyn PcfStore> = Arc::new(SqlitePcfStore::on(db).await.unwrap());
        let r = Resident::load(sqlite.clone()).await.unwrap();
        let ims =
            r#"{"ipv4Address":"10.45.0.1","ipv6AddressPrefix":"2001:db8:1:2::/64","dnn":"IMS"}"#;
        r.create_sm(on_ue("01-a", ims), Map::new(), None).await.unwrap();
        r.create_sm(
            on_ue("02-b", r#"{"ipv4Address":"10.45.0.1","dnn":"internet"}"#),
            Map::new(),
            None,
        )
        .await
        .unwrap();
        let find =
            |v4: Option<&'static str>, v6: Option<&'static str>, dnn: Option<&'static str>| {
                let (r, sqlite) = (&r, &sqlite);
                async move {
                    let a = r.sm_of_ue(v4, v6, dnn).await.unwrap().map(|p| p.id);
                    let b = sqlite.sm_of_ue(v4, v6, dnn).await.unwrap().map(|p| p.id);
                    assert_eq!(a, b, "memory and store agree for {v4:?} {v6:?} {dnn:?}");
                    a
                }
            };
        assert_eq!(find(Some("10.45.0.1"), None, Some("ims")).await.as_deref(), Some("01-a"));
        assert_eq!(find(Some("10.45.0.1"), None, None).await.as_deref(), Some("02-b"), "newest");
        assert_eq!(find(None, Some("2001:db8:1:2::99"), None).await.as_deref(), Some("01-a"));
        assert_eq!(find(None, Some("2001:db8:1:3::99"), None).await, None);
        assert_eq!(find(Some("10.45.0.2"), None, None).await, None);
        assert_eq!(find(Some("10.45.0.1"), None, Some("other")).await, None);

        // An update moves the UE to a new address.
        let moved = r#"{"ipv4Address":"10.45.0.9","dnn":"ims"}"#;
        assert!(r.update_sm(on_ue("01-a", moved), Map::new()).await.unwrap());
        assert_eq!(find(Some("10.45.0.1"), None, Some("ims")).await, None);
        assert_eq!(find(None, Some("2001:db8:1:2::99"), None).await, None);
        assert_eq!(find(Some("10.45.0.9"), None, None).await.as_deref(), Some("01-a"));

        // Application sessions: with the association's decision, reloaded, gone with it.
        let mut with_rules = on_ue("01-a", moved);
        with_rules.decision = br#"{"pccRules":{"af-x-1":{}}}"#.to_vec();
        assert!(r.create_app(app("x", "01-a"), with_rules.clone()).await.unwrap());
        assert!(!r.create_app(app("y", "zz"), on_ue("zz", "{}")).await.unwrap());
        r.create_app(app("z", "02-b"), on_ue("02-b", "{}")).await.unwrap();
        let again = Resident::load(sqlite.clone()).await.unwrap();
        assert_eq!(again.get_app("x").await.unwrap(), Some(app("x", "01-a")));
        assert_eq!(again.get_sm("01-a").await.unwrap().unwrap().decision, with_rules.decision);
        assert_eq!(again.apps_of("01-a").await.unwrap().len(), 1);
        assert_eq!(
            again.sm_of_ue(Some("10.45.0.9"), None, None).await.unwrap().map(|p| p.id).as_deref(),
            Some("01-a"),
            "the index is rebuilt at load"
        );
        let mut changed = app("x", "01-a");
        changed.rules = b"{}".to_vec();
        assert!(r.update_app(changed.clone(), on_ue("01-a", moved)).await.unwrap());
        assert_eq!(r.get_app("x").await.unwrap(), Some(changed));
        assert!(r.delete_app("z", Some(on_ue("02-b", "{}"))).await.unwrap().is_some());
        assert!(r.delete_app("z", None).await.unwrap().is_none());
        r.delete_sm("01-a").await.unwrap().unwrap();
        assert!(r.get_app("x").await.unwrap().is_none());
        assert!(r.apps_of("01-a").await.unwrap().is_empty());
        assert_eq!(find(Some("10.45.0.9"), None, None).await, None);
        let reloaded = Resident::load(sqlite).await.unwrap();
        assert!(reloaded.get_app("x").await.unwrap().is_none(), "gone from the store too");
        assert!(reloaded.get_app("z").await.unwrap().is_none());
    }

    /// A parsed form is kept only for the bytes it was made from, taken once, and dropped by
    /// any change of its association.
    #[tokio::test]
    async fn a_parsed_form_is_kept_only_while_it_is_the_associations() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = ::store::SqliteConfig::new(dir.path().join("pcf.db"));
        let db = ::store::SqliteStore::open(cfg).await.unwrap();
        let sqlite: Arc<dyn PcfStore> = Arc::new(SqlitePcfStore::on(db).await.unwrap());
        let r = Resident::load(sqlite).await.unwrap();
        r.create_sm(sm("a", "imsi-1", "{}"), Map::new(), None).await.unwrap();
        let parsed = ParsedSm { context: serde_json::json!({}), decision: serde_json::json!({}) };

        r.keep_parsed_sm("a", b"{}", br#"{"x":1}"#, parsed.clone());
        assert_eq!(r.take_parsed_sm("a"), None, "not made from the association's bytes");
        r.keep_parsed_sm("zz", b"{}", b"{}", parsed.clone());
        assert_eq!(r.take_parsed_sm("zz"), None, "no such association");
        r.keep_parsed_sm("a", b"{}", b"{}", parsed.clone());
        assert_eq!(r.take_parsed_sm("a"), Some(parsed.clone()));
        assert_eq!(r.take_parsed_sm("a"), None, "taken once");

        r.keep_parsed_sm("a", b"{}", b"{}", parsed.clone());
        assert!(r.update_sm(sm("a", "imsi-1", r#"{"x":1}"#), Map::new()).await.unwrap());
        assert_eq!(r.take_parsed_sm("a"), None, "an update drops it");
        r.keep_parsed_sm("a", b"{}", br#"{"x":1}"#, parsed.clone());
        assert!(r.delete_sm("a").await.unwrap().is_some());
        assert_eq!(r.take_parsed_sm("a"), None, "a delete drops it");
    }
}
