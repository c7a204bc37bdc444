//! The third-party consumers behind the feeds: a TCP consumer (u32-length frames, optionally
//! writing back the count of frames processed: the TCP sink's `acknowledged` delivery) and an
//! HTTP/2 consumer (POST bodies of framed envelopes, answered 204 once read). Each counts the
//! copies and bytes it receives and records their end-to-end latency: its arrival minus the
//! timestamp the copy carries (when the simulated NF saw the message, crate::dd::source), on
//! the run's monotonic clock.
//!
//! A consumer reads only the envelope's fixed fields (version, timestamp, sequence): decoding
//! the whole copy would cost the kit more per message than the Data Director spends, on the
//! same two cores. The sequence tells the source (its top bits) and the copy, so each feed keeps
//! a bitmap per source of the copies seen: distinct copies delivered against copies accepted is
//! the feed's success, and a copy seen twice (at-least-once delivery after a failover) is
//! counted as a duplicate, not as another success.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::Result;
use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use super::source::{RunClock, SEQUENCE_BITS};
use crate::stats::{self, Coarse};

/// A frame longer than this is not a copy: the stream is broken and the connection is closed.
pub const MAX_FRAME: usize = 64 << 20;
/// Smallest envelope: its fixed fields (crate `dd_client::envelope`).
const FIXED: usize = 36;

/// The fields of one frame a consumer reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameInfo {
    pub timestamp_ns: u64,
    pub sequence: u64,
    /// Bytes of the frame, its length prefix included.
    pub bytes: usize,
    /// The NF type and instance of a copy whose sequence has no source bits (a real NF's, which
    /// counts from 0 per instance); read only then, so the simulated copies cost nothing more.
    pub origin: Option<Origin>,
}

/// An NF instance, as a copy names it: its NF type and instance id, kept inline (no allocation
/// per copy); longer strings are cut, which still tells apart the instances of one run.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Origin {
    nf_type: [u8; 8],
    nf_type_len: u8,
    instance: [u8; 40],
    instance_len: u8,
}

impl Origin {
    /// The NF type and instance strings at the front of an envelope's variable part.
    fn read(strings: &[u8]) -> Option<Origin> {
        let field = |at: usize| -> Option<(&[u8], usize)> {
            let len = u16::from_be_bytes(strings.get(at..at + 2)?.try_into().ok()?) as usize;
            Some((strings.get(at + 2..at + 2 + len)?, at + 2 + len))
        };
        let (nf_type, next) = field(0)?;
        let (instance, _) = field(next)?;
        let mut o = Origin { nf_type: [0; 8], nf_type_len: 0, instance: [0; 40], instance_len: 0 };
        o.nf_type_len = nf_type.len().min(8) as u8;
        o.nf_type[..o.nf_type_len as usize].copy_from_slice(&nf_type[..o.nf_type_len as usize]);
        o.instance_len = instance.len().min(40) as u8;
        o.instance[..o.instance_len as usize].copy_from_slice(&instance[..o.instance_len as usize]);
        Some(o)
    }

    fn nf_type_bytes(&self) -> &[u8] {
        &self.nf_type[..self.nf_type_len as usize]
    }

    pub fn nf_type(&self) -> String {
        String::from_utf8_lossy(self.nf_type_bytes()).into_owned()
    }

    pub fn instance(&self) -> String {
        String::from_utf8_lossy(&self.instance[..self.instance_len as usize]).into_owned()
    }
}

impl std::fmt::Debug for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.nf_type(), self.instance())
    }
}

/// Why a stream of frames cannot be read on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLong(pub usize);

