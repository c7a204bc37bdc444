//! Nnrf_NFDiscovery semantics of issue #19 over real sockets (TS 29.510 §6.2.3.2.3.1, §5.3.2.2,
//! Tables 6.1.6.2.2-1 / 6.1.6.2.3-1): services as one set (nfServices and nfServiceList), the
//! answer form (Service-Map), service-names narrowing, per-service authorisation, requester and
//! target PLMNs, pgw-ind, ipv4-index, preferred locality / TAI tiers with priorities, the
//! subscriptions that read services, and the NRF guide's discovery lines that use service-names.
//! Every expected answer is computed by the oracle in `common` from the profiles registered here.

mod common;

use std::collections::BTreeMap;

use serde_json::{json, Value};

use common::*;
use nrf::NrfConfig;

/// Profiles here never heartbeat: a slow CI box must not suspend them mid-test.
const NO_EXPIRY: &str = "heartbeat_grace_ms = 3600000\n";

fn nrf_config() -> NrfConfig {
    toml::from_str(NO_EXPIRY).unwrap()
}

/// A profile of `nf_type` with `extra` members, its id made from `n`.
fn nf(n: u32, nf_type: &str, extra: Value) -> Value {
    let mut p = profile(&uuid(n), nf_type);
    merge(&mut p, extra);
    p
}

fn svc(id: &str, name: &str) -> Value {
    nf_service(id, name, json!({}))
}

fn plmn(mcc: &str, mnc: &str) -> Value {
    json!({"mcc": mcc, "mnc": mnc})
}

// ---- A, C: one set of services; service-names narrows it ---------------------------------------

fn udms_in_every_form() -> Vec<Value> {
    vec![
        // Both forms, different instances.
        nf(
            1,
            "UDM",
            json!({"nfServices": [svc("a1-sdm", "nudm-sdm")],
                   "nfServiceList": service_map(&[svc("a1-uecm", "nudm-uecm")])}),
        ),
        // Map only (Open5GS).
        nf(
            2,
            "UDM",
            json!({"nfServiceList": service_map(&[svc("a2-ueau", "nudm-ueau"), svc("a2-sdm", "nudm-sdm")])}),
        ),
        // Array only (free5GC, fivecore).
        nf(3, "UDM", json!({"nfServices": [svc("a3-ee", "nudm-ee"), svc("a3-uecm", "nudm-uecm")]})),
        // Both forms, one instance in both (the same service, listed twice).
        nf(
            4,
            "UDM",
            json!({"nfServices": [svc("a4-sdm", "nudm-sdm"), svc("a4-ee", "nudm-ee")],
                   "nfServiceList": service_map(&[svc("a4-sdm", "nudm-sdm"), svc("a4-ueau", "nudm-ueau")])}),
        ),
        // No services at all.
        nf(5, "UDM", json!({})),
    ]
}

#[tokio::test]
async fn service_names_match_and_narrow_the_merged_set_of_services() {
    let dir = tempfile::tempdir().unwrap();
    let nrf = TestNrf::start(dir.path(), nrf_config()).await;
    let profiles = udms_in_every_form();
    register_all(&nrf, &profiles).await;
    let mut queries = Vec::new();
    for names in ["nudm-sdm", "nudm-uecm", "nudm-ueau", "nudm-ee", "nudm-sdm,nudm-ueau", "nudm-mt"]
    {
        for features in [None, Some("20")] {
            let mut q = Disc::new("UDM", "AMF").names(names);
            if let Some(f) = features {
                q = q.features(f);
            }
            queries.push(q);
        }
    }
    queries.push(Disc::new("UDM", "AMF"));
    queries.push(Disc::new("UDM", "AMF").features("20"));
    check_answers(&nrf, &profiles, &json!([]), &queries).await;
    nrf.stop().await;
}

// ---- B: the answer form ----------------------------------------------------------------------

