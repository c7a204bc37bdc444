//! URSP, the UE route selection policy as it goes to the UE (TS 24.526 §5.2): the UE policy
//! part contents of type URSP, encoded from the project's `decision.urspRules` and decoded
//! back (the tests' round trip, and what a reader of a captured message needs).
//!
//! The JSON a project writes is this crate's own (TS 29.525 carries URSP only as bytes):
//! ```json
//! {"precedence": 1,
//!  "trafficDescriptor": {"matchAll": true, "dnns": ["ims"], "fqdns": ["example.com"],
//!    "connectionCapabilities": ["IMS", "MMS", "SUPL", "INTERNET"],
//!    "osAppIds": [{"osId": "97a498e3-fc92-5c94-8986-0333d06e4e47", "appId": "com.example"}]},
//!  "routeSelectionDescriptors": [{"precedence": 1, "sscMode": 1,
//!    "sNssai": {"sst": 2, "sd": "000001"}, "dnn": "enterprise", "pduSessionType": "IPV4",
//!    "accessType": "3GPP_ACCESS"}]}
//! ```
//! `sNssai`/`dnn` may also be lists (`sNssais`, `dnns`): TS 24.526 allows several of each in
//! one route selection descriptor. Every length is big-endian, as the clause says.

use serde_json::{json, Map, Value};

/// Traffic descriptor component type identifiers (TS 24.526 Table 5.2.1).
mod td {
    pub const MATCH_ALL: u8 = 0x01;
    pub const OS_ID_OS_APP_ID: u8 = 0x08;
    pub const DNN: u8 = 0x88;
    pub const CONNECTION_CAPABILITIES: u8 = 0x90;
    pub const FQDN: u8 = 0x91;
}

/// Route selection descriptor component type identifiers (TS 24.526 Table 5.2.1).
mod rsd {
    pub const SSC_MODE: u8 = 0x01;
    pub const S_NSSAI: u8 = 0x02;
    pub const DNN: u8 = 0x04;
    pub const PDU_SESSION_TYPE: u8 = 0x08;
    pub const PREFERRED_ACCESS_TYPE: u8 = 0x10;
}

/// Connection capabilities (TS 24.526 Table 5.2.1, "connection capabilities type").
const CAPABILITIES: [(&str, u8); 4] =
    [("IMS", 0x01), ("MMS", 0x02), ("SUPL", 0x04), ("INTERNET", 0x08)];

/// PDU session types (TS 24.501 §9.11.4.11, the value part).
const PDU_SESSION_TYPES: [(&str, u8); 5] =
    [("IPV4", 1), ("IPV6", 2), ("IPV4V6", 3), ("UNSTRUCTURED", 4), ("ETHERNET", 5)];

/// Access types (TS 24.526 Table 5.2.1, "preferred access type type").
const ACCESS_TYPES: [(&str, u8); 2] = [("3GPP_ACCESS", 1), ("NON_3GPP_ACCESS", 2)];

/// Why a rule cannot be encoded: the JSON pointer of the member and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    pub at: String,
    pub why: String,
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.at, self.why)
    }
}

fn bad<T>(at: impl Into<String>, why: impl Into<String>) -> Result<T, Invalid> {
    Err(Invalid { at: at.into(), why: why.into() })
}

/// Appends `body` after its 2-octet length.
fn put_lv16(out: &mut Vec<u8>, at: &str, body: &[u8]) -> Result<(), Invalid> {
    let n = u16::try_from(body.len()).or_else(|_| bad(at, "longer than 65535 octets"))?;
    out.extend_from_slice(&n.to_be_bytes());
    out.extend_from_slice(body);
    Ok(())
}

