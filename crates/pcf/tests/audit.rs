//! The session audit over real sockets: an SMF and an AMF (one small server here) that know
//! some sessions and answer 404 for the others; the PCF asks about the stale ones, removes
//! what the peer no longer knows, renews what it knows, and keeps what nobody answered for.

mod common;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use common::*;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use pcf::config::AuditConfig;
use pcf::PcfConfig;
use serde_json::{json, Value};

/// A peer that answers 404 under `/gone/` and 204 elsewhere, recording (path, body).
async fn peer() -> (String, Arc<Mutex<Vec<(String, Value)>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { return };
            let log = log.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let log = log.clone();
                    async move {
                        let path = req.uri().path().to_string();
                        let bytes = req.into_body().collect().await.unwrap().to_bytes();
                        let v = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                        let status = if path.contains("/gone/") { 404 } else { 204 };
                        log.lock().unwrap().push((path, v));
                        let mut resp = hyper::Response::new(Full::new(Bytes::new()));
                        *resp.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
                        Ok::<_, Infallible>(resp)
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tcp), svc)
                    .await;
            });
        }
    });
    (url, seen)
}

fn am_request(n: u32, notification_uri: &str) -> Value {
    json!({
        "notificationUri": notification_uri,
        "supi": format!("imsi-99970000001{n:04}"),
        "accessType": "3GPP_ACCESS",
        "ratType": "NR",
        "servingPlmn": {"mcc": "999", "mnc": "70"},
        "guami": {"plmnId": {"mcc": "999", "mnc": "70"}, "amfId": "020040"},
        "suppFeat": "4000000"
    })
}

#[tokio::test]
async fn stale_sessions_the_peer_no_longer_knows_are_removed_and_known_ones_renewed() {
    let d = tempfile::tempdir().unwrap();
    let specs = specs();
    let c = client();
    let (peer, seen) = peer().await;
    let config = PcfConfig {
        policy: Some(default_project(&d.path().join("policy"))),
        audit: AuditConfig {
            enabled: true,
            stale_after_ms: 1000,
            interval_ms: 100,
            max_per_s: 1000,
        },
        ..PcfConfig::default()
    };
    let pcf = TestPcf::start_with(d.path(), config).await;

    let create = |n: u32, uri: String| {
        let mut ctx = open5gs_context(n);
        ctx["notificationUri"] = json!(uri);
        let c = c.clone();
        let url = pcf.sm("");
        async move {
            let r = c.post(&url).json(&ctx).send().await.unwrap();
            assert_eq!(r.status(), 201, "{}", body(&r));
            r.header("location").unwrap().to_string()
        }
    };
    let known = create(1, format!("{peer}/known/1")).await;
    let gone = create(2, format!("{peer}/gone/2")).await;
    // An SMF nobody answers for: its session stays.
    let silent = create(3, "http://127.0.0.1:9/nsmf-callback/3".to_string()).await;
    let am_url = format!("{}/npcf-am-policy-control/v1/policies", pcf.base);
    let r = c.post(&am_url).json(&am_request(1, &format!("{peer}/gone/am"))).send().await.unwrap();
    assert_eq!(r.status(), 201, "{}", body(&r));
    let am_gone = r.header("location").unwrap().to_string();

    // Nothing is asked before the sessions are stale.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(seen.lock().unwrap().is_empty(), "asked about fresh sessions");

    // Once stale: the SMF's 404 removes its session, the AMF's its association.
    let t0 = std::time::Instant::now();
    loop {
        let g = c.get(&gone).send().await.unwrap().status();
        let a = c.get(&am_gone).send().await.unwrap().status();
        if g == 404 && a == 404 {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(5), "not removed: SM {g}, AM {a}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(c.get(&known).send().await.unwrap().status(), 200);
    assert_eq!(c.get(&silent).send().await.unwrap().status(), 200);

    // What the peer was asked: an UpdateNotify that changes nothing, valid against TS 29.512,
    // and a PolicyUpdate naming the AM association.
    let asked = seen.lock().unwrap().clone();
    let sm_probe = asked.iter().find(|(p, _)| p == "/known/1/update").expect("asked about it");
    specs.assert_valid("TS29512_Npcf_SMPolicyControl", "SmPolicyNotification", &sm_probe.1);
    assert_eq!(sm_probe.1["resourceUri"], known.as_str());
    assert_eq!(sm_probe.1["smPolicyDecision"], json!({}));
    let am_probe = asked.iter().find(|(p, _)| p == "/gone/am/update").expect("asked the AMF");
    assert_eq!(am_probe.1["resourceUri"], am_gone.as_str());

    // The known session was renewed: over the next 1.5 s (15 passes) it is asked about at
    // most twice, not at every pass.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let times = seen.lock().unwrap().iter().filter(|(p, _)| p == "/known/1/update").count();
    assert!((1..=3).contains(&times), "asked {times} times about a renewed session");

    let m = String::from_utf8(
        c.get(&format!("{}/metrics", pcf.base)).send().await.unwrap().body().to_vec(),
    )
    .unwrap();
    assert!(m.contains("pcf_audit_checks_total{result=\"removed\"} 2"), "{m}");
    assert!(!m.contains("pcf_audit_checks_total{result=\"no_answer\"} 0"), "{m}");

    // A restart keeps what the audit kept and not what it removed.
    let old = pcf.base.clone();
    pcf.stop().await;
    let pcf = TestPcf::start(d.path(), &d.path().join("policy")).await;
    let moved = |uri: &str| uri.replacen(&old, &pcf.base, 1);
    assert_eq!(c.get(&moved(&known)).send().await.unwrap().status(), 200);
    assert_eq!(c.get(&moved(&gone)).send().await.unwrap().status(), 404);
    pcf.stop().await;
}
