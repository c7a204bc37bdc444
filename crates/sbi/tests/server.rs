//! The SBI server over real sockets: h2c, HTTP/1.1 and TLS; every error class answered with a
//! ProblemDetails that validates against TS 29.571; the overload guard; the built-in endpoints.

mod common;

use std::sync::LazyLock;
use std::time::Duration;

use http::{Method, StatusCode, Version};
use sbi::layer::overload::OverloadConfig;
use sbi::ServerConfig;
use testkit::specs::Specs;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use common::{h1_client, h2c_client, send, start, Answer};

const JSON: (&str, &str) = ("content-type", "application/json");

/// TS29571_CommonData.yaml, where ProblemDetails is defined (absent: checks are skipped).
static COMMON_DATA: LazyLock<Specs> = LazyLock::new(|| Specs::load(&["TS29571_CommonData"]));

fn assert_problem(a: &Answer, status: u16, cause: &str) {
    assert_eq!(a.status.as_u16(), status, "body: {}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.content_type(), "application/problem+json");
    let v = a.json();
    assert_eq!(v["status"], status);
    assert_eq!(v["cause"], cause, "{v}");
    COMMON_DATA.assert_valid("TS29571_CommonData", "ProblemDetails", &v);
}

#[tokio::test]
async fn h2c_round_trip_and_json_body() {
    let srv = start(ServerConfig::default()).await;
    let c = h2c_client();
    let base = format!("http://{}", srv.addr);
    let a = send(
        &c,
        Method::POST,
        format!("{base}/ntest/v1/items"),
        &[JSON],
        Some(r#"{"name":"a","count":1}"#),
    )
    .await;
    assert_eq!(a.status, StatusCode::CREATED);
    assert_eq!(a.version, Version::HTTP_2);
    assert_eq!(a.headers["location"], "/ntest/v1/items/a");
    assert!(!a.headers.contains_key("x-request-id"), "an id is echoed only when sent");
    let a = send(&c, Method::GET, format!("{base}/ntest/v1/items/a"), &[], None).await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.json()["count"], 1);
    // A request id sent by the consumer is kept.
    let a = send(
        &c,
        Method::GET,
        format!("{base}/ntest/v1/items/a"),
        &[("x-request-id", "abc-1")],
        None,
    )
    .await;
    assert_eq!(a.headers["x-request-id"], "abc-1");
    srv.stop().await;
}

#[tokio::test]
async fn http1_on_the_same_port() {
    let srv = start(ServerConfig::default()).await;
    let c = h1_client();
    let base = format!("http://{}", srv.addr);
    let a = send(
        &c,
        Method::POST,
        format!("{base}/ntest/v1/items"),
        &[JSON],
        Some(r#"{"name":"b","count":2}"#),
    )
    .await;
    assert_eq!(a.status, StatusCode::CREATED);
    assert_eq!(a.version, Version::HTTP_11);
    let a = send(&c, Method::GET, format!("{base}/ntest/v1/items/b"), &[], None).await;
    assert_eq!(a.json()["name"], "b");
    srv.stop().await;
}

#[tokio::test]
async fn large_answers_cross_many_frames() {
    let srv = start(ServerConfig::default()).await;
    let c = h2c_client();
    let base = format!("http://{}", srv.addr);
    let note = "x".repeat(200 * 1024);
    let body = format!(r#"{{"name":"big","count":3,"note":"{note}"}}"#);
    let a = send(&c, Method::POST, format!("{base}/ntest/v1/items"), &[JSON], Some(&body)).await;
    assert_eq!(a.status, StatusCode::CREATED);
    let a = send(&c, Method::GET, format!("{base}/ntest/v1/items/big"), &[], None).await;
    assert_eq!(a.json()["note"].as_str().unwrap().len(), 200 * 1024);
    srv.stop().await;
}

#[tokio::test]
async fn every_error_class_is_a_problem_details() {
    let cfg = ServerConfig { max_body_bytes: 1024, ..Default::default() };
    let srv = start(cfg).await;
    let c = h2c_client();
    let base = format!("http://{}", srv.addr);
    let items = format!("{base}/ntest/v1/items");

    // 400: malformed JSON, a wrong field (invalidParams points at it), a missing field.
    let a = send(&c, Method::POST, items.clone(), &[JSON], Some("{not json")).await;
    assert_problem(&a, 400, "INVALID_MSG_FORMAT");
    let a =
        send(&c, Method::POST, items.clone(), &[JSON], Some(r#"{"name":"a","count":"x"}"#)).await;
    assert_problem(&a, 400, "MANDATORY_IE_INCORRECT");
    assert_eq!(a.json()["invalidParams"][0]["param"], "/count");
    let a = send(&c, Method::POST, items.clone(), &[JSON], Some(r#"{"count":1}"#)).await;
    assert_problem(&a, 400, "MANDATORY_IE_MISSING");
    assert_eq!(a.json()["invalidParams"][0]["param"], "/name");
    // 400: query parameters.
    let a = send(&c, Method::GET, format!("{base}/ntest/v1/query?limit=3"), &[], None).await;
    assert_problem(&a, 400, "MANDATORY_QUERY_PARAM_MISSING");
    let a = send(
        &c,
        Method::GET,
        format!("{base}/ntest/v1/query?target-nf-type=SMF&limit=x"),
        &[],
        None,
    )
    .await;
    assert_problem(&a, 400, "INVALID_QUERY_PARAM");
    assert_eq!(a.json()["invalidParams"][0]["param"], "limit");
    // 400: an API version not served.
    let a = send(&c, Method::GET, format!("{base}/ntest/v2/items/a"), &[], None).await;
    assert_problem(&a, 400, "INVALID_API");
    // 404: unknown resource structure, and unknown resource.
    let a = send(&c, Method::GET, format!("{base}/ntest/v1/nothing"), &[], None).await;
    assert_problem(&a, 404, "RESOURCE_URI_STRUCTURE_NOT_FOUND");
    let a = send(&c, Method::GET, format!("{base}/ntest/v1/items/zz"), &[], None).await;
    assert_problem(&a, 404, "RESOURCE_NOT_FOUND");
    assert_eq!(a.json()["instance"], "/ntest/v1/items/zz");
    // 405 with Allow.
    let a = send(&c, Method::DELETE, items.clone(), &[], None).await;
    assert_problem(&a, 405, "METHOD_NOT_ALLOWED");
    assert_eq!(a.headers["allow"], "POST");
    // 406: the consumer accepts no JSON.
    let a =
        send(&c, Method::GET, format!("{base}/ntest/v1/items/a"), &[("accept", "text/html")], None)
            .await;
    assert_problem(&a, 406, "NOT_ACCEPTABLE");
    // 413: body over the limit, declared and streamed.
    let big = format!(r#"{{"name":"{}","count":1}}"#, "y".repeat(2000));
    let a = send(&c, Method::POST, items.clone(), &[JSON], Some(&big)).await;
    assert_problem(&a, 413, "PAYLOAD_TOO_LARGE");
    // 415: not JSON.
    let a =
        send(&c, Method::POST, items.clone(), &[("content-type", "text/plain")], Some("hi")).await;
    assert_problem(&a, 415, "UNSUPPORTED_MEDIA_TYPE");
    // 500: a handler panic answers, and the connection survives it.
    let a = send(&c, Method::GET, format!("{base}/ntest/v1/panic"), &[], None).await;
    assert_problem(&a, 500, "SYSTEM_FAILURE");
    let a = send(&c, Method::GET, format!("{base}/ntest/v1/items/zz"), &[], None).await;
    assert_eq!(a.status, 404);
    // 503: not ready.
    srv.observability.set_ready(false);
    let a = send(&c, Method::GET, format!("{base}/healthz/ready"), &[], None).await;
    assert_problem(&a, 503, "NF_CONGESTION");
    // Stopping: not ready, and a loader reporting ready during the stop does not undo it.
    srv.observability.set_ready(true);
    let a = send(&c, Method::GET, format!("{base}/healthz/ready"), &[], None).await;
    assert_eq!(a.status, 200);
    srv.observability.set_stopping();
    srv.observability.set_ready(true);
    let a = send(&c, Method::GET, format!("{base}/healthz/ready"), &[], None).await;
    assert_problem(&a, 503, "NF_CONGESTION");
    assert!(String::from_utf8_lossy(&a.body).contains("stopping"), "{:?}", a.body);
    let a = send(&c, Method::GET, format!("{base}/metrics"), &[], None).await;
    assert!(String::from_utf8_lossy(&a.body).contains("\nnf_ready 0\n"));
    srv.stop().await;
}

/// 411 needs a raw HTTP/1.1 request: every client library adds Content-Length by itself.
#[tokio::test]
async fn http1_body_without_length_is_411() {
    let srv = start(ServerConfig::default()).await;
    let mut s = tokio::net::TcpStream::connect(srv.addr).await.unwrap();
    s.write_all(
        b"POST /ntest/v1/items HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\r\n",
    )
    .await
    .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await.unwrap().unwrap();
    let text = String::from_utf8_lossy(&buf[..n]).to_string();
    assert!(text.starts_with("HTTP/1.1 411"), "{text}");
    let body = &text[text.find("\r\n\r\n").unwrap() + 4..];
    let a = Answer {
        status: StatusCode::LENGTH_REQUIRED,
        headers: {
            let mut h = http::HeaderMap::new();
            h.insert("content-type", "application/problem+json".parse().unwrap());
            h
        },
        body: bytes::Bytes::from(body.to_owned()),
        version: Version::HTTP_11,
    };
    assert!(text.to_ascii_lowercase().contains("content-type: application/problem+json"));
    assert_problem(&a, 411, "INCORRECT_LENGTH");
    srv.stop().await;
}

#[tokio::test]
async fn merge_patch_and_json_patch() {
    let srv = start(ServerConfig::default()).await;
    let c = h2c_client();
    let base = format!("http://{}", srv.addr);
    let url = format!("{base}/ntest/v1/items/p");
    send(
        &c,
        Method::POST,
        format!("{base}/ntest/v1/items"),
        &[JSON],
        Some(r#"{"name":"p","count":1,"note":"n"}"#),
    )
    .await;
    let a = send(
        &c,
        Method::PATCH,
        url.clone(),
        &[("content-type", "application/merge-patch+json")],
        Some(r#"{"note":null,"count":5}"#),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.json());
    assert_eq!(a.json(), serde_json::json!({"name":"p","count":5}));
    let a = send(&c, Method::PATCH, url.clone(), &[("content-type", "application/json-patch+json")],
        Some(r#"[{"op":"test","path":"/count","value":5},{"op":"add","path":"/note","value":"m"},{"op":"copy","from":"/note","path":"/name"}]"#)).await;
    assert_eq!(a.json(), serde_json::json!({"name":"m","count":5,"note":"m"}));
    // A failing test operation leaves the resource untouched.
    let a = send(&c, Method::PATCH, url.clone(), &[("content-type", "application/json-patch+json")],
        Some(r#"[{"op":"replace","path":"/count","value":9},{"op":"test","path":"/count","value":1}]"#)).await;
    assert_eq!(a.status, 409);
    let a = send(&c, Method::GET, format!("{base}/ntest/v1/items/m"), &[], None).await;
    assert_eq!(a.status, 404);
    let a = send(&c, Method::GET, url.clone(), &[], None).await;
    assert_eq!(a.json()["count"], 5);
    // A patch that makes the resource invalid is refused.
    let a = send(
        &c,
        Method::PATCH,
        url.clone(),
        &[("content-type", "application/merge-patch+json")],
        Some(r#"{"count":"many"}"#),
    )
    .await;
    assert_problem(&a, 400, "MANDATORY_IE_INCORRECT");
    let a = send(&c, Method::PATCH, url, &[JSON], Some("{}")).await;
    assert_problem(&a, 415, "UNSUPPORTED_MEDIA_TYPE");
    srv.stop().await;
}

#[tokio::test]
async fn query_arrays_and_json_objects() {
    let srv = start(ServerConfig::default()).await;
    let c = h2c_client();
    let url = format!(
        "http://{}/ntest/v1/query?target-nf-type=SMF&service-names=nsmf-pdusession,nsmf-event-exposure\
         &snssais=%5B%7B%22sst%22%3A1%2C%22sd%22%3A%22000001%22%7D%5D&limit=4",
        srv.addr
    );
    let a = send(&c, Method::GET, url, &[], None).await;
    assert_eq!(
        a.json(),
        serde_json::json!({"nfType":"SMF","names":["nsmf-pdusession","nsmf-event-exposure"],
            "snssais":[{"sst":1,"sd":"000001"}],"limit":4})
    );
    srv.stop().await;
}

#[tokio::test]
async fn overload_guard_sheds_a_flood_and_recovers() {
    let overload = OverloadConfig {
        max_in_flight: 8,
        priority_reserve: 2,
        priority_threshold: 7,
        // The 503 path, and the reserve it keeps for priority messages.
        backpressure: false,
        ..Default::default()
    };
    let srv = start(ServerConfig { overload, ..Default::default() }).await;
    let c = h2c_client();
    let base = format!("http://{}", srv.addr);
    let flood: Vec<_> = (0..100)
        .map(|_| {
            let c = c.clone();
            let url = format!("{base}/ntest/v1/slow");
            tokio::spawn(async move { send(&c, Method::GET, url, &[], None).await })
        })
        .collect();
    // Wait until the guard is full, then check that important messages still get in.
    let mut shed = Vec::new();
    for _ in 0..200 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        if flood.iter().filter(|h| h.is_finished()).count() >= 92 {
            break;
        }
    }
    let urgent = {
        let c = c.clone();
        let url = format!("{base}/ntest/v1/slow");
        tokio::spawn(async move {
            send(&c, Method::GET, url, &[("3gpp-sbi-message-priority", "2")], None).await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!urgent.is_finished(), "a priority 2 message must use the reserve, not be shed");
    srv.state.gate.add_permits(1000);
    let mut ok = 0;
    for h in flood {
        let a = h.await.unwrap();
        match a.status.as_u16() {
            204 => ok += 1,
            503 => shed.push(a),
            s => panic!("unexpected status {s}"),
        }
    }
    assert_eq!(ok, 8, "exactly max_in_flight requests are admitted");
    assert_eq!(shed.len(), 92);
    let a = &shed[0];
    assert_problem(a, 503, "NF_CONGESTION");
    assert_eq!(a.headers["retry-after"], "1");
    let oci = a.headers["3gpp-sbi-oci"].to_str().unwrap();
    assert!(
        oci.contains("Overload-Reduction-Metric:") && oci.contains("NF-Instance: 7a0f6d3e"),
        "{oci}"
    );
    assert_eq!(urgent.await.unwrap().status, 204);
    // Recovered: a new request is served.
    let a = send(&c, Method::GET, format!("{base}/ntest/v1/items/none"), &[], None).await;
    assert_eq!(a.status, 404);
    // Health and metrics stay reachable whatever the load.
    let a = send(&c, Method::GET, format!("{base}/healthz/live"), &[], None).await;
    assert_eq!(a.status, 200);
    srv.stop().await;
}

#[tokio::test]
async fn metrics_count_operations_and_report_the_process() {
    let srv = start(ServerConfig::default()).await;
    let c = h2c_client();
    let base = format!("http://{}", srv.addr);
    for _ in 0..3 {
        send(&c, Method::GET, format!("{base}/ntest/v1/items/x"), &[], None).await;
    }
    send(&c, Method::GET, format!("{base}/nope"), &[], None).await;
    let a = send(&c, Method::GET, format!("{base}/metrics"), &[], None).await;
    let text = String::from_utf8(a.body.to_vec()).unwrap();
    assert!(
        text.contains(r#"sbi_requests_total{operation="Ntest_Get",status_class="4xx"} 3"#),
        "{text}"
    );
    assert!(text.contains(r#"sbi_requests_total{operation="unrouted",status_class="4xx"} 1"#));
    assert!(text.contains("sbi_request_duration_seconds_bucket{le="));
    assert!(text.contains("process_cpu_seconds_total"));
    assert!(text.contains("process_resident_memory_bytes"));
    let a = send(&c, Method::GET, format!("{base}/healthz/ready"), &[], None).await;
    assert_eq!(a.status, 200);
    srv.stop().await;
}

#[tokio::test]
async fn own_latency_leaves_out_waits_on_other_nfs() {
    let srv = start(ServerConfig::default()).await;
    let c = h2c_client();
    let base = format!("http://{}", srv.addr);
    let a = send(&c, Method::GET, format!("{base}/ntest/v1/upstream?ms=60"), &[], None).await;
    assert_eq!(a.status, 204);
    // A problem after a wait keeps its instance and its mark.
    let a =
        send(&c, Method::GET, format!("{base}/ntest/v1/upstream?ms=60&fail=1"), &[], None).await;
    assert_eq!(a.status, 504);
    let p: serde_json::Value = serde_json::from_slice(&a.body).unwrap();
    assert_eq!(p["instance"], "/ntest/v1/upstream");
    assert_eq!(p["cause"], "TARGET_NF_NOT_REACHABLE");
    let a = send(&c, Method::GET, format!("{base}/metrics"), &[], None).await;
    let text = String::from_utf8(a.body.to_vec()).unwrap();
    let bucket = |family: &str, le: &str| -> u64 {
        let head = format!("{family}_bucket{{le=\"{le}\",operation=\"Ntest_Upstream\"}} ");
        let line = text.lines().find(|l| l.starts_with(&head)).unwrap_or_else(|| panic!("{head}"));
        line[head.len()..].trim().parse().unwrap()
    };
    // As answered: both over 50 ms. Less the waits: both well under it.
    assert_eq!(bucket("sbi_request_duration_seconds", "0.05"), 0, "{text}");
    assert_eq!(bucket("sbi_request_duration_seconds", "+Inf"), 2);
    assert_eq!(bucket("sbi_request_own_duration_seconds", "0.05"), 2, "{text}");
    // Operations that wait on nobody count the same in both.
    send(&c, Method::GET, format!("{base}/ntest/v1/items/x"), &[], None).await;
    let a = send(&c, Method::GET, format!("{base}/metrics"), &[], None).await;
    let text = String::from_utf8(a.body.to_vec()).unwrap();
    assert!(text
        .contains(r#"sbi_request_own_duration_seconds_bucket{le="+Inf",operation="Ntest_Get"} 1"#));
    srv.stop().await;
}

#[tokio::test]
async fn load_control_information_is_advertised() {
    let srv = start(ServerConfig::default()).await;
    let c = h2c_client();
    let a = send(&c, Method::GET, format!("http://{}/ntest/v1/items/x", srv.addr), &[], None).await;
    let lci = a.headers["3gpp-sbi-lci"].to_str().unwrap();
    assert!(lci.starts_with("Timestamp: \"") && lci.contains("Load-Metric: "), "{lci}");
    // At most once per interval.
    let a = send(&c, Method::GET, format!("http://{}/ntest/v1/items/x", srv.addr), &[], None).await;
    assert!(!a.headers.contains_key("3gpp-sbi-lci"));
    srv.stop().await;
}

#[tokio::test]
async fn shutdown_finishes_requests_in_progress() {
    let srv = start(ServerConfig::default()).await;
    let c = h2c_client();
    let url = format!("http://{}/ntest/v1/slow", srv.addr);
    let pending = tokio::spawn({
        let c = c.clone();
        async move { send(&c, Method::GET, url, &[], None).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let gate = srv.state.gate.clone();
    let addr = srv.addr;
    let stopping = tokio::spawn(srv.stop());
    tokio::time::sleep(Duration::from_millis(100)).await;
    gate.add_permits(1);
    assert_eq!(pending.await.unwrap().status, 204);
    stopping.await.unwrap();
    assert!(tokio::net::TcpStream::connect(addr).await.is_err(), "listener closed");
}

#[test]
fn the_schema_check_can_fail() {
    if !COMMON_DATA.available() {
        eprintln!("skipped: ../shared/3gpp absent");
        return;
    }
    let valid =
        |v: serde_json::Value| COMMON_DATA.is_valid("TS29571_CommonData", "ProblemDetails", &v);
    assert!(valid(serde_json::json!({"status": 400, "cause": "X"})));
    assert!(!valid(serde_json::json!({"status": "400"})));
    assert!(!valid(serde_json::json!({"invalidParams": [{"reason": "no param"}]})));
}
