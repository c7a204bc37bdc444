//! The dictionary: AVP definitions (code, vendor, type, M-bit rule, enumerations), commands
//! with their AVP grammar, and applications, for base, NASREQ, DCCA, Gx/Sd, Rx, Sy and Sh.
//!
//! Hand-written static data, checked against the 3GPP/IETF specifications and Wireshark's
//! dictionary. Each AVP is a `static` so NF code names it (`gx::QOS_CLASS_IDENTIFIER`) and
//! builds it with the typed constructors on [`AvpDef`].

use std::net::{IpAddr, Ipv4Addr};
use std::sync::OnceLock;

use bytes::Bytes;

use crate::avp::Avp;
use crate::fasthash::FastMap;
use crate::types::{Address, DataType, Time};

pub mod base;
pub mod dcca;
pub mod gx;
pub mod nasreq;
pub mod rx;
pub mod sh;
pub mod sy;

/// 3GPP's IANA enterprise number, the vendor of every 3GPP AVP.
pub const VENDOR_3GPP: u32 = 10415;

/// How a definition treats a flag bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagRule {
    Must,
    May,
    MustNot,
}

/// One AVP definition. `vendor_id` is 0 for IETF AVPs (no V bit).
#[derive(Debug)]
pub struct AvpDef {
    pub name: &'static str,
    pub code: u32,
    pub vendor_id: u32,
    pub ty: DataType,
    pub m_bit: FlagRule,
    /// Named values of an Enumerated AVP.
    pub enums: &'static [(u32, &'static str)],
    /// Grammar of a Grouped AVP, as far as we check it (required children).
    pub group: &'static [Rule],
}

impl AvpDef {
    /// An IETF AVP with the M bit required, which is the rule for every base, NASREQ and DCCA AVP
    /// we carry unless stated.
    pub const fn ietf(name: &'static str, code: u32, ty: DataType) -> AvpDef {
        AvpDef { name, code, vendor_id: 0, ty, m_bit: FlagRule::Must, enums: &[], group: &[] }
    }

    /// A 3GPP AVP (V bit, vendor 10415) with the M bit required unless changed by `.m()`.
    pub const fn tgpp(name: &'static str, code: u32, ty: DataType) -> AvpDef {
        AvpDef {
            name,
            code,
            vendor_id: VENDOR_3GPP,
            ty,
            m_bit: FlagRule::Must,
            enums: &[],
            group: &[],
        }
    }

    pub const fn m(mut self, rule: FlagRule) -> AvpDef {
        self.m_bit = rule;
        self
    }

