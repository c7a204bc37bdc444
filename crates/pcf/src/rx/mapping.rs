//! The Rx -> N5 mapping (TS 29.513 §7.3, TS 29.214 §5.3): an AAR's service information becomes
//! the AppSessionContextReqData-shaped request [`crate::app_session`] decides on, so Rx and N5
//! make the same PCC rules of the same media. Pure functions of the message, tested here.

use diameter::dictionary::{gx, rx};
use diameter::{result_code as rc, Avp, Message};
use serde_json::{Map, Value};

use crate::gx::mapping::format_bitrate;

/// Why an AAR's service information cannot be taken: the result to answer and the AVP at
/// fault (Failed-AVP).
#[derive(Debug)]
pub struct Invalid {
    /// A Result-Code (5005) or, with `experimental`, a 3GPP Experimental-Result-Code.
    pub code: u32,
    pub experimental: bool,
    pub avp: Avp,
}

impl Invalid {
    fn missing(avp: Avp) -> Invalid {
        Invalid { code: rc::DIAMETER_MISSING_AVP, experimental: false, avp }
    }
    fn service(code: u32, avp: &Avp) -> Invalid {
        Invalid { code, experimental: true, avp: avp.clone() }
    }
}

/// Media-Type (TS 29.214 §5.3.19) → MediaType (TS 29.514 §5.6.3.4).
fn media_type(v: u32) -> Option<&'static str> {
    Some(match v {
        0 => "AUDIO",
        1 => "VIDEO",
        2 => "DATA",
        3 => "APPLICATION",
        4 => "CONTROL",
        5 => "TEXT",
        6 => "MESSAGE",
        0xffff_ffff => "OTHER",
        _ => return None,
    })
}

/// Flow-Status (TS 29.214 §5.3.11) → FlowStatus (TS 29.514 §5.6.3.5): the same names.
fn flow_status(v: u32) -> Option<&'static str> {
    Some(match v {
        0 => "ENABLED-UPLINK",
        1 => "ENABLED-DOWNLINK",
        2 => "ENABLED",
        3 => "DISABLED",
        4 => "REMOVED",
        _ => return None,
    })
}

/// Flow-Usage (TS 29.214 §5.3.12) → FlowUsage (TS 29.514 §5.6.3.14).
fn flow_usage(v: u32) -> Option<&'static str> {
    Some(match v {
        0 => "NO_INFO",
        1 => "RTCP",
        2 => "AF_SIGNALLING",
        _ => return None,
    })
}

fn u32_of(g: &Avp, def: &diameter::AvpDef) -> Option<u32> {
    g.child(def).and_then(|a| a.as_u32().ok())
}

/// An enumerated child mapped by `f`; an unknown value is invalid service information (5061).
fn enum_of(
    g: &Avp,
    def: &diameter::AvpDef,
    f: fn(u32) -> Option<&'static str>,
) -> Result<Option<&'static str>, Invalid> {
    let Some(a) = g.child(def) else { return Ok(None) };
    match a.as_u32().ok().and_then(f) {
        Some(s) => Ok(Some(s)),
        None => Err(Invalid::service(rx::experimental_result::INVALID_SERVICE_INFORMATION, &a)),
    }
}

/// Max-/Min-Requested-Bandwidth and RR/RS-Bandwidth (bit/s) as BitRates.
fn bandwidths(g: &Avp, out: &mut Map<String, Value>, pairs: &[(&str, &diameter::AvpDef)]) {
    for (key, def) in pairs {
        if let Some(v) = u32_of(g, def) {
            out.insert((*key).into(), Value::from(format_bitrate(v.into())));
        }
    }
}

