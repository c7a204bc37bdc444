//! The Data Director's shared state: its configuration, its topics and its counters.

use std::io;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, OnceLock};

use crate::admin::Admin;
use crate::config::DdConfig;
use crate::kafka_pipeline::KafkaPipeline;
use crate::main_index::{IndexedMain, MainStore};
use crate::metrics::Metrics;
use crate::sinks::xdr_store::XdrStore;
use crate::topics::{main_partition, TopicLog, Topics, NF_TOPICS};

/// Where the NF topics and MAIN live.
pub enum Backend {
    Log(Arc<dyn Topics>),
    Kafka(Arc<KafkaPipeline>),
}

pub struct Dd {
    pub config: DdConfig,
    /// The embedded log's topics; none in the Kafka mode.
    pub topics: Option<Arc<dyn Topics>>,
    /// The pipeline over Kafka, in the Kafka mode (`[dd.kafka]`).
    pub kafka: Option<Arc<KafkaPipeline>>,
    nf_topics: [OnceLock<Arc<dyn TopicLog>>; NF_TOPICS.len()],
    /// MAIN's partitions as consumers read them: copies (with `[dd.main] store = "index"`, the
    /// index records resolved to the copies in the NF topics).
    main: Vec<Arc<dyn TopicLog>>,
    /// MAIN's partitions as aggregation writes them: copies, or index records.
    main_log: Vec<Arc<dyn TopicLog>>,
    /// Bytes the ingest API has accepted and not yet seen durable.
    pub ingest_pending: AtomicUsize,
    pub metrics: Arc<Metrics>,
    /// The feeds' metric families, shared by every sink.
    pub feed_metrics: crate::sinks::FeedMetrics,
    /// Feeds, filters and correlations configured through the admin API.
    pub admin: Admin,
    /// `http` or `https`, for Location headers.
    pub scheme: &'static str,
    /// Where correlations store their xDRs (the admin API queries it).
    pub xdr_store: Arc<dyn XdrStore>,
}

impl crate::admin::xdrs::XdrAdmin for Dd {
    fn xdr_store(&self) -> Arc<dyn XdrStore> {
        self.xdr_store.clone()
    }
}

impl Dd {
    /// Opens MAIN's partitions (the NF topics open on first use).
    pub fn new(
        config: DdConfig,
        backend: Backend,
        metrics: Arc<Metrics>,
        feed_metrics: crate::sinks::FeedMetrics,
        admin: Admin,
        scheme: &'static str,
        xdr_store: Arc<dyn XdrStore>,
    ) -> io::Result<Dd> {
        let (topics, kafka) = match backend {
            Backend::Log(t) => (Some(t), None),
            Backend::Kafka(k) => (None, Some(k)),
        };
        let main_log = match &topics {
            Some(t) => (0..config.aggregate.main_partitions)
                .map(|i| t.topic(&main_partition(i)))
                .collect::<io::Result<Vec<_>>>()?,
            None => Vec::new(),
        };
        let main = match (&topics, config.main.store) {
            (Some(t), MainStore::Index) => main_log
                .iter()
                .map(|p| Arc::new(IndexedMain::new(p.clone(), t.clone())) as Arc<dyn TopicLog>)
                .collect(),
            _ => main_log.clone(),
        };
        Ok(Dd {
            config,
            topics,
            kafka,
            nf_topics: Default::default(),
            main,
            main_log,
            ingest_pending: AtomicUsize::new(0),
            metrics,
            feed_metrics,
            admin,
            scheme,
            xdr_store,
        })
    }

    /// The NF topic at `index` of [`NF_TOPICS`].
    pub fn nf_topic(&self, index: usize) -> io::Result<Arc<dyn TopicLog>> {
        if let Some(t) = self.nf_topics[index].get() {
            return Ok(t.clone());
        }
        let Some(topics) = &self.topics else {
            return Err(io::Error::other("the Kafka mode keeps no NF topic on disk"));
        };
        let t = topics.topic(NF_TOPICS[index])?;
        Ok(self.nf_topics[index].get_or_init(|| t).clone())
    }

    /// MAIN's partitions (none in the Kafka mode: MAIN is a Kafka topic).
    pub fn main(&self) -> &[Arc<dyn TopicLog>] {
        &self.main
    }

    /// MAIN's partitions as stored, for aggregation to append to (index records with
    /// `[dd.main] store = "index"`).
    pub fn main_log(&self) -> &[Arc<dyn TopicLog>] {
        &self.main_log
    }
}
