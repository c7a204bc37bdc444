//! The PCF's policy data source: Nudr_DataRepository policy data on the UDR (TS 29.519, N36),
//! read as `subscriber` for the engine. SM decisions read `ues/{supi}/sm-data` (SmPolicyData),
//! AM decisions `ues/{supi}/am-data` (AmPolicyData), UE decisions `ues/{supi}/ue-policy-set`
//! (UePolicySet).
//!
//! The UDR is `[pcf.udr] api_root` when set, else found through the NRF (NFDiscover of a UDR
//! with nudr-dr for the SUPI; the answer cached as the NRF's validity period allows), trying
//! the next UDR found when one cannot be reached. What the PCF does with the answer:
//! - 200: the SmPolicyData is the subscriber's data;
//! - 404: an unknown subscriber. `on_unknown_subscriber = "decide"` decides without data (the
//!   project's rules see no `subscriber`); `"reject"` answers 400 USER_UNKNOWN (TS 29.512
//!   §5.7.3);
//! - no answer (unreachable, timeout, 5xx): `on_unreachable = "fallback"` answers the project's
//!   fallback decision (counted); `"reject"` answers 503 TARGET_NF_NOT_REACHABLE.
//!
//! A subscriber whose SM data was found is subscribed to at the UDR (subs-to-notify) with its
//! first SM association, and unsubscribed with its last; a change notified re-decides its
//! associations (`npcf_smpolicycontrol::redecide`). An AM association whose AmPolicyData was
//! found subscribes to it for its life; a change re-decides it and the AMF gets an UpdateNotify
//! (`npcf_ampolicycontrol::redecide`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::StatusCode;
use nrf_client::NrfClient;
use sbi::client::SbiClient;
use serde_json::Value;

use crate::config::UdrConfig;
use crate::producers::Producers;

/// What a read of a subscriber's policy data found.
#[derive(Debug)]
pub enum Fetched {
    Found(Arc<Value>),
    /// The UDR has no such subscriber (404).
    Unknown,
    /// No UDR answered (why, for the log).
    Unreachable(String),
    /// The data source is off (`[pcf.udr] enabled = false`, or no UDR to ask).
    Off,
}

/// Reads by outcome, for `/metrics`.
#[derive(Debug, Default)]
pub struct Stats {
    pub found: AtomicU64,
    pub unknown: AtomicU64,
    pub unreachable: AtomicU64,
    pub subscribed: AtomicU64,
    pub subscribe_failed: AtomicU64,
    /// PolicyDataChangeNotifications received.
    pub notified: AtomicU64,
    /// SM data answered from the cache, without a UDR read.
    pub cache_hits: AtomicU64,
}

/// A subscriber's SmPolicyData while it has SM sessions and a subscription keeps it true.
struct Cached {
    data: Arc<Value>,
    sessions: u32,
}

pub struct PolicyData {
    config: UdrConfig,
    client: SbiClient,
    udrs: Producers,
    /// SmPolicyData by SUPI, for the life of the subscriber's SM sessions: cached only while the
    /// subscriber is subscribed to at the UDR, changed by its notifications, gone with the last
    /// session (so an update reads no UDR).
    sm_cache: Mutex<HashMap<String, Cached>>,
    pub stats: Stats,
}

impl PolicyData {
    pub fn new(config: UdrConfig, client: SbiClient) -> Result<Self, String> {
        let udrs = Producers::new("UDR", "nudr-dr", config.api_root.as_deref())?;
        Ok(PolicyData {
            config,
            client,
            udrs,
            sm_cache: Mutex::new(HashMap::new()),
            stats: Stats::default(),
        })
    }

    /// Discovery goes through this NRF client (the PCF's own registration).
    pub fn use_nrf(&self, nrf: NrfClient) {
        self.udrs.use_nrf(nrf);
    }

    /// Whether reads are made at all: enabled, with a UDR configured or an NRF to find one.
    pub fn is_on(&self) -> bool {
        self.config.enabled && self.udrs.known()
    }

    pub fn config(&self) -> &UdrConfig {
        &self.config
    }

    /// Subscribes to changes of the subscriber's SmPolicyData (TS 29.519 subs-to-notify), the
    /// notifications to go to `callback`; the subscription's URI, or None (counted, logged: the
    /// subscriber's sessions then see a change at their next update only).
    pub async fn subscribe(&self, supi: &str, callback: &str) -> Option<String> {
        self.subscribe_to(supi, callback, "sm-data").await
    }

