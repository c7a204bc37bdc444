//! Sd (TS 29.212 §4b, §5b): the PCF as the PCRF giving a TDF the application detection and
//! control (ADC) rules of a Gx session, and re-deciding the session when the TDF reports that
//! an application started or stopped (solicited application reporting, §4b.5).
//!
//! An ADC rule is a PCC rule of the SM decision with an `appId` (TS 29.512 PccRule; TS 29.513
//! maps the ADC rule to it): its `refTcData` gives Flow-Status and Redirect-Information, its
//! `refUmData` the Monitoring-Key. Such rules are the TDF's: Gx leaves them out
//! (crate::gx::mapping).
//!
//! - TSR (§4b.5): at a Gx session's CCR-I, when `[pcf.sd]` is on and the decision has ADC
//!   rules, before the session is committed: the subscriber's ids, UE address, APN and the ADC
//!   rules. The TSA's TDF and the Sd Session-Id are kept in the Gx session's context (`sd`),
//!   so the Gx session's commit makes the TDF session durable and its delete ends it.
//! - CCR-U from the TDF (§4b.5, §5b.6) with Event-Trigger APPLICATION_START or
//!   APPLICATION_STOP and Application-Detection-Information: the applications running are kept
//!   in `sd.running`, the Gx session decided again with the report as `request.appDetection`
//!   (`{started: [...], stopped: [...]}`); the CCA carries the ADC rules that changed, the
//!   PCEF gets a Gx RAR when the rest of the decision changed.
//! - RAR (§4b.5): when the Gx session is decided again for another reason (its PCEF's
//!   CCR-U, its subscriber's data, spending limits) and its ADC rules changed.
//! - Termination (§4b.5): once the Gx session is deleted (CCR-T, a CCR-I replacing it, the
//!   session audit finding its PCEF lost it),
//!   RAR with Session-Release-Cause IP_CAN_SESSION_TERMINATION; the TDF's CCR-T that follows is
//!   answered 2001. A TDF's own CCR-T ends its session (the Gx session goes on without it).
//!
//! The Sd Session-Id carries the Gx session's: `<host>;<hi>;<lo>;gx=<Gx Session-Id>` (RFC 6733
//! §8.8 leaves the optional part to the implementation), so a TDF's request finds its Gx
//! session with one store read and nothing else has to be kept or reloaded at start.
//!
//! A TDF that cannot be reached or refuses the TSR fails no Gx session: it goes on without
//! application detection, logged and counted (`pcf_sd_requests_total{command="TSR",
//! result="failed"}`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use chrono::Utc;
use diameter::dictionary::{base, dcca, gx, nasreq, rx};
use diameter::header::FLAG_ERROR;
use diameter::{
    builders, result_code as rc, ApplicationId, Avp, CcRequestType, DiameterNode, Message,
    NodeConfig, PeerConfig, Route, RouteAction, Transport,
};
use nf::NfError;
use policy::Service;
use serde_json::{json, Map, Value};

use crate::config::{DiameterConfig, SdConfig};
use crate::context::Pcf;
use crate::decide::{decide_with, Decided};
use crate::store::SmPolicy;

/// What follows the Diameter part of an Sd Session-Id: the Gx Session-Id it serves.
const GX_MARK: &str = ";gx=";

/// Re-Auth-Request-Type AUTHORIZE_ONLY (RFC 6733 §8.12), as TS 29.212 §5b.6 asks.
const AUTHORIZE_ONLY: u32 = 0;

/// How long a released TDF session's CCR-T is answered 2001 from memory.
const RELEASED_KEPT: Duration = Duration::from_secs(300);

/// Outcomes, for `/metrics` (`pcf_sd_requests_total`, `pcf_sd_reports_total`).
#[derive(Debug, Default)]
pub struct Stats {
    pub tsr_ok: AtomicU64,
    pub tsr_failed: AtomicU64,
    pub rar_ok: AtomicU64,
    pub rar_failed: AtomicU64,
    pub report_ok: AtomicU64,
    pub report_refused: AtomicU64,
}

pub struct Sd {
    config: SdConfig,
    /// The node connected to the TDFs, once started.
    node: OnceLock<DiameterNode>,
    /// Sd sessions released with their Gx session, whose TDF has not sent its CCR-T yet.
    released: Mutex<HashMap<String, Instant>>,
    pub stats: Stats,
}

impl Sd {
    pub fn new(config: SdConfig) -> Sd {
        Sd { config, node: OnceLock::new(), released: Mutex::default(), stats: Stats::default() }
    }

    pub fn enabled(&self) -> bool {
        self.config.enabled
    }

    /// The node connected to the TDFs, when `[pcf.sd]` is enabled.
    pub fn node(&self) -> Option<&DiameterNode> {
        self.node.get()
    }

