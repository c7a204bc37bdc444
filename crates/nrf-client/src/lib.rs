//! How every fivecore NF talks to the NRF (TS 29.510): register on start and keep the
//! registration alive with heartbeats, deregister on shutdown, discover producers through a
//! validity-period cache, subscribe to NF status changes and apply the notifications.
//!
//! A newcomer's map: [`config`] is `[nrf_client]`; [`fsm`] is the registration state machine
//! (pure, timers as events); [`discovery`] the query and the cache; [`notify`] the callback
//! side of NFStatusNotify; this file holds [`NrfClient`], which drives them over an
//! [`sbi::client::SbiClient`]. docs/nrf-client.md shows how an NF wires it.
//!
//! ```no_run
//! # async fn demo(http: sbi::client::SbiClient) -> Result<(), nrf_client::Error> {
//! use nrf_client::{DiscoveryQuery, NrfClient, NrfClientConfig, ProfileBuilder};
//! let profile = ProfileBuilder::new("PCF", "5a3c4c9e-8f1b-4a8e-9d3c-2f0e1b7a6c55")
//!     .ipv4("127.0.0.1")
//!     .service("npcf-smpolicycontrol", "http", 7003)
//!     .build();
//! let nrf = NrfClient::new(NrfClientConfig::default(), http, profile)?;
//! nrf.start(); // registers in the background; nrf.state() tells how far it got
//! let udrs = nrf.discover(&DiscoveryQuery::new("UDR", "PCF")).await?;
//! # let _ = udrs;
//! nrf.shutdown().await; // NFDeregister
//! # Ok(())
//! # }
//! ```

pub mod access_token;
pub mod config;
pub mod discovery;
pub mod fsm;
pub mod notify;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use chrono::{DateTime, SecondsFormat, Utc};
use http::{Method, StatusCode, Uri};
use sbi::client::{ClientError, SbiClient, SbiResponse};
use serde_json::{json, Value};
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;

pub use config::NrfClientConfig;
pub use discovery::{service_api_root, DiscoveryQuery, SearchResult, Snssai};
pub use fsm::NfState;
pub use notify::Notification;

use discovery::DiscoveryCache;
use fsm::{Action, Event, Fsm, FsmConfig};

const NF_INSTANCES: &str = "/nnrf-nfm/v1/nf-instances";
const SUBSCRIPTIONS: &str = "/nnrf-nfm/v1/subscriptions";
const DISCOVERY: &str = "/nnrf-disc/v1/nf-instances";
const JSON_PATCH: &str = "application/json-patch+json";
const NO_LOAD: u32 = u32::MAX;

/// What can go wrong talking to the NRF.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Bad configuration or own profile.
    #[error("NRF client configuration: {0}")]
    Config(String),
    /// No NRF could be reached (or every one answered 503/504, or timed out).
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The NRF answered with an error; `problem` is its ProblemDetails, if any.
    #[error("NRF answered {status}{}", problem.as_ref().map(|p| format!(": {p}")).unwrap_or_default())]
    Status { status: StatusCode, problem: Option<Value> },
    /// The NRF's answer is not what TS 29.510 says.
    #[error("NRF answer: {0}")]
    Decode(String),
    /// No access token: the last request for one failed a moment ago (the reason).
    #[error("no access token: {0}")]
    NoToken(String),
}

fn status_error(rsp: &SbiResponse) -> Error {
    Error::Status { status: rsp.status(), problem: rsp.problem() }
}

// ---------------------------------------------------------------------------------------------
// Own profile
// ---------------------------------------------------------------------------------------------

/// A small builder for the NF's own NFProfile; anything it lacks can be set with
/// [`ProfileBuilder::attr`] (or pass a complete `serde_json::Value` to [`NrfClient::new`]).
#[derive(Debug, Clone)]
pub struct ProfileBuilder {
    profile: serde_json::Map<String, Value>,
}

impl ProfileBuilder {
    pub fn new(nf_type: &str, nf_instance_id: &str) -> Self {
        let mut profile = serde_json::Map::new();
        profile.insert("nfInstanceId".into(), nf_instance_id.into());
        profile.insert("nfType".into(), nf_type.into());
        profile.insert("nfStatus".into(), "REGISTERED".into());
        ProfileBuilder { profile }
    }

