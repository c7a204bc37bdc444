//! Backpressure at the overload guard's limit: a connection stops reading new requests while the
//! NF has as much work in flight as it can answer in time (`[sbi.overload] backpressure`).
//!
//! Refusing a request with 503 still costs its HPACK decoding, its stream and its answer; at twice
//! the capacity that took ~40 % of the BSF's core (docs/BENCHMARKS.md, session s19). A request
//! that is not read costs nothing: it waits in the socket and in the client, HTTP/2 and TCP flow
//! control slow the client down, and the NF spends its whole core on answers.
//!
//! Two things keep a held connection from stalling the NF:
//! - a connection with a request whose body has not all arrived is never held (that request is
//!   already admitted; holding its body would hold its slot), counted by [`BodyPending`];
//! - held connections are woken when the work in flight falls below the limit, and each also
//!   reads again after `hold_max_ms` in which nothing was admitted (the work in flight may be
//!   stuck on other NFs; a probe must get through): what it reads beyond `max_in_flight` is shed.

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures_util::task::AtomicWaker;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::layer::overload::Guard;

/// The held connections of one server, in the order they stopped.
#[derive(Default)]
pub(crate) struct ReadGate {
    waiting: AtomicBool,
    /// A connection was woken and has not read yet: wake no other until it has.
    woken: AtomicBool,
    held: Mutex<VecDeque<Arc<ConnGate>>>,
}

impl ReadGate {
    pub(crate) fn has_waiters(&self) -> bool {
        self.waiting.load(Ordering::SeqCst)
    }

    /// Lets the connection held longest read again. One at a time, not all at once: every
    /// woken connection reads what its socket holds (up to its 128 streams' requests), and the
    /// answers that free room come faster than a busy NF's woken tasks run, so waking one per
    /// answer still woke dozens together and overshot the limit by thousands, then shed.
    pub(crate) fn wake_one(&self) {
        if self.woken.swap(true, Ordering::AcqRel) {
            return;
        }
        let next = {
            let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            // Connections closed while held are passed over.
            let mut next = held.pop_front();
            while next.as_ref().is_some_and(|c| c.closed.load(Ordering::Acquire)) {
                next = held.pop_front();
            }
            if held.is_empty() {
                self.waiting.store(false, Ordering::SeqCst);
            }
            next
        };
        match next {
            Some(c) => {
                c.queued.store(false, Ordering::Release);
                c.woken.store(true, Ordering::Release);
                c.waker.wake();
            }
            None => self.woken.store(false, Ordering::Release),
        }
    }

    /// The woken connection reads (or is gone): the next answer may wake another.
    fn reading(&self, conn: &ConnGate) {
        if conn.woken.swap(false, Ordering::AcqRel) {
            self.woken.store(false, Ordering::Release);
        }
    }

    fn hold(&self, conn: &Arc<ConnGate>) {
        if !conn.queued.swap(true, Ordering::AcqRel) {
            let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            held.push_back(conn.clone());
            self.waiting.store(true, Ordering::SeqCst);
        }
    }
}

/// The guard as the connections see it.
#[derive(Clone)]
pub(crate) struct Backpressure(Arc<Guard>);

impl Backpressure {
    pub(crate) fn new(guard: Arc<Guard>) -> Self {
        Backpressure(guard)
    }
}

/// One connection's state for the gate.
#[derive(Default)]
pub(crate) struct ConnGate {
    /// Requests admitted on this connection whose body is still arriving.
    pending_bodies: AtomicUsize,
    waker: AtomicWaker,
    /// In the gate's list of held connections.
    queued: AtomicBool,
    /// Woken by the gate and not read since.
    woken: AtomicBool,
    closed: AtomicBool,
}

/// A request whose body is still to be read; the connection is not held while one lives.
/// Cloning counts another holder, so the count falls when the last copy is dropped.
pub(crate) struct BodyPending(Arc<ConnGate>);

