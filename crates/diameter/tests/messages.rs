//! Round trips of realistic messages of every application, their validation against the
//! dictionary, and the typed accessors NF code reads them with.

mod common;

use std::net::{IpAddr, Ipv4Addr};

use bytes::Bytes;
use diameter::dictionary::{base, dcca, gx, rx, sh, sy, AvpDef};
use diameter::{
    validate, Avp, CcRequestType, ExperimentalResult, Message, SubscriptionId, SupportedFeatures,
    Time, VENDOR_3GPP,
};

fn round_trip(m: &Message) -> Message {
    let wire = m.to_bytes().unwrap();
    assert_eq!(wire.len(), m.encoded_len());
    assert_eq!(diameter::frame_len(&wire), Ok(Some(wire.len())));
    let back = Message::decode(wire.clone()).unwrap();
    assert_eq!(&back, m);
    // Re-encoding the decoded form gives the same bytes.
    assert_eq!(back.to_bytes().unwrap(), wire);
    back
}

#[test]
fn every_message_round_trips_and_validates() {
    for (name, m) in common::all_messages() {
        let back = round_trip(&m);
        validate(&back).unwrap_or_else(|e| panic!("{name}: {e}"));
        validate(&m).unwrap_or_else(|e| panic!("{name} (built): {e}"));
    }
}

#[test]
fn gx_ccr_i_accessors() {
    let m = round_trip(&common::gx_ccr_i());
    assert!(m.is_request() && m.is_proxiable() && !m.is_error());
    assert_eq!(m.application_id(), gx::APP_ID);
    assert_eq!(m.command_code(), 272);
    assert_eq!((m.hop_by_hop_id(), m.end_to_end_id()), (0x1234_5678, 0x9abc_def0));
    assert_eq!(m.session_id(), Some("pgw.epc.example.com;1700000000;1"));
    assert_eq!(m.origin_host(), Some(common::PCEF.0));
    assert_eq!(m.destination_realm(), Some(common::PCRF.1));
    assert_eq!(m.destination_host(), None);
    assert_eq!(m.cc_request_type(), Some(CcRequestType::Initial));
    assert_eq!(m.cc_request_number(), Some(0));
    assert_eq!(m.imsi().as_deref(), Some("001010000000001"));
    assert_eq!(m.msisdn().as_deref(), Some("15551234567"));
    assert_eq!(
        m.subscription_ids()[0],
        SubscriptionId { id_type: 1, data: "001010000000001".into() }
    );
    assert_eq!(m.framed_ip_address(), Some(Ipv4Addr::new(10, 45, 0, 2)));
    assert_eq!(m.framed_ipv6_prefix(), Some(("2001:db8:45::".parse().unwrap(), 64)));
    assert_eq!(m.called_station_id(), Some("internet"));
    assert_eq!(m.ip_can_type(), Some(gx::ip_can_type::TGPP_EPS));
    assert_eq!(m.rat_type(), Some(gx::rat_type::EUTRAN));
    assert_eq!(
        m.supported_features(),
        vec![SupportedFeatures { vendor_id: VENDOR_3GPP, feature_list_id: 1, feature_list: 3 }]
    );
    let qos = m.qos_information().unwrap();
    assert_eq!(qos.child(&gx::APN_AGGREGATE_MAX_BITRATE_DL).unwrap().as_u32(), Ok(100_000_000));
    let bearer = m.find(&gx::DEFAULT_EPS_BEARER_QOS).unwrap();
    let arp = bearer.child(&gx::ALLOCATION_RETENTION_PRIORITY).unwrap();
    assert_eq!(arp.child(&gx::PRIORITY_LEVEL).unwrap().as_u32(), Ok(8));
    assert_eq!(
        m.get_address(&gx::AN_GW_ADDRESS).and_then(|a| a.ip()),
        Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)))
    );
    // RAT-Type is a "must not" M-bit AVP, QoS-Information a "must" one.
    assert!(!m.find(&gx::RAT_TYPE).unwrap().is_mandatory());
    assert!(m.find(&gx::QOS_INFORMATION).unwrap().is_mandatory());
    assert_eq!(m.find(&gx::QOS_INFORMATION).unwrap().flags(), 0xc0);
}

