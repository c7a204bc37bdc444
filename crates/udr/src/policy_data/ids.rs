//! What names a policy data resource: the URI variables of TS 29.519 (ueId, plmnId, sponsorId,
//! bdtReferenceId, snssai, polSessionId, usageMonId), their checks, and the one key a resource
//! is stored and monitored under.
//!
//! A resource is stored as `(kind, id, part)` and monitored by its *canonical path*, the URI
//! path below `/policy-data/` with each variable in one spelling (an S-NSSAI is always
//! `sst[-sd]` with a lower-case SD, an MBS session id is its JSON with sorted keys), each segment
//! percent-encoded, so that a subscription's `monitoredResourceUris` and a change meet in one
//! hash lookup whatever form the consumer wrote.

use std::fmt::Write as _;

use serde_json::{json, Value};

/// Longest identifier accepted in a URI variable (255 fits every backend's key).
pub const MAX_ID_LEN: usize = 255;

/// The families of policy data resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `ues/{ueId}/...`
    Ue,
    /// `plmns/{plmnId}/ue-policy-set`
    Plmn,
    /// `sponsor-connectivity-data/{sponsorId}`
    Sponsor,
    /// `bdt-data/{bdtReferenceId}`
    Bdt,
    /// `slice-control-data/{snssai}`
    Slice,
    /// `mbs-session-pol-data/{polSessionId}`
    Mbs,
}

impl Kind {
    /// The `kind` column.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Ue => "ue",
            Kind::Plmn => "plmn",
            Kind::Sponsor => "sponsor",
            Kind::Bdt => "bdt",
            Kind::Slice => "slice",
            Kind::Mbs => "mbs",
        }
    }

    pub fn from_column(s: &str) -> Option<Kind> {
        Some(match s {
            "ue" => Kind::Ue,
            "plmn" => Kind::Plmn,
            "sponsor" => Kind::Sponsor,
            "bdt" => Kind::Bdt,
            "slice" => Kind::Slice,
            "mbs" => Kind::Mbs,
            _ => return None,
        })
    }
}

/// The parts of a UE's policy data (the `part` column of `Kind::Ue`); a usage monitoring
/// resource is `sm-data/{usageMonId}`.
pub const AM_DATA: &str = "am-data";
pub const UE_POLICY_SET: &str = "ue-policy-set";
pub const SM_DATA: &str = "sm-data";
pub const OPERATOR_SPECIFIC_DATA: &str = "operator-specific-data";
pub const USAGE_MON_PREFIX: &str = "sm-data/";

/// One stored resource.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    pub kind: Kind,
    pub id: String,
    /// For a UE, which of its data sets; `""` for the other kinds.
    pub part: String,
}

impl Key {
    pub fn ue(ue_id: &str, part: &str) -> Key {
        Key { kind: Kind::Ue, id: ue_id.to_owned(), part: part.to_owned() }
    }

    pub fn usage_mon(ue_id: &str, usage_mon_id: &str) -> Key {
        Key {
            kind: Kind::Ue,
            id: ue_id.to_owned(),
            part: format!("{USAGE_MON_PREFIX}{usage_mon_id}"),
        }
    }

    pub fn other(kind: Kind, id: &str) -> Key {
        Key { kind, id: id.to_owned(), part: String::new() }
    }

    /// The usageMonId of a usage monitoring resource.
    pub fn usage_mon_id(&self) -> Option<&str> {
        (self.kind == Kind::Ue).then(|| self.part.strip_prefix(USAGE_MON_PREFIX)).flatten()
    }

    /// The canonical path below `policy-data/` (see the module docs).
    pub fn path(&self) -> String {
        let mut p = String::with_capacity(48 + self.id.len() + self.part.len());
        match self.kind {
            Kind::Ue => {
                p.push_str("ues/");
                push_segment(&mut p, &self.id);
                p.push('/');
                match self.usage_mon_id() {
                    Some(u) => {
                        p.push_str(USAGE_MON_PREFIX);
                        push_segment(&mut p, u);
                    }
                    None => p.push_str(&self.part),
                }
            }
            Kind::Plmn => {
                p.push_str("plmns/");
                push_segment(&mut p, &self.id);
                p.push_str("/ue-policy-set");
            }
            other => {
                p.push_str(collection(other));
                p.push('/');
                push_segment(&mut p, &self.id);
            }
        }
        p
    }
}