#[tokio::test]
async fn service_map_feature_chooses_the_answer_form() {
    let dir = tempfile::tempdir().unwrap();
    let nrf = TestNrf::start(dir.path(), nrf_config()).await;
    let profiles = udms_in_every_form();
    register_all(&nrf, &profiles).await;
    // Bit 0x20 (feature 6, Service-Map) set or clear, in strings of several lengths.
    let table = [
        ("20", true),
        ("3F", true),
        ("120", true),
        ("3f", true),
        ("1F", false),
        ("0", false),
        ("100", false),
        ("40", false),
    ];
    let mut queries = vec![Disc::new("UDM", "AMF")];
    for (hex, map_form) in table {
        let q = Disc::new("UDM", "AMF").features(hex);
        assert_eq!(q.service_map(), map_form, "oracle table for {hex}");
        queries.push(q.clone());
        queries.push(q.names("nudm-sdm"));
    }
    check_answers(&nrf, &profiles, &json!([]), &queries).await;

    // The NRF says it supports Service-Map.
    let v = discover(&nrf, &Disc::new("UDM", "AMF").features("20")).await.unwrap();
    let f = v["nrfSupportedFeatures"].as_str().unwrap_or_default();
    assert!(
        has_feature_bit(f, 0x20),
        "nrfSupportedFeatures {:?} in {v}",
        v.get("nrfSupportedFeatures")
    );

    // Not hex: refused, the parameter named.
    let r = client()
        .get(&nrf.disc("target-nf-type=UDM&requester-nf-type=AMF&requester-features=zz"))
        .send()
        .await
        .unwrap();
    let p = problem(&r, 400, "INVALID_QUERY_PARAM");
    assert_eq!(p["invalidParams"][0]["param"], "requester-features", "{p}");

    // NFProfile retrieval: Service-Map of Nnrf_NFManagement is feature 1 (bit 0x1).
    let c = client();
    for p in &profiles {
        let id = p["nfInstanceId"].as_str().unwrap();
        let url = nrf.nfm(&format!("/nf-instances/{id}"));
        let stored = body(&c.get(&url).send().await.unwrap());
        for k in ["nfServices", "nfServiceList"] {
            assert_eq!(
                stored.get(k),
                p.get(k),
                "{id}: without requester-features, as stored: {stored}"
            );
        }
        let want = Some(merged_services(p).into_keys().collect())
            .filter(|s: &std::collections::BTreeSet<String>| !s.is_empty());
        for (features, map_form) in [("1", true), ("3", true), ("0", false), ("2", false)] {
            let r = c.get(&format!("{url}?requester-features={features}")).send().await.unwrap();
            let v = body(&r);
            assert_eq!(r.status(), 200, "{v}");
            assert_valid("TS29510_Nnrf_NFManagement", "NFProfile", &v);
            let got = received_services(&v, map_form).map_err(|e| format!("{e}: {v}"));
            assert_eq!(got, Ok(want.clone()), "GET {id}?requester-features={features}");
        }
    }
    nrf.stop().await;
}

// ---- D: per-service authorisation --------------------------------------------------------------

fn udms_with_service_authorisation() -> Vec<Value> {
    let slice1 = json!({"sst": 1, "sd": "000001"});
    let with = |id: &str, name: &str, extra: Value| nf_service(id, name, extra);
    vec![
        nf(
            11,
            "UDM",
            json!({"nfServiceList": service_map(&[
                with("d1-sdm", "nudm-sdm", json!({"allowedNfTypes": ["AMF"]})),
                with("d1-uecm", "nudm-uecm", json!({"allowedNfTypes": ["AMF", "SMF"]})),
                with("d1-ueau", "nudm-ueau", json!({"allowedNfTypes": ["AUSF"]})),
            ])}),
        ),
        nf(
            12,
            "UDM",
            json!({"nfServices": [
                with("d2-sdm", "nudm-sdm", json!({"allowedNfDomains": ["^.*\\.operator\\.com$"]})),
                with("d2-uecm", "nudm-uecm", json!({"allowedNssais": [slice1]})),
                svc("d2-ee", "nudm-ee"),
            ]}),
        ),
        nf(
            13,
            "UDM",
            json!({
                "nfServices": [with("d3-ueau", "nudm-ueau", json!({"allowedNfTypes": ["AUSF"]}))],
                "nfServiceList": service_map(&[
                    with("d3-sdm", "nudm-sdm", json!({"allowedNfTypes": ["AUSF", "SMF"]})),
                ]),
            }),
        ),
        nf(
            14,
            "UDM",
            json!({
                "allowedNfTypes": ["AMF", "AUSF"],
                "nfServiceList": service_map(&[
                    with("d4-sdm", "nudm-sdm", json!({"allowedNfTypes": ["AMF", "SMF"]})),
                    svc("d4-ueau", "nudm-ueau"),
                ]),
            }),
        ),
        nf(15, "UDM", json!({"allowedNfTypes": ["AMF", "SMF", "AUSF"]})),
    ]
}

#[tokio::test]
async fn per_service_authorisation_removes_services_and_empty_profiles() {
    let dir = tempfile::tempdir().unwrap();
    let nrf = TestNrf::start(dir.path(), nrf_config()).await;
    let slice1 = json!({"sst": 1, "sd": "000001"});
    let profiles = udms_with_service_authorisation();
    register_all(&nrf, &profiles).await;
    let mut queries = Vec::new();
    for requester in ["AMF", "SMF", "AUSF", "PCF"] {
        for features in [None, Some("20")] {
            for names in [None, Some("nudm-sdm"), Some("nudm-ueau"), Some("nudm-sdm,nudm-uecm")] {
                let mut q = Disc::new("UDM", requester);
                if let Some(f) = features {
                    q = q.features(f);
                }
                if let Some(n) = names {
                    q = q.names(n);
                }
                queries.push(q);
            }
        }
    }
    for fqdn in ["amf1.operator.com", "amf1.other.org"] {
        queries.push(Disc::new("UDM", "AMF").fqdn(fqdn));
        queries.push(Disc::new("UDM", "AMF").fqdn(fqdn).names("nudm-sdm").features("20"));
    }
    for slices in [json!([slice1]), json!([{"sst": 2}]), json!([{"sst": 1}])] {
        queries.push(Disc::new("UDM", "AMF").requester_snssais(slices.clone()));
        queries.push(Disc::new("UDM", "SMF").requester_snssais(slices).names("nudm-uecm"));
    }
    check_answers(&nrf, &profiles, &json!([]), &queries).await;
    nrf.stop().await;
}

