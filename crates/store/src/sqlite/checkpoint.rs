//! WAL checkpoints on a thread of their own.
//!
//! SQLite's default checkpoints run inside the commit that pushes the WAL past
//! 1000 pages: that commit copies the pages into the database file and fsyncs
//! it before any other write can start. On a database larger than memory the
//! copied pages are scattered, and the fsync took 14 ms (median) and up to
//! 28 ms on this project's machines, once every 30 or so commits of the BSF's
//! binding mix: every write queued behind such a commit waited as long (the
//! create/delete p99 of the S9 mix, docs/BENCHMARKS.md).
//!
//! Here the writer connection's WAL hook replaces the automatic checkpoint: it
//! only records the WAL's size after each commit and wakes a checkpointer
//! thread once `checkpoint_pages` frames wait to be copied. The checkpointer
//! runs `PASSIVE` checkpoints on its own connection, which never take the
//! write lock, so commits go on meanwhile (WAL mode allows one writer and one
//! checkpointer at once). Durability is unchanged: a commit is acknowledged
//! once its WAL frames are synced, as before; the checkpoint only moves them.
//!
//! Frames committed during a checkpoint stay behind it, and SQLite restarts
//! the WAL from its beginning only after a checkpoint has copied every frame,
//! which a pass racing the writer's commits rarely manages. So once the WAL
//! file has grown past [`RESTART_FACTOR`] times the threshold, the
//! checkpointer repeats passes over what was committed during the previous
//! one until little is left (or [`MAX_PASSES`] have run), and the writer
//! copies that rest itself between two batches (a few pages and a sync); its
//! next transaction then starts the WAL over. Should the checkpointer fall behind the writer altogether
//! (frames waiting beyond [`BACKSTOP_FACTOR`] times the threshold), the
//! writer checkpoints itself too, as SQLite would have: back-pressure rather
//! than an ever-growing WAL.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rusqlite::{ffi, Connection};

use crate::error::Result;

/// The WAL file may grow to this many times the threshold (16 MiB at the
/// default) before the checkpointer works to let it start over. Each
/// start-over costs the writer a sync of the database file, but 16× cost
/// the BSF more CPU per transaction at 10M bindings (53.3 and 55.3 µs
/// against 49.2 in the S9 mix, docs/BENCHMARKS.md "Session s14").
pub(crate) const RESTART_FACTOR: u32 = 4;
/// Frames waiting beyond this many times the threshold make the writer
/// checkpoint itself.
pub(crate) const BACKSTOP_FACTOR: u32 = 16;
/// Most passes made at one wake-up, each over what the writer committed
/// during the previous one; after the last, the writer copies the rest.
const MAX_PASSES: usize = 8;
/// The writer finishes a long WAL's copy itself once at most this fraction of
/// the threshold is left.
const CATCH_UP_DIVISOR: u32 = 8;
/// When no commit wakes it, the checkpointer still copies what is left this
/// often, so an idle store's WAL does not keep frames forever.
const IDLE_INTERVAL: Duration = Duration::from_secs(1);

/// What the writer's commits and the checkpointer tell each other.
pub(crate) struct Checkpoints {
    threshold: u32,
    state: Mutex<State>,
    wake: Condvar,
    runs: AtomicU64,
    writer_runs: AtomicU64,
}

#[derive(Default)]
struct State {
    /// Frames in the WAL after the last commit.
    wal_frames: u32,
    /// Frames of the current WAL already copied into the database.
    copied: u32,
    /// Bumped whenever the WAL starts over, so a checkpoint that ran across
    /// a restart does not report frames of the previous WAL as copied.
    generation: u64,
    due: bool,
    running: bool,
    /// A long WAL is nearly copied: the writer copies the rest.
    writer_catch_up: bool,
    /// After a pass that copied nothing (a reader still needs the frames, as
    /// during a long snapshot read), no new pass before the WAL reaches this
    /// many frames: passes that cannot progress would only spin.
    retry_at: u32,
    stopped: bool,
}

impl State {
    fn waiting(&self) -> u32 {
        self.wal_frames.saturating_sub(self.copied)
    }

    /// Takes in a pass's outcome; false when it copied nothing new.
    fn note_pass(&mut self, pass: Pass, threshold: u32) -> bool {
        let progressed = !pass.busy && pass.copied > self.copied;
        if progressed {
            self.copied = pass.copied;
        } else if self.waiting() > 0 {
            self.retry_at = self.wal_frames.saturating_add(threshold);
        }
        progressed
    }
}

/// Outcome of `PRAGMA wal_checkpoint`: frames copied (the WAL's length comes
/// from the writer's hook, which also sees commits made during the pass).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pass {
    pub busy: bool,
    pub copied: u32,
}

