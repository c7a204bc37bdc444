//! The TS 29.519 policy data types, as the constraints the UDR checks on what it stores: each
//! type is a table of its attributes (type, required or not) and a checker walks a JSON value
//! against it, listing every wrong attribute as an `invalidParams` entry with its JSON pointer.
//!
//! Documents are checked but kept as the consumer sent them (attributes this table does not
//! know are kept and echoed, as TS 29.501 asks of extensible types), so a stored resource is
//! served from its bytes without decoding. Patch types are checked as the set of attributes a
//! patch may touch ([`PatchShape`]); the patched document is then checked as a whole.

use std::fmt::Write as _;

use sbi::ProblemDetails;
use serde_json::Value;

/// What a JSON value must be.
#[derive(Debug, Clone, Copy)]
pub enum Ty {
    Any,
    Str,
    Bool,
    /// An integer within the bounds.
    Int(i64, i64),
    /// A string the function accepts; the `&str` says what is expected.
    Text(fn(&str) -> bool, &'static str),
    Obj(&'static Obj),
    /// A JSON object used as a map (`additionalProperties`), with at least one entry.
    Map(&'static Ty),
    /// An array; `min` items at least.
    Arr(&'static Ty, usize),
    /// The type, or `null`.
    Nullable(&'static Ty),
}

/// An object type: its attributes, and groups of which exactly one must be present (`oneOf`
/// of `required` lists).
#[derive(Debug)]
pub struct Obj {
    pub name: &'static str,
    pub fields: &'static [Field],
    pub one_of: &'static [&'static str],
}

#[derive(Debug)]
pub struct Field {
    pub name: &'static str,
    pub ty: Ty,
    pub required: bool,
}

const fn opt(name: &'static str, ty: Ty) -> Field {
    Field { name, ty, required: false }
}
const fn req(name: &'static str, ty: Ty) -> Field {
    Field { name, ty, required: true }
}

/// Every wrong attribute found, then one ProblemDetails: the one collector every NF uses.
pub use nf::common_data::Errors;

/// Most invalidParams listed in one answer; a body wrong everywhere is not echoed whole.
const MAX_ERRORS: usize = 32;

/// Checks `v` against `ty`, `at` being its JSON pointer (the caller's buffer, extended and
/// restored on the way down, so a valid document costs no allocation however large).
pub fn check(v: &Value, ty: &Ty, at: &mut String, errs: &mut Errors) {
    if errs.len() >= MAX_ERRORS {
        return;
    }
    match (ty, v) {
        (Ty::Any, _) => {}
        (Ty::Nullable(_), Value::Null) => {}
        (Ty::Nullable(inner), _) => check(v, inner, at, errs),
        (Ty::Str, Value::String(_)) | (Ty::Bool, Value::Bool(_)) => {}
        (Ty::Str, _) => errs.bad(at_or_root(at), "must be a string"),
        (Ty::Bool, _) => errs.bad(at_or_root(at), "must be a boolean"),
        (Ty::Int(min, max), Value::Number(n)) => {
            let ok = match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => i >= *min && i <= *max,
                (None, Some(u)) => *max == i64::MAX && u > i64::MAX as u64,
                _ => false,
            };
            if !ok {
                errs.bad(at_or_root(at), format!("must be an integer from {min} to {max}"));
            }
        }
        (Ty::Int(min, max), _) => {
            errs.bad(at_or_root(at), format!("must be an integer from {min} to {max}"))
        }
        (Ty::Text(f, what), Value::String(s)) => {
            if !f(s) {
                errs.bad(at_or_root(at), format!("must be {what}"));
            }
        }
        (Ty::Text(_, what), _) => errs.bad(at_or_root(at), format!("must be {what} (a string)")),
        (Ty::Obj(o), Value::Object(m)) => {
            for f in o.fields {
                let len = at.len();
                at.push('/');
                at.push_str(f.name);
                match m.get(f.name) {
                    Some(x) => check(x, &f.ty, at, errs),
                    None if f.required => errs.missing(at.as_str()),
                    None => {}
                }
                at.truncate(len);
            }
            if !o.one_of.is_empty() && o.one_of.iter().filter(|n| m.contains_key(**n)).count() != 1
            {
                errs.bad(
                    at_or_root(at),
                    format!("{} needs exactly one of {}", o.name, o.one_of.join(", ")),
                );
            }
        }
        (Ty::Obj(o), _) => errs.bad(at_or_root(at), format!("must be a {} object", o.name)),
        (Ty::Map(inner), Value::Object(m)) => {
            if m.is_empty() {
                errs.bad(at_or_root(at), "must have at least one entry");
            }
            for (k, x) in m {
                let len = at.len();
                at.push('/');
                push_token(at, k);
                check(x, inner, at, errs);
                at.truncate(len);
            }
        }
        (Ty::Map(_), _) => errs.bad(at_or_root(at), "must be an object (a map)"),
        (Ty::Arr(inner, min), Value::Array(a)) => {
            if a.len() < *min {
                errs.bad(at_or_root(at), format!("must have at least {min} items"));
            }
            for (i, x) in a.iter().enumerate() {
                let len = at.len();
                let _ = write!(at, "/{i}");
                check(x, inner, at, errs);
                at.truncate(len);
            }
        }
        (Ty::Arr(..), _) => errs.bad(at_or_root(at), "must be an array"),
    }
}

/// Appends a JSON pointer reference token (RFC 6901: `~` and `/` escaped).
fn push_token(at: &mut String, k: &str) {
    if k.contains(['~', '/']) {
        at.push_str(&escape(k));
    } else {
        at.push_str(k);
    }
}

fn at_or_root(at: &str) -> &str {
    if at.is_empty() {
        "/"
    } else {
        at
    }
}

/// A JSON pointer reference token (RFC 6901).
pub fn escape(k: &str) -> String {
    k.replace('~', "~0").replace('/', "~1")
}

/// Checks a whole document of type `ty` (the request body of a PUT, the result of a PATCH).
pub fn validate(v: &Value, ty: &Ty) -> Result<(), ProblemDetails> {
    let mut errs = Errors::default();
    check(v, ty, &mut String::with_capacity(128), &mut errs);
    errs.finish()
}

// --- simple types (TS 29.571 and friends) -------------------------------------------------------

fn bit_rate(s: &str) -> bool {
    let Some((num, unit)) = s.split_once(' ') else { return false };
    let (int, frac) = match num.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (num, None),
    };
    let digits = |d: &str| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit());
    digits(int)
        && frac.is_none_or(digits)
        && matches!(unit, "bps" | "Kbps" | "Mbps" | "Gbps" | "Tbps")
}
fn date_time(s: &str) -> bool {
    chrono::DateTime::parse_from_rfc3339(s).is_ok()
}
fn hex(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_hexdigit())
}
fn dnn(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 100
        && s.split('.').all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_graphic()))
}
fn sd(s: &str) -> bool {
    s.len() == 6 && hex(s)
}
fn non_empty(s: &str) -> bool {
    !s.is_empty()
}
fn mcc(s: &str) -> bool {
    s.len() == 3 && s.bytes().all(|b| b.is_ascii_digit())
}
fn mnc(s: &str) -> bool {
    (2..=3).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit())
}
fn base64(s: &str) -> bool {
    s.len().is_multiple_of(4)
        && s.trim_end_matches('=')
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
        && s.len() - s.trim_end_matches('=').len() <= 2
}
fn uuid(s: &str) -> bool {
    uuid::Uuid::parse_str(s).is_ok()
}
fn uri(s: &str) -> bool {
    !s.is_empty() && !s.chars().any(|c| c.is_whitespace() || c.is_control())
}
fn nid(s: &str) -> bool {
    s.len() == 11 && hex(s)
}

