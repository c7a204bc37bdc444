//! Byte-exact vectors, computed by hand from RFC 6733 §3 and §4. (The same encoder output is
//! decoded by Wireshark in `tshark.rs`.)

use bytes::Bytes;
use diameter::builders::supported_features;
use diameter::dictionary::base;
use diameter::{Avp, Message};

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// DWR, hop-by-hop 1, end-to-end 2, Origin-Host "a.example" (9 bytes, 3 of padding),
/// Origin-Realm "example" (7 bytes, 1 of padding), Origin-State-Id 5.
const DWR: &str = "
    01 000044 80 000118 00000000 00000001 00000002
    00000108 40 000011 612e6578616d706c65 000000
    00000128 40 00000f 6578616d706c65 00
    00000116 40 00000c 00000005";

#[test]
fn dwr_encodes_byte_for_byte() {
    let m = Message::request(base::APP_ID, base::CMD_DEVICE_WATCHDOG)
        .ids(1, 2)
        .origin("a.example", "example")
        .avp(base::ORIGIN_STATE_ID.u32(5));
    assert_eq!(m.to_bytes().unwrap().to_vec(), hex(DWR));
}

#[test]
fn dwr_decodes_from_vector() {
    let m = Message::decode(Bytes::from(hex(DWR))).unwrap();
    assert_eq!(m.command_code(), 280);
    assert!(m.is_request() && !m.is_proxiable());
    assert_eq!((m.hop_by_hop_id(), m.end_to_end_id()), (1, 2));
    assert_eq!(m.origin_host(), Some("a.example"));
    assert_eq!(m.origin_realm(), Some("example"));
    assert_eq!(m.origin_state_id(), Some(5));
    diameter::validate(&m).unwrap();
}

/// 3GPP grouped AVP with vendor ids: Supported-Features { Vendor-Id 10415, Feature-List-ID 1,
/// Feature-List 3 }, V bit only (M must not be set for TS 29.229 feature AVPs).
const SUPPORTED_FEATURES: &str = "
    00000274 80 000038 000028af
        0000010a 40 00000c 000028af
        00000275 80 000010 000028af 00000001
        00000276 80 000010 000028af 00000003";

#[test]
fn vendor_grouped_avp_encodes_byte_for_byte() {
    let mut buf = bytes::BytesMut::new();
    supported_features(1, 3).encode(&mut buf).unwrap();
    assert_eq!(buf.to_vec(), hex(SUPPORTED_FEATURES));
    let back = diameter::AvpIter::new(buf.freeze()).next().unwrap().unwrap();
    assert_eq!(back.vendor_id(), Some(10415));
    assert_eq!(back.children().unwrap().len(), 3);
}

/// A DPR without its mandatory Disconnect-Cause: the answer carries Result-Code 5005 (no E bit,
/// it is not a protocol error) and a Failed-AVP naming Disconnect-Cause (273) with a zero-filled
/// 4-byte payload, as RFC 6733 §7.5 prescribes for a missing AVP.
#[test]
fn missing_avp_error_answer_encodes_byte_for_byte() {
    let dpr = Message::request(base::APP_ID, base::CMD_DISCONNECT_PEER)
        .ids(7, 8)
        .origin("a.example", "example");
    let err = diameter::validate(&dpr).unwrap_err();
    let ans = Message::error_answer(&dpr, &err, "b.ex", "ex");
    let expected = hex("
        01 00004c 00 00011a 00000000 00000007 00000008
        00000108 40 00000c 622e6578
        00000128 40 00000a 6578 0000
        0000010c 40 00000c 0000138d
        00000117 40 000014 00000111 40 00000c 00000000");
    assert_eq!(ans.to_bytes().unwrap().to_vec(), expected);
    assert_eq!(ans.failed_avps(), vec![Avp::new(273, None, true, vec![0u8; 4])]);
}
