//! The Diameter Rx proxy (issue #6, TS 29.213 §7.3 "BSF as a Diameter proxy"; TS 29.214).
//!
//! A [`DiameterNode`] listens for AFs (P-CSCF) and PCFs and optionally connects to configured
//! PCFs (`[bsf.rx]`). Every Rx request the node cannot deliver straight to an open peer named in
//! its Destination-Host comes to [`Proxy::handle`] (a default route `*` → local for Rx):
//!
//! * **AAR of a new session**: Framed-IP-Address (with IP-Domain-Id) or Framed-IPv6-Prefix →
//!   the newest matching binding (from the in-memory [`crate::ue_address_index`], or a store
//!   read while it loads or with `binding_index = false`) →
//!   pcfDiamHost / pcfDiamRealm → the request goes to that PCF with `node.request` (Destination-Host
//!   and Destination-Realm set to the PCF's, Route-Record added) and the PCF's answer goes back to
//!   the AF with the AF's hop-by-hop id. A successful answer makes the session remembered
//!   (Session-Id → PCF, AF) in a bounded map with idle expiry. No binding: AAA with
//!   Experimental-Result 5065 IP-CAN_SESSION_NOT_AVAILABLE; PCF not connected or not answering:
//!   3002 DIAMETER_UNABLE_TO_DELIVER.
//! * **AAR update and STR** of a remembered session follow it to the same PCF without a lookup;
//!   the STA (whatever its result) ends the session state. An STR of an unknown session: 5002.
//! * **RAR and ASR** from a PCF normally carry Destination-Host = the AF's Origin-Host and the
//!   node relays them to the AF (an open peer) itself, RAA/ASA coming back the same way. When one
//!   reaches the handler instead (no Destination-Host, or ours), it goes to the AF the session map
//!   names.
//!
//! * **Redirect mode** (`mode = "redirect"`, TS 29.213 §7.4.2): an AAR is answered 3006
//!   DIAMETER_REDIRECT_INDICATION with Redirect-Host `aaa://<pcfDiamHost>`, Redirect-Host-Usage
//!   ALL_SESSION and Redirect-Max-Cache-Time = the session idle time, so the AF sends the rest of
//!   the session to the PCF itself. The session is still remembered, so a later request of it
//!   that reaches the BSF is redirected to the same PCF; an STR ends it.
//!
//! A request the node could not deliver directly to the host in its Destination-Host is answered
//! 3002 when that host is also where the handler would send it, so a forward never loops back.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use diameter::dictionary::{base, rx};
use diameter::header::FLAG_ERROR;
use diameter::{
    builders::experimental_result, result_code as rc, ApplicationId, DiameterNode, Message,
    NodeConfig, PeerConfig, Route, RouteAction, Transport, VENDOR_3GPP,
};

use crate::config::{RxConfig, RxMode};
use crate::context::Bsf;
use crate::store::Lookup;
use crate::ue_address_index::{Answer, Indexed};

/// TS 29.214 Experimental-Result-Code IP-CAN_SESSION_NOT_AVAILABLE.
pub const IP_CAN_SESSION_NOT_AVAILABLE: u32 = rx::experimental_result::IP_CAN_SESSION_NOT_AVAILABLE;

/// Where an Rx session goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub pcf_host: String,
    pub pcf_realm: String,
    pub af_host: String,
    pub af_realm: String,
}

struct Entry {
    session: Arc<Session>,
    last: Instant,
}

/// Session-Id → [`Session`], at most `max` entries, forgotten after `idle` without traffic.
pub struct Sessions {
    map: Mutex<HashMap<String, Entry>>,
    idle: Duration,
    max: usize,
}

impl Sessions {
    pub fn new(idle: Duration, max: usize) -> Sessions {
        Sessions { map: Mutex::new(HashMap::new()), idle, max }
    }

    /// The session, refreshed; `None` when unknown or idle for too long.
    pub fn get(&self, id: &str) -> Option<Arc<Session>> {
        let mut map = self.map.lock().unwrap();
        let now = Instant::now();
        match map.get_mut(id) {
            Some(e) if now.duration_since(e.last) < self.idle => {
                e.last = now;
                Some(e.session.clone())
            }
            Some(_) => {
                map.remove(id);
                None
            }
            None => None,
        }
    }

    /// Remembers a session; false when the map is full (even after dropping idle entries).
    pub fn insert(&self, id: &str, session: Arc<Session>) -> bool {
        let mut map = self.map.lock().unwrap();
        let now = Instant::now();
        if map.len() >= self.max && !map.contains_key(id) {
            let idle = self.idle;
            map.retain(|_, e| now.duration_since(e.last) < idle);
            if map.len() >= self.max {
                return false;
            }
        }
        map.insert(id.to_owned(), Entry { session, last: now });
        true
    }

