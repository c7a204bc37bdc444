//! Which endpoint of a feed takes the next batch: round robin, or smooth weighted round robin
//! (the reference's two consumer endpoints "weighted 50–50 or 60–40", D4), over the endpoints
//! that are up. An endpoint that fails is skipped for a backoff that doubles with each failure in
//! a row (from `backoff_min` to `backoff_max`), or for the consumer's own `Retry-After`; once that
//! time has passed it is offered batches again, and its first success clears the count.
//!
//! Smooth weighted round robin (nginx's): each pick adds every eligible endpoint's weight to its
//! running score, takes the highest score and subtracts the eligible total from it. Over any run
//! of `sum(weights)` picks each endpoint gets exactly its weight, spread out rather than in
//! bursts (weights 3:1 give a a a b, not a a a b in blocks of hundreds), so a consumer behind each
//! endpoint sees an even rate. Round robin is the same with every weight taken as 1.
//!
//! One mutex, taken once per batch (not per message), guards the scores.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::config::Balance;

/// The longest a consumer's `Retry-After` keeps an endpoint out of rotation, so a typo on the
/// consumer's side (a date read as seconds) cannot silence a feed for days.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);

pub struct Balancer {
    state: Mutex<Vec<Slot>>,
    backoff_min: Duration,
    backoff_max: Duration,
}

struct Slot {
    weight: i64,
    score: i64,
    failures: u32,
    /// Skipped until then.
    down_until: Option<Instant>,
}

/// What an endpoint looks like to the balancer now (for health reports).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotHealth {
    /// Failures in a row since its last success.
    pub failures: u32,
    /// Time left before it is offered batches again; `None` when it is in rotation.
    pub down_for: Option<Duration>,
}

