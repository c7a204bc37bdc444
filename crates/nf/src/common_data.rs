//! TS 29.571 common data checks every NF shares (the BSF's bindings, the PCF's policy
//! contexts, ...): every wrong field of a body is collected in [`Errors`] and reported at once
//! in `invalidParams` (a JSON pointer and a reason), not just the first.

use std::net::{Ipv4Addr, Ipv6Addr};

use sbi::problem::cause;
use sbi::{InvalidParam, ProblemDetails};
use serde_json::Value;

/// Collects the wrong fields of one body.
#[derive(Debug, Default)]
pub struct Errors {
    params: Vec<InvalidParam>,
    missing: bool,
}

impl Errors {
    pub fn bad(&mut self, pointer: impl Into<String>, reason: impl Into<String>) {
        self.params.push(InvalidParam::new(pointer, reason));
    }

    pub fn missing(&mut self, pointer: impl Into<String>) {
        self.missing = true;
        self.params.push(InvalidParam::new(pointer, "mandatory attribute is missing"));
    }

    pub fn is_empty(&self) -> bool {
        self.params.is_empty()
    }

    /// Wrong fields found so far (a checker may stop listing at a cap).
    pub fn len(&self) -> usize {
        self.params.len()
    }

    /// `Ok` when nothing was wrong, else the 400 listing every wrong field.
    pub fn finish(self) -> Result<(), ProblemDetails> {
        if self.params.is_empty() {
            return Ok(());
        }
        let c =
            if self.missing { cause::MANDATORY_IE_MISSING } else { cause::MANDATORY_IE_INCORRECT };
        Err(ProblemDetails::invalid_params(c, self.params))
    }
}

// ---- scalar formats --------------------------------------------------------------------------

/// Dotted decimal without leading zeros (TS 29.571 Ipv4Addr).
pub fn parse_ipv4(s: &str) -> Option<Ipv4Addr> {
    s.parse::<Ipv4Addr>().ok().filter(|a| a.to_string() == s)
}

/// `address/length`, length 0..=128 (TS 29.571 Ipv6Prefix).
pub fn parse_ipv6_prefix(s: &str) -> Option<(Ipv6Addr, u8)> {
    let (addr, len) = s.split_once('/')?;
    let addr: Ipv6Addr = addr.parse().ok()?;
    if len.is_empty() || len.len() > 3 || (len.len() > 1 && len.starts_with('0')) {
        return None;
    }
    let len: u8 = len.parse().ok().filter(|l| *l <= 128)?;
    Some((addr, len))
}

/// The prefix as given, in RFC 5952 text.
pub fn canonical_prefix(addr: Ipv6Addr, len: u8) -> String {
    format!("{addr}/{len}")
}

/// The prefix's network (host bits cleared), in RFC 5952 text: the indexed form.
pub fn network_prefix(addr: Ipv6Addr, len: u8) -> String {
    let bits = u128::from(addr);
    let mask = if len == 0 { 0 } else { u128::MAX << (128 - u32::from(len)) };
    format!("{}/{len}", Ipv6Addr::from(bits & mask))
}

