//! The Diameter work of one proxied Rx transaction, N times, for instruction counts under
//! callgrind (no timing, no I/O): the AF's AAR is decoded and validated, its Destination-* are
//! replaced and a Route-Record added as the BSF's Rx proxy does, it is encoded toward the PCF;
//! the PCF's AAA is decoded, its hop-by-hop id restored and encoded back toward the AF.
//!
//! ```text
//! cargo build --release -p fivecore-diameter --example codec_bench
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out \
//!     $CARGO_TARGET_DIR/release/examples/codec_bench 10000
//! ```
//!
//! Messages are shaped like the kit's (`crates/bench/src/rx/messages.rs`).

use std::hint::black_box;
use std::net::Ipv4Addr;

use bytes::{Bytes, BytesMut};
use diameter::builders::subscription_id;
use diameter::dictionary::{base, dcca, nasreq, rx};
use diameter::{result_code as rc, validate, Message};

const AF: &str = "pcscf1.ims.fivecore.local";
const PCF: &str = "pcf1.pcf.fivecore.local";
const SID: &str = "pcscf1.ims.fivecore.local;1;123456";

fn aar(ue: Ipv4Addr) -> Message {
    Message::request(rx::APP_ID, rx::CMD_AA)
        .ids(7, 8)
        .session_id_avp(SID)
        .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
        .origin(AF, "ims.fivecore.local")
        .destination("fivecore.local", None)
        .avp(rx::AF_APPLICATION_IDENTIFIER.bytes(&b"IMS Services"[..]))
        .avp(rx::MEDIA_COMPONENT_DESCRIPTION.grouped(vec![
            rx::MEDIA_COMPONENT_NUMBER.u32(1),
            rx::MEDIA_SUB_COMPONENT.grouped(vec![
                rx::FLOW_NUMBER.u32(1),
                rx::FLOW_DESCRIPTION
                    .utf8(&format!("permit out 17 from 192.0.2.10 30000 to {ue} 49152")),
                rx::FLOW_DESCRIPTION
                    .utf8(&format!("permit in 17 from {ue} 49152 to 192.0.2.10 30000")),
            ]),
            rx::MEDIA_SUB_COMPONENT
                .grouped(vec![rx::FLOW_NUMBER.u32(2), rx::FLOW_USAGE.enumerated(1)]),
            rx::MEDIA_TYPE.enumerated(0),
            rx::MAX_REQUESTED_BANDWIDTH_UL.u32(64_000),
            rx::MAX_REQUESTED_BANDWIDTH_DL.u32(64_000),
            rx::FLOW_STATUS.enumerated(2),
        ]))
        .avp(rx::SERVICE_INFO_STATUS.enumerated(0))
        .avp(rx::SPECIFIC_ACTION.enumerated(1))
        .avp(rx::SPECIFIC_ACTION.enumerated(2))
        .avp(rx::SPECIFIC_ACTION.enumerated(3))
        .avp(subscription_id(dcca::subscription_id_type::END_USER_E164, "15551234567"))
        .avp(nasreq::FRAMED_IP_ADDRESS.ipv4_octets(ue))
        .avp(rx::RX_REQUEST_TYPE.enumerated(0))
}

fn aaa(req: &Message) -> Message {
    Message::answer_to(req)
        .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
        .origin(PCF, "pcf.fivecore.local")
        .result_code_avp(rc::DIAMETER_SUCCESS)
}

/// What the proxy does to a request it forwards (crates/bsf/src/rx.rs `Proxy::forward`).
fn forward(mut m: Message) -> Message {
    let route_record = m.origin_host().map(|from| base::ROUTE_RECORD.identity(from));
    m.avps.retain(|a| {
        a.vendor() != 0
            || (a.code() != base::DESTINATION_HOST.code && a.code() != base::DESTINATION_REALM.code)
    });
    m.push(base::DESTINATION_REALM.identity("pcf.fivecore.local"));
    m.push(base::DESTINATION_HOST.identity(PCF));
    m.avps.extend(route_record);
    m
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let req = aar(Ipv4Addr::new(10, 45, 0, 2));
    let req_wire: Bytes = req.to_bytes().expect("encodes");
    let ans_wire: Bytes = aaa(&forward(req)).to_bytes().expect("encodes");
    let mut out = BytesMut::with_capacity(8192);
    for _ in 0..n {
        // AF -> BSF: the frame reader hands each message over as its own copy.
        let m = Message::decode(Bytes::copy_from_slice(black_box(&req_wire))).expect("decodes");
        validate(&m).expect("valid");
        let sid_known = m.session_id().is_some_and(|s| s.len() == SID.len());
        let fwd = forward(m);
        out.clear();
        fwd.encode(&mut out).expect("encodes");
        black_box((&out, sid_known));
        // PCF -> BSF -> AF.
        let mut a = Message::decode(Bytes::copy_from_slice(black_box(&ans_wire))).expect("decodes");
        a.set_hop_by_hop_id(7);
        out.clear();
        a.encode(&mut out).expect("encodes");
        black_box(&out);
        drop((fwd, a));
    }
}
