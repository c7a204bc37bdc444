//! The copy source simulator: an NF with message copy on, as its copier would feed the Data
//! Director. Open loop: transaction `i` of a source is due at `start + i / (mps / trigger
//! points)`, whatever the Data Director does, and each of its copies carries that time as its
//! timestamp (when the NF saw the message), so the end-to-end latency a consumer measures holds
//! the copier's batching, any wait the Data Director asked for, ingest, the topics and the feed.
//!
//! Copies leave in batches (`POST /dd-ingest/v1/copies`, framed envelopes) over a few HTTP/2
//! connections: a batch leaves when it holds `batch` copies or when its oldest copy has waited
//! `linger_ms`, whichever comes first, with at most `max_in_flight` POSTs outstanding.
//!
//! Cheap enough for 200,000+ copies a second from one core: a batch buffer is filled once with
//! a source's transaction laid out `batch / trigger points` times (crate::dd::message), and a
//! send patches in place only what differs per copy: the timestamp, the sequence (per NF
//! instance), the transaction id and the subscriber's MSIN (in the SUPI, the GPSI and the body).
//! A buffer comes back to its source's pool once its POST is answered (the HTTP/2 client holds
//! no reference to it by then) and is patched again for a later batch. Only a batch cut short
//! by `linger_ms` (low rates) copies its part into a buffer of its own.
//!
//! A 503 is the Data Director shedding load: the source waits `Retry-After` (every batch of it:
//! an NF's copier pauses, keeping what it copies meanwhile in a bounded buffer, `buffer_copies`;
//! beyond it the oldest copies are dropped and counted) and sends the refused batch again. Any
//! other answer but 204, a timeout or a lost connection fails the batch (counted, not resent).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::{Bytes, BytesMut};
use dd_client::envelope::CONTENT_TYPE;
use http::{HeaderValue, Method};
use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::message::{EnvelopeTemplate, MSIN_DIGITS, SEQUENCE_AT, TIMESTAMP_AT, TRANSACTION_AT};
use crate::h2client::{Call, Failure, H2Pool, Want};
use crate::pace::Pacer;
use crate::sched::Rng;
use crate::stats;

/// The ingest API's path.
pub const INGEST_PATH: &str = "/dd-ingest/v1/copies";
/// A send this far behind its time counts as late (as in crate::engine).
const LATE: Duration = Duration::from_millis(10);
/// Sequences of source `i` start at `(i + 1) << SEQUENCE_BITS`, so a consumer tells the sources
/// apart by a copy's sequence alone.
pub const SEQUENCE_BITS: u32 = 40;
/// The longest `Retry-After` honoured; a longer one is taken as this.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

/// One transaction's envelopes laid out back to back, and where each send patches them.
#[derive(Debug, Clone)]
pub struct Layout {
    transaction: Vec<u8>,
    /// Start of each envelope's frame in `transaction`.
    starts: Vec<usize>,
    /// Offsets of the MSIN digits, relative to the transaction's start.
    msin_at: Vec<usize>,
}

/// What differs per transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxFields {
    pub timestamp_ns: u64,
    /// Sequence of its first copy; the next copies follow.
    pub first_sequence: u64,
    pub transaction: u64,
    pub msin: u64,
}

impl Layout {
    pub fn new(templates: &[EnvelopeTemplate]) -> Layout {
        let mut transaction = Vec::new();
        let mut starts = Vec::new();
        let mut msin_at = Vec::new();
        for t in templates {
            starts.push(transaction.len());
            msin_at.extend(t.msin_at.iter().map(|at| transaction.len() + at));
            transaction.extend_from_slice(&t.framed);
        }
        Layout { transaction, starts, msin_at }
    }

    /// Bytes of one transaction's frames.
    pub fn stride(&self) -> usize {
        self.transaction.len()
    }

    /// Copies per transaction (its trigger points).
    pub fn copies(&self) -> usize {
        self.starts.len()
    }

    /// `n` transactions back to back, to be patched.
    pub fn fill(&self, n: usize) -> BytesMut {
        let mut b = BytesMut::with_capacity(n * self.stride());
        for _ in 0..n {
            b.extend_from_slice(&self.transaction);
        }
        b
    }