/// Reads the whole frames at the front of `buf` into `out`; returns the bytes they take (a
/// frame cut short is left for the next read) and counts into `malformed` the frames that are
/// not an envelope of version 1. A length beyond [`MAX_FRAME`] is an error: nothing after it
/// can be framed.
pub fn parse_frames(
    buf: &[u8],
    out: &mut Vec<FrameInfo>,
    malformed: &mut u64,
) -> Result<usize, TooLong> {
    let mut at = 0;
    while buf.len() - at >= 4 {
        let len = u32::from_be_bytes(buf[at..at + 4].try_into().expect("4 bytes")) as usize;
        if len > MAX_FRAME {
            return Err(TooLong(len));
        }
        if buf.len() - at - 4 < len {
            break;
        }
        match envelope_info(&buf[at + 4..at + 4 + len], 4 + len) {
            Some(f) => out.push(f),
            None => *malformed += 1,
        }
        at += 4 + len;
    }
    Ok(at)
}

/// The fields a consumer reads of envelope `e` (a frame's, or a Kafka record's value), which
/// took `bytes` to deliver; `None` when it is no envelope of version 1.
pub fn envelope_info(e: &[u8], bytes: usize) -> Option<FrameInfo> {
    if e.len() < FIXED || e[0] != dd_client::envelope::VERSION {
        return None;
    }
    let sequence = u64::from_be_bytes(e[12..20].try_into().expect("8 bytes"));
    Some(FrameInfo {
        timestamp_ns: u64::from_be_bytes(e[4..12].try_into().expect("8 bytes")),
        sequence,
        bytes,
        origin: if sequence >> SEQUENCE_BITS == 0 { Origin::read(&e[FIXED..]) } else { None },
    })
}

/// What a feed's consumers received, together.
pub struct FeedCounters {
    inner: Mutex<Inner>,
    /// Copies each endpoint (consumer) received.
    pub per_endpoint: Vec<AtomicU64>,
    /// Copies received, all endpoints (read without the lock, for the drain's progress).
    pub received: AtomicU64,
    clock: std::sync::OnceLock<RunClock>,
}

struct Inner {
    bytes: u64,
    /// Received in the measured window (by arrival).
    window_copies: u64,
    window_bytes: u64,
    e2e: hdrhistogram::Histogram<u64>,
    /// Arrivals per second of the run, and their E2E (µs).
    seconds: Vec<(u64, Coarse)>,
    /// Per source, a bit per copy sequence seen.
    seen: Vec<Vec<u64>>,
    distinct: Vec<u64>,
    duplicates: u64,
    malformed: u64,
    /// Copies whose sequence names no source of this run.
    foreign: u64,
    /// The sources that are real NFs: their index, NF type and the sequence their run starts
    /// at (what the NF had copied before is not the run's).
    real: Vec<(usize, String, u64)>,
    /// Per NF instance seen (a real NF's copies), its sequences seen.
    instances: Vec<(Origin, Seen)>,
}

/// The sequences seen of one NF instance.
#[derive(Default)]
struct Seen {
    bits: Vec<u64>,
    duplicates: u64,
}

impl Seen {
    /// Marks `seq`; false when it was seen before.
    fn mark(&mut self, seq: u64) -> bool {
        let (word, bit) = ((seq / 64) as usize, seq % 64);
        if self.bits.len() <= word {
            self.bits.resize((word + 1).next_power_of_two(), 0);
        }
        let new = self.bits[word] & (1 << bit) == 0;
        self.bits[word] |= 1 << bit;
        new
    }

    /// Sequences seen from `first` on, the lowest and the highest of them.
    fn from(&self, first: u64) -> (u64, Option<(u64, u64)>) {
        let (mut n, mut lo, mut hi) = (0, None, None);
        for (w, word) in self.bits.iter().enumerate().skip((first / 64) as usize) {
            let mut x = *word;
            if w as u64 == first / 64 {
                x &= !0u64 << (first % 64);
            }
            if x == 0 {
                continue;
            }
            n += u64::from(x.count_ones());
            lo.get_or_insert(w as u64 * 64 + u64::from(x.trailing_zeros()));
            hi = Some(w as u64 * 64 + 63 - u64::from(x.leading_zeros()));
        }
        (n, lo.zip(hi))
    }
}