/// The collection segment of the kinds addressed as `<collection>/{id}`.
fn collection(kind: Kind) -> &'static str {
    match kind {
        Kind::Ue => "ues",
        Kind::Plmn => "plmns",
        Kind::Sponsor => "sponsor-connectivity-data",
        Kind::Bdt => "bdt-data",
        Kind::Slice => "slice-control-data",
        Kind::Mbs => "mbs-session-pol-data",
    }
}

/// Appends `s` as one URI path segment: RFC 3986 `pchar`s as they are, everything else
/// percent-encoded (so a `/` inside an identifier never splits it).
pub fn push_segment(out: &mut String, s: &str) {
    for b in s.bytes() {
        let plain = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'-' | b'.'
                    | b'_'
                    | b'~'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
                    | b':'
                    | b'@'
            );
        if plain {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
}

fn percent_decode(s: &str) -> Option<String> {
    if !s.contains('%') {
        return Some(s.to_owned());
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn check_text(s: &str, what: &str) -> Result<(), String> {
    if s.is_empty() || s.len() > MAX_ID_LEN {
        return Err(format!("{what} must be 1 to {MAX_ID_LEN} bytes"));
    }
    if s.chars().any(char::is_control) {
        return Err(format!("{what} must not contain control characters"));
    }
    Ok(())
}

fn digits(s: &str, min: usize, max: usize) -> bool {
    (min..=max).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit())
}

/// Checks a ueId (VarUeId): a SUPI (`imsi-` 5 to 15 digits, `nai-`, `gci-`, `gli-`) or a GPSI
/// (`msisdn-` 5 to 15 digits, `extid-<local>@<domain>`).
pub fn check_ue_id(id: &str) -> Result<(), String> {
    check_text(id, "ueId")?;
    let ok = if let Some(r) = id.strip_prefix("imsi-") {
        digits(r, 5, 15)
    } else if let Some(r) = id.strip_prefix("msisdn-") {
        digits(r, 5, 15)
    } else if let Some(r) = id.strip_prefix("extid-") {
        r.split_once('@').is_some_and(|(l, d)| !l.is_empty() && !d.is_empty() && !d.contains('@'))
    } else {
        ["nai-", "gci-", "gli-"].iter().any(|p| id.strip_prefix(p).is_some_and(|r| !r.is_empty()))
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{id:?} is not a SUPI (imsi-<5..15 digits>, nai-, gci-, gli-) or GPSI \
             (msisdn-<5..15 digits>, extid-<id>@<domain>)"
        ))
    }
}

/// Checks a plmnId (VarPlmnId): MCC and MNC, 5 or 6 digits, optionally `-` and an 11 hex
/// digit NID.
pub fn check_plmn_id(id: &str) -> Result<(), String> {
    let (plmn, nid) = match id.split_once('-') {
        Some((p, n)) => (p, Some(n)),
        None => (id, None),
    };
    let nid_ok = nid.is_none_or(|n| n.len() == 11 && n.bytes().all(|b| b.is_ascii_hexdigit()));
    if digits(plmn, 5, 6) && nid_ok {
        Ok(())
    } else {
        Err(format!("{id:?} is not a PLMN id (MCC and MNC, 5 or 6 digits, optionally -<NID>)"))
    }
}

/// The PlmnId object (`mcc`, `mnc`) of a checked plmnId.
pub fn plmn_id_json(id: &str) -> Value {
    let plmn = id.split('-').next().unwrap_or(id);
    let (mcc, mnc) = plmn.split_at(3.min(plmn.len()));
    json!({"mcc": mcc, "mnc": mnc})
}

/// Checks an identifier without a format of its own (sponsorId, bdtReferenceId, usageMonId).
pub fn check_plain_id(id: &str, what: &str) -> Result<(), String> {
    check_text(id, what)
}

