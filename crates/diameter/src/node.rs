//! The Diameter node: local identity, peer table, realm routing, local application handlers,
//! relaying/proxying/redirecting, and the client API `request`.

use std::collections::HashMap;
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::sync::{oneshot, watch};
use tracing::{debug, info, warn};

use crate::dictionary::{base, VENDOR_3GPP};
use crate::error::{result_code as rc, Error};
use crate::fasthash::FastMap;
use crate::header::{Header, FLAG_ERROR};
use crate::ids::{random_u32, EndToEndIds};
use crate::message::Message;
use crate::metrics::{
    NodeMetrics, AWAITING_CER_LIMIT, FIRST_MESSAGE_TOO_LONG, PEER_IDENTITY, TLS_HANDSHAKE,
};
use crate::outbox::{write_loop, Outbox};
use crate::peer::{Capabilities, Conn, Peer, PeerConfig, PeerState, Pending, RequestError};
use crate::routing::{uri_host, Route, RouteAction};
use crate::tap::{DiameterTap, Direction, TapSlot};
use crate::tls::{names_identity, TlsConfig, TlsCredentials, TlsError};
use crate::transport::{self, FrameReader, Listener, ReadError, SizeLimits, Stream};
use crate::validate::validate;

/// A local application handler: gets a validated request, returns its answer.
pub type Handler =
    Arc<dyn Fn(Message) -> Pin<Box<dyn Future<Output = Message> + Send>> + Send + Sync>;

/// An application the node advertises in CER/CEA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApplicationId {
    /// 0 for IETF applications (advertised as Auth-/Acct-Application-Id), else advertised in a
    /// Vendor-Specific-Application-Id.
    pub vendor_id: u32,
    pub id: u32,
    pub accounting: bool,
}

impl ApplicationId {
    pub fn auth(id: u32) -> ApplicationId {
        ApplicationId { vendor_id: 0, id, accounting: false }
    }
    pub fn acct(id: u32) -> ApplicationId {
        ApplicationId { vendor_id: 0, id, accounting: true }
    }
    pub fn vendor_auth(vendor_id: u32, id: u32) -> ApplicationId {
        ApplicationId { vendor_id, id, accounting: false }
    }
    /// 3GPP application (Gx, Rx, Sy, Sd, Sh): Vendor-Specific-Application-Id with 10415.
    pub fn tgpp(id: u32) -> ApplicationId {
        ApplicationId::vendor_auth(VENDOR_3GPP, id)
    }
}

/// Node configuration. [`NodeConfig::new`] gives the defaults.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    pub origin_host: String,
    pub origin_realm: String,
    pub product_name: String,
    pub vendor_id: u32,
    pub firmware_revision: u32,
    /// Host-IP-Address values; empty: the local address of each connection.
    pub host_ip_addresses: Vec<IpAddr>,
    /// Where to accept peers (port 0 picks one); `None`: client only.
    pub listen: Option<SocketAddr>,
    /// The TLS credentials of the TLS listener and of the outbound peers with
    /// [`Transport::Tls`](crate::Transport::Tls) (crate::tls). `None`: no TLS.
    pub tls: Option<Arc<TlsCredentials>>,
    /// Where to accept peers with TLS from the first byte (RFC 6733 §2.1; port 0 picks one).
    /// Needs `tls`. Beside `listen` (plain TCP), or alone when `listen` is `None`.
    pub tls_listen: Option<SocketAddr>,
    /// A peer on a TLS connection must present a certificate naming (DNS subjectAltName) the
    /// Origin-Host of its CER, else the CER is answered 3010 DIAMETER_UNKNOWN_PEER and the
    /// connection closed. (Outbound, the TLS client checks that the server certificate names
    /// the configured peer host, and the CEA must come from that host, either way.)
    pub check_peer_identity: bool,
    /// Advertised applications, besides those with a local handler.
    pub applications: Vec<ApplicationId>,
    /// Advertise the relay application (0xffffffff): a relay or proxy agent.
    pub relay: bool,
    pub peers: Vec<PeerConfig>,
    pub routes: Vec<Route>,
    /// Accept CER from hosts not in `peers` (else 3010 DIAMETER_UNKNOWN_PEER).
    pub accept_unknown_peers: bool,
    /// Tw (RFC 3539), jittered by ±min(2 s, Tw/4).
    pub watchdog_interval: Duration,
    /// DWAs needed before a reconnected peer carries traffic again (RFC 3539 uses 3).
    pub reopen_watchdogs: u32,
    pub request_timeout: Duration,
    pub connect_timeout: Duration,
    /// Time for the first message (CER) or the CEA.
    pub cer_timeout: Duration,
    /// Longest first message (CER, or the CEA we wait for), bytes. A CER is a header, two
    /// identities, a few addresses and Unsigned32s and one AVP per application: well under 2 KiB
    /// for real peers, and a peer advertising hundreds of applications stays under 16 KiB. A
    /// longer declared length closes the connection before its body is read (RFC 6733 §5.6.1:
    /// a connection that does not start with a valid CER is dropped). Default 64 KiB.
    pub max_cer_len: usize,
    /// Longest message after the capabilities exchange, bytes, for applications without an
    /// entry in `max_message_len_per_application`. A longer request is answered 5015
    /// DIAMETER_INVALID_MESSAGE_LENGTH, a longer answer fails its request; either way its body
    /// is skipped as it arrives, never buffered. Default 1 MiB.
    pub max_message_len: usize,
    /// `(Application-Id, longest message)` overriding `max_message_len` (e.g. Sh, whose
    /// User-Data is the largest 3GPP payload).
    pub max_message_len_per_application: Vec<(u32, usize)>,
    /// Accepted connections that have not finished their CER/CEA (TLS handshake included);
    /// beyond it a new connection is closed at once. Open peers do not count. Default 64.
    pub max_connections_before_cer: usize,
    pub dpa_timeout: Duration,
    pub reconnect_min: Duration,
    pub reconnect_max: Duration,
    /// Outstanding requests per peer connection before 3004 DIAMETER_TOO_BUSY.
    pub max_pending_per_peer: usize,
    /// Received requests in processing per peer connection before answering 3004.
    pub max_inflight_per_peer: usize,
    /// Bytes queued for one connection's writer before senders wait for it.
    pub write_queue_bytes: usize,
    /// Keep answers of locally processed requests for duplicate detection (T bit); `None` off.
    pub duplicate_ttl: Option<Duration>,
    /// Re-send a request answered with 3006 to the Redirect-Host when it is a connected peer.
    pub follow_redirects: bool,
}

impl NodeConfig {
    /// Takes an NF's TLS section (crate::tls::TlsConfig): its credentials, read now, its TLS
    /// listener and identity check; `plain_listen = false` drops the plain listener.
    pub fn apply_tls(&mut self, cfg: &TlsConfig) -> Result<(), TlsError> {
        self.tls = Some(TlsCredentials::load(cfg)?);
        self.tls_listen = cfg.listen;
        self.check_peer_identity = cfg.check_peer_identity;
        if !cfg.plain_listen {
            self.listen = None;
        }
        Ok(())
    }

    pub fn new(origin_host: impl Into<String>, origin_realm: impl Into<String>) -> NodeConfig {
        NodeConfig {
            origin_host: origin_host.into(),
            origin_realm: origin_realm.into(),
            product_name: "fivecore".into(),
            vendor_id: 0,
            firmware_revision: 1,
            host_ip_addresses: Vec::new(),
            listen: None,
            tls: None,
            tls_listen: None,
            check_peer_identity: true,
            applications: Vec::new(),
            relay: false,
            peers: Vec::new(),
            routes: Vec::new(),
            accept_unknown_peers: false,
            watchdog_interval: Duration::from_secs(30),
            reopen_watchdogs: 3,
            request_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(5),
            cer_timeout: Duration::from_secs(10),
            max_cer_len: 64 * 1024,
            max_message_len: 1 << 20,
            max_message_len_per_application: Vec::new(),
            max_connections_before_cer: 64,
            dpa_timeout: Duration::from_secs(2),
            reconnect_min: Duration::from_secs(1),
            reconnect_max: Duration::from_secs(30),
            max_pending_per_peer: 65_536,
            max_inflight_per_peer: 65_536,
            write_queue_bytes: 4 << 20,
            duplicate_ttl: Some(Duration::from_secs(60)),
            follow_redirects: true,
        }
    }
}

