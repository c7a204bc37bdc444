//! Storage for every fivecore NF: backend-neutral traits and their backends.
//!
//! # Embedded backend: SQLite
//!
//! [`SqliteStore`] keeps the state in one SQLite file in WAL mode.
//!
//! - **One writer thread.** SQLite serializes writers anyway; letting many
//!   threads fight over the write lock only adds `SQLITE_BUSY` retries and
//!   one fsync per write. A single thread owns the only read-write
//!   connection.
//! - **Group commit.** The writer takes the first queued job, then everything
//!   else already queued (up to [`SqliteConfig::max_batch`]), runs them all in
//!   one transaction and commits once. Under load the queue refills while a
//!   commit is being fsynced, so batches grow with the load and the fsync cost
//!   per write falls; an idle store commits a lone write at once.
//! - **Adaptive batching.** Under concurrent load (the previous batch had
//!   more than one write), a partial batch that follows the previous commit by
//!   less than [`SqliteConfig::commit_delay_us`] waits out the rest of that
//!   delay and takes what queued meanwhile: commits are bounded to about one
//!   per delay, so each fsync, WAL append and reader page-cache rebuild serves
//!   more writes. A write reaching a store that has not committed for that
//!   long, or a lone caller's next write, is not held back.
//! - **A savepoint per job.** A job that fails (a version mismatch, a
//!   duplicate id, an error in NF code) rolls back to its savepoint; the
//!   other jobs of the batch are unaffected. A batch of one job runs without
//!   a savepoint (its transaction is rolled back instead), which spares
//!   SQLite's sub-journal copy of every page the job touches.
//! - **Acknowledged means committed.** A write's future resolves only after
//!   the `COMMIT` of its batch has returned. With `synchronous = full` (the
//!   default) that commit is fsynced: it survives `kill -9`, an OS crash and
//!   a power loss. With `synchronous = normal` it survives `kill -9` (the WAL
//!   is in the OS page cache) but the last commits may be lost on power loss.
//! - **Reader pool.** In WAL mode readers never block the writer nor each
//!   other, so reads run on their own threads with read-only connections, each
//!   job in a read transaction (one consistent snapshot). A read wakes one idle
//!   reader, or none while all are busy.
//! - **Async in front, threads behind.** Async code sends jobs over bounded
//!   channels and awaits a oneshot reply, so no tokio worker blocks on disk,
//!   and a full queue pushes back on callers instead of growing memory.
//!
//! NF-specific schemas use [`SqliteStore::migrate`] for their DDL and
//! [`SqliteStore::write`] / [`SqliteStore::read`] to run their own SQL on
//! these threads.
//!
//! # Backend-neutral traits
//!
//! NFs depend on traits, not on SQLite. [`DocumentStore`] is the shared
//! primitive (versioned documents with expiry and exact-match secondary
//! indexes); NF crates define traits for their own needs on top of it or next
//! to it. Signatures carry no SQLite types and the contract needs no
//! engine-specific SQL: a document is one row keyed by `(collection, id)` plus
//! one row per index entry, without foreign keys.
//!
//! # Adding a MySQL-protocol backend
//!
//! A MariaDB Galera / MySQL NDB backend is a new module next to [`sqlite`]
//! that implements the same traits over a connection pool:
//! - the same two tables (`VARBINARY` or `utf8mb4_bin` keys so ids sort by
//!   bytes as in SQLite; key limits in [`document`] fit InnoDB and NDB);
//! - conditional writes as `UPDATE ... WHERE version = ?` checking affected
//!   rows (Galera certifies them at commit; a certification failure maps to
//!   [`Error::VersionMismatch`] after re-reading the version, or is retried);
//! - each trait call one transaction, so the acknowledgement rule holds;
//! - there is no group commit to write: the server does it.

pub mod any;
pub mod config;
pub mod document;
pub mod error;
pub mod metrics;
pub mod mysql;
pub mod sqlite;

pub use any::AnyStore;
pub use config::{Backend, MysqlConfig, SqliteConfig, Synchronous};
pub use document::{Document, DocumentData, DocumentStore, IndexKey, UnixMillis, Upserted};
pub use error::{Error, Result};
pub use mysql::{MysqlMigration, MysqlStats, MysqlStore};
pub use sqlite::{Migration, SqliteStore, StoreLock, StoreStats};
