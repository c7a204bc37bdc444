//! The Data Director (issue #24), built like Vector: sources (NF message copies through the ingest
//! API, Kafka), transforms (per-NF aggregation into MAIN with ordering, filters, correlation into
//! xDRs) and sinks (HTTP/2, TCP and Kafka feeds, xDR storage), each a module with its `config.rs`
//! and its tests.
//!
//! A newcomer's map: [`config`] is `[dd]`; [`sources::ingest`] is `POST /dd-ingest/v1/copies`;
//! [`topics`] names the NF topics and MAIN and says what a topic backend gives; [`log`] is the
//! embedded on-disk log those topics live in ([`log_topics`] binds the two);
//! [`transforms::aggregate`] merges the NF topics into MAIN; [`pipeline`] runs a feed's consumers
//! of MAIN through its filter into its sink; [`admin`] is the admin API that creates them;
//! [`components`] builds a sink, a filter or a correlator from its configuration. The copy format
//! is `dd_client::envelope`. [`bind`] builds it all; [`Bound::serve`] / [`run`] serve until
//! shutdown.

pub mod admin;
pub mod components;
pub mod config;
pub mod context;
pub mod kafka;
pub mod kafka_pipeline;
pub mod log;
pub mod log_topics;
pub mod main_index;
pub mod metrics;
pub mod pipeline;
pub mod sinks;
pub mod sources;
pub mod topics;
pub mod transforms;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use http::Method;
use nf::{Serving, Skeleton, Spec};
use sbi::client::ClientConfig;
use sbi::{Router, ServerConfig};
use store::{AnyStore, SqliteConfig};

pub use config::DdConfig;
pub use context::Dd;
pub use dd_client::envelope;

/// Everything `run` needs: the `[dd]` section and the shared sections of the configuration.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub dd: DdConfig,
    pub sbi: ServerConfig,
    pub client: ClientConfig,
    pub store: SqliteConfig,
    pub instance_id: Option<String>,
}

pub type DdError = nf::StartError;

/// The ingest and admin routes over `dd`.
pub fn router(dd: Arc<Dd>) -> Router {
    let b = Router::builder(dd).route(
        Method::POST,
        sources::ingest::PATH,
        sources::ingest::OPERATION,
        sources::ingest::copies,
    );
    admin::xdrs::routes(admin::routes(b)).build()
}

/// A bound Data Director, its topics open and its pipeline running.
pub struct Bound {
    serving: Serving<AnyStore>,
    dd: Arc<Dd>,
}

/// The log directory: `[dd] log_dir`, or `dd-log` beside the store's database.
pub fn log_dir(config: &RunConfig) -> PathBuf {
    config.dd.log_dir.clone().unwrap_or_else(|| {
        let db = &config.store.path;
        db.parent().map(|p| p.join("dd-log")).unwrap_or_else(|| PathBuf::from("dd-log"))
    })
}

