//! Realistic messages of every application, shared by the integration tests.
#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr};

use diameter::builders::{
    experimental_result, subscription_id, supported_features, user_identity_public,
    vendor_specific_auth_app,
};
use diameter::dictionary::dcca::subscription_id_type;
use diameter::dictionary::{base, dcca, gx, nasreq, rx, sh, sy};
use diameter::{result_code, Message, Time, VENDOR_3GPP};

pub const PCEF: (&str, &str) = ("pgw.epc.example.com", "epc.example.com");
pub const PCRF: (&str, &str) = ("pcrf.epc.example.com", "epc.example.com");
pub const AF: (&str, &str) = ("pcscf.ims.example.com", "ims.example.com");
pub const OCS: (&str, &str) = ("ocs.epc.example.com", "epc.example.com");
pub const AS: (&str, &str) = ("tas.ims.example.com", "ims.example.com");
pub const HSS: (&str, &str) = ("udr.ims.example.com", "ims.example.com");

pub fn cer() -> Message {
    Message::request(base::APP_ID, base::CMD_CAPABILITIES_EXCHANGE)
        .ids(0x0000_0001, 0x5e00_0001)
        .origin(PCRF.0, PCRF.1)
        .avp(base::HOST_IP_ADDRESS.address(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1))))
        .avp(base::VENDOR_ID.u32(0))
        .avp(base::PRODUCT_NAME.utf8("fivecore"))
        .avp(base::ORIGIN_STATE_ID.u32(1_700_000_000))
        .avp(base::SUPPORTED_VENDOR_ID.u32(VENDOR_3GPP))
        .avp(base::AUTH_APPLICATION_ID.u32(dcca::APP_ID))
        .avp(base::INBAND_SECURITY_ID.u32(0))
        .avp(vendor_specific_auth_app(VENDOR_3GPP, gx::APP_ID))
        .avp(vendor_specific_auth_app(VENDOR_3GPP, rx::APP_ID))
        .avp(vendor_specific_auth_app(VENDOR_3GPP, sy::APP_ID))
        .avp(vendor_specific_auth_app(VENDOR_3GPP, sh::APP_ID))
        .avp(base::FIRMWARE_REVISION.u32(1))
}

pub fn cea(cer: &Message) -> Message {
    Message::answer_to(cer)
        .result_code_avp(result_code::DIAMETER_SUCCESS)
        .origin(PCEF.0, PCEF.1)
        .avp(base::HOST_IP_ADDRESS.address("::1".parse().unwrap()))
        .avp(base::VENDOR_ID.u32(0))
        .avp(base::PRODUCT_NAME.utf8("peer"))
        .avp(vendor_specific_auth_app(VENDOR_3GPP, gx::APP_ID))
}

pub fn dwr() -> Message {
    Message::request(base::APP_ID, base::CMD_DEVICE_WATCHDOG)
        .ids(2, 0x5e00_0002)
        .origin(PCRF.0, PCRF.1)
        .avp(base::ORIGIN_STATE_ID.u32(1_700_000_000))
}

pub fn dwa(dwr: &Message) -> Message {
    Message::answer_to(dwr).result_code_avp(result_code::DIAMETER_SUCCESS).origin(PCEF.0, PCEF.1)
}

pub fn dpr() -> Message {
    Message::request(base::APP_ID, base::CMD_DISCONNECT_PEER)
        .ids(3, 0x5e00_0003)
        .origin(PCRF.0, PCRF.1)
        .avp(base::DISCONNECT_CAUSE.enumerated(0))
}

pub fn dpa(dpr: &Message) -> Message {
    Message::answer_to(dpr).result_code_avp(result_code::DIAMETER_SUCCESS).origin(PCEF.0, PCEF.1)
}

