//! LDAP as the PCRF's subscriber data source (`[pcf.ldap]`), against a real OpenLDAP slapd
//! (tests/ldap/slapd.rs: started once for this test binary, stopped by PID when it exits) and a
//! PCEF on the diameter crate's node, over real sockets on 127.0.0.1. The decisions come from
//! policies/pcrf-ldap, whose rules read the profile's attributes. What slapd did is read from
//! its own log (one `SRCH` line per search). Skipped without slapd unless
//! `FIVECORE_REQUIRE_SLAPD=1` (./test.sh installs slapd and sets it).

mod common;
#[path = "ldap/slapd.rs"]
mod slapd;

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::wire::*;
use common::*;
use diameter::dictionary::{dcca, gx, nasreq};
use diameter::{result_code as rc, Message};
use pcf::config::OnUnknown;
use pcf::ldap::config::OnUnreachable;
use pcf::ldap::LdapConfig;
use pcf::PcfConfig;
use slapd::{Proxy, Slapd, Sub, BASE_DN, BIND_DN, BIND_PASSWORD};

/// The directory every test shares; each test uses its own subscribers, so slapd's log tells
/// each test's searches apart by filter.
fn subscribers() -> Vec<Sub<'static>> {
    let mut v = vec![
        Sub {
            imsi: "001010000000001",
            msisdn: "46700000001",
            class: "gold",
            services: &["video", "voice"],
            ambr_dl: Some("50 Mbps"),
        },
        Sub {
            imsi: "001010000000002",
            msisdn: "46700000002",
            class: "silver",
            services: &["video"],
            ambr_dl: None,
        },
        Sub {
            imsi: "001010000000050",
            msisdn: "46700000050",
            class: "gold",
            services: &["voice"],
            ambr_dl: None,
        },
        Sub {
            imsi: "001010000000051",
            msisdn: "46700000051",
            class: "gold",
            services: &[],
            ambr_dl: None,
        },
    ];
    // 060..: the failure tests' gold subscribers; 1000..1019: the pool test's.
    for imsi in IMSIS_GOLD {
        v.push(Sub { imsi, msisdn: "46700000999", class: "gold", services: &[], ambr_dl: None });
    }
    v
}

const IMSIS_GOLD: [&str; 27] = [
    "001010000000060",
    "001010000000070",
    "001010000000071",
    "001010000000072",
    "001010000000073",
    "001010000000080",
    "001010000000081",
    "001010000001000",
    "001010000001001",
    "001010000001002",
    "001010000001003",
    "001010000001004",
    "001010000001005",
    "001010000001006",
    "001010000001007",
    "001010000001008",
    "001010000001009",
    "001010000001010",
    "001010000001011",
    "001010000001012",
    "001010000001013",
    "001010000001014",
    "001010000001015",
    "001010000001016",
    "001010000001017",
    "001010000001018",
    "001010000001019",
];

async fn directory() -> Option<&'static Slapd> {
    slapd::slapd(subscribers).await
}

fn project() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../policies/pcrf-ldap")
}

/// `[pcf.ldap]` for `urls`: the attributes policies/pcrf-ldap reads, pcrfService always an
/// array, pcrfAmbrDownlink at `subscriber.plan.ambrDl`.
fn ldap(urls: &[&str]) -> LdapConfig {
    LdapConfig {
        enabled: true,
        urls: urls.iter().map(|u| u.to_string()).collect(),
        bind_dn: BIND_DN.into(),
        bind_password: BIND_PASSWORD.into(),
        base_dn: BASE_DN.into(),
        attributes: vec!["pcrfClass".into(), "pcrfService".into(), "pcrfAmbrDownlink".into()],
        multi_valued: vec!["pcrfService".into()],
        map: [("pcrfAmbrDownlink".to_string(), "plan.ambrDl".to_string())].into(),
        timeout_ms: 500,
        ..LdapConfig::default()
    }
}

