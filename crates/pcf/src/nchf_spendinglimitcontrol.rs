//! The PCF's Nchf_SpendingLimitControl consumer (TS 29.594, N28): the statuses of the policy
//! counters the project reads (`[spending] counters`, docs/policy.md), which its rules see as
//! `spending.<policyCounterId>`.
//!
//! - Subscribe (§4.2.2): with `[pcf.chf] enabled`, a subscriber's first SM association
//!   subscribes before the decision (in parallel with the policy data read), `POST
//!   {apiRoot}/nchf-spendinglimitcontrol/v1/subscriptions` with a SpendingLimitContext; the
//!   201's statusInfos are what the decision reads. The subscription is the subscriber's: kept
//!   in the store with it (in the commit of the association), its statuses in memory here.
//! - Unsubscribe (§4.2.3): `DELETE` of the subscription with the subscriber's last association.
//! - Notify (§4.2.4): the CHF POSTs a SpendingLimitStatus to `{notifUri}/notify`; the statuses
//!   it carries replace those of the same counters (the others stay), the PCF answers 204 and
//!   then decides every SM association of the subscriber again (UpdateNotify to the SMF of
//!   each whose decision changed). `{notifUri}/terminate` (SubscriptionTerminationInfo, §4.2.5)
//!   drops the subscription and its statuses, and decides again likewise.
//!
//! A CHF that cannot be reached, or refuses, fails no create: the decision is taken without
//! statuses (the counters absent), logged and counted; the subscriber's next create tries again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use http::{header, StatusCode};
use nf::{Answer, NfError};
use nrf_client::NrfClient;
use sbi::client::SbiClient;
use sbi::problem::cause;
use sbi::{empty_response, InvalidParam, ProblemDetails, SbiRequest};
use serde_json::{json, Map, Value};

use crate::config::ChfConfig;
use crate::context::Pcf;
use crate::producers::Producers;
use crate::store::{ChfSubscription, PcfStore, SmPolicy, SsvUpdates};

/// Where the CHF's notifications for subscriber `{supi}` go: the notifUri given is
/// `{apiRoot}` + this prefix + the SUPI; TS 29.594 appends `/notify` and `/terminate`.
pub const CALLBACK_PREFIX: &str = "/npcf-callback/v1/nchf-spendinglimit/";
pub const NOTIFY_PATH: &str = "/npcf-callback/v1/nchf-spendinglimit/{supi}/notify";
pub const TERMINATE_PATH: &str = "/npcf-callback/v1/nchf-spendinglimit/{supi}/terminate";

const SUBSCRIPTIONS: &str = "/nchf-spendinglimitcontrol/v1/subscriptions";

/// Outcomes, for `/metrics`.
#[derive(Debug, Default)]
pub struct Stats {
    pub subscribed: AtomicU64,
    pub subscribe_failed: AtomicU64,
    pub unsubscribed: AtomicU64,
    pub unsubscribe_failed: AtomicU64,
    pub notified: AtomicU64,
    pub terminated: AtomicU64,
}

/// A subscriber's subscription as decisions read it.
#[derive(Debug, Clone, PartialEq)]
pub struct Spending {
    pub uri: String,
    /// policyCounterId → currentStatus: the engine's `spending` input.
    pub statuses: Map<String, Value>,
}

pub struct Chf {
    config: ChfConfig,
    client: SbiClient,
    chfs: Producers,
    /// By SUPI, every subscription kept in the store (loaded at start). Replaced whole on a
    /// change, so a decision reads its statuses without holding the lock.
    subs: Mutex<HashMap<String, Arc<Spending>>>,
    pub stats: Stats,
}

/// What a decision reads of the subscriber's spending limit statuses.
pub(crate) struct SpendingRead {
    pub spending: Option<Arc<Spending>>,
    /// The subscription made for this create, to be stored in its commit.
    pub new: bool,
}

impl Chf {
    pub fn new(config: ChfConfig, client: SbiClient) -> Result<Self, String> {
        let chfs = Producers::new("CHF", "nchf-spendinglimitcontrol", config.api_root.as_deref())?;
        Ok(Chf { config, client, chfs, subs: Mutex::new(HashMap::new()), stats: Stats::default() })
    }

