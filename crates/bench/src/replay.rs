//! `fivecore bench replay`: the requests of a JSON Lines file, each sent once, over HTTP/2 with
//! prior knowledge (or TLS), to any server; the answers counted by status.
//!
//! Why the kit has it: the issue #28 harness (scripts/bench-bsf-compare.sh) runs the same Nbsf
//! sequence against fivecore and other BSFs, and every POST body differs, which h2load cannot
//! send. curl could, but Debian 12's curl 7.88 fails every request after the first on a reused
//! h2c prior-knowledge connection (curl/curl#10634); this client is the kit's own
//! (crate::h2client), so the harness needs no particular curl.
//!
//! The file is read twice, streamed both times: first every line is checked (a line that is not
//! a request is refused with its number before anything is sent), then sent. Line `k` of the
//! requests goes to connection `k mod N`, and each connection sends its lines in file order
//! (h2 opens streams in the order requests are handed to it), with at most its share of
//! `--concurrency` in flight; lines wait in a bounded queue per connection, so memory does not
//! grow with the file.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bytes::{Bytes, BytesMut};
use clap::Args;
use futures_util::stream::{FuturesUnordered, StreamExt};
use http::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use http::uri::PathAndQuery;
use http::Method;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use crate::h2client::{Answer, Call, Failure, H2Conn, Want};
use crate::nfproc;
use crate::security::TlsClient;

/// Flags of `fivecore bench replay`.
#[derive(Args, Debug, Clone)]
pub struct ReplayArgs {
    /// The server's root, `http://HOST:PORT` (h2c with prior knowledge) or `https://HOST:PORT`
    /// (TLS, ALPN h2; give --ca).
    #[arg(long, value_name = "URL")]
    pub url: String,
    /// One request a line (JSON Lines): `{"method":"POST","path":"/a/b?c=d","body":{…},
    /// "headers":{"name":"value"}}`, body and headers optional; blank lines are skipped.
    #[arg(long, value_name = "FILE")]
    pub requests: PathBuf,
    /// HTTP/2 connections; request k of the file goes to connection k mod N.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub connections: usize,
    /// Requests in flight at most, all connections together (each its share).
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub concurrency: usize,
    /// Pin the client's threads to these CPUs (taskset list, e.g. 0 or 0-1); one worker
    /// thread per CPU listed.
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// A request without an answer this long counts as timed out.
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    pub timeout_ms: u64,
    /// Write each request's outcome to FILE, a line each in the order the answers came:
    /// `LINE STATUS LOCATION` (LINE: the request's line in the requests file; LOCATION: the
    /// answer's Location header or `-`; STATUS `timeout` or `error` for no answer).
    #[arg(long, value_name = "FILE")]
    pub answers: Option<PathBuf>,
    /// Fail (exit 1) unless every answer has one of these statuses (repeatable).
    #[arg(long, value_name = "STATUS")]
    pub expect: Vec<u16>,
    /// For https: the CA certificate (PEM) the server's certificate must chain to.
    #[arg(long, value_name = "FILE")]
    pub ca: Option<PathBuf>,
    /// For https: the client certificate (PEM) to present, with --key.
    #[arg(long, value_name = "FILE", requires = "key")]
    pub cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "cert")]
    pub key: Option<PathBuf>,
}

/// Requests queued per connection ahead of its window: enough that a connection never waits
/// for the reader, bounded so a 10M-line file is never in memory.
const QUEUE_PER_CONNECTION: usize = 1024;
/// The file is read through a buffer this large (lines are a few hundred bytes).
const READ_BUFFER: usize = 1 << 20;

/// One line of the requests file, borrowing from the line where it has no escapes.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line<'a> {
    #[serde(borrow)]
    method: Cow<'a, str>,
    #[serde(borrow)]
    path: Cow<'a, str>,
    #[serde(borrow, default)]
    body: Option<&'a RawValue>,
    #[serde(borrow, default)]
    headers: Option<HashMap<Cow<'a, str>, Cow<'a, str>>>,
}