    pub fn ipv4(mut self, addr: &str) -> Self {
        let list = self.profile.entry("ipv4Addresses").or_insert_with(|| json!([]));
        if let Value::Array(a) = list {
            a.push(addr.into());
        }
        self
    }

    pub fn fqdn(self, fqdn: &str) -> Self {
        self.attr("fqdn", fqdn)
    }

    /// Adds an NFService of version `v1` (`1.0.0`); [`versioned_service`](Self::versioned_service)
    /// names the versions.
    pub fn service(self, name: &str, scheme: &str, port: u16) -> Self {
        self.versioned_service(name, scheme, port, &[("v1", "1.0.0")])
    }

    /// Adds an NFService (`serviceInstanceId` = its name) on `scheme`, one IPv4 endpoint per
    /// profile address so far (`port` on each), offering `versions`: (apiVersionInUri,
    /// apiFullVersion) pairs, e.g. `("v2", "2.2.4")` for the API version of the spec implemented.
    pub fn versioned_service(
        mut self,
        name: &str,
        scheme: &str,
        port: u16,
        versions: &[(&str, &str)],
    ) -> Self {
        let endpoints: Vec<Value> = self
            .profile
            .get("ipv4Addresses")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(|ip| json!({"ipv4Address": ip, "port": port})).collect())
            .unwrap_or_default();
        let versions: Vec<Value> = versions
            .iter()
            .map(|(uri, full)| json!({"apiVersionInUri": uri, "apiFullVersion": full}))
            .collect();
        let mut svc = json!({
            "serviceInstanceId": name,
            "serviceName": name,
            "versions": versions,
            "scheme": scheme,
            "nfServiceStatus": "REGISTERED",
        });
        if !endpoints.is_empty() {
            svc["ipEndPoints"] = Value::Array(endpoints);
        }
        let list = self.profile.entry("nfServices").or_insert_with(|| json!([]));
        if let Value::Array(a) = list {
            a.push(svc);
        }
        self
    }

    /// Sets any attribute of the profile.
    pub fn attr(mut self, name: &str, value: impl Into<Value>) -> Self {
        self.profile.insert(name.to_owned(), value.into());
        self
    }

    /// The profile. Its services come in both forms TS 29.510 has: the `nfServices` array
    /// (deprecated in Rel-16, still the only one older NRFs read) and the `nfServiceList` map
    /// keyed by serviceInstanceId (what Rel-16+ NRFs and consumers read), with the same content.
    pub fn build(mut self) -> Value {
        if !self.profile.contains_key("nfServiceList") {
            if let Some(Value::Array(services)) = self.profile.get("nfServices") {
                let map: serde_json::Map<String, Value> = services
                    .iter()
                    .filter_map(|s| {
                        let id = s.get("serviceInstanceId")?.as_str()?;
                        Some((id.to_owned(), s.clone()))
                    })
                    .collect();
                self.profile.insert("nfServiceList".into(), Value::Object(map));
            }
        }
        Value::Object(self.profile)
    }
}

// ---------------------------------------------------------------------------------------------
// Subscriptions
// ---------------------------------------------------------------------------------------------

/// A status subscription held at the NRF.
#[derive(Debug, Clone, PartialEq)]
pub struct Subscription {
    /// The subscriptionId the NRF assigned.
    pub id: String,
    /// When the NRF ends it unless renewed (the client renews it on its own).
    pub validity_time: Option<DateTime<Utc>>,
    /// SubscriptionData as the NRF answered it.
    pub data: Value,
}

struct SubRecord {
    /// The SubscriptionData sent, to create it again if the NRF forgets it.
    request: Value,
    sub: Subscription,
}

// ---------------------------------------------------------------------------------------------
// The client
// ---------------------------------------------------------------------------------------------

/// The NF's NRF client. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct NrfClient {
    inner: Arc<Inner>,
}

struct Inner {
    config: NrfClientConfig,
    http: SbiClient,
    roots: Vec<Uri>,
    instance_id: String,
    nf_type: String,
    /// The profile to register, then the one the NRF answered with.
    profile: RwLock<Value>,
    load: AtomicU32,
    state: watch::Sender<NfState>,
    heartbeat_timer: Mutex<Option<Duration>>,
    cache: Mutex<DiscoveryCache>,
    peers: RwLock<HashMap<String, Value>>,
    subscriptions: Mutex<HashMap<String, SubRecord>>,
    notifications: broadcast::Sender<Arc<Notification>>,
    stop: watch::Sender<bool>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    tokens: access_token::Tokens,
}

