//! `[dd.kafka]`: the Kafka cluster of the scale-out mode (docs/dd.md, "Kafka mode"). Only
//! `bootstrap_servers` is required; every other field has the default the reference guide uses
//! (topics per NF plus MAIN, 6 partitions each, NF topics kept 5 minutes and MAIN 6 hours,
//! replication factor 1, acks from every in-sync replica). Unknown keys are errors, so a typo
//! never falls back to a default silently.
//!
//! ```toml
//! [dd.kafka]
//! bootstrap_servers = "10.0.0.5:9092,10.0.0.6:9092"
//! nf_partitions = 12            # 6 per aggregation instance, as the guide sizes them
//! [dd.kafka.topic.pcf]
//! partitions = 18
//! [dd.kafka.producer]
//! compression = "lz4"
//! [dd.kafka.security]
//! protocol = "sasl_ssl"
//! sasl_mechanism = "SCRAM-SHA-512"
//! sasl_username = "dd"
//! sasl_password = "secret"
//! ssl_ca_location = "/etc/fivecore/kafka-ca.pem"
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;

use rdkafka::ClientConfig;
use sbi::InvalidParam;
use serde::{Deserialize, Serialize};

/// The NF topics, one per source NF like the reference's, in the order `topics()` lists them;
/// a copy from an NF type not listed goes to `other`.
pub use crate::topics::NF_TOPICS;

/// The key of the topic every NF topic is aggregated into, and the feeds read.
pub const MAIN: &str = "main";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaConfig {
    /// The brokers to bootstrap from: `host:port`, comma-separated. Required.
    pub bootstrap_servers: String,

    /// Prepended to every topic name (several Data Directors, or other users, on one cluster).
    /// Default empty: the topics are `NRF`, `UDR`, `BSF`, `PCF`, `SCP`, `SEPP`, `OTHER`, `MAIN`.
    #[serde(default)]
    pub topic_prefix: String,

    /// Partitions of each NF topic. The guide gives 6 per aggregation instance reading it.
    /// Default 6.
    #[serde(default = "default_partitions")]
    pub nf_partitions: u32,

    /// Partitions of MAIN: 6 (or 9) per instance consuming it, in the guide. Default 6.
    #[serde(default = "default_partitions")]
    pub main_partitions: u32,

    /// How long an NF topic keeps a copy, seconds (`retention.ms`). Default 300 (the guide's 5
    /// minutes: long enough for aggregation to catch up after a restart).
    #[serde(default = "default_nf_retention_secs")]
    pub nf_retention_secs: u64,

    /// How long MAIN keeps a copy, seconds: how long a feed may be down and lose nothing.
    /// Default 21600 (6 hours, the guide's maximum).
    #[serde(default = "default_main_retention_secs")]
    pub main_retention_secs: u64,

    /// Replicas of each topic the Data Director creates. Default 1, as every scenario of the
    /// guide (it relies on storage redundancy below the brokers).
    #[serde(default = "default_replication_factor")]
    pub replication_factor: u16,

    /// Per-topic settings (`[dd.kafka.topic.pcf]`, `[dd.kafka.topic.main]`), over the ones above.
    #[serde(default)]
    pub topic: BTreeMap<String, TopicOverride>,

    #[serde(default)]
    pub producer: ProducerConfig,

    #[serde(default)]
    pub consumer: ConsumerConfig,

    #[serde(default)]
    pub security: SecurityConfig,

    /// How long the connection check at start, a metadata request or a topic operation may
    /// take, ms. Default 10000.
    #[serde(default = "default_request_timeout_ms")]
    pub request_timeout_ms: u64,

    /// Any other librdkafka property (its CONFIGURATION.md), applied last:
    /// `"socket.keepalive.enable" = "true"`. The properties the delivery guarantees rest on
    /// (acks, idempotence, how offsets are stored and committed) cannot be set here.
    #[serde(default)]
    pub librdkafka: BTreeMap<String, String>,
}

