//! The subscriber data a UDR scenario starts with (`[preload.udr]`).
//!
//! Subscriber `i` is the SUPI `imsi-<supi_prefix><supi_first + i, 10 digits>`, the GPSI
//! `msisdn-<gpsi_prefix><same MSIN>` and the IMEI `imei_first + MSIN`, so the `{supi}`, `{gpsi}`
//! and `{imei}` generators name preloaded subscribers. A UDR the kit starts gets them from its
//! own bulk-load command, `fivecore udr import`, run on the UDR's data directory before the UDR
//! starts (crate::bulk_load), fed rows the kit generates on the fly: SLF entries and EIR
//! equipment as CSV (`--kind slf|eir`), policy data as JSON lines (`--kind policy`: SM data, or
//! AM data and a UE policy set) and then its subscriptions (`--kind policy-subscriptions`), Sh
//! profiles as JSON lines (`--kind sh`).
//! A UDR given with `--target` gets them over the provisioning API (`/udr-prov/v1`) and
//! `subs-to-notify`, Sh profiles over SOAP, 64 at a time. Either way, the ETags of the
//! preloaded sm-data are then read over Nudr_DataRepository, as a PCF that had read the data
//! would hold them ([`UdrPreloaded::read_etags`]).

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::Read;
use std::path::Path;
use std::sync::{Arc, LazyLock};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use http::Method;
use sbi::client::SbiClient;
use serde::Serialize;
use serde_json::{json, Value};
use tokio::sync::Semaphore;

use crate::bindings::push_json_text;
use crate::bulk_load;
use crate::engine::progress_bar;
use crate::scenario::{Scenario, UdrKind};
use crate::sched::Rng;

const CREATED: &[u16] = &[201];
const PUT_OK: &[u16] = &[200, 201];

/// The method of a preload by the UDR's own bulk-load command, as the report names it.
pub const IMPORT_COMMAND: &str = "fivecore udr import";

