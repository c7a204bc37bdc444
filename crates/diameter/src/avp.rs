//! AVPs (RFC 6733 §4): header, flags, vendor id, padding, grouped AVPs, and typed payload access.
//!
//! A decoded AVP's payload is a `Bytes` slice of the received message (no copy); a grouped AVP
//! is parsed only when its children are asked for. A built grouped AVP keeps its children as a
//! tree so the encoder writes them in one pass.

use std::borrow::Cow;
use std::fmt;
use std::net::Ipv4Addr;

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{EncodeError, Error};
use crate::types::{Address, Time};

/// V bit: a Vendor-ID field follows the header.
pub const FLAG_VENDOR: u8 = 0x80;
/// M bit: the receiver must understand the AVP or reject the message (5001).
pub const FLAG_MANDATORY: u8 = 0x40;
/// P bit: reserved for end-to-end security, never set by us.
pub const FLAG_PROTECTED: u8 = 0x20;
const FLAG_RESERVED: u8 = 0x1f;

/// Largest value of the 24-bit length fields.
pub(crate) const MAX_LEN_24: usize = 0x00ff_ffff;

#[derive(Clone)]
enum Data {
    Raw(Bytes),
    Grouped(Vec<Avp>),
}

/// One AVP. Invariant: `vendor_id.is_some()` exactly when the V flag is set.
#[derive(Clone)]
pub struct Avp {
    code: u32,
    flags: u8,
    vendor_id: Option<u32>,
    data: Data,
}

impl Avp {
    /// An AVP with a raw payload; the V flag follows `vendor_id`.
    pub fn new(code: u32, vendor_id: Option<u32>, mandatory: bool, data: impl Into<Bytes>) -> Avp {
        Avp {
            code,
            flags: build_flags(vendor_id, mandatory),
            vendor_id,
            data: Data::Raw(data.into()),
        }
    }

    /// A grouped AVP built from its children.
    pub fn new_grouped(
        code: u32,
        vendor_id: Option<u32>,
        mandatory: bool,
        children: Vec<Avp>,
    ) -> Avp {
        Avp {
            code,
            flags: build_flags(vendor_id, mandatory),
            vendor_id,
            data: Data::Grouped(children),
        }
    }

    /// An AVP with the flags exactly as given (the V flag is forced to match `vendor_id`).
    /// Used by the decoder and by tests that need unusual flags.
    pub fn from_parts(code: u32, flags: u8, vendor_id: Option<u32>, data: Bytes) -> Avp {
        let flags = if vendor_id.is_some() { flags | FLAG_VENDOR } else { flags & !FLAG_VENDOR };
        Avp { code, flags, vendor_id, data: Data::Raw(data) }
    }

    pub fn code(&self) -> u32 {
        self.code
    }
    pub fn flags(&self) -> u8 {
        self.flags
    }
    pub fn vendor_id(&self) -> Option<u32> {
        self.vendor_id
    }
    /// Vendor id with 0 for IETF AVPs: the dictionary key.
    pub fn vendor(&self) -> u32 {
        self.vendor_id.unwrap_or(0)
    }
    pub fn is_mandatory(&self) -> bool {
        self.flags & FLAG_MANDATORY != 0
    }
    pub fn is_protected(&self) -> bool {
        self.flags & FLAG_PROTECTED != 0
    }
    /// Whether this is `def`'s AVP (same code and vendor).
    pub fn is(&self, def: &crate::dictionary::AvpDef) -> bool {
        self.code == def.code && self.vendor() == def.vendor_id
    }

    fn header_len(&self) -> usize {
        if self.vendor_id.is_some() {
            12
        } else {
            8
        }
    }

    /// Payload length, without header or padding.
    pub fn payload_len(&self) -> usize {
        match &self.data {
            Data::Raw(b) => b.len(),
            Data::Grouped(c) => c.iter().map(Avp::encoded_len).sum(),
        }
    }

    /// Bytes this AVP takes on the wire, padding included.
    pub fn encoded_len(&self) -> usize {
        pad4(self.header_len() + self.payload_len())
    }

    /// The payload. Free for decoded AVPs; a built grouped AVP is encoded on the fly.
    pub fn payload(&self) -> Bytes {
        match &self.data {
            Data::Raw(b) => b.clone(),
            Data::Grouped(c) => {
                let mut buf = BytesMut::with_capacity(self.payload_len());
                for a in c {
                    // Children that overflow 24 bits make the parent overflow too; the parent's
                    // own encode reports it, so a best-effort payload is fine here.
                    let _ = a.encode(&mut buf);
                }
                buf.freeze()
            }
        }
    }