/// One topic's own settings; what is absent comes from `[dd.kafka]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicOverride {
    /// The topic's name on the cluster (the prefix is not added to it).
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub partitions: Option<u32>,
    #[serde(default)]
    pub retention_secs: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProducerConfig {
    /// How long the producer waits for more records to fill a batch, ms (`linger.ms`).
    /// Default 5.
    #[serde(default = "default_linger_ms")]
    pub linger_ms: u32,
    /// Largest batch of records sent to a partition at once, bytes (`batch.size`).
    /// Default 1000000.
    #[serde(default = "default_batch_size")]
    pub batch_size: u32,
    /// `none` or `lz4`. Default `none` (the copies are mostly JSON, but on the guide's
    /// 2-core-per-broker budget lz4 costs CPU the brokers need; docs/dd.md has both figures).
    #[serde(default)]
    pub compression: Compression,
    /// How long a record may wait for the brokers' acknowledgement before its batch fails, ms
    /// (`message.timeout.ms`). Default 30000.
    #[serde(default = "default_delivery_timeout_ms")]
    pub delivery_timeout_ms: u64,
    /// Records the producer holds unacknowledged at most (`queue.buffering.max.messages`);
    /// past it an append waits. Default 200000.
    #[serde(default = "default_queue_max_messages")]
    pub queue_max_messages: u32,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    #[default]
    None,
    Lz4,
}

impl Compression {
    fn as_str(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsumerConfig {
    /// The consumer group of this Data Director's consumers; each consumer adds its own suffix
    /// (`<group_id>.aggregate.pcf`, `<group_id>.feed.<name>`), so instances sharing a group id
    /// share each topic's partitions. Default `fivecore-dd`.
    #[serde(default = "default_group_id")]
    pub group_id: String,
    /// How often the offsets of the batches a consumer has finished are committed, ms. A
    /// consumer that stops cleanly commits at once; one that dies re-reads at most this much
    /// (at-least-once). Default 1000.
    #[serde(default = "default_commit_interval_ms")]
    pub commit_interval_ms: u64,
    /// After how long without heartbeats a consumer's partitions go to the others of its group,
    /// ms (`session.timeout.ms`). Default 10000.
    #[serde(default = "default_session_timeout_ms")]
    pub session_timeout_ms: u64,
}

/// How the Data Director authenticates to the brokers (the guide secures NF-to-Data-Director
/// links with SASL/SSL). Plaintext by default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecurityConfig {
    /// `plaintext`, `ssl`, `sasl_plaintext` or `sasl_ssl` (`security.protocol`).
    #[serde(default)]
    pub protocol: SecurityProtocol,
    /// `PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512` or `OAUTHBEARER` (whose OIDC settings go in
    /// `[dd.kafka.librdkafka]`). Required with a `sasl_*` protocol.
    #[serde(default)]
    pub sasl_mechanism: Option<String>,
    #[serde(default)]
    pub sasl_username: Option<String>,
    #[serde(default)]
    pub sasl_password: Option<String>,
    /// The CA certificate(s) the brokers' certificates are checked against, PEM.
    #[serde(default)]
    pub ssl_ca_location: Option<PathBuf>,
    /// Our certificate and key, PEM, when the brokers ask for one (mutual TLS).
    #[serde(default)]
    pub ssl_certificate_location: Option<PathBuf>,
    #[serde(default)]
    pub ssl_key_location: Option<PathBuf>,
    #[serde(default)]
    pub ssl_key_password: Option<String>,
    /// Check the broker's host name against its certificate. Default true.
    #[serde(default = "default_true")]
    pub ssl_verify_hostname: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SecurityProtocol {
    #[default]
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    fn as_str(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "plaintext",
            SecurityProtocol::Ssl => "ssl",
            SecurityProtocol::SaslPlaintext => "sasl_plaintext",
            SecurityProtocol::SaslSsl => "sasl_ssl",
        }
    }
    fn sasl(self) -> bool {
        matches!(self, SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl)
    }
    fn ssl(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }
}

const SASL_MECHANISMS: [&str; 4] = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"];

/// librdkafka properties this module sets for its guarantees; `[dd.kafka.librdkafka]` may not.
const RESERVED: [&str; 11] = [
    "bootstrap.servers",
    "acks",
    "request.required.acks",
    "enable.idempotence",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "auto.offset.reset",
    "group.id",
    "enable.partition.eof",
    "message.timeout.ms",
    "delivery.timeout.ms",
];

fn default_partitions() -> u32 {
    6
}
fn default_nf_retention_secs() -> u64 {
    300
}
fn default_main_retention_secs() -> u64 {
    6 * 3600
}
fn default_replication_factor() -> u16 {
    1
}
fn default_request_timeout_ms() -> u64 {
    10_000
}
fn default_linger_ms() -> u32 {
    5
}
fn default_batch_size() -> u32 {
    1_000_000
}
fn default_delivery_timeout_ms() -> u64 {
    30_000
}
fn default_queue_max_messages() -> u32 {
    200_000
}
fn default_group_id() -> String {
    "fivecore-dd".into()
}
fn default_commit_interval_ms() -> u64 {
    1000
}
fn default_session_timeout_ms() -> u64 {
    10_000
}
fn default_true() -> bool {
    true
}

impl Default for ProducerConfig {
    fn default() -> Self {
        ProducerConfig {
            linger_ms: default_linger_ms(),
            batch_size: default_batch_size(),
            compression: Compression::None,
            delivery_timeout_ms: default_delivery_timeout_ms(),
            queue_max_messages: default_queue_max_messages(),
        }
    }
}

impl Default for SecurityConfig {
    fn default() -> Self {
        SecurityConfig {
            protocol: SecurityProtocol::Plaintext,
            sasl_mechanism: None,
            sasl_username: None,
            sasl_password: None,
            ssl_ca_location: None,
            ssl_certificate_location: None,
            ssl_key_location: None,
            ssl_key_password: None,
            ssl_verify_hostname: true,
        }
    }
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            group_id: default_group_id(),
            commit_interval_ms: default_commit_interval_ms(),
            session_timeout_ms: default_session_timeout_ms(),
        }
    }
}

