//! Policy data subscriptions (TS 29.519 §5.2.12 and §5.2.13, `subs-to-notify`):
//! CreateIndividualPolicyDataSubscription, ReplaceIndividualPolicyDataSubscription,
//! DeleteIndividualPolicyDataSubscription, their in-memory index, and their expiry.
//!
//! The index maps each monitored resource's canonical path (`ids`) to the subscriptions
//! monitoring it, so a change looks up the few segment prefixes of its own path and nothing
//! else; with no subscription at all a change costs one atomic load. Subscriptions are
//! persisted and loaded at start; a notification's outbox row is written in the same transaction
//! as the change (see `store` and `notify`).

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use bytes::Bytes;
use http::{header, HeaderValue, StatusCode};
use nf::Answer;
use sbi::problem::cause;
use sbi::{body as sbi_body, empty_response, ProblemDetails, Response, SbiRequest};
use serde_json::Value;

use super::ids::{self, Monitored};
use super::model::{self, Errors};
use super::{store, NUDR_DR_ROOT};
use crate::context::Udr;

/// Nudr application error (TS 29.504): no subscription with this id.
pub const SUBSCRIPTION_NOT_FOUND: &str = "SUBSCRIPTION_NOT_FOUND";

/// A fragment of a resource (ResourceItem): the resource and JSON pointers into it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fragment {
    pub resource: Monitored,
    /// JSON pointers relative to the resource (`/umData/limit1`).
    pub items: Vec<String>,
}

/// One PolicyDataSubscription, decoded for matching.
#[derive(Debug, Clone)]
pub struct Subscription {
    pub id: String,
    pub notification_uri: String,
    pub notif_id: Option<String>,
    /// Whole resources monitored (`monitoredResourceUris`).
    pub monitored: Vec<Monitored>,
    /// Fragments monitored (`monResItems`): a change elsewhere in the resource is not reported.
    pub fragments: Vec<Fragment>,
    /// Fragments whose changes alone are not reported (`excludedResItems`).
    pub excluded: Vec<Fragment>,
    /// Milliseconds since the epoch, when the subscription ends.
    pub expiry_ms: Option<i64>,
    /// The PolicyDataSubscription as answered and stored.
    pub json: Bytes,
}

/// How a subscription sees a change: through a whole-resource monitor or a fragment monitor.
pub enum Seen<'a> {
    Whole(&'a Monitored),
    Fragment(&'a Fragment),
}

#[derive(Default)]
struct Inner {
    by_id: HashMap<String, Arc<Subscription>>,
    /// Canonical path -> subscriptions monitoring it (whole or fragment).
    by_path: HashMap<String, Vec<Arc<Subscription>>>,
    /// (expiry, id) of the subscriptions that expire.
    expiries: BTreeSet<(i64, String)>,
}

/// The subscriptions held, indexed by the paths they monitor.
#[derive(Default)]
pub struct SubsIndex {
    inner: RwLock<Inner>,
    any: AtomicBool,
}

impl Subscription {
    fn paths(&self) -> impl Iterator<Item = &str> {
        let mut seen: Vec<&str> = Vec::new();
        self.monitored.iter().chain(self.fragments.iter().map(|f| &f.resource)).filter_map(
            move |m| {
                if seen.contains(&m.path.as_str()) {
                    None
                } else {
                    seen.push(&m.path);
                    Some(m.path.as_str())
                }
            },
        )
    }

    /// The monitor of this subscription that sees a change of `path` (a fragment monitor only
    /// for the resource itself), whole-resource monitors first.
    pub fn seen(&self, path: &str) -> Option<Seen<'_>> {
        let covers = |m: &Monitored| {
            path == m.path
                || (path.starts_with(&m.path) && path.as_bytes().get(m.path.len()) == Some(&b'/'))
        };
        if let Some(m) = self.monitored.iter().find(|m| covers(m)) {
            return Some(Seen::Whole(m));
        }
        self.fragments.iter().find(|f| f.resource.path == path).map(Seen::Fragment)
    }

    /// The pointers of `path` this subscription excludes.
    pub fn excluded_items<'a>(&'a self, path: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.excluded
            .iter()
            .filter(move |f| f.resource.path == path)
            .flat_map(|f| f.items.iter().map(String::as_str))
    }
}

