//! NFStatusNotify bursts over real sockets: one NF write notifying many subscriptions is
//! delivered whole, with at most `notify.max_sending` POSTs outstanding at once; beyond
//! `notify.max_in_flight` notifications are still dropped rather than queued.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use common::*;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use nrf::config::NotifyConfig;
use nrf::NrfConfig;
use serde_json::{json, Value};

/// A callback server that holds every POST for `hold` before answering 204 (or 503 for the first
/// `fail_first`), and records the most POSTs it ever had outstanding at once.
struct Callback {
    base: String,
    current: Arc<AtomicUsize>,
    max: Arc<AtomicUsize>,
    fail_first: Arc<AtomicUsize>,
    /// Bodies accepted, by request path.
    received: Arc<Mutex<BTreeMap<String, Vec<Value>>>>,
}

impl Callback {
    async fn start(hold: Duration) -> Callback {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        let cb = Callback {
            base: format!("http://{addr}"),
            current: Arc::default(),
            max: Arc::default(),
            fail_first: Arc::default(),
            received: Arc::default(),
        };
        let (current, max, fail, received) =
            (cb.current.clone(), cb.max.clone(), cb.fail_first.clone(), cb.received.clone());
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else { return };
                let (current, max, fail, received) =
                    (current.clone(), max.clone(), fail.clone(), received.clone());
                tokio::spawn(async move {
                    let svc = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                        let (current, max, fail, received) =
                            (current.clone(), max.clone(), fail.clone(), received.clone());
                        async move {
                            let now = current.fetch_add(1, Ordering::SeqCst) + 1;
                            max.fetch_max(now, Ordering::SeqCst);
                            let path = req.uri().path().to_owned();
                            let bytes = req
                                .into_body()
                                .collect()
                                .await
                                .map(|c| c.to_bytes())
                                .unwrap_or_default();
                            tokio::time::sleep(hold).await;
                            let failing = fail
                                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                                    n.checked_sub(1)
                                })
                                .is_ok();
                            if !failing {
                                let v = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                                received.lock().unwrap().entry(path).or_default().push(v);
                            }
                            current.fetch_sub(1, Ordering::SeqCst);
                            let mut resp = hyper::Response::new(Full::new(Bytes::new()));
                            *resp.status_mut() = if failing {
                                hyper::StatusCode::SERVICE_UNAVAILABLE
                            } else {
                                hyper::StatusCode::NO_CONTENT
                            };
                            Ok::<_, std::convert::Infallible>(resp)
                        }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tcp), svc)
                        .await;
                });
            }
        });
        cb
    }

    fn count(&self) -> usize {
        self.received.lock().unwrap().values().map(Vec::len).sum()
    }

    /// Waits until `n` notifications were accepted (at most 10 s).
    async fn wait_for(&self, n: usize) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while self.count() < n {
            assert!(tokio::time::Instant::now() < deadline, "only {} of {n} arrived", self.count());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

async fn subscribe_all(nrf: &TestNrf, cb: &Callback, n: usize) {
    let c = client();
    for i in 0..n {
        let s = json!({
            "nfStatusNotificationUri": format!("{}/notify/{i}", cb.base),
            "subscrCond": {"nfType": "SMF"},
            "reqNfType": "AMF",
        });
        let r = c.post(&nrf.nfm("/subscriptions")).json(&s).send().await.unwrap();
        assert_eq!(r.status(), 201, "{:?}", body(&r));
    }
}

fn config(notify: NotifyConfig) -> NrfConfig {
    NrfConfig { notify, ..NrfConfig::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_is_delivered_whole_with_bounded_sends() {
    let dir = tempfile::tempdir().unwrap();
    let nrf = TestNrf::start(
        dir.path(),
        config(NotifyConfig { max_sending: 4, backoff_ms: 20, ..NotifyConfig::default() }),
    )
    .await;
    let cb = Callback::start(Duration::from_millis(25)).await;
    let subscribers = 40;
    subscribe_all(&nrf, &cb, subscribers).await;
    // Two refusals on the way: their retries wait their turn like the rest.
    cb.fail_first.store(2, Ordering::SeqCst);

    let id = uuid(1);
    let url = nrf.nfm(&format!("/nf-instances/{id}"));
    let mut p = profile(&id, "SMF");
    p["allowedNfTypes"] = json!(["AMF"]);
    assert_eq!(put(&client(), &url, &p).await.status(), 201);

    cb.wait_for(subscribers).await;
    let max = cb.max.load(Ordering::SeqCst);
    assert!(max <= 4, "{max} notifications were sent at once, more than max_sending");
    assert!(max >= 2, "notifications were sent one by one ({max}): no concurrency at all");
    let received = cb.received.lock().unwrap().clone();
    assert_eq!(received.len(), subscribers, "every subscriber notified");
    for (path, bodies) in &received {
        assert_eq!(bodies.len(), 1, "{path} notified once");
        let n = &bodies[0];
        assert_valid("TS29510_Nnrf_NFManagement", "NotificationData", n);
        assert_eq!(n["event"], "NF_REGISTERED");
        assert_eq!(n["nfInstanceUri"], url);
        assert_eq!(n["nfProfile"]["nfInstanceId"], id);
        assert!(n["nfProfile"].get("allowedNfTypes").is_none(), "authorisation attributes hidden");
    }
    let stats = nrf.nrf.notifier.stats();
    assert_eq!(stats.delivered.load(Ordering::Relaxed), subscribers as u64);
    assert_eq!(stats.dropped.load(Ordering::Relaxed), 0);
    assert_eq!(stats.failed.load(Ordering::Relaxed), 0);

    // Deregistration: a body without the profile, again to all, again paced.
    assert_eq!(client().delete(&url).send().await.unwrap().status(), 204);
    cb.wait_for(2 * subscribers).await;
    assert!(cb.max.load(Ordering::SeqCst) <= 4);
    for bodies in cb.received.lock().unwrap().values() {
        assert_eq!(bodies[1]["event"], "NF_DEREGISTERED");
        assert!(bodies[1].get("nfProfile").is_none());
    }
    nrf.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beyond_max_in_flight_notifications_are_dropped_not_queued() {
    let dir = tempfile::tempdir().unwrap();
    let nrf = TestNrf::start(
        dir.path(),
        config(NotifyConfig { max_in_flight: 10, max_sending: 2, ..NotifyConfig::default() }),
    )
    .await;
    // Held long enough that the whole burst is produced while the first ten are in flight.
    let cb = Callback::start(Duration::from_millis(200)).await;
    subscribe_all(&nrf, &cb, 30).await;
    let id = uuid(2);
    let r = put(&client(), &nrf.nfm(&format!("/nf-instances/{id}")), &profile(&id, "SMF")).await;
    assert_eq!(r.status(), 201);

    cb.wait_for(10).await;
    // Nothing more comes: the other twenty were dropped.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(cb.count(), 10);
    assert!(cb.max.load(Ordering::SeqCst) <= 2);
    let stats = nrf.nrf.notifier.stats();
    assert_eq!(stats.delivered.load(Ordering::Relaxed), 10);
    assert_eq!(stats.dropped.load(Ordering::Relaxed), 20);
    nrf.stop().await;
}

#[test]
fn max_sending_is_configurable_and_checked() {
    let c: NrfConfig = toml::from_str("[notify]\nmax_sending = 3\n").unwrap();
    assert_eq!(c.notify.max_sending, 3);
    assert_eq!(NrfConfig::default().notify.max_sending, 16);
    let zero: NrfConfig = toml::from_str("[notify]\nmax_sending = 0\n").unwrap();
    assert!(zero.validate().unwrap_err().contains("max_sending"));
}
