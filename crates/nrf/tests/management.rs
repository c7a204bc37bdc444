//! Nnrf_NFManagement over real sockets: every operation, its error paths, notifications to a
//! test callback server, heartbeat expiry and restart.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{json, Value};

use common::*;
use nrf::NrfConfig;

async fn register_retrieve_replace_and_deregister() {
    let dir = state_dir();
    let nrf = TestNrf::start(dir.path(), NrfConfig::default()).await;
    let c = client();
    let id = uuid(1);
    let url = nrf.nfm(&format!("/nf-instances/{id}"));

    // No heartBeatTimer proposed: the NRF's own (10 s) comes back.
    let mut p = profile(&id, "UDR");
    p.as_object_mut().unwrap().remove("heartBeatTimer");
    p["vendorExtension"] = json!({"kept": [1, 2]});
    let r = put(&c, &url, &p).await;
    assert_eq!(r.status(), 201, "{:?}", body(&r));
    assert_eq!(r.header("location"), Some(url.as_str()));
    let b = body(&r);
    assert_eq!(b["heartBeatTimer"], 10);
    assert_eq!(b["vendorExtension"]["kept"], json!([1, 2]), "unknown attributes round-trip");
    assert_valid("TS29510_Nnrf_NFManagement", "NFProfile", &b);

    // Out of range: replaced; in range: kept. A second PUT is a replacement (200).
    p["heartBeatTimer"] = json!(100_000);
    let r = put(&c, &url, &p).await;
    assert_eq!(r.status(), 200);
    assert!(r.header("location").is_none());
    assert_eq!(body(&r)["heartBeatTimer"], 10);
    p["heartBeatTimer"] = json!(60);
    assert_eq!(body(&put(&c, &url, &p).await)["heartBeatTimer"], 60);

    let r = c.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.header("etag").is_some());
    assert_eq!(body(&r)["heartBeatTimer"], 60);
    assert_valid("TS29510_Nnrf_NFManagement", "NFProfile", &body(&r));

    let r = c.delete(&url).send().await.unwrap();
    assert_eq!(r.status(), 204);
    problem(&c.get(&url).send().await.unwrap(), 404, "RESOURCE_NOT_FOUND");
    problem(&c.delete(&url).send().await.unwrap(), 404, "RESOURCE_NOT_FOUND");
    nrf.stop().await;
}

async fn register_rejects_bad_profiles() {
    let dir = state_dir();
    let config = NrfConfig { max_profile_bytes: 2048, ..NrfConfig::default() };
    let nrf = TestNrf::start(dir.path(), config).await;
    let c = client();
    let id = uuid(2);
    let url = nrf.nfm(&format!("/nf-instances/{id}"));

    let r = c.put(&url).header("content-type", "application/json").body("{").send().await.unwrap();
    problem(&r, 400, "INVALID_MSG_FORMAT");

    let r = put(&c, &url, &profile(&uuid(3), "UDR")).await;
    let v = problem(&r, 400, "MANDATORY_IE_INCORRECT");
    assert_eq!(v["invalidParams"][0]["param"], "/nfInstanceId");

    let r = put(&c, &nrf.nfm("/nf-instances/not-a-uuid"), &profile("not-a-uuid", "UDR")).await;
    problem(&r, 400, "MANDATORY_IE_INCORRECT");

    let r = put(&c, &url, &profile(&id, "TOASTER")).await;
    let v = problem(&r, 400, "MANDATORY_IE_INCORRECT");
    assert_eq!(v["invalidParams"][0]["param"], "/nfType");

    let mut p = profile(&id, "UDR");
    p["nfStatus"] = json!("SLEEPING");
    let v = problem(&put(&c, &url, &p).await, 400, "MANDATORY_IE_INCORRECT");
    assert_eq!(v["invalidParams"][0]["param"], "/nfStatus");

    p.as_object_mut().unwrap().remove("nfStatus");
    let v = problem(&put(&c, &url, &p).await, 400, "MANDATORY_IE_MISSING");
    assert_eq!(v["invalidParams"][0]["param"], "/nfStatus");

    let mut p = profile(&id, "UDR");
    p.as_object_mut().unwrap().remove("ipv4Addresses");
    problem(&put(&c, &url, &p).await, 400, "MANDATORY_IE_MISSING");

    let mut p = profile(&id, "UDR");
    p["priority"] = json!("high");
    let v = problem(&put(&c, &url, &p).await, 400, "MANDATORY_IE_INCORRECT");
    assert_eq!(v["invalidParams"][0]["param"], "/priority");

    let mut p = profile(&id, "UDR");
    p["padding"] = json!("x".repeat(4096));
    problem(&put(&c, &url, &p).await, 413, "PAYLOAD_TOO_LARGE");

    let r = c.put(&url).header("content-type", "text/plain").body("hi").send().await.unwrap();
    problem(&r, 415, "UNSUPPORTED_MEDIA_TYPE");

    // Nothing of the above was registered.
    problem(&c.get(&url).send().await.unwrap(), 404, "RESOURCE_NOT_FOUND");
    nrf.stop().await;
}

