//! Nudr_DataRepository for policy data (N36, TS 29.519 §5, served under
//! `{apiRoot}/nudr-dr/v2/policy-data`), its subscriptions with their notifications, and the
//! provisioning of policy data (`/udr-prov/v1/policy-data`).
//!
//! A newcomer's map: [`ids`] names resources (ueId, plmnId, S-NSSAI... and the canonical path
//! a resource is stored and monitored under); [`model`] checks the TS 29.519 types; [`etag`]
//! does versions and If-Match / If-None-Match; [`store`] is the service's store trait, [`sqlite`]
//! its SQLite implementation with the schema; [`resources`] serves every
//! policy data resource of TS29519_Policy_Data.yaml; [`subs_to_notify`] the subscriptions and
//! their in-memory index; [`notify`] records a notification in the transaction of each change
//! and delivers it from an outbox; [`provisioning`] is the operator's REST API for a UE's whole
//! policy profile and for the resources N36 only reads. [`PolicyData`] is the service's state,
//! one field of [`crate::Udr`]; [`routes`] adds its routes to the UDR's router.

pub mod config;
pub mod etag;
pub mod ids;
pub mod merge;
pub mod model;
pub mod mysql;
pub mod notify;
pub mod provisioning;
pub mod resources;
pub mod sqlite;
pub mod store;
pub mod subs_to_notify;

use std::sync::Arc;

use std::collections::BTreeMap;

use bytes::Bytes;
use http::{header, HeaderValue, Method, StatusCode};
use nf::NfError;
use sbi::client::SbiClient;
use sbi::router::RouterBuilder;
use sbi::{Body, ProblemDetails, Response};
use tokio::sync::{watch, Notify};

pub use config::PolicyConfig;
use notify::NotifyStats;
use subs_to_notify::SubsIndex;

use crate::context::Udr;

/// The Nudr_DataRepository API root (TS29504_Nudr_DR.yaml `servers`: `{apiRoot}/nudr-dr/v2`).
pub const NUDR_DR_ROOT: &str = "/nudr-dr/v2";
/// The provisioning API root.
pub const PROV_ROOT: &str = "/udr-prov/v1";

/// Nudr application errors (TS 29.504 §6.1.6.3).
pub const USER_NOT_FOUND: &str = "USER_NOT_FOUND";
pub const DATA_NOT_FOUND: &str = "DATA_NOT_FOUND";

/// The policy data service's state.
pub struct PolicyData {
    pub config: PolicyConfig,
    pub store: Arc<dyn store::PolicyDataStore>,
    pub subs: Arc<SubsIndex>,
    pub stats: Arc<NotifyStats>,
    wake: Arc<Notify>,
}

/// The background tasks of the service (notification delivery, subscription expiry).
pub struct Tasks {
    stop: watch::Sender<bool>,
    handles: Vec<tokio::task::JoinHandle<()>>,
}

impl Tasks {
    /// Stops the tasks and waits for them (delivered notifications' rows are removed first).
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for h in self.handles {
            let _ = h.await;
        }
    }
}

impl PolicyData {
    pub fn new(config: PolicyConfig, store: Arc<dyn store::PolicyDataStore>) -> Self {
        PolicyData {
            config,
            store,
            subs: Arc::default(),
            stats: Arc::default(),
            wake: Arc::new(Notify::new()),
        }
    }

    /// Loads the subscriptions (at start, before serving); returns how many.
    pub async fn load(&self) -> ::store::Result<usize> {
        subs_to_notify::load(self).await
    }

    /// Starts notification delivery (resuming the outbox) and subscription expiry.
    pub fn start(&self, client: SbiClient) -> Tasks {
        let (stop, rx) = watch::channel(false);
        let delivery = tokio::spawn(notify::run(
            self.store.clone(),
            self.subs.clone(),
            client,
            self.config.notify.clone(),
            self.stats.clone(),
            self.wake.clone(),
            rx.clone(),
        ));
        let expiry =
            tokio::spawn(subs_to_notify::expire(self.store.clone(), self.subs.clone(), rx));
        Tasks { stop, handles: vec![delivery, expiry] }
    }

