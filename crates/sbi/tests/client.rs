//! The SBI client against small bare hyper servers on loopback sockets.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, Uri, Version};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use sbi::client::{
    user_agent, AttemptOutcome, ClientConfig, ClientError, SbiClient, TlsClientConfig,
};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

// ---------------------------------------------------------------------------------------------
// Test servers
// ---------------------------------------------------------------------------------------------

/// A test producer: counts TCP connections and requests.
struct Producer {
    addr: SocketAddr,
    conns: Arc<AtomicUsize>,
    hits: Arc<AtomicUsize>,
}

impl Producer {
    fn api_root(&self) -> String {
        format!("http://{}", self.addr)
    }
    fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }
}

/// What a test producer answers.
#[derive(Clone, Copy)]
enum Mode {
    /// Echo the request as JSON; `?delay_ms=N` waits first, `?size=N` answers N bytes instead.
    Echo,
    /// Always this status with a ProblemDetails body.
    Status(u16),
}

fn query_param<'a>(uri: &'a Uri, name: &str) -> Option<&'a str> {
    uri.query()?.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == name).then_some(v)
    })
}

async fn handle(name: &'static str, mode: Mode, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    if let Some(ms) = query_param(&parts.uri, "delay_ms") {
        tokio::time::sleep(Duration::from_millis(ms.parse().unwrap())).await;
    }
    if let Mode::Status(code) = mode {
        let problem = json!({"status": code, "cause": "TEST", "detail": name});
        return Response::builder()
            .status(code)
            .header("content-type", "application/problem+json")
            .body(Full::new(Bytes::from(problem.to_string())))
            .unwrap();
    }
    if let Some(n) = query_param(&parts.uri, "size") {
        let n: usize = n.parse().unwrap();
        let data: Vec<u8> = (0..n).map(|i| b'a' + (i % 26) as u8).collect();
        return Response::new(Full::new(Bytes::from(data)));
    }
    let h = |n: &str| parts.headers.get(n).map(|v| v.to_str().unwrap().to_owned());
    let echo = json!({
        "server": name,
        "method": parts.method.as_str(),
        "path": parts.uri.path(),
        "query": parts.uri.query(),
        "version": format!("{:?}", parts.version),
        "user_agent": h("user-agent"),
        "sender_timestamp": h("3gpp-sbi-sender-timestamp"),
        "max_rsp_time": h("3gpp-sbi-max-rsp-time"),
        "content_type": h("content-type"),
        "x_test": h("x-test"),
        "host": h("host"),
        "body": serde_json::from_slice::<Value>(&body).ok(),
    });
    Response::builder()
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(echo.to_string())))
        .unwrap()
}

/// Serves HTTP/2 (prior knowledge only) on every connection `accept` yields.
fn serve_h2<IO>(name: &'static str, mode: Mode, hits: Arc<AtomicUsize>, io: IO)
where
    IO: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let svc = service_fn(move |req| {
        hits.fetch_add(1, Ordering::SeqCst);
        async move { Ok::<_, Infallible>(handle(name, mode, req).await) }
    });
    tokio::spawn(async move {
        let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
            .serve_connection(io, svc)
            .await;
    });
}

async fn start_h2c(name: &'static str, mode: Mode) -> Producer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    start_h2c_on(listener, name, mode)
}

fn start_h2c_on(listener: TcpListener, name: &'static str, mode: Mode) -> Producer {
    let addr = listener.local_addr().unwrap();
    let conns = Arc::new(AtomicUsize::new(0));
    let hits = Arc::new(AtomicUsize::new(0));
    let (c, h) = (conns.clone(), hits.clone());
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            c.fetch_add(1, Ordering::SeqCst);
            serve_h2(name, mode, h.clone(), TokioIo::new(tcp));
        }
    });
    Producer { addr, conns, hits }
}

/// A port with nothing listening (bound once, then released).
async fn dead_port() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    l.local_addr().unwrap()
}

fn client(config: ClientConfig) -> SbiClient {
    SbiClient::new(&config).unwrap()
}

fn test_config() -> ClientConfig {
    ClientConfig {
        user_agent: Some(user_agent("PCF", "5a3c4c9e-8f1b-4a8e-9d3c-2f0e1b7a6c55")),
        ..ClientConfig::default()
    }
}