pub fn gx_ccr_i() -> Message {
    Message::request(gx::APP_ID, gx::CMD_CREDIT_CONTROL)
        .ids(0x1234_5678, 0x9abc_def0)
        .session_id_avp("pgw.epc.example.com;1700000000;1")
        .avp(base::AUTH_APPLICATION_ID.u32(gx::APP_ID))
        .origin(PCEF.0, PCEF.1)
        .destination(PCRF.1, None)
        .avp(dcca::CC_REQUEST_TYPE.enumerated(1))
        .avp(dcca::CC_REQUEST_NUMBER.u32(0))
        .avp(subscription_id(subscription_id_type::END_USER_IMSI, "001010000000001"))
        .avp(subscription_id(subscription_id_type::END_USER_E164, "15551234567"))
        .avp(supported_features(1, 0x3))
        .avp(gx::NETWORK_REQUEST_SUPPORT.enumerated(1))
        .avp(nasreq::FRAMED_IP_ADDRESS.ipv4_octets(Ipv4Addr::new(10, 45, 0, 2)))
        .avp(diameter::builders::framed_ipv6_prefix("2001:db8:45::".parse().unwrap(), 64))
        .avp(gx::IP_CAN_TYPE.enumerated(gx::ip_can_type::TGPP_EPS))
        .avp(gx::RAT_TYPE.enumerated(gx::rat_type::EUTRAN))
        .avp(dcca::USER_EQUIPMENT_INFO.grouped(vec![
            dcca::USER_EQUIPMENT_INFO_TYPE.enumerated(0),
            dcca::USER_EQUIPMENT_INFO_VALUE.bytes(&b"3569380356438091"[..]),
        ]))
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
        .avp(gx::AN_GW_ADDRESS.address(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1))))
        .avp(gx::TGPP_SGSN_MCC_MNC.utf8("00101"))
        .avp(gx::TGPP_USER_LOCATION_INFO.bytes(
            &[0x82, 0x00, 0xf1, 0x10, 0x00, 0x01, 0x00, 0xf1, 0x10, 0x00, 0x00, 0x01, 0x01][..],
        ))
        .avp(gx::TGPP_MS_TIMEZONE.bytes(&[0x40, 0x00][..]))
        .avp(nasreq::CALLED_STATION_ID.utf8("internet"))
        .avp(gx::BEARER_USAGE.enumerated(0))
        .avp(gx::ONLINE.enumerated(0))
        .avp(gx::OFFLINE.enumerated(0))
        .avp(
            gx::ACCESS_NETWORK_CHARGING_IDENTIFIER_GX.grouped(vec![
                rx::ACCESS_NETWORK_CHARGING_IDENTIFIER_VALUE.bytes(&[0, 0, 0, 1][..]),
            ]),
        )
}

