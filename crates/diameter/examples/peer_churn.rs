//! Peers with ever-new Origin-Hosts connecting and leaving: N cycles of connect, CER, CEA, then
//! DPR/DPA (even cycles) or a plain close (odd ones), each with a new Origin-Host, against a node
//! that accepts unknown peers. Prints the process's resident memory before and after and the
//! node's peer table size, to check that a peer gone leaves nothing behind.
//!
//! ```sh
//! cargo run --release -p fivecore-diameter --example peer_churn -- 10000
//! ```

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use diameter::dictionary::{base, rx};
use diameter::{frame_len, ApplicationId, DiameterNode, Message, NodeConfig, VENDOR_3GPP};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

async fn recv(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Message> {
    loop {
        if let Ok(Some(n)) = frame_len(buf) {
            let m = Message::decode(bytes::Bytes::copy_from_slice(&buf[..n])).ok();
            buf.drain(..n);
            return m;
        }
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// One peer's life: CER/CEA, then DPR/DPA or a close.
async fn cycle(addr: SocketAddr, i: u32) {
    let host = format!("churn-{i}.peers.example");
    let cer = Message::request(base::APP_ID, base::CMD_CAPABILITIES_EXCHANGE)
        .ids(i, i)
        .origin(&host, "peers.example")
        .avp(base::HOST_IP_ADDRESS.address(IpAddr::V4(Ipv4Addr::LOCALHOST)))
        .avp(base::VENDOR_ID.u32(0))
        .avp(base::PRODUCT_NAME.utf8("churn"))
        .avp(diameter::builders::vendor_specific_auth_app(VENDOR_3GPP, rx::APP_ID));
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(&cer.to_bytes().unwrap()).await.unwrap();
    let mut buf = Vec::new();
    let cea = recv(&mut s, &mut buf).await.expect("CEA");
    assert_eq!(cea.result_code(), Some(2001));
    if i % 2 == 0 {
        let dpr = Message::request(base::APP_ID, base::CMD_DISCONNECT_PEER)
            .ids(i + 1, i + 1)
            .origin(&host, "peers.example")
            .avp(base::DISCONNECT_CAUSE.enumerated(0));
        s.write_all(&dpr.to_bytes().unwrap()).await.unwrap();
        let dpa = recv(&mut s, &mut buf).await.expect("DPA");
        assert_eq!(dpa.command_code(), base::CMD_DISCONNECT_PEER);
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let mut cfg = NodeConfig::new("server.churn", "churn");
    cfg.listen = Some(SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 0));
    cfg.applications = vec![ApplicationId::tgpp(rx::APP_ID)];
    cfg.accept_unknown_peers = true;
    let node = DiameterNode::builder(cfg).start().await.unwrap();
    let addr = node.local_addr().unwrap();
    // Warm up (allocator arenas, tokio's worker state) before the first reading.
    for i in 0..200 {
        cycle(addr, 1_000_000 + i).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (rss0, peers0) = (rss_kib(), node.peers().len());
    let t0 = Instant::now();
    for i in 0..n {
        cycle(addr, i).await;
    }
    // Let the node see the last closes.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (rss1, peers1) = (rss_kib(), node.peers().len());
    println!(
        "{n} cycles in {:.1} s: RSS {rss0} KiB -> {rss1} KiB ({:+.2} KiB per peer); peer table {peers0} -> {peers1}",
        t0.elapsed().as_secs_f64(),
        (rss1 as f64 - rss0 as f64) / f64::from(n.max(1)),
    );
}
