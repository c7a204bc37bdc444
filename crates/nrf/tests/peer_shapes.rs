//! The NRF with what real peers send (issue #19): the profiles Open5GS v2.8 NFs register (services
//! only as `nfServiceList`), their discoveries (one service-names, requester-features with
//! Service-Map), their AMF's status subscriptions and their heartbeats; a free5GC PCF's UDR
//! discovery; and profiles carrying services in either form or both. The captured profiles are
//! read from ../shared/reference/peer-messages when present; profiles of the same shape built here
//! are always used, so no test only skips.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use common::*;
use nrf::NrfConfig;

fn nrf_config() -> NrfConfig {
    // Open5GS proposes a 10 s heartbeat; nothing heartbeats here except where tested.
    NrfConfig { heartbeat_grace_ms: 3_600_000, ..NrfConfig::default() }
}

/// The seven profiles Open5GS v2.8 NFs registered, as captured (empty without ../shared).
fn captured_open5gs() -> Vec<Value> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/reference/peer-messages/open5gs-v2.8");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        eprintln!("skipped: {} absent, only the built Open5GS-shaped profiles", dir.display());
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files.iter().map(|f| serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap()).collect()
}

/// An Open5GS-shaped profile: services only in `nfServiceList`, each with an IPv4 endpoint,
/// versions with apiVersionInUri and apiFullVersion, its own allowedNfTypes; the profile's
/// allowedNfTypes (SCP and the consumers), capacity, load, priority, a 10 s heartbeat.
fn open5gs(
    n: u32,
    nf_type: &str,
    allowed: &[&str],
    services: &[(&str, &[&str], u32)],
    extra: Value,
) -> Value {
    let ip = format!("127.0.1.{n}");
    let list: Vec<Value> = services
        .iter()
        .enumerate()
        .map(|(k, (name, allowed, major))| {
            nf_service(
                &format!("{n:08x}-{k:04x}-4000-9000-0000000005c0"),
                name,
                json!({
                    "versions": [{"apiVersionInUri": format!("v{major}"), "apiFullVersion": format!("{major}.0.0")}],
                    "ipEndPoints": [{"ipv4Address": ip, "port": 7777}],
                    "allowedNfTypes": allowed, "capacity": 100, "load": 0, "priority": 0,
                }),
            )
        })
        .collect();
    let mut p = json!({
        "nfInstanceId": uuid(n),
        "nfType": nf_type,
        "nfStatus": "REGISTERED",
        "heartBeatTimer": 10,
        "ipv4Addresses": [ip],
        "allowedNfTypes": allowed,
        "capacity": 100,
        "load": 0,
        "priority": 0,
        "nfProfileChangesSupportInd": true,
        "nfServiceList": service_map(&list),
    });
    merge(&mut p, extra);
    p
}

/// Open5GS's seven NF types, shaped as they register, with ids of this test.
fn built_open5gs() -> Vec<Value> {
    let plmn = json!({"mcc": "999", "mnc": "70"});
    let tai = json!({"plmnId": plmn, "tac": "000001"});
    vec![
        open5gs(
            101,
            "AMF",
            &["SCP", "SMF", "AMF"],
            &[("namf-comm", &["SMF", "AMF"], 1)],
            json!({"amfInfo": {"amfRegionId": "02", "amfSetId": "001",
                "guamiList": [{"amfId": "020040", "plmnId": plmn}], "taiList": [tai]}}),
        ),
        open5gs(
            102,
            "SMF",
            &["SCP", "AMF", "SMF"],
            &[("nsmf-pdusession", &["AMF", "SMF"], 1)],
            json!({"smfInfo": {"sNssaiSmfInfoList": [{"sNssai": {"sst": 1}, "dnnSmfInfoList": [{"dnn": "internet"}]}],
                "taiList": [tai]}}),
        ),
        open5gs(103, "AUSF", &["SCP", "AMF"], &[("nausf-auth", &["AMF"], 1)], json!({})),
        open5gs(
            104,
            "UDM",
            &["SCP", "AMF", "SMF", "AUSF"],
            &[
                ("nudm-ueau", &["AUSF"], 1),
                ("nudm-uecm", &["AMF", "SMF"], 1),
                ("nudm-sdm", &["AMF", "SMF"], 2),
            ],
            json!({}),
        ),
        open5gs(
            105,
            "PCF",
            &["SCP", "AMF", "SMF", "AF"],
            &[
                ("npcf-am-policy-control", &["AMF"], 1),
                ("npcf-smpolicycontrol", &["SMF"], 1),
                ("npcf-policyauthorization", &["AF", "PCF"], 1),
            ],
            json!({}),
        ),
        open5gs(
            106,
            "BSF",
            &["SCP", "PCF", "AF"],
            &[("nbsf-management", &["PCF", "AF"], 1)],
            json!({}),
        ),
        open5gs(
            107,
            "NSSF",
            &["SCP", "AMF", "NSSF"],
            &[("nnssf-nsselection", &["AMF", "NSSF"], 2)],
            json!({"load": 1}),
        ),
    ]
}