pub fn gx_cca_i(ccr: &Message) -> Message {
    Message::answer_to(ccr)
        .avp(base::AUTH_APPLICATION_ID.u32(gx::APP_ID))
        .origin(PCRF.0, PCRF.1)
        .result_code_avp(result_code::DIAMETER_SUCCESS)
        .avp(dcca::CC_REQUEST_TYPE.enumerated(1))
        .avp(dcca::CC_REQUEST_NUMBER.u32(0))
        .avp(supported_features(1, 0x3))
        .avp(gx::BEARER_CONTROL_MODE.enumerated(2))
        .avp(gx::EVENT_TRIGGER.enumerated(gx::event_trigger::RAT_CHANGE))
        .avp(gx::EVENT_TRIGGER.enumerated(gx::event_trigger::USAGE_REPORT))
        .avp(gx::CHARGING_RULE_INSTALL.grouped(vec![
            gx::CHARGING_RULE_NAME.bytes(&b"video-dedicated"[..]),
            gx::CHARGING_RULE_BASE_NAME.utf8("default-internet"),
            gx::CHARGING_RULE_DEFINITION.grouped(vec![
                gx::CHARGING_RULE_NAME.bytes(&b"voice-rtp"[..]),
                dcca::SERVICE_IDENTIFIER.u32(1000),
                dcca::RATING_GROUP.u32(100),
                gx::FLOW_INFORMATION.grouped(vec![
                    rx::FLOW_DESCRIPTION.utf8("permit out 17 from any to 10.45.0.2 49152"),
                    gx::FLOW_DIRECTION.enumerated(1),
                ]),
                rx::FLOW_STATUS.enumerated(2),
                gx::QOS_INFORMATION.grouped(vec![
                    gx::QOS_CLASS_IDENTIFIER.enumerated(1),
                    rx::MAX_REQUESTED_BANDWIDTH_UL.u32(128_000),
                    rx::MAX_REQUESTED_BANDWIDTH_DL.u32(128_000),
                    gx::GUARANTEED_BITRATE_UL.u32(64_000),
                    gx::GUARANTEED_BITRATE_DL.u32(64_000),
                    gx::ALLOCATION_RETENTION_PRIORITY.grouped(vec![
                        gx::PRIORITY_LEVEL.u32(2),
                        gx::PRE_EMPTION_CAPABILITY.enumerated(0),
                        gx::PRE_EMPTION_VULNERABILITY.enumerated(1),
                    ]),
                ]),
                gx::ONLINE.enumerated(0),
                gx::OFFLINE.enumerated(1),
                gx::METERING_METHOD.enumerated(1),
                gx::PRECEDENCE.u32(100),
                gx::MONITORING_KEY.bytes(&b"mk-voice"[..]),
            ]),
            gx::RULE_ACTIVATION_TIME.time(Time::from_unix_secs(1_700_000_000)),
        ]))
        .avp(gx::QOS_INFORMATION.grouped(vec![
            gx::APN_AGGREGATE_MAX_BITRATE_UL.u32(20_000_000),
            gx::APN_AGGREGATE_MAX_BITRATE_DL.u32(80_000_000),
        ]))
        .avp(gx::USAGE_MONITORING_INFORMATION.grouped(vec![
            gx::MONITORING_KEY.bytes(&b"mk-session"[..]),
            dcca::GRANTED_SERVICE_UNIT.grouped(vec![dcca::CC_TOTAL_OCTETS.u64(10_000_000_000)]),
            gx::USAGE_MONITORING_LEVEL.enumerated(0),
        ]))
        .avp(gx::REVALIDATION_TIME.time(Time::from_unix_secs(1_700_003_600)))
}

pub fn gx_rar() -> Message {
    Message::request(gx::APP_ID, gx::CMD_RE_AUTH)
        .ids(0x22, 0x5e00_0022)
        .session_id_avp("pgw.epc.example.com;1700000000;1")
        .avp(base::AUTH_APPLICATION_ID.u32(gx::APP_ID))
        .origin(PCRF.0, PCRF.1)
        .destination(PCEF.1, Some(PCEF.0))
        .avp(base::RE_AUTH_REQUEST_TYPE.enumerated(0))
        .avp(
            gx::CHARGING_RULE_REMOVE.grouped(vec![gx::CHARGING_RULE_NAME.bytes(&b"voice-rtp"[..])]),
        )
        .avp(gx::EVENT_TRIGGER.enumerated(gx::event_trigger::LOSS_OF_BEARER))
}

pub fn gx_raa(rar: &Message) -> Message {
    Message::answer_to(rar)
        .origin(PCEF.0, PCEF.1)
        .result_code_avp(result_code::DIAMETER_SUCCESS)
        .avp(gx::CHARGING_RULE_REPORT.grouped(vec![
            gx::CHARGING_RULE_NAME.bytes(&b"voice-rtp"[..]),
            gx::PCC_RULE_STATUS.enumerated(1),
            gx::RULE_FAILURE_CODE.enumerated(1),
        ]))
}