impl SubsIndex {
    /// True when no subscription is held (a change then matches nothing, at no cost).
    pub fn is_empty(&self) -> bool {
        !self.any.load(Ordering::Acquire)
    }

    pub fn len(&self) -> usize {
        self.read().by_id.len()
    }

    fn read(&self) -> RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Grows the tables to at most half full after a bulk load: a std `HashMap` more than half
    /// full doubles once under steady churn of new keys (subscription ids), hours into a steady
    /// load (docs/BENCHMARKS.md "Session s31"); taken now, that memory is there from the start.
    pub fn reserve_churn_room(&self) {
        let mut g = self.write();
        let (ids, paths) = (g.by_id.len(), g.by_path.len());
        g.by_id.reserve(ids);
        g.by_path.reserve(paths);
    }

    pub fn get(&self, id: &str) -> Option<Arc<Subscription>> {
        self.read().by_id.get(id).cloned()
    }

    /// Adds or replaces a subscription; returns the one it replaced.
    pub fn insert(&self, sub: Subscription) -> Option<Arc<Subscription>> {
        self.insert_arc(Arc::new(sub))
    }

    fn insert_arc(&self, sub: Arc<Subscription>) -> Option<Arc<Subscription>> {
        let mut g = self.write();
        let old = g.by_id.remove(&sub.id);
        if let Some(old) = &old {
            unindex(&mut g, old);
        }
        for p in sub.paths() {
            g.by_path.entry(p.to_owned()).or_default().push(sub.clone());
        }
        if let Some(e) = sub.expiry_ms {
            g.expiries.insert((e, sub.id.clone()));
        }
        g.by_id.insert(sub.id.clone(), sub);
        self.any.store(true, Ordering::Release);
        old
    }

    /// Removes a subscription; returns it (`None`: there was none).
    pub fn remove(&self, id: &str) -> Option<Arc<Subscription>> {
        let mut g = self.write();
        let old = g.by_id.remove(id)?;
        unindex(&mut g, &old);
        self.any.store(!g.by_id.is_empty(), Ordering::Release);
        Some(old)
    }

    /// Undoes [`insert`](Self::insert) or [`remove`](Self::remove) of `id` whose transaction
    /// did not commit: puts `before` back (or removes `id` when there was none).
    pub fn restore(&self, id: &str, before: Option<Arc<Subscription>>) {
        match before {
            Some(old) => {
                self.insert_arc(old);
            }
            None => {
                self.remove(id);
            }
        }
    }

    /// The subscriptions seeing a change of `path`, each once.
    pub fn matching(&self, path: &str) -> Vec<Arc<Subscription>> {
        let g = self.read();
        let mut out: Vec<Arc<Subscription>> = Vec::new();
        for prefix in ids::prefixes(path) {
            if let Some(subs) = g.by_path.get(prefix) {
                for s in subs {
                    if !out.iter().any(|o| Arc::ptr_eq(o, s)) {
                        out.push(s.clone());
                    }
                }
            }
        }
        out
    }

    /// Ids of the subscriptions whose expiry is at or before `now_ms`.
    pub fn expired(&self, now_ms: i64) -> Vec<String> {
        let g = self.read();
        g.expiries.iter().take_while(|(e, _)| *e <= now_ms).map(|(_, id)| id.clone()).collect()
    }
}

