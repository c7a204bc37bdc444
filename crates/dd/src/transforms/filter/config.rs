//! A filter's configuration: the JSON the admin API takes for a filter (`/dd-admin/v1/filters`)
//! and that a feed refers to. [`super::Filter::compile`] checks it and builds the matcher.
//!
//! A filter is a list of conditions that must all hold; `all`, `any` and `not` nest them. Each
//! condition is an object with one key, its kind:
//!
//! ```json
//! {
//!   "conditions": [
//!     {"nf_type": ["PCF", "BSF"]},
//!     {"service": "npcf-smpolicycontrol"},
//!     {"operation": ["Npcf_SMPolicyControl_Create", "CCR-I"]},
//!     {"trigger_point": ["ingress_request", "ingress_response"]},
//!     {"protocol": "http2"},
//!     {"any": [
//!       {"status": ["4xx", "5xx", "5000-5999"]},
//!       {"supi": {"prefixes": ["imsi-20893"],
//!                 "ranges": [{"plmn": "00101", "msin_from": "0000000000", "msin_to": "0000099999"}]}},
//!       {"gpsi": {"prefixes": ["msisdn-3361"]}}
//!     ]},
//!     {"not": {"body": {"path": "sliceInfo.sst", "equals": 2}}},
//!     {"body": {"path": "/dnn", "regex": "^ims"}},
//!     {"sample": {"percent": 1, "by": "supi"}}
//!   ]
//! }
//! ```
//!
//! | kind | value | holds when |
//! |---|---|---|
//! | `nf_type` | a name or a list | the copying NF's type is one of them (ASCII case-insensitive) |
//! | `service` | a name or a list | the service is one of them (`npcf-smpolicycontrol`, `Gx`) |
//! | `operation` | a name or a list | the operation is one of them (`Npcf_SMPolicyControl_Create`, `CCR-I`) |
//! | `status` | a code, a pattern or a list | the answer's HTTP status or Diameter Result-Code is `201` (exact), in class `2xx` / `5xxx` (each `x` one digit), or in range `400-499`. A request carries no status and matches no status condition |
//! | `trigger_point` | a name or a list | `ingress_request`, `ingress_response`, `egress_request`, `egress_response` |
//! | `protocol` | a name or a list | `http2` or `diameter` |
//! | `supi` | `{"prefixes": [...], "ranges": [...]}` | the SUPI/IMSI starts with a prefix, or its MSIN is in a range (see below) |
//! | `gpsi` | `{"prefixes": [...]}` | the GPSI/MSISDN starts with a prefix |
//! | `body` | `{"path": ..., "equals" \| "exists" \| "regex": ...}` | the JSON body's field at `path` equals the value, exists (or not, `false`), or is a string (or scalar, as its JSON text) the regex finds a match in |
//! | `sample` | `{"percent": 1, "by": "supi", "seed": 0}` | the copy falls in the sampled share (see below) |
//! | `all` / `any` | a list of conditions | every one / at least one holds (`any` of nothing never does) |
//! | `not` | a condition | it does not hold |
//!
//! Identities: a prefix that starts with a digit is compared with the digits of the identity
//! (`imsi-001010000000001` and the IMSI `001010000000001` of a Diameter copy both start with
//! `00101`); one that starts with a letter (`imsi-`, `nai-`, `msisdn-`) with the identity as
//! the copy carries it. A range takes the PLMN (MCC and MNC, 5 or 6 digits) and the first and
//! last MSIN, both of the same length: the IMSI must start with the PLMN and its remaining digits,
//! of that length, must lie between them, as numbers.
//!
//! Body paths are JSON pointers (`/smPolicyDecision/sessRules`) or dotted paths
//! (`sliceInfo.sst`, `ueAmbr.uplink`, `list[2].id` or `list.2.id`). The body is parsed only when
//! such a condition is reached, at most once per copy; a body that is not JSON (a Diameter copy)
//! has no field, so `exists: false` holds and every other body test fails. Conditions are tried
//! cheapest first, so a body is only parsed for copies the metadata conditions let through.
//!
//! Sampling keeps `percent` (0 < percent <= 100, fractions allowed) of the copies. `by` says
//! how (default `supi`): `supi` hashes the subscriber, so a sampled subscriber's messages all pass
//! and the others' never (a copy without a SUPI is hashed by its session id, then by its
//! transaction); `session` hashes the session id (then the transaction); `transaction` hashes the
//! NF instance and transaction, so a request and its answer pass together; `random` draws for
//! each copy. The deterministic kinds give the same answer in every Data Director instance and
//! after a restart; `seed` picks another sample of the same size.
//!
//! Every failed check is reported as an `invalidParams` entry whose `param` is the JSON pointer
//! of the field (`/conditions/2/status`), as TS 29.571 has it for `InvalidParam`.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// A filter: every condition must hold. No condition: every copy passes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct FilterConfig {
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

