//! The IP-CAN (Gx) sessions the load keeps open, and what the PCRF told the PCEF of each.
//!
//! A CCR-I opens one (once its CCA says 2001); CCR-U borrows one and gives it back; CCR-T
//! ends the oldest. A session is lent to one request at a time, so its CC-Request-Numbers go
//! up one by one and an update never races the termination of the same session. The AFs of a
//! voice mix bind their Rx sessions to these sessions' UE addresses (any open one, lent or
//! not: [`GxSessionPool::pick_ue`]).
//!
//! What the PCRF pushed (Charging-Rule-Install in a CCA or RAR, with SUCCESSFUL_RESOURCE_
//! ALLOCATION armed) is kept per Session-Id until the session's next CCR-U reports it, as a
//! PGW reports the outcome of a rule installation (TS 29.212 §4.5.12): that report is what
//! makes the PCRF tell the AF (an Rx RAR).

use std::collections::{HashMap, VecDeque};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use bytes::Bytes;

use super::messages::SessionFacts;
use crate::sched::Rng;

/// An open Gx session.
#[derive(Debug, Clone)]
pub struct GxSession {
    /// The Session-Id AVP's payload.
    pub sid: Bytes,
    /// The PCEF simulator that opened it.
    pub pcef: usize,
    pub facts: SessionFacts,
    /// The CC-Request-Number of its last CCR.
    pub number: u32,
}

/// Open sessions not lent out, oldest first; one can also be taken by its Session-Id.
#[derive(Debug, Default)]
pub struct GxSessionPool {
    idle: Mutex<Idle>,
    opened: AtomicU64,
    ended: AtomicU64,
    peak: AtomicU64,
}

/// The idle sessions by Session-Id, and their order: a Session-Id in `order` but no longer in
/// `by_sid` was taken out of line ([`GxSessionPool::take_sid`]) and is skipped.
#[derive(Debug, Default)]
struct Idle {
    by_sid: HashMap<Bytes, GxSession>,
    order: VecDeque<Bytes>,
}

impl Idle {
    fn push(&mut self, s: GxSession) {
        self.order.push_back(s.sid.clone());
        self.by_sid.insert(s.sid.clone(), s);
    }
}

impl GxSessionPool {
    /// A session the PCRF accepted.
    pub fn opened(&self, s: GxSession) {
        let open = self.opened.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak.fetch_max(open - self.ended.load(Ordering::Relaxed), Ordering::Relaxed);
        self.idle.lock().unwrap().push(s);
    }

    /// Lends the oldest idle session.
    pub fn take(&self) -> Option<GxSession> {
        let mut idle = self.idle.lock().unwrap();
        while let Some(sid) = idle.order.pop_front() {
            if let Some(s) = idle.by_sid.remove(&sid) {
                return Some(s);
            }
        }
        None
    }

    /// Lends idle session `sid` out of line; `None` when it is lent out or gone.
    pub fn take_sid(&self, sid: &[u8]) -> Option<GxSession> {
        self.idle.lock().unwrap().by_sid.remove(sid)
    }

    /// Gives a lent session back (it goes to the end of the line).
    pub fn give_back(&self, s: GxSession) {
        self.idle.lock().unwrap().push(s);
    }

    /// A lent session is over (CCR-T answered, or a request on it failed).
    pub fn ended(&self) {
        self.ended.fetch_add(1, Ordering::Relaxed);
    }

    /// The UE address and MSIN of an idle session drawn at random: what an AF's AAR-I names.
    pub fn pick_ue(&self, rng: &mut Rng) -> Option<(Ipv4Addr, u64)> {
        let idle = self.idle.lock().unwrap();
        // Most of `order` is idle sessions; a few draws find one.
        for _ in 0..8 {
            let sid = idle.order.get(rng.below(idle.order.len() as u64) as usize)?;
            if let Some(s) = idle.by_sid.get(sid) {
                return Some((s.facts.ue, s.facts.msin));
            }
        }
        None
    }

    /// Sessions open now (idle or lent out).
    pub fn open(&self) -> u64 {
        self.opened.load(Ordering::Relaxed).saturating_sub(self.ended.load(Ordering::Relaxed))
    }

    /// Most sessions open at once.
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }
}

/// What the PCRF pushed to one session and the PCEF has not reported yet.
#[derive(Debug, Default)]
struct Pushed {
    /// SUCCESSFUL_RESOURCE_ALLOCATION is armed (the last Event-Trigger list had it).
    report_allocation: bool,
    /// Rules installed since the last CCR-U, to report ACTIVE.
    installed: Vec<Bytes>,
}

/// [`Pushed`] per Session-Id of the sessions being opened or open, and the sessions with rules
/// to report, in the order the rules came.
#[derive(Debug, Default)]
struct PushedState {
    by_session: HashMap<Bytes, Pushed>,
    to_report: VecDeque<Bytes>,
}

#[derive(Debug, Default)]
pub struct PushedRules {
    state: Mutex<PushedState>,
    /// Rules reported ACTIVE in CCR-Us, for the report.
    reported: AtomicU64,
}