    pub fn remove(&self, id: &str) -> Option<Arc<Session>> {
        self.map.lock().unwrap().remove(id).map(|e| e.session)
    }

    /// Drops the idle sessions; returns how many.
    pub fn sweep(&self) -> usize {
        let mut map = self.map.lock().unwrap();
        let before = map.len();
        let (now, idle) = (Instant::now(), self.idle);
        map.retain(|_, e| now.duration_since(e.last) < idle);
        before - map.len()
    }

    pub fn len(&self) -> usize {
        self.map.lock().unwrap().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The proxy's state shared with the node's Rx handler.
pub struct Proxy {
    bsf: Arc<Bsf>,
    node: OnceLock<DiameterNode>,
    pub sessions: Sessions,
    origin_host: String,
    origin_realm: String,
    mode: RxMode,
    /// Redirect-Max-Cache-Time, seconds.
    redirect_cache_secs: u32,
}

/// Redirect-Host-Usage ALL_SESSION (RFC 6733 §6.13).
const ALL_SESSION: u32 = 1;

/// A running Rx proxy.
pub struct RxProxy {
    node: DiameterNode,
    proxy: Arc<Proxy>,
    sweeper: tokio::task::JoinHandle<()>,
}

/// Binds the Rx listener and starts the node (and its connections to the configured PCFs).
pub async fn start(bsf: Arc<Bsf>, cfg: &RxConfig) -> std::io::Result<RxProxy> {
    let mut nc = NodeConfig::new(&cfg.origin_host, &cfg.origin_realm);
    nc.product_name = "fivecore-bsf".into();
    nc.listen = Some(cfg.listen);
    nc.applications = vec![ApplicationId::tgpp(rx::APP_ID)];
    nc.accept_unknown_peers = cfg.accept_unknown_peers;
    nc.peers = cfg
        .peers
        .iter()
        .map(|p| PeerConfig::connect(&p.host, p.addr).transport(Transport::tls_if(p.tls)))
        .chain(cfg.accept.iter().map(PeerConfig::accept))
        .collect();
    // Rx requests not addressed to an open peer by Destination-Host are ours to route.
    nc.routes = vec![Route::new("*", RouteAction::Local).application(rx::APP_ID)];
    nc.request_timeout = Duration::from_millis(cfg.request_timeout_ms);
    nc.watchdog_interval = Duration::from_secs(cfg.watchdog_secs);
    cfg.limits
        .apply("bsf.rx.limits", &mut nc)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    if let Some(tls) = &cfg.tls {
        nc.apply_tls(tls).map_err(|e| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("bsf.rx.tls: {e}"))
        })?;
    }
    // A proxy passes a retransmitted (T-flagged) request on; detecting duplicates is the PCF's
    // job (RFC 6733 §5.5.4). Caching every answer here would hold ~2M answers at the 54K mix.
    nc.duplicate_ttl = None;
    let idle = Duration::from_secs(cfg.session_idle_secs);
    let proxy = Arc::new(Proxy {
        bsf,
        node: OnceLock::new(),
        sessions: Sessions::new(idle, cfg.max_sessions),
        origin_host: cfg.origin_host.clone(),
        origin_realm: cfg.origin_realm.clone(),
        mode: cfg.mode,
        redirect_cache_secs: u32::try_from(cfg.session_idle_secs).unwrap_or(u32::MAX),
    });
    let p = proxy.clone();
    let node = DiameterNode::builder(nc)
        .handler(rx::APP_ID, move |req: Message| {
            let p = p.clone();
            async move { p.handle(req).await }
        })
        .start()
        .await?;
    let _ = proxy.node.set(node.clone());
    let p = proxy.clone();
    let every = (idle / 2).clamp(Duration::from_millis(100), Duration::from_secs(60));
    let sweeper = tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            let n = p.sessions.sweep();
            if n > 0 {
                tracing::debug!(expired = n, "Rx sessions expired");
            }
        }
    });
    tracing::info!(addr = ?node.local_addr(), host = %cfg.origin_host, "BSF Rx proxy listening");
    Ok(RxProxy { node, proxy, sweeper })
}

impl RxProxy {
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
    pub fn sessions(&self) -> &Sessions {
        &self.proxy.sessions
    }
    /// The node (for the NF skeleton, which says DPR to its peers at stop) and the task that
    /// expires Rx sessions (to abort at stop).
    pub fn into_parts(self) -> (DiameterNode, tokio::task::JoinHandle<()>) {
        (self.node, self.sweeper)
    }
}

