//! 5G-EIR entries over SOAP (`GetEirEntry`, `CreateEirEntry`, `UpdateEirEntry`,
//! `DeleteEirEntry`): the single IMEIs and IMEI ranges the N5g-eir lookup reads ([`crate::eir`]),
//! the same entries as `/udr-prov/v1/eir/imeis` and `/udr-prov/v1/eir/imei-ranges`.
//!
//! ```xml
//! <udr:entry>
//!   <udr:imei>352099001761481</udr:imei>          a single IMEI, or
//!   <udr:start>35209900000000</udr:start>         a range, both ends included
//!   <udr:end>35209900999999</udr:end>
//!   <udr:status>BLACKLISTED</udr:status>          WHITELISTED | BLACKLISTED | GREYLISTED
//!   <udr:supi>imsi-001010000000001</udr:supi>     0..100: bound to these SUPIs
//!   <udr:gpsi>msisdn-33600000001</udr:gpsi>       0..100: bound to these GPSIs
//! </udr:entry>
//! ```
//!
//! An entry is checked by the REST provisioning's own parser (the element tree is read as the
//! EirImeiEntry / EirImeiRange JSON body it stands for), so both APIs accept and refuse the same
//! entries. Get and Delete name the entry by `imei` or by the `start` of its range. Create
//! refuses an entry that exists (ALREADY_EXISTS) and a range that overlaps another
//! (ALREADY_EXISTS, field `end`); Update refuses an unknown one (NOT_FOUND).

use std::fmt::Write;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::adapter::{AdapterFuture, Fault, ProfileAdapter, Verb};
use crate::config::ProvisioningLimits;
use crate::context::Udr;
use crate::eir::{self, format_imei, Binding, EquipmentStatus, RangeConflict};
use crate::provisioning::eir_entries::{self, EirItem};
use crate::sh::xml::{escape, Element};

pub struct EirAdapter;

/// The reason the REST parser gives a missing attribute.
const MISSING: &str = "mandatory attribute is missing";

impl ProfileAdapter for EirAdapter {
    fn kind(&self) -> &'static str {
        "EirEntry"
    }

    fn fields(&self, verb: Verb) -> &'static [&'static str] {
        match verb {
            Verb::Get | Verb::Delete => &["imei", "start"],
            Verb::Create | Verb::Update => &["entry"],
        }
    }

    fn call<'a>(
        &'a self,
        udr: &'a Arc<Udr>,
        verb: Verb,
        op: &'a Element,
        _src: &'a str,
    ) -> AdapterFuture<'a> {
        Box::pin(async move {
            match verb {
                Verb::Get => get(udr, op).await,
                Verb::Create => write(udr, op, true).await,
                Verb::Update => write(udr, op, false).await,
                Verb::Delete => delete(udr, op).await,
            }
        })
    }
}

/// The entry a Get or Delete names: one `imei` or one `start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Imei(u64),
    Range(u64),
}

fn key(op: &Element) -> Result<Key, Fault> {
    let imei = op.child_text("imei").filter(|s| !s.is_empty());
    let start = op.child_text("start").filter(|s| !s.is_empty());
    match (imei, start) {
        (Some(i), None) => {
            Ok(Key::Imei(eir::parse_imei(i).map_err(|w| Fault::invalid("imei", w))?))
        }
        (None, Some(s)) => {
            Ok(Key::Range(eir::parse_imei(s).map_err(|w| Fault::invalid("start", w))?))
        }
        (Some(_), Some(_)) => Err(Fault::invalid(
            "imei",
            "name the entry by imei or by the start of its range, not both",
        )),
        (None, None) => Err(Fault::missing("imei")),
    }
}

/// The element an invalid parameter of the JSON body stands for.
fn field_of(pointer: &str) -> &'static str {
    match pointer.trim_start_matches('/').split('/').next().unwrap_or("") {
        "imei" => "imei",
        "start" => "start",
        "end" => "end",
        "status" => "status",
        "supis" => "supi",
        "gpsis" => "gpsi",
        _ => "entry",
    }
}

