//! The BSF registers with a real NRF (crates/nrf) through nrf-client when `[bsf.nrf]` is set,
//! and deregisters when it stops.

mod common;

use std::time::Duration;

use bsf::BsfConfig;
use common::*;

#[tokio::test]
async fn registers_with_the_nrf_and_deregisters_on_stop() {
    let dir = tempfile::tempdir().unwrap();
    let nrf_run = nrf::RunConfig {
        nrf: nrf::NrfConfig::default(),
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

    let id = "0b5f3c2a-1111-4222-8333-444455556666";
    let config = BsfConfig {
        nrf: Some(nrf_client::NrfClientConfig {
            api_roots: vec![nrf_base.clone()],
            register_retry_initial_ms: 50,
            ..Default::default()
        }),
        ..BsfConfig::default()
    };
    let bsf = TestBsf::start_as(dir.path(), config, Some(id.to_owned())).await;
    let c = client();
    let url = format!("{nrf_base}/nnrf-nfm/v1/nf-instances/{id}");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let profile = loop {
        let r = get(&c, &url).await;
        if r.status() == 200 {
            break body(&r);
        }
        assert!(std::time::Instant::now() < deadline, "BSF never registered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(profile["nfType"], "BSF");
    assert_eq!(profile["nfServices"][0]["serviceName"], "nbsf-management");
    let port = bsf.base.rsplit(':').next().unwrap().parse::<u64>().unwrap();
    assert_eq!(profile["nfServices"][0]["ipEndPoints"][0]["port"], port);
    // The same service in the map form, and the whole profile as TS 29.510 defines it.
    assert_eq!(profile["nfServiceList"]["nbsf-management"], profile["nfServices"][0]);
    assert_valid("TS29510_Nnrf_NFManagement", "NFProfile", &profile);

    bsf.stop().await;
    assert_eq!(get(&c, &url).await.status(), 404, "deregistered on stop");
    let _ = nrf_stop.send(());
    nrf_task.await.unwrap().unwrap();
}
