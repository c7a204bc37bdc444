//! The copier: an NF's side of the Data Director's message copy (issue #24, "Sources").
//!
//! It is both taps, the SBI stack's ([`sbi::layer::tap::MessageTap`], installed on the server
//! and the client) and the Diameter node's ([`diameter::DiameterTap`]). Each copy is encoded
//! straight into the current batch ([`crate::envelope::encode_framed`]) under a
//! `std::sync::Mutex` held for that encode only, with the per-NF sequence number and the
//! transaction id given under the same lock (so sequence order is buffer order); nothing on the
//! request path awaits. A full batch (`batch_size` copies, or [`MAX_BATCH_BYTES`]) is sealed
//! there and then, unless a sealed batch is already waiting for the sender: then the current one
//! grows to [`MAX_BATCH_BYTES`] first, so a busy sender finds one large batch rather than many
//! small ones. The [`sender`] task seals a batch whose first copy has waited `linger_ms` and
//! POSTs sealed batches, one each, oldest first, to the ingest API. Batch buffers are allocated
//! at their full size and reused once delivered: growing a fresh buffer copied each batch twice
//! over and faulted its pages in every time (perf, benches/copier.rs).
//!
//! A mutex rather than a lock-free queue: the encode is a few hundred nanoseconds of copying
//! into one buffer that then leaves as one body, and a queue would add a copy or an allocation
//! per message for a lock that is rarely contended (benches/copier.rs, docs/dd.md).
//!
//! What is buffered (the current batch, sealed batches, the batch being sent) is bounded by
//! `buffer_bytes`. A copy that would go beyond it is dropped, the newest rather than the
//! oldest: the sealed batches are resent whole and in order, the request path never has to
//! reach into the sender's queue, and what the Data Director gets is a contiguous run of
//! sequence numbers with the gap at its end, which a consumer can see.

mod metrics;
mod sender;

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use diameter::{DiameterTap, Direction, TappedMessage};
use prometheus_client::registry::Registry;
use sbi::client::SbiClient;
use sbi::layer::tap::{self as sbi_tap, Exchange, MessageCopy, MessageTap, Peer};
use sbi::InvalidParam;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::config::CopyConfig;
use crate::envelope::{self, CopyMeta, Protocol, TriggerPoint};
use crate::extract;

/// Largest batch: well under the SBI stack's default 2 MiB request body limit, so one POST of
/// one batch is always accepted; a lingering batch is usually far smaller.
pub const MAX_BATCH_BYTES: usize = 1 << 20;

/// Room past `batch_bytes` in a batch buffer: the copy that fills a batch lands whole without a
/// reallocation when it is of ordinary size.
const BATCH_SLACK: usize = 64 * 1024;

/// Delivered batch buffers kept for reuse.
const SPARE_BUFFERS: usize = 2;

/// An NF's copier. Dropping it leaves its sender running; [`Copier::stop`] flushes and ends it.
pub struct Copier {
    shared: Arc<Shared>,
    sender: Mutex<Option<JoinHandle<()>>>,
}

pub(crate) struct Shared {
    nf_type: Box<str>,
    nf_instance: Box<str>,
    /// Indexed by `TriggerPoint as usize - 1`.
    triggers: [bool; 4],
    services: Box<[Box<str>]>,
    batch_size: usize,
    batch_bytes: usize,
    linger: Duration,
    bound: usize,
    url: String,
    client: SbiClient,
    state: Mutex<State>,
    /// The subscriber of each Diameter session, for its messages that do not name it.
    sessions: Mutex<SessionIds>,
    /// Wakes the sender: a batch was opened while it was idle (its linger starts), a batch was
    /// sealed while it waited, or the stop began.
    wake: Notify,
    stopping: AtomicBool,
    /// The sender is gone: later copies are dropped as `stopped`.
    closed: AtomicBool,
}