/// A Media-Sub-Component (TS 29.214 §5.3.21) as a MediaSubComponent: the flow descriptions
/// must be `permit out` rules (§5.3.8), at most one per direction, else 5062
/// FILTER_RESTRICTIONS (§5.5.3).
fn sub_component(s: &Avp) -> Result<(u32, Value), Invalid> {
    let Some(n) = u32_of(s, &rx::FLOW_NUMBER) else {
        return Err(Invalid::missing(rx::FLOW_NUMBER.zero_filled()));
    };
    let mut o = Map::new();
    o.insert("fNum".into(), Value::from(n));
    let descs = s.children_of(&rx::FLOW_DESCRIPTION);
    if descs.len() > 2 {
        return Err(Invalid::service(rx::experimental_result::FILTER_RESTRICTIONS, &descs[2]));
    }
    let mut fdescs = Vec::new();
    for d in &descs {
        match d.as_str() {
            Ok(text) if text.starts_with("permit out ") => fdescs.push(Value::from(text)),
            _ => {
                return Err(Invalid::service(rx::experimental_result::FILTER_RESTRICTIONS, d));
            }
        }
    }
    if !fdescs.is_empty() {
        o.insert("fDescs".into(), Value::Array(fdescs));
    }
    if let Some(st) = enum_of(s, &rx::FLOW_STATUS, flow_status)? {
        o.insert("fStatus".into(), Value::from(st));
    }
    if let Some(u) = enum_of(s, &rx::FLOW_USAGE, flow_usage)? {
        o.insert("flowUsage".into(), Value::from(u));
    }
    bandwidths(
        s,
        &mut o,
        &[
            ("marBwUl", &rx::MAX_REQUESTED_BANDWIDTH_UL),
            ("marBwDl", &rx::MAX_REQUESTED_BANDWIDTH_DL),
        ],
    );
    if let Some(t) =
        s.child(&gx::TOS_TRAFFIC_CLASS).and_then(|a| a.as_slice().ok().map(<[u8]>::to_vec))
    {
        let hex: String = t.iter().map(|b| format!("{b:02x}")).collect();
        o.insert("tosTrCl".into(), Value::from(hex));
    }
    Ok((n, Value::Object(o)))
}

/// A Media-Component-Description (TS 29.214 §5.3.16) as a MediaComponent (TS 29.514
/// §5.6.2.7), keyed by its number.
pub fn media_component(m: &Avp) -> Result<(u32, Value), Invalid> {
    let Some(n) = u32_of(m, &rx::MEDIA_COMPONENT_NUMBER) else {
        return Err(Invalid::missing(rx::MEDIA_COMPONENT_NUMBER.zero_filled()));
    };
    let mut o = Map::new();
    o.insert("medCompN".into(), Value::from(n));
    if let Some(t) = enum_of(m, &rx::MEDIA_TYPE, media_type)? {
        o.insert("medType".into(), Value::from(t));
    }
    if let Some(st) = enum_of(m, &rx::FLOW_STATUS, flow_status)? {
        o.insert("fStatus".into(), Value::from(st));
    }
    bandwidths(
        m,
        &mut o,
        &[
            ("marBwUl", &rx::MAX_REQUESTED_BANDWIDTH_UL),
            ("marBwDl", &rx::MAX_REQUESTED_BANDWIDTH_DL),
            ("mirBwUl", &rx::MIN_REQUESTED_BANDWIDTH_UL),
            ("mirBwDl", &rx::MIN_REQUESTED_BANDWIDTH_DL),
            ("rrBw", &rx::RR_BANDWIDTH),
            ("rsBw", &rx::RS_BANDWIDTH),
        ],
    );
    let codecs: Vec<Value> = m
        .children_of(&rx::CODEC_DATA)
        .iter()
        .filter_map(|c| c.as_slice().ok().map(|b| Value::from(String::from_utf8_lossy(b))))
        .collect();
    if !codecs.is_empty() {
        o.insert("codecs".into(), Value::Array(codecs));
    }
    let mut subs = Map::new();
    for s in m.children_of(&rx::MEDIA_SUB_COMPONENT) {
        let (k, v) = sub_component(&s)?;
        subs.insert(k.to_string(), v);
    }
    if !subs.is_empty() {
        o.insert("medSubComps".into(), Value::Object(subs));
    }
    Ok((n, Value::Object(o)))
}

