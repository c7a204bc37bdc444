//! The subscriber data a UDR scenario starts with (`[preload.udr]`).
//!
//! Subscriber `i` is the SUPI `imsi-<supi_prefix><supi_first + i, 10 digits>`, the GPSI
//! `msisdn-<gpsi_prefix><same MSIN>` and the IMEI `imei_first + MSIN`, so the `{supi}`, `{gpsi}`
//! and `{imei}` generators name preloaded subscribers. A UDR the kit starts gets them written
//! into its store file before it starts: SLF entries and EIR equipment through `udr::import`
//! (the engine of `fivecore udr import`, fed a CSV generated on the fly), policy data through
//! `udr::policy_data::store::put_profiles` and its subscriptions through
//! `udr::preload::put_subscriptions`, Sh profiles through `udr::sh::data::create` (what a
//! SOAP `CreateShProfile` writes). A UDR given with `--target` gets them over the provisioning
//! API (`/udr-prov/v1`) and `subs-to-notify`, Sh profiles over SOAP, 64 at a time.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use http::Method;
use sbi::client::SbiClient;
use serde::Serialize;
use serde_json::{json, Value};
use tokio::sync::Semaphore;

use crate::engine::progress_bar;
use crate::scenario::{Scenario, UdrKind};
use crate::sched::Rng;

/// The database file of `fivecore udr --data-dir DIR` (crates/fivecore/src/nf.rs).
pub const UDR_STORE_FILE: &str = "udr.db";

const CREATED: &[u16] = &[201];
const PUT_OK: &[u16] = &[200, 201];

/// Profiles per store transaction for policy data (about 50 MB of sm-data) and Sh.
const POLICY_BATCH: u64 = 20_000;

/// The home domain of the Sh users' SIP URIs.
pub const IMS_DOMAIN: &str = "ims.fivecore.local";
/// The S-CSCF serving the Sh users.
const SCSCF: &str = "sip:scscf1.ims.fivecore.local";
/// The SOAP provisioning endpoint and namespace (docs/udr.wsdl).
const SOAP_PATH: &str = "/udr-soap/v1";
const SOAP_NS: &str = "urn:fivecore:udr:provisioning:1";

/// What to preload.
#[derive(Debug, Clone)]
pub struct UdrPlan {
    pub nf: String,
    pub kind: UdrKind,
    pub count: u64,
    /// The last `deletable` subscribers go into `pool` (their SUPI).
    pub deletable: u64,
    pub pool: Option<String>,
    /// Notification sink of the preloaded policy data subscriptions.
    pub subscribe_sim: Option<String>,
    /// Pool of the deletable UEs' subscription ids.
    pub subscription_pool: Option<String>,
    /// Every `subscribe_every`-th UE has a subscription.
    pub subscribe_every: u64,
    /// Every preloaded SUPI goes into `pool`.
    pub pool_all: bool,
    /// Subscribers after the preloaded ones, not written; their SUPIs go into `absent_pool`.
    pub absent: u64,
    pub absent_pool: Option<String>,
    supi_prefix: String,
    msin_first: u64,
    gpsi_prefix: String,
    imei_first: u64,
    seed: u64,
}

/// How the preload went, for the report.
#[derive(Debug, Clone, Serialize, Default)]
pub struct UdrReport {
    pub kind: String,
    pub count: u64,
    /// Policy data subscriptions written with them.
    pub subscriptions: u64,
    /// `store file` (written before the UDR started) or `provisioning API` (over HTTP).
    pub method: String,
    pub seconds: f64,
    /// The UDR's database file afterwards (store file only).
    pub db_mb: Option<f64>,
}

/// A finished preload.
#[derive(Debug, Clone)]
pub struct UdrPreloaded {
    pub plan: UdrPlan,
    pub report: UdrReport,
    /// The SUPIs of the deletable subscribers, for `plan.pool`.
    pub deletable_ids: Vec<String>,
    /// Their subscriptions' ids, for `plan.subscription_pool`.
    pub deletable_subscriptions: Vec<String>,
    /// Policy data: the ETag of each preloaded UE's sm-data (path, ETag), when the scenario
    /// uses entity tags and the kit wrote the store file.
    pub etags: Vec<(String, String)>,
}

