//! The EIR store over the MySQL-protocol backend: the same two tables as on SQLite
//! ([`super::sqlite`]), with `BIGINT` keys, a primary key each and no foreign keys (NDB-friendly).
//! Every call is one transaction of [`MysqlStore`], tried again as a whole after a deadlock or a
//! Galera certification failure. The EIR keeps nothing in memory, so several UDR instances on one
//! database need no change feed for it.

use std::sync::Arc;

use store::mysql::mysql_async::prelude::Queryable;
use store::mysql::mysql_async::Conn;
use store::mysql::TxError;
use store::{MysqlMigration, MysqlStore};

use super::{
    Binding, EirItem, EirStore, EquipmentStatus, Found, ImeiEntry, Loaded, RangeConflict,
    RangeEntry, SEP,
};
use crate::StoreFuture;

pub const MIGRATIONS: &[MysqlMigration] = &[MysqlMigration::new(
    "udr-0100-eir",
    &[
        // status: 0 WHITELISTED, 1 BLACKLISTED, 2 GREYLISTED; supis / gpsis newline-separated,
        // NULL when the entry is not bound (as on SQLite).
        "CREATE TABLE IF NOT EXISTS udr_eir_imei (
            imei BIGINT NOT NULL PRIMARY KEY,
            status TINYINT NOT NULL,
            supis MEDIUMBLOB NULL,
            gpsis MEDIUMBLOB NULL
        ) ENGINE=InnoDB",
        "CREATE TABLE IF NOT EXISTS udr_eir_imei_range (
            range_start BIGINT NOT NULL PRIMARY KEY,
            range_end BIGINT NOT NULL,
            status TINYINT NOT NULL,
            supis MEDIUMBLOB NULL,
            gpsis MEDIUMBLOB NULL
        ) ENGINE=InnoDB",
    ],
)];

/// The EIR lists over a MySQL-protocol database.
#[derive(Clone)]
pub struct MysqlEir {
    db: MysqlStore,
}

impl MysqlEir {
    /// Over `db`, which must have [`MIGRATIONS`] applied.
    pub fn new(db: MysqlStore) -> Self {
        MysqlEir { db }
    }
}

type Bound = (Option<String>, Option<String>);

fn join(ids: &[String]) -> Option<String> {
    (!ids.is_empty()).then(|| ids.join("\n"))
}

fn split(col: Option<String>) -> Vec<String> {
    col.map(|s| s.split(SEP).map(str::to_owned).collect()).unwrap_or_default()
}

fn status(code: i64) -> Result<EquipmentStatus, TxError> {
    Ok(EquipmentStatus::from_code(code)?)
}

async fn lookup(c: &mut Conn, imei: u64) -> Result<Option<Found>, TxError> {
    let key = imei as i64;
    let single: Option<(i64, Option<String>, Option<String>)> = c
        .exec_first("SELECT status, supis, gpsis FROM udr_eir_imei WHERE imei = ?", (key,))
        .await?;
    if let Some((s, supis, gpsis)) = single {
        return Ok(Some(Found { status: status(s)?, supis, gpsis }));
    }
    let range: Option<(i64, i64, Option<String>, Option<String>)> = c
        .exec_first(
            "SELECT range_end, status, supis, gpsis FROM udr_eir_imei_range
             WHERE range_start <= ? ORDER BY range_start DESC LIMIT 1",
            (key,),
        )
        .await?;
    match range {
        Some((end, s, supis, gpsis)) if end >= key => {
            Ok(Some(Found { status: status(s)?, supis, gpsis }))
        }
        _ => Ok(None),
    }
}

async fn get_imei(c: &mut Conn, imei: u64, lock: bool) -> Result<Option<ImeiEntry>, TxError> {
    let sql = if lock {
        "SELECT status, supis, gpsis FROM udr_eir_imei WHERE imei = ? FOR UPDATE"
    } else {
        "SELECT status, supis, gpsis FROM udr_eir_imei WHERE imei = ?"
    };
    let row: Option<(i64, Option<String>, Option<String>)> =
        c.exec_first(sql, (imei as i64,)).await?;
    let Some((s, supis, gpsis)) = row else { return Ok(None) };
    Ok(Some(ImeiEntry {
        imei,
        status: status(s)?,
        binding: Binding { supis: split(supis), gpsis: split(gpsis) },
    }))
}

async fn get_range(c: &mut Conn, start: u64, lock: bool) -> Result<Option<RangeEntry>, TxError> {
    let sql = if lock {
        "SELECT range_end, status, supis, gpsis FROM udr_eir_imei_range WHERE range_start = ? \
         FOR UPDATE"
    } else {
        "SELECT range_end, status, supis, gpsis FROM udr_eir_imei_range WHERE range_start = ?"
    };
    let row: Option<(i64, i64, Option<String>, Option<String>)> =
        c.exec_first(sql, (start as i64,)).await?;
    let Some((end, s, supis, gpsis)) = row else { return Ok(None) };
    Ok(Some(RangeEntry {
        start,
        end: end as u64,
        status: status(s)?,
        binding: Binding { supis: split(supis), gpsis: split(gpsis) },
    }))
}

async fn put_imei(c: &mut Conn, e: &ImeiEntry) -> Result<(), TxError> {
    let b: Bound = (join(&e.binding.supis), join(&e.binding.gpsis));
    c.exec_drop(
        "INSERT INTO udr_eir_imei (imei, status, supis, gpsis) VALUES (?, ?, ?, ?)
         ON DUPLICATE KEY UPDATE status = VALUES(status), supis = VALUES(supis),
            gpsis = VALUES(gpsis)",
        (e.imei as i64, e.status.code(), b.0, b.1),
    )
    .await?;
    Ok(())
}