    pub fn use_nrf(&self, nrf: NrfClient) {
        self.chfs.use_nrf(nrf);
    }

    /// Whether subscriptions are made: enabled, with a CHF configured or an NRF to find one.
    pub fn is_on(&self) -> bool {
        self.config.enabled && self.chfs.known()
    }

    fn subs(&self) -> MutexGuard<'_, HashMap<String, Arc<Spending>>> {
        self.subs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The subscriptions the store keeps (at start).
    pub fn load(&self, kept: Vec<ChfSubscription>) {
        let mut m = self.subs();
        for k in kept {
            m.insert(k.supi, Arc::new(Spending { uri: k.uri, statuses: k.statuses }));
        }
    }

    /// Subscribers with a subscription.
    pub fn subscribers(&self) -> usize {
        self.subs().len()
    }

    /// The subscriber's statuses, when it has a subscription and `[pcf.chf]` is enabled.
    pub fn spending(&self, supi: &str) -> Option<Arc<Spending>> {
        if !self.config.enabled {
            return None;
        }
        self.subs().get(supi).cloned()
    }

    /// For a new SM association of `supi`: the statuses it has, or a subscription made now
    /// when the project reads `counters` and the subscriber has none (or nothing, counted,
    /// when the CHF fails).
    pub(crate) async fn for_create(
        &self,
        pcf: &Pcf,
        supi: &str,
        context: &Value,
        counters: &[String],
    ) -> SpendingRead {
        if let Some(s) = self.spending(supi) {
            return SpendingRead { spending: Some(s), new: false };
        }
        if counters.is_empty() || !self.is_on() {
            return SpendingRead { spending: None, new: false };
        }
        let notif = format!("{}{CALLBACK_PREFIX}{supi}", pcf.api_root(None));
        let gpsi = context.get("gpsi").and_then(Value::as_str);
        let spending = self.subscribe(supi, gpsi, counters, &notif).await;
        SpendingRead { new: spending.is_some(), spending }
    }

    /// `POST subscriptions` (TS 29.594 §4.2.2.2); the subscription, or None (logged, counted).
    async fn subscribe(
        &self,
        supi: &str,
        gpsi: Option<&str>,
        counters: &[String],
        notif_uri: &str,
    ) -> Option<Arc<Spending>> {
        let chfs = match self.chfs.find(Some(supi)).await {
            Ok(c) if !c.is_empty() => c,
            Ok(_) => return self.failed(supi, "no CHF to ask"),
            Err(e) => return self.failed(supi, &e),
        };
        let mut body = json!({"supi": supi, "policyCounterIds": counters, "notifUri": notif_uri});
        if let Some(g) = gpsi {
            body["gpsi"] = Value::from(g);
        }
        let sent = self
            .client
            .post(SUBSCRIPTIONS)
            .json(&body)
            .max_rsp_time(Duration::from_millis(self.config.timeout_ms))
            .send_with_alternates(&chfs)
            .await;
        let r = match sent {
            Ok(r) if r.status() == StatusCode::CREATED => r,
            Ok(r) => return self.failed(supi, &format!("the CHF answered {}", r.status())),
            Err(e) => return self.failed(supi, &e.to_string()),
        };
        let Some(uri) = r.header(header::LOCATION.as_str()).map(str::to_string) else {
            return self.failed(supi, "the CHF's 201 has no Location");
        };
        // The statuses answered: a malformed entry is skipped (its counter reads as absent).
        let status: Value = r.json().unwrap_or(Value::Null);
        let mut statuses = Map::new();
        if let Some(infos) = status.get("statusInfos").and_then(Value::as_object) {
            for (id, info) in infos {
                if let Some(s) = info.get("currentStatus").and_then(Value::as_str) {
                    statuses.insert(id.clone(), Value::from(s));
                }
            }
        }
        self.stats.subscribed.fetch_add(1, Ordering::Relaxed);
        Some(Arc::new(Spending { uri, statuses }))
    }

    fn failed(&self, supi: &str, why: &str) -> Option<Arc<Spending>> {
        tracing::warn!(%supi, %why, "no spending limit subscription at the CHF: deciding without statuses");
        self.stats.subscribe_failed.fetch_add(1, Ordering::Relaxed);
        None
    }

