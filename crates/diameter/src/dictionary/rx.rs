//! Rx (3GPP TS 29.214): AF session authorization with media components, and the session
//! commands AAR/AAA, RAR/RAA, STR/STA, ASR/ASA.

use super::base::{
    AUTH_APPLICATION_ID, AUTH_SESSION_STATE, CLASS, DESTINATION_HOST, DESTINATION_REALM,
    ERROR_MESSAGE, ERROR_REPORTING_HOST, EXPERIMENTAL_RESULT, FAILED_AVP, ORIGIN_HOST,
    ORIGIN_REALM, ORIGIN_STATE_ID, PROXY_INFO, REDIRECT_HOST, RESULT_CODE, ROUTE_RECORD,
    SESSION_ID, TERMINATION_CAUSE,
};
use super::dcca::SUBSCRIPTION_ID;
use super::gx::{
    AN_GW_ADDRESS, IP_CAN_TYPE, RAT_TYPE, TGPP_MS_TIMEZONE, TGPP_SGSN_MCC_MNC,
    TGPP_USER_LOCATION_INFO,
};
use super::nasreq::{CALLED_STATION_ID, FRAMED_IPV6_PREFIX, FRAMED_IP_ADDRESS};
use super::sh::SUPPORTED_FEATURES;
use super::{ApplicationDef, AvpDef, CommandDef, FlagRule, Rule, VENDOR_3GPP};
use crate::types::DataType as T;

pub const APP_ID: u32 = 16777236;
pub const CMD_AA: u32 = 265;
pub const CMD_RE_AUTH: u32 = 258;
pub const CMD_SESSION_TERMINATION: u32 = 275;
pub const CMD_ABORT_SESSION: u32 = 274;

/// Experimental-Result-Code values of TS 29.214 §5.5 (vendor 10415).
pub mod experimental_result {
    pub const REQUESTED_SERVICE_TEMPORARILY_NOT_AUTHORIZED: u32 = 4261;
    pub const INVALID_SERVICE_INFORMATION: u32 = 5061;
    pub const FILTER_RESTRICTIONS: u32 = 5062;
    pub const REQUESTED_SERVICE_NOT_AUTHORIZED: u32 = 5063;
    pub const DUPLICATED_AF_SESSION: u32 = 5064;
    pub const IP_CAN_SESSION_NOT_AVAILABLE: u32 = 5065;
    pub const UNAUTHORIZED_NON_EMERGENCY_SESSION: u32 = 5066;
    pub const UNAUTHORIZED_SPONSORED_DATA_CONNECTIVITY: u32 = 5067;
    pub const TEMPORARY_NETWORK_FAILURE: u32 = 5068;
}

/// Specific-Action values.
pub mod specific_action {
    pub const CHARGING_CORRELATION_EXCHANGE: u32 = 1;
    pub const INDICATION_OF_LOSS_OF_BEARER: u32 = 2;
    pub const INDICATION_OF_RECOVERY_OF_BEARER: u32 = 3;
    pub const INDICATION_OF_RELEASE_OF_BEARER: u32 = 4;
    pub const IP_CAN_CHANGE: u32 = 6;
    pub const INDICATION_OF_OUT_OF_CREDIT: u32 = 7;
    pub const INDICATION_OF_SUCCESSFUL_RESOURCES_ALLOCATION: u32 = 8;
    pub const INDICATION_OF_FAILED_RESOURCES_ALLOCATION: u32 = 9;
    pub const INDICATION_OF_LIMITED_PCC_DEPLOYMENT: u32 = 10;
    pub const USAGE_REPORT: u32 = 11;
    pub const ACCESS_NETWORK_INFO_REPORT: u32 = 12;
}

pub static ABORT_CAUSE: AvpDef = AvpDef::tgpp("Abort-Cause", 500, T::Enumerated).enums(&[
    (0, "BEARER_RELEASED"),
    (1, "INSUFFICIENT_SERVER_RESOURCES"),
    (2, "INSUFFICIENT_BEARER_RESOURCES"),
    (3, "PS_TO_CS_HANDOVER"),
    (4, "SPONSORED_DATA_CONNECTIVITY_DISALLOWED"),
]);
pub static ACCESS_NETWORK_CHARGING_ADDRESS: AvpDef =
    AvpDef::tgpp("Access-Network-Charging-Address", 501, T::Address);
pub static ACCESS_NETWORK_CHARGING_IDENTIFIER: AvpDef =
    AvpDef::tgpp("Access-Network-Charging-Identifier", 502, T::Grouped)
        .group(&[Rule::one(&ACCESS_NETWORK_CHARGING_IDENTIFIER_VALUE)]);