    fn released(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
        self.released.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// At a Gx session's CCR-I, its decision taken and not yet committed: when the decision
    /// has ADC rules, the TDF session made (TSR) and kept in `context.sd`. A TDF that fails
    /// leaves the context as it is (logged, counted).
    pub(crate) async fn establish(&self, gx_sid: &str, context: &mut Value, decision: &Value) {
        if !self.config.enabled || adc_rules(decision).is_empty() {
            return;
        }
        let Some(node) = self.node.get() else {
            return self.tsr_failed(gx_sid, "the Sd node is not started");
        };
        let sid = format!("{}{GX_MARK}{gx_sid}", node.new_session_id());
        // The first TDF open takes it (the route's order); its realm is the first's.
        let realm = self.config.tdf.first().map_or("", |t| t.realm.as_str());
        let tsr = tsr(node, &sid, realm, context, decision);
        let tsa = match ask(node, tsr).await {
            Ok(a) => a,
            Err(why) => return self.tsr_failed(gx_sid, &why),
        };
        self.stats.tsr_ok.fetch_add(1, Ordering::Relaxed);
        context["sd"] = json!({
            "sessionId": sid,
            "tdfHost": tsa.origin_host().unwrap_or_default(),
            "tdfRealm": tsa.origin_realm().unwrap_or(realm),
            "running": [],
        });
        tracing::debug!(session = %gx_sid, tdf = tsa.origin_host().unwrap_or_default(), "TDF session established");
    }

    fn tsr_failed(&self, gx_sid: &str, why: &str) {
        self.stats.tsr_failed.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(session = %gx_sid, %why, "no TDF session: the Gx session goes on without application detection");
    }

    /// Ends the TDF session of a Gx session whose context was `context` (deleted, or never
    /// committed): RAR with Session-Release-Cause IP_CAN_SESSION_TERMINATION (§4b.5), sent in
    /// the background; the TDF's CCR-T that follows is answered 2001.
    pub(crate) fn release(self: &Arc<Self>, context: &Value) {
        let Some(s) = context.get("sd").and_then(SdSession::of) else { return };
        let Some(node) = self.node.get() else { return };
        {
            let mut r = self.released();
            r.retain(|_, at| at.elapsed() < RELEASED_KEPT);
            r.insert(s.session_id.clone(), Instant::now());
        }
        let rar =
            rar(node, &s).avp(gx::SESSION_RELEASE_CAUSE.enumerated(IP_CAN_SESSION_TERMINATION));
        self.send(rar);
    }

    /// The RAR (§4b.5, PCRF-initiated ADC rule provisioning) telling the TDF of a Gx session
    /// (its context `context`) the ADC rules that changed from decision `old` to `new`; None
    /// when none did or the session has no TDF session. A Gx session decided again for another
    /// reason than its TDF's report (its PCEF's CCR-U, its subscriber's data) sends it.
    pub(crate) fn rar(&self, context: &Value, old: &Value, new: &Value) -> Option<Message> {
        let s = context.get("sd").and_then(SdSession::of)?;
        let node = self.node.get()?;
        let avps = adc_avps(old, new);
        (!avps.is_empty()).then(|| rar(node, &s).with_avps(avps))
    }

    /// Sends an Sd RAR in the background (nothing waits for the TDF's answer).
    pub(crate) fn send(self: &Arc<Self>, rar: Message) {
        let Some(node) = self.node.get().cloned() else { return };
        let sd = self.clone();
        tokio::spawn(async move { sd.send_rar(&node, rar).await });
    }

    /// Sends an Sd RAR; its failure is logged and counted.
    async fn send_rar(&self, node: &DiameterNode, rar: Message) {
        let sid = rar.session_id().unwrap_or_default().to_owned();
        match ask(node, rar).await {
            Ok(_) => {
                self.stats.rar_ok.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(session = %sid, "Sd RAR answered");
            }
            Err(why) => {
                self.stats.rar_failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(session = %sid, %why, "Sd RAR failed");
            }
        }
    }
}

/// An Sd RAR of TDF session `s` (§5b.6), without what it asks.
fn rar(node: &DiameterNode, s: &SdSession) -> Message {
    Message::request(gx::SD_APP_ID, gx::CMD_RE_AUTH)
        .session_id_avp(&s.session_id)
        .avp(base::AUTH_APPLICATION_ID.u32(gx::SD_APP_ID))
        .origin(node.origin_host(), node.origin_realm())
        .destination(&s.tdf_realm, Some(&s.tdf_host))
        .avp(base::RE_AUTH_REQUEST_TYPE.enumerated(AUTHORIZE_ONLY))
}

/// Session-Release-Cause IP_CAN_SESSION_TERMINATION (TS 29.212 §5.3.44, Sd only).
const IP_CAN_SESSION_TERMINATION: u32 = 3;

/// A Gx session's TDF session as its context keeps it (`sd`).
struct SdSession {
    session_id: String,
    tdf_host: String,
    tdf_realm: String,
}

impl SdSession {
    fn of(v: &Value) -> Option<SdSession> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        Some(SdSession {
            session_id: s("sessionId")?,
            tdf_host: s("tdfHost")?,
            tdf_realm: s("tdfRealm")?,
        })
    }
}