    /// Appends the AVP, padding included. The length is written once, after the payload, so
    /// grouped AVPs need no separate length pass.
    pub fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        let start = buf.len();
        buf.put_u32(self.code);
        buf.put_u32(0); // flags and length, patched below
        if let Some(v) = self.vendor_id {
            buf.put_u32(v);
        }
        match &self.data {
            Data::Raw(b) => buf.put_slice(b),
            Data::Grouped(c) => {
                for a in c {
                    a.encode(buf)?;
                }
            }
        }
        let len = buf.len() - start;
        if len > MAX_LEN_24 {
            buf.truncate(start);
            return Err(EncodeError::AvpTooLong { code: self.code, len });
        }
        let word = (u32::from(self.flags) << 24) | len as u32;
        buf[start + 4..start + 8].copy_from_slice(&word.to_be_bytes());
        buf.put_bytes(0, pad4(len) - len);
        Ok(())
    }

    /// Children of a grouped AVP: borrowed when built, parsed (lazily, now) when decoded.
    pub fn children(&self) -> Result<Cow<'_, [Avp]>, Error> {
        match &self.data {
            Data::Grouped(c) => Ok(Cow::Borrowed(c)),
            Data::Raw(b) => Ok(Cow::Owned(AvpIter::new(b.clone()).collect::<Result<Vec<_>, _>>()?)),
        }
    }

    /// First child with `def`'s code and vendor, scanning without collecting the others.
    pub fn child(&self, def: &crate::dictionary::AvpDef) -> Option<Avp> {
        match &self.data {
            Data::Grouped(c) => c.iter().find(|a| a.is(def)).cloned(),
            Data::Raw(b) => AvpIter::new(b.clone()).map_while(Result::ok).find(|a| a.is(def)),
        }
    }

    /// All children with `def`'s code and vendor.
    pub fn children_of(&self, def: &crate::dictionary::AvpDef) -> Vec<Avp> {
        match &self.data {
            Data::Grouped(c) => c.iter().filter(|a| a.is(def)).cloned().collect(),
            Data::Raw(b) => {
                AvpIter::new(b.clone()).map_while(Result::ok).filter(|a| a.is(def)).collect()
            }
        }
    }

    fn raw(&self) -> Result<&Bytes, Error> {
        match &self.data {
            Data::Raw(b) => Ok(b),
            Data::Grouped(_) => Err(Error::InvalidAvpValue(self.clone())),
        }
    }

    fn fixed<const N: usize>(&self) -> Result<[u8; N], Error> {
        self.raw()?[..].try_into().map_err(|_| Error::InvalidAvpLength(Some(self.clone())))
    }

    pub fn as_u32(&self) -> Result<u32, Error> {
        self.fixed().map(u32::from_be_bytes)
    }
    pub fn as_i32(&self) -> Result<i32, Error> {
        self.fixed().map(i32::from_be_bytes)
    }
    pub fn as_u64(&self) -> Result<u64, Error> {
        self.fixed().map(u64::from_be_bytes)
    }
    pub fn as_i64(&self) -> Result<i64, Error> {
        self.fixed().map(i64::from_be_bytes)
    }
    pub fn as_f32(&self) -> Result<f32, Error> {
        self.fixed().map(f32::from_be_bytes)
    }
    pub fn as_f64(&self) -> Result<f64, Error> {
        self.fixed().map(f64::from_be_bytes)
    }
    /// Enumerated values are Integer32 on the wire; dictionaries list them as unsigned
    /// (Media-Type OTHER is 0xFFFFFFFF), so they are read as u32.
    pub fn as_enum(&self) -> Result<u32, Error> {
        self.as_u32()
    }
    pub fn as_time(&self) -> Result<Time, Error> {
        self.as_u32().map(Time)
    }
    /// UTF8String, DiameterIdentity, DiameterURI, IPFilterRule: borrowed from the message.
    pub fn as_str(&self) -> Result<&str, Error> {
        std::str::from_utf8(self.raw()?).map_err(|_| Error::InvalidAvpValue(self.clone()))
    }
    /// OctetString payload (a cheap `Bytes` clone).
    pub fn as_bytes(&self) -> Result<Bytes, Error> {
        self.raw().cloned()
    }
    pub fn as_address(&self) -> Result<Address, Error> {
        Address::decode(self.raw()?).map_err(|e| self.value_error(e))
    }
    /// An OctetString holding a raw IPv4 address (Framed-IP-Address).
    pub fn as_ipv4_octets(&self) -> Result<Ipv4Addr, Error> {
        self.fixed::<4>().map(Ipv4Addr::from)
    }

    pub(crate) fn value_error(&self, e: crate::types::ValueError) -> Error {
        match e {
            crate::types::ValueError::Length => Error::InvalidAvpLength(Some(self.clone())),
            crate::types::ValueError::Value => Error::InvalidAvpValue(self.clone()),
        }
    }
}

fn build_flags(vendor_id: Option<u32>, mandatory: bool) -> u8 {
    let mut f = 0;
    if vendor_id.is_some() {
        f |= FLAG_VENDOR;
    }
    if mandatory {
        f |= FLAG_MANDATORY;
    }
    f
}

pub(crate) const fn pad4(n: usize) -> usize {
    (n + 3) & !3
}

