//! The in-memory identity index that answers SLF lookups without a store read.
//!
//! An identity of digits (`imsi-` / `msisdn-` with up to 15 digits, nearly every identity an
//! operator provisions) packs into one `u64` slot: a type bit, the digit count (so leading zeros
//! survive) and the digits as a number make a 55-bit key, and the low 9 bits hold the small
//! number of its group set. The slots sit in a SwissTable of plain `u64`s (9 bytes a slot with
//! its control byte), so 20 million identities cost ~300 MB, a quarter of the store file they come
//! from. Identities that do not pack (NAIs, IMPUs, non-digit GPSIs) and identities of a group set
//! numbered 512 or more go to an ordinary map keyed by the identity: slower and larger per
//! entry, but rare.

use std::collections::HashMap;
use std::sync::Arc;

use std::hash::BuildHasher;

use hashbrown::HashTable;
use rustc_hash::FxBuildHasher;

use super::Groups;

/// Bits of a slot that hold the group set number.
const SET_BITS: u32 = 9;
/// Group set numbers below this fit in a slot.
const PACKED_SETS: u32 = 1 << SET_BITS;
/// Longest digit string that packs: 10^15 - 1 < 2^50.
const MAX_DIGITS: usize = 15;
const VALUE_BITS: u32 = 50;
const LEN_BITS: u32 = 4;

/// The 55-bit key of an identity of digits, `None` for any other identity.
pub fn pack(id: &str) -> Option<u64> {
    let (tag, digits) = if let Some(d) = id.strip_prefix("imsi-") {
        (0u64, d)
    } else if let Some(d) = id.strip_prefix("msisdn-") {
        (1u64, d)
    } else {
        return None;
    };
    if digits.is_empty() || digits.len() > MAX_DIGITS {
        return None;
    }
    let mut value = 0u64;
    for b in digits.bytes() {
        if !b.is_ascii_digit() {
            return None;
        }
        value = value * 10 + u64::from(b - b'0');
    }
    Some((tag << (VALUE_BITS + LEN_BITS)) | ((digits.len() as u64) << VALUE_BITS) | value)
}

/// The workspace's one hasher (rustc-hash): a multiply and a rotate, so the table's bucket (low
/// bits) and tag (high bits) both come from the mixed middle of the product.
fn hash(key: u64) -> u64 {
    FxBuildHasher.hash_one(key)
}

fn slot_key(slot: u64) -> u64 {
    slot >> SET_BITS
}

/// The identities and the group sets they point at.
#[derive(Default)]
pub struct Index {
    packed: HashTable<u64>,
    other: HashMap<Box<str>, u32>,
    /// Group sets by their number here.
    sets: Vec<Arc<Groups>>,
    /// The store's `set_id` -> number here.
    set_numbers: HashMap<i64, u32>,
}

impl Index {
    /// The groups of `id`, `None` when unknown.
    pub fn get(&self, id: &str) -> Option<&Arc<Groups>> {
        let n = match pack(id) {
            Some(key) => match self.packed.find(hash(key), |s| slot_key(*s) == key) {
                Some(slot) => (slot & u64::from(PACKED_SETS - 1)) as u32,
                None => *self.other.get(id)?,
            },
            None => *self.other.get(id)?,
        };
        self.sets.get(n as usize)
    }

    /// Whether the store's group set `set_id` is known here.
    pub fn has_set(&self, set_id: i64) -> bool {
        self.set_numbers.contains_key(&set_id)
    }