fn unindex(g: &mut Inner, old: &Subscription) {
    for p in old.paths() {
        if let Some(list) = g.by_path.get_mut(p) {
            list.retain(|s| s.id != old.id);
            if list.is_empty() {
                g.by_path.remove(p);
            }
        }
    }
    if let Some(e) = old.expiry_ms {
        g.expiries.remove(&(e, old.id.clone()));
    }
}

/// Reads an item path (ItemPath) as a JSON pointer: `/umData/l1`, or an attribute name.
fn item_pointer(item: &str) -> Option<String> {
    if item.is_empty() {
        return None;
    }
    Some(if item.starts_with('/') { item.to_owned() } else { format!("/{item}") })
}

fn fragments(v: Option<&Value>, at: &str, errs: &mut Errors) -> Vec<Fragment> {
    let mut out = Vec::new();
    let Some(Value::Array(list)) = v else { return out };
    for (i, r) in list.iter().enumerate() {
        let (Some(uri), Some(Value::Array(items))) =
            (r.get("monResourceUri").and_then(Value::as_str), r.get("items"))
        else {
            continue; // the schema check reported it
        };
        let resource = match ids::parse_monitored_uri(uri) {
            Ok(m) if m.leaf => m,
            Ok(_) => {
                errs.bad(
                    format!("{at}/{i}/monResourceUri"),
                    "a fragment must be of one resource (not a UE's whole policy data or the \
                     BDT data collection)",
                );
                continue;
            }
            Err(why) => {
                errs.bad(format!("{at}/{i}/monResourceUri"), why);
                continue;
            }
        };
        let mut ptrs = Vec::new();
        for (j, item) in items.iter().enumerate() {
            match item.as_str().and_then(item_pointer) {
                Some(p) => ptrs.push(p),
                None => errs.bad(format!("{at}/{i}/items/{j}"), "must be a non-empty item path"),
            }
        }
        out.push(Fragment { resource, items: ptrs });
    }
    out
}

/// Checks a PolicyDataSubscription and decodes it for matching. `now_ms` and `max_expiry_secs`
/// bound its expiry: a later (or absent, when bounded) expiry is replaced in the stored and
/// answered document, as the UDR may shorten it. `supportedFeatures`, when present, is answered
/// with the features both sides support: none of the optional ones yet ("0").
pub fn decode(
    id: &str,
    bytes: Bytes,
    mut body: Value,
    now_ms: i64,
    max_expiry_secs: u64,
) -> Result<Subscription, ProblemDetails> {
    model::validate(&body, &model::POLICY_DATA_SUBSCRIPTION)?;
    let mut errs = Errors::default();
    let uri = body["notificationUri"].as_str().unwrap_or_default().to_owned();
    let absolute = uri
        .parse::<http::Uri>()
        .is_ok_and(|u| matches!(u.scheme_str(), Some("http" | "https")) && u.authority().is_some());
    if !absolute {
        errs.bad("/notificationUri", "must be an absolute http or https URI");
    }
    let mut monitored = Vec::new();
    if let Some(list) = body["monitoredResourceUris"].as_array() {
        for (i, u) in list.iter().enumerate() {
            match ids::parse_monitored_uri(u.as_str().unwrap_or_default()) {
                Ok(m) => monitored.push(m),
                Err(why) => errs.bad(format!("/monitoredResourceUris/{i}"), why),
            }
        }
    }
    let frags = fragments(body.get("monResItems"), "/monResItems", &mut errs);
    let excluded = fragments(body.get("excludedResItems"), "/excludedResItems", &mut errs);
    if monitored.is_empty() && frags.is_empty() && errs.is_empty() {
        errs.bad("/monitoredResourceUris", "name at least one resource (or use monResItems)");
    }
    let mut changed = false;
    let mut expiry_ms = match body.get("expiry").and_then(Value::as_str) {
        None => None,
        Some(s) => match chrono::DateTime::parse_from_rfc3339(s) {
            Ok(t) if t.timestamp_millis() > now_ms => Some(t.timestamp_millis()),
            _ => {
                errs.bad("/expiry", "must be a date-time in the future");
                None
            }
        },
    };
    errs.finish()?;
    if max_expiry_secs > 0 {
        let cap = now_ms.saturating_add(
            i64::try_from(max_expiry_secs.saturating_mul(1000)).unwrap_or(i64::MAX),
        );
        if expiry_ms.is_none_or(|e| e > cap) {
            expiry_ms = Some(cap);
            body["expiry"] = Value::from(rfc3339(cap));
            changed = true;
        }
    }
    if body.get("supportedFeatures").is_some_and(|f| f != "0") {
        body["supportedFeatures"] = Value::from("0");
        changed = true;
    }
    let json = if changed { Bytes::from(body.to_string()) } else { bytes };
    Ok(Subscription {
        id: id.to_owned(),
        notification_uri: uri,
        notif_id: body.get("notifId").and_then(Value::as_str).map(str::to_owned),
        monitored,
        fragments: frags,
        excluded,
        expiry_ms,
        json,
    })
}

fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn not_found(id: &str) -> ProblemDetails {
    ProblemDetails::new(
        StatusCode::NOT_FOUND,
        SUBSCRIPTION_NOT_FOUND,
        format!("no subscription {id}"),
    )
}

fn json_answer(status: StatusCode, json: Bytes) -> Response {
    let mut resp = http::Response::new(sbi::Body::from(json));
    *resp.status_mut() = status;
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(sbi_body::JSON));
    resp
}

/// The request body as the subscription keeps it, in an allocation of its own: `req.body` is a
/// slice of the HTTP/2 connection's read buffer, which a kept slice would hold whole (8 KiB or
/// more for a ~250-byte subscription) for as long as the subscription lives.
fn kept(body: &Bytes) -> Bytes {
    Bytes::copy_from_slice(body)
}

fn request_body(req: &SbiRequest) -> Result<Value, ProblemDetails> {
    sbi_body::require_media_type(req.headers(), &[sbi_body::JSON])?;
    sbi_body::decode_json(&req.body)
}

/// POST /subs-to-notify (CreateIndividualPolicyDataSubscription): 201 + Location + the
/// PolicyDataSubscription; 403 `INSUFFICIENT_RESOURCES` beyond `max_subscriptions`.
pub async fn create_individual_policy_data_subscription(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let pd = &udr.policy;
    let body = request_body(&req)?;
    let id = uuid::Uuid::new_v4().simple().to_string();
    let sub = decode(&id, kept(&req.body), body, now_ms(), pd.config.max_expiry_secs)?;
    let json = sub.json.clone();
    let created =
        pd.store.create_subscription(pd.subs.clone(), sub, pd.config.max_subscriptions).await?;
    if !created {
        return Err(ProblemDetails::new(
            StatusCode::FORBIDDEN,
            cause::INSUFFICIENT_RESOURCES,
            "the UDR holds its maximum number of policy data subscriptions",
        )
        .into());
    }
    let mut resp = json_answer(StatusCode::CREATED, json);
    let loc = format!("{}{NUDR_DR_ROOT}/policy-data/subs-to-notify/{id}", udr.api_root(Some(&req)));
    if let Ok(v) = HeaderValue::from_str(&loc) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    Ok(resp)
}

/// PUT /subs-to-notify/{subsId} (ReplaceIndividualPolicyDataSubscription): 200 + the
/// PolicyDataSubscription; 404 `SUBSCRIPTION_NOT_FOUND`.
pub async fn replace_individual_policy_data_subscription(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let pd = &udr.policy;
    let id = req.param("subsId").to_owned();
    let body = request_body(&req)?;
    let sub = decode(&id, kept(&req.body), body, now_ms(), pd.config.max_expiry_secs)?;
    let json = sub.json.clone();
    if !pd.store.replace_subscription(pd.subs.clone(), sub).await? {
        return Err(not_found(&id).into());
    }
    Ok(json_answer(StatusCode::OK, json))
}