// ---- E: requester and target PLMNs -------------------------------------------------------------

fn pcfs_with_plmns() -> Vec<Value> {
    let home = plmn("001", "01");
    let roam = plmn("002", "02");
    let third = plmn("003", "03");
    let fourth = plmn("004", "04");
    let allowed = |id: &str, name: &str, l: Value| nf_service(id, name, json!({"allowedPlmns": l}));
    vec![
        nf(21, "PCF", json!({"nfServices": [svc("e1-am", "npcf-am-policy-control")]})),
        nf(
            22,
            "PCF",
            json!({"plmnList": [roam], "nfServices": [svc("e2-am", "npcf-am-policy-control")]}),
        ),
        nf(23, "PCF", json!({"plmnList": [home, roam]})),
        nf(24, "PCF", json!({"allowedPlmns": [home]})),
        nf(25, "PCF", json!({"allowedPlmns": [third]})),
        nf(
            26,
            "PCF",
            json!({"nfServiceList": service_map(&[
                allowed("e6-am", "npcf-am-policy-control", json!([home])),
                allowed("e6-sm", "npcf-smpolicycontrol", json!([third])),
                svc("e6-ue", "npcf-ue-policy-control"),
            ])}),
        ),
        nf(
            27,
            "PCF",
            json!({"nfServices": [allowed("e7-sm", "npcf-smpolicycontrol", json!([fourth]))]}),
        ),
    ]
}

fn plmn_queries() -> Vec<Disc> {
    let (home, roam, third, fourth) =
        (plmn("001", "01"), plmn("002", "02"), plmn("003", "03"), plmn("004", "04"));
    let base = || Disc::new("PCF", "SMF");
    vec![
        base(),
        base().target_plmns(json!([roam])),
        base().target_plmns(json!([home])),
        base().target_plmns(json!([plmn("009", "99")])),
        base().requester_plmns(json!([home])),
        base().requester_plmns(json!([third])),
        base().requester_plmns(json!([fourth])),
        base().requester_plmns(json!([third, home])),
        base().requester_plmns(json!([third])).target_plmns(json!([roam])),
        base().requester_plmns(json!([third])).names("npcf-smpolicycontrol"),
        base().names("npcf-smpolicycontrol").features("20"),
        base().names("npcf-am-policy-control"),
    ]
}

#[tokio::test]
async fn plmns_default_to_the_nrf_plmn_list() {
    let dir = tempfile::tempdir().unwrap();
    let nrf = start_toml(
        dir.path(),
        &format!("{NO_EXPIRY}plmn_list = [{{ mcc = \"001\", mnc = \"01\" }}]\n"),
    )
    .await;
    let profiles = pcfs_with_plmns();
    register_all(&nrf, &profiles).await;
    check_answers(&nrf, &profiles, &json!([plmn("001", "01")]), &plmn_queries()).await;
    nrf.stop().await;
}

#[tokio::test]
async fn requester_plmn_list_is_checked_against_allowed_plmns() {
    // No plmn_list: allowedPlmns is checked only against a requester-plmn-list.
    let dir = tempfile::tempdir().unwrap();
    let nrf = TestNrf::start(dir.path(), nrf_config()).await;
    let profiles = pcfs_with_plmns();
    register_all(&nrf, &profiles).await;
    check_answers(&nrf, &profiles, &json!([]), &plmn_queries()).await;
    nrf.stop().await;
}

#[test]
fn plmn_list_is_an_nrf_setting() {
    let c: Result<NrfConfig, _> = toml::from_str(
        "plmn_list = [{ mcc = \"001\", mnc = \"01\" }, { mcc = \"310\", mnc = \"410\" }]",
    );
    assert!(c.is_ok(), "[nrf] plmn_list: {c:?}");
    let c: NrfConfig = toml::from_str("").unwrap();
    assert_eq!(c, NrfConfig::default(), "absent plmn_list is the default (empty)");
}

// ---- F, G: pgw-ind and ipv4-index ------------------------------------------------------------