/// What the lock guards: the batches and every counter (plain integers, since each change is
/// made under the lock anyway).
#[derive(Default)]
pub(crate) struct State {
    buf: BytesMut,
    count: usize,
    /// When the current batch's first copy came.
    opened: Option<Instant>,
    sealed: VecDeque<Sealed>,
    sealed_bytes: usize,
    /// The batch the sender has taken and not yet delivered: bytes, copies.
    in_flight: (usize, usize),
    /// Delivered batch buffers, emptied, for the next batches.
    spare: Vec<BytesMut>,
    /// Capacity of a new batch buffer.
    buffer_capacity: usize,
    /// What the sender is doing, so the request path wakes it only when that changes what it
    /// does next: a wake-up of a parked thread cost more than a POST's share per copy at
    /// 10,000 copies a second (benches/copier.rs).
    pub(crate) sender: SenderState,
    next_sequence: u64,
    next_transaction: u64,
    pub(crate) copies: [u64; 4],
    pub(crate) dropped: metrics::Dropped,
    pub(crate) batches: metrics::Batches,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SenderState {
    /// Nothing to send: waits for a wake-up.
    #[default]
    Idle,
    /// Waits for the current batch's linger to end (a wake-up: a batch was sealed meanwhile).
    Lingering,
    /// Posting: it looks at the batches again when done, without being woken.
    Posting,
}

pub(crate) struct Sealed {
    bytes: Bytes,
    copies: usize,
}

impl State {
    fn buffered(&self) -> usize {
        self.buf.len() + self.sealed_bytes + self.in_flight.0
    }

    /// Takes a delivered batch's buffer back for reuse, when nothing else holds it.
    pub(crate) fn recycle(&mut self, batch: Bytes) {
        if self.spare.len() < SPARE_BUFFERS {
            if let Ok(mut b) = batch.try_into_mut() {
                if b.capacity() >= self.buffer_capacity {
                    b.clear();
                    self.spare.push(b);
                }
            }
        }
    }

    fn seal(&mut self) {
        if self.count == 0 {
            return;
        }
        let next = match self.spare.pop() {
            Some(b) => b,
            None => BytesMut::with_capacity(self.buffer_capacity),
        };
        let bytes = std::mem::replace(&mut self.buf, next).freeze();
        self.sealed_bytes += bytes.len();
        self.sealed.push_back(Sealed { bytes, copies: self.count });
        self.count = 0;
        self.opened = None;
    }
}

impl Copier {
    /// Validates `config`, then starts the sender task (inside a Tokio runtime). `client` is
    /// the copier's own: the NF's client carries the egress tap, and the copier's POSTs must
    /// not be copied.
    pub fn start(
        config: &CopyConfig,
        nf_type: &str,
        nf_instance: &str,
        client: SbiClient,
    ) -> Result<Copier, Vec<InvalidParam>> {
        config.validate()?;
        let mut triggers = [false; 4];
        for t in config.trigger_points() {
            triggers[t as usize - 1] = true;
        }
        let batch_bytes = MAX_BATCH_BYTES.min(config.buffer_bytes / 4);
        let state = State {
            buf: BytesMut::with_capacity(batch_bytes + BATCH_SLACK),
            buffer_capacity: batch_bytes + BATCH_SLACK,
            ..State::default()
        };
        let shared = Arc::new(Shared {
            nf_type: nf_type.into(),
            nf_instance: nf_instance.into(),
            triggers,
            services: config.services.iter().map(|s| s.as_str().into()).collect(),
            batch_size: config.batch_size,
            batch_bytes,
            linger: Duration::from_millis(config.linger_ms),
            bound: config.buffer_bytes,
            url: config.ingest_url(),
            client,
            state: Mutex::new(state),
            sessions: Mutex::new(SessionIds::new(SESSION_IDS)),
            wake: Notify::new(),
            stopping: AtomicBool::new(false),
            closed: AtomicBool::new(false),
        });
        let task = tokio::spawn(sender::run(shared.clone()));
        tracing::info!(url = %shared.url, triggers = ?config.triggers, services = ?config.services, "copying messages to the Data Director");
        Ok(Copier { shared, sender: Mutex::new(Some(task)) })
    }

    /// The tap for the SBI server (`SbiServer::with_tap`) and client (`SbiClient::set_tap`).
    pub fn sbi_tap(&self) -> Arc<dyn MessageTap> {
        self.shared.clone()
    }

    /// The tap for a Diameter node (`DiameterNode::set_tap`).
    pub fn diameter_tap(&self) -> Arc<dyn DiameterTap> {
        self.shared.clone()
    }

    /// `dd_copies_total{trigger}`, `dd_copies_dropped_total{reason}`,
    /// `dd_copy_batches_total{result}` and `dd_copy_buffer_bytes` on the NF's `/metrics`.
    pub fn register_metrics(&self, registry: &mut Registry) {
        registry.register_collector(Box::new(metrics::Collector(self.shared.clone())));
    }

    /// Bytes of copies the Data Director has not taken yet (`dd_copy_buffer_bytes`).
    pub fn buffered_bytes(&self) -> usize {
        self.shared.lock().buffered()
    }

