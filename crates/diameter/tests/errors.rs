//! Every decode and validation error path, with the result code the peer gets and the
//! Failed-AVP it names, and the error answers built from them.

mod common;

use bytes::{BufMut, Bytes, BytesMut};
use diameter::dictionary::{base, dcca, gx, nasreq};
use diameter::{frame_len, validate, Avp, Error, Header, Message};

/// A well-formed message around raw AVP bytes, with a correct length field.
fn with_body(flags: u8, app: u32, cmd: u32, body: &[u8]) -> Bytes {
    let mut b = BytesMut::new();
    b.put_u32((1 << 24) | (20 + body.len()) as u32);
    b.put_u32((u32::from(flags) << 24) | cmd);
    b.put_u32(app);
    b.put_u32(0x11);
    b.put_u32(0x22);
    b.put_slice(body);
    b.freeze()
}

fn decode_err(bytes: Bytes) -> Error {
    Message::decode(bytes).expect_err("must not decode")
}

fn valid_dwr() -> Bytes {
    common::dwr().to_bytes().unwrap()
}

#[test]
fn bad_version_is_5011() {
    let mut b = valid_dwr().to_vec();
    b[0] = 2;
    let e = decode_err(b.clone().into());
    assert_eq!(e, Error::UnsupportedVersion(2));
    assert_eq!(e.result_code(), 5011);
    assert!(e.breaks_framing());
    assert_eq!(frame_len(&b).unwrap_err().result_code(), 5011);
}

#[test]
fn message_length_errors_are_5015() {
    let good = valid_dwr().to_vec();
    // Shorter than a header.
    assert_eq!(decode_err(Bytes::copy_from_slice(&good[..19])).result_code(), 5015);
    // Header length disagrees with the bytes handed over.
    assert_eq!(decode_err(Bytes::copy_from_slice(&good[..good.len() - 4])).result_code(), 5015);
    // Length not a multiple of 4 (and matching the buffer).
    let mut odd = good.clone();
    odd.push(0);
    odd[3] += 1;
    let e = decode_err(odd.into());
    assert!(matches!(e, Error::InvalidMessageLength { .. }), "{e:?}");
    assert_eq!(e.result_code(), 5015);
    assert!(e.failed_avp().is_none());
}

#[test]
fn bad_header_bits_are_3008() {
    let mut b = valid_dwr().to_vec();
    b[4] |= 0x01; // reserved bit
    let e = decode_err(b.into());
    assert_eq!(e, Error::InvalidHeaderBits(0x81));
    assert_eq!(e.result_code(), 3008);
    assert!(e.is_protocol_error());
    let mut b = valid_dwr().to_vec();
    b[4] |= 0x20; // E bit on a request
    assert_eq!(decode_err(b.into()).result_code(), 3008);
}

#[test]
fn avp_shorter_than_its_header_is_5014() {
    // Session-Id with length 6 < 8.
    let body = [0, 0, 1, 7, 0x40, 0, 0, 6, 0, 0, 0, 0];
    let e = decode_err(with_body(0x80, 0, 280, &body));
    assert_eq!(e.result_code(), 5014);
    assert_eq!(e.failed_avp().unwrap().code(), 263);
    // V bit but only 8 bytes: no room for the vendor id.
    let body = [0, 0, 1, 7, 0xc0, 0, 0, 8];
    let e = decode_err(with_body(0x80, 0, 280, &body));
    assert_eq!(e.result_code(), 5014);
    assert_eq!(e.failed_avp().unwrap().code(), 263);
}

#[test]
fn avp_running_past_the_message_is_5014() {
    // Origin-Host claims 64 bytes, 8 are present.
    let body = [0, 0, 1, 8, 0x40, 0, 0, 64, b'a', b'b', b'c', b'd'];
    let e = decode_err(with_body(0x80, 0, 280, &body));
    assert_eq!(e.result_code(), 5014);
    let f = e.failed_avp().unwrap();
    assert_eq!((f.code(), f.is_mandatory()), (264, true));
    assert_eq!(f.as_bytes().unwrap().as_ref(), b"abcd", "Failed-AVP keeps the bytes present");
}

#[test]
fn trailing_garbage_shorter_than_an_avp_header_is_5014() {
    let mut body = BytesMut::new();
    base::ORIGIN_STATE_ID.u32(1).encode(&mut body).unwrap();
    body.extend_from_slice(&[0, 0, 1, 8]); // 4 bytes: a code and nothing else
    let e = decode_err(with_body(0x80, 0, 280, &body));
    assert_eq!(e.result_code(), 5014);
    assert_eq!(e.failed_avp().unwrap().code(), 264);
}

