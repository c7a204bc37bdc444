//! The most recent writes of a topic, kept in memory as they were written.
//!
//! A reader that keeps up with the appenders (a feed, the aggregation: the usual case) gets its
//! records as slices of these buffers: no `pread`, no copy, no checksum to check (the bytes never
//! left memory). Older offsets, or a topic whose cache is off, are read from the segment files.
//! The writer adds a write's buffer only once it is acknowledged, and evicts the oldest buffers
//! beyond the configured size.

use std::collections::VecDeque;
use std::sync::RwLock;

use bytes::Bytes;

use super::frame::HEADER;

struct Chunk {
    /// Offset of the first record in `buf`.
    first: u64,
    /// Frames, as written to the file.
    buf: Bytes,
    /// Where each frame starts in `buf`.
    frames: Vec<u32>,
}

impl Chunk {
    fn end(&self) -> u64 {
        self.first + self.frames.len() as u64
    }

    fn payload(&self, i: usize) -> Bytes {
        let start = self.frames[i] as usize;
        let end = self.frames.get(i + 1).map_or(self.buf.len(), |&next| next as usize);
        self.buf.slice(start + HEADER..end)
    }
}

#[derive(Default)]
struct Chunks {
    chunks: VecDeque<Chunk>,
    bytes: usize,
}

pub(crate) struct Tail {
    capacity: usize,
    inner: RwLock<Chunks>,
}

impl Tail {
    pub fn new(capacity: usize) -> Tail {
        Tail { capacity, inner: RwLock::new(Chunks::default()) }
    }

    /// Whether a write of `len` bytes would be kept.
    pub fn keeps(&self, len: usize) -> bool {
        len > 0 && len <= self.capacity && len <= u32::MAX as usize
    }

    /// Adds a written buffer of frames whose first record is `first`, contiguous with the
    /// previous one (the cache starts over otherwise: after a write that was not kept).
    pub fn push(&self, first: u64, buf: Bytes, frames: Vec<u32>) {
        debug_assert!(self.keeps(buf.len()));
        let mut inner = self.inner.write().unwrap_or_else(|p| p.into_inner());
        if inner.chunks.back().is_some_and(|last| last.end() != first) {
            inner.chunks.clear();
            inner.bytes = 0;
        }
        inner.bytes += buf.len() + frames.len() * 4;
        inner.chunks.push_back(Chunk { first, buf, frames });
        while inner.bytes > self.capacity {
            let Some(old) = inner.chunks.pop_front() else { break };
            inner.bytes -= old.buf.len() + old.frames.len() * 4;
        }
    }

    /// The records from `from` (below `end`) within the limits, as [`Topic::read`] would return
    /// them, or `None` when `from` is not in the cache.
    ///
    /// [`Topic::read`]: super::Topic::read
    pub fn read(
        &self,
        from: u64,
        end: u64,
        max_bytes: usize,
        max_records: usize,
    ) -> Option<Vec<Bytes>> {
        let inner = self.inner.read().unwrap_or_else(|p| p.into_inner());
        let chunks = &inner.chunks;
        if chunks.front().is_none_or(|c| from < c.first)
            || chunks.back().is_none_or(|c| from >= c.end())
        {
            return None;
        }
        let mut at = chunks.partition_point(|c| c.first <= from) - 1;
        let mut offset = from;
        let mut records = Vec::new();
        let mut taken = 0;
        'chunks: while let Some(chunk) = chunks.get(at) {
            for i in (offset - chunk.first) as usize..chunk.frames.len() {
                // Records the writer has cached but not yet published stay unread.
                if offset >= end || records.len() >= max_records {
                    break 'chunks;
                }
                let payload = chunk.payload(i);
                let frame = HEADER + payload.len();
                if !records.is_empty() && taken + frame > max_bytes {
                    break 'chunks;
                }
                taken += frame;
                records.push(payload);
                offset += 1;
            }
            at += 1;
        }
        Some(records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::frame;

    fn chunk(first: u64, payloads: &[&str]) -> (Bytes, Vec<u32>) {
        let mut buf = Vec::new();
        let mut frames = Vec::new();
        for (i, p) in payloads.iter().enumerate() {
            frames.push(buf.len() as u32);
            frame::encode(&mut buf, first + i as u64, p.as_bytes());
        }
        (Bytes::from(buf), frames)
    }

    fn strings(records: Option<Vec<Bytes>>) -> Option<Vec<String>> {
        records.map(|r| r.iter().map(|b| String::from_utf8(b.to_vec()).expect("utf8")).collect())
    }

    #[test]
    fn reads_span_chunks_within_the_limits_and_the_end() {
        let tail = Tail::new(1 << 20);
        let (buf, frames) = chunk(10, &["a", "bb", "ccc"]);
        tail.push(10, buf, frames);
        let (buf, frames) = chunk(13, &["dddd", "e"]);
        tail.push(13, buf, frames);
        assert_eq!(
            strings(tail.read(11, 15, 1 << 20, 100)),
            Some(vec!["bb".into(), "ccc".into(), "dddd".into(), "e".into()])
        );
        assert_eq!(
            strings(tail.read(11, 14, 1 << 20, 100)),
            Some(vec!["bb".into(), "ccc".into(), "dddd".into()]),
            "not past the end"
        );
        assert_eq!(strings(tail.read(10, 15, 1 << 20, 2)), Some(vec!["a".into(), "bb".into()]));
        assert_eq!(
            strings(tail.read(12, 15, 2 * HEADER + 7, 100)),
            Some(vec!["ccc".into(), "dddd".into()])
        );
        assert_eq!(strings(tail.read(12, 15, 1, 100)), Some(vec!["ccc".into()]), "at least one");
        assert_eq!(tail.read(9, 15, 1 << 20, 100), None);
        assert_eq!(tail.read(15, 15, 1 << 20, 100), None);
    }

    #[test]
    fn the_oldest_chunks_go_beyond_the_capacity_and_a_gap_starts_over() {
        let (buf, frames) = chunk(0, &["0123456789"; 4]);
        let one = buf.len() + frames.len() * 4;
        let tail = Tail::new(2 * one);
        for first in [0, 4, 8] {
            let (buf, frames) = chunk(first, &["0123456789"; 4]);
            tail.push(first, buf, frames);
        }
        assert_eq!(tail.read(3, 12, 1 << 20, 100), None, "evicted");
        assert_eq!(tail.read(4, 12, 1 << 20, 100).map(|r| r.len()), Some(8));
        let (buf, frames) = chunk(20, &["x"]);
        tail.push(20, buf, frames);
        assert_eq!(tail.read(8, 21, 1 << 20, 100), None, "not contiguous: started over");
        assert_eq!(tail.read(20, 21, 1 << 20, 100).map(|r| r.len()), Some(1));
    }
}