impl UdrPlan {
    /// The plan of `s`, with `count` subscribers instead of the scenario's default when given.
    pub fn new(s: &Scenario, count: Option<u64>) -> Result<Option<UdrPlan>> {
        let Some(u) = &s.preload.udr else { return Ok(None) };
        let count = count.unwrap_or_else(|| u.default_count());
        if count < 2 {
            bail!("at least 2 subscribers must be preloaded");
        }
        let deletable = if u.pool.is_some() || u.subscription_pool.is_some() {
            u.deletable.min(count / 4).max(1)
        } else {
            0
        };
        Ok(Some(UdrPlan {
            nf: u.nf.clone(),
            kind: u.kind,
            count,
            deletable,
            pool: u.pool.clone(),
            subscribe_sim: u.subscribe_sim.clone(),
            subscription_pool: u.subscription_pool.clone(),
            subscribe_every: u.subscribe_every,
            pool_all: u.pool_all,
            absent: u.absent,
            absent_pool: u.absent_pool.clone(),
            supi_prefix: s.generators.supi_prefix.clone(),
            msin_first: s.generators.supi_first,
            gpsi_prefix: s.generators.gpsi_prefix.clone(),
            imei_first: s.generators.imei_first,
            seed: s.generators.seed,
        }))
    }

    /// Subscribers `{supi}` draws from: all but the deletable ones.
    pub fn drawn(&self) -> u64 {
        if self.pool_all {
            self.count
        } else {
            self.count - self.deletable
        }
    }

    /// The pool ids of the subscribers left out for the procedures that create them.
    pub fn absent_ids(&self) -> Vec<String> {
        (self.count..self.count + self.absent).map(|i| self.pool_id(i)).collect()
    }

    /// How subscriber `i` is named in a pool: its MSISDN for an Sh profile (the SOAP key),
    /// its SUPI otherwise.
    fn pool_id(&self, i: u64) -> String {
        match self.kind {
            UdrKind::ShProfile => self.sh_msisdn(i),
            _ => self.supi(i),
        }
    }

    /// The MSISDN of Sh user `i`: `<gpsi_prefix><MSIN>`, the digits of its GPSI.
    pub fn sh_msisdn(&self, i: u64) -> String {
        format!("{}{:010}", self.gpsi_prefix, self.msin_first + i)
    }

    /// The Public-Identity an AS names Sh user `i` by.
    pub fn sh_user(&self, i: u64) -> String {
        format!("sip:+{}@{IMS_DOMAIN}", self.sh_msisdn(i))
    }

    /// Sh profile `i`: two public identities (SIP and tel URI) and the MSISDN of one number,
    /// registered at the S-CSCF, with 2 KB of MMTel repository data (Sequence-Number 0):
    /// about 2.2 KB, the reference's T3 profile size.
    pub fn sh_profile(&self, i: u64) -> udr::sh::data::ShProfile {
        use udr::sh::data::{ims_user_state, RepositoryData, ShProfile};
        let msisdn = self.sh_msisdn(i);
        ShProfile {
            public_identities: vec![self.sh_user(i), format!("tel:+{msisdn}")],
            msisdns: vec![msisdn],
            ims_user_state: ims_user_state::REGISTERED,
            scscf_name: Some(SCSCF.into()),
            repository: vec![RepositoryData {
                service_indication: crate::sh::messages::SERVICE_INDICATION.into(),
                sequence_number: 0,
                service_data: crate::sh::messages::mmtel_service_data(i),
            }],
        }
    }

