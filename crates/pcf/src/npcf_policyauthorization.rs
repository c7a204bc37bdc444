//! Npcf_PolicyAuthorization (TS 29.514 §4.2, resources §5.3), the AF's N5: app-sessions
//! (create), app-sessions/{appSessionId} (GET, PATCH), .../delete, and
//! .../events-subscription (PUT, DELETE). Checks and the N5 shapes are here; binding, PCC
//! rules, the SM decision and the notifications are [`crate::app_session`]'s.

use std::sync::Arc;

use chrono::Utc;
use http::{header, HeaderValue, StatusCode};
use nf::common_data::{
    check_dnn, check_gpsi, check_mac, check_snssai, check_supi, parse_ipv4, Errors,
};
use nf::{Answer, NfError};
use sbi::{empty_response, json_response, ProblemDetails, SbiRequest};
use serde_json::{json, Map, Value};

use crate::app_session::{self, Change};
use crate::context::Pcf;
use crate::models::{check_bitrate, check_http_uri, check_supp_feat};
use crate::store::{new_policy_id, AppSession};

/// TS 29.514 §5.8: none of the optional features is supported, so "0" whatever the AF offers.
const SUPPORTED_FEATURES: &str = "0";

const MEDIA_TYPES: [&str; 8] =
    ["AUDIO", "VIDEO", "DATA", "APPLICATION", "CONTROL", "TEXT", "MESSAGE", "OTHER"];
const FLOW_STATUSES: [&str; 5] =
    ["ENABLED-UPLINK", "ENABLED-DOWNLINK", "ENABLED", "DISABLED", "REMOVED"];
const FLOW_USAGES: [&str; 3] = ["NO_INFO", "RTCP", "AF_SIGNALLING"];
/// TS 29.514 §5.6.3.3 AfEvent, Rel-17.
const AF_EVENTS: [&str; 20] = [
    "ACCESS_TYPE_CHANGE",
    "ANI_REPORT",
    "APP_DETECTION",
    "CHARGING_CORRELATION",
    "EPS_FALLBACK",
    "FAILED_QOS_UPDATE",
    "FAILED_RESOURCES_ALLOCATION",
    "OUT_OF_CREDIT",
    "PDU_SESSION_STATUS",
    "PLMN_CHG",
    "QOS_MONITORING",
    "QOS_NOTIF",
    "RAN_NAS_CAUSE",
    "REALLOCATION_OF_CREDIT",
    "SAT_CATEGORY_CHG",
    "SUCCESSFUL_QOS_UPDATE",
    "SUCCESSFUL_RESOURCES_ALLOCATION",
    "TSN_BRIDGE_INFO",
    "UP_PATH_CHG_FAILURE",
    "USAGE_REPORT",
];

fn location(pcf: &Pcf, req: &SbiRequest, id: &str) -> String {
    format!("{}/npcf-policyauthorization/v1/app-sessions/{id}", pcf.api_root(Some(req)))
}

fn check_int(o: &Map<String, Value>, k: &str, at: &str, errs: &mut Errors) {
    match o.get(k) {
        None => errs.missing(format!("{at}/{k}")),
        Some(n) if n.as_u64().is_some() => {}
        Some(_) => errs.bad(format!("{at}/{k}"), "must be a non-negative integer"),
    }
}

fn check_enum(o: &Map<String, Value>, k: &str, allowed: &[&str], at: &str, errs: &mut Errors) {
    match o.get(k) {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if allowed.contains(&s.as_str()) => {}
        Some(_) => errs.bad(format!("{at}/{k}"), format!("must be one of {}", allowed.join(", "))),
    }
}

fn check_bitrates(o: &Map<String, Value>, keys: &[&str], at: &str, errs: &mut Errors) {
    for k in keys {
        match o.get(*k) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if check_bitrate(s) => {}
            Some(_) => errs.bad(format!("{at}/{k}"), "must be a BitRate (e.g. \"64 Kbps\")"),
        }
    }
}