#[tokio::test]
async fn pgw_ind_tells_combined_pgw_c_smf_from_standalone() {
    let dir = tempfile::tempdir().unwrap();
    let nrf = TestNrf::start(dir.path(), nrf_config()).await;
    let slice = json!([{"sNssai": {"sst": 1}, "dnnSmfInfoList": [{"dnn": "internet"}]}]);
    let profiles = vec![
        nf(
            31,
            "SMF",
            json!({"smfInfo": {"sNssaiSmfInfoList": slice, "pgwFqdn": "pgw1.example.org"}}),
        ),
        nf(
            32,
            "SMF",
            json!({"smfInfo": {"sNssaiSmfInfoList": slice, "pgwFqdnList": ["pgw2.example.org"]}}),
        ),
        nf(
            33,
            "SMF",
            json!({"smfInfo": {"sNssaiSmfInfoList": slice, "pgwIpAddrList": [{"ipv4Addr": "10.0.0.3"}]}}),
        ),
        nf(
            34,
            "SMF",
            json!({"smfInfoList": {
                "a": {"sNssaiSmfInfoList": slice},
                "b": {"sNssaiSmfInfoList": slice, "pgwFqdn": "pgw4.example.org"},
            }}),
        ),
        nf(35, "SMF", json!({"smfInfo": {"sNssaiSmfInfoList": slice}})),
        nf(36, "SMF", json!({})),
        nf(37, "SMF", json!({"smfInfoList": {"a": {"sNssaiSmfInfoList": slice}}})),
    ];
    register_all(&nrf, &profiles).await;
    let base = || Disc::new("SMF", "AMF");
    let queries = [
        base(),
        base().pgw_ind(true),
        base().pgw_ind(false),
        base().pgw_ind(false).dnn("internet"),
    ];
    // The oracle's split: four combined, three standalone.
    let count = |q: &Disc| expected(&profiles, q, &json!([])).len();
    assert_eq!((count(&queries[1]), count(&queries[2])), (4, 3));
    check_answers(&nrf, &profiles, &json!([]), &queries).await;
    nrf.stop().await;
}

#[tokio::test]
async fn ipv4_index_finds_upfs_by_their_dnn_items() {
    let dir = tempfile::tempdir().unwrap();
    let nrf = TestNrf::start(dir.path(), nrf_config()).await;
    let upf = |n: u32, items: Value| {
        nf(
            n,
            "UPF",
            json!({"upfInfo": {"sNssaiUpfInfoList": [{"sNssai": {"sst": 1}, "dnnUpfInfoList": items}]}}),
        )
    };
    let profiles = vec![
        upf(41, json!([{"dnn": "internet", "ipv4IndexList": [3, "pool-a"]}])),
        upf(42, json!([{"dnn": "ims", "ipv4IndexList": [3]}])),
        upf(
            43,
            json!([{"dnn": "internet", "ipv4IndexList": [5]}, {"dnn": "ims", "ipv4IndexList": ["pool-a"]}]),
        ),
        upf(44, json!([{"dnn": "internet"}])),
        nf(45, "UPF", json!({})),
    ];
    register_all(&nrf, &profiles).await;
    let base = || Disc::new("UPF", "SMF");
    let queries = [
        base(),
        base().ipv4_index(json!(3)),
        base().ipv4_index(json!("pool-a")),
        base().ipv4_index(json!(5)),
        base().ipv4_index(json!(7)),
        base().ipv4_index(json!(3)).dnn("internet"),
        base().ipv4_index(json!("pool-a")).dnn("ims"),
        base().ipv4_index(json!("pool-a")).dnn("internet"),
        base().ipv4_index(json!(5)).dnn("ims"),
    ];
    assert_eq!(expected(&profiles, &queries[1], &json!([])).len(), 2, "oracle: 3 is on two UPFs");
    check_answers(&nrf, &profiles, &json!([]), &queries).await;
    nrf.stop().await;
}

// ---- H: ordering, tiers and priorities ---------------------------------------------------------

/// All priorities (profile and its services) of a returned profile, by service instance.
fn priorities(p: &Value) -> (Option<u64>, BTreeMap<String, u64>) {
    let mut services = BTreeMap::new();
    let list = p.get("nfServices").and_then(Value::as_array).into_iter().flatten();
    let map =
        p.get("nfServiceList").and_then(Value::as_object).into_iter().flat_map(|m| m.values());
    for s in list.chain(map) {
        if let Some(v) = s.get("priority").and_then(Value::as_u64) {
            services.insert(s["serviceInstanceId"].as_str().unwrap_or_default().to_owned(), v);
        }
    }
    (p.get("priority").and_then(Value::as_u64), services)
}

fn tai(tac: &str) -> Value {
    json!({"plmnId": plmn("001", "01"), "tac": tac})
}

