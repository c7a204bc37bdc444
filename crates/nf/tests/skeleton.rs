//! The NF skeleton as an NF meets it: a store opened, an SBI port serving a route, a profile
//! registered with a (fake) NRF, and the stop in its fixed order, over real sockets.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Method, StatusCode};
use nf::{Answer, NfError, Skeleton, Spec};
use nrf_client::NrfClientConfig;
use sbi::client::{ClientConfig, SbiClient};
use sbi::{empty_response, Router, SbiRequest, SbiServer, ServerConfig};

type Log = Arc<Mutex<Vec<String>>>;

/// An NRF that accepts every registration and deregistration and logs them.
async fn fake_nrf(log: Log) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
    async fn register(log: Log, req: SbiRequest) -> Answer {
        log.lock().unwrap().push(format!("NFRegister {}", req.param("id")));
        let mut resp = sbi::router::Response::new(sbi::Body::from(req.body.clone()));
        *resp.status_mut() = StatusCode::CREATED;
        resp.headers_mut()
            .insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
        Ok(resp)
    }
    async fn deregister(log: Log, req: SbiRequest) -> Answer {
        log.lock().unwrap().push(format!("NFDeregister {}", req.param("id")));
        Ok(empty_response(StatusCode::NO_CONTENT))
    }
    let router = Router::builder(log)
        .route(
            Method::PUT,
            "/nnrf-nfm/v1/nf-instances/{id}",
            "Nnrf_NFManagement_NFRegister",
            register,
        )
        .route(
            Method::DELETE,
            "/nnrf-nfm/v1/nf-instances/{id}",
            "Nnrf_NFManagement_NFDeregister",
            deregister,
        )
        .build();
    let config = ServerConfig { listen: "127.0.0.1:0".parse().unwrap(), ..Default::default() };
    let server = SbiServer::bind(
        config,
        sbi::NfIdentity::new("NRF", "fake"),
        router,
        sbi::Observability::new(),
    )
    .await
    .unwrap();
    let addr = server.local_addr();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.serve(async move {
        let _ = rx.await;
    }));
    (addr, tx)
}

fn spec(dir: &tempfile::TempDir, nrf: Option<SocketAddr>) -> Spec {
    Spec {
        nf_type: "BSF",
        instance_id: Some("2f6a7c1e-0b1d-4c55-9a51-6f3e2d4c1b00".into()),
        sbi: ServerConfig { listen: "127.0.0.1:0".parse().unwrap(), ..Default::default() },
        client: ClientConfig::default(),
        store: store::SqliteConfig::new(dir.path().join("nf.db")),
        nrf: nrf.map(|a| NrfClientConfig {
            api_roots: vec![format!("http://{a}")],
            ..NrfClientConfig::default()
        }),
        copy: Default::default(),
    }
}

/// A handler whose store lookup finds nothing: the error edge answers it.
async fn lookup(_: Arc<()>, _: SbiRequest) -> Answer {
    Err(NfError::Store(store::Error::NotFound))
}

async fn ping(_: Arc<()>, _: SbiRequest) -> Answer {
    Ok(empty_response(StatusCode::NO_CONTENT))
}

fn router() -> Router {
    Router::builder(Arc::new(()))
        .route(Method::GET, "/ntest/v1/ping", "Ntest_Ping", ping)
        .route(Method::GET, "/ntest/v1/things/{id}", "Ntest_Get", lookup)
        .build()
}

