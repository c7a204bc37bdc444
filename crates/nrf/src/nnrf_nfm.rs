//! Nnrf_NFManagement (TS 29.510 §5.2.2, API /nnrf-nfm/v1): NFRegister, NFUpdate (PUT and
//! PATCH, heartbeats included), NFDeregister, NFProfile retrieval and NFList retrieval, and the
//! heartbeat audit that suspends silent NFs.

use std::sync::Arc;

use http::{header, HeaderValue, StatusCode};
use nf::{Answer, NfError};
use sbi::body::{self, JSON_PATCH_JSON};
use sbi::problem::cause;
use sbi::{empty_response, json_response, InvalidParam, ProblemDetails, SbiRequest};
use serde_json::{json, Value};

use crate::context::{now_ms, Entry, Nrf};
use crate::models::{self, NfProfile};
use crate::subscriptions::publish;
use crate::view::{self, ServiceForm};

pub const NF_INSTANCES_PATH: &str = "/nnrf-nfm/v1/nf-instances";

/// Attributes a heartbeat may carry (TS 29.510 §5.2.2.3.2); a PATCH touching only these is
/// answered 204 unless the NRF changed something itself.
const HEARTBEAT_ATTRIBUTES: &[&str] = &["/nfStatus", "/load", "/loadTimeStamp"];

fn too_large(nrf: &Nrf) -> ProblemDetails {
    ProblemDetails::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        cause::PAYLOAD_TOO_LARGE,
        format!("NF profile exceeds {} bytes", nrf.config.max_profile_bytes),
    )
}

/// Gives the profile the heartBeatTimer the NRF accepts: its own value when the NF proposes
/// none or one out of range. Returns whether it changed the profile.
fn negotiate_heartbeat(nrf: &Nrf, p: &mut NfProfile) -> bool {
    let c = &nrf.config;
    match p.heart_beat_timer {
        Some(t) if (c.heartbeat_min_secs..=c.heartbeat_max_secs).contains(&t) => false,
        _ => {
            p.heart_beat_timer = Some(c.heartbeat_timer_secs);
            true
        }
    }
}

fn with_etag(mut resp: sbi::Response, version: u64) -> sbi::Response {
    if let Ok(v) = HeaderValue::from_str(&store::document::etag(version)) {
        resp.headers_mut().insert(header::ETAG, v);
    }
    resp
}

fn to_value(p: &NfProfile) -> Result<Value, NfError> {
    Ok(serde_json::to_value(p)?)
}

/// Stores `profile`, swaps it into the index and notifies. The caller holds the key's lock.
async fn commit(
    nrf: &Arc<Nrf>,
    key: String,
    profile: NfProfile,
    value: Value,
) -> Result<(Arc<Entry>, Option<Arc<Entry>>), NfError> {
    let bytes = serde_json::to_vec(&value)?;
    let version = nrf.store.put_profile(&key, &profile.nf_type, bytes).await?;
    let entry = Arc::new(Entry::new(key, profile, value, version));
    let old = nrf.write_index().insert(entry.clone());
    match &old {
        None => publish(nrf, models::NF_REGISTERED, &entry, None),
        Some(o) if o.value != entry.value => {
            publish(nrf, models::NF_PROFILE_CHANGED, &entry, Some(o))
        }
        Some(_) => {}
    }
    Ok((entry, old))
}

/// PUT /nf-instances/{nfInstanceID}: NFRegister (201) or NFUpdate by replacement (200).
pub async fn register(nrf: Arc<Nrf>, req: SbiRequest) -> Answer {
    if req.body.len() > nrf.config.max_profile_bytes {
        return Err(too_large(&nrf).into());
    }
    let path_id = req.param("nfInstanceID");
    let mut profile: NfProfile = req.json()?;
    // The typed profile serialises back to the body's attributes (unknown ones included), and
    // this JSON is what gets stored and served: its formats are the ones to check.
    let mut value = to_value(&profile)?;
    profile.validate(path_id, &value)?;
    if negotiate_heartbeat(&nrf, &mut profile) {
        value = to_value(&profile)?;
    }
    let key = path_id.to_ascii_lowercase();
    let _guard = nrf.lock_key(&key).await;
    let (entry, old) = commit(&nrf, key, profile, value).await?;
    let status = if old.is_none() { StatusCode::CREATED } else { StatusCode::OK };
    let mut resp = with_etag(json_response(status, &entry.value)?, entry.version);
    if old.is_none() {
        let location = format!(
            "{}{NF_INSTANCES_PATH}/{}",
            nrf.api_root(Some(&req)),
            entry.profile.nf_instance_id
        );
        if let Ok(v) = HeaderValue::from_str(&location) {
            resp.headers_mut().insert(header::LOCATION, v);
        }
    }
    Ok(resp)
}

