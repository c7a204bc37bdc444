//! Connections over real sockets: the connection cap refuses the one too many and recovers when
//! a place frees; the descriptor limit is raised; idle and abandoned connections are closed,
//! busy ones are not; a shed request is a 503 NF_CONGESTION with Retry-After on a connection
//! that goes on serving; with backpressure, connections stop reading at the limit instead, go on
//! reading the bodies of requests already admitted, and read again after `hold_max_ms`.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use sbi::layer::overload::OverloadConfig;
use sbi::ServerConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use common::{h2c_client, send, start};

/// An h2c connection of its own (the pooled test clients would hide which connection is which).
struct H2 {
    send: h2::client::SendRequest<Bytes>,
    /// Ends when the server closes the connection.
    closed: tokio::task::JoinHandle<()>,
}

async fn h2_connect(addr: SocketAddr) -> Result<H2, h2::Error> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (send, conn) = h2::client::handshake(tcp).await?;
    let closed = tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(H2 { send, closed })
}

async fn h2_get(c: &H2, addr: SocketAddr, path: &str) -> Result<StatusCode, h2::Error> {
    let req = Request::get(format!("http://{addr}{path}")).body(()).unwrap();
    let mut send = c.send.clone().ready().await?;
    let (rsp, _) = send.send_request(req, true)?;
    Ok(rsp.await?.status())
}

fn metric(text: &str, name: &str) -> f64 {
    let name = &format!("{name} ");
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse().ok()))
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