/// MediaComponent (or, in a PATCH, MediaComponentRm: `null` removes) per TS 29.514 §5.6.2.7.
fn check_media(v: &Value, at: &str, patch: bool, errs: &mut Errors) {
    let Some(m) = v.as_object().filter(|m| !m.is_empty()) else {
        errs.bad(at, "must be a map of MediaComponent with at least one entry");
        return;
    };
    for (key, mc) in m {
        let at = format!("{at}/{key}");
        if patch && mc.is_null() {
            continue;
        }
        let Some(o) = mc.as_object() else {
            errs.bad(&at, "must be a MediaComponent object");
            continue;
        };
        check_int(o, "medCompN", &at, errs);
        if let Some(n) = o.get("medCompN").and_then(Value::as_u64) {
            if key.parse::<u64>().ok() != Some(n) {
                errs.bad(format!("{at}/medCompN"), "must be the number the map key gives");
            }
        }
        check_enum(o, "medType", &MEDIA_TYPES, &at, errs);
        check_enum(o, "fStatus", &FLOW_STATUSES, &at, errs);
        check_bitrates(
            o,
            &[
                "marBwUl",
                "marBwDl",
                "mirBwUl",
                "mirBwDl",
                "maxSuppBwUl",
                "maxSuppBwDl",
                "minDesBwUl",
                "minDesBwDl",
                "rrBw",
                "rsBw",
            ],
            &at,
            errs,
        );
        let Some(subs) = o.get("medSubComps").filter(|s| !s.is_null()) else { continue };
        let Some(subs) = subs.as_object().filter(|m| !m.is_empty()) else {
            errs.bad(format!("{at}/medSubComps"), "must be a map of MediaSubComponent");
            continue;
        };
        for (k, sc) in subs {
            let at = format!("{at}/medSubComps/{k}");
            if patch && sc.is_null() {
                continue;
            }
            let Some(so) = sc.as_object() else {
                errs.bad(&at, "must be a MediaSubComponent object");
                continue;
            };
            check_int(so, "fNum", &at, errs);
            check_enum(so, "fStatus", &FLOW_STATUSES, &at, errs);
            check_enum(so, "flowUsage", &FLOW_USAGES, &at, errs);
            check_bitrates(so, &["marBwUl", "marBwDl"], &at, errs);
            match so.get("fDescs") {
                None | Some(Value::Null) => {}
                Some(Value::Array(d)) if (1..=2).contains(&d.len()) => {
                    for (i, f) in d.iter().enumerate() {
                        if !f.as_str().is_some_and(|s| s.starts_with("permit out ")) {
                            errs.bad(
                                format!("{at}/fDescs/{i}"),
                                "must be an IPFilterRule FlowDescription (\"permit out ...\")",
                            );
                        }
                    }
                }
                Some(_) => {
                    errs.bad(format!("{at}/fDescs"), "must be an array of 1 or 2 FlowDescription")
                }
            }
        }
    }
}

/// EventsSubscReqData (TS 29.514 §5.6.2.5); `rm`: EventsSubscReqDataRm, events may be empty.
fn check_ev_subsc(v: &Value, at: &str, rm: bool, errs: &mut Errors) {
    let Some(o) = v.as_object() else {
        errs.bad(at, "must be an EventsSubscReqData object");
        return;
    };
    match o.get("events") {
        None => errs.missing(format!("{at}/events")),
        Some(Value::Array(l)) if rm || !l.is_empty() => {
            for (i, e) in l.iter().enumerate() {
                let ok =
                    e.get("event").and_then(Value::as_str).is_some_and(|s| AF_EVENTS.contains(&s));
                if !ok {
                    errs.bad(format!("{at}/events/{i}/event"), "must be a Rel-17 AfEvent");
                }
            }
        }
        Some(_) => {
            errs.bad(format!("{at}/events"), "must be a non-empty array of AfEventSubscription")
        }
    }
    match o.get("notifUri") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if check_http_uri(s) => {}
        Some(_) => errs.bad(format!("{at}/notifUri"), "must be an absolute http or https URI"),
    }
}