/// With `[pcf.sd]` on, the context of Gx session `id` when it has a TDF session: what
/// [`Sd::release`] needs once the delete (crate::npcf_smpolicycontrol::remove_reporting: a
/// CCR-T, a CCR-I replacing the session, the session audit) has committed. Read by the delete,
/// holding the subscriber, before it commits.
pub(crate) async fn before_delete(pcf: &Pcf, id: &str) -> Result<Option<Value>, NfError> {
    if !pcf.sd.enabled() || !crate::gx::is_gx(id) {
        return Ok(None);
    }
    let Some(p) = pcf.store.get_sm(id).await? else { return Ok(None) };
    let context: Value = serde_json::from_slice(&p.context)?;
    Ok(context.get("sd").is_some().then_some(context))
}

/// Sends a request to the TDF; its answer when it is a success, else why not.
async fn ask(node: &DiameterNode, req: Message) -> Result<Message, String> {
    match node.request(req).await {
        Ok(a) if a.is_success() => Ok(a),
        Ok(a) => Err(format!("the TDF answered {:?}", a.any_result_code())),
        Err(e) => Err(format!("no answer from the TDF: {e}")),
    }
}

/// The TSR (§5b.6) of Gx session context `context` with decision `decision`'s ADC rules.
fn tsr(node: &DiameterNode, sid: &str, realm: &str, context: &Value, decision: &Value) -> Message {
    let mut m = Message::request(gx::SD_APP_ID, gx::CMD_TDF_SESSION)
        .session_id_avp(sid)
        .avp(base::AUTH_APPLICATION_ID.u32(gx::SD_APP_ID))
        .origin(node.origin_host(), node.origin_realm())
        .destination(realm, None);
    let text = |k: &str| context.get(k).and_then(Value::as_str);
    if let Some(imsi) = text("supi").and_then(|s| s.strip_prefix("imsi-")) {
        m.push(builders::subscription_id(dcca::subscription_id_type::END_USER_IMSI, imsi));
    }
    if let Some(msisdn) = text("gpsi").and_then(|s| s.strip_prefix("msisdn-")) {
        m.push(builders::subscription_id(dcca::subscription_id_type::END_USER_E164, msisdn));
    }
    if let Some(ip) = text("ipv4Address").and_then(|s| s.parse().ok()) {
        m.push(nasreq::FRAMED_IP_ADDRESS.ipv4_octets(ip));
    }
    if let Some((addr, len)) = text("ipv6AddressPrefix").and_then(|p| p.split_once('/')) {
        if let (Ok(a), Ok(l)) = (addr.parse(), len.parse()) {
            m.push(builders::framed_ipv6_prefix(a, l));
        }
    }
    if let Some(dnn) = text("dnn") {
        m.push(nasreq::CALLED_STATION_ID.utf8(dnn));
    }
    m.with_avps(adc_avps(&Value::Null, decision))
}

/// The ADC rules of a decision: its PCC rules with an `appId`, by id.
pub fn adc_rules(decision: &Value) -> Map<String, Value> {
    let Some(rules) = decision.get("pccRules").and_then(Value::as_object) else {
        return Map::new();
    };
    rules
        .iter()
        .filter(|(_, r)| r.get("appId").and_then(Value::as_str).is_some())
        .map(|(k, r)| (k.clone(), r.clone()))
        .collect()
}

/// The first data of `decision[key]` a rule refers to with `refKey`.
fn referred<'a>(decision: &'a Value, rule: &Value, ref_key: &str, key: &str) -> &'a Value {
    static NULL: Value = Value::Null;
    rule.get(ref_key)
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(Value::as_str)
        .and_then(|id| decision.get(key)?.get(id))
        .unwrap_or(&NULL)
}

/// A rule with the traffic control and usage monitoring data it refers to: what is compared
/// to tell whether an ADC rule changed.
fn resolved(decision: &Value, rule: &Value) -> Value {
    json!([
        rule,
        referred(decision, rule, "refTcData", "traffContDecs"),
        referred(decision, rule, "refUmData", "umDecs"),
    ])
}

/// TS 29.512 FlowStatus → Flow-Status (TS 29.214 §5.3.11).
fn flow_status(s: &str) -> Option<u32> {
    Some(match s {
        "ENABLED-UPLINK" => 0,
        "ENABLED-DOWNLINK" => 1,
        "ENABLED" => 2,
        "DISABLED" => 3,
        "REMOVED" => 4,
        _ => return None,
    })
}

