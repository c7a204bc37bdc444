//! Correlation ids taken cheaply from what a message already shows, on the request path: no JSON
//! parse and no Diameter decode.
//!
//! * SBI: a SUPI (`imsi-...`, `nai-...`) or GPSI (`msisdn-...`, `extid-...`) written as a path
//!   segment or a query value (`/ues/{ueId}`, `?subscriberId=imsi-...`); a session or
//!   association id as the segment after one of [`SESSION_COLLECTIONS`]
//!   (`/sm-policies/{smPolicyId}`, `/pcfBindings/{bindingId}`), in the path or in a 201's
//!   `Location`; `"supi":"..."` / `"gpsi":"..."` in the first [`BODY_SCAN`] bytes of a JSON
//!   body, by a byte search.
//! * Diameter: one walk over the top-level AVPs of the wire bytes for Session-Id,
//!   CC-Request-Type, Result-Code / Experimental-Result-Code, Subscription-Id (END_USER_IMSI,
//!   END_USER_E164) and Sh's User-Identity (MSISDN).

use std::sync::OnceLock;

use memchr::memmem;

/// Bytes of a body searched for `"supi"` and `"gpsi"`: the SUPI is among the first members of
/// every TS 29.512/29.521/29.519 body that carries one, and the search must stay bounded.
pub const BODY_SCAN: usize = 4096;

/// Resource collections whose next path segment names the session or association an exchange
/// is about: SM, AM and UE policy associations, N5 application sessions, BSF bindings, NF
/// registrations and subscriptions at the NRF and the UDR.
pub const SESSION_COLLECTIONS: &[&str] = &[
    "sm-policies",
    "policies",
    "app-sessions",
    "pcfBindings",
    "pcf-ue-bindings",
    "pcf-mbs-bindings",
    "nf-instances",
    "subscriptions",
    "subs-to-notify",
];

const SUPI_PREFIXES: &[&str] = &["imsi-", "nai-"];
const GPSI_PREFIXES: &[&str] = &["msisdn-", "extid-"];

/// What a request's path and query say.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PathIds<'a> {
    pub supi: Option<&'a str>,
    pub gpsi: Option<&'a str>,
    pub session_id: Option<&'a str>,
}

/// Ids in a path and query (`/npcf-smpolicycontrol/v1/sm-policies/42`,
/// `/nudr-group-id-map/v1/nf-group-ids?subscriberId=imsi-001010000000001`).
pub fn path_ids(path_and_query: &str) -> PathIds<'_> {
    let mut ids = PathIds::default();
    let (path, query) = match path_and_query.split_once('?') {
        Some((p, q)) => (p, q),
        None => (path_and_query, ""),
    };
    let mut after_collection = false;
    for seg in path.split('/') {
        if after_collection && !seg.is_empty() && ids.session_id.is_none() {
            ids.session_id = Some(seg);
        }
        after_collection = SESSION_COLLECTIONS.contains(&seg);
        classify(seg, &mut ids);
    }
    for pair in query.split('&') {
        let value = pair.split_once('=').map_or(pair, |(_, v)| v);
        for v in value.split(',') {
            classify(v, &mut ids);
        }
    }
    ids
}

fn classify<'a>(token: &'a str, ids: &mut PathIds<'a>) {
    if ids.supi.is_none() && SUPI_PREFIXES.iter().any(|p| has_id_after(token, p)) {
        ids.supi = Some(token);
    } else if ids.gpsi.is_none() && GPSI_PREFIXES.iter().any(|p| has_id_after(token, p)) {
        ids.gpsi = Some(token);
    }
}

fn has_id_after(token: &str, prefix: &str) -> bool {
    token.len() > prefix.len() && token.starts_with(prefix)
}

/// The session or association a 201's `Location` (absolute or a path) names.
pub fn location_session(location: &str) -> Option<&str> {
    let path = match location.find("://") {
        Some(i) => {
            let rest = &location[i + 3..];
            &rest[rest.find('/')?..]
        }
        None => location,
    };
    path_ids(path).session_id
}

/// A member [`json_string`] looks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonName {
    Supi,
    Gpsi,
}

