//! Nnrf_NFDiscovery over real sockets: filters, ordering, limits and the SearchResult schema.

mod common;

use std::collections::BTreeMap;

use serde_json::{json, Value};

use common::*;
use nrf::config::DiscoveryConfig;
use nrf::NrfConfig;

async fn ids(c: &sbi::client::SbiClient, nrf: &TestNrf, q: &str) -> Vec<u32> {
    let r = c.get(&nrf.disc(q)).send().await.unwrap();
    assert_eq!(r.status(), 200, "{q}: {:?}", body(&r));
    let v = body(&r);
    assert_valid("TS29510_Nnrf_NFDiscovery", "SearchResult", &v);
    v["nfInstances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| u32::from_str_radix(&p["nfInstanceId"].as_str().unwrap()[..8], 16).unwrap())
        .collect()
}

fn enc(v: Value) -> String {
    form_encode(&v.to_string())
}

fn form_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

async fn discovery_filters_order_and_limits() {
    let dir = state_dir();
    let config = NrfConfig {
        discovery: DiscoveryConfig {
            validity_period_per_type: BTreeMap::from([("UDR".to_owned(), 60)]),
            max_profiles: 3,
            ..DiscoveryConfig::default()
        },
        // Nothing here heartbeats: on a loaded CI box the test can outlive the profiles' 30 s
        // timer, and a SUSPENDED profile would drop out of the answers under test.
        heartbeat_grace_ms: 3_600_000,
        ..NrfConfig::default()
    };
    let nrf = TestNrf::start(dir.path(), config).await;
    let c = client();
    let reg = |n: u32, extra: Value| {
        let c = c.clone();
        let url = nrf.nfm(&format!("/nf-instances/{}", uuid(n)));
        async move {
            let mut p = profile(&uuid(n), "UDR");
            for (k, v) in extra.as_object().unwrap() {
                p[k] = v.clone();
            }
            let r = put(&c, &url, &p).await;
            assert_eq!(r.status(), 201, "{:?}", body(&r));
        }
    };
    let svc = |name: &str| json!([{"serviceInstanceId": "1", "serviceName": name, "versions": [{"apiVersionInUri": "v1", "apiFullVersion": "1.0.0"}], "scheme": "http", "nfServiceStatus": "REGISTERED"}]);
    reg(1, json!({"priority": 10, "capacity": 100, "locality": "east", "nfServices": svc("nudr-dr"),
        "sNssais": [{"sst": 1, "sd": "000001"}],
        "udrInfo": {"groupId": "g1", "supiRanges": [{"start": "001010000000000", "end": "001010000009999"}],
                    "gpsiRanges": [{"start": "33600000000", "end": "33600009999"}]}})).await;
    reg(2, json!({"priority": 5, "capacity": 100, "locality": "west", "nfServices": svc("nudr-dr"),
        "udrInfo": {"groupId": "g2", "supiRanges": [{"start": "001010000010000", "end": "001010000019999"}]}})).await;
    reg(3, json!({"priority": 5, "capacity": 200, "locality": "west", "nfServices": svc("nudr-group-id-map"),
        "sNssais": [{"sst": 2}]})).await;
    reg(4, json!({"priority": 1, "nfStatus": "SUSPENDED"})).await;
    reg(5, json!({"priority": 50, "allowedNfTypes": ["AMF"]})).await;
    // Another type, never in a UDR answer.
    let p = profile(&uuid(6), "PCF");
    put(&c, &nrf.nfm(&format!("/nf-instances/{}", uuid(6))), &json!(p)).await;

    let base = "target-nf-type=UDR&requester-nf-type=PCF";
    // Priority, then capacity; SUSPENDED and disallowed requesters left out; at most 3.
    assert_eq!(ids(&c, &nrf, base).await, [3, 2, 1]);
    assert_eq!(ids(&c, &nrf, "target-nf-type=UDR&requester-nf-type=AMF").await, [3, 2, 1]);
    assert_eq!(
        ids(&c, &nrf, "target-nf-type=UDR&requester-nf-type=AMF&limit=5").await,
        [3, 2, 1],
        "capped by max_profiles"
    );
    assert_eq!(ids(&c, &nrf, &format!("{base}&limit=1")).await, [3]);
    // Preferred locality first.
    assert_eq!(ids(&c, &nrf, &format!("{base}&preferred-locality=east")).await, [1, 3, 2]);
    // Filters.
    assert_eq!(ids(&c, &nrf, &format!("{base}&service-names=nudr-dr")).await, [2, 1]);
    assert_eq!(
        ids(&c, &nrf, &format!("{base}&service-names=nudr-group-id-map,nudr-dr&limit=1")).await,
        [3]
    );
    assert_eq!(ids(&c, &nrf, &format!("{base}&target-nf-instance-id={}", uuid(2))).await, [2]);
    assert_eq!(
        ids(&c, &nrf, &format!("{base}&snssais={}", enc(json!([{"sst": 1, "sd": "000001"}]))))
            .await,
        [2, 1]
    );
    assert_eq!(
        ids(&c, &nrf, &format!("{base}&snssais={}", enc(json!([{"sst": 2}])))).await,
        [3, 2]
    );
    assert_eq!(ids(&c, &nrf, &format!("{base}&supi=imsi-001010000000042")).await, [3, 1]);
    assert_eq!(ids(&c, &nrf, &format!("{base}&supi=imsi-001010000010042")).await, [3, 2]);
    assert_eq!(ids(&c, &nrf, &format!("{base}&gpsi=msisdn-33600000001")).await, [3, 2, 1]);
    assert_eq!(ids(&c, &nrf, &format!("{base}&gpsi=msisdn-44600000001")).await, [3, 2]);
    assert_eq!(ids(&c, &nrf, &format!("{base}&group-id-list=g2,g9")).await, [2]);
    assert!(ids(&c, &nrf, "target-nf-type=SMF&requester-nf-type=AMF").await.is_empty());

    // validityPeriod per type, and the default.
    let v = body(&c.get(&nrf.disc(base)).send().await.unwrap());
    assert_eq!(v["validityPeriod"], 60);
    assert!(v["nfInstances"][0].get("allowedNfTypes").is_none());
    let v =
        body(&c.get(&nrf.disc("target-nf-type=PCF&requester-nf-type=SMF")).send().await.unwrap());
    assert_eq!(v["validityPeriod"], 3600);

    // max-payload-size (kilo-octets): 1 KB cannot hold all three.
    let r = c.get(&nrf.disc(&format!("{base}&max-payload-size=1"))).send().await.unwrap();
    let n = body(&r)["nfInstances"].as_array().unwrap().len();
    assert!(
        r.body().len() <= 1000 && (1..3).contains(&n),
        "{n} profiles in {} bytes",
        r.body().len()
    );

    // Errors.
    let get = |q: &str| c.get(&nrf.disc(q)).send();
    problem(&get("requester-nf-type=PCF").await.unwrap(), 400, "MANDATORY_QUERY_PARAM_MISSING");
    problem(&get("target-nf-type=UDR").await.unwrap(), 400, "MANDATORY_QUERY_PARAM_MISSING");
    problem(
        &get("target-nf-type=TOASTER&requester-nf-type=PCF").await.unwrap(),
        400,
        "INVALID_QUERY_PARAM",
    );
    problem(&get(&format!("{base}&limit=0")).await.unwrap(), 400, "INVALID_QUERY_PARAM");
    problem(&get(&format!("{base}&limit=abc")).await.unwrap(), 400, "INVALID_QUERY_PARAM");
    problem(&get(&format!("{base}&snssais=%7B")).await.unwrap(), 400, "INVALID_QUERY_PARAM");
    problem(
        &get(&format!("{base}&max-payload-size=5000")).await.unwrap(),
        400,
        "INVALID_QUERY_PARAM",
    );
    problem(&get(&format!("{base}&target-nf-type=UDR")).await.unwrap(), 400, "INVALID_QUERY_PARAM");

    // Discovery follows changes at once.
    c.delete(&nrf.nfm(&format!("/nf-instances/{}", uuid(3)))).send().await.unwrap();
    assert_eq!(ids(&c, &nrf, base).await, [2, 1]);
    nrf.stop().await;
}

async fn discovery_by_dnn_tai_and_routing_indicator() {
    let dir = state_dir();
    let nrf = TestNrf::start(dir.path(), NrfConfig::default()).await;
    let c = client();
    let plmn = json!({"mcc": "001", "mnc": "01"});
    let mut smf = profile(&uuid(1), "SMF");
    smf["smfInfo"] = json!({
        "sNssaiSmfInfoList": [{"sNssai": {"sst": 1}, "dnnSmfInfoList": [{"dnn": "internet"}]}],
        "taiList": [{"plmnId": plmn, "tac": "0001A0"}],
        "taiRangeList": [{"plmnId": plmn, "tacRangeList": [{"start": "000100", "end": "0001FF"}]}]});
    put(&c, &nrf.nfm(&format!("/nf-instances/{}", uuid(1))), &smf).await;
    let mut ausf = profile(&uuid(2), "AUSF");
    ausf["ausfInfo"] = json!({"routingIndicators": ["0012"]});
    put(&c, &nrf.nfm(&format!("/nf-instances/{}", uuid(2))), &ausf).await;

    let smf_q = "target-nf-type=SMF&requester-nf-type=AMF";
    assert_eq!(ids(&c, &nrf, &format!("{smf_q}&dnn=internet")).await, [1]);
    assert!(ids(&c, &nrf, &format!("{smf_q}&dnn=ims")).await.is_empty());
    let tai = |tac: &str| enc(json!({"plmnId": plmn, "tac": tac}));
    assert_eq!(ids(&c, &nrf, &format!("{smf_q}&tai={}", tai("0001A0"))).await, [1]);
    assert_eq!(
        ids(&c, &nrf, &format!("{smf_q}&tai={}", tai("000150"))).await,
        [1],
        "in a TAC range"
    );
    assert!(ids(&c, &nrf, &format!("{smf_q}&tai={}", tai("000900"))).await.is_empty());
    let ausf_q = "target-nf-type=AUSF&requester-nf-type=AMF";
    assert_eq!(ids(&c, &nrf, &format!("{ausf_q}&routing-indicator=0012")).await, [2]);
    assert!(ids(&c, &nrf, &format!("{ausf_q}&routing-indicator=9999")).await.is_empty());
    nrf.stop().await;
}

async fn empty_list_option_answers_suspended_profiles() {
    let dir = state_dir();
    let config = NrfConfig {
        discovery: DiscoveryConfig { suspended_when_empty: true, ..DiscoveryConfig::default() },
        ..NrfConfig::default()
    };
    let nrf = TestNrf::start(dir.path(), config).await;
    let c = client();
    let mut p = profile(&uuid(1), "CHF");
    p["nfStatus"] = json!("SUSPENDED");
    put(&c, &nrf.nfm(&format!("/nf-instances/{}", uuid(1))), &p).await;
    let mut u = profile(&uuid(2), "CHF");
    u["nfStatus"] = json!("UNDISCOVERABLE");
    put(&c, &nrf.nfm(&format!("/nf-instances/{}", uuid(2))), &u).await;
    let q = "target-nf-type=CHF&requester-nf-type=PCF";
    assert_eq!(ids(&c, &nrf, q).await, [1]);
    put(&c, &nrf.nfm(&format!("/nf-instances/{}", uuid(3))), &profile(&uuid(3), "CHF")).await;
    assert_eq!(ids(&c, &nrf, q).await, [3], "REGISTERED ones, when there are");
    nrf.stop().await;
}

/// Each profile's SearchResult bytes are built once per write: an answer right after an
/// NFUpdate (PATCH or PUT) must show the new profile, in the order the new values give.
async fn discovery_answers_the_profile_as_just_updated() {
    let dir = state_dir();
    let nrf = TestNrf::start(dir.path(), NrfConfig::default()).await;
    let c = client();
    for (n, priority) in [(1, 10), (2, 20)] {
        let mut p = profile(&uuid(n), "PCF");
        p["priority"] = json!(priority);
        let r = put(&c, &nrf.nfm(&format!("/nf-instances/{}", uuid(n))), &p).await;
        assert_eq!(r.status(), 201, "{:?}", body(&r));
    }
    let q = "target-nf-type=PCF&requester-nf-type=SMF";
    let found = |c: sbi::client::SbiClient, url: String| async move {
        let r = c.get(&url).send().await.unwrap();
        assert_eq!(r.status(), 200);
        let v = body(&r);
        assert_valid("TS29510_Nnrf_NFDiscovery", "SearchResult", &v);
        v["nfInstances"].as_array().unwrap().clone()
    };
    assert_eq!(ids(&c, &nrf, q).await, vec![1, 2]);

    // PATCH: priority and a new attribute; the answer reorders and carries both at once.
    let url2 = nrf.nfm(&format!("/nf-instances/{}", uuid(2)));
    let r = patch(
        &c,
        &url2,
        &json!([{"op": "replace", "path": "/priority", "value": 1},
                {"op": "add", "path": "/locality", "value": "north"}]),
    )
    .await;
    assert_eq!(r.status(), 200, "{:?}", body(&r));
    let list = found(c.clone(), nrf.disc(q)).await;
    assert_eq!(list[0]["nfInstanceId"], uuid(2));
    assert_eq!(list[0]["priority"], 1);
    assert_eq!(list[0]["locality"], "north");
    assert_eq!(list[1]["nfInstanceId"], uuid(1));

    // A load-only PATCH (answered 204) still changes what discovery answers.
    let r = patch(&c, &url2, &json!([{"op": "add", "path": "/load", "value": 77}])).await;
    assert!(r.status().is_success(), "{:?}", body(&r));
    let list = found(c.clone(), nrf.disc(q)).await;
    assert_eq!(list[0]["load"], 77);

    // PUT replacing the whole profile: the attributes it drops are gone from the answer.
    let mut p = profile(&uuid(2), "PCF");
    p["priority"] = json!(30);
    let r = put(&c, &url2, &p).await;
    assert_eq!(r.status(), 200, "{:?}", body(&r));
    let list = found(c.clone(), nrf.disc(q)).await;
    assert_eq!(list[1]["nfInstanceId"], uuid(2));
    assert_eq!(list[1]["priority"], 30);
    assert!(list[1].get("locality").is_none() && list[1].get("load").is_none());
    nrf.stop().await;
}

testkit::on_both_backends!(
    discovery_filters_order_and_limits,
    discovery_by_dnn_tai_and_routing_indicator,
    empty_list_option_answers_suspended_profiles,
    discovery_answers_the_profile_as_just_updated,
);
