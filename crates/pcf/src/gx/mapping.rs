//! The N7 <-> Gx interworking mapping (TS 29.513 §5, §6): a CCR becomes the
//! SmPolicyContextData-shaped request the engine reads for N7, and an SmPolicyDecision becomes
//! the Gx AVPs (Charging-Rule-Install/-Remove, QoS-Information, Default-EPS-Bearer-QoS,
//! Event-Trigger). Both ways are pure functions of their input, tested here.

use std::net::Ipv4Addr;

use diameter::dictionary::{dcca, gx, nasreq, rx};
use diameter::{Avp, Message};
use serde_json::{json, Map, Value};

/// Bits per second of a TS 29.571 BitRate (`"1 Gbps"`, `"2.5 Mbps"`); None when malformed.
pub fn parse_bitrate(s: &str) -> Option<u64> {
    let (n, unit) = s.trim().split_once(' ')?;
    let mult: f64 = match unit {
        "bps" => 1.0,
        "Kbps" => 1e3,
        "Mbps" => 1e6,
        "Gbps" => 1e9,
        "Tbps" => 1e12,
        _ => return None,
    };
    let v: f64 = n.parse().ok()?;
    if !v.is_finite() || v < 0.0 {
        return None;
    }
    Some((v * mult).round() as u64)
}

/// A TS 29.571 BitRate of `bps`, in the largest unit that keeps it exact (so a rate read from
/// Gx and written back to N7 compares equal to the one the SMF would send).
pub fn format_bitrate(bps: u64) -> String {
    for (unit, m) in [
        ("Tbps", 1_000_000_000_000u64),
        ("Gbps", 1_000_000_000),
        ("Mbps", 1_000_000),
        ("Kbps", 1_000),
    ] {
        // (Not is_multiple_of: Rust 1.85 is the minimum the README states.)
        if bps >= m && bps / m * m == bps {
            return format!("{} {unit}", bps / m);
        }
    }
    format!("{bps} bps")
}

/// A BitRate as a Gx Unsigned32 (bits/s): rates above 4,294,967,295 bit/s are clamped, as
/// Gx without the Extended-*-Bandwidth AVPs (TS 29.212 §5.3.x, not in our dictionary) cannot
/// carry them.
fn bitrate_u32(v: &Value) -> Option<u32> {
    let bps = parse_bitrate(v.as_str()?)?;
    Some(u32::try_from(bps).unwrap_or(u32::MAX))
}

/// RAT-Type (TS 29.212 §5.3.31) → RatType (TS 29.571 §5.4.3.2).
pub fn rat_type_to_n7(v: u32) -> Option<&'static str> {
    Some(match v {
        gx::rat_type::WLAN => "WLAN",
        gx::rat_type::VIRTUAL => "VIRTUAL",
        gx::rat_type::UTRAN => "UTRA",
        gx::rat_type::GERAN => "GERA",
        gx::rat_type::EUTRAN => "EUTRA",
        gx::rat_type::EUTRAN_NB_IOT => "NBIOT",
        gx::rat_type::NR => "NR",
        _ => return None,
    })
}

/// Event-Trigger (TS 29.212 §5.3.7) → PolicyControlRequestTrigger (TS 29.512 §5.6.3.6), as
/// TS 29.513 §5.2 pairs them; None for a Gx trigger with no N7 counterpart.
pub fn trigger_to_n7(v: u32) -> Option<&'static str> {
    use gx::event_trigger as e;
    Some(match v {
        e::PLMN_CHANGE => "PLMN_CH",
        e::RAT_CHANGE => "RAT_TY_CH",
        e::IP_CAN_CHANGE => "AC_TY_CH",
        e::USER_LOCATION_CHANGE | e::TAI_CHANGE | e::ECGI_CHANGE => "SAREA_CH",
        e::UE_IP_ADDRESS_ALLOCATE | e::UE_IP_ADDRESS_RELEASE => "UE_IP_CH",
        e::DEFAULT_EPS_BEARER_QOS_CHANGE => "DEF_QOS_CH",
        e::SUCCESSFUL_RESOURCE_ALLOCATION => "SUCC_RES_ALLO",
        23 => "RES_MO_RE",
        e::UE_TIME_ZONE_CHANGE => "UE_TZ_CH",
        e::USAGE_REPORT => "US_RE",
        e::APPLICATION_START => "APP_STA",
        e::APPLICATION_STOP => "APP_STO",
        e::REVALIDATION_TIMEOUT => "RE_TIMEOUT",
        _ => return None,
    })
}

