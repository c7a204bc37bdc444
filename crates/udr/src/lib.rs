//! The Unified Data Repository (TS 29.504/29.505/29.519 Rel-17).
//!
//! A newcomer's map, by service. Each service's folder holds the module of its 3GPP operations
//! (named after the service), its logic, its store trait and that trait's SQLite implementation
//! (`sqlite`, with the service's tables and migrations); [`router`] lists every SBI operation.
//!
//! - [`slf`], the SLF role: Nudr_GroupIDmap_GetNfGroupIDs is [`slf::nudr_group_id_map`], over the
//!   subscriber-to-group map ([`slf::SlfStore`], [`slf::sqlite`]) and its in-memory identity
//!   index ([`slf::index`]).
//! - [`eir`], the 5G-EIR: N5g-eir_EquipmentIdentityCheck_Get is [`eir::n5g_eir_eic`], over the
//!   equipment lists ([`eir::EirStore`], [`eir::sqlite`]).
//! - [`policy_data`], Nudr_DataRepository for policy data (N36, TS 29.519):
//!   Nudr_DataRepository_Query / _Create / _Update / _Delete are [`policy_data::resources`],
//!   _Subscribe / _Unsubscribe [`policy_data::subs_to_notify`], the notifications
//!   [`policy_data::notify`]; [`policy_data::store`] and [`policy_data::sqlite`] keep the data.
//! - [`sh`], Diameter Sh (TS 29.328/29.329, `[udr.sh]`): Sh-Pull is [`sh::udr`], Sh-Update
//!   [`sh::pur`], Sh-Subs-Notif [`sh::snr`], Sh-Notif [`sh::pnr`]; [`sh::data`] and [`sh::sqlite`]
//!   keep the data.
//! - Operators' APIs, no 3GPP service: [`provisioning`] the REST provisioning (`/udr-prov/v1`,
//!   operations `UdrProv_*`; policy data's in [`policy_data::provisioning`]), [`soap`] the
//!   SOAP/XML provisioning (`POST /udr-soap/v1`), [`import`] the bulk load behind
//!   `fivecore udr import`.
//!
//! [`config`] is `[udr]`; [`context`] holds the state; [`stores`] opens every service's store.
//! [`bind`] builds it all; [`Bound::serve`] / [`run`] serve until shutdown.

pub mod config;
pub mod context;
pub mod eir;
pub mod import;
pub mod policy_data;
pub mod preload;
pub mod provisioning;
pub mod sh;
pub mod slf;
pub mod soap;
pub mod stores;

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

use ::store::SqliteConfig;
use http::Method;
use nrf_client::{NrfClient, ProfileBuilder};
use sbi::client::{ClientConfig, SbiClient};
use sbi::{NfIdentity, Observability, Router, SbiServer, ServerConfig};

pub use config::UdrConfig;
pub use context::Udr;
pub use stores::Stores;

/// What a store trait's method returns: the outcome, once the backend has it (for a write:
/// once it is committed).
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = ::store::Result<T>> + Send + 'a>>;