    /// Sends what is buffered, waiting at most `grace` for the Data Director to take it; what
    /// is left then, and any later copy, is dropped and counted (`reason="stopped"`).
    pub async fn stop(&self, grace: Duration) {
        self.shared.stopping.store(true, Ordering::Release);
        self.shared.wake.notify_one();
        let task = self.sender.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(task) = task {
            let abort = task.abort_handle();
            if tokio::time::timeout(grace, task).await.is_err() {
                abort.abort();
            }
        }
        self.shared.closed.store(true, Ordering::Release);
        let mut st = self.shared.lock();
        let left = st.count + st.sealed.iter().map(|s| s.copies).sum::<usize>() + st.in_flight.1;
        st.dropped.stopped += left as u64;
        st.buf.clear();
        st.count = 0;
        st.sealed.clear();
        st.sealed_bytes = 0;
        st.in_flight = (0, 0);
        drop(st);
        if left > 0 {
            tracing::warn!(
                copies = left,
                "the Data Director did not take every buffered copy before the stop: dropped"
            );
        }
    }
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wants(&self, t: TriggerPoint) -> bool {
        self.triggers[t as usize - 1]
    }

    fn serves(&self, service: &str) -> bool {
        self.services.is_empty() || self.services.iter().any(|s| **s == *service)
    }

    /// Appends one copy to the current batch (the request path's only lock).
    fn push<'h, I>(&self, mut meta: CopyMeta<'_>, headers: I, body: &[u8], transaction: &mut u64)
    where
        I: IntoIterator<Item = (&'h [u8], &'h [u8])>,
        I::IntoIter: Clone,
    {
        let mut st = self.lock();
        if self.closed.load(Ordering::Relaxed) {
            st.dropped.stopped += 1;
            return;
        }
        if *transaction == 0 {
            st.next_transaction += 1;
            *transaction = st.next_transaction;
        }
        meta.transaction = *transaction;
        meta.sequence = st.next_sequence;
        // Encoded first and taken back when over the bound: sizing it beforehand would walk
        // the header list once more for every copy kept, to spare the rare one dropped.
        let at = st.buf.len();
        if envelope::encode_framed(&meta, headers, body, &mut st.buf).is_err() {
            st.dropped.too_long += 1;
            return;
        }
        if st.buffered() > self.bound {
            st.buf.truncate(at);
            st.dropped.buffer_full += 1;
            return;
        }
        st.next_sequence += 1;
        st.copies[meta.trigger as usize - 1] += 1;
        st.count += 1;
        let mut wake = false;
        if st.count == 1 {
            st.opened = Some(Instant::now());
            wake = st.sender == SenderState::Idle;
        }
        let full = st.buf.len() >= self.batch_bytes;
        if full || (st.count >= self.batch_size && st.sealed.is_empty()) {
            st.seal();
            wake = st.sender != SenderState::Posting;
        }
        if wake {
            // Told once: the sender sets its state again when it looks next.
            st.sender = SenderState::Posting;
        }
        drop(st);
        if wake {
            self.wake.notify_one();
        }
    }
}

fn nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// A short string formatted on the stack (an address), cut at its capacity.
struct StackStr<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> StackStr<N> {
    fn new() -> Self {
        StackStr { buf: [0; N], len: 0 }
    }
    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or_default()
    }
    /// An ASCII byte; dropped when full, like `write_str`'s overflow.
    fn push(&mut self, b: u8) {
        if self.len < N {
            self.buf[self.len] = b;
            self.len += 1;
        }
    }
    fn push_decimal(&mut self, mut v: u32) {
        let mut digits = [0u8; 10];
        let mut n = 0;
        loop {
            digits[n] = b'0' + (v % 10) as u8;
            n += 1;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        for &d in digits[..n].iter().rev() {
            self.push(d);
        }
    }
}