/// What a feed received of one NF instance (a real NF's copies, counted from the sequence its
/// run started at).
#[derive(Debug, Clone, serde::Serialize)]
pub struct InstanceTotals {
    pub nf_type: String,
    pub instance: String,
    /// The sequence the run started at: the copies the NF had counted before it.
    pub first_sequence: u64,
    /// Distinct copies from `first_sequence` on, the highest sequence among them.
    pub distinct: u64,
    pub last_sequence: Option<u64>,
    /// Sequences between `first_sequence` and the highest seen that never arrived.
    pub gaps: u64,
    pub duplicates: u64,
}

/// A feed's counts at the end of the run.
#[derive(Debug, Clone)]
pub struct FeedTotals {
    pub received: u64,
    pub bytes: u64,
    pub window_copies: u64,
    pub window_bytes: u64,
    pub e2e: stats::Latency,
    /// Distinct copies per source, in source order.
    pub distinct: Vec<u64>,
    pub duplicates: u64,
    pub malformed: u64,
    pub foreign: u64,
    pub per_endpoint: Vec<u64>,
    /// Per NF instance of the real NF sources.
    pub instances: Vec<InstanceTotals>,
}

/// Copies further than this past a source's base are foreign (a bitmap must stay bounded).
const MAX_COPIES_PER_SOURCE: u64 = 1 << 34;

impl FeedCounters {
    pub fn new(endpoints: usize, sources: usize) -> Arc<FeedCounters> {
        Arc::new(FeedCounters {
            inner: Mutex::new(Inner {
                bytes: 0,
                window_copies: 0,
                window_bytes: 0,
                e2e: stats::new_hist(),
                seconds: Vec::new(),
                seen: vec![Vec::new(); sources],
                distinct: vec![0; sources],
                duplicates: 0,
                malformed: 0,
                foreign: 0,
                real: Vec::new(),
                instances: Vec::new(),
            }),
            per_endpoint: (0..endpoints).map(|_| AtomicU64::new(0)).collect(),
            received: AtomicU64::new(0),
            clock: std::sync::OnceLock::new(),
        })
    }

    /// The run's clock, once it starts; copies that arrive before are not timed.
    pub fn start(&self, clock: RunClock) {
        let _ = self.clock.set(clock);
    }

    /// Source `index` is a real NF of type `nf_type` whose copies of this run start at sequence
    /// `first` (what it had copied before): its copies count by NF instance and the NF's own
    /// sequence, not by the simulated sources' source bits.
    pub fn expect_nf(&self, index: usize, nf_type: &str, first: u64) {
        self.inner.lock().unwrap().real.push((index, nf_type.to_string(), first));
    }

    /// Records the frames one read (or one POST) brought to `endpoint`, all arrived now.
    pub fn record(&self, endpoint: usize, frames: &[FrameInfo], malformed: u64) {
        let now = Instant::now();
        let n = frames.len() as u64;
        self.per_endpoint[endpoint].fetch_add(n, Ordering::Relaxed);
        self.received.fetch_add(n, Ordering::Relaxed);
        let clock = self.clock.get();
        let mut g = self.inner.lock().unwrap();
        let inner = &mut *g;
        inner.malformed += malformed;
        let bytes: u64 = frames.iter().map(|f| f.bytes as u64).sum();
        inner.bytes += bytes;
        if let Some(c) = clock {
            let now_ns = c.epoch_ns_at(now);
            let measured = c.measured(now);
            let sec = c.second(now);
            if inner.seconds.len() <= sec {
                inner.seconds.resize_with(sec + 1, Default::default);
            }
            if measured {
                inner.window_copies += n;
                inner.window_bytes += bytes;
            }
            let (count, coarse) = &mut inner.seconds[sec];
            *count += n;
            for f in frames {
                // A timestamp ahead of this clock (another host's) counts as zero.
                let us = now_ns.saturating_sub(f.timestamp_ns) / 1000;
                coarse.record(us);
                if measured {
                    stats::record(&mut inner.e2e, us);
                }
            }
        }
        for f in frames {
            if let Some(o) = f.origin {
                let real = inner.real.iter().find(|r| r.1.as_bytes() == o.nf_type_bytes());
                let Some(first) = real.map(|r| r.2) else {
                    inner.foreign += 1;
                    continue;
                };
                if f.sequence >= first + MAX_COPIES_PER_SOURCE {
                    inner.foreign += 1;
                    continue;
                }
                let at = match inner.instances.iter().position(|(x, _)| *x == o) {
                    Some(i) => i,
                    None => {
                        inner.instances.push((o, Seen::default()));
                        inner.instances.len() - 1
                    }
                };
                // Before `first`: the NF's copies of before the run (its preload, a previous
                // run), in flight when the feed came: neither the run's nor foreign.
                let seen = &mut inner.instances[at].1;
                if !seen.mark(f.sequence) && f.sequence >= first {
                    seen.duplicates += 1;
                    inner.duplicates += 1;
                }
                continue;
            }
            let source = (f.sequence >> SEQUENCE_BITS) as usize;
            let copy = f.sequence & ((1 << SEQUENCE_BITS) - 1);
            if source == 0 || source > inner.seen.len() || copy >= MAX_COPIES_PER_SOURCE {
                inner.foreign += 1;
                continue;
            }
            let bits = &mut inner.seen[source - 1];
            let (word, bit) = ((copy / 64) as usize, copy % 64);
            if bits.len() <= word {
                bits.resize((word + 1).next_power_of_two(), 0);
            }
            if bits[word] & (1 << bit) != 0 {
                inner.duplicates += 1;
            } else {
                bits[word] |= 1 << bit;
                inner.distinct[source - 1] += 1;
            }
        }
    }

