//! Sy (TS 29.219): the PCF as the PCRF asking an OCS for the statuses of the policy counters
//! the project reads (`[spending] counters`, docs/policy.md), which its rules see as
//! `spending.<Policy-Counter-Identifier>`, as they see N28's (crate::nchf_spendinglimitcontrol).
//!
//! Which sessions read their statuses here (`[pcf.sy]`): Gx sessions, and N7 SM associations
//! too with `n7 = true`; the others keep N28. The Sy session is the subscriber's:
//! - Initial SLR (§4.5.1.1): at the subscriber's first such session (CCR-I, or N7 create with
//!   `n7`), before its decision, with the project's counters as Policy-Counter-Identifiers;
//!   the SLA's Policy-Counter-Status-Reports are the statuses that decision reads. The session
//!   (its Session-Id, the OCS that answered, the counters, the statuses) is written to the store
//!   before the decision and held in memory here.
//! - Intermediate SLR (§4.5.1.2): a later create of the subscriber, when the project in force
//!   lists other counters than those the session asked for, sends the whole new list; the
//!   statuses of the counters no longer listed go.
//! - SNR (§4.5.2): the statuses reported replace those of the same counters (the others stay),
//!   the SNA goes back at once, then the statuses are stored and every SM session of the
//!   subscriber is decided again under its hold: Gx RAR / N7 UpdateNotify with what changed.
//! - STR (§4.5.3): when the subscriber's last session that reads Sy ends (CCR-T, N7 delete).
//!
//! An OCS that cannot be reached or answers an error fails no session: the decision is taken
//! without statuses (the counters absent), as N28 does when the CHF fails; it is logged and
//! counted, and the subscriber's next create asks again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use diameter::dictionary::{base, dcca, sy};
use diameter::header::FLAG_ERROR;
use diameter::{
    result_code as rc, ApplicationId, Avp, DiameterNode, Message, NodeConfig, PeerConfig, Route,
    RouteAction, Transport,
};
use serde_json::{Map, Value};

use crate::config::{DiameterConfig, SyConfig};
use crate::context::Pcf;
use crate::nchf_spendinglimitcontrol::{Spending, SpendingRead};
use crate::store::SySession;

/// Termination-Cause DIAMETER_LOGOUT (RFC 6733 §8.15): the subscriber's sessions ended.
const DIAMETER_LOGOUT: u32 = 1;

/// Outcomes, for `/metrics` (`pcf_sy_requests_total`, `pcf_sy_notifications_total`).
#[derive(Debug, Default)]
pub struct Stats {
    pub initial_ok: AtomicU64,
    pub initial_failed: AtomicU64,
    pub intermediate_ok: AtomicU64,
    pub intermediate_failed: AtomicU64,
    pub terminate_ok: AtomicU64,
    pub terminate_failed: AtomicU64,
    pub notify_ok: AtomicU64,
    pub notify_refused: AtomicU64,
}

/// A subscriber's Sy session as decisions read it.
struct Held {
    session: SySession,
    /// The statuses as the engine takes them (`uri` is the Sy Session-Id).
    spending: Arc<Spending>,
}

impl Held {
    fn new(session: SySession) -> Arc<Held> {
        let spending = Arc::new(Spending {
            uri: session.session_id.clone(),
            statuses: session.statuses.clone(),
        });
        Arc::new(Held { session, spending })
    }
}

#[derive(Default)]
struct Sessions {
    by_supi: HashMap<String, Arc<Held>>,
    /// Session-Id → SUPI, for the OCS's SNRs.
    by_id: HashMap<String, String>,
}

pub struct Sy {
    config: SyConfig,
    /// The node connected to the OCSs, once started.
    node: OnceLock<DiameterNode>,
    /// Every Sy session kept in the store (loaded at start); an entry is replaced whole on a
    /// change, so a decision reads its statuses without holding the lock.
    sessions: Mutex<Sessions>,
    pub stats: Stats,
}

impl Sy {
    pub fn new(config: SyConfig) -> Sy {
        Sy { config, node: OnceLock::new(), sessions: Mutex::default(), stats: Stats::default() }
    }

