//! TS 29.512 data types the PCF checks field by field (every wrong field reported at once in
//! `invalidParams`, as a JSON pointer and a reason), and the decision delta an update answers.
//!
//! Contexts are kept as the SMF sent them: unknown attributes are kept rather than refused (a
//! newer SMF's), the known ones are checked.

use nf::common_data::{
    check_dnn, check_gpsi, check_snssai, check_supi, parse_ipv4, parse_ipv6_prefix, Errors,
};
use sbi::ProblemDetails;
use serde_json::{Map, Value};

/// TS 29.512 §5.6.3.6 PolicyControlRequestTrigger, Rel-17.
pub const POLICY_CONTROL_REQUEST_TRIGGERS: [&str; 48] = [
    "PLMN_CH",
    "RES_MO_RE",
    "AC_TY_CH",
    "UE_IP_CH",
    "UE_MAC_CH",
    "AN_CH_COR",
    "US_RE",
    "APP_STA",
    "APP_STO",
    "AN_INFO",
    "CM_SES_FAIL",
    "PS_DA_OFF",
    "DEF_QOS_CH",
    "SE_AMBR_CH",
    "QOS_NOTIF",
    "NO_CREDIT",
    "REALLO_OF_CREDIT",
    "PRA_CH",
    "SAREA_CH",
    "SCNN_CH",
    "RE_TIMEOUT",
    "RES_RELEASE",
    "SUCC_RES_ALLO",
    "RAI_CH",
    "RAT_TY_CH",
    "REF_QOS_IND_CH",
    "NUM_OF_PACKET_FILTER",
    "UE_STATUS_RESUME",
    "UE_TZ_CH",
    "AUTH_PROF_CH",
    "QOS_MONITORING",
    "SCELL_CH",
    "USER_LOCATION_CH",
    "EPS_FALLBACK",
    "MA_PDU",
    "TSN_BRIDGE_INFO",
    "5G_RG_JOIN",
    "5G_RG_LEAVE",
    "DDN_FAILURE",
    "DDN_DELIVERY_STATUS",
    "GROUP_ID_LIST_CHG",
    "DDN_FAILURE_CANCELLATION",
    "DDN_DELIVERY_STATUS_CANCELLATION",
    "VPLMN_QOS_CH",
    "SUCC_QOS_UPDATE",
    "SAT_CATEGORY_CHG",
    "PCF_UE_NOTIF_IND",
    "NWDAF_DATA_CHG",
];

/// TS 29.507 §5.6.3.3 RequestTrigger, Rel-17.
pub const AM_REQUEST_TRIGGERS: [&str; 11] = [
    "LOC_CH",
    "PRA_CH",
    "SERV_AREA_CH",
    "RFSP_CH",
    "ALLOWED_NSSAI_CH",
    "UE_AMBR_CH",
    "UE_SLICE_MBR_CH",
    "SMF_SELECT_CH",
    "ACCESS_TYPE_CH",
    "NWDAF_DATA_CH",
    "TARGET_NSSAI",
];

/// `o[key]`, when present, must be an array of values of `allowed` (a trigger list): each
/// entry that is not one is named by its index.
pub(crate) fn check_triggers(
    o: &Map<String, Value>,
    key: &str,
    allowed: &[&str],
    what: &str,
    errs: &mut Errors,
) {
    let Some(t) = o.get(key) else { return };
    let Some(list) = t.as_array() else {
        errs.bad(format!("/{key}"), format!("must be an array of {what}"));
        return;
    };
    for (i, x) in list.iter().enumerate() {
        if !x.as_str().is_some_and(|s| allowed.contains(&s)) {
            errs.bad(format!("/{key}/{i}"), format!("not a {what}"));
        }
    }
}

