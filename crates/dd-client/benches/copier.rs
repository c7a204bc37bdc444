//! What copying costs the NF (issue #24: at most 2 µs of NF CPU per copied message, the POST's
//! share included).
//!
//! `cargo bench -p fivecore-dd-client --bench copier`
//!
//! 1. `tap/n7_create`: criterion times the request path's work for one N7 exchange, a ~1.2 KB
//!    SmPolicyContextData create and its ~0.6 KB 201, both copied (two envelopes): correlation
//!    ids, encode into the batch under the lock, sealing. A live sender drains the batches to
//!    an ingest receiver meanwhile (on other threads, not timed here); each sample waits for
//!    the buffer to empty before the next, and the run fails if any copy was dropped.
//! 2. `paced`: 25,000 exchanges a second (50,000 copies/s) for 4 s from one thread, in bursts of
//!    25 a millisecond, with the CPU time of that thread during the bursts (the tap) and of the
//!    sender's thread (sealing on linger, the
//!    POSTs, the h2 client's I/O) read from CLOCK_THREAD_CPUTIME_ID: NF CPU per copied message,
//!    all of it. The receiver (a bare hyper h2 server counting frames) runs on its own thread
//!    and is not counted: it is the Data Director's cost.

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
    std::thread::spawn(move || {
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
                    let _ = hyper::server::conn::http2::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    )
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

fn copier(uri: String) -> Running {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let config =
            CopyConfig { enabled: true, uri, buffer_bytes: 512 << 20, ..CopyConfig::default() };
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
    let mut r = prometheus_client::registry::Registry::default();
    c.register_metrics(&mut r);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &r).unwrap();
    text.lines()
        .filter(|l| l.starts_with("dd_copies_dropped_total"))
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

fn tap_bench(c: &mut Criterion) {
    let (addr, _) = receiver();
    let run = copier(format!("http://{addr}"));
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
            drain(&run.copier);
            let t0 = Instant::now();
            for _ in 0..iters {
                x.copy(&*tap);
            }
            t0.elapsed()
        })
    });
    drain(&run.copier);
    assert_eq!(dropped(&run.copier), 0.0, "a copy was dropped: the figure is not the full path");
}

fn paced(_: &mut Criterion) {
    const PER_S: u64 = 25_000;
    const SECS: u64 = 4;
    let (addr, received) = receiver();
    let run = copier(format!("http://{addr}"));
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
    // Bursts of 25 exchanges every millisecond; the tap's CPU is read around each burst only,
    // so the pacing (sleeps) is not counted and the clock reads cost ~10 ns per copy.
    const BURST: u64 = PER_S / 1000;
    let start = Instant::now();
    let n = PER_S * SECS;
    let mut tap_cpu = Duration::ZERO;
    for ms in 0..n / BURST {
        let due = start + Duration::from_millis(ms);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let t = thread_cpu();
        for _ in 0..BURST {
            x.copy(&*tap);
        }
        tap_cpu += thread_cpu() - t;
    }
    while received.load(Ordering::Relaxed) < r0 + 2 * n {
        std::thread::sleep(Duration::from_millis(1));
    }
    let s1 = sender_cpu();
    let copies = (2 * n) as f64;
    let tap_ns = tap_cpu.as_nanos() as f64 / copies;
    let sender_ns = (s1 - s0).as_nanos() as f64 / copies;
    println!(
        "paced: {} copies ({} exchanges/s for {SECS} s): tap {:.0} ns + sender {:.0} ns = {:.0} ns of NF CPU per copied message; dropped {}",
        2 * n,
        PER_S,
        tap_ns,
        sender_ns,
        tap_ns + sender_ns,
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
