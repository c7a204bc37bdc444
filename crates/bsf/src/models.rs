//! TS 29.521 / TS 29.571 data types the BSF checks field by field: every wrong field of a body
//! is reported at once in `invalidParams` (a JSON pointer and a reason), not just the first.
//!
//! Bindings are kept as JSON documents (unknown attributes are kept and echoed rather than
//! refused, for forward compatibility); [`validate_binding`] checks the known ones, normalises the
//! addresses (RFC 5952 IPv6, lower-case MAC) and returns the indexed [`Keys`].

use sbi::problem::cause;
use sbi::ProblemDetails;
use serde_json::Value;

// The TS 29.571 checks live with every NF's (nf::common_data); the BSF's code names them here.
pub use nf::common_data::*;

/// The indexed columns of a binding, normalised so equal addresses compare equal in SQL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Keys {
    pub ipv4: Option<String>,
    /// `""` when absent (so `=` matches it on every SQL engine and the index covers it).
    pub ip_domain: String,
    /// The prefix's network in RFC 5952 form with its length (`2001:db8:1::/64`).
    pub ipv6: Option<String>,
    /// Lower case, `-` separated.
    pub mac: Option<String>,
    /// Lower case (DNNs compare case-insensitively, TS 23.003 §9.1).
    pub dnn: String,
    pub sst: u8,
    /// Lower case; `""` when absent.
    pub sd: String,
    pub supi: Option<String>,
    pub gpsi: Option<String>,
    /// `addIpv6Prefixes` as networks (as `ipv6`), and `addMacAddrs` lower case: a binding is
    /// found by any of them too.
    pub add_ipv6: Vec<String>,
    pub add_macs: Vec<String>,
    /// `pcfDiamHost` with `pcfDiamRealm` (`""` when absent): the Rx proxy's answer, which the
    /// UE address index keeps (read here so a Register does not parse its document again).
    pub pcf_diam: Option<(String, String)>,
}

