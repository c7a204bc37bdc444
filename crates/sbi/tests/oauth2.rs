//! Access tokens at a producer over real sockets: each refusal TS 29.500 / RFC 6750 give, the
//! right token served, keys rotated (file and URL) without a restart.

mod common;

use std::sync::Arc;

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use common::tokens::{claims, now, Key};
use common::*;
use http::{Method, StatusCode};
use sbi::oauth2::OAuth2Config;
use sbi::{json_response, NfIdentity, Observability, Router, SbiServer, ServerConfig};
use serde_json::json;

const INSTANCE: &str = "7a0f6d3e-0000-4000-8000-000000000001";
const ITEM: &str = "/ntest/v1/items/a";

fn write_jwks(path: &std::path::Path, keys: &[&Key]) {
    let set = json!({"keys": keys.iter().map(|k| k.jwk()).collect::<Vec<_>>()});
    std::fs::write(path, set.to_string()).unwrap();
}

async fn get(addr: std::net::SocketAddr, token: Option<&str>) -> Answer {
    let bearer = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = bearer.iter().map(|b| ("authorization", b.as_str())).collect();
    send(&h2c_client(), Method::GET, format!("http://{addr}{ITEM}"), &headers, None).await
}

fn assert_refused(a: &Answer, status: StatusCode, cause: &str, challenge: &str) {
    assert_eq!(a.status, status, "{:?}", a.body);
    assert_eq!(a.content_type(), "application/problem+json");
    assert_eq!(a.json()["cause"], cause);
    assert_eq!(a.json()["status"], status.as_u16());
    let www = a.headers.get("www-authenticate").expect("WWW-Authenticate").to_str().unwrap();
    assert!(www.starts_with(challenge), "{www}");
}

fn config(jwks_file: &std::path::Path) -> ServerConfig {
    ServerConfig {
        oauth2: OAuth2Config {
            required: true,
            jwks_file: Some(jwks_file.to_owned()),
            min_refresh_interval_ms: 0,
            ..Default::default()
        },
        ..Default::default()
    }
}

#[tokio::test]
async fn every_refusal_and_the_right_token() {
    let dir = tempfile::tempdir().unwrap();
    let jwks = dir.path().join("jwks.json");
    let key = Key::new("k1");
    let other = Key::new("k2");
    write_jwks(&jwks, &[&key]);
    let nf = start(config(&jwks)).await;
    nf.state.items.lock().await.insert("a".into(), json!({"name": "a", "count": 1}));
    let good = claims(json!("TEST"), "ntest", now() + 600);

    let a = get(nf.addr, None).await;
    assert_refused(&a, StatusCode::UNAUTHORIZED, "INVALID_TOKEN", "Bearer");
    assert!(!a.headers["www-authenticate"].to_str().unwrap().contains("error="), "RFC 6750 §3.1");

    let a = get(nf.addr, Some("not-a-jwt")).await;
    assert_refused(&a, StatusCode::UNAUTHORIZED, "INVALID_TOKEN", "Bearer error=\"invalid_token\"");

    let expired = key.sign(&claims(json!("TEST"), "ntest", now() - 3600));
    let a = get(nf.addr, Some(&expired)).await;
    assert_refused(&a, StatusCode::UNAUTHORIZED, "INVALID_TOKEN", "Bearer error=\"invalid_token\"");
    assert!(a.json()["detail"].as_str().unwrap().contains("expired"));

    let elsewhere = key.sign(&claims(json!("PCF"), "ntest", now() + 600));
    let a = get(nf.addr, Some(&elsewhere)).await;
    assert_refused(&a, StatusCode::UNAUTHORIZED, "INVALID_TOKEN", "Bearer error=\"invalid_token\"");
    assert!(a.json()["detail"].as_str().unwrap().contains("audience"));

    let narrow = key.sign(&claims(json!("TEST"), "nbsf-management", now() + 600));
    let a = get(nf.addr, Some(&narrow)).await;
    assert_refused(
        &a,
        StatusCode::FORBIDDEN,
        "INSUFFICIENT_SCOPE",
        "Bearer error=\"insufficient_scope\", scope=\"ntest\"",
    );

    // Signed by a key the producer does not trust, under the trusted key's id.
    let forged = other.sign_as("k1", &good);
    let a = get(nf.addr, Some(&forged)).await;
    assert_refused(&a, StatusCode::UNAUTHORIZED, "INVALID_TOKEN", "Bearer error=\"invalid_token\"");
    assert!(a.json()["detail"].as_str().unwrap().contains("signature"));

    // A token whose claims were changed after signing.
    let t = key.sign(&good);
    let mut parts: Vec<String> = t.split('.').map(str::to_owned).collect();
    parts[1] = B64.encode(claims(json!("TEST"), "ntest nbsf-management", now() + 600).to_string());
    let a = get(nf.addr, Some(&parts.join("."))).await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);

    // The right token, twice (the second from the cache); by instance id as our NRF mints it
    // for a targetNfInstanceId, and with a resource-level scope.
    for t in [
        key.sign(&good),
        key.sign(&claims(json!([INSTANCE.to_uppercase()]), "ntest", now() + 600)),
        key.sign(&claims(json!("TEST"), "nother ntest:items", now() + 600)),
    ] {
        for _ in 0..2 {
            let a = get(nf.addr, Some(&t)).await;
            assert_eq!(a.status, StatusCode::OK, "{:?}", a.body);
            assert_eq!(a.json()["name"], "a");
        }
    }
    // Unknown paths stay 404 whoever asks: routing comes first.
    let a = send(&h2c_client(), Method::GET, format!("http://{}/nope", nf.addr), &[], None).await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    nf.stop().await;
}

