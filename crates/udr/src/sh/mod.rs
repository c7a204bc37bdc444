//! Diameter Sh (TS 29.328 procedures, TS 29.329 protocol): the UDR as the HSS of application
//! servers, on its own `DiameterNode` (`[udr.sh]`, port 3870).
//!
//! * [`udr`] Sh-Pull: User-Data-Request → User-Data-Answer with Sh-Data.
//! * [`pur`] Sh-Update: Profile-Update-Request, repository data with sequence numbers.
//! * [`snr`] Sh-Subs-Notif: Subscribe-Notifications-Request (subscribe / unsubscribe).
//! * [`pnr`] Sh-Notif: Push-Notification-Request to every subscribed AS after a change (a PUR
//!   of another AS, or provisioning).
//! * [`data`] the subscriber data and its store trait ([`sqlite`] the SQLite implementation); [`sh_data_xml`] the Sh-Data document;
//!   [`subscriptions`] the in-memory subscription index; [`xml`] the element tree both the
//!   Sh-Data parser and the SOAP provisioning use.
//!
//! Every Sh error is an Experimental-Result (Vendor-Id 10415) as TS 29.329 §6.2 requires; base
//! protocol errors (a missing or wrong AVP) are a Result-Code with Failed-AVP, those found by the
//! dictionary validator answered by the node before a handler runs.

pub mod config;
pub mod data;
pub mod mysql;
pub mod pnr;
pub mod pur;
pub mod sh_data_xml;
pub mod snr;
pub mod sqlite;
pub mod subscriptions;
pub mod udr;
pub mod xml;

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use diameter::builders::{experimental_result, vendor_specific_auth_app};
use diameter::dictionary::{base, sh};
use diameter::header::FLAG_ERROR;
use diameter::{
    result_code as rc, ApplicationId, Avp, DiameterNode, Message, NodeConfig, PeerConfig, Route,
    RouteAction, Transport, VENDOR_3GPP,
};

use tokio::sync::Semaphore;

use config::Procedure;
pub use config::ShConfig;
use data::{ShDataStore, ShTx, UserId};
use subscriptions::Subscriptions;

use crate::context::Udr;

/// Auth-Session-State NO_STATE_MAINTAINED: Sh keeps no Diameter session (TS 29.329 §6.1).
const NO_STATE_MAINTAINED: u32 = 1;

/// The Sh part of the UDR's state: its settings, the subscription index, and the Diameter node
/// once the listener runs (provisioning changes notify through it).
pub struct Sh {
    pub config: ShConfig,
    /// Profiles, repository data and subscriptions.
    pub store: Arc<dyn ShDataStore>,
    pub subscriptions: Subscriptions,
    node: OnceLock<DiameterNode>,
    pnr_slots: Arc<Semaphore>,
}

impl Sh {
    pub fn new(config: ShConfig, store: Arc<dyn ShDataStore>) -> Sh {
        let slots = config.max_pnr_in_flight.max(1);
        Sh {
            config,
            store,
            subscriptions: Subscriptions::default(),
            node: OnceLock::new(),
            pnr_slots: Arc::new(Semaphore::new(slots)),
        }
    }

    /// Rebuilds the subscription index from the store (at start), dropping expired ones.
    pub async fn load(&self) -> store::Result<usize> {
        self.store.delete_expired_subscriptions(unix_now()).await?;
        let all = self.store.all_subscriptions().await?;
        let n = all.len();
        for s in all {
            self.subscriptions.insert(s);
        }
        Ok(n)
    }

    /// The running node, when `[udr.sh]` is enabled.
    pub fn node(&self) -> Option<&DiameterNode> {
        self.node.get()
    }
}

/// A running Sh server.
pub struct ShServer {
    node: DiameterNode,
    sweeper: tokio::task::JoinHandle<()>,
}

impl ShServer {
    pub fn local_addr(&self) -> Option<std::net::SocketAddr> {
        self.node.local_addr()
    }
    /// The TLS listening address (`tls.listen`).
    pub fn tls_local_addr(&self) -> Option<std::net::SocketAddr> {
        self.node.tls_local_addr()
    }
    pub fn node(&self) -> &DiameterNode {
        &self.node
    }
    /// The node (for the NF skeleton, which says DPR to its peers at stop) and the task that
    /// expires Sh subscriptions (to abort at stop).
    pub fn into_parts(self) -> (DiameterNode, tokio::task::JoinHandle<()>) {
        (self.node, self.sweeper)
    }
}

