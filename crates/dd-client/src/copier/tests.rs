//! The copier without a Data Director: what it encodes, how it names Diameter procedures, how
//! requests and answers pair, and its bound.

use super::*;
use crate::envelope::{Copy, Frames};
use http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use sbi::client::ClientConfig;

fn config(buffer_bytes: usize) -> CopyConfig {
    CopyConfig {
        enabled: true,
        // Nothing listens on port 1: every POST fails, so everything stays buffered.
        uri: "http://127.0.0.1:1".into(),
        buffer_bytes,
        batch_size: 4,
        linger_ms: 10_000,
        ..CopyConfig::default()
    }
}

fn copier(c: &CopyConfig) -> Copier {
    let client = SbiClient::new(&ClientConfig::default()).unwrap();
    Copier::start(c, "PCF", "5a7bd676-ceeb-44bb-95e0-f6a55a328b03", client).unwrap()
}

/// Every copy buffered so far, decoded, oldest first.
fn buffered(c: &Copier) -> Vec<Copy> {
    decode(&c.shared.lock())
}

fn decode(st: &State) -> Vec<Copy> {
    let mut all = BytesMut::new();
    for s in &st.sealed {
        all.extend_from_slice(&s.bytes);
    }
    all.extend_from_slice(&st.buf);
    Frames::new(all.freeze()).map(|f| Copy::decode(f.unwrap()).unwrap()).collect()
}

