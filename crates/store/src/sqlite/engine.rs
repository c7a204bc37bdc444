//! Threads, channels and group commit of the embedded SQLite engine.
//!
//! SQLite allows one writer at a time; many threads contending for the write
//! lock would spin on `SQLITE_BUSY` and each pay an fsync. Instead a single
//! writer thread owns the only read-write connection and commits whatever
//! has queued up since its last commit in one transaction, so the cost of an
//! fsync is shared by every write of the batch. Readers never wait for the
//! writer in WAL mode, so they get their own threads and read-only
//! connections. Async callers talk to all of them through bounded channels
//! and await a oneshot reply: no tokio worker ever blocks on SQLite.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags, Transaction, TransactionBehavior};
use tokio::sync::{mpsc, oneshot};

use super::checkpoint::{self, Checkpoints};
use super::lock::StoreLock;
use super::migrate::{apply_migrations, Migration};
use super::read_queue::ReadQueue;
use crate::config::SqliteConfig;
use crate::error::{Error, Result};

/// Statements prepared once per connection: the document primitive's plus
/// room for an NF schema's.
const STATEMENT_CACHE_CAPACITY: usize = 64;
/// Bound on the WAL file left behind after a checkpoint, so a burst does not
/// leave a huge file forever.
const JOURNAL_SIZE_LIMIT_BYTES: i64 = 64 * 1024 * 1024;

/// Handle to an embedded SQLite store. Cheap to clone; all clones share the
/// same threads, which stop once the last clone is dropped (after finishing
/// the work already queued) or when [`close`](Self::close) is called.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    writer: mpsc::Sender<WriterMsg>,
    readers: Arc<ReadQueue<Box<dyn ReadJob>>>,
    counters: Arc<Counters>,
    checkpoints: Option<Arc<Checkpoints>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Shared while the store is open, so `fivecore restore` cannot replace the file under it
    /// (`lock.rs`); released by `close`.
    lock: Mutex<Option<StoreLock>>,
}

/// Counters of the engine since it was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Transactions committed by the writer thread (one per batch).
    pub commits: u64,
    /// Write jobs acknowledged as committed.
    pub writes: u64,
    /// Write jobs that failed and were rolled back (to their savepoint, or
    /// with their transaction when they were alone in it), or lost in a
    /// batch that could not commit.
    pub failed_writes: u64,
    /// Batches that could not commit.
    pub failed_batches: u64,
    /// Most write jobs committed by one transaction.
    pub largest_batch: u64,
    /// Read jobs run.
    pub reads: u64,
    /// Write jobs waiting in the queue now.
    pub queued_writes: u64,
    /// Read jobs waiting in the queue now.
    pub queued_reads: u64,
    /// Checkpoint passes made by the checkpointer thread.
    pub checkpoints: u64,
    /// Checkpoints the writer made itself because the checkpointer had
    /// fallen far behind.
    pub writer_checkpoints: u64,
}

#[derive(Default)]
struct Counters {
    /// Time of each successful `COMMIT` (WAL append and, with `synchronous = full`, its fsync):
    /// one observation per group commit, on the writer thread, so it costs nothing per request.
    commit_seconds: crate::metrics::CommitHistogram,
    commits: AtomicU64,
    writes: AtomicU64,
    failed_writes: AtomicU64,
    failed_batches: AtomicU64,
    largest_batch: AtomicU64,
    reads: AtomicU64,
}

impl Counters {
    fn add(counter: &AtomicU64, n: usize) {
        counter.fetch_add(n as u64, Ordering::Relaxed);
    }
}

enum WriterMsg {
    Job(Box<dyn WriteJob>),
    Shutdown,
}

