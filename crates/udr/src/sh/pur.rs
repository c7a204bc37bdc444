//! Sh-Update: Profile-Update-Request / Profile-Update-Answer (TS 29.328 §6.1.2, TS 29.329
//! §6.1.3), for RepositoryData, the only data an AS may update here.
//!
//! In order: the AS permission list (5101); every Data-Reference RepositoryData (else 5103
//! DIAMETER_ERROR_USER_DATA_CANNOT_BE_MODIFIED); User-Data an Sh-Data of RepositoryData (else 5100
//! DIAMETER_ERROR_USER_DATA_NOT_RECOGNIZED; a ServiceData over `max_repository_data_bytes`: 5008
//! DIAMETER_ERROR_TOO_MUCH_DATA); the user known (5001 / 5002); then, in one store write job,
//! every Sequence-Number checked before anything is written: new data must come with 0, an
//! update or a deletion (empty ServiceData) with the stored number + 1 (65535 → 1), else 5105
//! DIAMETER_ERROR_TRANSPARENT_DATA_OUT_OF_SYNC and nothing changes. Two ASs updating the same
//! data race on the writer thread: the second sees the first's number and gets 5105. The PUA is
//! sent after COMMIT; subscribed ASs other than the updating one then get a PNR.

use std::sync::Arc;

use diameter::dictionary::sh::{data_reference as dr, experimental_result as er};
use diameter::Message;

use super::config::Procedure;
use super::data::{ProfileChanges, PurOutcome};
use super::sh_data_xml::{parse_repository_updates, PurDataError};
use super::{
    check_permission, experimental, pnr, resolve_all, store_failed, success, unresolved,
    user_identity, Resolved,
};
use crate::context::Udr;

enum Done {
    Unresolved(Resolved),
    Outcome(i64, PurOutcome),
}

pub async fn profile_update(udr: &Arc<Udr>, req: Message) -> Message {
    let sh = &udr.sh;
    if let Err(a) = check_permission(udr, &req, Procedure::Update) {
        return a;
    }
    if req.data_references().iter().any(|r| *r != dr::REPOSITORY_DATA) {
        return experimental(sh, &req, er::DIAMETER_ERROR_USER_DATA_CANNOT_BE_MODIFIED);
    }
    let user_data = req.user_data().unwrap_or_default();
    let updates = match parse_repository_updates(&user_data, sh.config.max_repository_data_bytes) {
        Ok(u) => u,
        Err(PurDataError::NotRecognized(why)) => {
            tracing::debug!(%why, "PUR User-Data not recognized");
            return experimental(sh, &req, er::DIAMETER_ERROR_USER_DATA_NOT_RECOGNIZED);
        }
        Err(PurDataError::TooMuchData(why)) => {
            tracing::debug!(%why, "PUR User-Data too large");
            return experimental(sh, &req, DIAMETER_ERROR_TOO_MUCH_DATA);
        }
    };
    let ids = match user_identity(sh, &req) {
        Ok(ids) => ids,
        Err(a) => return a,
    };
    let done = udr
        .sh
        .store
        .write(move |tx| match resolve_all(tx, &ids)? {
            Resolved::Found(pid) => Ok(Done::Outcome(pid, tx.apply_pur(pid, &updates)?)),
            other => Ok(Done::Unresolved(other)),
        })
        .await;
    match done {
        Ok(Done::Outcome(pid, PurOutcome::Applied(changes))) => {
            let from = req.origin_host().map(str::to_owned);
            let change = ProfileChanges { repository: changes, ..ProfileChanges::default() };
            pnr::notify(udr, pid, &change, None, from.as_deref());
            success(sh, &req)
        }
        Ok(Done::Outcome(_, PurOutcome::OutOfSync(si))) => {
            tracing::debug!(service_indication = %si, "PUR sequence number out of sync");
            experimental(sh, &req, er::DIAMETER_ERROR_TRANSPARENT_DATA_OUT_OF_SYNC)
        }
        Ok(Done::Unresolved(r)) => unresolved(sh, &req, &r),
        Err(e) => store_failed(sh, &req, &e),
    }
}

/// DIAMETER_ERROR_TOO_MUCH_DATA (TS 29.229 §6.2.2.7, used by TS 29.329 §6.2.2.6): an
/// Experimental-Result-Code of vendor 10415, not the base 5008 Result-Code.
pub const DIAMETER_ERROR_TOO_MUCH_DATA: u32 = 5008;
