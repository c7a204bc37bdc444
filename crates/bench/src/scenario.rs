//! Scenario files (`scenarios/*.toml`): what to send, how often, against what preloaded state,
//! with which peer simulators, and what the reference published for the same call model.
//!
//! The files in the repository's `scenarios/` directory are compiled into the binary, so
//! `fivecore bench --list` works from anywhere; a path to a `.toml` file is accepted too.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// The scenarios shipped in `scenarios/`, compiled in.
pub const BUILTIN: &[(&str, &str)] = &[
    ("nrf-51.6k", include_str!("../../../scenarios/nrf-51.6k.toml")),
    ("nrf-5k", include_str!("../../../scenarios/nrf-5k.toml")),
];

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Name, equal to the file stem (`nrf-5k`).
    pub name: String,
    /// One line, shown by `--list`.
    pub description: String,
    /// NFs the scenario needs (`nrf`); the kit starts them unless `--target NF=URL` is given.
    pub nfs: Vec<String>,
    pub load: Load,
    /// Settings for the NFs the kit starts, by NF: written as `[<nf>]` of a configuration file
    /// passed with `--config` (ignored for `--target` NFs).
    #[serde(default)]
    pub nf_config: std::collections::BTreeMap<String, toml::Table>,
    #[serde(default)]
    pub generators: Generators,
    #[serde(default)]
    pub preload: Preload,
    #[serde(default)]
    pub simulators: Vec<Simulator>,
    /// Requests the generator sends, each at its share of the rate.
    pub procedures: Vec<Procedure>,
    /// Traffic the NF itself sends to the simulators (SLF queries, notifications, forwarding),
    /// counted where it arrives.
    #[serde(default)]
    pub egress: Vec<Egress>,
    #[serde(default)]
    pub criteria: Criteria,
    pub reference: Option<Reference>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Load {
    /// Incoming requests per second at full scale: the sum of the procedures' `tps`.
    pub rate: f64,
    /// Measured seconds, after the warm-up.
    pub duration_s: f64,
    /// Seconds of load before measuring starts.
    pub warmup_s: f64,
    /// Requests in flight at most; beyond it the scheduler waits (and the report says so).
    #[serde(default = "default_outstanding")]
    pub max_outstanding: usize,
    /// Pooled HTTP/2 connections per NF (requests are spread over them round robin).
    #[serde(default = "default_connections")]
    pub connections: usize,
    /// Per-request timeout.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
}

