//! NFStatusSubscribe, subscription update and NFStatusUnsubscribe (TS 29.510 §5.2.2.5,
//! §5.2.2.5A, §5.2.2.7), and the fan-out of NF events to matching subscriptions.

use std::sync::Arc;

use bytes::Bytes;
use chrono::{DateTime, SecondsFormat, Utc};
use http::{header, HeaderValue, StatusCode};
use nf::Answer;
use sbi::body::{self, JSON_PATCH_JSON};
use sbi::problem::cause;
use sbi::{empty_response, json_response, InvalidParam, ProblemDetails, SbiRequest};
use serde_json::{Map, Value};

use crate::context::{now_ms, Entry, Nrf};
use crate::models::{self, NotificationData, SubscriptionData, NOTIFICATION_EVENTS};
use crate::view::{self, ServiceForm};

pub const SUBSCRIPTIONS_PATH: &str = "/nnrf-nfm/v1/subscriptions";

/// SubscrCond (TS 29.510 §6.1.6.2.x), the forms fivecore evaluates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubscrCond {
    /// No condition: every NF instance.
    All,
    Instance(String),
    Instances(Vec<String>),
    NfType(String),
    Service(String),
    Services(Vec<String>),
    Group {
        nf_type: String,
        groups: Vec<String>,
    },
    Set(String),
}

impl SubscrCond {
    pub fn parse(cond: Option<&Map<String, Value>>) -> Result<SubscrCond, ProblemDetails> {
        let Some(c) = cond else { return Ok(SubscrCond::All) };
        let s = |k: &str| c.get(k).and_then(Value::as_str).map(str::to_owned);
        let list = |k: &str| {
            c.get(k)
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect::<Vec<_>>())
        };
        let parsed = if let Some(id) = s("nfInstanceId") {
            SubscrCond::Instance(id.to_ascii_lowercase())
        } else if let Some(ids) = list("nfInstanceIdList") {
            SubscrCond::Instances(ids.into_iter().map(|i| i.to_ascii_lowercase()).collect())
        } else if let Some(name) = s("serviceName") {
            SubscrCond::Service(name)
        } else if let Some(names) = list("serviceNameList") {
            SubscrCond::Services(names)
        } else if let Some(set) = s("nfSetId") {
            SubscrCond::Set(set)
        } else if let (Some(t), Some(g)) = (s("nfType"), s("nfGroupId")) {
            SubscrCond::Group { nf_type: t, groups: vec![g] }
        } else if let (Some(t), Some(g)) = (s("nfType"), list("nfGroupIdList")) {
            SubscrCond::Group { nf_type: t, groups: g }
        } else if let Some(t) = s("nfType") {
            if !models::is_nf_type(&t) {
                return Err(bad("/subscrCond/nfType", "unknown NF type"));
            }
            SubscrCond::NfType(t)
        } else {
            return Err(ProblemDetails::invalid_params(
                cause::OPTIONAL_IE_INCORRECT,
                vec![InvalidParam::new("/subscrCond", "condition not supported by this NRF")],
            ));
        };
        Ok(parsed)
    }

    pub fn matches(&self, e: &Entry) -> bool {
        match self {
            SubscrCond::All => true,
            SubscrCond::Instance(id) => e.key == *id,
            SubscrCond::Instances(ids) => ids.contains(&e.key),
            SubscrCond::NfType(t) => e.profile.nf_type == *t,
            SubscrCond::Service(n) => e.profile.has_service(n),
            SubscrCond::Services(ns) => ns.iter().any(|n| e.profile.has_service(n)),
            SubscrCond::Group { nf_type, groups } => {
                e.profile.nf_type == *nf_type && e.disc.group_ids.iter().any(|g| groups.contains(g))
            }
            SubscrCond::Set(set) => e.disc.set_ids.iter().any(|s| s == set),
        }
    }
}

/// One subscription: its SubscriptionData as answered (id and validityTime set) and what the
/// fan-out needs, parsed once.
#[derive(Debug)]
pub struct Subscription {
    pub data: SubscriptionData,
    pub cond: SubscrCond,
    pub expires_ms: u64,
    /// How its notifications carry services: as a map when its requesterFeatures has
    /// Service-Map (feature 1 of Nnrf_NFManagement), else as the array.
    pub form: ServiceForm,
}

