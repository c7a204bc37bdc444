//! [`PcfStore`] on the embedded SQLite store: schema, migrations and SQL.

use rusqlite::{params, OptionalExtension, Transaction};
use serde_json::{Map, Value};
use store::{Migration, SqliteStore};

use super::{
    AppSession, Association, ChfSubscription, Deleted, Kind, PcfStore, SmPolicy, Snapshot,
    SsvUpdates, StoreFuture, Subscriber, SySession, UeDelivery, UsageRow, UsageTotals,
};

mod policy_version;

pub const MIGRATIONS: [Migration; 14] = [
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
    Migration::new(
        "pcf-0007-ue-delivery",
        "CREATE TABLE pcf_ue_delivery (
            assoc_id TEXT PRIMARY KEY NOT NULL,
            pti INTEGER NOT NULL,
            ursp_digest TEXT NOT NULL,
            policy_version TEXT NOT NULL,
            outcome TEXT NOT NULL,
            n1_subscription TEXT,
            updated_ms INTEGER NOT NULL
        )",
    ),
    Migration::new(
        "pcf-0008-app-session",
        "CREATE TABLE pcf_app_session (
            app_session_id TEXT PRIMARY KEY NOT NULL,
            sm_policy_id TEXT NOT NULL,
            supi TEXT NOT NULL,
            context BLOB NOT NULL,
            rules BLOB NOT NULL,
            updated_ms INTEGER NOT NULL
        );
        CREATE INDEX pcf_app_session_sm ON pcf_app_session (sm_policy_id)",
    ),
    Migration::new(
        "pcf-0009-association-udr-subscription",
        "ALTER TABLE pcf_policy_association ADD COLUMN udr_subscription TEXT",
    ),
    // The subscriber's tables keyed by SUPI, rebuilt WITHOUT ROWID: a TEXT primary key on a
    // rowid table is two b-trees (the rows and an index on the key), so a subscriber's first
    // association wrote six pages to the WAL for these three rows, and its last delete six
    // again; keyed by the SUPI itself each row is one page. Their rows are small (a URI, a
    // few state variables), as WITHOUT ROWID wants (docs/BENCHMARKS.md, s23).
    Migration::new(
        "pcf-0010-subscriber-tables-without-rowid",
        "CREATE TABLE pcf_ssv_0010 (
            supi TEXT PRIMARY KEY NOT NULL,
            json BLOB NOT NULL
        ) WITHOUT ROWID;
        INSERT INTO pcf_ssv_0010 (supi, json) SELECT supi, json FROM pcf_ssv;
        DROP TABLE pcf_ssv;
        ALTER TABLE pcf_ssv_0010 RENAME TO pcf_ssv;
        CREATE TABLE pcf_udr_subscription_0010 (
            supi TEXT PRIMARY KEY NOT NULL,
            uri TEXT NOT NULL
        ) WITHOUT ROWID;
        INSERT INTO pcf_udr_subscription_0010 (supi, uri) SELECT supi, uri FROM pcf_udr_subscription;
        DROP TABLE pcf_udr_subscription;
        ALTER TABLE pcf_udr_subscription_0010 RENAME TO pcf_udr_subscription;
        CREATE TABLE pcf_chf_subscription_0010 (
            supi TEXT PRIMARY KEY NOT NULL,
            uri TEXT NOT NULL,
            statuses BLOB NOT NULL
        ) WITHOUT ROWID;
        INSERT INTO pcf_chf_subscription_0010 (supi, uri, statuses)
            SELECT supi, uri, statuses FROM pcf_chf_subscription;
        DROP TABLE pcf_chf_subscription;
        ALTER TABLE pcf_chf_subscription_0010 RENAME TO pcf_chf_subscription",
    ),
    // A subscriber's Sy session with its OCS (crate::sy); keyed by SUPI, one small row.
    Migration::new(
        "pcf-0011-sy-session",
        "CREATE TABLE pcf_sy_session (
            supi TEXT PRIMARY KEY NOT NULL,
            session_id TEXT NOT NULL,
            ocs_host TEXT NOT NULL,
            ocs_realm TEXT NOT NULL,
            counters BLOB NOT NULL,
            statuses BLOB NOT NULL
        ) WITHOUT ROWID",
    ),
    // A subscriber's accumulated usage per monitoring key (crate::usage). Keyed by the pair
    // itself, WITHOUT ROWID as the other subscriber tables: one page per report's write.
    Migration::new(
        "pcf-0012-usage",
        "CREATE TABLE pcf_usage (
            supi TEXT NOT NULL,
            monitoring_key TEXT NOT NULL,
            vol_total INTEGER NOT NULL,
            vol_uplink INTEGER NOT NULL,
            vol_downlink INTEGER NOT NULL,
            time_s INTEGER NOT NULL,
            updated_ms INTEGER NOT NULL,
            PRIMARY KEY (supi, monitoring_key)
        ) WITHOUT ROWID",
    ),
    // A subscriber's SM associations are asked of the resident store's memory
    // (store::resident), which also tells a delete whether it takes the subscriber's last
    // (PcfStore::delete_sm_known): the index only cost every create and delete (Gx CCR-I and
    // CCR-T) a write at a random page of one more b-tree (docs/BENCHMARKS.md, s24).
    Migration::new("pcf-0013-sm-policy-without-supi-index", "DROP INDEX pcf_sm_policy_supi"),
    // Policy project versions (crate::policy_versions): each version's files as one JSON
    // document, and every activation, so a restart puts the same version in force and a
    // rollback can walk back (an activation taken back keeps its row, rolled_back_ms set).
    Migration::new(
        "pcf-0014-policy-version",
        "CREATE TABLE pcf_policy_version (
            version_id INTEGER PRIMARY KEY NOT NULL,
            name TEXT NOT NULL,
            project_version TEXT NOT NULL,
            description TEXT NOT NULL,
            source_dir TEXT,
            created_ms INTEGER NOT NULL,
            files BLOB NOT NULL
        );
        CREATE TABLE pcf_policy_activation (
            seq INTEGER PRIMARY KEY NOT NULL,
            version_id INTEGER NOT NULL,
            activated_ms INTEGER NOT NULL,
            rolled_back_ms INTEGER
        );",
    ),
];

