//! What the PCF asks of the AMF (TS 29.518 Namf_Communication) to reach a UE with its UE
//! policy: N1N2MessageTransfer of a UPDP N1 message (§5.2.2.3.1, body multipart/related per
//! §6.1.2.4 with N1N2MessageTransferReqData and the binary N1 part), and N1N2MessageSubscribe /
//! UnSubscribe for class UPDP (§5.2.2.3.2) so the UE's answer is notified to this PCF.
//!
//! Which AMF, in order: `[pcf.amf] api_root`; else an AMF the NRF finds serving `namf-comm`
//! for the request's `guami`; else the scheme and authority of the request's
//! `notificationUri` (the AMF's own callback, so the AMF that created the association).

use std::sync::OnceLock;
use std::time::Duration;

use http::{StatusCode, Uri};
use nrf_client::{DiscoveryQuery, NrfClient};
use sbi::client::SbiClient;
use serde_json::{json, Value};

use crate::config::AmfConfig;

/// The multipart boundary of the transfers: long and fixed, as no N1 message can hold it
/// together with the CRLF and dashes before it.
const BOUNDARY: &str = "fivecore-n1n2-4f3a9c2e7b1d";
/// The Content-Id of the binary N1 part (`n1MessageContent.contentId`).
pub const N1_CONTENT_ID: &str = "n1msg";

/// What a transfer came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transfer {
    /// 200 N1_N2_TRANSFER_INITIATED or 202 ATTEMPTING_TO_REACH_UE: the AMF has it.
    Accepted(String),
    /// The AMF answered otherwise (its status and cause).
    Refused(String),
    /// No AMF to ask, or no answer.
    Unreachable(String),
}

pub struct Amf {
    config: AmfConfig,
    client: SbiClient,
    fixed: Option<Uri>,
    nrf: OnceLock<NrfClient>,
}

impl Amf {
    /// `config` as [`crate::config::PcfConfig::validate`] accepted it (its api_root parses).
    pub fn new(config: AmfConfig, client: SbiClient) -> Self {
        let fixed = config.api_root.as_deref().and_then(|r| r.parse::<Uri>().ok());
        Amf { config, client, fixed, nrf: OnceLock::new() }
    }

    pub fn use_nrf(&self, nrf: NrfClient) {
        let _ = self.nrf.set(nrf);
    }

    pub fn config(&self) -> &AmfConfig {
        &self.config
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.config.timeout_ms)
    }

    /// The AMF apiRoots for the UE of `request` (a PolicyAssociationRequest), best first.
    pub async fn find(&self, request: &Value) -> Result<Vec<String>, String> {
        if let Some(u) = &self.fixed {
            return Ok(vec![u.to_string().trim_end_matches('/').to_string()]);
        }
        if let (Some(nrf), Some(guami)) = (self.nrf.get(), request.get("guami")) {
            let mut q = DiscoveryQuery::new("AMF", "PCF").service("namf-comm");
            q.extra.push(("guami".into(), guami.to_string()));
            match nrf.discover(&q).await {
                Ok(found) => {
                    let roots = found.api_roots("namf-comm");
                    if !roots.is_empty() {
                        return Ok(roots);
                    }
                }
                Err(e) => tracing::debug!(error = %e, "no AMF discovered for the guami"),
            }
        }
        let uri = request.get("notificationUri").and_then(Value::as_str).unwrap_or("");
        match uri.parse::<Uri>() {
            Ok(u) if u.authority().is_some() => Ok(vec![format!(
                "{}://{}",
                u.scheme_str().unwrap_or("http"),
                u.authority().map(|a| a.as_str()).unwrap_or_default()
            )]),
            _ => Err("no AMF: no [pcf.amf] api_root, none discovered, no notificationUri".into()),
        }
    }

    /// N1N2MessageSubscribe for class UPDP; the subscription's URI.
    pub async fn subscribe(
        &self,
        amf: &str,
        supi: &str,
        callback: &str,
        nf_id: Option<&str>,
    ) -> Result<String, String> {
        let url = format!("{amf}/namf-comm/v1/ue-contexts/{supi}/n1-n2-messages/subscriptions");
        let mut body = json!({"n1MessageClass": "UPDP", "n1NotifyCallbackUri": callback});
        if let Some(id) = nf_id {
            body["nfId"] = Value::from(id);
        }
        let r = self
            .client
            .post(&url)
            .json(&body)
            .max_rsp_time(self.timeout())
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if r.status() != StatusCode::CREATED {
            return Err(format!("the AMF answered {} to N1N2MessageSubscribe", r.status()));
        }
        if let Some(loc) = r.header("location") {
            return Ok(loc.to_string());
        }
        let id = r.json::<Value>().ok().and_then(|v| {
            v.get("n1n2NotifySubscriptionId").and_then(Value::as_str).map(str::to_string)
        });
        id.map(|id| format!("{url}/{id}"))
            .ok_or_else(|| "the AMF's 201 names no subscription".into())
    }

    /// N1N2MessageUnSubscribe (a DELETE of the subscription).
    pub async fn unsubscribe(&self, uri: &str) {
        if let Err(why) = crate::producers::delete(&self.client, uri, self.timeout()).await {
            tracing::warn!(%uri, %why, "N1 message subscription not removed at the AMF");
        }
    }

    /// N1N2MessageTransfer of `n1` (a UE policy delivery message) to `supi` at `amf`, failures
    /// to be notified at `failure_uri`.
    pub async fn transfer(&self, amf: &str, supi: &str, n1: &[u8], failure_uri: &str) -> Transfer {
        let url = format!("{amf}/namf-comm/v1/ue-contexts/{supi}/n1-n2-messages");
        let data = json!({
            "n1MessageContainer": {
                "n1MessageClass": "UPDP",
                "n1MessageContent": {"contentId": N1_CONTENT_ID},
            },
            "n1n2FailureTxfNotifURI": failure_uri,
        });
        let body = multipart(&data, n1);
        let sent = self
            .client
            .post(&url)
            .header(http::header::CONTENT_TYPE, content_type())
            .body(body)
            .max_rsp_time(self.timeout())
            .send()
            .await;
        match sent {
            Ok(r) if r.status() == StatusCode::OK || r.status() == StatusCode::ACCEPTED => {
                let cause = r
                    .json::<Value>()
                    .ok()
                    .and_then(|v| v.get("cause").and_then(Value::as_str).map(str::to_string))
                    .unwrap_or_default();
                Transfer::Accepted(cause)
            }
            Ok(r) => {
                let cause = r.problem().and_then(|p| {
                    let c = p.pointer("/error/cause").or_else(|| p.get("cause"))?;
                    c.as_str().map(str::to_string)
                });
                Transfer::Refused(format!("{} {}", r.status(), cause.unwrap_or_default()))
            }
            Err(e) => Transfer::Unreachable(e.to_string()),
        }
    }
}