async fn pcf_with(dir: &std::path::Path, ldap: LdapConfig) -> TestPcf {
    let config = PcfConfig {
        policy: Some(project()),
        diameter: diameter_on(),
        ldap,
        ..PcfConfig::default()
    };
    TestPcf::start_with(dir, config).await
}

async fn pgw(pcf: &TestPcf, wire: &Wire) -> DiameterPeer {
    DiameterPeer::pgw(pcf.diameter(), wire).await
}

/// A CCR-I of UE `imsi` with its subscribed APN-AMBR of 1 / 2 Gbit/s.
fn ccr_i(sid: &str, imsi: &str) -> Message {
    ccr(sid, 1, 0)
        .avp(dcca::SUBSCRIPTION_ID.grouped(vec![
            dcca::SUBSCRIPTION_ID_TYPE.enumerated(dcca::subscription_id_type::END_USER_IMSI),
            dcca::SUBSCRIPTION_ID_DATA.utf8(imsi),
        ]))
        .avp(nasreq::FRAMED_IP_ADDRESS.ipv4_octets(Ipv4Addr::new(10, 46, 0, 1)))
        .avp(gx::IP_CAN_TYPE.enumerated(gx::ip_can_type::TGPP_EPS))
        .avp(gx::RAT_TYPE.enumerated(gx::rat_type::EUTRAN))
        .avp(nasreq::CALLED_STATION_ID.utf8("internet"))
        .avp(gx::QOS_INFORMATION.grouped(vec![
            gx::APN_AGGREGATE_MAX_BITRATE_UL.u32(1_000_000_000),
            gx::APN_AGGREGATE_MAX_BITRATE_DL.u32(2_000_000_000),
        ]))
}

fn installed(m: &Message) -> Vec<String> {
    let mut v: Vec<String> = m
        .charging_rule_installs()
        .flat_map(|i| i.children_of(&gx::CHARGING_RULE_DEFINITION))
        .filter_map(|d| {
            String::from_utf8(d.child(&gx::CHARGING_RULE_NAME)?.as_slice().ok()?.to_vec()).ok()
        })
        .collect();
    v.sort();
    v
}

fn apn_ambr_dl(m: &Message) -> Option<u32> {
    m.find_all(&gx::QOS_INFORMATION)
        .find_map(|q| q.child(&gx::APN_AGGREGATE_MAX_BITRATE_DL)?.as_u32().ok())
}

fn imsi_filter(imsi: &str) -> String {
    format!("(imsi={imsi})")
}

