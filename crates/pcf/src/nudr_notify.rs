//! The callback of the PCF's policy data subscriptions (TS 29.519 §5.3.2,
//! `policyDataChangeNotification`): `POST /npcf-callback/v1/policy-data-change` with an array
//! of PolicyDataChangeNotification. It answers 204 at once; each subscriber named (`ueId`) has
//! its SM policy associations decided again in the background, and the SMFs of those whose
//! decision changed get an UpdateNotify. A notification of AmPolicyData (`amPolicyData`, or
//! `delResources` naming `am-data`) does the same for the subscriber's AM associations and
//! their AMFs.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use http::StatusCode;
use nf::Answer;
use sbi::{empty_response, InvalidParam, ProblemDetails, SbiRequest};
use serde_json::Value;

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
    // those whose AmPolicyData changed (true: it was removed).
    let mut ues: Vec<(String, Option<Value>)> = Vec::new();
    let mut am: Vec<(String, bool)> = Vec::new();
    for n in list {
        let Some(ue) = n.get("ueId").and_then(Value::as_str) else { continue };
        let am_removed = n.get("delResources").and_then(Value::as_array).is_some_and(|d| {
            d.iter()
                .filter_map(Value::as_str)
                .any(|r| r.trim_end_matches('/').ends_with("/am-data"))
        });
        if n.get("amPolicyData").is_some() || am_removed {
            am.retain(|(u, _)| u != ue);
            am.push((ue.to_string(), am_removed && n.get("amPolicyData").is_none()));
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
    for (ue, removed) in am {
        let pcf = pcf.clone();
        tokio::spawn(
            async move { crate::npcf_ampolicycontrol::redecide(&pcf, &ue, removed).await },
        );
    }
    Ok(empty_response(StatusCode::NO_CONTENT))
}
