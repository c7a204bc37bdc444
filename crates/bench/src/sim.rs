//! Peer simulators: small HTTP servers that wait their configured latency, then answer,
//! counting what they receive.
//!
//! - notification sink: any request, 204 (NfStatusNotify callbacks);
//! - SLF: `GET /nudr-group-id-map/v1/nf-group-ids?nf-type=..&subscriberId=..` answers a
//!   NfGroupIdMapResult (TS 29.504 §6.3) mapping the subscriber to group `<type>-grp-0`;
//! - peer NRF: `GET /nnrf-disc/v1/nf-instances` answers a SearchResult holding
//!   `answer_profiles` profiles of `answer_nf_type` (another NRF set's NFs), empty without;
//! - AMF: N1N2MessageSubscribe / Transfer, answering as the UE (`sim_amf.rs`).
//! - CHF: Nchf_SpendingLimitControl (TS 29.594): `POST .../subscriptions` answers 201 with a
//!   SpendingLimitStatus (a `valid` status per requested counter) and `Location`, `DELETE
//!   .../subscriptions/{id}` 204.
//!
//! The NFs speak h2c (prior knowledge) to them, served straight on the `h2` crate
//! (`sim_h2.rs`): the SLF alone takes about as many requests as the whole offered load of the
//! NRF mixes, and hyper's server (a task and a timer per stream) made the simulators about a
//! third of the kit's CPU. HTTP/1.1 clients (tests, curl) still get hyper.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::scenario::{Generators, SimKind, Simulator};
use crate::sim_h2;

#[derive(Debug, Default)]
pub struct SimCounters {
    /// Requests received.
    pub received: AtomicU64,
    /// What they carried: for a notification sink, the notifications (the elements of a JSON
    /// array body, as the UDR batches PolicyDataChangeNotifications; 1 for any other body);
    /// for the other kinds, the requests.
    pub items: AtomicU64,
    /// Answers that were not 2xx (a request the simulator did not understand).
    pub rejected: AtomicU64,
    /// Requests the simulator sent itself (the AMF's N1MessageNotify), answered 2xx.
    pub sent: AtomicU64,
    /// And those that failed.
    pub send_failed: AtomicU64,
    /// CHF: subscriptions made, and removed.
    pub created: AtomicU64,
    pub deleted: AtomicU64,
}

pub struct RunningSim {
    pub name: String,
    pub kind: SimKind,
    pub latency_ms: u64,
    pub addr: SocketAddr,
    pub counters: Arc<SimCounters>,
    task: JoinHandle<()>,
    /// A directory's slapd (kind `ldap`), stopped when this is dropped.
    _directory: Option<crate::sim_ldap::Directory>,
}

