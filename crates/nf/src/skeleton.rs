//! The NF skeleton: how every fivecore NF starts, serves and stops (after open5gs's `init.c`
//! and `sbi-path.c`, with the state passed in instead of global).
//!
//! An NF fills it in, in this order:
//! 1. [`Skeleton::open`] with the NF's [`Spec`]: its nfInstanceId (generated when not
//!    configured), the SBI client (User-Agent naming the NF), and its store, opened. An NF whose
//!    state goes through [`store::DocumentStore`] only opens with [`Skeleton::open_any`]
//!    instead: its store is then the backend `[store] backend` names ([`AnyStore`]). An NF with
//!    SQL of its own on SQLite opens with [`Skeleton::open`], which refuses `backend = "mysql"`
//!    naming the NF, so it never keeps its state in a file the operator did not ask for.
//! 2. The NF builds its context on [`Skeleton::store`] and [`Skeleton::client`], loads its
//!    state, and [`Skeleton::bind`]s its router: the SBI port is bound, so its address is known
//!    before any NRF profile is built.
//! 3. On the [`Serving`] it got: [`Serving::register`] the NF profile(s) with the NRF (when
//!    `nrf` is configured), [`Serving::diameter`] its Diameter node, [`Serving::on_stop`] what
//!    its own background work needs to stop, [`Serving::defer_ready`] when it loads something
//!    in the background before it is worth routing to.
//! 4. [`Serving::serve`] until shutdown. The stop is always the same: the SBI server drains
//!    (GOAWAY, in-flight requests answered), the NF's own stop steps run in the order given,
//!    each Diameter node sends DPR to its peers, each NRF registration is withdrawn
//!    (NFDeregister), the copies still buffered for the Data Director are sent, and the store
//!    closes (everything acknowledged is already committed).
//!
//! With `[<nf>.copy] enabled` ([`Spec::copy`]) the skeleton makes the NF's copier (crate
//! `dd_client`) and installs it as the message-copy tap of the SBI server, of the SBI client
//! (what the NF sends: also its NRF registration and heartbeats) and of every Diameter node
//! the NF gives [`Serving::diameter`]. Off, no tap is installed and copying costs nothing.
//!
//! With `[telemetry.otlp]` (carried in [`Spec::sbi`]'s `telemetry`) the skeleton starts the
//! NF's span export (crate `telemetry`, `service.name` `fivecore-<nf>`) and gives the SBI server
//! and client its tracer; its counters are on `/metrics`, and what is queued is exported at
//! stop, after the copies. Off, requests only pass a consumer's trace context on
//! (docs/telemetry.md).

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use dd_client::{Copier, CopyConfig};
use diameter::DiameterNode;
use nrf_client::{NrfClient, NrfClientConfig, ProfileBuilder};
use sbi::client::{ClientConfig, SbiClient};
use sbi::{NfIdentity, Observability, Router, SbiServer, ServerConfig};
use store::{AnyStore, Backend, SqliteConfig, SqliteStore};

/// What the skeleton needs of an NF's configuration.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The NF type as TS 29.510 spells it (`"BSF"`, `"UDR"`, ...).
    pub nf_type: &'static str,
    /// The nfInstanceId; a new v4 UUID when `None`.
    pub instance_id: Option<String>,
    pub sbi: ServerConfig,
    pub client: ClientConfig,
    pub store: SqliteConfig,
    /// Where to register; `None` for an NF that does not register (the NRF itself, a lab).
    pub nrf: Option<NrfClientConfig>,
    /// `[<nf>.copy]`: message copies to the Data Director.
    pub copy: CopyConfig,
}

/// How long the stop waits for the Data Director to take the copies still buffered.
const COPY_FLUSH: Duration = Duration::from_secs(2);
/// How long the stop waits for the collector to take the spans still queued.
const SPAN_FLUSH: Duration = Duration::from_secs(2);