impl<const N: usize> std::fmt::Write for StackStr<N> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        if end > N {
            return Err(std::fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// `ip:port`, by hand for IPv4 (`fmt` took ~5 % of a copy's cost, two per exchange).
fn format_addr(addr: SocketAddr) -> StackStr<64> {
    let mut s = StackStr::new();
    match addr {
        SocketAddr::V4(v4) => {
            for (i, octet) in v4.ip().octets().into_iter().enumerate() {
                if i > 0 {
                    s.push(b'.');
                }
                s.push_decimal(u32::from(octet));
            }
            s.push(b':');
            s.push_decimal(u32::from(v4.port()));
        }
        // An IPv6 address with its port and scope fits in 64 bytes.
        SocketAddr::V6(_) => {
            let _ = write!(s, "{addr}");
        }
    }
    s
}

// === SBI ===

fn trigger_of(t: sbi_tap::TriggerPoint) -> TriggerPoint {
    match t {
        sbi_tap::TriggerPoint::IngressRequest => TriggerPoint::IngressRequest,
        sbi_tap::TriggerPoint::IngressResponse => TriggerPoint::IngressResponse,
        sbi_tap::TriggerPoint::EgressRequest => TriggerPoint::EgressRequest,
        sbi_tap::TriggerPoint::EgressResponse => TriggerPoint::EgressResponse,
    }
}

/// The service a path belongs to: its first segment (`npcf-smpolicycontrol`).
fn service_of(path: &str) -> &str {
    path.trim_start_matches('/').split('/').next().unwrap_or("")
}

impl MessageTap for Shared {
    fn copy(&self, m: &MessageCopy<'_>, ex: &mut Exchange) {
        let trigger = trigger_of(m.trigger);
        let path = m.uri.path();
        let service = service_of(path);
        if !self.serves(service) {
            return;
        }
        let path_and_query = m.uri.path_and_query().map_or(path, |p| p.as_str());
        let peer = match m.peer {
            Peer::Addr(a) => format_addr(a),
            Peer::Authority(a) => {
                let mut s = StackStr::new();
                let _ = s.write_str(a);
                s
            }
            Peer::Unknown => StackStr::new(),
        };
        let mut meta = CopyMeta {
            trigger,
            protocol: Protocol::Http2,
            timestamp_ns: nanos(m.answer_at.unwrap_or(m.request_at)),
            sequence: 0,
            transaction: 0,
            stream_id: m.stream_id,
            status: m.status.map_or(0, |s| u32::from(s.as_u16())),
            nf_type: &self.nf_type,
            nf_instance: &self.nf_instance,
            service,
            operation: m.operation,
            method: m.method.as_str(),
            path: path_and_query,
            peer: peer.as_str(),
            supi: "",
            gpsi: "",
            session_id: "",
        };
        let mut transaction = ex.transaction;
        if trigger.is_request() {
            let ids = extract::path_ids(path_and_query);
            let supi = ids.supi.or_else(|| extract::json_string(m.body, extract::JsonName::Supi));
            let gpsi = ids.gpsi.or_else(|| extract::json_string(m.body, extract::JsonName::Gpsi));
            let answer = match trigger {
                TriggerPoint::IngressRequest => TriggerPoint::IngressResponse,
                _ => TriggerPoint::EgressResponse,
            };
            if self.wants(answer) {
                ex.supi = supi.map(Box::from);
                ex.gpsi = gpsi.map(Box::from);
                ex.session_id = ids.session_id.map(Box::from);
            }
            if !self.wants(trigger) {
                return;
            }
            meta.supi = supi.unwrap_or("");
            meta.gpsi = gpsi.unwrap_or("");
            meta.session_id = ids.session_id.unwrap_or("");
            let pseudo = request_pseudo_headers(m);
            self.push(meta, headers(&pseudo[..], m.headers), m.body, &mut transaction);
        } else {
            if !self.wants(trigger) {
                return;
            }
            let created = m.status == Some(http::StatusCode::CREATED);
            let location = || {
                let loc = m.headers.get(http::header::LOCATION)?.to_str().ok()?;
                extract::location_session(loc)
            };
            meta.supi = ex
                .supi
                .as_deref()
                .or_else(|| extract::json_string(m.body, extract::JsonName::Supi))
                .unwrap_or("");
            meta.gpsi = ex
                .gpsi
                .as_deref()
                .or_else(|| extract::json_string(m.body, extract::JsonName::Gpsi))
                .unwrap_or("");
            meta.session_id = ex
                .session_id
                .as_deref()
                .or_else(|| if created { location() } else { None })
                .unwrap_or("");
            let status = m.status.as_ref().map_or("", |s| s.as_str());
            let pseudo: [(&[u8], &[u8]); 1] = [(b":status", status.as_bytes())];
            self.push(meta, headers(&pseudo, m.headers), m.body, &mut transaction);
        }
        ex.transaction = transaction;
    }
}

/// `:method`, `:scheme`, `:authority`, `:path` of a request, those it knows; a served HTTP/1.1
/// request has no scheme (and its authority is its Host header, already in the list).
fn request_pseudo_headers<'a>(m: &MessageCopy<'a>) -> PseudoHeaders<'a> {
    let mut p = PseudoHeaders { list: [(&[], &[]); 4], len: 0 };
    p.push(b":method", m.method.as_str().as_bytes());
    if let Some(s) = m.uri.scheme_str() {
        p.push(b":scheme", s.as_bytes());
    }
    if let Some(a) = m.uri.authority() {
        p.push(b":authority", a.as_str().as_bytes());
    }
    let path = m.uri.path_and_query().map_or(m.uri.path(), |p| p.as_str());
    p.push(b":path", path.as_bytes());
    p
}

