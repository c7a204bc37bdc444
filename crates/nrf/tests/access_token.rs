//! Nnrf_AccessToken over real sockets: tokens issued, verified with the published key, and
//! refused with RFC 6749 errors; the signing key survives a restart.

mod common;

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use nrf::config::{AccessTokenConfig, AuthRule};
use nrf::NrfConfig;
use serde_json::{json, Value};

use common::{body, client, profile, put, state_dir, uuid, TestNrf};

async fn token(nrf: &TestNrf, form: &str) -> (u16, Value, sbi::client::SbiResponse) {
    let r = client()
        .post(&format!("{}/oauth2/token", nrf.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("accept", "application/json")
        .body(form.to_owned())
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), body(&r), r)
}

/// Checks the ES256 signature against the JWK set the NRF publishes; returns the claims.
async fn verify(nrf: &TestNrf, jwt: &str) -> Value {
    let jwks = body(&client().get(&format!("{}/oauth2/jwks", nrf.base)).send().await.unwrap());
    let (signed, sig) = jwt.rsplit_once('.').unwrap();
    let (header, claims) = signed.split_once('.').unwrap();
    let header: Value = serde_json::from_slice(&B64.decode(header).unwrap()).unwrap();
    assert_eq!(header["alg"], "ES256");
    let jwk = jwks["keys"].as_array().unwrap().iter().find(|k| k["kid"] == header["kid"]).unwrap();
    let mut point = vec![4u8];
    point.extend(B64.decode(jwk["x"].as_str().unwrap()).unwrap());
    point.extend(B64.decode(jwk["y"].as_str().unwrap()).unwrap());
    ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_FIXED, point)
        .verify(signed.as_bytes(), &B64.decode(sig).unwrap())
        .expect("signature verifies with the published key");
    serde_json::from_slice(&B64.decode(claims).unwrap()).unwrap()
}

fn with_service(mut p: Value, name: &str) -> Value {
    p["nfServices"] = json!([{
        "serviceInstanceId": "1", "serviceName": name, "scheme": "http", "nfServiceStatus": "REGISTERED",
        "versions": [{"apiVersionInUri": "v1", "apiFullVersion": "1.0.0"}]
    }]);
    p
}

