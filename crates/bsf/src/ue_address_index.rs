//! The Rx proxy's in-memory index of PCF bindings by UE address: IPv4 address (with IP domain)
//! and IPv6 prefix (the binding's own and its `addIpv6Prefixes`) → the PCF's Diameter identity
//! of the newest binding.
//!
//! Why: an AAR of a new Rx session needs one answer, "which PCF", and asking the store for it
//! costs a hop to a reader thread, a wake-up there and, once the database outgrows memory, file
//! reads (at 1M bindings the four readers took a quarter of the BSF's CPU for AAR-I alone). The
//! index answers on the Diameter task itself. The store stays the record: the index is built
//! from it in the background at start (lookups read the store until it is complete), and every
//! write to a binding changes it inside the write job, on the store's single writer, so the
//! index sees the writes in commit order. A write job that fails turns the index off (lookups go
//! back to the store) rather than risk a wrong answer.
//!
//! Memory: about 25 bytes per IPv4 key and 33 per IPv6 key at full hash-table load (up to about
//! twice that just after a table doubles), so a dual-stack binding costs 60-120 bytes; the
//! binding ids are kept as 64-bit hashes (only used to find a binding's entry again under its
//! own UE address) and the PCF identities once each.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use rustc_hash::{FxBuildHasher, FxHasher};
use serde::Deserialize;

use crate::models;

/// Shards per key kind: a writer (or a table doubling) holds one shard's lock, not all.
const SHARDS: usize = 64;

/// The PCF identity of a binding without pcfDiamHost.
const NO_PCF: u16 = 0;
/// More PCF identities than fit in an entry: such bindings are looked up in the store.
const PCF_OVERFLOW: u16 = u16::MAX;
/// Set in an entry's meta when the key has several bindings (they are in `Shard::multi`).
const MULTI: u64 = 1 << 16;

/// The PCF's Diameter identity, as the Rx proxy routes to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pcf {
    pub host: Arc<str>,
    pub realm: Arc<str>,
}

/// What the index knows about a UE address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The newest binding names this PCF.
    Pcf(Pcf),
    /// No binding, or the newest one has no pcfDiamHost.
    None,
    /// The index cannot tell (not loaded yet, turned off, or a PCF it could not number):
    /// ask the store.
    Unknown,
}

/// One binding under one key: a hash of its id, and its creation time and PCF packed as
/// `created_ms << 17 | MULTI | pcf`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    id: u64,
    meta: u64,
}

impl Entry {
    fn new(id: u64, created_ms: i64, pcf: u16) -> Entry {
        // 47 bits of milliseconds last until the year 6429.
        let ms = (created_ms.max(0) as u64) & ((1 << 47) - 1);
        Entry { id, meta: ms << 17 | u64::from(pcf) }
    }
    fn created(self) -> u64 {
        self.meta >> 17
    }
    fn pcf(self) -> u16 {
        self.meta as u16
    }
    fn is_multi(self) -> bool {
        self.meta & MULTI != 0
    }
}

/// A binding's index keys and PCF, read from its stored document (which the BSF validated and
/// normalised when it stored it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Indexed {
    id: u64,
    ipv4: Option<(u32, String)>,
    /// Networks (address masked to the length) with their length.
    ipv6: Vec<(u128, u8)>,
    pcf: Option<(String, String)>,
}

#[derive(Deserialize)]
struct Doc<'a> {
    #[serde(rename = "ipv4Addr", borrow, default)]
    ipv4: Option<Cow<'a, str>>,
    #[serde(rename = "ipDomain", borrow, default)]
    ip_domain: Option<Cow<'a, str>>,
    #[serde(rename = "ipv6Prefix", borrow, default)]
    ipv6: Option<Cow<'a, str>>,
    #[serde(rename = "addIpv6Prefixes", borrow, default)]
    add_ipv6: Vec<Cow<'a, str>>,
    #[serde(rename = "pcfDiamHost", borrow, default)]
    host: Option<Cow<'a, str>>,
    #[serde(rename = "pcfDiamRealm", borrow, default)]
    realm: Option<Cow<'a, str>>,
}