/// A topic as the Data Director wants it on the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicSpec {
    /// `pcf`, `main`, ...: the key of [`NF_TOPICS`] or [`MAIN`], or a feed's topic name.
    pub key: String,
    /// Its name on the cluster.
    pub name: String,
    pub partitions: u32,
    pub retention_ms: u64,
    pub replication_factor: u16,
}

impl KafkaConfig {
    /// The configuration with every default, for the brokers at `bootstrap_servers`.
    pub fn new(bootstrap_servers: impl Into<String>) -> Self {
        KafkaConfig {
            bootstrap_servers: bootstrap_servers.into(),
            topic_prefix: String::new(),
            nf_partitions: default_partitions(),
            main_partitions: default_partitions(),
            nf_retention_secs: default_nf_retention_secs(),
            main_retention_secs: default_main_retention_secs(),
            replication_factor: default_replication_factor(),
            topic: BTreeMap::new(),
            producer: ProducerConfig::default(),
            consumer: ConsumerConfig::default(),
            security: SecurityConfig::default(),
            request_timeout_ms: default_request_timeout_ms(),
            librdkafka: BTreeMap::new(),
        }
    }

    /// The NF topic or MAIN of that key (`pcf`, `main`); `None` for any other key.
    pub fn topic(&self, key: &str) -> Option<TopicSpec> {
        let (partitions, retention_secs) = if key == MAIN {
            (self.main_partitions, self.main_retention_secs)
        } else if NF_TOPICS.contains(&key) {
            (self.nf_partitions, self.nf_retention_secs)
        } else {
            return None;
        };
        let o = self.topic.get(key).cloned().unwrap_or_default();
        Some(TopicSpec {
            key: key.to_string(),
            name: o
                .name
                .unwrap_or_else(|| format!("{}{}", self.topic_prefix, key.to_ascii_uppercase())),
            partitions: o.partitions.unwrap_or(partitions),
            retention_ms: o.retention_secs.unwrap_or(retention_secs).saturating_mul(1000),
            replication_factor: self.replication_factor,
        })
    }

