//! Sh-Pull: User-Data-Request / User-Data-Answer (TS 29.328 §6.1.1, TS 29.329 §6.1.1).
//!
//! In order: the AS permission list (5101), every Data-Reference one this UDR serves (else 5102
//! DIAMETER_ERROR_USER_DATA_CANNOT_BE_READ), Service-Indication present for RepositoryData (5005),
//! the user known (5001; 5002 when Public-Identity and MSISDN name different users). The answer
//! carries one Sh-Data with the parts asked for; repository data of a Service-Indication that
//! holds none is simply absent (the AS then creates it with Sequence-Number 0).

use std::sync::Arc;

use diameter::dictionary::sh::{self as dict, data_reference as dr};
use diameter::Message;

use super::config::Procedure;
use super::data::{ims_user_state, ShProfile};
use super::sh_data_xml::ShData;
use super::{
    check_permission, experimental, missing_service_indication, resolve_all, service_indications,
    store_failed, success, unresolved, user_identity, Resolved,
};
use crate::context::Udr;

/// The data references Sh-Pull and Sh-Subs-Notif serve.
pub const SUPPORTED: [u32; 5] =
    [dr::REPOSITORY_DATA, dr::IMS_PUBLIC_IDENTITY, dr::IMS_USER_STATE, dr::S_CSCF_NAME, dr::MSISDN];

/// Largest User-Data answered: an AVP's length field has 24 bits; leave room for the rest.
const MAX_USER_DATA: usize = (1 << 24) - 64 * 1024;

/// Identity-Set values (TS 29.329 §6.3.10).
const REGISTERED_IDENTITIES: u32 = 1;

pub async fn user_data(udr: &Arc<Udr>, req: Message) -> Message {
    let sh = &udr.sh;
    if let Err(a) = check_permission(udr, &req, Procedure::Pull) {
        return a;
    }
    let refs = req.data_references();
    if refs.iter().any(|r| !SUPPORTED.contains(r)) {
        return experimental(
            sh,
            &req,
            dict::experimental_result::DIAMETER_ERROR_USER_DATA_CANNOT_BE_READ,
        );
    }
    let services = service_indications(&req);
    let wants_repo = refs.contains(&dr::REPOSITORY_DATA);
    if wants_repo && services.is_empty() {
        return missing_service_indication(sh, &req);
    }
    let ids = match user_identity(sh, &req) {
        Ok(ids) => ids,
        Err(a) => return a,
    };
    let filter = services.clone();
    let read = udr
        .sh
        .store
        .read(move |tx| match resolve_all(tx, &ids)? {
            Resolved::Found(pid) => Ok((Resolved::Found(pid), tx.load(pid, Some(&filter))?)),
            other => Ok((other, None)),
        })
        .await;
    let profile = match read {
        Ok((Resolved::Found(_), Some(p))) => p,
        // An identity without its profile row (never written so): as for an unknown user.
        Ok((Resolved::Found(_), None)) => return unresolved(sh, &req, &Resolved::Unknown),
        Ok((r, _)) => return unresolved(sh, &req, &r),
        Err(e) => return store_failed(sh, &req, &e),
    };
    let identity_sets = req.get_all_u32(&dict::IDENTITY_SET);
    let doc = sh_data_for(&profile, &refs, &services, &identity_sets).to_xml();
    if doc.len() > MAX_USER_DATA {
        // More than one AVP can carry (24-bit length): the answer could not even be encoded.
        return experimental(sh, &req, super::pur::DIAMETER_ERROR_TOO_MUCH_DATA);
    }
    success(sh, &req).avp(dict::USER_DATA.bytes(doc.into_bytes()))
}

/// The Sh-Data holding the parts of `p` that `refs` name (RepositoryData of `services`).
pub fn sh_data_for<'a>(
    p: &'a ShProfile,
    refs: &[u32],
    services: &[String],
    identity_sets: &[u32],
) -> ShData<'a> {
    let mut d = ShData::default();
    if refs.contains(&dr::IMS_PUBLIC_IDENTITY) {
        // ALL, IMPLICIT and ALIAS identities are every identity of the profile (one implicit
        // set); REGISTERED ones only while the user is registered.
        let only_registered =
            !identity_sets.is_empty() && identity_sets.iter().all(|s| *s == REGISTERED_IDENTITIES);
        if !only_registered || p.ims_user_state == ims_user_state::REGISTERED {
            d.public_identities = p.public_identities.iter().map(String::as_str).collect();
        }
    }
    if refs.contains(&dr::MSISDN) {
        d.msisdns = p.msisdns.iter().map(String::as_str).collect();
    }
    if refs.contains(&dr::REPOSITORY_DATA) {
        for si in services {
            if let Some(r) = p.repository.iter().find(|r| &r.service_indication == si) {
                if !d.repository.iter().any(|x| x.0 == si) {
                    d.repository.push((
                        &r.service_indication,
                        r.sequence_number,
                        Some(&r.service_data),
                    ));
                }
            }
        }
    }
    if refs.contains(&dr::S_CSCF_NAME) {
        d.scscf_name = p.scscf_name.as_deref();
    }
    if refs.contains(&dr::IMS_USER_STATE) {
        d.ims_user_state = Some(p.ims_user_state);
    }
    d
}
