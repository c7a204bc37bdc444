//! The verifying keys: a JWK set (RFC 7517) of EC P-256 keys, as the NRF publishes at
//! `GET /oauth2/jwks`, installed atomically so checks never see half a set.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use rustc_hash::FxHashMap;
use serde::Deserialize;

/// Keys by key id. A key published without `kid` is kept under "".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JwkSet {
    keys: FxHashMap<String, Vec<u8>>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeySetError {
    #[error("not a JWK set: {0}")]
    Json(String),
    #[error("key {kid:?}: {why}")]
    Key { kid: String, why: &'static str },
}

#[derive(Deserialize)]
struct RawSet {
    keys: Vec<RawKey>,
}

#[derive(Deserialize)]
struct RawKey {
    kty: String,
    #[serde(default)]
    crv: Option<String>,
    #[serde(default)]
    kid: Option<String>,
    #[serde(default)]
    alg: Option<String>,
    #[serde(rename = "use", default)]
    use_: Option<String>,
    #[serde(default)]
    x: Option<String>,
    #[serde(default)]
    y: Option<String>,
}

impl JwkSet {
    /// Parses a JWK set, keeping its EC P-256 signing keys. Keys of other kinds (RSA, or
    /// `"use": "enc"`) are skipped, as RFC 7517 §5 lets a reader ignore keys it does not use;
    /// a P-256 key with a bad coordinate is an error.
    pub fn parse(bytes: &[u8]) -> Result<JwkSet, KeySetError> {
        let raw: RawSet =
            serde_json::from_slice(bytes).map_err(|e| KeySetError::Json(e.to_string()))?;
        let mut keys = FxHashMap::default();
        for k in raw.keys {
            let kid = k.kid.unwrap_or_default();
            if k.kty != "EC"
                || k.crv.as_deref() != Some("P-256")
                || k.use_.as_deref().is_some_and(|u| u != "sig")
                || k.alg.as_deref().is_some_and(|a| a != "ES256")
            {
                continue;
            }
            let coord = |c: Option<String>, name: &'static str| -> Result<Vec<u8>, KeySetError> {
                let v = B64
                    .decode(c.ok_or(KeySetError::Key { kid: kid.clone(), why: name })?)
                    .map_err(|_| KeySetError::Key { kid: kid.clone(), why: name })?;
                if v.len() != 32 {
                    return Err(KeySetError::Key { kid: kid.clone(), why: name });
                }
                Ok(v)
            };
            let x = coord(k.x, "x is not a base64url P-256 coordinate")?;
            let y = coord(k.y, "y is not a base64url P-256 coordinate")?;
            // The uncompressed SEC1 point ring verifies with: 0x04 || X || Y.
            let mut point = Vec::with_capacity(65);
            point.push(4);
            point.extend_from_slice(&x);
            point.extend_from_slice(&y);
            keys.insert(kid, point);
        }
        Ok(JwkSet { keys })
    }

    pub fn extend(&mut self, other: JwkSet) {
        self.keys.extend(other.keys);
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }
}

/// The installed set and a generation that changes with it.
#[derive(Default)]
pub(super) struct KeyRing {
    set: RwLock<Arc<JwkSet>>,
    generation: AtomicU64,
}

impl KeyRing {
    /// Installs `set`; true when it differs from the one installed.
    pub fn install(&self, set: JwkSet) -> bool {
        let mut current = self.set.write().unwrap_or_else(|p| p.into_inner());
        if **current == set {
            return false;
        }
        *current = Arc::new(set);
        self.generation.fetch_add(1, Ordering::AcqRel);
        true
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The public point for `kid` (a token without `kid` is checked against a set of one key).
    pub fn point(&self, kid: Option<&str>) -> Option<(Arc<JwkSet>, String)> {
        let set = self.set.read().unwrap_or_else(|p| p.into_inner()).clone();
        let kid = match kid {
            Some(k) => k.to_owned(),
            None if set.keys.len() == 1 => set.keys.keys().next()?.clone(),
            None => return None,
        };
        set.keys.contains_key(&kid).then_some((set, kid))
    }

    pub fn ids(&self) -> Vec<String> {
        let set = self.set.read().unwrap_or_else(|p| p.into_inner()).clone();
        let mut ids: Vec<String> = set.keys.keys().cloned().collect();
        ids.sort();
        ids
    }
}

impl JwkSet {
    pub(super) fn point(&self, kid: &str) -> Option<&[u8]> {
        self.keys.get(kid).map(Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const X: &str = "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU";
    const Y: &str = "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0";

    #[test]
    fn keeps_p256_signing_keys_and_skips_others() {
        let json = format!(
            r#"{{"keys":[{{"kty":"EC","crv":"P-256","kid":"a","x":"{X}","y":"{Y}"}},
                {{"kty":"RSA","kid":"r","n":"abc","e":"AQAB"}},
                {{"kty":"EC","crv":"P-256","kid":"e","use":"enc","x":"{X}","y":"{Y}"}}]}}"#
        );
        let set = JwkSet::parse(json.as_bytes()).unwrap();
        assert_eq!(set.len(), 1);
        let point = set.point("a").unwrap();
        assert_eq!((point.len(), point[0]), (65, 4));
    }

    #[test]
    fn a_bad_coordinate_is_an_error_naming_the_key() {
        let json =
            format!(r#"{{"keys":[{{"kty":"EC","crv":"P-256","kid":"k","x":"AAAA","y":"{Y}"}}]}}"#);
        let e = JwkSet::parse(json.as_bytes()).unwrap_err();
        assert!(matches!(e, KeySetError::Key { ref kid, .. } if kid == "k"), "{e}");
        assert!(JwkSet::parse(b"{}").is_err());
    }

    #[test]
    fn installing_the_same_set_changes_nothing() {
        let json =
            format!(r#"{{"keys":[{{"kty":"EC","crv":"P-256","kid":"a","x":"{X}","y":"{Y}"}}]}}"#);
        let ring = KeyRing::default();
        assert!(ring.install(JwkSet::parse(json.as_bytes()).unwrap()));
        let g = ring.generation();
        assert!(!ring.install(JwkSet::parse(json.as_bytes()).unwrap()));
        assert_eq!(ring.generation(), g);
        assert!(ring.point(Some("a")).is_some());
        assert!(ring.point(None).is_some(), "one key: a token without kid uses it");
        assert!(ring.point(Some("b")).is_none());
    }
}
