//! Sy (3GPP TS 29.219): policy counter status between PCRF and OCS. SLR/SLA, SNR/SNA, STR/STA.

use super::base::{
    AUTH_APPLICATION_ID, DESTINATION_HOST, DESTINATION_REALM, ERROR_MESSAGE, ERROR_REPORTING_HOST,
    EXPERIMENTAL_RESULT, FAILED_AVP, ORIGIN_HOST, ORIGIN_REALM, ORIGIN_STATE_ID, PROXY_INFO,
    RESULT_CODE, ROUTE_RECORD, SESSION_ID,
};
use super::dcca::SUBSCRIPTION_ID;
use super::rx::{STR_ANSWER, STR_REQUEST};
use super::sh::SUPPORTED_FEATURES;
use super::{ApplicationDef, AvpDef, CommandDef, Rule, VENDOR_3GPP};
use crate::types::DataType as T;

pub const APP_ID: u32 = 16777302;
pub const CMD_SPENDING_LIMIT: u32 = 8388635;
pub const CMD_SPENDING_STATUS_NOTIFICATION: u32 = 8388636;
pub const CMD_SESSION_TERMINATION: u32 = 275;

/// Experimental-Result-Code values of TS 29.219 §5.5 (vendor 10415).
pub mod experimental_result {
    pub const DIAMETER_ERROR_NO_AVAILABLE_POLICY_COUNTERS: u32 = 4241;
    pub const DIAMETER_ERROR_UNKNOWN_POLICY_COUNTERS: u32 = 5570;
}

/// SL-Request-Type values.
pub mod sl_request_type {
    pub const INITIAL_REQUEST: u32 = 0;
    pub const INTERMEDIATE_REQUEST: u32 = 1;
}

pub static POLICY_COUNTER_IDENTIFIER: AvpDef =
    AvpDef::tgpp("Policy-Counter-Identifier", 2901, T::UTF8String);
pub static POLICY_COUNTER_STATUS: AvpDef =
    AvpDef::tgpp("Policy-Counter-Status", 2902, T::UTF8String);
pub static POLICY_COUNTER_STATUS_REPORT: AvpDef =
    AvpDef::tgpp("Policy-Counter-Status-Report", 2903, T::Grouped)
        .group(&[Rule::one(&POLICY_COUNTER_IDENTIFIER), Rule::one(&POLICY_COUNTER_STATUS)]);
pub static SL_REQUEST_TYPE: AvpDef = AvpDef::tgpp("SL-Request-Type", 2904, T::Enumerated)
    .enums(&[(0, "INITIAL_REQUEST"), (1, "INTERMEDIATE_REQUEST")]);
pub static PENDING_POLICY_COUNTER_INFORMATION: AvpDef =
    AvpDef::tgpp("Pending-Policy-Counter-Information", 2905, T::Grouped).group(&[
        Rule::one(&POLICY_COUNTER_STATUS),
        Rule::one(&PENDING_POLICY_COUNTER_CHANGE_TIME),
    ]);
pub static PENDING_POLICY_COUNTER_CHANGE_TIME: AvpDef =
    AvpDef::tgpp("Pending-Policy-Counter-Change-Time", 2906, T::Time);

pub static AVPS: &[&AvpDef] = &[
    &POLICY_COUNTER_IDENTIFIER,
    &POLICY_COUNTER_STATUS,
    &POLICY_COUNTER_STATUS_REPORT,
    &SL_REQUEST_TYPE,
    &PENDING_POLICY_COUNTER_INFORMATION,
    &PENDING_POLICY_COUNTER_CHANGE_TIME,
];

pub static SLR: CommandDef = CommandDef {
    name: "Spending-Limit",
    abbrev: ("SLR", "SLA"),
    code: CMD_SPENDING_LIMIT,
    application_id: APP_ID,
    proxiable: true,
    request: &[
        Rule::one(&SESSION_ID),
        Rule::one(&AUTH_APPLICATION_ID),
        Rule::one(&ORIGIN_HOST),
        Rule::one(&ORIGIN_REALM),
        Rule::one(&DESTINATION_REALM),
        Rule::opt(&DESTINATION_HOST),
        Rule::one(&SL_REQUEST_TYPE),
        Rule::opt(&ORIGIN_STATE_ID),
        Rule::any(&SUBSCRIPTION_ID),
        Rule::any(&POLICY_COUNTER_IDENTIFIER),
        Rule::any(&SUPPORTED_FEATURES),
        Rule::any(&PROXY_INFO),
        Rule::any(&ROUTE_RECORD),
    ],
    answer: &[
        Rule::one(&SESSION_ID),
        Rule::opt(&AUTH_APPLICATION_ID),
        Rule::one(&ORIGIN_HOST),
        Rule::one(&ORIGIN_REALM),
        Rule::opt(&RESULT_CODE),
        Rule::opt(&EXPERIMENTAL_RESULT),
        Rule::any(&POLICY_COUNTER_STATUS_REPORT),
        Rule::any(&SUPPORTED_FEATURES),
        Rule::opt(&ORIGIN_STATE_ID),
        Rule::opt(&ERROR_MESSAGE),
        Rule::opt(&ERROR_REPORTING_HOST),
        Rule::any(&FAILED_AVP),
        Rule::any(&PROXY_INFO),
    ],
};

pub static SNR: CommandDef = CommandDef {
    name: "Spending-Status-Notification",
    abbrev: ("SNR", "SNA"),
    code: CMD_SPENDING_STATUS_NOTIFICATION,
    application_id: APP_ID,
    proxiable: true,
    request: &[
        Rule::one(&SESSION_ID),
        Rule::one(&AUTH_APPLICATION_ID),
        Rule::one(&ORIGIN_HOST),
        Rule::one(&ORIGIN_REALM),
        Rule::one(&DESTINATION_REALM),
        Rule::one(&DESTINATION_HOST),
        Rule::opt(&ORIGIN_STATE_ID),
        Rule::any(&POLICY_COUNTER_STATUS_REPORT),
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
        Rule::opt(&ERROR_MESSAGE),
        Rule::opt(&ERROR_REPORTING_HOST),
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

pub static SY: ApplicationDef = ApplicationDef {
    name: "3GPP Sy",
    id: APP_ID,
    vendor_id: VENDOR_3GPP,
    commands: &[&SLR, &SNR, &STR],
};
