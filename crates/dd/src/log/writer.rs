//! A topic's writer thread: every append goes through it, so offsets are assigned in one place
//! and concurrent appenders share writes and `fdatasync`s (group commit).
//!
//! It takes the first queued append, then every other one already queued (up to
//! `max_write_bytes`), frames them into one buffer, writes it with one `pwrite`, syncs when the
//! policy says so, makes the records visible to readers, and only then answers each appender.
//! It runs a current-thread tokio runtime of its own only to wait for either an append or the
//! next due `fdatasync` under `fsync = interval`; its file I/O blocks only this thread.

use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Instant, SystemTime};

use tokio::sync::{mpsc, oneshot};

use super::frame;
use super::segment::{self, IndexEntry};
use super::topic::{Job, Shared};
use super::{io_err, Fsync, LogError};

type Reply = oneshot::Sender<Result<Range<u64>, LogError>>;

pub(crate) fn spawn(
    shared: Arc<Shared>,
    jobs: mpsc::Receiver<Job>,
) -> Result<JoinHandle<()>, LogError> {
    let writer = {
        let segs = shared.segments();
        let active = &segs[segs.len() - 1];
        Writer {
            file: active.file.clone(),
            base: active.base,
            len: active.len,
            next: active.end,
            last_entry: active.index.entries.last().map(|e| e.pos),
            // A recovered segment's first record's time is not kept: its age counts from now.
            first_write: (active.len > 0).then(Instant::now),
            buf: Vec::new(),
            unsynced: false,
            last_sync: Instant::now(),
            shared: shared.clone(),
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|e| io_err(&shared.dir, e))?;
    std::thread::Builder::new()
        .name(format!("dd-log-{}", shared.name))
        .spawn(move || runtime.block_on(writer.run(jobs)))
        .map_err(|e| io_err(&shared.dir, e))
}

struct Writer {
    shared: Arc<Shared>,
    /// The segment being written: its file, base offset, length and next offset.
    file: Arc<File>,
    base: u64,
    len: u64,
    next: u64,
    /// Position of the segment's last sparse index entry.
    last_entry: Option<u64>,
    first_write: Option<Instant>,
    buf: Vec<u8>,
    /// Written but not yet synced (`fsync = interval` only).
    unsynced: bool,
    last_sync: Instant,
}

impl Writer {
    async fn run(mut self, mut jobs: mpsc::Receiver<Job>) {
        let mut group: Vec<(Vec<bytes::Bytes>, Reply)> = Vec::new();
        loop {
            let job = match self.sync_due() {
                Some(due) => tokio::select! {
                    job = jobs.recv() => job,
                    _ = tokio::time::sleep_until(due.into()) => {
                        self.sync_or_fail();
                        continue;
                    }
                },
                None => jobs.recv().await,
            };
            let Some(job) = job else { break };
            let mut roll = false;
            let mut bytes = 0;
            let mut next = Some(job);
            while let Some(job) = next.take() {
                match job {
                    Job::Append { records, reply } => {
                        bytes += records.iter().map(|r| r.len() + frame::HEADER).sum::<usize>();
                        group.push((records, reply));
                    }
                    Job::Roll => roll = true,
                }
                if bytes < self.shared.config.max_write_bytes {
                    next = jobs.try_recv().ok();
                }
            }
            if roll && self.len > 0 {
                if let Err(e) = self.roll() {
                    tracing::warn!(topic = self.shared.name, error = %e, "log: cannot close a segment for retention");
                }
            }
            if !group.is_empty() {
                self.append(&mut group);
            }
        }
        // Every handle is gone: what was acknowledged under `fsync = interval` reaches the disk
        // before the topic is reported closed.
        if self.unsynced {
            self.sync_or_fail();
        }
    }

    fn sync_due(&self) -> Option<Instant> {
        match self.shared.config.fsync {
            Fsync::Interval(every) if self.unsynced => Some(self.last_sync + every),
            _ => None,
        }
    }

    fn sync(&mut self) -> io::Result<()> {
        self.file.sync_data()?;
        self.shared.counters.fdatasyncs.fetch_add(1, Ordering::Relaxed);
        self.shared.synced.store(self.next, Ordering::Release);
        self.unsynced = false;
        self.last_sync = Instant::now();
        Ok(())
    }

    fn sync_or_fail(&mut self) {
        if let Err(e) = self.sync() {
            self.shared.fail(format!("fdatasync of {}: {e}", self.path_display()));
        }
    }

    fn path_display(&self) -> String {
        segment::log_path(&self.shared.dir, self.base).display().to_string()
    }

    fn should_roll(&self) -> bool {
        let config = &self.shared.config;
        self.len > 0
            && (self.len >= config.segment_bytes
                || self.first_write.is_some_and(|t| t.elapsed() >= config.segment_age))
    }

    /// Closes the segment being written and starts the next one. A closed segment is durable
    /// under either policy, and gets its index file.
    fn roll(&mut self) -> Result<(), LogError> {
        if self.unsynced {
            self.sync().map_err(|e| {
                let reason = format!("fdatasync of {}: {e}", self.path_display());
                self.shared.fail(reason.clone());
                LogError::Failed { topic: self.shared.name.clone(), reason }
            })?;
        }
        {
            let segs = self.shared.segments();
            if let Err(e) = segment::write_index(&self.shared.dir, &segs[segs.len() - 1]) {
                // Only an accelerator: the segment is scanned at the next open instead.
                tracing::warn!(topic = self.shared.name, error = %e, "log: cannot write a segment index");
            }
        }
        let next = segment::create(&self.shared.dir, self.next)?;
        self.file = next.file.clone();
        self.base = next.base;
        self.len = 0;
        self.last_entry = None;
        self.first_write = None;
        self.shared.segments_mut().push(next);
        Ok(())
    }

    fn append(&mut self, group: &mut Vec<(Vec<bytes::Bytes>, Reply)>) {
        if self.shared.failure().is_some() {
            for (_, reply) in group.drain(..) {
                let _ = reply.send(Err(self.shared.failed_error()));
            }
            return;
        }
        if self.should_roll() {
            if let Err(e) = self.roll() {
                let (path, e) = match e {
                    LogError::Io { path, source } => (path, source),
                    other => (self.shared.dir.clone(), io::Error::other(other.to_string())),
                };
                for (_, reply) in group.drain(..) {
                    let _ = reply.send(Err(io_err(&path, io::Error::new(e.kind(), e.to_string()))));
                }
                return;
            }
        }
        let interval = self.shared.config.index_interval_bytes;
        let (next0, last_entry0) = (self.next, self.last_entry);
        let mut entries = Vec::new();
        let mut ranges = Vec::with_capacity(group.len());
        let mut frames = Vec::new();
        self.buf.clear();
        let size = group.iter().flat_map(|(r, _)| r).map(|r| frame::HEADER + r.len()).sum();
        self.buf.reserve_exact(size);
        let cache = self.shared.tail.keeps(size);
        if cache {
            frames.reserve_exact(group.iter().map(|(r, _)| r.len()).sum());
        }
        for (records, _) in group.iter() {
            let first = self.next;
            for record in records {
                if cache {
                    frames.push(self.buf.len() as u32);
                }
                let pos = self.len + self.buf.len() as u64;
                if self.last_entry.is_none_or(|last| pos >= last + interval) {
                    entries.push(IndexEntry { offset: self.next, pos });
                    self.last_entry = Some(pos);
                }
                frame::encode(&mut self.buf, self.next, record);
                self.next += 1;
            }
            ranges.push(first..self.next);
        }
        self.shared.counters.writes.fetch_add(1, Ordering::Relaxed);
        let written = self.file.write_all_at(&self.buf, self.len).and_then(|()| {
            let due = match self.shared.config.fsync {
                Fsync::Always => true,
                Fsync::Interval(every) => self.last_sync.elapsed() >= every,
            };
            if due {
                self.sync().inspect_err(|e| {
                    // After a failed fdatasync the kernel may have dropped the dirty pages: what
                    // the file holds is unknown, so nothing more is acknowledged.
                    self.shared.fail(format!("fdatasync of {}: {e}", self.path_display()));
                })
            } else {
                self.unsynced = true;
                Ok(())
            }
        });
        if let Err(e) = written {
            self.next = next0;
            self.last_entry = last_entry0;
            // Cut whatever part of the write landed, so the next write starts after whole
            // records only (a disk that was full may have room again).
            if self.shared.failure().is_none() {
                if let Err(cut) = self.file.set_len(self.len) {
                    self.shared.fail(format!(
                        "truncating {} after a failed write: {cut}",
                        self.path_display()
                    ));
                }
            }
            let path = segment::log_path(&self.shared.dir, self.base);
            for (_, reply) in group.drain(..) {
                let _ = reply.send(Err(io_err(&path, io::Error::new(e.kind(), e.to_string()))));
            }
            return;
        }
        self.len += self.buf.len() as u64;
        self.first_write.get_or_insert_with(Instant::now);
        if cache {
            // The buffer goes to the cache whole; the next write gets a new one.
            self.shared.tail.push(next0, std::mem::take(&mut self.buf).into(), frames);
        }
        {
            let mut segs = self.shared.segments_mut();
            let active = segs.last_mut().expect("a topic always has a segment being written");
            debug_assert_eq!(active.base, self.base);
            active.len = self.len;
            active.end = self.next;
            active.index.entries.extend(entries);
            active.modified = SystemTime::now();
        }
        self.shared.end.send_replace(self.next);
        for ((_, reply), range) in group.drain(..).zip(ranges) {
            let _ = reply.send(Ok(range));
        }
    }
}