impl Proxy {
    /// The Rx handler: every Rx request the node routes locally.
    pub async fn handle(&self, req: Message) -> Message {
        match req.command_code() {
            rx::CMD_AA | rx::CMD_SESSION_TERMINATION => self.toward_pcf(req).await,
            rx::CMD_RE_AUTH | rx::CMD_ABORT_SESSION => self.toward_af(req).await,
            _ => self.answer(&req, rc::DIAMETER_UNABLE_TO_DELIVER),
        }
    }

    async fn toward_pcf(&self, req: Message) -> Message {
        // The Session-Id AVP shares the request's buffer: no copy of the id.
        let Some(sid_avp) = req.find(&base::SESSION_ID).cloned() else {
            return self.answer(&req, rc::DIAMETER_MISSING_AVP);
        };
        let Ok(sid) = sid_avp.as_str() else {
            return self.answer(&req, rc::DIAMETER_INVALID_AVP_VALUE);
        };
        let is_str = req.command_code() == rx::CMD_SESSION_TERMINATION;
        let (known, target) = match self.sessions.get(sid) {
            Some(s) => (true, s),
            None if is_str => return self.answer(&req, rc::DIAMETER_UNKNOWN_SESSION_ID),
            None => match self.lookup(&req).await {
                Ok(Some((pcf_host, pcf_realm))) => (
                    false,
                    Arc::new(Session {
                        pcf_host,
                        pcf_realm,
                        af_host: req.origin_host().unwrap_or_default().to_owned(),
                        af_realm: req.origin_realm().unwrap_or_default().to_owned(),
                    }),
                ),
                Ok(None) => {
                    tracing::debug!(session = %sid, "Rx: no binding for the UE address");
                    return self.no_binding(&req);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "Rx: binding lookup failed");
                    return self.answer(&req, rc::DIAMETER_UNABLE_TO_COMPLY);
                }
            },
        };
        let ans = match self.mode {
            RxMode::Proxy => self.forward(req, &target.pcf_host, &target.pcf_realm).await,
            RxMode::Redirect => self.redirect(&req, &target.pcf_host),
        };
        if is_str {
            self.sessions.remove(sid);
        } else if !known
            && (ans.is_success() || self.mode == RxMode::Redirect)
            && !self.sessions.insert(sid, target)
        {
            tracing::warn!(session = %sid, "Rx session table full: session not remembered");
        }
        ans
    }

    async fn toward_af(&self, req: Message) -> Message {
        let session = req.session_id().and_then(|sid| self.sessions.get(sid));
        let dest = req.destination_host().filter(|h| !h.eq_ignore_ascii_case(&self.origin_host));
        let (host, realm) = match (&session, dest) {
            (Some(s), _) => (Cow::Borrowed(&*s.af_host), Cow::Borrowed(&*s.af_realm)),
            (None, Some(h)) => {
                let realm = req.destination_realm().unwrap_or_default().to_owned();
                (Cow::Owned(h.to_owned()), Cow::Owned(realm))
            }
            (None, None) => return self.answer(&req, rc::DIAMETER_UNKNOWN_SESSION_ID),
        };
        self.forward(req, &host, &realm).await
    }

    /// Sends `req` to `host` (an open peer) and returns its answer with the hop-by-hop id of
    /// `req`; 3002 when `host` is not reachable.
    async fn forward(&self, req: Message, host: &str, realm: &str) -> Message {
        let Some(node) = self.node.get() else {
            return self.answer(&req, rc::DIAMETER_UNABLE_TO_DELIVER);
        };
        let open = node.peer_state(host).is_some_and(|s| s.is_open());
        // The node already tried Destination-Host itself: it is not usable for Rx.
        // (Compared as bytes: the same answer as strings, without a UTF-8 check per forward.)
        let tried = req
            .get_slice(&base::DESTINATION_HOST)
            .is_some_and(|h| h.eq_ignore_ascii_case(host.as_bytes()));
        if !open || tried {
            tracing::debug!(to = %host, "Rx: next hop not reachable");
            return self.answer(&req, rc::DIAMETER_UNABLE_TO_DELIVER);
        }
        // What an answer of our own needs if forwarding fails (the request itself goes on):
        // Session-Id (a short one is held inline: a copy, no allocation) and Proxy-Info (rare:
        // an empty vector does not allocate).
        let header = req.header;
        let sid = req.find(&base::SESSION_ID).cloned();
        let proxy_info: Vec<_> = req.find_all(&base::PROXY_INFO).cloned().collect();
        // Origin-Host passed validation (a DiameterIdentity: ASCII): copied as it came.
        let route_record =
            req.get_slice(&base::ORIGIN_HOST).map(|h| base::ROUTE_RECORD.with_slice(h));
        let hbh = req.hop_by_hop_id();
        let mut fwd = req;
        fwd.avps.retain(|a| {
            a.vendor() != 0
                || (a.code() != base::DESTINATION_HOST.code
                    && a.code() != base::DESTINATION_REALM.code)
        });
        let realm =
            if realm.is_empty() { host.split_once('.').map_or(host, |x| x.1) } else { realm };
        fwd.push(base::DESTINATION_REALM.identity(realm));
        fwd.push(base::DESTINATION_HOST.identity(host));
        fwd.avps.extend(route_record);
        match node.request(fwd).await {
            Ok(mut a) => {
                a.set_hop_by_hop_id(hbh);
                a
            }
            Err(e) => {
                tracing::debug!(to = %host, error = %e, "Rx: forwarding failed");
                let avps = sid.into_iter().chain(proxy_info).collect();
                self.answer(&Message { header, avps }, e.result_code())
            }
        }
    }

    /// The PCF (Diameter host, realm) of the binding for the AAR's UE address.
    async fn lookup(&self, req: &Message) -> store::Result<Option<(String, String)>> {
        // The index may be there for Discovery alone (`rx.binding_index = false`).
        let index = self.bsf.store.index().filter(|_| self.bsf.config.rx.binding_index);
        let from_index = |a: Answer| match a {
            Answer::Pcf(p) => Some(Some((p.host.to_string(), p.realm.to_string()))),
            Answer::None => Some(None),
            Answer::Unknown => None,
        };
        let mut q = Lookup::default();
        if let Some(ip) = req.framed_ip_address() {
            let domain = req.get_slice(&rx::IP_DOMAIN_ID);
            let domain = domain.and_then(|b| std::str::from_utf8(b).ok());
            let domain = domain.filter(|d| !d.is_empty());
            if let Some(found) = index.and_then(|ix| from_index(ix.find_v4(ip, domain))) {
                return Ok(found);
            }
            q.ipv4 = Some(ip.to_string());
            q.ip_domain = domain.map(str::to_owned);
        } else if let Some((addr, len)) = req.framed_ipv6_prefix() {
            let lengths = &crate::nbsf_management::PREFIX_LENGTHS;
            if let Some(found) = index.and_then(|ix| from_index(ix.find_v6(addr, len, lengths))) {
                return Ok(found);
            }
            q.ipv6 = crate::nbsf_management::candidate_prefixes(addr, len);
        } else {
            return Ok(None);
        }
        let Some(stored) = self.bsf.store.find(q).await? else { return Ok(None) };
        // Read as the index reads it: only the UE addresses and the two Diameter attributes.
        Ok(Indexed::from_json(&stored.id, &stored.json).and_then(Indexed::into_pcf))
    }

    /// An answer from the BSF itself: Result-Code, E bit for 3xxx.
    fn answer(&self, req: &Message, code: u32) -> Message {
        let mut a = Message::answer_to(req)
            .origin(&self.origin_host, &self.origin_realm)
            .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
            .result_code_avp(code);
        if rc::is_protocol_error(code) {
            a.header.flags |= FLAG_ERROR;
        }
        a
    }

    /// 3006 naming the PCF, for the AF to cache for the whole session.
    fn redirect(&self, req: &Message, pcf_host: &str) -> Message {
        let mut a = self.answer(req, rc::DIAMETER_REDIRECT_INDICATION);
        a.push(base::REDIRECT_HOST.uri(&format!("aaa://{pcf_host}")));
        a.push(base::REDIRECT_HOST_USAGE.enumerated(ALL_SESSION));
        a.push(base::REDIRECT_MAX_CACHE_TIME.u32(self.redirect_cache_secs));
        a
    }

    /// AAA (or STA) with Experimental-Result 5065 IP-CAN_SESSION_NOT_AVAILABLE.
    fn no_binding(&self, req: &Message) -> Message {
        Message::answer_to(req)
            .origin(&self.origin_host, &self.origin_realm)
            .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
            .avp(experimental_result(VENDOR_3GPP, IP_CAN_SESSION_NOT_AVAILABLE))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(h: &str) -> Arc<Session> {
        Arc::new(Session {
            pcf_host: h.into(),
            pcf_realm: "r".into(),
            af_host: "af".into(),
            af_realm: "r".into(),
        })
    }

    #[test]
    fn sessions_are_bounded_and_expire() {
        let m = Sessions::new(Duration::from_millis(50), 2);
        assert!(m.insert("a", s("p1")));
        assert!(m.insert("b", s("p2")));
        assert!(!m.insert("c", s("p3")));
        assert!(m.insert("a", s("p4")));
        assert_eq!(m.get("a").unwrap().pcf_host, "p4");
        assert_eq!(m.remove("b").unwrap().pcf_host, "p2");
        std::thread::sleep(Duration::from_millis(60));
        assert!(m.get("a").is_none());
        assert!(m.insert("c", s("p3")));
        assert!(m.insert("d", s("p3")));
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(m.sweep(), 2);
        assert!(m.is_empty());
    }
}