/// Requests in flight while the ETags of the preloaded sm-data are read.
const ETAG_STREAMS: usize = 64;

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
    /// `fivecore udr import` (the UDR's bulk-load command, run before the UDR started) or
    /// `provisioning API` (over HTTP).
    pub method: String,
    /// Wall seconds of the preload (every import it ran, or every provisioning request).
    pub seconds: f64,
    /// The UDR's database files afterwards (bulk-load command only: the files in its data
    /// directory, as the kit sees them before the UDR starts).
    pub db_mb: Option<f64>,
    /// Seconds spent reading the preloaded sm-data's ETags over the wire (scenarios with
    /// entity tags only), before the load starts.
    pub etag_read_seconds: Option<f64>,
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
    /// uses entity tags; read over the wire once the UDR is up ([`UdrPreloaded::read_etags`]).
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
    pub fn sh_profile(&self, i: u64) -> ShProfile {
        let msisdn = self.sh_msisdn(i);
        ShProfile {
            public_identities: vec![self.sh_user(i), format!("tel:+{msisdn}")],
            msisdns: vec![msisdn],
            ims_user_state: "REGISTERED",
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
            UdrKind::PolicySmData => json!({"smData": sm_data_document(i)}),
            UdrKind::PolicyAmUeData => {
                json!({"amData": self.am_data(i), "uePolicySet": self.ue_policy_set(i)})
            }
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

    /// The `--kind policy-subscriptions` line of UE `i`: `{"subsId":…,"subscription":{…}}`.
    fn subscription_line(&self, i: u64, sink: &str) -> Value {
        json!({"subsId": self.subscription_id(i), "subscription": self.subscription(i, sink)})
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

    /// Preloads the subscribers with `<exe> udr import` on the data directory `data_dir` of a
    /// UDR that is not running yet, `config` being the configuration file the UDR will be
    /// started with; `sims` are the running simulators' names and base URLs (the policy data
    /// subscriptions' notification sink). Every row must be imported: a skipped one fails the
    /// run, since the procedures name subscribers by index.
    pub async fn preload_command(
        &self,
        exe: &Path,
        data_dir: &Path,
        config: Option<&Path>,
        sims: &[(String, String)],
        progress: bool,
    ) -> Result<UdrPreloaded> {
        let t0 = Instant::now();
        let sink = self.sink(sims)?.map(str::to_owned);
        let import = |kind: &str, format: &str| {
            let mut args: Vec<OsString> =
                ["udr", "import", "--kind", kind, "--format", format].map(OsString::from).to_vec();
            args.push("--data-dir".into());
            args.push(data_dir.into());
            if let Some(c) = config {
                args.push("--config".into());
                args.push(c.into());
            }
            args.extend(["--on-bad-row", "stop", "-"].map(OsString::from));
            args
        };
        if progress {
            eprintln!(
                "preload {}: {IMPORT_COMMAND} --kind {}",
                kind_name(self.kind),
                self.import_kind()
            );
        }
        let plan = self.clone();
        match self.kind {
            UdrKind::Slf | UdrKind::Eir => {
                let args = import(self.import_kind(), "csv");
                run_import(exe, &args, self.count, progress, move |w| {
                    std::io::copy(&mut GeneratedCsv::new(plan), w).map(|_| ())
                })
                .await?;
            }
            UdrKind::ShProfile => {
                let args = import(self.import_kind(), "jsonl");
                run_import(exe, &args, self.count, progress, move |w| {
                    for i in 0..plan.count {
                        serde_json::to_writer(&mut *w, &plan.sh_profile(i))?;
                        w.write_all(b"\n")?;
                    }
                    Ok(())
                })
                .await?;
            }
            UdrKind::PolicySmData => {
                let args = import(self.import_kind(), "jsonl");
                run_import(exe, &args, self.count, progress, move |w| {
                    let mut line = String::with_capacity(4096);
                    for i in 0..plan.count {
                        line.clear();
                        plan.push_policy_line(i, &mut line);
                        w.write_all(line.as_bytes())?;
                    }
                    Ok(())
                })
                .await?;
            }
            UdrKind::PolicyAmUeData => {
                let args = import(self.import_kind(), "jsonl");
                run_import(exe, &args, self.count, progress, move |w| {
                    for i in 0..plan.count {
                        serde_json::to_writer(&mut *w, &plan.am_ue_policy_line(i))?;
                        w.write_all(b"\n")?;
                    }
                    Ok(())
                })
                .await?;
            }
        }
        let mut subscriptions = 0;
        if let Some(sink) = sink.clone() {
            if progress {
                eprintln!(
                    "preload policy data subscriptions: {IMPORT_COMMAND} --kind policy-subscriptions"
                );
            }
            subscriptions = self.count.div_ceil(self.subscribe_every);
            let args = import("policy-subscriptions", "jsonl");
            let plan = self.clone();
            run_import(exe, &args, subscriptions, progress, move |w| {
                for i in (0..plan.count).step_by(plan.subscribe_every as usize) {
                    serde_json::to_writer(&mut *w, &plan.subscription_line(i, &sink))?;
                    w.write_all(b"\n")?;
                }
                Ok(())
            })
            .await?;
        }
        Ok(UdrPreloaded {
            plan: self.clone(),
            report: UdrReport {
                kind: kind_name(self.kind).into(),
                count: self.count,
                subscriptions,
                method: IMPORT_COMMAND.into(),
                seconds: t0.elapsed().as_secs_f64(),
                db_mb: Some(dir_bytes(data_dir) as f64 / 1_048_576.0),
                etag_read_seconds: None,
            },
            deletable_ids: self.deletable_ids(),
            deletable_subscriptions: self.deletable_subscriptions(sink.is_some()),
            etags: Vec::new(),
        })
    }

    /// The `--kind` of `fivecore udr import` for this plan's data.
    fn import_kind(&self) -> &'static str {
        match self.kind {
            UdrKind::Slf => "slf",
            UdrKind::Eir => "eir",
            UdrKind::PolicySmData | UdrKind::PolicyAmUeData => "policy",
            UdrKind::ShProfile => "sh",
        }
    }

    /// The `--kind policy` line of UE `i`: `{"ueId":"imsi-…","smData":{…}}` and a newline, its
    /// 2.5 KB sm-data copied from a template (a million lines, no value per line).
    fn push_policy_line(&self, i: u64, out: &mut String) {
        out.push_str("{\"ueId\":\"imsi-");
        push_json_text(out, &self.supi_prefix);
        let _ = write!(out, "{:010}\",\"smData\":", self.msin_first + i);
        let [head, tail] = &*SM_DATA_TEMPLATE;
        out.push_str(head);
        let _ = write!(out, "{i}");
        out.push_str(tail);
        out.push_str("}\n");
    }

    /// The AmPolicyData (TS 29.519) of UE `i`, about 180 bytes: its subscription category and
    /// a UE-dedicated presence reporting area of two tracking areas of the home PLMN (TAC
    /// 000001, where the AMF's requests place the UE, and 000002). The kit's own test data, as
    /// [`UdrPlan::ue_policy_set`]: the reference publishes neither.
    pub fn am_data(&self, i: u64) -> Value {
        let (mcc, mnc) = self.home_plmn();
        let plmn = json!({"mcc": mcc, "mnc": mnc});
        json!({"subscCats": [subsc_cat(i)],
            "praInfos": {"1": {"praId": "1", "trackingAreaList": [
                {"plmnId": plmn, "tac": "000001"}, {"plmnId": plmn, "tac": "000002"}]}}})
    }

    /// The UePolicySet (TS 29.519) of UE `i`, about 410 bytes (540 for an enterprise UE): its subscription category
    /// (as its AM data), the route selection descriptors its subscription allows in the home
    /// PLMN (`internet` and `ims` on slice 1-000001), its equipment (`pei`, the `{imei}` the
    /// AMF's requests carry for the same UE) and OS, no ANDSP. Every
    /// [`ENTERPRISE_EVERY`]-th UE is an enterprise subscriber: `enterpriseDnn` names its DNN
    /// (one of `corp1`..`corp50`, the High project's `enterprise_dnns` list), allowed on
    /// slice 2. `enterpriseDnn` is not a TS 29.519 attribute: it is the operator's own, which
    /// the High project's UE rule `enterprise-ursp` reads (`subscriber.enterpriseDnn`) to add a
    /// URSP rule steering that DNN to slice 2; UePolicySet is extensible (its schema allows
    /// other members), so the UDR keeps and serves it.
    pub fn ue_policy_set(&self, i: u64) -> Value {
        let (mcc, mnc) = self.home_plmn();
        let plmn = json!({"mcc": mcc, "mnc": mnc});
        // TS 29.571 PlmnId as a map key: MCC, "-", MNC.
        let key = format!("{mcc}-{mnc}");
        let dnn = |name: &str, types: &str| json!({"dnn": name, "sscModes": ["SSC_MODE_1"], "pduSessTypes": [types]});
        let mut slices = vec![json!({"snssai": {"sst": 1, "sd": "000001"},
            "dnnRouteSelDescs": [dnn("internet", "IPV4V6"), dnn("ims", "IPV4V6")]})];
        let enterprise = enterprise_dnn(i);
        if let Some(corp) = &enterprise {
            slices.push(json!({"snssai": {"sst": 2}, "dnnRouteSelDescs": [dnn(corp, "IPV4")]}));
        }
        let mut set = json!({
            "subscCats": [subsc_cat(i)],
            "allowedRouteSelDescs": {key: {"servingPlmn": plmn, "snssaiRouteSelDescs": slices}},
            "andspInd": false,
            "pei": format!("imei-{:014}0", self.imei(i)),
            "osIds": [OS_IDS[(i % OS_IDS.len() as u64) as usize]],
        });
        if let Some(corp) = enterprise {
            set["enterpriseDnn"] = corp.into();
        }
        set
    }

    /// The home PLMN of the UEs, from the SUPI prefix: the MCC, then the MNC (2 or 3 digits).
    fn home_plmn(&self) -> (&str, &str) {
        self.supi_prefix.split_at(3.min(self.supi_prefix.len()))
    }

    /// The `--kind policy` line of UE `i` for AM and UE policy: `{"ueId":"imsi-…",
    /// "amData":{…},"uePolicySet":{…}}` (a PolicyDataProfile and its UE, docs/udr.md).
    fn am_ue_policy_line(&self, i: u64) -> Value {
        let mut line = self.document(i);
        line["ueId"] = self.supi(i).into();
        line
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
                UdrKind::PolicySmData | UdrKind::PolicyAmUeData => (
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
                etag_read_seconds: None,
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
        UdrKind::PolicyAmUeData => "policy data UEs (AM data, UE policy set)",
        UdrKind::ShProfile => "Sh profiles",
    }
}

const SOAP_OK: &[u16] = &[200];

/// A provisioning request's body.
enum Body {
    Json(Value),
    Soap(String),
}

/// Runs one `fivecore udr import` fed by `feed` and checks that it imported `rows` rows: exit
/// 0 (3 means rows were skipped, 1 that it failed) and the row count of its summary line.
async fn run_import<F>(
    exe: &Path,
    args: &[OsString],
    rows: u64,
    progress: bool,
    feed: F,
) -> Result<()>
where
    F: FnOnce(&mut dyn std::io::Write) -> std::io::Result<()> + Send + 'static,
{
    let done = bulk_load::run(exe, args, progress, feed).await?;
    let shown = bulk_load::command_line(exe, args);
    if done.code() != 0 {
        return Err(bulk_load::failure(&format!("`{shown}`"), &done));
    }
    match imported_rows(&done.stdout) {
        Some(n) if n == rows => Ok(()),
        Some(n) => bail!("`{shown}` imported {n} rows of {rows}"),
        None => Err(bulk_load::failure(&format!("`{shown}` printed no summary; it"), &done)),
    }
}

/// The row count of the JSON summary line `fivecore udr import` prints on stdout
/// (`{"rows":1000,"bad":0,...}`).
fn imported_rows(stdout: &str) -> Option<u64> {
    let line = stdout.lines().rev().find(|l| l.trim_start().starts_with('{'))?;
    serde_json::from_str::<Value>(line).ok()?.get("rows")?.as_u64()
}

/// The bytes of the files in `dir` (the UDR's database and its companions).
fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// An Sh profile as `fivecore udr import --kind sh` reads it (one JSON line), the content of a
/// SOAP `CreateShProfile` (docs/udr.md).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShProfile {
    pub public_identities: Vec<String>,
    pub msisdns: Vec<String>,
    /// TS 29.328 IMS-User-State name.
    pub ims_user_state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scscf_name: Option<String>,
    #[serde(rename = "repositoryData")]
    pub repository: Vec<RepositoryData>,
}

/// One Service-Indication's transparent data (TS 29.328 RepositoryData).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RepositoryData {
    pub service_indication: String,
    pub sequence_number: u16,
    /// Self-contained XML.
    pub service_data: String,
}

