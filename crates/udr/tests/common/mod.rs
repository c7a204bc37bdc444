//! A UDR on 127.0.0.1:0 with a tempdir store, an SbiClient to talk to it, and the 3GPP schemas
//! to validate answers against.
#![allow(dead_code)]

use std::path::Path;
use std::sync::{Arc, LazyLock};

use serde_json::Value;
use testkit::specs::Specs;
use tokio::sync::oneshot;

use sbi::client::{ClientConfig, SbiClient, SbiResponse};
use udr::{RunConfig, UdrConfig};

pub struct TestUdr {
    pub base: String,
    pub udr: Arc<udr::Udr>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), udr::UdrError>>>,
}

impl TestUdr {
    pub async fn start(dir: &Path, config: UdrConfig) -> TestUdr {
        Self::start_as(dir, config, None).await
    }

    pub async fn start_as(dir: &Path, config: UdrConfig, instance_id: Option<String>) -> TestUdr {
        let run = RunConfig {
            udr: config,
            sbi: sbi::ServerConfig::default(),
            client: ClientConfig { request_timeout_ms: 1000, ..ClientConfig::default() },
            store: store_config(dir),
            instance_id,
        };
        let bound = udr::bind(run).await.expect("UDR starts");
        let base = format!("http://{}", bound.local_addr());
        let udr = bound.udr().clone();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(bound.serve(async {
            let _ = rx.await;
        }));
        TestUdr { base, udr, stop: Some(tx), task: Some(task) }
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
        format!("{}{path}", self.base)
    }
}

/// The `[store]` of a UDR whose state is in `dir` (a [`state_dir`]): the SQLite file there, or
/// the MariaDB database the directory names.
pub fn store_config(dir: &Path) -> store::SqliteConfig {
    let sqlite = store::SqliteConfig { readers: 1, ..store::SqliteConfig::new(dir.join("udr.db")) };
    match testkit::backends::mysql_url(dir) {
        Some(url) => store::SqliteConfig {
            backend: store::Backend::Mysql,
            url: vec![url],
            pool_size: 8,
            ..sqlite
        },
        None => sqlite,
    }
}

/// A directory for a UDR's state: SQLite, or a new MariaDB database in the `mariadb::` run of
/// a test (`testkit::on_both_backends!`).
pub fn state_dir() -> tempfile::TempDir {
    testkit::backends::state_dir("udr")
}

/// Runs `sql` on the store of `dir` behind the UDR's back (a connection of its own).
pub async fn exec_sql(dir: &Path, sql: &'static str) {
    match testkit::backends::mysql_url(dir) {
        Some(url) => {
            use store::mysql::mysql_async::prelude::Queryable;
            let db = store::MysqlStore::open(store::MysqlConfig::new([url])).await.unwrap();
            db.write(move |c| Box::pin(async move { Ok(c.query_drop(sql).await?) })).await.unwrap();
            db.close().await;
        }
        None => {
            let db = store::SqliteStore::open(store::SqliteConfig::new(dir.join("udr.db")))
                .await
                .unwrap();
            db.write(move |tx| Ok(tx.execute(sql, [])?)).await.unwrap();
            db.close().await.unwrap();
        }
    }
}

pub fn client() -> SbiClient {
    SbiClient::new(&ClientConfig::default()).unwrap()
}

pub async fn get(c: &SbiClient, url: &str) -> SbiResponse {
    c.get(url).send().await.unwrap()
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

static SPECS: LazyLock<Specs> = LazyLock::new(|| {
    Specs::load(&[
        "TS29571_CommonData",
        "TS29510_Nnrf_NFManagement",
        "TS29504_Nudr_GroupIDmap",
        "TS29511_N5g-eir_EquipmentIdentityCheck",
        "TS29519_Policy_Data",
        "TS29122_CommonData",
        "TS29554_Npcf_BDTPolicyControl",
    ])
});

/// Validates `value` against `components/schemas/<schema>` of `spec`; skips (with a note) when
/// ../shared is absent.
pub fn assert_valid(spec: &str, schema: &str, value: &Value) {
    SPECS.assert_valid(spec, schema, value)
}

/// Sends `method url` with a JSON body (`None`: no body).
pub async fn send_json(
    c: &SbiClient,
    method: http::Method,
    url: &str,
    body: Option<&Value>,
) -> SbiResponse {
    let mut b = c.request(method, url);
    if let Some(v) = body {
        b = b.json(v);
    }
    b.send().await.unwrap()
}

/// A UDR configuration with `[udr.eir]` set.
pub fn eir_config(eir: udr::eir::EirConfig) -> UdrConfig {
    UdrConfig { eir, ..UdrConfig::default() }
}

/// Sends `method url` with a body of `content_type` and extra headers.
pub async fn send(
    c: &SbiClient,
    method: http::Method,
    url: &str,
    content_type: Option<&str>,
    body: &[u8],
    headers: &[(&str, &str)],
) -> SbiResponse {
    let mut b = c.request(method, url);
    if let Some(ct) = content_type {
        b = b.header("content-type", ct);
    }
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(bytes::Bytes::copy_from_slice(body)).send().await.unwrap()
}

pub async fn put_json(c: &SbiClient, url: &str, v: &Value) -> SbiResponse {
    send(c, http::Method::PUT, url, Some("application/json"), v.to_string().as_bytes(), &[]).await
}

pub async fn post_json(c: &SbiClient, url: &str, v: &Value) -> SbiResponse {
    send(c, http::Method::POST, url, Some("application/json"), v.to_string().as_bytes(), &[]).await
}

pub async fn merge_patch(c: &SbiClient, url: &str, v: &Value) -> SbiResponse {
    send(
        c,
        http::Method::PATCH,
        url,
        Some("application/merge-patch+json"),
        v.to_string().as_bytes(),
        &[],
    )
    .await
}

pub async fn delete(c: &SbiClient, url: &str) -> SbiResponse {
    c.delete(url).send().await.unwrap()
}

/// The UDR's policy data settings for tests: quick notification retries.
pub fn policy_config() -> UdrConfig {
    let mut c = UdrConfig::default();
    c.policy.notify.backoff_ms = 50;
    c.policy.notify.max_backoff_ms = 200;
    c
}

/// The UDR's `/metrics` scraped over HTTP: the sum of the samples of `name` carrying every one of
/// `labels` (0 when there is none).
pub async fn metric(udr: &TestUdr, name: &str, labels: &[(&str, &str)]) -> f64 {
    let r = get(&client(), &udr.url("/metrics")).await;
    assert_eq!(r.status(), 200);
    let text = std::str::from_utf8(r.body()).unwrap();
    let mut sum = 0.0;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some(rest) = line.strip_prefix(name) else { continue };
        let (series_labels, value) = match rest.strip_prefix('{') {
            Some(r) => r.split_once("} ").unwrap(),
            None => match rest.strip_prefix(' ') {
                Some(v) => ("", v),
                None => continue, // another metric whose name starts with `name`
            },
        };
        if labels.iter().all(|(k, v)| series_labels.contains(&format!("{k}=\"{v}\""))) {
            sum += value.split(' ').next().unwrap().parse::<f64>().unwrap();
        }
    }
    sum
}