/// The NF skeleton's steps for the Data Director: the store (admin configuration and xDRs, on
/// the backend `[store] backend` names; on MySQL the other instances' admin changes followed)
/// and the log open, the SBI port bound, the aggregation of every NF topic into MAIN started,
/// and the feeds, filters and correlations the admin API configured before started again.
pub async fn bind(config: RunConfig) -> Result<Bound, DdError> {
    config.dd.validate().map_err(DdError::Config)?;
    let mut sbi = config.sbi.clone();
    // A batch of copies is one request: the server's body limit must let the largest through.
    sbi.max_body_bytes = sbi.max_body_bytes.max(config.dd.ingest.max_request_bytes);
    let skeleton = Skeleton::open_any(Spec {
        nf_type: "DD",
        instance_id: config.instance_id.clone(),
        sbi,
        client: config.client.clone(),
        store: config.store.clone(),
        nrf: None,
        // The Data Director does not copy its own traffic: its ingest would feed itself.
        copy: dd_client::CopyConfig::default(),
    })
    .await?;
    let dir = log_dir(&config);
    let (log, backend) = match &config.dd.kafka {
        Some(k) => {
            let pipeline = kafka_pipeline::KafkaPipeline::start(k)
                .await
                .map_err(|e| DdError::Config(format!("[dd.kafka]: {e}")))?;
            (None, context::Backend::Kafka(Arc::new(pipeline)))
        }
        None => {
            let (at, dd_config) = (dir.clone(), config.dd.clone());
            let log =
                tokio::task::spawn_blocking(move || log_topics::LogTopics::open(&at, &dd_config))
                    .await
                    .map_err(|e| DdError::Config(format!("opening the log: {e}")))?
                    .map_err(|e| DdError::Config(format!("the log in {}: {e}", dir.display())))?;
            (Some(log.clone()), context::Backend::Log(log))
        }
    };
    let metrics = skeleton.observability().with_registry(metrics::Metrics::register);
    let feed_metrics = sinks::FeedMetrics::default();
    skeleton.observability().with_registry(|r| feed_metrics.register(r));
    let admin = admin::Admin::new(skeleton.store().clone());
    let xdr_store: Arc<dyn sinks::xdr_store::XdrStore> = match skeleton.store() {
        AnyStore::Sqlite(s) => Arc::new(sinks::xdr_store::SqliteXdrStore::on(s.clone()).await?),
        AnyStore::Mysql(m) => Arc::new(sinks::xdr_store::MysqlXdrStore::on(m.clone()).await?),
    };
    // Positioned before the admin objects load (below), so another instance's change made
    // meanwhile is loaded or followed.
    let follower = admin::coherence::prepare(skeleton.store()).await?;
    let dd = Arc::new(
        Dd::new(
            config.dd.clone(),
            backend,
            metrics.clone(),
            feed_metrics,
            admin,
            skeleton.scheme(),
            xdr_store.clone(),
        )
        .map_err(|e| DdError::Config(format!("the log in {}: {e}", dir.display())))?,
    );
    if dd.kafka.is_none() {
        main_index::check_partitions(dd.main_log(), dd.config.main.store)
            .await
            .map_err(DdError::Config)?;
    }
    let mut serving = skeleton.bind(router(dd.clone())).await?;

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut tasks = Vec::new();
    if let Some(kafka) = &dd.kafka {
        tasks.push(kafka.spawn_aggregation(
            dd.config.aggregate.ordering,
            dd.config.aggregate.batch,
            metrics.clone(),
            stop_rx.clone(),
        ));
    } else {
        for (i, _) in topics::NF_TOPICS.iter().enumerate() {
            let nf = dd.nf_topic(i).map_err(DdError::Io)?;
            tasks.push(tokio::spawn(transforms::aggregate::run(
                nf,
                i,
                dd.main_log().to_vec(),
                dd.config.aggregate.clone(),
                dd.config.main.store,
                metrics.clone(),
                stop_rx.clone(),
            )));
        }
    }
    let retention = log.map(|l| l.spawn_retention(Duration::from_secs(10)));
    if let Some(src) = &dd.config.kafka_source {
        let source = sources::kafka::KafkaSource::build(src, dd.config.kafka.as_ref())
            .await
            .map_err(|e| DdError::Config(format!("[dd.kafka_source]: {e}")))?;
        let (into, mut stop) = (IntoPipeline(dd.clone()), stop_rx.clone());
        tasks.push(tokio::spawn(async move {
            let stopped = async move {
                let _ = stop.wait_for(|s| *s).await;
            };
            if let Err(e) = source.run(&into, stopped).await {
                tracing::error!(error = %e, "the Kafka source stopped");
            }
        }));
    }
    let xdr_retention =
        tokio::spawn(sinks::xdr_store::run_retention(xdr_store, config.dd.xdr_store.clone(), {
            let mut stop = stop_rx.clone();
            async move {
                let _ = stop.wait_for(|s| *s).await;
            }
        }));
    dd.admin.load(&dd).await?;
    let (stop_follow_tx, stop_follow_rx) = tokio::sync::watch::channel(false);
    let follow =
        follower.map(|r| tokio::spawn(admin::coherence::run(dd.clone(), r, stop_follow_rx)));
    let stopping = dd.clone();
    serving.on_stop(async move {
        // The change feed first (it would start what the next step stops), then the feeds (they
        // stop at a batch boundary, offsets committed), then aggregation.
        let _ = stop_follow_tx.send(true);
        if let Some(f) = follow {
            let _ = f.await;
        }
        stopping.admin.stop().await;
        let _ = stop_tx.send(true);
        for t in tasks {
            let _ = t.await;
        }
        if let Some(r) = retention {
            r.abort();
        }
        let _ = xdr_retention.await;
    });
    Ok(Bound { serving, dd })
}

/// The Kafka source's way into the pipeline: the NF topics, as the ingest API's batches go.
struct IntoPipeline(Arc<Dd>);

impl sources::kafka::Downstream for IntoPipeline {
    type Error = String;
    async fn accept(&self, copies: &[dd_client::Copy]) -> Result<(), String> {
        sources::ingest::append_copies(&self.0, copies).await
    }
}

impl Bound {
    pub fn local_addr(&self) -> SocketAddr {
        self.serving.local_addr()
    }

    pub fn dd(&self) -> &Arc<Dd> {
        &self.dd
    }

    /// Serves until `shutdown`, then stops as every NF does: the SBI port drains, the feeds and
    /// aggregation stop at a batch boundary, the store closes.
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> Result<(), DdError> {
        self.serving.serve(shutdown).await
    }
}

/// Runs the Data Director until `shutdown` completes.
pub async fn run(config: RunConfig, shutdown: impl Future<Output = ()>) -> Result<(), DdError> {
    let bound = bind(config).await?;
    tracing::info!(addr = %bound.local_addr(), "Data Director serving");
    bound.serve(shutdown).await
}
