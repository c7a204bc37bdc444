//! Policy data over SOAP (`GetPolicyProfile`, `CreatePolicyProfile`, `UpdatePolicyProfile`,
//! `DeletePolicyProfile`): a UE's whole policy profile, the same PolicyDataProfile as
//! `/udr-prov/v1/policy-data/ues/{ueId}` ([`crate::policy_data::provisioning`]).
//!
//! ```xml
//! <udr:ueId>imsi-001010000000001</udr:ueId>
//! <udr:profile>
//!   <udr:amData>{"subscCats":["gold"]}</udr:amData>                 0..1 AmPolicyData
//!   <udr:uePolicySet>{...}</udr:uePolicySet>                         0..1 UePolicySet
//!   <udr:smData>{"smPolicySnssaiData":{...}}</udr:smData>           0..1 SmPolicyData
//!   <udr:umData>{"u1":{"limitId":"u1"}}</udr:umData>                 0..1 usageMonId -> UsageMonData
//!   <udr:operatorSpecificData>{...}</udr:operatorSpecificData>       0..1
//! </udr:profile>
//! ```
//!
//! TS 29.519 defines these data sets in JSON only (OpenAPI), with maps keyed by S-NSSAI, DNN or
//! usage monitoring id that no XML schema describes; so each data set travels as its JSON
//! document, the text of its element, and is checked by the REST provisioning's own checks (a
//! wrong attribute is a fault naming the data set's element, its JSON pointer in the message).
//!
//! Create refuses a UE that has policy data (ALREADY_EXISTS), Update and Delete one that has
//! none (NOT_FOUND). Update replaces the whole profile: data sets absent from it are removed.
//! Every change is the change of the N36 resources it touches, so their subscribers are
//! notified exactly as after the REST provisioning.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Arc;

use http::StatusCode;
use nf::NfError;
use sbi::ProblemDetails;
use serde_json::{Map, Value};

use super::adapter::{required, AdapterFuture, Fault, ProfileAdapter, Verb};
use crate::context::Udr;
use crate::policy_data::etag::Conditions;
use crate::policy_data::ids;
use crate::policy_data::provisioning::{profile_json, profile_parts};
use crate::policy_data::store::Refusal;
use crate::sh::xml::{escape, Element};

/// The data sets of a PolicyDataProfile, in the order answers list them.
const SECTIONS: [&str; 5] = ["amData", "uePolicySet", "smData", "umData", "operatorSpecificData"];

pub struct PolicyAdapter;

impl ProfileAdapter for PolicyAdapter {
    fn kind(&self) -> &'static str {
        "PolicyProfile"
    }

    fn fields(&self, verb: Verb) -> &'static [&'static str] {
        match verb {
            Verb::Get | Verb::Delete => &["ueId"],
            Verb::Create | Verb::Update => &["ueId", "profile"],
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
                Verb::Create => write(udr, op, Some(true)).await,
                Verb::Update => write(udr, op, Some(false)).await,
                Verb::Delete => write(udr, op, None).await,
            }
        })
    }
}

fn ue_id(op: &Element) -> Result<String, Fault> {
    let ue = required(op, "ueId")?;
    ids::check_ue_id(ue).map_err(|why| Fault::invalid("ueId", why))?;
    Ok(ue.to_owned())
}

/// The section a JSON pointer of a PolicyDataProfile falls in.
fn field_of(pointer: &str) -> &'static str {
    let first = pointer.trim_start_matches('/').split('/').next().unwrap_or("");
    SECTIONS.into_iter().find(|s| *s == first).unwrap_or("profile")
}

fn invalid(p: &ProblemDetails) -> Fault {
    let field = p.invalid_params.first().map_or("profile", |ip| field_of(&ip.param));
    Fault::invalid(field, crate::provisioning::describe(p))
}

/// A `profile` element as the PolicyDataProfile JSON it stands for.
fn profile_from(el: &Element) -> Result<Value, Fault> {
    let mut obj = Map::new();
    for c in &el.children {
        let section = SECTIONS.into_iter().find(|s| *s == c.name).filter(|_| c.ns == el.ns);
        let Some(section) = section else {
            return Err(Fault::invalid(
                "profile",
                format!("unknown element <{}> in profile (one of {})", c.name, SECTIONS.join(", ")),
            ));
        };
        let v: Value = serde_json::from_str(c.text.trim()).map_err(|e| {
            Fault::invalid(section, format!("{section} is not a JSON document: {e}"))
        })?;
        if obj.insert(section.to_owned(), v).is_some() {
            return Err(Fault::invalid(section, format!("<{section}> is given twice")));
        }
    }
    Ok(Value::Object(obj))
}

/// The `profile` element of a stored PolicyDataProfile (its JSON bytes).
fn profile_xml(json: &[u8]) -> Result<String, Fault> {
    let doc: Map<String, Value> = serde_json::from_slice(json).map_err(|e| {
        Fault::new(super::FaultCode::Server, "STORE_FAILURE", format!("stored policy data: {e}"))
    })?;
    let mut out = String::with_capacity(json.len() + 128);
    out.push_str("<udr:profile>");
    for s in SECTIONS {
        if let Some(v) = doc.get(s) {
            let _ = write!(out, "<udr:{s}>{}</udr:{s}>", escape(&v.to_string()));
        }
    }
    out.push_str("</udr:profile>");
    Ok(out)
}

