//! The Rx proxy's UE address index at the size it serves (`BSF_INDEX_BINDINGS` dual-stack
//! bindings, default 1,000,000; the S9 benchmark runs 10,000,000): the lookups an AAR makes
//! (IPv4 address; IPv6 address as a /64 Framed-IPv6-Prefix) and a Register + Deregister pair.
//! The background load of the whole index is timed once and printed before the runs.
//!
//! With `BSF_INDEX_DOCUMENTS=1` the index keeps the bindings' documents, as Discovery's
//! (`[bsf] discovery_index`), each document a full PcfBinding of ~330 bytes (SUPI, GPSI, DNN,
//! S-NSSAI, the PCF's FQDN, SBI endpoint and Diameter identity); the process's RSS after the load
//! is printed, and Discovery by IPv4 address (plain and with a DNN filter) is measured too.
//!
//! Times are the benchmark thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), not wall time,
//! so agents or builds sharing the machine do not count as index work.
//!
//! `cargo bench -p fivecore-bsf --bench ue_address_index`; docs/bsf.md has the figures.

use std::hint::black_box;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Instant;

use bsf::ue_address_index::{Answer, Discovered, Filter, Indexed, UeAddressIndex};
use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{criterion_group, criterion_main, Criterion};

const PREFIX_LENGTHS: [u8; 6] = [128, 64, 60, 56, 48, 32];

fn ipv4(i: u64) -> Ipv4Addr {
    Ipv4Addr::from(0x0A00_0000u32.wrapping_add(i as u32))
}

fn ipv6(i: u64) -> Ipv6Addr {
    Ipv6Addr::from((0x2001_0db8u128 << 96) | (u128::from(i) << 64))
}

/// What the store hands the index for binding `i`: the document's UE addresses and PCF (and
/// the whole document when the index keeps documents).
fn binding(ix: &UeAddressIndex, i: u64) -> Indexed {
    let json = format!(
        r#"{{"dnn":"ims","gpsi":"msisdn-3361{i:07}","ipv4Addr":"{}","ipv6Prefix":"{}/64","pcfDiamHost":"pcf{}.example.org","pcfDiamRealm":"example.org","pcfFqdn":"pcf{}.example.org","pcfIpEndPoints":[{{"ipv4Address":"192.0.2.{}","port":7777}}],"snssai":{{"sd":"000001","sst":1}},"supi":"imsi-00101{i:010}"}}"#,
        ipv4(i),
        ipv6(i),
        i % 4,
        i % 4,
        1 + i % 4
    );
    let id = format!("00000000-0000-4000-8000-{i:012}");
    ix.indexed(&id, json.as_bytes()).expect("a binding")
}

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

/// Binding numbers in a scattered order, as AARs arrive for random UEs.
fn scattered(n: u64, k: u64) -> u64 {
    k.wrapping_mul(0x9E37_79B9_7F4A_7C15) % n
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

fn index(c: &mut Criterion<ThreadCpu>) {
    let n: u64 =
        std::env::var("BSF_INDEX_BINDINGS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    let documents = std::env::var("BSF_INDEX_DOCUMENTS").is_ok_and(|v| v == "1");
    let ix = if documents { UeAddressIndex::with_documents() } else { UeAddressIndex::new() };
    let rss_before = rss_mib();
    let started = Instant::now();
    for i in 0..n {
        ix.load_one(&binding(&ix, i), 1_700_000_000_000 + i as i64);
    }
    ix.set_ready();
    println!(
        "ue_address_index: loaded {n} dual-stack bindings in {:.2} s (with the documents' parsing), \
         documents kept: {documents}; RSS {rss_before:.0} -> {:.0} MiB",
        started.elapsed().as_secs_f64(),
        rss_mib()
    );
    assert_eq!(ix.len(), (n as usize, n as usize));

    let mut k = 0u64;
    c.bench_function("find_v4 (hit)", |b| {
        b.iter(|| {
            k += 1;
            let a = ix.find_v4(ipv4(scattered(n, k)), None);
            assert!(matches!(a, Answer::Pcf(_)));
            black_box(a)
        })
    });
    c.bench_function("find_v4 (miss)", |b| {
        b.iter(|| {
            k += 1;
            black_box(ix.find_v4(ipv4(n + scattered(n, k)), None))
        })
    });
    c.bench_function("find_v6 /64 (hit)", |b| {
        b.iter(|| {
            k += 1;
            let a = ix.find_v6(ipv6(scattered(n, k)), 64, &PREFIX_LENGTHS);
            assert!(matches!(a, Answer::Pcf(_)));
            black_box(a)
        })
    });
    if documents {
        c.bench_function("discover v4 (hit)", |b| {
            b.iter(|| {
                k += 1;
                let a = ix.discover(Some((ipv4(scattered(n, k)), None)), None, Filter::default());
                assert!(matches!(a, Discovered::Found(_)));
                black_box(a)
            })
        });
        let ims = Filter { dnn: Some("ims"), ..Filter::default() };
        c.bench_function("discover v4 + dnn (hit)", |b| {
            b.iter(|| {
                k += 1;
                let a = ix.discover(Some((ipv4(scattered(n, k)), None)), None, ims);
                assert!(matches!(a, Discovered::Found(_)));
                black_box(a)
            })
        });
    }
    let fresh: Vec<Indexed> = (n..n + 4096).map(|i| binding(&ix, i)).collect();
    let mut j = 0usize;
    c.bench_function("insert + remove", |b| {
        b.iter(|| {
            j = (j + 1) % fresh.len();
            ix.insert(&fresh[j], 1_800_000_000_000);
            black_box(ix.remove(&fresh[j]))
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(ThreadCpu).sample_size(30).warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(3));
    targets = index
}
criterion_main!(benches);
