//! The TDF simulator (kind `tdf`): a Diameter Sd peer (TS 29.212 §4b, §5b) the PCF connects
//! to (`[[pcf.sd.tdf]]`). It listens on 127.0.0.1, takes the PCF's CER, answers TSR with 2001
//! and keeps the session (its ADC rules' TDF-Application-Identifiers), answers RAR with 2001
//! (an RAR with Session-Release-Cause ends the session: the TDF then sends its CCR-T, as
//! §4b.5 has it), and reports applications to its sessions: a CCR-U with Event-Trigger
//! APPLICATION_START, or APPLICATION_STOP for one it reported started, and the
//! Application-Detection-Information of the next of `report_apps`, every `report_every_ms` in
//! turn or when asked ([`Tdf::report`]). Counted in the simulator's counters: `received`
//! requests, `created` sessions (TSR), `deleted` (released), `sent` / `send_failed` CCRs.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use diameter::dictionary::{base, dcca, gx};
use diameter::{result_code as rc, ApplicationId, DiameterNode, Message, NodeConfig};
use tokio::sync::mpsc;

use crate::scenario::Simulator;
use crate::sim::SimCounters;

/// CC-Request-Type UPDATE_REQUEST and TERMINATION_REQUEST (RFC 4006 §8.3).
const UPDATE_REQUEST: u32 = 2;
const TERMINATION_REQUEST: u32 = 3;

/// A running TDF; [`Tdf::run`] sends what it has to (its CCR-Ts, its periodic reports).
pub struct Tdf {
    pub node: DiameterNode,
    state: Arc<State>,
    /// CCR-Ts the handler made, for [`Tdf::run`] to send (the handler has no node to send on).
    terminations: tokio::sync::Mutex<mpsc::UnboundedReceiver<Message>>,
}

/// One Sd session the TDF holds.
#[derive(Debug, Clone)]
struct Session {
    /// The PCF's Origin-Host and Origin-Realm.
    pcf: (String, String),
    /// The CC-Request-Number of its next CCR.
    next_number: u32,
    /// Applications reported started and not stopped.
    running: Vec<String>,
}

struct State {
    host: String,
    realm: String,
    apps: Vec<String>,
    latency: Duration,
    counters: Arc<SimCounters>,
    sessions: Mutex<BTreeMap<String, Session>>,
    /// Which session, and which application, the next report is of.
    next: Mutex<(usize, usize)>,
    /// The CCR-T an RAR releasing a session calls for, to [`Tdf::run`].
    terminations: mpsc::UnboundedSender<Message>,
}

impl Tdf {
    /// Starts the TDF of `sim` (its `origin_host` / `origin_realm`) on 127.0.0.1:0.
    pub async fn start(sim: &Simulator, counters: Arc<SimCounters>) -> std::io::Result<Tdf> {
        let (Some(host), Some(realm)) = (&sim.origin_host, &sim.origin_realm) else {
            return Err(std::io::Error::other(format!(
                "simulator {}: origin_host and origin_realm are required",
                sim.name
            )));
        };
        let mut c = NodeConfig::new(host, realm);
        c.product_name = "fivecore-bench".into();
        c.listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
        c.applications = vec![ApplicationId::tgpp(gx::SD_APP_ID)];
        // Whichever PCF the scenario starts: its identity is its own configuration's.
        c.accept_unknown_peers = true;
        c.duplicate_ttl = None;
        let (tx, rx) = mpsc::unbounded_channel();
        let state = Arc::new(State {
            host: host.clone(),
            realm: realm.clone(),
            apps: sim.report_apps.clone(),
            latency: Duration::from_millis(sim.latency_ms),
            counters,
            sessions: Mutex::default(),
            next: Mutex::new((0, 0)),
            terminations: tx,
        });
        let s = state.clone();
        let node = DiameterNode::builder(c)
            .handler(gx::SD_APP_ID, move |req: Message| {
                let s = s.clone();
                async move { s.answer(req).await }
            })
            .start()
            .await?;
        Ok(Tdf { node, state, terminations: tokio::sync::Mutex::new(rx) })
    }