pub const BIT_RATE: Ty = Ty::Text(bit_rate, "a bit rate such as \"10 Mbps\"");
pub const DATE_TIME: Ty = Ty::Text(date_time, "an RFC 3339 date-time");
pub const SUPPORTED_FEATURES: Ty = Ty::Text(hex, "hexadecimal digits (SupportedFeatures)");
pub const DNN: Ty = Ty::Text(dnn, "a DNN (dot-separated labels, at most 100 octets)");
pub const URI: Ty = Ty::Text(uri, "a URI");
const UINT: Ty = Ty::Int(0, i64::MAX);
const STR_LIST: Ty = Ty::Arr(&Ty::Str, 1);
const RESET_IDS: Field = opt("resetIds", STR_LIST);
const SUPP_FEAT: Field = opt("suppFeat", SUPPORTED_FEATURES);

pub const SNSSAI: Ty = Ty::Obj(&Obj {
    name: "Snssai",
    fields: &[req("sst", Ty::Int(0, 255)), opt("sd", Ty::Text(sd, "6 hexadecimal digits"))],
    one_of: &[],
});
pub const PLMN_ID: Ty = Ty::Obj(&Obj {
    name: "PlmnId",
    fields: &[req("mcc", Ty::Text(mcc, "3 digits")), req("mnc", Ty::Text(mnc, "2 or 3 digits"))],
    one_of: &[],
});
const PLMN_ID_OBJ_FIELDS: &[Field] =
    &[req("plmnId", PLMN_ID), opt("nid", Ty::Text(nid, "11 hexadecimal digits"))];