/// Why an NF could not start or serve.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("store: {0}")]
    Store(#[from] store::Error),
    #[error("SBI client: {0}")]
    Client(#[from] sbi::client::ClientError),
    #[error("SBI server: {0}")]
    Server(#[from] sbi::server::ServerError),
    #[error("NRF client: {0}")]
    Nrf(#[from] nrf_client::Error),
    #[error("serving: {0}")]
    Io(#[from] std::io::Error),
}

/// A store the skeleton opens from `[store]` and closes when the NF stops.
pub trait NfStore: Clone + Send + Sync + Sized + 'static {
    /// Opens the store `config` names for the NF `nf_type`.
    fn open(
        config: SqliteConfig,
        nf_type: &'static str,
    ) -> impl Future<Output = Result<Self, StartError>> + Send;

    fn close(&self) -> impl Future<Output = store::Result<()>> + Send;

    /// Puts the store's figures (commit times, queues, retries) on the NF's `/metrics`.
    fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry);
}

impl NfStore for SqliteStore {
    async fn open(config: SqliteConfig, nf_type: &'static str) -> Result<Self, StartError> {
        if config.backend != Backend::Sqlite {
            return Err(StartError::Config(format!(
                "[store] backend = \"{}\": the {nf_type} keeps its state on SQLite only \
                 (backend = \"sqlite\") for now",
                backend_name(config.backend)
            )));
        }
        Ok(SqliteStore::open(config).await?)
    }

    async fn close(&self) -> store::Result<()> {
        SqliteStore::close(self).await
    }

    fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        SqliteStore::register_metrics(self, registry)
    }
}

impl NfStore for AnyStore {
    async fn open(config: SqliteConfig, _nf_type: &'static str) -> Result<Self, StartError> {
        Ok(AnyStore::open(config).await?)
    }

    async fn close(&self) -> store::Result<()> {
        AnyStore::close(self).await
    }

    fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        AnyStore::register_metrics(self, registry)
    }
}

fn backend_name(backend: Backend) -> &'static str {
    match backend {
        Backend::Sqlite => "sqlite",
        Backend::Mysql => "mysql",
    }
}

/// An NF whose store is open, before its SBI port is bound.
pub struct Skeleton<S: NfStore = SqliteStore> {
    spec: Spec,
    instance_id: String,
    client: SbiClient,
    store: S,
    observability: Observability,
    copier: Option<Arc<Copier>>,
    traces: Option<Arc<telemetry::Traces>>,
}

impl Skeleton<SqliteStore> {
    /// Makes the NF's identity and SBI client and opens its SQLite store; `backend = "mysql"`
    /// is refused, naming the NF.
    pub async fn open(spec: Spec) -> Result<Skeleton, StartError> {
        Self::open_store(spec).await
    }
}

impl Skeleton<AnyStore> {
    /// Makes the NF's identity and SBI client and opens the store `[store] backend` names.
    pub async fn open_any(spec: Spec) -> Result<Skeleton<AnyStore>, StartError> {
        Self::open_store(spec).await
    }
}

impl<S: NfStore> Skeleton<S> {
    async fn open_store(spec: Spec) -> Result<Skeleton<S>, StartError> {
        raise_descriptor_limit();
        let instance_id =
            spec.instance_id.clone().unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let mut client_config = spec.client.clone();
        client_config
            .user_agent
            .get_or_insert_with(|| sbi::client::user_agent(spec.nf_type, &instance_id));
        let client = SbiClient::new(&client_config)?;
        let observability = Observability::new();
        let traces = telemetry::Traces::start(&spec.sbi.telemetry, spec.nf_type, &instance_id)
            .map_err(|e| StartError::Config(e.to_string()))?
            .map(Arc::new);
        if let Some(t) = &traces {
            client.set_tracer(t.tracer());
            observability.with_registry(|r| t.register_metrics(r));
        }
        let copier = match spec.copy.enabled {
            true => {
                // Its own client: the NF's carries the egress tap, and the copier's POSTs must
                // not be copied.
                let own = SbiClient::new(&client_config)?;
                let copier =
                    Copier::start(&spec.copy, spec.nf_type, &instance_id, own).map_err(|bad| {
                        let section = format!("{}.copy", spec.nf_type.to_ascii_lowercase());
                        StartError::Config(dd_client::config::describe(&section, &bad))
                    })?;
                client.set_tap(copier.sbi_tap());
                observability.with_registry(|r| copier.register_metrics(r));
                Some(Arc::new(copier))
            }
            false => None,
        };
        let store = match S::open(spec.store.clone(), spec.nf_type).await {
            Ok(s) => s,
            Err(e) => {
                if let Some(c) = &copier {
                    c.stop(Duration::ZERO).await;
                }
                if let Some(t) = &traces {
                    t.shutdown(Duration::ZERO).await;
                }
                return Err(e);
            }
        };
        observability.with_registry(|r| store.register_metrics(r));
        Ok(Skeleton { spec, instance_id, client, store, observability, copier, traces })
    }

