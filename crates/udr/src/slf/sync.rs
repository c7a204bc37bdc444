//! Keeps the identity index ([`super::index`]) equal to the store, whoever writes it.
//!
//! Writes made in this process (REST provisioning, SOAP, anything through the UDR's
//! `SqliteStore`) go through the store's single writer connection. TEMP triggers on that
//! connection note each identity row inserted, updated or deleted in a TEMP table, inside the
//! writer's transaction, so a rolled-back write notes nothing and a committed one cannot be
//! missed. Being TEMP, they cost nothing to other connections (a bulk import in another process).
//!
//! One task, the *syncer*, drains that table: a writer job reads the current row of each noted
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
//! noted; the drain also reads `PRAGMA data_version` of the writer connection, which moves only
//! when another connection commits, and such a change makes the syncer reload the whole index
//! from a fresh snapshot (seconds for 10 million subscribers) and swap it in. Their staleness
//! bound is one interval plus that reload.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, Weak};
use std::time::{Duration, Instant};

use rusqlite::functions::FunctionFlags;
use rusqlite::{Connection, Transaction};
use store::SqliteStore;
use tokio::sync::Notify;

use super::index::Index;
use super::Groups;

const CAPTURE: &str = "
    CREATE TEMP TABLE IF NOT EXISTS udr_slf_changed (subscriber_id TEXT NOT NULL, note INTEGER);
    CREATE TEMP TRIGGER IF NOT EXISTS udr_slf_changed_insert
        AFTER INSERT ON main.udr_slf_subscriber
        BEGIN INSERT INTO udr_slf_changed VALUES (NEW.subscriber_id, udr_slf_noted()); END;
    CREATE TEMP TRIGGER IF NOT EXISTS udr_slf_changed_delete
        AFTER DELETE ON main.udr_slf_subscriber
        BEGIN INSERT INTO udr_slf_changed VALUES (OLD.subscriber_id, udr_slf_noted()); END;
    CREATE TEMP TRIGGER IF NOT EXISTS udr_slf_changed_update
        AFTER UPDATE ON main.udr_slf_subscriber
        BEGIN
            INSERT INTO udr_slf_changed VALUES (OLD.subscriber_id, udr_slf_noted());
            INSERT INTO udr_slf_changed VALUES (NEW.subscriber_id, udr_slf_noted());
        END;
    DELETE FROM temp.udr_slf_changed;";

const TRIGGERS: i64 = 3;