async fn patch_updates_and_heartbeats() {
    let dir = state_dir();
    let config = NrfConfig { max_profile_bytes: 2048, ..NrfConfig::default() };
    let nrf = TestNrf::start(dir.path(), config).await;
    let c = client();
    let id = uuid(4);
    let url = nrf.nfm(&format!("/nf-instances/{id}"));
    assert_eq!(put(&c, &url, &profile(&id, "PCF")).await.status(), 201);

    // A heartbeat: 204, nothing else.
    let r =
        patch(&c, &url, &json!([{"op": "replace", "path": "/nfStatus", "value": "REGISTERED"}]))
            .await;
    assert_eq!(r.status(), 204);
    let r = patch(&c, &url, &json!([{"op": "add", "path": "/load", "value": 42}])).await;
    assert_eq!(r.status(), 204);
    assert_eq!(body(&c.get(&url).send().await.unwrap())["load"], 42);

    // A real update: 200 with the whole profile.
    let r = patch(&c, &url, &json!([{"op": "add", "path": "/locality", "value": "east"}])).await;
    assert_eq!(r.status(), 200);
    assert_eq!(body(&r)["locality"], "east");
    assert_eq!(body(&r)["load"], 42);
    assert_valid("TS29510_Nnrf_NFManagement", "NFProfile", &body(&r));
    let etag = r.header("etag").unwrap().to_owned();

    // Conditional update.
    let r = c
        .patch(&url)
        .header("content-type", "application/json-patch+json")
        .header("if-match", "\"999\"")
        .body(r#"[{"op":"add","path":"/capacity","value":5}]"#)
        .send()
        .await
        .unwrap();
    problem(&r, 412, "PRECONDITION_FAILED");
    let r = c
        .patch(&url)
        .header("content-type", "application/json-patch+json")
        .header("if-match", etag.as_str())
        .body(r#"[{"op":"add","path":"/capacity","value":5}]"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    // Errors: failing test op (nothing applied), invalid result, nfType change, wrong media
    // type, unknown instance, oversized result.
    let r = patch(
        &c,
        &url,
        &json!([{"op": "replace", "path": "/load", "value": 1},
                {"op": "test", "path": "/nfStatus", "value": "SUSPENDED"}]),
    )
    .await;
    problem(&r, 409, "MANDATORY_IE_INCORRECT");
    assert_eq!(body(&c.get(&url).send().await.unwrap())["load"], 42);
    let r =
        patch(&c, &url, &json!([{"op": "replace", "path": "/nfStatus", "value": "NAPPING"}])).await;
    problem(&r, 400, "MANDATORY_IE_INCORRECT");
    let r = patch(&c, &url, &json!([{"op": "replace", "path": "/nfType", "value": "UDR"}])).await;
    problem(&r, 403, "MODIFICATION_NOT_ALLOWED");
    let r = c
        .patch(&url)
        .header("content-type", "application/merge-patch+json")
        .body(r#"{"load":1}"#)
        .send()
        .await
        .unwrap();
    problem(&r, 415, "UNSUPPORTED_MEDIA_TYPE");
    let missing = nrf.nfm(&format!("/nf-instances/{}", uuid(99)));
    let r = patch(&c, &missing, &json!([{"op": "add", "path": "/load", "value": 1}])).await;
    problem(&r, 404, "RESOURCE_NOT_FOUND");
    let r =
        patch(&c, &url, &json!([{"op": "add", "path": "/pad", "value": "y".repeat(3000)}])).await;
    problem(&r, 400, "MANDATORY_IE_INCORRECT");
    let r = c
        .patch(&url)
        .header("content-type", "application/json-patch+json")
        .body("[")
        .send()
        .await
        .unwrap();
    problem(&r, 400, "INVALID_MSG_FORMAT");
    nrf.stop().await;
}

async fn nf_list_with_type_limit_and_pages() {
    let dir = state_dir();
    let nrf = TestNrf::start(dir.path(), NrfConfig::default()).await;
    let c = client();
    for n in 1..=5 {
        let t = if n <= 3 { "UDR" } else { "PCF" };
        let r =
            put(&c, &nrf.nfm(&format!("/nf-instances/{}", uuid(n))), &profile(&uuid(n), t)).await;
        assert_eq!(r.status(), 201);
    }
    let list = |q: &'static str| {
        let c = c.clone();
        let url = nrf.nfm(&format!("/nf-instances{q}"));
        async move { c.get(&url).send().await.unwrap() }
    };
    let hrefs = |v: &Value| -> Vec<String> {
        v["_links"]["item"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|i| i["href"].as_str().unwrap().to_owned())
            .collect()
    };

    let r = list("").await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.header("content-type"), Some("application/3gppHal+json"));
    let v = body(&r);
    assert_valid("TS29510_Nnrf_NFManagement", "UriList", &v);
    assert_eq!(v["totalItemCount"], 5);
    assert_eq!(hrefs(&v)[0], nrf.nfm(&format!("/nf-instances/{}", uuid(1))));
    assert!(v["_links"]["self"]["href"].as_str().unwrap().ends_with("/nnrf-nfm/v1/nf-instances"));

    assert_eq!(hrefs(&body(&list("?nf-type=PCF").await)).len(), 2);
    assert_eq!(hrefs(&body(&list("?limit=2").await)).len(), 2);
    let v = body(&list("?nf-type=UDR&page-size=2&page-number=2").await);
    assert_eq!(hrefs(&v), [nrf.nfm(&format!("/nf-instances/{}", uuid(3)))]);
    assert_eq!(v["totalItemCount"], 3);
    // An empty page: no `item` at all (UriList._links.item has minItems 1).
    let v = body(&list("?page-size=2&page-number=9").await);
    assert_valid("TS29510_Nnrf_NFManagement", "UriList", &v);
    assert_eq!(v["_links"].get("item"), None, "{v}");
    assert_eq!(v["totalItemCount"], 5);
    let v = body(&list("?nf-type=AMF").await);
    assert_valid("TS29510_Nnrf_NFManagement", "UriList", &v);
    assert_eq!(v["_links"].get("item"), None, "{v}");
    assert_eq!(v["totalItemCount"], 0);
    // A page that is not empty has its items.
    let v = body(&list("?page-size=2&page-number=3").await);
    assert_valid("TS29510_Nnrf_NFManagement", "UriList", &v);
    assert_eq!(hrefs(&v), [nrf.nfm(&format!("/nf-instances/{}", uuid(5)))]);

    problem(&list("?nf-type=TOASTER").await, 400, "INVALID_QUERY_PARAM");
    problem(&list("?limit=0").await, 400, "INVALID_QUERY_PARAM");
    problem(&list("?page-size=x").await, 400, "INVALID_QUERY_PARAM");
    nrf.stop().await;
}

fn subscription(sink: &Sink, cond: Value) -> Value {
    json!({"nfStatusNotificationUri": sink.url, "subscrCond": cond,
           "reqNfType": "SMF", "requesterFeatures": "1"})
}

async fn status_notifications_for_register_change_and_deregister() {
    let dir = state_dir();
    let nrf = TestNrf::start(dir.path(), NrfConfig::default()).await;
    let c = client();
    let mut sink = Sink::start().await;
    let mut changes_sink = Sink::start().await;

    let r = c
        .post(&nrf.nfm("/subscriptions"))
        .json(&subscription(&sink, json!({"nfType": "UDR"})))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{:?}", body(&r));
    let sub = body(&r);
    assert_valid("TS29510_Nnrf_NFManagement", "SubscriptionData", &sub);
    let sid = sub["subscriptionId"].as_str().unwrap();
    assert_eq!(r.header("location").unwrap(), nrf.nfm(&format!("/subscriptions/{sid}")));
    assert!(sub["validityTime"].is_string());
    assert!(sub.get("requesterFeatures").is_none(), "write-only attribute not echoed");

    // Only changes of /load, as profileChanges.
    let mut s = subscription(&changes_sink, json!({"nfInstanceId": uuid(10)}));
    s["notifCondition"] = json!({"monitoredAttributes": ["/load"]});
    assert_eq!(c.post(&nrf.nfm("/subscriptions")).json(&s).send().await.unwrap().status(), 201);

    let id = uuid(10);
    let url = nrf.nfm(&format!("/nf-instances/{id}"));
    let mut p = profile(&id, "UDR");
    p["allowedNfTypes"] = json!(["PCF"]);
    assert_eq!(put(&c, &url, &p).await.status(), 201);
    let n = sink.next().await;
    assert_valid("TS29510_Nnrf_NFManagement", "NotificationData", &n);
    assert_eq!(n["event"], "NF_REGISTERED");
    assert_eq!(n["nfInstanceUri"], url);
    assert_eq!(n["nfProfile"]["nfInstanceId"], id);
    assert!(n["nfProfile"].get("allowedNfTypes").is_none(), "authorisation attributes hidden");
    let n = changes_sink.next().await;
    assert_eq!(n["event"], "NF_REGISTERED");

    // Another type: not for this subscriber.
    let other = uuid(11);
    put(&c, &nrf.nfm(&format!("/nf-instances/{other}")), &profile(&other, "PCF")).await;
    sink.quiet().await;

    // A change of locality: whole profile to the first, nothing to the /load watcher.
    patch(&c, &url, &json!([{"op": "add", "path": "/locality", "value": "west"}])).await;
    let n = sink.next().await;
    assert_valid("TS29510_Nnrf_NFManagement", "NotificationData", &n);
    assert_eq!(n["event"], "NF_PROFILE_CHANGED");
    assert_eq!(n["nfProfile"]["locality"], "west");
    changes_sink.quiet().await;

    // A change of load: profileChanges for the watcher, delivered despite one 503 (retry).
    changes_sink.fail_first.store(1, Ordering::SeqCst);
    patch(&c, &url, &json!([{"op": "add", "path": "/load", "value": 70}])).await;
    let n = changes_sink.next().await;
    assert_valid("TS29510_Nnrf_NFManagement", "NotificationData", &n);
    assert_eq!(n["event"], "NF_PROFILE_CHANGED");
    assert_eq!(n["profileChanges"], json!([{"op": "ADD", "path": "/load", "newValue": 70}]));
    assert!(n.get("nfProfile").is_none());
    assert_eq!(sink.next().await["event"], "NF_PROFILE_CHANGED");

    assert_eq!(c.delete(&url).send().await.unwrap().status(), 204);
    let n = sink.next().await;
    assert_valid("TS29510_Nnrf_NFManagement", "NotificationData", &n);
    assert_eq!(n["event"], "NF_DEREGISTERED");
    assert!(n.get("nfProfile").is_none());

    // reqNotifEvents narrows the events.
    let mut s = subscription(&sink, json!({"nfType": "PCF"}));
    s["reqNotifEvents"] = json!(["NF_DEREGISTERED"]);
    assert_eq!(c.post(&nrf.nfm("/subscriptions")).json(&s).send().await.unwrap().status(), 201);
    patch(
        &c,
        &nrf.nfm(&format!("/nf-instances/{other}")),
        &json!([{"op": "add", "path": "/locality", "value": "x"}]),
    )
    .await;
    sink.quiet().await;
    c.delete(&nrf.nfm(&format!("/nf-instances/{other}"))).send().await.unwrap();
    assert_eq!(sink.next().await["event"], "NF_DEREGISTERED");
    nrf.stop().await;
}

async fn subscription_update_unsubscribe_limit_and_errors() {
    let dir = state_dir();
    let config = NrfConfig {
        max_subscriptions: 2,
        subscription_validity_secs: 3600,
        ..NrfConfig::default()
    };
    let nrf = TestNrf::start(dir.path(), config).await;
    let c = client();
    let sink = Sink::start().await;
    let subs = nrf.nfm("/subscriptions");

    let r = c
        .post(&subs)
        .json(&subscription(&sink, json!({"serviceName": "nudr-dr"})))
        .send()
        .await
        .unwrap();
    let sid = body(&r)["subscriptionId"].as_str().unwrap().to_owned();
    let url = nrf.nfm(&format!("/subscriptions/{sid}"));

    // validityTime beyond the NRF's maximum is cut to it; an earlier one is granted.
    let later = (chrono::Utc::now() + chrono::Duration::days(30)).to_rfc3339();
    let r =
        patch(&c, &url, &json!([{"op": "replace", "path": "/validityTime", "value": later}])).await;
    assert_eq!(r.status(), 200);
    let granted =
        chrono::DateTime::parse_from_rfc3339(body(&r)["validityTime"].as_str().unwrap()).unwrap();
    assert!(granted < chrono::Utc::now() + chrono::Duration::hours(2));
    assert_valid("TS29510_Nnrf_NFManagement", "SubscriptionData", &body(&r));
    let soon = (chrono::Utc::now() + chrono::Duration::minutes(5)).to_rfc3339();
    let r =
        patch(&c, &url, &json!([{"op": "replace", "path": "/validityTime", "value": soon}])).await;
    assert_eq!(r.status(), 200);

    let r = patch(
        &c,
        &url,
        &json!([{"op": "replace", "path": "/nfStatusNotificationUri", "value": "http://x/"}]),
    )
    .await;
    problem(&r, 403, "MODIFICATION_NOT_ALLOWED");
    let past = (chrono::Utc::now() - chrono::Duration::minutes(5)).to_rfc3339();
    let r =
        patch(&c, &url, &json!([{"op": "replace", "path": "/validityTime", "value": past}])).await;
    problem(&r, 400, "MANDATORY_IE_INCORRECT");

    // Request errors.
    let mut bad = subscription(&sink, json!({"nfType": "UDR"}));
    bad["nfStatusNotificationUri"] = json!("not a uri");
    problem(&c.post(&subs).json(&bad).send().await.unwrap(), 400, "MANDATORY_IE_INCORRECT");
    let mut bad = subscription(&sink, json!({"nfType": "UDR"}));
    bad["validityTime"] = json!(past);
    problem(&c.post(&subs).json(&bad).send().await.unwrap(), 400, "MANDATORY_IE_INCORRECT");
    let mut bad = subscription(&sink, json!({"nfType": "UDR"}));
    bad["reqNotifEvents"] = json!(["NF_EXPLODED"]);
    problem(&c.post(&subs).json(&bad).send().await.unwrap(), 400, "OPTIONAL_IE_INCORRECT");
    problem(
        &c.post(&subs).json(&json!({"subscrCond": {}})).send().await.unwrap(),
        400,
        "MANDATORY_IE_MISSING",
    );

    // The limit (2): the second fits, the third is refused with a cause.
    let r =
        c.post(&subs).json(&subscription(&sink, json!({"nfType": "UDR"}))).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let r =
        c.post(&subs).json(&subscription(&sink, json!({"nfType": "UDR"}))).send().await.unwrap();
    problem(&r, 403, "INSUFFICIENT_RESOURCES");

    assert_eq!(c.delete(&url).send().await.unwrap().status(), 204);
    problem(&c.delete(&url).send().await.unwrap(), 404, "RESOURCE_NOT_FOUND");
    let r =
        patch(&c, &url, &json!([{"op": "replace", "path": "/validityTime", "value": soon}])).await;
    problem(&r, 404, "RESOURCE_NOT_FOUND");

    // An expired subscription is gone: 404, and it frees its slot.
    let mut s = subscription(&sink, json!({"nfType": "UDR"}));
    s["validityTime"] =
        json!((chrono::Utc::now() + chrono::Duration::milliseconds(1500)).to_rfc3339());
    let r = c.post(&subs).json(&s).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let expiring =
        nrf.nfm(&format!("/subscriptions/{}", body(&r)["subscriptionId"].as_str().unwrap()));
    tokio::time::sleep(Duration::from_millis(2600)).await;
    let r =
        patch(&c, &expiring, &json!([{"op": "replace", "path": "/validityTime", "value": soon}]))
            .await;
    problem(&r, 404, "RESOURCE_NOT_FOUND");
    let r =
        c.post(&subs).json(&subscription(&sink, json!({"nfType": "UDR"}))).send().await.unwrap();
    assert_eq!(r.status(), 201, "expired subscription released its slot");
    nrf.stop().await;
}

async fn missed_heartbeats_suspend_and_notify() {
    let dir = state_dir();
    let config = NrfConfig {
        heartbeat_min_secs: 1,
        heartbeat_timer_secs: 1,
        heartbeat_grace_ms: 300,
        audit_interval_ms: 100,
        ..NrfConfig::default()
    };
    let nrf = TestNrf::start(dir.path(), config).await;
    let c = client();
    let mut sink = Sink::start().await;
    c.post(&nrf.nfm("/subscriptions"))
        .json(&subscription(&sink, json!({"nfType": "BSF"})))
        .send()
        .await
        .unwrap();

    let id = uuid(20);
    let url = nrf.nfm(&format!("/nf-instances/{id}"));
    let mut p = profile(&id, "BSF");
    p["heartBeatTimer"] = json!(1);
    put(&c, &url, &p).await;
    assert_eq!(sink.next().await["event"], "NF_REGISTERED");

    // Heartbeats keep it registered.
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let r = patch(
            &c,
            &url,
            &json!([{"op": "replace", "path": "/nfStatus", "value": "REGISTERED"}]),
        )
        .await;
        assert_eq!(r.status(), 204);
    }
    assert_eq!(body(&c.get(&url).send().await.unwrap())["nfStatus"], "REGISTERED");
    sink.quiet().await;

    // Silence: SUSPENDED after 1 s + 0.3 s, with a notification; no longer discovered.
    let n = sink.next().await;
    assert_eq!(n["event"], "NF_PROFILE_CHANGED");
    assert_eq!(n["nfProfile"]["nfStatus"], "SUSPENDED");
    assert_eq!(body(&c.get(&url).send().await.unwrap())["nfStatus"], "SUSPENDED");
    let r = c.get(&nrf.disc("target-nf-type=BSF&requester-nf-type=PCF")).send().await.unwrap();
    assert_eq!(body(&r)["nfInstances"], json!([]));

    // A heartbeat with REGISTERED brings it back.
    let r =
        patch(&c, &url, &json!([{"op": "replace", "path": "/nfStatus", "value": "REGISTERED"}]))
            .await;
    assert_eq!(r.status(), 204);
    assert_eq!(sink.next().await["nfProfile"]["nfStatus"], "REGISTERED");
    let r = c.get(&nrf.disc("target-nf-type=BSF&requester-nf-type=PCF")).send().await.unwrap();
    assert_eq!(body(&r)["nfInstances"].as_array().unwrap().len(), 1);
    nrf.stop().await;
}

