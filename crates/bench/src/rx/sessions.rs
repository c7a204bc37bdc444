//! The Rx sessions the load keeps open: AAR-I opens one (once its AAA says 2001), AAR-U and
//! RAR borrow one and give it back, STR ends the oldest. A session is lent to one request at a
//! time, so an update never races the STR of the same session.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use bytes::Bytes;

/// An open Rx session.
#[derive(Debug, Clone)]
pub struct RxSession {
    /// The Session-Id AVP's payload.
    pub sid: Bytes,
    /// The AF simulator that opened it.
    pub af: usize,
    /// The PCF simulator serving it (from the binding of its UE); `None` when the NF is the
    /// PCF itself (`[diameter] answer_host`).
    pub pcf: Option<usize>,
}

/// Open sessions not lent out, oldest first.
#[derive(Debug, Default)]
pub struct SessionPool {
    idle: Mutex<VecDeque<RxSession>>,
    opened: AtomicU64,
    ended: AtomicU64,
    peak: AtomicU64,
}

impl SessionPool {
    /// A session the NF accepted.
    pub fn opened(&self, s: RxSession) {
        let open = self.opened.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak.fetch_max(open - self.ended.load(Ordering::Relaxed), Ordering::Relaxed);
        self.idle.lock().unwrap().push_back(s);
    }

    /// Lends the oldest idle session.
    pub fn take(&self) -> Option<RxSession> {
        self.idle.lock().unwrap().pop_front()
    }

    /// Gives a lent session back (it goes to the end of the line).
    pub fn give_back(&self, s: RxSession) {
        self.idle.lock().unwrap().push_back(s);
    }

    /// A lent session is over (STR answered, or a request on it failed).
    pub fn ended(&self) {
        self.ended.fetch_add(1, Ordering::Relaxed);
    }

    /// Sessions open now (idle or lent out).
    pub fn open(&self) -> u64 {
        self.opened.load(Ordering::Relaxed).saturating_sub(self.ended.load(Ordering::Relaxed))
    }

    /// Most sessions open at once.
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    pub fn idle(&self) -> usize {
        self.idle.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_lent_oldest_first_and_counted() {
        let p = SessionPool::default();
        for n in 0..3u8 {
            p.opened(RxSession { sid: Bytes::from(vec![n]), af: 0, pcf: Some(0) });
        }
        let a = p.take().unwrap();
        assert_eq!(&a.sid[..], &[0]);
        p.give_back(a);
        assert_eq!(&p.take().unwrap().sid[..], &[1]);
        p.ended();
        assert_eq!((p.open(), p.peak(), p.idle()), (2, 3, 2));
        assert_eq!(&p.take().unwrap().sid[..], &[2]);
        assert_eq!(&p.take().unwrap().sid[..], &[0]);
        assert!(p.take().is_none());
    }
}