/// An `entry` element as the EirImeiEntry / EirImeiRange it stands for, checked. Reading stops
/// at the first `supi` or `gpsi` past the limit, so an oversized entry costs no more than one at
/// the limit.
fn entry_from(el: &Element, limits: &ProvisioningLimits) -> Result<EirItem, Fault> {
    let mut obj = Map::new();
    let (mut supis, mut gpsis) = (Vec::new(), Vec::new());
    let max = limits.max_eir_bound_ids;
    let over = |field: &'static str| Fault::invalid(field, format!("at most {max} <{field}>s"));
    for c in &el.children {
        let text = c.text.trim();
        if c.ns != el.ns {
            return Err(Fault::invalid("entry", format!("unknown element <{}> in entry", c.name)));
        }
        match c.name.as_str() {
            "supi" if supis.len() == max => return Err(over("supi")),
            "gpsi" if gpsis.len() == max => return Err(over("gpsi")),
            "supi" => supis.push(Value::from(text)),
            "gpsi" => gpsis.push(Value::from(text)),
            name @ ("imei" | "start" | "end" | "status") => {
                if obj.insert(name.to_owned(), text.into()).is_some() {
                    return Err(Fault::invalid(field_of(name), format!("<{name}> is given twice")));
                }
            }
            other => {
                return Err(Fault::invalid("entry", format!("unknown element <{other}> in entry")))
            }
        }
    }
    if !supis.is_empty() {
        obj.insert("supis".into(), Value::Array(supis));
    }
    if !gpsis.is_empty() {
        obj.insert("gpsis".into(), Value::Array(gpsis));
    }
    if !obj.contains_key("status") {
        return Err(Fault::missing("status"));
    }
    if !obj.contains_key("imei") && !obj.contains_key("start") {
        return Err(Fault::missing("imei"));
    }
    if obj.contains_key("imei") && (obj.contains_key("start") || obj.contains_key("end")) {
        return Err(Fault::invalid("imei", "an entry is a single imei or a start..end range"));
    }
    eir_entries::parse_item(&Value::Object(obj), limits).map_err(|p| {
        // The first wrong attribute names the field; the message lists them all.
        let first = p.invalid_params.first();
        let field = first.map_or("entry", |ip| field_of(&ip.param));
        let missing = first.and_then(|ip| ip.reason.as_deref()) == Some(MISSING);
        Fault {
            code: if missing { "MANDATORY_FIELD_MISSING" } else { "INVALID_FIELD" },
            ..Fault::invalid(field, crate::provisioning::describe(&p))
        }
    })
}

fn binding_xml(out: &mut String, status: EquipmentStatus, b: &Binding) {
    let _ = write!(out, "<udr:status>{}</udr:status>", status.as_str());
    for s in &b.supis {
        let _ = write!(out, "<udr:supi>{}</udr:supi>", escape(s));
    }
    for g in &b.gpsis {
        let _ = write!(out, "<udr:gpsi>{}</udr:gpsi>", escape(g));
    }
}

fn entry_xml(item: &EirItem) -> String {
    let mut out = String::with_capacity(160);
    out.push_str("<udr:entry>");
    match item {
        EirItem::Imei(e) => {
            let _ = write!(out, "<udr:imei>{}</udr:imei>", format_imei(e.imei));
            binding_xml(&mut out, e.status, &e.binding);
        }
        EirItem::Range(r) => {
            let _ = write!(
                out,
                "<udr:start>{}</udr:start><udr:end>{}</udr:end>",
                format_imei(r.start),
                format_imei(r.end)
            );
            binding_xml(&mut out, r.status, &r.binding);
        }
    }
    out.push_str("</udr:entry>");
    out
}

fn no_entry(k: Key) -> Fault {
    match k {
        Key::Imei(i) => Fault::not_found(format!("IMEI {} is not listed", format_imei(i))),
        Key::Range(s) => Fault::not_found(format!("no IMEI range starts at {}", format_imei(s))),
    }
}

async fn get(udr: &Arc<Udr>, op: &Element) -> Result<String, Fault> {
    let k = key(op)?;
    let item = match k {
        Key::Imei(i) => {
            udr.eir.get_imei(i).await.map_err(|e| Fault::server(&e))?.map(EirItem::Imei)
        }
        Key::Range(s) => {
            udr.eir.get_range(s).await.map_err(|e| Fault::server(&e))?.map(EirItem::Range)
        }
    };
    item.map(|i| entry_xml(&i)).ok_or_else(|| no_entry(k))
}

