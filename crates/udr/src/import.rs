//! Bulk import into the UDR's stores, behind `fivecore udr import` (formats in docs/udr.md): SLF
//! and EIR entries (CSV or JSON lines), and, from JSON lines, policy data profiles, Sh profiles
//! and policy data subscriptions (subs-to-notify).
//!
//! A parser thread reads and checks rows (with the provisioning API's own checks, so a row
//! means what the same REST or SOAP body means) into batches of `batch_rows`; each batch is one
//! bulk call of the service's store trait, i.e. one transaction (over SQLite, one job of the
//! store's writer with prepared statements). The parser fills the next
//! batch while the writer commits the last one, and waits when it is one batch ahead, so memory
//! stays bounded whatever the file size. Rows are upserts (an SLF row replaces the entries it
//! shares an identity with; an EIR row replaces the IMEI or the range starting at the same
//! IMEI; a policy row replaces the UE's whole policy data, as the provisioning PUT does; an Sh
//! row creates its profile or replaces the one holding its identities; a subscription replaces
//! the one of its `subsId`), so running the same file twice is harmless and an import that
//! stopped can be re-run. Data loaded this way notifies no subscriber: it is for loading, not for
//! live changes. Subscriptions loaded into the store of a running UDR are taken in at its next
//! start.
//!
//! A bad row is reported with its line number; it is skipped or stops the import
//! ([`Options::stop_on_bad_row`]); the rows before it are committed either way.

use std::io::BufRead;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use crate::eir::{self, EirItem, RangeConflict};
use crate::policy_data::provisioning as policy_provisioning;
use crate::policy_data::subs_to_notify::{self, Subscription};
use crate::provisioning::eir_entries;
use crate::provisioning::{describe, slf_entries};
use crate::sh::data::{self as sh_data, ShProfile};
use crate::slf::{self, Entry, PutStats};
use crate::stores::Stores;

/// What the rows are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Slf,
    Eir,
    /// A UE's PolicyDataProfile: `{"ueId": "imsi-…", "amData": {…}, "smData": {…}, …}` (JSON
    /// lines only).
    Policy,
    /// An Sh profile, the content of SOAP `CreateShProfile` (JSON lines only):
    /// `{"publicIdentities": [...], "msisdns": [...], "imsUserState": "REGISTERED",
    /// "scscfName": "sip:…", "repositoryData": [{"serviceIndication", "sequenceNumber",
    /// "serviceData"}]}`.
    Sh,
    /// A policy data subscription (JSON lines only): `{"subsId": "…", "subscription":
    /// {PolicyDataSubscription}}`, checked as a POST to subs-to-notify checks it.
    PolicySubscriptions,
}

impl Kind {
    /// Whether the rows can only be JSON lines (nested JSON).
    fn jsonl_only(self) -> bool {
        matches!(self, Kind::Policy | Kind::Sh | Kind::PolicySubscriptions)
    }
}

/// The attribute of a policy row naming its UE; the others are the PolicyDataProfile.
pub const POLICY_UE_ID: &str = "ueId";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Csv,
    Jsonl,
}

#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub kind: Kind,
    pub format: Format,
    /// Rows per transaction.
    pub batch_rows: usize,
    /// Stop at the first bad row (else skip it and go on).
    pub stop_on_bad_row: bool,
    /// Sh: the largest ServiceData accepted (`[udr.sh] max_repository_data_bytes`).
    pub max_service_data_bytes: usize,
    /// List sizes of a row, as for the REST provisioning (`[udr.provisioning]`).
    pub limits: crate::config::ProvisioningLimits,
}

impl Options {
    pub fn new(kind: Kind, format: Format) -> Self {
        Options {
            kind,
            format,
            batch_rows: DEFAULT_BATCH_ROWS,
            stop_on_bad_row: true,
            max_service_data_bytes: crate::sh::ShConfig::default().max_repository_data_bytes,
            limits: crate::config::ProvisioningLimits::default(),
        }
    }
}

