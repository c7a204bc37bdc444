//! A small test NF served through the full SBI stack, and plain hyper clients to talk to it.
#![allow(dead_code)]

pub mod tokens;

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde::{Deserialize, Serialize};
use tokio::sync::{oneshot, Mutex, Semaphore};

use sbi::body::{self, JSON_PATCH_JSON, MERGE_PATCH_JSON};
use sbi::{
    empty_response, json_response, HandlerResult, NfIdentity, Observability, ProblemDetails,
    Router, SbiRequest, SbiServer, ServerConfig,
};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Item {
    pub name: String,
    pub count: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

pub struct TestState {
    pub items: Mutex<std::collections::HashMap<String, serde_json::Value>>,
    /// Requests to /slow wait here until the test adds permits.
    pub gate: Arc<Semaphore>,
}

impl Default for TestState {
    fn default() -> Self {
        TestState { items: Mutex::default(), gate: Arc::new(Semaphore::new(0)) }
    }
}

async fn get_item(s: Arc<TestState>, req: SbiRequest) -> HandlerResult {
    let items = s.items.lock().await;
    match items.get(req.param("itemId")) {
        Some(v) => json_response(StatusCode::OK, v),
        None => Err(ProblemDetails::not_found(format!("no item {}", req.param("itemId")))),
    }
}

async fn create_item(s: Arc<TestState>, req: SbiRequest) -> HandlerResult {
    let item: Item = req.json()?;
    let id = item.name.clone();
    s.items.lock().await.insert(id.clone(), serde_json::to_value(&item).unwrap());
    let mut resp = json_response(StatusCode::CREATED, &item)?;
    resp.headers_mut()
        .insert(http::header::LOCATION, format!("/ntest/v1/items/{id}").parse().unwrap());
    Ok(resp)
}

async fn patch_item(s: Arc<TestState>, req: SbiRequest) -> HandlerResult {
    body::require_media_type(req.headers(), &[MERGE_PATCH_JSON, JSON_PATCH_JSON])?;
    let mut items = s.items.lock().await;
    let Some(current) = items.get(req.param("itemId")) else {
        return Err(ProblemDetails::not_found("no such item"));
    };
    let mut doc = current.clone();
    if body::media_type(req.headers()) == Some(MERGE_PATCH_JSON) {
        body::apply_merge_patch(&mut doc, &req.body)?;
    } else {
        body::apply_json_patch(&mut doc, &req.body)?;
    }
    // The patched document must still be a valid item.
    let item: Item = body::decode_json(&serde_json::to_vec(&doc).unwrap())?;
    let value = serde_json::to_value(&item).unwrap();
    items.insert(req.param("itemId").to_owned(), value.clone());
    json_response(StatusCode::OK, &value)
}

async fn query_echo(_: Arc<TestState>, req: SbiRequest) -> HandlerResult {
    let q = req.query();
    let nf_type = q.required("target-nf-type")?;
    let names = q.array("service-names");
    let snssais: Option<serde_json::Value> = q.json("snssais")?;
    let limit: Option<u32> = q.parse_as("limit")?;
    json_response(
        StatusCode::OK,
        &serde_json::json!({"nfType": nf_type, "names": names, "snssais": snssais, "limit": limit}),
    )
}

async fn slow(s: Arc<TestState>, _: SbiRequest) -> HandlerResult {
    let permit = s.gate.acquire().await.map_err(|_| ProblemDetails::internal("gate closed"))?;
    permit.forget();
    Ok(empty_response(StatusCode::NO_CONTENT))
}

/// Waits `ms` (query) as if on another NF and marks the answer so; `fail=1` answers a problem.
async fn upstream(_: Arc<TestState>, req: SbiRequest) -> HandlerResult {
    let q = req.query();
    let ms: u64 = q.parse_as("ms")?.unwrap_or(0);
    let started = std::time::Instant::now();
    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    let waited = started.elapsed();
    let result = if q.get("fail")?.is_some() {
        Err(ProblemDetails::new(StatusCode::GATEWAY_TIMEOUT, "TARGET_NF_NOT_REACHABLE", "upstream"))
    } else {
        Ok(empty_response(StatusCode::NO_CONTENT))
    };
    req.with_upstream_wait(result, waited)
}

async fn panics(_: Arc<TestState>, _: SbiRequest) -> HandlerResult {
    panic!("deliberate test panic")
}

pub fn router(state: Arc<TestState>) -> Router {
    Router::builder(state)
        .route(Method::GET, "/ntest/v1/items/{itemId}", "Ntest_Get", get_item)
        .route(Method::POST, "/ntest/v1/items", "Ntest_Create", create_item)
        .route(Method::PATCH, "/ntest/v1/items/{itemId}", "Ntest_Update", patch_item)
        .route(Method::GET, "/ntest/v1/query", "Ntest_Query", query_echo)
        .route(Method::GET, "/ntest/v1/slow", "Ntest_Slow", slow)
        .route(Method::GET, "/ntest/v1/panic", "Ntest_Panic", panics)
        .route(Method::GET, "/ntest/v1/upstream", "Ntest_Upstream", upstream)
        .build()
}

pub struct Running {
    pub addr: SocketAddr,
    pub state: Arc<TestState>,
    pub observability: Observability,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl Running {
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            t.await.unwrap().unwrap();
        }
    }
}

pub async fn start(config: ServerConfig) -> Running {
    let state = Arc::new(TestState::default());
    let observability = Observability::new();
    observability.set_ready(true);
    let server = SbiServer::bind(
        config,
        NfIdentity::new("TEST", "7a0f6d3e-0000-4000-8000-000000000001"),
        router(state.clone()),
        observability.clone(),
    )
    .await
    .unwrap();
    let addr = server.local_addr();
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(server.serve(async move {
        let _ = rx.await;
    }));
    Running { addr, state, observability, stop: Some(tx), task: Some(task) }
}

pub type H2Client = Client<HttpConnector, Full<Bytes>>;

/// An h2c client with prior knowledge, as 3GPP NFs connect.
pub fn h2c_client() -> H2Client {
    Client::builder(TokioExecutor::new()).http2_only(true).build_http()
}

pub fn h1_client() -> H2Client {
    Client::builder(TokioExecutor::new()).build_http()
}

pub struct Answer {
    pub status: StatusCode,
    pub headers: http::HeaderMap,
    pub body: Bytes,
    pub version: http::Version,
}

impl Answer {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
    pub fn content_type(&self) -> &str {
        self.headers.get(http::header::CONTENT_TYPE).map_or("", |v| v.to_str().unwrap())
    }
}

pub async fn send(
    client: &H2Client,
    method: Method,
    url: String,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Answer {
    let mut b = http::Request::builder().method(method).uri(url);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let req = b.body(Full::new(Bytes::from(body.unwrap_or("").to_owned()))).unwrap();
    let resp = client.request(req).await.unwrap();
    let (parts, body) = resp.into_parts();
    Answer {
        status: parts.status,
        headers: parts.headers,
        version: parts.version,
        body: body.collect().await.unwrap().to_bytes(),
    }
}
