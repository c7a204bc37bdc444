//! Nbsf_Management over real sockets, on SQLite and on MariaDB: every pcfBindings operation and its error paths, the
//! existing-binding policy both ways, field validation, restart, audit expiry.

#[macro_use]
mod common;

use std::time::Duration;

use bsf::config::{AuditConfig, ExistingBinding};
use bsf::BsfConfig;
use common::*;
use serde_json::json;

fn tmp() -> tempfile::TempDir {
    state_dir()
}

async fn register_discover_update_deregister() {
    let dir = tmp();
    let bsf = TestBsf::start(dir.path(), BsfConfig::default()).await;
    let c = client();
    let b = binding(1);
    let r = post(&c, &bsf.url("/pcfBindings"), &b).await;
    assert_eq!(r.status(), 201, "{:?}", body(&r));
    let created = body(&r);
    assert_valid("TS29521_Nbsf_Management", "PcfBinding", &created);
    assert_eq!(created, b);
    let loc = r.header("location").unwrap().to_owned();
    assert!(loc.starts_with(&bsf.url("/pcfBindings/")), "{loc}");

    // Discovery by UE IPv4, alone and with every filter.
    let q = |s: &str| bsf.url(&format!("/pcfBindings?{s}"));
    let r = get(&c, &q("ipv4Addr=10.0.0.1")).await;
    assert_eq!(r.status(), 200);
    assert_eq!(body(&r), b);
    assert_valid("TS29521_Nbsf_Management", "PcfBinding", &body(&r));
    let snssai = enc(r#"{"sst":1,"sd":"000001"}"#);
    let full = format!(
        "ipv4Addr=10.0.0.1&dnn=INTERNET&snssai={snssai}&supi=imsi-001010000000001&gpsi=msisdn-33610000001"
    );
    assert_eq!(get(&c, &q(&full)).await.status(), 200);
    for miss in [
        "ipv4Addr=10.0.0.2",
        "ipv4Addr=10.0.0.1&ipDomain=other",
        "ipv4Addr=10.0.0.1&dnn=ims",
        "ipv4Addr=10.0.0.1&supi=imsi-001019999999999",
        "ipv4Addr=10.0.0.1&gpsi=msisdn-33699999999",
    ] {
        let r = get(&c, &q(miss)).await;
        assert_eq!(r.status(), 204, "{miss}");
        assert!(r.body().is_empty());
    }
    let other_slice = enc(r#"{"sst":2}"#);
    assert_eq!(get(&c, &q(&format!("ipv4Addr=10.0.0.1&snssai={other_slice}"))).await.status(), 204);

    // Update: merge patch, answered with the whole binding.
    let r = merge_patch(
        &c,
        &loc,
        &json!({"pcfFqdn": "pcf2.example.com", "ipv6Prefix": "2001:db8:5::/64"}),
    )
    .await;
    assert_eq!(r.status(), 200, "{:?}", body(&r));
    let updated = body(&r);
    assert_valid("TS29521_Nbsf_Management", "PcfBinding", &updated);
    assert_eq!(updated["pcfFqdn"], "pcf2.example.com");
    assert_eq!(updated["dnn"], "internet");
    let r = get(&c, &q("ipv6Prefix=2001:db8:5::77/128")).await;
    assert_eq!(r.status(), 200);
    assert_eq!(body(&r)["pcfFqdn"], "pcf2.example.com");
    // Removing an address with null.
    let r = merge_patch(&c, &loc, &json!({"ipv6Prefix": null})).await;
    assert_eq!(r.status(), 200);
    assert!(body(&r).get("ipv6Prefix").is_none());
    assert_eq!(get(&c, &q("ipv6Prefix=2001:db8:5::77/128")).await.status(), 204);

    // Deregister.
    assert_eq!(delete(&c, &loc).await.status(), 204);
    problem(&delete(&c, &loc).await, 404, "RESOURCE_NOT_FOUND");
    assert_eq!(get(&c, &q("ipv4Addr=10.0.0.1")).await.status(), 204);
    problem(
        &merge_patch(&c, &loc, &json!({"pcfFqdn": "pcf3.example.com"})).await,
        404,
        "RESOURCE_NOT_FOUND",
    );
    bsf.stop().await;
}

async fn ipv6_prefix_and_mac_discovery() {
    let dir = tmp();
    let bsf = TestBsf::start(dir.path(), BsfConfig::default()).await;
    let c = client();
    let b = json!({
        "ipv6Prefix": "2001:DB8:1:2::/64", "macAddr48": "0A-1B-2C-3D-4E-5F", "dnn": "ims",
        "snssai": {"sst": 1}, "pcfDiamHost": "pcf.example.com", "pcfDiamRealm": "example.com",
    });
    let r = post(&c, &bsf.url("/pcfBindings"), &b).await;
    assert_eq!(r.status(), 201, "{:?}", body(&r));
    let created = body(&r);
    assert_eq!(created["ipv6Prefix"], "2001:db8:1:2::/64", "stored in RFC 5952 form");
    assert_eq!(created["macAddr48"], "0a-1b-2c-3d-4e-5f");
    assert_valid("TS29521_Nbsf_Management", "PcfBinding", &created);
    for found in [
        "ipv6Prefix=2001:db8:1:2::5/128",
        "ipv6Prefix=2001:db8:1:2::/64",
        "macAddr48=0a-1b-2c-3d-4e-5f",
        "macAddr48=0A-1B-2C-3D-4E-5F&dnn=ims",
    ] {
        let r = get(&c, &bsf.url(&format!("/pcfBindings?{}", found.replace("::", "%3A%3A")))).await;
        assert_eq!(r.status(), 200, "{found}");
        assert_eq!(body(&r), created);
    }
    for miss in ["ipv6Prefix=2001:db8:1:3::5/128", "macAddr48=0a-1b-2c-3d-4e-60"] {
        assert_eq!(
            get(&c, &bsf.url(&format!("/pcfBindings?{miss}"))).await.status(),
            204,
            "{miss}"
        );
    }
    bsf.stop().await;
}

async fn discovery_query_errors() {
    let dir = tmp();
    let bsf = TestBsf::start(dir.path(), BsfConfig::default()).await;
    let c = client();
    let q = |s: &str| bsf.url(&format!("/pcfBindings?{s}"));
    let v = problem(&get(&c, &q("dnn=internet")).await, 400, "MANDATORY_QUERY_PARAM_MISSING");
    assert_eq!(params(&v), ["ipv4Addr"]);
    let v = problem(&get(&c, &bsf.url("/pcfBindings")).await, 400, "MANDATORY_QUERY_PARAM_MISSING");
    assert_eq!(params(&v), ["ipv4Addr"]);
    let bad_snssai = enc(r#"{"sst":256}"#);
    let v = problem(
        &get(
            &c,
            &q(&format!(
                "ipv4Addr=10.0.0.300&macAddr48=zz&supi=bob&gpsi=x&dnn=a..b&snssai={bad_snssai}"
            )),
        )
        .await,
        400,
        "INVALID_QUERY_PARAM",
    );
    assert_eq!(params(&v), ["ipv4Addr", "macAddr48", "dnn", "supi", "gpsi", "snssai"]);
    let v = problem(&get(&c, &q("ipv6Prefix=2001:db8::1/129")).await, 400, "INVALID_QUERY_PARAM");
    assert_eq!(params(&v), ["ipv6Prefix"]);
    let v = problem(
        &get(&c, &q("ipDomain=d&macAddr48=0a-1b-2c-3d-4e-5f")).await,
        400,
        "INVALID_QUERY_PARAM",
    );
    assert_eq!(params(&v), ["ipDomain"]);
    let v = problem(&get(&c, &q("ipv4Addr=10.0.0.1&color=blue")).await, 400, "INVALID_QUERY_PARAM");
    assert_eq!(params(&v), ["color"]);
    problem(&get(&c, &q("ipv4Addr=10.0.0.1&snssai=notjson")).await, 400, "INVALID_QUERY_PARAM");
    bsf.stop().await;
}

async fn register_validation_lists_every_wrong_field() {
    let dir = tmp();
    let bsf = TestBsf::start(dir.path(), BsfConfig::default()).await;
    let c = client();
    let url = bsf.url("/pcfBindings");
    let bad = json!({
        "supi": "imsi-12", "gpsi": "tel-1", "ipv4Addr": "10.0.0.256", "ipv6Prefix": "2001:db8::/200",
        "macAddr48": "0a:1b:2c:3d:4e:5f", "dnn": "bad dnn", "snssai": {"sst": 256, "sd": "12345"},
        "pcfFqdn": "pcf", "pcfIpEndPoints": [{"ipv4Address": "1.2.3", "port": 70000}],
        "pcfDiamHost": "pcf.example.com",
    });
    let v = problem(&post(&c, &url, &bad).await, 400, "MANDATORY_IE_INCORRECT");
    assert_eq!(
        params(&v),
        [
            "/ipv4Addr",
            "/ipv6Prefix",
            "/macAddr48",
            "/dnn",
            "/snssai/sst",
            "/snssai/sd",
            "/supi",
            "/gpsi",
            "/pcfFqdn",
            "/pcfIpEndPoints/0/ipv4Address",
            "/pcfIpEndPoints/0/port",
            "/pcfDiamRealm",
        ]
    );
    // Mandatory attributes missing; no UE address; no PCF address.
    let v = problem(
        &post(&c, &url, &json!({"supi": "imsi-001010000000001"})).await,
        400,
        "MANDATORY_IE_MISSING",
    );
    assert_eq!(params(&v), ["/ipv4Addr", "/dnn", "/snssai", "/pcfFqdn"]);
    // ipDomain without ipv4Addr; realm without host.
    let mut b = binding(2);
    b.as_object_mut().unwrap().remove("ipv4Addr");
    b["macAddr48"] = json!("0a-1b-2c-3d-4e-5f");
    b["ipDomain"] = json!("d1");
    b.as_object_mut().unwrap().remove("pcfDiamHost");
    let v = problem(&post(&c, &url, &b).await, 400, "MANDATORY_IE_INCORRECT");
    assert_eq!(params(&v), ["/ipDomain", "/pcfDiamHost"]);
    // Wrong type, malformed JSON, wrong media type.
    problem(&post(&c, &url, &json!([1, 2])).await, 400, "INVALID_MSG_FORMAT");
    let r = c
        .post(&url)
        .header("content-type", "application/json")
        .body("{\"dnn\":")
        .send()
        .await
        .unwrap();
    problem(&r, 400, "INVALID_MSG_FORMAT");
    let r = c.post(&url).header("content-type", "text/plain").body("x").send().await.unwrap();
    assert_eq!(r.status(), 415);
    bsf.stop().await;
}

async fn update_errors() {
    let dir = tmp();
    let bsf = TestBsf::start(dir.path(), BsfConfig::default()).await;
    let c = client();
    let r = post(&c, &bsf.url("/pcfBindings"), &binding(3)).await;
    let loc = r.header("location").unwrap().to_owned();
    let v = problem(
        &merge_patch(&c, &loc, &json!({"dnn": "ims", "supi": "imsi-001010000000009"})).await,
        400,
        "MANDATORY_IE_INCORRECT",
    );
    assert_eq!(params(&v), ["/dnn", "/supi"]);
    let v = problem(
        &merge_patch(&c, &loc, &json!({"pcfFqdn": null})).await,
        400,
        "MANDATORY_IE_INCORRECT",
    );
    assert_eq!(params(&v), ["/pcfFqdn"]);
    let v = problem(
        &merge_patch(&c, &loc, &json!({"ipv4Addr": "1.2.3.4.5"})).await,
        400,
        "MANDATORY_IE_INCORRECT",
    );
    assert_eq!(params(&v), ["/ipv4Addr"]);
    // Removing the only UE address leaves a binding without one.
    let v = problem(
        &merge_patch(&c, &loc, &json!({"ipv4Addr": null})).await,
        400,
        "MANDATORY_IE_MISSING",
    );
    assert_eq!(params(&v), ["/ipv4Addr"]);
    let r =
        c.patch(&loc).header("content-type", "application/json").body("{}").send().await.unwrap();
    assert_eq!(r.status(), 415);
    // Nothing changed.
    let r = get(&c, &bsf.url("/pcfBindings?ipv4Addr=10.0.0.3")).await;
    assert_eq!(body(&r), binding(3));
    bsf.stop().await;
}

async fn register_twice(
    config: BsfConfig,
) -> (TestBsf, tempfile::TempDir, sbi::client::SbiResponse, String) {
    let dir = tmp();
    let bsf = TestBsf::start(dir.path(), config).await;
    let c = client();
    let r = post(&c, &bsf.url("/pcfBindings"), &binding(4)).await;
    assert_eq!(r.status(), 201);
    let first = r.header("location").unwrap().to_owned();
    let mut again = binding(4);
    again["pcfFqdn"] = json!("pcf9.example.com");
    let r = post(&c, &bsf.url("/pcfBindings"), &again).await;
    (bsf, dir, r, first)
}

async fn existing_binding_is_replaced_by_default() {
    let (bsf, _dir, r, first) = register_twice(BsfConfig::default()).await;
    let c = client();
    assert_eq!(r.status(), 201);
    let second = r.header("location").unwrap().to_owned();
    assert_ne!(first, second);
    problem(&delete(&c, &first).await, 404, "RESOURCE_NOT_FOUND");
    let found = get(&c, &bsf.url("/pcfBindings?ipv4Addr=10.0.0.4")).await;
    assert_eq!(body(&found)["pcfFqdn"], "pcf9.example.com");
    // Another slice for the same UE address is another binding.
    let mut other = binding(4);
    other["snssai"] = json!({"sst": 2});
    assert_eq!(post(&c, &bsf.url("/pcfBindings"), &other).await.status(), 201);
    assert_eq!(bsf.bsf.store.count().await.unwrap(), 2);
    bsf.stop().await;
}

async fn existing_binding_is_refused_when_configured() {
    let config = BsfConfig { on_existing_binding: ExistingBinding::Reject, ..BsfConfig::default() };
    let (bsf, _dir, r, first) = register_twice(config).await;
    let v = problem(&r, 403, "EXISTING_BINDING_INFO_FOUND");
    assert_valid("TS29521_Nbsf_Management", "ExtProblemDetails", &v);
    assert_eq!(r.header("location"), Some(first.as_str()), "Location names the existing binding");
    assert_eq!(v["pcfSmFqdn"], "pcf1.example.com");
    assert_eq!(v["pcfSmIpEndPoints"], json!([{"ipv4Address": "192.0.2.10", "port": 8080}]));
    let c = client();
    let found = get(&c, &bsf.url("/pcfBindings?ipv4Addr=10.0.0.4")).await;
    assert_eq!(body(&found)["pcfFqdn"], "pcf1.example.com");
    assert_eq!(bsf.bsf.store.count().await.unwrap(), 1);
    bsf.stop().await;
}

/// Concurrent Registers for one UE address, DNN and S-NSSAI: with the existing binding
/// refused, exactly one wins and the others are told about it; one binding is stored.
async fn concurrent_registers_for_one_ue_leave_one_binding() {
    let config = BsfConfig { on_existing_binding: ExistingBinding::Reject, ..BsfConfig::default() };
    let dir = tmp();
    let bsf = TestBsf::start(dir.path(), config).await;
    let c = client();
    let url = bsf.url("/pcfBindings");
    let posts: Vec<_> = (0..8)
        .map(|n| {
            let (c, url) = (c.clone(), url.clone());
            let mut b = binding(30);
            b["pcfFqdn"] = json!(format!("pcf{n}.example.com"));
            tokio::spawn(async move { post(&c, &url, &b).await.status().as_u16() })
        })
        .collect();
    let mut statuses = Vec::new();
    for p in posts {
        statuses.push(p.await.unwrap());
    }
    statuses.sort_unstable();
    assert_eq!(statuses, [201, 403, 403, 403, 403, 403, 403, 403]);
    assert_eq!(bsf.bsf.store.count().await.unwrap(), 1);
    bsf.stop().await;
}

async fn bindings_and_subscriptions_survive_a_restart() {
    let dir = tmp();
    let c = client();
    let bsf = TestBsf::start(dir.path(), BsfConfig::default()).await;
    let mut locs = Vec::new();
    for n in 10..20 {
        let r = post(&c, &bsf.url("/pcfBindings"), &binding(n)).await;
        assert_eq!(r.status(), 201);
        locs.push(r.header("location").unwrap().to_owned());
    }
    let sub = json!({"events": ["PCF_PDU_SESSION_BINDING_REGISTRATION"], "notifUri": "http://127.0.0.1:9/n",
        "notifCorreId": "c1", "supi": "imsi-001010000000001"});
    let r = post(&c, &bsf.url("/subscriptions"), &sub).await;
    assert_eq!(r.status(), 201);
    let sub_loc = r.header("location").unwrap().to_owned();
    bsf.stop().await;

    let bsf = TestBsf::start(dir.path(), BsfConfig::default()).await;
    for n in 10..20 {
        let r = get(&c, &bsf.url(&format!("/pcfBindings?ipv4Addr=10.0.0.{n}"))).await;
        assert_eq!(r.status(), 200, "binding {n} survived");
        assert_eq!(body(&r), binding(n));
    }
    let sub_loc = sub_loc.replace(&sub_loc[..sub_loc.find("/nbsf").unwrap()], &bsf.base);
    assert_eq!(delete(&c, &sub_loc).await.status(), 204, "the subscription survived");
    let first = locs[0].replace(&locs[0][..locs[0].find("/nbsf").unwrap()], &bsf.base);
    assert_eq!(delete(&c, &first).await.status(), 204);
    bsf.stop().await;
}

async fn audit_removes_old_bindings_at_a_bounded_rate() {
    let dir = tmp();
    let config = BsfConfig {
        audit: AuditConfig { max_age_secs: 1, max_per_sec: 20, batch: 5, idle_ms: 50 },
        ..BsfConfig::default()
    };
    let bsf = TestBsf::start(dir.path(), config).await;
    let c = client();
    for n in 100..140 {
        assert_eq!(post(&c, &bsf.url("/pcfBindings"), &binding(n)).await.status(), 201);
    }
    // Nothing is a second old yet.
    assert_eq!(bsf.bsf.audit_removed.load(std::sync::atomic::Ordering::Relaxed), 0);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    // From here on 40 stale bindings go at 20/s: not all of them within the next second.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let after_1s = bsf.bsf.audit_removed.load(std::sync::atomic::Ordering::Relaxed);
    assert!(after_1s > 0 && after_1s < 40, "removed {after_1s} in about a second at 20/s");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while bsf.bsf.store.count().await.unwrap() > 0 {
        assert!(std::time::Instant::now() < deadline, "audit did not finish");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(get(&c, &bsf.url("/pcfBindings?ipv4Addr=10.0.0.100")).await.status(), 204);
    // A fresh binding is left alone.
    assert_eq!(post(&c, &bsf.url("/pcfBindings"), &binding(200)).await.status(), 201);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(bsf.bsf.store.count().await.unwrap(), 1);
    bsf.stop().await;
}

async fn subscriptions_and_binding_notifications() {
    let dir = tmp();
    let bsf = TestBsf::start(dir.path(), BsfConfig::default()).await;
    let c = client();
    let mut sink = Sink::start().await;
    let supi = binding(7)["supi"].as_str().unwrap().to_owned();
    let sub = json!({
        "events": ["PCF_PDU_SESSION_BINDING_REGISTRATION", "PCF_PDU_SESSION_BINDING_DEREGISTRATION"],
        "notifUri": sink.url, "notifCorreId": "corr-7", "supi": supi,
        "snssaiDnnPairs": {"dnn": "internet", "snssai": {"sst": 1, "sd": "000001"}},
    });
    let r = post(&c, &bsf.url("/subscriptions"), &sub).await;
    assert_eq!(r.status(), 201, "{:?}", body(&r));
    assert_valid("TS29521_Nbsf_Management", "BsfSubscriptionResp", &body(&r));
    let sub_loc = r.header("location").unwrap().to_owned();
    assert!(sub_loc.starts_with(&bsf.url("/subscriptions/")));

    // Registration of a binding of this SUPI (and DNN/S-NSSAI) is notified.
    let r = post(&c, &bsf.url("/pcfBindings"), &binding(7)).await;
    let loc = r.header("location").unwrap().to_owned();
    let n = sink.next().await;
    assert_valid("TS29521_Nbsf_Management", "BsfNotification", &n);
    assert_eq!(n["notifCorreId"], "corr-7");
    assert_eq!(n["eventNotifs"][0]["event"], "PCF_PDU_SESSION_BINDING_REGISTRATION");
    let info = &n["eventNotifs"][0]["pcfForPduSessInfos"][0];
    assert_eq!(info["ipv4Addr"], "10.0.0.7");
    assert_eq!(info["pcfFqdn"], "pcf1.example.com");
    // Another SUPI, or another slice, is not.
    post(&c, &bsf.url("/pcfBindings"), &binding(8)).await;
    let mut other_slice = binding(7);
    other_slice["snssai"] = json!({"sst": 2});
    let r = post(&c, &bsf.url("/pcfBindings"), &other_slice).await;
    let other_loc = r.header("location").unwrap().to_owned();
    sink.quiet().await;
    assert_eq!(delete(&c, &other_loc).await.status(), 204);
    sink.quiet().await;
    // Deregistration is notified.
    assert_eq!(delete(&c, &loc).await.status(), 204);
    let n = sink.next().await;
    assert_valid("TS29521_Nbsf_Management", "BsfNotification", &n);
    assert_eq!(n["eventNotifs"][0]["event"], "PCF_PDU_SESSION_BINDING_DEREGISTRATION");

    // Replace: only deregistrations now.
    let mut dereg_only = sub.clone();
    dereg_only["events"] = json!(["PCF_PDU_SESSION_BINDING_DEREGISTRATION"]);
    let r = c.put(&sub_loc).json(&dereg_only).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(body(&r), dereg_only);
    let r = post(&c, &bsf.url("/pcfBindings"), &binding(7)).await;
    let loc = r.header("location").unwrap().to_owned();
    sink.quiet().await;
    // A failing sink gets retries.
    sink.fail_first.store(1, std::sync::atomic::Ordering::SeqCst);
    delete(&c, &loc).await;
    assert_eq!(
        sink.next().await["eventNotifs"][0]["event"],
        "PCF_PDU_SESSION_BINDING_DEREGISTRATION"
    );

    // Unsubscribe; errors.
    assert_eq!(delete(&c, &sub_loc).await.status(), 204);
    problem(&delete(&c, &sub_loc).await, 404, "RESOURCE_NOT_FOUND");
    problem(&c.put(&sub_loc).json(&sub).send().await.unwrap(), 404, "RESOURCE_NOT_FOUND");
    post(&c, &bsf.url("/pcfBindings"), &binding(7)).await;
    sink.quiet().await;
    let bad = json!({"events": ["NOPE"], "notifUri": "not a uri", "supi": "x"});
    let v = problem(&post(&c, &bsf.url("/subscriptions"), &bad).await, 400, "MANDATORY_IE_MISSING");
    assert_eq!(params(&v), ["/events/0", "/notifUri", "/notifCorreId", "/supi"]);
    bsf.stop().await;
}

async fn subscriptions_are_bounded() {
    let dir = tmp();
    let config = BsfConfig { max_subscriptions: 1, ..BsfConfig::default() };
    let bsf = TestBsf::start(dir.path(), config).await;
    let c = client();
    let sub = json!({"events": ["PCF_PDU_SESSION_BINDING_REGISTRATION"], "notifUri": "http://127.0.0.1:9/n",
        "notifCorreId": "c", "supi": "imsi-001010000000001"});
    assert_eq!(post(&c, &bsf.url("/subscriptions"), &sub).await.status(), 201);
    problem(&post(&c, &bsf.url("/subscriptions"), &sub).await, 403, "INSUFFICIENT_RESOURCES");
    bsf.stop().await;
}

/// Waits until the BSF reports ready: its UE address index is loaded.
async fn ready(c: &sbi::client::SbiClient, bsf: &TestBsf) {
    for _ in 0..200 {
        if get(c, &format!("{}/healthz/ready", bsf.base)).await.status() == 200 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the BSF did not become ready");
}

/// Each query's answer: the binding with that pcfFqdn (200), or none (204).
async fn expect_found(
    c: &sbi::client::SbiClient,
    bsf: &TestBsf,
    index: bool,
    cases: &[(&str, Option<&str>)],
) {
    for (s, want) in cases {
        let r = get(c, &bsf.url(&format!("/pcfBindings?{s}"))).await;
        match want {
            Some(f) => {
                assert_eq!(r.status(), 200, "{s} (index {index})");
                assert_eq!(body(&r)["pcfFqdn"], *f, "{s} (index {index})");
            }
            None => assert_eq!(r.status(), 204, "{s} (index {index})"),
        }
    }
}

/// Discovery after every kind of write, with filters, by IPv4 (with and without IP domain) and
/// IPv6 (own and additional prefixes), after a restart: the same answers whether the UE address
/// index keeps the documents (`discovery_index`, SQLite) or Discovery reads the store.
async fn discovery_follows_every_write() {
    for discovery_index in [true, false] {
        let dir = tmp();
        let config = BsfConfig { discovery_index, ..BsfConfig::default() };
        let bsf = TestBsf::start(dir.path(), config.clone()).await;
        let c = client();
        ready(&c, &bsf).await;
        let url = bsf.url("/pcfBindings");
        let mut a = binding(9);
        a["pcfFqdn"] = json!("pcf-a.example.com");
        let mut b = binding(9);
        b["dnn"] = json!("ims");
        b["supi"] = json!("imsi-001010000000099");
        b["pcfFqdn"] = json!("pcf-b.example.com");
        let r = post(&c, &url, &a).await;
        assert_eq!(r.status(), 201);
        let loc_a = r.header("location").unwrap().to_owned();
        tokio::time::sleep(Duration::from_millis(3)).await;
        let r = post(&c, &url, &b).await;
        assert_eq!(r.status(), 201);
        let loc_b = r.header("location").unwrap().to_owned();
        let sl = enc(r#"{"sst":1,"sd":"000001"}"#);
        let other_sl = enc(r#"{"sst":1,"sd":"000002"}"#);
        let with_sl = format!("ipv4Addr=10.0.0.9&snssai={sl}&dnn=internet");
        let with_other_sl = format!("ipv4Addr=10.0.0.9&snssai={other_sl}");
        expect_found(
            &c,
            &bsf,
            discovery_index,
            &[
                ("ipv4Addr=10.0.0.9", Some("pcf-b.example.com")),
                ("ipv4Addr=10.0.0.9&dnn=INTERNET", Some("pcf-a.example.com")),
                ("ipv4Addr=10.0.0.9&dnn=ims&supi=imsi-001010000000099", Some("pcf-b.example.com")),
                ("ipv4Addr=10.0.0.9&dnn=ims&supi=imsi-001010000000009", None),
                ("ipv4Addr=10.0.0.9&gpsi=msisdn-33610000009", Some("pcf-b.example.com")),
                ("ipv4Addr=10.0.0.9&gpsi=msisdn-33610000008", None),
                (&with_sl, Some("pcf-a.example.com")),
                (&with_other_sl, None),
                ("ipv4Addr=10.0.0.9&ipDomain=d1", None),
                ("ipv4Addr=10.0.0.10", None),
            ],
        )
        .await;
        // A Register for the same address, DNN and slice replaces A.
        let mut a2 = a.clone();
        a2["pcfFqdn"] = json!("pcf-a2.example.com");
        assert_eq!(post(&c, &url, &a2).await.status(), 201);
        problem(&delete(&c, &loc_a).await, 404, "RESOURCE_NOT_FOUND");
        // An Update moves B to another address.
        let r = merge_patch(&c, &loc_b, &json!({"ipv4Addr": "10.0.0.10", "ipDomain": "d1"})).await;
        assert_eq!(r.status(), 200);
        expect_found(
            &c,
            &bsf,
            discovery_index,
            &[
                ("ipv4Addr=10.0.0.9", Some("pcf-a2.example.com")),
                ("ipv4Addr=10.0.0.9&dnn=ims", None),
                ("ipv4Addr=10.0.0.10", Some("pcf-b.example.com")),
                ("ipv4Addr=10.0.0.10&ipDomain=d1", Some("pcf-b.example.com")),
                ("ipv4Addr=10.0.0.10&ipDomain=d2", None),
            ],
        )
        .await;
        // IPv6: the binding's own prefix and an additional one, at the query's length or shorter.
        let v6 = json!({"ipv6Prefix": "2001:db8:7:1::/64", "addIpv6Prefixes": ["2001:db8:8::/48"],
            "dnn": "internet", "snssai": {"sst": 1}, "pcfFqdn": "pcf-6.example.com"});
        let r = post(&c, &url, &v6).await;
        assert_eq!(r.status(), 201);
        let loc_6 = r.header("location").unwrap().to_owned();
        let v6_cases = [
            ("ipv6Prefix=2001%3Adb8%3A7%3A1%3A%3A5%2F128", Some("pcf-6.example.com")),
            ("ipv6Prefix=2001%3Adb8%3A8%3A9%3A%3A1%2F128", Some("pcf-6.example.com")),
            ("ipv6Prefix=2001%3Adb8%3A8%3A9%3A%3A1%2F128&dnn=ims", None),
            ("ipv6Prefix=2001%3Adb8%3A7%3A2%3A%3A5%2F128", None),
        ];
        expect_found(&c, &bsf, discovery_index, &v6_cases).await;
        bsf.stop().await;

        // After a restart (the index loaded from the store again).
        let bsf = TestBsf::start(dir.path(), config).await;
        ready(&c, &bsf).await;
        expect_found(
            &c,
            &bsf,
            discovery_index,
            &[
                ("ipv4Addr=10.0.0.9", Some("pcf-a2.example.com")),
                ("ipv4Addr=10.0.0.10&ipDomain=d1", Some("pcf-b.example.com")),
            ],
        )
        .await;
        expect_found(&c, &bsf, discovery_index, &v6_cases).await;
        let loc_6 = loc_6.replace(&loc_6[..loc_6.find("/nbsf").unwrap()], &bsf.base);
        assert_eq!(delete(&c, &loc_6).await.status(), 204);
        expect_found(
            &c,
            &bsf,
            discovery_index,
            &[("ipv6Prefix=2001%3Adb8%3A8%3A9%3A%3A1%2F128", None)],
        )
        .await;
        bsf.stop().await;
    }
}

/// With `discovery_index` (SQLite), a loaded BSF answers Discovery by UE address from memory,
/// and queries the index does not cover (a MAC address) from the store: a row removed behind
/// the BSF's back is still found by its IPv4 address, not by its MAC address.
#[tokio::test]
async fn discovery_by_ue_address_is_answered_from_memory() {
    for discovery_index in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let config = BsfConfig { discovery_index, ..BsfConfig::default() };
        let bsf = TestBsf::start(dir.path(), config).await;
        let c = client();
        ready(&c, &bsf).await;
        let mut b = binding(77);
        b["macAddr48"] = json!("0a-1b-2c-3d-4e-77");
        let r = post(&c, &bsf.url("/pcfBindings"), &b).await;
        assert_eq!(r.status(), 201);
        let db = rusqlite::Connection::open(dir.path().join("bsf.db")).unwrap();
        db.busy_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(db.execute("DELETE FROM bsf_pcf_binding", []).unwrap(), 1);
        let by_ip = get(&c, &bsf.url("/pcfBindings?ipv4Addr=10.0.0.77")).await;
        let by_mac = get(&c, &bsf.url("/pcfBindings?macAddr48=0a-1b-2c-3d-4e-77")).await;
        if discovery_index {
            assert_eq!(by_ip.status(), 200);
            assert_eq!(body(&by_ip), b);
        } else {
            assert_eq!(by_ip.status(), 204);
        }
        assert_eq!(by_mac.status(), 204);
        bsf.stop().await;
    }
}

testkit::on_both_backends!(
    register_discover_update_deregister,
    ipv6_prefix_and_mac_discovery,
    discovery_query_errors,
    register_validation_lists_every_wrong_field,
    update_errors,
    existing_binding_is_replaced_by_default,
    existing_binding_is_refused_when_configured,
    bindings_and_subscriptions_survive_a_restart,
    concurrent_registers_for_one_ue_leave_one_binding,
    audit_removes_old_bindings_at_a_bounded_rate,
    subscriptions_and_binding_notifications,
    subscriptions_are_bounded,
    discovery_follows_every_write,
);