impl SqliteStore {
    /// Opens (creating if needed) the database, switches it to WAL mode,
    /// creates the document tables and starts the writer and reader threads.
    pub async fn open(config: SqliteConfig) -> Result<Self> {
        config.validate()?;
        let lock = StoreLock::shared(&config.path)?;
        let counters = Arc::new(Counters::default());
        let mut threads = Vec::with_capacity(config.readers + 2);
        let checkpoints =
            config.background_checkpoint().then(|| Checkpoints::new(config.checkpoint_pages));

        // The writer goes first: it creates the file, turns on WAL and
        // creates the schema, all of which read-only connections cannot do.
        let (writer, writer_rx) = mpsc::channel(config.queue_capacity);
        let (ready, ready_rx) = oneshot::channel();
        threads.push(spawn("store-writer".to_owned(), {
            let config = config.clone();
            let counters = Arc::clone(&counters);
            let checkpoints = checkpoints.clone();
            move || writer_main(&config, writer_rx, &counters, checkpoints, ready)
        })?);
        ready_rx.await.map_err(|_| Error::Closed)??;

        if let Some(checkpoints) = &checkpoints {
            // Stopped by the writer when it ends, so it also ends when this
            // function fails below.
            let conn = open_checkpointer(&config)?;
            let checkpoints = Arc::clone(checkpoints);
            threads.push(spawn("store-checkpoint".to_owned(), move || checkpoints.run(&conn))?);
        }

        let readers = Arc::new(ReadQueue::new(config.queue_capacity));
        for n in 0..config.readers {
            let (ready, ready_rx) = oneshot::channel();
            let started = spawn(format!("store-reader-{n}"), {
                let config = config.clone();
                let counters = Arc::clone(&counters);
                let queue = Arc::clone(&readers);
                move || reader_main(&config, &queue, &counters, ready)
            });
            let opened = match started {
                Ok(thread) => {
                    threads.push(thread);
                    ready_rx.await.unwrap_or(Err(Error::Closed))
                }
                Err(err) => Err(err),
            };
            if let Err(err) = opened {
                // The writer stops as its sender drops here; started readers
                // stop once their queue is closed.
                readers.close();
                return Err(err);
            }
        }

        tracing::info!(
            path = %config.path.display(),
            synchronous = config.synchronous.pragma_value(),
            readers = config.readers,
            max_batch = config.max_batch,
            commit_delay_us = config.commit_delay().as_micros() as u64,
            background_checkpoint = config.background_checkpoint(),
            checkpoint_pages = config.checkpoint_pages,
            "store opened"
        );
        Ok(Self {
            inner: Arc::new(Inner {
                path: config.path,
                writer,
                readers,
                counters,
                checkpoints,
                threads: Mutex::new(threads),
                lock: Mutex::new(Some(lock)),
            }),
        })
    }

    /// Path of the database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Runs `f` on the writer thread inside the current group-commit
    /// transaction, within its own savepoint: if `f` fails, only its changes
    /// are rolled back. Returns once the transaction has committed.
    ///
    /// `f` shares the transaction with other jobs, so it must not commit,
    /// roll back or change connection settings, and should be short: the
    /// whole batch waits for it.
    pub async fn write<T, F>(&self, f: F) -> Result<T>
    where
        F: FnOnce(&Transaction<'_>) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let (reply, rx) = oneshot::channel();
        let job = Box::new(Job { f, reply });
        self.inner.writer.send(WriterMsg::Job(job)).await.map_err(|_| Error::Closed)?;
        rx.await.map_err(|_| Error::Closed)?
    }

