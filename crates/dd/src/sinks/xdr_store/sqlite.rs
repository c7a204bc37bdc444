//! [`XdrStore`] on the embedded SQLite engine.
//!
//! One row per xDR: the columns queries select on, and the record's JSON. Indexes serve the
//! three ways in: by SUPI then start time, by start time, by end time (retention). The NF types
//! are kept as `,PCF,UDR,` so an NF filter is a substring test on the rows the other conditions
//! leave.

use rusqlite::types::Value as SqlValue;
use store::{Migration, SqliteStore};

use super::{OutcomeFilter, StoreFuture, XdrPage, XdrQuery, XdrStore};
use crate::transforms::correlate::xdr::Xdr;

pub const MIGRATIONS: &[Migration] = &[Migration::new(
    "dd-0001-xdrs",
    "CREATE TABLE dd_xdrs (
        row INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        start_ns INTEGER NOT NULL,
        end_ns INTEGER NOT NULL,
        supi TEXT NOT NULL,
        outcome TEXT NOT NULL,
        outcome_status INTEGER,
        nf_types TEXT NOT NULL,
        doc TEXT NOT NULL
    );
    CREATE INDEX dd_xdrs_by_supi ON dd_xdrs (supi, start_ns, row);
    CREATE INDEX dd_xdrs_by_start ON dd_xdrs (start_ns, row);
    CREATE INDEX dd_xdrs_by_end ON dd_xdrs (end_ns);",
)];

/// The xDR store on an embedded SQLite engine (its own file, or the Data Director's).
#[derive(Clone, Debug)]
pub struct SqliteXdrStore {
    db: SqliteStore,
}

impl SqliteXdrStore {
    /// Applies the schema to `db` and serves xDRs from it.
    pub async fn on(db: SqliteStore) -> store::Result<Self> {
        db.migrate(MIGRATIONS.iter().copied()).await?;
        Ok(SqliteXdrStore { db })
    }

    pub fn engine(&self) -> &SqliteStore {
        &self.db
    }
}

/// The SUPI as stored and queried: without `imsi-`, so an SBI copy's SUPI and a Diameter copy's
/// IMSI find the same subscriber.
pub(super) fn supi_key(supi: &str) -> &str {
    supi.strip_prefix("imsi-").unwrap_or(supi)
}

fn i64_of(ns: u64) -> i64 {
    i64::try_from(ns).unwrap_or(i64::MAX)
}

impl XdrStore for SqliteXdrStore {
    fn insert(&self, xdrs: Vec<Xdr>) -> StoreFuture<'_, usize> {
        Box::pin(async move {
            if xdrs.is_empty() {
                return Ok(0);
            }
            // Encoded here, on the caller's task: the writer thread's time is for SQLite.
            let rows: Vec<_> = xdrs
                .iter()
                .map(|x| {
                    let doc = serde_json::to_string(x).map_err(store::Error::backend)?;
                    let nf_types = format!(",{},", x.nf_types.join(","));
                    Ok((
                        x.id.clone(),
                        x.start,
                        x.end,
                        x.supi.clone(),
                        x.outcome,
                        x.outcome_status,
                        nf_types,
                        doc,
                    ))
                })
                .collect::<store::Result<_>>()?;
            self.db
                .write(move |tx| {
                    let mut stmt = tx.prepare_cached(
                        "INSERT INTO dd_xdrs (id, start_ns, end_ns, supi, outcome, outcome_status, nf_types, doc)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                         ON CONFLICT (id) DO UPDATE SET start_ns = excluded.start_ns,
                           end_ns = excluded.end_ns, supi = excluded.supi, outcome = excluded.outcome,
                           outcome_status = excluded.outcome_status, nf_types = excluded.nf_types,
                           doc = excluded.doc",
                    )?;
                    for (id, start, end, supi, outcome, status, nf_types, doc) in &rows {
                        stmt.execute(rusqlite::params![
                            id,
                            i64_of(*start),
                            i64_of(*end),
                            supi_key(supi.as_deref().unwrap_or("")),
                            outcome.as_str(),
                            status,
                            nf_types,
                            doc,
                        ])?;
                    }
                    Ok(rows.len())
                })
                .await
        })
    }

    fn query(&self, q: XdrQuery) -> StoreFuture<'_, XdrPage> {
        Box::pin(async move {
            let limit = q.limit.max(1);
            let mut sql = String::from("SELECT row, start_ns, doc FROM dd_xdrs WHERE 1 = 1");
            let mut args: Vec<SqlValue> = Vec::new();
            let mut arg = |sql: &mut String, clause: &str, v: SqlValue| {
                args.push(v);
                sql.push_str(&clause.replace('?', &format!("?{}", args.len())));
            };
            if let Some(s) = &q.supi {
                arg(&mut sql, " AND supi = ?", SqlValue::Text(supi_key(s).to_owned()));
            }
            if let Some(from) = q.from {
                arg(&mut sql, " AND start_ns >= ?", SqlValue::Integer(i64_of(from)));
            }
            if let Some(to) = q.to {
                arg(&mut sql, " AND start_ns < ?", SqlValue::Integer(i64_of(to)));
            }
            match q.outcome {
                Some(OutcomeFilter::Is(o)) => {
                    arg(&mut sql, " AND outcome = ?", SqlValue::Text(o.as_str().to_owned()))
                }
                Some(OutcomeFilter::FailedWith(code)) => arg(
                    &mut sql,
                    " AND outcome = 'failure' AND outcome_status = ?",
                    SqlValue::Integer(code.into()),
                ),
                None => {}
            }
            if let Some(nf) = &q.nf_type {
                let needle = format!(",{},", nf.to_ascii_uppercase());
                arg(&mut sql, " AND instr(upper(nf_types), ?) > 0", SqlValue::Text(needle));
            }
            if let Some(c) = q.after {
                arg(&mut sql, " AND (start_ns > ?", SqlValue::Integer(i64_of(c.start)));
                arg(&mut sql, " OR (start_ns = ?", SqlValue::Integer(i64_of(c.start)));
                arg(&mut sql, " AND row > ?))", SqlValue::Integer(c.row));
            }
            // One more than the page: whether a next page exists is then known, not guessed.
            arg(&mut sql, " ORDER BY start_ns, row LIMIT ?", SqlValue::Integer((limit + 1) as i64));
            let rows: Vec<(i64, i64, String)> = self
                .db
                .read(move |conn| {
                    let mut stmt = conn.prepare_cached(&sql)?;
                    let rows = stmt
                        .query_map(rusqlite::params_from_iter(args), |r| {
                            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                        })?
                        .collect::<rusqlite::Result<Vec<_>>>()?;
                    Ok(rows)
                })
                .await?;
            XdrPage::from_rows(rows, limit)
        })
    }

    fn delete_ended_before(&self, cutoff_ns: u64, max_rows: usize) -> StoreFuture<'_, usize> {
        Box::pin(async move {
            self.db
                .write(move |tx| {
                    let n = tx
                        .prepare_cached(
                            "DELETE FROM dd_xdrs WHERE row IN
                             (SELECT row FROM dd_xdrs WHERE end_ns < ?1 LIMIT ?2)",
                        )?
                        .execute(rusqlite::params![i64_of(cutoff_ns), max_rows as i64])?;
                    Ok(n)
                })
                .await
        })
    }
}
