//! The ingest API: `POST /dd-ingest/v1/copies`, a body of u32-length-framed copy envelopes
//! (`application/vnd.fivecore.dd-copies.v1`, see `dd_client::envelope`), from fivecore's NFs and
//! from third-party NFs alike.
//!
//! A batch is checked whole before anything is kept: one bad frame and the answer is 400 naming
//! it (`copies[7]`), nothing appended, so a copier that resends never duplicates half a batch.
//! A good batch is split by the copies' NF types into the NF topics and answered 204 only once
//! every part is durable there: what was acknowledged survives a kill. Past
//! `max_pending_bytes` of appends in progress the answer is 503 + Retry-After before the body is
//! looked at: the copier keeps its batch, the Data Director's memory stays bounded.

pub mod config;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use dd_client::envelope::{self, Copy, Frames};
use http::{header, HeaderValue, StatusCode};
use sbi::problem::cause;
use sbi::{body, empty_response, InvalidParam, ProblemDetails, Response, SbiRequest};

pub use config::IngestConfig;

use crate::context::Dd;
use crate::topics::{nf_topic, NF_TOPICS};

/// The operation name of the route (metrics, copies of the Data Director's own traffic).
pub const OPERATION: &str = "DD_Ingest_Copies";
pub const PATH: &str = "/dd-ingest/v1/copies";

/// Releases the pending bytes of an append however it ends (an error, a dropped request).
struct Pending<'a> {
    dd: &'a Dd,
    bytes: usize,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        self.dd.ingest_pending.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

pub async fn copies(dd: Arc<Dd>, req: SbiRequest) -> Result<Response, ProblemDetails> {
    body::require_media_type(req.headers(), &[envelope::CONTENT_TYPE])?;
    let size = req.body.len();
    let limit = dd.config.ingest.max_pending_bytes;
    let before = dd.ingest_pending.fetch_add(size, Ordering::Relaxed);
    let _pending = Pending { dd: &dd, bytes: size };
    if before + size > limit {
        dd.metrics.ingest_refused(size);
        let mut p = ProblemDetails::new(
            StatusCode::SERVICE_UNAVAILABLE,
            cause::NF_CONGESTION,
            "the Data Director's ingest queue is full; send the batch again later",
        )
        .into_response();
        let after = HeaderValue::from(dd.config.ingest.retry_after_s);
        p.headers_mut().insert(header::RETRY_AFTER, after);
        return Ok(p);
    }
    let parts = split(&req.body)?;
    if let Some(kafka) = &dd.kafka {
        return into_kafka(&dd, kafka, parts, size).await;
    }
    let mut appends = Vec::with_capacity(parts.len());
    let mut copies = 0usize;
    for (i, records) in parts.into_iter().enumerate() {
        if records.is_empty() {
            continue;
        }
        copies += records.len();
        let topic = dd.nf_topic(i).map_err(|e| {
            ProblemDetails::internal(format!("the {} topic cannot be opened: {e}", NF_TOPICS[i]))
        })?;
        appends.push(async move { (i, records.len(), topic.append(records).await) });
    }
    for (i, n, result) in futures_util::future::join_all(appends).await {
        if let Err(e) = result {
            tracing::error!(topic = NF_TOPICS[i], error = %e, "ingest append failed");
            return Err(ProblemDetails::internal(format!(
                "the {} topic refused the batch: {e}",
                NF_TOPICS[i]
            )));
        }
        dd.metrics.ingested(i, n);
    }
    dd.metrics.ingest_bytes(size, copies);
    Ok(empty_response(StatusCode::NO_CONTENT))
}

/// Appends copies already checked (the Kafka source's) to their NF topics, as the ingest API
/// does its batches: Ok once all are durable (or acknowledged by the cluster in the Kafka mode).
pub async fn append_copies(dd: &Dd, copies: &[Copy]) -> Result<(), String> {
    let mut parts: Vec<Vec<Bytes>> = vec![Vec::new(); NF_TOPICS.len()];
    for c in copies {
        let topic = nf_topic(c.nf_type());
        let at = NF_TOPICS.iter().position(|t| *t == topic).unwrap_or(NF_TOPICS.len() - 1);
        parts[at].push(c.record().clone());
    }
    for (i, records) in parts.into_iter().enumerate().filter(|(_, r)| !r.is_empty()) {
        let n = records.len();
        match &dd.kafka {
            Some(k) => k.append_nf(i, &records).await.map_err(|e| e.to_string())?,
            None => {
                let topic = dd.nf_topic(i).map_err(|e| e.to_string())?;
                topic.append(records).await.map_err(|e| e.to_string())?;
            }
        }
        dd.metrics.ingested(i, n);
    }
    Ok(())
}

