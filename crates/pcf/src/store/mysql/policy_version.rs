//! [`PolicyVersionStore`] on the MySQL-protocol backend (tables `pcf_policy_version` and
//! `pcf_policy_activation` of migration `pcf-0001-tables`).
//!
//! Ids are the largest plus one, read `FOR UPDATE`: InnoDB then locks the end of the index, so
//! two adds take turns instead of both taking one id (through two Galera nodes the second
//! fails certification and is tried again).

use std::collections::BTreeMap;

use store::mysql::mysql_async::prelude::Queryable;
use store::mysql::mysql_async::Conn;
use store::mysql::TxError;

use super::{fault, MysqlPcfStore};
use crate::store::policy_version::{Activation, NewVersion, PolicyVersion, PolicyVersionStore};
use crate::store::StoreFuture;

const COLUMNS: &str = "version_id, name, project_version, description, source_dir, created_ms";
type VersionRow = (i64, String, String, String, Option<String>, i64);

fn version(r: VersionRow) -> PolicyVersion {
    PolicyVersion {
        id: r.0,
        name: r.1,
        project_version: r.2,
        description: r.3,
        dir: r.4,
        created_ms: r.5,
    }
}

type WithFiles = (PolicyVersion, BTreeMap<String, String>);

async fn with_files(
    c: &mut Conn,
    sql: String,
    p: impl Into<store::mysql::mysql_async::Params> + Send,
) -> Result<Option<WithFiles>, TxError> {
    type Row = (i64, String, String, String, Option<String>, i64, Vec<u8>);
    let row: Option<Row> = c.exec_first(sql, p).await?;
    let Some(r) = row else { return Ok(None) };
    let files = serde_json::from_slice(&r.6).map_err(fault)?;
    Ok(Some((version((r.0, r.1, r.2, r.3, r.4, r.5)), files)))
}

/// The activations not taken back, newest first: the version in force and the one before.
async fn current(c: &mut Conn, lock: bool) -> Result<Option<Activation>, TxError> {
    let sql = format!(
        "SELECT version_id FROM pcf_policy_activation WHERE rolled_back_ms IS NULL
         ORDER BY seq DESC LIMIT 2{}",
        if lock { " FOR UPDATE" } else { "" }
    );
    let ids: Vec<i64> = c.query(sql).await?;
    Ok(ids.first().map(|&active| Activation { active, previous: ids.get(1).copied() }))
}

async fn append_activation(c: &mut Conn, id: i64, at_ms: i64) -> Result<(), TxError> {
    let seq: Option<i64> = c
        .query_first("SELECT COALESCE(MAX(seq), 0) + 1 FROM pcf_policy_activation FOR UPDATE")
        .await?;
    c.exec_drop(
        "INSERT INTO pcf_policy_activation (seq, version_id, activated_ms) VALUES (?, ?, ?)",
        (seq.unwrap_or(1), id, at_ms),
    )
    .await?;
    Ok(())
}

impl PolicyVersionStore for MysqlPcfStore {
    fn add_version(&self, v: NewVersion, activate: bool) -> StoreFuture<'_, PolicyVersion> {
        self.write(v, move |c, v, _| {
            Box::pin(async move {
                let files = serde_json::to_vec(&v.files).map_err(fault)?;
                let id: Option<i64> = c
                    .query_first(
                        "SELECT COALESCE(MAX(version_id), 0) + 1 FROM pcf_policy_version FOR UPDATE",
                    )
                    .await?;
                let id = id.unwrap_or(1);
                c.exec_drop(
                    format!("INSERT INTO pcf_policy_version ({COLUMNS}, files) VALUES (?, ?, ?, ?, ?, ?, ?)"),
                    (
                        id,
                        v.name.as_str(),
                        v.project_version.as_str(),
                        v.description.as_str(),
                        v.dir.as_deref(),
                        v.created_ms,
                        files,
                    ),
                )
                .await?;
                if activate {
                    append_activation(c, id, v.created_ms).await?;
                }
                Ok(PolicyVersion {
                    id,
                    name: v.name.clone(),
                    project_version: v.project_version.clone(),
                    description: v.description.clone(),
                    dir: v.dir.clone(),
                    created_ms: v.created_ms,
                })
            })
        })
    }

    fn versions(&self) -> StoreFuture<'_, Vec<PolicyVersion>> {
        self.read((), |c, _| {
            Box::pin(async move {
                let sql =
                    format!("SELECT {COLUMNS} FROM pcf_policy_version ORDER BY version_id DESC");
                let rows: Vec<VersionRow> = c.query(sql).await?;
                Ok(rows.into_iter().map(version).collect())
            })
        })
    }

    fn version(&self, id: i64) -> StoreFuture<'_, Option<WithFiles>> {
        self.read((), move |c, _| {
            Box::pin(async move {
                let sql =
                    format!("SELECT {COLUMNS}, files FROM pcf_policy_version WHERE version_id = ?");
                with_files(c, sql, (id,)).await
            })
        })
    }

    fn newest_from_dir(&self, dir: &str) -> StoreFuture<'_, Option<WithFiles>> {
        self.read(dir.to_string(), |c, dir| {
            Box::pin(async move {
                let sql = format!(
                    "SELECT {COLUMNS}, files FROM pcf_policy_version WHERE source_dir = ?
                     ORDER BY version_id DESC LIMIT 1"
                );
                with_files(c, sql, (dir.as_str(),)).await
            })
        })
    }

    fn activation(&self) -> StoreFuture<'_, Option<Activation>> {
        self.read((), |c, _| Box::pin(async move { current(c, false).await }))
    }

    fn activate(&self, id: i64, at_ms: i64) -> StoreFuture<'_, Option<Activation>> {
        self.write((), move |c, _, _| {
            Box::pin(async move {
                let known: Option<u8> = c
                    .exec_first("SELECT 1 FROM pcf_policy_version WHERE version_id = ?", (id,))
                    .await?;
                if known.is_none() {
                    return Ok(None);
                }
                append_activation(c, id, at_ms).await?;
                current(c, false).await
            })
        })
    }

    fn rollback(&self, at_ms: i64) -> StoreFuture<'_, Option<Activation>> {
        self.write((), move |c, _, _| {
            Box::pin(async move {
                let Some(now) = current(c, true).await? else { return Ok(None) };
                if now.previous.is_none() {
                    return Ok(None);
                }
                let seq: Option<i64> = c
                    .query_first(
                        "SELECT MAX(seq) FROM pcf_policy_activation WHERE rolled_back_ms IS NULL",
                    )
                    .await?;
                c.exec_drop(
                    "UPDATE pcf_policy_activation SET rolled_back_ms = ? WHERE seq = ?",
                    (at_ms, seq),
                )
                .await?;
                Ok(Some(now))
            })
        })
    }

    fn activated_at(&self) -> StoreFuture<'_, BTreeMap<i64, i64>> {
        self.read((), |c, _| {
            Box::pin(async move {
                let rows: Vec<(i64, i64)> = c
                    .query(
                        "SELECT version_id, MAX(activated_ms) FROM pcf_policy_activation
                         WHERE rolled_back_ms IS NULL GROUP BY version_id",
                    )
                    .await?;
                Ok(rows.into_iter().collect())
            })
        })
    }
}
