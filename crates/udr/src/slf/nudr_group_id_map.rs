//! Nudr_GroupIDmap (TS 29.504 §5.5, TS29504_Nudr_GroupIDmap.yaml): GetNfGroupIDs, the SLF
//! lookup, `GET /nudr-group-id-map/v1/nf-group-ids?nf-type=UDM,AUSF&subscriberId=imsi-...`.
//!
//! The answer holds the group of each requested NF type the subscriber has. A subscriber the
//! UDR does not know is 404 `USER_NOT_FOUND`; a known one with none of the requested types is
//! 404 `DATA_NOT_FOUND` (the result must have at least one entry).

use std::sync::Arc;

use http::{header, HeaderValue, StatusCode};
use nf::Answer;
use sbi::problem::cause;
use sbi::{Body, InvalidParam, ProblemDetails, Response, SbiRequest};

use crate::context::Udr;
use crate::slf;

/// Nudr application error causes (TS 29.504 §6.x.7).
pub const USER_NOT_FOUND: &str = "USER_NOT_FOUND";
pub const DATA_NOT_FOUND: &str = "DATA_NOT_FOUND";

const PARAMS: [&str; 2] = ["nf-type", "subscriberId"];

/// GET /nf-group-ids (GetNfGroupIDs).
pub async fn get_nf_group_ids(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    let q = req.query();
    q.deny_unknown(&PARAMS)?;
    let subscriber = q.required("subscriberId")?;
    let types = q.array("nf-type");
    let mut bad = Vec::new();
    if types.is_empty() {
        return Err(ProblemDetails::invalid_params(
            cause::MANDATORY_QUERY_PARAM_MISSING,
            vec![InvalidParam::new("nf-type", "mandatory query parameter is missing")],
        )
        .into());
    }
    if let Some(t) = types.iter().find(|t| !slf::is_nf_type(t)) {
        bad.push(InvalidParam::new("nf-type", format!("{t:?} is not an NF type")));
    }
    if let Err(slf::Invalid::SubscriberId(why)) = slf::check_subscriber_id(subscriber) {
        bad.push(InvalidParam::new("subscriberId", why));
    }
    if !bad.is_empty() {
        return Err(
            ProblemDetails::invalid_params(cause::MANDATORY_QUERY_PARAM_INCORRECT, bad).into()
        );
    }
    let groups = udr.slf.get(subscriber).await?.ok_or_else(|| {
        ProblemDetails::new(
            StatusCode::NOT_FOUND,
            USER_NOT_FOUND,
            format!("no subscriber {subscriber}"),
        )
    })?;
    let mut out = serde_json::Map::new();
    for t in types {
        if let Some(g) = groups.get(t) {
            out.insert(t.to_owned(), g.clone().into());
        }
    }
    if out.is_empty() {
        return Err(ProblemDetails::new(
            StatusCode::NOT_FOUND,
            DATA_NOT_FOUND,
            format!("{subscriber} has no group of the requested NF types"),
        )
        .into());
    }
    let json = serde_json::to_vec(&out)?;
    let mut resp: Response = http::Response::new(Body::from(json));
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(sbi::body::JSON));
    Ok(resp)
}
