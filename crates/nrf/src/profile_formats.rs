//! The string formats and bounds the NFProfile and NFService schemas (TS 29.510 §6.1.6.2.2,
//! §6.1.6.2.3, the xxxInfo types) and the common types they use (TS 29.571 §5.4: Fqdn, Ipv4Addr,
//! Ipv6Addr, PlmnId, Snssai, Tac, AmfId, ...) give, checked on the raw profile JSON: the typed
//! [`NfProfile`](crate::models::NfProfile) keeps most attributes as free JSON, so without this the
//! NRF would store and serve back addresses, PLMNs and slices no consumer can use.
//!
//! Only attributes NFs really send are checked; anything else (vendor extensions, attributes of
//! later releases) passes as it is. Services are checked in both forms, the `nfServices` array and
//! the `nfServiceList` map (whose keys must be the services' serviceInstanceIds). Each problem
//! becomes one [`InvalidParam`] whose `param` is the JSON pointer of the offending value.

use std::fmt::Write;
use std::net::{Ipv4Addr, Ipv6Addr};

use sbi::problem::cause;
use sbi::InvalidParam;
use serde_json::{Map, Value};

use crate::models;

/// Appends one InvalidParam per format or bound `profile` breaks to `bad` (a pointer already in
/// `bad` is not repeated, so checks the typed model made before are not listed twice).
pub fn check(profile: &Value, bad: &mut Vec<InvalidParam>) {
    let Some(p) = profile.as_object() else { return };
    let mut w = Walk { path: String::new(), bad };
    w.field(p, "fqdn", fqdn);
    w.field(p, "interPlmnFqdn", fqdn);
    w.field(p, "ipv4Addresses", |w, v| w.list(v, ipv4));
    w.field(p, "ipv6Addresses", |w, v| w.list(v, ipv6));
    plmn_and_slice_lists(&mut w, p);
    w.field(p, "hniList", |w, v| w.list(v, fqdn));
    for (k, v) in p {
        if is_info(k) {
            w.at(k, |w| info(w, v));
        } else if k.ends_with("InfoList") {
            w.at(k, |w| w.map(v, info));
        }
    }
    w.field(p, "nfServices", |w, v| w.list(v, |w, s| service(w, s, None)));
    w.field(p, "nfServiceList", |w, v| {
        let Some(m) = w.object(v) else { return };
        if m.is_empty() {
            w.fail("must have at least one service");
        }
        for (key, s) in m {
            w.at(key, |w| service(w, s, Some(key)));
        }
    });
}

/// The cause of a 400 listing `bad`: MANDATORY_IE_INCORRECT when one of the incorrect IEs is
/// mandatory or conditional in the type that holds it (TS 29.500 Table 5.2.7.2-1), else
/// OPTIONAL_IE_INCORRECT. E.g. `/plmnList/0/mcc` (M in PlmnId) is mandatory, `/sNssais/0/sd`
/// (O in Snssai) and `/nfServices/0/ipEndPoints/0/port` are optional.
pub fn cause(bad: &[InvalidParam]) -> &'static str {
    if bad.iter().any(|p| is_mandatory(&p.param)) {
        cause::MANDATORY_IE_INCORRECT
    } else {
        cause::OPTIONAL_IE_INCORRECT
    }
}

/// The attributes that are M or C in their type (NFProfile, NFService, NFServiceVersion, PlmnId,
/// PlmnIdNid, Snssai, Tai, TaiRange, Guami, PlmnSnssai, AmfInfo, SmfInfo, SnssaiSmfInfoItem).
const MANDATORY: &[&str] = &[
    "nfInstanceId",
    "nfType",
    "nfStatus",
    "ipv4Addresses",
    "ipv6Addresses",
    "plmnList",
    "snpnList",
    "serviceInstanceId",
    "serviceName",
    "versions",
    "apiVersionInUri",
    "apiFullVersion",
    "scheme",
    "nfServiceStatus",
    "mcc",
    "mnc",
    "sst",
    "plmnId",
    "tac",
    "tacRangeList",
    "amfId",
    "sNssaiList",
    "amfSetId",
    "amfRegionId",
    "guamiList",
    "sNssaiSmfInfoList",
    "sNssai",
];

