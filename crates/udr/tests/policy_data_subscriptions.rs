//! Policy data subscriptions (subs-to-notify) over real sockets: create, replace, delete and
//! their errors; PolicyDataChangeNotifications received by a test sink for N36 and provisioning
//! changes, deletions and fragments; retries, batching and ordering; expiry; and the
//! notification outbox surviving a UDR restart.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::*;
use http::Method;
use serde_json::{json, Value};
use testkit::sink::Sink;

const UE: &str = "imsi-001010000000001";

fn n36(path: &str) -> String {
    format!("/nudr-dr/v2/policy-data/{path}")
}

fn sm_data(volume: u64) -> Value {
    json!({"smPolicySnssaiData": {"1": {"snssai": {"sst": 1},
        "smPolicyDnnData": {"internet": {"dnn": "internet"}}}},
        "umData": {"lim1": {"limitId": "lim1", "allowedUsage": {"totalVolume": volume}}}})
}

/// Checks a notification request body: a non-empty array of valid PolicyDataChangeNotifications.
fn notifications(v: &Value) -> Vec<Value> {
    let a = v.as_array().unwrap_or_else(|| panic!("notification body must be an array: {v}"));
    assert!(!a.is_empty());
    for n in a {
        assert_valid("TS29519_Policy_Data", "PolicyDataChangeNotification", n);
    }
    a.clone()
}

/// Waits (up to 5 s) for `cond`.
async fn eventually(cond: impl Fn() -> bool) {
    for _ in 0..250 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("condition not met within 5 s");
}

async fn subscribe(c: &sbi::client::SbiClient, udr: &TestUdr, sub: &Value) -> String {
    let r = post_json(c, &udr.url(&n36("subs-to-notify")), sub).await;
    assert_eq!(r.status(), 201, "{:?}", body(&r));
    assert_valid("TS29519_Policy_Data", "PolicyDataSubscription", &body(&r));
    r.header("location").unwrap().to_owned()
}