fn exchange(tap: &dyn MessageTap, supi_in: &str, status: StatusCode) {
    let uri: Uri = "http://127.0.0.1:7003/npcf-smpolicycontrol/v1/sm-policies".parse().unwrap();
    let mut h = HeaderMap::new();
    h.insert("content-type", HeaderValue::from_static("application/json"));
    let body = format!(r#"{{"supi":"{supi_in}","pduSessionId":1}}"#);
    let t0 = SystemTime::now();
    let mut ex = Exchange::default();
    let peer = Peer::Addr("127.0.0.1:40000".parse().unwrap());
    let m = MessageCopy {
        trigger: sbi_tap::TriggerPoint::IngressRequest,
        request_at: t0,
        answer_at: None,
        method: &Method::POST,
        uri: &uri,
        operation: "Npcf_SMPolicyControl_Create",
        stream_id: 0,
        peer,
        status: None,
        headers: &h,
        body: body.as_bytes(),
    };
    tap.copy(&m, &mut ex);
    let mut ah = HeaderMap::new();
    ah.insert(
        "location",
        HeaderValue::from_static("http://127.0.0.1:7003/npcf-smpolicycontrol/v1/sm-policies/42"),
    );
    let a = MessageCopy {
        trigger: sbi_tap::TriggerPoint::IngressResponse,
        answer_at: Some(SystemTime::now()),
        status: Some(status),
        headers: &ah,
        body: b"{}",
        ..m
    };
    tap.copy(&a, &mut ex);
}

#[tokio::test]
async fn an_n7_create_and_its_answer_are_encoded_with_their_metadata() {
    let c = copier(&config(1 << 20));
    let tap = c.sbi_tap();
    exchange(&*tap, "imsi-001010000000001", StatusCode::CREATED);
    exchange(&*tap, "imsi-001010000000002", StatusCode::CREATED);
    let copies = buffered(&c);
    assert_eq!(copies.len(), 4);
    let (req, ans) = (&copies[0], &copies[1]);
    assert_eq!(req.trigger, TriggerPoint::IngressRequest);
    assert_eq!(ans.trigger, TriggerPoint::IngressResponse);
    for x in [req, ans] {
        assert_eq!(x.nf_type(), "PCF");
        assert_eq!(x.nf_instance(), "5a7bd676-ceeb-44bb-95e0-f6a55a328b03");
        assert_eq!(x.service(), "npcf-smpolicycontrol");
        assert_eq!(x.operation(), "Npcf_SMPolicyControl_Create");
        assert_eq!(x.method(), "POST");
        assert_eq!(x.path(), "/npcf-smpolicycontrol/v1/sm-policies");
        assert_eq!(x.peer(), "127.0.0.1:40000");
        assert_eq!(x.supi(), "imsi-001010000000001");
        assert_eq!(x.protocol, Protocol::Http2);
    }
    assert_eq!(req.session_id(), "", "not known before the answer");
    assert_eq!(ans.session_id(), "42", "from the 201's Location");
    assert_eq!((req.status, ans.status), (0, 201));
    assert_eq!(req.transaction, ans.transaction);
    assert_ne!(req.transaction, copies[2].transaction);
    assert_eq!(
        copies.iter().map(|c| c.sequence).collect::<Vec<_>>(),
        [0, 1, 2, 3],
        "one sequence per NF instance, in buffer order"
    );
    assert!(ans.timestamp_ns >= req.timestamp_ns);
    let names = |c: &Copy| c.headers().map(|(n, _)| n.to_vec()).collect::<Vec<_>>();
    assert_eq!(names(req), [&b":method"[..], b":scheme", b":authority", b":path", b"content-type"]);
    assert_eq!(req.header(":authority"), Some(&b"127.0.0.1:7003"[..]));
    assert_eq!(names(ans), [&b":status"[..], b"location"]);
    assert_eq!(ans.header(":status"), Some(&b"201"[..]));
    assert_eq!(&req.body()[..], br#"{"supi":"imsi-001010000000001","pduSessionId":1}"#);
    assert_eq!(&ans.body()[..], b"{}");
    // batch_size 4: the four copies are one sealed batch.
    let st = c.shared.lock();
    assert_eq!((st.sealed.len(), st.count), (1, 0));
    assert_eq!(st.copies, [2, 2, 0, 0]);
}

#[tokio::test]
async fn only_the_configured_triggers_and_services_are_copied() {
    let c = copier(&CopyConfig { triggers: vec!["ingress_response".into()], ..config(1 << 20) });
    exchange(&*c.sbi_tap(), "imsi-1", StatusCode::CREATED);
    let copies = buffered(&c);
    assert_eq!(copies.len(), 1);
    assert_eq!(copies[0].trigger, TriggerPoint::IngressResponse);
    assert_eq!(copies[0].supi(), "imsi-1", "the request's SUPI, kept for its answer");
    assert_eq!(copies[0].transaction, 1);

    let c = copier(&CopyConfig { services: vec!["Gx".into()], ..config(1 << 20) });
    exchange(&*c.sbi_tap(), "imsi-1", StatusCode::CREATED);
    assert!(buffered(&c).is_empty());
    let c =
        copier(&CopyConfig { services: vec!["npcf-smpolicycontrol".into()], ..config(1 << 20) });
    exchange(&*c.sbi_tap(), "imsi-1", StatusCode::CREATED);
    assert_eq!(buffered(&c).len(), 2);
}

#[tokio::test]
async fn beyond_the_bound_the_newest_copies_are_dropped_and_counted() {
    let c = copier(&config(crate::config::MIN_BUFFER_BYTES));
    let tap = c.sbi_tap();
    for i in 0..1000 {
        exchange(&*tap, &format!("imsi-{i:015}"), StatusCode::CREATED);
    }
    let copies = {
        let st = c.shared.lock();
        let copies = decode(&st);
        assert!(st.buffered() <= crate::config::MIN_BUFFER_BYTES);
        assert!(st.dropped.buffer_full > 0);
        // Every copy is buffered, with the sender (retrying) or dropped.
        assert_eq!(st.dropped.buffer_full + copies.len() as u64 + st.in_flight.1 as u64, 2000);
        copies
    };
    // What is kept is the oldest: a contiguous run from the first sequence number.
    let first = copies.first().map_or(0, |c| c.sequence);
    for (i, c) in copies.iter().enumerate() {
        assert_eq!(c.sequence, first + i as u64);
    }
    let mut text = String::new();
    let mut r = Registry::default();
    c.register_metrics(&mut r);
    prometheus_client::encoding::text::encode(&mut text, &r).unwrap();
    assert!(text.contains("dd_copies_dropped_total{reason=\"buffer_full\"}"), "{text}");
    assert!(text.contains("dd_copy_buffer_bytes "), "{text}");
    c.stop(Duration::from_millis(10)).await;
    let (left, stopped) = {
        let st = c.shared.lock();
        (st.buffered(), st.dropped.stopped)
    };
    assert_eq!(left, 0);
    assert!(stopped > 0, "what could not be sent before the stop is counted");
}

#[tokio::test]
async fn copies_after_the_stop_are_dropped_as_stopped() {
    let c = copier(&config(1 << 20));
    c.stop(Duration::from_millis(10)).await;
    exchange(&*c.sbi_tap(), "imsi-1", StatusCode::CREATED);
    assert_eq!(c.shared.lock().dropped.stopped, 2);
    assert!(buffered(&c).is_empty());
}

#[test]
fn diameter_procedures_are_named_after_the_request() {
    let ids = |app, cmd, request, crt| extract::DiameterIds {
        request,
        application_id: app,
        command_code: cmd,
        cc_request_type: crt,
        ..Default::default()
    };
    use diameter::dictionary::{gx, rx, sy};
    assert_eq!(command_names(&ids(gx::APP_ID, 272, true, Some(1))), ("CCR", "CCR-I"));
    assert_eq!(command_names(&ids(gx::APP_ID, 272, false, Some(1))), ("CCA", "CCR-I"));
    assert_eq!(command_names(&ids(gx::APP_ID, 272, true, Some(3))), ("CCR", "CCR-T"));
    assert_eq!(command_names(&ids(gx::APP_ID, 258, false, None)), ("RAA", "RAR"));
    assert_eq!(command_names(&ids(rx::APP_ID, 265, true, None)), ("AAR", "AAR"));
    assert_eq!(command_names(&ids(sy::APP_ID, 8388635, true, None)), ("SLR", "SLR"));
    assert_eq!(command_names(&ids(gx::APP_ID, 999, true, None)), ("", ""));
    assert_eq!(application_name(gx::APP_ID), "Gx");
    assert_eq!(application_name(gx::SD_APP_ID), "Sd");
    assert_eq!(application_name(diameter::dictionary::sh::APP_ID), "Sh");
    assert_eq!(application_name(77), "");
}

#[test]
fn a_diameter_request_and_its_answer_share_a_transaction() {
    let a = diameter_transaction(3, 0x10, 0x20, true);
    assert_eq!(a, diameter_transaction(3, 0x10, 0x20, true));
    assert_ne!(a, diameter_transaction(3, 0x10, 0x20, false), "the egress pair differs");
    assert_ne!(a, diameter_transaction(4, 0x10, 0x20, true), "another connection differs");
    assert_ne!(a, diameter_transaction(3, 0x11, 0x20, true));
    assert!(a >> 63 == 1, "apart from the SBI counter");
}

#[tokio::test]
async fn diameter_copies_carry_the_wire_bytes_and_their_ids() {
    use diameter::dictionary::{base, dcca, gx};
    let c = copier(&config(1 << 20));
    let tap = c.diameter_tap();
    let ccr = diameter::Message::request(gx::APP_ID, gx::CMD_CREDIT_CONTROL)
        .ids(7, 9)
        .session_id_avp("pgw;1;1")
        .avp(base::AUTH_APPLICATION_ID.u32(gx::APP_ID))
        .origin("pgw.epc", "epc")
        .destination("pcf", None)
        .avp(dcca::CC_REQUEST_TYPE.enumerated(1))
        .avp(dcca::CC_REQUEST_NUMBER.u32(0))
        .avp(dcca::SUBSCRIPTION_ID.grouped(vec![
            dcca::SUBSCRIPTION_ID_TYPE.enumerated(1),
            dcca::SUBSCRIPTION_ID_DATA.utf8("001010000000001"),
        ]));
    let wire = ccr.to_bytes().unwrap();
    let cca = diameter::Message::answer_to(&ccr)
        .result_code_avp(2001)
        .avp(dcca::CC_REQUEST_TYPE.enumerated(1))
        .to_bytes()
        .unwrap();
    let peer: SocketAddr = "127.0.0.1:3868".parse().unwrap();
    let m = |direction, wire: &[u8]| {
        tap.copy(&TappedMessage {
            direction,
            wire,
            connection: 1,
            peer_addr: peer,
            peer_host: "pgw.epc",
        })
    };
    m(Direction::Received, &wire);
    m(Direction::Sent, &cca);
    // The same exchange with the PCF as the client: the egress pair.
    m(Direction::Sent, &wire);
    m(Direction::Received, &cca);
    // Base protocol never reaches a tap (the node filters it); a truncated message is ignored.
    m(Direction::Received, &wire[..10]);
    let copies = buffered(&c);
    let triggers: Vec<_> = copies.iter().map(|c| c.trigger).collect();
    use TriggerPoint::*;
    assert_eq!(triggers, [IngressRequest, IngressResponse, EgressRequest, EgressResponse]);
    for x in &copies {
        assert_eq!(x.protocol, Protocol::Diameter);
        assert_eq!((x.service(), x.operation()), ("Gx", "CCR-I"));
        assert_eq!(x.session_id(), "pgw;1;1");
        assert_eq!(x.peer(), "127.0.0.1:3868");
        assert_eq!(x.stream_id, 7, "the hop-by-hop id");
        assert_eq!(x.header_count(), 0);
    }
    assert_eq!((copies[0].method(), copies[1].method()), ("CCR", "CCA"));
    assert_eq!(copies[0].supi(), "imsi-001010000000001");
    assert_eq!(copies[1].supi(), "imsi-001010000000001", "the session's, a CCA names none");
    assert_eq!((copies[0].status, copies[1].status), (0, 2001));
    assert_eq!(&copies[0].body()[..], &wire[..]);
    assert_eq!(&copies[1].body()[..], &cca[..]);
    assert_eq!(copies[0].transaction, copies[1].transaction);
    assert_eq!(copies[2].transaction, copies[3].transaction);
    assert_ne!(copies[0].transaction, copies[2].transaction);
}

/// A Gx message of session `sid`: a CCR of `kind` (1 initial, 2 update, 3 termination), with
/// the subscriber's IMSI when `imsi`, or its CCA.
fn gx_message(sid: &str, kind: u32, imsi: bool, answer: bool) -> Vec<u8> {
    use diameter::dictionary::{base, dcca, gx};
    let mut ccr = diameter::Message::request(gx::APP_ID, gx::CMD_CREDIT_CONTROL)
        .ids(kind, kind)
        .session_id_avp(sid)
        .avp(base::AUTH_APPLICATION_ID.u32(gx::APP_ID))
        .origin("pgw.epc", "epc")
        .destination("pcf", None)
        .avp(dcca::CC_REQUEST_TYPE.enumerated(kind))
        .avp(dcca::CC_REQUEST_NUMBER.u32(kind - 1));
    if imsi {
        ccr = ccr.avp(dcca::SUBSCRIPTION_ID.grouped(vec![
            dcca::SUBSCRIPTION_ID_TYPE.enumerated(1),
            dcca::SUBSCRIPTION_ID_DATA.utf8("001010000000001"),
        ]));
    }
    if !answer {
        return ccr.to_bytes().unwrap().to_vec();
    }
    diameter::Message::answer_to(&ccr)
        .result_code_avp(2001)
        .avp(dcca::CC_REQUEST_TYPE.enumerated(kind))
        .to_bytes()
        .unwrap()
        .to_vec()
}

#[tokio::test]
async fn a_diameter_sessions_later_messages_carry_the_subscriber_its_first_named() {
    // Only answers copied: the CCR-I's subscriber is learned all the same.
    let only_answers = CopyConfig { triggers: vec!["ingress_response".into()], ..config(1 << 20) };
    let c = copier(&only_answers);
    let tap = c.diameter_tap();
    let peer: SocketAddr = "127.0.0.1:3868".parse().unwrap();
    let m = |direction, wire: &[u8]| {
        tap.copy(&TappedMessage {
            direction,
            wire,
            connection: 1,
            peer_addr: peer,
            peer_host: "pgw",
        })
    };
    let (rcv, snd) = (Direction::Received, Direction::Sent);
    for (kind, imsi) in [(1, true), (2, false), (3, false)] {
        m(rcv, &gx_message("s;1", kind, imsi, false));
        m(snd, &gx_message("s;1", kind, false, true));
    }
    // Over: the CCR-T's answer ended the session. Another session never named a subscriber.
    m(rcv, &gx_message("s;1", 2, false, false));
    m(snd, &gx_message("s;1", 2, false, true));
    m(snd, &gx_message("s;2", 1, false, true));
    let got: Vec<(String, String)> =
        buffered(&c).iter().map(|x| (x.operation().to_owned(), x.supi().to_owned())).collect();
    let imsi = "imsi-001010000000001".to_owned();
    let named = |op: &str, supi: &str| (op.to_owned(), supi.to_owned());
    assert_eq!(
        got,
        [
            named("CCR-I", &imsi),
            named("CCR-U", &imsi),
            named("CCR-T", &imsi),
            named("CCR-U", ""),
            named("CCR-I", "")
        ]
    );
}

#[test]
fn session_subscribers_are_bounded_by_two_generations() {
    let mut ids = SessionIds::new(2);
    let supi = |x: &Subscriber| x.supi.as_deref().map(str::to_owned);
    let learn =
        |ids: &mut SessionIds, s: &str| ids.recall(s, Some(&format!("imsi-{s}")), None, false);
    learn(&mut ids, "a");
    learn(&mut ids, "b");
    // c starts a generation: a and b are the previous one, still known; a comes back.
    learn(&mut ids, "c");
    assert_eq!(supi(&ids.recall("a", None, None, false)).as_deref(), Some("imsi-a"));
    // d and e: a generation full of a and c moves down; b, unheard of, is forgotten.
    learn(&mut ids, "d");
    learn(&mut ids, "e");
    assert_eq!(supi(&ids.recall("b", None, None, false)), None);
    assert_eq!(supi(&ids.recall("a", None, None, false)).as_deref(), Some("imsi-a"));
    assert!(ids.current.len() + ids.previous.len() <= 4);
    // A message naming another subscriber replaces it; a GPSI is added beside the SUPI.
    let x = ids.recall("a", Some("imsi-z"), Some("msisdn-1"), false);
    assert_eq!((x.supi.as_deref(), x.gpsi.as_deref()), (Some("imsi-z"), Some("msisdn-1")));
    // A session's end forgets it, after giving what it knew.
    assert_eq!(supi(&ids.recall("a", None, None, true)).as_deref(), Some("imsi-z"));
    assert_eq!(supi(&ids.recall("a", None, None, false)), None);
    // A session that never named anyone takes no room.
    let before = ids.current.len() + ids.previous.len();
    ids.recall("nobody", None, None, false);
    assert_eq!(ids.current.len() + ids.previous.len(), before);
}

#[tokio::test]
async fn while_a_batch_waits_for_the_sender_the_next_one_grows_instead_of_sealing() {
    // The sender task cannot run: this test never yields to the runtime.
    let c = copier(&config(1 << 20));
    let tap = c.sbi_tap();
    for i in 0..6 {
        exchange(&*tap, &format!("imsi-{i}"), StatusCode::CREATED);
    }
    let st = c.shared.lock();
    assert_eq!(st.sealed.len(), 1, "batch_size 4: the first four copies");
    assert_eq!(st.sealed[0].copies, 4);
    assert_eq!(st.count, 8, "the rest wait in one growing batch");
}

#[test]
fn addresses_are_formatted_as_std_does() {
    for a in ["127.0.0.1:40000", "0.0.0.0:0", "255.255.255.255:65535", "10.45.0.7:7"] {
        let a: SocketAddr = a.parse().unwrap();
        assert_eq!(format_addr(a).as_str(), a.to_string());
    }
    let v6: SocketAddr = "[2001:db8::1]:3868".parse().unwrap();
    assert_eq!(format_addr(v6).as_str(), "[2001:db8::1]:3868");
}