/// Builds a node: configuration plus local application handlers.
pub struct NodeBuilder {
    cfg: NodeConfig,
    handlers: FastMap<u32, Handler>,
}

impl NodeBuilder {
    /// Registers the handler of an application: `async fn(Message) -> Message`.
    pub fn handler<F, Fut>(mut self, application_id: u32, f: F) -> NodeBuilder
    where
        F: Fn(Message) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Message> + Send + 'static,
    {
        self.handlers.insert(application_id, Arc::new(move |m| Box::pin(f(m))));
        self
    }

    /// Binds the listener and starts connecting to the outbound peers.
    pub async fn start(self) -> std::io::Result<DiameterNode> {
        let NodeBuilder { cfg, handlers } = self;
        let listener = match cfg.listen {
            Some(a) => Some(Listener::bind(a, None).await?),
            None => None,
        };
        let tls_listener = match (cfg.tls_listen, &cfg.tls) {
            (Some(a), Some(creds)) => Some(Listener::bind(a, Some(creds.clone())).await?),
            (Some(_), None) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "a TLS listen address needs TLS credentials",
                ))
            }
            (None, _) => None,
        };
        let local_addr = listener.as_ref().map(|l| l.local_addr()).transpose()?;
        let tls_local_addr = tls_listener.as_ref().map(|l| l.local_addr()).transpose()?;
        let mut advertised: Vec<ApplicationId> = cfg.applications.clone();
        for id in handlers.keys() {
            if !advertised.iter().any(|a| a.id == *id) {
                advertised.push(ApplicationId::auth(*id));
            }
        }
        let peers = cfg
            .peers
            .iter()
            .map(|p| Arc::new(Peer::new(p.host.clone(), Some(p.clone()))))
            .collect();
        let (shutdown, _) = watch::channel(false);
        let cer_limits = Arc::new(SizeLimits::new(cfg.max_cer_len));
        let msg_limits = Arc::new(
            cfg.max_message_len_per_application
                .iter()
                .fold(SizeLimits::new(cfg.max_message_len), |l, &(app, max)| {
                    l.application(app, max)
                }),
        );
        let inner = Arc::new(Inner {
            cer_limits,
            msg_limits,
            advertised,
            handlers,
            peers: RwLock::new(peers),
            e2e: EndToEndIds::new(),
            dup: DupCache::new(cfg.duplicate_ttl),
            start: Instant::now(),
            conn_ids: AtomicU64::new(1),
            rr: AtomicUsize::new(0),
            shutdown,
            origin_state_id: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs() as u32)
                .unwrap_or(1),
            answer_watchdogs: AtomicBool::new(true),
            metrics: NodeMetrics::default(),
            tap: Arc::default(),
            cfg,
        });
        for l in [listener, tls_listener].into_iter().flatten() {
            tokio::spawn(accept_loop(inner.clone(), l));
        }
        if let Some(task) = inner.cfg.tls.as_ref().and_then(|t| t.spawn_reload()) {
            // Ends with the node: stopped on shutdown.
            let mut stop = inner.shutdown.subscribe();
            tokio::spawn(async move {
                is_set(&mut stop).await;
                task.abort();
            });
        }
        for p in inner.peers.read().unwrap().iter().filter(|p| p.is_outbound()) {
            tokio::spawn(run_outbound(inner.clone(), p.clone()));
        }
        Ok(DiameterNode { inner, local_addr, tls_local_addr })
    }
}

/// A Diameter node (client, server, relay, proxy or redirect agent). Cheap to clone.
#[derive(Clone)]
pub struct DiameterNode {
    inner: Arc<Inner>,
    local_addr: Option<SocketAddr>,
    tls_local_addr: Option<SocketAddr>,
}

/// Another name for [`DiameterNode`].
pub type Stack = DiameterNode;

/// A peer as seen from the node.
#[derive(Debug, Clone)]
pub struct PeerInfo {
    pub host: String,
    pub state: PeerState,
    /// From its CER/CEA while connected.
    pub capabilities: Option<Capabilities>,
    pub remote: Option<SocketAddr>,
    pub pending: usize,
    /// DWAs the peer sent on the current connection.
    pub watchdogs_answered: u64,
    /// DWRs the peer sent on the current connection.
    pub watchdogs_received: u64,
}

impl DiameterNode {
    pub fn builder(cfg: NodeConfig) -> NodeBuilder {
        NodeBuilder { cfg, handlers: FastMap::default() }
    }

    pub fn config(&self) -> &NodeConfig {
        &self.inner.cfg
    }
    /// Makes the node's metrics (see [`crate::metrics`]) part of `registry`, e.g. an NF's
    /// `/metrics`.
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        self.inner.metrics.register(registry);
        registry.register_collector(Box::new(PeersCollector(Arc::downgrade(&self.inner))));
    }
    /// Shows every application message this node receives from or sends to a peer, from now
    /// on, to `tap` (crate::tap). Set once: false, and nothing changes, when a tap is already in.
    pub fn set_tap(&self, tap: Arc<dyn DiameterTap>) -> bool {
        self.inner.tap.set(tap)
    }
    /// The listening address (after binding port 0).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local_addr
    }
    /// The TLS listening address (after binding port 0).
    pub fn tls_local_addr(&self) -> Option<SocketAddr> {
        self.tls_local_addr
    }
    pub fn origin_host(&self) -> &str {
        &self.inner.cfg.origin_host
    }
    pub fn origin_realm(&self) -> &str {
        &self.inner.cfg.origin_realm
    }
    /// A new end-to-end id.
    pub fn next_end_to_end_id(&self) -> u32 {
        self.inner.e2e.next()
    }
    /// A new Session-Id `<origin-host>;<high>;<low>` (RFC 6733 §8.8).
    pub fn new_session_id(&self) -> String {
        format!(
            "{};{};{}",
            self.inner.cfg.origin_host,
            self.inner.origin_state_id,
            self.inner.e2e.next()
        )
    }

    /// Sends a request routed by Destination-Host/Destination-Realm (or handles it locally when
    /// it is addressed to this node) and waits for the answer. End-to-end id (when 0) and
    /// Origin-Host/Realm (when absent) are filled in.
    pub async fn request(&self, msg: Message) -> Result<Message, RequestError> {
        self.inner.client_request(msg).await
    }

    /// The state of a configured peer, or of a peer learnt from its CER while it is connected
    /// (`None` once it has gone).
    pub fn peer_state(&self, host: &str) -> Option<PeerState> {
        self.inner.find_peer(host).map(|p| p.state())
    }

    /// Accepted connections whose capabilities exchange is not done (see
    /// `NodeConfig::max_connections_before_cer`).
    pub fn connections_awaiting_cer(&self) -> usize {
        usize::try_from(self.inner.metrics.awaiting_cer.get()).unwrap_or(0)
    }

    /// The configured peers and the peers learnt from a CER that are connected.
    pub fn peers(&self) -> Vec<PeerInfo> {
        self.inner
            .peers
            .read()
            .unwrap()
            .iter()
            .map(|p| {
                let c = p.conn();
                PeerInfo {
                    host: p.host.clone(),
                    state: p.state(),
                    capabilities: c.as_ref().map(|c| c.caps.clone()),
                    remote: c.as_ref().map(|c| c.remote),
                    pending: c.as_ref().map_or(0, |c| c.pending_len()),
                    watchdogs_answered: c
                        .as_ref()
                        .map_or(0, |c| c.dwa_count.load(Ordering::Relaxed)),
                    watchdogs_received: c
                        .as_ref()
                        .map_or(0, |c| c.dwr_count.load(Ordering::Relaxed)),
                }
            })
            .collect()
    }

    /// Waits until the peer is in a state `pred` accepts; false on timeout. A peer that is not
    /// in the table (not configured, and not connected: peers learnt from a CER are forgotten
    /// when their connection closes) is Closed.
    pub async fn wait_peer(
        &self,
        host: &str,
        timeout: Duration,
        pred: impl Fn(PeerState) -> bool,
    ) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(p) = self.inner.find_peer(host) {
                let mut rx = p.state.subscribe();
                let r = tokio::time::timeout_at(deadline, rx.wait_for(|s| pred(*s))).await;
                return matches!(r, Ok(Ok(_)));
            }
            if pred(PeerState::Closed) {
                return true;
            }
            // inbound peers appear with their CER
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits until the peer is open (I-Open or R-Open).
    pub async fn wait_open(&self, host: &str, timeout: Duration) -> bool {
        self.wait_peer(host, timeout, PeerState::is_open).await
    }

    /// Graceful close (RFC 6733 §5.4): DPR with `cause` (base::DISCONNECT_CAUSE values), DPA,
    /// close; the node does not reconnect to this peer. True when the DPA came back; false
    /// when it did not in `dpa_timeout` (the connection is closed anyway) or the peer was not
    /// connected.
    pub async fn disconnect(&self, host: &str, cause: u32) -> bool {
        let Some(p) = self.inner.find_peer(host) else { return false };
        p.stopped.store(true, Ordering::SeqCst);
        match p.conn() {
            Some(c) => self.inner.disconnect_conn(&c, cause).await,
            None => false,
        }
    }

    /// DPR (REBOOTING) to every peer, then stops accepting and reconnecting.
    pub async fn shutdown(&self) {
        let _ = self.inner.shutdown.send(true);
        let peers: Vec<_> = self.inner.peers.read().unwrap().clone();
        for p in peers {
            p.stopped.store(true, Ordering::SeqCst);
            if let Some(c) = p.conn() {
                self.inner.disconnect_conn(&c, 0).await;
            }
        }
    }

    /// Test and fault-injection knob: when false, DWRs are no longer answered (the peer's
    /// watchdog then sees this node as dead).
    pub fn set_answer_watchdogs(&self, on: bool) {
        self.inner.answer_watchdogs.store(on, Ordering::SeqCst);
    }
}

