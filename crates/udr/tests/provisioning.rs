//! The provisioning REST API (`/udr-prov/v1`) over real sockets: every operation on SLF and
//! EIR entries with its error paths, the answers checked against docs/udr-provisioning.yaml,
//! and the effect seen through the 3GPP lookups (Nudr_GroupIDmap, N5g-eir).

mod common;

use std::path::PathBuf;
use std::sync::LazyLock;

use common::*;
use http::Method;
use serde_json::{json, Value};
use udr::UdrConfig;

// ---- docs/udr-provisioning.yaml as a JSON Schema ------------------------------------------

/// The provisioning OpenAPI document (and TS29571_CommonData when ../shared is there, for the
/// `$ref`s into it), merged into one JSON Schema document.
static PROV_DOC: LazyLock<Value> = LazyLock::new(|| {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let load = |p: PathBuf| -> Option<Value> {
        let text = std::fs::read_to_string(p).ok()?;
        let yaml: serde_yaml::Value = serde_yaml::from_str(&text).expect("YAML parses");
        Some(serde_json::to_value(yaml).expect("YAML is JSON"))
    };
    let prov = load(root.join("docs/udr-provisioning.yaml")).expect("docs/udr-provisioning.yaml");
    let common = load(root.join("../shared/3gpp/Rel-17/TS29571_CommonData.yaml"));
    let mut defs = serde_json::Map::new();
    let has_common = common.is_some();
    let mut prov = prov;
    rewrite(&mut prov, "prov", has_common);
    defs.insert("prov".into(), prov);
    if let Some(mut c) = common {
        rewrite(&mut c, "common", true);
        defs.insert("common".into(), c);
    }
    json!({ "$defs": defs })
});

fn rewrite(v: &mut Value, own: &str, has_common: bool) {
    match v {
        Value::Object(map) => {
            if let Some(r) = map.get("$ref").and_then(Value::as_str).map(str::to_owned) {
                let target = match r.split_once('#') {
                    Some(("", ptr)) => Some(format!("#/$defs/{own}{ptr}")),
                    Some(("TS29571_CommonData.yaml", ptr)) if has_common => {
                        Some(format!("#/$defs/common{ptr}"))
                    }
                    _ => None,
                };
                match target {
                    Some(t) => {
                        map.insert("$ref".into(), t.into());
                    }
                    None => map.clear(),
                }
                return;
            }
            map.values_mut().for_each(|x| rewrite(x, own, has_common));
        }
        Value::Array(a) => a.iter_mut().for_each(|x| rewrite(x, own, has_common)),
        _ => {}
    }
}

/// The errors of `value` against `components/schemas/<schema>` of docs/udr-provisioning.yaml.
fn prov_errors(schema: &str, value: &Value) -> Vec<String> {
    let mut root = PROV_DOC.clone();
    root["$ref"] = format!("#/$defs/prov/components/schemas/{schema}").into();
    let validator = jsonschema::validator_for(&root).expect("schema compiles");
    validator.iter_errors(value).map(|e| e.to_string()).collect()
}

fn assert_prov(schema: &str, value: &Value) {
    let errors = prov_errors(schema, value);
    assert!(errors.is_empty(), "{schema} {value}: {errors:?}");
}