    /// The NF topics, then MAIN.
    pub fn topics(&self) -> Vec<TopicSpec> {
        NF_TOPICS.iter().chain([&MAIN]).filter_map(|k| self.topic(k)).collect()
    }

    /// The consumer group `<group_id>.<role>`.
    pub fn group(&self, role: &str) -> String {
        format!("{}.{role}", self.consumer.group_id)
    }

    /// What is wrong, each named by its place under `at` (`/dd/kafka` in a configuration file,
    /// the feed's own pointer in the admin API); empty when the configuration can be used.
    pub fn validate(&self, at: &str) -> Vec<InvalidParam> {
        let mut bad = Vec::new();
        let mut push = |field: &str, reason: String| {
            bad.push(InvalidParam::new(format!("{at}/{field}"), reason));
        };
        if let Err(e) = check_bootstrap(&self.bootstrap_servers) {
            push("bootstrap_servers", e);
        }
        for (field, n) in
            [("nf_partitions", self.nf_partitions), ("main_partitions", self.main_partitions)]
        {
            if n == 0 {
                push(field, "must be at least 1".into());
            }
        }
        for (field, s) in [
            ("nf_retention_secs", self.nf_retention_secs),
            ("main_retention_secs", self.main_retention_secs),
        ] {
            if s == 0 {
                push(field, "must be at least 1 second".into());
            }
        }
        if self.replication_factor == 0 {
            push("replication_factor", "must be at least 1".into());
        }
        if self.request_timeout_ms == 0 {
            push("request_timeout_ms", "must be at least 1 ms".into());
        }
        for (key, o) in &self.topic {
            if !(key == MAIN || NF_TOPICS.contains(&key.as_str())) {
                push(
                    &format!("topic/{key}"),
                    format!("no such topic; the topics are {} and {MAIN}", NF_TOPICS.join(", ")),
                );
            }
            if o.partitions == Some(0) {
                push(&format!("topic/{key}/partitions"), "must be at least 1".into());
            }
            if o.retention_secs == Some(0) {
                push(&format!("topic/{key}/retention_secs"), "must be at least 1 second".into());
            }
        }
        let mut names = BTreeMap::new();
        for t in self.topics() {
            let field = match self.topic.get(&t.key).and_then(|o| o.name.as_ref()) {
                Some(_) => format!("topic/{}/name", t.key),
                None => "topic_prefix".to_string(),
            };
            if let Err(e) = check_topic_name(&t.name) {
                push(&field, e);
            } else if let Some(other) = names.insert(t.name.clone(), t.key.clone()) {
                push(&field, format!("topics {other} and {} are both named {}", t.key, t.name));
            }
        }
        let p = &self.producer;
        if p.batch_size == 0 {
            push("producer/batch_size", "must be at least 1 byte".into());
        }
        if p.delivery_timeout_ms == 0 {
            push("producer/delivery_timeout_ms", "must be at least 1 ms".into());
        }
        if p.queue_max_messages == 0 {
            push("producer/queue_max_messages", "must be at least 1".into());
        }
        let c = &self.consumer;
        if c.group_id.is_empty() {
            push("consumer/group_id", "must not be empty".into());
        }
        if c.commit_interval_ms == 0 {
            push("consumer/commit_interval_ms", "must be at least 1 ms".into());
        }
        if c.session_timeout_ms == 0 {
            push("consumer/session_timeout_ms", "must be at least 1 ms".into());
        }
        for (field, reason) in self.security.problems() {
            push(&format!("security/{field}"), reason);
        }
        for key in self.librdkafka.keys() {
            if RESERVED.contains(&key.as_str()) {
                push(
                    &format!("librdkafka/{key}"),
                    "set by the Data Director for its delivery guarantees; not configurable".into(),
                );
            }
        }
        bad
    }