    /// Writes `f` into the `i`-th transaction of `buf` (a buffer made by [`Layout::fill`]).
    pub fn patch(&self, buf: &mut [u8], i: usize, f: &TxFields) {
        let base = i * self.stride();
        let tx = &mut buf[base..base + self.stride()];
        for (j, start) in self.starts.iter().enumerate() {
            let e = &mut tx[*start..];
            e[TIMESTAMP_AT..TIMESTAMP_AT + 8].copy_from_slice(&f.timestamp_ns.to_be_bytes());
            let seq = f.first_sequence + j as u64;
            e[SEQUENCE_AT..SEQUENCE_AT + 8].copy_from_slice(&seq.to_be_bytes());
            e[TRANSACTION_AT..TRANSACTION_AT + 8].copy_from_slice(&f.transaction.to_be_bytes());
        }
        let mut digits = [b'0'; MSIN_DIGITS];
        let mut v = f.msin;
        for d in digits.iter_mut().rev() {
            *d = b'0' + (v % 10) as u8;
            v /= 10;
        }
        for at in &self.msin_at {
            tx[*at..*at + MSIN_DIGITS].copy_from_slice(&digits);
        }
    }
}

/// Copies (and batches) of one source, counted.
#[derive(Debug, Default)]
pub struct Tally {
    /// Copies due.
    pub offered: AtomicU64,
    /// Copies put in a POST (once, however often it was sent again).
    pub sent: AtomicU64,
    /// Copies answered 204: durable in their NF topic.
    pub accepted: AtomicU64,
    /// Copies refused with 503, each time.
    pub refused: AtomicU64,
    pub refused_batches: AtomicU64,
    /// Copies of batches that failed for good (another status, a timeout, a lost connection).
    pub failed: AtomicU64,
    /// Copies dropped from the bounded buffer while the Data Director asked the source to wait.
    pub dropped: AtomicU64,
    pub posts: AtomicU64,
}

fn add(what: &AtomicU64, n: u64) {
    what.fetch_add(n, Ordering::Relaxed);
}

/// Which count of a [`Tally`].
type Which = fn(&Tally) -> &AtomicU64;

/// One second of a source (by due second for `offered`, by answer second for the rest).
#[derive(Debug, Default, Clone, Copy)]
pub struct SourceSecond {
    pub offered: u64,
    pub accepted: u64,
    pub refused: u64,
    pub failed: u64,
}

/// A simulated NF: its plan, its connections, its counts.
pub struct Source {
    pub name: String,
    pub nf_type: String,
    pub message_bytes: usize,
    pub trigger_points: Vec<String>,
    /// Copies per second this run.
    pub rate: f64,
    layout: Layout,
    batch_tx: usize,
    linger: Duration,
    index: usize,
    max_in_flight: usize,
    buffer_tx: u64,
    supi_first: u64,
    supi_count: u64,
    seed: u64,
    conns: H2Pool,
    content_type: HeaderValue,
    /// Full batch buffers whose POST is answered, ready to be patched again.
    pool: Mutex<Vec<BytesMut>>,
    /// Until when (ns after the start) the Data Director asked this source to wait.
    paused_until_ns: AtomicU64,
    pub all: Tally,
    /// Copies due in the measured window, and what became of them.
    pub window: Tally,
    /// POST latency (µs, from when the batch was due to leave to its 204) of the window.
    pub post_latency: Mutex<hdrhistogram::Histogram<u64>>,
    pub seconds: Mutex<Vec<SourceSecond>>,
    in_flight: AtomicUsize,
    pub peak_in_flight: AtomicUsize,
}

/// What a source needs to be built.
pub struct SourceSpec<'a> {
    pub def: &'a super::config::CopySource,
    pub dd: &'a super::config::DdScenario,
    pub index: usize,
    /// Copies per second this run.
    pub rate: f64,
    pub base_url: &'a str,
    pub generators: &'a crate::scenario::Generators,
    pub timeout: Duration,
}