/// Binds the Sh listener and starts the node (and its connections to `[[udr.sh.peers]]`).
pub async fn start(udr: Arc<Udr>) -> std::io::Result<ShServer> {
    let cfg = &udr.sh.config;
    let mut nc = NodeConfig::new(&cfg.origin_host, &cfg.origin_realm);
    nc.product_name = "fivecore-udr".into();
    nc.listen = Some(cfg.listen);
    nc.applications = vec![ApplicationId::tgpp(sh::APP_ID)];
    nc.accept_unknown_peers = cfg.accept_unknown_peers;
    nc.peers = cfg
        .peers
        .iter()
        .map(|p| PeerConfig::connect(&p.host, p.addr).transport(Transport::tls_if(p.tls)))
        .chain(cfg.accept.iter().map(PeerConfig::accept))
        .collect();
    nc.routes = cfg
        .routes
        .iter()
        .map(|r| Route::new(&r.realm, RouteAction::Relay(r.peers.clone())).application(sh::APP_ID))
        .collect();
    nc.request_timeout = Duration::from_millis(cfg.request_timeout_ms);
    nc.watchdog_interval = Duration::from_secs(cfg.watchdog_secs);
    if let Some(tls) = &cfg.tls {
        nc.apply_tls(tls).map_err(|e| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("udr.sh.tls: {e}"))
        })?;
    }
    cfg.limits
        .apply("udr.sh.limits", &mut nc)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let u = udr.clone();
    let node = DiameterNode::builder(nc)
        .handler(sh::APP_ID, move |req: Message| {
            let u = u.clone();
            async move { handle(&u, req).await }
        })
        .start()
        .await?;
    let _ = udr.sh.node.set(node.clone());
    let u = udr.clone();
    let sweeper = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(30)).await;
            let now = unix_now();
            match u.sh.store.delete_expired_subscriptions(now).await {
                Ok(_) => {
                    let n = u.sh.subscriptions.sweep(now);
                    if n > 0 {
                        tracing::debug!(expired = n, "Sh subscriptions expired");
                    }
                }
                Err(e) => tracing::warn!(error = %e, "Sh subscription expiry failed"),
            }
        }
    });
    tracing::info!(addr = ?node.local_addr(), host = %cfg.origin_host, "UDR Sh listening");
    Ok(ShServer { node, sweeper })
}

/// The Sh handler: every Sh request the node routes to this UDR, already validated against the
/// dictionary.
pub async fn handle(udr: &Arc<Udr>, req: Message) -> Message {
    match req.command_code() {
        sh::CMD_USER_DATA => udr::user_data(udr, req).await,
        sh::CMD_PROFILE_UPDATE => pur::profile_update(udr, req).await,
        sh::CMD_SUBSCRIBE_NOTIFICATIONS => snr::subscribe_notifications(udr, req).await,
        // A PNR is what the UDR sends, never serves.
        _ => base_error(&udr.sh, &req, rc::DIAMETER_COMMAND_UNSUPPORTED, None),
    }
}

/// The common head of every answer: Session-Id (echoed), Vendor-Specific-Application-Id,
/// Auth-Session-State, Origin-Host/Realm.
fn answer(sh_state: &Sh, req: &Message) -> Message {
    Message::answer_to(req)
        .avp(vendor_specific_auth_app(VENDOR_3GPP, sh::APP_ID))
        .avp(base::AUTH_SESSION_STATE.enumerated(NO_STATE_MAINTAINED))
        .origin(&sh_state.config.origin_host, &sh_state.config.origin_realm)
}

fn success(sh_state: &Sh, req: &Message) -> Message {
    answer(sh_state, req).result_code_avp(rc::DIAMETER_SUCCESS)
}

/// An Sh error: Experimental-Result { Vendor-Id 10415, code } (TS 29.329 §6.2).
fn experimental(sh_state: &Sh, req: &Message, code: u32) -> Message {
    answer(sh_state, req).avp(experimental_result(VENDOR_3GPP, code))
}

/// A base protocol error: Result-Code, Failed-AVP when given, E bit for 3xxx.
fn base_error(sh_state: &Sh, req: &Message, code: u32, failed: Option<Avp>) -> Message {
    let mut a = answer(sh_state, req).result_code_avp(code);
    if let Some(f) = failed {
        a.push(base::FAILED_AVP.grouped(vec![f]));
    }
    if rc::is_protocol_error(code) {
        a.header.flags |= FLAG_ERROR;
    }
    a
}

/// Answers 5101 DIAMETER_ERROR_OPERATION_NOT_ALLOWED when the AS permission list refuses.
fn check_permission(udr: &Udr, req: &Message, p: Procedure) -> Result<(), Message> {
    let host = req.origin_host().unwrap_or_default();
    if udr.sh.config.allows(host, p) {
        return Ok(());
    }
    tracing::debug!(host, procedure = ?p, "Sh procedure not allowed for this AS");
    Err(experimental(&udr.sh, req, sh::experimental_result::DIAMETER_ERROR_OPERATION_NOT_ALLOWED))
}

