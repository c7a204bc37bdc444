//! The NRF's state: the in-memory profile index every discovery is served from, the
//! subscriptions, the store handle and the notifier.
//!
//! Locks: the index and the subscription table are `std::sync::RwLock`s held only for map
//! operations, never across an `.await`. Writes to one NF instance are serialised by one of
//! [`WRITE_STRIPES`] async mutexes (by hash of the id), so a store write and the index update
//! that follows it cannot be reordered against a concurrent write to the same instance, while
//! writes to different instances still reach the store together (group commit).

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use sbi::SbiRequest;
use serde_json::Value;

use crate::config::NrfConfig;
use crate::models::{self, NfProfile};
use crate::nnrf_disc::DiscInfo;
use crate::notify::Notifier;
use crate::slf;
use crate::store::NrfStore;
use crate::subscriptions::Subscription;
use crate::view::ProfileView;

const WRITE_STRIPES: usize = 64;

/// One registered NF instance, immutable once built: a write replaces the whole entry.
#[derive(Debug)]
pub struct Entry {
    /// The index key: the nfInstanceId in lower case.
    pub key: String,
    pub profile: NfProfile,
    /// The profile as stored and answered by NFProfile retrieval.
    pub value: Value,
    /// The consumer view (no authorisation attributes) serialised once, in pieces, so a
    /// discovery answer is assembled from bytes rather than re-encoded per request.
    pub view: ProfileView,
    /// What discovery matches on, extracted once.
    pub disc: DiscInfo,
    /// Store version, the ETag.
    pub version: u64,
    /// Last heartbeat (or write), ms since the epoch; updated in place by heartbeats.
    pub last_seen_ms: AtomicU64,
    /// A heartbeat was taken since the stamps were last written to the database (MySQL, for
    /// the other instances' audits: [`crate::coherence`]).
    pub heard: AtomicBool,
}

impl Entry {
    pub fn new(key: String, profile: NfProfile, value: Value, version: u64) -> Entry {
        let view = ProfileView::new(&value);
        let disc = DiscInfo::from_profile(&value);
        Entry {
            key,
            profile,
            value,
            view,
            disc,
            version,
            last_seen_ms: AtomicU64::new(now_ms()),
            heard: AtomicBool::new(false),
        }
    }

    pub fn last_seen(&self) -> u64 {
        self.last_seen_ms.load(Ordering::Relaxed)
    }

    pub fn touch(&self) {
        self.last_seen_ms.store(now_ms(), Ordering::Relaxed);
        self.heard.store(true, Ordering::Relaxed);
    }
}

#[derive(Default)]
pub struct Index {
    by_id: HashMap<String, Arc<Entry>>,
    /// Per NF type, sorted by key: what discovery and NFList scan.
    by_type: HashMap<String, Vec<Arc<Entry>>>,
    /// The apiRoots of the REGISTERED NFs offering Nudr_GroupIDmap, ordered by instance id:
    /// every SLF query needs them, and they change only when such a profile is written.
    slf_roots: Arc<[http::Uri]>,
    /// Bumped by every insert and removal: what [`crate::answers`] keys its bodies on.
    generation: u64,
}

impl Index {
    pub fn get(&self, key: &str) -> Option<&Arc<Entry>> {
        self.by_id.get(key)
    }

