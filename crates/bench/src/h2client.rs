//! The load's HTTP/2 client: prior-knowledge h2c straight on the `h2` crate.
//!
//! Why not the NFs' client (`sbi::client::SbiClient`, also on `h2`; docs/bench.md "Two HTTP/2
//! clients"): per request it does what TS 29.500 asks of an NF and a load generator must not pay
//! for or must not do: parse an absolute URL, lease a pooled connection by authority (retrying
//! once on a fresh one), stamp `User-Agent` and `3gpp-Sbi-Sender-Timestamp`, honour
//! `3gpp-Sbi-Max-Rsp-Time`, offer alternates, and collect the whole answer with every header.
//! Measured with `examples/client_cost.rs`, the same GETs cost `SbiClient` about 0.5 µs (14 %)
//! more CPU than this client on 1.5 KB answers; the generator shares the NF's machine, so that
//! is NF capacity lost. Here a connection is one `h2` `SendRequest`, cloned per request; the
//! answer's body is drained and counted, never collected, and only the headers a procedure
//! needs are kept. Its connections also take 1 MiB frames and read through a 256 KiB buffer
//! (below), which an NF holding connections to many producers should not spend.
//!
//! With `--tls` (crate::security) the same connections run over TLS with the kit's client
//! certificate (ALPN `h2`); a reconnect resumes the TLS session from rustls' cache.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use h2::client::SendRequest;
use http::header::{
    HeaderName, HeaderValue, AUTHORIZATION, CONTENT_TYPE, ETAG, LOCATION, RETRY_AFTER, USER_AGENT,
};
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{Method, Request, Uri};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::security::TlsClient;

/// Large windows: the kit never wants flow control to pace the NF's answers.
const STREAM_WINDOW: u32 = 1 << 20;
const CONNECTION_WINDOW: u32 = 1 << 26;
/// The largest DATA frame the kit accepts (SETTINGS_MAX_FRAME_SIZE, RFC 9113 §6.5.2). At the
/// default 16 KiB a 20-65 KB discovery answer arrives as 2-5 frames, each decoded, flow
/// controlled and handed to the request as its own chunk (one wake-up each); a peer that
/// honours this setting (h2 and hyper do) sends the whole answer as one frame.
const MAX_FRAME_SIZE: u32 = 1 << 20;
/// Reads from the socket go through a buffer this large. The h2 codec alone reads at most what
/// is left of its frame buffer (8 KiB after each frame it hands out), so an 11 KB discovery
/// answer took two or three `recv` calls. In the NRF 51.6K mix at 0.3 (~200 MB/s of answers)
/// the `recv` calls were 17 % of the kit's CPU samples; with this buffer 11 %, plus 3.5 % to
/// copy out of it: a small gain (perf, session s14), kept because it never costs more calls.
const READ_BUFFER: usize = 256 << 10;

/// What a request asks for besides the status.
#[derive(Debug, Clone, Copy, Default)]
pub struct Want {
    pub etag: bool,
    pub location: bool,
    /// Keep the body (the answers whose profiles are counted, crate::profile_count).
    pub body: bool,
}

/// One request; the method, header values and body are cheap clones.
pub struct Call<'a> {
    pub method: &'a Method,
    /// Path and query, percent-encoded.
    pub path: Bytes,
    pub body: Option<Bytes>,
    pub content_type: Option<&'a HeaderValue>,
    /// Sent as given (a procedure's `headers`, e.g. `SOAPAction`).
    pub headers: &'a [(HeaderName, HeaderValue)],
    pub condition: Option<(&'static HeaderName, HeaderValue)>,
    /// `Bearer <token>` (`--oauth2`).
    pub authorization: Option<HeaderValue>,
    pub want: Want,
}

/// The parts of an answer the kit looks at.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub etag: Option<HeaderValue>,
    pub location: Option<HeaderValue>,
    /// Body bytes received.
    pub body_len: usize,
    /// The body, when asked for ([`Want::body`]); otherwise drained, not kept.
    pub body: Option<Bytes>,
    /// `Retry-After` of a 503 (a Data Director's ingest asking its copier to wait), kept
    /// whatever was asked for: it says when the same request may go again.
    pub retry_after: Option<HeaderValue>,
}