#[test]
fn gx_cca_charging_rule_install() {
    let ccr = common::gx_ccr_i();
    let m = round_trip(&common::gx_cca_i(&ccr));
    assert!(!m.is_request() && m.is_proxiable());
    assert_eq!(m.header.hop_by_hop_id, ccr.header.hop_by_hop_id);
    assert_eq!(m.header.end_to_end_id, ccr.header.end_to_end_id);
    assert_eq!(m.session_id(), ccr.session_id());
    assert_eq!(m.avps[0], ccr.avps[0], "Session-Id first");
    assert!(m.is_success());
    assert_eq!(m.event_triggers(), vec![2, 33]);
    let install: Vec<&Avp> = m.charging_rule_installs().collect();
    assert_eq!(install.len(), 1);
    let def = install[0].child(&gx::CHARGING_RULE_DEFINITION).unwrap();
    assert_eq!(
        def.child(&gx::CHARGING_RULE_NAME).unwrap().as_bytes().unwrap(),
        Bytes::from_static(b"voice-rtp")
    );
    let qos = def.child(&gx::QOS_INFORMATION).unwrap();
    assert_eq!(qos.child(&gx::QOS_CLASS_IDENTIFIER).unwrap().as_enum(), Ok(1));
    assert_eq!(
        install[0].child(&gx::RULE_ACTIVATION_TIME).unwrap().as_time(),
        Ok(Time::from_unix_secs(1_700_000_000))
    );
    let umi = m.usage_monitoring_information().next().unwrap();
    let gsu = umi.child(&dcca::GRANTED_SERVICE_UNIT).unwrap();
    assert_eq!(gsu.child(&dcca::CC_TOTAL_OCTETS).unwrap().as_u64(), Ok(10_000_000_000));
    assert_eq!(m.get_time(&gx::REVALIDATION_TIME).unwrap().unix_secs(), 1_700_003_600);
}

#[test]
fn rx_aar_and_answers() {
    let aar = round_trip(&common::rx_aar());
    assert_eq!(aar.application_id(), rx::APP_ID);
    assert_eq!(aar.framed_ip_address(), Some(Ipv4Addr::new(10, 45, 0, 2)));
    assert_eq!(aar.af_application_identifier(), Some(Bytes::from_static(b"IMS Services")));
    assert_eq!(aar.ip_domain_id(), Some(Bytes::from_static(b"ims.example.com")));
    assert_eq!(aar.rx_request_type(), Some(0));
    assert_eq!(aar.specific_actions(), vec![2, 4]);
    let mcd: Vec<&Avp> = aar.media_component_descriptions().collect();
    assert_eq!(mcd.len(), 1);
    assert_eq!(mcd[0].child(&rx::MEDIA_COMPONENT_NUMBER).unwrap().as_u32(), Ok(1));
    let subs = mcd[0].children_of(&rx::MEDIA_SUB_COMPONENT);
    assert_eq!(subs.len(), 2);
    let flows: Vec<String> = subs[0]
        .children_of(&rx::FLOW_DESCRIPTION)
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(flows.len(), 2);
    assert!(flows[0].starts_with("permit out 17"));

    let aaa = round_trip(&common::rx_aaa_no_session(&aar));
    assert_eq!(aaa.result_code(), None);
    assert_eq!(
        aaa.experimental_result(),
        Some(ExperimentalResult {
            vendor_id: VENDOR_3GPP,
            code: rx::experimental_result::IP_CAN_SESSION_NOT_AVAILABLE
        })
    );
    assert_eq!(aaa.any_result_code(), Some(5065));
    assert!(!aaa.is_success());

    let asr = round_trip(&common::rx_asr());
    assert_eq!(asr.abort_cause(), Some(0));
    let sta = round_trip(&common::rx_sta(&common::rx_str()));
    assert_eq!(sta.result_code(), Some(2001));
    assert_eq!(round_trip(&common::rx_str()).termination_cause(), Some(1));
}

