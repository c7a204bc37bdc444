//! Diameter Rx load through the NF's Rx proxy (TS 29.214; the BSF as Diameter proxy, TS 29.213
//! §7.3), on our own Diameter stack (`crates/diameter`).
//!
//! - [`peer`]: the simulated AFs (P-CSCF) and PCFs, each a `DiameterNode` connected to the
//!   NF's Diameter port, answering what they receive with 2001 after their added latency.
//! - [`messages`]: the AAR, STR, RAR and answers, valid for our dictionary and validator.
//! - [`sessions`]: the open Rx sessions AAR-U, RAR and STR act on.
//!
//! Each Rx procedure due is prepared by the dispatcher ([`RxSims::prepare`]: pick a bound UE or
//! lend an open session, build the message) and sent by its own task ([`RxCall::send`]): the
//! nodes keep many requests outstanding on one connection, and latency is measured from the
//! due time like the HTTP procedures'. RAR is sent by the PCF serving the session, toward the
//! AF that opened it, through the NF, and measured at the PCF.

pub mod messages;
pub mod peer;
pub mod sessions;

use std::borrow::Cow;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use diameter::{DiameterNode, Message, RequestError};
use tokio::sync::Semaphore;

use crate::bindings::BindingFactory;
use crate::scenario::{Generators, RxOp, Scenario, SimKind};
use crate::sched::Rng;
use messages::{outcome_label, RxMessages};
use peer::{PeerReport, RxPeer};
use sessions::{RxSession, SessionPool};

/// The UEs an AAR-I may address, `0..count`, all preloaded and never removed during the run.
#[derive(Clone)]
pub struct BoundUes {
    source: UeSource,
    pub count: u64,
}

#[derive(Clone)]
enum UeSource {
    /// Bindings of the factory at the NF (a BSF): each names the `pcf_rx` simulator serving it.
    Bindings(Arc<BindingFactory>),
    /// SM associations preloaded at the PCF itself, UE `i` at `ue_ipv4_first + i`
    /// (`{ue_ipv4}`) with subscriber [`ue_msin`]`(i)`: the PCF answers for itself.
    Associations { ue_ipv4_first: Ipv4Addr, gpsi_prefix: String, supi_first: u64, supi_count: u64 },
    /// The Gx sessions the PCEF simulators hold open at the PCRF (a voice mix): an AAR-I names
    /// one's UE address and its subscriber's MSISDN.
    GxSessions { gx: Arc<crate::gx::GxSims>, gpsi_prefix: String },
}

/// The MSIN of the subscriber holding UE `i` of a `{ue_ipv4}` preload (its SUPI's and GPSI's
/// digits), the same at the preload and in the AAR-I's Subscription-Id.
pub fn ue_msin(g: &Generators, i: u64) -> u64 {
    g.supi_first + i % g.supi_count.max(1)
}

impl BoundUes {
    pub fn bindings(factory: Arc<BindingFactory>, count: u64) -> BoundUes {
        BoundUes { source: UeSource::Bindings(factory), count }
    }

    /// The `count` SM associations preloaded with `{ue_ipv4}`.
    pub fn associations(g: &Generators, count: u64) -> BoundUes {
        let source = UeSource::Associations {
            ue_ipv4_first: g.ue_ipv4_first,
            gpsi_prefix: g.gpsi_prefix.clone(),
            supi_first: g.supi_first,
            supi_count: g.supi_count,
        };
        BoundUes { source, count }
    }

    /// The UEs of the Gx sessions open at the PCRF (`count` only sizes the Rx preload).
    pub fn gx_sessions(g: &Generators, gx: Arc<crate::gx::GxSims>) -> BoundUes {
        BoundUes {
            source: UeSource::GxSessions { gx, gpsi_prefix: g.gpsi_prefix.clone() },
            count: 0,
        }
    }

    /// A UE drawn at random: its IPv4 address, MSISDN, and the `pcf_rx` simulator serving it
    /// (`None`: the NF answers itself, as `[diameter] answer_host`). `None` when no Gx session
    /// is open.
    fn pick(&self, rng: &mut Rng) -> Option<(Ipv4Addr, String, Option<usize>)> {
        match &self.source {
            UeSource::Bindings(f) => {
                let i = rng.below(self.count.max(1));
                Some((f.ue_ipv4(i), f.msisdn(i), Some(f.pcf_index(i))))
            }
            UeSource::Associations { ue_ipv4_first, gpsi_prefix, supi_first, supi_count } => {
                let i = rng.below(self.count.max(1));
                let ip = Ipv4Addr::from(u32::from(*ue_ipv4_first).wrapping_add(i as u32));
                let msin = supi_first + i % (*supi_count).max(1);
                Some((ip, format!("{gpsi_prefix}{msin:010}"), None))
            }
            UeSource::GxSessions { gx, gpsi_prefix } => {
                let (ip, msin) = gx.pick_ue(rng)?;
                Some((ip, format!("{gpsi_prefix}{msin:010}"), None))
            }
        }
    }
}