/// About 2.5 KB of SmPolicyData (TS 29.519), the size of the reference's T4b/T4c profile: one
/// S-NSSAI with three DNNs (PRA, CHF, BDT references), a usage monitoring limit and its data,
/// `volume` being the allowed total volume. The scenario's test data, so the kit's own.
pub fn sm_data_document(volume: u64) -> Value {
    let dnn = |name: &str| {
        json!({"dnn": name, "allowedServices": ["svc-a", "svc-b", "svc-c"], "subscCats": ["gold", "silver"],
            "gbrUl": "100 Mbps", "gbrDl": "200 Mbps", "adcSupport": true, "subscSpendingLimits": true,
            "ipv4Index": 1, "ipv6Index": 2, "offline": true, "online": false,
            "chfInfo": {"primaryChfAddress": "http://chf1.operator.example.com:8080",
                "secondaryChfAddress": "http://chf2.operator.example.com:8080"},
            "refUmDataLimitIds": {"lim1": {"limitId": "lim1", "monkey": ["mk1", "mk2"]}},
            "praInfos": {"pra1": {"praId": "pra1", "presenceState": "IN_AREA", "trackingAreaList": [
                {"plmnId": {"mcc": "001", "mnc": "01"}, "tac": "000001"},
                {"plmnId": {"mcc": "001", "mnc": "01"}, "tac": "000002"}]}},
            "bdtRefIds": {"b1": "bdt-ref-0001"}, "locRoutNotAllowed": false})
    };
    json!({"smPolicySnssaiData": {"1-000001": {"snssai": {"sst": 1, "sd": "000001"},
            "smPolicyDnnData": {"internet": dnn("internet"), "ims": dnn("ims"), "mms": dnn("mms")}}},
        "umDataLimits": {"lim1": {"limitId": "lim1", "umLevel": "SESSION_LEVEL",
            "startDate": "2024-01-01T00:00:00Z", "endDate": "2034-01-01T00:00:00Z",
            "usageLimit": {"totalVolume": 100000000000u64, "uplinkVolume": 50000000000u64},
            "resetPeriod": {"period": "MONTHLY"}}},
        "umData": {"lim1": {"limitId": "lim1", "umLevel": "SESSION_LEVEL",
            "allowedUsage": {"totalVolume": volume}, "resetTime": "2030-01-01T00:00:00Z"}}})
}

