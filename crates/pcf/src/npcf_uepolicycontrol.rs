//! Npcf_UEPolicyControl (TS 29.525 §4.2, resources §5.3): Create (POST policies), Get (GET
//! policies/{polAssoId}), Update (POST policies/{polAssoId}/update) and Delete (DELETE
//! policies/{polAssoId}); and the delivery of the decided URSP to the UE through the AMF.
//!
//! The decision is the project's UE rules on the PolicyAssociationRequest (an update's
//! attributes over it), with the subscriber's UePolicySet from the UDR and its state
//! variables. The PolicyAssociation answered is the decision without `urspRules`, which are
//! not an attribute of TS 29.525: they go to the UE, encoded per TS 24.526 ([`crate::ursp`])
//! in a MANAGE UE POLICY COMMAND ([`crate::ue_policy_delivery`]) that the AMF transfers
//! ([`crate::namf_communication`]).
//!
//! Delivery is asynchronous: the create or update is answered first, then a task sends the
//! command when the URSP is new or changed (its digest differs from the one last sent, or the
//! last one never reached the AMF). The outcome comes back as:
//! - an N1MessageNotify of the UE's MANAGE UE POLICY COMPLETE / COMMAND REJECT at
//!   `/npcf-callback/v1/ue-policy/{polAssoId}/n1-message-notify` (the callback this PCF
//!   subscribes with, N1N2MessageSubscribe class UPDP, before its first transfer to the UE);
//! - or the same message relayed in an Update's `uePolDelResult` (TS 29.525 Rel-17);
//! - or an N1N2MessageTransfer failure notification at
//!   `/npcf-callback/v1/ue-policy/{polAssoId}/failure/{pti}`, or `uePolTransFailNotif`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use base64::Engine;
use chrono::Utc;
use http::{header, HeaderValue, StatusCode};
use nf::common_data::{check_gpsi, Errors};
use nf::{Answer, NfError};
use policy::Service;
use sbi::problem::cause::INVALID_MSG_FORMAT;
use sbi::{empty_response, json_response, ProblemDetails, SbiRequest};
use serde_json::{Map, Value};

use crate::context::Pcf;
use crate::decide::{decide, Decided};
use crate::models;
use crate::namf_communication::{Amf, Transfer};
use crate::store::{new_policy_id, Association, Kind, UeDelivery};
use crate::ue_policy_delivery::{self as updp, Message};
use crate::ursp;

/// Features of TS 29.525 §5.8 this PCF supports: none of the optional ones yet.
const SUPPORTED_FEATURES: &str = "0";

/// TS 29.525 §5.6.3.3 RequestTrigger, Rel-17.
const REQUEST_TRIGGERS: [&str; 7] =
    ["LOC_CH", "PRA_CH", "UE_POLICY", "PLMN_CH", "CON_STATE_CH", "GROUP_ID_LIST_CHG", "UE_CAP_CH"];

/// The callbacks the AMF calls back at.
pub const N1_NOTIFY_PATH: &str = "/npcf-callback/v1/ue-policy/{polAssoId}/n1-message-notify";
pub const FAILURE_PATH: &str = "/npcf-callback/v1/ue-policy/{polAssoId}/failure/{pti}";

/// Delivery outcomes, for `pcf_ursp_deliveries_total{result}`.
#[derive(Debug, Default)]
pub struct Stats {
    /// The AMF took the transfer (200 N1_N2_TRANSFER_INITIATED, 202 ATTEMPTING_TO_REACH_UE).
    pub initiated: AtomicU64,
    /// The UE answered MANAGE UE POLICY COMPLETE.
    pub complete: AtomicU64,
    /// The UE answered MANAGE UE POLICY COMMAND REJECT.
    pub rejected: AtomicU64,
    /// The AMF refused the transfer or notified that it failed.
    pub transfer_failed: AtomicU64,
    /// No AMF to send to, or none answered.
    pub unreachable: AtomicU64,
    /// The project's `urspRules` cannot be encoded (logged with the member at fault).
    pub invalid: AtomicU64,
}

