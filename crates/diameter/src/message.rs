//! Messages: decode from `Bytes`, encode into `BytesMut`, and the request/answer builders.

use bytes::{Bytes, BytesMut};

use crate::avp::{self, Avp, Parser, MAX_LEN_24};
use crate::dictionary::{self, base, AvpDef};
use crate::error::{EncodeError, Error};
use crate::header::{
    Header, FLAG_ERROR, FLAG_PROXIABLE, FLAG_REQUEST, FLAG_RETRANSMIT, HEADER_LEN,
};

/// A Diameter message: header plus top-level AVPs in wire order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub header: Header,
    pub avps: Vec<Avp>,
}

impl Message {
    /// A request for `command_code` in `application_id`. The P bit follows the dictionary
    /// (CER, DWR and DPR are not proxiable; application commands are), defaulting to set for
    /// commands the dictionary does not know. Ids are 0 until the peer layer assigns them.
    pub fn request(application_id: u32, command_code: u32) -> Message {
        let proxiable =
            dictionary::command(application_id, command_code).map(|c| c.proxiable).unwrap_or(true);
        let flags = FLAG_REQUEST | if proxiable { FLAG_PROXIABLE } else { 0 };
        Message {
            header: Header {
                flags,
                command_code,
                application_id,
                hop_by_hop_id: 0,
                end_to_end_id: 0,
            },
            avps: Vec::with_capacity(16),
        }
    }

    /// An answer to `req`: same command, application and ids, P bit copied, R bit clear, and the
    /// AVPs every answer echoes: Session-Id first (RFC 6733 §8.8) and Proxy-Info (§6.2).
    pub fn answer_to(req: &Message) -> Message {
        let mut ans = Message::answer_to_header(&req.header);
        if let Some(sid) = req.find(&base::SESSION_ID) {
            ans.avps.push(sid.clone());
        }
        ans.avps.extend(req.find_all(&base::PROXY_INFO).cloned());
        ans
    }

    fn answer_to_header(h: &Header) -> Message {
        Message {
            header: Header { flags: h.flags & FLAG_PROXIABLE, ..*h },
            avps: Vec::with_capacity(16),
        }
    }

    /// The answer to a request that failed decoding or validation: E bit for 3xxx, Session-Id
    /// and Proxy-Info echoed, Origin-Host/Realm, Result-Code, and Failed-AVP when the error
    /// names an AVP.
    pub fn error_answer(
        req: &Message,
        err: &Error,
        origin_host: &str,
        origin_realm: &str,
    ) -> Message {
        let mut ans = Message::answer_to(req);
        ans.fill_error(err, origin_host, origin_realm);
        ans
    }

    /// Like [`Message::error_answer`] for a request whose AVPs could not be decoded: only the
    /// header (from [`Header::peek`]) is known.
    pub fn error_answer_to_header(
        req: &Header,
        err: &Error,
        origin_host: &str,
        origin_realm: &str,
    ) -> Message {
        let mut ans = Message::answer_to_header(req);
        ans.fill_error(err, origin_host, origin_realm);
        ans
    }

    fn fill_error(&mut self, err: &Error, origin_host: &str, origin_realm: &str) {
        if err.is_protocol_error() {
            self.header.flags |= FLAG_ERROR;
        }
        self.avps.push(base::ORIGIN_HOST.identity(origin_host));
        self.avps.push(base::ORIGIN_REALM.identity(origin_realm));
        self.avps.push(base::RESULT_CODE.u32(err.result_code()));
        if let Some(a) = err.failed_avp() {
            self.avps.push(base::FAILED_AVP.grouped(vec![a.clone()]));
        }
    }

    /// Builder: appends an AVP.
    pub fn avp(mut self, avp: Avp) -> Message {
        self.avps.push(avp);
        self
    }

    /// Builder: appends AVPs.
    pub fn with_avps(mut self, avps: impl IntoIterator<Item = Avp>) -> Message {
        self.avps.extend(avps);
        self
    }

