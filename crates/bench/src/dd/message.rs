//! The copies a simulated NF sends: one transaction's envelopes (one per trigger point), built
//! once per source at the reference's message size, with the places of the per-copy fields
//! recorded so that a send patches them in place instead of encoding again.
//!
//! Each NF copies the kind of message it mostly handles in the reference's call models: the SCP
//! an SM policy create it routes (request at its ingress and egress), the SEPP a UE
//! authentication crossing the PLMN border (request and answer, in and out), the NRF a
//! discovery and its SearchResult, the BSF a binding registration, the PCF an SM policy create
//! and its decision. A copy's size is the whole envelope (metadata, HTTP/2 header list, body),
//! as the reference's "metadata list + header list of original 5G HTTP2 header frame +
//! 5G-SBI-Message"; bodies are padded to it with a TS 29.500 §6.6.3 vendor-specific attribute
//! (`vendorSpecific-000000`), which a receiver ignores. A request without a body (a discovery
//! GET) stays as small as it is, and the transaction's other copies carry its share, so the
//! average over the transaction is the size asked for.

use anyhow::{bail, Result};
use bytes::BytesMut;
use dd_client::envelope::{encode_framed, CopyMeta, Protocol, TriggerPoint};

/// Digits of the MSIN patched into a copy (the SUPI is `imsi-<plmn><msin>`).
pub const MSIN_DIGITS: usize = 10;

/// One envelope of a transaction, framed (u32 length first), and where a send patches it.
#[derive(Debug, Clone)]
pub struct EnvelopeTemplate {
    pub trigger: TriggerPoint,
    /// The frame: 4 bytes of length, then the envelope.
    pub framed: Vec<u8>,
    /// Offsets in `framed` of each place holding the subscriber's MSIN digits (the SUPI and the
    /// GPSI in the metadata, the SUPI in the body or path).
    pub msin_at: Vec<usize>,
}

/// Offsets, in a framed envelope, of the fixed fields a send patches (the envelope starts
/// after the 4-byte frame length; crate `dd_client::envelope` gives the layout).
pub const TIMESTAMP_AT: usize = 4 + 4;
pub const SEQUENCE_AT: usize = 4 + 12;
pub const TRANSACTION_AT: usize = 4 + 20;

/// What every copy of a source says about the NF.
pub struct Identity<'a> {
    pub nf_type: &'a str,
    pub nf_instance: &'a str,
    /// `imsi-<plmn>` before the MSIN, and `msisdn-<prefix>` before the GPSI's MSIN.
    pub supi_prefix: &'a str,
    pub gpsi_prefix: &'a str,
}

/// The parts of one copied HTTP/2 message before its size is fixed.
struct Message {
    service: &'static str,
    operation: &'static str,
    method: &'static str,
    path: String,
    peer: &'static str,
    status: u32,
    headers: Vec<(String, String)>,
    /// JSON body, `None` for a request without one; the SUPI written as `{SUPI}`.
    body: Option<String>,
}

/// A placeholder for the MSIN in the strings below: patched per transaction.
const MSIN: &str = "0000000000";

