//! One topic: its segments as readers see them, its writer thread, its consumer offsets.

use std::collections::BTreeMap;
use std::fs;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::thread::JoinHandle;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot, watch};

use super::frame::{Header, HEADER, MAX_RECORD_BYTES};
use super::offsets::{self, Offsets};
use super::retention::RetentionReport;
use super::segment::{self, Segment};
use super::tail::Tail;
use super::{io_err, writer, DirLock, LogError, TopicConfig};

/// The most one read from a segment file returns (beyond a single larger record): a larger
/// `max_bytes` is capped to it.
const MAX_FILE_READ: usize = 8 << 20;

/// What one read returns.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReadBatch {
    /// The records, each a slice of the one buffer the read filled (no copy per record).
    pub records: Vec<Bytes>,
    /// Offset of `records[0]`: the offset asked for, or the topic's start when retention had
    /// deleted that one.
    pub first_offset: u64,
    /// The offset to read next: `first_offset + records.len()`.
    pub next_offset: u64,
    /// Records the reader asked for that retention had deleted (0 normally): the count the
    /// Data Director reports as lost to a lagging consumer.
    pub skipped: u64,
}

impl ReadBatch {
    fn empty(at: u64, skipped: u64) -> ReadBatch {
        ReadBatch { records: Vec::new(), first_offset: at, next_offset: at, skipped }
    }

    /// Each record with its offset.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &Bytes)> {
        (self.first_offset..).zip(self.records.iter())
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }
}

/// A topic's size, for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicStats {
    pub start_offset: u64,
    pub end_offset: u64,
    pub segments: usize,
    pub bytes: u64,
    /// Since the topic opened: `pwrite`s and `fdatasync`s of its writer (their ratio to appends
    /// is the group commit at work) and bytes its readers read from disk.
    pub writes: u64,
    pub fdatasyncs: u64,
    pub read_bytes: u64,
    /// Reads served from the tail cache, and from the segment files.
    pub reads_from_memory: u64,
    pub reads_from_disk: u64,
}

/// Counters behind [`TopicStats`].
#[derive(Default)]
pub(crate) struct Counters {
    pub writes: AtomicU64,
    pub fdatasyncs: AtomicU64,
    pub read_bytes: AtomicU64,
    pub reads_from_memory: AtomicU64,
    pub reads_from_disk: AtomicU64,
}

/// What the writer thread is asked to do.
pub(crate) enum Job {
    Append {
        records: Vec<Bytes>,
        reply: oneshot::Sender<Result<Range<u64>, LogError>>,
    },
    /// Close the segment being written (if it holds anything) so retention can delete it.
    Roll,
}

/// State shared by the topic's handles, its readers and its writer thread.
pub(crate) struct Shared {
    pub name: String,
    pub dir: PathBuf,
    pub config: TopicConfig,
    /// In offset order; the last one is the segment being written, never deleted.
    pub segments: RwLock<Vec<Segment>>,
    /// The offset after the last readable record; waiters subscribe to it.
    pub end: watch::Sender<u64>,
    /// The end offset as of the last `fdatasync`: what an OS crash would keep. Equal to `end`
    /// under `fsync = "always"`; behind it by at most the interval otherwise.
    pub synced: std::sync::atomic::AtomicU64,
    pub offsets: Offsets,
    /// Set when the writer can no longer vouch for the file (a failed `fdatasync`): every
    /// append after it fails.
    pub failed: Mutex<Option<String>>,
    pub counters: Counters,
    pub tail: Tail,
}