impl NrfClient {
    /// A client for the NF whose NFProfile is `profile` (nfInstanceId and nfType required).
    /// Nothing is sent until [`start`](Self::start) (registration) or the first call.
    pub fn new(config: NrfClientConfig, http: SbiClient, profile: Value) -> Result<Self, Error> {
        config.validate().map_err(Error::Config)?;
        let roots = config
            .api_roots
            .iter()
            .map(|r| r.parse::<Uri>().map_err(|e| Error::Config(format!("api_roots: {e}"))))
            .collect::<Result<Vec<_>, _>>()?;
        let field = |k: &str| {
            profile
                .get(k)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| Error::Config(format!("own NF profile has no {k}")))
        };
        let instance_id = field("nfInstanceId")?;
        let nf_type = field("nfType")?;
        let mut profile = profile;
        if profile.get("nfStatus").is_none() {
            profile["nfStatus"] = "REGISTERED".into();
        }
        if let (None, Some(t)) = (profile.get("heartBeatTimer"), config.heartbeat_timer_secs) {
            profile["heartBeatTimer"] = t.into();
        }
        let cache = DiscoveryCache::new(config.discovery_cache_entries);
        Ok(NrfClient {
            inner: Arc::new(Inner {
                config,
                http,
                roots,
                instance_id,
                nf_type,
                profile: RwLock::new(profile),
                load: AtomicU32::new(NO_LOAD),
                state: watch::Sender::new(NfState::Registering),
                heartbeat_timer: Mutex::new(None),
                cache: Mutex::new(cache),
                peers: RwLock::new(HashMap::new()),
                subscriptions: Mutex::new(HashMap::new()),
                notifications: broadcast::Sender::new(256),
                stop: watch::Sender::new(false),
                tasks: Mutex::new(Vec::new()),
                tokens: access_token::Tokens::default(),
            }),
        })
    }

    /// Starts the background work: registration and heartbeats (unless `register = false`)
    /// and subscription renewal. Returns at once; the NF need not wait for the NRF.
    /// Must be called inside a tokio runtime; calling it twice starts nothing more.
    pub fn start(&self) {
        let mut tasks = self.inner.tasks.lock().unwrap();
        if !tasks.is_empty() || *self.inner.stop.borrow() {
            return;
        }
        if self.inner.config.register {
            tasks.push(tokio::spawn(drive(self.inner.clone(), self.inner.stop.subscribe())));
        }
        tasks.push(tokio::spawn(keep_subscriptions(
            self.inner.clone(),
            self.inner.stop.subscribe(),
        )));
    }

    /// Stops: deregisters (when registered and `deregister_on_shutdown`), removes this
    /// client's subscriptions, and waits for the background tasks to end.
    pub async fn shutdown(&self) {
        self.inner.stop.send_replace(true);
        let tasks: Vec<_> = std::mem::take(&mut *self.inner.tasks.lock().unwrap());
        for t in tasks {
            let _ = t.await;
        }
        let ids: Vec<String> = self.inner.subscriptions.lock().unwrap().keys().cloned().collect();
        for id in ids {
            if let Err(e) = self.unsubscribe(&id).await {
                tracing::debug!(subscription = %id, error = %e, "unsubscribe at shutdown failed");
            }
        }
        self.inner.state.send_if_modified(|s| {
            let changed = *s != NfState::Deregistered;
            *s = NfState::Deregistered;
            changed
        });
    }

    /// Where the registration stands.
    pub fn state(&self) -> NfState {
        *self.inner.state.borrow()
    }

    /// Follows state changes (e.g. to mark the NF ready once `Registered`).
    pub fn state_changes(&self) -> watch::Receiver<NfState> {
        self.inner.state.subscribe()
    }

    /// Waits until the state is `want`, at most `timeout`; true if it got there.
    pub async fn wait_for_state(&self, want: NfState, timeout: Duration) -> bool {
        let mut rx = self.inner.state.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|s| *s == want)).await.is_ok_and(|r| r.is_ok())
    }

    pub fn instance_id(&self) -> &str {
        &self.inner.instance_id
    }

    pub fn nf_type(&self) -> &str {
        &self.inner.nf_type
    }

    /// The own profile: as the NRF last answered it once registered.
    pub fn profile(&self) -> Value {
        self.inner.profile.read().unwrap().clone()
    }

    /// Replaces the own profile (same nfInstanceId and nfType) and, when registered, sends it
    /// at once (NFUpdate by PUT); otherwise the next NFRegister carries it.
    pub async fn update_profile(&self, profile: Value) -> Result<(), Error> {
        let same = |k: &str, want: &str| profile.get(k).and_then(Value::as_str) == Some(want);
        if !same("nfInstanceId", &self.inner.instance_id) || !same("nfType", &self.inner.nf_type) {
            return Err(Error::Config("a new profile keeps nfInstanceId and nfType".into()));
        }
        *self.inner.profile.write().unwrap() = profile.clone();
        if !matches!(self.state(), NfState::Registered | NfState::Suspended) {
            return Ok(());
        }
        let rsp = self
            .inner
            .http
            .put(&instance_path(&self.inner))
            .json(&profile)
            .max_rsp_time(self.inner.config.request_timeout())
            .send_with_alternates(&self.inner.roots)
            .await?;
        if !rsp.status().is_success() {
            return Err(status_error(&rsp));
        }
        if let Ok(answered) = rsp.json::<Value>() {
            if answered.is_object() {
                *self.inner.profile.write().unwrap() = answered;
            }
        }
        Ok(())
    }

    /// The heartBeatTimer the NRF granted, once registered.
    pub fn heartbeat_timer(&self) -> Option<Duration> {
        *self.inner.heartbeat_timer.lock().unwrap()
    }

    /// The load (0..=100) sent with each heartbeat; `None` sends none.
    pub fn set_load(&self, load: Option<u8>) {
        let v = load.map_or(NO_LOAD, |l| u32::from(l.min(100)));
        self.inner.load.store(v, Ordering::Relaxed);
    }

    // ---- discovery ---------------------------------------------------------------------------

    /// NFDiscover, answered from the cache while an earlier identical query's answer is valid
    /// (validityPeriod and Cache-Control, see docs/nrf-client.md). An empty
    /// `requester_nf_type` is the NF's own type.
    pub async fn discover(&self, query: &DiscoveryQuery) -> Result<Arc<SearchResult>, Error> {
        let filled;
        let query = if query.requester_nf_type.is_empty() {
            filled =
                DiscoveryQuery { requester_nf_type: self.inner.nf_type.clone(), ..query.clone() };
            &filled
        } else {
            query
        };
        if query.target_nf_type.is_empty() {
            return Err(Error::Config("discovery needs a target NF type".into()));
        }
        let qs = query.to_query_string();
        if let Some(hit) = self.inner.cache.lock().unwrap().get(&qs, Instant::now()) {
            return Ok(hit);
        }
        let rsp = self
            .inner
            .http
            .get(&format!("{DISCOVERY}?{qs}"))
            .max_rsp_time(self.inner.config.request_timeout())
            .send_with_alternates(&self.inner.roots)
            .await?;
        if rsp.status() != StatusCode::OK {
            return Err(status_error(&rsp));
        }
        let result: SearchResult =
            rsp.json().map_err(|e| Error::Decode(format!("SearchResult: {e}")))?;
        let result = Arc::new(result);
        let fresh = discovery::freshness(
            result.validity_period,
            rsp.header("cache-control"),
            Duration::from_secs(self.inner.config.discovery_max_validity_secs),
        );
        if let Some(d) = fresh {
            self.inner.cache.lock().unwrap().insert(
                qs,
                &query.target_nf_type,
                result.clone(),
                Instant::now() + d,
            );
        }
        Ok(result)
    }

    /// Forgets every cached discovery answer.
    pub fn clear_discovery_cache(&self) {
        self.inner.cache.lock().unwrap().clear();
    }

    /// Discovery answers currently cached (expired ones may still be counted until looked up).
    pub fn discovery_cache_len(&self) -> usize {
        self.inner.cache.lock().unwrap().len()
    }

    // ---- subscriptions -----------------------------------------------------------------------

    /// NFStatusSubscribe: `cond` is a SubscrCond (`{"nfType":"PCF"}`, `{"nfInstanceId":..}`,
    /// `{"serviceName":..}` ...; `Value::Null` for every NF), notifications go to
    /// `callback_uri` (served with [`notify::route`]). The client renews it before its
    /// validityTime and removes it at shutdown.
    pub async fn subscribe(&self, cond: Value, callback_uri: &str) -> Result<Subscription, Error> {
        let validity = Utc::now()
            + chrono::Duration::seconds(
                i64::try_from(self.inner.config.subscription_validity_secs).unwrap_or(i64::MAX / 2),
            );
        let mut request = json!({
            "nfStatusNotificationUri": callback_uri,
            "reqNfType": self.inner.nf_type,
            "reqNfInstanceId": self.inner.instance_id,
            "validityTime": validity.to_rfc3339_opts(SecondsFormat::Secs, true),
        });
        if !cond.is_null() {
            request["subscrCond"] = cond;
        }
        let sub = create_subscription(&self.inner, &request).await?;
        self.inner
            .subscriptions
            .lock()
            .unwrap()
            .insert(sub.id.clone(), SubRecord { request, sub: sub.clone() });
        Ok(sub)
    }

    /// NFStatusUnsubscribe. A subscription the NRF no longer knows (404) counts as removed.
    pub async fn unsubscribe(&self, id: &str) -> Result<(), Error> {
        self.inner.subscriptions.lock().unwrap().remove(id);
        let rsp = self
            .inner
            .http
            .delete(&format!("{SUBSCRIPTIONS}/{id}"))
            .max_rsp_time(self.inner.config.request_timeout())
            .send_with_alternates(&self.inner.roots)
            .await?;
        match rsp.status() {
            s if s.is_success() || s == StatusCode::NOT_FOUND => Ok(()),
            _ => Err(status_error(&rsp)),
        }
    }

    /// Renews subscription `id` now (PATCH validityTime to `subscription_validity_secs` from
    /// now). The background task does this on its own before validityTime.
    pub async fn renew(&self, id: &str) -> Result<Subscription, Error> {
        renew(&self.inner, id).await
    }

    /// The subscriptions this client holds.
    pub fn subscriptions(&self) -> Vec<Subscription> {
        self.inner.subscriptions.lock().unwrap().values().map(|r| r.sub.clone()).collect()
    }

    // ---- notifications -----------------------------------------------------------------------

    /// Applies an NFStatusNotify: updates the peer profile table and drops the discovery
    /// answers it may have made stale (those listing the instance on NF_DEREGISTERED and
    /// NF_PROFILE_CHANGED; those for its NF type on NF_REGISTERED and NF_PROFILE_CHANGED, as
    /// the NF may now match them), then publishes it on [`notifications`](Self::notifications).
    pub fn apply_notification(&self, n: &Notification) {
        let id = n.nf_instance_id().to_ascii_lowercase();
        let mut nf_type = n
            .nf_profile
            .as_ref()
            .and_then(|p| p.get("nfType"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        {
            let mut peers = self.inner.peers.write().unwrap();
            if nf_type.is_none() {
                nf_type = peers
                    .get(&id)
                    .and_then(|p| p.get("nfType"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
            }
            match n.event.as_str() {
                notify::NF_DEREGISTERED => {
                    peers.remove(&id);
                }
                _ => {
                    if let Some(p) = &n.nf_profile {
                        peers.insert(id.clone(), p.clone());
                    } else if let Some(p) = peers.get_mut(&id) {
                        notify::apply_changes(p, &n.profile_changes);
                    }
                }
            }
        }
        let dropped = {
            let mut cache = self.inner.cache.lock().unwrap();
            let mut dropped = 0;
            if n.event != notify::NF_REGISTERED {
                dropped += cache.invalidate_instance(&id);
            }
            if n.event != notify::NF_DEREGISTERED {
                match &nf_type {
                    Some(t) => dropped += cache.invalidate_type(t),
                    None => {
                        dropped += cache.len();
                        cache.clear();
                    }
                }
            }
            dropped
        };
        tracing::debug!(event = %n.event, nf_instance = %id, dropped, "NF status notification");
        let _ = self.inner.notifications.send(Arc::new(n.clone()));
    }

    /// Decodes a NotificationData body and applies it ([`apply_notification`](Self::apply_notification)).
    pub fn handle_notification(&self, body: &[u8]) -> Result<Notification, Error> {
        let n =
            notify::decode(body).map_err(|e| Error::Decode(format!("NotificationData: {e}")))?;
        self.apply_notification(&n);
        Ok(n)
    }

    /// Every notification applied from now on.
    pub fn notifications(&self) -> broadcast::Receiver<Arc<Notification>> {
        self.inner.notifications.subscribe()
    }

    /// The last known profile of peer NF `id`, as notifications delivered it.
    pub fn peer(&self, id: &str) -> Option<Value> {
        self.inner.peers.read().unwrap().get(&id.to_ascii_lowercase()).cloned()
    }
}

// ---------------------------------------------------------------------------------------------
// Registration driver
// ---------------------------------------------------------------------------------------------

async fn drive(inner: Arc<Inner>, mut stop: watch::Receiver<bool>) {
    let c = &inner.config;
    let mut fsm = Fsm::new(FsmConfig {
        retry_initial: Duration::from_millis(c.register_retry_initial_ms),
        retry_max: Duration::from_millis(c.register_retry_max_ms),
        heartbeat_percent: c.heartbeat_percent,
        failures_to_suspend: c.heartbeat_failures_to_suspend,
        deregister_on_shutdown: c.deregister_on_shutdown,
    });
    let mut ev = Event::Start;
    loop {
        let action = fsm.handle(ev);
        let state = fsm.state();
        inner.state.send_if_modified(|s| {
            let changed = *s != state;
            if changed {
                tracing::info!(from = ?*s, to = ?state, "NRF registration state");
            }
            *s = state;
            changed
        });
        if action == Action::Exit {
            break;
        }
        if *stop.borrow() && action != Action::SendDeregister {
            ev = Event::Shutdown;
            continue;
        }
        ev = match action {
            Action::SendRegister => register(&inner).await,
            Action::SendHeartbeat => heartbeat(&inner).await,
            Action::SendDeregister => {
                deregister(&inner).await;
                Event::DeregisterDone
            }
            Action::Wait(d) => tokio::select! {
                _ = tokio::time::sleep(d) => Event::Timer,
                _ = stop.wait_for(|s| *s) => Event::Shutdown,
            },
            Action::Exit => unreachable!("handled above"),
        };
    }
}

fn instance_path(inner: &Inner) -> String {
    format!("{NF_INSTANCES}/{}", inner.instance_id)
}

async fn register(inner: &Inner) -> Event {
    let profile = inner.profile.read().unwrap().clone();
    let rsp = inner
        .http
        .put(&instance_path(inner))
        .json(&profile)
        .max_rsp_time(inner.config.request_timeout())
        .send_with_alternates(&inner.roots)
        .await;
    match rsp {
        Ok(r) if r.status() == StatusCode::OK || r.status() == StatusCode::CREATED => {
            let answered: Value = r.json().unwrap_or(Value::Null);
            let timer = answered
                .get("heartBeatTimer")
                .and_then(Value::as_u64)
                .or_else(|| profile.get("heartBeatTimer").and_then(Value::as_u64))
                .unwrap_or(10)
                .max(1);
            let heartbeat = Duration::from_secs(timer);
            *inner.heartbeat_timer.lock().unwrap() = Some(heartbeat);
            if answered.is_object() {
                *inner.profile.write().unwrap() = answered;
            }
            tracing::info!(status = %r.status(), heartbeat_secs = timer, "registered with the NRF");
            Event::RegisterOk { heartbeat }
        }
        Ok(r) => {
            tracing::warn!(status = %r.status(), problem = ?r.problem(), "NFRegister refused");
            Event::RegisterFailed
        }
        Err(e) => {
            tracing::warn!(error = %e, "NFRegister failed");
            Event::RegisterFailed
        }
    }
}

/// The heartbeat body (TS 29.510 §5.2.2.3.2): JSON patch setting nfStatus REGISTERED and, when
/// given, the load.
pub fn heartbeat_patch(load: Option<u8>) -> Value {
    let mut ops = vec![json!({"op": "replace", "path": "/nfStatus", "value": "REGISTERED"})];
    if let Some(load) = load {
        // `add` sets the member whether or not the profile has one (`replace` needs it).
        ops.push(json!({"op": "add", "path": "/load", "value": load}));
    }
    Value::Array(ops)
}

async fn heartbeat(inner: &Inner) -> Event {
    let load = inner.load.load(Ordering::Relaxed);
    let load = u8::try_from(load).ok();
    let body = serde_json::to_vec(&heartbeat_patch(load)).unwrap_or_default();
    let rsp = inner
        .http
        .patch(&instance_path(inner))
        .header(http::header::CONTENT_TYPE, JSON_PATCH)
        .body(body)
        .max_rsp_time(inner.config.request_timeout())
        .send_with_alternates(&inner.roots)
        .await;
    match rsp {
        Ok(r) if r.status().is_success() => {
            let answered: Option<Value> =
                (r.status() == StatusCode::OK).then(|| r.json().ok()).flatten();
            let heartbeat = answered
                .as_ref()
                .and_then(|p| p.get("heartBeatTimer"))
                .and_then(Value::as_u64)
                .map(|t| Duration::from_secs(t.max(1)));
            if let Some(h) = heartbeat {
                *inner.heartbeat_timer.lock().unwrap() = Some(h);
            }
            if let Some(p) = answered.filter(Value::is_object) {
                *inner.profile.write().unwrap() = p;
            }
            Event::HeartbeatOk { heartbeat }
        }
        Ok(r) if r.status() == StatusCode::NOT_FOUND => {
            tracing::warn!("the NRF does not know this NF any more: registering again");
            Event::HeartbeatNotFound
        }
        Ok(r) => {
            tracing::warn!(status = %r.status(), problem = ?r.problem(), "heartbeat refused");
            Event::HeartbeatFailed
        }
        Err(e) => {
            tracing::warn!(error = %e, "heartbeat failed");
            Event::HeartbeatFailed
        }
    }
}

async fn deregister(inner: &Inner) {
    let rsp = inner
        .http
        .delete(&instance_path(inner))
        .max_rsp_time(inner.config.request_timeout())
        .send_with_alternates(&inner.roots)
        .await;
    match rsp {
        Ok(r) if r.status().is_success() || r.status() == StatusCode::NOT_FOUND => {
            tracing::info!(status = %r.status(), "deregistered from the NRF")
        }
        Ok(r) => tracing::warn!(status = %r.status(), "NFDeregister refused"),
        Err(e) => tracing::warn!(error = %e, "NFDeregister failed"),
    }
}

// ---------------------------------------------------------------------------------------------
// Subscription upkeep
// ---------------------------------------------------------------------------------------------

fn parse_subscription(rsp: &SbiResponse) -> Result<Subscription, Error> {
    let data: Value = rsp.json().map_err(|e| Error::Decode(format!("SubscriptionData: {e}")))?;
    let id = data
        .get("subscriptionId")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| {
            rsp.header("location")
                .and_then(|l| l.trim_end_matches('/').rsplit('/').next())
                .map(str::to_owned)
        })
        .ok_or_else(|| Error::Decode("SubscriptionData without subscriptionId".into()))?;
    let validity_time = data
        .get("validityTime")
        .and_then(Value::as_str)
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc));
    Ok(Subscription { id, validity_time, data })
}

