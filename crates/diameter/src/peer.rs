//! Peers and their connections: the RFC 6733 §5.6 states, capabilities learnt from CER/CEA, the
//! pending-request table and the RFC 3539 watchdog flags of one transport connection.

use crate::fasthash::FastMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::sync::{oneshot, watch};

use crate::dictionary::base;
use crate::ids::HopByHopIds;
use crate::message::Message;
use crate::outbox::Outbox;
use crate::tap::{self, Direction, TapSlot, TappedMessage};
use crate::transport::Transport;

/// Peer state (RFC 6733 §5.6, with the RFC 3539 watchdog states an open peer can be in).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerState {
    Closed,
    /// Connecting as initiator.
    WaitConnAck,
    /// CER sent, waiting for the CEA.
    WaitICea,
    /// Open, we initiated the connection.
    IOpen,
    /// Open, the peer initiated the connection.
    ROpen,
    /// Watchdog unanswered: no new requests are routed to the peer (failover).
    Suspect,
    /// Reconnected after a failure: open once enough DWAs came back (failback, RFC 3539 §3.4.1).
    Reopen,
    /// DPR sent, waiting for the DPA.
    Closing,
}

impl PeerState {
    pub fn is_open(self) -> bool {
        matches!(self, PeerState::IOpen | PeerState::ROpen)
    }
}

/// A configured peer.
#[derive(Clone, Debug)]
pub struct PeerConfig {
    /// Its Diameter identity (Origin-Host); CEA must carry it.
    pub host: String,
    /// Where to connect; `None` for a peer we only accept connections from.
    pub addr: Option<SocketAddr>,
    pub transport: Transport,
}

impl PeerConfig {
    /// A peer we connect to (and reconnect to with backoff).
    pub fn connect(host: impl Into<String>, addr: SocketAddr) -> PeerConfig {
        PeerConfig { host: host.into(), addr: Some(addr), transport: Transport::Tcp }
    }
    /// A known peer that connects to us.
    pub fn accept(host: impl Into<String>) -> PeerConfig {
        PeerConfig { host: host.into(), addr: None, transport: Transport::Tcp }
    }
    pub fn transport(mut self, transport: Transport) -> PeerConfig {
        self.transport = transport;
        self
    }
}

/// What a peer announced in its CER or CEA.
#[derive(Debug, Clone, Default)]
pub struct Capabilities {
    pub origin_host: String,
    pub origin_realm: String,
    pub host_ip_addresses: Vec<IpAddr>,
    pub vendor_id: u32,
    pub product_name: String,
    /// Auth and Acct application ids, plain and vendor-specific.
    pub applications: Vec<u32>,
    pub inband_security: Vec<u32>,
}

impl Capabilities {
    pub fn from_message(m: &Message) -> Capabilities {
        let mut apps = Vec::new();
        for a in &m.avps {
            if a.is(&base::AUTH_APPLICATION_ID) || a.is(&base::ACCT_APPLICATION_ID) {
                apps.extend(a.as_u32().ok());
            } else if a.is(&base::VENDOR_SPECIFIC_APPLICATION_ID) {
                for def in [&base::AUTH_APPLICATION_ID, &base::ACCT_APPLICATION_ID] {
                    apps.extend(a.child(def).and_then(|c| c.as_u32().ok()));
                }
            }
        }
        Capabilities {
            origin_host: m.origin_host().unwrap_or_default().to_owned(),
            origin_realm: m.origin_realm().unwrap_or_default().to_owned(),
            host_ip_addresses: m
                .find_all(&base::HOST_IP_ADDRESS)
                .filter_map(|a| a.as_address().ok())
                .filter_map(|a| a.ip())
                .collect(),
            vendor_id: m.get_u32(&base::VENDOR_ID).unwrap_or(0),
            product_name: m.get_str(&base::PRODUCT_NAME).unwrap_or_default().to_owned(),
            applications: apps,
            inband_security: m.get_all_u32(&base::INBAND_SECURITY_ID),
        }
    }
    pub fn is_relay(&self) -> bool {
        self.applications.contains(&base::RELAY_APP_ID)
    }
    pub fn supports(&self, app: u32) -> bool {
        app == base::APP_ID || self.is_relay() || self.applications.contains(&app)
    }
}

