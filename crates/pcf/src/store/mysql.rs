//! [`PcfStore`] on the MySQL-protocol backend (MariaDB / Galera, InnoDB or NDB): the tables of
//! the SQLite schema as it stands after its migrations, with `VARBINARY` keys (byte order, as
//! SQLite's), a primary key on every table and no foreign keys (docs/store.md).
//!
//! Each trait call is one transaction of [`MysqlStore::write`] / [`MysqlStore::read`]: an
//! association and the state variables its decision set commit together, and a call returns
//! only once the server answered its `COMMIT`. Deadlocks and Galera certification failures are
//! retried by the store (the body runs again from the start of a new transaction, so it keeps
//! its inputs and consumes none). A read-modify-write (the state variables merged into what the
//! subscriber has, a delete returning what it removed) reads its row `FOR UPDATE`, so a
//! concurrent write to the same row waits for it or, through another Galera node, fails
//! certification and is tried again against what this one committed.
//!
//! No `DELETE ... RETURNING` and no subquery on the table being changed: MySQL has neither,
//! and the schema is for any server of the protocol.
//!
//! With several instances on the database (`[pcf] shared_database`) each write also records
//! what it changed in the store's change feed, as its transaction's last statement (the
//! `FEED_*` entities, keys only: the others re-read the rows, crate::coherence); otherwise it
//! records nothing.

use std::sync::Arc;

use serde_json::{Map, Value};
use store::mysql::feed::{self, Op};
use store::mysql::mysql_async::prelude::Queryable;
use store::mysql::mysql_async::{Conn, Params};
use store::mysql::{ConnFuture, TxError};
use store::{MysqlMigration, MysqlStore};

use super::{
    AppSession, Association, ChfSubscription, Deleted, Kind, PcfStore, SmPolicy, Snapshot,
    SsvUpdates, StoreFuture, Subscriber, SySession, UeDelivery, UsageRow, UsageTotals,
};

pub mod owner;
mod policy_version;

