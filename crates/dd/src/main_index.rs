//! MAIN as an index of the NF topics (`[dd.main] store = "index"`, the embedded mode's default).
//!
//! The reference copies each message twice, into its NF topic and into MAIN. On one host that
//! second copy is the Data Director's largest cost (the kernel copying every envelope into the
//! page cache again), so in the embedded mode MAIN's partitions hold, for each copy, a small
//! index record naming where the envelope already is: its NF topic and its offset there.
//! Aggregation writes those records ([`IndexRecord`]); consumers of MAIN read MAIN through
//! [`IndexedMain`], which resolves each record to the envelope in its NF topic (from the topic's
//! tail cache while the consumer keeps up, from its segments when it lags) and gives back the
//! envelopes under MAIN's own offsets, so feeds and correlations see MAIN as before.
//!
//! What this asks of the rest:
//! - An index record is written only for a copy below its NF topic's synced end, so after any
//!   crash MAIN never points past what the NF topic kept (with the NF topics' default `fsync =
//!   "always"` that is every record aggregation can read).
//! - An NF topic keeps its records at least as long as MAIN keeps the records that point at
//!   them: [`crate::log_topics::partitioned`] raises the NF topics' retention to MAIN's, and
//!   [`check_retention`] refuses a configuration that asks for less.
//! - A record whose copy is gone all the same (an operator deleted an NF topic, a size bound
//!   cut it) is skipped and counted (`dd_main_unresolved_total`), never an error: the consumer
//!   goes on with the next.
//!
//! The Kafka mode keeps full copies in MAIN: there MAIN is a topic external consumers read.

use std::hash::Hasher;
use std::io;
use std::sync::{Arc, OnceLock};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use serde::Deserialize;

use crate::log::{LogConfig, MAIN};
use crate::topics::{Batch, BoxFuture, TopicLog, Topics, NF_TOPICS};

/// What MAIN's partitions hold in the embedded mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum MainStore {
    /// An index record per copy (its NF topic and offset): each copy is written to disk once.
    #[default]
    Index,
    /// A second copy of each envelope, as the reference does: twice the bytes written, and MAIN
    /// readable without the NF topics.
    Copy,
}

impl MainStore {
    pub fn as_str(self) -> &'static str {
        match self {
            MainStore::Index => "index",
            MainStore::Copy => "copy",
        }
    }
}

/// `[dd.main]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct MainConfig {
    /// `index` (the default) or `copy`. The Kafka mode always copies.
    #[serde(default)]
    pub store: MainStore,
}

/// The version byte of an index record: a MAIN partition written by another layout is
/// recognised rather than misread.
const VERSION: u8 = 1;

/// The bytes of an index record: version, NF topic, offset, envelope length, envelope check.
pub const INDEX_RECORD_BYTES: usize = 1 + 1 + 8 + 4 + 4;

/// The envelope bytes [`IndexRecord::check_of`] hashes: the copy envelope's fixed fields
/// (version, trigger, protocol, timestamp, sequence, transaction...) are at its start.
const CHECKED_BYTES: usize = 64;

/// One copy in MAIN: where its envelope is. The envelope's length and a hash of its first bytes
/// are kept so that a record which is not the one indexed (an NF topic deleted and started
/// again from offset 0) is recognised and skipped rather than delivered in its place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexRecord {
    /// Index of the NF topic in [`NF_TOPICS`].
    pub topic: u8,
    pub offset: u64,
    pub len: u32,
    pub check: u32,
}

impl IndexRecord {
    /// The record of `envelope` at `offset` of NF topic `topic`.
    pub fn of(topic: usize, offset: u64, envelope: &[u8]) -> IndexRecord {
        IndexRecord {
            topic: topic as u8,
            offset,
            len: envelope.len() as u32,
            check: Self::check_of(envelope),
        }
    }

    fn check_of(envelope: &[u8]) -> u32 {
        let mut h = rustc_hash::FxHasher::default();
        h.write(&envelope[..envelope.len().min(CHECKED_BYTES)]);
        h.finish() as u32
    }