    /// The node connected to the OCSs, when `[pcf.sy]` is enabled.
    pub fn node(&self) -> Option<&DiameterNode> {
        self.node.get()
    }

    fn sessions(&self) -> MutexGuard<'_, Sessions> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a session with this context (an SmPolicyContextData, a Gx session's with `gx`)
    /// reads its spending limit statuses over Sy.
    pub fn serves(&self, context: &Value) -> bool {
        self.config.enabled && (self.config.n7 || context.get("gx").is_some())
    }

    /// [`Sy::serves`] for a stored SM session, by its id.
    fn serves_id(&self, policy_id: &str) -> bool {
        self.config.enabled && (self.config.n7 || crate::gx::is_gx(policy_id))
    }

    /// The sessions the store keeps (at start).
    pub fn load(&self, kept: Vec<SySession>) {
        let mut m = self.sessions();
        for s in kept {
            m.by_id.insert(s.session_id.clone(), s.supi.clone());
            m.by_supi.insert(s.supi.clone(), Held::new(s));
        }
    }

    /// Subscribers with a Sy session.
    pub fn subscribers(&self) -> usize {
        self.sessions().by_supi.len()
    }

    /// The subscriber's Sy session, as kept.
    pub fn session_of(&self, supi: &str) -> Option<SySession> {
        self.sessions().by_supi.get(supi).map(|h| h.session.clone())
    }

    /// The subscriber's statuses, when it has a Sy session.
    pub fn spending(&self, supi: &str) -> Option<Arc<Spending>> {
        self.sessions().by_supi.get(supi).map(|h| h.spending.clone())
    }

    fn keep(&self, s: SySession) -> Arc<Spending> {
        let held = Held::new(s);
        let spending = held.spending.clone();
        let mut m = self.sessions();
        m.by_id.insert(held.session.session_id.clone(), held.session.supi.clone());
        if let Some(old) = m.by_supi.insert(held.session.supi.clone(), held) {
            if old.session.session_id != spending.uri {
                m.by_id.remove(&old.session.session_id);
            }
        }
        spending
    }

    fn forget(&self, supi: &str, session_id: &str) {
        let mut m = self.sessions();
        if m.by_supi.get(supi).is_some_and(|h| h.session.session_id == session_id) {
            m.by_supi.remove(supi);
        }
        m.by_id.remove(session_id);
    }

    /// For a new session of `supi` that reads Sy, its caller holding the subscriber: the
    /// statuses of its Sy session, made now (Initial SLR) when it has none and the project
    /// lists counters, or moved to the project's counters (Intermediate SLR) when they
    /// changed. Nothing, counted, when the OCS fails.
    pub(crate) async fn for_create(
        &self,
        pcf: &Pcf,
        supi: &str,
        context: &Value,
        counters: &[String],
    ) -> SpendingRead {
        let held = self.sessions().by_supi.get(supi).cloned();
        let spending = match held {
            Some(h) if counters.is_empty() || h.session.counters == counters => {
                Some(h.spending.clone())
            }
            Some(h) => Some(self.intermediate(pcf, &h, counters).await),
            None if counters.is_empty() => None,
            None => {
                let gpsi = context.get("gpsi").and_then(Value::as_str);
                self.initial(pcf, supi, gpsi, counters).await
            }
        };
        // Stored by this module in its own commit: nothing for the create's.
        SpendingRead { spending, new: false }
    }

    /// Initial SLR (§4.5.1.1); the session kept, or None (logged, counted).
    async fn initial(
        &self,
        pcf: &Pcf,
        supi: &str,
        gpsi: Option<&str>,
        counters: &[String],
    ) -> Option<Arc<Spending>> {
        let Some(node) = self.node.get() else {
            return self.initial_failed(supi, "the Sy node is not started");
        };
        let sid = node.new_session_id();
        // The first OCS open takes it (the route's order); its realm is the first's.
        let realm = self.config.ocs.first().map_or("", |o| o.realm.as_str());
        let mut slr = Message::request(sy::APP_ID, sy::CMD_SPENDING_LIMIT)
            .session_id_avp(&sid)
            .avp(base::AUTH_APPLICATION_ID.u32(sy::APP_ID))
            .origin(node.origin_host(), node.origin_realm())
            .destination(realm, None)
            .avp(sy::SL_REQUEST_TYPE.enumerated(sy::sl_request_type::INITIAL_REQUEST));
        if let Some(imsi) = supi.strip_prefix("imsi-") {
            slr.push(subscription_id(dcca::subscription_id_type::END_USER_IMSI, imsi));
        }
        if let Some(msisdn) = gpsi.and_then(|g| g.strip_prefix("msisdn-")) {
            slr.push(subscription_id(dcca::subscription_id_type::END_USER_E164, msisdn));
        }
        let slr = slr.with_avps(counters.iter().map(|c| sy::POLICY_COUNTER_IDENTIFIER.utf8(c)));
        let sla = match self.ask(node, slr).await {
            Ok(a) => a,
            Err(why) => return self.initial_failed(supi, &why),
        };
        let ocs_host = sla.origin_host().unwrap_or_default().to_string();
        let ocs_realm = sla.origin_realm().unwrap_or(realm).to_string();
        let session = SySession {
            supi: supi.to_string(),
            session_id: sid,
            ocs_host,
            ocs_realm,
            counters: counters.to_vec(),
            statuses: reported(&sla),
        };
        if let Err(e) = pcf.store.put_sy_session(session.clone()).await {
            // Not kept, so not known to end later: ended now.
            self.terminate(Some(session)).await;
            return self.initial_failed(supi, &format!("the Sy session was not stored: {e}"));
        }
        self.stats.initial_ok.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(%supi, "Sy session established");
        Some(self.keep(session))
    }

    fn initial_failed(&self, supi: &str, why: &str) -> Option<Arc<Spending>> {
        tracing::warn!(%supi, %why, "no Sy session with the OCS: deciding without spending limit statuses");
        self.stats.initial_failed.fetch_add(1, Ordering::Relaxed);
        None
    }

    /// Intermediate SLR (§4.5.1.2) with the whole new counter list; the statuses after it (the
    /// old ones, counted, when the OCS fails: the next create asks again).
    async fn intermediate(&self, pcf: &Pcf, held: &Held, counters: &[String]) -> Arc<Spending> {
        let s = &held.session;
        let failed = |why: &str| {
            tracing::warn!(supi = %s.supi, %why, "Intermediate SLR failed: deciding with the statuses kept");
            self.stats.intermediate_failed.fetch_add(1, Ordering::Relaxed);
            held.spending.clone()
        };
        let Some(node) = self.node.get() else { return failed("the Sy node is not started") };
        let slr = Message::request(sy::APP_ID, sy::CMD_SPENDING_LIMIT)
            .session_id_avp(&s.session_id)
            .avp(base::AUTH_APPLICATION_ID.u32(sy::APP_ID))
            .origin(node.origin_host(), node.origin_realm())
            .destination(&s.ocs_realm, Some(&s.ocs_host))
            .avp(sy::SL_REQUEST_TYPE.enumerated(sy::sl_request_type::INTERMEDIATE_REQUEST))
            .with_avps(counters.iter().map(|c| sy::POLICY_COUNTER_IDENTIFIER.utf8(c)));
        let sla = match self.ask(node, slr).await {
            Ok(a) => a,
            Err(why) => return failed(&why),
        };
        let mut statuses: Map<String, Value> = s
            .statuses
            .iter()
            .filter(|(k, _)| counters.contains(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        statuses.extend(reported(&sla));
        let session = SySession { counters: counters.to_vec(), statuses, ..s.clone() };
        if let Err(e) = pcf.store.put_sy_session(session.clone()).await {
            return failed(&format!("the new counters were not stored: {e}"));
        }
        self.stats.intermediate_ok.fetch_add(1, Ordering::Relaxed);
        self.keep(session)
    }

    /// Sends a request to the OCS; its answer when it is a success, else why not.
    async fn ask(&self, node: &DiameterNode, req: Message) -> Result<Message, String> {
        match node.request(req).await {
            Ok(a) if a.is_success() => Ok(a),
            Ok(a) => Err(format!("the OCS answered {:?}", a.any_result_code())),
            Err(e) => Err(format!("no answer from the OCS: {e}")),
        }
    }

    /// Whether `supi` has a Sy session the create about to be decided may make (to undo it
    /// if the create fails): a guard to call [`Created::done`] on once the create committed.
    pub(crate) fn creating(&self, pcf: &Arc<Pcf>, supi: &str) -> Created {
        let armed = self.config.enabled && !self.sessions().by_supi.contains_key(supi);
        Created { pcf: armed.then(|| pcf.clone()), supi: supi.to_string() }
    }

    /// After a session of `supi` was deleted, its caller holding the subscriber: when no
    /// session of the subscriber reads Sy any more, its Sy session is forgotten (memory and
    /// store) and returned, for [`Sy::terminate`] once the subscriber is let go.
    pub(crate) async fn after_delete(&self, pcf: &Pcf, supi: &str) -> Option<SySession> {
        let held = self.sessions().by_supi.get(supi).cloned()?;
        match pcf.store.sm_of(supi).await {
            Ok(left) if left.iter().any(|p| self.serves_id(&p.id)) => return None,
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(%supi, error = %e, "sessions not read: the Sy session stays");
                return None;
            }
        }
        let s = held.session.clone();
        self.forget(supi, &s.session_id);
        if let Err(e) = pcf.store.drop_sy_session(supi, &s.session_id).await {
            tracing::warn!(%supi, error = %e, "ended Sy session not removed from the store");
        }
        Some(s)
    }

    /// STR (§4.5.3) of a session [`Sy::after_delete`] ended; a failure is logged and counted.
    pub(crate) async fn terminate(&self, s: Option<SySession>) {
        let (Some(s), Some(node)) = (s, self.node.get()) else { return };
        let str_ = Message::request(sy::APP_ID, sy::CMD_SESSION_TERMINATION)
            .session_id_avp(&s.session_id)
            .avp(base::AUTH_APPLICATION_ID.u32(sy::APP_ID))
            .origin(node.origin_host(), node.origin_realm())
            .destination(&s.ocs_realm, Some(&s.ocs_host))
            .avp(base::TERMINATION_CAUSE.enumerated(DIAMETER_LOGOUT));
        match self.ask(node, str_).await {
            Ok(_) => {
                self.stats.terminate_ok.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(supi = %s.supi, "Sy session terminated");
            }
            Err(why) => {
                self.stats.terminate_failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(supi = %s.supi, %why, "Sy session not terminated at the OCS");
            }
        }
    }

    /// Merges an SNR's statuses into the session `session_id`'s; its SUPI, None when unknown.
    fn notified(&self, session_id: &str, changed: Map<String, Value>) -> Option<String> {
        let mut m = self.sessions();
        let supi = m.by_id.get(session_id)?.clone();
        let old = m.by_supi.get(&supi)?;
        let mut s = old.session.clone();
        s.statuses.extend(changed);
        m.by_supi.insert(supi.clone(), Held::new(s));
        Some(supi)
    }
}

