//! Discovery with an SLF query (Nudr_GroupIDmap) and forwarding to a peer NRF, over real sockets.

mod common;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use nrf::config::{ForwardingConfig, SlfConfig, SlfFailure};
use nrf::NrfConfig;
use serde_json::{json, Value};

use common::{body, client, profile, put, uuid, TestNrf};

/// A Subscriber Location Function double: subscriber n (imsi-00101000000000n) is in group gN of
/// every NF type; others are unknown (404). Records the Authorization header of each query.
struct Slf {
    root: String,
    auth: Arc<Mutex<Vec<Option<String>>>>,
}

async fn start_slf() -> Slf {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let auth = Arc::new(Mutex::new(Vec::new()));
    let seen = auth.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { return };
            let seen = seen.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let seen = seen.clone();
                    async move {
                        seen.lock().unwrap().push(
                            req.headers()
                                .get("authorization")
                                .map(|v| v.to_str().unwrap().to_owned()),
                        );
                        let q: Vec<(String, String)> =
                            form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes())
                                .into_owned()
                                .collect();
                        let get = |k: &str| {
                            q.iter()
                                .find(|(n, _)| n == k)
                                .map(|(_, v)| v.clone())
                                .unwrap_or_default()
                        };
                        let (nf_type, subscriber) = (get("nf-type"), get("subscriberId"));
                        let n = subscriber.strip_prefix("imsi-00101000000000").unwrap_or("x");
                        let (status, body) = if req.uri().path()
                            == "/nudr-group-id-map/v1/nf-group-ids"
                            && n.len() == 1
                        {
                            {
                                let mut groups = serde_json::Map::new();
                                groups.insert(nf_type, Value::from(format!("g{n}")));
                                (200, json!({ "nfGroupIds": groups }))
                            }
                        } else {
                            (404, json!({"status": 404, "cause": "DATA_NOT_FOUND"}))
                        };
                        let mut resp =
                            hyper::Response::new(Full::new(Bytes::from(body.to_string())));
                        *resp.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
                        resp.headers_mut()
                            .insert("content-type", "application/json".parse().unwrap());
                        Ok::<_, std::convert::Infallible>(resp)
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tcp), svc)
                    .await;
            });
        }
    });
    Slf { root: format!("http://{addr}"), auth }
}

fn udm(n: u32, group: &str) -> Value {
    let mut p = profile(&uuid(n), "UDM");
    p["udmInfo"] = json!({"groupId": group});
    p
}

