//! The Network Repository Function (TS 29.510 Rel-17).
//!
//! A newcomer's map: [`config`] is `[nrf]`; [`context`] holds the state (the in-memory profile
//! index discovery is served from, subscriptions, the store handle); [`nnrf_nfm`] and
//! [`subscriptions`] are Nnrf_NFManagement, [`notify`] sends NFStatusNotify, [`nnrf_disc`] is
//! Nnrf_NFDiscovery; [`store`] is the NRF's persistence; [`models`] the TS 29.510 types.
//! [`Nrf::start`]/[`bind`] build it all; [`run`] serves until shutdown.

pub mod answers;
pub mod config;
pub mod context;
pub mod forwarding;
pub mod models;
pub mod nnrf_disc;
pub mod nnrf_nfm;
pub mod nnrf_token;
pub mod notify;
pub mod slf;
pub mod store;
pub mod subscriptions;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ::store::{SqliteConfig, SqliteStore};
use http::Method;
use sbi::client::{ClientConfig, SbiClient};
use sbi::{NfIdentity, Observability, Router, SbiServer, ServerConfig};

pub use config::NrfConfig;
pub use context::Nrf;

/// Everything `run` needs: the `[nrf]` section and the shared sections of the configuration.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub nrf: NrfConfig,
    pub sbi: ServerConfig,
    pub client: ClientConfig,
    pub store: SqliteConfig,
    /// This NRF's nfInstanceId (User-Agent, Oci/Lci); generated when `None`.
    pub instance_id: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum NrfError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("store: {0}")]
    Store(#[from] ::store::Error),
    #[error("SBI client: {0}")]
    Client(#[from] sbi::client::ClientError),
    #[error("SBI server: {0}")]
    Server(#[from] sbi::server::ServerError),
    #[error("serving: {0}")]
    Io(#[from] std::io::Error),
}

/// The Nnrf_NFManagement and Nnrf_NFDiscovery routes over `nrf`.
pub fn router(nrf: Arc<Nrf>) -> Router {
    use nnrf_disc as disc;
    use nnrf_nfm as nfm;
    Router::builder(nrf)
        .route(
            Method::GET,
            "/nnrf-nfm/v1/nf-instances",
            "Nnrf_NFManagement_NFListRetrieval",
            nfm::list,
        )
        .route(
            Method::GET,
            "/nnrf-nfm/v1/nf-instances/{nfInstanceID}",
            "Nnrf_NFManagement_NFProfileRetrieval",
            nfm::get,
        )
        .route(
            Method::PUT,
            "/nnrf-nfm/v1/nf-instances/{nfInstanceID}",
            "Nnrf_NFManagement_NFRegister",
            nfm::register,
        )
        .route(
            Method::PATCH,
            "/nnrf-nfm/v1/nf-instances/{nfInstanceID}",
            "Nnrf_NFManagement_NFUpdate",
            nfm::update,
        )
        .route(
            Method::DELETE,
            "/nnrf-nfm/v1/nf-instances/{nfInstanceID}",
            "Nnrf_NFManagement_NFDeregister",
            nfm::deregister,
        )
        .route(
            Method::POST,
            "/nnrf-nfm/v1/subscriptions",
            "Nnrf_NFManagement_NFStatusSubscribe",
            subscriptions::subscribe,
        )
        .route(
            Method::PATCH,
            "/nnrf-nfm/v1/subscriptions/{subscriptionID}",
            "Nnrf_NFManagement_NFStatusSubscriptionUpdate",
            subscriptions::update,
        )
        .route(
            Method::DELETE,
            "/nnrf-nfm/v1/subscriptions/{subscriptionID}",
            "Nnrf_NFManagement_NFStatusUnsubscribe",
            subscriptions::unsubscribe,
        )
        .route(
            Method::GET,
            "/nnrf-disc/v1/nf-instances",
            "Nnrf_NFDiscovery_NFDiscover",
            disc::search,
        )
        .route(Method::POST, "/oauth2/token", "Nnrf_AccessToken_Get", nnrf_token::token)
        .route(Method::GET, "/oauth2/jwks", "Nnrf_AccessToken_Jwks", nnrf_token::jwks)
        .build()
}

/// A bound, loaded NRF, ready to serve.
pub struct Bound {
    server: SbiServer,
    nrf: Arc<Nrf>,
    store: SqliteStore,
    observability: Observability,
}

/// Opens the store, loads profiles and subscriptions into memory and binds the SBI port.
pub async fn bind(config: RunConfig) -> Result<Bound, NrfError> {
    config.nrf.validate().map_err(NrfError::Config)?;
    let instance_id =
        config.instance_id.clone().unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let identity = NfIdentity::new("NRF", instance_id.clone());
    let mut client_config = config.client.clone();
    client_config.user_agent.get_or_insert_with(|| sbi::client::user_agent("NRF", &instance_id));
    let client = SbiClient::new(&client_config)?;
    let db = SqliteStore::open(config.store.clone()).await?;
    let observability = Observability::new();
    let notifier = notify::Notifier::new(client.clone(), config.nrf.notify.clone());
    let scheme = if config.sbi.tls.is_some() { "https" } else { "http" };
    let nrf =
        Arc::new(Nrf::new(config.nrf.clone(), store::NrfStore::new(db.clone()), notifier, scheme));
    let (profiles, subs) = nrf.load().await?;
    let _ = nrf.instance_id.set(instance_id.clone());
    let _ = nrf.client.set(client);
    let signer = nnrf_token::TokenSigner::load(&config.nrf.access_token, &db)
        .await
        .map_err(NrfError::Config)?;
    let _ = nrf.token_signer.set(signer);
    tracing::info!(profiles, subscriptions = subs, "NRF state loaded");
    let server =
        SbiServer::bind(config.sbi.clone(), identity, router(nrf.clone()), observability.clone())
            .await?;
    let _ = nrf.local_authority.set(server.local_addr().to_string());
    Ok(Bound { server, nrf, store: db, observability })
}

impl Bound {
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    pub fn nrf(&self) -> &Arc<Nrf> {
        &self.nrf
    }

    /// Serves until `shutdown`, with the heartbeat and subscription audits running; then
    /// closes the store (everything acknowledged is already committed).
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> Result<(), NrfError> {
        let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
        let nrf = self.nrf.clone();
        let audit = tokio::spawn(async move {
            let mut tick =
                tokio::time::interval(Duration::from_millis(nrf.config.audit_interval_ms));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {
                        nnrf_nfm::audit_heartbeats(&nrf).await;
                        subscriptions::expire(&nrf).await;
                    }
                    _ = stop_rx.changed() => break,
                }
            }
        });
        self.observability.set_ready(true);
        let served = self.server.serve(shutdown).await;
        let _ = stop_tx.send(true);
        let _ = audit.await;
        if let Err(e) = self.store.close().await {
            tracing::warn!(error = %e, "store did not close cleanly");
        }
        served.map_err(NrfError::from)
    }
}

/// Runs the NRF until `shutdown` completes.
pub async fn run(config: RunConfig, shutdown: impl Future<Output = ()>) -> Result<(), NrfError> {
    let bound = bind(config).await?;
    tracing::info!(addr = %bound.local_addr(), "NRF serving");
    bound.serve(shutdown).await
}