/// One condition, written as an object with a single key naming its kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Condition {
    NfType(OneOrMany<String>),
    Service(OneOrMany<String>),
    Operation(OneOrMany<String>),
    Status(OneOrMany<StatusSpec>),
    TriggerPoint(OneOrMany<String>),
    Protocol(OneOrMany<String>),
    Supi(SupiMatch),
    Gpsi(GpsiMatch),
    Body(BodyMatch),
    Sample(SampleSpec),
    All(Vec<Condition>),
    Any(Vec<Condition>),
    Not(Box<Condition>),
}

/// A single value or a list of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

impl<T> OneOrMany<T> {
    /// The values, with their index in the list (`None` for a single value).
    pub fn items(&self) -> Vec<(Option<usize>, &T)> {
        match self {
            OneOrMany::One(v) => vec![(None, v)],
            OneOrMany::Many(vs) => vs.iter().enumerate().map(|(i, v)| (Some(i), v)).collect(),
        }
    }
}

/// A status as a number (`404`) or a string: `"404"`, `"4xx"`, `"400-499"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum StatusSpec {
    Code(u32),
    Pattern(String),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct SupiMatch {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefixes: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranges: Vec<ImsiRange>,
}

/// IMSIs of one PLMN whose MSIN lies in `msin_from..=msin_to`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImsiRange {
    /// MCC and MNC, 5 or 6 digits (`00101`, `310260`).
    pub plmn: String,
    /// First MSIN of the range, digits; `msin_to` has the same length.
    pub msin_from: String,
    pub msin_to: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct GpsiMatch {
    pub prefixes: Vec<String>,
}

/// A test on one field of the JSON body: exactly one of `equals`, `exists`, `regex`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BodyMatch {
    /// A JSON pointer (`/a/b/0`) or a dotted path (`a.b[0]`).
    pub path: String,
    /// The field equals this JSON value (`null` included).
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub equals: Option<Value>,
    /// The field is present (`true`) or absent (`false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exists: Option<bool>,
    /// The field is a string this regex finds a match in; a number or boolean is tested as its
    /// JSON text. Rust `regex` syntax: no look-around, linear time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
}

/// `equals: null` is a test for null, not an absent test: keep what was written.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SampleSpec {
    /// Share of copies kept, 0 < percent <= 100.
    pub percent: f64,
    #[serde(default)]
    pub by: SampleBy,
    /// Another seed, another (deterministic) sample of the same size.
    #[serde(default)]
    pub seed: u64,
}

/// What a sample is drawn by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum SampleBy {
    /// The subscriber: all of a sampled subscriber's messages pass (the default).
    #[default]
    Supi,
    /// The session id.
    Session,
    /// The NF instance and transaction: a request and its answer pass together.
    Transaction,
    /// A fresh draw per copy.
    Random,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example at the top of this file is a valid filter.
    #[test]
    fn the_documented_example_parses_and_compiles() {
        let doc = include_str!("config.rs");
        let start = doc.find("//! ```json\n").unwrap() + "//! ```json\n".len();
        let end = start + doc[start..].find("//! ```\n").unwrap();
        let json: String = doc[start..end]
            .lines()
            .map(|l| l.strip_prefix("//!").unwrap_or(l))
            .collect::<Vec<_>>()
            .join("\n");
        let config: FilterConfig = serde_json::from_str(&json).unwrap();
        assert_eq!(config.conditions.len(), 9);
        super::super::Filter::compile(&config).unwrap();
    }

    #[test]
    fn a_condition_with_two_kinds_or_an_unknown_kind_is_refused() {
        assert!(serde_json::from_str::<Condition>(r#"{"nf_type":"PCF","service":"x"}"#).is_err());
        assert!(serde_json::from_str::<Condition>(r#"{"colour":"red"}"#).is_err());
        assert!(serde_json::from_str::<FilterConfig>(r#"{"conditions":[],"x":1}"#).is_err());
    }

    #[test]
    fn equals_null_is_kept_as_a_test_for_null() {
        let c: BodyMatch = serde_json::from_str(r#"{"path":"/a","equals":null}"#).unwrap();
        assert_eq!(c.equals, Some(Value::Null));
        let c: BodyMatch = serde_json::from_str(r#"{"path":"/a","exists":true}"#).unwrap();
        assert_eq!(c.equals, None);
    }
}