impl Subscription {
    fn build(data: SubscriptionData) -> Result<Subscription, ProblemDetails> {
        let cond = SubscrCond::parse(data.subscr_cond.as_ref())?;
        let expires_ms = data
            .validity_time
            .as_deref()
            .and_then(parse_time)
            .ok_or_else(|| bad("/validityTime", "not a date-time"))?;
        let form = match data.extra.get("requesterFeatures") {
            None => ServiceForm::Array,
            Some(f) => f
                .as_str()
                .and_then(|f| ServiceForm::asked(Some(f), view::NFM_SERVICE_MAP))
                .ok_or_else(|| bad("/requesterFeatures", "not a SupportedFeatures string"))?,
        };
        Ok(Subscription { data, cond, expires_ms, form })
    }

    pub fn from_stored(v: Value) -> Result<Subscription, String> {
        let data: SubscriptionData = serde_json::from_value(v).map_err(|e| e.to_string())?;
        Subscription::build(data).map_err(|p| p.to_string())
    }

    fn wants(&self, event: &str) -> bool {
        self.data.req_notif_events.as_ref().is_none_or(|ev| ev.iter().any(|e| e == event))
    }
}

fn bad(param: &str, reason: &str) -> ProblemDetails {
    ProblemDetails::invalid_params(
        cause::MANDATORY_IE_INCORRECT,
        vec![InvalidParam::new(param, reason)],
    )
}

fn parse_time(s: &str) -> Option<u64> {
    DateTime::parse_from_rfc3339(s).ok().and_then(|t| u64::try_from(t.timestamp_millis()).ok())
}

fn format_time(ms: u64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms as i64)
        .unwrap_or_default()
        .to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// The validityTime granted for a requested one: at most `subscription_validity_secs` from now.
fn grant_validity(nrf: &Nrf, requested: Option<&str>) -> Result<u64, ProblemDetails> {
    let now = now_ms();
    let max = now + nrf.config.subscription_validity_secs * 1000;
    match requested {
        None => Ok(max),
        Some(t) => {
            let at = parse_time(t).ok_or_else(|| bad("/validityTime", "not a date-time"))?;
            if at <= now {
                return Err(bad("/validityTime", "lies in the past"));
            }
            Ok(at.min(max))
        }
    }
}

fn check_request(data: &SubscriptionData) -> Result<(), ProblemDetails> {
    let uri: Option<http::Uri> = data.nf_status_notification_uri.parse().ok();
    if !uri.is_some_and(|u| matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some())
    {
        return Err(bad("/nfStatusNotificationUri", "not an absolute http(s) URI"));
    }
    if let Some(events) = &data.req_notif_events {
        if let Some((i, _)) =
            events.iter().enumerate().find(|(_, e)| !NOTIFICATION_EVENTS.contains(&e.as_str()))
        {
            return Err(ProblemDetails::invalid_params(
                cause::OPTIONAL_IE_INCORRECT,
                vec![InvalidParam::new(format!("/reqNotifEvents/{i}"), "unknown event")],
            ));
        }
    }
    if let Some(c) = &data.notif_condition {
        if !c.monitored_attributes.is_empty() && !c.unmonitored_attributes.is_empty() {
            return Err(ProblemDetails::invalid_params(
                cause::OPTIONAL_IE_INCORRECT,
                vec![InvalidParam::new(
                    "/notifCondition",
                    "monitored and unmonitored attributes both set",
                )],
            ));
        }
    }
    Ok(())
}

/// POST /subscriptions: NFStatusSubscribe.
pub async fn subscribe(nrf: Arc<Nrf>, req: SbiRequest) -> Answer {
    let mut data: SubscriptionData = req.json()?;
    check_request(&data)?;
    let expires = grant_validity(&nrf, data.validity_time.as_deref())?;
    let id = uuid::Uuid::new_v4().simple().to_string();
    data.subscription_id = Some(id.clone());
    data.validity_time = Some(format_time(expires));
    let sub = Arc::new(Subscription::build(data)?);
    {
        // Reserve the slot before the store write so concurrent requests cannot overshoot.
        let mut table = nrf.write_subscriptions();
        if table.len() >= nrf.config.max_subscriptions {
            return Err(ProblemDetails::new(
                StatusCode::FORBIDDEN,
                cause::INSUFFICIENT_RESOURCES,
                format!(
                    "the NRF holds its maximum of {} subscriptions",
                    nrf.config.max_subscriptions
                ),
            )
            .into());
        }
        table.insert(id.clone(), sub.clone());
    }
    let body = serde_json::to_vec(&sub.data).unwrap_or_default();
    if let Err(e) = nrf.store.put_subscription(&id, body, expires).await {
        nrf.write_subscriptions().remove(&id);
        return Err(e.into());
    }
    let mut resp = json_response(StatusCode::CREATED, &answered(&sub.data))?;
    let location = format!("{}{SUBSCRIPTIONS_PATH}/{id}", nrf.api_root(Some(&req)));
    if let Ok(v) = HeaderValue::from_str(&location) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    Ok(resp)
}