impl RunningSim {
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for RunningSim {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What every connection of one simulator shares.
pub(crate) struct Sim {
    pub(crate) kind: SimKind,
    pub(crate) latency: Duration,
    pub(crate) counters: Arc<SimCounters>,
    remote: Remote,
    /// The peer NRF's SearchResult.
    search_result: Bytes,
    /// The AMF's subscriptions and client.
    amf: Option<Arc<crate::sim_amf::AmfState>>,
    /// `http://addr`: the CHF's subscriptions' `Location` starts with it.
    base: String,
}

/// An answer, decided when the request arrives and sent once the latency has passed.
pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    /// A JSON body (`application/json`), or none.
    pub(crate) body: Option<Bytes>,
    /// A `Location` header (a CHF subscription's), or none.
    pub(crate) location: Option<String>,
}

impl Reply {
    pub(crate) fn of(status: StatusCode, body: Option<Bytes>) -> Reply {
        Reply { status, body, location: None }
    }
}

impl Sim {
    /// Counts a request whose body (if any) has arrived whole, and decides its answer.
    pub(crate) fn receive(&self, method: &Method, uri: &Uri, body: &[u8]) -> Reply {
        let c = &self.counters;
        c.received.fetch_add(1, Ordering::Relaxed);
        let items = match self.kind {
            SimKind::NotificationSink if body.first() == Some(&b'[') => {
                serde_json::from_slice::<Vec<serde::de::IgnoredAny>>(body).map_or(1, |v| v.len())
            }
            _ => 1,
        };
        c.items.fetch_add(items as u64, Ordering::Relaxed);
        let reply = match self.kind {
            SimKind::NotificationSink => Some(Reply::of(StatusCode::NO_CONTENT, None)),
            SimKind::Chf => self.chf(method, uri, body),
            SimKind::Slf => self.slf(method, uri),
            SimKind::PeerNrf => uri
                .path()
                .ends_with("/nnrf-disc/v1/nf-instances")
                .then(|| Reply::of(StatusCode::OK, Some(self.search_result.clone()))),
            SimKind::Amf => self
                .amf
                .as_ref()
                .and_then(|a| crate::sim_amf::receive(a, &self.counters, method, uri, body)),
            SimKind::AfRx
            | SimKind::PcfRx
            | SimKind::AsSh
            | SimKind::Ocs
            | SimKind::Tdf
            | SimKind::PcefGx
            | SimKind::Ldap => None,
        };
        reply.unwrap_or_else(|| {
            c.rejected.fetch_add(1, Ordering::Relaxed);
            match self.kind {
                SimKind::Slf => Reply::of(
                    StatusCode::BAD_REQUEST,
                    Some(Bytes::from_static(
                        br#"{"status":400,"cause":"MANDATORY_QUERY_PARAM_MISSING"}"#,
                    )),
                ),
                _ => {
                    Reply::of(StatusCode::NOT_FOUND, Some(Bytes::from_static(br#"{"status":404}"#)))
                }
            }
        })
    }

    /// The SLF's NfGroupIdMapResult, or `None` for a request it does not understand.
    fn slf(&self, method: &Method, uri: &Uri) -> Option<Reply> {
        // An apiPrefix may precede the API name.
        if method != Method::GET || !uri.path().ends_with("/nudr-group-id-map/v1/nf-group-ids") {
            return None;
        }
        let (mut nf_type, mut sub) = (None, None);
        for (k, v) in uri.query().unwrap_or("").split('&').filter_map(|p| p.split_once('=')) {
            match pct_decode(k).as_ref() {
                "nf-type" => nf_type = Some(pct_decode(v)),
                "subscriberId" => sub = Some(pct_decode(v)),
                _ => {}
            }
        }
        let (t, sub) = (nf_type?, sub?);
        // {"nfGroupIds":{T:"t-grp-X"},"subscriberId":S}, strings escaped as JSON. Written by
        // hand: ~13,700 answers/s in the NRF mix at 0.3, and serde_json's writer plus a
        // formatted group name cost the kit more than its share of the SLF's HTTP/2 work.
        let suffix: &[u8] = if self.remote.is_remote(&t, &sub) { b"remote" } else { b"0" };
        let mut b = Vec::with_capacity(64 + 2 * t.len() + sub.len());
        b.extend_from_slice(br#"{"nfGroupIds":{"#);
        push_json_str(&mut b, t.as_bytes(), false);
        b.extend_from_slice(b":");
        // The group name, `<type in lower case>-grp-<suffix>`, is one JSON string.
        push_json_str(&mut b, t.as_bytes(), true);
        b.pop();
        b.extend_from_slice(b"-grp-");
        b.extend_from_slice(suffix);
        b.extend_from_slice(br#""},"subscriberId":"#);
        push_json_str(&mut b, sub.as_bytes(), false);
        b.push(b'}');
        Some(Reply::of(StatusCode::OK, Some(Bytes::from(b))))
    }

    /// The CHF's answer: a subscribe's 201 with a `valid` status per requested policy counter
    /// and the new subscription's `Location`, an unsubscribe's 204; `None` for anything else.
    fn chf(&self, method: &Method, uri: &Uri, body: &[u8]) -> Option<Reply> {
        const SUBS: &str = "/nchf-spendinglimitcontrol/v1/subscriptions";
        let path = uri.path();
        if method == Method::DELETE && path.contains(SUBS) && !path.ends_with(SUBS) {
            self.counters.deleted.fetch_add(1, Ordering::Relaxed);
            return Some(Reply::of(StatusCode::NO_CONTENT, None));
        }
        if method != Method::POST || !path.ends_with(SUBS) {
            return None;
        }
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Context {
            supi: String,
            policy_counter_ids: Vec<String>,
        }
        let ctx: Context = serde_json::from_slice(body).ok()?;
        if ctx.policy_counter_ids.is_empty() {
            return None;
        }
        let infos: serde_json::Map<String, serde_json::Value> = ctx
            .policy_counter_ids
            .iter()
            .map(|c| {
                let info = serde_json::json!({"policyCounterId": c, "currentStatus": "valid"});
                (c.clone(), info)
            })
            .collect();
        let status = serde_json::json!({"supi": ctx.supi, "statusInfos": infos});
        let id = self.counters.created.fetch_add(1, Ordering::Relaxed) + 1;
        Some(Reply {
            status: StatusCode::CREATED,
            body: Some(Bytes::from(serde_json::to_vec(&status).ok()?)),
            location: Some(format!("{}{path}/{id}", self.base)),
        })
    }
}

/// Appends `s` as a JSON string (RFC 8259 §7): quotes, backslashes and control characters
/// escaped, runs of anything else copied whole (UTF-8 passes through as it is); ASCII
/// letters lowered when `lower` (the escapes hold none but lower-case ones).
fn push_json_str(out: &mut Vec<u8>, s: &[u8], lower: bool) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let start = out.len();
    out.push(b'"');
    let mut run = 0;
    for (i, &c) in s.iter().enumerate() {
        if c >= 0x20 && c != b'"' && c != b'\\' {
            continue;
        }
        out.extend_from_slice(&s[run..i]);
        match c {
            b'"' | b'\\' => out.extend_from_slice(&[b'\\', c]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            _ => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(c >> 4)],
                HEX[usize::from(c & 15)],
            ]),
        }
        run = i + 1;
    }
    out.extend_from_slice(&s[run..]);
    if lower {
        out[start..].make_ascii_lowercase();
    }
    out.push(b'"');
}

/// The HTTP/2 connection preface's first bytes: no HTTP/1.1 method starts so.
const H2_PREFACE_START: &[u8] = b"PRI ";

pub async fn start(sim: &Simulator) -> std::io::Result<RunningSim> {
    if sim.kind.is_diameter() {
        // Those connect to the NF once it runs (crate::rx), they serve no HTTP.
        return Err(std::io::Error::other(format!("{} is a Diameter simulator", sim.name)));
    }
    if sim.kind == SimKind::Ocs {
        return start_ocs(sim).await;
    }
    if sim.kind == SimKind::Tdf {
        return start_tdf(sim).await;
    }
    if sim.kind == SimKind::Ldap {
        return Err(std::io::Error::other(format!(
            "{}: a directory is started with the scenario's subscribers (start_all)",
            sim.name
        )));
    }
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let counters = Arc::new(SimCounters::default());
    let shared = Arc::new(Sim {
        kind: sim.kind,
        latency: Duration::from_millis(sim.latency_ms),
        counters: counters.clone(),
        remote: Remote { share: sim.remote_share, nf_types: sim.remote_nf_types.clone() },
        search_result: search_result(sim),
        amf: match sim.kind {
            SimKind::Amf => Some(Arc::new(crate::sim_amf::AmfState::new()?)),
            _ => None,
        },
        base: format!("http://{addr}"),
    });
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let _ = stream.set_nodelay(true);
            let sim = shared.clone();
            tokio::spawn(async move {
                match starts_with_h2_preface(&stream).await {
                    Ok(true) => sim_h2::serve(stream, sim).await,
                    Ok(false) => serve_hyper(stream, sim).await,
                    Err(_) => {}
                }
            });
        }
    });
    Ok(RunningSim {
        name: sim.name.clone(),
        kind: sim.kind,
        latency_ms: sim.latency_ms,
        addr,
        counters,
        task,
        _directory: None,
    })
}

