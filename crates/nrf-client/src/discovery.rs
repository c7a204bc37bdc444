//! Nnrf_NFDiscovery from the consumer side: the query (TS 29.510 §6.2.3.2.3.1) and the
//! validity-period cache of answers.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// S-NSSAI (TS 29.571): `sst` and optional `sd` (6 hex digits).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Snssai {
    pub sst: u8,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sd: Option<String>,
}

/// An NFDiscover query. `target_nf_type` and `requester_nf_type` are mandatory (an empty
/// `requester_nf_type` is filled with the NF's own type); everything else narrows the search.
/// Parameters without a field here go in `extra`, as `(name, value)` already in their
/// TS 29.510 encoding (JSON text for objects).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct DiscoveryQuery {
    pub target_nf_type: String,
    pub requester_nf_type: String,
    pub service_names: Vec<String>,
    pub requester_nf_instance_fqdn: Option<String>,
    pub target_nf_instance_id: Option<String>,
    pub target_nf_set_id: Option<String>,
    pub snssais: Vec<Snssai>,
    pub dnn: Option<String>,
    pub supi: Option<String>,
    pub gpsi: Option<String>,
    pub group_id_list: Vec<String>,
    pub routing_indicator: Option<String>,
    pub preferred_locality: Option<String>,
    pub limit: Option<u32>,
    /// Largest answer wanted, kilobytes.
    pub max_payload_size: Option<u32>,
    pub extra: Vec<(String, String)>,
}

impl DiscoveryQuery {
    pub fn new(target_nf_type: impl Into<String>, requester_nf_type: impl Into<String>) -> Self {
        DiscoveryQuery {
            target_nf_type: target_nf_type.into(),
            requester_nf_type: requester_nf_type.into(),
            ..Default::default()
        }
    }

    pub fn service(mut self, name: impl Into<String>) -> Self {
        self.service_names.push(name.into());
        self
    }

    pub fn snssai(mut self, sst: u8, sd: Option<&str>) -> Self {
        self.snssais.push(Snssai { sst, sd: sd.map(str::to_owned) });
        self
    }

    pub fn dnn(mut self, dnn: impl Into<String>) -> Self {
        self.dnn = Some(dnn.into());
        self
    }

    pub fn supi(mut self, supi: impl Into<String>) -> Self {
        self.supi = Some(supi.into());
        self
    }

    pub fn limit(mut self, n: u32) -> Self {
        self.limit = Some(n);
        self
    }

    /// The query string (without `?`), parameters in a fixed order so equal queries give equal
    /// strings (it is the cache key). Arrays are comma-separated (form style, explode=false);
    /// `snssais` is JSON (`[{"sst":1,"sd":"000001"}]`); everything percent-encoded.
    pub fn to_query_string(&self) -> String {
        let mut s = form_urlencoded::Serializer::new(String::new());
        s.append_pair("target-nf-type", &self.target_nf_type);
        s.append_pair("requester-nf-type", &self.requester_nf_type);
        if !self.service_names.is_empty() {
            s.append_pair("service-names", &self.service_names.join(","));
        }
        let opt = |s: &mut form_urlencoded::Serializer<String>, k: &str, v: &Option<String>| {
            if let Some(v) = v {
                s.append_pair(k, v);
            }
        };
        opt(&mut s, "requester-nf-instance-fqdn", &self.requester_nf_instance_fqdn);
        opt(&mut s, "target-nf-instance-id", &self.target_nf_instance_id);
        opt(&mut s, "target-nf-set-id", &self.target_nf_set_id);
        if !self.snssais.is_empty() {
            let json = serde_json::to_string(&self.snssais).unwrap_or_default();
            s.append_pair("snssais", &json);
        }
        opt(&mut s, "dnn", &self.dnn);
        opt(&mut s, "supi", &self.supi);
        opt(&mut s, "gpsi", &self.gpsi);
        if !self.group_id_list.is_empty() {
            s.append_pair("group-id-list", &self.group_id_list.join(","));
        }
        opt(&mut s, "routing-indicator", &self.routing_indicator);
        opt(&mut s, "preferred-locality", &self.preferred_locality);
        if let Some(n) = self.limit {
            s.append_pair("limit", &n.to_string());
        }
        if let Some(n) = self.max_payload_size {
            s.append_pair("max-payload-size", &n.to_string());
        }
        for (k, v) in &self.extra {
            s.append_pair(k, v);
        }
        s.finish()
    }
}

/// SearchResult (TS 29.510 §6.2.6.2.2). Profiles stay JSON: each NF reads the attributes it
/// needs (`nf_services`, addresses) and nothing is lost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validity_period: Option<u64>,
    #[serde(default)]
    pub nf_instances: Vec<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl SearchResult {
    /// The nfInstanceIds of the profiles, in the NRF's order.
    pub fn instance_ids(&self) -> impl Iterator<Item = &str> {
        self.nf_instances.iter().filter_map(|p| p.get("nfInstanceId")?.as_str())
    }

    pub fn contains(&self, id: &str) -> bool {
        self.instance_ids().any(|i| i.eq_ignore_ascii_case(id))
    }

    /// The apiRoots of `service` in the profiles, in the NRF's order (a consumer tries the
    /// first and fails over to the next).
    pub fn api_roots(&self, service: &str) -> Vec<String> {
        self.nf_instances.iter().filter_map(|p| service_api_root(p, service)).collect()
    }
}

