//! Per-consumer, per-service rate limits (`[sbi.rate_limit]`): a token bucket for each
//! (consumer, service); a request beyond it is answered 429 with cause `NF_CONGESTION_RISK`
//! and `Retry-After` (TS 29.500 Table 5.2.7.2-1), before it takes an overload slot.
//!
//! Why per consumer: the overload guard protects the NF as a whole, so one consumer flooding it
//! makes every consumer's requests shed alike; a limit per consumer sheds the flood and serves
//! the others. The consumer is the verified access token's `sub` (its NF instance id) when
//! tokens are required, else the NF instance its TLS client certificate names, else the peer's
//! IP address (a User-Agent is the consumer's own claim).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Ready;
use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use http::{header, HeaderValue, Request, StatusCode};
use rustc_hash::{FxHashMap, FxHasher};
use serde::Deserialize;
use tower::{Layer, Service};

use super::oauth2::VerifiedToken;
use super::tap::PeerAddr;
use super::Either;
use crate::problem::ProblemDetails;
use crate::router::Response;
use crate::tls::PeerCertificate;

/// `[sbi.rate_limit]`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RateLimitConfig {
    /// Off by default.
    pub enabled: bool,
    /// Requests per second one consumer may send to one service; 0: no limit.
    pub per_consumer_rps: f64,
    /// Requests a consumer may send at once above the rate (the bucket's size). Unset: one
    /// second's worth.
    pub burst: Option<f64>,
    /// Per service (the path's first segment): its own rate and burst for each consumer.
    pub services: BTreeMap<String, ServiceLimit>,
    /// Buckets kept (consumer × service); beyond it, full (idle) buckets are dropped first.
    pub max_buckets: usize,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ServiceLimit {
    pub rps: f64,
    #[serde(default)]
    pub burst: Option<f64>,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        RateLimitConfig {
            enabled: false,
            per_consumer_rps: 0.0,
            burst: None,
            services: BTreeMap::new(),
            max_buckets: 100_000,
        }
    }
}

impl RateLimitConfig {
    pub fn validate(&self) -> Result<(), String> {
        let ok = |v: f64| v.is_finite() && v >= 0.0;
        if !ok(self.per_consumer_rps) || self.burst.is_some_and(|b| !ok(b)) {
            return Err("sbi.rate_limit: rates and bursts must be finite and >= 0".into());
        }
        for (name, l) in &self.services {
            if !ok(l.rps) || l.burst.is_some_and(|b| !ok(b)) {
                return Err(format!("sbi.rate_limit.services.{name}: rps/burst must be >= 0"));
            }
        }
        if self.max_buckets == 0 {
            return Err("sbi.rate_limit: max_buckets must be at least 1".into());
        }
        Ok(())
    }

    /// (rate, burst) for `service`; None: unlimited.
    fn limit(&self, service: &str) -> Option<(f64, f64)> {
        let (rps, burst) = match self.services.get(service) {
            Some(l) => (l.rps, l.burst),
            None => (self.per_consumer_rps, self.burst),
        };
        (rps > 0.0).then(|| (rps, burst.unwrap_or(rps).max(1.0)))
    }
}

const SHARDS: usize = 16;

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// The buckets, sharded by key hash so concurrent requests rarely meet on one lock.
struct Limiter {
    config: RateLimitConfig,
    shards: Vec<Mutex<FxHashMap<u64, Bucket>>>,
    limited: AtomicU64,
    started: Instant,
}

impl Limiter {
    /// None: served; Some(seconds): refused, retry after that many seconds.
    fn admit(&self, consumer: &Consumer, service: &str, now: Instant) -> Option<u64> {
        let (rate, burst) = self.config.limit(service)?;
        let mut h = FxHasher::default();
        consumer.hash(&mut h);
        service.hash(&mut h);
        let key = h.finish();
        let mut shard =
            self.shards[(key as usize) % SHARDS].lock().unwrap_or_else(|p| p.into_inner());
        let per_shard = self.config.max_buckets.div_ceil(SHARDS);
        if shard.len() >= per_shard && !shard.contains_key(&key) {
            // A full bucket is what a new one would be: dropping it changes no answer.
            shard.retain(|_, b| b.tokens + now.duration_since(b.at).as_secs_f64() * rate < burst);
            if shard.len() >= per_shard {
                // Every kept consumer is busy: the oldest state goes (bounded memory first).
                shard.clear();
            }
        }
        let b = shard.entry(key).or_insert(Bucket { tokens: burst, at: now });
        b.tokens = (b.tokens + now.duration_since(b.at).as_secs_f64() * rate).min(burst);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            return None;
        }
        self.limited.fetch_add(1, Ordering::Relaxed);
        Some(((1.0 - b.tokens) / rate).ceil().max(1.0) as u64)
    }
}

#[derive(Hash)]
enum Consumer<'a> {
    Instance(&'a str),
    Address(IpAddr),
    Unknown,
}

#[derive(Clone)]
pub struct RateLimitLayer {
    limiter: Option<Arc<Limiter>>,
}

impl RateLimitLayer {
    pub fn new(config: &RateLimitConfig) -> Self {
        let limiter = config.enabled.then(|| {
            Arc::new(Limiter {
                config: config.clone(),
                shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
                limited: AtomicU64::new(0),
                started: Instant::now(),
            })
        });
        RateLimitLayer { limiter }
    }