/// The dispatcher's own account.
#[derive(Debug, Default, Clone, Copy)]
pub struct Dispatched {
    /// Batches that waited for a free POST slot.
    pub slot_waits: u64,
    /// Batches that left more than 10 ms after their time.
    pub late_sends: u64,
    pub max_lag: Duration,
    /// Batches due but never sent: the run ended with every slot still taken.
    pub unsent: u64,
}

/// The run's clock: its start, the UNIX time then, the measured window.
#[derive(Debug, Clone, Copy)]
pub struct RunClock {
    pub start: Instant,
    pub epoch_ns: u64,
    pub measure_from: Duration,
    pub measure_to: Duration,
}

impl RunClock {
    /// UNIX nanoseconds at `at`, on the run's monotonic clock (what the copies carry and the
    /// consumers compare with, so a step of the wall clock during the run changes nothing).
    pub fn epoch_ns_at(&self, at: Instant) -> u64 {
        let d = at.saturating_duration_since(self.start).as_nanos() as u64;
        self.epoch_ns + d
    }

    pub fn measured(&self, at: Instant) -> bool {
        let d = at.saturating_duration_since(self.start);
        d >= self.measure_from && d < self.measure_to
    }

    pub fn second(&self, at: Instant) -> usize {
        at.saturating_duration_since(self.start).as_secs() as usize
    }
}