/// SMFs in localities east, west, north, serving TAC 0000A1 or 0000B2, with priorities on
/// profiles and services (one near the top of the range).
fn smfs_with_preferences() -> Vec<Value> {
    let (t1, t2) = (tai("0000A1"), tai("0000B2"));
    let smf = |n: u32, locality: &str, tai: &Value, priority: Option<u64>, services: Value| {
        let mut p = nf(
            n,
            "SMF",
            json!({"locality": locality, "capacity": 100, "load": n % 7, "smfInfo": {
                "sNssaiSmfInfoList": [{"sNssai": {"sst": 1}, "dnnSmfInfoList": [{"dnn": "internet"}]}],
                "taiList": [tai]}}),
        );
        if let Some(v) = priority {
            p["priority"] = json!(v);
        }
        merge(&mut p, services);
        p
    };
    let prio = |id: &str, v: u64| nf_service(id, "nsmf-pdusession", json!({"priority": v}));
    vec![
        smf(51, "east", &t1, Some(5), json!({"nfServices": [prio("h1-a", 3), prio("h1-b", 7)]})),
        smf(52, "west", &t1, Some(1), json!({"nfServiceList": service_map(&[prio("h2-a", 0)])})),
        smf(53, "east", &t2, None, json!({"nfServiceList": service_map(&[prio("h3-a", 10)])})),
        smf(54, "west", &t2, Some(2), json!({"nfServices": [svc("h4-a", "nsmf-pdusession")]})),
        smf(55, "east", &t1, Some(8), json!({})),
        smf(56, "west", &t2, Some(65530), json!({"nfServices": [prio("h6-a", 65000)]})),
        smf(57, "north", &t1, Some(0), json!({"nfServices": [prio("h7-a", 2)]})),
    ]
}

#[tokio::test]
async fn preferences_order_tiers_and_lift_later_priorities() {
    let dir = tempfile::tempdir().unwrap();
    let nrf = TestNrf::start(dir.path(), nrf_config()).await;
    let (t1, t2) = (tai("0000A1"), tai("0000B2"));
    let profiles = smfs_with_preferences();
    register_all(&nrf, &profiles).await;
    let base = || Disc::new("SMF", "AMF");
    let queries = vec![
        base(),
        base().locality("east"),
        base().tai(t1.clone()),
        base().locality("east").tai(t1.clone()),
        base().locality("west").tai(t2.clone()).features("20"),
        base().locality("east").names("nsmf-pdusession"),
    ];
    // The order (tiers, then priority, capacity, load, id) is the oracle's.
    check_answers(&nrf, &profiles, &json!([]), &queries).await;

    let stored: BTreeMap<String, &Value> =
        profiles.iter().map(|p| (p["nfInstanceId"].as_str().unwrap().to_owned(), p)).collect();
    let mut failures = Vec::new();
    for q in &queries[1..] {
        let want = expected(&profiles, q, &json!([]));
        let v = discover(&nrf, q).await.unwrap();
        let got = v["nfInstances"].as_array().unwrap();
        let first = want[0].tier;
        // The preferred tier: unchanged; its largest priority (absent counted as 0).
        let mut top = 0;
        for (p, e) in got.iter().zip(&want).filter(|(_, e)| e.tier == first) {
            let (own, services) = priorities(p);
            let (was, was_services) = priorities(stored[&e.id]);
            let kept: BTreeMap<String, u64> = was_services
                .into_iter()
                .filter(|(k, _)| e.services.as_ref().is_some_and(|s| s.contains(k)))
                .collect();
            if own != was || services != kept {
                failures.push(format!(
                    "{}: {} of the preferred tier has priorities {own:?} {services:?}, stored {was:?} {kept:?}",
                    q.query(),
                    e.id
                ));
            }
            top = top.max(own.unwrap_or(0)).max(services.values().copied().max().unwrap_or(0));
        }
        for (p, e) in got.iter().zip(&want).filter(|(_, e)| e.tier != first) {
            let (own, services) = priorities(p);
            match own {
                Some(v) if v > top && v <= 65535 => {}
                _ => failures.push(format!(
                    "{}: {} of a later tier has priority {own:?}, preferred tier up to {top}",
                    q.query(),
                    e.id
                )),
            }
            for (k, v) in services {
                if v <= top || v > 65535 {
                    failures.push(format!(
                        "{}: {} service {k} priority {v}, preferred tier up to {top}",
                        q.query(),
                        e.id
                    ));
                }
            }
        }
        if !failures.is_empty() {
            failures.push(format!("    answer: {v}"));
        }
    }
    assert!(
        failures.is_empty(),
        "priorities do not lead a consumer to the preferred tier:\n{}",
        failures.join("\n")
    );
    nrf.stop().await;
}

// ---- A: subscriptions read the merged set; B: the notification's form ---------------------------

async fn subscribe(nrf: &TestNrf, sink: &Sink, cond: Value, features: Option<&str>) {
    let mut s =
        json!({"nfStatusNotificationUri": sink.url, "subscrCond": cond, "reqNfType": "AMF"});
    if let Some(f) = features {
        s["requesterFeatures"] = json!(f);
    }
    let r = client().post(&nrf.nfm("/subscriptions")).json(&s).send().await.unwrap();
    assert_eq!(r.status(), 201, "{}", String::from_utf8_lossy(r.body()));
}

