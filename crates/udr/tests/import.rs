//! Bulk import (`udr::import`, behind `fivecore udr import`) into the store of a running UDR,
//! CSV and JSON lines, bad rows skipped or stopping the import, then lookups over HTTP.

mod common;

use std::io::Cursor;

use common::*;
use serde_json::json;
use udr::import::{self, Event, Format, ImportError, Kind, Options, Report};
use udr::{Stores, UdrConfig};

/// A second handle on the UDR's store, as `fivecore udr import` opens it.
async fn open(dir: &std::path::Path) -> Stores {
    Stores::open(common::store_config(dir), "fivecore-udr-import").await.unwrap()
}

/// Imports `text`; returns the report, the bad lines reported and how many progress events
/// came.
async fn import(
    db: &Stores,
    text: &str,
    kind: Kind,
    format: Format,
    stop: bool,
) -> (Report, Vec<u64>, usize) {
    let opts = Options { batch_rows: 2, stop_on_bad_row: stop, ..Options::new(kind, format) };
    let mut bad = Vec::new();
    let mut progress = 0;
    let report = import::run(db, Cursor::new(text.to_owned()), opts, |e| match e {
        Event::BadRow(b) => bad.push(b.line),
        Event::Progress(_) => progress += 1,
    })
    .await
    .unwrap();
    (report, bad, progress)
}

async fn groups_of(udr: &TestUdr, id: &str) -> serde_json::Value {
    let url = udr.url(&format!(
        "/nudr-group-id-map/v1/nf-group-ids?nf-type=UDM,PCF&subscriberId={}",
        enc(id)
    ));
    body(&get(&client(), &url).await)
}

/// What a lookup of `id` answers, as the tests compare it: the groups, or the ProblemDetails'
/// cause.
async fn answer(udr: &TestUdr, id: &str) -> serde_json::Value {
    let v = groups_of(udr, id).await;
    match v.get("cause") {
        Some(cause) => cause.clone(),
        None => v,
    }
}

