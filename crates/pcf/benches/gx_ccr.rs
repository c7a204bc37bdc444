//! The PCRF's CPU per Gx CCR (issue #23's target: ≤ 12 µs with policy evaluation and a durable
//! session): CCR-I, CCR-U, CCR-T 1:1:1 over a real Diameter connection on 127.0.0.1.
//!
//! `cargo bench -p fivecore-pcf --bench gx_ccr -- [seconds] [concurrency]` (default 5 s, 32
//! sessions in flight). The PCF runs in this process as `fivecore pcf` runs it (a SQLite store
//! with `synchronous = full`, the default policy project, no UDR: every CCR a durable write, as
//! 3.1.1's first measurement in docs/BENCHMARKS.md), with mimalloc as the fivecore binary's
//! allocator. The PCEF is this program again in a child process, so the figures are the PCF's
//! alone: its CPU (user + system, from getrusage) and its user-space instructions per answered
//! CCR over the measured window, after a second of warm-up. Instructions come from a
//! `perf_event_open` counter inherited by every thread the PCF starts or, in a VM without
//! hardware counters, from callgrind:
//!
//! `GX_CCR_CALLGRIND=/tmp/gx.cg valgrind --tool=callgrind --callgrind-out-file=/tmp/gx.cg
//! target/release/deps/gx_ccr-<hash> 5 8` (the bench zeroes callgrind's counts when the window
//! opens and dumps them when it closes; the PCEF child runs natively). The instruction count
//! hardly moves with the machine's other load: it is the yardstick for a change, the CPU time
//! the figure to compare with the target.
//!
//! Each PCEF session is a CCR-I as Open5GS's P-GW sends it (the kit's shape: IMSI and MSISDN,
//! UE address, APN, E-UTRAN, APN-AMBR, default bearer QoS, ULI), a CCR-U reporting
//! USER_LOCATION_CHANGE with a new cell, and a CCR-T; every CCA must be 2001.

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use diameter::dictionary::{base, dcca, gx, nasreq};
use diameter::{result_code as rc, ApplicationId, DiameterNode, Message, NodeConfig, PeerConfig};
use diameter::{Route, RouteAction};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const PCF_HOST: &str = "pcf.bench";
const PCF_REALM: &str = "bench";
const PGW_HOST: &str = "pgw.bench";
const PGW_REALM: &str = "epc.bench";
/// Set in the child: the PCF's Diameter address; the child is the PCEF.
const CLIENT_ENV: &str = "GX_CCR_BENCH_PCF";
/// Set when the PCF runs under callgrind: its `--callgrind-out-file`.
const CALLGRIND_ENV: &str = "GX_CCR_CALLGRIND";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let secs: u64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(5);
    let conc: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(32);
    if let Ok(addr) = std::env::var(CLIENT_ENV) {
        let addr: SocketAddr = addr.parse().expect("the PCF's address");
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(pcef(addr, secs, conc));
        return;
    }
    // Opened before the PCF's runtime and store threads exist, so they inherit it.
    let counter = Instructions::open();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(pcf(secs, conc, &counter));
}

