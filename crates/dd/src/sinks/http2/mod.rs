//! The HTTP/2 feed: one POST per batch (per `max_batch` envelopes) to an endpoint's URI, the body
//! the envelopes each framed as a u32 big-endian length and the envelope (the ingest API's own
//! format, content-type `application/vnd.fivecore.dd-copies.v1`), over the SBI client (`h2c`
//! with prior knowledge for `http://`, TLS with ALPN `h2` for `https://`, one pooled connection
//! per endpoint, each request bounded by `request_timeout_ms`).
//!
//! Delivery: `Ok` on a 2xx. A 429 or 503 (the consumer's `Retry-After`, seconds or an HTTP date,
//! keeps the endpoint out of rotation that long), any other 5xx, a 408 or 3xx, a timeout or a
//! connection failure fail the endpoint and the batch goes to the next one; when none is left
//! the batch is handed back to the feed's consumer, which retries it. Another 4xx is the
//! consumer refusing the batch for good: counted as rejected and not retried. What a consumer
//! answered 2xx to is its own to keep; an answer lost on the way (timeout, connection lost after
//! the request was sent) means the batch comes again.
//!
//! At most `max_in_flight` requests are in progress at once; a `deliver` beyond waits.

pub mod config;

use std::time::{Duration, Instant, SystemTime};

use bytes::{BufMut, Bytes, BytesMut};
use dd_client::envelope::CONTENT_TYPE;
use futures_util::future::BoxFuture;
use http::header::{CONTENT_TYPE as CONTENT_TYPE_HEADER, RETRY_AFTER};
use http::{HeaderValue, Request, StatusCode, Uri};
use sbi::client::{ClientError, SbiClient, SbiResponse};
use sbi::InvalidParam;
use tokio::sync::Semaphore;

pub use self::config::{Http2Endpoint, Http2SinkConfig};
use super::balance::Balancer;
use super::metrics::FeedMetrics;
use super::{EndpointHealth, FailureKind, Outcome, Sink, SinkError, Spread};

pub struct Http2Sink {
    spread: Spread,
    uris: Vec<Uri>,
    client: SbiClient,
    permits: Semaphore,
    max_batch: usize,
}

impl Http2Sink {
    pub(crate) fn new(
        feed: &str,
        cfg: &Http2SinkConfig,
        metrics: &FeedMetrics,
    ) -> Result<Self, Vec<InvalidParam>> {
        let mut uris = Vec::with_capacity(cfg.endpoints.len());
        for (i, e) in cfg.endpoints.iter().enumerate() {
            let uri = config::parse_uri(&e.uri)
                .map_err(|why| vec![InvalidParam::new(format!("/endpoints/{i}/uri"), why)])?;
            uris.push(uri);
        }
        let client = SbiClient::new(&cfg.client_config())
            .map_err(|e| vec![InvalidParam::new("/tls", e.to_string())])?;
        let names: Vec<String> = cfg.endpoints.iter().map(|e| e.uri.clone()).collect();
        let weights: Vec<u32> = cfg.endpoints.iter().map(|e| e.weight).collect();
        Ok(Http2Sink {
            spread: Spread {
                feed: feed.to_owned(),
                metrics: metrics.feed(feed, &names),
                endpoints: names,
                balancer: Balancer::new(
                    &weights,
                    cfg.balance,
                    Duration::from_millis(cfg.backoff_min_ms),
                    Duration::from_millis(cfg.backoff_max_ms),
                ),
            },
            uris,
            client,
            permits: Semaphore::new(cfg.max_in_flight),
            max_batch: cfg.max_batch,
        })
    }

