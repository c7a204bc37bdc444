//! LDAP as a subscriber data source (`[pcf.ldap]`), the reference's 3.1.1 PCRF: a Gx session's
//! CCR-I looks its subscriber up in a directory (one search), and the attributes read are in
//! the engine's `subscriber` (`subscriber.ldap.<attribute>`, or where `map` puts them) beside
//! the UDR's policy data. N7 sessions read it too with `n7 = true`.
//!
//! - [`config`] is `[pcf.ldap]` and the filter template;
//! - [`pool`] is the bounded pool of bound connections the searches go through.
//!
//! The profile is cached per subscriber for the life of the sessions that read it, as the UDR's
//! SM data is: a CCR-U (or the subscriber's second session) searches nothing, the last
//! session's end drops it. The directory has no change notification, so a profile changed in
//! LDAP is seen by the subscriber's sessions set up after its current ones have ended (or after
//! a restart, which empties the cache).

pub mod config;
pub mod pool;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use serde_json::{Map, Value};

pub use config::LdapConfig;
use pool::{Entry, Pool, Reason};

/// What a lookup found.
#[derive(Debug)]
pub enum LdapRead {
    /// The subscriber's profile: an object to lay over the engine's `subscriber`.
    Found(Arc<Value>),
    /// No entry matches the filter (or the session lacks an identity the filter names).
    Unknown,
    /// No directory answered in time (why, for the log and the fallback's error).
    Failed(String),
    /// LDAP is off, or not for this session.
    Off,
}

/// Counters, for `/metrics`.
#[derive(Debug, Default)]
pub struct Stats {
    pub found: AtomicU64,
    pub unknown: AtomicU64,
    pub failed: [AtomicU64; 4],
    pub cache_hits: AtomicU64,
    /// Lookups that matched more than one entry (the first was used).
    pub ambiguous: AtomicU64,
}

/// A subscriber's profile and the sessions (policy ids) that read it.
struct Cached {
    data: Arc<Value>,
    sessions: HashSet<String>,
}

pub struct Ldap {
    config: Arc<LdapConfig>,
    pool: Pool,
    cache: Mutex<HashMap<String, Cached>>,
    pub stats: Stats,
    /// Seconds per directory lookup (waiting for a connection, connecting, searching).
    latency: Histogram,
}

impl Ldap {
    pub fn new(config: LdapConfig) -> Self {
        let config = Arc::new(config);
        Ldap {
            pool: Pool::new(config.clone()),
            config,
            cache: Mutex::new(HashMap::new()),
            stats: Stats::default(),
            // 100 µs .. ~3.3 s.
            latency: Histogram::new(exponential_buckets(0.0001, 2.0, 16)),
        }
    }

    pub fn config(&self) -> &LdapConfig {
        &self.config
    }

    /// Whether a session with this context reads LDAP: a Gx session (its context has `gx`)
    /// always, an N7 one with `n7 = true`.
    pub fn applies(&self, context: &Value) -> bool {
        self.config.enabled && (context.get("gx").is_some() || self.config.n7)
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, HashMap<String, Cached>> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The profile of `supi`, whose session context is `context`: from the cache while one of
    /// its sessions holds it, else one search.
    pub async fn read(&self, supi: &str, context: &Value) -> LdapRead {
        if !self.applies(context) {
            return LdapRead::Off;
        }
        if let Some(c) = self.cache().get(supi) {
            self.stats.cache_hits.fetch_add(1, Ordering::Relaxed);
            return LdapRead::Found(c.data.clone());
        }
        let imsi = supi.strip_prefix("imsi-");
        let msisdn =
            context.get("gpsi").and_then(Value::as_str).and_then(|g| g.strip_prefix("msisdn-"));
        let filter = config::render(&self.config.filter, |name| match name {
            "imsi" => imsi,
            "msisdn" => msisdn,
            _ => Some(supi),
        });
        let filter = match filter {
            Ok(Some(f)) => f,
            // The template was checked at start; a session without the identity it names has
            // no entry to find.
            Ok(None) | Err(_) => {
                tracing::debug!(%supi, "no identity for the LDAP filter: unknown subscriber");
                self.stats.unknown.fetch_add(1, Ordering::Relaxed);
                return LdapRead::Unknown;
            }
        };
        let started = Instant::now();
        let result = self.pool.search(&filter).await;
        self.latency.observe(started.elapsed().as_secs_f64());
        match result {
            Ok(Some((entry, n))) => {
                if n > 1 {
                    self.stats.ambiguous.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(%supi, %filter, "several LDAP entries match: the first is used");
                }
                self.stats.found.fetch_add(1, Ordering::Relaxed);
                LdapRead::Found(Arc::new(profile(&self.config, entry)))
            }
            Ok(None) => {
                self.stats.unknown.fetch_add(1, Ordering::Relaxed);
                LdapRead::Unknown
            }
            Err(f) => {
                let i = Reason::ALL.iter().position(|r| *r == f.reason).unwrap_or(0);
                self.stats.failed[i].fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%supi, reason = f.reason.name(), why = %f.why, "LDAP lookup failed");
                LdapRead::Failed(f.why)
            }
        }
    }

