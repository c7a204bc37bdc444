//! SLF entries over SOAP (`GetSlfEntry`, `CreateSlfEntry`, `UpdateSlfEntry`, `DeleteSlfEntry`):
//! the same subscriber-to-NF-group map the REST provisioning and Nudr_GroupIDmap use
//! ([`crate::slf`]).
//!
//! ```xml
//! <udr:CreateSlfEntry>
//!   <udr:entry>
//!     <udr:subscriberId>imsi-001010000000001</udr:subscriberId>   1..n
//!     <udr:group><udr:nfType>UDM</udr:nfType><udr:groupId>udm-1</udr:groupId></udr:group>  1..n
//!   </udr:entry>
//! </udr:CreateSlfEntry>
//! ```
//!
//! Create refuses an identity that exists (ALREADY_EXISTS), Update one that does not (NOT_FOUND);
//! either writes all identities or none (one store job whose savepoint rolls back). Get and
//! Delete take `subscriberId`s; Delete answers how many existed (NOT_FOUND when none did).

use std::fmt::Write;
use std::sync::Arc;

use super::adapter::{known_children, required, AdapterFuture, Fault, ProfileAdapter, Verb};
use crate::context::Udr;
use crate::sh::xml::{escape, Element};
use crate::slf::{self, Entry, Expect, Groups, Invalid};

pub struct SlfAdapter;

impl ProfileAdapter for SlfAdapter {
    fn kind(&self) -> &'static str {
        "SlfEntry"
    }

    fn fields(&self, verb: Verb) -> &'static [&'static str] {
        match verb {
            Verb::Get | Verb::Delete => &["subscriberId"],
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
                Verb::Create => put(udr, op, true).await,
                Verb::Update => put(udr, op, false).await,
                Verb::Delete => delete(udr, op).await,
            }
        })
    }
}

/// The `subscriberId`s of `el`: 1 to `max`, each valid, none twice. Reading stops past `max`,
/// so an oversized request costs no more than one at the limit.
fn subscriber_ids(el: &Element, max: usize) -> Result<Vec<String>, Fault> {
    let ids: Vec<String> =
        el.children_named("subscriberId").take(max + 1).map(|e| e.text.trim().to_owned()).collect();
    if ids.is_empty() {
        return Err(Fault::missing("subscriberId"));
    }
    if ids.len() > max {
        return Err(Fault::invalid("subscriberId", format!("at most {max} subscriberIds")));
    }
    let mut seen = rustc_hash::FxHashSet::default();
    for id in &ids {
        if let Err(Invalid::SubscriberId(why) | Invalid::Groups(why)) = slf::check_subscriber_id(id)
        {
            return Err(Fault::invalid("subscriberId", why));
        }
        if !seen.insert(id.as_str()) {
            return Err(Fault::invalid("subscriberId", format!("{id:?} is listed twice")));
        }
    }
    Ok(ids)
}

fn entry_xml(out: &mut String, id: &str, groups: &Groups) {
    let _ = write!(out, "<udr:entry><udr:subscriberId>{}</udr:subscriberId>", escape(id));
    for (t, g) in groups {
        let _ = write!(
            out,
            "<udr:group><udr:nfType>{}</udr:nfType><udr:groupId>{}</udr:groupId></udr:group>",
            escape(t),
            escape(g)
        );
    }
    out.push_str("</udr:entry>");
}

async fn get(udr: &Arc<Udr>, op: &Element) -> Result<String, Fault> {
    let ids = subscriber_ids(op, udr.config.provisioning.max_ids_per_request)?;
    let mut out = String::new();
    for id in &ids {
        let groups = udr
            .slf
            .get(id)
            .await
            .map_err(|e| Fault::server(&e))?
            .ok_or_else(|| Fault::not_found(format!("no SLF entry for {id}")))?;
        entry_xml(&mut out, id, &groups);
    }
    Ok(out)
}

async fn put(udr: &Arc<Udr>, op: &Element, create: bool) -> Result<String, Fault> {
    let entry = op.child("entry").ok_or_else(|| Fault::missing("entry"))?;
    known_children(entry, &["subscriberId", "group"], "entry")?;
    let ids = subscriber_ids(entry, udr.config.provisioning.max_slf_ids_per_entry)?;
    let mut groups = Groups::new();
    for g in entry.children_named("group") {
        known_children(g, &["nfType", "groupId"], "group")?;
        let t = required(g, "nfType")?.to_owned();
        let id = required(g, "groupId")?.to_owned();
        if groups.insert(t.clone(), id).is_some() {
            return Err(Fault::invalid("group", format!("nfType {t} is listed twice")));
        }
    }
    if groups.is_empty() {
        return Err(Fault::missing("group"));
    }
    if let Err(Invalid::Groups(why) | Invalid::SubscriberId(why)) = slf::check_groups(&groups) {
        return Err(Fault::invalid("group", why));
    }
    let entries = vec![Entry { subscriber_ids: ids.clone(), groups: groups.clone() }];
    let expect = if create { Expect::AllNew } else { Expect::NoneNew };
    let written = udr.slf.put_expecting(entries, expect).await;
    match written {
        Ok(()) => {}
        Err(store::Error::AlreadyExists) => {
            return Err(Fault::already_exists("an SLF entry exists for one of these subscriberIds"))
        }
        Err(store::Error::NotFound) => {
            return Err(Fault::not_found("no SLF entry for one of these subscriberIds"))
        }
        Err(e) => return Err(Fault::server(&e)),
    }
    let mut out = String::new();
    for id in &ids {
        entry_xml(&mut out, id, &groups);
    }
    Ok(out)
}

async fn delete(udr: &Arc<Udr>, op: &Element) -> Result<String, Fault> {
    let ids = subscriber_ids(op, udr.config.provisioning.max_ids_per_request)?;
    let n = udr.slf.delete(ids).await.map_err(|e| Fault::server(&e))?;
    if n == 0 {
        return Err(Fault::not_found("no SLF entry for these subscriberIds"));
    }
    Ok(format!("<udr:deleted>{n}</udr:deleted>"))
}
