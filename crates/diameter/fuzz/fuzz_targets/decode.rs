//! Fuzzes framing, decoding, validation, grouped-AVP walking and re-encoding of arbitrary bytes.
#![no_main]

use bytes::Bytes;
use diameter::{frame_len, validate, Avp, Header, Message};
use libfuzzer_sys::fuzz_target;

fn walk(avps: &[Avp], depth: usize) {
    for a in avps {
        let _ = (a.as_u32(), a.as_u64(), a.as_str(), a.as_address(), a.as_ipv4_octets());
        if depth < 8 {
            if let Ok(children) = a.children() {
                walk(&children, depth + 1);
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let _ = frame_len(data);
    let _ = Header::peek(data);
    if let Ok(m) = Message::decode(Bytes::copy_from_slice(data)) {
        if let Err(e) = validate(&m) {
            let ans = Message::error_answer(&m, &e, "fuzz.example", "example");
            let _ = ans.to_bytes();
        }
        walk(&m.avps, 0);
        let _ = (m.session_id(), m.subscription_ids(), m.framed_ipv6_prefix());
        if let Ok(wire) = m.to_bytes() {
            // Whatever decoded must re-encode to something that decodes the same.
            let again = Message::decode(wire).expect("re-encoded message decodes");
            assert_eq!(again, m);
        }
    }
});