/// TS 29.512 RedirectInformation → Redirect-Information (§5.3.82): Redirect-Support, and
/// Redirect-Address-Type (RFC 4006 §8.38) with Redirect-Server-Address when an address is given.
fn redirect_information(r: &Value) -> Avp {
    let enabled = r.get("redirectEnabled").and_then(Value::as_bool).unwrap_or(false);
    let mut kids = vec![gx::REDIRECT_SUPPORT.enumerated(u32::from(enabled))];
    let kind = match r.get("redirectAddressType").and_then(Value::as_str) {
        Some("IPV4_ADDR") => Some(0),
        Some("IPV6_ADDR") => Some(1),
        Some("URL") => Some(2),
        Some("SIP_URI") => Some(3),
        _ => None,
    };
    let addr = r.get("redirectServerAddress").and_then(Value::as_str);
    if let (Some(k), Some(a)) = (kind, addr) {
        kids.push(dcca::REDIRECT_ADDRESS_TYPE.enumerated(k));
        kids.push(dcca::REDIRECT_SERVER_ADDRESS.utf8(a));
    }
    gx::REDIRECT_INFORMATION.grouped(kids)
}

/// An ADC rule as an ADC-Rule-Definition.
fn adc_definition(id: &str, rule: &Value, decision: &Value) -> Avp {
    let mut kids = vec![gx::ADC_RULE_NAME.bytes(id.as_bytes().to_vec())];
    if let Some(app) = rule.get("appId").and_then(Value::as_str) {
        kids.push(gx::TDF_APPLICATION_IDENTIFIER.with_slice(app.as_bytes()));
    }
    if let Some(p) = rule.get("precedence").and_then(Value::as_u64) {
        kids.push(gx::PRECEDENCE.u32(u32::try_from(p).unwrap_or(u32::MAX)));
    }
    let tc = referred(decision, rule, "refTcData", "traffContDecs");
    if let Some(s) = tc.get("flowStatus").and_then(Value::as_str).and_then(flow_status) {
        kids.push(rx::FLOW_STATUS.enumerated(s));
    }
    let um = referred(decision, rule, "refUmData", "umDecs");
    let key = um
        .get("umId")
        .and_then(Value::as_str)
        .or_else(|| rule.get("refUmData").and_then(Value::as_array)?.first()?.as_str());
    if let Some(k) = key {
        kids.push(gx::MONITORING_KEY.with_slice(k.as_bytes()));
    }
    if let Some(r) = tc.get("redirectInfo").filter(|r| r.is_object()) {
        kids.push(redirect_information(r));
    }
    gx::ADC_RULE_DEFINITION.grouped(kids)
}

/// What changed in the ADC rules from decision `old` to `new`, as an ADC-Rule-Remove naming
/// the rules gone and an ADC-Rule-Install with those new or changed (§4b.5); with `old`
/// null, every rule of `new` (TSR).
pub fn adc_avps(old: &Value, new: &Value) -> Vec<Avp> {
    let (old_rules, new_rules) = (adc_rules(old), adc_rules(new));
    let mut out = Vec::new();
    let gone: Vec<Avp> = old_rules
        .keys()
        .filter(|id| !new_rules.contains_key(*id))
        .map(|id| gx::ADC_RULE_NAME.bytes(id.as_bytes().to_vec()))
        .collect();
    if !gone.is_empty() {
        out.push(gx::ADC_RULE_REMOVE.grouped(gone));
    }
    let install: Vec<Avp> = new_rules
        .iter()
        .filter(|(id, r)| match old_rules.get(*id) {
            Some(o) => resolved(old, o) != resolved(new, r),
            None => true,
        })
        .map(|(id, r)| adc_definition(id, r, new))
        .collect();
    if !install.is_empty() {
        out.push(gx::ADC_RULE_INSTALL.grouped(install));
    }
    out
}

/// The Gx Session-Id an Sd Session-Id serves.
fn gx_session_of(sd_sid: &str) -> Option<&str> {
    sd_sid.split_once(GX_MARK).map(|(_, gx)| gx).filter(|g| !g.is_empty())
}