async fn write(udr: &Arc<Udr>, op: &Element, create: bool) -> Result<String, Fault> {
    let el = op.child("entry").ok_or_else(|| Fault::missing("entry"))?;
    let item = entry_from(el, &udr.config.provisioning)?;
    let server = |e: store::Error| Fault::server(&e);
    match &item {
        EirItem::Imei(e) => {
            let done = if create {
                udr.eir.create_imei(e.clone()).await.map_err(server)?
            } else {
                udr.eir.update_imei(e.clone()).await.map_err(server)?
            };
            match (done, create) {
                (true, _) => {}
                (false, true) => {
                    return Err(Fault::already_exists(format!(
                        "IMEI {} is listed already",
                        format_imei(e.imei)
                    )))
                }
                (false, false) => return Err(no_entry(Key::Imei(e.imei))),
            }
        }
        EirItem::Range(r) => {
            let done = if create {
                udr.eir.create_range(r.clone()).await.map_err(server)?
            } else {
                udr.eir.update_range(r.clone()).await.map_err(server)?
            };
            match done {
                Ok(()) => {}
                Err(RangeConflict::NotFound) => return Err(no_entry(Key::Range(r.start))),
                Err(RangeConflict::Exists) => {
                    return Err(Fault::already_exists(format!(
                        "a range starting at {} exists already",
                        format_imei(r.start)
                    )))
                }
                Err(RangeConflict::Overlaps(s, e)) => {
                    return Err(Fault {
                        field: Some("end"),
                        ..Fault::already_exists(format!(
                            "the range overlaps the range {}..{}",
                            format_imei(s),
                            format_imei(e)
                        ))
                    })
                }
            }
        }
    }
    Ok(entry_xml(&item))
}

async fn delete(udr: &Arc<Udr>, op: &Element) -> Result<String, Fault> {
    let k = key(op)?;
    let deleted = match k {
        Key::Imei(i) => udr.eir.delete_imei(i).await,
        Key::Range(s) => udr.eir.delete_range(s).await,
    }
    .map_err(|e| Fault::server(&e))?;
    if deleted {
        Ok(String::new())
    } else {
        Err(no_entry(k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sh::xml;

    fn entry(inner: &str) -> Result<EirItem, Fault> {
        let root = xml::parse(&format!("<entry>{inner}</entry>")).unwrap();
        entry_from(&root, &ProvisioningLimits::default())
    }

    #[test]
    fn entries_read_as_the_rest_bodies_they_stand_for() {
        let Ok(EirItem::Imei(e)) = entry(
            "<imei>352099001761481</imei><status>BLACKLISTED</status>\
             <supi>imsi-001010000000001</supi><supi>imsi-001010000000002</supi>",
        ) else {
            panic!("an IMEI entry")
        };
        assert_eq!(e.imei, 35209900176148);
        assert_eq!(e.binding.supis.len(), 2);
        let xml = entry_xml(&EirItem::Imei(e));
        assert!(xml.starts_with("<udr:entry><udr:imei>35209900176148</udr:imei>"), "{xml}");
        let Ok(EirItem::Range(r)) = entry(
            "<start>35209900000000</start><end>35209900999999</end><status>GREYLISTED</status>",
        ) else {
            panic!("a range")
        };
        assert_eq!(r.end, 35209900999999);

        let f = entry("<imei>352099001761482</imei><status>BLACKLISTED</status>").unwrap_err();
        assert_eq!((f.code, f.field), ("INVALID_FIELD", Some("imei")));
        let f = entry("<imei>35209900176148</imei><status>OK</status>").unwrap_err();
        assert_eq!(f.field, Some("status"));
        let f = entry("<imei>35209900176148</imei><status>BLACKLISTED</status><supi>x</supi>")
            .unwrap_err();
        assert_eq!(f.field, Some("supi"));
        let f = entry(
            "<start>35209900000009</start><end>35209900000001</end><status>GREYLISTED</status>",
        )
        .unwrap_err();
        assert_eq!(f.field, Some("end"));
        let f = entry("<start>35209900000009</start><status>GREYLISTED</status>").unwrap_err();
        assert_eq!((f.code, f.field), ("MANDATORY_FIELD_MISSING", Some("end")));
        let f = entry("<imei>35209900176148</imei>").unwrap_err();
        assert_eq!((f.code, f.field), ("MANDATORY_FIELD_MISSING", Some("status")));
        let f =
            entry("<imei>35209900176148</imei><status>BLACKLISTED</status><colour/>").unwrap_err();
        assert_eq!(f.field, Some("entry"));
        let supis = "<supi>imsi-001010000000001</supi>".repeat(101);
        let f = entry(&format!("<imei>35209900176148</imei><status>BLACKLISTED</status>{supis}"))
            .unwrap_err();
        assert_eq!((f.code, f.field), ("INVALID_FIELD", Some("supi")));
    }
}