    pub fn of_type(&self, nf_type: &str) -> &[Arc<Entry>] {
        self.by_type.get(nf_type).map_or(&[], Vec::as_slice)
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub fn all(&self) -> impl Iterator<Item = &Arc<Entry>> {
        self.by_id.values()
    }

    /// Changes with every insert and removal.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The registered SLFs' apiRoots (see [`crate::slf`]).
    pub fn slf_roots(&self) -> &Arc<[http::Uri]> {
        &self.slf_roots
    }

    /// Inserts or replaces; returns the previous entry.
    pub fn insert(&mut self, e: Arc<Entry>) -> Option<Arc<Entry>> {
        let slf_changed = e.profile.has_service(slf::SERVICE);
        let old = self.detach(&e.key);
        let list = self.by_type.entry(e.profile.nf_type.clone()).or_default();
        let pos = list.partition_point(|x| x.key < e.key);
        list.insert(pos, e.clone());
        self.by_id.insert(e.key.clone(), e);
        if slf_changed || old.as_ref().is_some_and(|o| o.profile.has_service(slf::SERVICE)) {
            self.rebuild_slf_roots();
        }
        old
    }

    pub fn remove(&mut self, key: &str) -> Option<Arc<Entry>> {
        let old = self.detach(key)?;
        if old.profile.has_service(slf::SERVICE) {
            self.rebuild_slf_roots();
        }
        Some(old)
    }

    fn detach(&mut self, key: &str) -> Option<Arc<Entry>> {
        // Also on a plain insert (nothing detached): a new entry changes answers too.
        self.generation += 1;
        let old = self.by_id.remove(key)?;
        if let Some(list) = self.by_type.get_mut(&old.profile.nf_type) {
            list.retain(|x| x.key != key);
        }
        Some(old)
    }

    fn rebuild_slf_roots(&mut self) {
        let mut slfs: Vec<&Arc<Entry>> = self
            .by_id
            .values()
            .filter(|e| {
                e.profile.nf_status == models::REGISTERED && e.profile.has_service(slf::SERVICE)
            })
            .collect();
        slfs.sort_unstable_by(|a, b| a.key.cmp(&b.key));
        self.slf_roots = slfs.into_iter().filter_map(|e| slf::api_root(&e.value)).collect();
    }
}

/// Shared by every handler and background task.
pub struct Nrf {
    pub config: NrfConfig,
    pub store: NrfStore,
    pub index: RwLock<Index>,
    pub subscriptions: RwLock<HashMap<String, Arc<Subscription>>>,
    pub notifier: Notifier,
    /// `http` or `https`, for apiRoots taken from the request.
    pub scheme: &'static str,
    /// The bound address, the apiRoot of last resort (set once the port is bound).
    pub local_authority: std::sync::OnceLock<String>,
    /// The NRF's own nfInstanceId (the `iss` of its access tokens), set at start.
    pub instance_id: std::sync::OnceLock<String>,
    /// The client for calls the NRF makes while serving (SLF, peer NRFs), set at start.
    pub client: std::sync::OnceLock<sbi::client::SbiClient>,
    /// The NRF's own token for the SLF and its expiry (unix seconds).
    pub slf_token: std::sync::Mutex<Option<(String, u64)>>,
    /// The key signing access tokens, loaded at start.
    pub token_signer: std::sync::OnceLock<crate::nnrf_token::TokenSigner>,
    /// SearchResult bodies of the current index generation.
    pub answers: crate::answers::AnswerCache,
    /// `slf.api_roots` parsed once; `None` when none is configured (registered SLFs are used).
    pub slf_api_roots: Option<Arc<[http::Uri]>>,
    /// `forwarding.peers` parsed once.
    pub forwarding_peers: Arc<[http::Uri]>,
    /// `plmn_list` as discovery compares PLMNs.
    pub serving_plmns: Vec<crate::allowed::Plmn>,
    write_stripes: Vec<tokio::sync::Mutex<()>>,
}

impl Nrf {
    pub fn new(
        config: NrfConfig,
        store: NrfStore,
        notifier: Notifier,
        scheme: &'static str,
    ) -> Nrf {
        let parse = |roots: &[String]| -> Arc<[http::Uri]> {
            roots.iter().filter_map(|r| r.parse().ok()).collect()
        };
        let slf_api_roots =
            (!config.slf.api_roots.is_empty()).then(|| parse(&config.slf.api_roots));
        let forwarding_peers = parse(&config.forwarding.peers);
        let serving_plmns = config
            .plmn_list
            .iter()
            .map(|p| (p.mcc.to_ascii_lowercase(), p.mnc.to_ascii_lowercase()))
            .collect();
        Nrf {
            serving_plmns,
            slf_api_roots,
            forwarding_peers,
            answers: Default::default(),
            config,
            store,
            index: RwLock::new(Index::default()),
            subscriptions: RwLock::new(HashMap::new()),
            notifier,
            scheme,
            local_authority: std::sync::OnceLock::new(),
            instance_id: std::sync::OnceLock::new(),
            token_signer: std::sync::OnceLock::new(),
            client: std::sync::OnceLock::new(),
            slf_token: std::sync::Mutex::new(None),
            write_stripes: (0..WRITE_STRIPES).map(|_| tokio::sync::Mutex::new(())).collect(),
        }
    }

    /// Serialises writes to one key (an NF instance or a subscription).
    pub async fn lock_key(&self, key: &str) -> tokio::sync::MutexGuard<'_, ()> {
        let stripe = rustc_hash::FxBuildHasher.hash_one(key) as usize % WRITE_STRIPES;
        self.write_stripes[stripe].lock().await
    }

    pub fn read_index(&self) -> std::sync::RwLockReadGuard<'_, Index> {
        self.index.read().unwrap_or_else(|e| e.into_inner())
    }

    pub fn write_index(&self) -> std::sync::RwLockWriteGuard<'_, Index> {
        self.index.write().unwrap_or_else(|e| e.into_inner())
    }

    pub fn entry(&self, key: &str) -> Option<Arc<Entry>> {
        self.read_index().get(key).cloned()
    }

    pub fn read_subscriptions(
        &self,
    ) -> std::sync::RwLockReadGuard<'_, HashMap<String, Arc<Subscription>>> {
        self.subscriptions.read().unwrap_or_else(|e| e.into_inner())
    }

    pub fn write_subscriptions(
        &self,
    ) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Arc<Subscription>>> {
        self.subscriptions.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The apiRoot consumers reach us at: configured, else the request's authority.
    pub fn api_root(&self, req: Option<&SbiRequest>) -> String {
        sbi::api_root(
            self.config.api_root.as_deref(),
            self.scheme,
            req,
            self.local_authority.get().map(String::as_str),
        )
    }

    /// Loads the stored profiles and subscriptions into memory (at start).
    pub async fn load(&self) -> Result<(usize, usize), store::Error> {
        let profiles = self.store.load_all(crate::store::PROFILES).await?;
        let mut n = 0;
        {
            let mut index = self.write_index();
            for (id, version, value) in profiles {
                match serde_json::from_value::<NfProfile>(value.clone()) {
                    Ok(p) => {
                        index.insert(Arc::new(Entry::new(id, p, value, version)));
                        n += 1;
                    }
                    Err(e) => {
                        tracing::error!(%id, error = %e, "stored profile unreadable; skipped")
                    }
                }
            }
        }
        let subs = self.store.load_all(crate::store::SUBSCRIPTIONS).await?;
        let now = now_ms();
        let mut m = 0;
        {
            let mut table = self.write_subscriptions();
            for (id, _, value) in subs {
                match Subscription::from_stored(value) {
                    Ok(s) if s.expires_ms > now => {
                        table.insert(id, Arc::new(s));
                        m += 1;
                    }
                    Ok(_) => {}
                    Err(e) => tracing::error!(%id, error = %e, "stored subscription unreadable"),
                }
            }
        }
        Ok((n, m))
    }
}

pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}