/// PresenceInfo (TS 29.571): the attributes with constraints of their own.
const PRESENCE_INFO: Ty = Ty::Obj(&Obj {
    name: "PresenceInfo",
    fields: &[
        opt("praId", Ty::Str),
        opt("additionalPraId", Ty::Str),
        opt("presenceState", Ty::Str),
        opt(
            "trackingAreaList",
            Ty::Arr(&Ty::Obj(&Obj { name: "Tai", fields: TAI_FIELDS, one_of: &[] }), 1),
        ),
        opt(
            "ecgiList",
            Ty::Arr(&Ty::Obj(&Obj { name: "Ecgi", fields: ECGI_FIELDS, one_of: &[] }), 1),
        ),
        opt(
            "ncgiList",
            Ty::Arr(&Ty::Obj(&Obj { name: "Ncgi", fields: NCGI_FIELDS, one_of: &[] }), 1),
        ),
        opt(
            "globalRanNodeIdList",
            Ty::Arr(
                &Ty::Obj(&Obj { name: "GlobalRanNodeId", fields: PLMN_ID_OBJ_FIELDS, one_of: &[] }),
                1,
            ),
        ),
        opt(
            "globaleNbIdList",
            Ty::Arr(
                &Ty::Obj(&Obj { name: "GlobalRanNodeId", fields: PLMN_ID_OBJ_FIELDS, one_of: &[] }),
                1,
            ),
        ),
    ],
    one_of: &[],
});
const TAI_FIELDS: &[Field] = &[req("plmnId", PLMN_ID), req("tac", Ty::Str)];
const ECGI_FIELDS: &[Field] = &[req("plmnId", PLMN_ID), req("eutraCellId", Ty::Str)];
const NCGI_FIELDS: &[Field] = &[req("plmnId", PLMN_ID), req("nrCellId", Ty::Str)];
const PRA_INFOS: Field = opt("praInfos", Ty::Map(&PRESENCE_INFO));
const SUBSC_CATS: Field = opt("subscCats", STR_LIST);

/// UsageThreshold (TS 29.122).
const USAGE_THRESHOLD: Ty = Ty::Obj(&Obj {
    name: "UsageThreshold",
    fields: &[
        opt("duration", UINT),
        opt("totalVolume", UINT),
        opt("downlinkVolume", UINT),
        opt("uplinkVolume", UINT),
    ],
    one_of: &[],
});
const USAGE_MON_DATA_SCOPE: Ty = Ty::Obj(&Obj {
    name: "UsageMonDataScope",
    fields: &[req("snssai", SNSSAI), opt("dnn", Ty::Arr(&DNN, 1))],
    one_of: &[],
});