/// A DNN or FQDN as TS 24.501 §9.11.2.1B encodes a DNN (TS 23.003 §9.1: each label after its
/// one-octet length), preceded by the one-octet length of the whole.
fn put_labels(out: &mut Vec<u8>, at: &str, name: &str) -> Result<(), Invalid> {
    let mut v = Vec::with_capacity(name.len() + 1);
    for label in name.split('.') {
        if label.is_empty() || label.len() > 63 {
            return bad(at, "must be dot-separated labels of 1..63 characters");
        }
        v.push(label.len() as u8);
        v.extend_from_slice(label.as_bytes());
    }
    let n = u8::try_from(v.len()).or_else(|_| bad(at, "longer than 255 octets"))?;
    out.push(n);
    out.extend_from_slice(&v);
    Ok(())
}

fn strings<'a>(v: &'a Value, at: &str) -> Result<Vec<&'a str>, Invalid> {
    match v {
        Value::String(s) => Ok(vec![s.as_str()]),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .map(|(i, s)| {
                s.as_str().map_or_else(|| bad(format!("{at}/{i}"), "must be a string"), Ok)
            })
            .collect(),
        _ => bad(at, "must be a string or a list of strings"),
    }
}

fn precedence(o: &Map<String, Value>, at: &str) -> Result<u8, Invalid> {
    match o.get("precedence").and_then(Value::as_u64) {
        Some(p) if p <= 255 => Ok(p as u8),
        _ => bad(format!("{at}/precedence"), "must be an integer 0..255"),
    }
}

