//! TLS 1.2/1.3 with ALPN on an SBI port, and mutual TLS.

mod common;

use bytes::Bytes;
use http::{Method, StatusCode, Version};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use sbi::tls::TlsConfig;
use sbi::ServerConfig;

struct Pki {
    dir: tempfile::TempDir,
    ca_pem: String,
    client_cert_pem: String,
    client_key_pem: String,
}

fn pki() -> Pki {
    let dir = tempfile::tempdir().unwrap();
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issue = |names: Vec<String>| {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(names).unwrap().signed_by(&key, &ca, &ca_key).unwrap();
        (cert.pem(), key.serialize_pem())
    };
    let (server_cert, server_key) = issue(vec!["localhost".into(), "127.0.0.1".into()]);
    let (client_cert_pem, client_key_pem) = issue(vec!["pcf.example".into()]);
    std::fs::write(dir.path().join("server.crt"), server_cert).unwrap();
    std::fs::write(dir.path().join("server.key"), server_key).unwrap();
    std::fs::write(dir.path().join("ca.crt"), ca.pem()).unwrap();
    std::fs::write(dir.path().join("ca.key"), ca_key.serialize_pem()).unwrap();
    Pki { dir, ca_pem: ca.pem(), client_cert_pem, client_key_pem }
}

fn tls_config(p: &Pki, mutual: bool) -> TlsConfig {
    TlsConfig::new(
        p.dir.path().join("server.crt"),
        p.dir.path().join("server.key"),
        mutual.then(|| p.dir.path().join("ca.crt")),
    )
}

