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

pub mod coherence;
pub mod config;
pub mod context;
pub mod eir;
pub mod import;
pub mod policy_data;
pub mod preload;
pub mod provisioning;
mod replay;
pub mod sh;
pub mod slf;
pub mod soap;
pub mod stores;

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use ::store::{AnyStore, SqliteConfig};
use http::Method;
use nf::{Serving, Skeleton, Spec};
use sbi::client::ClientConfig;
use sbi::{Router, ServerConfig};

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

/// Why the UDR could not start or serve: the skeleton's.
pub type UdrError = nf::StartError;

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
        .own_media(soap::problem_fault)
        .route(
            Method::GET,
            "/n5g-eir-eic/v1/equipment-status",
            "N5g-eir_EquipmentIdentityCheck_Get",
            eir::n5g_eir_eic::get_equipment_status,
        );
    policy_data::routes(provisioning::routes(b)).build()
}

/// The API versions served (TS 29.504 Rel-17: TS29504_Nudr_DR.yaml 2.2.4,
/// TS29504_Nudr_GroupIDmap.yaml 1.1.0), as NFServiceVersion (apiVersionInUri, apiFullVersion).
const NUDR_DR_VERSIONS: &[(&str, &str)] = &[("v2", "2.2.4")];
const NUDR_GROUP_ID_MAP_VERSIONS: &[(&str, &str)] = &[("v1", "1.1.0")];

/// The data sets of Nudr_DataRepository this UDR serves (`udrInfo.supportedDataSets`): policy
/// data only (TS 29.519 §5; no subscription, application or exposure data).
const SUPPORTED_DATA_SETS: &[&str] = &["POLICY"];

/// The UDR's NRF profile: every 3GPP service it serves on the SBI (nudr-dr for policy data;
/// nudr-group-id-map unless `slf.register_service` is off) with its versions and endpoints,
/// and its udrInfo. n5g-eir-eic is left to the 5G_EIR profile (`eir::n5g_eir_eic::nrf_profile`):
/// consumers discover it by that NF type, not by UDR.
pub fn nrf_profile(
    base: nrf_client::ProfileBuilder,
    config: &UdrConfig,
    scheme: &str,
    port: u16,
) -> serde_json::Value {
    let mut profile = base.versioned_service("nudr-dr", scheme, port, NUDR_DR_VERSIONS);
    if config.slf.register_service {
        profile = profile.versioned_service(
            "nudr-group-id-map",
            scheme,
            port,
            NUDR_GROUP_ID_MAP_VERSIONS,
        );
    }
    profile.attr("udrInfo", config.udr_info.udr_info(SUPPORTED_DATA_SETS)).build()
}

/// A bound UDR with its store open, ready to serve.
pub struct Bound {
    serving: Serving<AnyStore>,
    udr: Arc<Udr>,
    sh_addr: Option<SocketAddr>,
}

/// The NF skeleton's steps for the UDR: opens the store (applying the UDR's schema), loads the
/// Sh and policy data state, binds the SBI port, registers the UDR's profile (and the 5G-EIR's,
/// `[udr.eir] register_nrf`) when `[udr.nrf]` is configured, starts policy data notifications
/// and, with `[udr.sh] enabled`, the Sh server. The UDR is ready once its SLF identity index is
/// in (loaded in the background).
pub async fn bind(config: RunConfig) -> Result<Bound, UdrError> {
    config.udr.validate().map_err(UdrError::Config)?;
    let skeleton = Skeleton::open_any(Spec {
        nf_type: "UDR",
        instance_id: config.instance_id.clone(),
        sbi: config.sbi.clone(),
        client: config.client.clone(),
        store: config.store.clone(),
        nrf: config.udr.nrf.clone(),
        copy: config.udr.copy.clone(),
    })
    .await?;
    let stores = match skeleton.store() {
        AnyStore::Sqlite(db) => Stores::sqlite(db.clone()).await?,
        AnyStore::Mysql(db) => Stores::mysql(db.clone(), skeleton.instance_id()).await?,
    };
    // Before the SLF index and the subscriptions load: a change another instance commits
    // meanwhile is then in what they load or read from the feed.
    let feed = match (skeleton.store(), stores.feed_writer()) {
        (AnyStore::Mysql(db), Some(writer)) => {
            Some((db.clone(), coherence::prepare(db, writer).await?))
        }
        _ => None,
    };
    let scheme = skeleton.scheme();
    let udr = Arc::new(Udr::new(config.udr.clone(), stores, scheme));
    udr.sh.load().await?;
    let observability = skeleton.observability().clone();
    observability.with_registry(|r| udr.policy.stats.register(r));
    // The identity index loads in the background (tens of seconds for tens of millions of
    // subscribers): the UDR answers at once (lookups read the store until the index is in) but
    // reports ready only when it is, so load balancers and the bench kit wait for the fast path.
    let interval = std::time::Duration::from_millis(config.udr.slf.sync_interval_ms);
    let loading = udr.clone();
    tokio::spawn(async move {
        if let Err(e) = loading.slf.start(interval).await {
            tracing::error!(error = %e, "SLF identity index not started: lookups read the store");
        }
        observability.set_ready(true);
    });
    let subs = udr.policy.load().await?;
    tracing::info!(policy_subscriptions = subs, "UDR state loaded");
    let mut serving = skeleton.bind(router(udr.clone())).await?;
    serving.defer_ready();
    let addr = serving.local_addr();
    let _ = udr.local_authority.set(addr.to_string());
    serving.register(nrf_profile(serving.profile(), &config.udr, scheme, addr.port()))?;
    if config.udr.eir.register_nrf {
        serving.register(eir::n5g_eir_eic::nrf_profile(&config.udr.eir, addr, scheme))?;
    }
    let policy = udr.policy.start(serving.client().clone());
    serving.on_stop(async move { policy.stop().await });
    if let Some((db, reader)) = feed {
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let follower = tokio::spawn(coherence::run(udr.clone(), db, reader, stopped.clone()));
        let outbox = tokio::spawn(coherence::keep_outbox(udr.clone(), stopped));
        serving.on_stop(async move {
            let _ = stop.send(true);
            let _ = follower.await;
            let _ = outbox.await;
        });
    }
    let mut sh_addr = None;
    if config.udr.sh.enabled {
        let (node, sweeper) = sh::start(udr.clone()).await?.into_parts();
        sh_addr = node.local_addr();
        serving.on_stop(async move { sweeper.abort() });
        serving.diameter(node);
    }
    Ok(Bound { serving, udr, sh_addr })
}

impl Bound {
    pub fn local_addr(&self) -> SocketAddr {
        self.serving.local_addr()
    }

    pub fn udr(&self) -> &Arc<Udr> {
        &self.udr
    }

    /// The Sh listener's address, when `[udr.sh]` is enabled.
    pub fn sh_local_addr(&self) -> Option<SocketAddr> {
        self.sh_addr
    }

    /// Serves until `shutdown`, keeping the NRF registration and delivering policy data
    /// notifications; then stops as every NF does (nf::skeleton): undelivered notifications
    /// wait in the store for the next start.
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> Result<(), UdrError> {
        self.serving.serve(shutdown).await
    }
}

/// Runs the UDR until `shutdown` completes.
pub async fn run(config: RunConfig, shutdown: impl Future<Output = ()>) -> Result<(), UdrError> {
    let bound = bind(config).await?;
    tracing::info!(addr = %bound.local_addr(), "UDR serving");
    bound.serve(shutdown).await
}