/// Two AVPs are equal when they encode to the same bytes, whether built or decoded.
impl PartialEq for Avp {
    fn eq(&self, other: &Avp) -> bool {
        if self.code != other.code || self.flags != other.flags || self.vendor_id != other.vendor_id
        {
            return false;
        }
        match (&self.data, &other.data) {
            (Data::Raw(a), Data::Raw(b)) => a == b,
            (Data::Grouped(a), Data::Grouped(b)) => a == b,
            _ => self.payload() == other.payload(),
        }
    }
}
impl Eq for Avp {}

impl fmt::Debug for Avp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = crate::dictionary::avp(self.code, self.vendor()).map(|d| d.name);
        let mut s = f.debug_struct("Avp");
        s.field("code", &self.code);
        if let Some(n) = name {
            s.field("name", &n);
        }
        s.field("flags", &format_args!("{:#04x}", self.flags));
        if let Some(v) = self.vendor_id {
            s.field("vendor", &v);
        }
        match &self.data {
            Data::Raw(b) => s.field("data", b),
            Data::Grouped(c) => s.field("children", c),
        };
        s.finish()
    }
}

/// Iterates the AVPs of a message body or grouped payload, yielding the first framing error and
/// then stopping.
pub struct AvpIter {
    buf: Bytes,
    pos: usize,
    failed: bool,
}

impl AvpIter {
    pub fn new(buf: Bytes) -> AvpIter {
        AvpIter { buf, pos: 0, failed: false }
    }

    fn next_avp(&mut self) -> Result<Avp, Error> {
        let rest = &self.buf[self.pos..];
        if rest.len() < 8 {
            // Not even an AVP header: report what there is as the offending AVP when a code
            // can be read.
            let partial = (rest.len() >= 4).then(|| {
                Avp::from_parts(
                    u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]),
                    0,
                    None,
                    Bytes::new(),
                )
            });
            return Err(Error::InvalidAvpLength(partial));
        }
        let code = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
        let flags = rest[4];
        let len = u32::from_be_bytes([0, rest[5], rest[6], rest[7]]) as usize;
        let has_vendor = flags & FLAG_VENDOR != 0;
        let hdr = if has_vendor { 12 } else { 8 };
        let vendor_id = if has_vendor && rest.len() >= 12 {
            Some(u32::from_be_bytes([rest[8], rest[9], rest[10], rest[11]]))
        } else {
            None
        };
        // Failed-AVP for a length error carries the header and whatever payload is present.
        let offending =
            |data: Bytes| Avp::from_parts(code, flags, vendor_id.or(has_vendor.then_some(0)), data);
        if len < hdr || rest.len() < hdr || len > rest.len() {
            let avail = rest.len().min(len.max(hdr));
            let data = if avail > hdr {
                self.buf.slice(self.pos + hdr..self.pos + avail)
            } else {
                Bytes::new()
            };
            return Err(Error::InvalidAvpLength(Some(offending(data))));
        }
        let data = self.buf.slice(self.pos + hdr..self.pos + len);
        // The last AVP of a grouped payload may lack its padding (senders differ on whether the
        // group length covers it); a message body always has it, as its length is checked to be
        // a multiple of 4 before AVPs are read.
        let padded = pad4(len).min(rest.len());
        if rest[len..padded].iter().any(|&b| b != 0) {
            return Err(Error::InvalidAvpLength(Some(offending(data))));
        }
        if flags & FLAG_RESERVED != 0 {
            return Err(Error::InvalidAvpBits(offending(data)));
        }
        self.pos += padded;
        Ok(Avp { code, flags, vendor_id, data: Data::Raw(data) })
    }
}

impl Iterator for AvpIter {
    type Item = Result<Avp, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.buf.len() {
            return None;
        }
        let r = self.next_avp();
        self.failed = r.is_err();
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_header_vendor_and_padding() {
        let a = Avp::new(1, Some(10415), true, &b"abcde"[..]);
        let mut buf = BytesMut::new();
        a.encode(&mut buf).unwrap();
        assert_eq!(
            &buf[..],
            &[0, 0, 0, 1, 0xc0, 0, 0, 17, 0, 0, 0x28, 0xaf, b'a', b'b', b'c', b'd', b'e', 0, 0, 0]
        );
        let back: Vec<_> = AvpIter::new(buf.freeze()).collect::<Result<_, _>>().unwrap();
        assert_eq!(back, vec![a]);
    }

    #[test]
    fn built_and_decoded_grouped_compare_equal() {
        let g = Avp::new_grouped(
            443,
            None,
            true,
            vec![Avp::new(450, None, true, &[0, 0, 0, 1][..]), Avp::new(444, None, true, "001")],
        );
        let mut buf = BytesMut::new();
        g.encode(&mut buf).unwrap();
        let d = AvpIter::new(buf.freeze()).next().unwrap().unwrap();
        assert_eq!(d, g);
        assert_eq!(d.children().unwrap().len(), 2);
    }

    #[test]
    fn typed_access_checks_size() {
        let a = Avp::new(415, None, true, &[0, 0, 1][..]);
        assert_eq!(a.as_u32().unwrap_err().result_code(), 5014);
        let s = Avp::new(263, None, true, &[0xc3, 0x28][..]);
        assert_eq!(s.as_str().unwrap_err().result_code(), 5004);
    }
}