async fn create_subscription(inner: &Inner, request: &Value) -> Result<Subscription, Error> {
    let rsp = inner
        .http
        .post(SUBSCRIPTIONS)
        .json(request)
        .max_rsp_time(inner.config.request_timeout())
        .send_with_alternates(&inner.roots)
        .await?;
    if rsp.status() != StatusCode::CREATED && rsp.status() != StatusCode::OK {
        return Err(status_error(&rsp));
    }
    parse_subscription(&rsp)
}

async fn renew(inner: &Inner, id: &str) -> Result<Subscription, Error> {
    let validity = Utc::now()
        + chrono::Duration::seconds(
            i64::try_from(inner.config.subscription_validity_secs).unwrap_or(i64::MAX / 2),
        );
    let ops = json!([{
        "op": "replace",
        "path": "/validityTime",
        "value": validity.to_rfc3339_opts(SecondsFormat::Secs, true),
    }]);
    let rsp = inner
        .http
        .request(Method::PATCH, &format!("{SUBSCRIPTIONS}/{id}"))
        .header(http::header::CONTENT_TYPE, JSON_PATCH)
        .body(serde_json::to_vec(&ops).unwrap_or_default())
        .max_rsp_time(inner.config.request_timeout())
        .send_with_alternates(&inner.roots)
        .await?;
    let sub = match rsp.status() {
        StatusCode::OK => parse_subscription(&rsp)?,
        // 204: accepted as asked.
        StatusCode::NO_CONTENT => {
            let data = inner
                .subscriptions
                .lock()
                .unwrap()
                .get(id)
                .map(|r| r.sub.data.clone())
                .unwrap_or(Value::Null);
            Subscription { id: id.to_owned(), validity_time: Some(validity), data }
        }
        _ => return Err(status_error(&rsp)),
    };
    if let Some(r) = inner.subscriptions.lock().unwrap().get_mut(id) {
        r.sub = sub.clone();
    }
    Ok(sub)
}

