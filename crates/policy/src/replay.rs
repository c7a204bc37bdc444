//! Replay: recorded requests evaluated under two versions of a project, every decision that
//! differs reported with the members that differ. The recording is JSON lines, one request per
//! line (the Data Director's records will be this shape):
//!
//! ```json
//! {"service":"SM","request":{...},"subscriber":{...},"ssv":{...},"node":"smf-1","now":"2026-11-26T10:00:00Z"}
//! ```
//! `subscriber`, `ssv`, `node` and `now` may be left out.

use std::io::BufRead;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::{Input, Outcome, Project, Service};

#[derive(Debug, Deserialize)]
struct Record {
    service: String,
    request: Value,
    #[serde(default)]
    subscriber: Value,
    #[serde(default)]
    ssv: Map<String, Value>,
    #[serde(default)]
    node: String,
    #[serde(default)]
    now: Option<String>,
    /// policyCounterId → currentStatus.
    #[serde(default)]
    spending: Map<String, Value>,
    /// Monitoring key → accumulated usage; absent: the NF monitored no usage.
    #[serde(default)]
    usage: Option<Map<String, Value>>,
}

/// One request whose decisions differ.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    /// Line of the recording (1-based).
    pub line: usize,
    pub service: Service,
    /// `path: old -> new`, for each member that differs (decision, state updates, fallback).
    pub changes: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplayReport {
    pub requests: usize,
    pub differences: Vec<Difference>,
    /// Lines that are not a record, with why.
    pub bad_lines: Vec<(usize, String)>,
}

/// Evaluates every record under `old` and `new`.
pub fn replay(
    old: &Project,
    new: &Project,
    sessions: impl BufRead,
) -> std::io::Result<ReplayReport> {
    let mut report = ReplayReport::default();
    for (i, line) in sessions.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let n = i + 1;
        let rec: Record = match serde_json::from_str(&line) {
            Ok(r) => r,
            Err(e) => {
                report.bad_lines.push((n, e.to_string()));
                continue;
            }
        };
        let Some(service) = Service::parse(&rec.service) else {
            report
                .bad_lines
                .push((n, format!("service `{}`: SM, AM, UE, PA, GX or SY", rec.service)));
            continue;
        };
        let now = match rec.now.as_deref().map(crate::testcase::parse_time).transpose() {
            Ok(t) => t.unwrap_or_else(crate::testcase::default_now),
            Err(e) => {
                report.bad_lines.push((n, format!("now: {e}")));
                continue;
            }
        };
        let input = Input {
            request: &rec.request,
            subscriber: &rec.subscriber,
            ssv: &rec.ssv,
            node: &rec.node,
            now,
            spending: &rec.spending,
            usage: rec.usage.as_ref(),
        };
        report.requests += 1;
        let a = old.evaluate(service, input);
        let b = new.evaluate(service, input);
        let changes = compare(&a, &b);
        if !changes.is_empty() {
            report.differences.push(Difference { line: n, service, changes });
        }
    }
    Ok(report)
}

fn compare(a: &Outcome, b: &Outcome) -> Vec<String> {
    let mut out = Vec::new();
    diff("decision", &a.decision, &b.decision, &mut out);
    diff(
        "ssv",
        &Value::Object(a.ssv_updates.clone()),
        &Value::Object(b.ssv_updates.clone()),
        &mut out,
    );
    if a.error != b.error {
        out.push(format!("fallback: {:?} -> {:?}", a.error, b.error));
    }
    out
}

/// The paths at which two values differ, with both sides.
pub fn diff(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let p = format!("{path}.{k}");
                match (x.get(k), y.get(k)) {
                    (Some(u), Some(v)) => diff(&p, u, v, out),
                    (Some(u), None) => out.push(format!("{p}: {u} -> (none)")),
                    (None, Some(v)) => out.push(format!("{p}: (none) -> {v}")),
                    (None, None) => {}
                }
            }
        }
        _ if a != b => out.push(format!("{path}: {a} -> {b}")),
        _ => {}
    }
}
