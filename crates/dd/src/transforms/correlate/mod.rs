//! The correlate transform: a consumer of MAIN that joins the copies of one transaction, session
//! or subscriber into an xDR ([`xdr::Xdr`]).
//!
//! [`Correlator`] is fed copies in MAIN order and is pure (no I/O, no clock of its own): time is
//! the copies' timestamps (event time), so a replay yields the same records; [`Correlator::
//! advance`] moves it forward when traffic stops. The consumer around it (pipeline.rs) reads MAIN
//! from its committed offset, pushes each copy with its offset, hands the closed xDRs to the store
//! (`sinks::xdr_store`) and, once they are committed, commits [`Correlator::resume_offset`]: the
//! first offset of a record still open, so a restarted correlation re-reads what it had not
//! finished. The records closed again by that replay carry the same ids (derived from their
//! first message), and the store keeps one of each.
//!
//! How messages join:
//! - a request and its answer: same NF instance and transaction id;
//! - an egress request (the NF calling another) joins the ingress transaction that NF instance
//!   is serving, unanswered yet, for the same SUPI or session id (the UDR read of an SM policy
//!   create); then its answer as above;
//! - with key `session`, every transaction with the same session id; a create whose session id
//!   first appears in its answer (the association id the PCF assigned) joins from then on; the
//!   answer to a terminating operation (delete, CCR-T, STR) closes the record;
//! - with key `supi`, every transaction with the same SUPI;
//! - a record with no new message for the window closes; an unanswered request in it is a
//!   timeout. Beyond `max_open` records the one with the oldest activity closes first.

pub mod config;
pub mod xdr;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bytes::Bytes;
use dd_client::envelope::{Copy, Protocol, TriggerPoint};
use rustc_hash::{FxHashMap, FxHashSet};
use sbi::InvalidParam;

pub use config::{CorrelationConfig, CorrelationKey};
pub use xdr::{CloseReason, Outcome, Procedure, Xdr};

/// What a correlation has done since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CorrelatorStats {
    /// Copies pushed.
    pub copies: u64,
    /// Copies outside the configured NF types and services.
    pub ignored: u64,
    /// Records of a batch that were not envelopes.
    pub undecodable: u64,
    /// Answers whose request was never seen (or whose record had closed).
    pub unmatched_responses: u64,
    /// A request seen again with the same instance and transaction.
    pub duplicate_requests: u64,
    /// xDRs closed, by reason.
    pub completed: u64,
    pub terminated: u64,
    pub expired: u64,
    pub evicted: u64,
    pub max_procedures: u64,
    pub flushed: u64,
    /// Records open now.
    pub open: u64,
}

/// The correlation of one configuration.
pub struct Correlator {
    name: Arc<str>,
    config: CorrelationConfig,
    window_ns: u64,
    /// Empty: every NF type. A handful of names, compared ignoring case without allocating.
    nf_types: Vec<String>,
    services: Option<FxHashSet<String>>,
    instances: FxHashMap<Box<str>, u32>,
    instance_names: Vec<Arc<str>>,
    records: FxHashMap<u64, Record>,
    next_record: u64,
    /// Unanswered requests: (instance, transaction) -> record.
    by_txn: FxHashMap<TxnKey, u64>,
    by_session: FxHashMap<Box<str>, u64>,
    by_supi: FxHashMap<Box<str>, u64>,
    /// Ingress transactions being served, per instance, by SUPI and by session id: the egress
    /// requests of that instance for the same subscriber join the latest.
    serving: Serving,
    deadlines: BTreeSet<(u64, u64)>,
    /// First offsets of the open records (a multiset).
    first_offsets: BTreeMap<u64, u32>,
    next_offset: u64,
    watermark: u64,
    stats: CorrelatorStats,
    closed: Vec<Xdr>,
}

type TxnKey = (u32, u64);

/// Per NF instance, per SUPI or session id: the (transaction, record) of its ingress requests
/// not answered yet, latest last.
type Serving = FxHashMap<u32, FxHashMap<Box<str>, Vec<(u64, u64)>>>;