pub static ACCESS_NETWORK_CHARGING_IDENTIFIER_VALUE: AvpDef =
    AvpDef::tgpp("Access-Network-Charging-Identifier-Value", 503, T::OctetString);
pub static AF_APPLICATION_IDENTIFIER: AvpDef =
    AvpDef::tgpp("AF-Application-Identifier", 504, T::OctetString);
pub static AF_CHARGING_IDENTIFIER: AvpDef =
    AvpDef::tgpp("AF-Charging-Identifier", 505, T::OctetString);
pub static FLOW_DESCRIPTION: AvpDef = AvpDef::tgpp("Flow-Description", 507, T::IPFilterRule);
pub static FLOW_NUMBER: AvpDef = AvpDef::tgpp("Flow-Number", 509, T::Unsigned32);
pub static FLOWS: AvpDef =
    AvpDef::tgpp("Flows", 510, T::Grouped).group(&[Rule::one(&MEDIA_COMPONENT_NUMBER)]);
pub static FLOW_STATUS: AvpDef = AvpDef::tgpp("Flow-Status", 511, T::Enumerated).enums(&[
    (0, "ENABLED-UPLINK"),
    (1, "ENABLED-DOWNLINK"),
    (2, "ENABLED"),
    (3, "DISABLED"),
    (4, "REMOVED"),
]);
pub static FLOW_USAGE: AvpDef = AvpDef::tgpp("Flow-Usage", 512, T::Enumerated).enums(&[
    (0, "NO_INFORMATION"),
    (1, "RTCP"),
    (2, "AF_SIGNALLING"),
]);
pub static SPECIFIC_ACTION: AvpDef = AvpDef::tgpp("Specific-Action", 513, T::Enumerated).enums(&[
    (1, "CHARGING_CORRELATION_EXCHANGE"),
    (2, "INDICATION_OF_LOSS_OF_BEARER"),
    (3, "INDICATION_OF_RECOVERY_OF_BEARER"),
    (4, "INDICATION_OF_RELEASE_OF_BEARER"),
    (6, "IP-CAN_CHANGE"),
    (7, "INDICATION_OF_OUT_OF_CREDIT"),
    (8, "INDICATION_OF_SUCCESSFUL_RESOURCES_ALLOCATION"),
    (9, "INDICATION_OF_FAILED_RESOURCES_ALLOCATION"),
    (10, "INDICATION_OF_LIMITED_PCC_DEPLOYMENT"),
    (11, "USAGE_REPORT"),
    (12, "ACCESS_NETWORK_INFO_REPORT"),
    (13, "INDICATION_OF_RECOVERY_FROM_LIMITED_PCC_DEPLOYMENT"),
    (14, "INDICATION_OF_ACCESS_NETWORK_INFO_REPORTING_FAILURE"),
    (15, "INDICATION_OF_TRANSFER_POLICY_EXPIRED"),
    (16, "PLMN_CHANGE"),
]);
pub static MAX_REQUESTED_BANDWIDTH_DL: AvpDef =
    AvpDef::tgpp("Max-Requested-Bandwidth-DL", 515, T::Unsigned32);
pub static MAX_REQUESTED_BANDWIDTH_UL: AvpDef =
    AvpDef::tgpp("Max-Requested-Bandwidth-UL", 516, T::Unsigned32);
pub static MEDIA_COMPONENT_DESCRIPTION: AvpDef =
    AvpDef::tgpp("Media-Component-Description", 517, T::Grouped)
        .group(&[Rule::one(&MEDIA_COMPONENT_NUMBER)]);
pub static MEDIA_COMPONENT_NUMBER: AvpDef =
    AvpDef::tgpp("Media-Component-Number", 518, T::Unsigned32);
pub static MEDIA_SUB_COMPONENT: AvpDef =
    AvpDef::tgpp("Media-Sub-Component", 519, T::Grouped).group(&[Rule::one(&FLOW_NUMBER)]);
pub static MEDIA_TYPE: AvpDef = AvpDef::tgpp("Media-Type", 520, T::Enumerated).enums(&[
    (0, "AUDIO"),
    (1, "VIDEO"),
    (2, "DATA"),
    (3, "APPLICATION"),
    (4, "CONTROL"),
    (5, "TEXT"),
    (6, "MESSAGE"),
    (0xffff_ffff, "OTHER"),
]);
pub static RR_BANDWIDTH: AvpDef = AvpDef::tgpp("RR-Bandwidth", 521, T::Unsigned32);
pub static RS_BANDWIDTH: AvpDef = AvpDef::tgpp("RS-Bandwidth", 522, T::Unsigned32);
pub static SIP_FORKING_INDICATION: AvpDef =
    AvpDef::tgpp("SIP-Forking-Indication", 523, T::Enumerated)
        .enums(&[(0, "SINGLE_DIALOGUE"), (1, "SEVERAL_DIALOGUES")]);
