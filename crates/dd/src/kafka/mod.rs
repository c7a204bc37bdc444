//! The Kafka mode (issue #24, "Two modes, one design": scale-out): the NF topics and MAIN live on
//! a Kafka cluster instead of the embedded on-disk logs, and several Data Director instances
//! share their partitions through consumer groups. The pipeline sees the same shape as over the
//! embedded log:
//!
//! - [`ensure_topics`]: the admin side; creates the topics that are missing with their
//!   partitions and `retention.ms`, adds partitions to topics that have fewer than configured,
//!   and sets a retention that differs.
//! - [`Producer::append_batch`]: resolves once the brokers have acknowledged every record of the
//!   batch (acks from every in-sync replica, idempotent, so retries neither duplicate nor
//!   reorder a partition's records); a record that cannot be delivered fails the batch, so the
//!   caller sees it and nothing is lost silently.
//! - [`Consumer`]: one member of a consumer group, yielding batches of `(partition, offset,
//!   payload)`; the offsets of a batch are stored only when the caller says it is done
//!   ([`Consumer::done`]) and the stored ones are committed every `commit_interval_ms` and when
//!   the consumer closes: at-least-once.
//!
//! Every client checks at creation that the cluster answers within `request_timeout_ms`, so a
//! wrong address or a broker that is down is a clear error at start, not a silent wait.
//! librdkafka (rdkafka, built from source) does the protocol; its logs go to `tracing` under the
//! target `librdkafka`.

mod admin;
pub mod config;
mod consumer;
mod producer;

use std::time::Duration;

use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::ConsumerContext;

pub use admin::{ensure_topics, EnsureReport};
pub use config::{KafkaConfig, TopicSpec, MAIN, NF_TOPICS};
pub use consumer::{Batch, Consumer, Record};
pub use producer::{Delivered, Producer};

/// What went wrong talking to Kafka. The librdkafka error is kept as the source.
#[derive(Debug, thiserror::Error)]
pub enum KafkaError {
    #[error("invalid Kafka configuration: {0}")]
    Config(String),
    #[error("the Kafka cluster at {bootstrap} did not answer within {timeout_ms} ms: {source}")]
    Unreachable {
        bootstrap: String,
        timeout_ms: u64,
        #[source]
        source: rdkafka::error::KafkaError,
    },
    #[error("{what}: {source}")]
    Client {
        what: String,
        #[source]
        source: rdkafka::error::KafkaError,
    },
    #[error("topic {topic}: {reason}")]
    Topic { topic: String, reason: String },
    #[error("record {index} of the batch for topic {topic} was not delivered: {source}")]
    Delivery {
        topic: String,
        index: usize,
        #[source]
        source: rdkafka::error::KafkaError,
    },
}

impl KafkaError {
    /// Whether trying again later can succeed: a cluster away, a timeout, a rebalance. Not for a
    /// configuration the cluster refuses (a record larger than it takes, a topic it does not
    /// have, an authorisation it denies), which needs an operator.
    pub fn retryable(&self) -> bool {
        use rdkafka::error::RDKafkaErrorCode as C;
        let code = match self {
            KafkaError::Config(_) | KafkaError::Topic { .. } => return false,
            KafkaError::Unreachable { .. } => return true,
            KafkaError::Client { source, .. } | KafkaError::Delivery { source, .. } => {
                source.rdkafka_error_code()
            }
        };
        !matches!(
            code,
            Some(
                C::MessageSizeTooLarge
                    | C::InvalidMessageSize
                    | C::UnknownTopicOrPartition
                    | C::UnknownTopic
                    | C::TopicAuthorizationFailed
                    | C::ClusterAuthorizationFailed
                    | C::SaslAuthenticationFailed
                    | C::Authentication
                    | C::InvalidConfig
                    | C::InvalidArgument
            )
        )
    }

    fn client(what: impl Into<String>) -> impl FnOnce(rdkafka::error::KafkaError) -> KafkaError {
        let what = what.into();
        move |source| KafkaError::Client { what, source }
    }
}