#[tokio::test]
async fn the_connection_cap_refuses_one_too_many_and_recovers() {
    // The /metrics reads below use a connection of their own: 3 places, 2 for the test's h2c.
    let srv = start(ServerConfig { max_connections: 3, ..Default::default() }).await;
    let a = h2_connect(srv.addr).await.unwrap();
    let b = h2_connect(srv.addr).await.unwrap();
    // A third connection that stays open fills the cap.
    let mut third = TcpStream::connect(srv.addr).await.unwrap();
    third.write_all(b"GET /healthz/live HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
    let mut buf = [0u8; 512];
    let n = third.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    for c in [&a, &b] {
        assert_eq!(h2_get(c, srv.addr, "/ntest/v1/items/x").await.unwrap(), 404);
    }
    // The fourth is accepted by the kernel and closed at once by the server.
    let mut extra = TcpStream::connect(srv.addr).await.unwrap();
    let _ = extra.write_all(b"GET /healthz/live HTTP/1.1\r\nhost: x\r\n\r\n").await;
    let read = tokio::time::timeout(Duration::from_secs(2), extra.read(&mut buf)).await;
    assert!(
        matches!(read, Ok(Ok(0)) | Ok(Err(_))),
        "the connection beyond the cap must be closed, got {read:?}"
    );
    // Those already open go on serving.
    assert_eq!(h2_get(&a, srv.addr, "/ntest/v1/items/x").await.unwrap(), 404);
    // One closes: its place is free again (the server notices the close first).
    drop(third);
    let text = wait_for(|open, _| open == 2.0, srv.addr).await;
    assert!(metric(&text, "sbi_connections_refused_total") >= 1.0, "{text}");
    let c = h2_connect(srv.addr).await.unwrap();
    assert_eq!(h2_get(&c, srv.addr, "/ntest/v1/items/x").await.unwrap(), 404);
    drop((a, b, c));
    srv.stop().await;
}

/// Reads /metrics until `ok(open, text)` holds, `open` being the connections open less the one
/// the read itself uses (a fresh HTTP/1.1 connection, closed by the server after the answer).
async fn wait_for(ok: impl Fn(f64, &str) -> bool, addr: SocketAddr) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        tcp.write_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut raw = Vec::new();
        tcp.read_to_end(&mut raw).await.unwrap();
        let text = String::from_utf8_lossy(&raw).into_owned();
        if ok(metric(&text, "sbi_connections_open") - 1.0, &text) {
            return text;
        }
        assert!(Instant::now() < deadline, "condition not met; last metrics:\n{text}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_descriptor_limit_is_raised_to_the_hard_limit() {
    let (soft, hard) = sbi::descriptors::nofile_limit().unwrap();
    assert!(soft <= hard);
    // Lower the soft limit (any process may), so that raising it has something to do.
    let low = (hard / 2).max(64).min(hard);
    let lim = libc::rlimit { rlim_cur: low as libc::rlim_t, rlim_max: hard as libc::rlim_t };
    // SAFETY: setrlimit only reads the struct.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
    assert_eq!(sbi::descriptors::nofile_limit().unwrap().0, low);
    let (old, new) = sbi::descriptors::raise_nofile_limit().unwrap();
    assert_eq!((old, new), (low, hard));
    assert_eq!(sbi::descriptors::nofile_limit().unwrap(), (hard, hard));
    // Again: nothing to do.
    assert_eq!(sbi::descriptors::raise_nofile_limit().unwrap(), (hard, hard));
    // The server's cap is derived from the raised limit, less the reserve.
    let srv = sbi::SbiServer::bind(
        ServerConfig { descriptor_reserve: 300, ..Default::default() },
        sbi::NfIdentity::new("TEST", "x"),
        common::router(Default::default()),
        sbi::Observability::new(),
    )
    .await
    .unwrap();
    assert_eq!(srv.max_connections() as u64, (hard - 300).clamp(16, 1 << 20));
}

#[tokio::test]
async fn idle_connections_are_closed_and_busy_ones_are_not() {
    let srv = start(ServerConfig { idle_timeout_secs: 1, ..Default::default() }).await;
    // Abandoned after one request: HTTP/2 is closed (GOAWAY, then the socket) within about two
    // periods.
    let idle = h2_connect(srv.addr).await.unwrap();
    assert_eq!(h2_get(&idle, srv.addr, "/ntest/v1/items/x").await.unwrap(), 404);
    // Busy: a request every 300 ms for 3 s on another connection.
    let busy = h2_connect(srv.addr).await.unwrap();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(3) {
        assert_eq!(h2_get(&busy, srv.addr, "/ntest/v1/items/x").await.unwrap(), 404);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(idle.closed.is_finished(), "the idle HTTP/2 connection is still open after 3 s");
    assert!(!busy.closed.is_finished(), "a busy connection was closed");
    // HTTP/1.1 kept alive and abandoned: closed too.
    let mut h1 = TcpStream::connect(srv.addr).await.unwrap();
    h1.write_all(b"GET /ntest/v1/items/x HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = h1.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 404"), "{}", String::from_utf8_lossy(&buf[..n]));
    let t0 = Instant::now();
    let read = tokio::time::timeout(Duration::from_secs(4), h1.read(&mut buf)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "the idle HTTP/1.1 connection: {read:?}");
    assert!(t0.elapsed() >= Duration::from_millis(900), "closed before the idle timeout");
    // A connection that never sends a byte is closed after the header read timeout.
    let srv2 = start(ServerConfig {
        idle_timeout_secs: 0,
        header_read_timeout_secs: 1,
        ..Default::default()
    })
    .await;
    let mut silent = TcpStream::connect(srv2.addr).await.unwrap();
    let read = tokio::time::timeout(Duration::from_secs(4), silent.read(&mut buf)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "the silent connection: {read:?}");
    drop(busy);
    srv.stop().await;
    srv2.stop().await;
}

#[tokio::test]
async fn a_shed_request_is_a_503_with_retry_after_and_the_connection_serves_on() {
    // The 503 path: without backpressure every request beyond the limit is answered at once.
    let overload = OverloadConfig {
        max_in_flight: 4,
        priority_reserve: 0,
        backpressure: false,
        ..Default::default()
    };
    let srv = start(ServerConfig { overload, ..Default::default() }).await;
    let c = h2_connect(srv.addr).await.unwrap();
    let held: Vec<_> = (0..4)
        .map(|_| {
            let send = c.send.clone();
            let addr = srv.addr;
            tokio::spawn(async move {
                let h = H2 { send, closed: tokio::spawn(async {}) };
                h2_get(&h, addr, "/ntest/v1/slow").await
            })
        })
        .collect();
    // Once the four are in progress, a fifth request is shed (any operation: the guard counts
    // all of them).
    let client = h2c_client();
    let deadline = Instant::now() + Duration::from_secs(5);
    let a = loop {
        let url = format!("http://{}/ntest/v1/items/x", srv.addr);
        let a = send(&client, Method::GET, url, &[], None).await;
        if a.status == 503 || Instant::now() > deadline {
            break a;
        }
        assert_eq!(a.status, 404);
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(a.status, 503);
    assert_eq!(a.headers["retry-after"], "1");
    assert_eq!(a.content_type(), "application/problem+json");
    assert_eq!(a.json()["cause"], "NF_CONGESTION");
    // The held requests finish, and the same connection serves the next request.
    srv.state.gate.add_permits(4);
    for h in held {
        assert_eq!(h.await.unwrap().unwrap(), 204);
    }
    assert_eq!(h2_get(&c, srv.addr, "/ntest/v1/items/x").await.unwrap(), 404);
    srv.stop().await;
}

/// A server with backpressure at a fixed limit: max_in_flight 8, so connections stop reading at
/// 7 in flight (an eighth is kept for what was read before they stopped); no priority reserve.
async fn start_held(hold_max_ms: u64) -> common::Running {
    let overload = OverloadConfig {
        max_in_flight: 8,
        priority_reserve: 0,
        target_latency_ms: 0,
        hold_max_ms,
        ..Default::default()
    };
    start(ServerConfig { overload, ..Default::default() }).await
}

/// Waits until the server reports `n` requests in flight.
async fn wait_in_flight(srv: &common::Running, n: f64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = srv.observability.encode();
        if metric(&text, "sbi_requests_in_flight") == n {
            return;
        }
        assert!(Instant::now() < deadline, "never {n} in flight:\n{text}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Sends `n` GETs of `path` on its own connection, each answer's status in a task.
async fn burst(
    addr: SocketAddr,
    path: &'static str,
    n: usize,
) -> Vec<tokio::task::JoinHandle<u16>> {
    let c = h2_connect(addr).await.unwrap();
    (0..n)
        .map(|_| {
            let send = c.send.clone();
            tokio::spawn(async move {
                let h = H2 { send, closed: tokio::spawn(async {}) };
                h2_get(&h, addr, path).await.map_or(0, |s| s.as_u16())
            })
        })
        .collect()
}

#[tokio::test]
async fn with_backpressure_a_connection_stops_reading_at_the_limit_instead_of_shedding() {
    let srv = start_held(60_000).await;
    let first = burst(srv.addr, "/ntest/v1/slow", 7).await;
    wait_in_flight(&srv, 7.0).await;
    // Another consumer's requests are not read, so not shed: nothing is answered.
    let second = burst(srv.addr, "/ntest/v1/slow", 20).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(first.iter().chain(&second).all(|h| !h.is_finished()), "something was answered");
    assert_eq!(metric(&srv.observability.encode(), "sbi_requests_in_flight"), 7.0);
    assert!(metric(&srv.observability.encode(), "sbi_reads_held_total") >= 1.0);
    // As the work in flight is answered the held connection reads, and everything is served.
    srv.state.gate.add_permits(1000);
    for h in first.into_iter().chain(second) {
        assert_eq!(h.await.unwrap(), 204);
    }
    srv.stop().await;
}

#[tokio::test]
async fn a_held_connection_reads_the_bodies_of_requests_it_admitted() {
    let srv = start_held(60_000).await;
    // Seven creates whose heads arrive first: admitted, they fill the limit.
    let c = h2_connect(srv.addr).await.unwrap();
    let mut bodies = Vec::new();
    let mut answers = Vec::new();
    for i in 0..7 {
        let req = Request::post(format!("http://{}/ntest/v1/items", srv.addr))
            .header("content-type", "application/json")
            .body(())
            .unwrap();
        let mut send = c.send.clone().ready().await.unwrap();
        let (rsp, body) = send.send_request(req, false).unwrap();
        bodies.push((i, body));
        answers.push(rsp);
    }
    wait_in_flight(&srv, 7.0).await;
    // Their bodies come later, on a connection the gate would otherwise hold: they are read.
    for (i, mut body) in bodies {
        body.send_data(Bytes::from(format!(r#"{{"name":"n{i}","count":{i}}}"#)), true).unwrap();
    }
    for rsp in answers {
        let rsp = tokio::time::timeout(Duration::from_secs(10), rsp).await.unwrap().unwrap();
        assert_eq!(rsp.status(), StatusCode::CREATED);
    }
    srv.stop().await;
}

#[tokio::test]
async fn a_connection_held_for_hold_max_reads_again_and_sheds_beyond_max_in_flight() {
    let srv = start_held(100).await;
    let first = burst(srv.addr, "/ntest/v1/slow", 7).await;
    wait_in_flight(&srv, 7.0).await;
    // Work stuck in flight: after 100 ms the held connection reads; one more fits under
    // max_in_flight, the rest are answered 503 at once instead of waiting without a word.
    let t0 = Instant::now();
    let mut second = burst(srv.addr, "/ntest/v1/slow", 20).await;
    let mut shed = 0;
    while shed < 19 {
        let i = second.iter().position(|h| h.is_finished());
        match i {
            Some(i) => {
                assert_eq!(second.swap_remove(i).await.unwrap(), 503);
                shed += 1;
            }
            None => {
                assert!(t0.elapsed() < Duration::from_secs(10), "only {shed} shed");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    assert!(t0.elapsed() >= Duration::from_millis(100), "shed before the hold ended");
    srv.state.gate.add_permits(1000);
    for h in first.into_iter().chain(second) {
        assert_eq!(h.await.unwrap(), 204);
    }
    srv.stop().await;
}
