//! Message bodies: the response body type, media types, size limits and the JSON, merge-patch
//! (RFC 7396) and JSON-patch (RFC 6902) handling that TS 29.500 §5.4 asks of every SBI API.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{header, HeaderMap, Method, StatusCode, Version};
use http_body::{Frame, SizeHint};
use http_body_util::BodyExt;
use serde::de::DeserializeOwned;

use crate::problem::{cause, InvalidParam, ProblemDetails};

pub const JSON: &str = "application/json";
pub const PROBLEM_JSON: &str = "application/problem+json";
pub const MERGE_PATCH_JSON: &str = "application/merge-patch+json";
pub const JSON_PATCH_JSON: &str = "application/json-patch+json";

/// A response body: fully buffered, or streamed for the rare answer too large to hold (the Data
/// Director's xDR export). SBI messages are small JSON documents, so buffering costs nothing and
/// lets the message-copy tap and the metrics see the bytes without re-streaming.
#[derive(Debug, Default, Clone)]
pub struct Body(Repr);

#[derive(Debug, Default, Clone)]
enum Repr {
    #[default]
    Empty,
    Full(Bytes),
    Stream(Streamed),
}

/// The receiving end of a streamed body. Behind a lock only so that `Body` stays `Clone`: a
/// response is sent once, so clones of one streamed body are never polled side by side.
#[derive(Clone)]
struct Streamed(std::sync::Arc<std::sync::Mutex<tokio::sync::mpsc::Receiver<Bytes>>>);

impl std::fmt::Debug for Streamed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Streamed")
    }
}

impl Body {
    pub fn empty() -> Self {
        Body(Repr::Empty)
    }

    /// A body sent chunk by chunk as `chunks` yields them, ending when every sender is dropped.
    /// The channel's bound is the back-pressure: a producer waits while the peer does not read.
    pub fn stream(chunks: tokio::sync::mpsc::Receiver<Bytes>) -> Self {
        Body(Repr::Stream(Streamed(std::sync::Arc::new(std::sync::Mutex::new(chunks)))))
    }

    /// The bytes, without consuming the body (used by the message-copy tap); empty for a
    /// streamed body, whose bytes are never all in memory.
    pub fn bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Full(b) => b,
            Repr::Empty | Repr::Stream(_) => &[],
        }
    }
}

impl From<Bytes> for Body {
    fn from(b: Bytes) -> Self {
        Body(Repr::Full(b))
    }
}
impl From<Vec<u8>> for Body {
    fn from(v: Vec<u8>) -> Self {
        Body(Repr::Full(Bytes::from(v)))
    }
}
impl From<&'static str> for Body {
    fn from(s: &'static str) -> Self {
        Body(Repr::Full(Bytes::from_static(s.as_bytes())))
    }
}
impl From<String> for Body {
    fn from(s: String) -> Self {
        Body(Repr::Full(Bytes::from(s)))
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match &mut self.0 {
            Repr::Empty => Poll::Ready(None),
            Repr::Full(_) => match std::mem::take(&mut self.0) {
                Repr::Full(b) if !b.is_empty() => Poll::Ready(Some(Ok(Frame::data(b)))),
                _ => Poll::Ready(None),
            },
            Repr::Stream(s) => {
                let mut rx = s.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                loop {
                    match rx.poll_recv(cx) {
                        Poll::Ready(Some(b)) if b.is_empty() => continue,
                        Poll::Ready(Some(b)) => return Poll::Ready(Some(Ok(Frame::data(b)))),
                        Poll::Ready(None) => return Poll::Ready(None),
                        Poll::Pending => return Poll::Pending,
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.0 {
            Repr::Empty => true,
            Repr::Full(b) => b.is_empty(),
            Repr::Stream(_) => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.0 {
            Repr::Empty => SizeHint::with_exact(0),
            Repr::Full(b) => SizeHint::with_exact(b.len() as u64),
            Repr::Stream(_) => SizeHint::default(),
        }
    }
}

/// The checks on a request's framing that need no body byte: 411 for an HTTP/1.x request of a
/// method that carries a body but states neither Content-Length nor Transfer-Encoding (HTTP/2
/// frames its bodies, so it never needs the header), and 413 when Content-Length exceeds `limit`.
pub fn check_framing(
    method: &Method,
    version: Version,
    headers: &HeaderMap,
    limit: usize,
) -> Result<(), ProblemDetails> {
    let declared = match headers.get(header::CONTENT_LENGTH) {
        Some(v) => Some(v.to_str().ok().and_then(|s| s.parse::<u64>().ok()).ok_or_else(|| {
            ProblemDetails::new(
                StatusCode::LENGTH_REQUIRED,
                cause::INCORRECT_LENGTH,
                "Content-Length is not a number",
            )
        })?),
        None => None,
    };
    let carries_body = matches!(*method, Method::POST | Method::PUT | Method::PATCH);
    if carries_body
        && declared.is_none()
        && version < Version::HTTP_2
        && !headers.contains_key(header::TRANSFER_ENCODING)
    {
        return Err(ProblemDetails::new(
            StatusCode::LENGTH_REQUIRED,
            cause::INCORRECT_LENGTH,
            "Content-Length is required for a request body over HTTP/1.1",
        ));
    }
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large(limit));
    }
    Ok(())
}

/// Reads a request body whole after [`check_framing`], stopping at `limit` bytes (413) so a
/// body without Content-Length cannot make us buffer without bound.
pub async fn collect<B>(body: B, limit: usize) -> Result<Bytes, ProblemDetails>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let limited = http_body_util::Limited::new(body, limit);
    match limited.collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(too_large(limit)),
        Err(e) => Err(ProblemDetails::bad_request(
            cause::INVALID_MSG_FORMAT,
            format!("request body could not be read: {e}"),
        )),
    }
}

fn too_large(limit: usize) -> ProblemDetails {
    ProblemDetails::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        cause::PAYLOAD_TOO_LARGE,
        format!("request body exceeds {limit} bytes"),
    )
}

