//! The TS 29.510 types the NRF reads. Only the attributes the NRF acts on are typed; every other
//! attribute is kept in a flattened JSON map, so a profile or subscription round-trips whole
//! (an NF's vendor extensions and attributes of later releases included).

use sbi::problem::cause;
use sbi::{InvalidParam, ProblemDetails};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `NFType` values of TS 29.510 Rel-17 (§6.1.6.3.3). The schema allows other strings for
/// forward compatibility; the NRF refuses them, since it could never serve a discovery for them.
pub const NF_TYPES: &[&str] = &[
    "NRF",
    "UDM",
    "AMF",
    "SMF",
    "AUSF",
    "NEF",
    "PCF",
    "SMSF",
    "NSSF",
    "UDR",
    "LMF",
    "GMLC",
    "5G_EIR",
    "SEPP",
    "UPF",
    "N3IWF",
    "AF",
    "UDSF",
    "BSF",
    "CHF",
    "NWDAF",
    "PCSCF",
    "CBCF",
    "HSS",
    "UCMF",
    "SOR_AF",
    "SPAF",
    "MME",
    "SCSAS",
    "SCEF",
    "SCP",
    "NSSAAF",
    "ICSCF",
    "SCSCF",
    "DRA",
    "IMS_AS",
    "AANF",
    "5G_DDNMF",
    "NSACF",
    "MFAF",
    "EASDF",
    "DCCF",
    "MB_SMF",
    "TSCTSF",
    "ADRF",
    "GBA_BSF",
    "CEF",
    "MB_UPF",
    "NSWOF",
    "PKMF",
    "MNPF",
    "SMS_GMSC",
    "SMS_IWMSC",
    "MBSF",
    "MBSTF",
    "PANF",
];

/// Most services one profile may hold: discovery selects a profile's services with one 64-bit
/// mask (real NFs offer a handful; Open5GS's AMF, the largest here, five).
pub const MAX_SERVICES: usize = 64;

pub const REGISTERED: &str = "REGISTERED";
pub const SUSPENDED: &str = "SUSPENDED";
pub const UNDISCOVERABLE: &str = "UNDISCOVERABLE";
pub const NF_STATUSES: &[&str] = &[REGISTERED, SUSPENDED, UNDISCOVERABLE];

pub fn is_nf_type(s: &str) -> bool {
    NF_TYPES.contains(&s)
}

const _: () = assert!(NF_TYPES.len() <= 64, "NF types are bits of a u64 (nf_type_bit)");

/// `s` as one bit of a set of NF types (its index in [`NF_TYPES`]), or `None` for another
/// string: discovery checks a requester's type against a profile's `allowedNfTypes` by one AND
/// instead of comparing strings for every candidate profile and service.
pub fn nf_type_bit(s: &str) -> Option<u64> {
    NF_TYPES.iter().position(|t| *t == s).map(|i| 1u64 << i)
}

