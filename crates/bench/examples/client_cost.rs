//! CPU per request of the kit's HTTP/2 client (`bench::h2client`) beside the NFs' client
//! (`sbi::client::SbiClient`), the same requests to the same server: why the kit keeps its own
//! (docs/bench.md "Two HTTP/2 clients").
//!
//! The server runs on a thread and runtime of its own; each client runs on a single-threaded
//! runtime on the main thread, so the main thread's CPU time (CLOCK_THREAD_CPUTIME_ID) is the
//! client's whole cost: building the request, the connection's I/O task, the answer.
//!
//!     cargo run --release -p fivecore-bench --example client_cost -- [REQUESTS] [BODY_BYTES] [IN_FLIGHT]
//!
//! Defaults: 200000 requests, 1500-byte answers, 64 in flight, on one connection.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bench::h2client::{Call, H2Conn, Want};
use bytes::Bytes;
use http::{Method, Response};
use tokio::net::TcpListener;

fn main() -> anyhow::Result<()> {
    let arg =
        |i: usize, d: usize| std::env::args().nth(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let (requests, body_len, in_flight) = (arg(1, 200_000), arg(2, 1500), arg(3, 64));
    let base = serve(body_len)?;
    let url = format!("{base}/nudr-dr/v2/policy-data/ues/imsi-001010000000001/sm-data");
    println!("{requests} GETs, {body_len}-byte answers, {in_flight} in flight, one connection");
    println!("client        | client CPU µs/request | requests/s");
    for round in 0..2 {
        for (name, kit) in [("kit h2client", true), ("sbi SbiClient", false)] {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let (cpu, wall) = rt.block_on(run(kit, &base, &url, requests, in_flight))?;
            if round == 1 {
                // The first round warms caches and the server; the second is reported.
                println!(
                    "{name:<13} | {:>21.2} | {:>10.0}",
                    cpu.as_secs_f64() * 1e6 / requests as f64,
                    requests as f64 / wall.as_secs_f64()
                );
            }
        }
    }
    Ok(())
}

/// Sends `requests` GETs, `in_flight` at a time; returns the thread's CPU time and wall time.
async fn run(
    kit: bool,
    base: &str,
    url: &str,
    requests: usize,
    in_flight: usize,
) -> anyhow::Result<(Duration, Duration)> {
    let path = Bytes::from(url[base.len()..].to_owned());
    let h2 = Arc::new(H2Conn::new(base, Duration::from_secs(5))?);
    let sbi = sbi::client::SbiClient::new(&Default::default())?;
    // Connection set-up is outside the measurement.
    h2.open().await?;
    sbi.get(url).send().await?;
    let (cpu0, t0) = (thread_cpu(), Instant::now());
    let mut set = tokio::task::JoinSet::new();
    for w in 0..in_flight {
        let n = requests / in_flight + usize::from(w < requests % in_flight);
        let (h2, sbi, url, path) = (h2.clone(), sbi.clone(), url.to_owned(), path.clone());
        set.spawn(async move {
            for _ in 0..n {
                let status = if kit {
                    let call = Call {
                        method: &Method::GET,
                        path: path.clone(),
                        body: None,
                        content_type: None,
                        headers: &[],
                        condition: None,
                        authorization: None,
                        want: Want { etag: true, location: false, body: false },
                    };
                    h2.send(call).await.map_err(|e| anyhow::anyhow!("{e:?}"))?.status
                } else {
                    sbi.get(&url).send().await?.status().as_u16()
                };
                anyhow::ensure!(status == 200, "answered {status}");
            }
            anyhow::Ok(())
        });
    }
    while let Some(r) = set.join_next().await {
        r??;
    }
    Ok((thread_cpu() - cpu0, t0.elapsed()))
}

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// An h2c server answering every request 200 with `body_len` bytes and an ETag, on a thread of
/// its own; returns its base URL.
fn serve(body_len: usize) -> anyhow::Result<String> {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let base = format!("http://{}", std_listener.local_addr()?);
    std_listener.set_nonblocking(true)?;
    let body = Bytes::from(vec![b'x'; body_len]);
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let l = TcpListener::from_std(std_listener).unwrap();
            loop {
                let Ok((tcp, _)) = l.accept().await else { return };
                let body = body.clone();
                tokio::spawn(async move {
                    let Ok(mut conn) = h2::server::handshake(tcp).await else { return };
                    while let Some(Ok((_req, mut respond))) = conn.accept().await {
                        let rsp = Response::builder()
                            .status(200)
                            .header("content-type", "application/json")
                            .header("etag", "\"7\"")
                            .body(())
                            .unwrap();
                        if let Ok(mut send) = respond.send_response(rsp, false) {
                            let _ = send.send_data(body.clone(), true);
                        }
                    }
                });
            }
        });
    });
    Ok(base)
}