fn live(nrf: &Nrf, id: &str) -> Result<Arc<Subscription>, ProblemDetails> {
    nrf.read_subscriptions()
        .get(id)
        .filter(|s| s.expires_ms > now_ms())
        .cloned()
        .ok_or_else(|| ProblemDetails::not_found(format!("no subscription {id}")))
}

/// PATCH /subscriptions/{subscriptionID}: only validityTime may change.
pub async fn update(nrf: Arc<Nrf>, req: SbiRequest) -> Answer {
    body::require_media_type(req.headers(), &[JSON_PATCH_JSON])?;
    let id = req.param("subscriptionID").to_owned();
    let _guard = nrf.lock_key(&id).await;
    let current = live(&nrf, &id)?;
    let mut doc = serde_json::to_value(&current.data)?;
    let before = doc.clone();
    body::apply_json_patch(&mut doc, &req.body)?;
    let changed: Vec<String> = models::diff(&before, &doc).into_iter().map(|c| c.path).collect();
    if let Some(p) = changed.iter().find(|p| *p != "/validityTime") {
        return Err(ProblemDetails::new(
            StatusCode::FORBIDDEN,
            cause::MODIFICATION_NOT_ALLOWED,
            format!("only validityTime may be modified, not {p}"),
        )
        .into());
    }
    let mut data = current.data.clone();
    let requested = doc.get("validityTime").and_then(Value::as_str);
    let expires = grant_validity(&nrf, requested)?;
    data.validity_time = Some(format_time(expires));
    let sub = Arc::new(Subscription {
        data,
        cond: current.cond.clone(),
        expires_ms: expires,
        form: current.form,
    });
    let body = serde_json::to_vec(&sub.data).unwrap_or_default();
    nrf.store.put_subscription(&id, body, expires).await?;
    nrf.write_subscriptions().insert(id, sub.clone());
    Ok(json_response(StatusCode::OK, &answered(&sub.data))?)
}

/// SubscriptionData as answered: requesterFeatures is write-only (kept in the store, since it
/// decides the notifications' form), nrfSupportedFeatures read-only: Service-Map, feature 1.
fn answered(data: &SubscriptionData) -> SubscriptionData {
    let mut data = data.clone();
    data.extra.remove("requesterFeatures");
    data.extra.insert("nrfSupportedFeatures".into(), Value::from("1"));
    data
}

/// DELETE /subscriptions/{subscriptionID}: NFStatusUnsubscribe.
pub async fn unsubscribe(nrf: Arc<Nrf>, req: SbiRequest) -> Answer {
    let id = req.param("subscriptionID").to_owned();
    let _guard = nrf.lock_key(&id).await;
    live(&nrf, &id)?;
    nrf.store.delete_subscription(&id).await?;
    nrf.write_subscriptions().remove(&id);
    Ok(empty_response(StatusCode::NO_CONTENT))
}

/// Removes expired subscriptions from memory and the store (background audit).
pub async fn expire(nrf: &Nrf) {
    let now = now_ms();
    let expired: Vec<String> = nrf
        .read_subscriptions()
        .iter()
        .filter(|(_, s)| s.expires_ms <= now)
        .map(|(id, _)| id.clone())
        .collect();
    for id in expired {
        let _guard = nrf.lock_key(&id).await;
        let still = nrf.read_subscriptions().get(&id).is_some_and(|s| s.expires_ms <= now);
        if !still {
            continue;
        }
        match nrf.store.delete_subscription(&id).await {
            Ok(_) => {
                nrf.write_subscriptions().remove(&id);
                tracing::info!(subscription = %id, "subscription expired");
            }
            Err(e) => {
                tracing::warn!(subscription = %id, error = %e, "cannot remove expired subscription")
            }
        }
    }
}

/// Notifies every matching subscription of `event` about `entry` (for NF_PROFILE_CHANGED,
/// `old` is the entry before the change). Returns at once: choosing the subscriptions and
/// building the bodies runs in a task of its own, off the request that caused the event.
pub fn publish(nrf: &Arc<Nrf>, event: &'static str, entry: &Arc<Entry>, old: Option<&Arc<Entry>>) {
    let (nrf, entry, old) = (nrf.clone(), entry.clone(), old.cloned());
    tokio::spawn(async move { fan_out(&nrf, event, &entry, old.as_deref()) });
}

