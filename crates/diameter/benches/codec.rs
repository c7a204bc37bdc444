//! Encode and decode rates of a typical Gx CCR-I and Rx AAR.
//!
//! `cargo bench -p fivecore-diameter --bench codec -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::net::Ipv4Addr;

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use diameter::builders::{subscription_id, supported_features};
use diameter::dictionary::{base, dcca, gx, nasreq, rx};
use diameter::{validate, Message};

fn ccr_i() -> Message {
    Message::request(gx::APP_ID, gx::CMD_CREDIT_CONTROL)
        .ids(0x1234_5678, 0x9abc_def0)
        .session_id_avp("pgw.example.com;1700000000;1")
        .avp(base::AUTH_APPLICATION_ID.u32(gx::APP_ID))
        .origin("pgw.example.com", "example.com")
        .destination("pcrf.example.com", None)
        .avp(dcca::CC_REQUEST_TYPE.enumerated(1))
        .avp(dcca::CC_REQUEST_NUMBER.u32(0))
        .avp(subscription_id(dcca::subscription_id_type::END_USER_IMSI, "001010000000001"))
        .avp(subscription_id(dcca::subscription_id_type::END_USER_E164, "15551234567"))
        .avp(supported_features(1, 0x3))
        .avp(gx::NETWORK_REQUEST_SUPPORT.enumerated(1))
        .avp(nasreq::FRAMED_IP_ADDRESS.ipv4_octets(Ipv4Addr::new(10, 45, 0, 2)))
        .avp(gx::IP_CAN_TYPE.enumerated(gx::ip_can_type::TGPP_EPS))
        .avp(gx::RAT_TYPE.enumerated(gx::rat_type::EUTRAN))
        .avp(gx::QOS_INFORMATION.grouped(vec![
            gx::APN_AGGREGATE_MAX_BITRATE_UL.u32(50_000_000),
            gx::APN_AGGREGATE_MAX_BITRATE_DL.u32(100_000_000),
        ]))
        .avp(gx::DEFAULT_EPS_BEARER_QOS.grouped(vec![
            gx::QOS_CLASS_IDENTIFIER.enumerated(9),
            gx::ALLOCATION_RETENTION_PRIORITY.grouped(vec![
                gx::PRIORITY_LEVEL.u32(8),
                gx::PRE_EMPTION_CAPABILITY.enumerated(1),
                gx::PRE_EMPTION_VULNERABILITY.enumerated(0),
            ]),
        ]))
        .avp(
            gx::TGPP_USER_LOCATION_INFO
                .bytes(&b"\x82\x00\xf1\x10\x00\x01\x00\xf1\x10\x00\x00\x01\x01"[..]),
        )
        .avp(gx::TGPP_MS_TIMEZONE.bytes(&[0x40, 0x00][..]))
        .avp(nasreq::CALLED_STATION_ID.utf8("internet"))
}

fn aar() -> Message {
    Message::request(rx::APP_ID, rx::CMD_AA)
        .ids(1, 2)
        .session_id_avp("pcscf.ims.example.com;1700000000;7")
        .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
        .origin("pcscf.ims.example.com", "ims.example.com")
        .destination("example.com", None)
        .avp(rx::AF_APPLICATION_IDENTIFIER.bytes(&b"IMS Services"[..]))
        .avp(rx::MEDIA_COMPONENT_DESCRIPTION.grouped(vec![
            rx::MEDIA_COMPONENT_NUMBER.u32(1),
            rx::MEDIA_SUB_COMPONENT.grouped(vec![
                rx::FLOW_NUMBER.u32(1),
                rx::FLOW_DESCRIPTION.utf8("permit out 17 from 10.45.0.2 49152 to 192.0.2.10 30000"),
                rx::FLOW_DESCRIPTION.utf8("permit in 17 from 192.0.2.10 30000 to 10.45.0.2 49152"),
            ]),
            rx::MEDIA_TYPE.enumerated(0),
            rx::MAX_REQUESTED_BANDWIDTH_UL.u32(64_000),
            rx::MAX_REQUESTED_BANDWIDTH_DL.u32(64_000),
            rx::CODEC_DATA.bytes(&b"uplink\noffer\nm=audio 49152 RTP/AVP 96\n"[..]),
        ]))
        .avp(subscription_id(
            dcca::subscription_id_type::END_USER_SIP_URI,
            "sip:alice@ims.example.com",
        ))
        .avp(nasreq::FRAMED_IP_ADDRESS.ipv4_octets(Ipv4Addr::new(10, 45, 0, 2)))
        .avp(rx::SPECIFIC_ACTION.enumerated(rx::specific_action::INDICATION_OF_LOSS_OF_BEARER))
}

fn bench(c: &mut Criterion) {
    for (name, msg) in [("gx_ccr_i", ccr_i()), ("rx_aar", aar())] {
        let wire: Bytes = msg.to_bytes().expect("encodes");
        let mut g = c.benchmark_group(name);
        g.throughput(Throughput::Elements(1));
        let mut buf = BytesMut::with_capacity(4096);
        g.bench_function("encode", |b| {
            b.iter(|| {
                buf.clear();
                black_box(&msg).encode(&mut buf).expect("encodes");
                black_box(buf.len())
            })
        });
        g.bench_function("decode", |b| {
            b.iter(|| black_box(Message::decode(black_box(wire.clone())).expect("decodes")))
        });
        g.bench_function("decode_validate", |b| {
            b.iter(|| {
                let m = Message::decode(black_box(wire.clone())).expect("decodes");
                validate(&m).expect("valid");
                black_box(m)
            })
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