impl PushedRules {
    /// A session is being opened (before its CCR-I leaves: the CCA's installs land here).
    pub fn open(&self, sid: &Bytes) {
        self.state.lock().unwrap().by_session.insert(sid.clone(), Pushed::default());
    }

    /// The session ended (or never opened).
    pub fn close(&self, sid: &[u8]) {
        self.state.lock().unwrap().by_session.remove(sid);
    }

    /// The session that has waited longest with rules to report, if any (a PGW reports the
    /// outcome of a rule installation as soon as the bearer is set up).
    pub fn next_to_report(&self) -> Option<Bytes> {
        let mut st = self.state.lock().unwrap();
        while let Some(sid) = st.to_report.pop_front() {
            if st.by_session.get(&sid).is_some_and(|p| !p.installed.is_empty()) {
                return Some(sid);
            }
        }
        None
    }

    /// A CCA or RAR of session `sid` installed `installed`, removed `removed`, and armed or
    /// disarmed the allocation report (`armed`, `None`: no Event-Trigger list, no change).
    /// Ignored for a session the load does not hold.
    pub fn pushed(
        &self,
        sid: &[u8],
        installed: Vec<Bytes>,
        removed: &[Bytes],
        armed: Option<bool>,
    ) {
        let mut st = self.state.lock().unwrap();
        let Some(p) = st.by_session.get_mut(sid) else { return };
        if let Some(a) = armed {
            p.report_allocation = a;
        }
        p.installed.retain(|n| !removed.contains(n));
        let had = !p.installed.is_empty();
        if p.report_allocation {
            p.installed.extend(installed);
        }
        if !had && !p.installed.is_empty() {
            st.to_report.push_back(Bytes::copy_from_slice(sid));
        }
    }

    /// The rules the next CCR-U of session `sid` reports (taken: each is reported once).
    pub fn to_report(&self, sid: &[u8]) -> Vec<Bytes> {
        let mut st = self.state.lock().unwrap();
        let taken = st
            .by_session
            .get_mut(sid)
            .map(|p| std::mem::take(&mut p.installed))
            .unwrap_or_default();
        self.reported.fetch_add(taken.len() as u64, Ordering::Relaxed);
        taken
    }

    pub fn reported(&self) -> u64 {
        self.reported.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(n: u8) -> GxSession {
        let facts = SessionFacts {
            msin: n.into(),
            ue: Ipv4Addr::new(100, 64, 0, n),
            charging_id: 1,
            cell: 1,
        };
        GxSession { sid: Bytes::from(vec![n]), pcef: 0, facts, number: 0 }
    }

    #[test]
    fn sessions_are_lent_oldest_first_and_their_ues_drawn() {
        let p = GxSessionPool::default();
        let mut rng = Rng::new(1);
        assert!(p.pick_ue(&mut rng).is_none());
        for n in 1..=3 {
            p.opened(session(n));
        }
        let a = p.take().unwrap();
        assert_eq!(&a.sid[..], &[1]);
        let c = p.take_sid(&[3]).unwrap();
        assert!(p.take_sid(&[3]).is_none(), "lent out");
        p.give_back(c);
        for _ in 0..20 {
            let (ue, msin) = p.pick_ue(&mut rng).unwrap();
            assert!(msin == 2 || msin == 3, "a lent session is not drawn");
            assert_eq!(ue.octets()[3] as u64, msin);
        }
        p.give_back(a);
        assert_eq!(&p.take().unwrap().sid[..], &[2]);
        assert_eq!(&p.take().unwrap().sid[..], &[3]);
        assert_eq!(
            &p.take().unwrap().sid[..],
            &[1],
            "3's second place in line is skipped: lent out"
        );
        assert!(p.take().is_none());
        p.ended();
        assert_eq!((p.open(), p.peak()), (2, 3));
    }

    #[test]
    fn installed_rules_are_reported_once_when_the_allocation_report_is_armed() {
        let r = PushedRules::default();
        let sid = Bytes::from_static(b"s1");
        let rule = |n: &'static str| Bytes::from_static(n.as_bytes());
        r.open(&sid);
        r.pushed(&sid, vec![rule("a")], &[], None);
        assert!(r.to_report(&sid).is_empty(), "not armed: nothing to report");
        assert_eq!(r.next_to_report(), None);
        r.pushed(&sid, vec![rule("b"), rule("c")], &[], Some(true));
        r.pushed(&sid, vec![], &[rule("c")], None);
        assert_eq!(r.next_to_report(), Some(sid.clone()));
        assert_eq!(r.next_to_report(), None, "queued once");
        assert_eq!(r.to_report(&sid), [rule("b")], "c was removed before the report");
        assert!(r.to_report(&sid).is_empty(), "reported once");
        r.pushed(b"unknown", vec![rule("x")], &[], Some(true));
        r.close(&sid);
        r.pushed(&sid, vec![rule("d")], &[], Some(true));
        assert!(r.to_report(&sid).is_empty(), "a closed session keeps nothing");
        assert_eq!(r.reported(), 1);
    }
}
