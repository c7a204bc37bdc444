//! Segment files: a topic's records in files named by the offset of their first record.
//!
//! `<base:020>.log` holds frames (see `frame.rs`) with consecutive offsets from `base`. A closed
//! segment also has `<base:020>.idx`, its sparse index written when it was closed, so opening a
//! topic does not scan every segment; the index file is only an accelerator: when it is missing
//! or does not match its segment, the segment is scanned and the file written again.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use super::frame::{self, Stop};
use super::{io_err, LogError};

const INDEX_MAGIC: &[u8; 4] = b"FCIX";
const INDEX_VERSION: u32 = 1;
/// How much of a segment a scan reads at a time.
const SCAN_CHUNK: usize = 1 << 20;

/// One entry of a sparse index: the record at `offset` starts at byte `pos` of its segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    pub offset: u64,
    pub pos: u64,
}

/// The sparse index of one segment: an entry for its first record, then for the first record
/// starting at least `interval` bytes after the previous entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SparseIndex {
    pub entries: Vec<IndexEntry>,
}

impl SparseIndex {
    /// Notes the record at `offset` starting at `pos`; records must come in order.
    pub fn note(&mut self, offset: u64, pos: u64, interval: u64) {
        if self.entries.last().is_none_or(|last| pos >= last.pos + interval) {
            self.entries.push(IndexEntry { offset, pos });
        }
    }

    /// Where to start reading to find `offset`: the last entry at or before it.
    pub fn seek(&self, offset: u64) -> Option<IndexEntry> {
        match self.entries.partition_point(|e| e.offset <= offset) {
            0 => None,
            i => Some(self.entries[i - 1]),
        }
    }
}

/// One segment as readers and the writer see it.
#[derive(Debug)]
pub struct Segment {
    /// Offset of its first record.
    pub base: u64,
    /// Offset after its last record (`base` when empty).
    pub end: u64,
    /// Bytes of whole, durable (or, under `fsync = interval`, written) records.
    pub len: u64,
    pub index: SparseIndex,
    /// Opened read-write: readers `pread`, the writer `pwrite`s, both at explicit positions.
    pub file: Arc<File>,
    /// When its last record was written: what retention by age looks at.
    pub modified: SystemTime,
}

pub fn log_path(dir: &Path, base: u64) -> PathBuf {
    dir.join(format!("{base:020}.log"))
}

pub fn index_path(dir: &Path, base: u64) -> PathBuf {
    dir.join(format!("{base:020}.idx"))
}

/// Base offsets of the segments in `dir`, in order.
pub fn list(dir: &Path) -> Result<Vec<u64>, LogError> {
    let mut bases = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| io_err(dir, e))? {
        let entry = entry.map_err(|e| io_err(dir, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(base) = name.strip_suffix(".log").and_then(|b| b.parse::<u64>().ok()) {
            bases.push(base);
        }
    }
    bases.sort_unstable();
    Ok(bases)
}

fn open_rw(path: &Path, create_new: bool) -> Result<File, LogError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(create_new)
        .open(path)
        .map_err(|e| io_err(path, e))
}

/// A new, empty segment starting at `base`.
pub fn create(dir: &Path, base: u64) -> Result<Segment, LogError> {
    let path = log_path(dir, base);
    let file = open_rw(&path, true)?;
    // The new file's name must outlive a power loss with the records acknowledged in it.
    super::sync_dir(dir)?;
    Ok(Segment {
        base,
        end: base,
        len: 0,
        index: SparseIndex::default(),
        file: Arc::new(file),
        modified: SystemTime::now(),
    })
}

/// What opening a segment found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Recovered {
    /// Bytes cut off its end: a torn or damaged tail.
    pub truncated: u64,
    /// Whether the segment had to be scanned (no usable index file).
    pub scanned: bool,
}