// ---------------------------------------------------------------------------------------------
// h2c basics
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn h2c_get_and_post_json_round_trip() {
    let p = start_h2c("p1", Mode::Echo).await;
    let c = client(test_config());

    let rsp = c.get(&p.url("/nudr-dr/v2/x?a=1")).send().await.unwrap();
    assert_eq!(rsp.status(), StatusCode::OK);
    assert_eq!(rsp.version(), Version::HTTP_2);
    let echo: Value = rsp.json().unwrap();
    assert_eq!(echo["method"], "GET");
    assert_eq!(echo["path"], "/nudr-dr/v2/x");
    assert_eq!(echo["query"], "a=1");
    assert_eq!(echo["version"], "HTTP/2.0");
    assert_eq!(echo["host"], Value::Null, "h2 uses :authority, no Host header");
    assert!(rsp.problem().is_none(), "application/json is not a problem");

    let doc = json!({"supi": "imsi-001010000000001", "list": [1, 2, 3], "nested": {"k": "v"}});
    let rsp = c
        .post(&p.url("/npcf-am-policy-control/v1/policies"))
        .header("x-test", "yes")
        .json(&doc)
        .send()
        .await
        .unwrap();
    let echo: Value = rsp.json().unwrap();
    assert_eq!(echo["method"], "POST");
    assert_eq!(echo["body"], doc);
    assert_eq!(echo["content_type"], "application/json");
    assert_eq!(echo["x_test"], "yes");
    assert_eq!(p.conns.load(Ordering::SeqCst), 1, "both requests on one connection");
}

#[tokio::test]
async fn problem_details_answer_is_parsed() {
    let p = start_h2c("p1", Mode::Status(404)).await;
    let c = client(test_config());
    let rsp = c.get(&p.url("/x")).send().await.unwrap();
    assert_eq!(rsp.status(), StatusCode::NOT_FOUND);
    let problem = rsp.problem().expect("problem+json body");
    assert_eq!(problem["status"], 404);
    assert_eq!(problem["cause"], "TEST");
}

#[tokio::test]
async fn large_response_arrives_whole() {
    let p = start_h2c("p1", Mode::Echo).await;
    let c = client(test_config());
    for n in [70_000usize, 1_500_000] {
        let rsp = c.get(&p.url(&format!("/big?size={n}"))).send().await.unwrap();
        assert_eq!(rsp.body().len(), n);
        assert!(rsp.body().iter().enumerate().all(|(i, b)| *b == b'a' + (i % 26) as u8));
    }
}