// --- TS 29.519 policy data types ------------------------------------------------------------------

pub const AM_POLICY_DATA: Ty =
    Ty::Obj(&Obj { name: "AmPolicyData", fields: &[PRA_INFOS, SUBSC_CATS], one_of: &[] });

const UE_POLICY_SECTION: Ty = Ty::Obj(&Obj {
    name: "UePolicySection",
    fields: &[req("uePolicySectionInfo", Ty::Text(base64, "base64 (Bytes)")), req("upsi", Ty::Str)],
    one_of: &[],
});
const DNN_ROUTE_SELECTION_DESCRIPTOR: Ty = Ty::Obj(&Obj {
    name: "DnnRouteSelectionDescriptor",
    fields: &[
        req("dnn", DNN),
        opt("sscModes", STR_LIST),
        opt("pduSessTypes", STR_LIST),
        opt("atsssInfo", Ty::Bool),
    ],
    one_of: &[],
});
const SNSSAI_ROUTE_SELECTION_DESCRIPTOR: Ty = Ty::Obj(&Obj {
    name: "SnssaiRouteSelectionDescriptor",
    fields: &[
        req("snssai", SNSSAI),
        opt("dnnRouteSelDescs", Ty::Arr(&DNN_ROUTE_SELECTION_DESCRIPTOR, 1)),
    ],
    one_of: &[],
});
const PLMN_ROUTE_SELECTION_DESCRIPTOR: Ty = Ty::Obj(&Obj {
    name: "PlmnRouteSelectionDescriptor",
    fields: &[
        req("servingPlmn", PLMN_ID),
        opt("snssaiRouteSelDescs", Ty::Arr(&SNSSAI_ROUTE_SELECTION_DESCRIPTOR, 1)),
    ],
    one_of: &[],
});

pub const UE_POLICY_SET: Ty = Ty::Obj(&Obj {
    name: "UePolicySet",
    fields: &[
        PRA_INFOS,
        SUBSC_CATS,
        opt("uePolicySections", Ty::Map(&UE_POLICY_SECTION)),
        opt("upsis", STR_LIST),
        opt("allowedRouteSelDescs", Ty::Map(&PLMN_ROUTE_SELECTION_DESCRIPTOR)),
        opt("andspInd", Ty::Bool),
        opt("pei", Ty::Text(non_empty, "a PEI")),
        opt("osIds", Ty::Arr(&Ty::Text(uuid, "a UUID (OsId)"), 1)),
        SUPP_FEAT,
        RESET_IDS,
    ],
    one_of: &[],
});

