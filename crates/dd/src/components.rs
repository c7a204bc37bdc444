//! Builds the pipeline's parts from the admin API's configuration objects: a feed's sink, a
//! filter. (A correlation's consumers are built by the admin API: `admin::spawn_correlation`.) Each component checks its own configuration and names what is wrong
//! with JSON pointers into it; the admin API puts the resource's field in front.

use std::sync::Arc;

use bytes::Bytes;
use dd_client::Copy;
use sbi::InvalidParam;
use serde_json::Value;

use crate::context::Dd;
use crate::pipeline::{Deliver, Select, Undelivered};
use crate::sinks::{self, Sink, SinkConfig};
use crate::topics::BoxFuture;
use crate::transforms::filter::{Filter, FilterConfig};

use crate::admin::parse_part as from_json;

/// A feed's sink (`{"type": "tcp" | "http2", ...}`, crate::sinks::config).
pub fn sink(feed: &str, cfg: &Value, dd: &Dd) -> Result<Arc<dyn Deliver>, Vec<InvalidParam>> {
    let config: SinkConfig = from_json(cfg)?;
    let sink = sinks::build(feed, &config, &dd.feed_metrics)?;
    Ok(Arc::new(SinkDeliver(sink)))
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