/// The peer table at scrape time: `diameter_peers{state}` (every peer, configured or learnt,
/// counted by state, so the family stays small whoever connects) and `diameter_peer_open{peer}`
/// for the configured peers only (their names come from the operator's configuration).
/// Weak: a scrape after the node is gone shows nothing rather than keeping it alive.
#[derive(Debug)]
struct PeersCollector(std::sync::Weak<Inner>);

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner").field("origin_host", &self.cfg.origin_host).finish_non_exhaustive()
    }
}

fn state_label(state: PeerState) -> &'static str {
    match state {
        PeerState::IOpen | PeerState::ROpen => "open",
        PeerState::Suspect => "suspect",
        PeerState::Reopen => "reopen",
        PeerState::WaitConnAck | PeerState::WaitICea => "connecting",
        PeerState::Closing => "closing",
        PeerState::Closed => "closed",
    }
}

impl prometheus_client::collector::Collector for PeersCollector {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::gauge::ConstGauge;
        use prometheus_client::metrics::MetricType;
        let Some(inner) = self.0.upgrade() else { return Ok(()) };
        const STATES: [&str; 6] = ["open", "suspect", "reopen", "connecting", "closing", "closed"];
        let mut by_state = [0i64; 6];
        let configured: Vec<(String, bool)> = {
            let peers = inner.peers.read().unwrap_or_else(|e| e.into_inner());
            for p in peers.iter() {
                let label = state_label(p.state());
                if let Some(i) = STATES.iter().position(|s| *s == label) {
                    by_state[i] += 1;
                }
            }
            inner
                .cfg
                .peers
                .iter()
                .map(|c| {
                    let open = peers
                        .iter()
                        .find(|p| p.host.eq_ignore_ascii_case(&c.host))
                        .is_some_and(|p| p.state().is_open());
                    (c.host.clone(), open)
                })
                .collect()
        };
        let mut e = encoder.encode_descriptor(
            "diameter_peers",
            "Diameter peers in the peer table (configured and learnt from a CER), by state",
            None,
            MetricType::Gauge,
        )?;
        for (state, n) in STATES.iter().zip(by_state) {
            ConstGauge::new(n).encode(e.encode_family(&[("state", *state)])?)?;
        }
        let mut e = encoder.encode_descriptor(
            "diameter_peer_open",
            "1 while a configured Diameter peer's connection is open (I-Open or R-Open), else 0",
            None,
            MetricType::Gauge,
        )?;
        for (host, open) in &configured {
            ConstGauge::new(i64::from(*open))
                .encode(e.encode_family(&[("peer", host.as_str())])?)?;
        }
        Ok(())
    }
}

struct Inner {
    cfg: NodeConfig,
    /// Limits of the first message (CER or CEA) and of the messages after it.
    cer_limits: Arc<SizeLimits>,
    msg_limits: Arc<SizeLimits>,
    advertised: Vec<ApplicationId>,
    handlers: FastMap<u32, Handler>,
    peers: RwLock<Vec<Arc<Peer>>>,
    e2e: EndToEndIds,
    dup: DupCache,
    start: Instant,
    conn_ids: AtomicU64,
    rr: AtomicUsize,
    shutdown: watch::Sender<bool>,
    origin_state_id: u32,
    answer_watchdogs: AtomicBool,
    metrics: NodeMetrics,
    /// The message-copy tap, shared with every connection.
    tap: Arc<TapSlot>,
}

enum Decision {
    Local,
    Forward(Arc<Conn>),
    Redirect(Vec<String>),
    Error(u32),
}

impl Inner {
    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    fn find_peer(&self, host: &str) -> Option<Arc<Peer>> {
        self.find_peer_bytes(host.as_bytes())
    }

    /// [`Inner::find_peer`] by a payload as received (no UTF-8 check needed to compare).
    fn find_peer_bytes(&self, host: &[u8]) -> Option<Arc<Peer>> {
        let peers = self.peers.read().unwrap();
        peers.iter().find(|p| p.host.as_bytes().eq_ignore_ascii_case(host)).cloned()
    }