impl Source {
    pub fn new(spec: SourceSpec) -> Result<Source> {
        let def = spec.def;
        let instance = format!("{:08x}-0000-4000-8000-{:012x}", spec.index + 1, spec.index + 1);
        let g = spec.generators;
        let id = super::message::Identity {
            nf_type: &def.nf_type,
            nf_instance: &instance,
            supi_prefix: &format!("imsi-{}", g.supi_prefix),
            gpsi_prefix: &format!("msisdn-{}", g.gpsi_prefix),
        };
        let templates = super::message::transaction(&id, &def.trigger_points(), def.message_bytes)
            .with_context(|| format!("source {}", def.name))?;
        let layout = Layout::new(&templates);
        let k = layout.copies();
        Ok(Source {
            name: def.name.clone(),
            nf_type: def.nf_type.clone(),
            message_bytes: def.message_bytes,
            trigger_points: def.trigger_points.clone(),
            rate: spec.rate,
            batch_tx: (spec.dd.batch / k).max(1),
            linger: Duration::from_secs_f64(spec.dd.linger_ms / 1000.0),
            index: spec.index,
            max_in_flight: spec.dd.max_in_flight,
            buffer_tx: (spec.dd.buffer_copies / k as u64).max(1),
            supi_first: g.supi_first,
            supi_count: g.supi_count.max(1),
            seed: g.seed ^ (spec.index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            conns: H2Pool::new(spec.base_url, spec.dd.connections, spec.timeout)?,
            content_type: HeaderValue::from_static(CONTENT_TYPE),
            pool: Mutex::new(Vec::new()),
            paused_until_ns: AtomicU64::new(0),
            all: Tally::default(),
            window: Tally::default(),
            post_latency: Mutex::new(stats::new_hist()),
            seconds: Mutex::new(Vec::new()),
            in_flight: AtomicUsize::new(0),
            peak_in_flight: AtomicUsize::new(0),
            layout,
        })
    }

    /// Opens the connections (before the load: setup is not in the first batch's time).
    pub async fn open(&self) -> Result<()> {
        self.conns.open().await
    }

    /// The first sequence of this source's copies.
    pub fn sequence_base(&self) -> u64 {
        (self.index as u64 + 1) << SEQUENCE_BITS
    }

    /// Connections used.
    pub fn connections(&self) -> usize {
        self.conns.active()
    }

    fn second(&self, idx: usize, f: impl FnOnce(&mut SourceSecond)) {
        let mut s = self.seconds.lock().unwrap();
        if s.len() <= idx {
            s.resize(idx + 1, SourceSecond::default());
        }
        f(&mut s[idx]);
    }

    /// Sends this source's copies for `secs` from `clock.start`; returns once every batch is
    /// answered (or given up on at `secs` plus `timeout`).
    pub async fn run(
        self: Arc<Self>,
        clock: RunClock,
        secs: f64,
        timeout: Duration,
    ) -> Result<Dispatched> {
        let k = self.layout.copies() as u64;
        let tx_rate = self.rate / k as f64;
        // Every transaction due before `secs` (the last one's due time is below it).
        let total_tx = (secs * tx_rate - 1e-9).ceil().max(0.0) as u64;
        let start = clock.start;
        let due = |i: u64| start + Duration::from_secs_f64(i as f64 / tx_rate);
        let sem = Arc::new(Semaphore::new(self.max_in_flight));
        let give_up = start + Duration::from_secs_f64(secs) + timeout;
        let mut pacer = Pacer::new().context("the source's timer")?;
        let mut rng = Rng::new(self.seed);
        let mut d = Dispatched::default();
        let mut next = 0u64;
        let stride = self.layout.stride();
        while next < total_tx {
            let cap = self.batch_tx as u64;
            let full_at = due((next + cap - 1).min(total_tx - 1));
            let mut at = full_at.min(due(next) + self.linger);
            let paused = start + Duration::from_nanos(self.paused_until_ns.load(Ordering::Relaxed));
            at = at.max(paused);
            pacer.until(at).await?;
            let permit = match sem.clone().try_acquire_owned() {
                Ok(p) => Some(p),
                Err(_) => {
                    d.slot_waits += 1;
                    tokio::time::timeout_at(give_up, sem.clone().acquire_owned())
                        .await
                        .ok()
                        .transpose()?
                }
            };
            let now = Instant::now();
            let Some(permit) = permit.filter(|_| now < give_up) else {
                d.unsent = (total_tx - next).div_ceil(cap);
                let copies = (total_tx - next) * k;
                self.count(&clock, due(next), |t| &t.offered, copies);
                self.count(&clock, due(next), |t| &t.failed, copies);
                break;
            };
            let lag = now.saturating_duration_since(at);
            if lag > LATE {
                d.late_sends += 1;
            }
            d.max_lag = d.max_lag.max(lag);
            // Transactions due by now: a source held back (a wait the Data Director asked for,
            // or no free slot) has more than a batch waiting, and keeps at most its buffer.
            let elapsed = now.saturating_duration_since(start).as_secs_f64();
            let due_now = ((elapsed * tx_rate).floor() as u64 + 1).min(total_tx);
            let mut waiting = due_now.saturating_sub(next).max(1);
            if waiting > self.buffer_tx {
                let dropped = (waiting - self.buffer_tx) * k;
                self.count_offered(&clock, due(next), dropped);
                self.count(&clock, due(next), |t| &t.dropped, dropped);
                next += waiting - self.buffer_tx;
                waiting = self.buffer_tx;
            }
            let n = waiting.min(cap);
            let first_due = due(next);
            let measured = clock.measured(first_due);
            let copies = n * k;
            self.count_offered(&clock, first_due, copies);
            self.count(&clock, first_due, |t| &t.sent, copies);
            let mut buf =
                self.pool.lock().unwrap().pop().unwrap_or_else(|| self.layout.fill(self.batch_tx));
            for i in 0..n {
                let tx = next + i;
                let at = due(tx);
                let f = TxFields {
                    timestamp_ns: clock.epoch_ns_at(at),
                    first_sequence: self.sequence_base() + tx * k,
                    transaction: self.sequence_base() + tx,
                    msin: self.supi_first + rng.below(self.supi_count),
                };
                self.layout.patch(&mut buf, i as usize, &f);
            }
            let body = if n == cap {
                buf.freeze()
            } else {
                let part = Bytes::copy_from_slice(&buf[..n as usize * stride]);
                self.pool.lock().unwrap().push(buf);
                part
            };
            next += n;
            let now_out = self.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
            self.peak_in_flight.fetch_max(now_out, Ordering::Relaxed);
            let me = self.clone();
            let full = n == cap;
            tokio::spawn(async move {
                let _permit = permit;
                me.post(body, copies, full, at, measured, clock, give_up).await;
                me.in_flight.fetch_sub(1, Ordering::Relaxed);
            });
        }
        // Every batch answered (each ends by give_up at the latest).
        let all = self.max_in_flight as u32;
        let _ =
            tokio::time::timeout_at(give_up + Duration::from_secs(2), sem.acquire_many(all)).await;
        Ok(d)
    }

    /// `n` copies due at `at` (their batch's first due time).
    fn count_offered(&self, clock: &RunClock, at: Instant, n: u64) {
        self.count(clock, at, |t| &t.offered, n);
        self.second(clock.second(at), |s| s.offered += n);
    }

    /// Adds `n` to one count of the whole run, and of the window when `at` (a due time) is in it.
    fn count(&self, clock: &RunClock, at: Instant, which: Which, n: u64) {
        self.add_to(which, clock.measured(at), n);
    }

    fn add_to(&self, which: Which, measured: bool, n: u64) {
        add(which(&self.all), n);
        if measured {
            add(which(&self.window), n);
        }
    }

    /// POSTs one batch until it is accepted, refused for good, or `give_up`; then gives its
    /// buffer back to the pool.
    #[allow(clippy::too_many_arguments)]
    async fn post(
        &self,
        body: Bytes,
        copies: u64,
        full: bool,
        left_at: Instant,
        measured: bool,
        clock: RunClock,
        give_up: Instant,
    ) {
        let count = |which: Which, n: u64| self.add_to(which, measured, n);
        loop {
            count(|t| &t.posts, 1);
            let rsp = self
                .conns
                .pick()
                .send(Call {
                    method: &Method::POST,
                    path: Bytes::from_static(INGEST_PATH.as_bytes()),
                    body: Some(body.clone()),
                    content_type: Some(&self.content_type),
                    headers: &[],
                    condition: None,
                    authorization: None,
                    want: Want::default(),
                })
                .await;
            let now = Instant::now();
            match rsp {
                Ok(a) if a.status == 204 => {
                    count(|t| &t.accepted, copies);
                    self.second(clock.second(now), |s| s.accepted += copies);
                    if measured {
                        let us = now.saturating_duration_since(left_at).as_micros() as u64;
                        stats::record(&mut self.post_latency.lock().unwrap(), us);
                    }
                    break;
                }
                Ok(a) if a.status == 503 => {
                    count(|t| &t.refused, copies);
                    count(|t| &t.refused_batches, 1);
                    self.second(clock.second(now), |s| s.refused += copies);
                    let wait = retry_after(a.retry_after.as_ref());
                    let until = now + wait;
                    let ns = until.saturating_duration_since(clock.start).as_nanos() as u64;
                    self.paused_until_ns.fetch_max(ns, Ordering::Relaxed);
                    if until >= give_up {
                        count(|t| &t.failed, copies);
                        self.second(clock.second(now), |s| s.failed += copies);
                        break;
                    }
                    tokio::time::sleep_until(until).await;
                }
                Ok(_) | Err(Failure::Timeout | Failure::NotSent | Failure::Transport) => {
                    count(|t| &t.failed, copies);
                    self.second(clock.second(now), |s| s.failed += copies);
                    break;
                }
            }
        }
        if full {
            // The client dropped its references with the answer; a buffer still shared (a
            // connection torn down mid-write) is left to drop, and the pool makes another.
            if let Ok(b) = body.try_into_mut() {
                self.pool.lock().unwrap().push(b);
            }
        }
    }

    /// Latency of the window's accepted POSTs.
    pub fn post_latency(&self) -> stats::Latency {
        stats::Latency::of(&self.post_latency.lock().unwrap())
    }
}

/// How long a 503's `Retry-After` asks to wait: delay-seconds (RFC 9110 §10.2.3; an HTTP date
/// is not sent by the Data Director and is taken as 1 s), at most [`MAX_RETRY_AFTER`].
pub fn retry_after(v: Option<&HeaderValue>) -> Duration {
    v.and_then(|v| v.to_str().ok())
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map_or(Duration::from_secs(1), Duration::from_secs)
        .min(MAX_RETRY_AFTER)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dd_client::envelope::{Copy, Frames, TriggerPoint};

    fn layout() -> Layout {
        let id = super::super::message::Identity {
            nf_type: "SCP",
            nf_instance: "i",
            supi_prefix: "imsi-00101",
            gpsi_prefix: "msisdn-33",
        };
        let t = super::super::message::transaction(
            &id,
            &[TriggerPoint::IngressRequest, TriggerPoint::EgressRequest],
            1200,
        )
        .unwrap();
        Layout::new(&t)
    }

    #[test]
    fn a_patched_batch_carries_each_copys_own_fields_and_nothing_else_changes() {
        let l = layout();
        assert_eq!((l.copies(), l.stride()), (2, 2 * (4 + 1200)));
        let mut buf = l.fill(3);
        let fields = |i: u64| TxFields {
            timestamp_ns: 1_790_000_000_000_000_000 + i * 1000,
            first_sequence: (1 << SEQUENCE_BITS) + i * 2,
            transaction: 77 + i,
            msin: 1_234_567 + i,
        };
        for i in 0..3 {
            l.patch(&mut buf, i as usize, &fields(i));
        }
        let copies: Vec<Copy> =
            Frames::new(buf.freeze()).map(|f| Copy::decode(f.unwrap()).unwrap()).collect();
        assert_eq!(copies.len(), 6);
        for (n, c) in copies.iter().enumerate() {
            let i = n as u64 / 2;
            let f = fields(i);
            assert_eq!(c.timestamp_ns, f.timestamp_ns);
            assert_eq!(c.sequence, f.first_sequence + n as u64 % 2);
            assert_eq!(c.transaction, f.transaction);
            let msin = format!("{:010}", f.msin);
            assert_eq!(c.supi(), format!("imsi-00101{msin}"));
            assert_eq!(c.gpsi(), format!("msisdn-33{msin}"));
            let body: serde_json::Value = serde_json::from_slice(&c.body()).unwrap();
            assert_eq!(body["supi"], format!("imsi-00101{msin}"));
            assert_eq!(c.record().len(), 1200);
            assert_eq!(c.nf_type(), "SCP");
            assert_eq!(
                c.trigger,
                if n % 2 == 0 { TriggerPoint::IngressRequest } else { TriggerPoint::EgressRequest }
            );
        }
        // Patching again with other values leaves no trace of the first.
        let mut again = l.fill(1);
        l.patch(&mut again, 0, &fields(9));
        l.patch(&mut again, 0, &fields(1));
        let mut once = l.fill(1);
        l.patch(&mut once, 0, &fields(1));
        assert_eq!(again, once);
    }

    /// An ingest stub: answers the first `refuse` POSTs 503 + Retry-After: 1, the rest 204;
    /// keeps each POST's arrival and its copies.
    async fn ingest_stub(refuse: usize) -> (String, Arc<Mutex<Vec<(Instant, usize, u16)>>>) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", l.local_addr().unwrap());
        let seen: Arc<Mutex<Vec<(Instant, usize, u16)>>> = Arc::default();
        let log = seen.clone();
        tokio::spawn(async move {
            loop {
                let (tcp, _) = l.accept().await.unwrap();
                let log = log.clone();
                tokio::spawn(async move {
                    let mut conn = h2::server::handshake(tcp).await.unwrap();
                    while let Some(Ok((req, mut respond))) = conn.accept().await {
                        let log = log.clone();
                        tokio::spawn(async move {
                            let mut body = req.into_body();
                            let mut bytes = Vec::new();
                            while let Some(Ok(c)) = body.data().await {
                                let _ = body.flow_control().release_capacity(c.len());
                                bytes.extend_from_slice(&c);
                            }
                            let copies = Frames::new(Bytes::from(bytes)).count();
                            let status = {
                                let mut l = log.lock().unwrap();
                                let status = if l.len() < refuse { 503 } else { 204 };
                                l.push((Instant::now(), copies, status));
                                status
                            };
                            let rsp = http::Response::builder()
                                .status(status)
                                .header("retry-after", "1")
                                .body(())
                                .unwrap();
                            let _ = respond.send_response(rsp, true);
                        });
                    }
                });
            }
        });
        (base, seen)
    }