/// PolicyControlRequestTrigger → the Event-Triggers the PCEF is asked to report: UE_IP_CH is
/// both allocation and release; SE_AMBR_CH is reported on Gx as a QoS change of the default
/// bearer's APN-AMBR, which Gx has no trigger to ask for (the PCEF reports it unasked).
pub fn trigger_to_gx(v: &str) -> &'static [u32] {
    use gx::event_trigger as e;
    match v {
        "PLMN_CH" => &[e::PLMN_CHANGE],
        "RAT_TY_CH" => &[e::RAT_CHANGE],
        "AC_TY_CH" => &[e::IP_CAN_CHANGE],
        "SAREA_CH" => &[e::USER_LOCATION_CHANGE],
        "UE_IP_CH" => &[e::UE_IP_ADDRESS_ALLOCATE, e::UE_IP_ADDRESS_RELEASE],
        "DEF_QOS_CH" => &[e::DEFAULT_EPS_BEARER_QOS_CHANGE],
        "SUCC_RES_ALLO" => &[e::SUCCESSFUL_RESOURCE_ALLOCATION],
        "RES_MO_RE" => &[23],
        "UE_TZ_CH" => &[e::UE_TIME_ZONE_CHANGE],
        "US_RE" => &[e::USAGE_REPORT],
        "APP_STA" => &[e::APPLICATION_START],
        "APP_STO" => &[e::APPLICATION_STOP],
        "RE_TIMEOUT" => &[e::REVALIDATION_TIMEOUT],
        _ => &[],
    }
}

/// A PLMN id from its 3 BCD octets (TS 24.008 §10.5.1.3).
fn plmn(b: &[u8]) -> Option<Value> {
    let d = |n: u8| (n <= 9).then(|| char::from(b'0' + n));
    let mcc: String = [d(b[0] & 0x0f)?, d(b[0] >> 4)?, d(b[1] & 0x0f)?].iter().collect();
    let mut mnc: String = [d(b[2] & 0x0f)?, d(b[2] >> 4)?].iter().collect();
    if b[1] >> 4 != 0x0f {
        mnc.push(d(b[1] >> 4)?);
    }
    Some(json!({"mcc": mcc, "mnc": mnc}))
}

/// 3GPP-User-Location-Info (TS 29.061 §16.4.7.2) → UserLocation's `eutraLocation`: TAI (type
/// 128), ECGI (129) or both (130); None for the 2G/3G types, which have no N7 form.
pub fn user_location(b: &[u8]) -> Option<Value> {
    let tai =
        |t: &[u8]| json!({"plmnId": plmn(&t[..3]), "tac": format!("{:02X}{:02X}", t[3], t[4])});
    let ecgi = |t: &[u8]| {
        let id = u32::from_be_bytes([t[3], t[4], t[5], t[6]]) & 0x0fff_ffff;
        json!({"plmnId": plmn(&t[..3]), "eutraCellId": format!("{id:07X}")})
    };
    let loc = match (b.first()?, b.len()) {
        (128, 6) => json!({"tai": tai(&b[1..6])}),
        (129, 8) => json!({"ecgi": ecgi(&b[1..8])}),
        (130, 13) => json!({"tai": tai(&b[1..6]), "ecgi": ecgi(&b[6..13])}),
        _ => return None,
    };
    if loc.as_object()?.values().any(|v| v["plmnId"].is_null()) {
        return None;
    }
    Some(json!({"eutraLocation": loc}))
}

/// ARP (TS 29.212 §5.3.32) → Arp (TS 29.571): Pre-emption-Capability 0 is ENABLED.
fn arp_to_n7(g: &Avp) -> Option<Value> {
    let level = g.child(&gx::PRIORITY_LEVEL)?.as_u32().ok()?;
    let cap = g.child(&gx::PRE_EMPTION_CAPABILITY).and_then(|a| a.as_u32().ok()).unwrap_or(1);
    let vul = g.child(&gx::PRE_EMPTION_VULNERABILITY).and_then(|a| a.as_u32().ok()).unwrap_or(0);
    Some(json!({
        "priorityLevel": level,
        "preemptCap": if cap == 0 { "MAY_PREEMPT" } else { "NOT_PREEMPT" },
        "preemptVuln": if vul == 0 { "PREEMPTABLE" } else { "NOT_PREEMPTABLE" },
    }))
}

fn arp_to_gx(arp: &Value) -> Option<Avp> {
    let level = u32::try_from(arp.get("priorityLevel")?.as_u64()?).ok()?;
    let cap = u32::from(arp.get("preemptCap").and_then(Value::as_str) != Some("MAY_PREEMPT"));
    let vul = u32::from(arp.get("preemptVuln").and_then(Value::as_str) == Some("NOT_PREEMPTABLE"));
    Some(gx::ALLOCATION_RETENTION_PRIORITY.grouped(vec![
        gx::PRIORITY_LEVEL.u32(level),
        gx::PRE_EMPTION_CAPABILITY.enumerated(cap),
        gx::PRE_EMPTION_VULNERABILITY.enumerated(vul),
    ]))
}

