//! Request/answer throughput between two of our nodes over TCP on 127.0.0.1.
//!
//! `cargo bench -p fivecore-diameter --bench loopback -- [seconds] [concurrency]`
//! Client and server run in this process on one multi-threaded tokio runtime; the server
//! decodes, validates (Rx STR grammar) and answers every request with a handler.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use diameter::dictionary::{base, rx};
use diameter::{ApplicationId, DiameterNode, Message, NodeConfig, PeerConfig};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let secs: u64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(5);
    let conc: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(512);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(run(secs, conc));
}

async fn run(secs: u64, conc: usize) {
    let mut sc = NodeConfig::new("server.bench", "bench");
    sc.listen = Some(SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 0));
    sc.peers = vec![PeerConfig::accept("client.bench")];
    let s = DiameterNode::builder(sc)
        .handler(rx::APP_ID, |req: Message| async move {
            Message::answer_to(&req).result_code_avp(2001).origin("server.bench", "bench")
        })
        .start()
        .await
        .unwrap();
    let mut cc = NodeConfig::new("client.bench", "client");
    cc.applications = vec![ApplicationId::tgpp(rx::APP_ID)];
    cc.peers = vec![PeerConfig::connect("server.bench", s.local_addr().unwrap())];
    let c = DiameterNode::builder(cc).start().await.unwrap();
    assert!(c.wait_open("server.bench", Duration::from_secs(5)).await);

    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for w in 0..conc {
        let (c, done, stop) = (c.clone(), done.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let sid = format!("client.bench;{w};1");
            while !stop.load(Ordering::Relaxed) {
                let req = Message::request(rx::APP_ID, rx::CMD_SESSION_TERMINATION)
                    .session_id_avp(&sid)
                    .origin("client.bench", "client")
                    .destination("bench", Some("server.bench"))
                    .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
                    .avp(base::TERMINATION_CAUSE.enumerated(1));
                let a = c.request(req).await.expect("answer");
                assert_eq!(a.result_code(), Some(2001));
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(1)).await; // warm-up
    let (n0, t0) = (done.load(Ordering::Relaxed), Instant::now());
    tokio::time::sleep(Duration::from_secs(secs)).await;
    let (n1, t1) = (done.load(Ordering::Relaxed), Instant::now());
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    let rate = (n1 - n0) as f64 / (t1 - t0).as_secs_f64();
    println!(
        "loopback: {} answered requests in {:.2} s = {:.0} req/s ({} concurrent, Rx STR/STA)",
        n1 - n0,
        (t1 - t0).as_secs_f64(),
        rate,
        conc
    );
    c.shutdown().await;
}
