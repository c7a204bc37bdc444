//! Policy Event Records and the subscriber activity log.
//!
//! A **Policy Event Record** (PER, `[pcf.per]`) is one JSON line per policy decision, whatever
//! asked for it (N7, N15, UE policy, N5, Gx, Rx, a UDR or CHF notification): when, which
//! service, the subscriber and the session's identifiers, the project and version in force, the
//! rules that fired, whether the fallback answered and why, what the data source gave, and the
//! decision. It is what an operator reads to answer "why did this subscriber get that QoS".
//!
//! The **subscriber activity log** (SAL, `[pcf.sal]`) traces listed subscribers: each of their
//! decisions with everything the engine read (the request, the subscriber's policy data, its
//! state variables and spending statuses) and everything it answered, to its own file.
//!
//! Neither may slow a decision or block an async thread: a record is handed to a writer thread
//! through a bounded queue; a full queue drops the record and counts it (`pcf_per_records`
//! `result="dropped"`). The writer flushes whenever its queue runs dry, so a record reaches the
//! file within milliseconds; a kill loses at most what was queued. A file that grows past
//! `rotate_mb` is renamed to `<path>.1` (replacing the previous one) and started again.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::Duration;

use chrono::{SecondsFormat, TimeZone, Utc};
use policy::{Outcome, Project, Service};
use rustc_hash::FxHashSet;
use serde::Deserialize;
use serde_json::{Map, Value};

/// `[pcf.per]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerConfig {
    /// Write a record per decision. Default false (the reference runs mostly without PER).
    #[serde(default)]
    pub enabled: bool,
    /// The file (JSON lines); a relative path is taken beside the PCF's database.
    #[serde(default = "default_per_path")]
    pub path: PathBuf,
    /// Put the whole decision in each record. Default true; false keeps records small (the
    /// rules that fired still say what was decided).
    #[serde(default = "default_true")]
    pub include_decision: bool,
    /// Records waiting for the writer at most; more are dropped and counted. Default 65,536.
    #[serde(default = "default_queue")]
    pub queue: usize,
    /// Start a new file once this one is past this many MiB (the old one kept as `.1`);
    /// 0: never. Default 256.
    #[serde(default = "default_rotate_mb")]
    pub rotate_mb: u64,
}

impl Default for PerConfig {
    fn default() -> Self {
        PerConfig {
            enabled: false,
            path: default_per_path(),
            include_decision: true,
            queue: default_queue(),
            rotate_mb: default_rotate_mb(),
        }
    }
}

/// `[pcf.sal]`: the subscriber activity log.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SalConfig {
    /// The subscribers traced, by SUPI (`imsi-...`) or GPSI (`msisdn-...`); empty: none.
    #[serde(default)]
    pub subscribers: Vec<String>,
    /// The file (JSON lines); a relative path is taken beside the PCF's database.
    #[serde(default = "default_sal_path")]
    pub path: PathBuf,
    /// As `[pcf.per] rotate_mb`.
    #[serde(default = "default_rotate_mb")]
    pub rotate_mb: u64,
}

impl Default for SalConfig {
    fn default() -> Self {
        SalConfig {
            subscribers: Vec::new(),
            path: default_sal_path(),
            rotate_mb: default_rotate_mb(),
        }
    }
}

fn default_true() -> bool {
    true
}
fn default_per_path() -> PathBuf {
    PathBuf::from("pcf-per.jsonl")
}
fn default_sal_path() -> PathBuf {
    PathBuf::from("pcf-sal.jsonl")
}
fn default_queue() -> usize {
    65_536
}
fn default_rotate_mb() -> u64 {
    256
}

impl PerConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.enabled && self.queue == 0 {
            return Err("[pcf.per] queue must be > 0".into());
        }
        Ok(())
    }
}

/// What the data source gave a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataState {
    /// The subscriber's policy data was read (or cached).
    Found,
    /// The source does not know the subscriber: decided without data.
    Unknown,
    /// No source answered: the project's fallback decision.
    Unreachable,
    /// The service reads no policy data, or the source is off.
    None,
}

impl DataState {
    fn name(self) -> &'static str {
        match self {
            DataState::Found => "found",
            DataState::Unknown => "unknown",
            DataState::Unreachable => "unreachable",
            DataState::None => "none",
        }
    }
}

/// One decision as the engine took it, for [`Recorder::decision`].
pub struct Event<'a> {
    pub service: Service,
    pub supi: &'a str,
    pub request: &'a Value,
    pub subscriber: Option<&'a Value>,
    pub ssv: &'a Map<String, Value>,
    pub spending: &'a Map<String, Value>,
    pub data: DataState,
    pub outcome: &'a Outcome,
    pub project: &'a Arc<Project>,
}

