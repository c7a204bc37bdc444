//! The copy envelope, version 1: one message copy (an HTTP/2 request or answer, or a Diameter
//! message) with the metadata the Data Director filters, orders and correlates on.
//!
//! Binary, not JSON, because the Data Director's budget is a few microseconds per message end to
//! end and the NF's is under two: fixed-width fields at fixed places, then length-prefixed strings,
//! so encoding is a few copies into one buffer and decoding is bounds checks and offsets (the body
//! and header list are never copied; [`Copy`] hands out slices of the record it was decoded from).
//! All integers are big-endian (network order), so any language can read a feed.
//!
//! ```text
//! offset size  field
//!  0     1     version (1)
//!  1     1     trigger point   1 ingress request, 2 ingress response, 3 egress request, 4 egress response
//!  2     1     protocol        1 HTTP/2 (SBI), 2 Diameter
//!  3     1     flags           reserved, 0
//!  4     8     timestamp       nanoseconds since the UNIX epoch, when the NF saw the message
//!  12    8     sequence        per NF instance, +1 per copy (the guide's "message sequencing")
//!  20    8     transaction     the same for a request and its answer at one NF instance
//!  28    4     stream id       HTTP/2 stream id; Diameter hop-by-hop id
//!  32    4     status          HTTP status or Diameter Result-Code of an answer; 0 for a request
//!  36          strings, each u16 length + UTF-8 bytes, in this order:
//!              nf type ("PCF"), nf instance id, service ("npcf-smpolicycontrol", "Gx"),
//!              operation ("Npcf_SMPolicyControl_Create", "CCR-I"), method ("POST", "CCR"),
//!              path (the request's :path; empty for Diameter), peer (the other side's address),
//!              SUPI or IMSI, GPSI or MSISDN, session id (SM policy association, Diameter
//!              Session-Id, binding id): empty when unknown
//!        2     header count, then per header: u16 name length, name, u16 value length, value
//!              (the HTTP/2 header list as the NF saw it, pseudo-headers first; none for Diameter)
//!        4     body length, then the body (the JSON of an SBI message, or the whole Diameter
//!              message as sent on the wire)
//! ```
//!
//! A stream of envelopes (the ingest API's request body, a TCP feed, an on-disk log) frames each
//! one as a u32 big-endian length followed by the envelope: see [`frame`] and [`Frames`].

use bytes::{BufMut, Bytes, BytesMut};

/// The envelope version this code writes; a reader refuses any other.
pub const VERSION: u8 = 1;

/// The media type of a body made of framed envelopes (the ingest API, HTTP/2 feeds).
pub const CONTENT_TYPE: &str = "application/vnd.fivecore.dd-copies.v1";

const FIXED: usize = 36;
const STRINGS: usize = 10;

/// Where in the NF the message was copied (the reference's "trigger points").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TriggerPoint {
    IngressRequest = 1,
    IngressResponse = 2,
    EgressRequest = 3,
    EgressResponse = 4,
}

impl TriggerPoint {
    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => Self::IngressRequest,
            2 => Self::IngressResponse,
            3 => Self::EgressRequest,
            4 => Self::EgressResponse,
            _ => return None,
        })
    }

    /// The name used in configuration, filters and xDRs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::IngressRequest => "ingress_request",
            Self::IngressResponse => "ingress_response",
            Self::EgressRequest => "egress_request",
            Self::EgressResponse => "egress_response",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Self::IngressRequest, Self::IngressResponse, Self::EgressRequest, Self::EgressResponse]
            .into_iter()
            .find(|t| t.as_str() == s)
    }

    pub fn is_request(self) -> bool {
        matches!(self, Self::IngressRequest | Self::EgressRequest)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    Http2 = 1,
    Diameter = 2,
}

impl Protocol {
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(Self::Http2),
            2 => Some(Self::Diameter),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http2 => "http2",
            Self::Diameter => "diameter",
        }
    }
}

/// What an encoder is told about one copy; borrowed, so the NF builds it from what it already has.
#[derive(Debug, Clone, Copy)]
pub struct CopyMeta<'a> {
    pub trigger: TriggerPoint,
    pub protocol: Protocol,
    pub timestamp_ns: u64,
    pub sequence: u64,
    pub transaction: u64,
    pub stream_id: u32,
    pub status: u32,
    pub nf_type: &'a str,
    pub nf_instance: &'a str,
    pub service: &'a str,
    pub operation: &'a str,
    pub method: &'a str,
    pub path: &'a str,
    pub peer: &'a str,
    pub supi: &'a str,
    pub gpsi: &'a str,
    pub session_id: &'a str,
}