/// The media type of a request, without parameters, lower-cased comparison done by the caller.
pub fn media_type(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim())
}

/// 415 unless the request's media type is one of `allowed`.
pub fn require_media_type(headers: &HeaderMap, allowed: &[&str]) -> Result<(), ProblemDetails> {
    match media_type(headers) {
        Some(mt) if allowed.iter().any(|a| a.eq_ignore_ascii_case(mt)) => Ok(()),
        other => Err(ProblemDetails::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            cause::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "content type {} is not supported here; use {}",
                other.unwrap_or("(none)"),
                allowed.join(" or ")
            ),
        )),
    }
}

/// 406 unless the Accept header (absent means anything) admits a JSON answer.
pub fn check_accept(headers: &HeaderMap) -> Result<(), ProblemDetails> {
    let Some(accept) = headers.get(header::ACCEPT) else {
        return Ok(());
    };
    let accept = accept.to_str().unwrap_or("");
    let ok = accept.split(',').any(|range| {
        let mt = range.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
        matches!(
            mt.as_str(),
            "*/*" | "application/*" | JSON | PROBLEM_JSON | "application/3gppHal+json"
        ) || mt == "application/3gpphal+json"
    });
    if ok {
        Ok(())
    } else {
        Err(ProblemDetails::new(
            StatusCode::NOT_ACCEPTABLE,
            cause::NOT_ACCEPTABLE,
            format!("cannot answer in any of: {accept}"),
        ))
    }
}

/// Decodes a JSON body; a syntax or type error becomes a 400 whose `invalidParams` points at the
/// offending field (serde's path, as a JSON pointer) when it can be told.
pub fn decode_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ProblemDetails> {
    if bytes.is_empty() {
        return Err(ProblemDetails::bad_request(
            cause::MANDATORY_IE_MISSING,
            "the request body is empty",
        ));
    }
    // Most bodies decode: those go through serde_json alone. Tracking the path costs an
    // allocation per key, so only a body that failed is decoded again to name the field (the
    // same bytes fail at the same place).
    if let Ok(value) = serde_json::from_slice(bytes) {
        return Ok(value);
    }
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let mut pointer = json_pointer(e.path());
        let e = e.into_inner();
        // serde reports a missing field at its parent; name the field itself.
        let msg = e.to_string();
        if let Some(field) = msg.strip_prefix("missing field `").and_then(|r| r.split('`').next()) {
            if !pointer.ends_with('/') {
                pointer.push('/');
            }
            pointer.push_str(field);
        }
        if e.is_syntax() || e.is_eof() {
            ProblemDetails::bad_request(cause::INVALID_MSG_FORMAT, format!("malformed JSON: {e}"))
        } else {
            let c = if msg.starts_with("missing field") {
                cause::MANDATORY_IE_MISSING
            } else {
                cause::MANDATORY_IE_INCORRECT
            };
            ProblemDetails::invalid_params(c, vec![InvalidParam::new(pointer, msg)])
        }
    })
}

