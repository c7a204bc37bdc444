//! The Data Director's embedded log: one append-only, on-disk log per topic (one per source NF,
//! plus `MAIN`), with retention and named consumer offsets, so that a feed which restarts
//! resumes where it stopped and nothing acknowledged is lost.
//!
//! # API
//!
//! ```no_run
//! # async fn example() -> Result<(), dd::log::LogError> {
//! use bytes::Bytes;
//! use dd::log::{LogConfig, LogDir};
//!
//! let log = std::sync::Arc::new(LogDir::open("fivecore-data/dd-log", LogConfig::default())?); // blocking: recovery
//! let nrf = log.topic("nrf")?;                      // created on demand
//! let range = nrf.append(vec![Bytes::from_static(b"copy")]).await?; // on disk when it resolves
//! let from = nrf.committed("aggregation").unwrap_or(nrf.start_offset());
//! let batch = nrf.read(from, 1 << 20, 1024).await?; // records from `from`, up to the limits
//! for (offset, record) in batch.iter() { /* ... */ }
//! nrf.commit("aggregation", batch.next_offset).await?; // durable; survives restart
//! nrf.wait_for(batch.next_offset).await?;           // until record `next_offset` exists
//! let _task = log.spawn_retention(std::time::Duration::from_secs(10));
//! # Ok(()) }
//! ```
//!
//! - [`LogDir::open`] takes the root directory (locked against a second process) and the
//!   [`LogConfig`], and opens (recovers) every topic already there. [`LogDir::topic`] returns a
//!   topic, creating it on first use; [`Topic`] is a cheap handle to clone.
//! - [`Topic::append`] (async) / [`Topic::append_batch_blocking`] append records, opaque byte
//!   strings, as one batch with consecutive offsets and return their range once they are on
//!   disk (see [`Fsync`]).
//! - [`Topic::read`] (async) / [`Topic::read_blocking`] return a [`ReadBatch`]: records from an
//!   offset up to a byte and a count limit (at least one record when there is one), the offset
//!   to read next, and how many records the reader `skipped` because retention had deleted them
//!   (the reader is moved to [`Topic::start_offset`]). Reading past [`Topic::end_offset`] is an
//!   error. [`Topic::wait_for`] waits until a record exists, without polling.
//! - [`Topic::commit`] / [`Topic::committed`]: named consumers' next offsets, durable.
//! - [`Topic::enforce_retention`] / [`LogDir::enforce_retention`] delete whole segments past the
//!   topic's retention by age or size; [`LogDir::spawn_retention`] runs it periodically.
//!
//! Configuration: [`LogConfig`] (`config.rs` documents each key and its default): the flush
//! policy, segment size (128 MiB) and age, index interval (4 KiB), retention per topic (the
//! reference's: 5 minutes for an NF topic, 6 hours for `MAIN`), the tail cache (16 MiB).
//!
//! # Retention
//!
//! A pass deletes whole segments, oldest first, while the oldest was last written longer ago
//! than the topic's retention age or the topic is larger than its retention size. The segment
//! being written is never deleted: when its records are themselves past the retention age (an
//! idle topic) the pass asks the writer to close it, and the next pass deletes it. A reader
//! whose offset was deleted reads from the new start and is told how many records it lost.
//!
//! # What a crash can lose
//!
//! With `fsync = "always"` (the default) an append is acknowledged after `fdatasync`: neither
//! `kill -9` nor an OS crash or power loss loses it. With `fsync = { interval_ms = N }` it is
//! acknowledged (and readable) once written to the file: `kill -9` loses nothing acknowledged
//! (the kernel holds the data), an OS crash or power loss loses at most the last N ms of
//! acknowledged appends. Consumer offsets are always synced before [`Topic::commit`] returns; an offset
//! beyond the end of its topic after such a loss is lowered to the end when the topic opens.
//! On open, the last segment of each topic is scanned and cut at the first torn or damaged
//! record (`crates/dd/tests/log.rs` kills an appending process with SIGKILL and finds every
//! acknowledged record).
//!
//! # Layout and threads
//!
//! `<root>/<topic>/<base:020>.log` segments of framed records (`frame.rs`: length, CRC32C,
//! offset, payload), a sparse index per segment (`segment.rs`; on disk as `<base>.idx` once the
//! segment is closed) and `consumers.offsets` (`offsets.rs`). Each topic has one writer thread
//! (`writer.rs`) that takes every append queued while it was busy into one write and one
//! `fdatasync` (group commit). A read of recent records is served from the topic's tail cache
//! (`tail.rs`: the last writes' buffers, kept in memory) as `Bytes` slices of them, inline; an
//! older one is a `pread` into one buffer handed out as `Bytes` slices, on the blocking pool
//! when called from async code. Nothing blocks a tokio worker on disk.

mod config;
mod frame;
mod offsets;
mod retention;
mod segment;
mod tail;
#[cfg(test)]
mod tests;
mod topic;
mod writer;

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use config::{Fsync, LogConfig, TopicConfig, TopicOverrides, MAIN};
pub use frame::MAX_RECORD_BYTES;
pub use offsets::MAX_CONSUMER_NAME;
pub use retention::RetentionReport;
pub use topic::{ReadBatch, Topic, TopicStats};