    async fn deliver_all(&self, batch: &[Bytes]) -> Result<(), SinkError> {
        for chunk in batch.chunks(self.max_batch) {
            let reached = Instant::now();
            let _permit = self.permits.acquire().await.expect("the semaphore is never closed");
            // One body per request, built once and shared by the endpoints it is tried on.
            let len: usize = chunk.iter().map(|e| 4 + e.len()).sum();
            let mut body = BytesMut::with_capacity(len);
            for env in chunk {
                body.put_u32(env.len() as u32);
                body.put_slice(env);
            }
            let body = body.freeze();
            self.spread.deliver(chunk, reached, |i| self.attempt(i, body.clone())).await?;
        }
        Ok(())
    }

    async fn attempt(&self, i: usize, body: Bytes) -> Outcome {
        let bytes = body.len();
        let mut req = Request::new(body);
        *req.method_mut() = http::Method::POST;
        *req.uri_mut() = self.uris[i].clone();
        req.headers_mut().insert(CONTENT_TYPE_HEADER, HeaderValue::from_static(CONTENT_TYPE));
        match self.client.send(req).await {
            Ok(rsp) => answer(&rsp, bytes),
            Err(e) => {
                let kind = match &e {
                    ClientError::Timeout { .. } => FailureKind::Timeout,
                    ClientError::Connect { .. } => FailureKind::Connect,
                    _ => FailureKind::Io,
                };
                Outcome::failed(kind, ErrorChain(&e))
            }
        }
    }
}

/// What the consumer's answer means for the batch.
fn answer(rsp: &SbiResponse, bytes: usize) -> Outcome {
    let status = rsp.status();
    if status.is_success() {
        return Outcome::Delivered { bytes };
    }
    let detail = || {
        let body = String::from_utf8_lossy(&rsp.body()[..rsp.body().len().min(200)]).into_owned();
        if body.is_empty() {
            status.to_string()
        } else {
            format!("{status}: {body}")
        }
    };
    match status {
        StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => Outcome::Failed {
            kind: FailureKind::Overloaded,
            detail: detail(),
            retry_after: rsp
                .headers()
                .get(RETRY_AFTER)
                .and_then(|v| retry_after(v, SystemTime::now())),
        },
        StatusCode::REQUEST_TIMEOUT => Outcome::failed(FailureKind::Status, detail()),
        s if s.is_client_error() => Outcome::Rejected { detail: detail() },
        _ => Outcome::failed(FailureKind::Status, detail()),
    }
}

/// `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an HTTP-date, as a wait from `now`.
fn retry_after(v: &HeaderValue, now: SystemTime) -> Option<Duration> {
    let s = v.to_str().ok()?.trim();
    if let Ok(secs) = s.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = chrono::DateTime::parse_from_rfc2822(s).ok()?;
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(u64::try_from(at.timestamp()).ok()?);
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The error and its causes on one line (the SBI client's errors say where, their sources why).
struct ErrorChain<'a>(&'a ClientError);

impl std::fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = std::error::Error::source(self.0);
        while let Some(s) = source {
            write!(f, ": {s}")?;
            source = s.source();
        }
        Ok(())
    }
}

impl Sink for Http2Sink {
    fn deliver<'a>(&'a self, batch: &'a [Bytes]) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(self.deliver_all(batch))
    }

    fn health(&self) -> Vec<EndpointHealth> {
        self.spread.health(|_| None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_takes_seconds_or_a_date() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let v = |s: &'static str| HeaderValue::from_static(s);
        assert_eq!(retry_after(&v("3"), now), Some(Duration::from_secs(3)));
        assert_eq!(retry_after(&v(" 0 "), now), Some(Duration::ZERO));
        // 1_700_000_000 is Tue, 14 Nov 2023 22:13:20 GMT.
        assert_eq!(
            retry_after(&v("Tue, 14 Nov 2023 22:13:30 GMT"), now),
            Some(Duration::from_secs(10))
        );
        assert_eq!(retry_after(&v("Tue, 14 Nov 2023 22:13:00 GMT"), now), Some(Duration::ZERO));
        assert_eq!(retry_after(&v("soon"), now), None);
        assert_eq!(retry_after(&v("-5"), now), None);
    }
}