const LIMIT_ID_TO_MONITORING_KEY: Ty = Ty::Nullable(&Ty::Obj(&Obj {
    name: "LimitIdToMonitoringKey",
    fields: &[req("limitId", Ty::Str), opt("monkey", STR_LIST)],
    one_of: &[],
}));
const CHARGING_INFORMATION: Ty = Ty::Obj(&Obj {
    name: "ChargingInformation",
    fields: &[
        req("primaryChfAddress", URI),
        opt("secondaryChfAddress", URI),
        opt("primaryChfSetId", Ty::Str),
        opt("primaryChfInstanceId", Ty::Str),
        opt("secondaryChfSetId", Ty::Str),
        opt("secondaryChfInstanceId", Ty::Str),
    ],
    one_of: &[],
});
const SM_POLICY_DNN_DATA: Ty = Ty::Obj(&Obj {
    name: "SmPolicyDnnData",
    fields: &[
        req("dnn", DNN),
        opt("allowedServices", STR_LIST),
        SUBSC_CATS,
        opt("gbrUl", BIT_RATE),
        opt("gbrDl", BIT_RATE),
        opt("adcSupport", Ty::Bool),
        opt("subscSpendingLimits", Ty::Bool),
        opt("ipv4Index", Ty::Int(i32::MIN as i64, i32::MAX as i64)),
        opt("ipv6Index", Ty::Int(i32::MIN as i64, i32::MAX as i64)),
        opt("offline", Ty::Bool),
        opt("online", Ty::Bool),
        opt("chfInfo", CHARGING_INFORMATION),
        opt("refUmDataLimitIds", Ty::Map(&LIMIT_ID_TO_MONITORING_KEY)),
        opt("mpsPriority", Ty::Bool),
        opt("mcsPriority", Ty::Bool),
        opt("imsSignallingPrio", Ty::Bool),
        opt("mpsPriorityLevel", Ty::Int(i32::MIN as i64, i32::MAX as i64)),
        opt("mcsPriorityLevel", Ty::Int(i32::MIN as i64, i32::MAX as i64)),
        PRA_INFOS,
        opt("bdtRefIds", Ty::Nullable(&Ty::Map(&Ty::Nullable(&Ty::Str)))),
        opt("locRoutNotAllowed", Ty::Bool),
    ],
    one_of: &[],
});
const SLICE_MBR: Ty = Ty::Obj(&Obj {
    name: "SliceMbr",
    fields: &[req("uplink", BIT_RATE), req("downlink", BIT_RATE)],
    one_of: &[],
});
const SM_POLICY_SNSSAI_DATA: Ty = Ty::Obj(&Obj {
    name: "SmPolicySnssaiData",
    fields: &[
        req("snssai", SNSSAI),
        opt("smPolicyDnnData", Ty::Map(&SM_POLICY_DNN_DATA)),
        opt("ueSliceMbr", SLICE_MBR),
    ],
    one_of: &[],
});
const TIME_PERIOD: Ty = Ty::Obj(&Obj {
    name: "TimePeriod",
    fields: &[req("period", Ty::Str), opt("maxNumPeriod", UINT)],
    one_of: &[],
});
const USAGE_MON_DATA_LIMIT: Ty = Ty::Obj(&Obj {
    name: "UsageMonDataLimit",
    fields: &[
        req("limitId", Ty::Str),
        opt("scopes", Ty::Map(&USAGE_MON_DATA_SCOPE)),
        opt("umLevel", Ty::Str),
        opt("startDate", DATE_TIME),
        opt("endDate", DATE_TIME),
        opt("usageLimit", USAGE_THRESHOLD),
        opt("resetPeriod", TIME_PERIOD),
    ],
    one_of: &[],
});
pub const USAGE_MON_DATA: Ty = Ty::Obj(&Obj {
    name: "UsageMonData",
    fields: &[
        req("limitId", Ty::Str),
        opt("scopes", Ty::Map(&USAGE_MON_DATA_SCOPE)),
        opt("umLevel", Ty::Str),
        opt("allowedUsage", USAGE_THRESHOLD),
        opt("resetTime", DATE_TIME),
        SUPP_FEAT,
        RESET_IDS,
    ],
    one_of: &[],
});
pub const SM_POLICY_DATA: Ty = Ty::Obj(&Obj {
    name: "SmPolicyData",
    fields: &[
        req("smPolicySnssaiData", Ty::Map(&SM_POLICY_SNSSAI_DATA)),
        opt("umDataLimits", Ty::Map(&USAGE_MON_DATA_LIMIT)),
        opt("umData", Ty::Map(&USAGE_MON_DATA)),
        SUPP_FEAT,
        RESET_IDS,
    ],
    one_of: &[],
});

pub const SPONSOR_CONNECTIVITY_DATA: Ty = Ty::Obj(&Obj {
    name: "SponsorConnectivityData",
    fields: &[req("aspIds", Ty::Arr(&Ty::Str, 0))],
    one_of: &[],
});