pub static CODEC_DATA: AvpDef = AvpDef::tgpp("Codec-Data", 524, T::OctetString);
pub static SERVICE_URN: AvpDef = AvpDef::tgpp("Service-URN", 525, T::OctetString);
pub static ACCEPTABLE_SERVICE_INFO: AvpDef =
    AvpDef::tgpp("Acceptable-Service-Info", 526, T::Grouped);
pub static SERVICE_INFO_STATUS: AvpDef = AvpDef::tgpp("Service-Info-Status", 527, T::Enumerated)
    .enums(&[(0, "FINAL_SERVICE_INFORMATION"), (1, "PRELIMINARY_SERVICE_INFORMATION")]);
pub static MPS_IDENTIFIER: AvpDef = AvpDef::tgpp("MPS-Identifier", 528, T::OctetString);
pub static AF_SIGNALLING_PROTOCOL: AvpDef =
    AvpDef::tgpp("AF-Signalling-Protocol", 529, T::Enumerated)
        .m(FlagRule::MustNot)
        .enums(&[(0, "NO_INFORMATION"), (1, "SIP")]);
pub static SPONSORED_CONNECTIVITY_DATA: AvpDef =
    AvpDef::tgpp("Sponsored-Connectivity-Data", 530, T::Grouped);
pub static SPONSOR_IDENTITY: AvpDef = AvpDef::tgpp("Sponsor-Identity", 531, T::UTF8String);
pub static APPLICATION_SERVICE_PROVIDER_IDENTITY: AvpDef =
    AvpDef::tgpp("Application-Service-Provider-Identity", 532, T::UTF8String);
pub static RX_REQUEST_TYPE: AvpDef = AvpDef::tgpp("Rx-Request-Type", 533, T::Enumerated)
    .m(FlagRule::May)
    .enums(&[(0, "INITIAL_REQUEST"), (1, "UPDATE_REQUEST"), (2, "PCSCF_RESTORATION")]);
pub static MIN_REQUESTED_BANDWIDTH_DL: AvpDef =
    AvpDef::tgpp("Min-Requested-Bandwidth-DL", 534, T::Unsigned32).m(FlagRule::May);
pub static MIN_REQUESTED_BANDWIDTH_UL: AvpDef =
    AvpDef::tgpp("Min-Requested-Bandwidth-UL", 535, T::Unsigned32).m(FlagRule::May);
pub static REQUIRED_ACCESS_INFO: AvpDef = AvpDef::tgpp("Required-Access-Info", 536, T::Enumerated)
    .m(FlagRule::May)
    .enums(&[(0, "USER_LOCATION"), (1, "MS_TIME_ZONE")]);
pub static IP_DOMAIN_ID: AvpDef =
    AvpDef::tgpp("IP-Domain-Id", 537, T::OctetString).m(FlagRule::May);

pub static AVPS: &[&AvpDef] = &[
    &ABORT_CAUSE,
    &ACCESS_NETWORK_CHARGING_ADDRESS,
    &ACCESS_NETWORK_CHARGING_IDENTIFIER,
    &ACCESS_NETWORK_CHARGING_IDENTIFIER_VALUE,
    &AF_APPLICATION_IDENTIFIER,
    &AF_CHARGING_IDENTIFIER,
    &FLOW_DESCRIPTION,
    &FLOW_NUMBER,
    &FLOWS,
    &FLOW_STATUS,
    &FLOW_USAGE,
    &SPECIFIC_ACTION,
    &MAX_REQUESTED_BANDWIDTH_DL,
    &MAX_REQUESTED_BANDWIDTH_UL,
    &MEDIA_COMPONENT_DESCRIPTION,
    &MEDIA_COMPONENT_NUMBER,
    &MEDIA_SUB_COMPONENT,
    &MEDIA_TYPE,
    &RR_BANDWIDTH,
    &RS_BANDWIDTH,
    &SIP_FORKING_INDICATION,
    &CODEC_DATA,
    &SERVICE_URN,
    &ACCEPTABLE_SERVICE_INFO,
    &SERVICE_INFO_STATUS,
    &MPS_IDENTIFIER,
    &AF_SIGNALLING_PROTOCOL,
    &SPONSORED_CONNECTIVITY_DATA,
    &SPONSOR_IDENTITY,
    &APPLICATION_SERVICE_PROVIDER_IDENTITY,
    &RX_REQUEST_TYPE,
    &MIN_REQUESTED_BANDWIDTH_DL,
    &MIN_REQUESTED_BANDWIDTH_UL,
    &REQUIRED_ACCESS_INFO,
    &IP_DOMAIN_ID,
];