async fn metrics(pcf: &TestPcf) -> String {
    let r = client().get(&format!("{}/metrics", pcf.base)).send().await.unwrap();
    String::from_utf8(r.body().to_vec()).unwrap()
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("{name} not in\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ccr_i_searches_once_its_attributes_decide_and_a_ccr_u_searches_nothing() {
    let Some(slapd) = directory().await else { return };
    let d = tempfile::tempdir().unwrap();
    let pcf = pcf_with(d.path(), ldap(&[&slapd.url])).await;
    let wire: Wire = Arc::default();
    let pgw = pgw(&pcf, &wire).await;
    let gold = "001010000000001";

    // CCR-I: one search; the gold class installs video, the services array (video, voice)
    // the IMS signalling rule, and the directory's APN-AMBR replaces the subscribed 2 Gbit/s.
    let a = pgw.send(ccr_i("pgw;ldap;1", gold)).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    assert_eq!(installed(&a), vec!["ims-signalling", "video"]);
    assert_eq!(apn_ambr_dl(&a), Some(50_000_000));
    assert_eq!(slapd.searches(&imsi_filter(gold)), 1, "{}", slapd.tail(20));

    // CCR-U: decided again from the cached profile, no search.
    let a = pgw
        .send(
            ccr("pgw;ldap;1", 2, 1)
                .avp(gx::EVENT_TRIGGER.enumerated(gx::event_trigger::RAT_CHANGE))
                .avp(gx::RAT_TYPE.enumerated(gx::rat_type::UTRAN)),
        )
        .await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    assert!(installed(&a).is_empty(), "the rules stand: {a:?}");
    // The subscriber's second session uses the same cached profile.
    let a = pgw.send(ccr_i("pgw;ldap;2", gold)).await;
    assert_eq!(installed(&a), vec!["ims-signalling", "video"]);
    assert_eq!(slapd.searches(&imsi_filter(gold)), 1, "{}", slapd.tail(20));
    let m = metrics(&pcf).await;
    assert_eq!(metric(&m, "pcf_ldap_lookups_total{result=\"found\"}"), 1.0);
    assert_eq!(metric(&m, "pcf_ldap_cache_hits_total"), 2.0);
    assert_eq!(metric(&m, "pcf_ldap_cached_subscribers"), 1.0);
    assert_eq!(metric(&m, "pcf_ldap_lookup_duration_seconds_count"), 1.0);

    // The profile lives as long as the subscriber's sessions: after both CCR-Ts, the next
    // CCR-I searches again.
    for sid in ["pgw;ldap;1", "pgw;ldap;2"] {
        assert_eq!(pgw.send(ccr(sid, 3, 2)).await.result_code(), Some(rc::DIAMETER_SUCCESS));
    }
    assert_eq!(metric(&metrics(&pcf).await, "pcf_ldap_cached_subscribers"), 0.0);
    let a = pgw.send(ccr_i("pgw;ldap;3", gold)).await;
    assert_eq!(installed(&a), vec!["ims-signalling", "video"]);
    assert_eq!(slapd.searches(&imsi_filter(gold)), 2);

    // A silver subscriber with only video: no rule of the project's fires, the subscribed
    // APN-AMBR stands.
    let silver = "001010000000002";
    let a = pgw.send(ccr_i("pgw;ldap;4", silver)).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS));
    assert!(installed(&a).is_empty(), "{a:?}");
    assert_eq!(apn_ambr_dl(&a), Some(2_000_000_000));
    assert_eq!(slapd.searches(&imsi_filter(silver)), 1);

    let m = metrics(&pcf).await;
    assert_eq!(metric(&m, "pcf_ldap_lookups_total{result=\"found\"}"), 3.0);
    assert!(metric(&m, "pcf_ldap_connections") <= 4.0);
    drop(pgw);
    pcf.stop().await;
    tshark_check(&wire.lock().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_the_directory_does_not_know_gets_the_configured_answer() {
    let Some(slapd) = directory().await else { return };
    let unknown = "001019999999999";
    let wire: Wire = Arc::default();

    // decide (the default): decided without a profile.
    let d = tempfile::tempdir().unwrap();
    let pcf = pcf_with(d.path(), ldap(&[&slapd.url])).await;
    let pgw1 = pgw(&pcf, &wire).await;
    let a = pgw1.send(ccr_i("pgw;unknown;1", unknown)).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    assert!(installed(&a).is_empty());
    assert_eq!(apn_ambr_dl(&a), Some(2_000_000_000));
    assert_eq!(slapd.searches(&imsi_filter(unknown)), 1);
    let m = metrics(&pcf).await;
    assert_eq!(metric(&m, "pcf_ldap_lookups_total{result=\"unknown\"}"), 1.0);
    drop(pgw1);
    pcf.stop().await;

    // reject: Experimental-Result 5030 DIAMETER_USER_UNKNOWN, and no session.
    let d = tempfile::tempdir().unwrap();
    let config = LdapConfig { on_unknown_subscriber: OnUnknown::Reject, ..ldap(&[&slapd.url]) };
    let pcf = pcf_with(d.path(), config).await;
    let pgw2 = pgw(&pcf, &wire).await;
    let a = pgw2.send(ccr_i("pgw;unknown;2", unknown)).await;
    let e = a.experimental_result().expect("Experimental-Result");
    assert_eq!((e.vendor_id, e.code), (diameter::VENDOR_3GPP, 5030), "{a:?}");
    assert_eq!(a.result_code(), None);
    assert_eq!(slapd.searches(&imsi_filter(unknown)), 2);
    let a = pgw2.send(ccr("pgw;unknown;2", 3, 1)).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_UNKNOWN_SESSION_ID));
    drop(pgw2);
    pcf.stop().await;
    tshark_check(&wire.lock().unwrap());
}

