//! The Policy Control Function (TS 29.512, TS 29.507 Rel-17), SBI side.
//!
//! A newcomer's map:
//! - [`config`] is `[pcf]`; [`context`] holds the state;
//! - [`npcf_smpolicycontrol`] is Npcf_SMPolicyControl (Create, Get, Update, Delete, and the
//!   UpdateNotify a policy data change sends), [`npcf_ampolicycontrol`] Npcf_AMPolicyControl;
//!   [`decide`] is the one decision step they share;
//! - [`npcf_policyauthorization`] is Npcf_PolicyAuthorization (N5): the AF's application
//!   sessions, whose protocol-neutral part (binding to the SM association by UE address, media
//!   to PCC rules, the SMF's UpdateNotify, events and termination to the AF) is
//!   [`app_session`], which Rx shares;
//! - [`nudr_policy_data`] reads the subscriber's policy data from the UDR (N36) and subscribes
//!   to it, [`nudr_notify`] takes the UDR's change notifications, [`notify`] sends the SMF its
//!   UpdateNotify, [`nbsf_management`] registers the PCF's bindings at the BSF, [`producers`]
//!   finds UDRs, BSFs and CHFs; [`nchf_spendinglimitcontrol`] subscribes to the subscriber's
//!   spending limit statuses at the CHF (N28) and takes its notifications;
//! - [`audit`] asks SMFs and AMFs about associations not updated for long and removes those
//!   they no longer know;
//! - [`npcf_uepolicycontrol`] is Npcf_UEPolicyControl and the URSP delivery: [`ursp`] encodes
//!   URSP (TS 24.526), [`ue_policy_delivery`] the MANAGE UE POLICY messages (TS 24.501 Annex
//!   D), [`namf_communication`] sends them through the AMF (TS 29.518);
//! - [`policy_admin`] shows and deploys the policy project in force; [`collision`] serializes
//!   one subscriber's requests; [`models`] checks the TS 29.512 / 29.507 bodies and makes an
//!   update's decision delta;
//! - [`gx`] is the Diameter side, Gx as a converged PCRF (`[pcf.diameter]`), decided as N7;
//!   [`usage`] is usage monitoring on Gx and N7 (reports added up per subscriber and key);
//!   [`rx`] is Rx on the same node, the AF's sessions as [`app_session`]s; [`sy`] asks OCSs
//!   for spending limit statuses over Sy (`[pcf.sy]`), on its own node connected to them;
//!   [`ldap`] reads
//!   subscriber profiles from an LDAP directory (`[pcf.ldap]`) for Gx (and N7) decisions;
//! - [`store`] is the PCF's store trait and [`store::sqlite`] its SQLite implementation;
//!   [`metrics`] exports the version in force and the PCF's counters.
//!
//! Decisions come from the `policy` crate (docs/policy.md). [`bind`] builds it all;
//! [`Bound::serve`] / [`run`] serve until shutdown.

pub mod app_session;
pub mod audit;
pub mod coherence;
pub mod collision;
pub mod config;
pub mod context;
pub mod decide;
pub mod default_policy;
pub mod gx;
pub mod ldap;
pub mod metrics;
pub mod models;
pub mod namf_communication;
pub mod nbsf_management;
pub mod nchf_spendinglimitcontrol;
pub mod notify;
pub mod npcf_ampolicycontrol;
pub mod npcf_policyauthorization;
pub mod npcf_smpolicycontrol;
pub mod npcf_uepolicycontrol;
pub mod nudr_notify;
pub mod nudr_policy_data;
pub mod per;
pub mod policy_admin;
pub mod policy_versions;
pub mod producers;
pub mod resend;
pub mod rx;
pub mod sd;
pub mod store;
pub mod sy;
pub mod ue_policy_delivery;
pub mod ursp;
pub mod usage;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ::store::SqliteConfig;
use http::Method;
use nf::{Serving, Skeleton, Spec};
use sbi::client::ClientConfig;
use sbi::{Router, ServerConfig};

pub use config::PcfConfig;
pub use context::Pcf;

/// Everything `run` needs: the `[pcf]` section and the shared sections of the configuration.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub pcf: PcfConfig,
    pub sbi: ServerConfig,
    pub client: ClientConfig,
    pub store: SqliteConfig,
    /// This PCF's nfInstanceId (User-Agent, NRF profile); generated when `None`.
    pub instance_id: Option<String>,
}

