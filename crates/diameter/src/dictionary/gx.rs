//! Gx and Sd (3GPP TS 29.212): PCC rules, QoS, event triggers, usage monitoring, and the ADC
//! rules/TDF session of Sd. Also the TS 29.061 `3GPP-*` AVPs a PCEF sends on Gx.

use super::base::{
    AUTH_APPLICATION_ID, DESTINATION_HOST, DESTINATION_REALM, ERROR_MESSAGE, ERROR_REPORTING_HOST,
    EXPERIMENTAL_RESULT, FAILED_AVP, ORIGIN_HOST, ORIGIN_REALM, ORIGIN_STATE_ID, PROXY_INFO,
    REDIRECT_HOST, RESULT_CODE, RE_AUTH_REQUEST_TYPE, ROUTE_RECORD, SESSION_ID, TERMINATION_CAUSE,
};
use super::dcca::{CC_REQUEST_NUMBER, CC_REQUEST_TYPE, SUBSCRIPTION_ID, USER_EQUIPMENT_INFO};
use super::nasreq::{CALLED_STATION_ID, FRAMED_IPV6_PREFIX, FRAMED_IP_ADDRESS};
use super::rx::{ACCESS_NETWORK_CHARGING_ADDRESS, ACCESS_NETWORK_CHARGING_IDENTIFIER_VALUE};
use super::sh::SUPPORTED_FEATURES;
use super::{ApplicationDef, AvpDef, CommandDef, FlagRule, Rule, VENDOR_3GPP};
use crate::types::DataType as T;

pub const APP_ID: u32 = 16777238;
pub const SD_APP_ID: u32 = 16777303;
pub const CMD_CREDIT_CONTROL: u32 = 272;
pub const CMD_RE_AUTH: u32 = 258;
/// TDF-Session-Request/Answer (TSR/TSA) on Sd.
pub const CMD_TDF_SESSION: u32 = 8388637;

/// Experimental-Result-Code values of TS 29.212 §5.5 (vendor 10415).
pub mod experimental_result {
    pub const DIAMETER_PCC_BEARER_EVENT: u32 = 4141;
    pub const DIAMETER_AN_GW_FAILED: u32 = 4143;
    pub const DIAMETER_PENDING_TRANSACTION: u32 = 4144;
    pub const DIAMETER_ERROR_INITIAL_PARAMETERS: u32 = 5140;
    pub const DIAMETER_ERROR_TRIGGER_EVENT: u32 = 5141;
    pub const DIAMETER_PCC_RULE_EVENT: u32 = 5142;
    pub const DIAMETER_ERROR_BEARER_NOT_AUTHORIZED: u32 = 5143;
    pub const DIAMETER_ERROR_TRAFFIC_MAPPING_INFO_REJECTED: u32 = 5144;
    pub const DIAMETER_ERROR_CONFLICTING_REQUEST: u32 = 5147;
    pub const DIAMETER_ADC_RULE_EVENT: u32 = 5148;
    pub const DIAMETER_ERROR_NBIFOM_NOT_AUTHORIZED: u32 = 5149;
}

/// Event-Trigger values used by our PCRF.
pub mod event_trigger {
    pub const SGSN_CHANGE: u32 = 0;
    pub const QOS_CHANGE: u32 = 1;
    pub const RAT_CHANGE: u32 = 2;
    pub const PLMN_CHANGE: u32 = 4;
    pub const LOSS_OF_BEARER: u32 = 5;
    pub const RECOVERY_OF_BEARER: u32 = 6;
    pub const IP_CAN_CHANGE: u32 = 7;
    pub const USER_LOCATION_CHANGE: u32 = 13;
    pub const NO_EVENT_TRIGGERS: u32 = 14;
    pub const REVALIDATION_TIMEOUT: u32 = 17;
    pub const UE_IP_ADDRESS_ALLOCATE: u32 = 18;
    pub const UE_IP_ADDRESS_RELEASE: u32 = 19;
    pub const DEFAULT_EPS_BEARER_QOS_CHANGE: u32 = 20;
    pub const SUCCESSFUL_RESOURCE_ALLOCATION: u32 = 22;
    pub const UE_TIME_ZONE_CHANGE: u32 = 25;
    pub const TAI_CHANGE: u32 = 26;
    pub const ECGI_CHANGE: u32 = 27;
    pub const APN_AMBR_MODIFICATION_FAILURE: u32 = 29;
    pub const USAGE_REPORT: u32 = 33;
    pub const APPLICATION_START: u32 = 39;
    pub const APPLICATION_STOP: u32 = 40;
}

/// IP-CAN-Type values.
pub mod ip_can_type {
    pub const TGPP_GPRS: u32 = 0;
    pub const DOCSIS: u32 = 1;
    pub const XDSL: u32 = 2;
    pub const WIMAX: u32 = 3;
    pub const TGPP2: u32 = 4;
    pub const TGPP_EPS: u32 = 5;
    pub const NON_3GPP_EPS: u32 = 6;
    pub const FBA: u32 = 7;
    pub const TGPP_5GS: u32 = 8;
    pub const NON_3GPP_5GS: u32 = 9;
}

