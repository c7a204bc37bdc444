//! Forwarding of discovery to a peer NRF (TS 29.510 §5.3.2.2.3) when nothing is found here.
//! Loop safety: the forwarded request carries a `Via` naming this NRF, and a request whose
//! `Via` already names an NRF is served locally only.

use http::{header, HeaderValue, StatusCode};

use crate::context::Nrf;
use sbi::{HandlerResult, SbiRequest};

/// The `Via` received-by of fivecore NRFs: `2.0 fivecore-nrf-<instance id>`.
const VIA_PREFIX: &str = "fivecore-nrf-";

/// Whether this discovery came through an NRF already (forwarded by a peer).
pub fn came_through_nrf(req: &SbiRequest) -> bool {
    req.headers().get_all(header::VIA).iter().any(|v| {
        v.to_str().unwrap_or("").split(',').any(|hop| {
            // `<protocol> <received-by>`; NRFs of other makers name themselves "...nrf...".
            hop.split_whitespace().nth(1).is_some_and(|by| by.to_ascii_lowercase().contains("nrf"))
        })
    })
}

pub fn applies(nrf: &Nrf, target: &str, req: &SbiRequest) -> bool {
    nrf.config.forwarding.nf_types.iter().any(|t| t == target) && !came_through_nrf(req)
}

/// Asks the peers, in order; `None` when none answered (the caller answers from here).
pub async fn forward(nrf: &Nrf, req: &SbiRequest) -> Option<HandlerResult> {
    let client = nrf.client.get()?;
    let me = nrf.instance_id.get().map_or("", String::as_str);
    let mut via = String::new();
    for v in req.headers().get_all(header::VIA) {
        via.push_str(v.to_str().unwrap_or(""));
        via.push_str(", ");
    }
    via.push_str(&format!("2.0 {VIA_PREFIX}{me}"));
    let path = req.head.uri.path_and_query().map_or("/nnrf-disc/v1/nf-instances", |p| p.as_str());
    let mut out = client.get(path).header(header::VIA, via).header("accept", "application/json");
    if let Some(rsp_time) = req.headers().get(&sbi::headers::MAX_RSP_TIME) {
        out = out.header(&sbi::headers::MAX_RSP_TIME, rsp_time.clone());
    }
    match out.send_with_alternates(&nrf.forwarding_peers).await {
        Ok(r) if r.status() == StatusCode::OK => {
            let mut resp = http::Response::new(sbi::Body::from(r.body().clone()));
            resp.headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(sbi::body::JSON));
            if let Some(cc) = r.headers().get(header::CACHE_CONTROL) {
                resp.headers_mut().insert(header::CACHE_CONTROL, cc.clone());
            }
            Some(Ok(resp))
        }
        Ok(r) => {
            tracing::warn!(status = %r.status(), "forwarded discovery refused by the peer NRF");
            None
        }
        Err(e) => {
            tracing::warn!(error = %e, "forwarded discovery: no peer NRF answered");
            None
        }
    }
}