impl Checkpoints {
    pub(crate) fn new(threshold: u32) -> Arc<Checkpoints> {
        Arc::new(Checkpoints {
            threshold: threshold.max(1),
            state: Mutex::default(),
            wake: Condvar::new(),
            runs: AtomicU64::new(0),
            writer_runs: AtomicU64::new(0),
        })
    }

    /// Checkpoints run by the checkpointer thread, and by the writer itself.
    pub(crate) fn counts(&self) -> (u64, u64) {
        (self.runs.load(Ordering::Relaxed), self.writer_runs.load(Ordering::Relaxed))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Called from the WAL hook after each commit of the writer.
    fn committed(&self, wal_frames: u32) {
        let mut st = self.lock();
        if wal_frames < st.wal_frames {
            // The WAL started over.
            st.generation += 1;
            st.copied = 0;
            st.retry_at = 0;
        }
        st.wal_frames = wal_frames;
        if !st.due && st.waiting() >= self.threshold && wal_frames >= st.retry_at {
            st.due = true;
            self.wake.notify_one();
        }
    }

    /// Whether the writer should checkpoint itself now: to finish copying a
    /// long WAL so that it starts over, or because the checkpointer has
    /// fallen far behind.
    pub(crate) fn writer_must_checkpoint(&self) -> bool {
        let st = self.lock();
        !st.running
            && (st.writer_catch_up
                || (st.waiting() >= self.threshold.saturating_mul(BACKSTOP_FACTOR)
                    && st.wal_frames >= st.retry_at))
    }

    /// Records a checkpoint made by the writer itself.
    pub(crate) fn writer_checkpointed(&self, pass: Pass) {
        self.writer_runs.fetch_add(1, Ordering::Relaxed);
        let mut st = self.lock();
        st.writer_catch_up = false;
        st.note_pass(pass, self.threshold);
        if st.due {
            self.wake.notify_one();
        }
    }

    /// Stops the checkpointer thread (after the pass it is making).
    pub(crate) fn stop(&self) {
        self.lock().stopped = true;
        self.wake.notify_all();
    }

    /// Installs the WAL hook on the writer's connection. This also turns off
    /// SQLite's automatic checkpoints, which are themselves a WAL hook.
    ///
    /// # Safety
    /// `self` must outlive the hook: call [`Checkpoints::unhook`] before the
    /// last `Arc` the caller holds is dropped.
    pub(crate) unsafe fn hook(self: &Arc<Self>, conn: &Connection) {
        let ctx = Arc::as_ptr(self) as *mut c_void;
        ffi::sqlite3_wal_hook(conn.handle(), Some(on_commit), ctx);
    }

    /// Removes the hook installed by [`Checkpoints::hook`].
    pub(crate) fn unhook(conn: &Connection) {
        // SAFETY: the handle is open for as long as `conn` is.
        unsafe { ffi::sqlite3_wal_hook(conn.handle(), None, std::ptr::null_mut()) };
    }

    /// The checkpointer thread's loop, on its own read-write connection.
    pub(crate) fn run(&self, conn: &Connection) {
        low_priority();
        loop {
            let generation = {
                let mut st = self.lock();
                // Once the writer is to copy the rest of a long WAL, a pass
                // of ours would only keep it from doing so (it checkpoints
                // when no pass runs): wait for it.
                while (!st.due || st.writer_catch_up) && !st.stopped {
                    let (next, timeout) = self
                        .wake
                        .wait_timeout(st, IDLE_INTERVAL)
                        .unwrap_or_else(PoisonError::into_inner);
                    st = next;
                    if timeout.timed_out() && st.waiting() > 0 && !st.writer_catch_up {
                        st.due = true;
                    }
                }
                if st.stopped {
                    return;
                }
                st.due = false;
                st.running = true;
                st.generation
            };
            for n in 1..=MAX_PASSES {
                let pass = match checkpoint(conn) {
                    Ok(pass) => pass,
                    Err(err) => {
                        tracing::warn!(%err, "background WAL checkpoint failed");
                        break;
                    }
                };
                self.runs.fetch_add(1, Ordering::Relaxed);
                let mut st = self.lock();
                if st.generation != generation || st.stopped {
                    break;
                }
                if !st.note_pass(pass, self.threshold) {
                    break;
                }
                // Frames committed during the pass are still waiting. Only a
                // long WAL is worth starting over; once little is left, the
                // writer copies the rest between two of its batches, when
                // nothing can be committed meanwhile.
                let left = st.waiting();
                let long = st.wal_frames >= self.threshold.saturating_mul(RESTART_FACTOR);
                if !long || left == 0 {
                    break;
                }
                // Under steady commits each pass leaves behind what was
                // committed while it ran, which may never fall below an eighth
                // of the threshold. After the last pass, or once the WAL has
                // grown to the backstop's length, the writer copies whatever
                // is left (about one pass's worth): otherwise the WAL would
                // never start over.
                let settle = n == MAX_PASSES
                    || st.wal_frames >= self.threshold.saturating_mul(BACKSTOP_FACTOR);
                if settle || left <= (self.threshold / CATCH_UP_DIVISOR).max(1) {
                    st.writer_catch_up = true;
                    break;
                }
            }
            self.lock().running = false;
        }
    }
}

/// Nice value of the checkpointer thread: the lowest.
pub(crate) const NICE: i32 = 19;

/// Puts the calling thread in `SCHED_BATCH` at nice 19: a checkpoint pass
/// copies pages for milliseconds at a time, and on an NF given one core it
/// would hold up the request workers and the writer for as long. Batch
/// threads never preempt a running one when they wake, and at nice 19 a
/// request worker that wakes preempts them; yet they keep a small share of
/// a busy core. `SCHED_IDLE` (used before) got none on a core kept busy by
/// others, and a pass it had begun then held SQLite's checkpoint lock for as
/// long, so neither it nor the writer's backstop could copy a frame and the
/// WAL grew without bound.
fn low_priority() {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: system calls on the calling thread (pid 0, its own tid) with valid parameters.
        unsafe {
            if libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) != 0 {
                let err = std::io::Error::last_os_error();
                tracing::debug!(%err, "the checkpointer stays in the normal policy");
            }
            // Linux keeps a nice value per thread.
            let tid = libc::gettid() as libc::id_t;
            if libc::setpriority(libc::PRIO_PROCESS, tid, NICE) != 0 {
                let err = std::io::Error::last_os_error();
                tracing::debug!(%err, "the checkpointer stays at its nice value");
            }
        }
    }
}

