//! Several Data Director instances on one MySQL-protocol database (issue #25): the admin
//! objects (feeds, filters, correlations) made through any instance's API run on all of them.
//!
//! Each admin write records its collection and name in the store's change feed
//! ([`store::mysql::feed`]; the document store does it in the write's transaction once
//! [`MysqlStore::record_changes`](store::MysqlStore::record_changes) is on). Every instance
//! polls the feed (25 ms) and, for each name another instance changed, re-reads it and makes
//! what is stored the one in force here ([`super::Admin::refresh`]): a feed starts, restarts
//! with its new sink or filter, or stops. The instance that took the request applied it before
//! answering, so it reads its own change at once. In the Kafka mode the instances' feeds then
//! share the topic's partitions through their consumer group; in the embedded mode each
//! instance runs the feed over its own MAIN (the copies it took itself).
//!
//! On SQLite (one instance per file) none of this runs.

use std::sync::Arc;

use store::mysql::feed::{self, Change, FeedReader, Op};
use store::AnyStore;

use super::Kind;
use crate::context::Dd;

/// On MySQL: this instance's admin writes recorded in the feed from now on, and a reader
/// positioned before the admin objects are loaded, so a change committed meanwhile is in what
/// is loaded or read from the feed. `None` on SQLite.
pub async fn prepare(store: &AnyStore) -> Result<Option<FeedReader>, store::Error> {
    let AnyStore::Mysql(m) = store else { return Ok(None) };
    // A writer id per process, not the nfInstanceId: two instances configured with one id must
    // still read each other's changes.
    let writer = uuid::Uuid::new_v4().simple().to_string();
    m.record_changes(&writer);
    Ok(Some(FeedReader::start(m, &writer).await?))
}

/// Follows the feed until `stop`.
pub async fn run(dd: Arc<Dd>, reader: FeedReader, stop: tokio::sync::watch::Receiver<bool>) {
    feed::follow(reader, stop, |changes| apply(&dd, changes)).await;
}

/// Makes each changed admin object the stored one; returns the changes a store failure left
/// unapplied (tried again at the next poll).
async fn apply(dd: &Arc<Dd>, mut changes: Vec<Change>) -> Vec<Change> {
    // A filter made before the feeds (a feed names its filter) and removed after them (one in
    // use cannot go), as the instance that took them had to order them; both may arrive in one
    // poll. The sort is stable, so the changes of one name stay in feed order.
    changes.sort_by_key(|c| match (Kind::of_collection(&c.entity), c.op) {
        (Some(Kind::Filter), Op::Put) => 0,
        (Some(Kind::Feed), _) => 1,
        (Some(Kind::Correlation), _) => 2,
        _ => 3,
    });
    let mut failed = Vec::new();
    for ch in changes {
        let Some(kind) = Kind::of_collection(&ch.entity) else { continue };
        if let Err(e) = dd.admin.refresh(dd, kind, &ch.id).await {
            tracing::warn!(kind = kind.path(), name = %ch.id, error = %e,
                "change feed: cannot re-read an admin object; will try again");
            failed.push(ch);
        }
    }
    failed
}