impl Indexed {
    /// The keys of binding `id` stored as `json`; `None` if the document is not a binding.
    pub fn from_json(id: &str, json: &[u8]) -> Option<Indexed> {
        let doc: Doc<'_> = serde_json::from_slice(json).ok()?;
        let ipv4 = doc.ipv4.as_deref().and_then(models::parse_ipv4).map(|a| {
            let domain = doc.ip_domain.as_deref().unwrap_or("");
            (u32::from(a), domain.to_owned())
        });
        let ipv6 = doc
            .ipv6
            .iter()
            .chain(doc.add_ipv6.iter())
            .filter_map(|p| models::parse_ipv6_prefix(p))
            .map(|(addr, len)| (network(addr, len), len))
            .collect();
        let pcf =
            doc.host.map(|h| (h.into_owned(), doc.realm.map(Cow::into_owned).unwrap_or_default()));
        Some(Indexed { id: id_hash(id), ipv4, ipv6, pcf })
    }

    /// The binding's `pcfDiamHost` and `pcfDiamRealm` (`""` when absent), if it has a host.
    pub fn into_pcf(self) -> Option<(String, String)> {
        self.pcf
    }
}

fn network(addr: Ipv6Addr, len: u8) -> u128 {
    let bits = u128::from(addr);
    if len == 0 {
        0
    } else {
        bits & (u128::MAX << (128 - u32::from(len)))
    }
}

/// A binding id as the index keeps it. Only compared among the bindings of one UE address.
fn id_hash(id: &str) -> u64 {
    let mut h = FxHasher::default();
    h.write(id.as_bytes());
    h.finish()
}

/// The index's tables hash with the workspace's one fast hasher: their keys are integers (UE
/// addresses) that come from PCFs, not from the AFs that query them, so flooding one bucket on
/// purpose is not a concern here.
type Fast = FxBuildHasher;

/// A table key as FxHash sees it: premixed. FxHash multiplies, which carries a key's low bits up
/// but never its high bits down, and the IPv4 key has its entropy in its high half (the address
/// above the IP domain number): hashed as is, IPv4 hits took 1.6x (10M bindings) to 2.5x (1M)
/// the CPU (benches/ue_address_index.rs, docs/bsf.md). One xor-shift-multiply of the key first
/// spreads every bit; equality is still the whole key's.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Key<K>(K);

trait Premix {
    fn premix(&self) -> u64;
}

/// Not the shard multiplier (see `Shards::shard`): keys of one shard must not share hash bits.
fn premix(x: u64) -> u64 {
    let x = (x ^ (x >> 32)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^ (x >> 29)
}

impl Premix for u64 {
    fn premix(&self) -> u64 {
        premix(*self)
    }
}

impl Premix for u128 {
    fn premix(&self) -> u64 {
        premix(fold128(*self))
    }
}

impl Premix for (u128, u8) {
    fn premix(&self) -> u64 {
        premix(fold128(self.0) ^ u64::from(self.1))
    }
}

impl<K: Premix> Hash for Key<K> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_u64(self.0.premix());
    }
}

/// The bindings of one shard: one entry per key, and the rare keys with several bindings
/// (the same UE address for other DNNs or slices, or not yet replaced) in `multi`.
struct Shard<K> {
    single: HashMap<Key<K>, Entry, Fast>,
    multi: HashMap<Key<K>, Vec<Entry>, Fast>,
}

impl<K: Premix + Eq + Copy> Shard<K> {
    fn new() -> Self {
        Shard { single: HashMap::default(), multi: HashMap::default() }
    }