/// RAT-Type values.
pub mod rat_type {
    pub const WLAN: u32 = 0;
    pub const VIRTUAL: u32 = 1;
    pub const UTRAN: u32 = 1000;
    pub const GERAN: u32 = 1001;
    pub const GAN: u32 = 1002;
    pub const HSPA_EVOLUTION: u32 = 1003;
    pub const EUTRAN: u32 = 1004;
    pub const EUTRAN_NB_IOT: u32 = 1005;
    pub const NR: u32 = 1006;
}

/// TS 29.061 §16.4.7: the MCC+MNC of the serving node, as text.
pub static TGPP_SGSN_MCC_MNC: AvpDef = AvpDef::tgpp("3GPP-SGSN-MCC-MNC", 18, T::UTF8String);
pub static TGPP_USER_LOCATION_INFO: AvpDef =
    AvpDef::tgpp("3GPP-User-Location-Info", 22, T::OctetString);
pub static TGPP_MS_TIMEZONE: AvpDef = AvpDef::tgpp("3GPP-MS-TimeZone", 23, T::OctetString);

pub static BEARER_USAGE: AvpDef = AvpDef::tgpp("Bearer-Usage", 1000, T::Enumerated).enums(&[
    (0, "GENERAL"),
    (1, "IMS_SIGNALLING"),
    (2, "DEDICATED"),
]);
pub static CHARGING_RULE_INSTALL: AvpDef = AvpDef::tgpp("Charging-Rule-Install", 1001, T::Grouped);
pub static CHARGING_RULE_REMOVE: AvpDef = AvpDef::tgpp("Charging-Rule-Remove", 1002, T::Grouped);
pub static CHARGING_RULE_DEFINITION: AvpDef =
    AvpDef::tgpp("Charging-Rule-Definition", 1003, T::Grouped)
        .group(&[Rule::one(&CHARGING_RULE_NAME)]);
pub static CHARGING_RULE_BASE_NAME: AvpDef =
    AvpDef::tgpp("Charging-Rule-Base-Name", 1004, T::UTF8String);
pub static CHARGING_RULE_NAME: AvpDef = AvpDef::tgpp("Charging-Rule-Name", 1005, T::OctetString);
pub static EVENT_TRIGGER: AvpDef = AvpDef::tgpp("Event-Trigger", 1006, T::Enumerated).enums(&[
    (0, "SGSN_CHANGE"),
    (1, "QOS_CHANGE"),
    (2, "RAT_CHANGE"),
    (3, "TFT_CHANGE"),
    (4, "PLMN_CHANGE"),
    (5, "LOSS_OF_BEARER"),
    (6, "RECOVERY_OF_BEARER"),
    (7, "IP-CAN_CHANGE"),
    (8, "GW-PCEF-MALFUNCTION"),
    (9, "RESOURCES_LIMITATION"),
    (10, "MAX_NR_BEARERS_REACHED"),
    (11, "QOS_CHANGE_EXCEEDING_AUTHORIZATION"),
    (12, "RAI_CHANGE"),
    (13, "USER_LOCATION_CHANGE"),
    (14, "NO_EVENT_TRIGGERS"),
    (15, "OUT_OF_CREDIT"),
    (16, "REALLOCATION_OF_CREDIT"),
    (17, "REVALIDATION_TIMEOUT"),
    (18, "UE_IP_ADDRESS_ALLOCATE"),
    (19, "UE_IP_ADDRESS_RELEASE"),
    (20, "DEFAULT_EPS_BEARER_QOS_CHANGE"),
    (21, "AN_GW_CHANGE"),
    (22, "SUCCESSFUL_RESOURCE_ALLOCATION"),
    (23, "RESOURCE_MODIFICATION_REQUEST"),
    (24, "PGW_TRACE_CONTROL"),
    (25, "UE_TIME_ZONE_CHANGE"),
    (26, "TAI_CHANGE"),
    (27, "ECGI_CHANGE"),
    (28, "CHARGING_CORRELATION_EXCHANGE"),
    (29, "APN-AMBR_MODIFICATION_FAILURE"),
    (30, "USER_CSG_INFORMATION_CHANGE"),
    (33, "USAGE_REPORT"),
    (34, "DEFAULT-EPS-BEARER-QOS_MODIFICATION_FAILURE"),
    (35, "USER_CSG_HYBRID_SUBSCRIBED_INFORMATION_CHANGE"),
    (36, "USER_CSG_HYBRID_UNSUBSCRIBED_INFORMATION_CHANGE"),
    (37, "ROUTING_RULE_CHANGE"),
    (39, "APPLICATION_START"),
    (40, "APPLICATION_STOP"),
    (42, "CS_TO_PS_HANDOVER"),
    (43, "UE_LOCAL_IP_ADDRESS_CHANGE"),
    (44, "HENB_LOCAL_IP_ADDRESS_CHANGE"),
    (45, "ACCESS_NETWORK_INFO_REPORT"),
    (46, "CREDIT_MANAGEMENT_SESSION_FAILURE"),
    (47, "DEFAULT_QOS_CHANGE"),
    (48, "CHANGE_OF_UE_PRESENCE_IN_PRESENCE_REPORTING_AREA_REPORT"),
]);
pub static METERING_METHOD: AvpDef = AvpDef::tgpp("Metering-Method", 1007, T::Enumerated).enums(&[
    (0, "DURATION"),
    (1, "VOLUME"),
    (2, "DURATION_VOLUME"),
]);
pub static OFFLINE: AvpDef = AvpDef::tgpp("Offline", 1008, T::Enumerated)
    .enums(&[(0, "DISABLE_OFFLINE"), (1, "ENABLE_OFFLINE")]);