/// Undoes a Sy session a create made when the create does not commit (it is refused, or its
/// store write fails): dropped without [`Created::done`], it ends the subscriber's Sy session
/// if no session of the subscriber reads Sy (checked holding the subscriber, once the create
/// has let it go).
pub(crate) struct Created {
    pcf: Option<Arc<Pcf>>,
    supi: String,
}

impl Created {
    pub(crate) fn done(mut self) {
        self.pcf = None;
    }
}

impl Drop for Created {
    fn drop(&mut self) {
        let Some(pcf) = self.pcf.take() else { return };
        let supi = std::mem::take(&mut self.supi);
        tokio::spawn(async move {
            let held = pcf.hold(&supi).await;
            let gone = pcf.sy.after_delete(&pcf, &supi).await;
            drop(held);
            pcf.sy.terminate(gone).await;
        });
    }
}

fn subscription_id(kind: u32, data: &str) -> Avp {
    dcca::SUBSCRIPTION_ID.grouped(vec![
        dcca::SUBSCRIPTION_ID_TYPE.enumerated(kind),
        dcca::SUBSCRIPTION_ID_DATA.utf8(data),
    ])
}

/// The Policy-Counter-Status-Reports of an SLA: counter → status.
fn reported(m: &Message) -> Map<String, Value> {
    m.policy_counter_statuses().into_iter().map(|(id, s)| (id, Value::from(s))).collect()
}