fn is_mandatory(pointer: &str) -> bool {
    // The IE is the last attribute name on the pointer: array indices and map keys (the
    // segment after a map attribute) are not attributes.
    let mut ie = None;
    let mut depth = 0;
    let mut skip_key = false;
    for seg in pointer.split('/').skip(1) {
        if std::mem::take(&mut skip_key) || seg.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        ie = Some(seg);
        depth += 1;
        skip_key = seg == "nfServiceList" || seg.ends_with("InfoList");
    }
    match ie {
        // Conditional in NFProfile, optional in NFService and the xxxInfo types.
        Some("fqdn" | "interPlmnFqdn") => depth == 1,
        Some(name) => MANDATORY.contains(&name),
        None => false,
    }
}

/// The xxxInfo attributes of NFProfile (customInfo is free-form by definition).
fn is_info(key: &str) -> bool {
    key.ends_with("Info") && key != "customInfo"
}

/// Where a check stands: the pointer of the value being checked and the problems found.
struct Walk<'a> {
    path: String,
    bad: &'a mut Vec<InvalidParam>,
}

impl Walk<'_> {
    fn fail(&mut self, why: impl Into<String>) {
        if !self.bad.iter().any(|p| p.param == self.path) {
            self.bad.push(InvalidParam::new(self.path.clone(), why));
        }
    }

    /// Runs `f` with `key` appended to the pointer (escaped as RFC 6901 says).
    fn at(&mut self, key: &str, f: impl FnOnce(&mut Self)) {
        let len = self.path.len();
        self.path.push('/');
        for c in key.chars() {
            match c {
                '~' => self.path.push_str("~0"),
                '/' => self.path.push_str("~1"),
                c => self.path.push(c),
            }
        }
        f(self);
        self.path.truncate(len);
    }

    fn field(&mut self, obj: &Map<String, Value>, key: &str, f: impl FnOnce(&mut Self, &Value)) {
        if let Some(v) = obj.get(key) {
            self.at(key, |w| f(w, v));
        }
    }

    fn object<'v>(&mut self, v: &'v Value) -> Option<&'v Map<String, Value>> {
        let m = v.as_object();
        if m.is_none() {
            self.fail("must be an object");
        }
        m
    }

    fn string<'v>(&mut self, v: &'v Value) -> Option<&'v str> {
        let s = v.as_str();
        if s.is_none() {
            self.fail("must be a string");
        }
        s
    }

    /// A non-empty array (every list checked here has minItems 1), each item checked by `item`.
    fn list(&mut self, v: &Value, mut item: impl FnMut(&mut Self, &Value)) {
        let Some(a) = v.as_array() else { return self.fail("must be an array") };
        if a.is_empty() {
            return self.fail("must have at least one item");
        }
        for (i, x) in a.iter().enumerate() {
            let len = self.path.len();
            let _ = write!(self.path, "/{i}");
            item(self, x);
            self.path.truncate(len);
        }
    }

    /// A non-empty map, each value checked by `item`.
    fn map(&mut self, v: &Value, mut item: impl FnMut(&mut Self, &Value)) {
        let Some(m) = self.object(v) else { return };
        if m.is_empty() {
            return self.fail("must have at least one member");
        }
        for (k, x) in m {
            self.at(k, |w| item(w, x));
        }
    }

    fn integer(&mut self, v: &Value, max: u64) {
        if v.as_u64().is_none_or(|n| n > max) {
            self.fail(format!("must be an integer 0..={max}"));
        }
    }

    /// A string for which `ok` holds, else `why`.
    fn text(&mut self, v: &Value, ok: impl FnOnce(&str) -> bool, why: &str) {
        if let Some(s) = self.string(v) {
            if !ok(s) {
                self.fail(why);
            }
        }
    }

    fn require(&mut self, obj: &Map<String, Value>, keys: &[&str]) {
        for k in keys {
            if !obj.contains_key(*k) {
                self.at(k, |w| w.fail("missing"));
            }
        }
    }
}

