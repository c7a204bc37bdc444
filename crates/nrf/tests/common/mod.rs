//! An NRF on 127.0.0.1:0 with a tempdir store, an SbiClient to talk to it, a notification sink
//! (a tiny hyper server) and the TS 29.510 schemas to validate answers against.
#![allow(dead_code)]

use std::path::Path;
use std::sync::{Arc, LazyLock};

use serde_json::{json, Value};
use testkit::specs::Specs;
use tokio::sync::oneshot;

use nrf::{NrfConfig, RunConfig};
use sbi::client::{ClientConfig, SbiClient, SbiResponse};

pub struct TestNrf {
    pub base: String,
    pub nrf: Arc<nrf::Nrf>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), nrf::NrfError>>>,
}

impl TestNrf {
    pub async fn start(dir: &Path, config: NrfConfig) -> TestNrf {
        let run = RunConfig {
            nrf: config,
            sbi: sbi::ServerConfig::default(),
            client: ClientConfig { request_timeout_ms: 1000, ..ClientConfig::default() },
            store: store::SqliteConfig {
                readers: 1,
                ..store::SqliteConfig::new(dir.join("nrf.db"))
            },
            instance_id: None,
        };
        let bound = nrf::bind(run).await.expect("NRF starts");
        let base = format!("http://{}", bound.local_addr());
        let nrf = bound.nrf().clone();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(bound.serve(async {
            let _ = rx.await;
        }));
        TestNrf { base, nrf, stop: Some(tx), task: Some(task) }
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

    pub fn nfm(&self, path: &str) -> String {
        format!("{}/nnrf-nfm/v1{path}", self.base)
    }

    pub fn disc(&self, query: &str) -> String {
        format!("{}/nnrf-disc/v1/nf-instances?{query}", self.base)
    }
}

pub fn client() -> SbiClient {
    SbiClient::new(&ClientConfig::default()).unwrap()
}

/// A minimal valid profile.
pub fn profile(id: &str, nf_type: &str) -> Value {
    json!({
        "nfInstanceId": id,
        "nfType": nf_type,
        "nfStatus": "REGISTERED",
        "ipv4Addresses": ["127.0.0.1"],
        "heartBeatTimer": 30,
    })
}

pub fn uuid(n: u32) -> String {
    format!("{n:08x}-0000-4000-8000-000000000000")
}

pub async fn put(c: &SbiClient, url: &str, body: &Value) -> SbiResponse {
    c.put(url).json(body).send().await.unwrap()
}

pub async fn patch(c: &SbiClient, url: &str, ops: &Value) -> SbiResponse {
    c.patch(url)
        .header("content-type", "application/json-patch+json")
        .body(serde_json::to_vec(ops).unwrap())
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

// ---- notification sink ----------------------------------------------------------------------

// Not every test binary that includes this module uses it.
#[allow(unused_imports)]
pub use testkit::sink::Sink;

// ---- schemas ---------------------------------------------------------------------------------

static SPECS: LazyLock<Specs> = LazyLock::new(|| {
    Specs::load(&[
        "TS29571_CommonData",
        "TS29510_Nnrf_NFManagement",
        "TS29510_Nnrf_NFDiscovery",
        "TS29510_Nnrf_AccessToken",
    ])
});

/// Validates `value` against `components/schemas/<schema>` of `spec`; skips (with a note) when
/// ../shared is absent.
pub fn assert_valid(spec: &str, schema: &str, value: &Value) {
    SPECS.assert_valid(spec, schema, value)
}