/// Renews subscriptions close to their validityTime; creates again those the NRF forgot.
async fn keep_subscriptions(inner: Arc<Inner>, mut stop: watch::Receiver<bool>) {
    let period = Duration::from_millis(inner.config.subscription_check_ms);
    let before = chrono::Duration::seconds(
        i64::try_from(inner.config.subscription_renew_before_secs).unwrap_or(i64::MAX / 2),
    );
    loop {
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let now = Utc::now();
        let due: Vec<String> = inner
            .subscriptions
            .lock()
            .unwrap()
            .values()
            .filter(|r| r.sub.validity_time.is_some_and(|t| t - now < before))
            .map(|r| r.sub.id.clone())
            .collect();
        for id in due {
            match renew(&inner, &id).await {
                Ok(s) => {
                    tracing::debug!(subscription = %id, validity = ?s.validity_time, "renewed")
                }
                Err(Error::Status { status: StatusCode::NOT_FOUND, .. }) => {
                    let request =
                        inner.subscriptions.lock().unwrap().get(&id).map(|r| r.request.clone());
                    let Some(request) = request else { continue };
                    match create_subscription(&inner, &request).await {
                        Ok(sub) => {
                            tracing::info!(old = %id, new = %sub.id, "subscription created again");
                            let mut subs = inner.subscriptions.lock().unwrap();
                            subs.remove(&id);
                            subs.insert(sub.id.clone(), SubRecord { request, sub });
                        }
                        Err(e) => {
                            tracing::warn!(subscription = %id, error = %e, "cannot subscribe again")
                        }
                    }
                }
                Err(e) => tracing::warn!(subscription = %id, error = %e, "renewal failed"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_lists_services_in_both_forms_with_their_versions() {
        let p = ProfileBuilder::new("UDR", "4947a69a-f61b-4bc1-b9da-47c9c5d14b64")
            .ipv4("10.0.0.1")
            .versioned_service("nudr-dr", "https", 8443, &[("v2", "2.2.4")])
            .service("nudr-group-id-map", "https", 8443)
            .build();
        let dr = json!({"serviceInstanceId": "nudr-dr", "serviceName": "nudr-dr",
            "versions": [{"apiVersionInUri": "v2", "apiFullVersion": "2.2.4"}],
            "scheme": "https", "nfServiceStatus": "REGISTERED",
            "ipEndPoints": [{"ipv4Address": "10.0.0.1", "port": 8443}]});
        assert_eq!(p["nfServices"][0], dr);
        assert_eq!(p["nfServiceList"]["nudr-dr"], dr);
        assert_eq!(p["nfServices"][1]["versions"][0]["apiVersionInUri"], "v1");
        assert_eq!(p["nfServiceList"]["nudr-group-id-map"], p["nfServices"][1]);
        assert_eq!(p["nfServiceList"].as_object().unwrap().len(), 2);
        // No services: neither form.
        let p = ProfileBuilder::new("UDR", "4947a69a-f61b-4bc1-b9da-47c9c5d14b64").build();
        assert!(p.get("nfServices").is_none() && p.get("nfServiceList").is_none());
    }
}