/// A request ready for the wire.
#[derive(Debug)]
pub struct Request {
    /// Its line in the file, from 1.
    pub line: u64,
    pub method: Method,
    /// Path and query, checked to be a valid URI path.
    pub path: Bytes,
    /// The JSON text of `body`, as written in the file.
    pub body: Option<Bytes>,
    pub content_type: Option<HeaderValue>,
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

/// Headers HTTP/2 forbids in a request (RFC 9113 §8.2.2) or that the client sets itself.
const NOT_SENDABLE: [&str; 6] =
    ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te"];

/// Parses line number `line` (its text without the line end) into a request.
pub fn parse_line(line: u64, text: &[u8]) -> Result<Request, String> {
    let l: Line = serde_json::from_slice(text).map_err(|e| format!("not a request: {e}"))?;
    let method = Method::from_bytes(l.method.as_bytes())
        .map_err(|_| format!("method {:?} is not an HTTP method", l.method))?;
    if !l.path.starts_with('/') {
        return Err(format!("path {:?} must start with / (the URL is given by --url)", l.path));
    }
    // Path and body in one buffer: one allocation per request for both.
    let body = l.body.map(|b| b.get().as_bytes()).unwrap_or_default();
    let mut buf = BytesMut::with_capacity(l.path.len() + body.len());
    buf.extend_from_slice(l.path.as_bytes());
    buf.extend_from_slice(body);
    let mut buf = buf.freeze();
    let path = buf.split_to(l.path.len());
    PathAndQuery::from_maybe_shared(path.clone())
        .map_err(|e| format!("path {:?} is not a valid URI path: {e}", l.path))?;
    let mut content_type = None;
    let mut headers = Vec::new();
    for (name, value) in l.headers.iter().flatten() {
        let n = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("header name {name:?} is not valid"))?;
        let v = HeaderValue::from_str(value)
            .map_err(|_| format!("header {name}: value {value:?} is not valid"))?;
        if NOT_SENDABLE.contains(&n.as_str()) || n == http::header::HOST {
            return Err(format!("header {name}: not sent over HTTP/2 (RFC 9113 §8.2.2)"));
        }
        if n == CONTENT_TYPE {
            content_type = Some(v);
        } else {
            headers.push((n, v));
        }
    }
    Ok(Request { line, method, path, body: l.body.map(|_| buf), content_type, headers })
}

/// Reads `path` line by line, handing each request to `each`; stops at the first line that is
/// not a request (its number in the error) or when `each` returns false.
fn for_each_request(path: &Path, mut each: impl FnMut(Request) -> bool) -> Result<()> {
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut reader = BufReader::with_capacity(READ_BUFFER, file);
    let mut buf = Vec::with_capacity(4096);
    let mut line = 0u64;
    loop {
        buf.clear();
        if reader
            .read_until(b'\n', &mut buf)
            .with_context(|| format!("reading {}", path.display()))?
            == 0
        {
            return Ok(());
        }
        line += 1;
        let text = buf.trim_ascii();
        if text.is_empty() {
            continue;
        }
        let req = parse_line(line, text)
            .map_err(|e| anyhow::anyhow!("{} line {line}: {e}", path.display()))?;
        if !each(req) {
            return Ok(());
        }
    }
}

/// What the answers were: a count per status, and the requests without one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tally {
    by_status: Vec<u64>,
    pub timeout: u64,
    /// Transport failures: the connection closed or reset before an answer.
    pub error: u64,
    /// Requests never sent: the replay stopped (the server could not be reached again).
    pub not_sent: u64,
}

impl Default for Tally {
    fn default() -> Self {
        Tally { by_status: vec![0; 1000], timeout: 0, error: 0, not_sent: 0 }
    }
}

impl Tally {
    fn add(&mut self, other: &Tally) {
        for (a, b) in self.by_status.iter_mut().zip(&other.by_status) {
            *a += b;
        }
        self.timeout += other.timeout;
        self.error += other.error;
        self.not_sent += other.not_sent;
    }

    /// (status, count) of the statuses answered, ascending.
    pub fn statuses(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        self.by_status.iter().enumerate().filter(|(_, n)| **n > 0).map(|(s, n)| (s as u16, *n))
    }