async fn n36_and_provisioning_changes_are_notified() {
    let dir = common::state_dir();
    let udr = TestUdr::start(dir.path(), policy_config()).await;
    let mut sink = Sink::start().await;
    let c = client();
    let smd = udr.url(&n36(&format!("ues/{UE}/sm-data")));
    let sub = json!({"notificationUri": sink.url, "notifId": "pcf-1",
        "monitoredResourceUris": [smd.clone(), udr.url(&n36("bdt-data"))], "supportedFeatures": "3"});
    let r = post_json(&c, &udr.url(&n36("subs-to-notify")), &sub).await;
    assert_eq!(r.status(), 201);
    let loc = r.header("location").unwrap().to_owned();
    assert!(loc.starts_with(&udr.url(&n36("subs-to-notify/"))), "{loc}");
    let answered = body(&r);
    assert_eq!(answered["notifId"], "pcf-1");
    assert_eq!(answered["supportedFeatures"], "0", "no optional feature negotiated");

    // An N36 create, then a patch: each notified with the new data, never blocking the write.
    assert_eq!(put_json(&c, &smd, &sm_data(1)).await.status(), 201);
    let n = notifications(&sink.next().await);
    assert_eq!(n, [json!({"smPolicyData": sm_data(1), "ueId": UE, "notifId": "pcf-1"})]);
    let r = merge_patch(
        &c,
        &smd,
        &json!({"umData": {"lim1": {"limitId": "lim1", "allowedUsage": {"totalVolume": 2}}}}),
    )
    .await;
    assert_eq!(r.status(), 204);
    let n = notifications(&sink.next().await);
    assert_eq!(n[0]["smPolicyData"]["umData"]["lim1"]["allowedUsage"]["totalVolume"], 2);
    // Unchanged content is no change; other UEs and unmonitored resources are not notified.
    assert_eq!(put_json(&c, &smd, &n[0]["smPolicyData"]).await.status(), 200);
    put_json(&c, &udr.url(&n36("ues/imsi-001010000000002/sm-data")), &sm_data(1)).await;
    put_json(&c, &udr.url(&n36(&format!("ues/{UE}/ue-policy-set"))), &json!({"upsis": ["x"]}))
        .await;
    sink.quiet().await;

    // Provisioning changes notify exactly like N36 writes.
    let prov = udr.url(&format!("/udr-prov/v1/policy-data/ues/{UE}"));
    let r = merge_patch(&c, &prov, &json!({"smData": {"umData": null}})).await;
    assert_eq!(r.status(), 200);
    let n = notifications(&sink.next().await);
    assert!(n[0]["smPolicyData"].get("umData").is_none());
    // Deletion of the UE's policy data: delResources with the URI the subscriber monitors.
    assert_eq!(delete(&c, &prov).await.status(), 204);
    let n = notifications(&sink.next().await);
    assert_eq!(n, [json!({"delResources": [smd], "ueId": UE, "notifId": "pcf-1"})]);

    // The BDT data collection: any BDT reference.
    let bdt = json!({"aspId": "a", "transPolicy": {"transPolicyId": 1, "ratingGroup": 1,
        "recTimeInt": {"startTime": "2030-01-01T00:00:00Z", "stopTime": "2030-01-01T01:00:00Z"}}});
    put_json(&c, &udr.url(&n36("bdt-data/ref%2F1")), &bdt).await;
    let n = notifications(&sink.next().await);
    assert_eq!(n[0]["bdtRefId"], "ref/1");
    assert_eq!(n[0]["bdtData"], bdt);

    // Replace the subscription: now it watches the UE's whole policy data, to another sink.
    let mut sink2 = Sink::start().await;
    let sub2 = json!({"notificationUri": sink2.url, "monitoredResourceUris": [udr.url(&n36(&format!("ues/{UE}")))]});
    let r = put_json(&c, &loc, &sub2).await;
    assert_eq!(r.status(), 200, "{:?}", body(&r));
    assert_eq!(body(&r), sub2);
    let um = udr.url(&n36(&format!("ues/{UE}/sm-data/um1")));
    put_json(&c, &um, &json!({"limitId": "um1"})).await;
    let n = notifications(&sink2.next().await);
    assert_eq!(n, [json!({"usageMonData": {"limitId": "um1"}, "ueId": UE, "usageMonId": "um1"})]);
    put_json(&c, &udr.url(&n36("bdt-data/r2")), &bdt).await;
    sink.quiet().await;
    sink2.quiet().await;

    // Unsubscribe: nothing more.
    assert_eq!(delete(&c, &loc).await.status(), 204);
    problem(&delete(&c, &loc).await, 404, "SUBSCRIPTION_NOT_FOUND");
    problem(&put_json(&c, &loc, &sub2).await, 404, "SUBSCRIPTION_NOT_FOUND");
    delete(&c, &um).await;
    sink2.quiet().await;
    assert_eq!(udr.udr.policy.subs.len(), 0);
    udr.stop().await;
}

