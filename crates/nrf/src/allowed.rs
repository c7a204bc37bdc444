//! The `allowed*` attributes of a profile or of one of its services (TS 29.510 Tables
//! 6.1.6.2.2-1 and 6.1.6.2.3-1): who may discover it. Absent means anyone; a service's own
//! attributes narrow what its profile allows, they never widen it (both are checked).

use serde_json::Value;

use crate::models::nf_type_bit;
use crate::nnrf_disc::{pattern, plmn_of, Snssai};

/// A (mcc, mnc) pair, lower case.
pub type Plmn = (String, String);

#[derive(Debug, Default, Clone)]
pub struct Allowed {
    /// allowedNfTypes as bits of [`crate::models::NF_TYPES`]. A type outside that list is left
    /// out: a requester's type is always one of them (discovery refuses others), so it could
    /// never match; a list of only such types allows no one, as before.
    pub nf_types: Option<u64>,
    pub plmns: Option<Vec<Plmn>>,
    /// allowedNfDomains: regular expressions on the requester's FQDN.
    pub domains: Option<Vec<regex::Regex>>,
    pub nssais: Option<Vec<Snssai>>,
}

/// What discovery knows of the requester.
#[derive(Debug, Clone, Copy)]
pub struct Requester<'a> {
    /// `requester-nf-type` as its bit ([`nf_type_bit`]).
    pub nf_type: u64,
    /// `requester-plmn-list`, else the NRF's own PLMNs; `None` when neither is known.
    pub plmns: Option<&'a [Plmn]>,
    pub fqdn: Option<&'a str>,
    pub snssais: Option<&'a [Snssai]>,
}

impl Allowed {
    /// Reads the attributes of a profile or NFService object.
    pub fn of(v: &Value) -> Allowed {
        let list = |k: &str| v.get(k).and_then(Value::as_array);
        Allowed {
            nf_types: list("allowedNfTypes").map(|a| {
                a.iter().filter_map(Value::as_str).filter_map(nf_type_bit).fold(0, |m, b| m | b)
            }),
            plmns: list("allowedPlmns").map(|a| a.iter().filter_map(plmn_of).collect()),
            domains: list("allowedNfDomains")
                .map(|a| a.iter().filter_map(|p| pattern(Some(p))).collect()),
            nssais: list("allowedNssais")
                .map(|a| a.iter().filter_map(|s| serde_json::from_value(s.clone()).ok()).collect()),
        }
    }

    /// Nothing restricted: the common case, checked without looking at the requester.
    pub fn is_open(&self) -> bool {
        self.nf_types.is_none()
            && self.plmns.is_none()
            && self.domains.is_none()
            && self.nssais.is_none()
    }

    /// Whether `r` may discover it. What the requester did not say (its FQDN, its S-NSSAIs, its
    /// PLMN when the NRF has none configured) is not held against it.
    pub fn allows(&self, r: &Requester<'_>) -> bool {
        if self.is_open() {
            return true;
        }
        if self.nf_types.is_some_and(|a| a & r.nf_type == 0) {
            return false;
        }
        if let (Some(allowed), Some(mine)) = (&self.plmns, r.plmns) {
            if !mine.iter().any(|p| allowed.contains(p)) {
                return false;
            }
        }
        if let (Some(domains), Some(fqdn)) = (&self.domains, r.fqdn) {
            if !domains.iter().any(|p| p.is_match(fqdn)) {
                return false;
            }
        }
        if let (Some(allowed), Some(mine)) = (&self.nssais, r.snssais) {
            if !mine.iter().any(|w| allowed.iter().any(|a| a.serves(w))) {
                return false;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_attribute_narrows_and_unknowns_are_not_held_against_the_requester() {
        let a = Allowed::of(&json!({
            "allowedNfTypes": ["AMF", "SMF"],
            "allowedPlmns": [{"mcc": "001", "mnc": "01"}],
            "allowedNfDomains": ["^.*\\.op\\.org$"],
            "allowedNssais": [{"sst": 1, "sd": "000001"}]
        }));
        let home = [("001".to_owned(), "01".to_owned())];
        let away = [("002".to_owned(), "02".to_owned())];
        let slice = [Snssai { sst: 1, sd: Some("000001".into()), wildcard_sd: None }];
        let other = [Snssai { sst: 2, sd: None, wildcard_sd: None }];
        let bit = |t| nf_type_bit(t).unwrap();
        let r = Requester { nf_type: bit("AMF"), plmns: None, fqdn: None, snssais: None };
        assert!(a.allows(&r));
        assert!(a.allows(&Requester { nf_type: bit("SMF"), ..r }));
        assert!(!a.allows(&Requester { nf_type: bit("PCF"), ..r }));
        assert!(a.allows(&Requester { plmns: Some(&home), ..r }));
        assert!(!a.allows(&Requester { plmns: Some(&away), ..r }));
        assert!(a.allows(&Requester { fqdn: Some("amf1.op.org"), ..r }));
        assert!(!a.allows(&Requester { fqdn: Some("amf1.other.org"), ..r }));
        assert!(a.allows(&Requester { snssais: Some(&slice), ..r }));
        assert!(!a.allows(&Requester { snssais: Some(&other), ..r }));
        assert!(Allowed::of(&json!({})).is_open());
        // Only types discovery would refuse: no requester may see it.
        let none = Allowed::of(&json!({"allowedNfTypes": ["NOT_A_TYPE"]}));
        assert!(!none.is_open());
        assert!(!none.allows(&r));
    }
}