/// Why the PCF could not start or serve: the skeleton's.
pub type PcfError = nf::StartError;

/// The versions of Npcf_SMPolicyControl served (TS 29.512 Rel-17's OpenAPI).
const NPCF_SMPOLICYCONTROL_VERSIONS: &[(&str, &str)] = &[("v1", "1.2.4")];
/// And of Npcf_AMPolicyControl (TS 29.507 Rel-17).
const NPCF_AM_POLICY_CONTROL_VERSIONS: &[(&str, &str)] = &[("v1", "1.2.1")];
/// And of Npcf_PolicyAuthorization (TS 29.514 Rel-17).
const NPCF_POLICYAUTHORIZATION_VERSIONS: &[(&str, &str)] = &[("v1", "1.2.3")];

/// And of Npcf_UEPolicyControl (TS 29.525 Rel-17).
const NPCF_UE_POLICY_CONTROL_VERSIONS: &[(&str, &str)] = &[("v1", "1.2.1")];

/// The routes over `pcf`: the 3GPP services, and the policy admin endpoint when configured.
pub fn router(pcf: Arc<Pcf>) -> Router {
    use npcf_ampolicycontrol as am;
    use npcf_policyauthorization as pa;
    use npcf_smpolicycontrol as sm;
    use npcf_uepolicycontrol as ue;
    let admin = pcf.config.policy_admin;
    let mut b = Router::builder(pcf)
        .route(
            Method::POST,
            "/npcf-smpolicycontrol/v1/sm-policies",
            "Npcf_SMPolicyControl_Create",
            sm::create,
        )
        .route(
            Method::GET,
            "/npcf-smpolicycontrol/v1/sm-policies/{smPolicyId}",
            "Npcf_SMPolicyControl_Get",
            sm::get,
        )
        .route(
            Method::POST,
            "/npcf-smpolicycontrol/v1/sm-policies/{smPolicyId}/update",
            "Npcf_SMPolicyControl_Update",
            sm::update,
        )
        .route(
            Method::POST,
            "/npcf-smpolicycontrol/v1/sm-policies/{smPolicyId}/delete",
            "Npcf_SMPolicyControl_Delete",
            sm::delete,
        )
        .route(
            Method::POST,
            "/npcf-am-policy-control/v1/policies",
            "Npcf_AMPolicyControl_Create",
            am::create,
        )
        .route(
            Method::GET,
            "/npcf-am-policy-control/v1/policies/{polAssoId}",
            "Npcf_AMPolicyControl_Get",
            am::get,
        )
        .route(
            Method::POST,
            "/npcf-am-policy-control/v1/policies/{polAssoId}/update",
            "Npcf_AMPolicyControl_Update",
            am::update,
        )
        .route(
            Method::DELETE,
            "/npcf-am-policy-control/v1/policies/{polAssoId}",
            "Npcf_AMPolicyControl_Delete",
            am::delete,
        )
        .route(
            Method::POST,
            "/npcf-policyauthorization/v1/app-sessions",
            "Npcf_PolicyAuthorization_Create",
            pa::create,
        )
        .route(
            Method::GET,
            "/npcf-policyauthorization/v1/app-sessions/{appSessionId}",
            "Npcf_PolicyAuthorization_Get",
            pa::get,
        )
        .route(
            Method::PATCH,
            "/npcf-policyauthorization/v1/app-sessions/{appSessionId}",
            "Npcf_PolicyAuthorization_Update",
            pa::patch,
        )
        .route(
            Method::POST,
            "/npcf-policyauthorization/v1/app-sessions/{appSessionId}/delete",
            "Npcf_PolicyAuthorization_Delete",
            pa::delete,
        )
        .route(
            Method::PUT,
            "/npcf-policyauthorization/v1/app-sessions/{appSessionId}/events-subscription",
            "Npcf_PolicyAuthorization_Subscribe",
            pa::put_events,
        )
        .route(
            Method::DELETE,
            "/npcf-policyauthorization/v1/app-sessions/{appSessionId}/events-subscription",
            "Npcf_PolicyAuthorization_Unsubscribe",
            pa::delete_events,
        )
        .route(
            Method::POST,
            "/npcf-ue-policy-control/v1/policies",
            "Npcf_UEPolicyControl_Create",
            ue::create,
        )
        .route(
            Method::GET,
            "/npcf-ue-policy-control/v1/policies/{polAssoId}",
            "Npcf_UEPolicyControl_Get",
            ue::get,
        )
        .route(
            Method::POST,
            "/npcf-ue-policy-control/v1/policies/{polAssoId}/update",
            "Npcf_UEPolicyControl_Update",
            ue::update,
        )
        .route(
            Method::DELETE,
            "/npcf-ue-policy-control/v1/policies/{polAssoId}",
            "Npcf_UEPolicyControl_Delete",
            ue::delete,
        )
        .route(
            Method::POST,
            ue::N1_NOTIFY_PATH,
            "Namf_Communication_N1MessageNotify",
            ue::n1_message_notify,
        )
        .route(
            Method::POST,
            ue::FAILURE_PATH,
            "Namf_Communication_N1N2TransferFailureNotification",
            ue::n1n2_failure,
        )
        .route(
            Method::POST,
            nudr_notify::CALLBACK_PATH,
            "Nudr_DataRepository_PolicyDataChangeNotify",
            nudr_notify::policy_data_change,
        )
        .route(
            Method::POST,
            nchf_spendinglimitcontrol::NOTIFY_PATH,
            "Nchf_SpendingLimitControl_Notify",
            nchf_spendinglimitcontrol::notify,
        )
        .route(
            Method::POST,
            nchf_spendinglimitcontrol::TERMINATE_PATH,
            "Nchf_SpendingLimitControl_Terminate",
            nchf_spendinglimitcontrol::terminate,
        );
    if admin {
        b = b
            .route(
                Method::GET,
                "/policy-admin/v1/project",
                "PolicyAdmin_Get",
                policy_admin::project,
            )
            .route(
                Method::POST,
                "/policy-admin/v1/project/deploy",
                "PolicyAdmin_Deploy",
                policy_admin::deploy,
            )
            .route(
                Method::GET,
                "/policy-admin/v1/versions",
                "PolicyAdmin_ListVersions",
                policy_admin::versions,
            )
            .route(
                Method::POST,
                "/policy-admin/v1/versions",
                "PolicyAdmin_AddVersion",
                policy_admin::add_version,
            )
            .route(
                Method::GET,
                "/policy-admin/v1/versions/{id}",
                "PolicyAdmin_GetVersion",
                policy_admin::version,
            )
            .route(
                Method::GET,
                "/policy-admin/v1/versions/{a}/diff/{b}",
                "PolicyAdmin_DiffVersions",
                policy_admin::diff,
            )
            .route(
                Method::POST,
                "/policy-admin/v1/versions/{id}/test",
                "PolicyAdmin_TestVersion",
                policy_admin::test,
            )
            .route(
                Method::POST,
                "/policy-admin/v1/versions/{id}/activate",
                "PolicyAdmin_ActivateVersion",
                policy_admin::activate,
            )
            .route(
                Method::POST,
                "/policy-admin/v1/rollback",
                "PolicyAdmin_Rollback",
                policy_admin::rollback,
            );
    }
    b.build()
}

