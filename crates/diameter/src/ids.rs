//! Hop-by-hop and end-to-end identifiers (RFC 6733 §3).

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// A random 32-bit value (seeded by std's per-process hash keys and the clock; not for crypto).
pub fn random_u32() -> u32 {
    RandomState::new().hash_one(Instant::now()) as u32
}

/// End-to-end ids: the high 12 bits are the low 12 bits of the current time in seconds and the
/// low 20 bits start at a random value, then the whole word counts up (RFC 6733 §3), so ids stay
/// unique across restarts and for far longer than the 4 minutes the RFC asks.
#[derive(Debug)]
pub struct EndToEndIds(AtomicU32);

impl EndToEndIds {
    pub fn new() -> EndToEndIds {
        let secs = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        EndToEndIds(AtomicU32::new(((secs as u32 & 0xfff) << 20) | (random_u32() & 0x000f_ffff)))
    }
    pub fn next(&self) -> u32 {
        self.0.fetch_add(1, Ordering::Relaxed)
    }
}

impl Default for EndToEndIds {
    fn default() -> Self {
        EndToEndIds::new()
    }
}

/// Hop-by-hop ids of one connection: a random start, then monotonically increasing.
#[derive(Debug)]
pub struct HopByHopIds(AtomicU32);

impl HopByHopIds {
    pub fn new() -> HopByHopIds {
        HopByHopIds(AtomicU32::new(random_u32()))
    }
    pub fn next(&self) -> u32 {
        self.0.fetch_add(1, Ordering::Relaxed)
    }
}

impl Default for HopByHopIds {
    fn default() -> Self {
        HopByHopIds::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_to_end_high_bits_are_time() {
        let secs = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as u32;
        let ids = EndToEndIds::new();
        let a = ids.next();
        let b = ids.next();
        assert_eq!(b, a.wrapping_add(1));
        let high = a >> 20;
        // allow a second's tick between the two clock reads
        assert!(high == secs & 0xfff || high == (secs + 1) & 0xfff);
        let h = HopByHopIds::new();
        assert_eq!(h.next().wrapping_add(1), h.next());
    }
}