/// NFProfile (TS 29.510 §6.1.6.2.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NfProfile {
    pub nf_instance_id: String,
    pub nf_type: String,
    pub nf_status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heart_beat_timer: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locality: Option<String>,
    /// The services as an array (deprecated since Rel-16, still what many NFs send).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nf_services: Option<Vec<NfService>>,
    /// The services as a map keyed by serviceInstanceId (Rel-16+; all Open5GS NFs send only
    /// this). Both forms describe one set: see [`NfProfile::services`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nf_service_list: Option<std::collections::BTreeMap<String, NfService>>,
    /// Everything else, as received.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// NFService (TS 29.510 §6.1.6.2.3), the attributes the NRF reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NfService {
    pub service_instance_id: String,
    pub service_name: String,
    pub versions: Value,
    pub scheme: String,
    pub nf_service_status: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl NfProfile {
    /// The checks TS 29.510 §6.1.6.2.2 and §5.2.2.2.2 ask beyond the JSON types: a UUID instance
    /// id equal to the one in the path, a known NF type and status, an FQDN or an IP address,
    /// service instance ids unique; then the formats of `raw`, this profile as JSON
    /// ([`crate::profile_formats`]). Every failure is listed.
    pub fn validate(&self, path_id: &str, raw: &Value) -> Result<(), ProblemDetails> {
        let mut bad = Vec::new();
        if uuid::Uuid::parse_str(&self.nf_instance_id).is_err() {
            bad.push(InvalidParam::new("/nfInstanceId", "not a UUID"));
        } else if !self.nf_instance_id.eq_ignore_ascii_case(path_id) {
            bad.push(InvalidParam::new(
                "/nfInstanceId",
                "differs from the nfInstanceID in the URI",
            ));
        }
        if !is_nf_type(&self.nf_type) {
            bad.push(InvalidParam::new("/nfType", format!("unknown NF type {}", self.nf_type)));
        }
        if !NF_STATUSES.contains(&self.nf_status.as_str()) {
            bad.push(InvalidParam::new("/nfStatus", format!("unknown status {}", self.nf_status)));
        }
        if self.load.is_some_and(|l| l > 100) {
            bad.push(InvalidParam::new("/load", "must be 0..=100"));
        }
        if self.heart_beat_timer == Some(0) {
            bad.push(InvalidParam::new("/heartBeatTimer", "must be at least 1"));
        }
        let has_address = ["fqdn", "ipv4Addresses", "ipv6Addresses"]
            .iter()
            .any(|k| self.extra.get(*k).is_some_and(|v| !v.is_null()));
        if !has_address {
            bad.push(InvalidParam::new(
                "/fqdn",
                "one of fqdn, ipv4Addresses, ipv6Addresses is required",
            ));
        }
        // Each service's own attributes (status, a map key equal to its serviceInstanceId) are
        // checked with the other formats (profile_formats); here, what spans services.
        if let Some(services) = &self.nf_services {
            for (i, s) in services.iter().enumerate() {
                if services[..i].iter().any(|o| o.service_instance_id == s.service_instance_id) {
                    bad.push(InvalidParam::new(
                        format!("/nfServices/{i}/serviceInstanceId"),
                        "duplicate serviceInstanceId",
                    ));
                }
            }
        }
        for s in self.nf_service_list.iter().flat_map(|m| m.values()) {
            // Both forms are one set: the same instance id may not name two services.
            if let Some(i) = self.nf_services.iter().flatten().position(|o| {
                o.service_instance_id == s.service_instance_id && o.service_name != s.service_name
            }) {
                bad.push(InvalidParam::new(
                    format!("/nfServices/{i}/serviceName"),
                    "differs from the service of the same serviceInstanceId in nfServiceList",
                ));
            }
        }
        if self.services().count() > MAX_SERVICES {
            bad.push(InvalidParam::new(
                "/nfServiceList",
                format!("more than {MAX_SERVICES} services in one profile"),
            ));
        }
        crate::profile_formats::check(raw, &mut bad);
        if bad.is_empty() {
            return Ok(());
        }
        let missing = !has_address;
        let c = if missing && bad.len() == 1 {
            cause::MANDATORY_IE_MISSING
        } else {
            crate::profile_formats::cause(&bad)
        };
        Err(ProblemDetails::invalid_params(c, bad))
    }

    /// Its services: those of `nfServiceList`, then those of `nfServices` whose
    /// serviceInstanceId the map does not hold. NFs send either form or both (TS 29.510
    /// §6.1.6.2.2); every reader of services goes through here so both count the same.
    pub fn services(&self) -> impl Iterator<Item = &NfService> {
        let map = self.nf_service_list.as_ref();
        map.into_iter().flat_map(|m| m.values()).chain(
            self.nf_services
                .iter()
                .flatten()
                .filter(move |s| !map.is_some_and(|m| m.contains_key(&s.service_instance_id))),
        )
    }

    /// Whether one of its services is named `name`.
    pub fn has_service(&self, name: &str) -> bool {
        self.services().any(|s| s.service_name == name)
    }
}

/// SubscriptionData (TS 29.510 §6.1.6.2.16).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionData {
    pub nf_status_notification_uri: String,
    /// Read-only: assigned by the NRF, ignored in a request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscription_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscr_cond: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validity_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub req_notif_events: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notif_condition: Option<NotifCondition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub req_nf_type: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// NotifCondition (TS 29.510 §6.1.6.2.20): JSON pointers into the profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NotifCondition {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub monitored_attributes: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unmonitored_attributes: Vec<String>,
}

pub const NF_REGISTERED: &str = "NF_REGISTERED";
pub const NF_DEREGISTERED: &str = "NF_DEREGISTERED";
pub const NF_PROFILE_CHANGED: &str = "NF_PROFILE_CHANGED";
pub const NOTIFICATION_EVENTS: &[&str] = &[NF_REGISTERED, NF_DEREGISTERED, NF_PROFILE_CHANGED];

/// ChangeItem (TS 29.571 §5.2.4.21), one entry of `profileChanges`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangeItem {
    pub op: &'static str,
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orig_value: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_value: Option<Value>,
}

/// NotificationData (TS 29.510 §6.1.6.2.17).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NotificationData<'a> {
    pub event: &'static str,
    pub nf_instance_uri: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nf_profile: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile_changes: Option<Vec<&'a ChangeItem>>,
}

/// The changes turning `old` into `new`, as ChangeItems with JSON-pointer paths: objects are
/// compared member by member, anything else (arrays included) replaced whole.
pub fn diff(old: &Value, new: &Value) -> Vec<ChangeItem> {
    let mut out = Vec::new();
    diff_into(old, new, &mut String::new(), &mut out);
    out
}