const TRANSFER_POLICY: Ty = Ty::Obj(&Obj {
    name: "TransferPolicy",
    fields: &[
        opt("maxBitRateDl", BIT_RATE),
        opt("maxBitRateUl", BIT_RATE),
        req("ratingGroup", Ty::Int(i64::MIN, i64::MAX)),
        req(
            "recTimeInt",
            Ty::Obj(&Obj {
                name: "TimeWindow",
                fields: &[req("startTime", DATE_TIME), req("stopTime", DATE_TIME)],
                one_of: &[],
            }),
        ),
        req("transPolicyId", Ty::Int(i64::MIN, i64::MAX)),
    ],
    one_of: &[],
});
pub const BDT_DATA: Ty = Ty::Obj(&Obj {
    name: "BdtData",
    fields: &[
        req("aspId", Ty::Str),
        req("transPolicy", TRANSFER_POLICY),
        opt("bdtRefId", Ty::Str),
        opt("nwAreaInfo", Ty::Obj(&Obj { name: "NetworkAreaInfo", fields: &[], one_of: &[] })),
        opt("numOfUes", UINT),
        opt("volPerUe", USAGE_THRESHOLD),
        opt("dnn", DNN),
        opt("snssai", SNSSAI),
        opt("trafficDes", Ty::Obj(&Obj { name: "TrafficDescriptor", fields: &[], one_of: &[] })),
        opt("bdtpStatus", Ty::Str),
        SUPP_FEAT,
        RESET_IDS,
    ],
    one_of: &[],
});

pub const SLICE_POLICY_DATA: Ty = Ty::Obj(&Obj {
    name: "SlicePolicyData",
    fields: &[
        opt("mbrUl", BIT_RATE),
        opt("mbrDl", BIT_RATE),
        opt("remainMbrUl", BIT_RATE),
        opt("remainMbrDl", BIT_RATE),
        SUPP_FEAT,
        RESET_IDS,
    ],
    one_of: &[],
});

pub const MBS_SESS_POL_CTRL_DATA: Ty = Ty::Obj(&Obj {
    name: "MbsSessPolCtrlData",
    fields: &[
        opt("5qis", Ty::Arr(&Ty::Int(0, 255), 1)),
        opt("maxMbsArpLevel", Ty::Int(1, 15)),
        opt("maxMbsSessionAmbr", BIT_RATE),
        opt("maxGbr", BIT_RATE),
        SUPP_FEAT,
    ],
    one_of: &[],
});

/// OperatorSpecificDataContainer (TS 29.505): a map of them is the operator-specific-data
/// resource.
const OPERATOR_SPECIFIC_DATA_CONTAINER: Ty = Ty::Obj(&Obj {
    name: "OperatorSpecificDataContainer",
    fields: &[
        req(
            "dataType",
            Ty::Text(is_data_type, "one of string, integer, number, boolean, object, array"),
        ),
        opt("dataTypeDefinition", Ty::Str),
        req("value", Ty::Any),
        opt("supportedFeatures", SUPPORTED_FEATURES),
        RESET_IDS,
    ],
    one_of: &[],
});
pub const OPERATOR_SPECIFIC_DATA: Ty = Ty::Map(&OPERATOR_SPECIFIC_DATA_CONTAINER);

/// `OperatorSpecificDataContainer.dataType`: the enum of TS 29.505 (the JSON type of `value`).
fn is_data_type(s: &str) -> bool {
    matches!(s, "string" | "integer" | "number" | "boolean" | "object" | "array")
}

const RESOURCE_ITEM: Ty = Ty::Obj(&Obj {
    name: "ResourceItem",
    fields: &[req("monResourceUri", URI), req("items", Ty::Arr(&Ty::Str, 1))],
    one_of: &[],
});
pub const POLICY_DATA_SUBSCRIPTION: Ty = Ty::Obj(&Obj {
    name: "PolicyDataSubscription",
    fields: &[
        req("notificationUri", URI),
        opt("notifId", Ty::Str),
        req("monitoredResourceUris", Ty::Arr(&URI, 0)),
        opt("monResItems", Ty::Arr(&RESOURCE_ITEM, 1)),
        opt("excludedResItems", Ty::Arr(&RESOURCE_ITEM, 1)),
        opt("expiry", DATE_TIME),
        opt("supportedFeatures", SUPPORTED_FEATURES),
        RESET_IDS,
    ],
    one_of: &[],
});