/// The documented methods of every documented path are served, and nothing else under it.
async fn the_openapi_document_matches_the_routes() {
    let dir = common::state_dir();
    let udr = TestUdr::start(dir.path(), UdrConfig::default()).await;
    let router = udr::router(udr.udr.clone());
    let paths = PROV_DOC["$defs"]["prov"]["paths"].as_object().unwrap();
    assert_eq!(paths.len(), 6);
    for (path, item) in paths {
        let concrete = path.replace("{subscriberId}", "imsi-00101").replace(['{', '}'], "");
        let mut documented: Vec<String> = item
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| *k != "parameters")
            .map(|m| m.to_uppercase())
            .collect();
        let mut served: Vec<String> = router
            .allowed_methods(&format!("/udr-prov/v1{concrete}"))
            .iter()
            .map(|m| m.to_string())
            .collect();
        documented.sort();
        served.sort();
        assert_eq!(documented, served, "{path}");
    }
    // Examples are valid entries; the schemas do refuse what the API refuses.
    for schema in ["SlfEntry", "EirImeiEntry", "EirImeiRange"] {
        let example = &PROV_DOC["$defs"]["prov"]["components"]["schemas"][schema]["example"];
        assert_prov(schema, example);
    }
    for (schema, bad) in [
        ("SlfEntry", json!({"subscriberIds": [], "nfGroupIds": {"UDM": "u"}})),
        ("SlfEntry", json!({"subscriberIds": ["imsi-00101"], "nfGroupIds": {}})),
        ("SlfEntry", json!({"subscriberIds": ["imsi-00101"], "nfGroupIds": {"UDM": "u"}, "x": 1})),
        ("EirImeiEntry", json!({"imei": "3520990017614", "status": "BLACKLISTED"})),
        ("EirImeiEntry", json!({"imei": "35209900176148", "status": "RED"})),
        ("EirImeiRange", json!({"start": "35209900176148", "status": "BLACKLISTED"})),
    ] {
        assert!(!prov_errors(schema, &bad).is_empty(), "{schema} accepts {bad}");
    }
    udr.stop().await;
}

// ---- SLF entries -----------------------------------------------------------------------------

fn slf_url(udr: &TestUdr, id: &str) -> String {
    udr.url(&format!("/udr-prov/v1/slf-entries/{id}"))
}

async fn groups_of(udr: &TestUdr, id: &str, types: &str) -> (u16, Value) {
    let url = udr.url(&format!(
        "/nudr-group-id-map/v1/nf-group-ids?nf-type={types}&subscriberId={}",
        enc(id)
    ));
    let r = get(&client(), &url).await;
    (r.status().as_u16(), body(&r))
}