    fn our_app_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.advertised.iter().map(|a| a.id)
    }

    fn is_us(&self, host: &[u8]) -> bool {
        host.eq_ignore_ascii_case(self.cfg.origin_host.as_bytes())
    }

    fn usable_peer_conn(&self, host: &str, app: u32) -> Option<Arc<Conn>> {
        self.usable_peer_conn_bytes(host.as_bytes(), app)
    }

    fn usable_peer_conn_bytes(&self, host: &[u8], app: u32) -> Option<Arc<Conn>> {
        self.find_peer_bytes(host)?.usable_conn().filter(|c| c.caps.supports(app))
    }

    /// Routing decision for a request (RFC 6733 §6.1). Hosts are compared as bytes (ASCII case
    /// folded): the same answers as comparing strings, without a UTF-8 check per read.
    fn route(&self, msg: &Message) -> Decision {
        let app = msg.application_id();
        if msg.find_all(&base::ROUTE_RECORD).any(|r| r.as_slice().is_ok_and(|h| self.is_us(h))) {
            return Decision::Error(rc::DIAMETER_LOOP_DETECTED);
        }
        // A Destination-Host that is not UTF-8 counts as absent, as `destination_host()` has it.
        let dest_host = msg
            .get_slice(&base::DESTINATION_HOST)
            .filter(|h| h.is_ascii() || std::str::from_utf8(h).is_ok());
        if let Some(h) = dest_host {
            if self.is_us(h) {
                return Decision::Local;
            }
            if let Some(c) = self.usable_peer_conn_bytes(h, app) {
                return Decision::Forward(c);
            }
        }
        let Some(realm) = msg.destination_realm() else {
            return match dest_host {
                None => Decision::Local,
                Some(_) => Decision::Error(rc::DIAMETER_UNABLE_TO_DELIVER),
            };
        };
        if let Some(route) = self.cfg.routes.iter().find(|r| r.matches(realm, app)) {
            return match &route.action {
                RouteAction::Local => Decision::Local,
                RouteAction::Redirect(uris) => Decision::Redirect(uris.clone()),
                RouteAction::Relay(peers) => self.pick(peers, app),
                RouteAction::Proxy { peers, next_hop } => {
                    if let Some(h) = next_hop.as_ref().and_then(|n| n.select(msg)) {
                        return match self.usable_peer_conn(&h, app) {
                            Some(c) => Decision::Forward(c),
                            None => Decision::Error(rc::DIAMETER_UNABLE_TO_DELIVER),
                        };
                    }
                    self.pick(peers, app)
                }
            };
        }
        if realm.eq_ignore_ascii_case(&self.cfg.origin_realm) && dest_host.is_none() {
            return Decision::Local;
        }
        // Implicit route: an open peer of that realm supporting the application.
        let peers = self.peers.read().unwrap();
        let candidates: Vec<Arc<Conn>> = peers
            .iter()
            .filter_map(|p| p.usable_conn())
            .filter(|c| c.caps.origin_realm.eq_ignore_ascii_case(realm) && c.caps.supports(app))
            .collect();
        if candidates.is_empty() {
            return Decision::Error(rc::DIAMETER_UNABLE_TO_DELIVER);
        }
        let i = self.rr.fetch_add(1, Ordering::Relaxed) % candidates.len();
        Decision::Forward(candidates[i].clone())
    }

    fn pick(&self, peers: &[String], app: u32) -> Decision {
        let n = peers.len();
        if n == 0 {
            return Decision::Error(rc::DIAMETER_UNABLE_TO_DELIVER);
        }
        let start = self.rr.fetch_add(1, Ordering::Relaxed);
        for i in 0..n {
            if let Some(c) = self.usable_peer_conn(&peers[(start + i) % n], app) {
                return Decision::Forward(c);
            }
        }
        Decision::Error(rc::DIAMETER_UNABLE_TO_DELIVER)
    }

    /// An answer we generate ourselves: E bit for 3xxx.
    fn protocol_answer(&self, req: &Message, code: u32) -> Message {
        let mut a = Message::answer_to(req)
            .origin(&self.cfg.origin_host, &self.cfg.origin_realm)
            .result_code_avp(code);
        if rc::is_protocol_error(code) {
            a.header.flags |= FLAG_ERROR;
        }
        a
    }

    fn redirect_answer(&self, req: &Message, uris: &[String]) -> Message {
        let mut a = self.protocol_answer(req, rc::DIAMETER_REDIRECT_INDICATION);
        for u in uris {
            a.push(base::REDIRECT_HOST.uri(u));
        }
        a.push(base::REDIRECT_HOST_USAGE.enumerated(0));
        a
    }

    /// Validates and hands a request to its local handler.
    async fn local(&self, msg: Message) -> Message {
        let Some(h) = self.handlers.get(&msg.application_id()) else {
            return self.protocol_answer(&msg, rc::DIAMETER_APPLICATION_UNSUPPORTED);
        };
        let (t0, app, cmd) = (Instant::now(), msg.application_id(), msg.command_code());
        if let Err(e) = validate(&msg) {
            debug!(error = %e, code = e.result_code(), "request rejected");
            let ans =
                Message::error_answer(&msg, &e, &self.cfg.origin_host, &self.cfg.origin_realm);
            self.metrics.answered(app, cmd, &ans, t0.elapsed());
            return ans;
        }
        let mut ans = h(msg).await;
        self.metrics.answered(app, cmd, &ans, t0.elapsed());
        if ans.find(&base::ORIGIN_HOST).is_none() {
            ans.push(base::ORIGIN_HOST.identity(&self.cfg.origin_host));
            ans.push(base::ORIGIN_REALM.identity(&self.cfg.origin_realm));
        }
        ans
    }

    async fn client_request(&self, mut msg: Message) -> Result<Message, RequestError> {
        if msg.end_to_end_id() == 0 {
            msg.set_end_to_end_id(self.e2e.next());
        }
        if msg.find(&base::ORIGIN_HOST).is_none() {
            msg.push(base::ORIGIN_HOST.identity(&self.cfg.origin_host));
            msg.push(base::ORIGIN_REALM.identity(&self.cfg.origin_realm));
        }
        let conn = match self.route(&msg) {
            Decision::Local => return Ok(self.local(msg).await),
            Decision::Redirect(uris) => return Ok(self.redirect_answer(&msg, &uris)),
            Decision::Error(rc::DIAMETER_LOOP_DETECTED) => {
                return Ok(self.protocol_answer(&msg, rc::DIAMETER_LOOP_DETECTED))
            }
            Decision::Error(_) => return Err(RequestError::UnableToDeliver),
            Decision::Forward(c) => c,
        };
        let ans = conn.request(&msg, self.cfg.request_timeout).await?;
        if self.cfg.follow_redirects && ans.result_code() == Some(rc::DIAMETER_REDIRECT_INDICATION)
        {
            let app = msg.application_id();
            let next = ans
                .find_all(&base::REDIRECT_HOST)
                .filter_map(|a| a.as_str().ok())
                .find_map(|u| self.usable_peer_conn(uri_host(u), app));
            if let Some(c) = next {
                debug!(to = %c.caps.origin_host, "following redirect");
                return c.request(&msg, self.cfg.request_timeout).await;
            }
        }
        Ok(ans)
    }

    /// A request received from a peer, not a base-protocol one.
    async fn process(self: Arc<Self>, from: Arc<Conn>, mut msg: Message) {
        let hbh = msg.hop_by_hop_id();
        let decision = self.route(&msg);
        let reply: Message = match decision {
            Decision::Local => {
                let Some(k) = self.dup.enabled().then(|| dup_key(&msg)) else {
                    from.send(&self.local(msg).await).await;
                    return;
                };
                if msg.is_retransmit() {
                    if let Some(mut cached) = self.dup.get(k) {
                        info!(e2e = msg.end_to_end_id(), "duplicate request: cached answer");
                        cached[12..16].copy_from_slice(&hbh.to_be_bytes());
                        from.send_bytes(&cached).await;
                        return;
                    }
                }
                let ans = self.local(msg).await;
                let Some(b) = encode_or_log(&ans) else { return };
                self.dup.put(k, b.clone());
                from.send_bytes(&b).await;
                return;
            }
            Decision::Redirect(uris) => self.redirect_answer(&msg, &uris),
            Decision::Error(code) => self.protocol_answer(&msg, code),
            Decision::Forward(to) => {
                let (t0, app, cmd) = (Instant::now(), msg.application_id(), msg.command_code());
                let ans = if !msg.is_proxiable() {
                    self.protocol_answer(&msg, rc::DIAMETER_UNABLE_TO_DELIVER)
                } else {
                    msg.push(base::ROUTE_RECORD.identity(&from.caps.origin_host));
                    match to.request(&msg, self.cfg.request_timeout).await {
                        Ok(mut a) => {
                            a.set_hop_by_hop_id(hbh);
                            a
                        }
                        Err(e) => {
                            debug!(to = %to.caps.origin_host, error = %e, "forwarding failed");
                            msg.avps.pop();
                            self.protocol_answer(&msg, e.result_code())
                        }
                    }
                };
                self.metrics.answered(app, cmd, &ans, t0.elapsed());
                ans
            }
        };
        from.send(&reply).await;
    }

    fn cer_or_cea(&self, mut m: Message, local_ip: IpAddr, tls: bool) -> Message {
        m = m.origin(&self.cfg.origin_host, &self.cfg.origin_realm);
        if self.cfg.host_ip_addresses.is_empty() {
            m.push(base::HOST_IP_ADDRESS.address(local_ip));
        }
        for ip in &self.cfg.host_ip_addresses {
            m.push(base::HOST_IP_ADDRESS.address(*ip));
        }
        m.push(base::VENDOR_ID.u32(self.cfg.vendor_id));
        m.push(base::PRODUCT_NAME.utf8(&self.cfg.product_name));
        m.push(base::ORIGIN_STATE_ID.u32(self.origin_state_id));
        if self.advertised.iter().any(|a| a.vendor_id == VENDOR_3GPP) {
            m.push(base::SUPPORTED_VENDOR_ID.u32(VENDOR_3GPP));
        }
        for a in &self.advertised {
            let def =
                if a.accounting { &base::ACCT_APPLICATION_ID } else { &base::AUTH_APPLICATION_ID };
            if a.vendor_id == 0 {
                m.push(def.u32(a.id));
            } else {
                m.push(
                    base::VENDOR_SPECIFIC_APPLICATION_ID
                        .grouped(vec![base::VENDOR_ID.u32(a.vendor_id), def.u32(a.id)]),
                );
            }
        }
        if self.cfg.relay {
            m.push(base::AUTH_APPLICATION_ID.u32(base::RELAY_APP_ID));
        }
        if !tls {
            m.push(base::INBAND_SECURITY_ID.u32(0));
        }
        m.push(base::FIRMWARE_REVISION.u32(self.cfg.firmware_revision));
        m
    }

    /// Result-Code for a peer's capabilities: success, 5010 or 5017.
    fn check_caps(&self, caps: &Capabilities) -> u32 {
        let common = self.cfg.relay
            || caps.is_relay()
            || self.our_app_ids().any(|a| caps.applications.contains(&a));
        if !common {
            return rc::DIAMETER_NO_COMMON_APPLICATION;
        }
        if !caps.inband_security.is_empty() && !caps.inband_security.contains(&0) {
            return rc::DIAMETER_NO_COMMON_SECURITY;
        }
        rc::DIAMETER_SUCCESS
    }

    fn jitter(&self, tw: Duration) -> Duration {
        let j = (tw / 4).min(Duration::from_secs(2));
        let jm = j.as_millis() as u64;
        if jm == 0 {
            return tw;
        }
        let r = u64::from(random_u32()) % (2 * jm + 1);
        (tw + Duration::from_millis(r)).saturating_sub(j)
    }

    async fn disconnect_conn(self: &Arc<Self>, c: &Arc<Conn>, cause: u32) -> bool {
        let (tx, rx) = oneshot::channel();
        *c.dpa.lock().unwrap() = Some(tx);
        c.peer.set_state(PeerState::Closing);
        let dpr = Message::request(base::APP_ID, base::CMD_DISCONNECT_PEER)
            .ids(c.next_hbh(), self.e2e.next())
            .origin(&self.cfg.origin_host, &self.cfg.origin_realm)
            .avp(base::DISCONNECT_CAUSE.enumerated(cause));
        let mut got_dpa = false;
        if c.send(&dpr).await {
            got_dpa = matches!(tokio::time::timeout(self.cfg.dpa_timeout, rx).await, Ok(Ok(())));
            if !got_dpa {
                warn!(peer = %c.caps.origin_host, "no DPA");
            }
        }
        self.close_conn(c, false, "DPR sent");
        got_dpa
    }

    /// Tears a connection down: peer detached and Closed, pending requests failed over (T bit)
    /// to another route when there is one, else failed with PeerDown.
    fn close_conn(self: &Arc<Self>, c: &Arc<Conn>, down: bool, why: &str) {
        let Some(pending) = c.mark_closed() else { return };
        info!(peer = %c.caps.origin_host, reason = why, pending = pending.len(), "connection closed");
        let detached = {
            let mut slot = c.peer.conn.write().unwrap();
            let ours = slot.as_ref().is_some_and(|x| x.id == c.id);
            if ours {
                *slot = None;
                c.peer.set_state(PeerState::Closed);
                if down {
                    c.peer.was_down.store(true, Ordering::SeqCst);
                }
            }
            ours
        };
        if detached && c.peer.config.is_none() {
            self.forget(&c.peer);
        }
        for p in pending {
            self.failover(p);
        }
    }

    /// Removes a peer learnt from a CER (not configured) once it has no connection: peers with
    /// ever-new Origin-Hosts must not grow the table. Its state (Closed) was published first,
    /// so a `wait_peer` already watching it sees the close. Nothing else is kept per peer:
    /// metrics carry no host label, and duplicate-cache entries expire with their TTL (they
    /// must outlive the peer: a failed-over retransmission comes from another one).
    fn forget(&self, peer: &Arc<Peer>) {
        let mut peers = self.peers.write().unwrap();
        if peer.conn.read().unwrap().is_none() {
            peers.retain(|p| !Arc::ptr_eq(p, peer));
        }
    }

    fn failover(self: &Arc<Self>, p: Pending) {
        let Pending { tx, wire } = p;
        let mut m = match Message::decode(wire) {
            Ok(m) => m,
            Err(_) => {
                let _ = tx.send(Err(RequestError::PeerDown));
                return;
            }
        };
        m.set_retransmit(true);
        match self.route(&m) {
            Decision::Forward(c) => {
                let timeout = self.cfg.request_timeout;
                debug!(to = %c.caps.origin_host, "failover with T bit");
                tokio::spawn(async move {
                    let _ = tx.send(c.request(&m, timeout).await);
                });
            }
            _ => {
                let _ = tx.send(Err(RequestError::PeerDown));
            }
        }
    }

    /// Installs an open connection and starts its reader and watchdog.
    #[allow(clippy::too_many_arguments)]
    fn establish(
        self: &Arc<Self>,
        peer: Arc<Peer>,
        caps: Capabilities,
        initiator: bool,
        remote: SocketAddr,
        mut fr: FrameReader,
        out: Arc<Outbox>,
        closed_tx: watch::Sender<bool>,
    ) -> Arc<Conn> {
        fr.set_limits(self.msg_limits.clone());
        let reopen =
            if peer.was_down.swap(false, Ordering::SeqCst) { self.cfg.reopen_watchdogs } else { 0 };
        let conn = Arc::new(Conn::new(
            self.conn_ids.fetch_add(1, Ordering::Relaxed),
            peer.clone(),
            caps,
            initiator,
            remote,
            out,
            closed_tx,
            self.cfg.max_pending_per_peer,
            reopen,
            self.now_ms(),
            self.tap.clone(),
        ));
        let old = peer.conn.write().unwrap().replace(conn.clone());
        if let Some(old) = old {
            self.close_conn(&old, false, "replaced by a new connection");
        }
        if peer.config.is_none() && !self.relist(&peer) {
            // Forgotten while its CEA was sent, and another connection of the same host took
            // its place meanwhile: that one stays.
            self.close_conn(&conn, false, "replaced by a new connection");
            return conn;
        }
        peer.set_state(if reopen > 0 {
            PeerState::Reopen
        } else if initiator {
            PeerState::IOpen
        } else {
            PeerState::ROpen
        });
        info!(peer = %peer.host, %remote, initiator, reopen = reopen > 0, "peer open");
        tokio::spawn(read_loop(self.clone(), conn.clone(), fr));
        tokio::spawn(watchdog(self.clone(), conn.clone()));
        conn
    }

    /// Puts a learnt peer back in the table if a close forgot it between its CER and now (its
    /// connection is installed, so no later `forget` can race with this one). False when
    /// another peer of that host is there.
    fn relist(&self, peer: &Arc<Peer>) -> bool {
        let mut peers = self.peers.write().unwrap();
        if peers.iter().any(|p| Arc::ptr_eq(p, peer)) {
            return true;
        }
        if peers.iter().any(|p| p.host.eq_ignore_ascii_case(&peer.host)) {
            return false;
        }
        peers.push(peer.clone());
        true
    }

    fn open_state(c: &Conn) -> PeerState {
        if c.initiator {
            PeerState::IOpen
        } else {
            PeerState::ROpen
        }
    }

    /// Base-protocol requests and answers on an open connection; false: not base protocol.
    async fn on_base(self: &Arc<Self>, c: &Arc<Conn>, msg: &Message) -> bool {
        if msg.application_id() != base::APP_ID {
            return false;
        }
        let cmd = msg.command_code();
        if !msg.is_request() {
            match cmd {
                base::CMD_DEVICE_WATCHDOG => {
                    c.dwa_pending.store(false, Ordering::SeqCst);
                    c.dwa_count.fetch_add(1, Ordering::Relaxed);
                    let left = c.reopen_left.load(Ordering::SeqCst);
                    if left > 0 {
                        c.reopen_left.store(left - 1, Ordering::SeqCst);
                        if left == 1 {
                            info!(peer = %c.caps.origin_host, "failback: peer reopened");
                            c.peer.set_state(Self::open_state(c));
                        }
                    }
                    true
                }
                base::CMD_DISCONNECT_PEER => {
                    if let Some(tx) = c.dpa.lock().unwrap().take() {
                        let _ = tx.send(());
                    }
                    true
                }
                base::CMD_CAPABILITIES_EXCHANGE => true,
                _ => false,
            }
        } else {
            if !matches!(
                cmd,
                base::CMD_DEVICE_WATCHDOG
                    | base::CMD_DISCONNECT_PEER
                    | base::CMD_CAPABILITIES_EXCHANGE
            ) {
                return false;
            }
            if let Err(e) = validate(msg) {
                warn!(peer = %c.caps.origin_host, error = %e, "invalid base request");
                c.send(&Message::error_answer(
                    msg,
                    &e,
                    &self.cfg.origin_host,
                    &self.cfg.origin_realm,
                ))
                .await;
                return true;
            }
            match cmd {
                base::CMD_DEVICE_WATCHDOG => {
                    c.dwr_count.fetch_add(1, Ordering::Relaxed);
                    if self.answer_watchdogs.load(Ordering::SeqCst) {
                        let dwa = Message::answer_to(msg)
                            .result_code_avp(rc::DIAMETER_SUCCESS)
                            .origin(&self.cfg.origin_host, &self.cfg.origin_realm)
                            .avp(base::ORIGIN_STATE_ID.u32(self.origin_state_id));
                        c.send(&dwa).await;
                    }
                }
                base::CMD_DISCONNECT_PEER => {
                    let cause = msg.disconnect_cause().unwrap_or(0);
                    info!(peer = %c.caps.origin_host, cause, "DPR received");
                    let dpa = Message::answer_to(msg)
                        .result_code_avp(rc::DIAMETER_SUCCESS)
                        .origin(&self.cfg.origin_host, &self.cfg.origin_realm);
                    c.send(&dpa).await;
                    if cause == 2 {
                        c.peer.stopped.store(true, Ordering::SeqCst);
                    }
                    self.close_conn(c, false, "DPR received");
                }
                _ => {
                    // CER on an open connection: answer again with our capabilities.
                    let ip = self.cfg.host_ip_addresses.first().copied();
                    let cea = self.cer_or_cea(
                        Message::answer_to(msg).result_code_avp(rc::DIAMETER_SUCCESS),
                        ip.unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST)),
                        false,
                    );
                    c.send(&cea).await;
                }
            }
            true
        }
    }

    /// One frame from an open connection. A request to process is handed back for the
    /// connection's reader to drive.
    async fn on_frame(self: &Arc<Self>, c: &Arc<Conn>, frame: Bytes) -> Frame {
        let msg = match Message::decode(frame.clone()) {
            Ok(m) => m,
            Err(e) => {
                let keep = self.on_malformed(c, &frame, e).await;
                return if keep { Frame::Done } else { Frame::Close };
            }
        };
        c.tap(Direction::Received, &frame);
        if c.suspect.swap(false, Ordering::Relaxed) {
            info!(peer = %c.caps.origin_host, "failback: traffic from a suspect peer");
            c.peer.set_state(Self::open_state(c));
        }
        if self.on_base(c, &msg).await {
            return Frame::Done;
        }
        if !msg.is_request() {
            let hbh = msg.hop_by_hop_id();
            if !c.complete(hbh, Ok(msg)) {
                debug!(peer = %c.caps.origin_host, hbh, "answer with unknown hop-by-hop id dropped");
            }
            return Frame::Done;
        }
        if c.inflight.load(Ordering::Relaxed) >= self.cfg.max_inflight_per_peer {
            c.send(&self.protocol_answer(&msg, rc::DIAMETER_TOO_BUSY)).await;
            return Frame::Done;
        }
        c.inflight.fetch_add(1, Ordering::Relaxed);
        Frame::Request(msg)
    }

    async fn on_malformed(self: &Arc<Self>, c: &Arc<Conn>, frame: &[u8], e: Error) -> bool {
        warn!(peer = %c.caps.origin_host, error = %e, code = e.result_code(), "malformed message");
        if let Ok((h, _)) = Header::peek(frame) {
            if h.is_request() {
                let a = Message::error_answer_to_header(
                    &h,
                    &e,
                    &self.cfg.origin_host,
                    &self.cfg.origin_realm,
                );
                c.send(&a).await;
            } else {
                c.complete(h.hop_by_hop_id, Err(RequestError::MalformedAnswer(e.clone())));
            }
        }
        !e.breaks_framing()
    }
}

