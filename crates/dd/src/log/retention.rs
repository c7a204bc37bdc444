//! Retention: whole segments are deleted, oldest first, once past the topic's age or size.

use std::fs;
use std::io::ErrorKind;
use std::time::SystemTime;

use super::segment;
use super::topic::Shared;
use super::{io_err, LogError};

/// What one retention pass did to a topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetentionReport {
    pub segments_deleted: usize,
    pub bytes_deleted: u64,
    /// The topic's start offset after the pass.
    pub start_offset: u64,
    /// The segment being written holds records past retention by age: it must be closed
    /// before a pass can delete it.
    pub(crate) active_expired: bool,
}

impl Shared {
    pub(crate) fn enforce_retention(&self) -> Result<RetentionReport, LogError> {
        let config = &self.config;
        let now = SystemTime::now();
        let expired = |modified: SystemTime| {
            config
                .retention_age
                .is_some_and(|age| now.duration_since(modified).is_ok_and(|d| d >= age))
        };
        let (removed, start_offset, active_expired) = {
            let mut segs = self.segments_mut();
            let mut remaining: u64 = segs.iter().map(|s| s.len).sum();
            let mut delete = 0;
            // Segments are in offset order, so in order of their last write too.
            while delete + 1 < segs.len() {
                let s = &segs[delete];
                let too_big = config.retention_bytes.is_some_and(|max| remaining > max);
                if !(expired(s.modified) || too_big) {
                    break;
                }
                remaining -= s.len;
                delete += 1;
            }
            let removed: Vec<_> = segs.drain(..delete).collect();
            let active = &segs[segs.len() - 1];
            (removed, segs[0].base, active.len > 0 && expired(active.modified))
        };
        let mut report =
            RetentionReport { start_offset, active_expired, ..RetentionReport::default() };
        for s in &removed {
            // A reader still holding the file finishes its read: the data goes with the last
            // descriptor.
            for path in
                [segment::log_path(&self.dir, s.base), segment::index_path(&self.dir, s.base)]
            {
                match fs::remove_file(&path) {
                    Err(e) if e.kind() != ErrorKind::NotFound => return Err(io_err(&path, e)),
                    _ => {}
                }
            }
            report.segments_deleted += 1;
            report.bytes_deleted += s.len;
        }
        if !removed.is_empty() {
            super::sync_dir(&self.dir)?;
        }
        Ok(report)
    }
}