/// The subscription categories of the AM and UE policy data, one per UE in turn.
const SUBSC_CATS: [&str; 3] = ["gold", "silver", "bronze"];

fn subsc_cat(i: u64) -> &'static str {
    SUBSC_CATS[(i % SUBSC_CATS.len() as u64) as usize]
}

/// One UE in this many is an enterprise subscriber (the reference says nothing of its
/// subscribers; a tenth is the kit's choice, so the High project's enterprise URSP rule fires
/// for some UEs and not others).
pub const ENTERPRISE_EVERY: u64 = 10;

/// The enterprise DNNs, `corp1`..`corp50`: the entries of the High project's
/// `lists/enterprise_dnns.txt`.
const ENTERPRISE_DNNS: u64 = 50;

/// The enterprise DNN of UE `i`, when it is an enterprise subscriber.
fn enterprise_dnn(i: u64) -> Option<String> {
    i.is_multiple_of(ENTERPRISE_EVERY)
        .then(|| format!("corp{}", (i / ENTERPRISE_EVERY) % ENTERPRISE_DNNS + 1))
}

/// The UEs' operating systems (TS 29.519 OsId, a UUID): two of the kit's own, in turn.
const OS_IDS: [&str; 2] =
    ["5b0e8e2c-4f3a-4d7e-9a61-2c7f0b3d9e01", "5b0e8e2c-4f3a-4d7e-9a61-2c7f0b3d9e02"];