/// Connects to the TDFs of `[pcf.sd]` with the PCF's Diameter identity (`[pcf.diameter]`) and
/// takes their CCRs; the node is kept in `pcf.sd`. Connecting goes on in the background: a
/// TDF that is down stops nothing (its TSRs fail until it is up).
pub async fn start(pcf: Arc<Pcf>, d: &DiameterConfig) -> std::io::Result<DiameterNode> {
    let cfg = &pcf.sd.config;
    let mut nc = NodeConfig::new(&d.origin_host, &d.origin_realm);
    nc.product_name = "fivecore-pcf".into();
    nc.listen = None;
    nc.applications = vec![ApplicationId::tgpp(gx::SD_APP_ID)];
    nc.accept_unknown_peers = false;
    nc.peers = cfg
        .tdf
        .iter()
        .map(|t| PeerConfig::connect(&t.host, t.addr).transport(Transport::tls_if(t.tls)))
        .collect();
    if let Some(tls) = &d.tls {
        // The PCF's certificate for its outbound TLS peers; Gx's node has the TLS listener.
        nc.apply_tls(tls).map_err(|e| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("pcf.diameter.tls: {e}"))
        })?;
        nc.tls_listen = None;
    }
    let hosts: Vec<String> = cfg.tdf.iter().map(|t| t.host.clone()).collect();
    // A request for a TDF that is down (its Destination-Host) goes to the next one open.
    nc.routes = vec![Route::new("*", RouteAction::Relay(hosts)).application(gx::SD_APP_ID)];
    nc.request_timeout = Duration::from_millis(cfg.request_timeout_ms);
    nc.watchdog_interval = Duration::from_secs(cfg.watchdog_secs);
    let p = pcf.clone();
    let node = DiameterNode::builder(nc)
        .handler(gx::SD_APP_ID, move |req: Message| {
            let p = p.clone();
            async move { handle(&p, req).await }
        })
        .start()
        .await?;
    let _ = pcf.sd.node.set(node.clone());
    tracing::info!(tdf = ?cfg.tdf.iter().map(|t| &t.host).collect::<Vec<_>>(), "PCF Sd connecting to the TDFs");
    Ok(node)
}

/// The answer to `req` with `code` as Result-Code (E bit for a protocol error, 3xxx), with a
/// CCA's Auth-Application-Id, CC-Request-Type and CC-Request-Number (§5b.6) when `req` is a
/// CCR.
fn answer(req: &Message, code: u32) -> Message {
    let mut a = Message::answer_to(req);
    if req.command_code() == gx::CMD_CREDIT_CONTROL {
        a.push(base::AUTH_APPLICATION_ID.u32(gx::SD_APP_ID));
        for def in [&dcca::CC_REQUEST_TYPE, &dcca::CC_REQUEST_NUMBER] {
            if let Some(v) = req.find(def) {
                a.push(v.clone());
            }
        }
    }
    if rc::is_protocol_error(code) {
        a.header.flags |= FLAG_ERROR;
    }
    a.avp(base::RESULT_CODE.u32(code))
}

fn failed(req: &Message, code: u32, avp: Avp) -> Message {
    answer(req, code).avp(base::FAILED_AVP.grouped(vec![avp]))
}

/// The applications a CCR reports started and stopped, or the answer refusing it.
struct Report {
    started: Vec<String>,
    stopped: Vec<String>,
}

fn report(req: &Message) -> Result<Report, Message> {
    use gx::event_trigger::{APPLICATION_START, APPLICATION_STOP};
    let triggers = req.event_triggers();
    let (start, stop) =
        (triggers.contains(&APPLICATION_START), triggers.contains(&APPLICATION_STOP));
    let mut apps = Vec::new();
    for adi in req.find_all(&gx::APPLICATION_DETECTION_INFORMATION) {
        // Present (the node checked the group's grammar); an empty one names nothing.
        match adi.child(&gx::TDF_APPLICATION_IDENTIFIER) {
            Some(a) if a.as_str().is_ok_and(|s| !s.is_empty()) => {
                apps.push(a.as_str().unwrap_or_default().to_owned())
            }
            Some(a) => return Err(failed(req, rc::DIAMETER_INVALID_AVP_VALUE, a)),
            None => {
                let example = gx::TDF_APPLICATION_IDENTIFIER.zero_filled();
                return Err(failed(req, rc::DIAMETER_MISSING_AVP, example));
            }
        }
    }
    match (start, stop, apps.is_empty()) {
        // An Application-Detection-Information says which application, not whether it
        // started or stopped: one CCR reports one of the two.
        (true, true, _) => {
            let a = gx::EVENT_TRIGGER.enumerated(APPLICATION_STOP);
            Err(failed(req, rc::DIAMETER_INVALID_AVP_VALUE, a))
        }
        (true, false, true) | (false, true, true) => {
            // RFC 6733 §7.5's example of the missing AVP, zero-filled: with its required child
            // (one zero octet, as an empty payload is an undecodable AVP to Wireshark).
            let example = gx::APPLICATION_DETECTION_INFORMATION
                .grouped(vec![gx::TDF_APPLICATION_IDENTIFIER.with_slice(&[0])]);
            Err(failed(req, rc::DIAMETER_MISSING_AVP, example))
        }
        (false, false, false) => {
            let example = gx::EVENT_TRIGGER.enumerated(APPLICATION_START);
            Err(failed(req, rc::DIAMETER_MISSING_AVP, example))
        }
        (true, false, false) => Ok(Report { started: apps, stopped: Vec::new() }),
        (false, true, false) => Ok(Report { started: Vec::new(), stopped: apps }),
        (false, false, true) => Ok(Report { started: Vec::new(), stopped: Vec::new() }),
    }
}