/// `PRAGMA wal_checkpoint(PASSIVE)`: copies what no reader still needs,
/// without waiting for the writer or readers.
pub(crate) fn checkpoint(conn: &Connection) -> Result<Pass> {
    let (busy, copied): (i64, i64) =
        conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| Ok((r.get(0)?, r.get(2)?)))?;
    Ok(Pass { busy: busy != 0, copied: u32::try_from(copied).unwrap_or(0) })
}

/// The WAL hook: runs on the writer's thread inside each commit, so it only
/// takes a short lock and never fails the commit.
unsafe extern "C" fn on_commit(
    ctx: *mut c_void,
    _db: *mut ffi::sqlite3,
    _name: *const c_char,
    pages: c_int,
) -> c_int {
    // SAFETY: `ctx` is the `Checkpoints` passed to `hook`, alive until `unhook`.
    let checkpoints = &*(ctx as *const Checkpoints);
    checkpoints.committed(u32::try_from(pages).unwrap_or(0));
    ffi::SQLITE_OK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wakes_once_enough_frames_wait_and_follows_a_restart() {
        let c = Checkpoints::new(100);
        c.committed(50);
        assert!(!c.lock().due);
        c.committed(120);
        assert!(c.lock().due);
        {
            let mut st = c.lock();
            st.due = false;
            st.copied = 120;
        }
        c.committed(150);
        assert!(!c.lock().due, "only 30 frames wait");
        // The WAL started over: everything in it waits again.
        c.committed(110);
        let st = c.lock();
        assert_eq!((st.generation, st.copied, st.wal_frames), (1, 0, 110));
        assert!(st.due);
    }

    #[test]
    fn the_writer_steps_in_only_far_behind_and_not_while_a_pass_runs() {
        let c = Checkpoints::new(10);
        c.committed(10 * BACKSTOP_FACTOR - 1);
        assert!(!c.writer_must_checkpoint());
        c.committed(10 * BACKSTOP_FACTOR);
        assert!(c.writer_must_checkpoint());
        c.lock().running = true;
        assert!(!c.writer_must_checkpoint());
        c.lock().running = false;
        c.writer_checkpointed(Pass { busy: false, copied: 160 });
        assert!(!c.writer_must_checkpoint());
        assert_eq!(c.counts(), (0, 1));
        // Asked to finish a long WAL's copy.
        c.lock().writer_catch_up = true;
        assert!(c.writer_must_checkpoint());
        c.writer_checkpointed(Pass { busy: false, copied: 170 });
        assert!(!c.writer_must_checkpoint());
    }

    #[test]
    fn a_pass_that_copies_nothing_waits_for_more_frames() {
        let c = Checkpoints::new(100);
        c.committed(300);
        c.lock().due = false;
        // A reader holds the frames: nothing copied.
        assert!(!c.lock().note_pass(Pass { busy: false, copied: 0 }, 100));
        c.committed(350);
        assert!(!c.lock().due, "no retry before 100 more frames");
        c.committed(400);
        assert!(c.lock().due);
        assert!(c.lock().note_pass(Pass { busy: false, copied: 400 }, 100));
        assert_eq!(c.lock().waiting(), 0);
    }
}