async fn wait_for(log: &Log, entry: &str) {
    for _ in 0..200 {
        if log.lock().unwrap().iter().any(|e| e == entry) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{entry} never happened: {:?}", log.lock().unwrap());
}

#[tokio::test]
async fn serves_registers_and_stops_in_order() {
    let log: Log = Arc::default();
    let (nrf_addr, _nrf_stop) = fake_nrf(log.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let skeleton = Skeleton::open(spec(&dir, Some(nrf_addr))).await.unwrap();
    let store = skeleton.store().clone();
    let mut serving = skeleton.bind(router()).await.unwrap();
    let addr = serving.local_addr();
    let profile = serving.profile().service("ntest", serving.scheme(), addr.port()).build();
    assert_eq!(profile["ipv4Addresses"][0], "127.0.0.1");
    assert!(serving.register(profile).unwrap(), "an NRF is configured");
    let step_log = log.clone();
    serving.on_stop(async move { step_log.lock().unwrap().push("NF stop step".into()) });
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(serving.serve(async move {
        let _ = stop_rx.await;
    }));

    let id = "2f6a7c1e-0b1d-4c55-9a51-6f3e2d4c1b00";
    wait_for(&log, &format!("NFRegister {id}")).await;
    let http = SbiClient::new(&ClientConfig::default()).unwrap();
    let base = format!("http://{addr}");
    let ready = http.get(&format!("{base}/healthz/ready")).send().await.unwrap();
    assert_eq!(ready.status(), StatusCode::OK, "ready as soon as it serves");
    let ping = http.get(&format!("{base}/ntest/v1/ping")).send().await.unwrap();
    assert_eq!(ping.status(), StatusCode::NO_CONTENT);
    let missing = http.get(&format!("{base}/ntest/v1/things/x")).send().await.unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    assert_eq!(missing.header("content-type"), Some("application/problem+json"));
    assert_eq!(missing.problem().unwrap()["cause"], "RESOURCE_NOT_FOUND");

    stop_tx.send(()).unwrap();
    served.await.unwrap().unwrap();
    let log = log.lock().unwrap().clone();
    assert_eq!(
        log,
        vec![format!("NFRegister {id}"), "NF stop step".to_owned(), format!("NFDeregister {id}"),],
        "the NF's own stop runs before the NRF registration is withdrawn"
    );
    assert!(
        matches!(store.write(|_| Ok(())).await, Err(store::Error::Closed)),
        "the store is closed last"
    );
}

#[tokio::test]
async fn a_deferred_nf_is_ready_when_it_says_so_and_registers_nowhere_without_an_nrf() {
    let dir = tempfile::tempdir().unwrap();
    let skeleton = Skeleton::open(spec(&dir, None)).await.unwrap();
    let mut serving = skeleton.bind(router()).await.unwrap();
    assert!(!serving.register(serving.profile().build()).unwrap(), "no NRF configured");
    serving.defer_ready();
    let observability = serving.observability().clone();
    let addr = serving.local_addr();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(serving.serve(async move {
        let _ = stop_rx.await;
    }));
    let http = SbiClient::new(&ClientConfig::default()).unwrap();
    let ready = format!("http://{addr}/healthz/ready");
    assert_eq!(http.get(&ready).send().await.unwrap().status(), StatusCode::SERVICE_UNAVAILABLE);
    observability.set_ready(true);
    assert_eq!(http.get(&ready).send().await.unwrap().status(), StatusCode::OK);
    stop_tx.send(()).unwrap();
    served.await.unwrap().unwrap();
}

#[tokio::test]
async fn an_nf_on_sqlite_only_refuses_the_mysql_backend_naming_itself() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = spec(&dir, None);
    spec.store.backend = store::Backend::Mysql;
    spec.store.url = vec!["mysql://root@127.0.0.1:9/fc".into()];
    let err = Skeleton::open(spec).await.err().expect("refused");
    assert!(matches!(err, nf::StartError::Config(_)), "{err}");
    let text = err.to_string();
    assert!(text.contains("the BSF keeps its state on SQLite only"), "{text}");
    assert!(!dir.path().join("nf.db").exists(), "no SQLite file the operator did not ask for");
}

#[tokio::test]
async fn open_any_opens_the_configured_backend() {
    let dir = tempfile::tempdir().unwrap();
    let skeleton = Skeleton::open_any(spec(&dir, None)).await.unwrap();
    assert!(matches!(skeleton.store(), store::AnyStore::Sqlite(_)));
    assert!(dir.path().join("nf.db").exists());
    skeleton.close().await;

    // MySQL is opened, not SQLite: with no server to reach, the start fails on the connection.
    let mut spec = spec(&dir, None);
    spec.store.path = dir.path().join("other.db");
    spec.store.backend = store::Backend::Mysql;
    spec.store.url = vec!["mysql://root@127.0.0.1:9/fc".into()];
    spec.store.connect_timeout_ms = 500;
    let err = Skeleton::open_any(spec).await.err().expect("no server on port 9");
    assert!(matches!(err, nf::StartError::Store(_)), "{err}");
    assert!(!dir.path().join("other.db").exists());
}
