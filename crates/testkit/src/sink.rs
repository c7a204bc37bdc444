//! A notification sink: an HTTP/1.1 + h2c server on 127.0.0.1 that records each POSTed JSON
//! body and answers 204 (or 503 for the first `fail_first` requests, to exercise retries).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::Value;
use tokio::sync::mpsc;

pub struct Sink {
    pub url: String,
    pub rx: mpsc::UnboundedReceiver<Value>,
    /// Answer 503 to this many requests first (to exercise retries).
    pub fail_first: Arc<AtomicUsize>,
}

impl Sink {
    pub async fn start() -> Sink {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        let (tx, rx) = mpsc::unbounded_channel();
        let fail_first = Arc::new(AtomicUsize::new(0));
        let fail = fail_first.clone();
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else { return };
                let tx = tx.clone();
                let fail = fail.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                        let tx = tx.clone();
                        let fail = fail.clone();
                        async move {
                            let bytes = req
                                .into_body()
                                .collect()
                                .await
                                .map(|c| c.to_bytes())
                                .unwrap_or_default();
                            let failing = fail
                                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                                    n.checked_sub(1)
                                })
                                .is_ok();
                            let status = if failing {
                                503
                            } else {
                                let _ =
                                    tx.send(serde_json::from_slice(&bytes).unwrap_or(Value::Null));
                                204
                            };
                            let mut resp = hyper::Response::new(Full::new(Bytes::new()));
                            *resp.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
                            Ok::<_, std::convert::Infallible>(resp)
                        }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tcp), svc)
                        .await;
                });
            }
        });
        Sink { url: format!("http://{addr}/notify"), rx, fail_first }
    }

    /// The next notification, failing after 5 s.
    pub async fn next(&mut self) -> Value {
        tokio::time::timeout(Duration::from_secs(5), self.rx.recv())
            .await
            .expect("a notification within 5 s")
            .expect("sink alive")
    }

    /// Asserts nothing arrives for a moment.
    pub async fn quiet(&mut self) {
        let r = tokio::time::timeout(Duration::from_millis(300), self.rx.recv()).await;
        assert!(r.is_err(), "unexpected notification: {r:?}");
    }
}
