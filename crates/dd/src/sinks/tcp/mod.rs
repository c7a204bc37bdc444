//! The TCP feed: each envelope framed as the envelope module's stream framing (a u32 big-endian
//! length, then the envelope), written over one persistent connection per endpoint (TLS when
//! configured). A batch is framed into one buffer, kept per endpoint and reused, and written
//! with one `write_all`: no allocation per message or per batch once the buffer has grown.
//!
//! Delivery ([`Delivery`]):
//! - `written`: `Ok` once the batch is written and flushed into the socket. A consumer that dies
//!   loses what was still in our socket's send buffer, in flight, and in its own receive buffer
//!   and process (up to a few MB: the batches last reported delivered); a consumer that closes
//!   its connection is noticed (a task reads the connection for its end) and the next batch
//!   opens a new connection.
//! - `acknowledged`: the consumer writes back, on the same connection, the u64 big-endian count
//!   of frames it has processed since the connection opened; a batch is `Ok` once that count
//!   covers its last frame. Batches are written back to back (up to `max_in_flight`) without
//!   waiting for each other's acknowledgement. If the connection ends first, or the count does
//!   not come within `write_timeout_ms`, the batch fails over (and in the end is handed back to
//!   the feed's consumer, which keeps its offset and retries): nothing unacknowledged is lost,
//!   and what the consumer processed but did not acknowledge comes again.
//!
//! A failed endpoint is skipped for a backoff (see `balance`); the connection is opened again
//! when the endpoint is next picked.

pub mod config;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use futures_util::future::BoxFuture;
use rustls_pki_types::ServerName;
use sbi::InvalidParam;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{watch, Mutex, Semaphore};
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;

pub use self::config::{Delivery, TcpEndpoint, TcpSinkConfig, TcpTlsConfig};
use super::balance::Balancer;
use super::metrics::FeedMetrics;
use super::{EndpointHealth, FailureKind, Outcome, Sink, SinkError, Spread};

/// A frame buffer that grew past this (a batch of very large envelopes) is let go after use
/// rather than kept for the endpoint's lifetime.
const KEEP_BUFFER: usize = 8 << 20;

pub struct TcpSink {
    spread: Spread,
    endpoints: Vec<Endpoint>,
    tls: Option<TlsConnector>,
    permits: Semaphore,
    delivery: Delivery,
    connect_timeout: Duration,
    write_timeout: Duration,
    max_batch: usize,
}

struct Endpoint {
    address: String,
    server_name: Option<ServerName<'static>>,
    /// Held while a batch is framed and written, so frames never interleave.
    slot: Mutex<Slot>,
}

#[derive(Default)]
struct Slot {
    conn: Option<Conn>,
    buf: BytesMut,
    /// Connections opened so far, to tell a connection from its successor.
    opened: u64,
}

struct Conn {
    id: u64,
    writer: Box<dyn AsyncWrite + Send + Unpin>,
    /// Frames written on this connection (shared with its reader, which checks the
    /// consumer's count against it).
    sent: Arc<AtomicU64>,
    /// The consumer's count; closed when the reader ends (the connection is gone).
    acked: watch::Receiver<u64>,
    /// Set by the reader when the consumer's count made no sense.
    broken: Arc<AtomicBool>,
    reader: JoinHandle<()>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Conn {
    fn gone(&self) -> bool {
        self.acked.has_changed().is_err()
    }
}

impl TcpSink {
    pub(crate) fn new(
        feed: &str,
        cfg: &TcpSinkConfig,
        metrics: &FeedMetrics,
    ) -> Result<Self, Vec<InvalidParam>> {
        let tls = cfg.rustls().map_err(|e| vec![e])?.map(TlsConnector::from);
        let mut endpoints = Vec::with_capacity(cfg.endpoints.len());
        for e in &cfg.endpoints {
            let server_name = match &cfg.tls {
                Some(t) => Some(config::server_name(t, &e.address).map_err(|e| vec![e])?),
                None => None,
            };
            endpoints.push(Endpoint {
                address: e.address.clone(),
                server_name,
                slot: Mutex::new(Slot::default()),
            });
        }
        let names: Vec<String> = cfg.endpoints.iter().map(|e| e.address.clone()).collect();
        let weights: Vec<u32> = cfg.endpoints.iter().map(|e| e.weight).collect();
        Ok(TcpSink {
            spread: Spread {
                feed: feed.to_owned(),
                metrics: metrics.feed(feed, &names),
                endpoints: names,
                balancer: Balancer::new(
                    &weights,
                    cfg.balance,
                    Duration::from_millis(cfg.backoff_min_ms),
                    Duration::from_millis(cfg.backoff_max_ms),
                ),
            },
            endpoints,
            tls,
            permits: Semaphore::new(cfg.max_in_flight),
            delivery: cfg.delivery,
            connect_timeout: Duration::from_millis(cfg.connect_timeout_ms),
            write_timeout: Duration::from_millis(cfg.write_timeout_ms),
            max_batch: cfg.max_batch,
        })
    }

