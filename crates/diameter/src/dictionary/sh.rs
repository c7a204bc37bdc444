//! Sh (3GPP TS 29.329, AVPs of TS 29.229 it reuses): user data between AS and HSS/UDR.
//! Also home of Supported-Features (TS 29.229 §6.3.29), which Gx, Rx and Sy reuse.

use super::base::{
    AUTH_SESSION_STATE, DESTINATION_HOST, DESTINATION_REALM, ERROR_MESSAGE, ERROR_REPORTING_HOST,
    EXPERIMENTAL_RESULT, FAILED_AVP, ORIGIN_HOST, ORIGIN_REALM, PROXY_INFO, RESULT_CODE,
    ROUTE_RECORD, SESSION_ID, USER_NAME, VENDOR_ID, VENDOR_SPECIFIC_APPLICATION_ID,
};
use super::{ApplicationDef, AvpDef, CommandDef, FlagRule, Rule, VENDOR_3GPP};
use crate::types::DataType as T;

pub const APP_ID: u32 = 16777217;
pub const CMD_USER_DATA: u32 = 306;
pub const CMD_PROFILE_UPDATE: u32 = 307;
pub const CMD_SUBSCRIBE_NOTIFICATIONS: u32 = 308;
pub const CMD_PUSH_NOTIFICATION: u32 = 309;

/// Experimental-Result-Code values of TS 29.329 §6.2 and TS 29.229 §6.2 (vendor 10415).
pub mod experimental_result {
    pub const DIAMETER_USER_DATA_NOT_AVAILABLE: u32 = 4100;
    pub const DIAMETER_PRIOR_UPDATE_IN_PROGRESS: u32 = 4101;
    pub const DIAMETER_ERROR_USER_UNKNOWN: u32 = 5001;
    pub const DIAMETER_ERROR_IDENTITIES_DONT_MATCH: u32 = 5002;
    pub const DIAMETER_ERROR_USER_DATA_NOT_RECOGNIZED: u32 = 5100;
    pub const DIAMETER_ERROR_OPERATION_NOT_ALLOWED: u32 = 5101;
    pub const DIAMETER_ERROR_USER_DATA_CANNOT_BE_READ: u32 = 5102;
    pub const DIAMETER_ERROR_USER_DATA_CANNOT_BE_MODIFIED: u32 = 5103;
    pub const DIAMETER_ERROR_USER_DATA_CANNOT_BE_NOTIFIED: u32 = 5104;
    pub const DIAMETER_ERROR_TRANSPARENT_DATA_OUT_OF_SYNC: u32 = 5105;
    pub const DIAMETER_ERROR_SUBS_DATA_ABSENT: u32 = 5106;
    pub const DIAMETER_ERROR_NO_SUBSCRIPTION_TO_DATA: u32 = 5107;
    pub const DIAMETER_ERROR_DSAI_NOT_AVAILABLE: u32 = 5108;
}

/// Data-Reference values.
pub mod data_reference {
    pub const REPOSITORY_DATA: u32 = 0;
    pub const IMS_PUBLIC_IDENTITY: u32 = 10;
    pub const IMS_USER_STATE: u32 = 11;
    pub const S_CSCF_NAME: u32 = 12;
    pub const INITIAL_FILTER_CRITERIA: u32 = 13;
    pub const LOCATION_INFORMATION: u32 = 14;
    pub const USER_STATE: u32 = 15;
    pub const CHARGING_INFORMATION: u32 = 16;
    pub const MSISDN: u32 = 17;
    pub const PSI_ACTIVATION: u32 = 18;
    pub const DSAI: u32 = 19;
    pub const IMSI: u32 = 32;
}

pub static PUBLIC_IDENTITY: AvpDef = AvpDef::tgpp("Public-Identity", 601, T::UTF8String);
pub static SERVER_NAME: AvpDef = AvpDef::tgpp("Server-Name", 602, T::UTF8String);
pub static SUPPORTED_FEATURES: AvpDef = AvpDef::tgpp("Supported-Features", 628, T::Grouped)
    .m(FlagRule::MustNot)
    .group(&[Rule::one(&VENDOR_ID), Rule::one(&FEATURE_LIST_ID), Rule::one(&FEATURE_LIST)]);