fn diff_into(old: &Value, new: &Value, path: &mut String, out: &mut Vec<ChangeItem>) {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, va) in a {
                let len = path.len();
                push_pointer(path, k);
                match b.get(k) {
                    Some(vb) => diff_into(va, vb, path, out),
                    None => out.push(ChangeItem {
                        op: "REMOVE",
                        path: path.clone(),
                        orig_value: Some(va.clone()),
                        new_value: None,
                    }),
                }
                path.truncate(len);
            }
            for (k, vb) in b {
                if !a.contains_key(k) {
                    let len = path.len();
                    push_pointer(path, k);
                    out.push(ChangeItem {
                        op: "ADD",
                        path: path.clone(),
                        orig_value: None,
                        new_value: Some(vb.clone()),
                    });
                    path.truncate(len);
                }
            }
        }
        (a, b) if a == b => {}
        (a, b) => out.push(ChangeItem {
            op: "REPLACE",
            path: path.clone(),
            orig_value: Some(a.clone()),
            new_value: Some(b.clone()),
        }),
    }
}

fn push_pointer(path: &mut String, key: &str) {
    path.push('/');
    for c in key.chars() {
        match c {
            '~' => path.push_str("~0"),
            '/' => path.push_str("~1"),
            c => path.push(c),
        }
    }
}

/// The attributes a consumer may not see in a notification or a discovery answer (they are the
/// producer's authorisation rules: TS 29.510 NotificationData.nfProfile excludes them).
pub const AUTHORISATION_ATTRIBUTES: &[&str] =
    &["allowedPlmns", "allowedSnpns", "allowedNfTypes", "allowedNfDomains", "allowedNssais"];

/// What only the registering NF writes (writeOnly in the NFProfile schema): never sent to others.
const WRITE_ONLY_ATTRIBUTES: &[&str] = &["nfProfileChangesSupportInd"];

/// The profile as consumers see it: without the authorisation and write-only attributes.
pub fn public_view(profile: &Value) -> Value {
    let mut v = profile.clone();
    if let Some(map) = v.as_object_mut() {
        for k in AUTHORISATION_ATTRIBUTES.iter().chain(WRITE_ONLY_ATTRIBUTES) {
            map.remove(*k);
        }
        let strip = |s: &mut Value| {
            if let Some(s) = s.as_object_mut() {
                for k in AUTHORISATION_ATTRIBUTES {
                    s.remove(*k);
                }
            }
        };
        if let Some(Value::Array(services)) = map.get_mut("nfServices") {
            services.iter_mut().for_each(strip);
        }
        if let Some(Value::Object(services)) = map.get_mut("nfServiceList") {
            services.values_mut().for_each(strip);
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_attributes_round_trip() {
        let v = json!({"nfInstanceId": "4947a69a-f61b-4bc1-b9da-47c9c5d14b64", "nfType": "UDR",
            "nfStatus": "REGISTERED", "fqdn": "udr.example", "udrInfo": {"groupId": "g1"},
            "vendorX": [1, 2], "nfServices": [{"serviceInstanceId": "1",
            "serviceName": "nudr-dr", "scheme": "http",
            "versions": [{"apiVersionInUri": "v2", "apiFullVersion": "2.2.4"}],
            "nfServiceStatus": "REGISTERED", "apiPrefix": "x"}]});
        let p: NfProfile = serde_json::from_value(v.clone()).unwrap();
        assert!(p.validate("4947a69a-f61b-4bc1-b9da-47c9c5d14b64", &v).is_ok());
        assert_eq!(serde_json::to_value(&p).unwrap(), v);
        assert!(p.has_service("nudr-dr"));
    }

    #[test]
    fn validation_lists_every_problem() {
        let raw = json!({"nfInstanceId": "nope", "nfType": "XYZ", "nfStatus": "BUSY"});
        let p: NfProfile = serde_json::from_value(raw.clone()).unwrap();
        let e = p.validate("nope", &raw).unwrap_err();
        assert_eq!(e.invalid_params.len(), 4, "{e:?}");
    }

    #[test]
    fn diff_finds_nested_changes() {
        let a = json!({"nfStatus": "REGISTERED", "load": 1, "x": {"a/b": 1}});
        let b = json!({"nfStatus": "SUSPENDED", "x": {"a/b": 2}, "y": true});
        let d = diff(&a, &b);
        let paths: Vec<(&str, &str)> = d.iter().map(|c| (c.op, c.path.as_str())).collect();
        assert_eq!(
            paths,
            [("REMOVE", "/load"), ("REPLACE", "/nfStatus"), ("REPLACE", "/x/a~1b"), ("ADD", "/y")]
        );
    }
}
