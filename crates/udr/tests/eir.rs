//! N5g-eir_EquipmentIdentityCheck over real sockets: listed IMEIs and ranges by IMEI and
//! IMEISV, unknown equipment in both configurations, SUPI/GPSI binding, bad queries, and the
//! separate 5G_EIR NRF profile.

mod common;

use std::time::Duration;

use common::*;
use http::Method;
use serde_json::{json, Value};
use udr::eir::{EirConfig, EquipmentStatus, UnknownEquipment};
use udr::UdrConfig;

/// Lists the test equipment through the provisioning API.
async fn provision(udr: &TestUdr) {
    let c = client();
    let imeis = udr.url("/udr-prov/v1/eir/imeis");
    for entry in [
        json!({"imei": "35209900176148", "status": "BLACKLISTED"}),
        json!({"imei": "490154203237518", "status": "WHITELISTED",
            "supis": ["imsi-001010000000001"], "gpsis": ["msisdn-33600000001"]}),
        json!({"imei": "35780502398494", "status": "BLACKLISTED",
            "supis": ["imsi-001010000000001"]}),
    ] {
        let r = send_json(&c, Method::POST, &imeis, Some(&entry)).await;
        assert_eq!(r.status(), 201, "{:?}", body(&r));
    }
    let r = send_json(
        &c,
        Method::POST,
        &udr.url("/udr-prov/v1/eir/imei-ranges"),
        Some(&json!({"start": "35209900000000", "end": "35209900999999", "status": "GREYLISTED"})),
    )
    .await;
    assert_eq!(r.status(), 201, "{:?}", body(&r));
}

fn status_url(udr: &TestUdr, query: &str) -> String {
    udr.url(&format!("/n5g-eir-eic/v1/equipment-status?{query}"))
}

/// The status answered (checked against EirResponseData), or panics on a non-200.
async fn status(udr: &TestUdr, query: &str) -> String {
    let r = get(&client(), &status_url(udr, query)).await;
    let v = body(&r);
    assert_eq!(r.status(), 200, "{query}: {v}");
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_valid("TS29511_N5g-eir_EquipmentIdentityCheck", "EirResponseData", &v);
    v["status"].as_str().unwrap().to_owned()
}

async fn listed_ranges_unknown_and_bad_peis() {
    let dir = common::state_dir();
    let udr = TestUdr::start(dir.path(), UdrConfig::default()).await;
    provision(&udr).await;

    // A listed IMEI, by IMEI with its check digit, with the spare 0, and by IMEISV.
    assert_eq!(status(&udr, "pei=imei-352099001761481").await, "BLACKLISTED");
    assert_eq!(status(&udr, "pei=imei-352099001761480").await, "BLACKLISTED");
    assert_eq!(status(&udr, "pei=imeisv-3520990017614823").await, "BLACKLISTED");
    // Elsewhere in its TAC: the range.
    assert_eq!(status(&udr, "pei=imeisv-3520990000000000").await, "GREYLISTED");
    assert_eq!(status(&udr, "pei=imeisv-3520990099999917").await, "GREYLISTED");
    assert_eq!(
        status(&udr, "pei=imeisv-3520990012345601&supported-features=1f").await,
        "GREYLISTED"
    );

    // Unknown: just outside the range, another TAC, a wireline MAC PEI.
    for pei in ["imeisv-3520989999999900", "imeisv-3520991000000000", "mac-00-1a-2b-3c-4d-5e"] {
        let r = get(&client(), &status_url(&udr, &format!("pei={pei}"))).await;
        problem(&r, 404, "ERROR_EQUIPMENT_UNKNOWN");
    }

    // Bad queries.
    let c = client();
    for (q, code, cause, param) in [
        ("pei=imei-12345", 400, "MANDATORY_QUERY_PARAM_INCORRECT", "pei"),
        ("pei=imei-352099001761482", 400, "MANDATORY_QUERY_PARAM_INCORRECT", "pei"),
        ("pei=imeisv-35209900176148", 400, "MANDATORY_QUERY_PARAM_INCORRECT", "pei"),
        ("pei=352099001761481", 400, "MANDATORY_QUERY_PARAM_INCORRECT", "pei"),
        ("supi=imsi-001010000000001", 400, "MANDATORY_QUERY_PARAM_MISSING", "pei"),
        ("pei=imei-352099001761481&supi=imsi-12", 400, "OPTIONAL_QUERY_PARAM_INCORRECT", "supi"),
        ("pei=imei-352099001761481&gpsi=tel-1", 400, "OPTIONAL_QUERY_PARAM_INCORRECT", "gpsi"),
        (
            "pei=imei-352099001761481&supported-features=xyz",
            400,
            "OPTIONAL_QUERY_PARAM_INCORRECT",
            "supported-features",
        ),
        ("pei=imei-352099001761481&imsi=1", 400, "INVALID_QUERY_PARAM", "imsi"),
        ("pei=imei-352099001761481&pei=imei-352099001761481", 400, "INVALID_QUERY_PARAM", "pei"),
    ] {
        let r = get(&c, &status_url(&udr, q)).await;
        let p = problem(&r, code, cause);
        assert_eq!(params(&p), [param], "{q}");
    }
    udr.stop().await;
}

