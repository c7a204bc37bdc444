//! The framing of one record on disk.
//!
//! ```text
//! 0   u32 LE  payload length
//! 4   u32 LE  CRC32C of bytes 8.. (the offset and the payload)
//! 8   u64 LE  the record's offset
//! 16  payload
//! ```
//!
//! The checksum covers the offset so that a record copied to the wrong place (or a stale block
//! the file system handed back after a crash) fails it too; a zero-filled tail, what a file
//! extended but never written reads as, fails it as well (the CRC32C of eight zero bytes is not
//! zero).

/// Bytes of framing before each payload.
pub const HEADER: usize = 16;
/// The largest payload the log accepts: a length above it in a header is garbage, not a record.
pub const MAX_RECORD_BYTES: usize = 64 << 20;

/// A record's header as read from disk, before its checksum is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub len: u32,
    pub crc: u32,
    pub offset: u64,
}

impl Header {
    /// Reads the header at the start of `buf`, `None` when fewer than [`HEADER`] bytes remain.
    pub fn parse(buf: &[u8]) -> Option<Header> {
        let h: &[u8; HEADER] = buf.get(..HEADER)?.try_into().ok()?;
        Some(Header {
            len: u32::from_le_bytes([h[0], h[1], h[2], h[3]]),
            crc: u32::from_le_bytes([h[4], h[5], h[6], h[7]]),
            offset: u64::from_le_bytes([h[8], h[9], h[10], h[11], h[12], h[13], h[14], h[15]]),
        })
    }

    /// Header and payload together.
    pub fn frame_len(&self) -> usize {
        HEADER + self.len as usize
    }

    /// Whether `payload` is the one this header was written for.
    pub fn checks(&self, payload: &[u8]) -> bool {
        payload.len() == self.len as usize && checksum(self.offset, payload) == self.crc
    }
}

fn checksum(offset: u64, payload: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&offset.to_le_bytes()), payload)
}

/// Appends the frame of `payload` at `offset` to `buf`.
pub fn encode(buf: &mut Vec<u8>, offset: u64, payload: &[u8]) {
    debug_assert!(payload.len() <= MAX_RECORD_BYTES);
    buf.reserve(HEADER + payload.len());
    buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    buf.extend_from_slice(&checksum(offset, payload).to_le_bytes());
    buf.extend_from_slice(&offset.to_le_bytes());
    buf.extend_from_slice(payload);
}

/// What [`scan`] found at the end of a buffer of frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Every byte belonged to a whole, valid record.
    Clean,
    /// The record at this position is cut short by the end of the buffer.
    Short { pos: usize },
    /// The record at this position is not valid: its checksum fails, its offset is not the one
    /// expected, or its length is impossible.
    Bad { pos: usize },
}

/// One valid record found by [`scan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    pub offset: u64,
    /// Position of the frame's first byte in the buffer.
    pub pos: usize,
    pub len: usize,
}

/// Walks the frames of `buf`, expecting consecutive offsets from `expected`, calling `each` for
/// every valid record, and says why it stopped. The caller decides what a short or bad frame
/// means: the end of what is durable (recovery), or corruption (a read).
pub fn scan(buf: &[u8], mut expected: u64, mut each: impl FnMut(Found)) -> Stop {
    let mut pos = 0;
    while pos < buf.len() {
        let Some(h) = Header::parse(&buf[pos..]) else {
            return Stop::Short { pos };
        };
        if h.len as usize > MAX_RECORD_BYTES || h.offset != expected {
            return Stop::Bad { pos };
        }
        let end = pos + h.frame_len();
        if end > buf.len() {
            return Stop::Short { pos };
        }
        if !h.checks(&buf[pos + HEADER..end]) {
            return Stop::Bad { pos };
        }
        each(Found { offset: h.offset, pos, len: h.len as usize });
        expected += 1;
        pos = end;
    }
    Stop::Clean
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn payload(buf: &Bytes, found: &Found) -> Bytes {
        buf.slice(found.pos + HEADER..found.pos + HEADER + found.len)
    }

    fn frames(first: u64, payloads: &[&[u8]]) -> Vec<u8> {
        let mut buf = Vec::new();
        for (i, p) in payloads.iter().enumerate() {
            encode(&mut buf, first + i as u64, p);
        }
        buf
    }

    #[test]
    fn encoded_records_scan_back_in_order() {
        let buf = frames(7, &[b"one", b"", b"three and more"]);
        assert_eq!(buf.len(), 3 * HEADER + 3 + 14);
        let shared = Bytes::from(buf);
        let mut got = Vec::new();
        let stop = scan(&shared, 7, |f| got.push((f.offset, payload(&shared, &f))));
        assert_eq!(stop, Stop::Clean);
        assert_eq!(
            got,
            vec![
                (7, Bytes::from_static(b"one")),
                (8, Bytes::new()),
                (9, Bytes::from_static(b"three and more"))
            ]
        );
    }

    #[test]
    fn header_layout_is_length_crc_offset() {
        let buf = frames(0x0102_0304_0506_0708, &[b"ab"]);
        assert_eq!(&buf[0..4], &2u32.to_le_bytes());
        assert_eq!(&buf[8..16], &0x0102_0304_0506_0708u64.to_le_bytes());
        let crc = crc32c::crc32c(&buf[8..]);
        assert_eq!(&buf[4..8], &crc.to_le_bytes(), "the CRC covers the offset and the payload");
    }

    #[test]
    fn a_flipped_bit_anywhere_in_a_frame_is_bad() {
        let good = frames(3, &[b"payload"]);
        for byte in 0..good.len() {
            let mut buf = good.clone();
            buf[byte] ^= 0x10;
            let stop = scan(&buf, 3, |_| panic!("byte {byte} flipped yet the record passed"));
            // A flipped length bit may make the frame look longer than the buffer.
            assert!(matches!(stop, Stop::Bad { pos: 0 } | Stop::Short { pos: 0 }), "byte {byte}");
        }
    }

    #[test]
    fn a_cut_frame_is_short_at_its_start() {
        let buf = frames(0, &[b"first", b"second"]);
        let second = HEADER + 5;
        for cut in second + 1..buf.len() {
            let mut n = 0;
            assert_eq!(scan(&buf[..cut], 0, |_| n += 1), Stop::Short { pos: second });
            assert_eq!(n, 1);
        }
    }

    #[test]
    fn an_unexpected_offset_or_zeroes_are_bad() {
        let buf = frames(5, &[b"x"]);
        assert_eq!(scan(&buf, 6, |_| {}), Stop::Bad { pos: 0 });
        assert_eq!(scan(&[0u8; 64], 0, |_| {}), Stop::Bad { pos: 0 });
    }
}
