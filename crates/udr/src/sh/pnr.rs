//! Sh-Notif: Push-Notification-Request / Answer (TS 29.328 §6.1.4, TS 29.329 §6.1.7), sent by
//! the UDR to every AS subscribed to data that changed.
//!
//! A change (a PUR, or provisioning) is matched against the in-memory subscription index of the
//! profile; each subscribed AS, except the one whose PUR made the change, gets one PNR carrying
//! the changed parts it subscribed to (RepositoryData without ServiceData when deleted), to
//! Destination-Host = its Origin-Host and Destination-Realm = its realm, naming the user by the
//! identity it subscribed with. PNRs are sent by spawned tasks after the change is committed,
//! never on the request path, at most `max_pnr_in_flight` at once (beyond that one is dropped and
//! logged). The PNR goes over the AS's live connection, or through a peer of `[[udr.sh.routes]]`
//! for its realm; when the AS is not reachable, or does not answer in `request_timeout_ms`, the
//! notification is logged and dropped, not queued: after reconnecting, an AS re-reads the data
//! with a UDR (the subscription itself stays). A PNA with DIAMETER_ERROR_NO_SUBSCRIPTION_TO_DATA
//! (5107) removes that AS's subscriptions of the user; a one-time subscription ends after its
//! first notification is answered.

use std::sync::Arc;

use diameter::builders::vendor_specific_auth_app;
use diameter::dictionary::base;
use diameter::dictionary::sh::{self as dict, data_reference as dr, experimental_result as er};
use diameter::{Message, VENDOR_3GPP};

use super::data::{ProfileChanges, ShProfile, StoredSubscription};
use super::sh_data_xml::ShData;
use super::{unix_now, user_identity_avp, NO_STATE_MAINTAINED};
use crate::context::Udr;

/// Whether `s` subscribed to something `c` changed.
fn concerns(s: &StoredSubscription, c: &ProfileChanges) -> bool {
    match s.data_reference {
        dr::REPOSITORY_DATA => {
            c.repository.iter().any(|r| r.service_indication == s.service_indication)
        }
        dr::IMS_PUBLIC_IDENTITY => c.identities,
        dr::MSISDN => c.msisdns,
        dr::IMS_USER_STATE => c.ims_user_state,
        dr::S_CSCF_NAME => c.scscf_name,
        _ => false,
    }
}

/// Notifies the ASs subscribed to what `changes` changed in profile `pid`. `profile` is the
/// profile after the change (needed for changes other than repository data); `from` the AS whose
/// own update it was.
pub fn notify(
    udr: &Arc<Udr>,
    pid: i64,
    changes: &ProfileChanges,
    profile: Option<&ShProfile>,
    from: Option<&str>,
) {
    let Some(node) = udr.sh.node() else { return };
    let subs = udr.sh.subscriptions.matching(pid, unix_now(), |s| {
        concerns(s, changes) && !from.is_some_and(|f| f.eq_ignore_ascii_case(&s.as_host))
    });
    if subs.is_empty() {
        return;
    }
    // One PNR per AS (and identity it used), with every part it subscribed to.
    let mut groups: Vec<(String, Vec<StoredSubscription>)> = Vec::new();
    for s in subs {
        let key = format!("{}\n{}", s.as_host.to_ascii_lowercase(), s.user.value());
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(s),
            None => groups.push((key, vec![s])),
        }
    }
    let cfg = &udr.sh.config;
    for (_, subs) in groups {
        let first = &subs[0];
        let doc = sh_data(&subs, changes, profile).to_xml();
        let pnr = Message::request(dict::APP_ID, dict::CMD_PUSH_NOTIFICATION)
            .session_id_avp(&node.new_session_id())
            .avp(vendor_specific_auth_app(VENDOR_3GPP, dict::APP_ID))
            .avp(base::AUTH_SESSION_STATE.enumerated(NO_STATE_MAINTAINED))
            .origin(&cfg.origin_host, &cfg.origin_realm)
            .destination(&first.as_realm, Some(&first.as_host))
            .avp(user_identity_avp(&first.user))
            .avp(dict::USER_DATA.bytes(doc.into_bytes()));
        let Ok(permit) = udr.sh.pnr_slots.clone().try_acquire_owned() else {
            tracing::warn!(to = %first.as_host, "PNR dropped: max_pnr_in_flight reached");
            continue;
        };
        let (node, udr) = (node.clone(), udr.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let first = &subs[0];
            match node.request(pnr).await {
                Ok(pna) if pna.is_success() => {
                    let once: Vec<_> = subs.iter().filter(|s| s.one_time).cloned().collect();
                    forget(&udr, once).await;
                }
                Ok(pna) => {
                    let code = pna.any_result_code();
                    tracing::info!(to = %first.as_host, ?code, "PNR refused");
                    let gone = pna
                        .experimental_result()
                        .is_some_and(|e| e.code == er::DIAMETER_ERROR_NO_SUBSCRIPTION_TO_DATA);
                    if gone {
                        forget(&udr, subs.clone()).await;
                    }
                }
                Err(e) => {
                    tracing::warn!(to = %first.as_host, error = %e, "PNR not delivered");
                }
            }
        });
    }
}

/// The Sh-Data of a PNR: the changed parts these subscriptions cover.
fn sh_data<'a>(
    subs: &[StoredSubscription],
    changes: &'a ProfileChanges,
    profile: Option<&'a ShProfile>,
) -> ShData<'a> {
    let wants = |r: u32| subs.iter().any(|s| s.data_reference == r);
    let mut d = ShData::default();
    if let Some(p) = profile {
        if changes.identities && wants(dr::IMS_PUBLIC_IDENTITY) {
            d.public_identities = p.public_identities.iter().map(String::as_str).collect();
        }
        if changes.msisdns && wants(dr::MSISDN) {
            d.msisdns = p.msisdns.iter().map(String::as_str).collect();
        }
        if changes.scscf_name && wants(dr::S_CSCF_NAME) {
            d.scscf_name = p.scscf_name.as_deref();
        }
        if changes.ims_user_state && wants(dr::IMS_USER_STATE) {
            d.ims_user_state = Some(p.ims_user_state);
        }
    }
    for r in &changes.repository {
        let subscribed = subs.iter().any(|s| {
            s.data_reference == dr::REPOSITORY_DATA && s.service_indication == r.service_indication
        });
        if subscribed {
            d.repository.push((&r.service_indication, r.sequence_number, r.data.as_deref()));
        }
    }
    d
}

/// Removes subscriptions from the store and the index.
async fn forget(udr: &Arc<Udr>, subs: Vec<StoredSubscription>) {
    if subs.is_empty() {
        return;
    }
    let u = udr.clone();
    let removed = udr
        .sh
        .store
        .write(move |tx| {
            for s in &subs {
                let (host, r, si) = (&s.as_host, s.data_reference, &s.service_indication);
                tx.delete_subscription(s.profile_id, host, r, si)?;
                // On the writer thread, in the order of the store's writes (see snr.rs).
                u.sh.subscriptions.remove(s.profile_id, host, r, si);
            }
            Ok(())
        })
        .await;
    if let Err(e) = removed {
        tracing::warn!(error = %e, "Sh subscriptions could not be removed");
    }
}
