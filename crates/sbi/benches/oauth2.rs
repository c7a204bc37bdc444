//! What checking an access token costs a producer (issue #26: ≤ 3 µs of CPU per request):
//! a token seen before (the cache: every request but a consumer's first per token lifetime)
//! and a token's first use (the ES256 signature verified).
//!
//! `cargo bench -p fivecore-sbi --bench oauth2`

use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use criterion::{criterion_group, criterion_main, Criterion};
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use sbi::oauth2::{OAuth2Config, Verifier};
use serde_json::json;

fn setup(cache_entries: usize) -> (Verifier, Vec<String>, tempfile::TempDir) {
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let key =
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap();
    let p = key.public_key().as_ref();
    let jwk = json!({"kty": "EC", "crv": "P-256", "kid": "k",
                     "x": B64.encode(&p[1..33]), "y": B64.encode(&p[33..65])});
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jwks.json");
    std::fs::write(&path, json!({"keys": [jwk]}).to_string()).unwrap();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    // Two tokens as our NRF mints them (about 400 bytes), differing in their subject.
    let tokens = (0..2)
        .map(|i| {
            let header = B64.encode(r#"{"alg":"ES256","typ":"JWT","kid":"k"}"#);
            let claims = json!({"iss": "5a3c4c9e-0000-4000-8000-0000000000ff",
                "sub": format!("5a3c4c9e-0000-4000-8000-00000000000{i}"), "aud": "BSF",
                "scope": "nbsf-management", "exp": now + 3600, "iat": now});
            let signed = format!("{header}.{}", B64.encode(claims.to_string()));
            let sig = key.sign(&rng, signed.as_bytes()).unwrap();
            format!("Bearer {signed}.{}", B64.encode(sig.as_ref()))
        })
        .collect();
    let config =
        OAuth2Config { required: true, jwks_file: Some(path), cache_entries, ..Default::default() };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let v =
        rt.block_on(Verifier::new(config, "BSF", "5a3c4c9e-0000-4000-8000-000000000b5f")).unwrap();
    (v, tokens, dir)
}

fn bench(c: &mut Criterion) {
    let (v, tokens, _dir) = setup(65_536);
    let t = tokens[0].as_bytes();
    assert!(v.check(Some(t), "nbsf-management").unwrap().is_some());
    c.bench_function("oauth2/check_cached_token", |b| {
        b.iter(|| v.check(Some(std::hint::black_box(t)), "nbsf-management"))
    });

    // A cache of one entry and two tokens in turn: every check verifies the signature.
    let (v, tokens, _dir) = setup(1);
    let mut i = 0usize;
    c.bench_function("oauth2/check_first_use_es256", |b| {
        b.iter(|| {
            i += 1;
            v.check(Some(tokens[i % 2].as_bytes()), "nbsf-management")
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
