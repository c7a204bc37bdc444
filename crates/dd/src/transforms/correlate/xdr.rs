//! The Extended Detail Record: what one transaction, session or subscriber's messages within the
//! window amounted to. Its JSON (the admin API's answer, one line of a JSON lines export) and
//! its CSV row are defined here; docs/dd.md lists every field.
//!
//! Times are RFC 3339 in UTC with nanoseconds (the copies' own precision, so a record read back
//! is the record written); durations and latencies are whole microseconds.

use std::fmt::Write as _;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

use super::config::CorrelationKey;

/// One xDR.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Xdr {
    /// 32 hex digits, derived from the correlation's name and the record's first message, so a
    /// replay of the same copies (a restarted consumer) yields the same id and the store keeps
    /// one record.
    pub id: String,
    /// The name of the correlation configuration that made it.
    pub correlation: String,
    /// What grouped the messages: `session` or `supi` for a record of that key, `transaction`
    /// for one transaction (and the egress calls made while serving it).
    pub key: CorrelationKey,
    /// The first message's timestamp.
    #[serde(with = "rfc3339")]
    pub start: u64,
    /// The last message's timestamp.
    #[serde(with = "rfc3339")]
    pub end: u64,
    pub duration_us: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supi: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpsi: Option<String>,
    /// SM policy association, Diameter Session-Id, binding id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The NF types that copied a message of the record, in order of first appearance.
    pub nf_types: Vec<String>,
    /// Their instances, in the same way.
    pub nf_instances: Vec<String>,
    /// Each request and its answer, in the order the requests were seen.
    pub procedures: Vec<Procedure>,
    pub outcome: Outcome,
    /// The status or Result-Code of the first failure (`failure`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome_status: Option<u32>,
    /// The operation that failed, or that got no answer (`timeout`, `incomplete`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome_operation: Option<String>,
    /// Messages (requests and answers) in the record.
    pub message_count: u32,
    pub close_reason: CloseReason,
}

/// A request and its answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Procedure {
    pub nf_type: String,
    pub nf_instance: String,
    pub service: String,
    pub operation: String,
    /// Where the request was copied: `ingress_request` (served by the NF) or `egress_request`
    /// (sent by it).
    pub trigger_point: String,
    #[serde(with = "rfc3339")]
    pub request_time: u64,
    /// Absent when no answer was seen.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "rfc3339_opt")]
    pub response_time: Option<u64>,
    /// HTTP status or Diameter Result-Code of the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u32>,
    /// Answer time less request time, as the NF saw them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_us: Option<u64>,
}

/// How the record ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Every request got an answer and none failed.
    Success,
    /// A request got an HTTP status of 400 or more, or a Diameter Result-Code outside
    /// 1xxx-2xxx (`outcome_status`; the first in procedure order).
    Failure,
    /// A request got no answer within the window.
    Timeout,
    /// A request was still unanswered when the record had to close early (memory bound, too
    /// many procedures, shutdown): not known to have failed.
    Incomplete,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Failure => "failure",
            Outcome::Timeout => "timeout",
            Outcome::Incomplete => "incomplete",
        }
    }

    pub fn parse(s: &str) -> Option<Outcome> {
        [Outcome::Success, Outcome::Failure, Outcome::Timeout, Outcome::Incomplete]
            .into_iter()
            .find(|o| o.as_str() == s)
    }
}

/// Why the record closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CloseReason {
    /// A transaction record: its request and every egress call in it got their answers.
    Completed,
    /// A session record: the answer to its terminating operation (a delete, CCR-T, STR).
    Terminated,
    /// No message joined it for the window.
    Expired,
    /// Closed to respect `max_open`, oldest activity first.
    Evicted,
    /// It reached `max_procedures`; later messages start a new record.
    MaxProcedures,
    /// The correlation was stopped.
    Flushed,
}

impl CloseReason {
    pub fn as_str(self) -> &'static str {
        match self {
            CloseReason::Completed => "completed",
            CloseReason::Terminated => "terminated",
            CloseReason::Expired => "expired",
            CloseReason::Evicted => "evicted",
            CloseReason::MaxProcedures => "max_procedures",
            CloseReason::Flushed => "flushed",
        }
    }
}

/// Whether an answer's status is a failure: HTTP 400 and above; for Diameter, a Result-Code
/// outside 1xxx (informational) and 2xxx (success). 0 (no status known) is not.
pub fn is_failure(diameter: bool, status: u32) -> bool {
    if status == 0 {
        return false;
    }
    if diameter {
        !(1000..3000).contains(&status)
    } else {
        status >= 400
    }
}