/// Connects to the OCSs of `[pcf.sy]` with the PCF's Diameter identity (`[pcf.diameter]`) and
/// takes their SNRs; the node is kept in `pcf.sy`. Connecting goes on in the background: an
/// OCS that is down stops nothing (its SLRs fail until it is up).
pub async fn start(pcf: Arc<Pcf>, d: &DiameterConfig) -> std::io::Result<DiameterNode> {
    let cfg = &pcf.sy.config;
    let mut nc = NodeConfig::new(&d.origin_host, &d.origin_realm);
    nc.product_name = "fivecore-pcf".into();
    nc.listen = None;
    nc.applications = vec![ApplicationId::tgpp(sy::APP_ID)];
    nc.accept_unknown_peers = false;
    nc.peers = cfg
        .ocs
        .iter()
        .map(|o| PeerConfig::connect(&o.host, o.addr).transport(Transport::tls_if(o.tls)))
        .collect();
    if let Some(tls) = &d.tls {
        // The PCF's certificate for its outbound TLS peers; Gx's node has the TLS listener.
        nc.apply_tls(tls).map_err(|e| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("pcf.diameter.tls: {e}"))
        })?;
        nc.tls_listen = None;
    }
    let hosts: Vec<String> = cfg.ocs.iter().map(|o| o.host.clone()).collect();
    // A request for an OCS that is down (its Destination-Host) goes to the next one open.
    nc.routes = vec![Route::new("*", RouteAction::Relay(hosts)).application(sy::APP_ID)];
    nc.request_timeout = Duration::from_millis(cfg.request_timeout_ms);
    nc.watchdog_interval = Duration::from_secs(cfg.watchdog_secs);
    let p = pcf.clone();
    let node = DiameterNode::builder(nc)
        .handler(sy::APP_ID, move |req: Message| {
            let p = p.clone();
            async move { handle(&p, req).await }
        })
        .start()
        .await?;
    let _ = pcf.sy.node.set(node.clone());
    tracing::info!(ocs = ?cfg.ocs.iter().map(|o| &o.host).collect::<Vec<_>>(), "PCF Sy connecting to the OCSs");
    Ok(node)
}

