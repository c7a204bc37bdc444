//! Consumer offsets of one topic: the next offset each named consumer will read.
//!
//! They live in one small file per topic, `consumers.offsets`, rewritten whole on each commit
//! into `consumers.offsets.tmp`, synced, then renamed over the old one (and the directory
//! synced), so a crash leaves either the old file or the new one, never a mix. Concurrent
//! commits share one rewrite: a committer that finds its change already written by another
//! returns at once.
//!
//! File layout: `FCOF`, version `u32`, count `u32`, then per consumer its name's length `u16`,
//! the name (UTF-8), the offset `u64`; a CRC32C of everything before it ends the file. All
//! integers little-endian.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::{io_err, LogError};

const FILE: &str = "consumers.offsets";
const TMP: &str = "consumers.offsets.tmp";
const MAGIC: &[u8; 4] = b"FCOF";
const VERSION: u32 = 1;
/// Longest consumer name, in bytes.
pub const MAX_CONSUMER_NAME: usize = 255;

#[derive(Default)]
struct State {
    committed: BTreeMap<String, u64>,
    /// Bumped by every commit; `durable` is the generation last written to disk.
    generation: u64,
    durable: u64,
}

pub(crate) struct Offsets {
    dir: PathBuf,
    state: Mutex<State>,
    /// Held while the file is rewritten, so rewrites happen one at a time.
    write: Mutex<()>,
}

impl Offsets {
    /// Reads the topic's committed offsets (none when the file does not exist yet).
    pub fn open(dir: &Path) -> Result<Offsets, LogError> {
        let tmp = dir.join(TMP);
        // A rewrite cut short by a crash: the file it would have replaced is still whole.
        match fs::remove_file(&tmp) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io_err(&tmp, e)),
            _ => {}
        }
        let path = dir.join(FILE);
        let committed = match fs::read(&path) {
            Ok(bytes) => decode(&bytes).ok_or(LogError::CorruptOffsets { path })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(io_err(&path, e)),
        };
        Ok(Offsets {
            dir: dir.to_owned(),
            state: Mutex::new(State { committed, ..State::default() }),
            write: Mutex::new(()),
        })
    }

    pub fn get(&self, consumer: &str) -> Option<u64> {
        lock(&self.state).committed.get(consumer).copied()
    }

    pub fn all(&self) -> BTreeMap<String, u64> {
        lock(&self.state).committed.clone()
    }

    /// Lowers every offset above `end` to `end`: only after a crash under `fsync = interval`,
    /// which can lose records a consumer had already read and committed.
    pub fn clamp(&self, end: u64) -> Vec<(String, u64)> {
        let mut state = lock(&self.state);
        let mut lowered = Vec::new();
        for (name, offset) in state.committed.iter_mut() {
            if *offset > end {
                lowered.push((name.clone(), *offset));
                *offset = end;
            }
        }
        if !lowered.is_empty() {
            state.generation += 1;
        }
        lowered
    }

    /// Records `offset` for `consumer` and returns once it is on disk.
    pub fn commit(&self, consumer: &str, offset: u64) -> Result<(), LogError> {
        check_name(consumer)?;
        let mine = {
            let mut state = lock(&self.state);
            state.committed.insert(consumer.to_owned(), offset);
            state.generation += 1;
            state.generation
        };
        self.persist(mine)
    }

    /// Writes the offsets to disk unless a rewrite already covered generation `upto`.
    pub fn persist(&self, upto: u64) -> Result<(), LogError> {
        let _writing = lock(&self.write);
        let (bytes, generation) = {
            let state = lock(&self.state);
            if state.durable >= upto {
                return Ok(());
            }
            (encode(&state.committed), state.generation)
        };
        self.replace(&bytes)?;
        let mut state = lock(&self.state);
        state.durable = state.durable.max(generation);
        Ok(())
    }

    /// The generation of the offsets in memory, for [`Offsets::persist`].
    pub fn generation(&self) -> u64 {
        lock(&self.state).generation
    }

    fn replace(&self, bytes: &[u8]) -> Result<(), LogError> {
        let tmp = self.dir.join(TMP);
        let path = self.dir.join(FILE);
        let mut file = File::create(&tmp).map_err(|e| io_err(&tmp, e))?;
        file.write_all(bytes).map_err(|e| io_err(&tmp, e))?;
        file.sync_data().map_err(|e| io_err(&tmp, e))?;
        drop(file);
        fs::rename(&tmp, &path).map_err(|e| io_err(&path, e))?;
        super::sync_dir(&self.dir)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding these locks leaves consistent data behind (plain inserts), so a
    // poisoned lock is still usable.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub(crate) fn check_name(consumer: &str) -> Result<(), LogError> {
    if consumer.is_empty()
        || consumer.len() > MAX_CONSUMER_NAME
        || consumer.chars().any(|c| c.is_control())
    {
        return Err(LogError::InvalidConsumerName(consumer.to_owned()));
    }
    Ok(())
}