/// Why a request got no answer.
#[derive(Debug, PartialEq, Eq)]
pub enum Failure {
    /// No answer within the timeout to a request that was sent.
    Timeout,
    /// The request never left the client: it waited for a stream (the NF's
    /// SETTINGS_MAX_CONCURRENT_STREAMS) or a connection being opened until the timeout, or
    /// until its connection was closed.
    NotSent,
    Transport,
}

/// One HTTP/2 connection to an NF, reopened after a failure.
pub struct H2Conn {
    addr: String,
    authority: Authority,
    scheme: Scheme,
    /// The TLS client of an `https://` NF.
    tls: Option<Arc<TlsClient>>,
    timeout: Duration,
    /// The live connection and its generation (so a failure seen by many requests reopens it
    /// once).
    current: Mutex<Option<Live>>,
    reopen: tokio::sync::Mutex<()>,
    generation: AtomicU64,
    /// A request that was sent and timed out closes the connection (`load.reconnect`).
    reconnect: bool,
    /// Requests in progress on this connection, and the streams the NF allows on it (its
    /// SETTINGS_MAX_CONCURRENT_STREAMS once known), for the pool's growth.
    outstanding: AtomicUsize,
    max_streams: AtomicUsize,
}

/// The open connection: its generation, its request handle, and its I/O task (aborting it
/// closes the socket).
struct Live {
    generation: u64,
    send: SendRequest<Bytes>,
    io: tokio::task::AbortHandle,
}

impl H2Conn {
    /// A connection to `base` (`http://host:port`), opened at the first request.
    pub fn new(base: &str, timeout: Duration) -> Result<Self> {
        Self::with_reconnect(base, timeout, false)
    }

    /// A connection that, with `reconnect`, is closed by a request that times out and
    /// reopened by the next.
    pub fn with_reconnect(base: &str, timeout: Duration, reconnect: bool) -> Result<Self> {
        let uri: Uri = base.parse().with_context(|| format!("target URL {base}"))?;
        let scheme = match uri.scheme() {
            Some(s) if *s == Scheme::HTTP || *s == Scheme::HTTPS => s.clone(),
            _ => bail!("target URL {base}: the kit speaks h2c (http://) or, with --tls, https://"),
        };
        let authority = uri.authority().cloned().with_context(|| format!("{base}: no host"))?;
        let addr = match authority.port_u16() {
            Some(_) => authority.as_str().to_string(),
            None if scheme == Scheme::HTTPS => format!("{}:443", authority.host()),
            None => format!("{}:80", authority.host()),
        };
        Ok(Self {
            addr,
            authority,
            scheme,
            tls: None,
            timeout,
            current: Mutex::new(None),
            reopen: tokio::sync::Mutex::new(()),
            generation: AtomicU64::new(0),
            reconnect,
            outstanding: AtomicUsize::new(0),
            max_streams: AtomicUsize::new(usize::MAX),
        })
    }

    /// Speaks TLS through `tls` to an `https://` NF.
    pub fn set_tls(&mut self, tls: Option<Arc<TlsClient>>) {
        self.tls = tls;
    }

    /// Opens the connection now (so connection setup is not in the first request's latency).
    pub async fn open(&self) -> Result<()> {
        self.sender().await.map(|_| ())
    }

    fn live(&self) -> Option<(u64, SendRequest<Bytes>)> {
        self.current.lock().unwrap().as_ref().map(|l| (l.generation, l.send.clone()))
    }

