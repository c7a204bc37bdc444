//! The 20-byte message header (RFC 6733 §3) and stream framing.

use bytes::{BufMut, BytesMut};

use crate::error::Error;

pub const VERSION: u8 = 1;
pub const HEADER_LEN: usize = 20;

/// R bit: request (clear on answers).
pub const FLAG_REQUEST: u8 = 0x80;
/// P bit: may be proxied, relayed or redirected.
pub const FLAG_PROXIABLE: u8 = 0x40;
/// E bit: answer carries a protocol error (3xxx).
pub const FLAG_ERROR: u8 = 0x20;
/// T bit: potentially retransmitted after a link failover (duplicate detection).
pub const FLAG_RETRANSMIT: u8 = 0x10;
const FLAG_RESERVED: u8 = 0x0f;

/// Header fields other than version and length, which the codec owns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Header {
    pub flags: u8,
    pub command_code: u32,
    pub application_id: u32,
    pub hop_by_hop_id: u32,
    pub end_to_end_id: u32,
}

impl Header {
    pub fn is_request(&self) -> bool {
        self.flags & FLAG_REQUEST != 0
    }
    pub fn is_proxiable(&self) -> bool {
        self.flags & FLAG_PROXIABLE != 0
    }
    pub fn is_error(&self) -> bool {
        self.flags & FLAG_ERROR != 0
    }
    pub fn is_retransmit(&self) -> bool {
        self.flags & FLAG_RETRANSMIT != 0
    }

    /// Reads the header fields without checking the flags, so that an error answer can still
    /// echo the ids of a request whose flags or AVPs are bad. Errors only when the bytes are not
    /// a Diameter header at all: the connection cannot be answered on, only closed.
    pub fn peek(buf: &[u8]) -> Result<(Header, usize), Error> {
        if buf.len() < HEADER_LEN {
            return Err(Error::InvalidMessageLength { declared: 0, actual: buf.len() });
        }
        if buf[0] != VERSION {
            return Err(Error::UnsupportedVersion(buf[0]));
        }
        let len = u32::from_be_bytes([0, buf[1], buf[2], buf[3]]);
        let word = |i: usize| u32::from_be_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        let header = Header {
            flags: buf[4],
            command_code: word(4) & 0x00ff_ffff,
            application_id: word(8),
            hop_by_hop_id: word(12),
            end_to_end_id: word(16),
        };
        Ok((header, len as usize))
    }

    /// Reads and checks the header of a complete message held in `buf`.
    pub fn decode(buf: &[u8]) -> Result<Header, Error> {
        let (header, len) = Header::peek(buf)?;
        if len != buf.len() || len % 4 != 0 || len < HEADER_LEN {
            return Err(Error::InvalidMessageLength { declared: len as u32, actual: buf.len() });
        }
        if header.flags & FLAG_RESERVED != 0 || (header.is_request() && header.is_error()) {
            return Err(Error::InvalidHeaderBits(header.flags));
        }
        Ok(header)
    }

    /// Appends the header with the given total message length.
    pub(crate) fn encode(&self, buf: &mut BytesMut, len: u32) {
        buf.put_u32((u32::from(VERSION) << 24) | (len & 0x00ff_ffff));
        buf.put_u32((u32::from(self.flags) << 24) | (self.command_code & 0x00ff_ffff));
        buf.put_u32(self.application_id);
        buf.put_u32(self.hop_by_hop_id);
        buf.put_u32(self.end_to_end_id);
    }
}

/// Stream framing for the transport: `Ok(Some(n))` when the first `n` bytes of `buf` are a whole
/// message, `Ok(None)` when more bytes are needed, and an error when the header cannot be a
/// Diameter header (bad version, length under 20 or not a multiple of 4): the stream has lost
/// sync and the connection must be closed.
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, Error> {
    if buf.is_empty() {
        return Ok(None);
    }
    if buf[0] != VERSION {
        return Err(Error::UnsupportedVersion(buf[0]));
    }
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = u32::from_be_bytes([0, buf[1], buf[2], buf[3]]) as usize;
    if len < HEADER_LEN || len % 4 != 0 {
        return Err(Error::InvalidMessageLength { declared: len as u32, actual: buf.len() });
    }
    Ok((buf.len() >= len).then_some(len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_needs_the_whole_message() {
        let mut m =
            vec![1, 0, 0, 24, 0x80, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 9, 9, 9, 9];
        assert_eq!(frame_len(&m[..0]), Ok(None));
        assert_eq!(frame_len(&m[..3]), Ok(None));
        assert_eq!(frame_len(&m[..23]), Ok(None));
        assert_eq!(frame_len(&m), Ok(Some(24)));
        m.extend_from_slice(&[1, 0, 0]);
        assert_eq!(frame_len(&m), Ok(Some(24)));
        m[3] = 22;
        assert_eq!(frame_len(&m).unwrap_err().result_code(), 5015);
        m[3] = 16;
        assert_eq!(frame_len(&m).unwrap_err().result_code(), 5015);
        m[0] = 2;
        assert_eq!(frame_len(&m).unwrap_err().result_code(), 5011);
    }
}