#[test]
fn non_zero_padding_is_5014() {
    // Origin-Realm "abc" (length 11) followed by a non-zero pad byte.
    let body = [0, 0, 1, 0x28, 0x40, 0, 0, 11, b'a', b'b', b'c', 0xff];
    let e = decode_err(with_body(0x80, 0, 280, &body));
    assert_eq!(e.result_code(), 5014);
    assert_eq!(e.failed_avp().unwrap().code(), 296);
}

#[test]
fn reserved_avp_flags_are_3009() {
    let body = [0, 0, 1, 0x16, 0x41, 0, 0, 12, 0, 0, 0, 1];
    let e = decode_err(with_body(0x80, 0, 280, &body));
    assert_eq!(e.result_code(), 3009);
    assert!(e.is_protocol_error());
    assert_eq!(e.failed_avp().unwrap().code(), 278);
}

fn ccr_with(extra: Avp) -> Message {
    common::gx_ccr_i().avp(extra)
}

fn validate_err(m: &Message) -> Error {
    // Through the wire, so the validator sees decoded (lazy) AVPs like in production.
    let back = Message::decode(m.to_bytes().unwrap()).unwrap();
    let e = validate(&back).expect_err("must not validate");
    assert_eq!(validate(m).as_ref().err(), Some(&e), "built and decoded forms agree");
    e
}

#[test]
fn wrong_size_for_fixed_type_is_5014() {
    let e = validate_err(&ccr_with(gx::PRECEDENCE.bytes(&[0, 0, 1][..])));
    assert_eq!(e.result_code(), 5014);
    assert_eq!(e.failed_avp().unwrap().code(), 1010);
    let e = validate_err(&ccr_with(dcca::CC_INPUT_OCTETS.bytes(&[0; 4][..])));
    assert_eq!(e.result_code(), 5014);
    let e = validate_err(&ccr_with(nasreq::FRAMED_IP_NETMASK.bytes(&[255, 255, 255][..])));
    assert_eq!(e.result_code(), 5014);
    // Address: IPv4 family with 5 address bytes.
    let e = validate_err(&ccr_with(gx::AN_GW_ADDRESS.bytes(&[0, 1, 1, 2, 3, 4, 5][..])));
    assert_eq!(e.result_code(), 5014);
    assert_eq!(e.failed_avp().unwrap().vendor_id(), Some(10415));
}

#[test]
fn invalid_values_are_5004() {
    // Invalid UTF-8 in a UTF8String.
    let e = validate_err(&ccr_with(nasreq::CALLED_STATION_ID.bytes(&[0xc3, 0x28][..])));
    assert_eq!(e.result_code(), 5004);
    assert_eq!(e.failed_avp().unwrap().code(), 30);
    // DiameterIdentity with a space; DiameterURI with a foreign scheme.
    let e = validate_err(&ccr_with(base::ROUTE_RECORD.bytes(&b"bad host"[..])));
    assert_eq!(e.result_code(), 5004);
    let e = validate_err(&ccr_with(base::REDIRECT_HOST.bytes(&b"http://x"[..])));
    assert_eq!(e.result_code(), 5004);
}

#[test]
fn missing_mandatory_avp_is_5005_naming_it() {
    let mut m = common::gx_ccr_i();
    m.avps.retain(|a| !a.is(&dcca::CC_REQUEST_NUMBER));
    let e = validate_err(&m);
    assert_eq!(e.result_code(), 5005);
    let f = e.failed_avp().unwrap();
    assert_eq!((f.code(), f.vendor_id()), (415, None));
    assert_eq!(f.as_bytes().unwrap().as_ref(), &[0, 0, 0, 0], "zero-filled, minimum size");
    // Missing inside a grouped AVP: Subscription-Id without its data.
    let e = validate_err(&ccr_with(
        dcca::SUBSCRIPTION_ID.grouped(vec![dcca::SUBSCRIPTION_ID_TYPE.enumerated(1)]),
    ));
    assert_eq!(e.result_code(), 5005);
    assert_eq!(e.failed_avp().unwrap().code(), 444);
}

#[test]
fn unknown_avp_with_m_bit_is_5001_without_is_ignored() {
    let unknown = Avp::new(99_999, Some(10415), true, &b"x"[..]);
    let e = validate_err(&ccr_with(unknown.clone()));
    assert_eq!(e.result_code(), 5001);
    assert_eq!(e.failed_avp(), Some(&unknown));
    // Inside a grouped AVP too.
    let e = validate_err(&ccr_with(gx::QOS_INFORMATION.grouped(vec![unknown])));
    assert_eq!(e.result_code(), 5001);
    // Without the M bit an unknown AVP is fine.
    let m = ccr_with(Avp::new(99_999, Some(10415), false, &b"x"[..]));
    validate(&m).unwrap();
    // A known code under another vendor is a different, unknown AVP.
    let e = validate_err(&ccr_with(Avp::new(1028, Some(9), true, vec![0, 0, 0, 9])));
    assert_eq!(e.result_code(), 5001);
}