/// The next notification: its event, subject and services in the form `map_form` asks.
async fn notified(sink: &mut Sink, event: &str, p: &Value, map_form: bool) {
    let id = p["nfInstanceId"].as_str().unwrap();
    let n =
        next_notification(sink).await.unwrap_or_else(|| panic!("no {event} of {id} within 5 s"));
    assert_valid("TS29510_Nnrf_NFManagement", "NotificationData", &n);
    assert_eq!(n["event"], event, "{n}");
    assert!(n["nfInstanceUri"].as_str().unwrap_or_default().ends_with(id), "{n}");
    if event != "NF_DEREGISTERED" {
        let want = Some(merged_services(p).into_keys().collect());
        let got = received_services(&n["nfProfile"], map_form).map_err(|e| format!("{e}: {n}"));
        assert_eq!(got, Ok(want), "{event} of {id}");
    }
}

#[tokio::test]
async fn subscriptions_by_service_name_see_both_forms_and_get_the_asked_form() {
    let dir = tempfile::tempdir().unwrap();
    let nrf = TestNrf::start(dir.path(), nrf_config()).await;
    let c = client();
    // serviceName, no features: array form. serviceNameList, Service-Map (bit 0x1): map form.
    // serviceName with the bit clear: array form.
    let mut sdm = Sink::start().await;
    let mut uecm = Sink::start().await;
    let mut ausf = Sink::start().await;
    subscribe(&nrf, &sdm, json!({"serviceName": "nudm-sdm"}), None).await;
    subscribe(&nrf, &uecm, json!({"serviceNameList": ["nudm-uecm", "nudm-mt"]}), Some("1")).await;
    subscribe(&nrf, &ausf, json!({"serviceName": "nausf-auth"}), Some("2")).await;

    let map_only = nf(
        61,
        "UDM",
        json!({"nfServiceList": service_map(&[svc("n1-sdm", "nudm-sdm"), svc("n1-uecm", "nudm-uecm")])}),
    );
    let both = nf(
        62,
        "UDM",
        json!({"nfServices": [svc("n2-ee", "nudm-ee")], "nfServiceList": service_map(&[svc("n2-uecm", "nudm-uecm")])}),
    );
    let list_only = nf(63, "AUSF", json!({"nfServices": [svc("n3-auth", "nausf-auth")]}));
    let map_ausf =
        nf(64, "AUSF", json!({"nfServiceList": service_map(&[svc("n4-auth", "nausf-auth")])}));

    register_all(&nrf, std::slice::from_ref(&map_only)).await;
    notified(&mut sdm, "NF_REGISTERED", &map_only, false).await;
    notified(&mut uecm, "NF_REGISTERED", &map_only, true).await;
    ausf.quiet().await;

    register_all(&nrf, std::slice::from_ref(&both)).await;
    notified(&mut uecm, "NF_REGISTERED", &both, true).await;
    sdm.quiet().await;

    register_all(&nrf, &[list_only.clone(), map_ausf.clone()]).await;
    notified(&mut ausf, "NF_REGISTERED", &list_only, false).await;
    notified(&mut ausf, "NF_REGISTERED", &map_ausf, false).await;
    sdm.quiet().await;
    uecm.quiet().await;

    // A change of a map-only profile: NF_PROFILE_CHANGED to both its subscribers.
    let url = nrf.nfm(&format!("/nf-instances/{}", uuid(61)));
    let r = patch(&c, &url, &json!([{"op": "add", "path": "/locality", "value": "west"}])).await;
    assert!(r.status().is_success(), "{}", String::from_utf8_lossy(r.body()));
    let mut changed = map_only.clone();
    changed["locality"] = json!("west");
    notified(&mut sdm, "NF_PROFILE_CHANGED", &changed, false).await;
    notified(&mut uecm, "NF_PROFILE_CHANGED", &changed, true).await;

    // Deregistrations.
    assert_eq!(c.delete(&url).send().await.unwrap().status(), 204);
    notified(&mut sdm, "NF_DEREGISTERED", &map_only, false).await;
    notified(&mut uecm, "NF_DEREGISTERED", &map_only, true).await;
    let url = nrf.nfm(&format!("/nf-instances/{}", uuid(64)));
    assert_eq!(c.delete(&url).send().await.unwrap().status(), 204);
    notified(&mut ausf, "NF_DEREGISTERED", &map_ausf, false).await;
    sdm.quiet().await;
    uecm.quiet().await;
    nrf.stop().await;
}

// ---- The NRF guide's discovery lines with service-names (scenarios/nrf-*.toml) ----------------

/// The services of each target type, as the bench kit's profiles have them
/// (crates/bench/src/profile.rs `default_services`).
const SERVICES: &[(&str, &[&str])] = &[
    ("UDM", &["nudm-sdm", "nudm-uecm", "nudm-ueau", "nudm-ee"]),
    ("SMF", &["nsmf-pdusession", "nsmf-event-exposure"]),
    ("UDR", &["nudr-dr", "nudr-group-id-map"]),
    ("AUSF", &["nausf-auth"]),
    ("PCF", &["npcf-am-policy-control", "npcf-smpolicycontrol", "npcf-ue-policy-control"]),
    ("CHF", &["nchf-convergedcharging", "nchf-spendinglimitcontrol"]),
    ("LMF", &["nlmf-loc"]),
    ("NEF", &["nnef-pfdmanagement", "nnef-eventexposure"]),
    ("SMSF", &["nsmsf-sms"]),
];