/// What an AAR says of the AF session, as AppSessionContextReqData members (TS 29.513 §7.3.1
/// Table 7.3.1-1): `ueIpv4` / `ueIpv6` (Framed-IP-Address / -IPv6-Prefix), `dnn`
/// (Called-Station-Id), `afAppId`, `afChargId`, `supi` / `gpsi` (Subscription-Id) and
/// `medComponents`. Only what the AAR carries: an AAR-U's is merged with [`merge`].
pub fn service_info(aar: &Message) -> Result<Map<String, Value>, Invalid> {
    let mut c = Map::new();
    if let Some(a) = aar.framed_ip_address() {
        c.insert("ueIpv4".into(), Value::from(a.to_string()));
    }
    if let Some((a, _)) = aar.framed_ipv6_prefix() {
        c.insert("ueIpv6".into(), Value::from(a.to_string()));
    }
    if let Some(apn) = aar.called_station_id() {
        c.insert("dnn".into(), Value::from(apn.to_ascii_lowercase()));
    }
    if let Some(app) = aar.af_application_identifier() {
        c.insert("afAppId".into(), Value::from(String::from_utf8_lossy(&app).into_owned()));
    }
    if let Some(ch) = aar.af_charging_identifier() {
        c.insert("afChargId".into(), Value::from(String::from_utf8_lossy(&ch).into_owned()));
    }
    if let Some(imsi) = aar.imsi() {
        c.insert("supi".into(), Value::from(format!("imsi-{imsi}")));
    }
    if let Some(msisdn) = aar.msisdn() {
        c.insert("gpsi".into(), Value::from(format!("msisdn-{msisdn}")));
    }
    let mut media = Map::new();
    for m in aar.media_component_descriptions() {
        let (n, v) = media_component(m)?;
        media.insert(n.to_string(), v);
    }
    if !media.is_empty() {
        c.insert("medComponents".into(), Value::Object(media));
    }
    Ok(c)
}

/// An AAR-U's service information over the session's (TS 29.214 §4.4.2): a media component of
/// a known number is modified (the members given replace the old, sub-components by flow
/// number), a new one added; the other members given replace the old ones.
pub fn merge(into: &mut Map<String, Value>, update: Map<String, Value>) {
    for (k, v) in update {
        if k != "medComponents" {
            into.insert(k, v);
            continue;
        }
        let Value::Object(new) = v else { continue };
        let media = into.entry("medComponents").or_insert_with(|| Value::Object(Map::new()));
        let Some(media) = media.as_object_mut() else { continue };
        for (n, comp) in new {
            let (Some(old), Value::Object(comp)) = (media.get_mut(&n), &comp) else {
                media.insert(n, comp);
                continue;
            };
            let Some(old) = old.as_object_mut() else { continue };
            for (ck, cv) in comp {
                match (ck.as_str(), old.get_mut(ck), cv) {
                    ("medSubComps", Some(Value::Object(os)), Value::Object(ns)) => {
                        for (f, s) in ns {
                            os.insert(f.clone(), s.clone());
                        }
                    }
                    _ => {
                        old.insert(ck.clone(), cv.clone());
                    }
                }
            }
        }
    }
}

/// What Failed-AVP names for an AAR-I without the UE's address (RFC 6733 §7.5: an example of
/// the missing AVP; TS 29.214 §4.4.1 asks for Framed-IP-Address or Framed-IPv6-Prefix).
pub fn missing_address() -> Avp {
    diameter::dictionary::nasreq::FRAMED_IP_ADDRESS.zero_filled()
}

