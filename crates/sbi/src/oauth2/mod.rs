//! Access tokens checked at a producer (TS 33.501 §13.4.1.1, TS 29.500 §6.7.3, RFC 6750).
//!
//! The NRF issues ES256-signed JWTs (Nnrf_AccessToken, TS 29.510 §5.4) and publishes its
//! verifying keys as a JWK set. A producer with `[sbi.oauth2] required = true` answers a request
//! for one of its services only when it carries `Authorization: Bearer <token>` whose signature
//! verifies against a known key, whose `exp` has not passed, whose `aud` names this NF instance
//! or its NF type, and whose `scope` lists the service (or a resource of it, `service:resource`).
//! Otherwise: 401 with `WWW-Authenticate: Bearer error="invalid_token"` (missing, malformed,
//! expired, bad signature, another audience) or 403 with `error="insufficient_scope"`, each with
//! a ProblemDetails body ([`layer`](crate::layer::oauth2)).
//!
//! Why a cache: an ECDSA P-256 verification costs tens of microseconds, and a consumer reuses
//! one token for its whole lifetime (an hour by default at our NRF). A verified token's claims
//! are kept, keyed by the token's bytes, until it expires or the key set changes, so a request
//! with a known token costs a hash lookup.
//!
//! Keys come from a JWK set file and/or the NRF's `GET /oauth2/jwks`, read at start and again
//! every `refresh_secs` (a file only when it changed); a token signed with a key id not yet
//! known triggers an early refresh (at most one per `min_refresh_interval_ms`), so a rotated NRF
//! key is accepted without restarting the producer. A key removed from the set empties the
//! cache: tokens it signed are refused from then on.

mod claims;
mod keys;
mod source;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Deserialize;

pub use claims::{Claims, TokenError};
pub use keys::{JwkSet, KeySetError};
pub use source::{nf_type_of_service, TokenFuture, TokenSource};

use crate::client::SbiClient;
use claims::Cache;
use keys::KeyRing;

/// `[sbi.oauth2]`: whether this producer requires access tokens, and where its keys come from.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct OAuth2Config {
    /// Refuse requests without a valid token. Off by default.
    pub required: bool,
    /// The NRF's JWK set, e.g. `http://127.0.0.1:7000/oauth2/jwks`.
    pub jwks_url: Option<String>,
    /// A JWK set file (`{"keys": [...]}`), for keys handed out of band.
    pub jwks_file: Option<PathBuf>,
    /// Seconds between reads of the key sources. Default 300.
    pub refresh_secs: u64,
    /// Least time between two refreshes caused by unknown key ids, milliseconds. Default 5000.
    pub min_refresh_interval_ms: u64,
    /// Clock skew allowed on `exp` (and `nbf` when present), seconds. Default 30.
    pub leeway_secs: u64,
    /// When set, a token's `iss` must equal it (the NRF's instance id).
    pub issuer: Option<String>,
    /// Services (first path segment) answered without a token. The NRF's token endpoint and
    /// its NF management service are in the default: an NF registers before it may ask for a
    /// token, and a token is what it asks the token endpoint for.
    pub exempt_services: Vec<String>,
    /// Verified tokens kept. Default 65536.
    pub cache_entries: usize,
    /// On a mutual-TLS connection whose client certificate names NF instances (`urn:uuid:` in
    /// its subjectAltName), the token's `sub` must be one of them (TS 33.501 §13.3.1.2: the
    /// producer checks that the token was issued to the consumer it authenticated). Default true.
    pub bind_to_client_certificate: bool,
}

impl Default for OAuth2Config {
    fn default() -> Self {
        OAuth2Config {
            required: false,
            jwks_url: None,
            jwks_file: None,
            refresh_secs: 300,
            min_refresh_interval_ms: 5000,
            leeway_secs: 30,
            issuer: None,
            exempt_services: vec!["oauth2".into(), "nnrf-nfm".into()],
            cache_entries: 65_536,
            bind_to_client_certificate: true,
        }
    }
}

impl OAuth2Config {
    pub fn validate(&self) -> Result<(), String> {
        if self.required && self.jwks_url.is_none() && self.jwks_file.is_none() {
            return Err("sbi.oauth2: required = true needs jwks_url or jwks_file".into());
        }
        if self.refresh_secs == 0 {
            return Err("sbi.oauth2: refresh_secs must be at least 1".into());
        }
        if self.cache_entries == 0 {
            return Err("sbi.oauth2: cache_entries must be at least 1".into());
        }
        Ok(())
    }
}