impl Stats {
    pub fn by_result(&self) -> [(&'static str, u64); 6] {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        [
            ("initiated", l(&self.initiated)),
            ("complete", l(&self.complete)),
            ("rejected", l(&self.rejected)),
            ("transfer_failed", l(&self.transfer_failed)),
            ("unreachable", l(&self.unreachable)),
            ("invalid", l(&self.invalid)),
        ]
    }
}

/// UE policy delivery: the AMF client and the outcome counters.
pub struct UePolicy {
    pub amf: Amf,
    pub stats: Stats,
}

impl UePolicy {
    pub fn new(amf: Amf) -> Self {
        UePolicy { amf, stats: Stats::default() }
    }
}

fn resource(pcf: &Pcf, req: Option<&SbiRequest>, id: &str) -> String {
    format!("{}/npcf-ue-policy-control/v1/policies/{id}", pcf.api_root(req))
}

fn not_found(id: &str) -> NfError {
    ProblemDetails::not_found(format!("no UE policy association {id}")).into()
}

/// The checks the create's PolicyAssociationRequest and the update share.
fn check_common(o: &Map<String, Value>, errs: &mut Errors) {
    if let Some(v) = o.get("notificationUri") {
        if !v.as_str().is_some_and(models::check_http_uri) {
            errs.bad("/notificationUri", "must be an absolute http or https URI");
        }
    }
    if let Some(v) = o.get("gpsi") {
        if !v.as_str().is_some_and(check_gpsi) {
            errs.bad("/gpsi", "must be a Gpsi (msisdn-<digits> or extid-<id>@<domain>)");
        }
    }
    if let Some(g) = o.get("guami") {
        let amf_id = g.get("amfId").and_then(Value::as_str);
        if !amf_id.is_some_and(|a| a.len() == 6 && a.bytes().all(|b| b.is_ascii_hexdigit())) {
            errs.bad("/guami/amfId", "must be an AmfId (6 hexadecimal digits)");
        }
        if g.get("plmnId").and_then(plmn).is_none() {
            errs.bad("/guami/plmnId", "must be a PlmnId (mcc 3 digits, mnc 2 or 3)");
        }
    }
    if let Some(p) = o.get("servingPlmn") {
        if plmn(p).is_none() {
            errs.bad("/servingPlmn", "must be a PlmnId (mcc 3 digits, mnc 2 or 3)");
        }
    }
}

/// Checks a PolicyAssociationRequest (TS 29.525 §5.6.2.2).
pub fn check_request(v: &Value) -> Result<(), ProblemDetails> {
    let mut errs = Errors::default();
    let Some(o) = v.as_object() else {
        errs.bad("", "must be a PolicyAssociationRequest object");
        return errs.finish();
    };
    models::check_association_request(o, &mut errs);
    check_common(o, &mut errs);
    errs.finish()
}

/// Checks a PolicyAssociationUpdateRequest (TS 29.525 §5.6.2.3).
pub fn check_update(v: &Value) -> Result<(), ProblemDetails> {
    let mut errs = Errors::default();
    let Some(o) = v.as_object() else {
        errs.bad("", "must be a PolicyAssociationUpdateRequest object");
        return errs.finish();
    };
    models::check_triggers(
        o,
        "triggers",
        &REQUEST_TRIGGERS,
        "RequestTrigger (TS 29.525 §5.6.3.3)",
        &mut errs,
    );
    if let Some(r) = o.get("uePolDelResult") {
        let ok = r.as_str().and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok());
        match ok.map(|b| updp::parse(&b)) {
            Some(Ok(Message::Complete { .. } | Message::Reject { .. })) => {}
            _ => errs.bad(
                "/uePolDelResult",
                "must be base64 of a MANAGE UE POLICY COMPLETE or COMMAND REJECT",
            ),
        }
    }
    if let Some(f) = o.get("uePolTransFailNotif") {
        if !f.get("cause").is_some_and(Value::is_string) {
            errs.bad("/uePolTransFailNotif/cause", "must be an N1N2MessageTransferCause");
        }
        let ptis = f.get("ptis").and_then(Value::as_array);
        if !ptis.is_some_and(|p| {
            !p.is_empty() && p.iter().all(|x| x.as_u64().is_some_and(|n| n <= 255))
        }) {
            errs.bad("/uePolTransFailNotif/ptis", "must be a non-empty array of PTIs");
        }
    }
    check_common(o, &mut errs);
    errs.finish()
}

