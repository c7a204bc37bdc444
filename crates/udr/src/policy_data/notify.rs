//! PolicyDataChangeNotification (TS 29.519 §5.3.2, the `policyDataChangeNotification` callback
//! of subs-to-notify): what a change tells each subscriber, and its delivery.
//!
//! **Recording** ([`record`]) runs on the store's writer thread inside the transaction of the
//! change: each subscription seeing the change gets one outbox row holding one
//! PolicyDataChangeNotification, built from the stored JSON bytes without re-encoding them. The
//! write's answer therefore never waits for a subscriber, and a notification exists exactly when
//! its change was committed.
//!
//! **Delivery** ([`run`]) is one background task. It reads committed outbox rows in `seq` order
//! (woken after each write that recorded some, and at start, so rows left by a stopped UDR go
//! out first), keeps one queue per subscription, and POSTs each queue's head as one array of up
//! to `batch_size` notifications, one request per subscription at a time (so a subscriber sees
//! its notifications in order) and at most `max_in_flight` overall. Subscriptions that share a
//! `notificationUri` (a PCF giving one callback to all its subscriptions) share requests: the
//! heads of other ready queues for the same URI fill the array up to `batch_size`, each item
//! naming its UE (and `notifId`) as TS 29.519 has it, so a consumer tells them apart exactly as
//! when they come one per request; under load this is one request per commit and URI rather
//! than one per notification. A 2xx deletes the rows; a
//! transport failure, 5xx, 408 or 429 is retried with doubling backoff (up to `attempts`); any
//! other answer drops them (the subscriber refused them). At most `max_queued` notifications are
//! held in memory; the rest wait in the table and are read as the queues drain. Delivery is at
//! least once: rows delivered but not yet deleted when the UDR stops are sent again at start.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use sbi::client::SbiClient;
use serde_json::Value;
use tokio::sync::{watch, Notify};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::config::NotifyConfig;
use super::ids::{self, Key, Kind};
use super::store::PolicyDataStore;
use super::subs_to_notify::{Seen, SubsIndex, Subscription};

/// Counters of the delivery since start, on the UDR's `/metrics` once [`NotifyStats::register`]ed
/// (they count whether or not they are registered, so the delivery never checks).
#[derive(Debug, Default)]
pub struct NotifyStats {
    /// Notifications recorded (outbox rows written).
    pub recorded: Counter,
    /// Notifications acknowledged by their subscriber.
    pub delivered: Counter,
    /// Requests that failed and were retried.
    pub retried: Counter,
    /// Notifications given up (refused by the subscriber, or out of attempts).
    pub dropped: Counter,
}

impl NotifyStats {
    /// Makes the counters part of `registry` (the UDR's `/metrics`; OpenMetrics adds `_total`).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "udr_policy_data_notifications_recorded",
            "PolicyDataChangeNotifications recorded for subscribers (in the transaction of the change)",
            self.recorded.clone(),
        );
        registry.register(
            "udr_policy_data_notifications_delivered",
            "PolicyDataChangeNotifications acknowledged by their subscriber",
            self.delivered.clone(),
        );
        registry.register(
            "udr_policy_data_notification_retries",
            "Notification requests that failed and were retried",
            self.retried.clone(),
        );
        registry.register(
            "udr_policy_data_notifications_dropped",
            "PolicyDataChangeNotifications given up (refused by the subscriber, or out of attempts)",
            self.dropped.clone(),
        );
    }
}

/// The attribute of PolicyDataChangeNotification carrying a resource's new data; `None` for
/// MBS session policy data, which it cannot carry (such resources cannot be monitored).
fn data_attribute(key: &Key) -> Option<&'static str> {
    Some(match key.kind {
        Kind::Ue => match key.part.as_str() {
            ids::AM_DATA => "amPolicyData",
            ids::UE_POLICY_SET => "uePolicySet",
            ids::SM_DATA => "smPolicyData",
            ids::OPERATOR_SPECIFIC_DATA => "opSpecDataMap",
            _ => "usageMonData",
        },
        Kind::Plmn => "plmnUePolicySet",
        Kind::Sponsor => "SponsorConnectivityData",
        Kind::Bdt => "bdtData",
        Kind::Slice => "slicePolicyData",
        Kind::Mbs => return None,
    })
}