/// The Sd handler: the TDF's CCR-U and CCR-T (§5b.6); a TSR or RAR sent to the PCF is not
/// ours to answer (3001).
pub async fn handle(pcf: &Arc<Pcf>, req: Message) -> Message {
    let a = handle_inner(pcf, &req).await;
    let ok = a.result_code() == Some(rc::DIAMETER_SUCCESS);
    let n = if ok { &pcf.sd.stats.report_ok } else { &pcf.sd.stats.report_refused };
    n.fetch_add(1, Ordering::Relaxed);
    a
}

async fn handle_inner(pcf: &Arc<Pcf>, req: &Message) -> Message {
    if req.command_code() != gx::CMD_CREDIT_CONTROL {
        return answer(req, rc::DIAMETER_COMMAND_UNSUPPORTED);
    }
    if let Some(a) = req.find(&base::AUTH_APPLICATION_ID) {
        if a.as_u32().ok() != Some(gx::SD_APP_ID) {
            return failed(req, rc::DIAMETER_INVALID_AVP_VALUE, a.clone());
        }
    }
    let Some(sid) = req.session_id().map(str::to_owned) else {
        return failed(req, rc::DIAMETER_MISSING_AVP, base::SESSION_ID.zero_filled());
    };
    let result = match req.cc_request_type() {
        Some(CcRequestType::Update) => match report(req) {
            Ok(r) => update(pcf, req, &sid, r).await,
            Err(a) => return a,
        },
        Some(CcRequestType::Termination) => terminate(pcf, req, &sid).await,
        // A TDF-initiated session (unsolicited reporting, §4b.5) and EVENT are not served.
        _ => {
            let a = req
                .find(&dcca::CC_REQUEST_TYPE)
                .cloned()
                .unwrap_or_else(|| dcca::CC_REQUEST_TYPE.zero_filled());
            return failed(req, rc::DIAMETER_INVALID_AVP_VALUE, a);
        }
    };
    result.unwrap_or_else(|e| {
        tracing::warn!(error = %e, session = %sid, "Sd request failed");
        answer(req, rc::DIAMETER_UNABLE_TO_COMPLY)
    })
}

/// The store id and subscriber of the Gx session an Sd Session-Id names, when it exists (the
/// caller then checks, holding the subscriber, that its context still names this Sd session).
async fn gx_of(pcf: &Pcf, sid: &str) -> Result<Option<(String, String)>, NfError> {
    let Some(gx_sid) = gx_session_of(sid) else { return Ok(None) };
    let id = crate::gx::policy_id(gx_sid);
    Ok(pcf.store.supi_of_sm(&id).await?.map(|supi| (id, supi)))
}

fn serves(context: &Value, sid: &str) -> bool {
    context["sd"]["sessionId"].as_str() == Some(sid)
}