/// [`sm_data_document`] serialized once, split where its volume goes.
static SM_DATA_TEMPLATE: LazyLock<[String; 2]> = LazyLock::new(|| {
    const MARK: u64 = 918_273_645_546_372_819;
    let text = sm_data_document(MARK).to_string();
    let (head, tail) = text.split_once(&MARK.to_string()).expect("the volume is in the document");
    [head.to_owned(), tail.to_owned()]
});

impl UdrPreloaded {
    /// Reads the ETag of every preloaded UE's sm-data from the UDR at `base` (`GET
    /// …/policy-data/ues/{ueId}/sm-data`, 64 requests in flight), as a PCF that had read the
    /// data would hold them: the load's conditional requests start from the UDR's own tags.
    /// Done once the UDR is up and before the measured window.
    pub async fn read_etags(
        &mut self,
        base: &str,
        client: &SbiClient,
        progress: bool,
    ) -> Result<()> {
        let t0 = Instant::now();
        let count = self.plan.count;
        let label = "read sm-data ETags";
        let sem = Arc::new(Semaphore::new(ETAG_STREAMS));
        let mut set = tokio::task::JoinSet::new();
        let mut tags = Vec::with_capacity(count as usize);
        let mut first_err: Option<anyhow::Error> = None;
        let keep = |r: Result<(String, String)>, tags: &mut Vec<_>, e: &mut Option<_>| match r {
            Ok(t) => tags.push(t),
            Err(x) => {
                e.get_or_insert(x);
            }
        };
        for i in 0..count {
            let permit = sem.clone().acquire_owned().await?;
            let path = UdrPlan::sm_data_path(&self.plan.supi(i));
            let (client, url) = (client.clone(), format!("{base}{path}"));
            set.spawn(async move {
                let _permit = permit;
                let r = client.get(&url).send().await.map_err(|e| anyhow::anyhow!("{url}: {e}"))?;
                if r.status() != 200 {
                    bail!("{url} answered {}: {}", r.status(), String::from_utf8_lossy(r.body()));
                }
                let tag = r.header("etag").with_context(|| format!("{url}: no ETag"))?;
                Ok((path, tag.to_owned()))
            });
            while let Some(r) = set.try_join_next() {
                keep(r?, &mut tags, &mut first_err);
            }
            if first_err.is_some() {
                break;
            }
            if progress && i % 1000 == 0 {
                progress_bar(label, tags.len(), count as usize);
            }
        }
        while let Some(r) = set.join_next().await {
            keep(r?, &mut tags, &mut first_err);
        }
        if progress {
            progress_bar(label, tags.len(), count as usize);
            eprintln!();
        }
        if let Some(e) = first_err {
            return Err(e.context("reading the preloaded sm-data's ETags"));
        }
        self.etags = tags;
        self.report.etag_read_seconds = Some(t0.elapsed().as_secs_f64());
        Ok(())
    }
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
        assert_eq!(p.msisdns, ["330000000005"]);
        let size: usize =
            p.public_identities.iter().chain(&p.msisdns).map(String::len).sum::<usize>()
                + p.scscf_name.as_deref().map_or(0, str::len)
                + p.repository
                    .iter()
                    .map(|r| r.service_indication.len() + r.service_data.len())
                    .sum::<usize>();
        assert!((2100..2300).contains(&size), "{size} bytes: the reference's 2.2 KB");
        // The `--kind sh` line: the import contract's members, the service data
        // self-contained XML within the UDR's default max_repository_data_bytes (16384).
        let line: Value = serde_json::to_value(&p).unwrap();
        assert_eq!(
            line,
            json!({"publicIdentities": ["sip:+330000000005@ims.fivecore.local", "tel:+330000000005"],
                "msisdns": ["330000000005"], "imsUserState": "REGISTERED",
                "scscfName": "sip:scscf1.ims.fivecore.local",
                "repositoryData": [{"serviceIndication": "mmtel", "sequenceNumber": 0,
                    "serviceData": p.repository[0].service_data}]})
        );
        let data = &p.repository[0].service_data;
        assert!(data.len() <= 16384);
        assert_eq!(crate::xml_check::elements(data).unwrap()[0].name, "simservs");
        // The --target preload's SOAP call is well-formed and carries the same profile.
        let call = plan.sh_create_call(5);
        let elements = crate::xml_check::elements(&call).unwrap();
        let create = elements.iter().find(|e| e.depth == 2).unwrap();
        assert_eq!((elements[1].name.as_str(), create.name.as_str()), ("Body", "CreateShProfile"));
        assert!(call.contains(data.as_str()));
    }

    /// `--kind policy` lines: the UE and its 2.5 KB sm-data, which differs per UE by its
    /// allowed volume; the subscriptions monitor that UE's sm-data at the sink.
    #[test]
    fn policy_lines_follow_the_import_contract() {
        let plan = UdrPlan::new(&Scenario::load("udr-t4c-policy-17.2k").unwrap(), Some(10))
            .unwrap()
            .unwrap();
        let mut buf = String::new();
        for i in 0..10 {
            plan.push_policy_line(i, &mut buf);
        }
        for (i, line) in buf.split_terminator('\n').enumerate() {
            let v: Value = serde_json::from_str(line).unwrap();
            assert_eq!(v.as_object().unwrap().len(), 2, "{line}");
            assert_eq!(v["ueId"], plan.supi(i as u64));
            assert_eq!(v["smData"], sm_data_document(i as u64));
            assert_eq!(v["smData"]["umData"]["lim1"]["allowedUsage"]["totalVolume"], i as u64);
        }
        let len = sm_data_document(1).to_string().len();
        assert!((2000..3200).contains(&len), "{len} bytes");
        let sub = plan.subscription_line(4, "http://127.0.0.1:9");
        assert_eq!(sub["subsId"], plan.subscription_id(4));
        assert_eq!(sub["subscription"]["notificationUri"], "http://127.0.0.1:9/notify/policy-data");
        let uri = sub["subscription"]["monitoredResourceUris"][0].as_str().unwrap();
        assert!(uri.ends_with(&UdrPlan::sm_data_path(&plan.supi(4))), "{uri}");
        assert_eq!(plan.subscription_id(4), plan.subscription_id(4), "named without reading back");
        assert_ne!(plan.subscription_id(4), plan.subscription_id(5));
    }

    /// `--kind policy` lines of the AM/UE scenarios: the UE with its AmPolicyData and its
    /// UePolicySet, both valid against TS 29.519; an enterprise UE's DNN is one the High
    /// project's UE rule lists, allowed on slice 2; the UE's equipment is the `{imei}` the
    /// AMF's requests carry for it. The `--target` body is the same profile without the UE.
    #[test]
    fn am_ue_policy_lines_follow_the_import_contract_and_ts_29_519() {
        let s = Scenario::load("pcf-am-ue-30k").unwrap();
        assert_eq!(s.preload.udr.as_ref().unwrap().kind, UdrKind::PolicyAmUeData);
        let plan = UdrPlan::new(&s, Some(40)).unwrap().unwrap();
        assert_eq!((plan.import_kind(), plan.drawn()), ("policy", 40));
        let specs = testkit::specs::Specs::load(&["TS29519_Policy_Data", "TS29571_CommonData"]);
        let lists = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../policies/high/lists");
        let listed = std::fs::read_to_string(lists.join("enterprise_dnns.txt")).unwrap();
        let listed: Vec<&str> = listed.lines().filter(|l| !l.starts_with('#')).collect();
        let mut enterprise = 0;
        for i in 0..40 {
            let text = serde_json::to_string(&plan.am_ue_policy_line(i)).unwrap();
            let v: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(v.as_object().unwrap().len(), 3, "{text}");
            assert_eq!(v["ueId"], plan.supi(i));
            let (am, set) = (&v["amData"], &v["uePolicySet"]);
            assert_eq!(*am, plan.am_data(i));
            assert_eq!(*set, plan.ue_policy_set(i));
            specs.assert_valid("TS29519_Policy_Data", "AmPolicyData", am);
            specs.assert_valid("TS29519_Policy_Data", "UePolicySet", set);
            assert_eq!(am["subscCats"], set["subscCats"]);
            assert_eq!(am["praInfos"]["1"]["trackingAreaList"][0]["tac"], "000001");
            // The same string the `{imei}` generator renders for this subscriber.
            assert_eq!(set["pei"], format!("imei-{:014}0", 35_209_900_000_000 + i));
            let plmn = &set["allowedRouteSelDescs"]["001-01"];
            assert_eq!(plmn["servingPlmn"], json!({"mcc": "001", "mnc": "01"}));
            let slices = plmn["snssaiRouteSelDescs"].as_array().unwrap();
            assert_eq!(slices[0]["dnnRouteSelDescs"][0]["dnn"], "internet");
            match set.get("enterpriseDnn").and_then(Value::as_str) {
                Some(corp) => {
                    enterprise += 1;
                    assert!(listed.contains(&corp), "{corp} is in enterprise_dnns.txt");
                    assert_eq!(slices[1]["snssai"], json!({"sst": 2}));
                    assert_eq!(slices[1]["dnnRouteSelDescs"][0]["dnn"], corp);
                }
                None => assert_eq!(slices.len(), 1, "{text}"),
            }
            let mut profile = v.clone();
            profile.as_object_mut().unwrap().remove("ueId");
            assert_eq!(plan.document(i), profile, "the --target PUT carries the same data");
            assert!((150..250).contains(&am.to_string().len()), "{am}");
            assert!((350..600).contains(&set.to_string().len()), "{set}");
        }
        assert_eq!(enterprise, 40 / ENTERPRISE_EVERY);
        assert_eq!(enterprise_dnn(ENTERPRISE_EVERY * ENTERPRISE_DNNS).as_deref(), Some("corp1"));
        assert_eq!(
            enterprise_dnn(ENTERPRISE_EVERY * (ENTERPRISE_DNNS - 1)).as_deref(),
            Some("corp50")
        );
        assert!(listed.contains(&"corp50") && !listed.contains(&"corp51"));
    }

    #[test]
    fn the_import_summary_gives_the_row_count() {
        let out = "{\"rows\":1000000,\"bad\":0,\"seconds\":2.0,\"policyUesNew\":1000000}\n";
        assert_eq!(imported_rows(out), Some(1_000_000));
        assert_eq!(imported_rows("{\"rows\":7}"), Some(7));
        assert_eq!(imported_rows(""), None);
        assert_eq!(imported_rows("{\"bad\":1}"), None);
    }
}