// Ids are 512 bytes: a Gx association's id is `gx:` and the Diameter Session-Id, whose
// DiameterIdentity alone may be 255. URIs are not looked up by, 2048 bytes each.
pub const MIGRATIONS: &[MysqlMigration] = &[
    MysqlMigration::new(
        "pcf-0001-tables",
        &[
            "CREATE TABLE IF NOT EXISTS pcf_sm_policy (
            sm_policy_id VARBINARY(512) NOT NULL PRIMARY KEY,
            supi VARBINARY(255) NOT NULL,
            context LONGBLOB NOT NULL,
            decision LONGBLOB NOT NULL,
            policy_version VARBINARY(255) NOT NULL,
            updated_ms BIGINT NOT NULL,
            binding_uri VARBINARY(2048) NULL
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS pcf_ssv (
            supi VARBINARY(255) NOT NULL PRIMARY KEY,
            json LONGBLOB NOT NULL
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS pcf_udr_subscription (
            supi VARBINARY(255) NOT NULL PRIMARY KEY,
            uri VARBINARY(2048) NOT NULL
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS pcf_policy_association (
            kind VARBINARY(8) NOT NULL,
            assoc_id VARBINARY(512) NOT NULL,
            supi VARBINARY(255) NOT NULL,
            context LONGBLOB NOT NULL,
            decision LONGBLOB NOT NULL,
            policy_version VARBINARY(255) NOT NULL,
            updated_ms BIGINT NOT NULL,
            udr_subscription VARBINARY(2048) NULL,
            PRIMARY KEY (kind, assoc_id),
            KEY pcf_policy_association_supi (supi)
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS pcf_chf_subscription (
            supi VARBINARY(255) NOT NULL PRIMARY KEY,
            uri VARBINARY(2048) NOT NULL,
            statuses LONGBLOB NOT NULL
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS pcf_ue_delivery (
            assoc_id VARBINARY(512) NOT NULL PRIMARY KEY,
            pti TINYINT UNSIGNED NOT NULL,
            ursp_digest VARBINARY(255) NOT NULL,
            policy_version VARBINARY(255) NOT NULL,
            outcome VARBINARY(32) NOT NULL,
            n1_subscription VARBINARY(2048) NULL,
            updated_ms BIGINT NOT NULL
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS pcf_app_session (
            app_session_id VARBINARY(512) NOT NULL PRIMARY KEY,
            sm_policy_id VARBINARY(512) NOT NULL,
            supi VARBINARY(255) NOT NULL,
            context LONGBLOB NOT NULL,
            rules LONGBLOB NOT NULL,
            updated_ms BIGINT NOT NULL,
            KEY pcf_app_session_sm (sm_policy_id)
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS pcf_sy_session (
            supi VARBINARY(255) NOT NULL PRIMARY KEY,
            session_id VARBINARY(512) NOT NULL,
            ocs_host VARBINARY(255) NOT NULL,
            ocs_realm VARBINARY(255) NOT NULL,
            counters LONGBLOB NOT NULL,
            statuses LONGBLOB NOT NULL
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS pcf_usage (
            supi VARBINARY(255) NOT NULL,
            monitoring_key VARBINARY(255) NOT NULL,
            vol_total BIGINT UNSIGNED NOT NULL,
            vol_uplink BIGINT UNSIGNED NOT NULL,
            vol_downlink BIGINT UNSIGNED NOT NULL,
            time_s BIGINT UNSIGNED NOT NULL,
            updated_ms BIGINT NOT NULL,
            PRIMARY KEY (supi, monitoring_key)
        ) ENGINE=InnoDB",
            // Policy project versions (crate::policy_versions), as pcf-0014 on SQLite.
            "CREATE TABLE IF NOT EXISTS pcf_policy_version (
            version_id BIGINT NOT NULL PRIMARY KEY,
            name VARBINARY(1024) NOT NULL,
            project_version VARBINARY(255) NOT NULL,
            description LONGBLOB NOT NULL,
            source_dir VARBINARY(4096) NULL,
            created_ms BIGINT NOT NULL,
            files LONGBLOB NOT NULL
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS pcf_policy_activation (
            seq BIGINT NOT NULL PRIMARY KEY,
            version_id BIGINT NOT NULL,
            activated_ms BIGINT NOT NULL,
            rolled_back_ms BIGINT NULL
        ) ENGINE=InnoDB",
        ],
    ),
    // The instance holding the database (owner.rs): one row.
    MysqlMigration::new(
        "pcf-0002-owner",
        &["CREATE TABLE IF NOT EXISTS pcf_owner (
        name VARBINARY(16) NOT NULL PRIMARY KEY,
        owner VARBINARY(64) NOT NULL,
        expires_ms BIGINT NOT NULL
    ) ENGINE=InnoDB"],
    ),
];

/// A store failure of the PCF's own (a value that does not serialize): not retried.
fn fault(e: impl std::error::Error + Send + Sync + 'static) -> TxError {
    TxError::Contract(store::Error::backend(e))
}

// The change feed's entities (docs/pcf.md, "Several instances"): each names what an instance
// re-reads to apply another's change (crate::coherence).
/// An SM association, by id.
pub const FEED_SM: &str = "pcf_sm";
/// An AM or UE association, by `AM:<id>` or `UE:<id>` ([`assoc_key`]).
pub const FEED_ASSOC: &str = "pcf_assoc";
/// A subscriber's state variables and policy data subscription, by SUPI.
pub const FEED_SUBSCRIBER: &str = "pcf_subscriber";
/// An application session, by id.
pub const FEED_APP: &str = "pcf_app";
/// A UE policy association's URSP delivery record, by the association's id.
pub const FEED_DELIVERY: &str = "pcf_delivery";

/// The feed key of an AM or UE association.
pub fn assoc_key(kind: Kind, id: &str) -> String {
    format!("{}:{id}", kind.as_str())
}

/// An AM or UE association's kind and id from its feed key.
pub fn parse_assoc_key(key: &str) -> Option<(Kind, &str)> {
    match key.split_once(':')? {
        ("AM", id) => Some((Kind::Am, id)),
        ("UE", id) => Some((Kind::Ue, id)),
        _ => None,
    }
}

/// Where a write records its changes: nowhere unless this store records changes (several
/// instances on one database, `[pcf] shared_database`).
#[derive(Clone)]
struct Feed(Option<Arc<str>>);

impl Feed {
    /// Records `changes` (entity, key, operation) as the transaction's last statement.
    async fn record(&self, c: &mut Conn, changes: &[(&str, &str, Op)]) -> Result<(), TxError> {
        let Some(w) = &self.0 else { return Ok(()) };
        let rows: Vec<(&str, &str, Op, Option<&[u8]>)> =
            changes.iter().map(|&(e, k, op)| (e, k, op, None)).collect();
        feed::record_many(c, w, &rows).await
    }

    /// The changes of a write to SM association `p` that merged `ssv`.
    async fn sm_written(&self, c: &mut Conn, p: &SmPolicy, ssv: bool) -> Result<(), TxError> {
        let sm = (FEED_SM, p.id.as_str(), Op::Put);
        match ssv {
            true => self.record(c, &[sm, (FEED_SUBSCRIBER, p.supi.as_str(), Op::Put)]).await,
            false => self.record(c, &[sm]).await,
        }
    }

    /// The changes of a write to AM or UE association `a` that merged `ssv`.
    async fn assoc_written(&self, c: &mut Conn, a: &Association, ssv: bool) -> Result<(), TxError> {
        if self.0.is_none() {
            return Ok(());
        }
        let key = assoc_key(a.kind, &a.id);
        let assoc = (FEED_ASSOC, key.as_str(), Op::Put);
        match ssv {
            true => self.record(c, &[assoc, (FEED_SUBSCRIBER, a.supi.as_str(), Op::Put)]).await,
            false => self.record(c, &[assoc]).await,
        }
    }

    /// The changes of a delete.
    async fn sm_deleted(&self, c: &mut Conn, id: &str, d: &Deleted) -> Result<(), TxError> {
        let sm = (FEED_SM, id, Op::Delete);
        match d.udr_subscription.is_some() || d.chf_subscription.is_some() {
            true => self.record(c, &[sm, (FEED_SUBSCRIBER, d.supi.as_str(), Op::Put)]).await,
            false => self.record(c, &[sm]).await,
        }
    }
}

fn object(json: &[u8]) -> Map<String, Value> {
    match serde_json::from_slice::<Value>(json) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

const SM_COLUMNS: &str =
    "sm_policy_id, supi, context, decision, policy_version, updated_ms, binding_uri";
type SmRow = (String, String, Vec<u8>, Vec<u8>, String, i64, Option<String>);

fn sm(r: SmRow) -> SmPolicy {
    SmPolicy {
        id: r.0,
        supi: r.1,
        context: r.2,
        decision: r.3,
        policy_version: r.4,
        updated_ms: r.5,
        binding: r.6,
    }
}

const ASSOC_COLUMNS: &str =
    "kind, assoc_id, supi, context, decision, policy_version, updated_ms, udr_subscription";
type AssocRow = (String, String, String, Vec<u8>, Vec<u8>, String, i64, Option<String>);

/// A row of `pcf_policy_association`; an unknown kind is an error of the store.
fn assoc(r: AssocRow) -> Result<Association, TxError> {
    let kind = match r.0.as_str() {
        "AM" => Kind::Am,
        "UE" => Kind::Ue,
        other => {
            return Err(TxError::Contract(store::Error::backend_msg(format!(
                "association {} of unknown kind {other}",
                r.1
            ))))
        }
    };
    Ok(Association {
        kind,
        id: r.1,
        supi: r.2,
        context: r.3,
        decision: r.4,
        policy_version: r.5,
        updated_ms: r.6,
        udr_subscription: r.7,
    })
}

fn assocs(rows: Vec<AssocRow>) -> Result<Vec<Association>, TxError> {
    rows.into_iter().map(assoc).collect()
}

const APP_COLUMNS: &str = "app_session_id, sm_policy_id, supi, context, rules, updated_ms";
type AppRow = (String, String, String, Vec<u8>, Vec<u8>, i64);

fn app(r: AppRow) -> AppSession {
    AppSession { id: r.0, sm_policy_id: r.1, supi: r.2, context: r.3, rules: r.4, updated_ms: r.5 }
}

const UE_DELIVERY_COLUMNS: &str =
    "assoc_id, pti, ursp_digest, policy_version, outcome, n1_subscription, updated_ms";
type UeDeliveryRow = (String, u8, String, String, String, Option<String>, i64);

fn ue_delivery(r: UeDeliveryRow) -> UeDelivery {
    UeDelivery {
        assoc_id: r.0,
        pti: r.1,
        ursp_digest: r.2,
        policy_version: r.3,
        outcome: r.4,
        n1_subscription: r.5,
        updated_ms: r.6,
    }
}

const USAGE_COLUMNS: &str =
    "supi, monitoring_key, vol_total, vol_uplink, vol_downlink, time_s, updated_ms";
type UsageDbRow = (String, String, u64, u64, u64, u64, i64);

fn usage_row(r: UsageDbRow) -> UsageRow {
    UsageRow {
        supi: r.0,
        key: r.1,
        totals: UsageTotals { total: r.2, uplink: r.3, downlink: r.4, time: r.5 },
        updated_ms: r.6,
    }
}

async fn read_subscriber(c: &mut Conn, supi: &str) -> Result<Subscriber, TxError> {
    let json: Option<Vec<u8>> =
        c.exec_first("SELECT json FROM pcf_ssv WHERE supi = ?", (supi,)).await?;
    let udr_subscription: Option<String> =
        c.exec_first("SELECT uri FROM pcf_udr_subscription WHERE supi = ?", (supi,)).await?;
    Ok(Subscriber { ssv: json.map(|j| object(&j)).unwrap_or_default(), udr_subscription })
}

/// Merges `updates` into the subscriber's state (null removes a variable): its row is read
/// `FOR UPDATE`, so two merges of one subscriber take turns.
async fn merge_ssv(c: &mut Conn, supi: &str, updates: &SsvUpdates) -> Result<(), TxError> {
    if updates.is_empty() {
        return Ok(());
    }
    let json: Option<Vec<u8>> =
        c.exec_first("SELECT json FROM pcf_ssv WHERE supi = ? FOR UPDATE", (supi,)).await?;
    let mut m = json.map(|j| object(&j)).unwrap_or_default();
    super::merge_ssv(&mut m, updates.clone());
    let json = serde_json::to_vec(&m).map_err(fault)?;
    c.exec_drop(
        "INSERT INTO pcf_ssv (supi, json) VALUES (?, ?)
         ON DUPLICATE KEY UPDATE json = VALUES(json)",
        (supi, json),
    )
    .await?;
    Ok(())
}

/// A new SM association (with the subscriber's UDR subscription, when given).
async fn insert_sm(
    c: &mut Conn,
    p: &SmPolicy,
    ssv: &SsvUpdates,
    udr_subscription: Option<&str>,
) -> Result<(), TxError> {
    if let Some(uri) = udr_subscription {
        c.exec_drop(
            "INSERT INTO pcf_udr_subscription (supi, uri) VALUES (?, ?)
             ON DUPLICATE KEY UPDATE uri = VALUES(uri)",
            (p.supi.as_str(), uri),
        )
        .await?;
    }
    c.exec_drop(
        format!("INSERT INTO pcf_sm_policy ({SM_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"),
        (
            p.id.as_str(),
            p.supi.as_str(),
            p.context.as_slice(),
            p.decision.as_slice(),
            p.policy_version.as_str(),
            p.updated_ms,
            p.binding.as_deref(),
        ),
    )
    .await?;
    merge_ssv(c, &p.supi, ssv).await
}

/// Replaces an association's context, decision and binding and merges `ssv`; false when it
/// no longer exists.
async fn update_sm(c: &mut Conn, p: &SmPolicy, ssv: &SsvUpdates) -> Result<bool, TxError> {
    // Found, not changed, rows: an update that writes what is already there still counts.
    let found: Option<u8> = c
        .exec_first("SELECT 1 FROM pcf_sm_policy WHERE sm_policy_id = ? FOR UPDATE", (&p.id,))
        .await?;
    if found.is_none() {
        return Ok(false);
    }
    c.exec_drop(
        "UPDATE pcf_sm_policy SET context = ?, decision = ?, policy_version = ?,
         updated_ms = ?, binding_uri = ? WHERE sm_policy_id = ?",
        (
            p.context.as_slice(),
            p.decision.as_slice(),
            p.policy_version.as_str(),
            p.updated_ms,
            p.binding.as_deref(),
            p.id.as_str(),
        ),
    )
    .await?;
    merge_ssv(c, &p.supi, ssv).await?;
    Ok(true)
}

/// Replaces an association's decision (an application session's rules in or out of it);
/// false when it no longer exists.
async fn put_sm_decision(c: &mut Conn, p: &SmPolicy) -> Result<bool, TxError> {
    let found: Option<u8> = c
        .exec_first("SELECT 1 FROM pcf_sm_policy WHERE sm_policy_id = ? FOR UPDATE", (&p.id,))
        .await?;
    if found.is_none() {
        return Ok(false);
    }
    c.exec_drop(
        "UPDATE pcf_sm_policy SET decision = ?, policy_version = ?, updated_ms = ?
         WHERE sm_policy_id = ?",
        (p.decision.as_slice(), p.policy_version.as_str(), p.updated_ms, p.id.as_str()),
    )
    .await?;
    Ok(true)
}

/// Removes the subscriber's row of `table` (a subscription) and returns its URI.
async fn take_uri(c: &mut Conn, table: &str, supi: &str) -> Result<Option<String>, TxError> {
    let uri: Option<String> =
        c.exec_first(format!("SELECT uri FROM {table} WHERE supi = ? FOR UPDATE"), (supi,)).await?;
    if uri.is_some() {
        c.exec_drop(format!("DELETE FROM {table} WHERE supi = ?"), (supi,)).await?;
    }
    Ok(uri)
}

/// Removes an association, its application sessions and, with the subscriber's last, its
/// subscriptions' rows. `last`: whether it is the subscriber's last association, when the
/// caller knows; otherwise counted here, by a scan of the table (no index by subscriber, as on
/// SQLite: the resident store always knows).
async fn delete_sm(c: &mut Conn, id: &str, last: Option<bool>) -> Result<Option<Deleted>, TxError> {
    let gone: Option<(String, Option<String>)> = c
        .exec_first(
            "SELECT supi, binding_uri FROM pcf_sm_policy WHERE sm_policy_id = ? FOR UPDATE",
            (id,),
        )
        .await?;
    let Some((supi, binding)) = gone else { return Ok(None) };
    c.exec_drop("DELETE FROM pcf_sm_policy WHERE sm_policy_id = ?", (id,)).await?;
    // Its application sessions end with it (TS 29.514 §4.2.5.2).
    c.exec_drop("DELETE FROM pcf_app_session WHERE sm_policy_id = ?", (id,)).await?;
    let last = match last {
        Some(l) => l,
        None => {
            let other: Option<u8> = c
                .exec_first("SELECT 1 FROM pcf_sm_policy WHERE supi = ? LIMIT 1", (&supi,))
                .await?;
            other.is_none()
        }
    };
    // The subscriber's subscriptions go with its last association.
    let (udr_subscription, chf_subscription) = match last {
        true => (
            take_uri(c, "pcf_udr_subscription", &supi).await?,
            take_uri(c, "pcf_chf_subscription", &supi).await?,
        ),
        false => (None, None),
    };
    Ok(Some(Deleted { supi, binding, udr_subscription, chf_subscription }))
}

/// Writes a subscriber's new usage totals (absolute: computed under its hold).
async fn put_usage(c: &mut Conn, usage: &[UsageRow]) -> Result<(), TxError> {
    if usage.is_empty() {
        return Ok(());
    }
    let params = usage.iter().map(|u| {
        let t = &u.totals;
        Params::from((
            u.supi.as_str(),
            u.key.as_str(),
            t.total,
            t.uplink,
            t.downlink,
            t.time,
            u.updated_ms,
        ))
    });
    c.exec_batch(
        format!(
            "INSERT INTO pcf_usage ({USAGE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)
             ON DUPLICATE KEY UPDATE vol_total = VALUES(vol_total),
                 vol_uplink = VALUES(vol_uplink), vol_downlink = VALUES(vol_downlink),
                 time_s = VALUES(time_s), updated_ms = VALUES(updated_ms)"
        ),
        params,
    )
    .await?;
    Ok(())
}

/// The PCF's persistence over a MySQL-protocol database. Cheap to clone.
#[derive(Clone)]
pub struct MysqlPcfStore {
    db: MysqlStore,
}

impl MysqlPcfStore {
    /// The PCF's store on an open MySQL store (the NF skeleton's), applying its migrations.
    pub async fn on(db: MysqlStore) -> store::Result<Self> {
        db.migrate(MIGRATIONS).await?;
        Ok(MysqlPcfStore { db })
    }

    /// The database underneath.
    pub fn db(&self) -> &MysqlStore {
        &self.db
    }

    /// `body` in one read-write transaction, given `args` on every try (a retried try starts
    /// again from them) and the change feed to record its changes in.
    fn write<'s, A, T, F>(&'s self, args: A, body: F) -> StoreFuture<'s, T>
    where
        A: Send + Sync + 'static,
        T: Send + 's,
        F: for<'c> Fn(&'c mut Conn, Arc<A>, Feed) -> ConnFuture<'c, T> + Send + Sync + 's,
    {
        let args = Arc::new(args);
        let feed = Feed(self.db.feed_writer().cloned());
        Box::pin(self.db.write(move |c| body(c, args.clone(), feed.clone())))
    }

    /// `body` in one read-only transaction (one snapshot).
    fn read<'s, A, T, F>(&'s self, args: A, body: F) -> StoreFuture<'s, T>
    where
        A: Send + Sync + 'static,
        T: Send + 's,
        F: for<'c> Fn(&'c mut Conn, Arc<A>) -> ConnFuture<'c, T> + Send + Sync + 's,
    {
        let args = Arc::new(args);
        Box::pin(self.db.read(move |c| body(c, args.clone())))
    }

    /// As [`MysqlPcfStore::read`], without the per-try timeout: a pass over whole tables.
    fn scan<'s, T, F>(&'s self, body: F) -> StoreFuture<'s, T>
    where
        T: Send + 's,
        F: for<'c> Fn(&'c mut Conn) -> ConnFuture<'c, T> + Send + Sync + 's,
    {
        Box::pin(self.db.scan(body))
    }
}

impl PcfStore for MysqlPcfStore {
    fn subscriber(&self, supi: &str) -> StoreFuture<'_, Subscriber> {
        self.read(supi.to_string(), |c, supi| {
            Box::pin(async move { read_subscriber(c, &supi).await })
        })
    }

    fn create_sm(
        &self,
        p: SmPolicy,
        ssv: SsvUpdates,
        udr_subscription: Option<String>,
    ) -> StoreFuture<'_, ()> {
        self.write((p, ssv, udr_subscription), |c, a, feed| {
            Box::pin(async move {
                let (p, ssv, udr) = &*a;
                insert_sm(c, p, ssv, udr.as_deref()).await?;
                feed.sm_written(c, p, !ssv.is_empty() || udr.is_some()).await
            })
        })
    }

    fn create_sm_with_chf(
        &self,
        p: SmPolicy,
        ssv: SsvUpdates,
        udr_subscription: Option<String>,
        chf: ChfSubscription,
    ) -> StoreFuture<'_, ()> {
        self.write((p, ssv, udr_subscription, chf), |c, a, feed| {
            Box::pin(async move {
                let (p, ssv, udr, chf) = &*a;
                let statuses = serde_json::to_vec(&chf.statuses).map_err(fault)?;
                c.exec_drop(
                    "INSERT INTO pcf_chf_subscription (supi, uri, statuses) VALUES (?, ?, ?)
                     ON DUPLICATE KEY UPDATE uri = VALUES(uri), statuses = VALUES(statuses)",
                    (chf.supi.as_str(), chf.uri.as_str(), statuses),
                )
                .await?;
                insert_sm(c, p, ssv, udr.as_deref()).await?;
                feed.sm_written(c, p, !ssv.is_empty() || udr.is_some()).await
            })
        })
    }

    fn set_chf_statuses(&self, supi: &str, statuses: Map<String, Value>) -> StoreFuture<'_, bool> {
        self.write((supi.to_string(), statuses), |c, a, _| {
            Box::pin(async move {
                let (supi, statuses) = &*a;
                let json = serde_json::to_vec(statuses).map_err(fault)?;
                let found: Option<u8> = c
                    .exec_first(
                        "SELECT 1 FROM pcf_chf_subscription WHERE supi = ? FOR UPDATE",
                        (supi,),
                    )
                    .await?;
                if found.is_none() {
                    return Ok(false);
                }
                c.exec_drop(
                    "UPDATE pcf_chf_subscription SET statuses = ? WHERE supi = ?",
                    (json, supi),
                )
                .await?;
                Ok(true)
            })
        })
    }

    fn drop_chf_subscription(&self, supi: &str, uri: &str) -> StoreFuture<'_, bool> {
        self.write((supi.to_string(), uri.to_string()), |c, a, _| {
            Box::pin(async move {
                c.exec_drop(
                    "DELETE FROM pcf_chf_subscription WHERE supi = ? AND uri = ?",
                    (&a.0, &a.1),
                )
                .await?;
                Ok(c.affected_rows() > 0)
            })
        })
    }

    fn chf_subscriptions(&self) -> StoreFuture<'_, Vec<ChfSubscription>> {
        self.scan(|c| {
            Box::pin(async move {
                let rows: Vec<(String, String, Vec<u8>)> =
                    c.query("SELECT supi, uri, statuses FROM pcf_chf_subscription").await?;
                Ok(rows
                    .into_iter()
                    .map(|(supi, uri, json)| ChfSubscription { supi, uri, statuses: object(&json) })
                    .collect())
            })
        })
    }

    fn get_sm(&self, id: &str) -> StoreFuture<'_, Option<SmPolicy>> {
        self.read(id.to_string(), |c, id| {
            Box::pin(async move {
                let sql = format!("SELECT {SM_COLUMNS} FROM pcf_sm_policy WHERE sm_policy_id = ?");
                let row: Option<SmRow> = c.exec_first(sql, (&*id,)).await?;
                Ok(row.map(sm))
            })
        })
    }

    // A scan (no index by subscriber, as on SQLite): the PCF asks its resident store, which
    // answers from memory; this serves tools and tests.
    fn sm_of(&self, supi: &str) -> StoreFuture<'_, Vec<SmPolicy>> {
        self.read(supi.to_string(), |c, supi| {
            Box::pin(async move {
                let sql = format!("SELECT {SM_COLUMNS} FROM pcf_sm_policy WHERE supi = ?");
                let rows: Vec<SmRow> = c.exec(sql, (&*supi,)).await?;
                Ok(rows.into_iter().map(sm).collect())
            })
        })
    }

    fn get_sm_with_subscriber(&self, id: &str) -> StoreFuture<'_, Option<(SmPolicy, Subscriber)>> {
        self.read(id.to_string(), |c, id| {
            Box::pin(async move {
                let sql = format!("SELECT {SM_COLUMNS} FROM pcf_sm_policy WHERE sm_policy_id = ?");
                let row: Option<SmRow> = c.exec_first(sql, (&*id,)).await?;
                let Some(p) = row.map(sm) else { return Ok(None) };
                let kept = read_subscriber(c, &p.supi).await?;
                Ok(Some((p, kept)))
            })
        })
    }

    fn update_sm(&self, p: SmPolicy, ssv: SsvUpdates) -> StoreFuture<'_, bool> {
        self.write((p, ssv), |c, a, feed| {
            Box::pin(async move {
                let found = update_sm(c, &a.0, &a.1).await?;
                if found {
                    feed.sm_written(c, &a.0, !a.1.is_empty()).await?;
                }
                Ok(found)
            })
        })
    }

    fn touch_sm(&self, id: &str, updated_ms: i64) -> StoreFuture<'_, bool> {
        self.write(id.to_string(), move |c, id, feed| {
            Box::pin(async move {
                let found: Option<u8> = c
                    .exec_first(
                        "SELECT 1 FROM pcf_sm_policy WHERE sm_policy_id = ? FOR UPDATE",
                        (&*id,),
                    )
                    .await?;
                if found.is_some() {
                    c.exec_drop(
                        "UPDATE pcf_sm_policy SET updated_ms = ? WHERE sm_policy_id = ?",
                        (updated_ms, &*id),
                    )
                    .await?;
                    feed.record(c, &[(FEED_SM, id.as_str(), Op::Put)]).await?;
                }
                Ok(found.is_some())
            })
        })
    }

    fn delete_sm(&self, id: &str) -> StoreFuture<'_, Option<Deleted>> {
        self.write(id.to_string(), |c, id, feed| {
            Box::pin(async move {
                let Some(d) = delete_sm(c, &id, None).await? else { return Ok(None) };
                feed.sm_deleted(c, &id, &d).await?;
                Ok(Some(d))
            })
        })
    }

    fn delete_sm_known(
        &self,
        id: &str,
        last: bool,
        usage: Vec<UsageRow>,
    ) -> StoreFuture<'_, Option<Deleted>> {
        self.write((id.to_string(), usage), move |c, a, feed| {
            Box::pin(async move {
                let Some(d) = delete_sm(c, &a.0, Some(last)).await? else { return Ok(None) };
                put_usage(c, &a.1).await?;
                feed.sm_deleted(c, &a.0, &d).await?;
                Ok(Some(d))
            })
        })
    }

    fn create_assoc(&self, a: Association, ssv: SsvUpdates) -> StoreFuture<'_, ()> {
        self.write((a, ssv), |c, args, feed| {
            Box::pin(async move {
                let (a, ssv) = &*args;
                c.exec_drop(
                    format!(
                        "INSERT INTO pcf_policy_association ({ASSOC_COLUMNS})
                         VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                    ),
                    (
                        a.kind.as_str(),
                        a.id.as_str(),
                        a.supi.as_str(),
                        a.context.as_slice(),
                        a.decision.as_slice(),
                        a.policy_version.as_str(),
                        a.updated_ms,
                        a.udr_subscription.as_deref(),
                    ),
                )
                .await?;
                merge_ssv(c, &a.supi, ssv).await?;
                feed.assoc_written(c, a, !ssv.is_empty()).await
            })
        })
    }

    fn get_assoc(&self, kind: Kind, id: &str) -> StoreFuture<'_, Option<Association>> {
        self.read(id.to_string(), move |c, id| {
            Box::pin(async move {
                let sql = format!(
                    "SELECT {ASSOC_COLUMNS} FROM pcf_policy_association
                     WHERE kind = ? AND assoc_id = ?"
                );
                let row: Option<AssocRow> = c.exec_first(sql, (kind.as_str(), &*id)).await?;
                row.map(assoc).transpose()
            })
        })
    }

    fn assoc_of(&self, kind: Kind, supi: &str) -> StoreFuture<'_, Vec<Association>> {
        self.read(supi.to_string(), move |c, supi| {
            Box::pin(async move {
                let sql = format!(
                    "SELECT {ASSOC_COLUMNS} FROM pcf_policy_association WHERE kind = ? AND supi = ?"
                );
                assocs(c.exec(sql, (kind.as_str(), &*supi)).await?)
            })
        })
    }

    fn update_assoc(&self, a: Association, ssv: SsvUpdates) -> StoreFuture<'_, bool> {
        self.write((a, ssv), |c, args, feed| {
            Box::pin(async move {
                let (a, ssv) = &*args;
                let found: Option<u8> = c
                    .exec_first(
                        "SELECT 1 FROM pcf_policy_association
                         WHERE kind = ? AND assoc_id = ? FOR UPDATE",
                        (a.kind.as_str(), a.id.as_str()),
                    )
                    .await?;
                if found.is_none() {
                    return Ok(false);
                }
                c.exec_drop(
                    "UPDATE pcf_policy_association SET context = ?, decision = ?,
                     policy_version = ?, updated_ms = ?, udr_subscription = ?
                     WHERE kind = ? AND assoc_id = ?",
                    (
                        a.context.as_slice(),
                        a.decision.as_slice(),
                        a.policy_version.as_str(),
                        a.updated_ms,
                        a.udr_subscription.as_deref(),
                        a.kind.as_str(),
                        a.id.as_str(),
                    ),
                )
                .await?;
                merge_ssv(c, &a.supi, ssv).await?;
                feed.assoc_written(c, a, !ssv.is_empty()).await?;
                Ok(true)
            })
        })
    }

    fn delete_assoc(&self, kind: Kind, id: &str) -> StoreFuture<'_, Option<Association>> {
        self.write(id.to_string(), move |c, id, feed| {
            Box::pin(async move {
                let sql = format!(
                    "SELECT {ASSOC_COLUMNS} FROM pcf_policy_association
                     WHERE kind = ? AND assoc_id = ? FOR UPDATE"
                );
                let row: Option<AssocRow> = c.exec_first(sql, (kind.as_str(), &*id)).await?;
                let Some(gone) = row.map(assoc).transpose()? else { return Ok(None) };
                c.exec_drop(
                    "DELETE FROM pcf_policy_association WHERE kind = ? AND assoc_id = ?",
                    (kind.as_str(), &*id),
                )
                .await?;
                let key = assoc_key(kind, &id);
                feed.record(c, &[(FEED_ASSOC, key.as_str(), Op::Delete)]).await?;
                Ok(Some(gone))
            })
        })
    }

    fn ue_delivery(&self, assoc_id: &str) -> StoreFuture<'_, Option<UeDelivery>> {
        self.read(assoc_id.to_string(), |c, id| {
            Box::pin(async move {
                let sql =
                    format!("SELECT {UE_DELIVERY_COLUMNS} FROM pcf_ue_delivery WHERE assoc_id = ?");
                let row: Option<UeDeliveryRow> = c.exec_first(sql, (&*id,)).await?;
                Ok(row.map(ue_delivery))
            })
        })
    }

    fn put_ue_delivery(&self, d: UeDelivery) -> StoreFuture<'_, ()> {
        self.write(d, |c, d, feed| {
            Box::pin(async move {
                c.exec_drop(
                    format!(
                        "INSERT INTO pcf_ue_delivery ({UE_DELIVERY_COLUMNS})
                         VALUES (?, ?, ?, ?, ?, ?, ?)
                         ON DUPLICATE KEY UPDATE pti = VALUES(pti),
                            ursp_digest = VALUES(ursp_digest),
                            policy_version = VALUES(policy_version), outcome = VALUES(outcome),
                            n1_subscription = VALUES(n1_subscription),
                            updated_ms = VALUES(updated_ms)"
                    ),
                    (
                        d.assoc_id.as_str(),
                        d.pti,
                        d.ursp_digest.as_str(),
                        d.policy_version.as_str(),
                        d.outcome.as_str(),
                        d.n1_subscription.as_deref(),
                        d.updated_ms,
                    ),
                )
                .await?;
                feed.record(c, &[(FEED_DELIVERY, d.assoc_id.as_str(), Op::Put)]).await
            })
        })
    }

    fn ue_delivery_outcome(
        &self,
        assoc_id: &str,
        pti: u8,
        outcome: &'static str,
        only_from: Option<&'static str>,
    ) -> StoreFuture<'_, bool> {
        let now = chrono::Utc::now().timestamp_millis();
        self.write(assoc_id.to_string(), move |c, id, feed| {
            Box::pin(async move {
                let found: Option<String> = c
                    .exec_first(
                        "SELECT outcome FROM pcf_ue_delivery
                         WHERE assoc_id = ? AND pti = ? FOR UPDATE",
                        (&*id, pti),
                    )
                    .await?;
                let Some(current) = found else { return Ok(false) };
                if only_from.is_some_and(|from| from != current) {
                    return Ok(false);
                }
                c.exec_drop(
                    "UPDATE pcf_ue_delivery SET outcome = ?, updated_ms = ? WHERE assoc_id = ?",
                    (outcome, now, &*id),
                )
                .await?;
                feed.record(c, &[(FEED_DELIVERY, id.as_str(), Op::Put)]).await?;
                Ok(true)
            })
        })
    }

    fn delete_ue_delivery(&self, assoc_id: &str) -> StoreFuture<'_, Option<UeDelivery>> {
        self.write(assoc_id.to_string(), |c, id, feed| {
            Box::pin(async move {
                let sql = format!(
                    "SELECT {UE_DELIVERY_COLUMNS} FROM pcf_ue_delivery WHERE assoc_id = ? \
                     FOR UPDATE"
                );
                let row: Option<UeDeliveryRow> = c.exec_first(sql, (&*id,)).await?;
                if row.is_some() {
                    c.exec_drop("DELETE FROM pcf_ue_delivery WHERE assoc_id = ?", (&*id,)).await?;
                    feed.record(c, &[(FEED_DELIVERY, id.as_str(), Op::Delete)]).await?;
                }
                Ok(row.map(ue_delivery))
            })
        })
    }

    fn count_sm(&self) -> StoreFuture<'_, u64> {
        self.read((), |c, _| {
            Box::pin(async move {
                let n: Option<u64> = c.query_first("SELECT COUNT(*) FROM pcf_sm_policy").await?;
                Ok(n.unwrap_or(0))
            })
        })
    }

    /// One snapshot of every table (a read-only transaction: InnoDB's consistent read), without
    /// the per-call timeout: it is read once at start and grows with the sessions held.
    fn snapshot(&self) -> StoreFuture<'_, Snapshot> {
        self.scan(|c| {
            Box::pin(async move {
                let mut snap = Snapshot::default();
                let rows: Vec<SmRow> =
                    c.query(format!("SELECT {SM_COLUMNS} FROM pcf_sm_policy")).await?;
                snap.sm = rows.into_iter().map(sm).collect();
                snap.associations = assocs(
                    c.query(format!("SELECT {ASSOC_COLUMNS} FROM pcf_policy_association")).await?,
                )?;
                let mut subscribers: std::collections::BTreeMap<String, Subscriber> =
                    Default::default();
                let rows: Vec<(String, Vec<u8>)> =
                    c.query("SELECT supi, json FROM pcf_ssv").await?;
                for (supi, json) in rows {
                    if let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(&json) {
                        subscribers.entry(supi).or_default().ssv = m;
                    }
                }
                let rows: Vec<(String, String)> =
                    c.query("SELECT supi, uri FROM pcf_udr_subscription").await?;
                for (supi, uri) in rows {
                    subscribers.entry(supi).or_default().udr_subscription = Some(uri);
                }
                snap.subscribers = subscribers.into_iter().collect();
                let rows: Vec<AppRow> =
                    c.query(format!("SELECT {APP_COLUMNS} FROM pcf_app_session")).await?;
                snap.apps = rows.into_iter().map(app).collect();
                let rows: Vec<UeDeliveryRow> =
                    c.query(format!("SELECT {UE_DELIVERY_COLUMNS} FROM pcf_ue_delivery")).await?;
                snap.ue_deliveries = rows.into_iter().map(ue_delivery).collect();
                Ok(snap)
            })
        })
    }

    fn stale_sm(&self, before_ms: i64, limit: usize) -> StoreFuture<'_, Vec<SmPolicy>> {
        self.read((), move |c, _| {
            Box::pin(async move {
                let sql = format!(
                    "SELECT {SM_COLUMNS} FROM pcf_sm_policy WHERE updated_ms < ?
                     ORDER BY updated_ms LIMIT ?"
                );
                let rows: Vec<SmRow> = c.exec(sql, (before_ms, limit as u64)).await?;
                Ok(rows.into_iter().map(sm).collect())
            })
        })
    }

    fn stale_assoc(&self, before_ms: i64, limit: usize) -> StoreFuture<'_, Vec<Association>> {
        self.read((), move |c, _| {
            Box::pin(async move {
                let sql = format!(
                    "SELECT {ASSOC_COLUMNS} FROM pcf_policy_association WHERE updated_ms < ?
                     ORDER BY updated_ms LIMIT ?"
                );
                assocs(c.exec(sql, (before_ms, limit as u64)).await?)
            })
        })
    }

    fn sm_of_ue(
        &self,
        ipv4: Option<&str>,
        ipv6: Option<&str>,
        dnn: Option<&str>,
    ) -> StoreFuture<'_, Option<SmPolicy>> {
        let Some(want) = super::UeAddress::of_request(ipv4, ipv6, dnn) else {
            return Box::pin(std::future::ready(Ok(None)));
        };
        // Not a hot path (the resident layer has its index): a scan, newest first, streamed.
        self.scan(move |c| {
            let want = want.clone();
            Box::pin(async move {
                let mut rows = c
                    .query_iter(format!(
                        "SELECT {SM_COLUMNS} FROM pcf_sm_policy ORDER BY sm_policy_id DESC"
                    ))
                    .await?;
                // Left unread when found: the driver drops the rest before the connection's next
                // statement.
                while let Some(row) = rows.next().await? {
                    let r: SmRow = store::mysql::mysql_async::from_row_opt(row).map_err(fault)?;
                    let p = sm(r);
                    if super::UeAddress::of_context(&p.context).is_some_and(|a| want.matches(&a)) {
                        return Ok(Some(p));
                    }
                }
                Ok(None)
            })
        })
    }

    fn create_app(&self, app: AppSession, sm: SmPolicy) -> StoreFuture<'_, bool> {
        self.write((app, sm), |c, a, feed| {
            Box::pin(async move {
                let (app, sm) = &*a;
                if !put_sm_decision(c, sm).await? {
                    return Ok(false);
                }
                c.exec_drop(
                    format!(
                        "INSERT INTO pcf_app_session ({APP_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)"
                    ),
                    (
                        app.id.as_str(),
                        app.sm_policy_id.as_str(),
                        app.supi.as_str(),
                        app.context.as_slice(),
                        app.rules.as_slice(),
                        app.updated_ms,
                    ),
                )
                .await?;
                let changes =
                    [(FEED_APP, app.id.as_str(), Op::Put), (FEED_SM, sm.id.as_str(), Op::Put)];
                feed.record(c, &changes).await?;
                Ok(true)
            })
        })
    }

    fn update_app(&self, app: AppSession, sm: SmPolicy) -> StoreFuture<'_, bool> {
        self.write((app, sm), |c, a, feed| {
            Box::pin(async move {
                let (app, sm) = &*a;
                let found: Option<u8> = c
                    .exec_first(
                        "SELECT 1 FROM pcf_app_session WHERE app_session_id = ? FOR UPDATE",
                        (&app.id,),
                    )
                    .await?;
                if found.is_none() {
                    return Ok(false);
                }
                c.exec_drop(
                    "UPDATE pcf_app_session SET context = ?, rules = ?, updated_ms = ?
                     WHERE app_session_id = ?",
                    (app.context.as_slice(), app.rules.as_slice(), app.updated_ms, &app.id),
                )
                .await?;
                // An association's delete takes its application sessions in the same commit,
                // so a session still here has its association.
                if !put_sm_decision(c, sm).await? {
                    return Ok(false);
                }
                let changes =
                    [(FEED_APP, app.id.as_str(), Op::Put), (FEED_SM, sm.id.as_str(), Op::Put)];
                feed.record(c, &changes).await?;
                Ok(true)
            })
        })
    }

    fn delete_app(&self, id: &str, sm: Option<SmPolicy>) -> StoreFuture<'_, Option<AppSession>> {
        self.write((id.to_string(), sm), |c, a, feed| {
            Box::pin(async move {
                let (id, sm) = &*a;
                let sql = format!(
                    "SELECT {APP_COLUMNS} FROM pcf_app_session WHERE app_session_id = ? FOR UPDATE"
                );
                let row: Option<AppRow> = c.exec_first(sql, (id,)).await?;
                let Some(gone) = row.map(app) else { return Ok(None) };
                c.exec_drop("DELETE FROM pcf_app_session WHERE app_session_id = ?", (id,)).await?;
                let mut changes = vec![(FEED_APP, id.as_str(), Op::Delete)];
                if let Some(sm) = sm {
                    if put_sm_decision(c, sm).await? {
                        changes.push((FEED_SM, sm.id.as_str(), Op::Put));
                    }
                }
                feed.record(c, &changes).await?;
                Ok(Some(gone))
            })
        })
    }

    fn get_app(&self, id: &str) -> StoreFuture<'_, Option<AppSession>> {
        self.read(id.to_string(), |c, id| {
            Box::pin(async move {
                let sql =
                    format!("SELECT {APP_COLUMNS} FROM pcf_app_session WHERE app_session_id = ?");
                let row: Option<AppRow> = c.exec_first(sql, (&*id,)).await?;
                Ok(row.map(app))
            })
        })
    }

    fn apps_of(&self, sm_policy_id: &str) -> StoreFuture<'_, Vec<AppSession>> {
        self.read(sm_policy_id.to_string(), |c, id| {
            Box::pin(async move {
                let sql =
                    format!("SELECT {APP_COLUMNS} FROM pcf_app_session WHERE sm_policy_id = ?");
                let rows: Vec<AppRow> = c.exec(sql, (&*id,)).await?;
                Ok(rows.into_iter().map(app).collect())
            })
        })
    }

    fn put_sy_session(&self, s: SySession) -> StoreFuture<'_, ()> {
        self.write(s, |c, s, _| {
            Box::pin(async move {
                let counters = serde_json::to_vec(&s.counters).map_err(fault)?;
                let statuses = serde_json::to_vec(&s.statuses).map_err(fault)?;
                c.exec_drop(
                    "INSERT INTO pcf_sy_session
                     (supi, session_id, ocs_host, ocs_realm, counters, statuses)
                     VALUES (?, ?, ?, ?, ?, ?)
                     ON DUPLICATE KEY UPDATE session_id = VALUES(session_id),
                        ocs_host = VALUES(ocs_host), ocs_realm = VALUES(ocs_realm),
                        counters = VALUES(counters), statuses = VALUES(statuses)",
                    (
                        s.supi.as_str(),
                        s.session_id.as_str(),
                        s.ocs_host.as_str(),
                        s.ocs_realm.as_str(),
                        counters,
                        statuses,
                    ),
                )
                .await?;
                Ok(())
            })
        })
    }

    fn drop_sy_session(&self, supi: &str, session_id: &str) -> StoreFuture<'_, bool> {
        self.write((supi.to_string(), session_id.to_string()), |c, a, _| {
            Box::pin(async move {
                c.exec_drop(
                    "DELETE FROM pcf_sy_session WHERE supi = ? AND session_id = ?",
                    (&a.0, &a.1),
                )
                .await?;
                Ok(c.affected_rows() > 0)
            })
        })
    }

    fn sy_sessions(&self) -> StoreFuture<'_, Vec<SySession>> {
        self.scan(|c| {
            Box::pin(async move {
                type Row = (String, String, String, String, Vec<u8>, Vec<u8>);
                let rows: Vec<Row> = c
                    .query(
                        "SELECT supi, session_id, ocs_host, ocs_realm, counters, statuses
                         FROM pcf_sy_session",
                    )
                    .await?;
                Ok(rows
                    .into_iter()
                    .map(|(supi, session_id, ocs_host, ocs_realm, counters, statuses)| SySession {
                        supi,
                        session_id,
                        ocs_host,
                        ocs_realm,
                        counters: serde_json::from_slice(&counters).unwrap_or_default(),
                        statuses: object(&statuses),
                    })
                    .collect())
            })
        })
    }

    fn usage_all(&self) -> StoreFuture<'_, Vec<UsageRow>> {
        self.scan(|c| {
            Box::pin(async move {
                let rows: Vec<UsageDbRow> =
                    c.query(format!("SELECT {USAGE_COLUMNS} FROM pcf_usage")).await?;
                Ok(rows.into_iter().map(usage_row).collect())
            })
        })
    }

    fn update_sm_with_usage(
        &self,
        p: SmPolicy,
        ssv: SsvUpdates,
        usage: Vec<UsageRow>,
    ) -> StoreFuture<'_, bool> {
        self.write((p, ssv, usage), |c, a, feed| {
            Box::pin(async move {
                let (p, ssv, usage) = &*a;
                if !update_sm(c, p, ssv).await? {
                    return Ok(false);
                }
                put_usage(c, usage).await?;
                feed.sm_written(c, p, !ssv.is_empty()).await?;
                Ok(true)
            })
        })
    }

    fn delete_sm_with_usage(
        &self,
        id: &str,
        usage: Vec<UsageRow>,
    ) -> StoreFuture<'_, Option<Deleted>> {
        self.write((id.to_string(), usage), |c, a, feed| {
            Box::pin(async move {
                let Some(d) = delete_sm(c, &a.0, None).await? else { return Ok(None) };
                put_usage(c, &a.1).await?;
                feed.sm_deleted(c, &a.0, &d).await?;
                Ok(Some(d))
            })
        })
    }
}