/// Why a request was refused, mapped to 401 or 403 by the layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// 401, `error="invalid_token"` (or no error attribute when no token was sent).
    Unauthorized { missing: bool, detail: String },
    /// 403, `error="insufficient_scope"`.
    InsufficientScope { scope: String },
}

/// Checks access tokens for one producer. Cheap to clone.
#[derive(Clone)]
pub struct Verifier {
    inner: Arc<Inner>,
}

struct Inner {
    config: OAuth2Config,
    nf_type: String,
    instance_id: String,
    keys: KeyRing,
    cache: Cache,
    client: Option<SbiClient>,
    refresh: tokio::sync::Mutex<Option<Instant>>,
}

impl Verifier {
    /// A verifier for the NF `nf_type` / `instance_id`. Reads the key sources once; a source
    /// that cannot be read yet (the NRF not up) is read again by [`Verifier::run_refresh`].
    pub async fn new(
        config: OAuth2Config,
        nf_type: &str,
        instance_id: &str,
    ) -> Result<Verifier, String> {
        config.validate()?;
        let client = match &config.jwks_url {
            Some(_) => Some(
                SbiClient::new(&crate::client::ClientConfig::default())
                    .map_err(|e| format!("sbi.oauth2: {e}"))?,
            ),
            None => None,
        };
        let v = Verifier {
            inner: Arc::new(Inner {
                cache: Cache::new(config.cache_entries),
                config,
                nf_type: nf_type.to_owned(),
                instance_id: instance_id.to_ascii_lowercase(),
                keys: KeyRing::default(),
                client,
                refresh: tokio::sync::Mutex::new(None),
            }),
        };
        // A file is read now. An URL is read by the refresh task once serving has begun: the
        // NRF reads its own keys from its own port, which answers only then.
        if v.inner.config.jwks_url.is_none() {
            if let Err(e) = v.refresh_now().await {
                tracing::warn!(error = %e, "sbi.oauth2: access-token keys not loaded yet");
            }
        }
        Ok(v)
    }

    pub fn config(&self) -> &OAuth2Config {
        &self.inner.config
    }

    /// Whether `service` (a path's first segment) is answered without a token.
    pub fn exempt(&self, service: &str) -> bool {
        !self.inner.config.required
            || self.inner.config.exempt_services.iter().any(|s| s == service)
    }

    /// The key ids known now.
    pub fn key_ids(&self) -> Vec<String> {
        self.inner.keys.ids()
    }

    /// Checks the `Authorization` header's value for a request to `service`: the token's
    /// claims when it is served. `Ok(None)` means the token is signed with a key id not known
    /// yet: refresh the keys, then call again.
    pub fn check(
        &self,
        authorization: Option<&[u8]>,
        service: &str,
    ) -> Result<Option<Arc<Claims>>, Refusal> {
        let Some(value) = authorization else {
            return Err(Refusal::Unauthorized {
                missing: true,
                detail: "no access token (Authorization: Bearer) in the request".into(),
            });
        };
        let token = bearer(value).ok_or_else(|| Refusal::Unauthorized {
            missing: false,
            detail: "the Authorization header is not a Bearer token".into(),
        })?;
        let now = unix_now();
        let inner = &self.inner;
        // Read before verifying: an entry verified while the keys change is stored under the
        // older generation and not used.
        let generation = inner.keys.generation();
        let claims = match inner.cache.get(token, generation) {
            Some(c) => c,
            None => {
                let claims = match claims::verify(token, &inner.keys) {
                    Ok(c) => c,
                    Err(TokenError::UnknownKey) => return Ok(None),
                    Err(e) => {
                        return Err(Refusal::Unauthorized { missing: false, detail: e.to_string() })
                    }
                };
                let claims = Arc::new(claims);
                self.check_claims(&claims, now)?;
                inner.cache.insert(token, claims.clone(), generation, now);
                claims
            }
        };
        if claims.exp + inner.config.leeway_secs < now {
            return Err(Refusal::Unauthorized {
                missing: false,
                detail: "the access token has expired".into(),
            });
        }
        if !claims.allows(service) {
            return Err(Refusal::InsufficientScope { scope: service.to_owned() });
        }
        Ok(Some(claims))
    }

