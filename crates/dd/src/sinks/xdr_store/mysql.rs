//! [`XdrStore`] on the MySQL-protocol backend (`[store] backend = "mysql"`, issue #25).
//!
//! The same row per xDR as on SQLite: the columns queries select on and the record's JSON, a
//! primary key (`row_id`, the cursor's tie-break) and no foreign keys, so the table suits NDB as
//! well as InnoDB. A replayed xDR (same id) updates its row in place through the unique key, as
//! SQLite's `ON CONFLICT` does. The NF types are kept upper-cased (`,PCF,UDR,`): the column is
//! binary, where `UPPER()` changes nothing, so the case-blind match is made on what is stored.
//! Each call is one transaction of the store, retried and failed over by it.

use store::mysql::mysql_async::prelude::Queryable;
use store::mysql::mysql_async::{Params, Value as SqlValue};
use store::{MysqlMigration, MysqlStore};

use super::{OutcomeFilter, StoreFuture, XdrPage, XdrQuery, XdrStore};
use crate::transforms::correlate::xdr::Xdr;

pub const MIGRATIONS: &[MysqlMigration] = &[MysqlMigration::new(
    "dd-0001-xdrs",
    &["CREATE TABLE IF NOT EXISTS dd_xdrs (
            row_id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
            id VARBINARY(255) NOT NULL,
            start_ns BIGINT NOT NULL,
            end_ns BIGINT NOT NULL,
            supi VARBINARY(255) NOT NULL,
            outcome VARBINARY(16) NOT NULL,
            outcome_status INT UNSIGNED NULL,
            nf_types VARBINARY(1024) NOT NULL,
            doc LONGBLOB NOT NULL,
            UNIQUE KEY dd_xdrs_id (id),
            KEY dd_xdrs_by_supi (supi, start_ns, row_id),
            KEY dd_xdrs_by_start (start_ns, row_id),
            KEY dd_xdrs_by_end (end_ns)
        ) ENGINE=InnoDB"],
)];

/// Rows per `INSERT` statement: a batch a correlation closed is one transaction of a few
/// statements, each well under the server's packet limit (an xDR's JSON is a few KiB).
const ROWS_PER_INSERT: usize = 100;

/// The xDR store on a MySQL-protocol database.
#[derive(Clone)]
pub struct MysqlXdrStore {
    db: MysqlStore,
}

impl MysqlXdrStore {
    /// Applies the schema to `db` and serves xDRs from it.
    pub async fn on(db: MysqlStore) -> store::Result<Self> {
        db.migrate(MIGRATIONS).await?;
        Ok(MysqlXdrStore { db })
    }
}

fn i64_of(ns: u64) -> i64 {
    i64::try_from(ns).unwrap_or(i64::MAX)
}

/// One xDR's columns, encoded before the transaction (a retried try reuses them).
type Row = [SqlValue; 8];

fn row(x: &Xdr) -> store::Result<Row> {
    let doc = serde_json::to_vec(x).map_err(store::Error::backend)?;
    let nf_types = format!(",{},", x.nf_types.join(",")).to_ascii_uppercase();
    Ok([
        SqlValue::from(x.id.as_str()),
        SqlValue::from(i64_of(x.start)),
        SqlValue::from(i64_of(x.end)),
        SqlValue::from(super::sqlite::supi_key(x.supi.as_deref().unwrap_or(""))),
        SqlValue::from(x.outcome.as_str()),
        x.outcome_status.map_or(SqlValue::NULL, SqlValue::from),
        SqlValue::from(nf_types),
        SqlValue::from(doc),
    ])
}

fn insert_sql(rows: usize) -> String {
    let mut sql = String::from(
        "INSERT INTO dd_xdrs (id, start_ns, end_ns, supi, outcome, outcome_status, nf_types, doc) VALUES ",
    );
    for i in 0..rows {
        sql.push_str(if i == 0 {
            "(?, ?, ?, ?, ?, ?, ?, ?)"
        } else {
            ", (?, ?, ?, ?, ?, ?, ?, ?)"
        });
    }
    sql.push_str(
        " ON DUPLICATE KEY UPDATE start_ns = VALUES(start_ns), end_ns = VALUES(end_ns), \
         supi = VALUES(supi), outcome = VALUES(outcome), outcome_status = VALUES(outcome_status), \
         nf_types = VALUES(nf_types), doc = VALUES(doc)",
    );
    sql
}

