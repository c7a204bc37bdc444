//! Binding event subscriptions (TS 29.521 Nbsf_Management_Subscribe / Unsubscribe, the
//! subscriptions collection of the Rel-17 API) and the BsfNotification (Nbsf_Management_Notify)
//! sent to the subscriber's `notifUri` on binding registration and deregistration.
//!
//! Subscriptions are kept in memory (indexed by SUPI, the one attribute a BsfSubscription must
//! carry, so an event costs one hash lookup however many subscriptions exist) and persisted in
//! the store so they survive a restart. Notifications are sent by spawned tasks with a bound
//! on how many are in flight, never on the request path.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use http::StatusCode;
use nf::Answer;
use sbi::client::SbiClient;
use sbi::problem::cause;
use sbi::{empty_response, ProblemDetails, SbiRequest};
use serde_json::{json, Value};
use tokio::sync::Semaphore;

use crate::config::NotifyConfig;
use crate::context::Bsf;
use crate::models::{check_dnn, check_gpsi, check_snssai, check_supi, Errors, Keys};

/// The BsfEvent values this BSF reports.
pub const EVENTS: [&str; 6] = [
    "PCF_PDU_SESSION_BINDING_REGISTRATION",
    "PCF_PDU_SESSION_BINDING_DEREGISTRATION",
    "PCF_UE_BINDING_REGISTRATION",
    "PCF_UE_BINDING_DEREGISTRATION",
    "SNSSAI_DNN_BINDING_REGISTRATION",
    "SNSSAI_DNN_BINDING_DEREGISTRATION",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindingEvent {
    Registered,
    Deregistered,
}

impl BindingEvent {
    /// The BsfEvents a PDU session binding event is reported as.
    fn names(self) -> [&'static str; 2] {
        match self {
            BindingEvent::Registered => [EVENTS[0], EVENTS[4]],
            BindingEvent::Deregistered => [EVENTS[1], EVENTS[5]],
        }
    }
}

/// One subscription, decoded for matching.
#[derive(Debug)]
pub struct Subscription {
    pub id: String,
    pub body: Value,
    events: Vec<String>,
    notif_uri: String,
    corr_id: String,
    supi: String,
    gpsi: Option<String>,
    /// (dnn lower, sst, sd lower); empty: any.
    pairs: Vec<(String, u8, String)>,
}

#[derive(Default)]
struct Inner {
    by_id: HashMap<String, Arc<Subscription>>,
    by_supi: HashMap<String, Vec<Arc<Subscription>>>,
}

#[derive(Default)]
pub struct Subscriptions {
    inner: RwLock<Inner>,
    any: AtomicBool,
}

impl Subscriptions {
    pub fn is_empty(&self) -> bool {
        !self.any.load(Ordering::Relaxed)
    }

    pub fn len(&self) -> usize {
        self.read().by_id.len()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    pub fn get(&self, id: &str) -> Option<Arc<Subscription>> {
        self.read().by_id.get(id).cloned()
    }

    /// Adds or replaces a subscription.
    pub fn insert(&self, sub: Subscription) {
        let sub = Arc::new(sub);
        let mut g = self.write();
        if let Some(old) = g.by_id.remove(&sub.id) {
            remove_from_supi(&mut g, &old);
        }
        g.by_supi.entry(sub.supi.clone()).or_default().push(sub.clone());
        g.by_id.insert(sub.id.clone(), sub);
        self.any.store(true, Ordering::Relaxed);
    }

    pub fn remove(&self, id: &str) -> bool {
        let mut g = self.write();
        let Some(old) = g.by_id.remove(id) else { return false };
        remove_from_supi(&mut g, &old);
        self.any.store(!g.by_id.is_empty(), Ordering::Relaxed);
        true
    }

    /// (notifUri, BsfNotification) for every subscription `event` on `binding` matches.
    pub fn notifications(
        &self,
        event: BindingEvent,
        binding: &Value,
        keys: &Keys,
    ) -> Vec<(String, Value)> {
        let Some(supi) = keys.supi.as_deref() else { return Vec::new() };
        let g = self.read();
        let Some(subs) = g.by_supi.get(supi) else { return Vec::new() };
        let mut out = Vec::new();
        for sub in subs {
            if sub.gpsi.as_ref().is_some_and(|g| keys.gpsi.as_ref() != Some(g)) {
                continue;
            }
            let pair = (keys.dnn.clone(), keys.sst, keys.sd.clone());
            if !sub.pairs.is_empty() && !sub.pairs.contains(&pair) {
                continue;
            }
            let notifs: Vec<Value> = event
                .names()
                .iter()
                .filter(|e| sub.events.iter().any(|s| s == *e))
                .map(|e| {
                    let mut n =
                        json!({"event": e, "pcfForPduSessInfos": [pdu_session_info(binding)]});
                    if e.starts_with("SNSSAI_DNN") {
                        n["matchSnssaiDnns"] =
                            json!([{"dnn": binding["dnn"], "snssai": binding["snssai"]}]);
                    }
                    n
                })
                .collect();
            if notifs.is_empty() {
                continue;
            }
            out.push((
                sub.notif_uri.clone(),
                json!({"notifCorreId": sub.corr_id, "eventNotifs": notifs}),
            ));
        }
        out
    }

    /// (notifUri, BsfNotification) for every subscription a PCF for a UE binding event matches
    /// (`PCF_UE_BINDING_(DE)REGISTRATION`, by SUPI and GPSI).
    pub fn ue_notifications(&self, event: BindingEvent, binding: &Value) -> Vec<(String, Value)> {
        let Some(supi) = binding.get("supi").and_then(Value::as_str) else { return Vec::new() };
        let name = match event {
            BindingEvent::Registered => EVENTS[2],
            BindingEvent::Deregistered => EVENTS[3],
        };
        let g = self.read();
        let Some(subs) = g.by_supi.get(supi) else { return Vec::new() };
        let gpsi = binding.get("gpsi").and_then(Value::as_str);
        let mut info = serde_json::Map::new();
        for (from, to) in [
            ("pcfForUeFqdn", "pcfFqdn"),
            ("pcfForUeIpEndPoints", "pcfIpEndPoints"),
            ("pcfId", "pcfId"),
            ("pcfSetId", "pcfSetId"),
            ("bindLevel", "bindLevel"),
        ] {
            if let Some(v) = binding.get(from) {
                info.insert(to.into(), v.clone());
            }
        }
        subs.iter()
            .filter(|s| s.events.iter().any(|e| e == name))
            .filter(|s| s.gpsi.as_deref().is_none_or(|g| Some(g) == gpsi))
            .map(|s| {
                let n = json!({"notifCorreId": s.corr_id,
                    "eventNotifs": [{"event": name, "pcfForUeInfo": Value::Object(info.clone())}]});
                (s.notif_uri.clone(), n)
            })
            .collect()
    }
}

fn remove_from_supi(g: &mut Inner, old: &Subscription) {
    if let Some(list) = g.by_supi.get_mut(&old.supi) {
        list.retain(|s| s.id != old.id);
        if list.is_empty() {
            g.by_supi.remove(&old.supi);
        }
    }
}

/// The PcfForPduSessionInfo of a binding.
fn pdu_session_info(b: &Value) -> Value {
    let mut info = serde_json::Map::new();
    for k in [
        "dnn",
        "snssai",
        "pcfFqdn",
        "pcfIpEndPoints",
        "ipv4Addr",
        "ipDomain",
        "pcfId",
        "pcfSetId",
        "bindLevel",
    ] {
        if let Some(v) = b.get(k) {
            info.insert(k.into(), v.clone());
        }
    }
    let mut prefixes: Vec<Value> = b.get("ipv6Prefix").into_iter().cloned().collect();
    prefixes
        .extend(b.get("addIpv6Prefixes").and_then(Value::as_array).into_iter().flatten().cloned());
    if !prefixes.is_empty() {
        info.insert("ipv6Prefixes".into(), Value::Array(prefixes));
    }
    let mut macs: Vec<Value> = b.get("macAddr48").into_iter().cloned().collect();
    macs.extend(b.get("addMacAddrs").and_then(Value::as_array).into_iter().flatten().cloned());
    if !macs.is_empty() {
        info.insert("macAddrs".into(), Value::Array(macs));
    }
    Value::Object(info)
}

/// Checks a BsfSubscription and decodes it for matching.
pub fn decode(id: &str, body: Value) -> Result<Subscription, ProblemDetails> {
    let mut errs = Errors::default();
    let Some(obj) = body.as_object() else {
        return Err(ProblemDetails::bad_request(
            cause::INVALID_MSG_FORMAT,
            "BsfSubscription must be a JSON object",
        ));
    };
    let mut events = Vec::new();
    match obj.get("events") {
        None => errs.missing("/events"),
        Some(Value::Array(a)) if !a.is_empty() => {
            for (i, e) in a.iter().enumerate() {
                match e.as_str().filter(|e| EVENTS.contains(e)) {
                    Some(e) => events.push(e.to_owned()),
                    None => errs.bad(format!("/events/{i}"), "not a BsfEvent this BSF reports"),
                }
            }
        }
        Some(_) => errs.bad("/events", "must be a non-empty array of BsfEvent"),
    }
    let notif_uri = match obj.get("notifUri") {
        None => {
            errs.missing("/notifUri");
            String::new()
        }
        Some(Value::String(u))
            if u.parse::<http::Uri>().is_ok_and(|u| {
                matches!(u.scheme_str(), Some("http" | "https")) && u.authority().is_some()
            }) =>
        {
            u.clone()
        }
        Some(_) => {
            errs.bad("/notifUri", "must be an absolute http or https URI");
            String::new()
        }
    };
    let corr_id = match obj.get("notifCorreId") {
        None => {
            errs.missing("/notifCorreId");
            String::new()
        }
        Some(Value::String(s)) => s.clone(),
        Some(_) => {
            errs.bad("/notifCorreId", "must be a string");
            String::new()
        }
    };
    let supi = match obj.get("supi") {
        None => {
            errs.missing("/supi");
            String::new()
        }
        Some(Value::String(s)) if check_supi(s) => s.clone(),
        Some(_) => {
            errs.bad("/supi", "must be a SUPI (imsi-<digits>, nai-...)");
            String::new()
        }
    };
    let gpsi = match obj.get("gpsi") {
        None => None,
        Some(Value::String(s)) if check_gpsi(s) => Some(s.clone()),
        Some(_) => {
            errs.bad("/gpsi", "must be a GPSI (msisdn-<digits>, extid-...)");
            None
        }
    };
    let mut pairs = Vec::new();
    let mut pair = |v: &Value, at: String, errs: &mut Errors| {
        let Some(o) = v.as_object() else {
            errs.bad(at, "must be an SnssaiDnnPair object");
            return;
        };
        let dnn = match o.get("dnn") {
            None => {
                errs.missing(format!("{at}/dnn"));
                None
            }
            Some(Value::String(d)) if check_dnn(d) => Some(d.to_ascii_lowercase()),
            Some(_) => {
                errs.bad(format!("{at}/dnn"), "must be a DNN");
                None
            }
        };
        let snssai = match o.get("snssai") {
            None => {
                errs.missing(format!("{at}/snssai"));
                None
            }
            Some(s) => check_snssai(s, &format!("{at}/snssai"), errs),
        };
        if let (Some(d), Some((sst, sd))) = (dnn, snssai) {
            pairs.push((d, sst, sd));
        }
    };
    if let Some(p) = obj.get("snssaiDnnPairs") {
        pair(p, "/snssaiDnnPairs".into(), &mut errs);
    }
    match obj.get("addSnssaiDnnPairs") {
        None => {}
        Some(Value::Array(a)) if !a.is_empty() => {
            for (i, p) in a.iter().enumerate() {
                pair(p, format!("/addSnssaiDnnPairs/{i}"), &mut errs);
            }
        }
        Some(_) => errs.bad("/addSnssaiDnnPairs", "must be a non-empty array of SnssaiDnnPair"),
    }
    errs.finish()?;
    Ok(Subscription { id: id.to_owned(), body, events, notif_uri, corr_id, supi, gpsi, pairs })
}

fn location(bsf: &Bsf, req: &SbiRequest, id: &str) -> String {
    format!("{}/nbsf-management/v1/subscriptions/{id}", bsf.api_root(Some(req)))
}

/// POST /subscriptions: 201 with Location and the BsfSubscription.
pub async fn subscribe(bsf: Arc<Bsf>, req: SbiRequest) -> Answer {
    let body: Value = req.json()?;
    let id = uuid::Uuid::new_v4().to_string();
    let sub = decode(&id, body)?;
    if bsf.subscriptions.len() >= bsf.config.max_subscriptions {
        return Err(ProblemDetails::new(
            StatusCode::FORBIDDEN,
            cause::INSUFFICIENT_RESOURCES,
            "the BSF holds its maximum number of subscriptions",
        )
        .into());
    }
    let bytes = serde_json::to_vec(&sub.body)?;
    bsf.store.put_subscription(id.clone(), bytes).await?;
    let mut resp = sbi::json_response(StatusCode::CREATED, &sub.body)?;
    let loc = location(&bsf, &req, &id);
    bsf.subscriptions.insert(sub);
    if let Ok(v) = http::HeaderValue::from_str(&loc) {
        resp.headers_mut().insert(http::header::LOCATION, v);
    }
    Ok(resp)
}

/// PUT /subscriptions/{subId}: 200 with the new BsfSubscription; 404 for an unknown one.
pub async fn replace(bsf: Arc<Bsf>, req: SbiRequest) -> Answer {
    let id = req.param("subId").to_owned();
    let body: Value = req.json()?;
    let sub = decode(&id, body)?;
    if bsf.subscriptions.get(&id).is_none() {
        return Err(ProblemDetails::not_found(format!("no subscription {id}")).into());
    }
    let bytes = serde_json::to_vec(&sub.body)?;
    bsf.store.put_subscription(id.clone(), bytes).await?;
    let resp = sbi::json_response(StatusCode::OK, &sub.body)?;
    bsf.subscriptions.insert(sub);
    Ok(resp)
}

/// DELETE /subscriptions/{subId}: 204; 404 for an unknown one.
pub async fn unsubscribe(bsf: Arc<Bsf>, req: SbiRequest) -> Answer {
    let id = req.param("subId").to_owned();
    if !bsf.subscriptions.remove(&id) {
        return Err(ProblemDetails::not_found(format!("no subscription {id}")).into());
    }
    bsf.store.delete_subscription(id).await?;
    Ok(empty_response(StatusCode::NO_CONTENT))
}

/// Loads the stored subscriptions into memory; returns how many.
pub async fn load(bsf: &Bsf) -> store::Result<usize> {
    let rows = bsf.store.load_subscriptions().await?;
    let mut n = 0;
    for (id, json) in rows {
        match serde_json::from_slice::<Value>(&json)
            .map_err(|e| e.to_string())
            .and_then(|v| decode(&id, v).map_err(|p| p.to_string()))
        {
            Ok(sub) => {
                bsf.subscriptions.insert(sub);
                n += 1;
            }
            Err(e) => tracing::error!(id, error = %e, "stored subscription unreadable; skipped"),
        }
    }
    Ok(n)
}

/// Sends BsfNotifications: a spawned task per notification, at most `max_in_flight` at once
/// (beyond it the notification is dropped and logged), retried with backoff on transport
/// failure, 5xx and 429.
#[derive(Clone)]
pub struct Notifier {
    client: SbiClient,
    config: NotifyConfig,
    slots: Arc<Semaphore>,
}

impl Notifier {
    pub fn new(client: SbiClient, config: NotifyConfig) -> Self {
        let slots = Arc::new(Semaphore::new(config.max_in_flight));
        Notifier { client, config, slots }
    }

    pub fn send(&self, uri: String, body: Value) {
        let Ok(permit) = self.slots.clone().try_acquire_owned() else {
            tracing::warn!(uri, "too many BsfNotifications in flight; one dropped");
            return;
        };
        let client = self.client.clone();
        let attempts = self.config.attempts;
        let mut backoff = Duration::from_millis(self.config.backoff_ms);
        tokio::spawn(async move {
            let _permit = permit;
            for attempt in 1..=attempts {
                let outcome = client.post(&uri).json(&body).send().await;
                let retry = match &outcome {
                    Ok(r) if r.status().is_success() => return,
                    Ok(r) => {
                        r.status().is_server_error() || r.status() == StatusCode::TOO_MANY_REQUESTS
                    }
                    Err(_) => true,
                };
                if !retry || attempt == attempts {
                    tracing::warn!(uri, status = ?outcome.as_ref().map(|r| r.status()).ok(),
                        "BsfNotification not delivered");
                    return;
                }
                tokio::time::sleep(backoff).await;
                backoff *= 2;
            }
        });
    }
}