/// The Content-Type of a transfer's body.
pub fn content_type() -> String {
    format!("multipart/related; boundary={BOUNDARY}; type=\"application/json\"")
}

/// A multipart/related body (RFC 2387, TS 29.500 §6.1): the JSON part first, then the N1
/// message as `application/vnd.3gpp.5gnas` with its Content-Id.
pub fn multipart(json: &Value, n1: &[u8]) -> Vec<u8> {
    let j = serde_json::to_vec(json).unwrap_or_default();
    let mut b = Vec::with_capacity(j.len() + n1.len() + 200);
    b.extend_from_slice(
        format!("--{BOUNDARY}\r\nContent-Type: application/json\r\n\r\n").as_bytes(),
    );
    b.extend_from_slice(&j);
    b.extend_from_slice(
        format!(
            "\r\n--{BOUNDARY}\r\nContent-Type: application/vnd.3gpp.5gnas\r\nContent-Id: {N1_CONTENT_ID}\r\n\r\n"
        )
        .as_bytes(),
    );
    b.extend_from_slice(n1);
    b.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    b
}

/// One part of a multipart body: its headers (names lower-cased) and its octets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part<'a> {
    pub headers: Vec<(String, String)>,
    pub body: &'a [u8],
}

impl Part<'_> {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    hay.get(from..)?.windows(needle.len()).position(|w| w == needle).map(|p| p + from)
}

/// The parts of a multipart body whose Content-Type is `content_type`.
pub fn parts<'a>(content_type: &str, body: &'a [u8]) -> Result<Vec<Part<'a>>, String> {
    let boundary = content_type
        .split(';')
        .filter_map(|p| p.trim().strip_prefix("boundary="))
        .next()
        .map(|b| b.trim_matches('"'))
        .ok_or("multipart without a boundary")?;
    let delim = format!("--{boundary}");
    let mut at = find(body, delim.as_bytes(), 0).ok_or("no first boundary")? + delim.len();
    let mut out = Vec::new();
    loop {
        if body[at..].starts_with(b"--") {
            return Ok(out);
        }
        let head_start = find(body, b"\r\n", at).ok_or("a part without headers")? + 2;
        let head_end =
            find(body, b"\r\n\r\n", head_start - 2).ok_or("unterminated part headers")?;
        let headers = String::from_utf8_lossy(&body[head_start..head_end])
            .split("\r\n")
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let start = head_end + 4;
        let close = format!("\r\n{delim}");
        let end =
            find(body, close.as_bytes(), start).ok_or("a part without its closing boundary")?;
        out.push(Part { headers, body: &body[start..end] });
        at = end + close.len();
    }
}

/// The JSON part and the binary N1 part (`application/vnd.3gpp.5gnas`) of a multipart body.
pub fn json_and_n1<'a>(
    content_type: &str,
    body: &'a [u8],
) -> Result<(Value, Option<&'a [u8]>), String> {
    let ps = parts(content_type, body)?;
    let json = ps
        .iter()
        .find(|p| p.header("content-type").is_some_and(|c| c.starts_with("application/json")))
        .ok_or("no JSON part")?;
    let v = serde_json::from_slice(json.body).map_err(|e| format!("the JSON part: {e}"))?;
    let n1 = ps
        .iter()
        .find(|p| {
            p.header("content-type").is_some_and(|c| c.starts_with("application/vnd.3gpp.5gnas"))
        })
        .map(|p| p.body);
    Ok((v, n1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_multipart_body_reads_back() {
        let n1 = [0x01, 0x01, 0x00, 0x00, b'\r', b'\n', b'-', b'-'];
        let b = multipart(&json!({"a": 1}), &n1);
        let (v, got) = json_and_n1(&content_type(), &b).unwrap();
        assert_eq!((v, got), (json!({"a": 1}), Some(&n1[..])));
        let ps = parts(&content_type(), &b).unwrap();
        assert_eq!(ps[1].header("content-id"), Some(N1_CONTENT_ID));
        assert!(parts("multipart/related", &b).is_err());
        assert!(parts(&content_type(), &b[..b.len() - 20]).is_err());
    }
}
