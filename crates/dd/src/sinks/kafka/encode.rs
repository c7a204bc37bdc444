//! What a feed's Kafka record is made of: the envelope as it is (one envelope per record, the
//! layout of `dd_client::envelope`, so a consumer in any language reads it, and another Data
//! Director's Kafka source takes it as it is), keyed by the copy's SUPI.

use super::config::SinkKey;

/// The key of `envelope`'s record: its SUPI (or IMSI) under [`SinkKey::Supi`], so one
/// subscriber's copies stay in one partition, in order; none when the copy has no SUPI (it goes
/// to any partition) or under [`SinkKey::None`].
pub fn key(envelope: &[u8], by: SinkKey) -> Option<&[u8]> {
    match by {
        SinkKey::None => None,
        SinkKey::Supi => supi(envelope).filter(|s| !s.is_empty()),
    }
}

/// The SUPI field of an encoded envelope, read in place: the 36 fixed bytes, then seven
/// length-prefixed strings to skip (NF type to peer), then the SUPI. `None` when the bytes end
/// first. Envelopes are checked at ingest; a feed only reads the one field it needs.
pub fn supi(envelope: &[u8]) -> Option<&[u8]> {
    const FIXED: usize = 36;
    const BEFORE_SUPI: usize = 7;
    let mut at = FIXED;
    for _ in 0..BEFORE_SUPI {
        let len = u16::from_be_bytes(envelope.get(at..at + 2)?.try_into().ok()?) as usize;
        at += 2 + len;
    }
    let len = u16::from_be_bytes(envelope.get(at..at + 2)?.try_into().ok()?) as usize;
    envelope.get(at + 2..at + 2 + len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use dd_client::envelope::{encode, CopyMeta, Protocol, TriggerPoint};

    fn envelope(supi: &str) -> BytesMut {
        let m = CopyMeta {
            trigger: TriggerPoint::EgressResponse,
            protocol: Protocol::Diameter,
            timestamp_ns: 1,
            sequence: 2,
            transaction: 3,
            stream_id: 4,
            status: 2001,
            nf_type: "PCF",
            nf_instance: "pcf-1",
            service: "Gx",
            operation: "CCR-I",
            method: "CCR",
            path: "",
            peer: "pgw.example.com",
            supi,
            gpsi: "msisdn-491700000001",
            session_id: "pgw;1;2",
        };
        let mut out = BytesMut::new();
        encode(&m, [], b"\x01\x00\x00\x14", &mut out).unwrap();
        out
    }

    #[test]
    fn the_key_is_the_supi_read_in_place() {
        let e = envelope("imsi-001010000000001");
        assert_eq!(supi(&e), Some(&b"imsi-001010000000001"[..]));
        assert_eq!(key(&e, SinkKey::Supi), Some(&b"imsi-001010000000001"[..]));
        assert_eq!(key(&e, SinkKey::None), None);
        // What decode says, for every field length.
        let c = dd_client::Copy::decode(e.freeze()).unwrap();
        assert_eq!(c.supi(), "imsi-001010000000001");
    }

    #[test]
    fn a_copy_without_supi_has_no_key() {
        let e = envelope("");
        assert_eq!(supi(&e), Some(&b""[..]));
        assert_eq!(key(&e, SinkKey::Supi), None);
    }

    #[test]
    fn bytes_that_end_early_have_no_key_and_do_not_panic() {
        let e = envelope("imsi-001010000000001");
        for n in 0..e.len() {
            let cut = &e[..n];
            match supi(cut) {
                None => {}
                Some(s) => assert_eq!(s, b"imsi-001010000000001", "cut at {n}"),
            }
        }
        assert_eq!(supi(&[0xff; 60]), None);
    }
}