    /// Runs `f` on a reader thread, inside a read transaction so that all its
    /// queries see the same snapshot. It sees every write acknowledged before
    /// the call.
    pub async fn read<T, F>(&self, f: F) -> Result<T>
    where
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let (reply, rx) = oneshot::channel();
        let job = Box::new(Job { f, reply });
        self.inner.readers.push(job).await.map_err(|_| Error::Closed)?;
        rx.await.map_err(|_| Error::Closed)?
    }

    /// Applies the migrations not applied yet, in order, and returns how many
    /// ran. Each is recorded by id, so call this at every start with the
    /// full list; never edit or reorder a released migration, append a new
    /// one. All of them commit together or not at all.
    pub async fn migrate(&self, migrations: impl IntoIterator<Item = Migration>) -> Result<usize> {
        let migrations: Vec<Migration> = migrations.into_iter().collect();
        self.write(move |tx| apply_migrations(tx, &migrations)).await
    }

    /// Engine counters and queue depths.
    pub fn stats(&self) -> StoreStats {
        let c = &self.inner.counters;
        let queued = |max: usize, free: usize| max.saturating_sub(free) as u64;
        let (checkpoints, writer_checkpoints) =
            self.inner.checkpoints.as_ref().map_or((0, 0), |c| c.counts());
        StoreStats {
            commits: c.commits.load(Ordering::Relaxed),
            writes: c.writes.load(Ordering::Relaxed),
            failed_writes: c.failed_writes.load(Ordering::Relaxed),
            failed_batches: c.failed_batches.load(Ordering::Relaxed),
            largest_batch: c.largest_batch.load(Ordering::Relaxed),
            reads: c.reads.load(Ordering::Relaxed),
            queued_writes: queued(self.inner.writer.max_capacity(), self.inner.writer.capacity()),
            queued_reads: self.inner.readers.len() as u64,
            checkpoints,
            writer_checkpoints,
        }
    }

    /// The engine's counters and its commit-time histogram on an NF's `/metrics`
    /// (`store_*`, docs/operations.md), read at scrape time.
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        // Weak: the registry outlives the store in an NF's SBI server; a scrape after the
        // store is gone shows no store figures rather than keeping its threads' state alive.
        let inner = Arc::downgrade(&self.inner);
        let commit_seconds = self.inner.counters.commit_seconds.clone();
        crate::metrics::register_sqlite(registry, commit_seconds, move || {
            inner.upgrade().map(|inner| SqliteStore { inner }.stats())
        });
    }

    /// Finishes the work queued before this call, stops the threads and
    /// waits for them. Later calls on any clone fail with [`Error::Closed`].
    pub async fn close(&self) -> Result<()> {
        // Sending fails only if the threads are gone already, which is fine.
        let _ = self.inner.writer.send(WriterMsg::Shutdown).await;
        self.inner.readers.close();
        let threads =
            std::mem::take(&mut *self.inner.threads.lock().unwrap_or_else(PoisonError::into_inner));
        tokio::task::spawn_blocking(move || {
            for thread in threads {
                if thread.join().is_err() {
                    tracing::error!("store thread panicked");
                }
            }
        })
        .await
        .map_err(Error::backend)?;
        // Every connection is closed: the file may be replaced now.
        self.inner.lock.lock().unwrap_or_else(PoisonError::into_inner).take();
        Ok(())
    }
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.inner.path)
            .field("stats", &self.stats())
            .finish()
    }
}

impl Drop for Inner {
    /// The last handle is gone: the readers finish the queued reads and stop
    /// (the writer does the same once its channel closes).
    fn drop(&mut self) {
        self.readers.close();
    }
}

