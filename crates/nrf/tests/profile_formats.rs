//! Profile strictness over real sockets: NFRegister and NFUpdate (PATCH) refuse the string
//! formats and bounds TS 29.510 / TS 29.571 forbid, with the cause and the JSON pointer of the
//! field; every profile shape real NFs (Open5GS v2.8) and fivecore's own NFs register is
//! still accepted.

mod common;

use serde_json::{json, Value};

use common::*;
use nrf::NrfConfig;

const MANDATORY: &str = "MANDATORY_IE_INCORRECT";
const OPTIONAL: &str = "OPTIONAL_IE_INCORRECT";

fn service(id: &str, name: &str) -> Value {
    json!({
        "serviceInstanceId": id,
        "serviceName": name,
        "versions": [{"apiVersionInUri": "v1", "apiFullVersion": "1.0.0"}],
        "scheme": "http",
        "nfServiceStatus": "REGISTERED",
        "ipEndPoints": [{"ipv4Address": "192.0.2.10", "transport": "TCP", "port": 8080}],
        "allowedNfTypes": ["PCF"],
        "priority": 1, "capacity": 100, "load": 5,
    })
}

/// A valid profile exercising every checked attribute: both service forms, PLMNs, slices,
/// an xxxInfo and an xxxInfoList.
fn full_profile(id: &str) -> Value {
    json!({
        "nfInstanceId": id,
        "nfType": "UDR",
        "nfStatus": "REGISTERED",
        "heartBeatTimer": 30,
        "fqdn": "udr-1.udr.5gc.mnc001.mcc001.3gppnetwork.org",
        "interPlmnFqdn": "udr-1.udr.5gc.mnc001.mcc001.3gppnetwork.org",
        "ipv4Addresses": ["192.0.2.10"],
        "ipv6Addresses": ["2001:db8::10"],
        "plmnList": [{"mcc": "001", "mnc": "01"}],
        "snpnList": [{"mcc": "001", "mnc": "001", "nid": "000007ed9d5"}],
        "allowedPlmns": [{"mcc": "001", "mnc": "01"}],
        "sNssais": [{"sst": 1, "sd": "000001"}, {"sst": 2}],
        "allowedNssais": [{"sst": 1, "sd": "000001", "sdRanges": [{"start": "000000", "end": "0000ff"}]}],
        "perPlmnSnssaiList": [{"plmnId": {"mcc": "001", "mnc": "01"}, "sNssaiList": [{"sst": 1}]}],
        "allowedNfTypes": ["PCF", "UDM"],
        "udrInfo": {
            "groupId": "udr-g1",
            "supiRanges": [{"start": "001010000000000", "end": "001019999999999"}, {"pattern": "^imsi-00102[0-9]{10}$"}],
            "gpsiRanges": [{"start": "33600000000", "end": "33699999999"}],
            "supportedDataSets": ["POLICY"],
        },
        "amfInfoList": {"1": {
            "amfSetId": "001", "amfRegionId": "02",
            "guamiList": [{"plmnId": {"mcc": "001", "mnc": "01"}, "amfId": "020040"}],
            "taiList": [{"plmnId": {"mcc": "001", "mnc": "01"}, "tac": "000001"}],
            "taiRangeList": [{"plmnId": {"mcc": "001", "mnc": "01"}, "tacRangeList": [{"start": "0001", "end": "00ff"}]}],
        }},
        "smfInfo": {
            "sNssaiSmfInfoList": [{"sNssai": {"sst": 1}, "dnnSmfInfoList": [{"dnn": "internet"}]}],
            "pgwFqdn": "pgw.epc.mnc001.mcc001.3gppnetwork.org",
        },
        "ausfInfo": {"routingIndicators": ["0000"]},
        "customInfo": {"supiRanges": "anything goes here"},
        "nfServices": [service("dr-1", "nudr-dr")],
        "nfServiceList": {"dr-1": service("dr-1", "nudr-dr"), "map-1": service("map-1", "nudr-group-id-map")},
    })
}