const APP_COLUMNS: &str = "app_session_id, sm_policy_id, supi, context, rules, updated_ms";

fn app_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<AppSession> {
    Ok(AppSession {
        id: r.get(0)?,
        sm_policy_id: r.get(1)?,
        supi: r.get(2)?,
        context: r.get(3)?,
        rules: r.get(4)?,
        updated_ms: r.get(5)?,
    })
}

/// Replaces an association's decision (an application session's rules in or out of it);
/// false when it no longer exists.
fn put_sm_decision(tx: &Transaction<'_>, p: &SmPolicy) -> store::Result<bool> {
    Ok(tx.execute(
        "UPDATE pcf_sm_policy SET decision = ?2, policy_version = ?3, updated_ms = ?4
         WHERE sm_policy_id = ?1",
        params![p.id, p.decision, p.policy_version, p.updated_ms],
    )? > 0)
}

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

const ASSOC_COLUMNS: &str =
    "kind, assoc_id, supi, context, decision, policy_version, updated_ms, udr_subscription";

/// A row of `pcf_policy_association` ([`ASSOC_COLUMNS`]); an unknown kind is an error of the
/// store.
fn assoc_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<store::Result<Association>> {
    let kind: String = r.get(0)?;
    let id: String = r.get(1)?;
    let kind = match kind.as_str() {
        "AM" => Kind::Am,
        "UE" => Kind::Ue,
        other => {
            return Ok(Err(store::Error::backend_msg(format!(
                "association {id} of unknown kind {other}"
            ))))
        }
    };
    Ok(Ok(Association {
        kind,
        id,
        supi: r.get(2)?,
        context: r.get(3)?,
        decision: r.get(4)?,
        policy_version: r.get(5)?,
        updated_ms: r.get(6)?,
        udr_subscription: r.get(7)?,
    }))
}