/// Creates or replaces the range starting at `e.start` unless it would overlap another. The
/// neighbours are read `FOR UPDATE`: InnoDB locks the gap below our end, so two overlapping
/// creations take turns (or deadlock, and one is tried again) and the second sees the first.
async fn put_range(c: &mut Conn, e: &RangeEntry) -> Result<Result<(), RangeConflict>, TxError> {
    let near: Vec<(i64, i64)> = c
        .exec(
            "SELECT range_start, range_end FROM udr_eir_imei_range
             WHERE range_start <= ? ORDER BY range_start DESC LIMIT 2 FOR UPDATE",
            (e.end as i64,),
        )
        .await?;
    if let Some((s, end)) =
        near.into_iter().find(|(s, end)| *s != e.start as i64 && *end >= e.start as i64)
    {
        return Ok(Err(RangeConflict::Overlaps(s as u64, end as u64)));
    }
    let b: Bound = (join(&e.binding.supis), join(&e.binding.gpsis));
    c.exec_drop(
        "INSERT INTO udr_eir_imei_range (range_start, range_end, status, supis, gpsis)
         VALUES (?, ?, ?, ?, ?)
         ON DUPLICATE KEY UPDATE range_end = VALUES(range_end), status = VALUES(status),
            supis = VALUES(supis), gpsis = VALUES(gpsis)",
        (e.start as i64, e.end as i64, e.status.code(), b.0, b.1),
    )
    .await?;
    Ok(Ok(()))
}

impl EirStore for MysqlEir {
    fn lookup(&self, imei: u64) -> StoreFuture<'_, Option<Found>> {
        Box::pin(self.db.read(move |c| Box::pin(lookup(c, imei))))
    }

    fn get_imei(&self, imei: u64) -> StoreFuture<'_, Option<ImeiEntry>> {
        Box::pin(self.db.read(move |c| Box::pin(get_imei(c, imei, false))))
    }

    fn create_imei(&self, e: ImeiEntry) -> StoreFuture<'_, bool> {
        let e = Arc::new(e);
        Box::pin(self.db.write(move |c| {
            let e = e.clone();
            Box::pin(async move {
                if get_imei(c, e.imei, true).await?.is_some() {
                    return Ok(false);
                }
                put_imei(c, &e).await?;
                Ok(true)
            })
        }))
    }

    fn update_imei(&self, e: ImeiEntry) -> StoreFuture<'_, bool> {
        let e = Arc::new(e);
        Box::pin(self.db.write(move |c| {
            let e = e.clone();
            Box::pin(async move {
                if get_imei(c, e.imei, true).await?.is_none() {
                    return Ok(false);
                }
                put_imei(c, &e).await?;
                Ok(true)
            })
        }))
    }

    fn delete_imei(&self, imei: u64) -> StoreFuture<'_, bool> {
        Box::pin(self.db.write(move |c| {
            Box::pin(async move {
                c.exec_drop("DELETE FROM udr_eir_imei WHERE imei = ?", (imei as i64,)).await?;
                Ok(c.affected_rows() == 1)
            })
        }))
    }

    fn get_range(&self, start: u64) -> StoreFuture<'_, Option<RangeEntry>> {
        Box::pin(self.db.read(move |c| Box::pin(get_range(c, start, false))))
    }

    fn create_range(&self, e: RangeEntry) -> StoreFuture<'_, Result<(), RangeConflict>> {
        let e = Arc::new(e);
        Box::pin(self.db.write(move |c| {
            let e = e.clone();
            Box::pin(async move {
                if get_range(c, e.start, true).await?.is_some() {
                    return Ok(Err(RangeConflict::Exists));
                }
                put_range(c, &e).await
            })
        }))
    }

    fn update_range(&self, e: RangeEntry) -> StoreFuture<'_, Result<(), RangeConflict>> {
        let e = Arc::new(e);
        Box::pin(self.db.write(move |c| {
            let e = e.clone();
            Box::pin(async move {
                if get_range(c, e.start, true).await?.is_none() {
                    return Ok(Err(RangeConflict::NotFound));
                }
                put_range(c, &e).await
            })
        }))
    }

    fn delete_range(&self, start: u64) -> StoreFuture<'_, bool> {
        Box::pin(self.db.write(move |c| {
            Box::pin(async move {
                c.exec_drop(
                    "DELETE FROM udr_eir_imei_range WHERE range_start = ?",
                    (start as i64,),
                )
                .await?;
                Ok(c.affected_rows() == 1)
            })
        }))
    }

    fn put(
        &self,
        rows: Vec<(u64, EirItem)>,
        stop_on_refused: bool,
    ) -> StoreFuture<'_, (Loaded, Vec<(u64, EirItem)>)> {
        let rows = Arc::new(rows);
        Box::pin(async move {
            let loaded = self
                .db
                .write({
                    let rows = rows.clone();
                    move |c| {
                        let rows = rows.clone();
                        Box::pin(async move {
                            let mut w = Loaded::default();
                            for (tag, item) in rows.iter() {
                                match item {
                                    EirItem::Imei(e) => {
                                        put_imei(c, e).await?;
                                        w.imeis += 1;
                                    }
                                    EirItem::Range(r) => match put_range(c, r).await? {
                                        Ok(()) => w.ranges += 1,
                                        Err(conflict) => {
                                            w.refused.push((*tag, conflict));
                                            if stop_on_refused {
                                                break;
                                            }
                                        }
                                    },
                                }
                            }
                            Ok(w)
                        })
                    }
                })
                .await?;
            let rows = Arc::try_unwrap(rows).unwrap_or_else(|a| (*a).clone());
            Ok((loaded, rows))
        })
    }
}
