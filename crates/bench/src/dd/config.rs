//! `[dd]` of a scenario file: the copy sources the kit simulates, the filters and feeds it
//! creates through the Data Director's admin API before the load, and the consumers it runs
//! behind each feed. The reference's per-feed figures sit with each feed.
//!
//! ```toml
//! [dd]
//! batch = 256
//! linger_ms = 5
//!
//! [[dd.sources]]
//! name = "scp"
//! nf_type = "SCP"
//! mps = 500000                                    # the reference's, at full scale
//! trigger_points = ["ingress_request", "egress_request"]
//! message_bytes = 3500
//!
//! [[dd.filters]]
//! name = "one-percent"
//! filter = { conditions = [{ sample = { percent = 1, by = "supi" } }] }
//!
//! [[dd.feeds]]
//! name = "tcp-1"
//! kind = "tcp"
//! weights = [1, 1]                                # two consumers behind the feed
//! expected_share = 1.0
//! reference_mps = 500000
//! reference_e2e_avg_ms = 51.4
//!
//! [[dd.feeds]]
//! name = "tcp-2"
//! kind = "tcp"
//! filter = "one-percent"
//! expected_share = 0.01
//! ```

use std::collections::BTreeSet;

use anyhow::{bail, Context, Result};
use dd_client::envelope::TriggerPoint;
use serde::{Deserialize, Serialize};

use crate::scenario::Criteria;

/// What a Data Director scenario sends and where its copies must arrive.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DdScenario {
    /// Copies per POST at most, as an NF's copier batches them (default 256).
    #[serde(default = "default_batch")]
    pub batch: usize,
    /// A batch leaves when it is full or when its oldest copy has waited this long, ms (default
    /// 5): at low rates a copier does not hold copies for a full batch.
    #[serde(default = "default_linger_ms")]
    pub linger_ms: f64,
    /// HTTP/2 connections per source to the ingest API (default 2).
    #[serde(default = "default_connections")]
    pub connections: usize,
    /// POSTs in flight per source at most; beyond, the source waits (a slot wait, reported).
    /// Default 32.
    #[serde(default = "default_max_in_flight")]
    pub max_in_flight: usize,
    /// Copies a source keeps while the Data Director has asked it to wait (503 + Retry-After);
    /// older ones beyond are dropped and counted, as an NF's bounded copy buffer does. Default
    /// 262,144.
    #[serde(default = "default_buffer_copies")]
    pub buffer_copies: u64,
    /// After the load, seconds the feeds get to deliver what was accepted before the counts
    /// are final (default 30; the wait ends as soon as every feed is quiet).
    #[serde(default = "default_drain_s")]
    pub drain_s: f64,
    pub sources: Vec<CopySource>,
    #[serde(default)]
    pub filters: Vec<FilterDef>,
    pub feeds: Vec<FeedDef>,
}

fn default_batch() -> usize {
    256
}
fn default_linger_ms() -> f64 {
    5.0
}
fn default_connections() -> usize {
    2
}
fn default_max_in_flight() -> usize {
    32
}
fn default_buffer_copies() -> u64 {
    262_144
}
fn default_drain_s() -> f64 {
    30.0
}

/// One NF with message copy on: simulated, its copies at its share of the rate; or a real NF
/// the kit starts (`nf`), its copies what the scenario's call mix makes it copy.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CopySource {
    /// Row name in the report (`scp`).
    pub name: String,
    /// The NF type the copies carry (`SCP`, `SEPP`, `NRF`, `BSF`, `PCF`): it picks the copied
    /// message (crate::dd::message) and the Data Director's NF topic.
    pub nf_type: String,
    /// Copies per second at full scale (the reference's MPS: TPS × trigger points).
    pub mps: f64,
    /// The trigger points each transaction is copied at, in order (2 or 4 in the reference).
    pub trigger_points: Vec<String>,
    /// Average size of one copy, the whole envelope (metadata, header list and body), bytes.
    pub message_bytes: usize,
    /// Why the source is simulated when the reference's copies came from a real NF.
    #[serde(default)]
    pub note: String,
    /// The kit-started NF whose own copies this source is (`pcf`: in `nfs`, its `[<nf>.copy]`
    /// on toward `{nf:dd}`), driven by the scenario's `[[procedures]]`: the kit simulates
    /// nothing for it, reads what it offered and what the Data Director took from its
    /// `/metrics`, and counts its copies by NF instance and the NF's own sequence. `mps` and
    /// `message_bytes` are then what the call mix is expected to make it copy.
    #[serde(default)]
    pub nf: Option<String>,
}

