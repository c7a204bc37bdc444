//! The OCS simulator (kind `ocs`): a Diameter Sy peer (TS 29.219) the PCF connects to. It
//! listens on 127.0.0.1, takes the PCF's CER, answers SLR with the statuses of the counters
//! asked for that the simulator lists (`statuses`), STR with 2001, and keeps the sessions it
//! answered; it sends SNRs (`snr_statuses`) to them, every `snr_every_ms` in turn or when asked
//! ([`Ocs::notify`]). Everything is counted in the simulator's counters: `received` requests,
//! `created` sessions (SLR INITIAL_REQUEST), `deleted` (STR), `sent` / `send_failed` SNRs.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use diameter::dictionary::{base, sy};
use diameter::{result_code as rc, ApplicationId, DiameterNode, Message, NodeConfig};

use crate::scenario::Simulator;
use crate::sim::SimCounters;

/// A running OCS.
#[derive(Clone)]
pub struct Ocs {
    pub node: DiameterNode,
    state: Arc<State>,
}

struct State {
    host: String,
    realm: String,
    statuses: BTreeMap<String, String>,
    snr_statuses: BTreeMap<String, String>,
    latency: Duration,
    counters: Arc<SimCounters>,
    /// Sy Session-Id → (the PCF's Origin-Host, Origin-Realm), for the SNRs.
    sessions: Mutex<BTreeMap<String, (String, String)>>,
    next: Mutex<usize>,
}

impl Ocs {
    /// Starts the OCS of `sim` (its `origin_host` / `origin_realm`) on 127.0.0.1:0.
    pub async fn start(sim: &Simulator, counters: Arc<SimCounters>) -> std::io::Result<Ocs> {
        let (Some(host), Some(realm)) = (&sim.origin_host, &sim.origin_realm) else {
            return Err(std::io::Error::other(format!(
                "simulator {}: origin_host and origin_realm are required",
                sim.name
            )));
        };
        let mut c = NodeConfig::new(host, realm);
        c.product_name = "fivecore-bench".into();
        c.listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
        c.applications = vec![ApplicationId::tgpp(sy::APP_ID)];
        // Whichever PCF the scenario starts: its identity is its own configuration's.
        c.accept_unknown_peers = true;
        c.duplicate_ttl = None;
        let state = Arc::new(State {
            host: host.clone(),
            realm: realm.clone(),
            statuses: sim.statuses.clone(),
            snr_statuses: sim.snr_statuses.clone(),
            latency: Duration::from_millis(sim.latency_ms),
            counters,
            sessions: Mutex::default(),
            next: Mutex::new(0),
        });
        let s = state.clone();
        let node = DiameterNode::builder(c)
            .handler(sy::APP_ID, move |req: Message| {
                let s = s.clone();
                async move { s.answer(req).await }
            })
            .start()
            .await?;
        Ok(Ocs { node, state })
    }

    pub fn addr(&self) -> Option<SocketAddr> {
        self.node.local_addr()
    }

    /// The Sy sessions the OCS holds (answered an initial SLR, no STR yet).
    pub fn sessions(&self) -> usize {
        self.state.sessions.lock().unwrap().len()
    }