impl Shared {
    pub fn segments(&self) -> RwLockReadGuard<'_, Vec<Segment>> {
        // The writer and retention keep the list consistent at every step, so a panic elsewhere
        // while holding the lock leaves nothing half changed.
        self.segments.read().unwrap_or_else(|p| p.into_inner())
    }

    pub fn segments_mut(&self) -> RwLockWriteGuard<'_, Vec<Segment>> {
        self.segments.write().unwrap_or_else(|p| p.into_inner())
    }

    pub fn failure(&self) -> Option<String> {
        self.failed.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn fail(&self, reason: String) {
        tracing::error!(topic = self.name, reason, "log topic stops taking appends");
        *self.failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(reason);
    }

    pub fn failed_error(&self) -> LogError {
        let reason = self.failure().unwrap_or_else(|| "its writer thread has stopped".into());
        LogError::Failed { topic: self.name.clone(), reason }
    }

    /// Reads from `from`: see [`Topic::read`].
    fn read(&self, from: u64, max_bytes: usize, max_records: usize) -> Result<ReadBatch, LogError> {
        match self.read_tail(from, max_bytes, max_records) {
            Some(batch) => Ok(batch),
            None => self.read_segments(from, max_bytes, max_records),
        }
    }

    /// The read served from the tail cache, when it holds `from`.
    fn read_tail(&self, from: u64, max_bytes: usize, max_records: usize) -> Option<ReadBatch> {
        let end = *self.end.borrow();
        // Errors, the end, and offsets retention has passed are the segments' path's to answer.
        if from >= end || max_records == 0 || from < self.segments()[0].base {
            return None;
        }
        let records = self.tail.read(from, end, max_bytes, max_records)?;
        self.counters.reads_from_memory.fetch_add(1, Ordering::Relaxed);
        let next_offset = from + records.len() as u64;
        Some(ReadBatch { records, first_offset: from, next_offset, skipped: 0 })
    }

    fn read_segments(
        &self,
        from: u64,
        max_bytes: usize,
        max_records: usize,
    ) -> Result<ReadBatch, LogError> {
        let (mut from, mut skipped) = (from, 0);
        let (file, base, mut entry, limit) = {
            let segs = self.segments();
            let (start, end) = (segs[0].base, segs[segs.len() - 1].end);
            if from > end {
                return Err(LogError::OffsetBeyondEnd {
                    topic: self.name.clone(),
                    offset: from,
                    end,
                });
            }
            if from < start {
                skipped = start - from;
                from = start;
            }
            let mut i = segs.partition_point(|s| s.base <= from) - 1;
            // Past a closed segment's end (one cut short at recovery): on to the next one.
            while from >= segs[i].end && i + 1 < segs.len() {
                i += 1;
                skipped += segs[i].base.saturating_sub(from);
                from = from.max(segs[i].base);
            }
            if from >= segs[i].end || max_records == 0 {
                return Ok(ReadBatch::empty(from, skipped));
            }
            let s = &segs[i];
            (
                s.file.clone(),
                s.base,
                s.index.seek(from).unwrap_or(segment::IndexEntry { offset: s.base, pos: 0 }),
                s.len,
            )
        };
        self.counters.reads_from_disk.fetch_add(1, Ordering::Relaxed);
        let corrupt =
            |offset| LogError::Corrupt { path: segment::log_path(&self.dir, base), offset };
        // What lies between the index entry and `from` is read too: at most about one index
        // interval, plus one record.
        // A caller's limit of "everything" must not become a read of a whole segment into memory.
        let max_bytes = max_bytes.min(MAX_FILE_READ);
        let mut budget =
            max_bytes.saturating_add(self.config.index_interval_bytes as usize).max(HEADER);
        let mut records = Vec::new();
        loop {
            let n = (limit - entry.pos).min(budget as u64) as usize;
            if n == 0 {
                return Err(corrupt(entry.offset));
            }
            let mut buf = vec![0u8; n];
            file.read_exact_at(&mut buf, entry.pos)
                .map_err(|e| io_err(&segment::log_path(&self.dir, base), e))?;
            self.counters.read_bytes.fetch_add(n as u64, Ordering::Relaxed);
            let buf = Bytes::from(buf);
            let (mut cur, mut taken, mut need) = (0usize, 0usize, None);
            while cur < n {
                let Some(h) = Header::parse(&buf[cur..]) else {
                    need = Some(HEADER);
                    break;
                };
                if h.offset != entry.offset || h.len as usize > MAX_RECORD_BYTES {
                    return Err(corrupt(entry.offset));
                }
                let frame = h.frame_len();
                if cur + frame > n {
                    need = Some(frame);
                    break;
                }
                if h.offset >= from {
                    if !records.is_empty() && taken + frame > max_bytes {
                        break;
                    }
                    if !h.checks(&buf[cur + HEADER..cur + frame]) {
                        return Err(corrupt(h.offset));
                    }
                    records.push(buf.slice(cur + HEADER..cur + frame));
                    taken += frame;
                }
                entry.offset += 1;
                cur += frame;
                if records.len() >= max_records {
                    break;
                }
            }
            if !records.is_empty() {
                break;
            }
            // Nothing yet: still before `from`, or its record is longer than what was read.
            entry.pos += cur as u64;
            if let Some(need) = need {
                if need as u64 > limit - entry.pos {
                    return Err(corrupt(entry.offset));
                }
                budget = budget.max(need);
            }
        }
        let next_offset = from + records.len() as u64;
        Ok(ReadBatch { records, first_offset: from, next_offset, skipped })
    }
}

