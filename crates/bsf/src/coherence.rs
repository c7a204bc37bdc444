//! Several BSF instances on one MySQL-protocol database (issue #25). Discovery reads the
//! database, so it already serves every instance's bindings; what each instance keeps in memory
//! is the Rx proxy's UE address index and the binding event subscriptions. Each write records
//! its changes in the store's change feed ([`store::mysql::feed`], the rows written by
//! [`crate::store::mysql`]); this module applies the other instances' changes here:
//!
//! - a binding put (created, or the new state of an update) is inserted into the index from the
//!   document the feed row carries, a removed one removed (the row carries the removed
//!   document, which the database no longer holds): no read per change;
//! - a subscription change is re-read by key and installed or removed, so a subscription made
//!   at one instance is notified of bindings registered at another.
//!
//! Notifications are sent by the instance that took the binding's request, never on applying
//! the feed, so each is sent once. On SQLite (one instance per file) none of this runs.

use std::sync::Arc;

use serde_json::Value;
use store::mysql::feed::{self, Change, FeedReader, Op};
use store::mysql::mysql_async::prelude::Queryable;
use store::{AnyStore, MysqlStore};

use crate::context::Bsf;
use crate::store::mysql::{split_put_payload, FEED_BINDINGS, FEED_SUBSCRIPTIONS};
use crate::subscriptions;
use crate::ue_address_index::Indexed;

/// Makes this instance's writes record changes, and positions a reader before the index and the
/// subscriptions are loaded. `None` on SQLite.
pub async fn prepare(store: &AnyStore) -> Result<Option<FeedReader>, ::store::Error> {
    let AnyStore::Mysql(m) = store else { return Ok(None) };
    let writer = uuid::Uuid::new_v4().simple().to_string();
    m.record_changes(&writer);
    Ok(Some(FeedReader::start(m, &writer).await?))
}

/// Follows the feed until `stop`.
pub async fn run(
    bsf: Arc<Bsf>,
    db: MysqlStore,
    reader: FeedReader,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    feed::follow(reader, stop, |changes| apply(&bsf, &db, changes)).await;
}

/// Applies other instances' changes; returns those that could not be (a store error).
pub async fn apply(bsf: &Bsf, db: &MysqlStore, changes: Vec<Change>) -> Vec<Change> {
    let mut failed = Vec::new();
    for ch in changes {
        match ch.entity.as_str() {
            FEED_BINDINGS => apply_binding(bsf, &ch),
            FEED_SUBSCRIPTIONS => {
                if let Err(e) = refresh_subscription(bsf, db, &ch.id).await {
                    tracing::warn!(id = %ch.id, error = %e,
                        "change feed: cannot re-read a subscription; will try again");
                    failed.push(ch);
                }
            }
            _ => {}
        }
    }
    failed
}

fn apply_binding(bsf: &Bsf, ch: &Change) {
    let Some(ix) = bsf.store.index() else { return };
    let Some(payload) = ch.payload.as_deref() else { return };
    match ch.op {
        Op::Put => {
            if let Some((created_ms, json)) = split_put_payload(payload) {
                if let Some(b) = Indexed::from_json(&ch.id, json) {
                    ix.insert(&b, created_ms);
                }
            }
        }
        Op::Delete => {
            if let Some(b) = Indexed::from_json(&ch.id, payload) {
                ix.remove(&b);
            }
        }
    }
}

async fn refresh_subscription(bsf: &Bsf, db: &MysqlStore, id: &str) -> ::store::Result<()> {
    let key = Arc::new(id.to_owned());
    let row: Option<Vec<u8>> = db
        .read(move |c| {
            let key = key.clone();
            Box::pin(async move {
                Ok(c.exec_first(
                    "SELECT json_content FROM bsf_subscription WHERE sub_id = ?",
                    (key.as_str(),),
                )
                .await?)
            })
        })
        .await?;
    match row {
        Some(json) => match serde_json::from_slice::<Value>(&json)
            .map_err(|e| e.to_string())
            .and_then(|v| subscriptions::decode(id, v).map_err(|p| p.to_string()))
        {
            Ok(sub) => bsf.subscriptions.insert(sub),
            Err(e) => tracing::error!(id, error = %e, "stored subscription unreadable"),
        },
        None => {
            bsf.subscriptions.remove(id);
        }
    }
    Ok(())
}
