//! Two PCF instances on one MariaDB database with `[pcf] shared_database` (MariaDB only:
//! skipped without it unless FIVECORE_REQUIRE_MARIADB=1): an SM association created at one is
//! served by the other within the test's deadline, updated and deleted likewise; a state
//! variable one instance's decision set is read by the other's next decision; an AM
//! association made at the second is served by the first.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use pcf::PcfConfig;
use serde_json::json;

/// Within this long (a loaded CI machine; the feed is polled every 25 ms).
const DEADLINE: Duration = Duration::from_millis(2000);

/// The default project with a state variable counting the subscriber's SM creates.
fn counting_project(into: &Path) -> PathBuf {
    let p = default_project(into);
    std::fs::create_dir_all(p.join("scripts")).unwrap();
    std::fs::write(
        p.join("scripts/count.rhai"),
        "let n = ssv.sessions; if n == () { 1 } else { n + 1 }",
    )
    .unwrap();
    let sm = p.join("rules/sm.toml");
    let mut rules = std::fs::read_to_string(&sm).unwrap();
    rules.push_str(
        "\n[[rule]]\nname = \"count\"\n[[rule.then]]\nscript = \"count\"\ninto = \"decision.count\"\n\
         [[rule.then]]\nssv = \"sessions\"\nfrom = \"decision.count\"\n\
         [[rule.then]]\nremove = \"decision.count\"\n",
    );
    std::fs::write(&sm, rules).unwrap();
    p
}

/// GETs `url` until `want` holds for its status and body, or the deadline passes.
async fn until(
    url: &str,
    want: impl Fn(u16, &serde_json::Value) -> bool,
) -> (u16, serde_json::Value) {
    let c = client();
    let started = Instant::now();
    loop {
        let r = c.get(url).send().await.unwrap();
        let (status, v) = (r.status().as_u16(), body(&r));
        if want(status, &v) || started.elapsed() > DEADLINE {
            return (status, v);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn two_instances_serve_each_others_sessions_and_state() {
    if !testkit::backends::use_mariadb() {
        return;
    }
    let d = state_dir();
    let project = counting_project(&d.path().join("policy"));
    let config = || PcfConfig {
        policy: Some(project.clone()),
        shared_database: true,
        ..PcfConfig::default()
    };
    let a = TestPcf::start_with(d.path(), config()).await;
    let b = TestPcf::start_with(d.path(), config()).await;
    let c = client();

    // Created at A, served by B.
    let mut ctx = open5gs_context(7);
    ctx["pduSessionId"] = json!(1);
    let r = c.post(&a.sm("")).json(&ctx).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 201, "{}", body(&r));
    let path = {
        let loc = r.header("location").unwrap();
        loc[loc.find("/npcf").unwrap()..].to_string()
    };
    let at_b = format!("{}{path}", b.base);
    let (status, got) = until(&at_b, |s, _| s == 200).await;
    assert_eq!(status, 200, "B does not serve A's session: {got}");
    assert_eq!(got["context"]["supi"], "imsi-999700000000007");

    // Updated at A: B serves the new decision.
    let r = c
        .post(&format!("{}{path}/update", a.base))
        .json(&json!({"repPolicyCtrlReqTriggers": ["SE_AMBR_CH"],
            "subsSessAmbr": {"uplink": "500 Mbps", "downlink": "1 Gbps"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{}", body(&r));
    let (_, got) =
        until(&at_b, |_, v| v["policy"]["sessRules"]["s1"]["authSessAmbr"]["uplink"] == "500 Mbps")
            .await;
    assert_eq!(got["policy"]["sessRules"]["s1"]["authSessAmbr"]["uplink"], "500 Mbps", "{got}");

    // The subscriber's second session, at B, counts on from A's state variable (A's create
    // and update each counted one).
    let at_a =
        a.pcf.store.subscriber("imsi-999700000000007").await.unwrap().ssv["sessions"].clone();
    assert_eq!(at_a, 2);
    let subscriber_seen = Instant::now();
    loop {
        let kept = b.pcf.store.subscriber("imsi-999700000000007").await.unwrap();
        if kept.ssv.get("sessions") == Some(&at_a) || subscriber_seen.elapsed() > DEADLINE {
            assert_eq!(kept.ssv.get("sessions"), Some(&at_a), "B lacks A's state variable");
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    ctx["pduSessionId"] = json!(2);
    let r = c.post(&b.sm("")).json(&ctx).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 201, "{}", body(&r));
    let second = {
        let loc = r.header("location").unwrap();
        loc[loc.find("/npcf").unwrap()..].to_string()
    };

    // An AM association made at B is served by A.
    let am = json!({
        "notificationUri": "http://127.0.0.5:7777/namf-callback/v1/imsi-999700000000009/am",
        "supi": "imsi-999700000000009",
        "accessType": "3GPP_ACCESS",
        "servingPlmn": {"mcc": "999", "mnc": "70"},
        "ratType": "NR",
        "guami": {"plmnId": {"mcc": "999", "mnc": "70"}, "amfId": "020040"},
        "rfsp": 7,
        "suppFeat": "4000000"
    });
    let r = c
        .post(&format!("{}/npcf-am-policy-control/v1/policies", b.base))
        .json(&am)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201, "{}", body(&r));
    let am_path = {
        let loc = r.header("location").unwrap();
        loc[loc.find("/npcf").unwrap()..].to_string()
    };
    let (status, got) = until(&format!("{}{am_path}", a.base), |s, _| s == 200).await;
    assert_eq!(status, 200, "A does not serve B's AM association: {got}");

    // Deleted at A: gone at B.
    let r = c.post(&format!("{}{path}/delete", a.base)).json(&json!({})).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 204);
    let (status, _) = until(&at_b, |s, _| s == 404).await;
    assert_eq!(status, 404, "B still serves the session A deleted");
    let (status, _) = until(&format!("{}{second}", a.base), |s, _| s == 200).await;
    assert_eq!(status, 200, "A does not serve B's session");
    a.stop().await;
    b.stop().await;

    // B's decision counted on from A's: 3 is stored, not 1.
    let kept = stored_subscriber(d.path(), "imsi-999700000000007").await;
    assert_eq!(kept.ssv["sessions"], 3, "{:?}", kept.ssv);
}