/// An S-NSSAI as the URI variable `snssai` writes it, in its canonical string form `sst` or
/// `sst-sd` (TS 29.571: one to three digits, optionally `-` and six hex digits; SD lower-case).
/// Accepted spellings: that string form, the JSON object (`{"sst":1,"sd":"000001"}`) and
/// OpenAPI's simple style for an object in a path (`sst,1,sd,000001`).
pub fn canonical_snssai(raw: &str) -> Result<String, String> {
    let bad = || {
        Err(format!(
            "{raw:?} is not an S-NSSAI (sst 0..255 and optional 6 hex digit sd, as `1-000001` \
             or {{\"sst\":1,\"sd\":\"000001\"}})"
        ))
    };
    let (sst, sd): (String, Option<String>) = if raw.trim_start().starts_with('{') {
        let Ok(v) = serde_json::from_str::<Value>(raw) else { return bad() };
        let Some(o) = v.as_object() else { return bad() };
        if o.keys().any(|k| k != "sst" && k != "sd") {
            return bad();
        }
        let Some(sst) = o.get("sst").and_then(Value::as_u64) else { return bad() };
        let sd = match o.get("sd") {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return bad(),
        };
        (sst.to_string(), sd)
    } else if let Some(rest) = raw.strip_prefix("sst,") {
        match rest.split_once(",sd,") {
            Some((sst, sd)) => (sst.to_owned(), Some(sd.to_owned())),
            None => (rest.to_owned(), None),
        }
    } else {
        match raw.split_once('-') {
            Some((sst, sd)) => (sst.to_owned(), Some(sd.to_owned())),
            None => (raw.to_owned(), None),
        }
    };
    if !digits(&sst, 1, 3) || sst.parse::<u16>().map_or(true, |n| n > 255) {
        return bad();
    }
    let sst = sst.parse::<u16>().unwrap_or(0).to_string();
    match sd {
        None => Ok(sst),
        Some(sd) if sd.len() == 6 && sd.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Ok(format!("{sst}-{}", sd.to_ascii_lowercase()))
        }
        Some(_) => bad(),
    }
}

/// The Snssai object of a canonical S-NSSAI string.
pub fn snssai_json(canonical: &str) -> Value {
    match canonical.split_once('-') {
        Some((sst, sd)) => json!({"sst": sst.parse::<u16>().unwrap_or(0), "sd": sd}),
        None => json!({"sst": canonical.parse::<u16>().unwrap_or(0)}),
    }
}

/// An MBS session policy data id (MbsSessPolDataId, written as JSON in the URI) in its canonical
/// form: the same JSON with object keys sorted and no spaces. Exactly one of `mbsSessionId`
/// (with a `tmgi` and/or an `ssm`) and `afAppId`.
pub fn canonical_mbs_id(raw: &str) -> Result<String, String> {
    let bad = |why: &str| Err(format!("{raw:?} is not an MbsSessPolDataId: {why}"));
    let Ok(v) = serde_json::from_str::<Value>(raw) else {
        return bad("must be a JSON object");
    };
    let Some(o) = v.as_object() else { return bad("must be a JSON object") };
    match (o.get("mbsSessionId"), o.get("afAppId")) {
        (Some(Value::Object(m)), None) => {
            if !m.contains_key("tmgi") && !m.contains_key("ssm") {
                return bad("mbsSessionId needs a tmgi or an ssm");
            }
        }
        (None, Some(Value::String(a))) if !a.is_empty() => {}
        _ => return bad("exactly one of mbsSessionId (an object) and afAppId (a string)"),
    }
    let mut out = String::new();
    canonical_json(&v, &mut out);
    check_text(&out, "polSessionId")?;
    Ok(out)
}