// ---- TS 29.571 types ---------------------------------------------------------------------------

/// Fqdn: `^([0-9A-Za-z]([-0-9A-Za-z]{0,61}[0-9A-Za-z])?\.)+[A-Za-z]{2,63}\.?$`, 4..=253 chars.
pub fn is_fqdn(s: &str) -> bool {
    if !(4..=253).contains(&s.len()) {
        return false;
    }
    let s = s.strip_suffix('.').unwrap_or(s);
    let Some((labels, tld)) = s.rsplit_once('.') else { return false };
    let label_ok = |l: &str| {
        let b = l.as_bytes();
        (1..=63).contains(&b.len())
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
    };
    (2..=63).contains(&tld.len())
        && tld.bytes().all(|c| c.is_ascii_alphabetic())
        && labels.split('.').all(label_ok)
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn is_digits(s: &str, min: usize, max: usize) -> bool {
    (min..=max).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit())
}

fn fqdn(w: &mut Walk, v: &Value) {
    w.text(v, is_fqdn, "not an FQDN (TS 29.571 Fqdn)");
}

fn ipv4(w: &mut Walk, v: &Value) {
    w.text(v, |s| s.parse::<Ipv4Addr>().is_ok(), "not an IPv4 address in dotted decimal");
}

/// An Ipv6Addr is an address, not a prefix.
fn ipv6(w: &mut Walk, v: &Value) {
    w.text(v, |s| s.parse::<Ipv6Addr>().is_ok(), "not an IPv6 address");
}

fn nf_type(w: &mut Walk, v: &Value) {
    w.text(v, models::is_nf_type, "unknown NF type");
}

fn plmn_id(w: &mut Walk, v: &Value) {
    let Some(o) = w.object(v) else { return };
    w.require(o, &["mcc", "mnc"]);
    w.field(o, "mcc", |w, v| w.text(v, |s| is_digits(s, 3, 3), "must be 3 digits"));
    w.field(o, "mnc", |w, v| w.text(v, |s| is_digits(s, 2, 3), "must be 2 or 3 digits"));
}

/// PlmnIdNid: a PlmnId with an optional Nid (11 hex digits).
fn plmn_id_nid(w: &mut Walk, v: &Value) {
    plmn_id(w, v);
    if let Some(o) = v.as_object() {
        w.field(o, "nid", nid);
    }
}

fn nid(w: &mut Walk, v: &Value) {
    w.text(v, |s| is_hex(s, 11), "must be 11 hexadecimal digits");
}

fn sd(w: &mut Walk, v: &Value) {
    w.text(v, |s| is_hex(s, 6), "must be 6 hexadecimal digits");
}

/// ExtSnssai: sst 0..=255, sd 6 hex digits, sdRanges of sd values.
fn snssai(w: &mut Walk, v: &Value) {
    let Some(o) = w.object(v) else { return };
    w.require(o, &["sst"]);
    w.field(o, "sst", |w, v| w.integer(v, 255));
    w.field(o, "sd", sd);
    w.field(o, "sdRanges", |w, v| {
        w.list(v, |w, r| {
            if let Some(r) = w.object(r) {
                w.field(r, "start", sd);
                w.field(r, "end", sd);
            }
        })
    });
}

fn tac(w: &mut Walk, v: &Value) {
    w.text(v, |s| is_hex(s, 4) || is_hex(s, 6), "must be 4 or 6 hexadecimal digits");
}