pub static FEATURE_LIST_ID: AvpDef =
    AvpDef::tgpp("Feature-List-ID", 629, T::Unsigned32).m(FlagRule::MustNot);
pub static FEATURE_LIST: AvpDef =
    AvpDef::tgpp("Feature-List", 630, T::Unsigned32).m(FlagRule::MustNot);
pub static SUPPORTED_APPLICATIONS: AvpDef =
    AvpDef::tgpp("Supported-Applications", 631, T::Grouped).m(FlagRule::MustNot);
/// Not in Wireshark's dictionary; code and type from TS 29.229 §6.3.35.
pub static WILDCARDED_PUBLIC_IDENTITY: AvpDef =
    AvpDef::tgpp("Wildcarded-Public-Identity", 634, T::UTF8String).m(FlagRule::MustNot);
pub static WILDCARDED_IMPU: AvpDef =
    AvpDef::tgpp("Wildcarded-IMPU", 636, T::UTF8String).m(FlagRule::MustNot);
pub static SESSION_PRIORITY: AvpDef =
    AvpDef::tgpp("Session-Priority", 650, T::Enumerated).m(FlagRule::MustNot).enums(&[
        (0, "PRIORITY-0"),
        (1, "PRIORITY-1"),
        (2, "PRIORITY-2"),
        (3, "PRIORITY-3"),
        (4, "PRIORITY-4"),
    ]);

pub static USER_IDENTITY: AvpDef = AvpDef::tgpp("User-Identity", 700, T::Grouped);
pub static MSISDN: AvpDef = AvpDef::tgpp("MSISDN", 701, T::OctetString);
/// Sh's User-Data (Wireshark calls it Sh-User-Data): the XML document of TS 29.328.
pub static USER_DATA: AvpDef = AvpDef::tgpp("User-Data", 702, T::OctetString);
pub static DATA_REFERENCE: AvpDef = AvpDef::tgpp("Data-Reference", 703, T::Enumerated).enums(&[
    (0, "RepositoryData"),
    (10, "IMSPublicIdentity"),
    (11, "IMSUserState"),
    (12, "S-CSCFName"),
    (13, "InitialFilterCriteria"),
    (14, "LocationInformation"),
    (15, "UserState"),
    (16, "ChargingInformation"),
    (17, "MSISDN"),
    (18, "PSIActivation"),
    (19, "DSAI"),
    (21, "ServiceLevelTraceInfo"),
    (22, "IPAddressSecureBindingInformation"),
    (23, "ServicePriorityLevel"),
    (24, "SMSRegistrationInfo"),
    (25, "UEReachabilityForIP"),
    (26, "TADSinformation"),
    (27, "STN-SR"),
    (28, "UE-SRVCC-Capability"),
    (29, "ExtendedPriority"),
    (30, "CSRN"),
    (31, "ReferenceLocationInformation"),
    (32, "IMSI"),
    (33, "IMSPrivateUserIdentity"),
    (34, "IMEISV"),
    (35, "UE-5G-SRVCC-Capability"),
]);
pub static SERVICE_INDICATION: AvpDef = AvpDef::tgpp("Service-Indication", 704, T::OctetString);
pub static SUBS_REQ_TYPE: AvpDef = AvpDef::tgpp("Subs-Req-Type", 705, T::Enumerated)
    .enums(&[(0, "Subscribe"), (1, "Unsubscribe")]);
pub static REQUESTED_DOMAIN: AvpDef = AvpDef::tgpp("Requested-Domain", 706, T::Enumerated)
    .enums(&[(0, "CS-Domain"), (1, "PS-Domain")]);
pub static CURRENT_LOCATION: AvpDef =
    AvpDef::tgpp("Current-Location", 707, T::Enumerated).enums(&[
        (0, "DoNotNeedInitiateActiveLocationRetrieval"),
        (1, "InitiateActiveLocationRetrieval"),
    ]);
