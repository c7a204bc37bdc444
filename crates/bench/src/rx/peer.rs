//! A simulated Rx peer on our own Diameter stack: an AF (P-CSCF) or a PCF. It connects to the
//! NF's Diameter port (CER with its own Origin-Host, so a PCF is reachable under the host the
//! bindings name as `pcfDiamHost`), relays everything it sends through the NF, and answers
//! every Rx request it receives with 2001 after its added latency: a PCF its AARs and STRs, an
//! AF its RARs (and ASRs).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use diameter::dictionary::rx;
use diameter::{DiameterNode, Message};
use serde::Serialize;

use super::messages::{Identity, RxMessages};
use crate::scenario::{Diameter, SimKind, Simulator};

/// Requests a simulated peer received, by command.
#[derive(Debug, Default)]
pub struct PeerCounters {
    pub aar: AtomicU64,
    pub str: AtomicU64,
    pub rar: AtomicU64,
    pub other: AtomicU64,
}

/// What a simulated peer saw, for the report.
#[derive(Debug, Clone, Serialize)]
pub struct PeerReport {
    pub name: String,
    pub kind: String,
    pub origin_host: String,
    pub latency_ms: u64,
    pub received_aar: u64,
    pub received_str: u64,
    pub received_rar: u64,
    pub received_other: u64,
}

pub struct RxPeer {
    pub name: String,
    pub kind: SimKind,
    pub latency_ms: u64,
    pub id: Identity,
    pub node: DiameterNode,
    pub counters: Arc<PeerCounters>,
}

impl RxPeer {
    /// Starts the node, connects to the NF at `addr` and waits until the connection is open.
    pub async fn start(
        sim: &Simulator,
        nf: &Diameter,
        addr: SocketAddr,
        msgs: Arc<RxMessages>,
        sessions: Arc<super::sessions::SessionPool>,
    ) -> Result<RxPeer> {
        let (host, realm, c) = crate::sim_node::config(sim, nf, addr, rx::APP_ID)?;
        let id = Identity::new(host, realm);
        let counters = Arc::new(PeerCounters::default());
        let latency = Duration::from_millis(sim.latency_ms);
        // Shared, not cloned per request: an Identity is two Strings and four AVPs.
        let (cn, answer_as) = (counters.clone(), Arc::new(id.clone()));
        let node = DiameterNode::builder(c)
            .handler(rx::APP_ID, move |req: Message| {
                let (cn, msgs, me) = (cn.clone(), msgs.clone(), answer_as.clone());
                let sessions = sessions.clone();
                async move {
                    let counter = match req.command_code() {
                        rx::CMD_AA => &cn.aar,
                        rx::CMD_SESSION_TERMINATION => &cn.str,
                        rx::CMD_RE_AUTH => &cn.rar,
                        diameter::dictionary::base::CMD_ABORT_SESSION => {
                            // The session is over at the PCF: no more updates; the STR ends it.
                            sessions
                                .aborted_by_pcf(req.session_id().unwrap_or_default().as_bytes());
                            &cn.other
                        }
                        _ => &cn.other,
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                    if !latency.is_zero() {
                        tokio::time::sleep(latency).await;
                    }
                    msgs.success(&req, &me)
                }
            })
            .start()
            .await?;
        crate::sim_node::wait_connected(&node, sim, nf, addr).await?;
        Ok(RxPeer {
            name: sim.name.clone(),
            kind: sim.kind,
            latency_ms: sim.latency_ms,
            id,
            node,
            counters,
        })
    }

    pub fn report(&self) -> PeerReport {
        let c = &self.counters;
        PeerReport {
            name: self.name.clone(),
            kind: match self.kind {
                SimKind::PcfRx => "pcf_rx".into(),
                _ => "af_rx".into(),
            },
            origin_host: self.id.host.clone(),
            latency_ms: self.latency_ms,
            received_aar: c.aar.load(Ordering::Relaxed),
            received_str: c.str.load(Ordering::Relaxed),
            received_rar: c.rar.load(Ordering::Relaxed),
            received_other: c.other.load(Ordering::Relaxed),
        }
    }
}