/// A PlmnId's MCC and MNC, when it is one.
fn plmn(v: &Value) -> Option<(&str, &str)> {
    let mcc = v.get("mcc")?.as_str()?;
    let mnc = v.get("mnc")?.as_str()?;
    updp::plmn_octets(mcc, mnc).map(|_| (mcc, mnc))
}

/// The PLMN a UE policy section is for: the serving PLMN, else the GUAMI's, else the IMSI's
/// home (3-digit MCC, 2-digit MNC).
fn section_plmn(request: &Value, supi: &str) -> [u8; 3] {
    let from = |v: Option<&Value>| v.and_then(plmn).and_then(|(c, n)| updp::plmn_octets(c, n));
    from(request.get("servingPlmn"))
        .or_else(|| from(request.pointer("/guami/plmnId")))
        .or_else(|| {
            let imsi = supi.strip_prefix("imsi-")?;
            updp::plmn_octets(imsi.get(..3)?, imsi.get(3..5)?)
        })
        .unwrap_or([0x00, 0xf1, 0x10])
}

/// The PolicyAssociation of a decision: the engine's without the URSP, with the features.
fn association(decision: &Value) -> Value {
    let mut d = decision.as_object().cloned().unwrap_or_default();
    d.remove("urspRules");
    d.insert("suppFeat".into(), Value::from(SUPPORTED_FEATURES));
    Value::Object(d)
}

fn ursp_rules(decision: &Value) -> Vec<Value> {
    decision.get("urspRules").and_then(Value::as_array).cloned().unwrap_or_default()
}

/// Npcf_UEPolicyControl_Create: 201 with the PolicyAssociation and its URI in Location; the
/// URSP, when the decision has some, is delivered after.
pub async fn create(pcf: Arc<Pcf>, req: SbiRequest) -> Answer {
    let request: Value = req.json()?;
    check_request(&request)?;
    let supi = request["supi"].as_str().unwrap_or_default().to_string();
    let held = pcf.hold(&supi).await;
    let Decided { mut outcome, project, .. } = decide(&pcf, Service::Ue, &request, &supi).await?;
    let ssv = std::mem::take(&mut outcome.ssv_updates);
    let answer = association(&outcome.decision);
    let body = serde_json::to_vec(&answer)?;
    let id = new_policy_id();
    let a = Association {
        kind: Kind::Ue,
        id: id.clone(),
        supi: supi.clone(),
        context: serde_json::to_vec(&request)?,
        decision: serde_json::to_vec(&outcome.decision)?,
        policy_version: project.version.clone(),
        updated_ms: Utc::now().timestamp_millis(),
        udr_subscription: None,
    };
    pcf.store.create_assoc(a, ssv).await?;
    drop(held);
    tracing::debug!(ue_policy = %id, policy_version = %project.version, "UE policy created");
    let rules = ursp_rules(&outcome.decision);
    if !rules.is_empty() {
        tokio::spawn(deliver(
            pcf.clone(),
            id.clone(),
            supi,
            request,
            rules,
            project.version.clone(),
        ));
    }
    let mut resp = http::Response::new(sbi::Body::from(body));
    *resp.status_mut() = StatusCode::CREATED;
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(sbi::body::JSON));
    if let Ok(v) = HeaderValue::from_str(&resource(&pcf, Some(&req), &id)) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    Ok(resp)
}

