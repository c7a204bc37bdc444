//! RFC 6733 base protocol: AVPs (§4.5), CER/CEA, DWR/DWA, DPR/DPA (§5), and the
//! session-management AVPs (§8) the applications reuse.

use super::{ApplicationDef, AvpDef, CommandDef, FlagRule, Rule};
use crate::types::DataType as T;

/// Application id of the common messages (CER, DWR, DPR).
pub const APP_ID: u32 = 0;
/// The relay application id, advertised by relays (RFC 6733 §2.4).
pub const RELAY_APP_ID: u32 = 0xffff_ffff;

pub const CMD_CAPABILITIES_EXCHANGE: u32 = 257;
pub const CMD_RE_AUTH: u32 = 258;
pub const CMD_ACCOUNTING: u32 = 271;
pub const CMD_ABORT_SESSION: u32 = 274;
pub const CMD_SESSION_TERMINATION: u32 = 275;
pub const CMD_DEVICE_WATCHDOG: u32 = 280;
pub const CMD_DISCONNECT_PEER: u32 = 282;

pub static USER_NAME: AvpDef = AvpDef::ietf("User-Name", 1, T::UTF8String);
pub static CLASS: AvpDef = AvpDef::ietf("Class", 25, T::OctetString);
pub static SESSION_TIMEOUT: AvpDef = AvpDef::ietf("Session-Timeout", 27, T::Unsigned32);
pub static PROXY_STATE: AvpDef = AvpDef::ietf("Proxy-State", 33, T::OctetString);
pub static ACCT_SESSION_ID: AvpDef = AvpDef::ietf("Acct-Session-Id", 44, T::OctetString);
pub static ACCT_MULTI_SESSION_ID: AvpDef = AvpDef::ietf("Acct-Multi-Session-Id", 50, T::UTF8String);
pub static EVENT_TIMESTAMP: AvpDef = AvpDef::ietf("Event-Timestamp", 55, T::Time);
pub static ACCT_INTERIM_INTERVAL: AvpDef = AvpDef::ietf("Acct-Interim-Interval", 85, T::Unsigned32);
pub static HOST_IP_ADDRESS: AvpDef = AvpDef::ietf("Host-IP-Address", 257, T::Address);
pub static AUTH_APPLICATION_ID: AvpDef = AvpDef::ietf("Auth-Application-Id", 258, T::Unsigned32);
pub static ACCT_APPLICATION_ID: AvpDef = AvpDef::ietf("Acct-Application-Id", 259, T::Unsigned32);
pub static VENDOR_SPECIFIC_APPLICATION_ID: AvpDef =
    AvpDef::ietf("Vendor-Specific-Application-Id", 260, T::Grouped).group(&[
        Rule::opt(&VENDOR_ID),
        Rule::opt(&AUTH_APPLICATION_ID),
        Rule::opt(&ACCT_APPLICATION_ID),
    ]);
pub static REDIRECT_HOST_USAGE: AvpDef = AvpDef::ietf("Redirect-Host-Usage", 261, T::Enumerated)
    .enums(&[
        (0, "DONT_CACHE"),
        (1, "ALL_SESSION"),
        (2, "ALL_REALM"),
        (3, "REALM_AND_APPLICATION"),
        (4, "ALL_APPLICATION"),
        (5, "ALL_HOST"),
        (6, "ALL_USER"),
    ]);
pub static REDIRECT_MAX_CACHE_TIME: AvpDef =
    AvpDef::ietf("Redirect-Max-Cache-Time", 262, T::Unsigned32);
pub static SESSION_ID: AvpDef = AvpDef::ietf("Session-Id", 263, T::UTF8String);
pub static ORIGIN_HOST: AvpDef = AvpDef::ietf("Origin-Host", 264, T::DiameterIdentity);
pub static SUPPORTED_VENDOR_ID: AvpDef = AvpDef::ietf("Supported-Vendor-Id", 265, T::Unsigned32);
pub static VENDOR_ID: AvpDef = AvpDef::ietf("Vendor-Id", 266, T::Unsigned32);
pub static FIRMWARE_REVISION: AvpDef =
    AvpDef::ietf("Firmware-Revision", 267, T::Unsigned32).m(FlagRule::MustNot);
