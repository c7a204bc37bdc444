//! Third-party feed consumers for the feeds' tests, over real sockets on 127.0.0.1: a TCP
//! consumer (plain or TLS; optionally acknowledging frames as the `acknowledged` delivery mode
//! wants) and an HTTP/2 consumer (h2c or TLS) whose answers a test sets. Each records the
//! envelopes it received, can be stopped (its listener and connections closed) and started
//! again on the same port, as a consumer that goes down and comes back.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{Buf, Bytes, BytesMut};
use dd::envelope::{self, CopyMeta, Frames, Protocol, TriggerPoint};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

// === envelopes ===

/// An envelope whose `sequence` is `seq`, stamped now, its body `body_len` bytes.
pub fn envelope(seq: u64, body_len: usize) -> Bytes {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
    let meta = CopyMeta {
        trigger: TriggerPoint::IngressRequest,
        protocol: Protocol::Http2,
        timestamp_ns: now,
        sequence: seq,
        transaction: seq,
        stream_id: 1,
        status: 0,
        nf_type: "PCF",
        nf_instance: "5a7bd676-ceeb-44bb-95e0-f6a55a328b03",
        service: "npcf-smpolicycontrol",
        operation: "Npcf_SMPolicyControl_Create",
        method: "POST",
        path: "/npcf-smpolicycontrol/v1/sm-policies",
        peer: "127.0.0.1:40000",
        supi: "imsi-001010000000001",
        gpsi: "",
        session_id: "",
    };
    let headers: [(&[u8], &[u8]); 2] =
        [(b":method", b"POST"), (b"content-type", b"application/json")];
    let body = vec![b'x'; body_len];
    let mut out = BytesMut::new();
    envelope::encode(&meta, headers, &body, &mut out).unwrap();
    out.freeze()
}

/// The envelope's sequence number (bytes 12..20).
pub fn seq(env: &[u8]) -> u64 {
    u64::from_be_bytes(env[12..20].try_into().unwrap())
}

/// `n` envelopes numbered from `from`, bodies of various lengths.
pub fn envelopes(from: u64, n: u64) -> Vec<Bytes> {
    (from..from + n).map(|s| envelope(s, (s as usize * 37) % 1500)).collect()
}

// === certificates ===

/// A CA and a certificate it signed for `127.0.0.1` and `localhost`, as files.
pub struct Pki {
    pub dir: tempfile::TempDir,
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

pub fn pki() -> Pki {
    let dir = tempfile::tempdir().unwrap();
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    let p = |n: &str| dir.path().join(n);
    std::fs::write(p("ca.pem"), ca.pem()).unwrap();
    std::fs::write(p("server.pem"), cert.pem()).unwrap();
    std::fs::write(p("server.key"), key.serialize_pem()).unwrap();
    Pki { ca: p("ca.pem"), cert: p("server.pem"), key: p("server.key"), dir }
}

fn acceptor(pki: &Pki) -> TlsAcceptor {
    let cfg = sbi::tls::TlsConfig::new(pki.cert.clone(), pki.key.clone(), None);
    TlsAcceptor::from(sbi::tls::server_config(&cfg).unwrap())
}

trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static> Io for T {}

async fn accept_io(stream: TcpStream, tls: &Option<TlsAcceptor>) -> Option<Box<dyn Io>> {
    stream.set_nodelay(true).ok()?;
    match tls {
        None => Some(Box::new(stream)),
        Some(a) => Some(Box::new(a.accept(stream).await.ok()?)),
    }
}

// === TCP consumer ===

/// How a TCP consumer treats what it reads.
#[derive(Clone, Copy, Debug, Default)]
pub struct TcpBehaviour {
    /// Write back the count of frames processed on the connection after each read.
    pub ack: bool,
    /// Acknowledge at most this many frames per connection; past them, close the connection
    /// without acknowledging (a consumer that dies with work done but not acknowledged).
    pub die_after: Option<u64>,
    /// Keep the envelopes (else only count them: the throughput measurement).
    pub count_only: bool,
}

#[derive(Default)]
pub struct Received {
    pub envelopes: Mutex<Vec<Bytes>>,
    pub frames: AtomicU64,
    pub bytes: AtomicU64,
    /// Frames acknowledged, over every connection.
    pub acked: AtomicU64,
    pub connections: AtomicUsize,
}

impl Received {
    pub fn seqs(&self) -> Vec<u64> {
        self.envelopes.lock().unwrap().iter().map(|e| seq(e)).collect()
    }
    pub fn frames(&self) -> u64 {
        self.frames.load(Ordering::SeqCst)
    }
}

pub struct TcpConsumer {
    pub addr: SocketAddr,
    pub received: Arc<Received>,
    tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: Option<JoinHandle<()>>,
}

impl TcpConsumer {
    pub async fn start(behaviour: TcpBehaviour, tls: Option<&Pki>) -> TcpConsumer {
        Self::start_on("127.0.0.1:0".parse().unwrap(), behaviour, tls, Arc::default()).await
    }