/// AppSessionContext of a create (TS 29.514 §5.6.2.2/3): the 400 names every wrong attribute.
fn check_create(v: &Value) -> Result<(), ProblemDetails> {
    let mut errs = Errors::default();
    let Some(r) = v.get("ascReqData") else {
        errs.missing("/ascReqData");
        return errs.finish();
    };
    let Some(o) = r.as_object() else {
        errs.bad("/ascReqData", "must be an AppSessionContextReqData object");
        return errs.finish();
    };
    let at = "/ascReqData";
    match o.get("notifUri") {
        None => errs.missing(format!("{at}/notifUri")),
        Some(Value::String(s)) if check_http_uri(s) => {}
        Some(_) => errs.bad(format!("{at}/notifUri"), "must be an absolute http or https URI"),
    }
    match o.get("suppFeat") {
        None => errs.missing(format!("{at}/suppFeat")),
        Some(Value::String(s)) if check_supp_feat(s) => {}
        Some(_) => errs.bad(format!("{at}/suppFeat"), "must be SupportedFeatures (hex digits)"),
    }
    let addrs = ["ueIpv4", "ueIpv6", "ueMac"].iter().filter(|k| o.contains_key(**k)).count();
    if addrs == 0 {
        errs.missing(format!("{at}/ueIpv4"));
    } else if addrs > 1 {
        errs.bad(format!("{at}/ueIpv6"), "exactly one of ueIpv4, ueIpv6 and ueMac");
    }
    if let Some(a) = o.get("ueIpv4") {
        if a.as_str().and_then(parse_ipv4).is_none() {
            errs.bad(format!("{at}/ueIpv4"), "must be an Ipv4Addr");
        }
    }
    if let Some(a) = o.get("ueIpv6") {
        if a.as_str().and_then(|s| s.parse::<std::net::Ipv6Addr>().ok()).is_none() {
            errs.bad(format!("{at}/ueIpv6"), "must be an Ipv6Addr");
        }
    }
    if let Some(a) = o.get("ueMac") {
        if !a.as_str().is_some_and(check_mac) {
            errs.bad(format!("{at}/ueMac"), "must be a MacAddr48");
        }
    }
    if let Some(d) = o.get("dnn") {
        if !d.as_str().is_some_and(check_dnn) {
            errs.bad(format!("{at}/dnn"), "must be a Dnn (dot-separated labels)");
        }
    }
    if let Some(s) = o.get("supi") {
        if !s.as_str().is_some_and(check_supi) {
            errs.bad(format!("{at}/supi"), "must be a Supi");
        }
    }
    if let Some(g) = o.get("gpsi") {
        if !g.as_str().is_some_and(check_gpsi) {
            errs.bad(format!("{at}/gpsi"), "must be a Gpsi");
        }
    }
    if let Some(s) = o.get("sliceInfo") {
        check_snssai(s, &format!("{at}/sliceInfo"), &mut errs);
    }
    if let Some(m) = o.get("medComponents") {
        check_media(m, &format!("{at}/medComponents"), false, &mut errs);
    }
    if let Some(e) = o.get("evSubsc") {
        check_ev_subsc(e, &format!("{at}/evSubsc"), false, &mut errs);
    }
    errs.finish()
}

/// AppSessionContextUpdateDataPatch (TS 29.514 §5.6.2.4).
fn check_patch(v: &Value) -> Result<(), ProblemDetails> {
    let mut errs = Errors::default();
    let Some(o) = v.as_object() else {
        errs.bad("", "must be an AppSessionContextUpdateDataPatch object");
        return errs.finish();
    };
    match o.get("ascReqData") {
        None => {}
        Some(Value::Object(r)) => {
            let at = "/ascReqData";
            if let Some(m) = r.get("medComponents") {
                check_media(m, &format!("{at}/medComponents"), true, &mut errs);
            }
            match r.get("evSubsc") {
                None | Some(Value::Null) => {}
                Some(e) => check_ev_subsc(e, &format!("{at}/evSubsc"), true, &mut errs),
            }
            for k in ["ueIpv4", "ueIpv6", "ueMac", "notifUri", "dnn", "sliceInfo", "supi"] {
                if r.contains_key(k) {
                    errs.bad(format!("{at}/{k}"), "may not be modified");
                }
            }
        }
        Some(_) => errs.bad("/ascReqData", "must be an AppSessionContextUpdateData object"),
    }
    errs.finish()
}