/// Rows per transaction unless told otherwise: large enough that the commit's cost vanishes,
/// small enough that a UDR serving from the same file waits at most a fraction of a second for
/// the write lock.
pub const DEFAULT_BATCH_ROWS: usize = 50_000;

/// A row that was not imported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRow {
    /// 1-based line number in the input.
    pub line: u64,
    pub reason: String,
}

/// Counters so far, reported after each committed batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Rows committed.
    pub rows: u64,
    /// Rows not imported.
    pub bad: u64,
    /// Input bytes read up to the last committed row.
    pub bytes: u64,
    pub elapsed: Duration,
}

/// What [`run`] reports as it goes.
#[derive(Debug)]
pub enum Event<'a> {
    Progress(Progress),
    BadRow(&'a BadRow),
}

/// The outcome of an import that ran to its end or stopped at a bad row.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub progress: Progress,
    /// The line of the bad row the import stopped at.
    pub stopped_at: Option<u64>,
    /// SLF: identities new, entries replaced, identities removed from replaced entries.
    pub slf: PutStats,
    /// EIR: single IMEIs and ranges written.
    pub imeis: u64,
    pub ranges: u64,
    /// Policy data: UEs that had no policy data before (the others were replaced).
    pub policy_new: u64,
    /// Sh: profiles created and replaced.
    pub sh_new: u64,
    pub sh_replaced: u64,
    /// Policy data subscriptions written.
    pub subscriptions: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("reading the input: {0}")]
    Io(#[from] std::io::Error),
    #[error("line {line}: {reason}")]
    Header { line: u64, reason: String },
    #[error("store: {0}")]
    Store(#[from] store::Error),
    #[error("{0}")]
    Unsupported(&'static str),
}

/// Imports every row of `input` into `stores`.
pub async fn run<R: BufRead + Send + 'static>(
    stores: &Stores,
    input: R,
    opts: Options,
    mut events: impl FnMut(Event<'_>),
) -> Result<Report, ImportError> {
    if opts.kind.jsonl_only() && opts.format == Format::Csv {
        return Err(ImportError::Unsupported(match opts.kind {
            Kind::Policy => {
                "policy data is imported from JSON lines only (a profile is nested JSON)"
            }
            Kind::Sh => "Sh profiles are imported from JSON lines only (a profile is nested JSON)",
            _ => "policy data subscriptions are imported from JSON lines only (nested JSON)",
        }));
    }
    let start = Instant::now();
    let (tx, mut rx) = mpsc::channel::<Result<Batch, ImportError>>(1);
    let parser = tokio::task::spawn_blocking(move || parse(input, opts, &tx));
    let mut report = Report::default();
    while let Some(batch) = rx.recv().await {
        let Batch { rows, bad, bytes, stop } = batch?;
        // Bad rows found by the parser precede every row of this batch that the writer may
        // refuse, except that both lists are in line order: merge them for the report.
        let mut refused: Vec<BadRow> = Vec::new();
        match rows {
            Rows::Slf(entries) => {
                let n = entries.len() as u64;
                // The rows come back to be freed here, not on the writer thread.
                let (s, rows) = stores.slf.put(entries).await?;
                drop(rows);
                report.slf.new += s.new;
                report.slf.replaced += s.replaced;
                report.slf.removed += s.removed;
                report.progress.rows += n;
            }
            Rows::Eir(items) => {
                let (w, rows) = stores.eir.put(items, opts.stop_on_bad_row).await?;
                drop(rows);
                report.imeis += w.imeis;
                report.ranges += w.ranges;
                report.progress.rows += w.imeis + w.ranges;
                refused = w.refused.into_iter().map(|(line, c)| eir_refused(line, c)).collect();
            }
            Rows::Policy(profiles) => {
                let n = profiles.len() as u64;
                // Each row was checked by the parser; put_profiles checks again and would undo
                // the batch rather than write a bad one.
                let (new, rows) = stores.policy.put_profiles(profiles).await?;
                drop(rows);
                report.policy_new += new as u64;
                report.progress.rows += n;
            }
            Rows::Sh(profiles) => {
                let (w, rows) = stores.sh.put_profiles(profiles, opts.stop_on_bad_row).await?;
                drop(rows);
                report.sh_new += w.new;
                report.sh_replaced += w.replaced;
                report.progress.rows += w.new + w.replaced;
                refused =
                    w.refused.into_iter().map(|(line, reason)| BadRow { line, reason }).collect();
            }
            Rows::PolicySubscriptions(subs) => {
                let n = stores.policy.put_subscriptions(subs).await? as u64;
                report.subscriptions += n;
                report.progress.rows += n;
            }
        }
        let mut all: Vec<BadRow> = bad.into_iter().chain(refused).collect();
        all.sort_by_key(|b| b.line);
        if opts.stop_on_bad_row {
            all.truncate(1);
        }
        for b in &all {
            events(Event::BadRow(b));
        }
        report.progress.bad += all.len() as u64;
        report.progress.bytes = bytes;
        report.progress.elapsed = start.elapsed();
        events(Event::Progress(report.progress));
        if opts.stop_on_bad_row && !all.is_empty() {
            report.stopped_at = all.first().map(|b| b.line);
            break;
        }
        if stop {
            break;
        }
    }
    // Dropping the receiver ends a parser still working ahead.
    drop(rx);
    parser.await.map_err(|e| ImportError::Io(std::io::Error::other(e)))?;
    report.progress.elapsed = start.elapsed();
    Ok(report)
}

enum Rows {
    Slf(Vec<Entry>),
    Eir(Vec<(u64, EirItem)>),
    Policy(Vec<(String, Value)>),
    Sh(Vec<(u64, ShProfile)>),
    PolicySubscriptions(Vec<Subscription>),
}

struct Batch {
    rows: Rows,
    /// Rows the parser refused, in line order.
    bad: Vec<BadRow>,
    /// Input bytes consumed up to the end of this batch.
    bytes: u64,
    /// The last batch the parser sends (stopped at a bad row).
    stop: bool,
}

/// The report of a range the EIR store refused.
fn eir_refused(line: u64, c: RangeConflict) -> BadRow {
    let reason = match c {
        RangeConflict::Overlaps(s, e) => format!(
            "/end: the range overlaps the range {}..{}",
            eir::format_imei(s),
            eir::format_imei(e)
        ),
        RangeConflict::Exists | RangeConflict::NotFound => format!("{c:?}"),
    };
    BadRow { line, reason }
}

// ---- the parser thread -----------------------------------------------------------------------

/// Reads `input` into batches sent on `out` until the end, a stop, or `out` closes.
fn parse<R: BufRead>(mut input: R, opts: Options, out: &mpsc::Sender<Result<Batch, ImportError>>) {
    let mut reader = RowReader::new(opts);
    let mut line_buf: Vec<u8> = Vec::with_capacity(1024);
    let mut line_no: u64 = 0;
    let mut bytes: u64 = 0;
    let mut batch = reader.empty_batch();
    loop {
        line_buf.clear();
        let n = match input.read_until(b'\n', &mut line_buf) {
            Ok(n) => n,
            Err(e) => {
                let _ = out.blocking_send(Err(e.into()));
                return;
            }
        };
        if n == 0 {
            break;
        }
        line_no += 1;
        bytes += n as u64;
        match reader.row(line_no, &line_buf) {
            Ok(None) => {}
            Ok(Some(row)) => batch.push(row),
            Err(RowError::Fatal(e)) => {
                let _ = out.blocking_send(Err(e));
                return;
            }
            Err(RowError::Bad(reason)) => {
                batch.bad.push(BadRow { line: line_no, reason });
                if opts.stop_on_bad_row {
                    batch.bytes = bytes;
                    batch.stop = true;
                    let _ = out.blocking_send(Ok(batch));
                    return;
                }
            }
        }
        if batch.len() >= opts.batch_rows.max(1) {
            batch.bytes = bytes;
            let full = std::mem::replace(&mut batch, reader.empty_batch());
            if out.blocking_send(Ok(full)).is_err() {
                return;
            }
        }
    }
    batch.bytes = bytes;
    batch.stop = true;
    let _ = out.blocking_send(Ok(batch));
}

impl Batch {
    fn push(&mut self, row: Row) {
        match (&mut self.rows, row) {
            (Rows::Slf(v), Row::Slf(e)) => v.push(e),
            (Rows::Eir(v), Row::Eir(line, e)) => v.push((line, e)),
            (Rows::Policy(v), Row::Policy(ue, p)) => v.push((ue, p)),
            (Rows::Sh(v), Row::Sh(line, p)) => v.push((line, p)),
            (Rows::PolicySubscriptions(v), Row::PolicySubscription(s)) => v.push(s),
            // A reader makes rows of its own kind only.
            _ => {}
        }
    }

    fn len(&self) -> usize {
        match &self.rows {
            Rows::Slf(v) => v.len(),
            Rows::Eir(v) => v.len(),
            Rows::Policy(v) => v.len(),
            Rows::Sh(v) => v.len(),
            Rows::PolicySubscriptions(v) => v.len(),
        }
    }
}

#[derive(Debug)]
enum Row {
    Slf(Entry),
    Eir(u64, EirItem),
    Policy(String, Value),
    Sh(u64, ShProfile),
    PolicySubscription(Subscription),
}

#[derive(Debug)]
enum RowError {
    /// This row is not imported.
    Bad(String),
    /// Nothing can be imported (a bad CSV header).
    Fatal(ImportError),
}

/// Turns lines into rows: skips blank lines and `#` comments, reads the CSV header.
struct RowReader {
    opts: Options,
    /// CSV: the column names, once the header is read.
    columns: Option<Vec<String>>,
    fields: Vec<String>,
}

const SLF_IDS_COLUMN: &str = "subscriberIds";
const EIR_COLUMNS: [&str; 6] = ["imei", "start", "end", "status", "supis", "gpsis"];

impl RowReader {
    fn new(opts: Options) -> Self {
        RowReader { opts, columns: None, fields: Vec::new() }
    }

    fn empty_batch(&self) -> Batch {
        let cap = self.opts.batch_rows.clamp(1, DEFAULT_BATCH_ROWS);
        let rows = match self.opts.kind {
            Kind::Slf => Rows::Slf(Vec::with_capacity(cap)),
            Kind::Eir => Rows::Eir(Vec::with_capacity(cap)),
            // Profiles are large: grow as they come.
            Kind::Policy => Rows::Policy(Vec::new()),
            Kind::Sh => Rows::Sh(Vec::new()),
            Kind::PolicySubscriptions => Rows::PolicySubscriptions(Vec::new()),
        };
        Batch { rows, bad: Vec::new(), bytes: 0, stop: false }
    }

    fn row(&mut self, line_no: u64, raw: &[u8]) -> Result<Option<Row>, RowError> {
        let mut raw = raw;
        if line_no == 1 {
            raw = raw.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(raw);
        }
        let text = std::str::from_utf8(raw).map_err(|_| RowError::Bad("not UTF-8".into()))?;
        let text = text.trim_end_matches(['\n', '\r']);
        if text.trim().is_empty() || text.starts_with('#') {
            return Ok(None);
        }
        let value = match self.opts.format {
            Format::Jsonl => serde_json::from_str::<Value>(text)
                .map_err(|e| RowError::Bad(format!("not a JSON object: {e}")))?,
            Format::Csv => {
                csv_fields(text, &mut self.fields).map_err(RowError::Bad)?;
                let Some(columns) = &self.columns else {
                    self.columns = Some(self.header(line_no)?);
                    return Ok(None);
                };
                if self.fields.len() != columns.len() {
                    return Err(RowError::Bad(format!(
                        "{} fields where the header has {}",
                        self.fields.len(),
                        columns.len()
                    )));
                }
                csv_row_json(self.opts.kind, columns, &self.fields)
            }
        };
        match self.opts.kind {
            Kind::Slf => {
                slf_entries::parse_entry(&value, &self.opts.limits).map(|e| Some(Row::Slf(e)))
            }
            Kind::Eir => eir_entries::parse_item(&value, &self.opts.limits)
                .map(|e| Some(Row::Eir(line_no, e))),
            Kind::Policy => return policy_row(value).map(Some),
            Kind::Sh => return sh_row(line_no, &value, &self.opts).map(Some),
            Kind::PolicySubscriptions => return subscription_row(value).map(Some),
        }
        .map_err(|p| RowError::Bad(describe(&p)))
    }

    /// Checks the CSV header in `self.fields`.
    fn header(&self, line: u64) -> Result<Vec<String>, RowError> {
        let fatal = |reason: String| RowError::Fatal(ImportError::Header { line, reason });
        let cols: Vec<String> = self.fields.iter().map(|f| f.trim().to_owned()).collect();
        for (i, c) in cols.iter().enumerate() {
            if cols[..i].contains(c) {
                return Err(fatal(format!("header: column {c:?} appears twice")));
            }
        }
        match self.opts.kind {
            Kind::Slf => {
                if !cols.iter().any(|c| c == SLF_IDS_COLUMN) {
                    return Err(fatal(format!(
                        "header: an SLF file needs a {SLF_IDS_COLUMN:?} column, then one \
                         column per NF type (UDM, AUSF, ...)"
                    )));
                }
                if let Some(c) = cols.iter().find(|c| *c != SLF_IDS_COLUMN && !slf::is_nf_type(c)) {
                    return Err(fatal(format!("header: column {c:?} is not an NF type")));
                }
            }
            // `run` refuses CSV for these before reading a line.
            Kind::Policy | Kind::Sh | Kind::PolicySubscriptions => {}
            Kind::Eir => {
                if let Some(c) = cols.iter().find(|c| !EIR_COLUMNS.contains(&c.as_str())) {
                    return Err(fatal(format!(
                        "header: unknown column {c:?} (an EIR file has {})",
                        EIR_COLUMNS.join(", ")
                    )));
                }
                let has = |n: &str| cols.iter().any(|c| c == n);
                if !has("status") || !(has("imei") || (has("start") && has("end"))) {
                    return Err(fatal(
                        "header: an EIR file needs status and imei, or status, start and end"
                            .into(),
                    ));
                }
            }
        }
        Ok(cols)
    }
}

/// A policy row: `ueId` and the PolicyDataProfile, checked as the provisioning PUT checks it.
fn policy_row(mut value: Value) -> Result<Row, RowError> {
    let Some(obj) = value.as_object_mut() else {
        return Err(RowError::Bad("a policy row must be a JSON object".into()));
    };
    let ue = match obj.remove(POLICY_UE_ID) {
        Some(Value::String(s)) => s,
        Some(_) => return Err(RowError::Bad(format!("/{POLICY_UE_ID}: must be a string"))),
        None => {
            return Err(RowError::Bad(format!("/{POLICY_UE_ID}: mandatory attribute is missing")))
        }
    };
    policy_provisioning::profile_parts(&ue, &value).map_err(|p| RowError::Bad(describe(&p)))?;
    Ok(Row::Policy(ue, value))
}

/// An Sh row: the content of SOAP `CreateShProfile` as JSON, with the same checks.
fn sh_row(line: u64, v: &Value, opts: &Options) -> Result<Row, RowError> {
    let max_data = opts.max_service_data_bytes;
    let bad = |at: &str, why: String| RowError::Bad(format!("/{at}: {why}"));
    let Some(obj) = v.as_object() else {
        return Err(RowError::Bad("an Sh row must be a JSON object".into()));
    };
    for k in obj.keys() {
        if !SH_ATTRIBUTES.contains(&k.as_str()) {
            return Err(bad(k, "unknown attribute".into()));
        }
    }
    let strings = |at: &str| -> Result<Vec<String>, RowError> {
        match obj.get(at) {
            None => Ok(Vec::new()),
            Some(Value::Array(a)) => a
                .iter()
                .enumerate()
                .map(|(i, x)| {
                    x.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| bad(&format!("{at}/{i}"), "must be a string".into()))
                })
                .collect(),
            Some(_) => Err(bad(at, "must be an array of strings".into())),
        }
    };
    let mut p = ShProfile {
        public_identities: strings("publicIdentities")?,
        msisdns: strings("msisdns")?,
        ..ShProfile::default()
    };
    match obj.get("imsUserState") {
        None => return Err(bad("imsUserState", "mandatory attribute is missing".into())),
        Some(Value::String(s)) => {
            p.ims_user_state = sh_data::parse_ims_user_state(s)
                .ok_or_else(|| bad("imsUserState", sh_data::ims_user_state_refused(s)))?;
        }
        Some(_) => return Err(bad("imsUserState", "must be a string".into())),
    }
    match obj.get("scscfName") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => p.scscf_name = Some(s.clone()).filter(|s| !s.is_empty()),
        Some(_) => return Err(bad("scscfName", "must be a string".into())),
    }
    match obj.get("repositoryData") {
        None => {}
        Some(Value::Array(list)) => {
            for (i, r) in list.iter().enumerate() {
                let at = format!("repositoryData/{i}");
                let field = |k: &str| r.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
                let si = field("serviceIndication").ok_or_else(|| {
                    bad(&format!("{at}/serviceIndication"), "must be a non-empty string".into())
                })?;
                let sd = field("serviceData")
                    .ok_or_else(|| {
                        bad(&format!("{at}/serviceData"), "must be a non-empty string".into())
                    })?
                    .trim();
                let seq = match r.get("sequenceNumber") {
                    None => 0,
                    Some(n) => {
                        n.as_u64().filter(|n| *n <= u64::from(u16::MAX)).ok_or_else(|| {
                            bad(&format!("{at}/sequenceNumber"), "must be 0 to 65535".into())
                        })? as u16
                    }
                };
                sh_data::check_service_data(si, sd, max_data)
                    .map_err(|e| bad(&format!("{at}/{}", e.field), e.reason))?;
                p.repository.push(sh_data::RepositoryData {
                    service_indication: si.to_owned(),
                    sequence_number: seq,
                    service_data: sd.to_owned(),
                });
            }
        }
        Some(_) => return Err(bad("repositoryData", "must be an array".into())),
    }
    p.repository.sort_by(|a, b| a.service_indication.cmp(&b.service_indication));
    let limits = &opts.limits;
    p.check_size(limits.max_sh_identities, limits.max_sh_profile_bytes)
        .map_err(|e| bad(e.field, e.reason))?;
    p.check().map_err(|e| bad(e.field, e.reason))?;
    Ok(Row::Sh(line, p))
}