    async fn deliver_all(&self, batch: &[Bytes]) -> Result<(), SinkError> {
        for chunk in batch.chunks(self.max_batch) {
            let reached = Instant::now();
            let _permit = self.permits.acquire().await.expect("the semaphore is never closed");
            self.spread.deliver(chunk, reached, |i| self.attempt(i, chunk)).await?;
        }
        Ok(())
    }

    /// One try of `chunk` on endpoint `i`.
    async fn attempt(&self, i: usize, chunk: &[Bytes]) -> Outcome {
        let ep = &self.endpoints[i];
        let started = Instant::now();
        let mut slot = ep.slot.lock().await;
        if slot.conn.as_ref().is_some_and(Conn::gone) {
            slot.conn = None;
        }
        if slot.conn.is_none() {
            slot.opened += 1;
            let id = slot.opened;
            match tokio::time::timeout(self.connect_timeout, self.connect(ep, id)).await {
                Ok(Ok(conn)) => slot.conn = Some(conn),
                Ok(Err(failed)) => return failed,
                Err(_) => {
                    return Outcome::failed(
                        FailureKind::Timeout,
                        format_args!("no connection within {:?}", self.connect_timeout),
                    )
                }
            }
        }
        let Slot { conn, buf, .. } = &mut *slot;
        let c = conn.as_mut().expect("connected above");

        buf.clear();
        let len: usize = chunk.iter().map(|e| 4 + e.len()).sum();
        buf.reserve(len);
        for env in chunk {
            buf.put_u32(env.len() as u32);
            buf.put_slice(env);
        }
        // Counted before the write, so an acknowledgement that overtakes it is not taken for
        // one of frames never sent.
        let end = c.sent.fetch_add(chunk.len() as u64, Ordering::AcqRel) + chunk.len() as u64;
        let write = async {
            c.writer.write_all(buf).await?;
            c.writer.flush().await
        };
        let written = tokio::time::timeout(self.write_timeout, write).await;
        if buf.capacity() > KEEP_BUFFER {
            *buf = BytesMut::new();
        }
        match written {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                // Part of a frame may be on the wire: this connection cannot carry another.
                *conn = None;
                return Outcome::failed(FailureKind::Io, format_args!("write: {e}"));
            }
            Err(_) => {
                *conn = None;
                return Outcome::failed(
                    FailureKind::Timeout,
                    format_args!("batch not written within {:?}", self.write_timeout),
                );
            }
        }
        if self.delivery == Delivery::Written {
            return Outcome::Delivered { bytes: len };
        }

