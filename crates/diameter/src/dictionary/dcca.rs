//! Diameter Credit-Control (RFC 4006): the AVPs Gx and Sy reuse (CC-Request-Type/Number,
//! Subscription-Id, service units, Multiple-Services-Credit-Control), and the DCCA application.

use super::base::{
    AUTH_APPLICATION_ID, DESTINATION_HOST, DESTINATION_REALM, EVENT_TIMESTAMP, ORIGIN_HOST,
    ORIGIN_REALM, ORIGIN_STATE_ID, RESULT_CODE, SESSION_ID, USER_NAME,
};
use super::{ApplicationDef, AvpDef, CommandDef, FlagRule, Rule};
use crate::types::DataType as T;

pub const APP_ID: u32 = 4;
pub const CMD_CREDIT_CONTROL: u32 = 272;

/// CC-Request-Type values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CcRequestType {
    Initial = 1,
    Update = 2,
    Termination = 3,
    Event = 4,
}

impl CcRequestType {
    pub fn from_u32(v: u32) -> Option<CcRequestType> {
        Some(match v {
            1 => CcRequestType::Initial,
            2 => CcRequestType::Update,
            3 => CcRequestType::Termination,
            4 => CcRequestType::Event,
            _ => return None,
        })
    }
}

/// Subscription-Id-Type values.
pub mod subscription_id_type {
    pub const END_USER_E164: u32 = 0;
    pub const END_USER_IMSI: u32 = 1;
    pub const END_USER_SIP_URI: u32 = 2;
    pub const END_USER_NAI: u32 = 3;
    pub const END_USER_PRIVATE: u32 = 4;
}

pub static CC_CORRELATION_ID: AvpDef =
    AvpDef::ietf("CC-Correlation-Id", 411, T::OctetString).m(FlagRule::May);
pub static CC_INPUT_OCTETS: AvpDef = AvpDef::ietf("CC-Input-Octets", 412, T::Unsigned64);
pub static CC_MONEY: AvpDef = AvpDef::ietf("CC-Money", 413, T::Grouped)
    .group(&[Rule::one(&UNIT_VALUE), Rule::opt(&CURRENCY_CODE)]);
pub static CC_OUTPUT_OCTETS: AvpDef = AvpDef::ietf("CC-Output-Octets", 414, T::Unsigned64);
pub static CC_REQUEST_NUMBER: AvpDef = AvpDef::ietf("CC-Request-Number", 415, T::Unsigned32);
pub static CC_REQUEST_TYPE: AvpDef = AvpDef::ietf("CC-Request-Type", 416, T::Enumerated).enums(&[
    (1, "INITIAL_REQUEST"),
    (2, "UPDATE_REQUEST"),
    (3, "TERMINATION_REQUEST"),
    (4, "EVENT_REQUEST"),
]);
pub static CC_SERVICE_SPECIFIC_UNITS: AvpDef =
    AvpDef::ietf("CC-Service-Specific-Units", 417, T::Unsigned64);
pub static CC_SESSION_FAILOVER: AvpDef = AvpDef::ietf("CC-Session-Failover", 418, T::Enumerated)
    .enums(&[(0, "FAILOVER_NOT_SUPPORTED"), (1, "FAILOVER_SUPPORTED")]);
pub static CC_SUB_SESSION_ID: AvpDef = AvpDef::ietf("CC-Sub-Session-Id", 419, T::Unsigned64);
pub static CC_TIME: AvpDef = AvpDef::ietf("CC-Time", 420, T::Unsigned32);
pub static CC_TOTAL_OCTETS: AvpDef = AvpDef::ietf("CC-Total-Octets", 421, T::Unsigned64);
pub static CURRENCY_CODE: AvpDef = AvpDef::ietf("Currency-Code", 425, T::Unsigned32);
pub static CREDIT_CONTROL_FAILURE_HANDLING: AvpDef =
    AvpDef::ietf("Credit-Control-Failure-Handling", 427, T::Enumerated).enums(&[
        (0, "TERMINATE"),
        (1, "CONTINUE"),
        (2, "RETRY_AND_TERMINATE"),
    ]);
pub static DIRECT_DEBITING_FAILURE_HANDLING: AvpDef =
    AvpDef::ietf("Direct-Debiting-Failure-Handling", 428, T::Enumerated)
        .enums(&[(0, "TERMINATE_OR_BUFFER"), (1, "CONTINUE")]);
pub static EXPONENT: AvpDef = AvpDef::ietf("Exponent", 429, T::Integer32);
pub static FINAL_UNIT_INDICATION: AvpDef =
    AvpDef::ietf("Final-Unit-Indication", 430, T::Grouped).group(&[Rule::one(&FINAL_UNIT_ACTION)]);