/// A topic: a cheap handle to clone; the topic closes (its writer syncs and stops) when the last
/// handle and its [`LogDir`](super::LogDir) are dropped.
#[derive(Clone)]
pub struct Topic {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    /// `None` only while dropping: closing the queue is what stops the writer.
    jobs: Option<mpsc::Sender<Job>>,
    writer: Option<JoinHandle<()>>,
    _lock: Arc<DirLock>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.jobs.take();
        if let Some(writer) = self.writer.take() {
            // The writer ends once it has answered what was queued and synced; joining makes
            // the topic closed (its files and lock released) when its last handle is gone.
            let _ = writer.join();
        }
    }
}

impl Topic {
    pub(crate) fn open(
        root: &Path,
        name: &str,
        config: TopicConfig,
        lock: Arc<DirLock>,
    ) -> Result<Topic, LogError> {
        let dir = root.join(name);
        if !dir.exists() {
            fs::create_dir(&dir).map_err(|e| io_err(&dir, e))?;
            super::sync_dir(root)?;
        }
        let bases = segment::list(&dir)?;
        let mut segments = Vec::with_capacity(bases.len().max(1));
        for (i, &base) in bases.iter().enumerate() {
            let (segment, _) =
                segment::open(&dir, base, i + 1 == bases.len(), config.index_interval_bytes)?;
            if let Some(prev) = segments.last().map(|s: &Segment| s.end) {
                if prev != segment.base {
                    tracing::warn!(
                        topic = name,
                        from = prev,
                        to = segment.base,
                        "log: records missing between segments (a damaged segment was cut)"
                    );
                }
            }
            segments.push(segment);
        }
        if segments.is_empty() {
            segments.push(segment::create(&dir, 0)?);
        }
        let end = segments[segments.len() - 1].end;
        let offsets = Offsets::open(&dir)?;
        let lowered = offsets.clamp(end);
        if !lowered.is_empty() {
            tracing::warn!(
                topic = name,
                end,
                consumers = ?lowered,
                "log: committed offsets beyond the end (records lost with fsync = interval) lowered to it"
            );
            offsets.persist(offsets.generation())?;
        }
        let (end_tx, _) = watch::channel(end);
        let tail_cache_bytes = config.tail_cache_bytes;
        let shared = Arc::new(Shared {
            name: name.to_owned(),
            dir,
            config,
            segments: RwLock::new(segments),
            end: end_tx,
            // What recovery found is in the file; treated as synced (a kill keeps the page cache).
            synced: std::sync::atomic::AtomicU64::new(end),
            offsets,
            failed: Mutex::new(None),
            counters: Counters::default(),
            tail: Tail::new(tail_cache_bytes),
        });
        let (jobs, queue) = mpsc::channel(shared.config.queue_capacity);
        let writer = writer::spawn(shared.clone(), queue)?;
        Ok(Topic {
            inner: Arc::new(Inner { shared, jobs: Some(jobs), writer: Some(writer), _lock: lock }),
        })
    }

