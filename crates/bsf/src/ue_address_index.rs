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
//!
//! Discovery (`GET pcfBindings?ipv4Addr=` / `?ipv6Prefix=`) answers the whole binding document,
//! and a read of it from the store cost the same hop to a reader thread and back as an AAR's. An
//! index built [`UeAddressIndex::with_documents`] also keeps each binding's stored document
//! (once, by the hash of its id, next to the address tables): Discovery then answers from memory
//! ([`UeAddressIndex::discover`]), its filters (`dnn`, `snssai`, `supi`, `gpsi`) checked on the
//! candidates' documents. Two bindings whose ids hash alike make that slot unknown, so their
//! Discoveries read the store. The document costs its own size (~350 bytes for a typical
//! binding) plus ~40 bytes of table.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use bytes::Bytes;
use rustc_hash::{FxBuildHasher, FxHasher};
use serde::Deserialize;

use crate::models::{self, Keys};

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
/// normalised when it stored it), and the document itself when the index keeps documents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Indexed {
    id: u64,
    ipv4: Option<(u32, String)>,
    /// Networks (address masked to the length) with their length.
    ipv6: Vec<(u128, u8)>,
    pcf: Option<(String, String)>,
    doc: Option<Bytes>,
}

/// What Discovery answers from the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Discovered {
    /// The newest matching binding's stored document.
    Found(Bytes),
    /// No binding matches.
    None,
    /// The index cannot tell (not loaded, turned off, keeps no documents, a query it does not
    /// cover, an id hash shared by two bindings): ask the store.
    Unknown,
}

/// Discovery's filters besides the UE address, normalised as the store's columns are (DNN and
/// SD in lower case, SD `""` when absent).
#[derive(Debug, Clone, Copy, Default)]
pub struct Filter<'a> {
    pub dnn: Option<&'a str>,
    pub snssai: Option<(u8, &'a str)>,
    pub supi: Option<&'a str>,
    pub gpsi: Option<&'a str>,
}

#[derive(Deserialize)]
struct FilterDoc<'a> {
    #[serde(borrow, default)]
    dnn: Option<Cow<'a, str>>,
    #[serde(default)]
    snssai: Option<FilterSnssai<'a>>,
    #[serde(borrow, default)]
    supi: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    gpsi: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct FilterSnssai<'a> {
    sst: u8,
    #[serde(borrow, default)]
    sd: Option<Cow<'a, str>>,
}

impl Filter<'_> {
    fn is_empty(&self) -> bool {
        self.dnn.is_none() && self.snssai.is_none() && self.supi.is_none() && self.gpsi.is_none()
    }

    /// Whether the stored document `doc` passes (a document it cannot read does not).
    fn matches(&self, doc: &[u8]) -> bool {
        let Ok(d) = serde_json::from_slice::<FilterDoc<'_>>(doc) else { return false };
        let same = |want: Option<&str>, have: &Option<Cow<'_, str>>| match want {
            None => true,
            Some(w) => have.as_deref() == Some(w),
        };
        let dnn = match self.dnn {
            None => true,
            Some(w) => d.dnn.as_deref().is_some_and(|h| h.eq_ignore_ascii_case(w)),
        };
        let snssai = match self.snssai {
            None => true,
            Some((sst, sd)) => d.snssai.as_ref().is_some_and(|s| {
                s.sst == sst && s.sd.as_deref().unwrap_or("").eq_ignore_ascii_case(sd)
            }),
        };
        dnn && snssai && same(self.supi, &d.supi) && same(self.gpsi, &d.gpsi)
    }
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
        Some(Indexed { id: id_hash(id), ipv4, ipv6, pcf, doc: None })
    }

    /// The keys of binding `id` as Register validated them: what [`Self::from_json`] reads from
    /// the document it stores, without reading the document again.
    pub fn from_keys(id: &str, keys: &Keys) -> Indexed {
        let ipv4 = keys
            .ipv4
            .as_deref()
            .and_then(models::parse_ipv4)
            .map(|a| (u32::from(a), keys.ip_domain.clone()));
        let ipv6 = keys
            .ipv6
            .iter()
            .chain(keys.add_ipv6.iter())
            .filter_map(|p| models::parse_ipv6_prefix(p))
            .map(|(addr, len)| (network(addr, len), len))
            .collect();
        Indexed { id: id_hash(id), ipv4, ipv6, pcf: keys.pcf_diam.clone(), doc: None }
    }

    /// Whether the index files it under an address (an IPv4 address or an IPv6 prefix).
    fn has_address(&self) -> bool {
        self.ipv4.is_some() || !self.ipv6.is_empty()
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

    /// Every entry under `k`.
    fn each(&self, k: &K, mut f: impl FnMut(Entry)) {
        let k = &Key(*k);
        let Some(&cur) = self.single.get(k) else { return };
        if !cur.is_multi() {
            return f(cur);
        }
        for &e in self.multi.get(k).into_iter().flatten() {
            f(e);
        }
    }

    fn len(&self) -> usize {
        self.single.len()
    }

    fn reserve_churn_room(&mut self) {
        reserve_churn_room(&mut self.single);
        reserve_churn_room(&mut self.multi);
    }
}

