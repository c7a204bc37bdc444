//! Nudr_GroupIDmap over real sockets: lookups, their error paths, and the NRF's SLF query
//! against this UDR end to end (the UDR registers as an SLF; the NRF filters discovery by the
//! group it answers).

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;
use udr::slf::{Entry, Groups};
use udr::UdrConfig;

fn groups(pairs: &[(&str, &str)]) -> Groups {
    pairs.iter().map(|(t, g)| (t.to_string(), g.to_string())).collect()
}

async fn provision(udr: &udr::Udr, ids: &[&str], g: Groups) {
    let e = Entry { subscriber_ids: ids.iter().map(|s| s.to_string()).collect(), groups: g };
    udr.slf.put(vec![e]).await.unwrap();
}

async fn lookups_and_errors() {
    let dir = common::state_dir();
    let udr = TestUdr::start(dir.path(), UdrConfig::default()).await;
    let g = groups(&[("UDM", "udm-g1"), ("AUSF", "ausf-g1"), ("PCF", "pcf-g2")]);
    provision(&udr.udr, &["imsi-001010000000001", "msisdn-33600000001"], g).await;
    let c = client();
    let q = |s: &str| udr.url(&format!("/nudr-group-id-map/v1/nf-group-ids?{s}"));

    let r = get(&c, &q("nf-type=UDM&subscriberId=imsi-001010000000001")).await;
    assert_eq!(r.status(), 200);
    assert_eq!(body(&r), json!({"UDM": "udm-g1"}));
    assert_valid("TS29504_Nudr_GroupIDmap", "NfGroupIdMapResult", &body(&r));
    // Several types, form style and repeated key; by GPSI.
    let r = get(&c, &q("nf-type=UDM,PCF&nf-type=NEF&subscriberId=msisdn-33600000001")).await;
    assert_eq!(body(&r), json!({"UDM": "udm-g1", "PCF": "pcf-g2"}));

    let r = get(&c, &q("nf-type=UDM&subscriberId=imsi-001019999999999")).await;
    problem(&r, 404, "USER_NOT_FOUND");
    let r = get(&c, &q("nf-type=NEF&subscriberId=imsi-001010000000001")).await;
    problem(&r, 404, "DATA_NOT_FOUND");
    let r = get(&c, &q("nf-type=UDM")).await;
    let p = problem(&r, 400, "MANDATORY_QUERY_PARAM_MISSING");
    assert_eq!(params(&p), ["subscriberId"]);
    let r = get(&c, &q("subscriberId=imsi-001010000000001")).await;
    let p = problem(&r, 400, "MANDATORY_QUERY_PARAM_MISSING");
    assert_eq!(params(&p), ["nf-type"]);
    let r = get(&c, &q("nf-type=udm&subscriberId=imsi-12")).await;
    let p = problem(&r, 400, "MANDATORY_QUERY_PARAM_INCORRECT");
    assert_eq!(params(&p), ["nf-type", "subscriberId"]);
    let r = get(&c, &q("nf-type=UDM&subscriberId=imsi-001010000000001&supi=x")).await;
    problem(&r, 400, "INVALID_QUERY_PARAM");
    let r = c.post(&q("nf-type=UDM&subscriberId=imsi-001010000000001")).send().await.unwrap();
    assert_eq!(r.status(), 405);
    udr.stop().await;
}

async fn entries_survive_a_restart() {
    let dir = common::state_dir();
    let udr = TestUdr::start(dir.path(), UdrConfig::default()).await;
    provision(&udr.udr, &["imsi-001010000000007"], groups(&[("UDM", "udm-g7")])).await;
    udr.stop().await;
    let udr = TestUdr::start(dir.path(), UdrConfig::default()).await;
    let c = client();
    let url =
        udr.url("/nudr-group-id-map/v1/nf-group-ids?nf-type=UDM&subscriberId=imsi-001010000000007");
    assert_eq!(body(&get(&c, &url).await), json!({"UDM": "udm-g7"}));
    udr.stop().await;
}