    pub const fn enums(mut self, enums: &'static [(u32, &'static str)]) -> AvpDef {
        self.enums = enums;
        self
    }

    pub const fn group(mut self, rules: &'static [Rule]) -> AvpDef {
        self.group = rules;
        self
    }

    pub fn vendor(&self) -> Option<u32> {
        (self.vendor_id != 0).then_some(self.vendor_id)
    }

    pub fn enum_name(&self, value: u32) -> Option<&'static str> {
        self.enums.iter().find(|(v, _)| *v == value).map(|(_, n)| *n)
    }

    pub fn enum_value(&self, name: &str) -> Option<u32> {
        self.enums.iter().find(|(_, n)| *n == name).map(|(v, _)| *v)
    }

    /// The AVP with this definition's code, vendor and M bit. The M bit is set only for `Must`:
    /// for `May` leaving it clear is the interoperable choice, as a peer that does not know the
    /// AVP then ignores it instead of rejecting the message with 5001.
    pub fn with_payload(&self, data: impl Into<Bytes>) -> Avp {
        Avp::new(self.code, self.vendor(), self.m_bit == FlagRule::Must, data)
    }

    /// Like [`AvpDef::with_payload`] with the payload copied (inline when short: no
    /// allocation).
    pub fn with_slice(&self, data: &[u8]) -> Avp {
        Avp::from_slice(self.code, self.vendor(), self.m_bit == FlagRule::Must, data)
    }

    pub fn bytes(&self, data: impl Into<Bytes>) -> Avp {
        self.with_payload(data)
    }
    pub fn u32(&self, v: u32) -> Avp {
        self.with_slice(&v.to_be_bytes())
    }
    pub fn i32(&self, v: i32) -> Avp {
        self.with_slice(&v.to_be_bytes())
    }
    pub fn u64(&self, v: u64) -> Avp {
        self.with_slice(&v.to_be_bytes())
    }
    pub fn i64(&self, v: i64) -> Avp {
        self.with_slice(&v.to_be_bytes())
    }
    pub fn f32(&self, v: f32) -> Avp {
        self.with_slice(&v.to_be_bytes())
    }
    pub fn f64(&self, v: f64) -> Avp {
        self.with_slice(&v.to_be_bytes())
    }
    pub fn enumerated(&self, v: u32) -> Avp {
        self.u32(v)
    }
    /// UTF8String, and any string-like type (IPFilterRule, OctetString holding text).
    pub fn utf8(&self, s: &str) -> Avp {
        self.with_slice(s.as_bytes())
    }
    pub fn identity(&self, s: &str) -> Avp {
        self.utf8(s)
    }
    pub fn uri(&self, s: &str) -> Avp {
        self.utf8(s)
    }
    pub fn address(&self, ip: IpAddr) -> Avp {
        self.with_payload(Address::Ip(ip).encode())
    }
    pub fn time(&self, t: Time) -> Avp {
        self.u32(t.0)
    }
    /// OctetString holding a raw IPv4 address (Framed-IP-Address).
    pub fn ipv4_octets(&self, ip: Ipv4Addr) -> Avp {
        self.with_slice(&ip.octets())
    }
    pub fn grouped(&self, children: Vec<Avp>) -> Avp {
        Avp::new_grouped(self.code, self.vendor(), self.m_bit == FlagRule::Must, children)
    }

    /// The stand-in Failed-AVP for a missing AVP: code, vendor and a zero-filled payload of
    /// the minimum size for the type (RFC 6733 §7.5).
    pub fn zero_filled(&self) -> Avp {
        let len = match self.ty {
            DataType::Address => 6, // IPv4 family + 0.0.0.0
            t => t.fixed_len().unwrap_or(0),
        };
        let mut data = vec![0u8; len];
        if self.ty == DataType::Address {
            data[1] = 1;
        }
        self.with_payload(data)
    }
}

/// Occurrence rule of an AVP in a command or grouped AVP grammar.
#[derive(Debug)]
pub struct Rule {
    pub avp: &'static AvpDef,
    pub min: u32,
    /// `u32::MAX` for unbounded.
    pub max: u32,
}

impl Rule {
    /// `{AVP}` / `<AVP>`: exactly once.
    pub const fn one(avp: &'static AvpDef) -> Rule {
        Rule { avp, min: 1, max: 1 }
    }
    /// `[AVP]`: at most once.
    pub const fn opt(avp: &'static AvpDef) -> Rule {
        Rule { avp, min: 0, max: 1 }
    }
    /// `*[AVP]`: any number.
    pub const fn any(avp: &'static AvpDef) -> Rule {
        Rule { avp, min: 0, max: u32::MAX }
    }
    /// `1*{AVP}`: at least once.
    pub const fn some(avp: &'static AvpDef) -> Rule {
        Rule { avp, min: 1, max: u32::MAX }
    }
}

/// A command of an application, with the AVP grammar of its request and answer.
#[derive(Debug)]
pub struct CommandDef {
    pub name: &'static str,
    /// Short names, e.g. ("CCR", "CCA").
    pub abbrev: (&'static str, &'static str),
    pub code: u32,
    pub application_id: u32,
    pub proxiable: bool,
    pub request: &'static [Rule],
    pub answer: &'static [Rule],
}

/// An application: id and commands. `vendor_id` is 10415 for 3GPP applications, which are
/// advertised in Vendor-Specific-Application-Id.
#[derive(Debug)]
pub struct ApplicationDef {
    pub name: &'static str,
    pub id: u32,
    pub vendor_id: u32,
    pub commands: &'static [&'static CommandDef],
}

/// Every AVP definition, per module.
pub static AVP_TABLES: &[&[&AvpDef]] =
    &[base::AVPS, nasreq::AVPS, dcca::AVPS, gx::AVPS, gx::SD_AVPS, rx::AVPS, sy::AVPS, sh::AVPS];