async fn slf_entries_lifecycle() {
    let dir = common::state_dir();
    let udr = TestUdr::start(dir.path(), UdrConfig::default()).await;
    let c = client();
    let entry = json!({
        "subscriberIds": ["imsi-001010000000001", "msisdn-33600000001"],
        "nfGroupIds": {"UDM": "udm-east", "AUSF": "ausf-east", "PCF": "pcf-1"}
    });
    let r = send_json(&c, Method::POST, &udr.url("/udr-prov/v1/slf-entries"), Some(&entry)).await;
    assert_eq!(r.status(), 201, "{}", body(&r));
    assert_eq!(r.header("location"), Some(slf_url(&udr, "imsi-001010000000001").as_str()));
    assert_eq!(body(&r), entry);
    assert_prov("SlfEntry", &body(&r));
    // Read by either identity; looked up by either.
    for id in ["imsi-001010000000001", "msisdn-33600000001"] {
        let r = get(&c, &slf_url(&udr, id)).await;
        assert_eq!(r.status(), 200);
        assert_eq!(body(&r), entry);
        assert_eq!(
            groups_of(&udr, id, "UDM,PCF").await,
            (200, json!({"UDM": "udm-east", "PCF": "pcf-1"}))
        );
    }

    // PUT: another group, the MSISDN dropped, an IMPU added.
    let replaced = json!({
        "subscriberIds": ["imsi-001010000000001", "impu-sip:alice@ims.example.org"],
        "nfGroupIds": {"UDM": "udm-west"}
    });
    let r = send_json(&c, Method::PUT, &slf_url(&udr, "msisdn-33600000001"), Some(&replaced)).await;
    let p = problem(&r, 400, "MANDATORY_IE_INCORRECT");
    assert_eq!(params(&p), ["/subscriberIds"], "the URI's identity must stay");
    let r =
        send_json(&c, Method::PUT, &slf_url(&udr, "imsi-001010000000001"), Some(&replaced)).await;
    assert_eq!(r.status(), 200, "{}", body(&r));
    assert_eq!(body(&r), replaced);
    assert_prov("SlfEntry", &body(&r));
    problem(&get(&c, &slf_url(&udr, "msisdn-33600000001")).await, 404, "RESOURCE_NOT_FOUND");
    assert_eq!(groups_of(&udr, "msisdn-33600000001", "UDM").await.0, 404);
    let impu = "impu-sip:alice@ims.example.org";
    assert_eq!(groups_of(&udr, impu, "UDM").await, (200, json!({"UDM": "udm-west"})));
    let r = get(&c, &slf_url(&udr, &enc(impu))).await;
    assert_eq!(body(&r), replaced);

    // PATCH (merge patch): a group added, one removed.
    let patch_url = slf_url(&udr, &enc(impu));
    let patch = |p: Value| {
        c.patch(&patch_url)
            .header("content-type", "application/merge-patch+json")
            .body(p.to_string())
            .send()
    };
    let r =
        patch(json!({"nfGroupIds": {"UDM": null, "CHF": "chf-9", "PCF": "pcf-2"}})).await.unwrap();
    assert_eq!(r.status(), 200, "{}", body(&r));
    let now = json!({
        "subscriberIds": ["imsi-001010000000001", impu],
        "nfGroupIds": {"CHF": "chf-9", "PCF": "pcf-2"}
    });
    assert_eq!(body(&r), now);
    assert_eq!(groups_of(&udr, "imsi-001010000000001", "UDM").await.1["cause"], "DATA_NOT_FOUND");
    // A patch whose result is not a valid entry, or drops the URI's identity, changes nothing.
    let r = patch(json!({"nfGroupIds": {"CHF": "", "udm": "x"}})).await.unwrap();
    let p = problem(&r, 400, "MANDATORY_IE_INCORRECT");
    assert_eq!(params(&p), ["/nfGroupIds/CHF", "/nfGroupIds/udm"]);
    let r = patch(json!({"subscriberIds": ["imsi-001010000000001"]})).await.unwrap();
    assert_eq!(params(&problem(&r, 400, "MANDATORY_IE_INCORRECT")), ["/subscriberIds"]);
    let r = patch(json!({"nfGroupIds": null})).await.unwrap();
    problem(&r, 400, "MANDATORY_IE_MISSING");
    let r = c
        .patch(&patch_url)
        .header("content-type", "application/merge-patch+json")
        .body("[1]")
        .send()
        .await
        .unwrap();
    problem(&r, 400, "MANDATORY_IE_INCORRECT");
    let r = c
        .patch(&patch_url)
        .header("content-type", "application/merge-patch+json")
        .body("{")
        .send()
        .await
        .unwrap();
    problem(&r, 400, "INVALID_MSG_FORMAT");
    let r = send_json(&c, Method::PATCH, &patch_url, Some(&json!({"nfGroupIds": {}}))).await;
    problem(&r, 415, "UNSUPPORTED_MEDIA_TYPE");
    assert_eq!(body(&get(&c, &patch_url).await), now);

    // Conflicts: a create or an update reaching into another entry.
    let other = json!({"subscriberIds": ["imsi-001010000000002"], "nfGroupIds": {"UDM": "u"}});
    let r = send_json(&c, Method::POST, &udr.url("/udr-prov/v1/slf-entries"), Some(&other)).await;
    assert_eq!(r.status(), 201);
    let clash = json!({"subscriberIds": ["msisdn-33600000005", "imsi-001010000000002"], "nfGroupIds": {"UDM": "u"}});
    let r = send_json(&c, Method::POST, &udr.url("/udr-prov/v1/slf-entries"), Some(&clash)).await;
    let p = problem(&r, 409, "ENTRY_EXISTS");
    assert_eq!(params(&p), ["/subscriberIds/1"]);
    problem(&get(&c, &slf_url(&udr, "msisdn-33600000005")).await, 404, "RESOURCE_NOT_FOUND");
    let grab = json!({"subscriberIds": ["imsi-001010000000001", "imsi-001010000000002"], "nfGroupIds": {"UDM": "u"}});
    let r = send_json(&c, Method::PUT, &slf_url(&udr, "imsi-001010000000001"), Some(&grab)).await;
    assert_eq!(params(&problem(&r, 409, "ENTRY_EXISTS")), ["/subscriberIds/1"]);
    let r = patch(json!({"subscriberIds": ["imsi-001010000000001", impu, "imsi-001010000000002"]}))
        .await
        .unwrap();
    problem(&r, 409, "ENTRY_EXISTS");
    let r = send_json(
        &c,
        Method::PUT,
        &slf_url(&udr, "imsi-001010000000009"),
        Some(&json!({"subscriberIds": ["imsi-001010000000009"], "nfGroupIds": {"UDM": "u"}})),
    )
    .await;
    problem(&r, 404, "RESOURCE_NOT_FOUND");
    let r = patch_unknown(&c, &slf_url(&udr, "imsi-001010000000009")).await;
    problem(&r, 404, "RESOURCE_NOT_FOUND");

    // DELETE by any identity removes them all.
    let r = send_json(&c, Method::DELETE, &slf_url(&udr, &enc(impu)), None).await;
    assert_eq!(r.status(), 204);
    for id in ["imsi-001010000000001", impu] {
        assert_eq!(groups_of(&udr, id, "CHF").await.1["cause"], "USER_NOT_FOUND");
    }
    let r = send_json(&c, Method::DELETE, &slf_url(&udr, "imsi-001010000000001"), None).await;
    problem(&r, 404, "RESOURCE_NOT_FOUND");

    // What is left survives a restart.
    udr.stop().await;
    let udr = TestUdr::start(dir.path(), UdrConfig::default()).await;
    assert_eq!(body(&get(&client(), &slf_url(&udr, "imsi-001010000000002")).await), other);
    udr.stop().await;
}