/// The request attributes a PER names the session by (JSON pointers into the request the
/// engine read: an SmPolicyContextData, a PolicyAssociationRequest, an AppSessionContext, or
/// the context a Gx CCR maps to).
const IDENTIFIERS: [(&str, &str); 14] = [
    ("gpsi", "/gpsi"),
    ("dnn", "/dnn"),
    ("pduSessionId", "/pduSessionId"),
    ("sliceInfo", "/sliceInfo"),
    ("ipv4Address", "/ipv4Address"),
    ("ipv6AddressPrefix", "/ipv6AddressPrefix"),
    ("ratType", "/ratType"),
    ("accessType", "/accessType"),
    ("triggers", "/repPolicyCtrlReqTriggers"),
    ("smfId", "/smfId"),
    ("amfId", "/guami/amfId"),
    ("gx", "/gx"),
    ("afAppId", "/ascReqData/afAppId"),
    ("ueIpv4", "/ascReqData/ueIpv4"),
];

enum Sink {
    Per,
    Sal,
}

struct Record {
    sink: Sink,
    time_ms: i64,
    service: Service,
    supi: String,
    ids: Map<String, Value>,
    project: Arc<Project>,
    fired: Vec<usize>,
    fallback: Option<String>,
    data: DataState,
    decision: Option<Value>,
    ssv_updates: Option<Map<String, Value>>,
    /// SAL only: what the engine read besides the identifiers.
    input: Option<Value>,
}

/// Counters of the records, by sink.
#[derive(Debug, Default)]
pub struct Counts {
    pub written: AtomicU64,
    pub dropped: AtomicU64,
    pub failed: AtomicU64,
}

struct Inner {
    per: Option<SyncSender<Record>>,
    sal: Option<(SyncSender<Record>, FxHashSet<String>)>,
    include_decision: bool,
    per_counts: Arc<Counts>,
    sal_counts: Arc<Counts>,
}

/// Hands decisions to the PER and SAL writers; off (and free) when neither is configured.
#[derive(Clone, Default)]
pub struct Recorder(Option<Arc<Inner>>);

impl Recorder {
    /// Opens the files and starts one writer thread per enabled sink. Relative paths are
    /// taken in `dir` (the database's directory).
    pub fn open(per: &PerConfig, sal: &SalConfig, dir: &Path) -> Result<Recorder, String> {
        if !per.enabled && sal.subscribers.is_empty() {
            return Ok(Recorder(None));
        }
        let per_counts = Arc::new(Counts::default());
        let sal_counts = Arc::new(Counts::default());
        let per_tx = if per.enabled {
            let path = dir.join(&per.path);
            Some(start("pcf-per", &path, per.queue, per.rotate_mb, per_counts.clone())?)
        } else {
            None
        };
        let sal_tx = if sal.subscribers.is_empty() {
            None
        } else {
            let path = dir.join(&sal.path);
            let tx = start("pcf-sal", &path, 4096, sal.rotate_mb, sal_counts.clone())?;
            Some((tx, sal.subscribers.iter().cloned().collect()))
        };
        Ok(Recorder(Some(Arc::new(Inner {
            per: per_tx,
            sal: sal_tx,
            include_decision: per.include_decision,
            per_counts,
            sal_counts,
        }))))
    }

    /// The PER and SAL counters, when on.
    pub fn counts(&self) -> Option<(&Counts, &Counts)> {
        self.0.as_ref().map(|i| (&*i.per_counts, &*i.sal_counts))
    }

    /// Records one decision: a PER when on, and a SAL entry when the subscriber is traced.
    pub fn decision(&self, e: Event<'_>) {
        let Some(inner) = &self.0 else { return };
        let traced = inner.sal.as_ref().filter(|(_, subs)| {
            subs.contains(e.supi)
                || e.request.get("gpsi").and_then(Value::as_str).is_some_and(|g| subs.contains(g))
        });
        if inner.per.is_none() && traced.is_none() {
            return;
        }
        let time_ms = Utc::now().timestamp_millis();
        let mut ids = Map::new();
        for (name, pointer) in IDENTIFIERS {
            if let Some(v) = e.request.pointer(pointer) {
                ids.insert(name.to_string(), v.clone());
            }
        }
        let record = |sink, decision: bool, input| Record {
            sink,
            time_ms,
            service: e.service,
            supi: e.supi.to_string(),
            ids: ids.clone(),
            project: e.project.clone(),
            fired: e.outcome.fired.clone(),
            fallback: e.outcome.error.clone(),
            data: e.data,
            decision: decision.then(|| e.outcome.decision.clone()),
            ssv_updates: (!e.outcome.ssv_updates.is_empty()).then(|| e.outcome.ssv_updates.clone()),
            input,
        };
        if let Some(tx) = &inner.per {
            send(tx, record(Sink::Per, inner.include_decision, None), &inner.per_counts);
        }
        if let Some((tx, _)) = traced {
            let input = serde_json::json!({
                "request": e.request,
                "subscriber": e.subscriber,
                "ssv": e.ssv,
                "spending": e.spending,
            });
            send(tx, record(Sink::Sal, true, Some(input)), &inner.sal_counts);
        }
    }
}

