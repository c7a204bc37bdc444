//! The UDR's NRF profile as the fivecore NRF stores it: every service it serves with versions
//! and endpoints, in both service forms, its udrInfo, valid against TS 29.510 NFProfile, and
//! found by the discoveries consumers (a free5GC PCF: `service-names=nudr-dr`) send.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{json, Value};
use udr::config::{SupiRangeConfig, UdrInfoConfig};
use udr::UdrConfig;

async fn start_nrf(
    dir: &std::path::Path,
) -> (String, tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<Result<(), nrf::NrfError>>)
{
    let run = nrf::RunConfig {
        nrf: nrf::NrfConfig::default(),
        sbi: sbi::ServerConfig::default(),
        client: sbi::client::ClientConfig::default(),
        store: store::SqliteConfig { readers: 1, ..store::SqliteConfig::new(dir.join("nrf.db")) },
        instance_id: None,
    };
    let bound = nrf::bind(run).await.unwrap();
    let base = format!("http://{}", bound.local_addr());
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(bound.serve(async {
        let _ = rx.await;
    }));
    (base, stop, task)
}

async fn registered(url: &str) -> Value {
    let c = client();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let r = get(&c, url).await;
        if r.status() == 200 {
            return body(&r);
        }
        assert!(std::time::Instant::now() < deadline, "{url} never registered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn service_names(profile: &Value) -> Vec<&str> {
    profile["nfServices"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["serviceName"].as_str())
        .collect()
}

#[tokio::test]
async fn udr_profile_lists_its_services_and_udr_info_and_pcfs_discover_it() {
    let dir = tempfile::tempdir().unwrap();
    let (nrf_base, nrf_stop, nrf_task) = start_nrf(dir.path()).await;
    let udr_id = "5a7e0d1c-2222-4333-8444-555566667711";
    let config = UdrConfig {
        nrf: Some(nrf_client::NrfClientConfig {
            api_roots: vec![nrf_base.clone()],
            register_retry_initial_ms: 50,
            ..Default::default()
        }),
        udr_info: UdrInfoConfig {
            group_id: Some("udr-g1".into()),
            supi_ranges: vec![SupiRangeConfig {
                start: Some("001010000000000".into()),
                end: Some("001010000099999".into()),
                pattern: None,
            }],
        },
        ..UdrConfig::default()
    };
    let udr = TestUdr::start_as(dir.path(), config, Some(udr_id.into())).await;
    let port = udr.base.rsplit(':').next().unwrap().parse::<u16>().unwrap();
    let p = registered(&format!("{nrf_base}/nnrf-nfm/v1/nf-instances/{udr_id}")).await;

    assert_eq!(p["nfType"], "UDR");
    assert_valid("TS29510_Nnrf_NFManagement", "NFProfile", &p);
    assert_eq!(service_names(&p), ["nudr-dr", "nudr-group-id-map"], "{p}");
    let dr = &p["nfServiceList"]["nudr-dr"];
    assert_eq!(dr, &p["nfServices"][0], "both forms carry the same service");
    assert_eq!(dr["serviceInstanceId"], "nudr-dr");
    assert_eq!(dr["versions"], json!([{"apiVersionInUri": "v2", "apiFullVersion": "2.2.4"}]));
    assert_eq!(dr["scheme"], "http");
    assert_eq!(dr["nfServiceStatus"], "REGISTERED");
    assert_eq!(dr["ipEndPoints"], json!([{"ipv4Address": "127.0.0.1", "port": port}]));
    let map = &p["nfServiceList"]["nudr-group-id-map"];
    assert_eq!(map["versions"], json!([{"apiVersionInUri": "v1", "apiFullVersion": "1.1.0"}]));
    assert_eq!(p["nfServiceList"].as_object().unwrap().len(), 2);
    assert_eq!(
        p["udrInfo"],
        json!({"supportedDataSets": ["POLICY"], "groupId": "udr-g1",
            "supiRanges": [{"start": "001010000000000", "end": "001010000099999"}]})
    );

    // What a free5GC PCF asks before an AM policy create, and narrower forms of it.
    let c = client();
    let disc = |q: &str| {
        format!("{nrf_base}/nnrf-disc/v1/nf-instances?target-nf-type=UDR&requester-nf-type=PCF&{q}")
    };
    let found = |q: &str| {
        let c = c.clone();
        let url = disc(q);
        async move {
            let r = get(&c, &url).await;
            assert_eq!(r.status(), 200, "{url}: {:?}", body(&r));
            let v = body(&r);
            v["nfInstances"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["nfInstanceId"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(found("service-names=nudr-dr").await, [udr_id]);
    let r = body(&get(&c, &disc("service-names=nudr-dr")).await);
    let svc = r["nfInstances"][0]["nfServices"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(
            r["nfInstances"][0]["nfServiceList"].as_object().into_iter().flat_map(|m| m.values()),
        )
        .find(|s| s["serviceName"] == "nudr-dr")
        .cloned();
    assert_eq!(svc.as_ref().map(|s| &s["ipEndPoints"][0]["port"]), Some(&json!(port)), "{r}");
    assert_eq!(found("service-names=nudr-dr&data-set=POLICY").await, [udr_id]);
    assert!(found("service-names=nudr-dr&data-set=SUBSCRIPTION").await.is_empty());
    assert_eq!(found("supi=imsi-001010000000042").await, [udr_id]);
    assert!(found("supi=imsi-001010000100000").await.is_empty());
    assert_eq!(found("group-id-list=udr-g1").await, [udr_id]);

    udr.stop().await;
    let _ = nrf_stop.send(());
    nrf_task.await.unwrap().unwrap();
}

/// Without `[udr.udr_info]` the profile still says which data sets the UDR serves; with the
/// SLF service off, nudr-dr remains.
#[tokio::test]
async fn udr_info_defaults_and_slf_service_off() {
    let dir = tempfile::tempdir().unwrap();
    let (nrf_base, nrf_stop, nrf_task) = start_nrf(dir.path()).await;
    let udr_id = "5a7e0d1c-2222-4333-8444-555566667712";
    let mut config = UdrConfig {
        nrf: Some(nrf_client::NrfClientConfig {
            api_roots: vec![nrf_base.clone()],
            register_retry_initial_ms: 50,
            ..Default::default()
        }),
        ..UdrConfig::default()
    };
    config.slf.register_service = false;
    let udr = TestUdr::start_as(dir.path(), config, Some(udr_id.into())).await;
    let p = registered(&format!("{nrf_base}/nnrf-nfm/v1/nf-instances/{udr_id}")).await;
    assert_valid("TS29510_Nnrf_NFManagement", "NFProfile", &p);
    assert_eq!(service_names(&p), ["nudr-dr"], "{p}");
    assert_eq!(p["udrInfo"], json!({"supportedDataSets": ["POLICY"]}));
    udr.stop().await;
    let _ = nrf_stop.send(());
    nrf_task.await.unwrap().unwrap();
}

#[test]
fn udr_info_configuration() {
    let c: UdrConfig = toml::from_str(
        r#"
        [udr_info]
        group_id = "udr-g1"
        supi_ranges = [{ start = "001010000000000", end = "001019999999999" },
                       { pattern = "^imsi-00102[0-9]{10}$" }]
        "#,
    )
    .unwrap();
    assert!(c.validate().is_ok());
    assert_eq!(c.udr_info.supi_ranges.len(), 2);
    for bad in [
        r#"group_id = """#,
        r#"supi_ranges = [{ start = "002" }]"#,
        r#"supi_ranges = [{ start = "9", end = "1" }]"#,
        r#"supi_ranges = [{ start = "1", end = "10" }]"#,
        r#"supi_ranges = [{ start = "a", end = "b" }]"#,
        r#"supi_ranges = [{ start = "1", end = "2", pattern = "x" }]"#,
        r#"supi_ranges = [{ pattern = "" }]"#,
    ] {
        let c: UdrConfig = toml::from_str(&format!("[udr_info]\n{bad}\n")).unwrap();
        assert!(c.validate().is_err(), "{bad}");
    }
    assert!(toml::from_str::<UdrConfig>("[udr_info]\ngroup = \"x\"\n").is_err());
}