/// What the log can fail with.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("log I/O on {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("log directory {0} is in use by another process")]
    Locked(PathBuf),
    #[error("invalid topic name {0:?}: 1-200 of A-Z a-z 0-9 . _ -, not starting with '.'")]
    InvalidTopicName(String),
    #[error("invalid consumer name {0:?}: 1-255 bytes without control characters")]
    InvalidConsumerName(String),
    #[error("a record of {size} bytes is larger than the log's limit of {MAX_RECORD_BYTES}")]
    RecordTooLarge { size: usize },
    #[error("offset {offset} is beyond the end of topic {topic} ({end})")]
    OffsetBeyondEnd { topic: String, offset: u64, end: u64 },
    #[error("record {offset} in {path} is damaged (checksum, length or offset)")]
    Corrupt { path: PathBuf, offset: u64 },
    #[error("consumer offsets file {path} is damaged")]
    CorruptOffsets { path: PathBuf },
    #[error("topic {topic} takes no more appends: {reason}")]
    Failed { topic: String, reason: String },
}

pub(crate) fn io_err(path: &Path, source: std::io::Error) -> LogError {
    LogError::Io { path: path.to_owned(), source }
}

/// Makes the entries of `dir` (files created, renamed, deleted) durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), LogError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| io_err(dir, e))
}

/// An exclusive `flock` on `<root>/.lock`, held as long as the log or any of its topics is
/// open: two processes appending to the same segment would interleave frames.
pub(crate) struct DirLock {
    _file: File,
}

impl DirLock {
    fn take(root: &Path) -> Result<DirLock, LogError> {
        let path = root.join(".lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| io_err(&path, e))?;
        // SAFETY: flock on a descriptor this function owns; no memory is passed.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            return Err(if e.kind() == std::io::ErrorKind::WouldBlock {
                LogError::Locked(root.to_owned())
            } else {
                io_err(&path, e)
            });
        }
        Ok(DirLock { _file: file })
    }
}

/// The log's root directory: its topics, opened or created on demand.
pub struct LogDir {
    root: PathBuf,
    config: LogConfig,
    lock: Arc<DirLock>,
    topics: Mutex<BTreeMap<String, Topic>>,
}

impl LogDir {
    /// Opens (creating it if need be) the log under `root` and every topic in it, recovering
    /// each topic's last segment. Blocking: call it at start-up or on the blocking pool.
    pub fn open(root: impl AsRef<Path>, config: LogConfig) -> Result<LogDir, LogError> {
        let root = root.as_ref().to_owned();
        fs::create_dir_all(&root).map_err(|e| io_err(&root, e))?;
        let lock = Arc::new(DirLock::take(&root)?);
        let log = LogDir { root, config, lock, topics: Mutex::new(BTreeMap::new()) };
        for entry in fs::read_dir(&log.root).map_err(|e| io_err(&log.root, e))? {
            let entry = entry.map_err(|e| io_err(&log.root, e))?;
            let is_dir = entry.file_type().map_err(|e| io_err(&entry.path(), e))?.is_dir();
            match entry.file_name().to_str() {
                Some(name) if is_dir && check_topic_name(name).is_ok() => {
                    log.topic(name)?;
                }
                _ => {}
            }
        }
        Ok(log)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The topic `name`, created (directory and first segment) when it does not exist yet.
    /// Opening an existing topic not yet open recovers it: blocking, like [`LogDir::open`].
    pub fn topic(&self, name: &str) -> Result<Topic, LogError> {
        check_topic_name(name)?;
        let mut topics = self.topics.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(topic) = topics.get(name) {
            return Ok(topic.clone());
        }
        let topic = Topic::open(&self.root, name, self.config.topic(name), self.lock.clone())?;
        topics.insert(name.to_owned(), topic.clone());
        Ok(topic)
    }

    /// Every open topic, by name.
    pub fn topics(&self) -> Vec<Topic> {
        self.topics.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect()
    }

    /// Applies every open topic's retention now (blocking: it deletes files).
    pub fn enforce_retention(&self) -> Vec<(String, Result<RetentionReport, LogError>)> {
        self.topics().into_iter().map(|t| (t.name().to_owned(), t.enforce_retention())).collect()
    }

    /// Starts a task on the current tokio runtime that applies retention every `period` on the
    /// blocking pool, logging what it deletes. It ends when the returned handle is aborted.
    pub fn spawn_retention(self: &Arc<Self>, period: Duration) -> tokio::task::JoinHandle<()> {
        let log = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                // Holding only a weak handle between passes lets the log close when its owner
                // drops it.
                let Some(log) = log.upgrade() else { return };
                let pass = tokio::task::spawn_blocking(move || log.enforce_retention()).await;
                for (topic, result) in pass.unwrap_or_default() {
                    match result {
                        Ok(r) if r.segments_deleted > 0 => tracing::info!(
                            topic,
                            segments = r.segments_deleted,
                            bytes = r.bytes_deleted,
                            start_offset = r.start_offset,
                            "log retention deleted segments"
                        ),
                        Ok(_) => {}
                        Err(e) => tracing::warn!(topic, error = %e, "log retention failed"),
                    }
                }
            }
        })
    }
}

pub(crate) fn check_topic_name(name: &str) -> Result<(), LogError> {
    let ok = !name.is_empty()
        && name.len() <= 200
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(LogError::InvalidTopicName(name.to_owned()))
    }
}