#[test]
fn rar_raa() {
    let rar = round_trip(&common::gx_rar());
    assert_eq!(rar.destination_host(), Some(common::PCEF.0));
    assert_eq!(rar.re_auth_request_type(), Some(0));
    let raa = round_trip(&common::gx_raa(&rar));
    let report = raa.charging_rule_reports().next().unwrap();
    assert_eq!(report.child(&gx::PCC_RULE_STATUS).unwrap().as_enum(), Ok(1));
    assert_eq!(gx::PCC_RULE_STATUS.enum_name(1), Some("INACTIVE"));
    let rx_raa = round_trip(&common::rx_raa(&common::rx_rar()));
    assert!(rx_raa.is_success());
}

#[test]
fn sy_slr_sla() {
    let slr = round_trip(&common::sy_slr());
    assert_eq!(slr.command_code(), 8388635);
    assert_eq!(slr.sl_request_type(), Some(0));
    assert_eq!(slr.policy_counter_identifiers(), vec!["monthly-volume", "roaming"]);
    let sla = round_trip(&common::sy_sla(&slr));
    assert_eq!(sla.policy_counter_statuses(), vec![("monthly-volume".into(), "valid".into())]);
    let snr = round_trip(&common::sy_snr());
    assert_eq!(snr.policy_counter_statuses()[0].1, "exhausted");
}

#[test]
fn sh_udr_uda() {
    let udr = round_trip(&common::sh_udr());
    assert_eq!(udr.user_public_identity().as_deref(), Some("sip:alice@ims.example.com"));
    assert_eq!(udr.data_references(), vec![0, 17]);
    assert_eq!(
        udr.get_bytes(&sh::SERVICE_INDICATION),
        Some(Bytes::from_static(b"fivecore-policy"))
    );
    let uda = round_trip(&common::sh_uda(&udr));
    assert_eq!(uda.user_data().as_deref(), Some(common::USER_DATA_XML.as_bytes()));
    assert!(uda.find(&base::VENDOR_SPECIFIC_APPLICATION_ID).is_some());
    let snr = round_trip(&common::sh_snr());
    assert_eq!(snr.subs_req_type(), Some(0));
    assert_eq!(snr.get_time(&sh::EXPIRY_TIME).unwrap().unix_secs(), 1_800_000_000);
}

#[test]
fn base_peer_messages() {
    let cer = round_trip(&common::cer());
    assert!(!cer.is_proxiable(), "CER is not proxiable");
    assert_eq!(cer.application_id(), 0);
    let apps: Vec<u32> = cer
        .find_all(&base::VENDOR_SPECIFIC_APPLICATION_ID)
        .filter_map(|g| g.child(&base::AUTH_APPLICATION_ID)?.as_u32().ok())
        .collect();
    assert_eq!(apps, vec![gx::APP_ID, rx::APP_ID, sy::APP_ID, sh::APP_ID]);
    assert_eq!(
        cer.get_address(&base::HOST_IP_ADDRESS).and_then(|a| a.ip()),
        Some(IpAddr::V4(Ipv4Addr::LOCALHOST))
    );
    let cea = round_trip(&common::cea(&cer));
    assert!(!cea.is_request() && !cea.is_proxiable());
    assert_eq!(cea.result_code(), Some(2001));
    let dwr = round_trip(&common::dwr());
    assert_eq!(dwr.origin_state_id(), Some(1_700_000_000));
    assert!(round_trip(&common::dwa(&dwr)).is_success());
    let dpr = round_trip(&common::dpr());
    assert_eq!(dpr.disconnect_cause(), Some(0));
    assert!(round_trip(&common::dpa(&dpr)).is_success());
}

#[test]
fn retransmit_flag_and_ids() {
    let mut m = common::dwr();
    m.set_retransmit(true);
    m.set_hop_by_hop_id(77);
    m.set_end_to_end_id(88);
    let back = round_trip(&m);
    assert!(back.is_retransmit());
    assert_eq!((back.hop_by_hop_id(), back.end_to_end_id()), (77, 88));
    m.set_retransmit(false);
    assert!(!round_trip(&m).is_retransmit());
}

#[test]
fn answer_echoes_proxy_info() {
    let proxy = base::PROXY_INFO.grouped(vec![
        base::PROXY_HOST.identity("dra.example.com"),
        base::PROXY_STATE.bytes(&b"state"[..]),
    ]);
    let req = common::rx_str().avp(proxy.clone());
    let ans = Message::answer_to(&round_trip(&req));
    assert_eq!(ans.find(&base::PROXY_INFO), Some(&proxy));
}