impl CopyMeta<'_> {
    fn strings(&self) -> [&str; STRINGS] {
        [
            self.nf_type,
            self.nf_instance,
            self.service,
            self.operation,
            self.method,
            self.path,
            self.peer,
            self.supi,
            self.gpsi,
            self.session_id,
        ]
    }
}

/// Why bytes are not an envelope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("the envelope ends early, at byte {0}")]
    Truncated(usize),
    #[error("envelope version {0} is not supported (this reader knows version 1)")]
    Version(u8),
    #[error("unknown trigger point {0}")]
    TriggerPoint(u8),
    #[error("unknown protocol {0}")]
    Protocol(u8),
    #[error("field {0} is not UTF-8")]
    Utf8(&'static str),
    #[error("{0} bytes follow the body")]
    Trailing(usize),
    #[error("a string or header is longer than 65,535 bytes")]
    TooLong,
}

const STRING_NAMES: [&str; STRINGS] = [
    "nf_type",
    "nf_instance",
    "service",
    "operation",
    "method",
    "path",
    "peer",
    "supi",
    "gpsi",
    "session_id",
];

/// The encoded size of a copy, to reserve once.
pub fn encoded_len<'h>(
    meta: &CopyMeta<'_>,
    headers: impl IntoIterator<Item = (&'h [u8], &'h [u8])>,
    body_len: usize,
) -> usize {
    let strings: usize = meta.strings().iter().map(|s| 2 + s.len()).sum();
    let headers: usize = headers.into_iter().map(|(n, v)| 4 + n.len() + v.len()).sum();
    FIXED + strings + 2 + headers + 4 + body_len
}

/// Appends one envelope to `out`. Strings and header fields longer than 65,535 bytes (no 3GPP
/// identifier or HTTP/2 header a peer sends is; h2 itself caps a header list at 16 KiB by default)
/// are refused rather than cut, so a copy is either whole or absent.
pub fn encode<'h, I>(
    meta: &CopyMeta<'_>,
    headers: I,
    body: &[u8],
    out: &mut BytesMut,
) -> Result<(), DecodeError>
where
    I: IntoIterator<Item = (&'h [u8], &'h [u8])>,
    I::IntoIter: Clone,
{
    let headers = headers.into_iter();
    let strings = meta.strings();
    if strings.iter().any(|s| s.len() > u16::MAX as usize)
        || headers.clone().any(|(n, v)| n.len() > u16::MAX as usize || v.len() > u16::MAX as usize)
    {
        return Err(DecodeError::TooLong);
    }
    let count = headers.clone().count();
    if count > u16::MAX as usize {
        return Err(DecodeError::TooLong);
    }
    out.reserve(encoded_len(meta, headers.clone(), body.len()));
    out.put_u8(VERSION);
    out.put_u8(meta.trigger as u8);
    out.put_u8(meta.protocol as u8);
    out.put_u8(0);
    out.put_u64(meta.timestamp_ns);
    out.put_u64(meta.sequence);
    out.put_u64(meta.transaction);
    out.put_u32(meta.stream_id);
    out.put_u32(meta.status);
    for s in strings {
        out.put_u16(s.len() as u16);
        out.put_slice(s.as_bytes());
    }
    out.put_u16(count as u16);
    for (n, v) in headers {
        out.put_u16(n.len() as u16);
        out.put_slice(n);
        out.put_u16(v.len() as u16);
        out.put_slice(v);
    }
    out.put_u32(body.len() as u32);
    out.put_slice(body);
    Ok(())
}

/// Appends one envelope framed for a stream (u32 length first).
pub fn encode_framed<'h, I>(
    meta: &CopyMeta<'_>,
    headers: I,
    body: &[u8],
    out: &mut BytesMut,
) -> Result<(), DecodeError>
where
    I: IntoIterator<Item = (&'h [u8], &'h [u8])>,
    I::IntoIter: Clone,
{
    let at = out.len();
    out.put_u32(0);
    if let Err(e) = encode(meta, headers, body, out) {
        out.truncate(at);
        return Err(e);
    }
    let len = (out.len() - at - 4) as u32;
    out[at..at + 4].copy_from_slice(&len.to_be_bytes());
    Ok(())
}