/// Opens the segment at `base`. The last segment (`last`) is always scanned, every record's
/// checksum checked, and cut at the first torn or damaged record: what a crash left half
/// written was never acknowledged. A closed segment is trusted to its index file when that
/// matches the file; otherwise it is scanned (and cut) the same way.
pub fn open(
    dir: &Path,
    base: u64,
    last: bool,
    interval: u64,
) -> Result<(Segment, Recovered), LogError> {
    let path = log_path(dir, base);
    let file = open_rw(&path, false)?;
    let meta = file.metadata().map_err(|e| io_err(&path, e))?;
    let modified = meta.modified().unwrap_or_else(|_| SystemTime::now());
    if !last {
        if let Some((end, index)) = read_index(dir, base, meta.len()) {
            let segment =
                Segment { base, end, len: meta.len(), index, file: Arc::new(file), modified };
            return Ok((segment, Recovered::default()));
        }
    }
    let scan = scan_file(&file, &path, base, meta.len(), interval)?;
    let truncated = meta.len() - scan.len;
    if truncated > 0 {
        tracing::warn!(
            segment = %path.display(),
            kept = scan.len,
            truncated,
            "log recovery: cutting a torn or damaged tail"
        );
        file.set_len(scan.len).map_err(|e| io_err(&path, e))?;
        // Durable before anything is appended after it, so no stale frame can reappear behind
        // new ones.
        file.sync_all().map_err(|e| io_err(&path, e))?;
    }
    let segment = Segment {
        base,
        end: scan.end,
        len: scan.len,
        index: scan.index,
        file: Arc::new(file),
        modified,
    };
    if !last {
        if let Err(e) = write_index(dir, &segment) {
            tracing::warn!(segment = %path.display(), error = %e, "log: cannot write a segment index");
        }
    }
    Ok((segment, Recovered { truncated, scanned: true }))
}

struct Scan {
    end: u64,
    len: u64,
    index: SparseIndex,
}

/// Reads the whole file in chunks, checking each record, and stops at the first one that is
/// cut short or bad.
fn scan_file(
    file: &File,
    path: &Path,
    base: u64,
    file_len: u64,
    interval: u64,
) -> Result<Scan, LogError> {
    let mut index = SparseIndex::default();
    let mut expected = base;
    // File position of buf[0].
    let mut pos = 0u64;
    let mut buf: Vec<u8> = Vec::new();
    let mut need = SCAN_CHUNK;
    loop {
        let from = pos + buf.len() as u64;
        let n = (file_len - from).min(need.max(SCAN_CHUNK) as u64) as usize;
        let old = buf.len();
        buf.resize(old + n, 0);
        file.read_exact_at(&mut buf[old..], from).map_err(|e| io_err(path, e))?;
        let eof = from + n as u64 == file_len;
        let stop = frame::scan(&buf, expected, |found| {
            index.note(found.offset, pos + found.pos as u64, interval);
            expected = found.offset + 1;
        });
        match stop {
            Stop::Clean => {
                pos += buf.len() as u64;
                buf.clear();
                if eof {
                    break;
                }
            }
            Stop::Short { pos: at } if !eof => {
                // Keep the partial frame and read at least the rest of it.
                need = frame::Header::parse(&buf[at..]).map_or(SCAN_CHUNK, |h| h.frame_len());
                buf.drain(..at);
                pos += at as u64;
            }
            Stop::Short { pos: at } | Stop::Bad { pos: at } => {
                pos += at as u64;
                break;
            }
        }
    }
    Ok(Scan { end: expected, len: pos, index })
}

