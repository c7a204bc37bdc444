//! Filters as a feed applies them: configurations written as the admin API receives them (JSON),
//! applied to a stream of framed envelopes split as a consumer of MAIN splits it, mixing SBI and
//! Diameter copies of several NFs.

use bytes::{Bytes, BytesMut};
use dd::transforms::filter::{Filter, FilterConfig};
use dd_client::envelope::{encode_framed, Copy, CopyMeta, Frames, Protocol, TriggerPoint};
use serde_json::{json, Value};

/// What the stream holds for one subscriber `n`: an SM policy create at the PCF (request and
/// answer, with the UDR read made while serving it), the BSF registration, and a Gx CCR-I/CCA
/// pair at the PCRF. Subscribers whose number ends in 7 get a 404 from the UDR and a 5030 on Gx.
fn stream(subscribers: u64) -> Bytes {
    let mut out = BytesMut::new();
    let body = br#"{"dnn":"internet","sliceInfo":{"sst":1,"sd":"000001"},"pduSessionId":1}"#;
    let ims = br#"{"dnn":"ims","sliceInfo":{"sst":1},"pduSessionId":2}"#;
    for n in 0..subscribers {
        let supi = format!("imsi-00101{n:010}");
        let imsi = format!("00101{n:010}");
        let gpsi = format!("msisdn-3361{n:07}");
        let bad = n % 10 == 7;
        let mut push =
            |trigger, protocol, nf: &str, service: &str, op: &str, status, id: &str, b: &[u8]| {
                let meta = CopyMeta {
                    trigger,
                    protocol,
                    timestamp_ns: 1_790_000_000_000_000_000 + n * 1_000_000,
                    sequence: n,
                    transaction: n,
                    stream_id: 1,
                    status,
                    nf_type: nf,
                    nf_instance: &format!("{}-1", nf.to_ascii_lowercase()),
                    service,
                    operation: op,
                    method: "POST",
                    path: "",
                    peer: "127.0.0.1:1",
                    supi: id,
                    gpsi: &gpsi,
                    session_id: "",
                };
                encode_framed(&meta, [], b, &mut out).unwrap();
            };
        use Protocol::{Diameter, Http2};
        use TriggerPoint::*;
        let create = "Npcf_SMPolicyControl_Create";
        let sm_body: &[u8] = if n % 2 == 0 { body } else { ims };
        push(IngressRequest, Http2, "PCF", "npcf-smpolicycontrol", create, 0, &supi, sm_body);
        push(EgressRequest, Http2, "PCF", "nudr-dr", "Nudr_DataRepository_Query", 0, &supi, b"");
        let udr_status = if bad { 404 } else { 200 };
        push(
            EgressResponse,
            Http2,
            "PCF",
            "nudr-dr",
            "Nudr_DataRepository_Query",
            udr_status,
            &supi,
            b"{}",
        );
        push(IngressResponse, Http2, "PCF", "npcf-smpolicycontrol", create, 201, &supi, b"{}");
        push(
            IngressRequest,
            Http2,
            "BSF",
            "nbsf-management",
            "Nbsf_Management_Register",
            0,
            &supi,
            b"{}",
        );
        push(
            IngressResponse,
            Http2,
            "BSF",
            "nbsf-management",
            "Nbsf_Management_Register",
            201,
            &supi,
            b"{}",
        );
        push(IngressRequest, Diameter, "PCF", "Gx", "CCR-I", 0, &imsi, b"\x01\x00\x00\x14");
        let cca = if bad { 5030 } else { 2001 };
        push(IngressResponse, Diameter, "PCF", "Gx", "CCR-I", cca, &imsi, b"\x01\x00\x00\x14");
    }
    out.freeze()
}

const PER_SUBSCRIBER: usize = 8;

fn copies(subscribers: u64) -> Vec<Copy> {
    Frames::new(stream(subscribers)).map(|f| Copy::decode(f.unwrap()).unwrap()).collect()
}

fn filter(config: Value) -> Filter {
    let config: FilterConfig = serde_json::from_value(config).unwrap();
    Filter::compile(&config).unwrap()
}

fn passing<'a>(f: &Filter, copies: &'a [Copy]) -> Vec<&'a Copy> {
    copies.iter().filter(|c| f.matches(c)).collect()
}