/// Npcf_UEPolicyControl_Get (TS 29.525 §4.2.5): the PolicyAssociation in force, with the
/// request it answers.
pub async fn get(pcf: Arc<Pcf>, req: SbiRequest) -> Answer {
    let id = req.param("polAssoId");
    let Some(a) = pcf.store.get_assoc(Kind::Ue, id).await? else { return Err(not_found(id)) };
    let mut answer = association(&serde_json::from_slice(&a.decision)?);
    answer["request"] = serde_json::from_slice(&a.context)?;
    Ok(json_response(StatusCode::OK, &answer)?)
}

/// What an update reports of earlier deliveries: the UE's relayed answer (`uePolDelResult`)
/// and the AMF's failures (`uePolTransFailNotif`).
async fn delivery_reports(pcf: &Pcf, id: &str, change: &Value) -> Result<(), NfError> {
    if let Some(r) = change.get("uePolDelResult").and_then(Value::as_str) {
        let b = base64::engine::general_purpose::STANDARD.decode(r).unwrap_or_default();
        if let Ok(m) = updp::parse(&b) {
            ue_answered(pcf, id, m).await?;
        }
    }
    if let Some(f) = change.get("uePolTransFailNotif") {
        for pti in f.get("ptis").and_then(Value::as_array).into_iter().flatten() {
            if let Some(pti) = pti.as_u64().and_then(|p| u8::try_from(p).ok()) {
                failed(pcf, id, pti).await?;
            }
        }
    }
    Ok(())
}

/// Npcf_UEPolicyControl_Update (TS 29.525 §4.2.3): triggers, changes and delivery reports; the
/// PCF decides again and answers 200 with a PolicyUpdate of what changed, delivering the URSP
/// again when it changed.
pub async fn update(pcf: Arc<Pcf>, req: SbiRequest) -> Answer {
    let change: Value = req.json()?;
    check_update(&change)?;
    let id = req.param("polAssoId").to_string();
    let Some(first) = pcf.store.get_assoc(Kind::Ue, &id).await? else { return Err(not_found(&id)) };
    delivery_reports(&pcf, &id, &change).await?;
    let held = pcf.hold(&first.supi).await;
    let Some(stored) = pcf.store.get_assoc(Kind::Ue, &id).await? else {
        return Err(not_found(&id));
    };
    let mut request: Value = serde_json::from_slice(&stored.context)?;
    if let (Some(r), Some(c)) = (request.as_object_mut(), change.as_object()) {
        // The update's attributes replace the request's, but for what reports a moment
        // (triggers, delivery results) rather than the UE's state.
        for (k, v) in c {
            if !matches!(k.as_str(), "triggers" | "uePolDelResult" | "uePolTransFailNotif") {
                r.insert(k.clone(), v.clone());
            }
        }
    }
    let Decided { mut outcome, project, .. } =
        decide(&pcf, Service::Ue, &request, &stored.supi).await?;
    let ssv = std::mem::take(&mut outcome.ssv_updates);
    let old: Value = serde_json::from_slice(&stored.decision)?;
    let mut update = models::delta(&association(&old), &association(&outcome.decision));
    if let Some(u) = update.as_object_mut() {
        u.remove("suppFeat");
        u.insert("resourceUri".into(), Value::from(resource(&pcf, Some(&req), &id)));
    }
    let (old_rules, new_rules) = (ursp_rules(&old), ursp_rules(&outcome.decision));
    let a = Association {
        context: serde_json::to_vec(&request)?,
        decision: serde_json::to_vec(&outcome.decision)?,
        policy_version: project.version.clone(),
        updated_ms: Utc::now().timestamp_millis(),
        ..stored
    };
    let supi = a.supi.clone();
    if !pcf.store.update_assoc(a, ssv).await? {
        return Err(not_found(&id));
    }
    drop(held);
    // A changed URSP is delivered; an unchanged one again only if it never reached the AMF
    // (deliver compares with what was sent).
    if !(old_rules.is_empty() && new_rules.is_empty()) {
        tokio::spawn(deliver(pcf.clone(), id, supi, request, new_rules, project.version.clone()));
    }
    Ok(json_response(StatusCode::OK, &update)?)
}