/// Frames an already encoded envelope for a stream.
pub fn frame(envelope: &[u8], out: &mut BytesMut) {
    out.reserve(4 + envelope.len());
    out.put_u32(envelope.len() as u32);
    out.put_slice(envelope);
}

/// A decoded envelope: the fixed fields, and the places of the strings, headers and body inside
/// the record it keeps (a cheap clone of the caller's `Bytes`).
#[derive(Debug, Clone)]
pub struct Copy {
    record: Bytes,
    pub trigger: TriggerPoint,
    pub protocol: Protocol,
    pub timestamp_ns: u64,
    pub sequence: u64,
    pub transaction: u64,
    pub stream_id: u32,
    pub status: u32,
    strings: [(u32, u32); STRINGS],
    headers: (u32, u32),
    header_count: u16,
    body: (u32, u32),
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<(usize, usize), DecodeError> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.b.len());
        let Some(end) = end else { return Err(DecodeError::Truncated(self.b.len())) };
        let start = self.at;
        self.at = end;
        Ok((start, end))
    }
    fn u16(&mut self) -> Result<u16, DecodeError> {
        let (s, _) = self.take(2)?;
        Ok(u16::from_be_bytes([self.b[s], self.b[s + 1]]))
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        let (s, e) = self.take(4)?;
        Ok(u32::from_be_bytes(self.b[s..e].try_into().expect("4 bytes")))
    }
}

fn be_u64(b: &[u8]) -> u64 {
    u64::from_be_bytes(b.try_into().expect("8 bytes"))
}

impl Copy {
    /// Decodes one envelope (without its stream frame). The whole record must be the envelope.
    pub fn decode(record: Bytes) -> Result<Copy, DecodeError> {
        let b = &record[..];
        if b.len() < FIXED {
            return Err(DecodeError::Truncated(b.len()));
        }
        if b[0] != VERSION {
            return Err(DecodeError::Version(b[0]));
        }
        let trigger = TriggerPoint::from_u8(b[1]).ok_or(DecodeError::TriggerPoint(b[1]))?;
        let protocol = Protocol::from_u8(b[2]).ok_or(DecodeError::Protocol(b[2]))?;
        let mut r = Reader { b, at: FIXED };
        let mut strings = [(0u32, 0u32); STRINGS];
        for (i, slot) in strings.iter_mut().enumerate() {
            let n = r.u16()? as usize;
            let (s, e) = r.take(n)?;
            std::str::from_utf8(&b[s..e]).map_err(|_| DecodeError::Utf8(STRING_NAMES[i]))?;
            *slot = (s as u32, e as u32);
        }
        let header_count = r.u16()?;
        let headers_start = r.at;
        for _ in 0..header_count {
            let n = r.u16()? as usize;
            r.take(n)?;
            let v = r.u16()? as usize;
            r.take(v)?;
        }
        let headers = (headers_start as u32, r.at as u32);
        let body_len = r.u32()? as usize;
        let (bs, be) = r.take(body_len)?;
        if be != b.len() {
            return Err(DecodeError::Trailing(b.len() - be));
        }
        Ok(Copy {
            trigger,
            protocol,
            timestamp_ns: be_u64(&b[4..12]),
            sequence: be_u64(&b[12..20]),
            transaction: be_u64(&b[20..28]),
            stream_id: u32::from_be_bytes(b[28..32].try_into().expect("4 bytes")),
            status: u32::from_be_bytes(b[32..36].try_into().expect("4 bytes")),
            strings,
            headers,
            header_count,
            body: (bs as u32, be as u32),
            record,
        })
    }

    fn string(&self, i: usize) -> &str {
        let (s, e) = self.strings[i];
        // Checked once by decode().
        std::str::from_utf8(&self.record[s as usize..e as usize]).unwrap_or_default()
    }

    pub fn nf_type(&self) -> &str {
        self.string(0)
    }
    pub fn nf_instance(&self) -> &str {
        self.string(1)
    }
    pub fn service(&self) -> &str {
        self.string(2)
    }
    pub fn operation(&self) -> &str {
        self.string(3)
    }
    pub fn method(&self) -> &str {
        self.string(4)
    }
    pub fn path(&self) -> &str {
        self.string(5)
    }
    pub fn peer(&self) -> &str {
        self.string(6)
    }
    pub fn supi(&self) -> &str {
        self.string(7)
    }
    pub fn gpsi(&self) -> &str {
        self.string(8)
    }
    pub fn session_id(&self) -> &str {
        self.string(9)
    }