struct PseudoHeaders<'a> {
    list: [(&'a [u8], &'a [u8]); 4],
    len: usize,
}

impl<'a> PseudoHeaders<'a> {
    fn push(&mut self, name: &'static [u8], value: &'a [u8]) {
        self.list[self.len] = (name, value);
        self.len += 1;
    }
}

impl<'a> std::ops::Deref for PseudoHeaders<'a> {
    type Target = [(&'a [u8], &'a [u8])];
    fn deref(&self) -> &Self::Target {
        &self.list[..self.len]
    }
}

/// The pseudo-headers, then the header list as the NF has it.
fn headers<'a>(
    pseudo: &'a [(&'a [u8], &'a [u8])],
    map: &'a http::HeaderMap,
) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + Clone {
    pseudo.iter().copied().chain(HeaderList { map, inner: map.iter(), taken: 0 })
}

/// A header map's entries as an iterator that can be cloned (the encoder walks the list more
/// than once; `http`'s own iterator is not `Clone`).
struct HeaderList<'a> {
    map: &'a http::HeaderMap,
    inner: http::header::Iter<'a, http::HeaderValue>,
    taken: usize,
}

impl<'a> Iterator for HeaderList<'a> {
    type Item = (&'a [u8], &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        let (n, v) = self.inner.next()?;
        self.taken += 1;
        Some((n.as_str().as_bytes(), v.as_bytes()))
    }
}

impl Clone for HeaderList<'_> {
    fn clone(&self) -> Self {
        let mut inner = self.map.iter();
        for _ in 0..self.taken {
            inner.next();
        }
        HeaderList { map: self.map, inner, taken: self.taken }
    }
}

// === Diameter ===

/// The application's name as configuration and filters use it.
fn application_name(id: u32) -> &'static str {
    use diameter::dictionary::{gx, rx, sh, sy};
    match id {
        gx::APP_ID => "Gx",
        rx::APP_ID => "Rx",
        sy::APP_ID => "Sy",
        gx::SD_APP_ID => "Sd",
        sh::APP_ID => "Sh",
        other => diameter::dictionary::application(other).map_or("", |a| a.name),
    }
}

/// (method, operation): the command's short name (`CCR`, `CCA`) and the procedure, the same for
/// a request and its answer (`CCR-I` for a CCR-I and its CCA).
fn command_names(ids: &extract::DiameterIds<'_>) -> (&'static str, &'static str) {
    let Some(c) = diameter::dictionary::command(ids.application_id, ids.command_code) else {
        return ("", "");
    };
    let method = if ids.request { c.abbrev.0 } else { c.abbrev.1 };
    let operation = match (c.abbrev.0, ids.cc_request_type) {
        ("CCR", Some(1)) => "CCR-I",
        ("CCR", Some(2)) => "CCR-U",
        ("CCR", Some(3)) => "CCR-T",
        ("CCR", Some(4)) => "CCR-E",
        (request, _) => request,
    };
    (method, operation)
}

/// The same for a request and its answer at this NF: the connection, the hop-by-hop and
/// end-to-end ids and which side originated it, mixed (SplitMix64) into 63 bits with the top
/// bit set, apart from the SBI transactions (a counter from 1).
fn diameter_transaction(connection: u64, hbh: u32, e2e: u32, ingress: bool) -> u64 {
    let mut x = connection
        ^ (u64::from(hbh) << 32 | u64::from(e2e)).rotate_left(17)
        ^ u64::from(ingress) << 63;
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (x ^ (x >> 31)) | 1 << 63
}

/// Sessions remembered per generation by [`SessionIds`].
const SESSION_IDS: usize = 65_536;