/// PATCH /nf-instances/{nfInstanceID}: NFUpdate by JSON patch, heartbeats included.
pub async fn update(nrf: Arc<Nrf>, req: SbiRequest) -> Answer {
    body::require_media_type(req.headers(), &[JSON_PATCH_JSON])?;
    let key = req.param("nfInstanceID").to_ascii_lowercase();
    let _guard = nrf.lock_key(&key).await;
    let current = nrf
        .entry(&key)
        .ok_or_else(|| ProblemDetails::not_found(format!("no NF instance {key}")))?;
    if let Some(tag) = req.headers().get(header::IF_MATCH).and_then(|v| v.to_str().ok()) {
        if tag.trim() != "*" && store::document::parse_etag(tag) != Some(current.version) {
            return Err(ProblemDetails::new(
                StatusCode::PRECONDITION_FAILED,
                cause::PRECONDITION_FAILED,
                "If-Match does not name the current version",
            )
            .into());
        }
    }
    let mut doc = current.value.clone();
    body::apply_json_patch(&mut doc, &req.body)?;
    let bytes = serde_json::to_vec(&doc)?;
    if bytes.len() > nrf.config.max_profile_bytes {
        return Err(ProblemDetails::invalid_params(
            cause::MANDATORY_IE_INCORRECT,
            vec![InvalidParam::new(
                "/",
                format!("patched profile exceeds {} bytes", nrf.config.max_profile_bytes),
            )],
        )
        .into());
    }
    let mut profile: NfProfile = body::decode_json(&bytes)?;
    if profile.nf_type != current.profile.nf_type {
        return Err(ProblemDetails::new(
            StatusCode::FORBIDDEN,
            cause::MODIFICATION_NOT_ALLOWED,
            "nfType cannot be changed",
        )
        .into());
    }
    profile.validate(&key, &doc)?;
    let nrf_changed = negotiate_heartbeat(&nrf, &mut profile);
    let value = if nrf_changed { to_value(&profile)? } else { doc };
    let changes = models::diff(&current.value, &value);
    if changes.is_empty() {
        // A heartbeat with nothing new: no write, just the liveness stamp.
        current.touch();
        return Ok(empty_response(StatusCode::NO_CONTENT));
    }
    let heartbeat_only =
        !nrf_changed && changes.iter().all(|c| HEARTBEAT_ATTRIBUTES.contains(&c.path.as_str()));
    let (entry, _) = commit(&nrf, key, profile, value).await?;
    if heartbeat_only {
        return Ok(with_etag(empty_response(StatusCode::NO_CONTENT), entry.version));
    }
    Ok(with_etag(json_response(StatusCode::OK, &entry.value)?, entry.version))
}

/// DELETE /nf-instances/{nfInstanceID}: NFDeregister.
pub async fn deregister(nrf: Arc<Nrf>, req: SbiRequest) -> Answer {
    let key = req.param("nfInstanceID").to_ascii_lowercase();
    let _guard = nrf.lock_key(&key).await;
    if nrf.entry(&key).is_none() {
        return Err(ProblemDetails::not_found(format!("no NF instance {key}")).into());
    }
    nrf.store.delete_profile(&key).await?;
    let old = nrf.write_index().remove(&key);
    if let Some(old) = old {
        publish(&nrf, models::NF_DEREGISTERED, &old, None);
    }
    Ok(empty_response(StatusCode::NO_CONTENT))
}

/// GET /nf-instances/{nfInstanceID}: NFProfile retrieval.
pub async fn get(nrf: Arc<Nrf>, req: SbiRequest) -> Answer {
    let key = req.param("nfInstanceID").to_ascii_lowercase();
    // Services in the form the consumer reads, when it says (requester-features, Service-Map);
    // else the profile as stored.
    let form = match req.query().get("requester-features")? {
        Some(f) => Some(ServiceForm::asked(Some(f), view::NFM_SERVICE_MAP).ok_or_else(|| {
            ProblemDetails::invalid_params(
                cause::INVALID_QUERY_PARAM,
                vec![InvalidParam::new("requester-features", "not a SupportedFeatures string")],
            )
        })?),
        None => None,
    };
    let entry = nrf
        .entry(&key)
        .ok_or_else(|| ProblemDetails::not_found(format!("no NF instance {key}")))?;
    let resp = match form {
        Some(form) => json_response(StatusCode::OK, &view::in_form(&entry.value, form))?,
        None => json_response(StatusCode::OK, &entry.value)?,
    };
    Ok(with_etag(resp, entry.version))
}

fn positive(q: &sbi::query::Query, name: &str) -> Result<Option<usize>, ProblemDetails> {
    match q.parse_as::<usize>(name)? {
        Some(0) => Err(ProblemDetails::invalid_params(
            cause::INVALID_QUERY_PARAM,
            vec![InvalidParam::new(name, "must be at least 1")],
        )),
        v => Ok(v),
    }
}

