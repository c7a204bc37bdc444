//! A PCF on 127.0.0.1:0 with a tempdir store (SQLite, or on MariaDB a database of its own:
//! [`state_dir`]) and a copy of the default policy project, a client, the TS 29.512 schemas,
//! and the SmPolicyContextData an SMF sends.
#![allow(dead_code)]

pub mod amf;
pub mod chf;
pub mod peers;
pub mod wire;

use std::path::{Path, PathBuf};

use pcf::{PcfConfig, RunConfig};
use sbi::client::{ClientConfig, SbiClient, SbiResponse};
use serde_json::{json, Value};
use testkit::specs::Specs;
use tokio::sync::oneshot;

pub struct TestPcf {
    pub base: String,
    /// Where Gx and Rx are served, when `[pcf.diameter]` is on.
    pub diameter: Option<std::net::SocketAddr>,
    /// The PCF itself, for what a test checks in its store.
    pub pcf: std::sync::Arc<pcf::Pcf>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), pcf::PcfError>>>,
}

impl TestPcf {
    pub async fn start(dir: &Path, policy: &Path) -> TestPcf {
        let config = PcfConfig { policy: Some(policy.to_path_buf()), ..PcfConfig::default() };
        Self::start_with(dir, config).await
    }

    pub async fn start_with(dir: &Path, config: PcfConfig) -> TestPcf {
        let run = run_config(dir, config);
        let mysql = run.store.url.first().cloned();
        let bound = pcf::bind(run).await.expect("PCF starts");
        if let Some(url) = mysql {
            // The PCF's schema is in the test's database: the PCF runs on MariaDB.
            let db = url.rsplit('/').next().unwrap();
            let server = testkit::mariadb::server().unwrap();
            let n = server
                .client(&format!(
                    "SELECT COUNT(*) FROM information_schema.tables \
                     WHERE table_schema = '{db}' AND table_name = 'pcf_sm_policy'"
                ))
                .unwrap();
            assert_eq!(n.trim(), "1", "no PCF schema in {db}");
        }
        let base = format!("http://{}", bound.local_addr());
        let diameter = bound.diameter_addr();
        let pcf = bound.pcf().clone();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(bound.serve(async {
            let _ = rx.await;
        }));
        TestPcf { base, diameter, pcf, stop: Some(tx), task: Some(task) }
    }

    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            t.await.unwrap().unwrap();
        }
    }

    /// Ends it as a killed process ends: no stop step runs (nothing is released, the store
    /// is not closed).
    pub async fn kill(mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
            let _ = t.await;
        }
    }

    /// Its Diameter address (Gx, Rx); panics when `[pcf.diameter]` is off.
    pub fn diameter(&self) -> std::net::SocketAddr {
        self.diameter.expect("[pcf.diameter] serves Gx and Rx")
    }

    pub fn sm(&self, path: &str) -> String {
        format!("{}/npcf-smpolicycontrol/v1/sm-policies{path}", self.base)
    }
}

/// What `pcf::bind` is given for a PCF with its state in `dir` (see [`state_dir`]).
pub fn run_config(dir: &Path, config: PcfConfig) -> RunConfig {
    RunConfig {
        pcf: config,
        sbi: sbi::ServerConfig::default(),
        client: ClientConfig { request_timeout_ms: 1000, ..ClientConfig::default() },
        store: store_config(dir),
        instance_id: None,
    }
}

// ---- the store backend of a test ----------------------------------------------------------

/// Where a test's PCF keeps its state (`testkit::backends::state_dir`): a SQLite file, or on
/// MariaDB the URL of the test's own database, so a PCF restarted on the same directory finds
/// its state on either backend. The directory also holds what the PCF keeps beside its store
/// (the default policy project, PER files).
pub fn state_dir() -> tempfile::TempDir {
    testkit::backends::state_dir("pcf")
}

/// The `[store]` of a PCF whose state is in `dir` (see [`state_dir`]).
pub fn store_config(dir: &Path) -> store::SqliteConfig {
    let sqlite = store::SqliteConfig { readers: 1, ..store::SqliteConfig::new(dir.join("pcf.db")) };
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

/// The PCF's durable store in `dir` (its state and its policy versions), opened as the PCF opens
/// it: to check what a stopped PCF left committed, or to drive the store's traits directly.
pub async fn open_store(
    dir: &Path,
) -> (
    store::AnyStore,
    std::sync::Arc<dyn pcf::store::PcfStore>,
    std::sync::Arc<dyn pcf::store::PolicyVersionStore>,
) {
    let db = store::AnyStore::open(store_config(dir)).await.expect("the PCF's store opens");
    let (state, versions) = pcf::store::open(&db).await.expect("the PCF's schema is applied");
    (db, state, versions)
}

/// What the store in `dir` holds of `supi` (state variables, UDR subscription).
pub async fn stored_subscriber(dir: &Path, supi: &str) -> pcf::store::Subscriber {
    let (db, state, _) = open_store(dir).await;
    let kept = state.subscriber(supi).await.unwrap();
    db.close().await.unwrap();
    kept
}

pub fn client() -> SbiClient {
    SbiClient::new(&ClientConfig::default()).unwrap()
}

pub fn body(r: &SbiResponse) -> Value {
    serde_json::from_slice(r.body()).unwrap_or(Value::Null)
}

pub fn specs() -> Specs {
    Specs::load(&["TS29512_Npcf_SMPolicyControl", "TS29571_CommonData", "TS29122_CommonData"])
}

pub fn problem(specs: &Specs, r: &SbiResponse, status: u16, cause: &str) -> Value {
    let v = body(r);
    assert_eq!(r.status().as_u16(), status, "{v}");
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    assert_eq!(v["cause"], cause, "{v}");
    specs.assert_valid("TS29571_CommonData", "ProblemDetails", &v);
    v
}

/// The repository's default project, copied so a test can change it.
pub fn default_project(into: &Path) -> PathBuf {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../policies/default");
    copy_dir(&src, into);
    into.to_path_buf()
}

pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

/// SmPolicyContextData as Open5GS v2.8's SMF builds it (smf/npcf-build.c): the attributes and
/// their shapes, with a PDU session of UE `n`.
pub fn open5gs_context(n: u32) -> Value {
    json!({
        "supi": format!("imsi-99970000000{n:04}"),
        "pduSessionId": 1,
        "pduSessionType": "IPV4",
        "dnn": "internet",
        "notificationUri": format!("http://127.0.0.4:7777/nsmf-callback/v1/sm-policy-notify/{n}"),
        "accessType": "3GPP_ACCESS",
        "ratType": "NR",
        "servingNetwork": {"mcc": "999", "mnc": "70"},
        "userLocationInfo": {"nrLocation": {
            "tai": {"plmnId": {"mcc": "999", "mnc": "70"}, "tac": "000001"},
            "ncgi": {"plmnId": {"mcc": "999", "mnc": "70"}, "nrCellId": "000000010"},
            "ueLocationTimestamp": "2026-11-26T10:00:00.000000Z"}},
        "ueTimeZone": "+00:00",
        "pei": "imeisv-4370816125816151",
        "ipv4Address": format!("10.45.{}.{}", n / 256, n % 256),
        "subsSessAmbr": {"uplink": "1 Gbps", "downlink": "2 Gbps"},
        "subsDefQos": {"5qi": 9, "arp": {"priorityLevel": 8, "preemptCap": "NOT_PREEMPT",
            "preemptVuln": "NOT_PREEMPTABLE"}, "priorityLevel": 8},
        "sliceInfo": {"sst": 1},
        "suppFeat": "4000000"
    })
}
