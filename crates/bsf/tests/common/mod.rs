//! A BSF on 127.0.0.1:0 with a tempdir store, an SbiClient to talk to it, a notification sink
//! (a tiny hyper server) and the TS 29.521 schemas to validate answers against.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, LazyLock};

use serde_json::{json, Value};
use testkit::specs::Specs;
use tokio::sync::oneshot;

use bsf::{BsfConfig, RunConfig};
use sbi::client::{ClientConfig, SbiClient, SbiResponse};

pub struct TestBsf {
    pub base: String,
    pub bsf: Arc<bsf::Bsf>,
    /// The Rx proxy's Diameter address when `[bsf.rx]` is enabled.
    pub rx: Option<SocketAddr>,
    /// Its TLS address when `[bsf.rx.tls] listen` is set.
    pub rx_tls: Option<SocketAddr>,
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
            store: store_config(dir),
            instance_id,
        };
        let mysql = run.store.url.first().cloned();
        let bound = bsf::bind(run).await.expect("BSF starts");
        if let Some(url) = mysql {
            // The BSF's schema is in the test's database: the BSF runs on MariaDB.
            let db = url.rsplit('/').next().unwrap();
            let server = testkit::mariadb::server().unwrap();
            let n = server
                .client(&format!(
                    "SELECT COUNT(*) FROM information_schema.tables \
                     WHERE table_schema = '{db}' AND table_name = 'bsf_pcf_binding'"
                ))
                .unwrap();
            assert_eq!(n.trim(), "1", "no BSF schema in {db}");
        }
        let base = format!("http://{}", bound.local_addr());
        let bsf = bound.bsf().clone();
        let rx_addr = bound.rx_local_addr();
        let rx_tls = bound.rx_tls_local_addr();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(bound.serve(async {
            let _ = rx.await;
        }));
        TestBsf { base, bsf, rx: rx_addr, rx_tls, stop: Some(tx), task: Some(task) }
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

// ---- the store backend of a test ----------------------------------------------------------

/// Where a test's BSF keeps its state (`testkit::backends::state_dir`): a SQLite file, or on
/// MariaDB the URL of the test's own database, so a BSF restarted on the same directory finds
/// its state on either backend.
pub fn state_dir() -> tempfile::TempDir {
    testkit::backends::state_dir("bsf")
}

/// The `[store]` of a BSF whose state is in `dir` (see [`state_dir`]).
pub fn store_config(dir: &Path) -> store::SqliteConfig {
    let sqlite = store::SqliteConfig { readers: 1, ..store::SqliteConfig::new(dir.join("bsf.db")) };
    match testkit::backends::mysql_url(dir) {
        Some(url) => store::SqliteConfig {
            backend: store::Backend::Mysql,
            url: vec![url],
            pool_size: 4,
            ..sqlite
        },
        None => sqlite,
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

// Not every test binary that includes this module uses them.
#[allow(unused_imports)]
pub use testkit::http::{enc, params};

// ---- notification sink ----------------------------------------------------------------------

// Not every test binary that includes this module uses it.
#[allow(unused_imports)]
pub use testkit::sink::Sink;

// ---- schemas ---------------------------------------------------------------------------------

static SPECS: LazyLock<Specs> = LazyLock::new(|| {
    Specs::load(&["TS29571_CommonData", "TS29510_Nnrf_NFManagement", "TS29521_Nbsf_Management"])
});

/// Validates `value` against `components/schemas/<schema>` of `spec`; skips (with a note) when
/// ../shared is absent.
pub fn assert_valid(spec: &str, schema: &str, value: &Value) {
    SPECS.assert_valid(spec, schema, value)
}
