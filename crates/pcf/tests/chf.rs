//! Spending limits (N28, TS 29.594): with `[pcf.chf]` on and a project that reads counters, a
//! subscriber's first SM association subscribes at a (simulated) CHF and decides with the
//! statuses; its later associations reuse the subscription; a notification changes a status
//! and the SMFs hear of the changed decisions; a termination drops the statuses; the last
//! delete unsubscribes; a restart keeps it all. A CHF that is down fails no create, and a
//! project without counters never calls the CHF.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::chf::SimChf;
use common::*;
use pcf::config::ChfConfig;
use pcf::PcfConfig;
use serde_json::{json, Value};
use testkit::sink::Sink;
use testkit::specs::Specs;

fn chf_specs() -> Specs {
    Specs::load(&[
        "TS29594_Nchf_SpendingLimitControl",
        "TS29512_Npcf_SMPolicyControl",
        "TS29571_CommonData",
        "TS29122_CommonData",
    ])
}

/// The default project reading counter `data-cap`: exhausted, the session AMBR drops to 1 Mbps.
fn capped_project(into: &Path) -> PathBuf {
    let p = default_project(into);
    let manifest = p.join("project.toml");
    let mut m = std::fs::read_to_string(&manifest).unwrap();
    m.push_str("\n[spending]\ncounters = [\"data-cap\"]\n");
    std::fs::write(&manifest, m).unwrap();
    let sm = p.join("rules/sm.toml");
    let mut rules = std::fs::read_to_string(&sm).unwrap();
    rules.push_str(
        "\n[[rule]]\nname = \"capped\"\nwhen = [\"spending.data-cap == 'exhausted'\"]\n\
         [[rule.then]]\nset = \"decision.sessRules.s1.authSessAmbr\"\n\
         value = { uplink = \"1 Mbps\", downlink = \"1 Mbps\" }\n",
    );
    std::fs::write(&sm, rules).unwrap();
    p
}

fn config(policy: PathBuf, chf: &str) -> PcfConfig {
    PcfConfig {
        policy: Some(policy),
        chf: ChfConfig { enabled: true, api_root: Some(chf.to_string()), ..ChfConfig::default() },
        ..PcfConfig::default()
    }
}

fn downlink(decision: &Value) -> &Value {
    &decision["sessRules"]["s1"]["authSessAmbr"]["downlink"]
}

async fn metrics(pcf: &TestPcf) -> String {
    let r = client().get(&format!("{}/metrics", pcf.base)).send().await.unwrap();
    String::from_utf8(r.body().to_vec()).unwrap()
}

fn has(text: &str, line: &str) -> bool {
    text.lines().any(|l| l == line)
}

/// Creates a session; (its Location, its decision).
async fn create(pcf: &TestPcf, ctx: &Value) -> (String, Value) {
    let r = client().post(&pcf.sm("")).json(ctx).send().await.unwrap();
    let b = body(&r);
    assert_eq!(r.status(), 201, "{b}");
    (r.header("location").unwrap().to_string(), b)
}

fn status(counter: &str, s: &str) -> Value {
    json!({counter: {"policyCounterId": counter, "currentStatus": s}})
}

