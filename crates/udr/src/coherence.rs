//! Several UDR instances on one MySQL-protocol database (issue #25). The data itself is read
//! from the database by every instance; what each keeps in memory is the SLF identity index,
//! the policy data subscriptions (which decide the notifications a change records) and the Sh
//! subscriptions (which decide the PNRs). Each write of those records its keys in the store's
//! change feed ([`store::mysql::feed`], as the transaction's last statement: the services'
//! `mysql` modules); this module applies the other instances' changes here:
//!
//! - an SLF identity is queued for the index's next drain, which re-reads its row, and the
//!   syncer is nudged (a bulk write's single row makes the next drain reload the index);
//! - a policy data subscription is re-read by id and installed in, or removed from, the index;
//! - an Sh profile's subscriptions are re-read and replace that profile's in the index.
//!
//! Notifications are recorded and sent by the instance that took the change, never on applying
//! the feed, so each is sent once. On SQLite (one instance per file) none of this runs.

use std::sync::Arc;

use store::mysql::feed::{self, Change, FeedReader};
use store::mysql::mysql_async::prelude::Queryable;
use store::MysqlStore;

use crate::context::Udr;
use crate::policy_data::mysql::KEEP_ALIVE;
use crate::policy_data::subs_to_notify;

/// The feed's entity for an SLF identity (re-read by the index's drain).
pub const SLF_IDENTITY: &str = "udr_slf_subscriber";
/// The feed's entity asking for a reload of the SLF index (a bulk write).
pub const SLF_RELOAD: &str = "udr_slf_reload";
/// The feed's entity for a policy data subscription (re-read by id).
pub const POLICY_SUBSCRIPTION: &str = "udr_policy_subscription";
/// The feed's entity for the Sh subscriptions of a profile (id: the profile id).
pub const SH_SUBSCRIPTIONS: &str = "udr_sh_subscription";

/// This instance's id in the feed: a UUID per process, so two instances configured with one
/// nfInstanceId still see each other.
pub fn writer_id() -> Arc<str> {
    uuid::Uuid::new_v4().simple().to_string().into()
}

/// A reader positioned now: call it before the index and the subscriptions are loaded, so a
/// change committed meanwhile is in what they load or read from the feed.
pub async fn prepare(db: &MysqlStore, writer: &str) -> store::Result<FeedReader> {
    FeedReader::start(db, writer).await
}

/// Follows the feed until `stop`.
pub async fn run(
    udr: Arc<Udr>,
    db: MysqlStore,
    reader: FeedReader,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    feed::follow(reader, stop, |changes| apply(&udr, &db, changes)).await;
}

/// Keeps this instance's policy data notifications owned (and adopts those of instances gone
/// for good, `policy_data::mysql`) every [`KEEP_ALIVE`] until `stop`.
pub async fn keep_outbox(udr: Arc<Udr>, mut stop: tokio::sync::watch::Receiver<bool>) {
    let Some(policy) = udr.stores.mysql_policy().cloned() else { return };
    let mut tick = tokio::time::interval(KEEP_ALIVE);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        match policy.keep_alive().await {
            Ok(0) => {}
            Ok(_) => udr.policy.wake_delivery(),
            Err(store::Error::Closed) => return,
            Err(e) => tracing::warn!(error = %e, "policy data notifications: keep-alive failed"),
        }
    }
}

/// Applies other instances' changes; returns those that could not be (a store error).
pub async fn apply(udr: &Udr, db: &MysqlStore, changes: Vec<Change>) -> Vec<Change> {
    let mut failed = Vec::new();
    let mut slf = Vec::new();
    let mut reload = false;
    for ch in changes {
        let done = match ch.entity.as_str() {
            SLF_IDENTITY => {
                slf.push(ch.id);
                continue;
            }
            SLF_RELOAD => {
                reload = true;
                continue;
            }
            POLICY_SUBSCRIPTION => refresh_policy_subscription(udr, db, &ch.id).await,
            SH_SUBSCRIPTIONS => refresh_sh_subscriptions(udr, &ch.id).await,
            _ => Ok(()),
        };
        if let Err(e) = done {
            tracing::warn!(entity = %ch.entity, id = %ch.id, error = %e,
                "change feed: cannot re-read a change; will try again");
            failed.push(ch);
        }
    }
    if let Some(m) = udr.stores.mysql_slf() {
        if reload {
            m.reload_elsewhere();
        }
        if reload || !slf.is_empty() {
            m.changed_elsewhere(slf);
            udr.slf.nudge();
        }
    }
    failed
}

async fn refresh_policy_subscription(udr: &Udr, db: &MysqlStore, id: &str) -> store::Result<()> {
    let key: Arc<str> = id.into();
    let row: Option<(Option<i64>, Vec<u8>)> = db
        .read(move |c| {
            let key = key.clone();
            Box::pin(async move {
                Ok(c.exec_first(
                    "SELECT expiry_ms, json_content FROM udr_policy_subscription WHERE subs_id = ?",
                    (key.as_ref(),),
                )
                .await?)
            })
        })
        .await?;
    let subs = &udr.policy.subs;
    match row {
        Some((expiry_ms, json)) => match subs_to_notify::decode_stored(id, expiry_ms, json) {
            Ok(sub) => {
                subs.insert(sub);
            }
            Err(e) => tracing::error!(id, error = %e, "stored policy data subscription unreadable"),
        },
        None => {
            subs.remove(id);
        }
    }
    Ok(())
}

async fn refresh_sh_subscriptions(udr: &Udr, id: &str) -> store::Result<()> {
    let Ok(pid) = id.parse::<i64>() else { return Ok(()) };
    let Some(sh) = udr.stores.mysql_sh() else { return Ok(()) };
    let now = sh.profile_subscriptions(pid).await?;
    udr.sh.subscriptions.replace_profile(pid, now);
    Ok(())
}