impl BodyPending {
    pub(crate) fn new(conn: &Arc<ConnGate>) -> Self {
        conn.pending_bodies.fetch_add(1, Ordering::AcqRel);
        BodyPending(conn.clone())
    }
}

impl Clone for BodyPending {
    fn clone(&self) -> Self {
        BodyPending::new(&self.0)
    }
}

impl Drop for BodyPending {
    fn drop(&mut self) {
        self.0.pending_bodies.fetch_sub(1, Ordering::AcqRel);
    }
}

pin_project_lite::pin_project! {
    /// A connection's socket that reads only while the gate is open.
    pub(crate) struct Gated<T> {
        #[pin]
        io: T,
        gate: Option<Backpressure>,
        conn: Arc<ConnGate>,
        // Hands the turn on if the connection closes after being woken, before reading.
        _turn: Turn,
        recheck: Option<Pin<Box<tokio::time::Sleep>>>,
        holding: bool,
        admitted_then: u64,
    }
}

impl<T> Gated<T> {
    pub(crate) fn new(io: T, gate: Option<Backpressure>, conn: Arc<ConnGate>) -> Self {
        let _turn = Turn(gate.clone(), conn.clone());
        Gated { io, gate, conn, _turn, recheck: None, holding: false, admitted_then: 0 }
    }
}

struct Turn(Option<Backpressure>, Arc<ConnGate>);

impl Drop for Turn {
    fn drop(&mut self) {
        self.1.closed.store(true, Ordering::Release);
        if let Some(Backpressure(guard)) = &self.0 {
            guard.gate.reading(&self.1);
            if guard.gate.has_waiters() && guard.open() {
                guard.gate.wake_one();
            }
        }
    }
}

/// Sets the hold timer `hold_max_ms` from now.
fn arm(recheck: &mut Option<Pin<Box<tokio::time::Sleep>>>, guard: &Guard) {
    let deadline = tokio::time::Instant::now() + guard.hold_max();
    match recheck.as_mut() {
        Some(s) => s.as_mut().reset(deadline),
        None => *recheck = Some(Box::pin(tokio::time::sleep_until(deadline))),
    }
}

impl<T: AsyncRead> AsyncRead for Gated<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.project();
        if let Some(Backpressure(guard)) = this.gate.as_ref() {
            if this.conn.pending_bodies.load(Ordering::Acquire) == 0 && !guard.open() {
                this.conn.waker.register(cx.waker());
                guard.gate.hold(this.conn);
                // Look again after registering: an answer that came in between has seen the
                // waiter (or left room that is seen here).
                if !guard.open() {
                    guard.held_back(!*this.holding);
                    // The hold's end is set when it starts, not moved by every poll (the
                    // connection task is polled for each answer it writes).
                    if !*this.holding {
                        *this.holding = true;
                        arm(this.recheck, guard);
                        *this.admitted_then = guard.admitted();
                    }
                    // Registers the timer. When it has fired: if requests were admitted since,
                    // the NF is making progress and this connection's turn will come; if not,
                    // the work in flight is stuck and the connection reads.
                    while let Some(s) = this.recheck.as_mut() {
                        if s.as_mut().poll(cx).is_pending() {
                            return Poll::Pending;
                        }
                        let now = guard.admitted();
                        if now == *this.admitted_then {
                            // Nothing admitted for a whole hold: also no turn outstanding
                            // (its connection may have closed unseen).
                            guard.gate.woken.store(false, Ordering::Release);
                            break;
                        }
                        *this.admitted_then = now;
                        arm(this.recheck, guard);
                    }
                }
            }
        }
        if let Some(Backpressure(guard)) = this.gate.as_ref() {
            guard.gate.reading(this.conn);
        }
        *this.holding = false;
        this.io.poll_read(cx, buf)
    }
}

impl<T: AsyncWrite> AsyncWrite for Gated<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.project().io.poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().io.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().io.poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.project().io.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}
