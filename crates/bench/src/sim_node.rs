//! The Diameter node of a simulated peer (Rx AF/PCF, Sh AS): one loopback connection to the NF
//! under test, everything it sends relayed through that NF.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{bail, Result};
use diameter::{ApplicationId, DiameterNode, NodeConfig, PeerConfig, Route, RouteAction};

use crate::scenario::{Diameter, Simulator};

/// The node configuration of simulator `sim` for application `app_id`, connecting to the NF
/// at `addr`; with the simulator's Origin-Host and Origin-Realm.
pub(crate) fn config<'a>(
    sim: &'a Simulator,
    nf: &Diameter,
    addr: SocketAddr,
    app_id: u32,
) -> Result<(&'a str, &'a str, NodeConfig)> {
    let (Some(host), Some(realm)) = (&sim.origin_host, &sim.origin_realm) else {
        bail!("simulator {}: origin_host and origin_realm are required", sim.name)
    };
    let mut c = NodeConfig::new(host, realm);
    c.product_name = "fivecore-bench".into();
    c.applications = vec![ApplicationId::tgpp(app_id)];
    c.peers = vec![PeerConfig::connect(&nf.origin_host, addr)];
    // Whatever it sends goes through the NF: the NF, not the simulator, finds the other side.
    c.routes = vec![Route::new("*", RouteAction::Relay(vec![nf.origin_host.clone()]))];
    c.request_timeout = Duration::from_millis(nf.timeout_ms);
    c.reconnect_min = Duration::from_millis(100);
    c.reconnect_max = Duration::from_secs(1);
    // Nothing is retransmitted on one loopback connection: no duplicate cache to fill.
    c.duplicate_ttl = None;
    Ok((host, realm, c))
}

/// Waits until `node` has its connection to the NF open (CER/CEA done); shuts it down and
/// fails after 10 s.
pub(crate) async fn wait_connected(
    node: &DiameterNode,
    sim: &Simulator,
    nf: &Diameter,
    addr: SocketAddr,
) -> Result<()> {
    if !node.wait_open(&nf.origin_host, Duration::from_secs(10)).await {
        node.shutdown().await;
        bail!(
            "simulator {}: no Diameter connection to {} at {addr} (CER/CEA) within 10 s",
            sim.name,
            nf.origin_host
        );
    }
    Ok(())
}