pub static ONLINE: AvpDef = AvpDef::tgpp("Online", 1009, T::Enumerated)
    .enums(&[(0, "DISABLE_ONLINE"), (1, "ENABLE_ONLINE")]);
pub static PRECEDENCE: AvpDef = AvpDef::tgpp("Precedence", 1010, T::Unsigned32);
pub static REPORTING_LEVEL: AvpDef = AvpDef::tgpp("Reporting-Level", 1011, T::Enumerated).enums(&[
    (0, "SERVICE_IDENTIFIER_LEVEL"),
    (1, "RATING_GROUP_LEVEL"),
    (2, "SPONSORED_CONNECTIVITY_LEVEL"),
]);
pub static TFT_FILTER: AvpDef = AvpDef::tgpp("TFT-Filter", 1012, T::IPFilterRule);
pub static TFT_PACKET_FILTER_INFORMATION: AvpDef =
    AvpDef::tgpp("TFT-Packet-Filter-Information", 1013, T::Grouped);
pub static TOS_TRAFFIC_CLASS: AvpDef = AvpDef::tgpp("ToS-Traffic-Class", 1014, T::OctetString);
pub static QOS_INFORMATION: AvpDef = AvpDef::tgpp("QoS-Information", 1016, T::Grouped);
pub static CHARGING_RULE_REPORT: AvpDef = AvpDef::tgpp("Charging-Rule-Report", 1018, T::Grouped);
pub static PCC_RULE_STATUS: AvpDef = AvpDef::tgpp("PCC-Rule-Status", 1019, T::Enumerated).enums(&[
    (0, "ACTIVE"),
    (1, "INACTIVE"),
    (2, "TEMPORARILY_INACTIVE"),
]);
pub static BEARER_IDENTIFIER: AvpDef = AvpDef::tgpp("Bearer-Identifier", 1020, T::OctetString);
pub static BEARER_OPERATION: AvpDef = AvpDef::tgpp("Bearer-Operation", 1021, T::Enumerated)
    .enums(&[(0, "TERMINATION"), (1, "ESTABLISHMENT"), (2, "MODIFICATION")]);
pub static ACCESS_NETWORK_CHARGING_IDENTIFIER_GX: AvpDef =
    AvpDef::tgpp("Access-Network-Charging-Identifier-Gx", 1022, T::Grouped)
        .group(&[Rule::one(&ACCESS_NETWORK_CHARGING_IDENTIFIER_VALUE)]);
pub static BEARER_CONTROL_MODE: AvpDef = AvpDef::tgpp("Bearer-Control-Mode", 1023, T::Enumerated)
    .enums(&[(0, "UE_ONLY"), (1, "RESERVED"), (2, "UE_NW")]);
pub static NETWORK_REQUEST_SUPPORT: AvpDef =
    AvpDef::tgpp("Network-Request-Support", 1024, T::Enumerated)
        .enums(&[(0, "NETWORK_REQUEST_NOT_SUPPORTED"), (1, "NETWORK_REQUEST_SUPPORTED")]);
pub static GUARANTEED_BITRATE_DL: AvpDef =
    AvpDef::tgpp("Guaranteed-Bitrate-DL", 1025, T::Unsigned32);
pub static GUARANTEED_BITRATE_UL: AvpDef =
    AvpDef::tgpp("Guaranteed-Bitrate-UL", 1026, T::Unsigned32);
pub static IP_CAN_TYPE: AvpDef = AvpDef::tgpp("IP-CAN-Type", 1027, T::Enumerated).enums(&[
    (0, "3GPP-GPRS"),
    (1, "DOCSIS"),
    (2, "xDSL"),
    (3, "WiMAX"),
    (4, "3GPP2"),
    (5, "3GPP-EPS"),
    (6, "Non-3GPP-EPS"),
    (7, "FBA"),
    (8, "3GPP-5GS"),
    (9, "Non-3GPP-5GS"),
]);
pub static QOS_CLASS_IDENTIFIER: AvpDef = AvpDef::tgpp("QoS-Class-Identifier", 1028, T::Enumerated)
    .enums(&[
        (1, "QCI_1"),
        (2, "QCI_2"),
        (3, "QCI_3"),
        (4, "QCI_4"),
        (5, "QCI_5"),
        (6, "QCI_6"),
        (7, "QCI_7"),
        (8, "QCI_8"),
        (9, "QCI_9"),
        (65, "QCI_65"),
        (66, "QCI_66"),
        (69, "QCI_69"),
        (70, "QCI_70"),
    ]);