/// Why a request sent through the node got no answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RequestError {
    #[error("no route to the destination (unable to deliver)")]
    UnableToDeliver,
    #[error("the peer's pending-request table is full (too busy)")]
    TooBusy,
    #[error("no answer within the request timeout")]
    Timeout,
    #[error("the connection to the peer closed before the answer came")]
    PeerDown,
    #[error("request cannot be encoded: {0}")]
    Encode(#[from] crate::error::EncodeError),
    #[error("the peer's answer could not be decoded: {0}")]
    MalformedAnswer(#[from] crate::error::Error),
}

impl RequestError {
    /// The Result-Code a relay answers with when forwarding fails this way.
    pub fn result_code(&self) -> u32 {
        use crate::error::result_code::*;
        match self {
            RequestError::TooBusy => DIAMETER_TOO_BUSY,
            RequestError::Encode(_) | RequestError::MalformedAnswer(_) => DIAMETER_UNABLE_TO_COMPLY,
            _ => DIAMETER_UNABLE_TO_DELIVER,
        }
    }
}

pub(crate) struct Pending {
    pub tx: oneshot::Sender<Result<Message, RequestError>>,
    /// The request as sent, for re-sending with the T bit after a failover.
    pub wire: Bytes,
}

/// One open transport connection to a peer.
pub(crate) struct Conn {
    pub id: u64,
    pub peer: Arc<Peer>,
    pub caps: Capabilities,
    pub initiator: bool,
    pub remote: SocketAddr,
    out: Arc<Outbox>,
    pending: Mutex<FastMap<u32, Pending>>,
    max_pending: usize,
    hbh: HopByHopIds,
    pub inflight: AtomicUsize,
    closed: AtomicBool,
    closed_tx: watch::Sender<bool>,
    /// Milliseconds since node start of the last message received (watchdog reset).
    pub last_rx_ms: AtomicU64,
    pub dwa_pending: AtomicBool,
    pub suspect: AtomicBool,
    pub reopen_left: AtomicU32,
    pub dpa: Mutex<Option<oneshot::Sender<()>>>,
    /// DWAs received / DWRs received on this connection.
    pub dwa_count: AtomicU64,
    pub dwr_count: AtomicU64,
    /// The node's message-copy tap (crate::tap).
    tap: Arc<TapSlot>,
}

impl Conn {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: u64,
        peer: Arc<Peer>,
        caps: Capabilities,
        initiator: bool,
        remote: SocketAddr,
        out: Arc<Outbox>,
        closed_tx: watch::Sender<bool>,
        max_pending: usize,
        reopen: u32,
        now_ms: u64,
        tap: Arc<TapSlot>,
    ) -> Conn {
        Conn {
            id,
            peer,
            caps,
            initiator,
            remote,
            out,
            pending: Mutex::new(FastMap::default()),
            max_pending,
            hbh: HopByHopIds::new(),
            inflight: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            closed_tx,
            last_rx_ms: AtomicU64::new(now_ms),
            dwa_pending: AtomicBool::new(false),
            suspect: AtomicBool::new(false),
            reopen_left: AtomicU32::new(reopen),
            dpa: Mutex::new(None),
            dwa_count: AtomicU64::new(0),
            dwr_count: AtomicU64::new(0),
            tap,
        }
    }

    /// Shows an application message to the node's tap, if one is installed.
    pub fn tap(&self, direction: Direction, wire: &[u8]) {
        if let Some(t) = self.tap.get() {
            if tap::is_application(wire) {
                t.copy(&TappedMessage {
                    direction,
                    wire,
                    connection: self.id,
                    peer_addr: self.remote,
                    peer_host: &self.caps.origin_host,
                });
            }
        }
    }

    pub fn next_hbh(&self) -> u32 {
        self.hbh.next()
    }
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
    /// Open, answering its watchdog and not reopening: new requests may be routed to it.
    pub fn is_usable(&self) -> bool {
        !self.is_closed()
            && !self.suspect.load(Ordering::Relaxed)
            && self.reopen_left.load(Ordering::Relaxed) == 0
    }
    pub fn closed_rx(&self) -> watch::Receiver<bool> {
        self.closed_tx.subscribe()
    }
    pub fn pending_len(&self) -> usize {
        self.pending.lock().unwrap().len()
    }

    /// Marks the connection closed and returns the pending requests (once; `None` after).
    pub fn mark_closed(&self) -> Option<Vec<Pending>> {
        if self.closed.swap(true, Ordering::SeqCst) {
            return None;
        }
        let _ = self.closed_tx.send(true);
        self.out.close();
        Some(self.pending.lock().unwrap().drain().map(|(_, p)| p).collect())
    }

    /// Queues an encoded message for the writer task.
    pub async fn send_bytes(&self, b: &[u8]) -> bool {
        self.out
            .push_with(|buf| {
                buf.extend_from_slice(b);
                self.tap(Direction::Sent, b);
                true
            })
            .await
    }

    /// Encodes a message (answers, DWR, DPR) straight into the connection's write buffer.
    pub async fn send(&self, m: &Message) -> bool {
        self.out
            .push_with(|buf| {
                let at = buf.len();
                match m.encode(buf) {
                    Ok(()) => {
                        self.tap(Direction::Sent, &buf[at..]);
                        true
                    }
                    Err(e) => {
                        tracing::error!(peer = %self.caps.origin_host, error = %e, "cannot encode message");
                        false
                    }
                }
            })
            .await
    }

    /// Sends a request with a fresh hop-by-hop id and waits for its answer.
    pub async fn request(&self, msg: &Message, timeout: Duration) -> Result<Message, RequestError> {
        let mut buf = BytesMut::with_capacity(msg.encoded_len());
        msg.encode(&mut buf)?;
        self.request_wire(buf, timeout).await
    }

    /// Like [`Conn::request`] for an already encoded request; its hop-by-hop id is overwritten.
    pub async fn request_wire(
        &self,
        mut buf: BytesMut,
        timeout: Duration,
    ) -> Result<Message, RequestError> {
        let hbh = self.next_hbh();
        buf[12..16].copy_from_slice(&hbh.to_be_bytes());
        let wire = buf.freeze();
        let (tx, rx) = oneshot::channel();
        {
            let mut p = self.pending.lock().unwrap();
            if p.len() >= self.max_pending {
                return Err(RequestError::TooBusy);
            }
            p.insert(hbh, Pending { tx, wire: wire.clone() });
        }
        if self.is_closed() || !self.send_bytes(&wire).await {
            self.pending.lock().unwrap().remove(&hbh);
            return Err(RequestError::PeerDown);
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err(RequestError::PeerDown),
            Err(_) => {
                self.pending.lock().unwrap().remove(&hbh);
                Err(RequestError::Timeout)
            }
        }
    }

    /// Hands an answer to the request waiting for it; false for an unknown hop-by-hop id.
    pub fn complete(&self, hbh: u32, r: Result<Message, RequestError>) -> bool {
        match self.pending.lock().unwrap().remove(&hbh) {
            Some(p) => {
                let _ = p.tx.send(r);
                true
            }
            None => false,
        }
    }
}