/// Npcf_UEPolicyControl_Delete (TS 29.525 §4.2.4): 204; the N1 message subscription at the
/// AMF, if any, is removed after.
pub async fn delete(pcf: Arc<Pcf>, req: SbiRequest) -> Answer {
    let id = req.param("polAssoId");
    if !remove(&pcf, id).await? {
        return Err(not_found(id));
    }
    tracing::debug!(ue_policy = %id, "UE policy deleted");
    Ok(empty_response(StatusCode::NO_CONTENT))
}

/// Removes a UE policy association, holding its subscriber, with its delivery record and its
/// N1 subscription at the AMF; false when there was none (the delete's work, and the session
/// audit's).
pub(crate) async fn remove(pcf: &Arc<Pcf>, id: &str) -> Result<bool, NfError> {
    let Some(first) = pcf.store.get_assoc(Kind::Ue, id).await? else { return Ok(false) };
    let held = pcf.hold(&first.supi).await;
    if pcf.store.delete_assoc(Kind::Ue, id).await?.is_none() {
        return Ok(false);
    }
    let delivery = pcf.store.delete_ue_delivery(id).await?;
    drop(held);
    if let Some(sub) = delivery.and_then(|d| d.n1_subscription) {
        let pcf = pcf.clone();
        tokio::spawn(async move { pcf.ue_policy.amf.unsubscribe(&sub).await });
    }
    Ok(true)
}