impl XdrStore for MysqlXdrStore {
    fn insert(&self, xdrs: Vec<Xdr>) -> StoreFuture<'_, usize> {
        Box::pin(async move {
            if xdrs.is_empty() {
                return Ok(0);
            }
            let rows =
                std::sync::Arc::new(xdrs.iter().map(row).collect::<store::Result<Vec<_>>>()?);
            let n = rows.len();
            self.db
                .write(move |c| {
                    let rows = rows.clone();
                    Box::pin(async move {
                        for chunk in rows.chunks(ROWS_PER_INSERT) {
                            let params: Vec<SqlValue> =
                                chunk.iter().flat_map(|r| r.iter().cloned()).collect();
                            c.exec_drop(insert_sql(chunk.len()), Params::Positional(params))
                                .await?;
                        }
                        Ok(())
                    })
                })
                .await?;
            Ok(n)
        })
    }

    fn query(&self, q: XdrQuery) -> StoreFuture<'_, XdrPage> {
        Box::pin(async move {
            let limit = q.limit.max(1);
            let mut sql = String::from("SELECT row_id, start_ns, doc FROM dd_xdrs WHERE 1 = 1");
            let mut args: Vec<SqlValue> = Vec::new();
            if let Some(s) = &q.supi {
                sql.push_str(" AND supi = ?");
                args.push(super::sqlite::supi_key(s).into());
            }
            if let Some(from) = q.from {
                sql.push_str(" AND start_ns >= ?");
                args.push(i64_of(from).into());
            }
            if let Some(to) = q.to {
                sql.push_str(" AND start_ns < ?");
                args.push(i64_of(to).into());
            }
            match q.outcome {
                Some(OutcomeFilter::Is(o)) => {
                    sql.push_str(" AND outcome = ?");
                    args.push(o.as_str().into());
                }
                Some(OutcomeFilter::FailedWith(code)) => {
                    sql.push_str(" AND outcome = 'failure' AND outcome_status = ?");
                    args.push(code.into());
                }
                None => {}
            }
            if let Some(nf) = &q.nf_type {
                sql.push_str(" AND INSTR(nf_types, ?) > 0");
                args.push(format!(",{},", nf.to_ascii_uppercase()).into());
            }
            if let Some(c) = q.after {
                sql.push_str(" AND (start_ns > ? OR (start_ns = ? AND row_id > ?))");
                args.extend([i64_of(c.start).into(), i64_of(c.start).into(), c.row.into()]);
            }
            // One more than the page: whether a next page exists is then known, not guessed.
            sql.push_str(" ORDER BY start_ns, row_id LIMIT ?");
            args.push(((limit + 1) as u64).into());
            let (sql, args) = (std::sync::Arc::new(sql), std::sync::Arc::new(args));
            let rows: Vec<(i64, i64, Vec<u8>)> = self
                .db
                .read(move |c| {
                    let (sql, args) = (sql.clone(), args.clone());
                    Box::pin(async move {
                        Ok(c.exec(sql.as_str(), Params::Positional(args.to_vec())).await?)
                    })
                })
                .await?;
            XdrPage::from_rows(rows, limit)
        })
    }

    fn delete_ended_before(&self, cutoff_ns: u64, max_rows: usize) -> StoreFuture<'_, usize> {
        Box::pin(async move {
            self.db
                .write(move |c| {
                    Box::pin(async move {
                        c.exec_drop(
                            "DELETE FROM dd_xdrs WHERE end_ns < ? ORDER BY end_ns LIMIT ?",
                            (i64_of(cutoff_ns), max_rows as u64),
                        )
                        .await?;
                        Ok(c.affected_rows() as usize)
                    })
                })
                .await
        })
    }
}