/// `v` with the value at `pointer` set (the parent must exist; an array index replaces).
fn with(v: &Value, pointer: &str, value: Value) -> Value {
    let mut v = v.clone();
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    match v.pointer_mut(parent).unwrap() {
        Value::Object(m) => {
            m.insert(key.replace("~1", "/").replace("~0", "~"), value);
        }
        Value::Array(a) => a[key.parse::<usize>().unwrap()] = value,
        other => panic!("{parent} is {other}"),
    }
    v
}

/// Registers `p` and expects a 400 with `cause` whose only invalid parameter is `pointer`.
async fn refused(c: &sbi::client::SbiClient, nrf: &TestNrf, p: &Value, pointer: &str, cause: &str) {
    let id = p["nfInstanceId"].as_str().unwrap();
    let r = put(c, &nrf.nfm(&format!("/nf-instances/{id}")), p).await;
    let v = problem(&r, 400, cause);
    let params: Vec<&str> =
        v["invalidParams"].as_array().unwrap().iter().filter_map(|p| p["param"].as_str()).collect();
    assert_eq!(params, [pointer], "{v}");
}

/// The nine forbidden values issue #19 found served back, each refused with its pointer.
#[tokio::test]
async fn register_refuses_the_reported_values() {
    let dir = tempfile::tempdir().unwrap();
    let nrf = TestNrf::start(dir.path(), NrfConfig::default()).await;
    let c = client();
    let base = full_profile(&uuid(1));
    let cases: &[(&str, Value, &str, &str)] = &[
        ("/ipv4Addresses/0", json!("not-an-ip"), "/ipv4Addresses/0", MANDATORY),
        ("/ipv6Addresses/0", json!("zz::/999"), "/ipv6Addresses/0", MANDATORY),
        (
            "/nfServices/0/ipEndPoints/0/ipv4Address",
            json!("300.1.1.1"),
            "/nfServices/0/ipEndPoints/0/ipv4Address",
            OPTIONAL,
        ),
        ("/fqdn", json!("not a fqdn!"), "/fqdn", MANDATORY),
        ("/plmnList/0/mcc", json!("9x9"), "/plmnList/0/mcc", MANDATORY),
        ("/sNssais/0/sd", json!("zz"), "/sNssais/0/sd", OPTIONAL),
        ("/sNssais/0/sst", json!(999), "/sNssais/0/sst", MANDATORY),
        ("/nfServices/0/versions", json!([]), "/nfServices/0/versions", MANDATORY),
        ("/udrInfo/supiRanges/0/start", json!("abc"), "/udrInfo/supiRanges/0/start", OPTIONAL),
    ];
    for (at, value, pointer, cause) in cases {
        refused(&c, &nrf, &with(&base, at, value.clone()), pointer, cause).await;
    }
    // None of it was stored; the base profile itself is fine.
    let url = nrf.nfm(&format!("/nf-instances/{}", uuid(1)));
    problem(&c.get(&url).send().await.unwrap(), 404, "RESOURCE_NOT_FOUND");
    let r = put(&c, &url, &base).await;
    assert_eq!(r.status(), 201, "{}", body(&r));
    assert_valid("TS29510_Nnrf_NFManagement", "NFProfile", &body(&r));
    nrf.stop().await;
}