/// A bound PCF with its store open and its policy project loaded, ready to serve.
pub struct Bound {
    serving: Serving<::store::AnyStore>,
    pcf: Arc<Pcf>,
}

/// The NF skeleton's steps for the PCF: loads and checks the policy project (a project that
/// fails its check stops the start, naming each error), opens the store (applying the PCF's
/// schema), binds the SBI port, registers with the NRF (when `[pcf.nrf]` is configured) and
/// watches the project's files when `policy_watch_ms` is set.
pub async fn bind(config: RunConfig) -> Result<Bound, PcfError> {
    config.pcf.validate().map_err(PcfError::Config)?;
    let dir = match &config.pcf.policy {
        Some(d) => d.clone(),
        None => {
            let beside = config.store.path.parent().unwrap_or(std::path::Path::new("."));
            let d = beside.join("policy-default");
            default_policy::materialize(&d).map_err(|e| {
                PcfError::Config(format!(
                    "cannot write the default policy project to {}: {e}",
                    d.display()
                ))
            })?;
            d
        }
    };
    let skeleton = Skeleton::open_any(Spec {
        nf_type: "PCF",
        instance_id: config.instance_id.clone(),
        sbi: config.sbi.clone(),
        client: config.client.clone(),
        store: config.store.clone(),
        nrf: config.pcf.nrf.clone(),
        copy: config.pcf.copy.clone(),
    })
    .await?;
    let (durable, version_store) = store::open(skeleton.store()).await?;
    // Before anything is loaded: with `shared_database`, a reader of the other instances'
    // changes (coherence.rs); otherwise, on MySQL, the database is this instance's
    // (store/mysql/owner.rs: one instance per database).
    let feed = coherence::prepare(skeleton.store(), config.pcf.shared_database).await?;
    let owner = match skeleton.store() {
        ::store::AnyStore::Mysql(db) if feed.is_none() => Some(
            store::mysql::owner::Ownership::take(
                db.clone(),
                Duration::from_millis(config.pcf.instance_lease_ms),
            )
            .await
            .map_err(|e| match e {
                store::mysql::owner::TakeError::Store(e) => PcfError::Store(e),
                held => PcfError::Config(held.to_string()),
            })?,
        ),
        _ => None,
    };
    let (policy, versions) = policy_versions::PolicyVersions::start(version_store, &dir)
        .await
        .map_err(PcfError::Config)?;
    let resident = Arc::new(store::Resident::load(durable.clone()).await?);
    let (sm, other) = resident.counts();
    tracing::info!(sm_policies = sm, am_ue_policies = other, "PCF state loaded");
    let scheme = skeleton.scheme();
    let policy_data =
        nudr_policy_data::PolicyData::new(config.pcf.udr.clone(), skeleton.client().clone())
            .map_err(PcfError::Config)?;
    let bindings =
        nbsf_management::Bindings::new(config.pcf.bsf.clone(), skeleton.client().clone())
            .map_err(PcfError::Config)?;
    let chf =
        nchf_spendinglimitcontrol::Chf::new(config.pcf.chf.clone(), skeleton.client().clone())
            .map_err(PcfError::Config)?;
    chf.load(store::PcfStore::chf_subscriptions(&*resident).await?);
    let beside = config.store.path.parent().unwrap_or(std::path::Path::new("."));
    let per =
        per::Recorder::open(&config.pcf.per, &config.pcf.sal, beside).map_err(PcfError::Config)?;
    let pcf = Arc::new(
        Pcf::new(
            config.pcf.clone(),
            (policy, versions),
            resident.clone(),
            policy_data,
            bindings,
            notify::Notifier::new(
                skeleton.client().clone(),
                Duration::from_millis(config.pcf.udr.timeout_ms),
            ),
            chf,
            scheme,
        )
        .with_per(per),
    );
    tracing::info!(chf_subscriptions = pcf.chf.subscribers(), "CHF subscriptions loaded");
    pcf.usage.load(store::PcfStore::usage_all(&*pcf.store).await?);
    pcf.sy.load(store::PcfStore::sy_sessions(&*pcf.store).await?);
    skeleton.observability().with_registry(|r| {
        metrics::register(pcf.clone(), r);
        usage::register_metrics(pcf.clone(), r);
    });
    skeleton.observability().with_registry(|r| pcf.ldap.register(r));
    let mut serving = skeleton.bind(router(pcf.clone())).await?;
    if let Some(reader) = feed {
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let follower =
            tokio::spawn(coherence::run(pcf.clone(), resident.clone(), durable, reader, stop_rx));
        serving.on_stop(async move {
            let _ = stop_tx.send(true);
            let _ = follower.await;
        });
    }
    let addr = serving.local_addr();
    let _ = pcf.local_authority.set(addr.to_string());
    let profile = serving
        .profile()
        .versioned_service(
            "npcf-smpolicycontrol",
            scheme,
            addr.port(),
            NPCF_SMPOLICYCONTROL_VERSIONS,
        )
        .versioned_service(
            "npcf-am-policy-control",
            scheme,
            addr.port(),
            NPCF_AM_POLICY_CONTROL_VERSIONS,
        )
        .versioned_service(
            "npcf-policyauthorization",
            scheme,
            addr.port(),
            NPCF_POLICYAUTHORIZATION_VERSIONS,
        )
        .versioned_service(
            "npcf-ue-policy-control",
            scheme,
            addr.port(),
            NPCF_UE_POLICY_CONTROL_VERSIONS,
        )
        .build();
    serving.register(profile)?;
    if config.pcf.diameter.enabled {
        let node = gx::start(pcf.clone(), &config.pcf.diameter).await.map_err(|e| {
            PcfError::Config(format!(
                "[pcf.diameter] cannot serve Gx on {}: {e}",
                config.pcf.diameter.listen
            ))
        })?;
        serving.diameter(node);
    }
    if config.pcf.sy.enabled {
        let node = sy::start(pcf.clone(), &config.pcf.diameter)
            .await
            .map_err(|e| PcfError::Config(format!("[pcf.sy] cannot start the Sy node: {e}")))?;
        tracing::info!(sy_sessions = pcf.sy.subscribers(), "Sy sessions loaded");
        serving.diameter(node);
    }
    if config.pcf.sd.enabled {
        let node = sd::start(pcf.clone(), &config.pcf.diameter)
            .await
            .map_err(|e| PcfError::Config(format!("[pcf.sd] cannot start the Sd node: {e}")))?;
        serving.diameter(node);
    }
    if let Some(nrf) = serving.nrf_client() {
        pcf.policy_data.use_nrf(nrf.clone());
        pcf.ue_policy.amf.use_nrf(nrf.clone());
        pcf.bindings.use_nrf(nrf.clone());
        pcf.chf.use_nrf(nrf);
    }
    let diameter = &config.pcf.diameter;
    let diameter_identity =
        diameter.enabled.then_some((diameter.origin_host.as_str(), diameter.origin_realm.as_str()));
    pcf.bindings.set_own(
        serving.instance_id(),
        serving.advertised_ipv4(),
        addr.port(),
        diameter_identity,
    );
    if config.pcf.bsf.enabled && !pcf.bindings.is_on() {
        tracing::warn!(
            "[pcf.bsf] enabled, but no api_root and no [pcf.nrf]: no binding is registered"
        );
    }
    if config.pcf.chf.enabled && !pcf.chf.is_on() {
        tracing::warn!(
            "[pcf.chf] enabled, but no api_root and no [pcf.nrf]: no spending limit is subscribed to"
        );
    }
    match (&config.pcf.udr.api_root, pcf.policy_data.is_on()) {
        (_, false) => tracing::warn!("no policy data source: decisions read no subscriber data ([pcf.udr] off, or no api_root and no [pcf.nrf])"),
        (Some(root), true) => tracing::info!(udr = %root, "policy data from the configured UDR"),
        (None, true) => tracing::info!("policy data from UDRs the NRF finds"),
    }
    if config.pcf.ldap.enabled {
        let l = &config.pcf.ldap;
        tracing::info!(urls = ?l.urls, base_dn = %l.base_dn, filter = %l.filter, n7 = l.n7, "subscriber profiles from LDAP");
    }
    if config.pcf.audit.enabled {
        let audit = audit::spawn(pcf.clone());
        serving.on_stop(async move { audit.abort() });
    }
    if config.pcf.policy_watch_ms > 0 {
        let stop = Arc::new(AtomicBool::new(false));
        let (me, runtime) = (pcf.clone(), tokio::runtime::Handle::current());
        let watched = dir.clone();
        let watcher = policy::deploy::watch_dir(
            dir,
            Duration::from_millis(config.pcf.policy_watch_ms),
            stop.clone(),
            move || me.versions.watched_change(&runtime, &watched),
        );
        serving.on_stop(async move {
            stop.store(true, Ordering::Relaxed);
            let _ = tokio::task::spawn_blocking(move || watcher.join()).await;
        });
    }
    // Last of the PCF's own stop steps: the next instance takes the database once this one's
    // background work is over.
    if let Some(owner) = owner {
        serving.on_stop(owner.release());
    }
    Ok(Bound { serving, pcf })
}

impl Bound {
    pub fn local_addr(&self) -> SocketAddr {
        self.serving.local_addr()
    }

    /// Where Gx is served, when `[pcf.diameter]` is enabled.
    pub fn diameter_addr(&self) -> Option<SocketAddr> {
        self.pcf.gx.get().and_then(|n| n.local_addr())
    }

    /// Where Gx is served over TLS, when `[pcf.diameter.tls] listen` is set.
    pub fn diameter_tls_addr(&self) -> Option<SocketAddr> {
        self.pcf.gx.get().and_then(|n| n.tls_local_addr())
    }

    pub fn pcf(&self) -> &Arc<Pcf> {
        &self.pcf
    }

    /// Serves until `shutdown`; then stops as every NF does (nf::skeleton).
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> Result<(), PcfError> {
        self.serving.serve(shutdown).await
    }
}

/// Runs the PCF until `shutdown` completes.
pub async fn run(config: RunConfig, shutdown: impl Future<Output = ()>) -> Result<(), PcfError> {
    let bound = bind(config).await?;
    tracing::info!(addr = %bound.local_addr(), "PCF serving");
    bound.serve(shutdown).await
}