/// Every application.
pub static APPLICATIONS: &[&ApplicationDef] =
    &[&base::COMMON, &gx::GX, &gx::SD, &rx::RX, &sy::SY, &sh::SH, &dcca::DCCA, &nasreq::NASREQ];

/// Iterates every AVP definition.
pub fn all_avps() -> impl Iterator<Item = &'static AvpDef> {
    AVP_TABLES.iter().flat_map(|t| t.iter().copied())
}

/// (vendor id, code) as one key.
fn avp_key(code: u32, vendor_id: u32) -> u64 {
    (u64::from(vendor_id) << 32) | u64::from(code)
}

type AvpIndex = FastMap<u64, &'static AvpDef>;

fn avp_index() -> &'static AvpIndex {
    static INDEX: OnceLock<AvpIndex> = OnceLock::new();
    INDEX.get_or_init(|| all_avps().map(|d| (avp_key(d.code, d.vendor_id), d)).collect())
}

/// Looks up an AVP by code and vendor (0 for IETF).
pub fn avp(code: u32, vendor_id: u32) -> Option<&'static AvpDef> {
    avp_index().get(&avp_key(code, vendor_id)).copied()
}

/// Looks up an AVP by name (linear; for tools and tests, not the hot path).
pub fn avp_by_name(name: &str) -> Option<&'static AvpDef> {
    all_avps().find(|d| d.name == name)
}

pub fn application(id: u32) -> Option<&'static ApplicationDef> {
    APPLICATIONS.iter().copied().find(|a| a.id == id)
}

/// The command `code` of application `application_id`. Base commands (CER, DWR, DPR) belong to
/// application 0 and are found from any application id, since peers send them with 0.
pub fn command(application_id: u32, code: u32) -> Option<&'static CommandDef> {
    application(application_id)
        .and_then(|a| a.commands.iter().copied().find(|c| c.code == code))
        .or_else(|| base::COMMON.commands.iter().copied().find(|c| c.code == code))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_duplicate_avp_keys() {
        let mut seen = std::collections::HashMap::new();
        for d in all_avps() {
            if let Some(prev) = seen.insert((d.code, d.vendor_id), d.name) {
                panic!("{} and {} share code {} vendor {}", prev, d.name, d.code, d.vendor_id);
            }
        }
        assert!(seen.len() > 200, "{} AVPs", seen.len());
    }

    #[test]
    fn grammar_references_known_avps() {
        for app in APPLICATIONS {
            for c in app.commands {
                assert_eq!(c.application_id, app.id, "{}", c.name);
                for r in c.request.iter().chain(c.answer) {
                    assert!(
                        avp(r.avp.code, r.avp.vendor_id).is_some(),
                        "{}: {}",
                        c.name,
                        r.avp.name
                    );
                }
            }
        }
        for d in all_avps() {
            assert!(d.group.is_empty() || d.ty == DataType::Grouped, "{}", d.name);
            assert!(d.enums.is_empty() || d.ty == DataType::Enumerated, "{}", d.name);
            for r in d.group {
                assert!(avp(r.avp.code, r.avp.vendor_id).is_some(), "{}: {}", d.name, r.avp.name);
            }
        }
    }

    #[test]
    fn lookups() {
        assert_eq!(avp(263, 0).unwrap().name, "Session-Id");
        assert_eq!(avp(1028, VENDOR_3GPP).unwrap().name, "QoS-Class-Identifier");
        assert!(avp(1028, 0).is_none());
        assert_eq!(command(gx::APP_ID, 272).unwrap().abbrev.0, "CCR");
        assert_eq!(command(gx::APP_ID, 280).unwrap().abbrev.0, "DWR");
        assert_eq!(command(sy::APP_ID, 8388635).unwrap().abbrev.0, "SLR");
        assert_eq!(command(gx::SD_APP_ID, 8388637).unwrap().abbrev.0, "TSR");
        assert_eq!(avp_by_name("Media-Type").unwrap().enum_value("OTHER"), Some(0xffff_ffff));
    }
}