async fn subscription_errors() {
    let dir = common::state_dir();
    let mut config = policy_config();
    config.policy.max_subscriptions = 2;
    let udr = TestUdr::start(dir.path(), config).await;
    let c = client();
    let url = udr.url(&n36("subs-to-notify"));
    let smd = udr.url(&n36(&format!("ues/{UE}/sm-data")));
    problem(
        &post_json(&c, &url, &json!({"monitoredResourceUris": [smd]})).await,
        400,
        "MANDATORY_IE_MISSING",
    );
    let p = problem(
        &post_json(
            &c,
            &url,
            &json!({"notificationUri": "not a uri", "monitoredResourceUris": [smd, 7]}),
        )
        .await,
        400,
        "MANDATORY_IE_INCORRECT",
    );
    let mut got = params(&p);
    got.sort();
    assert_eq!(got, ["/monitoredResourceUris/1", "/notificationUri"]);
    let p = problem(
        &post_json(
            &c,
            &url,
            &json!({"notificationUri": "http://pcf/n", "monitoredResourceUris": [
            udr.url(&n36("ues/imsi-1/sm-data")),
            udr.url(&n36("mbs-session-pol-data/x")),
            udr.url("/nudr-dr/v2/subscription-data/imsi-001010000000001"),
            smd.clone(),
        ], "expiry": "2001-01-01T00:00:00Z"}),
        )
        .await,
        400,
        "MANDATORY_IE_INCORRECT",
    );
    let mut got = params(&p);
    got.sort();
    assert_eq!(
        got,
        [
            "/expiry",
            "/monitoredResourceUris/0",
            "/monitoredResourceUris/1",
            "/monitoredResourceUris/2"
        ]
    );
    let p = problem(
        &post_json(&c, &url, &json!({"notificationUri": "http://pcf/n", "monitoredResourceUris": [],
            "monResItems": [{"monResourceUri": udr.url(&n36(&format!("ues/{UE}"))), "items": ["/x"]}]}))
        .await,
        400,
        "MANDATORY_IE_INCORRECT",
    );
    assert_eq!(params(&p), ["/monResItems/0/monResourceUri"]);
    problem(
        &post_json(
            &c,
            &url,
            &json!({"notificationUri": "http://pcf/n", "monitoredResourceUris": []}),
        )
        .await,
        400,
        "MANDATORY_IE_INCORRECT",
    );
    problem(
        &send(&c, Method::POST, &url, Some("application/json"), b"{", &[]).await,
        400,
        "INVALID_MSG_FORMAT",
    );
    problem(
        &send(&c, Method::POST, &url, Some("application/xml"), b"<a/>", &[]).await,
        415,
        "UNSUPPORTED_MEDIA_TYPE",
    );
    // The limit.
    let ok = json!({"notificationUri": "http://pcf/n", "monitoredResourceUris": [smd]});
    subscribe(&c, &udr, &ok).await;
    subscribe(&c, &udr, &ok).await;
    problem(&post_json(&c, &url, &ok).await, 403, "INSUFFICIENT_RESOURCES");
    problem(
        &delete(&c, &udr.url(&n36("subs-to-notify/nope"))).await,
        404,
        "SUBSCRIPTION_NOT_FOUND",
    );
    udr.stop().await;
}

