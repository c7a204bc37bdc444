//! A stand-in for the Data Director's ingest API: an h2c (prior knowledge) server on 127.0.0.1
//! that takes `POST /dd-ingest/v1/copies`, splits the body into envelopes with
//! `dd_client::envelope::Frames`, decodes each with `Copy::decode` and keeps them. It answers
//! 204, or 400 naming the bad frame, or whatever status a test sets ([`Ingest::answer`], e.g.
//! 503 with Retry-After); [`Ingest::stop`] closes the port and every connection, and
//! [`Ingest::start_on`] serves the same port again.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use dd_client::envelope::{Copy, Frames, CONTENT_TYPE};
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::task::AbortHandle;

pub const PATH: &str = "/dd-ingest/v1/copies";

#[derive(Default)]
struct State {
    copies: Mutex<Vec<Copy>>,
    /// 0: take the batch (204); else answer this status (with Retry-After: 0 for 503).
    answer: AtomicU16,
    posts: AtomicUsize,
    tasks: Mutex<Vec<AbortHandle>>,
}

pub struct Ingest {
    pub addr: SocketAddr,
    state: Arc<State>,
}

impl Ingest {
    /// On a port the system picks.
    pub async fn start() -> Ingest {
        Self::start_on("127.0.0.1:0".parse().expect("address")).await
    }

    /// On `addr` (the port of a stopped one: a Data Director coming back).
    pub async fn start_on(addr: SocketAddr) -> Ingest {
        let listener = tokio::net::TcpListener::bind(addr).await.expect("bind the ingest port");
        let addr = listener.local_addr().expect("bound");
        let state = Arc::new(State::default());
        let st = state.clone();
        let accept = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else { return };
                let st2 = st.clone();
                let conn = tokio::spawn(async move {
                    let svc = service_fn(move |req| answer(st2.clone(), req));
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tcp), svc)
                        .await;
                });
                st.tasks.lock().unwrap().push(conn.abort_handle());
            }
        });
        state.tasks.lock().unwrap().push(accept.abort_handle());
        Ingest { addr, state }
    }

    /// The apiRoot to configure as `[<nf>.copy] uri`.
    pub fn uri(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Answer every POST with `status` from now on (0: take the batches again).
    pub fn answer(&self, status: u16) {
        self.state.answer.store(status, Ordering::SeqCst);
    }

    /// POSTs received, taken or not.
    pub fn posts(&self) -> usize {
        self.state.posts.load(Ordering::SeqCst)
    }

    /// Every copy taken so far, in arrival order.
    pub fn copies(&self) -> Vec<Copy> {
        self.state.copies.lock().unwrap().clone()
    }

    /// Waits until `pred` holds for the copies taken, failing after `within`.
    pub async fn wait_for(&self, within: Duration, pred: impl Fn(&[Copy]) -> bool) -> Vec<Copy> {
        let deadline = Instant::now() + within;
        loop {
            let copies = self.copies();
            if pred(&copies) {
                return copies;
            }
            assert!(
                Instant::now() < deadline,
                "the ingest did not get the copies expected within {within:?}; it has {}: {:#?}",
                copies.len(),
                copies.iter().map(summary).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Closes the port and every connection (a Data Director going away).
    pub fn stop(self) {
        for t in self.state.tasks.lock().unwrap().drain(..) {
            t.abort();
        }
    }
}

/// One line per copy, for assertion messages.
pub fn summary(c: &Copy) -> String {
    format!(
        "#{} {} {} {} {} {} status={} supi={} session={}",
        c.sequence,
        c.trigger.as_str(),
        c.nf_type(),
        c.service(),
        c.operation(),
        c.method(),
        c.status,
        c.supi(),
        c.session_id()
    )
}

async fn answer(
    st: Arc<State>,
    req: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<Full<Bytes>>, std::convert::Infallible> {
    st.posts.fetch_add(1, Ordering::SeqCst);
    let reply = |status: u16, body: String| {
        let mut r = hyper::Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = hyper::StatusCode::from_u16(status).expect("status");
        if status == 503 {
            r.headers_mut().insert("retry-after", hyper::header::HeaderValue::from_static("0"));
        }
        Ok(r)
    };
    if req.method() != hyper::Method::POST || req.uri().path() != PATH {
        return reply(404, format!("no {} {}", req.method(), req.uri().path()));
    }
    let ct = req.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
    if ct != CONTENT_TYPE {
        return reply(415, format!("content-type {ct:?}"));
    }
    let body = req.into_body().collect().await.map(|c| c.to_bytes()).unwrap_or_default();
    let status = st.answer.load(Ordering::SeqCst);
    if status != 0 {
        return reply(status, String::new());
    }
    let mut batch = Vec::new();
    for (i, frame) in Frames::new(body).enumerate() {
        match frame.and_then(Copy::decode) {
            Ok(c) => batch.push(c),
            Err(e) => return reply(400, format!("frame {i}: {e}")),
        }
    }
    st.copies.lock().unwrap().extend(batch);
    reply(204, String::new())
}