    pub fn totals(&self) -> FeedTotals {
        let g = self.inner.lock().unwrap();
        let mut distinct = g.distinct.clone();
        let mut instances = Vec::new();
        for (o, seen) in &g.instances {
            let nf_type = o.nf_type();
            let Some(&(index, _, first)) = g.real.iter().find(|r| r.1 == nf_type) else {
                continue;
            };
            let (n, range) = seen.from(first);
            distinct[index] += n;
            instances.push(InstanceTotals {
                nf_type,
                instance: o.instance(),
                first_sequence: first,
                distinct: n,
                last_sequence: range.map(|r| r.1),
                gaps: range.map_or(0, |(_, hi)| hi + 1 - first - n),
                duplicates: seen.duplicates,
            });
        }
        FeedTotals {
            instances,
            received: self.received.load(Ordering::Relaxed),
            bytes: g.bytes,
            window_copies: g.window_copies,
            window_bytes: g.window_bytes,
            e2e: stats::Latency::of(&g.e2e),
            distinct,
            duplicates: g.duplicates,
            malformed: g.malformed,
            foreign: g.foreign,
            per_endpoint: self.per_endpoint.iter().map(|c| c.load(Ordering::Relaxed)).collect(),
        }
    }

    /// Arrivals and their E2E in second `i` of the run.
    pub fn second(&self, i: usize) -> Option<(u64, Coarse)> {
        self.inner.lock().unwrap().seconds.get(i).cloned()
    }
}

/// A running consumer: its address (the feed's endpoint) and its task.
pub struct Consumer {
    pub addr: std::net::SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Consumer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts a TCP consumer on 127.0.0.1 for `endpoint` of `feed`; with `acknowledged`, it writes
/// back the u64 count of frames processed on the connection after each read that had any.
pub async fn tcp(feed: Arc<FeedCounters>, endpoint: usize, acknowledged: bool) -> Result<Consumer> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        let mut conns = tokio::task::JoinSet::new();
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            let feed = feed.clone();
            conns.spawn(read_tcp(stream, feed, endpoint, acknowledged));
        }
    });
    Ok(Consumer { addr, task })
}

