//! The Data Director's shared state: its configuration, its topics and its counters.

use std::io;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, OnceLock};

use crate::admin::Admin;
use crate::config::DdConfig;
use crate::metrics::Metrics;
use crate::sinks::xdr_store::XdrStore;
use crate::topics::{main_partition, TopicLog, Topics, NF_TOPICS};

pub struct Dd {
    pub config: DdConfig,
    pub topics: Arc<dyn Topics>,
    nf_topics: [OnceLock<Arc<dyn TopicLog>>; NF_TOPICS.len()],
    main: Vec<Arc<dyn TopicLog>>,
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
        topics: Arc<dyn Topics>,
        metrics: Arc<Metrics>,
        feed_metrics: crate::sinks::FeedMetrics,
        admin: Admin,
        scheme: &'static str,
        xdr_store: Arc<dyn XdrStore>,
    ) -> io::Result<Dd> {
        let main = (0..config.aggregate.main_partitions)
            .map(|i| topics.topic(&main_partition(i)))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Dd {
            config,
            topics,
            nf_topics: Default::default(),
            main,
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
        let t = self.topics.topic(NF_TOPICS[index])?;
        Ok(self.nf_topics[index].get_or_init(|| t).clone())
    }

    /// MAIN's partitions.
    pub fn main(&self) -> &[Arc<dyn TopicLog>] {
        &self.main
    }
}