/// Waits until the running UDR's lookup index has taken in the import: every identity answers
/// as `want` says. Another connection's writes are seen within `[udr.slf] sync_interval_ms`
/// plus a reload on SQLite, the change feed's poll plus a drain on MySQL (docs/udr.md), and not
/// all at once: a drain of identities queued earlier may read some of them at their newer state
/// before the drain that takes in the rest of the import.
async fn seen(udr: &TestUdr, want: &[(&str, serde_json::Value)]) {
    let began = std::time::Instant::now();
    for (id, want) in want {
        loop {
            let now = answer(udr, id).await;
            if now == *want {
                break;
            }
            assert!(
                began.elapsed() < std::time::Duration::from_secs(5),
                "{id} never became {want} (still {now})"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
}

async fn slf_csv_and_jsonl_into_a_running_udr() {
    let dir = common::state_dir();
    let udr = TestUdr::start(dir.path(), UdrConfig::default()).await;
    let db = open(dir.path()).await;
    let csv = "subscriberIds,UDM,AUSF,PCF\n\
               imsi-001010000000001;msisdn-33600000001,udm-1,ausf-1,pcf-1\n\
               # a comment, then a blank line\n\
               \n\
               imsi-12,udm-1,,\n\
               \"impu-sip:a,b@x.org\",udm-3,,\r\n\
               imsi-001010000000004,udm-4\n\
               imsi-001010000000002,udm-2,,pcf-1";
    let (report, bad, progress) = import(&db, csv, Kind::Slf, Format::Csv, false).await;
    assert_eq!(bad, [5, 7]);
    assert_eq!(report.progress.rows, 3);
    assert_eq!(report.progress.bad, 2);
    assert_eq!(report.progress.bytes, csv.len() as u64);
    assert_eq!(report.slf.new, 4);
    assert_eq!(report.stopped_at, None);
    assert!(progress >= 2, "one progress report per batch of 2 rows");
    // Seen by the running UDR once its index took the import in.
    seen(
        &udr,
        &[
            ("imsi-001010000000002", json!({"UDM": "udm-2", "PCF": "pcf-1"})),
            ("msisdn-33600000001", json!({"UDM": "udm-1", "PCF": "pcf-1"})),
            ("imsi-001010000000001", json!({"UDM": "udm-1", "PCF": "pcf-1"})),
            ("impu-sip:a,b@x.org", json!({"UDM": "udm-3"})),
            ("imsi-001010000000004", json!("USER_NOT_FOUND")),
        ],
    )
    .await;
    let entry =
        body(&get(&client(), &udr.url("/udr-prov/v1/slf-entries/msisdn-33600000001")).await);
    assert_eq!(entry["subscriberIds"], json!(["imsi-001010000000001", "msisdn-33600000001"]));

    // The same file again changes nothing.
    let (again, _, _) = import(&db, csv, Kind::Slf, Format::Csv, false).await;
    assert_eq!((again.slf.new, again.slf.replaced, again.slf.removed), (0, 3, 0));

    // JSON lines; a row replacing an entry drops the identities it does not list. Stopping at
    // the bad row keeps the rows before it.
    let jsonl = concat!(
        r#"{"subscriberIds":["imsi-001010000000010"],"nfGroupIds":{"UDM":"udm-10"}}"#,
        "\n",
        r#"{"subscriberIds":["imsi-001010000000001"],"nfGroupIds":{"UDM":"udm-new"}}"#,
        "\n",
        r#"{"subscriberIds":["imsi-001010000000011"],"nfGroupIds":{"udm":"x"}}"#,
        "\n",
        r#"{"subscriberIds":["imsi-001010000000012"],"nfGroupIds":{"UDM":"udm-12"}}"#,
        "\n",
    );
    let (report, bad, _) = import(&db, jsonl, Kind::Slf, Format::Jsonl, true).await;
    assert_eq!(bad, [3]);
    assert_eq!(report.stopped_at, Some(3));
    assert_eq!(report.progress.rows, 2);
    assert_eq!((report.slf.new, report.slf.replaced, report.slf.removed), (1, 1, 1));
    seen(
        &udr,
        &[
            ("imsi-001010000000010", json!({"UDM": "udm-10"})),
            ("imsi-001010000000001", json!({"UDM": "udm-new"})),
            ("msisdn-33600000001", json!("USER_NOT_FOUND")),
            ("imsi-001010000000012", json!("USER_NOT_FOUND")),
        ],
    )
    .await;

    // A bad header imports nothing.
    let opts = Options::new(Kind::Slf, Format::Csv);
    let r =
        import::run(&db, Cursor::new("subscriberIds,Udm\nimsi-001010000000020,u\n"), opts, |_| {})
            .await;
    assert!(matches!(r, Err(ImportError::Header { line: 1, .. })), "{r:?}");
    assert_eq!(groups_of(&udr, "imsi-001010000000020").await["cause"], "USER_NOT_FOUND");

    db.close().await.unwrap();
    udr.stop().await;
}

async fn eir_status(udr: &TestUdr, pei: &str) -> serde_json::Value {
    let url = udr.url(&format!("/n5g-eir-eic/v1/equipment-status?pei={pei}"));
    body(&get(&client(), &url).await)
}

async fn eir_jsonl_and_csv() {
    let dir = common::state_dir();
    // Imported before the UDR starts, as for a first load.
    let db = open(dir.path()).await;
    let jsonl = concat!(
        r#"{"imei":"35209900176148","status":"BLACKLISTED"}"#,
        "\n",
        r#"{"start":"49015400000000","end":"49015499999999","status":"GREYLISTED"}"#,
        "\n",
        r#"{"start":"49015450000000","end":"49015460000000","status":"WHITELISTED"}"#,
        "\n",
        r#"{"imei":"35780502398494","status":"WHITELISTED"}"#,
        "\n",
    );
    let (report, bad, _) = import(&db, jsonl, Kind::Eir, Format::Jsonl, true).await;
    assert_eq!(bad, [3], "the overlapping range stops the import");
    assert_eq!(report.stopped_at, Some(3));
    assert_eq!((report.imeis, report.ranges), (1, 1));

    // CSV, skipping bad rows: a wrong check digit (found while parsing) and an overlap (found
    // while writing) are both reported, in line order.
    let csv = "imei,start,end,status,supis,gpsis\n\
               ,49015450000000,49015460000000,WHITELISTED,,\n\
               357805023984941,,,WHITELISTED,,\n\
               357805023984942,,,WHITELISTED,imsi-001010000000001;imsi-001010000000002,\n\
               ,35209910000000,35209919999999,GREYLISTED,,msisdn-33600000001\n";
    let (report, bad, _) = import(&db, csv, Kind::Eir, Format::Csv, false).await;
    assert_eq!(bad, [2, 3]);
    assert_eq!((report.imeis, report.ranges, report.progress.bad), (1, 1, 2));
    db.close().await.unwrap();

    let udr = TestUdr::start(dir.path(), UdrConfig::default()).await;
    assert_eq!(eir_status(&udr, "imeisv-3520990017614801").await["status"], "BLACKLISTED");
    assert_eq!(eir_status(&udr, "imeisv-4901545555555501").await["status"], "GREYLISTED");
    assert_eq!(
        eir_status(&udr, "imei-357805023984942&supi=imsi-001010000000002").await["status"],
        "WHITELISTED"
    );
    assert_eq!(
        eir_status(&udr, "imei-357805023984942&supi=imsi-001010000000003").await["status"],
        "BLACKLISTED"
    );
    assert_eq!(
        eir_status(&udr, "imeisv-3520991012345601&gpsi=msisdn-33600000002").await["status"],
        "BLACKLISTED"
    );
    assert_eq!(eir_status(&udr, "imeisv-3520991012345601").await["status"], "GREYLISTED");
    let range =
        body(&get(&client(), &udr.url("/udr-prov/v1/eir/imei-ranges/35209910000000")).await);
    assert_eq!(range["gpsis"], json!(["msisdn-33600000001"]));
    udr.stop().await;
}

async fn policy_jsonl_into_a_running_udr() {
    let dir = common::state_dir();
    let udr = TestUdr::start(dir.path(), policy_config()).await;
    let db = open(dir.path()).await;
    let jsonl = concat!(
        r#"{"ueId":"imsi-001010000000001","amData":{"subscCats":["gold"]},"umData":{"u1":{"limitId":"u1"}}}"#,
        "\n# a comment\n",
        r#"{"ueId":"imsi-001010000000002","smData":{}}"#,
        "\n",
        r#"{"amData":{"subscCats":["silver"]}}"#,
        "\n",
        r#"{"ueId":"msisdn-33600000003","amData":{"subscCats":["silver"]}}"#,
        "\n",
    );
    // Stopping: the rows before the first bad one are committed.
    let (report, bad, _) = import(&db, jsonl, Kind::Policy, Format::Jsonl, true).await;
    assert_eq!((bad, report.stopped_at, report.progress.rows), (vec![3], Some(3), 1));
    // Skipping: every bad row reported with its line; running the file again replaces.
    let (report, bad, progress) = import(&db, jsonl, Kind::Policy, Format::Jsonl, false).await;
    assert_eq!(bad, [3, 4]);
    assert_eq!((report.progress.rows, report.progress.bad, report.policy_new), (2, 2, 1));
    assert!(progress >= 1);

    let c = client();
    let one = body(&get(&c, &udr.url("/udr-prov/v1/policy-data/ues/imsi-001010000000001")).await);
    assert_eq!(
        one,
        json!({"amData": {"subscCats": ["gold"]}, "umData": {"u1": {"limitId": "u1"}}})
    );
    let am = get(&c, &udr.url("/nudr-dr/v2/policy-data/ues/msisdn-33600000003/am-data")).await;
    assert_eq!(body(&am), json!({"subscCats": ["silver"]}));
    let none = get(&c, &udr.url("/nudr-dr/v2/policy-data/ues/imsi-001010000000002/am-data")).await;
    problem(&none, 404, "USER_NOT_FOUND");

    // Policy profiles are nested JSON: no CSV.
    let opts = Options::new(Kind::Policy, Format::Csv);
    let err = import::run(&db, Cursor::new("ueId\n".to_owned()), opts, |_| {}).await.unwrap_err();
    assert!(matches!(err, ImportError::Unsupported(_)), "{err}");
    db.close().await.unwrap();
    udr.stop().await;
}

/// A SOAP call over the SBI client, as the provisioning system makes it.
async fn soap(udr: &TestUdr, op: &str, inner: &str) -> String {
    let ns = "urn:fivecore:udr:provisioning:1";
    let env = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
         <soapenv:Envelope xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\" \
         xmlns:udr=\"{ns}\"><soapenv:Body><udr:{op}>{inner}</udr:{op}></soapenv:Body>\
         </soapenv:Envelope>"
    );
    let action = format!("\"{ns}/{op}\"");
    let r = send(
        &client(),
        http::Method::POST,
        &udr.url("/udr-soap/v1"),
        Some("text/xml; charset=utf-8"),
        env.as_bytes(),
        &[("soapaction", &action)],
    )
    .await;
    String::from_utf8(r.body().to_vec()).unwrap()
}

async fn sh_jsonl_then_read_by_soap() {
    let dir = common::state_dir();
    let db = open(dir.path()).await;
    let jsonl = concat!(
        r#"{"publicIdentities":["sip:alice@ims.example","tel:+33600000001"],"msisdns":["33600000001"],"imsUserState":"REGISTERED","scscfName":"sip:scscf1.ims.example","repositoryData":[{"serviceIndication":"mmtel","sequenceNumber":0,"serviceData":"<mmtel><cdiv/></mmtel>"}]}"#,
        "\n",
        r#"{"publicIdentities":["sip:bob@ims.example"],"msisdns":[],"imsUserState":"NOT_REGISTERED"}"#,
        "\n",
        r#"{"publicIdentities":["sip:carol@ims.example"],"imsUserState":"ASLEEP"}"#,
        "\n",
        r#"{"publicIdentities":["sip:dave@ims.example"],"imsUserState":"REGISTERED","repositoryData":[{"serviceIndication":"x","serviceData":"<open>"}]}"#,
        "\n",
        r#"{"publicIdentities":["alice"],"imsUserState":"REGISTERED"}"#,
        "\n",
    );
    let (report, bad, _) = import(&db, jsonl, Kind::Sh, Format::Jsonl, false).await;
    assert_eq!(bad, [3, 4, 5]);
    assert_eq!((report.progress.rows, report.sh_new, report.sh_replaced), (2, 2, 0));
    // Again: each profile replaces the one holding its identities.
    let (report, _, _) = import(&db, jsonl, Kind::Sh, Format::Jsonl, false).await;
    assert_eq!((report.sh_new, report.sh_replaced), (0, 2));
    // A profile naming identities of two profiles is refused, nothing of it written.
    let clash = r#"{"publicIdentities":["sip:bob@ims.example","sip:alice@ims.example"],"imsUserState":"REGISTERED"}"#;
    let (report, bad, _) = import(&db, clash, Kind::Sh, Format::Jsonl, false).await;
    assert_eq!((bad, report.progress.rows), (vec![1], 0));
    let opts = Options::new(Kind::Sh, Format::Csv);
    let err = import::run(&db, Cursor::new("x\n".to_owned()), opts, |_| {}).await.unwrap_err();
    assert!(matches!(err, ImportError::Unsupported(_)), "{err}");
    db.close().await.unwrap();

    // A UDR started on the store serves them.
    let udr = TestUdr::start(dir.path(), UdrConfig::default()).await;
    let alice = soap(&udr, "GetShProfile", "<udr:msisdn>33600000001</udr:msisdn>").await;
    for part in [
        "<udr:publicIdentity>tel:+33600000001</udr:publicIdentity>",
        "<udr:imsUserState>REGISTERED</udr:imsUserState>",
        "<udr:scscfName>sip:scscf1.ims.example</udr:scscfName>",
        "<udr:serviceIndication>mmtel</udr:serviceIndication>",
        "<mmtel><cdiv/></mmtel>",
    ] {
        assert!(alice.contains(part), "{part} in {alice}");
    }
    let bob =
        soap(&udr, "GetShProfile", "<udr:publicIdentity>sip:bob@ims.example</udr:publicIdentity>")
            .await;
    assert!(bob.contains("<udr:imsUserState>NOT_REGISTERED</udr:imsUserState>"), "{bob}");
    let carol = soap(
        &udr,
        "GetShProfile",
        "<udr:publicIdentity>sip:carol@ims.example</udr:publicIdentity>",
    )
    .await;
    assert!(carol.contains("NOT_FOUND"), "{carol}");
    udr.stop().await;
}

async fn policy_subscriptions_jsonl_are_notified_after_start() {
    let dir = common::state_dir();
    let mut sink = testkit::sink::Sink::start().await;
    let db = open(dir.path()).await;
    let ue = "imsi-001010000000001";
    let monitored = format!("http://udr.example/nudr-dr/v2/policy-data/ues/{ue}/sm-data");
    let jsonl = format!(
        "{}\n{}\n{}\n{}\n",
        json!({"subsId": "pcf-1-sub", "subscription": {"notificationUri": sink.url,
            "notifId": "n1", "monitoredResourceUris": [monitored]}}),
        json!({"subsId": "bad-uri", "subscription": {"notificationUri": "not a uri",
            "monitoredResourceUris": [monitored]}}),
        json!({"subscription": {"notificationUri": sink.url, "monitoredResourceUris": [monitored]}}),
        json!({"subsId": "x", "subscription": {"notificationUri": sink.url,
            "monitoredResourceUris": [monitored]}, "extra": 1}),
    );
    let (report, bad, _) =
        import(&db, &jsonl, Kind::PolicySubscriptions, Format::Jsonl, false).await;
    assert_eq!(bad, [2, 3, 4]);
    assert_eq!((report.progress.rows, report.subscriptions), (1, 1));
    // Loading the same file again replaces the subscription, it does not fail.
    let (report, _, _) = import(&db, &jsonl, Kind::PolicySubscriptions, Format::Jsonl, false).await;
    assert_eq!(report.subscriptions, 1);
    db.close().await.unwrap();

    // A UDR started afterwards loads it and notifies a change of the monitored resource.
    let udr = TestUdr::start(dir.path(), policy_config()).await;
    assert_eq!(udr.udr.policy.subs.len(), 1);
    let smd = udr.url(&format!("/nudr-dr/v2/policy-data/ues/{ue}/sm-data"));
    let doc = json!({"smPolicySnssaiData": {"1": {"snssai": {"sst": 1},
        "smPolicyDnnData": {"internet": {"dnn": "internet"}}}}});
    assert_eq!(put_json(&client(), &smd, &doc).await.status(), 201);
    let got = sink.next().await;
    assert_eq!(got, json!([{"smPolicyData": doc, "ueId": ue, "notifId": "n1"}]));
    udr.stop().await;
}

testkit::on_both_backends!(
    slf_csv_and_jsonl_into_a_running_udr,
    eir_jsonl_and_csv,
    policy_jsonl_into_a_running_udr,
    sh_jsonl_then_read_by_soap,
    policy_subscriptions_jsonl_are_notified_after_start,
);