/// The answer to `req` with `code` as Result-Code (E bit for a protocol error, 3xxx).
fn answer(req: &Message, code: u32) -> Message {
    let mut a = Message::answer_to(req);
    if rc::is_protocol_error(code) {
        a.header.flags |= FLAG_ERROR;
    }
    a.avp(base::RESULT_CODE.u32(code))
}

fn failed(req: &Message, code: u32, avp: Avp) -> Message {
    answer(req, code).avp(base::FAILED_AVP.grouped(vec![avp]))
}

/// The statuses of an SNR, or the answer refusing it.
fn snr_statuses(req: &Message) -> Result<Map<String, Value>, Message> {
    let reports: Vec<&Avp> = req.find_all(&sy::POLICY_COUNTER_STATUS_REPORT).collect();
    if reports.is_empty() {
        // Nothing to notify: the report §4.5.2 is about is missing.
        let example = sy::POLICY_COUNTER_STATUS_REPORT.zero_filled();
        return Err(failed(req, rc::DIAMETER_MISSING_AVP, example));
    }
    let mut out = Map::new();
    for r in reports {
        // Present (the node checked the group's grammar); an empty one says nothing.
        for def in [&sy::POLICY_COUNTER_IDENTIFIER, &sy::POLICY_COUNTER_STATUS] {
            match r.child(def) {
                Some(a) if a.as_str().is_ok_and(|s| !s.is_empty()) => {}
                Some(a) => return Err(failed(req, rc::DIAMETER_INVALID_AVP_VALUE, a)),
                None => return Err(failed(req, rc::DIAMETER_MISSING_AVP, def.zero_filled())),
            }
        }
        let get = |def| r.child(def).and_then(|a| a.as_str().ok().map(str::to_owned));
        if let (Some(id), Some(s)) =
            (get(&sy::POLICY_COUNTER_IDENTIFIER), get(&sy::POLICY_COUNTER_STATUS))
        {
            out.insert(id, Value::from(s));
        }
    }
    Ok(out)
}