async fn pcf(secs: u64, conc: usize, counter: &Instructions) {
    let dir = tempfile::tempdir().unwrap();
    let policy = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../policies/default");
    let run = pcf::RunConfig {
        pcf: pcf::PcfConfig {
            policy: Some(policy),
            diameter: pcf::config::DiameterConfig {
                enabled: true,
                listen: "127.0.0.1:0".parse().unwrap(),
                origin_host: PCF_HOST.into(),
                origin_realm: PCF_REALM.into(),
                ..pcf::config::DiameterConfig::default()
            },
            ..pcf::PcfConfig::default()
        },
        sbi: sbi::ServerConfig::default(),
        client: sbi::client::ClientConfig::default(),
        store: store::SqliteConfig::new(dir.path().join("pcf.db")),
        instance_id: None,
    };
    let bound = pcf::bind(run).await.expect("the PCF starts");
    let addr = bound.diameter_addr().expect("Gx is served");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(bound.serve(async {
        let _ = stopped.await;
    }));

    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([secs.to_string(), conc.to_string()])
        .env(CLIENT_ENV, addr.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the PCEF starts");
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let callgrind = std::env::var(CALLGRIND_ENV).ok();
    let report = tokio::task::spawn_blocking({
        let counter = counter.fd;
        move || {
            let mut start = None;
            for line in lines {
                let line = line.unwrap();
                if line == "start" {
                    if callgrind.is_some() {
                        callgrind_control("-z");
                    }
                    start = Some((cpu_us(), Instructions { fd: counter }.read()));
                } else if let Some(n) = line.strip_prefix("end ") {
                    let (cpu1, mut ins1) = (cpu_us(), Instructions { fd: counter }.read());
                    let (cpu0, ins0) = start.expect("start before end");
                    if let Some(out) = &callgrind {
                        callgrind_control("-d");
                        ins1 = ins0 + callgrind_total(out);
                    }
                    return Some((n.to_owned(), cpu1 - cpu0, ins1 - ins0));
                }
            }
            None
        }
    })
    .await
    .unwrap();
    assert!(child.wait().unwrap().success(), "the PCEF ran without error");
    let (line, cpu, ins) = report.expect("the PCEF reported");
    let mut f = line.split_whitespace().map(|v| v.parse::<f64>().unwrap());
    let (ccrs, secs_measured) = (f.next().unwrap(), f.next().unwrap());
    println!(
        "gx_ccr: {ccrs:.0} CCRs (I:U:T 1:1:1, {conc} sessions in flight) in {secs_measured:.2} s \
         = {:.0} CCR/s; PCF {:.1} µs CPU and {:.0} instructions per CCR",
        ccrs / secs_measured,
        cpu as f64 / ccrs,
        ins as f64 / ccrs
    );
    let _ = stop.send(());
    serving.await.unwrap().unwrap();
}

/// The PCEF: `conc` sessions at a time, each CCR-I, CCR-U, CCR-T; prints `start` after a
/// second of warm-up and `end <CCRs> <seconds>` after `secs` more.
async fn pcef(pcf: SocketAddr, secs: u64, conc: usize) {
    let mut c = NodeConfig::new(PGW_HOST, PGW_REALM);
    c.applications = vec![ApplicationId::tgpp(gx::APP_ID)];
    c.peers = vec![PeerConfig::connect(PCF_HOST, pcf)];
    c.routes = vec![Route::new("*", RouteAction::Relay(vec![PCF_HOST.into()]))];
    c.request_timeout = Duration::from_secs(10);
    let node = DiameterNode::builder(c).start().await.unwrap();
    assert!(node.wait_open(PCF_HOST, Duration::from_secs(5)).await, "connected to the PCF");
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for w in 0..conc {
        let (node, done, stop) = (node.clone(), done.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut n: u64 = 0;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let sid = Bytes::from(format!("{PGW_HOST};{w};{n}"));
                let msin = (w as u64 * 1_000_003 + n) % 10_000_000_000;
                let ue = Ipv4Addr::from(0x0a00_0000 | ((w as u32) << 14) | (n as u32 & 0x3fff));
                for (kind, number) in [(1, 0), (2, 1), (3, 2)] {
                    let a = node.request(ccr(&sid, kind, number, msin, ue)).await.expect("a CCA");
                    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (n0, t0) = (done.load(Ordering::Relaxed), Instant::now());
    println!("start");
    std::io::stdout().flush().unwrap();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    let (n1, t1) = (done.load(Ordering::Relaxed), Instant::now());
    println!("end {} {}", n1 - n0, (t1 - t0).as_secs_f64());
    std::io::stdout().flush().unwrap();
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    node.shutdown().await;
}

/// CCR `kind` (1 initial, 2 update, 3 termination) number `number` of session `sid`.
fn ccr(sid: &Bytes, kind: u32, number: u32, msin: u64, ue: Ipv4Addr) -> Message {
    let mut m = Message::request(gx::APP_ID, gx::CMD_CREDIT_CONTROL)
        .avp(base::SESSION_ID.with_payload(sid.clone()))
        .avp(base::AUTH_APPLICATION_ID.u32(gx::APP_ID))
        .origin(PGW_HOST, PGW_REALM)
        .destination(PCF_REALM, None)
        .avp(dcca::CC_REQUEST_TYPE.enumerated(kind))
        .avp(dcca::CC_REQUEST_NUMBER.u32(number))
        .avp(subscription_id(
            dcca::subscription_id_type::END_USER_IMSI,
            &format!("00101{msin:010}"),
        ));
    if kind == 3 {
        return m
            .avp(nasreq::CALLED_STATION_ID.utf8("internet"))
            .avp(base::TERMINATION_CAUSE.enumerated(1));
    }
    // TS 29.061 §16.4.7.2 type 130 (TAI and ECGI) in PLMN 001-01; the CCR-U's cell differs.
    let mut uli = vec![130, 0x00, 0xf1, 0x10, 0x00, 0x01, 0x00, 0xf1, 0x10];
    uli.extend_from_slice(&(0x0000_1000 + number).to_be_bytes());
    m = m
        .avp(subscription_id(dcca::subscription_id_type::END_USER_E164, &format!("3361{msin:010}")))
        .avp(nasreq::FRAMED_IP_ADDRESS.ipv4_octets(ue))
        .avp(gx::IP_CAN_TYPE.enumerated(gx::ip_can_type::TGPP_EPS))
        .avp(gx::RAT_TYPE.enumerated(gx::rat_type::EUTRAN))
        .avp(gx::QOS_INFORMATION.grouped(vec![
            gx::APN_AGGREGATE_MAX_BITRATE_UL.u32(1_000_000_000),
            gx::APN_AGGREGATE_MAX_BITRATE_DL.u32(2_000_000_000),
        ]))
        .avp(gx::DEFAULT_EPS_BEARER_QOS.grouped(vec![
            gx::QOS_CLASS_IDENTIFIER.enumerated(9),
            gx::ALLOCATION_RETENTION_PRIORITY.grouped(vec![
                gx::PRIORITY_LEVEL.u32(8),
                gx::PRE_EMPTION_CAPABILITY.enumerated(1),
                gx::PRE_EMPTION_VULNERABILITY.enumerated(1),
            ]),
        ]))
        .avp(gx::TGPP_USER_LOCATION_INFO.bytes(Bytes::from(uli)))
        .avp(gx::TGPP_SGSN_MCC_MNC.utf8("00101"))
        .avp(nasreq::CALLED_STATION_ID.utf8("internet"));
    if kind == 2 {
        m = m.avp(gx::EVENT_TRIGGER.enumerated(gx::event_trigger::USER_LOCATION_CHANGE));
    }
    m
}

fn subscription_id(kind: u32, data: &str) -> diameter::Avp {
    dcca::SUBSCRIPTION_ID.grouped(vec![
        dcca::SUBSCRIPTION_ID_TYPE.enumerated(kind),
        dcca::SUBSCRIPTION_ID_DATA.utf8(data),
    ])
}

/// `callgrind_control <what>` on this process (`-z` zeroes the counts, `-d` dumps them).
fn callgrind_control(what: &str) {
    let ok = Command::new("callgrind_control")
        .args([what, &std::process::id().to_string()])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "callgrind_control {what} ran");
}

/// The instructions (Ir) of callgrind's newest dump under `out` (`<out>.<n>`).
fn callgrind_total(out: &str) -> i64 {
    let path = std::path::Path::new(out);
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let newest = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&format!("{name}.")))
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
        .expect("a callgrind dump");
    let text = std::fs::read_to_string(newest.path()).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("totals: ").or_else(|| l.strip_prefix("summary: ")))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("callgrind's totals")
}

