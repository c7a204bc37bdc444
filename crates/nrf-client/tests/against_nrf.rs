//! The NRF client against the real NRF of `crates/nrf`, over real sockets on 127.0.0.1, each
//! NRF with its own tempdir store. One test binary (link time on a small machine).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use nrf::{NrfConfig, RunConfig};
use nrf_client::{notify, DiscoveryQuery, NfState, NrfClient, NrfClientConfig, ProfileBuilder};
use sbi::client::{ClientConfig, SbiClient};
use sbi::{NfIdentity, Observability, Router, SbiServer, ServerConfig};
use serde_json::{json, Value};
use testkit::specs::Specs;
use tokio::sync::oneshot;

// ---- harness ---------------------------------------------------------------------------------

struct TestNrf {
    base: String,
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), nrf::NrfError>>>,
}

/// An NRF with 1 s heartbeats allowed and a fast audit.
fn nrf_config() -> NrfConfig {
    NrfConfig {
        heartbeat_timer_secs: 1,
        heartbeat_min_secs: 1,
        audit_interval_ms: 200,
        ..NrfConfig::default()
    }
}

impl TestNrf {
    async fn start(dir: &Path, config: NrfConfig) -> TestNrf {
        Self::start_at(dir, config, SocketAddr::from(([127, 0, 0, 1], 0))).await
    }

    async fn start_at(dir: &Path, config: NrfConfig, listen: SocketAddr) -> TestNrf {
        let run = RunConfig {
            nrf: config,
            sbi: ServerConfig { listen, shutdown_grace_secs: 0, ..ServerConfig::default() },
            client: ClientConfig { request_timeout_ms: 1000, ..ClientConfig::default() },
            store: store::SqliteConfig {
                readers: 1,
                ..store::SqliteConfig::new(dir.join("nrf.db"))
            },
            instance_id: None,
        };
        let bound = nrf::bind(run).await.expect("NRF starts");
        let addr = bound.local_addr();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(bound.serve(async {
            let _ = rx.await;
        }));
        TestNrf { base: format!("http://{addr}"), addr, stop: Some(tx), task: Some(task) }
    }

    async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            t.await.unwrap().unwrap();
        }
    }

    /// GET of an NF profile on the NRF: its status code and body.
    async fn profile(&self, id: &str) -> (u16, Value) {
        let r = http().get(&format!("{}/nnrf-nfm/v1/nf-instances/{id}", self.base)).send().await;
        let r = r.unwrap();
        (r.status().as_u16(), serde_json::from_slice(r.body()).unwrap_or(Value::Null))
    }

    /// `sbi_requests_total` for `operation`, summed over status classes.
    async fn count(&self, operation: &str) -> u64 {
        let r = http().get(&format!("{}/metrics", self.base)).send().await.unwrap();
        let text = String::from_utf8_lossy(r.body()).into_owned();
        let needle = format!("operation=\"{operation}\"");
        text.lines()
            .filter(|l| l.starts_with("sbi_requests_total{") && l.contains(&needle))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    }
}

fn http() -> SbiClient {
    SbiClient::new(&ClientConfig {
        request_timeout_ms: 1000,
        connect_timeout_ms: 300,
        ..ClientConfig::default()
    })
    .unwrap()
}

fn uuid(n: u32) -> String {
    format!("{n:08x}-0000-4000-8000-00000000c11e")
}

fn config(roots: &[&str]) -> NrfClientConfig {
    NrfClientConfig {
        api_roots: roots.iter().map(|r| r.to_string()).collect(),
        register_retry_initial_ms: 100,
        register_retry_max_ms: 400,
        heartbeat_failures_to_suspend: 1,
        request_timeout_ms: 1000,
        subscription_check_ms: 200,
        ..NrfClientConfig::default()
    }
}

fn client(cfg: NrfClientConfig, nf_type: &str, n: u32) -> NrfClient {
    let profile = ProfileBuilder::new(nf_type, &uuid(n)).ipv4("127.0.0.1").build();
    NrfClient::new(cfg, http(), profile).unwrap()
}

async fn eventually<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..100 {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("not within 10 s: {what}");
}

/// A port nothing listens on (bound, then released).
async fn free_addr() -> SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    l.local_addr().unwrap()
}

