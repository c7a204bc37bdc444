//! What copying costs the NF (issue #24: at most 2 µs of NF CPU per copied message, the POST's
//! share included).
//!
//! `cargo bench -p fivecore-dd-client --bench copier`
//!
//! 1. `tap/n7_create`: criterion times the request path's work for one N7 exchange, a ~1.2 KB
//!    SmPolicyContextData create and its ~0.6 KB 201, both copied (two envelopes): correlation
//!    ids, encode into the batch under the lock, sealing. A live sender drains the batches to
//!    an ingest receiver meanwhile (on other threads, not timed here); every 20,000 exchanges
//!    the timing pauses until the buffer is empty, and the run fails if any copy was dropped.
//! 2. `paced`: 25,000 exchanges a second (50,000 copies/s; `DD_BENCH_RATE` for another rate,
//!    `DD_BENCH_LINGER_MS` for another linger) for 4 s from one thread, in a burst every
//!    millisecond: the time spent in the bursts (the tap) and the CPU time of the sender's
//!    thread (sealing on linger, the POSTs, the h2 client's I/O) read from
//!    CLOCK_THREAD_CPUTIME_ID, per copied message: all the NF's cost. The receiver (a bare
//!    hyper h2 server with an SBI port's HTTP/2 settings, counting frames) runs on its own
//!    thread and is not counted: it is the Data Director's.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use criterion::{criterion_group, Criterion};
use dd_client::envelope::Frames;
use dd_client::{Copier, CopyConfig};
use http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use sbi::client::{ClientConfig, SbiClient};
use sbi::layer::tap::{Exchange, MessageCopy, MessageTap, Peer, TriggerPoint};

/// The SmPolicyContextData an SMF sends (Open5GS v2.8's attributes), about 1.2 KB.
fn n7_request() -> Vec<u8> {
    let body = serde_json::json!({
        "supi": "imsi-999700000000001", "gpsi": "msisdn-491511234567", "pduSessionId": 1,
        "pduSessionType": "IPV4", "dnn": "internet",
        "notificationUri": "http://127.0.0.4:7777/nsmf-callback/v1/sm-policy-notify/1",
        "accessType": "3GPP_ACCESS", "ratType": "NR",
        "servingNetwork": {"mcc": "999", "mnc": "70"},
        "userLocationInfo": {"nrLocation": {
            "tai": {"plmnId": {"mcc": "999", "mnc": "70"}, "tac": "000001"},
            "ncgi": {"plmnId": {"mcc": "999", "mnc": "70"}, "nrCellId": "000000010"},
            "ueLocationTimestamp": "2026-11-26T10:00:00.000000Z"}},
        "ueTimeZone": "+00:00", "pei": "imeisv-4370816125816151", "ipv4Address": "10.45.0.1",
        "subsSessAmbr": {"uplink": "1 Gbps", "downlink": "2 Gbps"},
        "subsDefQos": {"5qi": 9, "arp": {"priorityLevel": 8, "preemptCap": "NOT_PREEMPT",
            "preemptVuln": "NOT_PREEMPTABLE"}, "priorityLevel": 8},
        "sliceInfo": {"sst": 1, "sd": "000001"}, "suppFeat": "4000000",
        "smfId": "5a7bd676-ceeb-44bb-95e0-f6a55a328b03",
        "chargingcharacteristics": "0800",
        "refQosIndication": true, "qosFlowUsage": "GENERAL",
        "online": false, "offline": true, "3gppPsDataOffStatus": false,
        "ipDomain": "ims", "interGrpIds": ["group-a", "group-b"],
        "ueLocationTimestamp": "2026-11-26T10:00:00.000000Z",
        "vplmnQos": {"5qi": 9, "sessAmbr": {"uplink": "1 Gbps", "downlink": "2 Gbps"}},
    });
    serde_json::to_vec(&body).unwrap()
}

/// An SmPolicyDecision, about 0.6 KB.
fn n7_answer() -> Vec<u8> {
    let body = serde_json::json!({
        "sessRules": {"s1": {"sessRuleId": "s1",
            "authSessAmbr": {"uplink": "1 Gbps", "downlink": "2 Gbps"},
            "authDefQos": {"5qi": 9, "arp": {"priorityLevel": 8, "preemptCap": "NOT_PREEMPT",
                "preemptVuln": "PREEMPTABLE"}}}},
        "pccRules": {"default": {"pccRuleId": "default", "precedence": 255,
            "flowInfos": [{"flowDescription": "permit out ip from any to assigned",
                "flowDirection": "BIDIRECTIONAL"}], "refQosData": ["q1"]}},
        "qosDecs": {"q1": {"qosId": "q1", "5qi": 9, "arp": {"priorityLevel": 8,
            "preemptCap": "NOT_PREEMPT", "preemptVuln": "PREEMPTABLE"}}},
        "policyCtrlReqTriggers": ["PLMN_CH", "RES_MO_RE", "AC_TY_CH", "UE_IP_CH"],
        "suppFeat": "4000000",
    });
    serde_json::to_vec(&body).unwrap()
}