fn tai(w: &mut Walk, v: &Value) {
    let Some(o) = w.object(v) else { return };
    w.require(o, &["plmnId", "tac"]);
    w.field(o, "plmnId", plmn_id);
    w.field(o, "tac", tac);
    w.field(o, "nid", nid);
}

fn tai_range(w: &mut Walk, v: &Value) {
    let Some(o) = w.object(v) else { return };
    w.require(o, &["plmnId", "tacRangeList"]);
    w.field(o, "plmnId", plmn_id);
    w.field(o, "nid", nid);
    w.field(o, "tacRangeList", |w, v| {
        w.list(v, |w, r| {
            let Some(r) = w.object(r) else { return };
            w.field(r, "start", tac);
            w.field(r, "end", tac);
            w.field(r, "pattern", pattern);
        })
    });
}

fn guami(w: &mut Walk, v: &Value) {
    let Some(o) = w.object(v) else { return };
    w.require(o, &["plmnId", "amfId"]);
    w.field(o, "plmnId", plmn_id_nid);
    w.field(o, "amfId", |w, v| w.text(v, |s| is_hex(s, 6), "must be 6 hexadecimal digits"));
}

/// A regular expression the NRF can use: the size bound is the one discovery compiles with.
fn pattern(w: &mut Walk, v: &Value) {
    w.text(
        v,
        |s| regex::RegexBuilder::new(s).size_limit(1 << 20).build().is_ok(),
        "not a usable regular expression",
    );
}

/// SupiRange, IdentityRange, ImsiRange: numeric start and end, or a pattern.
fn identity_range(w: &mut Walk, v: &Value) {
    let Some(o) = w.object(v) else { return };
    let numeric = |w: &mut Walk, v: &Value| w.text(v, |s| is_digits(s, 1, 64), "must be digits");
    w.field(o, "start", numeric);
    w.field(o, "end", numeric);
    w.field(o, "pattern", pattern);
}

// ---- TS 29.510 types ---------------------------------------------------------------------------

/// plmnList, snpnList, allowedPlmns, allowedSnpns, sNssais, allowedNssais, perPlmnSnssaiList and
/// allowedNfTypes, which NFProfile and NFService share.
fn plmn_and_slice_lists(w: &mut Walk, o: &Map<String, Value>) {
    w.field(o, "plmnList", |w, v| w.list(v, plmn_id));
    w.field(o, "snpnList", |w, v| w.list(v, plmn_id_nid));
    w.field(o, "allowedPlmns", |w, v| w.list(v, plmn_id));
    w.field(o, "allowedSnpns", |w, v| w.list(v, plmn_id_nid));
    w.field(o, "sNssais", |w, v| w.list(v, snssai));
    w.field(o, "allowedNssais", |w, v| w.list(v, snssai));
    w.field(o, "perPlmnSnssaiList", |w, v| {
        w.list(v, |w, x| {
            let Some(x) = w.object(x) else { return };
            w.require(x, &["plmnId", "sNssaiList"]);
            w.field(x, "plmnId", plmn_id);
            w.field(x, "sNssaiList", |w, v| w.list(v, snssai));
            w.field(x, "nid", nid);
        })
    });
    w.field(o, "allowedNfTypes", |w, v| w.list(v, nf_type));
}

