//! A simulated IMS application server on our own Diameter stack: it connects to the UDR's Sh
//! port (CER with its own Origin-Host), sends UDR, PUR and SNR, and answers every PNR the UDR
//! pushes with PNA 2001 after its added latency, counting them.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use diameter::dictionary::sh;
use diameter::{DiameterNode, Message};
use serde::Serialize;

use super::messages::{Identity, ShMessages};
use crate::scenario::{Diameter, Simulator};

/// What a simulated AS received.
#[derive(Debug, Default)]
pub struct AsCounters {
    pub pnr: AtomicU64,
    pub other: AtomicU64,
}

/// What a simulated AS saw, for the report.
#[derive(Debug, Clone, Serialize)]
pub struct AsReport {
    pub name: String,
    pub origin_host: String,
    pub latency_ms: u64,
    pub received_pnr: u64,
    pub received_other: u64,
}

pub struct ShPeer {
    pub name: String,
    pub latency_ms: u64,
    pub id: Identity,
    pub node: DiameterNode,
    pub counters: Arc<AsCounters>,
}

impl ShPeer {
    /// Starts the node, connects to the UDR at `addr` and waits until the connection is open.
    pub async fn start(
        sim: &Simulator,
        nf: &Diameter,
        addr: SocketAddr,
        msgs: Arc<ShMessages>,
    ) -> Result<ShPeer> {
        let (host, realm, c) = crate::sim_node::config(sim, nf, addr, sh::APP_ID)?;
        let id = Identity::new(host, realm);
        let counters = Arc::new(AsCounters::default());
        let latency = Duration::from_millis(sim.latency_ms);
        let (cn, me) = (counters.clone(), id.clone());
        let node = DiameterNode::builder(c)
            .handler(sh::APP_ID, move |req: Message| {
                let (cn, msgs, me) = (cn.clone(), msgs.clone(), me.clone());
                async move {
                    let counter = match req.command_code() {
                        sh::CMD_PUSH_NOTIFICATION => &cn.pnr,
                        _ => &cn.other,
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                    if !latency.is_zero() {
                        tokio::time::sleep(latency).await;
                    }
                    msgs.pna(&req, &me)
                }
            })
            .start()
            .await?;
        crate::sim_node::wait_connected(&node, sim, nf, addr).await?;
        Ok(ShPeer { name: sim.name.clone(), latency_ms: sim.latency_ms, id, node, counters })
    }

    pub fn report(&self) -> AsReport {
        AsReport {
            name: self.name.clone(),
            origin_host: self.id.host.clone(),
            latency_ms: self.latency_ms,
            received_pnr: self.counters.pnr.load(Ordering::Relaxed),
            received_other: self.counters.other.load(Ordering::Relaxed),
        }
    }
}
