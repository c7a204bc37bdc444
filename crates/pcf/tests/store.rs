//! The PCF's store traits ([`PcfStore`], [`PolicyVersionStore`]) driven directly, on SQLite and
//! on MariaDB (`testkit::on_both_backends!`): each call gives the same answers on both, what a
//! call writes together commits together (or not at all), and everything is there after the
//! store is closed and opened again.

mod common;

use std::collections::BTreeMap;

use common::{open_store, state_dir};
use pcf::store::{
    AppSession, Association, ChfSubscription, Kind, NewVersion, PcfStore, Resident, SmPolicy,
    SsvUpdates, SySession, UeDelivery, UsageRow, UsageTotals,
};
use serde_json::{json, Map, Value};

fn sm(id: &str, supi: &str, context: Value, decision: &str) -> SmPolicy {
    SmPolicy {
        id: id.into(),
        supi: supi.into(),
        context: serde_json::to_vec(&context).unwrap(),
        decision: decision.as_bytes().to_vec(),
        policy_version: "1.0.0".into(),
        updated_ms: 1000,
        binding: None,
    }
}

fn ssv(pairs: &[(&str, Value)]) -> SsvUpdates {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

fn map(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => panic!("not an object"),
    }
}

const SUPI: &str = "imsi-001010000000001";

async fn sm_associations_commit_with_their_state_variables() {
    let d = state_dir();
    let (db, s, _) = open_store(d.path()).await;

    let mut a = sm("sm-1", SUPI, json!({"dnn": "internet"}), "{\"d\":1}");
    a.binding = Some("http://bsf/bindings/1".into());
    s.create_sm(
        a.clone(),
        ssv(&[("n", json!(1)), ("dnn", json!("internet"))]),
        Some("http://udr/s/1".into()),
    )
    .await
    .unwrap();
    assert_eq!(s.get_sm("sm-1").await.unwrap(), Some(a.clone()));
    let (got, kept) = s.get_sm_with_subscriber("sm-1").await.unwrap().unwrap();
    assert_eq!(got, a);
    assert_eq!(kept.ssv, map(json!({"n": 1, "dnn": "internet"})));
    assert_eq!(kept.udr_subscription.as_deref(), Some("http://udr/s/1"));

    // A create that fails (the id is taken) writes nothing of what it carried: not its state
    // variables, not its UDR subscription.
    let dup = sm("sm-1", SUPI, json!({}), "{}");
    assert!(s
        .create_sm(dup, ssv(&[("n", json!(99))]), Some("http://udr/s/9".into()))
        .await
        .is_err());
    let kept = s.subscriber(SUPI).await.unwrap();
    assert_eq!(kept.ssv["n"], json!(1), "a failed create merged its state variables");
    assert_eq!(kept.udr_subscription.as_deref(), Some("http://udr/s/1"));

    // A second session of the subscriber, with its CHF subscription in the same commit.
    let b = sm("sm-2", SUPI, json!({"dnn": "ims"}), "{\"d\":2}");
    let chf = ChfSubscription {
        supi: SUPI.into(),
        uri: "http://chf/s/1".into(),
        statuses: map(json!({"cap": "valid"})),
    };
    s.create_sm_with_chf(b.clone(), ssv(&[("ims", json!(true))]), None, chf.clone()).await.unwrap();
    assert_eq!(s.chf_subscriptions().await.unwrap(), vec![chf.clone()]);
    assert!(s.set_chf_statuses(SUPI, map(json!({"cap": "invalid"}))).await.unwrap());
    assert!(!s.set_chf_statuses("imsi-none", Map::new()).await.unwrap());
    assert_eq!(s.chf_subscriptions().await.unwrap()[0].statuses, map(json!({"cap": "invalid"})));
    let mut ids: Vec<String> = s.sm_of(SUPI).await.unwrap().into_iter().map(|p| p.id).collect();
    ids.sort();
    assert_eq!(ids, ["sm-1", "sm-2"]);
    assert_eq!(s.count_sm().await.unwrap(), 2);

    // Update: context, decision and binding replaced, state variables merged (null removes).
    let mut a2 = sm("sm-1", SUPI, json!({"dnn": "internet", "rat": "NR"}), "{\"d\":3}");
    a2.updated_ms = 2000;
    a2.binding = Some("http://bsf/bindings/2".into());
    assert!(s.update_sm(a2.clone(), ssv(&[("dnn", Value::Null), ("n", json!(2))])).await.unwrap());
    assert_eq!(s.get_sm("sm-1").await.unwrap(), Some(a2.clone()));
    assert_eq!(s.subscriber(SUPI).await.unwrap().ssv, map(json!({"n": 2, "ims": true})));
    // The same update again changes nothing, and is still found.
    assert!(s.update_sm(a2.clone(), SsvUpdates::new()).await.unwrap());
    assert!(!s
        .update_sm(sm("sm-none", SUPI, json!({}), "{}"), ssv(&[("x", json!(1))]))
        .await
        .unwrap());
    assert!(!s.subscriber(SUPI).await.unwrap().ssv.contains_key("x"));
    assert!(s.touch_sm("sm-1", 3000).await.unwrap());
    assert!(!s.touch_sm("sm-none", 3000).await.unwrap());
    assert_eq!(s.get_sm("sm-1").await.unwrap().unwrap().updated_ms, 3000);
    let stale = s.stale_sm(2500, 10).await.unwrap();
    assert_eq!(stale.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(), ["sm-2"]);

    // Not the last: the subscriptions stay. The last: they go, and the delete says which.
    let d1 = s.delete_sm_known("sm-1", false, Vec::new()).await.unwrap().unwrap();
    assert_eq!(d1.binding.as_deref(), Some("http://bsf/bindings/2"));
    assert_eq!((d1.udr_subscription, d1.chf_subscription), (None, None));
    assert!(s.delete_sm_known("sm-1", false, Vec::new()).await.unwrap().is_none());
    // Counted by the store itself when the caller does not say.
    let d2 = s.delete_sm("sm-2").await.unwrap().unwrap();
    assert_eq!(d2.supi, SUPI);
    assert_eq!(d2.udr_subscription.as_deref(), Some("http://udr/s/1"));
    assert_eq!(d2.chf_subscription.as_deref(), Some("http://chf/s/1"));
    assert_eq!(s.subscriber(SUPI).await.unwrap().udr_subscription, None);
    assert!(s.chf_subscriptions().await.unwrap().is_empty());
    assert_eq!(s.count_sm().await.unwrap(), 0);
    // The state variables outlive the sessions.
    assert_eq!(s.subscriber(SUPI).await.unwrap().ssv, map(json!({"n": 2, "ims": true})));
    assert!(!s.drop_chf_subscription(SUPI, "http://chf/s/1").await.unwrap());
    db.close().await.unwrap();
}