/// `xx-xx-xx-xx-xx-xx` (TS 29.571 MacAddr48).
pub fn check_mac(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 6
        && parts.iter().all(|p| p.len() == 2 && p.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// `imsi-<5..15 digits>`, `nai-...`, `gci-...`, `gli-...` (TS 29.571 Supi, TS 23.003 §2.2A).
pub fn check_supi(s: &str) -> bool {
    if let Some(imsi) = s.strip_prefix("imsi-") {
        return (5..=15).contains(&imsi.len()) && imsi.bytes().all(|b| b.is_ascii_digit());
    }
    ["nai-", "gci-", "gli-"].iter().any(|p| s.strip_prefix(p).is_some_and(|r| !r.is_empty()))
}

/// `msisdn-<5..15 digits>` or `extid-<local>@<domain>` (TS 29.571 Gpsi).
pub fn check_gpsi(s: &str) -> bool {
    if let Some(msisdn) = s.strip_prefix("msisdn-") {
        return (5..=15).contains(&msisdn.len()) && msisdn.bytes().all(|b| b.is_ascii_digit());
    }
    if let Some(ext) = s.strip_prefix("extid-") {
        let mut it = ext.split('@');
        return matches!((it.next(), it.next(), it.next()), (Some(l), Some(d), None) if !l.is_empty() && !d.is_empty());
    }
    false
}

/// Dot-separated labels of letters, digits and `-`, at most 100 octets (TS 23.003 §9.1).
pub fn check_dnn(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 100
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// TS 29.571 Fqdn: 4..=253 characters, at least two labels, a final alphabetic label.
pub fn check_fqdn(s: &str) -> bool {
    if !(4..=253).contains(&s.len()) {
        return false;
    }
    let body = s.strip_suffix('.').unwrap_or(s);
    let labels: Vec<&str> = body.split('.').collect();
    if labels.len() < 2 {
        return false;
    }
    let (last, rest) = labels.split_last().unwrap_or((&"", &[]));
    (2..=63).contains(&last.len())
        && last.bytes().all(|b| b.is_ascii_alphabetic())
        && rest.iter().all(|l| {
            (1..=63).contains(&l.len())
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

pub fn check_uuid(s: &str) -> bool {
    uuid::Uuid::parse_str(s).is_ok() && s.len() == 36
}

/// An S-NSSAI object: `sst` 0..=255, optional `sd` of six hex digits. Returns (sst, sd lower).
pub fn check_snssai(v: &Value, at: &str, errs: &mut Errors) -> Option<(u8, String)> {
    let Some(obj) = v.as_object() else {
        errs.bad(at, "must be an Snssai object");
        return None;
    };
    let sst = match obj.get("sst") {
        None => {
            errs.missing(format!("{at}/sst"));
            None
        }
        Some(s) => match s.as_u64().filter(|n| *n <= 255) {
            Some(n) => Some(n as u8),
            None => {
                errs.bad(format!("{at}/sst"), "must be an integer 0..255");
                None
            }
        },
    };
    let sd = match obj.get("sd") {
        None => Some(String::new()),
        Some(Value::String(s)) if s.len() == 6 && s.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Some(s.to_ascii_lowercase())
        }
        Some(_) => {
            errs.bad(format!("{at}/sd"), "must be six hexadecimal digits");
            None
        }
    };
    Some((sst?, sd?))
}

pub fn check_ip_endpoints(v: &Value, at: &str, errs: &mut Errors) {
    let Some(list) = v.as_array().filter(|a| !a.is_empty()) else {
        errs.bad(at, "must be a non-empty array of IpEndPoint");
        return;
    };
    for (i, ep) in list.iter().enumerate() {
        let p = format!("{at}/{i}");
        let Some(obj) = ep.as_object() else {
            errs.bad(p, "must be an IpEndPoint object");
            continue;
        };
        if let Some(a) = obj.get("ipv4Address") {
            if a.as_str().and_then(parse_ipv4).is_none() {
                errs.bad(format!("{p}/ipv4Address"), "must be a dotted-decimal IPv4 address");
            }
        }
        if let Some(a) = obj.get("ipv6Address") {
            if a.as_str().and_then(|s| s.parse::<Ipv6Addr>().ok()).is_none() {
                errs.bad(format!("{p}/ipv6Address"), "must be an IPv6 address");
            }
        }
        if let Some(t) = obj.get("transport") {
            if !t.is_string() {
                errs.bad(format!("{p}/transport"), "must be a TransportProtocol string");
            }
        }
        if let Some(port) = obj.get("port") {
            if port.as_u64().filter(|n| *n <= 65535).is_none() {
                errs.bad(format!("{p}/port"), "must be an integer 0..65535");
            }
        }
        if !obj.contains_key("ipv4Address") && !obj.contains_key("ipv6Address") {
            errs.bad(p, "needs ipv4Address or ipv6Address");
        }
    }
}

pub fn string_field<'a>(
    obj: &'a serde_json::Map<String, Value>,
    name: &str,
    check: impl Fn(&str) -> bool,
    reason: &str,
    errs: &mut Errors,
) -> Option<&'a str> {
    match obj.get(name)? {
        Value::String(s) if check(s) => Some(s.as_str()),
        _ => {
            errs.bad(format!("/{name}"), reason);
            None
        }
    }
}