    /// See [`store::PolicyDataStore::write_one`]; notifies this service's subscribers.
    pub async fn write_one(
        &self,
        key: ids::Key,
        cond: etag::Conditions,
        must_exist: bool,
        edit: impl FnOnce(Option<&[u8]>) -> Result<Option<Bytes>, NfError> + Send + 'static,
    ) -> ::store::Result<Result<store::Written, store::Refusal>> {
        self.store.write_one(self.subs.clone(), key, cond, must_exist, Box::new(edit)).await
    }

    /// See [`store::PolicyDataStore::write_ue`]; notifies this service's subscribers.
    pub async fn write_ue(
        &self,
        ue_id: String,
        cond: etag::Conditions,
        must_exist: bool,
        edit: impl FnOnce(&BTreeMap<String, &[u8]>) -> Result<BTreeMap<String, Vec<u8>>, NfError>
            + Send
            + 'static,
    ) -> ::store::Result<Result<store::UeWritten, store::Refusal>> {
        self.store.write_ue(self.subs.clone(), ue_id, cond, must_exist, Box::new(edit)).await
    }

    /// Wakes the delivery (notifications taken over from another instance).
    pub(crate) fn wake_delivery(&self) {
        self.wake.notify_one();
    }

    /// After a committed write: wakes the delivery when it recorded notifications.
    pub(crate) fn recorded(&self, n: usize) {
        if n > 0 {
            self.stats.recorded.inc_by(n as u64);
            self.wake.notify_one();
        }
    }
}

