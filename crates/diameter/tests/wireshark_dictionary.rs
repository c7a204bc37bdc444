//! Cross-checks our dictionary against Wireshark's (`/usr/share/wireshark/diameter/*.xml`,
//! Debian package `tshark`/`wireshark-common`) when it is installed; prints "skipped" otherwise.
//! Nothing is generated from those files: this only catches typos in the hand-written table.

use std::collections::HashMap;
use std::path::Path;

use diameter::dictionary::{all_avps, AvpDef, VENDOR_3GPP};
use diameter::DataType;

const DIR: &str = "/usr/share/wireshark/diameter";

struct WsAvp {
    name: String,
    ty: String,
    enums: Vec<u32>,
}

fn attr(tag: &str, name: &str) -> Option<String> {
    let key = format!("{name}=\"");
    let start = tag.find(&key)? + key.len();
    let end = tag[start..].find('"')? + start;
    Some(tag[start..end].to_owned())
}

fn load() -> HashMap<(u32, u32), WsAvp> {
    let mut out = HashMap::new();
    for file in ["dictionary.xml", "nasreq.xml", "chargecontrol.xml", "TGPP.xml"] {
        let Ok(text) = std::fs::read_to_string(Path::new(DIR).join(file)) else { continue };
        let mut rest = text.as_str();
        while let Some(i) = rest.find("<avp ") {
            rest = &rest[i..];
            let tag_end = rest.find('>').unwrap_or(rest.len());
            let tag = &rest[..tag_end];
            let body_end = rest.find("</avp>").unwrap_or(rest.len());
            let body = &rest[..body_end];
            rest = &rest[tag_end.min(rest.len())..];
            let (Some(name), Some(code)) = (attr(tag, "name"), attr(tag, "code")) else { continue };
            let Ok(code) = code.parse::<u32>() else { continue };
            let vendor = match attr(tag, "vendor-id").as_deref() {
                Some("TGPP") => VENDOR_3GPP,
                None | Some("None") => 0,
                Some(_) => continue,
            };
            let ty = if body.contains("<grouped") {
                "Grouped".to_owned()
            } else {
                body.find("type-name=\"").and_then(|_| attr(body, "type-name")).unwrap_or_default()
            };
            let mut enums = Vec::new();
            let mut e = body;
            while let Some(j) = e.find("<enum ") {
                e = &e[j + 6..];
                if let Some(v) = attr(e, "code").and_then(|c| c.parse().ok()) {
                    enums.push(v);
                }
            }
            out.entry((code, vendor)).or_insert(WsAvp { name, ty, enums });
        }
    }
    out
}

fn compatible(ours: DataType, theirs: &str) -> bool {
    use DataType::*;
    let ok: &[&str] = match ours {
        OctetString => &["OctetString", "OctetStringOrUTF8", "UTF8String"],
        UTF8String => &["UTF8String", "OctetStringOrUTF8"],
        Unsigned32 => &["Unsigned32", "AppId", "VendorId", "Enumerated"],
        Enumerated => &["Enumerated", "Unsigned32"],
        Address => &["IPAddress", "Address"],
        Ipv4Octets => &["IPAddress", "OctetString"],
        // RFC 6733 §8.9 says Unsigned32 for Authorization-Lifetime; Wireshark says Integer32.
        Integer32 => &["Integer32"],
        Integer64 => &["Integer64"],
        Unsigned64 => &["Unsigned64"],
        Float32 => &["Float32"],
        Float64 => &["Float64"],
        Grouped => &["Grouped"],
        Time => &["Time"],
        DiameterIdentity => &["DiameterIdentity"],
        DiameterURI => &["DiameterURI"],
        IPFilterRule => &["IPFilterRule", "OctetString"],
    };
    ok.contains(&theirs)
}

/// Ours deliberately differs (spec over Wireshark), or Wireshark lacks a newer value.
fn known_difference(d: &AvpDef) -> bool {
    // Session-Release-Cause: Wireshark lacks Sd's IP_CAN_SESSION_TERMINATION and
    // UE_IP_ADDRESS_RELEASE (TS 29.212 §5.3.44, Rel-12).
    matches!(d.name, "Authorization-Lifetime" | "Usage-Monitoring-Level" | "Session-Release-Cause")
}

#[test]
fn dictionary_agrees_with_wireshark() {
    if !Path::new(DIR).join("dictionary.xml").exists() {
        println!("skipped: Wireshark dictionary not installed");
        return;
    }
    let ws = load();
    let mut problems = Vec::new();
    let mut checked = 0;
    for d in all_avps() {
        let Some(w) = ws.get(&(d.code, d.vendor_id)) else {
            problems
                .push(format!("{} ({}, vendor {}) not in Wireshark", d.name, d.code, d.vendor_id));
            continue;
        };
        checked += 1;
        if known_difference(d) {
            continue;
        }
        if !compatible(d.ty, &w.ty) {
            problems
                .push(format!("{}: type {:?}, Wireshark {} says {}", d.name, d.ty, w.name, w.ty));
        }
        for (v, n) in d.enums {
            if !w.enums.contains(v) {
                problems.push(format!("{}: enum {n}={v} unknown to Wireshark", d.name));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(checked > 200, "only {checked} AVPs checked");
}
