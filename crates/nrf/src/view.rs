//! The consumer view of a profile: what discovery answers and notifications carry. Serialised
//! once per write in pieces (the profile's members, and each service), so an answer is bytes
//! copied, yet can hold only the services a requester asked for and may see, in the form it
//! reads (`nfServices` array or `nfServiceList` map: the Service-Map feature), with priorities
//! lowered for NFs outside the preferred locality.

use bytes::Bytes;
use serde_json::{Map, Value};

use crate::allowed::Allowed;
use crate::models;

/// How a consumer wants services: the array of Rel-15, or the map of the Service-Map feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServiceForm {
    Array,
    Map,
}

/// Service-Map is feature 6 of Nnrf_NFDiscovery (TS 29.510 §6.2.9) and feature 1 of
/// Nnrf_NFManagement (§6.1.9).
pub const DISC_SERVICE_MAP: u32 = 6;
pub const NFM_SERVICE_MAP: u32 = 1;

/// Whether feature `n` (1-based) is set in a SupportedFeatures string (TS 29.571: hexadecimal,
/// the last character holding features 1-4); `None` if it is not hexadecimal.
pub fn feature(features: &str, n: u32) -> Option<bool> {
    if features.is_empty() || !features.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let i = (n - 1) / 4;
    let digit = features.as_bytes().iter().rev().nth(i as usize).copied();
    Some(
        digit.and_then(|d| (d as char).to_digit(16)).is_some_and(|d| d & (1 << ((n - 1) % 4)) != 0),
    )
}

impl ServiceForm {
    /// The form asked for by a SupportedFeatures string in which Service-Map is feature `bit`.
    pub fn asked(features: Option<&str>, bit: u32) -> Option<ServiceForm> {
        let set = feature(features?, bit)?;
        Some(if set { ServiceForm::Map } else { ServiceForm::Array })
    }
}