    /// Listens on `addr` (a port a stopped consumer had), adding to `received`.
    pub async fn start_on(
        addr: SocketAddr,
        behaviour: TcpBehaviour,
        tls: Option<&Pki>,
        received: Arc<Received>,
    ) -> TcpConsumer {
        let listener = TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let tls = tls.map(acceptor);
        let tasks: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let accept = tokio::spawn({
            let (received, tasks) = (received.clone(), tasks.clone());
            async move {
                loop {
                    let Ok((stream, _)) = listener.accept().await else { return };
                    let (received, tls) = (received.clone(), tls.clone());
                    let t = tokio::spawn(async move {
                        let Some(io) = accept_io(stream, &tls).await else { return };
                        received.connections.fetch_add(1, Ordering::SeqCst);
                        serve_tcp(io, behaviour, &received).await;
                    });
                    tasks.lock().unwrap().push(t);
                }
            }
        });
        TcpConsumer { addr, received, tasks, accept: Some(accept) }
    }

    /// Closes the listener and every connection.
    pub async fn stop(&mut self) {
        if let Some(a) = self.accept.take() {
            a.abort();
            let _ = a.await;
        }
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap());
        for t in tasks {
            t.abort();
            let _ = t.await;
        }
    }
}

impl Drop for TcpConsumer {
    fn drop(&mut self) {
        if let Some(a) = &self.accept {
            a.abort();
        }
        for t in self.tasks.lock().unwrap().iter() {
            t.abort();
        }
    }
}

async fn serve_tcp(mut io: Box<dyn Io>, b: TcpBehaviour, received: &Received) {
    let acked = read_frames(&mut io, b, received).await;
    received.acked.fetch_add(acked, Ordering::SeqCst);
}

/// Reads frames until the connection ends (or the consumer "dies"); returns the count it
/// acknowledged last.
async fn read_frames(io: &mut Box<dyn Io>, b: TcpBehaviour, received: &Received) -> u64 {
    let mut buf = BytesMut::with_capacity(1 << 20);
    let mut processed = 0u64;
    let mut last_ack = 0u64;
    loop {
        match io.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return last_ack,
            Ok(_) => {}
        }
        let mut kept = Vec::new();
        while buf.len() >= 4 {
            let len = u32::from_be_bytes(buf[..4].try_into().unwrap()) as usize;
            if buf.len() < 4 + len {
                break;
            }
            buf.advance(4);
            let env = buf.split_to(len).freeze();
            processed += 1;
            received.frames.fetch_add(1, Ordering::SeqCst);
            received.bytes.fetch_add(4 + len as u64, Ordering::SeqCst);
            if !b.count_only {
                kept.push(env);
            }
        }
        if !kept.is_empty() {
            received.envelopes.lock().unwrap().extend(kept);
        }
        if b.die_after.is_some_and(|limit| processed > limit) {
            return last_ack;
        }
        if b.ack && processed > last_ack {
            if io.write_all(&processed.to_be_bytes()).await.is_err() {
                return last_ack;
            }
            last_ack = processed;
        }
    }
}

// === HTTP/2 consumer ===

/// What an HTTP/2 consumer answers.
#[derive(Clone, Debug)]
pub struct Answer {
    pub status: u16,
    pub retry_after: Option<String>,
    /// Time taken before answering.
    pub delay: Duration,
}

impl Default for Answer {
    fn default() -> Self {
        Answer { status: 204, retry_after: None, delay: Duration::ZERO }
    }
}