fn encode(committed: &BTreeMap<String, u64>) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + committed.len() * 32);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(committed.len() as u32).to_le_bytes());
    for (name, offset) in committed {
        out.extend_from_slice(&(name.len() as u16).to_le_bytes());
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&offset.to_le_bytes());
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fn decode(bytes: &[u8]) -> Option<BTreeMap<String, u64>> {
    let (body, crc) = bytes.split_at_checked(bytes.len().checked_sub(4)?)?;
    if crc32c::crc32c(body).to_le_bytes() != crc {
        return None;
    }
    let mut cur = body;
    let mut take = |n: usize| -> Option<&[u8]> {
        let (head, rest) = cur.split_at_checked(n)?;
        cur = rest;
        Some(head)
    };
    if take(4)? != MAGIC || u32::from_le_bytes(take(4)?.try_into().ok()?) != VERSION {
        return None;
    }
    let count = u32::from_le_bytes(take(4)?.try_into().ok()?);
    let mut committed = BTreeMap::new();
    for _ in 0..count {
        let len = u16::from_le_bytes(take(2)?.try_into().ok()?) as usize;
        let name = std::str::from_utf8(take(len)?).ok()?.to_owned();
        let offset = u64::from_le_bytes(take(8)?.try_into().ok()?);
        committed.insert(name, offset);
    }
    Some(committed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_survive_reopen() {
        let dir = tempfile::tempdir().expect("temp dir");
        let offsets = Offsets::open(dir.path()).expect("open");
        assert_eq!(offsets.get("feed-a"), None);
        offsets.commit("feed-a", 10).expect("commit");
        offsets.commit("feed-b", 3).expect("commit");
        offsets.commit("feed-a", 12).expect("commit");
        drop(offsets);
        let offsets = Offsets::open(dir.path()).expect("reopen");
        assert_eq!(offsets.get("feed-a"), Some(12));
        assert_eq!(offsets.get("feed-b"), Some(3));
        assert!(!dir.path().join(TMP).exists());
    }

    #[test]
    fn a_leftover_temporary_file_is_ignored() {
        let dir = tempfile::tempdir().expect("temp dir");
        Offsets::open(dir.path()).expect("open").commit("feed", 5).expect("commit");
        fs::write(dir.path().join(TMP), b"half a rewrite").expect("tmp");
        let offsets = Offsets::open(dir.path()).expect("reopen");
        assert_eq!(offsets.get("feed"), Some(5));
        assert!(!dir.path().join(TMP).exists());
    }

    #[test]
    fn a_damaged_file_is_an_error_not_an_empty_map() {
        let dir = tempfile::tempdir().expect("temp dir");
        Offsets::open(dir.path()).expect("open").commit("feed", 5).expect("commit");
        let path = dir.path().join(FILE);
        let mut bytes = fs::read(&path).expect("read");
        let last = bytes.len() - 6;
        bytes[last] ^= 1;
        fs::write(&path, bytes).expect("write");
        assert!(matches!(Offsets::open(dir.path()), Err(LogError::CorruptOffsets { .. })));
    }

    #[test]
    fn names_are_checked() {
        let dir = tempfile::tempdir().expect("temp dir");
        let offsets = Offsets::open(dir.path()).expect("open");
        for bad in ["", "tab\there", &"x".repeat(MAX_CONSUMER_NAME + 1)] {
            assert!(matches!(offsets.commit(bad, 1), Err(LogError::InvalidConsumerName(_))));
        }
        offsets.commit(&"y".repeat(MAX_CONSUMER_NAME), 1).expect("longest name");
    }

    #[test]
    fn concurrent_commits_all_land() {
        let dir = tempfile::tempdir().expect("temp dir");
        let offsets = std::sync::Arc::new(Offsets::open(dir.path()).expect("open"));
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let offsets = offsets.clone();
                std::thread::spawn(move || {
                    for i in 0..20 {
                        offsets.commit(&format!("c{t}"), i).expect("commit");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        drop(offsets);
        let offsets = Offsets::open(dir.path()).expect("reopen");
        for t in 0..8 {
            assert_eq!(offsets.get(&format!("c{t}")), Some(19));
        }
    }
}
