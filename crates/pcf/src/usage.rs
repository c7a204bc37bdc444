//! Usage monitoring on Gx (TS 29.212 §4.5.17) and N7 (TS 29.512 §4.2.2, §4.2.4 and
//! §4.2.6): the project grants thresholds per monitoring key, the gateways report what was
//! used, the PCF adds the reports up per subscriber and key, and the next decision reads the
//! totals (`usage.<monitoringKey>`, docs/policy.md).
//!
//! - **Thresholds** are the decision's `umDecs` (UsageMonitoringData: `umId`,
//!   `volumeThreshold`, `volumeThresholdUplink`/`Downlink`, `timeThreshold`), referred to by a
//!   session rule's `refUmData` (session level) or a PCC rule's (PCC rule level). On Gx each is
//!   a Usage-Monitoring-Information with Monitoring-Key = `umId`, Granted-Service-Unit
//!   (CC-Total/Input/Output-Octets, CC-Time) and Usage-Monitoring-Level; an entry gone is a
//!   Usage-Monitoring-Information with Usage-Monitoring-Support USAGE_MONITORING_DISABLED
//!   (§4.5.17). A PCC rule level key is also the rule's Monitoring-Key (gx::mapping).
//! - **Reports**: a CCR-U or CCR-T's Usage-Monitoring-Information (Used-Service-Unit, up to
//!   two per key, §5.3.60), an N7 update's or delete's `accuUsageReports` (AccuUsageReport,
//!   `volUsage` and `nextVolUsage` both counted). A report of a key the session was not given
//!   (not in the decision in force) is ignored and counted: neither spec names an error for it.
//! - **Accumulation** is per subscriber and key, across all its sessions (4G and 5G), kept in
//!   memory and in the store (`pcf_usage`): the new totals are committed with the decision the
//!   report made (`PcfStore::update_sm_with_usage`, `delete_sm_with_usage`), so an answered
//!   report is a committed one and a failed commit counts nothing.
//! - **Re-arming**: a report ends the gateway's monitoring of that key unless the answer
//!   gives a new threshold (TS 29.212 §4.5.17, TS 29.512 §4.2.4), so the answer carries the key's
//!   usage monitoring data even when the new decision did not change it.
//! - **Crossing**: when a report changes the session's decision beyond its thresholds (the
//!   project's cap rule), the subscriber's other sessions are decided again and told (Gx RAR,
//!   N7 UpdateNotify), as a policy data change does. A session's final report (delete, CCR-T)
//!   re-decides the subscriber's remaining sessions.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use diameter::dictionary::{base, dcca, gx};
use diameter::{result_code as rc, Avp, Message};
use nf::common_data::Errors;
use rustc_hash::FxHashMap;
use sbi::ProblemDetails;
use serde_json::{json, Map, Value};

use crate::context::Pcf;
use crate::store::{UsageRow, UsageTotals};

/// What one report says was used on one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub key: String,
    pub used: UsageTotals,
}

/// Reports added and ignored.
#[derive(Debug, Default)]
pub struct Stats {
    /// Reports added to a subscriber's totals (committed).
    pub added: AtomicU64,
    /// Reports of a key the session was not given.
    pub ignored: AtomicU64,
    /// Sessions decided again because another session's report changed its decision.
    pub redecided: AtomicU64,
}

/// The subscribers' accumulated usage, in memory (loaded from the store at start, changed after
/// each commit; the subscriber's hold orders the writes of one subscriber).
pub struct Usage {
    enabled: bool,
    totals: Mutex<FxHashMap<String, BTreeMap<String, UsageTotals>>>,
    pub stats: Stats,
}

/// What a request's reports come to: the rows to commit with its write, the totals its
/// decision reads, and the keys reported (to re-arm).
#[derive(Debug, Clone)]
pub struct Pending {
    pub rows: Vec<UsageRow>,
    pub view: Map<String, Value>,
    pub keys: Vec<String>,
    /// Reports in it (several of one key are one row).
    pub reports: u64,
}