#[derive(Default)]
pub struct Requests {
    /// Each request's envelopes, in arrival order.
    pub batches: Mutex<Vec<Vec<Bytes>>>,
    pub content_types: Mutex<Vec<String>>,
    pub requests: AtomicUsize,
    pub frames: AtomicU64,
    pub in_flight: AtomicUsize,
    pub max_in_flight: AtomicUsize,
    pub count_only: std::sync::atomic::AtomicBool,
}

impl Requests {
    pub fn seqs(&self) -> Vec<u64> {
        self.batches.lock().unwrap().iter().flatten().map(|e| seq(e)).collect()
    }
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

pub struct Http2Consumer {
    pub addr: SocketAddr,
    pub requests: Arc<Requests>,
    pub answer: Arc<Mutex<Answer>>,
    tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: Option<JoinHandle<()>>,
}

impl Http2Consumer {
    pub async fn start(tls: Option<&Pki>) -> Http2Consumer {
        Self::start_on("127.0.0.1:0".parse().unwrap(), tls, Arc::default()).await
    }

    pub fn uri(&self, scheme: &str) -> String {
        format!("{scheme}://{}/copies", self.addr)
    }

    pub fn set(&self, a: Answer) {
        *self.answer.lock().unwrap() = a;
    }

    pub async fn start_on(
        addr: SocketAddr,
        tls: Option<&Pki>,
        requests: Arc<Requests>,
    ) -> Http2Consumer {
        let listener = TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let tls = tls.map(acceptor);
        let answer: Arc<Mutex<Answer>> = Arc::default();
        let tasks: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let accept = tokio::spawn({
            let (requests, answer, tasks) = (requests.clone(), answer.clone(), tasks.clone());
            async move {
                loop {
                    let Ok((stream, _)) = listener.accept().await else { return };
                    let (requests, answer, tls) = (requests.clone(), answer.clone(), tls.clone());
                    let t = tokio::spawn(async move {
                        let Some(io) = accept_io(stream, &tls).await else { return };
                        let svc = hyper::service::service_fn(move |req| {
                            handle(req, requests.clone(), answer.clone())
                        });
                        let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                            .serve_connection(TokioIo::new(io), svc)
                            .await;
                    });
                    tasks.lock().unwrap().push(t);
                }
            }
        });
        Http2Consumer { addr, requests, answer, tasks, accept: Some(accept) }
    }

    pub async fn stop(&mut self) {
        if let Some(a) = self.accept.take() {
            a.abort();
            let _ = a.await;
        }
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap());
        for t in tasks {
            t.abort();
            let _ = t.await;
        }
    }
}

impl Drop for Http2Consumer {
    fn drop(&mut self) {
        if let Some(a) = &self.accept {
            a.abort();
        }
        for t in self.tasks.lock().unwrap().iter() {
            t.abort();
        }
    }
}

async fn handle(
    req: hyper::Request<Incoming>,
    requests: Arc<Requests>,
    answer: Arc<Mutex<Answer>>,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    let now = requests.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    requests.max_in_flight.fetch_max(now, Ordering::SeqCst);
    let a = answer.lock().unwrap().clone();
    let ct = req
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    if !a.delay.is_zero() {
        tokio::time::sleep(a.delay).await;
    }
    requests.requests.fetch_add(1, Ordering::SeqCst);
    if (200..300).contains(&a.status) {
        let frames: Vec<Bytes> = Frames::new(body).map(|f| f.unwrap()).collect();
        requests.frames.fetch_add(frames.len() as u64, Ordering::SeqCst);
        if !requests.count_only.load(Ordering::SeqCst) {
            requests.batches.lock().unwrap().push(frames);
            requests.content_types.lock().unwrap().push(ct);
        }
    }
    requests.in_flight.fetch_sub(1, Ordering::SeqCst);
    let mut rsp = hyper::Response::new(Full::new(Bytes::new()));
    *rsp.status_mut() = http::StatusCode::from_u16(a.status).unwrap();
    if let Some(r) = a.retry_after {
        rsp.headers_mut().insert(http::header::RETRY_AFTER, r.parse().unwrap());
    }
    Ok(rsp)
}