    pub fn instance_id(&self) -> &str {
        &self.instance_id
    }

    pub fn client(&self) -> &SbiClient {
        &self.client
    }

    /// The NF's store; each NF puts its own store trait's implementation on it.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The metric registry and readiness flag the SBI port serves.
    pub fn observability(&self) -> &Observability {
        &self.observability
    }

    /// `https` when the SBI port has TLS, else `http`: what the NF's own URIs and profile use.
    pub fn scheme(&self) -> &'static str {
        if self.spec.sbi.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// Binds the SBI port with `router`'s service operations.
    pub async fn bind(self, router: Router) -> Result<Serving<S>, StartError> {
        let identity = NfIdentity::new(self.spec.nf_type, self.instance_id.clone());
        let mut server =
            SbiServer::bind(self.spec.sbi.clone(), identity, router, self.observability.clone())
                .await?;
        if let Some(c) = &self.copier {
            server = server.with_tap(c.sbi_tap());
        }
        if let Some(t) = &self.traces {
            server = server.with_tracer(t.tracer());
        }
        Ok(Serving {
            scheme: self.scheme(),
            skeleton: self,
            server,
            nrf: Vec::new(),
            diameter: Vec::new(),
            on_stop: Vec::new(),
            ready_later: false,
        })
    }

    /// Closes the store of an NF that will not serve (its start failed after opening it).
    pub async fn close(self) {
        if let Some(c) = &self.copier {
            c.stop(Duration::ZERO).await;
        }
        if let Some(t) = &self.traces {
            t.shutdown(Duration::ZERO).await;
        }
        close_store(&self.store).await;
    }
}

type StopStep = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A bound NF, ready to serve.
pub struct Serving<S: NfStore = SqliteStore> {
    skeleton: Skeleton<S>,
    scheme: &'static str,
    server: SbiServer,
    nrf: Vec<NrfClient>,
    diameter: Vec<DiameterNode>,
    on_stop: Vec<StopStep>,
    ready_later: bool,
}

impl<S: NfStore> Serving<S> {
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    pub fn instance_id(&self) -> &str {
        &self.skeleton.instance_id
    }

    pub fn client(&self) -> &SbiClient {
        &self.skeleton.client
    }

    pub fn observability(&self) -> &Observability {
        &self.skeleton.observability
    }