/// The NRF finds this UDR as its SLF among the registered NFs and keeps only the UDMs of the
/// group the UDR answers.
async fn nrf_slf_query_against_this_udr() {
    let dir = common::state_dir();
    let mut nrf_config = nrf::NrfConfig::default();
    nrf_config.slf.enabled = true;
    nrf_config.slf.nf_types = vec!["UDM".into()];
    let nrf_run = nrf::RunConfig {
        nrf: nrf_config,
        sbi: sbi::ServerConfig::default(),
        client: sbi::client::ClientConfig::default(),
        store: store::SqliteConfig {
            readers: 1,
            ..store::SqliteConfig::new(dir.path().join("nrf.db"))
        },
        instance_id: None,
    };
    let nrf_bound = nrf::bind(nrf_run).await.unwrap();
    let nrf_base = format!("http://{}", nrf_bound.local_addr());
    let (nrf_stop, rx) = tokio::sync::oneshot::channel::<()>();
    let nrf_task = tokio::spawn(nrf_bound.serve(async {
        let _ = rx.await;
    }));

    let udr_id = "5a7e0d1c-2222-4333-8444-555566667777";
    let config = UdrConfig {
        nrf: Some(nrf_client::NrfClientConfig {
            api_roots: vec![nrf_base.clone()],
            register_retry_initial_ms: 50,
            ..Default::default()
        }),
        ..UdrConfig::default()
    };
    let udr = TestUdr::start_as(dir.path(), config, Some(udr_id.to_owned())).await;
    provision(&udr.udr, &["imsi-001010000000002"], groups(&[("UDM", "udm-east")])).await;
    let c = client();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let profile_url = format!("{nrf_base}/nnrf-nfm/v1/nf-instances/{udr_id}");
    let profile = loop {
        let r = get(&c, &profile_url).await;
        if r.status() == 200 {
            break body(&r);
        }
        assert!(std::time::Instant::now() < deadline, "UDR never registered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(profile["nfType"], "UDR");
    // NRFs pick their SLF by this service (the UDR's other services: tests/nrf_profile.rs).
    let slf = &profile["nfServiceList"]["nudr-group-id-map"];
    assert_eq!(slf["serviceName"], "nudr-group-id-map", "{profile}");
    assert!(profile["nfServices"].as_array().unwrap().contains(slf), "{profile}");

    for (id, group) in [
        ("11111111-0000-4000-8000-000000000001", "udm-east"),
        ("11111111-0000-4000-8000-000000000002", "udm-west"),
    ] {
        let p = json!({
            "nfInstanceId": id, "nfType": "UDM", "nfStatus": "REGISTERED",
            "ipv4Addresses": ["192.0.2.1"], "udmInfo": {"groupId": group},
        });
        let r = c
            .put(&format!("{nrf_base}/nnrf-nfm/v1/nf-instances/{id}"))
            .json(&p)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201, "{:?}", body(&r));
    }
    let disc = |supi: &str| {
        format!("{nrf_base}/nnrf-disc/v1/nf-instances?target-nf-type=UDM&requester-nf-type=AMF&supi={supi}")
    };
    let r = get(&c, &disc("imsi-001010000000002")).await;
    assert_eq!(r.status(), 200, "{:?}", body(&r));
    let found: Vec<_> = body(&r)["nfInstances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["udmInfo"]["groupId"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(found, ["udm-east"]);
    // A subscriber the SLF does not know: the NRF answers with no UDM.
    let r = get(&c, &disc("imsi-001010000000003")).await;
    assert!(
        r.status() != 200 || body(&r)["nfInstances"].as_array().unwrap().is_empty(),
        "{:?}",
        body(&r)
    );

    udr.stop().await;
    let _ = nrf_stop.send(());
    nrf_task.await.unwrap().unwrap();
}

testkit::on_both_backends!(
    lookups_and_errors,
    entries_survive_a_restart,
    nrf_slf_query_against_this_udr,
);
