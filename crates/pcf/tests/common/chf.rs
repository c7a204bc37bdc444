//! A CHF for the PCF's tests (Nchf_SpendingLimitControl, TS 29.594), on 127.0.0.1:0: it records
//! every request, answers a subscribe 201 with a status per requested counter and `Location`,
//! and a DELETE 204.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Map, Value};

/// One request the CHF received.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    pub body: Value,
}

#[derive(Default)]
struct State {
    received: Vec<Received>,
    /// The currentStatus answered for a counter; "valid" for one not set.
    statuses: HashMap<String, String>,
    next_id: u64,
}

pub struct SimChf {
    pub base: String,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl SimChf {
    pub async fn start() -> SimChf {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State::default()));
        let (st, root) = (state.clone(), base.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else { return };
                let (st, root) = (st.clone(), root.clone());
                tokio::spawn(async move {
                    let svc = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                        let (st, root) = (st.clone(), root.clone());
                        async move {
                            let method = req.method().to_string();
                            let path = req.uri().path().to_string();
                            let bytes = req
                                .into_body()
                                .collect()
                                .await
                                .map(|c| c.to_bytes())
                                .unwrap_or_default();
                            let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                            Ok::<_, std::convert::Infallible>(answer(
                                &st, &root, method, path, body,
                            ))
                        }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tcp), svc)
                        .await;
                });
            }
        });
        SimChf { base, state, task }
    }

    /// What the CHF answers for `counter` from now on.
    pub fn set_status(&self, counter: &str, status: &str) {
        self.state.lock().unwrap().statuses.insert(counter.into(), status.into());
    }

    pub fn received(&self) -> Vec<Received> {
        self.state.lock().unwrap().received.clone()
    }

    /// Requests received with this method.
    pub fn count(&self, method: &str) -> usize {
        self.received().iter().filter(|r| r.method == method).count()
    }

    pub fn stop(self) {
        self.task.abort();
    }
}

fn answer(
    st: &Mutex<State>,
    root: &str,
    method: String,
    path: String,
    body: Value,
) -> hyper::Response<Full<Bytes>> {
    let mut s = st.lock().unwrap();
    s.received.push(Received { method: method.clone(), path: path.clone(), body: body.clone() });
    let reply = |status: u16, body: Option<Value>| {
        let bytes = body.map(|b| serde_json::to_vec(&b).unwrap()).unwrap_or_default();
        let mut r = hyper::Response::new(Full::new(Bytes::from(bytes)));
        *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
        r
    };
    const SUBS: &str = "/nchf-spendinglimitcontrol/v1/subscriptions";
    match (method.as_str(), path.as_str()) {
        ("POST", SUBS) => {
            s.next_id += 1;
            let id = s.next_id;
            let mut infos = Map::new();
            for c in body["policyCounterIds"].as_array().into_iter().flatten() {
                let c = c.as_str().unwrap_or_default();
                let status = s.statuses.get(c).cloned().unwrap_or_else(|| "valid".into());
                infos.insert(c.into(), json!({"policyCounterId": c, "currentStatus": status}));
            }
            let mut r = reply(201, Some(json!({"supi": body["supi"], "statusInfos": infos})));
            let loc = format!("{root}{SUBS}/{id}");
            r.headers_mut().insert("location", loc.parse().unwrap());
            r.headers_mut().insert("content-type", "application/json".parse().unwrap());
            r
        }
        ("DELETE", p) if p.starts_with(SUBS) => reply(204, None),
        _ => reply(404, None),
    }
}