async fn retries_batch_in_order() {
    let dir = common::state_dir();
    let udr = TestUdr::start(dir.path(), policy_config()).await;
    let mut sink = Sink::start().await;
    let c = client();
    let smd = udr.url(&n36(&format!("ues/{UE}/sm-data")));
    subscribe(&c, &udr, &json!({"notificationUri": sink.url, "monitoredResourceUris": [smd]}))
        .await;
    const DELIVERED: &str = "udr_policy_data_notifications_delivered_total";
    assert_eq!(metric(&udr, DELIVERED, &[]).await, 0.0);
    // The subscriber is failing: the writes still answer at once, the notifications wait.
    sink.fail_first.store(3, Ordering::SeqCst);
    let started = std::time::Instant::now();
    for v in 1..=10 {
        let r = put_json(&c, &smd, &sm_data(v)).await;
        assert!(r.status().is_success());
    }
    assert!(started.elapsed() < Duration::from_secs(2));
    let mut volumes = Vec::new();
    let mut requests = 0;
    while volumes.len() < 10 {
        requests += 1;
        for n in notifications(&sink.next().await) {
            volumes.push(
                n["smPolicyData"]["umData"]["lim1"]["allowedUsage"]["totalVolume"]
                    .as_u64()
                    .unwrap(),
            );
        }
    }
    assert_eq!(volumes, (1..=10).collect::<Vec<u64>>(), "in order, each once");
    assert!(requests < 10, "batched: {requests} requests for 10 notifications");
    assert_eq!(sink.fail_first.load(Ordering::SeqCst), 0);
    let stats = &udr.udr.policy.stats;
    assert!(stats.retried.get() >= 3);
    // The sink records a notification before it answers; the UDR counts it after.
    eventually(|| stats.delivered.get() == 10).await;
    // The counters reach the UDR's /metrics.
    assert_eq!(metric(&udr, "udr_policy_data_notifications_recorded_total", &[]).await, 10.0);
    assert_eq!(metric(&udr, DELIVERED, &[]).await, 10.0);
    assert!(metric(&udr, "udr_policy_data_notification_retries_total", &[]).await >= 3.0);
    assert_eq!(metric(&udr, "udr_policy_data_notifications_dropped_total", &[]).await, 0.0);
    // Delivered rows leave the outbox.
    let db = udr.udr.stores.policy.clone();
    let mut left = 1;
    for _ in 0..50 {
        left = db.outbox_len().await.unwrap();
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(left, 0);
    udr.stop().await;
}

async fn subscriptions_sharing_a_notification_uri_share_requests() {
    let dir = common::state_dir();
    let udr = TestUdr::start(dir.path(), policy_config()).await;
    let mut sink = Sink::start().await;
    let mut other = Sink::start().await;
    let c = client();
    let smd = udr.url(&n36(&format!("ues/{UE}/sm-data")));
    for (uri, id) in [(&sink.url, "a"), (&sink.url, "b"), (&other.url, "c")] {
        let sub = json!({"notificationUri": uri, "notifId": id, "monitoredResourceUris": [smd]});
        subscribe(&c, &udr, &sub).await;
    }
    // One change, three subscribers: those of the same URI get one request with both items.
    assert_eq!(put_json(&c, &smd, &sm_data(1)).await.status(), 201);
    let n = notifications(&sink.next().await);
    let mut ids: Vec<&str> = n.iter().map(|n| n["notifId"].as_str().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["a", "b"]);
    assert!(n.iter().all(|n| n["ueId"] == UE && n["smPolicyData"] == sm_data(1)));
    sink.quiet().await;
    let n = notifications(&other.next().await);
    assert_eq!(n, [json!({"smPolicyData": sm_data(1), "ueId": UE, "notifId": "c"})]);
    other.quiet().await;
    let stats = &udr.udr.policy.stats;
    eventually(|| stats.delivered.get() == 3).await;
    udr.stop().await;
}

async fn refused_and_undeliverable_notifications_are_dropped() {
    let dir = common::state_dir();
    let mut config = policy_config();
    config.policy.notify.attempts = 2;
    let udr = TestUdr::start(dir.path(), config).await;
    let mut sink = Sink::start().await;
    let c = client();
    let smd = udr.url(&n36(&format!("ues/{UE}/sm-data")));
    subscribe(&c, &udr, &json!({"notificationUri": sink.url, "monitoredResourceUris": [smd]}))
        .await;
    // Two failures use both attempts: the first notification is given up, the next one arrives.
    sink.fail_first.store(2, Ordering::SeqCst);
    put_json(&c, &smd, &sm_data(1)).await;
    let stats = &udr.udr.policy.stats;
    eventually(|| stats.dropped.get() == 1).await;
    put_json(&c, &smd, &sm_data(2)).await;
    let n = notifications(&sink.next().await);
    assert_eq!(n.len(), 1);
    assert_eq!(n[0]["smPolicyData"], sm_data(2));
    // A subscriber that is not there at all (connection refused) is retried the same way.
    let gone = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/n", l.local_addr().unwrap())
    };
    let gone_sub =
        subscribe(&c, &udr, &json!({"notificationUri": gone, "monitoredResourceUris": [smd]}))
            .await;
    put_json(&c, &smd, &sm_data(3)).await;
    let n = notifications(&sink.next().await);
    assert_eq!(n[0]["smPolicyData"], sm_data(3));
    eventually(|| stats.dropped.get() == 2).await;
    // A subscriber that refuses (a 4xx other than 408 and 429) is not retried.
    assert_eq!(delete(&c, &gone_sub).await.status(), 204);
    let retried = stats.retried.get();
    let refusing = udr.url("/no-such-callback");
    subscribe(&c, &udr, &json!({"notificationUri": refusing, "monitoredResourceUris": [smd]}))
        .await;
    put_json(&c, &smd, &sm_data(4)).await;
    notifications(&sink.next().await);
    eventually(|| stats.dropped.get() == 3).await;
    assert_eq!(stats.retried.get(), retried);
    udr.stop().await;
}