/// The Diameter simulators of a run.
pub struct RxSims {
    pub afs: Vec<RxPeer>,
    /// In the order the bindings name them: binding `i` names `pcfs[factory.pcf_index(i)]`.
    pub pcfs: Vec<RxPeer>,
    pub msgs: Arc<RxMessages>,
    pub sessions: Arc<SessionPool>,
    /// `[diameter] answer_host`: who answers a session no `pcf_rx` simulator serves.
    answer_host: Option<String>,
    next_af: AtomicUsize,
}

impl RxSims {
    /// Whether the scenario has Rx simulators.
    pub fn wanted(s: &Scenario) -> bool {
        s.simulators.iter().any(|x| matches!(x.kind, SimKind::AfRx | SimKind::PcfRx))
    }

    /// Starts every `af_rx` and `pcf_rx` simulator of `s`, connected to the NF's Diameter port
    /// at `addr`.
    pub async fn start(s: &Scenario, addr: SocketAddr) -> Result<RxSims> {
        let d = s.diameter.as_ref().context("the scenario has no [diameter] section")?;
        let msgs = Arc::new(RxMessages::new(&d.origin_realm));
        let named = s.preload.bindings.as_ref().map(|b| b.pcf_sims.clone()).unwrap_or_default();
        // PCFs the bindings name first, in their order.
        let mut order: Vec<&crate::scenario::Simulator> =
            named.iter().filter_map(|n| s.simulators.iter().find(|x| &x.name == n)).collect();
        order.extend(
            s.simulators.iter().filter(|x| x.kind == SimKind::PcfRx && !named.contains(&x.name)),
        );
        order.extend(s.simulators.iter().filter(|x| x.kind == SimKind::AfRx));
        let mut afs = Vec::new();
        let mut pcfs = Vec::new();
        let sessions = Arc::new(SessionPool::default());
        for sim in order {
            let p = RxPeer::start(sim, d, addr, msgs.clone(), sessions.clone()).await?;
            match sim.kind {
                SimKind::PcfRx => pcfs.push(p),
                _ => afs.push(p),
            }
        }
        if afs.is_empty() {
            bail!("the scenario has no af_rx simulator");
        }
        Ok(RxSims {
            afs,
            pcfs,
            msgs,
            sessions,
            answer_host: d.answer_host.clone(),
            next_af: AtomicUsize::new(0),
        })
    }

    /// DPR to the NF from every simulator.
    pub async fn shutdown(&self) {
        for p in self.afs.iter().chain(&self.pcfs) {
            p.node.shutdown().await;
        }
    }

    pub fn reports(&self) -> Vec<PeerReport> {
        self.afs.iter().chain(&self.pcfs).map(RxPeer::report).collect()
    }

    /// The request of `op` due now, or `None` when it acts on an open session and none is idle
    /// (the request is then skipped, not failed).
    pub fn prepare(&self, op: RxOp, ues: &BoundUes, rng: &mut Rng) -> Option<RxCall> {
        match op {
            RxOp::AarInitial => {
                let (ue, msisdn, pcf) = ues.pick(rng)?;
                let af = self.next_af.fetch_add(1, Ordering::Relaxed) % self.afs.len();
                let node = &self.afs[af].node;
                let sid = Bytes::from(node.new_session_id());
                let msg = self.msgs.aar_initial(&self.afs[af].id, &sid, ue, &msisdn);
                Some(RxCall { op, node: node.clone(), msg, session: RxSession { sid, af, pcf } })
            }
            RxOp::AarUpdate | RxOp::Str => {
                let s = match op {
                    RxOp::Str => self.sessions.take()?,
                    _ => self.sessions.take_live()?,
                };
                let af = &self.afs[s.af];
                let msg = if op == RxOp::Str {
                    self.msgs.str_request(&af.id, &s.sid)
                } else {
                    self.msgs.aar_update(&af.id, &s.sid)
                };
                Some(RxCall { op, node: af.node.clone(), msg, session: s })
            }
            RxOp::Rar => {
                let s = self.sessions.take_live()?;
                let Some(pcf) = s.pcf.and_then(|i| self.pcfs.get(i)) else {
                    self.sessions.give_back(s);
                    return None;
                };
                let msg = self.msgs.rar(&pcf.id, &s.sid, &self.afs[s.af].id);
                Some(RxCall { op, node: pcf.node.clone(), msg, session: s })
            }
        }
    }