    pub fn answered(&self) -> u64 {
        self.by_status.iter().sum()
    }

    /// Requests that got no answer.
    pub fn unanswered(&self) -> u64 {
        self.timeout + self.error + self.not_sent
    }

    /// "COUNT STATUS; " per status, then the requests without an answer, the shape the BSF
    /// scripts printed from curl ("131072 201; ").
    pub fn line(&self) -> String {
        let mut s = String::new();
        for (status, n) in self.statuses() {
            s.push_str(&format!("{n} {status}; "));
        }
        for (n, what) in
            [(self.timeout, "timeout"), (self.error, "error"), (self.not_sent, "not-sent")]
        {
            if n > 0 {
                s.push_str(&format!("{n} {what}; "));
            }
        }
        s
    }
}

/// Where the outcome of each request is written (`--answers`).
type Sink = Option<Mutex<BufWriter<File>>>;

fn write_outcome(sink: &Sink, line: u64, r: &Result<Answer, Failure>) {
    let Some(sink) = sink else { return };
    let mut w = sink.lock().unwrap();
    // A write error shows at the flush at the end.
    let _ = match r {
        Ok(a) => {
            let loc = a.location.as_ref().map_or(&b"-"[..], |v| v.as_bytes());
            write!(w, "{line} {} ", a.status)
                .and_then(|_| w.write_all(loc))
                .and_then(|_| w.write_all(b"\n"))
        }
        Err(Failure::Timeout) => writeln!(w, "{line} timeout -"),
        Err(_) => writeln!(w, "{line} error -"),
    };
}

/// What one connection's task shares with the others.
struct Shared {
    sink: Sink,
    want: Want,
    /// Set when a connection cannot be opened again: nothing more is sent.
    stop: AtomicBool,
}

/// Sends one request on `conn`.
async fn exchange(conn: &H2Conn, req: Request, want: Want) -> (u64, Result<Answer, Failure>) {
    let Request { line, method, path, body, content_type, headers } = req;
    let call = Call {
        method: &method,
        path,
        body,
        content_type: content_type.as_ref(),
        headers: &headers,
        condition: None,
        authorization: None,
        want,
    };
    (line, conn.send(call).await)
}

/// One connection: sends what its queue holds in order, at most `window` in flight.
async fn drive(
    conn: Arc<H2Conn>,
    mut queue: mpsc::Receiver<Request>,
    window: usize,
    shared: Arc<Shared>,
) -> Tally {
    let mut tally = Tally::default();
    let mut in_flight = FuturesUnordered::new();
    let mut queue_open = true;
    // After a transport failure the connection is opened again before the next request, so
    // that a server gone for good stops the replay instead of failing every line.
    let mut reopen = false;
    let record =
        |tally: &mut Tally, reopen: &mut bool, (line, r): (u64, Result<Answer, Failure>)| {
            write_outcome(&shared.sink, line, &r);
            match &r {
                Ok(a) => tally.by_status[usize::from(a.status).min(999)] += 1,
                Err(Failure::Timeout) => tally.timeout += 1,
                Err(_) => {
                    tally.error += 1;
                    *reopen = true;
                }
            }
        };
    while queue_open || !in_flight.is_empty() {
        let room = queue_open && in_flight.len() < window;
        tokio::select! {
            biased;
            Some(done) = in_flight.next(), if !in_flight.is_empty() => {
                record(&mut tally, &mut reopen, done);
            }
            next = queue.recv(), if room => match next {
                Some(_) if shared.stop.load(Ordering::Relaxed) => {
                    tally.not_sent += 1;
                }
                Some(req) => {
                    if reopen {
                        reopen = false;
                        if conn.open().await.is_err() {
                            shared.stop.store(true, Ordering::Relaxed);
                            tally.not_sent += 1;
                            continue;
                        }
                    }
                    in_flight.push(exchange(&conn, req, shared.want));
                }
                None => queue_open = false,
            },
        }
    }
    tally
}

/// The outcome of a replay.
pub struct Outcome {
    pub tally: Tally,
    pub requests: u64,
    pub wall: Duration,
}

