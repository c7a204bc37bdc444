//! Several PCF instances on one MySQL-protocol database (`[pcf] shared_database`, issue #25):
//! each instance answers from the memory its [`Resident`] holds, so each must learn of the
//! others' writes. Every write of the MySQL store records what it changed in the store's
//! change feed ([`store::mysql::feed`]; the entities `FEED_*` of [`crate::store::mysql`]), in
//! its own transaction; this module follows the feed and, for each change another instance
//! made, re-reads the changed row from the database and installs it in memory (or removes it
//! when the row is gone): an SM association, an AM or UE association, a subscriber's state
//! variables and policy data subscription, an application session, a URSP delivery record.
//!
//! Each install happens under the subscriber's collision hold, the one this instance's own
//! requests take: a re-read and its install cannot interleave with this instance's own write
//! of the subscriber (which would put the older of the two in memory), and a re-read made
//! after a later change of the key only installs the newer state (changes read late or twice
//! cannot roll memory back).
//!
//! Not followed (docs/pcf.md, "Several instances"): the CHF subscriptions' statuses, the Sy
//! sessions and the usage totals, which other components keep in memory from their own loads;
//! and the policy version in force. Collision control holds a subscriber in one instance only.

use std::sync::Arc;

use store::mysql::feed::{self, Change, FeedReader};
use store::AnyStore;

use crate::context::Pcf;
use crate::store::mysql::{
    parse_assoc_key, FEED_APP, FEED_ASSOC, FEED_DELIVERY, FEED_SM, FEED_SUBSCRIBER,
};
use crate::store::{Kind, PcfStore, Resident};

/// With `shared` on a MySQL store: makes this instance's writes record their changes, and
/// positions a reader before the state is loaded (a change committed meanwhile is then in what
/// is loaded or read from the feed). `None` otherwise.
pub async fn prepare(store: &AnyStore, shared: bool) -> store::Result<Option<FeedReader>> {
    let AnyStore::Mysql(m) = store else { return Ok(None) };
    if !shared {
        return Ok(None);
    }
    let writer = uuid::Uuid::new_v4().simple().to_string();
    m.record_changes(&writer);
    Ok(Some(FeedReader::start(m, &writer).await?))
}

/// Follows the feed until `stop`: `durable` is the database, `resident` the memory in front.
pub async fn run(
    pcf: Arc<Pcf>,
    resident: Arc<Resident>,
    durable: Arc<dyn PcfStore>,
    reader: FeedReader,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    feed::follow(reader, stop, |changes| apply(&pcf, &resident, &*durable, changes)).await;
}

/// Applies other instances' changes; returns those that could not be (a store error).
pub async fn apply(
    pcf: &Pcf,
    resident: &Resident,
    durable: &dyn PcfStore,
    changes: Vec<Change>,
) -> Vec<Change> {
    let mut failed = Vec::new();
    for ch in changes {
        if let Err(e) = apply_one(pcf, resident, durable, &ch).await {
            tracing::warn!(entity = %ch.entity, id = %ch.id, error = %e,
                "change feed: cannot re-read a change; will try again");
            failed.push(ch);
        }
    }
    failed
}

async fn apply_one(
    pcf: &Pcf,
    resident: &Resident,
    durable: &dyn PcfStore,
    ch: &Change,
) -> store::Result<()> {
    let id = ch.id.as_str();
    match ch.entity.as_str() {
        FEED_SM => {
            let supi = match resident.supi_of_sm(id).await? {
                Some(s) => Some(s),
                None => durable.get_sm(id).await?.map(|p| p.supi),
            };
            let Some(supi) = supi else { return Ok(()) };
            let _held = pcf.hold(&supi).await;
            resident.apply_sm(id, durable.get_sm(id).await?);
        }
        FEED_SUBSCRIBER => {
            let _held = pcf.hold(id).await;
            resident.apply_subscriber(id, durable.subscriber(id).await?);
        }
        FEED_ASSOC => {
            let Some((kind, assoc)) = parse_assoc_key(id) else { return Ok(()) };
            let supi = match resident.supi_of_assoc(kind, assoc) {
                Some(s) => Some(s),
                None => durable.get_assoc(kind, assoc).await?.map(|a| a.supi),
            };
            let Some(supi) = supi else { return Ok(()) };
            let _held = pcf.hold(&supi).await;
            resident.apply_assoc(kind, assoc, durable.get_assoc(kind, assoc).await?);
        }
        FEED_APP => {
            let supi = match resident.supi_of_app(id) {
                Some(s) => Some(s),
                None => durable.get_app(id).await?.map(|a| a.supi),
            };
            let Some(supi) = supi else { return Ok(()) };
            let _held = pcf.hold(&supi).await;
            resident.apply_app(id, durable.get_app(id).await?);
        }
        FEED_DELIVERY => {
            // Keyed by its UE policy association, whose subscriber it is.
            let supi = match resident.supi_of_assoc(Kind::Ue, id) {
                Some(s) => Some(s),
                None => durable.get_assoc(Kind::Ue, id).await?.map(|a| a.supi),
            };
            let _held = match &supi {
                Some(s) => Some(pcf.hold(s).await),
                None => None,
            };
            resident.apply_delivery(id, durable.ue_delivery(id).await?);
        }
        _ => {}
    }
    Ok(())
}
