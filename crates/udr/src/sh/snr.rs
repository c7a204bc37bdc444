//! Sh-Subs-Notif: Subscribe-Notifications-Request / Answer (TS 29.328 §6.1.3, TS 29.329
//! §6.1.5).
//!
//! In order: the AS permission list (5101); every Data-Reference one this UDR can notify (else
//! 5104 DIAMETER_ERROR_USER_DATA_CANNOT_BE_NOTIFIED); Service-Indication present for
//! RepositoryData (5005); Subs-Req-Type and Expiry-Time sensible (5004 naming the AVP); the user
//! known (5001 / 5002). Subscribe: RepositoryData of a Service-Indication the user has no data
//! for is 5106 DIAMETER_ERROR_SUBS_DATA_ABSENT and nothing is subscribed; beyond
//! `max_subscriptions` 5012. One subscription per (user, AS Origin-Host, Data-Reference,
//! Service-Indication), replaced by a new SNR; persisted and indexed in memory; answered after
//! COMMIT with the granted Expiry-Time (capped by `max_subscription_secs`) and, with
//! Send-Data-Indication USER_DATA_REQUESTED, the current data as User-Data. Unsubscribe removes
//! the named subscriptions of this AS (absent ones are no error).

use std::sync::Arc;

use diameter::dictionary::sh::{self as dict, data_reference as dr, experimental_result as er};
use diameter::{result_code as rc, Message, Time};

use super::config::Procedure;
use super::data::{self, StoredSubscription};
use super::udr::{sh_data_for, SUPPORTED};
use super::{
    base_error, check_permission, experimental, missing_service_indication, resolve_all,
    service_indications, store_failed, success, unix_now, unresolved, user_identity, Resolved,
};
use crate::context::Udr;

const SUBSCRIBE: u32 = 0;
const UNSUBSCRIBE: u32 = 1;
const USER_DATA_REQUESTED: u32 = 1;

enum Done {
    Unresolved(Resolved),
    Absent,
    Subscribed(Option<data::ShProfile>),
    Unsubscribed,
}

pub async fn subscribe_notifications(udr: &Arc<Udr>, req: Message) -> Message {
    let sh = &udr.sh;
    if let Err(a) = check_permission(udr, &req, Procedure::SubsNotif) {
        return a;
    }
    let refs = req.data_references();
    if refs.iter().any(|r| !SUPPORTED.contains(r)) {
        return experimental(sh, &req, er::DIAMETER_ERROR_USER_DATA_CANNOT_BE_NOTIFIED);
    }
    let services = service_indications(&req);
    if refs.contains(&dr::REPOSITORY_DATA) && services.is_empty() {
        return missing_service_indication(sh, &req);
    }
    let kind = req.subs_req_type().unwrap_or(u32::MAX);
    if kind != SUBSCRIBE && kind != UNSUBSCRIBE {
        let failed = req.find(&dict::SUBS_REQ_TYPE).cloned();
        return base_error(sh, &req, rc::DIAMETER_INVALID_AVP_VALUE, failed);
    }
    let now = unix_now();
    let mut expiry = req.get_time(&dict::EXPIRY_TIME).map_or(0, Time::unix_secs);
    if kind == SUBSCRIBE && expiry != 0 && expiry <= now {
        let failed = req.find(&dict::EXPIRY_TIME).cloned();
        return base_error(sh, &req, rc::DIAMETER_INVALID_AVP_VALUE, failed);
    }
    let cap = sh.config.max_subscription_secs;
    if cap > 0 && (expiry == 0 || expiry > now + cap) {
        expiry = now + cap;
    }
    let ids = match user_identity(sh, &req) {
        Ok(ids) => ids,
        Err(a) => return a,
    };
    let as_host = req.origin_host().unwrap_or_default().to_owned();
    let as_realm = req.origin_realm().unwrap_or_default().to_owned();
    // The PNR names the user as the AS did, by Public-Identity when it gave one.
    let user = ids[0].clone();
    let keys: Vec<(u32, String)> = refs
        .iter()
        .flat_map(|r| {
            if *r == dr::REPOSITORY_DATA {
                services.iter().map(|s| (*r, s.clone())).collect::<Vec<_>>()
            } else {
                vec![(*r, String::new())]
            }
        })
        .collect();
    let one_time = req.find(&dict::ONE_TIME_NOTIFICATION).is_some();
    let send_data = req.get_u32(&dict::SEND_DATA_INDICATION) == Some(USER_DATA_REQUESTED);
    let max = sh.config.max_subscriptions;
    let udr2 = udr.clone();
    let done = udr
        .sh
        .store
        .write(move |tx| {
            let pid = match resolve_all(tx, &ids)? {
                Resolved::Found(pid) => pid,
                other => return Ok(Done::Unresolved(other)),
            };
            // The index changes here, on the writer thread, so it follows the order of the
            // store's writes even for concurrent SNRs of one AS.
            if kind == UNSUBSCRIBE {
                for (r, si) in &keys {
                    tx.delete_subscription(pid, &as_host, *r, si)?;
                    udr2.sh.subscriptions.remove(pid, &as_host, *r, si);
                }
                return Ok(Done::Unsubscribed);
            }
            let profile = tx.load(pid, None)?.ok_or(store::Error::NotFound)?;
            let absent = keys.iter().any(|(r, si)| {
                *r == dr::REPOSITORY_DATA
                    && !profile.repository.iter().any(|x| &x.service_indication == si)
            });
            if absent {
                return Ok(Done::Absent);
            }
            let subs: Vec<StoredSubscription> = keys
                .iter()
                .map(|(r, si)| StoredSubscription {
                    profile_id: pid,
                    as_host: as_host.clone(),
                    as_realm: as_realm.clone(),
                    data_reference: *r,
                    service_indication: si.clone(),
                    user: user.clone(),
                    expiry,
                    one_time,
                })
                .collect();
            if udr2.sh.subscriptions.len() + udr2.sh.subscriptions.count_new(&subs) > max {
                return Err(store::Error::InvalidArgument("subscription limit".into()));
            }
            for s in &subs {
                tx.put_subscription(s)?;
            }
            for s in subs {
                udr2.sh.subscriptions.insert(s);
            }
            Ok(Done::Subscribed(send_data.then_some(profile)))
        })
        .await;
    match done {
        Ok(Done::Subscribed(profile)) => {
            let mut a = success(sh, &req);
            if let Some(p) = profile {
                let doc = sh_data_for(&p, &refs, &services, &[]).to_xml();
                a.push(dict::USER_DATA.bytes(doc.into_bytes()));
            }
            if expiry != 0 {
                a.push(dict::EXPIRY_TIME.time(Time::from_unix_secs(expiry)));
            }
            a
        }
        Ok(Done::Unsubscribed) => success(sh, &req),
        Ok(Done::Absent) => experimental(sh, &req, er::DIAMETER_ERROR_SUBS_DATA_ABSENT),
        Ok(Done::Unresolved(r)) => unresolved(sh, &req, &r),
        Err(store::Error::InvalidArgument(_)) => {
            tracing::warn!(max, "Sh subscription limit reached");
            base_error(sh, &req, rc::DIAMETER_UNABLE_TO_COMPLY, None)
        }
        Err(e) => store_failed(sh, &req, &e),
    }
}