/// Adds the policy data routes (N36 and provisioning) to the UDR's router.
///
/// N36 routes carry the service operation of TS 29.504 §5.2 their method is: GET is
/// Nudr_DataRepository_Query, PUT Nudr_DataRepository_Create (Nudr_DataRepository_Update where
/// TS 29.519 names the PUT a replace of an existing resource: sm-data, operator-specific-data),
/// PATCH Nudr_DataRepository_Update, DELETE Nudr_DataRepository_Delete; on subs-to-notify, POST
/// and PUT are Nudr_DataRepository_Subscribe and DELETE Nudr_DataRepository_Unsubscribe. The
/// handler named in each route is TS 29.519's name of the resource operation. Provisioning has no
/// 3GPP service: its routes are `UdrProv_` + verb + resource (docs/udr.md).
pub fn routes(b: RouterBuilder<Udr>) -> RouterBuilder<Udr> {
    use provisioning as p;
    use resources as r;
    use subs_to_notify as s;
    const UE: &str = "/nudr-dr/v2/policy-data/ues/{ueId}";
    b.route(Method::GET, UE, "Nudr_DataRepository_Query", r::read_policy_data)
        .route(
            Method::GET,
            "/nudr-dr/v2/policy-data/ues/{ueId}/am-data",
            "Nudr_DataRepository_Query",
            r::read_access_and_mobility_policy_data,
        )
        .route(
            Method::GET,
            "/nudr-dr/v2/policy-data/ues/{ueId}/ue-policy-set",
            "Nudr_DataRepository_Query",
            r::read_ue_policy_set,
        )
        .route(
            Method::PUT,
            "/nudr-dr/v2/policy-data/ues/{ueId}/ue-policy-set",
            "Nudr_DataRepository_Create",
            r::create_or_replace_ue_policy_set,
        )
        .route(
            Method::PATCH,
            "/nudr-dr/v2/policy-data/ues/{ueId}/ue-policy-set",
            "Nudr_DataRepository_Update",
            r::update_ue_policy_set,
        )
        .route(
            Method::GET,
            "/nudr-dr/v2/policy-data/ues/{ueId}/sm-data",
            "Nudr_DataRepository_Query",
            r::read_session_management_policy_data,
        )
        .route(
            Method::PATCH,
            "/nudr-dr/v2/policy-data/ues/{ueId}/sm-data",
            "Nudr_DataRepository_Update",
            r::update_session_management_policy_data,
        )
        .route(
            Method::PUT,
            "/nudr-dr/v2/policy-data/ues/{ueId}/sm-data",
            "Nudr_DataRepository_Update",
            r::replace_session_management_policy_data,
        )
        .route(
            Method::DELETE,
            "/nudr-dr/v2/policy-data/ues/{ueId}/sm-data",
            "Nudr_DataRepository_Delete",
            r::delete_session_management_policy_data,
        )
        .route(
            Method::GET,
            "/nudr-dr/v2/policy-data/ues/{ueId}/sm-data/{usageMonId}",
            "Nudr_DataRepository_Query",
            r::read_usage_monitoring_information,
        )
        .route(
            Method::PUT,
            "/nudr-dr/v2/policy-data/ues/{ueId}/sm-data/{usageMonId}",
            "Nudr_DataRepository_Create",
            r::create_usage_monitoring_resource,
        )
        .route(
            Method::DELETE,
            "/nudr-dr/v2/policy-data/ues/{ueId}/sm-data/{usageMonId}",
            "Nudr_DataRepository_Delete",
            r::delete_usage_monitoring_information,
        )
        .route(
            Method::GET,
            "/nudr-dr/v2/policy-data/ues/{ueId}/operator-specific-data",
            "Nudr_DataRepository_Query",
            r::read_operator_specific_data,
        )
        .route(
            Method::PATCH,
            "/nudr-dr/v2/policy-data/ues/{ueId}/operator-specific-data",
            "Nudr_DataRepository_Update",
            r::update_operator_specific_data,
        )
        .route(
            Method::PUT,
            "/nudr-dr/v2/policy-data/ues/{ueId}/operator-specific-data",
            "Nudr_DataRepository_Update",
            r::replace_operator_specific_data,
        )
        .route(
            Method::DELETE,
            "/nudr-dr/v2/policy-data/ues/{ueId}/operator-specific-data",
            "Nudr_DataRepository_Delete",
            r::delete_operator_specific_data,
        )
        .route(
            Method::GET,
            "/nudr-dr/v2/policy-data/plmns/{plmnId}/ue-policy-set",
            "Nudr_DataRepository_Query",
            r::read_plmn_ue_policy_set,
        )
        .route(
            Method::GET,
            "/nudr-dr/v2/policy-data/sponsor-connectivity-data/{sponsorId}",
            "Nudr_DataRepository_Query",
            r::read_sponsor_connectivity_data,
        )
        .route(
            Method::GET,
            "/nudr-dr/v2/policy-data/bdt-data",
            "Nudr_DataRepository_Query",
            r::read_bdt_data,
        )
        .route(
            Method::GET,
            "/nudr-dr/v2/policy-data/bdt-data/{bdtReferenceId}",
            "Nudr_DataRepository_Query",
            r::read_individual_bdt_data,
        )
        .route(
            Method::PUT,
            "/nudr-dr/v2/policy-data/bdt-data/{bdtReferenceId}",
            "Nudr_DataRepository_Create",
            r::create_individual_bdt_data,
        )
        .route(
            Method::PATCH,
            "/nudr-dr/v2/policy-data/bdt-data/{bdtReferenceId}",
            "Nudr_DataRepository_Update",
            r::update_individual_bdt_data,
        )
        .route(
            Method::DELETE,
            "/nudr-dr/v2/policy-data/bdt-data/{bdtReferenceId}",
            "Nudr_DataRepository_Delete",
            r::delete_individual_bdt_data,
        )
        .route(
            Method::GET,
            "/nudr-dr/v2/policy-data/slice-control-data/{snssai}",
            "Nudr_DataRepository_Query",
            r::read_slice_policy_control_data,
        )
        .route(
            Method::PATCH,
            "/nudr-dr/v2/policy-data/slice-control-data/{snssai}",
            "Nudr_DataRepository_Update",
            r::update_slice_policy_control_data,
        )
        .route(
            Method::GET,
            "/nudr-dr/v2/policy-data/mbs-session-pol-data/{polSessionId}",
            "Nudr_DataRepository_Query",
            r::get_mbs_sess_pol_ctrl_data,
        )
        .route(
            Method::POST,
            "/nudr-dr/v2/policy-data/subs-to-notify",
            "Nudr_DataRepository_Subscribe",
            s::create_individual_policy_data_subscription,
        )
        .route(
            Method::PUT,
            "/nudr-dr/v2/policy-data/subs-to-notify/{subsId}",
            "Nudr_DataRepository_Subscribe",
            s::replace_individual_policy_data_subscription,
        )
        .route(
            Method::DELETE,
            "/nudr-dr/v2/policy-data/subs-to-notify/{subsId}",
            "Nudr_DataRepository_Unsubscribe",
            s::delete_individual_policy_data_subscription,
        )
        .route(
            Method::GET,
            "/udr-prov/v1/policy-data/ues/{ueId}",
            "UdrProv_GetPolicyProfile",
            p::read_policy_profile,
        )
        .route(
            Method::PUT,
            "/udr-prov/v1/policy-data/ues/{ueId}",
            "UdrProv_CreateOrReplacePolicyProfile",
            p::create_or_replace_policy_profile,
        )
        .route(
            Method::PATCH,
            "/udr-prov/v1/policy-data/ues/{ueId}",
            "UdrProv_UpdatePolicyProfile",
            p::update_policy_profile,
        )
        .route(
            Method::DELETE,
            "/udr-prov/v1/policy-data/ues/{ueId}",
            "UdrProv_DeletePolicyProfile",
            p::delete_policy_profile,
        )
        .route(
            Method::GET,
            "/udr-prov/v1/policy-data/plmns/{plmnId}/ue-policy-set",
            "UdrProv_GetPlmnUePolicySet",
            p::read_plmn,
        )
        .route(
            Method::PUT,
            "/udr-prov/v1/policy-data/plmns/{plmnId}/ue-policy-set",
            "UdrProv_CreateOrReplacePlmnUePolicySet",
            p::put_plmn,
        )
        .route(
            Method::DELETE,
            "/udr-prov/v1/policy-data/plmns/{plmnId}/ue-policy-set",
            "UdrProv_DeletePlmnUePolicySet",
            p::delete_plmn,
        )
        .route(
            Method::GET,
            "/udr-prov/v1/policy-data/sponsor-connectivity-data/{sponsorId}",
            "UdrProv_GetSponsorConnectivityData",
            p::read_sponsor,
        )
        .route(
            Method::PUT,
            "/udr-prov/v1/policy-data/sponsor-connectivity-data/{sponsorId}",
            "UdrProv_CreateOrReplaceSponsorConnectivityData",
            p::put_sponsor,
        )
        .route(
            Method::DELETE,
            "/udr-prov/v1/policy-data/sponsor-connectivity-data/{sponsorId}",
            "UdrProv_DeleteSponsorConnectivityData",
            p::delete_sponsor,
        )
        .route(
            Method::GET,
            "/udr-prov/v1/policy-data/bdt-data/{bdtReferenceId}",
            "UdrProv_GetBdtData",
            p::read_bdt,
        )
        .route(
            Method::PUT,
            "/udr-prov/v1/policy-data/bdt-data/{bdtReferenceId}",
            "UdrProv_CreateOrReplaceBdtData",
            p::put_bdt,
        )
        .route(
            Method::DELETE,
            "/udr-prov/v1/policy-data/bdt-data/{bdtReferenceId}",
            "UdrProv_DeleteBdtData",
            p::delete_bdt,
        )
        .route(
            Method::GET,
            "/udr-prov/v1/policy-data/slice-control-data/{snssai}",
            "UdrProv_GetSlicePolicyControlData",
            p::read_slice,
        )
        .route(
            Method::PUT,
            "/udr-prov/v1/policy-data/slice-control-data/{snssai}",
            "UdrProv_CreateOrReplaceSlicePolicyControlData",
            p::put_slice,
        )
        .route(
            Method::DELETE,
            "/udr-prov/v1/policy-data/slice-control-data/{snssai}",
            "UdrProv_DeleteSlicePolicyControlData",
            p::delete_slice,
        )
        .route(
            Method::GET,
            "/udr-prov/v1/policy-data/mbs-session-pol-data/{polSessionId}",
            "UdrProv_GetMbsSessPolCtrlData",
            p::read_mbs,
        )
        .route(
            Method::PUT,
            "/udr-prov/v1/policy-data/mbs-session-pol-data/{polSessionId}",
            "UdrProv_CreateOrReplaceMbsSessPolCtrlData",
            p::put_mbs,
        )
        .route(
            Method::DELETE,
            "/udr-prov/v1/policy-data/mbs-session-pol-data/{polSessionId}",
            "UdrProv_DeleteMbsSessPolCtrlData",
            p::delete_mbs,
        )
}