/// Writes the sparse index of a closed segment next to it (through a temporary file and a
/// rename, so a crash leaves no half index that could pass for whole).
pub fn write_index(dir: &Path, segment: &Segment) -> Result<(), LogError> {
    let mut out = Vec::with_capacity(40 + segment.index.entries.len() * 16);
    out.extend_from_slice(INDEX_MAGIC);
    out.extend_from_slice(&INDEX_VERSION.to_le_bytes());
    for v in [segment.base, segment.end, segment.len, segment.index.entries.len() as u64] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for e in &segment.index.entries {
        out.extend_from_slice(&e.offset.to_le_bytes());
        out.extend_from_slice(&e.pos.to_le_bytes());
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    let path = index_path(dir, segment.base);
    let tmp = path.with_extension("idx.tmp");
    let write = || -> io::Result<()> {
        let mut f = File::create(&tmp)?;
        f.write_all(&out)?;
        f.sync_data()?;
        fs::rename(&tmp, &path)
    };
    write().map_err(|e| io_err(&path, e))
}

/// The index file of segment `base`, when it is whole and describes a segment of `len` bytes.
fn read_index(dir: &Path, base: u64, len: u64) -> Option<(u64, SparseIndex)> {
    let bytes = fs::read(index_path(dir, base)).ok()?;
    let (body, crc) = bytes.split_at_checked(bytes.len().checked_sub(4)?)?;
    if crc32c::crc32c(body).to_le_bytes() != crc || body.get(..4)? != INDEX_MAGIC {
        return None;
    }
    let word = |i: usize| -> Option<u64> {
        Some(u64::from_le_bytes(body.get(8 + i * 8..16 + i * 8)?.try_into().ok()?))
    };
    let version = u32::from_le_bytes(body.get(4..8)?.try_into().ok()?);
    if version != INDEX_VERSION || word(0)? != base || word(2)? != len {
        return None;
    }
    let end = word(1)?;
    let count = usize::try_from(word(3)?).ok()?;
    if body.len() != 40 + count.checked_mul(16)? {
        return None;
    }
    let entries = (0..count)
        .map(|i| Some(IndexEntry { offset: word(4 + 2 * i)?, pos: word(5 + 2 * i)? }))
        .collect::<Option<Vec<_>>>()?;
    Some((end, SparseIndex { entries }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_segment(dir: &Path, base: u64, payloads: &[Vec<u8>]) -> Vec<u8> {
        let mut buf = Vec::new();
        for (i, p) in payloads.iter().enumerate() {
            frame::encode(&mut buf, base + i as u64, p);
        }
        fs::write(log_path(dir, base), &buf).expect("segment written");
        buf
    }

    #[test]
    fn the_sparse_index_notes_one_record_per_interval() {
        let mut index = SparseIndex::default();
        // Records of 1,000 bytes each, an entry at most every 4,096.
        for i in 0..20u64 {
            index.note(100 + i, i * 1000, 4096);
        }
        let positions: Vec<u64> = index.entries.iter().map(|e| e.pos).collect();
        assert_eq!(positions, vec![0, 5000, 10000, 15000]);
        let pos = |offset| index.seek(offset).map(|e| (e.offset, e.pos));
        assert_eq!(pos(100), Some((100, 0)));
        assert_eq!(pos(104), Some((100, 0)));
        assert_eq!(pos(105), Some((105, 5000)));
        assert_eq!(pos(119), Some((115, 15000)));
        assert_eq!(pos(99), None);
    }

    #[test]
    fn a_closed_segment_opens_from_its_index_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let payloads: Vec<Vec<u8>> = (0..50).map(|i| vec![i as u8; 300]).collect();
        write_segment(dir.path(), 1000, &payloads);
        let (scanned, recovered) = open(dir.path(), 1000, false, 1024).expect("open");
        assert!(recovered.scanned, "no index file yet: scanned");
        assert_eq!((scanned.end, recovered.truncated), (1050, 0));
        assert!(index_path(dir.path(), 1000).exists(), "the scan wrote the index file");
        let (again, recovered) = open(dir.path(), 1000, false, 1024).expect("reopen");
        assert!(!recovered.scanned, "second open reads the index file");
        assert_eq!(
            (again.end, again.len, &again.index),
            (scanned.end, scanned.len, &scanned.index)
        );
    }

    #[test]
    fn an_index_file_that_does_not_match_its_segment_is_not_trusted() {
        let dir = tempfile::tempdir().expect("temp dir");
        let payloads: Vec<Vec<u8>> = (0..10).map(|i| vec![i as u8; 100]).collect();
        let bytes = write_segment(dir.path(), 0, &payloads);
        open(dir.path(), 0, false, 256).expect("open writes the index");
        // The segment shrinks behind the index's back.
        let cut = bytes.len() - 1;
        fs::write(log_path(dir.path(), 0), &bytes[..cut]).expect("cut");
        let (segment, recovered) = open(dir.path(), 0, false, 256).expect("reopen");
        assert!(recovered.scanned);
        assert_eq!(segment.end, 9, "the cut record is gone");
        assert_eq!(segment.len, (bytes.len() - frame::HEADER - 100) as u64);
    }

    #[test]
    fn a_scan_crosses_chunk_boundaries_and_large_records() {
        let dir = tempfile::tempdir().expect("temp dir");
        // Records larger than a scan chunk, and many small ones around them.
        let mut payloads: Vec<Vec<u8>> = (0..3000).map(|i| vec![(i % 251) as u8; 700]).collect();
        payloads.insert(100, vec![7; SCAN_CHUNK * 2 + 3]);
        payloads.push(vec![9; SCAN_CHUNK + 1]);
        let bytes = write_segment(dir.path(), 5, &payloads);
        let (segment, recovered) = open(dir.path(), 5, true, 4096).expect("open");
        assert_eq!(recovered.truncated, 0);
        assert_eq!(segment.end, 5 + payloads.len() as u64);
        assert_eq!(segment.len, bytes.len() as u64);
    }
}
