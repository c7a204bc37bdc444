//! Gx (TS 29.212) served by the PCF as a converged PCRF: the same policy engine, subscriber
//! data, state variables and collision control as N7, so one subscriber's 4G and 5G sessions
//! see one policy.
//!
//! - [`mapping`] is the N7 <-> Gx interworking mapping (TS 29.513 §5, §6);
//! - [`ccr`] serves CCR-I/U/T (TS 29.212 §4.5.1, §4.5.2, §4.5.7) and sends the PCRF-initiated
//!   RAR (§4.5.2.2 / §5.6.4) when a subscriber's policy data changes.
//!
//! A Gx session is stored as an SM policy association whose id is `gx:` + its Session-Id and
//! whose context is the SmPolicyContextData-shaped request the CCR-I mapped to, with the
//! PCEF's Diameter identity under `gx`. So it is durable as N7's are, re-decided with them on a
//! UDR notification, and found by the UE-address index (`PcfStore::sm_of_ue`) that binds an
//! application session: the seam Rx binds through. Around it: [`binding`] registers it at the
//! BSF (so the BSF's Rx proxy finds it), [`release`] asks its PCEF to end it when the UDR
//! removes the subscriber (Session-Release-Cause), [`audit`] asks its PCEF with an RAR when it
//! has had no CCR for long, and crate::resend sends an unanswered RAR again.
//!
//! Rx is served on the same node (crate::rx), Sy on a node of its own (crate::sy). Not here
//! yet (docs/pcf.md): Sd, usage monitoring.

pub mod audit;
pub mod binding;
pub mod ccr;
pub mod mapping;
pub mod release;

use std::sync::Arc;
use std::time::Duration;

use diameter::dictionary::{gx, rx};
use diameter::{ApplicationId, DiameterNode, Message, NodeConfig, PeerConfig};

use crate::config::DiameterConfig;
use crate::context::Pcf;

/// What an SM policy association's id starts with when it is a Gx session.
pub const SESSION_PREFIX: &str = "gx:";

/// Whether a stored SM policy association is a Gx session.
pub fn is_gx(policy_id: &str) -> bool {
    policy_id.starts_with(SESSION_PREFIX)
}

/// The store id of the Gx session `session_id`.
pub fn policy_id(session_id: &str) -> String {
    format!("{SESSION_PREFIX}{session_id}")
}

/// Binds the Diameter port and serves Gx on it; the node is kept in `pcf.gx` (for RARs).
pub async fn start(pcf: Arc<Pcf>, cfg: &DiameterConfig) -> std::io::Result<DiameterNode> {
    let mut nc = NodeConfig::new(&cfg.origin_host, &cfg.origin_realm);
    nc.product_name = "fivecore-pcf".into();
    nc.listen = Some(cfg.listen);
    // Rx (TS 29.214) is served on the same node: the AF's sessions bind to Gx sessions and
    // N7 associations alike (crate::rx).
    nc.applications = vec![ApplicationId::tgpp(gx::APP_ID), ApplicationId::tgpp(rx::APP_ID)];
    nc.accept_unknown_peers = cfg.accept_unknown_peers;
    nc.peers = cfg.accept.iter().map(PeerConfig::accept).collect();
    nc.request_timeout = Duration::from_millis(cfg.request_timeout_ms);
    nc.watchdog_interval = Duration::from_secs(cfg.watchdog_secs);
    cfg.limits
        .apply("pcf.diameter.limits", &mut nc)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    if let Some(tls) = &cfg.tls {
        nc.apply_tls(tls).map_err(|e| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("pcf.diameter.tls: {e}"))
        })?;
    }
    let p = pcf.clone();
    let node = DiameterNode::builder(nc)
        .handler(gx::APP_ID, move |req: Message| {
            let p = p.clone();
            async move { ccr::handle(&p, req).await }
        })
        .handler(rx::APP_ID, {
            let p = pcf.clone();
            move |req: Message| {
                let p = p.clone();
                async move { crate::rx::handle(&p, req).await }
            }
        })
        .start()
        .await?;
    let _ = pcf.gx.set(node.clone());
    tracing::info!(addr = ?node.local_addr(), tls_addr = ?node.tls_local_addr(),
                   host = %cfg.origin_host, "PCF Gx and Rx listening");
    Ok(node)
}
