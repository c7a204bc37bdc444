//! The callback of the PCF's policy data subscriptions (TS 29.519 §5.3.2,
//! `policyDataChangeNotification`): `POST /npcf-callback/v1/policy-data-change` with an array
//! of PolicyDataChangeNotification. It answers 204 at once; each subscriber named (`ueId`) has
//! its SM policy associations decided again in the background, and the SMFs of those whose
//! decision changed get an UpdateNotify. A notification of AmPolicyData (`amPolicyData`, or
//! `delResources` naming `am-data`) does the same for the subscriber's AM associations and
//! their AMFs. With `[pcf.udr] on_unknown_subscriber = "reject"`, data removed
//! (`delResources`) ends the associations that decided with it: the SMF or AMF gets a
//! terminate (cause UE_SUBSCRIPTION) and deletes them.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use http::StatusCode;
use nf::Answer;
use sbi::{empty_response, InvalidParam, ProblemDetails, SbiRequest};
use serde_json::Value;

use crate::config::OnUnknown;
use crate::context::Pcf;

/// The callback path the PCF gives the UDR.
pub const CALLBACK_PATH: &str = "/npcf-callback/v1/policy-data-change";

pub async fn policy_data_change(pcf: Arc<Pcf>, req: SbiRequest) -> Answer {
    let body: Value = req.json()?;
    let Some(list) = body.as_array() else {
        return Err(ProblemDetails::invalid_params(
            sbi::problem::cause::MANDATORY_IE_INCORRECT,
            vec![InvalidParam::new("", "must be an array of PolicyDataChangeNotification")],
        )
        .into());
    };
    // Each subscriber named, with its newest SmPolicyData when a notification carries it; and
    // those whose AmPolicyData changed (true: it was removed). With `on_unknown_subscriber =
    // "reject"`, a subscriber whose data is removed is one the PCF would now refuse: its
    // associations are ended (terminate), not decided again without data.
    let terminate = pcf.policy_data.config().on_unknown_subscriber == OnUnknown::Reject;
    let mut ues: Vec<(String, Option<Value>)> = Vec::new();
    let mut am: Vec<(String, bool)> = Vec::new();
    let mut sm_gone: Vec<String> = Vec::new();
    for n in list {
        let Some(ue) = n.get("ueId").and_then(Value::as_str) else { continue };
        let removed = |part: &str| {
            n.get("delResources").and_then(Value::as_array).is_some_and(|d| {
                d.iter().filter_map(Value::as_str).any(|r| r.trim_end_matches('/').ends_with(part))
            })
        };
        let am_removed = removed("/am-data");
        if n.get("amPolicyData").is_some() || am_removed {
            am.retain(|(u, _)| u != ue);
            am.push((ue.to_string(), terminate && am_removed && n.get("amPolicyData").is_none()));
            continue;
        }
        if terminate && n.get("smPolicyData").is_none() && removed("/sm-data") {
            ues.retain(|(u, _)| u != ue);
            if !sm_gone.iter().any(|u| u == ue) {
                sm_gone.push(ue.to_string());
            }
            continue;
        }
        let data = n.get("smPolicyData").cloned();
        match ues.iter_mut().find(|(u, _)| u == ue) {
            Some((_, d)) => {
                if data.is_some() {
                    *d = data;
                }
            }
            None => ues.push((ue.to_string(), data)),
        }
    }
    pcf.policy_data.stats.notified.fetch_add(list.len() as u64, Ordering::Relaxed);
    for (ue, data) in ues {
        let pcf = pcf.clone();
        tokio::spawn(async move { crate::npcf_smpolicycontrol::redecide(&pcf, &ue, data).await });
    }
    for ue in sm_gone {
        let pcf = pcf.clone();
        tokio::spawn(async move {
            crate::npcf_smpolicycontrol::terminate_all(&pcf, &ue, "UE_SUBSCRIPTION").await
        });
    }
    for (ue, removed) in am {
        let pcf = pcf.clone();
        tokio::spawn(
            async move { crate::npcf_ampolicycontrol::redecide(&pcf, &ue, removed).await },
        );
    }
    Ok(empty_response(StatusCode::NO_CONTENT))
}