/// The Sy handler: the OCS's SNR (§4.5.2, §5.6.3); an SLR or STR sent to the PCF is not ours
/// to answer (3001).
pub async fn handle(pcf: &Arc<Pcf>, req: Message) -> Message {
    let a = handle_inner(pcf, &req);
    let ok = a.result_code() == Some(rc::DIAMETER_SUCCESS);
    let n = if ok { &pcf.sy.stats.notify_ok } else { &pcf.sy.stats.notify_refused };
    n.fetch_add(1, Ordering::Relaxed);
    a
}

fn handle_inner(pcf: &Arc<Pcf>, req: &Message) -> Message {
    if req.command_code() != sy::CMD_SPENDING_STATUS_NOTIFICATION {
        return answer(req, rc::DIAMETER_COMMAND_UNSUPPORTED);
    }
    if let Some(a) = req.find(&base::AUTH_APPLICATION_ID) {
        if a.as_u32().ok() != Some(sy::APP_ID) {
            return failed(req, rc::DIAMETER_INVALID_AVP_VALUE, a.clone());
        }
    }
    let Some(sid) = req.session_id() else {
        return failed(req, rc::DIAMETER_MISSING_AVP, base::SESSION_ID.zero_filled());
    };
    let changed = match snr_statuses(req) {
        Ok(c) => c,
        Err(a) => return a,
    };
    let Some(supi) = pcf.sy.notified(sid, changed) else {
        return answer(req, rc::DIAMETER_UNKNOWN_SESSION_ID);
    };
    let p = pcf.clone();
    tokio::spawn(async move {
        let held = p.hold(&supi).await;
        if let Some(s) = p.sy.session_of(&supi) {
            if let Err(e) = p.store.put_sy_session(s).await {
                tracing::warn!(%supi, error = %e, "notified Sy statuses not stored");
            }
        }
        crate::npcf_smpolicycontrol::redecide_held(&p, &supi, held).await;
    });
    answer(req, rc::DIAMETER_SUCCESS)
}

/// `pcf_sy_requests_total{command, result}`, `pcf_sy_notifications_total{result}` and the
/// gauge `pcf_sy_sessions`.
pub(crate) fn encode_metrics(
    pcf: &Pcf,
    encoder: &mut prometheus_client::encoding::DescriptorEncoder<'_>,
) -> std::fmt::Result {
    use prometheus_client::encoding::EncodeMetric;
    use prometheus_client::metrics::counter::ConstCounter;
    use prometheus_client::metrics::gauge::ConstGauge;
    use prometheus_client::metrics::MetricType;
    let s = &pcf.sy.stats;
    let mut e = encoder.encode_descriptor(
        "pcf_sy_requests",
        "Sy requests sent to the OCS, by command and result",
        None,
        MetricType::Counter,
    )?;
    for (command, result, n) in [
        ("SLR-initial", "ok", &s.initial_ok),
        ("SLR-initial", "failed", &s.initial_failed),
        ("SLR-intermediate", "ok", &s.intermediate_ok),
        ("SLR-intermediate", "failed", &s.intermediate_failed),
        ("STR", "ok", &s.terminate_ok),
        ("STR", "failed", &s.terminate_failed),
    ] {
        let c = ConstCounter::new(n.load(Ordering::Relaxed));
        c.encode(e.encode_family(&[("command", command), ("result", result)])?)?;
    }
    let mut e = encoder.encode_descriptor(
        "pcf_sy_notifications",
        "Requests received from the OCS (SNRs), by result (refused: answered with an error)",
        None,
        MetricType::Counter,
    )?;
    for (result, n) in [("ok", &s.notify_ok), ("refused", &s.notify_refused)] {
        let c = ConstCounter::new(n.load(Ordering::Relaxed));
        c.encode(e.encode_family(&[("result", result)])?)?;
    }
    let g = ConstGauge::new(pcf.sy.subscribers() as i64);
    g.encode(encoder.encode_descriptor(
        "pcf_sy_sessions",
        "Subscribers with a Sy session at an OCS",
        None,
        g.metric_type(),
    )?)
}