#[test]
fn each_kind_of_condition_selects_its_copies_from_a_mixed_stream() {
    let all = copies(100);
    assert_eq!(all.len(), 100 * PER_SUBSCRIBER);
    let count =
        |conditions: Value| passing(&filter(json!({ "conditions": conditions })), &all).len();
    assert_eq!(count(json!([])), 800);
    assert_eq!(count(json!([{"nf_type": "BSF"}])), 200);
    assert_eq!(count(json!([{"service": ["Gx", "nudr-dr"]}])), 400);
    assert_eq!(count(json!([{"operation": "Nbsf_Management_Register"}])), 200);
    assert_eq!(count(json!([{"trigger_point": ["egress_request", "egress_response"]}])), 200);
    assert_eq!(count(json!([{"protocol": "diameter"}])), 200);
    // Answers only: 4 per subscriber; failures are the UDR's 404 and the Gx 5030 of 10 of them.
    assert_eq!(count(json!([{"status": "2xx"}])), 290, "2001 is no HTTP 2xx");
    assert_eq!(count(json!([{"status": ["4xx", "5xxx"]}])), 20);
    assert_eq!(count(json!([{"status": "400-599"}])), 10, "5030 is no HTTP status range match");
    // Subscribers 20..=29: SBI and Diameter copies alike.
    let range = json!({"plmn": "00101", "msin_from": "0000000020", "msin_to": "0000000029"});
    assert_eq!(count(json!([{"supi": {"ranges": [range]}}])), 80);
    assert_eq!(
        count(json!([{"supi": {"prefixes": ["00101000000000"]}}])),
        80,
        "subscribers 0..=9, a digit prefix"
    );
    assert_eq!(
        count(json!([{"supi": {"prefixes": ["imsi-00101000000000"]}}])),
        60,
        "a typed prefix: SBI copies only"
    );
    assert_eq!(count(json!([{"gpsi": {"prefixes": ["msisdn-3361000000"]}}])), 80);
    assert_eq!(count(json!([{"body": {"path": "dnn", "equals": "ims"}}])), 50);
    assert_eq!(
        count(
            json!([{"body": {"path": "sliceInfo.sd", "exists": false}}, {"operation": "Npcf_SMPolicyControl_Create"}])
        ),
        150
    );
    assert_eq!(count(json!([{"not": {"nf_type": "PCF"}}])), 200);
    assert_eq!(
        count(
            json!([{"any": [{"status": "404"}, {"all": [{"protocol": "diameter"}, {"status": 5030}]}]}])
        ),
        20
    );
}

/// The guide's filtered feeds carry 1 to 10 % of the traffic; sampling by SUPI keeps whole
/// subscribers (their SBI and Diameter copies) so the feed still shows complete call flows.
#[test]
fn a_one_percent_feed_keeps_every_message_of_one_percent_of_the_subscribers() {
    let all = copies(10_000);
    let f = filter(json!({"conditions": [{"sample": {"percent": 1}}]}));
    let kept = passing(&f, &all);
    assert_eq!(kept.len() % PER_SUBSCRIBER, 0, "whole subscribers only");
    let subscribers = kept.len() / PER_SUBSCRIBER;
    assert!((70..=130).contains(&subscribers), "{subscribers} of 10,000 subscribers at 1 %");
    // Combined with other conditions: the failures of the sampled subscribers.
    let f =
        filter(json!({"conditions": [{"sample": {"percent": 1}}, {"status": ["4xx", "5xxx"]}]}));
    let failures = passing(&f, &all);
    assert!(failures.iter().all(|c| c.status == 404 || c.status == 5030));
    assert!(failures.len() < kept.len());
    let random = filter(json!({"conditions": [{"sample": {"percent": 10, "by": "random"}}]}));
    let n = passing(&random, &all).len();
    assert!((7_200..=8_800).contains(&n), "{n} of 80,000 copies at 10 %");
}

#[test]
fn an_invalid_filter_names_every_wrong_field() {
    let config: FilterConfig = serde_json::from_value(json!({"conditions": [
        {"nf_type": "PCF"},
        {"any": [{"status": ["2xx", "2yy"]}, {"trigger_point": "ingress"}]},
        {"status": "600-500"},
        {"not": {"body": {"path": "a[", "regex": "("}}},
        {"sample": {"percent": 150, "by": "supi"}}
    ]}))
    .unwrap();
    let errors = Filter::compile(&config).unwrap_err();
    let params: Vec<&str> = errors.iter().map(|p| p.param.as_str()).collect();
    assert_eq!(
        params,
        [
            "/conditions/1/any/0/status/1",
            "/conditions/1/any/1/trigger_point",
            "/conditions/2/status",
            "/conditions/3/not/body/path",
            "/conditions/3/not/body/regex",
            "/conditions/4/sample/percent",
        ]
    );
    assert!(errors.iter().all(|p| p.reason.as_deref().is_some_and(|r| !r.is_empty())));
    // What serde refuses (an unknown kind, a wrong type) never reaches compile: the admin API
    // answers it from the JSON decoding, which names the place as well.
    assert!(
        serde_json::from_value::<FilterConfig>(json!({"conditions": [{"colour": "red"}]})).is_err()
    );
    assert!(serde_json::from_value::<FilterConfig>(json!({"conditions": [{"status": [true]}]}))
        .is_err());
}