    /// Adds `e` under `k`, replacing an entry of the same binding. With `keep_existing`, an
    /// entry of the same binding wins over `e` (the background load must not undo a write).
    fn insert(&mut self, k: K, e: Entry, keep_existing: bool) {
        let k = Key(k);
        match self.single.get_mut(&k) {
            None => {
                self.single.insert(k, e);
            }
            Some(cur) if !cur.is_multi() => {
                if cur.id == e.id {
                    if !keep_existing {
                        *cur = e;
                    }
                } else {
                    let first = *cur;
                    cur.meta |= MULTI;
                    self.multi.insert(k, vec![first, e]);
                }
            }
            Some(_) => {
                let list = self.multi.entry(k).or_default();
                match list.iter_mut().find(|x| x.id == e.id) {
                    Some(x) if !keep_existing => *x = e,
                    Some(_) => {}
                    None => list.push(e),
                }
            }
        }
    }

    /// Removes the entry of binding `id` under `k`; returns it.
    fn remove(&mut self, k: K, id: u64) -> Option<Entry> {
        let k = Key(k);
        let cur = *self.single.get(&k)?;
        if !cur.is_multi() {
            return (cur.id == id).then(|| self.single.remove(&k)).flatten();
        }
        let list = self.multi.get_mut(&k)?;
        let at = list.iter().position(|x| x.id == id)?;
        let gone = list.swap_remove(at);
        if list.len() == 1 {
            let last = list[0];
            self.multi.remove(&k);
            self.single.insert(k, last);
        }
        Some(gone)
    }

    /// The newest entry under `k`.
    fn newest(&self, k: &K) -> Option<Entry> {
        let k = &Key(*k);
        let cur = *self.single.get(k)?;
        if !cur.is_multi() {
            return Some(cur);
        }
        self.multi.get(k)?.iter().copied().max_by_key(|e| e.created())
    }

    fn len(&self) -> usize {
        self.single.len()
    }
}

struct Shards<K> {
    shards: Vec<RwLock<Shard<K>>>,
}

impl<K: Premix + Eq + Copy> Shards<K> {
    fn new() -> Self {
        Shards { shards: (0..SHARDS).map(|_| RwLock::new(Shard::new())).collect() }
    }
    fn shard(&self, fold: u64) -> &RwLock<Shard<K>> {
        // Not the bits the tables hash with: a different multiplier, top bits.
        &self.shards[(fold.wrapping_mul(0xD6E8_FEB8_6659_FD93) >> 58) as usize % SHARDS]
    }
    fn len(&self) -> usize {
        self.shards.iter().map(|s| s.read().unwrap_or_else(|e| e.into_inner()).len()).sum()
    }
}

/// Strings numbered once (PCF identities, IP domains).
struct Interned<T> {
    ids: HashMap<T, u32>,
    values: Vec<T>,
}

impl<T: Hash + Eq + Clone> Interned<T> {
    fn new(first: T) -> Self {
        Interned { ids: HashMap::from([(first.clone(), 0)]), values: vec![first] }
    }
    fn get_or_add(&mut self, v: &T) -> u32 {
        if let Some(&id) = self.ids.get(v) {
            return id;
        }
        let id = self.values.len() as u32;
        self.ids.insert(v.clone(), id);
        self.values.push(v.clone());
        id
    }
}

/// PCF identities by number (number 0 is "no pcfDiamHost") and by (host, realm).
struct PcfTable {
    by_name: HashMap<(String, String), u16>,
    list: Vec<Option<Pcf>>,
}

const LOADING: u8 = 0;
const READY: u8 = 1;
const OFF: u8 = 2;

/// See the module documentation.
pub struct UeAddressIndex {
    state: AtomicU8,
    /// Key `ipv4 << 32 | IP domain number` (domain 0 is none).
    v4: Shards<u64>,
    /// Key: the network, with its length in the low byte when the length leaves that byte zero
    /// (lengths up to 120); longer prefixes are in `v6_long`.
    v6: Shards<u128>,
    v6_long: Shards<(u128, u8)>,
    domains: RwLock<Interned<String>>,
    /// Number → PCF; number 0 is "no pcfDiamHost".
    pcfs: RwLock<PcfTable>,
    /// While the background load runs: the bindings removed or changed meanwhile, which the
    /// load must not bring back from its (older) snapshot.
    removed_while_loading: Mutex<Option<HashSet<u64>>>,
}

impl Default for UeAddressIndex {
    fn default() -> Self {
        Self::new()
    }
}

