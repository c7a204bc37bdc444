//! Checks a decoded message against the dictionary: application and command known, every AVP
//! of a known type well-formed (recursively in grouped AVPs), unknown AVPs without the M bit,
//! and the command grammar's occurrence rules.
//!
//! What is deliberately not enforced, to stay interoperable with real peers: AVP order
//! (Session-Id first), M-bit consistency with the definition, and unknown Enumerated values.

use crate::avp::Avp;
use crate::dictionary::{self, base, Rule};
use crate::error::Error;
use crate::message::Message;
use crate::types::{check_value, DataType};

/// Grouped AVPs nest at most this deep; a hostile message could otherwise make the walk
/// recurse once per 8 bytes.
const MAX_DEPTH: usize = 16;

/// Validates `msg`; the error maps to the answer's Result-Code and Failed-AVP.
///
/// Required-AVP checks are skipped for answers with the E bit, which only promise the
/// Result-Code and origin AVPs (RFC 6733 §7.2).
pub fn validate(msg: &Message) -> Result<(), Error> {
    let app = msg.application_id();
    let cmd = match dictionary::command(app, msg.command_code()) {
        Some(c) => c,
        None if dictionary::application(app).is_none() => {
            return Err(Error::ApplicationUnsupported(app));
        }
        None => {
            return Err(Error::CommandUnsupported {
                application_id: app,
                command_code: msg.command_code(),
            });
        }
    };
    let rules = if msg.is_request() { cmd.request } else { cmd.answer };
    check_avps(&msg.avps, rules, !msg.is_error(), 0)
}

/// Validates AVPs against the dictionary only, with no command grammar: for tools and for
/// commands of applications we relay without knowing them.
pub fn validate_avps(avps: &[Avp]) -> Result<(), Error> {
    check_avps(avps, &[], false, 0)
}

/// A bit per AVP code modulo 64: a rule whose bit is clear in the set of a message's codes
/// has no occurrence, known without a scan.
fn code_bit(code: u32) -> u64 {
    1 << (code % 64)
}

fn check_avps(avps: &[Avp], rules: &[Rule], required: bool, depth: usize) -> Result<(), Error> {
    let mut present = 0;
    for a in avps {
        check_avp(a, depth)?;
        present |= code_bit(a.code());
    }
    // Rules are checked in grammar order (the first broken one is the answer); only those that
    // can fail here cost a scan of the AVPs: a bounded one whose code may be present, or a
    // required one. `*[AVP]` never fails.
    for r in rules {
        let must = required && r.min > 0;
        if present & code_bit(r.avp.code) == 0 {
            if must {
                return Err(Error::MissingAvp(r.avp.zero_filled()));
            }
            continue;
        }
        if r.max == u32::MAX && !must {
            continue;
        }
        let mut found = avps.iter().filter(|a| a.is(r.avp));
        let n = found.by_ref().take(r.max as usize).count() as u32;
        if let Some(extra) = found.next() {
            return Err(Error::AvpOccursTooManyTimes(extra.clone()));
        }
        if required && n < r.min {
            return Err(Error::MissingAvp(r.avp.zero_filled()));
        }
    }
    Ok(())
}

fn check_avp(a: &Avp, depth: usize) -> Result<(), Error> {
    let Some(def) = dictionary::avp(a.code(), a.vendor()) else {
        return if a.is_mandatory() { Err(Error::AvpUnsupported(a.clone())) } else { Ok(()) };
    };
    if def.ty != DataType::Grouped {
        return match a.as_slice() {
            Ok(data) => check_value(def.ty, data).map_err(|e| a.value_error(e)),
            // A built grouped AVP under a non-grouped code: a programming error on our side,
            // reported like a peer's bad value.
            Err(e) => Err(e),
        };
    }
    // Failed-AVP carries the peer's view of *our* bad AVP, malformed by definition: opaque.
    if a.is(&base::FAILED_AVP) {
        return Ok(());
    }
    if depth >= MAX_DEPTH {
        return Err(Error::InvalidAvpValue(a.clone()));
    }
    let children = a.children()?;
    check_avps(&children, def.group, true, depth + 1)
}