async fn binding_mismatch_gives_the_configured_status() {
    let dir = common::state_dir();
    let udr = TestUdr::start(dir.path(), UdrConfig::default()).await;
    provision(&udr).await;
    let pei = "pei=imeisv-4901542032375101";
    // Bound to imsi-001010000000001 and msisdn-33600000001: the bound subscriber is welcome,
    // a request without identities cannot mismatch, any other SUPI or GPSI gets the default
    // binding_mismatch, BLACKLISTED.
    assert_eq!(status(&udr, pei).await, "WHITELISTED");
    assert_eq!(status(&udr, &format!("{pei}&supi=imsi-001010000000001")).await, "WHITELISTED");
    assert_eq!(
        status(&udr, &format!("{pei}&supi=imsi-001010000000001&gpsi=msisdn-33600000001")).await,
        "WHITELISTED"
    );
    assert_eq!(status(&udr, &format!("{pei}&supi=imsi-001010000000002")).await, "BLACKLISTED");
    assert_eq!(status(&udr, &format!("{pei}&gpsi=msisdn-33600000002")).await, "BLACKLISTED");
    assert_eq!(
        status(&udr, &format!("{pei}&supi=imsi-001010000000001&gpsi=msisdn-33600000002")).await,
        "BLACKLISTED"
    );
    // Bound by SUPI only: a GPSI cannot mismatch.
    let bl = "pei=imei-357805023984942";
    assert_eq!(status(&udr, &format!("{bl}&gpsi=msisdn-33600000009")).await, "BLACKLISTED");
    udr.stop().await;

    // Configured: unknown equipment GREYLISTED, binding mismatch GREYLISTED, read from TOML.
    let config: UdrConfig = toml::from_str(
        "[eir]\nunknown_equipment = \"GREYLISTED\"\nbinding_mismatch = \"GREYLISTED\"\n",
    )
    .unwrap();
    assert_eq!(config.eir.unknown_equipment, UnknownEquipment::Greylisted);
    assert_eq!(config.eir.binding_mismatch, EquipmentStatus::Greylisted);
    let udr = TestUdr::start(dir.path(), config).await;
    assert_eq!(status(&udr, "pei=imeisv-9999999900000001").await, "GREYLISTED");
    assert_eq!(status(&udr, "pei=mac-00-1a-2b-3c-4d-5e").await, "GREYLISTED");
    assert_eq!(status(&udr, &format!("{pei}&supi=imsi-001010000000002")).await, "GREYLISTED");
    // A mismatch never makes a blacklisted device more welcome.
    assert_eq!(status(&udr, &format!("{bl}&supi=imsi-001010000000002")).await, "BLACKLISTED");
    udr.stop().await;

    let config = eir_config(EirConfig {
        unknown_equipment: UnknownEquipment::Whitelisted,
        ..EirConfig::default()
    });
    let udr = TestUdr::start(dir.path(), config).await;
    assert_eq!(status(&udr, "pei=imeisv-9999999900000001").await, "WHITELISTED");
    // A bad PEI is still a 400, whatever the default answer.
    let r = get(&client(), &status_url(&udr, "pei=imei-1")).await;
    problem(&r, 400, "MANDATORY_QUERY_PARAM_INCORRECT");
    udr.stop().await;

    for bad in [
        "unknown_equipment = \"UNKNOWN\"",
        "binding_mismatch = \"EQUIPMENT_UNKNOWN\"",
        "colour = 1",
    ] {
        assert!(toml::from_str::<UdrConfig>(&format!("[eir]\n{bad}\n")).is_err(), "{bad}");
    }
}

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