fn association(kind: Kind, id: &str, n: i64) -> Association {
    Association {
        kind,
        id: id.into(),
        supi: SUPI.into(),
        context: format!("{{\"c\":{n}}}").into_bytes(),
        decision: format!("{{\"d\":{n}}}").into_bytes(),
        policy_version: "1.0.0".into(),
        updated_ms: n,
        udr_subscription: (kind == Kind::Am).then(|| format!("http://udr/am/{id}")),
    }
}

async fn am_and_ue_associations_and_ursp_deliveries() {
    let d = state_dir();
    let (db, s, _) = open_store(d.path()).await;
    let am = association(Kind::Am, "a-1", 1);
    let ue = association(Kind::Ue, "a-1", 2);
    s.create_assoc(am.clone(), ssv(&[("am", json!(1))])).await.unwrap();
    s.create_assoc(ue.clone(), SsvUpdates::new()).await.unwrap();
    assert!(s.create_assoc(am.clone(), ssv(&[("am", json!(5))])).await.is_err());
    assert_eq!(s.subscriber(SUPI).await.unwrap().ssv, map(json!({"am": 1})));
    assert_eq!(s.get_assoc(Kind::Am, "a-1").await.unwrap(), Some(am.clone()));
    assert_eq!(s.get_assoc(Kind::Ue, "a-1").await.unwrap(), Some(ue.clone()));
    assert_eq!(s.assoc_of(Kind::Ue, SUPI).await.unwrap(), vec![ue.clone()]);
    let am2 = Association { updated_ms: 10, ..association(Kind::Am, "a-1", 3) };
    assert!(s.update_assoc(am2.clone(), ssv(&[("am", Value::Null)])).await.unwrap());
    assert!(!s.update_assoc(association(Kind::Am, "a-2", 1), SsvUpdates::new()).await.unwrap());
    assert_eq!(s.get_assoc(Kind::Am, "a-1").await.unwrap(), Some(am2.clone()));
    assert!(s.subscriber(SUPI).await.unwrap().ssv.is_empty());
    let stale = s.stale_assoc(5, 10).await.unwrap();
    assert_eq!(stale, vec![ue.clone()]);

    let delivery = UeDelivery {
        assoc_id: "a-1".into(),
        pti: 7,
        ursp_digest: "abc".into(),
        policy_version: "1.0.0".into(),
        outcome: "pending".into(),
        n1_subscription: Some("http://amf/n1/1".into()),
        updated_ms: 5,
    };
    s.put_ue_delivery(delivery.clone()).await.unwrap();
    assert_eq!(s.ue_delivery("a-1").await.unwrap(), Some(delivery.clone()));
    // Only the last command's outcome, and only from the outcome named.
    assert!(!s.ue_delivery_outcome("a-1", 6, "complete", None).await.unwrap());
    assert!(!s.ue_delivery_outcome("a-1", 7, "complete", Some("initiated")).await.unwrap());
    assert!(s.ue_delivery_outcome("a-1", 7, "initiated", Some("pending")).await.unwrap());
    assert!(s.ue_delivery_outcome("a-1", 7, "complete", None).await.unwrap());
    assert_eq!(s.ue_delivery("a-1").await.unwrap().unwrap().outcome, "complete");
    let next = UeDelivery { pti: 8, outcome: "pending".into(), n1_subscription: None, ..delivery };
    s.put_ue_delivery(next.clone()).await.unwrap();
    assert_eq!(s.ue_delivery("a-1").await.unwrap(), Some(next.clone()));
    assert_eq!(s.delete_ue_delivery("a-1").await.unwrap(), Some(next));
    assert_eq!(s.delete_ue_delivery("a-1").await.unwrap(), None);

    assert_eq!(s.delete_assoc(Kind::Am, "a-1").await.unwrap(), Some(am2));
    assert_eq!(s.delete_assoc(Kind::Am, "a-1").await.unwrap(), None);
    assert_eq!(s.get_assoc(Kind::Ue, "a-1").await.unwrap(), Some(ue));
    db.close().await.unwrap();
}