/// This process's CPU time so far (user + system, every thread), in µs.
fn cpu_us() -> i64 {
    // SAFETY: getrusage fills the struct it is given; zeroed is a valid initial value.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let us = |t: libc::timeval| t.tv_sec * 1_000_000 + t.tv_usec;
    us(u.ru_utime) + us(u.ru_stime)
}

/// A user-space instruction counter on this process, inherited by the threads it starts
/// after it is opened (`perf_event_open(2)`, PERF_COUNT_HW_INSTRUCTIONS, exclude_kernel).
struct Instructions {
    /// -1 when the kernel refused (perf_event_paranoid, no PMU in the VM).
    fd: i32,
}

impl Instructions {
    fn open() -> Instructions {
        // struct perf_event_attr (PERF_ATTR_SIZE_VER5, 112 bytes): type u32, size u32,
        // config u64, sample_period u64, sample_type u64, read_format u64, then the flags
        // bit field (disabled 0, inherit 1, ..., exclude_kernel 5, exclude_hv 6).
        let mut attr = [0u8; 112];
        attr[0..4].copy_from_slice(&0u32.to_ne_bytes()); // PERF_TYPE_HARDWARE
        attr[4..8].copy_from_slice(&112u32.to_ne_bytes());
        attr[8..16].copy_from_slice(&1u64.to_ne_bytes()); // PERF_COUNT_HW_INSTRUCTIONS
        let flags: u64 = (1 << 1) | (1 << 5) | (1 << 6);
        attr[40..48].copy_from_slice(&flags.to_ne_bytes());
        // SAFETY: a valid perf_event_attr of the size it says; pid 0 (this thread and the
        // threads it starts), any CPU, no group, no flags.
        let fd = unsafe { libc::syscall(libc::SYS_perf_event_open, attr.as_ptr(), 0, -1, -1, 0u64) }
            as i32;
        if fd < 0 && std::env::var_os(CALLGRIND_ENV).is_none() {
            eprintln!(
                "gx_ccr: no instruction counter ({}): instructions show as 0",
                std::io::Error::last_os_error()
            );
        }
        Instructions { fd }
    }

    /// Instructions so far, the inherited counters of live threads included.
    fn read(&self) -> i64 {
        if self.fd < 0 {
            return 0;
        }
        let mut v = 0u64;
        // SAFETY: reads 8 bytes (read_format 0: the value alone) into `v`.
        let n = unsafe { libc::read(self.fd, (&mut v as *mut u64).cast(), 8) };
        if n == 8 {
            v as i64
        } else {
            0
        }
    }
}
