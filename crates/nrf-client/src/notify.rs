//! NFStatusNotify, the consumer side (TS 29.510 §5.2.2.6): the NF serves the callback URI it
//! gave in NFStatusSubscribe on its own SBI port. [`route`] adds that route to the NF's
//! router; [`decode`] is there for NFs that want to route it themselves and then call
//! [`crate::NrfClient::apply_notification`].

use std::sync::Arc;

use http::{Method, StatusCode};
use sbi::router::RouterBuilder;
use sbi::{empty_response, SbiRequest};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::NrfClient;

pub const NF_REGISTERED: &str = "NF_REGISTERED";
pub const NF_DEREGISTERED: &str = "NF_DEREGISTERED";
pub const NF_PROFILE_CHANGED: &str = "NF_PROFILE_CHANGED";

/// NotificationData (TS 29.510 §6.1.6.2.17).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Notification {
    /// `NF_REGISTERED`, `NF_DEREGISTERED`, `NF_PROFILE_CHANGED` (or a later event).
    pub event: String,
    /// `{apiRoot}/nnrf-nfm/v1/nf-instances/{nfInstanceId}`.
    pub nf_instance_uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nf_profile: Option<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub profile_changes: Vec<ChangeItem>,
}

/// ChangeItem (TS 29.571): one change of a profile, `path` a JSON pointer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangeItem {
    /// `ADD`, `MOVE`, `REMOVE`, `REPLACE`.
    pub op: String,
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orig_value: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_value: Option<Value>,
}

impl Notification {
    /// The nfInstanceId: the last segment of `nfInstanceUri`, else the profile's.
    pub fn nf_instance_id(&self) -> &str {
        let from_uri = self.nf_instance_uri.trim_end_matches('/').rsplit('/').next().unwrap_or("");
        if !from_uri.is_empty() {
            return from_uri;
        }
        self.nf_profile
            .as_ref()
            .and_then(|p| p.get("nfInstanceId"))
            .and_then(Value::as_str)
            .unwrap_or("")
    }
}

/// Decodes a NotificationData body.
pub fn decode(body: &[u8]) -> Result<Notification, serde_json::Error> {
    serde_json::from_slice(body)
}

/// Applies ChangeItems to `profile` (best effort: a change whose parent is missing is skipped).
pub(crate) fn apply_changes(profile: &mut Value, changes: &[ChangeItem]) {
    for c in changes {
        let (parent, last) = match c.path.rfind('/') {
            Some(i) => (&c.path[..i], unescape(&c.path[i + 1..])),
            None => continue,
        };
        let Some(target) = profile.pointer_mut(parent) else { continue };
        match (c.op.as_str(), target) {
            ("REMOVE", Value::Object(m)) => {
                m.remove(&last);
            }
            ("REMOVE", Value::Array(a)) => {
                if let Ok(i) = last.parse::<usize>() {
                    if i < a.len() {
                        a.remove(i);
                    }
                }
            }
            ("ADD" | "REPLACE", Value::Object(m)) => {
                m.insert(last, c.new_value.clone().unwrap_or(Value::Null));
            }
            ("ADD" | "REPLACE", Value::Array(a)) => {
                let v = c.new_value.clone().unwrap_or(Value::Null);
                match last.parse::<usize>() {
                    Ok(i) if c.op == "REPLACE" && i < a.len() => a[i] = v,
                    Ok(i) if i <= a.len() => a.insert(i, v),
                    _ if last == "-" => a.push(v),
                    _ => {}
                }
            }
            _ => {}
        }
    }
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

/// Adds `POST path` (operation `Nnrf_NFManagement_NFStatusNotify`) to the NF's router: each
/// NotificationData received is applied to `client` (peer profiles, discovery cache) and
/// published on [`NrfClient::notifications`]; answered 204, or 400 when it does not decode.
pub fn route<S: Send + Sync + 'static>(
    builder: RouterBuilder<S>,
    path: &'static str,
    client: NrfClient,
) -> RouterBuilder<S> {
    let client = Arc::new(client);
    builder.route(Method::POST, path, "Nnrf_NFManagement_NFStatusNotify", move |_, req| {
        let client = client.clone();
        async move { handle(&client, req) }
    })
}

fn handle(client: &NrfClient, req: SbiRequest) -> sbi::HandlerResult {
    let n: Notification = req.json()?;
    client.apply_notification(&n);
    Ok(empty_response(StatusCode::NO_CONTENT))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decode_and_changes() {
        let n = decode(
            br#"{"event":"NF_PROFILE_CHANGED",
                 "nfInstanceUri":"http://nrf/nnrf-nfm/v1/nf-instances/abc",
                 "profileChanges":[{"op":"REPLACE","path":"/nfStatus","newValue":"SUSPENDED"},
                                   {"op":"ADD","path":"/ipv4Addresses/1","newValue":"10.0.0.2"},
                                   {"op":"REMOVE","path":"/priority"}]}"#,
        )
        .unwrap();
        assert_eq!(n.nf_instance_id(), "abc");
        let mut p = json!({"nfStatus":"REGISTERED","ipv4Addresses":["10.0.0.1"],"priority":1});
        apply_changes(&mut p, &n.profile_changes);
        assert_eq!(p, json!({"nfStatus":"SUSPENDED","ipv4Addresses":["10.0.0.1","10.0.0.2"]}));
        assert!(decode(b"{}").is_err());
    }
}