/// CCR-U with an application report: the Gx session decided again with it; the CCA carries
/// the ADC rules that changed, the PCEF gets an RAR when the rest changed.
async fn update(
    pcf: &Arc<Pcf>,
    req: &Message,
    sid: &str,
    report: Report,
) -> Result<Message, NfError> {
    let Some((id, supi)) = gx_of(pcf, sid).await? else {
        return Ok(answer(req, rc::DIAMETER_UNKNOWN_SESSION_ID));
    };
    let held = pcf.hold(&supi).await;
    let Some((stored, kept)) = pcf.store.get_sm_with_subscriber(&id).await? else {
        return Ok(answer(req, rc::DIAMETER_UNKNOWN_SESSION_ID));
    };
    let mut context: Value = serde_json::from_slice(&stored.context)?;
    if !serves(&context, sid) {
        return Ok(answer(req, rc::DIAMETER_UNKNOWN_SESSION_ID));
    }
    if report.started.is_empty() && report.stopped.is_empty() {
        // Nothing this PCF reads (usage on Sd is not served): nothing to decide.
        return Ok(answer(req, rc::DIAMETER_SUCCESS));
    }
    let mut running: Vec<Value> = context["sd"]["running"].as_array().cloned().unwrap_or_default();
    running.retain(|a| !report.stopped.iter().any(|s| a == s));
    for s in &report.started {
        if !running.iter().any(|a| a == s) {
            running.push(Value::from(s.as_str()));
        }
    }
    context["sd"]["running"] = Value::Array(running);
    let mut view = context.clone();
    view["appDetection"] = json!({"started": report.started, "stopped": report.stopped});
    let Decided { mut outcome, project, data, subscribed, ldap, .. } =
        decide_with(pcf, Service::Sm, &view, &supi, Some(kept)).await?;
    // As a CCR-U keeps them (crate::gx::ccr): the data the decision read stays cached.
    if let (Some(d), true) = (data, subscribed) {
        pcf.policy_data.cache_if_absent(&supi, d);
    }
    let ssv = std::mem::take(&mut outcome.ssv_updates);
    let old: Value = serde_json::from_slice(&stored.decision)?;
    let mut new = outcome.decision;
    crate::app_session::keep_af_rules(&old, &mut new);
    let updated = SmPolicy {
        context: serde_json::to_vec(&context)?,
        decision: serde_json::to_vec(&new)?,
        policy_version: project.version.clone(),
        updated_ms: Utc::now().timestamp_millis(),
        ..stored
    };
    if !pcf.store.update_sm(updated, ssv).await? {
        return Ok(answer(req, rc::DIAMETER_UNKNOWN_SESSION_ID));
    }
    if let Some(p) = ldap {
        pcf.ldap.keep(&supi, &id, p);
    }
    drop(held);
    let rar = pcf.gx.get().and_then(|n| crate::gx::ccr::rar(n, &id, &context, &old, &new));
    if let Some(rar) = rar {
        // The TDF's answer does not wait for the PCEF's.
        let p = pcf.clone();
        tokio::spawn(async move { crate::gx::ccr::send_rars(&p, vec![rar]).await });
    }
    tracing::debug!(session = %sid, %supi, started = ?report.started, stopped = ?report.stopped, "TDF application report decided");
    Ok(answer(req, rc::DIAMETER_SUCCESS).with_avps(adc_avps(&old, &new)))
}

/// CCR-T: after the PCF's RAR (its Gx session ended), or the TDF ending its session itself
/// (the Gx session goes on without it).
async fn terminate(pcf: &Arc<Pcf>, req: &Message, sid: &str) -> Result<Message, NfError> {
    if pcf.sd.released().remove(sid).is_some() {
        return Ok(answer(req, rc::DIAMETER_SUCCESS));
    }
    let Some((id, supi)) = gx_of(pcf, sid).await? else {
        return Ok(answer(req, rc::DIAMETER_UNKNOWN_SESSION_ID));
    };
    let _held = pcf.hold(&supi).await;
    let Some(stored) = pcf.store.get_sm(&id).await? else {
        return Ok(answer(req, rc::DIAMETER_UNKNOWN_SESSION_ID));
    };
    let mut context: Value = serde_json::from_slice(&stored.context)?;
    if !serves(&context, sid) {
        return Ok(answer(req, rc::DIAMETER_UNKNOWN_SESSION_ID));
    }
    if let Some(c) = context.as_object_mut() {
        c.remove("sd");
    }
    let updated = SmPolicy {
        context: serde_json::to_vec(&context)?,
        updated_ms: Utc::now().timestamp_millis(),
        ..stored
    };
    if !pcf.store.update_sm(updated, Map::new()).await? {
        return Ok(answer(req, rc::DIAMETER_UNKNOWN_SESSION_ID));
    }
    tracing::debug!(session = %sid, "TDF session ended by the TDF");
    Ok(answer(req, rc::DIAMETER_SUCCESS))
}