struct Exchange1 {
    uri: Uri,
    req_headers: HeaderMap,
    req_body: Vec<u8>,
    ans_headers: HeaderMap,
    ans_body: Vec<u8>,
}

impl Exchange1 {
    fn new() -> Self {
        let uri: Uri = "http://127.0.0.1:7003/npcf-smpolicycontrol/v1/sm-policies".parse().unwrap();
        let mut req_headers = HeaderMap::new();
        for (n, v) in [
            ("content-type", "application/json"),
            ("accept", "application/json,application/problem+json"),
            ("user-agent", "SMF-5a7bd676-ceeb-44bb-95e0-f6a55a328b03"),
            ("3gpp-sbi-sender-timestamp", "Thu, 26 Nov 2026 10:00:00.123 GMT"),
            ("3gpp-sbi-max-rsp-time", "3000"),
            ("x-request-id", "c2a8a1f4-44b4-4f3c-9d1c-7b1d1f4b2c11"),
        ] {
            req_headers.insert(n, HeaderValue::from_static(v));
        }
        let mut ans_headers = HeaderMap::new();
        ans_headers.insert("content-type", HeaderValue::from_static("application/json"));
        ans_headers.insert(
            "location",
            HeaderValue::from_static(
                "http://127.0.0.1:7003/npcf-smpolicycontrol/v1/sm-policies/019ac1a0-58f0-7c53-a1b2-5d6e0b0f4e21",
            ),
        );
        ans_headers.insert(
            "x-request-id",
            HeaderValue::from_static("c2a8a1f4-44b4-4f3c-9d1c-7b1d1f4b2c11"),
        );
        Exchange1 { uri, req_headers, req_body: n7_request(), ans_headers, ans_body: n7_answer() }
    }

    /// What the server's tap layer does for one exchange.
    fn copy(&self, tap: &dyn MessageTap) {
        let request_at = SystemTime::now();
        let mut ex = Exchange::default();
        let m = MessageCopy {
            trigger: TriggerPoint::IngressRequest,
            request_at,
            answer_at: None,
            method: &Method::POST,
            uri: &self.uri,
            operation: "Npcf_SMPolicyControl_Create",
            stream_id: 0,
            peer: Peer::Addr(SocketAddr::from(([127, 0, 0, 1], 40123))),
            status: None,
            headers: &self.req_headers,
            body: &self.req_body,
        };
        tap.copy(&m, &mut ex);
        let a = MessageCopy {
            trigger: TriggerPoint::IngressResponse,
            answer_at: Some(SystemTime::now()),
            status: Some(StatusCode::CREATED),
            headers: &self.ans_headers,
            body: &self.ans_body,
            ..m
        };
        tap.copy(&a, &mut ex);
    }
}

/// A bare h2c ingest on its own thread: counts the frames of each POST, answers 204.
fn receiver() -> (SocketAddr, Arc<AtomicU64>) {
    let frames = Arc::new(AtomicU64::new(0));
    let (tx, rx) = std::sync::mpsc::channel();
    let counted = frames.clone();
    let thread = std::thread::Builder::new().name("dd-ingest".into());
    let _ = thread.spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(l.local_addr().unwrap()).unwrap();
            loop {
                let (tcp, _) = l.accept().await.unwrap();
                let counted = counted.clone();
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(
                        move |req: hyper::Request<hyper::body::Incoming>| {
                            let counted = counted.clone();
                            async move {
                                let body = req.into_body().collect().await.unwrap().to_bytes();
                                let n = Frames::new(body).filter(|f| f.is_ok()).count();
                                counted.fetch_add(n as u64, Ordering::Relaxed);
                                let mut r = hyper::Response::new(Full::new(Bytes::new()));
                                *r.status_mut() = hyper::StatusCode::NO_CONTENT;
                                Ok::<_, std::convert::Infallible>(r)
                            }
                        },
                    );
                    // The HTTP/2 settings of an SBI port (sbi::server::Http2Config), which
                    // the Data Director's ingest API is: 64 KiB frames, 1 MiB stream window.
                    let _ = hyper::server::conn::http2::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    )
                    .max_frame_size(64 * 1024)
                    .initial_stream_window_size(1024 * 1024)
                    .initial_connection_window_size(16 * 1024 * 1024)
                    .serve_connection(hyper_util::rt::TokioIo::new(tcp), svc)
                    .await;
                });
            }
        });
    });
    (rx.recv().unwrap(), frames)
}

/// The copier, its sender on its own current-thread runtime and thread.
struct Running {
    copier: Arc<Copier>,
    handle: tokio::runtime::Handle,
}