pub static IDENTITY_SET: AvpDef = AvpDef::tgpp("Identity-Set", 708, T::Enumerated).enums(&[
    (0, "ALL_IDENTITIES"),
    (1, "REGISTERED_IDENTITIES"),
    (2, "IMPLICIT_IDENTITIES"),
    (3, "ALIAS_IDENTITIES"),
]);
pub static EXPIRY_TIME: AvpDef = AvpDef::tgpp("Expiry-Time", 709, T::Time);
pub static SEND_DATA_INDICATION: AvpDef = AvpDef::tgpp("Send-Data-Indication", 710, T::Enumerated)
    .enums(&[(0, "USER_DATA_NOT_REQUESTED"), (1, "USER_DATA_REQUESTED")]);
pub static DSAI_TAG: AvpDef = AvpDef::tgpp("DSAI-Tag", 711, T::OctetString);
pub static ONE_TIME_NOTIFICATION: AvpDef =
    AvpDef::tgpp("One-Time-Notification", 712, T::Enumerated)
        .enums(&[(0, "ONE_TIME_NOTIFICATION_REQUESTED")]);
pub static REQUESTED_NODES: AvpDef = AvpDef::tgpp("Requested-Nodes", 713, T::Unsigned32);
pub static SERVING_NODE_INDICATION: AvpDef =
    AvpDef::tgpp("Serving-Node-Indication", 714, T::Enumerated)
        .enums(&[(0, "ONLY_SERVING_NODES_REQUIRED")]);
pub static REPOSITORY_DATA_ID: AvpDef = AvpDef::tgpp("Repository-Data-ID", 715, T::Grouped)
    .group(&[Rule::one(&SERVICE_INDICATION), Rule::one(&SEQUENCE_NUMBER)]);
pub static SEQUENCE_NUMBER: AvpDef = AvpDef::tgpp("Sequence-Number", 716, T::Unsigned32);
pub static UDR_FLAGS: AvpDef = AvpDef::tgpp("UDR-Flags", 719, T::Unsigned32);

pub static AVPS: &[&AvpDef] = &[
    &PUBLIC_IDENTITY,
    &SERVER_NAME,
    &SUPPORTED_FEATURES,
    &FEATURE_LIST_ID,
    &FEATURE_LIST,
    &SUPPORTED_APPLICATIONS,
    &WILDCARDED_PUBLIC_IDENTITY,
    &WILDCARDED_IMPU,
    &SESSION_PRIORITY,
    &USER_IDENTITY,
    &MSISDN,
    &USER_DATA,
    &DATA_REFERENCE,
    &SERVICE_INDICATION,
    &SUBS_REQ_TYPE,
    &REQUESTED_DOMAIN,
    &CURRENT_LOCATION,
    &IDENTITY_SET,
    &EXPIRY_TIME,
    &SEND_DATA_INDICATION,
    &DSAI_TAG,
    &ONE_TIME_NOTIFICATION,
    &REQUESTED_NODES,
    &SERVING_NODE_INDICATION,
    &REPOSITORY_DATA_ID,
    &SEQUENCE_NUMBER,
    &UDR_FLAGS,
];

/// Every Sh message starts with these (TS 29.329 §6.1).
macro_rules! sh_head {
    ($($rest:expr),* $(,)?) => {
        &[
            Rule::one(&SESSION_ID),
            Rule::one(&VENDOR_SPECIFIC_APPLICATION_ID),
            Rule::one(&AUTH_SESSION_STATE),
            Rule::one(&ORIGIN_HOST),
            Rule::one(&ORIGIN_REALM),
            Rule::any(&SUPPORTED_FEATURES),
            Rule::any(&PROXY_INFO),
            Rule::any(&ROUTE_RECORD),
            $($rest),*
        ]
    };
}

macro_rules! sh_answer {
    ($($rest:expr),* $(,)?) => {
        sh_head![
            Rule::opt(&RESULT_CODE),
            Rule::opt(&EXPERIMENTAL_RESULT),
            Rule::opt(&ERROR_MESSAGE),
            Rule::opt(&ERROR_REPORTING_HOST),
            Rule::any(&FAILED_AVP),
            $($rest),*
        ]
    };
}