    /// The body, sharing the record's memory.
    pub fn body(&self) -> Bytes {
        self.record.slice(self.body.0 as usize..self.body.1 as usize)
    }

    pub fn header_count(&self) -> usize {
        self.header_count as usize
    }

    /// The header list in the order the NF saw it.
    pub fn headers(&self) -> Headers<'_> {
        Headers {
            b: &self.record[self.headers.0 as usize..self.headers.1 as usize],
            left: self.header_count,
        }
    }

    /// The value of the first header of that name (names compare ASCII case-insensitively).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers().find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes())).map(|(_, v)| v)
    }

    /// The envelope's bytes, as received.
    pub fn record(&self) -> &Bytes {
        &self.record
    }
}

/// Iterator over an envelope's header list.
#[derive(Clone)]
pub struct Headers<'a> {
    b: &'a [u8],
    left: u16,
}

impl<'a> Iterator for Headers<'a> {
    type Item = (&'a [u8], &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // Bounds were checked by decode().
        let n = u16::from_be_bytes([self.b[0], self.b[1]]) as usize;
        let name = &self.b[2..2 + n];
        let rest = &self.b[2 + n..];
        let v = u16::from_be_bytes([rest[0], rest[1]]) as usize;
        let value = &rest[2..2 + v];
        self.b = &rest[2 + v..];
        Some((name, value))
    }
}

/// Splits a buffer of framed envelopes into records (`Bytes` slices of `buf`, no copy). A buffer
/// that ends inside a frame yields [`DecodeError::Truncated`] last, so a stream reader can keep
/// the tail for its next read and an ingest answer can name the broken frame.
pub struct Frames {
    buf: Bytes,
    at: usize,
    /// A cut frame was reported: the iterator has ended (`count()`, `filter(is_ok)` and the
    /// like would otherwise loop on it for ever).
    cut: bool,
}

impl Frames {
    pub fn new(buf: Bytes) -> Self {
        Frames { buf, at: 0, cut: false }
    }

    /// Bytes consumed by the whole frames returned so far.
    pub fn consumed(&self) -> usize {
        self.at
    }
}

