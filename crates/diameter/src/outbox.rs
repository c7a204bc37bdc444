//! The sending side of one transport connection.
//!
//! Messages are encoded (or copied) straight into one buffer, and the connection's writer task
//! writes everything that accumulated since its last write with one write call. Answers and
//! forwards produced while the writer was busy or not yet scheduled (every request of one read,
//! every answer of one read on another connection) leave together, without a channel hop or an
//! allocation per message.

use std::sync::Mutex;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::AsyncWriteExt;
use tokio::sync::{watch, Notify};

use crate::transport::BoxWrite;

/// Bytes the writer's buffers start with (each of the two).
const INITIAL_CAPACITY: usize = 64 * 1024;

/// A buffer that grew past this while a peer read slowly is given back once written: a
/// backlog of the queue's limit (4 MiB by default) would otherwise stay allocated, twice, for
/// the connection's life.
const KEEP_CAPACITY: usize = 4 * INITIAL_CAPACITY;

pub(crate) struct Outbox {
    state: Mutex<State>,
    /// The writer waits on it for bytes or the close.
    ready: Notify,
    /// Senders wait on it while `limit` bytes are queued.
    space: Notify,
    limit: usize,
}

struct State {
    buf: BytesMut,
    /// No more messages: the writer flushes what is queued and shuts the stream down.
    closing: bool,
    /// The writer has stopped: nothing queued now will be written.
    gone: bool,
}

impl Outbox {
    pub fn new(limit: usize) -> Outbox {
        Outbox {
            state: Mutex::new(State {
                buf: BytesMut::with_capacity(INITIAL_CAPACITY),
                closing: false,
                gone: false,
            }),
            ready: Notify::new(),
            space: Notify::new(),
            limit: limit.max(1),
        }
    }

    /// Appends what `put` writes into the buffer (it must leave the buffer as it found it when
    /// it returns false); waits while `limit` bytes are queued. False when `put` failed or the
    /// connection is closing.
    pub async fn push_with(&self, put: impl FnOnce(&mut BytesMut) -> bool) -> bool {
        let mut put = Some(put);
        loop {
            let space = {
                let mut st = self.state.lock().unwrap();
                if st.closing || st.gone {
                    return false;
                }
                if st.buf.len() < self.limit {
                    let was_empty = st.buf.is_empty();
                    let ok = put.take().is_some_and(|f| f(&mut st.buf));
                    let wake = was_empty && !st.buf.is_empty();
                    drop(st);
                    if wake {
                        self.ready.notify_one();
                    }
                    return ok;
                }
                // Full. Made under the lock, so the writer's next `take` (which needs it) and
                // the `notify_waiters` after it come later and wake this waiter; only a full
                // buffer pays for one.
                self.space.notified()
            };
            space.await;
        }
    }

    /// Appends an encoded message.
    pub async fn push(&self, bytes: &[u8]) -> bool {
        self.push_with(|buf| {
            buf.extend_from_slice(bytes);
            true
        })
        .await
    }

    /// The writer flushes what is queued, then shuts the stream down; later pushes fail.
    pub fn close(&self) {
        self.state.lock().unwrap().closing = true;
        self.ready.notify_one();
        self.space.notify_waiters();
    }

    /// Swaps the queued bytes into `out` (empty); returns whether the outbox is closing.
    fn take(&self, out: &mut BytesMut) -> bool {
        let mut st = self.state.lock().unwrap();
        std::mem::swap(&mut st.buf, out);
        st.closing
    }

    fn set_gone(&self) {
        self.state.lock().unwrap().gone = true;
        self.space.notify_waiters();
    }
}

/// Empties a written buffer for the next swap, shrinking it back when a backlog grew it.
fn recycle(out: &mut BytesMut) {
    if out.capacity() > KEEP_CAPACITY {
        *out = BytesMut::with_capacity(INITIAL_CAPACITY);
    } else {
        out.clear();
    }
}

/// Resolves once the flag is true (or its sender is gone).
async fn is_set(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|v| *v).await.map(|_| ());
}

/// The writer task of one connection. `closed` set (the connection torn down) stops it after a
/// brief flush of what is queued (a DPA).
pub(crate) async fn write_loop(
    mut w: BoxWrite,
    ob: std::sync::Arc<Outbox>,
    mut closed: watch::Receiver<bool>,
) {
    let mut out = BytesMut::with_capacity(INITIAL_CAPACITY);
    // Polled on every wake-up: one long-lived waiter instead of a new one per write.
    let closed = is_set(&mut closed);
    tokio::pin!(closed);
    loop {
        let closing = ob.take(&mut out);
        if !out.is_empty() {
            ob.space.notify_waiters();
            let r = tokio::select! {
                biased;
                r = w.write_all(&out) => r,
                _ = &mut closed => break,
            };
            recycle(&mut out);
            if r.is_err() {
                break;
            }
            continue;
        }
        if closing {
            break;
        }
        tokio::select! {
            _ = ob.ready.notified() => {}
            _ = &mut closed => {
                ob.take(&mut out);
                let _ = tokio::time::timeout(Duration::from_millis(500), w.write_all(&out)).await;
                break;
            }
        }
    }
    ob.set_gone();
    let _ = tokio::time::timeout(Duration::from_millis(500), w.shutdown()).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_grown_by_a_backlog_shrinks_once_written() {
        let mut usual = BytesMut::with_capacity(INITIAL_CAPACITY);
        usual.extend_from_slice(&[1; 1000]);
        recycle(&mut usual);
        assert!(usual.is_empty());
        assert!(usual.capacity() >= INITIAL_CAPACITY, "kept for the next swap");

        let mut backlog = BytesMut::with_capacity(INITIAL_CAPACITY);
        backlog.extend_from_slice(&vec![2; 4 << 20]);
        recycle(&mut backlog);
        assert!(backlog.is_empty());
        assert!(backlog.capacity() <= KEEP_CAPACITY, "{} bytes kept", backlog.capacity());
    }
}
