//! The Binding Support Function (TS 29.521 Rel-17), SBI side.
//!
//! A newcomer's map: [`config`] is `[bsf]`; [`context`] holds the state; [`nbsf_management`]
//! is Nbsf_Management for PDU session bindings (pcfBindings), [`pcf_ue_bindings`] and
//! [`pcf_mbs_bindings`] the Rel-17 PCF for a UE / for an MBS session bindings, [`subscriptions`] the binding
//! event subscriptions and their notifications; [`models`] checks every field of the TS 29.521
//! types; [`store`] is the BSF's store trait and [`store::sqlite`] its SQLite implementation
//! (schema, SQL, bulk load); [`preload`] bulk-loads bindings from JSON lines (`fivecore bsf
//! preload`); [`audit`] removes stale bindings in the background; [`rx`] is the Diameter Rx
//! proxy between AFs and PCFs (`[bsf.rx]`). [`bind`] builds it all; [`Bound::serve`] / [`run`]
//! serve until shutdown.

pub mod audit;
pub mod config;
pub mod context;
pub mod models;
pub mod nbsf_management;
pub mod pcf_mbs_bindings;
pub mod pcf_ue_bindings;
pub mod preload;
pub mod rx;
pub mod store;
pub mod subscriptions;
pub mod ue_address_index;

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use ::store::SqliteConfig;
use http::Method;
use nrf_client::{NrfClient, ProfileBuilder};
use sbi::client::{ClientConfig, SbiClient};
use sbi::{NfIdentity, Observability, Router, SbiServer, ServerConfig};

pub use config::BsfConfig;
pub use context::Bsf;