pub static AAR: CommandDef = CommandDef {
    name: "AA",
    abbrev: ("AAR", "AAA"),
    code: CMD_AA,
    application_id: APP_ID,
    proxiable: true,
    request: &[
        Rule::one(&SESSION_ID),
        Rule::one(&AUTH_APPLICATION_ID),
        Rule::one(&ORIGIN_HOST),
        Rule::one(&ORIGIN_REALM),
        Rule::one(&DESTINATION_REALM),
        Rule::opt(&DESTINATION_HOST),
        Rule::opt(&IP_DOMAIN_ID),
        Rule::opt(&AUTH_SESSION_STATE),
        Rule::opt(&AF_APPLICATION_IDENTIFIER),
        Rule::any(&MEDIA_COMPONENT_DESCRIPTION),
        Rule::opt(&SERVICE_INFO_STATUS),
        Rule::opt(&AF_CHARGING_IDENTIFIER),
        Rule::opt(&SIP_FORKING_INDICATION),
        Rule::any(&SPECIFIC_ACTION),
        Rule::any(&SUBSCRIPTION_ID),
        Rule::any(&SUPPORTED_FEATURES),
        Rule::opt(&FRAMED_IP_ADDRESS),
        Rule::opt(&FRAMED_IPV6_PREFIX),
        Rule::opt(&CALLED_STATION_ID),
        Rule::opt(&SERVICE_URN),
        Rule::opt(&SPONSORED_CONNECTIVITY_DATA),
        Rule::opt(&MPS_IDENTIFIER),
        Rule::opt(&RX_REQUEST_TYPE),
        Rule::any(&REQUIRED_ACCESS_INFO),
        Rule::opt(&ORIGIN_STATE_ID),
        Rule::any(&PROXY_INFO),
        Rule::any(&ROUTE_RECORD),
    ],
    answer: &[
        Rule::one(&SESSION_ID),
        Rule::one(&AUTH_APPLICATION_ID),
        Rule::one(&ORIGIN_HOST),
        Rule::one(&ORIGIN_REALM),
        Rule::opt(&RESULT_CODE),
        Rule::opt(&EXPERIMENTAL_RESULT),
        Rule::opt(&AUTH_SESSION_STATE),
        Rule::any(&ACCESS_NETWORK_CHARGING_IDENTIFIER),
        Rule::opt(&ACCESS_NETWORK_CHARGING_ADDRESS),
        Rule::opt(&ACCEPTABLE_SERVICE_INFO),
        Rule { avp: &AN_GW_ADDRESS, min: 0, max: 2 },
        Rule::opt(&IP_CAN_TYPE),
        Rule::opt(&RAT_TYPE),
        Rule::any(&FLOWS),
        Rule::any(&SUPPORTED_FEATURES),
        Rule::any(&SUBSCRIPTION_ID),
        Rule::any(&CLASS),
        Rule::opt(&ERROR_MESSAGE),
        Rule::opt(&ERROR_REPORTING_HOST),
        Rule::any(&FAILED_AVP),
        Rule::opt(&ORIGIN_STATE_ID),
        Rule::any(&REDIRECT_HOST),
        Rule::any(&PROXY_INFO),
    ],
};