    pub fn addr(&self) -> Option<SocketAddr> {
        self.node.local_addr()
    }

    /// The Sd sessions the TDF holds (answered a TSR, not released).
    pub fn sessions(&self) -> usize {
        self.state.sessions.lock().unwrap().len()
    }

    /// Reports the next application to the next session in turn (started, or stopped when it
    /// reported it started); the CCA's Result-Code, None when it holds no session, lists no
    /// application or had no answer (counted `send_failed`).
    pub async fn report(&self) -> Option<u32> {
        let (sid, pcf, number, trigger, app) = {
            let mut sessions = self.state.sessions.lock().unwrap();
            if sessions.is_empty() || self.state.apps.is_empty() {
                return None;
            }
            let mut next = self.state.next.lock().unwrap();
            next.0 = (next.0 + 1) % sessions.len();
            next.1 = (next.1 + 1) % self.state.apps.len();
            let app = self.state.apps[next.1].clone();
            let (sid, s) = sessions.iter_mut().nth(next.0)?;
            let trigger = if let Some(i) = s.running.iter().position(|a| *a == app) {
                s.running.remove(i);
                gx::event_trigger::APPLICATION_STOP
            } else {
                s.running.push(app.clone());
                gx::event_trigger::APPLICATION_START
            };
            s.next_number += 1;
            (sid.clone(), s.pcf.clone(), s.next_number - 1, trigger, app)
        };
        let ccr = self
            .state
            .ccr(&sid, &pcf, UPDATE_REQUEST, number)
            .avp(gx::EVENT_TRIGGER.enumerated(trigger))
            .avp(
                gx::APPLICATION_DETECTION_INFORMATION
                    .grouped(vec![gx::TDF_APPLICATION_IDENTIFIER.with_slice(app.as_bytes())]),
            );
        self.state.send(&self.node, ccr).await
    }

    /// Sends the CCR-Ts of released sessions and, every `every` (zero: never), a report, for
    /// as long as it is polled.
    pub async fn run(&self, every: Duration) {
        let mut terminations = self.terminations.lock().await;
        // Never ticked when `every` is zero (the branch is off): any period does.
        let mut t =
            tokio::time::interval(if every.is_zero() { Duration::from_secs(3600) } else { every });
        t.tick().await;
        loop {
            tokio::select! {
                Some(ccr) = terminations.recv() => {
                    self.state.send(&self.node, ccr).await;
                }
                _ = t.tick(), if !every.is_zero() => {
                    self.report().await;
                }
            }
        }
    }
}

impl State {
    fn ccr(&self, sid: &str, pcf: &(String, String), kind: u32, number: u32) -> Message {
        Message::request(gx::SD_APP_ID, gx::CMD_CREDIT_CONTROL)
            .session_id_avp(sid)
            .avp(base::AUTH_APPLICATION_ID.u32(gx::SD_APP_ID))
            .origin(&self.host, &self.realm)
            .destination(&pcf.1, Some(&pcf.0))
            .avp(dcca::CC_REQUEST_TYPE.enumerated(kind))
            .avp(dcca::CC_REQUEST_NUMBER.u32(number))
    }