/// DELETE /subs-to-notify/{subsId} (DeleteIndividualPolicyDataSubscription): 204; 404
/// `SUBSCRIPTION_NOT_FOUND`. Its undelivered notifications go with it.
pub async fn delete_individual_policy_data_subscription(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let pd = &udr.policy;
    let id = req.param("subsId").to_owned();
    let removed = pd.store.delete_subscriptions(Some(pd.subs.clone()), vec![id.clone()]).await?;
    if removed == 0 {
        return Err(not_found(&id).into());
    }
    Ok(empty_response(StatusCode::NO_CONTENT))
}

/// A stored subscription as the index holds it.
pub fn decode_stored(
    id: &str,
    expiry_ms: Option<i64>,
    json: Vec<u8>,
) -> Result<Subscription, String> {
    // Decoded without the expiry bound: it was applied when the subscription was made.
    let v = serde_json::from_slice::<Value>(&json).map_err(|e| e.to_string())?;
    let mut sub = decode(id, Bytes::from(json), v, i64::MIN, 0).map_err(|p| p.to_string())?;
    sub.expiry_ms = expiry_ms;
    Ok(sub)
}

/// Loads the stored subscriptions into the index, dropping those expired meanwhile; returns
/// how many are held.
pub async fn load(pd: &super::PolicyData) -> ::store::Result<usize> {
    let rows = pd.store.load_subscriptions().await?;
    let now = now_ms();
    let mut gone = Vec::new();
    for (id, expiry_ms, json) in rows {
        if expiry_ms.is_some_and(|e| e <= now) {
            gone.push(id);
            continue;
        }
        match decode_stored(&id, expiry_ms, json) {
            Ok(sub) => {
                pd.subs.insert(sub);
            }
            Err(e) => {
                tracing::error!(id, error = %e, "stored policy data subscription unreadable; skipped")
            }
        }
    }
    pd.subs.reserve_churn_room();
    if !gone.is_empty() {
        tracing::info!(expired = gone.len(), "policy data subscriptions expired while stopped");
        pd.store.delete_subscriptions(None, gone).await?;
    }
    Ok(pd.subs.len())
}