/// Checks every line of the file, then replays it; `Err` for a bad line or a server that cannot
/// be reached at the start.
pub fn replay(args: &ReplayArgs) -> Result<Outcome> {
    if args.connections == 0 || args.concurrency < args.connections {
        bail!("--connections must be > 0 and --concurrency at least --connections");
    }
    if args.timeout_ms == 0 {
        bail!("--timeout-ms must be > 0");
    }
    let base = args.url.trim_end_matches('/');
    let tls = match base.starts_with("https://") {
        true => {
            let ca = args.ca.as_deref().context("an https:// URL needs --ca")?;
            let client = args.cert.as_deref().zip(args.key.as_deref());
            Some(Arc::new(TlsClient::from_files(ca, client)?))
        }
        false => None,
    };
    // Every line checked before anything is sent.
    let mut requests = 0u64;
    for_each_request(&args.requests, |_| {
        requests += 1;
        true
    })?;

    let cpus = match &args.cpus {
        Some(l) => Some(nfproc::parse_cpu_list(l)?.len()),
        None => None,
    };
    let workers = cpus.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, |n| n.get()).min(args.connections)
    });
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.worker_threads(workers.max(1)).enable_all();
    if let Some(list) = args.cpus.clone() {
        builder.on_thread_start(move || {
            if let Err(e) = nfproc::pin_self(&list) {
                eprintln!("fivecore bench replay: {e:#}");
            }
        });
    }
    let rt = builder.build()?;
    let timeout = Duration::from_millis(args.timeout_ms);
    let conns = (0..args.connections)
        .map(|_| {
            let mut c = H2Conn::new(base, timeout)?;
            c.set_tls(tls.clone());
            Ok(Arc::new(c))
        })
        .collect::<Result<Vec<_>>>()?;
    rt.block_on(async {
        for c in &conns {
            c.open().await.with_context(|| format!("connecting to {base}"))?;
        }
        anyhow::Ok(())
    })?;
    let sink = match &args.answers {
        Some(p) => Some(Mutex::new(BufWriter::new(
            File::create(p).with_context(|| format!("creating {}", p.display()))?,
        ))),
        None => None,
    };
    let shared = Arc::new(Shared {
        sink,
        want: Want { location: args.answers.is_some(), ..Want::default() },
        stop: AtomicBool::new(false),
    });

    let started = Instant::now();
    let n = args.connections;
    let mut senders = Vec::with_capacity(n);
    let mut tasks = Vec::with_capacity(n);
    for (i, conn) in conns.iter().enumerate() {
        let (tx, rx) = mpsc::channel(QUEUE_PER_CONNECTION);
        senders.push(tx);
        // The window split evenly, the first connections taking the remainder.
        let window = args.concurrency / n + usize::from(i < args.concurrency % n);
        tasks.push(rt.spawn(drive(conn.clone(), rx, window, shared.clone())));
    }
    // The reader: a thread of its own (blocking file reads), pinned like the workers.
    let path = args.requests.clone();
    let pin = args.cpus.clone();
    let reader_shared = shared.clone();
    let reader = std::thread::spawn(move || -> Result<u64> {
        if let Some(list) = pin {
            nfproc::pin_self(&list)?;
        }
        let mut k = 0usize;
        let mut sent = 0u64;
        for_each_request(&path, |req| {
            if reader_shared.stop.load(Ordering::Relaxed) {
                return false;
            }
            let ok = senders[k % n].blocking_send(req).is_ok();
            k += 1;
            sent += u64::from(ok);
            ok
        })?;
        Ok(sent)
    });
    let read = reader.join().map_err(|_| anyhow::anyhow!("the reader thread panicked"))?;
    let mut tally = Tally::default();
    rt.block_on(async {
        for t in tasks {
            tally.add(&t.await?);
        }
        anyhow::Ok(())
    })?;
    let wall = started.elapsed();
    let read = read?;
    if read != requests {
        // Lines the reader never handed out: the replay stopped early.
        tally.not_sent += requests - read.min(requests);
    }
    if let Some(sink) = &shared.sink {
        sink.lock().unwrap().flush().context("writing the answers file")?;
    }
    Ok(Outcome { tally, requests, wall })
}