/// Everything `run` needs: the `[bsf]` section and the shared sections of the configuration.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub bsf: BsfConfig,
    pub sbi: ServerConfig,
    pub client: ClientConfig,
    pub store: SqliteConfig,
    /// This BSF's nfInstanceId (User-Agent, NRF profile); generated when `None`.
    pub instance_id: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum BsfError {
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

/// The Nbsf_Management routes over `bsf`.
pub fn router(bsf: Arc<Bsf>) -> Router {
    use nbsf_management as m;
    use pcf_mbs_bindings as mbs;
    use pcf_ue_bindings as ue;
    Router::builder(bsf)
        .route(
            Method::POST,
            "/nbsf-management/v1/pcfBindings",
            "Nbsf_Management_Register",
            m::register,
        )
        .route(
            Method::GET,
            "/nbsf-management/v1/pcfBindings",
            "Nbsf_Management_Discovery",
            m::discover,
        )
        .route(
            Method::PATCH,
            "/nbsf-management/v1/pcfBindings/{bindingId}",
            "Nbsf_Management_Update",
            m::update,
        )
        .route(
            Method::DELETE,
            "/nbsf-management/v1/pcfBindings/{bindingId}",
            "Nbsf_Management_Deregister",
            m::deregister,
        )
        .route(
            Method::POST,
            "/nbsf-management/v1/pcf-ue-bindings",
            "Nbsf_Management_Register",
            ue::register,
        )
        .route(
            Method::GET,
            "/nbsf-management/v1/pcf-ue-bindings",
            "Nbsf_Management_Discovery",
            ue::discover,
        )
        .route(
            Method::PATCH,
            "/nbsf-management/v1/pcf-ue-bindings/{bindingId}",
            "Nbsf_Management_Update",
            ue::update,
        )
        .route(
            Method::DELETE,
            "/nbsf-management/v1/pcf-ue-bindings/{bindingId}",
            "Nbsf_Management_Deregister",
            ue::deregister,
        )
        .route(
            Method::POST,
            "/nbsf-management/v1/pcf-mbs-bindings",
            "Nbsf_Management_Register",
            mbs::register,
        )
        .route(
            Method::GET,
            "/nbsf-management/v1/pcf-mbs-bindings",
            "Nbsf_Management_Discovery",
            mbs::discover,
        )
        .route(
            Method::PATCH,
            "/nbsf-management/v1/pcf-mbs-bindings/{bindingId}",
            "Nbsf_Management_Update",
            mbs::update,
        )
        .route(
            Method::DELETE,
            "/nbsf-management/v1/pcf-mbs-bindings/{bindingId}",
            "Nbsf_Management_Deregister",
            mbs::deregister,
        )
        .route(
            Method::POST,
            "/nbsf-management/v1/subscriptions",
            "Nbsf_Management_Subscribe",
            subscriptions::subscribe,
        )
        .route(
            Method::PUT,
            "/nbsf-management/v1/subscriptions/{subId}",
            "Nbsf_Management_Subscribe",
            subscriptions::replace,
        )
        .route(
            Method::DELETE,
            "/nbsf-management/v1/subscriptions/{subId}",
            "Nbsf_Management_Unsubscribe",
            subscriptions::unsubscribe,
        )
        .build()
}

/// A bound BSF with its store open, ready to serve.
pub struct Bound {
    server: SbiServer,
    bsf: Arc<Bsf>,
    observability: Observability,
    nrf: Option<NrfClient>,
    rx: Option<rx::RxProxy>,
}

/// Opens the store (applying the BSF's schema), loads the subscriptions, binds the SBI port and
/// prepares the NRF registration (when `[bsf.nrf]` is configured). With `[bsf.rx] enabled`, the
/// Rx proxy's Diameter listener is bound and started here too (so its port is known, as the SBI
/// port is); `serve` shuts it down.
pub async fn bind(config: RunConfig) -> Result<Bound, BsfError> {
    config.bsf.validate().map_err(BsfError::Config)?;
    let instance_id =
        config.instance_id.clone().unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let identity = NfIdentity::new("BSF", instance_id.clone());
    let mut client_config = config.client.clone();
    client_config.user_agent.get_or_insert_with(|| sbi::client::user_agent("BSF", &instance_id));
    let client = SbiClient::new(&client_config)?;
    let mut bindings = store::SqliteBindingStore::open(config.store.clone()).await?;
    if config.bsf.rx.enabled && config.bsf.rx.binding_index {
        bindings = bindings.with_index(Arc::new(ue_address_index::UeAddressIndex::new()));
    }
    let scheme = if config.sbi.tls.is_some() { "https" } else { "http" };
    let notifier = subscriptions::Notifier::new(client.clone(), config.bsf.notify.clone());
    let bsf = Arc::new(Bsf::new(config.bsf.clone(), Arc::new(bindings), notifier, scheme));
    let subs = subscriptions::load(&bsf).await?;
    tracing::info!(subscriptions = subs, "BSF state loaded");
    let observability = Observability::new();
    let server =
        SbiServer::bind(config.sbi.clone(), identity, router(bsf.clone()), observability.clone())
            .await?;
    let addr = server.local_addr();
    let _ = bsf.local_authority.set(addr.to_string());
    let nrf = match &config.bsf.nrf {
        None => None,
        Some(nrf_config) => {
            let ip = match addr.ip() {
                IpAddr::V4(v4) if !v4.is_unspecified() => v4,
                _ => Ipv4Addr::LOCALHOST,
            };
            let profile = ProfileBuilder::new("BSF", &instance_id)
                .ipv4(&ip.to_string())
                .service("nbsf-management", scheme, addr.port())
                .build();
            Some(NrfClient::new(nrf_config.clone(), client.clone(), profile)?)
        }
    };
    let rx = if config.bsf.rx.enabled {
        let rx = rx::start(bsf.clone(), &config.bsf.rx).await?;
        observability.with_registry(|r| rx.node().register_metrics(r));
        Some(rx)
    } else {
        None
    };
    Ok(Bound { server, bsf, observability, nrf, rx })
}

impl Bound {
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    pub fn bsf(&self) -> &Arc<Bsf> {
        &self.bsf
    }

    /// The Rx proxy's Diameter listening address, when `[bsf.rx]` is enabled.
    pub fn rx_local_addr(&self) -> Option<SocketAddr> {
        self.rx.as_ref().and_then(|r| r.local_addr())
    }

    /// The Rx proxy, when enabled.
    pub fn rx(&self) -> Option<&rx::RxProxy> {
        self.rx.as_ref()
    }

    /// Serves until `shutdown`, with the audit running and the NRF registration kept; then
    /// deregisters from the NRF and closes the store (everything acknowledged is committed).
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> Result<(), BsfError> {
        // The Rx proxy's binding index loads in the background (tens of seconds for tens of
        // millions of bindings): AARs read the store until it is in, and the BSF reports ready
        // only then, so load balancers and the bench kit wait for the fast path.
        let loader = self.bsf.store.index().is_some().then(|| {
            let (bsf, ready) = (self.bsf.clone(), self.observability.clone());
            tokio::spawn(async move {
                let started = std::time::Instant::now();
                match bsf.store.load_index().await {
                    Ok(n) => tracing::info!(
                        bindings = n,
                        secs = started.elapsed().as_secs_f64(),
                        "BSF UE address index loaded"
                    ),
                    Err(e) => {
                        tracing::error!(error = %e, "BSF UE address index not loaded: Rx lookups read the store")
                    }
                }
                ready.set_ready(true);
            })
        });
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let audit = tokio::spawn(audit::run(self.bsf.clone(), stop_rx));
        if let Some(nrf) = &self.nrf {
            nrf.start();
        }
        if loader.is_none() {
            self.observability.set_ready(true);
        }
        let served = self.server.serve(shutdown).await;
        if let Some(l) = loader {
            if let Some(ix) = self.bsf.store.index() {
                ix.stop_loading();
            }
            let _ = l.await;
        }
        if let Some(rx) = self.rx {
            rx.shutdown().await;
        }
        let _ = stop_tx.send(true);
        let _ = audit.await;
        if let Some(nrf) = &self.nrf {
            nrf.shutdown().await;
        }
        if let Err(e) = self.bsf.store.close().await {
            tracing::warn!(error = %e, "store did not close cleanly");
        }
        served.map_err(BsfError::from)
    }
}

/// Runs the BSF until `shutdown` completes.
pub async fn run(config: RunConfig, shutdown: impl Future<Output = ()>) -> Result<(), BsfError> {
    let bound = bind(config).await?;
    tracing::info!(addr = %bound.local_addr(), "BSF serving");
    bound.serve(shutdown).await
}
