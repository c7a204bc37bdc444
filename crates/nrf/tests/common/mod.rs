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
        let nrf = Self::start_on(store_config(dir), config).await;
        if testkit::backends::mysql_url(dir).is_some() {
            assert_eq!(nrf.nrf.store.backend().backend(), store::Backend::Mysql);
            assert!(!dir.join("nrf.db").exists(), "a SQLite file beside the MariaDB state");
        }
        nrf
    }

    /// An NRF on the store `store` describes (a Galera node, in the coherence tests).
    pub async fn start_on(store: store::SqliteConfig, config: NrfConfig) -> TestNrf {
        let run = RunConfig {
            nrf: config,
            sbi: sbi::ServerConfig::default(),
            client: ClientConfig { request_timeout_ms: 1000, ..ClientConfig::default() },
            store,
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

/// The `[store]` of an NRF whose state is in `dir` (a [`testkit::backends::state_dir`]): the
/// SQLite file there, or the MariaDB database it names.
pub fn store_config(dir: &Path) -> store::SqliteConfig {
    let sqlite = store::SqliteConfig { readers: 1, ..store::SqliteConfig::new(dir.join("nrf.db")) };
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

/// A new state directory for an NRF (on MariaDB within `mariadb::` tests).
pub fn state_dir() -> tempfile::TempDir {
    testkit::backends::state_dir("nrf")
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

// ==== Issue #19: discovery oracle and helpers (used by peer_shapes.rs, discovery_semantics.rs) ==
//
// The expected answers of those tests are computed here, from the profiles a test registers and
// the rules of TS 29.510 as issue #19 states them, never read back from the NRF. `Disc` is a
// query; `expected` is what the NRF must answer to it; `check_answers` runs a table of queries and
// reports every mismatch with the answer received.

use std::collections::{BTreeMap, BTreeSet};

/// The NRF started from a `[nrf]` TOML section, so a test of a setting the NRF does not have yet
/// fails on that setting alone (deny_unknown_fields) instead of breaking the whole test binary.
pub async fn start_toml(dir: &Path, section: &str) -> TestNrf {
    let config: NrfConfig = toml::from_str(section)
        .unwrap_or_else(|e| panic!("the NRF refuses the [nrf] section {section:?}: {e}"));
    TestNrf::start(dir, config).await
}

/// A query value given as JSON (TS 29.510 encodes structured parameters so), URL-encoded.
pub fn json_param(v: &Value) -> String {
    form_urlencoded::byte_serialize(v.to_string().as_bytes()).collect()
}

/// `from`'s members set on `into` (both objects).
pub fn merge(into: &mut Value, from: Value) {
    if let (Some(a), Value::Object(b)) = (into.as_object_mut(), from) {
        a.extend(b);
    }
}

/// An NFService (TS 29.510 §6.1.6.2.3) with `extra` members.
pub fn nf_service(id: &str, name: &str, extra: Value) -> Value {
    let mut s = json!({
        "serviceInstanceId": id,
        "serviceName": name,
        "versions": [{"apiVersionInUri": "v1", "apiFullVersion": "1.0.0"}],
        "scheme": "http",
        "nfServiceStatus": "REGISTERED",
    });
    merge(&mut s, extra);
    s
}

/// Services as the Rel-16+ map keyed by serviceInstanceId (`nfServiceList`).
pub fn service_map(services: &[Value]) -> Value {
    Value::Object(
        services
            .iter()
            .map(|s| (s["serviceInstanceId"].as_str().unwrap().to_owned(), s.clone()))
            .collect(),
    )
}

/// Registers each profile (PUT), failing with the NRF's answer if one is refused.
pub async fn register_all(nrf: &TestNrf, profiles: &[Value]) {
    let c = client();
    for p in profiles {
        let id = p["nfInstanceId"].as_str().unwrap();
        let r = put(&c, &nrf.nfm(&format!("/nf-instances/{id}")), p).await;
        assert!(
            r.status().is_success(),
            "registering {id}: {} {}",
            r.status(),
            String::from_utf8_lossy(r.body())
        );
    }
}

/// One NFDiscover query, in the dimensions the oracle evaluates; `raw` carries parameters the
/// test's profiles all satisfy (the oracle ignores them).
#[derive(Debug, Clone, Default)]
pub struct Disc {
    pub target: String,
    pub requester: String,
    pub services: Vec<String>,
    pub features: Option<String>,
    pub requester_plmns: Option<Value>,
    pub target_plmns: Option<Value>,
    pub fqdn: Option<String>,
    pub requester_snssais: Option<Value>,
    pub pgw_ind: Option<bool>,
    pub ipv4_index: Option<Value>,
    pub dnn: Option<String>,
    pub locality: Option<String>,
    pub tai: Option<Value>,
    pub raw: Option<String>,
}

impl Disc {
    pub fn new(target: &str, requester: &str) -> Disc {
        Disc { target: target.into(), requester: requester.into(), ..Disc::default() }
    }
    /// `service-names`, comma-separated.
    pub fn names(mut self, names: &str) -> Disc {
        self.services = names.split(',').map(str::to_owned).collect();
        self
    }
    pub fn features(mut self, hex: &str) -> Disc {
        self.features = Some(hex.into());
        self
    }
    pub fn requester_plmns(mut self, v: Value) -> Disc {
        self.requester_plmns = Some(v);
        self
    }
    pub fn target_plmns(mut self, v: Value) -> Disc {
        self.target_plmns = Some(v);
        self
    }
    pub fn fqdn(mut self, f: &str) -> Disc {
        self.fqdn = Some(f.into());
        self
    }
    pub fn requester_snssais(mut self, v: Value) -> Disc {
        self.requester_snssais = Some(v);
        self
    }
    pub fn pgw_ind(mut self, b: bool) -> Disc {
        self.pgw_ind = Some(b);
        self
    }
    pub fn ipv4_index(mut self, v: Value) -> Disc {
        self.ipv4_index = Some(v);
        self
    }
    pub fn dnn(mut self, d: &str) -> Disc {
        self.dnn = Some(d.into());
        self
    }
    pub fn locality(mut self, l: &str) -> Disc {
        self.locality = Some(l.into());
        self
    }
    pub fn tai(mut self, v: Value) -> Disc {
        self.tai = Some(v);
        self
    }
    pub fn raw(mut self, q: &str) -> Disc {
        self.raw = Some(q.into());
        self
    }

    pub fn query(&self) -> String {
        let mut q = format!("target-nf-type={}&requester-nf-type={}", self.target, self.requester);
        let mut add = |k: &str, v: String| {
            q.push('&');
            q.push_str(k);
            q.push('=');
            q.push_str(&v);
        };
        if !self.services.is_empty() {
            add("service-names", self.services.join(","));
        }
        if let Some(f) = &self.features {
            add("requester-features", f.clone());
        }
        for (k, v) in [
            ("requester-plmn-list", &self.requester_plmns),
            ("target-plmn-list", &self.target_plmns),
            ("requester-snssais", &self.requester_snssais),
            ("ipv4-index", &self.ipv4_index),
            ("preferred-tai", &self.tai),
        ] {
            if let Some(v) = v {
                add(k, json_param(v));
            }
        }
        if let Some(f) = &self.fqdn {
            add("requester-nf-instance-fqdn", f.clone());
        }
        if let Some(b) = self.pgw_ind {
            add("pgw-ind", b.to_string());
        }
        if let Some(d) = &self.dnn {
            add("dnn", d.clone());
        }
        if let Some(l) = &self.locality {
            add("preferred-locality", l.clone());
        }
        if let Some(r) = &self.raw {
            q.push('&');
            q.push_str(r);
        }
        q
    }

    /// Whether the answer must carry services as `nfServiceList` (feature 6, Service-Map, of
    /// Nnrf_NFDiscovery: bit value 0x20 of requester-features).
    pub fn service_map(&self) -> bool {
        self.features.as_deref().is_some_and(|f| has_feature_bit(f, 0x20))
    }
}

/// Whether the SupportedFeatures hex string `hex` has `bit` set.
pub fn has_feature_bit(hex: &str, bit: u64) -> bool {
    // Only the last 16 digits can hold bits up to 0x8000_0000_0000_0000.
    let tail = &hex[hex.len().saturating_sub(16)..];
    u64::from_str_radix(tail, 16).is_ok_and(|v| v & bit != 0)
}

/// One profile of an expected answer: its id, its services (serviceInstanceIds; `None` when
/// the profile has none) and its tier (preferred locality, preferred TAI; (0, 0) first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    pub id: String,
    pub services: Option<BTreeSet<String>>,
    pub tier: (u8, u8),
}

type Plmn = (String, String);

/// The answer order: locality tier, TAI tier, priority (absent last), capacity (higher first),
/// load, nfInstanceId.
type OrderKey = (u8, u8, u32, i64, i64, String);

fn plmn_key(v: &Value) -> Option<Plmn> {
    Some((
        v.get("mcc")?.as_str()?.to_ascii_lowercase(),
        v.get("mnc")?.as_str()?.to_ascii_lowercase(),
    ))
}

fn plmns(v: Option<&Value>) -> Vec<Plmn> {
    v.and_then(Value::as_array).into_iter().flatten().filter_map(plmn_key).collect()
}

/// The profile's services, one set: nfServices and nfServiceList merged by serviceInstanceId.
pub fn merged_services(p: &Value) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for s in p.get("nfServices").and_then(Value::as_array).into_iter().flatten() {
        out.insert(s["serviceInstanceId"].as_str().unwrap().to_owned(), s.clone());
    }
    for (k, s) in p.get("nfServiceList").and_then(Value::as_object).into_iter().flatten() {
        out.insert(k.clone(), s.clone());
    }
    out
}

fn same_snssai(a: &Value, b: &Value) -> bool {
    let sd = |v: &Value| v.get("sd").and_then(Value::as_str).map(str::to_ascii_lowercase);
    a.get("sst") == b.get("sst") && sd(a) == sd(b)
}

/// The profile's xxxInfo objects and the values of its xxxInfoList maps.
fn infos(p: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for (k, v) in p.as_object().into_iter().flatten() {
        if k.ends_with("InfoList") {
            out.extend(v.as_object().into_iter().flat_map(|m| m.values()));
        } else if k.ends_with("Info") && v.is_object() {
            out.push(v);
        }
    }
    out
}

/// The authorisation attributes of a profile or a service (TS 29.510 Tables 6.1.6.2.2-1 and
/// 6.1.6.2.3-1) against the requester: allowedNfTypes always, allowedPlmns when the requester's
/// PLMNs are known, allowedNfDomains when its FQDN is given, allowedNssais when its S-NSSAIs are.
fn authorised(obj: &Value, q: &Disc, requester_plmns: &[Plmn]) -> bool {
    if let Some(types) = obj.get("allowedNfTypes").and_then(Value::as_array) {
        if !types.iter().any(|t| t == q.requester.as_str()) {
            return false;
        }
    }
    if !requester_plmns.is_empty() {
        if let Some(a) = obj.get("allowedPlmns") {
            if !plmns(Some(a)).iter().any(|p| requester_plmns.contains(p)) {
                return false;
            }
        }
    }
    if let (Some(fqdn), Some(domains)) =
        (&q.fqdn, obj.get("allowedNfDomains").and_then(Value::as_array))
    {
        let matches = |d: &Value| {
            d.as_str().and_then(|d| regex::Regex::new(d).ok()).is_some_and(|r| r.is_match(fqdn))
        };
        if !domains.iter().any(matches) {
            return false;
        }
    }
    if let (Some(want), Some(allowed)) = (
        q.requester_snssais.as_ref().and_then(Value::as_array),
        obj.get("allowedNssais").and_then(Value::as_array),
    ) {
        if !want.iter().any(|w| allowed.iter().any(|a| same_snssai(a, w))) {
            return false;
        }
    }
    true
}

fn is_combined_pgw_smf(p: &Value) -> bool {
    let smf_infos = p.get("smfInfo").into_iter().chain(
        p.get("smfInfoList").and_then(Value::as_object).into_iter().flat_map(|m| m.values()),
    );
    smf_infos
        .into_iter()
        .any(|i| ["pgwFqdn", "pgwFqdnList", "pgwIpAddrList"].iter().any(|k| i.get(*k).is_some()))
}

/// DnnUpfInfoItems of upfInfo.
fn dnn_upf_items(p: &Value) -> Vec<&Value> {
    let lists = p.pointer("/upfInfo/sNssaiUpfInfoList").and_then(Value::as_array);
    lists
        .into_iter()
        .flatten()
        .flat_map(|s| s.get("dnnUpfInfoList").and_then(Value::as_array).into_iter().flatten())
        .collect()
}

/// The DNNs a profile lists (SMF and UPF per-slice lists, dnnList); empty: any DNN.
fn dnns(p: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for info in infos(p) {
        for key in ["sNssaiSmfInfoList", "sNssaiUpfInfoList"] {
            for s in info.get(key).and_then(Value::as_array).into_iter().flatten() {
                for dl in ["dnnSmfInfoList", "dnnUpfInfoList"] {
                    for d in s.get(dl).and_then(Value::as_array).into_iter().flatten() {
                        out.extend(d.get("dnn").and_then(Value::as_str).map(str::to_owned));
                    }
                }
            }
        }
        for d in info.get("dnnList").and_then(Value::as_array).into_iter().flatten() {
            out.extend(d.as_str().map(str::to_owned));
        }
    }
    out
}

fn tai_key(v: &Value) -> Option<(Plmn, String)> {
    Some((plmn_key(v.get("plmnId")?)?, v.get("tac")?.as_str()?.to_ascii_lowercase()))
}

fn serves_tai(p: &Value, tai: &Value) -> bool {
    let want = tai_key(tai);
    infos(p).iter().any(|i| {
        i.get("taiList")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|t| tai_key(t).is_some() && tai_key(t) == want)
    })
}

/// What the NRF must answer to `q` over `profiles`, in answer order (no limit applied), when it
/// is configured with `nrf_plmns` (`[nrf] plmn_list`).
pub fn expected(profiles: &[Value], q: &Disc, nrf_plmns: &Value) -> Vec<Expected> {
    let nrf_plmns = plmns(Some(nrf_plmns));
    let requester_plmns = match &q.requester_plmns {
        Some(l) => plmns(Some(l)),
        None => nrf_plmns.clone(),
    };
    let target_plmns = match &q.target_plmns {
        Some(l) => plmns(Some(l)),
        None => nrf_plmns.clone(),
    };
    let mut out: Vec<(OrderKey, Expected)> = Vec::new();
    for p in profiles {
        if p["nfType"] != q.target.as_str() || p["nfStatus"] != "REGISTERED" {
            continue;
        }
        if !authorised(p, q, &requester_plmns) {
            continue;
        }
        if !target_plmns.is_empty() {
            // A profile without plmnList is in the NRF's PLMN(s).
            let own = match p.get("plmnList") {
                Some(l) => plmns(Some(l)),
                None => nrf_plmns.clone(),
            };
            if !own.is_empty() && !own.iter().any(|x| target_plmns.contains(x)) {
                continue;
            }
        }
        if let Some(ind) = q.pgw_ind {
            if is_combined_pgw_smf(p) != ind {
                continue;
            }
        }
        if let Some(d) = &q.dnn {
            let listed = dnns(p);
            if !listed.is_empty() && !listed.contains(d) {
                continue;
            }
        }
        if let Some(index) = &q.ipv4_index {
            let found = dnn_upf_items(p).iter().any(|item| {
                q.dnn.as_ref().is_none_or(|d| item["dnn"] == d.as_str())
                    && item
                        .get("ipv4IndexList")
                        .and_then(Value::as_array)
                        .is_some_and(|l| l.contains(index))
            });
            if !found {
                continue;
            }
        }
        let all = merged_services(p);
        let services = if all.is_empty() {
            if !q.services.is_empty() {
                continue;
            }
            None
        } else {
            let kept: BTreeSet<String> = all
                .iter()
                .filter(|(_, s)| authorised(s, q, &requester_plmns))
                .filter(|(_, s)| {
                    q.services.is_empty()
                        || q.services.iter().any(|n| s["serviceName"] == n.as_str())
                })
                .map(|(k, _)| k.clone())
                .collect();
            if kept.is_empty() {
                continue;
            }
            Some(kept)
        };
        let loc_tier = u8::from(
            q.locality
                .as_ref()
                .is_some_and(|l| p.get("locality").and_then(Value::as_str) != Some(l)),
        );
        let tai_tier = u8::from(q.tai.as_ref().is_some_and(|t| !serves_tai(p, t)));
        let num = |k: &str| p.get(k).and_then(Value::as_i64);
        let key = (
            loc_tier,
            tai_tier,
            num("priority").map_or(u32::MAX, |v| v as u32),
            -num("capacity").unwrap_or(0),
            num("load").unwrap_or(0),
            p["nfInstanceId"].as_str().unwrap().to_ascii_lowercase(),
        );
        let id = p["nfInstanceId"].as_str().unwrap().to_owned();
        out.push((key, Expected { id, services, tier: (loc_tier, tai_tier) }));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out.into_iter().map(|(_, e)| e).collect()
}

const AUTHORISATION: [&str; 5] =
    ["allowedPlmns", "allowedSnpns", "allowedNfTypes", "allowedNfDomains", "allowedNssais"];

/// The serviceInstanceIds of a profile as a consumer received it, checking its form: only
/// `nfServiceList` (each key its value's serviceInstanceId) when `map_form`, else only
/// `nfServices`; neither when it has no services. No authorisation attribute anywhere.
pub fn received_services(p: &Value, map_form: bool) -> Result<Option<BTreeSet<String>>, String> {
    let id = p["nfInstanceId"].as_str().unwrap_or("?");
    let list = p.get("nfServices");
    let map = p.get("nfServiceList");
    let mut ids = BTreeSet::new();
    let mut services: Vec<&Value> = Vec::new();
    match (map_form, list, map) {
        (_, None, None) => return Ok(None),
        (true, None, Some(Value::Object(m))) => {
            for (k, s) in m {
                if s["serviceInstanceId"] != k.as_str() {
                    return Err(format!(
                        "{id}: nfServiceList key {k} holds {}",
                        s["serviceInstanceId"]
                    ));
                }
                ids.insert(k.clone());
                services.push(s);
            }
        }
        (false, Some(Value::Array(a)), None) => {
            for s in a {
                let k = s["serviceInstanceId"].as_str().unwrap_or_default().to_owned();
                if !ids.insert(k.clone()) {
                    return Err(format!("{id}: serviceInstanceId {k} twice in nfServices"));
                }
                services.push(s);
            }
        }
        _ => {
            let want = if map_form { "nfServiceList only" } else { "nfServices only" };
            return Err(format!(
                "{id}: services should come as {want}, got nfServices {} and nfServiceList {}",
                list.map_or("absent".into(), Value::to_string),
                map.map_or("absent".into(), Value::to_string)
            ));
        }
    }
    for obj in std::iter::once(p).chain(services) {
        if let Some(a) = AUTHORISATION.iter().find(|a| obj.get(**a).is_some()) {
            return Err(format!("{id}: authorisation attribute {a} answered"));
        }
    }
    Ok(Some(ids))
}

/// Runs NFDiscover for `q`: the SearchResult (status 200 and schema checked).
pub async fn discover(nrf: &TestNrf, q: &Disc) -> Result<Value, String> {
    let r = client().get(&nrf.disc(&q.query())).send().await.unwrap();
    let v = body(&r);
    if r.status() != 200 {
        return Err(format!("status {}: {}", r.status(), String::from_utf8_lossy(r.body())));
    }
    assert_valid("TS29510_Nnrf_NFDiscovery", "SearchResult", &v);
    Ok(v)
}

/// Compares an answer with the oracle's: same profiles in the same order, each with exactly the
/// expected services in the asked form; without preferences (one tier) priorities untouched.
pub fn compare(profiles: &[Value], q: &Disc, nrf_plmns: &Value, v: &Value) -> Result<(), String> {
    let want = expected(profiles, q, nrf_plmns);
    let got = v["nfInstances"].as_array().cloned().unwrap_or_default();
    let got_ids: Vec<&str> =
        got.iter().map(|p| p["nfInstanceId"].as_str().unwrap_or("?")).collect();
    let want_ids: Vec<&str> = want.iter().map(|e| e.id.as_str()).collect();
    if got_ids != want_ids {
        return Err(format!("profiles {got_ids:?}, expected {want_ids:?}"));
    }
    let stored: BTreeMap<&str, &Value> =
        profiles.iter().map(|p| (p["nfInstanceId"].as_str().unwrap(), p)).collect();
    for (p, e) in got.iter().zip(&want) {
        let services = received_services(p, q.service_map())?;
        if services != e.services {
            return Err(format!("{}: services {services:?}, expected {:?}", e.id, e.services));
        }
        if q.locality.is_none() && q.tai.is_none() {
            let s = stored[e.id.as_str()];
            if p.get("priority") != s.get("priority") {
                return Err(format!("{}: priority changed without any preference", e.id));
            }
        }
    }
    Ok(())
}

/// Runs every query against the oracle and fails listing each mismatch with the answer.
pub async fn check_answers(nrf: &TestNrf, profiles: &[Value], nrf_plmns: &Value, queries: &[Disc]) {
    let mut failures = Vec::new();
    for q in queries {
        let outcome = match discover(nrf, q).await {
            Ok(v) => {
                compare(profiles, q, nrf_plmns, &v).map_err(|e| format!("{e}\n    answer: {v}"))
            }
            Err(e) => Err(e),
        };
        if let Err(e) = outcome {
            failures.push(format!("  {}\n    {e}", q.query()));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} discoveries answered otherwise than TS 29.510 asks:\n{}",
        failures.len(),
        queries.len(),
        failures.join("\n")
    );
}

/// The next notification the sink received, or `None` after 5 s (the caller says what it
/// waited for).
pub async fn next_notification(sink: &mut Sink) -> Option<Value> {
    tokio::time::timeout(std::time::Duration::from_secs(5), sink.rx.recv()).await.ok().flatten()
}