pub static GRANTED_SERVICE_UNIT: AvpDef = AvpDef::ietf("Granted-Service-Unit", 431, T::Grouped);
pub static RATING_GROUP: AvpDef = AvpDef::ietf("Rating-Group", 432, T::Unsigned32);
pub static REDIRECT_ADDRESS_TYPE: AvpDef =
    AvpDef::ietf("Redirect-Address-Type", 433, T::Enumerated).enums(&[
        (0, "IPV4_ADDRESS"),
        (1, "IPV6_ADDRESS"),
        (2, "URL"),
        (3, "SIP_URI"),
    ]);
pub static REDIRECT_SERVER: AvpDef = AvpDef::ietf("Redirect-Server", 434, T::Grouped)
    .group(&[Rule::one(&REDIRECT_ADDRESS_TYPE), Rule::one(&REDIRECT_SERVER_ADDRESS)]);
pub static REDIRECT_SERVER_ADDRESS: AvpDef =
    AvpDef::ietf("Redirect-Server-Address", 435, T::UTF8String);
pub static REQUESTED_ACTION: AvpDef =
    AvpDef::ietf("Requested-Action", 436, T::Enumerated).enums(&[
        (0, "DIRECT_DEBITING"),
        (1, "REFUND_ACCOUNT"),
        (2, "CHECK_BALANCE"),
        (3, "PRICE_ENQUIRY"),
    ]);
pub static REQUESTED_SERVICE_UNIT: AvpDef = AvpDef::ietf("Requested-Service-Unit", 437, T::Grouped);
pub static RESTRICTION_FILTER_RULE: AvpDef =
    AvpDef::ietf("Restriction-Filter-Rule", 438, T::IPFilterRule);
pub static SERVICE_IDENTIFIER: AvpDef = AvpDef::ietf("Service-Identifier", 439, T::Unsigned32);
pub static SUBSCRIPTION_ID: AvpDef = AvpDef::ietf("Subscription-Id", 443, T::Grouped)
    .group(&[Rule::one(&SUBSCRIPTION_ID_TYPE), Rule::one(&SUBSCRIPTION_ID_DATA)]);
pub static SUBSCRIPTION_ID_DATA: AvpDef = AvpDef::ietf("Subscription-Id-Data", 444, T::UTF8String);
pub static UNIT_VALUE: AvpDef = AvpDef::ietf("Unit-Value", 445, T::Grouped)
    .group(&[Rule::one(&VALUE_DIGITS), Rule::opt(&EXPONENT)]);
pub static USED_SERVICE_UNIT: AvpDef = AvpDef::ietf("Used-Service-Unit", 446, T::Grouped);
pub static VALUE_DIGITS: AvpDef = AvpDef::ietf("Value-Digits", 447, T::Integer64);
pub static VALIDITY_TIME: AvpDef = AvpDef::ietf("Validity-Time", 448, T::Unsigned32);
pub static FINAL_UNIT_ACTION: AvpDef = AvpDef::ietf("Final-Unit-Action", 449, T::Enumerated)
    .enums(&[(0, "TERMINATE"), (1, "REDIRECT"), (2, "RESTRICT_ACCESS")]);
pub static SUBSCRIPTION_ID_TYPE: AvpDef = AvpDef::ietf("Subscription-Id-Type", 450, T::Enumerated)
    .enums(&[
        (0, "END_USER_E164"),
        (1, "END_USER_IMSI"),
        (2, "END_USER_SIP_URI"),
        (3, "END_USER_NAI"),
        (4, "END_USER_PRIVATE"),
    ]);
pub static TARIFF_TIME_CHANGE: AvpDef = AvpDef::ietf("Tariff-Time-Change", 451, T::Time);
pub static TARIFF_CHANGE_USAGE: AvpDef = AvpDef::ietf("Tariff-Change-Usage", 452, T::Enumerated)
    .enums(&[
        (0, "UNIT_BEFORE_TARIFF_CHANGE"),
        (1, "UNIT_AFTER_TARIFF_CHANGE"),
        (2, "UNIT_INDETERMINATE"),
    ]);
pub static CC_UNIT_TYPE: AvpDef = AvpDef::ietf("CC-Unit-Type", 454, T::Enumerated).enums(&[
    (0, "TIME"),
    (1, "MONEY"),
    (2, "TOTAL-OCTETS"),
    (3, "INPUT-OCTETS"),
    (4, "OUTPUT-OCTETS"),
    (5, "SERVICE-SPECIFIC-UNITS"),
]);
pub static MULTIPLE_SERVICES_INDICATOR: AvpDef =
    AvpDef::ietf("Multiple-Services-Indicator", 455, T::Enumerated)
        .enums(&[(0, "MULTIPLE_SERVICES_NOT_SUPPORTED"), (1, "MULTIPLE_SERVICES_SUPPORTED")]);
pub static MULTIPLE_SERVICES_CREDIT_CONTROL: AvpDef =
    AvpDef::ietf("Multiple-Services-Credit-Control", 456, T::Grouped);
