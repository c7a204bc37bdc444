//! Nudr_DataRepository policy data (N36) over real sockets: every resource of
//! TS29519_Policy_Data.yaml and its methods, their error paths, ETag / If-Match / If-None-Match,
//! merge and JSON patch, and the provisioning API that fills them. Answers are validated against
//! the 3GPP schemas.

mod common;

use common::*;
use http::Method;
use serde_json::{json, Value};

const UE: &str = "imsi-001010000000001";

fn n36(path: &str) -> String {
    format!("/nudr-dr/v2/policy-data/{path}")
}
fn prov(path: &str) -> String {
    format!("/udr-prov/v1/policy-data/{path}")
}

/// An SmPolicyData like the reference call model's (T4b): one slice, two DNNs with PRAs,
/// charging and BDT references, usage monitoring limits and data.
fn sm_data() -> Value {
    json!({
        "smPolicySnssaiData": {
            "1-000001": {
                "snssai": {"sst": 1, "sd": "000001"},
                "smPolicyDnnData": {
                    "internet": {
                        "dnn": "internet",
                        "allowedServices": ["web", "video"],
                        "subscCats": ["gold"],
                        "gbrUl": "10 Mbps", "gbrDl": "20 Mbps",
                        "adcSupport": false, "online": true, "offline": false,
                        "chfInfo": {"primaryChfAddress": "http://chf1.example.com"},
                        "refUmDataLimitIds": {"lim1": {"limitId": "lim1", "monkey": ["mk1"]}},
                        "praInfos": {"pra1": {"praId": "pra1", "trackingAreaList": [
                            {"plmnId": {"mcc": "001", "mnc": "01"}, "tac": "0001"}]}},
                        "bdtRefIds": {"b1": "bdt-1"}
                    },
                    "ims": {"dnn": "ims", "imsSignallingPrio": true}
                }
            }
        },
        "umDataLimits": {"lim1": {"limitId": "lim1", "umLevel": "SESSION_LEVEL",
            "usageLimit": {"totalVolume": 1000000000}, "resetPeriod": {"period": "MONTHLY"}}},
        "umData": {"lim1": {"limitId": "lim1", "allowedUsage": {"totalVolume": 500000000}}}
    })
}

fn profile() -> Value {
    json!({
        "amData": {"subscCats": ["gold"]},
        "uePolicySet": {"subscCats": ["gold"], "upsis": ["upsi-1"],
            "uePolicySections": {"s1": {"uePolicySectionInfo": "aGVsbG8=", "upsi": "upsi-1"}}},
        "smData": sm_data(),
        "umData": {"um1": {"limitId": "um1", "allowedUsage": {"totalVolume": 42}}},
        "operatorSpecificData": {"tariff": {"dataType": "string", "value": "t1"}}
    })
}

async fn start() -> (tempfile::TempDir, TestUdr) {
    let dir = common::state_dir();
    let udr = TestUdr::start(dir.path(), policy_config()).await;
    (dir, udr)
}

