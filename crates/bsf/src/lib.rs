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
pub mod coherence;
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
use std::net::SocketAddr;
use std::sync::Arc;

use ::store::SqliteConfig;
use http::Method;
use nf::{Serving, Skeleton, Spec};
use sbi::client::ClientConfig;
use sbi::{Router, ServerConfig};

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

/// Why the BSF could not start or serve: the skeleton's.
pub type BsfError = nf::StartError;

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
    serving: Serving<::store::AnyStore>,
    bsf: Arc<Bsf>,
    rx_addr: Option<SocketAddr>,
    rx_tls_addr: Option<SocketAddr>,
}

/// The NF skeleton's steps for the BSF: opens the store (applying the BSF's schema), loads the
/// subscriptions, binds the SBI port, registers with the NRF (when `[bsf.nrf]` is configured)
/// and starts the binding audit. With `[bsf.rx] enabled`, the Rx proxy's Diameter listener is
/// bound and started here too (so its port is known, as the SBI port is), and its UE address
/// index loads in the background: AARs read the store until it is in, and the BSF reports ready
/// only then, so load balancers and the bench kit wait for the fast path.
pub async fn bind(config: RunConfig) -> Result<Bound, BsfError> {
    config.bsf.validate().map_err(BsfError::Config)?;
    let skeleton = Skeleton::open_any(Spec {
        nf_type: "BSF",
        instance_id: config.instance_id.clone(),
        sbi: config.sbi.clone(),
        client: config.client.clone(),
        store: config.store.clone(),
        nrf: config.bsf.nrf.clone(),
        copy: config.bsf.copy.clone(),
    })
    .await?;
    let rx_index = config.bsf.rx.enabled && config.bsf.rx.binding_index;
    let bindings: Arc<dyn store::BindingStore> = match skeleton.store() {
        ::store::AnyStore::Mysql(db) => {
            let mut b = store::MysqlBindingStore::on(db.clone()).await?;
            if rx_index {
                b = b.with_index(Arc::new(ue_address_index::UeAddressIndex::new()));
            }
            Arc::new(b)
        }
        ::store::AnyStore::Sqlite(db) => {
            let mut b = store::SqliteBindingStore::on(db.clone()).await?;
            if config.bsf.discovery_index {
                b = b.with_index(Arc::new(ue_address_index::UeAddressIndex::with_documents()));
            } else if rx_index {
                b = b.with_index(Arc::new(ue_address_index::UeAddressIndex::new()));
            }
            Arc::new(b)
        }
    };
    let scheme = skeleton.scheme();
    let notifier =
        subscriptions::Notifier::new(skeleton.client().clone(), config.bsf.notify.clone());
    let bsf = Arc::new(Bsf::new(config.bsf.clone(), bindings, notifier, scheme));
    // Before the index and the subscriptions load: a change committed meanwhile is then in
    // what they load or in the feed.
    let feed = coherence::prepare(skeleton.store()).await?;
    let subs = subscriptions::load(&bsf).await?;
    tracing::info!(subscriptions = subs, "BSF state loaded");
    let skeleton_store = skeleton.store().clone();
    let mut serving = skeleton.bind(router(bsf.clone())).await?;
    let addr = serving.local_addr();
    let _ = bsf.local_authority.set(addr.to_string());
    let profile = serving.profile().service("nbsf-management", scheme, addr.port()).build();
    serving.register(profile)?;
    if bsf.store.index().is_some() {
        serving.defer_ready();
        let loader = tokio::spawn(load_index(bsf.clone(), serving.observability().clone()));
        let stopping = bsf.clone();
        serving.on_stop(async move {
            if let Some(ix) = stopping.store.index() {
                ix.stop_loading();
            }
            let _ = loader.await;
        });
    }
    let (mut rx_addr, mut rx_tls_addr) = (None, None);
    if config.bsf.rx.enabled {
        let (node, sweeper) = rx::start(bsf.clone(), &config.bsf.rx).await?.into_parts();
        rx_addr = node.local_addr();
        rx_tls_addr = node.tls_local_addr();
        serving.on_stop(async move { sweeper.abort() });
        serving.diameter(node);
    }
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let follower = match (feed, skeleton_store) {
        (Some(reader), ::store::AnyStore::Mysql(db)) => {
            Some(tokio::spawn(coherence::run(bsf.clone(), db, reader, stop_rx.clone())))
        }
        _ => None,
    };
    let audit = tokio::spawn(audit::run(bsf.clone(), stop_rx));
    serving.on_stop(async move {
        let _ = stop_tx.send(true);
        let _ = audit.await;
        if let Some(f) = follower {
            let _ = f.await;
        }
    });
    Ok(Bound { serving, bsf, rx_addr, rx_tls_addr })
}

/// Loads the Rx proxy's UE address index from the store, then reports the BSF ready.
async fn load_index(bsf: Arc<Bsf>, ready: sbi::Observability) {
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
}

impl Bound {
    pub fn local_addr(&self) -> SocketAddr {
        self.serving.local_addr()
    }

    pub fn bsf(&self) -> &Arc<Bsf> {
        &self.bsf
    }

    /// The Rx proxy's Diameter listening address, when `[bsf.rx]` is enabled.
    pub fn rx_local_addr(&self) -> Option<SocketAddr> {
        self.rx_addr
    }

    /// The Rx proxy's TLS listening address, when `[bsf.rx.tls] listen` is set.
    pub fn rx_tls_local_addr(&self) -> Option<SocketAddr> {
        self.rx_tls_addr
    }

    /// Serves until `shutdown`, with the audit running and the NRF registration kept; then
    /// stops as every NF does (nf::skeleton; everything acknowledged is committed).
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> Result<(), BsfError> {
        self.serving.serve(shutdown).await
    }
}

/// Runs the BSF until `shutdown` completes.
pub async fn run(config: RunConfig, shutdown: impl Future<Output = ()>) -> Result<(), BsfError> {
    let bound = bind(config).await?;
    tracing::info!(addr = %bound.local_addr(), "BSF serving");
    bound.serve(shutdown).await
}
