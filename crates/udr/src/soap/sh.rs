//! Sh subscriber profiles over SOAP (`GetShProfile`, `CreateShProfile`, `UpdateShProfile`,
//! `DeleteShProfile`): the data the Diameter Sh server serves ([`crate::sh::data`]).
//!
//! ```xml
//! <udr:profile>
//!   <udr:publicIdentity>sip:alice@ims.example</udr:publicIdentity>    1..n
//!   <udr:msisdn>33600000001</udr:msisdn>                              0..n
//!   <udr:imsUserState>REGISTERED</udr:imsUserState>                   0..1 (default NOT_REGISTERED)
//!   <udr:scscfName>sip:scscf1.ims.example</udr:scscfName>             0..1
//!   <udr:repositoryData>                                              0..n
//!     <udr:serviceIndication>mmtel</udr:serviceIndication>
//!     <udr:sequenceNumber>3</udr:sequenceNumber>                      answers only
//!     <udr:serviceData>...any XML, kept verbatim...</udr:serviceData>
//!   </udr:repositoryData>
//! </udr:profile>
//! ```
//!
//! Get and Delete name the profile by one `publicIdentity` or `msisdn`; Create takes a
//! `profile` (every identity must be new: ALREADY_EXISTS); Update takes the key and the whole new
//! `profile` (NOT_FOUND for an unknown key). Provisioning owns the sequence numbers it writes:
//! new repository data gets 0, changed data the stored number + 1, so an AS's next PUR must
//! follow on. After an Update, subscribed ASs get a PNR for what changed (repository data,
//! identities, MSISDNs, IMS user state, S-CSCF name).

use std::fmt::Write;
use std::sync::Arc;

use super::adapter::{known_children, AdapterFuture, Fault, ProfileAdapter, Verb};
use crate::config::ProvisioningLimits;
use crate::context::Udr;
use crate::sh::data::{self, ims_user_state, RepositoryData, ShProfile, UserId};
use crate::sh::pnr;
use crate::sh::xml::{escape, Element};

pub struct ShAdapter;

impl ProfileAdapter for ShAdapter {
    fn kind(&self) -> &'static str {
        "ShProfile"
    }

    fn fields(&self, verb: Verb) -> &'static [&'static str] {
        match verb {
            Verb::Get | Verb::Delete => &["publicIdentity", "msisdn"],
            Verb::Create => &["profile"],
            Verb::Update => &["publicIdentity", "msisdn", "profile"],
        }
    }

    fn call<'a>(
        &'a self,
        udr: &'a Arc<Udr>,
        verb: Verb,
        op: &'a Element,
        src: &'a str,
    ) -> AdapterFuture<'a> {
        Box::pin(async move {
            match verb {
                Verb::Get => get(udr, op).await,
                Verb::Create => create(udr, op, src).await,
                Verb::Update => update(udr, op, src).await,
                Verb::Delete => delete(udr, op).await,
            }
        })
    }
}

/// The profile key of a Get, Update or Delete: one `publicIdentity` or `msisdn`.
fn key(op: &Element) -> Result<UserId, Fault> {
    let public = op.child_text("publicIdentity").filter(|s| !s.is_empty());
    let msisdn = op.child_text("msisdn").filter(|s| !s.is_empty());
    match (public, msisdn) {
        (Some(p), None) => {
            data::check_public_identity(p).map_err(|e| Fault::invalid(e.field, e.reason))?;
            Ok(UserId::Public(p.to_owned()))
        }
        (None, Some(m)) => {
            data::check_msisdn(m).map_err(|e| Fault::invalid(e.field, e.reason))?;
            Ok(UserId::Msisdn(m.to_owned()))
        }
        (Some(_), Some(_)) => Err(Fault::invalid(
            "publicIdentity",
            "name the profile by publicIdentity or msisdn, not both",
        )),
        (None, None) => Err(Fault::missing("publicIdentity")),
    }
}

fn parse_state(s: &str) -> Result<u8, Fault> {
    data::parse_ims_user_state(s)
        .ok_or_else(|| Fault::invalid("imsUserState", data::ims_user_state_refused(s)))
}

/// A `profile` element as a checked [`ShProfile`]. Reading stops at the first identity or byte
/// past the limits, so an oversized profile costs no more than one at the limit.
fn profile_from(
    el: &Element,
    src: &str,
    max_data: usize,
    limits: &ProvisioningLimits,
) -> Result<ShProfile, Fault> {
    let mut p = ShProfile::default();
    let (mut ids, mut bytes) = (0usize, 0usize);
    for c in &el.children {
        let text = c.text.trim();
        if c.ns != el.ns {
            return Err(Fault::invalid(
                "profile",
                format!("unknown element <{}> in profile", c.name),
            ));
        }
        if matches!(c.name.as_str(), "publicIdentity" | "msisdn") {
            ids += 1;
            if ids > limits.max_sh_identities {
                let max = limits.max_sh_identities;
                return Err(Fault::invalid(
                    "publicIdentity",
                    format!("a profile has at most {max} identities (publicIdentity and msisdn)"),
                ));
            }
        }
        bytes += c.content.len();
        if bytes > limits.max_sh_profile_bytes {
            let max = limits.max_sh_profile_bytes;
            return Err(Fault::invalid("profile", format!("a profile holds at most {max} bytes")));
        }
        match c.name.as_str() {
            "publicIdentity" => p.public_identities.push(text.to_owned()),
            "msisdn" => p.msisdns.push(text.to_owned()),
            "imsUserState" => p.ims_user_state = parse_state(text)?,
            "scscfName" => p.scscf_name = Some(text.to_owned()).filter(|s| !s.is_empty()),
            "repositoryData" => {
                known_children(
                    c,
                    &["serviceIndication", "sequenceNumber", "serviceData"],
                    "repositoryData",
                )?;
                let si = c
                    .child_text("serviceIndication")
                    .filter(|s| !s.is_empty())
                    .ok_or_else(|| Fault::missing("serviceIndication"))?;
                let sd = c.child("serviceData").ok_or_else(|| Fault::missing("serviceData"))?;
                let raw = src[sd.content.clone()].trim();
                data::check_service_data(si, raw, max_data)
                    .map_err(|e| Fault::invalid(e.field, e.reason))?;
                p.repository.push(RepositoryData {
                    service_indication: si.to_owned(),
                    sequence_number: 0,
                    service_data: raw.to_owned(),
                });
            }
            other => {
                return Err(Fault::invalid(
                    "profile",
                    format!("unknown element <{other}> in profile"),
                ))
            }
        }
    }
    p.repository.sort_by(|a, b| a.service_indication.cmp(&b.service_indication));
    p.check_size(limits.max_sh_identities, limits.max_sh_profile_bytes)
        .map_err(|e| Fault::invalid(e.field, e.reason))?;
    p.check().map_err(|e| Fault::invalid(e.field, e.reason))?;
    Ok(p)
}

