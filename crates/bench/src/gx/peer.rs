//! A simulated PCEF (P-GW) on our own Diameter stack: connects to the PCRF's Diameter port
//! (CER with its own Origin-Host, so the PCRF's RARs reach it by the Origin-Host of its CCRs;
//! DWR/DWA by the node), sends the CCRs of the load, and answers what the PCRF sends it: RAR
//! with RAA 2001 after its added latency, noting the rules it installs for the session's next
//! CCR-U to report; ASR with ASA 2001; any other request 3001 DIAMETER_COMMAND_UNSUPPORTED.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use diameter::dictionary::{base, gx};
use diameter::header::FLAG_ERROR;
use diameter::{result_code as rc, DiameterNode, Message};
use serde::Serialize;

use super::messages::{installs_and_triggers, removals, GxMessages, Identity};
use super::sessions::PushedRules;
use crate::scenario::{Diameter, Simulator};

/// Requests a PCEF received from the PCRF, by command.
#[derive(Debug, Default)]
pub struct PcefCounters {
    pub rar: AtomicU64,
    pub asr: AtomicU64,
    pub other: AtomicU64,
}

/// What a simulated PCEF saw, for the report.
#[derive(Debug, Clone, Serialize)]
pub struct PcefReport {
    pub name: String,
    pub origin_host: String,
    pub latency_ms: u64,
    /// Gx RARs (the PCRF's pushes), answered RAA 2001.
    pub received_rar: u64,
    pub received_asr: u64,
    /// Anything else, answered 3001.
    pub received_other: u64,
}

pub struct GxPeer {
    pub name: String,
    pub latency_ms: u64,
    pub id: Identity,
    pub node: DiameterNode,
    pub counters: Arc<PcefCounters>,
}

impl GxPeer {
    /// Starts the node, connects to the PCRF at `addr` and waits until the connection is open.
    pub async fn start(
        sim: &Simulator,
        nf: &Diameter,
        addr: SocketAddr,
        msgs: Arc<GxMessages>,
        pushed: Arc<PushedRules>,
    ) -> Result<GxPeer> {
        let (host, realm, c) = crate::sim_node::config(sim, nf, addr, gx::APP_ID)?;
        let id = Identity::new(host, realm);
        let counters = Arc::new(PcefCounters::default());
        let latency = Duration::from_millis(sim.latency_ms);
        let (cn, me) = (counters.clone(), Arc::new(id.clone()));
        let node = DiameterNode::builder(c)
            .handler(gx::APP_ID, move |req: Message| {
                let (cn, msgs, me, pushed) = (cn.clone(), msgs.clone(), me.clone(), pushed.clone());
                async move {
                    match req.command_code() {
                        gx::CMD_RE_AUTH => {
                            cn.rar.fetch_add(1, Ordering::Relaxed);
                            let (installed, armed) = installs_and_triggers(&req);
                            let sid = req.session_id().unwrap_or_default().as_bytes();
                            pushed.pushed(sid, installed, &removals(&req), armed);
                        }
                        base::CMD_ABORT_SESSION => {
                            cn.asr.fetch_add(1, Ordering::Relaxed);
                        }
                        _ => {
                            cn.other.fetch_add(1, Ordering::Relaxed);
                            let mut a = Message::answer_to(&req);
                            a.header.flags |= FLAG_ERROR;
                            a.avps.extend_from_slice(me.origin_avps());
                            return a.avp(base::RESULT_CODE.u32(rc::DIAMETER_COMMAND_UNSUPPORTED));
                        }
                    }
                    if !latency.is_zero() {
                        tokio::time::sleep(latency).await;
                    }
                    msgs.success(&req, &me)
                }
            })
            .start()
            .await?;
        crate::sim_node::wait_connected(&node, sim, nf, addr).await?;
        Ok(GxPeer { name: sim.name.clone(), latency_ms: sim.latency_ms, id, node, counters })
    }

    pub fn report(&self) -> PcefReport {
        let c = &self.counters;
        PcefReport {
            name: self.name.clone(),
            origin_host: self.id.host.clone(),
            latency_ms: self.latency_ms,
            received_rar: c.rar.load(Ordering::Relaxed),
            received_asr: c.asr.load(Ordering::Relaxed),
            received_other: c.other.load(Ordering::Relaxed),
        }
    }
}