/// TS 29.571 SupportedFeatures: hexadecimal digits.
pub(crate) fn check_supp_feat(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The UE identities both services' bodies may carry: `gpsi` and `pei`.
fn check_ue_ids(o: &Map<String, Value>, errs: &mut Errors) {
    if let Some(v) = o.get("gpsi") {
        if !v.as_str().is_some_and(check_gpsi) {
            errs.bad("/gpsi", "must be a Gpsi (msisdn-<digits> or extid-<id>@<domain>)");
        }
    }
    if let Some(v) = o.get("pei") {
        if !v.as_str().is_some_and(check_pei) {
            errs.bad("/pei", "must be a Pei (imei-<15 digits>, imeisv-<16 digits>, ...)");
        }
    }
}

/// The checks of a PolicyAssociationRequest and an update's attributes alike.
fn check_am_common(o: &Map<String, Value>, errs: &mut Errors) {
    if let Some(v) = o.get("notificationUri") {
        if !v.as_str().is_some_and(check_http_uri) {
            errs.bad("/notificationUri", "must be an absolute http or https URI");
        }
    }
    check_ue_ids(o, errs);
    if let Some(v) = o.get("rfsp") {
        if !v.as_u64().is_some_and(|n| (1..=256).contains(&n)) {
            errs.bad("/rfsp", "must be an RfspIndex 1..256");
        }
    }
    if let Some(v) = o.get("ueAmbr") {
        check_ambr(v, "/ueAmbr", errs);
    }
    if let Some(v) = o.get("allowedSnssais") {
        match v.as_array() {
            Some(list) => {
                for (i, s) in list.iter().enumerate() {
                    check_snssai(s, &format!("/allowedSnssais/{i}"), errs);
                }
            }
            None => errs.bad("/allowedSnssais", "must be an array of Snssai"),
        }
    }
}

/// Checks a PolicyAssociationRequest (TS 29.507 §5.6.2.2).
pub fn check_am_request(v: &Value) -> Result<(), ProblemDetails> {
    let mut errs = Errors::default();
    let Some(o) = v.as_object() else {
        errs.bad("", "must be a PolicyAssociationRequest object");
        return errs.finish();
    };
    check_association_request(o, &mut errs);
    check_am_common(o, &mut errs);
    errs.finish()
}

/// The mandatory attributes a PolicyAssociationRequest has for AM (TS 29.507) and UE (TS
/// 29.525) policy alike: `supi`, `notificationUri`, `suppFeat`.
pub(crate) fn check_association_request(o: &Map<String, Value>, errs: &mut Errors) {
    match o.get("supi") {
        None => errs.missing("/supi"),
        Some(s) if s.as_str().is_some_and(check_supi) => {}
        Some(_) => {
            errs.bad("/supi", "must be a Supi (imsi-<5..15 digits>, nai-..., gci-..., gli-...)")
        }
    }
    if !o.contains_key("notificationUri") {
        errs.missing("/notificationUri");
    }
    match o.get("suppFeat") {
        None => errs.missing("/suppFeat"),
        Some(s) if s.as_str().is_some_and(check_supp_feat) => {}
        Some(_) => errs.bad("/suppFeat", "must be SupportedFeatures (hexadecimal digits)"),
    }
}

/// Checks a PolicyAssociationUpdateRequest (TS 29.507 §5.6.2.3): the reported triggers are
/// RequestTriggers, the attributes they come with well formed.
pub fn check_am_update(v: &Value) -> Result<(), ProblemDetails> {
    let mut errs = Errors::default();
    let Some(o) = v.as_object() else {
        errs.bad("", "must be a PolicyAssociationUpdateRequest object");
        return errs.finish();
    };
    check_triggers(
        o,
        "triggers",
        &AM_REQUEST_TRIGGERS,
        "RequestTrigger (TS 29.507 §5.6.3.3)",
        &mut errs,
    );
    check_am_common(o, &mut errs);
    errs.finish()
}

/// TS 29.571 PduSessionType.
const PDU_SESSION_TYPES: [&str; 5] = ["IPV4", "IPV6", "IPV4V6", "UNSTRUCTURED", "ETHERNET"];

/// TS 29.571 BitRate: `^\d+(\.\d+)? (bps|Kbps|Mbps|Gbps|Tbps)$`.
pub fn check_bitrate(s: &str) -> bool {
    let Some((n, unit)) = s.split_once(' ') else { return false };
    let (int, frac) = n.split_once('.').unwrap_or((n, "0"));
    ["bps", "Kbps", "Mbps", "Gbps", "Tbps"].contains(&unit)
        && !int.is_empty()
        && !frac.is_empty()
        && int.bytes().all(|b| b.is_ascii_digit())
        && frac.bytes().all(|b| b.is_ascii_digit())
}

/// TS 29.571 Pei: `imei-<15 digits>`, `imeisv-<16 digits>`, `mac-...`, `eui-...`, or other.
fn check_pei(s: &str) -> bool {
    let digits = |r: &str, n: usize| r.len() == n && r.bytes().all(|b| b.is_ascii_digit());
    if let Some(r) = s.strip_prefix("imei-") {
        return digits(r, 15);
    }
    if let Some(r) = s.strip_prefix("imeisv-") {
        return digits(r, 16);
    }
    !s.is_empty()
}

/// An absolute URI with a scheme and an authority (TS 29.571 Uri as the SMF uses it: where to
/// send notifications).
pub(crate) fn check_http_uri(s: &str) -> bool {
    let rest = s.strip_prefix("http://").or_else(|| s.strip_prefix("https://"));
    rest.is_some_and(|r| !r.is_empty() && !r.starts_with('/') && !r.contains(char::is_whitespace))
}

fn check_ambr(v: &Value, at: &str, errs: &mut Errors) {
    let Some(o) = v.as_object() else {
        errs.bad(at, "must be an Ambr object");
        return;
    };
    for k in ["uplink", "downlink"] {
        match o.get(k) {
            None => errs.missing(format!("{at}/{k}")),
            Some(Value::String(s)) if check_bitrate(s) => {}
            Some(_) => errs.bad(format!("{at}/{k}"), "must be a BitRate such as \"100 Mbps\""),
        }
    }
}

fn check_subs_def_qos(v: &Value, at: &str, errs: &mut Errors) {
    let Some(o) = v.as_object() else {
        errs.bad(at, "must be a SubscribedDefaultQos object");
        return;
    };
    match o.get("5qi") {
        None => errs.missing(format!("{at}/5qi")),
        Some(q) if q.as_u64().is_some_and(|n| n <= 255) => {}
        Some(_) => errs.bad(format!("{at}/5qi"), "must be an integer 0..255"),
    }
    match o.get("arp").and_then(Value::as_object) {
        None => errs.missing(format!("{at}/arp")),
        Some(arp) => match arp.get("priorityLevel") {
            Some(p) if p.as_u64().is_some_and(|n| (1..=15).contains(&n)) => {}
            Some(p) if p.is_null() => {}
            _ => errs.bad(format!("{at}/arp/priorityLevel"), "must be an integer 1..15"),
        },
    }
}

/// The checks both a create's and an update's bodies share (the attributes they have in common).
fn check_common(o: &Map<String, Value>, errs: &mut Errors) {
    check_ue_ids(o, errs);
    if let Some(v) = o.get("ipv4Address") {
        if v.as_str().and_then(parse_ipv4).is_none() {
            errs.bad("/ipv4Address", "must be a dotted-decimal IPv4 address");
        }
    }
    if let Some(v) = o.get("ipv6AddressPrefix") {
        if v.as_str().and_then(parse_ipv6_prefix).is_none() {
            errs.bad("/ipv6AddressPrefix", "must be an Ipv6Prefix (address/length)");
        }
    }
    if let Some(v) = o.get("subsSessAmbr") {
        check_ambr(v, "/subsSessAmbr", errs);
    }
    if let Some(v) = o.get("subsDefQos") {
        check_subs_def_qos(v, "/subsDefQos", errs);
    }
    if let Some(v) = o.get("ratType") {
        if !v.is_string() {
            errs.bad("/ratType", "must be a RatType string");
        }
    }
    if let Some(v) = o.get("servingNetwork") {
        let ok = v.as_object().is_some_and(|sn| {
            let digits = |k: &str, lens: &[usize]| {
                sn.get(k).and_then(Value::as_str).is_some_and(|s| {
                    lens.contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit())
                })
            };
            digits("mcc", &[3]) && digits("mnc", &[2, 3])
        });
        if !ok {
            errs.bad(
                "/servingNetwork",
                "must be a PlmnIdNid with a 3-digit mcc and a 2-3 digit mnc",
            );
        }
    }
}

