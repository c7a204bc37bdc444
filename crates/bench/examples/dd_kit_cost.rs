//! CPU per copy of the kit's Data Director simulators alone, without a Data Director: whether
//! the kit's side can offer 200,000+ copies a second on this machine and still leave the Data
//! Director most of it (docs/bench.md, "The Data Director scenarios").
//!
//! 1. A copy source (`bench::dd::source`) at MPS copies/s for SECONDS, POSTing batches to an
//!    ingest stub that reads each body and answers 204 (on a thread of its own).
//! 2. A TCP consumer (`bench::dd::consumer`) reading the same number of framed copies from a
//!    writer thread.
//!
//! Each runs on a single-threaded runtime on the main thread, whose CPU time
//! (CLOCK_THREAD_CPUTIME_ID) is its whole cost: patching, the HTTP/2 connection, the answers;
//! reading, framing, timing.
//!
//!     cargo run --release -p fivecore-bench --example dd_kit_cost -- [MPS] [SECONDS] [BYTES]
//!
//! Defaults: 200000 copies/s for 5 s, 1200-byte copies, batches of 256, 4 connections.

use std::io::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bench::dd::config::DdScenario;
use bench::dd::consumer::{self, FeedCounters};
use bench::dd::source::{RunClock, Source, SourceSpec, SEQUENCE_BITS};
use bytes::{Bytes, BytesMut};
use tokio::net::TcpListener;
use tokio::time::Instant;

fn main() -> anyhow::Result<()> {
    let arg = |i: usize, d: f64| std::env::args().nth(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let (mps, secs, bytes) = (arg(1, 200_000.0), arg(2, 5.0), arg(3, 1200.0) as usize);
    let dd: DdScenario = toml::from_str(&format!(
        r#"
batch = 256
connections = 4
max_in_flight = 64
[[sources]]
name = "scp"
nf_type = "SCP"
mps = {mps}
trigger_points = ["ingress_request", "egress_request"]
message_bytes = {bytes}
[[feeds]]
name = "f"
kind = "tcp"
expected_share = 1.0
"#
    ))?;
    let base = ingest_stub()?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;

    // 1. The source.
    let (cpu, src) = rt.block_on(async {
        let src = Arc::new(Source::new(SourceSpec {
            def: &dd.sources[0],
            dd: &dd,
            index: 0,
            rate: mps,
            base_url: &base,
            generators: &Default::default(),
            timeout: Duration::from_secs(5),
        })?);
        src.open().await?;
        let clock = RunClock {
            start: Instant::now() + Duration::from_millis(10),
            epoch_ns: 1_790_000_000_000_000_000,
            measure_from: Duration::ZERO,
            measure_to: Duration::from_secs_f64(secs),
        };
        let cpu0 = thread_cpu();
        let d = src.clone().run(clock, secs, Duration::from_secs(5)).await?;
        let cpu = thread_cpu() - cpu0;
        println!(
            "source:   {mps:.0} copies/s of {bytes} B for {secs} s: {} offered, {} accepted, {} batches late > 10 ms, {} slot waits, max lag {:.2} ms",
            src.all.offered.load(Ordering::Relaxed),
            src.all.accepted.load(Ordering::Relaxed),
            d.late_sends,
            d.slot_waits,
            d.max_lag.as_secs_f64() * 1e3
        );
        anyhow::Ok((cpu, src))
    })?;
    let copies = src.all.accepted.load(Ordering::Relaxed).max(1);
    println!(
        "source:   {:.3} µs CPU per copy, {:.1} % of a core at this rate",
        cpu.as_secs_f64() * 1e6 / copies as f64,
        cpu.as_secs_f64() * 100.0 / secs
    );

    // 2. The consumer, the same number of copies.
    let frames = framed_batch(bytes, 256);
    let total = copies.div_ceil(256) * 256;
    let (cpu, wall) = rt.block_on(async {
        let feed = FeedCounters::new(1, 1);
        let c = consumer::tcp(feed.clone(), 0, false).await?;
        let addr = c.addr;
        let writer = std::thread::spawn(move || -> std::io::Result<()> {
            let mut s = std::net::TcpStream::connect(addr)?;
            for _ in 0..total / 256 {
                s.write_all(&frames)?;
            }
            Ok(())
        });
        let (cpu0, t0) = (thread_cpu(), Instant::now());
        while feed.received.load(Ordering::Relaxed) < total {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let out = (thread_cpu() - cpu0, t0.elapsed());
        writer.join().expect("the writer thread")?;
        anyhow::Ok(out)
    })?;
    println!(
        "consumer: {total} copies of {bytes} B in {:.2} s ({:.0}/s): {:.3} µs CPU per copy",
        wall.as_secs_f64(),
        total as f64 / wall.as_secs_f64(),
        cpu.as_secs_f64() * 1e6 / total as f64
    );
    Ok(())
}

/// 256 framed copies of `bytes` bytes with valid sequences, as a feed sends them.
fn framed_batch(bytes: usize, n: usize) -> Vec<u8> {
    let mut out = BytesMut::new();
    let body = vec![b'x'; bytes.saturating_sub(200)];
    for i in 0..n as u64 {
        let meta = dd_client::envelope::CopyMeta {
            trigger: dd_client::envelope::TriggerPoint::IngressRequest,
            protocol: dd_client::envelope::Protocol::Http2,
            timestamp_ns: 1_790_000_000_000_000_000,
            sequence: (1 << SEQUENCE_BITS) + i,
            transaction: i,
            stream_id: 1,
            status: 0,
            nf_type: "SCP",
            nf_instance: "i",
            service: "npcf-smpolicycontrol",
            operation: "Npcf_SMPolicyControl_Create",
            method: "POST",
            path: "/npcf-smpolicycontrol/v1/sm-policies",
            peer: "",
            supi: "imsi-001010000000001",
            gpsi: "",
            session_id: "",
        };
        dd_client::envelope::encode_framed(&meta, [], &body, &mut out).expect("a small envelope");
    }
    out.to_vec()
}

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// An h2c server reading every POST's body and answering 204, on a thread of its own; returns
/// its base URL.
fn ingest_stub() -> anyhow::Result<String> {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let base = format!("http://{}", std_listener.local_addr()?);
    std_listener.set_nonblocking(true)?;
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let l = TcpListener::from_std(std_listener).unwrap();
            loop {
                let Ok((tcp, _)) = l.accept().await else { return };
                tokio::spawn(async move {
                    let Ok(mut conn) = h2::server::Builder::new()
                        .initial_window_size(1 << 20)
                        .initial_connection_window_size(16 << 20)
                        .max_frame_size(64 << 10)
                        .handshake::<_, Bytes>(tcp)
                        .await
                    else {
                        return;
                    };
                    while let Some(Ok((req, mut respond))) = conn.accept().await {
                        tokio::spawn(async move {
                            let mut body = req.into_body();
                            while let Some(Ok(c)) = body.data().await {
                                let _ = body.flow_control().release_capacity(c.len());
                            }
                            let rsp = http::Response::builder().status(204).body(()).unwrap();
                            let _ = respond.send_response(rsp, true);
                        });
                    }
                });
            }
        });
    });
    Ok(base)
}