/// An RFC 3339 time (UTC, nanoseconds) for nanoseconds since the UNIX epoch.
pub fn format_time(ns: u64) -> String {
    let t =
        DateTime::<Utc>::from_timestamp((ns / 1_000_000_000) as i64, (ns % 1_000_000_000) as u32)
            .unwrap_or_default();
    t.to_rfc3339_opts(SecondsFormat::Nanos, true)
}

/// Nanoseconds since the UNIX epoch of an RFC 3339 time; `None` for another text or a time
/// before 1970.
pub fn parse_time(s: &str) -> Option<u64> {
    let t = DateTime::parse_from_rfc3339(s).ok()?;
    u64::try_from(t.timestamp_nanos_opt()?).ok()
}

mod rfc3339 {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(ns: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format_time(*ns))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let s = String::deserialize(d)?;
        super::parse_time(&s).ok_or_else(|| serde::de::Error::custom("not an RFC 3339 time"))
    }
}

mod rfc3339_opt {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(ns: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match ns {
            Some(ns) => s.serialize_str(&super::format_time(*ns)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        let s = Option::<String>::deserialize(d)?;
        s.map(|s| {
            super::parse_time(&s).ok_or_else(|| serde::de::Error::custom("not an RFC 3339 time"))
        })
        .transpose()
    }
}

/// The CSV header, in the order of [`Xdr::write_csv`]'s fields.
pub const CSV_HEADER: &str = "id,correlation,key,start,end,duration_us,supi,gpsi,session_id,\
nf_types,nf_instances,outcome,outcome_status,outcome_operation,message_count,close_reason,procedures\r\n";

impl Xdr {
    /// Appends the record as one CSV row (RFC 4180: CRLF, a field with a comma, quote, CR or LF
    /// quoted, quotes doubled). Lists are joined with `;`; `procedures` is their JSON array.
    pub fn write_csv(&self, out: &mut String) {
        let opt = |v: &Option<String>| v.clone().unwrap_or_default();
        let num = |v: Option<u32>| v.map(|n| n.to_string()).unwrap_or_default();
        let procedures = serde_json::to_string(&self.procedures).unwrap_or_default();
        let fields: [&str; 17] = [
            &self.id,
            &self.correlation,
            self.key.as_str(),
            &format_time(self.start),
            &format_time(self.end),
            &self.duration_us.to_string(),
            &opt(&self.supi),
            &opt(&self.gpsi),
            &opt(&self.session_id),
            &self.nf_types.join(";"),
            &self.nf_instances.join(";"),
            self.outcome.as_str(),
            &num(self.outcome_status),
            &opt(&self.outcome_operation),
            &self.message_count.to_string(),
            self.close_reason.as_str(),
            &procedures,
        ];
        for (i, f) in fields.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            csv_field(f, out);
        }
        out.push_str("\r\n");
    }

    /// Appends the record's JSON and a newline (one line of a JSON lines export).
    pub fn write_json_line(&self, out: &mut String) {
        // Serialising strings, numbers and lists into a String cannot fail.
        let _ = write!(out, "{}", serde_json::to_string(self).unwrap_or_default());
        out.push('\n');
    }
}

fn csv_field(f: &str, out: &mut String) {
    if f.contains([',', '"', '\r', '\n']) {
        out.push('"');
        out.push_str(&f.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_keep_their_nanoseconds() {
        let ns = 1_790_000_000_123_456_789;
        assert_eq!(format_time(ns), "2026-09-21T14:13:20.123456789Z");
        assert_eq!(parse_time(&format_time(ns)), Some(ns));
        assert_eq!(parse_time("2026-09-21T16:13:20.5+02:00"), Some(1_790_000_000_500_000_000));
        assert_eq!(parse_time("2026-09-21"), None);
        assert_eq!(parse_time("1960-01-01T00:00:00Z"), None);
    }

    #[test]
    fn failures_by_protocol() {
        assert!(!is_failure(false, 201));
        assert!(!is_failure(false, 307));
        assert!(is_failure(false, 404));
        assert!(!is_failure(true, 2001));
        assert!(is_failure(true, 5030));
        assert!(is_failure(true, 3002));
        assert!(!is_failure(true, 0));
    }

    #[test]
    fn csv_fields_are_quoted_only_when_they_must_be() {
        let mut out = String::new();
        csv_field("plain", &mut out);
        out.push('|');
        csv_field("a,b", &mut out);
        out.push('|');
        csv_field("say \"hi\"\r\n", &mut out);
        assert_eq!(out, "plain|\"a,b\"|\"say \"\"hi\"\"\r\n\"");
    }
}