/// Checks an SmPolicyContextData (TS 29.512 §5.6.2.3): the 400 names every wrong attribute.
pub fn check_context(v: &Value) -> Result<(), ProblemDetails> {
    let mut errs = Errors::default();
    let Some(o) = v.as_object() else {
        errs.bad("", "must be an SmPolicyContextData object");
        return errs.finish();
    };
    match o.get("supi") {
        None => errs.missing("/supi"),
        Some(s) if s.as_str().is_some_and(check_supi) => {}
        Some(_) => {
            errs.bad("/supi", "must be a Supi (imsi-<5..15 digits>, nai-..., gci-..., gli-...)")
        }
    }
    match o.get("pduSessionId") {
        None => errs.missing("/pduSessionId"),
        Some(n) if n.as_u64().is_some_and(|n| n <= 255) => {}
        Some(_) => errs.bad("/pduSessionId", "must be an integer 0..255"),
    }
    match o.get("pduSessionType") {
        None => errs.missing("/pduSessionType"),
        Some(Value::String(s)) if PDU_SESSION_TYPES.contains(&s.as_str()) => {}
        Some(_) => {
            errs.bad("/pduSessionType", "must be IPV4, IPV6, IPV4V6, UNSTRUCTURED or ETHERNET")
        }
    }
    match o.get("dnn") {
        None => errs.missing("/dnn"),
        Some(s) if s.as_str().is_some_and(check_dnn) => {}
        Some(_) => errs.bad("/dnn", "must be a Dnn (dot-separated labels)"),
    }
    match o.get("notificationUri") {
        None => errs.missing("/notificationUri"),
        Some(s) if s.as_str().is_some_and(check_http_uri) => {}
        Some(_) => errs.bad("/notificationUri", "must be an absolute http or https URI"),
    }
    match o.get("sliceInfo") {
        None => errs.missing("/sliceInfo"),
        Some(s) => {
            check_snssai(s, "/sliceInfo", &mut errs);
        }
    }
    check_common(o, &mut errs);
    errs.finish()
}

