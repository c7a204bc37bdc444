//! The work queue of the reader pool.
//!
//! The obvious shared queue, a tokio channel's receiver behind a mutex, costs
//! a second wake-up per read: the reader that gets a job releases the mutex,
//! which wakes another reader only for it to park again in the channel. Here
//! a job wakes one idle reader, and none at all while every reader is busy
//! (the next to finish takes it), so a read costs one hand-off each way.
//! A semaphore bounds the queue: when it is full, async callers wait for
//! room instead of growing memory.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use tokio::sync::Semaphore;

pub(super) struct ReadQueue<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
    room: Semaphore,
}

struct State<T> {
    jobs: VecDeque<T>,
    /// Readers waiting on `ready`.
    idle: usize,
    closed: bool,
}

impl<T> ReadQueue<T> {
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            state: Mutex::new(State { jobs: VecDeque::new(), idle: 0, closed: false }),
            ready: Condvar::new(),
            room: Semaphore::new(capacity),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues a job once there is room; gives it back once the queue is closed.
    pub(super) async fn push(&self, job: T) -> Result<(), T> {
        let Ok(permit) = self.room.acquire().await else { return Err(job) };
        let mut state = self.lock();
        if state.closed {
            return Err(job);
        }
        // The reader that takes the job gives the room back.
        permit.forget();
        state.jobs.push_back(job);
        let wake = state.idle > 0;
        drop(state);
        if wake {
            self.ready.notify_one();
        }
        Ok(())
    }

    /// The next job, waiting for one; `None` once the queue is closed and
    /// every job queued before is taken.
    pub(super) fn pop(&self) -> Option<T> {
        let mut state = self.lock();
        loop {
            if let Some(job) = state.jobs.pop_front() {
                drop(state);
                self.room.add_permits(1);
                return Some(job);
            }
            if state.closed {
                return None;
            }
            state.idle += 1;
            state = self.ready.wait(state).unwrap_or_else(PoisonError::into_inner);
            state.idle -= 1;
        }
    }

    /// Refuses new jobs; the readers finish the queued ones, then stop.
    pub(super) fn close(&self) {
        self.lock().closed = true;
        self.room.close();
        self.ready.notify_all();
    }

    /// Jobs waiting for a reader.
    pub(super) fn len(&self) -> usize {
        self.lock().jobs.len()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn jobs_come_out_in_order_and_closing_drains_then_stops() {
        let q = ReadQueue::new(8);
        for n in 0..3 {
            q.push(n).await.expect("room");
        }
        assert_eq!(q.len(), 3);
        q.close();
        assert_eq!(q.push(9).await, Err(9), "closed: refused");
        assert_eq!((q.pop(), q.pop(), q.pop(), q.pop()), (Some(0), Some(1), Some(2), None));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_queue_makes_callers_wait_and_an_idle_reader_is_woken() {
        let q = Arc::new(ReadQueue::new(1));
        q.push(1).await.expect("room");
        let waiting = {
            let q = q.clone();
            tokio::spawn(async move { q.push(2).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "pushed past the capacity");
        let reader = {
            let q = q.clone();
            std::thread::spawn(move || (q.pop(), q.pop(), q.pop()))
        };
        waiting.await.expect("task").expect("room after a pop");
        // The reader now waits for a third job; closing wakes it with `None`.
        tokio::time::sleep(Duration::from_millis(50)).await;
        q.close();
        assert_eq!(reader.join().expect("reader"), (Some(1), Some(2), None));
    }
}
