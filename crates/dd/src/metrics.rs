//! The Data Director's pipeline metrics, on its /metrics (the feeds register their own):
//! - `dd_ingest_copies_total{topic}`: copies accepted into each NF topic (durable);
//! - `dd_ingest_bytes_total`, `dd_ingest_requests_total`: what the ingest API took;
//! - `dd_ingest_refused_total`, `dd_ingest_refused_bytes_total`: batches shed with 503 because
//!   `max_pending_bytes` were already being written;
//! - `dd_aggregated_total{topic}`: copies moved from each NF topic into MAIN;
//! - `dd_retention_skipped_total{topic,consumer}`: copies a consumer never read because retention
//!   removed them first (a feed or aggregation too slow for its topic's retention);
//! - `dd_main_unresolved_total{topic,consumer}`: MAIN index records (`[dd.main] store =
//!   "index"`) a consumer skipped because their NF topic no longer had the copy.
//!
//! Counters are created once per topic at start, so the hot path bumps an atomic and never
//! hashes a label set.

use std::sync::{Arc, Mutex};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::topics::NF_TOPICS;

type Labels = Vec<(&'static str, String)>;

#[derive(Debug)]
pub struct Metrics {
    ingested: Vec<Counter>,
    aggregated: Vec<Counter>,
    aggregate_skipped: Vec<Counter>,
    ingest_bytes: Counter,
    ingest_requests: Counter,
    refused: Counter,
    refused_bytes: Counter,
    skipped: Family<Labels, Counter>,
    /// Feed consumers' skip counters, by (topic, consumer), made on first use.
    skipped_by_consumer: Mutex<Vec<((String, String), Counter)>>,
    unresolved: Family<Labels, Counter>,
    unresolved_by_consumer: Mutex<Vec<((String, String), Counter)>>,
}

impl Metrics {
    pub fn register(r: &mut Registry) -> Arc<Metrics> {
        let ingested_f = Family::<Labels, Counter>::default();
        let aggregated_f = Family::<Labels, Counter>::default();
        let skipped = Family::<Labels, Counter>::default();
        let per_topic = |f: &Family<Labels, Counter>| -> Vec<Counter> {
            NF_TOPICS
                .iter()
                .map(|t| f.get_or_create(&vec![("topic", t.to_string())]).clone())
                .collect()
        };
        let m = Metrics {
            ingested: per_topic(&ingested_f),
            aggregated: per_topic(&aggregated_f),
            aggregate_skipped: NF_TOPICS
                .iter()
                .map(|t| {
                    skipped
                        .get_or_create(&vec![
                            ("topic", t.to_string()),
                            ("consumer", crate::transforms::aggregate::CONSUMER.to_string()),
                        ])
                        .clone()
                })
                .collect(),
            ingest_bytes: Counter::default(),
            ingest_requests: Counter::default(),
            refused: Counter::default(),
            refused_bytes: Counter::default(),
            skipped: skipped.clone(),
            skipped_by_consumer: Mutex::new(Vec::new()),
            unresolved: Family::default(),
            unresolved_by_consumer: Mutex::new(Vec::new()),
        };
        r.register(
            "dd_main_unresolved",
            "MAIN index records skipped because their NF topic no longer had the copy",
            m.unresolved.clone(),
        );
        r.register("dd_ingest_copies", "Copies accepted into each NF topic", ingested_f);
        r.register("dd_aggregated", "Copies moved from each NF topic into MAIN", aggregated_f);
        r.register(
            "dd_retention_skipped",
            "Copies a consumer never read because retention removed them first",
            skipped,
        );
        r.register(
            "dd_ingest_bytes",
            "Bytes of copies accepted by the ingest API",
            m.ingest_bytes.clone(),
        );
        r.register(
            "dd_ingest_requests",
            "Batches accepted by the ingest API",
            m.ingest_requests.clone(),
        );
        r.register(
            "dd_ingest_refused",
            "Batches shed with 503 (ingest queue full)",
            m.refused.clone(),
        );
        r.register(
            "dd_ingest_refused_bytes",
            "Bytes of the batches shed with 503",
            m.refused_bytes.clone(),
        );
        Arc::new(m)
    }

    pub fn ingested(&self, topic: usize, copies: usize) {
        self.ingested[topic].inc_by(copies as u64);
    }

    pub fn ingest_bytes(&self, bytes: usize, _copies: usize) {
        self.ingest_bytes.inc_by(bytes as u64);
        self.ingest_requests.inc();
    }

    pub fn ingest_refused(&self, bytes: usize) {
        self.refused.inc();
        self.refused_bytes.inc_by(bytes as u64);
    }

    pub fn aggregated(&self, topic: usize, copies: usize) {
        self.aggregated[topic].inc_by(copies as u64);
    }

    pub fn aggregate_skipped(&self, topic: usize, copies: u64) {
        self.aggregate_skipped[topic].inc_by(copies);
    }

    /// A feed consumer lost `copies` of `topic` to retention.
    pub fn consumer_skipped(&self, topic: &str, consumer: &str, copies: u64) {
        count(&self.skipped, &self.skipped_by_consumer, topic, consumer, copies);
    }

    /// A consumer of MAIN partition `topic` skipped `records` index records whose copy was gone.
    pub fn consumer_unresolved(&self, topic: &str, consumer: &str, records: u64) {
        count(&self.unresolved, &self.unresolved_by_consumer, topic, consumer, records);
    }
}

/// Adds `n` to `family`'s counter for (topic, consumer), kept in `known` so that the next time
/// hashes no label set.
fn count(
    family: &Family<Labels, Counter>,
    known: &Mutex<Vec<((String, String), Counter)>>,
    topic: &str,
    consumer: &str,
    n: u64,
) {
    let mut known = known.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, c)) = known.iter().find(|((t, k), _)| t == topic && k == consumer) {
        c.inc_by(n);
        return;
    }
    let c = family
        .get_or_create(&vec![("topic", topic.to_string()), ("consumer", consumer.to_string())])
        .clone();
    c.inc_by(n);
    known.push(((topic.to_string(), consumer.to_string()), c));
}
