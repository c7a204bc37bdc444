//! [`PcfStore`] on the embedded SQLite store: schema, migrations and SQL.

use rusqlite::{params, OptionalExtension, Transaction};
use serde_json::{Map, Value};
use store::{Migration, SqliteStore};

use super::{
    Association, ChfSubscription, Deleted, Kind, PcfStore, SmPolicy, SsvUpdates, StoreFuture,
    Subscriber,
};

pub const MIGRATIONS: [Migration; 6] = [
    Migration::new(
        "pcf-0001-sm-policy",
        "CREATE TABLE pcf_sm_policy (
            sm_policy_id TEXT PRIMARY KEY NOT NULL,
            supi TEXT NOT NULL,
            context BLOB NOT NULL,
            decision BLOB NOT NULL,
            policy_version TEXT NOT NULL,
            updated_ms INTEGER NOT NULL
        );
        CREATE INDEX pcf_sm_policy_supi ON pcf_sm_policy (supi)",
    ),
    Migration::new(
        "pcf-0002-ssv",
        "CREATE TABLE pcf_ssv (
            supi TEXT PRIMARY KEY NOT NULL,
            json BLOB NOT NULL
        )",
    ),
    Migration::new("pcf-0003-sm-binding", "ALTER TABLE pcf_sm_policy ADD COLUMN binding_uri TEXT"),
    Migration::new(
        "pcf-0004-udr-subscription",
        "CREATE TABLE pcf_udr_subscription (
            supi TEXT PRIMARY KEY NOT NULL,
            uri TEXT NOT NULL
        )",
    ),
    Migration::new(
        "pcf-0005-association",
        "CREATE TABLE pcf_policy_association (
            kind TEXT NOT NULL,
            assoc_id TEXT NOT NULL,
            supi TEXT NOT NULL,
            context BLOB NOT NULL,
            decision BLOB NOT NULL,
            policy_version TEXT NOT NULL,
            updated_ms INTEGER NOT NULL,
            PRIMARY KEY (kind, assoc_id)
        );
        CREATE INDEX pcf_policy_association_supi ON pcf_policy_association (supi)",
    ),
    Migration::new(
        "pcf-0006-chf-subscription",
        "CREATE TABLE pcf_chf_subscription (
            supi TEXT PRIMARY KEY NOT NULL,
            uri TEXT NOT NULL,
            statuses BLOB NOT NULL
        )",
    ),
];

const SM_COLUMNS: &str =
    "sm_policy_id, supi, context, decision, policy_version, updated_ms, binding_uri";

fn sm_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SmPolicy> {
    Ok(SmPolicy {
        id: r.get(0)?,
        supi: r.get(1)?,
        context: r.get(2)?,
        decision: r.get(3)?,
        policy_version: r.get(4)?,
        updated_ms: r.get(5)?,
        binding: r.get(6)?,
    })
}

#[derive(Clone)]
pub struct SqlitePcfStore {
    db: SqliteStore,
}

impl SqlitePcfStore {
    /// The PCF's store on an open SQLite store (the NF skeleton's), applying its migrations.
    pub async fn on(db: SqliteStore) -> store::Result<Self> {
        db.migrate(MIGRATIONS).await?;
        Ok(SqlitePcfStore { db })
    }
}

fn read_ssv(c: &rusqlite::Connection, supi: &str) -> store::Result<Map<String, Value>> {
    let json: Option<Vec<u8>> =
        c.query_row("SELECT json FROM pcf_ssv WHERE supi = ?1", [supi], |r| r.get(0)).optional()?;
    Ok(json
        .and_then(|j| serde_json::from_slice::<Value>(&j).ok())
        .and_then(|v| match v {
            Value::Object(m) => Some(m),
            _ => None,
        })
        .unwrap_or_default())
}

fn read_subscriber(c: &rusqlite::Connection, supi: &str) -> store::Result<Subscriber> {
    let ssv = read_ssv(c, supi)?;
    let udr_subscription = c
        .query_row("SELECT uri FROM pcf_udr_subscription WHERE supi = ?1", [supi], |r| r.get(0))
        .optional()?;
    Ok(Subscriber { ssv, udr_subscription })
}

/// Merges `updates` into the subscriber's state (null removes a variable) in `tx`.
fn merge_ssv(tx: &Transaction<'_>, supi: &str, updates: SsvUpdates) -> store::Result<()> {
    if updates.is_empty() {
        return Ok(());
    }
    let mut m = read_ssv(tx, supi)?;
    for (k, v) in updates {
        if v.is_null() {
            m.remove(&k);
        } else {
            m.insert(k, v);
        }
    }
    let json = serde_json::to_vec(&m).map_err(store::Error::backend)?;
    tx.execute(
        "INSERT INTO pcf_ssv (supi, json) VALUES (?1, ?2)
         ON CONFLICT (supi) DO UPDATE SET json = excluded.json",
        params![supi, json],
    )?;
    Ok(())
}