/// What a CCR says of the session, as SmPolicyContextData attributes (TS 29.513 §5.2.1):
/// the CCR-I's whole context, or a CCR-U's changed attributes. The subscriber identities are
/// left to the caller (`supi` from the IMSI is what it holds the subscriber by).
pub fn context_of(ccr: &Message) -> Map<String, Value> {
    let mut c = Map::new();
    if let Some(imsi) = ccr.imsi() {
        c.insert("supi".into(), Value::from(format!("imsi-{imsi}")));
    }
    if let Some(msisdn) = ccr.msisdn() {
        c.insert("gpsi".into(), Value::from(format!("msisdn-{msisdn}")));
    }
    if let Some(apn) = ccr.called_station_id() {
        c.insert("dnn".into(), Value::from(apn.to_ascii_lowercase()));
    }
    let v4 = ccr.framed_ip_address();
    let v6 = ccr.framed_ipv6_prefix();
    if let Some(a) = v4 {
        c.insert("ipv4Address".into(), Value::from(a.to_string()));
    }
    if let Some((a, len)) = v6 {
        c.insert("ipv6AddressPrefix".into(), Value::from(format!("{a}/{len}")));
    }
    match (v4, v6) {
        (Some(_), Some(_)) => c.insert("pduSessionType".into(), "IPV4V6".into()),
        (Some(_), None) => c.insert("pduSessionType".into(), "IPV4".into()),
        (None, Some(_)) => c.insert("pduSessionType".into(), "IPV6".into()),
        _ => None,
    };
    if let Some(r) = ccr.rat_type().and_then(rat_type_to_n7) {
        c.insert("ratType".into(), Value::from(r));
    }
    match ccr.ip_can_type() {
        Some(gx::ip_can_type::TGPP_EPS | gx::ip_can_type::TGPP_GPRS) => {
            c.insert("accessType".into(), "3GPP_ACCESS".into());
        }
        Some(gx::ip_can_type::NON_3GPP_EPS) => {
            c.insert("accessType".into(), "NON_3GPP_ACCESS".into());
        }
        _ => {}
    }
    if let Some(loc) = ccr.get_slice(&gx::TGPP_USER_LOCATION_INFO).and_then(user_location) {
        c.insert("userLocationInfo".into(), loc);
    }
    if let Some(s) = ccr.get_str(&gx::TGPP_SGSN_MCC_MNC) {
        if (5..=6).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit()) {
            c.insert("servingNetwork".into(), json!({"mcc": &s[..3], "mnc": &s[3..]}));
        }
    }
    if let Some(q) = ccr.qos_information() {
        let ul = q.child(&gx::APN_AGGREGATE_MAX_BITRATE_UL).and_then(|a| a.as_u32().ok());
        let dl = q.child(&gx::APN_AGGREGATE_MAX_BITRATE_DL).and_then(|a| a.as_u32().ok());
        if let (Some(ul), Some(dl)) = (ul, dl) {
            c.insert(
                "subsSessAmbr".into(),
                json!({"uplink": format_bitrate(ul.into()), "downlink": format_bitrate(dl.into())}),
            );
        }
    }
    if let Some(q) = ccr.find(&gx::DEFAULT_EPS_BEARER_QOS) {
        let qci = q.child(&gx::QOS_CLASS_IDENTIFIER).and_then(|a| a.as_u32().ok());
        let arp = q.child(&gx::ALLOCATION_RETENTION_PRIORITY).and_then(|a| arp_to_n7(&a));
        if let (Some(qci), Some(arp)) = (qci, arp) {
            c.insert("subsDefQos".into(), json!({"5qi": qci, "arp": arp}));
        }
    }
    if let Some(ue) = ccr.find(&dcca::USER_EQUIPMENT_INFO) {
        let ty = ue.child(&dcca::USER_EQUIPMENT_INFO_TYPE).and_then(|a| a.as_u32().ok());
        let val = ue.child(&dcca::USER_EQUIPMENT_INFO_VALUE).and_then(|a| a.as_bytes().ok());
        // IMEISV (type 0), as TS 29.061 carries it: the digits as text.
        if let (Some(0), Some(v)) = (ty, val) {
            if !v.is_empty() && v.iter().all(u8::is_ascii_digit) {
                c.insert(
                    "pei".into(),
                    Value::from(format!("imeisv-{}", String::from_utf8_lossy(&v))),
                );
            }
        }
    }
    c
}

/// The Event-Triggers a CCR reports, as N7 triggers (`repPolicyCtrlReqTriggers`).
pub fn reported_triggers(ccr: &Message) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for t in ccr.event_triggers().into_iter().filter_map(trigger_to_n7) {
        if !out.iter().any(|v| v == t) {
            out.push(Value::from(t));
        }
    }
    out
}