/// The transaction's envelopes, averaging `message_bytes` each.
pub fn transaction(
    id: &Identity,
    triggers: &[TriggerPoint],
    message_bytes: usize,
) -> Result<Vec<EnvelopeTemplate>> {
    let supi = format!("{}{MSIN}", id.supi_prefix);
    let messages: Vec<Message> =
        triggers.iter().map(|t| message(id.nf_type, *t, &supi)).collect::<Result<_>>()?;
    // The natural size of each copy, then the padding that brings the bodies to the average.
    let natural: Vec<usize> = messages
        .iter()
        .zip(triggers)
        .map(|(m, t)| encode(id, *t, m, 0).map(|e| e.framed.len() - 4))
        .collect::<Result<_>>()?;
    let budget = message_bytes * triggers.len();
    let fixed: usize = natural.iter().sum();
    let padded = messages.iter().filter(|m| m.body.is_some()).count();
    if padded == 0 {
        bail!(
            "{} copies at {:?}: none carries a body to bring them to {message_bytes} B",
            id.nf_type,
            triggers.iter().map(|t| t.as_str()).collect::<Vec<_>>()
        );
    }
    if fixed > budget {
        bail!(
            "{} copies of {message_bytes} B: the messages alone take {} B on average",
            id.nf_type,
            fixed / triggers.len()
        );
    }
    // The padding attribute costs its name and quotes besides its value.
    let pad_overhead = r#","vendorSpecific-000000":"""#.len();
    let mut left = budget - fixed;
    let mut out = Vec::with_capacity(triggers.len());
    let mut bodies = padded;
    for (m, t) in messages.iter().zip(triggers) {
        let pad = match m.body {
            Some(_) => {
                let share = left / bodies;
                left -= share;
                bodies -= 1;
                share
            }
            None => 0,
        };
        if pad > 0 && pad < pad_overhead {
            bail!(
                "{} copies of {message_bytes} B: too close to the messages' own size to pad",
                id.nf_type
            );
        }
        let e = encode(id, *t, m, pad)?;
        out.push(e);
    }
    let total: usize = out.iter().map(|e| e.framed.len() - 4).sum();
    debug_assert_eq!(total, budget);
    Ok(out)
}

/// Encodes one copy whose body is padded by `pad` bytes (0: none), recording the MSIN places.
fn encode(
    id: &Identity,
    trigger: TriggerPoint,
    m: &Message,
    pad: usize,
) -> Result<EnvelopeTemplate> {
    let gpsi = format!("{}{MSIN}", id.gpsi_prefix);
    let supi = format!("{}{MSIN}", id.supi_prefix);
    let body = m.body.as_ref().map(|b| {
        let b = b.replace("{SUPI}", &supi);
        match pad {
            0 => b,
            _ => {
                let filler = pad - r#","vendorSpecific-000000":"""#.len();
                let mut s = b[..b.len() - 1].to_string();
                s.push_str(r#","vendorSpecific-000000":""#);
                s.extend(std::iter::repeat_n('x', filler));
                s.push_str("\"}");
                s
            }
        }
    });
    let meta = CopyMeta {
        trigger,
        protocol: Protocol::Http2,
        timestamp_ns: 0,
        sequence: 0,
        transaction: 0,
        stream_id: 1,
        status: if trigger.is_request() { 0 } else { m.status },
        nf_type: id.nf_type,
        nf_instance: id.nf_instance,
        service: m.service,
        operation: m.operation,
        method: m.method,
        path: &m.path,
        peer: m.peer,
        supi: &supi,
        gpsi: &gpsi,
        session_id: "",
    };
    let headers: Vec<(&[u8], &[u8])> =
        m.headers.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())).collect();
    let mut out = BytesMut::new();
    encode_framed(&meta, headers, body.as_deref().unwrap_or("").as_bytes(), &mut out)?;
    let framed = out.to_vec();
    // Every place the MSIN placeholder follows one of the identities' prefixes.
    let mut msin_at = Vec::new();
    for prefix in [id.supi_prefix, id.gpsi_prefix] {
        let needle = format!("{prefix}{MSIN}");
        let mut from = 0;
        while let Some(at) = find(&framed[from..], needle.as_bytes()) {
            msin_at.push(from + at + prefix.len());
            from += at + needle.len();
        }
    }
    msin_at.sort_unstable();
    Ok(EnvelopeTemplate { trigger, framed, msin_at })
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn request_headers(m: &Message, authority: &str, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut h = vec![
        (":method".to_string(), m.method.to_string()),
        (":scheme".into(), "http".into()),
        (":authority".into(), authority.into()),
        (":path".into(), m.path.clone()),
    ];
    if m.body.is_some() {
        h.push(("content-type".into(), "application/json".into()));
    }
    h.push(("user-agent".into(), "SMF-smf1".into()));
    h.push(("3gpp-sbi-sender-timestamp".into(), "Thu, 26 Nov 2026 06:32:26.123 GMT".into()));
    h.push(("3gpp-sbi-max-rsp-time".into(), "5000".into()));
    h.extend(extra.iter().map(|(n, v)| (n.to_string(), v.to_string())));
    h
}