    /// What does not change for a token: its audience, issuer, start of validity (its expiry is
    /// checked at every use, cached or not).
    fn check_claims(&self, c: &Claims, now: u64) -> Result<(), Refusal> {
        let inner = &self.inner;
        let refuse = |detail: String| Err(Refusal::Unauthorized { missing: false, detail });
        if c.nbf.is_some_and(|nbf| nbf > now + inner.config.leeway_secs) {
            return refuse("the access token is not valid yet".into());
        }
        if !c.audience_includes(&inner.nf_type, &inner.instance_id) {
            return refuse(format!(
                "the access token is for another audience, not this {} ({})",
                inner.nf_type, inner.instance_id
            ));
        }
        if let Some(iss) = &inner.config.issuer {
            if c.iss.as_deref() != Some(iss.as_str()) {
                return refuse("the access token was issued by another NRF".into());
            }
        }
        Ok(())
    }

    /// A refresh caused by an unknown key id: at most one per `min_refresh_interval_ms`;
    /// concurrent callers wait for the one in progress.
    pub async fn refresh_for_unknown_key(&self) {
        let mut last = self.inner.refresh.lock().await;
        let gap = Duration::from_millis(self.inner.config.min_refresh_interval_ms);
        if last.is_some_and(|t| t.elapsed() < gap) {
            return;
        }
        *last = Some(Instant::now());
        drop(last);
        if let Err(e) = self.refresh_now().await {
            tracing::warn!(error = %e, "sbi.oauth2: key refresh failed");
        }
    }

    /// Reads every key source now and installs the union of their keys.
    pub async fn refresh_now(&self) -> Result<(), String> {
        let inner = &self.inner;
        let mut set = JwkSet::default();
        let mut errors = Vec::new();
        if let Some(path) = &inner.config.jwks_file {
            match tokio::fs::read(path).await {
                Ok(bytes) => match JwkSet::parse(&bytes) {
                    Ok(s) => set.extend(s),
                    Err(e) => errors.push(format!("{}: {e}", path.display())),
                },
                Err(e) => errors.push(format!("{}: {e}", path.display())),
            }
        }
        if let (Some(url), Some(client)) = (&inner.config.jwks_url, &inner.client) {
            match client.get(url).send().await {
                Ok(r) if r.status().is_success() => match JwkSet::parse(r.body()) {
                    Ok(s) => set.extend(s),
                    Err(e) => errors.push(format!("{url}: {e}")),
                },
                Ok(r) => errors.push(format!("{url}: status {}", r.status())),
                Err(e) => errors.push(format!("{url}: {e}")),
            }
        }
        if !errors.is_empty() && set.is_empty() {
            // Keep the keys we have: a source that is down must not lock every consumer out.
            return Err(errors.join("; "));
        }
        if inner.keys.install(set) {
            inner.cache.clear();
            tracing::info!(keys = ?inner.keys.ids(), "sbi.oauth2: access-token keys loaded");
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }

    /// Reads the key sources (an URL at once, then) every `refresh_secs` until the returned
    /// task is aborted.
    pub fn spawn_refresh(&self) -> tokio::task::JoinHandle<()> {
        let v = self.clone();
        tokio::spawn(async move {
            let period = Duration::from_secs(v.inner.config.refresh_secs);
            let mut first = v.inner.config.jwks_url.is_some();
            loop {
                if !std::mem::take(&mut first) {
                    tokio::time::sleep(period).await;
                }
                if let Err(e) = v.refresh_now().await {
                    tracing::warn!(error = %e, "sbi.oauth2: key refresh failed");
                }
            }
        })
    }
}

/// The token of `Bearer <token>` (the scheme is case-insensitive, RFC 7235 §2.1).
fn bearer(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at(value.iter().position(|b| *b == b' ')?);
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return None;
    }
    let token = rest.trim_ascii();
    (!token.is_empty()).then_some(token)
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_takes_the_token_of_a_bearer_header_only() {
        assert_eq!(bearer(b"Bearer abc.def.ghi"), Some(&b"abc.def.ghi"[..]));
        assert_eq!(bearer(b"bearer  abc "), Some(&b"abc"[..]));
        assert_eq!(bearer(b"Basic abc"), None);
        assert_eq!(bearer(b"Bearer "), None);
        assert_eq!(bearer(b"Bearer"), None);
    }

    #[test]
    fn required_needs_a_key_source() {
        let c = OAuth2Config { required: true, ..Default::default() };
        assert!(c.validate().is_err());
        let c = OAuth2Config { jwks_file: Some("k.json".into()), ..c };
        assert!(c.validate().is_ok());
    }
}