/// The NF's own SBI server with only the NFStatusNotify callback route; returns its URL.
async fn callback_server(c: &NrfClient) -> (String, oneshot::Sender<()>) {
    let router: Router =
        notify::route(Router::builder(Arc::new(())), "/nf-status-notify", c.clone()).build();
    let server = SbiServer::bind(
        ServerConfig { shutdown_grace_secs: 0, ..ServerConfig::default() },
        NfIdentity::new(c.nf_type(), c.instance_id()),
        router,
        Observability::new(),
    )
    .await
    .unwrap();
    let url = format!("http://{}/nf-status-notify", server.local_addr());
    let (tx, rx) = oneshot::channel::<()>();
    tokio::spawn(server.serve(async {
        let _ = rx.await;
    }));
    (url, tx)
}

// ---- registration ----------------------------------------------------------------------------

#[tokio::test]
async fn registers_then_heartbeats_with_load() {
    let dir = tempfile::tempdir().unwrap();
    let nrf = TestNrf::start(dir.path(), nrf_config()).await;
    let c = client(config(&[&nrf.base]), "PCF", 1);
    c.set_load(Some(40));
    c.start();
    assert!(c.wait_for_state(NfState::Registered, Duration::from_secs(5)).await);
    // No heartBeatTimer proposed: the NRF's 1 s is adopted.
    assert_eq!(c.heartbeat_timer(), Some(Duration::from_secs(1)));
    let (status, p) = nrf.profile(&uuid(1)).await;
    assert_eq!(status, 200);
    assert_eq!(p["nfStatus"], "REGISTERED");
    assert_eq!(nrf.count("Nnrf_NFManagement_NFRegister").await, 1);
    // Heartbeats every 0.9 s, carrying the load.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(nrf.count("Nnrf_NFManagement_NFUpdate").await >= 2);
    assert_eq!(nrf.profile(&uuid(1)).await.1["load"], 40);
    assert_eq!(c.state(), NfState::Registered);
    // NFUpdate of the own profile.
    let mut p = c.profile();
    p["priority"] = json!(7);
    c.update_profile(p).await.unwrap();
    assert_eq!(nrf.profile(&uuid(1)).await.1["priority"], 7);
    assert_eq!(c.profile()["priority"], 7);
    assert!(c.update_profile(json!({"nfInstanceId": uuid(9), "nfType": "PCF"})).await.is_err());
    c.shutdown().await;
    nrf.stop().await;
}

#[tokio::test]
async fn reregisters_when_nrf_restarts_empty() {
    let dir1 = tempfile::tempdir().unwrap();
    let dir2 = tempfile::tempdir().unwrap();
    let nrf = TestNrf::start(dir1.path(), nrf_config()).await;
    let addr = nrf.addr;
    let c = client(config(&[&nrf.base]), "UDR", 2);
    c.start();
    assert!(c.wait_for_state(NfState::Registered, Duration::from_secs(5)).await);
    nrf.stop().await;
    // While the NRF is down heartbeats fail: Suspended.
    assert!(c.wait_for_state(NfState::Suspended, Duration::from_secs(5)).await);
    // Same address, empty store: the next heartbeat gets 404 and the NF registers again.
    let nrf = TestNrf::start_at(dir2.path(), nrf_config(), addr).await;
    eventually("registered again", || async { nrf.profile(&uuid(2)).await.0 == 200 }).await;
    assert!(nrf.count("Nnrf_NFManagement_NFUpdate").await >= 1, "a heartbeat saw 404 first");
    assert_eq!(nrf.count("Nnrf_NFManagement_NFRegister").await, 1);
    assert!(c.wait_for_state(NfState::Registered, Duration::from_secs(5)).await);
    c.shutdown().await;
    nrf.stop().await;
}

#[tokio::test]
async fn deregisters_on_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let nrf = TestNrf::start(dir.path(), nrf_config()).await;
    let c = client(config(&[&nrf.base]), "BSF", 3);
    c.start();
    assert!(c.wait_for_state(NfState::Registered, Duration::from_secs(5)).await);
    assert_eq!(nrf.profile(&uuid(3)).await.0, 200);
    c.shutdown().await;
    assert_eq!(c.state(), NfState::Deregistered);
    assert_eq!(nrf.profile(&uuid(3)).await.0, 404);
    assert_eq!(nrf.count("Nnrf_NFManagement_NFDeregister").await, 1);
    nrf.stop().await;
}

#[tokio::test]
async fn retries_registration_until_nrf_comes_up() {
    let addr = free_addr().await;
    let c = client(config(&[&format!("http://{addr}")]), "PCF", 4);
    c.start(); // does not block, though nothing answers
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(c.state(), NfState::Registering);
    let dir = tempfile::tempdir().unwrap();
    let nrf = TestNrf::start_at(dir.path(), nrf_config(), addr).await;
    assert!(c.wait_for_state(NfState::Registered, Duration::from_secs(5)).await);
    assert_eq!(nrf.profile(&uuid(4)).await.0, 200);
    c.shutdown().await;
    nrf.stop().await;
}

