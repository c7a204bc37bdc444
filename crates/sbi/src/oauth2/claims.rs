//! A JWT's signature and claims (RFC 7519, ES256 per RFC 7518 §3.4), and the cache of tokens
//! already verified.

use std::sync::{Arc, Mutex};

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use ring::signature::{UnparsedPublicKey, ECDSA_P256_SHA256_FIXED};
use rustc_hash::FxHashMap;
use serde::Deserialize;
use serde_json::Value;

use super::keys::KeyRing;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TokenError {
    #[error("the access token is not a JWS compact serialization")]
    Malformed,
    #[error("the access token's header is not ES256")]
    Algorithm,
    #[error("the access token is signed with a key this producer does not know")]
    UnknownKey,
    #[error("the access token's signature does not verify")]
    Signature,
    #[error("the access token's claims are invalid: {0}")]
    Claims(String),
}

/// The claims a producer checks (TS 29.510 AccessTokenClaims).
#[derive(Debug, Clone, PartialEq)]
pub struct Claims {
    pub iss: Option<String>,
    pub sub: Option<String>,
    pub exp: u64,
    pub nbf: Option<u64>,
    /// An NF type (string) or NF instance ids (array).
    pub aud: Vec<String>,
    pub scopes: Vec<Box<str>>,
}

#[derive(Deserialize)]
struct Header {
    alg: String,
    #[serde(default)]
    kid: Option<String>,
}

#[derive(Deserialize)]
struct RawClaims {
    #[serde(default)]
    iss: Option<String>,
    #[serde(default)]
    sub: Option<String>,
    exp: u64,
    #[serde(default)]
    nbf: Option<u64>,
    #[serde(default)]
    aud: Value,
    #[serde(default)]
    scope: String,
}

impl Claims {
    /// Whether a scope lists `service`, or a resource of it (`nudr-dr:policy-data`).
    pub fn allows(&self, service: &str) -> bool {
        self.scopes.iter().any(|s| {
            s.strip_prefix(service).is_some_and(|rest| rest.is_empty() || rest.starts_with(':'))
        })
    }

    pub fn audience_includes(&self, nf_type: &str, instance_id: &str) -> bool {
        self.aud.iter().any(|a| a == nf_type || a.eq_ignore_ascii_case(instance_id))
    }
}

/// Verifies `token`'s signature with the key its header names and decodes its claims.
pub(super) fn verify(token: &[u8], keys: &KeyRing) -> Result<Claims, TokenError> {
    let mut parts = token.split(|b| *b == b'.');
    let (Some(h), Some(p), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(TokenError::Malformed);
    };
    let header: Header = serde_json::from_slice(&B64.decode(h).map_err(|_| TokenError::Malformed)?)
        .map_err(|_| TokenError::Malformed)?;
    if header.alg != "ES256" {
        return Err(TokenError::Algorithm);
    }
    let (set, kid) = keys.point(header.kid.as_deref()).ok_or(TokenError::UnknownKey)?;
    let point = set.point(&kid).ok_or(TokenError::UnknownKey)?;
    let signature = B64.decode(s).map_err(|_| TokenError::Malformed)?;
    let signed = &token[..h.len() + 1 + p.len()];
    UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, point)
        .verify(signed, &signature)
        .map_err(|_| TokenError::Signature)?;
    let raw: RawClaims = serde_json::from_slice(&B64.decode(p).map_err(|_| TokenError::Malformed)?)
        .map_err(|e| TokenError::Claims(e.to_string()))?;
    let aud = match raw.aud {
        Value::String(s) => vec![s],
        Value::Array(a) => a.into_iter().filter_map(|v| v.as_str().map(str::to_owned)).collect(),
        _ => return Err(TokenError::Claims("aud is missing".into())),
    };
    Ok(Claims {
        iss: raw.iss,
        sub: raw.sub,
        exp: raw.exp,
        nbf: raw.nbf,
        aud,
        scopes: raw.scope.split_ascii_whitespace().map(Into::into).collect(),
    })
}

/// Verified tokens by their bytes, each with the key-set generation it was verified under.
pub(super) struct Cache {
    capacity: usize,
    map: Mutex<FxHashMap<Box<[u8]>, Verified>>,
}

type Verified = (Arc<Claims>, u64);

impl Cache {
    pub fn new(capacity: usize) -> Cache {
        Cache { capacity, map: Mutex::new(FxHashMap::default()) }
    }

    pub fn get(&self, token: &[u8], generation: u64) -> Option<Arc<Claims>> {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.get(token).filter(|(_, g)| *g == generation).map(|(c, _)| c.clone())
    }

    /// Keeps a verified token. Full: expired entries go first, then everything (a bounded
    /// cache that refills from verifications beats an unbounded one under a token flood).
    pub fn insert(&self, token: &[u8], claims: Arc<Claims>, generation: u64, now: u64) {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= self.capacity {
            map.retain(|_, (c, g)| *g == generation && c.exp >= now);
            if map.len() >= self.capacity {
                map.clear();
            }
        }
        map.insert(token.into(), (claims, generation));
    }

    pub fn clear(&self) {
        self.map.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.map.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(aud: &[&str], scope: &str) -> Claims {
        Claims {
            iss: None,
            sub: None,
            exp: 10,
            nbf: None,
            aud: aud.iter().map(|s| s.to_string()).collect(),
            scopes: scope.split_whitespace().map(Into::into).collect(),
        }
    }

    #[test]
    fn a_scope_allows_its_service_and_its_resources_only() {
        let c = claims(&["BSF"], "nbsf-management nudr-dr:policy-data");
        assert!(c.allows("nbsf-management"));
        assert!(c.allows("nudr-dr"));
        assert!(!c.allows("nbsf"));
        assert!(!c.allows("nudr-dr-x"));
        assert!(!c.allows("npcf-smpolicycontrol"));
    }

    #[test]
    fn audience_is_the_nf_type_or_the_instance() {
        let id = "5a3c4c9e-0000-4000-8000-000000000001";
        assert!(claims(&["BSF"], "").audience_includes("BSF", id));
        assert!(claims(&[&id.to_uppercase()], "").audience_includes("BSF", id));
        assert!(!claims(&["PCF"], "").audience_includes("BSF", id));
    }

    #[test]
    fn the_cache_is_bounded_and_keyed_by_generation() {
        let cache = Cache::new(2);
        let c = Arc::new(claims(&["BSF"], "s"));
        cache.insert(b"a", c.clone(), 1, 0);
        cache.insert(b"b", c.clone(), 1, 0);
        assert!(cache.get(b"a", 1).is_some());
        assert!(cache.get(b"a", 2).is_none(), "verified under an older key set");
        cache.insert(b"c", c, 1, 0);
        assert!(cache.len() <= 2);
        assert!(cache.get(b"c", 1).is_some());
    }

    #[test]
    fn malformed_tokens_are_refused_before_any_key_is_looked_up() {
        let ring = KeyRing::default();
        assert_eq!(verify(b"abc", &ring), Err(TokenError::Malformed));
        assert_eq!(verify(b"a.b.c.d", &ring), Err(TokenError::Malformed));
        let h = B64.encode(br#"{"alg":"HS256"}"#);
        assert_eq!(verify(format!("{h}.e30.AA").as_bytes(), &ring), Err(TokenError::Algorithm));
        let h = B64.encode(br#"{"alg":"ES256","kid":"x"}"#);
        assert_eq!(verify(format!("{h}.e30.AA").as_bytes(), &ring), Err(TokenError::UnknownKey));
    }
}