// On the current-thread runtime hyper-util's pool guarantees one connecting task per HTTP/2
// authority. (On a multi-thread runtime a request can, rarely, start a second connection in the
// instant the first one is handed to the pool: a benign spare socket, so not asserted here.)
#[tokio::test]
async fn concurrent_requests_share_one_connection() {
    let p = start_h2c("p1", Mode::Echo).await;
    let c = client(test_config());
    let start = Instant::now();
    let reqs = (0..200).map(|i| {
        let c = c.clone();
        let url = p.url(&format!("/n/{i}?delay_ms=100"));
        tokio::spawn(async move {
            let rsp = c.get(&url).send().await.unwrap();
            let echo: Value = rsp.json().unwrap();
            assert_eq!(echo["path"], format!("/n/{i}"));
        })
    });
    for r in futures_util::future::join_all(reqs).await {
        r.unwrap();
    }
    // 200 requests of 100 ms each: multiplexed, not one after the other (20 s).
    let took = start.elapsed();
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert_eq!(p.hits.load(Ordering::SeqCst), 200);
    assert_eq!(p.conns.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn connections_per_producer_spreads_requests_round_robin() {
    let p = start_h2c("p1", Mode::Echo).await;
    let c = client(ClientConfig { connections_per_producer: 3, ..test_config() });
    // One at a time first, so each slot opens its connection without racing the others.
    for i in 0..3 {
        assert_eq!(c.get(&p.url(&format!("/w/{i}"))).send().await.unwrap().status(), 200);
    }
    let reqs = (0..90).map(|i| {
        let c = c.clone();
        let url = p.url(&format!("/n/{i}?delay_ms=20"));
        tokio::spawn(async move { c.get(&url).send().await.unwrap().status() })
    });
    for r in futures_util::future::join_all(reqs).await {
        assert_eq!(r.unwrap(), 200);
    }
    assert_eq!(p.hits.load(Ordering::SeqCst), 93);
    assert_eq!(p.conns.load(Ordering::SeqCst), 3);
    let bad = SbiClient::new(&ClientConfig { connections_per_producer: 0, ..test_config() });
    assert!(matches!(bad, Err(ClientError::Config(_))));
}

#[tokio::test]
async fn user_agent_and_sender_timestamp_are_added() {
    let p = start_h2c("p1", Mode::Echo).await;
    let c = client(test_config());
    let before = chrono::Utc::now();
    let echo: Value = c.get(&p.url("/x")).send().await.unwrap().json().unwrap();
    let after = chrono::Utc::now();

    assert_eq!(echo["user_agent"], "PCF-5a3c4c9e-8f1b-4a8e-9d3c-2f0e1b7a6c55");
    let ts = echo["sender_timestamp"].as_str().expect("timestamp sent");
    // `Sun, 04 Aug 2019 08:49:37.845 GMT`: fixed width, milliseconds, GMT.
    assert_eq!(ts.len(), 33, "{ts}");
    assert!(ts.ends_with(" GMT") && ts.as_bytes()[3] == b',' && ts.as_bytes()[25] == b'.');
    let fmt = "%a, %d %b %Y %H:%M:%S%.3f GMT";
    let t = chrono::NaiveDateTime::parse_from_str(ts, fmt).unwrap().and_utc();
    assert_eq!(t.format(fmt).to_string(), ts, "canonical form");
    let slack = chrono::Duration::milliseconds(1);
    assert!(t >= before - slack && t <= after + slack, "{t} not in {before}..{after}");

    // Values set by the caller are kept.
    let echo: Value = c
        .get(&p.url("/x"))
        .header("user-agent", "SMF-other")
        .header("3gpp-sbi-sender-timestamp", "Sun, 04 Aug 2019 08:49:37.845 GMT")
        .send()
        .await
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(echo["user_agent"], "SMF-other");
    assert_eq!(echo["sender_timestamp"], "Sun, 04 Aug 2019 08:49:37.845 GMT");

    // Without a configured User-Agent there is still one.
    let echo: Value =
        client(ClientConfig::default()).get(&p.url("/x")).send().await.unwrap().json().unwrap();
    assert_eq!(echo["user_agent"], "fivecore");
}

#[tokio::test]
async fn invalid_uris_are_rejected() {
    let c = client(test_config());
    for url in ["/relative", "ftp://127.0.0.1:1/x", "not a uri"] {
        let e = c.get(url).send().await.unwrap_err();
        assert!(matches!(e, ClientError::InvalidUri { .. }), "{url}: {e}");
    }
    let e = c.get("http://127.0.0.1:1/").header("x", "a\nb").send().await;
    assert!(matches!(e, Err(ClientError::InvalidRequest(_))));
}

// ---------------------------------------------------------------------------------------------
// Timeouts
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn max_rsp_time_header_bounds_the_wait() {
    let p = start_h2c("p1", Mode::Echo).await;
    let c = client(test_config());

    // Reaches the producer as integer milliseconds.
    let echo: Value = c
        .get(&p.url("/x"))
        .max_rsp_time(Duration::from_millis(1500))
        .send()
        .await
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(echo["max_rsp_time"], "1500");

    let start = Instant::now();
    let e = c
        .get(&p.url("/slow?delay_ms=5000"))
        .max_rsp_time(Duration::from_millis(200))
        .send()
        .await
        .unwrap_err();
    let took = start.elapsed();
    match &e {
        ClientError::Timeout { after, .. } => assert_eq!(*after, Duration::from_millis(200)),
        other => panic!("expected timeout, got {other}"),
    }
    assert!(e.is_timeout());
    assert!(took >= Duration::from_millis(190), "{took:?}");
    assert!(took < Duration::from_millis(1500), "{took:?}");

    // A header set by hand works the same.
    let start = Instant::now();
    let e = c
        .get(&p.url("/slow?delay_ms=5000"))
        .header("3gpp-Sbi-Max-Rsp-Time", "150")
        .send()
        .await
        .unwrap_err();
    assert!(matches!(e, ClientError::Timeout { after, .. } if after == Duration::from_millis(150)));
    assert!(start.elapsed() < Duration::from_millis(1500));
}

#[tokio::test]
async fn default_timeout_applies_without_header() {
    let p = start_h2c("p1", Mode::Echo).await;
    let c = client(ClientConfig { request_timeout_ms: 300, ..test_config() });
    assert_eq!(c.default_timeout(), Duration::from_millis(300));
    let start = Instant::now();
    let e = c.get(&p.url("/slow?delay_ms=5000")).send().await.unwrap_err();
    let took = start.elapsed();
    assert!(
        matches!(e, ClientError::Timeout { after, .. } if after == Duration::from_millis(300)),
        "{e}"
    );
    assert!(took >= Duration::from_millis(290) && took < Duration::from_millis(2000), "{took:?}");

    // A delay below the default succeeds, and the connection is still usable after the timeout.
    let rsp = c.get(&p.url("/ok?delay_ms=50")).send().await.unwrap();
    assert_eq!(rsp.status(), StatusCode::OK);
    assert_eq!(p.conns.load(Ordering::SeqCst), 1);
}

// ---------------------------------------------------------------------------------------------
// Alternate producers
// ---------------------------------------------------------------------------------------------

fn roots(list: &[String]) -> Vec<Uri> {
    list.iter().map(|s| s.parse().unwrap()).collect()
}

#[tokio::test]
async fn connection_refused_goes_to_alternate() {
    let dead = dead_port().await;
    let p2 = start_h2c("p2", Mode::Echo).await;
    let c = client(test_config());
    let doc = json!({"n": 1});
    let rsp = c
        .put("/nudr-dr/v2/a?b=c")
        .header("x-test", "kept")
        .json(&doc)
        .send_with_alternates(&roots(&[format!("http://{dead}"), p2.api_root()]))
        .await
        .unwrap();
    let echo: Value = rsp.json().unwrap();
    assert_eq!(echo["server"], "p2");
    assert_eq!(echo["method"], "PUT");
    assert_eq!(echo["path"], "/nudr-dr/v2/a");
    assert_eq!(echo["query"], "b=c");
    assert_eq!(echo["x_test"], "kept");
    assert_eq!(echo["body"], doc);
}

#[tokio::test]
async fn service_unavailable_goes_to_alternate_with_same_request() {
    let p1 = start_h2c("p1", Mode::Status(503)).await;
    let p2 = start_h2c("p2", Mode::Echo).await;
    let c = client(test_config());

    // Low-level form: parts + body; parts.uri's authority is replaced, apiRoot prefix added.
    let req = Request::builder()
        .method(Method::POST)
        .uri("http://ignored.invalid:9/v1/things?x=1")
        .header("x-test", "same")
        .header("content-type", "application/json")
        .body(())
        .unwrap();
    let (parts, ()) = req.into_parts();
    let producers = roots(&[p1.api_root(), format!("{}/prefix/", p2.api_root())]);
    let rsp = c
        .send_with_alternates(parts, Bytes::from_static(b"{\"a\":true}"), &producers)
        .await
        .unwrap();
    let echo: Value = rsp.json().unwrap();
    assert_eq!(echo["server"], "p2");
    assert_eq!(echo["method"], "POST");
    assert_eq!(echo["path"], "/prefix/v1/things");
    assert_eq!(echo["query"], "x=1");
    assert_eq!(echo["x_test"], "same");
    assert_eq!(echo["body"], json!({"a": true}));
    assert!(echo["sender_timestamp"].is_string());
    assert_eq!(echo["user_agent"], "PCF-5a3c4c9e-8f1b-4a8e-9d3c-2f0e1b7a6c55");
    assert_eq!(p1.hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn timeout_goes_to_alternate() {
    let p2 = start_h2c("p2", Mode::Echo).await;
    let c = client(test_config());
    // The first producer accepts TCP connections but never speaks HTTP/2.
    let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_addr = silent.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = silent.accept().await {
            held.push(s);
        }
    });
    let start = Instant::now();
    let rsp = c
        .get("/x")
        .max_rsp_time(Duration::from_millis(250))
        .send_with_alternates(&roots(&[format!("http://{silent_addr}"), p2.api_root()]))
        .await
        .unwrap();
    assert_eq!(rsp.json::<Value>().unwrap()["server"], "p2");
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(240) && took < Duration::from_millis(2000), "{took:?}");
}

#[tokio::test]
async fn all_producers_failing_lists_every_attempt() {
    let dead = dead_port().await;
    let p2 = start_h2c("p2", Mode::Status(503)).await;
    let c = client(test_config());
    let e = c
        .delete("/nnrf-nfm/v1/nf-instances/1")
        .send_with_alternates(&roots(&[format!("http://{dead}"), p2.api_root()]))
        .await
        .unwrap_err();
    let text = e.to_string();
    let ClientError::AllProducersFailed { attempts, last_response } = e else {
        panic!("expected AllProducersFailed, got {text}");
    };
    assert_eq!(attempts.len(), 2, "{text}");
    assert_eq!(attempts[0].producer, format!("http://{dead}/"));
    assert!(
        matches!(&attempts[0].outcome, AttemptOutcome::Failed(e) if matches!(**e, ClientError::Connect { .. }))
    );
    assert_eq!(attempts[1].producer, format!("{}/", p2.api_root()));
    assert!(matches!(attempts[1].outcome, AttemptOutcome::Status(StatusCode::SERVICE_UNAVAILABLE)));
    let last = last_response.expect("the 503 answer is kept");
    assert_eq!(last.problem().unwrap()["detail"], "p2");
    assert!(text.contains(&dead.to_string()) && text.contains("503"), "{text}");
    assert!(text.to_lowercase().contains("refused"), "{text}");
}

#[tokio::test]
async fn not_found_and_server_error_are_not_retried() {
    for code in [404u16, 500] {
        let p1 = start_h2c("p1", Mode::Status(code)).await;
        let p2 = start_h2c("p2", Mode::Echo).await;
        let c = client(test_config());
        let rsp = c
            .get("/x")
            .send_with_alternates(&roots(&[p1.api_root(), p2.api_root()]))
            .await
            .unwrap();
        assert_eq!(rsp.status().as_u16(), code);
        assert_eq!(rsp.problem().unwrap()["detail"], "p1");
        assert_eq!(p2.hits.load(Ordering::SeqCst), 0);
    }
}

#[tokio::test]
async fn gateway_timeout_is_retried_and_max_alternates_caps_attempts() {
    let a = start_h2c("a", Mode::Status(504)).await;
    let b = start_h2c("b", Mode::Status(503)).await;
    let d = start_h2c("d", Mode::Echo).await;
    let c = client(ClientConfig { max_alternates: 1, ..test_config() });
    let e = c
        .get("/x")
        .send_with_alternates(&roots(&[a.api_root(), b.api_root(), d.api_root()]))
        .await
        .unwrap_err();
    match e {
        ClientError::AllProducersFailed { attempts, .. } => {
            assert_eq!(attempts.len(), 2);
            assert!(matches!(
                attempts[0].outcome,
                AttemptOutcome::Status(StatusCode::GATEWAY_TIMEOUT)
            ));
        }
        other => panic!("{other}"),
    }
    assert_eq!(d.hits.load(Ordering::SeqCst), 0);
    assert!(matches!(c.get("/x").send_with_alternates(&[]).await, Err(ClientError::NoProducers)));
}

// ---------------------------------------------------------------------------------------------
// TLS
// ---------------------------------------------------------------------------------------------

struct Pki {
    ca_pem: String,
    server_chain: Vec<CertificateDer<'static>>,
    server_key: PrivateKeyDer<'static>,
    ca_der: CertificateDer<'static>,
    client_cert_pem: String,
    client_key_pem: String,
}

fn pki() -> Pki {
    let ca_key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, "fivecore test CA");
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = p.self_signed(&ca_key).unwrap();

    let server_key = KeyPair::generate().unwrap();
    let mut p =
        CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).unwrap();
    p.distinguished_name.push(DnType::CommonName, "udr.fivecore.test");
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server = p.signed_by(&server_key, &ca, &ca_key).unwrap();

    let client_key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(vec!["pcf.fivecore.test".to_owned()]).unwrap();
    p.distinguished_name.push(DnType::CommonName, "pcf.fivecore.test");
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let client = p.signed_by(&client_key, &ca, &ca_key).unwrap();

    Pki {
        ca_pem: ca.pem(),
        ca_der: ca.der().clone(),
        server_chain: vec![server.der().clone()],
        server_key: PrivatePkcs8KeyDer::from(server_key.serialize_der()).into(),
        client_cert_pem: client.pem(),
        client_key_pem: client_key.serialize_pem(),
    }
}

