//! One PCF instance per database. [`crate::store::Resident`] answers every read from the memory
//! it loaded at start and writes through: a second instance writing the same database would
//! not be seen by the first (an association it created unknown there, a state variable it
//! merged overwritten by the first's next merge from its stale copy). Unless the instances
//! follow each other's writes through the change feed (`[pcf] shared_database`,
//! crate::coherence), an instance holds the database by a lease: one row of `pcf_owner`,
//! renewed every third of `[pcf] instance_lease_ms` and released at stop.
//!
//! A row, not a named lock (`GET_LOCK`): Galera does not replicate named locks, so two
//! instances on two nodes would both get one; the row is certified like any write. Times are
//! the database's clock (`NOW(3)`), so the instances' clocks do not matter.
//!
//! An instance that stopped without releasing (killed) leaves its lease until it expires: the
//! next instance waits that long at most, then takes it. One still renewing it is another
//! instance serving: the start is refused.

use std::sync::Arc;
use std::time::{Duration, Instant};

use store::mysql::mysql_async::prelude::Queryable;
use store::mysql::mysql_async::Conn;
use store::mysql::TxError;
use store::MysqlStore;

const NAME: &str = "pcf";

/// What a claim found.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Claim {
    /// The lease is this instance's until one lease from now.
    Taken,
    /// Another instance holds it for `left_ms` more.
    Held { owner: String, left_ms: i64 },
}

/// The database's clock, ms.
const NOW_MS: &str = "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)";

async fn claim_tx(c: &mut Conn, me: &str, lease_ms: i64) -> Result<Claim, TxError> {
    let now: Option<i64> = c.query_first(format!("SELECT {NOW_MS}")).await?;
    let now = now.unwrap_or(0);
    let held: Option<(String, i64)> = c
        .exec_first("SELECT owner, expires_ms FROM pcf_owner WHERE name = ? FOR UPDATE", (NAME,))
        .await?;
    if let Some((owner, expires_ms)) = held {
        if owner != me && expires_ms > now {
            return Ok(Claim::Held { owner, left_ms: expires_ms - now });
        }
    }
    c.exec_drop(
        "INSERT INTO pcf_owner (name, owner, expires_ms) VALUES (?, ?, ?)
         ON DUPLICATE KEY UPDATE owner = VALUES(owner), expires_ms = VALUES(expires_ms)",
        (NAME, me, now + lease_ms),
    )
    .await?;
    Ok(Claim::Taken)
}

async fn claim(db: &MysqlStore, me: &Arc<str>, lease_ms: i64) -> store::Result<Claim> {
    let me = me.clone();
    db.write(move |c| {
        let me = me.clone();
        Box::pin(async move { claim_tx(c, &me, lease_ms).await })
    })
    .await
}

/// This instance's hold on the database; renewed in the background until
/// [`Ownership::release`] (or, dropped without it, until its lease expires).
pub struct Ownership {
    db: MysqlStore,
    me: Arc<str>,
    renew: tokio::task::JoinHandle<()>,
}

/// Why the database could not be taken.
#[derive(Debug)]
pub enum TakeError {
    Held { owner: String },
    Store(store::Error),
}

impl std::fmt::Display for TakeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TakeError::Held { owner } => write!(
                f,
                "another PCF instance ({owner}) serves from this database and keeps renewing \
                 its lease: the PCF runs one instance per database (docs/pcf.md, \"On MySQL\")"
            ),
            TakeError::Store(e) => write!(f, "store: {e}"),
        }
    }
}

impl std::error::Error for TakeError {}

impl From<store::Error> for TakeError {
    fn from(e: store::Error) -> Self {
        TakeError::Store(e)
    }
}

impl Ownership {
    /// Takes the database for this instance, waiting for a lease left by an instance that
    /// stopped without releasing it (at most one `lease` and a renewal).
    pub async fn take(db: MysqlStore, lease: Duration) -> Result<Ownership, TakeError> {
        let me: Arc<str> = uuid::Uuid::new_v4().to_string().into();
        let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
        let give_up = Instant::now() + lease + lease / 3;
        loop {
            match claim(&db, &me, lease_ms).await? {
                Claim::Taken => break,
                Claim::Held { owner, left_ms } => {
                    if Instant::now() >= give_up {
                        return Err(TakeError::Held { owner });
                    }
                    tracing::warn!(
                        %owner, left_ms,
                        "store: another PCF instance holds this database; waiting for its lease"
                    );
                    let wait = Duration::from_millis(left_ms.clamp(1, 1000) as u64 + 10);
                    tokio::time::sleep(wait.min(give_up.saturating_duration_since(Instant::now())))
                        .await;
                }
            }
        }
        let renew = tokio::spawn(renew(db.clone(), me.clone(), lease));
        Ok(Ownership { db, me, renew })
    }

    /// Stops renewing and gives the database up, so the next instance starts at once.
    pub async fn release(self) {
        self.renew.abort();
        let me = self.me.clone();
        let released = self
            .db
            .write(move |c| {
                let me = me.clone();
                Box::pin(async move {
                    c.exec_drop("DELETE FROM pcf_owner WHERE name = ? AND owner = ?", (NAME, &*me))
                        .await?;
                    Ok(())
                })
            })
            .await;
        if let Err(e) = released {
            tracing::warn!(error = %e, "store: the PCF's lease of the database was not released: the next instance waits for it to expire");
        }
    }
}

impl Drop for Ownership {
    fn drop(&mut self) {
        self.renew.abort();
    }
}

async fn renew(db: MysqlStore, me: Arc<str>, lease: Duration) {
    let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
    let mut tick = tokio::time::interval(lease / 3);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        match claim(&db, &me, lease_ms).await {
            Ok(Claim::Taken) => {}
            // Only after this instance could not renew for a whole lease (the database out of
            // reach): its memory no longer owns the state. Said loudly; the operator stops one.
            Ok(Claim::Held { owner, .. }) => tracing::error!(
                %owner,
                "store: another PCF instance took this database after this one's lease expired: \
                 two instances now write one database, which the PCF does not support; stop one"
            ),
            Err(e) => {
                tracing::warn!(error = %e, "store: the PCF's lease of the database was not renewed")
            }
        }
    }
}
