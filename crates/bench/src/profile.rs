//! NF profiles (TS 29.510 NFProfile) of a given type and pretty-printed size, for preloading and
//! for NFRegister bodies.

use serde_json::{json, Value};

use crate::sched::Rng;

/// The usual services of an NF type.
pub fn default_services(nf_type: &str) -> Vec<String> {
    let s: &[&str] = match nf_type {
        "AMF" => &["namf-comm", "namf-evts", "namf-mt", "namf-loc"],
        "AUSF" => &["nausf-auth"],
        "BSF" => &["nbsf-management"],
        "CHF" => &["nchf-convergedcharging"],
        "GMLC" => &["ngmlc-loc"],
        "LMF" => &["nlmf-loc"],
        "PCF" => &["npcf-am-policy-control", "npcf-smpolicycontrol", "npcf-ue-policy-control"],
        "SMF" => &["nsmf-pdusession", "nsmf-event-exposure"],
        "UDM" => &["nudm-sdm", "nudm-uecm", "nudm-ueau", "nudm-ee"],
        "UDR" => &["nudr-dr"],
        "SMSF" => &["nsmsf-sms"],
        "NEF" => &["nnef-pfdmanagement"],
        "CBCF" => &["ncbcf-warning"],
        _ => &[],
    };
    s.iter().map(|s| s.to_string()).collect()
}

pub struct ProfileSpec<'a> {
    pub nf_type: &'a str,
    pub label: &'a str,
    /// Index within its set: spreads groups, localities, TACs over the instances.
    pub index: usize,
    pub target_size: usize,
    pub services: &'a [String],
    /// `host:port` of the simulator the profile points at.
    pub endpoint: Option<(String, u16)>,
}

fn plmn() -> Value {
    json!({"mcc": "001", "mnc": "01"})
}

fn service(
    nf_type: &str,
    name: &str,
    k: usize,
    endpoint: &Option<(String, u16)>,
    ip: &str,
) -> Value {
    let (addr, port) = endpoint.clone().unwrap_or((ip.to_string(), 8080));
    json!({
        "serviceInstanceId": format!("{name}-{k}"),
        "serviceName": name,
        "versions": [{"apiVersionInUri": "v1", "apiFullVersion": "1.0.0"}],
        "scheme": "http",
        "nfServiceStatus": "REGISTERED",
        "ipEndPoints": [{"ipv4Address": addr, "transport": "TCP", "port": port}],
        "allowedNfTypes": allowed_nf_types(name),
        "priority": 1,
        "capacity": 100,
        "load": 10,
        "fqdn": format!("{}-{k}.{}.5gc.mnc001.mcc001.3gppnetwork.org", name, nf_type.to_ascii_lowercase()),
    })
}

/// The heartBeatTimer the kit's profiles propose. Row C of the NRF mix heartbeats random
/// preloaded instances at the reference's rate, which at a small `--scale` (or between runs on
/// an NRF preloaded once) leaves an instance silent for minutes: with the reference's 30 s the
/// NRF would SUSPEND it and discovery would answer fewer profiles than the call model says. An
/// hour keeps every profile REGISTERED for any run; the kit raises `[nrf] heartbeat_max_secs`
/// to it for an NRF it starts (an NRF grants a proposal above its maximum its own
/// `heartbeat_timer_secs`, 10 s by default), and warns when a running NRF grants less.
pub const HEARTBEAT_TIMER_SECS: u32 = 3600;

/// The NF types a service is offered to (a service's `allowedNfTypes`, which the NRF applies
/// per service): the PCF's policy services go to their one consumer each, as deployed, so a
/// discovery for one of them sees the PCFs serving it and no others (NRF guide Table 4-9: 10
/// PCFs per answer, of 30); the other services to the usual consumers.
pub fn allowed_nf_types(service: &str) -> &'static [&'static str] {
    match service {
        "npcf-smpolicycontrol" => &["SMF"],
        "npcf-am-policy-control" | "npcf-ue-policy-control" => &["AMF"],
        "npcf-policyauthorization" => &["AF", "NEF", "PCF"],
        "npcf-bdtpolicycontrol" => &["NEF"],
        _ => &["AMF", "SMF", "PCF", "NEF", "UDM", "AUSF"],
    }
}

/// AMFs per AMF set: the AMFs of a set share the set's GUAMI (any of them can serve the UEs of
/// another that fails), so a discovery by GUAMI answers the set's AMFs: 6, as the NRF guide's
/// Table 4-9 has for AMF.
pub const AMF_SET_SIZE: usize = 6;

/// SMFs per cluster: a cluster serves one TAC and one PGW-C FQDN, and its first SMF also the
/// `ims` DNN, so a discovery by TAI, by PGW or for `ims` answers 10 SMFs (Table 4-9).
pub const SMF_CLUSTER_SIZE: usize = 10;

/// SUPI range covering the whole generated range (`00101` + 10 digits).
fn supi_ranges() -> Value {
    json!([{"start": "001010000000000", "end": "001019999999999"}])
}