async fn read_tcp(mut stream: TcpStream, feed: Arc<FeedCounters>, endpoint: usize, ack: bool) {
    let _ = stream.set_nodelay(true);
    let mut buf = BytesMut::with_capacity(1 << 20);
    let mut frames = Vec::with_capacity(1024);
    let mut processed: u64 = 0;
    loop {
        if buf.capacity() - buf.len() < 256 << 10 {
            buf.reserve(1 << 20);
        }
        match stream.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        frames.clear();
        let mut malformed = 0;
        let used = match parse_frames(&buf, &mut frames, &mut malformed) {
            Ok(n) => n,
            Err(TooLong(_)) => {
                // Nothing after it can be framed: counted as malformed (the report warns).
                feed.record(endpoint, &frames, malformed + 1);
                return;
            }
        };
        buf.advance(used);
        let got = frames.len() as u64 + malformed;
        if got == 0 {
            // A frame longer than the buffer: room for all of it.
            if buf.len() >= 4 {
                let len = u32::from_be_bytes(buf[..4].try_into().expect("4 bytes")) as usize;
                buf.reserve(4 + len);
            }
            continue;
        }
        feed.record(endpoint, &frames, malformed);
        processed += got;
        if ack && stream.write_all(&processed.to_be_bytes()).await.is_err() {
            return;
        }
    }
}

/// Starts an HTTP/2 consumer (h2c, prior knowledge) on 127.0.0.1 for `endpoint` of `feed`:
/// every POST's body is framed envelopes, answered 204 once read (400 when it is not).
pub async fn http2(feed: Arc<FeedCounters>, endpoint: usize) -> Result<Consumer> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        let mut conns = tokio::task::JoinSet::new();
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            let feed = feed.clone();
            conns.spawn(serve_h2(stream, feed, endpoint));
        }
    });
    Ok(Consumer { addr, task })
}

async fn serve_h2(stream: TcpStream, feed: Arc<FeedCounters>, endpoint: usize) {
    let _ = stream.set_nodelay(true);
    let Ok(mut conn) = h2::server::Builder::new()
        .initial_window_size(1 << 22)
        .initial_connection_window_size(1 << 26)
        .max_frame_size(1 << 20)
        .max_concurrent_streams(256)
        .handshake::<_, Bytes>(stream)
        .await
    else {
        return;
    };
    let mut requests = tokio::task::JoinSet::new();
    while let Some(Ok((req, respond))) = conn.accept().await {
        let feed = feed.clone();
        requests.spawn(answer_h2(req, respond, feed, endpoint));
        while requests.try_join_next().is_some() {}
    }
}

async fn answer_h2(
    req: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    feed: Arc<FeedCounters>,
    endpoint: usize,
) {
    let (parts, mut body) = req.into_parts();
    let mut buf = BytesMut::new();
    while let Some(chunk) = body.data().await {
        let Ok(chunk) = chunk else { return };
        let _ = body.flow_control().release_capacity(chunk.len());
        buf.extend_from_slice(&chunk);
    }
    let mut frames = Vec::new();
    let mut malformed = 0;
    let status = if parts.method != http::Method::POST {
        http::StatusCode::METHOD_NOT_ALLOWED
    } else {
        match parse_frames(&buf, &mut frames, &mut malformed) {
            Ok(n) if n == buf.len() && malformed == 0 => http::StatusCode::NO_CONTENT,
            _ => http::StatusCode::BAD_REQUEST,
        }
    };
    // A refused batch is not delivered (the sink drops it): its copies are not counted.
    match status {
        http::StatusCode::NO_CONTENT => feed.record(endpoint, &frames, 0),
        _ => feed.record(endpoint, &[], malformed.max(1)),
    }
    let rsp = http::Response::builder().status(status).body(()).expect("a plain answer");
    let _ = respond.send_response(rsp, true);
}

#[cfg(test)]
mod tests {
    use super::*;
    use dd_client::envelope::{encode_framed, CopyMeta, Protocol, TriggerPoint};

    fn framed(ts: u64, seq: u64, body: &[u8], out: &mut BytesMut) {
        framed_by("SCP", "i", ts, seq, body, out)
    }

    fn framed_by(
        nf_type: &str,
        instance: &str,
        ts: u64,
        seq: u64,
        body: &[u8],
        out: &mut BytesMut,
    ) {
        let meta = CopyMeta {
            trigger: TriggerPoint::IngressRequest,
            protocol: Protocol::Http2,
            timestamp_ns: ts,
            sequence: seq,
            transaction: 1,
            stream_id: 1,
            status: 0,
            nf_type,
            nf_instance: instance,
            service: "s",
            operation: "o",
            method: "POST",
            path: "/",
            peer: "",
            supi: "imsi-001010000000001",
            gpsi: "",
            session_id: "",
        };
        encode_framed(&meta, [], body, out).unwrap();
    }