pub static UDR: CommandDef = CommandDef {
    name: "User-Data",
    abbrev: ("UDR", "UDA"),
    code: CMD_USER_DATA,
    application_id: APP_ID,
    proxiable: true,
    request: sh_head![
        Rule::opt(&DESTINATION_HOST),
        Rule::one(&DESTINATION_REALM),
        Rule::one(&USER_IDENTITY),
        Rule::opt(&WILDCARDED_PUBLIC_IDENTITY),
        Rule::opt(&WILDCARDED_IMPU),
        Rule::opt(&SERVER_NAME),
        Rule::any(&SERVICE_INDICATION),
        Rule::some(&DATA_REFERENCE),
        Rule::any(&IDENTITY_SET),
        Rule::opt(&REQUESTED_DOMAIN),
        Rule::opt(&CURRENT_LOCATION),
        Rule::any(&DSAI_TAG),
        Rule::opt(&SESSION_PRIORITY),
        Rule::opt(&USER_NAME),
        Rule::opt(&REQUESTED_NODES),
        Rule::opt(&SERVING_NODE_INDICATION),
        Rule::opt(&UDR_FLAGS),
    ],
    answer: sh_answer![Rule::opt(&WILDCARDED_PUBLIC_IDENTITY), Rule::opt(&USER_DATA)],
};

pub static PUR: CommandDef = CommandDef {
    name: "Profile-Update",
    abbrev: ("PUR", "PUA"),
    code: CMD_PROFILE_UPDATE,
    application_id: APP_ID,
    proxiable: true,
    request: sh_head![
        Rule::opt(&DESTINATION_HOST),
        Rule::one(&DESTINATION_REALM),
        Rule::one(&USER_IDENTITY),
        Rule::opt(&WILDCARDED_PUBLIC_IDENTITY),
        Rule::opt(&WILDCARDED_IMPU),
        Rule::opt(&USER_NAME),
        Rule::some(&DATA_REFERENCE),
        Rule::one(&USER_DATA),
    ],
    answer: sh_answer![Rule::opt(&WILDCARDED_PUBLIC_IDENTITY), Rule::opt(&REPOSITORY_DATA_ID)],
};

pub static SNR: CommandDef = CommandDef {
    name: "Subscribe-Notifications",
    abbrev: ("SNR", "SNA"),
    code: CMD_SUBSCRIBE_NOTIFICATIONS,
    application_id: APP_ID,
    proxiable: true,
    request: sh_head![
        Rule::opt(&DESTINATION_HOST),
        Rule::one(&DESTINATION_REALM),
        Rule::one(&USER_IDENTITY),
        Rule::opt(&WILDCARDED_PUBLIC_IDENTITY),
        Rule::opt(&WILDCARDED_IMPU),
        Rule::any(&SERVICE_INDICATION),
        Rule::opt(&SEND_DATA_INDICATION),
        Rule::opt(&SERVER_NAME),
        Rule::one(&SUBS_REQ_TYPE),
        Rule::some(&DATA_REFERENCE),
        Rule::any(&IDENTITY_SET),
        Rule::opt(&EXPIRY_TIME),
        Rule::any(&DSAI_TAG),
        Rule::opt(&ONE_TIME_NOTIFICATION),
        Rule::opt(&USER_NAME),
    ],
    answer: sh_answer![
        Rule::opt(&WILDCARDED_PUBLIC_IDENTITY),
        Rule::opt(&USER_DATA),
        Rule::opt(&EXPIRY_TIME),
    ],
};

pub static PNR: CommandDef = CommandDef {
    name: "Push-Notification",
    abbrev: ("PNR", "PNA"),
    code: CMD_PUSH_NOTIFICATION,
    application_id: APP_ID,
    proxiable: true,
    request: sh_head![
        Rule::one(&DESTINATION_HOST),
        Rule::one(&DESTINATION_REALM),
        Rule::one(&USER_IDENTITY),
        Rule::opt(&WILDCARDED_PUBLIC_IDENTITY),
        Rule::opt(&WILDCARDED_IMPU),
        Rule::opt(&USER_NAME),
        Rule::one(&USER_DATA),
    ],
    answer: sh_answer![],
};

pub static SH: ApplicationDef = ApplicationDef {
    name: "3GPP Sh",
    id: APP_ID,
    vendor_id: VENDOR_3GPP,
    commands: &[&UDR, &PUR, &SNR, &PNR],
};