struct TlsProducer {
    addr: SocketAddr,
    /// ALPN protocol of each completed handshake.
    alpn: Arc<Mutex<Vec<Option<Vec<u8>>>>>,
    handshake_failures: Arc<AtomicUsize>,
}

async fn start_tls(pki: &Pki, require_client_cert: bool) -> TlsProducer {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = if require_client_cert {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(pki.ca_der.clone()).unwrap();
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .unwrap();
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let mut cfg =
        builder.with_single_cert(pki.server_chain.clone(), pki.server_key.clone_key()).unwrap();
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let alpn = Arc::new(Mutex::new(Vec::new()));
    let handshake_failures = Arc::new(AtomicUsize::new(0));
    let (a, f) = (alpn.clone(), handshake_failures.clone());
    let hits = Arc::new(AtomicUsize::new(0));
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, a, f, hits) = (acceptor.clone(), a.clone(), f.clone(), hits.clone());
            tokio::spawn(async move {
                match acceptor.accept(tcp).await {
                    Ok(tls) => {
                        a.lock().unwrap().push(tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec));
                        serve_h2("tls", Mode::Echo, hits, TokioIo::new(tls));
                    }
                    Err(_) => {
                        f.fetch_add(1, Ordering::SeqCst);
                    }
                }
            });
        }
    });
    TlsProducer { addr, alpn, handshake_failures }
}