impl JsonName {
    /// Its searcher, built once (building one per search cost as much as the search).
    fn finder(self) -> &'static memmem::Finder<'static> {
        static FINDERS: OnceLock<[memmem::Finder<'static>; 2]> = OnceLock::new();
        let f = FINDERS
            .get_or_init(|| [memmem::Finder::new(b"\"supi\""), memmem::Finder::new(b"\"gpsi\"")]);
        &f[self as usize]
    }
}

/// The string value of `"name":"value"` within the first [`BODY_SCAN`] bytes of a JSON body.
/// Values with escapes are not taken (no identifier has one), nor values longer than 128
/// bytes.
pub fn json_string(body: &[u8], name: JsonName) -> Option<&str> {
    let scan = &body[..body.len().min(BODY_SCAN)];
    let finder = name.finder();
    let len = finder.needle().len();
    let mut from = 0;
    while let Some(at) = finder.find(&scan[from..]) {
        let mut i = from + at + len;
        from = i;
        i = skip_ws(scan, i);
        if scan.get(i) != Some(&b':') {
            continue;
        }
        i = skip_ws(scan, i + 1);
        if scan.get(i) != Some(&b'"') {
            continue;
        }
        let start = i + 1;
        let len = scan[start..].iter().take(129).position(|&b| b == b'"' || b == b'\\')?;
        if scan[start + len] == b'\\' || len == 0 {
            return None;
        }
        return std::str::from_utf8(&scan[start..start + len]).ok();
    }
    None
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\r' | b'\n')) {
        i += 1;
    }
    i
}

// === Diameter ===

const FLAG_REQUEST: u8 = 0x80;
const AVP_FLAG_VENDOR: u8 = 0x80;
const VENDOR_3GPP: u32 = 10415;
const SESSION_ID: u32 = 263;
const RESULT_CODE: u32 = 268;
const EXPERIMENTAL_RESULT: u32 = 297;
const EXPERIMENTAL_RESULT_CODE: u32 = 298;
const CC_REQUEST_TYPE: u32 = 416;
const SUBSCRIPTION_ID: u32 = 443;
const SUBSCRIPTION_ID_DATA: u32 = 444;
const SUBSCRIPTION_ID_TYPE: u32 = 450;
const END_USER_E164: u32 = 0;
const END_USER_IMSI: u32 = 1;
const USER_IDENTITY: u32 = 700;
const MSISDN: u32 = 701;

/// What a Diameter message's header and top-level AVPs say.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DiameterIds<'a> {
    pub request: bool,
    pub application_id: u32,
    pub command_code: u32,
    pub hop_by_hop: u32,
    pub end_to_end: u32,
    pub session_id: Option<&'a str>,
    pub cc_request_type: Option<u32>,
    /// Result-Code, else Experimental-Result-Code.
    pub result: Option<u32>,
    /// Subscription-Id-Data of an END_USER_IMSI Subscription-Id.
    pub imsi: Option<&'a str>,
    /// An END_USER_E164 Subscription-Id's data, else Sh's User-Identity MSISDN (TBCD).
    pub msisdn: Option<Msisdn<'a>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Msisdn<'a> {
    Digits(&'a str),
    /// TS 29.329 MSISDN: TBCD, two digits an octet, low nibble first, 0xF filler.
    Tbcd(&'a [u8]),
}

/// `None` when the bytes are not a whole Diameter message header; AVPs after a malformed one
/// are not read (the node decoded the message already, so that does not happen for a copy).
pub fn diameter_ids(wire: &[u8]) -> Option<DiameterIds<'_>> {
    if wire.len() < 20 {
        return None;
    }
    let u32_at = |i: usize| u32::from_be_bytes([wire[i], wire[i + 1], wire[i + 2], wire[i + 3]]);
    let mut ids = DiameterIds {
        request: wire[4] & FLAG_REQUEST != 0,
        command_code: u32_at(4) & 0x00ff_ffff,
        application_id: u32_at(8),
        hop_by_hop: u32_at(12),
        end_to_end: u32_at(16),
        ..DiameterIds::default()
    };
    for (code, vendor, data) in Avps(&wire[20..]) {
        match (code, vendor) {
            (SESSION_ID, 0) if ids.session_id.is_none() => {
                ids.session_id = std::str::from_utf8(data).ok();
            }
            (CC_REQUEST_TYPE, 0) => ids.cc_request_type = be_u32(data),
            (RESULT_CODE, 0) => ids.result = be_u32(data),
            (EXPERIMENTAL_RESULT, 0) if ids.result.is_none() => {
                ids.result = Avps(data)
                    .find(|(c, v, _)| (*c, *v) == (EXPERIMENTAL_RESULT_CODE, 0))
                    .and_then(|(_, _, d)| be_u32(d));
            }
            (SUBSCRIPTION_ID, 0) => {
                let mut kind = None;
                let mut value = None;
                for (c, v, d) in Avps(data) {
                    match (c, v) {
                        (SUBSCRIPTION_ID_TYPE, 0) => kind = be_u32(d),
                        (SUBSCRIPTION_ID_DATA, 0) => value = std::str::from_utf8(d).ok(),
                        _ => {}
                    }
                }
                match (kind, value) {
                    (Some(END_USER_IMSI), Some(v)) if ids.imsi.is_none() => ids.imsi = Some(v),
                    (Some(END_USER_E164), Some(v)) if ids.msisdn.is_none() => {
                        ids.msisdn = Some(Msisdn::Digits(v))
                    }
                    _ => {}
                }
            }
            (USER_IDENTITY, VENDOR_3GPP) if ids.msisdn.is_none() => {
                ids.msisdn = Avps(data)
                    .find(|(c, v, _)| (*c, *v) == (MSISDN, VENDOR_3GPP))
                    .map(|(_, _, d)| Msisdn::Tbcd(d));
            }
            _ => {}
        }
    }
    Some(ids)
}

fn be_u32(d: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(d.try_into().ok()?))
}

