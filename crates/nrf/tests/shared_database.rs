//! Two NRF instances on one MariaDB database (issue #25, "several instances of one NF"): what
//! one registers is durable for the other, but the other serves from the profile view it loaded
//! at start, so it does not see a later registration until it restarts. These tests pin that
//! behaviour down (docs/store.md, "Several instances"); coherence across instances is not built.

mod common;

use common::*;
use nrf::NrfConfig;

fn tempdir_on_mariadb() -> Option<tempfile::TempDir> {
    testkit::backends::use_mariadb().then(state_dir)
}

#[tokio::test]
async fn a_profile_registered_at_one_instance_is_stored_for_the_other() {
    let Some(dir) = tempdir_on_mariadb() else { return };
    let c = client();
    let a = TestNrf::start(dir.path(), NrfConfig::default()).await;
    let b = TestNrf::start(dir.path(), NrfConfig::default()).await;
    let (early, late) = (uuid(1), uuid(2));
    let r = put(&c, &a.nfm(&format!("/nf-instances/{early}")), &profile(&early, "UDM")).await;
    assert_eq!(r.status(), 201);
    // A third instance started after the registration loads it from the shared database.
    let third = TestNrf::start(dir.path(), NrfConfig::default()).await;
    let r = c.get(&third.disc("target-nf-type=UDM&requester-nf-type=AMF")).send().await.unwrap();
    assert_eq!(body(&r)["nfInstances"][0]["nfInstanceId"], early, "{:?}", body(&r));

    // An instance already serving does not: its in-memory view is loaded once, at start.
    let r = c.get(&b.disc("target-nf-type=UDM&requester-nf-type=AMF")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(body(&r)["nfInstances"], serde_json::json!([]), "{:?}", body(&r));
    let r = c.get(&b.nfm(&format!("/nf-instances/{early}"))).send().await.unwrap();
    assert_eq!(r.status(), 404);

    // Restarted on the same database, it serves both registrations, whichever instance took
    // them.
    let r = put(&c, &third.nfm(&format!("/nf-instances/{late}")), &profile(&late, "UDM")).await;
    assert_eq!(r.status(), 201);
    b.stop().await;
    let b = TestNrf::start(dir.path(), NrfConfig::default()).await;
    let r = c.get(&b.disc("target-nf-type=UDM&requester-nf-type=AMF")).send().await.unwrap();
    let mut ids: Vec<String> = body(&r)["nfInstances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["nfInstanceId"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    assert_eq!(ids, [early, late]);
    // Both signed with the one key kept in the database (the first start made it).
    let jwks = |n: &TestNrf| format!("{}/oauth2/jwks", n.base);
    let (ka, kb) = (c.get(&jwks(&a)).send().await.unwrap(), c.get(&jwks(&b)).send().await.unwrap());
    assert_eq!(body(&ka)["keys"][0]["kid"], body(&kb)["keys"][0]["kid"]);
    assert!(body(&ka)["keys"][0]["kid"].is_string());
    for nrf in [a, b, third] {
        nrf.stop().await;
    }
}