/// A statement from the connection's cache: parsed once, not at every call (SQL parsing was
/// a tenth of the writer's time).
fn exec(c: &rusqlite::Connection, sql: &str, p: impl rusqlite::Params) -> rusqlite::Result<usize> {
    c.prepare_cached(sql)?.execute(p)
}

/// The one row of a cached statement.
fn row<T>(
    c: &rusqlite::Connection,
    sql: &str,
    p: impl rusqlite::Params,
    f: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    c.prepare_cached(sql)?.query_row(p, f)
}

const UE_DELIVERY_COLUMNS: &str =
    "assoc_id, pti, ursp_digest, policy_version, outcome, n1_subscription, updated_ms";

fn ue_delivery_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<UeDelivery> {
    Ok(UeDelivery {
        assoc_id: r.get(0)?,
        pti: r.get(1)?,
        ursp_digest: r.get(2)?,
        policy_version: r.get(3)?,
        outcome: r.get(4)?,
        n1_subscription: r.get(5)?,
        updated_ms: r.get(6)?,
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
        row(c, "SELECT json FROM pcf_ssv WHERE supi = ?1", [supi], |r| r.get(0)).optional()?;
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
    let udr_subscription =
        row(c, "SELECT uri FROM pcf_udr_subscription WHERE supi = ?1", [supi], |r| r.get(0))
            .optional()?;
    Ok(Subscriber { ssv, udr_subscription })
}

/// Merges `updates` into the subscriber's state (null removes a variable) in `tx`.
fn merge_ssv(tx: &Transaction<'_>, supi: &str, updates: SsvUpdates) -> store::Result<()> {
    if updates.is_empty() {
        return Ok(());
    }
    let mut m = read_ssv(tx, supi)?;
    super::merge_ssv(&mut m, updates);
    let json = serde_json::to_vec(&m).map_err(store::Error::backend)?;
    exec(
        tx,
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
        exec(
            tx,
            "INSERT INTO pcf_udr_subscription (supi, uri) VALUES (?1, ?2)
             ON CONFLICT (supi) DO UPDATE SET uri = excluded.uri",
            params![p.supi, uri],
        )?;
    }
    exec(
        tx,
        "INSERT INTO pcf_sm_policy
         (sm_policy_id, supi, context, decision, policy_version, updated_ms, binding_uri)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![p.id, p.supi, p.context, p.decision, p.policy_version, p.updated_ms, p.binding],
    )?;
    merge_ssv(tx, &p.supi, ssv)
}

/// Replaces an association's context, decision and binding and merges `ssv`, in `tx`; false
/// when it no longer exists.
fn update_sm_tx(tx: &Transaction<'_>, p: SmPolicy, ssv: SsvUpdates) -> store::Result<bool> {
    let n = exec(
        tx,
        "UPDATE pcf_sm_policy SET context = ?2, decision = ?3, policy_version = ?4,
         updated_ms = ?5, binding_uri = ?6 WHERE sm_policy_id = ?1",
        params![p.id, p.context, p.decision, p.policy_version, p.updated_ms, p.binding],
    )?;
    if n == 0 {
        return Ok(false);
    }
    merge_ssv(tx, &p.supi, ssv)?;
    Ok(true)
}

/// Removes an association, its application sessions and, with the subscriber's last, its
/// subscriptions' rows, in `tx`. `last`: whether it is the subscriber's last association, when
/// the caller knows; otherwise counted here, by a scan of the table (no index by subscriber).
fn delete_sm_tx(
    tx: &Transaction<'_>,
    id: &str,
    last: Option<bool>,
) -> store::Result<Option<Deleted>> {
    let gone: Option<(String, Option<String>)> = row(
        tx,
        "DELETE FROM pcf_sm_policy WHERE sm_policy_id = ?1 RETURNING supi, binding_uri",
        [id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()?;
    let Some((supi, binding)) = gone else { return Ok(None) };
    // Its application sessions end with it (TS 29.514 §4.2.5.2).
    exec(tx, "DELETE FROM pcf_app_session WHERE sm_policy_id = ?1", [id])?;
    let last = match last {
        Some(l) => l,
        None => {
            let sql = "SELECT EXISTS (SELECT 1 FROM pcf_sm_policy WHERE supi = ?1)";
            !row(tx, sql, [&supi], |r| r.get::<_, bool>(0))?
        }
    };
    // The subscriber's subscriptions go with its last association.
    let last = |sql: &str| -> rusqlite::Result<Option<String>> {
        if !last {
            return Ok(None);
        }
        row(tx, sql, [&supi], |r| r.get(0)).optional()
    };
    let udr_subscription = last("DELETE FROM pcf_udr_subscription WHERE supi = ?1 RETURNING uri")?;
    let chf_subscription = last("DELETE FROM pcf_chf_subscription WHERE supi = ?1 RETURNING uri")?;
    Ok(Some(Deleted { supi, binding, udr_subscription, chf_subscription }))
}

/// Octets and seconds as SQLite integers (i64): a total past 2^63 is kept at the largest.
fn sql_u64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Writes a subscriber's new usage totals (absolute: computed under its hold) in `tx`.
fn put_usage(tx: &Transaction<'_>, usage: &[UsageRow]) -> store::Result<()> {
    for u in usage {
        let t = &u.totals;
        exec(
            tx,
            "INSERT INTO pcf_usage
             (supi, monitoring_key, vol_total, vol_uplink, vol_downlink, time_s, updated_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT (supi, monitoring_key) DO UPDATE SET vol_total = excluded.vol_total,
                 vol_uplink = excluded.vol_uplink, vol_downlink = excluded.vol_downlink,
                 time_s = excluded.time_s, updated_ms = excluded.updated_ms",
            params![
                u.supi,
                u.key,
                sql_u64(t.total),
                sql_u64(t.uplink),
                sql_u64(t.downlink),
                sql_u64(t.time),
                u.updated_ms
            ],
        )?;
    }
    Ok(())
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
            let Some(p) = row(c, &sql, [&id], sm_row).optional()? else { return Ok(None) };
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
            exec(
                tx,
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
            Ok(exec(
                tx,
                "UPDATE pcf_chf_subscription SET statuses = ?2 WHERE supi = ?1",
                params![supi, json],
            )? > 0)
        }))
    }

    fn drop_chf_subscription(&self, supi: &str, uri: &str) -> StoreFuture<'_, bool> {
        let (supi, uri) = (supi.to_string(), uri.to_string());
        Box::pin(self.db.write(move |tx| {
            Ok(exec(
                tx,
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
            Ok(row(c, &sql, [&id], sm_row).optional()?)
        }))
    }

    // A scan since pcf-0013 (no index by subscriber): the PCF asks its resident store, which
    // answers from memory; this serves tools and tests.
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
        Box::pin(self.db.write(move |tx| update_sm_tx(tx, p, ssv)))
    }

    fn touch_sm(&self, id: &str, updated_ms: i64) -> StoreFuture<'_, bool> {
        let id = id.to_string();
        Box::pin(self.db.write(move |tx| {
            Ok(exec(
                tx,
                "UPDATE pcf_sm_policy SET updated_ms = ?2 WHERE sm_policy_id = ?1",
                params![id, updated_ms],
            )? > 0)
        }))
    }

    fn delete_sm(&self, id: &str) -> StoreFuture<'_, Option<Deleted>> {
        let id = id.to_string();
        Box::pin(self.db.write(move |tx| delete_sm_tx(tx, &id, None)))
    }

    fn delete_sm_known(
        &self,
        id: &str,
        last: bool,
        usage: Vec<UsageRow>,
    ) -> StoreFuture<'_, Option<Deleted>> {
        let id = id.to_string();
        Box::pin(self.db.write(move |tx| {
            let Some(d) = delete_sm_tx(tx, &id, Some(last))? else { return Ok(None) };
            put_usage(tx, &usage)?;
            Ok(Some(d))
        }))
    }

    fn create_assoc(&self, a: Association, ssv: SsvUpdates) -> StoreFuture<'_, ()> {
        Box::pin(self.db.write(move |tx| {
            exec(
                tx,
                "INSERT INTO pcf_policy_association
                 (kind, assoc_id, supi, context, decision, policy_version, updated_ms,
                  udr_subscription)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    a.kind.as_str(),
                    a.id,
                    a.supi,
                    a.context,
                    a.decision,
                    a.policy_version,
                    a.updated_ms,
                    a.udr_subscription
                ],
            )?;
            merge_ssv(tx, &a.supi, ssv)
        }))
    }

    fn get_assoc(&self, kind: Kind, id: &str) -> StoreFuture<'_, Option<Association>> {
        let id = id.to_string();
        Box::pin(self.db.read(move |c| {
            let found = row(
                c,
                &format!("SELECT {ASSOC_COLUMNS} FROM pcf_policy_association WHERE kind = ?1 AND assoc_id = ?2"),
                params![kind.as_str(), id],
                assoc_row,
            )
            .optional()?;
            found.transpose()
        }))
    }

    fn assoc_of(&self, kind: Kind, supi: &str) -> StoreFuture<'_, Vec<Association>> {
        let supi = supi.to_string();
        Box::pin(self.db.read(move |c| {
            let sql = format!(
                "SELECT {ASSOC_COLUMNS} FROM pcf_policy_association WHERE kind = ?1 AND supi = ?2"
            );
            let mut st = c.prepare_cached(&sql)?;
            let rows = st.query_map(params![kind.as_str(), supi], assoc_row)?;
            let mut out = Vec::new();
            for row in rows {
                out.push(row??);
            }
            Ok(out)
        }))
    }

    fn update_assoc(&self, a: Association, ssv: SsvUpdates) -> StoreFuture<'_, bool> {
        Box::pin(self.db.write(move |tx| {
            let n = exec(
                tx,
                "UPDATE pcf_policy_association SET context = ?3, decision = ?4,
                 policy_version = ?5, updated_ms = ?6, udr_subscription = ?7
                 WHERE kind = ?1 AND assoc_id = ?2",
                params![
                    a.kind.as_str(),
                    a.id,
                    a.context,
                    a.decision,
                    a.policy_version,
                    a.updated_ms,
                    a.udr_subscription
                ],
            )?;
            if n == 0 {
                return Ok(false);
            }
            merge_ssv(tx, &a.supi, ssv)?;
            Ok(true)
        }))
    }

    fn delete_assoc(&self, kind: Kind, id: &str) -> StoreFuture<'_, Option<Association>> {
        let id = id.to_string();
        Box::pin(self.db.write(move |tx| {
            let gone = row(
                tx,
                &format!(
                    "DELETE FROM pcf_policy_association WHERE kind = ?1 AND assoc_id = ?2
                     RETURNING {ASSOC_COLUMNS}"
                ),
                params![kind.as_str(), id],
                assoc_row,
            )
            .optional()?;
            gone.transpose()
        }))
    }

    fn snapshot(&self) -> StoreFuture<'_, Snapshot> {
        Box::pin(self.db.read(|c| {
            let mut snap = Snapshot::default();
            let sql = format!("SELECT {SM_COLUMNS} FROM pcf_sm_policy");
            let mut st = c.prepare(&sql)?;
            snap.sm = st.query_map([], sm_row)?.collect::<rusqlite::Result<Vec<_>>>()?;
            let mut st =
                c.prepare(&format!("SELECT {ASSOC_COLUMNS} FROM pcf_policy_association"))?;
            let rows = st.query_map([], assoc_row)?;
            for row in rows {
                snap.associations.push(row??);
            }
            let mut subscribers: std::collections::BTreeMap<String, Subscriber> =
                Default::default();
            let mut st = c.prepare("SELECT supi, json FROM pcf_ssv")?;
            let rows =
                st.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?)))?;
            for row in rows {
                let (supi, json) = row?;
                if let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(&json) {
                    subscribers.entry(supi).or_default().ssv = m;
                }
            }
            let mut st = c.prepare("SELECT supi, uri FROM pcf_udr_subscription")?;
            let rows =
                st.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
            for row in rows {
                let (supi, uri) = row?;
                subscribers.entry(supi).or_default().udr_subscription = Some(uri);
            }
            snap.subscribers = subscribers.into_iter().collect();
            let sql = format!("SELECT {APP_COLUMNS} FROM pcf_app_session");
            let mut st = c.prepare(&sql)?;
            snap.apps = st.query_map([], app_row)?.collect::<rusqlite::Result<Vec<_>>>()?;
            let sql = format!("SELECT {UE_DELIVERY_COLUMNS} FROM pcf_ue_delivery");
            let mut st = c.prepare(&sql)?;
            snap.ue_deliveries =
                st.query_map([], ue_delivery_row)?.collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(snap)
        }))
    }

    fn stale_sm(&self, before_ms: i64, limit: usize) -> StoreFuture<'_, Vec<SmPolicy>> {
        Box::pin(self.db.read(move |c| {
            let sql = format!(
                "SELECT {SM_COLUMNS} FROM pcf_sm_policy WHERE updated_ms < ?1
                 ORDER BY updated_ms LIMIT ?2"
            );
            let mut st = c.prepare(&sql)?;
            let rows = st.query_map(params![before_ms, limit as i64], sm_row)?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        }))
    }

    fn stale_assoc(&self, before_ms: i64, limit: usize) -> StoreFuture<'_, Vec<Association>> {
        Box::pin(self.db.read(move |c| {
            let mut st = c.prepare(&format!(
                "SELECT {ASSOC_COLUMNS} FROM pcf_policy_association WHERE updated_ms < ?1
                     ORDER BY updated_ms LIMIT ?2"
            ))?;
            let rows = st.query_map(params![before_ms, limit as i64], assoc_row)?;
            let mut out = Vec::new();
            for row in rows {
                out.push(row??);
            }
            Ok(out)
        }))
    }

    fn ue_delivery(&self, assoc_id: &str) -> StoreFuture<'_, Option<UeDelivery>> {
        let id = assoc_id.to_string();
        Box::pin(self.db.read(move |c| {
            Ok(row(
                c,
                &format!("SELECT {UE_DELIVERY_COLUMNS} FROM pcf_ue_delivery WHERE assoc_id = ?1"),
                params![id],
                ue_delivery_row,
            )
            .optional()?)
        }))
    }

    fn put_ue_delivery(&self, d: UeDelivery) -> StoreFuture<'_, ()> {
        Box::pin(self.db.write(move |tx| {
            exec(
                tx,
                &format!(
                    "INSERT OR REPLACE INTO pcf_ue_delivery ({UE_DELIVERY_COLUMNS})
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
                ),
                params![
                    d.assoc_id,
                    d.pti,
                    d.ursp_digest,
                    d.policy_version,
                    d.outcome,
                    d.n1_subscription,
                    d.updated_ms
                ],
            )?;
            Ok(())
        }))
    }

    fn ue_delivery_outcome(
        &self,
        assoc_id: &str,
        pti: u8,
        outcome: &'static str,
        only_from: Option<&'static str>,
    ) -> StoreFuture<'_, bool> {
        let id = assoc_id.to_string();
        let now = chrono::Utc::now().timestamp_millis();
        Box::pin(self.db.write(move |tx| {
            Ok(exec(
                tx,
                "UPDATE pcf_ue_delivery SET outcome = ?3, updated_ms = ?5
                 WHERE assoc_id = ?1 AND pti = ?2 AND (?4 IS NULL OR outcome = ?4)",
                params![id, pti, outcome, only_from, now],
            )? > 0)
        }))
    }

    fn delete_ue_delivery(&self, assoc_id: &str) -> StoreFuture<'_, Option<UeDelivery>> {
        let id = assoc_id.to_string();
        Box::pin(self.db.write(move |tx| {
            let d = row(
                tx,
                &format!("SELECT {UE_DELIVERY_COLUMNS} FROM pcf_ue_delivery WHERE assoc_id = ?1"),
                params![id],
                ue_delivery_row,
            )
            .optional()?;
            if d.is_some() {
                exec(tx, "DELETE FROM pcf_ue_delivery WHERE assoc_id = ?1", params![id])?;
            }
            Ok(d)
        }))
    }

    fn count_sm(&self) -> StoreFuture<'_, u64> {
        Box::pin(
            self.db.read(|c| Ok(row(c, "SELECT COUNT(*) FROM pcf_sm_policy", [], |r| r.get(0))?)),
        )
    }

    fn sm_of_ue(
        &self,
        ipv4: Option<&str>,
        ipv6: Option<&str>,
        dnn: Option<&str>,
    ) -> StoreFuture<'_, Option<SmPolicy>> {
        let want = super::UeAddress::of_request(ipv4, ipv6, dnn);
        Box::pin(self.db.read(move |c| {
            let Some(want) = want else { return Ok(None) };
            // Not a hot path (the resident layer has its index): a scan, newest first.
            let sql = format!("SELECT {SM_COLUMNS} FROM pcf_sm_policy ORDER BY sm_policy_id DESC");
            let mut st = c.prepare(&sql)?;
            for p in st.query_map([], sm_row)? {
                let p = p?;
                if super::UeAddress::of_context(&p.context).is_some_and(|a| want.matches(&a)) {
                    return Ok(Some(p));
                }
            }
            Ok(None)
        }))
    }

    fn create_app(&self, app: AppSession, sm: SmPolicy) -> StoreFuture<'_, bool> {
        Box::pin(self.db.write(move |tx| {
            if !put_sm_decision(tx, &sm)? {
                return Ok(false);
            }
            tx.execute(
                "INSERT INTO pcf_app_session
                 (app_session_id, sm_policy_id, supi, context, rules, updated_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![app.id, app.sm_policy_id, app.supi, app.context, app.rules, app.updated_ms],
            )?;
            Ok(true)
        }))
    }

    fn update_app(&self, app: AppSession, sm: SmPolicy) -> StoreFuture<'_, bool> {
        Box::pin(self.db.write(move |tx| {
            let n = tx.execute(
                "UPDATE pcf_app_session SET context = ?2, rules = ?3, updated_ms = ?4
                 WHERE app_session_id = ?1",
                params![app.id, app.context, app.rules, app.updated_ms],
            )?;
            // An association's delete takes its application sessions in the same commit, so
            // a session still here has its association.
            Ok(n > 0 && put_sm_decision(tx, &sm)?)
        }))
    }

    fn delete_app(&self, id: &str, sm: Option<SmPolicy>) -> StoreFuture<'_, Option<AppSession>> {
        let id = id.to_string();
        Box::pin(self.db.write(move |tx| {
            let sql = format!(
                "DELETE FROM pcf_app_session WHERE app_session_id = ?1 RETURNING {APP_COLUMNS}"
            );
            let Some(gone) = tx.query_row(&sql, [&id], app_row).optional()? else {
                return Ok(None);
            };
            if let Some(sm) = &sm {
                put_sm_decision(tx, sm)?;
            }
            Ok(Some(gone))
        }))
    }

    fn get_app(&self, id: &str) -> StoreFuture<'_, Option<AppSession>> {
        let id = id.to_string();
        Box::pin(self.db.read(move |c| {
            let sql =
                format!("SELECT {APP_COLUMNS} FROM pcf_app_session WHERE app_session_id = ?1");
            Ok(c.query_row(&sql, [&id], app_row).optional()?)
        }))
    }

    fn apps_of(&self, sm_policy_id: &str) -> StoreFuture<'_, Vec<AppSession>> {
        let sm = sm_policy_id.to_string();
        Box::pin(self.db.read(move |c| {
            let sql = format!("SELECT {APP_COLUMNS} FROM pcf_app_session WHERE sm_policy_id = ?1");
            let mut st = c.prepare(&sql)?;
            let rows = st.query_map([&sm], app_row)?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        }))
    }

    fn put_sy_session(&self, s: SySession) -> StoreFuture<'_, ()> {
        Box::pin(self.db.write(move |tx| {
            let counters = serde_json::to_vec(&s.counters).map_err(store::Error::backend)?;
            let statuses = serde_json::to_vec(&s.statuses).map_err(store::Error::backend)?;
            exec(
                tx,
                "INSERT INTO pcf_sy_session (supi, session_id, ocs_host, ocs_realm, counters, statuses)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (supi) DO UPDATE SET session_id = excluded.session_id,
                    ocs_host = excluded.ocs_host, ocs_realm = excluded.ocs_realm,
                    counters = excluded.counters, statuses = excluded.statuses",
                params![s.supi, s.session_id, s.ocs_host, s.ocs_realm, counters, statuses],
            )?;
            Ok(())
        }))
    }

    fn drop_sy_session(&self, supi: &str, session_id: &str) -> StoreFuture<'_, bool> {
        let (supi, sid) = (supi.to_string(), session_id.to_string());
        Box::pin(self.db.write(move |tx| {
            Ok(exec(
                tx,
                "DELETE FROM pcf_sy_session WHERE supi = ?1 AND session_id = ?2",
                params![supi, sid],
            )? > 0)
        }))
    }

    fn sy_sessions(&self) -> StoreFuture<'_, Vec<SySession>> {
        Box::pin(self.db.read(|c| {
            let mut st = c.prepare(
                "SELECT supi, session_id, ocs_host, ocs_realm, counters, statuses FROM pcf_sy_session",
            )?;
            let rows = st.query_map([], |r| {
                let counters: Vec<u8> = r.get(4)?;
                let statuses: Vec<u8> = r.get(5)?;
                Ok(SySession {
                    supi: r.get(0)?,
                    session_id: r.get(1)?,
                    ocs_host: r.get(2)?,
                    ocs_realm: r.get(3)?,
                    counters: serde_json::from_slice(&counters).unwrap_or_default(),
                    statuses: match serde_json::from_slice::<Value>(&statuses) {
                        Ok(Value::Object(m)) => m,
                        _ => Map::new(),
                    },
                })
            })?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        }))
    }

    fn usage_all(&self) -> StoreFuture<'_, Vec<UsageRow>> {
        Box::pin(self.db.read(|c| {
            let mut st = c.prepare(
                "SELECT supi, monitoring_key, vol_total, vol_uplink, vol_downlink, time_s,
                 updated_ms FROM pcf_usage",
            )?;
            let u = |r: &rusqlite::Row<'_>, i| r.get::<_, i64>(i).map(|v| v.max(0) as u64);
            let rows = st.query_map([], |r| {
                Ok(UsageRow {
                    supi: r.get(0)?,
                    key: r.get(1)?,
                    totals: UsageTotals {
                        total: u(r, 2)?,
                        uplink: u(r, 3)?,
                        downlink: u(r, 4)?,
                        time: u(r, 5)?,
                    },
                    updated_ms: r.get(6)?,
                })
            })?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        }))
    }

    fn update_sm_with_usage(
        &self,
        p: SmPolicy,
        ssv: SsvUpdates,
        usage: Vec<UsageRow>,
    ) -> StoreFuture<'_, bool> {
        Box::pin(self.db.write(move |tx| {
            if !update_sm_tx(tx, p, ssv)? {
                return Ok(false);
            }
            put_usage(tx, &usage)?;
            Ok(true)
        }))
    }

    fn delete_sm_with_usage(
        &self,
        id: &str,
        usage: Vec<UsageRow>,
    ) -> StoreFuture<'_, Option<Deleted>> {
        let id = id.to_string();
        Box::pin(self.db.write(move |tx| {
            let Some(d) = delete_sm_tx(tx, &id, None)? else { return Ok(None) };
            put_usage(tx, &usage)?;
            Ok(Some(d))
        }))
    }
}