    /// Stores a new SM association ([`PcfStore::create_sm`]) with `made`, the subscription
    /// made for it, in the same commit; kept here once committed, removed at the CHF if the
    /// commit fails.
    pub(crate) async fn create_sm(
        &self,
        store: &dyn PcfStore,
        policy: SmPolicy,
        ssv: SsvUpdates,
        udr_subscription: Option<String>,
        made: Option<Arc<Spending>>,
    ) -> Result<(), NfError> {
        let Some(s) = made else {
            return Ok(store.create_sm(policy, ssv, udr_subscription).await?);
        };
        let supi = policy.supi.clone();
        let kept = ChfSubscription {
            supi: supi.clone(),
            uri: s.uri.clone(),
            statuses: s.statuses.clone(),
        };
        if let Err(e) = store.create_sm_with_chf(policy, ssv, udr_subscription, kept).await {
            self.release(Some(&s)).await;
            return Err(e.into());
        }
        self.subs().insert(supi, s);
        Ok(())
    }

    /// The subscriber's last association was deleted, and with it the subscription at `uri`
    /// the store had: forgotten here and removed at the CHF.
    pub(crate) async fn deleted(&self, supi: &str, uri: Option<&str>) {
        if let Some(uri) = uri {
            self.subs().remove(supi);
            self.unsubscribe(uri).await;
        }
    }