/// Checks a PcfBinding (TS 29.521 §5.6.2.2), normalises its addresses in place and returns its
/// indexed keys, or the 400 naming every wrong attribute.
pub fn validate_binding(v: &mut Value) -> Result<Keys, ProblemDetails> {
    let mut errs = Errors::default();
    let Some(obj) = v.as_object_mut() else {
        return Err(ProblemDetails::bad_request(
            cause::INVALID_MSG_FORMAT,
            "PcfBinding must be a JSON object",
        ));
    };
    // UE addresses: at least one of ipv4Addr, ipv6Prefix, macAddr48 (§5.6.2.2 NOTE).
    let ipv4 = string_field(
        obj,
        "ipv4Addr",
        |s| parse_ipv4(s).is_some(),
        "must be a dotted-decimal IPv4 address",
        &mut errs,
    )
    .map(str::to_owned);
    let mut keys = Keys { ipv4, ..Keys::default() };
    match obj.get("ipDomain") {
        None => {}
        Some(Value::String(s)) if !s.is_empty() && obj.contains_key("ipv4Addr") => {
            keys.ip_domain = s.clone()
        }
        Some(Value::String(s)) if !s.is_empty() => {
            errs.bad("/ipDomain", "only allowed with ipv4Addr")
        }
        Some(_) => errs.bad("/ipDomain", "must be a non-empty string"),
    }
    if let Some(p) = obj.get("ipv6Prefix") {
        match p.as_str().and_then(parse_ipv6_prefix) {
            Some((addr, len)) => {
                keys.ipv6 = Some(network_prefix(addr, len));
                obj.insert("ipv6Prefix".into(), Value::from(canonical_prefix(addr, len)));
            }
            None => errs.bad("/ipv6Prefix", "must be an IPv6 prefix address/length (0..128)"),
        }
    }
    if let Some(list) = obj.get_mut("addIpv6Prefixes") {
        match list.as_array_mut().filter(|a| !a.is_empty()) {
            None => errs.bad("/addIpv6Prefixes", "must be a non-empty array of IPv6 prefixes"),
            Some(a) => {
                for (i, p) in a.iter_mut().enumerate() {
                    match p.as_str().and_then(parse_ipv6_prefix) {
                        Some((addr, len)) => {
                            keys.add_ipv6.push(network_prefix(addr, len));
                            *p = Value::from(canonical_prefix(addr, len));
                        }
                        None => errs.bad(format!("/addIpv6Prefixes/{i}"), "must be an IPv6 prefix"),
                    }
                }
            }
        }
    }
    if let Some(m) = obj.get("macAddr48") {
        match m.as_str().filter(|s| check_mac(s)) {
            Some(s) => {
                let lower = s.to_ascii_lowercase();
                keys.mac = Some(lower.clone());
                obj.insert("macAddr48".into(), Value::from(lower));
            }
            None => errs.bad("/macAddr48", "must be a MAC address xx-xx-xx-xx-xx-xx"),
        }
    }
    if let Some(list) = obj.get_mut("addMacAddrs") {
        match list.as_array_mut().filter(|a| !a.is_empty()) {
            None => errs.bad("/addMacAddrs", "must be a non-empty array of MAC addresses"),
            Some(a) => {
                for (i, m) in a.iter_mut().enumerate() {
                    match m.as_str().filter(|s| check_mac(s)) {
                        Some(s) => {
                            let lower = s.to_ascii_lowercase();
                            keys.add_macs.push(lower.clone());
                            *m = Value::from(lower);
                        }
                        None => errs.bad(
                            format!("/addMacAddrs/{i}"),
                            "must be a MAC address xx-xx-xx-xx-xx-xx",
                        ),
                    }
                }
            }
        }
    }
    if !["ipv4Addr", "ipv6Prefix", "macAddr48"].iter().any(|k| obj.contains_key(*k)) {
        errs.missing("/ipv4Addr");
    }

    // Mandatory: dnn, snssai.
    match obj.get("dnn") {
        None => errs.missing("/dnn"),
        Some(Value::String(s)) if check_dnn(s) => keys.dnn = s.to_ascii_lowercase(),
        Some(_) => errs.bad("/dnn", "must be a DNN (dot-separated labels)"),
    }
    match obj.get("snssai") {
        None => errs.missing("/snssai"),
        Some(s) => {
            if let Some((sst, sd)) = check_snssai(s, "/snssai", &mut errs) {
                keys.sst = sst;
                keys.sd = sd;
            }
        }
    }
    keys.supi =
        string_field(obj, "supi", check_supi, "must be a SUPI (imsi-<digits>, nai-...)", &mut errs)
            .map(str::to_owned);
    keys.gpsi = string_field(
        obj,
        "gpsi",
        check_gpsi,
        "must be a GPSI (msisdn-<digits>, extid-...)",
        &mut errs,
    )
    .map(str::to_owned);

    // The PCF: at least one of pcfFqdn, pcfIpEndPoints, pcfDiamHost (§5.6.2.2 NOTE).
    let pcf_fqdn = "must be an FQDN";
    string_field(obj, "pcfFqdn", check_fqdn, pcf_fqdn, &mut errs);
    string_field(obj, "pcfSmFqdn", check_fqdn, pcf_fqdn, &mut errs);
    for ep in ["pcfIpEndPoints", "pcfSmIpEndPoints"] {
        if let Some(v) = obj.get(ep) {
            check_ip_endpoints(v, &format!("/{ep}"), &mut errs);
        }
    }
    let diam = "must be a DiameterIdentity (an FQDN)";
    let host = string_field(obj, "pcfDiamHost", check_fqdn, diam, &mut errs);
    let realm = string_field(obj, "pcfDiamRealm", check_fqdn, diam, &mut errs);
    if let Some(h) = host {
        keys.pcf_diam = Some((h.to_owned(), realm.unwrap_or("").to_owned()));
    }
    match (obj.contains_key("pcfDiamHost"), obj.contains_key("pcfDiamRealm")) {
        (true, false) if host.is_some() => errs.bad("/pcfDiamRealm", "must accompany pcfDiamHost"),
        (false, true) if realm.is_some() => errs.bad("/pcfDiamHost", "must accompany pcfDiamRealm"),
        _ => {}
    }
    if !["pcfFqdn", "pcfIpEndPoints", "pcfDiamHost"].iter().any(|k| obj.contains_key(*k)) {
        errs.missing("/pcfFqdn");
    }
    string_field(obj, "pcfId", check_uuid, "must be an NfInstanceId (UUID)", &mut errs);
    string_field(obj, "pcfSetId", |s| !s.is_empty(), "must be an NfSetId", &mut errs);
    string_field(
        obj,
        "suppFeat",
        |s| s.bytes().all(|b| b.is_ascii_hexdigit()),
        "must be hexadecimal",
        &mut errs,
    );
    string_field(
        obj,
        "recoveryTime",
        |s| chrono::DateTime::parse_from_rfc3339(s).is_ok(),
        "must be an RFC 3339 date-time",
        &mut errs,
    );
    string_field(obj, "bindLevel", |s| !s.is_empty(), "must be a BindingLevel", &mut errs);
    if let Some(pc) = obj.get("paraCom") {
        match pc.as_object() {
            None => errs.bad("/paraCom", "must be a ParameterCombination object"),
            Some(pc) => {
                if pc.get("supi").is_some_and(|s| !s.as_str().is_some_and(check_supi)) {
                    errs.bad("/paraCom/supi", "must be a SUPI");
                }
                if pc.get("dnn").is_some_and(|s| !s.as_str().is_some_and(check_dnn)) {
                    errs.bad("/paraCom/dnn", "must be a DNN");
                }
                if let Some(s) = pc.get("snssai") {
                    check_snssai(s, "/paraCom/snssai", &mut errs);
                }
            }
        }
    }
    errs.finish().map(|()| keys)
}

