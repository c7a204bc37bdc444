//! Builds the pipeline's parts from the admin API's configuration objects: a feed's sink, a
//! filter, a correlator. Each component checks its own configuration and names what is wrong
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

fn from_json<T: serde::de::DeserializeOwned>(cfg: &Value) -> Result<T, Vec<InvalidParam>> {
    serde_path_to_error::deserialize::<_, T>(cfg.clone()).map_err(|e| {
        let path = e.path().to_string();
        let param = if path == "." { String::new() } else { crate::admin::resource_pointer(&path) };
        vec![InvalidParam::new(param, e.into_inner().to_string())]
    })
}

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

/// A correlation (crate::transforms::correlate's configuration).
pub fn correlation(
    name: &str,
    cfg: &Value,
    dd: &Arc<Dd>,
) -> Result<Arc<dyn Deliver>, Vec<InvalidParam>> {
    let _ = (name, cfg, dd, std::marker::PhantomData::<Copy>);
    Err(vec![InvalidParam::new("", "MERGE PENDING: correlation lands with h5")])
}