fn spawn(name: String, body: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>> {
    thread::Builder::new().name(name).spawn(body).map_err(Error::backend)
}

/// A job and where its result goes. The same type serves both queues.
struct Job<F, T> {
    f: F,
    reply: oneshot::Sender<Result<T>>,
}

/// A type-erased write job.
trait WriteJob: Send {
    /// The caller stopped waiting, so running the job would be wasted work.
    fn abandoned(&self) -> bool;
    /// Runs the job; its reply waits until the batch is settled.
    fn run(self: Box<Self>, tx: &Transaction<'_>) -> Box<dyn PendingReply>;
    /// Reports a job that could not run.
    fn fail(self: Box<Self>, err: Error);
}

/// The outcome of a write job that ran, held back until the commit.
trait PendingReply: Send {
    fn succeeded(&self) -> bool;
    /// `settled` is the fate of the batch: `Ok` once committed.
    fn send(self: Box<Self>, settled: Result<()>);
}

struct Pending<T> {
    result: Result<T>,
    reply: oneshot::Sender<Result<T>>,
}

impl<F, T> WriteJob for Job<F, T>
where
    F: FnOnce(&Transaction<'_>) -> Result<T> + Send + 'static,
    T: Send + 'static,
{
    fn abandoned(&self) -> bool {
        self.reply.is_closed()
    }

    fn run(self: Box<Self>, tx: &Transaction<'_>) -> Box<dyn PendingReply> {
        let Job { f, reply } = *self;
        let result = guard_panic(|| f(tx));
        Box::new(Pending { result, reply })
    }

    fn fail(self: Box<Self>, err: Error) {
        // The caller may have gone; nobody else wants the result.
        let _ = self.reply.send(Err(err));
    }
}

impl<T: Send> PendingReply for Pending<T> {
    fn succeeded(&self) -> bool {
        self.result.is_ok()
    }

    fn send(self: Box<Self>, settled: Result<()>) {
        let _ = self.reply.send(settled.and(self.result));
    }
}

/// A type-erased read job.
trait ReadJob: Send {
    fn abandoned(&self) -> bool;
    fn run(self: Box<Self>, conn: &Connection);
}

impl<F, T> ReadJob for Job<F, T>
where
    F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    T: Send + 'static,
{
    fn abandoned(&self) -> bool {
        self.reply.is_closed()
    }

    fn run(self: Box<Self>, conn: &Connection) {
        let Job { f, reply } = *self;
        let _ = reply.send(guard_panic(|| f(conn)));
    }
}

/// A panicking job must not take its thread, and with it the store, down.
fn guard_panic<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| Err(Error::backend_msg("job panicked")))
}

fn writer_main(
    config: &SqliteConfig,
    mut rx: mpsc::Receiver<WriterMsg>,
    counters: &Counters,
    checkpoints: Option<Arc<Checkpoints>>,
    ready: oneshot::Sender<Result<()>>,
) {
    super::alloc::set_soft_limit(config.memory_limit_bytes());
    let conn = match open_writer(config) {
        Ok(conn) => conn,
        Err(err) => {
            let _ = ready.send(Err(err));
            return;
        }
    };
    if let Some(checkpoints) = &checkpoints {
        // SAFETY: unhooked below, before `checkpoints` is dropped.
        unsafe { checkpoints.hook(&conn) };
    }
    if ready.send(Ok(())).is_ok() {
        write_batches(config, &conn, &mut rx, counters, checkpoints.as_deref());
    }
    if let Some(checkpoints) = &checkpoints {
        Checkpoints::unhook(&conn);
        checkpoints.stop();
    }
}

fn write_batches(
    config: &SqliteConfig,
    conn: &Connection,
    rx: &mut mpsc::Receiver<WriterMsg>,
    counters: &Counters,
    checkpoints: Option<&Checkpoints>,
) {
    let mut msgs = Vec::with_capacity(config.max_batch);
    // When the previous batch ended, and whether it had more than one job.
    let mut last_batch: Option<(Instant, bool)> = None;
    // Blocks for the first job, then takes whatever else is queued: under
    // load the queue fills during each commit, so batches grow by
    // themselves; when idle a lone write commits at once.
    while rx.blocking_recv_many(&mut msgs, config.max_batch) > 0 {
        gather(rx, &mut msgs, config.max_batch, config.commit_delay(), last_batch);
        let mut shutdown = false;
        let jobs: Vec<Box<dyn WriteJob>> = msgs
            .drain(..)
            .filter_map(|msg| match msg {
                WriterMsg::Job(job) if !shutdown => Some(job),
                // Jobs queued after a shutdown request are dropped, which
                // their callers see as `Closed`.
                WriterMsg::Job(_) => None,
                WriterMsg::Shutdown => {
                    shutdown = true;
                    None
                }
            })
            .filter(|job| !job.abandoned())
            .collect();
        let shared = jobs.len() > 1;
        run_batch(conn, jobs, counters);
        if let Some(checkpoints) = checkpoints.filter(|c| c.writer_must_checkpoint()) {
            match checkpoint::checkpoint(conn) {
                Ok(pass) => checkpoints.writer_checkpointed(pass),
                Err(err) => tracing::warn!(%err, "WAL checkpoint by the writer failed"),
            }
        }
        last_batch = Some((Instant::now(), shared));
        if shutdown {
            break;
        }
    }
    // Keeps query plans good for the next start; cheap when nothing changed.
    if let Err(err) = conn.execute_batch("PRAGMA optimize") {
        tracing::warn!(%err, "PRAGMA optimize failed");
    }
}

/// Adaptive group commit: under concurrent load (the previous batch had more
/// than one job), a partial batch that follows the previous commit by less
/// than `delay` waits until `delay` has passed since that commit and takes
/// the jobs queued meanwhile. This bounds commits to about one per `delay`
/// plus the commit's own time, so each fsync, WAL append and reader cache
/// rebuild is shared by more writes. Not held back: a write reaching an idle
/// store (no commit for `delay`), a lone caller's writes one after another
/// (nobody would join them), a full batch, a shutdown.
fn gather(
    rx: &mut mpsc::Receiver<WriterMsg>,
    msgs: &mut Vec<WriterMsg>,
    max_batch: usize,
    delay: Duration,
    last_batch: Option<(Instant, bool)>,
) {
    let Some((ended, true)) = last_batch else { return };
    let Some(due) = ended.checked_add(delay) else { return };
    let wait = due.saturating_duration_since(Instant::now());
    if wait.is_zero()
        || msgs.len() >= max_batch
        || msgs.iter().any(|m| matches!(m, WriterMsg::Shutdown))
    {
        return;
    }
    thread::sleep(wait);
    while msgs.len() < max_batch {
        match rx.try_recv() {
            Ok(msg) => msgs.push(msg),
            Err(_) => break,
        }
    }
}

/// Commits `jobs`, normally in one transaction. If the transaction breaks
/// midway, the jobs already run in it fail and the rest go into a new one.
fn run_batch(conn: &Connection, jobs: Vec<Box<dyn WriteJob>>, counters: &Counters) {
    let mut jobs = jobs.into_iter();
    while jobs.len() > 0 {
        commit_some(conn, &mut jobs, counters);
    }
}

fn commit_some(
    conn: &Connection,
    jobs: &mut std::vec::IntoIter<Box<dyn WriteJob>>,
    counters: &Counters,
) {
    // IMMEDIATE takes the write lock now, so another process holding it is
    // waited for (busy_timeout) here rather than failing a job halfway.
    let tx = match Transaction::new_unchecked(conn, TransactionBehavior::Immediate) {
        Ok(tx) => tx,
        Err(err) => {
            let err = Error::from(err);
            tracing::error!(%err, "cannot begin a write transaction");
            Counters::add(&counters.failed_writes, jobs.len());
            Counters::add(&counters.failed_batches, 1);
            for job in jobs {
                job.fail(err.clone());
            }
            return;
        }
    };

    if jobs.len() == 1 {
        return commit_one(tx, jobs, counters);
    }
    let mut pending: Vec<Box<dyn PendingReply>> = Vec::with_capacity(jobs.len());
    for job in jobs.by_ref() {
        if let Err(err) = exec(&tx, "SAVEPOINT job") {
            job.fail(err);
            return abort(tx, pending, counters, 1);
        }
        let reply = job.run(&tx);
        let ended = if reply.succeeded() {
            exec(&tx, "RELEASE job")
        } else {
            exec(&tx, "ROLLBACK TO job").and_then(|()| exec(&tx, "RELEASE job"))
        };
        pending.push(reply);
        // Some errors (I/O, disk full) make SQLite roll back the whole
        // transaction on its own; the earlier jobs' work is then gone and
        // must not be acknowledged.
        if ended.is_err() || tx.is_autocommit() {
            return abort(tx, pending, counters, 0);
        }
    }

    commit(tx, pending, counters);
}

/// Commits the transaction and answers its jobs: each its own outcome once
/// committed, or all the commit's error.
fn commit(tx: Transaction<'_>, pending: Vec<Box<dyn PendingReply>>, counters: &Counters) {
    let count = pending.len();
    let started = Instant::now();
    match tx.commit() {
        Ok(()) => {
            counters.commit_seconds.observe(started.elapsed());
            let failed = pending.iter().filter(|p| !p.succeeded()).count();
            Counters::add(&counters.commits, 1);
            Counters::add(&counters.writes, count - failed);
            Counters::add(&counters.failed_writes, failed);
            counters.largest_batch.fetch_max(count as u64, Ordering::Relaxed);
            for reply in pending {
                reply.send(Ok(()));
            }
        }
        Err(err) => {
            let err = Error::from(err);
            tracing::error!(%err, jobs = count, "group commit failed");
            fail_all(pending, &err, counters, 0);
        }
    }
}

/// A transaction holding one job needs no savepoint: rolling the transaction
/// back undoes exactly that job. Most batches of a lightly loaded or
/// delay-paced store are single jobs, and a savepoint makes SQLite copy each
/// page the job first touches into a sub-journal.
fn commit_one(
    tx: Transaction<'_>,
    jobs: &mut std::vec::IntoIter<Box<dyn WriteJob>>,
    counters: &Counters,
) {
    let Some(job) = jobs.next() else { return };
    let reply = job.run(&tx);
    if !reply.succeeded() {
        // The job's own error is its answer; a failed rollback changes nothing
        // for it (SQLite rolls back whatever the connection still holds when
        // the next transaction begins).
        if let Err(err) = tx.rollback() {
            tracing::warn!(%err, "rollback of a failed write job failed");
        }
        Counters::add(&counters.failed_writes, 1);
        reply.send(Ok(()));
        return;
    }
    commit(tx, vec![reply], counters);
}

/// Gives up on the transaction: nothing run in it can be acknowledged.
fn abort(
    tx: Transaction<'_>,
    pending: Vec<Box<dyn PendingReply>>,
    counters: &Counters,
    already_failed: usize,
) {
    let err = Error::backend_msg("write transaction aborted; the write was rolled back");
    tracing::error!(jobs = pending.len(), "write transaction aborted");
    // Dropping the transaction rolls back whatever SQLite has not already.
    drop(tx);
    fail_all(pending, &err, counters, already_failed);
}

fn fail_all(
    pending: Vec<Box<dyn PendingReply>>,
    err: &Error,
    counters: &Counters,
    already_failed: usize,
) {
    Counters::add(&counters.failed_batches, 1);
    Counters::add(&counters.failed_writes, pending.len() + already_failed);
    for reply in pending {
        reply.send(Err(err.clone()));
    }
}

/// Runs a parameterless statement through the statement cache, which spares
/// re-parsing the savepoint statements for every job.
fn exec(conn: &Connection, sql: &str) -> Result<()> {
    conn.prepare_cached(sql)?.execute([])?;
    Ok(())
}

fn reader_main(
    config: &SqliteConfig,
    queue: &ReadQueue<Box<dyn ReadJob>>,
    counters: &Counters,
    ready: oneshot::Sender<Result<()>>,
) {
    let conn = match open_reader(config) {
        Ok(conn) => conn,
        Err(err) => {
            let _ = ready.send(Err(err));
            return;
        }
    };
    if ready.send(Ok(())).is_err() {
        return;
    }
    while let Some(job) = queue.pop() {
        if job.abandoned() {
            continue;
        }
        Counters::add(&counters.reads, 1);
        // A read transaction pins one snapshot for all the job's queries.
        if let Err(err) = exec(&conn, "BEGIN") {
            tracing::warn!(%err, "cannot begin a read transaction");
        }
        job.run(&conn);
        if !conn.is_autocommit() {
            if let Err(err) = exec(&conn, "COMMIT") {
                tracing::warn!(%err, "cannot end a read transaction");
            }
        }
    }
}

fn open_writer(config: &SqliteConfig) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(&config.path, flags)?;
    tune(&conn, config, config.cache_size_pragma())?;
    let mode: String =
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Error::backend_msg(format!(
            "cannot switch {} to WAL mode (got {mode})",
            config.path.display()
        )));
    }
    conn.pragma_update(None, "synchronous", config.synchronous.pragma_value())?;
    conn.pragma_update(None, "journal_size_limit", JOURNAL_SIZE_LIMIT_BYTES)?;
    if !config.background_checkpoint() {
        conn.pragma_update(None, "wal_autocheckpoint", config.checkpoint_pages)?;
    }
    let tx = Transaction::new_unchecked(&conn, TransactionBehavior::Immediate)?;
    apply_migrations(&tx, super::document::MIGRATIONS)?;
    tx.commit()?;
    Ok(conn)
}