impl CopySource {
    pub fn trigger_points(&self) -> Vec<TriggerPoint> {
        self.trigger_points.iter().filter_map(|t| TriggerPoint::parse(t)).collect()
    }
}

/// A filter created before the load: `filter` is the admin API's filter object as given.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilterDef {
    pub name: String,
    pub filter: serde_json::Value,
}

/// The sink kinds a feed may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FeedKind {
    /// Length-framed envelopes over TCP, to the kit's TCP consumers.
    Tcp,
    /// POSTs of framed envelopes, to the kit's HTTP/2 consumers.
    Http2,
    /// Records of a topic of the run (the feed's own, on the broker the kit starts), read by
    /// the kit's Kafka consumers (crate::dd::kafka), the partitions shared among them.
    Kafka,
}

impl FeedKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FeedKind::Tcp => "tcp",
            FeedKind::Http2 => "http2",
            FeedKind::Kafka => "kafka",
        }
    }
}

/// A feed created before the load, with the kit's consumers behind it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeedDef {
    pub name: String,
    pub kind: FeedKind,
    /// A filter of `[[dd.filters]]`; none: every copy.
    pub filter: Option<String>,
    /// One consumer per weight, each an endpoint of the feed's sink (default one). With
    /// `balance = "weighted"` the sink spreads batches by these weights.
    #[serde(default = "one_weight")]
    pub weights: Vec<u32>,
    /// `round_robin` (the default) or `weighted`.
    #[serde(default = "default_balance")]
    pub balance: String,
    /// TCP: `written` (the default) or `acknowledged` (the kit's consumer writes back the count
    /// of frames it processed after each read).
    #[serde(default = "default_delivery")]
    pub delivery: String,
    /// Further fields of the sink object, as the admin API takes them (`max_batch`,
    /// `max_in_flight`, ...).
    #[serde(default)]
    pub sink: serde_json::Map<String, serde_json::Value>,
    /// Share of the accepted copies the feed should deliver: 1 unfiltered, the filter's share
    /// otherwise (a sample by subscriber is judged loosely: see docs/bench.md).
    pub expected_share: f64,
    /// The reference's egress MPS of this feed and its average end-to-end latency.
    pub reference_mps: Option<f64>,
    pub reference_e2e_avg_ms: Option<f64>,
    /// Success (unfiltered feeds: distinct copies delivered / copies accepted) and E2E p99
    /// bounds; default the scenario's `[criteria]`.
    pub criteria: Option<Criteria>,
}

fn one_weight() -> Vec<u32> {
    vec![1]
}
fn default_balance() -> String {
    "round_robin".into()
}
fn default_delivery() -> String {
    "written".into()
}

impl FeedDef {
    pub fn unfiltered(&self) -> bool {
        self.filter.is_none()
    }
}