#[tokio::test]
async fn tls_with_alpn_h2() {
    let pki = pki();
    let server = start_tls(&pki, false).await;
    let url = format!("https://{}/nudr-dr/v2/x", server.addr);

    let c =
        SbiClient::builder(test_config()).add_root_ca_pem(pki.ca_pem.as_bytes()).build().unwrap();
    let rsp = c.get(&url).send().await.unwrap();
    assert_eq!(rsp.version(), Version::HTTP_2);
    assert_eq!(rsp.json::<Value>().unwrap()["path"], "/nudr-dr/v2/x");
    let rsp = c.get(&url).send().await.unwrap();
    assert_eq!(rsp.status(), StatusCode::OK);
    assert_eq!(
        *server.alpn.lock().unwrap(),
        vec![Some(b"h2".to_vec())],
        "one pooled TLS connection"
    );

    // No trusted root: the server certificate is refused during connect.
    let e = client(test_config()).get(&url).send().await.unwrap_err();
    assert!(matches!(e, ClientError::Connect { .. }), "{e}");
}

#[tokio::test]
async fn mutual_tls_requires_client_certificate() {
    let pki = pki();
    let server = start_tls(&pki, true).await;
    let url = format!("https://{}/x", server.addr);

    let without =
        SbiClient::builder(test_config()).add_root_ca_pem(pki.ca_pem.as_bytes()).build().unwrap();
    let e = without.get(&url).max_rsp_time(Duration::from_secs(2)).send().await.unwrap_err();
    assert!(matches!(e, ClientError::Connect { .. } | ClientError::Http { .. }), "{e}");
    assert_eq!(server.handshake_failures.load(Ordering::SeqCst), 1);

    let with = SbiClient::builder(test_config())
        .add_root_ca_pem(pki.ca_pem.as_bytes())
        .client_identity_pem(pki.client_cert_pem.as_bytes(), pki.client_key_pem.as_bytes())
        .build()
        .unwrap();
    let rsp = with.get(&url).send().await.unwrap();
    assert_eq!(rsp.version(), Version::HTTP_2);

    // The same from PEM files named in the configuration.
    let dir = std::env::temp_dir().join(format!("fivecore-sbi-client-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let (ca, cert, key) = (dir.join("ca.pem"), dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    std::fs::write(&cert, &pki.client_cert_pem).unwrap();
    std::fs::write(&key, &pki.client_key_pem).unwrap();
    let config: ClientConfig = serde_json::from_value(json!({
        "user_agent": "PCF-1",
        "tls": {"ca_files": [ca], "cert_file": cert, "key_file": key}
    }))
    .unwrap();
    assert_eq!(
        config.tls,
        TlsClientConfig {
            ca_files: vec![ca.clone()],
            cert_file: Some(cert.clone()),
            key_file: Some(key.clone()),
            // Not in the file: the default.
            reload_secs: 10,
        }
    );
    let from_files = client(config);
    let echo: Value = from_files.get(&url).send().await.unwrap().json().unwrap();
    assert_eq!(echo["user_agent"], "PCF-1");
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---------------------------------------------------------------------------------------------
// HTTP/2 PING liveness
// ---------------------------------------------------------------------------------------------

/// A TCP proxy whose existing connections can be frozen: after `freeze`, bytes read on them
/// are dropped and nothing more is written, while the sockets stay open (a producer that hangs
/// without closing its connection). New connections are forwarded normally.
struct FreezableProxy {
    addr: SocketAddr,
    conns: Arc<AtomicUsize>,
    flags: Arc<Mutex<Vec<Arc<AtomicBool>>>>,
}

impl FreezableProxy {
    async fn start(backend: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let conns = Arc::new(AtomicUsize::new(0));
        let flags: Arc<Mutex<Vec<Arc<AtomicBool>>>> = Arc::default();
        let (c, fl) = (conns.clone(), flags.clone());
        tokio::spawn(async move {
            while let Ok((down, _)) = listener.accept().await {
                c.fetch_add(1, Ordering::SeqCst);
                let frozen = Arc::new(AtomicBool::new(false));
                fl.lock().unwrap().push(frozen.clone());
                let up = TcpStream::connect(backend).await.unwrap();
                let (dr, dw) = down.into_split();
                let (ur, uw) = up.into_split();
                tokio::spawn(pump(dr, uw, frozen.clone()));
                tokio::spawn(pump(ur, dw, frozen));
            }
        });
        Self { addr, conns, flags }
    }

    fn freeze(&self) {
        for f in self.flags.lock().unwrap().iter() {
            f.store(true, Ordering::SeqCst);
        }
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    frozen: Arc<AtomicBool>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if frozen.load(Ordering::SeqCst) {
            // Hold both halves open and silent until the test ends.
            let _keep = (from, to);
            std::future::pending::<()>().await;
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ping_timeout_drops_a_hung_connection() {
    let backend = start_h2c("backend", Mode::Echo).await;
    let proxy = FreezableProxy::start(backend.addr).await;
    let url = format!("http://{}/x", proxy.addr);

    let pinging = client(ClientConfig {
        ping_interval_ms: 150,
        ping_timeout_ms: 250,
        request_timeout_ms: 2_000,
        ..test_config()
    });
    let silent = client(ClientConfig { ping_interval_ms: 0, ..test_config() });
    pinging.get(&url).send().await.unwrap();
    silent.get(&url).send().await.unwrap();
    assert_eq!(proxy.conns.load(Ordering::SeqCst), 2);

    proxy.freeze();
    // A PING goes unanswered within ~150 ms, the connection is dropped ~250 ms later.
    tokio::time::sleep(Duration::from_millis(1_200)).await;

    let start = Instant::now();
    let rsp = pinging.get(&url).send().await.unwrap();
    assert_eq!(rsp.json::<Value>().unwrap()["server"], "backend");
    assert!(start.elapsed() < Duration::from_millis(1_500));
    assert_eq!(proxy.conns.load(Ordering::SeqCst), 3, "pinging client reconnected");

    // Control: without PINGs the hung pooled connection is reused and the request times out.
    let e = silent.get(&url).max_rsp_time(Duration::from_millis(300)).send().await.unwrap_err();
    assert!(matches!(e, ClientError::Timeout { .. }), "{e}");
    assert_eq!(proxy.conns.load(Ordering::SeqCst), 3);
}