/// The checkpointer's connection: read-write (a checkpoint writes the
/// database file), syncing as the writer does, no cache or map of its own
/// (a checkpoint copies frames straight from the WAL file).
fn open_checkpointer(config: &SqliteConfig) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(&config.path, flags)?;
    conn.busy_timeout(config.busy_timeout())?;
    conn.pragma_update(None, "synchronous", config.synchronous.pragma_value())?;
    conn.pragma_update(None, "mmap_size", 0)?;
    conn.pragma_update(None, "cache_size", -64)?;
    Ok(conn)
}

fn open_reader(config: &SqliteConfig) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(&config.path, flags)?;
    tune(&conn, config, config.reader_cache_size_pragma())?;
    Ok(conn)
}

/// Per-connection settings shared by the writer and the readers.
fn tune(conn: &Connection, config: &SqliteConfig, cache_size: i64) -> Result<()> {
    conn.busy_timeout(config.busy_timeout())?;
    conn.pragma_update(None, "cache_size", cache_size)?;
    conn.pragma_update(None, "mmap_size", config.mmap_size_bytes())?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
    // Once `PRAGMA optimize` has gathered statistics (sqlite_stat4), SQLite plans a statement
    // with its bound values and marks it expired whenever one is rebound, so every cached
    // statement was parsed and planned again at each use (measured on the UDR's readers: a
    // tenth of their CPU). With the stability guarantee the plan depends on the SQL alone.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    Ok(())
}