/// The SUPI and GPSI a Diameter session's messages named (a CCR-I's or AAR's Subscription-Id,
/// Sh's User-Identity MSISDN), by Session-Id, given to its messages that name none: the
/// answers, CCR-U and CCR-T, RAR, STR. Without it a Data Director filter sampling by SUPI sees a
/// CCR-I with its SUPI and its CCA without (sampled by session instead), and lets one through
/// without the other. Two generations of at most `per_generation` sessions each, the older
/// dropped when the newer is full, so the memory is bounded and a session that was heard of in
/// neither is forgotten; a session ends at the answer to its CCR-T or STR, or, on Sh (one
/// request per session), at its answer.
struct SessionIds {
    current: HashMap<Box<str>, Subscriber>,
    previous: HashMap<Box<str>, Subscriber>,
    per_generation: usize,
}

#[derive(Clone, Default)]
struct Subscriber {
    supi: Option<Arc<str>>,
    gpsi: Option<Arc<str>>,
}

impl SessionIds {
    fn new(per_generation: usize) -> Self {
        SessionIds { current: HashMap::new(), previous: HashMap::new(), per_generation }
    }

    /// What `session` named before, after learning what this message names (`supi`, `gpsi`);
    /// forgets the session when `ends`.
    fn recall(
        &mut self,
        session: &str,
        supi: Option<&str>,
        gpsi: Option<&str>,
        ends: bool,
    ) -> Subscriber {
        if !self.current.contains_key(session) {
            match self.previous.remove_entry(session) {
                Some((k, v)) => self.insert(k, v),
                None if supi.is_some() || gpsi.is_some() => {
                    self.insert(session.into(), Subscriber::default())
                }
                None => return Subscriber::default(),
            }
        }
        let Some(known) = self.current.get_mut(session) else { return Subscriber::default() };
        for (slot, new) in [(&mut known.supi, supi), (&mut known.gpsi, gpsi)] {
            if let Some(n) = new.filter(|n| slot.as_deref() != Some(*n)) {
                *slot = Some(n.into());
            }
        }
        if ends {
            return self.current.remove(session).unwrap_or_default();
        }
        known.clone()
    }

    fn insert(&mut self, session: Box<str>, ids: Subscriber) {
        if self.current.len() >= self.per_generation {
            self.previous = std::mem::take(&mut self.current);
        }
        self.current.insert(session, ids);
    }
}

impl DiameterTap for Shared {
    fn copy(&self, m: &TappedMessage<'_>) {
        let Some(ids) = extract::diameter_ids(m.wire) else { return };
        // A request the node received and the answer it sent are the ingress pair.
        let ingress = (m.direction == Direction::Received) == ids.request;
        let trigger = match (ingress, ids.request) {
            (true, true) => TriggerPoint::IngressRequest,
            (true, false) => TriggerPoint::IngressResponse,
            (false, true) => TriggerPoint::EgressRequest,
            (false, false) => TriggerPoint::EgressResponse,
        };
        let service = application_name(ids.application_id);
        if !self.serves(service) {
            return;
        }
        let (method, operation) = command_names(&ids);
        let mut supi_buf = [0u8; 80];
        let mut gpsi_buf = [0u8; 80];
        let mut supi = ids.imsi.and_then(|i| extract::prefixed(&mut supi_buf, "imsi-", i));
        let mut gpsi = ids.msisdn.and_then(|g| extract::msisdn_gpsi(&mut gpsi_buf, g));
        let known = match ids.session_id {
            Some(session) => {
                let ends =
                    !ids.request && (matches!(operation, "CCR-T" | "STR") || service == "Sh");
                self.sessions
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .recall(session, supi, gpsi, ends)
            }
            None => Subscriber::default(),
        };
        // Learned above even when this trigger point is not copied: its answer may be.
        if !self.wants(trigger) {
            return;
        }
        supi = supi.or(known.supi.as_deref());
        gpsi = gpsi.or(known.gpsi.as_deref());
        let peer = format_addr(m.peer_addr);
        let meta = CopyMeta {
            trigger,
            protocol: Protocol::Diameter,
            timestamp_ns: nanos(SystemTime::now()),
            sequence: 0,
            transaction: 0,
            stream_id: ids.hop_by_hop,
            status: if ids.request { 0 } else { ids.result.unwrap_or(0) },
            nf_type: &self.nf_type,
            nf_instance: &self.nf_instance,
            service,
            operation,
            method,
            path: "",
            peer: peer.as_str(),
            supi: supi.unwrap_or(""),
            gpsi: gpsi.unwrap_or(""),
            session_id: ids.session_id.unwrap_or(""),
        };
        let mut transaction =
            diameter_transaction(m.connection, ids.hop_by_hop, ids.end_to_end, ingress);
        self.push(meta, std::iter::empty(), m.wire, &mut transaction);
    }
}

#[cfg(test)]
mod tests;
