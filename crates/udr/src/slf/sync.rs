//! Keeps the identity index ([`super::index`]) equal to the store, whoever writes it.
//!
//! The store keeps a changes feed ([`SlfStore::capture`], [`SlfStore::changes`]). Over SQLite
//! ([`super::sqlite`]): writes made in this process (REST provisioning, SOAP, anything through
//! the UDR's store) go through the store's single writer connection, and TEMP triggers on that
//! connection note each identity row inserted, updated or deleted in a TEMP table, inside the
//! writer's transaction, so a rolled-back write notes nothing and a committed one cannot be
//! missed. Being TEMP, they cost nothing to other connections (a bulk import in another process).
//!
//! One task, the *syncer*, drains that feed: a writer job reads the current row of each noted
//! identity and empties the table; once that job has committed, the syncer applies the rows to
//! the index. Drains run one after the other and each reads the store as it is then, so the index
//! only moves forward. A drain runs every `[udr.slf] sync_interval_ms`, and at once when asked
//! ([`Live::nudge`]: after each provisioning write, and by a lookup that found the index behind).
//!
//! Read-your-writes for every writer of this process, without a wait on the write path: the
//! triggers also call `udr_slf_noted()`, which counts notes in memory as they are made (so before
//! the write is acknowledged). A drain records the count it has taken in ([`Live::fresh`]); a
//! lookup that sees more notes than that reads the store instead of the index, as lookups did
//! before the index existed, and nudges the syncer. A note of a write rolled back later only
//! costs lookups their fast path until the next drain.
//!
//! Writes by other connections (`fivecore udr import` into the store of a running UDR) are not
//! noted; the drain also reads the feed's version (`PRAGMA data_version` of the writer connection), which moves only
//! when another connection commits, and such a change makes the syncer reload the whole index
//! from a fresh snapshot (seconds for 10 million subscribers) and swap it in. Their staleness
//! bound is one interval plus that reload.
//!
//! Over MySQL ([`super::mysql`]) the same protocol has another feed: a write queues the
//! identities it changed once committed, then counts them into `noted`; other instances' writes
//! arrive through the store's change feed (`crate::coherence`), which queues their identities
//! (or asks for a reload, the version moving) and nudges the syncer. Their staleness bound is
//! the feed's poll (25 ms) plus a drain.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, Weak};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::index::Index;
use super::{Changes, SlfStore};

/// The index as the lookups see it, and what tells them whether it is behind.
pub struct Live {
    index: RwLock<Index>,
    /// Identity rows noted by the store's changes feed so far.
    noted: Arc<AtomicU64>,
    /// `noted` as of the last drain applied to `index`.
    fresh: AtomicU64,
    wake: Notify,
}

impl Live {
    /// The index, when it holds every write noted so far; else `None` (and a drain is asked
    /// for): the caller reads the store.
    pub fn fresh_index(&self) -> Option<RwLockReadGuard<'_, Index>> {
        let noted = self.noted.load(Ordering::Acquire);
        let ix = self.index();
        if self.fresh.load(Ordering::Acquire) >= noted {
            return Some(ix);
        }
        drop(ix);
        self.nudge();
        None
    }

    pub fn index(&self) -> RwLockReadGuard<'_, Index> {
        self.index.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Asks for a drain now (after a write).
    pub fn nudge(&self) {
        self.wake.notify_one();
    }
}

/// Notes the store's changes from now on and loads the index; returns it with the syncer
/// running (on the current tokio runtime) every `interval`.
pub async fn start(db: Arc<dyn SlfStore>, interval: Duration) -> store::Result<Arc<Live>> {
    let noted = Arc::new(AtomicU64::new(0));
    let version = db.capture(noted.clone()).await?;
    let began = Instant::now();
    // Every write noted so far is committed once this resolves, so the load's snapshot, taken
    // after, holds them all. Writes noted later may be missing from it: they count above
    // `before`, so lookups read the store until a drain has applied them.
    let before = db.noted_committed(noted.clone()).await?;
    let index = db.load_index().await?;
    tracing::info!(
        identities = index.len(),
        memory_mib = index.memory_bytes() >> 20,
        load_ms = began.elapsed().as_millis() as u64,
        "SLF identity index loaded"
    );
    let live = Arc::new(Live {
        index: RwLock::new(index),
        fresh: AtomicU64::new(before),
        noted,
        wake: Notify::new(),
    });
    tokio::spawn(syncer(db, Arc::downgrade(&live), interval, version));
    Ok(live)
}

/// Drains every `interval` and when nudged, until the index is dropped or the store closed.
async fn syncer(db: Arc<dyn SlfStore>, live: Weak<Live>, interval: Duration, mut version: i64) {
    loop {
        {
            let Some(l) = live.upgrade() else { return };
            tokio::select! {
                () = l.wake.notified() => {}
                () = tokio::time::sleep(interval) => {}
            }
        }
        let Some(l) = live.upgrade() else { return };
        let sets: Vec<i64> = l.index().set_ids().collect();
        let drained = match db.changes(sets, l.noted.clone()).await {
            Ok(d) => d,
            Err(store::Error::Closed) => return,
            Err(e) => {
                tracing::warn!(error = %e, "SLF index: cannot read the noted changes; retrying");
                tokio::time::sleep(interval).await;
                continue;
            }
        };
        let foreign = drained.version != version;
        version = drained.version;
        let through = drained.noted;
        let applied = if foreign || !drained.capturing {
            reload(db.as_ref(), &l, drained.capturing).await
        } else {
            apply(&l, drained)
        };
        match applied {
            Ok(()) => l.fresh.fetch_max(through, Ordering::AcqRel),
            Err(store::Error::Closed) => return,
            Err(e) => {
                tracing::warn!(error = %e, "SLF index: cannot apply changes; reloading");
                // The next drain reloads.
                version = version.wrapping_add(1);
                l.nudge();
                continue;
            }
        };
    }
}

fn apply(live: &Live, d: Changes) -> store::Result<()> {
    if d.changes.is_empty() {
        return Ok(());
    }
    let mut ix = live.index.write().unwrap_or_else(|p| p.into_inner());
    for (set_id, groups) in d.sets {
        ix.add_set(set_id, groups);
    }
    for (id, set_id) in &d.changes {
        ix.set(id, *set_id).map_err(store::Error::backend_msg)?;
    }
    Ok(())
}

/// Replaces the index by a fresh load. The drain that asked for it has committed, so the load's
/// snapshot holds every change noted so far; changes after it are noted for the next drain.
async fn reload(db: &dyn SlfStore, live: &Live, capturing: bool) -> store::Result<()> {
    if !capturing {
        tracing::warn!("SLF index: the store lost its changes feed; starting it again");
        db.capture(live.noted.clone()).await?;
    }
    let began = Instant::now();
    let fresh = db.load_index().await?;
    tracing::info!(
        identities = fresh.len(),
        load_ms = began.elapsed().as_millis() as u64,
        "SLF identity index reloaded after a write by another connection"
    );
    *live.index.write().unwrap_or_else(|p| p.into_inner()) = fresh;
    Ok(())
}