enum V6Key {
    Short(u128),
    Long((u128, u8)),
}

fn v6_key(net: u128, len: u8) -> V6Key {
    if len <= 120 {
        V6Key::Short(net | u128::from(len))
    } else {
        V6Key::Long((net, len))
    }
}

fn fold128(k: u128) -> u64 {
    (k as u64) ^ ((k >> 64) as u64).rotate_left(32)
}

impl UeAddressIndex {
    /// An empty index, not yet ready: lookups answer `Unknown` until [`Self::set_ready`].
    pub fn new() -> Self {
        UeAddressIndex {
            state: AtomicU8::new(LOADING),
            v4: Shards::new(),
            v6: Shards::new(),
            v6_long: Shards::new(),
            domains: RwLock::new(Interned::new(String::new())),
            pcfs: RwLock::new(PcfTable { by_name: HashMap::new(), list: vec![None] }),
            removed_while_loading: Mutex::new(Some(HashSet::new())),
        }
    }

    pub fn is_ready(&self) -> bool {
        self.state.load(Ordering::Acquire) == READY
    }

    /// The load is complete: lookups are answered from the index from now on.
    pub fn set_ready(&self) {
        *self.removed_while_loading.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let _ = self.state.compare_exchange(LOADING, READY, Ordering::AcqRel, Ordering::Acquire);
    }

    /// A write may have reached the index without reaching the store: stop answering.
    pub fn turn_off(&self) {
        *self.removed_while_loading.lock().unwrap_or_else(|e| e.into_inner()) = None;
        if self.state.swap(OFF, Ordering::AcqRel) != OFF {
            tracing::error!(
                "BSF UE address index turned off after a failed store write: Rx lookups read \
                 the store until restart"
            );
        }
    }

    /// Ends a load still running (shutdown) without the error [`Self::turn_off`] logs.
    pub fn stop_loading(&self) {
        *self.removed_while_loading.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let _ = self.state.compare_exchange(LOADING, OFF, Ordering::AcqRel, Ordering::Acquire);
    }

    /// True once turned off or stopped: a running load gives up.
    pub fn is_off(&self) -> bool {
        self.state.load(Ordering::Acquire) == OFF
    }