pub static RULE_FAILURE_CODE: AvpDef = AvpDef::tgpp("Rule-Failure-Code", 1031, T::Enumerated)
    .enums(&[
        (1, "UNKNOWN_RULE_NAME"),
        (2, "RATING_GROUP_ERROR"),
        (3, "SERVICE_IDENTIFIER_ERROR"),
        (4, "GW/PCEF_MALFUNCTION"),
        (5, "RESOURCES_LIMITATION"),
        (6, "MAX_NR_BEARERS_REACHED"),
        (7, "UNKNOWN_BEARER_ID"),
        (8, "MISSING_BEARER_ID"),
        (9, "MISSING_FLOW_INFORMATION"),
        (10, "RESOURCE_ALLOCATION_FAILURE"),
        (11, "UNSUCCESSFUL_QOS_VALIDATION"),
        (12, "INCORRECT_FLOW_INFORMATION"),
        (13, "PS_TO_CS_HANDOVER"),
        (14, "TDF_APPLICATION_IDENTIFIER_ERROR"),
        (15, "NO_BEARER_BOUND"),
        (16, "FILTER_RESTRICTIONS"),
        (17, "AN_GW_FAILED"),
        (18, "MISSING_REDIRECT_SERVER_ADDRESS"),
        (19, "CM_END_USER_SERVICE_DENIED"),
        (20, "CM_CREDIT_CONTROL_NOT_APPLICABLE"),
        (21, "CM_AUTHORIZATION_REJECTED"),
        (22, "CM_USER_UNKNOWN"),
        (23, "CM_RATING_FAILED"),
    ]);
pub static RAT_TYPE: AvpDef =
    AvpDef::tgpp("RAT-Type", 1032, T::Enumerated).m(FlagRule::MustNot).enums(&[
        (0, "WLAN"),
        (1, "VIRTUAL"),
        (1000, "UTRAN"),
        (1001, "GERAN"),
        (1002, "GAN"),
        (1003, "HSPA_EVOLUTION"),
        (1004, "EUTRAN"),
        (1005, "EUTRAN-NB-IoT"),
        (1006, "NR"),
        (2000, "CDMA2000_1X"),
        (2001, "HRPD"),
        (2002, "UMB"),
        (2003, "EHRPD"),
    ]);
pub static EVENT_REPORT_INDICATION: AvpDef =
    AvpDef::tgpp("Event-Report-Indication", 1033, T::Grouped).m(FlagRule::MustNot);
pub static ALLOCATION_RETENTION_PRIORITY: AvpDef =
    AvpDef::tgpp("Allocation-Retention-Priority", 1034, T::Grouped)
        .group(&[Rule::one(&PRIORITY_LEVEL)]);
pub static APN_AGGREGATE_MAX_BITRATE_DL: AvpDef =
    AvpDef::tgpp("APN-Aggregate-Max-Bitrate-DL", 1040, T::Unsigned32).m(FlagRule::MustNot);
pub static APN_AGGREGATE_MAX_BITRATE_UL: AvpDef =
    AvpDef::tgpp("APN-Aggregate-Max-Bitrate-UL", 1041, T::Unsigned32).m(FlagRule::MustNot);
pub static REVALIDATION_TIME: AvpDef = AvpDef::tgpp("Revalidation-Time", 1042, T::Time);
pub static RULE_ACTIVATION_TIME: AvpDef = AvpDef::tgpp("Rule-Activation-Time", 1043, T::Time);
pub static RULE_DEACTIVATION_TIME: AvpDef = AvpDef::tgpp("Rule-Deactivation-Time", 1044, T::Time);
pub static SESSION_RELEASE_CAUSE: AvpDef =
    AvpDef::tgpp("Session-Release-Cause", 1045, T::Enumerated).enums(&[
        (0, "UNSPECIFIED_REASON"),
        (1, "UE_SUBSCRIPTION_REASON"),
        (2, "INSUFFICIENT_SERVER_RESOURCES"),
        // Sd only (TS 29.212 §5.3.44): the PCRF ends a TDF session with its IP-CAN session.
        (3, "IP_CAN_SESSION_TERMINATION"),
        (4, "UE_IP_ADDRESS_RELEASE"),
    ]);
pub static PRIORITY_LEVEL: AvpDef = AvpDef::tgpp("Priority-Level", 1046, T::Unsigned32);
pub static PRE_EMPTION_CAPABILITY: AvpDef =
    AvpDef::tgpp("Pre-emption-Capability", 1047, T::Enumerated)
        .enums(&[(0, "PRE-EMPTION_CAPABILITY_ENABLED"), (1, "PRE-EMPTION_CAPABILITY_DISABLED")]);
pub static PRE_EMPTION_VULNERABILITY: AvpDef =
    AvpDef::tgpp("Pre-emption-Vulnerability", 1048, T::Enumerated).enums(&[
        (0, "PRE-EMPTION_VULNERABILITY_ENABLED"),
        (1, "PRE-EMPTION_VULNERABILITY_DISABLED"),
    ]);
pub static DEFAULT_EPS_BEARER_QOS: AvpDef =
    AvpDef::tgpp("Default-EPS-Bearer-QoS", 1049, T::Grouped).m(FlagRule::MustNot);
pub static AN_GW_ADDRESS: AvpDef =
    AvpDef::tgpp("AN-GW-Address", 1050, T::Address).m(FlagRule::MustNot);
pub static FLOW_INFORMATION: AvpDef =
    AvpDef::tgpp("Flow-Information", 1058, T::Grouped).m(FlagRule::MustNot);