/// Profiles answered per target type (the guide, reference call model §3.9).
const GUIDE_COUNT: &[(&str, usize)] = &[
    ("UDM", 6),
    ("SMF", 10),
    ("UDR", 12),
    ("AUSF", 6),
    ("PCF", 10),
    ("CHF", 3),
    ("LMF", 6),
    ("NEF", 3),
    ("SMSF", 3),
];

/// `count` profiles of `nf_type` serving the guide's subscribers, services in the three forms in
/// turn, then two that offer none of the named services (a distinct service only).
fn guide_profiles(nf_type: &str, count: usize, first: u32) -> Vec<Value> {
    let home = plmn("001", "01");
    let services = SERVICES.iter().find(|(t, _)| *t == nf_type).unwrap().1;
    let info = match nf_type {
        "UDM" => json!({"udmInfo": {"groupId": "udm-grp-0", "routingIndicators": ["0000"],
            "supiRanges": [{"start": "001010000000000", "end": "001019999999999"}]}}),
        "AUSF" => json!({"ausfInfo": {"groupId": "ausf-grp-0", "routingIndicators": ["0000"],
            "supiRanges": [{"start": "001010000000000", "end": "001019999999999"}]}}),
        "UDR" => json!({"udrInfo": {"groupId": "udr-grp-0",
            "supiRanges": [{"start": "001010000000000", "end": "001019999999999"}]}}),
        "SMF" => json!({"smfInfo": {"sNssaiSmfInfoList": [{"sNssai": {"sst": 1, "sd": "000001"},
            "dnnSmfInfoList": [{"dnn": "internet"}, {"dnn": "ims"}]}]}}),
        _ => json!({}),
    };
    let mut out = Vec::new();
    for i in 0..count + 2 {
        let n = first + i as u32;
        let lower = nf_type.to_ascii_lowercase();
        let mut p = nf(
            n,
            nf_type,
            json!({"plmnList": [home], "sNssais": [{"sst": 1, "sd": "000001"}],
                   "locality": format!("site-{}", i % 2), "priority": 1 + (i % 3), "capacity": 100,
                   "load": (i * 7) % 50, "fqdn": format!("{lower}-{i}.5gc.mnc001.mcc001.3gppnetwork.org")}),
        );
        merge(&mut p, info.clone());
        let all: Vec<Value> = if i < count {
            services
                .iter()
                .enumerate()
                .map(|(k, s)| {
                    nf_service(
                        &format!("{lower}{i}-{k}"),
                        s,
                        json!({"priority": 1, "capacity": 100,
                    "allowedNfTypes": ["AMF", "SMF", "PCF", "NEF", "UDM", "AUSF"]}),
                    )
                })
                .collect()
        } else {
            vec![svc(&format!("{lower}{i}-x"), &format!("n{lower}-other"))]
        };
        match i % 3 {
            0 => p["nfServices"] = json!(all),
            1 => p["nfServiceList"] = service_map(&all),
            _ => {
                // Both forms, each non-empty when there is anything to split (minItems 1).
                let (a, b) = all.split_at(all.len() / 2);
                if !a.is_empty() {
                    p["nfServices"] = json!(a);
                }
                p["nfServiceList"] = service_map(b);
            }
        }
        out.push(p);
    }
    out
}

#[tokio::test]
async fn the_guide_discovery_lines_with_service_names() {
    let dir = tempfile::tempdir().unwrap();
    let nrf = TestNrf::start(dir.path(), nrf_config()).await;
    let mut profiles = Vec::new();
    for (k, (t, n)) in GUIDE_COUNT.iter().enumerate() {
        profiles.extend(guide_profiles(t, *n, 1000 * (k as u32 + 1)));
    }
    register_all(&nrf, &profiles).await;
    // The lines of scenarios/nrf-5k.toml and nrf-51.6k.toml with service-names ({supi},
    // {rand:0:1} filled in); the parameters in `raw` hold for every profile above.
    let supi = "supi=imsi-001010000000042";
    let slice = format!("snssais={}", json_param(&json!([{"sst": 1, "sd": "000001"}])));
    let lines = [
        ("3", Disc::new("UDM", "AMF").raw(supi).names("nudm-uecm,nudm-sdm")),
        ("4", Disc::new("UDM", "SMF").names("nudm-sdm")),
        (
            "10",
            Disc::new("UDM", "AMF")
                .raw(&format!("{supi}&group-id-list=udm-grp-0"))
                .names("nudm-sdm"),
        ),
        (
            "16",
            Disc::new("UDM", "AUSF")
                .raw("routing-indicator=0000&group-id-list=udm-grp-0")
                .names("nudm-ueau"),
        ),
        (
            "11",
            Disc::new("SMF", "AMF")
                .dnn("internet")
                .raw(&slice)
                .locality("site-0")
                .names("nsmf-pdusession"),
        ),
        ("3", Disc::new("UDR", "PCF").raw(supi).names("nudr-dr")),
        ("3", Disc::new("AUSF", "AMF").raw(supi).names("nausf-auth")),
        ("4", Disc::new("PCF", "SMF").names("npcf-smpolicycontrol")),
        ("4", Disc::new("CHF", "SMF").names("nchf-convergedcharging")),
        ("4", Disc::new("LMF", "SMF").names("nlmf-loc")),
        ("4", Disc::new("NEF", "SMF").names("nnef-pfdmanagement")),
        ("4", Disc::new("SMSF", "SMF").names("nsmsf-sms")),
    ];
    // The fixture gives each line the guide's number of profiles.
    for (line, q) in &lines {
        let want = GUIDE_COUNT.iter().find(|(t, _)| *t == q.target).unwrap().1;
        assert_eq!(expected(&profiles, q, &json!([])).len(), want, "line {line}: {}", q.query());
    }
    let queries: Vec<Disc> = lines.iter().map(|(_, q)| q.clone()).collect();
    check_answers(&nrf, &profiles, &json!([]), &queries).await;
    nrf.stop().await;
}