/// A profile; `nfInstanceId` is `id`. Padded with extra service instances (a realistic way for
/// profiles to grow) until its pretty-printed JSON reaches `target_size`.
pub fn build(spec: &ProfileSpec, id: &str, rng: &mut Rng) -> Value {
    let i = spec.index;
    let ip = format!("10.{}.{}.{}", 1 + i / 65536 % 200, i / 256 % 256, i % 256);
    let mut p = json!({
        "nfInstanceId": id,
        "nfType": spec.nf_type,
        "nfStatus": "REGISTERED",
        "heartBeatTimer": HEARTBEAT_TIMER_SECS,
        "plmnList": [plmn()],
        "sNssais": [{"sst": 1, "sd": "000001"}, {"sst": 1, "sd": "000002"}],
        "fqdn": format!("{}-{i}.{}.5gc.mnc001.mcc001.3gppnetwork.org", spec.label.to_ascii_lowercase(), spec.nf_type.to_ascii_lowercase()),
        "ipv4Addresses": [spec.endpoint.as_ref().map_or(ip.clone(), |e| e.0.clone())],
        "priority": 1 + (i % 3) as u16,
        "capacity": 100,
        "load": rng.below(50),
        "locality": format!("site-{}", i % 2),
    });
    let group = |n: usize| format!("{}-grp-{}", spec.nf_type.to_ascii_lowercase(), i % n);
    let obj = p.as_object_mut().unwrap();
    match spec.nf_type {
        "AMF" => {
            let set = i / AMF_SET_SIZE;
            obj.insert(
                "amfInfo".into(),
                json!({
                    "amfSetId": format!("{set:03x}"),
                    "amfRegionId": "01",
                    "guamiList": [{"plmnId": plmn(), "amfId": format!("01{set:04x}")}],
                    "taiList": [{"plmnId": plmn(), "tac": format!("{:06}", i % 9)}],
                }),
            );
        }
        "SMF" => {
            let cluster = i / SMF_CLUSTER_SIZE;
            let dnns = if i.is_multiple_of(SMF_CLUSTER_SIZE) {
                json!([{"dnn": "internet"}, {"dnn": "ims"}])
            } else {
                json!([{"dnn": "internet"}])
            };
            obj.insert(
                "smfInfo".into(),
                json!({
                    "sNssaiSmfInfoList": [{"sNssai": {"sst": 1, "sd": "000001"}, "dnnSmfInfoList": dnns}],
                    "taiList": [{"plmnId": plmn(), "tac": format!("{cluster:06}")}],
                    "pgwFqdn": format!("pgw-{cluster}.epc.mnc001.mcc001.3gppnetwork.org"),
                }),
            );
        }
        "UDM" => {
            obj.insert("udmInfo".into(), json!({"groupId": group(1), "supiRanges": supi_ranges(), "routingIndicators": ["0000"]}));
        }
        "AUSF" => {
            obj.insert("ausfInfo".into(), json!({"groupId": group(1), "supiRanges": supi_ranges(), "routingIndicators": ["0000"]}));
        }
        // An SLF (a UDR serving Nudr_GroupIDmap alone) is in no UDR group: a discovery of the
        // subscription data UDRs of a group does not find it.
        "UDR" if spec.services.iter().all(|s| s == "nudr-group-id-map") => {
            obj.insert("udrInfo".into(), json!({"supiRanges": supi_ranges()}));
        }
        "UDR" => {
            obj.insert(
                "udrInfo".into(),
                json!({"groupId": group(3), "supiRanges": supi_ranges(), "supportedDataSets": ["SUBSCRIPTION", "POLICY", "EXPOSURE", "APPLICATION"]}),
            );
        }
        "PCF" => {
            obj.insert("pcfInfo".into(), json!({"groupId": group(3), "dnnList": ["internet", "ims"], "supiRanges": supi_ranges()}));
        }
        "CHF" => {
            obj.insert("chfInfo".into(), json!({"supiRangeList": supi_ranges()}));
        }
        "BSF" => {
            obj.insert("bsfInfo".into(), json!({"dnnList": ["internet", "ims"]}));
        }
        _ => {}
    }
    let mut services: Vec<Value> = spec
        .services
        .iter()
        .enumerate()
        .map(|(k, s)| service(spec.nf_type, s, k, &spec.endpoint, &ip))
        .collect();
    let base = services.clone();
    set_services(&mut p, &services);
    if base.is_empty() {
        return p;
    }
    let mut k = services.len();
    while serde_json::to_string_pretty(&p).map_or(0, |s| s.len()) < spec.target_size {
        let name = base[k % base.len()]["serviceName"].as_str().unwrap_or("svc").to_string();
        services.push(service(spec.nf_type, &name, k, &spec.endpoint, &ip));
        k += 1;
        set_services(&mut p, &services);
    }
    p
}

fn set_services(p: &mut Value, services: &[Value]) {
    p.as_object_mut().unwrap().insert("nfServices".into(), Value::Array(services.to_vec()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_reach_their_size_and_carry_type_info() {
        let mut rng = Rng::new(1);
        let services = default_services("AMF");
        let spec = ProfileSpec {
            nf_type: "AMF",
            label: "AMF",
            index: 3,
            target_size: 9000,
            services: &services,
            endpoint: None,
        };
        let p = build(&spec, "id-1", &mut rng);
        let len = serde_json::to_string_pretty(&p).unwrap().len();
        assert!((9000..11000).contains(&len), "{len}");
        assert_eq!(p["nfInstanceId"], "id-1");
        assert!(p["amfInfo"]["guamiList"].is_array());
        let slf = vec!["nudr-group-id-map".to_string()];
        let spec = ProfileSpec {
            nf_type: "UDR",
            label: "SLF",
            index: 0,
            target_size: 100,
            services: &slf,
            endpoint: Some(("127.0.0.1".into(), 4000)),
        };
        let p = build(&spec, "id-2", &mut rng);
        assert_eq!(p["nfServices"][0]["ipEndPoints"][0]["port"], 4000);
    }
}