async fn provisioned_profile_is_served_on_n36() {
    let (_dir, udr) = start().await;
    let c = client();
    let r = put_json(&c, &udr.url(&prov(&format!("ues/{UE}"))), &profile()).await;
    assert_eq!(r.status(), 201, "{:?}", body(&r));
    assert!(r.header("location").unwrap().ends_with(&prov(&format!("ues/{UE}"))));
    let profile_tag = r.header("etag").unwrap().to_owned();
    assert_eq!(body(&r), profile());

    let r = get(&c, &udr.url(&n36(&format!("ues/{UE}/am-data")))).await;
    assert_eq!(r.status(), 200);
    assert_eq!(body(&r), profile()["amData"]);
    assert_valid("TS29519_Policy_Data", "AmPolicyData", &body(&r));
    assert!(r.header("etag").unwrap().starts_with('"'));

    let r = get(&c, &udr.url(&n36(&format!("ues/{UE}/ue-policy-set")))).await;
    assert_valid("TS29519_Policy_Data", "UePolicySet", &body(&r));
    let r = get(&c, &udr.url(&n36(&format!("ues/{UE}/sm-data")))).await;
    assert_eq!(body(&r), sm_data());
    assert_valid("TS29519_Policy_Data", "SmPolicyData", &body(&r));
    let r = get(&c, &udr.url(&n36(&format!("ues/{UE}/sm-data/um1")))).await;
    assert_eq!(body(&r), json!({"limitId": "um1", "allowedUsage": {"totalVolume": 42}}));
    assert_valid("TS29519_Policy_Data", "UsageMonData", &body(&r));
    let r = get(&c, &udr.url(&n36(&format!("ues/{UE}/operator-specific-data")))).await;
    assert_eq!(body(&r), profile()["operatorSpecificData"]);

    // ReadPolicyData: every set, or the subsets asked for.
    let r = get(&c, &udr.url(&n36(&format!("ues/{UE}")))).await;
    assert_eq!(r.status(), 200);
    let all = body(&r);
    assert_valid("TS29519_Policy_Data", "PolicyDataForIndividualUe", &all);
    assert_eq!(all["smPolicyDataSet"], sm_data());
    assert_eq!(all["umData"]["um1"]["limitId"], "um1");
    assert_eq!(all["operatorSpecificDataSet"]["tariff"]["value"], "t1");
    assert_eq!(r.header("etag"), Some(profile_tag.as_str()), "same data, same composite ETag");
    let r = get(&c, &udr.url(&n36(&format!("ues/{UE}?data-subset-names=AM_POLICY_DATA,UM_DATA"))))
        .await;
    let some = body(&r);
    assert_eq!(some.as_object().unwrap().keys().collect::<Vec<_>>(), ["amPolicyDataSet", "umData"]);
    let p = problem(
        &get(&c, &udr.url(&n36(&format!("ues/{UE}?data-subset-names=AM_POLICY_DATA")))).await,
        400,
        "INVALID_QUERY_PARAM",
    );
    assert_eq!(params(&p), ["data-subset-names"]);
    problem(
        &get(&c, &udr.url(&n36(&format!("ues/{UE}?data-subset-names=AM_POLICY_DATA,NOPE")))).await,
        400,
        "INVALID_QUERY_PARAM",
    );

    // The provisioning view, and its removal.
    let r = get(&c, &udr.url(&prov(&format!("ues/{UE}")))).await;
    assert_eq!(body(&r), profile());
    assert_eq!(r.header("etag"), Some(profile_tag.as_str()));
    assert_eq!(delete(&c, &udr.url(&prov(&format!("ues/{UE}")))).await.status(), 204);
    problem(&get(&c, &udr.url(&n36(&format!("ues/{UE}/sm-data")))).await, 404, "USER_NOT_FOUND");
    problem(&delete(&c, &udr.url(&prov(&format!("ues/{UE}")))).await, 404, "USER_NOT_FOUND");
    udr.stop().await;
}

async fn ue_errors_name_the_problem() {
    let (_dir, udr) = start().await;
    let c = client();
    let smd = udr.url(&n36(&format!("ues/{UE}/sm-data")));
    // Unknown UE, then a known UE without the data set.
    problem(&get(&c, &smd).await, 404, "USER_NOT_FOUND");
    problem(&get(&c, &udr.url(&n36(&format!("ues/{UE}")))).await, 404, "USER_NOT_FOUND");
    problem(&merge_patch(&c, &smd, &json!({"umData": null})).await, 404, "USER_NOT_FOUND");
    put_json(&c, &udr.url(&prov(&format!("ues/{UE}"))), &json!({"amData": {}})).await;
    problem(&get(&c, &smd).await, 404, "DATA_NOT_FOUND");
    problem(&merge_patch(&c, &smd, &json!({"umData": null})).await, 404, "DATA_NOT_FOUND");
    problem(
        &delete(&c, &udr.url(&n36(&format!("ues/{UE}/sm-data/x")))).await,
        404,
        "DATA_NOT_FOUND",
    );
    // A ueId that is neither SUPI nor GPSI.
    for bad in ["imsi-12", "bob", "msisdn-12ab"] {
        let p = problem(
            &get(&c, &udr.url(&n36(&format!("ues/{bad}/sm-data")))).await,
            400,
            "MANDATORY_IE_INCORRECT",
        );
        assert_eq!(params(&p), ["ueId"]);
    }
    // Bodies: malformed JSON, wrong type, wrong media type, invalid attributes.
    let r = send(&c, Method::PUT, &smd, Some("application/json"), b"{\"smPolicy", &[]).await;
    problem(&r, 400, "INVALID_MSG_FORMAT");
    let r = send(&c, Method::PUT, &smd, Some("text/plain"), b"{}", &[]).await;
    problem(&r, 415, "UNSUPPORTED_MEDIA_TYPE");
    let r = send(&c, Method::PATCH, &smd, Some("application/json"), b"{}", &[]).await;
    problem(&r, 415, "UNSUPPORTED_MEDIA_TYPE");
    let r = put_json(&c, &smd, &json!({"umData": {"l": {"limitId": 5}}})).await;
    let p = problem(&r, 400, "MANDATORY_IE_MISSING");
    let mut got = params(&p);
    got.sort();
    assert_eq!(got, ["/smPolicySnssaiData", "/umData/l/limitId"]);
    // Query parameters this resource does not define.
    problem(&get(&c, &format!("{smd}?foo=1")).await, 400, "INVALID_QUERY_PARAM");
    // Methods the resource does not have.
    let r = c.post(&smd).send().await.unwrap();
    assert_eq!(r.status(), 405);
    let r = send(
        &c,
        Method::PUT,
        &udr.url(&n36(&format!("ues/{UE}/am-data"))),
        Some("application/json"),
        b"{}",
        &[],
    )
    .await;
    assert_eq!(r.status(), 405);
    // Provisioning bodies.
    let pu = udr.url(&prov(&format!("ues/{UE}")));
    problem(&put_json(&c, &pu, &json!({})).await, 400, "MANDATORY_IE_MISSING");
    let p = problem(
        &put_json(&c, &pu, &json!({"smData": {}, "colour": "red"})).await,
        400,
        "MANDATORY_IE_MISSING",
    );
    let mut got = params(&p);
    got.sort();
    assert_eq!(got, ["/colour", "/smData/smPolicySnssaiData"]);
    problem(&merge_patch(&c, &pu, &json!({"amData": null})).await, 400, "MANDATORY_IE_INCORRECT");
    problem(&get(&c, &udr.url(&prov("ues/nobody"))).await, 400, "MANDATORY_IE_INCORRECT");
    udr.stop().await;
}