/// RFC 7396 merge patch.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Some(p) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let t = target.as_object_mut().expect("an object");
    for (k, v) in p {
        if v.is_null() {
            t.remove(k);
        } else {
            merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

/// The AppSessionContext answered: the request data in force and the negotiated features.
fn answer(asc: &Value) -> Value {
    json!({"ascReqData": asc, "ascRespData": {"suppFeat": SUPPORTED_FEATURES}})
}

/// Npcf_PolicyAuthorization_Create (TS 29.514 §4.2.2): 201, the AppSessionContext and its URI
/// in Location; 500 PDU_SESSION_NOT_AVAILABLE when no PDU session has the UE's address.
pub async fn create(pcf: Arc<Pcf>, req: SbiRequest) -> Answer {
    let body: Value = req.json()?;
    check_create(&body)?;
    let asc = &body["ascReqData"];
    let s = |k: &str| asc.get(k).and_then(Value::as_str);
    let sm = app_session::bind(&pcf, s("ueIpv4"), s("ueIpv6"), s("dnn")).await?;
    let id = new_policy_id();
    let app = AppSession {
        id: id.clone(),
        sm_policy_id: sm.id.clone(),
        supi: sm.supi.clone(),
        context: serde_json::to_vec(asc)?,
        rules: app_session::rules_of(&pcf, &id, &sm.supi, &sm.context, asc).await?,
        updated_ms: Utc::now().timestamp_millis(),
    };
    app_session::commit(&pcf, &sm.id, &sm.supi, Change::Create(app)).await?;
    tracing::debug!(app_session = %id, sm_policy = %sm.id, "application session created");
    let mut resp = json_response(StatusCode::CREATED, &answer(asc))?;
    if let Ok(v) = HeaderValue::from_str(&location(&pcf, &req, &id)) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    Ok(resp)
}

async fn find(pcf: &Pcf, id: &str) -> Result<AppSession, NfError> {
    pcf.store.get_app(id).await?.ok_or_else(|| app_session::not_found(id))
}

/// GET of an Individual Application Session Context (TS 29.514 §5.3.3): the AppSessionContext.
pub async fn get(pcf: Arc<Pcf>, req: SbiRequest) -> Answer {
    let app = find(&pcf, req.param("appSessionId")).await?;
    Ok(json_response(StatusCode::OK, &answer(&app_session::context_of(&app)))?)
}

/// The session's request data changed (`asc`): new rules, stored with the SM decision.
async fn change(pcf: &Pcf, app: AppSession, asc: &Value) -> Result<(), NfError> {
    let Some(sm) = pcf.store.get_sm(&app.sm_policy_id).await? else {
        return Err(app_session::not_found(&app.id));
    };
    let updated = AppSession {
        context: serde_json::to_vec(asc)?,
        rules: app_session::rules_of(pcf, &app.id, &app.supi, &sm.context, asc).await?,
        updated_ms: Utc::now().timestamp_millis(),
        ..app
    };
    app_session::commit(pcf, &sm.id, &sm.supi, Change::Update(updated)).await?;
    Ok(())
}

/// Npcf_PolicyAuthorization_Update (TS 29.514 §4.2.3): a merge patch of the request data; the
/// media's PCC rules are made again and the SMF told what changed. 200 with the context.
pub async fn patch(pcf: Arc<Pcf>, req: SbiRequest) -> Answer {
    sbi::body::require_media_type(req.headers(), &[sbi::body::MERGE_PATCH_JSON, sbi::body::JSON])?;
    let body: Value = sbi::body::decode_json(&req.body)?;
    check_patch(&body)?;
    let app = find(&pcf, req.param("appSessionId")).await?;
    let mut asc = app_session::context_of(&app);
    if let Some(p) = body.get("ascReqData") {
        merge_patch(&mut asc, p);
    }
    change(&pcf, app, &asc).await?;
    Ok(json_response(StatusCode::OK, &answer(&asc))?)
}

/// Npcf_PolicyAuthorization_Delete (TS 29.514 §4.2.4 / §5.3.3.4.2): the rules leave the SM
/// decision (the SMF told). 204; with an EventsSubscReqData asking for events the PCF can
/// report at once (ACCESS_TYPE_CHANGE, PLMN_CHG), 200 with them in `evsNotif`.
pub async fn delete(pcf: Arc<Pcf>, req: SbiRequest) -> Answer {
    let asked: Option<Value> = if req.body.is_empty() {
        None
    } else {
        let v: Value = req.json()?;
        let mut errs = Errors::default();
        check_ev_subsc(&v, "", false, &mut errs);
        errs.finish()?;
        Some(v)
    };
    let id = req.param("appSessionId");
    let app = find(&pcf, id).await?;
    let sm = pcf.store.get_sm(&app.sm_policy_id).await?;
    app_session::commit(&pcf, &app.sm_policy_id, &app.supi, Change::Delete(id.to_string())).await?;
    tracing::debug!(app_session = %id, "application session deleted");
    let Some(asked) = asked else { return Ok(empty_response(StatusCode::NO_CONTENT)) };
    let ctx: Value = match &sm {
        Some(sm) => serde_json::from_slice(&sm.context)?,
        None => Value::Null,
    };
    let wants =
        |e: &str| asked["events"].as_array().is_some_and(|l| l.iter().any(|s| s["event"] == e));
    let mut notif = Map::new();
    let mut events = Vec::new();
    if wants("ACCESS_TYPE_CHANGE") && ctx.get("accessType").is_some() {
        events.push(json!({"event": "ACCESS_TYPE_CHANGE"}));
        notif.insert("accessType".into(), ctx["accessType"].clone());
        if let Some(r) = ctx.get("ratType") {
            notif.insert("ratType".into(), r.clone());
        }
    }
    if wants("PLMN_CHG") {
        if let Some(p) = ctx.get("servingNetwork") {
            events.push(json!({"event": "PLMN_CHG"}));
            notif.insert("plmnId".into(), p.clone());
        }
    }
    if events.is_empty() {
        return Ok(empty_response(StatusCode::NO_CONTENT));
    }
    notif.insert("evSubsUri".into(), Value::from(app_session::events_uri(&pcf, id)));
    notif.insert("evNotifs".into(), Value::Array(events));
    Ok(json_response(StatusCode::OK, &json!({"evsNotif": notif}))?)
}

/// Npcf_PolicyAuthorization_Subscribe (TS 29.514 §4.2.6): PUT the events subscription; 201
/// with Location when it is new, 200 when it replaces one.
pub async fn put_events(pcf: Arc<Pcf>, req: SbiRequest) -> Answer {
    let v: Value = req.json()?;
    let mut errs = Errors::default();
    check_ev_subsc(&v, "", false, &mut errs);
    errs.finish()?;
    let app = find(&pcf, req.param("appSessionId")).await?;
    let mut asc = app_session::context_of(&app);
    let new = asc.get("evSubsc").is_none();
    asc["evSubsc"] = v.clone();
    let id = app.id.clone();
    change(&pcf, app, &asc).await?;
    if !new {
        return Ok(json_response(StatusCode::OK, &v)?);
    }
    let mut resp = json_response(StatusCode::CREATED, &v)?;
    let loc = format!("{}/events-subscription", location(&pcf, &req, &id));
    if let Ok(h) = HeaderValue::from_str(&loc) {
        resp.headers_mut().insert(header::LOCATION, h);
    }
    Ok(resp)
}

/// Npcf_PolicyAuthorization_Unsubscribe (TS 29.514 §4.2.7): 204.
pub async fn delete_events(pcf: Arc<Pcf>, req: SbiRequest) -> Answer {
    let app = find(&pcf, req.param("appSessionId")).await?;
    let mut asc = app_session::context_of(&app);
    if let Some(o) = asc.as_object_mut() {
        o.remove("evSubsc");
    }
    change(&pcf, app, &asc).await?;
    Ok(empty_response(StatusCode::NO_CONTENT))
}
