//! One policy decision, as every service of the PCF takes it: the subscriber's state variables
//! and policy data read together, what `[pcf.udr]` says when the data cannot be had, then the
//! project in force.

use std::sync::Arc;

use chrono::Utc;
use http::StatusCode;
use nf::NfError;
use policy::{Input, Outcome, Project, Service};
use sbi::ProblemDetails;
use serde_json::{Map, Value};

use crate::config::{OnUnknown, OnUnreachable};
use crate::context::Pcf;
use crate::ldap::config::OnUnreachable as LdapOnUnreachable;
use crate::ldap::LdapRead;
use crate::nchf_spendinglimitcontrol::{Spending, SpendingRead};
use crate::nudr_policy_data::Fetched;
use crate::per::{DataState, Event};
use crate::store::Subscriber;

/// TS 29.512 §5.7.3: the UDR does not know the subscriber.
pub const USER_UNKNOWN: &str = "USER_UNKNOWN";

/// TS 29.500 §5.2.7.2: no UDR could be reached for the policy data.
pub const TARGET_NF_NOT_REACHABLE: &str = "TARGET_NF_NOT_REACHABLE";

/// The requesting node as the engine sees it: the SMF's (`smfId`) or the AMF's (`guami`'s
/// `amfId`) when the request names it.
fn node(request: &Value) -> &str {
    request
        .get("smfId")
        .or_else(|| request.get("guami").and_then(|g| g.get("amfId")))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// One decision of `service` on the project in force for `supi`: its state variables from the
/// store, its policy data from the UDR (SmPolicyData for SM, AmPolicyData for AM), then the
/// service's rules; or the fallback, or a refusal, when the data source says so (`[pcf.udr]`).
pub(crate) async fn decide(
    pcf: &Pcf,
    service: Service,
    request: &Value,
    supi: &str,
) -> Result<Decided, NfError> {
    decide_with(pcf, service, request, supi, None).await
}

/// As [`decide`], with what the store keeps of the subscriber when the caller read it already
/// (an update reads it with the association, in one store read).
pub(crate) async fn decide_with(
    pcf: &Pcf,
    service: Service,
    request: &Value,
    supi: &str,
    kept: Option<Subscriber>,
) -> Result<Decided, NfError> {
    let usage = pcf.usage.view(supi);
    decide_reported(pcf, service, request, supi, kept, usage).await
}

/// As [`decide_with`], reading `usage` as the subscriber's accumulated usage (a report's new
/// totals, not committed yet).
pub(crate) async fn decide_reported(
    pcf: &Pcf,
    service: Service,
    request: &Value,
    supi: &str,
    kept: Option<Subscriber>,
    usage: Option<Map<String, Value>>,
) -> Result<Decided, NfError> {
    let spending = match pcf.sy.serves(request) {
        true => pcf.sy.spending(supi),
        false => pcf.chf.spending(supi),
    };
    let spending = SpendingRead { spending, new: false };
    decide_inner(pcf, service, request, supi, kept, async { spending }, usage).await
}

/// As [`decide`], for a new SM association: its subscriber's spending limit statuses, from a
/// subscription at the CHF made now (in parallel with the reads) when it has none yet.
pub(crate) async fn decide_create(
    pcf: &Pcf,
    request: &Value,
    supi: &str,
) -> Result<Decided, NfError> {
    let project = pcf.policy.current();
    let counters = project.spending_counters();
    // Gx sessions (and N7 ones with `[pcf.sy] n7`) ask the OCS, the others the CHF.
    let spending = async {
        match pcf.sy.serves(request) {
            true => pcf.sy.for_create(pcf, supi, request, counters).await,
            false => pcf.chf.for_create(pcf, supi, request, counters).await,
        }
    };
    let usage = pcf.usage.view(supi);
    decide_inner(pcf, Service::Sm, request, supi, None, spending, usage).await
}

async fn decide_inner(
    pcf: &Pcf,
    service: Service,
    request: &Value,
    supi: &str,
    kept: Option<Subscriber>,
    spending: impl std::future::Future<Output = SpendingRead>,
    usage: Option<Map<String, Value>>,
) -> Result<Decided, NfError> {
    let data = async {
        match service {
            Service::Sm => pcf.policy_data.sm_data(supi).await,
            Service::Am => pcf.policy_data.am_data(supi).await,
            Service::Ue => pcf.policy_data.ue_policy_set(supi).await,
            _ => Fetched::Off,
        }
    };
    // The LDAP profile (`[pcf.ldap]`) is read beside the UDR's data, for SM decisions only.
    let ldap = async {
        match service {
            Service::Sm => pcf.ldap.read(supi, request).await,
            _ => LdapRead::Off,
        }
    };
    let (kept, data, spending, ldap) = match kept {
        Some(k) => {
            let (data, spending, ldap) = tokio::join!(data, spending, ldap);
            (Ok(k), data, spending, ldap)
        }
        None => tokio::join!(pcf.store.subscriber(supi), data, spending, ldap),
    };
    // A subscription made for this create is the caller's to store, whatever is decided.
    let chf = spending.spending.clone().filter(|_| spending.new);
    let kept = kept?;
    let ssv = kept.ssv;
    let subscribed = kept.udr_subscription.is_some();
    let udr = pcf.policy_data.config();
    let data_state = match &data {
        Fetched::Found(_) => DataState::Found,
        Fetched::Unknown => DataState::Unknown,
        Fetched::Unreachable(_) => DataState::Unreachable,
        Fetched::Off => DataState::None,
    };
    // The data the decision reads (None: the subscriber has none, or the source is off).
    let found = match data {
        Fetched::Found(v) => Some(v),
        Fetched::Off => None,
        Fetched::Unknown if udr.on_unknown_subscriber == OnUnknown::Reject => {
            pcf.chf.release(chf.as_deref()).await;
            return Err(ProblemDetails::new(
                StatusCode::BAD_REQUEST,
                USER_UNKNOWN,
                format!("the UDR has no policy data for {supi}"),
            )
            .into());
        }
        Fetched::Unknown => None,
        Fetched::Unreachable(why) => {
            if udr.on_unreachable == OnUnreachable::Reject {
                pcf.chf.release(chf.as_deref()).await;
                return Err(ProblemDetails::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    TARGET_NF_NOT_REACHABLE,
                    format!("no UDR answered for the policy data: {why}"),
                )
                .into());
            }
            let project = pcf.policy.current();
            let outcome = Outcome {
                decision: project.fallback(service).clone(),
                ssv_updates: Map::new(),
                fired: Vec::new(),
                error: Some(format!("policy data not read: {why}")),
            };
            pcf.per.decision(Event {
                service,
                supi,
                request,
                subscriber: None,
                ssv: &ssv,
                spending: Input::empty(),
                data: DataState::Unreachable,
                outcome: &outcome,
                project: &project,
            });
            return Ok(Decided {
                outcome,
                project,
                subscribe: false,
                data: None,
                subscribed,
                chf,
                ldap: None,
            });
        }
    };
    let ldap_config = pcf.ldap.config();
    let profile = match ldap {
        LdapRead::Found(p) => Some(p),
        LdapRead::Off => None,
        LdapRead::Unknown if ldap_config.on_unknown_subscriber == OnUnknown::Reject => {
            pcf.chf.release(chf.as_deref()).await;
            return Err(ProblemDetails::new(
                StatusCode::BAD_REQUEST,
                USER_UNKNOWN,
                format!("no LDAP entry for {supi}"),
            )
            .into());
        }
        LdapRead::Unknown => None,
        LdapRead::Failed(why) => match ldap_config.on_unreachable {
            LdapOnUnreachable::Decide => None,
            LdapOnUnreachable::Reject => {
                pcf.chf.release(chf.as_deref()).await;
                return Err(ProblemDetails::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    TARGET_NF_NOT_REACHABLE,
                    format!("no LDAP directory answered for the subscriber profile: {why}"),
                )
                .into());
            }
            LdapOnUnreachable::Fallback => {
                let project = pcf.policy.current();
                let outcome = Outcome {
                    decision: project.fallback(service).clone(),
                    ssv_updates: Map::new(),
                    fired: Vec::new(),
                    error: Some(format!("subscriber profile not read from LDAP: {why}")),
                };
                let subscribe = false;
                return Ok(Decided {
                    outcome,
                    project,
                    subscribe,
                    data: None,
                    subscribed,
                    chf,
                    ldap: None,
                });
            }
        },
    };
    let merged;
    let subscriber = match &profile {
        Some(p) => {
            merged = crate::ldap::overlay(found.as_deref(), p);
            &merged
        }
        None => found.as_deref().unwrap_or(&Value::Null),
    };
    let statuses = spending.spending.as_deref().map_or(Input::empty(), |s| &s.statuses);
    let input = Input {
        request,
        subscriber,
        ssv: &ssv,
        node: node(request),
        now: Utc::now(),
        spending: statuses,
        usage: usage.as_ref(),
    };
    let (mut outcome, project) = pcf.policy.evaluate(service, input);
    pcf.per.decision(Event {
        service,
        supi,
        request,
        subscriber: found.as_deref(),
        ssv: &ssv,
        spending: statuses,
        data: data_state,
        outcome: &outcome,
        project: &project,
    });
    // A state variable set to the value it has (a rule that records the last DNN at every
    // update) changes nothing: not written, the update commits less or nothing of the SSV.
    outcome.ssv_updates.retain(|k, v| match ssv.get(k) {
        Some(old) => old != v,
        None => !v.is_null(),
    });
    if let Some(e) = &outcome.error {
        tracing::warn!(
            policy = %project.name, version = %project.version, service = service.name(), error = %e,
            "policy script failed: the project's fallback decision answers"
        );
    }
    // Only SM data is subscribed to (the SM associations are what a change re-decides).
    let subscribe = service == Service::Sm && found.is_some() && !subscribed;
    Ok(Decided { outcome, project, subscribe, data: found, subscribed, chf, ldap: profile })
}

/// A decision and what goes with it.
pub(crate) struct Decided {
    pub outcome: Outcome,
    pub project: Arc<Project>,
    /// The subscriber's SM data came from the UDR and it has no subscription there yet.
    pub subscribe: bool,
    /// The policy data the decision read, when the UDR had some.
    pub data: Option<Arc<Value>>,
    /// The subscriber has a policy data subscription at the UDR.
    pub subscribed: bool,
    /// The spending limit subscription made at the CHF for this create, to store with it.
    pub chf: Option<Arc<Spending>>,
    /// The LDAP profile the decision read (`[pcf.ldap]`), for the session to keep cached.
    pub ldap: Option<Arc<Value>>,
}