fn hex_digit(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// An OS Id: a UUID (RFC 4122), its 16 octets in order.
fn uuid_octets(s: &str) -> Option<[u8; 16]> {
    let hex: Vec<u8> = s.bytes().filter(|b| *b != b'-').collect();
    if hex.len() != 32 {
        return None;
    }
    let mut o = [0u8; 16];
    for (i, pair) in hex.chunks(2).enumerate() {
        o[i] = hex_digit(pair[0])? << 4 | hex_digit(pair[1])?;
    }
    Some(o)
}

fn traffic_descriptor(v: &Value, at: &str) -> Result<Vec<u8>, Invalid> {
    let Some(o) = v.as_object() else { return bad(at, "must be an object") };
    let mut out = Vec::new();
    if o.get("matchAll").and_then(Value::as_bool) == Some(true) {
        // TS 24.526: match-all stands alone in its traffic descriptor.
        if o.len() > 1 {
            return bad(format!("{at}/matchAll"), "match-all admits no other component");
        }
        out.push(td::MATCH_ALL);
        return Ok(out);
    }
    if let Some(ids) = o.get("osAppIds") {
        let Some(list) = ids.as_array() else {
            return bad(format!("{at}/osAppIds"), "must be a list");
        };
        for (i, id) in list.iter().enumerate() {
            let here = format!("{at}/osAppIds/{i}");
            let os = id.get("osId").and_then(Value::as_str).and_then(uuid_octets);
            let Some(os) = os else { return bad(format!("{here}/osId"), "must be a UUID") };
            let app = id.get("appId").and_then(Value::as_str).unwrap_or("");
            let Ok(n) = u8::try_from(app.len()) else {
                return bad(format!("{here}/appId"), "must be 1..255 octets");
            };
            if n == 0 {
                return bad(format!("{here}/appId"), "must be 1..255 octets");
            }
            out.push(td::OS_ID_OS_APP_ID);
            out.extend_from_slice(&os);
            out.push(n);
            out.extend_from_slice(app.as_bytes());
        }
    }
    if let Some(d) = o.get("dnns") {
        for (i, dnn) in strings(d, &format!("{at}/dnns"))?.into_iter().enumerate() {
            out.push(td::DNN);
            put_labels(&mut out, &format!("{at}/dnns/{i}"), dnn)?;
        }
    }
    if let Some(c) = o.get("connectionCapabilities") {
        let names = strings(c, &format!("{at}/connectionCapabilities"))?;
        let mut codes = Vec::with_capacity(names.len());
        for (i, n) in names.iter().enumerate() {
            match CAPABILITIES.iter().find(|(k, _)| k == n) {
                Some((_, c)) => codes.push(*c),
                None => {
                    return bad(
                        format!("{at}/connectionCapabilities/{i}"),
                        "must be IMS, MMS, SUPL or INTERNET",
                    )
                }
            }
        }
        if !codes.is_empty() {
            out.push(td::CONNECTION_CAPABILITIES);
            out.push(codes.len() as u8);
            out.extend_from_slice(&codes);
        }
    }
    if let Some(f) = o.get("fqdns") {
        for (i, fqdn) in strings(f, &format!("{at}/fqdns"))?.into_iter().enumerate() {
            out.push(td::FQDN);
            put_labels(&mut out, &format!("{at}/fqdns/{i}"), fqdn)?;
        }
    }
    if out.is_empty() {
        return bad(
            at,
            "needs matchAll or at least one of osAppIds, dnns, connectionCapabilities, fqdns",
        );
    }
    Ok(out)
}

fn snssai(v: &Value, at: &str, out: &mut Vec<u8>) -> Result<(), Invalid> {
    let sst = v.get("sst").and_then(Value::as_u64).filter(|s| *s <= 255);
    let Some(sst) = sst else { return bad(format!("{at}/sst"), "must be an integer 0..255") };
    out.push(rsd::S_NSSAI);
    match v.get("sd").and_then(Value::as_str) {
        None => {
            out.push(1);
            out.push(sst as u8);
        }
        Some(sd) => {
            let b = sd.as_bytes();
            if b.len() != 6 || !b.iter().all(u8::is_ascii_hexdigit) {
                return bad(format!("{at}/sd"), "must be 6 hexadecimal digits");
            }
            out.extend_from_slice(&[4, sst as u8]);
            for pair in b.chunks(2) {
                out.push(hex_digit(pair[0]).unwrap_or(0) << 4 | hex_digit(pair[1]).unwrap_or(0));
            }
        }
    }
    Ok(())
}

fn coded(
    v: Option<&Value>,
    at: &str,
    table: &[(&str, u8)],
    what: &str,
) -> Result<Option<u8>, Invalid> {
    let Some(v) = v else { return Ok(None) };
    match v.as_str().and_then(|s| table.iter().find(|(k, _)| *k == s)) {
        Some((_, c)) => Ok(Some(*c)),
        None => bad(at, format!("must be {what}")),
    }
}

fn route_selection(v: &Value, at: &str) -> Result<(u8, Vec<u8>), Invalid> {
    let Some(o) = v.as_object() else { return bad(at, "must be an object") };
    let p = precedence(o, at)?;
    let mut out = Vec::new();
    if let Some(m) = o.get("sscMode") {
        match m.as_u64() {
            Some(m @ 1..=3) => out.extend_from_slice(&[rsd::SSC_MODE, m as u8]),
            _ => return bad(format!("{at}/sscMode"), "must be 1, 2 or 3"),
        }
    }
    for key in ["sNssai", "sNssais"] {
        match o.get(key) {
            None => {}
            Some(Value::Array(list)) => {
                for (i, s) in list.iter().enumerate() {
                    snssai(s, &format!("{at}/{key}/{i}"), &mut out)?;
                }
            }
            Some(s) => snssai(s, &format!("{at}/{key}"), &mut out)?,
        }
    }
    for key in ["dnn", "dnns"] {
        if let Some(d) = o.get(key) {
            for (i, dnn) in strings(d, &format!("{at}/{key}"))?.into_iter().enumerate() {
                out.push(rsd::DNN);
                let here =
                    if d.is_array() { format!("{at}/{key}/{i}") } else { format!("{at}/{key}") };
                put_labels(&mut out, &here, dnn)?;
            }
        }
    }
    let t = coded(
        o.get("pduSessionType"),
        &format!("{at}/pduSessionType"),
        &PDU_SESSION_TYPES,
        "IPV4, IPV6, IPV4V6, UNSTRUCTURED or ETHERNET",
    )?;
    if let Some(t) = t {
        out.extend_from_slice(&[rsd::PDU_SESSION_TYPE, t]);
    }
    let a = coded(
        o.get("accessType"),
        &format!("{at}/accessType"),
        &ACCESS_TYPES,
        "3GPP_ACCESS or NON_3GPP_ACCESS",
    )?;
    if let Some(a) = a {
        out.extend_from_slice(&[rsd::PREFERRED_ACCESS_TYPE, a]);
    }
    Ok((p, out))
}

/// The URSP of `rules` (the decision's `urspRules`): the UE policy part contents of a part of
/// type URSP, each rule with its length, precedence, traffic descriptor and route selection
/// descriptor list (TS 24.526 §5.2, Figures 5.2.1 to 5.2.4).
pub fn encode(rules: &[Value]) -> Result<Vec<u8>, Invalid> {
    let mut out = Vec::with_capacity(64 * rules.len());
    for (i, rule) in rules.iter().enumerate() {
        let at = format!("/urspRules/{i}");
        let Some(o) = rule.as_object() else { return bad(at, "must be an object") };
        let mut r = vec![precedence(o, &at)?];
        let tdv = o.get("trafficDescriptor").map_or_else(
            || bad(format!("{at}/trafficDescriptor"), "is mandatory"),
            |t| traffic_descriptor(t, &format!("{at}/trafficDescriptor")),
        )?;
        put_lv16(&mut r, &at, &tdv)?;
        let list = o.get("routeSelectionDescriptors").and_then(Value::as_array);
        let Some(list) = list.filter(|l| !l.is_empty()) else {
            return bad(format!("{at}/routeSelectionDescriptors"), "must be a non-empty list");
        };
        let mut rsds = Vec::new();
        for (j, d) in list.iter().enumerate() {
            let here = format!("{at}/routeSelectionDescriptors/{j}");
            let (p, contents) = route_selection(d, &here)?;
            let mut one = vec![p];
            put_lv16(&mut one, &here, &contents)?;
            put_lv16(&mut rsds, &here, &one)?;
        }
        put_lv16(&mut r, &at, &rsds)?;
        put_lv16(&mut out, &at, &r)?;
    }
    Ok(out)
}

/// A reader of the octets, failing with where it ran out.
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn new(b: &'a [u8]) -> Self {
        Reader { b, at: 0 }
    }
    fn done(&self) -> bool {
        self.at >= self.b.len()
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.b.len());
        let Some(end) = end else {
            return Err(format!("truncated at octet {} (wanted {n} more)", self.at));
        };
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn lv16(&mut self) -> Result<&'a [u8], String> {
        let l = self.take(2)?;
        self.take(u16::from_be_bytes([l[0], l[1]]) as usize)
    }
    fn lv8(&mut self) -> Result<&'a [u8], String> {
        let n = self.u8()? as usize;
        self.take(n)
    }
}