async fn tokens_are_issued_verified_and_refused() {
    let dir = state_dir();
    let config = NrfConfig {
        access_token: AccessTokenConfig {
            expiry_secs: 600,
            rules: vec![AuthRule {
                consumer_nf_types: vec!["AMF".into()],
                target_nf_type: "UDM".into(),
                scopes: vec!["nudm-sdm".into(), "nudm-uecm".into()],
            }],
            ..Default::default()
        },
        ..Default::default()
    };
    let nrf = TestNrf::start(dir.path(), config).await;
    let c = client();
    let (amf, udm, smf) = (uuid(1), uuid(2), uuid(3));
    put(&c, &nrf.nfm(&format!("/nf-instances/{amf}")), &profile(&amf, "AMF")).await;
    let mut udm_profile = with_service(profile(&udm, "UDM"), "nudm-sdm");
    udm_profile["allowedNfTypes"] = json!(["AMF", "SMF"]);
    put(&c, &nrf.nfm(&format!("/nf-instances/{udm}")), &udm_profile).await;
    put(&c, &nrf.nfm(&format!("/nf-instances/{smf}")), &profile(&smf, "SMF")).await;

    // Issued for a target type, and for a target instance.
    let (status, rsp, raw) =
        token(&nrf, &format!("grant_type=client_credentials&nfInstanceId={amf}&nfType=AMF&targetNfType=UDM&scope=nudm-sdm")).await;
    assert_eq!(status, 200, "{rsp}");
    assert_eq!(raw.header("cache-control"), Some("no-store"));
    assert_eq!(rsp["token_type"], "Bearer");
    assert_eq!(rsp["expires_in"], 600);
    common::assert_valid("TS29510_Nnrf_AccessToken", "AccessTokenRsp", &rsp);
    let claims = verify(&nrf, rsp["access_token"].as_str().unwrap()).await;
    assert_eq!(claims["sub"], amf.as_str());
    assert_eq!(claims["aud"], "UDM");
    assert_eq!(claims["scope"], "nudm-sdm");
    assert!(claims["exp"].as_u64().unwrap() > claims["iat"].as_u64().unwrap());
    common::assert_valid("TS29510_Nnrf_AccessToken", "AccessTokenClaims", &claims);

    let (status, rsp, _) = token(
        &nrf,
        &format!("grant_type=client_credentials&nfInstanceId={amf}&targetNfInstanceId={udm}&scope=nudm-sdm&requesterPlmn=%7B%22mcc%22%3A%22001%22%2C%22mnc%22%3A%2201%22%7D"),
    )
    .await;
    assert_eq!(status, 200, "{rsp}");
    let claims = verify(&nrf, rsp["access_token"].as_str().unwrap()).await;
    assert_eq!(claims["aud"], json!([udm]));
    assert_eq!(claims["consumerPlmnId"]["mcc"], "001");

    // Refusals, each with its RFC 6749 error.
    let cases = [
        (format!("grant_type=password&nfInstanceId={amf}&targetNfType=UDM&scope=nudm-sdm"), "unsupported_grant_type"),
        (format!("nfInstanceId={amf}&targetNfType=UDM&scope=nudm-sdm"), "invalid_request"),
        (format!("grant_type=client_credentials&nfInstanceId={amf}&targetNfType=UDM"), "invalid_request"),
        (format!("grant_type=client_credentials&nfInstanceId={amf}&scope=nudm-sdm"), "invalid_request"),
        (format!("grant_type=client_credentials&nfInstanceId={}&targetNfType=UDM&scope=nudm-sdm", uuid(99)), "invalid_client"),
        (format!("grant_type=client_credentials&nfInstanceId={amf}&nfType=SMF&targetNfType=UDM&scope=nudm-sdm"), "invalid_client"),
        (format!("grant_type=client_credentials&nfInstanceId={smf}&targetNfType=UDM&scope=nudm-sdm"), "unauthorized_client"),
        (format!("grant_type=client_credentials&nfInstanceId={amf}&targetNfType=UDM&scope=nudm-ueau"), "invalid_scope"),
        (format!("grant_type=client_credentials&nfInstanceId={amf}&targetNfInstanceId={udm}&scope=nudm-uecm"), "invalid_scope"),
        (format!("grant_type=client_credentials&nfInstanceId={amf}&targetNfInstanceId={}&scope=nudm-sdm", uuid(98)), "invalid_request"),
    ];
    for (form, error) in cases {
        let (status, rsp, _) = token(&nrf, &form).await;
        assert_eq!((status, rsp["error"].as_str()), (400, Some(error)), "{form}: {rsp}");
        common::assert_valid("TS29510_Nnrf_AccessToken", "AccessTokenErr", &rsp);
    }
    // Not a form at all.
    let r = c
        .post(&format!("{}/oauth2/token", nrf.base))
        .json(&json!({"grant_type": "client_credentials"}))
        .send()
        .await
        .unwrap();
    assert_eq!((r.status().as_u16(), body(&r)["error"].as_str()), (400, Some("invalid_request")));
    nrf.stop().await;
}

async fn the_target_profile_can_deny_a_consumer_type() {
    let dir = state_dir();
    let nrf = TestNrf::start(dir.path(), NrfConfig::default()).await;
    let c = client();
    let (pcf, udr) = (uuid(1), uuid(2));
    put(&c, &nrf.nfm(&format!("/nf-instances/{pcf}")), &profile(&pcf, "PCF")).await;
    let mut udr_profile = with_service(profile(&udr, "UDR"), "nudr-dr");
    udr_profile["allowedNfTypes"] = json!(["UDM"]);
    put(&c, &nrf.nfm(&format!("/nf-instances/{udr}")), &udr_profile).await;
    let (status, rsp, _) =
        token(&nrf, &format!("grant_type=client_credentials&nfInstanceId={pcf}&targetNfInstanceId={udr}&scope=nudr-dr")).await;
    assert_eq!((status, rsp["error"].as_str()), (400, Some("unauthorized_client")), "{rsp}");
    // Without rules, a type-level request is allowed.
    let (status, _, _) = token(
        &nrf,
        &format!("grant_type=client_credentials&nfInstanceId={pcf}&targetNfType=UDR&scope=nudr-dr"),
    )
    .await;
    assert_eq!(status, 200);
    nrf.stop().await;
}