/// Ends expired subscriptions (with their undelivered notifications) once a second until
/// `stop`.
pub async fn expire(
    db: Arc<dyn store::PolicyDataStore>,
    subs: Arc<SubsIndex>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        let expired = subs.expired(now_ms());
        if expired.is_empty() {
            continue;
        }
        tracing::info!(count = expired.len(), "policy data subscriptions expired");
        if let Err(e) = db.delete_subscriptions(Some(subs.clone()), expired).await {
            tracing::warn!(error = %e, "expired subscriptions not removed from the store; retried at next start");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sub(id: &str, v: Value) -> Subscription {
        let bytes = Bytes::from(serde_json::to_vec(&v).unwrap());
        decode(id, bytes, v, 0, 0).unwrap()
    }

    #[test]
    fn a_loaded_index_does_not_grow_under_steady_churn() {
        let idx = SubsIndex::default();
        let root = "http://udr/nudr-dr/v2/policy-data/ues/imsi-00101";
        let one = |i: u32| {
            let ue = format!("{root}{:010}/sm-data", i % 5000);
            sub(
                &format!("s{i}"),
                json!({"notificationUri": "http://pcf/n", "monitoredResourceUris": [ue]}),
            )
        };
        let n = 5000;
        for i in 0..n {
            idx.insert(one(i));
        }
        idx.reserve_churn_room();
        let room = |idx: &SubsIndex| {
            let g = idx.read();
            (g.by_id.capacity(), g.by_path.capacity())
        };
        let loaded = room(&idx);
        assert!(loaded.0 >= 2 * n as usize, "{loaded:?}");
        // Twenty replacements per subscription, each with a new id: the count stays n.
        for i in n..21 * n {
            idx.remove(&format!("s{}", i - n));
            idx.insert(one(i));
        }
        assert_eq!(idx.len(), n as usize);
        let after = room(&idx);
        assert!(after.0 <= loaded.0 && after.1 <= loaded.1, "{loaded:?} at load, {after:?} after");
    }

    #[test]
    fn index_matches_by_path_prefix_once() {
        let idx = SubsIndex::default();
        assert!(idx.is_empty());
        let root = "http://udr/nudr-dr/v2/policy-data/";
        idx.insert(sub(
            "a",
            json!({"notificationUri": "http://pcf/n", "monitoredResourceUris": [
                format!("{root}ues/imsi-001010000000001"),
                format!("{root}ues/imsi-001010000000001/sm-data"),
            ]}),
        ));
        idx.insert(sub(
            "b",
            json!({"notificationUri": "http://pcf/n", "monitoredResourceUris": [
                format!("{root}bdt-data"),
            ]}),
        ));
        let m = idx.matching("ues/imsi-001010000000001/sm-data/um1");
        assert_eq!(m.len(), 1);
        assert!(matches!(m[0].seen("ues/imsi-001010000000001/sm-data/um1"), Some(Seen::Whole(_))));
        assert_eq!(idx.matching("bdt-data/r1").len(), 1);
        assert!(idx.matching("ues/imsi-001010000000002/sm-data").is_empty());
        assert!(idx.matching("ues/imsi-00101000000000").is_empty());
        assert!(idx.remove("a").is_some());
        assert!(idx.remove("a").is_none());
        assert!(idx.matching("ues/imsi-001010000000001/sm-data").is_empty());
        let b = idx.remove("b");
        assert!(idx.is_empty());
        idx.restore("b", b);
        assert_eq!(idx.matching("bdt-data/r1").len(), 1);
        idx.restore("b", None);
        assert!(idx.is_empty());
    }

    #[test]
    fn decode_lists_errors_and_bounds_expiry() {
        let e = decode(
            "x",
            Bytes::new(),
            json!({"notificationUri": "/relative", "monitoredResourceUris": ["http://u/nudr-dr/v2/policy-data/ues/imsi-1/sm-data", 5]}),
            0,
            0,
        )
        .unwrap_err();
        // The schema check fails first, on the number.
        assert_eq!(e.invalid_params.len(), 1, "{e:?}");
        let e = decode(
            "x",
            Bytes::new(),
            json!({"notificationUri": "/relative", "monitoredResourceUris": ["http://u/nudr-dr/v2/policy-data/ues/imsi-1/sm-data"],
                   "expiry": "2000-01-01T00:00:00Z"}),
            now_ms(),
            0,
        )
        .unwrap_err();
        let mut p: Vec<String> = e.invalid_params.into_iter().map(|p| p.param).collect();
        p.sort();
        assert_eq!(p, ["/expiry", "/monitoredResourceUris/0", "/notificationUri"]);
        let v = json!({"notificationUri": "http://pcf/n", "monitoredResourceUris": [
            "http://u/nudr-dr/v2/policy-data/ues/imsi-001010000000001/sm-data"], "supportedFeatures": "f"});
        let s = decode("x", Bytes::from_static(b"{}"), v, 1_000, 60).unwrap();
        assert_eq!(s.expiry_ms, Some(61_000));
        let answered: Value = serde_json::from_slice(&s.json).unwrap();
        assert_eq!(answered["expiry"], "1970-01-01T00:01:01.000Z");
        assert_eq!(answered["supportedFeatures"], "0");
        let e = decode(
            "x",
            Bytes::new(),
            json!({"notificationUri": "http://pcf/n", "monitoredResourceUris": []}),
            0,
            0,
        )
        .unwrap_err();
        assert_eq!(e.invalid_params[0].param, "/monitoredResourceUris");
    }
}