/// One case per other check, in the profile, in both service forms and in the xxxInfo types.
#[tokio::test]
async fn register_refuses_every_other_format() {
    let dir = tempfile::tempdir().unwrap();
    let nrf = TestNrf::start(dir.path(), NrfConfig::default()).await;
    let c = client();
    let base = full_profile(&uuid(2));
    let l = "/nfServiceList/map-1";
    let cases: Vec<(String, Value, String, &str)> = [
        // NFProfile
        ("/interPlmnFqdn", json!("udr"), "/interPlmnFqdn", MANDATORY),
        ("/ipv4Addresses", json!([]), "/ipv4Addresses", MANDATORY),
        ("/ipv4Addresses", json!("192.0.2.1"), "/ipv4Addresses", MANDATORY),
        ("/ipv4Addresses/0", json!("010.0.0.1"), "/ipv4Addresses/0", MANDATORY),
        ("/ipv6Addresses/0", json!("2001:db8::/64"), "/ipv6Addresses/0", MANDATORY),
        ("/plmnList/0/mnc", json!("1"), "/plmnList/0/mnc", MANDATORY),
        ("/plmnList/0", json!({"mcc": "001"}), "/plmnList/0/mnc", MANDATORY),
        ("/snpnList/0/nid", json!("xyz"), "/snpnList/0/nid", OPTIONAL),
        ("/allowedPlmns/0/mcc", json!(1), "/allowedPlmns/0/mcc", MANDATORY),
        (
            "/allowedNssais/0/sdRanges/0/end",
            json!("fff"),
            "/allowedNssais/0/sdRanges/0/end",
            OPTIONAL,
        ),
        (
            "/perPlmnSnssaiList/0/sNssaiList/0/sst",
            json!(-1),
            "/perPlmnSnssaiList/0/sNssaiList/0/sst",
            MANDATORY,
        ),
        ("/allowedNfTypes/1", json!("TOASTER"), "/allowedNfTypes/1", OPTIONAL),
        // xxxInfo, xxxInfoList
        (
            "/udrInfo/supiRanges/1/pattern",
            json!("(unclosed"),
            "/udrInfo/supiRanges/1/pattern",
            OPTIONAL,
        ),
        ("/udrInfo/gpsiRanges/0/end", json!("+33"), "/udrInfo/gpsiRanges/0/end", OPTIONAL),
        ("/udrInfo/groupId", json!(7), "/udrInfo/groupId", OPTIONAL),
        ("/udrInfo/supportedDataSets", json!([]), "/udrInfo/supportedDataSets", OPTIONAL),
        ("/amfInfoList/1/taiList/0/tac", json!("12"), "/amfInfoList/1/taiList/0/tac", MANDATORY),
        (
            "/amfInfoList/1/taiRangeList/0/tacRangeList/0/start",
            json!("xyz1"),
            "/amfInfoList/1/taiRangeList/0/tacRangeList/0/start",
            OPTIONAL,
        ),
        (
            "/amfInfoList/1/guamiList/0/amfId",
            json!("02004"),
            "/amfInfoList/1/guamiList/0/amfId",
            MANDATORY,
        ),
        ("/amfInfoList/1/amfSetId", json!("400"), "/amfInfoList/1/amfSetId", MANDATORY),
        ("/amfInfoList/1/amfRegionId", json!("2"), "/amfInfoList/1/amfRegionId", MANDATORY),
        (
            "/smfInfo/sNssaiSmfInfoList/0/sNssai/sd",
            json!("12345"),
            "/smfInfo/sNssaiSmfInfoList/0/sNssai/sd",
            OPTIONAL,
        ),
        ("/smfInfo/pgwFqdn", json!("pgw_1.example"), "/smfInfo/pgwFqdn", OPTIONAL),
        (
            "/ausfInfo/routingIndicators/0",
            json!("12345"),
            "/ausfInfo/routingIndicators/0",
            OPTIONAL,
        ),
        // NFService in nfServices
        (
            "/nfServices/0/versions/0/apiVersionInUri",
            json!("1"),
            "/nfServices/0/versions/0/apiVersionInUri",
            MANDATORY,
        ),
        (
            "/nfServices/0/versions/0/apiFullVersion",
            json!("1.0"),
            "/nfServices/0/versions/0/apiFullVersion",
            MANDATORY,
        ),
        ("/nfServices/0/scheme", json!("ftp"), "/nfServices/0/scheme", MANDATORY),
        (
            "/nfServices/0/ipEndPoints/0/port",
            json!(70000),
            "/nfServices/0/ipEndPoints/0/port",
            OPTIONAL,
        ),
        (
            "/nfServices/0/ipEndPoints/0/transport",
            json!("UDP"),
            "/nfServices/0/ipEndPoints/0/transport",
            OPTIONAL,
        ),
        (
            "/nfServices/0/ipEndPoints/0/ipv6Address",
            json!("2001:db8::1/128"),
            "/nfServices/0/ipEndPoints/0/ipv6Address",
            OPTIONAL,
        ),
        ("/nfServices/0/fqdn", json!("-bad.example"), "/nfServices/0/fqdn", OPTIONAL),
        ("/nfServices/0/priority", json!(65536), "/nfServices/0/priority", OPTIONAL),
        ("/nfServices/0/capacity", json!(-1), "/nfServices/0/capacity", OPTIONAL),
        ("/nfServices/0/load", json!(101), "/nfServices/0/load", OPTIONAL),
        (
            "/nfServices/0/supportedFeatures",
            json!("xyz"),
            "/nfServices/0/supportedFeatures",
            OPTIONAL,
        ),
        (
            "/nfServices/0/allowedNfTypes/0",
            json!("pcf"),
            "/nfServices/0/allowedNfTypes/0",
            OPTIONAL,
        ),
        ("/nfServices", json!([]), "/nfServices", OPTIONAL),
    ]
    .into_iter()
    .map(|(a, v, p, c)| (a.to_owned(), v, p.to_owned(), c))
    .chain(
        // NFService in nfServiceList (keyed by serviceInstanceId)
        [
            ("/serviceInstanceId", json!("map-2"), "/serviceInstanceId", MANDATORY),
            ("/nfServiceStatus", json!("BUSY"), "/nfServiceStatus", MANDATORY),
            (
                "/versions",
                json!([{"apiVersionInUri": "v1"}]),
                "/versions/0/apiFullVersion",
                MANDATORY,
            ),
            ("/versions/0/apiVersionInUri", json!("V1"), "/versions/0/apiVersionInUri", MANDATORY),
            (
                "/ipEndPoints/0/ipv4Address",
                json!("192.0.2"),
                "/ipEndPoints/0/ipv4Address",
                OPTIONAL,
            ),
            (
                "/allowedPlmns",
                json!([{"mcc": "001", "mnc": "0001"}]),
                "/allowedPlmns/0/mnc",
                MANDATORY,
            ),
            ("/sNssais", json!([{"sst": 256}]), "/sNssais/0/sst", MANDATORY),
        ]
        .into_iter()
        .map(|(a, v, p, c)| (format!("{l}{a}"), v, format!("{l}{p}"), c)),
    )
    .collect();
    for (at, value, pointer, cause) in &cases {
        refused(&c, &nrf, &with(&base, at, value.clone()), pointer, cause).await;
    }
    // A service missing a mandatory attribute in the map form (missing, not incorrect), an
    // empty map, a service that is not an object.
    let mut p = base.clone();
    p["nfServiceList"]["map-1"].as_object_mut().unwrap().remove("versions");
    refused(&c, &nrf, &p, "/nfServiceList/map-1/versions", "MANDATORY_IE_MISSING").await;
    refused(&c, &nrf, &with(&base, "/nfServiceList", json!({})), "/nfServiceList", OPTIONAL).await;
    refused(
        &c,
        &nrf,
        &with(&base, "/nfServiceList/x~1y", json!(1)),
        "/nfServiceList/x~1y",
        // Not an NFService at all: the body does not parse as an NFProfile.
        MANDATORY,
    )
    .await;
    // Several problems at once: all listed, the cause is the mandatory one's.
    let p = with(&with(&base, "/sNssais/0/sd", json!("zz")), "/fqdn", json!("x"));
    let v = problem(
        &put(&c, &nrf.nfm(&format!("/nf-instances/{}", uuid(2))), &p).await,
        400,
        MANDATORY,
    );
    assert_eq!(v["invalidParams"].as_array().unwrap().len(), 2, "{v}");
    nrf.stop().await;
}