/// Resolves once the flag is true (or its sender is gone).
async fn is_set(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|v| *v).await.map(|_| ());
}

fn encode_or_log(m: &Message) -> Option<Bytes> {
    match m.to_bytes() {
        Ok(b) => Some(b),
        Err(e) => {
            warn!(error = %e, "cannot encode answer");
            None
        }
    }
}

/// The duplicate cache's key. The peer chooses both parts, and two requests with equal keys are
/// answered alike, so this is SipHash (std's), not the workspace's fast unkeyed hash: a peer
/// must not be able to make another request's key on purpose.
fn dup_key(m: &Message) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    m.end_to_end_id().hash(&mut h);
    for b in m.origin_host().unwrap_or_default().bytes() {
        h.write_u8(b.to_ascii_lowercase());
    }
    h.finish()
}

/// Answers of locally processed requests by (end-to-end id, Origin-Host), in two generations
/// rotated every TTL (an entry lives between one and two TTLs).
struct DupCache {
    ttl: Option<Duration>,
    inner: Mutex<DupGen>,
}

struct DupGen {
    since: Instant,
    cur: HashMap<u64, Bytes, rustc_hash::FxBuildHasher>,
    old: HashMap<u64, Bytes, rustc_hash::FxBuildHasher>,
}

impl DupCache {
    fn new(ttl: Option<Duration>) -> DupCache {
        DupCache {
            ttl,
            inner: Mutex::new(DupGen {
                since: Instant::now(),
                cur: HashMap::default(),
                old: HashMap::default(),
            }),
        }
    }
    fn enabled(&self) -> bool {
        self.ttl.is_some()
    }
    fn rotate(&self, g: &mut DupGen) {
        if let Some(ttl) = self.ttl {
            if g.since.elapsed() >= ttl {
                g.old = std::mem::take(&mut g.cur);
                g.since = Instant::now();
            }
        }
    }
    fn get(&self, k: u64) -> Option<BytesMut> {
        let mut g = self.inner.lock().unwrap();
        self.rotate(&mut g);
        g.cur.get(&k).or_else(|| g.old.get(&k)).map(|b| BytesMut::from(&b[..]))
    }
    fn put(&self, k: u64, b: Bytes) {
        let mut g = self.inner.lock().unwrap();
        self.rotate(&mut g);
        g.cur.insert(k, b);
    }
}