fn fan_out(nrf: &Nrf, event: &'static str, entry: &Entry, old: Option<&Entry>) {
    let now = now_ms();
    let targets: Vec<Arc<Subscription>> = nrf
        .read_subscriptions()
        .values()
        .filter(|s| s.expires_ms > now && s.wants(event) && s.cond.matches(entry))
        .cloned()
        .collect();
    if targets.is_empty() {
        return;
    }
    let uri =
        format!("{}/nnrf-nfm/v1/nf-instances/{}", nrf.api_root(None), entry.profile.nf_instance_id);
    // ChangeItems only for subscriptions with a notifCondition: computed once, when one needs it.
    let mut changes: Option<Vec<models::ChangeItem>> = None;
    // Whole-profile bodies, one per services form (see [`Subscription::form`]).
    let mut whole: [Option<Bytes>; 2] = [None, None];
    for sub in targets {
        let body = match (&sub.data.notif_condition, event) {
            (Some(cond), models::NF_PROFILE_CHANGED) => {
                let changes = changes.get_or_insert_with(|| {
                    old.map_or_else(Vec::new, |old| {
                        models::diff(
                            &models::public_view(&old.value),
                            &models::public_view(&entry.value),
                        )
                    })
                });
                let selected: Vec<_> = changes
                    .iter()
                    .filter(|c| {
                        let hit = |attrs: &[String]| attrs.iter().any(|a| covers(a, &c.path));
                        if cond.monitored_attributes.is_empty() {
                            !hit(&cond.unmonitored_attributes)
                        } else {
                            hit(&cond.monitored_attributes)
                        }
                    })
                    .collect();
                if selected.is_empty() {
                    continue;
                }
                let n = NotificationData {
                    event,
                    nf_instance_uri: uri.clone(),
                    nf_profile: None,
                    profile_changes: Some(selected),
                };
                Bytes::from(serde_json::to_vec(&n).unwrap_or_default())
            }
            _ => whole[sub.form as usize]
                .get_or_insert_with(|| whole_notification(event, &uri, entry, sub.form))
                .clone(),
        };
        nrf.notifier.send(&sub.data.nf_status_notification_uri, body);
    }
}

/// NotificationData with the whole profile (none for NF_DEREGISTERED), built once per event and
/// shared by every subscriber: the entry's consumer view is already serialised, so it is
/// spliced in as bytes rather than cloned and encoded again.
fn whole_notification(event: &'static str, uri: &str, entry: &Entry, form: ServiceForm) -> Bytes {
    let head = NotificationData {
        event,
        nf_instance_uri: uri.to_owned(),
        nf_profile: None,
        profile_changes: None,
    };
    let mut out = serde_json::to_vec(&head).unwrap_or_default();
    if event != models::NF_DEREGISTERED && out.last() == Some(&b'}') {
        out.pop();
        out.reserve(entry.view.len(form, entry.view.all(), 0) + 16);
        out.extend_from_slice(b",\"nfProfile\":");
        entry.view.write(&mut out, form, entry.view.all(), 0);
        out.push(b'}');
    }
    Bytes::from(out)
}

/// Whether the monitored attribute `attr` (a JSON pointer, or a bare attribute name) covers a
/// change at `path`.
fn covers(attr: &str, path: &str) -> bool {
    let attr = if attr.starts_with('/') { attr.to_owned() } else { format!("/{attr}") };
    path == attr || path.starts_with(&format!("{attr}/")) || attr.starts_with(&format!("{path}/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_parse() {
        let m = |v: Value| v.as_object().cloned();
        assert_eq!(SubscrCond::parse(None).unwrap(), SubscrCond::All);
        assert_eq!(
            SubscrCond::parse(m(serde_json::json!({"nfType": "UDR"})).as_ref()).unwrap(),
            SubscrCond::NfType("UDR".into())
        );
        assert!(matches!(
            SubscrCond::parse(m(serde_json::json!({"nfType": "PCF", "nfGroupId": "g"})).as_ref()),
            Ok(SubscrCond::Group { .. })
        ));
        assert!(SubscrCond::parse(m(serde_json::json!({"amfSetId": "1"})).as_ref()).is_err());
    }

    #[test]
    fn attribute_coverage() {
        assert!(covers("/nfStatus", "/nfStatus"));
        assert!(covers("nfServices", "/nfServices/0/load"));
        assert!(!covers("/load", "/loadTimeStamp"));
    }

    #[test]
    fn times_round_trip() {
        let ms = 1_700_000_000_000;
        assert_eq!(parse_time(&format_time(ms)), Some(ms));
    }
}