/// The result of a PATCH is checked as a registration is; a refused PATCH changes nothing.
#[tokio::test]
async fn patch_results_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let nrf = TestNrf::start(dir.path(), NrfConfig::default()).await;
    let c = client();
    let id = uuid(3);
    let url = nrf.nfm(&format!("/nf-instances/{id}"));
    let base = full_profile(&id);
    assert_eq!(put(&c, &url, &base).await.status(), 201);
    let cases = [
        (
            json!([{"op": "replace", "path": "/plmnList/0/mcc", "value": "9x9"}]),
            "/plmnList/0/mcc",
            MANDATORY,
        ),
        (
            json!([{"op": "add", "path": "/ipv4Addresses/-", "value": "not-an-ip"}]),
            "/ipv4Addresses/1",
            MANDATORY,
        ),
        (
            json!([{"op": "add", "path": "/nfServiceList/s9", "value": service("s8", "nudr-dr")}]),
            "/nfServiceList/s9/serviceInstanceId",
            MANDATORY,
        ),
        (
            json!([{"op": "replace", "path": "/nfServiceList/dr-1/ipEndPoints/0/port", "value": 65536}]),
            "/nfServiceList/dr-1/ipEndPoints/0/port",
            OPTIONAL,
        ),
        (
            json!([{"op": "replace", "path": "/udrInfo/supiRanges/0/end", "value": "x"}]),
            "/udrInfo/supiRanges/0/end",
            OPTIONAL,
        ),
    ];
    for (ops, pointer, cause) in cases {
        let v = problem(&patch(&c, &url, &ops).await, 400, cause);
        assert_eq!(v["invalidParams"][0]["param"], pointer, "{v}");
        assert_eq!(v["invalidParams"].as_array().unwrap().len(), 1, "{v}");
    }
    let stored = body(&c.get(&url).send().await.unwrap());
    assert_eq!(stored["plmnList"], base["plmnList"]);
    assert_eq!(stored["nfServiceList"], base["nfServiceList"]);
    // A good PATCH and a heartbeat still go through.
    let ops = json!([{"op": "replace", "path": "/nfServiceList/dr-1/load", "value": 50}]);
    assert_eq!(patch(&c, &url, &ops).await.status(), 200);
    let ops = json!([{"op": "replace", "path": "/nfStatus", "value": "REGISTERED"}]);
    assert_eq!(patch(&c, &url, &ops).await.status(), 204);
    nrf.stop().await;
}

