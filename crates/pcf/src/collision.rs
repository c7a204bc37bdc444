//! Collision control (the reference's "Bulwark"): the requests of one subscriber are decided one
//! at a time, so a create, an update and a delete of the same SUPI never interleave their
//! reads and writes (two decisions reading the same state variables and both writing back
//! would lose one's update).
//!
//! A holder keeps the subscriber for as long as its request takes. A holder that is stuck (a
//! peer that does not answer, past every timeout) keeps it at most `lease_ms`: the next request
//! then goes ahead, and that is logged and counted (`pcf_collision_lease_expired_total`).
//! Entries exist only while a request holds or waits for them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::OwnedMutexGuard;

#[derive(Default)]
pub struct Collisions {
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Requests that waited for another of the same subscriber.
    pub waited: AtomicU64,
    /// Requests that went ahead because the holder kept the subscriber past the lease.
    pub lease_expired: AtomicU64,
}

/// The subscriber held; released when dropped.
pub struct Held<'a> {
    owner: &'a Collisions,
    key: String,
    lock: Arc<tokio::sync::Mutex<()>>,
    guard: Option<OwnedMutexGuard<()>>,
}

impl Collisions {
    /// Waits until no other request holds `key` (at most `lease`), then holds it.
    pub async fn hold(&self, key: &str, lease: Duration) -> Held<'_> {
        let lock = {
            let mut map = self.locks.lock().unwrap_or_else(|e| e.into_inner());
            map.entry(key.to_string()).or_default().clone()
        };
        let guard = match lock.clone().try_lock_owned() {
            Ok(g) => Some(g),
            Err(_) => {
                self.waited.fetch_add(1, Ordering::Relaxed);
                match tokio::time::timeout(lease, lock.clone().lock_owned()).await {
                    Ok(g) => Some(g),
                    Err(_) => {
                        self.lease_expired.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(subscriber = %key, lease_ms = lease.as_millis() as u64,
                            "a request held the subscriber past its lease: going ahead");
                        None
                    }
                }
            }
        };
        Held { owner: self, key: key.to_string(), lock, guard }
    }

    /// Subscribers held or waited for now.
    pub fn len(&self) -> usize {
        self.locks.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.guard.take();
        let mut map = self.owner.locks.lock().unwrap_or_else(|e| e.into_inner());
        // Ours and the map's are the only references: nobody waits, the entry can go.
        if Arc::strong_count(&self.lock) == 2 {
            map.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_holder_at_a_time_and_a_stuck_one_expires() {
        let c = Arc::new(Collisions::default());
        let order = Arc::new(Mutex::new(Vec::new()));
        let held = c.hold("imsi-1", Duration::from_secs(5)).await;
        let (c2, o2) = (c.clone(), order.clone());
        let waiter = tokio::spawn(async move {
            let _h = c2.hold("imsi-1", Duration::from_secs(5)).await;
            o2.lock().unwrap().push("second");
        });
        // Another subscriber is not held up.
        drop(c.hold("imsi-2", Duration::from_millis(1)).await);
        tokio::time::sleep(Duration::from_millis(50)).await;
        order.lock().unwrap().push("first");
        drop(held);
        waiter.await.unwrap();
        assert_eq!(*order.lock().unwrap(), ["first", "second"]);
        assert_eq!(c.waited.load(Ordering::Relaxed), 1);
        assert!(c.is_empty(), "entries outlived their holders");

        // A holder that never lets go: the next one goes ahead after the lease.
        let stuck = c.hold("imsi-3", Duration::from_secs(5)).await;
        let t0 = std::time::Instant::now();
        let next = c.hold("imsi-3", Duration::from_millis(100)).await;
        assert!(t0.elapsed() >= Duration::from_millis(100));
        assert_eq!(c.lease_expired.load(Ordering::Relaxed), 1);
        drop(next);
        drop(stuck);
        assert!(c.is_empty());
    }
}