/// The engine's view of one key's totals, in AccuUsageReport's names.
fn totals_json(t: &UsageTotals) -> Value {
    json!({"volUsage": t.total, "volUsageUplink": t.uplink, "volUsageDownlink": t.downlink,
           "timeUsage": t.time})
}

fn add(a: &mut UsageTotals, b: &UsageTotals) {
    a.total = a.total.saturating_add(b.total);
    a.uplink = a.uplink.saturating_add(b.uplink);
    a.downlink = a.downlink.saturating_add(b.downlink);
    a.time = a.time.saturating_add(b.time);
}

/// The monitoring keys a decision grants (its `umDecs` entries that are not null).
pub fn granted(decision: &Value) -> Vec<&str> {
    decision
        .get("umDecs")
        .and_then(Value::as_object)
        .map(|m| m.iter().filter(|(_, v)| !v.is_null()).map(|(k, _)| k.as_str()).collect())
        .unwrap_or_default()
}

impl Usage {
    pub fn new(enabled: bool) -> Self {
        Usage { enabled, totals: Mutex::new(FxHashMap::default()), stats: Stats::default() }
    }

    /// Whether the PCF monitors usage (`[pcf.usage] enabled`).
    pub fn is_on(&self) -> bool {
        self.enabled
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FxHashMap<String, BTreeMap<String, UsageTotals>>> {
        self.totals.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes what the store holds (at start).
    pub fn load(&self, rows: Vec<UsageRow>) {
        let mut m = self.lock();
        for r in rows {
            m.entry(r.supi).or_default().insert(r.key, r.totals);
        }
    }

    /// Subscribers with accumulated usage.
    pub fn subscribers(&self) -> usize {
        self.lock().len()
    }

    /// The totals a decision of `supi` reads as `usage`: None when usage is not monitored.
    pub fn view(&self, supi: &str) -> Option<Map<String, Value>> {
        if !self.enabled {
            return None;
        }
        let m = self.lock();
        Some(
            m.get(supi)
                .map(|keys| keys.iter().map(|(k, t)| (k.clone(), totals_json(t))).collect())
                .unwrap_or_default(),
        )
    }

    /// `reports` of a session of `supi` whose decision in force is `decision` (JSON bytes),
    /// added to the subscriber's totals (not yet committed: [`Usage::committed`] after the
    /// write). None when usage is not monitored or nothing was reported on a key the session
    /// was given; reports of other keys are counted as ignored.
    pub fn pending(&self, supi: &str, decision: &[u8], reports: Vec<Report>) -> Option<Pending> {
        if !self.enabled || reports.is_empty() {
            return None;
        }
        let decision: Value = serde_json::from_slice(decision).unwrap_or(Value::Null);
        let given = granted(&decision);
        let mut sums: BTreeMap<String, UsageTotals> = BTreeMap::new();
        let mut n = 0;
        for r in reports {
            if given.contains(&r.key.as_str()) {
                n += 1;
                add(sums.entry(r.key).or_default(), &r.used);
            } else {
                self.stats.ignored.fetch_add(1, Ordering::Relaxed);
                tracing::info!(%supi, key = %r.key, "usage report of a monitoring key the session was not given: ignored");
            }
        }
        if sums.is_empty() {
            return None;
        }
        let now = chrono::Utc::now().timestamp_millis();
        let m = self.lock();
        let held = m.get(supi);
        let mut view: Map<String, Value> = held
            .map(|keys| keys.iter().map(|(k, t)| (k.clone(), totals_json(t))).collect())
            .unwrap_or_default();
        let mut rows = Vec::with_capacity(sums.len());
        let mut keys = Vec::with_capacity(sums.len());
        for (key, used) in sums {
            let mut totals = held.and_then(|h| h.get(&key)).copied().unwrap_or_default();
            add(&mut totals, &used);
            view.insert(key.clone(), totals_json(&totals));
            rows.push(UsageRow {
                supi: supi.to_string(),
                key: key.clone(),
                totals,
                updated_ms: now,
            });
            keys.push(key);
        }
        Some(Pending { rows, view, keys, reports: n })
    }

    /// The pending totals were committed: memory follows.
    pub fn committed(&self, p: &Pending) {
        self.stats.added.fetch_add(p.reports, Ordering::Relaxed);
        let mut m = self.lock();
        for r in &p.rows {
            m.entry(r.supi.clone()).or_default().insert(r.key.clone(), r.totals);
        }
    }
}

/// Whether decision `new` differs from `old` beyond its usage monitoring data: a threshold
/// crossing the project acted on.
pub fn crossed(old: &Value, new: &Value) -> bool {
    let strip = |d: &Value| {
        let mut d = d.clone();
        if let Some(m) = d.as_object_mut() {
            m.remove("umDecs");
        }
        d
    };
    strip(old) != strip(new)
}

/// Decides the subscriber's sessions again in the background (after the answer to the report
/// that changed what they read), telling each gateway whose decision changed.
pub fn redecide_subscriber(pcf: &Arc<Pcf>, supi: &str) {
    let (pcf, supi) = (pcf.clone(), supi.to_string());
    pcf.usage.stats.redecided.fetch_add(1, Ordering::Relaxed);
    tokio::spawn(async move {
        let held = pcf.hold(&supi).await;
        crate::npcf_smpolicycontrol::redecide_held(&pcf, &supi, held).await;
    });
}

/// An N7 SmPolicyUpdateContextData's or SmPolicyDeleteData's `accuUsageReports` (TS 29.512
/// §5.6.2.18 AccuUsageReport), checked: 400 naming each wrong attribute. Empty when usage is
/// not monitored (the attribute is then not read).
pub fn n7_reports(pcf: &Pcf, body: &Value) -> Result<Vec<Report>, ProblemDetails> {
    if !pcf.usage.is_on() {
        return Ok(Vec::new());
    }
    let Some(list) = body.get("accuUsageReports") else { return Ok(Vec::new()) };
    let mut errs = Errors::default();
    let mut out = Vec::new();
    let Some(list) = list.as_array() else {
        errs.bad("/accuUsageReports", "must be an array of AccuUsageReport");
        errs.finish()?;
        return Ok(out);
    };
    for (i, r) in list.iter().enumerate() {
        let at = format!("/accuUsageReports/{i}");
        let Some(o) = r.as_object() else {
            errs.bad(at, "must be an AccuUsageReport object");
            continue;
        };
        let key = match o.get("refUmIds") {
            None => {
                errs.missing(format!("{at}/refUmIds"));
                None
            }
            Some(Value::String(k)) if !k.is_empty() => Some(k.clone()),
            Some(_) => {
                errs.bad(format!("{at}/refUmIds"), "must be a non-empty string");
                None
            }
        };
        let mut num = |name: &str| -> u64 {
            match o.get(name) {
                None => 0,
                Some(v) => v.as_u64().unwrap_or_else(|| {
                    errs.bad(format!("{at}/{name}"), "must be an integer >= 0");
                    0
                }),
            }
        };
        // Usage after the monitoring time (next*) is usage too: both are added.
        let used = UsageTotals {
            total: num("volUsage").saturating_add(num("nextVolUsage")),
            uplink: num("volUsageUplink").saturating_add(num("nextVolUsageUplink")),
            downlink: num("volUsageDownlink").saturating_add(num("nextVolUsageDownlink")),
            time: num("timeUsage").saturating_add(num("nextTimeUsage")),
        };
        if let Some(key) = key {
            out.push(Report { key, used });
        }
    }
    errs.finish()?;
    Ok(out)
}

/// An N7 answer's delta re-arms each reported key the new decision still grants: its usage
/// monitoring data is in the delta even when unchanged.
pub fn rearm_n7(delta: &mut Value, new: &Value, keys: &[String]) {
    for k in keys {
        let Some(um) = new.get("umDecs").and_then(|m| m.get(k)).filter(|v| !v.is_null()) else {
            continue;
        };
        let Some(d) = delta.as_object_mut() else { return };
        let decs = d.entry("umDecs").or_insert_with(|| Value::Object(Map::new()));
        if let Some(m) = decs.as_object_mut() {
            m.entry(k.clone()).or_insert_with(|| um.clone());
        }
    }
}

/// Why a CCR's usage report is refused: the Result-Code and the Failed-AVP.
#[derive(Debug, Clone, PartialEq)]
pub struct GxReportError {
    pub code: u32,
    pub failed: Avp,
}

/// A Used-Service-Unit's octets and seconds (RFC 4006 §8.19); a total missing is input plus
/// output.
fn used_of(usu: &Avp) -> UsageTotals {
    let n = |def: &diameter::AvpDef| usu.child(def).and_then(|a| a.as_u64().ok());
    let input = n(&dcca::CC_INPUT_OCTETS).unwrap_or(0);
    let output = n(&dcca::CC_OUTPUT_OCTETS).unwrap_or(0);
    UsageTotals {
        total: n(&dcca::CC_TOTAL_OCTETS).unwrap_or(input.saturating_add(output)),
        uplink: input,
        downlink: output,
        time: usu.child(&dcca::CC_TIME).and_then(|a| a.as_u32().ok()).map_or(0, u64::from),
    }
}

/// A CCR's usage reports (TS 29.212 §5.3.60 Usage-Monitoring-Information with
/// Used-Service-Unit). Empty when usage is not monitored. A Usage-Monitoring-Information
/// without Monitoring-Key is 5005 with Failed-AVP that Usage-Monitoring-Information as
/// received (RFC 6733 §7.5's example of the missing AVP would be an empty OctetString, which
/// Wireshark flags; the report itself tells the PCEF which one was refused), two
/// Monitoring-Keys or more than two Used-Service-Units 5009 (the AVP too many). The node has
/// checked the values' formats (5004/5014 before this).
pub fn gx_reports(pcf: &Pcf, ccr: &Message) -> Result<Vec<Report>, GxReportError> {
    if !pcf.usage.is_on() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for umi in ccr.usage_monitoring_information() {
        let keys = umi.children_of(&gx::MONITORING_KEY);
        if keys.len() > 1 {
            return Err(GxReportError {
                code: rc::DIAMETER_AVP_OCCURS_TOO_MANY_TIMES,
                failed: keys[1].clone(),
            });
        }
        let Some(key) = keys.first() else {
            return Err(GxReportError { code: rc::DIAMETER_MISSING_AVP, failed: umi.clone() });
        };
        let usus = umi.children_of(&dcca::USED_SERVICE_UNIT);
        if usus.len() > 2 {
            return Err(GxReportError {
                code: rc::DIAMETER_AVP_OCCURS_TOO_MANY_TIMES,
                failed: usus[2].clone(),
            });
        }
        if usus.is_empty() {
            continue;
        }
        let mut used = UsageTotals::default();
        for u in &usus {
            add(&mut used, &used_of(u));
        }
        let key = String::from_utf8_lossy(key.as_slice().unwrap_or_default()).into_owned();
        out.push(Report { key, used });
    }
    Ok(out)
}

/// The answer to a CCR whose usage report is refused.
pub fn gx_refusal(answer: Message, e: GxReportError) -> Message {
    answer.avp(base::RESULT_CODE.u32(e.code)).avp(base::FAILED_AVP.grouped(vec![e.failed]))
}

/// Usage-Monitoring-Level (§5.3.61): PCC_RULE_LEVEL when a PCC rule refers to the key, else
/// SESSION_LEVEL.
fn level(decision: &Value, key: &str) -> u32 {
    let by_rule = decision
        .get("pccRules")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|m| m.values())
        .filter_map(|r| r.get("refUmData")?.as_array())
        .flatten()
        .any(|k| k.as_str() == Some(key));
    u32::from(by_rule)
}

/// A UsageMonitoringData as a Usage-Monitoring-Information granting its thresholds.
fn grant(decision: &Value, key: &str, um: &Value) -> Avp {
    let mut gsu = Vec::new();
    for (name, def) in [
        ("volumeThreshold", &dcca::CC_TOTAL_OCTETS),
        ("volumeThresholdUplink", &dcca::CC_INPUT_OCTETS),
        ("volumeThresholdDownlink", &dcca::CC_OUTPUT_OCTETS),
    ] {
        if let Some(v) = um.get(name).and_then(Value::as_u64) {
            gsu.push(def.u64(v));
        }
    }
    if let Some(t) = um.get("timeThreshold").and_then(Value::as_u64) {
        gsu.push(dcca::CC_TIME.u32(u32::try_from(t).unwrap_or(u32::MAX)));
    }
    let mut kids = vec![gx::MONITORING_KEY.bytes(key.as_bytes().to_vec())];
    if !gsu.is_empty() {
        kids.push(dcca::GRANTED_SERVICE_UNIT.grouped(gsu));
    }
    kids.push(gx::USAGE_MONITORING_LEVEL.enumerated(level(decision, key)));
    gx::USAGE_MONITORING_INFORMATION.grouped(kids)
}

fn um_decs(d: &Value) -> Map<String, Value> {
    d.get("umDecs").and_then(Value::as_object).cloned().unwrap_or_default()
}

/// What changed in the usage monitoring data from decision `old` to `new`, as Gx AVPs: a
/// grant for each entry new or changed, USAGE_MONITORING_DISABLED for each gone.
pub fn gx_changes(old: &Value, new: &Value) -> Vec<Avp> {
    let (o, n) = (um_decs(old), um_decs(new));
    let mut out = Vec::new();
    for (k, um) in n.iter().filter(|(_, v)| !v.is_null()) {
        if o.get(k) != Some(um) {
            out.push(grant(new, k, um));
        }
    }
    for (k, _) in o.iter().filter(|(_, v)| !v.is_null()) {
        if n.get(k).is_none_or(Value::is_null) {
            out.push(gx::USAGE_MONITORING_INFORMATION.grouped(vec![
                gx::MONITORING_KEY.bytes(k.as_bytes().to_vec()),
                gx::USAGE_MONITORING_SUPPORT.enumerated(0),
            ]));
        }
    }
    out
}

/// The grants re-arming the reported `keys` the new decision still grants and [`gx_changes`]
/// did not already carry (their data unchanged).
pub fn gx_rearm(old: &Value, new: &Value, keys: &[String]) -> Vec<Avp> {
    let (o, n) = (um_decs(old), um_decs(new));
    keys.iter()
        .filter_map(|k| {
            let um = n.get(k).filter(|v| !v.is_null())?;
            (o.get(k) == Some(um)).then(|| grant(new, k, um))
        })
        .collect()
}

/// `pcf_usage_reports_total{result="added"|"ignored"}`, `pcf_usage_redecisions_total` (a
/// subscriber's sessions decided again after a report changed a decision) and the gauge
/// `pcf_usage_subscribers` (subscribers with accumulated usage).
pub fn register_metrics(pcf: Arc<Pcf>, r: &mut prometheus_client::registry::Registry) {
    r.register_collector(Box::new(UsageCollector(pcf)));
}

#[derive(Debug)]
struct UsageCollector(Arc<Pcf>);

impl prometheus_client::collector::Collector for UsageCollector {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::counter::ConstCounter;
        use prometheus_client::metrics::gauge::ConstGauge;
        let s = &self.0.usage.stats;
        let mut e = encoder.encode_descriptor(
            "pcf_usage_reports",
            "Usage reports (Gx Usage-Monitoring-Information, N7 accuUsageReports) by result: added to the subscriber's totals, or ignored (a monitoring key the session was not given)",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for (result, n) in [("added", &s.added), ("ignored", &s.ignored)] {
            ConstCounter::new(n.load(Ordering::Relaxed))
                .encode(e.encode_family(&[("result", result)])?)?;
        }
        let c = ConstCounter::new(s.redecided.load(Ordering::Relaxed));
        c.encode(encoder.encode_descriptor(
            "pcf_usage_redecisions",
            "Subscribers whose sessions were decided again because a usage report changed a decision",
            None,
            c.metric_type(),
        )?)?;
        let g = ConstGauge::new(self.0.usage.subscribers() as i64);
        g.encode(encoder.encode_descriptor(
            "pcf_usage_subscribers",
            "Subscribers with accumulated usage",
            None,
            g.metric_type(),
        )?)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(key: &str, total: u64) -> Report {
        Report { key: key.into(), used: UsageTotals { total, ..Default::default() } }
    }

    #[test]
    fn reports_add_up_per_subscriber_and_key_and_unknown_keys_are_ignored() {
        let u = Usage::new(true);
        let d = serde_json::to_vec(&json!({"umDecs": {"m": {"umId": "m"}, "gone": null}})).unwrap();
        assert_eq!(u.view("imsi-1"), Some(Map::new()), "monitored, nothing yet");
        let p = u.pending("imsi-1", &d, vec![report("m", 4), report("m", 1), report("x", 9)]);
        let p = p.unwrap();
        assert_eq!(p.reports, 2);
        assert_eq!(p.keys, ["m"]);
        assert_eq!(p.rows[0].totals.total, 5);
        assert_eq!(p.view["m"]["volUsage"], 5);
        assert_eq!(u.stats.ignored.load(Ordering::Relaxed), 1);
        assert_eq!(u.view("imsi-1"), Some(Map::new()), "not committed yet");
        u.committed(&p);
        let p = u.pending("imsi-1", &d, vec![report("m", 3)]).unwrap();
        assert_eq!(p.view["m"]["volUsage"], 8);
        assert!(u.pending("imsi-1", &d, vec![report("gone", 3)]).is_none(), "a null entry");
        assert!(Usage::new(false).pending("imsi-1", &d, vec![report("m", 1)]).is_none());
        assert_eq!(Usage::new(false).view("imsi-1"), None);
    }

    #[test]
    fn usage_monitoring_data_becomes_gx_grants_and_disables() {
        let old = json!({"umDecs": {"m": {"umId": "m", "volumeThreshold": 100},
                                    "old": {"umId": "old", "volumeThreshold": 1}}});
        let new = json!({"umDecs": {"m": {"umId": "m", "volumeThreshold": 60, "timeThreshold": 30},
                                    "v": {"umId": "v", "volumeThresholdDownlink": 7}},
                         "pccRules": {"video": {"pccRuleId": "video", "refUmData": ["v"]}}});
        let avps = gx_changes(&old, &new);
        assert_eq!(avps.len(), 3);
        let m = &avps[0];
        assert_eq!(m.child(&gx::MONITORING_KEY).unwrap().as_slice().unwrap(), b"m");
        let gsu = m.child(&dcca::GRANTED_SERVICE_UNIT).unwrap();
        assert_eq!(gsu.child(&dcca::CC_TOTAL_OCTETS).unwrap().as_u64().unwrap(), 60);
        assert_eq!(gsu.child(&dcca::CC_TIME).unwrap().as_u32().unwrap(), 30);
        assert_eq!(m.child(&gx::USAGE_MONITORING_LEVEL).unwrap().as_u32().unwrap(), 0);
        let v = &avps[1];
        let gsu = v.child(&dcca::GRANTED_SERVICE_UNIT).unwrap();
        assert_eq!(gsu.child(&dcca::CC_OUTPUT_OCTETS).unwrap().as_u64().unwrap(), 7);
        assert_eq!(v.child(&gx::USAGE_MONITORING_LEVEL).unwrap().as_u32().unwrap(), 1);
        let gone = &avps[2];
        assert_eq!(gone.child(&gx::MONITORING_KEY).unwrap().as_slice().unwrap(), b"old");
        assert_eq!(gone.child(&gx::USAGE_MONITORING_SUPPORT).unwrap().as_u32().unwrap(), 0);
        // Unchanged: nothing, unless reported (re-armed).
        assert!(gx_changes(&new, &new).is_empty());
        let rearm = gx_rearm(&new, &new, &["m".into(), "nope".into()]);
        assert_eq!(rearm.len(), 1);
        assert!(gx_rearm(&old, &new, &["m".into()]).is_empty(), "already in gx_changes");
    }

    /// The totals are written in the commit of the decision or delete they go with, read back
    /// after a reload; a write whose association is gone writes no usage either.
    #[tokio::test]
    async fn totals_commit_with_the_decision_or_not_at_all() {
        use crate::store::{PcfStore, Resident, SmPolicy, SqlitePcfStore};
        let dir = tempfile::tempdir().unwrap();
        let db = ::store::SqliteStore::open(::store::SqliteConfig::new(dir.path().join("pcf.db")))
            .await
            .unwrap();
        let sqlite: Arc<dyn PcfStore> = Arc::new(SqlitePcfStore::on(db).await.unwrap());
        let r = Resident::load(sqlite.clone()).await.unwrap();
        let sm = |id: &str| SmPolicy {
            id: id.into(),
            supi: "imsi-1".into(),
            context: b"{}".to_vec(),
            decision: b"{}".to_vec(),
            policy_version: "1".into(),
            updated_ms: 1,
            binding: None,
        };
        let row = |key: &str, total: u64| UsageRow {
            supi: "imsi-1".into(),
            key: key.into(),
            totals: UsageTotals { total, uplink: 1, downlink: 2, time: 3 },
            updated_ms: 5,
        };
        r.create_sm(sm("a"), Map::new(), None).await.unwrap();
        r.create_sm(sm("b"), Map::new(), None).await.unwrap();
        assert!(r.update_sm_with_usage(sm("a"), Map::new(), vec![row("m", 7)]).await.unwrap());
        assert!(!r.update_sm_with_usage(sm("gone"), Map::new(), vec![row("x", 1)]).await.unwrap());
        assert!(r.delete_sm_with_usage("gone", vec![row("y", 1)]).await.unwrap().is_none());
        let d = r.delete_sm_with_usage("b", vec![row("m", 9)]).await.unwrap().unwrap();
        assert_eq!(d.supi, "imsi-1");
        assert!(r.get_sm("b").await.unwrap().is_none());
        let u = Usage::new(true);
        u.load(Resident::load(sqlite).await.unwrap().usage_all().await.unwrap());
        assert_eq!(u.view("imsi-1"), Some(
            json!({"m": {"volUsage": 9, "volUsageUplink": 1, "volUsageDownlink": 2, "timeUsage": 3}})
                .as_object()
                .unwrap()
                .clone()
        ));
    }

    #[test]
    fn an_n7_delta_re_arms_a_reported_key() {
        let new = json!({"umDecs": {"m": {"umId": "m", "volumeThreshold": 5}}});
        let mut delta = json!({});
        rearm_n7(&mut delta, &new, &["m".into(), "x".into()]);
        assert_eq!(delta, json!({"umDecs": {"m": {"umId": "m", "volumeThreshold": 5}}}));
        assert!(!crossed(&new, &json!({"umDecs": {}})));
        assert!(crossed(&new, &json!({"umDecs": {}, "sessRules": {}})));
    }
}
