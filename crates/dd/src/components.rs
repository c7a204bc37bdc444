//! Builds the pipeline's parts from the admin API's configuration objects: a feed's sink, a
//! filter. (A correlation's consumers are built by the admin API: `admin::spawn_correlation`.) Each component checks its own configuration and names what is wrong
//! with JSON pointers into it; the admin API puts the resource's field in front.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use dd_client::Copy;
use sbi::InvalidParam;
use serde_json::Value;

use crate::context::Dd;
use crate::pipeline::{Deliver, Select, Undelivered};
use crate::sinks::kafka::{KafkaSink, KafkaSinkConfig};
use crate::sinks::{self, Sink, SinkConfig};
use crate::topics::BoxFuture;
use crate::transforms::filter::{Filter, FilterConfig};

use crate::admin::parse_part as from_json;

/// A feed's sink (`{"type": "tcp" | "http2" | "kafka", ...}`: crate::sinks::config, and
/// crate::sinks::kafka::config for a Kafka feed, which also creates its topic and connects).
pub async fn sink(feed: &str, cfg: &Value, dd: &Dd) -> Result<Arc<dyn Deliver>, Vec<InvalidParam>> {
    if cfg.get("type").and_then(Value::as_str) == Some("kafka") {
        let mut body = cfg.clone();
        if let Some(o) = body.as_object_mut() {
            o.remove("type");
        }
        let config: KafkaSinkConfig = from_json(&body)?;
        let cluster = dd.config.kafka.as_ref().or(dd.kafka.as_ref().map(|k| k.config()));
        let bad = config.validate("", cluster);
        if !bad.is_empty() {
            return Err(bad);
        }
        let sink = KafkaSink::build(&config, cluster, feed).await.map_err(|e| {
            vec![InvalidParam::new("", format!("the Kafka feed cannot start: {e}"))]
        })?;
        return Ok(Arc::new(KafkaDeliver(sink)));
    }
    let config: SinkConfig = from_json(cfg)?;
    let sink = sinks::build(feed, &config, &dd.feed_metrics)?;
    Ok(Arc::new(SinkDeliver(sink)))
}

struct KafkaDeliver(KafkaSink);

impl Deliver for KafkaDeliver {
    fn deliver<'a>(&'a self, batch: &'a [Bytes]) -> BoxFuture<'a, Result<(), Undelivered>> {
        Box::pin(async move {
            self.0.deliver(batch).await.map_err(|e| Undelivered {
                retry_in: Some(if e.retryable() {
                    Duration::from_millis(500)
                } else {
                    Duration::from_secs(10)
                }),
                reason: e.to_string(),
            })
        })
    }
}

struct SinkDeliver(Arc<dyn Sink>);

impl Deliver for SinkDeliver {
    fn deliver<'a>(&'a self, batch: &'a [Bytes]) -> BoxFuture<'a, Result<(), Undelivered>> {
        Box::pin(async move {
            self.0
                .deliver(batch)
                .await
                .map_err(|e| Undelivered { reason: e.to_string(), retry_in: Some(e.retry_in()) })
        })
    }
}

/// A filter (crate::transforms::filter's configuration).
pub fn filter(cfg: &Value) -> Result<Arc<dyn Select>, Vec<InvalidParam>> {
    let config: FilterConfig = from_json(cfg)?;
    Ok(Arc::new(Filter::compile(&config)?))
}

impl Select for Filter {
    fn select(&self, copy: &Copy) -> bool {
        self.matches(copy)
    }
}