    /// What every client (admin, producer, consumer) is given.
    pub(crate) fn client_config(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.bootstrap_servers)
            .set("socket.timeout.ms", self.request_timeout_ms.max(10).to_string())
            // librdkafka logs a broker it cannot reach every time it retries: once is enough.
            .set("log.connection.close", "false");
        self.security.apply(&mut c);
        c
    }

    /// The librdkafka properties applied last.
    pub(crate) fn overrides(&self, c: &mut ClientConfig) {
        for (k, v) in &self.librdkafka {
            c.set(k, v);
        }
    }

    pub(crate) fn producer_config(&self) -> ClientConfig {
        let p = &self.producer;
        let mut c = self.client_config();
        // acks from every in-sync replica and idempotence: a record acknowledged is on every
        // replica, and retries neither duplicate nor reorder the records of a partition.
        c.set("acks", "all")
            .set("enable.idempotence", "true")
            .set("linger.ms", p.linger_ms.to_string())
            .set("batch.size", p.batch_size.to_string())
            .set("compression.type", p.compression.as_str())
            .set("message.timeout.ms", p.delivery_timeout_ms.to_string())
            .set("queue.buffering.max.messages", p.queue_max_messages.to_string());
        self.overrides(&mut c);
        c
    }

    pub(crate) fn consumer_config(&self, group_id: &str) -> ClientConfig {
        let cc = &self.consumer;
        let mut c = self.client_config();
        // Offsets are stored only for the batches the caller has finished (Consumer::done) and
        // the stored ones committed every commit_interval_ms and at close: at-least-once.
        c.set("group.id", group_id)
            .set("enable.auto.commit", "true")
            .set("enable.auto.offset.store", "false")
            .set("auto.commit.interval.ms", cc.commit_interval_ms.to_string())
            .set("session.timeout.ms", cc.session_timeout_ms.to_string())
            // A group seen for the first time starts at the oldest record kept, so copies
            // written before the first consumer joined are not skipped.
            .set("auto.offset.reset", "earliest")
            .set("enable.partition.eof", "false");
        self.overrides(&mut c);
        c
    }
}

impl SecurityConfig {
    fn problems(&self) -> Vec<(&'static str, String)> {
        let mut bad = Vec::new();
        let sasl = self.protocol.sasl();
        match (&self.sasl_mechanism, sasl) {
            (None, true) => bad.push(("sasl_mechanism", "required with a sasl_* protocol".into())),
            (Some(_), false) => {
                bad.push(("sasl_mechanism", "only with protocol sasl_plaintext or sasl_ssl".into()))
            }
            (Some(m), true) if !SASL_MECHANISMS.contains(&m.as_str()) => bad.push((
                "sasl_mechanism",
                format!("unknown mechanism; one of {}", SASL_MECHANISMS.join(", ")),
            )),
            (Some(m), true) if m != "OAUTHBEARER" => {
                if self.sasl_username.is_none() {
                    bad.push(("sasl_username", format!("required with {m}")));
                }
                if self.sasl_password.is_none() {
                    bad.push(("sasl_password", format!("required with {m}")));
                }
            }
            _ => {}
        }
        if !self.protocol.ssl() {
            for (field, set) in [
                ("ssl_ca_location", self.ssl_ca_location.is_some()),
                ("ssl_certificate_location", self.ssl_certificate_location.is_some()),
                ("ssl_key_location", self.ssl_key_location.is_some()),
                ("ssl_key_password", self.ssl_key_password.is_some()),
            ] {
                if set {
                    bad.push((field, "only with protocol ssl or sasl_ssl".into()));
                }
            }
        }
        if self.ssl_certificate_location.is_some() != self.ssl_key_location.is_some() {
            bad.push(("ssl_key_location", "a certificate and its key go together".into()));
        }
        bad
    }