async fn restart_keeps_profiles_and_subscriptions() {
    let dir = state_dir();
    let c = client();
    let mut sink = Sink::start().await;
    let id = uuid(30);
    let sid;
    {
        let nrf = TestNrf::start(dir.path(), NrfConfig::default()).await;
        let r = c
            .post(&nrf.nfm("/subscriptions"))
            .json(&subscription(&sink, json!({"nfType": "UDM"})))
            .send()
            .await
            .unwrap();
        sid = body(&r)["subscriptionId"].as_str().unwrap().to_owned();
        let mut p = profile(&id, "UDM");
        p["udmInfo"] = json!({"groupId": "g1"});
        assert_eq!(put(&c, &nrf.nfm(&format!("/nf-instances/{id}")), &p).await.status(), 201);
        assert_eq!(sink.next().await["event"], "NF_REGISTERED");
        nrf.stop().await;
    }
    let nrf = TestNrf::start(dir.path(), NrfConfig::default()).await;
    let r = c.get(&nrf.nfm(&format!("/nf-instances/{id}"))).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(body(&r)["udmInfo"]["groupId"], "g1");
    let r = c
        .get(&nrf.disc("target-nf-type=UDM&requester-nf-type=AMF&group-id-list=g1"))
        .send()
        .await
        .unwrap();
    assert_eq!(body(&r)["nfInstances"][0]["nfInstanceId"], id);
    // The subscription survived: it can be updated and it is notified.
    let soon = (chrono::Utc::now() + chrono::Duration::minutes(5)).to_rfc3339();
    let r = patch(
        &c,
        &nrf.nfm(&format!("/subscriptions/{sid}")),
        &json!([{"op": "replace", "path": "/validityTime", "value": soon}]),
    )
    .await;
    assert_eq!(r.status(), 200);
    c.delete(&nrf.nfm(&format!("/nf-instances/{id}"))).send().await.unwrap();
    assert_eq!(sink.next().await["event"], "NF_DEREGISTERED");
    nrf.stop().await;
}

testkit::on_both_backends!(
    register_retrieve_replace_and_deregister,
    register_rejects_bad_profiles,
    patch_updates_and_heartbeats,
    nf_list_with_type_limit_and_pages,
    status_notifications_for_register_change_and_deregister,
    subscription_update_unsubscribe_limit_and_errors,
    missed_heartbeats_suspend_and_notify,
    restart_keeps_profiles_and_subscriptions,
);