pub static PACKET_FILTER_CONTENT: AvpDef =
    AvpDef::tgpp("Packet-Filter-Content", 1059, T::IPFilterRule).m(FlagRule::MustNot);
pub static PACKET_FILTER_IDENTIFIER: AvpDef =
    AvpDef::tgpp("Packet-Filter-Identifier", 1060, T::OctetString).m(FlagRule::MustNot);
pub static PACKET_FILTER_INFORMATION: AvpDef =
    AvpDef::tgpp("Packet-Filter-Information", 1061, T::Grouped).m(FlagRule::MustNot);
pub static PACKET_FILTER_OPERATION: AvpDef =
    AvpDef::tgpp("Packet-Filter-Operation", 1062, T::Enumerated).m(FlagRule::MustNot).enums(&[
        (0, "DELETION"),
        (1, "ADDITION"),
        (2, "MODIFICATION"),
    ]);
pub static RESOURCE_ALLOCATION_NOTIFICATION: AvpDef =
    AvpDef::tgpp("Resource-Allocation-Notification", 1063, T::Enumerated)
        .m(FlagRule::MustNot)
        .enums(&[(0, "ENABLE_NOTIFICATION")]);
pub static MONITORING_KEY: AvpDef =
    AvpDef::tgpp("Monitoring-Key", 1066, T::OctetString).m(FlagRule::MustNot);
pub static USAGE_MONITORING_INFORMATION: AvpDef =
    AvpDef::tgpp("Usage-Monitoring-Information", 1067, T::Grouped).m(FlagRule::MustNot);
pub static USAGE_MONITORING_LEVEL: AvpDef =
    AvpDef::tgpp("Usage-Monitoring-Level", 1068, T::Enumerated).m(FlagRule::MustNot).enums(&[
        (0, "SESSION_LEVEL"),
        (1, "PCC_RULE_LEVEL"),
        (2, "ADC_RULE_LEVEL"),
    ]);
pub static USAGE_MONITORING_REPORT: AvpDef =
    AvpDef::tgpp("Usage-Monitoring-Report", 1069, T::Enumerated)
        .m(FlagRule::MustNot)
        .enums(&[(0, "USAGE_MONITORING_REPORT_REQUIRED")]);
pub static USAGE_MONITORING_SUPPORT: AvpDef =
    AvpDef::tgpp("Usage-Monitoring-Support", 1070, T::Enumerated)
        .m(FlagRule::MustNot)
        .enums(&[(0, "USAGE_MONITORING_DISABLED")]);
pub static PACKET_FILTER_USAGE: AvpDef = AvpDef::tgpp("Packet-Filter-Usage", 1072, T::Enumerated)
    .m(FlagRule::MustNot)
    .enums(&[(1, "SEND_TO_UE")]);
pub static CHARGING_CORRELATION_INDICATOR: AvpDef =
    AvpDef::tgpp("Charging-Correlation-Indicator", 1073, T::Enumerated)
        .m(FlagRule::MustNot)
        .enums(&[(0, "CHARGING_IDENTIFIER_REQUIRED")]);
pub static FLOW_DIRECTION: AvpDef = AvpDef::tgpp("Flow-Direction", 1080, T::Enumerated)
    .m(FlagRule::MustNot)
    .enums(&[(0, "UNSPECIFIED"), (1, "DOWNLINK"), (2, "UPLINK"), (3, "BIDIRECTIONAL")]);

pub static AVPS: &[&AvpDef] = &[
    &TGPP_SGSN_MCC_MNC,
    &TGPP_USER_LOCATION_INFO,
    &TGPP_MS_TIMEZONE,
    &BEARER_USAGE,
    &CHARGING_RULE_INSTALL,
    &CHARGING_RULE_REMOVE,
    &CHARGING_RULE_DEFINITION,
    &CHARGING_RULE_BASE_NAME,
    &CHARGING_RULE_NAME,
    &EVENT_TRIGGER,
    &METERING_METHOD,
    &OFFLINE,
    &ONLINE,
    &PRECEDENCE,
    &REPORTING_LEVEL,
    &TFT_FILTER,
    &TFT_PACKET_FILTER_INFORMATION,
    &TOS_TRAFFIC_CLASS,
    &QOS_INFORMATION,
    &CHARGING_RULE_REPORT,
    &PCC_RULE_STATUS,
    &BEARER_IDENTIFIER,
    &BEARER_OPERATION,
    &ACCESS_NETWORK_CHARGING_IDENTIFIER_GX,
    &BEARER_CONTROL_MODE,
    &NETWORK_REQUEST_SUPPORT,
    &GUARANTEED_BITRATE_DL,
    &GUARANTEED_BITRATE_UL,
    &IP_CAN_TYPE,
    &QOS_CLASS_IDENTIFIER,
    &RULE_FAILURE_CODE,
    &RAT_TYPE,
    &EVENT_REPORT_INDICATION,
    &ALLOCATION_RETENTION_PRIORITY,
    &APN_AGGREGATE_MAX_BITRATE_DL,
    &APN_AGGREGATE_MAX_BITRATE_UL,
    &REVALIDATION_TIME,
    &RULE_ACTIVATION_TIME,
    &RULE_DEACTIVATION_TIME,
    &SESSION_RELEASE_CAUSE,
    &PRIORITY_LEVEL,
    &PRE_EMPTION_CAPABILITY,
    &PRE_EMPTION_VULNERABILITY,
    &DEFAULT_EPS_BEARER_QOS,
    &AN_GW_ADDRESS,
    &FLOW_INFORMATION,
    &PACKET_FILTER_CONTENT,
    &PACKET_FILTER_IDENTIFIER,
    &PACKET_FILTER_INFORMATION,
    &PACKET_FILTER_OPERATION,
    &RESOURCE_ALLOCATION_NOTIFICATION,
    &MONITORING_KEY,
    &USAGE_MONITORING_INFORMATION,
    &USAGE_MONITORING_LEVEL,
    &USAGE_MONITORING_REPORT,
    &USAGE_MONITORING_SUPPORT,
    &PACKET_FILTER_USAGE,
    &CHARGING_CORRELATION_INDICATOR,
    &FLOW_DIRECTION,
];

