//! A one-multiplication hash (as rustc's FxHash) for the codec's and node's integer-keyed
//! tables: the dictionary by (vendor, code), handlers by application id, pending requests by
//! hop-by-hop id. SipHash, the std default, took a tenth of the instructions of decoding and
//! validating an AAR. It is not keyed, so it is only for tables whose keys a peer cannot choose
//! on insertion (fixed at start, or our own hop-by-hop ids); a peer's keys are only looked up.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A `HashMap` with [`KeyHasher`].
pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<KeyHasher>>;

#[derive(Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        // hashbrown takes the bucket from the low bits and the tag from the top 7: the
        // product's high bits are its well-mixed ones, so fold them into the low bits too.
        self.0 ^ (self.0 >> 32)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(self.0 ^ u64::from(b));
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(self.0 ^ u64::from(v));
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v).wrapping_mul(0xf135_7aea_2e62_a9c5);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_keys_spread_over_buckets_and_tags() {
        let hash = |k: u32| {
            let mut h = KeyHasher::default();
            h.write_u32(k);
            h.finish()
        };
        let buckets: std::collections::HashSet<_> = (0..1024).map(|k| hash(k) & 1023).collect();
        assert!(buckets.len() > 600, "{} of 1024 buckets", buckets.len());
        let tags: std::collections::HashSet<_> = (0..1024).map(|k| hash(k) >> 57).collect();
        assert!(tags.len() > 100, "{} of 128 tags", tags.len());
        let m: FastMap<u32, u32> = (0..10_000).map(|k| (k, k * 2)).collect();
        assert!((0..10_000).all(|k| m[&k] == k * 2));
    }
}