/// The Flows (TS 29.214 §5.3.10) of media components `comps` of `media`: each component's
/// number with the flow numbers of its sub-components.
pub fn flows(media: &Value, comps: &[u64]) -> Vec<Avp> {
    comps
        .iter()
        .map(|n| {
            let mut kids = vec![rx::MEDIA_COMPONENT_NUMBER.u32(u32::try_from(*n).unwrap_or(0))];
            let subs = media.get(n.to_string()).and_then(|c| c.get("medSubComps"));
            for s in subs.and_then(Value::as_object).into_iter().flat_map(|m| m.values()) {
                if let Some(f) = s.get("fNum").and_then(Value::as_u64) {
                    kids.push(rx::FLOW_NUMBER.u32(u32::try_from(f).unwrap_or(0)));
                }
            }
            rx::FLOWS.grouped(kids)
        })
        .collect()
}

#[cfg(test)]
fn imsi_avp(imsi: &str) -> Avp {
    use diameter::dictionary::dcca;
    dcca::SUBSCRIPTION_ID.grouped(vec![
        dcca::SUBSCRIPTION_ID_TYPE.enumerated(dcca::subscription_id_type::END_USER_IMSI),
        dcca::SUBSCRIPTION_ID_DATA.utf8(imsi),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use diameter::dictionary::nasreq;
    use serde_json::json;
    use std::net::Ipv4Addr;

    fn audio(n: u32, status: Option<u32>) -> Avp {
        let mut kids = vec![
            rx::MEDIA_COMPONENT_NUMBER.u32(n),
            rx::MEDIA_TYPE.enumerated(0),
            rx::MAX_REQUESTED_BANDWIDTH_UL.u32(41_000),
            rx::MAX_REQUESTED_BANDWIDTH_DL.u32(41_000),
            rx::CODEC_DATA.bytes(b"uplink\noffer\nm=audio 49152 RTP/AVP 116\r\n".to_vec()),
            rx::MEDIA_SUB_COMPONENT.grouped(vec![
                rx::FLOW_NUMBER.u32(1),
                rx::FLOW_DESCRIPTION
                    .with_slice(b"permit out 17 from 198.51.100.10 50000 to 10.45.0.7 49152"),
                rx::FLOW_DESCRIPTION
                    .with_slice(b"permit out 17 from 10.45.0.7 49152 to 198.51.100.10 50000"),
            ]),
            rx::MEDIA_SUB_COMPONENT.grouped(vec![
                rx::FLOW_NUMBER.u32(2),
                rx::FLOW_USAGE.enumerated(1),
                rx::FLOW_DESCRIPTION
                    .with_slice(b"permit out 17 from 198.51.100.10 50001 to 10.45.0.7 49153"),
            ]),
        ];
        if let Some(s) = status {
            kids.push(rx::FLOW_STATUS.enumerated(s));
        }
        rx::MEDIA_COMPONENT_DESCRIPTION.grouped(kids)
    }

    fn aar(media: Vec<Avp>) -> Message {
        Message::request(rx::APP_ID, rx::CMD_AA)
            .session_id_avp("pcscf;1")
            .avp(nasreq::FRAMED_IP_ADDRESS.ipv4_octets(Ipv4Addr::new(10, 45, 0, 7)))
            .avp(nasreq::CALLED_STATION_ID.utf8("IMS"))
            .avp(rx::AF_APPLICATION_IDENTIFIER.bytes(b"ims-voice".to_vec()))
            .avp(imsi_avp("001010000000001"))
            .with_avps(media)
    }

    #[test]
    fn an_aar_becomes_an_app_session_context() {
        let m = Message::decode(aar(vec![audio(1, None)]).to_bytes().unwrap()).unwrap();
        let c = Value::Object(service_info(&m).unwrap());
        assert_eq!(
            c,
            json!({
                "ueIpv4": "10.45.0.7", "dnn": "ims", "afAppId": "ims-voice",
                "supi": "imsi-001010000000001",
                "medComponents": {"1": {
                    "medCompN": 1, "medType": "AUDIO", "marBwUl": "41 Kbps", "marBwDl": "41 Kbps",
                    "codecs": ["uplink\noffer\nm=audio 49152 RTP/AVP 116\r\n"],
                    "medSubComps": {
                        "1": {"fNum": 1, "fDescs": [
                            "permit out 17 from 198.51.100.10 50000 to 10.45.0.7 49152",
                            "permit out 17 from 10.45.0.7 49152 to 198.51.100.10 50000"]},
                        "2": {"fNum": 2, "flowUsage": "RTCP", "fDescs": [
                            "permit out 17 from 198.51.100.10 50001 to 10.45.0.7 49153"]}}}}
            })
        );
        let f = flows(&c["medComponents"], &[1]);
        assert_eq!(f[0].children_of(&rx::FLOW_NUMBER).len(), 2);
    }

    #[test]
    fn bad_service_information_names_the_avp() {
        // A filter that is not "permit out": 5062 FILTER_RESTRICTIONS.
        let bad = rx::MEDIA_COMPONENT_DESCRIPTION.grouped(vec![
            rx::MEDIA_COMPONENT_NUMBER.u32(1),
            rx::MEDIA_SUB_COMPONENT.grouped(vec![
                rx::FLOW_NUMBER.u32(1),
                rx::FLOW_DESCRIPTION.with_slice(b"permit in 17 from any to any"),
            ]),
        ]);
        let e = service_info(&aar(vec![bad])).unwrap_err();
        assert_eq!((e.code, e.experimental), (5062, true));
        assert_eq!(e.avp.code(), rx::FLOW_DESCRIPTION.code);
        // An unknown Media-Type: 5061 INVALID_SERVICE_INFORMATION.
        let bad = rx::MEDIA_COMPONENT_DESCRIPTION
            .grouped(vec![rx::MEDIA_COMPONENT_NUMBER.u32(1), rx::MEDIA_TYPE.enumerated(77)]);
        let e = service_info(&aar(vec![bad])).unwrap_err();
        assert_eq!((e.code, e.avp.code()), (5061, rx::MEDIA_TYPE.code));
        // A component without its number: 5005 naming Media-Component-Number.
        let bad = rx::MEDIA_COMPONENT_DESCRIPTION.grouped(vec![rx::MEDIA_TYPE.enumerated(0)]);
        let e = service_info(&aar(vec![bad])).unwrap_err();
        assert_eq!((e.code, e.experimental), (5005, false));
        assert_eq!(e.avp.code(), rx::MEDIA_COMPONENT_NUMBER.code);
    }

    #[test]
    fn an_aar_u_modifies_and_adds_components() {
        let mut c = service_info(&aar(vec![audio(1, None)])).unwrap();
        let video = rx::MEDIA_COMPONENT_DESCRIPTION.grouped(vec![
            rx::MEDIA_COMPONENT_NUMBER.u32(2),
            rx::MEDIA_TYPE.enumerated(1),
            rx::MEDIA_SUB_COMPONENT.grouped(vec![
                rx::FLOW_NUMBER.u32(1),
                rx::FLOW_DESCRIPTION.with_slice(b"permit out 17 from any to 10.45.0.7 49154"),
            ]),
        ]);
        let disable = rx::MEDIA_COMPONENT_DESCRIPTION
            .grouped(vec![rx::MEDIA_COMPONENT_NUMBER.u32(1), rx::FLOW_STATUS.enumerated(3)]);
        let upd = Message::request(rx::APP_ID, rx::CMD_AA).avp(disable).avp(video);
        merge(&mut c, service_info(&upd).unwrap());
        let m = &c["medComponents"];
        assert_eq!(m["1"]["fStatus"], "DISABLED");
        assert_eq!(m["1"]["medType"], "AUDIO", "what the AAR-U did not say stays");
        assert_eq!(m["1"]["medSubComps"].as_object().unwrap().len(), 2);
        assert_eq!(m["2"]["medType"], "VIDEO");
        assert_eq!(c["ueIpv4"], "10.45.0.7");
    }
}
