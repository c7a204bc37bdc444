//! The SLF query of discovery (TS 29.510 §5.3.2.2.2): the NRF asks a Subscriber Location
//! Function (Nudr_GroupIDmap, TS 29.504 §5.2.2) which NF group serves a subscriber, then keeps
//! only the profiles of that group.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderValue, StatusCode, Uri};
use serde_json::{json, Value};

use crate::context::Nrf;

/// The Nudr_GroupIDmap service name, by which SLFs are found among registered NFs.
pub const SERVICE: &str = "nudr-group-id-map";
/// The NfGroupIDs resource, up to its query.
const PATH: &str = "/nudr-group-id-map/v1/nf-group-ids?";

pub enum SlfOutcome {
    /// The subscriber's group for the target NF type.
    Group(String),
    /// The SLF knows no group of this type for the subscriber (404, or none in its answer).
    Unknown,
    /// No SLF could be asked or none answered.
    Unavailable(String),
}

/// The subscriber to ask about, when this discovery needs an SLF query: SLF enabled, target
/// type configured, a SUPI or GPSI given and no group-id-list.
pub fn subscriber<'a>(
    nrf: &Nrf,
    target: &str,
    supi: Option<&'a str>,
    gpsi: Option<&'a str>,
    has_groups: bool,
) -> Option<&'a str> {
    let c = &nrf.config.slf;
    if !c.enabled || has_groups || !c.nf_types.iter().any(|t| t == target) {
        return None;
    }
    supi.or(gpsi)
}

pub async fn group_for(nrf: &Nrf, target: &str, subscriber: &str) -> SlfOutcome {
    let Some(client) = nrf.client.get() else {
        return SlfOutcome::Unavailable("the NRF's client is not started".into());
    };
    let roots = slf_roots(nrf);
    if roots.is_empty() {
        return SlfOutcome::Unavailable("no SLF is configured or registered".into());
    }
    let mut path = String::with_capacity(64 + target.len() + subscriber.len());
    path.push_str(PATH);
    let query = form_urlencoded::Serializer::for_suffix(path, PATH.len())
        .append_pair("nf-type", target)
        .append_pair("subscriberId", subscriber)
        .finish();
    let mut req = client
        .get(&query)
        .header(http::header::ACCEPT, HeaderValue::from_static("application/json"))
        .max_rsp_time(Duration::from_millis(nrf.config.slf.timeout_ms));
    if nrf.config.slf.access_token {
        match token(nrf) {
            Ok(t) => req = req.header("authorization", format!("Bearer {t}")),
            Err(e) => return SlfOutcome::Unavailable(e),
        }
    }
    match req.send_with_alternates(&roots).await {
        Ok(r) if r.status() == StatusCode::OK => match group_of(r.body(), target) {
            Ok(Some(g)) => SlfOutcome::Group(g),
            Ok(None) => SlfOutcome::Unknown,
            Err(e) => SlfOutcome::Unavailable(format!(
                "the SLF's answer is not a NfGroupIdMapResult: {e}"
            )),
        },
        Ok(r) if r.status() == StatusCode::NOT_FOUND => SlfOutcome::Unknown,
        Ok(r) => SlfOutcome::Unavailable(format!("the SLF answered {}", r.status())),
        Err(e) => SlfOutcome::Unavailable(e.to_string()),
    }
}

/// The group of `target` in a NfGroupIdMapResult, read in one pass without building a JSON
/// tree (one per UDM discovery). Rel-17 NfGroupIdMapResult is the map itself; SLFs of earlier
/// releases wrap it in `nfGroupIds`, and are still met in the field. A top-level entry wins.
fn group_of(body: &[u8], target: &str) -> Result<Option<String>, serde_json::Error> {
    use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};

    struct Seek<'t> {
        target: &'t str,
        nested: bool,
    }
    /// What a key of the map is, told from the text as read (no String per key).
    enum Key {
        Target,
        Wrapper,
        Other,
    }
    impl<'de> DeserializeSeed<'de> for &Seek<'_> {
        type Value = Key;
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Key, D::Error> {
            d.deserialize_str(self)
        }
    }
    impl<'de> Visitor<'de> for &Seek<'_> {
        type Value = Key;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a key")
        }
        fn visit_str<E: serde::de::Error>(self, k: &str) -> Result<Key, E> {
            Ok(if k == self.target {
                Key::Target
            } else if k == "nfGroupIds" && !self.nested {
                Key::Wrapper
            } else {
                Key::Other
            })
        }
    }
    impl<'de> DeserializeSeed<'de> for Seek<'_> {
        type Value = Option<String>;
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_map(self)
        }
    }
    impl<'de> Visitor<'de> for Seek<'_> {
        type Value = Option<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a NfGroupIdMapResult object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let (mut direct, mut wrapped) = (None, None);
            while let Some(key) = map.next_key_seed(&self)? {
                match key {
                    // A group id is a string; anything else names no group.
                    Key::Target => {
                        direct = match map.next_value::<serde_json::Value>()? {
                            serde_json::Value::String(g) => Some(g),
                            _ => None,
                        }
                    }
                    Key::Wrapper => {
                        wrapped = map.next_value_seed(Seek { target: self.target, nested: true })?
                    }
                    Key::Other => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            Ok(direct.or(wrapped))
        }
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let group = Seek { target, nested: false }.deserialize(&mut de)?;
    de.end()?;
    Ok(group)
}