    #[test]
    fn frames_are_read_whole_and_a_cut_tail_waits_for_the_next_read() {
        let mut b = BytesMut::new();
        framed(11, 1, b"{}", &mut b);
        let first = b.len();
        framed(22, 2, &[b'x'; 3000], &mut b);
        let whole = b.len();
        let mut out = Vec::new();
        let mut bad = 0;
        // Every cut: the whole frames before it are read, the rest waits.
        for cut in 0..=whole {
            out.clear();
            let used = parse_frames(&b[..cut], &mut out, &mut bad).unwrap();
            let want = if cut == whole {
                2
            } else if cut >= first {
                1
            } else {
                0
            };
            assert_eq!(out.len(), want, "cut at {cut}");
            assert_eq!(used, [0, first, whole][want]);
        }
        assert_eq!(bad, 0);
        assert_eq!((out[0].timestamp_ns, out[0].sequence, out[0].bytes), (11, 1, first));
        // Without source bits, a real NF's copy: its NF type and instance are read.
        assert_eq!(format!("{:?}", out[0].origin), "Some(SCP/i)");
        assert_eq!((out[1].timestamp_ns, out[1].sequence, out[1].bytes), (22, 2, whole - first));
    }

    #[test]
    fn a_frame_that_is_no_envelope_is_counted_and_skipped_and_an_absurd_length_stops() {
        let mut b = BytesMut::new();
        b.extend_from_slice(&[0, 0, 0, 3, 1, 2, 3]); // too short for an envelope
        framed(5, 6, b"{}", &mut b);
        let mut out = Vec::new();
        let mut bad = 0;
        assert_eq!(parse_frames(&b, &mut out, &mut bad).unwrap(), b.len());
        assert_eq!((bad, out.len(), out[0].sequence), (1, 1, 6));
        let mut v2 = BytesMut::new();
        framed(5, 6, b"{}", &mut v2);
        v2[4] = 2; // envelope version 2
        out.clear();
        parse_frames(&v2, &mut out, &mut bad).unwrap();
        assert_eq!((bad, out.len()), (2, 0));
        let huge = (MAX_FRAME as u32 + 1).to_be_bytes();
        assert_eq!(parse_frames(&huge, &mut out, &mut bad), Err(TooLong(MAX_FRAME + 1)));
    }

    #[test]
    fn a_feed_counts_distinct_copies_per_source_duplicates_and_foreign_ones() {
        let feed = FeedCounters::new(2, 2);
        let f = |source: u64, copy: u64| FrameInfo {
            timestamp_ns: 0,
            sequence: (source << SEQUENCE_BITS) + copy,
            bytes: 100,
            origin: None,
        };
        feed.record(0, &[f(1, 0), f(1, 1), f(2, 0)], 0);
        feed.record(1, &[f(1, 1), f(2, 70_000), f(0, 3), f(3, 1)], 1);
        let t = feed.totals();
        assert_eq!(t.distinct, vec![2, 2]);
        assert_eq!((t.duplicates, t.foreign, t.malformed), (1, 2, 1));
        assert_eq!((t.received, t.bytes), (7, 700));
        assert_eq!(t.per_endpoint, vec![3, 4]);
        // No clock yet: nothing timed, nothing in the window.
        assert_eq!((t.window_copies, t.e2e.p99_ms), (0, 0.0));
    }