    /// Session `policy_id` of `supi` was stored having decided with `data`: the profile stays
    /// cached while it lives. Called with the subscriber held, as every cache change is.
    pub fn keep(&self, supi: &str, policy_id: &str, data: Arc<Value>) {
        let mut c = self.cache();
        let e =
            c.entry(supi.to_string()).or_insert_with(|| Cached { data, sessions: HashSet::new() });
        // Checked first: an update of a session the cache knows (each one in steady state)
        // allocates nothing.
        if !e.sessions.contains(policy_id) {
            e.sessions.insert(policy_id.to_string());
        }
    }

    /// Session `policy_id` of `supi` ended: the profile goes with the subscriber's last one.
    pub fn release(&self, supi: &str, policy_id: &str) {
        let mut c = self.cache();
        if let Some(e) = c.get_mut(supi) {
            e.sessions.remove(policy_id);
            if e.sessions.is_empty() {
                c.remove(supi);
            }
        }
    }

    /// Subscribers whose profile is cached.
    pub fn cached(&self) -> usize {
        self.cache().len()
    }

    /// `pcf_ldap_*` on `/metrics`.
    pub fn register(self: &Arc<Self>, r: &mut Registry) {
        r.register(
            "pcf_ldap_lookup_duration_seconds",
            "LDAP lookups that went to the directory: waiting for a connection, connecting when none was idle, the search",
            self.latency.clone(),
        );
        r.register_collector(Box::new(LdapCollector(self.clone())));
    }
}

/// The entry's attributes as `config` maps them: each at `ldap.<attribute>` or its `map` path;
/// a string, or an array when the attribute is `multi_valued` or has several values. Values that
/// are not UTF-8 are left out (a rule reads text), as are attributes not configured.
pub fn profile(config: &LdapConfig, entry: Entry) -> Value {
    let mut out = Value::Object(Map::new());
    for (name, values) in entry {
        let Some(attr) = config.attributes.iter().find(|a| a.eq_ignore_ascii_case(&name)) else {
            continue;
        };
        let texts: Vec<Value> = values
            .into_iter()
            .filter_map(|v| String::from_utf8(v).ok().map(Value::String))
            .collect();
        let multi = config.multi_valued.iter().any(|m| m.eq_ignore_ascii_case(attr));
        let value = match texts.len() {
            0 => continue,
            1 if !multi => texts.into_iter().next().unwrap_or(Value::Null),
            _ => Value::Array(texts),
        };
        let path = config
            .map
            .iter()
            .find(|(a, _)| a.eq_ignore_ascii_case(attr))
            .map_or_else(|| format!("ldap.{attr}"), |(_, p)| p.clone());
        put(&mut out, &path, value);
    }
    out
}

fn put(root: &mut Value, path: &str, value: Value) {
    let mut at = root;
    let mut segments = path.split('.').peekable();
    while let Some(seg) = segments.next() {
        if !at.is_object() {
            *at = Value::Object(Map::new());
        }
        let Value::Object(m) = at else { return };
        if segments.peek().is_none() {
            m.insert(seg.to_string(), value);
            return;
        }
        at = m.entry(seg).or_insert_with(|| Value::Object(Map::new()));
    }
}

/// `base` (the UDR's policy data, or nothing) with the LDAP profile laid over it: objects merge
/// member by member, anything else the profile has replaces what `base` had.
pub fn overlay(base: Option<&Value>, profile: &Value) -> Value {
    let mut out = match base {
        Some(v @ Value::Object(_)) => v.clone(),
        _ => Value::Object(Map::new()),
    };
    merge(&mut out, profile);
    out
}

fn merge(into: &mut Value, from: &Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(k) {
                    Some(slot) if slot.is_object() && v.is_object() => merge(slot, v),
                    _ => {
                        a.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (slot, v) => *slot = v.clone(),
    }
}

#[derive(Debug)]
struct LdapCollector(Arc<Ldap>);

impl std::fmt::Debug for Ldap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ldap").field("config", &self.config).finish_non_exhaustive()
    }
}

