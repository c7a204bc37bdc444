//! The Sh users the application servers update, with the Sequence-Number each one's next PUR
//! must carry (TS 29.328 §7.6: the stored number + 1, 65535 followed by 1). A user is lent to
//! one PUR at a time, oldest first, so two updates of one user never race (the second would be
//! 5105 out of sync, a failure of the kit, not of the UDR).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// A user lent to a PUR: its index and the Sequence-Number to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lent {
    pub user: u32,
    pub seq: u16,
}

/// The sequence number after `n` (0 is only ever the first).
pub fn next_sequence(n: u16) -> u16 {
    if n == u16::MAX {
        1
    } else {
        n + 1
    }
}

/// Users not lent out, oldest first.
#[derive(Debug, Default)]
pub struct UserPool {
    idle: Mutex<VecDeque<Lent>>,
    /// Users dropped because their stored Sequence-Number is no longer known (a PUR that got
    /// no answer, or was answered out of sync).
    lost: AtomicU64,
}

impl UserPool {
    /// Users `0..n`, whose preloaded repository data has Sequence-Number 0.
    pub fn preloaded(n: u32) -> UserPool {
        UserPool {
            idle: Mutex::new((0..n).map(|user| Lent { user, seq: 1 }).collect()),
            lost: AtomicU64::new(0),
        }
    }

    /// Lends the user idle longest.
    pub fn take(&self) -> Option<Lent> {
        self.idle.lock().unwrap().pop_front()
    }

    /// The PUR was applied: the next one follows on.
    pub fn updated(&self, l: Lent) {
        self.idle.lock().unwrap().push_back(Lent { user: l.user, seq: next_sequence(l.seq) });
    }

    /// The PUR was answered with an error, so nothing was written: the number stands.
    pub fn unchanged(&self, l: Lent) {
        self.idle.lock().unwrap().push_back(l);
    }

    /// Nobody knows whether the PUR was applied (no answer), or the UDR holds another number:
    /// the user is not updated again.
    pub fn lose(&self) {
        self.lost.fetch_add(1, Ordering::Relaxed);
    }

    pub fn lost(&self) -> u64 {
        self.lost.load(Ordering::Relaxed)
    }

    pub fn idle(&self) -> usize {
        self.idle.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_are_lent_oldest_first_with_their_next_number() {
        let p = UserPool::preloaded(3);
        let a = p.take().unwrap();
        assert_eq!(a, Lent { user: 0, seq: 1 });
        p.updated(a);
        let b = p.take().unwrap();
        p.unchanged(b);
        assert_eq!(p.take().unwrap(), Lent { user: 2, seq: 1 });
        assert_eq!(p.take().unwrap(), Lent { user: 0, seq: 2 });
        assert_eq!(p.take().unwrap(), Lent { user: 1, seq: 1 });
        assert!(p.take().is_none());
        p.lose();
        assert_eq!((p.lost(), p.idle()), (1, 0));
        assert_eq!(next_sequence(65535), 1);
        assert_eq!(next_sequence(0), 1);
    }
}