/// Checks an SmPolicyUpdateContextData (TS 29.512 §5.6.2.5): the reported triggers are
/// PolicyControlRequestTriggers, the attributes they come with are well formed.
pub fn check_update(v: &Value) -> Result<(), ProblemDetails> {
    let mut errs = Errors::default();
    let Some(o) = v.as_object() else {
        errs.bad("", "must be an SmPolicyUpdateContextData object");
        return errs.finish();
    };
    check_triggers(
        o,
        "repPolicyCtrlReqTriggers",
        &POLICY_CONTROL_REQUEST_TRIGGERS,
        "PolicyControlRequestTrigger (TS 29.512 §5.6.3.6)",
        &mut errs,
    );
    check_common(o, &mut errs);
    errs.finish()
}

/// What an update changes in the stored context: the attributes of SmPolicyUpdateContextData
/// that are also SmPolicyContextData's (a new address, RAT, location, ...), merged in. True
/// when the context changed.
pub fn merge_update(context: &mut Value, update: &Value) -> bool {
    const SAME_NAME: [&str; 14] = [
        "accNetChId",
        "accessType",
        "ratType",
        "servingNetwork",
        "userLocationInfo",
        "ueTimeZone",
        "ipv4Address",
        "ipDomain",
        "ipv6AddressPrefix",
        "subsSessAmbr",
        "subsDefQos",
        "numOfPackFilter",
        "3gppPsDataOffStatus",
        "pei",
    ];
    let (Some(c), Some(u)) = (context.as_object_mut(), update.as_object()) else { return false };
    let mut changed = false;
    for k in SAME_NAME {
        if let Some(v) = u.get(k) {
            if c.get(k) != Some(v) {
                c.insert(k.to_string(), v.clone());
                changed = true;
            }
        }
    }
    // A released address goes away with it.
    if let Some(Value::String(a)) = u.get("relIpv4Address") {
        if c.get("ipv4Address").and_then(Value::as_str) == Some(a.as_str()) {
            c.remove("ipv4Address");
            changed = true;
        }
    }
    if let Some(Value::String(p)) = u.get("relIpv6AddressPrefix") {
        if c.get("ipv6AddressPrefix").and_then(Value::as_str) == Some(p.as_str()) {
            c.remove("ipv6AddressPrefix");
            changed = true;
        }
    }
    changed
}