impl Collector for LdapCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        use prometheus_client::metrics::MetricType;
        let l = &self.0;
        let st = &l.stats;
        let mut e = encoder.encode_descriptor(
            "pcf_ldap_lookups",
            "Subscriber lookups in LDAP, by result (failed: no directory answered in time)",
            None,
            MetricType::Counter,
        )?;
        let failed: u64 = st.failed.iter().map(|n| n.load(Ordering::Relaxed)).sum();
        for (result, n) in [
            ("found", st.found.load(Ordering::Relaxed)),
            ("unknown", st.unknown.load(Ordering::Relaxed)),
            ("failed", failed),
        ] {
            ConstCounter::new(n).encode(e.encode_family(&[("result", result)])?)?;
        }
        let mut e = encoder.encode_descriptor(
            "pcf_ldap_failures",
            "Failed LDAP lookups, by reason",
            None,
            MetricType::Counter,
        )?;
        for (r, n) in Reason::ALL.iter().zip(&st.failed) {
            ConstCounter::new(n.load(Ordering::Relaxed))
                .encode(e.encode_family(&[("reason", r.name())])?)?;
        }
        let ps = &l.pool.stats;
        let mut e = encoder.encode_descriptor(
            "pcf_ldap_connects",
            "LDAP connections opened (and bound), by result",
            None,
            MetricType::Counter,
        )?;
        for (result, n) in [("ok", &ps.connects_ok), ("failed", &ps.connects_failed)] {
            ConstCounter::new(n.load(Ordering::Relaxed))
                .encode(e.encode_family(&[("result", result)])?)?;
        }
        for (name, help, n) in [
            (
                "pcf_ldap_cache_hits",
                "Profiles answered from the per-subscriber cache, without a search",
                &st.cache_hits,
            ),
            ("pcf_ldap_ambiguous", "Lookups whose filter matched several entries", &st.ambiguous),
        ] {
            let c = ConstCounter::new(n.load(Ordering::Relaxed));
            c.encode(encoder.encode_descriptor(name, help, None, c.metric_type())?)?;
        }
        for (name, help, n) in [
            (
                "pcf_ldap_connections",
                "LDAP connections open now (at most pool_size)",
                ps.open.load(Ordering::Relaxed) as i64,
            ),
            (
                "pcf_ldap_cached_subscribers",
                "Subscribers whose LDAP profile is cached (with sessions that read it)",
                l.cached() as i64,
            ),
        ] {
            let g = ConstGauge::new(n);
            g.encode(encoder.encode_descriptor(name, help, None, g.metric_type())?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_entry_becomes_the_profile_its_config_says() {
        let config = LdapConfig {
            attributes: vec![
                "pcrfClass".into(),
                "pcrfService".into(),
                "pcrfMaxDownlink".into(),
                "tags".into(),
            ],
            multi_valued: vec!["pcrfService".into()],
            map: [("pcrfMaxDownlink".to_string(), "plan.maxDl".to_string())].into(),
            ..LdapConfig::default()
        };
        let entry = vec![
            // The directory spells names as its schema does; matched without case.
            ("pcrfclass".to_string(), vec![b"gold".to_vec()]),
            ("pcrfService".to_string(), vec![b"video".to_vec()]),
            ("pcrfMaxDownlink".to_string(), vec![b"50000000".to_vec()]),
            ("tags".to_string(), vec![b"a".to_vec(), b"b".to_vec(), vec![0xff]]),
            ("userPassword".to_string(), vec![b"x".to_vec()]),
        ];
        assert_eq!(
            profile(&config, entry),
            json!({"ldap": {"pcrfClass": "gold", "pcrfService": ["video"], "tags": ["a", "b"]},
                   "plan": {"maxDl": "50000000"}})
        );
    }

    #[test]
    fn the_profile_is_laid_over_the_policy_data() {
        let udr = json!({"smPolicySnssaiData": {"1": {}}, "plan": {"name": "p1", "maxDl": "1"}});
        let ldap = json!({"ldap": {"pcrfClass": "gold"}, "plan": {"maxDl": "2"}});
        assert_eq!(
            overlay(Some(&udr), &ldap),
            json!({"smPolicySnssaiData": {"1": {}}, "plan": {"name": "p1", "maxDl": "2"},
                   "ldap": {"pcrfClass": "gold"}})
        );
        assert_eq!(overlay(None, &ldap), ldap);
    }

    #[test]
    fn the_cache_lives_as_long_as_the_sessions_that_read_it() {
        let l = Ldap::new(LdapConfig::default());
        let d = Arc::new(json!({"ldap": {}}));
        l.keep("imsi-1", "gx:a", d.clone());
        l.keep("imsi-1", "gx:b", d.clone());
        l.keep("imsi-1", "gx:b", d);
        l.release("imsi-1", "gx:a");
        assert_eq!(l.cached(), 1);
        l.release("imsi-1", "gx:unrelated");
        assert_eq!(l.cached(), 1);
        l.release("imsi-1", "gx:b");
        assert_eq!(l.cached(), 0);
    }
}
