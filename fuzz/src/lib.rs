//! The fuzz targets' bodies: each feeds arbitrary bytes to the parsing entry points a node runs
//! on what it receives, and checks the properties those parsers promise (no panic, a decoded
//! Diameter message re-encodes to itself, a parsed Sh-Data update survives being written back).
//!
//! cargo-fuzz's binaries (fuzz_targets/) call these under libFuzzer; tests/replay.rs calls them
//! over every file of corpus/<target>/ and regressions/<target>/ on stable, so a fixed crash
//! stays fixed where libFuzzer cannot run. See fuzz/README.md.

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

/// A target's body.
pub type Target = fn(&[u8]);

/// The targets by name, as cargo-fuzz and the corpus directories name them.
pub const TARGETS: [(&str, Target); 5] = [
    ("diameter", diameter),
    ("sbi_request", sbi_request),
    ("sbi_json", sbi_json),
    ("udr_xml", udr_xml),
    ("dd_copy", dd_copy),
];

/// Diameter as a node reads it (crates/diameter/src/node.rs): the frame length, the header alone
/// (what an error answer to an undecodable request is built from), the whole message, the
/// dictionary validation whose error becomes Result-Code and Failed-AVP, and every AVP's value
/// read as each type, grouped AVPs walked.
pub fn diameter(data: &[u8]) {
    use diameter::{frame_len, validate, Avp, Header, Message};

    fn walk(avps: &[Avp], depth: usize) {
        for a in avps {
            let _ = (a.as_u32(), a.as_i32(), a.as_u64(), a.as_i64(), a.as_str());
            let _ = (a.as_address(), a.as_ipv4_octets());
            // Deeper than any dictionary's nesting, bounded so a crafted nest cannot make the
            // walk itself the slow part.
            if depth < 8 {
                if let Ok(children) = a.children() {
                    walk(&children, depth + 1);
                }
            }
        }
    }

    let _ = frame_len(data);
    let header = Header::peek(data);
    match Message::decode(Bytes::copy_from_slice(data)) {
        Ok(m) => {
            if let Err(e) = validate(&m) {
                let ans = Message::error_answer(&m, &e, "fuzz.example", "example");
                let _ = ans.to_bytes();
            }
            walk(&m.avps, 0);
            let _ = (m.session_id(), m.subscription_ids(), m.framed_ipv6_prefix());
            let _ = m.framed_ip_address();
            if let Ok(wire) = m.to_bytes() {
                let again = Message::decode(wire).expect("a re-encoded message decodes");
                assert_eq!(again, m, "a decoded message re-encodes to itself");
            }
        }
        Err(e) => {
            if let Ok((h, _)) = header {
                let ans = Message::error_answer_to_header(&h, &e, "fuzz.example", "example");
                let _ = ans.to_bytes();
            }
        }
    }
}

/// The parts of an SBI request a producer reads before its handler: the query string (first
/// line of the input), then `name: value` header lines, read by the 3GPP header parsers and the
/// media-type checks.
pub fn sbi_request(data: &[u8]) {
    use sbi::{body, headers, query::Query};

    let text = String::from_utf8_lossy(data);
    let mut lines = text.split('\n');
    let raw_query = lines.next().unwrap_or("");
    let q = Query::parse(Some(raw_query));
    let _ = q.is_empty();
    for name in q.names().collect::<Vec<_>>() {
        let _ = q.get(name);
        let _ = q.array(name);
    }
    // Parameters as the NRF's discovery and the BSF's and UDR's queries read them.
    let _ = q.required("target-nf-type");
    let _ = q.parse_as::<u32>("limit");
    let _ = q.parse_as::<u8>("max-payload-size");
    let _ = q.json::<Value>("snssais");
    let _ = q.json::<Vec<Value>>("plmn-list");
    let _ = q.array("service-names");
    let _ = q.deny_unknown(&["target-nf-type", "requester-nf-type", "limit", "snssais"]);

    let mut map = HeaderMap::new();
    for line in lines {
        let Some((name, value)) = line.split_once(':') else { continue };
        let (Ok(n), Ok(v)) =
            (HeaderName::from_bytes(name.trim().as_bytes()), HeaderValue::from_str(value.trim()))
        else {
            continue;
        };
        if n.as_str().contains("sender-timestamp") {
            let _ = headers::parse_sender_timestamp(value);
        }
        if n.as_str().ends_with("-lci") || n.as_str().ends_with("-oci") {
            for field in ["Timestamp", "Period-of-Validity", "Overload-Reduction-Metric"] {
                let _ = headers::lci_oci_field(value, field);
            }
        }
        map.append(n, v);
    }
    let _ = headers::max_rsp_time(&map);
    let _ = headers::message_priority(&map);
    let _ = body::media_type(&map);
    let _ = body::require_media_type(&map, &["application/json", "application/merge-patch+json"]);
    let _ = body::check_accept(&map);
}