async fn sm_data_etags_patches_and_filters() {
    let (_dir, udr) = start().await;
    let c = client();
    let smd = udr.url(&n36(&format!("ues/{UE}/sm-data")));
    // PUT (an extension the reference call model uses): created, then replaced.
    let r = put_json(&c, &smd, &sm_data()).await;
    assert_eq!(r.status(), 201, "{:?}", body(&r));
    assert_eq!(r.header("location").unwrap(), smd);
    let t1 = r.header("etag").unwrap().to_owned();
    let r = get(&c, &smd).await;
    assert_eq!(r.header("etag"), Some(t1.as_str()));
    // If-None-Match: 304 while unchanged.
    let r = send(&c, Method::GET, &smd, None, b"", &[("if-none-match", &t1)]).await;
    assert_eq!(r.status(), 304);
    assert!(r.body().is_empty());
    let r = send(&c, Method::GET, &smd, None, b"", &[("if-none-match", "\"other\"")]).await;
    assert_eq!(r.status(), 200);
    // If-Match on a GET: 412 unless it matches (the spec lists 412 for GETs).
    let r = send(&c, Method::GET, &smd, None, b"", &[("if-match", "\"other\"")]).await;
    problem(&r, 412, "PRECONDITION_FAILED");
    assert_eq!(r.header("etag"), Some(t1.as_str()));
    let r = send(&c, Method::GET, &smd, None, b"", &[("if-match", &t1)]).await;
    assert_eq!(r.status(), 200);

    // Merge patch with a stale If-Match: 412 with the current ETag; with the right one: 204.
    let patch =
        json!({"umData": {"lim1": {"limitId": "lim1", "allowedUsage": {"totalVolume": 1}}}});
    let mp = |tag: &str| {
        let body = patch.to_string();
        let tag = tag.to_owned();
        let c = c.clone();
        let smd = smd.clone();
        async move {
            send(
                &c,
                Method::PATCH,
                &smd,
                Some("application/merge-patch+json"),
                body.as_bytes(),
                &[("if-match", &tag)],
            )
            .await
        }
    };
    let r = mp("\"12345\"").await;
    problem(&r, 412, "PRECONDITION_FAILED");
    assert_eq!(r.header("etag"), Some(t1.as_str()));
    let r = mp(&t1).await;
    assert_eq!(r.status(), 204);
    let t2 = r.header("etag").unwrap().to_owned();
    assert_ne!(t1, t2);
    let r = get(&c, &smd).await;
    assert_eq!(body(&r)["umData"]["lim1"]["allowedUsage"]["totalVolume"], 1);
    assert_eq!(body(&r)["umDataLimits"], sm_data()["umDataLimits"], "the rest is kept");
    assert_valid("TS29519_Policy_Data", "SmPolicyData", &body(&r));
    assert_eq!(r.header("etag"), Some(t2.as_str()));
    problem(&mp(&t1).await, 412, "PRECONDITION_FAILED");
    // Per S-NSSAI and DNN only the BDT references may change; the result must stay valid.
    let r = merge_patch(&c, &smd, &json!({"smPolicySnssaiData": {"1-000001": {"snssai": {"sst": 1, "sd": "000001"},
        "smPolicyDnnData": {"internet": {"dnn": "internet", "bdtRefIds": {"b1": null, "b2": "bdt-2"}}}}}}))
    .await;
    assert_eq!(r.status(), 204);
    let dnn = &body(&get(&c, &smd).await)["smPolicySnssaiData"]["1-000001"]["smPolicyDnnData"]
        ["internet"];
    assert_eq!(dnn["bdtRefIds"], json!({"b2": "bdt-2"}));
    assert_eq!(dnn["gbrUl"], "10 Mbps");
    let p = problem(
        &merge_patch(&c, &smd, &json!({"umDataLimits": {}})).await,
        400,
        "MANDATORY_IE_INCORRECT",
    );
    assert_eq!(params(&p), ["/umDataLimits"]);
    let p = problem(
        &merge_patch(&c, &smd, &json!({"smPolicySnssaiData": {"2": {"smPolicyDnnData": {}}}}))
            .await,
        400,
        "MANDATORY_IE_MISSING",
    );
    assert!(params(&p).contains(&"/smPolicySnssaiData/2/snssai".to_owned()), "{p}");
    problem(
        &merge_patch(&c, &smd, &json!({"umData": {"x": {"limitId": 1}}})).await,
        400,
        "MANDATORY_IE_INCORRECT",
    );
    problem(
        &send(&c, Method::PATCH, &smd, Some("application/merge-patch+json"), b"[1", &[]).await,
        400,
        "INVALID_MSG_FORMAT",
    );

    // Filters: S-NSSAI (JSON), DNN, fields.
    let sn = enc(r#"{"sst":1,"sd":"000001"}"#);
    let r = get(&c, &format!("{smd}?snssai={sn}&dnn=ims")).await;
    assert_eq!(r.status(), 200);
    let f = body(&r);
    assert_eq!(
        f["smPolicySnssaiData"]["1-000001"]["smPolicyDnnData"].as_object().unwrap().len(),
        1
    );
    assert_valid("TS29519_Policy_Data", "SmPolicyData", &f);
    problem(
        &get(&c, &format!("{smd}?snssai={}", enc(r#"{"sst":9}"#))).await,
        404,
        "DATA_NOT_FOUND",
    );
    problem(&get(&c, &format!("{smd}?snssai=notjson")).await, 400, "INVALID_QUERY_PARAM");
    let r = get(&c, &format!("{smd}?fields=umDataLimits")).await;
    assert_eq!(body(&r), json!({"umDataLimits": sm_data()["umDataLimits"]}));

    // PUT with If-None-Match: * only creates; a write with If-Match: * needs the resource.
    let r = send(
        &c,
        Method::PUT,
        &smd,
        Some("application/json"),
        sm_data().to_string().as_bytes(),
        &[("if-none-match", "*")],
    )
    .await;
    problem(&r, 412, "PRECONDITION_FAILED");
    // DELETE (an extension too) with a precondition, then without.
    let tag = get(&c, &smd).await.header("etag").unwrap().to_owned();
    problem(
        &send(&c, Method::DELETE, &smd, None, b"", &[("if-match", "\"1\"")]).await,
        412,
        "PRECONDITION_FAILED",
    );
    assert_eq!(
        send(&c, Method::DELETE, &smd, None, b"", &[("if-match", &tag)]).await.status(),
        204
    );
    problem(&get(&c, &smd).await, 404, "USER_NOT_FOUND");
    let r = send(
        &c,
        Method::PUT,
        &smd,
        Some("application/json"),
        sm_data().to_string().as_bytes(),
        &[("if-match", "*")],
    )
    .await;
    problem(&r, 412, "PRECONDITION_FAILED");
    problem(
        &send(&c, Method::GET, &smd, None, b"", &[("if-match", "nonsense")]).await,
        400,
        "UNSPECIFIED_MSG_FAILURE",
    );
    udr.stop().await;
}

async fn ue_policy_set_usage_monitoring_and_operator_specific_data() {
    let (_dir, udr) = start().await;
    let c = client();
    let ups = udr.url(&n36(&format!("ues/{UE}/ue-policy-set")));
    let set = json!({"upsis": ["u1"], "andspInd": true, "osIds": ["7c9e6679-7425-40de-944b-e07fc1f90ae7"]});
    let r = put_json(&c, &ups, &set).await;
    assert_eq!(r.status(), 201);
    assert_valid("TS29519_Policy_Data", "UePolicySet", &body(&r));
    let r = put_json(&c, &ups, &set).await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        merge_patch(&c, &ups, &json!({"andspInd": false, "pei": "imei-012345678901234"}))
            .await
            .status(),
        204
    );
    let got = body(&get(&c, &ups).await);
    assert_eq!(
        (got["andspInd"].clone(), got["pei"].clone()),
        (json!(false), json!("imei-012345678901234"))
    );
    let p = problem(
        &merge_patch(&c, &ups, &json!({"subscCats": ["x"]})).await,
        400,
        "MANDATORY_IE_INCORRECT",
    );
    assert_eq!(params(&p), ["/subscCats"]);
    problem(
        &put_json(&c, &ups, &json!({"osIds": ["not-a-uuid"]})).await,
        400,
        "MANDATORY_IE_INCORRECT",
    );

    // Usage monitoring resources under sm-data.
    let um = udr.url(&n36(&format!("ues/{UE}/sm-data/lim%201")));
    let umd = json!({"limitId": "lim 1", "allowedUsage": {"totalVolume": 10}, "resetTime": "2030-01-01T00:00:00Z"});
    let r = put_json(&c, &um, &umd).await;
    assert_eq!(r.status(), 201);
    assert!(r.header("location").unwrap().ends_with("/sm-data/lim%201"));
    assert_eq!(body(&get(&c, &um).await), umd);
    problem(&put_json(&c, &um, &json!({"allowedUsage": {}})).await, 400, "MANDATORY_IE_MISSING");
    assert_eq!(delete(&c, &um).await.status(), 204);
    problem(&get(&c, &um).await, 404, "DATA_NOT_FOUND");

    // Operator specific data: a map of containers, JSON patch, fields.
    let osd = udr.url(&n36(&format!("ues/{UE}/operator-specific-data")));
    let data = json!({"tariff": {"dataType": "string", "value": "t1"}, "quota": {"dataType": "integer", "value": 5}});
    assert_eq!(put_json(&c, &osd, &data).await.status(), 201);
    let jp = |ops: Value| {
        let c = c.clone();
        let osd = osd.clone();
        async move {
            send(
                &c,
                Method::PATCH,
                &osd,
                Some("application/json-patch+json"),
                ops.to_string().as_bytes(),
                &[],
            )
            .await
        }
    };
    let r = jp(json!([{"op": "replace", "path": "/quota/value", "value": 6}, {"op": "remove", "path": "/tariff"}])).await;
    assert_eq!(r.status(), 204);
    assert_eq!(body(&get(&c, &osd).await), json!({"quota": {"dataType": "integer", "value": 6}}));
    // A failing operation changes nothing (409); a result that is not a valid map is a 400.
    let r = jp(json!([{"op": "replace", "path": "/quota/value", "value": 7}, {"op": "test", "path": "/quota/value", "value": 0}])).await;
    assert_eq!(r.status(), 409);
    assert_eq!(body(&get(&c, &osd).await)["quota"]["value"], 6);
    problem(
        &jp(json!([{"op": "remove", "path": "/quota/dataType"}])).await,
        400,
        "MANDATORY_IE_MISSING",
    );
    problem(&jp(json!({"op": "remove"})).await, 400, "MANDATORY_IE_INCORRECT");
    let r = send(&c, Method::PATCH, &osd, Some("application/merge-patch+json"), b"{}", &[]).await;
    problem(&r, 415, "UNSUPPORTED_MEDIA_TYPE");
    let r = get(&c, &format!("{osd}?fields=quota")).await;
    assert_eq!(body(&r), json!({"quota": {"dataType": "integer", "value": 6}}));
    problem(&get(&c, &format!("{osd}?fields=none")).await, 404, "DATA_NOT_FOUND");
    assert_eq!(delete(&c, &osd).await.status(), 204);
    problem(&get(&c, &osd).await, 404, "DATA_NOT_FOUND");
    udr.stop().await;
}

async fn plmn_sponsor_bdt_slice_and_mbs_data() {
    let (_dir, udr) = start().await;
    let c = client();
    // PLMN UE policy set: provisioned, read on N36.
    let r =
        put_json(&c, &udr.url(&prov("plmns/00101/ue-policy-set")), &json!({"upsis": ["p1"]})).await;
    assert_eq!(r.status(), 201);
    let r = get(&c, &udr.url(&n36("plmns/00101/ue-policy-set"))).await;
    assert_eq!(body(&r), json!({"upsis": ["p1"]}));
    problem(&get(&c, &udr.url(&n36("plmns/00102/ue-policy-set"))).await, 404, "DATA_NOT_FOUND");
    problem(
        &get(&c, &udr.url(&n36("plmns/0010/ue-policy-set"))).await,
        400,
        "MANDATORY_IE_INCORRECT",
    );

    // Sponsor connectivity.
    put_json(
        &c,
        &udr.url(&prov("sponsor-connectivity-data/sp1")),
        &json!({"aspIds": ["asp1", "asp2"]}),
    )
    .await;
    let r = get(&c, &udr.url(&n36("sponsor-connectivity-data/sp1"))).await;
    assert_valid("TS29519_Policy_Data", "SponsorConnectivityData", &body(&r));
    problem(
        &put_json(&c, &udr.url(&prov("sponsor-connectivity-data/sp2")), &json!({})).await,
        400,
        "MANDATORY_IE_MISSING",
    );
    assert_eq!(delete(&c, &udr.url(&prov("sponsor-connectivity-data/sp1"))).await.status(), 204);
    problem(&get(&c, &udr.url(&n36("sponsor-connectivity-data/sp1"))).await, 404, "DATA_NOT_FOUND");

    // BDT data: N36 create, read, patch, collection, delete.
    let bdt = |id: &str| {
        json!({"aspId": "asp1", "bdtRefId": id, "transPolicy": {"transPolicyId": 1, "ratingGroup": 7,
        "recTimeInt": {"startTime": "2030-01-01T00:00:00Z", "stopTime": "2030-01-01T06:00:00Z"}}})
    };
    for id in ["r1", "r2"] {
        let r = put_json(&c, &udr.url(&n36(&format!("bdt-data/{id}"))), &bdt(id)).await;
        assert_eq!(r.status(), 201);
        assert_valid("TS29519_Policy_Data", "BdtData", &body(&r));
    }
    let r = merge_patch(&c, &udr.url(&n36("bdt-data/r1")), &json!({"bdtpStatus": "INVALID"})).await;
    assert_eq!(r.status(), 200);
    assert_eq!(body(&r)["bdtpStatus"], "INVALID");
    assert!(r.header("etag").is_some());
    problem(
        &merge_patch(&c, &udr.url(&n36("bdt-data/r1")), &json!({"aspId": "x"})).await,
        400,
        "MANDATORY_IE_INCORRECT",
    );
    let all = body(&get(&c, &udr.url(&n36("bdt-data"))).await);
    assert_eq!(all.as_array().unwrap().len(), 2);
    for b in all.as_array().unwrap() {
        assert_valid("TS29519_Policy_Data", "BdtData", b);
    }
    let some = body(&get(&c, &udr.url(&n36("bdt-data?bdt-ref-ids=r2,r9"))).await);
    assert_eq!(some, json!([bdt("r2")]));
    problem(
        &put_json(&c, &udr.url(&n36("bdt-data/r3")), &json!({"aspId": "a"})).await,
        400,
        "MANDATORY_IE_MISSING",
    );
    assert_eq!(delete(&c, &udr.url(&n36("bdt-data/r1"))).await.status(), 204);
    problem(&get(&c, &udr.url(&n36("bdt-data/r1"))).await, 404, "DATA_NOT_FOUND");

    // Slice policy control data: one S-NSSAI, whichever way the URI writes it.
    let r = put_json(
        &c,
        &udr.url(&prov("slice-control-data/1-00000A")),
        &json!({"mbrUl": "1 Gbps", "mbrDl": "2 Gbps"}),
    )
    .await;
    assert_eq!(r.status(), 201);
    assert!(r.header("location").unwrap().ends_with("/slice-control-data/1-00000a"));
    let json_form =
        udr.url(&n36(&format!("slice-control-data/{}", enc(r#"{"sst":1,"sd":"00000a"}"#))));
    let r = merge_patch(&c, &json_form, &json!({"remainMbrUl": "500 Mbps"})).await;
    assert_eq!(r.status(), 200);
    assert_valid("TS29519_Policy_Data", "SlicePolicyData", &body(&r));
    assert_eq!(
        body(&get(&c, &udr.url(&n36("slice-control-data/1-00000a"))).await)["remainMbrUl"],
        "500 Mbps"
    );
    problem(&merge_patch(&c, &json_form, &json!({})).await, 400, "MANDATORY_IE_MISSING");
    problem(
        &merge_patch(&c, &json_form, &json!({"mbrUl": "1 bps"})).await,
        400,
        "MANDATORY_IE_INCORRECT",
    );
    problem(
        &get(&c, &udr.url(&n36("slice-control-data/300"))).await,
        400,
        "MANDATORY_IE_INCORRECT",
    );
    problem(
        &merge_patch(&c, &udr.url(&n36("slice-control-data/2")), &json!({"remainMbrUl": "1 bps"}))
            .await,
        404,
        "DATA_NOT_FOUND",
    );

    // MBS session policy control data, addressed by a JSON MbsSessPolDataId.
    let id =
        r#"{"mbsSessionId":{"tmgi":{"mbsServiceId":"abc123","plmnId":{"mcc":"001","mnc":"01"}}}}"#;
    let r = put_json(
        &c,
        &udr.url(&prov(&format!("mbs-session-pol-data/{}", enc(id)))),
        &json!({"5qis": [1, 5], "maxMbsArpLevel": 3}),
    )
    .await;
    assert_eq!(r.status(), 201, "{:?}", body(&r));
    let reordered =
        r#"{"mbsSessionId":{"tmgi":{"plmnId":{"mnc":"01","mcc":"001"},"mbsServiceId":"abc123"}}}"#;
    let r = get(&c, &udr.url(&n36(&format!("mbs-session-pol-data/{}", enc(reordered))))).await;
    assert_eq!(r.status(), 200);
    assert_valid("TS29519_Policy_Data", "MbsSessPolCtrlData", &body(&r));
    problem(
        &get(&c, &udr.url(&n36("mbs-session-pol-data/x"))).await,
        400,
        "MANDATORY_IE_INCORRECT",
    );
    problem(
        &put_json(
            &c,
            &udr.url(&prov(&format!("mbs-session-pol-data/{}", enc(id)))),
            &json!({"maxMbsArpLevel": 16}),
        )
        .await,
        400,
        "MANDATORY_IE_INCORRECT",
    );
    udr.stop().await;
}

async fn provisioning_patch_and_etags() {
    let (_dir, udr) = start().await;
    let c = client();
    let pu = udr.url(&prov(&format!("ues/{UE}")));
    let r = put_json(&c, &pu, &profile()).await;
    let t1 = r.header("etag").unwrap().to_owned();
    // Replace: data sets absent from the new profile go.
    let r = send(
        &c,
        Method::PUT,
        &pu,
        Some("application/json"),
        json!({"smData": sm_data()}).to_string().as_bytes(),
        &[("if-match", &t1)],
    )
    .await;
    assert_eq!(r.status(), 200, "{:?}", body(&r));
    let t2 = r.header("etag").unwrap().to_owned();
    assert_ne!(t1, t2);
    problem(&get(&c, &udr.url(&n36(&format!("ues/{UE}/am-data")))).await, 404, "DATA_NOT_FOUND");
    problem(
        &get(&c, &udr.url(&n36(&format!("ues/{UE}/sm-data/um1")))).await,
        404,
        "DATA_NOT_FOUND",
    );
    // Merge patch: add a data set, remove usage data inside smData.
    let patch = json!({"amData": {"subscCats": ["silver"]}, "smData": {"umData": null}});
    let r = send(
        &c,
        Method::PATCH,
        &pu,
        Some("application/merge-patch+json"),
        patch.to_string().as_bytes(),
        &[("if-match", &t1)],
    )
    .await;
    problem(&r, 412, "PRECONDITION_FAILED");
    assert_eq!(r.header("etag"), Some(t2.as_str()));
    let r = send(
        &c,
        Method::PATCH,
        &pu,
        Some("application/merge-patch+json"),
        patch.to_string().as_bytes(),
        &[("if-match", &t2)],
    )
    .await;
    assert_eq!(r.status(), 200, "{:?}", body(&r));
    let got = body(&r);
    assert_eq!(got["amData"], json!({"subscCats": ["silver"]}));
    assert!(got["smData"].get("umData").is_none());
    // The N36 view changed with it, and its ETag with it.
    let sm = get(&c, &udr.url(&n36(&format!("ues/{UE}/sm-data")))).await;
    assert!(body(&sm).get("umData").is_none());
    let t3 = r.header("etag").unwrap().to_owned();
    let r = send(&c, Method::GET, &pu, None, b"", &[("if-none-match", &t3)]).await;
    assert_eq!(r.status(), 304);
    // An N36 write changes the profile's ETag.
    assert_eq!(
        merge_patch(
            &c,
            &udr.url(&n36(&format!("ues/{UE}/sm-data"))),
            &json!({"umData": {"a": {"limitId": "a"}}})
        )
        .await
        .status(),
        204
    );
    let r = send(&c, Method::GET, &pu, None, b"", &[("if-none-match", &t3)]).await;
    assert_eq!(r.status(), 200);
    problem(
        &send(&c, Method::DELETE, &pu, None, b"", &[("if-match", &t3)]).await,
        412,
        "PRECONDITION_FAILED",
    );
    // Create-only.
    let r = send(
        &c,
        Method::PUT,
        &pu,
        Some("application/json"),
        profile().to_string().as_bytes(),
        &[("if-none-match", "*")],
    )
    .await;
    problem(&r, 412, "PRECONDITION_FAILED");
    problem(
        &merge_patch(&c, &udr.url(&prov("ues/imsi-001019999999999")), &json!({"amData": {}})).await,
        404,
        "USER_NOT_FOUND",
    );
    udr.stop().await;
}

async fn bulk_load_function_for_import() {
    let (_dir, udr) = start().await;
    let profiles: Vec<(String, Value)> = (0..50)
        .map(|i| (format!("imsi-0010100000001{i:02}"), json!({"smData": sm_data()})))
        .collect();
    let (n, _) = udr.udr.stores.policy.put_profiles(profiles).await.unwrap();
    assert_eq!(n, 50);
    let c = client();
    let r = get(&c, &udr.url(&n36("ues/imsi-001010000000149/sm-data"))).await;
    assert_eq!(body(&r), sm_data());
    // A bad profile fails the whole call, naming it; nothing of it is written.
    let bad = vec![
        ("imsi-001010000000201".to_owned(), json!({"amData": {}})),
        ("imsi-001010000000202".to_owned(), json!({"smData": {}})),
    ];
    let e = udr.udr.stores.policy.put_profiles(bad).await.unwrap_err();
    assert!(e.to_string().contains("profile 1 (imsi-001010000000202)"), "{e}");
    problem(
        &get(&c, &udr.url(&n36("ues/imsi-001010000000201/am-data"))).await,
        404,
        "USER_NOT_FOUND",
    );
    udr.stop().await;
}

/// `OperatorSpecificDataContainer.dataType` is an enum (TS 29.505): a value outside it is a 400
/// naming the field on every path that writes it (N36 PUT and JSON patch, the provisioning
/// profile, which the SOAP profile and the import also go through), over HTTP/2.
async fn operator_specific_data_type_is_an_enum() {
    let (_dir, udr) = start().await;
    let c = client();
    let osd = udr.url(&n36(&format!("ues/{UE}/operator-specific-data")));
    let bad = json!({"tariff": {"dataType": "text", "value": "t1"}});
    let r = put_json(&c, &osd, &bad).await;
    assert_eq!(r.version(), http::Version::HTTP_2);
    let p = problem(&r, 400, "MANDATORY_IE_INCORRECT");
    assert_eq!(params(&p), ["/tariff/dataType"]);
    assert!(p["invalidParams"][0]["reason"].as_str().unwrap().contains("boolean"), "{p}");
    problem(&get(&c, &osd).await, 404, "USER_NOT_FOUND");
    // Each value of the enum is accepted.
    let all = json!({
        "s": {"dataType": "string", "value": "x"}, "i": {"dataType": "integer", "value": 1},
        "n": {"dataType": "number", "value": 1.5}, "b": {"dataType": "boolean", "value": true},
        "o": {"dataType": "object", "value": {}}, "a": {"dataType": "array", "value": []}
    });
    assert_eq!(put_json(&c, &osd, &all).await.status(), 201);
    let ops = json!([{"op": "replace", "path": "/i/dataType", "value": "float"}]);
    let r = send(
        &c,
        Method::PATCH,
        &osd,
        Some("application/json-patch+json"),
        ops.to_string().as_bytes(),
        &[],
    )
    .await;
    let p = problem(&r, 400, "MANDATORY_IE_INCORRECT");
    assert_eq!(params(&p), ["/i/dataType"]);
    assert_eq!(body(&get(&c, &osd).await), all);

    let profile = json!({"operatorSpecificData": {"tariff": {"dataType": "STRING", "value": "t"}}});
    let r = put_json(&c, &udr.url(&prov("ues/imsi-001010000000002")), &profile).await;
    let p = problem(&r, 400, "MANDATORY_IE_INCORRECT");
    assert_eq!(params(&p), ["/operatorSpecificData/tariff/dataType"]);
    udr.stop().await;
}

testkit::on_both_backends!(
    provisioned_profile_is_served_on_n36,
    ue_errors_name_the_problem,
    sm_data_etags_patches_and_filters,
    ue_policy_set_usage_monitoring_and_operator_specific_data,
    plmn_sponsor_bdt_slice_and_mbs_data,
    provisioning_patch_and_etags,
    bulk_load_function_for_import,
    operator_specific_data_type_is_an_enum,
);