    /// Bindings indexed by IPv4 address, and IPv6 prefixes indexed.
    pub fn len(&self) -> (usize, usize) {
        (self.v4.len(), self.v6.len() + self.v6_long.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == (0, 0)
    }

    fn pcf_number(&self, pcf: &Option<(String, String)>) -> u16 {
        let Some(p) = pcf else { return NO_PCF };
        if let Some(&n) = self.pcfs.read().unwrap_or_else(|e| e.into_inner()).by_name.get(p) {
            return n;
        }
        let mut w = self.pcfs.write().unwrap_or_else(|e| e.into_inner());
        let PcfTable { by_name, list } = &mut *w;
        if let Some(&n) = by_name.get(p) {
            return n;
        }
        if list.len() >= usize::from(PCF_OVERFLOW) {
            return PCF_OVERFLOW;
        }
        let n = list.len() as u16;
        by_name.insert(p.clone(), n);
        list.push(Some(Pcf { host: p.0.as_str().into(), realm: p.1.as_str().into() }));
        n
    }

    fn domain_number(&self, d: &str) -> u32 {
        if d.is_empty() {
            return 0;
        }
        if let Some(&n) = self.domains.read().unwrap_or_else(|e| e.into_inner()).ids.get(d) {
            return n;
        }
        self.domains.write().unwrap_or_else(|e| e.into_inner()).get_or_add(&d.to_owned())
    }

    /// A binding written by a write job (created, or the new state of an update).
    pub fn insert(&self, b: &Indexed, created_ms: i64) {
        self.put(b, created_ms, false);
    }

    /// A binding of the background load's snapshot: skipped if a write removed or changed it
    /// since the snapshot, or already put it in.
    pub fn load_one(&self, b: &Indexed, created_ms: i64) {
        if let Some(gone) = &*self.removed_while_loading.lock().unwrap_or_else(|e| e.into_inner()) {
            if gone.contains(&b.id) {
                return;
            }
        }
        self.put(b, created_ms, true);
    }

    fn put(&self, b: &Indexed, created_ms: i64, keep_existing: bool) {
        let e = Entry::new(b.id, created_ms, self.pcf_number(&b.pcf));
        if let Some((ip, domain)) = &b.ipv4 {
            let k = u64::from(*ip) << 32 | u64::from(self.domain_number(domain));
            self.v4.shard(k).write().unwrap_or_else(|e| e.into_inner()).insert(k, e, keep_existing);
        }
        for &(net, len) in &b.ipv6 {
            match v6_key(net, len) {
                V6Key::Short(k) => self
                    .v6
                    .shard(fold128(k))
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(k, e, keep_existing),
                V6Key::Long(k) => self
                    .v6_long
                    .shard(fold128(k.0))
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(k, e, keep_existing),
            }
        }
    }

    /// A binding removed (or about to be re-inserted with new keys by an update); returns its
    /// creation time if the index had it.
    pub fn remove(&self, b: &Indexed) -> Option<i64> {
        if let Some(gone) =
            &mut *self.removed_while_loading.lock().unwrap_or_else(|e| e.into_inner())
        {
            gone.insert(b.id);
        }
        let mut created = None;
        let mut note = |e: Option<Entry>| {
            if let Some(e) = e {
                created = Some(e.created() as i64);
            }
        };
        if let Some((ip, domain)) = &b.ipv4 {
            let d = self.domains.read().unwrap_or_else(|e| e.into_inner()).ids.get(domain).copied();
            if let Some(d) = d {
                let k = u64::from(*ip) << 32 | u64::from(d);
                note(self.v4.shard(k).write().unwrap_or_else(|e| e.into_inner()).remove(k, b.id));
            }
        }
        for &(net, len) in &b.ipv6 {
            match v6_key(net, len) {
                V6Key::Short(k) => note(
                    self.v6
                        .shard(fold128(k))
                        .write()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(k, b.id),
                ),
                V6Key::Long(k) => note(
                    self.v6_long
                        .shard(fold128(k.0))
                        .write()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(k, b.id),
                ),
            }
        }
        created
    }

    fn answer(&self, newest: Option<Entry>) -> Answer {
        match newest.map(Entry::pcf) {
            None | Some(NO_PCF) => Answer::None,
            Some(PCF_OVERFLOW) => Answer::Unknown,
            Some(n) => {
                match self.pcfs.read().unwrap_or_else(|e| e.into_inner()).list.get(usize::from(n)) {
                    Some(Some(p)) => Answer::Pcf(p.clone()),
                    _ => Answer::Unknown,
                }
            }
        }
    }

    /// The PCF of the newest binding for `ip` in IP domain `domain` (`None`: in any domain).
    pub fn find_v4(&self, ip: Ipv4Addr, domain: Option<&str>) -> Answer {
        if !self.is_ready() {
            return Answer::Unknown;
        }
        let ip = u64::from(u32::from(ip)) << 32;
        let probe = |d: u32| {
            let k = ip | u64::from(d);
            self.v4.shard(k).read().unwrap_or_else(|e| e.into_inner()).newest(&k)
        };
        let newest = match domain {
            Some(d) => {
                let n = self.domains.read().unwrap_or_else(|e| e.into_inner()).ids.get(d).copied();
                n.and_then(probe)
            }
            None => {
                let count = self.domains.read().unwrap_or_else(|e| e.into_inner()).values.len();
                (0..count as u32).filter_map(probe).max_by_key(|e| e.created())
            }
        };
        self.answer(newest)
    }

    /// The PCF of the newest binding whose IPv6 prefix (its own or an additional one) is the
    /// network of `addr/len` at `len` or at one of the shorter `lengths`.
    pub fn find_v6(&self, addr: Ipv6Addr, len: u8, lengths: &[u8]) -> Answer {
        if !self.is_ready() {
            return Answer::Unknown;
        }
        let mut newest: Option<Entry> = None;
        for l in std::iter::once(len).chain(lengths.iter().copied().filter(|l| *l < len)) {
            let found = match v6_key(network(addr, l), l) {
                V6Key::Short(k) => {
                    self.v6.shard(fold128(k)).read().unwrap_or_else(|e| e.into_inner()).newest(&k)
                }
                V6Key::Long(k) => self
                    .v6_long
                    .shard(fold128(k.0))
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .newest(&k),
            };
            if let Some(f) = found {
                if newest.is_none_or(|n| f.created() > n.created()) {
                    newest = Some(f);
                }
            }
        }
        self.answer(newest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(id: &str, json: &str) -> Indexed {
        Indexed::from_json(id, json.as_bytes()).expect(json)
    }

    fn pcf(h: &str, r: &str) -> Answer {
        Answer::Pcf(Pcf { host: h.into(), realm: r.into() })
    }

    const LENGTHS: [u8; 6] = [128, 64, 60, 56, 48, 32];

    #[test]
    fn not_ready_is_unknown_then_answers() {
        let ix = UeAddressIndex::new();
        let b = doc("a", r#"{"ipv4Addr":"10.0.0.1","pcfDiamHost":"p1","pcfDiamRealm":"r"}"#);
        ix.insert(&b, 1);
        assert_eq!(ix.find_v4("10.0.0.1".parse().unwrap(), None), Answer::Unknown);
        ix.set_ready();
        assert_eq!(ix.find_v4("10.0.0.1".parse().unwrap(), None), pcf("p1", "r"));
        assert_eq!(ix.find_v4("10.0.0.2".parse().unwrap(), None), Answer::None);
        ix.turn_off();
        assert_eq!(ix.find_v4("10.0.0.1".parse().unwrap(), None), Answer::Unknown);
    }

    #[test]
    fn newest_binding_wins_and_removal_uncovers_the_older() {
        let ix = UeAddressIndex::new();
        ix.set_ready();
        let ip: Ipv4Addr = "10.1.2.3".parse().unwrap();
        let old = doc("old", r#"{"ipv4Addr":"10.1.2.3","dnn":"a","pcfDiamHost":"p-old"}"#);
        let new = doc("new", r#"{"ipv4Addr":"10.1.2.3","dnn":"b","pcfDiamHost":"p-new"}"#);
        let third = doc("x", r#"{"ipv4Addr":"10.1.2.3","dnn":"c","pcfDiamHost":"p-x"}"#);
        ix.insert(&old, 100);
        ix.insert(&new, 200);
        ix.insert(&third, 150);
        assert_eq!(ix.find_v4(ip, None), pcf("p-new", ""));
        assert_eq!(ix.remove(&new), Some(200));
        assert_eq!(ix.find_v4(ip, None), pcf("p-x", ""));
        assert_eq!(ix.remove(&third), Some(150));
        assert_eq!(ix.find_v4(ip, None), pcf("p-old", ""));
        // Removing what is not there changes nothing.
        assert_eq!(ix.remove(&third), None);
        assert_eq!(ix.remove(&old), Some(100));
        assert_eq!(ix.find_v4(ip, None), Answer::None);
        assert!(ix.is_empty());
    }

    #[test]
    fn ip_domains_are_told_apart() {
        let ix = UeAddressIndex::new();
        ix.set_ready();
        let ip: Ipv4Addr = "192.168.0.9".parse().unwrap();
        ix.insert(&doc("a", r#"{"ipv4Addr":"192.168.0.9","ipDomain":"d1","pcfDiamHost":"p1"}"#), 1);
        ix.insert(&doc("b", r#"{"ipv4Addr":"192.168.0.9","ipDomain":"d2","pcfDiamHost":"p2"}"#), 2);
        assert_eq!(ix.find_v4(ip, Some("d1")), pcf("p1", ""));
        assert_eq!(ix.find_v4(ip, Some("d2")), pcf("p2", ""));
        assert_eq!(ix.find_v4(ip, Some("d3")), Answer::None);
        // Any domain: the newest.
        assert_eq!(ix.find_v4(ip, None), pcf("p2", ""));
    }

    #[test]
    fn ipv6_by_own_and_additional_prefixes_at_shorter_lengths() {
        let ix = UeAddressIndex::new();
        ix.set_ready();
        ix.insert(
            &doc(
                "a",
                r#"{"ipv6Prefix":"2001:db8:1:2::/64","addIpv6Prefixes":["2001:db8:ff::/48"],
                    "pcfDiamHost":"p6","pcfDiamRealm":"r6"}"#,
            ),
            1,
        );
        let a = |s: &str| s.parse::<Ipv6Addr>().unwrap();
        assert_eq!(ix.find_v6(a("2001:db8:1:2::77"), 128, &LENGTHS), pcf("p6", "r6"));
        assert_eq!(ix.find_v6(a("2001:db8:1:2::"), 64, &LENGTHS), pcf("p6", "r6"));
        assert_eq!(ix.find_v6(a("2001:db8:ff:9::1"), 128, &LENGTHS), pcf("p6", "r6"));
        assert_eq!(ix.find_v6(a("2001:db8:1:3::1"), 128, &LENGTHS), Answer::None);
        // A /128 binding (the long-prefix table).
        ix.insert(&doc("b", r#"{"ipv6Prefix":"2001:db8:9::5/128","pcfDiamHost":"p7"}"#), 2);
        assert_eq!(ix.find_v6(a("2001:db8:9::5"), 128, &LENGTHS), pcf("p7", ""));
        assert_eq!(ix.find_v6(a("2001:db8:9::6"), 128, &LENGTHS), Answer::None);
        assert_eq!(ix.len(), (0, 3));
    }

    #[test]
    fn binding_without_diameter_host_answers_none() {
        let ix = UeAddressIndex::new();
        ix.set_ready();
        ix.insert(&doc("a", r#"{"ipv4Addr":"10.0.0.1","pcfFqdn":"pcf.example"}"#), 1);
        assert_eq!(ix.find_v4("10.0.0.1".parse().unwrap(), None), Answer::None);
    }

    #[test]
    fn the_load_does_not_undo_writes_made_meanwhile() {
        let ix = UeAddressIndex::new();
        let ip: Ipv4Addr = "10.0.0.1".parse().unwrap();
        let deleted = doc("gone", r#"{"ipv4Addr":"10.0.0.1","pcfDiamHost":"p-gone"}"#);
        let before = doc("upd", r#"{"ipv4Addr":"10.0.0.2","pcfDiamHost":"p-before"}"#);
        let after = doc("upd", r#"{"ipv4Addr":"10.0.0.2","pcfDiamHost":"p-after"}"#);
        // Writes while loading: a delete and an update of bindings the snapshot still has.
        ix.remove(&deleted);
        ix.remove(&before);
        ix.insert(&after, 5);
        // The snapshot's rows arrive later.
        ix.load_one(&deleted, 1);
        ix.load_one(&before, 5);
        ix.set_ready();
        assert_eq!(ix.find_v4(ip, None), Answer::None);
        assert_eq!(ix.find_v4("10.0.0.2".parse().unwrap(), None), pcf("p-after", ""));
        // After the load, writes apply as usual.
        ix.insert(&deleted, 9);
        assert_eq!(ix.find_v4(ip, None), pcf("p-gone", ""));
    }

    #[test]
    fn many_bindings_spread_over_shards() {
        let ix = UeAddressIndex::new();
        ix.set_ready();
        for i in 0..10_000u32 {
            let ip = Ipv4Addr::from(0x0A00_0000 + i);
            let b = Indexed {
                id: id_hash(&i.to_string()),
                ipv4: Some((u32::from(ip), String::new())),
                ipv6: vec![],
                pcf: Some((format!("pcf{}", i % 3), "r".into())),
            };
            ix.insert(&b, i64::from(i));
        }
        assert_eq!(ix.len(), (10_000, 0));
        assert_eq!(ix.find_v4(Ipv4Addr::from(0x0A00_0000 + 4), None), pcf("pcf1", "r"));
    }
}