    fn apply(&self, c: &mut ClientConfig) {
        c.set("security.protocol", self.protocol.as_str());
        let mut opt = |k: &str, v: &Option<String>| {
            if let Some(v) = v {
                c.set(k, v);
            }
        };
        opt("sasl.mechanism", &self.sasl_mechanism);
        opt("sasl.username", &self.sasl_username);
        opt("sasl.password", &self.sasl_password);
        opt("ssl.key.password", &self.ssl_key_password);
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        opt("ssl.ca.location", &path(&self.ssl_ca_location));
        opt("ssl.certificate.location", &path(&self.ssl_certificate_location));
        opt("ssl.key.location", &path(&self.ssl_key_location));
        if self.protocol.ssl() {
            c.set(
                "ssl.endpoint.identification.algorithm",
                if self.ssl_verify_hostname { "https" } else { "none" },
            );
        }
    }
}

/// The cluster a feed or a source uses: the Data Director's `dd`, or the one it names with its
/// own `bootstrap_servers` (and `security`, plaintext when absent), which keeps `dd`'s producer
/// and consumer tuning but none of its librdkafka properties or credentials.
pub(crate) fn cluster_of(
    bootstrap_servers: &Option<String>,
    security: &Option<SecurityConfig>,
    dd: Option<&KafkaConfig>,
) -> KafkaConfig {
    match (bootstrap_servers, dd) {
        (None, Some(dd)) => dd.clone(),
        (Some(b), dd) => {
            let mut c = dd.cloned().unwrap_or_else(|| KafkaConfig::new(b.clone()));
            c.bootstrap_servers = b.clone();
            c.security = security.clone().unwrap_or_default();
            c.librdkafka.clear();
            c
        }
        (None, None) => KafkaConfig::new(String::new()),
    }
}

/// What is wrong with the cluster part of a feed's or a source's configuration, as
/// `(field, reason)`.
pub(crate) fn cluster_problems(
    bootstrap_servers: &Option<String>,
    security: &Option<SecurityConfig>,
    dd: Option<&KafkaConfig>,
) -> Vec<(String, String)> {
    let mut bad = Vec::new();
    match (bootstrap_servers, dd) {
        (Some(b), _) => {
            if let Err(e) = check_bootstrap(b) {
                bad.push(("bootstrap_servers".to_string(), e));
            }
        }
        (None, None) => bad.push((
            "bootstrap_servers".to_string(),
            "required: the Data Director has no Kafka cluster of its own ([dd.kafka])".to_string(),
        )),
        (None, Some(_)) => {}
    }
    if let Some(s) = security {
        if bootstrap_servers.is_none() {
            bad.push((
                "security".to_string(),
                "only with bootstrap_servers: [dd.kafka.security] applies".to_string(),
            ));
        }
        for (field, reason) in s.problems() {
            bad.push((format!("security/{field}"), reason));
        }
    }
    bad
}

/// `host:port[,host:port...]`.
pub(crate) fn check_bootstrap(s: &str) -> Result<(), String> {
    if s.trim().is_empty() {
        return Err("must name at least one broker, host:port".into());
    }
    for b in s.split(',').map(str::trim) {
        let port = b.rsplit_once(':').and_then(|(h, p)| (!h.is_empty()).then_some(p));
        if port.and_then(|p| p.parse::<u16>().ok()).filter(|p| *p != 0).is_none() {
            return Err(format!("{b:?} is not host:port"));
        }
    }
    Ok(())
}