async fn get(udr: &Arc<Udr>, op: &Element) -> Result<String, Fault> {
    let ue = ue_id(op)?;
    let rows = udr.policy.store.get_ue(ue.clone()).await.map_err(|e| Fault::server(&e))?;
    if rows.is_empty() {
        return Err(no_policy_data(&ue));
    }
    let json = profile_json(rows.iter().map(|(p, r)| (p.as_str(), r.json.as_slice())));
    let mut out = format!("<udr:ueId>{}</udr:ueId>", escape(&ue));
    out.push_str(&profile_xml(&json)?);
    Ok(out)
}

fn no_policy_data(ue: &str) -> Fault {
    Fault::not_found(format!("no policy data for UE {ue}"))
}

/// Create (`Some(true)`), Update (`Some(false)`) or Delete (`None`) of a UE's profile, in one
/// store job that checks the UE's current data and writes the new one.
async fn write(udr: &Arc<Udr>, op: &Element, create: Option<bool>) -> Result<String, Fault> {
    let ue = ue_id(op)?;
    let desired = match create {
        None => BTreeMap::new(),
        Some(_) => {
            let el = op.child("profile").ok_or_else(|| Fault::missing("profile"))?;
            let profile = profile_from(el)?;
            profile_parts(&ue, &profile).map_err(|p| invalid(&p))?
        }
    };
    let must_exist = create != Some(true);
    let exists = || ProblemDetails::new(StatusCode::CONFLICT, "ALREADY_EXISTS", String::new());
    let w = udr
        .policy
        .write_ue(ue.clone(), Conditions::default(), must_exist, move |current| {
            if create == Some(true) && !current.is_empty() {
                return Err(exists().into());
            }
            Ok(desired)
        })
        .await
        .map_err(|e| Fault::server(&e))?;
    let w = match w {
        Ok(w) => w,
        Err(Refusal::NoUser | Refusal::NoData) => return Err(no_policy_data(&ue)),
        Err(Refusal::Edit(NfError::Problem(p)))
            if p.status == Some(StatusCode::CONFLICT.as_u16()) =>
        {
            return Err(Fault::already_exists(format!("UE {ue} has policy data already")))
        }
        Err(Refusal::Edit(NfError::Problem(p))) => return Err(invalid(&p)),
        // This edit only decides; any other outcome would be a fault of ours.
        Err(Refusal::Edit(e)) => {
            return Err(Fault::new(super::FaultCode::Server, "STORE_FAILURE", e.to_string()))
        }
        // SOAP carries no precondition, so the store cannot refuse one: that would be our bug.
        Err(Refusal::Precondition(_)) => {
            return Err(Fault::new(
                super::FaultCode::Server,
                "STORE_FAILURE",
                "the store refused a precondition this request did not set",
            ))
        }
    };
    udr.policy.recorded(w.notified);
    if w.parts.is_empty() {
        return Ok(String::new());
    }
    let json = profile_json(w.parts.iter().map(|(p, j)| (p.as_str(), j.as_slice())));
    let mut out = format!("<udr:ueId>{}</udr:ueId>", escape(&ue));
    out.push_str(&profile_xml(&json)?);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sh::xml;

    fn profile(inner: &str) -> Result<Value, Fault> {
        profile_from(&xml::parse(&format!("<profile>{inner}</profile>")).unwrap())
    }

    #[test]
    fn sections_are_json_documents_checked_as_rest_bodies() {
        let p = profile(
            r#"<amData>{"subscCats":["gold"]}</amData><umData>{"u1":{"limitId":"u1"}}</umData>"#,
        )
        .unwrap();
        let parts = profile_parts("imsi-001010000000001", &p).unwrap();
        let json = profile_json(parts.iter().map(|(k, v)| (k.as_str(), v.as_slice())));
        let x = profile_xml(&json).unwrap();
        assert!(x.starts_with("<udr:profile><udr:amData>{&quot;subscCats&quot;"), "{x}");
        assert!(x.contains("<udr:umData>"), "{x}");

        let f = profile("<amData>{</amData>").unwrap_err();
        assert_eq!(f.field, Some("amData"));
        let f = profile("<colour>{}</colour>").unwrap_err();
        assert_eq!(f.field, Some("profile"));
        let f = profile("<amData>{}</amData><amData>{}</amData>").unwrap_err();
        assert_eq!(f.field, Some("amData"));
        let p = profile("<smData>{}</smData>").unwrap();
        let f = invalid(&profile_parts("imsi-001010000000001", &p).unwrap_err());
        assert_eq!((f.code, f.field), ("INVALID_FIELD", Some("smData")));
        assert!(f.message.contains("/smData/smPolicySnssaiData"), "{}", f.message);
    }
}