// ---- what real NFs register --------------------------------------------------------------------

/// Shapes Open5GS v2.8 NFs register (the same as ../shared/reference/peer-messages/open5gs-v2.8,
/// kept here so the test never only skips): nfServiceList only, allowedNfTypes, amfInfo, smfInfo.
fn open5gs_profiles() -> Vec<Value> {
    let svc = |id: &str, name: &str, ip: &str, allowed: Value| {
        json!({id: {"allowedNfTypes": allowed, "capacity": 100,
            "ipEndPoints": [{"ipv4Address": ip, "port": 7777}], "load": 0,
            "nfServiceStatus": "REGISTERED", "priority": 0, "scheme": "http",
            "serviceInstanceId": id, "serviceName": name,
            "versions": [{"apiFullVersion": "1.0.0", "apiVersionInUri": "v1"}]}})
    };
    let base = |id: &str, t: &str, ip: &str, list: Value| {
        json!({"allowedNfTypes": ["SCP", "AMF", "SMF"], "capacity": 100, "heartBeatTimer": 10,
            "ipv4Addresses": [ip], "load": 0, "nfInstanceId": id, "nfProfileChangesSupportInd": true,
            "nfServiceList": list, "nfStatus": "REGISTERED", "nfType": t, "priority": 0})
    };
    let plmn = json!({"mcc": "999", "mnc": "70"});
    let mut amf = base(
        "b8108f38-e942-41f1-bdcf-71f20f166327",
        "AMF",
        "127.0.0.5",
        svc(
            "b810b8fa-e942-41f1-bdcf-71f20f166327",
            "namf-comm",
            "127.0.0.5",
            json!(["SMF", "AMF"]),
        ),
    );
    amf["amfInfo"] = json!({"amfRegionId": "02", "amfSetId": "001",
        "guamiList": [{"amfId": "020040", "plmnId": plmn}],
        "taiList": [{"plmnId": plmn, "tac": "000001"}]});
    let mut smf = base(
        "b81893e0-e942-41f1-be8f-9d0b526de55d",
        "SMF",
        "127.0.0.4",
        svc(
            "b819585c-e942-41f1-be8f-9d0b526de55d",
            "nsmf-pdusession",
            "127.0.0.4",
            json!(["AMF", "SMF"]),
        ),
    );
    smf["smfInfo"] = json!({"sNssaiSmfInfoList": [{"dnnSmfInfoList": [{"dnn": "internet"}], "sNssai": {"sst": 1}}],
        "taiList": [{"plmnId": plmn, "tac": "000001"}]});
    let pcf = base(
        "b81b4e7a-e942-41f1-a0c4-1f7a4e9c7b11",
        "PCF",
        "127.0.0.13",
        svc(
            "b81b5a3c-e942-41f1-a0c4-1f7a4e9c7b11",
            "npcf-am-policy-control",
            "127.0.0.13",
            json!(["AMF"]),
        ),
    );
    vec![amf, smf, pcf]
}