/// A sink for serialised bytes: a buffer, or a counter to size an answer before writing it.
pub trait Sink {
    fn put(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// Counts what would be written.
#[derive(Default)]
pub struct Len(pub usize);

impl Sink for Len {
    fn put(&mut self, bytes: &[u8]) {
        self.0 += bytes.len();
    }
}

fn put_u32(out: &mut impl Sink, mut n: u32) {
    let mut buf = [0u8; 10];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.put(&buf[i..]);
}

/// One service of the view.
#[derive(Debug)]
pub struct ServiceView {
    pub name: String,
    /// nfServiceStatus is REGISTERED: only such services are discovered.
    pub registered: bool,
    pub allowed: Allowed,
    /// The serviceInstanceId as a JSON string: the key in the map form.
    key_json: Bytes,
    /// Its members but `priority`, from `{` without the closing brace.
    head: Bytes,
    priority: Option<u16>,
}

/// A profile's consumer view (no authorisation attributes), in pieces.
#[derive(Debug)]
pub struct ProfileView {
    /// Its members but `priority` and the services, from `{` without the closing brace.
    head: Bytes,
    priority: Option<u16>,
    pub services: Vec<ServiceView>,
    /// The length of the whole view, per form: most answers hold whole profiles.
    whole_len: [usize; 2],
}

/// A profile's services, both forms merged (see [`models::NfProfile::services`]): the map's
/// values, then the array's entries whose serviceInstanceId the map does not hold.
pub fn merged_services(profile: &Value) -> Vec<&Value> {
    let map = profile.get("nfServiceList").and_then(Value::as_object);
    let mut out: Vec<&Value> = map.into_iter().flat_map(|m| m.values()).collect();
    let listed = |s: &Value| {
        let id = s.get("serviceInstanceId").and_then(Value::as_str);
        map.is_some_and(|m| id.is_some_and(|id| m.contains_key(id)))
    };
    out.extend(
        profile
            .get("nfServices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|s| !listed(s)),
    );
    out
}

/// `v` (an object) serialised without `skip` members and without its closing brace.
fn head_of(v: &Map<String, Value>, skip: &[&str]) -> Bytes {
    let mut m = v.clone();
    for k in skip {
        m.remove(*k);
    }
    let mut out = serde_json::to_vec(&m).unwrap_or_else(|_| b"{}".to_vec());
    out.pop();
    Bytes::from(out)
}

fn priority_of(v: &Value) -> Option<u16> {
    v.get("priority").and_then(Value::as_u64).and_then(|p| u16::try_from(p).ok())
}

/// Priorities are 0..=65535; an adjusted one saturates.
fn adjusted(p: u16, offset: u32) -> u32 {
    (u32::from(p) + offset).min(u32::from(u16::MAX))
}

impl ProfileView {
    /// Built from the profile as stored: authorisation attributes are read, then left out.
    pub fn new(profile: &Value) -> ProfileView {
        let public = models::public_view(profile);
        let empty = Map::new();
        let obj = public.as_object().unwrap_or(&empty);
        let raw = merged_services(profile);
        let services = merged_services(&public)
            .into_iter()
            .zip(raw)
            .filter_map(|(s, raw)| {
                let m = s.as_object()?;
                let id = m.get("serviceInstanceId")?;
                Some(ServiceView {
                    name: m.get("serviceName").and_then(Value::as_str).unwrap_or("").to_owned(),
                    registered: m.get("nfServiceStatus").and_then(Value::as_str)
                        == Some(models::REGISTERED),
                    allowed: Allowed::of(raw),
                    key_json: Bytes::from(serde_json::to_vec(id).ok()?),
                    head: head_of(m, &["priority"]),
                    priority: priority_of(s),
                })
            })
            .collect();
        let mut view = ProfileView {
            head: head_of(obj, &["priority", "nfServices", "nfServiceList"]),
            priority: priority_of(&public),
            services,
            whole_len: [0; 2],
        };
        for form in [ServiceForm::Array, ServiceForm::Map] {
            let mut len = Len::default();
            view.write(&mut len, form, view.all(), 0);
            view.whole_len[form as usize] = len.0;
        }
        view
    }

    /// The length [`ProfileView::write`] would write.
    pub fn len(&self, form: ServiceForm, selected: u64, offset: u32) -> usize {
        if selected == self.all() && offset == 0 {
            return self.whole_len[form as usize];
        }
        let mut len = Len::default();
        self.write(&mut len, form, selected, offset);
        len.0
    }

    /// The mask selecting every service.
    pub fn all(&self) -> u64 {
        match self.services.len() {
            64.. => u64::MAX,
            n => (1u64 << n) - 1,
        }
    }

    /// The largest priority value in the view as written with `offset` (absent counted as 0):
    /// what a later tier's offset starts above.
    pub fn max_priority(&self, selected: u64, offset: u32) -> u32 {
        let own = adjusted(self.priority.unwrap_or(0), offset);
        self.selected(selected)
            .filter_map(|s| s.priority)
            .map(|p| adjusted(p, offset))
            .fold(own, u32::max)
    }

    fn selected(&self, mask: u64) -> impl Iterator<Item = &ServiceView> {
        self.services.iter().enumerate().filter(move |(i, _)| mask & (1 << i) != 0).map(|(_, s)| s)
    }

    /// Writes the view with the `selected` services (a mask over [`ProfileView::services`]) in
    /// `form`, with `offset` added to its priorities (a non-zero offset gives a profile without
    /// one the offset as its priority, so it still ranks after the preferred ones).
    pub fn write(&self, out: &mut impl Sink, form: ServiceForm, selected: u64, offset: u32) {
        out.put(&self.head);
        if self.priority.is_some() || offset > 0 {
            out.put(b",\"priority\":");
            put_u32(out, adjusted(self.priority.unwrap_or(0), offset));
        }
        let mut services = self.selected(selected).peekable();
        if services.peek().is_some() {
            out.put(match form {
                ServiceForm::Array => b",\"nfServices\":[",
                ServiceForm::Map => b",\"nfServiceList\":{",
            });
            for (i, s) in services.enumerate() {
                if i > 0 {
                    out.put(b",");
                }
                if form == ServiceForm::Map {
                    out.put(&s.key_json);
                    out.put(b":");
                }
                out.put(&s.head);
                if let Some(p) = s.priority {
                    out.put(b",\"priority\":");
                    put_u32(out, if offset > 0 { adjusted(p, offset) } else { u32::from(p) });
                }
                out.put(b"}");
            }
            out.put(match form {
                ServiceForm::Array => b"]",
                ServiceForm::Map => b"}",
            });
        }
        out.put(b"}");
    }

    /// The whole view in `form`, as a JSON buffer.
    pub fn to_vec(&self, form: ServiceForm) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len(form, self.all(), 0));
        self.write(&mut out, form, self.all(), 0);
        out
    }
}

/// `profile` (as stored) with its services in `form` only: for NFProfile retrieval, which
/// answers the stored profile, authorisation attributes included.
pub fn in_form(profile: &Value, form: ServiceForm) -> Value {
    let mut v = profile.clone();
    let services: Vec<Value> = merged_services(profile).into_iter().cloned().collect();
    if let Some(m) = v.as_object_mut() {
        m.remove("nfServices");
        m.remove("nfServiceList");
        if !services.is_empty() {
            let (k, list) = match form {
                ServiceForm::Array => ("nfServices", Value::Array(services)),
                ServiceForm::Map => (
                    "nfServiceList",
                    Value::Object(
                        services
                            .into_iter()
                            .filter_map(|s| {
                                let id = s.get("serviceInstanceId")?.as_str()?.to_owned();
                                Some((id, s))
                            })
                            .collect(),
                    ),
                ),
            };
            m.insert(k.to_owned(), list);
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn profile() -> Value {
        json!({"nfInstanceId": "4947a69a-f61b-4bc1-b9da-47c9c5d14b64", "nfType": "AMF",
            "nfStatus": "REGISTERED", "priority": 3, "allowedNfTypes": ["SMF"],
            "nfServiceList": {"a\"1": {"serviceInstanceId": "a\"1", "serviceName": "namf-comm",
                "versions": [], "scheme": "http", "nfServiceStatus": "REGISTERED",
                "priority": 7, "allowedNfTypes": ["SMF"]}},
            "nfServices": [{"serviceInstanceId": "a\"1", "serviceName": "namf-comm",
                "versions": [], "scheme": "http", "nfServiceStatus": "REGISTERED"},
                {"serviceInstanceId": "2", "serviceName": "namf-evts", "versions": [],
                "scheme": "http", "nfServiceStatus": "REGISTERED"}]})
    }

    #[test]
    fn features_are_read_from_the_right_hex_digit() {
        assert_eq!(feature("20", DISC_SERVICE_MAP), Some(true));
        assert_eq!(feature("3F", DISC_SERVICE_MAP), Some(true));
        assert_eq!(feature("120", DISC_SERVICE_MAP), Some(true));
        assert_eq!(feature("1f", DISC_SERVICE_MAP), Some(false));
        assert_eq!(feature("0", DISC_SERVICE_MAP), Some(false));
        assert_eq!(feature("1", NFM_SERVICE_MAP), Some(true));
        assert_eq!(feature("zz", 1), None);
        assert_eq!(feature("", 1), None);
    }

    #[test]
    fn both_forms_hold_the_merged_services_without_authorisation_attributes() {
        let v = ProfileView::new(&profile());
        assert_eq!(v.services.len(), 2);
        assert!(v.services[0].allowed.nf_types.is_some());
        let array: Value = serde_json::from_slice(&v.to_vec(ServiceForm::Array)).unwrap();
        let map: Value = serde_json::from_slice(&v.to_vec(ServiceForm::Map)).unwrap();
        assert_eq!(array["nfServices"].as_array().unwrap().len(), 2);
        assert!(array.get("nfServiceList").is_none() && map.get("nfServices").is_none());
        assert_eq!(map["nfServiceList"]["a\"1"]["priority"], 7);
        assert_eq!(map["nfServiceList"]["2"]["serviceName"], "namf-evts");
        assert!(map.get("allowedNfTypes").is_none());
        assert!(map["nfServiceList"]["a\"1"].get("allowedNfTypes").is_none());
        assert_eq!(map["priority"], 3);
    }

    #[test]
    fn selection_and_offset() {
        let v = ProfileView::new(&profile());
        let mut out = Vec::new();
        v.write(&mut out, ServiceForm::Array, 0b10, 10);
        let w: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(w["priority"], 13);
        assert_eq!(w["nfServices"].as_array().unwrap().len(), 1);
        assert_eq!(w["nfServices"][0]["serviceName"], "namf-evts");
        assert_eq!(v.max_priority(0b11, 10), 17);
        assert_eq!(v.len(ServiceForm::Array, 0b10, 10), out.len());
        for form in [ServiceForm::Array, ServiceForm::Map] {
            assert_eq!(v.len(form, v.all(), 0), v.to_vec(form).len());
        }
        let mut out = Vec::new();
        v.write(&mut out, ServiceForm::Map, 0, 65_535);
        let w: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(w["priority"], 65_535);
        assert!(w.get("nfServiceList").is_none());
    }

    #[test]
    fn retrieval_form_conversion() {
        let arr = in_form(&profile(), ServiceForm::Array);
        assert!(arr.get("nfServiceList").is_none());
        assert_eq!(arr["nfServices"].as_array().unwrap().len(), 2);
        let map = in_form(&profile(), ServiceForm::Map);
        assert!(map.get("nfServices").is_none());
        assert_eq!(map["nfServiceList"].as_object().unwrap().len(), 2);
        assert_eq!(map["allowedNfTypes"], json!(["SMF"]));
    }
}