/// The attributes of an Sh row.
const SH_ATTRIBUTES: [&str; 5] =
    ["publicIdentities", "msisdns", "imsUserState", "scscfName", "repositoryData"];

/// A policy data subscription row, checked as a POST to subs-to-notify checks the body (no
/// bound on its expiry, which a POST would cap: the operator loads what it means).
fn subscription_row(mut v: Value) -> Result<Row, RowError> {
    let Some(obj) = v.as_object_mut() else {
        return Err(RowError::Bad("a subscription row must be a JSON object".into()));
    };
    let id = match obj.remove("subsId") {
        Some(Value::String(s))
            if !s.is_empty() && !s.contains('/') && !s.chars().any(char::is_control) =>
        {
            s
        }
        Some(_) => {
            return Err(RowError::Bad("/subsId: must be a non-empty string without '/'".into()))
        }
        None => return Err(RowError::Bad("/subsId: mandatory attribute is missing".into())),
    };
    let doc = match obj.remove("subscription") {
        Some(d) => d,
        None => return Err(RowError::Bad("/subscription: mandatory attribute is missing".into())),
    };
    if let Some(k) = obj.keys().next() {
        return Err(RowError::Bad(format!("/{k}: unknown attribute")));
    }
    let bytes = Bytes::from(serde_json::to_vec(&doc).map_err(|e| RowError::Bad(e.to_string()))?);
    let sub = subs_to_notify::decode(&id, bytes, doc, subs_to_notify::now_ms(), 0)
        .map_err(|p| RowError::Bad(format!("/subscription: {}", describe(&p))))?;
    Ok(Row::PolicySubscription(sub))
}