/// A short digest of the URSP octets (FNV-1a, 64 bits): equal URSP, equal digest.
fn digest(b: Option<&[u8]>) -> String {
    let Some(b) = b else { return String::new() };
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for x in b {
        h ^= u64::from(*x);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The PTI after `pti`: 1..=254 (0 is "no procedure transaction identity assigned" and 255
/// is reserved, TS 24.007 §11.2.3.1a).
fn next_pti(pti: u8) -> u8 {
    if pti >= 254 {
        1
    } else {
        pti + 1
    }
}

/// Sends `rules` to the UE of association `id` when they are not what was last sent (or what
/// was sent never reached the AMF): a new PTI, a MANAGE UE POLICY COMMAND, an
/// N1N2MessageTransfer; no rules after some were sent deletes the section at the UE.
async fn deliver(
    pcf: Arc<Pcf>,
    id: String,
    supi: String,
    request: Value,
    rules: Vec<Value>,
    version: String,
) {
    let stats = &pcf.ue_policy.stats;
    let ursp = if rules.is_empty() {
        None
    } else {
        match ursp::encode(&rules) {
            Ok(b) => Some(b),
            Err(e) => {
                tracing::warn!(ue_policy = %id, policy_version = %version, error = %e,
                    "the decision's urspRules cannot be encoded: not delivered");
                stats.invalid.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
    };
    let sum = digest(ursp.as_deref());
    // Sent again: what never reached the AMF, and a send still pending well past the AMF's
    // timeout (the PCF stopped while it was in flight).
    let amf = &pcf.ue_policy.amf;
    let stale = Utc::now().timestamp_millis() - 2 * amf.config().timeout_ms as i64 - 1000;
    let needed = |prev: &Option<UeDelivery>| match prev {
        Some(p) if p.ursp_digest == sum => match p.outcome.as_str() {
            "transfer_failed" | "unreachable" => true,
            "pending" => p.updated_ms < stale,
            _ => false,
        },
        Some(_) => true,
        None => ursp.is_some(),
    };
    // A first look without holding the UE: an update that changes nothing ends here.
    let first = match pcf.store.ue_delivery(&id).await {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(ue_policy = %id, error = %e, "URSP delivery record not read");
            return;
        }
    };
    if !needed(&first) {
        return;
    }
    let root = match amf.find(&request).await {
        Ok(r) if !r.is_empty() => Some(r[0].trim_end_matches('/').to_string()),
        Ok(_) | Err(_) => None,
    };
    let callbacks = format!("{}/npcf-callback/v1/ue-policy/{id}", pcf.api_root(None));
    // Subscribed before the command is recorded, so that one write records both.
    let mut fresh = None;
    let subscribed = first.as_ref().is_some_and(|p| p.n1_subscription.is_some());
    if let (Some(root), true, false) = (&root, amf.config().n1_subscribe, subscribed) {
        let cb = format!("{callbacks}/n1-message-notify");
        match amf.subscribe(root, &supi, &cb, None).await {
            Ok(uri) => fresh = Some(uri),
            // The transfer is still worth making: the AMF may relay the answer in an update.
            Err(why) => {
                tracing::warn!(ue_policy = %id, %why, "no N1 message subscription at the AMF")
            }
        }
    }
    let pti = {
        // Held while the PTI is allocated, so two deliveries to one UE never share one.
        let _held = pcf.hold(&supi).await;
        let prev = pcf.store.ue_delivery(&id).await.ok().flatten();
        // Another delivery did it meanwhile, or the association is gone (deleted while this
        // waited): nothing to send, and no subscription to leave behind.
        let gone = !matches!(pcf.store.get_assoc(Kind::Ue, &id).await, Ok(Some(_)));
        let kept = prev.as_ref().and_then(|p| p.n1_subscription.clone());
        if gone || !needed(&prev) || kept.is_some() {
            if let Some(extra) = fresh.take() {
                let pcf = pcf.clone();
                tokio::spawn(async move { pcf.ue_policy.amf.unsubscribe(&extra).await });
            }
        }
        if gone || !needed(&prev) {
            return;
        }
        let pti = next_pti(prev.as_ref().map_or(0, |p| p.pti));
        let d = UeDelivery {
            assoc_id: id.clone(),
            pti,
            ursp_digest: sum.clone(),
            policy_version: version.clone(),
            outcome: "pending".into(),
            n1_subscription: kept.or(fresh),
            updated_ms: Utc::now().timestamp_millis(),
        };
        if let Err(e) = pcf.store.put_ue_delivery(d).await {
            tracing::warn!(ue_policy = %id, error = %e, "URSP delivery record not written");
            return;
        }
        pti
    };
    let Some(root) = root else {
        tracing::warn!(ue_policy = %id, %supi, "no AMF to deliver the URSP through");
        record(&pcf, &id, pti, "unreachable", Some("pending")).await;
        stats.unreachable.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let n1 = updp::manage_ue_policy_command(pti, section_plmn(&request, &supi), ursp.as_deref());
    let failure = format!("{callbacks}/failure/{pti}");
    match amf.transfer(&root, &supi, &n1, &failure).await {
        Transfer::Accepted(cause) => {
            tracing::debug!(ue_policy = %id, pti, %cause, "URSP transfer initiated");
            record(&pcf, &id, pti, "initiated", Some("pending")).await;
            stats.initiated.fetch_add(1, Ordering::Relaxed);
        }
        Transfer::Refused(why) => {
            tracing::warn!(ue_policy = %id, pti, %why, "the AMF refused the URSP transfer");
            record(&pcf, &id, pti, "transfer_failed", Some("pending")).await;
            stats.transfer_failed.fetch_add(1, Ordering::Relaxed);
        }
        Transfer::Unreachable(why) => {
            tracing::warn!(ue_policy = %id, pti, %why, "no AMF answered the URSP transfer");
            record(&pcf, &id, pti, "unreachable", Some("pending")).await;
            stats.unreachable.fetch_add(1, Ordering::Relaxed);
        }
    }
}

async fn record(
    pcf: &Pcf,
    id: &str,
    pti: u8,
    outcome: &'static str,
    from: Option<&'static str>,
) -> bool {
    match pcf.store.ue_delivery_outcome(id, pti, outcome, from).await {
        Ok(changed) => changed,
        Err(e) => {
            tracing::warn!(ue_policy = %id, pti, error = %e, "URSP delivery outcome not recorded");
            false
        }
    }
}

/// The UE's answer to the command with its PTI.
async fn ue_answered(pcf: &Pcf, id: &str, m: Message) -> Result<(), NfError> {
    let stats = &pcf.ue_policy.stats;
    let (pti, outcome, counter) = match &m {
        Message::Complete { pti } => (*pti, "complete", &stats.complete),
        Message::Reject { pti, .. } => (*pti, "rejected", &stats.rejected),
        Message::Command { .. } => {
            return Err(ProblemDetails::bad_request(
                INVALID_MSG_FORMAT,
                "a MANAGE UE POLICY COMMAND is the PCF's to send",
            )
            .into())
        }
    };
    if pcf.store.ue_delivery_outcome(id, pti, outcome, None).await? {
        counter.fetch_add(1, Ordering::Relaxed);
        if let Message::Reject { causes, .. } = &m {
            tracing::warn!(ue_policy = %id, pti, ?causes, "the UE rejected its UE policy");
        }
    } else {
        tracing::debug!(ue_policy = %id, pti, "a UE policy answer for no command in force");
    }
    Ok(())
}

async fn failed(pcf: &Pcf, id: &str, pti: u8) -> Result<(), NfError> {
    if pcf.store.ue_delivery_outcome(id, pti, "transfer_failed", None).await? {
        pcf.ue_policy.stats.transfer_failed.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

/// N1MessageNotify (TS 29.518 §5.2.2.3.4): the UE's MANAGE UE POLICY COMPLETE or COMMAND
/// REJECT, multipart/related (N1MessageNotification with class UPDP, and the N1 message).
pub async fn n1_message_notify(pcf: Arc<Pcf>, req: SbiRequest) -> Answer {
    let id = req.param("polAssoId").to_string();
    let ct = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let (json, n1) = crate::namf_communication::json_and_n1(&ct, &req.body).map_err(|e| {
        ProblemDetails::bad_request(INVALID_MSG_FORMAT, format!("N1MessageNotify body: {e}"))
    })?;
    let class = json.pointer("/n1MessageContainer/n1MessageClass").and_then(Value::as_str);
    if class != Some("UPDP") {
        let mut errs = Errors::default();
        errs.bad("/n1MessageContainer/n1MessageClass", "must be UPDP here");
        errs.finish()?;
    }
    let n1 =
        n1.ok_or_else(|| ProblemDetails::bad_request(INVALID_MSG_FORMAT, "no N1 message part"))?;
    let m = updp::parse(n1)
        .map_err(|e| ProblemDetails::bad_request(INVALID_MSG_FORMAT, format!("N1 message: {e}")))?;
    if pcf.store.get_assoc(Kind::Ue, &id).await?.is_none() {
        return Err(not_found(&id));
    }
    ue_answered(&pcf, &id, m).await?;
    Ok(empty_response(StatusCode::NO_CONTENT))
}

/// N1N2TransferFailureNotification (TS 29.518 §5.2.2.3.1 step 4): the AMF could not deliver
/// the command with this PTI.
pub async fn n1n2_failure(pcf: Arc<Pcf>, req: SbiRequest) -> Answer {
    let id = req.param("polAssoId").to_string();
    let body: Value = req.json()?;
    if !body.get("cause").is_some_and(Value::is_string) {
        let mut errs = Errors::default();
        errs.missing("/cause");
        errs.finish()?;
    }
    let Ok(pti) = req.param("pti").parse::<u8>() else { return Err(not_found(&id)) };
    if pcf.store.get_assoc(Kind::Ue, &id).await?.is_none() {
        return Err(not_found(&id));
    }
    tracing::warn!(ue_policy = %id, pti, cause = %body["cause"], "URSP transfer failed at the AMF");
    failed(&pcf, &id, pti).await?;
    Ok(empty_response(StatusCode::NO_CONTENT))
}
