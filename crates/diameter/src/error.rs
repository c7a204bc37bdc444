//! Decode and validation errors, each mapped to the RFC 6733 result code a peer must answer with.
//!
//! The error *is* the answer: the transport turns it into an error answer with
//! [`Message::error_answer`](crate::Message::error_answer), so every variant that concerns an AVP
//! carries the offending AVP for the Failed-AVP (RFC 6733 §7.5).

use crate::avp::Avp;

/// RFC 6733 §7.1 result codes this crate produces or that every peer implementation needs.
pub mod result_code {
    pub const DIAMETER_SUCCESS: u32 = 2001;
    pub const DIAMETER_LIMITED_SUCCESS: u32 = 2002;
    pub const DIAMETER_COMMAND_UNSUPPORTED: u32 = 3001;
    pub const DIAMETER_UNABLE_TO_DELIVER: u32 = 3002;
    pub const DIAMETER_REALM_NOT_SERVED: u32 = 3003;
    pub const DIAMETER_TOO_BUSY: u32 = 3004;
    pub const DIAMETER_LOOP_DETECTED: u32 = 3005;
    pub const DIAMETER_REDIRECT_INDICATION: u32 = 3006;
    pub const DIAMETER_APPLICATION_UNSUPPORTED: u32 = 3007;
    pub const DIAMETER_INVALID_HDR_BITS: u32 = 3008;
    pub const DIAMETER_INVALID_AVP_BITS: u32 = 3009;
    pub const DIAMETER_UNKNOWN_PEER: u32 = 3010;
    pub const DIAMETER_AUTHENTICATION_REJECTED: u32 = 4001;
    pub const DIAMETER_OUT_OF_SPACE: u32 = 4002;
    pub const DIAMETER_ELECTION_LOST: u32 = 4003;
    pub const DIAMETER_AVP_UNSUPPORTED: u32 = 5001;
    pub const DIAMETER_UNKNOWN_SESSION_ID: u32 = 5002;
    pub const DIAMETER_AUTHORIZATION_REJECTED: u32 = 5003;
    pub const DIAMETER_INVALID_AVP_VALUE: u32 = 5004;
    pub const DIAMETER_MISSING_AVP: u32 = 5005;
    pub const DIAMETER_RESOURCES_EXCEEDED: u32 = 5006;
    pub const DIAMETER_CONTRADICTING_AVPS: u32 = 5007;
    pub const DIAMETER_AVP_NOT_ALLOWED: u32 = 5008;
    pub const DIAMETER_AVP_OCCURS_TOO_MANY_TIMES: u32 = 5009;
    pub const DIAMETER_NO_COMMON_APPLICATION: u32 = 5010;
    pub const DIAMETER_UNSUPPORTED_VERSION: u32 = 5011;
    pub const DIAMETER_UNABLE_TO_COMPLY: u32 = 5012;
    pub const DIAMETER_INVALID_BIT_IN_HEADER: u32 = 5013;
    pub const DIAMETER_INVALID_AVP_LENGTH: u32 = 5014;
    pub const DIAMETER_INVALID_MESSAGE_LENGTH: u32 = 5015;
    pub const DIAMETER_INVALID_AVP_BIT_COMBO: u32 = 5016;
    pub const DIAMETER_NO_COMMON_SECURITY: u32 = 5017;

    /// Protocol errors (3xxx) are answered with the E bit set (RFC 6733 §7.1.3); all other
    /// classes are carried in a normal answer.
    pub const fn is_protocol_error(code: u32) -> bool {
        code >= 3000 && code < 4000
    }
}