fn response_headers(status: u32, location: Option<&str>) -> Vec<(String, String)> {
    let mut h = vec![
        (":status".to_string(), status.to_string()),
        ("content-type".into(), "application/json".into()),
    ];
    if let Some(l) = location {
        h.push(("location".into(), l.into()));
    }
    h.push(("date".into(), "Thu, 26 Nov 2026 06:32:26 GMT".into()));
    h
}

const SM_POLICY_CONTEXT: &str = r#"{"supi":"{SUPI}","pduSessionId":5,"pduSessionType":"IPV4","dnn":"internet","notificationUri":"http://smf1.5gc.mnc001.mcc001.3gppnetwork.org/sm-policy-notify/9a1e0c2b","ipv4Address":"10.45.0.17","servingNetwork":{"mcc":"001","mnc":"01"},"ratType":"NR","sliceInfo":{"sst":1,"sd":"000001"},"userLocationInfo":{"nrLocation":{"tai":{"plmnId":{"mcc":"001","mnc":"01"},"tac":"000001"},"ncgi":{"plmnId":{"mcc":"001","mnc":"01"},"nrCellId":"000000010"}}},"suppFeat":"3fff"}"#;

const SM_POLICY_DECISION: &str = r#"{"sessRules":{"SessRule1":{"authSessAmbr":{"uplink":"1000 Mbps","downlink":"2000 Mbps"},"authDefQos":{"5qi":9,"arp":{"priorityLevel":8,"preemptCap":"NOT_PREEMPT","preemptVuln":"PREEMPTABLE"}},"sessRuleId":"SessRule1"}},"pccRules":{"PccRuleDefault":{"flowInfos":[{"flowDescription":"permit out ip from any to assigned","flowDirection":"BIDIRECTIONAL"}],"pccRuleId":"PccRuleDefault","precedence":255}},"policyCtrlReqTriggers":["PLMN_CH","RES_MO_RE"],"supi":"{SUPI}","suppFeat":"3fff"}"#;

const AUTHENTICATION_INFO: &str = r#"{"supiOrSuci":"{SUPI}","servingNetworkName":"5G:mnc001.mcc001.3gppnetwork.org","resynchronizationInfo":null,"traceData":null,"cellCagInfo":[],"n5gcInd":false}"#;

const UE_AUTHENTICATION_CTX: &str = r#"{"authType":"5G_AKA","5gAuthData":{"rand":"3a1c5e9d7f2b4a6c8e0d1f3b5a7c9e1d","hxresStar":"8f2e4a6c0b1d3f5e7a9c1b3d5f7e9a0c","autn":"b7e3f1a9c5d2e8f4a0b6c2d8e4f0a6b1"},"_links":{"5g-aka":{"href":"https://ausf.5gc.mnc001.mcc001.3gppnetwork.org/nausf-auth/v1/ue-authentications/{SUPI}-1/5g-aka-confirmation"}},"servingNetworkName":"5G:mnc001.mcc001.3gppnetwork.org","supi":"{SUPI}"}"#;

const SEARCH_RESULT: &str = r#"{"validityPeriod":3600,"nfInstances":[{"nfInstanceId":"4947a69a-f61b-4bc1-b9da-47c9c5d14b64","nfType":"UDM","nfStatus":"REGISTERED","heartBeatTimer":30,"plmnList":[{"mcc":"001","mnc":"01"}],"ipv4Addresses":["192.0.2.10"],"udmInfo":{"groupId":"udm-grp-1","supiRanges":[{"start":"001010000000000","end":"001019999999999"}]},"nfServices":[{"serviceInstanceId":"nudm-sdm-1","serviceName":"nudm-sdm","versions":[{"apiVersionInUri":"v2","apiFullVersion":"2.2.0"}],"scheme":"http","nfServiceStatus":"REGISTERED","ipEndPoints":[{"ipv4Address":"192.0.2.10","port":8080}]}]}],"searchId":"{SUPI}","nrfSupportedFeatures":"20"}"#;