fn app(id: &str, sm: &str) -> AppSession {
    AppSession {
        id: id.into(),
        sm_policy_id: sm.into(),
        supi: SUPI.into(),
        context: b"{\"afAppId\":\"voice\"}".to_vec(),
        rules: b"{\"pccRules\":{}}".to_vec(),
        updated_ms: 1,
    }
}

fn usage(key: &str, total: u64) -> UsageRow {
    UsageRow {
        supi: SUPI.into(),
        key: key.into(),
        totals: UsageTotals { total, uplink: total / 4, downlink: total - total / 4, time: 60 },
        updated_ms: 7,
    }
}

async fn app_sessions_usage_sy_and_a_reopen() {
    let d = state_dir();
    let (db, s, _) = open_store(d.path()).await;
    let ctx = json!({"ipv4Address": "10.1.2.3", "ipv6AddressPrefix": "2001:db8:1::/64",
        "dnn": "IMS"});
    s.create_sm(sm("sm-1", SUPI, ctx, "{}"), SsvUpdates::new(), None).await.unwrap();
    s.create_sm(
        sm("sm-0", SUPI, json!({"ipv4Address": "10.9.9.9"}), "{}"),
        SsvUpdates::new(),
        None,
    )
    .await
    .unwrap();
    let found = s.sm_of_ue(Some("10.1.2.3"), None, Some("ims")).await.unwrap().unwrap();
    assert_eq!(found.id, "sm-1");
    let found = s.sm_of_ue(None, Some("2001:db8:1::42"), None).await.unwrap().unwrap();
    assert_eq!(found.id, "sm-1");
    assert!(s.sm_of_ue(Some("10.1.2.3"), None, Some("internet")).await.unwrap().is_none());
    assert!(s.sm_of_ue(None, None, None).await.unwrap().is_none());

    // An application session and its association's new decision, together.
    let with_rule =
        SmPolicy { decision: b"{\"rule\":1}".to_vec(), ..sm("sm-1", SUPI, json!({}), "{}") };
    assert!(!s
        .create_app(app("app-x", "sm-none"), sm("sm-none", SUPI, json!({}), "{}"))
        .await
        .unwrap());
    assert!(s.get_app("app-x").await.unwrap().is_none());
    assert!(s.create_app(app("app-1", "sm-1"), with_rule.clone()).await.unwrap());
    assert_eq!(s.get_sm("sm-1").await.unwrap().unwrap().decision, with_rule.decision);
    let changed =
        AppSession { rules: b"{\"pccRules\":{\"r\":1}}".to_vec(), ..app("app-1", "sm-1") };
    assert!(s.update_app(changed.clone(), with_rule.clone()).await.unwrap());
    assert!(!s.update_app(app("app-none", "sm-1"), with_rule.clone()).await.unwrap());
    assert_eq!(s.apps_of("sm-1").await.unwrap(), vec![changed.clone()]);
    assert!(s.create_app(app("app-2", "sm-1"), with_rule.clone()).await.unwrap());
    let without = SmPolicy { decision: b"{}".to_vec(), ..with_rule.clone() };
    assert_eq!(
        s.delete_app("app-2", Some(without.clone())).await.unwrap(),
        Some(app("app-2", "sm-1"))
    );
    assert_eq!(s.get_sm("sm-1").await.unwrap().unwrap().decision, b"{}");
    assert_eq!(s.delete_app("app-2", None).await.unwrap(), None);

    // Usage with the decision that counted it; the final report with the delete.
    let mut upd = s.get_sm("sm-0").await.unwrap().unwrap();
    upd.updated_ms = 50;
    let big = u64::MAX / 2;
    assert!(s
        .update_sm_with_usage(upd, SsvUpdates::new(), vec![usage("k1", 100), usage("k2", big)])
        .await
        .unwrap());
    assert!(!s
        .update_sm_with_usage(
            sm("sm-none", SUPI, json!({}), "{}"),
            SsvUpdates::new(),
            vec![usage("k3", 1)]
        )
        .await
        .unwrap());
    let d0 = s.delete_sm_known("sm-0", false, vec![usage("k1", 250)]).await.unwrap();
    assert!(d0.is_some());
    let mut all = s.usage_all().await.unwrap();
    all.sort_by(|a, b| a.key.cmp(&b.key));
    assert_eq!(all, vec![usage("k1", 250), usage("k2", big)]);

    // Sy sessions.
    let sy = SySession {
        supi: SUPI.into(),
        session_id: "pcf;1;2".into(),
        ocs_host: "ocs.example".into(),
        ocs_realm: "example".into(),
        counters: vec!["c1".into(), "c2".into()],
        statuses: map(json!({"c1": "valid"})),
    };
    s.put_sy_session(sy.clone()).await.unwrap();
    let sy2 = SySession { session_id: "pcf;1;3".into(), ..sy.clone() };
    s.put_sy_session(sy2.clone()).await.unwrap();
    assert_eq!(s.sy_sessions().await.unwrap(), vec![sy2.clone()]);
    assert!(!s.drop_sy_session(SUPI, "pcf;1;2").await.unwrap());
    let sy3 = SySession { supi: "imsi-2".into(), ..sy };
    s.put_sy_session(sy3.clone()).await.unwrap();
    assert!(s.drop_sy_session(SUPI, "pcf;1;3").await.unwrap());
    assert_eq!(s.sy_sessions().await.unwrap(), vec![sy3.clone()]);

    s.create_assoc(association(Kind::Am, "a-1", 1), ssv(&[("k", json!("v"))])).await.unwrap();
    s.put_ue_delivery(UeDelivery {
        assoc_id: "a-1".into(),
        pti: 1,
        ursp_digest: String::new(),
        policy_version: "1.0.0".into(),
        outcome: "complete".into(),
        n1_subscription: None,
        updated_ms: 1,
    })
    .await
    .unwrap();
    let before = s.snapshot().await.unwrap();
    db.close().await.unwrap();

    // Closed and opened again: everything is there, and the resident store loads it.
    let (db, s, _) = open_store(d.path()).await;
    let after = s.snapshot().await.unwrap();
    assert_eq!(after.sm, before.sm);
    assert_eq!(after.sm.len(), 1);
    assert_eq!(after.associations, before.associations);
    assert_eq!(after.subscribers, before.subscribers);
    assert_eq!(after.subscribers[0].1.ssv, map(json!({"k": "v"})));
    assert_eq!(after.apps, vec![changed]);
    assert_eq!(after.ue_deliveries, before.ue_deliveries);
    assert_eq!(after.ue_deliveries.len(), 1);
    assert_eq!(s.sy_sessions().await.unwrap(), vec![sy3]);
    assert_eq!(s.usage_all().await.unwrap().len(), 2);
    let resident = Resident::load(s.clone()).await.unwrap();
    assert_eq!(resident.counts(), (1, 1));
    assert_eq!(resident.apps_of("sm-1").await.unwrap().len(), 1);
    // Deleting the association takes its application sessions with it.
    resident.delete_sm("sm-1").await.unwrap().unwrap();
    assert!(s.get_app("app-1").await.unwrap().is_none());
    db.close().await.unwrap();
}