impl Iterator for Frames {
    type Item = Result<Bytes, DecodeError>;
    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.buf.len() - self.at;
        if rest == 0 || self.cut {
            return None;
        }
        let len = match self.buf.get(self.at..self.at + 4) {
            Some(b) => u32::from_be_bytes(b.try_into().expect("4 bytes")) as usize,
            None => usize::MAX,
        };
        if rest < 4 || rest - 4 < len {
            self.cut = true;
            return Some(Err(DecodeError::Truncated(self.at)));
        }
        let rec = self.buf.slice(self.at + 4..self.at + 4 + len);
        self.at += 4 + len;
        Some(Ok(rec))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> CopyMeta<'static> {
        CopyMeta {
            trigger: TriggerPoint::IngressResponse,
            protocol: Protocol::Http2,
            timestamp_ns: 1_790_000_000_123_456_789,
            sequence: 42,
            transaction: 7,
            stream_id: 13,
            status: 201,
            nf_type: "PCF",
            nf_instance: "5a7bd676-ceeb-44bb-95e0-f6a55a328b03",
            service: "npcf-smpolicycontrol",
            operation: "Npcf_SMPolicyControl_Create",
            method: "POST",
            path: "/npcf-smpolicycontrol/v1/sm-policies",
            peer: "127.0.0.1:40000",
            supi: "imsi-001010000000001",
            gpsi: "",
            session_id: "1",
        }
    }

    #[test]
    fn a_copy_survives_the_round_trip_field_by_field() {
        let headers: [(&[u8], &[u8]); 3] = [
            (b":status", b"201"),
            (b"content-type", b"application/json"),
            (b"location", b"http://pcf/npcf-smpolicycontrol/v1/sm-policies/1"),
        ];
        let body = br#"{"sessRules":{}}"#;
        let mut out = BytesMut::new();
        encode(&meta(), headers, body, &mut out).unwrap();
        assert_eq!(out.len(), encoded_len(&meta(), headers, body.len()));
        let c = Copy::decode(out.freeze()).unwrap();
        let m = meta();
        assert_eq!(c.trigger, m.trigger);
        assert_eq!(c.protocol, m.protocol);
        assert_eq!((c.timestamp_ns, c.sequence, c.transaction), (m.timestamp_ns, 42, 7));
        assert_eq!((c.stream_id, c.status), (13, 201));
        assert_eq!(
            [
                c.nf_type(),
                c.nf_instance(),
                c.service(),
                c.operation(),
                c.method(),
                c.path(),
                c.peer(),
                c.supi(),
                c.gpsi(),
                c.session_id()
            ],
            m.strings()
        );
        assert_eq!(c.headers().collect::<Vec<_>>(), headers.to_vec());
        assert_eq!(c.header("Content-Type"), Some(&b"application/json"[..]));
        assert_eq!(c.header_count(), 3);
        assert_eq!(&c.body()[..], body);
    }

    #[test]
    fn every_cut_of_an_envelope_is_refused_not_misread() {
        let headers: [(&[u8], &[u8]); 1] = [(b":method", b"POST")];
        let mut out = BytesMut::new();
        encode(&meta(), headers, b"{}", &mut out).unwrap();
        let full = out.freeze();
        for n in 0..full.len() {
            assert!(Copy::decode(full.slice(..n)).is_err(), "cut at {n}");
        }
        let mut longer = BytesMut::from(&full[..]);
        longer.put_u8(0);
        assert_eq!(Copy::decode(longer.freeze()).unwrap_err(), DecodeError::Trailing(1));
    }

    #[test]
    fn wrong_version_trigger_protocol_and_utf8_are_named() {
        let mut out = BytesMut::new();
        encode(&meta(), [], b"", &mut out).unwrap();
        let mut b = out.to_vec();
        b[0] = 2;
        assert_eq!(Copy::decode(b.clone().into()).unwrap_err(), DecodeError::Version(2));
        b[0] = 1;
        b[1] = 9;
        assert_eq!(Copy::decode(b.clone().into()).unwrap_err(), DecodeError::TriggerPoint(9));
        b[1] = 1;
        b[2] = 0;
        assert_eq!(Copy::decode(b.clone().into()).unwrap_err(), DecodeError::Protocol(0));
        b[2] = 1;
        b[FIXED + 2] = 0xff; // first byte of nf_type "PCF"
        assert_eq!(Copy::decode(b.into()).unwrap_err(), DecodeError::Utf8("nf_type"));
    }

    #[test]
    fn overlong_fields_are_refused_and_leave_the_buffer_as_it_was() {
        let long = "x".repeat(70_000);
        let mut m = meta();
        m.supi = &long;
        let mut out = BytesMut::from(&b"keep"[..]);
        assert_eq!(encode_framed(&m, [], b"", &mut out), Err(DecodeError::TooLong));
        assert_eq!(&out[..], b"keep");
    }

    #[test]
    fn frames_split_a_stream_and_report_a_partial_tail() {
        let mut out = BytesMut::new();
        encode_framed(&meta(), [], b"a", &mut out).unwrap();
        encode_framed(&meta(), [], b"bb", &mut out).unwrap();
        let whole = out.len();
        out.put_slice(&[0, 0, 0, 9, 1]);
        let mut f = Frames::new(out.freeze());
        assert_eq!(&Copy::decode(f.next().unwrap().unwrap()).unwrap().body()[..], b"a");
        assert_eq!(&Copy::decode(f.next().unwrap().unwrap()).unwrap().body()[..], b"bb");
        assert_eq!(f.consumed(), whole);
        assert_eq!(f.next().unwrap().unwrap_err(), DecodeError::Truncated(whole));
        assert_eq!(f.consumed(), whole);
    }

    #[test]
    fn a_cut_frame_ends_the_iteration() {
        let mut out = BytesMut::new();
        encode_framed(&meta(), [], b"a", &mut out).unwrap();
        out.put_slice(&[0, 0]);
        let f = Frames::new(out.freeze());
        // Found by fuzz/ (dd_copy): the cut frame came back for ever, so count() never returned.
        assert_eq!(f.map(|r| r.is_ok()).collect::<Vec<_>>(), [true, false]);
    }

    #[test]
    fn trigger_points_have_stable_names() {
        for t in [
            TriggerPoint::IngressRequest,
            TriggerPoint::IngressResponse,
            TriggerPoint::EgressRequest,
            TriggerPoint::EgressResponse,
        ] {
            assert_eq!(TriggerPoint::parse(t.as_str()), Some(t));
            assert_eq!(TriggerPoint::from_u8(t as u8), Some(t));
        }
        assert!(TriggerPoint::IngressRequest.is_request());
        assert!(!TriggerPoint::EgressResponse.is_request());
    }
}
