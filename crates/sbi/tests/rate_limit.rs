//! Per-consumer rate limits over real sockets: one consumer's flood is answered 429
//! NF_CONGESTION_RISK with Retry-After while another consumer is served, and the limit refills.

mod common;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use common::*;
use http::{Method, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use sbi::layer::rate_limit::{RateLimitConfig, ServiceLimit};
use sbi::ServerConfig;

/// An h2c client whose connections come from `source` (127.0.0.x are all loopback on Linux).
fn client_from(source: Ipv4Addr) -> H2Client {
    let mut http = HttpConnector::new();
    http.set_local_address(Some(IpAddr::V4(source)));
    Client::builder(TokioExecutor::new()).http2_only(true).build(http)
}

#[tokio::test]
async fn a_flooding_consumer_is_limited_and_the_others_served() {
    let mut services = BTreeMap::new();
    services.insert("nunlimited".to_owned(), ServiceLimit { rps: 0.0, burst: None });
    let nf = start(ServerConfig {
        rate_limit: RateLimitConfig {
            enabled: true,
            per_consumer_rps: 5.0,
            burst: Some(5.0),
            services,
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    nf.state.items.lock().await.insert("a".into(), serde_json::json!({"name": "a", "count": 1}));
    let url = format!("http://{}/ntest/v1/items/a", nf.addr);
    let flooder = client_from(Ipv4Addr::new(127, 0, 0, 1));
    let mut statuses = Vec::new();
    let mut refused = None;
    for _ in 0..8 {
        let a = send(&flooder, Method::GET, url.clone(), &[], None).await;
        statuses.push(a.status);
        if a.status == StatusCode::TOO_MANY_REQUESTS {
            refused = Some(a);
        }
    }
    let served = statuses.iter().filter(|s| **s == StatusCode::OK).count();
    // The burst, plus at most one more refilled while the requests went (5 per second).
    assert!((5..=6).contains(&served), "{statuses:?}");
    let refused = refused.expect("the flood is refused");
    assert_eq!(refused.content_type(), "application/problem+json");
    assert_eq!(refused.json()["cause"], "NF_CONGESTION_RISK");
    assert_eq!(refused.json()["status"], 429);
    assert_eq!(refused.headers["retry-after"], "1");

    // Another consumer (another address) is not affected.
    let other = client_from(Ipv4Addr::new(127, 0, 0, 2));
    assert_eq!(send(&other, Method::GET, url.clone(), &[], None).await.status, StatusCode::OK);

    // The limit refills: a second later the flooder is served again.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(send(&flooder, Method::GET, url.clone(), &[], None).await.status, StatusCode::OK);

    let metrics = send(&other, Method::GET, format!("http://{}/metrics", nf.addr), &[], None).await;
    let text = String::from_utf8_lossy(&metrics.body);
    let limited = text
        .lines()
        .find_map(|l| l.strip_prefix("sbi_rate_limited_total "))
        .expect("sbi_rate_limited_total");
    assert_eq!(limited.parse::<u64>().unwrap() as usize, 8 - served);
    nf.stop().await;
}

/// With access tokens required the consumer is the token's `sub` (its NF instance): two NFs
/// behind one address (an SCP, a shared node) have a limit each.
#[tokio::test]
async fn with_tokens_the_consumer_is_the_tokens_subject() {
    use common::tokens::{claims, now, Key};
    let dir = tempfile::tempdir().unwrap();
    let jwks = dir.path().join("jwks.json");
    let key = Key::new("k");
    std::fs::write(&jwks, serde_json::json!({"keys": [key.jwk()]}).to_string()).unwrap();
    let nf = start(ServerConfig {
        oauth2: sbi::oauth2::OAuth2Config {
            required: true,
            jwks_file: Some(jwks),
            ..Default::default()
        },
        rate_limit: RateLimitConfig {
            enabled: true,
            per_consumer_rps: 0.5,
            burst: Some(2.0),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    nf.state.items.lock().await.insert("a".into(), serde_json::json!({"name": "a", "count": 1}));
    let url = format!("http://{}/ntest/v1/items/a", nf.addr);
    let token_of = |sub: &str| {
        let mut c = claims(serde_json::json!("TEST"), "ntest", now() + 600);
        c["sub"] = sub.into();
        format!("Bearer {}", key.sign(&c))
    };
    let shared = h2c_client();
    for sub in ["5a3c4c9e-0000-4000-8000-0000000000a1", "5a3c4c9e-0000-4000-8000-0000000000a2"] {
        let bearer = token_of(sub);
        let statuses: Vec<StatusCode> = {
            let mut v = Vec::new();
            for _ in 0..3 {
                let h = [("authorization", bearer.as_str())];
                v.push(send(&shared, Method::GET, url.clone(), &h, None).await.status);
            }
            v
        };
        assert_eq!(
            statuses,
            [StatusCode::OK, StatusCode::OK, StatusCode::TOO_MANY_REQUESTS],
            "{sub}"
        );
    }
    nf.stop().await;
}