/// An OCS (crate::sim_ocs): its Diameter address is the simulator's; the task holds it (and
/// sends its periodic SNRs) until the simulator is dropped.
async fn start_ocs(sim: &Simulator) -> std::io::Result<RunningSim> {
    let counters = Arc::new(SimCounters::default());
    let ocs = crate::sim_ocs::Ocs::start(sim, counters.clone()).await?;
    let addr = ocs.addr().ok_or_else(|| std::io::Error::other("the OCS did not bind"))?;
    let every = Duration::from_millis(sim.snr_every_ms);
    let task = tokio::spawn(async move {
        if every.is_zero() {
            std::future::pending::<()>().await;
        }
        ocs.notify_every(every).await;
    });
    Ok(RunningSim {
        name: sim.name.clone(),
        kind: sim.kind,
        latency_ms: sim.latency_ms,
        addr,
        counters,
        task,
        _directory: None,
    })
}

/// A TDF (crate::sim_tdf): its Diameter address is the simulator's; the task holds it (and
/// sends its CCR-Ts and periodic reports) until the simulator is dropped.
async fn start_tdf(sim: &Simulator) -> std::io::Result<RunningSim> {
    let counters = Arc::new(SimCounters::default());
    let tdf = crate::sim_tdf::Tdf::start(sim, counters.clone()).await?;
    let addr = tdf.addr().ok_or_else(|| std::io::Error::other("the TDF did not bind"))?;
    let every = Duration::from_millis(sim.report_every_ms);
    let task = tokio::spawn(async move { tdf.run(every).await });
    Ok(RunningSim {
        name: sim.name.clone(),
        kind: sim.kind,
        latency_ms: sim.latency_ms,
        addr,
        counters,
        task,
        _directory: None,
    })
}