/// An `ldap://` URL on which nothing listens (a port the system gave and took back).
fn dead_url() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    format!("ldap://127.0.0.1:{port}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_that_is_down_gets_the_fallback_or_3004_and_a_second_url_takes_over() {
    let Some(slapd) = directory().await else { return };
    let dead = dead_url();
    let gold = "001010000000060";
    let wire: Wire = Arc::default();

    // fallback (the default): the project's fallback decision (1 Mbit/s, no rule).
    let d = tempfile::tempdir().unwrap();
    let pcf = pcf_with(d.path(), ldap(&[&dead])).await;
    let p = pgw(&pcf, &wire).await;
    let a = p.send(ccr_i("pgw;down;1", gold)).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    assert!(installed(&a).is_empty());
    assert_eq!(apn_ambr_dl(&a), Some(1_000_000));
    let m = metrics(&pcf).await;
    assert_eq!(metric(&m, "pcf_ldap_lookups_total{result=\"failed\"}"), 1.0);
    assert_eq!(metric(&m, "pcf_ldap_failures_total{reason=\"connect\"}"), 1.0);
    assert_eq!(metric(&m, "pcf_ldap_connects_total{result=\"failed\"}"), 1.0);
    // The session was set up on the fallback: its CCR-U asks the directory again (nothing was
    // cached), and falls back again.
    let a = p.send(ccr("pgw;down;1", 2, 1)).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS));
    assert_eq!(metric(&metrics(&pcf).await, "pcf_ldap_lookups_total{result=\"failed\"}"), 2.0);
    drop(p);
    pcf.stop().await;

    // reject: 3004 DIAMETER_TOO_BUSY with the E bit, so the PCEF may try another PCRF.
    let d = tempfile::tempdir().unwrap();
    let config = LdapConfig { on_unreachable: OnUnreachable::Reject, ..ldap(&[&dead]) };
    let pcf = pcf_with(d.path(), config).await;
    let p = pgw(&pcf, &wire).await;
    let a = p.send(ccr_i("pgw;down;2", gold)).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_TOO_BUSY), "{a:?}");
    assert!(a.is_error());
    drop(p);
    pcf.stop().await;

    // decide: decided without the profile (the subscribed APN-AMBR, no rule).
    let d = tempfile::tempdir().unwrap();
    let config = LdapConfig { on_unreachable: OnUnreachable::Decide, ..ldap(&[&dead]) };
    let pcf = pcf_with(d.path(), config).await;
    let p = pgw(&pcf, &wire).await;
    let a = p.send(ccr_i("pgw;down;3", gold)).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    assert!(installed(&a).is_empty());
    assert_eq!(apn_ambr_dl(&a), Some(2_000_000_000));
    drop(p);
    pcf.stop().await;
    assert_eq!(slapd.searches(&imsi_filter(gold)), 0, "slapd was never asked");

    // Failover: the first URL is down, the second answers.
    let d = tempfile::tempdir().unwrap();
    let pcf = pcf_with(d.path(), ldap(&[&dead, &slapd.url])).await;
    let p = pgw(&pcf, &wire).await;
    let a = p.send(ccr_i("pgw;down;4", gold)).await;
    assert_eq!(installed(&a), vec!["video"], "{a:?}");
    assert_eq!(slapd.searches(&imsi_filter(gold)), 1);
    let m = metrics(&pcf).await;
    assert_eq!(metric(&m, "pcf_ldap_connects_total{result=\"failed\"}"), 1.0);
    assert_eq!(metric(&m, "pcf_ldap_connects_total{result=\"ok\"}"), 1.0);
    drop(p);
    pcf.stop().await;
    tshark_check(&wire.lock().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_directory_times_out_into_the_fallback_and_a_cut_connection_is_replaced() {
    let Some(slapd) = directory().await else { return };
    let proxy = Proxy::start(slapd.addr).await;
    let d = tempfile::tempdir().unwrap();
    let pcf = pcf_with(d.path(), LdapConfig { timeout_ms: 300, ..ldap(&[&proxy.url]) }).await;
    let wire: Wire = Arc::default();
    let p = pgw(&pcf, &wire).await;

    let a = p.send(ccr_i("pgw;slow;1", "001010000000070")).await;
    assert_eq!(installed(&a), vec!["video"], "{a:?}");

    // slapd answers 1 s late: the lookup gives up at 300 ms and the fallback answers.
    proxy.delay_ms.store(1000, Ordering::SeqCst);
    let started = Instant::now();
    let a = p.send(ccr_i("pgw;slow;2", "001010000000071")).await;
    let took = started.elapsed();
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    assert_eq!(apn_ambr_dl(&a), Some(1_000_000), "the fallback: {a:?}");
    assert!(took >= Duration::from_millis(300) && took < Duration::from_millis(900), "{took:?}");
    assert_eq!(slapd.searches(&imsi_filter("001010000000071")), 1, "asked, answered late");
    let m = metrics(&pcf).await;
    assert_eq!(metric(&m, "pcf_ldap_failures_total{reason=\"timeout\"}"), 1.0);

    // On time again: the connection that timed out was closed; a new one answers.
    proxy.delay_ms.store(0, Ordering::SeqCst);
    let a = p.send(ccr_i("pgw;slow;3", "001010000000072")).await;
    assert_eq!(installed(&a), vec!["video"], "{a:?}");
    assert_eq!(proxy.accepted.load(Ordering::SeqCst), 2);

    // Every connection cut (a directory restart): the next lookup opens a new one.
    proxy.cut();
    let a = p.send(ccr_i("pgw;slow;4", "001010000000073")).await;
    assert_eq!(installed(&a), vec!["video"], "{a:?}");
    assert_eq!(proxy.accepted.load(Ordering::SeqCst), 3);
    let m = metrics(&pcf).await;
    assert_eq!(metric(&m, "pcf_ldap_lookups_total{result=\"found\"}"), 3.0);
    assert_eq!(metric(&m, "pcf_ldap_connects_total{result=\"ok\"}"), 3.0);
    drop(p);
    pcf.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_stays_bounded_under_concurrent_ccr_is() {
    let Some(slapd) = directory().await else { return };
    let proxy = Proxy::start(slapd.addr).await;
    let d = tempfile::tempdir().unwrap();
    let config = LdapConfig { pool_size: 2, timeout_ms: 3000, ..ldap(&[&proxy.url]) };
    let pcf = pcf_with(d.path(), config).await;
    let wire: Wire = Arc::default();
    let p = Arc::new(pgw(&pcf, &wire).await);
    // Each search is slowed a little, so the 20 lookups overlap and contend for 2 connections.
    proxy.delay_ms.store(20, Ordering::SeqCst);

    let imsis: Vec<&str> =
        IMSIS_GOLD.iter().copied().filter(|i| i.starts_with("0010100000010")).collect();
    assert_eq!(imsis.len(), 20);
    let mut set = tokio::task::JoinSet::new();
    for (i, imsi) in imsis.iter().enumerate() {
        let (p, imsi) = (p.clone(), imsi.to_string());
        set.spawn(async move { p.send(ccr_i(&format!("pgw;pool;{i}"), &imsi)).await });
    }
    while let Some(a) = set.join_next().await {
        let a = a.unwrap();
        assert_eq!(installed(&a), vec!["video"], "{a:?}");
    }
    for imsi in &imsis {
        assert_eq!(slapd.searches(&imsi_filter(imsi)), 1, "{imsi}");
    }
    assert_eq!(proxy.max_open.load(Ordering::SeqCst), 2, "at most pool_size at once");
    assert_eq!(proxy.accepted.load(Ordering::SeqCst), 2, "bound once, reused");
    let m = metrics(&pcf).await;
    assert_eq!(metric(&m, "pcf_ldap_connections"), 2.0);
    assert_eq!(metric(&m, "pcf_ldap_lookups_total{result=\"found\"}"), 20.0);
    drop(p);
    pcf.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn n7_sessions_read_ldap_only_when_configured() {
    let Some(slapd) = directory().await else { return };
    let c = client();
    let specs = specs();
    let by_msisdn = |m: &str| format!("(msisdn={m})");

    // n7 = true, the filter by MSISDN (the N7 context's gpsi).
    let d = tempfile::tempdir().unwrap();
    let config = LdapConfig { n7: true, filter: "(msisdn={msisdn})".into(), ..ldap(&[&slapd.url]) };
    let pcf = pcf_with(d.path(), config).await;
    let mut ctx = open5gs_context(50);
    ctx["supi"] = "imsi-001010000000050".into();
    ctx["gpsi"] = "msisdn-46700000050".into();
    let r = c.post(&pcf.sm("")).json(&ctx).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let decision = body(&r);
    specs.assert_valid("TS29512_Npcf_SMPolicyControl", "SmPolicyDecision", &decision);
    let rules: Vec<&String> = decision["pccRules"].as_object().unwrap().keys().collect();
    assert_eq!(rules, vec!["ims-signalling", "video"], "{decision}");
    assert_eq!(slapd.searches(&by_msisdn("46700000050")), 1);
    let loc = r.header("location").unwrap().to_string();
    let r = c
        .post(&format!("{loc}/update"))
        .json(&serde_json::json!({"repPolicyCtrlReqTriggers": ["RAT_TY_CH"], "ratType": "EUTRA"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", body(&r));
    assert_eq!(slapd.searches(&by_msisdn("46700000050")), 1, "the update searched nothing");
    assert_eq!(c.post(&format!("{loc}/delete")).send().await.unwrap().status(), 204);
    assert_eq!(metric(&metrics(&pcf).await, "pcf_ldap_cached_subscribers"), 0.0);
    pcf.stop().await;

    // n7 = false (the default): an N7 session reads no LDAP; a Gx one on the same PCF does.
    let d = tempfile::tempdir().unwrap();
    let config = LdapConfig { filter: "(msisdn={msisdn})".into(), ..ldap(&[&slapd.url]) };
    let pcf = pcf_with(d.path(), config).await;
    let mut ctx = open5gs_context(51);
    ctx["supi"] = "imsi-001010000000051".into();
    ctx["gpsi"] = "msisdn-46700000051".into();
    let r = c.post(&pcf.sm("")).json(&ctx).send().await.unwrap();
    assert_eq!(r.status(), 201);
    assert!(body(&r).get("pccRules").is_none(), "{}", body(&r));
    assert_eq!(slapd.searches(&by_msisdn("46700000051")), 0);
    // A Gx session without an MSISDN has nothing for this filter: an unknown subscriber.
    let wire: Wire = Arc::default();
    let p = pgw(&pcf, &wire).await;
    let a = p.send(ccr_i("pgw;n7;1", "001010000000051")).await;
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS));
    assert!(installed(&a).is_empty());
    let m = metrics(&pcf).await;
    assert_eq!(metric(&m, "pcf_ldap_lookups_total{result=\"unknown\"}"), 1.0);
    // With its MSISDN (Subscription-Id END_USER_E164), the profile is found.
    let a = p
        .send(ccr_i("pgw;n7;2", "001010000000051").avp(dcca::SUBSCRIPTION_ID.grouped(vec![
            dcca::SUBSCRIPTION_ID_TYPE.enumerated(dcca::subscription_id_type::END_USER_E164),
            dcca::SUBSCRIPTION_ID_DATA.utf8("46700000051"),
        ])))
        .await;
    assert_eq!(installed(&a), vec!["video"], "{a:?}");
    assert_eq!(slapd.searches(&by_msisdn("46700000051")), 1);
    drop(p);
    pcf.stop().await;
    tshark_check(&wire.lock().unwrap());
}