// --- patch types: which attributes a merge patch may touch ----------------------------------------

/// The attributes a patch type carries: any value below a `Leaf` may change; an `Obj` lists the
/// attribute names allowed at its level; a `Map` allows any key, each entry of the inner shape.
#[derive(Debug, Clone, Copy)]
pub enum PatchShape {
    Leaf,
    Obj(&'static [(&'static str, PatchShape)]),
    Map(&'static PatchShape),
}

/// UePolicySetPatch.
pub const UE_POLICY_SET_PATCH: PatchShape = PatchShape::Obj(&[
    ("uePolicySections", PatchShape::Leaf),
    ("upsis", PatchShape::Leaf),
    ("andspInd", PatchShape::Leaf),
    ("pei", PatchShape::Leaf),
    ("osIds", PatchShape::Leaf),
]);
/// SmPolicyDataPatch: usage monitoring data, and per S-NSSAI and DNN the BDT references.
pub const SM_POLICY_DATA_PATCH: PatchShape = PatchShape::Obj(&[
    ("umData", PatchShape::Leaf),
    (
        "smPolicySnssaiData",
        PatchShape::Map(&PatchShape::Obj(&[
            ("snssai", PatchShape::Leaf),
            (
                "smPolicyDnnData",
                PatchShape::Map(&PatchShape::Obj(&[
                    ("dnn", PatchShape::Leaf),
                    ("bdtRefIds", PatchShape::Leaf),
                ])),
            ),
        ])),
    ),
]);
/// BdtDataPatch.
pub const BDT_DATA_PATCH: PatchShape =
    PatchShape::Obj(&[("transPolicy", PatchShape::Leaf), ("bdtpStatus", PatchShape::Leaf)]);
/// SlicePolicyDataPatch (at least one of the two; checked by [`check_slice_patch`]).
pub const SLICE_POLICY_DATA_PATCH: PatchShape =
    PatchShape::Obj(&[("remainMbrUl", PatchShape::Leaf), ("remainMbrDl", PatchShape::Leaf)]);

/// Checks that a merge patch only touches what `shape` allows; the patch must be an object.
pub fn check_patch(
    patch: &Value,
    shape: &PatchShape,
    type_name: &str,
) -> Result<(), ProblemDetails> {
    let mut errs = Errors::default();
    if !patch.is_object() {
        errs.bad("/", format!("a {type_name} merge patch must be a JSON object"));
    } else {
        walk_patch(patch, shape, "", type_name, &mut errs);
    }
    errs.finish()
}

fn walk_patch(v: &Value, shape: &PatchShape, at: &str, type_name: &str, errs: &mut Errors) {
    match (shape, v) {
        (PatchShape::Leaf, _) | (_, Value::Null) => {}
        (PatchShape::Obj(fields), Value::Object(m)) => {
            for (k, x) in m {
                let here = format!("{at}/{}", escape(k));
                match fields.iter().find(|(n, _)| n == k) {
                    Some((_, inner)) => walk_patch(x, inner, &here, type_name, errs),
                    None => errs.bad(here, format!("not an attribute {type_name} may modify")),
                }
            }
        }
        (PatchShape::Map(inner), Value::Object(m)) => {
            for (k, x) in m {
                walk_patch(x, inner, &format!("{at}/{}", escape(k)), type_name, errs);
            }
        }
        (_, _) => errs.bad(at_or_root(at), "must be an object"),
    }
}