/// Runs `fivecore bench replay`: `Ok(true)` when every request was answered (with an expected
/// status, given --expect).
pub fn run(args: &ReplayArgs) -> Result<bool> {
    let out = replay(args)?;
    let t = &out.tally;
    let secs = out.wall.as_secs_f64();
    // Not println!: it panics on a closed pipe.
    let _ = writeln!(std::io::stdout(), "{}wall {secs:.3} s", t.line());
    let rate = if secs > 0.0 { t.answered() as f64 / secs } else { 0.0 };
    eprintln!(
        "fivecore bench replay: {} requests, {} answered in {secs:.3} s ({rate:.0}/s) on {} connection(s), {} in flight at most",
        out.requests,
        t.answered(),
        args.connections,
        args.concurrency
    );
    let mut ok = t.unanswered() == 0;
    if t.unanswered() > 0 {
        eprintln!("fivecore bench replay: {} request(s) got no answer", t.unanswered());
    }
    if !args.expect.is_empty() {
        let other: u64 =
            t.statuses().filter(|(s, _)| !args.expect.contains(s)).map(|(_, n)| n).sum();
        if other > 0 {
            eprintln!(
                "fivecore bench replay: {other} answer(s) with a status other than {:?}",
                args.expect
            );
            ok = false;
        }
    }
    Ok(ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_becomes_a_request_with_its_body_as_written() {
        let r = parse_line(
            7,
            br#"{"method":"POST","path":"/nbsf-management/v1/pcfBindings","body":{"dnn": "internet","snssai":{"sst":1}},"headers":{"Content-Type":"application/json; charset=utf-8","X-Seq":"7"}}"#,
        )
        .unwrap();
        assert_eq!((r.line, &r.method), (7, &Method::POST));
        assert_eq!(&r.path[..], b"/nbsf-management/v1/pcfBindings");
        assert_eq!(r.body.as_deref(), Some(&br#"{"dnn": "internet","snssai":{"sst":1}}"#[..]));
        assert_eq!(r.content_type.unwrap(), "application/json; charset=utf-8");
        assert_eq!(r.headers.len(), 1);
        assert_eq!((r.headers[0].0.as_str(), r.headers[0].1.to_str().unwrap()), ("x-seq", "7"));
        let g = parse_line(1, br#"{"method":"GET","path":"/a?ipv4Addr=10.0.0.1"}"#).unwrap();
        assert_eq!(
            (g.body, g.content_type, &g.path[..]),
            (None, None, &b"/a?ipv4Addr=10.0.0.1"[..])
        );
    }

    #[test]
    fn bad_lines_say_what_is_wrong() {
        let err = |t: &str| parse_line(1, t.as_bytes()).unwrap_err();
        assert!(err("{\"method\":\"POST\"").contains("not a request"));
        assert!(err(r#"{"method":"POST","path":"/a","bdy":{}}"#).contains("unknown field `bdy`"));
        assert!(err(r#"{"path":"/a"}"#).contains("missing field `method`"));
        assert!(err(r#"{"method":"P OST","path":"/a"}"#).contains("not an HTTP method"));
        assert!(err(r#"{"method":"GET","path":"a"}"#).contains("must start with /"));
        assert!(err(r#"{"method":"GET","path":"/a b"}"#).contains("not a valid URI path"));
        assert!(err(r#"{"method":"GET","path":"/","headers":{"connection":"x"}}"#)
            .contains("not sent over HTTP/2"));
        assert!(err(r#"{"method":"GET","path":"/","headers":{"a b":"x"}}"#).contains("header name"));
    }

    #[test]
    fn the_tally_prints_counts_by_status_then_the_unanswered() {
        let mut t = Tally::default();
        t.by_status[201] = 5;
        t.by_status[400] = 1;
        t.timeout = 2;
        assert_eq!(t.line(), "5 201; 1 400; 2 timeout; ");
        assert_eq!((t.answered(), t.unanswered()), (6, 2));
    }
}