/// The nfInstanceId of a UDR restarted on its store: on MySQL the notifications it recorded are
/// owned by that id, so the instance started again with it resumes them.
const SAME_UDR: &str = "5a6e0c1e-0000-4000-8000-00000000000a";

async fn outbox_survives_a_restart() {
    let dir = common::state_dir();
    let mut config = policy_config();
    config.policy.notify.attempts = 0; // until the subscription ends
    let udr = TestUdr::start_as(dir.path(), config.clone(), Some(SAME_UDR.into())).await;
    let mut sink = Sink::start().await;
    let c = client();
    let smd = udr.url(&n36(&format!("ues/{UE}/sm-data")));
    sink.fail_first.store(1_000_000, Ordering::SeqCst);
    subscribe(
        &c,
        &udr,
        &json!({"notificationUri": sink.url, "notifId": "n1", "monitoredResourceUris": [smd]}),
    )
    .await;
    assert_eq!(put_json(&c, &smd, &sm_data(7)).await.status(), 201);
    // The subscriber has refused it at least once...
    eventually(|| sink.fail_first.load(Ordering::SeqCst) < 1_000_000).await;
    assert_eq!(udr.udr.stores.policy.outbox_len().await.unwrap(), 1);
    // ... and the UDR stops with it undelivered.
    udr.stop().await;
    sink.fail_first.store(0, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(300)).await;
    sink.quiet().await;

    // After the restart the outbox is resumed: the notification arrives.
    let udr = TestUdr::start_as(dir.path(), config, Some(SAME_UDR.into())).await;
    let n = notifications(&sink.next().await);
    assert_eq!(n, [json!({"smPolicyData": sm_data(7), "ueId": UE, "notifId": "n1"})]);
    // The subscription lived through the restart too.
    let smd = udr.url(&n36(&format!("ues/{UE}/sm-data")));
    merge_patch(&c, &smd, &json!({"umData": null})).await;
    let n = notifications(&sink.next().await);
    assert!(n[0]["smPolicyData"].get("umData").is_none());
    udr.stop().await;
}

async fn subscriptions_expire() {
    let dir = common::state_dir();
    let mut config = policy_config();
    config.policy.max_expiry_secs = 3600;
    let udr = TestUdr::start(dir.path(), config).await;
    let mut sink = Sink::start().await;
    let c = client();
    let smd = udr.url(&n36(&format!("ues/{UE}/sm-data")));
    // Without an expiry, the UDR grants at most max_expiry_secs.
    let r = post_json(
        &c,
        &udr.url(&n36("subs-to-notify")),
        &json!({"notificationUri": sink.url, "monitoredResourceUris": [smd]}),
    )
    .await;
    let granted =
        chrono::DateTime::parse_from_rfc3339(body(&r)["expiry"].as_str().unwrap()).unwrap();
    let ahead = granted.timestamp() - chrono::Utc::now().timestamp();
    assert!((3590..=3600).contains(&ahead), "{ahead}");
    delete(&c, r.header("location").unwrap()).await;
    // One that expires in a second: notified before, not after.
    let soon = (chrono::Utc::now() + chrono::Duration::milliseconds(1500)).to_rfc3339();
    subscribe(
        &c,
        &udr,
        &json!({"notificationUri": sink.url, "monitoredResourceUris": [smd], "expiry": soon}),
    )
    .await;
    put_json(&c, &smd, &sm_data(1)).await;
    notifications(&sink.next().await);
    tokio::time::sleep(Duration::from_millis(2600)).await;
    assert_eq!(udr.udr.policy.subs.len(), 0);
    put_json(&c, &smd, &sm_data(2)).await;
    sink.quiet().await;
    udr.stop().await;
}