/// Kafka's rule for topic names: 1 to 249 of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub(crate) fn check_topic_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 249 {
        return Err(format!("topic name {name:?} must be 1 to 249 characters"));
    }
    if name == "." || name == ".." {
        return Err(format!("topic name {name:?} is not allowed"));
    }
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || "._-".contains(*c))) {
        return Err(format!("topic name {name:?} has {c:?}; only letters, digits, '.', '_', '-'"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(c: &KafkaConfig) -> Vec<String> {
        c.validate("/dd/kafka").into_iter().map(|p| p.param).collect()
    }

    #[test]
    fn the_example_of_the_module_doc_parses_and_is_valid() {
        let doc = include_str!("config.rs");
        let example: String = doc
            .lines()
            .skip_while(|l| !l.starts_with("//! ```toml"))
            .skip(1)
            .take_while(|l| !l.starts_with("//! ```"))
            .map(|l| l.trim_start_matches("//!").trim_start().to_string() + "\n")
            .collect();
        #[derive(Deserialize)]
        struct File {
            dd: Dd,
        }
        #[derive(Deserialize)]
        struct Dd {
            kafka: KafkaConfig,
        }
        let c = toml::from_str::<File>(&example).unwrap().dd.kafka;
        assert!(params(&c).is_empty(), "{:?}", c.validate("/dd/kafka"));
        assert_eq!(c.topic("pcf").unwrap().partitions, 18);
        assert_eq!(c.topic("nrf").unwrap().partitions, 12);
        assert_eq!(c.topic("main").unwrap().partitions, 6);
        assert_eq!(c.producer.compression, Compression::Lz4);
        assert_eq!(c.security.protocol, SecurityProtocol::SaslSsl);
    }

    #[test]
    fn defaults_are_the_guides_topics_retention_and_partitions() {
        let c: KafkaConfig = toml::from_str("bootstrap_servers = \"127.0.0.1:9092\"").unwrap();
        assert_eq!(c, KafkaConfig::new("127.0.0.1:9092"));
        // A section present but empty has the same defaults as one absent.
        let empty: KafkaConfig = toml::from_str(
            "bootstrap_servers = \"127.0.0.1:9092\"\n[producer]\n[consumer]\n[security]",
        )
        .unwrap();
        assert_eq!(empty, c);
        let names: Vec<_> = c.topics().into_iter().map(|t| t.name).collect();
        assert_eq!(
            names,
            ["NRF", "UDR", "BSF", "PCF", "PCRF", "SCP", "SEPP", "AMF", "SMF", "OTHER", "MAIN"]
        );
        let pcf = c.topic("pcf").unwrap();
        assert_eq!((pcf.partitions, pcf.retention_ms, pcf.replication_factor), (6, 300_000, 1));
        let main = c.topic("main").unwrap();
        assert_eq!((main.partitions, main.retention_ms), (6, 21_600_000));
        assert_eq!(c.topic("nwdaf"), None);
        assert_eq!(c.group("feed.audit"), "fivecore-dd.feed.audit");
        assert!(params(&c).is_empty());
    }

    #[test]
    fn prefix_and_overrides_name_the_topics() {
        let mut c = KafkaConfig::new("k1:9092,k2:9093");
        c.topic_prefix = "site1.".into();
        c.topic.insert(
            "main".into(),
            TopicOverride {
                name: Some("copies".into()),
                partitions: Some(9),
                retention_secs: Some(60),
            },
        );
        assert_eq!(c.topic("bsf").unwrap().name, "site1.BSF");
        let main = c.topic("main").unwrap();
        assert_eq!((main.name.as_str(), main.partitions, main.retention_ms), ("copies", 9, 60_000));
    }

    #[test]
    fn unknown_keys_are_refused() {
        let e = toml::from_str::<KafkaConfig>("bootstrap_servers = \"a:1\"\nbootstrap = \"b:2\"");
        assert!(e.unwrap_err().to_string().contains("unknown field `bootstrap`"));
        let e = toml::from_str::<KafkaConfig>(
            "bootstrap_servers = \"a:1\"\n[producer]\ncompression = \"zstd\"",
        );
        assert!(e.is_err());
    }

    #[test]
    fn each_bad_value_is_named_by_its_place() {
        let mut c = KafkaConfig::new("localhost");
        c.nf_partitions = 0;
        c.main_retention_secs = 0;
        c.replication_factor = 0;
        c.topic_prefix = "a/b.".into();
        c.topic.insert("nwdaf".into(), TopicOverride::default());
        c.producer.batch_size = 0;
        c.consumer.group_id = String::new();
        c.librdkafka.insert("enable.auto.commit".into(), "false".into());
        c.librdkafka.insert("socket.keepalive.enable".into(), "true".into());
        let p = params(&c);
        for want in [
            "/dd/kafka/bootstrap_servers",
            "/dd/kafka/nf_partitions",
            "/dd/kafka/main_retention_secs",
            "/dd/kafka/replication_factor",
            "/dd/kafka/topic/nwdaf",
            "/dd/kafka/topic_prefix",
            "/dd/kafka/producer/batch_size",
            "/dd/kafka/consumer/group_id",
            "/dd/kafka/librdkafka/enable.auto.commit",
        ] {
            assert!(p.iter().any(|x| x == want), "{want} missing from {p:?}");
        }
        assert!(!p.iter().any(|x| x.contains("keepalive")), "{p:?}");
        // Two topics of one name.
        let mut c = KafkaConfig::new("k:9092");
        c.topic
            .insert("udr".into(), TopicOverride { name: Some("NRF".into()), ..Default::default() });
        assert_eq!(params(&c), ["/dd/kafka/topic/udr/name"]);
    }

    #[test]
    fn bootstrap_and_topic_names_follow_kafkas_rules() {
        assert!(check_bootstrap("127.0.0.1:9092, [::1]:9093").is_ok());
        for bad in ["", "host", ":9092", "h:0", "h:99999", "h:1,"] {
            assert!(check_bootstrap(bad).is_err(), "{bad}");
        }
        assert!(check_topic_name("fivecore-dd.feed_1").is_ok());
        for bad in ["", ".", "..", "a b", "a/b", &"x".repeat(250)] {
            assert!(check_topic_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sasl_needs_its_mechanism_and_credentials_and_ssl_files_need_ssl() {
        let mut c = KafkaConfig::new("k:9092");
        c.security.protocol = SecurityProtocol::SaslSsl;
        assert_eq!(params(&c), ["/dd/kafka/security/sasl_mechanism"]);
        c.security.sasl_mechanism = Some("SCRAM-SHA-512".into());
        assert_eq!(
            params(&c),
            ["/dd/kafka/security/sasl_username", "/dd/kafka/security/sasl_password"]
        );
        c.security.sasl_mechanism = Some("GSSAPI".into());
        assert_eq!(params(&c), ["/dd/kafka/security/sasl_mechanism"]);
        c.security.sasl_mechanism = Some("PLAIN".into());
        c.security.sasl_username = Some("dd".into());
        c.security.sasl_password = Some("pw".into());
        assert!(params(&c).is_empty());
        let p = c.producer_config();
        assert_eq!(p.get("security.protocol"), Some("sasl_ssl"));
        assert_eq!(p.get("sasl.mechanism"), Some("PLAIN"));
        assert_eq!(p.get("ssl.endpoint.identification.algorithm"), Some("https"));

        let mut c = KafkaConfig::new("k:9092");
        c.security.ssl_ca_location = Some("/ca.pem".into());
        c.security.sasl_mechanism = Some("PLAIN".into());
        assert_eq!(
            params(&c),
            ["/dd/kafka/security/sasl_mechanism", "/dd/kafka/security/ssl_ca_location"]
        );
    }

    #[test]
    fn the_guarantees_are_in_every_client_and_cannot_be_overridden() {
        let mut c = KafkaConfig::new("k:9092");
        c.librdkafka.insert("socket.keepalive.enable".into(), "true".into());
        let p = c.producer_config();
        assert_eq!(p.get("acks"), Some("all"));
        assert_eq!(p.get("enable.idempotence"), Some("true"));
        assert_eq!(p.get("compression.type"), Some("none"));
        assert_eq!(p.get("socket.keepalive.enable"), Some("true"));
        let k = c.consumer_config("g");
        assert_eq!(k.get("group.id"), Some("g"));
        assert_eq!(k.get("enable.auto.offset.store"), Some("false"));
        assert_eq!(k.get("auto.offset.reset"), Some("earliest"));
        for key in RESERVED {
            let mut c = KafkaConfig::new("k:9092");
            c.librdkafka.insert(key.into(), "x".into());
            assert_eq!(params(&c), [format!("/dd/kafka/librdkafka/{key}")]);
        }
    }
}