    /// `DELETE` of a subscription (TS 29.594 §4.2.3.2); a failure is logged and counted.
    pub async fn unsubscribe(&self, uri: &str) {
        let timeout = Duration::from_millis(self.config.timeout_ms);
        match crate::producers::delete(&self.client, uri, timeout).await {
            Ok(()) => {
                self.stats.unsubscribed.fetch_add(1, Ordering::Relaxed);
            }
            Err(why) => {
                tracing::warn!(%uri, %why, "spending limit subscription not removed at the CHF");
                self.stats.unsubscribe_failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Removes a subscription made for a create that did not happen (refused, or not stored).
    pub(crate) async fn release(&self, made: Option<&Spending>) {
        if let Some(s) = made {
            self.unsubscribe(&s.uri).await;
        }
    }

    /// Merges notified statuses into the subscriber's (those named replace, the others stay);
    /// false when it has no subscription.
    fn merge(&self, supi: &str, changed: Map<String, Value>) -> bool {
        let mut m = self.subs();
        let Some(old) = m.get(supi) else { return false };
        let mut new = Spending::clone(old);
        new.statuses.extend(changed);
        m.insert(supi.to_string(), Arc::new(new));
        true
    }
}

/// JSON pointer of a member named `key` under `parent` (RFC 6901 escapes).
fn pointer(parent: &str, key: &str) -> String {
    format!("{parent}/{}", key.replace('~', "~0").replace('/', "~1"))
}

fn invalid(params: Vec<InvalidParam>) -> NfError {
    ProblemDetails::invalid_params(cause::MANDATORY_IE_INCORRECT, params).into()
}

/// The body's `supi`, when given, must be the subscriber of the notifUri.
fn check_supi(body: &Value, supi: &str, required: bool) -> Result<(), NfError> {
    match body.get("supi") {
        None if required => Err(ProblemDetails::invalid_params(
            cause::MANDATORY_IE_MISSING,
            vec![InvalidParam::new("/supi", "missing")],
        )
        .into()),
        None => Ok(()),
        Some(Value::String(s)) if s == supi => Ok(()),
        Some(_) => Err(invalid(vec![InvalidParam::new(
            "/supi",
            "must be the SUPI of the subscription's notifUri",
        )])),
    }
}

/// The statuses of a notified SpendingLimitStatus: policyCounterId → currentStatus.
fn statuses(body: &Value, supi: &str) -> Result<Map<String, Value>, NfError> {
    if !body.is_object() {
        return Err(invalid(vec![InvalidParam::new("", "must be a SpendingLimitStatus object")]));
    }
    check_supi(body, supi, false)?;
    let infos = match body.get("statusInfos") {
        None => {
            return Err(ProblemDetails::invalid_params(
                cause::MANDATORY_IE_MISSING,
                vec![InvalidParam::new("/statusInfos", "a notification carries the statuses")],
            )
            .into())
        }
        Some(Value::Object(m)) if !m.is_empty() => m,
        Some(_) => {
            return Err(invalid(vec![InvalidParam::new(
                "/statusInfos",
                "must be a non-empty map of PolicyCounterInfo",
            )]))
        }
    };
    let mut out = Map::new();
    let mut bad = Vec::new();
    for (id, info) in infos {
        let at = pointer("/statusInfos", id);
        let Some(info) = info.as_object() else {
            bad.push(InvalidParam::new(at, "must be a PolicyCounterInfo object"));
            continue;
        };
        match info.get("policyCounterId") {
            Some(Value::String(c)) if c == id => {}
            _ => bad.push(InvalidParam::new(
                format!("{at}/policyCounterId"),
                "must be the map's key, the policy counter's id",
            )),
        }
        match info.get("currentStatus") {
            Some(Value::String(s)) => {
                out.insert(id.clone(), Value::from(s.as_str()));
            }
            _ => bad.push(InvalidParam::new(format!("{at}/currentStatus"), "must be a string")),
        }
    }
    if !bad.is_empty() {
        return Err(invalid(bad));
    }
    Ok(out)
}

fn unknown(supi: &str) -> NfError {
    ProblemDetails::not_found(format!("no spending limit subscription for {supi}")).into()
}

/// `POST {notifUri}/notify` (SpendingLimitStatus, TS 29.594 §4.2.4): 204, then the subscriber's
/// statuses are stored and its SM associations decided again.
pub async fn notify(pcf: Arc<Pcf>, req: SbiRequest) -> Answer {
    let supi = req.param("supi").to_string();
    let body: Value = req.json()?;
    let changed = statuses(&body, &supi)?;
    // Merged now, in the order notifications arrive; stored below under the subscriber's hold.
    if !pcf.chf.merge(&supi, changed) {
        return Err(unknown(&supi));
    }
    pcf.chf.stats.notified.fetch_add(1, Ordering::Relaxed);
    tokio::spawn(async move {
        let held = pcf.hold(&supi).await;
        if let Some(s) = pcf.chf.spending(&supi) {
            if let Err(e) = pcf.store.set_chf_statuses(&supi, s.statuses.clone()).await {
                tracing::warn!(%supi, error = %e, "spending limit statuses not stored");
            }
        }
        crate::npcf_smpolicycontrol::redecide_held(&pcf, &supi, held).await;
    });
    Ok(empty_response(StatusCode::NO_CONTENT))
}

/// `POST {notifUri}/terminate` (SubscriptionTerminationInfo, TS 29.594 §4.2.5): 204; the
/// subscription and its statuses are dropped and the subscriber's SM associations decided
/// again without them.
pub async fn terminate(pcf: Arc<Pcf>, req: SbiRequest) -> Answer {
    let supi = req.param("supi").to_string();
    let body: Value = req.json()?;
    if !body.is_object() {
        return Err(invalid(vec![InvalidParam::new(
            "",
            "must be a SubscriptionTerminationInfo object",
        )]));
    }
    check_supi(&body, &supi, true)?;
    let Some(gone) = pcf.chf.subs().remove(&supi) else { return Err(unknown(&supi)) };
    pcf.chf.stats.terminated.fetch_add(1, Ordering::Relaxed);
    let why = body.get("termCause").map(Value::to_string).unwrap_or_default();
    tracing::info!(%supi, cause = %why, "the CHF terminated a spending limit subscription");
    tokio::spawn(async move {
        let held = pcf.hold(&supi).await;
        // This subscription only: a create held before may have made a new one since.
        if let Err(e) = pcf.store.drop_chf_subscription(&supi, &gone.uri).await {
            tracing::warn!(%supi, error = %e, "terminated spending limit subscription not removed from the store");
        }
        crate::npcf_smpolicycontrol::redecide_held(&pcf, &supi, held).await;
    });
    Ok(empty_response(StatusCode::NO_CONTENT))
}