    /// Whether `envelope` is the one this record was made for.
    pub fn matches(&self, envelope: &[u8]) -> bool {
        envelope.len() == self.len as usize && Self::check_of(envelope) == self.check
    }

    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u8(VERSION);
        out.put_u8(self.topic);
        out.put_u64(self.offset);
        out.put_u32(self.len);
        out.put_u32(self.check);
    }

    /// The records of NF topic `topic`'s envelopes from offset `first` on, each a slice of one
    /// buffer.
    pub fn encode_run(topic: usize, first: u64, envelopes: &[Bytes]) -> Vec<Bytes> {
        let n = envelopes.len();
        let mut buf = BytesMut::with_capacity(n * INDEX_RECORD_BYTES);
        for (offset, e) in (first..).zip(envelopes) {
            IndexRecord::of(topic, offset, e).encode(&mut buf);
        }
        let buf = buf.freeze();
        (0..n).map(|i| buf.slice(i * INDEX_RECORD_BYTES..(i + 1) * INDEX_RECORD_BYTES)).collect()
    }

    pub fn decode(mut b: &[u8]) -> Option<IndexRecord> {
        if b.len() != INDEX_RECORD_BYTES || b[0] != VERSION || b[1] as usize >= NF_TOPICS.len() {
            return None;
        }
        b.advance(1);
        Some(IndexRecord {
            topic: b.get_u8(),
            offset: b.get_u64(),
            len: b.get_u32(),
            check: b.get_u32(),
        })
    }
}

/// Why a configuration cannot keep MAIN's index valid: an NF topic set to keep its copies for
/// less time, or fewer bytes, than MAIN keeps the records pointing at them. Only the values an
/// operator wrote are checked: the defaults are raised to MAIN's by
/// [`crate::log_topics::partitioned`].
pub fn check_retention(log: &LogConfig) -> Result<(), String> {
    let main = log.topic(MAIN);
    let main_age = main.retention_age.map_or(0, |a| a.as_secs());
    let main_bytes = main.retention_bytes;
    let mut bad = Vec::new();
    let mut check = |place: String, secs: Option<u64>, mib: Option<u64>| {
        if let Some(secs) = secs {
            if !covers_age(secs, main_age) {
                bad.push(format!(
                    "{place} retention_secs = {secs} is shorter than MAIN's ({main_age}; 0 is \
                     forever): with [dd.main] store = \"index\" an NF topic keeps its copies at \
                     least as long as MAIN"
                ));
            }
        }
        if let (Some(mib), Some(min)) = (mib, main_bytes) {
            if (mib << 20) < min {
                bad.push(format!(
                    "{place} retention_mib = {mib} is less than MAIN's ({} MiB): with [dd.main] \
                     store = \"index\" an NF topic keeps at least as much as MAIN",
                    min >> 20
                ));
            }
        }
    };
    check("[dd.log]".into(), log.retention_secs, log.retention_mib);
    for t in NF_TOPICS {
        if let Some(o) = log.topics.get(t) {
            check(format!("[dd.log.topics.{t}]"), o.retention_secs, o.retention_mib);
        }
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(bad.join("; "))
    }
}

/// Whether keeping records `secs` (0: forever) covers keeping them `main_secs` (0: forever).
pub(crate) fn covers_age(secs: u64, main_secs: u64) -> bool {
    secs == 0 || (main_secs != 0 && secs >= main_secs)
}

/// Refuses MAIN partitions written under the other `store`: read as copies, index records would
/// reach the feeds as 18-byte garbage; read as an index, every copy would be skipped. Their last
/// record tells (an envelope is never a well-formed 18-byte index record).
pub async fn check_partitions(main: &[Arc<dyn TopicLog>], store: MainStore) -> Result<(), String> {
    for p in main {
        let end = p.end_offset();
        if end <= p.start_offset() {
            continue;
        }
        let last = p.read(end - 1, 1 << 20, 1).await.map_err(|e| format!("{}: {e}", p.name()))?;
        let Some(r) = last.records.first() else { continue };
        let holds =
            if IndexRecord::decode(r).is_some() { MainStore::Index } else { MainStore::Copy };
        if holds != store {
            return Err(format!(
                "[dd.main] store = \"{}\", but MAIN partition {} holds {} records: to change \
                 `store`, stop the Data Director and delete the MAIN-* directories of its log \
                 (feeds then start again at their `start`)",
                store.as_str(),
                p.name(),
                holds.as_str()
            ));
        }
    }
    Ok(())
}