/// SlicePolicyDataPatch's `oneOf`: remainMbrUl and/or remainMbrDl, each a BitRate.
pub fn check_slice_patch(patch: &Value) -> Result<(), ProblemDetails> {
    check_patch(patch, &SLICE_POLICY_DATA_PATCH, "SlicePolicyDataPatch")?;
    let mut errs = Errors::default();
    let o = patch.as_object().map(|o| o.len()).unwrap_or(0);
    if o == 0 {
        errs.missing("/remainMbrUl");
    }
    for k in ["remainMbrUl", "remainMbrDl"] {
        if let Some(v) = patch.get(k) {
            check(v, &BIT_RATE, &mut format!("/{k}"), &mut errs);
        }
    }
    errs.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(p: ProblemDetails) -> Vec<String> {
        p.invalid_params.into_iter().map(|p| p.param).collect()
    }

    #[test]
    fn sm_policy_data_lists_every_wrong_attribute() {
        let good = json!({"smPolicySnssaiData": {"1-000001": {
            "snssai": {"sst": 1, "sd": "000001"},
            "smPolicyDnnData": {"internet": {"dnn": "internet", "gbrUl": "10 Mbps", "online": true}}
        }}, "umData": {"l1": {"limitId": "l1", "allowedUsage": {"totalVolume": 1000}}}});
        assert!(validate(&good, &SM_POLICY_DATA).is_ok());
        let bad = json!({"smPolicySnssaiData": {"1": {
            "snssai": {"sst": 300},
            "smPolicyDnnData": {"x": {"gbrUl": "fast", "online": "yes"}}
        }}, "umData": {}, "suppFeat": "xyz"});
        let p = validate(&bad, &SM_POLICY_DATA).unwrap_err();
        assert_eq!(p.cause.as_deref(), Some("MANDATORY_IE_MISSING"));
        let mut got = params(p);
        got.sort();
        assert_eq!(
            got,
            [
                "/smPolicySnssaiData/1/smPolicyDnnData/x/dnn",
                "/smPolicySnssaiData/1/smPolicyDnnData/x/gbrUl",
                "/smPolicySnssaiData/1/smPolicyDnnData/x/online",
                "/smPolicySnssaiData/1/snssai/sst",
                "/suppFeat",
                "/umData",
            ]
        );
        let p = validate(&json!([]), &SM_POLICY_DATA).unwrap_err();
        assert_eq!(params(p), ["/"]);
    }

    #[test]
    fn patch_shapes_refuse_other_attributes() {
        let ok = json!({"umData": null, "smPolicySnssaiData": {"1": {"snssai": {"sst": 1},
            "smPolicyDnnData": {"internet": {"dnn": "internet", "bdtRefIds": {"a": "b"}}}}}});
        assert!(check_patch(&ok, &SM_POLICY_DATA_PATCH, "SmPolicyDataPatch").is_ok());
        let bad = json!({"umDataLimits": {}, "smPolicySnssaiData": {"1": {
            "smPolicyDnnData": {"internet": {"gbrUl": "1 bps"}}}}});
        let p = check_patch(&bad, &SM_POLICY_DATA_PATCH, "SmPolicyDataPatch").unwrap_err();
        let mut got = params(p);
        got.sort();
        assert_eq!(got, ["/smPolicySnssaiData/1/smPolicyDnnData/internet/gbrUl", "/umDataLimits"]);
        assert!(check_slice_patch(&json!({"remainMbrUl": "1 Mbps"})).is_ok());
        assert!(check_slice_patch(&json!({})).is_err());
        assert!(check_slice_patch(&json!({"remainMbrDl": "much"})).is_err());
        assert!(check_slice_patch(&json!({"mbrUl": "1 Mbps"})).is_err());
    }

    #[test]
    fn simple_types() {
        assert!(
            bit_rate("10 Mbps")
                && bit_rate("1.5 Gbps")
                && !bit_rate("10Mbps")
                && !bit_rate("1. Kbps")
        );
        assert!(date_time("2030-01-01T00:00:00Z") && !date_time("tomorrow"));
        assert!(base64("aGVsbG8=") && !base64("abc") && !base64("a b="));
        assert!(dnn("internet.mnc001.mcc001.gprs") && !dnn("a..b") && !dnn(""));
        let mut e = Errors::default();
        check(&json!(u64::MAX), &UINT, &mut "/n".to_owned(), &mut e);
        assert!(e.is_empty());
        check(&json!(-1), &UINT, &mut "/n".to_owned(), &mut e);
        assert!(!e.is_empty());
    }
}