    fn shared(&self) -> &Arc<Shared> {
        &self.inner.shared
    }

    fn jobs(&self) -> Result<&mpsc::Sender<Job>, LogError> {
        self.inner.jobs.as_ref().ok_or_else(|| self.shared().failed_error())
    }

    pub fn name(&self) -> &str {
        &self.shared().name
    }

    pub fn config(&self) -> &TopicConfig {
        &self.shared().config
    }

    fn check(records: &[Bytes]) -> Result<(), LogError> {
        match records.iter().find(|r| r.len() > MAX_RECORD_BYTES) {
            Some(r) => Err(LogError::RecordTooLarge { size: r.len() }),
            None => Ok(()),
        }
    }

    /// Appends `records` as one batch with consecutive offsets and returns their range once
    /// they are on disk (as the topic's [`Fsync`](super::Fsync) says). Appenders wait when the
    /// topic's queue is full.
    pub async fn append(&self, records: Vec<Bytes>) -> Result<Range<u64>, LogError> {
        Self::check(&records)?;
        if records.is_empty() {
            let end = self.end_offset();
            return Ok(end..end);
        }
        let (reply, answer) = oneshot::channel();
        self.jobs()?
            .send(Job::Append { records, reply })
            .await
            .map_err(|_| self.shared().failed_error())?;
        answer.await.map_err(|_| self.shared().failed_error())?
    }

    /// [`Topic::append`] of a slice (the `Bytes` are cloned, not their contents).
    pub async fn append_batch(&self, records: &[Bytes]) -> Result<Range<u64>, LogError> {
        self.append(records.to_vec()).await
    }

    /// [`Topic::append`] for synchronous code; it panics when called on a tokio runtime thread.
    pub fn append_batch_blocking(&self, records: &[Bytes]) -> Result<Range<u64>, LogError> {
        Self::check(records)?;
        if records.is_empty() {
            let end = self.end_offset();
            return Ok(end..end);
        }
        let (reply, answer) = oneshot::channel();
        self.jobs()?
            .blocking_send(Job::Append { records: records.to_vec(), reply })
            .map_err(|_| self.shared().failed_error())?;
        answer.blocking_recv().map_err(|_| self.shared().failed_error())?
    }

    /// Records from `from` on: at least one when there is one, then as many as fit in
    /// `max_bytes` (counting 16 bytes of framing per record) up to `max_records`. An offset
    /// below [`Topic::start_offset`] (deleted by retention) reads from the start and counts
    /// the records lost in [`ReadBatch::skipped`]; one beyond [`Topic::end_offset`] is
    /// [`LogError::OffsetBeyondEnd`]. At the end it returns an empty batch: wait with
    /// [`Topic::wait_for`]. Runs on the blocking pool.
    pub async fn read(
        &self,
        from: u64,
        max_bytes: usize,
        max_records: usize,
    ) -> Result<ReadBatch, LogError> {
        // Caught up, or recent enough to be in memory: no need to leave the runtime thread.
        if from == self.end_offset() {
            return Ok(ReadBatch::empty(from, 0));
        }
        if let Some(batch) = self.shared().read_tail(from, max_bytes, max_records) {
            return Ok(batch);
        }
        let shared = self.shared().clone();
        tokio::task::spawn_blocking(move || shared.read_segments(from, max_bytes, max_records))
            .await
            .map_err(|e| LogError::Failed {
                topic: self.name().to_owned(),
                reason: format!("read task: {e}"),
            })?
    }

    /// [`Topic::read`] on the calling thread (a `pread`).
    pub fn read_blocking(
        &self,
        from: u64,
        max_bytes: usize,
        max_records: usize,
    ) -> Result<ReadBatch, LogError> {
        self.shared().read(from, max_bytes, max_records)
    }

