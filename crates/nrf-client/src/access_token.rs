//! Nnrf_AccessToken from the consumer's side (TS 29.510 §5.4.2.2, OAuth2 client credentials):
//! a token per (target NF type, service), asked for when first needed and again shortly before
//! it expires, shared by every request meanwhile. [`NrfClient::token_source`] hands the SBI
//! client a [`TokenSource`] that attaches them (`[nrf_client] access_tokens = true`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use http::{HeaderValue, StatusCode};
use sbi::oauth2::{nf_type_of_service, TokenFuture, TokenSource};
use serde::Deserialize;

use crate::{status_error, Error, Inner, NrfClient};

/// Tokens by target NF type, then by scope (two levels so a lookup borrows, never allocates).
#[derive(Default)]
pub(crate) struct Tokens {
    cache: Mutex<HashMap<String, HashMap<String, Cached>>>,
    /// One request to the NRF at a time: concurrent requests for a missing token wait for it
    /// instead of each asking.
    fetch: tokio::sync::Mutex<()>,
}

#[derive(Clone)]
struct Cached {
    /// The token, or why the NRF gave none (kept for [`RETRY_AFTER_FAILURE`], so a consumer
    /// refused a token does not ask again at every request).
    value: Result<HeaderValue, String>,
    renew_at: Instant,
}

#[derive(Deserialize)]
struct AccessTokenRsp {
    access_token: String,
    token_type: String,
    #[serde(default)]
    expires_in: Option<u64>,
}

/// The lifetime assumed when the NRF's answer gives none (`expires_in` is optional).
const DEFAULT_LIFETIME: Duration = Duration::from_secs(300);
/// How long a failure to get a token is remembered.
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(5);

impl Tokens {
    fn get(&self, target: &str, scope: &str, now: Instant) -> Option<Result<HeaderValue, String>> {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let c = cache.get(target)?.get(scope)?;
        (c.renew_at > now).then(|| c.value.clone())
    }

    fn put(&self, target: &str, scope: &str, cached: Cached) {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache.entry(target.to_owned()).or_default().insert(scope.to_owned(), cached);
    }

    fn forget(&self, target: &str, scope: &str) {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = cache.get_mut(target) {
            m.remove(scope);
        }
    }
}

impl NrfClient {
    /// The `Authorization` value (`Bearer <JWT>`) for calling `scope` on NFs of
    /// `target_nf_type`: the cached token, or a new one from the NRF.
    pub async fn access_token(
        &self,
        target_nf_type: &str,
        scope: &str,
    ) -> Result<HeaderValue, Error> {
        fetch(&self.inner, target_nf_type, scope).await
    }

    /// Drops the cached token (the producer refused it), so the next call asks again.
    pub fn forget_access_token(&self, target_nf_type: &str, scope: &str) {
        self.inner.tokens.forget(target_nf_type, scope);
    }

    /// What the NF's SBI client uses to attach tokens (`SbiClient::set_token_source`). It
    /// holds the client weakly: the client holds the SBI client.
    pub fn token_source(&self) -> Arc<dyn TokenSource> {
        Arc::new(Source(Arc::downgrade(&self.inner)))
    }
}

async fn fetch(inner: &Inner, target: &str, scope: &str) -> Result<HeaderValue, Error> {
    if let Some(v) = inner.tokens.get(target, scope, Instant::now()) {
        return v.map_err(Error::NoToken);
    }
    let _one = inner.tokens.fetch.lock().await;
    // Another caller may have fetched it while this one waited.
    if let Some(v) = inner.tokens.get(target, scope, Instant::now()) {
        return v.map_err(Error::NoToken);
    }
    let result = ask(inner, target, scope).await;
    if let Err(e) = &result {
        let failed =
            Cached { value: Err(e.to_string()), renew_at: Instant::now() + RETRY_AFTER_FAILURE };
        inner.tokens.put(target, scope, failed);
    }
    result
}

async fn ask(inner: &Inner, target: &str, scope: &str) -> Result<HeaderValue, Error> {
    let form = form_urlencoded::Serializer::new(String::new())
        .append_pair("grant_type", "client_credentials")
        .append_pair("nfInstanceId", &inner.instance_id)
        .append_pair("nfType", &inner.nf_type)
        .append_pair("targetNfType", target)
        .append_pair("scope", scope)
        .finish();
    let asked = Instant::now();
    let rsp = inner
        .http
        .post("/oauth2/token")
        .header(http::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(http::header::ACCEPT, "application/json")
        .body(form)
        .max_rsp_time(inner.config.request_timeout())
        .send_with_alternates(&inner.roots)
        .await?;
    if rsp.status() != StatusCode::OK {
        return Err(status_error(&rsp));
    }
    let t: AccessTokenRsp =
        rsp.json().map_err(|e| Error::Decode(format!("AccessTokenRsp: {e}")))?;
    if !t.token_type.eq_ignore_ascii_case("bearer") {
        return Err(Error::Decode(format!("token_type {} is not Bearer", t.token_type)));
    }
    let value = HeaderValue::try_from(format!("Bearer {}", t.access_token))
        .map_err(|_| Error::Decode("access_token is not a header value".into()))?;
    let lifetime = t.expires_in.map_or(DEFAULT_LIFETIME, Duration::from_secs);
    let margin = Duration::from_secs(inner.config.access_token_renew_before_secs);
    // Renewed `margin` before expiry, or half-way through a lifetime shorter than twice it.
    let renew_at = asked + lifetime.saturating_sub(margin).max(lifetime / 2);
    inner.tokens.put(target, scope, Cached { value: Ok(value.clone()), renew_at });
    Ok(value)
}

struct Source(Weak<Inner>);

impl TokenSource for Source {
    fn token<'a>(&'a self, service: &'a str) -> TokenFuture<'a> {
        Box::pin(async move {
            let inner = self.0.upgrade()?;
            // NF management and the token endpoint itself are served without tokens: an NF
            // registers before it may ask for one.
            if !inner.config.access_tokens || service == "nnrf-nfm" || service == "oauth2" {
                return None;
            }
            let target = nf_type_of_service(service)?;
            match fetch(&inner, &target, service).await {
                Ok(v) => Some(v),
                Err(e) => {
                    tracing::warn!(%target, scope = service, error = %e, "no access token");
                    None
                }
            }
        })
    }

    fn rejected(&self, service: &str) {
        if let (Some(inner), Some(target)) = (self.0.upgrade(), nf_type_of_service(service)) {
            inner.tokens.forget(&target, service);
        }
    }
}
