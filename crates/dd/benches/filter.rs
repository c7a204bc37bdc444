//! Filter cost per copy: what a feed pays for each copy of MAIN it reads. The copies are decoded
//! envelopes of a PCF's SM policy traffic (4,096 subscribers, requests and answers, some
//! failures), as the feed's consumer holds them; each iteration filters the next one.
//!
//! - `metadata`: the typical feed filter: NF types, answers of class 2xx or 4xx, an IMSI range
//!   and a 10 % sample by SUPI. No body is read.
//! - `metadata + body`: the same, then a body field (`sliceInfo.sst == 1`) for the copies that
//!   get that far: the body is parsed once per such copy.
//! - `body only`: a body field alone, so every copy's body (about 200 bytes of JSON) is parsed:
//!   what a body condition costs when it is reached.
//! - `pass all`: an empty filter, the floor.
//!
//! Times are the benchmark thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), so other work on the
//! machine does not count. `cargo bench -p fivecore-dd --bench filter`; docs/dd.md has the figures.

use std::hint::black_box;

use bytes::BytesMut;
use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{criterion_group, criterion_main, Criterion};
use dd::transforms::filter::{Filter, FilterConfig};
use dd_client::envelope::{encode, Copy, CopyMeta, Protocol, TriggerPoint};

fn copies() -> Vec<Copy> {
    let body = br#"{"supi":"imsi-001010000000001","pduSessionId":1,"dnn":"internet","sliceInfo":{"sst":1,"sd":"000001"},"notificationUri":"http://smf.example/notify","subsSessAmbr":{"uplink":"1 Gbps","downlink":"2 Gbps"}}"#;
    let mut out = Vec::new();
    for i in 0..4096u64 {
        let supi = format!("imsi-00101{:010}", i * 37 % 100_000);
        let session = format!("{i}");
        for trigger in [TriggerPoint::IngressRequest, TriggerPoint::IngressResponse] {
            let meta = CopyMeta {
                trigger,
                protocol: Protocol::Http2,
                timestamp_ns: 1_790_000_000_000_000_000 + i * 1000,
                sequence: i,
                transaction: i,
                stream_id: 1,
                status: match trigger {
                    TriggerPoint::IngressRequest => 0,
                    _ if i % 50 == 0 => 404,
                    _ => 201,
                },
                nf_type: "PCF",
                nf_instance: "5a7bd676-ceeb-44bb-95e0-f6a55a328b03",
                service: "npcf-smpolicycontrol",
                operation: "Npcf_SMPolicyControl_Create",
                method: "POST",
                path: "/npcf-smpolicycontrol/v1/sm-policies",
                peer: "127.0.0.1:40000",
                supi: &supi,
                gpsi: "",
                session_id: &session,
            };
            let headers: [(&[u8], &[u8]); 3] = [
                (b":method", b"POST"),
                (b":path", b"/npcf-smpolicycontrol/v1/sm-policies"),
                (b"content-type", b"application/json"),
            ];
            let mut b = BytesMut::new();
            encode(&meta, headers, body, &mut b).expect("encodes");
            out.push(Copy::decode(b.freeze()).expect("decodes"));
        }
    }
    out
}

fn compile(json: &str) -> Filter {
    let config: FilterConfig = serde_json::from_str(json).expect("a filter");
    Filter::compile(&config).expect("valid")
}

const METADATA: &str = r#"{"conditions": [
    {"nf_type": ["PCF", "BSF"]},
    {"status": ["2xx", "4xx"]},
    {"supi": {"ranges": [{"plmn": "00101", "msin_from": "0000000000", "msin_to": "0000099999"}]}},
    {"sample": {"percent": 10, "by": "supi"}}
]}"#;

const WITH_BODY: &str = r#"{"conditions": [
    {"nf_type": ["PCF", "BSF"]},
    {"status": ["2xx", "4xx"]},
    {"supi": {"ranges": [{"plmn": "00101", "msin_from": "0000000000", "msin_to": "0000099999"}]}},
    {"sample": {"percent": 10, "by": "supi"}},
    {"body": {"path": "sliceInfo.sst", "equals": 1}}
]}"#;

const BODY_ONLY: &str = r#"{"conditions": [{"body": {"path": "sliceInfo.sst", "equals": 1}}]}"#;

fn filters(c: &mut Criterion<ThreadCpu>) {
    let copies = copies();
    for (name, filter) in [
        ("metadata", compile(METADATA)),
        ("metadata + body", compile(WITH_BODY)),
        ("body only", compile(BODY_ONLY)),
        ("pass all", compile("{}")),
    ] {
        let passed = copies.iter().filter(|c| filter.matches(c)).count();
        println!("{name}: {passed} of {} copies pass", copies.len());
        let mut i = 0usize;
        c.bench_function(name, |b| {
            b.iter(|| {
                i = (i + 1) % copies.len();
                black_box(filter.matches(black_box(&copies[i])))
            })
        });
    }
}

/// The calling thread's CPU time, in nanoseconds.
struct ThreadCpu;

fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid timespec for the call to fill.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    assert_eq!(rc, 0, "clock_gettime");
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

impl Measurement for ThreadCpu {
    type Intermediate = u64;
    type Value = u64;
    fn start(&self) -> u64 {
        thread_cpu_ns()
    }
    fn end(&self, i: u64) -> u64 {
        thread_cpu_ns().saturating_sub(i)
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        // Nanoseconds, as wall time is.
        WallTime.formatter()
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(ThreadCpu).sample_size(30)
        .warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(3));
    targets = filters
}
criterion_main!(benches);