        // Acknowledged: wait with the endpoint free, so the next batch is written behind this one.
        let mut acked = c.acked.clone();
        let broken = c.broken.clone();
        let id = c.id;
        drop(slot);
        let deadline = tokio::time::Instant::from_std(started + self.write_timeout);
        let waited = tokio::time::timeout_at(deadline, acked.wait_for(|n| *n >= end))
            .await
            .map(|r| r.is_ok());
        let got = *acked.borrow();
        let failed = match waited {
            Ok(true) => return Outcome::Delivered { bytes: len },
            Ok(false) if broken.load(Ordering::Acquire) => Outcome::failed(
                FailureKind::Protocol,
                "the consumer acknowledged frames never sent, or counted backwards",
            ),
            Ok(false) => Outcome::failed(
                FailureKind::Closed,
                format_args!("connection ended with {got} of the {end} frames sent acknowledged"),
            ),
            Err(_) => Outcome::failed(
                FailureKind::Timeout,
                format_args!(
                    "{got} of the {end} frames sent acknowledged after {:?}",
                    self.write_timeout
                ),
            ),
        };
        let mut slot = ep.slot.lock().await;
        if slot.conn.as_ref().is_some_and(|c| c.id == id) {
            slot.conn = None;
        }
        failed
    }

    async fn connect(&self, ep: &Endpoint, id: u64) -> Result<Conn, Outcome> {
        let tcp = TcpStream::connect(ep.address.as_str())
            .await
            .map_err(|e| Outcome::failed(FailureKind::Connect, e))?;
        // A batch is one write; Nagle would only hold back its last segment.
        tcp.set_nodelay(true).map_err(|e| Outcome::failed(FailureKind::Connect, e))?;
        let (reader, writer): (
            Box<dyn AsyncRead + Send + Unpin>,
            Box<dyn AsyncWrite + Send + Unpin>,
        ) = match (&self.tls, &ep.server_name) {
            (Some(tls), Some(name)) => {
                let s = tls
                    .connect(name.clone(), tcp)
                    .await
                    .map_err(|e| Outcome::failed(FailureKind::Tls, e))?;
                let (r, w) = tokio::io::split(s);
                (Box::new(r), Box::new(w))
            }
            _ => {
                let (r, w) = tcp.into_split();
                (Box::new(r), Box::new(w))
            }
        };
        let sent = Arc::new(AtomicU64::new(0));
        let (tx, acked) = watch::channel(0);
        let broken = Arc::new(AtomicBool::new(false));
        let reader =
            tokio::spawn(read_back(reader, tx, sent.clone(), broken.clone(), self.delivery));
        Ok(Conn { id, writer, sent, acked, broken, reader })
    }
}

/// Reads what the consumer sends back until the connection ends: its acknowledged counts in
/// `acknowledged` mode (each a u64 big-endian total since the connection opened); in `written`
/// mode whatever it sends is dropped, and reading only tells that it closed. Ending drops `tx`,
/// which is how the writer learns the connection is gone.
async fn read_back(
    mut r: Box<dyn AsyncRead + Send + Unpin>,
    tx: watch::Sender<u64>,
    sent: Arc<AtomicU64>,
    broken: Arc<AtomicBool>,
    delivery: Delivery,
) {
    let mut buf = [0u8; 512];
    let mut word = [0u8; 8];
    let mut have = 0usize;
    loop {
        let n = match r.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if delivery == Delivery::Written {
            continue;
        }
        let mut latest = None;
        for &b in &buf[..n] {
            word[have] = b;
            have += 1;
            if have == 8 {
                have = 0;
                latest = Some(u64::from_be_bytes(word));
            }
        }
        let Some(count) = latest else { continue };
        if count < *tx.borrow() || count > sent.load(Ordering::Acquire) {
            tracing::warn!(
                count,
                before = *tx.borrow(),
                sent = sent.load(Ordering::Acquire),
                "TCP feed consumer acknowledged frames never sent, or counted backwards; closing"
            );
            broken.store(true, Ordering::Release);
            return;
        }
        tx.send_replace(count);
    }
}

impl Sink for TcpSink {
    fn deliver<'a>(&'a self, batch: &'a [Bytes]) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(self.deliver_all(batch))
    }

    fn health(&self) -> Vec<EndpointHealth> {
        self.spread.health(|i| {
            Some(match self.endpoints[i].slot.try_lock() {
                Ok(slot) => slot.conn.as_ref().is_some_and(|c| !c.gone()),
                // Busy writing a batch: connected.
                Err(_) => true,
            })
        })
    }
}