/// A message or AVP the codec or validator rejected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// Version field is not 1.
    #[error("unsupported Diameter version {0}")]
    UnsupportedVersion(u8),
    /// Message shorter than its header, length not a multiple of 4, or header length
    /// disagreeing with the bytes received.
    #[error("invalid message length: header says {declared}, got {actual} bytes")]
    InvalidMessageLength { declared: u32, actual: usize },
    /// A well-framed message longer than the receiver takes for its application (a node's
    /// `max_message_len`): answered 5015 too, but the stream stays in sync (the body is skipped).
    #[error("message too long: header says {declared} bytes, at most {limit} taken")]
    MessageTooLong { declared: u32, limit: usize },
    /// Reserved command flag bits set, or E bit on a request.
    #[error("invalid command flags {0:#04x}")]
    InvalidHeaderBits(u8),
    /// AVP shorter than its own header, running past its container, or with non-zero padding.
    /// `None` when not even an AVP header could be read.
    #[error("invalid AVP length{}", fmt_avp(.0.as_ref()))]
    InvalidAvpLength(Option<Avp>),
    /// Reserved AVP flag bits set.
    #[error("invalid AVP flags{}", fmt_avp(Some(.0)))]
    InvalidAvpBits(Avp),
    /// Payload of the right size but not a valid value (bad UTF-8, bad DiameterURI, ...).
    #[error("invalid AVP value{}", fmt_avp(Some(.0)))]
    InvalidAvpValue(Avp),
    /// A mandatory AVP is absent; the AVP is a zero-filled stand-in naming code and vendor.
    #[error("missing AVP{}", fmt_avp(Some(.0)))]
    MissingAvp(Avp),
    /// An AVP the grammar allows at most N times occurs more often.
    #[error("AVP occurs too many times{}", fmt_avp(Some(.0)))]
    AvpOccursTooManyTimes(Avp),
    /// An AVP unknown to the dictionary carries the M bit.
    #[error("unsupported mandatory AVP{}", fmt_avp(Some(.0)))]
    AvpUnsupported(Avp),
    /// Command code unknown for the application.
    #[error("command {command_code} unsupported in application {application_id}")]
    CommandUnsupported { application_id: u32, command_code: u32 },
    /// Application id unknown.
    #[error("application {0} unsupported")]
    ApplicationUnsupported(u32),
}

fn fmt_avp(avp: Option<&Avp>) -> String {
    match avp {
        Some(a) => match a.vendor_id() {
            Some(v) => format!(" (code {}, vendor {v})", a.code()),
            None => format!(" (code {})", a.code()),
        },
        None => String::new(),
    }
}

impl Error {
    /// The Result-Code the peer must be answered with.
    pub fn result_code(&self) -> u32 {
        use result_code::*;
        match self {
            Error::UnsupportedVersion(_) => DIAMETER_UNSUPPORTED_VERSION,
            Error::InvalidMessageLength { .. } | Error::MessageTooLong { .. } => {
                DIAMETER_INVALID_MESSAGE_LENGTH
            }
            Error::InvalidHeaderBits(_) => DIAMETER_INVALID_HDR_BITS,
            Error::InvalidAvpLength(_) => DIAMETER_INVALID_AVP_LENGTH,
            Error::InvalidAvpBits(_) => DIAMETER_INVALID_AVP_BITS,
            Error::InvalidAvpValue(_) => DIAMETER_INVALID_AVP_VALUE,
            Error::MissingAvp(_) => DIAMETER_MISSING_AVP,
            Error::AvpOccursTooManyTimes(_) => DIAMETER_AVP_OCCURS_TOO_MANY_TIMES,
            Error::AvpUnsupported(_) => DIAMETER_AVP_UNSUPPORTED,
            Error::CommandUnsupported { .. } => DIAMETER_COMMAND_UNSUPPORTED,
            Error::ApplicationUnsupported(_) => DIAMETER_APPLICATION_UNSUPPORTED,
        }
    }

    /// The AVP to put in Failed-AVP, if the error concerns one.
    pub fn failed_avp(&self) -> Option<&Avp> {
        match self {
            Error::InvalidAvpLength(a) => a.as_ref(),
            Error::InvalidAvpBits(a)
            | Error::InvalidAvpValue(a)
            | Error::MissingAvp(a)
            | Error::AvpOccursTooManyTimes(a)
            | Error::AvpUnsupported(a) => Some(a),
            _ => None,
        }
    }

    /// Whether the answer carries the E bit (3xxx protocol errors).
    pub fn is_protocol_error(&self) -> bool {
        result_code::is_protocol_error(self.result_code())
    }

    /// Whether the byte stream can no longer be trusted: after a framing error the transport
    /// cannot find the next message boundary and must close the connection (RFC 6733 §3).
    pub fn breaks_framing(&self) -> bool {
        matches!(self, Error::UnsupportedVersion(_) | Error::InvalidMessageLength { .. })
    }
}

/// Encoding failure: a length that does not fit the 24-bit fields of the wire format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    #[error("AVP {code} is {len} bytes, more than the 24-bit length field allows")]
    AvpTooLong { code: u32, len: usize },
    #[error("message is {0} bytes, more than the 24-bit length field allows")]
    MessageTooLong(usize),
}