    async fn sender(&self) -> Result<(u64, SendRequest<Bytes>)> {
        if let Some(s) = self.live() {
            return Ok(s);
        }
        let _one = self.reopen.lock().await;
        if let Some(s) = self.live() {
            return Ok(s);
        }
        let tcp = TcpStream::connect(&self.addr)
            .await
            .with_context(|| format!("connecting to {}", self.addr))?;
        tcp.set_nodelay(true)?;
        let (send, io) = match (&self.tls, self.scheme == Scheme::HTTPS) {
            (_, false) => handshake(tcp).await,
            (Some(tls), true) => {
                let stream = tls
                    .connect(tcp, self.authority.host())
                    .await
                    .with_context(|| format!("TLS handshake with {}", self.addr))?;
                handshake(stream).await
            }
            (None, true) => bail!("{}: an https:// NF needs --tls", self.addr),
        }
        .with_context(|| format!("HTTP/2 handshake with {}", self.addr))?;
        // The NF's SETTINGS (its stream limit, which the pool grows by) come right after the
        // handshake; wait for them (up to half a second on a busy machine) rather than guess.
        for _ in 0..500 {
            if send.current_max_send_streams() != usize::MAX {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        self.max_streams.store(send.current_max_send_streams(), Ordering::Relaxed);
        let g = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        *self.current.lock().unwrap() = Some(Live { generation: g, send: send.clone(), io });
        Ok((g, send))
    }

    /// Forgets connection `generation` after a transport failure; the next request reopens.
    /// With `close`, the connection is closed too (its other requests fail).
    fn broken(&self, generation: u64, close: bool) {
        let mut cur = self.current.lock().unwrap();
        if cur.as_ref().is_some_and(|l| l.generation == generation) {
            if let Some(l) = cur.take() {
                if close {
                    l.io.abort();
                }
            }
        }
    }

    /// Whether a new request would find a free stream (unknown before the first connect: yes).
    fn has_room(&self) -> bool {
        self.outstanding.load(Ordering::Relaxed) < self.max_streams.load(Ordering::Relaxed)
    }

    /// Sends one request and waits for its whole answer, within the timeout.
    pub async fn send(&self, call: Call<'_>) -> Result<Answer, Failure> {
        self.outstanding.fetch_add(1, Ordering::Relaxed);
        let r = self.send_counted(call).await;
        self.outstanding.fetch_sub(1, Ordering::Relaxed);
        r
    }

    async fn send_counted(&self, call: Call<'_>) -> Result<Answer, Failure> {
        // The generation of the connection the request was sent on (0: not sent yet), for
        // `reconnect`: a consumer that gives up on a request it sent suspects the connection;
        // one whose request never left (all streams in use) has no reason to.
        let generation = AtomicU64::new(0);
        match tokio::time::timeout(self.timeout, self.exchange(call, &generation)).await {
            Ok(r) => r,
            Err(_) => match generation.load(Ordering::Relaxed) {
                0 => Err(Failure::NotSent),
                g => {
                    if self.reconnect {
                        self.broken(g, true);
                    }
                    Err(Failure::Timeout)
                }
            },
        }
    }

    async fn exchange(&self, call: Call<'_>, used: &AtomicU64) -> Result<Answer, Failure> {
        // A rendered path that is no valid URI path fails that request alone.
        let path =
            PathAndQuery::from_maybe_shared(call.path.clone()).map_err(|_| Failure::Transport)?;
        let uri = Uri::builder()
            .scheme(self.scheme.clone())
            .authority(self.authority.clone())
            .path_and_query(path)
            .build()
            .map_err(|_| Failure::Transport)?;
        let (generation, send) = self.sender().await.map_err(|_| Failure::Transport)?;
        let r = exchange_on(send, uri, call, || used.store(generation, Ordering::Relaxed)).await;
        if let Err(e) = &r {
            // A stream reset ends that request; anything else ends the connection.
            if !e.is_reset() || e.is_go_away() {
                self.broken(generation, false);
            }
        }
        // A request still queued behind the stream limit when its connection closed never
        // reached the NF.
        r.map_err(|_| match used.load(Ordering::Relaxed) {
            0 => Failure::NotSent,
            _ => Failure::Transport,
        })
    }
}

/// The HTTP/2 handshake on `io` (TCP or TLS); the connection's I/O runs in a task of its own
/// that ends when every handle is dropped or the peer closes (aborting it closes the socket).
async fn handshake<T>(io: T) -> Result<(SendRequest<Bytes>, tokio::task::AbortHandle), h2::Error>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (send, conn) = h2::client::Builder::new()
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_frame_size(MAX_FRAME_SIZE)
        .handshake::<_, Bytes>(tokio::io::BufReader::with_capacity(READ_BUFFER, io))
        .await?;
    let io = tokio::spawn(async move {
        let _ = conn.await;
    })
    .abort_handle();
    Ok((send, io))
}

async fn exchange_on(
    send: SendRequest<Bytes>,
    uri: Uri,
    call: Call<'_>,
    sent: impl FnOnce(),
) -> Result<Answer, h2::Error> {
    let mut send = send.ready().await?;
    let mut req = Request::new(());
    *req.method_mut() = call.method.clone();
    *req.uri_mut() = uri;
    let h = req.headers_mut();
    h.insert(USER_AGENT, HeaderValue::from_static("fivecore-bench"));
    for (name, value) in call.headers {
        h.insert(name.clone(), value.clone());
    }
    if let Some((name, value)) = call.condition {
        h.insert(name, value);
    }
    if let Some(value) = call.authorization {
        h.insert(AUTHORIZATION, value);
    }
    let rsp = match call.body {
        Some(body) => {
            let ct = call
                .content_type
                .cloned()
                .unwrap_or_else(|| HeaderValue::from_static("application/json"));
            h.insert(CONTENT_TYPE, ct);
            let (rsp, mut stream) = send.send_request(req, false)?;
            // Buffered by h2 and sent as the windows allow.
            stream.send_data(body, true)?;
            rsp
        }
        None => send.send_request(req, true)?.0,
    };
    // h2 queues a stream beyond the peer's SETTINGS_MAX_CONCURRENT_STREAMS; this handle is
    // ready again once its stream has left that queue, i.e. its HEADERS are on their way.
    std::future::poll_fn(|cx| send.poll_ready(cx)).await?;
    sent();
    let (mut parts, mut body) = rsp.await?.into_parts();
    let mut body_len = 0;
    let mut kept: Option<bytes::BytesMut> = call.want.body.then(bytes::BytesMut::new);
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        body_len += chunk.len();
        // Give the window back at once: the data is copied out, if kept at all.
        let _ = body.flow_control().release_capacity(chunk.len());
        if let Some(k) = kept.as_mut() {
            k.extend_from_slice(&chunk);
        }
    }
    Ok(Answer {
        status: parts.status.as_u16(),
        etag: if call.want.etag { parts.headers.remove(ETAG) } else { None },
        location: if call.want.location { parts.headers.remove(LOCATION) } else { None },
        retry_after: match parts.status.as_u16() {
            503 => parts.headers.remove(RETRY_AFTER),
            _ => None,
        },
        body_len,
        body: kept.map(bytes::BytesMut::freeze),
    })
}

