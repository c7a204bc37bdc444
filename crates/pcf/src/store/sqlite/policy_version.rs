//! [`PolicyVersionStore`] on SQLite (tables of migration `pcf-0014`).

use std::collections::BTreeMap;

use rusqlite::{params, Connection, OptionalExtension};

use super::SqlitePcfStore;
use crate::store::policy_version::{Activation, NewVersion, PolicyVersion, PolicyVersionStore};
use crate::store::StoreFuture;

const COLUMNS: &str = "version_id, name, project_version, description, source_dir, created_ms";

fn version_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<PolicyVersion> {
    Ok(PolicyVersion {
        id: r.get(0)?,
        name: r.get(1)?,
        project_version: r.get(2)?,
        description: r.get(3)?,
        dir: r.get(4)?,
        created_ms: r.get(5)?,
    })
}

type WithFiles = (PolicyVersion, BTreeMap<String, String>);

fn with_files(
    c: &Connection,
    sql: &str,
    p: impl rusqlite::Params,
) -> store::Result<Option<WithFiles>> {
    let got: Option<(PolicyVersion, Vec<u8>)> =
        c.prepare_cached(sql)?.query_row(p, |r| Ok((version_row(r)?, r.get(6)?))).optional()?;
    let Some((v, json)) = got else { return Ok(None) };
    let files = serde_json::from_slice(&json).map_err(store::Error::backend)?;
    Ok(Some((v, files)))
}

/// The activations not taken back, newest first: the version in force and the one before.
fn current(c: &Connection) -> store::Result<Option<Activation>> {
    let mut st = c.prepare_cached(
        "SELECT version_id FROM pcf_policy_activation WHERE rolled_back_ms IS NULL
         ORDER BY seq DESC LIMIT 2",
    )?;
    let ids: Vec<i64> = st.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
    Ok(ids.first().map(|&active| Activation { active, previous: ids.get(1).copied() }))
}

fn append_activation(c: &Connection, id: i64, at_ms: i64) -> store::Result<()> {
    c.prepare_cached(
        "INSERT INTO pcf_policy_activation (seq, version_id, activated_ms)
         VALUES ((SELECT COALESCE(MAX(seq), 0) + 1 FROM pcf_policy_activation), ?1, ?2)",
    )?
    .execute(params![id, at_ms])?;
    Ok(())
}

impl PolicyVersionStore for SqlitePcfStore {
    fn add_version(&self, v: NewVersion, activate: bool) -> StoreFuture<'_, PolicyVersion> {
        Box::pin(self.db.write(move |tx| {
            let files = serde_json::to_vec(&v.files).map_err(store::Error::backend)?;
            // Ids are assigned here rather than by the engine's rowid, so the schema reads the
            // same on a MySQL-protocol backend; the single writer makes MAX + 1 safe.
            let id: i64 = tx.query_row(
                "SELECT COALESCE(MAX(version_id), 0) + 1 FROM pcf_policy_version",
                [],
                |r| r.get(0),
            )?;
            tx.execute(
                "INSERT INTO pcf_policy_version
                 (version_id, name, project_version, description, source_dir, created_ms, files)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![id, v.name, v.project_version, v.description, v.dir, v.created_ms, files],
            )?;
            if activate {
                append_activation(tx, id, v.created_ms)?;
            }
            Ok(PolicyVersion {
                id,
                name: v.name,
                project_version: v.project_version,
                description: v.description,
                dir: v.dir,
                created_ms: v.created_ms,
            })
        }))
    }

    fn versions(&self) -> StoreFuture<'_, Vec<PolicyVersion>> {
        Box::pin(self.db.read(|c| {
            let sql = format!("SELECT {COLUMNS} FROM pcf_policy_version ORDER BY version_id DESC");
            let mut st = c.prepare_cached(&sql)?;
            let v = st.query_map([], version_row)?.collect::<Result<Vec<_>, _>>()?;
            Ok(v)
        }))
    }

    fn version(&self, id: i64) -> StoreFuture<'_, Option<WithFiles>> {
        Box::pin(self.db.read(move |c| {
            let sql =
                format!("SELECT {COLUMNS}, files FROM pcf_policy_version WHERE version_id = ?1");
            with_files(c, &sql, [id])
        }))
    }

    fn newest_from_dir(&self, dir: &str) -> StoreFuture<'_, Option<WithFiles>> {
        let dir = dir.to_string();
        Box::pin(self.db.read(move |c| {
            let sql = format!(
                "SELECT {COLUMNS}, files FROM pcf_policy_version WHERE source_dir = ?1
                 ORDER BY version_id DESC LIMIT 1"
            );
            with_files(c, &sql, [dir])
        }))
    }

    fn activation(&self) -> StoreFuture<'_, Option<Activation>> {
        Box::pin(self.db.read(current))
    }

    fn activate(&self, id: i64, at_ms: i64) -> StoreFuture<'_, Option<Activation>> {
        Box::pin(self.db.write(move |tx| {
            let known = tx
                .prepare_cached("SELECT 1 FROM pcf_policy_version WHERE version_id = ?1")?
                .exists([id])?;
            if !known {
                return Ok(None);
            }
            append_activation(tx, id, at_ms)?;
            current(tx)
        }))
    }

    fn rollback(&self, at_ms: i64) -> StoreFuture<'_, Option<Activation>> {
        Box::pin(self.db.write(move |tx| {
            let Some(now) = current(tx)? else { return Ok(None) };
            if now.previous.is_none() {
                return Ok(None);
            }
            tx.prepare_cached(
                "UPDATE pcf_policy_activation SET rolled_back_ms = ?1
                 WHERE seq = (SELECT MAX(seq) FROM pcf_policy_activation
                              WHERE rolled_back_ms IS NULL)",
            )?
            .execute([at_ms])?;
            Ok(Some(now))
        }))
    }

    fn activated_at(&self) -> StoreFuture<'_, BTreeMap<i64, i64>> {
        Box::pin(self.db.read(|c| {
            let mut st = c.prepare_cached(
                "SELECT version_id, MAX(activated_ms) FROM pcf_policy_activation
                 WHERE rolled_back_ms IS NULL GROUP BY version_id",
            )?;
            let m = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<_, _>>()?;
            Ok(m)
        }))
    }
}