    /// The store's group sets known here.
    pub fn set_ids(&self) -> impl Iterator<Item = i64> + '_ {
        self.set_numbers.keys().copied()
    }

    /// Registers the store's group set `set_id` (sets never change once written).
    pub fn add_set(&mut self, set_id: i64, groups: Groups) {
        if self.has_set(set_id) {
            return;
        }
        let n = self.sets.len() as u32;
        self.sets.push(Arc::new(groups));
        self.set_numbers.insert(set_id, n);
    }

    /// Points `id` at the store's group set `set_id`, or removes it (`None`). A set not
    /// registered with [`add_set`](Self::add_set) is an error: the caller read the identity
    /// row without its set.
    pub fn set(&mut self, id: &str, set_id: Option<i64>) -> Result<(), String> {
        let n = match set_id {
            None => None,
            Some(s) => Some(
                *self
                    .set_numbers
                    .get(&s)
                    .ok_or_else(|| format!("group set {s} of {id:?} unknown"))?,
            ),
        };
        let key = pack(id);
        match (key, n) {
            (Some(key), Some(n)) if n < PACKED_SETS => {
                let slot = (key << SET_BITS) | u64::from(n);
                match self.packed.find_mut(hash(key), |s| slot_key(*s) == key) {
                    Some(s) => *s = slot,
                    None => {
                        self.packed.insert_unique(hash(key), slot, |s| hash(slot_key(*s)));
                    }
                }
                self.other.remove(id);
            }
            (_, Some(n)) => {
                self.remove_packed(key);
                self.other.insert(id.into(), n);
            }
            (_, None) => {
                self.remove_packed(key);
                self.other.remove(id);
            }
        }
        Ok(())
    }

    fn remove_packed(&mut self, key: Option<u64>) {
        if let Some(key) = key {
            if let Ok(e) = self.packed.find_entry(hash(key), |s| slot_key(*s) == key) {
                e.remove();
            }
        }
    }

    /// Identities held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn len(&self) -> usize {
        self.packed.len() + self.other.len()
    }

    /// Bytes of the identity tables (the slots, the fallback map's buckets and keys).
    pub fn memory_bytes(&self) -> usize {
        // A SwissTable fills its power-of-two buckets to 7/8 at most.
        let buckets = (self.packed.capacity() * 8 / 7 + 1).next_power_of_two();
        let packed = buckets * (std::mem::size_of::<u64>() + 1);
        let other = self.other.capacity() * (std::mem::size_of::<(Box<str>, u32)>() + 1)
            + self.other.keys().map(|k| k.len()).sum::<usize>();
        packed + other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups(g: &str) -> Groups {
        [("UDM".to_owned(), g.to_owned())].into()
    }

    #[test]
    fn keys_keep_type_length_and_digits_apart() {
        let a = pack("imsi-001010000000001").unwrap();
        assert_ne!(a, pack("imsi-01010000000001").unwrap(), "leading zero");
        assert_ne!(pack("imsi-12345"), pack("msisdn-12345"));
        assert_eq!(pack("msisdn-999999999999999").unwrap() >> (VALUE_BITS + LEN_BITS), 1);
        assert!(pack("msisdn-9999999999999999").is_none(), "16 digits");
        assert!(pack("imsi-12a45").is_none());
        assert!(pack("imsi-").is_none());
        assert!(pack("nai-user@realm").is_none());
        assert!(pack("impi-001010000000001").is_none());
        assert!(pack("msisdn-999999999999999").unwrap() < 1 << (64 - SET_BITS));
    }

    #[test]
    fn set_replace_and_remove_in_both_tables() {
        let mut ix = Index::default();
        ix.add_set(10, groups("a"));
        ix.add_set(20, groups("b"));
        assert!(ix.set("imsi-001", Some(99)).is_err());
        for id in ["imsi-00101", "msisdn-336", "impu-sip:x@y"] {
            ix.set(id, Some(10)).unwrap();
            assert_eq!(**ix.get(id).unwrap(), groups("a"), "{id}");
            ix.set(id, Some(20)).unwrap();
            assert_eq!(**ix.get(id).unwrap(), groups("b"), "{id}");
        }
        assert_eq!(ix.len(), 3);
        assert!(ix.get("imsi-0101").is_none());
        ix.set("imsi-00101", None).unwrap();
        ix.set("impu-sip:x@y", None).unwrap();
        assert!(ix.get("imsi-00101").is_none());
        assert!(ix.get("impu-sip:x@y").is_none());
        assert_eq!(ix.len(), 1);
    }

    #[test]
    fn sets_beyond_the_slot_bits_fall_back_to_the_map() {
        let mut ix = Index::default();
        for s in 0..PACKED_SETS as i64 + 2 {
            ix.add_set(s, groups(&format!("g{s}")));
        }
        let last = PACKED_SETS as i64 + 1;
        ix.set("imsi-00101", Some(last)).unwrap();
        assert_eq!(**ix.get("imsi-00101").unwrap(), groups(&format!("g{last}")));
        assert_eq!(ix.packed.len(), 0);
        // Back to a packable set: moved, not duplicated.
        ix.set("imsi-00101", Some(3)).unwrap();
        assert_eq!(**ix.get("imsi-00101").unwrap(), groups("g3"));
        assert_eq!((ix.packed.len(), ix.other.len()), (1, 0));
        ix.set("imsi-00101", Some(last)).unwrap();
        assert_eq!((ix.packed.len(), ix.other.len()), (0, 1));
    }

    #[test]
    fn many_identities() {
        let mut ix = Index::default();
        ix.add_set(1, groups("a"));
        ix.add_set(2, groups("b"));
        for i in 0..100_000u64 {
            ix.set(&format!("imsi-00101{i:010}"), Some(1 + (i % 2) as i64)).unwrap();
        }
        for i in (0..100_000u64).step_by(7) {
            let want = if i % 2 == 0 { "a" } else { "b" };
            assert_eq!(**ix.get(&format!("imsi-00101{i:010}")).unwrap(), groups(want));
        }
        assert!(ix.get("imsi-001010000100000").is_none());
    }
}