// ---- The oracle itself -----------------------------------------------------------------------

/// The oracle against answers worked out by hand from the rules, so that a failure above points
/// at the NRF, not at the oracle.
#[test]
fn the_oracle_agrees_with_hand_worked_answers() {
    // (profile number, its services) in answer order.
    let answer = |profiles: &[Value], q: Disc, nrf_plmns: Value| -> String {
        let mut out = Vec::new();
        for e in expected(profiles, &q, &nrf_plmns) {
            let n = u32::from_str_radix(&e.id[..8], 16).unwrap();
            let services: Vec<String> = e.services.into_iter().flatten().collect();
            out.push(format!("{n}{services:?}"));
        }
        out.join(" ")
    };
    let d = udms_with_service_authorisation();
    assert_eq!(
        answer(&d, Disc::new("UDM", "AMF"), json!([])),
        r#"11["d1-sdm", "d1-uecm"] 12["d2-ee", "d2-sdm", "d2-uecm"] 14["d4-sdm", "d4-ueau"] 15[]"#
    );
    assert_eq!(
        answer(&d, Disc::new("UDM", "AUSF").names("nudm-ueau"), json!([])),
        r#"11["d1-ueau"] 13["d3-ueau"] 14["d4-ueau"]"#
    );
    assert_eq!(
        answer(&d, Disc::new("UDM", "SMF").names("nudm-sdm,nudm-uecm"), json!([])),
        r#"11["d1-uecm"] 12["d2-sdm", "d2-uecm"] 13["d3-sdm"]"#
    );
    assert_eq!(
        answer(&d, Disc::new("UDM", "AMF").fqdn("amf1.other.org"), json!([])),
        r#"11["d1-sdm", "d1-uecm"] 12["d2-ee", "d2-uecm"] 14["d4-sdm", "d4-ueau"] 15[]"#
    );
    let sst2 = json!([{"sst": 2}]);
    assert_eq!(
        answer(&d, Disc::new("UDM", "SMF").requester_snssais(sst2).names("nudm-uecm"), json!([])),
        r#"11["d1-uecm"]"#
    );

    let e = pcfs_with_plmns();
    let home = json!([plmn("001", "01")]);
    assert_eq!(
        answer(&e, Disc::new("PCF", "SMF"), home.clone()),
        r#"21["e1-am"] 23[] 24[] 26["e6-am", "e6-ue"]"#
    );
    let q = Disc::new("PCF", "SMF")
        .requester_plmns(json!([plmn("003", "03")]))
        .target_plmns(json!([plmn("002", "02")]));
    assert_eq!(answer(&e, q.clone(), home), r#"22["e2-am"] 23[]"#);
    assert_eq!(
        answer(&e, q, json!([])),
        r#"21["e1-am"] 22["e2-am"] 23[] 25[] 26["e6-sm", "e6-ue"]"#
    );

    let h = smfs_with_preferences();
    let order = |q: Disc| {
        expected(&h, &q, &json!([]))
            .iter()
            .map(|e| u32::from_str_radix(&e.id[..8], 16).unwrap())
            .collect::<Vec<_>>()
    };
    let base = || Disc::new("SMF", "AMF");
    assert_eq!(order(base()), [57, 52, 54, 51, 55, 56, 53]);
    assert_eq!(order(base().locality("east")), [51, 55, 53, 57, 52, 54, 56]);
    assert_eq!(order(base().tai(tai("0000A1"))), [57, 52, 51, 55, 54, 56, 53]);
    assert_eq!(order(base().locality("west").tai(tai("0000B2"))), [54, 56, 52, 53, 57, 51, 55]);
}