    /// `sbi_rate_limited_total`: requests refused with 429.
    pub fn register(&self, obs: &crate::observe::Observability) {
        if let Some(l) = &self.limiter {
            let l = l.clone();
            obs.with_registry(|r| r.register_collector(Box::new(LimitedCollector(l))));
        }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimitService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        RateLimitService { inner, limiter: self.limiter.clone() }
    }
}

#[derive(Clone)]
pub struct RateLimitService<S> {
    inner: S,
    limiter: Option<Arc<Limiter>>,
}

impl<S, B> Service<Request<B>> for RateLimitService<S>
where
    S: Service<Request<B>, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<S::Future, Ready<Result<Response, Infallible>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let Some(limiter) = &self.limiter else {
            return Either::Left { inner: self.inner.call(req) };
        };
        let path = req.uri().path();
        let service = path.trim_start_matches('/').split('/').next().unwrap_or("");
        let token = req.extensions().get::<VerifiedToken>();
        let cert = req.extensions().get::<Arc<PeerCertificate>>();
        let consumer = match (
            token.and_then(|t| t.0.sub.as_deref()),
            cert.and_then(|c| c.instance_ids.first()),
            req.extensions().get::<PeerAddr>(),
        ) {
            (Some(sub), _, _) => Consumer::Instance(sub),
            (None, Some(id), _) => Consumer::Instance(id),
            (None, None, Some(peer)) => Consumer::Address(peer.0.ip()),
            (None, None, None) => Consumer::Unknown,
        };
        match limiter.admit(&consumer, service, Instant::now()) {
            None => Either::Left { inner: self.inner.call(req) },
            Some(retry_after) => {
                let mut resp = ProblemDetails::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "NF_CONGESTION_RISK",
                    format!("more requests to {service} than this consumer is allowed"),
                )
                .with_instance(path)
                .into_response();
                resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
                Either::Right { inner: std::future::ready(Ok(resp)) }
            }
        }
    }
}

#[derive(Debug)]
struct LimitedCollector(Arc<Limiter>);

impl std::fmt::Debug for Limiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limiter").field("since", &self.started).finish_non_exhaustive()
    }
}

impl prometheus_client::collector::Collector for LimitedCollector {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::counter::ConstCounter;
        let c = ConstCounter::new(self.0.limited.load(Ordering::Relaxed));
        let m = encoder.encode_descriptor(
            "sbi_rate_limited",
            "Requests refused with 429 by the per-consumer rate limit",
            None,
            c.metric_type(),
        )?;
        c.encode(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn limiter(rps: f64, burst: Option<f64>, max_buckets: usize) -> Limiter {
        let mut services = BTreeMap::new();
        services.insert("nnrf-disc".to_owned(), ServiceLimit { rps: 1000.0, burst: None });
        Limiter {
            config: RateLimitConfig {
                enabled: true,
                per_consumer_rps: rps,
                burst,
                services,
                max_buckets,
            },
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            limited: AtomicU64::new(0),
            started: Instant::now(),
        }
    }

    #[test]
    fn a_consumer_gets_its_burst_then_its_rate_and_others_are_not_affected() {
        let l = limiter(10.0, Some(5.0), 1000);
        let t0 = Instant::now();
        let a = Consumer::Instance("a");
        for _ in 0..5 {
            assert_eq!(l.admit(&a, "nbsf-management", t0), None);
        }
        assert_eq!(l.admit(&a, "nbsf-management", t0), Some(1));
        // Another consumer, and the same consumer on another service, have their own buckets.
        assert_eq!(l.admit(&Consumer::Instance("b"), "nbsf-management", t0), None);
        assert_eq!(l.admit(&a, "nnrf-disc", t0), None);
        // 100 ms later one more request's worth has come back.
        let t1 = t0 + Duration::from_millis(100);
        assert_eq!(l.admit(&a, "nbsf-management", t1), None);
        assert!(l.admit(&a, "nbsf-management", t1).is_some());
        assert_eq!(l.limited.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn zero_means_no_limit_and_memory_stays_bounded() {
        let l = limiter(0.0, None, 1000);
        let t0 = Instant::now();
        for _ in 0..10_000 {
            assert_eq!(l.admit(&Consumer::Unknown, "nbsf-management", t0), None);
        }
        let l = limiter(1.0, None, 64);
        for i in 0..10_000u32 {
            let ip = IpAddr::from(i.to_be_bytes());
            l.admit(&Consumer::Address(ip), "nbsf-management", t0);
        }
        let kept: usize = l.shards.iter().map(|s| s.lock().unwrap().len()).sum();
        assert!(kept <= 64 + SHARDS, "{kept} buckets kept");
    }

    #[test]
    fn bad_rates_are_refused() {
        let c = RateLimitConfig { per_consumer_rps: f64::NAN, ..Default::default() };
        assert!(c.validate().is_err());
        let c = RateLimitConfig { per_consumer_rps: -1.0, ..Default::default() };
        assert!(c.validate().is_err());
        assert!(RateLimitConfig::default().validate().is_ok());
    }
}