/// The User-Identity of a request: its Public-Identity and/or its MSISDN (TBCD, TS 29.329
/// §6.3.2). Neither: 5005 with a Failed-AVP naming Public-Identity; an MSISDN that is not TBCD
/// digits: 5004 naming it.
fn user_identity(sh_state: &Sh, req: &Message) -> Result<Vec<UserId>, Message> {
    let mut ids = Vec::with_capacity(2);
    if let Some(p) = req.user_public_identity() {
        ids.push(UserId::Public(p));
    }
    if let Some(m) = req.user_msisdn() {
        match tbcd_decode(&m) {
            Some(digits) => ids.push(UserId::Msisdn(digits)),
            None => {
                let failed = sh::USER_IDENTITY.grouped(vec![sh::MSISDN.bytes(m)]);
                return Err(base_error(
                    sh_state,
                    req,
                    rc::DIAMETER_INVALID_AVP_VALUE,
                    Some(failed),
                ));
            }
        }
    }
    if ids.is_empty() {
        let failed = sh::USER_IDENTITY.grouped(vec![sh::PUBLIC_IDENTITY.zero_filled()]);
        return Err(base_error(sh_state, req, rc::DIAMETER_MISSING_AVP, Some(failed)));
    }
    Ok(ids)
}

/// What the User-Identity names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    Found(i64),
    Unknown,
    /// Public-Identity and MSISDN name different users.
    Mismatch,
}

/// Resolves every identity of a User-Identity on a store thread.
fn resolve_all(tx: &dyn ShTx, ids: &[UserId]) -> store::Result<Resolved> {
    let mut found = None;
    for id in ids {
        match (tx.resolve(id)?, found) {
            (None, _) => return Ok(Resolved::Unknown),
            (Some(p), Some(q)) if p != q => return Ok(Resolved::Mismatch),
            (Some(p), _) => found = Some(p),
        }
    }
    Ok(found.map_or(Resolved::Unknown, Resolved::Found))
}

/// The answer for an identity that resolved to no single user (5001 or 5002).
fn unresolved(sh_state: &Sh, req: &Message, r: &Resolved) -> Message {
    let code = match r {
        Resolved::Mismatch => sh::experimental_result::DIAMETER_ERROR_IDENTITIES_DONT_MATCH,
        _ => sh::experimental_result::DIAMETER_ERROR_USER_UNKNOWN,
    };
    experimental(sh_state, req, code)
}

/// Service-Indications of a request (UTF-8 ones; the store keys them as text).
fn service_indications(req: &Message) -> Vec<String> {
    req.find_all(&sh::SERVICE_INDICATION)
        .filter_map(|a| a.as_bytes().ok())
        .filter_map(|b| String::from_utf8(b.to_vec()).ok())
        .collect()
}

/// 5005 naming Service-Indication: RepositoryData asked for without one.
fn missing_service_indication(sh_state: &Sh, req: &Message) -> Message {
    base_error(sh_state, req, rc::DIAMETER_MISSING_AVP, Some(sh::SERVICE_INDICATION.zero_filled()))
}

fn store_failed(sh_state: &Sh, req: &Message, e: &store::Error) -> Message {
    tracing::warn!(error = %e, "Sh: store failed");
    base_error(sh_state, req, rc::DIAMETER_UNABLE_TO_COMPLY, None)
}

pub(crate) fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// TBCD digits (TS 29.002 TBCD-STRING: low nibble first, 0xF filler in the last high nibble)
/// to a digit string; None for a non-digit nibble or a misplaced filler.
pub fn tbcd_decode(b: &[u8]) -> Option<String> {
    let mut out = String::with_capacity(b.len() * 2);
    for (i, byte) in b.iter().enumerate() {
        let (lo, hi) = (byte & 0x0f, byte >> 4);
        if lo > 9 {
            return None;
        }
        out.push((b'0' + lo) as char);
        match hi {
            0..=9 => out.push((b'0' + hi) as char),
            0xf if i == b.len() - 1 => {}
            _ => return None,
        }
    }
    (!out.is_empty()).then_some(out)
}

/// A digit string as TBCD (the inverse of [`tbcd_decode`]); digits only.
pub fn tbcd_encode(digits: &str) -> Bytes {
    let d = digits.as_bytes();
    let mut out = Vec::with_capacity(d.len().div_ceil(2));
    for pair in d.chunks(2) {
        let lo = pair[0] - b'0';
        let hi = pair.get(1).map_or(0xf, |c| c - b'0');
        out.push(lo | (hi << 4));
    }
    Bytes::from(out)
}

/// The User-Identity AVP naming `user`.
pub fn user_identity_avp(user: &UserId) -> Avp {
    match user {
        UserId::Public(p) => sh::USER_IDENTITY.grouped(vec![sh::PUBLIC_IDENTITY.utf8(p)]),
        UserId::Msisdn(m) => sh::USER_IDENTITY.grouped(vec![sh::MSISDN.bytes(tbcd_encode(m))]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tbcd() {
        assert_eq!(tbcd_encode("33600000001").as_ref(), [0x33, 0x06, 0, 0, 0, 0xf1]);
        assert_eq!(tbcd_decode(&[0x33, 0x06, 0, 0, 0, 0xf1]).as_deref(), Some("33600000001"));
        assert_eq!(tbcd_decode(&tbcd_encode("1234")).as_deref(), Some("1234"));
        assert_eq!(tbcd_decode(&[0xf1, 0x22]), None, "filler only at the end");
        assert_eq!(tbcd_decode(&[0x1a]), None);
        assert_eq!(tbcd_decode(&[]), None);
    }
}