/// Rule-Failure-Code (TS 29.212 §5.3.38) → FailureCode (TS 29.512 §5.6.3.9), as TS 29.513
/// §5.3 pairs them.
pub fn failure_code_to_n7(v: u32) -> Option<&'static str> {
    Some(match v {
        1 => "UNK_RULE_ID",
        2 => "RA_GR_ERR",
        3 => "SER_ID_ERR",
        4 => "NF_MAL",
        5 => "RES_LIM",
        6 => "MAX_NR_QoS_FLOW",
        9 => "MISS_FLOW_INFO",
        10 => "RES_ALLO_FAIL",
        11 => "UNSUCC_QOS_VAL",
        12 => "INCOR_FLOW_INFO",
        13 => "PS_TO_CS_HAN",
        14 => "APP_ID_ERR",
        15 => "NO_QOS_FLOW_BOUND",
        16 => "FILTER_RES",
        18 => "MISS_REDI_SER_ADDR",
        19 => "CM_END_USER_SER_DENIED",
        20 => "CM_CREDIT_CON_NOT_APP",
        21 => "CM_AUTH_REJ",
        22 => "CM_USER_UNK",
        23 => "CM_RAT_FAILED",
        _ => return None,
    })
}

/// A CCR's Charging-Rule-Reports as TS 29.512 RuleReports (`pccRuleIds`, `ruleStatus`,
/// `failureCode`). PCC-Rule-Status TEMPORARILY_INACTIVE has no N7 status: it is INACTIVE with
/// `temporarily: true` (the PCF's own member, never sent), so Rx can tell a lost bearer
/// (TS 29.214 §4.4.6.4 INDICATION_OF_LOSS_OF_BEARER) from a released one.
pub fn rule_reports(ccr: &Message) -> Vec<Value> {
    let mut out = Vec::new();
    for r in ccr.charging_rule_reports() {
        let ids: Vec<Value> = r
            .children_of(&gx::CHARGING_RULE_NAME)
            .into_iter()
            .filter_map(|n| n.as_slice().ok().map(|b| Value::from(String::from_utf8_lossy(b))))
            .collect();
        if ids.is_empty() {
            continue;
        }
        let status = r.child(&gx::PCC_RULE_STATUS).and_then(|a| a.as_u32().ok());
        let mut report = json!({
            "pccRuleIds": ids,
            "ruleStatus": if status == Some(0) { "ACTIVE" } else { "INACTIVE" },
        });
        if status == Some(2) {
            report["temporarily"] = Value::Bool(true);
        }
        if let Some(code) = r
            .child(&gx::RULE_FAILURE_CODE)
            .and_then(|a| a.as_u32().ok())
            .and_then(failure_code_to_n7)
        {
            report["failureCode"] = Value::from(code);
        }
        out.push(report);
    }
    out
}

/// The IPv4 address of an SmPolicyContextData, for the caller's log lines and tests.
pub fn ipv4_of(context: &Value) -> Option<Ipv4Addr> {
    context.get("ipv4Address")?.as_str()?.parse().ok()
}

fn empty() -> &'static Value {
    static EMPTY: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    EMPTY.get_or_init(|| Value::Object(Map::new()))
}

/// The QoS-Information of a QosData (TS 29.512 §5.6.2.8): QCI, ARP, MBR and GBR.
fn qos_information(q: &Value) -> Option<Avp> {
    let mut kids = Vec::new();
    if let Some(qci) = q.get("5qi").and_then(Value::as_u64).and_then(|v| u32::try_from(v).ok()) {
        kids.push(gx::QOS_CLASS_IDENTIFIER.enumerated(qci));
    }
    for (key, def) in [
        ("maxbrUl", &rx::MAX_REQUESTED_BANDWIDTH_UL),
        ("maxbrDl", &rx::MAX_REQUESTED_BANDWIDTH_DL),
        ("gbrUl", &gx::GUARANTEED_BITRATE_UL),
        ("gbrDl", &gx::GUARANTEED_BITRATE_DL),
    ] {
        if let Some(v) = q.get(key).and_then(bitrate_u32) {
            kids.push(def.u32(v));
        }
    }
    if let Some(arp) = q.get("arp").and_then(arp_to_gx) {
        kids.push(arp);
    }
    (!kids.is_empty()).then(|| gx::QOS_INFORMATION.grouped(kids))
}