// --- answers shared by the handlers -------------------------------------------------------------

/// A JSON answer from stored bytes (no re-encoding), with its ETag.
pub(crate) fn json_answer(
    status: StatusCode,
    json: impl Into<Body>,
    etag: Option<&str>,
) -> Response {
    let mut resp = http::Response::new(json.into());
    *resp.status_mut() = status;
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(sbi::body::JSON));
    if let Some(t) = etag {
        resp.headers_mut().insert(header::ETAG, etag::header_value(t));
    }
    resp
}

/// An answer without body (204, 304) with an ETag.
pub(crate) fn empty_answer(status: StatusCode, etag: Option<&str>) -> Response {
    let mut resp = sbi::empty_response(status);
    if let Some(t) = etag {
        resp.headers_mut().insert(header::ETAG, etag::header_value(t));
    }
    resp
}

/// The answer a GET's preconditions give for a resource whose ETag is `tag`, if any: 412 when
/// If-Match does not hold (RFC 9110 §13.1.1), 304 when If-None-Match matches.
pub(crate) fn conditional_read(
    cond: &etag::Conditions,
    tag: &str,
    instance: &str,
) -> Option<Response> {
    if !cond.if_match_holds(Some(tag)) {
        let mut resp = etag::precondition_failed(Some(tag)).with_instance(instance).into_response();
        resp.headers_mut().insert(header::ETAG, etag::header_value(tag));
        return Some(resp);
    }
    cond.not_modified(tag).then(|| empty_answer(StatusCode::NOT_MODIFIED, Some(tag)))
}