    /// The SOAP `CreateShProfile` call creating Sh profile `i` (docs/udr.wsdl).
    fn sh_create_call(&self, i: u64) -> String {
        let p = self.sh_profile(i);
        let r = &p.repository[0];
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><soapenv:Envelope \
             xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\" xmlns:udr=\"{SOAP_NS}\">\
             <soapenv:Body><udr:CreateShProfile><udr:profile>\
             <udr:publicIdentity>{}</udr:publicIdentity><udr:publicIdentity>{}</udr:publicIdentity>\
             <udr:msisdn>{}</udr:msisdn><udr:imsUserState>REGISTERED</udr:imsUserState>\
             <udr:scscfName>{SCSCF}</udr:scscfName><udr:repositoryData>\
             <udr:serviceIndication>{}</udr:serviceIndication><udr:serviceData>{}</udr:serviceData>\
             </udr:repositoryData></udr:profile></udr:CreateShProfile></soapenv:Body></soapenv:Envelope>",
            p.public_identities[0],
            p.public_identities[1],
            p.msisdns[0],
            r.service_indication,
            r.service_data
        )
    }

    /// The path of UE `supi`'s sm-data (Nudr_DataRepository, TS 29.519).
    pub fn sm_data_path(supi: &str) -> String {
        format!("/nudr-dr/v2/policy-data/ues/{supi}/sm-data")
    }

    pub fn supi(&self, i: u64) -> String {
        format!("imsi-{}{:010}", self.supi_prefix, self.msin_first + i)
    }
    fn gpsi(&self, i: u64) -> String {
        format!("msisdn-{}{:010}", self.gpsi_prefix, self.msin_first + i)
    }
    fn imei(&self, i: u64) -> u64 {
        self.imei_first + self.msin_first + i
    }

    /// SLF: NF groups of subscriber `i` (a few distinct sets, as operators provision them).
    fn slf_groups(i: u64) -> [(&'static str, String); 4] {
        [
            ("UDM", format!("udm-{}", i % 4)),
            ("AUSF", format!("ausf-{}", i % 4)),
            ("PCF", format!("pcf-{}", i % 8)),
            ("CHF", format!("chf-{}", i % 2)),
        ]
    }

    /// EIR: status of equipment `i`.
    fn eir_status(i: u64) -> &'static str {
        if i % 50 == 7 {
            "BLACKLISTED"
        } else if i % 20 == 3 {
            "GREYLISTED"
        } else {
            "WHITELISTED"
        }
    }

    /// The provisioning body of subscriber `i` (SlfEntry, EirImeiEntry or PolicyDataProfile).
    pub fn document(&self, i: u64) -> Value {
        match self.kind {
            UdrKind::Slf => {
                let groups: serde_json::Map<String, Value> =
                    Self::slf_groups(i).into_iter().map(|(t, g)| (t.into(), g.into())).collect();
                json!({"subscriberIds": [self.supi(i), self.gpsi(i)], "nfGroupIds": groups})
            }
            UdrKind::Eir => {
                json!({"imei": format!("{:014}", self.imei(i)), "status": Self::eir_status(i)})
            }
            UdrKind::PolicySmData => json!({"smData": udr::preload::sm_data_document(i)}),
            // Provisioned over SOAP (`sh_create_call`), not as JSON.
            UdrKind::ShProfile => Value::Null,
        }
    }

    /// The PolicyDataSubscription of UE `i`: its sm-data, notified to `sink`.
    fn subscription(&self, i: u64, sink: &str) -> Value {
        json!({
            "notificationUri": format!("{sink}/notify/policy-data"),
            "monitoredResourceUris": [
                format!("http://udr.fivecore.local/nudr-dr/v2/policy-data/ues/{}/sm-data", self.supi(i))
            ],
            "notifId": format!("preload-{i}"),
        })
    }

    fn subscription_id(&self, i: u64) -> String {
        Rng::new(self.seed ^ 0x5b5 ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).uuid()
    }

    fn deletable_ids(&self) -> Vec<String> {
        let first = if self.pool_all { 0 } else { self.count - self.deletable };
        (first..self.count).map(|i| self.pool_id(i)).collect()
    }

    fn deletable_subscriptions(&self, subscribed: bool) -> Vec<String> {
        if !subscribed {
            return Vec::new();
        }
        (self.count - self.deletable..self.count)
            .filter(|i| i % self.subscribe_every == 0)
            .map(|i| self.subscription_id(i))
            .collect()
    }

    fn sink<'a>(&self, sims: &'a [(String, String)]) -> Result<Option<&'a str>> {
        match &self.subscribe_sim {
            None => Ok(None),
            Some(n) => Ok(Some(
                sims.iter().find(|(name, _)| name == n).map(|(_, u)| u.as_str()).with_context(
                    || format!("preload.udr.subscribe_sim {n}: simulator not running"),
                )?,
            )),
        }
    }

    /// Writes the subscribers into the UDR store file at `path` (the UDR is not running yet).
    /// `sims` are the running simulators' names and base URLs.
    /// With `want_etags`, the ETags of the preloaded sm-data are read back.
    pub async fn preload_file(
        &self,
        path: &Path,
        sims: &[(String, String)],
        want_etags: bool,
        progress: bool,
    ) -> Result<UdrPreloaded> {
        let t0 = Instant::now();
        let sink = self.sink(sims)?;
        let cfg =
            store::SqliteConfig { path: path.to_path_buf(), readers: 1, ..Default::default() };
        let db = store::SqliteStore::open(cfg)
            .await
            .with_context(|| format!("opening {}", path.display()))?;
        db.migrate(udr::migrations()).await.with_context(|| format!("{}", path.display()))?;
        let mut subscriptions = 0;
        let mut etags = Vec::new();
        let label = format!("preload {}", kind_name(self.kind));
        let result: Result<()> = async {
            match self.kind {
                UdrKind::Slf | UdrKind::Eir => {
                    let kind = if self.kind == UdrKind::Slf {
                        udr::import::Kind::Slf
                    } else {
                        udr::import::Kind::Eir
                    };
                    let input =
                        std::io::BufReader::with_capacity(1 << 20, GeneratedCsv::new(self.clone()));
                    let opts = udr::import::Options::new(kind, udr::import::Format::Csv);
                    let mut last = Instant::now();
                    let report = udr::import::run(&db, input, opts, |e| {
                        if let udr::import::Event::Progress(p) = e {
                            if progress && last.elapsed() > Duration::from_millis(200) {
                                last = Instant::now();
                                progress_bar(&label, p.rows as usize, self.count as usize);
                            }
                        }
                    })
                    .await?;
                    if report.progress.bad > 0 || report.progress.rows != self.count {
                        bail!(
                            "the import took {} of {} rows ({} bad)",
                            report.progress.rows,
                            self.count,
                            report.progress.bad
                        );
                    }
                }
                UdrKind::ShProfile => {
                    let mut i = 0;
                    while i < self.count {
                        let end = (i + POLICY_BATCH).min(self.count);
                        let profiles = (i..end)
                            .map(|k| {
                                let p = self.sh_profile(k);
                                check_sh_profile(&p).with_context(|| format!("Sh profile {k}"))?;
                                Ok(p)
                            })
                            .collect::<Result<Vec<_>>>()?;
                        db.write(move |tx| {
                            for p in &profiles {
                                udr::sh::data::create(tx, p)?;
                            }
                            Ok(())
                        })
                        .await?;
                        i = end;
                        if progress {
                            progress_bar(&label, i as usize, self.count as usize);
                        }
                    }
                }
                UdrKind::PolicySmData => {
                    let mut i = 0;
                    while i < self.count {
                        let end = (i + POLICY_BATCH).min(self.count);
                        let profiles: Vec<(String, Value)> =
                            (i..end).map(|k| (self.supi(k), self.document(k))).collect();
                        let ids: Vec<String> = profiles.iter().map(|(u, _)| u.clone()).collect();
                        db.write(move |tx| udr::policy_data::store::put_profiles(tx, &profiles))
                            .await?;
                        if want_etags {
                            let tags = udr::preload::sm_data_etags(&db, ids.clone()).await?;
                            for (ue, tag) in ids.into_iter().zip(tags) {
                                let tag = tag.context("a preloaded UE has no sm-data")?;
                                etags.push((Self::sm_data_path(&ue), tag));
                            }
                        }
                        if let Some(sink) = sink {
                            let subs: Vec<(String, Value)> = (i..end)
                                .filter(|k| k % self.subscribe_every == 0)
                                .map(|k| (self.subscription_id(k), self.subscription(k, sink)))
                                .collect();
                            subscriptions += db
                                .write(move |tx| udr::preload::put_subscriptions(tx, &subs))
                                .await? as u64;
                        }
                        i = end;
                        if progress {
                            progress_bar(&label, i as usize, self.count as usize);
                        }
                    }
                }
            }
            Ok(())
        }
        .await;
        if let Err(e) = db.close().await {
            eprintln!("closing {}: {e}", path.display());
        }
        if progress {
            eprintln!();
        }
        result.with_context(|| format!("preloading {}", path.display()))?;
        let db_bytes: u64 = ["", "-wal"]
            .iter()
            .filter_map(|ext| {
                std::fs::metadata(format!("{}{ext}", path.display())).ok().map(|m| m.len())
            })
            .sum();
        Ok(UdrPreloaded {
            plan: self.clone(),
            report: UdrReport {
                kind: kind_name(self.kind).into(),
                count: self.count,
                subscriptions,
                method: "store file".into(),
                seconds: t0.elapsed().as_secs_f64(),
                db_mb: Some(db_bytes as f64 / 1_048_576.0),
            },
            deletable_ids: self.deletable_ids(),
            deletable_subscriptions: self.deletable_subscriptions(sink.is_some()),
            etags,
        })
    }

    /// Provisions the subscribers over `/udr-prov/v1` of the UDR at `base` (one the kit did not
    /// start), and the policy data subscriptions over `subs-to-notify`.
    pub async fn preload_http(
        &self,
        base: &str,
        client: &SbiClient,
        sims: &[(String, String)],
        progress: bool,
    ) -> Result<UdrPreloaded> {
        let t0 = Instant::now();
        let sink = self.sink(sims)?.map(str::to_owned);
        let sem = Arc::new(Semaphore::new(64));
        let mut set = tokio::task::JoinSet::new();
        let label = format!("preload {}", kind_name(self.kind));
        let per = if sink.is_some() { 2 } else { 1 };
        let total = self.count * per;
        let mut done = 0u64;
        let mut first_err: Option<anyhow::Error> = None;
        let mut subs_ids = Vec::new();
        for i in 0..self.count {
            let mut jobs = vec![match self.kind {
                UdrKind::Slf => (Method::POST, format!("{base}/udr-prov/v1/slf-entries"), CREATED),
                UdrKind::Eir => (Method::POST, format!("{base}/udr-prov/v1/eir/imeis"), CREATED),
                // Created, or replaced (a UDR that already holds the UE).
                UdrKind::PolicySmData => (
                    Method::PUT,
                    format!("{base}/udr-prov/v1/policy-data/ues/{}", self.supi(i)),
                    PUT_OK,
                ),
                // A SOAP answer is 200, a fault 500.
                UdrKind::ShProfile => (Method::POST, format!("{base}{SOAP_PATH}"), SOAP_OK),
            }];
            let mut bodies = vec![match self.kind {
                UdrKind::ShProfile => Body::Soap(self.sh_create_call(i)),
                _ => Body::Json(self.document(i)),
            }];
            if let Some(sink) = sink.as_ref().filter(|_| i % self.subscribe_every == 0) {
                jobs.push((
                    Method::POST,
                    format!("{base}/nudr-dr/v2/policy-data/subs-to-notify"),
                    CREATED,
                ));
                bodies.push(Body::Json(self.subscription(i, sink)));
            }
            let deletable = i >= self.count - self.deletable;
            for (j, ((method, url, want), body)) in jobs.into_iter().zip(bodies).enumerate() {
                // The subscription of a deletable UE: its id goes into the subscription pool.
                let keep = deletable && j == 1;
                let permit = sem.clone().acquire_owned().await?;
                let client = client.clone();
                let (body, content_type, soap_action) = match body {
                    Body::Json(v) => (serde_json::to_vec(&v)?, "application/json", None),
                    Body::Soap(xml) => (
                        xml.into_bytes(),
                        "text/xml; charset=utf-8",
                        Some(format!("\"{SOAP_NS}/CreateShProfile\"")),
                    ),
                };
                set.spawn(async move {
                    let _permit = permit;
                    let mut b = client.request(method, &url).header("content-type", content_type);
                    if let Some(a) = soap_action {
                        b = b.header("soapaction", a);
                    }
                    let r = b.body(body).send().await;
                    match r {
                        Ok(r) if want.contains(&r.status().as_u16()) => Ok(keep
                            .then(|| r.header("location").and_then(|l| l.rsplit('/').next()))
                            .flatten()
                            .map(str::to_owned)),
                        Ok(r) => Err(anyhow::anyhow!(
                            "preload: {url} answered {}: {}",
                            r.status(),
                            String::from_utf8_lossy(r.body())
                        )),
                        Err(e) => Err(anyhow::anyhow!("preload: {url}: {e}")),
                    }
                });
            }
            while let Some(r) = set.try_join_next() {
                done += 1;
                match r? {
                    Ok(id) => subs_ids.extend(id),
                    Err(e) => {
                        first_err.get_or_insert(e);
                    }
                }
            }
            if first_err.is_some() {
                break;
            }
            if progress && i % 1000 == 0 {
                progress_bar(&label, done as usize, total as usize);
            }
        }
        while let Some(r) = set.join_next().await {
            match r? {
                Ok(id) => subs_ids.extend(id),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        if progress {
            progress_bar(&label, total as usize, total as usize);
            eprintln!();
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        Ok(UdrPreloaded {
            plan: self.clone(),
            report: UdrReport {
                kind: kind_name(self.kind).into(),
                count: self.count,
                subscriptions: if sink.is_some() {
                    self.count.div_ceil(self.subscribe_every)
                } else {
                    0
                },
                method: "provisioning API".into(),
                seconds: t0.elapsed().as_secs_f64(),
                db_mb: None,
            },
            deletable_ids: self.deletable_ids(),
            deletable_subscriptions: subs_ids,
            etags: Vec::new(),
        })
    }
}

fn kind_name(k: UdrKind) -> &'static str {
    match k {
        UdrKind::Slf => "SLF entries",
        UdrKind::Eir => "EIR equipment",
        UdrKind::PolicySmData => "policy data UEs",
        UdrKind::ShProfile => "Sh profiles",
    }
}

const SOAP_OK: &[u16] = &[200];

/// A provisioning request's body.
enum Body {
    Json(Value),
    Soap(String),
}

/// What a SOAP `CreateShProfile` checks before it writes (crates/udr/src/soap/sh.rs): the
/// profile's fields, and each ServiceData self-contained XML within the UDR's default
/// `max_repository_data_bytes`.
fn check_sh_profile(p: &udr::sh::data::ShProfile) -> Result<()> {
    p.check().map_err(|e| anyhow::anyhow!("{}: {}", e.field, e.reason))?;
    let max = udr::sh::config::ShConfig::default().max_repository_data_bytes;
    for r in &p.repository {
        udr::sh::xml::check_fragment(&r.service_data)
            .map_err(|e| anyhow::anyhow!("serviceData: {e}"))?;
        if r.service_data.len() > max {
            bail!("serviceData: {} bytes, more than {max}", r.service_data.len());
        }
    }
    Ok(())
}

/// The CSV `fivecore udr import` reads (docs/udr.md "Formats"), generated row by row.
struct GeneratedCsv {
    plan: UdrPlan,
    next: u64,
    header: bool,
    buf: Vec<u8>,
    pos: usize,
}

impl GeneratedCsv {
    fn new(plan: UdrPlan) -> Self {
        GeneratedCsv { plan, next: 0, header: false, buf: Vec::with_capacity(1 << 16), pos: 0 }
    }

    fn fill(&mut self) {
        use std::fmt::Write as _;
        self.buf.clear();
        self.pos = 0;
        let mut s = String::with_capacity(1 << 16);
        if !self.header {
            self.header = true;
            s.push_str(match self.plan.kind {
                UdrKind::Slf => "subscriberIds,UDM,AUSF,PCF,CHF\n",
                _ => "imei,status\n",
            });
        }
        while s.len() < 60_000 && self.next < self.plan.count {
            let i = self.next;
            self.next += 1;
            let _ = match self.plan.kind {
                UdrKind::Slf => {
                    let g = UdrPlan::slf_groups(i);
                    writeln!(
                        s,
                        "{};{},{},{},{},{}",
                        self.plan.supi(i),
                        self.plan.gpsi(i),
                        g[0].1,
                        g[1].1,
                        g[2].1,
                        g[3].1
                    )
                }
                _ => writeln!(s, "{:014},{}", self.plan.imei(i), UdrPlan::eir_status(i)),
            };
        }
        self.buf = s.into_bytes();
    }
}

impl Read for GeneratedCsv {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.pos >= self.buf.len() {
            self.fill();
        }
        let n = out.len().min(self.buf.len() - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_csv_has_a_header_and_every_row() {
        let mut s = Scenario::load("udr-t1-slf-24.2k").unwrap();
        s.preload.udr.as_mut().unwrap().deletable = 2;
        let plan = UdrPlan::new(&s, Some(10)).unwrap().unwrap();
        let mut text = String::new();
        GeneratedCsv::new(plan.clone()).read_to_string(&mut text).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 11);
        assert_eq!(lines[1], "imsi-001010000000000;msisdn-330000000000,udm-0,ausf-0,pcf-0,chf-0");
        assert_eq!(plan.deletable_ids(), ["imsi-001010000000008", "imsi-001010000000009"]);
        assert_eq!(plan.drawn(), 8);
    }

    #[test]
    fn sh_profiles_are_valid_two_kilobyte_profiles_named_by_msisdn_in_the_pools() {
        let plan = UdrPlan::new(&Scenario::load("udr-t3-sh-25k-soap-2k").unwrap(), Some(8))
            .unwrap()
            .unwrap();
        assert_eq!((plan.drawn(), plan.deletable), (6, 2), "a quarter is the SOAP range");
        assert_eq!(plan.deletable_ids(), ["330000000006", "330000000007"]);
        assert_eq!(plan.absent_ids()[0], "330000000008");
        assert_eq!(plan.sh_user(5), "sip:+330000000005@ims.fivecore.local");
        let p = plan.sh_profile(5);
        check_sh_profile(&p).unwrap();
        assert_eq!(p.msisdns, ["330000000005"]);
        let size: usize =
            p.public_identities.iter().chain(&p.msisdns).map(String::len).sum::<usize>()
                + p.scscf_name.as_deref().map_or(0, str::len)
                + p.repository
                    .iter()
                    .map(|r| r.service_indication.len() + r.service_data.len())
                    .sum::<usize>();
        assert!((2100..2300).contains(&size), "{size} bytes: the reference's 2.2 KB");
        // The --target preload's SOAP call is well-formed and carries the same profile.
        let call = plan.sh_create_call(5);
        let root = udr::sh::xml::parse(&call).unwrap();
        let create = &root.child("Body").unwrap().children[0];
        assert_eq!(create.name, "CreateShProfile");
        assert!(call.contains(&p.repository[0].service_data));
    }
}
