//! The client side of the SBI client benchmark: `N` GETs to `URL` through `SbiClient`, `C` at a
//! time, on one thread, so `valgrind --tool=callgrind` can count the client's instructions per
//! request (repeatable on a noisy machine). Serve the URL with the `bench_server` example.
//!
//!     cargo build --release -p fivecore-sbi --example client_bench --example bench_server
//!     valgrind --tool=callgrind target/release/examples/client_bench http://127.0.0.1:18081/nbench/v1/ping 20000 16
//!
//! `TRACEPARENT=00-...-01` sends that W3C trace context with every request (a consumer's trace
//! the server continues: docs/telemetry.md).

use sbi::client::{ClientConfig, SbiClient};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(url), Some(n)) = (args.get(1), args.get(2).and_then(|n| n.parse::<usize>().ok()))
    else {
        eprintln!("usage: client_bench URL REQUESTS [CONCURRENCY]");
        std::process::exit(2);
    };
    let c: usize = args.get(3).and_then(|c| c.parse().ok()).unwrap_or(16).max(1);
    let client = SbiClient::new(&ClientConfig::default()).expect("client");
    let traceparent = std::env::var("TRACEPARENT").ok().filter(|v| !v.is_empty());
    // The connection is opened before the measured requests.
    client.get(url).send().await.expect("first request");
    let tasks: Vec<_> = (0..c)
        .map(|i| {
            let (client, url, tp) = (client.clone(), url.clone(), traceparent.clone());
            let mine = n / c + usize::from(i < n % c);
            tokio::spawn(async move {
                for _ in 0..mine {
                    let mut req = client.get(&url);
                    if let Some(tp) = &tp {
                        req = req.header("traceparent", tp.as_str());
                    }
                    let rsp = req.send().await.expect("request");
                    assert!(rsp.status().is_success(), "{}", rsp.status());
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("task");
    }
}