    /// The read from the segment files, bypassing the tail cache.
    #[cfg(test)]
    pub(crate) fn read_from_disk(
        &self,
        from: u64,
        max_bytes: usize,
        max_records: usize,
    ) -> Result<ReadBatch, LogError> {
        self.shared().read_segments(from, max_bytes, max_records)
    }

    /// Waits until record `offset` exists (the end offset is beyond it) and returns the end.
    pub async fn wait_for(&self, offset: u64) -> Result<u64, LogError> {
        let mut end = self.shared().end.subscribe();
        let reached =
            end.wait_for(|&end| end > offset).await.map_err(|_| self.shared().failed_error())?;
        Ok(*reached)
    }

    /// The offset the next appended record will get.
    pub fn end_offset(&self) -> u64 {
        *self.shared().end.borrow()
    }

    /// The end offset as of the topic's last `fdatasync` (see [`Fsync`](super::Fsync)): records below it
    /// survive an OS crash or a power loss, not only a kill.
    pub fn synced_end(&self) -> u64 {
        self.shared().synced.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The offset of the oldest record retention has kept.
    pub fn start_offset(&self) -> u64 {
        self.shared().segments()[0].base
    }

    pub fn stats(&self) -> TopicStats {
        let segs = self.shared().segments();
        TopicStats {
            start_offset: segs[0].base,
            end_offset: segs[segs.len() - 1].end,
            segments: segs.len(),
            bytes: segs.iter().map(|s| s.len).sum(),
            writes: self.shared().counters.writes.load(Ordering::Relaxed),
            fdatasyncs: self.shared().counters.fdatasyncs.load(Ordering::Relaxed),
            read_bytes: self.shared().counters.read_bytes.load(Ordering::Relaxed),
            reads_from_memory: self.shared().counters.reads_from_memory.load(Ordering::Relaxed),
            reads_from_disk: self.shared().counters.reads_from_disk.load(Ordering::Relaxed),
        }
    }

    /// Records `offset` as the next one `consumer` will read, durably (on the blocking pool).
    pub async fn commit(&self, consumer: &str, offset: u64) -> Result<(), LogError> {
        self.check_commit(consumer, offset)?;
        let shared = self.shared().clone();
        let consumer = consumer.to_owned();
        tokio::task::spawn_blocking(move || shared.offsets.commit(&consumer, offset))
            .await
            .map_err(|e| LogError::Failed {
                topic: self.name().to_owned(),
                reason: format!("commit task: {e}"),
            })?
    }

    /// [`Topic::commit`] on the calling thread.
    pub fn commit_blocking(&self, consumer: &str, offset: u64) -> Result<(), LogError> {
        self.check_commit(consumer, offset)?;
        self.shared().offsets.commit(consumer, offset)
    }

    fn check_commit(&self, consumer: &str, offset: u64) -> Result<(), LogError> {
        offsets::check_name(consumer)?;
        let end = self.end_offset();
        if offset > end {
            return Err(LogError::OffsetBeyondEnd { topic: self.name().to_owned(), offset, end });
        }
        Ok(())
    }

    /// The next offset `consumer` will read, as last committed.
    pub fn committed(&self, consumer: &str) -> Option<u64> {
        self.shared().offsets.get(consumer)
    }

    /// Every consumer's committed offset (for lag metrics).
    pub fn consumers(&self) -> BTreeMap<String, u64> {
        self.shared().offsets.all()
    }

    /// Deletes the segments past the topic's retention (blocking: it unlinks files). The
    /// segment being written is never deleted; when it is itself past retention by age the
    /// writer is asked to close it, so the next pass can.
    pub fn enforce_retention(&self) -> Result<RetentionReport, LogError> {
        let report = self.shared().enforce_retention()?;
        if report.active_expired {
            // A full queue means appends are flowing and will roll it by age anyway.
            if let Ok(jobs) = self.jobs() {
                let _ = jobs.try_send(Job::Roll);
            }
        }
        Ok(report)
    }
}