    /// Sends a CCR; the CCA's Result-Code (counted `sent` when a success, else `send_failed`).
    async fn send(&self, node: &DiameterNode, ccr: Message) -> Option<u32> {
        let c = &self.counters;
        match node.request(ccr).await {
            Ok(a) => {
                let n = if a.is_success() { &c.sent } else { &c.send_failed };
                n.fetch_add(1, Ordering::Relaxed);
                a.result_code()
            }
            Err(_) => {
                c.send_failed.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    async fn answer(&self, req: Message) -> Message {
        let c = &self.counters;
        c.received.fetch_add(1, Ordering::Relaxed);
        c.items.fetch_add(1, Ordering::Relaxed);
        if !self.latency.is_zero() {
            tokio::time::sleep(self.latency).await;
        }
        let mut a = Message::answer_to(&req).origin(&self.host, &self.realm);
        let sid = req.session_id().unwrap_or_default().to_string();
        match req.command_code() {
            gx::CMD_TDF_SESSION => {
                let pcf = (
                    req.origin_host().unwrap_or_default().to_string(),
                    req.origin_realm().unwrap_or_default().to_string(),
                );
                let s = Session { pcf, next_number: 0, running: Vec::new() };
                self.sessions.lock().unwrap().insert(sid, s);
                c.created.fetch_add(1, Ordering::Relaxed);
                a.push(base::AUTH_APPLICATION_ID.u32(gx::SD_APP_ID));
                a.result_code_avp(rc::DIAMETER_SUCCESS)
            }
            gx::CMD_RE_AUTH => {
                let released = req.get_u32(&gx::SESSION_RELEASE_CAUSE).is_some();
                let s = if released {
                    self.sessions.lock().unwrap().remove(&sid)
                } else {
                    self.sessions.lock().unwrap().get(&sid).cloned()
                };
                let Some(s) = s else {
                    c.rejected.fetch_add(1, Ordering::Relaxed);
                    return a.result_code_avp(rc::DIAMETER_UNKNOWN_SESSION_ID);
                };
                if released {
                    c.deleted.fetch_add(1, Ordering::Relaxed);
                    // The CCR-T follows the RAA (§4b.5): sent by `run`, after this answer.
                    let ccr = self.ccr(&sid, &s.pcf, TERMINATION_REQUEST, s.next_number);
                    let _ = self.terminations.send(ccr);
                }
                a.result_code_avp(rc::DIAMETER_SUCCESS)
            }
            _ => {
                c.rejected.fetch_add(1, Ordering::Relaxed);
                a.result_code_avp(rc::DIAMETER_COMMAND_UNSUPPORTED)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::SimKind;
    use diameter::{PeerConfig, Route, RouteAction};

    #[tokio::test]
    async fn answers_tsr_reports_applications_and_ends_released_sessions() {
        let sim = Simulator {
            name: "tdf".into(),
            kind: SimKind::Tdf,
            latency_ms: 0,
            description: String::new(),
            remote_share: 0.0,
            remote_nf_types: Vec::new(),
            answer_profiles: 0,
            answer_nf_type: None,
            origin_host: Some("tdf.bench".into()),
            origin_realm: Some("bench".into()),
            statuses: BTreeMap::new(),
            snr_statuses: BTreeMap::new(),
            snr_every_ms: 0,
            report_apps: vec!["video".into()],
            report_every_ms: 0,
        };
        let counters = Arc::new(SimCounters::default());
        let tdf = Arc::new(Tdf::start(&sim, counters.clone()).await.unwrap());
        let runner = {
            let t = tdf.clone();
            tokio::spawn(async move { t.run(Duration::ZERO).await })
        };

        // A PCRF: connects to the TDF, answers its CCRs with 2001 and records them.
        let mut c = NodeConfig::new("pcrf.bench", "bench");
        c.applications = vec![ApplicationId::tgpp(gx::SD_APP_ID)];
        c.peers = vec![PeerConfig::connect("tdf.bench", tdf.addr().unwrap())];
        c.routes = vec![Route::new("*", RouteAction::Relay(vec!["tdf.bench".into()]))];
        let got: Arc<Mutex<Vec<Message>>> = Arc::default();
        let g = got.clone();
        let pcrf = DiameterNode::builder(c)
            .handler(gx::SD_APP_ID, move |req: Message| {
                g.lock().unwrap().push(req.clone());
                async move {
                    let mut a =
                        Message::answer_to(&req).avp(base::AUTH_APPLICATION_ID.u32(gx::SD_APP_ID));
                    for def in [&dcca::CC_REQUEST_TYPE, &dcca::CC_REQUEST_NUMBER] {
                        if let Some(v) = req.find(def) {
                            a.push(v.clone());
                        }
                    }
                    a.result_code_avp(rc::DIAMETER_SUCCESS)
                }
            })
            .start()
            .await
            .unwrap();
        assert!(pcrf.wait_open("tdf.bench", Duration::from_secs(5)).await);
        assert_eq!(tdf.report().await, None, "no session yet");

        let tsr = Message::request(gx::SD_APP_ID, gx::CMD_TDF_SESSION)
            .session_id_avp("pcrf;1;gx=pgw;1")
            .avp(base::AUTH_APPLICATION_ID.u32(gx::SD_APP_ID))
            .destination("bench", None);
        let a = pcrf.request(tsr).await.unwrap();
        assert!(a.is_success(), "{a:?}");
        assert_eq!(tdf.sessions(), 1);

        // Started, then stopped: one application reported in turn.
        let trigger = |m: &Message| m.event_triggers();
        for (n, want) in
            [(0, gx::event_trigger::APPLICATION_START), (1, gx::event_trigger::APPLICATION_STOP)]
        {
            assert_eq!(tdf.report().await, Some(rc::DIAMETER_SUCCESS));
            let ccr = got.lock().unwrap().pop().expect("a CCR-U");
            assert_eq!(ccr.session_id(), Some("pcrf;1;gx=pgw;1"));
            assert_eq!(ccr.destination_host(), Some("pcrf.bench"));
            assert_eq!(ccr.cc_request_number(), Some(n));
            assert_eq!(trigger(&ccr), vec![want]);
            let adi = ccr.find(&gx::APPLICATION_DETECTION_INFORMATION).unwrap();
            let app = adi.child(&gx::TDF_APPLICATION_IDENTIFIER).unwrap();
            assert_eq!(app.as_slice().unwrap(), b"video");
        }

        // An RAR releasing the session: RAA 2001, then its CCR-T; one of a session it does not
        // hold: 5002.
        let rar = |sid: &str| {
            Message::request(gx::SD_APP_ID, gx::CMD_RE_AUTH)
                .session_id_avp(sid)
                .avp(base::AUTH_APPLICATION_ID.u32(gx::SD_APP_ID))
                .destination("bench", Some("tdf.bench"))
                .avp(base::RE_AUTH_REQUEST_TYPE.enumerated(0))
                .avp(gx::SESSION_RELEASE_CAUSE.enumerated(3))
        };
        assert!(pcrf.request(rar("pcrf;1;gx=pgw;1")).await.unwrap().is_success());
        let a = pcrf.request(rar("pcrf;9")).await.unwrap();
        assert_eq!(a.result_code(), Some(rc::DIAMETER_UNKNOWN_SESSION_ID));
        let mut ccr_t = None;
        for _ in 0..100 {
            if let Some(m) = got.lock().unwrap().pop() {
                ccr_t = Some(m);
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let ccr_t = ccr_t.expect("the CCR-T after the RAR");
        assert_eq!(ccr_t.get_u32(&dcca::CC_REQUEST_TYPE), Some(TERMINATION_REQUEST));
        assert_eq!(ccr_t.cc_request_number(), Some(2));
        assert_eq!(tdf.sessions(), 0);
        let n = |x: &std::sync::atomic::AtomicU64| x.load(Ordering::Relaxed);
        assert_eq!((n(&counters.received), n(&counters.created), n(&counters.deleted)), (3, 1, 1));
        for _ in 0..100 {
            if n(&counters.sent) == 3 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!((n(&counters.sent), n(&counters.rejected)), (3, 1));
        runner.abort();
        pcrf.shutdown().await;
        tdf.node.shutdown().await;
    }
}