/// One AVP of every base data type, each through encode → decode → typed read.
#[test]
fn every_data_type_round_trips() {
    static I32: AvpDef = AvpDef::ietf("Test-I32", 90001, diameter::DataType::Integer32);
    static I64: AvpDef = AvpDef::ietf("Test-I64", 90002, diameter::DataType::Integer64);
    static F32: AvpDef = AvpDef::tgpp("Test-F32", 90003, diameter::DataType::Float32);
    static F64: AvpDef = AvpDef::tgpp("Test-F64", 90004, diameter::DataType::Float64);
    let v6: IpAddr = "2001:db8::7".parse().unwrap();
    let m = Message::request(0, 280)
        .avp(base::CLASS.bytes(&[0u8, 1, 2, 255][..])) // OctetString
        .avp(I32.i32(-5))
        .avp(I64.i64(-5_000_000_000))
        .avp(base::VENDOR_ID.u32(u32::MAX)) // Unsigned32
        .avp(base::ACCOUNTING_SUB_SESSION_ID.u64(u64::MAX)) // Unsigned64
        .avp(F32.f32(1.5))
        .avp(F64.f64(-2.25e300))
        .avp(base::PROXY_INFO.grouped(vec![
            base::PROXY_HOST.identity("x.example"),
            base::PROXY_STATE.bytes(&b"s"[..]),
        ])) // Grouped
        .avp(base::HOST_IP_ADDRESS.address(v6)) // Address
        .avp(base::EVENT_TIMESTAMP.time(Time::from_unix_secs(2_200_000_000))) // Time past 2036
        .avp(base::USER_NAME.utf8("ünïcode")) // UTF8String
        .avp(base::ORIGIN_HOST.identity("h.example")) // DiameterIdentity
        .avp(base::REDIRECT_HOST.uri("aaa://h.example:3868;transport=tcp")) // DiameterURI
        .avp(base::DISCONNECT_CAUSE.enumerated(2)); // Enumerated
    let b = round_trip(&m);
    assert_eq!(b.get_bytes(&base::CLASS).unwrap().as_ref(), &[0, 1, 2, 255]);
    assert_eq!(b.get_i32(&I32), Some(-5));
    assert_eq!(b.find(&I64).unwrap().as_i64(), Ok(-5_000_000_000));
    assert_eq!(b.get_u32(&base::VENDOR_ID), Some(u32::MAX));
    assert_eq!(b.get_u64(&base::ACCOUNTING_SUB_SESSION_ID), Some(u64::MAX));
    assert_eq!(b.find(&F32).unwrap().as_f32(), Ok(1.5));
    assert_eq!(b.find(&F64).unwrap().as_f64(), Ok(-2.25e300));
    assert_eq!(b.find(&F64).unwrap().vendor_id(), Some(VENDOR_3GPP));
    let pi = b.find(&base::PROXY_INFO).unwrap().children().unwrap();
    assert_eq!(pi[0].as_str(), Ok("x.example"));
    assert_eq!(b.get_address(&base::HOST_IP_ADDRESS).unwrap().ip(), Some(v6));
    assert_eq!(b.get_time(&base::EVENT_TIMESTAMP).unwrap().unix_secs(), 2_200_000_000);
    assert_eq!(b.get_str(&base::USER_NAME), Some("ünïcode"));
    assert_eq!(b.origin_host(), Some("h.example"));
    assert_eq!(b.get_str(&base::REDIRECT_HOST), Some("aaa://h.example:3868;transport=tcp"));
    assert_eq!(b.disconnect_cause(), Some(2));
    assert_eq!(base::DISCONNECT_CAUSE.enum_name(2), Some("DO_NOT_WANT_TO_TALK_TO_YOU"));
    // The test-only AVPs are unknown to the dictionary and carry the M bit: 5001 names the first.
    let err = diameter::validate_avps(&b.avps).unwrap_err();
    assert_eq!(err.result_code(), 5001);
    assert_eq!(err.failed_avp().unwrap().code(), 90001);
    let known: Vec<Avp> = b.avps.iter().filter(|a| a.code() < 90000).cloned().collect();
    diameter::validate_avps(&known).unwrap();
}
