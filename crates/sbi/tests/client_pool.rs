//! The SBI client's connection pool against bare `h2` servers on loopback sockets: lost
//! connections, GOAWAY, idle close, one connect for many first requests, and a producer that
//! allows one stream at a time.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode};
use sbi::client::{ClientConfig, ClientError, SbiClient};
use tokio::net::TcpListener;

/// Connections accepted and ended, and the most streams seen in flight at once.
#[derive(Default)]
struct Counters {
    conns: AtomicUsize,
    closed: AtomicUsize,
    active: AtomicUsize,
    max_active: AtomicUsize,
}

struct Server {
    addr: SocketAddr,
    n: Arc<Counters>,
}

impl Server {
    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
    fn conns(&self) -> usize {
        self.n.conns.load(Ordering::SeqCst)
    }
    fn closed(&self) -> usize {
        self.n.closed.load(Ordering::SeqCst)
    }
}

/// An h2c producer. By path: `/close` drops the connection without answering; `/goaway`
/// starts a graceful shutdown (GOAWAY) at once and answers after 300 ms, then the connection
/// closes; `/slow/N` answers after N ms;
/// anything else answers 200 with the path as body. `accept_delay` holds each new connection
/// that long before the HTTP/2 handshake (a slow producer, so first requests pile up).
async fn server(max_streams: Option<u32>, accept_delay: Duration) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let n = Arc::new(Counters::default());
    let counters = n.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            counters.conns.fetch_add(1, Ordering::SeqCst);
            let n = counters.clone();
            tokio::spawn(async move {
                tokio::time::sleep(accept_delay).await;
                let mut b = h2::server::Builder::new();
                if let Some(m) = max_streams {
                    b.max_concurrent_streams(m);
                }
                let Ok(mut conn) = b.handshake::<_, Bytes>(tcp).await else {
                    n.closed.fetch_add(1, Ordering::SeqCst);
                    return;
                };
                while let Some(Ok((req, mut respond))) = conn.accept().await {
                    let path = req.uri().path().to_owned();
                    if path == "/close" {
                        break;
                    }
                    if path == "/goaway" {
                        conn.graceful_shutdown();
                    }
                    let n = n.clone();
                    tokio::spawn(async move {
                        let now = n.active.fetch_add(1, Ordering::SeqCst) + 1;
                        n.max_active.fetch_max(now, Ordering::SeqCst);
                        if let Some(ms) = path.strip_prefix("/slow/") {
                            tokio::time::sleep(Duration::from_millis(ms.parse().unwrap())).await;
                        } else if path == "/goaway" {
                            tokio::time::sleep(Duration::from_millis(300)).await;
                        }
                        n.active.fetch_sub(1, Ordering::SeqCst);
                        answer(&mut respond, &path);
                    });
                }
                n.closed.fetch_add(1, Ordering::SeqCst);
            });
        }
    });
    Server { addr, n }
}

fn answer(respond: &mut h2::server::SendResponse<Bytes>, path: &str) {
    let rsp = Response::builder().status(StatusCode::OK).body(()).unwrap();
    if let Ok(mut s) = respond.send_response(rsp, false) {
        let _ = s.send_data(Bytes::copy_from_slice(path.as_bytes()), true);
    }
}

fn client(config: ClientConfig) -> SbiClient {
    SbiClient::new(&config).unwrap()
}

async fn get(c: &SbiClient, url: &str) -> Result<String, ClientError> {
    let rsp = c.get(url).send().await?;
    assert_eq!(rsp.status(), StatusCode::OK);
    Ok(String::from_utf8(rsp.body().to_vec()).unwrap())
}

async fn eventually(what: &str, cond: impl Fn() -> bool) {
    for _ in 0..200 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never happened: {what}");
}

#[tokio::test]
async fn a_connection_the_producer_drops_is_replaced() {
    let s = server(None, Duration::ZERO).await;
    let c = client(ClientConfig::default());
    assert_eq!(get(&c, &s.url("/a")).await.unwrap(), "/a");
    // The producer drops the connection under this request: it fails (it was sent)...
    let e = get(&c, &s.url("/close")).await.unwrap_err();
    assert!(matches!(e, ClientError::Http { .. }), "{e}");
    // ...and the next one goes over a new connection.
    assert_eq!(get(&c, &s.url("/b")).await.unwrap(), "/b");
    assert_eq!(s.conns(), 2);
}