/// Size of each profile a peer NRF answers with: the NRF guide's UDM profile (Table 4-8).
const PEER_PROFILE_BYTES: usize = 3200;

/// A peer NRF's SearchResult: `answer_profiles` profiles of `answer_nf_type`, built once.
fn search_result(sim: &Simulator) -> Bytes {
    let nf_type = sim.answer_nf_type.as_deref().unwrap_or("UDM");
    let services = crate::profile::default_services(nf_type);
    let mut rng = crate::sched::Rng::new(0x5e72);
    let profiles: Vec<serde_json::Value> = (0..sim.answer_profiles)
        .map(|i| {
            let spec = crate::profile::ProfileSpec {
                nf_type,
                label: "set2",
                index: i,
                target_size: PEER_PROFILE_BYTES,
                services: &services,
                endpoint: None,
            };
            let id = rng.uuid();
            crate::profile::build(&spec, &id, &mut rng)
        })
        .collect();
    let body = serde_json::json!({"validityPeriod": 60, "nfInstances": profiles});
    Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
}

/// Whether the client opened with the HTTP/2 preface (h2c with prior knowledge), looking at
/// its first bytes without consuming them.
async fn starts_with_h2_preface(stream: &TcpStream) -> std::io::Result<bool> {
    let mut buf = [0u8; H2_PREFACE_START.len()];
    loop {
        let n = stream.peek(&mut buf).await?;
        if n == 0 || n == buf.len() || buf[..n] != H2_PREFACE_START[..n] {
            return Ok(buf[..n] == *H2_PREFACE_START);
        }
        // A prefix of the preface so far: wait for the rest (rare: one segment carries it).
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// An HTTP/1.1 connection (or h2 after an upgrade), on hyper: a task per request.
async fn serve_hyper(stream: TcpStream, sim: Arc<Sim>) {
    let svc = service_fn(move |req| answer(sim.clone(), req));
    let mut builder = Builder::new(TokioExecutor::new());
    builder.http2().max_concurrent_streams(100_000);
    let _ = builder.serve_connection(TokioIo::new(stream), svc).await;
}

/// Starts `sims`; a directory (kind `ldap`) is loaded with the subscribers of `g`.
pub async fn start_all(sims: &[Simulator], g: &Generators) -> std::io::Result<Vec<RunningSim>> {
    let mut out = Vec::new();
    for s in sims {
        out.push(match s.kind {
            SimKind::Ldap => start_ldap(s, g).await?,
            _ => start(s).await?,
        });
    }
    Ok(out)
}

/// A directory (crate::sim_ldap): slapd loaded and started off the runtime's workers (a large
/// range's bulk load takes seconds); its address is the simulator's.
async fn start_ldap(sim: &Simulator, g: &Generators) -> std::io::Result<RunningSim> {
    let counters = Arc::new(SimCounters::default());
    let (s, g, c) = (sim.clone(), g.clone(), counters.clone());
    let directory = tokio::task::spawn_blocking(move || crate::sim_ldap::start(&s, &g, c))
        .await
        .map_err(std::io::Error::other)??;
    Ok(RunningSim {
        name: sim.name.clone(),
        kind: sim.kind,
        latency_ms: sim.latency_ms,
        addr: directory.addr,
        counters,
        task: tokio::spawn(std::future::pending()),
        _directory: Some(directory),
    })
}

/// SLF: which subscribers belong to a group this NRF does not hold.
struct Remote {
    share: f64,
    nf_types: Vec<String>,
}

impl Remote {
    /// `<type>-grp-remote` for `share` of the subscribers (by the last two digits), of the
    /// listed types; otherwise `<type>-grp-0`.
    #[cfg(test)]
    fn group(&self, nf_type: &str, subscriber: &str) -> String {
        let suffix = if self.is_remote(nf_type, subscriber) { "remote" } else { "0" };
        format!("{}-grp-{suffix}", nf_type.to_ascii_lowercase())
    }

    /// Whether `subscriber` is in the remote group for `nf_type`.
    fn is_remote(&self, nf_type: &str, subscriber: &str) -> bool {
        let mut bucket = 0u32;
        let mut scale = 1u32;
        for d in subscriber.bytes().rev().take_while(u8::is_ascii_digit).take(2) {
            bucket += u32::from(d - b'0') * scale;
            scale *= 10;
        }
        self.nf_types.iter().any(|t| t == nf_type) && f64::from(bucket) < self.share * 100.0
    }
}

async fn answer(
    sim: Arc<Sim>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = req.into_parts();
    let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let reply = sim.receive(&parts.method, &parts.uri, &body);
    if !sim.latency.is_zero() {
        tokio::time::sleep(sim.latency).await;
    }
    let mut rsp = Response::builder().status(reply.status);
    if reply.body.is_some() {
        rsp = rsp.header("content-type", "application/json");
    }
    if let Some(l) = &reply.location {
        rsp = rsp.header("location", l);
    }
    Ok(rsp.body(Full::new(reply.body.unwrap_or_default())).unwrap())
}

/// `application/x-www-form-urlencoded` decoding of one query key or value; borrowed when
/// there is nothing to decode (the usual case).
fn pct_decode(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.bytes().any(|c| c == b'%' || c == b'+') {
        return std::borrow::Cow::Borrowed(s);
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                match (hex(b[i + 1]), hex(b[i + 2])) {
                    (Some(h), Some(l)) => out.push(h << 4 | l),
                    _ => out.extend_from_slice(&b[i..i + 3]),
                }
                i += 3;
                continue;
            }
            b'+' => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    std::borrow::Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::h2client::{Call, H2Conn, Want};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn simulator(kind: SimKind, latency_ms: u64) -> Simulator {
        Simulator {
            name: "sim".into(),
            kind,
            latency_ms,
            description: String::new(),
            remote_share: 0.12,
            remote_nf_types: vec!["UDM".into()],
            answer_profiles: 0,
            answer_nf_type: None,
            origin_host: None,
            origin_realm: None,
            statuses: Default::default(),
            snr_statuses: Default::default(),
            snr_every_ms: 0,
            report_apps: Vec::new(),
            report_every_ms: 0,
        }
    }

    fn get(path: String) -> Call<'static> {
        Call {
            method: &Method::GET,
            path: Bytes::from(path),
            body: None,
            content_type: None,
            headers: &[],
            condition: None,
            authorization: None,
            want: Want::default(),
        }
    }

    #[tokio::test]
    async fn many_held_queries_on_one_h2_connection_are_each_answered_after_the_latency() {
        let s = start(&simulator(SimKind::Slf, 40)).await.unwrap();
        let conn = Arc::new(H2Conn::new(&s.base_url(), Duration::from_secs(5)).unwrap());
        conn.open().await.unwrap();
        let mut tasks = Vec::new();
        for i in 0..300u32 {
            let conn = conn.clone();
            tasks.push(tokio::spawn(async move {
                // Spread over ~60 ms, so answers fall due while others arrive.
                tokio::time::sleep(Duration::from_micros(u64::from(i) * 200)).await;
                let t = std::time::Instant::now();
                let path = format!(
                    "/nudr-group-id-map/v1/nf-group-ids?nf-type=UDM&subscriberId=imsi-00101{i:010}"
                );
                let a = conn.send(get(path)).await.unwrap();
                (i, a, t.elapsed())
            }));
        }
        for t in tasks {
            let (i, a, took) = t.await.unwrap();
            assert_eq!(a.status, 200, "query {i}");
            assert!(took >= Duration::from_millis(40), "query {i} answered after {took:?}");
            assert!(took < Duration::from_secs(2), "query {i} answered after {took:?}");
            let body = format!(
                r#"{{"nfGroupIds":{{"UDM":"udm-grp-{}"}},"subscriberId":"imsi-00101{i:010}"}}"#,
                if i % 100 < 12 { "remote" } else { "0" }
            );
            assert_eq!(a.body_len, body.len(), "query {i}");
        }
        // A query the SLF does not understand: 400, counted as rejected, on the same path.
        let bad = conn.send(get("/nudr-group-id-map/v1/nf-group-ids?nf-type=UDM".into()));
        assert_eq!(bad.await.unwrap().status, 400);
        assert_eq!(s.counters.received.load(Ordering::Relaxed), 301);
        assert_eq!(s.counters.rejected.load(Ordering::Relaxed), 1);
    }

    #[tokio::test]
    async fn slf_answer_escapes_what_it_echoes() {
        let s = start(&simulator(SimKind::Slf, 0)).await.unwrap();
        let client = sbi::client::SbiClient::new(&Default::default()).unwrap();
        let url = format!(
            "{}/nudr-group-id-map/v1/nf-group-ids?nf-type=UDM&subscriberId=a%22b%5Cc+d",
            s.base_url()
        );
        let rsp = client.get(&url).send().await.unwrap();
        assert_eq!(rsp.status(), 200);
        let v: serde_json::Value = rsp.json().unwrap();
        assert_eq!(v["subscriberId"], "a\"b\\c d");
        // No trailing digits: bucket 0, under the remote share.
        assert_eq!(v["nfGroupIds"]["UDM"], "udm-grp-remote");
    }

    #[tokio::test]
    async fn notification_sink_counts_array_elements_and_drains_large_bodies_over_h2() {
        let s = start(&simulator(SimKind::NotificationSink, 20)).await.unwrap();
        let conn = H2Conn::new(&s.base_url(), Duration::from_secs(5)).unwrap();
        let post = |body: Bytes| Call {
            method: &Method::POST,
            path: Bytes::from_static(b"/notify/1"),
            body: Some(body),
            content_type: None,
            headers: &[],
            condition: None,
            authorization: None,
            want: Want::default(),
        };
        let t = std::time::Instant::now();
        let a = conn.send(post(Bytes::from_static(b"[{\"a\":1},{\"b\":2},3]"))).await.unwrap();
        assert_eq!(a.status, 204);
        assert!(t.elapsed() >= Duration::from_millis(20));
        // Larger than the default 64 KiB windows: the sink must release what it reads.
        let big = format!("{{\"x\":\"{}\"}}", "y".repeat(3 << 20));
        let a = conn.send(post(Bytes::from(big))).await.unwrap();
        assert_eq!(a.status, 204);
        assert_eq!(s.counters.received.load(Ordering::Relaxed), 2);
        assert_eq!(s.counters.items.load(Ordering::Relaxed), 4);
        assert_eq!(s.counters.rejected.load(Ordering::Relaxed), 0);
    }

    #[tokio::test]
    async fn the_chf_subscribes_with_a_status_per_counter_and_a_location_then_unsubscribes() {
        let s = start(&simulator(SimKind::Chf, 0)).await.unwrap();
        let conn = H2Conn::new(&s.base_url(), Duration::from_secs(5)).unwrap();
        let body = br#"{"supi":"imsi-001010000000001","policyCounterIds":["data-cap","roaming"],"notifUri":"http://pcf/cb"}"#;
        let a = conn
            .send(Call {
                method: &Method::POST,
                path: Bytes::from_static(b"/nchf-spendinglimitcontrol/v1/subscriptions"),
                body: Some(Bytes::from_static(body)),
                content_type: None,
                headers: &[],
                condition: None,
                authorization: None,
                want: Want { location: true, body: true, ..Want::default() },
            })
            .await
            .unwrap();
        assert_eq!(a.status, 201);
        let loc = a.location.unwrap().to_str().unwrap().to_string();
        assert_eq!(loc, format!("{}/nchf-spendinglimitcontrol/v1/subscriptions/1", s.base_url()));
        let v: serde_json::Value = serde_json::from_slice(&a.body.unwrap()).unwrap();
        assert_eq!(v["supi"], "imsi-001010000000001");
        assert_eq!(v["statusInfos"]["roaming"]["currentStatus"], "valid");
        assert_eq!(v["statusInfos"]["data-cap"]["policyCounterId"], "data-cap");
        let path = loc.trim_start_matches(&s.base_url()).to_string();
        let del = |path: String| Call {
            method: &Method::DELETE,
            path: Bytes::from(path),
            body: None,
            content_type: None,
            headers: &[],
            condition: None,
            authorization: None,
            want: Want::default(),
        };
        assert_eq!(conn.send(del(path)).await.unwrap().status, 204);
        // A subscribe without counters, or another path, is not understood.
        assert_eq!(
            conn.send(del("/nchf-spendinglimitcontrol/v1/subscriptions".into()))
                .await
                .unwrap()
                .status,
            404
        );
        let c = &s.counters;
        let got =
            [&c.received, &c.created, &c.deleted, &c.rejected].map(|n| n.load(Ordering::Relaxed));
        assert_eq!(got, [3, 1, 1, 1]);
    }

    #[tokio::test]
    async fn http1_clients_are_still_served() {
        let s = start(&simulator(SimKind::PeerNrf, 10)).await.unwrap();
        let mut tcp = TcpStream::connect(s.addr).await.unwrap();
        tcp.write_all(
            b"GET /nnrf-disc/v1/nf-instances?target-nf-type=UDM HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        )
        .await
        .unwrap();
        let mut rsp = String::new();
        tcp.read_to_string(&mut rsp).await.unwrap();
        assert!(rsp.starts_with("HTTP/1.1 200"), "{rsp}");
        let body = rsp.split("\r\n\r\n").nth(1).unwrap_or_default();
        assert_eq!(crate::profile_count::count(body.as_bytes()), Some(0), "{rsp}");
        assert_eq!(s.counters.received.load(Ordering::Relaxed), 1);
    }

    /// The AMF keeps the subscribed N1 callback, takes a transfer (over h2c, as the PCF sends
    /// it) and POSTs the UE's MANAGE UE POLICY COMPLETE with the command's PTI to the callback.
    #[tokio::test]
    async fn the_amf_answers_a_transfer_with_the_ues_complete() {
        let amf = start(&simulator(SimKind::Amf, 0)).await.unwrap();
        let pcf = start(&simulator(SimKind::NotificationSink, 0)).await.unwrap();
        let c = sbi::client::SbiClient::new(&sbi::client::ClientConfig::default()).unwrap();
        let base = format!("{}/namf-comm/v1/ue-contexts/imsi-001010000000001", amf.base_url());
        let cb = format!("{}/npcf-callback/v1/ue-policy/a/n1-message-notify", pcf.base_url());
        let r = c
            .post(&format!("{base}/n1-n2-messages/subscriptions"))
            .json(&serde_json::json!({"n1MessageClass": "UPDP", "n1NotifyCallbackUri": cb}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::CREATED);
        let body = b"--b\r\nContent-Type: application/json\r\n\r\n{}\r\n--b\r\nContent-Type: application/vnd.3gpp.5gnas\r\nContent-Id: n1msg\r\n\r\n\x05\x01\x00\x00\r\n--b--\r\n";
        let r = c
            .post(&format!("{base}/n1-n2-messages"))
            .header(http::header::CONTENT_TYPE, "multipart/related; boundary=b")
            .body(&body[..])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        for _ in 0..100 {
            if amf.counters.sent.load(Ordering::Relaxed) == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(amf.counters.sent.load(Ordering::Relaxed), 1);
        assert_eq!(pcf.counters.received.load(Ordering::Relaxed), 1);
        // Anything else is a sink: an AM policy UpdateNotify.
        let r = c
            .post(&format!("{}/am/1/update", amf.base_url()))
            .json(&serde_json::json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::NO_CONTENT);
    }

    /// A peer NRF standing for another NRF set answers with that set's profiles.
    #[test]
    fn a_peer_nrf_answers_the_profiles_it_holds() {
        let mut sim = simulator(SimKind::PeerNrf, 0);
        sim.answer_profiles = 6;
        sim.answer_nf_type = Some("UDM".into());
        let body = search_result(&sim);
        assert_eq!(crate::profile_count::count(&body), Some(6));
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert!(v["nfInstances"].as_array().unwrap().iter().all(|p| p["nfType"] == "UDM"));
        assert_eq!(v["validityPeriod"], 60);
    }

    #[tokio::test]
    async fn slf_simulator_answers_group_id_map_after_its_latency() {
        let sim = Simulator {
            name: "slf".into(),
            kind: SimKind::Slf,
            latency_ms: 30,
            description: String::new(),
            remote_share: 0.12,
            remote_nf_types: vec!["UDM".into()],
            answer_profiles: 0,
            answer_nf_type: None,
            origin_host: None,
            origin_realm: None,
            statuses: Default::default(),
            snr_statuses: Default::default(),
            snr_every_ms: 0,
            report_apps: Vec::new(),
            report_every_ms: 0,
        };
        let s = start(&sim).await.unwrap();
        let client = sbi::client::SbiClient::new(&Default::default()).unwrap();
        let t = std::time::Instant::now();
        let url = format!(
            "{}/nudr-group-id-map/v1/nf-group-ids?nf-type=UDM&subscriberId=imsi-001010000000050",
            s.base_url()
        );
        let rsp = client.get(&url).send().await.unwrap();
        assert!(t.elapsed() >= Duration::from_millis(30));
        assert_eq!(rsp.status(), 200);
        let v: serde_json::Value = rsp.json().unwrap();
        assert_eq!(v["nfGroupIds"]["UDM"], "udm-grp-0");
        assert_eq!(v["subscriberId"], "imsi-001010000000050");
        let bad = client
            .get(&format!("{}/nudr-group-id-map/v1/nf-group-ids", s.base_url()))
            .send()
            .await
            .unwrap();
        assert_eq!(bad.status(), 400);
        assert_eq!(s.counters.received.load(Ordering::Relaxed), 2);
        assert_eq!(s.counters.rejected.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn slf_maps_a_share_of_subscribers_to_a_remote_group() {
        let r = Remote { share: 0.12, nf_types: vec!["UDM".into()] };
        assert_eq!(r.group("UDM", "imsi-001010000000011"), "udm-grp-remote");
        assert_eq!(r.group("UDM", "imsi-001010000000012"), "udm-grp-0");
        assert_eq!(r.group("AUSF", "imsi-001010000000011"), "ausf-grp-0");
        let n = (0..10_000)
            .filter(|i| r.group("UDM", &format!("imsi-00101{i:010}")).ends_with("remote"))
            .count();
        assert_eq!(n, 1200);
    }

    #[test]
    fn json_strings_are_escaped_as_serde_json_does() {
        for s in ["imsi-001010000000011", "a\"b\\c d", "tab\there\u{1f}é", "", "\"\""] {
            let mut out = Vec::new();
            push_json_str(&mut out, s.as_bytes(), false);
            assert_eq!(String::from_utf8(out).unwrap(), serde_json::to_string(s).unwrap(), "{s}");
        }
        let mut out = Vec::new();
        push_json_str(&mut out, "U\"D\nM".as_bytes(), true);
        assert_eq!(serde_json::from_slice::<String>(&out).unwrap(), "u\"d\nm");
    }

    #[test]
    fn percent_decoding() {
        assert!(matches!(pct_decode("imsi-001"), std::borrow::Cow::Borrowed("imsi-001")));
        assert_eq!(pct_decode("a%2Cb+c"), "a,b c");
        assert_eq!(pct_decode("%zz"), "%zz");
        assert_eq!(pct_decode("x%4"), "x%4");
    }
}