/// GET /nf-instances: NFList retrieval, a UriList (3gppHal+json) of the instances, ordered by
/// nfInstanceId; `limit` caps the list, `page-size`/`page-number` select a page of it.
pub async fn list(nrf: Arc<Nrf>, req: SbiRequest) -> Answer {
    let q = req.query();
    let nf_type = q.get("nf-type")?;
    if let Some(t) = nf_type {
        if !models::is_nf_type(t) {
            return Err(ProblemDetails::invalid_params(
                cause::INVALID_QUERY_PARAM,
                vec![InvalidParam::new("nf-type", format!("unknown NF type {t}"))],
            )
            .into());
        }
    }
    let limit = positive(&q, "limit")?;
    let page_size = positive(&q, "page-size")?;
    let page_number = positive(&q, "page-number")?.unwrap_or(1);
    let mut ids: Vec<String> = {
        let index = nrf.read_index();
        match nf_type {
            Some(t) => index.of_type(t).iter().map(|e| e.profile.nf_instance_id.clone()).collect(),
            None => index.all().map(|e| e.profile.nf_instance_id.clone()).collect(),
        }
    };
    if nf_type.is_none() {
        ids.sort_unstable_by_key(|a| a.to_ascii_lowercase());
    }
    if let Some(l) = limit {
        ids.truncate(l);
    }
    let total = ids.len();
    let page: &[String] = match page_size {
        Some(size) => {
            let start = (page_number - 1).saturating_mul(size).min(total);
            &ids[start..(start + size).min(total)]
        }
        None => &ids,
    };
    let root = nrf.api_root(Some(&req));
    let items: Vec<Value> = page
        .iter()
        .map(|id| json!({ "href": format!("{root}{NF_INSTANCES_PATH}/{id}") }))
        .collect();
    let self_href = match req.head.uri.query() {
        Some(qs) => format!("{root}{NF_INSTANCES_PATH}?{qs}"),
        None => format!("{root}{NF_INSTANCES_PATH}"),
    };
    // UriList._links.item has minItems 1: an empty page has no `item` at all.
    let mut links = json!({ "self": { "href": self_href } });
    if !items.is_empty() {
        links["item"] = Value::Array(items);
    }
    let body = json!({ "_links": links, "totalItemCount": total });
    let mut resp = json_response(StatusCode::OK, &body)?;
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/3gppHal+json"));
    Ok(resp)
}

/// One pass of the heartbeat audit: every REGISTERED NF silent for longer than its
/// heartBeatTimer plus the grace becomes SUSPENDED, and subscribers are told. On a shared
/// database "silent" means towards every instance ([`crate::coherence`]), and of two instances
/// suspending one NF at once, one writes and notifies.
pub async fn audit_heartbeats(nrf: &Arc<Nrf>) {
    let is_late = |e: &Entry| {
        let hbt = u64::from(e.profile.heart_beat_timer.unwrap_or(nrf.config.heartbeat_timer_secs));
        e.profile.nf_status == models::REGISTERED
            && now_ms().saturating_sub(e.last_seen()) > hbt * 1000 + nrf.config.heartbeat_grace_ms
    };
    let late: Vec<Arc<Entry>> =
        nrf.read_index().all().filter(|e| is_late(e.as_ref())).cloned().collect();
    if late.is_empty() {
        return;
    }
    if let Err(e) = crate::coherence::catch_up_heartbeats(nrf, &late).await {
        // Judging on this instance's stamps alone could suspend an NF that heartbeats to
        // another: wait for the next pass.
        tracing::warn!(error = %e, "heartbeat stamps of other instances unreadable; audit skipped");
        return;
    }
    for candidate in late {
        let key = candidate.key.clone();
        let _guard = nrf.lock_key(&key).await;
        // Re-read under the lock: a heartbeat may have arrived meanwhile.
        let Some(current) = nrf.entry(&key) else { continue };
        current.last_seen_ms.fetch_max(candidate.last_seen(), std::sync::atomic::Ordering::Relaxed);
        if !is_late(current.as_ref()) {
            continue;
        }
        let mut profile = current.profile.clone();
        profile.nf_status = models::SUSPENDED.to_owned();
        let mut value = current.value.clone();
        value["nfStatus"] = Value::from(models::SUSPENDED);
        let written = match serde_json::to_vec(&value) {
            Ok(bytes) => {
                nrf.store.replace_profile(&key, &profile.nf_type, bytes, current.version).await
            }
            Err(e) => Err(store::Error::backend_msg(e.to_string())),
        };
        match written {
            Ok(version) => {
                let entry = Arc::new(Entry::new(key.clone(), profile, value, version));
                nrf.write_index().insert(entry.clone());
                publish(nrf, models::NF_PROFILE_CHANGED, &entry, Some(&current));
                tracing::info!(nf_instance = %key, "heartbeat missed; NF suspended");
            }
            // Another instance wrote it first (its suspension, or an update it took): the
            // change feed brings that here, and that instance notified.
            Err(store::Error::VersionMismatch { .. } | store::Error::NotFound) => {}
            Err(e) => tracing::warn!(nf_instance = %key, error = %e, "cannot suspend NF"),
        }
    }
}