#[tokio::test]
async fn shutdown_before_registration_sends_nothing() {
    let addr = free_addr().await;
    let c = client(config(&[&format!("http://{addr}")]), "PCF", 5);
    c.start();
    tokio::time::sleep(Duration::from_millis(200)).await;
    tokio::time::timeout(Duration::from_secs(3), c.shutdown()).await.expect("prompt shutdown");
    assert_eq!(c.state(), NfState::Deregistered);
}

// ---- discovery -------------------------------------------------------------------------------

#[tokio::test]
async fn discovery_cache_hit_then_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = nrf_config();
    cfg.discovery.validity_period_per_type.insert("PCF".into(), 1);
    let nrf = TestNrf::start(dir.path(), cfg).await;
    let pcf = client(config(&[&nrf.base]), "PCF", 10);
    pcf.start();
    assert!(pcf.wait_for_state(NfState::Registered, Duration::from_secs(5)).await);

    // A dead primary NRF: discovery goes on to the alternate.
    let dead = format!("http://{}", free_addr().await);
    let amf = client(NrfClientConfig { register: false, ..config(&[&dead, &nrf.base]) }, "AMF", 11);
    let q = DiscoveryQuery::new("PCF", "").limit(5);
    let first = amf.discover(&q).await.unwrap();
    assert!(first.contains(&uuid(10)), "{first:?}");
    assert_eq!(first.validity_period, Some(1));
    let second = amf.discover(&q).await.unwrap();
    assert!(Arc::ptr_eq(&first, &second), "served from the cache");
    assert_eq!(nrf.count("Nnrf_NFDiscovery_NFDiscover").await, 1);
    // Another query is another cache entry.
    amf.discover(&DiscoveryQuery::new("PCF", "").limit(4)).await.unwrap();
    assert_eq!(nrf.count("Nnrf_NFDiscovery_NFDiscover").await, 2);
    assert_eq!(amf.discovery_cache_len(), 2);
    // validityPeriod 1 s: expired.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let third = amf.discover(&q).await.unwrap();
    assert!(third.contains(&uuid(10)));
    assert_eq!(nrf.count("Nnrf_NFDiscovery_NFDiscover").await, 3);
    // Every parameter encoding the client produces is understood by the NRF.
    let mut full = DiscoveryQuery::new("PCF", "AMF")
        .service("npcf-smpolicycontrol")
        .service("npcf-am-policy-control")
        .snssai(1, Some("000001"))
        .snssai(2, None)
        .dnn("internet")
        .supi("imsi-001010000000001");
    full.group_id_list = vec!["g1".into(), "g2".into()];
    full.preferred_locality = Some("site a".into());
    full.target_nf_instance_id = Some(uuid(10));
    full.max_payload_size = Some(500);
    full.extra.push(("requester-nf-instance-fqdn".into(), "amf.example".into()));
    let r = amf.discover(&full).await.unwrap();
    assert!(r.nf_instances.is_empty(), "the group-id-list matches no profile: {r:?}");
    // Errors are not cached and carry the ProblemDetails.
    let bad = amf.discover(&DiscoveryQuery::new("NOT-A-TYPE", "")).await;
    assert!(
        matches!(bad, Err(nrf_client::Error::Status { status, .. }) if status == 400),
        "{bad:?}"
    );
    pcf.shutdown().await;
    nrf.stop().await;
}

// ---- subscriptions and notifications ---------------------------------------------------------