#[test]
fn too_many_occurrences_is_5009() {
    let m = common::gx_ccr_i().avp(base::SESSION_ID.utf8("second"));
    let e = validate_err(&m);
    assert_eq!(e.result_code(), 5009);
    assert_eq!(e.failed_avp().unwrap().as_str(), Ok("second"), "names the extra occurrence");
}

#[test]
fn too_many_occurrences_in_a_group_names_the_first_extra_of_the_first_rule() {
    // Experimental-Result ::= { Vendor-Id } { Experimental-Result-Code }: both overflow; the
    // grammar's first rule is reported, with its first occurrence past the maximum.
    let er = base::EXPERIMENTAL_RESULT.grouped(vec![
        base::EXPERIMENTAL_RESULT_CODE.u32(5065),
        base::EXPERIMENTAL_RESULT_CODE.u32(5066),
        base::VENDOR_ID.u32(1),
        base::VENDOR_ID.u32(2),
        base::VENDOR_ID.u32(3),
    ]);
    let e = validate_err(&common::gx_ccr_i().avp(er));
    assert_eq!(e.result_code(), 5009);
    let f = e.failed_avp().unwrap();
    assert_eq!((f.code(), f.as_u32()), (base::VENDOR_ID.code, Ok(2)));
}

#[test]
fn unknown_application_is_3007_unknown_command_is_3001() {
    let m = Message::request(4242, 272).origin("a.example", "example");
    let e = validate(&m).unwrap_err();
    assert_eq!(e, Error::ApplicationUnsupported(4242));
    assert_eq!(e.result_code(), 3007);
    let m = Message::request(gx::APP_ID, 265).origin("a.example", "example");
    let e = validate(&m).unwrap_err();
    assert_eq!(e.result_code(), 3001);
    // AAR is known, but in Rx, not in Gx.
    assert!(validate(&common::rx_aar()).is_ok());
}

#[test]
fn grouped_framing_error_is_5014_naming_the_child() {
    // QoS-Information whose payload is a truncated child AVP header.
    let bad = Avp::new(1016, Some(10415), true, vec![0, 0, 4, 4, 0xc0, 0, 0, 40]);
    let e = validate_err(&ccr_with(bad));
    assert_eq!(e.result_code(), 5014);
    assert_eq!(e.failed_avp().unwrap().code(), 1028);
}

#[test]
fn deep_nesting_is_rejected_not_recursed() {
    let mut a = gx::QOS_INFORMATION.grouped(vec![]);
    for _ in 0..40 {
        a = gx::QOS_INFORMATION.grouped(vec![a]);
    }
    let e = validate_err(&ccr_with(a));
    assert_eq!(e.result_code(), 5004);
}

#[test]
fn failed_avp_content_is_opaque() {
    // A peer reporting our malformed AVP: the answer itself is fine.
    let ans = common::dwa(&common::dwr()).avp(base::FAILED_AVP.grouped(vec![Avp::new(
        278,
        None,
        true,
        vec![0u8; 3],
    )]));
    validate(&ans).unwrap();
}

#[test]
fn protocol_error_answer_has_e_bit_session_id_and_failed_avp() {
    let req = common::gx_ccr_i().avp(base::PROXY_INFO.grouped(vec![
        base::PROXY_HOST.identity("dra.example.com"),
        base::PROXY_STATE.bytes(&b"st"[..]),
    ]));
    let bad = Avp::from_parts(278, 0x41, None, Bytes::from_static(&[0, 0, 0, 1]));
    let e = Error::InvalidAvpBits(bad.clone());
    let ans = Message::error_answer(&req, &e, "pcrf.example.com", "example.com");
    assert!(ans.is_error() && !ans.is_request() && ans.is_proxiable());
    assert_eq!(ans.header.hop_by_hop_id, req.header.hop_by_hop_id);
    assert_eq!(ans.header.end_to_end_id, req.header.end_to_end_id);
    assert_eq!(ans.avps[0], req.avps[0], "Session-Id first");
    assert!(ans.find(&base::PROXY_INFO).is_some());
    assert_eq!(ans.result_code(), Some(3009));
    assert_eq!(ans.origin_host(), Some("pcrf.example.com"));
    assert_eq!(ans.failed_avps(), vec![bad]);
    // It encodes, decodes and validates as a CCA with the E bit (required AVPs relaxed).
    let back = Message::decode(ans.to_bytes().unwrap()).unwrap();
    validate(&back).unwrap();
}