#[tokio::test]
async fn a_rotated_key_is_used_and_a_removed_one_refused_without_restart() {
    let dir = tempfile::tempdir().unwrap();
    let jwks = dir.path().join("jwks.json");
    let old = Key::new("old");
    let new = Key::new("new");
    write_jwks(&jwks, &[&old]);
    let nf = start(config(&jwks)).await;
    nf.state.items.lock().await.insert("a".into(), json!({"name": "a", "count": 1}));
    let c = claims(json!("TEST"), "ntest", now() + 600);
    let by_old = old.sign(&c);
    let by_new = new.sign(&c);
    assert_eq!(get(nf.addr, Some(&by_old)).await.status, StatusCode::OK);
    assert_eq!(get(nf.addr, Some(&by_new)).await.status, StatusCode::UNAUTHORIZED);

    // The issuer rotates: the set now has both keys. A token under the new key id makes the
    // producer read its keys again.
    write_jwks(&jwks, &[&old, &new]);
    assert_eq!(get(nf.addr, Some(&by_new)).await.status, StatusCode::OK);
    assert_eq!(get(nf.addr, Some(&by_old)).await.status, StatusCode::OK);

    // The old key is withdrawn: once the keys are read again (here: a token under an unknown id
    // triggers it), tokens it signed are refused, cached or not.
    write_jwks(&jwks, &[&new]);
    let stranger = Key::new("stranger").sign(&c);
    assert_eq!(get(nf.addr, Some(&stranger)).await.status, StatusCode::UNAUTHORIZED);
    assert_eq!(get(nf.addr, Some(&by_old)).await.status, StatusCode::UNAUTHORIZED);
    assert_eq!(get(nf.addr, Some(&by_new)).await.status, StatusCode::OK);
    nf.stop().await;
}

/// Keys published at an URL, as the NRF's `GET /oauth2/jwks`.
#[tokio::test]
async fn keys_from_the_issuers_jwks_url() {
    let key = Arc::new(Key::new("nrf"));
    let published = key.clone();
    let issuer = SbiServer::bind(
        ServerConfig::default(),
        NfIdentity::new("NRF", "7a0f6d3e-0000-4000-8000-0000000000ff"),
        Router::builder(Arc::new(()))
            .route(Method::GET, "/oauth2/jwks", "Jwks", move |_, _| {
                let set = json!({"keys": [published.jwk()]});
                async move { json_response(StatusCode::OK, &set) }
            })
            .build(),
        Observability::new(),
    )
    .await
    .unwrap();
    let jwks_url = format!("http://{}/oauth2/jwks", issuer.local_addr());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let issuer = tokio::spawn(issuer.serve(async move {
        let _ = stopped.await;
    }));

    let nf = start(ServerConfig {
        oauth2: OAuth2Config { required: true, jwks_url: Some(jwks_url), ..Default::default() },
        ..Default::default()
    })
    .await;
    nf.state.items.lock().await.insert("a".into(), json!({"name": "a", "count": 1}));
    let t = key.sign(&claims(json!("TEST"), "ntest", now() + 600));
    assert_eq!(get(nf.addr, Some(&t)).await.status, StatusCode::OK);
    assert_eq!(get(nf.addr, None).await.status, StatusCode::UNAUTHORIZED);
    nf.stop().await;
    let _ = stop.send(());
    issuer.await.unwrap().unwrap();
}

/// The NRF's token endpoint and NF management are exempt by default (an NF registers, then asks
/// for tokens); an operator can exempt other services.
#[tokio::test]
async fn an_exempt_service_needs_no_token() {
    let dir = tempfile::tempdir().unwrap();
    let jwks = dir.path().join("jwks.json");
    write_jwks(&jwks, &[&Key::new("k")]);
    let mut c = config(&jwks);
    assert!(c.oauth2.exempt_services.iter().any(|s| s == "oauth2"));
    assert!(c.oauth2.exempt_services.iter().any(|s| s == "nnrf-nfm"));
    c.oauth2.exempt_services.push("ntest".into());
    let nf = start(c).await;
    nf.state.items.lock().await.insert("a".into(), json!({"name": "a", "count": 1}));
    assert_eq!(get(nf.addr, None).await.status, StatusCode::OK);
    nf.stop().await;
}