fn profile_xml(p: &ShProfile) -> String {
    let mut out = String::with_capacity(
        256 + p.repository.iter().map(|r| r.service_data.len() + 128).sum::<usize>(),
    );
    out.push_str("<udr:profile>");
    for id in &p.public_identities {
        let _ = write!(out, "<udr:publicIdentity>{}</udr:publicIdentity>", escape(id));
    }
    for m in &p.msisdns {
        let _ = write!(out, "<udr:msisdn>{}</udr:msisdn>", escape(m));
    }
    let state = ims_user_state::NAMES[usize::from(p.ims_user_state.min(3))];
    let _ = write!(out, "<udr:imsUserState>{state}</udr:imsUserState>");
    if let Some(s) = &p.scscf_name {
        let _ = write!(out, "<udr:scscfName>{}</udr:scscfName>", escape(s));
    }
    for r in &p.repository {
        let _ = write!(
            out,
            "<udr:repositoryData><udr:serviceIndication>{}</udr:serviceIndication>\
             <udr:sequenceNumber>{}</udr:sequenceNumber><udr:serviceData>{}</udr:serviceData>\
             </udr:repositoryData>",
            escape(&r.service_indication),
            r.sequence_number,
            r.service_data
        );
    }
    out.push_str("</udr:profile>");
    out
}

async fn load(udr: &Arc<Udr>, user: UserId) -> Result<Option<ShProfile>, Fault> {
    udr.sh
        .store
        .read(move |tx| match tx.resolve(&user)? {
            Some(pid) => tx.load(pid, None),
            None => Ok(None),
        })
        .await
        .map_err(|e| Fault::server(&e))
}

async fn get(udr: &Arc<Udr>, op: &Element) -> Result<String, Fault> {
    let user = key(op)?;
    let p = load(udr, user.clone())
        .await?
        .ok_or_else(|| Fault::not_found(format!("no Sh profile for {}", user.value())))?;
    Ok(profile_xml(&p))
}

async fn create(udr: &Arc<Udr>, op: &Element, src: &str) -> Result<String, Fault> {
    let el = op.child("profile").ok_or_else(|| Fault::missing("profile"))?;
    let p =
        profile_from(el, src, udr.sh.config.max_repository_data_bytes, &udr.config.provisioning)?;
    let stored = p.clone();
    match udr.sh.store.write(move |tx| tx.create(&stored)).await {
        Ok(_) => Ok(profile_xml(&p)),
        Err(store::Error::AlreadyExists) => {
            Err(Fault::already_exists("an identity of this profile belongs to a profile already"))
        }
        Err(e) => Err(Fault::server(&e)),
    }
}

async fn update(udr: &Arc<Udr>, op: &Element, src: &str) -> Result<String, Fault> {
    let user = key(op)?;
    let el = op.child("profile").ok_or_else(|| Fault::missing("profile"))?;
    let p =
        profile_from(el, src, udr.sh.config.max_repository_data_bytes, &udr.config.provisioning)?;
    let new = p.clone();
    let k = user.clone();
    let (pid, changes) = match udr.sh.store.write(move |tx| tx.replace(&k, &new)).await {
        Ok(x) => x,
        Err(store::Error::NotFound) => {
            return Err(Fault::not_found(format!("no Sh profile for {}", user.value())))
        }
        Err(store::Error::AlreadyExists) => {
            return Err(Fault::already_exists("a new identity belongs to another profile"))
        }
        Err(e) => return Err(Fault::server(&e)),
    };
    pnr::notify(udr, pid, &changes, Some(&p), None);
    let first = UserId::Public(p.public_identities[0].clone());
    let stored =
        load(udr, first).await?.ok_or_else(|| Fault::not_found("profile deleted meanwhile"))?;
    Ok(profile_xml(&stored))
}

async fn delete(udr: &Arc<Udr>, op: &Element) -> Result<String, Fault> {
    let user = key(op)?;
    let (k, u) = (user.clone(), udr.clone());
    let deleted = udr
        .sh
        .store
        .write(move |tx| {
            let pid = tx.delete(&k)?;
            if let Some(pid) = pid {
                u.sh.subscriptions.remove_profile(pid);
            }
            Ok(pid)
        })
        .await;
    match deleted {
        Ok(Some(_)) => Ok(String::new()),
        Ok(None) => Err(Fault::not_found(format!("no Sh profile for {}", user.value()))),
        Err(e) => Err(Fault::server(&e)),
    }
}