/// A new SM association (with the subscriber's UDR subscription, when given) in `tx`.
fn insert_sm(
    tx: &Transaction<'_>,
    p: SmPolicy,
    ssv: SsvUpdates,
    udr_subscription: Option<String>,
) -> store::Result<()> {
    if let Some(uri) = &udr_subscription {
        tx.execute(
            "INSERT INTO pcf_udr_subscription (supi, uri) VALUES (?1, ?2)
             ON CONFLICT (supi) DO UPDATE SET uri = excluded.uri",
            params![p.supi, uri],
        )?;
    }
    tx.execute(
        "INSERT INTO pcf_sm_policy
         (sm_policy_id, supi, context, decision, policy_version, updated_ms, binding_uri)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![p.id, p.supi, p.context, p.decision, p.policy_version, p.updated_ms, p.binding],
    )?;
    merge_ssv(tx, &p.supi, ssv)
}

impl PcfStore for SqlitePcfStore {
    fn subscriber(&self, supi: &str) -> StoreFuture<'_, Subscriber> {
        let supi = supi.to_string();
        Box::pin(self.db.read(move |c| read_subscriber(c, &supi)))
    }

    fn get_sm_with_subscriber(&self, id: &str) -> StoreFuture<'_, Option<(SmPolicy, Subscriber)>> {
        let id = id.to_string();
        Box::pin(self.db.read(move |c| {
            let sql = format!("SELECT {SM_COLUMNS} FROM pcf_sm_policy WHERE sm_policy_id = ?1");
            let Some(p) = c.query_row(&sql, [&id], sm_row).optional()? else { return Ok(None) };
            let kept = read_subscriber(c, &p.supi)?;
            Ok(Some((p, kept)))
        }))
    }

    fn create_sm(
        &self,
        p: SmPolicy,
        ssv: SsvUpdates,
        udr_subscription: Option<String>,
    ) -> StoreFuture<'_, ()> {
        Box::pin(self.db.write(move |tx| insert_sm(tx, p, ssv, udr_subscription)))
    }

    fn create_sm_with_chf(
        &self,
        p: SmPolicy,
        ssv: SsvUpdates,
        udr_subscription: Option<String>,
        chf: ChfSubscription,
    ) -> StoreFuture<'_, ()> {
        Box::pin(self.db.write(move |tx| {
            let statuses = serde_json::to_vec(&chf.statuses).map_err(store::Error::backend)?;
            tx.execute(
                "INSERT INTO pcf_chf_subscription (supi, uri, statuses) VALUES (?1, ?2, ?3)
                 ON CONFLICT (supi) DO UPDATE SET uri = excluded.uri, statuses = excluded.statuses",
                params![chf.supi, chf.uri, statuses],
            )?;
            insert_sm(tx, p, ssv, udr_subscription)
        }))
    }

    fn set_chf_statuses(&self, supi: &str, statuses: Map<String, Value>) -> StoreFuture<'_, bool> {
        let supi = supi.to_string();
        Box::pin(self.db.write(move |tx| {
            let json = serde_json::to_vec(&statuses).map_err(store::Error::backend)?;
            Ok(tx.execute(
                "UPDATE pcf_chf_subscription SET statuses = ?2 WHERE supi = ?1",
                params![supi, json],
            )? > 0)
        }))
    }

    fn drop_chf_subscription(&self, supi: &str, uri: &str) -> StoreFuture<'_, bool> {
        let (supi, uri) = (supi.to_string(), uri.to_string());
        Box::pin(self.db.write(move |tx| {
            Ok(tx.execute(
                "DELETE FROM pcf_chf_subscription WHERE supi = ?1 AND uri = ?2",
                params![supi, uri],
            )? > 0)
        }))
    }

    fn chf_subscriptions(&self) -> StoreFuture<'_, Vec<ChfSubscription>> {
        Box::pin(self.db.read(|c| {
            let mut st = c.prepare("SELECT supi, uri, statuses FROM pcf_chf_subscription")?;
            let rows = st.query_map([], |r| {
                let json: Vec<u8> = r.get(2)?;
                let statuses = match serde_json::from_slice::<Value>(&json) {
                    Ok(Value::Object(m)) => m,
                    _ => Map::new(),
                };
                Ok(ChfSubscription { supi: r.get(0)?, uri: r.get(1)?, statuses })
            })?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        }))
    }

    fn get_sm(&self, id: &str) -> StoreFuture<'_, Option<SmPolicy>> {
        let id = id.to_string();
        Box::pin(self.db.read(move |c| {
            let sql = format!("SELECT {SM_COLUMNS} FROM pcf_sm_policy WHERE sm_policy_id = ?1");
            Ok(c.query_row(&sql, [&id], sm_row).optional()?)
        }))
    }

    fn sm_of(&self, supi: &str) -> StoreFuture<'_, Vec<SmPolicy>> {
        let supi = supi.to_string();
        Box::pin(self.db.read(move |c| {
            let sql = format!("SELECT {SM_COLUMNS} FROM pcf_sm_policy WHERE supi = ?1");
            let mut st = c.prepare(&sql)?;
            let rows = st.query_map([&supi], sm_row)?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        }))
    }

    fn update_sm(&self, p: SmPolicy, ssv: SsvUpdates) -> StoreFuture<'_, bool> {
        Box::pin(self.db.write(move |tx| {
            let n = tx.execute(
                "UPDATE pcf_sm_policy SET context = ?2, decision = ?3, policy_version = ?4,
                 updated_ms = ?5 WHERE sm_policy_id = ?1",
                params![p.id, p.context, p.decision, p.policy_version, p.updated_ms],
            )?;
            if n == 0 {
                return Ok(false);
            }
            merge_ssv(tx, &p.supi, ssv)?;
            Ok(true)
        }))
    }

    fn delete_sm(&self, id: &str) -> StoreFuture<'_, Option<Deleted>> {
        let id = id.to_string();
        Box::pin(self.db.write(move |tx| {
            let gone: Option<(String, Option<String>)> = tx
                .query_row(
                    "DELETE FROM pcf_sm_policy WHERE sm_policy_id = ?1 RETURNING supi, binding_uri",
                    [&id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            let Some((supi, binding)) = gone else { return Ok(None) };
            let left: i64 =
                tx.query_row("SELECT COUNT(*) FROM pcf_sm_policy WHERE supi = ?1", [&supi], |r| {
                    r.get(0)
                })?;
            // The subscriber's subscriptions go with its last association.
            let last = |sql: &str| -> rusqlite::Result<Option<String>> {
                if left > 0 {
                    return Ok(None);
                }
                tx.query_row(sql, [&supi], |r| r.get(0)).optional()
            };
            let udr_subscription =
                last("DELETE FROM pcf_udr_subscription WHERE supi = ?1 RETURNING uri")?;
            let chf_subscription =
                last("DELETE FROM pcf_chf_subscription WHERE supi = ?1 RETURNING uri")?;
            Ok(Some(Deleted { supi, binding, udr_subscription, chf_subscription }))
        }))
    }

    fn create_assoc(&self, a: Association, ssv: SsvUpdates) -> StoreFuture<'_, ()> {
        Box::pin(self.db.write(move |tx| {
            tx.execute(
                "INSERT INTO pcf_policy_association
                 (kind, assoc_id, supi, context, decision, policy_version, updated_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    a.kind.as_str(),
                    a.id,
                    a.supi,
                    a.context,
                    a.decision,
                    a.policy_version,
                    a.updated_ms
                ],
            )?;
            merge_ssv(tx, &a.supi, ssv)
        }))
    }

    fn get_assoc(&self, kind: Kind, id: &str) -> StoreFuture<'_, Option<Association>> {
        let id = id.to_string();
        Box::pin(self.db.read(move |c| {
            Ok(c.query_row(
                "SELECT supi, context, decision, policy_version, updated_ms
                 FROM pcf_policy_association WHERE kind = ?1 AND assoc_id = ?2",
                params![kind.as_str(), id],
                |r| {
                    Ok(Association {
                        kind,
                        id: id.clone(),
                        supi: r.get(0)?,
                        context: r.get(1)?,
                        decision: r.get(2)?,
                        policy_version: r.get(3)?,
                        updated_ms: r.get(4)?,
                    })
                },
            )
            .optional()?)
        }))
    }

    fn update_assoc(&self, a: Association, ssv: SsvUpdates) -> StoreFuture<'_, bool> {
        Box::pin(self.db.write(move |tx| {
            let n = tx.execute(
                "UPDATE pcf_policy_association SET context = ?3, decision = ?4,
                 policy_version = ?5, updated_ms = ?6 WHERE kind = ?1 AND assoc_id = ?2",
                params![
                    a.kind.as_str(),
                    a.id,
                    a.context,
                    a.decision,
                    a.policy_version,
                    a.updated_ms
                ],
            )?;
            if n == 0 {
                return Ok(false);
            }
            merge_ssv(tx, &a.supi, ssv)?;
            Ok(true)
        }))
    }

    fn delete_assoc(&self, kind: Kind, id: &str) -> StoreFuture<'_, bool> {
        let id = id.to_string();
        Box::pin(self.db.write(move |tx| {
            Ok(tx.execute(
                "DELETE FROM pcf_policy_association WHERE kind = ?1 AND assoc_id = ?2",
                params![kind.as_str(), id],
            )? > 0)
        }))
    }

    fn count_sm(&self) -> StoreFuture<'_, u64> {
        Box::pin(
            self.db
                .read(|c| Ok(c.query_row("SELECT COUNT(*) FROM pcf_sm_policy", [], |r| r.get(0))?)),
        )
    }
}