/// The apiRoot of `service` in an NFProfile: its apiPrefix, else its first IP endpoint, else
/// the service's or the NF's FQDN, else the NF's first IPv4 address. The service is looked up
/// in `nfServiceList` (Rel-16 and later) and `nfServices` (earlier peers, free5GC).
pub fn service_api_root(profile: &Value, service: &str) -> Option<String> {
    let listed = profile.get("nfServiceList").and_then(Value::as_object).into_iter().flatten();
    let array = profile.get("nfServices").and_then(Value::as_array).into_iter().flatten();
    let svc = listed
        .map(|(_, s)| s)
        .chain(array)
        .find(|s| s.get("serviceName").and_then(Value::as_str) == Some(service))?;
    if let Some(prefix) = svc.get("apiPrefix").and_then(Value::as_str) {
        return Some(prefix.trim_end_matches('/').to_owned());
    }
    let scheme = svc.get("scheme").and_then(Value::as_str).unwrap_or("http");
    let default_port = if scheme == "https" { 443 } else { 80 };
    if let Some(ep) = svc.get("ipEndPoints").and_then(Value::as_array).and_then(|a| a.first()) {
        let port = ep.get("port").and_then(Value::as_u64).unwrap_or(default_port);
        if let Some(ip) = ep.get("ipv4Address").and_then(Value::as_str) {
            return Some(format!("{scheme}://{ip}:{port}"));
        }
        if let Some(ip) = ep.get("ipv6Address").and_then(Value::as_str) {
            return Some(format!("{scheme}://[{ip}]:{port}"));
        }
    }
    let fqdn = svc.get("fqdn").or_else(|| profile.get("fqdn")).and_then(Value::as_str);
    if let Some(fqdn) = fqdn {
        return Some(format!("{scheme}://{fqdn}:{default_port}"));
    }
    let ip = profile.get("ipv4Addresses")?.as_array()?.first()?.as_str()?;
    Some(format!("{scheme}://{ip}:{default_port}"))
}

/// How long an answer may be reused: the shorter of `validityPeriod` and `Cache-Control:
/// max-age`, none at all with `no-store` / `no-cache` (or neither hint), capped by `max`.
pub(crate) fn freshness(
    validity_period: Option<u64>,
    cache_control: Option<&str>,
    max: Duration,
) -> Option<Duration> {
    let mut max_age = None;
    if let Some(cc) = cache_control {
        for d in cc.split(',').map(str::trim) {
            let lower = d.to_ascii_lowercase();
            if lower == "no-store" || lower == "no-cache" {
                return None;
            }
            if let Some(v) = lower.strip_prefix("max-age=") {
                max_age = v.trim_matches('"').parse::<u64>().ok();
            }
        }
    }
    let secs = match (validity_period, max_age) {
        (Some(a), Some(b)) => a.min(b),
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => return None,
    };
    (secs > 0).then(|| Duration::from_secs(secs).min(max))
}

struct CacheEntry {
    result: Arc<SearchResult>,
    target_nf_type: String,
    expires: Instant,
    last_used: u64,
}

/// Discovery answers by query string, bounded, least recently used evicted first.
pub(crate) struct DiscoveryCache {
    capacity: usize,
    entries: HashMap<String, CacheEntry>,
    clock: u64,
}

impl DiscoveryCache {
    pub(crate) fn new(capacity: usize) -> Self {
        DiscoveryCache { capacity, entries: HashMap::new(), clock: 0 }
    }

    pub(crate) fn get(&mut self, key: &str, now: Instant) -> Option<Arc<SearchResult>> {
        self.clock += 1;
        let clock = self.clock;
        match self.entries.get_mut(key) {
            Some(e) if e.expires > now => {
                e.last_used = clock;
                Some(e.result.clone())
            }
            Some(_) => {
                self.entries.remove(key);
                None
            }
            None => None,
        }
    }

    pub(crate) fn insert(
        &mut self,
        key: String,
        target_nf_type: &str,
        result: Arc<SearchResult>,
        expires: Instant,
    ) {
        if self.capacity == 0 {
            return;
        }
        self.clock += 1;
        if !self.entries.contains_key(&key) && self.entries.len() >= self.capacity {
            let now = Instant::now();
            self.entries.retain(|_, e| e.expires > now);
            if self.entries.len() >= self.capacity {
                if let Some(lru) =
                    self.entries.iter().min_by_key(|(_, e)| e.last_used).map(|(k, _)| k.clone())
                {
                    self.entries.remove(&lru);
                }
            }
        }
        let entry = CacheEntry {
            result,
            target_nf_type: target_nf_type.to_owned(),
            expires,
            last_used: self.clock,
        };
        self.entries.insert(key, entry);
    }