pub fn rx_aar() -> Message {
    Message::request(rx::APP_ID, rx::CMD_AA)
        .ids(0x33, 0x5e00_0033)
        .session_id_avp("pcscf.ims.example.com;1700000000;7")
        .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
        .origin(AF.0, AF.1)
        .destination(PCRF.1, None)
        .avp(rx::IP_DOMAIN_ID.bytes(&b"ims.example.com"[..]))
        .avp(rx::AF_APPLICATION_IDENTIFIER.bytes(&b"IMS Services"[..]))
        .avp(rx::MEDIA_COMPONENT_DESCRIPTION.grouped(vec![
            rx::MEDIA_COMPONENT_NUMBER.u32(1),
            rx::MEDIA_SUB_COMPONENT.grouped(vec![
                rx::FLOW_NUMBER.u32(1),
                rx::FLOW_DESCRIPTION.utf8("permit out 17 from 192.0.2.10 30000 to 10.45.0.2 49152"),
                rx::FLOW_DESCRIPTION.utf8("permit in 17 from 10.45.0.2 49152 to 192.0.2.10 30000"),
                rx::FLOW_USAGE.enumerated(0),
            ]),
            rx::MEDIA_SUB_COMPONENT.grouped(vec![
                rx::FLOW_NUMBER.u32(2),
                rx::FLOW_USAGE.enumerated(1),
            ]),
            rx::MEDIA_TYPE.enumerated(0),
            rx::MAX_REQUESTED_BANDWIDTH_UL.u32(64_000),
            rx::MAX_REQUESTED_BANDWIDTH_DL.u32(64_000),
            rx::FLOW_STATUS.enumerated(2),
            rx::RR_BANDWIDTH.u32(1_000),
            rx::RS_BANDWIDTH.u32(1_000),
            rx::CODEC_DATA.bytes(&b"uplink\noffer\nm=audio 49152 RTP/AVP 96\n"[..]),
        ]))
        .avp(rx::SERVICE_INFO_STATUS.enumerated(0))
        .avp(rx::AF_CHARGING_IDENTIFIER.bytes(&b"icid-0001"[..]))
        .avp(rx::SPECIFIC_ACTION.enumerated(rx::specific_action::INDICATION_OF_LOSS_OF_BEARER))
        .avp(rx::SPECIFIC_ACTION.enumerated(rx::specific_action::INDICATION_OF_RELEASE_OF_BEARER))
        .avp(subscription_id(subscription_id_type::END_USER_SIP_URI, "sip:alice@ims.example.com"))
        .avp(supported_features(1, 0x1))
        .avp(nasreq::FRAMED_IP_ADDRESS.ipv4_octets(Ipv4Addr::new(10, 45, 0, 2)))
        .avp(nasreq::CALLED_STATION_ID.utf8("ims"))
        .avp(rx::RX_REQUEST_TYPE.enumerated(0))
}

pub fn rx_aaa(aar: &Message) -> Message {
    Message::answer_to(aar)
        .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
        .origin(PCRF.0, PCRF.1)
        .result_code_avp(result_code::DIAMETER_SUCCESS)
        .avp(supported_features(1, 0x1))
        .avp(gx::IP_CAN_TYPE.enumerated(gx::ip_can_type::TGPP_EPS))
        .avp(gx::RAT_TYPE.enumerated(gx::rat_type::EUTRAN))
}

/// An AAA refusing the session: Experimental-Result 5065 IP-CAN_SESSION_NOT_AVAILABLE.
pub fn rx_aaa_no_session(aar: &Message) -> Message {
    Message::answer_to(aar)
        .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
        .origin(PCRF.0, PCRF.1)
        .avp(experimental_result(
            VENDOR_3GPP,
            rx::experimental_result::IP_CAN_SESSION_NOT_AVAILABLE,
        ))
}

pub fn rx_rar() -> Message {
    Message::request(rx::APP_ID, rx::CMD_RE_AUTH)
        .ids(0x34, 0x5e00_0034)
        .session_id_avp("pcscf.ims.example.com;1700000000;7")
        .origin(PCRF.0, PCRF.1)
        .destination(AF.1, Some(AF.0))
        .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
        .avp(rx::SPECIFIC_ACTION.enumerated(rx::specific_action::INDICATION_OF_LOSS_OF_BEARER))
        .avp(rx::FLOWS.grouped(vec![rx::MEDIA_COMPONENT_NUMBER.u32(1), rx::FLOW_NUMBER.u32(1)]))
}

pub fn rx_raa(rar: &Message) -> Message {
    Message::answer_to(rar).origin(AF.0, AF.1).result_code_avp(result_code::DIAMETER_SUCCESS)
}

pub fn rx_str() -> Message {
    Message::request(rx::APP_ID, rx::CMD_SESSION_TERMINATION)
        .ids(0x35, 0x5e00_0035)
        .session_id_avp("pcscf.ims.example.com;1700000000;7")
        .origin(AF.0, AF.1)
        .destination(PCRF.1, Some(PCRF.0))
        .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
        .avp(base::TERMINATION_CAUSE.enumerated(1))
}