/// A peer of the node: configured (outbound or accept-only) or learnt from an inbound CER.
pub(crate) struct Peer {
    pub host: String,
    pub config: Option<PeerConfig>,
    pub state: watch::Sender<PeerState>,
    pub conn: RwLock<Option<Arc<Conn>>>,
    /// The last connection went down on a watchdog failure: the next one starts in Reopen.
    pub was_down: AtomicBool,
    /// No reconnection (after a local DPR or a peer's DO_NOT_WANT_TO_TALK_TO_YOU).
    pub stopped: AtomicBool,
}

impl Peer {
    pub fn new(host: String, config: Option<PeerConfig>) -> Peer {
        Peer {
            host,
            config,
            state: watch::Sender::new(PeerState::Closed),
            conn: RwLock::new(None),
            was_down: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
        }
    }
    pub fn set_state(&self, s: PeerState) {
        self.state.send_if_modified(|cur| {
            let changed = *cur != s;
            *cur = s;
            changed
        });
    }
    pub fn state(&self) -> PeerState {
        *self.state.borrow()
    }
    pub fn conn(&self) -> Option<Arc<Conn>> {
        self.conn.read().unwrap().clone()
    }
    pub fn usable_conn(&self) -> Option<Arc<Conn>> {
        self.conn.read().unwrap().as_ref().filter(|c| c.is_usable()).cloned()
    }
    pub fn is_outbound(&self) -> bool {
        self.config.as_ref().is_some_and(|c| c.addr.is_some())
    }
}