/// The members the xxxInfo types have in common (groups, identity ranges, areas, GUAMIs,
/// slices, gateways, data sets).
fn info(w: &mut Walk, v: &Value) {
    let Some(o) = w.object(v) else { return };
    w.field(o, "groupId", |w, v| {
        w.string(v);
    });
    for k in [
        "supiRanges",
        "gpsiRanges",
        "imsiRanges",
        "externalGroupIdentifiersRanges",
        "supiRangeList",
        "gpsiRangeList",
    ] {
        w.field(o, k, |w, v| w.list(v, identity_range));
    }
    w.field(o, "taiList", |w, v| w.list(v, tai));
    w.field(o, "taiRangeList", |w, v| w.list(v, tai_range));
    w.field(o, "guamiList", |w, v| w.list(v, guami));
    w.field(o, "amfRegionId", |w, v| w.text(v, |s| is_hex(s, 2), "must be 2 hexadecimal digits"));
    w.field(o, "amfSetId", |w, v| {
        let ok = |s: &str| is_hex(s, 3) && matches!(s.as_bytes()[0], b'0'..=b'3');
        w.text(v, ok, "must be 3 hexadecimal digits, the first 0..3")
    });
    w.field(o, "routingIndicators", |w, v| {
        w.list(v, |w, r| w.text(r, |s| is_digits(s, 1, 4), "must be 1 to 4 digits"))
    });
    for k in ["sNssaiSmfInfoList", "sNssaiUpfInfoList"] {
        w.field(o, k, |w, v| {
            w.list(v, |w, x| {
                let Some(x) = w.object(x) else { return };
                w.require(x, &["sNssai"]);
                w.field(x, "sNssai", snssai);
            })
        });
    }
    w.field(o, "pgwFqdn", fqdn);
    w.field(o, "pgwFqdnList", |w, v| w.list(v, fqdn));
    for k in ["supportedDataSets", "dnnList"] {
        w.field(o, k, |w, v| {
            w.list(v, |w, s| {
                w.string(s);
            })
        });
    }
}

const SERVICE_REQUIRED: &[&str] =
    &["serviceInstanceId", "serviceName", "versions", "scheme", "nfServiceStatus"];

/// One NFService; `key` is its key in `nfServiceList`, which must be its serviceInstanceId.
fn service(w: &mut Walk, v: &Value, key: Option<&str>) {
    let Some(o) = w.object(v) else { return };
    w.require(o, SERVICE_REQUIRED);
    w.field(o, "serviceInstanceId", |w, v| {
        if let Some(id) = w.string(v) {
            if id.is_empty() {
                w.fail("must not be empty");
            } else if key.is_some_and(|k| k != id) {
                w.fail("differs from its key in nfServiceList");
            }
        }
    });
    w.field(o, "serviceName", |w, v| w.text(v, |s| !s.is_empty(), "must not be empty"));
    w.field(o, "versions", |w, v| w.list(v, version));
    w.field(o, "scheme", |w, v| w.text(v, |s| matches!(s, "http" | "https"), "http or https"));
    w.field(o, "nfServiceStatus", |w, v| {
        w.text(v, |s| models::NF_STATUSES.contains(&s), "unknown status")
    });
    w.field(o, "fqdn", fqdn);
    w.field(o, "interPlmnFqdn", fqdn);
    w.field(o, "ipEndPoints", |w, v| w.list(v, ip_end_point));
    plmn_and_slice_lists(w, o);
    w.field(o, "priority", |w, v| w.integer(v, 65535));
    w.field(o, "capacity", |w, v| w.integer(v, 65535));
    w.field(o, "load", |w, v| w.integer(v, 100));
    w.field(o, "supportedFeatures", |w, v| {
        w.text(v, |s| s.bytes().all(|b| b.is_ascii_hexdigit()), "must be hexadecimal digits")
    });
}

/// NFServiceVersion: apiVersionInUri `v<major>`, apiFullVersion as TS 29.501 §4.3.1 writes it
/// (`<major>.<minor>.<patch>`, then an optional pre-release or build part).
fn version(w: &mut Walk, v: &Value) {
    let Some(o) = w.object(v) else { return };
    w.require(o, &["apiVersionInUri", "apiFullVersion"]);
    w.field(o, "apiVersionInUri", |w, v| {
        let ok = |s: &str| s.strip_prefix('v').is_some_and(|d| is_digits(d, 1, 9));
        w.text(v, ok, "must be v<major version>, e.g. v1")
    });
    w.field(o, "apiFullVersion", |w, v| {
        w.text(v, is_full_version, "must be <major>.<minor>.<patch>, e.g. 1.0.0")
    });
}