async fn the_signing_key_is_kept_across_restarts() {
    let dir = state_dir();
    let nrf = TestNrf::start(dir.path(), NrfConfig::default()).await;
    let before = body(&client().get(&format!("{}/oauth2/jwks", nrf.base)).send().await.unwrap());
    nrf.stop().await;
    let nrf = TestNrf::start(dir.path(), NrfConfig::default()).await;
    let after = body(&client().get(&format!("{}/oauth2/jwks", nrf.base)).send().await.unwrap());
    assert_eq!(before, after);
    assert_eq!(after["keys"][0]["kty"], "EC");
    nrf.stop().await;
}

/// A producer with `[sbi.oauth2] required = true` reading this NRF's JWK set: the NRF's token
/// for the producer's service is served, none is 401, one for another service 403.
async fn a_producer_requiring_tokens_serves_the_nrfs_tokens() {
    use std::sync::Arc;

    use http::{Method, StatusCode};
    use sbi::oauth2::OAuth2Config;

    let dir = state_dir();
    let nrf = TestNrf::start(dir.path(), NrfConfig::default()).await;
    let c = client();
    let (amf, udm) = (uuid(1), uuid(2));
    put(&c, &nrf.nfm(&format!("/nf-instances/{amf}")), &profile(&amf, "AMF")).await;
    let mut udm_profile = profile(&udm, "UDM");
    udm_profile["nfServiceList"] = json!({"1": {
        "serviceInstanceId": "1", "serviceName": "nudm-sdm", "scheme": "http",
        "nfServiceStatus": "REGISTERED",
        "versions": [{"apiVersionInUri": "v2", "apiFullVersion": "2.2.0"}]
    }});
    put(&c, &nrf.nfm(&format!("/nf-instances/{udm}")), &udm_profile).await;

    let producer = sbi::SbiServer::bind(
        sbi::ServerConfig {
            oauth2: OAuth2Config {
                required: true,
                jwks_url: Some(format!("{}/oauth2/jwks", nrf.base)),
                ..Default::default()
            },
            ..Default::default()
        },
        sbi::NfIdentity::new("UDM", &udm),
        sbi::Router::builder(Arc::new(()))
            .route(Method::GET, "/nudm-sdm/v2/{supi}/am-data", "Nudm_SDM_Get", |_, _| async {
                sbi::json_response(StatusCode::OK, &json!({"gpsis": ["msisdn-1"]}))
            })
            .build(),
        sbi::Observability::new(),
    )
    .await
    .unwrap();
    let url = format!("http://{}/nudm-sdm/v2/imsi-001010000000001/am-data", producer.local_addr());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(producer.serve(async move {
        let _ = stopped.await;
    }));

    let get = |token: Option<String>| {
        let mut r = c.get(&url);
        if let Some(t) = token {
            r = r.header("authorization", format!("Bearer {t}"));
        }
        r.send()
    };
    let granted = |scope: &str, target: &str| {
        format!("grant_type=client_credentials&nfInstanceId={amf}&{target}&scope={scope}")
    };
    let (status, rsp, _) =
        token(&nrf, &granted("nudm-sdm", &format!("targetNfInstanceId={udm}"))).await;
    assert_eq!(status, 200, "{rsp}");
    let by_instance = rsp["access_token"].as_str().unwrap().to_owned();
    let (_, rsp, _) = token(&nrf, &granted("nudm-sdm", "targetNfType=UDM")).await;
    let by_type = rsp["access_token"].as_str().unwrap().to_owned();
    let (_, rsp, _) = token(&nrf, &granted("nudm-uecm", "targetNfType=UDM")).await;
    let other_service = rsp["access_token"].as_str().unwrap().to_owned();

    for t in [by_instance, by_type] {
        let r = get(Some(t)).await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{:?}", r.body());
    }
    let r = get(None).await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    let r = get(Some(other_service)).await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert_eq!(body(&r)["cause"], "INSUFFICIENT_SCOPE");

    let _ = stop.send(());
    served.await.unwrap().unwrap();
    nrf.stop().await;
}

testkit::on_both_backends!(
    tokens_are_issued_verified_and_refused,
    the_target_profile_can_deny_a_consumer_type,
    the_signing_key_is_kept_across_restarts,
    a_producer_requiring_tokens_serves_the_nrfs_tokens,
);