fn push_str(out: &mut Vec<u8>, s: &str) {
    // Serialising a &str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// `,"ueId":"..."` and the other identifiers of the changed resource, and `notifId`.
fn push_ids(out: &mut Vec<u8>, key: &Key, sub: &Subscription) {
    match key.kind {
        Kind::Ue => {
            out.extend_from_slice(b",\"ueId\":");
            push_str(out, &key.id);
            if let Some(u) = key.usage_mon_id() {
                out.extend_from_slice(b",\"usageMonId\":");
                push_str(out, u);
            }
        }
        Kind::Plmn => {
            out.extend_from_slice(b",\"plmnId\":");
            out.extend_from_slice(ids::plmn_id_json(&key.id).to_string().as_bytes());
        }
        Kind::Sponsor => {
            out.extend_from_slice(b",\"sponsorId\":");
            push_str(out, &key.id);
        }
        Kind::Bdt => {
            out.extend_from_slice(b",\"bdtRefId\":");
            push_str(out, &key.id);
        }
        Kind::Slice => {
            out.extend_from_slice(b",\"snssai\":");
            out.extend_from_slice(ids::snssai_json(&key.id).to_string().as_bytes());
        }
        Kind::Mbs => {}
    }
    if let Some(n) = &sub.notif_id {
        out.extend_from_slice(b",\"notifId\":");
        push_str(out, n);
    }
    out.push(b'}');
}

/// The URI of the resource, written with the base (apiRoot and API prefix) the subscriber used.
fn resource_uri(base: &str, path: &str) -> String {
    format!("{base}policy-data/{path}")
}

/// `doc` without the values at `pointers`.
fn without(mut doc: Value, pointers: &[&str]) -> Value {
    for p in pointers {
        let Some((parent, last)) = p.rsplit_once('/') else { continue };
        let last = last.replace("~1", "/").replace("~0", "~");
        match doc.pointer_mut(parent) {
            Some(Value::Object(o)) => {
                o.remove(&last);
            }
            Some(Value::Array(a)) => {
                if let Ok(i) = last.parse::<usize>() {
                    if i < a.len() {
                        a.remove(i);
                    }
                }
            }
            _ => {}
        }
    }
    doc
}

fn parse(bytes: Option<&[u8]>) -> Value {
    bytes.and_then(|b| serde_json::from_slice(b).ok()).unwrap_or(Value::Null)
}

/// The notification `sub` gets for a change of `key` (`old` -> `new`, `None` new meaning
/// deleted), or `None` when the change does not concern it (only excluded fragments changed,
/// or none of its monitored fragments).
fn item_for(
    sub: &Subscription,
    key: &Key,
    path: &str,
    old: Option<&[u8]>,
    new: Option<&[u8]>,
) -> Option<Vec<u8>> {
    let seen = sub.seen(path)?;
    let base = match &seen {
        Seen::Whole(m) => &m.base,
        Seen::Fragment(f) => &f.resource.base,
    };
    let mut out = Vec::with_capacity(64 + new.map_or(0, <[u8]>::len));
    let Some(new) = new else {
        out.extend_from_slice(b"{\"delResources\":[");
        push_str(&mut out, &resource_uri(base, path));
        out.push(b']');
        push_ids(&mut out, key, sub);
        return Some(out);
    };
    match seen {
        Seen::Whole(_) => {
            let excluded: Vec<&str> = sub.excluded_items(path).collect();
            if !excluded.is_empty()
                && old.is_some()
                && without(parse(old), &excluded) == without(parse(Some(new)), &excluded)
            {
                return None;
            }
            let attr = data_attribute(key)?;
            out.extend_from_slice(b"{\"");
            out.extend_from_slice(attr.as_bytes());
            out.extend_from_slice(b"\":");
            out.extend_from_slice(new);
        }
        Seen::Fragment(f) => {
            let (old_v, new_v) = (parse(old), parse(Some(new)));
            let mut items = Vec::new();
            for p in &f.items {
                let (a, b) = (old_v.pointer(p), new_v.pointer(p));
                if a != b {
                    items.push(
                        serde_json::json!({"item": p, "value": b.cloned().unwrap_or(Value::Null)}),
                    );
                }
            }
            if items.is_empty() {
                return None;
            }
            let frag =
                serde_json::json!([{"resourceId": resource_uri(base, path), "notifItems": items}]);
            out.extend_from_slice(b"{\"reportedFragments\":");
            out.extend_from_slice(frag.to_string().as_bytes());
        }
    }
    push_ids(&mut out, key, sub);
    Some(out)
}

/// Records, inside the change's transaction (through `outbox`, which appends one row), one outbox row per subscription that must hear of
/// the change of `key` from `old` to `new` (`None`: deleted). Returns how many.
pub fn record(
    outbox: &mut dyn FnMut(&str, &[u8]) -> ::store::Result<()>,
    subs: &SubsIndex,
    key: &Key,
    old: Option<&[u8]>,
    new: Option<&[u8]>,
) -> ::store::Result<usize> {
    if subs.is_empty() {
        return Ok(0);
    }
    let path = key.path();
    let mut n = 0;
    for sub in subs.matching(&path) {
        if let Some(item) = item_for(&sub, key, &path, old, new) {
            outbox(&sub.id, &item)?;
            n += 1;
        }
    }
    Ok(n)
}

struct Entry {
    seq: i64,
    item: Vec<u8>,
}

#[derive(Default)]
struct SubQueue {
    items: VecDeque<Entry>,
    /// Items of the head currently being sent (0: none in flight).
    sending: usize,
    /// Failed attempts of the head.
    failures: u32,
    retry_at: Option<Instant>,
}

/// How many leading items of which subscription's queue one request carries.
type Carried = Vec<(String, usize)>;

/// How far down the ready list a request looks for other subscriptions of its URI: bounds the
/// work per request when many subscriptions wait.
const COALESCE_SCAN: usize = 256;

/// The result of one request.
enum Outcome {
    Delivered,
    Retry(String),
    Refused(StatusCode),
}

struct Delivery {
    db: Arc<dyn PolicyDataStore>,
    subs: Arc<SubsIndex>,
    client: SbiClient,
    config: NotifyConfig,
    stats: Arc<NotifyStats>,
    queues: HashMap<String, SubQueue>,
    /// Subscriptions with items, nothing in flight and no retry pending.
    ready: VecDeque<String>,
    queued: usize,
    /// Highest seq read from the outbox.
    last_seq: i64,
    /// The last read stopped at its limit: more rows wait in the table.
    more: bool,
    sending: JoinSet<(Carried, Outcome)>,
    done: Vec<i64>,
    deleting: JoinSet<::store::Result<()>>,
}

/// The delivery task: runs until `stop` turns true. `wake` is notified after each write that
/// recorded notifications.
pub async fn run(
    db: Arc<dyn PolicyDataStore>,
    subs: Arc<SubsIndex>,
    client: SbiClient,
    config: NotifyConfig,
    stats: Arc<NotifyStats>,
    wake: Arc<Notify>,
    mut stop: watch::Receiver<bool>,
) {
    let mut d = Delivery {
        db,
        subs,
        client,
        config,
        stats,
        queues: HashMap::new(),
        ready: VecDeque::new(),
        queued: 0,
        last_seq: 0,
        more: true,
        sending: JoinSet::new(),
        done: Vec::new(),
        deleting: JoinSet::new(),
    };
    // A safety net only: every write that records notifications wakes the task.
    let mut poll = tokio::time::interval(Duration::from_secs(1));
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut read_due = true;
    loop {
        if read_due && d.queued < d.config.max_queued {
            read_due = false;
            d.read().await;
        }
        d.dispatch();
        d.flush_deletes();
        let next_retry = d.queues.values().filter_map(|q| q.retry_at).min();
        let sleep = async {
            match next_retry {
                Some(t) => tokio::time::sleep_until(t).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = stop.changed() => break,
            _ = wake.notified() => read_due = true,
            _ = poll.tick() => read_due = true,
            Some(r) = d.sending.join_next() => {
                if let Ok((carried, outcome)) = r {
                    for (id, n) in carried {
                        d.finished(id, n, &outcome);
                    }
                }
                // Room freed in memory: rows left in the table can come in.
                read_due |= d.more && d.queued < d.config.max_queued / 2;
            }
            Some(r) = d.deleting.join_next() => {
                if let Ok(Err(e)) = r {
                    tracing::warn!(error = %e, "delivered notifications not removed from the outbox; they may be sent again after a restart");
                }
            }
            _ = sleep => d.wake_retries(),
        }
    }
    d.sending.abort_all();
    // Let the last deletions commit: what they name was delivered.
    d.flush_deletes();
    while d.deleting.join_next().await.is_some() {}
}

impl Delivery {
    async fn read(&mut self) {
        let room = self.config.max_queued.saturating_sub(self.queued).min(4096);
        if room == 0 {
            return;
        }
        let rows = match self.db.read_outbox(self.last_seq, room).await {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!(error = %e, "notification outbox not readable; retried");
                return;
            }
        };
        self.more = rows.len() == room;
        for row in rows {
            self.last_seq = self.last_seq.max(row.seq);
            let q = self.queues.entry(row.subs_id.clone()).or_default();
            let idle = q.items.is_empty() && q.sending == 0 && q.retry_at.is_none();
            q.items.push_back(Entry { seq: row.seq, item: row.item });
            self.queued += 1;
            if idle {
                self.ready.push_back(row.subs_id);
            }
        }
    }

    /// Starts requests for ready subscriptions while there is room.
    fn dispatch(&mut self) {
        while self.sending.len() < self.config.max_in_flight {
            let Some(id) = self.ready.pop_front() else { return };
            let Some(sub) = self.subs.get(&id) else {
                self.drop_ended(&id);
                continue;
            };
            let uri = sub.notification_uri.clone();
            let mut body = Vec::new();
            let room = self.config.batch_size;
            let mut count = self.take_head(&id, room, &mut body);
            if count == 0 {
                self.queues.remove(&id);
                continue;
            }
            let mut carried: Carried = vec![(id, count)];
            let mut i = 0;
            while count < room && i < self.ready.len().min(COALESCE_SCAN) {
                let same_uri = self.subs.get(&self.ready[i]).map(|o| o.notification_uri == uri);
                match same_uri {
                    Some(true) => {
                        let Some(other) = self.ready.remove(i) else { break };
                        let n = self.take_head(&other, room - count, &mut body);
                        count += n;
                        if n == 0 {
                            self.queues.remove(&other);
                        } else {
                            carried.push((other, n));
                        }
                    }
                    Some(false) => i += 1,
                    None => {
                        // Ended meanwhile: its rows go as for any ended subscription.
                        if let Some(other) = self.ready.remove(i) {
                            self.drop_ended(&other);
                        }
                    }
                }
            }
            body.push(b']');
            let client = self.client.clone();
            self.sending.spawn(async move {
                let r = client
                    .post(&uri)
                    .header(http::header::CONTENT_TYPE, sbi::body::JSON)
                    .body(Bytes::from(body))
                    .send()
                    .await;
                let outcome = match r {
                    Ok(r) if r.status().is_success() => Outcome::Delivered,
                    Ok(r)
                        if r.status().is_server_error()
                            || r.status() == StatusCode::TOO_MANY_REQUESTS
                            || r.status() == StatusCode::REQUEST_TIMEOUT =>
                    {
                        Outcome::Retry(format!("answered {}", r.status()))
                    }
                    Ok(r) => Outcome::Refused(r.status()),
                    Err(e) => Outcome::Retry(e.to_string()),
                };
                (carried, outcome)
            });
        }
    }

    /// A subscription that ended (deleted or expired): its rows went with it; orphans recorded
    /// while it was being deleted are removed here.
    fn drop_ended(&mut self, id: &str) {
        let q = self.queues.remove(id).unwrap_or_default();
        self.queued -= q.items.len();
        self.done.extend(q.items.iter().map(|e| e.seq));
    }

    /// Appends up to `room` leading items of `id`'s queue to the array `body` (opening it when
    /// empty) and marks them in flight; returns how many.
    fn take_head(&mut self, id: &str, room: usize, body: &mut Vec<u8>) -> usize {
        let Some(q) = self.queues.get_mut(id) else { return 0 };
        let n = q.items.len().min(room);
        if n == 0 {
            return 0;
        }
        q.sending = n;
        body.reserve(1 + q.items.iter().take(n).map(|e| e.item.len() + 1).sum::<usize>());
        for e in q.items.iter().take(n) {
            body.push(if body.is_empty() { b'[' } else { b',' });
            body.extend_from_slice(&e.item);
        }
        n
    }

    fn finished(&mut self, id: String, n: usize, outcome: &Outcome) {
        let Some(q) = self.queues.get_mut(&id) else { return };
        q.sending = 0;
        let give_up = |q: &mut SubQueue, done: &mut Vec<i64>| {
            for e in q.items.drain(..n.min(q.items.len())) {
                done.push(e.seq);
            }
            q.failures = 0;
        };
        match outcome {
            Outcome::Delivered => {
                self.stats.delivered.inc_by(n as u64);
                give_up(q, &mut self.done);
                self.queued -= n;
            }
            Outcome::Refused(status) => {
                tracing::warn!(subs_id = id, %status, count = n, "subscriber refused policy data notifications; dropped");
                self.stats.dropped.inc_by(n as u64);
                give_up(q, &mut self.done);
                self.queued -= n;
            }
            Outcome::Retry(why) => {
                q.failures += 1;
                let attempts = self.config.attempts;
                if attempts > 0 && q.failures >= attempts {
                    tracing::warn!(
                        subs_id = id,
                        reason = why,
                        count = n,
                        attempts,
                        "policy data notifications not delivered; dropped"
                    );
                    self.stats.dropped.inc_by(n as u64);
                    give_up(q, &mut self.done);
                    self.queued -= n;
                } else {
                    self.stats.retried.inc();
                    let shift = (q.failures - 1).min(20);
                    let wait = self
                        .config
                        .backoff_ms
                        .saturating_mul(1 << shift)
                        .min(self.config.max_backoff_ms);
                    tracing::debug!(
                        subs_id = id,
                        reason = why,
                        wait_ms = wait,
                        "policy data notification retried"
                    );
                    q.retry_at = Some(Instant::now() + Duration::from_millis(wait));
                    return;
                }
            }
        }
        if q.items.is_empty() {
            self.queues.remove(&id);
        } else {
            self.ready.push_back(id);
        }
    }

    fn wake_retries(&mut self) {
        let now = Instant::now();
        for (id, q) in &mut self.queues {
            if q.retry_at.is_some_and(|t| t <= now) {
                q.retry_at = None;
                self.ready.push_back(id.clone());
            }
        }
    }

    /// Removes delivered rows, one write job at a time (the next carries all that finished
    /// meanwhile, so deletions batch under load).
    fn flush_deletes(&mut self) {
        if self.done.is_empty() || !self.deleting.is_empty() {
            return;
        }
        let seqs = std::mem::take(&mut self.done);
        let db = self.db.clone();
        self.deleting.spawn(async move { db.delete_outbox(seqs).await });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy_data::subs_to_notify;
    use serde_json::json;

    fn sub(v: Value) -> Subscription {
        let b = Bytes::from(serde_json::to_vec(&v).unwrap());
        subs_to_notify::decode("s1", b, v, 0, 0).unwrap()
    }

    fn item(
        s: &Subscription,
        key: &Key,
        old: Option<&Value>,
        new: Option<&Value>,
    ) -> Option<Value> {
        let old = old.map(|v| serde_json::to_vec(v).unwrap());
        let new = new.map(|v| serde_json::to_vec(v).unwrap());
        item_for(s, key, &key.path(), old.as_deref(), new.as_deref())
            .map(|b| serde_json::from_slice(&b).unwrap())
    }

    const ROOT: &str = "http://udr:7001/nudr-dr/v2/policy-data/";

    #[test]
    fn whole_resource_changes_and_deletions() {
        let s = sub(json!({"notificationUri": "http://pcf/n", "notifId": "n1",
            "monitoredResourceUris": [format!("{ROOT}ues/imsi-001010000000001")]}));
        let key = Key::usage_mon("imsi-001010000000001", "u1");
        let v = json!({"limitId": "u1"});
        assert_eq!(
            item(&s, &key, None, Some(&v)).unwrap(),
            json!({"usageMonData": {"limitId": "u1"}, "ueId": "imsi-001010000000001", "usageMonId": "u1", "notifId": "n1"})
        );
        assert_eq!(
            item(&s, &key, Some(&v), None).unwrap(),
            json!({"delResources": [format!("{ROOT}ues/imsi-001010000000001/sm-data/u1")],
                   "ueId": "imsi-001010000000001", "usageMonId": "u1", "notifId": "n1"})
        );
        let slice = sub(json!({"notificationUri": "http://pcf/n",
            "monitoredResourceUris": [format!("{ROOT}slice-control-data/1-00000a")]}));
        let key = Key::other(Kind::Slice, "1-00000a");
        let got = item(&slice, &key, None, Some(&json!({"mbrUl": "1 Gbps"}))).unwrap();
        assert_eq!(got["snssai"], json!({"sst": 1, "sd": "00000a"}));
        assert!(item(&slice, &Key::other(Kind::Slice, "2"), None, Some(&json!({}))).is_none());
    }

    #[test]
    fn fragments_and_exclusions() {
        let uri = format!("{ROOT}ues/imsi-001010000000001/sm-data");
        let key = Key::ue("imsi-001010000000001", ids::SM_DATA);
        let old =
            json!({"smPolicySnssaiData": {}, "umData": {"a": {"limitId": "a"}}, "suppFeat": "1"});
        let new =
            json!({"smPolicySnssaiData": {}, "umData": {"a": {"limitId": "a"}}, "suppFeat": "2"});
        let frag = sub(json!({"notificationUri": "http://pcf/n", "monitoredResourceUris": [],
            "monResItems": [{"monResourceUri": uri, "items": ["/umData", "suppFeat"]}]}));
        let got = item(&frag, &key, Some(&old), Some(&new)).unwrap();
        assert_eq!(
            got["reportedFragments"],
            json!([{"resourceId": uri, "notifItems": [{"item": "/suppFeat", "value": "2"}]}])
        );
        let mut same_um = new.clone();
        same_um["suppFeat"] = json!("1");
        assert!(
            item(&frag, &key, Some(&old), Some(&same_um)).is_none(),
            "nothing monitored changed"
        );
        let excl = sub(json!({"notificationUri": "http://pcf/n", "monitoredResourceUris": [uri],
            "excludedResItems": [{"monResourceUri": uri, "items": ["/suppFeat"]}]}));
        assert!(
            item(&excl, &key, Some(&old), Some(&new)).is_none(),
            "only an excluded item changed"
        );
        let mut um = new.clone();
        um["umData"]["a"]["allowedUsage"] = json!({"totalVolume": 1});
        assert!(item(&excl, &key, Some(&old), Some(&um)).unwrap().get("smPolicyData").is_some());
    }
}
