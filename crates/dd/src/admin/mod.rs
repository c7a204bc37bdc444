//! The admin API (`/dd-admin/v1/...` on the Data Director's port): feeds, filters and correlation
//! configurations created, replaced and deleted at run time, kept in the Data Director's store so
//! they survive a restart, and applied at once (a feed's consumers stop at a batch boundary and
//! start again with the new configuration, from the offset the old ones committed).
//!
//! ```text
//! POST   /dd-admin/v1/{feeds|filters|correlations}          create (201 + Location; 409 if the name is taken)
//! GET    /dd-admin/v1/{feeds|filters|correlations}          list
//! GET    /dd-admin/v1/{feeds|filters|correlations}/{name}   one (a feed with its partitions' lag)
//! PUT    /dd-admin/v1/{feeds|filters|correlations}/{name}   create (201) or replace (200)
//! DELETE /dd-admin/v1/{feeds|filters|correlations}/{name}   204; 409 for a filter a feed uses
//! ```
//!
//! Bodies: a feed `{"name", "sink": <sink config>, "filter": "<filter name>", "start":
//! "latest"|"earliest"}`; a filter `{"name", "filter": <filter config>}`; a correlation `{"name",
//! "correlation": <correlation config>}` (docs/dd.md gives each config). Every refusal is a
//! ProblemDetails whose `invalidParams` name the field by JSON pointer (`/sink/endpoints/0/address`).
//!
//! The store is the one `[store] backend` names: the SQLite file `dd.db`, or the MySQL-protocol
//! database, where several Data Director instances share their admin objects: a change made
//! through one instance's API runs on the others within about the change feed's poll
//! ([`coherence`]).

pub mod coherence;
mod resource;
pub mod xdrs;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};

use http::{header, HeaderValue, Method, StatusCode};
use sbi::problem::cause;
use sbi::router::RouterBuilder;
use sbi::{empty_response, json_response, InvalidParam, ProblemDetails, Response, SbiRequest};
use serde_json::{json, Value};
use store::{AnyStore, DocumentData, DocumentStore};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use resource::{
    parse_part, pointer as resource_pointer, CorrelationSpec, FeedSpec, FilterSpec, Kind,
};

use crate::components;
use crate::context::Dd;
use crate::pipeline::{Consumer, CorrelationConsumer, Deliver, Select};
use crate::transforms::correlate::{CorrelationConfig, Correlator};

/// A feed or correlation running: its consumers, one per MAIN partition.
struct Running {
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    /// A correlation's: set before the stop of a delete, so its open records are stored.
    removing: Option<Arc<AtomicBool>>,
}

impl Running {
    /// Stops for good (a delete): a correlation first closes and stores its open records.
    async fn remove(self) {
        if let Some(r) = &self.removing {
            r.store(true, AtomicOrdering::Release);
        }
        self.stop().await;
    }

