//! N5g-eir_EquipmentIdentityCheck (TS 29.511 §5.2.2, TS29511_N5g-eir_EquipmentIdentityCheck.yaml):
//! `GET /n5g-eir-eic/v1/equipment-status?pei=imei-...&supi=...&gpsi=...`, answered
//! EirResponseData with the equipment's status from the lists in [`crate::eir`].
//!
//! The hot path: the query is checked, the IMEI's status is one read on a store reader thread
//! (a primary-key read, then at most one index seek on the ranges) and the answer is one of
//! three static bodies.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use http::{header, HeaderValue, StatusCode};
use nf::Answer;
use nrf_client::ProfileBuilder;
use sbi::problem::cause;
use sbi::{Body, InvalidParam, ProblemDetails, Response, SbiRequest};

use crate::context::Udr;
use crate::eir::{self, EirConfig, EquipmentStatus, Pei};

/// TS 29.511 §6.1.7.3: the PEI is not in any list (404).
pub const ERROR_EQUIPMENT_UNKNOWN: &str = "ERROR_EQUIPMENT_UNKNOWN";

/// The NF service name registered with the NRF (TS 29.510 ServiceName).
pub const SERVICE_NAME: &str = "n5g-eir-eic";

const PARAMS: [&str; 4] = ["pei", "supi", "gpsi", "supported-features"];

/// GET /equipment-status (N5g-eir_EquipmentIdentityCheck_Get).
pub async fn get_equipment_status(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let q = req.query();
    q.deny_unknown(&PARAMS)?;
    let pei = q.required("pei")?;
    let supi = q.get("supi")?;
    let gpsi = q.get("gpsi")?;
    let features = q.get("supported-features")?;
    let pei = eir::parse_pei(pei)
        .map_err(|why| query_error(cause::MANDATORY_QUERY_PARAM_INCORRECT, "pei", why))?;
    let mut bad = Vec::new();
    if supi.is_some_and(|s| !eir::check_supi(s)) {
        bad.push(InvalidParam::new("supi", "not a SUPI (imsi-<5..15 digits>, nai-, gci-, gli-)"));
    }
    if gpsi.is_some_and(|g| !eir::check_gpsi(g)) {
        bad.push(InvalidParam::new("gpsi", "not a GPSI (msisdn-<5..15 digits>, extid-x@y)"));
    }
    if features.is_some_and(|f| f.is_empty() || !f.bytes().all(|b| b.is_ascii_hexdigit())) {
        bad.push(InvalidParam::new("supported-features", "not a hexadecimal string"));
    }
    if !bad.is_empty() {
        return Err(
            ProblemDetails::invalid_params(cause::OPTIONAL_QUERY_PARAM_INCORRECT, bad).into()
        );
    }
    let found = match pei {
        Pei::Imei(imei) => udr.eir.lookup(imei).await?,
        // No list holds wireline MAC / EUI-64 PEIs: such equipment is unknown.
        Pei::Other => None,
    };
    let config = &udr.config.eir;
    let status = match found {
        Some(f) => f.answer(supi, gpsi, config.binding_mismatch),
        None => config.unknown_equipment.status().ok_or_else(|| {
            ProblemDetails::new(
                StatusCode::NOT_FOUND,
                ERROR_EQUIPMENT_UNKNOWN,
                "the equipment is in no list of this 5G-EIR",
            )
        })?,
    };
    Ok(status_response(status))
}

fn query_error(c: &str, param: &str, why: impl Into<String>) -> ProblemDetails {
    ProblemDetails::invalid_params(c, vec![InvalidParam::new(param, why)])
}

fn status_response(status: EquipmentStatus) -> Response {
    let mut resp: Response = http::Response::new(Body::from(status.response_json()));
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(sbi::body::JSON));
    resp
}

/// The NF profile of type 5G_EIR registered beside the UDR's own when `[udr.eir] register_nrf`
/// is set: AMFs discover a 5G-EIR by `target-nf-type=5G_EIR`, which a UDR profile cannot
/// answer, so the role gets its own nfInstanceId (configured, else generated at start) on the
/// same address and port, offering only n5g-eir-eic.
pub fn nrf_profile(config: &EirConfig, addr: SocketAddr, scheme: &str) -> serde_json::Value {
    let ip = match addr.ip() {
        IpAddr::V4(v4) if !v4.is_unspecified() => v4,
        _ => Ipv4Addr::LOCALHOST,
    };
    let id = config.nf_instance_id.clone().unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    ProfileBuilder::new("5G_EIR", &id)
        .ipv4(&ip.to_string())
        // TS29511_N5g-eir_EquipmentIdentityCheck.yaml, Rel-17.
        .versioned_service(SERVICE_NAME, scheme, addr.port(), &[("v1", "1.2.0")])
        .build()
}