async fn patch_unknown(c: &sbi::client::SbiClient, url: &str) -> sbi::client::SbiResponse {
    c.patch(url)
        .header("content-type", "application/merge-patch+json")
        .body(r#"{"nfGroupIds":{"UDM":"x"}}"#)
        .send()
        .await
        .unwrap()
}

async fn slf_entry_bodies_and_paths_are_checked() {
    let dir = common::state_dir();
    let udr = TestUdr::start(dir.path(), UdrConfig::default()).await;
    let c = client();
    let create = udr.url("/udr-prov/v1/slf-entries");
    let r = send_json(
        &c,
        Method::POST,
        &create,
        Some(&json!({
            "subscriberIds": ["imsi-12", "msisdn-33600000001", "msisdn-33600000001"],
            "nfGroupIds": {"udm": "x", "PCF": 3},
            "groups": {}
        })),
    )
    .await;
    let p = problem(&r, 400, "MANDATORY_IE_INCORRECT");
    assert_eq!(
        params(&p),
        ["/groups", "/subscriberIds/0", "/subscriberIds/2", "/nfGroupIds/PCF", "/nfGroupIds/udm"]
    );
    let r = send_json(&c, Method::POST, &create, Some(&json!({"subscriberIds": []}))).await;
    let p = problem(&r, 400, "MANDATORY_IE_MISSING");
    assert_eq!(params(&p), ["/subscriberIds", "/nfGroupIds"]);
    let r = c
        .post(&create)
        .header("content-type", "application/json")
        .body("{\"subscriberIds\":")
        .send()
        .await
        .unwrap();
    problem(&r, 400, "INVALID_MSG_FORMAT");
    let r = c.post(&create).header("content-type", "text/plain").body("{}").send().await.unwrap();
    problem(&r, 415, "UNSUPPORTED_MEDIA_TYPE");
    let r = c.post(&create).send().await.unwrap();
    problem(&r, 415, "UNSUPPORTED_MEDIA_TYPE");
    let r = get(&c, &slf_url(&udr, "imsi-12")).await;
    assert_eq!(params(&problem(&r, 400, "MANDATORY_IE_INCORRECT")), ["subscriberId"]);
    let r = send_json(&c, Method::DELETE, &slf_url(&udr, "msisdn-1"), None).await;
    assert_eq!(params(&problem(&r, 400, "MANDATORY_IE_INCORRECT")), ["subscriberId"]);
    let r = send_json(&c, Method::GET, &create, None).await;
    assert_eq!(r.status(), 405);
    udr.stop().await;
}

// ---- EIR entries -----------------------------------------------------------------------------

async fn eir_status(udr: &TestUdr, query: &str) -> (u16, Value) {
    let r = get(&client(), &udr.url(&format!("/n5g-eir-eic/v1/equipment-status?{query}"))).await;
    (r.status().as_u16(), body(&r))
}

async fn eir_imeis_lifecycle() {
    let dir = common::state_dir();
    let udr = TestUdr::start(dir.path(), UdrConfig::default()).await;
    let c = client();
    let imeis = udr.url("/udr-prov/v1/eir/imeis");
    let one = |id: &str| udr.url(&format!("/udr-prov/v1/eir/imeis/{id}"));
    let pei = "pei=imei-352099001761481&supi=imsi-001010000000002";

    let r = send_json(
        &c,
        Method::POST,
        &imeis,
        Some(&json!({"imei": "352099001761481", "status": "GREYLISTED"})),
    )
    .await;
    assert_eq!(r.status(), 201, "{}", body(&r));
    assert_eq!(r.header("location"), Some(one("35209900176148").as_str()));
    assert_eq!(body(&r), json!({"imei": "35209900176148", "status": "GREYLISTED"}));
    assert_prov("EirImeiEntry", &body(&r));
    assert_eq!(eir_status(&udr, pei).await, (200, json!({"status": "GREYLISTED"})));
    let r = send_json(
        &c,
        Method::POST,
        &imeis,
        Some(&json!({"imei": "35209900176148", "status": "BLACKLISTED"})),
    )
    .await;
    assert_eq!(params(&problem(&r, 409, "ENTRY_EXISTS")), ["/imei"]);

    // Read by 14 or 15 digits; replace status and binding.
    for id in ["35209900176148", "352099001761481"] {
        let r = get(&c, &one(id)).await;
        assert_eq!(body(&r)["status"], "GREYLISTED", "{id}");
    }
    let bound = json!({"status": "WHITELISTED", "supis": ["imsi-001010000000001"], "gpsis": ["msisdn-33600000001", "extid-a@b"]});
    let r = send_json(&c, Method::PUT, &one("352099001761481"), Some(&bound)).await;
    assert_eq!(r.status(), 200, "{}", body(&r));
    let mut expected = bound.clone();
    expected["imei"] = "35209900176148".into();
    assert_eq!(body(&r), expected);
    assert_prov("EirImeiEntry", &body(&r));
    assert_eq!(body(&get(&c, &one("35209900176148")).await), expected);
    // Bound to imsi-...01, so imsi-...02 is a mismatch: BLACKLISTED by default.
    assert_eq!(eir_status(&udr, pei).await, (200, json!({"status": "BLACKLISTED"})));
    assert_eq!(
        eir_status(&udr, "pei=imei-352099001761481&supi=imsi-001010000000001").await.1["status"],
        "WHITELISTED"
    );

    // Errors.
    let r = send_json(
        &c,
        Method::PUT,
        &one("35209900176148"),
        Some(&json!({"imei": "35209900176149", "status": "WHITELISTED"})),
    )
    .await;
    assert_eq!(params(&problem(&r, 400, "MANDATORY_IE_INCORRECT")), ["/imei"]);
    let r =
        send_json(&c, Method::PUT, &one("35209900176149"), Some(&json!({"status": "WHITELISTED"})))
            .await;
    problem(&r, 404, "RESOURCE_NOT_FOUND");
    let r = send_json(&c, Method::POST, &imeis, Some(&json!({"imei": "352099001761489", "status": "RED", "supis": ["imsi-1"], "gpsis": ["msisdn-33600000001", "msisdn-33600000001"], "tac": 1}))).await;
    let p = problem(&r, 400, "MANDATORY_IE_INCORRECT");
    assert_eq!(params(&p), ["/tac", "/imei", "/status", "/supis/0", "/gpsis/1"]);
    let r = send_json(&c, Method::POST, &imeis, Some(&json!({"status": "BLACKLISTED"}))).await;
    assert_eq!(params(&problem(&r, 400, "MANDATORY_IE_MISSING")), ["/imei"]);
    for bad in ["3520990017614", "352099001761482", "abc"] {
        let r = get(&c, &one(bad)).await;
        assert_eq!(params(&problem(&r, 400, "MANDATORY_IE_INCORRECT")), ["imei"], "{bad}");
    }

    let r = send_json(&c, Method::DELETE, &one("35209900176148"), None).await;
    assert_eq!(r.status(), 204);
    problem(&get(&c, &one("35209900176148")).await, 404, "RESOURCE_NOT_FOUND");
    problem(
        &send_json(&c, Method::DELETE, &one("35209900176148"), None).await,
        404,
        "RESOURCE_NOT_FOUND",
    );
    assert_eq!(eir_status(&udr, pei).await.1["cause"], "ERROR_EQUIPMENT_UNKNOWN");
    udr.stop().await;
}

async fn eir_ranges_lifecycle() {
    let dir = common::state_dir();
    let udr = TestUdr::start(dir.path(), UdrConfig::default()).await;
    let c = client();
    let ranges = udr.url("/udr-prov/v1/eir/imei-ranges");
    let one = |id: &str| udr.url(&format!("/udr-prov/v1/eir/imei-ranges/{id}"));
    let tac = json!({"start": "35209900000000", "end": "35209900999999", "status": "BLACKLISTED"});
    let r = send_json(&c, Method::POST, &ranges, Some(&tac)).await;
    assert_eq!(r.status(), 201, "{}", body(&r));
    assert_eq!(r.header("location"), Some(one("35209900000000").as_str()));
    assert_eq!(body(&r), tac);
    assert_prov("EirImeiRange", &body(&r));
    let next = json!({"start": "35209901000000", "end": "35209901999999", "status": "GREYLISTED", "supis": ["imsi-001010000000001"]});
    assert_eq!(send_json(&c, Method::POST, &ranges, Some(&next)).await.status(), 201);
    assert_eq!(eir_status(&udr, "pei=imeisv-3520990055555501").await.1["status"], "BLACKLISTED");
    assert_eq!(eir_status(&udr, "pei=imeisv-3520990155555501").await.1["status"], "GREYLISTED");
    assert_eq!(
        eir_status(&udr, "pei=imeisv-3520990155555501&supi=imsi-001010000000003").await.1["status"],
        "BLACKLISTED"
    );

    // Overlaps and duplicates.
    let r = send_json(
        &c,
        Method::POST,
        &ranges,
        Some(&json!({"start": "35209900500000", "end": "35209900600000", "status": "WHITELISTED"})),
    )
    .await;
    let p = problem(&r, 409, "RANGE_OVERLAP");
    assert!(p["detail"].as_str().unwrap().contains("35209900000000..35209900999999"), "{p}");
    let r = send_json(
        &c,
        Method::POST,
        &ranges,
        Some(&json!({"start": "35209899000000", "end": "35209902000000", "status": "WHITELISTED"})),
    )
    .await;
    problem(&r, 409, "RANGE_OVERLAP");
    let r = send_json(
        &c,
        Method::POST,
        &ranges,
        Some(&json!({"start": "35209900000000", "end": "35209900000001", "status": "WHITELISTED"})),
    )
    .await;
    problem(&r, 409, "ENTRY_EXISTS");
    let r = send_json(
        &c,
        Method::PUT,
        &one("35209900000000"),
        Some(&json!({"end": "35209901000000", "status": "BLACKLISTED"})),
    )
    .await;
    problem(&r, 409, "RANGE_OVERLAP");
    let r = send_json(
        &c,
        Method::POST,
        &ranges,
        Some(&json!({"start": "35209900000009", "end": "35209900000001", "status": "WHITELISTED"})),
    )
    .await;
    assert_eq!(params(&problem(&r, 400, "MANDATORY_IE_INCORRECT")), ["/end"]);
    let r = send_json(
        &c,
        Method::PUT,
        &one("35209902000000"),
        Some(&json!({"end": "35209902000001", "status": "BLACKLISTED"})),
    )
    .await;
    problem(&r, 404, "RESOURCE_NOT_FOUND");
    let r = send_json(
        &c,
        Method::PUT,
        &one("35209900000000"),
        Some(&json!({"start": "35209900000001", "end": "35209900000002", "status": "BLACKLISTED"})),
    )
    .await;
    assert_eq!(params(&problem(&r, 400, "MANDATORY_IE_INCORRECT")), ["/start"]);

    // Shrink the first range: its tail becomes unknown.
    let shrunk =
        json!({"start": "35209900000000", "end": "35209900499999", "status": "WHITELISTED"});
    let r = send_json(
        &c,
        Method::PUT,
        &one("352099000000006"),
        Some(&json!({"end": "35209900499999", "status": "WHITELISTED"})),
    )
    .await;
    assert_eq!(r.status(), 200, "{}", body(&r));
    assert_eq!(body(&r), shrunk);
    assert_eq!(body(&get(&c, &one("35209900000000")).await), shrunk);
    assert_eq!(
        eir_status(&udr, "pei=imeisv-3520990055555501").await.1["cause"],
        "ERROR_EQUIPMENT_UNKNOWN"
    );
    assert_eq!(eir_status(&udr, "pei=imeisv-3520990045555501").await.1["status"], "WHITELISTED");

    assert_eq!(send_json(&c, Method::DELETE, &one("35209900000000"), None).await.status(), 204);
    problem(&get(&c, &one("35209900000000")).await, 404, "RESOURCE_NOT_FOUND");
    problem(
        &send_json(&c, Method::DELETE, &one("35209900000000"), None).await,
        404,
        "RESOURCE_NOT_FOUND",
    );
    let r = get(&c, &one("35209900")).await;
    assert_eq!(params(&problem(&r, 400, "MANDATORY_IE_INCORRECT")), ["start"]);
    udr.stop().await;
}

/// Lists are capped (`[udr.provisioning]`): at the limit a body works; past it, however long,
/// it is one invalid parameter naming the list (its items are not checked one by one).
async fn list_limits() {
    let dir = common::state_dir();
    let udr = TestUdr::start(dir.path(), UdrConfig::default()).await;
    let c = client();
    let ids = |n: usize| -> Vec<String> { (0..n).map(|i| format!("imsi-0010{i:011}")).collect() };
    let slf = udr.url("/udr-prov/v1/slf-entries");
    let entry = |n| json!({"subscriberIds": ids(n), "nfGroupIds": {"UDM": "udm-1"}});
    let r = send_json(&c, Method::POST, &slf, Some(&entry(80_000))).await;
    let p = problem(&r, 400, "MANDATORY_IE_INCORRECT");
    assert_eq!(params(&p), ["/subscriberIds"]);
    assert!(p["invalidParams"][0]["reason"].as_str().unwrap().contains("1 to 32"), "{p}");
    let r = send_json(&c, Method::POST, &slf, Some(&entry(32))).await;
    assert_eq!(r.status().as_u16(), 201);

    let imeis = udr.url("/udr-prov/v1/eir/imeis");
    let eir = |imei: &str, n| json!({"imei": imei, "status": "BLACKLISTED", "supis": ids(n)});
    let r = send_json(&c, Method::POST, &imeis, Some(&eir("35209900176148", 80_000))).await;
    let p = problem(&r, 400, "MANDATORY_IE_INCORRECT");
    assert_eq!(params(&p), ["/supis"]);
    let r = send_json(&c, Method::POST, &imeis, Some(&eir("35209900176148", 100))).await;
    assert_eq!(r.status().as_u16(), 201, "{}", body(&r));
    udr.stop().await;
}

testkit::on_both_backends!(
    the_openapi_document_matches_the_routes,
    slf_entries_lifecycle,
    slf_entry_bodies_and_paths_are_checked,
    eir_imeis_lifecycle,
    eir_ranges_lifecycle,
    list_limits,
);