pub fn rx_sta(str_: &Message) -> Message {
    Message::answer_to(str_).origin(PCRF.0, PCRF.1).result_code_avp(result_code::DIAMETER_SUCCESS)
}

pub fn rx_asr() -> Message {
    Message::request(rx::APP_ID, rx::CMD_ABORT_SESSION)
        .ids(0x36, 0x5e00_0036)
        .session_id_avp("pcscf.ims.example.com;1700000000;7")
        .origin(PCRF.0, PCRF.1)
        .destination(AF.1, Some(AF.0))
        .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
        .avp(rx::ABORT_CAUSE.enumerated(0))
}

pub fn sy_slr() -> Message {
    Message::request(sy::APP_ID, sy::CMD_SPENDING_LIMIT)
        .ids(0x44, 0x5e00_0044)
        .session_id_avp("pcrf.epc.example.com;1700000000;99")
        .avp(base::AUTH_APPLICATION_ID.u32(sy::APP_ID))
        .origin(PCRF.0, PCRF.1)
        .destination(OCS.1, None)
        .avp(sy::SL_REQUEST_TYPE.enumerated(sy::sl_request_type::INITIAL_REQUEST))
        .avp(subscription_id(subscription_id_type::END_USER_IMSI, "001010000000001"))
        .avp(sy::POLICY_COUNTER_IDENTIFIER.utf8("monthly-volume"))
        .avp(sy::POLICY_COUNTER_IDENTIFIER.utf8("roaming"))
}

pub fn sy_sla(slr: &Message) -> Message {
    Message::answer_to(slr)
        .avp(base::AUTH_APPLICATION_ID.u32(sy::APP_ID))
        .origin(OCS.0, OCS.1)
        .result_code_avp(result_code::DIAMETER_SUCCESS)
        .avp(sy::POLICY_COUNTER_STATUS_REPORT.grouped(vec![
            sy::POLICY_COUNTER_IDENTIFIER.utf8("monthly-volume"),
            sy::POLICY_COUNTER_STATUS.utf8("valid"),
            sy::PENDING_POLICY_COUNTER_INFORMATION.grouped(vec![
                sy::POLICY_COUNTER_STATUS.utf8("exhausted"),
                sy::PENDING_POLICY_COUNTER_CHANGE_TIME.time(Time::from_unix_secs(1_700_086_400)),
            ]),
        ]))
}

pub fn sy_snr() -> Message {
    Message::request(sy::APP_ID, sy::CMD_SPENDING_STATUS_NOTIFICATION)
        .ids(0x45, 0x5e00_0045)
        .session_id_avp("pcrf.epc.example.com;1700000000;99")
        .avp(base::AUTH_APPLICATION_ID.u32(sy::APP_ID))
        .origin(OCS.0, OCS.1)
        .destination(PCRF.1, Some(PCRF.0))
        .avp(sy::POLICY_COUNTER_STATUS_REPORT.grouped(vec![
            sy::POLICY_COUNTER_IDENTIFIER.utf8("monthly-volume"),
            sy::POLICY_COUNTER_STATUS.utf8("exhausted"),
        ]))
}

pub const USER_DATA_XML: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
<Sh-Data><RepositoryData><ServiceIndication>fivecore-policy</ServiceIndication>\
<SequenceNumber>3</SequenceNumber><ServiceData><Policy tier=\"gold\"/></ServiceData>\
</RepositoryData></Sh-Data>";

fn sh_request(cmd: u32, hbh: u32) -> Message {
    Message::request(sh::APP_ID, cmd)
        .ids(hbh, 0x5e00_0000 | hbh)
        .session_id_avp("tas.ims.example.com;1700000000;5")
        .avp(vendor_specific_auth_app(VENDOR_3GPP, sh::APP_ID))
        .avp(base::AUTH_SESSION_STATE.enumerated(1))
        .origin(AS.0, AS.1)
        .destination(HSS.1, None)
}

pub fn sh_udr() -> Message {
    sh_request(sh::CMD_USER_DATA, 0x55)
        .avp(user_identity_public("sip:alice@ims.example.com"))
        .avp(sh::SERVICE_INDICATION.bytes(&b"fivecore-policy"[..]))
        .avp(sh::DATA_REFERENCE.enumerated(sh::data_reference::REPOSITORY_DATA))
        .avp(sh::DATA_REFERENCE.enumerated(sh::data_reference::MSISDN))
}