fn files(v: &str) -> BTreeMap<String, String> {
    [("manifest.toml".to_string(), format!("version = \"{v}\""))].into()
}

fn new_version(v: &str, dir: Option<&str>) -> NewVersion {
    NewVersion {
        name: "default".into(),
        project_version: v.into(),
        description: format!("version {v}"),
        dir: dir.map(Into::into),
        created_ms: 100,
        files: files(v),
    }
}

async fn policy_versions_activations_and_rollbacks() {
    let d = state_dir();
    let (db, _, v) = open_store(d.path()).await;
    assert_eq!(v.activation().await.unwrap(), None);
    let one = v.add_version(new_version("1.0.0", Some("/p")), true).await.unwrap();
    let two = v.add_version(new_version("2.0.0", None), false).await.unwrap();
    let three = v.add_version(new_version("3.0.0", Some("/p")), false).await.unwrap();
    assert_eq!((one.id, two.id, three.id), (1, 2, 3));
    let listed: Vec<i64> = v.versions().await.unwrap().iter().map(|x| x.id).collect();
    assert_eq!(listed, [3, 2, 1]);
    let (got, got_files) = v.version(2).await.unwrap().unwrap();
    assert_eq!((got, got_files), (two.clone(), files("2.0.0")));
    assert!(v.version(9).await.unwrap().is_none());
    assert_eq!(v.newest_from_dir("/p").await.unwrap().unwrap().0, three);
    assert!(v.newest_from_dir("/q").await.unwrap().is_none());

    assert_eq!(v.activation().await.unwrap().map(|a| (a.active, a.previous)), Some((1, None)));
    assert_eq!(v.rollback(150).await.unwrap(), None, "nothing before the first");
    let a = v.activate(2, 200).await.unwrap().unwrap();
    assert_eq!((a.active, a.previous), (2, Some(1)));
    assert_eq!(v.activate(9, 200).await.unwrap(), None);
    let a = v.activate(3, 300).await.unwrap().unwrap();
    assert_eq!((a.active, a.previous), (3, Some(2)));
    let left = v.rollback(400).await.unwrap().unwrap();
    assert_eq!((left.active, left.previous), (3, Some(2)));
    let now = v.activation().await.unwrap().unwrap();
    assert_eq!((now.active, now.previous), (2, Some(1)));
    assert_eq!(v.activated_at().await.unwrap(), [(1, 100), (2, 200)].into());
    db.close().await.unwrap();

    let (db, _, v) = open_store(d.path()).await;
    assert_eq!(v.activation().await.unwrap().map(|a| a.active), Some(2));
    assert_eq!(v.add_version(new_version("4.0.0", None), true).await.unwrap().id, 4);
    assert_eq!(v.activation().await.unwrap().map(|a| (a.active, a.previous)), Some((4, Some(2))));
    db.close().await.unwrap();
}

testkit::on_both_backends!(
    sm_associations_commit_with_their_state_variables,
    am_and_ue_associations_and_ursp_deliveries,
    app_sessions_usage_sy_and_a_reopen,
    policy_versions_activations_and_rollbacks,
);