/// Names the admin API takes: 1-64 of `A-Z a-z 0-9 - _ .`, leaving room for the run's suffix.
fn name_ok(n: &str) -> bool {
    (1..=48).contains(&n.len())
        && n.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// NF types whose copied message the kit knows how to build (crate::dd::message).
pub const NF_TYPES: [&str; 5] = ["SCP", "SEPP", "NRF", "BSF", "PCF"];

impl DdScenario {
    /// Copies per second of all sources at full scale.
    pub fn total_mps(&self) -> f64 {
        self.sources.iter().map(|s| s.mps).sum()
    }

    pub fn validate(&self) -> Result<()> {
        if !(1..=65_536).contains(&self.batch) {
            bail!("dd.batch must be 1..=65536");
        }
        if !(self.linger_ms.is_finite() && self.linger_ms > 0.0) {
            bail!("dd.linger_ms must be > 0");
        }
        if self.connections == 0 || self.max_in_flight == 0 {
            bail!("dd.connections and dd.max_in_flight must be > 0");
        }
        if !(self.drain_s.is_finite() && self.drain_s >= 0.0) {
            bail!("dd.drain_s must be >= 0");
        }
        if self.sources.is_empty() || self.feeds.is_empty() {
            bail!("a Data Director scenario needs [[dd.sources]] and [[dd.feeds]]");
        }
        let mut names = BTreeSet::new();
        for s in &self.sources {
            let what = format!("dd.sources {}", s.name);
            if !name_ok(&s.name) || !names.insert(s.name.as_str()) {
                bail!("{what}: a unique name of letters, digits, '-', '_', '.' is needed");
            }
            if !NF_TYPES.contains(&s.nf_type.as_str()) {
                bail!("{what}: nf_type must be one of {NF_TYPES:?}");
            }
            if !(s.mps.is_finite() && s.mps > 0.0) {
                bail!("{what}: mps must be > 0");
            }
            let tps = s.trigger_points();
            if tps.len() != s.trigger_points.len() || tps.is_empty() || tps.len() > 4 {
                bail!("{what}: trigger_points: 1 to 4 of ingress_request, ingress_response, egress_request, egress_response");
            }
            if !(600..=1_000_000).contains(&s.message_bytes) {
                bail!("{what}: message_bytes must be 600..=1000000 (an envelope of an SBI message with its headers)");
            }
            if s.trigger_points.len() > self.batch {
                bail!("{what}: a batch must hold one transaction's copies");
            }
            // The copies can be built at that size (the messages fit, one has a body to pad).
            let id = super::message::Identity {
                nf_type: &s.nf_type,
                nf_instance: "00000000-0000-4000-8000-000000000000",
                supi_prefix: "imsi-00101",
                gpsi_prefix: "msisdn-33",
            };
            super::message::transaction(&id, &tps, s.message_bytes)
                .with_context(|| what.clone())?;
        }
        let mut filters = BTreeSet::new();
        for f in &self.filters {
            if !name_ok(&f.name) || !filters.insert(f.name.as_str()) {
                bail!(
                    "dd.filters {}: a unique name of letters, digits, '-', '_', '.' is needed",
                    f.name
                );
            }
            if !f.filter.is_object() {
                bail!("dd.filters {}: filter is the admin API's filter object", f.name);
            }
        }
        let mut feeds = BTreeSet::new();
        for f in &self.feeds {
            let what = format!("dd.feeds {}", f.name);
            if !name_ok(&f.name) || !feeds.insert(f.name.as_str()) {
                bail!("{what}: a unique name of letters, digits, '-', '_', '.' is needed");
            }
            if let Some(x) = &f.filter {
                if !filters.contains(x.as_str()) {
                    bail!("{what}: filter {x} is not in [[dd.filters]]");
                }
            }
            if f.weights.is_empty() || f.weights.len() > 16 || f.weights.contains(&0) {
                bail!("{what}: weights: 1 to 16 positive weights, one consumer each");
            }
            if !matches!(f.balance.as_str(), "round_robin" | "weighted") {
                bail!("{what}: balance is round_robin or weighted");
            }
            if !matches!(f.delivery.as_str(), "written" | "acknowledged") {
                bail!("{what}: delivery is written or acknowledged");
            }
            if f.kind != FeedKind::Tcp && f.delivery != "written" {
                bail!("{what}: delivery is a TCP feed's setting");
            }
            for k in ["type", "endpoints", "balance", "delivery", "topic", "bootstrap_servers"] {
                if f.sink.contains_key(k) {
                    bail!("{what}: sink.{k} is set by the kit (kind, weights, balance, delivery, the run's topic and broker)");
                }
            }
            if f.kind == FeedKind::Kafka && f.balance != "round_robin" {
                bail!("{what}: a Kafka feed's consumers share its partitions: balance is round_robin (the weights only count the consumers)");
            }
            if !(f.expected_share > 0.0 && f.expected_share <= 1.0) {
                bail!("{what}: expected_share must be in (0, 1]");
            }
            if f.unfiltered() && f.expected_share != 1.0 {
                bail!("{what}: an unfiltered feed delivers every copy: expected_share = 1");
            }
            if let Some(c) = &f.criteria {
                if !(0.0..=1.0).contains(&c.min_success_rate) || c.max_p99_ms <= 0.0 {
                    bail!("{what}: criteria: min_success_rate 0..=1, max_p99_ms > 0");
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(extra: &str) -> DdScenario {
        let text = format!(
            r#"
[[sources]]
name = "scp"
nf_type = "SCP"
mps = 1000
trigger_points = ["ingress_request", "egress_request"]
message_bytes = 3500

[[filters]]
name = "one-percent"
filter = {{ conditions = [{{ sample = {{ percent = 1, by = "supi" }} }}] }}

[[feeds]]
name = "all"
kind = "tcp"
weights = [60, 40]
balance = "weighted"
expected_share = 1.0

[[feeds]]
name = "sampled"
kind = "http2"
filter = "one-percent"
expected_share = 0.01
{extra}
"#
        );
        toml::from_str(&text).unwrap()
    }

    #[test]
    fn the_documented_shape_parses_and_validates() {
        let d = parse("");
        d.validate().unwrap();
        assert_eq!((d.batch, d.connections, d.max_in_flight), (256, 2, 32));
        assert_eq!(d.total_mps(), 1000.0);
        assert_eq!(d.sources[0].trigger_points().len(), 2);
        // The filter is passed to the admin API as JSON.
        assert_eq!(d.filters[0].filter["conditions"][0]["sample"]["percent"], 1);
        // The module's example parses too.
        let doc = include_str!("config.rs");
        let start = doc.find("//! ```toml\n").unwrap() + "//! ```toml\n".len();
        let end = start + doc[start..].find("//! ```\n").unwrap();
        let example: String = doc[start..end]
            .lines()
            .map(|l| l.strip_prefix("//! ").unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        let root: toml::Table = toml::from_str(&example).unwrap();
        let dd: DdScenario = root["dd"].clone().try_into().unwrap();
        dd.validate().unwrap();
    }

    #[test]
    fn mistakes_are_named() {
        let bad = |edit: &dyn Fn(&mut DdScenario)| {
            let mut d = parse("");
            edit(&mut d);
            d.validate().unwrap_err().to_string()
        };
        assert!(bad(&|d| d.feeds[1].filter = Some("nope".into())).contains("nope"));
        assert!(bad(&|d| d.sources[0].trigger_points.push("sideways".into()))
            .contains("trigger_points"));
        assert!(bad(&|d| d.sources[0].nf_type = "AMF".into()).contains("nf_type"));
        assert!(bad(&|d| d.feeds[0].expected_share = 0.5).contains("unfiltered"));
        assert!(bad(&|d| d.feeds[1].delivery = "acknowledged".into()).contains("TCP"));
        assert!(bad(&|d| {
            d.feeds[0].sink.insert("endpoints".into(), serde_json::json!([]));
        })
        .contains("sink.endpoints"));
        assert!(bad(&|d| d.feeds[0].weights = vec![]).contains("weights"));
        assert!(bad(&|d| d.feeds[1].name = "all".into()).contains("unique"));
        assert!(bad(&|d| d.sources[0].message_bytes = 10).contains("message_bytes"));
    }

    /// D1-D12 and the headline: the reference's figures hang together, the scale is stated, the
    /// sources are the guide's (MPS = TPS x trigger points, its sizes), and a sampled feed
    /// expects the share its filter samples.
    #[test]
    fn the_scenario_files_carry_the_reference() {
        use crate::scenario::Scenario;
        // name, reference id, ingress MPS, requested cores, default scale, feeds by kind.
        let want = [
            ("dd-d1-500k-scp-2tcp", "D1,", 500_000.0, 245.0, 0.1, "tcp tcp"),
            ("dd-d2-360k-scp-3tcp-http2", "D2,", 360_000.0, 234.0, 0.1, "tcp tcp tcp http2"),
            ("dd-d3-360k-scp-tcp", "D3,", 360_000.0, 175.0, 0.1, "tcp"),
            ("dd-d4-270k-mix-http2", "D4,", 270_000.0, 150.0, 0.1, "http2"),
            ("dd-d5-270k-mix-tcp", "D5,", 270_000.0, 128.0, 0.1, "tcp"),
            ("dd-d6-270k-scp-kafka", "D6,", 270_000.0, 88.0, 0.1, "kafka kafka"),
            ("dd-d7-270k-scp-tcp", "D7,", 270_000.0, 151.0, 0.1, "tcp"),
            ("dd-d8-135k-mix-2tcp-replicated", "D8,", 135_000.0, 105.0, 0.2, "tcp tcp"),
            ("dd-d9-30k-pcf-http2", "D9,", 30_000.0, 34.0, 0.1, "http2"),
            ("dd-d10-9k-bsf-http2", "D10,", 9_000.0, 27.0, 1.0, "http2"),
            ("dd-d11-360k-scp-3tcp-http2-vcne", "D11,", 360_000.0, 236.0, 0.1, "tcp tcp tcp http2"),
            ("dd-d12-360k-scp-tcp-vcne", "D12,", 360_000.0, 150.0, 0.1, "tcp"),
            ("dd-embedded-200k", "D1,", 500_000.0, 245.0, 1.0, "tcp tcp"),
            ("dd-kafka-80k", "D6,", 270_000.0, 88.0, 1.0, "kafka kafka"),
        ];
        let all: Vec<String> = Scenario::builtin()
            .unwrap()
            .into_iter()
            .filter(|s| s.dd.is_some())
            .map(|s| s.name)
            .collect();
        assert_eq!(all.len(), want.len(), "{all:?}");
        for (name, id, mps, cores, scale, kinds) in want {
            let s = Scenario::load(name).unwrap();
            let d = s.dd.as_ref().unwrap();
            let r = s.reference.as_ref().unwrap();
            assert!(r.scenario.starts_with(id), "{name}: {}", r.scenario);
            assert_eq!((r.tps_achieved, r.cpu_requested), (mps, cores), "{name}");
            assert!((r.tps_achieved / r.cpu_requested - r.tps_per_core).abs() < 1.0, "{name}");
            let used = r.used_cores.unwrap();
            assert!((r.tps_achieved / used - r.tps_per_used_core.unwrap()).abs() < 1.0, "{name}");
            assert!(r.used_cores_include.as_deref().unwrap().contains("Kafka"), "{name}");
            assert_eq!(s.load.default_scale.unwrap_or(1.0), scale, "{name}");
            assert!((s.load.rate - d.total_mps()).abs() < 1.0, "{name}");
            let here = s.default_rate();
            if !["dd-embedded-200k", "dd-kafka-80k"].contains(&name) {
                // The reference's rate in the file, ours in the description.
                assert!((s.load.rate - mps).abs() <= mps * 0.01, "{name}");
                let k = format!("{}K MPS here", (here / 1000.0 * 10.0).round() / 10.0);
                let full = scale == 1.0 && s.description.contains("at the reference's rate here");
                assert!(full || s.description.contains(&k), "{name}: {k}: {}", s.description);
            }
            let got: Vec<&str> = d.feeds.iter().map(|f| f.kind.as_str()).collect();
            assert_eq!(got.join(" "), kinds, "{name}");
            for f in &d.feeds {
                assert!(f.reference_mps.is_some() && f.reference_e2e_avg_ms.is_some(), "{name}");
                let Some(x) = &f.filter else { continue };
                let flt = d.filters.iter().find(|g| &g.name == x).unwrap();
                let pct = flt.filter["conditions"][0]["sample"]["percent"].as_f64().unwrap();
                assert!((pct / 100.0 - f.expected_share).abs() < 1e-9, "{name}: {}", f.name);
            }
            for src in &d.sources {
                let (tps, size) = match src.nf_type.as_str() {
                    "SCP" => (2, [3500, 3564, 1200]),
                    "SEPP" => (if d.sources.len() == 5 { 4 } else { 2 }, [3000; 3]),
                    "NRF" => (2, [3000; 3]),
                    "PCF" => (2, [2079; 3]),
                    _ => (2, [1200; 3]),
                };
                assert_eq!(src.trigger_points.len(), tps, "{name}: {}", src.name);
                assert!(size.contains(&src.message_bytes), "{name}: {}", src.name);
                // The reference's NRF, BSF and PCF copies came from the real NFs: from ours
                // too (`nf`), or a note says why they are simulated.
                let real = ["NRF", "BSF", "PCF"].contains(&src.nf_type.as_str());
                let simulated = src.note.contains("simulated");
                assert_eq!(real, src.nf.is_some() || simulated, "{name}: {}", src.name);
                assert!(!(src.nf.is_some() && simulated), "{name}: {}", src.name);
                if let Some(nf) = &src.nf {
                    assert_eq!(nf.to_uppercase(), src.nf_type, "{name}: {}", src.name);
                    let copy = &s.nf_config[nf]["copy"];
                    assert_eq!(copy["uri"].as_str(), Some("{nf:dd}"), "{name}");
                    let triggers: Vec<&str> = copy["triggers"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .filter_map(|t| t.as_str())
                        .collect();
                    assert_eq!(triggers, src.trigger_points, "{name}: the copies counted");
                }
            }
        }
        let h = Scenario::load("dd-embedded-200k").unwrap();
        assert_eq!((h.load.rate, h.criteria.max_p99_ms), (200_000.0, 10.0));
        assert_eq!(h.dd.as_ref().unwrap().sources[0].message_bytes, 1200);
        let k = Scenario::load("dd-kafka-80k").unwrap();
        assert_eq!((k.load.rate, k.criteria.max_p99_ms), (80_000.0, 10.0));
        assert_eq!(k.dd.as_ref().unwrap().sources[0].message_bytes, 1200);
        let mode = &k.nf_config["dd"]["kafka"]["bootstrap_servers"];
        assert_eq!(mode.as_str(), Some(super::super::kafka::BOOTSTRAP_VAR));
    }

    /// A real NF source (D9's PCF) comes with the call mix that drives it, at its copy rate,
    /// and its NF after the Data Director in `nfs`.
    #[test]
    fn a_real_nf_source_is_driven_by_its_procedures_at_its_copy_rate() {
        use crate::scenario::Scenario;
        let d9 = include_str!("../../../../scenarios/dd-d9-30k-pcf-http2.toml");
        Scenario::from_toml(d9).unwrap();
        let err = |text: String| format!("{:#}", Scenario::from_toml(&text).unwrap_err());
        // 7,000 + 5,000 + 4,000 TPS, 2 trigger points: not the source's 30,000 copies/s.
        let e = err(d9.replace("tps = 6000", "tps = 7000"));
        assert!(e.contains("TPS x 2 trigger points"), "{e}");
        // Procedures without a real NF source to drive, or a real NF the kit does not start.
        let e = err(d9.replace("nf = \"pcf\"\nnf_type", "nf_type"));
        assert!(e.contains("procedures only when a source is a real NF"), "{e}");
        let e = err(d9.replace("nf = \"pcf\"\nnf_type", "nf = \"bsf\"\nnf_type"));
        assert!(e.contains("procedures only when a source is a real NF"), "{e}");
        let e = err(d9.replace("nfs = [\"dd\", \"pcf\"]", "nfs = [\"pcf\", \"dd\"]"));
        assert!(e.contains("procedures only when a source is a real NF"), "{e}");
    }

    #[test]
    fn a_kafka_feed_gets_its_topic_and_broker_from_the_kit_and_shares_partitions() {
        let mut d = parse("");
        d.feeds[1].kind = FeedKind::Kafka;
        d.feeds[1].weights = vec![1, 1];
        d.validate().unwrap();
        d.feeds[1].sink.insert("topic".into(), serde_json::json!("t"));
        assert!(d.validate().unwrap_err().to_string().contains("sink.topic"));
        d.feeds[1].sink.clear();
        d.feeds[1].balance = "weighted".into();
        assert!(d.validate().unwrap_err().to_string().contains("round_robin"));
    }
}