pub static RESULT_CODE: AvpDef = AvpDef::ietf("Result-Code", 268, T::Unsigned32);
pub static PRODUCT_NAME: AvpDef =
    AvpDef::ietf("Product-Name", 269, T::UTF8String).m(FlagRule::MustNot);
pub static SESSION_BINDING: AvpDef = AvpDef::ietf("Session-Binding", 270, T::Unsigned32);
pub static SESSION_SERVER_FAILOVER: AvpDef =
    AvpDef::ietf("Session-Server-Failover", 271, T::Enumerated).enums(&[
        (0, "REFUSE_SERVICE"),
        (1, "TRY_AGAIN"),
        (2, "ALLOW_SERVICE"),
        (3, "TRY_AGAIN_ALLOW_SERVICE"),
    ]);
pub static MULTI_ROUND_TIME_OUT: AvpDef = AvpDef::ietf("Multi-Round-Time-Out", 272, T::Unsigned32);
pub static DISCONNECT_CAUSE: AvpDef = AvpDef::ietf("Disconnect-Cause", 273, T::Enumerated)
    .enums(&[(0, "REBOOTING"), (1, "BUSY"), (2, "DO_NOT_WANT_TO_TALK_TO_YOU")]);
pub static AUTH_REQUEST_TYPE: AvpDef = AvpDef::ietf("Auth-Request-Type", 274, T::Enumerated)
    .enums(&[(1, "AUTHENTICATE_ONLY"), (2, "AUTHORIZE_ONLY"), (3, "AUTHORIZE_AUTHENTICATE")]);
pub static AUTH_GRACE_PERIOD: AvpDef = AvpDef::ietf("Auth-Grace-Period", 276, T::Unsigned32);
pub static AUTH_SESSION_STATE: AvpDef = AvpDef::ietf("Auth-Session-State", 277, T::Enumerated)
    .enums(&[(0, "STATE_MAINTAINED"), (1, "NO_STATE_MAINTAINED")]);
pub static ORIGIN_STATE_ID: AvpDef = AvpDef::ietf("Origin-State-Id", 278, T::Unsigned32);
pub static FAILED_AVP: AvpDef = AvpDef::ietf("Failed-AVP", 279, T::Grouped);
pub static PROXY_HOST: AvpDef = AvpDef::ietf("Proxy-Host", 280, T::DiameterIdentity);
pub static ERROR_MESSAGE: AvpDef =
    AvpDef::ietf("Error-Message", 281, T::UTF8String).m(FlagRule::MustNot);
pub static ROUTE_RECORD: AvpDef = AvpDef::ietf("Route-Record", 282, T::DiameterIdentity);
pub static DESTINATION_REALM: AvpDef = AvpDef::ietf("Destination-Realm", 283, T::DiameterIdentity);
pub static PROXY_INFO: AvpDef = AvpDef::ietf("Proxy-Info", 284, T::Grouped)
    .group(&[Rule::one(&PROXY_HOST), Rule::one(&PROXY_STATE)]);
pub static RE_AUTH_REQUEST_TYPE: AvpDef = AvpDef::ietf("Re-Auth-Request-Type", 285, T::Enumerated)
    .enums(&[(0, "AUTHORIZE_ONLY"), (1, "AUTHORIZE_AUTHENTICATE")]);
pub static ACCOUNTING_SUB_SESSION_ID: AvpDef =
    AvpDef::ietf("Accounting-Sub-Session-Id", 287, T::Unsigned64);
pub static AUTHORIZATION_LIFETIME: AvpDef =
    AvpDef::ietf("Authorization-Lifetime", 291, T::Unsigned32);
pub static REDIRECT_HOST: AvpDef = AvpDef::ietf("Redirect-Host", 292, T::DiameterURI);
pub static DESTINATION_HOST: AvpDef = AvpDef::ietf("Destination-Host", 293, T::DiameterIdentity);
pub static ERROR_REPORTING_HOST: AvpDef =
    AvpDef::ietf("Error-Reporting-Host", 294, T::DiameterIdentity).m(FlagRule::MustNot);