/// The attributes a PcfBindingPatch may carry (TS 29.521 §5.6.2.3), and whether `null` (remove)
/// is allowed for each.
pub const PATCHABLE: [(&str, bool); 11] = [
    ("ipv4Addr", true),
    ("ipDomain", true),
    ("ipv6Prefix", true),
    ("addIpv6Prefixes", true),
    ("macAddr48", true),
    ("addMacAddrs", true),
    ("pcfId", false),
    ("pcfFqdn", false),
    ("pcfIpEndPoints", false),
    ("pcfDiamHost", false),
    ("pcfDiamRealm", false),
];

/// Checks that a merge patch only touches PcfBindingPatch attributes: 400 naming the others.
pub fn check_patch(patch: &Value) -> Result<(), ProblemDetails> {
    let Some(obj) = patch.as_object() else {
        return Err(ProblemDetails::bad_request(
            cause::INVALID_MSG_FORMAT,
            "PcfBindingPatch must be a JSON object",
        ));
    };
    let mut errs = Errors::default();
    for (k, v) in obj {
        match PATCHABLE.iter().find(|(name, _)| name == k) {
            None => {
                errs.bad(format!("/{k}"), "not a PcfBindingPatch attribute: cannot be modified")
            }
            Some((_, false)) if v.is_null() => errs.bad(format!("/{k}"), "cannot be removed"),
            Some(_) => {}
        }
    }
    errs.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn formats() {
        assert!(parse_ipv4("10.0.0.1").is_some());
        assert!(parse_ipv4("10.0.0.01").is_none());
        assert!(parse_ipv4("10.0.0").is_none());
        let (a, l) = parse_ipv6_prefix("2001:DB8:1:0::5/64").unwrap();
        assert_eq!(canonical_prefix(a, l), "2001:db8:1::5/64");
        assert_eq!(network_prefix(a, l), "2001:db8:1::/64");
        assert!(parse_ipv6_prefix("2001:db8::/129").is_none());
        assert!(parse_ipv6_prefix("2001:db8::").is_none());
        assert!(check_mac("0A-1b-2c-3d-4e-5f") && !check_mac("0a:1b:2c:3d:4e:5f"));
        assert!(check_supi("imsi-001010000000001") && !check_supi("imsi-12") && !check_supi("x"));
        assert!(
            check_gpsi("msisdn-33612345678")
                && check_gpsi("extid-a@b.c")
                && !check_gpsi("extid-ab")
        );
        assert!(check_dnn("internet") && check_dnn("ims.mnc001.mcc001.gprs") && !check_dnn("a..b"));
        assert!(
            check_fqdn("pcf1.example.com") && !check_fqdn("pcf1") && !check_fqdn("-a.example.com")
        );
    }

    #[test]
    fn binding_keys_and_errors() {
        let mut b = json!({"ipv4Addr": "10.1.2.3", "ipDomain": "d1", "dnn": "Internet",
            "snssai": {"sst": 1, "sd": "ABCDEF"}, "pcfFqdn": "pcf.example.com"});
        let k = validate_binding(&mut b).unwrap();
        assert_eq!(
            (k.dnn.as_str(), k.sst, k.sd.as_str(), k.ip_domain.as_str()),
            ("internet", 1, "abcdef", "d1")
        );
        let mut b = json!({"dnn": "internet", "snssai": {"sst": 300, "sd": "xyz"}, "pcfDiamHost": "pcf.example.com"});
        let e = validate_binding(&mut b).unwrap_err();
        let params: Vec<&str> = e.invalid_params.iter().map(|p| p.param.as_str()).collect();
        assert_eq!(params, ["/ipv4Addr", "/snssai/sst", "/snssai/sd", "/pcfDiamRealm"]);
        assert_eq!(e.cause.as_deref(), Some(cause::MANDATORY_IE_MISSING));
    }
}