async fn wait_for(url: &str, want: u16) -> Value {
    let c = client();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let r = get(&c, url).await;
        if r.status() == want {
            return body(&r);
        }
        assert!(std::time::Instant::now() < deadline, "{url} never answered {want}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// With `register_nrf`, AMFs discover the UDR as a 5G_EIR (its own profile and instance id);
/// without it, only the UDR profile is registered.
async fn registers_a_5g_eir_profile_when_configured() {
    let dir = common::state_dir();
    let (nrf_base, nrf_stop, nrf_task) = start_nrf(dir.path()).await;
    let nrf_config = || nrf_client::NrfClientConfig {
        api_roots: vec![nrf_base.clone()],
        register_retry_initial_ms: 50,
        ..Default::default()
    };
    let udr_id = "5a7e0d1c-2222-4333-8444-555566667701";
    let eir_id = "5a7e0d1c-2222-4333-8444-555566667702";
    let config = UdrConfig {
        nrf: Some(nrf_config()),
        eir: EirConfig {
            register_nrf: true,
            nf_instance_id: Some(eir_id.into()),
            ..EirConfig::default()
        },
        ..UdrConfig::default()
    };
    let udr = TestUdr::start_as(dir.path(), config, Some(udr_id.into())).await;
    let profile = |id: &str| format!("{nrf_base}/nnrf-nfm/v1/nf-instances/{id}");
    let eir = wait_for(&profile(eir_id), 200).await;
    assert_eq!(eir["nfType"], "5G_EIR");
    assert_eq!(eir["nfServices"][0]["serviceName"], "n5g-eir-eic");
    let port = udr.base.rsplit(':').next().unwrap().parse::<u16>().unwrap();
    assert_eq!(eir["nfServices"][0]["ipEndPoints"][0]["port"], port);
    assert_eq!(eir["nfServices"][0]["versions"][0]["apiFullVersion"], "1.2.0");
    assert_eq!(eir["nfServiceList"]["n5g-eir-eic"], eir["nfServices"][0]);
    assert_valid("TS29510_Nnrf_NFManagement", "NFProfile", &eir);
    let own = wait_for(&profile(udr_id), 200).await;
    assert_eq!(own["nfType"], "UDR");
    // The equipment check is the 5G_EIR profile's service, not the UDR's.
    let names: Vec<&str> = own["nfServices"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["serviceName"].as_str())
        .collect();
    assert_eq!(names, ["nudr-dr", "nudr-group-id-map"], "{own}");
    let disc =
        format!("{nrf_base}/nnrf-disc/v1/nf-instances?target-nf-type=5G_EIR&requester-nf-type=AMF");
    let found = body(&get(&client(), &disc).await);
    assert_eq!(found["nfInstances"][0]["nfInstanceId"], eir_id, "{found}");
    // Both profiles go on shutdown.
    udr.stop().await;
    wait_for(&profile(eir_id), 404).await;
    wait_for(&profile(udr_id), 404).await;

    // Default: the UDR registers, no 5G_EIR.
    let config = UdrConfig { nrf: Some(nrf_config()), ..UdrConfig::default() };
    let udr = TestUdr::start_as(dir.path(), config, Some(udr_id.into())).await;
    wait_for(&profile(udr_id), 200).await;
    let r = get(&client(), &disc).await;
    assert!(
        r.status() != 200 || body(&r)["nfInstances"].as_array().unwrap().is_empty(),
        "{:?}",
        body(&r)
    );
    udr.stop().await;

    // register_nrf without an NRF to register with is a configuration error.
    let config = eir_config(EirConfig { register_nrf: true, ..EirConfig::default() });
    let run = udr::RunConfig {
        udr: config,
        sbi: sbi::ServerConfig::default(),
        client: sbi::client::ClientConfig::default(),
        store: store::SqliteConfig::new(dir.path().join("x.db")),
        instance_id: None,
    };
    assert!(matches!(udr::bind(run).await, Err(udr::UdrError::Config(_))));

    let _ = nrf_stop.send(());
    nrf_task.await.unwrap().unwrap();
}

testkit::on_both_backends!(
    listed_ranges_unknown_and_bad_peis,
    binding_mismatch_gives_the_configured_status,
    registers_a_5g_eir_profile_when_configured,
);
