//! The NRF's persistence over [`store::DocumentStore`]: one collection of NF profiles (keyed by
//! nfInstanceId, indexed by nfType) and one of subscriptions (keyed by subscriptionId, expiring
//! at their validityTime). The store is the durable copy; the NRF serves from memory
//! (context.rs) and reads the store at start, and, on MySQL, the keys other instances changed
//! (coherence.rs). On either backend ([`AnyStore`]: the SQLite
//! file, or MariaDB/Galera with `[store] backend = "mysql"`).

use serde_json::Value;
use store::{AnyStore, DocumentData, DocumentStore};

pub const PROFILES: &str = "nrf_profiles";
pub const SUBSCRIPTIONS: &str = "nrf_subscriptions";
const PAGE: usize = 500;

/// The backend the NRF runs on: the one `[store] backend` names. Everything below goes through
/// [`DocumentStore`] only.
pub type Backend = AnyStore;

#[derive(Clone)]
pub struct NrfStore<S: DocumentStore = Backend> {
    inner: S,
}

impl<S: DocumentStore> NrfStore<S> {
    pub fn new(inner: S) -> Self {
        NrfStore { inner }
    }

    pub fn backend(&self) -> &S {
        &self.inner
    }

    /// Stores a profile; returns its new version.
    pub async fn put_profile(&self, id: &str, nf_type: &str, body: Vec<u8>) -> store::Result<u64> {
        let data = DocumentData::new(body).index("nfType", nf_type);
        Ok(self.inner.upsert(PROFILES, id, data).await?.document.version)
    }

    /// Replaces a profile only if it is still at `expected` (the heartbeat audit's suspension:
    /// of two instances' audits, one writes); `VersionMismatch` otherwise.
    pub async fn replace_profile(
        &self,
        id: &str,
        nf_type: &str,
        body: Vec<u8>,
        expected: u64,
    ) -> store::Result<u64> {
        let data = DocumentData::new(body).index("nfType", nf_type);
        Ok(self.inner.replace(PROFILES, id, data, Some(expected)).await?.version)
    }

    /// One document of `collection`: its version and JSON body.
    pub async fn get(&self, collection: &str, id: &str) -> store::Result<Option<(u64, Value)>> {
        let Some(doc) = self.inner.get(collection, id).await? else { return Ok(None) };
        let value = doc.json::<Value>().map_err(|e| {
            store::Error::backend_msg(format!("{collection}/{id} is not JSON: {e}"))
        })?;
        Ok(Some((doc.version, value)))
    }

    /// Removes a profile; `false` when it was not stored.
    pub async fn delete_profile(&self, id: &str) -> store::Result<bool> {
        match self.inner.delete(PROFILES, id, None).await {
            Ok(()) => Ok(true),
            Err(store::Error::NotFound) => Ok(false),
            Err(e) => Err(e),
        }
    }

    pub async fn put_subscription(
        &self,
        id: &str,
        body: Vec<u8>,
        expires_at_ms: u64,
    ) -> store::Result<()> {
        let data = DocumentData::new(body).expires_at(expires_at_ms);
        self.inner.upsert(SUBSCRIPTIONS, id, data).await.map(|_| ())
    }

    pub async fn delete_subscription(&self, id: &str) -> store::Result<bool> {
        match self.inner.delete(SUBSCRIPTIONS, id, None).await {
            Ok(()) => Ok(true),
            Err(store::Error::NotFound) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Every document of `collection`: (id, version, JSON body), read page by page.
    pub async fn load_all(&self, collection: &str) -> store::Result<Vec<(String, u64, Value)>> {
        let mut out = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = self.inner.list(collection, after.as_deref(), PAGE).await?;
            let Some(last) = page.last() else { break };
            after = Some(last.id.clone());
            let full = page.len() == PAGE;
            for doc in page {
                match doc.json::<Value>() {
                    Ok(v) => out.push((doc.id, doc.version, v)),
                    Err(e) => tracing::error!(collection, id = %doc.id, error = %e,
                        "stored document is not JSON; skipped"),
                }
            }
            if !full {
                break;
            }
        }
        Ok(out)
    }
}
