//! The in-memory index of Sh-Subs-Notif subscriptions, by profile: a change costs one hash
//! lookup (nothing when nobody subscribed), no store read. The store (`udr_sh_subscription`) is
//! the truth; the index is rebuilt from it at start and updated after each committed write. The
//! lock is a plain mutex held for a few vector operations, never across an await.

use std::collections::HashMap;
use std::sync::Mutex;

use super::data::StoredSubscription;

#[derive(Default)]
pub struct Subscriptions {
    inner: Mutex<Index>,
}

#[derive(Default)]
struct Index {
    by_profile: HashMap<i64, Vec<StoredSubscription>>,
    len: usize,
}

fn same_key(a: &StoredSubscription, b: &StoredSubscription) -> bool {
    a.as_host.eq_ignore_ascii_case(&b.as_host)
        && a.data_reference == b.data_reference
        && a.service_indication == b.service_indication
}

impl Subscriptions {
    fn lock(&self) -> std::sync::MutexGuard<'_, Index> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Subscriptions held.
    pub fn len(&self) -> usize {
        self.lock().len
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many of `subs` would be new (not replacing one held).
    pub fn count_new(&self, subs: &[StoredSubscription]) -> usize {
        let idx = self.lock();
        subs.iter()
            .filter(|s| {
                !idx.by_profile.get(&s.profile_id).is_some_and(|v| v.iter().any(|x| same_key(x, s)))
            })
            .count()
    }

    /// Adds or replaces a subscription (same profile, AS, data reference, Service-Indication).
    pub fn insert(&self, s: StoredSubscription) {
        let mut idx = self.lock();
        let v = idx.by_profile.entry(s.profile_id).or_default();
        match v.iter_mut().find(|x| same_key(x, &s)) {
            Some(x) => *x = s,
            None => {
                v.push(s);
                idx.len += 1;
            }
        }
    }

    /// Makes `now` the subscriptions of `profile_id` (re-read from the store after another
    /// instance changed them).
    pub fn replace_profile(&self, profile_id: i64, now: Vec<StoredSubscription>) {
        let mut idx = self.lock();
        let before = idx.by_profile.remove(&profile_id).map_or(0, |v| v.len());
        let after = now.len();
        if !now.is_empty() {
            idx.by_profile.insert(profile_id, now);
        }
        idx.len = idx.len - before + after;
    }

    /// Removes one subscription; whether it was held.
    pub fn remove(&self, profile_id: i64, as_host: &str, data_reference: u32, si: &str) -> bool {
        let mut idx = self.lock();
        let Some(v) = idx.by_profile.get_mut(&profile_id) else { return false };
        let before = v.len();
        v.retain(|x| {
            !(x.as_host.eq_ignore_ascii_case(as_host)
                && x.data_reference == data_reference
                && x.service_indication == si)
        });
        let removed = before - v.len();
        if v.is_empty() {
            idx.by_profile.remove(&profile_id);
        }
        idx.len -= removed;
        removed > 0
    }

    /// Removes every subscription of a profile (deleted by provisioning).
    pub fn remove_profile(&self, profile_id: i64) {
        let mut idx = self.lock();
        if let Some(v) = idx.by_profile.remove(&profile_id) {
            idx.len -= v.len();
        }
    }

    /// The live subscriptions of a profile that `wants` selects (expired ones are skipped: the
    /// sweeper removes them).
    pub fn matching(
        &self,
        profile_id: i64,
        now: u64,
        wants: impl Fn(&StoredSubscription) -> bool,
    ) -> Vec<StoredSubscription> {
        let idx = self.lock();
        idx.by_profile
            .get(&profile_id)
            .map(|v| {
                v.iter()
                    .filter(|s| (s.expiry == 0 || s.expiry > now) && wants(s))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Drops the subscriptions expired at `now`; how many.
    pub fn sweep(&self, now: u64) -> usize {
        let mut idx = self.lock();
        let mut removed = 0;
        idx.by_profile.retain(|_, v| {
            let before = v.len();
            v.retain(|s| s.expiry == 0 || s.expiry > now);
            removed += before - v.len();
            !v.is_empty()
        });
        idx.len -= removed;
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sh::data::UserId;

    fn sub(pid: i64, host: &str, dref: u32, si: &str, expiry: u64) -> StoredSubscription {
        StoredSubscription {
            profile_id: pid,
            as_host: host.into(),
            as_realm: "r".into(),
            data_reference: dref,
            service_indication: si.into(),
            user: UserId::Public("sip:a@b".into()),
            expiry,
            one_time: false,
        }
    }

    #[test]
    fn insert_replace_match_remove_sweep() {
        let s = Subscriptions::default();
        s.insert(sub(1, "as1", 0, "svc", 0));
        s.insert(sub(1, "AS1", 0, "svc", 50));
        s.insert(sub(1, "as2", 0, "svc", 10));
        s.insert(sub(1, "as2", 11, "", 0));
        s.insert(sub(2, "as1", 0, "svc", 0));
        assert_eq!(s.len(), 4);
        assert_eq!(s.count_new(&[sub(1, "as1", 0, "svc", 0), sub(3, "as1", 0, "svc", 0)]), 1);
        let repo = s.matching(1, 20, |x| x.data_reference == 0 && x.service_indication == "svc");
        assert_eq!(repo.len(), 1, "as2's expired one is skipped");
        assert_eq!(repo[0].expiry, 50);
        assert!(s.remove(1, "as2", 11, ""));
        assert!(!s.remove(1, "as2", 11, ""));
        assert_eq!(s.sweep(20), 1);
        assert_eq!(s.len(), 2);
        s.remove_profile(2);
        assert_eq!(s.len(), 1);
        assert!(s.matching(2, 0, |_| true).is_empty());
    }
}