    fn source(base: &str, buffer_copies: u64, rate: f64) -> Arc<Source> {
        let dd: super::super::config::DdScenario = toml::from_str(&format!(
            r#"
batch = 64
buffer_copies = {buffer_copies}
[[sources]]
name = "scp"
nf_type = "SCP"
mps = 1
trigger_points = ["ingress_request", "egress_request"]
message_bytes = 1200
[[feeds]]
name = "f"
kind = "tcp"
expected_share = 1.0
"#
        ))
        .unwrap();
        Arc::new(
            Source::new(SourceSpec {
                def: &dd.sources[0],
                dd: &dd,
                index: 0,
                rate,
                base_url: base,
                generators: &Default::default(),
                timeout: Duration::from_secs(5),
            })
            .unwrap(),
        )
    }

    fn clock() -> RunClock {
        RunClock {
            start: Instant::now() + Duration::from_millis(10),
            epoch_ns: 1,
            measure_from: Duration::ZERO,
            measure_to: Duration::from_secs(60),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_503_pauses_the_source_for_retry_after_then_everything_is_sent_again() {
        let (base, seen) = ingest_stub(1).await;
        let src = source(&base, 1_000_000, 2000.0);
        src.open().await.unwrap();
        let d = src.clone().run(clock(), 1.5, Duration::from_secs(5)).await.unwrap();
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let all = &src.all;
        assert_eq!(n(&all.offered), 3000, "{d:?}");
        assert_eq!((n(&all.accepted), n(&all.dropped), n(&all.failed)), (3000, 0, 0));
        assert_eq!(n(&all.refused_batches), 1);
        let seen = seen.lock().unwrap();
        let copies: usize = seen.iter().filter(|x| x.2 == 204).map(|x| x.1).sum();
        assert_eq!(copies, 3000, "the server got every copy once");
        // Nothing new left for the second Retry-After asked for, once the 503 was in: without
        // the pause a batch would leave every 5 ms (the linger at this rate).
        let times: Vec<Instant> = seen.iter().map(|x| x.0).collect();
        let gap = times.windows(2).map(|w| w[1] - w[0]).max().unwrap();
        assert!(gap >= Duration::from_millis(900), "the longest pause was {gap:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_source_told_to_wait_keeps_its_buffer_and_drops_the_oldest_beyond() {
        let (base, _) = ingest_stub(1).await;
        let src = source(&base, 200, 2000.0);
        src.open().await.unwrap();
        src.clone().run(clock(), 1.5, Duration::from_secs(5)).await.unwrap();
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let all = &src.all;
        let (offered, accepted, dropped) = (n(&all.offered), n(&all.accepted), n(&all.dropped));
        // About a second of copies (2,000) waited; 200 were kept.
        assert!(dropped > 1000, "{dropped} dropped");
        assert_eq!(accepted + dropped, offered);
        assert_eq!(offered, 3000);
    }

    #[test]
    fn retry_after_is_seconds_bounded_with_a_default() {
        assert_eq!(retry_after(Some(&HeaderValue::from_static("2"))), Duration::from_secs(2));
        assert_eq!(retry_after(Some(&HeaderValue::from_static("9999"))), MAX_RETRY_AFTER);
        assert_eq!(
            retry_after(Some(&HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"))),
            Duration::from_secs(1)
        );
        assert_eq!(retry_after(None), Duration::from_secs(1));
    }

    #[test]
    fn the_run_clock_maps_instants_to_unix_time_and_the_window() {
        let start = Instant::now();
        let c = RunClock {
            start,
            epoch_ns: 1_000,
            measure_from: Duration::from_secs(1),
            measure_to: Duration::from_secs(3),
        };
        assert_eq!(c.epoch_ns_at(start + Duration::from_micros(5)), 6_000);
        assert!(!c.measured(start + Duration::from_millis(999)));
        assert!(c.measured(start + Duration::from_secs(1)));
        assert!(!c.measured(start + Duration::from_secs(3)));
        assert_eq!(c.second(start + Duration::from_millis(2500)), 2);
    }
}