    /// Builder: sets hop-by-hop and end-to-end ids.
    pub fn ids(mut self, hop_by_hop_id: u32, end_to_end_id: u32) -> Message {
        self.header.hop_by_hop_id = hop_by_hop_id;
        self.header.end_to_end_id = end_to_end_id;
        self
    }

    pub fn push(&mut self, avp: Avp) {
        self.avps.push(avp);
    }

    pub fn command_code(&self) -> u32 {
        self.header.command_code
    }
    pub fn application_id(&self) -> u32 {
        self.header.application_id
    }
    pub fn hop_by_hop_id(&self) -> u32 {
        self.header.hop_by_hop_id
    }
    pub fn end_to_end_id(&self) -> u32 {
        self.header.end_to_end_id
    }
    pub fn set_hop_by_hop_id(&mut self, id: u32) {
        self.header.hop_by_hop_id = id;
    }
    pub fn set_end_to_end_id(&mut self, id: u32) {
        self.header.end_to_end_id = id;
    }
    pub fn is_request(&self) -> bool {
        self.header.is_request()
    }
    pub fn is_proxiable(&self) -> bool {
        self.header.is_proxiable()
    }
    pub fn is_error(&self) -> bool {
        self.header.is_error()
    }
    pub fn is_retransmit(&self) -> bool {
        self.header.is_retransmit()
    }
    /// Marks a request re-sent after failover (T bit), for the peer's duplicate detection.
    pub fn set_retransmit(&mut self, on: bool) {
        if on {
            self.header.flags |= FLAG_RETRANSMIT;
        } else {
            self.header.flags &= !FLAG_RETRANSMIT;
        }
    }

    /// First top-level AVP with `def`'s code and vendor.
    pub fn find(&self, def: &AvpDef) -> Option<&Avp> {
        self.avps.iter().find(|a| a.is(def))
    }

    /// All top-level AVPs with `def`'s code and vendor.
    pub fn find_all<'a>(&'a self, def: &'a AvpDef) -> impl Iterator<Item = &'a Avp> + 'a {
        self.avps.iter().filter(move |a| a.is(def))
    }

    /// Decodes one complete message (see [`crate::frame_len`] for finding its end in a stream).
    /// Top-level AVP framing is checked here; grouped payloads are parsed when read or by
    /// [`crate::validate`].
    pub fn decode(buf: Bytes) -> Result<Message, Error> {
        let header = Header::decode(&buf)?;
        // Room for the few AVPs a proxy adds (Destination-*, Route-Record) or a handler's
        // answer to it gets (Origin-*), without moving the others.
        let mut avps = Vec::with_capacity(avp::count(&buf[HEADER_LEN..]) + 4);
        for a in Parser::at(&buf, HEADER_LEN) {
            avps.push(a?);
        }
        Ok(Message { header, avps })
    }

    pub fn encoded_len(&self) -> usize {
        HEADER_LEN + self.avps.iter().map(Avp::encoded_len).sum::<usize>()
    }

    /// Appends the encoded message. The length is patched in after the AVPs are written, so
    /// each length is computed once.
    pub fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        let start = buf.len();
        self.header.encode(buf, 0);
        for a in &self.avps {
            if let Err(e) = a.encode(buf) {
                buf.truncate(start);
                return Err(e);
            }
        }
        let len = buf.len() - start;
        if len > MAX_LEN_24 {
            buf.truncate(start);
            return Err(EncodeError::MessageTooLong(len));
        }
        buf[start + 1..start + 4].copy_from_slice(&(len as u32).to_be_bytes()[1..]);
        Ok(())
    }

    pub fn to_bytes(&self) -> Result<Bytes, EncodeError> {
        let mut buf = BytesMut::with_capacity(self.encoded_len());
        self.encode(&mut buf)?;
        Ok(buf.freeze())
    }
}