fn is_full_version(s: &str) -> bool {
    let mut parts = s.splitn(3, '.');
    let (Some(major), Some(minor), Some(tail)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let patch = tail.bytes().take_while(u8::is_ascii_digit).count();
    // What follows the patch number: `.alpha-1`, `-alpha.1`, `+build`, or nothing.
    let rest = &tail[patch..];
    is_digits(major, 1, 9)
        && is_digits(minor, 1, 9)
        && (1..=9).contains(&patch)
        && (rest.is_empty()
            || (rest.len() > 1
                && matches!(rest.as_bytes()[0], b'.' | b'-' | b'+')
                && rest.bytes().all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b))))
}

fn ip_end_point(w: &mut Walk, v: &Value) {
    let Some(o) = w.object(v) else { return };
    w.field(o, "ipv4Address", ipv4);
    w.field(o, "ipv6Address", ipv6);
    w.field(o, "port", |w, v| w.integer(v, 65535));
    w.field(o, "transport", |w, v| w.text(v, |s| s == "TCP", "must be TCP"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(p: &Value) -> Vec<String> {
        let mut bad = Vec::new();
        check(p, &mut bad);
        bad.into_iter().map(|p| p.param).collect()
    }

    #[test]
    fn fqdns() {
        for ok in ["udr.example", "a.bc", "nrf.5gc.mnc001.mcc001.3gppnetwork.org.", "x-1.y.org"] {
            assert!(is_fqdn(ok), "{ok}");
        }
        for bad in ["not a fqdn!", "localhost", "a.b", "-a.example", "a-.example", "a..example"] {
            assert!(!is_fqdn(bad), "{bad}");
        }
        assert!(!is_fqdn(&format!("{}.example", "a".repeat(64))));
    }

    #[test]
    fn full_versions() {
        for ok in ["1.0.0", "2.2.4", "1.0.0.alpha-1", "1.2.0-alpha.3", "17.1.0+b2"] {
            assert!(is_full_version(ok), "{ok}");
        }
        for bad in ["1", "1.0", "v1.0.0", "1.0.0.", "1.x.0", "1.0.0 beta"] {
            assert!(!is_full_version(bad), "{bad}");
        }
    }

    #[test]
    fn pointers_name_both_service_forms() {
        let svc = json!({"serviceInstanceId": "s1", "serviceName": "nudr-dr", "scheme": "ftp",
            "nfServiceStatus": "REGISTERED", "versions": []});
        let p = json!({"nfServices": [svc], "nfServiceList": {"other/id": svc}});
        assert_eq!(
            params(&p),
            [
                "/nfServices/0/versions",
                "/nfServices/0/scheme",
                "/nfServiceList/other~1id/serviceInstanceId",
                "/nfServiceList/other~1id/versions",
                "/nfServiceList/other~1id/scheme",
            ]
        );
    }

    #[test]
    fn causes_follow_the_presence_of_the_ie() {
        let c =
            |ps: &[&str]| cause(&ps.iter().map(|p| InvalidParam::new(*p, "x")).collect::<Vec<_>>());
        assert_eq!(c(&["/plmnList/0/mcc"]), cause::MANDATORY_IE_INCORRECT);
        assert_eq!(c(&["/fqdn"]), cause::MANDATORY_IE_INCORRECT);
        assert_eq!(c(&["/nfServiceList/versions/versions"]), cause::MANDATORY_IE_INCORRECT);
        assert_eq!(c(&["/sNssais/0/sd"]), cause::OPTIONAL_IE_INCORRECT);
        assert_eq!(c(&["/nfServices/0/fqdn"]), cause::OPTIONAL_IE_INCORRECT);
        assert_eq!(c(&["/nfServiceList/sst"]), cause::OPTIONAL_IE_INCORRECT);
        assert_eq!(c(&["/sNssais/0/sd", "/sNssais/1/sst"]), cause::MANDATORY_IE_INCORRECT);
    }
}
