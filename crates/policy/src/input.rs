//! What an evaluation reads: the request, the subscriber's data and state variables, the node
//! that sent the request and the time; and the context that resolves a [`Path`] against them
//! and against the decision being built.

use std::borrow::Cow;

use chrono::{DateTime, Datelike, Timelike, Utc};
use serde_json::{Map, Value};

use crate::path::{Path, Root, Seg};

/// One request to decide on, as structured data (the NF turns its SBI body or Diameter message
/// into JSON; the engine knows neither).
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    pub request: &'a Value,
    /// Subscriber data from the policy data source; `Value::Null` when there is none.
    pub subscriber: &'a Value,
    /// The subscriber's state variables as persisted.
    pub ssv: &'a Map<String, Value>,
    /// The requesting node (NF instance id or Diameter Origin-Host).
    pub node: &'a str,
    pub now: DateTime<Utc>,
    /// The subscriber's spending limit statuses (N28, Sy): policyCounterId → its currentStatus
    /// (a string, e.g. `"exhausted"`), read as `spending.<policyCounterId>`; empty when the NF
    /// has none.
    pub spending: &'a Map<String, Value>,
    /// The subscriber's accumulated usage: monitoring key → `{volUsage, volUsageUplink,
    /// volUsageDownlink, timeUsage}`, read as `usage.<key>.volUsage`. None when the NF does
    /// not monitor usage (then `usage exists` is false); an empty map when it does and has
    /// seen no report yet.
    pub usage: Option<&'a Map<String, Value>>,
}

static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();

impl<'a> Input<'a> {
    /// A request with no subscriber data, state, spending statuses, usage or node, at `now`.
    pub fn request(request: &'a Value, now: DateTime<Utc>) -> Self {
        let empty = EMPTY.get_or_init(Map::new);
        Input {
            request,
            subscriber: &Value::Null,
            ssv: empty,
            node: "",
            now,
            spending: empty,
            usage: None,
        }
    }

    /// The empty map, for the state variables or spending statuses of an input that has none.
    pub fn empty() -> &'static Map<String, Value> {
        EMPTY.get_or_init(Map::new)
    }
}

/// An evaluation in progress.
pub(crate) struct Ctx<'a> {
    pub input: Input<'a>,
    pub consts: &'a Value,
    pub decision: Value,
    pub ssv_updates: Map<String, Value>,
}

impl<'a> Ctx<'a> {
    pub fn new(input: Input<'a>, consts: &'a Value) -> Self {
        Ctx { input, consts, decision: Value::Object(Map::new()), ssv_updates: Map::new() }
    }

    /// The value at `p`, if there is one.
    pub fn get<'s>(&'s self, p: &Path) -> Option<Cow<'s, Value>> {
        match p.root {
            Root::Request => p.walk(self.input.request).map(Cow::Borrowed),
            Root::Subscriber => p.walk(self.input.subscriber).map(Cow::Borrowed),
            Root::Const => p.walk(self.consts).map(Cow::Borrowed),
            Root::Decision => p.walk(&self.decision).map(Cow::Borrowed),
            Root::Ssv => ssv_get(&self.ssv_updates, self.input.ssv, p).map(Cow::Borrowed),
            Root::Spending => p.walk_map(self.input.spending).map(Cow::Borrowed),
            Root::Usage => match self.input.usage {
                Some(m) if p.segs.is_empty() => Some(Cow::Owned(Value::Object(m.clone()))),
                Some(m) => p.walk_map(m).map(Cow::Borrowed),
                None => None,
            },
            Root::Node => Some(Cow::Owned(Value::String(self.input.node.to_string()))),
            Root::Now => match p.segs.first() {
                Some(Seg::Key(k)) => now_field(self.input.now, k).map(Cow::Owned),
                _ => None,
            },
        }
    }
}

/// One of the time's fields as rules and scripts read it (`now.hour`, ...: path::NOW_FIELDS).
pub(crate) fn now_field(now: DateTime<Utc>, name: &str) -> Option<Value> {
    Some(match name {
        "hour" => Value::from(now.hour()),
        "minute" => Value::from(now.minute()),
        "weekday" => Value::from(now.weekday().number_from_monday()),
        "date" => Value::String(now.format("%Y-%m-%d").to_string()),
        "epoch" => Value::from(now.timestamp()),
        _ => return None,
    })
}

/// The state variable at `p` (an `ssv.` path): the updates made so far hide the stored value.
pub(crate) fn ssv_get<'v>(
    updates: &'v Map<String, Value>,
    stored: &'v Map<String, Value>,
    p: &Path,
) -> Option<&'v Value> {
    let (first, rest) = match p.segs.split_first() {
        Some((Seg::Key(k), rest)) => (k, rest),
        _ => return None,
    };
    let mut v = updates.get(first).or_else(|| stored.get(first))?;
    for s in rest {
        v = match (s, v) {
            (Seg::Key(k), Value::Object(m)) => m.get(k)?,
            (Seg::Index(i), Value::Array(a)) => a.get(*i)?,
            _ => return None,
        };
    }
    Some(v)
}

/// A value as text for list membership, prefixes and regexes: strings as they are, numbers and
/// booleans as JSON writes them; objects, arrays and null have none.
pub(crate) fn as_text(v: &Value) -> Option<Cow<'_, str>> {
    match v {
        Value::String(s) => Some(Cow::Borrowed(s)),
        Value::Number(n) => Some(Cow::Owned(n.to_string())),
        Value::Bool(b) => Some(Cow::Borrowed(if *b { "true" } else { "false" })),
        _ => None,
    }
}

/// A value as a number: numbers, and strings that hold one (Diameter and SBI carry bit rates
/// and counters both ways).
pub(crate) fn as_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}
