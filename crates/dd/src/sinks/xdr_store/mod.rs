//! The xDR store: the sink of a correlation, and what the admin API queries and exports.
//!
//! [`XdrStore`] is everything the correlation consumer, the retention pass and the admin
//! handlers ask of it; no signature names an engine. [`sqlite`] implements it on the shared
//! embedded engine (`store::SqliteStore`: WAL, one writer thread with group commit, a reader
//! pool), so no insert, query or delete runs on a tokio worker; [`mysql`] on the MySQL-protocol
//! backend (`[store] backend = "mysql"`: async driver, the store's retries and failover), with
//! the same rows and the same cursors. The consumer inserts
//! the xDRs a MAIN batch closed with one call (one write job, one transaction) and commits its
//! offset once that call returns.
//!
//! Queries read by SUPI, start time, outcome and NF type, ordered by start time, a page at a
//! time: a page ends with a [`Cursor`] (the start time and row of its last xDR) that the next
//! query continues after, so an export walks any number of xDRs holding one page in memory.

pub mod config;
pub mod mysql;
pub mod sqlite;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use config::XdrStoreConfig;
pub use mysql::MysqlXdrStore;
pub use sqlite::SqliteXdrStore;

use crate::transforms::correlate::xdr::{Outcome, Xdr};

/// What a store call returns.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = store::Result<T>> + Send + 'a>>;

/// The persistence of xDRs.
pub trait XdrStore: Send + Sync + 'static {
    /// Stores `xdrs` in one transaction; an xDR whose id is stored already replaces it (a
    /// replayed record). Returns how many were written.
    fn insert(&self, xdrs: Vec<Xdr>) -> StoreFuture<'_, usize>;

    /// One page of the xDRs `query` selects, in start-time order.
    fn query(&self, query: XdrQuery) -> StoreFuture<'_, XdrPage>;

    /// Deletes at most `max_rows` xDRs whose last message is older than `cutoff_ns`; returns
    /// how many.
    fn delete_ended_before(&self, cutoff_ns: u64, max_rows: usize) -> StoreFuture<'_, usize>;
}

/// Which xDRs, and where a page starts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct XdrQuery {
    /// The subscriber: `imsi-001010000000001` and `001010000000001` are the same one.
    pub supi: Option<String>,
    /// Started at or after (nanoseconds since the UNIX epoch).
    pub from: Option<u64>,
    /// Started before.
    pub to: Option<u64>,
    pub outcome: Option<OutcomeFilter>,
    /// An NF type that took part (`PCF`).
    pub nf_type: Option<String>,
    /// Largest page.
    pub limit: usize,
    /// Continue after this xDR.
    pub after: Option<Cursor>,
}

/// An outcome (`success`, `failure`, `timeout`, `incomplete`), or the status of a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutcomeFilter {
    Is(Outcome),
    FailedWith(u32),
}

impl FromStr for OutcomeFilter {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        if let Some(o) = Outcome::parse(s) {
            return Ok(OutcomeFilter::Is(o));
        }
        match s.parse::<u32>() {
            Ok(code) if code > 0 && s.bytes().all(|b| b.is_ascii_digit()) => {
                Ok(OutcomeFilter::FailedWith(code))
            }
            _ => Err(()),
        }
    }
}

/// The place after the last xDR of a page: its start time and row. Written `<start>-<row>`, an
/// opaque token to clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    pub start: u64,
    pub row: i64,
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.start, self.row)
    }
}

impl FromStr for Cursor {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        let (start, row) = s.split_once('-').ok_or(())?;
        let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
        if !digits(start) || !digits(row) {
            return Err(());
        }
        Ok(Cursor { start: start.parse().map_err(|_| ())?, row: row.parse().map_err(|_| ())? })
    }
}

/// A page of xDRs, and the cursor of the next page when there may be one.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct XdrPage {
    pub xdrs: Vec<Xdr>,
    pub next: Option<Cursor>,
}

impl XdrPage {
    /// The page of `limit` xDRs from rows `(row, start, JSON document)` of a query asking for
    /// `limit + 1` (one more tells whether there is a next page); the same on every backend.
    pub fn from_rows<D: AsRef<[u8]>>(
        rows: Vec<(i64, i64, D)>,
        limit: usize,
    ) -> store::Result<XdrPage> {
        let more = rows.len() > limit;
        let mut page = XdrPage::default();
        for (row, start, doc) in rows.into_iter().take(limit) {
            page.xdrs.push(serde_json::from_slice(doc.as_ref()).map_err(store::Error::backend)?);
            page.next = Some(Cursor { start: start as u64, row });
        }
        if !more {
            page.next = None;
        }
        Ok(page)
    }
}

/// Deletes every xDR that ended more than `retention_secs` before `now_ns`, one delete of at
/// most `delete_batch` rows at a time; returns how many.
pub async fn retention_pass(
    store: &dyn XdrStore,
    config: &XdrStoreConfig,
    now_ns: u64,
) -> store::Result<usize> {
    let cutoff = now_ns.saturating_sub(config.retention_secs.saturating_mul(1_000_000_000));
    let mut deleted = 0;
    loop {
        let n = store.delete_ended_before(cutoff, config.delete_batch).await?;
        deleted += n;
        if n < config.delete_batch {
            return Ok(deleted);
        }
    }
}

/// Runs [`retention_pass`] every `retention_interval_secs` until `stop` completes. A failed pass
/// is logged and tried again at the next interval.
pub async fn run_retention(
    store: Arc<dyn XdrStore>,
    config: XdrStoreConfig,
    stop: impl Future<Output = ()>,
) {
    let mut every = tokio::time::interval(Duration::from_secs(config.retention_interval_secs));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => return,
            _ = every.tick() => {}
        }
        match retention_pass(&*store, &config, now_ns()).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!(deleted = n, "xDR retention pass"),
            Err(store::Error::Closed) => return,
            Err(e) => tracing::warn!(error = %e, "xDR retention pass failed"),
        }
    }
}

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_and_outcome_filters_parse_what_they_print() {
        let c = Cursor { start: 1_790_000_000_000_000_000, row: 42 };
        assert_eq!(c.to_string().parse::<Cursor>(), Ok(c));
        for bad in ["", "1", "1-", "-1", "a-1", "1-2-3", "1--2"] {
            assert!(bad.parse::<Cursor>().is_err(), "{bad}");
        }
        assert_eq!("timeout".parse(), Ok(OutcomeFilter::Is(Outcome::Timeout)));
        assert_eq!("5030".parse(), Ok(OutcomeFilter::FailedWith(5030)));
        assert!("+5".parse::<OutcomeFilter>().is_err());
        assert!("fail".parse::<OutcomeFilter>().is_err());
        assert!("0".parse::<OutcomeFilter>().is_err());
    }
}
