//! The Rx sessions the load keeps open: AAR-I opens one (once its AAA says 2001), AAR-U and
//! RAR borrow one and give it back, STR ends the oldest. A session is lent to one request at a
//! time, so an update never races the STR of the same session.

use std::collections::{HashSet, VecDeque};
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
    /// Sessions the PCF aborted (ASR: their bound Gx session ended), until their STR.
    aborted: Mutex<HashSet<Bytes>>,
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

    /// Lends the oldest idle session the PCF has not aborted, for a request that modifies it
    /// (AAR-U, RAR). Aborted sessions it passes go to the front of the line, where the next
    /// STR ends them, as an AF answers an ASR with STR (TS 29.214 §4.4.6.2).
    pub fn take_live(&self) -> Option<RxSession> {
        let aborted = self.aborted.lock().unwrap();
        let mut idle = self.idle.lock().unwrap();
        let mut passed = Vec::new();
        let mut found = None;
        // Bounded: a burst of aborts must not make one request scan the whole pool.
        for _ in 0..16 {
            let Some(s) = idle.pop_front() else { break };
            if aborted.contains(&s.sid) {
                passed.push(s);
            } else {
                found = Some(s);
                break;
            }
        }
        for s in passed.into_iter().rev() {
            idle.push_front(s);
        }
        found
    }

    /// The PCF aborted session `sid` (an ASR to its AF).
    pub fn aborted_by_pcf(&self, sid: &[u8]) {
        self.aborted.lock().unwrap().insert(Bytes::copy_from_slice(sid));
    }

    /// Session `sid` is over for good (its STR was sent).
    pub fn forget(&self, sid: &[u8]) {
        self.aborted.lock().unwrap().remove(sid);
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

    #[test]
    fn aborted_sessions_are_not_modified_but_ended_first() {
        let p = SessionPool::default();
        for n in 0..3u8 {
            p.opened(RxSession { sid: Bytes::from(vec![n]), af: 0, pcf: None });
        }
        p.aborted_by_pcf(&[0]);
        p.aborted_by_pcf(&[1]);
        assert_eq!(&p.take_live().unwrap().sid[..], &[2]);
        assert!(p.take_live().is_none());
        // The STRs take the aborted ones, oldest first.
        assert_eq!(&p.take().unwrap().sid[..], &[0]);
        p.forget(&[0]);
        assert_eq!(&p.take().unwrap().sid[..], &[1]);
    }
}
