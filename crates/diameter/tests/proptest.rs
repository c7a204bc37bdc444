//! Property tests: arbitrary AVP trees survive encode → decode; arbitrary or mutated bytes never
//! panic the decoder, the validator or the accessors.

mod common;

use bytes::Bytes;
use diameter::header::{FLAG_ERROR, FLAG_PROXIABLE, FLAG_REQUEST, FLAG_RETRANSMIT};
use diameter::{frame_len, validate, Avp, Header, Message};
use proptest::prelude::*;

fn leaf() -> impl Strategy<Value = Avp> {
    (
        any::<u32>(),
        proptest::option::of(any::<u32>()),
        any::<bool>(),
        prop::collection::vec(any::<u8>(), 0..40),
    )
        .prop_map(|(code, vendor, m, data)| Avp::new(code, vendor, m, data))
}

fn tree() -> impl Strategy<Value = Avp> {
    leaf().prop_recursive(4, 48, 6, |inner| {
        (
            any::<u32>(),
            proptest::option::of(any::<u32>()),
            any::<bool>(),
            prop::collection::vec(inner, 0..6),
        )
            .prop_map(|(code, vendor, m, children)| Avp::new_grouped(code, vendor, m, children))
    })
}

fn header() -> impl Strategy<Value = Header> {
    (
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        0u32..0x0100_0000,
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
    )
        .prop_map(
            |(r, p, e, t, command_code, application_id, hop_by_hop_id, end_to_end_id)| {
                let mut flags = 0;
                if r {
                    flags |= FLAG_REQUEST;
                } else if e {
                    flags |= FLAG_ERROR; // E only on answers
                }
                if p {
                    flags |= FLAG_PROXIABLE;
                }
                if t {
                    flags |= FLAG_RETRANSMIT;
                }
                Header { flags, command_code, application_id, hop_by_hop_id, end_to_end_id }
            },
        )
}

/// Reads everything a receiver might read, recursing into anything that parses as grouped.
fn exercise(avps: &[Avp], depth: usize) {
    for a in avps {
        let _ = (a.as_u32(), a.as_u64(), a.as_i32(), a.as_f64(), a.as_str(), a.as_address());
        let _ = (a.as_time(), a.as_ipv4_octets(), a.payload_len(), a.encoded_len());
        if depth < 4 {
            if let Ok(children) = a.children() {
                exercise(&children, depth + 1);
            }
        }
    }
}

fn exercise_message(m: &Message) {
    let _ = validate(m);
    exercise(&m.avps, 0);
    let _ = (m.session_id(), m.cc_request_type(), m.framed_ip_address(), m.framed_ipv6_prefix());
    let _ = (m.subscription_ids(), m.supported_features(), m.experimental_result());
    let _ = (m.user_public_identity(), m.policy_counter_statuses(), m.failed_avps());
    let _ = m.to_bytes();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn avp_trees_round_trip(h in header(), avps in prop::collection::vec(tree(), 0..8)) {
        let m = Message { header: h, avps };
        let wire = m.to_bytes().unwrap();
        prop_assert_eq!(wire.len(), m.encoded_len());
        prop_assert_eq!(wire.len() % 4, 0);
        prop_assert_eq!(frame_len(&wire).unwrap(), Some(wire.len()));
        let back = Message::decode(wire.clone()).unwrap();
        prop_assert_eq!(&back, &m);
        // Grouped children decode back to the same trees.
        for (b, a) in back.avps.iter().zip(&m.avps) {
            if let Ok(children) = a.children() {
                if !children.is_empty() {
                    prop_assert_eq!(b.children().unwrap().into_owned(), children.into_owned());
                }
            }
        }
        prop_assert_eq!(back.to_bytes().unwrap(), wire);
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = frame_len(&data);
        let _ = Header::peek(&data);
        if let Ok(m) = Message::decode(Bytes::from(data)) {
            exercise_message(&m);
        }
    }

    #[test]
    fn arbitrary_bodies_never_panic(h in header(), body in prop::collection::vec(any::<u8>(), 0..512)) {
        // A valid header in front of random AVP bytes reaches the AVP parser every time.
        let mut body = body;
        body.truncate(body.len() / 4 * 4);
        let m = Message { header: h, avps: vec![] };
        let mut wire = m.to_bytes().unwrap().to_vec();
        wire.extend_from_slice(&body);
        let len = wire.len() as u32;
        wire[1..4].copy_from_slice(&len.to_be_bytes()[1..]);
        if let Ok(m) = Message::decode(Bytes::from(wire)) {
            exercise_message(&m);
        }
    }

    #[test]
    fn mutated_real_messages_never_panic(
        which in 0usize..26,
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let all = common::all_messages();
        let mut wire = all[which % all.len()].1.to_bytes().unwrap().to_vec();
        for (i, b) in edits {
            // Keep the length field, so the mutation reaches AVP parsing most of the time.
            let at = 4 + i.index(wire.len() - 4);
            wire[at] = b;
        }
        if let Ok(m) = Message::decode(Bytes::from(wire)) {
            exercise_message(&m);
        }
    }
}