pub fn sh_uda(udr: &Message) -> Message {
    Message::answer_to(udr)
        .avp(vendor_specific_auth_app(VENDOR_3GPP, sh::APP_ID))
        .result_code_avp(result_code::DIAMETER_SUCCESS)
        .avp(base::AUTH_SESSION_STATE.enumerated(1))
        .origin(HSS.0, HSS.1)
        .avp(sh::USER_DATA.bytes(USER_DATA_XML.as_bytes().to_vec()))
}

pub fn sh_pur() -> Message {
    sh_request(sh::CMD_PROFILE_UPDATE, 0x56)
        .avp(user_identity_public("sip:alice@ims.example.com"))
        .avp(sh::DATA_REFERENCE.enumerated(sh::data_reference::REPOSITORY_DATA))
        .avp(sh::USER_DATA.bytes(USER_DATA_XML.as_bytes().to_vec()))
}

pub fn sh_snr() -> Message {
    sh_request(sh::CMD_SUBSCRIBE_NOTIFICATIONS, 0x57)
        .avp(user_identity_public("sip:alice@ims.example.com"))
        .avp(sh::SERVICE_INDICATION.bytes(&b"fivecore-policy"[..]))
        .avp(sh::SUBS_REQ_TYPE.enumerated(0))
        .avp(sh::DATA_REFERENCE.enumerated(sh::data_reference::REPOSITORY_DATA))
        .avp(sh::EXPIRY_TIME.time(Time::from_unix_secs(1_800_000_000)))
}

pub fn sh_pnr() -> Message {
    Message::request(sh::APP_ID, sh::CMD_PUSH_NOTIFICATION)
        .ids(0x58, 0x5e00_0058)
        .session_id_avp("udr.ims.example.com;1700000000;6")
        .avp(vendor_specific_auth_app(VENDOR_3GPP, sh::APP_ID))
        .avp(base::AUTH_SESSION_STATE.enumerated(1))
        .origin(HSS.0, HSS.1)
        .destination(AS.1, Some(AS.0))
        .avp(user_identity_public("sip:alice@ims.example.com"))
        .avp(sh::USER_DATA.bytes(USER_DATA_XML.as_bytes().to_vec()))
}

/// Every request with its answer, named, in one list.
pub fn all_messages() -> Vec<(&'static str, Message)> {
    let (cer, dwr, dpr) = (cer(), dwr(), dpr());
    let (ccr, gx_rar, aar, rx_rar, str_, asr) =
        (gx_ccr_i(), gx_rar(), rx_aar(), rx_rar(), rx_str(), rx_asr());
    let (slr, snr, udr, pur, sh_snr, pnr) =
        (sy_slr(), sy_snr(), sh_udr(), sh_pur(), sh_snr(), sh_pnr());
    vec![
        ("CEA", cea(&cer)),
        ("CER", cer),
        ("DWA", dwa(&dwr)),
        ("DWR", dwr),
        ("DPA", dpa(&dpr)),
        ("DPR", dpr),
        ("Gx CCA-I", gx_cca_i(&ccr)),
        ("Gx CCR-I", ccr),
        ("Gx RAA", gx_raa(&gx_rar)),
        ("Gx RAR", gx_rar),
        ("Rx AAA", rx_aaa(&aar)),
        ("Rx AAA 5065", rx_aaa_no_session(&aar)),
        ("Rx AAR", aar),
        ("Rx RAA", rx_raa(&rx_rar)),
        ("Rx RAR", rx_rar),
        ("Rx STA", rx_sta(&str_)),
        ("Rx STR", str_),
        ("Rx ASR", asr),
        ("Sy SLA", sy_sla(&slr)),
        ("Sy SLR", slr),
        ("Sy SNR", snr),
        ("Sh UDA", sh_uda(&udr)),
        ("Sh UDR", udr),
        ("Sh PUR", pur),
        ("Sh SNR", sh_snr),
        ("Sh PNR", pnr),
    ]
}