// --- Sd / ADC (TS 29.212 §5b) ---

pub static TDF_INFORMATION: AvpDef =
    AvpDef::tgpp("TDF-Information", 1087, T::Grouped).m(FlagRule::MustNot);
pub static TDF_APPLICATION_IDENTIFIER: AvpDef =
    AvpDef::tgpp("TDF-Application-Identifier", 1088, T::OctetString).m(FlagRule::MustNot);
pub static TDF_DESTINATION_HOST: AvpDef =
    AvpDef::tgpp("TDF-Destination-Host", 1089, T::DiameterIdentity).m(FlagRule::MustNot);
pub static TDF_DESTINATION_REALM: AvpDef =
    AvpDef::tgpp("TDF-Destination-Realm", 1090, T::DiameterIdentity).m(FlagRule::MustNot);
pub static TDF_IP_ADDRESS: AvpDef =
    AvpDef::tgpp("TDF-IP-Address", 1091, T::Address).m(FlagRule::MustNot);
pub static ADC_RULE_INSTALL: AvpDef = AvpDef::tgpp("ADC-Rule-Install", 1092, T::Grouped);
pub static ADC_RULE_REMOVE: AvpDef = AvpDef::tgpp("ADC-Rule-Remove", 1093, T::Grouped);
pub static ADC_RULE_DEFINITION: AvpDef =
    AvpDef::tgpp("ADC-Rule-Definition", 1094, T::Grouped).group(&[Rule::one(&ADC_RULE_NAME)]);
pub static ADC_RULE_BASE_NAME: AvpDef = AvpDef::tgpp("ADC-Rule-Base-Name", 1095, T::UTF8String);
pub static ADC_RULE_NAME: AvpDef = AvpDef::tgpp("ADC-Rule-Name", 1096, T::OctetString);
pub static ADC_RULE_REPORT: AvpDef = AvpDef::tgpp("ADC-Rule-Report", 1097, T::Grouped);
pub static APPLICATION_DETECTION_INFORMATION: AvpDef =
    AvpDef::tgpp("Application-Detection-Information", 1098, T::Grouped)
        .m(FlagRule::MustNot)
        .group(&[Rule::one(&TDF_APPLICATION_IDENTIFIER)]);
pub static TDF_APPLICATION_INSTANCE_IDENTIFIER: AvpDef =
    AvpDef::tgpp("TDF-Application-Instance-Identifier", 2802, T::OctetString).m(FlagRule::MustNot);
/// §5.3.82: an ADC (or PCC) rule's redirection, with the DCCA Redirect-Address-Type and
/// Redirect-Server-Address (RFC 4006 §8.38, §8.39).
pub static REDIRECT_INFORMATION: AvpDef =
    AvpDef::tgpp("Redirect-Information", 1085, T::Grouped).m(FlagRule::MustNot);
pub static REDIRECT_SUPPORT: AvpDef = AvpDef::tgpp("Redirect-Support", 1086, T::Enumerated)
    .m(FlagRule::MustNot)
    .enums(&[(0, "REDIRECTION_DISABLED"), (1, "REDIRECTION_ENABLED")]);

pub static SD_AVPS: &[&AvpDef] = &[
    &TDF_INFORMATION,
    &TDF_APPLICATION_IDENTIFIER,
    &TDF_DESTINATION_HOST,
    &TDF_DESTINATION_REALM,
    &TDF_IP_ADDRESS,
    &ADC_RULE_INSTALL,
    &ADC_RULE_REMOVE,
    &ADC_RULE_DEFINITION,
    &ADC_RULE_BASE_NAME,
    &ADC_RULE_NAME,
    &ADC_RULE_REPORT,
    &APPLICATION_DETECTION_INFORMATION,
    &TDF_APPLICATION_INSTANCE_IDENTIFIER,
    &REDIRECT_INFORMATION,
    &REDIRECT_SUPPORT,
];