/// The Kafka mode: each part to its NF topic on the cluster, 204 once all are acknowledged; a
/// cluster away is 503 + Retry-After (the copier keeps the batch and sends it again).
async fn into_kafka(
    dd: &Dd,
    kafka: &crate::kafka_pipeline::KafkaPipeline,
    parts: Vec<Vec<Bytes>>,
    size: usize,
) -> Result<Response, ProblemDetails> {
    let mut copies = 0;
    let appends = parts.iter().enumerate().filter(|(_, r)| !r.is_empty()).map(|(i, r)| {
        copies += r.len();
        async move { (i, r.len(), kafka.append_nf(i, r).await) }
    });
    let results = futures_util::future::join_all(appends).await;
    for (i, n, result) in results {
        if let Err(e) = result {
            tracing::warn!(topic = NF_TOPICS[i], error = %e, "ingest append to Kafka failed");
            let mut p = ProblemDetails::new(
                StatusCode::SERVICE_UNAVAILABLE,
                cause::NF_SERVICE_FAILOVER,
                format!(
                    "the {} topic on the Kafka cluster did not take the batch: {e}",
                    NF_TOPICS[i]
                ),
            )
            .into_response();
            p.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(dd.config.ingest.retry_after_s));
            return Ok(p);
        }
        dd.metrics.ingested(i, n);
    }
    dd.metrics.ingest_bytes(size, copies);
    Ok(empty_response(StatusCode::NO_CONTENT))
}

/// The batch's copies by NF topic (index into [`NF_TOPICS`]), or the 400 naming the first bad
/// frame.
fn split(body: &Bytes) -> Result<Vec<Vec<Bytes>>, ProblemDetails> {
    if body.is_empty() {
        return Err(ProblemDetails::invalid_params(
            cause::MANDATORY_IE_MISSING,
            vec![InvalidParam::new("copies", "the body holds no copy")],
        ));
    }
    let mut parts: Vec<Vec<Bytes>> = vec![Vec::new(); NF_TOPICS.len()];
    for (i, frame) in Frames::new(body.clone()).enumerate() {
        let bad = |reason: String| {
            ProblemDetails::invalid_params(
                cause::INVALID_MSG_FORMAT,
                vec![InvalidParam::new(format!("copies[{i}]"), reason)],
            )
        };
        let record = frame.map_err(|e| bad(format!("the frame is cut short: {e}")))?;
        let copy = Copy::decode(record.clone()).map_err(|e| bad(e.to_string()))?;
        let topic = nf_topic(copy.nf_type());
        let at = NF_TOPICS.iter().position(|t| *t == topic).unwrap_or(NF_TOPICS.len() - 1);
        parts[at].push(record);
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use dd_client::envelope::{encode_framed, CopyMeta, Protocol, TriggerPoint};

    fn framed(nf_type: &str, out: &mut BytesMut) {
        let meta = CopyMeta {
            trigger: TriggerPoint::IngressRequest,
            protocol: Protocol::Http2,
            timestamp_ns: 1,
            sequence: 1,
            transaction: 1,
            stream_id: 1,
            status: 0,
            nf_type,
            nf_instance: "i",
            service: "s",
            operation: "o",
            method: "POST",
            path: "/",
            peer: "",
            supi: "",
            gpsi: "",
            session_id: "",
        };
        encode_framed(&meta, [], b"{}", out).unwrap();
    }

    #[test]
    fn a_batch_splits_by_nf_type_keeping_order() {
        let mut b = BytesMut::new();
        for t in ["PCF", "BSF", "PCF", "NWDAF"] {
            framed(t, &mut b);
        }
        let parts = split(&b.freeze()).unwrap();
        let idx = |t: &str| NF_TOPICS.iter().position(|x| *x == t).unwrap();
        assert_eq!(parts[idx("pcf")].len(), 2);
        assert_eq!(parts[idx("bsf")].len(), 1);
        assert_eq!(parts[idx("other")].len(), 1);
    }

    #[test]
    fn a_bad_frame_is_named_and_nothing_is_kept() {
        let mut b = BytesMut::new();
        framed("PCF", &mut b);
        framed("PCF", &mut b);
        b[4] = 9; // the first envelope's version byte, right after its frame length
        let p = split(&b.clone().freeze()).unwrap_err();
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(json["invalidParams"][0]["param"], "copies[0]");
        let mut c = BytesMut::new();
        framed("PCF", &mut c);
        c.extend_from_slice(&[0, 0, 0, 50, 1, 2]);
        let p = split(&c.freeze()).unwrap_err();
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(json["invalidParams"][0]["param"], "copies[1]");
        assert_eq!(json["status"], 400);
    }
}