#[tokio::test]
async fn a_request_after_goaway_is_sent_on_a_new_connection() {
    let s = server(None, Duration::ZERO).await;
    let c = client(ClientConfig::default());
    // The producer says GOAWAY while this request is still being worked on: the connection
    // stays up to finish it, but takes no new stream.
    let first = tokio::spawn({
        let (c, url) = (c.clone(), s.url("/goaway"));
        async move { get(&c, &url).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Refused by the pooled connection before it was sent: sent again on a new one.
    assert_eq!(get(&c, &s.url("/b")).await.unwrap(), "/b");
    assert_eq!(first.await.unwrap().unwrap(), "/goaway", "GOAWAY is graceful");
    assert_eq!(get(&c, &s.url("/c")).await.unwrap(), "/c");
    assert_eq!(s.conns(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_requests_open_one_connection() {
    // The producer is slow to handshake, so all 50 requests arrive while the first connects.
    let s = server(None, Duration::from_millis(200)).await;
    let c = client(ClientConfig::default());
    let reqs = (0..50).map(|i| {
        let (c, url) = (c.clone(), s.url(&format!("/n/{i}")));
        tokio::spawn(async move { get(&c, &url).await.unwrap() })
    });
    for (i, r) in futures_util::future::join_all(reqs).await.into_iter().enumerate() {
        assert_eq!(r.unwrap(), format!("/n/{i}"));
    }
    assert_eq!(s.conns(), 1);

    // The same with three connections per producer: one connect per slot.
    let s = server(None, Duration::from_millis(200)).await;
    let c = client(ClientConfig { connections_per_producer: 3, ..ClientConfig::default() });
    let reqs = (0..60).map(|i| {
        let (c, url) = (c.clone(), s.url(&format!("/n/{i}")));
        tokio::spawn(async move { get(&c, &url).await.unwrap() })
    });
    for r in futures_util::future::join_all(reqs).await {
        r.unwrap();
    }
    assert_eq!(s.conns(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_to_a_dead_producer_all_fail_to_connect() {
    let dead = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
    let c = client(ClientConfig::default());
    let reqs = (0..20).map(|_| {
        let (c, url) = (c.clone(), format!("http://{dead}/x"));
        tokio::spawn(async move { c.get(&url).send().await })
    });
    for r in futures_util::future::join_all(reqs).await {
        let e = r.unwrap().unwrap_err();
        assert!(matches!(e, ClientError::Connect { .. }), "{e}");
    }
}

#[tokio::test]
async fn an_idle_connection_is_closed_and_a_busy_one_is_not() {
    let s = server(None, Duration::ZERO).await;
    let c = client(ClientConfig { pool_idle_timeout_ms: 150, ..ClientConfig::default() });
    // In flight for four idle periods: the connection stays.
    assert_eq!(get(&c, &s.url("/slow/600")).await.unwrap(), "/slow/600");
    assert_eq!(s.closed(), 0);
    // Then idle: closed within two periods.
    eventually("the client closed the idle connection", || s.closed() == 1).await;
    assert_eq!(get(&c, &s.url("/b")).await.unwrap(), "/b");
    assert_eq!(s.conns(), 2);

    // 0 keeps an idle connection open.
    let s = server(None, Duration::ZERO).await;
    let c = client(ClientConfig { pool_idle_timeout_ms: 0, ..ClientConfig::default() });
    get(&c, &s.url("/a")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!((s.conns(), s.closed()), (1, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_allowing_one_stream_gets_them_one_at_a_time() {
    let s = server(Some(1), Duration::ZERO).await;
    let c = client(ClientConfig::default());
    // Let the producer's SETTINGS arrive before the burst.
    get(&c, &s.url("/warm")).await.unwrap();
    let reqs = (0..40).map(|i| {
        let (c, url) = (c.clone(), s.url(&format!("/slow/{}", 5 + i % 3)));
        tokio::spawn(async move { get(&c, &url).await })
    });
    for r in futures_util::future::join_all(reqs).await {
        assert!(r.unwrap().unwrap().starts_with("/slow/"));
    }
    assert_eq!(s.n.max_active.load(Ordering::SeqCst), 1);
    assert_eq!(s.conns(), 1);
}