pub(crate) fn user_not_found(ue_id: &str) -> ProblemDetails {
    ProblemDetails::new(
        StatusCode::NOT_FOUND,
        USER_NOT_FOUND,
        format!("no policy data for UE {ue_id}"),
    )
}

pub(crate) fn data_not_found(what: &str) -> ProblemDetails {
    ProblemDetails::new(StatusCode::NOT_FOUND, DATA_NOT_FOUND, format!("no {what}"))
}

/// The answer to a refused write: 404 USER_NOT_FOUND / DATA_NOT_FOUND, 400, or 412 carrying the
/// resource's current ETag (so the consumer can read it again and retry).
/// `ue_id` names the UE of a USER_NOT_FOUND, `what` the data of a DATA_NOT_FOUND.
pub(crate) fn refused(r: store::Refusal, ue_id: &str, what: &str, instance: &str) -> nf::Answer {
    match r {
        store::Refusal::NoUser => Err(user_not_found(ue_id).into()),
        store::Refusal::NoData => Err(data_not_found(what).into()),
        store::Refusal::Edit(e) => Err(e),
        store::Refusal::Precondition(current) => {
            let mut resp = etag::precondition_failed(current.as_deref())
                .with_instance(instance)
                .into_response();
            if let Some(t) = current {
                resp.headers_mut().insert(header::ETAG, etag::header_value(&t));
            }
            Ok(resp)
        }
    }
}
