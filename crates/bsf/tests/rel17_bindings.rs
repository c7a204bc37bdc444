//! The Rel-17 resources over real sockets, on SQLite and on MariaDB: PCF for a UE bindings (with their subscription
//! events) and PCF for an MBS session bindings.

#[macro_use]
mod common;

use bsf::config::ExistingBinding;
use bsf::BsfConfig;
use common::*;
use serde_json::json;

fn ue_binding(n: u32) -> serde_json::Value {
    json!({
        "supi": format!("imsi-00101{n:010}"),
        "gpsi": format!("msisdn-3361{n:07}"),
        "pcfForUeFqdn": "pcf-ue.example.com",
        "pcfForUeIpEndPoints": [{"ipv4Address": "192.0.2.20", "port": 80}],
        "pcfId": "0b5f3c2a-1111-4222-8333-444455556666",
    })
}

fn mbs_binding() -> serde_json::Value {
    json!({
        "mbsSessionId": {"tmgi": {"mbsServiceId": "A1B2C3", "plmnId": {"mcc": "001", "mnc": "01"}}},
        "pcfFqdn": "pcf-mbs.example.com",
    })
}

async fn pcf_ue_bindings_lifecycle_errors_and_events() {
    let dir = state_dir();
    let bsf = TestBsf::start(dir.path(), BsfConfig::default()).await;
    let c = client();
    let mut sink = Sink::start().await;
    let sub = json!({"events": ["PCF_UE_BINDING_REGISTRATION", "PCF_UE_BINDING_DEREGISTRATION"],
        "notifUri": sink.url, "notifCorreId": "ue-1", "supi": ue_binding(1)["supi"]});
    assert_eq!(post(&c, &bsf.url("/subscriptions"), &sub).await.status(), 201);

    let r = post(&c, &bsf.url("/pcf-ue-bindings"), &ue_binding(1)).await;
    assert_eq!(r.status(), 201, "{:?}", body(&r));
    assert_valid("TS29521_Nbsf_Management", "PcfForUeBinding", &body(&r));
    let loc = r.header("location").unwrap().to_owned();
    assert!(loc.starts_with(&bsf.url("/pcf-ue-bindings/")));
    let n = sink.next().await;
    assert_valid("TS29521_Nbsf_Management", "BsfNotification", &n);
    assert_eq!(n["eventNotifs"][0]["event"], "PCF_UE_BINDING_REGISTRATION");
    assert_eq!(n["eventNotifs"][0]["pcfForUeInfo"]["pcfFqdn"], "pcf-ue.example.com");

    for q in [
        "supi=imsi-001010000000001",
        "gpsi=msisdn-33610000001",
        "supi=imsi-001010000000001&gpsi=msisdn-33610000001",
    ] {
        let r = get(&c, &bsf.url(&format!("/pcf-ue-bindings?{q}"))).await;
        assert_eq!(r.status(), 200, "{q}");
        assert_eq!(body(&r), json!([ue_binding(1)]), "{q}");
    }
    let r = get(&c, &bsf.url("/pcf-ue-bindings?supi=imsi-001019999999999")).await;
    assert_eq!(body(&r), json!([]));
    problem(&get(&c, &bsf.url("/pcf-ue-bindings")).await, 400, "MANDATORY_QUERY_PARAM_MISSING");
    let v = problem(
        &get(&c, &bsf.url("/pcf-ue-bindings?supi=x&gpsi=y")).await,
        400,
        "INVALID_QUERY_PARAM",
    );
    assert_eq!(params(&v), ["supi", "gpsi"]);

    let r = merge_patch(&c, &loc, &json!({"pcfForUeFqdn": "pcf-ue2.example.com"})).await;
    assert_eq!(r.status(), 200);
    assert_valid("TS29521_Nbsf_Management", "PcfForUeBinding", &body(&r));
    assert_eq!(body(&r)["pcfForUeFqdn"], "pcf-ue2.example.com");
    let v = problem(
        &merge_patch(&c, &loc, &json!({"supi": "imsi-001010000000002"})).await,
        400,
        "MANDATORY_IE_INCORRECT",
    );
    assert_eq!(params(&v), ["/supi"]);

    let v = problem(
        &post(&c, &bsf.url("/pcf-ue-bindings"), &json!({"gpsi": "bad"})).await,
        400,
        "MANDATORY_IE_MISSING",
    );
    assert_eq!(params(&v), ["/supi", "/gpsi", "/pcfForUeFqdn"]);

    assert_eq!(delete(&c, &loc).await.status(), 204);
    assert_eq!(sink.next().await["eventNotifs"][0]["event"], "PCF_UE_BINDING_DEREGISTRATION");
    problem(&delete(&c, &loc).await, 404, "RESOURCE_NOT_FOUND");
    problem(
        &merge_patch(&c, &loc, &json!({"pcfId": "0b5f3c2a-1111-4222-8333-444455556666"})).await,
        404,
        "RESOURCE_NOT_FOUND",
    );
    bsf.stop().await;
}