/// A PCC rule (TS 29.512 §5.6.2.6) with its QoS decision as a Charging-Rule-Definition.
fn rule_definition(id: &str, rule: &Value, qos_decs: &Value) -> Avp {
    let mut kids = vec![gx::CHARGING_RULE_NAME.bytes(id.as_bytes().to_vec())];
    for f in rule.get("flowInfos").and_then(Value::as_array).into_iter().flatten() {
        let Some(desc) = f.get("flowDescription").and_then(Value::as_str) else { continue };
        let dir = match f.get("flowDirection").and_then(Value::as_str) {
            Some("DOWNLINK") => 1,
            Some("UPLINK") => 2,
            Some("BIDIRECTIONAL") => 3,
            _ => 0,
        };
        kids.push(gx::FLOW_INFORMATION.grouped(vec![
            rx::FLOW_DESCRIPTION.with_slice(desc.as_bytes()),
            gx::FLOW_DIRECTION.enumerated(dir),
        ]));
    }
    let qos = rule
        .get("refQosData")
        .and_then(Value::as_array)
        .and_then(|r| r.first())
        .and_then(Value::as_str)
        .and_then(|q| qos_decs.get(q));
    if let Some(q) = qos.and_then(qos_information) {
        kids.push(q);
    }
    if let Some(p) = rule.get("precedence").and_then(Value::as_u64) {
        kids.push(gx::PRECEDENCE.u32(u32::try_from(p).unwrap_or(u32::MAX)));
    }
    // PCC rule level usage monitoring (TS 29.513 §5: refUmData is the rule's Monitoring-Key).
    let um = rule.get("refUmData").and_then(Value::as_array).and_then(|a| a.first());
    if let Some(key) = um.and_then(Value::as_str) {
        kids.push(gx::MONITORING_KEY.bytes(key.as_bytes().to_vec()));
    }
    gx::CHARGING_RULE_DEFINITION.grouped(kids)
}

/// A decision's PCC rules by id, but the TDF's: a rule with an `appId` is an application
/// detection rule, sent over Sd (crate::sd).
fn gx_rules(d: &Value) -> std::collections::BTreeMap<&str, &Value> {
    let all = d.get("pccRules").and_then(Value::as_object);
    all.into_iter()
        .flatten()
        .filter(|(_, r)| r.get("appId").is_none())
        .map(|(k, r)| (k.as_str(), r))
        .collect()
}

/// A decision's `policyCtrlReqTriggers`, None when it has none.
fn triggers(d: &Value) -> Option<&Value> {
    d.get("policyCtrlReqTriggers").filter(|t| !t.is_null())
}

/// The QoS decision (of `qos_decs`) a PCC rule refers to by its first `refQosData`; None when
/// it refers to none or to a removed one.
fn qos_of<'a>(rule: &Value, qos_decs: &'a Value) -> Option<&'a Value> {
    let id = rule
        .get("refQosData")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(Value::as_str);
    id.and_then(|i| qos_decs.get(i)).filter(|q| !q.is_null())
}

/// The first session rule of a decision (Gx has one IP-CAN session per Session-Id, so one).
fn sess_rule(d: &Value) -> &Value {
    d.get("sessRules")
        .and_then(Value::as_object)
        .and_then(|m| m.values().find(|v| !v.is_null()))
        .unwrap_or(empty())
}

/// What changed from decision `old` to `new`, as the Gx AVPs of a CCA or RAR (TS 29.212
/// §4.5.2): a Charging-Rule-Remove naming the PCC rules gone, a Charging-Rule-Install with the
/// rules new or changed (a rule changes when it, or the QoS decision it refers to, does),
/// QoS-Information with the APN-AMBR and Default-EPS-Bearer-QoS when the session rule's changed,
/// the whole Event-Trigger list when it changed (the PCEF replaces its list; an empty one
/// is NO_EVENT_TRIGGERS), and Usage-Monitoring-Information for usage monitoring data new,
/// changed or gone (crate::usage). With `old` empty: the whole decision (CCA-I).
pub fn decision_avps(old: &Value, new: &Value) -> Vec<Avp> {
    let mut out = Vec::new();
    let (old_rules, new_rules) = (gx_rules(old), gx_rules(new));
    let old_qos = old.get("qosDecs").unwrap_or(empty());
    let new_qos = new.get("qosDecs").unwrap_or(empty());
    let gone: Vec<Avp> = old_rules
        .iter()
        .filter(|(id, r)| !r.is_null() && new_rules.get(*id).is_none_or(|n| n.is_null()))
        .map(|(id, _)| gx::CHARGING_RULE_NAME.bytes(id.as_bytes().to_vec()))
        .collect();
    if !gone.is_empty() {
        out.push(gx::CHARGING_RULE_REMOVE.grouped(gone));
    }
    let install: Vec<Avp> = new_rules
        .iter()
        .filter(|(_, r)| !r.is_null())
        .filter(|(id, r)| match old_rules.get(*id) {
            Some(o) if !o.is_null() => o != *r || qos_of(o, old_qos) != qos_of(r, new_qos),
            _ => true,
        })
        .map(|(id, r)| rule_definition(id, r, new_qos))
        .collect();
    if !install.is_empty() {
        out.push(gx::CHARGING_RULE_INSTALL.grouped(install));
    }
    let (os, ns) = (sess_rule(old), sess_rule(new));
    if os.get("authSessAmbr") != ns.get("authSessAmbr") {
        if let Some(a) = ns.get("authSessAmbr") {
            let ul = a.get("uplink").and_then(bitrate_u32);
            let dl = a.get("downlink").and_then(bitrate_u32);
            if let (Some(ul), Some(dl)) = (ul, dl) {
                out.push(gx::QOS_INFORMATION.grouped(vec![
                    gx::APN_AGGREGATE_MAX_BITRATE_UL.u32(ul),
                    gx::APN_AGGREGATE_MAX_BITRATE_DL.u32(dl),
                ]));
            }
        }
    }
    if os.get("authDefQos") != ns.get("authDefQos") {
        if let Some(q) = ns.get("authDefQos") {
            let qci = q.get("5qi").and_then(Value::as_u64).and_then(|v| u32::try_from(v).ok());
            if let (Some(qci), Some(arp)) = (qci, q.get("arp").and_then(arp_to_gx)) {
                out.push(
                    gx::DEFAULT_EPS_BEARER_QOS
                        .grouped(vec![gx::QOS_CLASS_IDENTIFIER.enumerated(qci), arp]),
                );
            }
        }
    }
    let (ot, nt) = (triggers(old), triggers(new));
    if ot != nt {
        let mut codes: Vec<u32> = Vec::new();
        for t in nt.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            for c in trigger_to_gx(t) {
                if !codes.contains(c) {
                    codes.push(*c);
                }
            }
        }
        if codes.is_empty() {
            codes.push(gx::event_trigger::NO_EVENT_TRIGGERS);
        }
        out.extend(codes.into_iter().map(|c| gx::EVENT_TRIGGER.enumerated(c)));
    }
    out.extend(crate::usage::gx_changes(old, new));
    out
}