/// `pcf_sd_requests_total{command, result}` and `pcf_sd_reports_total{result}`.
pub(crate) fn encode_metrics(
    pcf: &Pcf,
    encoder: &mut prometheus_client::encoding::DescriptorEncoder<'_>,
) -> std::fmt::Result {
    use prometheus_client::encoding::EncodeMetric;
    use prometheus_client::metrics::counter::ConstCounter;
    use prometheus_client::metrics::MetricType;
    let s = &pcf.sd.stats;
    let mut e = encoder.encode_descriptor(
        "pcf_sd_requests",
        "Sd requests sent to the TDF, by command and result (TSR failed: the Gx session goes on without application detection)",
        None,
        MetricType::Counter,
    )?;
    for (command, result, n) in [
        ("TSR", "ok", &s.tsr_ok),
        ("TSR", "failed", &s.tsr_failed),
        ("RAR", "ok", &s.rar_ok),
        ("RAR", "failed", &s.rar_failed),
    ] {
        let c = ConstCounter::new(n.load(Ordering::Relaxed));
        c.encode(e.encode_family(&[("command", command), ("result", result)])?)?;
    }
    let mut e = encoder.encode_descriptor(
        "pcf_sd_reports",
        "Requests received from the TDF (CCRs), by result (refused: answered with an error)",
        None,
        MetricType::Counter,
    )?;
    for (result, n) in [("ok", &s.report_ok), ("refused", &s.report_refused)] {
        let c = ConstCounter::new(n.load(Ordering::Relaxed));
        c.encode(e.encode_family(&[("result", result)])?)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision() -> Value {
        json!({
            "pccRules": {
                "web": {"pccRuleId": "web", "precedence": 200},
                "adc-video": {"pccRuleId": "adc-video", "appId": "video", "precedence": 50,
                              "refTcData": ["tc-video"], "refUmData": ["um-video"]},
                "adc-p2p": {"pccRuleId": "adc-p2p", "appId": "p2p", "refTcData": ["tc-p2p"]}
            },
            "traffContDecs": {
                "tc-video": {"tcId": "tc-video", "flowStatus": "ENABLED"},
                "tc-p2p": {"tcId": "tc-p2p", "redirectInfo": {"redirectEnabled": true,
                    "redirectAddressType": "URL", "redirectServerAddress": "http://portal/"}}
            },
            "umDecs": {"um-video": {"umId": "mk-video"}}
        })
    }

    fn names(a: &Avp, def: &diameter::AvpDef) -> Vec<String> {
        let mut v: Vec<String> = a
            .children_of(def)
            .iter()
            .map(|d| {
                let n = if def.code == gx::ADC_RULE_DEFINITION.code {
                    d.child(&gx::ADC_RULE_NAME).unwrap()
                } else {
                    d.clone()
                };
                n.as_str().unwrap().to_owned()
            })
            .collect();
        v.sort();
        v
    }

    #[test]
    fn adc_rules_are_the_pcc_rules_with_an_app_id() {
        let avps = adc_avps(&Value::Null, &decision());
        assert_eq!(avps.len(), 1);
        assert!(avps[0].is(&gx::ADC_RULE_INSTALL));
        assert_eq!(names(&avps[0], &gx::ADC_RULE_DEFINITION), ["adc-p2p", "adc-video"]);
        let defs = avps[0].children_of(&gx::ADC_RULE_DEFINITION);
        let video = defs
            .iter()
            .find(|d| d.child(&gx::ADC_RULE_NAME).unwrap().as_str().unwrap() == "adc-video")
            .unwrap();
        let app = video.child(&gx::TDF_APPLICATION_IDENTIFIER).unwrap();
        assert_eq!(app.as_str().unwrap(), "video");
        assert_eq!(video.child(&rx::FLOW_STATUS).unwrap().as_u32().unwrap(), 2);
        assert_eq!(video.child(&gx::MONITORING_KEY).unwrap().as_str().unwrap(), "mk-video");
        assert_eq!(video.child(&gx::PRECEDENCE).unwrap().as_u32().unwrap(), 50);
        let p2p = defs
            .iter()
            .find(|d| d.child(&gx::ADC_RULE_NAME).unwrap().as_str().unwrap() == "adc-p2p")
            .unwrap();
        let r = p2p.child(&gx::REDIRECT_INFORMATION).unwrap();
        assert_eq!(r.child(&gx::REDIRECT_SUPPORT).unwrap().as_u32().unwrap(), 1);
        assert_eq!(r.child(&dcca::REDIRECT_ADDRESS_TYPE).unwrap().as_u32().unwrap(), 2);
        let addr = r.child(&dcca::REDIRECT_SERVER_ADDRESS).unwrap();
        assert_eq!(addr.as_str().unwrap(), "http://portal/");
    }

    #[test]
    fn only_what_changed_goes_to_the_tdf() {
        let old = decision();
        assert!(adc_avps(&old, &old).is_empty());
        let mut new = old.clone();
        // A change of the traffic control data a rule refers to changes the rule.
        new["traffContDecs"]["tc-video"]["flowStatus"] = json!("DISABLED");
        new["pccRules"].as_object_mut().unwrap().remove("adc-p2p");
        // A rule without appId is Gx's: not the TDF's concern.
        new["pccRules"]["web"]["precedence"] = json!(10);
        let avps = adc_avps(&old, &new);
        assert_eq!(avps.len(), 2);
        assert!(avps[0].is(&gx::ADC_RULE_REMOVE));
        assert_eq!(names(&avps[0], &gx::ADC_RULE_NAME), ["adc-p2p"]);
        assert_eq!(names(&avps[1], &gx::ADC_RULE_DEFINITION), ["adc-video"]);
        let def = &avps[1].children_of(&gx::ADC_RULE_DEFINITION)[0];
        assert_eq!(def.child(&rx::FLOW_STATUS).unwrap().as_u32().unwrap(), 3);
    }

    #[test]
    fn the_sd_session_id_names_its_gx_session() {
        assert_eq!(gx_session_of("pcf.example;1;2;gx=pgw;9;9"), Some("pgw;9;9"));
        assert_eq!(gx_session_of("pcf.example;1;2"), None);
        assert_eq!(gx_session_of("pcf.example;1;2;gx="), None);
    }
}