impl Balancer {
    pub fn new(
        weights: &[u32],
        balance: Balance,
        backoff_min: Duration,
        backoff_max: Duration,
    ) -> Self {
        let slots = weights
            .iter()
            .map(|&w| Slot {
                weight: match balance {
                    Balance::RoundRobin => 1,
                    Balance::Weighted => i64::from(w.max(1)),
                },
                score: 0,
                failures: 0,
                down_until: None,
            })
            .collect();
        Balancer {
            state: Mutex::new(slots),
            backoff_min,
            backoff_max: backoff_max.max(backoff_min),
        }
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Slot>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next endpoint for a batch among those in rotation at `now` and not in `tried` (a
    /// bit per endpoint index: the endpoints this batch already failed on). `None` when none is.
    pub fn pick(&self, now: Instant, tried: u64) -> Option<usize> {
        let mut slots = self.lock();
        let mut total = 0i64;
        let mut best: Option<usize> = None;
        for i in 0..slots.len() {
            let s = &mut slots[i];
            if (i < 64 && tried & (1 << i) != 0) || s.down_until.is_some_and(|t| t > now) {
                continue;
            }
            s.score += s.weight;
            total += s.weight;
            let score = s.score;
            if best.is_none_or(|b| score > slots[b].score) {
                best = Some(i);
            }
        }
        let best = best?;
        slots[best].score -= total;
        Some(best)
    }

    /// The batch went through `i`: back in rotation, failure count cleared. Returns the
    /// failures it had in a row before.
    pub fn succeeded(&self, i: usize) -> u32 {
        let mut slots = self.lock();
        let s = &mut slots[i];
        s.down_until = None;
        std::mem::take(&mut s.failures)
    }

    /// `i` failed: out of rotation for `retry_after` (the consumer's own word, capped at
    /// [`MAX_RETRY_AFTER`]) or else the backoff for its failures in a row. Returns its failures
    /// in a row, this one included.
    pub fn failed(&self, i: usize, now: Instant, retry_after: Option<Duration>) -> u32 {
        let mut slots = self.lock();
        let s = &mut slots[i];
        s.failures = s.failures.saturating_add(1);
        let wait = match retry_after {
            Some(d) => d.min(MAX_RETRY_AFTER),
            None => {
                let shift = (s.failures - 1).min(20);
                self.backoff_min.saturating_mul(1 << shift).min(self.backoff_max)
            }
        };
        s.down_until = Some(now + wait);
        // A returning endpoint starts level with the others instead of owed a burst.
        s.score = 0;
        s.failures
    }

    /// Time until the first endpoint out of rotation comes back; zero when one is in rotation.
    pub fn next_up(&self, now: Instant) -> Duration {
        self.lock()
            .iter()
            .map(|s| s.down_until.map_or(Duration::ZERO, |t| t.saturating_duration_since(now)))
            .min()
            .unwrap_or(Duration::ZERO)
    }

    pub fn health(&self, now: Instant) -> Vec<SlotHealth> {
        self.lock()
            .iter()
            .map(|s| SlotHealth {
                failures: s.failures,
                down_for: s.down_until.filter(|t| *t > now).map(|t| t - now),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shares(weights: &[u32], balance: Balance, picks: usize) -> Vec<usize> {
        let b = Balancer::new(weights, balance, Duration::from_millis(10), Duration::from_secs(1));
        let now = Instant::now();
        let mut counts = vec![0; weights.len()];
        for _ in 0..picks {
            counts[b.pick(now, 0).unwrap()] += 1;
        }
        counts
    }

    fn within_one_percent(got: usize, want: f64, total: usize) -> bool {
        (got as f64 / total as f64 - want).abs() <= 0.01
    }

    #[test]
    fn weighted_50_50_and_60_40_hold_within_one_percent_over_10000_batches() {
        let c = shares(&[50, 50], Balance::Weighted, 10_000);
        assert!(within_one_percent(c[0], 0.5, 10_000) && within_one_percent(c[1], 0.5, 10_000));
        let c = shares(&[60, 40], Balance::Weighted, 10_000);
        assert!(within_one_percent(c[0], 0.6, 10_000), "{c:?}");
        assert!(within_one_percent(c[1], 0.4, 10_000), "{c:?}");
        // Smooth weighted round robin is exact over whole cycles.
        assert_eq!(c, vec![6_000, 4_000]);
    }

    #[test]
    fn round_robin_ignores_weights_and_alternates() {
        let b = Balancer::new(
            &[9, 1, 1],
            Balance::RoundRobin,
            Duration::from_millis(10),
            Duration::from_secs(1),
        );
        let now = Instant::now();
        let order: Vec<usize> = (0..6).map(|_| b.pick(now, 0).unwrap()).collect();
        assert_eq!(order, vec![0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn weighted_picks_are_spread_not_bunched() {
        let b = Balancer::new(
            &[3, 1],
            Balance::Weighted,
            Duration::from_millis(10),
            Duration::from_secs(1),
        );
        let now = Instant::now();
        let order: Vec<usize> = (0..8).map(|_| b.pick(now, 0).unwrap()).collect();
        assert_eq!(order, vec![0, 0, 1, 0, 0, 0, 1, 0]);
    }

    #[test]
    fn a_failed_endpoint_is_skipped_for_a_doubling_backoff_then_offered_again() {
        let b = Balancer::new(
            &[1, 1],
            Balance::RoundRobin,
            Duration::from_millis(100),
            Duration::from_millis(300),
        );
        let t0 = Instant::now();
        b.failed(1, t0, None);
        assert!((0..4).all(|_| b.pick(t0, 0) == Some(0)));
        assert_eq!(b.next_up(t0), Duration::ZERO, "endpoint 0 is up");
        assert_eq!(b.health(t0)[1].down_for, Some(Duration::from_millis(100)));
        // Back after 100 ms; failing again doubles, then the cap holds.
        let t1 = t0 + Duration::from_millis(100);
        assert!((0..2).any(|_| b.pick(t1, 0) == Some(1)));
        b.failed(1, t1, None);
        assert_eq!(b.health(t1)[1].down_for, Some(Duration::from_millis(200)));
        b.failed(1, t1, None);
        assert_eq!(b.health(t1)[1].down_for, Some(Duration::from_millis(300)));
        b.succeeded(1);
        assert_eq!(b.health(t1)[1], SlotHealth { failures: 0, down_for: None });
    }

    #[test]
    fn tried_endpoints_are_excluded_and_none_left_says_so() {
        let b = Balancer::new(
            &[1, 1],
            Balance::RoundRobin,
            Duration::from_millis(100),
            Duration::from_secs(1),
        );
        let now = Instant::now();
        assert_eq!(b.pick(now, 0b01), Some(1));
        assert_eq!(b.pick(now, 0b10), Some(0));
        assert_eq!(b.pick(now, 0b11), None);
        b.failed(0, now, Some(Duration::from_secs(2)));
        b.failed(1, now, None);
        assert_eq!(b.pick(now, 0), None);
        assert_eq!(b.next_up(now), Duration::from_millis(100));
        // A Retry-After beyond the cap is cut to it.
        b.failed(0, now, Some(Duration::from_secs(86_400)));
        assert_eq!(b.health(now)[0].down_for, Some(MAX_RETRY_AFTER));
    }
}