    /// Drops every answer that lists instance `id`; returns how many.
    pub(crate) fn invalidate_instance(&mut self, id: &str) -> usize {
        let before = self.entries.len();
        self.entries.retain(|_, e| !e.result.contains(id));
        before - self.entries.len()
    }

    /// Drops every answer for target NF type `nf_type` (a new NF of that type may match them).
    pub(crate) fn invalidate_type(&mut self, nf_type: &str) -> usize {
        let before = self.entries.len();
        self.entries.retain(|_, e| !e.target_nf_type.eq_ignore_ascii_case(nf_type));
        before - self.entries.len()
    }

    pub(crate) fn clear(&mut self) {
        self.entries.clear();
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod api_root_tests {
    use super::service_api_root;
    use serde_json::json;

    #[test]
    fn the_api_root_of_a_service_in_either_list() {
        let p = json!({"ipv4Addresses": ["10.0.0.9"], "nfServiceList": {"a": {"serviceName": "nudr-dr",
            "scheme": "http", "ipEndPoints": [{"ipv4Address": "10.0.0.1", "port": 7001}]}}});
        assert_eq!(service_api_root(&p, "nudr-dr").as_deref(), Some("http://10.0.0.1:7001"));
        assert_eq!(service_api_root(&p, "nudr-group-id-map"), None);
        let p = json!({"ipv4Addresses": ["10.0.0.9"], "nfServices": [{"serviceName": "nudr-dr",
            "scheme": "https"}]});
        assert_eq!(service_api_root(&p, "nudr-dr").as_deref(), Some("https://10.0.0.9:443"));
        let p = json!({"nfServices": [{"serviceName": "nudr-dr", "scheme": "http",
            "apiPrefix": "http://udr.example:8080/"}]});
        assert_eq!(service_api_root(&p, "nudr-dr").as_deref(), Some("http://udr.example:8080"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn query_string_encoding() {
        let q = DiscoveryQuery::new("PCF", "AMF")
            .service("npcf-am-policy-control")
            .service("npcf-smpolicycontrol")
            .snssai(1, Some("000001"))
            .dnn("internet")
            .limit(3);
        let s = q.to_query_string();
        assert_eq!(
            s,
            "target-nf-type=PCF&requester-nf-type=AMF\
             &service-names=npcf-am-policy-control%2Cnpcf-smpolicycontrol\
             &snssais=%5B%7B%22sst%22%3A1%2C%22sd%22%3A%22000001%22%7D%5D\
             &dnn=internet&limit=3"
        );
        let back: Vec<(String, String)> =
            form_urlencoded::parse(s.as_bytes()).into_owned().collect();
        assert_eq!(back[3], ("snssais".into(), r#"[{"sst":1,"sd":"000001"}]"#.into()));
    }

    #[test]
    fn freshness_rules() {
        let max = Duration::from_secs(100);
        assert_eq!(freshness(Some(30), None, max), Some(Duration::from_secs(30)));
        assert_eq!(freshness(Some(30), Some("max-age=10"), max), Some(Duration::from_secs(10)));
        assert_eq!(freshness(None, Some("public, max-age=20"), max), Some(Duration::from_secs(20)));
        assert_eq!(freshness(Some(30), Some("no-store"), max), None);
        assert_eq!(freshness(Some(3000), None, max), Some(max));
        assert_eq!(freshness(None, None, max), None);
        assert_eq!(freshness(Some(0), None, max), None);
    }

    fn result(ids: &[&str]) -> Arc<SearchResult> {
        Arc::new(SearchResult {
            validity_period: Some(60),
            nf_instances: ids.iter().map(|i| json!({"nfInstanceId": i})).collect(),
            extra: Map::new(),
        })
    }

    #[test]
    fn cache_lru_expiry_and_invalidation() {
        let now = Instant::now();
        let later = now + Duration::from_secs(60);
        let mut c = DiscoveryCache::new(2);
        c.insert("a".into(), "PCF", result(&["1"]), later);
        c.insert("b".into(), "UDR", result(&["2"]), later);
        assert!(c.get("a", now).is_some()); // b is now least recently used
        c.insert("c".into(), "PCF", result(&["3"]), later);
        assert!(c.get("b", now).is_none());
        assert!(c.get("a", now).is_some() && c.get("c", now).is_some());
        assert!(c.get("a", later).is_none(), "expired");
        assert_eq!(c.len(), 1);
        c.insert("d".into(), "UDR", result(&["3", "4"]), later);
        assert_eq!(c.invalidate_instance("3"), 2);
        c.insert("e".into(), "PCF", result(&[]), later);
        assert_eq!(c.invalidate_type("pcf"), 1);
        assert_eq!(c.len(), 0);
    }
}