/// Configured SLFs, else the apiRoots of registered NFs offering Nudr_GroupIDmap (kept by the
/// index, rebuilt when such a profile is written).
fn slf_roots(nrf: &Nrf) -> Arc<[Uri]> {
    match &nrf.slf_api_roots {
        Some(configured) => configured.clone(),
        None => nrf.read_index().slf_roots().clone(),
    }
}

/// The apiRoot of a profile's Nudr_GroupIDmap service: its apiPrefix, else its first IP
/// endpoint, else the service or NF FQDN, else the NF's first IPv4 address.
pub fn api_root(profile: &Value) -> Option<Uri> {
    api_root_text(profile)?.parse().ok()
}

fn api_root_text(profile: &Value) -> Option<String> {
    let service =
        crate::view::merged_services(profile).into_iter().find(|s| s["serviceName"] == SERVICE)?;
    if let Some(prefix) = service["apiPrefix"].as_str() {
        return Some(prefix.trim_end_matches('/').to_owned());
    }
    let scheme = service["scheme"].as_str().unwrap_or("http");
    let default_port = if scheme == "https" { 443 } else { 80 };
    if let Some(ep) = service["ipEndPoints"].as_array().and_then(|a| a.first()) {
        let port = ep["port"].as_u64().unwrap_or(default_port);
        if let Some(ip) = ep["ipv4Address"].as_str() {
            return Some(format!("{scheme}://{ip}:{port}"));
        }
        if let Some(ip) = ep["ipv6Address"].as_str() {
            return Some(format!("{scheme}://[{ip}]:{port}"));
        }
    }
    if let Some(fqdn) = service["fqdn"].as_str().or(profile["fqdn"].as_str()) {
        return Some(format!("{scheme}://{fqdn}:{default_port}"));
    }
    let ip = profile["ipv4Addresses"].as_array()?.first()?.as_str()?;
    Some(format!("{scheme}://{ip}:{default_port}"))
}

/// The NRF's own token for Nudr_GroupIDmap, minted locally and cached until a minute before
/// it expires: asking ourselves over HTTP would only add latency.
fn token(nrf: &Nrf) -> Result<String, String> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mut cached = nrf.slf_token.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((t, exp)) = cached.as_ref() {
        if *exp > now + 60 {
            return Ok(t.clone());
        }
    }
    let signer = nrf.token_signer.get().ok_or("the token signing key is not loaded")?;
    let me = nrf.instance_id.get().map_or("", String::as_str);
    let exp = now + nrf.config.access_token.expiry_secs;
    let t = signer.sign(&json!({
        "iss": me, "sub": me, "aud": "UDR", "scope": SERVICE, "exp": exp, "iat": now,
    }))?;
    *cached = Some((t.clone(), exp));
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::group_of;

    #[test]
    fn group_of_reads_both_forms() {
        let g = |b: &str| group_of(b.as_bytes(), "UDM");
        assert_eq!(g(r#"{"AUSF":"a-1","UDM":"udm-grp-0"}"#).unwrap().as_deref(), Some("udm-grp-0"));
        assert_eq!(g(r#"{"nfGroupIds":{"UDM":"u\u0031"}}"#).unwrap().as_deref(), Some("u1"));
        assert_eq!(g(r#"{"UDM":"d","nfGroupIds":{"UDM":"w"}}"#).unwrap().as_deref(), Some("d"));
        assert_eq!(g(r#"{"AUSF":"a-1","x":[1,{"UDM":"no"}]}"#).unwrap(), None);
        assert_eq!(g(r#"{"UDM":7}"#).unwrap(), None);
        assert!(g(r#"["UDM"]"#).is_err());
        assert!(g(r#"{"UDM":"a"} x"#).is_err());
        assert!(g("").is_err());
    }
}