pub static CCR: CommandDef = CommandDef {
    name: "Credit-Control",
    abbrev: ("CCR", "CCA"),
    code: CMD_CREDIT_CONTROL,
    application_id: APP_ID,
    proxiable: true,
    request: &[
        Rule::one(&SESSION_ID),
        Rule::one(&AUTH_APPLICATION_ID),
        Rule::one(&ORIGIN_HOST),
        Rule::one(&ORIGIN_REALM),
        Rule::one(&DESTINATION_REALM),
        Rule::one(&CC_REQUEST_TYPE),
        Rule::one(&CC_REQUEST_NUMBER),
        Rule::opt(&DESTINATION_HOST),
        Rule::opt(&ORIGIN_STATE_ID),
        Rule::any(&SUBSCRIPTION_ID),
        Rule::any(&SUPPORTED_FEATURES),
        Rule::opt(&TDF_INFORMATION),
        Rule::opt(&NETWORK_REQUEST_SUPPORT),
        Rule::any(&PACKET_FILTER_INFORMATION),
        Rule::opt(&PACKET_FILTER_OPERATION),
        Rule::opt(&BEARER_IDENTIFIER),
        Rule::opt(&BEARER_OPERATION),
        Rule::opt(&FRAMED_IP_ADDRESS),
        Rule::opt(&FRAMED_IPV6_PREFIX),
        Rule::opt(&IP_CAN_TYPE),
        Rule::opt(&RAT_TYPE),
        Rule::opt(&TERMINATION_CAUSE),
        Rule::opt(&USER_EQUIPMENT_INFO),
        Rule::opt(&QOS_INFORMATION),
        Rule::opt(&DEFAULT_EPS_BEARER_QOS),
        Rule { avp: &AN_GW_ADDRESS, min: 0, max: 2 },
        Rule::opt(&TGPP_SGSN_MCC_MNC),
        Rule::opt(&TGPP_USER_LOCATION_INFO),
        Rule::opt(&TGPP_MS_TIMEZONE),
        Rule::opt(&CALLED_STATION_ID),
        Rule::opt(&BEARER_USAGE),
        Rule::opt(&ONLINE),
        Rule::opt(&OFFLINE),
        Rule::any(&TFT_PACKET_FILTER_INFORMATION),
        Rule::any(&CHARGING_RULE_REPORT),
        Rule::any(&APPLICATION_DETECTION_INFORMATION),
        Rule::any(&EVENT_TRIGGER),
        Rule::opt(&EVENT_REPORT_INDICATION),
        Rule::opt(&ACCESS_NETWORK_CHARGING_ADDRESS),
        Rule::any(&ACCESS_NETWORK_CHARGING_IDENTIFIER_GX),
        Rule::any(&USAGE_MONITORING_INFORMATION),
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
        Rule::one(&CC_REQUEST_TYPE),
        Rule::one(&CC_REQUEST_NUMBER),
        Rule::any(&SUPPORTED_FEATURES),
        Rule::opt(&BEARER_CONTROL_MODE),
        Rule::any(&EVENT_TRIGGER),
        Rule::opt(&EVENT_REPORT_INDICATION),
        Rule::opt(&ORIGIN_STATE_ID),
        Rule::any(&REDIRECT_HOST),
        Rule::any(&CHARGING_RULE_REMOVE),
        Rule::any(&CHARGING_RULE_INSTALL),
        Rule::opt(&ONLINE),
        Rule::opt(&OFFLINE),
        Rule::any(&QOS_INFORMATION),
        Rule::opt(&REVALIDATION_TIME),
        Rule::opt(&DEFAULT_EPS_BEARER_QOS),
        Rule::opt(&BEARER_USAGE),
        Rule::any(&USAGE_MONITORING_INFORMATION),
        Rule::opt(&ERROR_MESSAGE),
        Rule::opt(&ERROR_REPORTING_HOST),
        Rule::any(&FAILED_AVP),
        Rule::any(&PROXY_INFO),
        Rule::any(&ROUTE_RECORD),
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
        Rule::one(&AUTH_APPLICATION_ID),
        Rule::one(&ORIGIN_HOST),
        Rule::one(&ORIGIN_REALM),
        Rule::one(&DESTINATION_REALM),
        Rule::one(&DESTINATION_HOST),
        Rule::one(&RE_AUTH_REQUEST_TYPE),
        Rule::opt(&SESSION_RELEASE_CAUSE),
        Rule::opt(&ORIGIN_STATE_ID),
        Rule::any(&EVENT_TRIGGER),
        Rule::opt(&EVENT_REPORT_INDICATION),
        Rule::any(&CHARGING_RULE_REMOVE),
        Rule::any(&CHARGING_RULE_INSTALL),
        Rule::opt(&DEFAULT_EPS_BEARER_QOS),
        Rule::any(&QOS_INFORMATION),
        Rule::opt(&REVALIDATION_TIME),
        Rule::any(&USAGE_MONITORING_INFORMATION),
        Rule::any(&PROXY_INFO),
        Rule::any(&ROUTE_RECORD),
    ],
    answer: &[
        Rule::one(&SESSION_ID),
        Rule::one(&ORIGIN_HOST),
        Rule::one(&ORIGIN_REALM),
        Rule::opt(&RESULT_CODE),
        Rule::opt(&EXPERIMENTAL_RESULT),
        Rule::opt(&ORIGIN_STATE_ID),
        Rule::any(&CHARGING_RULE_REPORT),
        Rule::opt(&RAT_TYPE),
        Rule::opt(&IP_CAN_TYPE),
        Rule::opt(&TGPP_USER_LOCATION_INFO),
        Rule::opt(&ERROR_MESSAGE),
        Rule::opt(&ERROR_REPORTING_HOST),
        Rule::any(&FAILED_AVP),
        Rule::any(&PROXY_INFO),
    ],
};