    /// Sends an SNR with `snr_statuses` to the next session in turn; its SNA's Result-Code,
    /// None when it holds no session or had no answer (counted `send_failed`).
    pub async fn notify(&self) -> Option<u32> {
        let (sid, (host, realm)) = {
            let sessions = self.state.sessions.lock().unwrap();
            if sessions.is_empty() {
                return None;
            }
            let mut next = self.state.next.lock().unwrap();
            *next = (*next + 1) % sessions.len();
            let (k, v) = sessions.iter().nth(*next)?;
            (k.clone(), v.clone())
        };
        let snr = Message::request(sy::APP_ID, sy::CMD_SPENDING_STATUS_NOTIFICATION)
            .session_id_avp(&sid)
            .avp(base::AUTH_APPLICATION_ID.u32(sy::APP_ID))
            .origin(self.node.origin_host(), self.node.origin_realm())
            .destination(&realm, Some(&host))
            .with_avps(self.state.snr_statuses.iter().map(|(c, st)| report(c, st)));
        let c = &self.state.counters;
        match self.node.request(snr).await {
            Ok(a) => {
                let code = a.result_code();
                let n = if a.is_success() { &c.sent } else { &c.send_failed };
                n.fetch_add(1, Ordering::Relaxed);
                code
            }
            Err(_) => {
                c.send_failed.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Sends an SNR every `every`, for as long as it is polled.
    pub async fn notify_every(&self, every: Duration) {
        let mut t = tokio::time::interval(every);
        t.tick().await;
        loop {
            t.tick().await;
            self.notify().await;
        }
    }
}

fn report(counter: &str, status: &str) -> diameter::Avp {
    sy::POLICY_COUNTER_STATUS_REPORT.grouped(vec![
        sy::POLICY_COUNTER_IDENTIFIER.utf8(counter),
        sy::POLICY_COUNTER_STATUS.utf8(status),
    ])
}

impl State {
    async fn answer(&self, req: Message) -> Message {
        let c = &self.counters;
        c.received.fetch_add(1, Ordering::Relaxed);
        c.items.fetch_add(1, Ordering::Relaxed);
        if !self.latency.is_zero() {
            tokio::time::sleep(self.latency).await;
        }
        let a = Message::answer_to(&req)
            .avp(base::AUTH_APPLICATION_ID.u32(sy::APP_ID))
            .origin(&self.host, &self.realm);
        let sid = req.session_id().unwrap_or_default().to_string();
        match req.command_code() {
            sy::CMD_SPENDING_LIMIT => {
                if req.sl_request_type() == Some(sy::sl_request_type::INITIAL_REQUEST) {
                    let from = (
                        req.origin_host().unwrap_or_default().to_string(),
                        req.origin_realm().unwrap_or_default().to_string(),
                    );
                    self.sessions.lock().unwrap().insert(sid, from);
                    c.created.fetch_add(1, Ordering::Relaxed);
                } else if !self.sessions.lock().unwrap().contains_key(&sid) {
                    c.rejected.fetch_add(1, Ordering::Relaxed);
                    return a.result_code_avp(rc::DIAMETER_UNKNOWN_SESSION_ID);
                }
                let asked = req.policy_counter_identifiers();
                let reports = self
                    .statuses
                    .iter()
                    .filter(|(id, _)| asked.is_empty() || asked.contains(&id.as_str()))
                    .map(|(id, st)| report(id, st))
                    .collect::<Vec<_>>();
                a.result_code_avp(rc::DIAMETER_SUCCESS).with_avps(reports)
            }
            sy::CMD_SESSION_TERMINATION => {
                if self.sessions.lock().unwrap().remove(&sid).is_none() {
                    c.rejected.fetch_add(1, Ordering::Relaxed);
                    return a.result_code_avp(rc::DIAMETER_UNKNOWN_SESSION_ID);
                }
                c.deleted.fetch_add(1, Ordering::Relaxed);
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
    use diameter::dictionary::dcca;
    use diameter::{PeerConfig, Route, RouteAction};

    #[tokio::test]
    async fn answers_slr_and_str_and_sends_snrs_to_its_sessions() {
        let sim = Simulator {
            name: "ocs".into(),
            kind: SimKind::Ocs,
            latency_ms: 0,
            description: String::new(),
            remote_share: 0.0,
            remote_nf_types: Vec::new(),
            answer_profiles: 0,
            answer_nf_type: None,
            origin_host: Some("ocs.bench".into()),
            origin_realm: Some("bench".into()),
            statuses: BTreeMap::from([("data-cap".into(), "normal".into())]),
            snr_statuses: BTreeMap::from([("data-cap".into(), "exhausted".into())]),
            snr_every_ms: 0,
            report_apps: Vec::new(),
            report_every_ms: 0,
        };
        let counters = Arc::new(SimCounters::default());
        let ocs = Ocs::start(&sim, counters.clone()).await.unwrap();

        // A PCRF: connects to the OCS, records the SNRs it gets.
        let mut c = NodeConfig::new("pcrf.bench", "bench");
        c.applications = vec![ApplicationId::tgpp(sy::APP_ID)];
        c.peers = vec![PeerConfig::connect("ocs.bench", ocs.addr().unwrap())];
        c.routes = vec![Route::new("*", RouteAction::Relay(vec!["ocs.bench".into()]))];
        let got: Arc<Mutex<Vec<Message>>> = Arc::default();
        let g = got.clone();
        let pcrf = DiameterNode::builder(c)
            .handler(sy::APP_ID, move |req: Message| {
                g.lock().unwrap().push(req.clone());
                async move { Message::answer_to(&req).result_code_avp(rc::DIAMETER_SUCCESS) }
            })
            .start()
            .await
            .unwrap();
        assert!(pcrf.wait_open("ocs.bench", Duration::from_secs(5)).await);
        assert_eq!(ocs.notify().await, None, "no session yet");

        let slr = |sid: &str, kind: u32| {
            Message::request(sy::APP_ID, sy::CMD_SPENDING_LIMIT)
                .session_id_avp(sid)
                .avp(base::AUTH_APPLICATION_ID.u32(sy::APP_ID))
                .destination("bench", None)
                .avp(sy::SL_REQUEST_TYPE.enumerated(kind))
                .avp(dcca::SUBSCRIPTION_ID.grouped(vec![
                    dcca::SUBSCRIPTION_ID_TYPE.enumerated(1),
                    dcca::SUBSCRIPTION_ID_DATA.utf8("001010000000001"),
                ]))
                .avp(sy::POLICY_COUNTER_IDENTIFIER.utf8("data-cap"))
                .avp(sy::POLICY_COUNTER_IDENTIFIER.utf8("other"))
        };
        let a = pcrf.request(slr("pcrf;1", 0)).await.unwrap();
        assert!(a.is_success(), "{a:?}");
        assert_eq!(a.policy_counter_statuses(), vec![("data-cap".into(), "normal".into())]);
        // An intermediate SLR of a session it does not hold: 5002.
        let a = pcrf.request(slr("pcrf;9", 1)).await.unwrap();
        assert_eq!(a.result_code(), Some(rc::DIAMETER_UNKNOWN_SESSION_ID));
        assert_eq!(ocs.sessions(), 1);

        assert_eq!(ocs.notify().await, Some(rc::DIAMETER_SUCCESS));
        let snr = got.lock().unwrap().pop().expect("an SNR");
        assert_eq!(snr.command_code(), sy::CMD_SPENDING_STATUS_NOTIFICATION);
        assert_eq!(snr.session_id(), Some("pcrf;1"));
        assert_eq!(snr.destination_host(), Some("pcrf.bench"));
        assert_eq!(snr.policy_counter_statuses(), vec![("data-cap".into(), "exhausted".into())]);

        let str_ = Message::request(sy::APP_ID, sy::CMD_SESSION_TERMINATION)
            .session_id_avp("pcrf;1")
            .avp(base::AUTH_APPLICATION_ID.u32(sy::APP_ID))
            .destination("bench", Some("ocs.bench"))
            .avp(base::TERMINATION_CAUSE.enumerated(1));
        let a = pcrf.request(str_).await.unwrap();
        assert!(a.is_success(), "{a:?}");
        assert_eq!(ocs.sessions(), 0);
        let n = |x: &std::sync::atomic::AtomicU64| x.load(Ordering::Relaxed);
        assert_eq!((n(&counters.received), n(&counters.created), n(&counters.deleted)), (3, 1, 1));
        assert_eq!((n(&counters.sent), n(&counters.rejected)), (1, 1));
        pcrf.shutdown().await;
        ocs.node.shutdown().await;
    }
}