/// Refuses a configuration that does not validate, naming every bad field.
fn validated(cfg: &KafkaConfig) -> Result<(), KafkaError> {
    let bad = cfg.validate("/dd/kafka");
    if bad.is_empty() {
        return Ok(());
    }
    let list: Vec<String> =
        bad.into_iter().map(|p| format!("{}: {}", p.param, p.reason.unwrap_or_default())).collect();
    Err(KafkaError::Config(list.join("; ")))
}

/// Routes librdkafka's logs and errors to `tracing`, saying which client spoke.
pub(crate) struct LogContext {
    role: String,
}

impl LogContext {
    pub(crate) fn new(role: impl Into<String>) -> Self {
        LogContext { role: role.into() }
    }
}

impl ClientContext for LogContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        log(&self.role, level, fac, message);
    }
    fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
        tracing::warn!(target: "librdkafka", client = %self.role, "{error}: {reason}");
    }
}

impl ConsumerContext for LogContext {}

pub(crate) fn log(role: &str, level: RDKafkaLogLevel, fac: &str, message: &str) {
    match level {
        RDKafkaLogLevel::Emerg
        | RDKafkaLogLevel::Alert
        | RDKafkaLogLevel::Critical
        | RDKafkaLogLevel::Error => {
            tracing::error!(target: "librdkafka", client = %role, "{fac} {message}")
        }
        RDKafkaLogLevel::Warning => {
            tracing::warn!(target: "librdkafka", client = %role, "{fac} {message}")
        }
        RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
            tracing::info!(target: "librdkafka", client = %role, "{fac} {message}")
        }
        RDKafkaLogLevel::Debug => {
            tracing::debug!(target: "librdkafka", client = %role, "{fac} {message}")
        }
    }
}

/// Runs `ask`, a metadata request of some client, off the async workers (librdkafka blocks
/// there), so a client that cannot reach the cluster fails now, with the address and the wait
/// in its error.
async fn ask_cluster<T, F>(cfg: &KafkaConfig, ask: F) -> Result<T, KafkaError>
where
    T: Send + 'static,
    F: FnOnce(Duration) -> rdkafka::error::KafkaResult<T> + Send + 'static,
{
    let timeout = Duration::from_millis(cfg.request_timeout_ms);
    let answer =
        tokio::task::spawn_blocking(move || ask(timeout)).await.expect("metadata request panicked");
    answer.map_err(|source| KafkaError::Unreachable {
        bootstrap: cfg.bootstrap_servers.clone(),
        timeout_ms: cfg.request_timeout_ms,
        source,
    })
}

/// What a metadata answer says of one topic: present and every partition led.
type TopicReady = (String, bool);

/// The topics of `wanted` the cluster does not show ready yet (present, every partition with a
/// leader), asking again every 100 ms until none is missing or `request_timeout_ms` has passed:
/// a topic just created (here or by another instance) takes a moment to reach every broker's
/// metadata.
async fn not_ready<F>(
    cfg: &KafkaConfig,
    wanted: &[String],
    fetch: F,
) -> Result<Vec<String>, KafkaError>
where
    F: Fn(Duration) -> rdkafka::error::KafkaResult<Vec<TopicReady>> + Clone + Send + 'static,
{
    let deadline = std::time::Instant::now() + Duration::from_millis(cfg.request_timeout_ms);
    loop {
        let topics = ask_cluster(cfg, fetch.clone()).await?;
        let missing: Vec<String> = wanted
            .iter()
            .filter(|w| !topics.iter().any(|(name, ready)| name == *w && *ready))
            .cloned()
            .collect();
        if missing.is_empty() || std::time::Instant::now() >= deadline {
            return Ok(missing);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn readiness(md: &rdkafka::metadata::Metadata) -> Vec<TopicReady> {
    md.topics()
        .iter()
        .map(|t| {
            let ready = t.error().is_none()
                && !t.partitions().is_empty()
                && t.partitions().iter().all(|p| p.leader() >= 0);
            (t.name().to_string(), ready)
        })
        .collect()
}