/// Connections to one NF, used round robin: `connections` at first, more (up to `max`) while
/// every open one has all the streams the NF allows in use, as HTTP/2 consumers do (Go's
/// transport opens another connection at the peer's SETTINGS_MAX_CONCURRENT_STREAMS); exactly
/// `connections` for a fixed pool.
pub struct H2Pool {
    conns: Vec<H2Conn>,
    active: AtomicUsize,
    next: AtomicU64,
}

impl H2Pool {
    pub fn new(base: &str, connections: usize, timeout: Duration) -> Result<Self> {
        Self::with_reconnect(base, connections, timeout, false)
    }

    /// A fixed pool whose connections are closed by a request that times out
    /// (`load.reconnect`).
    pub fn with_reconnect(
        base: &str,
        connections: usize,
        timeout: Duration,
        reconnect: bool,
    ) -> Result<Self> {
        Self::growing(base, connections, connections, timeout, reconnect)
    }

    /// `connections` at first, at most `max` (connections are opened at their first request).
    /// Speaks TLS through `tls` on every connection (an `https://` NF, `--tls`).
    pub fn with_tls(mut self, tls: Option<Arc<TlsClient>>) -> Self {
        for c in &mut self.conns {
            c.set_tls(tls.clone());
        }
        self
    }

    pub fn growing(
        base: &str,
        connections: usize,
        max: usize,
        timeout: Duration,
        reconnect: bool,
    ) -> Result<Self> {
        let first = connections.max(1);
        let conns = (0..max.max(first))
            .map(|_| H2Conn::with_reconnect(base, timeout, reconnect))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { conns, active: AtomicUsize::new(first), next: AtomicU64::new(0) })
    }

    /// Opens the first connections.
    pub async fn open(&self) -> Result<()> {
        for c in &self.conns[..self.active()] {
            c.open().await?;
        }
        Ok(())
    }

    /// Connections in use (the most this pool has grown to).
    pub fn active(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }

    /// The next connection with a free stream, round robin; a new one when none has and the
    /// pool may grow; else the next in turn (its request waits in h2 for a stream).
    pub fn pick(&self) -> &H2Conn {
        let n = self.active();
        let start = self.next.fetch_add(1, Ordering::Relaxed) as usize;
        for k in 0..n {
            let c = &self.conns[(start + k) % n];
            if c.has_room() {
                return c;
            }
        }
        if n < self.conns.len()
            && self.active.compare_exchange(n, n + 1, Ordering::Relaxed, Ordering::Relaxed).is_ok()
        {
            return &self.conns[n];
        }
        &self.conns[start % n]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{Response, StatusCode};
    use tokio::net::TcpListener;

    /// What the test server does with a request.
    enum Act {
        Answer(StatusCode, &'static str),
        /// Never answer (the stream stays open).
        Hold,
        /// Close the whole connection.
        Close,
    }

    /// An h2c server on a real socket, doing with each request what `act` says.
    async fn server(act: fn(&http::request::Parts) -> Act) -> String {
        server_with_streams(act, 1024).await
    }

    /// A server announcing `max_streams` (SETTINGS_MAX_CONCURRENT_STREAMS).
    async fn server_with_streams(
        act: fn(&http::request::Parts) -> Act,
        max_streams: u32,
    ) -> String {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", l.local_addr().unwrap());
        tokio::spawn(async move {
            loop {
                let (tcp, _) = l.accept().await.unwrap();
                tokio::spawn(async move {
                    let mut conn = h2::server::Builder::new()
                        .max_concurrent_streams(max_streams)
                        .handshake(tcp)
                        .await
                        .unwrap();
                    let mut held = Vec::new();
                    while let Some(Ok((req, mut respond))) = conn.accept().await {
                        let (parts, _) = req.into_parts();
                        let (status, body) = match act(&parts) {
                            Act::Answer(status, body) => (status, body),
                            Act::Hold => {
                                held.push(respond);
                                continue;
                            }
                            Act::Close => return,
                        };
                        let rsp = Response::builder()
                            .status(status)
                            .header("etag", "\"v7\"")
                            .header("location", format!("{}/id-42", parts.uri.path()))
                            .body(())
                            .unwrap();
                        let mut send = respond.send_response(rsp, body.is_empty()).unwrap();
                        if !body.is_empty() {
                            send.send_data(Bytes::from_static(body.as_bytes()), true).unwrap();
                        }
                    }
                });
            }
        });
        base
    }

    fn call<'a>(method: &'a Method, path: &'static str, want: Want) -> Call<'a> {
        Call {
            method,
            path: Bytes::from_static(path.as_bytes()),
            body: Some(Bytes::from_static(b"{}")),
            content_type: None,
            headers: &[],
            condition: Some((&http::header::IF_MATCH, HeaderValue::from_static("\"v6\""))),
            authorization: None,
            want,
        }
    }

    #[tokio::test]
    async fn answers_keep_status_wanted_headers_and_body_length() {
        let base = server(|p| {
            // The request arrives whole: method, path, query, condition, content type.
            let ok = p.method == Method::PUT
                && p.uri.path_and_query().map(|x| x.as_str()) == Some("/a/b?x=1")
                && p.headers.get("if-match").is_some_and(|v| v == "\"v6\"")
                && p.headers.get("content-type").is_some_and(|v| v == "application/json");
            match ok {
                true => Act::Answer(StatusCode::CREATED, "0123456789"),
                false => Act::Answer(StatusCode::BAD_REQUEST, ""),
            }
        })
        .await;
        let c = H2Conn::new(&base, Duration::from_secs(5)).unwrap();
        let a = c
            .send(call(&Method::PUT, "/a/b?x=1", Want { etag: true, location: true, body: false }))
            .await
            .unwrap();
        assert_eq!((a.status, a.body_len), (201, 10));
        assert_eq!(a.etag.as_ref().map(|v| v.to_str().unwrap()), Some("\"v7\""));
        assert_eq!(a.location.as_ref().map(|v| v.to_str().unwrap()), Some("/a/b/id-42"));
        // Headers nobody asked for are not kept.
        let a = c.send(call(&Method::PUT, "/a/b?x=1", Want::default())).await.unwrap();
        assert_eq!((a.status, a.etag, a.location), (201, None, None));
    }

    #[tokio::test]
    async fn large_answers_on_many_streams_are_counted_whole() {
        // Larger than the read buffer and the default frame size, many at once on one
        // connection: every byte counted, to the right stream.
        let base = server(|p| match p.uri.path() {
            "/big" => Act::Answer(StatusCode::OK, big_body()),
            _ => Act::Answer(StatusCode::OK, "small"),
        })
        .await;
        let c = std::sync::Arc::new(H2Conn::new(&base, Duration::from_secs(10)).unwrap());
        let mut tasks = Vec::new();
        for i in 0..40 {
            let c = c.clone();
            tasks.push(tokio::spawn(async move {
                let path = if i % 2 == 0 { "/big" } else { "/small" };
                let a = c.send(call(&Method::GET, path, Want::default())).await.unwrap();
                (path, a.body_len)
            }));
        }
        for t in tasks {
            let (path, len) = t.await.unwrap();
            let want = if path == "/big" { big_body().len() } else { 5 };
            assert_eq!(len, want, "{path}");
        }
    }

    fn big_body() -> &'static str {
        static BIG: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        BIG.get_or_init(|| "x".repeat(READ_BUFFER + 12_345))
    }

    #[tokio::test]
    async fn the_client_announces_large_frames_and_windows() {
        // A raw socket: the SETTINGS frame after the preface is what a server reads.
        use tokio::io::AsyncReadExt;
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", l.local_addr().unwrap());
        let server = tokio::spawn(async move {
            let (mut tcp, _) = l.accept().await.unwrap();
            let mut preface = [0u8; 24];
            tcp.read_exact(&mut preface).await.unwrap();
            assert_eq!(&preface, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
            let mut head = [0u8; 9];
            tcp.read_exact(&mut head).await.unwrap();
            assert_eq!(head[3], 0x4, "SETTINGS first");
            let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
            let mut payload = vec![0u8; len];
            tcp.read_exact(&mut payload).await.unwrap();
            payload
                .chunks(6)
                .map(|e| {
                    (u16::from_be_bytes([e[0], e[1]]), u32::from_be_bytes([e[2], e[3], e[4], e[5]]))
                })
                .collect::<std::collections::HashMap<_, _>>()
        });
        let c = H2Conn::new(&base, Duration::from_millis(300)).unwrap();
        // The server never finishes the handshake: the request fails, the SETTINGS were sent.
        let _ = c.send(call(&Method::GET, "/", Want::default())).await;
        let settings = server.await.unwrap();
        // SETTINGS_INITIAL_WINDOW_SIZE (0x4), SETTINGS_MAX_FRAME_SIZE (0x5).
        assert_eq!(settings.get(&0x4), Some(&STREAM_WINDOW));
        assert_eq!(settings.get(&0x5), Some(&MAX_FRAME_SIZE));
    }

    #[tokio::test]
    async fn with_reconnect_a_timeout_closes_the_connection_and_the_next_request_reopens() {
        let base = server(|p| match p.uri.path() {
            "/never" => Act::Hold,
            _ => Act::Answer(StatusCode::NO_CONTENT, ""),
        })
        .await;
        let c = std::sync::Arc::new(
            H2Conn::with_reconnect(&base, Duration::from_millis(300), true).unwrap(),
        );
        assert_eq!(c.send(call(&Method::GET, "/ok", Want::default())).await.unwrap().status, 204);
        // Two held requests on the same connection: the first to time out closes it.
        let (a, b) = tokio::join!(
            c.send(call(&Method::GET, "/never", Want::default())),
            c.send(call(&Method::GET, "/never", Want::default())),
        );
        assert!(a.is_err() && b.is_err());
        assert!([a.unwrap_err(), b.unwrap_err()].contains(&Failure::Timeout));
        let ok = c.send(call(&Method::GET, "/ok", Want::default())).await.unwrap();
        assert_eq!((ok.status, c.generation.load(Ordering::Relaxed)), (204, 2));
    }

    #[tokio::test]
    async fn a_request_the_stream_limit_kept_from_leaving_is_not_sent_and_closes_nothing() {
        let base = server_with_streams(
            |p| match p.uri.path() {
                "/never" => Act::Hold,
                _ => Act::Answer(StatusCode::NO_CONTENT, ""),
            },
            1,
        )
        .await;
        let c = H2Conn::with_reconnect(&base, Duration::from_millis(300), true).unwrap();
        assert_eq!(c.send(call(&Method::GET, "/ok", Want::default())).await.unwrap().status, 204);
        // The one stream the server allows is held by a request outside this connection's
        // timeout (so it is not released meanwhile); the next request waits behind it in the
        // client and never leaves: not sent, and, with reconnect, it closes nothing.
        let mut raw = c.live().unwrap().1.ready().await.unwrap();
        let req = http::Request::get(format!("{base}/never")).body(()).unwrap();
        let (_held, _) = raw.send_request(req, true).unwrap();
        let b = c.send(call(&Method::GET, "/ok", Want::default())).await;
        assert_eq!(b.unwrap_err(), Failure::NotSent);
        assert_eq!(c.generation.load(Ordering::Relaxed), 1);
        assert!(c.live().is_some(), "the connection stays open");
    }

    #[tokio::test]
    async fn the_pool_opens_another_connection_when_its_streams_are_all_in_use_unless_fixed() {
        let base = server_with_streams(
            |p| match p.uri.path() {
                "/never" => Act::Hold,
                _ => Act::Answer(StatusCode::NO_CONTENT, ""),
            },
            1,
        )
        .await;
        let pool = std::sync::Arc::new(
            H2Pool::growing(&base, 1, 3, Duration::from_millis(500), false).unwrap(),
        );
        pool.open().await.unwrap();
        let t0 = tokio::time::Instant::now();
        while pool.conns[0].live().unwrap().1.current_max_send_streams() != 1 {
            assert!(t0.elapsed() < Duration::from_secs(10), "no SETTINGS from the server");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        pool.conns[0].max_streams.store(1, Ordering::Relaxed);
        // One held request per connection fills it: each next one opens a new connection, up
        // to the three allowed; a fourth waits on one of them.
        let mut held = Vec::new();
        for _ in 0..4 {
            let p = pool.clone();
            held.push(tokio::spawn(async move {
                p.pick().send(call(&Method::GET, "/never", Want::default())).await
            }));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(pool.active(), 3);
        for h in held {
            assert!(h.await.unwrap().is_err());
        }
        let fixed = H2Pool::with_reconnect(&base, 1, Duration::from_millis(200), false).unwrap();
        // Open it and wait for the server's SETTINGS (a busy machine may take longer than the
        // connect's own wait), so h2 holds the second stream back.
        fixed.open().await.unwrap();
        let t0 = tokio::time::Instant::now();
        while fixed.conns[0].live().unwrap().1.current_max_send_streams() != 1 {
            assert!(t0.elapsed() < Duration::from_secs(10), "no SETTINGS from the server");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // The connection's one stream taken by a request outside the pool's timeout (so it is
        // not released while the next one waits): the pool's request waits in the client, is
        // not sent, and no connection is added.
        let mut raw = fixed.conns[0].live().unwrap().1.ready().await.unwrap();
        let req = http::Request::get(format!("{base}/never")).body(()).unwrap();
        let (held, _) = raw.send_request(req, true).unwrap();
        let b = fixed.pick().send(call(&Method::GET, "/ok", Want::default())).await;
        assert_eq!(b.unwrap_err(), Failure::NotSent);
        assert_eq!(fixed.active(), 1);
        drop(held);
    }

    #[tokio::test]
    async fn an_unanswered_request_times_out_and_a_closed_connection_is_reopened() {
        let base = server(|p| match p.uri.path() {
            "/never" => Act::Hold,
            "/close" => Act::Close,
            _ => Act::Answer(StatusCode::NO_CONTENT, ""),
        })
        .await;
        let c = H2Conn::new(&base, Duration::from_millis(300)).unwrap();
        let t0 = tokio::time::Instant::now();
        let e = c.send(call(&Method::GET, "/never", Want::default())).await.unwrap_err();
        assert_eq!(e, Failure::Timeout);
        assert!(t0.elapsed() >= Duration::from_millis(300));
        // A timeout ends that request only: the connection still serves.
        let ok = c.send(call(&Method::GET, "/ok", Want::default())).await.unwrap();
        assert_eq!((ok.status, c.generation.load(Ordering::Relaxed)), (204, 1));
        // The server drops the connection: that request fails, the next one reopens it.
        let e = c.send(call(&Method::GET, "/close", Want::default())).await.unwrap_err();
        assert_eq!(e, Failure::Transport);
        let ok = c.send(call(&Method::GET, "/ok", Want::default())).await.unwrap();
        assert_eq!((ok.status, c.generation.load(Ordering::Relaxed)), (204, 2));
        // Nothing listens at all: a transport failure, not a hang.
        let dead = H2Conn::new("http://127.0.0.1:1", Duration::from_secs(5)).unwrap();
        let e = dead.send(call(&Method::GET, "/", Want::default())).await.unwrap_err();
        assert_eq!(e, Failure::Transport);
    }
}
