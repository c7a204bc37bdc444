//! ES256 access tokens as our NRF mints them (crates/nrf/src/nnrf_token.rs), for the OAuth2
//! tests.
#![allow(dead_code)]

use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use serde_json::{json, Value};

pub struct Key {
    pair: EcdsaKeyPair,
    pub kid: String,
}

impl Key {
    pub fn new(kid: &str) -> Key {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .unwrap();
        Key { pair, kid: kid.into() }
    }

    pub fn jwk(&self) -> Value {
        let p = self.pair.public_key().as_ref();
        json!({"kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": self.kid,
               "x": B64.encode(&p[1..33]), "y": B64.encode(&p[33..65])})
    }

    /// A token as our NRF mints it (crates/nrf/src/nnrf_token.rs), under `kid`.
    pub fn sign_as(&self, kid: &str, claims: &Value) -> String {
        let header = B64.encode(json!({"alg": "ES256", "typ": "JWT", "kid": kid}).to_string());
        let payload = B64.encode(claims.to_string());
        let signed = format!("{header}.{payload}");
        let sig = self.pair.sign(&SystemRandom::new(), signed.as_bytes()).unwrap();
        format!("{signed}.{}", B64.encode(sig.as_ref()))
    }

    pub fn sign(&self, claims: &Value) -> String {
        self.sign_as(&self.kid, claims)
    }
}

pub fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

pub fn claims(aud: Value, scope: &str, exp: u64) -> Value {
    json!({"iss": "nrf-1", "sub": "5a3c4c9e-0000-4000-8000-0000000000aa", "aud": aud,
           "scope": scope, "exp": exp, "iat": now()})
}