fn send(tx: &SyncSender<Record>, r: Record, counts: &Counts) {
    match tx.try_send(r) {
        Ok(()) => {}
        Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
            counts.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn start(
    name: &str,
    path: &Path,
    queue: usize,
    rotate_mb: u64,
    counts: Arc<Counts>,
) -> Result<SyncSender<Record>, String> {
    let file = Output::open(path, rotate_mb.saturating_mul(1 << 20))?;
    let (tx, rx) = mpsc::sync_channel(queue);
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || write_loop(rx, file, &counts))
        .map_err(|e| format!("cannot start the {name} writer: {e}"))?;
    Ok(tx)
}

/// The writer thread: a line per record, flushed whenever the queue runs dry; ends (flushed)
/// when every sender is gone.
fn write_loop(rx: Receiver<Record>, mut out: Output, counts: &Counts) {
    let mut line = Vec::with_capacity(4096);
    loop {
        let r = match rx.recv_timeout(Duration::from_millis(500)) {
            Ok(r) => r,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let mut next = Some(r);
        while let Some(r) = next.take() {
            line.clear();
            encode(r, &mut line);
            match out.write_line(&line) {
                Ok(()) => counts.written.fetch_add(1, Ordering::Relaxed),
                Err(err) => {
                    tracing::warn!(path = %out.path.display(), %err, "policy event record not written");
                    counts.failed.fetch_add(1, Ordering::Relaxed)
                }
            };
            next = rx.try_recv().ok();
        }
        if let Err(err) = out.flush() {
            tracing::warn!(path = %out.path.display(), %err, "policy event records not flushed");
        }
    }
    let _ = out.flush();
}

/// The record as one JSON line; its parts are moved in, not copied (the writer's cost is the
/// PER's cost).
fn encode(r: Record, out: &mut Vec<u8>) {
    let mut m = Map::new();
    let time = Utc
        .timestamp_millis_opt(r.time_ms)
        .single()
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true))
        .unwrap_or_default();
    m.insert("time".into(), Value::String(time));
    m.insert("service".into(), Value::String(r.service.name().to_string()));
    m.insert("supi".into(), Value::String(r.supi));
    m.extend(r.ids);
    m.insert("policy".into(), Value::String(r.project.name.clone()));
    m.insert("version".into(), Value::String(r.project.version.clone()));
    let names = r.project.rule_names(r.service);
    let fired: Vec<Value> = r
        .fired
        .iter()
        .filter_map(|i| names.get(*i).map(|n| Value::String((*n).to_string())))
        .collect();
    m.insert("rules".into(), Value::Array(fired));
    m.insert("data".into(), Value::String(r.data.name().to_string()));
    if let Some(f) = r.fallback {
        m.insert("fallback".into(), Value::String(f));
    }
    if let Some(s) = r.ssv_updates {
        m.insert("ssvUpdates".into(), Value::Object(s));
    }
    if let Some(d) = r.decision {
        m.insert("decision".into(), d);
    }
    if let (Sink::Sal, Some(i)) = (r.sink, r.input) {
        m.insert("input".into(), i);
    }
    // A Map of Values always serializes.
    let _ = serde_json::to_writer(&mut *out, &m);
    out.push(b'\n');
}

/// A JSON-lines file that starts over (the old one kept as `.1`) past a size.
struct Output {
    path: PathBuf,
    file: BufWriter<File>,
    len: u64,
    limit: u64,
}

impl Output {
    fn open(path: &Path, limit: u64) -> Result<Output, String> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(Output {
            path: path.to_path_buf(),
            file: BufWriter::with_capacity(64 << 10, file),
            len,
            limit,
        })
    }

    fn write_line(&mut self, line: &[u8]) -> std::io::Result<()> {
        if self.limit > 0 && self.len > 0 && self.len + line.len() as u64 > self.limit {
            self.rotate()?;
        }
        self.file.write_all(line)?;
        self.len += line.len() as u64;
        Ok(())
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        self.file.flush()?;
        let mut old = self.path.clone().into_os_string();
        old.push(".1");
        std::fs::rename(&self.path, &old)?;
        let file = OpenOptions::new().create(true).append(true).open(&self.path)?;
        self.file = BufWriter::with_capacity(64 << 10, file);
        self.len = 0;
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_past_its_limit_starts_over_and_keeps_the_old_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.jsonl");
        let mut out = Output::open(&path, 10).unwrap();
        out.write_line(b"0123456\n").unwrap();
        out.write_line(b"abcdefg\n").unwrap();
        out.flush().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"abcdefg\n");
        assert_eq!(std::fs::read(dir.path().join("x.jsonl.1")).unwrap(), b"0123456\n");
    }

    #[test]
    fn off_unless_configured() {
        let dir = tempfile::tempdir().unwrap();
        let r = Recorder::open(&PerConfig::default(), &SalConfig::default(), dir.path()).unwrap();
        assert!(r.counts().is_none());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