pub static TERMINATION_CAUSE: AvpDef =
    AvpDef::ietf("Termination-Cause", 295, T::Enumerated).enums(&[
        (1, "DIAMETER_LOGOUT"),
        (2, "DIAMETER_SERVICE_NOT_PROVIDED"),
        (3, "DIAMETER_BAD_ANSWER"),
        (4, "DIAMETER_ADMINISTRATIVE"),
        (5, "DIAMETER_LINK_BROKEN"),
        (6, "DIAMETER_AUTH_EXPIRED"),
        (7, "DIAMETER_USER_MOVED"),
        (8, "DIAMETER_SESSION_TIMEOUT"),
    ]);
pub static ORIGIN_REALM: AvpDef = AvpDef::ietf("Origin-Realm", 296, T::DiameterIdentity);
pub static EXPERIMENTAL_RESULT: AvpDef = AvpDef::ietf("Experimental-Result", 297, T::Grouped)
    .group(&[Rule::one(&VENDOR_ID), Rule::one(&EXPERIMENTAL_RESULT_CODE)]);
pub static EXPERIMENTAL_RESULT_CODE: AvpDef =
    AvpDef::ietf("Experimental-Result-Code", 298, T::Unsigned32);
pub static INBAND_SECURITY_ID: AvpDef = AvpDef::ietf("Inband-Security-Id", 299, T::Unsigned32);
pub static ACCOUNTING_RECORD_TYPE: AvpDef =
    AvpDef::ietf("Accounting-Record-Type", 480, T::Enumerated).enums(&[
        (1, "EVENT_RECORD"),
        (2, "START_RECORD"),
        (3, "INTERIM_RECORD"),
        (4, "STOP_RECORD"),
    ]);
pub static ACCOUNTING_REALTIME_REQUIRED: AvpDef =
    AvpDef::ietf("Accounting-Realtime-Required", 483, T::Enumerated).enums(&[
        (1, "DELIVER_AND_GRANT"),
        (2, "GRANT_AND_STORE"),
        (3, "GRANT_AND_LOSE"),
    ]);
pub static ACCOUNTING_RECORD_NUMBER: AvpDef =
    AvpDef::ietf("Accounting-Record-Number", 485, T::Unsigned32);

pub static AVPS: &[&AvpDef] = &[
    &USER_NAME,
    &CLASS,
    &SESSION_TIMEOUT,
    &PROXY_STATE,
    &ACCT_SESSION_ID,
    &ACCT_MULTI_SESSION_ID,
    &EVENT_TIMESTAMP,
    &ACCT_INTERIM_INTERVAL,
    &HOST_IP_ADDRESS,
    &AUTH_APPLICATION_ID,
    &ACCT_APPLICATION_ID,
    &VENDOR_SPECIFIC_APPLICATION_ID,
    &REDIRECT_HOST_USAGE,
    &REDIRECT_MAX_CACHE_TIME,
    &SESSION_ID,
    &ORIGIN_HOST,
    &SUPPORTED_VENDOR_ID,
    &VENDOR_ID,
    &FIRMWARE_REVISION,
    &RESULT_CODE,
    &PRODUCT_NAME,
    &SESSION_BINDING,
    &SESSION_SERVER_FAILOVER,
    &MULTI_ROUND_TIME_OUT,
    &DISCONNECT_CAUSE,
    &AUTH_REQUEST_TYPE,
    &AUTH_GRACE_PERIOD,
    &AUTH_SESSION_STATE,
    &ORIGIN_STATE_ID,
    &FAILED_AVP,
    &PROXY_HOST,
    &ERROR_MESSAGE,
    &ROUTE_RECORD,
    &DESTINATION_REALM,
    &PROXY_INFO,
    &RE_AUTH_REQUEST_TYPE,
    &ACCOUNTING_SUB_SESSION_ID,
    &AUTHORIZATION_LIFETIME,
    &REDIRECT_HOST,
    &DESTINATION_HOST,
    &ERROR_REPORTING_HOST,
    &TERMINATION_CAUSE,
    &ORIGIN_REALM,
    &EXPERIMENTAL_RESULT,
    &EXPERIMENTAL_RESULT_CODE,
    &INBAND_SECURITY_ID,
    &ACCOUNTING_RECORD_TYPE,
    &ACCOUNTING_REALTIME_REQUIRED,
    &ACCOUNTING_RECORD_NUMBER,
];