/// Grows `map` to at most half full. A std `HashMap` does not reuse a removed key's room for a
/// new key until it rehashes, and rehashes in place only when at most half full, else doubles:
/// a table left more than half full by a bulk load doubles once under steady churn (after ~13
/// replacements per entry, docs/BENCHMARKS.md "Session s31"), a step in the process's memory
/// hours into a steady load. Taken at load, that memory is there from the start, and flat.
fn reserve_churn_room<K: Eq + std::hash::Hash, V, S: std::hash::BuildHasher>(
    map: &mut HashMap<K, V, S>,
) {
    map.reserve(map.len());
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
    fn reserve_churn_room(&self) {
        for s in &self.shards {
            s.write().unwrap_or_else(|e| e.into_inner()).reserve_churn_room();
        }
    }
}

/// A binding's document by the hash of its id. `Shared` counts bindings whose ids hash alike:
/// which document is whose is unknown then, and Discovery reads the store for them.
#[derive(Debug, Clone)]
enum DocSlot {
    One(Bytes),
    Shared(u32),
}

struct Docs {
    shards: Vec<RwLock<HashMap<Key<u64>, DocSlot, Fast>>>,
}

impl Docs {
    fn new() -> Self {
        Docs { shards: (0..SHARDS).map(|_| RwLock::new(HashMap::default())).collect() }
    }
    fn shard(&self, id: u64) -> &RwLock<HashMap<Key<u64>, DocSlot, Fast>> {
        &self.shards[(id.wrapping_mul(0xD6E8_FEB8_6659_FD93) >> 58) as usize % SHARDS]
    }
    fn insert(&self, id: u64, doc: Bytes) {
        let mut s = self.shard(id).write().unwrap_or_else(|e| e.into_inner());
        match s.get_mut(&Key(id)) {
            None => {
                s.insert(Key(id), DocSlot::One(doc));
            }
            Some(slot) => {
                *slot = match slot {
                    DocSlot::One(_) => DocSlot::Shared(2),
                    DocSlot::Shared(n) => DocSlot::Shared(n.saturating_add(1)),
                }
            }
        }
    }
    fn reserve_churn_room(&self) {
        for s in &self.shards {
            reserve_churn_room(&mut s.write().unwrap_or_else(|e| e.into_inner()));
        }
    }
    fn remove(&self, id: u64) {
        let mut s = self.shard(id).write().unwrap_or_else(|e| e.into_inner());
        match s.get_mut(&Key(id)) {
            Some(DocSlot::Shared(n)) if *n > 1 => *n -= 1,
            Some(_) => {
                s.remove(&Key(id));
            }
            None => {}
        }
    }
    /// The new document of binding `id` (an Update): in place, or added when it had none.
    fn set(&self, id: u64, doc: Bytes) {
        let mut s = self.shard(id).write().unwrap_or_else(|e| e.into_inner());
        match s.get_mut(&Key(id)) {
            Some(DocSlot::One(d)) => *d = doc,
            Some(DocSlot::Shared(_)) => {}
            None => {
                s.insert(Key(id), DocSlot::One(doc));
            }
        }
    }
    fn get(&self, id: u64) -> Option<Bytes> {
        match self.shard(id).read().unwrap_or_else(|e| e.into_inner()).get(&Key(id)) {
            Some(DocSlot::One(d)) => Some(d.clone()),
            _ => None,
        }
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
    /// While the background load runs: the bindings written (added, changed or removed)
    /// meanwhile, which the load must not bring back from its (older) snapshot.
    removed_while_loading: Mutex<Option<HashSet<u64>>>,
    /// The bindings' documents, for Discovery ([`Self::with_documents`]).
    docs: Option<Docs>,
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
            docs: None,
        }
    }

    /// An index that also keeps every binding's document, so Discovery answers from it.
    pub fn with_documents() -> Self {
        UeAddressIndex { docs: Some(Docs::new()), ..Self::new() }
    }

    pub fn keeps_documents(&self) -> bool {
        self.docs.is_some()
    }

    /// The index's view of binding `id` stored as `json`: its keys and PCF, and its document
    /// when this index keeps documents (a copy: the store keeps its own).
    pub fn indexed(&self, id: &str, json: &[u8]) -> Option<Indexed> {
        let mut b = Indexed::from_json(id, json)?;
        if self.docs.is_some() {
            b.doc = Some(Bytes::copy_from_slice(json));
        }
        Some(b)
    }

    /// The index's view of a binding Register is storing: its validated keys, and its document
    /// (shared with the caller, not copied) when this index keeps documents.
    pub fn indexed_new(&self, id: &str, keys: &Keys, json: &Bytes) -> Indexed {
        let mut b = Indexed::from_keys(id, keys);
        if self.docs.is_some() {
            b.doc = Some(json.clone());
        }
        b
    }

    pub fn is_ready(&self) -> bool {
        self.state.load(Ordering::Acquire) == READY
    }

    /// The load is complete: lookups are answered from the index from now on. Its tables are
    /// grown to at most half full first ([`reserve_churn_room`]).
    pub fn set_ready(&self) {
        self.v4.reserve_churn_room();
        self.v6.reserve_churn_room();
        self.v6_long.reserve_churn_room();
        if let Some(docs) = &self.docs {
            docs.reserve_churn_room();
        }
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
        // A binding written while the load runs may be in its snapshot too: the load skips it
        // (its document would otherwise count twice, as two bindings sharing an id hash).
        self.note_written(b.id);
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
        // Only a binding with an address here is found (and later removed) through the index.
        if let (Some(docs), Some(doc)) = (&self.docs, &b.doc) {
            if b.has_address() {
                docs.insert(b.id, doc.clone());
            }
        }
        self.put_entries(b, created_ms, keep_existing);
    }

    fn put_entries(&self, b: &Indexed, created_ms: i64, keep_existing: bool) {
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
        self.note_written(b.id);
        let created = self.remove_entries(b, None);
        if let (Some(docs), Some(_)) = (&self.docs, created) {
            docs.remove(b.id);
        }
        created
    }

    /// An Update of a binding: `new` (same id) replaces `old` without a moment when neither is
    /// found (entries under an address both have are changed in place, then the old
    /// addresses the new one lacks are dropped).
    pub fn replace(&self, old: &Indexed, new: &Indexed, created_ms: i64) {
        self.note_written(new.id);
        if let Some(docs) = &self.docs {
            match &new.doc {
                Some(doc) if new.has_address() => docs.set(new.id, doc.clone()),
                _ if old.has_address() => docs.remove(new.id),
                _ => {}
            }
        }
        self.put_entries(new, created_ms, false);
        self.remove_entries(old, Some(new));
    }

    /// While the background load runs, it must not bring binding `id` back from its snapshot.
    fn note_written(&self, id: u64) {
        if let Some(written) =
            &mut *self.removed_while_loading.lock().unwrap_or_else(|e| e.into_inner())
        {
            written.insert(id);
        }
    }

    /// Removes `b`'s entries, but those under an address `keep` has too; returns the creation
    /// time of an entry removed.
    fn remove_entries(&self, b: &Indexed, keep: Option<&Indexed>) -> Option<i64> {
        let mut created = None;
        let mut note = |e: Option<Entry>| {
            if let Some(e) = e {
                created = Some(e.created() as i64);
            }
        };
        if let Some((ip, domain)) = &b.ipv4 {
            let kept =
                keep.and_then(|k| k.ipv4.as_ref()).is_some_and(|(i, d)| i == ip && d == domain);
            let d = self.domains.read().unwrap_or_else(|e| e.into_inner()).ids.get(domain).copied();
            if let (Some(d), false) = (d, kept) {
                let k = u64::from(*ip) << 32 | u64::from(d);
                note(self.v4.shard(k).write().unwrap_or_else(|e| e.into_inner()).remove(k, b.id));
            }
        }
        for &(net, len) in &b.ipv6 {
            if keep.is_some_and(|k| k.ipv6.contains(&(net, len))) {
                continue;
            }
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

/// Discovery's choice among the entries of the keys it probes: the newest, or the newest whose
/// document passes the filter.
struct Pick<'a> {
    docs: &'a Docs,
    filter: Filter<'a>,
    /// The newest so far: its creation time, id and (once a filter read it) document.
    best: Option<(u64, Option<Bytes>)>,
    best_id: u64,
    unknown: bool,
}

impl<'a> Pick<'a> {
    fn new(docs: &'a Docs, filter: Filter<'a>) -> Self {
        Pick { docs, filter, best: None, best_id: 0, unknown: false }
    }

    fn offer(&mut self, e: Entry) {
        if self.best.as_ref().is_some_and(|(created, _)| *created >= e.created()) {
            return;
        }
        if self.filter.is_empty() {
            self.best = Some((e.created(), None));
            self.best_id = e.id;
            return;
        }
        match self.docs.get(e.id) {
            Some(doc) if self.filter.matches(&doc) => self.best = Some((e.created(), Some(doc))),
            Some(_) => {}
            // A binding whose document the index cannot tell: it might be the answer.
            None => self.unknown = true,
        }
    }

    fn answer(self) -> Discovered {
        if self.unknown {
            return Discovered::Unknown;
        }
        match self.best {
            None => Discovered::None,
            Some((_, Some(doc))) => Discovered::Found(doc),
            Some((_, None)) => match self.docs.get(self.best_id) {
                Some(doc) => Discovered::Found(doc),
                None => Discovered::Unknown,
            },
        }
    }
}

impl UeAddressIndex {
    /// Discovery by the UE's IPv4 address (in `domain`, or any IP domain) or by an IPv6 prefix
    /// (`addr/len`, tried at `len` and the shorter `lengths`, as the store's `find`), never
    /// both: the newest binding that passes `filter`, as the store would answer it.
    pub fn discover(
        &self,
        ipv4: Option<(Ipv4Addr, Option<&str>)>,
        ipv6: Option<(Ipv6Addr, u8, &[u8])>,
        filter: Filter<'_>,
    ) -> Discovered {
        let Some(docs) = &self.docs else { return Discovered::Unknown };
        if !self.is_ready() {
            return Discovered::Unknown;
        }
        let mut pick = Pick::new(docs, filter);
        match (ipv4, ipv6) {
            (Some((ip, domain)), None) => {
                let ip = u64::from(u32::from(ip)) << 32;
                let mut probe = |d: u32| {
                    let k = ip | u64::from(d);
                    self.v4
                        .shard(k)
                        .read()
                        .unwrap_or_else(|e| e.into_inner())
                        .each(&k, |e| pick.offer(e));
                };
                match domain {
                    Some(d) => {
                        let n = self
                            .domains
                            .read()
                            .unwrap_or_else(|e| e.into_inner())
                            .ids
                            .get(d)
                            .copied();
                        if let Some(n) = n {
                            probe(n);
                        }
                    }
                    None => {
                        let count =
                            self.domains.read().unwrap_or_else(|e| e.into_inner()).values.len();
                        for d in 0..count as u32 {
                            probe(d);
                        }
                    }
                }
            }
            (None, Some((addr, len, lengths))) => {
                for l in std::iter::once(len).chain(lengths.iter().copied().filter(|l| *l < len)) {
                    match v6_key(network(addr, l), l) {
                        V6Key::Short(k) => self
                            .v6
                            .shard(fold128(k))
                            .read()
                            .unwrap_or_else(|e| e.into_inner())
                            .each(&k, |e| pick.offer(e)),
                        V6Key::Long(k) => self
                            .v6_long
                            .shard(fold128(k.0))
                            .read()
                            .unwrap_or_else(|e| e.into_inner())
                            .each(&k, |e| pick.offer(e)),
                    }
                }
            }
            _ => return Discovered::Unknown,
        }
        pick.answer()
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

    fn v4_binding(ix: &UeAddressIndex, id: u32) -> Indexed {
        let ip = Ipv4Addr::from(0x0A00_0000 + id);
        let json = format!(r#"{{"ipv4Addr":"{ip}","pcfDiamHost":"p","pcfDiamRealm":"r"}}"#);
        ix.indexed(&format!("b{id}"), json.as_bytes()).expect("a binding")
    }

    /// Every table's room (capacity), documents included.
    fn room(ix: &UeAddressIndex) -> usize {
        let v4: usize = ix.v4.shards.iter().map(|s| s.read().unwrap().single.capacity()).sum();
        let docs = ix.docs.as_ref().unwrap();
        v4 + docs.shards.iter().map(|s| s.read().unwrap().capacity()).sum::<usize>()
    }

    #[test]
    fn a_loaded_index_does_not_grow_under_steady_churn() {
        let ix = UeAddressIndex::with_documents();
        let n = 20_000u32;
        for id in 0..n {
            ix.load_one(&v4_binding(&ix, id), 1);
        }
        ix.set_ready();
        for s in &ix.v4.shards {
            let s = s.read().unwrap();
            assert!(s.single.capacity() >= 2 * s.single.len(), "a shard left more than half full");
        }
        let loaded = room(&ix);
        // Twenty replacements per binding, a new key each time, the count steady: tables left
        // more than half full double after ~13 (docs/BENCHMARKS.md, "Session s31").
        for id in n..21 * n {
            ix.remove(&v4_binding(&ix, id - n));
            ix.insert(&v4_binding(&ix, id), 2);
        }
        assert_eq!(ix.len().0, n as usize);
        assert!(room(&ix) <= loaded, "room {loaded} at load, {} after churn", room(&ix));
    }

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

    /// A binding as the store hands it to an index that keeps documents.
    fn stored(ix: &UeAddressIndex, id: &str, json: &str) -> Indexed {
        ix.indexed(id, json.as_bytes()).expect(json)
    }

    fn found(json: &str) -> Discovered {
        Discovered::Found(Bytes::copy_from_slice(json.as_bytes()))
    }

    #[test]
    fn discovery_answers_the_newest_document_that_passes_the_filter() {
        let ix = UeAddressIndex::with_documents();
        let ip: Ipv4Addr = "10.1.2.3".parse().unwrap();
        let old = r#"{"ipv4Addr":"10.1.2.3","dnn":"internet","snssai":{"sst":1,"sd":"00000a"},"supi":"imsi-001010000000001","pcfFqdn":"a.example"}"#;
        let new = r#"{"ipv4Addr":"10.1.2.3","ipDomain":"d1","dnn":"ims","snssai":{"sst":1},"gpsi":"msisdn-3361000001","pcfFqdn":"b.example"}"#;
        ix.insert(&stored(&ix, "old", old), 100);
        ix.insert(&stored(&ix, "new", new), 200);
        let none = Filter::default();
        assert_eq!(ix.discover(Some((ip, None)), None, none), Discovered::Unknown, "not loaded");
        ix.set_ready();
        assert_eq!(ix.discover(Some((ip, None)), None, none), found(new));
        assert_eq!(ix.discover(Some((ip, Some("d1"))), None, none), found(new));
        assert_eq!(ix.discover(Some((ip, Some(""))), None, none), found(old));
        assert_eq!(ix.discover(Some((ip, Some("d2"))), None, none), Discovered::None);
        let f = |dnn, snssai, supi, gpsi| Filter { dnn, snssai, supi, gpsi };
        let cases = [
            (f(Some("internet"), None, None, None), found(old)),
            (f(Some("ims"), Some((1, "")), None, None), found(new)),
            (f(None, Some((1, "00000a")), Some("imsi-001010000000001"), None), found(old)),
            (f(None, Some((1, "00000b")), None, None), Discovered::None),
            (f(None, None, None, Some("msisdn-3361000001")), found(new)),
            (f(Some("internet"), None, None, Some("msisdn-3361000001")), Discovered::None),
        ];
        for (filter, want) in cases {
            assert_eq!(ix.discover(Some((ip, None)), None, filter), want, "{filter:?}");
        }
        assert_eq!(ix.discover(None, None, none), Discovered::Unknown, "no address");
        let v6: Ipv6Addr = "2001:db8::1".parse().unwrap();
        assert_eq!(
            ix.discover(Some((ip, None)), Some((v6, 128, &LENGTHS)), none),
            Discovered::Unknown,
            "two addresses: the store's AND"
        );
        ix.remove(&stored(&ix, "new", new));
        assert_eq!(ix.discover(Some((ip, None)), None, none), found(old));
        ix.remove(&stored(&ix, "old", old));
        assert_eq!(ix.discover(Some((ip, None)), None, none), Discovered::None);
        assert!(ix.is_empty());
        // An index without documents cannot answer Discovery.
        let plain = UeAddressIndex::new();
        plain.set_ready();
        plain.insert(&stored(&plain, "old", old), 100);
        assert_eq!(plain.discover(Some((ip, None)), None, none), Discovered::Unknown);
    }

    #[test]
    fn discovery_by_ipv6_own_and_additional_prefixes() {
        let ix = UeAddressIndex::with_documents();
        ix.set_ready();
        let doc = r#"{"ipv6Prefix":"2001:db8:1:2::/64","addIpv6Prefixes":["2001:db8:ff::/48"],"dnn":"ims"}"#;
        ix.insert(&stored(&ix, "a", doc), 1);
        let a = |s: &str| s.parse::<Ipv6Addr>().unwrap();
        let none = Filter::default();
        for q in ["2001:db8:1:2::77", "2001:db8:ff:9::1"] {
            assert_eq!(ix.discover(None, Some((a(q), 128, &LENGTHS)), none), found(doc), "{q}");
        }
        let other = Filter { dnn: Some("internet"), ..none };
        assert_eq!(
            ix.discover(None, Some((a("2001:db8:1:2::77"), 128, &LENGTHS)), other),
            Discovered::None
        );
        assert_eq!(
            ix.discover(None, Some((a("2001:db8:1:3::1"), 128, &LENGTHS)), none),
            Discovered::None
        );
    }

    #[test]
    fn an_update_is_never_missing_and_moves_the_binding() {
        let ix = UeAddressIndex::with_documents();
        ix.set_ready();
        let (ip1, ip2): (Ipv4Addr, Ipv4Addr) =
            ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let before = r#"{"ipv4Addr":"10.0.0.1","ipv6Prefix":"2001:db8:1::/64","pcfDiamHost":"p1"}"#;
        let same = r#"{"ipv4Addr":"10.0.0.1","ipv6Prefix":"2001:db8:1::/64","pcfDiamHost":"p2"}"#;
        let moved = r#"{"ipv4Addr":"10.0.0.2","pcfDiamHost":"p2"}"#;
        let none = Filter::default();
        ix.insert(&stored(&ix, "x", before), 5);
        ix.replace(&stored(&ix, "x", before), &stored(&ix, "x", same), 5);
        assert_eq!(ix.discover(Some((ip1, None)), None, none), found(same));
        assert_eq!(ix.find_v4(ip1, None), pcf("p2", ""));
        ix.replace(&stored(&ix, "x", same), &stored(&ix, "x", moved), 5);
        assert_eq!(ix.discover(Some((ip1, None)), None, none), Discovered::None);
        assert_eq!(ix.discover(Some((ip2, None)), None, none), found(moved));
        let v6 = "2001:db8:1::9".parse().unwrap();
        assert_eq!(ix.discover(None, Some((v6, 128, &LENGTHS)), none), Discovered::None);
        assert_eq!(ix.len(), (1, 0));
        ix.remove(&stored(&ix, "x", moved));
        assert!(ix.is_empty());
    }

    #[test]
    fn bindings_whose_ids_hash_alike_are_read_from_the_store() {
        let ix = UeAddressIndex::with_documents();
        ix.set_ready();
        let mut a = stored(&ix, "a", r#"{"ipv4Addr":"10.0.0.1"}"#);
        let mut b = stored(&ix, "b", r#"{"ipv4Addr":"10.0.0.2"}"#);
        let c = stored(&ix, "c", r#"{"ipv4Addr":"10.0.0.3"}"#);
        (a.id, b.id) = (42, 42);
        ix.insert(&a, 1);
        ix.insert(&b, 2);
        ix.insert(&c, 3);
        let none = Filter::default();
        for ip in ["10.0.0.1", "10.0.0.2"] {
            let ip = ip.parse().unwrap();
            assert_eq!(ix.discover(Some((ip, None)), None, none), Discovered::Unknown);
        }
        assert_eq!(
            ix.discover(Some(("10.0.0.3".parse().unwrap(), None)), None, none),
            found(r#"{"ipv4Addr":"10.0.0.3"}"#)
        );
        ix.remove(&a);
        ix.remove(&b);
        assert_eq!(
            ix.discover(Some(("10.0.0.2".parse().unwrap(), None)), None, none),
            Discovered::None
        );
    }

    #[test]
    fn the_load_skips_bindings_written_meanwhile() {
        let ix = UeAddressIndex::with_documents();
        let doc = r#"{"ipv4Addr":"10.0.0.1","pcfFqdn":"new.example"}"#;
        // Written after the index was attached, and in the load's snapshot too.
        ix.insert(&stored(&ix, "w", doc), 1);
        ix.load_one(&stored(&ix, "w", r#"{"ipv4Addr":"10.0.0.1","pcfFqdn":"old.example"}"#), 1);
        ix.set_ready();
        let ip = "10.0.0.1".parse().unwrap();
        assert_eq!(ix.discover(Some((ip, None)), None, Filter::default()), found(doc));
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
                doc: None,
            };
            ix.insert(&b, i64::from(i));
        }
        assert_eq!(ix.len(), (10_000, 0));
        assert_eq!(ix.find_v4(Ipv4Addr::from(0x0A00_0000 + 4), None), pcf("pcf1", "r"));
    }
}