#[tokio::test]
async fn subscribe_once_decide_notify_terminate_and_unsubscribe_with_the_last_delete() {
    let specs = chf_specs();
    let d = tempfile::tempdir().unwrap();
    let chf = SimChf::start().await;
    let pcf =
        TestPcf::start_with(d.path(), config(capped_project(&d.path().join("policy")), &chf.base))
            .await;
    let c = client();
    let mut smf = Sink::start().await;
    let mut a = open5gs_context(31);
    a["notificationUri"] = json!(smf.url);
    a["gpsi"] = json!("msisdn-447700900031");
    let supi = a["supi"].as_str().unwrap().to_string();

    // The first session subscribes, with the project's counters; the status is valid.
    let (loc1, d1) = create(&pcf, &a).await;
    assert_eq!(downlink(&d1), "2 Gbps", "{d1}");
    let got = chf.received();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        (got[0].method.as_str(), got[0].path.as_str()),
        ("POST", "/nchf-spendinglimitcontrol/v1/subscriptions")
    );
    let ctx = &got[0].body;
    specs.assert_valid("TS29594_Nchf_SpendingLimitControl", "SpendingLimitContext", ctx);
    if specs.available() {
        // The schema is read, not skipped: an empty counter list is refused.
        let empty = json!({"supi": supi, "policyCounterIds": []});
        assert!(!specs.is_valid(
            "TS29594_Nchf_SpendingLimitControl",
            "SpendingLimitContext",
            &empty
        ));
    }
    assert_eq!(ctx["supi"], supi);
    assert_eq!(ctx["gpsi"], "msisdn-447700900031");
    assert_eq!(ctx["policyCounterIds"], json!(["data-cap"]));
    let notif = ctx["notifUri"].as_str().unwrap().to_string();
    assert!(notif.starts_with(&pcf.base), "{notif}");

    // A second session of the subscriber uses the same subscription.
    let mut a2 = a.clone();
    a2["pduSessionId"] = json!(2);
    let (loc2, _) = create(&pcf, &a2).await;
    assert_eq!(chf.count("POST"), 1);

    // The counter runs out: 204, both sessions decided again, each SMF told of the change.
    let n = json!({"supi": supi, "statusInfos": status("data-cap", "exhausted")});
    specs.assert_valid("TS29594_Nchf_SpendingLimitControl", "SpendingLimitStatus", &n);
    let r = c.post(&format!("{notif}/notify")).json(&n).send().await.unwrap();
    assert_eq!(r.status(), 204, "{}", body(&r));
    let mut resources = Vec::new();
    for _ in 0..2 {
        let u = smf.next().await;
        specs.assert_valid("TS29512_Npcf_SMPolicyControl", "SmPolicyNotification", &u);
        assert_eq!(downlink(&u["smPolicyDecision"]), "1 Mbps", "{u}");
        resources.push(u["resourceUri"].as_str().unwrap().to_string());
    }
    resources.sort();
    let mut want = vec![loc1.clone(), loc2.clone()];
    want.sort();
    assert_eq!(resources, want);
    let got = body(&c.get(&loc1).send().await.unwrap());
    assert_eq!(downlink(&got["policy"]), "1 Mbps");
    // An update decides with the status too.
    let r = c
        .post(&format!("{loc1}/update"))
        .json(&json!({"repPolicyCtrlReqTriggers": ["AC_TY_CH"], "accessType": "3GPP_ACCESS"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", body(&r));
    assert!(body(&r).get("sessRules").is_none(), "nothing changed: {}", body(&r));

    // Malformed notifications: 400 naming the field; an unknown subscriber's: 404.
    for (bad, param) in [
        (
            json!({"statusInfos": {"data-cap": {"policyCounterId": "data-cap"}}}),
            "/statusInfos/data-cap/currentStatus",
        ),
        (
            json!({"statusInfos": {"a/b": {"currentStatus": "x"}}}),
            "/statusInfos/a~1b/policyCounterId",
        ),
        (json!({"statusInfos": []}), "/statusInfos"),
        (json!({"supi": "imsi-1", "statusInfos": status("data-cap", "valid")}), "/supi"),
        (json!([1]), ""),
    ] {
        let r = c.post(&format!("{notif}/notify")).json(&bad).send().await.unwrap();
        let p = problem(&specs, &r, 400, "MANDATORY_IE_INCORRECT");
        assert_eq!(testkit::http::params(&p), [param], "{p}");
    }
    let r = c.post(&format!("{notif}/notify")).json(&json!({})).send().await.unwrap();
    problem(&specs, &r, 400, "MANDATORY_IE_MISSING");
    let r = c
        .post(&format!("{notif}/terminate"))
        .json(&json!({"termCause": "REMOVED_SUBSCRIBER"}))
        .send()
        .await
        .unwrap();
    let p = problem(&specs, &r, 400, "MANDATORY_IE_MISSING");
    assert_eq!(testkit::http::params(&p), ["/supi"]);
    let other = format!("{}/npcf-callback/v1/nchf-spendinglimit/imsi-999700000009999", pcf.base);
    let r = c
        .post(&format!("{other}/notify"))
        .json(&json!({"statusInfos": status("data-cap", "valid")}))
        .send()
        .await
        .unwrap();
    problem(&specs, &r, 404, "RESOURCE_NOT_FOUND");
    smf.quiet().await;

    // Another subscriber whose counter is exhausted from the start is capped at create.
    chf.set_status("data-cap", "exhausted");
    let mut b = open5gs_context(32);
    b["notificationUri"] = json!(smf.url);
    let (loc_b, db) = create(&pcf, &b).await;
    assert_eq!(downlink(&db), "1 Mbps", "{db}");
    assert_eq!(chf.count("POST"), 2);

    // The CHF ends the first subscriber's subscription: its statuses go, its sessions are
    // decided without them.
    let t = json!({"supi": supi, "termCause": "REMOVED_SUBSCRIBER"});
    specs.assert_valid("TS29594_Nchf_SpendingLimitControl", "SubscriptionTerminationInfo", &t);
    let r = c.post(&format!("{notif}/terminate")).json(&t).send().await.unwrap();
    assert_eq!(r.status(), 204, "{}", body(&r));
    for _ in 0..2 {
        let u = smf.next().await;
        assert_eq!(downlink(&u["smPolicyDecision"]), "2 Gbps", "{u}");
    }
    // Its sessions end: nothing to unsubscribe (the CHF ended it).
    for loc in [&loc1, &loc2] {
        assert_eq!(c.post(&format!("{loc}/delete")).send().await.unwrap().status(), 204);
    }
    assert_eq!(chf.count("DELETE"), 0);
    // The other's last session ends: its subscription is removed at the CHF.
    assert_eq!(c.post(&format!("{loc_b}/delete")).send().await.unwrap().status(), 204);
    let dels: Vec<_> = chf.received().into_iter().filter(|r| r.method == "DELETE").collect();
    assert_eq!(dels.len(), 1);
    assert_eq!(dels[0].path, "/nchf-spendinglimitcontrol/v1/subscriptions/2");
    smf.quiet().await;

    let m = metrics(&pcf).await;
    for line in [
        "pcf_chf_subscriptions_total{result=\"ok\"} 2",
        "pcf_chf_subscriptions_total{result=\"failed\"} 0",
        "pcf_chf_unsubscriptions_total{result=\"ok\"} 1",
        "pcf_chf_notifications_total{kind=\"notify\"} 1",
        "pcf_chf_notifications_total{kind=\"terminate\"} 1",
        "pcf_chf_subscribers 0",
        "pcf_sm_update_notify_total{result=\"ok\"} 4",
    ] {
        assert!(has(&m, line), "{line} not in {m}");
    }
    pcf.stop().await;
    chf.stop();
}

async fn a_restart_keeps_the_subscription_and_its_statuses() {
    let d = state_dir();
    let chf = SimChf::start().await;
    let policy = capped_project(&d.path().join("policy"));
    let pcf = TestPcf::start_with(d.path(), config(policy.clone(), &chf.base)).await;
    let c = client();
    let mut smf = Sink::start().await;
    let mut a = open5gs_context(41);
    a["notificationUri"] = json!(smf.url);
    let supi = a["supi"].as_str().unwrap().to_string();
    let (loc1, d1) = create(&pcf, &a).await;
    assert_eq!(downlink(&d1), "2 Gbps");
    let notif = chf.received()[0].body["notifUri"].as_str().unwrap().to_string();
    let n = json!({"supi": supi, "statusInfos": status("data-cap", "exhausted")});
    let r = c.post(&format!("{notif}/notify")).json(&n).send().await.unwrap();
    assert_eq!(r.status(), 204);
    // The SMF hears of it once the status is stored.
    assert_eq!(downlink(&smf.next().await["smPolicyDecision"]), "1 Mbps");
    pcf.stop().await;

    let pcf = TestPcf::start_with(d.path(), config(policy, &chf.base)).await;
    let m = metrics(&pcf).await;
    assert!(has(&m, "pcf_chf_subscribers 1"), "{m}");
    // A second session after the restart: no new subscription, the stored status decides.
    let mut a2 = a.clone();
    a2["pduSessionId"] = json!(2);
    let (loc2, d2) = create(&pcf, &a2).await;
    assert_eq!(downlink(&d2), "1 Mbps", "{d2}");
    assert_eq!(chf.count("POST"), 1);
    // The restarted PCF takes the CHF's notifications for the subscription (at the same path;
    // only the test's port changed).
    let path = notif.splitn(4, '/').nth(3).unwrap();
    let n = json!({"supi": supi, "statusInfos": status("data-cap", "valid")});
    let r = c.post(&format!("{}/{path}/notify", pcf.base)).json(&n).send().await.unwrap();
    assert_eq!(r.status(), 204, "{}", body(&r));
    for _ in 0..2 {
        assert_eq!(downlink(&smf.next().await["smPolicyDecision"]), "2 Gbps");
    }
    // The last delete unsubscribes (the first session's Location names the old port).
    let loc1 = format!("{}/{}", pcf.base, loc1.splitn(4, '/').nth(3).unwrap());
    assert_eq!(c.post(&format!("{loc1}/delete")).send().await.unwrap().status(), 204);
    assert_eq!(chf.count("DELETE"), 0);
    assert_eq!(c.post(&format!("{loc2}/delete")).send().await.unwrap().status(), 204);
    assert_eq!(chf.count("DELETE"), 1);
    pcf.stop().await;
    chf.stop();
}

#[tokio::test]
async fn a_chf_down_fails_no_create_and_a_project_without_counters_never_calls_it() {
    let d = tempfile::tempdir().unwrap();
    // Nothing listens here.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let mut cfg = config(capped_project(&d.path().join("policy")), &closed);
    cfg.chf.timeout_ms = 300;
    let pcf = TestPcf::start_with(d.path(), cfg).await;
    let (_, d1) = create(&pcf, &open5gs_context(51)).await;
    assert_eq!(downlink(&d1), "2 Gbps", "decided without statuses: {d1}");
    // The next create of the subscriber tries again.
    let mut again = open5gs_context(51);
    again["pduSessionId"] = json!(2);
    create(&pcf, &again).await;
    let m = metrics(&pcf).await;
    assert!(has(&m, "pcf_chf_subscriptions_total{result=\"failed\"} 2"), "{m}");
    assert!(has(&m, "pcf_chf_subscribers 0"), "{m}");
    pcf.stop().await;

    // The default project reads no counter: the CHF hears nothing, through every operation.
    let d = tempfile::tempdir().unwrap();
    let chf = SimChf::start().await;
    let pcf =
        TestPcf::start_with(d.path(), config(default_project(&d.path().join("policy")), &chf.base))
            .await;
    let (loc, _) = create(&pcf, &open5gs_context(52)).await;
    let c = client();
    assert_eq!(
        c.post(&format!("{loc}/update"))
            .json(&json!({"repPolicyCtrlReqTriggers": ["AC_TY_CH"], "accessType": "3GPP_ACCESS"}))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(c.post(&format!("{loc}/delete")).send().await.unwrap().status(), 204);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(chf.received().is_empty(), "{:?}", chf.received());
    pcf.stop().await;
    chf.stop();
}

testkit::on_both_backends!(a_restart_keeps_the_subscription_and_its_statuses,);
