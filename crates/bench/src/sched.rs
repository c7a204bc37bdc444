//! Open-loop arrival schedule and weighted procedure selection.
//!
//! Request `n` is due at `start + n / rate`, whatever happened to earlier requests: a slow answer
//! never delays the next send (open loop), and latency is measured from this intended time, so a
//! stalled generator or NF shows up in the latency instead of being hidden (no coordinated
//! omission).

use std::time::Duration;

/// Small deterministic PRNG (xoshiro256**, seeded through splitmix64): reproducible runs, no
/// dependency.
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Self { s: [next(), next(), next(), next()] }
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A random (version 4) UUID in its text form.
    pub fn uuid(&mut self) -> String {
        let mut out = String::with_capacity(36);
        push_uuid_v4(self.next_u64(), self.next_u64(), &mut out);
        out
    }
}

/// Picks an index with probability proportional to its weight.
#[derive(Debug, Clone)]
pub struct Weighted {
    cumulative: Vec<f64>,
}

/// The version 4 UUID (RFC 9562) made of the random bits `a` and `b`, appended in text form.
pub fn push_uuid_v4(a: u64, b: u64, out: &mut String) {
    use std::fmt::Write as _;
    let a = (a & 0xFFFF_FFFF_FFFF_0FFF) | 0x0000_0000_0000_4000;
    let b = (b & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000;
    let _ = write!(
        out,
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xFFFF,
        a & 0xFFFF,
        b >> 48,
        b & 0xFFFF_FFFF_FFFF
    );
}

impl Weighted {
    /// `None` when no weight is positive.
    pub fn new(weights: &[f64]) -> Option<Self> {
        let mut acc = 0.0;
        let cumulative: Vec<f64> = weights
            .iter()
            .map(|w| {
                acc += w.max(0.0);
                acc
            })
            .collect();
        (acc > 0.0).then_some(Self { cumulative })
    }

    pub fn pick(&self, rng: &mut Rng) -> usize {
        let total = *self.cumulative.last().unwrap();
        let x = rng.unit() * total;
        // First index whose cumulative weight exceeds x (zero weights are never picked).
        self.cumulative.partition_point(|&c| c <= x).min(self.cumulative.len() - 1)
    }
}

/// Exact proportions: each index appears `weight / g` times in a deck (`g` the greatest common
/// divisor of the weights, to a thousandth), dealt in shuffled order and reshuffled when used
/// up. Over any stretch two indices of equal weight differ by at most one deck.
#[derive(Debug, Clone)]
pub struct Deck {
    cards: Vec<u32>,
    next: usize,
}

impl Deck {
    /// The largest deck [`Deck::new`] builds.
    pub const MAX_CARDS: u64 = 1_000_000;

    /// `None` when no weight is positive or the deck would exceed [`Deck::MAX_CARDS`].
    pub fn new(weights: &[f64]) -> Option<Self> {
        let milli: Vec<u64> =
            weights.iter().map(|w| (w.max(0.0) * 1000.0).round() as u64).collect();
        let g = milli.iter().copied().filter(|m| *m > 0).reduce(gcd)?;
        let total: u64 = milli.iter().map(|m| m / g).sum();
        if total > Self::MAX_CARDS {
            return None;
        }
        let mut cards = Vec::with_capacity(total as usize);
        for (i, m) in milli.iter().enumerate() {
            cards.extend(std::iter::repeat_n(i as u32, (m / g) as usize));
        }
        let next = cards.len();
        Some(Self { cards, next })
    }

    pub fn len(&self) -> usize {
        self.cards.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cards.is_empty()
    }

    pub fn draw(&mut self, rng: &mut Rng) -> usize {
        if self.next == self.cards.len() {
            // Fisher-Yates.
            for i in (1..self.cards.len()).rev() {
                let j = rng.below(i as u64 + 1) as usize;
                self.cards.swap(i, j);
            }
            self.next = 0;
        }
        self.next += 1;
        self.cards[self.next - 1] as usize
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Picks the procedure of each request, as the scenario's `load.mix` says.
#[derive(Debug, Clone)]
pub enum Picker {
    Random(Weighted),
    Deck(Deck),
}

impl Picker {
    pub fn pick(&mut self, rng: &mut Rng) -> usize {
        match self {
            Picker::Random(w) => w.pick(rng),
            Picker::Deck(d) => d.draw(rng),
        }
    }
}

/// Intended send times at a fixed rate, optionally stepping to another rate after `step.0`
/// seconds (an overload run's cool-down).
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    pub rate: f64,
    /// (seconds from the start, rate from then on).
    pub step: Option<(f64, f64)>,
}

impl Schedule {
    /// Requests due before the step.
    fn before_step(&self) -> Option<(u64, f64, f64)> {
        self.step.filter(|(_, r)| *r > 0.0).map(|(at, r)| ((at * self.rate).round() as u64, at, r))
    }

    /// Offset from the start at which request `n` (0-based) is due.
    pub fn due(&self, n: u64) -> Duration {
        match self.before_step() {
            Some((n_at, at, r)) if n >= n_at => Duration::from_secs_f64(at + (n - n_at) as f64 / r),
            _ => Duration::from_secs_f64(n as f64 / self.rate),
        }
    }

    /// Requests in a run of `secs` seconds.
    pub fn total(&self, secs: f64) -> u64 {
        match self.before_step() {
            Some((n_at, at, r)) if secs > at => n_at + ((secs - at) * r).round() as u64,
            _ => (secs * self.rate).round() as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stepped_schedule_changes_rate_at_the_step() {
        let s = Schedule { rate: 1000.0, step: Some((2.0, 100.0)) };
        assert_eq!(s.total(2.0), 2000);
        assert_eq!(s.total(3.0), 2100);
        assert_eq!(s.due(1999), Duration::from_secs_f64(1.999));
        assert_eq!(s.due(2000), Duration::from_secs(2));
        assert_eq!(s.due(2001), Duration::from_secs_f64(2.01));
        assert_eq!(s.due(2100), Duration::from_secs(3));
    }

    #[test]
    fn arrival_times_are_evenly_spaced_at_the_rate() {
        let s = Schedule { rate: 200.0, step: None };
        assert_eq!(s.due(0), Duration::ZERO);
        assert_eq!(s.due(1), Duration::from_millis(5));
        assert_eq!(s.due(200), Duration::from_secs(1));
        assert_eq!(s.total(2.5), 500);
        for n in 1..1000 {
            let gap = s.due(n) - s.due(n - 1);
            assert!(
                gap.abs_diff(Duration::from_millis(5)) < Duration::from_micros(1),
                "{n}: {gap:?}"
            );
        }
        let slow = Schedule { rate: 0.5, step: None };
        assert_eq!(slow.due(3), Duration::from_secs(6));
    }

    #[test]
    fn weighted_selection_follows_the_shares() {
        // The 5K mix: discovery-like 5000, heartbeat 52, a 1-TPS procedure, a zero one.
        let w = Weighted::new(&[5000.0, 52.0, 1.0, 0.0]).unwrap();
        let mut rng = Rng::new(7);
        let n = 1_000_000;
        let mut counts = [0u64; 4];
        for _ in 0..n {
            counts[w.pick(&mut rng)] += 1;
        }
        let total = 5053.0;
        for (i, want) in [5000.0, 52.0, 1.0, 0.0].iter().enumerate() {
            let expected = want / total * n as f64;
            let tol = 4.0 * expected.sqrt() + 1.0;
            assert!(
                (counts[i] as f64 - expected).abs() <= tol,
                "index {i}: {} vs {expected}",
                counts[i]
            );
        }
        assert_eq!(counts[3], 0);
        assert!(Weighted::new(&[0.0]).is_none());
    }

    #[test]
    fn a_deck_deals_exact_shares_in_shuffled_order() {
        // The 54K BSF mix: 2250 + 2250 + 4 x 12500 is a deck of 218.
        let mut d = Deck::new(&[2250.0, 2250.0, 12500.0, 12500.0, 12500.0, 12500.0]).unwrap();
        assert_eq!(d.len(), 218);
        let mut rng = Rng::new(9);
        let mut counts = [0i64; 6];
        let mut max_gap = 0i64;
        let mut first = Vec::new();
        for n in 0..218 * 50 {
            let i = d.draw(&mut rng);
            counts[i] += 1;
            // AAR-I (2) and STR (5) never drift more than one deck apart.
            max_gap = max_gap.max((counts[2] - counts[5]).abs());
            if n < 218 {
                first.push(i);
            }
        }
        assert_eq!(counts, [450, 450, 2500, 2500, 2500, 2500]);
        assert!(max_gap <= 50, "{max_gap}");
        let mut sorted = first.clone();
        sorted.sort_unstable();
        assert_ne!(first, sorted, "shuffled");
        assert_eq!(Deck::new(&[1.5, 0.5]).unwrap().len(), 4);
        assert!(Deck::new(&[0.0]).is_none());
        assert!(Deck::new(&[1.0, 1_000_000.0]).is_none(), "too large");
    }

    #[test]
    fn rng_is_deterministic_and_uuids_are_v4() {
        let (mut a, mut b) = (Rng::new(3), Rng::new(3));
        assert_eq!(a.next_u64(), b.next_u64());
        let u = a.uuid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert!("89ab".contains(&u[19..20]));
        for _ in 0..1000 {
            assert!(a.below(10) < 10);
            let x = a.unit();
            assert!((0.0..1.0).contains(&x));
        }
    }
}