/// A CSV row as the JSON body the provisioning API takes: empty cells are absent attributes,
/// lists (`subscriberIds`, `supis`, `gpsis`) are `;`-separated.
fn csv_row_json(kind: Kind, columns: &[String], fields: &[String]) -> Value {
    let list = |cell: &str| -> Value {
        cell.split(';').map(str::trim).filter(|s| !s.is_empty()).map(Value::from).collect()
    };
    let mut obj = Map::new();
    match kind {
        Kind::Slf => {
            let mut groups = Map::new();
            for (col, cell) in columns.iter().zip(fields) {
                if col == SLF_IDS_COLUMN {
                    obj.insert(col.clone(), list(cell));
                } else if !cell.trim().is_empty() {
                    groups.insert(col.clone(), cell.trim().into());
                }
            }
            obj.insert("nfGroupIds".into(), Value::Object(groups));
        }
        Kind::Policy | Kind::Sh | Kind::PolicySubscriptions => {}
        Kind::Eir => {
            for (col, cell) in columns.iter().zip(fields) {
                let cell = cell.trim();
                if cell.is_empty() {
                    continue;
                }
                let v = if col == "supis" || col == "gpsis" { list(cell) } else { cell.into() };
                obj.insert(col.clone(), v);
            }
        }
    }
    Value::Object(obj)
}