pub static CER: CommandDef = CommandDef {
    name: "Capabilities-Exchange",
    abbrev: ("CER", "CEA"),
    code: CMD_CAPABILITIES_EXCHANGE,
    application_id: APP_ID,
    proxiable: false,
    request: &[
        Rule::one(&ORIGIN_HOST),
        Rule::one(&ORIGIN_REALM),
        Rule::some(&HOST_IP_ADDRESS),
        Rule::one(&VENDOR_ID),
        Rule::one(&PRODUCT_NAME),
        Rule::opt(&ORIGIN_STATE_ID),
        Rule::any(&SUPPORTED_VENDOR_ID),
        Rule::any(&AUTH_APPLICATION_ID),
        Rule::any(&INBAND_SECURITY_ID),
        Rule::any(&ACCT_APPLICATION_ID),
        Rule::any(&VENDOR_SPECIFIC_APPLICATION_ID),
        Rule::opt(&FIRMWARE_REVISION),
    ],
    answer: &[
        Rule::one(&RESULT_CODE),
        Rule::one(&ORIGIN_HOST),
        Rule::one(&ORIGIN_REALM),
        Rule::any(&HOST_IP_ADDRESS),
        Rule::opt(&VENDOR_ID),
        Rule::opt(&PRODUCT_NAME),
        Rule::opt(&ORIGIN_STATE_ID),
        Rule::opt(&ERROR_MESSAGE),
        Rule::opt(&FAILED_AVP),
        Rule::any(&SUPPORTED_VENDOR_ID),
        Rule::any(&AUTH_APPLICATION_ID),
        Rule::any(&INBAND_SECURITY_ID),
        Rule::any(&ACCT_APPLICATION_ID),
        Rule::any(&VENDOR_SPECIFIC_APPLICATION_ID),
        Rule::opt(&FIRMWARE_REVISION),
    ],
};

pub static DWR: CommandDef = CommandDef {
    name: "Device-Watchdog",
    abbrev: ("DWR", "DWA"),
    code: CMD_DEVICE_WATCHDOG,
    application_id: APP_ID,
    proxiable: false,
    request: &[Rule::one(&ORIGIN_HOST), Rule::one(&ORIGIN_REALM), Rule::opt(&ORIGIN_STATE_ID)],
    answer: &[
        Rule::one(&RESULT_CODE),
        Rule::one(&ORIGIN_HOST),
        Rule::one(&ORIGIN_REALM),
        Rule::opt(&ERROR_MESSAGE),
        Rule::opt(&FAILED_AVP),
        Rule::opt(&ORIGIN_STATE_ID),
    ],
};

pub static DPR: CommandDef = CommandDef {
    name: "Disconnect-Peer",
    abbrev: ("DPR", "DPA"),
    code: CMD_DISCONNECT_PEER,
    application_id: APP_ID,
    proxiable: false,
    request: &[Rule::one(&ORIGIN_HOST), Rule::one(&ORIGIN_REALM), Rule::one(&DISCONNECT_CAUSE)],
    answer: &[
        Rule::one(&RESULT_CODE),
        Rule::one(&ORIGIN_HOST),
        Rule::one(&ORIGIN_REALM),
        Rule::opt(&ERROR_MESSAGE),
        Rule::opt(&FAILED_AVP),
    ],
};

pub static COMMON: ApplicationDef = ApplicationDef {
    name: "Diameter Common Messages",
    id: APP_ID,
    vendor_id: 0,
    commands: &[&CER, &DWR, &DPR],
};