/// serde's path (`snssai.sst`, `list[2]`) as a JSON pointer (`/snssai/sst`, `/list/2`).
fn json_pointer(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for seg in path.iter() {
        match seg {
            Segment::Seq { index } => out.push_str(&format!("/{index}")),
            Segment::Map { key } => {
                out.push('/');
                out.push_str(&key.replace('~', "~0").replace('/', "~1"));
            }
            Segment::Enum { .. } | Segment::Unknown => {}
        }
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

/// Applies an RFC 7396 merge patch to `target`.
pub fn apply_merge_patch(
    target: &mut serde_json::Value,
    patch: &[u8],
) -> Result<(), ProblemDetails> {
    let patch: serde_json::Value = decode_json(patch)?;
    json_patch::merge(target, &patch);
    Ok(())
}

/// Applies an RFC 6902 JSON patch to `target` atomically: on any failing operation `target` is
/// left as it was and the answer names the operation that failed.
pub fn apply_json_patch(
    target: &mut serde_json::Value,
    patch: &[u8],
) -> Result<(), ProblemDetails> {
    let patch: json_patch::Patch = decode_json(patch)?;
    json_patch::patch(target, &patch).map_err(|e| {
        ProblemDetails::invalid_params(
            cause::MANDATORY_IE_INCORRECT,
            vec![InvalidParam::new(format!("/{}", e.operation), e.to_string())],
        )
        .with_status(StatusCode::CONFLICT)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Deserialize, Debug)]
    #[serde(rename_all = "camelCase")]
    #[allow(dead_code)]
    struct Binding {
        supi: String,
        snssai: Snssai,
    }
    #[derive(Deserialize, Debug)]
    #[allow(dead_code)]
    struct Snssai {
        sst: u8,
    }

    #[test]
    fn type_error_names_the_field() {
        let e = decode_json::<Binding>(br#"{"supi":"imsi-1","snssai":{"sst":"x"}}"#).unwrap_err();
        assert_eq!(e.status, Some(400));
        assert_eq!(e.invalid_params[0].param, "/snssai/sst");
        let e = decode_json::<Binding>(br#"{"snssai":{"sst":1}}"#).unwrap_err();
        assert_eq!(e.cause.as_deref(), Some(cause::MANDATORY_IE_MISSING));
        let e = decode_json::<Binding>(b"{").unwrap_err();
        assert_eq!(e.cause.as_deref(), Some(cause::INVALID_MSG_FORMAT));
    }

    #[test]
    fn json_patch_is_atomic() {
        let mut doc = json!({"nfStatus": "REGISTERED", "load": 10});
        let patch = br#"[{"op":"replace","path":"/load","value":50},
                         {"op":"test","path":"/nfStatus","value":"SUSPENDED"}]"#;
        let e = apply_json_patch(&mut doc, patch).unwrap_err();
        assert_eq!(e.status, Some(409));
        assert_eq!(doc["load"], 10, "failed patch must leave the document untouched");
        apply_json_patch(&mut doc, br#"[{"op":"replace","path":"/load","value":50}]"#).unwrap();
        assert_eq!(doc["load"], 50);
    }

    #[test]
    fn merge_patch_removes_nulls() {
        let mut doc = json!({"a": 1, "b": {"c": 2, "d": 3}});
        apply_merge_patch(&mut doc, br#"{"a":null,"b":{"c":5}}"#).unwrap();
        assert_eq!(doc, json!({"b": {"c": 5, "d": 3}}));
    }

    #[tokio::test]
    async fn a_streamed_body_yields_its_chunks_then_ends() {
        let (tx, rx) = tokio::sync::mpsc::channel(2);
        let body = Body::stream(rx);
        assert!(!http_body::Body::is_end_stream(&body));
        assert!(body.bytes().is_empty());
        tokio::spawn(async move {
            for chunk in ["a,b\r\n", "", "c,d\r\n"] {
                tx.send(Bytes::from_static(chunk.as_bytes())).await.unwrap();
            }
        });
        let all = body.collect().await.unwrap().to_bytes();
        assert_eq!(&all[..], b"a,b\r\nc,d\r\n");
    }

    #[test]
    fn accept_negotiation() {
        let mut h = HeaderMap::new();
        assert!(check_accept(&h).is_ok());
        h.insert(header::ACCEPT, "text/html".parse().unwrap());
        assert_eq!(check_accept(&h).unwrap_err().status, Some(406));
        h.insert(header::ACCEPT, "text/html, application/json;q=0.5".parse().unwrap());
        assert!(check_accept(&h).is_ok());
    }
}