/// A MAIN partition of index records, read as the envelopes they point at. Offsets, commits
/// and waits are the partition's own; only [`TopicLog::read`] differs.
pub struct IndexedMain {
    index: Arc<dyn TopicLog>,
    topics: Arc<dyn Topics>,
    nf: [OnceLock<Arc<dyn TopicLog>>; NF_TOPICS.len()],
}

impl IndexedMain {
    pub fn new(index: Arc<dyn TopicLog>, topics: Arc<dyn Topics>) -> IndexedMain {
        IndexedMain { index, topics, nf: Default::default() }
    }

    fn nf(&self, i: usize) -> io::Result<&Arc<dyn TopicLog>> {
        if let Some(t) = self.nf[i].get() {
            return Ok(t);
        }
        let t = self.topics.topic(NF_TOPICS[i])?;
        Ok(self.nf[i].get_or_init(|| t))
    }

    /// Resolves the index records read from `first` on. The batch handed back is one run of
    /// consecutive MAIN offsets ending at `next` (consumers number the records from
    /// `next - records.len()`): records that cannot be resolved are skipped and counted only
    /// before the first one that can; one met after it ends the batch, to be skipped by the
    /// next read.
    async fn resolve(
        &self,
        first: u64,
        index: Vec<Bytes>,
        max_bytes: usize,
        skipped: u64,
    ) -> io::Result<Batch> {
        let entries: Vec<Option<IndexRecord>> =
            index.iter().map(|r| IndexRecord::decode(r)).collect();
        let mut out = Batch { records: Vec::new(), next: first, skipped, unresolved: 0 };
        let mut bytes = 0usize;
        let mut i = 0;
        while i < entries.len() {
            if !out.records.is_empty() && bytes >= max_bytes {
                break;
            }
            let Some(e) = entries[i] else {
                if !out.records.is_empty() {
                    break;
                }
                out.unresolved += 1;
                i += 1;
                out.next += 1;
                continue;
            };
            // The run of records that follow in the same NF topic: one read resolves them all.
            let mut run = 1;
            while i + run < entries.len()
                && entries[i + run]
                    .is_some_and(|n| n.topic == e.topic && n.offset == e.offset + run as u64)
            {
                run += 1;
            }
            let got = self
                .read_run(e.topic as usize, e.offset, run, max_bytes.saturating_sub(bytes))
                .await?;
            // `got[k]` is the envelope at `e.offset + k` when the NF topic still has it.
            let mut k = 0;
            let mut stop = false;
            while k < run {
                let entry = entries[i + k].expect("a run holds decoded records");
                match got.get(k).and_then(|r| r.as_ref()) {
                    Some(r) if entry.matches(r) => {
                        bytes += r.len();
                        out.records.push(r.clone());
                        out.next += 1;
                    }
                    None if k >= got.len() && !out.records.is_empty() => {
                        // The byte budget ended the read: the rest comes next time.
                        stop = true;
                        break;
                    }
                    _ => {
                        if !out.records.is_empty() {
                            stop = true;
                            break;
                        }
                        out.unresolved += 1;
                        out.next += 1;
                    }
                }
                k += 1;
            }
            if stop {
                break;
            }
            i += run;
        }
        Ok(out)
    }

    /// Envelopes `offset..offset + n` of NF topic `topic`, each `None` when the topic no longer
    /// (or never) had it; fewer than `n` when `max_bytes` ended the read.
    async fn read_run(
        &self,
        topic: usize,
        offset: u64,
        n: usize,
        max_bytes: usize,
    ) -> io::Result<Vec<Option<Bytes>>> {
        let nf = self.nf(topic)?;
        let mut got: Vec<Option<Bytes>> = Vec::with_capacity(n);
        let mut at = offset;
        let mut budget = max_bytes.max(1);
        while got.len() < n {
            let end = nf.end_offset();
            if at >= end {
                // Past the end: a topic deleted and started again, or a record lost in a crash
                // of a topic that did not sync it (MAIN indexes only synced records).
                got.resize(n, None);
                break;
            }
            let want = (n - got.len()).min((end - at) as usize);
            let b = nf.read(at, budget, want).await?;
            let lost = (b.skipped as usize).min(n - got.len());
            got.extend(std::iter::repeat_n(None, lost));
            if b.records.is_empty() {
                if lost == 0 {
                    break;
                }
                at = b.next;
                continue;
            }
            for r in b.records.into_iter().take(n - got.len()) {
                budget = budget.saturating_sub(r.len());
                got.push(Some(r));
            }
            at = b.next;
            if budget == 0 {
                break;
            }
        }
        Ok(got)
    }
}