fn copier(uri: String, linger_ms: u64) -> Running {
    let (tx, rx) = std::sync::mpsc::channel();
    let thread = std::thread::Builder::new().name("dd-sender".into());
    let _ = thread.spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let config = CopyConfig {
            enabled: true,
            uri,
            linger_ms,
            buffer_bytes: 512 << 20,
            ..CopyConfig::default()
        };
        let client = SbiClient::new(&ClientConfig::default()).unwrap();
        let copier = {
            let _in = rt.enter();
            Arc::new(
                Copier::start(&config, "PCF", "5a7bd676-ceeb-44bb-95e0-f6a55a328b03", client)
                    .unwrap(),
            )
        };
        tx.send((copier, rt.handle().clone())).unwrap();
        rt.block_on(std::future::pending::<()>());
    });
    let (copier, handle) = rx.recv().unwrap();
    Running { copier, handle }
}

fn dropped(c: &Copier) -> f64 {
    metric(c, "dd_copies_dropped_total")
}

/// The sum of a metric's series.
fn metric(c: &Copier, name: &str) -> f64 {
    let mut r = prometheus_client::registry::Registry::default();
    c.register_metrics(&mut r);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &r).unwrap();
    text.lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn drain(c: &Copier) {
    while c.buffered_bytes() > 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given; the clock id is a constant.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Exchanges timed between two drains of the buffer: 20,000 are ~70 MB of copies.
const CHUNK: u64 = 20_000;

fn tap_bench(c: &mut Criterion) {
    let (addr, _) = receiver();
    let run = copier(format!("http://{addr}"), 2);
    let tap = run.copier.sbi_tap();
    let x = Exchange1::new();
    eprintln!(
        "request {} B + {} B of headers, answer {} B",
        x.req_body.len(),
        x.req_headers.iter().map(|(n, v)| n.as_str().len() + v.len()).sum::<usize>(),
        x.ans_body.len()
    );
    c.bench_function("tap/n7_create (request + answer: 2 copies)", |b| {
        b.iter_custom(|iters| {
            // Timed in chunks the sender drains in between (untimed), so the bound is never
            // reached: criterion's longer samples would outrun any sender.
            let mut timed = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                drain(&run.copier);
                let chunk = left.min(CHUNK);
                let t0 = Instant::now();
                for _ in 0..chunk {
                    x.copy(&*tap);
                }
                timed += t0.elapsed();
                left -= chunk;
            }
            timed
        })
    });
    drain(&run.copier);
    assert_eq!(dropped(&run.copier), 0.0, "a copy was dropped: the figure is not the full path");
}

fn paced(_: &mut Criterion) {
    const SECS: u64 = 4;
    // DD_BENCH_RATE (exchanges a second, a multiple of 1000) and DD_BENCH_LINGER_MS: another
    // load than 25,000/s and another linger than the default 2 ms.
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let linger = env("DD_BENCH_LINGER_MS").unwrap_or(2);
    let per_s = env("DD_BENCH_RATE").unwrap_or(25_000).max(1000) / 1000 * 1000;
    let (addr, received) = receiver();
    let run = copier(format!("http://{addr}"), linger);
    let tap = run.copier.sbi_tap();
    let x = Exchange1::new();
    // Warm the connection up.
    x.copy(&*tap);
    while received.load(Ordering::Relaxed) < 2 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let sender_cpu =
        || run.handle.block_on(async { tokio::spawn(async { thread_cpu() }).await.unwrap() });
    let (s0, r0) = (sender_cpu(), received.load(Ordering::Relaxed));
    // Bursts (25 exchanges at 25,000/s) every millisecond, timed by the monotonic clock (vDSO,
    // ~25 ns a read): the thread's CPU clock is a system call here, whose few microseconds per
    // read counted against a burst of two exchanges would double the tap's cost at low rates.
    // Wall time is CPU time while the thread is not preempted, so on a busy machine this
    // overstates the tap a little, never understates it.
    let burst = per_s / 1000;
    let start = Instant::now();
    let n = per_s * SECS;
    let mut tap_time = Duration::ZERO;
    for ms in 0..n / burst {
        let due = start + Duration::from_millis(ms);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let t = Instant::now();
        for _ in 0..burst {
            x.copy(&*tap);
        }
        tap_time += t.elapsed();
    }
    while received.load(Ordering::Relaxed) < r0 + 2 * n {
        std::thread::sleep(Duration::from_millis(1));
    }
    let s1 = sender_cpu();
    let posts = metric(&run.copier, "dd_copy_batches_total{result=\"delivered\"}");
    let copies = (2 * n) as f64;
    let tap_ns = tap_time.as_nanos() as f64 / copies;
    let sender_ns = (s1 - s0).as_nanos() as f64 / copies;
    println!(
        "paced: {} copies ({} exchanges/s for {SECS} s, linger {linger} ms): tap {:.0} ns + sender {:.0} ns = {:.0} ns of NF CPU per copied message; {:.0} copies per POST; dropped {}",
        2 * n,
        per_s,
        tap_ns,
        sender_ns,
        tap_ns + sender_ns,
        copies / posts,
        dropped(&run.copier)
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(2));
    targets = tap_bench, paced
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
