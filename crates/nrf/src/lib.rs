//! The Network Repository Function (TS 29.510 Rel-17).
//!
//! A newcomer's map: [`config`] is `[nrf]`; [`context`] holds the state (the in-memory profile
//! index discovery is served from, subscriptions, the store handle); [`nnrf_nfm`] and
//! [`subscriptions`] are Nnrf_NFManagement, [`notify`] sends NFStatusNotify, [`nnrf_disc`] is
//! Nnrf_NFDiscovery; [`store`] is the NRF's persistence; [`models`] the TS 29.510 types.
//! [`Nrf::start`]/[`bind`] build it all; [`run`] serves until shutdown.

pub mod allowed;
pub mod answers;
pub mod coherence;
pub mod config;
pub mod context;
pub mod forwarding;
pub mod models;
pub mod nnrf_disc;
pub mod nnrf_nfm;
pub mod nnrf_token;
pub mod notify;
pub mod profile_formats;
pub mod slf;
pub mod store;
pub mod subscriptions;
pub mod view;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ::store::{AnyStore, SqliteConfig};
use http::Method;
use nf::{Serving, Skeleton, Spec};
use sbi::client::ClientConfig;
use sbi::{Router, ServerConfig};

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

/// Why the NRF could not start or serve: the skeleton's.
pub type NrfError = nf::StartError;

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
    serving: Serving<AnyStore>,
    nrf: Arc<Nrf>,
}

/// Opens the store, loads profiles and subscriptions into memory and binds the SBI port (the
/// NF skeleton's steps; the NRF registers with no NRF).
pub async fn bind(config: RunConfig) -> Result<Bound, NrfError> {
    config.nrf.validate().map_err(NrfError::Config)?;
    let skeleton = Skeleton::open_any(Spec {
        nf_type: "NRF",
        instance_id: config.instance_id.clone(),
        sbi: config.sbi.clone(),
        client: config.client.clone(),
        store: config.store.clone(),
        nrf: None,
        copy: config.nrf.copy.clone(),
    })
    .await?;
    let db = skeleton.store().clone();
    let notifier = notify::Notifier::new(skeleton.client().clone(), config.nrf.notify.clone());
    let nrf = Arc::new(Nrf::new(
        config.nrf.clone(),
        store::NrfStore::new(db.clone()),
        notifier,
        skeleton.scheme(),
    ));
    // Before the load: a change committed meanwhile is then in the load or in the feed.
    let feed = coherence::prepare(&db).await?;
    let (profiles, subs) = nrf.load().await?;
    let _ = nrf.instance_id.set(skeleton.instance_id().to_owned());
    let _ = nrf.client.set(skeleton.client().clone());
    let signer = nnrf_token::TokenSigner::load(&config.nrf.access_token, &db)
        .await
        .map_err(NrfError::Config)?;
    let _ = nrf.token_signer.set(signer);
    tracing::info!(profiles, subscriptions = subs, "NRF state loaded");
    let mut serving = skeleton.bind(router(nrf.clone())).await?;
    let _ = nrf.local_authority.set(serving.local_addr().to_string());
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let follower =
        feed.map(|reader| tokio::spawn(coherence::run(nrf.clone(), reader, stop_rx.clone())));
    let audit = tokio::spawn(audit(nrf.clone(), stop_rx));
    serving.on_stop(async move {
        let _ = stop_tx.send(true);
        let _ = audit.await;
        if let Some(f) = follower {
            let _ = f.await;
        }
    });
    Ok(Bound { serving, nrf })
}

/// The heartbeat and subscription audits, until `stop`.
async fn audit(nrf: Arc<Nrf>, mut stop: tokio::sync::watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(Duration::from_millis(nrf.config.audit_interval_ms));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                nnrf_nfm::audit_heartbeats(&nrf).await;
                subscriptions::expire(&nrf).await;
            }
            _ = stop.changed() => break,
        }
    }
}

impl Bound {
    pub fn local_addr(&self) -> SocketAddr {
        self.serving.local_addr()
    }

    pub fn nrf(&self) -> &Arc<Nrf> {
        &self.nrf
    }

    /// Serves until `shutdown`, with the heartbeat and subscription audits running; then
    /// stops as every NF does (nf::skeleton).
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> Result<(), NrfError> {
        self.serving.serve(shutdown).await
    }
}

/// Runs the NRF until `shutdown` completes.
pub async fn run(config: RunConfig, shutdown: impl Future<Output = ()>) -> Result<(), NrfError> {
    let bound = bind(config).await?;
    tracing::info!(addr = %bound.local_addr(), "NRF serving");
    bound.serve(shutdown).await
}