/// The index as the lookups see it, and what tells them whether it is behind.
pub struct Live {
    index: RwLock<Index>,
    /// Identity rows noted by the triggers so far (counted by `udr_slf_noted()`).
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

/// Installs the change triggers on the writer connection (with `udr_slf_noted()` counting
/// into `noted`); returns the connection's `data_version`.
fn capture(tx: &Transaction<'_>, noted: &Arc<AtomicU64>) -> store::Result<i64> {
    let noted = noted.clone();
    tx.create_scalar_function("udr_slf_noted", 0, FunctionFlags::SQLITE_UTF8, move |_| {
        Ok(noted.fetch_add(1, Ordering::AcqRel) as i64 + 1)
    })?;
    tx.execute_batch(CAPTURE)?;
    data_version(tx)
}

/// Notes the writer connection's changes from now on and loads the index; returns it with the
/// syncer running (on the current tokio runtime) every `interval`.
pub async fn start(db: &SqliteStore, interval: Duration) -> store::Result<Arc<Live>> {
    let noted = Arc::new(AtomicU64::new(0));
    let n = noted.clone();
    let version = db.write(move |tx| capture(tx, &n)).await?;
    let began = Instant::now();
    // Every write noted so far is committed once this job's future resolves (it resolves after
    // the COMMIT of its batch), so the load's snapshot, taken after, holds them all. Writes
    // noted later may be missing from it: they count above `before`, so lookups read the store
    // until a drain has applied them.
    let n = noted.clone();
    let before = db.write(move |_| Ok(n.load(Ordering::Acquire))).await?;
    let index = load(db).await?;
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
    tokio::spawn(syncer(db.clone(), Arc::downgrade(&live), interval, version));
    Ok(live)
}

/// Reads every identity and group set, in one snapshot of a reader.
pub async fn load(db: &SqliteStore) -> store::Result<Index> {
    db.read(|c| {
        let mut ix = Index::default();
        let mut st = c.prepare("SELECT set_id, groups FROM udr_slf_group_set")?;
        let mut rows = st.query([])?;
        while let Some(r) = rows.next()? {
            ix.add_set(
                r.get(0)?,
                parse_groups(r.get_ref(1)?.as_str().map_err(rusqlite::Error::from)?)?,
            );
        }
        let mut st = c.prepare("SELECT subscriber_id, set_id FROM udr_slf_subscriber")?;
        let mut rows = st.query([])?;
        while let Some(r) = rows.next()? {
            let id = r.get_ref(0)?.as_str().map_err(rusqlite::Error::from)?;
            ix.set(id, Some(r.get(1)?)).map_err(store::Error::backend_msg)?;
        }
        Ok(ix)
    })
    .await
}

fn parse_groups(text: &str) -> store::Result<Groups> {
    serde_json::from_str(text).map_err(store::Error::backend)
}

fn data_version(c: &Connection) -> store::Result<i64> {
    Ok(c.query_row("PRAGMA data_version", [], |r| r.get(0))?)
}

/// What one drain read.
struct Drained {
    /// `data_version` of the writer connection: moved since the last drain when another
    /// connection committed.
    version: i64,
    /// `noted` when the drain read the changes: every note up to it is in `changes`.
    noted: u64,
    /// The TEMP triggers are still in place (a new writer connection would not have them).
    capturing: bool,
    /// Noted identities with their group set now (`None`: removed).
    changes: Vec<(String, Option<i64>)>,
    /// Group sets the changes point at that the index did not know.
    sets: Vec<(i64, Groups)>,
}

fn drain(tx: &Transaction<'_>, known_sets: &[i64], noted: &AtomicU64) -> store::Result<Drained> {
    let version = data_version(tx)?;
    // Notes are made on this thread only, so none comes between this load and the reads.
    let noted = noted.load(Ordering::Acquire);
    let triggers: i64 = tx
        .prepare_cached(
            "SELECT COUNT(*) FROM temp.sqlite_master
             WHERE type = 'trigger' AND name LIKE 'udr_slf_changed_%'",
        )?
        .query_row([], |r| r.get(0))?;
    if triggers != TRIGGERS {
        return Ok(Drained {
            version,
            noted,
            capturing: false,
            changes: Vec::new(),
            sets: Vec::new(),
        });
    }
    let mut changes = Vec::new();
    let mut st = tx.prepare_cached(
        "SELECT c.subscriber_id, s.set_id
         FROM (SELECT DISTINCT subscriber_id FROM temp.udr_slf_changed) c
         LEFT JOIN main.udr_slf_subscriber s ON s.subscriber_id = c.subscriber_id",
    )?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        changes.push((r.get::<_, String>(0)?, r.get::<_, Option<i64>>(1)?));
    }
    drop(rows);
    let mut sets: Vec<(i64, Groups)> = Vec::new();
    let mut read_set =
        tx.prepare_cached("SELECT groups FROM udr_slf_group_set WHERE set_id = ?1")?;
    for set_id in changes.iter().filter_map(|c| c.1) {
        if known_sets.contains(&set_id) || sets.iter().any(|s| s.0 == set_id) {
            continue;
        }
        let text: String = read_set.query_row([set_id], |r| r.get(0))?;
        sets.push((set_id, parse_groups(&text)?));
    }
    if !changes.is_empty() {
        tx.prepare_cached("DELETE FROM temp.udr_slf_changed")?.execute([])?;
    }
    Ok(Drained { version, noted, capturing: true, changes, sets })
}

/// Drains every `interval` and when nudged, until the index is dropped or the store closed.
async fn syncer(db: SqliteStore, live: Weak<Live>, interval: Duration, mut version: i64) {
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
        let noted = l.noted.clone();
        let drained = match db.write(move |tx| drain(tx, &sets, &noted)).await {
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
            reload(&db, &l, drained.capturing).await
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

fn apply(live: &Live, d: Drained) -> store::Result<()> {
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
async fn reload(db: &SqliteStore, live: &Live, capturing: bool) -> store::Result<()> {
    if !capturing {
        tracing::warn!("SLF index: the writer connection lost its change triggers; reinstalling");
        let noted = live.noted.clone();
        db.write(move |tx| capture(tx, &noted)).await?;
    }
    let began = Instant::now();
    let fresh = load(db).await?;
    tracing::info!(
        identities = fresh.len(),
        load_ms = began.elapsed().as_millis() as u64,
        "SLF identity index reloaded after a write by another connection"
    );
    *live.index.write().unwrap_or_else(|p| p.into_inner()) = fresh;
    Ok(())
}