/// Puts every attribute of `update` over `context` for the engine to read (the reported
/// triggers, usage reports, ...), and gives back what it displaced, for [`restore`]: cheaper
/// than a copy of the whole context per update.
pub fn overlay(context: &mut Value, update: &Value) -> Vec<(String, Option<Value>)> {
    let (Some(c), Some(u)) = (context.as_object_mut(), update.as_object()) else {
        return Vec::new();
    };
    // What the context has already (the attributes an update merged in) is not copied again.
    let mut displaced = Vec::new();
    for (k, v) in u {
        if c.get(k.as_str()) != Some(v) {
            displaced.push((k.clone(), c.insert(k.clone(), v.clone())));
        }
    }
    displaced
}

/// Undoes an [`overlay`].
pub fn restore(context: &mut Value, displaced: Vec<(String, Option<Value>)>) {
    let Some(c) = context.as_object_mut() else { return };
    for (k, old) in displaced.into_iter().rev() {
        match old {
            Some(v) => c.insert(k, v),
            None => c.remove(&k),
        };
    }
}

/// SmPolicyDecision members that are maps keyed by id: an update answers the entries that are
/// new or changed, and `null` for those removed (TS 29.512 §4.2.4.1: a map entry set to null
/// is removed by the SMF).
const MAP_MEMBERS: [&str; 8] =
    ["sessRules", "pccRules", "qosDecs", "chgDecs", "traffContDecs", "umDecs", "qosChars", "conds"];