async fn fragment_subscriptions_report_only_their_items() {
    let dir = common::state_dir();
    let udr = TestUdr::start(dir.path(), policy_config()).await;
    let mut sink = Sink::start().await;
    let c = client();
    let smd = udr.url(&n36(&format!("ues/{UE}/sm-data")));
    put_json(&c, &smd, &sm_data(1)).await;
    subscribe(
        &c,
        &udr,
        &json!({"notificationUri": sink.url, "monitoredResourceUris": [],
        "monResItems": [{"monResourceUri": smd, "items": ["/umData"]}]}),
    )
    .await;
    // A change elsewhere in the resource: nothing.
    merge_patch(&c, &smd, &json!({"smPolicySnssaiData": {"1": {"snssai": {"sst": 1}, "smPolicyDnnData": {"internet": {"dnn": "internet", "bdtRefIds": {"a": "b"}}}}}})).await;
    sink.quiet().await;
    // A change of the item: reported as a fragment.
    merge_patch(
        &c,
        &smd,
        &json!({"umData": {"lim1": {"limitId": "lim1", "allowedUsage": {"totalVolume": 9}}}}),
    )
    .await;
    let n = notifications(&sink.next().await);
    assert_eq!(
        n[0]["reportedFragments"],
        json!([{"resourceId": smd, "notifItems": [{"item": "/umData",
            "value": {"lim1": {"limitId": "lim1", "allowedUsage": {"totalVolume": 9}}}}]}])
    );
    assert!(n[0].get("smPolicyData").is_none());
    udr.stop().await;
}

/// A deleted subscription's undelivered notifications are never sent, not even by the next UDR
/// started on the store, and they leave the outbox (the delivery drops them as it reaches them).
async fn deleted_subscriptions_notifications_are_dropped_across_a_restart() {
    let dir = common::state_dir();
    let mut config = policy_config();
    config.policy.notify.attempts = 0; // until the subscription ends
    config.policy.notify.backoff_ms = 30_000; // no retry before the restart
    config.policy.notify.max_backoff_ms = 30_000;
    let udr = TestUdr::start_as(dir.path(), config.clone(), Some(SAME_UDR.into())).await;
    let mut sink = Sink::start().await;
    let c = client();
    let smd = udr.url(&n36(&format!("ues/{UE}/sm-data")));
    sink.fail_first.store(1_000_000, Ordering::SeqCst);
    let gone = subscribe(
        &c,
        &udr,
        &json!({"notificationUri": sink.url, "notifId": "gone", "monitoredResourceUris": [smd]}),
    )
    .await;
    assert_eq!(put_json(&c, &smd, &sm_data(1)).await.status(), 201);
    eventually(|| sink.fail_first.load(Ordering::SeqCst) < 1_000_000).await;
    assert_eq!(delete(&c, &gone).await.status(), 204);
    udr.stop().await;
    sink.fail_first.store(0, Ordering::SeqCst);

    let udr = TestUdr::start_as(dir.path(), config, Some(SAME_UDR.into())).await;
    let smd = udr.url(&n36(&format!("ues/{UE}/sm-data")));
    subscribe(
        &c,
        &udr,
        &json!({"notificationUri": sink.url, "notifId": "kept", "monitoredResourceUris": [smd]}),
    )
    .await;
    merge_patch(&c, &smd, &json!({"umData": null})).await;
    let n = notifications(&sink.next().await);
    assert_eq!(n.len(), 1);
    assert_eq!(n[0]["notifId"], "kept");
    assert!(n[0]["smPolicyData"].get("umData").is_none());
    sink.quiet().await;
    let db = udr.udr.stores.policy.clone();
    let mut left = 1;
    for _ in 0..100 {
        left = db.outbox_len().await.unwrap();
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(left, 0, "outbox rows left");
    udr.stop().await;
}

testkit::on_both_backends!(
    n36_and_provisioning_changes_are_notified,
    subscription_errors,
    retries_batch_in_order,
    subscriptions_sharing_a_notification_uri_share_requests,
    refused_and_undeliverable_notifications_are_dropped,
    outbox_survives_a_restart,
    subscriptions_expire,
    fragment_subscriptions_report_only_their_items,
    deleted_subscriptions_notifications_are_dropped_across_a_restart,
);
