//! The Data Director rows of the report: per source (copies offered and accepted), per feed
//! (delivered, end-to-end latency, success), and the Data Director's CPU per copy, beside the
//! reference's per-feed figures. crate::report puts them in `report.json`, `report.md` and
//! `report.html` in place of the procedure rows.

use std::fmt::Write as _;

use serde::Serialize;

use crate::scenario::Criteria;
use crate::stats::Latency;

#[derive(Debug, Clone, Serialize)]
pub struct DdReport {
    /// Copies per POST at most, and the linger of a partial batch, ms.
    pub batch: usize,
    pub linger_ms: f64,
    pub sources: Vec<SourceRow>,
    pub feeds: Vec<FeedRow>,
    /// Copies accepted per second of the measured window, all sources.
    pub ingested_mps: f64,
    /// The Data Director process's CPU over the window (when the kit started it).
    pub dd_cpu_s: Option<f64>,
    pub dd_cores_used: Option<f64>,
    pub dd_cpu_us_per_copy: Option<f64>,
    pub mps_per_used_core: Option<f64>,
    /// The Kafka broker's CPU over the window and its largest RSS (when the kit started it),
    /// and the cores of the Data Director and the broker together, as the reference's D6 counts
    /// its brokers' with its data path's.
    pub kafka_cpu_s: Option<f64>,
    pub kafka_cores_used: Option<f64>,
    pub kafka_rss_max_mb: Option<f64>,
    pub used_cores_with_kafka: Option<f64>,
    pub mps_per_used_core_with_kafka: Option<f64>,
    /// Seconds after the load until every feed had delivered (or went quiet), and whether
    /// every unfiltered feed had every accepted copy by then.
    pub drain_s: f64,
    pub drained: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct SourceRow {
    pub name: String,
    pub nf_type: String,
    pub trigger_points: Vec<String>,
    pub message_bytes: usize,
    /// The configured rate this run, copies/s.
    pub offered_mps: f64,
    /// Copies due in the measured window, and what became of them.
    pub offered: u64,
    pub sent: u64,
    pub accepted: u64,
    pub accepted_mps: f64,
    /// Copies refused with 503 (each time), the batches refused, copies failed for good and
    /// dropped from the source's buffer while it waited.
    pub refused: u64,
    pub refused_batches: u64,
    pub failed: u64,
    pub dropped: u64,
    pub posts: u64,
    /// `accepted / offered` of the window.
    pub success_rate: f64,
    /// From a batch's time to leave to its 204.
    pub post_latency: Latency,
    pub connections: usize,
    /// Copies accepted over the whole run (warm-up included): what the feeds must deliver.
    pub accepted_total: u64,
    pub verdict: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct EndpointRow {
    pub address: String,
    pub weight: u32,
    pub copies: u64,
    /// Of the feed's copies, percent.
    pub share_pct: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct FeedRow {
    pub name: String,
    pub kind: String,
    pub filter: Option<String>,
    pub balance: String,
    pub delivery: String,
    pub endpoints: Vec<EndpointRow>,
    pub expected_share: f64,
    /// Copies that arrived in the measured window, per second, and their bytes per second.
    pub delivered: u64,
    pub delivered_mps: f64,
    pub delivered_mb_s: f64,
    /// Arrival minus the copy's timestamp, copies that arrived in the window.
    pub e2e: Latency,
    /// Over the whole run, after the drain: copies received, distinct ones, seen twice, not
    /// envelopes, from no source of this run; and the copies the sources had accepted.
    pub received_total: u64,
    pub distinct_total: u64,
    pub duplicates: u64,
    pub malformed: u64,
    pub foreign: u64,
    /// The real NF sources' copies, per NF instance: distinct, gaps and duplicates from the
    /// sequence the run started at.
    pub nf_instances: Vec<super::consumer::InstanceTotals>,
    pub accepted_total: u64,
    /// `distinct_total / accepted_total`.
    pub share: f64,
    /// The share for an unfiltered feed: what it owed and delivered.
    pub success_rate: Option<f64>,
    /// The reference's egress MPS for this feed (full scale) and its average E2E latency.
    pub reference_mps: Option<f64>,
    pub reference_e2e_avg_ms: Option<f64>,
    pub criteria: Criteria,
    pub verdict: String,
}

/// Expected copies below which a sampled feed's share is not judged (too few for a sample).
pub const MIN_JUDGED: f64 = 100.0;

/// The verdict of a feed's share and latency: `pass`, `FAIL: ...` or `n/a (...)`.
pub fn feed_verdict(f: &FeedRow) -> (String, Vec<String>) {
    let mut fails = Vec::new();
    match f.success_rate {
        Some(ok) if ok < f.criteria.min_success_rate => fails.push(format!(
            "delivered {:.3}% of the accepted copies < {:.3}%",
            ok * 100.0,
            f.criteria.min_success_rate * 100.0
        )),
        Some(_) => {}
        None => {
            let expected = f.expected_share * f.accepted_total as f64;
            if expected >= MIN_JUDGED && (f.distinct_total as f64 - expected).abs() > 0.5 * expected
            {
                fails.push(format!(
                    "share {:.3}% is not within half of the expected {:.3}%",
                    f.share * 100.0,
                    f.expected_share * 100.0
                ));
            }
        }
    }
    if f.delivered > 0 && f.e2e.p99_ms > f.criteria.max_p99_ms {
        fails.push(format!("E2E p99 {:.2} ms > {} ms", f.e2e.p99_ms, f.criteria.max_p99_ms));
    }
    // A sampled feed owed too few copies to judge may well get none.
    let owed = f.expected_share * f.accepted_total as f64;
    if f.received_total == 0 && (f.success_rate.is_some() || owed >= MIN_JUDGED) {
        fails.push("nothing delivered".into());
    }
    let verdict = if !fails.is_empty() {
        format!("FAIL: {}", fails.join(", "))
    } else if f.success_rate.is_none() && f.expected_share * (f.accepted_total as f64) < MIN_JUDGED
    {
        "pass (share too small a sample to judge)".into()
    } else {
        "pass".into()
    };
    (verdict, fails)
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or("n/a".into(), |v| format!("{v:.prec$}"))
}

impl DdReport {
    /// The Markdown sections: sources, feeds, endpoints, the Data Director's cost.
    pub fn markdown(&self, s: &mut String) {
        let _ = writeln!(s, "\n## Copy sources (`POST /dd-ingest/v1/copies`)\n\nThe simulated NFs: batches of up to {} copies, or fewer after {} ms; copies counted when their batch was due in the measured window. A real NF (no POST figures): what its copier counted in the window on its `/metrics` (offered: copies kept and dropped; accepted: kept and not refused by the Data Director).\n\n| source | NF | trigger points | bytes/copy | offered/s | offered | accepted | accepted/s | 503 (copies / batches) | failed | dropped | success % | POST p50 ms | POST p99 ms | connections | verdict |\n|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|", self.batch, self.linger_ms);
        for r in &self.sources {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {:.1} | {} | {} | {:.1} | {} / {} | {} | {} | {:.3} | {:.2} | {:.2} | {} | {} |",
                r.name,
                r.nf_type,
                r.trigger_points.join(", "),
                r.message_bytes,
                r.offered_mps,
                r.offered,
                r.accepted,
                r.accepted_mps,
                r.refused,
                r.refused_batches,
                r.failed,
                r.dropped,
                r.success_rate * 100.0,
                r.post_latency.p50_ms,
                r.post_latency.p99_ms,
                r.connections,
                r.verdict
            );
        }
        let _ = writeln!(s, "\n## Feeds (the kit's consumers behind each)\n\nDelivered and E2E (arrival at the consumer minus the copy's timestamp, when the NF, simulated or real, saw the message) over the measured window; distinct, duplicates and share over the whole run after the drain ({:.1} s{}). Success is an unfiltered feed's distinct copies over the copies the sources had accepted.\n\n| feed | kind | filter | expected share % | delivered | delivered/s | MB/s | E2E p50 ms | p90 ms | p99 ms | max ms | mean ms | reference E2E avg ms | reference MPS | distinct | duplicates | share % | success % | verdict |\n|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|", self.drain_s, if self.drained { "" } else { ", not every accepted copy delivered by then" });
        for f in &self.feeds {
            let e = &f.e2e;
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.2} | {} | {:.1} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {} | {} | {} | {} | {:.3} | {} | {} |",
                f.name,
                f.kind,
                f.filter.as_deref().unwrap_or("none"),
                f.expected_share * 100.0,
                f.delivered,
                f.delivered_mps,
                f.delivered_mb_s,
                e.p50_ms,
                e.p90_ms,
                e.p99_ms,
                e.max_ms,
                e.mean_ms,
                opt(f.reference_e2e_avg_ms, 1),
                opt(f.reference_mps, 0),
                f.distinct_total,
                f.duplicates,
                f.share * 100.0,
                f.success_rate.map_or("–".into(), |v| format!("{:.3}", v * 100.0)),
                f.verdict
            );
        }
        if self.feeds.iter().any(|f| !f.nf_instances.is_empty()) {
            let _ = writeln!(s, "\n### Real NF instances\n\nCopies of each NF instance a feed received, counted by the NF's own sequence from where the run started (the NF's copies before it are not the run's).\n\n| feed | NF | instance | first sequence | last sequence | distinct | gaps | duplicates |\n|---|---|---|--:|--:|--:|--:|--:|");
            for f in &self.feeds {
                for i in &f.nf_instances {
                    let _ = writeln!(
                        s,
                        "| {} | {} | {} | {} | {} | {} | {} | {} |",
                        f.name,
                        i.nf_type,
                        i.instance,
                        i.first_sequence,
                        i.last_sequence.map_or("–".into(), |x| x.to_string()),
                        i.distinct,
                        i.gaps,
                        i.duplicates
                    );
                }
            }
        }
        if self.feeds.iter().any(|f| f.endpoints.len() > 1) {
            let _ = writeln!(s, "\n### Endpoints\n\n| feed | balance | consumer | weight | copies | share % |\n|---|---|---|--:|--:|--:|");
            for f in self.feeds.iter().filter(|f| f.endpoints.len() > 1) {
                for e in &f.endpoints {
                    let _ = writeln!(
                        s,
                        "| {} | {} | {} | {} | {} | {:.1} |",
                        f.name, f.balance, e.address, e.weight, e.copies, e.share_pct
                    );
                }
            }
        }
        let _ = writeln!(s, "\n## Data Director cost\n\n| figure | value |\n|---|--:|");
        let _ = writeln!(
            s,
            "| copies ingested per second (accepted, measured window) | {:.1} |",
            self.ingested_mps
        );
        let _ = writeln!(s, "| Data Director CPU seconds | {} |", opt(self.dd_cpu_s, 3));
        let _ = writeln!(
            s,
            "| Data Director cores used (CPU s / wall s) | {} |",
            opt(self.dd_cores_used, 3)
        );
        let _ = writeln!(
            s,
            "| Data Director CPU µs per ingested copy | {} |",
            opt(self.dd_cpu_us_per_copy, 2)
        );
        let _ =
            writeln!(s, "| MPS per Data Director core used | {} |", opt(self.mps_per_used_core, 0));
        if self.kafka_cpu_s.is_some() {
            let _ = writeln!(s, "| Kafka broker CPU seconds | {} |", opt(self.kafka_cpu_s, 3));
            let _ = writeln!(
                s,
                "| Kafka broker cores used (CPU s / wall s) | {} |",
                opt(self.kafka_cores_used, 3)
            );
            let _ = writeln!(
                s,
                "| Kafka broker RSS, largest, MB | {} |",
                opt(self.kafka_rss_max_mb, 0)
            );
            let _ = writeln!(
                s,
                "| Data Director + Kafka broker cores used | {} |",
                opt(self.used_cores_with_kafka, 3)
            );
            let _ = writeln!(
                s,
                "| MPS per Data Director + Kafka broker core used | {} |",
                opt(self.mps_per_used_core_with_kafka, 0)
            );
        }
    }
}