fn ids(search_result: &Value) -> Vec<String> {
    let mut v: Vec<String> = search_result["nfInstances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["nfInstanceId"].as_str().unwrap().to_owned())
        .collect();
    v.sort();
    v
}

#[tokio::test]
async fn slf_query_filters_discovery_by_the_subscriber_group() {
    let slf = start_slf().await;
    let dir = tempfile::tempdir().unwrap();
    let config = NrfConfig {
        slf: SlfConfig {
            enabled: true,
            api_roots: vec![slf.root.clone()],
            access_token: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let nrf = TestNrf::start(dir.path(), config).await;
    let c = client();
    for (n, g) in [(1, "g1"), (2, "g1"), (3, "g2")] {
        put(&c, &nrf.nfm(&format!("/nf-instances/{}", uuid(n))), &udm(n, g)).await;
    }
    let disc = |q: &str| nrf.disc(&format!("target-nf-type=UDM&requester-nf-type=AMF&{q}"));
    let r = c.get(&disc("supi=imsi-001010000000001")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(ids(&body(&r)), vec![uuid(1), uuid(2)]);
    let r = c.get(&disc("supi=imsi-001010000000002")).send().await.unwrap();
    assert_eq!(ids(&body(&r)), vec![uuid(3)]);
    // Unknown to the SLF: nothing can serve the subscriber.
    let r = c.get(&disc("supi=imsi-001019999999999")).send().await.unwrap();
    assert_eq!((r.status().as_u16(), ids(&body(&r)).len()), (200, 0));
    // A group-id-list given by the consumer needs no SLF query; nor does a non-SLF type.
    let before = slf.auth.lock().unwrap().len();
    let r = c.get(&disc("supi=imsi-001010000000001&group-id-list=g2")).send().await.unwrap();
    assert_eq!(ids(&body(&r)), vec![uuid(3)]);
    assert_eq!(slf.auth.lock().unwrap().len(), before);
    // The SLF got the NRF's own token, which verifies with the published key.
    let auth = slf.auth.lock().unwrap().clone();
    let bearer = auth[0].as_deref().unwrap().strip_prefix("Bearer ").unwrap().to_owned();
    assert!(
        auth.iter().all(|a| a.as_deref() == Some(&format!("Bearer {bearer}")[..])),
        "the token is cached"
    );
    let jwks = body(&c.get(&format!("{}/oauth2/jwks", nrf.base)).send().await.unwrap());
    assert_eq!(jwks["keys"].as_array().unwrap().len(), 1);
    assert_eq!(bearer.split('.').count(), 3);
    nrf.stop().await;
}

#[tokio::test]
async fn slf_found_among_registered_nfs_and_failure_answers() {
    let slf = start_slf().await;
    let dir = tempfile::tempdir().unwrap();
    let config =
        NrfConfig { slf: SlfConfig { enabled: true, ..Default::default() }, ..Default::default() };
    let nrf = TestNrf::start(dir.path(), config).await;
    let c = client();
    put(&c, &nrf.nfm(&format!("/nf-instances/{}", uuid(1))), &udm(1, "g1")).await;
    put(&c, &nrf.nfm(&format!("/nf-instances/{}", uuid(2))), &udm(2, "g2")).await;
    let disc = nrf.disc("target-nf-type=UDM&requester-nf-type=AMF&supi=imsi-001010000000002");
    // No SLF registered yet: the defined answer is 504 TARGET_NF_NOT_REACHABLE.
    let r = c.get(&disc).send().await.unwrap();
    common::problem(&r, 504, "TARGET_NF_NOT_REACHABLE");
    // A registered UDR offering nudr-group-id-map is used as the SLF.
    let port: u16 = slf.root.rsplit(':').next().unwrap().parse().unwrap();
    let mut udr = profile(&uuid(9), "UDR");
    udr["nfServices"] = json!([{
        "serviceInstanceId": "slf", "serviceName": "nudr-group-id-map", "scheme": "http",
        "nfServiceStatus": "REGISTERED", "versions": [{"apiVersionInUri": "v1", "apiFullVersion": "1.0.0"}],
        "ipEndPoints": [{"ipv4Address": "127.0.0.1", "port": port}]
    }]);
    put(&c, &nrf.nfm(&format!("/nf-instances/{}", uuid(9))), &udr).await;
    let r = c.get(&disc).send().await.unwrap();
    assert_eq!(ids(&body(&r)), vec![uuid(2)]);
    assert_eq!(slf.auth.lock().unwrap().as_slice(), &[None], "no token unless configured");
    // The SLF set follows writes to the SLF's profile: suspended, it is no longer asked; back
    // to REGISTERED, it is again; deregistered, gone.
    let slf_url = nrf.nfm(&format!("/nf-instances/{}", uuid(9)));
    let status = |s: &str| json!([{"op": "replace", "path": "/nfStatus", "value": s}]);
    let r = common::patch(&c, &slf_url, &status("SUSPENDED")).await;
    assert!(r.status().is_success(), "{:?}", body(&r));
    let r = c.get(&disc).send().await.unwrap();
    common::problem(&r, 504, "TARGET_NF_NOT_REACHABLE");
    let r = common::patch(&c, &slf_url, &status("REGISTERED")).await;
    assert!(r.status().is_success(), "{:?}", body(&r));
    let r = c.get(&disc).send().await.unwrap();
    assert_eq!(ids(&body(&r)), vec![uuid(2)]);
    assert_eq!(slf.auth.lock().unwrap().len(), 2);
    let r = c.delete(&slf_url).send().await.unwrap();
    assert_eq!(r.status(), 204);
    let r = c.get(&disc).send().await.unwrap();
    common::problem(&r, 504, "TARGET_NF_NOT_REACHABLE");
    assert_eq!(slf.auth.lock().unwrap().len(), 2);
    nrf.stop().await;

    // on_failure = skip: an unreachable SLF is passed over.
    let dir = tempfile::tempdir().unwrap();
    let config = NrfConfig {
        slf: SlfConfig {
            enabled: true,
            api_roots: vec!["http://127.0.0.1:9".into()],
            on_failure: SlfFailure::Skip,
            timeout_ms: 500,
            ..Default::default()
        },
        ..Default::default()
    };
    let nrf = TestNrf::start(dir.path(), config).await;
    put(&c, &nrf.nfm(&format!("/nf-instances/{}", uuid(1))), &udm(1, "g1")).await;
    let r = c
        .get(&nrf.disc("target-nf-type=UDM&requester-nf-type=AMF&supi=imsi-001010000000002"))
        .send()
        .await
        .unwrap();
    assert_eq!(ids(&body(&r)), vec![uuid(1)]);
    nrf.stop().await;
}

#[tokio::test]
async fn discovery_is_forwarded_to_a_peer_nrf_without_loops() {
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let nrf_b = TestNrf::start(dir_b.path(), NrfConfig::default()).await;
    let forward_to = |peer: &str| NrfConfig {
        forwarding: ForwardingConfig {
            nf_types: vec!["UDM".into(), "AUSF".into()],
            peers: vec![peer.to_owned()],
        },
        ..Default::default()
    };
    let nrf_a = TestNrf::start(dir_a.path(), forward_to(&nrf_b.base)).await;
    let c = client();
    put(&c, &nrf_b.nfm(&format!("/nf-instances/{}", uuid(7))), &udm(7, "g1")).await;
    // A finds no UDM itself: the answer comes from B.
    let q = "target-nf-type=UDM&requester-nf-type=AMF";
    let r = c.get(&nrf_a.disc(q)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(ids(&body(&r)), vec![uuid(7)]);
    // Types not configured for forwarding are answered locally.
    let r = c.get(&nrf_a.disc("target-nf-type=SMF&requester-nf-type=AMF")).send().await.unwrap();
    assert_eq!(ids(&body(&r)).len(), 0);
    // B now forwards to A, and a third NRF to B: a type nobody has is forwarded once, then
    // answered where the Via shows an NRF already, never looping.
    nrf_b.stop().await;
    let nrf_b = TestNrf::start(dir_b.path(), forward_to(&nrf_a.base)).await;
    let a_to_new_b =
        TestNrf::start(tempfile::tempdir().unwrap().path(), forward_to(&nrf_b.base)).await;
    let r = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        c.get(&a_to_new_b.disc("target-nf-type=AUSF&requester-nf-type=AMF")).send(),
    )
    .await
    .expect("no forwarding loop")
    .unwrap();
    assert_eq!((r.status().as_u16(), ids(&body(&r)).len()), (200, 0));
    // A request that already came through an NRF is served locally.
    let r = c
        .get(&nrf_b.disc("target-nf-type=AUSF&requester-nf-type=AMF"))
        .header("via", "2.0 other-nrf-1")
        .send()
        .await
        .unwrap();
    assert_eq!(ids(&body(&r)).len(), 0);
    a_to_new_b.stop().await;
    nrf_b.stop().await;
    nrf_a.stop().await;
}