pub static USER_EQUIPMENT_INFO: AvpDef = AvpDef::ietf("User-Equipment-Info", 458, T::Grouped)
    .m(FlagRule::May)
    .group(&[Rule::one(&USER_EQUIPMENT_INFO_TYPE), Rule::one(&USER_EQUIPMENT_INFO_VALUE)]);
pub static USER_EQUIPMENT_INFO_TYPE: AvpDef =
    AvpDef::ietf("User-Equipment-Info-Type", 459, T::Enumerated).m(FlagRule::May).enums(&[
        (0, "IMEISV"),
        (1, "MAC"),
        (2, "EUI64"),
        (3, "MODIFIED_EUI64"),
    ]);
pub static USER_EQUIPMENT_INFO_VALUE: AvpDef =
    AvpDef::ietf("User-Equipment-Info-Value", 460, T::OctetString).m(FlagRule::May);
pub static SERVICE_CONTEXT_ID: AvpDef = AvpDef::ietf("Service-Context-Id", 461, T::UTF8String);

pub static AVPS: &[&AvpDef] = &[
    &CC_CORRELATION_ID,
    &CC_INPUT_OCTETS,
    &CC_MONEY,
    &CC_OUTPUT_OCTETS,
    &CC_REQUEST_NUMBER,
    &CC_REQUEST_TYPE,
    &CC_SERVICE_SPECIFIC_UNITS,
    &CC_SESSION_FAILOVER,
    &CC_SUB_SESSION_ID,
    &CC_TIME,
    &CC_TOTAL_OCTETS,
    &CURRENCY_CODE,
    &CREDIT_CONTROL_FAILURE_HANDLING,
    &DIRECT_DEBITING_FAILURE_HANDLING,
    &EXPONENT,
    &FINAL_UNIT_INDICATION,
    &GRANTED_SERVICE_UNIT,
    &RATING_GROUP,
    &REDIRECT_ADDRESS_TYPE,
    &REDIRECT_SERVER,
    &REDIRECT_SERVER_ADDRESS,
    &REQUESTED_ACTION,
    &REQUESTED_SERVICE_UNIT,
    &RESTRICTION_FILTER_RULE,
    &SERVICE_IDENTIFIER,
    &SUBSCRIPTION_ID,
    &SUBSCRIPTION_ID_DATA,
    &UNIT_VALUE,
    &USED_SERVICE_UNIT,
    &VALUE_DIGITS,
    &VALIDITY_TIME,
    &FINAL_UNIT_ACTION,
    &SUBSCRIPTION_ID_TYPE,
    &TARIFF_TIME_CHANGE,
    &TARIFF_CHANGE_USAGE,
    &CC_UNIT_TYPE,
    &MULTIPLE_SERVICES_INDICATOR,
    &MULTIPLE_SERVICES_CREDIT_CONTROL,
    &USER_EQUIPMENT_INFO,
    &USER_EQUIPMENT_INFO_TYPE,
    &USER_EQUIPMENT_INFO_VALUE,
    &SERVICE_CONTEXT_ID,
];

/// The generic RFC 4006 CCR/CCA (Gy-style). Gx has its own grammar in `gx`.
pub static CCR: CommandDef = CommandDef {
    name: "Credit-Control",
    abbrev: ("CCR", "CCA"),
    code: CMD_CREDIT_CONTROL,
    application_id: APP_ID,
    proxiable: true,
    request: &[
        Rule::one(&SESSION_ID),
        Rule::one(&ORIGIN_HOST),
        Rule::one(&ORIGIN_REALM),
        Rule::one(&DESTINATION_REALM),
        Rule::one(&AUTH_APPLICATION_ID),
        Rule::one(&SERVICE_CONTEXT_ID),
        Rule::one(&CC_REQUEST_TYPE),
        Rule::one(&CC_REQUEST_NUMBER),
        Rule::opt(&DESTINATION_HOST),
        Rule::opt(&USER_NAME),
        Rule::opt(&ORIGIN_STATE_ID),
        Rule::opt(&EVENT_TIMESTAMP),
        Rule::any(&SUBSCRIPTION_ID),
        Rule::any(&MULTIPLE_SERVICES_CREDIT_CONTROL),
    ],
    answer: &[
        Rule::one(&SESSION_ID),
        Rule::one(&RESULT_CODE),
        Rule::one(&ORIGIN_HOST),
        Rule::one(&ORIGIN_REALM),
        Rule::one(&AUTH_APPLICATION_ID),
        Rule::one(&CC_REQUEST_TYPE),
        Rule::one(&CC_REQUEST_NUMBER),
        Rule::any(&MULTIPLE_SERVICES_CREDIT_CONTROL),
    ],
};

pub static DCCA: ApplicationDef =
    ApplicationDef { name: "Diameter Credit Control", id: APP_ID, vendor_id: 0, commands: &[&CCR] };