    /// Stops the consumers at their next batch boundary and waits for them.
    async fn stop(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// What the admin API has configured, and what runs from it.
pub struct Admin {
    store: AnyStore,
    state: Mutex<State>,
    /// Serialises configuration changes: a change stops and starts tasks across awaits, and two
    /// changes interleaved could leave a feed running with a filter already replaced.
    changes: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct State {
    filters: HashMap<String, (FilterSpec, Arc<dyn Select>)>,
    feeds: HashMap<String, (FeedSpec, Option<Running>)>,
    correlations: HashMap<String, (CorrelationSpec, Option<Running>)>,
}

fn lock(m: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn store_error(e: store::Error) -> ProblemDetails {
    ProblemDetails::internal(format!("the admin store failed: {e}"))
}

impl Admin {
    pub fn new(store: AnyStore) -> Admin {
        Admin { store, state: Mutex::new(State::default()), changes: tokio::sync::Mutex::new(()) }
    }

    /// Starts what the store holds: filters first (feeds name them), then feeds and
    /// correlations. One that no longer builds (a configuration this version refuses) is logged
    /// and left stopped, not fatal: the others still run.
    pub async fn load(&self, dd: &Arc<Dd>) -> Result<(), store::Error> {
        let _guard = self.changes.lock().await;
        for kind in [Kind::Filter, Kind::Feed, Kind::Correlation] {
            let mut after: Option<String> = None;
            loop {
                let page = self.store.list(kind.collection(), after.as_deref(), 256).await?;
                let Some(last) = page.last() else { break };
                after = Some(last.id.clone());
                for doc in page {
                    let Ok(body) = serde_json::from_slice::<Value>(&doc.body) else { continue };
                    if let Err(p) = self.apply(dd, kind, &doc.id, body).await {
                        tracing::error!(kind = kind.path(), name = %doc.id, problem = ?p.invalid_params, detail = ?p.detail, "stored configuration not started");
                    }
                }
            }
        }
        Ok(())
    }

    /// Stops every feed and correlation (at a batch boundary, offsets committed).
    pub async fn stop(&self) {
        let running: Vec<Running> = {
            let mut s = lock(&self.state);
            let mut all: Vec<Running> =
                s.feeds.values_mut().filter_map(|(_, r)| r.take()).collect();
            all.extend(s.correlations.values_mut().filter_map(|(_, r)| r.take()));
            all
        };
        for r in running {
            r.stop().await;
        }
    }

    /// Makes what the store holds now for `kind` `name` the one in force (another instance
    /// changed it): started or replaced when stored and different from the one running, removed
    /// when gone. Re-reading the key rather than trusting the change's order makes a change read
    /// late or twice harmless. A configuration that does not build here is logged and left as it
    /// was; only a store failure is an error (the caller tries again).
    pub async fn refresh(&self, dd: &Arc<Dd>, kind: Kind, name: &str) -> Result<(), store::Error> {
        let _guard = self.changes.lock().await;
        match self.store.get(kind.collection(), name).await? {
            Some(doc) => {
                let Ok(body) = serde_json::from_slice::<Value>(&doc.body) else {
                    tracing::error!(kind = kind.path(), %name, "stored configuration unreadable");
                    return Ok(());
                };
                if self.in_force(kind, name).as_ref() == Some(&body) {
                    return Ok(());
                }
                if let Err(p) = self.apply(dd, kind, name, body).await {
                    tracing::error!(kind = kind.path(), %name, problem = ?p.invalid_params, detail = ?p.detail, "configuration changed by another instance not started");
                }
            }
            None if self.exists(kind, name) => {
                if let Err(p) = self.remove(kind, name).await {
                    tracing::error!(kind = kind.path(), %name, detail = ?p.detail, "configuration removed by another instance still in force here");
                }
            }
            None => {}
        }
        Ok(())
    }

    /// The stored form of the `kind` named `name` in force here.
    fn in_force(&self, kind: Kind, name: &str) -> Option<Value> {
        let s = lock(&self.state);
        let v = match kind {
            Kind::Filter => s.filters.get(name).map(|(f, _)| serde_json::to_value(f)),
            Kind::Feed => s.feeds.get(name).map(|(f, _)| serde_json::to_value(f)),
            Kind::Correlation => s.correlations.get(name).map(|(c, _)| serde_json::to_value(c)),
        };
        v.and_then(Result::ok)
    }

    /// Validates `body` as a `kind` named `name` and makes it the one in force (not stored).
    async fn apply(
        &self,
        dd: &Arc<Dd>,
        kind: Kind,
        name: &str,
        body: Value,
    ) -> Result<Value, ProblemDetails> {
        match kind {
            Kind::Filter => {
                let spec: FilterSpec = resource::parse(name, body)?;
                let select =
                    components::filter(&spec.filter).map_err(|p| invalid(prefixed("filter", p)))?;
                let users: Vec<(String, FeedSpec)> = {
                    let mut s = lock(&self.state);
                    s.filters.insert(name.to_string(), (spec.clone(), select));
                    s.feeds
                        .iter()
                        .filter(|(_, (f, _))| f.filter.as_deref() == Some(name))
                        .map(|(n, (f, _))| (n.clone(), f.clone()))
                        .collect()
                };
                // Feeds using the filter take the new one.
                for (feed, spec) in users {
                    self.start_feed(dd, &feed, spec).await?;
                }
                Ok(serde_json::to_value(&spec).unwrap_or(Value::Null))
            }
            Kind::Feed => {
                let spec: FeedSpec = resource::parse(name, body)?;
                let out = serde_json::to_value(&spec).unwrap_or(Value::Null);
                self.start_feed(dd, name, spec).await?;
                Ok(out)
            }
            Kind::Correlation => {
                let spec: CorrelationSpec = resource::parse(name, body)?;
                check_correlation(dd, name, &spec.correlation)?;
                // The old consumers stop first (their records stay open, rebuilt by the new ones
                // from the offset they committed): two of one name would commit over each other.
                let old = lock(&self.state).correlations.get_mut(name).and_then(|(_, r)| r.take());
                if let Some(old) = old {
                    old.stop().await;
                }
                let running = spawn_correlation(dd, name, &spec.correlation)?;
                lock(&self.state)
                    .correlations
                    .insert(name.to_string(), (spec.clone(), Some(running)));
                Ok(serde_json::to_value(&spec).unwrap_or(Value::Null))
            }
        }
    }

    async fn start_feed(
        &self,
        dd: &Arc<Dd>,
        name: &str,
        spec: FeedSpec,
    ) -> Result<(), ProblemDetails> {
        let select = match &spec.filter {
            None => None,
            Some(f) => match lock(&self.state).filters.get(f) {
                Some((_, s)) => Some(s.clone()),
                None => {
                    return Err(invalid(vec![InvalidParam::new(
                        "/filter",
                        format!("no filter is named {f:?}"),
                    )]));
                }
            },
        };
        let sink = components::sink(name, &spec.sink, dd)
            .await
            .map_err(|p| invalid(prefixed("sink", p)))?;
        // The old consumers stop first: two consumers of one name would deliver twice.
        let old = lock(&self.state).feeds.get_mut(name).and_then(|(_, r)| r.take());
        if let Some(old) = old {
            old.stop().await;
        }
        let running = spawn(dd, &feed_consumer(name), select, sink, spec.start);
        lock(&self.state).feeds.insert(name.to_string(), (spec, Some(running)));
        Ok(())
    }

    fn exists(&self, kind: Kind, name: &str) -> bool {
        let s = lock(&self.state);
        match kind {
            Kind::Filter => s.filters.contains_key(name),
            Kind::Feed => s.feeds.contains_key(name),
            Kind::Correlation => s.correlations.contains_key(name),
        }
    }

    fn view(&self, dd: &Dd, kind: Kind, name: &str) -> Option<Value> {
        let s = lock(&self.state);
        match kind {
            Kind::Filter => s.filters.get(name).map(|(f, _)| serde_json::to_value(f).unwrap_or(Value::Null)),
            Kind::Correlation => {
                s.correlations.get(name).map(|(c, _)| serde_json::to_value(c).unwrap_or(Value::Null))
            }
            Kind::Feed => s.feeds.get(name).map(|(f, _)| {
                let mut v = serde_json::to_value(f).unwrap_or(Value::Null);
                redact(&mut v);
                let consumer = feed_consumer(name);
                let parts: Vec<Value> = dd
                    .main()
                    .iter()
                    .map(|p| {
                        let end = p.end_offset();
                        let committed = p.committed(&consumer).unwrap_or(end);
                        json!({"partition": p.name(), "committed": committed, "end": end, "lag": end.saturating_sub(committed)})
                    })
                    .collect();
                v["status"] = json!({ "partitions": parts });
                v
            }),
        }
    }

    fn names(&self, kind: Kind) -> Vec<String> {
        let s = lock(&self.state);
        let mut v: Vec<String> = match kind {
            Kind::Filter => s.filters.keys().cloned().collect(),
            Kind::Feed => s.feeds.keys().cloned().collect(),
            Kind::Correlation => s.correlations.keys().cloned().collect(),
        };
        v.sort();
        v
    }

    async fn remove(&self, kind: Kind, name: &str) -> Result<(), ProblemDetails> {
        let running = {
            let mut s = lock(&self.state);
            match kind {
                Kind::Filter => {
                    if let Some(feed) =
                        s.feeds.iter().find(|(_, (f, _))| f.filter.as_deref() == Some(name))
                    {
                        return Err(ProblemDetails::new(
                            StatusCode::CONFLICT,
                            "FILTER_IN_USE",
                            format!(
                                "the feed {:?} uses this filter; change or delete it first",
                                feed.0
                            ),
                        ));
                    }
                    s.filters.remove(name);
                    None
                }
                Kind::Feed => s.feeds.remove(name).and_then(|(_, r)| r),
                Kind::Correlation => s.correlations.remove(name).and_then(|(_, r)| r),
            }
        };
        if let Some(r) = running {
            r.remove().await;
        }
        Ok(())
    }
}

/// Secrets a sink's configuration may carry (a Kafka feed's SASL password, its TLS key's
/// password): kept in the store to start the feed again, never shown by the admin API.
const SECRETS: [&str; 2] = ["sasl_password", "ssl_key_password"];

fn redact(v: &mut Value) {
    if let Some(sec) = v.pointer_mut("/sink/security").and_then(Value::as_object_mut) {
        for k in SECRETS {
            if let Some(x) = sec.get_mut(k).filter(|x| !x.is_null()) {
                *x = Value::String("********".into());
            }
        }
    }
}

/// The consumer name a feed commits MAIN's offsets under.
pub fn feed_consumer(feed: &str) -> String {
    format!("feed:{feed}")
}

fn spawn(
    dd: &Arc<Dd>,
    consumer: &str,
    select: Option<Arc<dyn Select>>,
    sink: Arc<dyn Deliver>,
    start: crate::pipeline::Start,
) -> Running {
    let (stop, rx) = watch::channel(false);
    if let Some(kafka) = &dd.kafka {
        // Over Kafka, MAIN's partitions are shared by the group's members: one per instance.
        let name = consumer.strip_prefix("feed:").unwrap_or(consumer);
        let task = kafka.spawn_feed(name, select, sink, dd.config.feed_batch, rx);
        return Running { stop, tasks: vec![task], removing: None };
    }
    let tasks = dd
        .main()
        .iter()
        .map(|p| {
            let c = Consumer {
                consumer: consumer.to_string(),
                partition: p.clone(),
                select: select.clone(),
                sink: sink.clone(),
                start,
                batch: dd.config.feed_batch,
                metrics: dd.metrics.clone(),
            };
            tokio::spawn(c.run(rx.clone()))
        })
        .collect();
    Running { stop, tasks, removing: None }
}

/// A correlation's consumers: one correlator per MAIN partition (each partition is its own
/// stream of offsets), so the copies of one transaction or session must be in one partition:
/// one partition, or key ordering (by SUPI, else session id).
fn check_correlation(
    dd: &Dd,
    name: &str,
    cfg: &Value,
) -> Result<CorrelationConfig, ProblemDetails> {
    let config: CorrelationConfig =
        resource::parse_part(cfg).map_err(|p| invalid(prefixed("correlation", p)))?;
    Correlator::new(name, &config).map_err(|p| invalid(prefixed("correlation", p)))?;
    if dd.kafka.is_some() {
        return Err(invalid(vec![InvalidParam::new(
            "/correlation",
            "not in the Kafka mode: a correlator needs every copy of a transaction in one \
             consumer with a resume offset per partition, which a consumer group's rebalances \
             do not give; correlate on an embedded-mode Data Director fed by a Kafka feed",
        )]));
    }
    if dd.main().len() > 1
        && dd.config.aggregate.ordering != crate::transforms::aggregate::Ordering::Key
    {
        return Err(invalid(vec![InvalidParam::new(
            "/correlation",
            "MAIN has several partitions filled round-robin, so one transaction's copies may be split \
             between them: set [dd.aggregate] ordering = \"key\" or main_partitions = 1",
        )]));
    }
    Ok(config)
}

fn spawn_correlation(dd: &Arc<Dd>, name: &str, cfg: &Value) -> Result<Running, ProblemDetails> {
    let config = check_correlation(dd, name, cfg)?;
    let mut correlators = Vec::with_capacity(dd.main().len());
    for _ in dd.main() {
        correlators
            .push(Correlator::new(name, &config).map_err(|p| invalid(prefixed("correlation", p)))?);
    }
    let (stop, rx) = watch::channel(false);
    let removing = Arc::new(AtomicBool::new(false));
    let tasks = dd
        .main()
        .iter()
        .zip(correlators)
        .map(|(p, correlator)| {
            let c = CorrelationConsumer {
                consumer: format!("correlation:{name}"),
                partition: p.clone(),
                correlator,
                store: dd.xdr_store.clone(),
                batch: dd.config.feed_batch,
                metrics: dd.metrics.clone(),
                removing: removing.clone(),
            };
            tokio::spawn(c.run(rx.clone()))
        })
        .collect();
    Ok(Running { stop, tasks, removing: Some(removing) })
}

/// A component's invalid params (pointers into its own configuration) as pointers into the
/// resource's body, under `field`.
fn prefixed(field: &str, params: Vec<InvalidParam>) -> Vec<InvalidParam> {
    params
        .into_iter()
        .map(|mut p| {
            p.param = format!("/{field}{}", resource::pointer(&p.param));
            p
        })
        .collect()
}

fn invalid(params: Vec<InvalidParam>) -> ProblemDetails {
    ProblemDetails::invalid_params(cause::INVALID_MSG_FORMAT, params)
}

fn location(scheme: &str, req: &SbiRequest, kind: Kind, name: &str) -> HeaderValue {
    let root = sbi::api_root(None, scheme, Some(req), None);
    HeaderValue::try_from(format!("{root}/dd-admin/v1/{}/{name}", kind.path()))
        .unwrap_or_else(|_| HeaderValue::from_static("/"))
}

async fn create(dd: Arc<Dd>, req: SbiRequest, kind: Kind) -> Result<Response, ProblemDetails> {
    let body: Value = req.json()?;
    let name = resource::name_of(&body)?;
    let _guard = dd.admin.changes.lock().await;
    if dd.admin.exists(kind, &name) {
        return Err(ProblemDetails::new(
            StatusCode::CONFLICT,
            "RESOURCE_EXISTS",
            format!("a {} named {name:?} exists; PUT replaces it", kind.singular()),
        ));
    }
    let view = dd.admin.apply(&dd, kind, &name, body).await?;
    if let Err(e) = save(&dd.admin.store, kind, &name, &view).await {
        let _ = dd.admin.remove(kind, &name).await;
        return Err(e);
    }
    let mut view = view;
    redact(&mut view);
    let mut resp = json_response(StatusCode::CREATED, &view)?;
    resp.headers_mut().insert(header::LOCATION, location(dd.scheme, &req, kind, &name));
    Ok(resp)
}

async fn replace(dd: Arc<Dd>, req: SbiRequest, kind: Kind) -> Result<Response, ProblemDetails> {
    let name = resource::check_name(req.param("name")).map_err(invalid)?;
    let mut body: Value = req.json()?;
    match body.get("name") {
        None => {
            if let Some(o) = body.as_object_mut() {
                o.insert("name".into(), Value::String(name.clone()));
            }
        }
        Some(Value::String(n)) if *n == name => {}
        Some(_) => {
            return Err(invalid(vec![InvalidParam::new(
                "/name",
                "differs from the name in the path",
            )]));
        }
    }
    let _guard = dd.admin.changes.lock().await;
    let existed = dd.admin.exists(kind, &name);
    let view = dd.admin.apply(&dd, kind, &name, body).await?;
    save(&dd.admin.store, kind, &name, &view).await?;
    let mut view = view;
    redact(&mut view);
    if existed {
        json_response(StatusCode::OK, &view)
    } else {
        let mut resp = json_response(StatusCode::CREATED, &view)?;
        resp.headers_mut().insert(header::LOCATION, location(dd.scheme, &req, kind, &name));
        Ok(resp)
    }
}

async fn save(
    store: &AnyStore,
    kind: Kind,
    name: &str,
    view: &Value,
) -> Result<(), ProblemDetails> {
    let mut stored = view.clone();
    if let Some(o) = stored.as_object_mut() {
        o.remove("status");
    }
    let data = DocumentData::json(&stored).map_err(|e| ProblemDetails::internal(e.to_string()))?;
    store.upsert(kind.collection(), name, data).await.map_err(store_error)?;
    Ok(())
}

async fn get_one(dd: Arc<Dd>, req: SbiRequest, kind: Kind) -> Result<Response, ProblemDetails> {
    let name = req.param("name");
    match dd.admin.view(&dd, kind, name) {
        Some(v) => json_response(StatusCode::OK, &v),
        None => Err(ProblemDetails::not_found(format!("no {} is named {name:?}", kind.singular()))),
    }
}

async fn list(dd: Arc<Dd>, _req: SbiRequest, kind: Kind) -> Result<Response, ProblemDetails> {
    let all: Vec<Value> =
        dd.admin.names(kind).iter().filter_map(|n| dd.admin.view(&dd, kind, n)).collect();
    json_response(StatusCode::OK, &all)
}

async fn delete(dd: Arc<Dd>, req: SbiRequest, kind: Kind) -> Result<Response, ProblemDetails> {
    let name = req.param("name").to_string();
    let _guard = dd.admin.changes.lock().await;
    if !dd.admin.exists(kind, &name) {
        return Err(ProblemDetails::not_found(format!("no {} is named {name:?}", kind.singular())));
    }
    dd.admin.remove(kind, &name).await?;
    match dd.admin.store.delete(kind.collection(), &name, None).await {
        Ok(()) | Err(store::Error::NotFound) => Ok(empty_response(StatusCode::NO_CONTENT)),
        Err(e) => Err(store_error(e)),
    }
}

/// The admin routes, added to the Data Director's router.
pub fn routes(mut b: RouterBuilder<Dd>) -> RouterBuilder<Dd> {
    for kind in [Kind::Feed, Kind::Filter, Kind::Correlation] {
        let (coll, item) = kind.templates();
        let op = kind.operation();
        b = b
            .route(Method::POST, coll, op.create, move |dd, req| create(dd, req, kind))
            .route(Method::GET, coll, op.list, move |dd, req| list(dd, req, kind))
            .route(Method::GET, item, op.get, move |dd, req| get_one(dd, req, kind))
            .route(Method::PUT, item, op.replace, move |dd, req| replace(dd, req, kind))
            .route(Method::DELETE, item, op.delete, move |dd, req| delete(dd, req, kind));
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_feeds_secrets_are_never_shown() {
        let mut v = json!({"name": "k", "sink": {"type": "kafka", "topic": "t",
            "security": {"protocol": "sasl_ssl", "sasl_username": "dd",
                         "sasl_password": "secret", "ssl_key_password": "pw"}}});
        redact(&mut v);
        assert_eq!(v["sink"]["security"]["sasl_password"], "********");
        assert_eq!(v["sink"]["security"]["ssl_key_password"], "********");
        assert_eq!(v["sink"]["security"]["sasl_username"], "dd");
        let mut plain = json!({"name": "t", "sink": {"type": "tcp", "endpoints": []}});
        let before = plain.clone();
        redact(&mut plain);
        assert_eq!(plain, before);
    }
}
