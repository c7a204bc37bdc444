//! The discovery parameters of the reference call mix beyond the basic ones: guami, AMF region
//! and set, pgw and pgw-ind, data-set, target-plmn-list, requester-snssais,
//! requester-nf-instance-fqdn, pattern ranges, and extended preferred locality.

mod common;

use std::collections::BTreeMap;

use nrf::config::DiscoveryConfig;
use nrf::NrfConfig;
use serde_json::{json, Value};

use common::{body, client, profile, put, uuid, TestNrf};

fn ids(v: &Value) -> Vec<String> {
    v["nfInstances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["nfInstanceId"].as_str().unwrap().to_owned())
        .collect()
}

fn enc(v: &Value) -> String {
    form_urlencoded::byte_serialize(v.to_string().as_bytes()).collect()
}

async fn register(nrf: &TestNrf, n: u32, nf_type: &str, extra: Value) {
    let mut p = profile(&uuid(n), nf_type);
    for (k, v) in extra.as_object().unwrap() {
        p[k] = v.clone();
    }
    let r = put(&client(), &nrf.nfm(&format!("/nf-instances/{}", uuid(n))), &p).await;
    assert!(r.status().is_success(), "{}", String::from_utf8_lossy(r.body()));
}

async fn found(nrf: &TestNrf, q: &str) -> Vec<String> {
    let r = client().get(&nrf.disc(q)).send().await.unwrap();
    assert_eq!(r.status(), 200, "{q}: {}", String::from_utf8_lossy(r.body()));
    let mut v = ids(&body(&r));
    v.sort();
    v
}

#[tokio::test]
async fn amf_smf_udr_plmn_and_authorisation_filters() {
    let dir = tempfile::tempdir().unwrap();
    let nrf = TestNrf::start(dir.path(), NrfConfig::default()).await;
    let plmn = json!({"mcc": "001", "mnc": "01"});
    register(
        &nrf,
        1,
        "AMF",
        json!({"amfInfo": {"amfRegionId": "CA", "amfSetId": "3F8",
        "guamiList": [{"plmnId": plmn, "amfId": "CA3F81"}]}}),
    )
    .await;
    register(
        &nrf,
        2,
        "AMF",
        json!({"amfInfo": {"amfRegionId": "CB", "amfSetId": "001",
        "guamiList": [{"plmnId": plmn, "amfId": "CB0041"}]}}),
    )
    .await;
    let guami = enc(&json!({"plmnId": plmn, "amfId": "ca3f81"}));
    assert_eq!(
        found(&nrf, &format!("target-nf-type=AMF&requester-nf-type=SMF&guami={guami}")).await,
        vec![uuid(1)]
    );
    assert_eq!(
        found(&nrf, "target-nf-type=AMF&requester-nf-type=SMF&amf-region-id=cb").await,
        vec![uuid(2)]
    );
    assert_eq!(
        found(&nrf, "target-nf-type=AMF&requester-nf-type=SMF&amf-set-id=3F8").await,
        vec![uuid(1)]
    );

    register(&nrf, 3, "SMF", json!({"smfInfo": {"pgwFqdn": "pgw1.example"}})).await;
    register(&nrf, 4, "SMF", json!({"smfInfo": {"dnnList": ["internet"]}})).await;
    assert_eq!(
        found(&nrf, "target-nf-type=SMF&requester-nf-type=AMF&pgw=PGW1.example").await,
        vec![uuid(3)]
    );
    assert_eq!(
        found(&nrf, "target-nf-type=SMF&requester-nf-type=AMF&pgw-ind=true").await,
        vec![uuid(3)]
    );
    // false asks for a standalone SMF: one without a PGW-C.
    assert_eq!(
        found(&nrf, "target-nf-type=SMF&requester-nf-type=AMF&pgw-ind=false").await,
        vec![uuid(4)]
    );

    register(&nrf, 5, "UDR", json!({"udrInfo": {"supportedDataSets": ["POLICY"]}})).await;
    register(&nrf, 6, "UDR", json!({"udrInfo": {"supportedDataSets": ["SUBSCRIPTION"]}, "plmnList": [{"mcc": "002", "mnc": "02"}]})).await;
    register(&nrf, 7, "UDR", json!({})).await;
    assert_eq!(
        found(&nrf, "target-nf-type=UDR&requester-nf-type=PCF&data-set=POLICY").await,
        vec![uuid(5), uuid(7)]
    );
    let plmns = enc(&json!([{"mcc": "002", "mnc": "02"}]));
    // A profile without plmnList serves the NRF's own PLMN and is not filtered out.
    assert_eq!(
        found(&nrf, &format!("target-nf-type=UDR&requester-nf-type=PCF&target-plmn-list={plmns}"))
            .await,
        vec![uuid(5), uuid(6), uuid(7)]
    );
    let other = enc(&json!([{"mcc": "003", "mnc": "03"}]));
    assert_eq!(
        found(&nrf, &format!("target-nf-type=UDR&requester-nf-type=PCF&target-plmn-list={other}"))
            .await,
        vec![uuid(5), uuid(7)]
    );

    register(&nrf, 8, "PCF", json!({"allowedNssais": [{"sst": 1, "sd": "000001"}], "allowedNfDomains": ["^.*\\.operator\\.com$"]})).await;
    register(&nrf, 9, "PCF", json!({})).await;
    let slice1 = enc(&json!([{"sst": 1, "sd": "000001"}]));
    let slice2 = enc(&json!([{"sst": 2}]));
    assert_eq!(
        found(
            &nrf,
            &format!("target-nf-type=PCF&requester-nf-type=SMF&requester-snssais={slice1}")
        )
        .await,
        vec![uuid(8), uuid(9)]
    );
    assert_eq!(
        found(
            &nrf,
            &format!("target-nf-type=PCF&requester-nf-type=SMF&requester-snssais={slice2}")
        )
        .await,
        vec![uuid(9)]
    );
    assert_eq!(
        found(
            &nrf,
            "target-nf-type=PCF&requester-nf-type=SMF&requester-nf-instance-fqdn=smf1.operator.com"
        )
        .await,
        vec![uuid(8), uuid(9)]
    );
    assert_eq!(
        found(
            &nrf,
            "target-nf-type=PCF&requester-nf-type=SMF&requester-nf-instance-fqdn=smf1.other.org"
        )
        .await,
        vec![uuid(9)]
    );

    // Malformed structured parameters are refused with the parameter named.
    let r = client()
        .get(&nrf.disc("target-nf-type=AMF&requester-nf-type=SMF&guami=%7B%7D"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        common::problem(&r, 400, "INVALID_QUERY_PARAM")["invalidParams"][0]["param"],
        "guami"
    );
    let r = client()
        .get(&nrf.disc("target-nf-type=SMF&requester-nf-type=AMF&pgw-ind=maybe"))
        .send()
        .await
        .unwrap();
    common::problem(&r, 400, "INVALID_QUERY_PARAM");
    nrf.stop().await;
}

#[tokio::test]
async fn pattern_ranges_match_supi_gpsi_and_tac() {
    let dir = tempfile::tempdir().unwrap();
    let nrf = TestNrf::start(dir.path(), NrfConfig::default()).await;
    register(
        &nrf,
        1,
        "UDM",
        json!({"udmInfo": {"supiRanges": [{"pattern": "^imsi-00101[0-4][0-9]{9}$"}]}}),
    )
    .await;
    register(
        &nrf,
        2,
        "UDM",
        json!({"udmInfo": {"supiRanges": [{"start": "001015000000000", "end": "001019999999999"}],
        "gpsiRanges": [{"pattern": "^msisdn-3361[0-9]{7}$"}]}}),
    )
    .await;
    assert_eq!(
        found(&nrf, "target-nf-type=UDM&requester-nf-type=AMF&supi=imsi-001012000000001").await,
        vec![uuid(1)]
    );
    assert_eq!(
        found(&nrf, "target-nf-type=UDM&requester-nf-type=AMF&supi=imsi-001017000000001").await,
        vec![uuid(2)]
    );
    assert_eq!(
        found(&nrf, "target-nf-type=UDM&requester-nf-type=AMF&gpsi=msisdn-33611234567").await,
        vec![uuid(1), uuid(2)]
    );
    assert_eq!(
        found(&nrf, "target-nf-type=UDM&requester-nf-type=AMF&gpsi=msisdn-44611234567").await,
        vec![uuid(1)]
    );
    register(&nrf, 3, "AMF", json!({"amfInfo": {"amfRegionId": "01", "amfSetId": "001",
        "guamiList": [{"plmnId": {"mcc": "001", "mnc": "01"}, "amfId": "010041"}],
        "taiRangeList": [{"plmnId": {"mcc": "001", "mnc": "01"}, "tacRangeList": [{"pattern": "^00[0-9a-f]{2}01$"}]}]}})).await;
    let tai = |tac: &str| enc(&json!({"plmnId": {"mcc": "001", "mnc": "01"}, "tac": tac}));
    assert_eq!(
        found(&nrf, &format!("target-nf-type=AMF&requester-nf-type=SMF&tai={}", tai("00ab01")))
            .await,
        vec![uuid(3)]
    );
    assert!(found(
        &nrf,
        &format!("target-nf-type=AMF&requester-nf-type=SMF&tai={}", tai("00ab02"))
    )
    .await
    .is_empty());
    nrf.stop().await;
}

#[tokio::test]
async fn extended_preferred_locality_orders_by_the_configured_list() {
    let dir = tempfile::tempdir().unwrap();
    let mut prefs = BTreeMap::new();
    prefs.insert(
        "site-a".to_owned(),
        vec!["site-a".to_owned(), "site-b".to_owned(), "region-1".to_owned()],
    );
    let config = NrfConfig {
        discovery: DiscoveryConfig { locality_preferences: prefs, ..Default::default() },
        ..Default::default()
    };
    let nrf = TestNrf::start(dir.path(), config).await;
    for (n, loc, priority) in
        [(1, "region-1", 1), (2, "site-c", 0), (3, "site-b", 5), (4, "site-a", 9), (5, "site-b", 1)]
    {
        register(&nrf, n, "SMF", json!({"locality": loc, "priority": priority})).await;
    }
    let r = client()
        .get(&nrf.disc("target-nf-type=SMF&requester-nf-type=AMF&preferred-locality=site-a"))
        .send()
        .await
        .unwrap();
    assert_eq!(ids(&body(&r)), vec![uuid(4), uuid(5), uuid(3), uuid(1), uuid(2)]);
    // A locality without a list prefers exactly itself, then priority.
    let r = client()
        .get(&nrf.disc("target-nf-type=SMF&requester-nf-type=AMF&preferred-locality=site-b"))
        .send()
        .await
        .unwrap();
    assert_eq!(ids(&body(&r)), vec![uuid(5), uuid(3), uuid(2), uuid(1), uuid(4)]);
    nrf.stop().await;
}