#[test]
fn permanent_failure_answer_has_no_e_bit() {
    let mut req = common::rx_aar();
    req.avps.retain(|a| !a.is(&base::DESTINATION_REALM));
    let e = validate(&req).unwrap_err();
    assert_eq!(e.result_code(), 5005);
    let ans = Message::error_answer(&req, &e, "pcrf.example.com", "example.com");
    assert!(!ans.is_error());
    assert_eq!(ans.failed_avps()[0].code(), 283);
}

#[test]
fn error_answer_from_header_only() {
    let mut b = common::gx_ccr_i().to_bytes().unwrap().to_vec();
    // Break the second AVP's length so the body cannot be decoded.
    let second = 20
        + diameter::avp::AvpIter::new(Bytes::copy_from_slice(&b[20..]))
            .next()
            .unwrap()
            .unwrap()
            .encoded_len();
    b[second + 5..second + 8].copy_from_slice(&[0xff, 0xff, 0xff]);
    let err = Message::decode(Bytes::from(b.clone())).unwrap_err();
    assert_eq!(err.result_code(), 5014);
    let (hdr, len) = Header::peek(&b).unwrap();
    assert_eq!(len, b.len());
    let ans = Message::error_answer_to_header(&hdr, &err, "pcrf.example.com", "example.com");
    assert_eq!(ans.hop_by_hop_id(), 0x1234_5678);
    assert_eq!(ans.command_code(), 272);
    assert!(!ans.is_error());
    assert_eq!(ans.result_code(), Some(5014));
    assert_eq!(ans.failed_avps()[0].code(), 258);
}

#[test]
fn typed_accessors_report_bad_payloads() {
    let a = base::ORIGIN_STATE_ID.bytes(&[1, 2][..]);
    assert_eq!(a.as_u32().unwrap_err().result_code(), 5014);
    assert_eq!(a.as_u64().unwrap_err().result_code(), 5014);
    let addr = base::HOST_IP_ADDRESS.bytes(&[0, 1, 2][..]);
    assert_eq!(addr.as_address().unwrap_err().result_code(), 5014);
    assert_eq!(a.as_ipv4_octets().unwrap_err().result_code(), 5014);
    let g = base::PROXY_INFO.grouped(vec![]);
    assert_eq!(g.as_u32().unwrap_err().result_code(), 5004);
    assert_eq!(g.as_str().unwrap_err().result_code(), 5004);
    let truncated = Avp::new(284, None, true, vec![0, 0, 1, 8]);
    assert_eq!(truncated.children().unwrap_err().result_code(), 5014);
}

#[test]
fn encoder_rejects_lengths_over_24_bits() {
    let big = base::CLASS.bytes(vec![0u8; 0x0100_0000]);
    let mut buf = BytesMut::new();
    let e = big.encode(&mut buf).unwrap_err();
    assert!(matches!(e, diameter::EncodeError::AvpTooLong { code: 25, .. }));
    assert!(buf.is_empty(), "nothing half-written");
    let m = Message::request(0, 280).avp(base::CLASS.bytes(vec![0u8; 0x00ff_fff0]));
    assert!(matches!(m.to_bytes(), Err(diameter::EncodeError::MessageTooLong(_))));
}

#[test]
fn occurrence_rules_see_through_codes_equal_modulo_64() {
    // The validator skips scanning for rules whose code is absent by a 64-bit set of codes mod
    // 64. CC-Request-Number (415) and Route-Record (282) differ from 415 + 64k / 282 + 64k AVPs
    // in the set only: a present look-alike must not count as the AVP, nor hide its absence.
    let look_alike = |code: u32| Avp::new(code, None, false, vec![0, 0, 0, 1]);
    let mut m = common::gx_ccr_i().avp(look_alike(415 + 64)).avp(look_alike(415 + 128));
    m.avps.retain(|a| !a.is(&dcca::CC_REQUEST_NUMBER));
    let e = validate_err(&m);
    assert_eq!(e.result_code(), 5005);
    assert_eq!(e.failed_avp().unwrap().code(), 415);
    // Two of a max-1 AVP are still seen with look-alikes around them.
    let m = common::gx_ccr_i()
        .avp(look_alike(415 + 64))
        .avp(dcca::CC_REQUEST_NUMBER.u32(9))
        .avp(look_alike(415 - 64));
    let e = validate_err(&m);
    assert_eq!(e.result_code(), 5009);
    assert_eq!(e.failed_avp().unwrap().as_u32(), Ok(9));
    // And a valid message with look-alikes validates.
    validate(&common::gx_ccr_i().avp(look_alike(415 + 64)).avp(look_alike(282 + 64))).unwrap();
}