/// The AVPs of a payload: (code, vendor or 0, data); stops at the first malformed one.
struct Avps<'a>(&'a [u8]);

impl<'a> Iterator for Avps<'a> {
    type Item = (u32, u32, &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        let b = self.0;
        if b.len() < 8 {
            return None;
        }
        let code = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        let flags = b[4];
        let len = u32::from_be_bytes([0, b[5], b[6], b[7]]) as usize;
        let (vendor, head) = if flags & AVP_FLAG_VENDOR != 0 {
            if b.len() < 12 {
                return None;
            }
            (u32::from_be_bytes([b[8], b[9], b[10], b[11]]), 12)
        } else {
            (0, 8)
        };
        if len < head || len > b.len() {
            self.0 = &[];
            return None;
        }
        let data = &b[head..len];
        let padded = (len + 3) & !3;
        self.0 = &b[padded.min(b.len())..];
        Some((code, vendor, data))
    }
}

/// `prefix` + `digits` in `buf`; `None` when it does not fit or is empty.
pub fn prefixed<'b>(buf: &'b mut [u8], prefix: &str, digits: &str) -> Option<&'b str> {
    let n = prefix.len() + digits.len();
    if digits.is_empty() || n > buf.len() {
        return None;
    }
    buf[..prefix.len()].copy_from_slice(prefix.as_bytes());
    buf[prefix.len()..n].copy_from_slice(digits.as_bytes());
    std::str::from_utf8(&buf[..n]).ok()
}