/// What fivecore's own NFs register through nrf-client's ProfileBuilder: the BSF, the UDR (with
/// udrInfo) and the UDR's 5G-EIR, services in both forms.
fn fivecore_profiles() -> Vec<Value> {
    let svc = |name: &str, v: (&str, &str)| {
        json!({"serviceInstanceId": name, "serviceName": name,
            "versions": [{"apiVersionInUri": v.0, "apiFullVersion": v.1}], "scheme": "http",
            "nfServiceStatus": "REGISTERED", "ipEndPoints": [{"ipv4Address": "127.0.0.1", "port": 7002}]})
    };
    let profile = |id: &str, t: &str, services: Vec<Value>| {
        let list: serde_json::Map<String, Value> = services
            .iter()
            .map(|s| (s["serviceInstanceId"].as_str().unwrap().to_owned(), s.clone()))
            .collect();
        json!({"nfInstanceId": id, "nfType": t, "nfStatus": "REGISTERED", "heartBeatTimer": 10,
            "ipv4Addresses": ["127.0.0.1"], "nfServices": services, "nfServiceList": list})
    };
    let bsf = profile(&uuid(20), "BSF", vec![svc("nbsf-management", ("v1", "1.0.0"))]);
    let mut udr = profile(
        &uuid(21),
        "UDR",
        vec![svc("nudr-dr", ("v2", "2.2.4")), svc("nudr-group-id-map", ("v1", "1.1.0"))],
    );
    udr["udrInfo"] = json!({"supportedDataSets": ["POLICY"], "groupId": "udr-g1",
        "supiRanges": [{"start": "001010000000000", "end": "001019999999999"}]});
    let eir = profile(&uuid(22), "5G_EIR", vec![svc("n5g-eir-eic", ("v1", "1.2.0"))]);
    vec![bsf, udr, eir]
}

/// The peer captures in ../shared, when present.
fn shared_open5gs_profiles() -> Vec<Value> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/reference/peer-messages/open5gs-v2.8");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        eprintln!("note: {} absent; inline copies only", dir.display());
        return Vec::new();
    };
    let mut files: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|f| serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap())
        .filter(|v: &Value| v.get("nfInstanceId").is_some())
        .collect()
}

#[tokio::test]
async fn real_nf_profiles_are_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let nrf = TestNrf::start(dir.path(), NrfConfig::default()).await;
    let c = client();
    let shared = shared_open5gs_profiles();
    let all: Vec<Value> =
        open5gs_profiles().into_iter().chain(fivecore_profiles()).chain(shared.clone()).collect();
    assert!(all.len() >= 6);
    for p in &all {
        let id = p["nfInstanceId"].as_str().unwrap();
        let url = nrf.nfm(&format!("/nf-instances/{id}"));
        let r = put(&c, &url, p).await;
        assert!(r.status() == 201 || r.status() == 200, "{id}: {}", body(&r));
        assert_valid("TS29510_Nnrf_NFManagement", "NFProfile", &body(&r));
        // And their heartbeat.
        let hb = json!([{"op": "replace", "path": "/nfStatus", "value": "REGISTERED"}]);
        assert_eq!(patch(&c, &url, &hb).await.status(), 204, "{id}");
    }
    if !shared.is_empty() {
        assert!(shared.len() >= 7, "every Open5GS capture read");
    }
    nrf.stop().await;
}
