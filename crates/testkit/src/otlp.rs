//! An OTLP/HTTP trace receiver for the trace tests (feature `otlp`): a hyper server on
//! 127.0.0.1 that decodes each `POST /v1/traces` (protobuf, `ExportTraceServiceRequest`) with
//! the `opentelemetry-proto` types and keeps the spans, answering 200 as a collector does. And
//! a collector that is down in the worst way: it accepts connections and never answers.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
use prost::Message;
use tokio::net::TcpListener;

/// One span as the collector got it.
#[derive(Debug, Clone)]
pub struct Span {
    /// The resource's `service.name` (`fivecore-pcf`).
    pub service: String,
    /// Every resource attribute, as text.
    pub resource: BTreeMap<String, String>,
    pub name: String,
    /// 2 server, 3 client (OTLP `SpanKind`).
    pub kind: i32,
    /// Lower-case hex, as in `traceparent`.
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    pub trace_state: String,
    pub attributes: BTreeMap<String, String>,
    /// 0 unset, 1 ok, 2 error (OTLP `StatusCode`).
    pub status_code: i32,
    pub status_message: String,
}

pub const SERVER: i32 = 2;
pub const CLIENT: i32 = 3;

impl Span {
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

/// A running receiver; it stops when dropped.
pub struct OtlpReceiver {
    addr: SocketAddr,
    spans: Arc<Mutex<Vec<Span>>>,
    requests: Arc<Mutex<Vec<(String, String)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl OtlpReceiver {
    pub async fn start() -> OtlpReceiver {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the OTLP receiver");
        let addr = listener.local_addr().expect("bound");
        let spans: Arc<Mutex<Vec<Span>>> = Arc::default();
        let requests: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
        let (s, r) = (spans.clone(), requests.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else { return };
                let (s, r) = (s.clone(), r.clone());
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req| {
                        let (s, r) = (s.clone(), r.clone());
                        async move { Ok::<_, Infallible>(receive(req, &s, &r).await) }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tcp), svc)
                        .await;
                });
            }
        });
        OtlpReceiver { addr, spans, requests, task }
    }

    /// What `[telemetry.otlp] endpoint` names: `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }

    /// Method, path and content type of each request received, in order.
    pub fn requests(&self) -> Vec<(String, String)> {
        self.requests.lock().unwrap().clone()
    }

    /// The spans once `done` holds for them, or what was received when `within` ran out.
    pub async fn wait_for(&self, within: Duration, done: impl Fn(&[Span]) -> bool) -> Vec<Span> {
        let until = Instant::now() + within;
        loop {
            let spans = self.spans();
            if done(&spans) || Instant::now() >= until {
                return spans;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn receive(
    req: hyper::Request<Incoming>,
    spans: &Mutex<Vec<Span>>,
    requests: &Mutex<Vec<(String, String)>>,
) -> hyper::Response<Full<Bytes>> {
    let ct = req
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    requests.lock().unwrap().push((format!("{} {}", req.method(), req.uri().path()), ct.clone()));
    let answer = |status: u16, body: Vec<u8>| {
        let mut r = hyper::Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
        r.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("application/x-protobuf"),
        );
        r
    };
    if req.method() != hyper::Method::POST
        || req.uri().path() != "/v1/traces"
        || ct != "application/x-protobuf"
    {
        return answer(404, Vec::new());
    }
    let Ok(body) = req.into_body().collect().await else { return answer(400, Vec::new()) };
    let Ok(export) = ExportTraceServiceRequest::decode(body.to_bytes()) else {
        return answer(400, Vec::new());
    };
    let mut got = Vec::new();
    for rs in export.resource_spans {
        let resource = rs.resource.map(|r| attributes(&r.attributes)).unwrap_or_default();
        let service = resource.get("service.name").cloned().unwrap_or_default();
        for ss in rs.scope_spans {
            for s in ss.spans {
                let status = s.status.unwrap_or_default();
                got.push(Span {
                    service: service.clone(),
                    resource: resource.clone(),
                    name: s.name,
                    kind: s.kind,
                    trace_id: hex(&s.trace_id),
                    span_id: hex(&s.span_id),
                    parent_span_id: hex(&s.parent_span_id),
                    trace_state: s.trace_state,
                    attributes: attributes(&s.attributes),
                    status_code: status.code,
                    status_message: status.message,
                });
            }
        }
    }
    spans.lock().unwrap().extend(got);
    answer(200, ExportTraceServiceResponse::default().encode_to_vec())
}

fn attributes(kvs: &[KeyValue]) -> BTreeMap<String, String> {
    kvs.iter()
        .map(|kv| {
            let v = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(any_value::Value::StringValue(s)) => s.clone(),
                Some(any_value::Value::IntValue(i)) => i.to_string(),
                Some(any_value::Value::BoolValue(b)) => b.to_string(),
                Some(any_value::Value::DoubleValue(d)) => d.to_string(),
                Some(other) => format!("{other:?}"),
                None => String::new(),
            };
            (kv.key.clone(), v)
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A collector that accepts connections and never answers: every export waits its whole
/// timeout. Stops when dropped.
pub struct SilentCollector {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl SilentCollector {
    pub async fn start() -> SilentCollector {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("bound");
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((tcp, _)) = listener.accept().await {
                held.push(tcp);
            }
        });
        SilentCollector { addr, task }
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for SilentCollector {
    fn drop(&mut self) {
        self.task.abort();
    }
}