#[tokio::test]
async fn notifications_feed_peers_and_invalidate_discovery_cache() {
    let dir = tempfile::tempdir().unwrap();
    let nrf = TestNrf::start(dir.path(), nrf_config()).await;
    let amf = client(NrfClientConfig { register: false, ..config(&[&nrf.base]) }, "AMF", 20);
    amf.start();
    let (callback, _stop_cb) = callback_server(&amf).await;
    let mut events = amf.notifications();
    let sub = amf.subscribe(json!({"nfType": "PCF"}), &callback).await.unwrap();
    assert!(!sub.id.is_empty() && sub.validity_time.is_some());

    // A PCF registers: NF_REGISTERED reaches the callback and the peer table.
    let pcf = client(config(&[&nrf.base]), "PCF", 21);
    pcf.start();
    let n = tokio::time::timeout(Duration::from_secs(5), events.recv()).await.unwrap().unwrap();
    assert_eq!(n.event, notify::NF_REGISTERED);
    assert_eq!(n.nf_instance_id(), uuid(21));
    assert_eq!(amf.peer(&uuid(21)).unwrap()["nfType"], "PCF");

    // Cached discovery answer listing it (validityPeriod 3600 s).
    let q = DiscoveryQuery::new("PCF", "AMF");
    assert!(amf.discover(&q).await.unwrap().contains(&uuid(21)));
    amf.discover(&q).await.unwrap();
    assert_eq!(nrf.count("Nnrf_NFDiscovery_NFDiscover").await, 1);
    assert_eq!(amf.discovery_cache_len(), 1);

    // The PCF deregisters: NF_DEREGISTERED drops the cached answer and the peer.
    pcf.shutdown().await;
    let n = tokio::time::timeout(Duration::from_secs(5), events.recv()).await.unwrap().unwrap();
    assert_eq!(n.event, notify::NF_DEREGISTERED);
    assert_eq!(amf.discovery_cache_len(), 0);
    assert!(amf.peer(&uuid(21)).is_none());
    let after = amf.discover(&q).await.unwrap();
    assert!(!after.contains(&uuid(21)));
    assert_eq!(nrf.count("Nnrf_NFDiscovery_NFDiscover").await, 2);

    // Unsubscribe: the NRF forgets it, nothing more arrives.
    amf.unsubscribe(&sub.id).await.unwrap();
    assert!(amf.subscriptions().is_empty());
    assert_eq!(nrf.count("Nnrf_NFManagement_NFStatusUnsubscribe").await, 1);
    amf.shutdown().await;
    nrf.stop().await;
}

#[tokio::test]
async fn subscription_renewed_before_validity_time() {
    let dir = tempfile::tempdir().unwrap();
    let nrf =
        TestNrf::start(dir.path(), NrfConfig { subscription_validity_secs: 2, ..nrf_config() })
            .await;
    let cfg = NrfClientConfig {
        register: false,
        subscription_renew_before_secs: 1,
        ..config(&[&nrf.base])
    };
    let amf = client(cfg, "AMF", 30);
    amf.start();
    let (callback, _stop_cb) = callback_server(&amf).await;
    let mut events = amf.notifications();
    let sub = amf.subscribe(json!({"nfType": "UDR"}), &callback).await.unwrap();
    let first_validity = sub.validity_time.unwrap();
    // The NRF grants 2 s; after 3.5 s the subscription lives only if it was renewed.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert!(nrf.count("Nnrf_NFManagement_NFStatusSubscriptionUpdate").await >= 1);
    let now = amf.subscriptions();
    assert_eq!(now.len(), 1);
    assert_eq!(now[0].id, sub.id);
    assert!(now[0].validity_time.unwrap() > first_validity);
    let udr = client(config(&[&nrf.base]), "UDR", 31);
    udr.start();
    let n = tokio::time::timeout(Duration::from_secs(5), events.recv()).await.unwrap().unwrap();
    assert_eq!(n.event, notify::NF_REGISTERED);
    assert_eq!(n.nf_instance_id(), uuid(31));
    // An explicit renewal works too.
    let renewed = amf.renew(&sub.id).await.unwrap();
    assert!(renewed.validity_time.is_some());
    udr.shutdown().await;
    amf.shutdown().await;
    // Shutdown removed the subscription at the NRF.
    assert_eq!(nrf.count("Nnrf_NFManagement_NFStatusUnsubscribe").await, 1);
    nrf.stop().await;
}

// ---- what we send validates against TS 29.510 ------------------------------------------------