const PCF_BINDING: &str = r#"{"supi":"{SUPI}","ipv4Addr":"10.45.0.17","ipv6Prefix":"2001:db8:1:17::/64","dnn":"internet","pcfFqdn":"pcf1.5gc.mnc001.mcc001.3gppnetwork.org","pcfIpEndPoints":[{"ipv4Address":"192.0.2.20","port":8080}],"pcfDiamHost":"pcf1.fivecore.local","pcfDiamRealm":"fivecore.local","snssai":{"sst":1,"sd":"000001"},"pcfId":"5a7bd676-ceeb-44bb-95e0-f6a55a328b03","suppFeat":"3f"}"#;

/// The message NF `nf_type` copies at `trigger`, about `supi`.
fn message(nf_type: &str, trigger: TriggerPoint, supi: &str) -> Result<Message> {
    let request = trigger.is_request();
    let mut m = match nf_type {
        // The SCP routes an SM policy create from the SMF to the PCF (model C/D): its ingress
        // and egress copies are the same request; an answer copy carries the decision.
        "SCP" | "PCF" => Message {
            service: "npcf-smpolicycontrol",
            operation: "Npcf_SMPolicyControl_Create",
            method: "POST",
            path: "/npcf-smpolicycontrol/v1/sm-policies".into(),
            peer: "10.0.0.21:43512",
            status: 201,
            headers: Vec::new(),
            body: Some(if request { SM_POLICY_CONTEXT } else { SM_POLICY_DECISION }.into()),
        },
        // A visited AMF's authentication crossing the SEPPs to the home AUSF.
        "SEPP" => Message {
            service: "nausf-auth",
            operation: "Nausf_UEAuthentication_Authenticate",
            method: "POST",
            path: "/nausf-auth/v1/ue-authentications".into(),
            peer: "10.0.0.31:51000",
            status: 201,
            headers: Vec::new(),
            body: Some(if request { AUTHENTICATION_INFO } else { UE_AUTHENTICATION_CTX }.into()),
        },
        "NRF" => Message {
            service: "nnrf-disc",
            operation: "Nnrf_NFDiscovery_NFDiscover",
            method: "GET",
            path: format!(
                "/nnrf-disc/v1/nf-instances?target-nf-type=UDM&requester-nf-type=AMF&supi={supi}"
            ),
            peer: "10.0.0.41:40112",
            status: 200,
            headers: Vec::new(),
            body: (!request).then(|| SEARCH_RESULT.into()),
        },
        "BSF" => Message {
            service: "nbsf-management",
            operation: "Nbsf_Management_Register",
            method: "POST",
            path: "/nbsf-management/v1/pcfBindings".into(),
            peer: "10.0.0.51:38000",
            status: 201,
            headers: Vec::new(),
            body: Some(PCF_BINDING.into()),
        },
        other => bail!("no copied message for NF type {other}"),
    };
    m.headers = if request {
        let authority = match nf_type {
            "SEPP" => "sepp.5gc.mnc001.mcc001.3gppnetwork.org",
            "NRF" => "nrf.5gc.mnc001.mcc001.3gppnetwork.org",
            "BSF" => "bsf.5gc.mnc001.mcc001.3gppnetwork.org",
            _ => "pcf1.5gc.mnc001.mcc001.3gppnetwork.org",
        };
        let extra: &[(&str, &str)] = match nf_type {
            "SCP" => &[
                ("3gpp-sbi-target-apiroot", "http://pcf1.5gc.mnc001.mcc001.3gppnetwork.org:8080"),
                ("via", "2.0 scp1.5gc.mnc001.mcc001.3gppnetwork.org"),
            ],
            "SEPP" => {
                &[("3gpp-sbi-target-apiroot", "https://ausf.5gc.mnc001.mcc001.3gppnetwork.org")]
            }
            _ => &[],
        };
        request_headers(&m, authority, extra)
    } else {
        let location = match m.status {
            201 => Some(match nf_type {
                "SEPP" => "https://ausf.5gc.mnc001.mcc001.3gppnetwork.org/nausf-auth/v1/ue-authentications/0000000001",
                "BSF" => "http://bsf.5gc.mnc001.mcc001.3gppnetwork.org/nbsf-management/v1/pcfBindings/0000000001",
                _ => "http://pcf1.5gc.mnc001.mcc001.3gppnetwork.org/npcf-smpolicycontrol/v1/sm-policies/0000000001",
            }),
            _ => None,
        };
        response_headers(m.status, location)
    };
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use dd_client::envelope::Copy;

    fn id(nf_type: &str) -> Identity<'_> {
        Identity {
            nf_type,
            nf_instance: "11111111-2222-3333-4444-555555555555",
            supi_prefix: "imsi-00101",
            gpsi_prefix: "msisdn-33",
        }
    }

    const ALL: [TriggerPoint; 4] = [
        TriggerPoint::IngressRequest,
        TriggerPoint::EgressRequest,
        TriggerPoint::EgressResponse,
        TriggerPoint::IngressResponse,
    ];

    #[test]
    fn every_nf_and_size_gives_envelopes_averaging_the_size_asked() {
        for nf in super::super::config::NF_TYPES {
            // A discovery request has no body: the NRF's copies need an answer among them.
            let two = if nf == "NRF" { &ALL[2..] } else { &ALL[..2] };
            for (size, triggers) in [(3500, two), (3000, &ALL[..]), (1200, two)] {
                let tx = transaction(&id(nf), triggers, size).unwrap();
                let total: usize = tx.iter().map(|e| e.framed.len() - 4).sum();
                assert_eq!(total, size * triggers.len(), "{nf} {size}");
                for e in &tx {
                    let len = u32::from_be_bytes(e.framed[..4].try_into().unwrap()) as usize;
                    assert_eq!(len + 4, e.framed.len());
                    let c = Copy::decode(Bytes::from(e.framed[4..].to_vec())).unwrap();
                    assert_eq!(c.nf_type(), nf);
                    assert_eq!(c.trigger, e.trigger);
                    assert_eq!(c.supi(), "imsi-001010000000000");
                    assert_eq!(c.gpsi(), "msisdn-330000000000");
                    // A body, when there is one, is JSON naming the subscriber.
                    if !c.body().is_empty() {
                        let v: serde_json::Value = serde_json::from_slice(&c.body()).unwrap();
                        assert!(v.to_string().contains("imsi-001010000000000"), "{nf}");
                    }
                    // The SUPI in the metadata, the GPSI and the SUPI in the body or path.
                    assert!(e.msin_at.len() >= 3, "{nf}: {:?}", e.msin_at);
                    for at in &e.msin_at {
                        assert_eq!(&e.framed[*at..*at + MSIN_DIGITS], MSIN.as_bytes());
                    }
                }
            }
        }
    }

    /// The smallest size of the reference (the BSF's 1,200 B) leaves every NF's messages room
    /// for the padding attribute.
    #[test]
    fn every_message_fits_in_the_smallest_reference_size() {
        for nf in super::super::config::NF_TYPES {
            for t in ALL {
                let m = message(nf, t, "imsi-001010000000000").unwrap();
                let e = encode(&id(nf), t, &m, 0).unwrap();
                assert!(e.framed.len() - 4 <= 1160, "{nf} {t:?}: {} B", e.framed.len() - 4);
            }
        }
    }

    #[test]
    fn a_size_below_the_message_itself_or_nothing_to_pad_is_refused() {
        let e = transaction(&id("NRF"), &ALL[2..], 600).unwrap_err().to_string();
        assert!(e.contains("on average"), "{e}");
        let e = transaction(&id("NRF"), &ALL[..2], 3000).unwrap_err().to_string();
        assert!(e.contains("none carries a body"), "{e}");
    }

    #[test]
    fn a_discovery_request_has_no_body_and_its_answer_carries_the_transaction_size() {
        let tx = transaction(
            &id("NRF"),
            &[TriggerPoint::IngressRequest, TriggerPoint::IngressResponse],
            3000,
        )
        .unwrap();
        let req = Copy::decode(Bytes::from(tx[0].framed[4..].to_vec())).unwrap();
        let rsp = Copy::decode(Bytes::from(tx[1].framed[4..].to_vec())).unwrap();
        assert!(req.body().is_empty() && req.method() == "GET" && req.status == 0);
        assert!(req.path().contains("supi=imsi-001010000000000"));
        assert_eq!(rsp.status, 200);
        assert_eq!(tx[0].framed.len() + tx[1].framed.len() - 8, 6000);
    }
}
