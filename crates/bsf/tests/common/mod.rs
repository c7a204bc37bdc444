//! A BSF on 127.0.0.1:0 with a tempdir store, an SbiClient to talk to it, a notification sink
//! (a tiny hyper server) and the TS 29.521 schemas to validate answers against.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};

use bsf::{BsfConfig, RunConfig};
use sbi::client::{ClientConfig, SbiClient, SbiResponse};

pub struct TestBsf {
    pub base: String,
    pub bsf: Arc<bsf::Bsf>,
    /// The Rx proxy's Diameter address when `[bsf.rx]` is enabled.
    pub rx: Option<SocketAddr>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), bsf::BsfError>>>,
}

impl TestBsf {
    pub async fn start(dir: &Path, config: BsfConfig) -> TestBsf {
        Self::start_as(dir, config, None).await
    }

    pub async fn start_as(dir: &Path, config: BsfConfig, instance_id: Option<String>) -> TestBsf {
        let run = RunConfig {
            bsf: config,
            sbi: sbi::ServerConfig::default(),
            client: ClientConfig { request_timeout_ms: 1000, ..ClientConfig::default() },
            store: store::SqliteConfig {
                readers: 1,
                ..store::SqliteConfig::new(dir.join("bsf.db"))
            },
            instance_id,
        };
        let bound = bsf::bind(run).await.expect("BSF starts");
        let base = format!("http://{}", bound.local_addr());
        let bsf = bound.bsf().clone();
        let rx_addr = bound.rx_local_addr();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(bound.serve(async {
            let _ = rx.await;
        }));
        TestBsf { base, bsf, rx: rx_addr, stop: Some(tx), task: Some(task) }
    }

    /// Stops serving and waits until the store is closed.
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            t.await.unwrap().unwrap();
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}/nbsf-management/v1{path}", self.base)
    }
}

pub fn client() -> SbiClient {
    SbiClient::new(&ClientConfig::default()).unwrap()
}

/// A valid PcfBinding for UE IPv4 10.0.<n/256>.<n%256>.
pub fn binding(n: u32) -> Value {
    json!({
        "supi": format!("imsi-00101{n:010}"),
        "gpsi": format!("msisdn-3361{n:07}"),
        "ipv4Addr": format!("10.0.{}.{}", n / 256, n % 256),
        "dnn": "internet",
        "snssai": {"sst": 1, "sd": "000001"},
        "pcfFqdn": "pcf1.example.com",
        "pcfIpEndPoints": [{"ipv4Address": "192.0.2.10", "port": 8080}],
        "pcfDiamHost": "pcf1.example.com",
        "pcfDiamRealm": "example.com",
    })
}

pub async fn post(c: &SbiClient, url: &str, body: &Value) -> SbiResponse {
    c.post(url).json(body).send().await.unwrap()
}

pub async fn get(c: &SbiClient, url: &str) -> SbiResponse {
    c.get(url).send().await.unwrap()
}

pub async fn delete(c: &SbiClient, url: &str) -> SbiResponse {
    c.delete(url).send().await.unwrap()
}

pub async fn merge_patch(c: &SbiClient, url: &str, patch: &Value) -> SbiResponse {
    c.patch(url)
        .header("content-type", "application/merge-patch+json")
        .body(serde_json::to_vec(patch).unwrap())
        .send()
        .await
        .unwrap()
}

pub fn body(r: &SbiResponse) -> Value {
    serde_json::from_slice(r.body()).unwrap_or(Value::Null)
}

/// Asserts a ProblemDetails answer with this status and cause; returns it.
pub fn problem(r: &SbiResponse, status: u16, cause: &str) -> Value {
    let v = body(r);
    assert_eq!(r.status().as_u16(), status, "{v}");
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    assert_eq!(v["cause"], cause, "{v}");
    assert_valid("TS29571_CommonData", "ProblemDetails", &v);
    v
}

/// The `param`s of a ProblemDetails' invalidParams.
pub fn params(v: &Value) -> Vec<String> {
    v["invalidParams"]
        .as_array()
        .map(|a| a.iter().map(|p| p["param"].as_str().unwrap_or("").to_owned()).collect())
        .unwrap_or_default()
}

/// Percent-encodes a query value.
pub fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

// ---- notification sink ----------------------------------------------------------------------

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

// ---- schemas ---------------------------------------------------------------------------------

const FILES: [(&str, &str); 3] = [
    ("TS29571_CommonData", "TS29571_CommonData.yaml"),
    ("TS29510_Nnrf_NFManagement", "TS29510_Nnrf_NFManagement.yaml"),
    ("TS29521_Nbsf_Management", "TS29521_Nbsf_Management.yaml"),
];

/// The specs in one document, `$defs/<spec>`, with references between them rewritten to
/// local pointers and references to other specs accepted as anything. None without ../shared.
fn specs() -> Option<&'static Value> {
    static DOC: OnceLock<Option<Value>> = OnceLock::new();
    DOC.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/3gpp/Rel-17");
        let mut defs = serde_json::Map::new();
        for (key, file) in FILES {
            let text = std::fs::read_to_string(dir.join(file)).ok()?;
            let yaml: serde_yaml::Value = serde_yaml::from_str(&text).expect("spec parses");
            let mut v: Value = serde_json::to_value(yaml).expect("yaml to json");
            rewrite_refs(&mut v, key);
            defs.insert(key.to_owned(), v);
        }
        Some(json!({ "$defs": defs }))
    })
    .as_ref()
}

fn rewrite_refs(v: &mut Value, own: &str) {
    match v {
        Value::Object(map) => {
            if let Some(r) = map.get("$ref").and_then(Value::as_str).map(str::to_owned) {
                let target = match r.split_once('#') {
                    Some(("", ptr)) => Some(format!("#/$defs/{own}{ptr}")),
                    Some((file, ptr)) => FILES
                        .iter()
                        .find(|(_, f)| *f == file)
                        .map(|(k, _)| format!("#/$defs/{k}{ptr}")),
                    None => None,
                };
                match target {
                    Some(t) => {
                        map.insert("$ref".into(), Value::from(t));
                    }
                    None => map.clear(),
                }
                return;
            }
            map.values_mut().for_each(|x| rewrite_refs(x, own));
        }
        Value::Array(a) => a.iter_mut().for_each(|x| rewrite_refs(x, own)),
        _ => {}
    }
}

/// Validates `value` against `components/schemas/<schema>` of `spec`; skips (with a note) when
/// ../shared is absent.
pub fn assert_valid(spec: &str, schema: &str, value: &Value) {
    let Some(doc) = specs() else {
        eprintln!("skipped: ../shared/3gpp absent, {schema} not checked");
        return;
    };
    let mut root = doc.clone();
    root["$ref"] = Value::from(format!("#/$defs/{spec}/components/schemas/{schema}"));
    let validator = jsonschema::validator_for(&root).expect("schema compiles");
    let errors: Vec<String> =
        validator.iter_errors(value).map(|e| format!("{e} at {}", e.instance_path)).collect();
    assert!(errors.is_empty(), "{schema} {value} fails {spec}: {errors:?}");
}