    #[test]
    fn a_real_nfs_copies_count_per_instance_from_the_runs_first_sequence() {
        // Source 0 simulated, source 1 the PCF, which had copied 5 before the run.
        let feed = FeedCounters::new(1, 2);
        feed.expect_nf(1, "PCF", 5);
        let mut b = BytesMut::new();
        let pcf = "5a8f0b9e-0000-4000-8000-000000000001";
        // 4 (before the run), 5, 6, 6 again, 9: 7 and 8 missing.
        for seq in [4, 5, 6, 6, 9] {
            framed_by("PCF", pcf, 1, seq, b"{}", &mut b);
        }
        // Another instance of the same type.
        framed_by("PCF", "other", 1, 5, b"{}", &mut b);
        // An NF type no source of the run is: foreign. A simulated copy of source 0.
        framed_by("BSF", "x", 1, 0, b"{}", &mut b);
        framed(1, 1 << SEQUENCE_BITS, b"{}", &mut b);
        let (mut out, mut bad) = (Vec::new(), 0);
        parse_frames(&b, &mut out, &mut bad).unwrap();
        feed.record(0, &out, bad);
        let t = feed.totals();
        assert_eq!(t.distinct, vec![1, 4]);
        assert_eq!((t.duplicates, t.foreign, t.malformed), (1, 1, 0));
        let i = &t.instances;
        assert_eq!(i.len(), 2);
        assert_eq!((i[0].instance.as_str(), i[0].distinct, i[0].gaps), (pcf, 3, 2));
        assert_eq!((i[0].first_sequence, i[0].last_sequence, i[0].duplicates), (5, Some(9), 1));
        assert_eq!((i[1].instance.as_str(), i[1].distinct, i[1].gaps), ("other", 1, 0));
    }

    #[tokio::test]
    async fn the_tcp_consumer_times_frames_and_acknowledges_what_it_processed() {
        let feed = FeedCounters::new(1, 1);
        let start = Instant::now();
        let clock = RunClock {
            start,
            epoch_ns: 1_000_000_000,
            measure_from: std::time::Duration::ZERO,
            measure_to: std::time::Duration::from_secs(60),
        };
        feed.start(clock);
        let c = tcp(feed.clone(), 0, true).await.unwrap();
        let mut s = TcpStream::connect(c.addr).await.unwrap();
        let mut b = BytesMut::new();
        for i in 0..3 {
            // Stamped 2 ms before the run's start: at least 2 ms end to end.
            framed(1_000_000_000 - 2_000_000, (1 << SEQUENCE_BITS) + i, b"{}", &mut b);
        }
        s.write_all(&b).await.unwrap();
        let mut acked = 0;
        while acked < 3 {
            acked = s.read_u64().await.unwrap();
        }
        assert_eq!(acked, 3);
        let t = feed.totals();
        assert_eq!((t.received, t.window_copies, t.distinct[0]), (3, 3, 3));
        assert!(t.e2e.p50_ms >= 2.0 && t.e2e.max_ms < 10_000.0, "{:?}", t.e2e);
    }

    #[tokio::test]
    async fn the_http2_consumer_answers_204_for_copies_and_400_for_anything_else() {
        let feed = FeedCounters::new(1, 1);
        let c = http2(feed.clone(), 0).await.unwrap();
        let conn = crate::h2client::H2Conn::new(
            &format!("http://{}", c.addr),
            std::time::Duration::from_secs(5),
        )
        .unwrap();
        let ct = http::HeaderValue::from_static(dd_client::envelope::CONTENT_TYPE);
        let post = |body: Bytes| crate::h2client::Call {
            method: &http::Method::POST,
            path: Bytes::from_static(b"/copies"),
            body: Some(body),
            content_type: Some(&ct),
            headers: &[],
            condition: None,
            authorization: None,
            want: Default::default(),
        };
        let mut b = BytesMut::new();
        framed(1, (1 << SEQUENCE_BITS) + 5, b"{}", &mut b);
        framed(1, (1 << SEQUENCE_BITS) + 6, b"{}", &mut b);
        assert_eq!(conn.send(post(b.clone().freeze())).await.unwrap().status, 204);
        let cut = b.freeze().slice(..10);
        assert_eq!(conn.send(post(cut)).await.unwrap().status, 400);
        let t = feed.totals();
        assert_eq!((t.received, t.distinct[0], t.malformed), (2, 2, 1));
    }
}