/// Writes `v` as JSON with object keys sorted, whatever map order serde_json was built with.
fn canonical_json(v: &Value, out: &mut String) {
    match v {
        Value::Object(o) => {
            let mut keys: Vec<&String> = o.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical_json(&o[k], out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical_json(x, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// What a monitored resource URI names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Monitored {
    /// The canonical path (see the module docs).
    pub path: String,
    /// Whether it names one stored resource (rather than a UE's whole policy data or the BDT
    /// data collection), which a fragment subscription (monResItems) needs.
    pub leaf: bool,
    /// Everything of the URI before `policy-data/` (`http://udr:7001/nudr-dr/v2/`), to write the
    /// URIs of deleted resources the way the consumer wrote its own.
    pub base: String,
}

/// Reads a monitored resource URI (`{apiRoot}/nudr-dr/v2/policy-data/...`, or relative from
/// `policy-data/`) into the resource it names. Resources that a PolicyDataChangeNotification
/// cannot describe (MBS session policy data) are refused.
pub fn parse_monitored_uri(uri: &str) -> Result<Monitored, String> {
    let path_part = uri.split(['?', '#']).next().unwrap_or("");
    let Some(at) = path_part.find("policy-data/") else {
        return Err(format!("{uri:?} names no policy-data resource"));
    };
    if at > 0 && !path_part[..at].ends_with('/') {
        return Err(format!("{uri:?} names no policy-data resource"));
    }
    let base = path_part[..at].to_owned();
    let rest = &path_part[at + "policy-data/".len()..];
    let segs: Option<Vec<String>> =
        rest.trim_end_matches('/').split('/').map(percent_decode).collect();
    let Some(segs) = segs else { return Err(format!("{uri:?}: bad percent-encoding")) };
    let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
    let not_a_resource = || Err(format!("{uri:?} is not a policy data resource served here"));
    let (key, leaf) = match segs.as_slice() {
        ["ues", ue] => {
            check_ue_id(ue)?;
            let mut p = String::from("ues/");
            push_segment(&mut p, ue);
            return Ok(Monitored { path: p, leaf: false, base });
        }
        ["ues", ue, part @ (AM_DATA | UE_POLICY_SET | SM_DATA | OPERATOR_SPECIFIC_DATA)] => {
            check_ue_id(ue)?;
            (Key::ue(ue, part), true)
        }
        ["ues", ue, "sm-data", um] => {
            check_ue_id(ue)?;
            check_plain_id(um, "usageMonId")?;
            (Key::usage_mon(ue, um), true)
        }
        ["plmns", plmn, "ue-policy-set"] => {
            check_plmn_id(plmn)?;
            (Key::other(Kind::Plmn, plmn), true)
        }
        ["sponsor-connectivity-data", id] => {
            check_plain_id(id, "sponsorId")?;
            (Key::other(Kind::Sponsor, id), true)
        }
        ["bdt-data"] => {
            return Ok(Monitored { path: "bdt-data".into(), leaf: false, base });
        }
        ["bdt-data", id] => {
            check_plain_id(id, "bdtReferenceId")?;
            (Key::other(Kind::Bdt, id), true)
        }
        ["slice-control-data", s] => (Key::other(Kind::Slice, &canonical_snssai(s)?), true),
        ["mbs-session-pol-data", ..] => {
            return Err(format!(
                "{uri:?}: MBS session policy data changes cannot be notified \
                 (PolicyDataChangeNotification has no attribute for them)"
            ))
        }
        _ => return not_a_resource(),
    };
    Ok(Monitored { path: key.path(), leaf, base })
}

/// The canonical path's segment prefixes, shortest first: `ues`, `ues/x`, `ues/x/sm-data`, ...
/// A subscription monitoring any of them sees a change of `path`.
pub fn prefixes(path: &str) -> impl Iterator<Item = &str> {
    path.match_indices('/').map(move |(i, _)| &path[..i]).chain(std::iter::once(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ue_ids() {
        for ok in [
            "imsi-001010000000001",
            "msisdn-33612345678",
            "nai-user@realm",
            "extid-a@b.example",
            "gci-x",
            "gli-y",
        ] {
            assert!(check_ue_id(ok).is_ok(), "{ok}");
        }
        for bad in ["imsi-12", "imsi-0010100000000011", "msisdn-abc", "extid-ab", "nai-", "x", ""] {
            assert!(check_ue_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn snssai_spellings_meet() {
        for s in ["1-00000A", r#"{"sst":1,"sd":"00000a"}"#, "sst,1,sd,00000a", "001-00000a"] {
            assert_eq!(canonical_snssai(s).unwrap(), "1-00000a", "{s}");
        }
        assert_eq!(canonical_snssai("2").unwrap(), "2");
        assert_eq!(canonical_snssai(r#"{"sst":2}"#).unwrap(), "2");
        for bad in ["256", "1-0001", "a", r#"{"sst":1,"x":1}"#, "1-zzzzzz", ""] {
            assert!(canonical_snssai(bad).is_err(), "{bad}");
        }
        assert_eq!(snssai_json("1-00000a"), json!({"sst": 1, "sd": "00000a"}));
    }

    #[test]
    fn plmn_and_mbs_ids() {
        assert!(check_plmn_id("00101").is_ok());
        assert!(check_plmn_id("310410-0123456789a").is_ok());
        assert!(check_plmn_id("0010").is_err());
        assert_eq!(plmn_id_json("310410"), json!({"mcc": "310", "mnc": "410"}));
        let a = canonical_mbs_id(r#"{"mbsSessionId":{"tmgi":{"plmnId":{"mnc":"01","mcc":"001"},"mbsServiceId":"abc123"}}}"#).unwrap();
        let b = canonical_mbs_id(r#"{ "mbsSessionId": {"tmgi": {"mbsServiceId":"abc123","plmnId":{"mcc":"001","mnc":"01"}}}}"#).unwrap();
        assert_eq!(a, b);
        assert!(canonical_mbs_id(r#"{"afAppId":"app1"}"#).is_ok());
        assert!(canonical_mbs_id(r#"{"afAppId":"a","mbsSessionId":{"ssm":{}}}"#).is_err());
        assert!(canonical_mbs_id("app1").is_err());
    }

    #[test]
    fn monitored_uris_name_canonical_paths() {
        let m = parse_monitored_uri(
            "http://udr:7001/nudr-dr/v2/policy-data/ues/imsi-001010000000001/sm-data",
        )
        .unwrap();
        assert_eq!(m.path, "ues/imsi-001010000000001/sm-data");
        assert_eq!(m.base, "http://udr:7001/nudr-dr/v2/");
        assert!(m.leaf);
        let m = parse_monitored_uri(
            "https://udr/x/nudr-dr/v2/policy-data/slice-control-data/%7B%22sst%22%3A1%7D",
        )
        .unwrap();
        assert_eq!(m.path, "slice-control-data/1");
        let m = parse_monitored_uri("policy-data/ues/nai-a%2Fb@c").unwrap();
        assert_eq!(m.path, "ues/nai-a%2Fb@c");
        assert!(!m.leaf);
        assert_eq!(Key::ue("nai-a/b@c", SM_DATA).path(), "ues/nai-a%2Fb@c/sm-data");
        assert_eq!(
            Key::usage_mon("imsi-001010000000001", "um 1").path(),
            "ues/imsi-001010000000001/sm-data/um%201"
        );
        assert_eq!(
            parse_monitored_uri("/nudr-dr/v2/policy-data/bdt-data").unwrap().path,
            "bdt-data"
        );
        for bad in [
            "http://udr/nudr-dr/v2/policy-data/ues/imsi-1/sm-data",
            "http://udr/nudr-dr/v2/policy-data/ues/imsi-001010000000001/other",
            "http://udr/nudr-dr/v2/policy-data/mbs-session-pol-data/x",
            "http://udr/nudr-dr/v2/subscription-data/imsi-001010000000001",
            "http://udr/nudr-dr/v2/xpolicy-data/ues/imsi-001010000000001",
        ] {
            assert!(parse_monitored_uri(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn prefixes_of_a_path() {
        let p: Vec<&str> = prefixes("ues/x/sm-data/u").collect();
        assert_eq!(p, ["ues", "ues/x", "ues/x/sm-data", "ues/x/sm-data/u"]);
        assert_eq!(prefixes("bdt-data/r").collect::<Vec<_>>(), ["bdt-data", "bdt-data/r"]);
    }
}