#[tokio::test]
async fn sent_bodies_validate_against_ts29510() {
    let specs = Specs::load(&["TS29571_CommonData", "TS29510_Nnrf_NFManagement"]);
    if !specs.available() {
        eprintln!("skipped: ../shared/3gpp absent");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let nrf = TestNrf::start(dir.path(), nrf_config()).await;
    let profile = ProfileBuilder::new("PCF", &uuid(40))
        .ipv4("127.0.0.1")
        .service("npcf-smpolicycontrol", "http", 7003)
        .attr("priority", 1)
        .build();
    let cfg = NrfClientConfig { heartbeat_timer_secs: Some(2), ..config(&[&nrf.base]) };
    let c = NrfClient::new(cfg, http(), profile).unwrap();
    // The NFRegister body, before the NRF has answered.
    assert_eq!(c.profile()["heartBeatTimer"], 2);
    specs.assert_valid("TS29510_Nnrf_NFManagement", "NFProfile", &c.profile());
    c.set_load(Some(10));
    c.start();
    assert!(c.wait_for_state(NfState::Registered, Duration::from_secs(5)).await);
    // The proposed timer is within the NRF's range: kept.
    assert_eq!(c.heartbeat_timer(), Some(Duration::from_secs(2)));
    // The SubscriptionData sent, as the NRF echoes it (plus subscriptionId, validityTime).
    let sub = c.subscribe(json!({"nfType": "UDR"}), "http://127.0.0.1:9/cb").await.unwrap();
    specs.assert_valid("TS29510_Nnrf_NFManagement", "SubscriptionData", &sub.data);
    // The heartbeat body: PatchItems.
    let ops = nrf_client::heartbeat_patch(Some(10));
    for op in ops.as_array().unwrap() {
        specs.assert_valid("TS29571_CommonData", "PatchItem", op);
    }
    c.shutdown().await;
    nrf.stop().await;
}

// ---- access tokens ---------------------------------------------------------------------------

/// A producer that requires tokens checked against `jwks_url` (the NRF's keys, or another's).
async fn token_producer(jwks_url: String) -> (String, oneshot::Sender<()>) {
    use http::{Method, StatusCode};
    let producer = SbiServer::bind(
        ServerConfig {
            oauth2: sbi::oauth2::OAuth2Config {
                required: true,
                jwks_url: Some(jwks_url),
                min_refresh_interval_ms: 0,
                ..Default::default()
            },
            ..ServerConfig::default()
        },
        NfIdentity::new("UDR", uuid(90)),
        Router::builder(Arc::new(()))
            .route(
                Method::GET,
                "/nudr-dr/v2/policy-data/ues/{ueId}/sm-data",
                "Nudr_DataRepository_SmPolicyData_Get",
                |_, _| async { sbi::json_response(StatusCode::OK, &json!({})) },
            )
            .build(),
        Observability::new(),
    )
    .await
    .unwrap();
    let url = format!(
        "http://{}/nudr-dr/v2/policy-data/ues/imsi-001010000000001/sm-data",
        producer.local_addr()
    );
    let (tx, rx) = oneshot::channel::<()>();
    tokio::spawn(producer.serve(async {
        let _ = rx.await;
    }));
    (url, tx)
}

#[tokio::test]
async fn access_tokens_are_asked_once_sent_and_asked_again_after_a_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let nrf = TestNrf::start(dir.path(), nrf_config()).await;
    let (url, _stop) = token_producer(format!("{}/oauth2/jwks", nrf.base)).await;

    let consumer_http = http();
    let pcf = NrfClient::new(
        NrfClientConfig { access_tokens: true, ..config(&[&nrf.base]) },
        consumer_http.clone(),
        ProfileBuilder::new("PCF", &uuid(1)).ipv4("127.0.0.1").build(),
    )
    .unwrap();
    assert!(consumer_http.set_token_source(pcf.token_source()));
    pcf.start();
    assert!(pcf.wait_for_state(NfState::Registered, Duration::from_secs(5)).await);
    assert_eq!(nrf.count("Nnrf_AccessToken_Get").await, 0, "registration needs no token");

    // Ten calls, one token request; a client without the source is refused.
    for _ in 0..10 {
        let r = consumer_http.get(&url).send().await.unwrap();
        assert_eq!(r.status(), 200, "{:?}", r.body());
    }
    assert_eq!(nrf.count("Nnrf_AccessToken_Get").await, 1);
    assert_eq!(http().get(&url).send().await.unwrap().status(), 401);
    let token = pcf.access_token("UDR", "nudr-dr").await.unwrap();
    assert!(token.to_str().unwrap().starts_with("Bearer ey"));

    // A producer trusting other keys refuses the token: the consumer forgets it and asks the
    // NRF again at its next request.
    let other_dir = tempfile::tempdir().unwrap();
    let other = TestNrf::start(other_dir.path(), nrf_config()).await;
    let (elsewhere, _stop2) = token_producer(format!("{}/oauth2/jwks", other.base)).await;
    assert_eq!(consumer_http.get(&elsewhere).send().await.unwrap().status(), 401);
    assert_eq!(consumer_http.get(&url).send().await.unwrap().status(), 200);
    assert_eq!(nrf.count("Nnrf_AccessToken_Get").await, 2);

    pcf.shutdown().await;
    other.stop().await;
    nrf.stop().await;
}