/// `msisdn-` + the MSISDN's digits in `buf`.
pub fn msisdn_gpsi<'b>(buf: &'b mut [u8], m: Msisdn<'_>) -> Option<&'b str> {
    match m {
        Msisdn::Digits(d) => prefixed(buf, "msisdn-", d),
        Msisdn::Tbcd(t) => {
            const P: &[u8] = b"msisdn-";
            if P.len() + 2 * t.len() > buf.len() {
                return None;
            }
            buf[..P.len()].copy_from_slice(P);
            let mut n = P.len();
            for &octet in t {
                for nibble in [octet & 0x0f, octet >> 4] {
                    match nibble {
                        0..=9 => {
                            buf[n] = b'0' + nibble;
                            n += 1;
                        }
                        0x0f => {}
                        _ => return None,
                    }
                }
            }
            (n > P.len()).then(|| std::str::from_utf8(&buf[..n]).ok()).flatten()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ues_paths_and_queries_give_the_supi_or_gpsi() {
        let ids = path_ids("/nudr-dr/v2/policy-data/ues/imsi-001010000000001/sm-data");
        assert_eq!(ids.supi, Some("imsi-001010000000001"));
        assert_eq!((ids.gpsi, ids.session_id), (None, None));
        let ids = path_ids("/nudr-dr/v2/policy-data/ues/msisdn-4915112345678/am-data");
        assert_eq!((ids.supi, ids.gpsi), (None, Some("msisdn-4915112345678")));
        let ids = path_ids("/nudr-group-id-map/v1/nf-group-ids?nf-type=PCF&subscriberId=imsi-1");
        assert_eq!(ids.supi, Some("imsi-1"));
        let ids = path_ids("/x/v1/y?gpsis=msisdn-1,msisdn-2&supi=nai-a@b");
        assert_eq!((ids.supi, ids.gpsi), (Some("nai-a@b"), Some("msisdn-1")));
        // A bare prefix is not an id.
        assert_eq!(path_ids("/x/imsi-/y?q=msisdn-").supi, None);
    }

    #[test]
    fn the_segment_after_a_collection_is_the_session() {
        let ids = path_ids("/npcf-smpolicycontrol/v1/sm-policies/019ac1a0/update");
        assert_eq!(ids.session_id, Some("019ac1a0"));
        assert_eq!(path_ids("/npcf-smpolicycontrol/v1/sm-policies").session_id, None);
        assert_eq!(path_ids("/npcf-smpolicycontrol/v1/sm-policies/").session_id, None);
        assert_eq!(
            path_ids("/nbsf-management/v1/pcfBindings/b-1?x=1").session_id,
            Some("b-1"),
            "the query is not part of the id"
        );
        assert_eq!(path_ids("/npcf-am-policy-control/v1/policies/p7").session_id, Some("p7"));
        assert_eq!(path_ids("/nnrf-nfm/v1/nf-instances/5a7b").session_id, Some("5a7b"));
        assert_eq!(path_ids("/nbsf-management/v1/pcfBindings?ipv4Addr=1").session_id, None);
    }

    #[test]
    fn a_201_location_names_the_created_session() {
        let loc = "http://127.0.0.1:7003/npcf-smpolicycontrol/v1/sm-policies/019ac1a0";
        assert_eq!(location_session(loc), Some("019ac1a0"));
        assert_eq!(location_session("/nbsf-management/v1/pcfBindings/7"), Some("7"));
        assert_eq!(location_session("http://h:1/nudr-dr/v2/policy-data/ues/imsi-1/sm-data"), None);
        assert_eq!(location_session("http://h:1"), None);
    }

    #[test]
    fn json_bodies_give_their_supi_and_gpsi_by_a_bounded_search() {
        let body = br#"{"pduSessionId":1,"gpsi":"msisdn-1","supi":"imsi-001010000000001"}"#;
        assert_eq!(json_string(body, JsonName::Supi), Some("imsi-001010000000001"));
        assert_eq!(json_string(body, JsonName::Gpsi), Some("msisdn-1"));
        assert_eq!(json_string(br#"{ "supi" :  "imsi-9" }"#, JsonName::Supi), Some("imsi-9"));
        // A member whose name ends like ours, a non-string value, then the real one.
        let body = br#"{"notsupi":"x","supi":3,"x":{"supi":"imsi-2"}}"#;
        assert_eq!(json_string(body, JsonName::Supi), Some("imsi-2"));
        assert_eq!(json_string(br#"{"supi":"a\"b"}"#, JsonName::Supi), None);
        assert_eq!(json_string(br#"{"supi":""}"#, JsonName::Supi), None);
        assert_eq!(json_string(br#"{"supi":"unterminated"#, JsonName::Supi), None);
        assert_eq!(json_string(b"", JsonName::Supi), None);
        // Beyond the scanned prefix: not found.
        let mut far = vec![b' '; BODY_SCAN];
        far.extend_from_slice(br#""supi":"imsi-1""#);
        assert_eq!(json_string(&far, JsonName::Supi), None);
        let long = format!(r#"{{"supi":"{}"}}"#, "1".repeat(200));
        assert_eq!(json_string(long.as_bytes(), JsonName::Supi), None);
    }

    /// A CCR-I as a PGW sends it, built by the diameter crate.
    fn ccr_i() -> Vec<u8> {
        use diameter::dictionary::{base, dcca, gx};
        use diameter::Message;
        let m = Message::request(gx::APP_ID, gx::CMD_CREDIT_CONTROL)
            .ids(0x11, 0x22)
            .session_id_avp("pgw.epc;1;2")
            .avp(base::AUTH_APPLICATION_ID.u32(gx::APP_ID))
            .origin("pgw.epc", "epc")
            .destination("pcf.example", None)
            .avp(dcca::CC_REQUEST_TYPE.enumerated(1))
            .avp(dcca::CC_REQUEST_NUMBER.u32(0))
            .avp(dcca::SUBSCRIPTION_ID.grouped(vec![
                dcca::SUBSCRIPTION_ID_TYPE.enumerated(0),
                dcca::SUBSCRIPTION_ID_DATA.utf8("4915112345678"),
            ]))
            .avp(dcca::SUBSCRIPTION_ID.grouped(vec![
                dcca::SUBSCRIPTION_ID_TYPE.enumerated(1),
                dcca::SUBSCRIPTION_ID_DATA.utf8("001010000000001"),
            ]));
        m.to_bytes().unwrap().to_vec()
    }

    #[test]
    fn a_ccr_gives_session_imsi_msisdn_and_request_type() {
        let wire = ccr_i();
        let ids = diameter_ids(&wire).unwrap();
        assert!(ids.request);
        assert_eq!((ids.application_id, ids.command_code), (16777238, 272));
        assert_eq!((ids.hop_by_hop, ids.end_to_end), (0x11, 0x22));
        assert_eq!(ids.session_id, Some("pgw.epc;1;2"));
        assert_eq!(ids.cc_request_type, Some(1));
        assert_eq!(ids.imsi, Some("001010000000001"));
        assert_eq!(ids.msisdn, Some(Msisdn::Digits("4915112345678")));
        assert_eq!(ids.result, None);
        let mut buf = [0u8; 40];
        assert_eq!(prefixed(&mut buf, "imsi-", ids.imsi.unwrap()), Some("imsi-001010000000001"));
        assert_eq!(msisdn_gpsi(&mut buf, ids.msisdn.unwrap()), Some("msisdn-4915112345678"));
        // Every cut of the message still reads what lies before the cut, and never panics.
        for n in 0..wire.len() {
            let _ = diameter_ids(&wire[..n]);
        }
        assert!(diameter_ids(&wire[..19]).is_none());
    }

    #[test]
    fn answers_give_their_result_or_experimental_result() {
        use diameter::dictionary::{base, gx, sh};
        use diameter::Message;
        let req = Message::decode(bytes::Bytes::from(ccr_i())).unwrap();
        let ok = Message::answer_to(&req).result_code_avp(2001).to_bytes().unwrap();
        let ids = diameter_ids(&ok).unwrap();
        assert!(!ids.request);
        assert_eq!((ids.result, ids.session_id), (Some(2001), Some("pgw.epc;1;2")));
        let exp = Message::answer_to(&req)
            .avp(base::EXPERIMENTAL_RESULT.grouped(vec![
                base::VENDOR_ID.u32(10415),
                base::EXPERIMENTAL_RESULT_CODE.u32(5065),
            ]))
            .to_bytes()
            .unwrap();
        assert_eq!(diameter_ids(&exp).unwrap().result, Some(5065));
        // Sh: User-Identity with a TBCD MSISDN (49 151 1234567, odd length: F filler).
        let udr =
            Message::request(sh::APP_ID, sh::CMD_USER_DATA)
                .session_id_avp("as;1")
                .avp(sh::USER_IDENTITY.grouped(vec![
                    sh::MSISDN.bytes(vec![0x94, 0x51, 0x11, 0x32, 0x54, 0x76, 0xf8]),
                ]))
                .to_bytes()
                .unwrap();
        let ids = diameter_ids(&udr).unwrap();
        let mut buf = [0u8; 40];
        assert_eq!(msisdn_gpsi(&mut buf, ids.msisdn.unwrap()), Some("msisdn-4915112345678"));
        assert_eq!(ids.application_id, sh::APP_ID);
        let _ = gx::APP_ID;
    }
}
