//! The AMF simulator (`SimKind::Amf`): what a PCF's URSP delivery needs of an AMF and of the
//! UE behind it (TS 29.518 Namf_Communication, TS 24.501 Annex D).
//!
//! - `POST .../ue-contexts/{supi}/n1-n2-messages/subscriptions` (N1N2MessageSubscribe): the
//!   `n1NotifyCallbackUri` is kept for the SUPI; 201 with the subscription's id;
//! - `DELETE .../subscriptions/{id}`: the callback is forgotten; 204;
//! - `POST .../ue-contexts/{supi}/n1-n2-messages` (N1N2MessageTransfer, multipart/related):
//!   200 N1_N2_TRANSFER_INITIATED; then the UE's MANAGE UE POLICY COMPLETE for the command's
//!   PTI is POSTed to the SUPI's callback (N1MessageNotify), counted in `sent` / `send_failed`;
//! - anything else: 204, as a sink (AM and UE policy UpdateNotify, terminate).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Method, StatusCode, Uri};
use sbi::client::{ClientConfig, SbiClient};

use crate::sim::{Reply, SimCounters};

const BOUNDARY: &str = "bench-amf-n1";

pub(crate) struct AmfState {
    /// The N1 notification callback of each subscribed SUPI.
    callbacks: Mutex<HashMap<String, String>>,
    next_id: AtomicU64,
    client: SbiClient,
}

impl AmfState {
    pub(crate) fn new() -> std::io::Result<Self> {
        let client = SbiClient::new(&ClientConfig::default()).map_err(std::io::Error::other)?;
        Ok(AmfState { callbacks: Mutex::new(HashMap::new()), next_id: AtomicU64::new(1), client })
    }

    fn callbacks(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.callbacks.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The PTI of the MANAGE UE POLICY COMMAND in a transfer's body: the first octet of the
/// `application/vnd.3gpp.5gnas` part.
fn pti(body: &[u8]) -> Option<u8> {
    let part = find(body, b"application/vnd.3gpp.5gnas")?;
    let start = part + find(&body[part..], b"\r\n\r\n")? + 4;
    body.get(start).copied()
}

fn json(status: StatusCode, body: String) -> Reply {
    Reply::of(status, Some(Bytes::from(body)))
}

pub(crate) fn receive(
    st: &Arc<AmfState>,
    counters: &Arc<SimCounters>,
    method: &Method,
    uri: &Uri,
    body: &[u8],
) -> Option<Reply> {
    let path = uri.path();
    let Some(at) = path.find("/namf-comm/v1/ue-contexts/") else {
        return Some(Reply::of(StatusCode::NO_CONTENT, None));
    };
    let rest = &path[at + "/namf-comm/v1/ue-contexts/".len()..];
    let segs: Vec<&str> = rest.split('/').collect();
    match (method, segs.as_slice()) {
        (&Method::POST, [supi, "n1-n2-messages", "subscriptions"]) => {
            let v: serde_json::Value = serde_json::from_slice(body).ok()?;
            let cb = v.get("n1NotifyCallbackUri")?.as_str()?.to_string();
            st.callbacks().insert((*supi).to_string(), cb);
            let id = st.next_id.fetch_add(1, Ordering::Relaxed);
            Some(json(StatusCode::CREATED, format!(r#"{{"n1n2NotifySubscriptionId":"{id}"}}"#)))
        }
        (&Method::DELETE, [supi, "n1-n2-messages", "subscriptions", _]) => {
            st.callbacks().remove(*supi);
            Some(Reply::of(StatusCode::NO_CONTENT, None))
        }
        (&Method::POST, [supi, "n1-n2-messages"]) => {
            let pti = pti(body)?;
            if let Some(cb) = st.callbacks().get(*supi).cloned() {
                let (st, counters) = (st.clone(), counters.clone());
                tokio::spawn(async move { complete(&st, &counters, &cb, pti).await });
            }
            Some(json(StatusCode::OK, r#"{"cause":"N1_N2_TRANSFER_INITIATED"}"#.into()))
        }
        _ => None,
    }
}

/// The UE's MANAGE UE POLICY COMPLETE (PTI, message type 0x02), in an N1MessageNotify.
async fn complete(st: &AmfState, counters: &SimCounters, callback: &str, pti: u8) {
    let mut body = format!(
        "--{BOUNDARY}\r\nContent-Type: application/json\r\n\r\n\
         {{\"n1MessageContainer\":{{\"n1MessageClass\":\"UPDP\",\"n1MessageContent\":{{\"contentId\":\"n1\"}}}}}}\r\n\
         --{BOUNDARY}\r\nContent-Type: application/vnd.3gpp.5gnas\r\nContent-Id: n1\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(&[pti, 0x02]);
    body.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    let ct = format!("multipart/related; boundary={BOUNDARY}; type=\"application/json\"");
    let sent =
        st.client.post(callback).header(http::header::CONTENT_TYPE, ct).body(body).send().await;
    let c = match sent {
        Ok(r) if r.status().is_success() => &counters.sent,
        _ => &counters.send_failed,
    };
    c.fetch_add(1, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pti_is_the_first_octet_of_the_n1_part() {
        let body = b"--b\r\nContent-Type: application/json\r\n\r\n{}\r\n--b\r\nContent-Type: application/vnd.3gpp.5gnas\r\nContent-Id: n1msg\r\n\r\n\x07\x01\x00\x00\r\n--b--\r\n";
        assert_eq!(pti(body), Some(7));
        assert_eq!(pti(b"{}"), None);
    }
}
