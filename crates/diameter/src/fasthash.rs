//! The codec's and node's integer-keyed tables (the dictionary by (vendor, code), handlers by
//! application id, pending requests by hop-by-hop id) use the workspace's one fast hasher,
//! rustc-hash's FxHash: SipHash, the std default, took a tenth of the instructions of decoding
//! and validating an AAR. It is not keyed, so it is only for tables whose keys a peer cannot
//! choose on insertion (fixed at start, or our own hop-by-hop ids); a peer's keys are only
//! looked up.

/// A `HashMap` with FxHash.
pub(crate) type FastMap<K, V> = rustc_hash::FxHashMap<K, V>;

#[cfg(test)]
mod tests {
    use std::hash::BuildHasher;

    use super::*;

    #[test]
    fn sequential_keys_spread_over_buckets_and_tags() {
        let hash = |k: u32| rustc_hash::FxBuildHasher.hash_one(k);
        let buckets: std::collections::HashSet<_> = (0..1024).map(|k| hash(k) & 1023).collect();
        assert!(buckets.len() > 600, "{} of 1024 buckets", buckets.len());
        let tags: std::collections::HashSet<_> = (0..1024).map(|k| hash(k) >> 57).collect();
        // A tag only spares a key comparison: most of the 128 in use is plenty (FxHash gives
        // 98 for these keys, the multiply-fold hash this replaced 100+).
        assert!(tags.len() > 64, "{} of 128 tags", tags.len());
        let m: FastMap<u32, u32> = (0..10_000).map(|k| (k, k * 2)).collect();
        assert!((0..10_000).all(|k| m[&k] == k * 2));
    }
}