/// Everything `run` needs: the `[udr]` section and the shared sections of the configuration.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub udr: UdrConfig,
    pub sbi: ServerConfig,
    pub client: ClientConfig,
    pub store: SqliteConfig,
    /// This UDR's nfInstanceId (User-Agent, NRF profile); generated when `None`.
    pub instance_id: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum UdrError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("store: {0}")]
    Store(#[from] ::store::Error),
    #[error("SBI client: {0}")]
    Client(#[from] sbi::client::ClientError),
    #[error("SBI server: {0}")]
    Server(#[from] sbi::server::ServerError),
    #[error("NRF client: {0}")]
    Nrf(#[from] nrf_client::Error),
    #[error("serving: {0}")]
    Io(#[from] std::io::Error),
}

/// The SBI routes over `udr`.
pub fn router(udr: Arc<Udr>) -> Router {
    let b = Router::builder(udr)
        .route(
            Method::GET,
            "/nudr-group-id-map/v1/nf-group-ids",
            "Nudr_GroupIDmap_GetNfGroupIDs",
            slf::nudr_group_id_map::get_nf_group_ids,
        )
        .route(Method::POST, soap::PATH, soap::OPERATION, soap::handle)
        .route(
            Method::GET,
            "/n5g-eir-eic/v1/equipment-status",
            "N5g-eir_EquipmentIdentityCheck_Get",
            eir::n5g_eir_eic::get_equipment_status,
        );
    policy_data::routes(provisioning::routes(b)).build()
}

/// A bound UDR with its store open, ready to serve.
pub struct Bound {
    server: SbiServer,
    udr: Arc<Udr>,
    observability: Observability,
    nrf: Option<NrfClient>,
    sh: Option<sh::ShServer>,
    /// The separate 5G_EIR profile (`[udr.eir] register_nrf`).
    eir_nrf: Option<NrfClient>,
    client: SbiClient,
}

/// Opens the store (applying the UDR's schema), binds the SBI port and prepares the NRF
/// registration (when `[udr.nrf]` is configured). With `[udr.sh] enabled`, the Sh listener is
/// bound and started too.
pub async fn bind(config: RunConfig) -> Result<Bound, UdrError> {
    config.udr.validate().map_err(UdrError::Config)?;
    let instance_id =
        config.instance_id.clone().unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let identity = NfIdentity::new("UDR", instance_id.clone());
    let mut client_config = config.client.clone();
    client_config.user_agent.get_or_insert_with(|| sbi::client::user_agent("UDR", &instance_id));
    let client = SbiClient::new(&client_config)?;
    let stores = Stores::open_sqlite(config.store.clone()).await?;
    let scheme = if config.sbi.tls.is_some() { "https" } else { "http" };
    let udr = Arc::new(Udr::new(config.udr.clone(), stores, scheme));
    udr.sh.load().await?;
    let interval = std::time::Duration::from_millis(config.udr.slf.sync_interval_ms);
    let observability = Observability::new();
    observability.with_registry(|r| udr.policy.stats.register(r));
    // The identity index loads in the background (tens of seconds for tens of millions of
    // subscribers): the UDR answers at once (lookups read the store until the index is in) but
    // reports ready only when it is, so load balancers and the bench kit wait for the fast path.
    let (loading, ready) = (udr.clone(), observability.clone());
    tokio::spawn(async move {
        if let Err(e) = loading.slf.start(interval).await {
            tracing::error!(error = %e, "SLF identity index not started: lookups read the store");
        }
        ready.set_ready(true);
    });
    let subs = udr.policy.load().await?;
    tracing::info!(policy_subscriptions = subs, "UDR state loaded");
    let server =
        SbiServer::bind(config.sbi.clone(), identity, router(udr.clone()), observability.clone())
            .await?;
    let addr = server.local_addr();
    let _ = udr.local_authority.set(addr.to_string());
    let nrf = match &config.udr.nrf {
        None => None,
        Some(nrf_config) => {
            let ip = match addr.ip() {
                IpAddr::V4(v4) if !v4.is_unspecified() => v4,
                _ => Ipv4Addr::LOCALHOST,
            };
            let mut profile = ProfileBuilder::new("UDR", &instance_id).ipv4(&ip.to_string());
            if config.udr.slf.register_service {
                profile = profile.service("nudr-group-id-map", scheme, addr.port());
            }
            Some(NrfClient::new(nrf_config.clone(), client.clone(), profile.build())?)
        }
    };
    let sh = if config.udr.sh.enabled { Some(sh::start(udr.clone()).await?) } else { None };
    if let Some(sh) = &sh {
        observability.with_registry(|r| sh.node().register_metrics(r));
    }
    let eir_nrf = match (&config.udr.nrf, config.udr.eir.register_nrf) {
        (Some(nrf_config), true) => {
            let profile = eir::n5g_eir_eic::nrf_profile(&config.udr.eir, addr, scheme);
            Some(NrfClient::new(nrf_config.clone(), client.clone(), profile)?)
        }
        _ => None,
    };
    Ok(Bound { server, udr, observability, nrf, sh, eir_nrf, client })
}

impl Bound {
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    pub fn udr(&self) -> &Arc<Udr> {
        &self.udr
    }

    /// The Sh listener's address, when `[udr.sh]` is enabled.
    pub fn sh_local_addr(&self) -> Option<SocketAddr> {
        self.sh.as_ref().and_then(|s| s.local_addr())
    }

    /// Serves until `shutdown`, keeping the NRF registration and delivering policy data
    /// notifications; then deregisters from the NRF and closes the store (everything
    /// acknowledged is committed; undelivered notifications wait in the store for the next start).
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> Result<(), UdrError> {
        let policy = self.udr.policy.start(self.client.clone());
        for nrf in self.nrf.iter().chain(&self.eir_nrf) {
            nrf.start();
        }
        // Ready once the SLF index is in (else the loading task says so when it is).
        if self.udr.slf.index_size().is_some() {
            self.observability.set_ready(true);
        }
        let served = self.server.serve(shutdown).await;
        if let Some(sh) = self.sh {
            sh.shutdown().await;
        }
        policy.stop().await;
        for nrf in self.nrf.iter().chain(&self.eir_nrf) {
            nrf.shutdown().await;
        }
        if let Err(e) = self.udr.stores.close().await {
            tracing::warn!(error = %e, "store did not close cleanly");
        }
        served.map_err(UdrError::from)
    }
}

/// Runs the UDR until `shutdown` completes.
pub async fn run(config: RunConfig, shutdown: impl Future<Output = ()>) -> Result<(), UdrError> {
    let bound = bind(config).await?;
    tracing::info!(addr = %bound.local_addr(), "UDR serving");
    bound.serve(shutdown).await
}