pub static GX: ApplicationDef =
    ApplicationDef { name: "3GPP Gx", id: APP_ID, vendor_id: VENDOR_3GPP, commands: &[&CCR, &RAR] };

pub static TSR: CommandDef = CommandDef {
    name: "TDF-Session",
    abbrev: ("TSR", "TSA"),
    code: CMD_TDF_SESSION,
    application_id: SD_APP_ID,
    proxiable: true,
    request: &[
        Rule::one(&SESSION_ID),
        Rule::one(&AUTH_APPLICATION_ID),
        Rule::one(&ORIGIN_HOST),
        Rule::one(&ORIGIN_REALM),
        Rule::one(&DESTINATION_REALM),
        Rule::opt(&DESTINATION_HOST),
        Rule::opt(&ORIGIN_STATE_ID),
        Rule::any(&SUBSCRIPTION_ID),
        Rule::any(&SUPPORTED_FEATURES),
        Rule::opt(&FRAMED_IP_ADDRESS),
        Rule::opt(&FRAMED_IPV6_PREFIX),
        Rule::opt(&CALLED_STATION_ID),
        Rule::any(&ADC_RULE_INSTALL),
        Rule::any(&ADC_RULE_REMOVE),
        Rule::any(&EVENT_TRIGGER),
        Rule::any(&USAGE_MONITORING_INFORMATION),
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
        Rule::opt(&ORIGIN_STATE_ID),
        Rule::any(&SUPPORTED_FEATURES),
        Rule::any(&ADC_RULE_REPORT),
        Rule::opt(&ERROR_MESSAGE),
        Rule::opt(&ERROR_REPORTING_HOST),
        Rule::any(&FAILED_AVP),
        Rule::any(&PROXY_INFO),
    ],
};

pub static SD_CCR: CommandDef = CommandDef {
    name: "Credit-Control",
    abbrev: ("CCR", "CCA"),
    code: CMD_CREDIT_CONTROL,
    application_id: SD_APP_ID,
    proxiable: true,
    request: &[
        Rule::one(&SESSION_ID),
        Rule::one(&AUTH_APPLICATION_ID),
        Rule::one(&ORIGIN_HOST),
        Rule::one(&ORIGIN_REALM),
        Rule::one(&DESTINATION_REALM),
        Rule::one(&CC_REQUEST_TYPE),
        Rule::one(&CC_REQUEST_NUMBER),
        Rule::opt(&DESTINATION_HOST),
        Rule::opt(&ORIGIN_STATE_ID),
        Rule::any(&SUPPORTED_FEATURES),
        Rule::any(&ADC_RULE_REPORT),
        Rule::any(&APPLICATION_DETECTION_INFORMATION),
        Rule::any(&EVENT_TRIGGER),
        Rule::any(&USAGE_MONITORING_INFORMATION),
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
        Rule::one(&CC_REQUEST_TYPE),
        Rule::one(&CC_REQUEST_NUMBER),
        Rule::any(&ADC_RULE_INSTALL),
        Rule::any(&ADC_RULE_REMOVE),
        Rule::any(&EVENT_TRIGGER),
        Rule::any(&USAGE_MONITORING_INFORMATION),
        Rule::opt(&ERROR_MESSAGE),
        Rule::any(&FAILED_AVP),
        Rule::any(&PROXY_INFO),
    ],
};

pub static SD_RAR: CommandDef = CommandDef {
    name: "Re-Auth",
    abbrev: ("RAR", "RAA"),
    code: CMD_RE_AUTH,
    application_id: SD_APP_ID,
    proxiable: true,
    request: &[
        Rule::one(&SESSION_ID),
        Rule::one(&AUTH_APPLICATION_ID),
        Rule::one(&ORIGIN_HOST),
        Rule::one(&ORIGIN_REALM),
        Rule::one(&DESTINATION_REALM),
        Rule::one(&DESTINATION_HOST),
        Rule::one(&RE_AUTH_REQUEST_TYPE),
        Rule::opt(&SESSION_RELEASE_CAUSE),
        Rule::opt(&ORIGIN_STATE_ID),
        Rule::any(&ADC_RULE_INSTALL),
        Rule::any(&ADC_RULE_REMOVE),
        Rule::any(&EVENT_TRIGGER),
        Rule::any(&USAGE_MONITORING_INFORMATION),
        Rule::any(&PROXY_INFO),
        Rule::any(&ROUTE_RECORD),
    ],
    answer: &[
        Rule::one(&SESSION_ID),
        Rule::one(&ORIGIN_HOST),
        Rule::one(&ORIGIN_REALM),
        Rule::opt(&RESULT_CODE),
        Rule::opt(&EXPERIMENTAL_RESULT),
        Rule::any(&ADC_RULE_REPORT),
        Rule::opt(&ERROR_MESSAGE),
        Rule::any(&FAILED_AVP),
        Rule::any(&PROXY_INFO),
    ],
};

pub static SD: ApplicationDef = ApplicationDef {
    name: "3GPP Sd",
    id: SD_APP_ID,
    vendor_id: VENDOR_3GPP,
    commands: &[&TSR, &SD_CCR, &SD_RAR],
};
