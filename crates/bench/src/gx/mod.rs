//! Diameter Gx load (TS 29.212): simulated PCEFs (P-GWs) in front of the PCRF (the PCF with
//! `[pcf.diameter]`), on our own Diameter stack (`crates/diameter`), shaped like [`crate::rx`].
//!
//! - [`peer`]: the PCEFs, each a `DiameterNode` connected to the PCRF's Diameter port,
//!   answering its RARs (and ASRs) with 2001 after their added latency.
//! - [`messages`]: CCR-I, CCR-U, CCR-T as a P-GW sends them, from pre-encoded templates.
//! - [`sessions`]: the open IP-CAN sessions CCR-U and CCR-T act on, and the rules the PCRF
//!   pushed to each, which the session's next CCR-U reports.
//!
//! Each Gx procedure due is prepared by the dispatcher ([`GxSims::prepare`]: a new session or
//! a lent one, the message built) and sent by its own task ([`GxCall::send`]); latency runs
//! from the due time like the HTTP procedures'. Success is the expected result code from the
//! PCRF's Origin-Host.

pub mod messages;
pub mod peer;
pub mod sessions;

use std::borrow::Cow;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use diameter::{DiameterNode, Message};
use serde::Serialize;
use tokio::sync::Semaphore;

use crate::rx::error_label;
use crate::rx::messages::outcome_label;
use crate::scenario::{GxOp, Scenario, SimKind};
use crate::sched::Rng;
use messages::{GxMessages, Reported, SessionFacts, UpdateEvent, UsageReport};
use peer::{GxPeer, PcefReport};
use sessions::{GxSession, GxSessionPool, PushedRules};

/// UE addresses the CCR-Is hand out: `ue_ipv4_first` plus a counter modulo this (a /10, as
/// 100.64.0.0/10), far more than the sessions open at once, so no two open sessions share one.
const UE_ADDRESSES: u64 = 1 << 22;

/// What a CCR-U of a procedure reports besides the rules: its Event-Trigger and usage.
#[derive(Debug, Clone, Default)]
pub struct GxUpdate {
    pub event: Option<UpdateEvent>,
    pub usage: Option<UsageReport>,
}

/// The Gx side of the report.
#[derive(Debug, Clone, Serialize)]
pub struct GxReport {
    pub peers: Vec<PcefReport>,
    pub sessions_open_at_end: u64,
    /// Most Gx sessions open at once.
    pub sessions_peak: u64,
    /// Rules the PCEFs reported ACTIVE in CCR-Us (Charging-Rule-Report), one per rule the
    /// PCRF installed with the allocation report armed.
    pub rules_reported: u64,
}

/// The PCEF simulators of a run.
pub struct GxSims {
    pub pcefs: Vec<GxPeer>,
    pub msgs: Arc<GxMessages>,
    pub sessions: GxSessionPool,
    pub pushed: Arc<PushedRules>,
    /// The Origin-Host the CCAs must come from: the PCRF.
    pcrf_host: String,
    supi_first: u64,
    supi_count: u64,
    ue_ipv4_first: Ipv4Addr,
    next_pcef: AtomicUsize,
    next_ue: AtomicU64,
}

impl GxSims {
    /// Whether the scenario has PCEF simulators.
    pub fn wanted(s: &Scenario) -> bool {
        s.simulators.iter().any(|x| x.kind == SimKind::PcefGx)
    }

    /// Starts every `pcef_gx` simulator of `s`, connected to the PCRF's Diameter port at
    /// `addr`.
    pub async fn start(s: &Scenario, addr: SocketAddr) -> Result<GxSims> {
        let d = s.diameter.as_ref().context("the scenario has no [diameter] section")?;
        let g = &s.generators;
        let msgs =
            Arc::new(GxMessages::new(&d.origin_realm, &g.supi_prefix, &g.gpsi_prefix, &d.gx_apn));
        let pushed = Arc::new(PushedRules::default());
        let mut pcefs = Vec::new();
        for sim in s.simulators.iter().filter(|x| x.kind == SimKind::PcefGx) {
            pcefs.push(GxPeer::start(sim, d, addr, msgs.clone(), pushed.clone()).await?);
        }
        if pcefs.is_empty() {
            bail!("the scenario has no pcef_gx simulator");
        }
        Ok(GxSims {
            pcefs,
            msgs,
            sessions: GxSessionPool::default(),
            pushed,
            pcrf_host: d.answer_host.clone().unwrap_or_else(|| d.origin_host.clone()),
            supi_first: g.supi_first,
            supi_count: g.supi_count.max(1),
            ue_ipv4_first: g.ue_ipv4_first,
            next_pcef: AtomicUsize::new(0),
            next_ue: AtomicU64::new(0),
        })
    }

    /// DPR to the PCRF from every PCEF.
    pub async fn shutdown(&self) {
        for p in &self.pcefs {
            p.node.shutdown().await;
        }
    }

    pub fn report(&self) -> GxReport {
        GxReport {
            peers: self.pcefs.iter().map(GxPeer::report).collect(),
            sessions_open_at_end: self.sessions.open(),
            sessions_peak: self.sessions.peak(),
            rules_reported: self.pushed.reported(),
        }
    }

    /// The UE address and MSISDN digits (`gpsi_prefix` + MSIN is the caller's) of an open
    /// session drawn at random, for an AF's AAR-I.
    pub fn pick_ue(&self, rng: &mut Rng) -> Option<(Ipv4Addr, u64)> {
        self.sessions.pick_ue(rng)
    }