/// What the Open5GS AMF subscribes to (peer-messages README).
const AMF_SUBSCRIPTIONS: [&str; 6] = [
    "nausf-auth",
    "nudm-uecm",
    "nudm-sdm",
    "npcf-am-policy-control",
    "nsmf-pdusession",
    "nnssf-nsselection",
];

/// The profiles a subscription condition covers: serviceName against the merged services,
/// nfType against the type.
fn covered<'a>(profiles: &'a [Value], cond: &Value) -> BTreeSet<&'a str> {
    profiles
        .iter()
        .filter(|p| match (cond.get("serviceName"), cond.get("nfType")) {
            (Some(name), _) => merged_services(p).values().any(|s| s["serviceName"] == *name),
            (None, Some(t)) => p["nfType"] == *t,
            _ => false,
        })
        .map(|p| p["nfInstanceId"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn open5gs_nfs_are_discovered_notified_and_heartbeat() {
    let dir = tempfile::tempdir().unwrap();
    let nrf = TestNrf::start(dir.path(), nrf_config()).await;
    let c = client();
    let mut profiles = captured_open5gs();
    profiles.extend(built_open5gs());
    let amf_id = uuid(101);

    // The AMF subscribes before the others register, as Open5GS's does at start.
    let mut conds: Vec<Value> =
        AMF_SUBSCRIPTIONS.iter().map(|s| json!({"serviceName": s})).collect();
    conds.push(json!({"nfType": "SEPP"}));
    let mut sinks = Vec::new();
    for cond in &conds {
        let sink = Sink::start().await;
        let s = json!({"nfStatusNotificationUri": sink.url, "reqNfType": "AMF",
            "reqNfInstanceId": amf_id, "subscrCond": cond, "requesterFeatures": "1"});
        let r = c.post(&nrf.nfm("/subscriptions")).json(&s).send().await.unwrap();
        assert_eq!(r.status(), 201, "{cond}: {}", String::from_utf8_lossy(r.body()));
        sinks.push(sink);
    }
    register_all(&nrf, &profiles).await;

    // NF_REGISTERED per subscription: one per profile registered with that service.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut failures = Vec::new();
    let mut counts = BTreeMap::new();
    for (cond, sink) in conds.iter().zip(sinks.iter_mut()) {
        let want = covered(&profiles, cond);
        let mut got = BTreeSet::new();
        while got.len() < want.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(Some(n)) = tokio::time::timeout(left, sink.rx.recv()).await else { break };
            assert_valid("TS29510_Nnrf_NFManagement", "NotificationData", &n);
            let id = n["nfProfile"]["nfInstanceId"].as_str().unwrap_or_default().to_owned();
            if n["event"] != "NF_REGISTERED" {
                failures.push(format!("{cond}: {n}"));
            }
            // The subscription asked for Service-Map (bit 0x1 of Nnrf_NFManagement).
            if let Err(e) = received_services(&n["nfProfile"], true) {
                failures.push(format!("{cond}: {e}"));
            }
            got.insert(id);
        }
        sink.quiet().await;
        counts.insert(cond.to_string(), got.len());
        let want: BTreeSet<String> = want.into_iter().map(str::to_owned).collect();
        if got != want {
            failures.push(format!("{cond}: NF_REGISTERED for {got:?}, expected {want:?}"));
        }
    }
    eprintln!("NF_REGISTERED per AMF subscription: {counts:?}");
    assert!(failures.is_empty(), "notifications:\n{}", failures.join("\n"));

    // Discoveries as Open5GS NFs send them.
    let pairs = [
        ("AUSF", "AMF", "nausf-auth"),
        ("UDM", "AMF", "nudm-uecm"),
        ("UDM", "AMF", "nudm-sdm"),
        ("UDM", "AUSF", "nudm-ueau"),
        ("UDM", "SMF", "nudm-sdm"),
        ("PCF", "AMF", "npcf-am-policy-control"),
        ("PCF", "SMF", "npcf-smpolicycontrol"),
        ("PCF", "AF", "npcf-policyauthorization"),
        ("SMF", "AMF", "nsmf-pdusession"),
        ("NSSF", "AMF", "nnssf-nsselection"),
        ("BSF", "PCF", "nbsf-management"),
        ("AMF", "SMF", "namf-comm"),
        // Not allowed: Open5GS's AUSF serves only AMFs.
        ("AUSF", "SMF", "nausf-auth"),
    ];
    let queries: Vec<Disc> = pairs
        .iter()
        .map(|(target, requester, service)| {
            Disc::new(target, requester)
                .names(service)
                .features("20")
                .raw(&format!("requester-nf-instance-id={}", uuid(200)))
        })
        .collect();
    for q in &queries[..queries.len() - 1] {
        assert!(!expected(&profiles, q, &json!([])).is_empty(), "oracle finds {}", q.query());
    }
    check_answers(&nrf, &profiles, &json!([]), &queries).await;

    // Heartbeats: PATCH replace /nfStatus; nothing changes, nobody is notified; the profile
    // comes back as registered, and in either form on request.
    for p in &profiles {
        let id = p["nfInstanceId"].as_str().unwrap();
        let url = nrf.nfm(&format!("/nf-instances/{id}"));
        let r = patch(
            &c,
            &url,
            &json!([{"op": "replace", "path": "/nfStatus", "value": "REGISTERED"}]),
        )
        .await;
        assert!(r.status() == 204 || r.status() == 200, "heartbeat of {id}: {:?}", body(&r));
        let v = body(&c.get(&url).send().await.unwrap());
        assert_eq!(v["nfStatus"], "REGISTERED");
        assert_eq!(v.get("nfServiceList"), p.get("nfServiceList"), "{id} as stored: {v}");
        assert!(v.get("nfServices").is_none(), "{id} as stored: {v}");
        let want = Some(merged_services(p).into_keys().collect());
        // Retrieval answers the profile as stored (authorisation attributes included: it is
        // how an NF or OAM reads back a registration), in the form asked for.
        let mut v = body(&c.get(&format!("{url}?requester-features=0")).send().await.unwrap());
        strip_allowed(&mut v);
        assert_eq!(received_services(&v, false).map_err(|e| format!("{e}: {v}")), Ok(want));
    }
    for sink in &mut sinks {
        sink.quiet().await;
    }
    nrf.stop().await;
}

#[tokio::test]
async fn free5gc_pcf_finds_a_udr_by_nudr_dr_in_array_form() {
    let dir = tempfile::tempdir().unwrap();
    let nrf = TestNrf::start(dir.path(), nrf_config()).await;
    let dr = |id: &str| {
        nf_service(
            id,
            "nudr-dr",
            json!({"versions": [{"apiVersionInUri": "v2", "apiFullVersion": "2.1.0"}],
                   "ipEndPoints": [{"ipv4Address": "127.0.0.4", "transport": "TCP", "port": 8000}],
                   "allowedNfTypes": ["PCF", "UDM", "NEF"]}),
        )
    };
    let gidmap = |id: &str| nf_service(id, "nudr-group-id-map", json!({}));
    let udr = |n: u32, extra: Value| {
        let mut p = profile(&uuid(n), "UDR");
        merge(&mut p, extra);
        p
    };
    let profiles = vec![
        // Array only, as fivecore's UDR registers.
        udr(301, json!({"nfServices": [dr("u1-dr"), gidmap("u1-gid")]})),
        // Map only, as Open5GS's.
        udr(302, json!({"nfServiceList": service_map(&[dr("u2-dr")])})),
        // Both.
        udr(
            303,
            json!({"nfServices": [gidmap("u3-gid")], "nfServiceList": service_map(&[dr("u3-dr")])}),
        ),
        // The UDR: only the group-id-map service, so no PCF can use it.
        udr(304, json!({"nfServices": [gidmap("u4-gid")]})),
    ];
    register_all(&nrf, &profiles).await;
    let q = Disc::new("UDR", "PCF").names("nudr-dr");
    assert_eq!(expected(&profiles, &q, &json!([])).len(), 3);
    check_answers(&nrf, &profiles, &json!([]), std::slice::from_ref(&q)).await;
    // What free5GC reads: the service's apiVersionInUri and endpoint, in nfServices.
    let v = discover(&nrf, &q).await.unwrap();
    for p in v["nfInstances"].as_array().unwrap() {
        let s = &p["nfServices"][0];
        assert_eq!(s["serviceName"], "nudr-dr", "{p}");
        assert_eq!(s["versions"][0]["apiVersionInUri"], "v2", "{p}");
        assert_eq!(s["ipEndPoints"][0]["port"], 8000, "{p}");
    }
    nrf.stop().await;
}

#[tokio::test]
async fn profiles_in_either_form_or_both_are_one_set_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let nrf = TestNrf::start(dir.path(), nrf_config()).await;
    let c = client();
    let ep = |port: u16| json!({"ipEndPoints": [{"ipv4Address": "127.0.0.9", "port": port}]});
    let smf = |n: u32, extra: Value| {
        let mut p = profile(&uuid(n), "SMF");
        merge(&mut p, extra);
        p
    };
    let profiles = vec![
        smf(
            401,
            json!({"nfServices": [nf_service("f1-pdu", "nsmf-pdusession", ep(8001)),
                                       nf_service("f1-ee", "nsmf-event-exposure", ep(8002))]}),
        ),
        smf(
            402,
            json!({"nfServiceList": service_map(&[nf_service("f2-pdu", "nsmf-pdusession", ep(8003)),
                                                        nf_service("f2-ee", "nsmf-event-exposure", ep(8004))])}),
        ),
        smf(
            403,
            json!({"nfServices": [nf_service("f3-ee", "nsmf-event-exposure", ep(8005))],
                        "nfServiceList": service_map(&[nf_service("f3-pdu", "nsmf-pdusession", ep(8006))])}),
        ),
    ];
    let mut array_sink = Sink::start().await;
    let mut map_sink = Sink::start().await;
    for (sink, features) in [(&array_sink, None), (&map_sink, Some("1"))] {
        let mut s = json!({"nfStatusNotificationUri": sink.url, "reqNfType": "AMF",
            "subscrCond": {"serviceName": "nsmf-pdusession"}});
        if let Some(f) = features {
            s["requesterFeatures"] = json!(f);
        }
        let r = c.post(&nrf.nfm("/subscriptions")).json(&s).send().await.unwrap();
        assert_eq!(r.status(), 201, "{}", String::from_utf8_lossy(r.body()));
    }
    register_all(&nrf, &profiles).await;
    for (sink, map_form) in [(&mut array_sink, false), (&mut map_sink, true)] {
        let mut got = BTreeMap::new();
        for _ in &profiles {
            let Some(n) = next_notification(sink).await else { break };
            let services =
                received_services(&n["nfProfile"], map_form).map_err(|e| format!("{e}: {n}"));
            got.insert(
                n["nfProfile"]["nfInstanceId"].as_str().unwrap_or_default().to_owned(),
                services,
            );
        }
        let want: BTreeMap<String, Result<Option<BTreeSet<String>>, String>> = profiles
            .iter()
            .map(|p| {
                (
                    p["nfInstanceId"].as_str().unwrap().to_owned(),
                    Ok(Some(merged_services(p).into_keys().collect())),
                )
            })
            .collect();
        assert_eq!(
            got, want,
            "NF_REGISTERED to a nsmf-pdusession subscriber (map form {map_form})"
        );
    }

    let base = || Disc::new("SMF", "AMF");
    let queries = [
        base(),
        base().features("20"),
        base().names("nsmf-pdusession"),
        base().names("nsmf-pdusession").features("20"),
        base().names("nsmf-event-exposure"),
        base().names("nsmf-event-exposure").features("20"),
    ];
    check_answers(&nrf, &profiles, &json!([]), &queries).await;

    // A change inside nfServiceList is a change of the profile for the service's subscribers.
    let url = nrf.nfm(&format!("/nf-instances/{}", uuid(402)));
    let r =
        patch(&c, &url, &json!([{"op": "add", "path": "/nfServiceList/f2-pdu/load", "value": 40}]))
            .await;
    assert!(r.status().is_success(), "{}", String::from_utf8_lossy(r.body()));
    for sink in [&mut array_sink, &mut map_sink] {
        let n = next_notification(sink).await.expect("NF_PROFILE_CHANGED within 5 s");
        assert_eq!(n["event"], "NF_PROFILE_CHANGED", "{n}");
        assert_eq!(n["nfInstanceUri"], url, "{n}");
    }
    nrf.stop().await;
}

/// `v` without the allowed* attributes, at profile and service level.
fn strip_allowed(v: &mut Value) {
    let strip = |o: &mut serde_json::Map<String, Value>| o.retain(|k, _| !k.starts_with("allowed"));
    if let Some(o) = v.as_object_mut() {
        strip(o);
        for k in ["nfServices", "nfServiceList"] {
            match o.get_mut(k) {
                Some(Value::Array(a)) => {
                    a.iter_mut().filter_map(Value::as_object_mut).for_each(strip)
                }
                Some(Value::Object(m)) => {
                    m.values_mut().filter_map(Value::as_object_mut).for_each(strip)
                }
                _ => {}
            }
        }
    }
}