async fn pcf_ue_binding_for_a_known_supi_is_refused_when_configured() {
    let dir = state_dir();
    let config = BsfConfig { on_existing_binding: ExistingBinding::Reject, ..BsfConfig::default() };
    let bsf = TestBsf::start(dir.path(), config).await;
    let c = client();
    let r = post(&c, &bsf.url("/pcf-ue-bindings"), &ue_binding(2)).await;
    let first = r.header("location").unwrap().to_owned();
    let r = post(&c, &bsf.url("/pcf-ue-bindings"), &ue_binding(2)).await;
    problem(&r, 403, "EXISTING_BINDING_INFO_FOUND");
    assert_eq!(r.header("location"), Some(first.as_str()));
    bsf.stop().await;
}

async fn pcf_mbs_bindings_lifecycle_and_errors() {
    let dir = state_dir();
    let config = BsfConfig { on_existing_binding: ExistingBinding::Reject, ..BsfConfig::default() };
    let bsf = TestBsf::start(dir.path(), config).await;
    let c = client();
    let r = post(&c, &bsf.url("/pcf-mbs-bindings"), &mbs_binding()).await;
    assert_eq!(r.status(), 201, "{:?}", body(&r));
    assert_valid("TS29521_Nbsf_Management", "PcfMbsBinding", &body(&r));
    let loc = r.header("location").unwrap().to_owned();
    assert!(loc.starts_with(&bsf.url("/pcf-mbs-bindings/")));

    // The same MBS session (service id in another case): 403 MbsExtProblemDetails.
    let mut again = mbs_binding();
    again["mbsSessionId"]["tmgi"]["mbsServiceId"] = json!("a1b2c3");
    let r = post(&c, &bsf.url("/pcf-mbs-bindings"), &again).await;
    let v = problem(&r, 403, "EXISTING_BINDING_INFO_FOUND");
    assert_valid("TS29521_Nbsf_Management", "MbsExtProblemDetails", &v);
    assert_eq!(v["pcfFqdn"], "pcf-mbs.example.com");
    assert_eq!(r.header("location"), Some(loc.as_str()));

    let id = enc(r#"{"tmgi":{"mbsServiceId":"a1b2c3","plmnId":{"mcc":"001","mnc":"01"}}}"#);
    let r = get(&c, &bsf.url(&format!("/pcf-mbs-bindings?mbs-session-id={id}"))).await;
    assert_eq!(r.status(), 200);
    assert_eq!(body(&r), json!([mbs_binding()]));
    let other = enc(
        r#"{"ssm":{"sourceIpAddr":{"ipv4Addr":"10.0.0.1"},"destIpAddr":{"ipv4Addr":"232.0.0.1"}}}"#,
    );
    assert_eq!(
        body(&get(&c, &bsf.url(&format!("/pcf-mbs-bindings?mbs-session-id={other}"))).await),
        json!([])
    );
    problem(&get(&c, &bsf.url("/pcf-mbs-bindings")).await, 400, "MANDATORY_QUERY_PARAM_MISSING");
    let bad = enc(r#"{"tmgi":{"mbsServiceId":"xyz"}}"#);
    problem(
        &get(&c, &bsf.url(&format!("/pcf-mbs-bindings?mbs-session-id={bad}"))).await,
        400,
        "INVALID_QUERY_PARAM",
    );

    let v = problem(
        &post(
            &c,
            &bsf.url("/pcf-mbs-bindings"),
            &json!({"mbsSessionId": {"nid": "1"}, "pcfFqdn": "x"}),
        )
        .await,
        400,
        "MANDATORY_IE_MISSING",
    );
    assert_eq!(params(&v), ["/mbsSessionId/nid", "/mbsSessionId/tmgi", "/pcfFqdn"]);

    let r = merge_patch(&c, &loc, &json!({"pcfFqdn": "pcf-mbs2.example.com"})).await;
    assert_eq!(r.status(), 200);
    assert_valid("TS29521_Nbsf_Management", "PcfMbsBinding", &body(&r));
    problem(
        &merge_patch(&c, &loc, &json!({"mbsSessionId": null})).await,
        400,
        "MANDATORY_IE_INCORRECT",
    );
    assert_eq!(delete(&c, &loc).await.status(), 204);
    problem(&delete(&c, &loc).await, 404, "RESOURCE_NOT_FOUND");
    bsf.stop().await;
}

/// Rel-17 addIpv6Prefixes / addMacAddrs: Discovery by any of them finds the binding; an Update
/// replaces them; a Deregister removes them with the binding.
async fn additional_ipv6_prefixes_and_mac_addresses_are_discoverable() {
    let dir = state_dir();
    let bsf = TestBsf::start(dir.path(), BsfConfig::default()).await;
    let c = client();
    let b = json!({
        "supi": "imsi-001010000000042",
        "ipv6Prefix": "2001:db8:1::/64",
        "addIpv6Prefixes": ["2001:db8:2::/64", "2001:DB8:3::/64"],
        "macAddr48": "00-11-22-33-44-55",
        "addMacAddrs": ["AA-BB-CC-DD-EE-FF"],
        "dnn": "internet",
        "snssai": {"sst": 1},
        "pcfFqdn": "pcf1.example.com",
    });
    let r = post(&c, &bsf.url("/pcfBindings"), &b).await;
    assert_eq!(r.status(), 201, "{:?}", body(&r));
    let created = body(&r);
    assert_valid("TS29521_Nbsf_Management", "PcfBinding", &created);
    assert_eq!(created["addIpv6Prefixes"], json!(["2001:db8:2::/64", "2001:db8:3::/64"]));
    assert_eq!(created["addMacAddrs"], json!(["aa-bb-cc-dd-ee-ff"]));
    let loc = r.header("location").unwrap().to_owned();
    let q = |s: &str| bsf.url(&format!("/pcfBindings?{s}"));
    for query in [
        "ipv6Prefix=2001%3Adb8%3A1%3A%3A1%2F128",
        "ipv6Prefix=2001%3Adb8%3A3%3A%3A9%2F128",
        "ipv6Prefix=2001%3Adb8%3A2%3A%3A%2F64",
        "macAddr48=00-11-22-33-44-55",
        "macAddr48=aa-bb-cc-dd-ee-ff",
    ] {
        let r = get(&c, &q(query)).await;
        assert_eq!(r.status(), 200, "{query}");
        assert_eq!(body(&r)["supi"], "imsi-001010000000042", "{query}");
    }
    assert_eq!(get(&c, &q("ipv6Prefix=2001%3Adb8%3A4%3A%3A1%2F128")).await.status(), 204);

    // An update replaces the additional keys.
    let r = merge_patch(&c, &loc, &json!({"addIpv6Prefixes": ["2001:db8:9::/64"]})).await;
    assert_eq!(r.status(), 200, "{:?}", body(&r));
    assert_eq!(get(&c, &q("ipv6Prefix=2001%3Adb8%3A3%3A%3A9%2F128")).await.status(), 204);
    assert_eq!(get(&c, &q("ipv6Prefix=2001%3Adb8%3A9%3A%3A9%2F128")).await.status(), 200);
    assert_eq!(get(&c, &q("macAddr48=aa-bb-cc-dd-ee-ff")).await.status(), 200);

    assert_eq!(delete(&c, &loc).await.status(), 204);
    assert_eq!(get(&c, &q("macAddr48=aa-bb-cc-dd-ee-ff")).await.status(), 204);
    assert_eq!(get(&c, &q("ipv6Prefix=2001%3Adb8%3A9%3A%3A9%2F128")).await.status(), 204);
    // No additional-key row outlives its binding: store::sqlite's additional_keys_follow_their_binding.
    bsf.stop().await;
}

testkit::on_both_backends!(
    pcf_ue_bindings_lifecycle_errors_and_events,
    pcf_ue_binding_for_a_known_supi_is_refused_when_configured,
    pcf_mbs_bindings_lifecycle_and_errors,
    additional_ipv6_prefixes_and_mac_addresses_are_discoverable,
);