fn labels(b: &[u8]) -> Result<String, String> {
    let mut r = Reader::new(b);
    let mut parts = Vec::new();
    while !r.done() {
        parts.push(String::from_utf8_lossy(r.lv8()?).into_owned());
    }
    Ok(parts.join("."))
}

fn name_of(table: &[(&str, u8)], c: u8) -> Value {
    table.iter().find(|(_, v)| *v == c).map_or(Value::from(c), |(k, _)| Value::from(*k))
}

fn push(o: &mut Map<String, Value>, key: &str, v: Value) {
    match o.entry(key).or_insert_with(|| Value::Array(Vec::new())) {
        Value::Array(a) => a.push(v),
        other => *other = Value::Array(vec![v]),
    }
}

/// The rules of a URSP part's contents, in the JSON [`encode`] takes (lists for `sNssais` and
/// `dnns` in route selection descriptors).
pub fn decode(b: &[u8]) -> Result<Vec<Value>, String> {
    let mut rules = Vec::new();
    let mut r = Reader::new(b);
    while !r.done() {
        let mut rule = Reader::new(r.lv16()?);
        let precedence = rule.u8()?;
        let mut t = Reader::new(rule.lv16()?);
        let mut tdo = Map::new();
        while !t.done() {
            match t.u8()? {
                td::MATCH_ALL => {
                    tdo.insert("matchAll".into(), Value::Bool(true));
                }
                td::OS_ID_OS_APP_ID => {
                    let os = t.take(16)?;
                    let h: String = os.iter().map(|x| format!("{x:02x}")).collect();
                    let id = format!(
                        "{}-{}-{}-{}-{}",
                        &h[..8],
                        &h[8..12],
                        &h[12..16],
                        &h[16..20],
                        &h[20..]
                    );
                    let app = String::from_utf8_lossy(t.lv8()?).into_owned();
                    push(&mut tdo, "osAppIds", json!({"osId": id, "appId": app}));
                }
                td::DNN => push(&mut tdo, "dnns", Value::from(labels(t.lv8()?)?)),
                td::FQDN => push(&mut tdo, "fqdns", Value::from(labels(t.lv8()?)?)),
                td::CONNECTION_CAPABILITIES => {
                    for c in t.lv8()? {
                        push(&mut tdo, "connectionCapabilities", name_of(&CAPABILITIES, *c));
                    }
                }
                other => {
                    return Err(format!("traffic descriptor component {other:#04x} not known"))
                }
            }
        }
        let mut list = Reader::new(rule.lv16()?);
        let mut rsds = Vec::new();
        while !list.done() {
            let mut d = Reader::new(list.lv16()?);
            let mut o = Map::new();
            o.insert("precedence".into(), Value::from(d.u8()?));
            let mut c = Reader::new(d.lv16()?);
            while !c.done() {
                match c.u8()? {
                    rsd::SSC_MODE => {
                        o.insert("sscMode".into(), Value::from(c.u8()? & 0x07));
                    }
                    rsd::S_NSSAI => {
                        let s = c.lv8()?;
                        let v = match s {
                            [sst] => json!({"sst": sst}),
                            [sst, sd @ ..] if sd.len() >= 3 => json!({"sst": sst,
                                "sd": format!("{:02X}{:02X}{:02X}", sd[0], sd[1], sd[2])}),
                            _ => return Err("S-NSSAI of a length not known".into()),
                        };
                        push(&mut o, "sNssais", v);
                    }
                    rsd::DNN => push(&mut o, "dnns", Value::from(labels(c.lv8()?)?)),
                    rsd::PDU_SESSION_TYPE => {
                        o.insert("pduSessionType".into(), name_of(&PDU_SESSION_TYPES, c.u8()?));
                    }
                    rsd::PREFERRED_ACCESS_TYPE => {
                        o.insert("accessType".into(), name_of(&ACCESS_TYPES, c.u8()?));
                    }
                    other => {
                        return Err(format!(
                            "route selection descriptor component {other:#04x} not known"
                        ))
                    }
                }
            }
            rsds.push(Value::Object(o));
        }
        rules.push(json!({
            "precedence": precedence,
            "trafficDescriptor": tdo,
            "routeSelectionDescriptors": rsds,
        }));
    }
    Ok(rules)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One rule, octet by octet from TS 24.526 §5.2 (Figure 5.2.2: length, precedence, TD
    /// length, TD, RSD list length, list; Figure 5.2.3: RSD length, precedence, contents
    /// length, contents) and Table 5.2.1's component encodings.
    #[test]
    fn a_rule_is_the_octets_the_clause_gives() {
        let rule = json!({
            "precedence": 10,
            "trafficDescriptor": {"dnns": ["ims"], "connectionCapabilities": ["IMS", "INTERNET"]},
            "routeSelectionDescriptors": [{"precedence": 1, "sscMode": 1,
                "sNssai": {"sst": 1, "sd": "000001"}, "dnn": "ims",
                "pduSessionType": "IPV4V6", "accessType": "3GPP_ACCESS"}]
        });
        let want: Vec<u8> = vec![
            0x00, 0x26, // length of the URSP rule: 38
            0x0a, // precedence 10
            0x00, 0x0a, // length of the traffic descriptor: 10
            0x88, 0x04, 0x03, b'i', b'm', b's', // DNN type: length 4, label "ims"
            0x90, 0x02, 0x01, 0x08, // connection capabilities: 2, IMS, Internet
            0x00, 0x17, // length of the RSD list: 23
            0x00, 0x15, // length of the RSD: 21
            0x01, // RSD precedence 1
            0x00, 0x12, // length of the RSD contents: 18
            0x01, 0x01, // SSC mode 1
            0x02, 0x04, 0x01, 0x00, 0x00, 0x01, // S-NSSAI: length 4, SST 1, SD 000001
            0x04, 0x04, 0x03, b'i', b'm', b's', // DNN "ims"
            0x08, 0x03, // PDU session type IPv4v6
            0x10, 0x01, // preferred access type 3GPP
        ];
        assert_eq!(encode(std::slice::from_ref(&rule)).unwrap(), want);
        let back = decode(&want).unwrap();
        assert_eq!(back[0]["trafficDescriptor"], rule["trafficDescriptor"]);
        let d = &back[0]["routeSelectionDescriptors"][0];
        assert_eq!(d["sNssais"], json!([{"sst": 1, "sd": "000001"}]));
        assert_eq!((d["dnns"].clone(), d["sscMode"].clone()), (json!(["ims"]), json!(1)));
        assert_eq!(d["pduSessionType"], "IPV4V6");
    }

    #[test]
    fn match_all_os_app_ids_and_fqdns_round_trip() {
        let rules = vec![
            json!({"precedence": 255, "trafficDescriptor": {"matchAll": true},
                "routeSelectionDescriptors": [{"precedence": 1, "sNssais": [{"sst": 1}],
                "dnns": ["internet"], "pduSessionType": "IPV4", "accessType": "NON_3GPP_ACCESS"}]}),
            json!({"precedence": 2, "trafficDescriptor": {
                "osAppIds": [{"osId": "97a498e3-fc92-5c94-8986-0333d06e4e47", "appId": "com.example"}],
                "fqdns": ["video.example.com"]},
                "routeSelectionDescriptors": [{"precedence": 1, "sscMode": 3, "sNssais": [{"sst": 2}]},
                    {"precedence": 2, "dnns": ["a.b"]}]}),
        ];
        let b = encode(&rules).unwrap();
        // Match-all is the one octet 0x01, its traffic descriptor one octet long.
        assert_eq!(&b[2..6], &[0xff, 0x00, 0x01, 0x01]);
        let back = decode(&b).unwrap();
        assert_eq!(back, rules);
        // The OS Id's 16 octets in UUID order, then the App Id after its length.
        let at = b.windows(2).position(|w| w == [0x08, 0x97]).unwrap();
        assert_eq!(b[at + 17], 11);
    }

    #[test]
    fn what_cannot_be_encoded_is_named() {
        let e = encode(&[json!({"precedence": 1, "trafficDescriptor": {"matchAll": true},
            "routeSelectionDescriptors": [{"precedence": 1, "sscMode": 4}]})])
        .unwrap_err();
        assert_eq!(e.at, "/urspRules/0/routeSelectionDescriptors/0/sscMode");
        let e = encode(&[json!({"precedence": 1, "trafficDescriptor": {},
            "routeSelectionDescriptors": [{"precedence": 1}]})])
        .unwrap_err();
        assert_eq!(e.at, "/urspRules/0/trafficDescriptor");
        let e =
            encode(&[json!({"precedence": 1, "trafficDescriptor": {"dnns": ["x"]}})]).unwrap_err();
        assert_eq!(e.at, "/urspRules/0/routeSelectionDescriptors");
        assert!(decode(&[0x00, 0x05, 0x01]).is_err());
    }
}