    pub fn scheme(&self) -> &'static str {
        self.scheme
    }

    /// The IPv4 address the NF advertises: the one the SBI port is bound to, or loopback when
    /// bound to every address (`0.0.0.0`) or to IPv6.
    pub fn advertised_ipv4(&self) -> Ipv4Addr {
        match self.local_addr().ip() {
            IpAddr::V4(v4) if !v4.is_unspecified() => v4,
            _ => Ipv4Addr::LOCALHOST,
        }
    }

    /// A profile of this NF with its type, instance id and advertised address, for the NF to
    /// add its services to.
    pub fn profile(&self) -> ProfileBuilder {
        ProfileBuilder::new(self.skeleton.spec.nf_type, &self.skeleton.instance_id)
            .ipv4(&self.advertised_ipv4().to_string())
    }

    /// Keeps `profile` registered with the NRF while serving, when an NRF is configured
    /// (returns whether one is). An NF with two profiles (the UDR and its 5G-EIR) calls it twice.
    pub fn register(&mut self, profile: serde_json::Value) -> Result<bool, StartError> {
        let Some(config) = &self.skeleton.spec.nrf else { return Ok(false) };
        let client = NrfClient::new(config.clone(), self.skeleton.client.clone(), profile)?;
        // The NF's calls to other NFs carry the NRF's access tokens (`[<nf>.nrf] access_tokens`);
        // the first registration's client is the source (one NF instance, one consumer id).
        if config.access_tokens && self.nrf.is_empty() {
            self.skeleton.client.set_token_source(client.token_source());
        }
        self.nrf.push(client);
        Ok(true)
    }

    /// The NRF client of the NF's first registration (for discovery), when an NRF is
    /// configured and a profile was registered.
    pub fn nrf_client(&self) -> Option<NrfClient> {
        self.nrf.first().cloned()
    }

    /// A Diameter node of the NF: its metrics are served on `/metrics`, its application
    /// messages are copied to the Data Director when `[<nf>.copy]` is on, and it says DPR to its
    /// peers when the NF stops.
    pub fn diameter(&mut self, node: DiameterNode) {
        self.skeleton.observability.with_registry(|r| node.register_metrics(r));
        if let Some(c) = &self.skeleton.copier {
            node.set_tap(c.diameter_tap());
        }
        self.diameter.push(node);
    }

    /// A step of the NF's own stop (end a background task, flush a queue), run after the SBI
    /// server has drained, in the order the steps were given.
    pub fn on_stop(&mut self, step: impl Future<Output = ()> + Send + 'static) {
        self.on_stop.push(Box::pin(step));
    }

    /// The NF reports ready itself (`Observability::set_ready`) once its background loading is
    /// done, instead of as soon as it serves.
    pub fn defer_ready(&mut self) {
        self.ready_later = true;
    }

    /// Serves until `shutdown`, then stops in the skeleton's order (module doc).
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> Result<(), StartError> {
        for nrf in &self.nrf {
            nrf.start();
        }
        if !self.ready_later {
            self.skeleton.observability.set_ready(true);
        }
        // Not ready from the moment the stop begins, before the server drains.
        let observability = self.skeleton.observability.clone();
        let shutdown = async move {
            shutdown.await;
            observability.set_stopping();
        };
        let served = self.server.serve(shutdown).await;
        for step in self.on_stop {
            step.await;
        }
        for node in &self.diameter {
            node.shutdown().await;
        }
        for nrf in &self.nrf {
            nrf.shutdown().await;
        }
        if let Some(c) = &self.skeleton.copier {
            c.stop(COPY_FLUSH).await;
        }
        if let Some(t) = &self.skeleton.traces {
            t.shutdown(SPAN_FLUSH).await;
        }
        close_store(&self.skeleton.store).await;
        served.map_err(StartError::from)
    }
}

/// Raises the soft RLIMIT_NOFILE to the hard limit before the store opens its files, once per
/// process (`fivecore up` opens several NFs): the SBI server's connection cap is derived from it.
fn raise_descriptor_limit() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| match sbi::descriptors::raise_nofile_limit() {
        Ok((old, new)) if old != new => {
            tracing::info!(old, new, "raised the open-file limit (RLIMIT_NOFILE)")
        }
        Ok((_, limit)) => tracing::info!(limit, "open-file limit (RLIMIT_NOFILE)"),
        Err(e) => tracing::warn!(error = %e, "cannot read or raise RLIMIT_NOFILE"),
    });
}

async fn close_store<S: NfStore>(store: &S) {
    if let Err(e) = store.close().await {
        tracing::warn!(error = %e, "store did not close cleanly");
    }
}