async fn accept_loop(node: Arc<Inner>, l: Listener) {
    let mut shutdown = node.shutdown.subscribe();
    loop {
        tokio::select! {
            _ = is_set(&mut shutdown) => return,
            r = l.accept() => match r {
                Ok(a) => {
                    // Counted from the accept, TLS handshake included, until CER/CEA is done.
                    let waiting = node.metrics.awaiting_cer.inc();
                    let guard = AwaitingCer(node.clone());
                    if usize::try_from(waiting).unwrap_or(0) >= node.cfg.max_connections_before_cer {
                        // Dropped at once: a flood of silent connections costs a descriptor
                        // each only for as long as the accept.
                        debug!(from = ?a.peer_addr(), "too many connections awaiting CER: closed");
                        node.metrics.refused(AWAITING_CER_LIMIT);
                        drop(guard);
                        drop(a);
                        continue;
                    }
                    tokio::spawn(respond(node.clone(), a, guard));
                }
                Err(e) => {
                    warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
}

/// An accepted connection counted in `awaiting_cer` until its capabilities exchange ends, either
/// way.
struct AwaitingCer(Arc<Inner>);

impl Drop for AwaitingCer {
    fn drop(&mut self) {
        self.0.metrics.awaiting_cer.dec();
    }
}

fn spawn_writer(w: transport::BoxWrite, limit: usize) -> (Arc<Outbox>, watch::Sender<bool>) {
    let out = Arc::new(Outbox::new(limit));
    let (closed_tx, closed_rx) = watch::channel(false);
    tokio::spawn(write_loop(w, out.clone(), closed_rx));
    (out, closed_tx)
}

/// What the reader does after a frame.
enum Frame {
    /// Handled (an answer, a base-protocol message, a refusal).
    Done,
    /// A request to process (counted in `inflight`).
    Request(Message),
    /// The stream cannot go on.
    Close,
}

/// A received request's processing, driven by its connection's reader; one concrete future
/// type, so the reader's set holds it without a box of its own.
async fn run_request(node: Arc<Inner>, conn: Arc<Conn>, msg: Message) {
    node.process(conn.clone(), msg).await;
    conn.inflight.fetch_sub(1, Ordering::Relaxed);
}

/// Reads a connection and processes its requests on the same task: the requests of one read
/// run up to their first wait before the next read, and what they send is written together; an
/// answer completing a forward resumes it here without another task hop.
async fn read_loop(node: Arc<Inner>, c: Arc<Conn>, mut fr: FrameReader) {
    let mut closed_rx = c.closed_rx();
    // One waiter for the whole connection: a fresh `wait_for` per message registered and
    // unregistered a watch waiter every time.
    let closed = is_set(&mut closed_rx);
    tokio::pin!(closed);
    let mut work = FuturesUnordered::new();
    let why = loop {
        let r = tokio::select! {
            biased;
            _ = &mut closed => break "closed",
            Some(()) = work.next(), if !work.is_empty() => continue,
            r = fr.next() => r,
        };
        match r {
            Ok(Some(frame)) => {
                c.last_rx_ms.store(node.now_ms(), Ordering::Relaxed);
                match node.on_frame(&c, frame).await {
                    Frame::Done => {}
                    Frame::Request(msg) => work.push(run_request(node.clone(), c.clone(), msg)),
                    Frame::Close => break "framing error",
                }
            }
            Ok(None) => break "peer closed the connection",
            Err(ReadError::Io(e)) => {
                debug!(peer = %c.caps.origin_host, error = %e, "read failed");
                break "read error";
            }
            Err(ReadError::Framing { error, header }) => {
                warn!(peer = %c.caps.origin_host, error = %error, "stream lost framing");
                if let Some(h) = header.filter(|h| h.is_request()) {
                    let a = Message::error_answer_to_header(
                        &h,
                        &error,
                        &node.cfg.origin_host,
                        &node.cfg.origin_realm,
                    );
                    c.send(&a).await;
                }
                break "framing error";
            }
            Err(ReadError::TooLong { header, declared, limit }) => {
                // Well framed, just too long: the reader skips its body, so the connection goes
                // on after the answer (RFC 6733 §7.1.5, 5015).
                c.last_rx_ms.store(node.now_ms(), Ordering::Relaxed);
                warn!(peer = %c.caps.origin_host, app = header.application_id, declared, limit,
                      "message over the size limit: skipped");
                node.metrics.oversize(header.is_request());
                let e = Error::MessageTooLong { declared: declared as u32, limit };
                if header.is_request() {
                    let a = Message::error_answer_to_header(
                        &header,
                        &e,
                        &node.cfg.origin_host,
                        &node.cfg.origin_realm,
                    );
                    c.send(&a).await;
                } else {
                    c.complete(header.hop_by_hop_id, Err(RequestError::MalformedAnswer(e)));
                }
            }
        }
    };
    node.close_conn(&c, false, why);
    // Forwards still waiting end with their answer or timeout (and clear their pending entries).
    if !work.is_empty() {
        tokio::spawn(async move { while work.next().await.is_some() {} });
    }
}

/// RFC 3539 watchdog of one connection.
async fn watchdog(node: Arc<Inner>, c: Arc<Conn>) {
    let tw = node.cfg.watchdog_interval;
    let mut closed = c.closed_rx();
    let mut set_at = node.now_ms();
    let mut cur = node.jitter(tw);
    loop {
        let suspect = c.suspect.load(Ordering::SeqCst);
        let reopen = c.reopen_left.load(Ordering::SeqCst) > 0;
        let base_ms = if suspect || reopen {
            set_at
        } else {
            set_at.max(c.last_rx_ms.load(Ordering::Relaxed))
        };
        let deadline = base_ms + cur.as_millis() as u64;
        let now = node.now_ms();
        if now < deadline {
            tokio::select! {
                _ = is_set(&mut closed) => return,
                _ = tokio::time::sleep(Duration::from_millis(deadline - now)) => {}
            }
            continue;
        }
        if suspect {
            warn!(peer = %c.caps.origin_host, "watchdog: peer down");
            node.close_conn(&c, true, "watchdog expired");
            return;
        }
        if c.dwa_pending.load(Ordering::SeqCst) {
            if reopen {
                warn!(peer = %c.caps.origin_host, "watchdog: reopening peer down again");
                node.close_conn(&c, true, "watchdog expired while reopening");
                return;
            }
            warn!(peer = %c.caps.origin_host, "watchdog: no DWA, peer suspect (failover)");
            c.suspect.store(true, Ordering::SeqCst);
            c.peer.set_state(PeerState::Suspect);
        } else {
            let dwr = Message::request(base::APP_ID, base::CMD_DEVICE_WATCHDOG)
                .ids(c.next_hbh(), node.e2e.next())
                .origin(&node.cfg.origin_host, &node.cfg.origin_realm)
                .avp(base::ORIGIN_STATE_ID.u32(node.origin_state_id));
            c.dwa_pending.store(true, Ordering::SeqCst);
            c.send(&dwr).await;
        }
        set_at = node.now_ms();
        cur = node.jitter(tw);
    }
}

/// Responder side: first message must be a CER.
async fn respond(node: Arc<Inner>, a: transport::Accepted, waiting: AwaitingCer) {
    let from = a.peer_addr();
    let tls_conn = a.is_tls();
    let stream = match tokio::time::timeout(node.cfg.cer_timeout, a.handshake()).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            warn!(?from, error = %e, "handshake failed");
            if tls_conn {
                node.metrics.refused(TLS_HANDSHAKE);
            }
            return;
        }
        Err(_) => return,
    };
    let Stream { reader, writer, local, peer: remote, tls, peer_cert } = stream;
    let mut fr = FrameReader::with_limits(reader, node.cer_limits.clone());
    let (out, closed_tx) = spawn_writer(writer, node.cfg.write_queue_bytes);
    let close = |out: &Outbox| out.close();
    let frame = match tokio::time::timeout(node.cfg.cer_timeout, fr.next()).await {
        Ok(Ok(Some(f))) => f,
        Ok(Err(ReadError::TooLong { declared, limit, .. })) => {
            // Not answered: nothing says the peer speaks Diameter yet, and the body would have
            // to be read to stay in sync with it.
            warn!(%remote, declared, limit, "first message longer than a CER can be: closed");
            node.metrics.refused(FIRST_MESSAGE_TOO_LONG);
            close(&out);
            return;
        }
        _ => {
            debug!(%remote, "no CER");
            close(&out);
            return;
        }
    };
    let send = |m: Message| {
        let out = out.clone();
        async move {
            if let Ok(b) = m.to_bytes() {
                out.push(&b).await;
            }
            out.close();
        }
    };
    let cer = match Message::decode(frame.clone()) {
        Ok(m) => m,
        Err(e) => {
            warn!(%remote, error = %e, "malformed first message");
            if let Ok((h, _)) = Header::peek(&frame) {
                if h.is_request() {
                    send(Message::error_answer_to_header(
                        &h,
                        &e,
                        &node.cfg.origin_host,
                        &node.cfg.origin_realm,
                    ))
                    .await;
                }
            }
            close(&out);
            return;
        }
    };
    if !cer.is_request()
        || cer.application_id() != base::APP_ID
        || cer.command_code() != base::CMD_CAPABILITIES_EXCHANGE
    {
        warn!(%remote, cmd = cer.command_code(), "first message is not a CER");
        close(&out);
        return;
    }
    let cea_base = |code: u32| {
        let mut m =
            node.cer_or_cea(Message::answer_to(&cer).result_code_avp(code), local.ip(), tls);
        if rc::is_protocol_error(code) {
            m.header.flags |= FLAG_ERROR;
        }
        m
    };
    if let Err(e) = validate(&cer) {
        warn!(%remote, error = %e, "invalid CER");
        send(Message::error_answer(&cer, &e, &node.cfg.origin_host, &node.cfg.origin_realm)).await;
        return;
    }
    let caps = Capabilities::from_message(&cer);
    // The certificate vouches for the identity the CER claims, or nothing does: a peer of the
    // CA must not pass for another (RFC 6733 §13.1 wants the peer authenticated; the Origin-Host
    // is what routing and the peer table trust).
    if tls
        && node.cfg.check_peer_identity
        && !peer_cert.as_ref().is_some_and(|c| names_identity(c, &caps.origin_host))
    {
        warn!(%remote, host = %caps.origin_host,
              "TLS peer's certificate does not name its Origin-Host: 3010");
        node.metrics.refused(PEER_IDENTITY);
        send(cea_base(rc::DIAMETER_UNKNOWN_PEER)).await;
        return;
    }
    let peer = match node.find_peer(&caps.origin_host) {
        Some(p) => p,
        None if node.cfg.accept_unknown_peers && !caps.origin_host.is_empty() => {
            let mut peers = node.peers.write().unwrap();
            match peers.iter().find(|p| p.host.eq_ignore_ascii_case(&caps.origin_host)) {
                Some(p) => p.clone(),
                None => {
                    let p = Arc::new(Peer::new(caps.origin_host.clone(), None));
                    peers.push(p.clone());
                    p
                }
            }
        }
        None => {
            warn!(%remote, host = %caps.origin_host, "CER from unknown peer: 3010");
            send(cea_base(rc::DIAMETER_UNKNOWN_PEER)).await;
            return;
        }
    };
    let code = node.check_caps(&caps);
    if code != rc::DIAMETER_SUCCESS {
        warn!(%remote, host = %caps.origin_host, code, "capabilities rejected");
        send(cea_base(code)).await;
        return;
    }
    // Election (RFC 6733 §5.6.4): when we are connecting to this peer too, the higher
    // Origin-Host keeps its own (initiator) connection.
    if peer.is_outbound()
        && peer.conn().is_some_and(|c| c.initiator && !c.is_closed())
        && node.cfg.origin_host.to_ascii_lowercase() > caps.origin_host.to_ascii_lowercase()
    {
        info!(host = %caps.origin_host, "election won: inbound connection refused");
        send(cea_base(rc::DIAMETER_ELECTION_LOST)).await;
        return;
    }
    let cea = cea_base(rc::DIAMETER_SUCCESS);
    match cea.to_bytes() {
        Ok(b) => {
            if !out.push(&b).await {
                return;
            }
        }
        Err(_) => return,
    }
    drop(waiting);
    node.establish(peer, caps, false, remote, fr, out, closed_tx);
}

/// Initiator side: CER, CEA, open.
async fn initiate(node: &Arc<Inner>, peer: &Arc<Peer>, s: Stream) -> Result<Arc<Conn>, String> {
    let Stream { reader, writer, local, peer: remote, tls, .. } = s;
    let mut fr = FrameReader::with_limits(reader, node.cer_limits.clone());
    let (out, closed_tx) = spawn_writer(writer, node.cfg.write_queue_bytes);
    let cer = node.cer_or_cea(
        Message::request(base::APP_ID, base::CMD_CAPABILITIES_EXCHANGE)
            .ids(random_u32(), node.e2e.next()),
        local.ip(),
        tls,
    );
    let fail = |out: &Outbox, why: String| {
        out.close();
        Err(why)
    };
    let Ok(b) = cer.to_bytes() else { return fail(&out, "CER encoding".into()) };
    if !out.push(&b).await {
        return Err("writer closed".into());
    }
    peer.set_state(PeerState::WaitICea);
    let frame = match tokio::time::timeout(node.cfg.cer_timeout, fr.next()).await {
        Ok(Ok(Some(f))) => f,
        Ok(Ok(None)) => return fail(&out, "closed before CEA".into()),
        Ok(Err(ReadError::TooLong { declared, .. })) => {
            return fail(&out, format!("CEA of {declared} bytes, longer than max_cer_len"))
        }
        Ok(Err(e)) => return fail(&out, format!("reading CEA: {e:?}")),
        Err(_) => return fail(&out, "no CEA in time".into()),
    };
    let cea = match Message::decode(frame) {
        Ok(m) => m,
        Err(e) => return fail(&out, format!("malformed CEA: {e}")),
    };
    if cea.is_request() || cea.command_code() != base::CMD_CAPABILITIES_EXCHANGE {
        return fail(&out, format!("expected CEA, got command {}", cea.command_code()));
    }
    let code = cea.result_code().unwrap_or(0);
    if code != rc::DIAMETER_SUCCESS {
        return fail(&out, format!("CEA Result-Code {code}"));
    }
    let caps = Capabilities::from_message(&cea);
    if !caps.origin_host.eq_ignore_ascii_case(&peer.host) {
        return fail(&out, format!("CEA from {} instead of {}", caps.origin_host, peer.host));
    }
    let code = node.check_caps(&caps);
    if code != rc::DIAMETER_SUCCESS {
        return fail(&out, format!("peer capabilities unacceptable ({code})"));
    }
    Ok(node.establish(peer.clone(), caps, true, remote, fr, out, closed_tx))
}

/// Whether a connect error is the TLS handshake's (a rustls error), not the TCP connect's.
fn is_tls_error(e: &std::io::Error) -> bool {
    e.get_ref().is_some_and(|i| i.is::<rustls::Error>())
}

/// Connects to an outbound peer and keeps it connected, with exponential backoff.
async fn run_outbound(node: Arc<Inner>, peer: Arc<Peer>) {
    let cfg = peer.config.clone().expect("outbound peer has a config");
    let addr = cfg.addr.expect("outbound peer has an address");
    let mut shutdown = node.shutdown.subscribe();
    let mut backoff = node.cfg.reconnect_min;
    loop {
        if *shutdown.borrow() || peer.stopped.load(Ordering::SeqCst) {
            return;
        }
        if let Some(c) = peer.conn() {
            // open (perhaps by the peer's own connection): wait for it to close
            let mut closed = c.closed_rx();
            tokio::select! {
                _ = is_set(&mut closed) => {}
                _ = is_set(&mut shutdown) => return,
            }
            backoff = node.cfg.reconnect_min;
        } else {
            peer.set_state(PeerState::WaitConnAck);
            let r = tokio::time::timeout(
                node.cfg.connect_timeout,
                transport::connect(cfg.transport, addr, node.cfg.tls.as_deref(), &peer.host),
            )
            .await;
            match r {
                Ok(Ok(s)) => match initiate(&node, &peer, s).await {
                    Ok(_) => {
                        backoff = node.cfg.reconnect_min;
                        continue;
                    }
                    Err(e) => warn!(peer = %peer.host, error = %e, "capabilities exchange failed"),
                },
                Ok(Err(e)) if is_tls_error(&e) => {
                    // The peer's certificate is not of our CA or does not name it, or it
                    // refused ours: as loud as a refused CER.
                    warn!(peer = %peer.host, error = %e, "TLS handshake failed");
                    node.metrics.refused(TLS_HANDSHAKE);
                }
                Ok(Err(e)) => debug!(peer = %peer.host, error = %e, "connect failed"),
                Err(_) => debug!(peer = %peer.host, "connect timed out"),
            }
            if peer.conn().is_none() {
                peer.set_state(PeerState::Closed);
            }
        }
        if peer.stopped.load(Ordering::SeqCst) {
            return;
        }
        let wait = node.jitter(backoff);
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = is_set(&mut shutdown) => return,
        }
        backoff = (backoff * 2).min(node.cfg.reconnect_max);
    }
}