impl TopicLog for IndexedMain {
    fn name(&self) -> &str {
        self.index.name()
    }

    /// Appends index records (what aggregation writes), not envelopes.
    fn append(&self, records: Vec<Bytes>) -> BoxFuture<'_, io::Result<std::ops::Range<u64>>> {
        self.index.append(records)
    }

    fn read(
        &self,
        from: u64,
        max_bytes: usize,
        max_records: usize,
    ) -> BoxFuture<'_, io::Result<Batch>> {
        Box::pin(async move {
            let idx = self
                .index
                .read(from, max_records.saturating_mul(INDEX_RECORD_BYTES + 16), max_records)
                .await?;
            let first = idx.next - idx.records.len() as u64;
            self.resolve(first, idx.records, max_bytes, idx.skipped).await
        })
    }

    fn wait_for(&self, offset: u64) -> BoxFuture<'_, ()> {
        self.index.wait_for(offset)
    }

    fn end_offset(&self) -> u64 {
        self.index.end_offset()
    }

    fn synced_end(&self) -> u64 {
        self.index.synced_end()
    }

    fn start_offset(&self) -> u64 {
        self.index.start_offset()
    }

    fn commit(&self, consumer: &str, offset: u64) -> BoxFuture<'_, io::Result<()>> {
        self.index.commit(consumer, offset)
    }

    fn committed(&self, consumer: &str) -> Option<u64> {
        self.index.committed(consumer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_record_round_trips_and_anything_else_is_refused() {
        let envelopes = [Bytes::from(vec![1u8; 1200]), Bytes::from(vec![2u8; 900])];
        let recs = IndexRecord::encode_run(3, 7, &envelopes);
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0].len(), INDEX_RECORD_BYTES);
        let second = IndexRecord::decode(&recs[1]).unwrap();
        assert_eq!((second.topic, second.offset, second.len), (3, 8, 900));
        assert!(second.matches(&envelopes[1]));
        assert!(!second.matches(&Bytes::from(vec![3u8; 900])), "same length, other bytes");
        assert!(!second.matches(&envelopes[0]));
        assert_eq!(IndexRecord::decode(b"an envelope, not an index record"), None);
        let mut bad = BytesMut::new();
        IndexRecord { topic: NF_TOPICS.len() as u8, offset: 1, len: 1, check: 0 }.encode(&mut bad);
        assert_eq!(IndexRecord::decode(&bad), None, "no such NF topic");
    }

    #[test]
    fn an_nf_topic_may_not_be_kept_shorter_than_main_when_main_indexes_it() {
        let ok: LogConfig = toml::from_str("").unwrap();
        check_retention(&ok).unwrap();
        let forever: LogConfig = toml::from_str("retention_secs = 0").unwrap();
        check_retention(&forever).unwrap();
        let short: LogConfig =
            toml::from_str("retention_secs = 300\n[topics.pcf]\nretention_secs = 60").unwrap();
        let e = check_retention(&short).unwrap_err();
        assert!(e.contains("[dd.log] retention_secs = 300"), "{e}");
        assert!(e.contains("[dd.log.topics.pcf] retention_secs = 60"), "{e}");
        let main_forever: LogConfig =
            toml::from_str("retention_secs = 99999\n[topics.MAIN]\nretention_secs = 0").unwrap();
        assert!(check_retention(&main_forever).is_err(), "MAIN forever, NF topics not");
        let sized: LogConfig =
            toml::from_str("[topics.MAIN]\nretention_mib = 100\n[topics.scp]\nretention_mib = 150")
                .unwrap();
        check_retention(&sized).unwrap();
        let small: LogConfig =
            toml::from_str("[topics.MAIN]\nretention_mib = 100\n[topics.scp]\nretention_mib = 50")
                .unwrap();
        let e = check_retention(&small).unwrap_err();
        assert!(e.contains("[dd.log.topics.scp] retention_mib = 50"), "{e}");
        // The bench scenarios' shape: every topic 30 s and 3 GiB, MAIN 30 s.
        let same: LogConfig = toml::from_str(
            "retention_secs = 30\nretention_mib = 3072\n[topics.MAIN]\nretention_secs = 30",
        )
        .unwrap();
        check_retention(&same).unwrap();
    }

    fn envelope(i: u64) -> Bytes {
        let mut v = format!("copy {i} ").into_bytes();
        v.resize(1000, b'a' + (i % 26) as u8);
        Bytes::from(v)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lagging_reader_resolves_from_segments_and_removed_copies_are_skipped_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let config: crate::DdConfig = toml::from_str(
            "[log]\nsegment_mib = 1\ntail_cache_mib = 1\n[log.topics.scp]\nretention_mib = 2",
        )
        .unwrap();
        let opened = {
            let (d, c) = (dir.path().to_owned(), config.clone());
            tokio::task::spawn_blocking(move || crate::log_topics::LogTopics::open(&d, &c))
                .await
                .unwrap()
                .unwrap()
        };
        let topics: Arc<dyn Topics> = opened.clone();
        let scp_index = NF_TOPICS.iter().position(|t| *t == "scp").unwrap();
        let (scp, main) = (topics.topic("scp").unwrap(), topics.topic("MAIN-0").unwrap());
        let all: Vec<Bytes> = (0..5000).map(envelope).collect();
        for chunk in all.chunks(100) {
            let range = scp.append(chunk.to_vec()).await.unwrap();
            main.append(IndexRecord::encode_run(scp_index, range.start, chunk)).await.unwrap();
        }
        let indexed = IndexedMain::new(main.clone(), topics.clone());
        let read_all = |from: u64| {
            let indexed = &indexed;
            async move {
                let (mut got, mut unresolved, mut at) = (Vec::new(), 0, from);
                while at < indexed.end_offset() {
                    let b = indexed.read(at, 8 << 20, 512).await.unwrap();
                    assert_eq!(b.skipped, 0);
                    unresolved += b.unresolved;
                    got.extend(b.records);
                    at = b.next;
                }
                (got, unresolved)
            }
        };
        let disk = |opened: &crate::log_topics::LogTopics| {
            opened.log().topic("scp").unwrap().stats().reads_from_disk
        };
        let (got, unresolved) = read_all(0).await;
        assert_eq!(unresolved, 0);
        assert!(got == all, "every copy, in order, from the NF topic");
        assert!(disk(&opened) > 0, "the oldest copies came from the segment files");

        // Retention by size removes the oldest copies MAIN still points at.
        let report = opened.log().topic("scp").unwrap().enforce_retention().unwrap();
        let start = scp.start_offset();
        assert!(report.segments_deleted > 0 && start > 0, "{report:?}");
        let (got, unresolved) = read_all(0).await;
        assert_eq!(unresolved, start, "each removed copy counted once");
        assert!(got[..] == all[start as usize..], "the rest delivered");

        // A removed copy met after resolvable ones ends the batch: the records handed back are
        // one run of MAIN offsets, and the next read skips it.
        let at = main.end_offset();
        let mut records = IndexRecord::encode_run(scp_index, 4999, &all[4999..]);
        records.extend(IndexRecord::encode_run(scp_index, 0, &all[..1]));
        records.extend(IndexRecord::encode_run(scp_index, 4998, &all[4998..4999]));
        main.append(records).await.unwrap();
        let b = indexed.read(at, 8 << 20, 10).await.unwrap();
        assert_eq!((b.records.len(), b.next, b.unresolved), (1, at + 1, 0));
        let b = indexed.read(at + 1, 8 << 20, 10).await.unwrap();
        assert_eq!((b.records.len(), b.next, b.unresolved), (1, at + 3, 1));
        assert_eq!(b.records[0], all[4998]);
    }
}