    /// Opens `n` Rx sessions (AAR-I, 64 at a time) before the load, so AAR-U, RAR and STR find
    /// sessions from the first second. Any refusal stops the run.
    pub async fn open_sessions(
        self: &Arc<Self>,
        n: u64,
        ues: &BoundUes,
        rng: &mut Rng,
        expect: &[u32],
    ) -> Result<()> {
        let sem = Arc::new(Semaphore::new(64));
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..n {
            let permit = sem.clone().acquire_owned().await?;
            let call = self.prepare(RxOp::AarInitial, ues, rng).context(
                "an AAR-I needs a UE to bind to (a preloaded one, or an open Gx session)",
            )?;
            let (sims, expect) = (self.clone(), expect.to_vec());
            set.spawn(async move {
                let _permit = permit;
                call.send(&sims, &expect).await
            });
        }
        while let Some(r) = set.join_next().await {
            let (ok, outcome) = r?;
            if !ok {
                bail!("opening Rx sessions before the load: an AAR-I was answered {outcome}");
            }
        }
        Ok(())
    }
}

/// One Rx request, ready to go.
pub struct RxCall {
    op: RxOp,
    node: DiameterNode,
    msg: Message,
    session: RxSession,
}

impl RxCall {
    /// Sends the request and waits for its answer: success when its result code is expected
    /// and it comes from the peer the session belongs to (the PCF of the UE's binding for the
    /// AF's requests, the AF for a RAR), so an answer the NF made up itself never counts.
    /// Keeps the session bookkeeping.
    pub async fn send(self, sims: &RxSims, expect: &[u32]) -> (bool, Cow<'static, str>) {
        let RxCall { op, node, msg, session } = self;
        let want_from = match op {
            RxOp::Rar => &sims.afs[session.af].id.host,
            _ => match (session.pcf, &sims.answer_host) {
                (Some(i), _) => match sims.pcfs.get(i) {
                    Some(p) => &p.id.host,
                    None => return (false, Cow::Borrowed("no pcf_rx simulator for the binding")),
                },
                (None, Some(host)) => host,
                (None, None) => return (false, Cow::Borrowed("no answer_host for the session")),
            },
        };
        let (ok, outcome) = match node.request(msg).await {
            Ok(a) => judge(&a, expect, want_from),
            Err(e) => (false, Cow::Borrowed(error_label(&e))),
        };
        match op {
            RxOp::AarInitial if ok => sims.sessions.opened(session),
            RxOp::AarInitial => {}
            RxOp::AarUpdate | RxOp::Rar if ok => sims.sessions.give_back(session),
            RxOp::AarUpdate | RxOp::Rar | RxOp::Str => {
                sims.sessions.forget(&session.sid);
                sims.sessions.ended();
            }
        }
        (ok, outcome)
    }
}

fn judge(a: &Message, expect: &[u32], want_from: &str) -> (bool, Cow<'static, str>) {
    let code = a.any_result_code();
    let expected = code.is_some_and(|c| expect.contains(&c));
    let from_peer = a.origin_host().is_some_and(|h| h.eq_ignore_ascii_case(want_from));
    if expected && !from_peer {
        return (false, Cow::Borrowed("expected result from the wrong host"));
    }
    (expected, outcome_label(code))
}

pub(crate) fn error_label(e: &RequestError) -> &'static str {
    match e {
        RequestError::Timeout => "timeout",
        RequestError::UnableToDeliver => "unable to deliver",
        RequestError::TooBusy => "too busy",
        RequestError::PeerDown => "peer down",
        RequestError::Encode(_) => "encode error",
        RequestError::MalformedAnswer(_) => "malformed answer",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use diameter::builders::experimental_result;
    use diameter::dictionary::rx;

    #[test]
    fn only_the_expected_result_from_the_sessions_peer_counts() {
        let m = RxMessages::new("fivecore.local");
        let af = messages::Identity::new("pcscf1.ims.x", "ims.x");
        let pcf = messages::Identity::new("pcf1.pcf.x", "pcf.x");
        let bsf = messages::Identity::new("bsf.x", "x");
        let sid = Bytes::from_static(b"pcscf1.ims.x;1;1");
        let aar = m.aar_initial(&af, &sid, "10.0.0.1".parse().unwrap(), "3300");
        assert_eq!(judge(&m.success(&aar, &pcf), &[2001], "pcf1.pcf.x"), (true, "2001".into()));
        // A 2001 made up by the NF (or any other host) is not the PCF's answer.
        let (ok, why) = judge(&m.success(&aar, &bsf), &[2001], "pcf1.pcf.x");
        assert!(!ok && why.contains("wrong host"), "{why}");
        let no_binding = Message::answer_to(&aar).origin("bsf.x", "x").avp(experimental_result(
            diameter::VENDOR_3GPP,
            rx::experimental_result::IP_CAN_SESSION_NOT_AVAILABLE,
        ));
        assert_eq!(judge(&no_binding, &[2001], "pcf1.pcf.x"), (false, "5065".into()));
        assert_eq!(error_label(&RequestError::Timeout), "timeout");
    }
}