fn client(
    p: &Pki,
    with_cert: bool,
    alpn: &[&[u8]],
) -> Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Full<Bytes>,
> {
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pki_types::CertificateDer::pem_slice_iter(p.ca_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let builder = rustls::ClientConfig::builder_with_provider(sbi::tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let cfg = if with_cert {
        let certs = rustls_pki_types::CertificateDer::pem_slice_iter(p.client_cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key =
            rustls_pki_types::PrivateKeyDer::from_pem_slice(p.client_key_pem.as_bytes()).unwrap();
        builder.with_client_auth_cert(certs, key).unwrap()
    } else {
        builder.with_no_client_auth()
    };
    let builder = hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(cfg).https_only();
    // hyper-rustls sets ALPN itself from the versions enabled.
    let https = if alpn == [b"h2"] {
        builder.enable_http2().build()
    } else {
        builder.enable_http1().build()
    };
    Client::builder(TokioExecutor::new()).build(https)
}

async fn get(
    c: &Client<
        hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
        Full<Bytes>,
    >,
    url: String,
) -> Result<(StatusCode, Version, serde_json::Value), String> {
    let req = http::Request::builder()
        .method(Method::GET)
        .uri(url)
        .body(Full::new(Bytes::new()))
        .unwrap();
    let resp = c.request(req).await.map_err(|e| format!("{e:?}"))?;
    let status = resp.status();
    let version = resp.version();
    let body = resp.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
    Ok((status, version, serde_json::from_slice(&body).unwrap_or_default()))
}

#[tokio::test]
async fn tls_with_alpn_h2_and_http1() {
    let p = pki();
    let srv =
        common::start(ServerConfig { tls: Some(tls_config(&p, false)), ..Default::default() })
            .await;
    let url = format!("https://localhost:{}/ntest/v1/items/none", srv.addr.port());
    let (status, version, body) = get(&client(&p, false, &[b"h2"]), url.clone()).await.unwrap();
    assert_eq!((status, version), (StatusCode::NOT_FOUND, Version::HTTP_2));
    assert_eq!(body["cause"], "RESOURCE_NOT_FOUND");
    let (status, version, _) = get(&client(&p, false, &[b"http/1.1"]), url).await.unwrap();
    assert_eq!((status, version), (StatusCode::NOT_FOUND, Version::HTTP_11));
    srv.stop().await;
}

#[tokio::test]
async fn mutual_tls_requires_a_client_certificate() {
    let p = pki();
    let srv =
        common::start(ServerConfig { tls: Some(tls_config(&p, true)), ..Default::default() }).await;
    let url = format!("https://localhost:{}/healthz/live", srv.addr.port());
    assert!(
        get(&client(&p, false, &[b"h2"]), url.clone()).await.is_err(),
        "no client cert must fail"
    );
    let (status, version, _) = get(&client(&p, true, &[b"h2"]), url).await.unwrap();
    assert_eq!((status, version), (StatusCode::OK, Version::HTTP_2));
    srv.stop().await;
}

#[test]
fn missing_certificate_files_are_reported() {
    let cfg = TlsConfig::new("/nonexistent.crt".into(), "/nonexistent.key".into(), None);
    let e = sbi::tls::server_config(&cfg).unwrap_err().to_string();
    assert!(e.contains("/nonexistent.crt"), "{e}");
}

/// A renewed server certificate and a rotated client CA are used for new connections without a
/// restart; a client certificate of the old CA is then refused at the handshake.
#[tokio::test]
async fn renewed_certificates_and_a_rotated_ca_are_used_without_restart() {
    let old = pki();
    let mut cfg = tls_config(&old, true);
    cfg.reload_secs = 1;
    let srv = common::start(ServerConfig { tls: Some(cfg), ..Default::default() }).await;
    let url = format!("https://localhost:{}/healthz/live", srv.addr.port());
    let (status, _, _) = get(&client(&old, true, &[b"h2"]), url.clone()).await.unwrap();
    assert_eq!(status, StatusCode::OK);

    // The operator puts a new PKI's files in place of the old ones.
    let new = pki();
    for f in ["server.crt", "server.key", "ca.crt"] {
        std::fs::copy(new.dir.path().join(f), old.dir.path().join(f)).unwrap();
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while get(&client(&new, true, &[b"h2"]), url.clone()).await.is_err() {
        assert!(std::time::Instant::now() < deadline, "the new certificate is not in force");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let (status, version, _) = get(&client(&new, true, &[b"h2"]), url.clone()).await.unwrap();
    assert_eq!((status, version), (StatusCode::OK, Version::HTTP_2));
    // The old CA's client certificate (and trust in the old server certificate) no longer work.
    assert!(get(&client(&old, true, &[b"h2"]), url).await.is_err());
    srv.stop().await;
}

/// The SBI client re-reads its own certificate and key (`[client.tls] reload_secs`): a
/// certificate the producer refuses, replaced on disk by one it trusts, is used for the next
/// connection without building a new client; a client that reads its files once keeps the old.
#[tokio::test]
async fn a_renewed_client_certificate_is_used_without_restart() {
    use sbi::client::{ClientConfig, SbiClient, TlsClientConfig};
    let server = pki();
    let stranger = pki();
    let srv =
        common::start(ServerConfig { tls: Some(tls_config(&server, true)), ..Default::default() })
            .await;
    let url = format!("https://localhost:{}/healthz/live", srv.addr.port());
    let files = tempfile::tempdir().unwrap();
    let (ca, cert, key) =
        (files.path().join("ca.crt"), files.path().join("nf.crt"), files.path().join("nf.key"));
    std::fs::write(&ca, &server.ca_pem).unwrap();
    std::fs::write(&cert, &stranger.client_cert_pem).unwrap();
    std::fs::write(&key, &stranger.client_key_pem).unwrap();
    let client = |reload_secs| {
        SbiClient::new(&ClientConfig {
            tls: TlsClientConfig {
                ca_files: vec![ca.clone()],
                cert_file: Some(cert.clone()),
                key_file: Some(key.clone()),
                reload_secs,
            },
            ..Default::default()
        })
        .unwrap()
    };
    let (reloading, once) = (client(1), client(0));
    assert!(reloading.get(&url).send().await.is_err(), "another CA's certificate is refused");
    assert!(once.get(&url).send().await.is_err());

    // The NF's certificate is renewed by its operator: key, then certificate.
    std::fs::write(&key, &server.client_key_pem).unwrap();
    std::fs::write(&cert, &server.client_cert_pem).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match reloading.get(&url).send().await {
            Ok(r) => {
                assert_eq!(r.status(), StatusCode::OK);
                break;
            }
            Err(e) => assert!(std::time::Instant::now() < deadline, "not reloaded: {e}"),
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    // The client that read its files once still presents the old certificate.
    assert!(once.get(&url).send().await.is_err());
    srv.stop().await;
}

/// A client certificate signed by a CA the server does not trust fails the handshake.
#[tokio::test]
async fn an_unknown_client_certificate_is_refused_at_the_handshake() {
    let server = pki();
    let stranger = pki();
    let srv =
        common::start(ServerConfig { tls: Some(tls_config(&server, true)), ..Default::default() })
            .await;
    let url = format!("https://localhost:{}/healthz/live", srv.addr.port());
    // Trusts the server's CA, but presents a certificate of another CA.
    let p = Pki {
        dir: tempfile::tempdir().unwrap(),
        ca_pem: server.ca_pem.clone(),
        client_cert_pem: stranger.client_cert_pem.clone(),
        client_key_pem: stranger.client_key_pem.clone(),
    };
    let e = get(&client(&p, true, &[b"h2"]), url).await.unwrap_err();
    assert!(!e.is_empty());
    srv.stop().await;
}

/// With mutual TLS and access tokens, the token must be the certificate's NF instance's (TS
/// 33.501 §13.3.1.2): a token issued to another NF instance, sent on this consumer's connection,
/// is refused.
#[tokio::test]
async fn a_token_must_name_the_instance_of_the_client_certificate() {
    use common::tokens::{claims, now, Key};
    use rcgen::SanType;
    let own = "5a3c4c9e-0000-4000-8000-0000000000a1";
    let other = "5a3c4c9e-0000-4000-8000-0000000000a2";
    let mut p = pki();
    // The consumer's certificate names its NF instance as `cert nf` does.
    let ca_key =
        KeyPair::from_pem(&std::fs::read_to_string(p.dir.path().join("ca.key")).unwrap()).unwrap();
    let ca = CertificateParams::from_ca_cert_pem(&p.ca_pem).unwrap().self_signed(&ca_key).unwrap();
    let mut params = CertificateParams::new(vec!["pcf.example".to_owned()]).unwrap();
    params
        .subject_alt_names
        .push(SanType::URI(format!("urn:uuid:{own}").as_str().try_into().unwrap()));
    let key = KeyPair::generate().unwrap();
    p.client_cert_pem = params.signed_by(&key, &ca, &ca_key).unwrap().pem();
    p.client_key_pem = key.serialize_pem();

    let signer = Key::new("k");
    let jwks = p.dir.path().join("jwks.json");
    std::fs::write(&jwks, serde_json::json!({"keys": [signer.jwk()]}).to_string()).unwrap();
    let srv = common::start(ServerConfig {
        tls: Some(tls_config(&p, true)),
        oauth2: sbi::oauth2::OAuth2Config {
            required: true,
            jwks_file: Some(jwks),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    srv.state.items.lock().await.insert("a".into(), serde_json::json!({"name": "a", "count": 1}));
    let c = client(&p, true, &[b"h2"]);
    let url = format!("https://localhost:{}/ntest/v1/items/a", srv.addr.port());
    let call = |sub: &str| {
        let mut cl = claims(serde_json::json!("TEST"), "ntest", now() + 600);
        cl["sub"] = sub.into();
        let req = http::Request::builder()
            .uri(url.clone())
            .header("authorization", format!("Bearer {}", signer.sign(&cl)))
            .body(Full::new(Bytes::new()))
            .unwrap();
        let c = c.clone();
        async move {
            let resp = c.request(req).await.unwrap();
            let status = resp.status();
            let body = resp.into_body().collect().await.unwrap().to_bytes();
            (status, String::from_utf8_lossy(&body).into_owned())
        }
    };
    let (status, body) = call(own).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = call(other).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(body.contains("client certificate"), "{body}");
    srv.stop().await;
}

#[test]
fn a_certificate_names_its_nf_instances() {
    use rcgen::SanType;
    let mut params = CertificateParams::new(vec!["bsf.example".to_owned()]).unwrap();
    params
        .subject_alt_names
        .push(SanType::URI("urn:uuid:5A3C4C9E-0000-4000-8000-0000000000B5".try_into().unwrap()));
    params.subject_alt_names.push(SanType::URI("https://bsf.example/x".try_into().unwrap()));
    let cert = params.self_signed(&KeyPair::generate().unwrap()).unwrap();
    let id = sbi::tls::PeerCertificate::from_der(cert.der());
    assert_eq!(id.instance_ids, ["5a3c4c9e-0000-4000-8000-0000000000b5"]);
    assert!(id.names("5A3C4C9E-0000-4000-8000-0000000000b5"));
    assert!(sbi::tls::PeerCertificate::from_der(b"not a certificate").instance_ids.is_empty());
}