fn default_outstanding() -> usize {
    4096
}
fn default_connections() -> usize {
    4
}
fn default_timeout_ms() -> u64 {
    5000
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Generators {
    /// MCC+MNC prefix of generated SUPIs (`imsi-<prefix><msin>`).
    #[serde(default = "default_plmn")]
    pub supi_prefix: String,
    /// First MSIN (10 digits, zero padded).
    #[serde(default)]
    pub supi_first: u64,
    /// How many SUPIs the random `{supi}` draws from.
    #[serde(default = "default_supi_count")]
    pub supi_count: u64,
    /// Seed of the deterministic random generator.
    #[serde(default = "default_seed")]
    pub seed: u64,
}

fn default_plmn() -> String {
    "00101".into()
}
fn default_supi_count() -> u64 {
    1_000_000
}
fn default_seed() -> u64 {
    0x5eed_f1ce
}

impl Default for Generators {
    fn default() -> Self {
        Self {
            supi_prefix: default_plmn(),
            supi_first: 0,
            supi_count: default_supi_count(),
            seed: default_seed(),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Preload {
    #[serde(default)]
    pub profiles: Vec<ProfileSet>,
    pub subscriptions: Option<SubscriptionSet>,
}

/// `count` NF profiles of one type, each padded to a pretty-printed size in `size_bytes`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileSet {
    pub nf_type: String,
    /// Name used by `{instance:LABEL}` and in the report (defaults to `nf_type`); the reference's
    /// SLF profiles are registered as `nf_type = "UDR"` with `label = "SLF"`.
    pub label: Option<String>,
    pub count: usize,
    /// Pretty-printed JSON size range, bytes: `[min, max]`.
    pub size_bytes: [usize; 2],
    /// Service names (default: the usual services of the type).
    #[serde(default)]
    pub services: Vec<String>,
    /// Name of a simulator whose address goes into the profile's IP endpoints.
    pub endpoint_sim: Option<String>,
}

impl ProfileSet {
    pub fn label(&self) -> &str {
        self.label.as_deref().unwrap_or(&self.nf_type)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubscriptionSet {
    pub count: usize,
    #[serde(default = "default_sub_path")]
    pub path: String,
    /// JSON body template (generators allowed, `{i}` is the subscription's index).
    pub body: String,
    /// Subscriptions created here go into this pool (for `{take:POOL}` / `{peek:POOL}`).
    pub pool: Option<String>,
}

fn default_sub_path() -> String {
    "/nnrf-nfm/v1/subscriptions".into()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SimKind {
    /// Accepts NfStatusNotify (any POST), answers 204.
    NotificationSink,
    /// Nudr_GroupIDmap: `GET /nudr-group-id-map/v1/nf-group-ids` answers a NfGroupIdMapResult.
    Slf,
    /// A peer NRF answering forwarded discoveries with an empty SearchResult.
    PeerNrf,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Simulator {
    pub name: String,
    pub kind: SimKind,
    /// Added before every answer, ms.
    pub latency_ms: u64,
    #[serde(default)]
    pub description: String,
    /// SLF only: share (0..=1) of subscribers, by the last two SUPI digits, that belong to an
    /// NF group this NRF does not hold (`<type>-grp-remote`), so their discovery is forwarded.
    #[serde(default)]
    pub remote_share: f64,
    /// SLF only: the NF types `remote_share` applies to.
    #[serde(default)]
    pub remote_nf_types: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Procedure {
    pub name: String,
    /// Call-mix row of the reference (`E`, `A`, ...).
    #[serde(default)]
    pub row: String,
    #[serde(default)]
    pub description: String,
    /// NF that serves it (default: the first of `nfs`).
    pub nf: Option<String>,
    /// Requests per second at full scale; the share of the mix is `tps / load.rate`.
    pub tps: f64,
    pub method: String,
    /// Path template, e.g. `/nnrf-nfm/v1/nf-instances/{instance:AMF}`.
    pub path: String,
    /// Query-string templates, one picked per request by weight.
    #[serde(default)]
    pub variants: Vec<Variant>,
    /// Body template (JSON text with generators).
    pub body: Option<String>,
    /// Generate a full NF profile of this type (label of a preload set or NF type) as the
    /// body, with `nfInstanceId` = the request's `{uuid}`.
    pub body_profile: Option<String>,
    pub content_type: Option<String>,
    /// Statuses counted as success.
    pub expect: Vec<u16>,
    /// Put the created resource id (Location's last segment, else `{uuid}`) into this pool.
    pub produces: Option<String>,
    /// A feature this build may not serve yet: if the NF never answers it with anything but
    /// 404/405/501, the report marks it "not served by this build" instead of failing.
    pub optional_feature: Option<String>,
    pub criteria: Option<Criteria>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Variant {
    /// Query-string template: `target-nf-type=UDM&requester-nf-type=AMF&supi={supi}`.
    pub query: String,
    #[serde(default = "one")]
    pub weight: f64,
    /// Which §3.4 combination it is.
    #[serde(default)]
    pub label: String,
}

fn one() -> f64 {
    1.0
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Egress {
    pub name: String,
    #[serde(default)]
    pub row: String,
    #[serde(default)]
    pub description: String,
    /// Simulator where it arrives.
    pub sim: String,
    /// Expected rate at full scale (the reference's figure).
    pub tps: f64,
    /// Feature name, shown when the NF sends none ("not served by this build").
    pub feature: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Criteria {
    /// Minimum share of answers with an expected status (0..=1).
    #[serde(default = "default_min_success")]
    pub min_success_rate: f64,
    /// Maximum p99 latency, ms.
    #[serde(default = "default_max_p99")]
    pub max_p99_ms: f64,
}

fn default_min_success() -> f64 {
    0.999
}
fn default_max_p99() -> f64 {
    500.0
}

impl Default for Criteria {
    fn default() -> Self {
        Self { min_success_rate: default_min_success(), max_p99_ms: default_max_p99() }
    }
}

/// The reference's published figures for the same scenario.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reference {
    /// Reference scenario id and section (`N3, §4.7.2`).
    pub scenario: String,
    pub tps_achieved: f64,
    pub cpu_requested: f64,
    pub tps_per_core: f64,
    pub tps_per_used_core: f64,
    /// Procedure the latency figures are for.
    pub latency_procedure: String,
    pub latency_p50_ms: f64,
    pub latency_p90_ms: f64,
    pub latency_p95_ms: f64,
    pub latency_p99_ms: f64,
    pub duration: String,
    #[serde(default)]
    pub notes: Vec<String>,
}

impl Scenario {
    pub fn from_toml(text: &str) -> Result<Self> {
        let s: Scenario = toml::from_str(text)?;
        s.validate()?;
        Ok(s)
    }

    /// A built-in name or a path to a `.toml` file.
    pub fn load(name_or_path: &str) -> Result<Self> {
        if let Some((_, text)) = BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
            return Self::from_toml(text)
                .with_context(|| format!("built-in scenario {name_or_path}"));
        }
        let p = Path::new(name_or_path);
        if p.extension().is_some_and(|e| e == "toml") && p.exists() {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            return Self::from_toml(&text).with_context(|| format!("scenario {}", p.display()));
        }
        let names: Vec<&str> = BUILTIN.iter().map(|(n, _)| *n).collect();
        bail!("unknown scenario {name_or_path:?} (known: {})", names.join(", "))
    }

    pub fn builtin() -> Result<Vec<Scenario>> {
        BUILTIN
            .iter()
            .map(|(n, t)| Self::from_toml(t).with_context(|| format!("scenario {n}")))
            .collect()
    }

    pub fn total_tps(&self) -> f64 {
        self.procedures.iter().map(|p| p.tps).sum()
    }

    pub fn criteria_for(&self, p: &Procedure) -> Criteria {
        p.criteria.clone().unwrap_or_else(|| self.criteria.clone())
    }

    /// Checks everything that can be checked without running.
    pub fn validate(&self) -> Result<()> {
        if self.name.is_empty() || self.description.contains('\n') {
            bail!("name must be set and description be one line");
        }
        if self.nfs.is_empty() {
            bail!("nfs is empty");
        }
        if let Some(nf) = self.nf_config.keys().find(|nf| !self.nfs.contains(nf)) {
            bail!("nf_config.{nf}: {nf} is not in nfs");
        }
        let l = &self.load;
        if !(l.rate > 0.0 && l.duration_s > 0.0 && l.warmup_s >= 0.0) {
            bail!("load.rate and load.duration_s must be > 0, warmup_s >= 0");
        }
        if l.max_outstanding == 0 || l.connections == 0 || l.timeout_ms == 0 {
            bail!("load.max_outstanding, connections and timeout_ms must be > 0");
        }
        let total = self.total_tps();
        if (total - l.rate).abs() > l.rate * 0.01 {
            bail!(
                "load.rate {} differs from the sum of procedure tps {total:.3} by more than 1%",
                l.rate
            );
        }
        let mut labels = BTreeSet::new();
        for ps in &self.preload.profiles {
            if ps.count == 0 || ps.size_bytes[0] > ps.size_bytes[1] {
                bail!("profile set {}: count must be > 0 and size_bytes [min, max]", ps.label());
            }
            if !labels.insert(ps.label().to_string()) {
                bail!("profile set label {} repeated", ps.label());
            }
        }
        let sims: BTreeSet<&str> = self.simulators.iter().map(|s| s.name.as_str()).collect();
        if self.simulators.iter().any(|s| !(0.0..=1.0).contains(&s.remote_share)) {
            bail!("simulators: remote_share must be 0..=1");
        }
        if sims.len() != self.simulators.len() {
            bail!("simulator names must be unique");
        }
        for ps in &self.preload.profiles {
            if let Some(s) = &ps.endpoint_sim {
                if !sims.contains(s.as_str()) {
                    bail!("profile set {}: unknown simulator {s}", ps.label());
                }
            }
        }
        let mut pools: BTreeSet<String> =
            self.preload.subscriptions.iter().filter_map(|s| s.pool.clone()).collect();
        pools.extend(self.procedures.iter().filter_map(|p| p.produces.clone()));
        let check = |what: &str, t: &str| -> Result<()> {
            crate::template::Template::parse(t)
                .with_context(|| format!("{what}: template {t:?}"))?
                .check(&labels, &pools, &sims)
                .with_context(|| format!("{what}: template {t:?}"))
        };
        if let Some(s) = &self.preload.subscriptions {
            check("preload.subscriptions.body", &s.body)?;
        }
        let mut names = BTreeSet::new();
        for p in &self.procedures {
            let what = format!("procedure {}", p.name);
            if !names.insert(p.name.as_str()) {
                bail!("{what}: name repeated");
            }
            if p.tps < 0.0 || !p.tps.is_finite() {
                bail!("{what}: tps must be >= 0");
            }
            if http::Method::from_bytes(p.method.as_bytes()).is_err() {
                bail!("{what}: bad method {}", p.method);
            }
            if !p.path.starts_with('/') {
                bail!("{what}: path must start with /");
            }
            if p.expect.is_empty() || p.expect.iter().any(|s| !(100..600).contains(s)) {
                bail!("{what}: expect must list HTTP statuses");
            }
            if let Some(nf) = &p.nf {
                if !self.nfs.contains(nf) {
                    bail!("{what}: nf {nf} not in nfs");
                }
            }
            if p.body.is_some() && p.body_profile.is_some() {
                bail!("{what}: body and body_profile are exclusive");
            }
            if let Some(b) = &p.body_profile {
                if !labels.contains(b) {
                    bail!("{what}: body_profile {b} is not a preloaded profile set");
                }
            }
            check(&what, &p.path)?;
            if let Some(b) = &p.body {
                check(&what, b)?;
            }
            if p.variants.iter().any(|v| v.weight <= 0.0) {
                bail!("{what}: variant weights must be > 0");
            }
            for v in &p.variants {
                check(&what, &v.query)?;
            }
            if let Some(c) = &p.criteria {
                check_criteria(&what, c)?;
            }
        }
        check_criteria("criteria", &self.criteria)?;
        for (nf, table) in &self.nf_config {
            let mut strings = Vec::new();
            collect_strings(&toml::Value::Table(table.clone()), &mut strings);
            for t in strings.iter().filter(|t| t.contains("{sim:")) {
                check(&format!("nf_config.{nf}"), t)?;
            }
        }
        for e in &self.egress {
            if !sims.contains(e.sim.as_str()) {
                bail!("egress {}: unknown simulator {}", e.name, e.sim);
            }
        }
        Ok(())
    }
}

fn collect_strings(v: &toml::Value, out: &mut Vec<String>) {
    match v {
        toml::Value::String(s) => out.push(s.clone()),
        toml::Value::Array(a) => a.iter().for_each(|v| collect_strings(v, out)),
        toml::Value::Table(t) => t.values().for_each(|v| collect_strings(v, out)),
        _ => {}
    }
}

fn check_criteria(what: &str, c: &Criteria) -> Result<()> {
    if !(0.0..=1.0).contains(&c.min_success_rate) || c.max_p99_ms <= 0.0 {
        bail!("{what}: min_success_rate must be 0..=1 and max_p99_ms > 0");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_in_scenarios_parses_validates_and_is_built_in() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "toml") {
                continue;
            }
            let s = Scenario::load(path.to_str().unwrap())
                .unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
            let stem = path.file_stem().unwrap().to_str().unwrap();
            assert_eq!(s.name, stem, "name equals file name");
            assert!(
                BUILTIN.iter().any(|(n, _)| *n == stem),
                "{stem} is compiled in (scenario::BUILTIN)"
            );
            seen += 1;
        }
        assert_eq!(seen, BUILTIN.len());
        assert_eq!(Scenario::builtin().unwrap().len(), BUILTIN.len());
    }

    #[test]
    fn nrf_scenarios_carry_the_reference_call_mix() {
        for name in ["nrf-5k", "nrf-51.6k"] {
            let s = Scenario::load(name).unwrap();
            let profiles: usize = s.preload.profiles.iter().map(|p| p.count).sum();
            assert_eq!(profiles, 260, "{name}: §3.8 total");
            assert_eq!(s.preload.subscriptions.as_ref().unwrap().count, 1000);
            let disc: f64 = s.procedures.iter().filter(|p| p.row == "E").map(|p| p.tps).sum();
            let want = if name == "nrf-5k" { 5000.0 } else { 51600.0 };
            assert!((disc - want).abs() < want * 0.01, "{name}: discovery {disc}");
            assert!(s.egress.iter().any(|e| e.row == "I"), "SLF queries declared");
            assert!(s.egress.iter().any(|e| e.row == "Q"), "forwarding declared");
            assert!(
                s.procedures.iter().any(|p| p.row == "P" && p.optional_feature.is_some()),
                "access token declared"
            );
            assert!(s.reference.is_some());
        }
    }

    #[test]
    fn validation_rejects_mistakes() {
        let base = BUILTIN[1].1;
        let bad_rate = base.replacen("rate = 5066", "rate = 9000", 1);
        assert!(Scenario::from_toml(&bad_rate).is_err());
        let bad_gen = base.replacen("{instance:AMF}", "{instance:NOPE}", 1);
        assert!(Scenario::from_toml(&bad_gen).is_err());
        let bad_sim = base.replacen("{sim:peer-nrf}", "{sim:nope}", 1);
        assert!(Scenario::from_toml(&bad_sim).is_err());
        assert!(Scenario::from_toml("name = 1").is_err());
        assert!(Scenario::load("no-such-scenario").is_err());
    }
}