pub static RAR: CommandDef = CommandDef {
    name: "Re-Auth",
    abbrev: ("RAR", "RAA"),
    code: CMD_RE_AUTH,
    application_id: APP_ID,
    proxiable: true,
    request: &[
        Rule::one(&SESSION_ID),
        Rule::one(&ORIGIN_HOST),
        Rule::one(&ORIGIN_REALM),
        Rule::one(&DESTINATION_REALM),
        Rule::one(&DESTINATION_HOST),
        Rule::one(&AUTH_APPLICATION_ID),
        Rule::some(&SPECIFIC_ACTION),
        Rule::any(&ACCESS_NETWORK_CHARGING_IDENTIFIER),
        Rule::opt(&ACCESS_NETWORK_CHARGING_ADDRESS),
        Rule { avp: &AN_GW_ADDRESS, min: 0, max: 2 },
        Rule::any(&FLOWS),
        Rule::any(&SUBSCRIPTION_ID),
        Rule::opt(&ABORT_CAUSE),
        Rule::opt(&IP_CAN_TYPE),
        Rule::opt(&RAT_TYPE),
        Rule::opt(&TGPP_SGSN_MCC_MNC),
        Rule::opt(&TGPP_USER_LOCATION_INFO),
        Rule::opt(&TGPP_MS_TIMEZONE),
        Rule::opt(&ORIGIN_STATE_ID),
        Rule::any(&CLASS),
        Rule::any(&PROXY_INFO),
        Rule::any(&ROUTE_RECORD),
    ],
    answer: &[
        Rule::one(&SESSION_ID),
        Rule::one(&ORIGIN_HOST),
        Rule::one(&ORIGIN_REALM),
        Rule::opt(&RESULT_CODE),
        Rule::opt(&EXPERIMENTAL_RESULT),
        Rule::any(&MEDIA_COMPONENT_DESCRIPTION),
        Rule::opt(&SERVICE_URN),
        Rule::opt(&ORIGIN_STATE_ID),
        Rule::any(&CLASS),
        Rule::opt(&ERROR_MESSAGE),
        Rule::opt(&ERROR_REPORTING_HOST),
        Rule::any(&REDIRECT_HOST),
        Rule::any(&FAILED_AVP),
        Rule::any(&PROXY_INFO),
    ],
};

pub static STR: CommandDef = CommandDef {
    name: "Session-Termination",
    abbrev: ("STR", "STA"),
    code: CMD_SESSION_TERMINATION,
    application_id: APP_ID,
    proxiable: true,
    request: STR_REQUEST,
    answer: STR_ANSWER,
};

/// STR/STA grammar shared by Rx and Sy (both follow RFC 6733 §8.4 with few additions).
pub(crate) static STR_REQUEST: &[Rule] = &[
    Rule::one(&SESSION_ID),
    Rule::one(&ORIGIN_HOST),
    Rule::one(&ORIGIN_REALM),
    Rule::one(&DESTINATION_REALM),
    Rule::one(&AUTH_APPLICATION_ID),
    Rule::one(&TERMINATION_CAUSE),
    Rule::opt(&DESTINATION_HOST),
    Rule::any(&REQUIRED_ACCESS_INFO),
    Rule::opt(&ORIGIN_STATE_ID),
    Rule::any(&CLASS),
    Rule::any(&PROXY_INFO),
    Rule::any(&ROUTE_RECORD),
];
pub(crate) static STR_ANSWER: &[Rule] = &[
    Rule::one(&SESSION_ID),
    Rule::one(&ORIGIN_HOST),
    Rule::one(&ORIGIN_REALM),
    Rule::opt(&RESULT_CODE),
    Rule::opt(&ERROR_MESSAGE),
    Rule::opt(&ERROR_REPORTING_HOST),
    Rule::any(&FAILED_AVP),
    Rule::any(&CLASS),
    Rule::opt(&TGPP_USER_LOCATION_INFO),
    Rule::opt(&TGPP_MS_TIMEZONE),
    Rule::opt(&ORIGIN_STATE_ID),
    Rule::any(&REDIRECT_HOST),
    Rule::any(&PROXY_INFO),
];

pub static ASR: CommandDef = CommandDef {
    name: "Abort-Session",
    abbrev: ("ASR", "ASA"),
    code: CMD_ABORT_SESSION,
    application_id: APP_ID,
    proxiable: true,
    request: &[
        Rule::one(&SESSION_ID),
        Rule::one(&ORIGIN_HOST),
        Rule::one(&ORIGIN_REALM),
        Rule::one(&DESTINATION_REALM),
        Rule::one(&DESTINATION_HOST),
        Rule::one(&AUTH_APPLICATION_ID),
        Rule::one(&ABORT_CAUSE),
        Rule::opt(&ORIGIN_STATE_ID),
        Rule::any(&PROXY_INFO),
        Rule::any(&ROUTE_RECORD),
    ],
    answer: &[
        Rule::one(&SESSION_ID),
        Rule::one(&ORIGIN_HOST),
        Rule::one(&ORIGIN_REALM),
        Rule::opt(&RESULT_CODE),
        Rule::opt(&ORIGIN_STATE_ID),
        Rule::opt(&ERROR_MESSAGE),
        Rule::opt(&ERROR_REPORTING_HOST),
        Rule::any(&FAILED_AVP),
        Rule::any(&REDIRECT_HOST),
        Rule::any(&PROXY_INFO),
    ],
};

pub static RX: ApplicationDef = ApplicationDef {
    name: "3GPP Rx",
    id: APP_ID,
    vendor_id: VENDOR_3GPP,
    commands: &[&AAR, &RAR, &STR, &ASR],
};