/// A stored resource the patch kinds of [`sbi_json`] are applied to.
fn patch_target() -> Value {
    serde_json::json!({
        "dnn": "internet",
        "snssai": {"sst": 1, "sd": "000001"},
        "umDataLimits": {"l1": {"limitId": "l1", "scopes": {"internet": {"snssai": {"sst": 1}}}}},
        "list": [1, 2, 3]
    })
}

/// JSON request bodies of every NF, through the checks their handlers run: the first byte picks
/// the body type (its value modulo the number of kinds; the seeds use 'a', 'b', ...), the rest is
/// the body. Every body goes through `sbi::body::decode_json` (with its path tracking on error)
/// first, as the handlers do.
pub fn sbi_json(data: &[u8]) {
    use sbi::body::{apply_json_patch, apply_merge_patch, decode_json};
    use udr::policy_data::model;

    let Some((&kind, body)) = data.split_first() else { return };
    match kind.wrapping_sub(b'a') % 10 {
        // 'a': NRF NFRegister / NFUpdate: an NFProfile, typed, then its semantic checks.
        0 => {
            if let Ok(profile) = decode_json::<nrf::models::NfProfile>(body) {
                let raw: Value = decode_json(body).expect("a typed body is JSON");
                let id = raw.get("nfInstanceId").and_then(Value::as_str).unwrap_or("");
                if profile.validate(id, &raw).is_ok() {
                    let _ = nrf::nnrf_disc::DiscInfo::from_profile(&raw);
                    let _ = nrf::models::public_view(&raw);
                    let _ = nrf::models::diff(&raw, &patch_target());
                }
            }
        }
        // 'b': BSF Nbsf_Management register (PcfBinding) and its merge patch.
        1 => {
            if let Ok(mut v) = decode_json::<Value>(body) {
                let _ = bsf::models::check_patch(&v);
                let _ = bsf::models::validate_binding(&mut v);
            }
        }
        // 'c': UDR SmPolicyData, and SmPolicyDataPatch checked then applied.
        2 => {
            if let Ok(v) = decode_json::<Value>(body) {
                let _ = model::validate(&v, &model::SM_POLICY_DATA);
                if model::check_patch(&v, &model::SM_POLICY_DATA_PATCH, "SmPolicyDataPatch").is_ok()
                {
                    let mut target = patch_target();
                    let _ = apply_merge_patch(&mut target, body);
                    let _ = model::validate(&target, &model::SM_POLICY_DATA);
                }
            }
        }
        // 'd': UDR's other policy data types and patches.
        3 => {
            if let Ok(v) = decode_json::<Value>(body) {
                for ty in [
                    &model::AM_POLICY_DATA,
                    &model::UE_POLICY_SET,
                    &model::BDT_DATA,
                    &model::SLICE_POLICY_DATA,
                    &model::SPONSOR_CONNECTIVITY_DATA,
                    &model::OPERATOR_SPECIFIC_DATA,
                    &model::POLICY_DATA_SUBSCRIPTION,
                ] {
                    let _ = model::validate(&v, ty);
                }
                let _ = model::check_patch(&v, &model::UE_POLICY_SET_PATCH, "UePolicySetPatch");
                let _ = model::check_patch(&v, &model::BDT_DATA_PATCH, "BdtDataPatch");
                let _ = model::check_slice_patch(&v);
            }
        }
        // 'e': PCF Npcf_SMPolicyControl create (SmPolicyContextData).
        4 => {
            if let Ok(v) = decode_json::<Value>(body) {
                let _ = pcf::models::check_context(&v);
            }
        }
        // 'f': PCF SmPolicyUpdateContextData, merged into a context and the delta taken.
        5 => {
            if let Ok(v) = decode_json::<Value>(body) {
                if pcf::models::check_update(&v).is_ok() {
                    let old = patch_target();
                    let mut ctx = old.clone();
                    pcf::models::merge_update(&mut ctx, &v);
                    let _ = pcf::models::delta(&old, &ctx);
                    let mut overlaid = old.clone();
                    let displaced = pcf::models::overlay(&mut overlaid, &v);
                    pcf::models::restore(&mut overlaid, displaced);
                    assert_eq!(overlaid, old, "restore undoes overlay");
                }
            }
        }
        // 'g': PCF Npcf_AMPolicyControl create and update.
        6 => {
            if let Ok(v) = decode_json::<Value>(body) {
                let _ = pcf::models::check_am_request(&v);
                let _ = pcf::models::check_am_update(&v);
            }
        }
        // 'h': an RFC 7396 merge patch (UDR, BSF PATCH bodies).
        7 => {
            let mut target = patch_target();
            let _ = apply_merge_patch(&mut target, body);
        }
        // 'i': an RFC 6902 JSON patch (NRF NFUpdate): atomic, so a failure leaves the target.
        8 => {
            let mut target = patch_target();
            if apply_json_patch(&mut target, body).is_err() {
                assert_eq!(target, patch_target(), "a failed JSON patch changes nothing");
            }
        }
        // 'j': an AF's AppSessionContext (PCF Npcf_PolicyAuthorization): the generic decode
        // and the bit rates it carries, the one check of its own the PCF exports.
        _ => {
            if let Ok(v) = decode_json::<Value>(body) {
                let rates = ["marBwDl", "marBwUl", "mirBwDl", "mirBwUl"];
                if let Some(comps) =
                    v.pointer("/ascReqData/medComponents").and_then(|c| c.as_object())
                {
                    for comp in comps.values() {
                        for r in rates {
                            if let Some(s) = comp.get(r).and_then(Value::as_str) {
                                let _ = pcf::models::check_bitrate(s);
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The UDR's XML: a SOAP provisioning request and a PUR's Sh-Data User-Data share one parser
/// (crates/udr/src/sh/xml.rs); the Sh-Data reader on top, and what it accepted written back
/// with the writer the UDA uses must read the same again.
pub fn udr_xml(data: &[u8]) {
    use udr::sh::sh_data_xml::{parse_repository_updates, ShData};
    use udr::sh::xml;

    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(root) = xml::parse(text) {
            // What the SOAP endpoint reads of an envelope.
            let body = root.child("Body");
            if let Some(h) = root.child("Header") {
                let _ = h.children.iter().find(|e| e.attr("mustUnderstand") == Some("1"));
            }
            if let Some(op) = body.and_then(|b| b.children.first()) {
                let _ = (op.child_text("supi"), op.children_named("entry").count());
                let _ = text.get(op.content.clone()).expect("content range lies in the source");
            }
        }
        let _ = xml::check_fragment(text);
        let _ = xml::escape(text);
    }
    let Ok(updates) = parse_repository_updates(data, 4096) else { return };
    let doc = ShData {
        repository: updates
            .iter()
            .map(|u| (u.service_indication.as_str(), u.sequence_number, u.data.as_deref()))
            .collect(),
        ..ShData::default()
    };
    let again = parse_repository_updates(doc.to_xml().as_bytes(), 4096)
        .expect("Sh-Data we write is Sh-Data we read");
    assert_eq!(again, updates, "Sh-Data survives being written back");
}

/// The Data Director's ingest: a body of framed copy envelopes split into records, each decoded
/// and every field read (crates/dd/src/sources/ingest splits exactly so).
pub fn dd_copy(data: &[u8]) {
    use dd_client::envelope::{Copy, Frames};

    let mut frames = Frames::new(Bytes::copy_from_slice(data));
    while let Some(frame) = frames.next() {
        let Ok(record) = frame else {
            assert!(frames.next().is_none(), "a cut frame is the last item");
            break;
        };
        if let Ok(c) = Copy::decode(record) {
            let _ = (c.nf_type(), c.nf_instance(), c.service(), c.operation(), c.method());
            let _ = (c.path(), c.peer(), c.supi(), c.gpsi(), c.session_id(), c.body());
            assert_eq!(c.headers().count(), c.header_count());
            let _ = c.header("content-type");
        }
    }
    assert!(frames.consumed() <= data.len());
}