/// Splits one CSV record (RFC 4180 on one line): fields separated by `,`; a field in double
/// quotes may hold `,` and `""` (a quote). Line breaks inside quotes are not supported: no
/// imported value may hold one.
fn csv_fields(line: &str, out: &mut Vec<String>) -> Result<(), String> {
    out.clear();
    let mut chars = line.chars().peekable();
    loop {
        let mut field = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    None => return Err("a quoted field is not closed on its line".into()),
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        field.push('"');
                    }
                    Some('"') => break,
                    Some(c) => field.push(c),
                }
            }
            match chars.next() {
                None => {
                    out.push(field);
                    return Ok(());
                }
                Some(',') => out.push(field),
                Some(c) => return Err(format!("{c:?} after a closing quote")),
            }
        } else {
            loop {
                match chars.next() {
                    None => {
                        out.push(field);
                        return Ok(());
                    }
                    Some(',') => break,
                    Some('"') => return Err("a quote inside an unquoted field".into()),
                    Some(c) => field.push(c),
                }
            }
            out.push(field);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(line: &str) -> Result<Vec<String>, String> {
        let mut out = Vec::new();
        csv_fields(line, &mut out).map(|()| out)
    }

    #[test]
    fn csv_records() {
        assert_eq!(fields("a,b,,c").unwrap(), ["a", "b", "", "c"]);
        assert_eq!(fields("").unwrap(), [""]);
        assert_eq!(fields("a,").unwrap(), ["a", ""]);
        assert_eq!(fields(r#""x,y","say ""hi""",z"#).unwrap(), ["x,y", r#"say "hi""#, "z"]);
        assert_eq!(fields(r#""",a"#).unwrap(), ["", "a"]);
        assert!(fields(r#""open,a"#).is_err());
        assert!(fields(r#""a"b,c"#).is_err());
        assert!(fields(r#"a"b,c"#).is_err());
    }

    fn reader(kind: Kind, format: Format) -> RowReader {
        RowReader::new(Options::new(kind, format))
    }

    fn bad(r: Result<Option<Row>, RowError>) -> String {
        match r {
            Err(RowError::Bad(why)) => why,
            Err(RowError::Fatal(e)) => panic!("fatal: {e}"),
            Ok(_) => panic!("accepted"),
        }
    }

    #[test]
    fn slf_csv_rows() {
        let mut r = reader(Kind::Slf, Format::Csv);
        assert!(r.row(1, b"\xEF\xBB\xBFsubscriberIds,UDM,PCF\r\n").unwrap().is_none());
        assert!(r.row(2, b"# a comment\n").unwrap().is_none());
        assert!(r.row(3, b"\n").unwrap().is_none());
        let Some(Row::Slf(e)) =
            r.row(4, b"imsi-001010000000001; msisdn-33600000001,udm-1,\n").unwrap()
        else {
            panic!("a row")
        };
        assert_eq!(e.subscriber_ids, ["imsi-001010000000001", "msisdn-33600000001"]);
        assert_eq!(e.groups.len(), 1);
        assert!(bad(r.row(5, b"imsi-001010000000001,udm-1\n")).contains("2 fields"));
        assert!(bad(r.row(6, b"imsi-12,udm-1,pcf\n")).contains("/subscriberIds/0"));
        assert!(bad(r.row(7, b"imsi-001010000000001,,\n")).contains("/nfGroupIds"));
        assert!(bad(r.row(8, b"\xff\n")).contains("UTF-8"));

        for header in ["UDM,PCF", "subscriberIds,udm", "subscriberIds,UDM,UDM"] {
            let mut r = reader(Kind::Slf, Format::Csv);
            assert!(matches!(r.row(1, header.as_bytes()), Err(RowError::Fatal(_))), "{header}");
        }
    }

    #[test]
    fn eir_rows() {
        let mut r = reader(Kind::Eir, Format::Csv);
        assert!(r.row(1, b"imei,start,end,status,supis\n").unwrap().is_none());
        let Some(Row::Eir(2, EirItem::Imei(e))) =
            r.row(2, b"352099001761481,,,BLACKLISTED,imsi-001010000000001\n").unwrap()
        else {
            panic!("an IMEI")
        };
        assert_eq!(e.binding.supis, ["imsi-001010000000001"]);
        let Some(Row::Eir(3, EirItem::Range(g))) =
            r.row(3, b",35209900000000,35209900999999,GREYLISTED,\n").unwrap()
        else {
            panic!("a range")
        };
        assert_eq!(g.end, 35209900999999);
        assert!(bad(r.row(4, b"352099001761482,,,BLACKLISTED,\n")).contains("check digit"));
        let mut r = reader(Kind::Eir, Format::Csv);
        assert!(matches!(r.row(1, b"imei,colour\n"), Err(RowError::Fatal(_))));
        let mut r = reader(Kind::Eir, Format::Csv);
        assert!(matches!(r.row(1, b"imei,end\n"), Err(RowError::Fatal(_))));

        let mut r = reader(Kind::Eir, Format::Jsonl);
        let row = r.row(1, br#"{"imei":"35209900176148","status":"WHITELISTED"}"#).unwrap();
        assert!(matches!(row, Some(Row::Eir(1, EirItem::Imei(_)))));
        assert!(bad(r.row(2, b"{\"imei\":")).contains("JSON"));
        assert!(bad(r.row(3, br#"{"imei":"35209900176148"}"#)).contains("/status"));
    }

    #[test]
    fn policy_rows() {
        let mut r = reader(Kind::Policy, Format::Jsonl);
        let row = r
            .row(1, br#"{"ueId":"imsi-001010000000001","amData":{"subscCats":["gold"]}}"#)
            .unwrap();
        let Some(Row::Policy(ue, p)) = row else { panic!("a policy row") };
        assert_eq!(ue, "imsi-001010000000001");
        assert_eq!(p, serde_json::json!({"amData": {"subscCats": ["gold"]}}));
        assert!(bad(r.row(2, br#"{"amData":{"subscCats":["gold"]}}"#)).contains("/ueId"));
        assert!(bad(r.row(3, br#"{"ueId":"imsi-12","amData":{}}"#)).contains("ueId"));
        assert!(bad(r.row(4, br#"{"ueId":"imsi-001010000000001"}"#)).contains("at least one"));
        let why = bad(r.row(5, br#"{"ueId":"imsi-001010000000001","smData":{},"x":1}"#));
        assert!(why.contains("/smData/smPolicySnssaiData") && why.contains("/x"), "{why}");
        assert!(bad(r.row(6, b"[1]")).contains("JSON object"));
    }
}