/// The Subscription-Id of an IMSI, for a test PCEF's CCR and for Failed-AVP.
pub fn imsi_subscription_id(imsi: &str) -> Avp {
    dcca::SUBSCRIPTION_ID.grouped(vec![
        dcca::SUBSCRIPTION_ID_TYPE.enumerated(dcca::subscription_id_type::END_USER_IMSI),
        dcca::SUBSCRIPTION_ID_DATA.utf8(imsi),
    ])
}

/// Whether a CCR carries the UE's address (for the CCR-I check: TS 29.212 §4.5.1 needs one).
pub fn has_ue_address(ccr: &Message) -> bool {
    ccr.find(&nasreq::FRAMED_IP_ADDRESS).is_some()
        || ccr.find(&nasreq::FRAMED_IPV6_PREFIX).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use diameter::builders::framed_ipv6_prefix;
    use diameter::dictionary::base;

    fn ccr() -> Message {
        Message::request(gx::APP_ID, gx::CMD_CREDIT_CONTROL)
            .session_id_avp("pgw;1;1")
            .avp(imsi_subscription_id("001010000000001"))
            .avp(dcca::SUBSCRIPTION_ID.grouped(vec![
                dcca::SUBSCRIPTION_ID_TYPE.enumerated(dcca::subscription_id_type::END_USER_E164),
                dcca::SUBSCRIPTION_ID_DATA.utf8("33600000001"),
            ]))
            .avp(nasreq::CALLED_STATION_ID.utf8("Internet"))
            .avp(nasreq::FRAMED_IP_ADDRESS.ipv4_octets(Ipv4Addr::new(10, 45, 0, 7)))
            .avp(framed_ipv6_prefix("2001:db8:45::".parse().unwrap(), 64))
            .avp(gx::RAT_TYPE.enumerated(gx::rat_type::EUTRAN))
            .avp(gx::IP_CAN_TYPE.enumerated(gx::ip_can_type::TGPP_EPS))
            .avp(gx::TGPP_SGSN_MCC_MNC.utf8("00101"))
            // TAI+ECGI: PLMN 001/01, TAC 0x0001, ECI 0x0000101.
            .avp(gx::TGPP_USER_LOCATION_INFO.bytes(vec![
                130, 0x00, 0xf1, 0x10, 0x00, 0x01, 0x00, 0xf1, 0x10, 0x00, 0x00, 0x01, 0x01,
            ]))
            .avp(gx::QOS_INFORMATION.grouped(vec![
                gx::APN_AGGREGATE_MAX_BITRATE_UL.u32(1_000_000_000),
                gx::APN_AGGREGATE_MAX_BITRATE_DL.u32(2_000_000_000),
            ]))
            .avp(gx::DEFAULT_EPS_BEARER_QOS.grouped(vec![
                gx::QOS_CLASS_IDENTIFIER.enumerated(9),
                gx::ALLOCATION_RETENTION_PRIORITY.grouped(vec![
                    gx::PRIORITY_LEVEL.u32(8),
                    gx::PRE_EMPTION_CAPABILITY.enumerated(1),
                    gx::PRE_EMPTION_VULNERABILITY.enumerated(0),
                ]),
            ]))
            .avp(gx::EVENT_TRIGGER.enumerated(gx::event_trigger::RAT_CHANGE))
            .avp(gx::EVENT_TRIGGER.enumerated(gx::event_trigger::TAI_CHANGE))
            .avp(gx::EVENT_TRIGGER.enumerated(gx::event_trigger::ECGI_CHANGE))
            .avp(base::AUTH_APPLICATION_ID.u32(gx::APP_ID))
    }

    #[test]
    fn a_ccr_becomes_an_sm_policy_context() {
        // Through the wire format, as the handler sees it.
        let m = Message::decode(ccr().to_bytes().unwrap()).unwrap();
        let c = Value::Object(context_of(&m));
        assert_eq!(
            c,
            json!({
                "supi": "imsi-001010000000001",
                "gpsi": "msisdn-33600000001",
                "dnn": "internet",
                "ipv4Address": "10.45.0.7",
                "ipv6AddressPrefix": "2001:db8:45::/64",
                "pduSessionType": "IPV4V6",
                "ratType": "EUTRA",
                "accessType": "3GPP_ACCESS",
                "servingNetwork": {"mcc": "001", "mnc": "01"},
                "userLocationInfo": {"eutraLocation": {
                    "tai": {"plmnId": {"mcc": "001", "mnc": "01"}, "tac": "0001"},
                    "ecgi": {"plmnId": {"mcc": "001", "mnc": "01"}, "eutraCellId": "0000101"}}},
                "subsSessAmbr": {"uplink": "1 Gbps", "downlink": "2 Gbps"},
                "subsDefQos": {"5qi": 9, "arp": {"priorityLevel": 8,
                    "preemptCap": "NOT_PREEMPT", "preemptVuln": "PREEMPTABLE"}},
            })
        );
        // RAT, TAI and ECGI changes: two N7 triggers, each once.
        assert_eq!(reported_triggers(&m), vec![json!("RAT_TY_CH"), json!("SAREA_CH")]);
        assert_eq!(ipv4_of(&c), Some(Ipv4Addr::new(10, 45, 0, 7)));
        assert!(has_ue_address(&m));
    }

    #[test]
    fn bitrates_and_locations_both_ways() {
        assert_eq!(parse_bitrate("1 Gbps"), Some(1_000_000_000));
        assert_eq!(parse_bitrate("2.5 Mbps"), Some(2_500_000));
        assert_eq!(parse_bitrate("12 bps"), Some(12));
        assert_eq!(parse_bitrate("1Gbps"), None);
        assert_eq!(parse_bitrate("1 gbps"), None);
        assert_eq!(format_bitrate(2_000_000_000), "2 Gbps");
        assert_eq!(format_bitrate(2_500_000), "2500 Kbps");
        assert_eq!(format_bitrate(999), "999 bps");
        for s in ["1 Gbps", "200 Mbps", "64 Kbps", "7 bps"] {
            assert_eq!(format_bitrate(parse_bitrate(s).unwrap()), s);
        }
        // Above Unsigned32: clamped.
        assert_eq!(bitrate_u32(&json!("5 Gbps")), Some(u32::MAX));
        // A 3-digit MNC, TAI only; a 2G/3G location has no N7 form.
        let l = user_location(&[128, 0x13, 0x00, 0x14, 0xab, 0xcd]).unwrap();
        assert_eq!(
            l,
            json!({"eutraLocation": {"tai": {"plmnId": {"mcc": "310", "mnc": "410"}, "tac": "ABCD"}}})
        );
        assert_eq!(user_location(&[1, 0, 0, 0, 0, 0, 0, 0]), None);
        assert_eq!(user_location(&[128, 0xaa, 0x00, 0x14, 0, 1]), None, "not BCD");
    }

    fn decision() -> Value {
        json!({
            "sessRules": {"s1": {"sessRuleId": "s1",
                "authSessAmbr": {"uplink": "1 Gbps", "downlink": "2 Gbps"},
                "authDefQos": {"5qi": 9, "arp": {"priorityLevel": 8, "preemptCap": "NOT_PREEMPT",
                    "preemptVuln": "PREEMPTABLE"}}}},
            "pccRules": {"video": {"pccRuleId": "video", "precedence": 100,
                "flowInfos": [{"flowDescription": "permit out 17 from any to 10.45.0.7 5000",
                    "flowDirection": "DOWNLINK"}],
                "refQosData": ["q1"]}},
            "qosDecs": {"q1": {"qosId": "q1", "5qi": 2, "maxbrUl": "1 Mbps", "maxbrDl": "4 Mbps",
                "gbrUl": "1 Mbps", "gbrDl": "2 Mbps",
                "arp": {"priorityLevel": 5, "preemptCap": "MAY_PREEMPT", "preemptVuln": "NOT_PREEMPTABLE"}}},
            "policyCtrlReqTriggers": ["PLMN_CH", "UE_IP_CH"]
        })
    }

    fn u32_of(a: &Avp, def: &diameter::AvpDef) -> u32 {
        a.child(def).unwrap().as_u32().unwrap()
    }

    #[test]
    fn a_whole_decision_becomes_gx_avps() {
        let avps = decision_avps(&json!({}), &decision());
        let names: Vec<u32> = avps.iter().map(Avp::code).collect();
        assert_eq!(
            names,
            vec![1001, 1016, 1049, 1006, 1006, 1006],
            "install, AMBR, default QoS, 3 triggers"
        );
        let def = avps[0].child(&gx::CHARGING_RULE_DEFINITION).unwrap();
        assert_eq!(def.child(&gx::CHARGING_RULE_NAME).unwrap().as_slice().unwrap(), b"video");
        assert_eq!(u32_of(&def, &gx::PRECEDENCE), 100);
        let flow = def.child(&gx::FLOW_INFORMATION).unwrap();
        assert_eq!(
            flow.child(&rx::FLOW_DESCRIPTION).unwrap().as_str().unwrap(),
            "permit out 17 from any to 10.45.0.7 5000"
        );
        assert_eq!(u32_of(&flow, &gx::FLOW_DIRECTION), 1);
        let q = def.child(&gx::QOS_INFORMATION).unwrap();
        assert_eq!(u32_of(&q, &gx::QOS_CLASS_IDENTIFIER), 2);
        assert_eq!(u32_of(&q, &rx::MAX_REQUESTED_BANDWIDTH_DL), 4_000_000);
        assert_eq!(u32_of(&q, &gx::GUARANTEED_BITRATE_UL), 1_000_000);
        let arp = q.child(&gx::ALLOCATION_RETENTION_PRIORITY).unwrap();
        assert_eq!(
            (
                u32_of(&arp, &gx::PRIORITY_LEVEL),
                u32_of(&arp, &gx::PRE_EMPTION_CAPABILITY),
                u32_of(&arp, &gx::PRE_EMPTION_VULNERABILITY)
            ),
            (5, 0, 1)
        );
        assert_eq!(u32_of(&avps[1], &gx::APN_AGGREGATE_MAX_BITRATE_DL), 2_000_000_000);
        assert_eq!(u32_of(&avps[2], &gx::QOS_CLASS_IDENTIFIER), 9);
        let triggers: Vec<u32> = avps[3..].iter().map(|a| a.as_u32().unwrap()).collect();
        assert_eq!(triggers, vec![4, 18, 19]);
    }

    #[test]
    fn a_changed_decision_answers_only_what_changed() {
        let old = decision();
        assert!(decision_avps(&old, &old).is_empty(), "nothing changed, nothing said");
        // The QoS decision the rule refers to changes: the rule is installed again.
        let mut new = old.clone();
        new["qosDecs"]["q1"]["maxbrDl"] = json!("8 Mbps");
        let avps = decision_avps(&old, &new);
        assert_eq!(avps.iter().map(Avp::code).collect::<Vec<_>>(), vec![1001]);
        // The rule goes, another comes, the AMBR changes, triggers emptied.
        let mut new = old.clone();
        new["pccRules"] = json!({"web": {"pccRuleId": "web", "precedence": 200}});
        new["sessRules"]["s1"]["authSessAmbr"]["downlink"] = json!("3 Gbps");
        new["policyCtrlReqTriggers"] = json!([]);
        let avps = decision_avps(&old, &new);
        assert_eq!(avps.iter().map(Avp::code).collect::<Vec<_>>(), vec![1002, 1001, 1016, 1006]);
        let removed = avps[0].child(&gx::CHARGING_RULE_NAME).unwrap();
        assert_eq!(removed.as_slice().unwrap(), b"video");
        assert_eq!(avps[3].as_u32().unwrap(), gx::event_trigger::NO_EVENT_TRIGGERS);
        // A rule removed by a null (an update's delta form) is removed too.
        let mut new = old.clone();
        new["pccRules"]["video"] = Value::Null;
        assert_eq!(decision_avps(&old, &new).iter().map(Avp::code).collect::<Vec<_>>(), vec![1002]);
    }

    #[test]
    fn triggers_map_both_ways() {
        for t in [
            "PLMN_CH",
            "RAT_TY_CH",
            "AC_TY_CH",
            "SAREA_CH",
            "UE_IP_CH",
            "DEF_QOS_CH",
            "RES_MO_RE",
            "US_RE",
        ] {
            for code in trigger_to_gx(t) {
                assert_eq!(trigger_to_n7(*code), Some(t), "{t} -> {code} -> back");
            }
        }
        assert!(trigger_to_gx("SE_AMBR_CH").is_empty());
        assert_eq!(trigger_to_n7(gx::event_trigger::LOSS_OF_BEARER), None);
    }
}