/// The decision an update answers: what differs between the decision in force and the new one.
pub fn delta(old: &Value, new: &Value) -> Value {
    let empty = Map::new();
    let o = old.as_object().unwrap_or(&empty);
    let n = new.as_object().unwrap_or(&empty);
    let mut out = Map::new();
    for (k, nv) in n {
        if MAP_MEMBERS.contains(&k.as_str()) {
            let om = o.get(k).and_then(Value::as_object).unwrap_or(&empty);
            let nm = nv.as_object().unwrap_or(&empty);
            let mut d = Map::new();
            for (id, e) in nm {
                if om.get(id) != Some(e) {
                    d.insert(id.clone(), e.clone());
                }
            }
            for id in om.keys() {
                if !nm.contains_key(id) {
                    d.insert(id.clone(), Value::Null);
                }
            }
            if !d.is_empty() {
                out.insert(k.clone(), Value::Object(d));
            }
        } else if o.get(k) != Some(nv) {
            out.insert(k.clone(), nv.clone());
        }
    }
    for (k, ov) in o {
        if n.contains_key(k) {
            continue;
        }
        if MAP_MEMBERS.contains(&k.as_str()) {
            if let Some(om) = ov.as_object() {
                let d: Map<String, Value> = om.keys().map(|id| (id.clone(), Value::Null)).collect();
                out.insert(k.clone(), Value::Object(d));
            }
        } else if k == "policyCtrlReqTriggers" {
            // No trigger armed any more: an empty list disarms them (nullable in TS 29.512).
            out.insert(k.clone(), Value::Null);
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(p: ProblemDetails) -> Vec<String> {
        p.invalid_params.into_iter().map(|i| i.param).collect()
    }

    #[test]
    fn a_context_names_every_wrong_attribute() {
        let ok = json!({"supi": "imsi-001010000000001", "pduSessionId": 5, "pduSessionType": "IPV4",
            "dnn": "internet", "notificationUri": "http://smf:8080/n", "sliceInfo": {"sst": 1}});
        check_context(&ok).unwrap();
        let bad = json!({"supi": "imsi-1", "pduSessionId": 300, "pduSessionType": "IP",
            "dnn": "bad dnn", "notificationUri": "smf/n", "sliceInfo": {"sst": 1, "sd": "xyz"},
            "subsSessAmbr": {"uplink": "100Mbps", "downlink": "1 Gbps"}, "ipv4Address": "10.0.0.01"});
        let p = params(check_context(&bad).unwrap_err());
        for want in [
            "/supi",
            "/pduSessionId",
            "/pduSessionType",
            "/dnn",
            "/notificationUri",
            "/sliceInfo/sd",
            "/subsSessAmbr/uplink",
            "/ipv4Address",
        ] {
            assert!(p.contains(&want.to_string()), "{want} not in {p:?}");
        }
        let p = params(check_context(&json!({})).unwrap_err());
        assert_eq!(p.len(), 6, "{p:?}");
    }

    #[test]
    fn an_update_reports_only_known_triggers() {
        check_update(&json!({"repPolicyCtrlReqTriggers": ["RAT_TY_CH", "UE_IP_CH"]})).unwrap();
        let p = params(
            check_update(&json!({"repPolicyCtrlReqTriggers": ["RAT_TY_CH", "NOPE"]})).unwrap_err(),
        );
        assert_eq!(p, vec!["/repPolicyCtrlReqTriggers/1"]);
    }

    #[test]
    fn the_delta_has_what_changed_and_null_for_what_went() {
        let old = json!({"sessRules": {"s1": {"a": 1}}, "pccRules": {"p1": {"x": 1}, "p2": {"y": 1}},
            "policyCtrlReqTriggers": ["PLMN_CH"], "online": true});
        let new = json!({"sessRules": {"s1": {"a": 2}}, "pccRules": {"p1": {"x": 1}, "p3": {"z": 1}},
            "policyCtrlReqTriggers": ["PLMN_CH"]});
        assert_eq!(
            delta(&old, &new),
            json!({"sessRules": {"s1": {"a": 2}},
            "pccRules": {"p2": null, "p3": {"z": 1}}})
        );
        assert_eq!(delta(&new, &new), json!({}));
    }

    #[test]
    fn an_update_merges_what_the_context_has() {
        let mut c = json!({"supi": "imsi-1", "ratType": "NR", "ipv4Address": "10.0.0.1"});
        assert!(merge_update(
            &mut c,
            &json!({"ratType": "EUTRA", "relIpv4Address": "10.0.0.1",
            "repPolicyCtrlReqTriggers": ["RAT_TY_CH"]}),
        ));
        assert_eq!(c, json!({"supi": "imsi-1", "ratType": "EUTRA"}));
        // The same attributes again, or only a trigger, change nothing.
        assert!(!merge_update(&mut c, &json!({"ratType": "EUTRA"})));
        assert!(!merge_update(&mut c, &json!({"repPolicyCtrlReqTriggers": ["RES_MO_RE"]})));
        assert!(!merge_update(&mut c, &json!({"relIpv4Address": "10.0.0.9"})));

        // What the engine reads is the context with the whole update over it; restored after.
        let before = c.clone();
        let update = json!({"repPolicyCtrlReqTriggers": ["RES_MO_RE"], "ratType": "NR",
            "traceReq": null});
        let displaced = overlay(&mut c, &update);
        assert_eq!(c["repPolicyCtrlReqTriggers"], json!(["RES_MO_RE"]));
        assert_eq!(c["ratType"], "NR");
        restore(&mut c, displaced);
        assert_eq!(c, before);
    }
}
