//! The SLF lookups' in-memory identity index over real sockets: it follows the UDR's own
//! provisioning at once (read-your-writes), writes by another connection to the store file (a
//! `fivecore udr import` into a running UDR) within the documented bound, and SOAP writes.

mod common;

use std::time::{Duration, Instant};

use common::*;
use http::Method;
use serde_json::{json, Value};
use udr::UdrConfig;

fn lookup_url(udr: &TestUdr, id: &str) -> String {
    udr.url(&format!("/nudr-group-id-map/v1/nf-group-ids?nf-type=UDM&subscriberId={id}"))
}

async fn lookup(c: &sbi::client::SbiClient, udr: &TestUdr, id: &str) -> (u16, Value) {
    let r = get(c, &lookup_url(udr, id)).await;
    (r.status().as_u16(), body(&r))
}

/// Every provisioning answer is followed by a lookup with no pause: it must already see the
/// change, for digit identities (packed) and others (the fallback map) alike.
async fn lookups_read_the_provisioning_writes_at_once() {
    let dir = common::state_dir();
    let udr = TestUdr::start(dir.path(), UdrConfig::default()).await;
    let c = client();
    let create = udr.url("/udr-prov/v1/slf-entries");
    for i in 0..20 {
        let imsi = format!("imsi-0010100000000{i:02}");
        let gpsi = format!("msisdn-3360000{i:04}");
        let nai = format!("nai-user{i}%40example.org");
        let entry = json!({"subscriberIds": [imsi, gpsi, format!("nai-user{i}@example.org")],
            "nfGroupIds": {"UDM": format!("udm-{i}")}});
        let r = send_json(&c, Method::POST, &create, Some(&entry)).await;
        assert_eq!(r.status(), 201, "{:?}", body(&r));
        for id in [&imsi, &gpsi, &nai] {
            assert_eq!(lookup(&c, &udr, id).await, (200, json!({"UDM": format!("udm-{i}")})));
        }

        // Update: the group changes and the GPSI leaves the entry.
        let url = udr.url(&format!("/udr-prov/v1/slf-entries/{imsi}"));
        let new = json!({"subscriberIds": [imsi, format!("nai-user{i}@example.org")],
            "nfGroupIds": {"UDM": format!("udm-x{i}")}});
        let r = send_json(&c, Method::PUT, &url, Some(&new)).await;
        assert!(r.status().is_success(), "{}: {:?}", r.status(), body(&r));
        assert_eq!(lookup(&c, &udr, &imsi).await, (200, json!({"UDM": format!("udm-x{i}")})));
        assert_eq!(lookup(&c, &udr, &nai).await, (200, json!({"UDM": format!("udm-x{i}")})));
        assert_eq!(lookup(&c, &udr, &gpsi).await.0, 404);

        if i % 2 == 0 {
            let r = delete(&c, &url).await;
            assert_eq!(r.status(), 204);
            for id in [&imsi, &nai] {
                let (status, p) = lookup(&c, &udr, id).await;
                assert_eq!((status, p["cause"].as_str()), (404, Some("USER_NOT_FOUND")), "{id}");
            }
        }
    }
    // The index itself (not the store reads of a lookup that found it behind) holds the result.
    let slf = &udr.udr.slf;
    let began = Instant::now();
    while slf.indexed("imsi-001010000000001").is_none() {
        assert!(began.elapsed() < Duration::from_secs(5), "the index never caught up");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(slf.index_size().unwrap().0, 20);
    for i in 0..20 {
        let imsi = format!("imsi-0010100000000{i:02}");
        let want = (i % 2 == 1).then(|| format!("udm-x{i}"));
        let got = slf.indexed(&imsi).unwrap().map(|g| g["UDM"].clone());
        assert_eq!(got, want, "{imsi}");
        assert!(slf.indexed(&format!("msisdn-3360000{i:04}")).unwrap().is_none());
    }
    udr.stop().await;
}

/// Polls a lookup until it answers `want` or `bound` passes; returns the time it took.
async fn eventually(c: &sbi::client::SbiClient, udr: &TestUdr, id: &str, want: u16) -> Duration {
    let began = Instant::now();
    loop {
        if lookup(c, udr, id).await.0 == want {
            return began.elapsed();
        }
        assert!(began.elapsed() < Duration::from_secs(5), "{id} never answered {want}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// An import through its own store connection (as `fivecore udr import` does from another
/// process) while the UDR serves: its entries are looked up within `sync_interval_ms` plus a
/// reload, and entries it replaces lose their old identities.
async fn lookups_see_an_import_by_another_connection() {
    let dir = common::state_dir();
    let mut config = UdrConfig::default();
    config.slf.sync_interval_ms = 50;
    let udr = TestUdr::start(dir.path(), config).await;
    let c = client();
    let create = udr.url("/udr-prov/v1/slf-entries");
    let entry = json!({"subscriberIds": ["imsi-001010000000001", "msisdn-33600000001"],
        "nfGroupIds": {"UDM": "udm-own"}});
    assert_eq!(send_json(&c, Method::POST, &create, Some(&entry)).await.status(), 201);
    assert_eq!(lookup(&c, &udr, "imsi-001010000000002").await.0, 404);

    let other = udr::Stores::open(common::store_config(dir.path()), "import").await.unwrap();
    let csv = "subscriberIds,UDM\n\
        imsi-001010000000002;msisdn-33600000002,udm-imported\n\
        imsi-001010000000001,udm-reimported\n\
        nai-bob@example.org,udm-nai\n";
    let opts = udr::import::Options::new(udr::import::Kind::Slf, udr::import::Format::Csv);
    let report = udr::import::run(&other, std::io::Cursor::new(csv), opts, |_| {}).await.unwrap();
    assert_eq!(report.progress.rows, 3);
    other.close().await.unwrap();

    let took = eventually(&c, &udr, "imsi-001010000000002", 200).await;
    assert!(took < Duration::from_secs(2), "seen after {took:?}");
    assert_eq!(lookup(&c, &udr, "msisdn-33600000002").await, (200, json!({"UDM": "udm-imported"})));
    assert_eq!(
        lookup(&c, &udr, "imsi-001010000000001").await,
        (200, json!({"UDM": "udm-reimported"}))
    );
    assert_eq!(lookup(&c, &udr, "nai-bob@example.org").await, (200, json!({"UDM": "udm-nai"})));
    // The import replaced the whole entry: its GPSI is gone.
    assert_eq!(lookup(&c, &udr, "msisdn-33600000001").await.0, 404);

    // Provisioning after the reload still reads its own writes.
    let entry = json!({"subscriberIds": ["imsi-001010000000003"], "nfGroupIds": {"UDM": "udm-3"}});
    assert_eq!(send_json(&c, Method::POST, &create, Some(&entry)).await.status(), 201);
    assert_eq!(lookup(&c, &udr, "imsi-001010000000003").await, (200, json!({"UDM": "udm-3"})));
    udr.stop().await;
}

/// SOAP writes SLF entries through the store functions, not through the index: a lookup right
/// after the SOAP answer sees them (from the store while the index is behind), and the index
/// takes them in within `sync_interval_ms`.
async fn lookups_see_soap_writes_at_once() {
    let dir = common::state_dir();
    let mut config = UdrConfig::default();
    config.slf.sync_interval_ms = 60_000;
    let udr = TestUdr::start(dir.path(), config).await;
    let c = client();
    let ns = "urn:fivecore:udr:provisioning:1";
    for i in 0..10 {
        let id = format!("imsi-0010100000000{i:02}");
        let envelope = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
             <soapenv:Envelope xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\" \
             xmlns:udr=\"{ns}\"><soapenv:Body><udr:CreateSlfEntry><udr:entry>\
             <udr:subscriberId>{id}</udr:subscriberId><udr:group><udr:nfType>UDM</udr:nfType>\
             <udr:groupId>udm-soap{i}</udr:groupId></udr:group></udr:entry></udr:CreateSlfEntry>\
             </soapenv:Body></soapenv:Envelope>"
        );
        let action = format!("\"{ns}/CreateSlfEntry\"");
        let headers = [("soapaction", action.as_str())];
        let ct = Some("text/xml; charset=utf-8");
        let r = send(&c, Method::POST, &udr.url("/udr-soap/v1"), ct, envelope.as_bytes(), &headers)
            .await;
        assert_eq!(r.status(), 200, "{}", String::from_utf8_lossy(r.body()));
        assert_eq!(lookup(&c, &udr, &id).await, (200, json!({"UDM": format!("udm-soap{i}")})));
    }
    // The lookups nudged the index: it holds the entries without waiting for the interval.
    let began = Instant::now();
    while udr.udr.slf.index_size().map_or(0, |s| s.0) < 10 {
        assert!(began.elapsed() < Duration::from_secs(5), "the index never took them in");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    udr.stop().await;
}

testkit::on_both_backends!(
    lookups_read_the_provisioning_writes_at_once,
    lookups_see_an_import_by_another_connection,
    lookups_see_soap_writes_at_once,
);