    /// The request of `op` due now, or `None` when it acts on an open session and none is idle
    /// (skipped, not failed).
    pub fn prepare(&self, op: GxOp, update: &GxUpdate, rng: &mut Rng) -> Option<GxCall> {
        let (msg, session) = match op {
            GxOp::CcrInitial => {
                let pcef = self.next_pcef.fetch_add(1, Ordering::Relaxed) % self.pcefs.len();
                let node = &self.pcefs[pcef].node;
                let sid = Bytes::from(node.new_session_id());
                let n = self.next_ue.fetch_add(1, Ordering::Relaxed);
                let facts = SessionFacts {
                    msin: self.supi_first + rng.below(self.supi_count),
                    ue: Ipv4Addr::from(
                        u32::from(self.ue_ipv4_first).wrapping_add((n % UE_ADDRESSES) as u32),
                    ),
                    charging_id: n as u32,
                    cell: rng.below(1 << 28) as u32,
                };
                self.pushed.open(&sid);
                let msg = self.msgs.ccr_initial(&self.pcefs[pcef].id, &sid, &facts);
                (msg, GxSession { sid, pcef, facts, number: 0 })
            }
            GxOp::CcrUpdate | GxOp::CcrTerminate => {
                // An update goes first to a session with rules to report.
                let reporting = match op {
                    GxOp::CcrUpdate => self.pushed.next_to_report(),
                    _ => None,
                };
                let mut s = reporting
                    .and_then(|sid| self.sessions.take_sid(&sid))
                    .or_else(|| self.sessions.take())?;
                s.number += 1;
                let pcef = &self.pcefs[s.pcef].id;
                let msg = if op == GxOp::CcrTerminate {
                    self.msgs.ccr_terminate(pcef, &s.sid, s.number, &s.facts)
                } else {
                    if update.event == Some(UpdateEvent::UserLocationChange) {
                        s.facts.cell = rng.below(1 << 28) as u32;
                    }
                    let installed = self.pushed.to_report(&s.sid);
                    let what = Reported {
                        event: update.event,
                        installed: &installed,
                        usage: update.usage.as_ref(),
                    };
                    self.msgs.ccr_update(pcef, &s.sid, s.number, &s.facts, &what)
                };
                (msg, s)
            }
        };
        Some(GxCall { op, node: self.pcefs[session.pcef].node.clone(), msg, session })
    }

    /// Opens `n` Gx sessions (CCR-I, 64 at a time) before the load, so CCR-U, CCR-T and the
    /// AFs' AAR-Is find sessions from the first second. Any refusal stops the run.
    pub async fn open_sessions(
        self: &Arc<Self>,
        n: u64,
        rng: &mut Rng,
        expect: &[u32],
    ) -> Result<()> {
        let sem = Arc::new(Semaphore::new(64));
        let mut set = tokio::task::JoinSet::new();
        let update = GxUpdate::default();
        for _ in 0..n {
            let permit = sem.clone().acquire_owned().await?;
            let call = self
                .prepare(GxOp::CcrInitial, &update, rng)
                .context("a CCR-I is always possible")?;
            let (sims, expect) = (self.clone(), expect.to_vec());
            set.spawn(async move {
                let _permit = permit;
                call.send(&sims, &expect).await
            });
        }
        while let Some(r) = set.join_next().await {
            let (ok, outcome) = r?;
            if !ok {
                bail!("opening Gx sessions before the load: a CCR-I was answered {outcome}");
            }
        }
        Ok(())
    }
}

/// One Gx request, ready to go.
pub struct GxCall {
    op: GxOp,
    node: DiameterNode,
    msg: Message,
    session: GxSession,
}

impl GxCall {
    /// Sends the CCR and waits for its CCA: success when its result code is expected and it
    /// comes from the PCRF. Keeps the session bookkeeping and what the CCA pushed.
    pub async fn send(self, sims: &GxSims, expect: &[u32]) -> (bool, Cow<'static, str>) {
        let GxCall { op, node, msg, session } = self;
        let (ok, outcome) = match node.request(msg).await {
            Ok(a) => {
                let judged = judge(&a, expect, &sims.pcrf_host);
                if judged.0 && op != GxOp::CcrTerminate {
                    let (installed, armed) = messages::installs_and_triggers(&a);
                    sims.pushed.pushed(&session.sid, installed, &messages::removals(&a), armed);
                }
                judged
            }
            Err(e) => (false, Cow::Borrowed(error_label(&e))),
        };
        match op {
            GxOp::CcrInitial | GxOp::CcrUpdate if ok => {
                if op == GxOp::CcrInitial {
                    sims.sessions.opened(session);
                } else {
                    sims.sessions.give_back(session);
                }
            }
            GxOp::CcrInitial => sims.pushed.close(&session.sid),
            GxOp::CcrUpdate | GxOp::CcrTerminate => {
                sims.pushed.close(&session.sid);
                sims.sessions.ended();
            }
        }
        (ok, outcome)
    }
}

fn judge(a: &Message, expect: &[u32], want_from: &str) -> (bool, Cow<'static, str>) {
    let code = a.any_result_code();
    let expected = code.is_some_and(|c| expect.contains(&c));
    let from_pcrf = a.origin_host().is_some_and(|h| h.eq_ignore_ascii_case(want_from));
    if expected && !from_pcrf {
        return (false, Cow::Borrowed("expected result from the wrong host"));
    }
    (expected, outcome_label(code))
}