struct Record {
    id: String,
    first_offset: u64,
    start: u64,
    end: u64,
    deadline: u64,
    supi: Option<String>,
    gpsi: Option<String>,
    session_id: Option<String>,
    nf_types: Vec<String>,
    nf_instances: Vec<String>,
    procedures: Vec<Proc>,
    pending: u32,
    /// Serving entries this record holds: (instance, SUPI or session id, transaction).
    serving: Vec<(u32, Box<str>, u64)>,
    message_count: u32,
    terminated: bool,
}

struct Proc {
    p: Procedure,
    txn: TxnKey,
    diameter: bool,
}

impl Correlator {
    /// A correlation named `name` (the xDRs' `correlation`), or the wrong fields of `config`.
    pub fn new(name: &str, config: &CorrelationConfig) -> Result<Correlator, Vec<InvalidParam>> {
        config.validate()?;
        Ok(Correlator {
            name: name.into(),
            window_ns: config.window_secs * 1_000_000_000,
            nf_types: config.nf_types.clone(),
            services: (!config.services.is_empty())
                .then(|| config.services.iter().cloned().collect()),
            config: config.clone(),
            instances: FxHashMap::default(),
            instance_names: Vec::new(),
            records: FxHashMap::default(),
            next_record: 0,
            by_txn: FxHashMap::default(),
            by_session: FxHashMap::default(),
            by_supi: FxHashMap::default(),
            serving: FxHashMap::default(),
            deadlines: BTreeSet::new(),
            first_offsets: BTreeMap::new(),
            next_offset: 0,
            watermark: 0,
            stats: CorrelatorStats::default(),
            closed: Vec::new(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn stats(&self) -> CorrelatorStats {
        CorrelatorStats { open: self.records.len() as u64, ..self.stats }
    }

    /// The offset a restarted correlation re-reads MAIN from: the first message of the oldest
    /// open record, or the one after the last copy pushed.
    pub fn resume_offset(&self) -> u64 {
        self.first_offsets.keys().next().copied().unwrap_or(self.next_offset)
    }

    /// The xDRs closed since the last call.
    pub fn drain(&mut self) -> Vec<Xdr> {
        std::mem::take(&mut self.closed)
    }

    /// Pushes a batch of MAIN records (unframed envelopes) whose first is at `first_offset`; a
    /// record that is not an envelope is counted and skipped.
    pub fn push_batch(&mut self, first_offset: u64, records: &[Bytes]) {
        for (i, r) in records.iter().enumerate() {
            match Copy::decode(r.clone()) {
                Ok(copy) => self.push(first_offset + i as u64, &copy),
                Err(_) => {
                    self.stats.undecodable += 1;
                    self.next_offset = self.next_offset.max(first_offset + i as u64 + 1);
                }
            }
        }
    }

    /// Pushes one copy, read at `offset` of MAIN.
    pub fn push(&mut self, offset: u64, copy: &Copy) {
        self.stats.copies += 1;
        self.next_offset = self.next_offset.max(offset + 1);
        if !self.wanted(copy) {
            self.stats.ignored += 1;
            return;
        }
        // Time first: a record whose window ended before this copy is closed (and its
        // unanswered request timed out) before the copy could join it.
        self.watermark = self.watermark.max(copy.timestamp_ns);
        self.expire();
        let inst = self.intern(copy.nf_instance());
        let key = (inst, copy.transaction);
        if copy.trigger.is_request() {
            self.request(offset, copy, key);
        } else {
            self.response(copy, key);
        }
    }

    /// Moves time to `now_ns` (never back) and closes the records whose window has passed; the
    /// consumer calls it when MAIN has nothing new, so records close when traffic stops.
    pub fn advance(&mut self, now_ns: u64) {
        self.watermark = self.watermark.max(now_ns);
        self.expire();
    }

    /// Closes every open record (`flushed`): for a correlation being removed. A correlation that
    /// will resume does not flush: it re-reads from [`Correlator::resume_offset`].
    pub fn flush(&mut self) {
        let open: Vec<u64> = self.deadlines.iter().map(|&(_, r)| r).collect();
        for r in open {
            self.close(r, CloseReason::Flushed);
        }
    }

    fn wanted(&self, c: &Copy) -> bool {
        let nf_ok = self.nf_types.is_empty()
            || self.nf_types.iter().any(|t| t.eq_ignore_ascii_case(c.nf_type()));
        nf_ok && self.services.as_ref().is_none_or(|s| s.contains(c.service()))
    }

    fn intern(&mut self, instance: &str) -> u32 {
        if let Some(&i) = self.instances.get(instance) {
            return i;
        }
        let i = self.instance_names.len() as u32;
        self.instances.insert(instance.into(), i);
        self.instance_names.push(instance.into());
        i
    }

    fn request(&mut self, offset: u64, c: &Copy, key: TxnKey) {
        if let Some(&r) = self.by_txn.get(&key) {
            self.stats.duplicate_requests += 1;
            let rec = self.records.get_mut(&r).expect("indexed records are open");
            rec.message_count += 1;
            rec.end = rec.end.max(c.timestamp_ns);
            self.touch(r);
            return;
        }
        let mut r = self.find_record(c, key.0);
        if let Some(full) =
            r.filter(|r| self.records[r].procedures.len() >= self.config.max_procedures)
        {
            self.close(full, CloseReason::MaxProcedures);
            r = self.find_record(c, key.0);
        }
        let r = match r {
            Some(r) => r,
            None => self.open(offset, c),
        };
        let diameter = c.protocol == Protocol::Diameter;
        let rec = self.records.get_mut(&r).expect("found or opened");
        rec.procedures.push(Proc {
            p: Procedure {
                nf_type: c.nf_type().to_owned(),
                nf_instance: c.nf_instance().to_owned(),
                service: c.service().to_owned(),
                operation: c.operation().to_owned(),
                trigger_point: c.trigger.as_str().to_owned(),
                request_time: c.timestamp_ns,
                response_time: None,
                status: None,
                latency_us: None,
            },
            txn: key,
            diameter,
        });
        rec.pending += 1;
        self.by_txn.insert(key, r);
        if c.trigger == TriggerPoint::IngressRequest {
            for id in [c.supi(), c.session_id()] {
                if id.is_empty() {
                    continue;
                }
                self.serving
                    .entry(key.0)
                    .or_default()
                    .entry(id.into())
                    .or_default()
                    .push((key.1, r));
                let rec = self.records.get_mut(&r).expect("open");
                rec.serving.push((key.0, id.into(), key.1));
            }
        }
        self.joined(r, c);
        if self.records.len() > self.config.max_open {
            let oldest = self.deadlines.iter().map(|&(_, o)| o).find(|&o| o != r);
            if let Some(o) = oldest {
                self.close(o, CloseReason::Evicted);
            }
        }
    }

    /// The open record a request joins, if any.
    fn find_record(&self, c: &Copy, inst: u32) -> Option<u64> {
        if c.trigger == TriggerPoint::EgressRequest {
            let serving = self.serving.get(&inst);
            for id in [c.supi(), c.session_id()] {
                let latest = serving.and_then(|s| s.get(id)).and_then(|v| v.last());
                if let (false, Some(&(_, r))) = (id.is_empty(), latest) {
                    return Some(r);
                }
            }
        }
        match self.config.key {
            CorrelationKey::Session if !c.session_id().is_empty() => {
                self.by_session.get(c.session_id()).copied()
            }
            CorrelationKey::Supi if !c.supi().is_empty() => {
                self.by_supi.get(supi_key(c.supi())).copied()
            }
            _ => None,
        }
    }

    fn open(&mut self, offset: u64, c: &Copy) -> u64 {
        let r = self.next_record;
        self.next_record += 1;
        let seed = [
            self.name.as_bytes(),
            c.nf_instance().as_bytes(),
            &c.transaction.to_be_bytes(),
            &c.timestamp_ns.to_be_bytes(),
            &[c.trigger as u8],
        ];
        let id = format!("{:016x}{:016x}", hash_parts(1, &seed), hash_parts(2, &seed));
        let deadline = c.timestamp_ns.saturating_add(self.window_ns);
        self.records.insert(
            r,
            Record {
                id,
                first_offset: offset,
                start: c.timestamp_ns,
                end: c.timestamp_ns,
                deadline,
                supi: None,
                gpsi: None,
                session_id: None,
                nf_types: Vec::new(),
                nf_instances: Vec::new(),
                procedures: Vec::new(),
                pending: 0,
                serving: Vec::new(),
                message_count: 0,
                terminated: false,
            },
        );
        self.deadlines.insert((deadline, r));
        *self.first_offsets.entry(offset).or_default() += 1;
        r
    }

    fn response(&mut self, c: &Copy, key: TxnKey) {
        let Some(r) = self.by_txn.remove(&key) else {
            self.stats.unmatched_responses += 1;
            return;
        };
        let terminating = self.config.is_terminating(c.operation());
        let rec = self.records.get_mut(&r).expect("indexed records are open");
        if let Some(p) =
            rec.procedures.iter_mut().rev().find(|p| p.txn == key && p.p.response_time.is_none())
        {
            p.p.response_time = Some(c.timestamp_ns);
            p.p.status = Some(c.status);
            p.p.latency_us = Some(c.timestamp_ns.saturating_sub(p.p.request_time) / 1_000);
            // The answer names the operation when the request did not (a Diameter answer's
            // CCR-I is known from its CC-Request-Type only on the request side, and vice versa).
            if p.p.operation.is_empty() {
                p.p.operation = c.operation().to_owned();
            }
            let op = p.p.operation.clone();
            rec.pending -= 1;
            if terminating || self.config.is_terminating(&op) {
                rec.terminated = true;
            }
        }
        if c.trigger == TriggerPoint::IngressResponse {
            self.stop_serving(r, key);
        }
        self.joined(r, c);
        let rec = &self.records[&r];
        if rec.pending > 0 {
            return;
        }
        match self.kind_of(rec) {
            CorrelationKey::Transaction => self.close(r, CloseReason::Completed),
            CorrelationKey::Session if rec.terminated => self.close(r, CloseReason::Terminated),
            _ => {}
        }
    }

    /// What groups a record now: a session or a SUPI once it has one (with that key), else its
    /// transaction.
    fn kind_of(&self, rec: &Record) -> CorrelationKey {
        match self.config.key {
            CorrelationKey::Session if rec.session_id.is_some() => CorrelationKey::Session,
            CorrelationKey::Supi if rec.supi.is_some() => CorrelationKey::Supi,
            _ => CorrelationKey::Transaction,
        }
    }

    fn stop_serving(&mut self, r: u64, key: TxnKey) {
        let rec = self.records.get_mut(&r).expect("open");
        let (done, kept): (Vec<_>, Vec<_>) =
            rec.serving.drain(..).partition(|(i, _, t)| (*i, *t) == key);
        rec.serving = kept;
        for (inst, id, txn) in done {
            remove_serving(&mut self.serving, inst, &id, txn);
        }
    }

    /// Book-keeping common to every message that joined record `r`.
    fn joined(&mut self, r: u64, c: &Copy) {
        let key = self.config.key;
        let rec = self.records.get_mut(&r).expect("open");
        rec.message_count += 1;
        rec.start = rec.start.min(c.timestamp_ns);
        rec.end = rec.end.max(c.timestamp_ns);
        if !rec.nf_instances.iter().any(|i| i == c.nf_instance()) {
            rec.nf_instances.push(c.nf_instance().to_owned());
        }
        if !rec.nf_types.iter().any(|t| t == c.nf_type()) {
            rec.nf_types.push(c.nf_type().to_owned());
        }
        if rec.gpsi.is_none() && !c.gpsi().is_empty() {
            rec.gpsi = Some(c.gpsi().to_owned());
        }
        if rec.supi.is_none() && !c.supi().is_empty() {
            rec.supi = Some(c.supi().to_owned());
            if key == CorrelationKey::Supi {
                self.by_supi.entry(supi_key(c.supi()).into()).or_insert(r);
            }
        }
        if rec.session_id.is_none() && !c.session_id().is_empty() {
            rec.session_id = Some(c.session_id().to_owned());
            if key == CorrelationKey::Session {
                self.by_session.entry(c.session_id().into()).or_insert(r);
            }
        }
        self.touch(r);
    }

    fn touch(&mut self, r: u64) {
        let rec = self.records.get_mut(&r).expect("open");
        let deadline = rec.end.saturating_add(self.window_ns).max(rec.deadline);
        if deadline != rec.deadline {
            self.deadlines.remove(&(rec.deadline, r));
            rec.deadline = deadline;
            self.deadlines.insert((deadline, r));
        }
    }

    fn expire(&mut self) {
        while let Some(&(deadline, r)) = self.deadlines.first() {
            if deadline > self.watermark {
                break;
            }
            self.close(r, CloseReason::Expired);
        }
    }

    fn close(&mut self, r: u64, reason: CloseReason) {
        let Some(rec) = self.records.remove(&r) else { return };
        self.deadlines.remove(&(rec.deadline, r));
        if let Some(n) = self.first_offsets.get_mut(&rec.first_offset) {
            *n -= 1;
            if *n == 0 {
                self.first_offsets.remove(&rec.first_offset);
            }
        }
        for p in rec.procedures.iter().filter(|p| p.p.response_time.is_none()) {
            if self.by_txn.get(&p.txn) == Some(&r) {
                self.by_txn.remove(&p.txn);
            }
        }
        for (inst, id, txn) in &rec.serving {
            remove_serving(&mut self.serving, *inst, id, *txn);
        }
        if let Some(s) = &rec.session_id {
            if self.by_session.get(s.as_str()) == Some(&r) {
                self.by_session.remove(s.as_str());
            }
        }
        if let Some(s) = &rec.supi {
            if self.by_supi.get(supi_key(s)) == Some(&r) {
                self.by_supi.remove(supi_key(s));
            }
        }
        let counter = match reason {
            CloseReason::Completed => &mut self.stats.completed,
            CloseReason::Terminated => &mut self.stats.terminated,
            CloseReason::Expired => &mut self.stats.expired,
            CloseReason::Evicted => &mut self.stats.evicted,
            CloseReason::MaxProcedures => &mut self.stats.max_procedures,
            CloseReason::Flushed => &mut self.stats.flushed,
        };
        *counter += 1;
        let key = self.kind_of(&rec);
        let (mut outcome, mut outcome_status, mut outcome_operation) =
            (Outcome::Success, None, None);
        for p in &rec.procedures {
            if let Some(status) = p.p.status.filter(|s| xdr::is_failure(p.diameter, *s)) {
                (outcome, outcome_status) = (Outcome::Failure, Some(status));
                outcome_operation = Some(p.p.operation.clone());
                break;
            }
            if p.p.response_time.is_none() {
                outcome = match reason {
                    CloseReason::Expired => Outcome::Timeout,
                    _ => Outcome::Incomplete,
                };
                outcome_operation = Some(p.p.operation.clone());
                break;
            }
        }
        self.closed.push(Xdr {
            id: rec.id,
            correlation: self.name.to_string(),
            key,
            start: rec.start,
            end: rec.end,
            duration_us: (rec.end - rec.start) / 1_000,
            supi: rec.supi,
            gpsi: rec.gpsi,
            session_id: rec.session_id,
            nf_types: rec.nf_types,
            nf_instances: rec.nf_instances,
            procedures: rec.procedures.into_iter().map(|p| p.p).collect(),
            outcome,
            outcome_status,
            outcome_operation,
            message_count: rec.message_count,
            close_reason: reason,
        });
    }
}

/// A subscriber as the SBI (`imsi-001010000000001`) and Diameter (`001010000000001`) copies
/// carry it: one key.
fn supi_key(supi: &str) -> &str {
    supi.strip_prefix("imsi-").unwrap_or(supi)
}

fn remove_serving(serving: &mut Serving, inst: u32, id: &str, txn: u64) {
    let Some(by_id) = serving.get_mut(&inst) else { return };
    if let Some(list) = by_id.get_mut(id) {
        list.retain(|(t, _)| *t != txn);
        if list.is_empty() {
            by_id.remove(id);
        }
    }
    if by_id.is_empty() {
        serving.remove(&inst);
    }
}

/// FNV-1a over the parts (each followed by its length, so no two splits of the same bytes hash
/// alike), finished with MurmurHash3's mixer.
fn hash_parts(seed: u64, parts: &[&[u8]]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut eat = |b: u8| {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    };
    for part in parts {
        part.iter().for_each(|&b| eat(b));
        (part.len() as u32).to_be_bytes().into_iter().for_each(&mut eat);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}