    /// Subscribes to changes of `ues/{supi}/{part}` (`sm-data`, `am-data`), as
    /// [`PolicyData::subscribe`].
    pub async fn subscribe_to(&self, supi: &str, callback: &str, part: &str) -> Option<String> {
        let udrs = match self.udrs.find(Some(supi)).await {
            Ok(u) if !u.is_empty() => u,
            _ => return None,
        };
        let root = udrs[0].to_string();
        let body = serde_json::json!({
            "notificationUri": callback,
            "monitoredResourceUris": [format!(
                "{}/nudr-dr/v2/policy-data/ues/{supi}/{part}",
                root.trim_end_matches('/')
            )],
        });
        let sent = self
            .client
            .post("/nudr-dr/v2/policy-data/subs-to-notify")
            .json(&body)
            .max_rsp_time(Duration::from_millis(self.config.timeout_ms))
            .send_with_alternates(&udrs)
            .await;
        match sent {
            Ok(r) if r.status() == StatusCode::CREATED => {
                let loc = r.header("location").map(str::to_string);
                if loc.is_some() {
                    self.stats.subscribed.fetch_add(1, Ordering::Relaxed);
                }
                loc
            }
            other => {
                let why = match other {
                    Ok(r) => format!("the UDR answered {}", r.status()),
                    Err(e) => e.to_string(),
                };
                tracing::warn!(%supi, %why, "no policy data subscription at the UDR");
                self.stats.subscribe_failed.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Removes a subscription [`PolicyData::subscribe`] made (the subscriber's last session
    /// ended).
    pub async fn unsubscribe(&self, uri: &str) {
        let timeout = Duration::from_millis(self.config.timeout_ms);
        if let Err(why) = crate::producers::delete(&self.client, uri, timeout).await {
            tracing::warn!(%uri, %why, "policy data subscription not removed at the UDR");
        }
    }

    /// The subscriber's SmPolicyData: from the cache while it holds it, else from the UDR.
    pub async fn sm_data(&self, supi: &str) -> Fetched {
        let cached = self.cache().get(supi).map(|c| c.data.clone());
        if let Some(data) = cached {
            self.stats.cache_hits.fetch_add(1, Ordering::Relaxed);
            return Fetched::Found(data);
        }
        self.read(supi, "sm-data").await
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, HashMap<String, Cached>> {
        self.sm_cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One more SM session of a subscribed subscriber whose data is `data`: cached from now on.
    /// Called with the subscriber held (collision control), as every cache change is.
    pub fn hold_sm(&self, supi: &str, data: Arc<Value>) {
        let mut c = self.cache();
        let e = c.entry(supi.to_string()).or_insert(Cached { data: data.clone(), sessions: 0 });
        e.data = data;
        e.sessions += 1;
    }

    /// The data of a subscribed subscriber read while it was not cached (after a restart):
    /// cached from now on, as for one session.
    pub fn cache_if_absent(&self, supi: &str, data: Arc<Value>) {
        let mut c = self.cache();
        // Checked first: an update of a cached subscriber (each one, in steady state) allocates
        // no key to find that out.
        if !c.contains_key(supi) {
            c.insert(supi.to_string(), Cached { data, sessions: 1 });
        }
    }

    /// One SM session fewer; the data leaves the cache with the last (or when `gone`: the
    /// subscription was removed).
    pub fn release_sm(&self, supi: &str, gone: bool) {
        let mut c = self.cache();
        if let Some(e) = c.get_mut(supi) {
            e.sessions = e.sessions.saturating_sub(1);
            if e.sessions == 0 || gone {
                c.remove(supi);
            }
        }
    }

    /// A change notified by the UDR: the new data when the notification carries it, else the
    /// cached data is dropped (the next decision reads it).
    pub fn changed_sm(&self, supi: &str, data: Option<Value>) {
        let mut c = self.cache();
        match (c.get_mut(supi), data) {
            (Some(e), Some(d)) => e.data = Arc::new(d),
            (Some(_), None) => {
                c.remove(supi);
            }
            (None, _) => {}
        }
    }

    /// Subscribers whose SM data is cached.
    pub fn cached(&self) -> usize {
        self.cache().len()
    }

    /// The subscriber's AmPolicyData.
    pub async fn am_data(&self, supi: &str) -> Fetched {
        self.read(supi, "am-data").await
    }

    /// The subscriber's UePolicySet (TS 29.519 `ues/{supi}/ue-policy-set`).
    pub async fn ue_policy_set(&self, supi: &str) -> Fetched {
        self.read(supi, "ue-policy-set").await
    }

    /// `ues/{supi}/{part}` of the UDR's policy data.
    async fn read(&self, supi: &str, part: &str) -> Fetched {
        if !self.config.enabled {
            return Fetched::Off;
        }
        let udrs = match self.udrs.find(Some(supi)).await {
            Ok(u) if u.is_empty() => return Fetched::Off,
            Ok(u) => u,
            Err(e) => return self.count(Fetched::Unreachable(e)),
        };
        let path = format!("/nudr-dr/v2/policy-data/ues/{supi}/{part}");
        let sent = self
            .client
            .get(&path)
            .max_rsp_time(Duration::from_millis(self.config.timeout_ms))
            .send_with_alternates(&udrs)
            .await;
        let fetched = match sent {
            Ok(r) if r.status() == StatusCode::OK => match r.json::<Value>() {
                Ok(v) => Fetched::Found(Arc::new(v)),
                Err(e) => {
                    Fetched::Unreachable(format!("the UDR's SmPolicyData does not decode: {e}"))
                }
            },
            Ok(r) if r.status() == StatusCode::NOT_FOUND => Fetched::Unknown,
            Ok(r) => Fetched::Unreachable(format!("the UDR answered {}", r.status())),
            Err(e) => Fetched::Unreachable(e.to_string()),
        };
        self.count(fetched)
    }

    fn count(&self, f: Fetched) -> Fetched {
        let c = match &f {
            Fetched::Found(_) => &self.stats.found,
            Fetched::Unknown => &self.stats.unknown,
            Fetched::Unreachable(why) => {
                tracing::warn!(%why, "policy data not read");
                &self.stats.unreachable
            }
            Fetched::Off => return f,
        };
        c.fetch_add(1, Ordering::Relaxed);
        f
    }
}
