//! Every NF's message copies through a real Data Director (issue #24): the Data Director, an NRF,
//! a UDR (N36 policy data, SOAP provisioning, Diameter Sh), a BSF (Nbsf, the Rx proxy) and a PCF
//! (N7, Gx, Rx; reading policy data at the UDR and registering bindings at the BSF) run here on
//! 127.0.0.1, each with `[<nf>.copy]` on toward the Data Director, which has an unfiltered TCP
//! feed and a TCP feed of the NRF's copies only, each to a consumer reading the length-framed
//! envelopes. Real requests in the shapes real peers send (an Open5GS AMF's status
//! subscription, whose notification the NRF sends; an Open5GS SMF's profile, discovery and
//! heartbeat; an Open5GS SMF's SmPolicyContextData; a P-GW's CCR-I; a P-CSCF's AAR; an AS's Sh
//! UDR by MSISDN) go in, and the envelopes the consumers get are checked: NF type and
//! instance, trigger points, service and operation, status, SUPI/GPSI/session ids, HTTP/2
//! headers, bodies equal to the bytes on the wire (what the test sent or received, and, between
//! two NFs, what one sent and the other read), timestamps ordered, one copy per message and as
//! many as each NF counted on its /metrics.
//!
//! One test: every component is started once for the test binary, as the copies of one NF
//! (the PCF's egress) are checked against another's (the UDR's and BSF's ingress).

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use dd_client::{Copy, CopyConfig, Protocol, TriggerPoint};
use diameter::builders::vendor_specific_auth_app;
use diameter::dictionary::{base, dcca, gx, nasreq, rx, sh};
use diameter::{
    result_code as rc, ApplicationId, DiameterNode, Message, NodeConfig, PeerConfig, Route,
    RouteAction, VENDOR_3GPP,
};
use sbi::client::{ClientConfig, SbiClient, SbiResponse};
use serde_json::{json, Value};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

const T: Duration = Duration::from_secs(15);

const NRF_ID: &str = "0d1f6c5e-4b0e-4e71-9a51-7c7a2f0c0001";
const UDR_ID: &str = "0d1f6c5e-4b0e-4e71-9a51-7c7a2f0c0002";
const BSF_ID: &str = "0d1f6c5e-4b0e-4e71-9a51-7c7a2f0c0003";
const PCF_ID: &str = "0d1f6c5e-4b0e-4e71-9a51-7c7a2f0c0004";
const SMF_ID: &str = "b81893e0-e942-41f1-be8f-9d0b526de55d";
const AMF_ID: &str = "b8175e3a-e942-41f1-be8f-9d0b526de55d";

const PCF_HOST: &str = "pcf.pcf.example";
const PCF_REALM: &str = "pcf.example";
const BSF_HOST: &str = "bsf.bsf.example";
const BSF_REALM: &str = "bsf.example";
const UDR_HOST: &str = "udr.fivecore.local";
const UDR_REALM: &str = "fivecore.local";
const PGW_HOST: &str = "pgw.epc.example";
const PGW_REALM: &str = "epc.example";
const AF_HOST: &str = "pcscf.ims.example";
const AF_REALM: &str = "ims.example";
const AS_HOST: &str = "as1.as.example";
const AS_REALM: &str = "as.example";

const IMSI: &str = "999700000000001";
const MSISDN: &str = "33600000021";
const UE_IP: Ipv4Addr = Ipv4Addr::new(10, 45, 0, 1);

// === running components ===

/// A component serving on this runtime until [`Running::stop`].
struct Running {
    base: String,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    fn spawn<F, E>(addr: SocketAddr, serve: impl FnOnce(oneshot::Receiver<()>) -> F) -> Running
    where
        F: Future<Output = Result<(), E>> + Send + 'static,
        E: std::fmt::Debug,
    {
        let (stop, rx) = oneshot::channel();
        let served = serve(rx);
        let task = tokio::spawn(async move { served.await.expect("serves and stops cleanly") });
        Running { base: format!("http://{addr}"), stop, task }
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.unwrap();
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

fn store(dir: &Path, name: &str) -> store::SqliteConfig {
    store::SqliteConfig { readers: 1, ..store::SqliteConfig::new(dir.join(name)) }
}

fn nf_client() -> ClientConfig {
    ClientConfig { request_timeout_ms: 2000, ..ClientConfig::default() }
}

fn copying(dd: &Running) -> CopyConfig {
    CopyConfig { enabled: true, uri: dd.base.clone(), ..CopyConfig::default() }
}

/// An address nobody listens on now (the BSF's SBI port, which the PCF must know before the BSF,
/// which must know the PCF's Diameter port, starts).
fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

fn client() -> SbiClient {
    SbiClient::new(&ClientConfig::default()).unwrap()
}

// === the feed consumers ===

/// A TCP feed consumer: each length-framed envelope it reads, decoded, on a channel.
async fn tcp_consumer() -> (SocketAddr, mpsc::UnboundedReceiver<Copy>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            tokio::spawn(read_frames(stream, tx.clone()));
        }
    });
    (addr, rx)
}

async fn read_frames(mut stream: TcpStream, tx: mpsc::UnboundedSender<Copy>) {
    loop {
        let mut len = [0u8; 4];
        if stream.read_exact(&mut len).await.is_err() {
            return;
        }
        let mut buf = vec![0u8; u32::from_be_bytes(len) as usize];
        if stream.read_exact(&mut buf).await.is_err() {
            return;
        }
        let _ = tx.send(Copy::decode(Bytes::from(buf)).expect("the feed sends envelopes"));
    }
}

/// What a consumer has received so far, kept across waits.
struct Feed {
    rx: mpsc::UnboundedReceiver<Copy>,
    got: Vec<Copy>,
}

impl Feed {
    /// Reads until `done` holds for what was received, or fails naming what came.
    async fn until(&mut self, what: &str, done: impl Fn(&[Copy]) -> bool) -> &[Copy] {
        let deadline = tokio::time::Instant::now() + T;
        while !done(&self.got) {
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Ok(Some(c)) => self.got.push(c),
                _ => panic!("{what}: not within {T:?}; got {:#?}", summaries(&self.got)),
            }
        }
        &self.got
    }

    /// Whatever else arrives within a short while.
    async fn settle(&mut self) {
        while let Ok(Some(c)) =
            tokio::time::timeout(Duration::from_millis(700), self.rx.recv()).await
        {
            self.got.push(c);
        }
    }
}

fn summary(c: &Copy) -> String {
    format!(
        "{} #{} {} {:?} tx={} {} {} {} {} status={} supi={} gpsi={} session={}",
        c.nf_type(),
        c.sequence,
        c.trigger.as_str(),
        c.protocol,
        c.transaction,
        c.service(),
        c.operation(),
        c.method(),
        c.path(),
        c.status,
        c.supi(),
        c.gpsi(),
        c.session_id(),
    )
}

fn summaries(copies: &[Copy]) -> Vec<String> {
    copies.iter().map(summary).collect()
}

fn one<'a>(copies: &'a [Copy], what: &str, f: impl Fn(&Copy) -> bool) -> &'a Copy {
    let found: Vec<&Copy> = copies.iter().filter(|c| f(c)).collect();
    assert_eq!(found.len(), 1, "one {what} among {:#?}", summaries(copies));
    found[0]
}

fn of<'a>(copies: &'a [Copy], nf: &str) -> Vec<&'a Copy> {
    copies.iter().filter(|c| c.nf_type() == nf).collect()
}

// === peers ===

/// A Diameter peer of `app` connected to `to_host` at `to`, answering whatever it is sent with
/// 2001.
async fn diameter_peer(
    host: &str,
    realm: &str,
    app: u32,
    to_host: &str,
    to: SocketAddr,
) -> DiameterNode {
    let mut c = NodeConfig::new(host, realm);
    c.applications = vec![ApplicationId::tgpp(app)];
    c.peers = vec![PeerConfig::connect(to_host, to)];
    c.routes = vec![Route::new("*", RouteAction::Relay(vec![to_host.into()]))];
    c.reconnect_min = Duration::from_millis(50);
    c.reconnect_max = Duration::from_millis(200);
    c.request_timeout = Duration::from_secs(5);
    let (h, r) = (host.to_owned(), realm.to_owned());
    let node =
        DiameterNode::builder(c)
            .handler(app, move |req: Message| {
                let (h, r) = (h.clone(), r.clone());
                async move {
                    Message::answer_to(&req).origin(&h, &r).result_code_avp(rc::DIAMETER_SUCCESS)
                }
            })
            .start()
            .await
            .unwrap();
    assert!(node.wait_open(to_host, T).await, "{host} connects to {to_host}");
    node
}

/// An Open5GS v2.8 SMF's NFProfile as it registers it (services only in `nfServiceList`).
fn open5gs_smf_profile() -> Value {
    json!({
        "allowedNfTypes": ["SCP", "AMF", "SMF"],
        "capacity": 100,
        "heartBeatTimer": 10,
        "ipv4Addresses": ["127.0.0.4"],
        "load": 0,
        "nfInstanceId": SMF_ID,
        "nfProfileChangesSupportInd": true,
        "nfServiceList": {
            "b819585c-e942-41f1-be8f-9d0b526de55d": {
                "allowedNfTypes": ["AMF", "SMF"],
                "capacity": 100,
                "ipEndPoints": [{"ipv4Address": "127.0.0.4", "port": 7777}],
                "load": 0,
                "nfServiceStatus": "REGISTERED",
                "priority": 0,
                "scheme": "http",
                "serviceInstanceId": "b819585c-e942-41f1-be8f-9d0b526de55d",
                "serviceName": "nsmf-pdusession",
                "versions": [{"apiFullVersion": "1.0.0", "apiVersionInUri": "v1"}]
            }
        },
        "nfStatus": "REGISTERED",
        "nfType": "SMF",
        "priority": 0,
        "smfInfo": {
            "sNssaiSmfInfoList": [{"dnnSmfInfoList": [{"dnn": "internet"}], "sNssai": {"sst": 1}}],
            "taiList": [{"plmnId": {"mcc": "999", "mnc": "70"}, "tac": "000001"}]
        }
    })
}

/// SmPolicyContextData as Open5GS v2.8's SMF builds it (smf/npcf-build.c).
fn open5gs_sm_context(notify: &str) -> Value {
    json!({
        "supi": format!("imsi-{IMSI}"),
        "gpsi": format!("msisdn-{MSISDN}"),
        "pduSessionId": 1,
        "pduSessionType": "IPV4",
        "dnn": "internet",
        "notificationUri": notify,
        "accessType": "3GPP_ACCESS",
        "ratType": "NR",
        "servingNetwork": {"mcc": "999", "mnc": "70"},
        "userLocationInfo": {"nrLocation": {
            "tai": {"plmnId": {"mcc": "999", "mnc": "70"}, "tac": "000001"},
            "ncgi": {"plmnId": {"mcc": "999", "mnc": "70"}, "nrCellId": "000000010"},
            "ueLocationTimestamp": "2026-11-26T10:00:00.000000Z"}},
        "ueTimeZone": "+00:00",
        "pei": "imeisv-4370816125816151",
        "ipv4Address": UE_IP.to_string(),
        "subsSessAmbr": {"uplink": "1 Gbps", "downlink": "2 Gbps"},
        "subsDefQos": {"5qi": 9, "arp": {"priorityLevel": 8, "preemptCap": "NOT_PREEMPT",
            "preemptVuln": "NOT_PREEMPTABLE"}, "priorityLevel": 8},
        "sliceInfo": {"sst": 1},
        "suppFeat": "4000000"
    })
}

/// The subscriber's SmPolicyData (TS 29.519), one slice and DNN.
fn sm_policy_data() -> Value {
    json!({"smPolicySnssaiData": {"1": {
        "snssai": {"sst": 1},
        "smPolicyDnnData": {"internet": {"dnn": "internet", "subscCats": ["gold"]}}
    }}})
}

const SOAP_NS: &str = "urn:fivecore:udr:provisioning:1";

/// A SOAP CreateShProfile for the subscriber's IMS identities.
fn soap_create_sh_profile() -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
         <soapenv:Envelope xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\" \
         xmlns:udr=\"{SOAP_NS}\"><soapenv:Header/><soapenv:Body><udr:CreateShProfile>\
         <udr:profile><udr:publicIdentity>sip:carol@ims.example</udr:publicIdentity>\
         <udr:msisdn>{MSISDN}</udr:msisdn><udr:imsUserState>REGISTERED</udr:imsUserState>\
         </udr:profile></udr:CreateShProfile></soapenv:Body></soapenv:Envelope>"
    )
}

/// Sends `body` as it is, so the copy's body can be compared with these bytes.
async fn send_raw(
    c: &SbiClient,
    method: http::Method,
    url: &str,
    content_type: &str,
    body: &[u8],
) -> SbiResponse {
    let b = match method {
        http::Method::PUT => c.put(url),
        http::Method::PATCH => c.patch(url),
        http::Method::POST => c.post(url),
        _ => c.get(url),
    };
    let b = if body.is_empty() {
        b
    } else {
        b.header("content-type", content_type).body(Bytes::copy_from_slice(body))
    };
    b.send().await.unwrap()
}

async fn metrics_total(nf: &Running) -> u64 {
    let r = client().get(&nf.url("/metrics")).send().await.unwrap();
    let text = String::from_utf8(r.body().to_vec()).unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("dd_copies_total{")?.split_once("} ")?.1.parse::<f64>().ok())
        .sum::<f64>() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_nfs_copies_reach_the_data_directors_feeds_with_their_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();

    // The Data Director: an unfiltered TCP feed and one of the NRF's copies only.
    let run = dd::RunConfig {
        dd: dd::DdConfig::default(),
        sbi: sbi::ServerConfig::default(),
        client: ClientConfig::default(),
        store: store(d, "dd.db"),
        instance_id: None,
    };
    let bound = dd::bind(run).await.expect("the Data Director starts");
    let dd = Running::spawn(bound.local_addr(), |rx| {
        bound.serve(async move {
            let _ = rx.await;
        })
    });
    let (all_addr, all_rx) = tcp_consumer().await;
    let (nrf_addr, nrf_rx) = tcp_consumer().await;
    let admin = |kind: &str| dd.url(&format!("/dd-admin/v1/{kind}"));
    let r = client()
        .post(&admin("filters"))
        .json(&json!({"name": "nrf", "filter": {"conditions": [{"nf_type": "NRF"}]}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{:?}", r.body());
    for (name, addr, filter) in [("all", all_addr, None), ("nrf-only", nrf_addr, Some("nrf"))] {
        let mut f = json!({"name": name, "start": "earliest",
            "sink": {"type": "tcp", "endpoints": [{"address": addr.to_string()}]}});
        if let Some(x) = filter {
            f["filter"] = json!(x);
        }
        let r = client().post(&admin("feeds")).json(&f).send().await.unwrap();
        assert_eq!(r.status(), 201, "{:?}", r.body());
    }
    let mut all = Feed { rx: all_rx, got: Vec::new() };
    let mut nrf_feed = Feed { rx: nrf_rx, got: Vec::new() };

    // The NFs, each copying to it.
    let run = nrf::RunConfig {
        nrf: nrf::NrfConfig { copy: copying(&dd), ..nrf::NrfConfig::default() },
        sbi: sbi::ServerConfig::default(),
        client: nf_client(),
        store: store(d, "nrf.db"),
        instance_id: Some(NRF_ID.into()),
    };
    let bound = nrf::bind(run).await.expect("the NRF starts");
    let nrf = Running::spawn(bound.local_addr(), |rx| {
        bound.serve(async move {
            let _ = rx.await;
        })
    });

    let mut udr_config = udr::UdrConfig { copy: copying(&dd), ..udr::UdrConfig::default() };
    udr_config.sh.enabled = true;
    udr_config.sh.listen = "127.0.0.1:0".parse().unwrap();
    udr_config.sh.origin_host = UDR_HOST.into();
    udr_config.sh.origin_realm = UDR_REALM.into();
    let run = udr::RunConfig {
        udr: udr_config,
        sbi: sbi::ServerConfig::default(),
        client: nf_client(),
        store: store(d, "udr.db"),
        instance_id: Some(UDR_ID.into()),
    };
    let bound = udr::bind(run).await.expect("the UDR starts");
    let sh_addr = bound.sh_local_addr().expect("Sh enabled");
    let udr = Running::spawn(bound.local_addr(), |rx| {
        bound.serve(async move {
            let _ = rx.await;
        })
    });

    let bsf_sbi = free_addr();
    let run = pcf::RunConfig {
        pcf: pcf::PcfConfig {
            policy: Some(default_policy(&d.join("policy"))),
            diameter: pcf::config::DiameterConfig {
                enabled: true,
                listen: "127.0.0.1:0".parse().unwrap(),
                origin_host: PCF_HOST.into(),
                origin_realm: PCF_REALM.into(),
                ..pcf::config::DiameterConfig::default()
            },
            udr: pcf::config::UdrConfig {
                api_root: Some(udr.base.clone()),
                ..pcf::config::UdrConfig::default()
            },
            bsf: pcf::config::BsfConfig {
                enabled: true,
                api_root: Some(format!("http://{bsf_sbi}")),
                ..pcf::config::BsfConfig::default()
            },
            copy: copying(&dd),
            ..pcf::PcfConfig::default()
        },
        sbi: sbi::ServerConfig::default(),
        client: nf_client(),
        store: store(d, "pcf.db"),
        instance_id: Some(PCF_ID.into()),
    };
    let bound = pcf::bind(run).await.expect("the PCF starts");
    let pcf_diameter = bound.diameter_addr().expect("Diameter on");
    let pcf_ctx = bound.pcf().clone();
    let pcf = Running::spawn(bound.local_addr(), |rx| {
        bound.serve(async move {
            let _ = rx.await;
        })
    });

    let run = bsf::RunConfig {
        bsf: bsf::BsfConfig {
            rx: bsf::config::RxConfig {
                enabled: true,
                listen: "127.0.0.1:0".parse().unwrap(),
                origin_host: BSF_HOST.into(),
                origin_realm: BSF_REALM.into(),
                peers: vec![bsf::config::RxPeer {
                    host: PCF_HOST.into(),
                    addr: pcf_diameter,
                    tls: false,
                }],
                request_timeout_ms: 3000,
                ..bsf::config::RxConfig::default()
            },
            copy: copying(&dd),
            ..bsf::BsfConfig::default()
        },
        sbi: sbi::ServerConfig { listen: bsf_sbi, ..sbi::ServerConfig::default() },
        client: nf_client(),
        store: store(d, "bsf.db"),
        instance_id: Some(BSF_ID.into()),
    };
    let bound = bsf::bind(run).await.expect("the BSF starts");
    let bsf_rx = bound.rx_local_addr().expect("Rx on");
    let bsf = Running::spawn(bound.local_addr(), |rx| {
        bound.serve(async move {
            let _ = rx.await;
        })
    });
    let pcf_node = pcf_ctx.gx.get().expect("the PCF's Diameter node").clone();
    assert!(pcf_node.wait_open(BSF_HOST, T).await, "the BSF's Rx proxy connects to the PCF");

    let c = client();

    // --- NRF: Open5GS's AMF subscribes to SMFs' status, an Open5GS SMF registers (the NRF
    // notifies the AMF), is discovered as Open5GS's AMF asks, heartbeats.
    let mut amf_sink = testkit::sink::Sink::start().await;
    let subscription = json!({"nfStatusNotificationUri": amf_sink.url, "reqNfType": "AMF",
        "reqNfInstanceId": AMF_ID, "subscrCond": {"serviceName": "nsmf-pdusession"},
        "requesterFeatures": "1"});
    let r =
        c.post(&nrf.url("/nnrf-nfm/v1/subscriptions")).json(&subscription).send().await.unwrap();
    assert_eq!(r.status(), 201, "{:?}", r.body());
    let subscription_id = r.header("location").unwrap().rsplit('/').next().unwrap().to_owned();
    let profile = serde_json::to_vec(&open5gs_smf_profile()).unwrap();
    let register_path = format!("/nnrf-nfm/v1/nf-instances/{SMF_ID}");
    let r = send_raw(&c, http::Method::PUT, &nrf.url(&register_path), "application/json", &profile)
        .await;
    assert_eq!(r.status(), 201, "{:?}", r.body());
    let register_answer = r.body().clone();
    let notification = amf_sink.next().await;
    assert_eq!(notification["event"], "NF_REGISTERED");
    let disc_path = "/nnrf-disc/v1/nf-instances?target-nf-type=SMF&requester-nf-type=AMF\
                     &service-names=nsmf-pdusession&requester-features=20";
    let r = c.get(&nrf.url(disc_path)).send().await.unwrap();
    assert_eq!(r.status(), 200, "{:?}", r.body());
    let disc_answer = r.body().clone();
    let heartbeat = br#"[{"op":"replace","path":"/nfStatus","value":"REGISTERED"}]"#;
    let r = send_raw(
        &c,
        http::Method::PATCH,
        &nrf.url(&register_path),
        "application/json-patch+json",
        heartbeat,
    )
    .await;
    let heartbeat_status = r.status().as_u16();
    assert!(matches!(heartbeat_status, 200 | 204), "{heartbeat_status}");

    // --- UDR: the subscriber's SM policy data (N36), their Sh profile over SOAP, an AS's Sh
    // UDR by MSISDN.
    let sm_data = serde_json::to_vec(&sm_policy_data()).unwrap();
    let sm_data_path = format!("/nudr-dr/v2/policy-data/ues/imsi-{IMSI}/sm-data");
    let r = send_raw(&c, http::Method::PUT, &udr.url(&sm_data_path), "application/json", &sm_data)
        .await;
    let sm_data_status = r.status().as_u16();
    assert!(matches!(sm_data_status, 200 | 201 | 204), "{sm_data_status}: {:?}", r.body());
    let soap = soap_create_sh_profile();
    let r = c
        .post(&udr.url("/udr-soap/v1"))
        .header("content-type", "text/xml; charset=utf-8")
        .header("soapaction", format!("\"{SOAP_NS}/CreateShProfile\""))
        .body(Bytes::from(soap.clone()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", String::from_utf8_lossy(r.body()));
    let soap_answer = r.body().clone();
    let as_node = diameter_peer(AS_HOST, AS_REALM, sh::APP_ID, UDR_HOST, sh_addr).await;
    let sh_sid = as_node.new_session_id();
    let udr_req = Message::request(sh::APP_ID, sh::CMD_USER_DATA)
        .session_id_avp(&sh_sid)
        .avp(vendor_specific_auth_app(VENDOR_3GPP, sh::APP_ID))
        .avp(base::AUTH_SESSION_STATE.enumerated(1))
        .origin(AS_HOST, AS_REALM)
        .destination(UDR_REALM, None)
        .avp(sh::USER_IDENTITY.grouped(vec![sh::MSISDN.bytes(udr::sh::tbcd_encode(MSISDN))]))
        .avp(sh::DATA_REFERENCE.enumerated(sh::data_reference::IMS_USER_STATE));
    let uda = as_node.request(udr_req).await.expect("a UDA");
    assert_eq!(uda.result_code(), Some(rc::DIAMETER_SUCCESS), "{uda:?}");

    // --- PCF: an Open5GS SMF's N7 create (the PCF reads the UDR, registers the binding at
    // the BSF), a P-GW's Gx CCR-I, a P-CSCF's AAR through the BSF's Rx proxy.
    let smf_sink = testkit::sink::Sink::start().await;
    let context = serde_json::to_vec(&open5gs_sm_context(&smf_sink.url)).unwrap();
    let n7_path = "/npcf-smpolicycontrol/v1/sm-policies";
    let r = send_raw(&c, http::Method::POST, &pcf.url(n7_path), "application/json", &context).await;
    assert_eq!(r.status(), 201, "{}", String::from_utf8_lossy(r.body()));
    let n7_answer = r.body().clone();
    let sm_policy_id = r.header("location").unwrap().rsplit('/').next().unwrap().to_owned();

    let pgw = diameter_peer(PGW_HOST, PGW_REALM, gx::APP_ID, PCF_HOST, pcf_diameter).await;
    let gx_sid = format!("{PGW_HOST};dd;1");
    let ccr = Message::request(gx::APP_ID, gx::CMD_CREDIT_CONTROL)
        .session_id_avp(&gx_sid)
        .avp(base::AUTH_APPLICATION_ID.u32(gx::APP_ID))
        .origin(PGW_HOST, PGW_REALM)
        .destination(PCF_REALM, None)
        .avp(dcca::CC_REQUEST_TYPE.enumerated(1))
        .avp(dcca::CC_REQUEST_NUMBER.u32(0))
        .avp(dcca::SUBSCRIPTION_ID.grouped(vec![
            dcca::SUBSCRIPTION_ID_TYPE.enumerated(dcca::subscription_id_type::END_USER_IMSI),
            dcca::SUBSCRIPTION_ID_DATA.utf8(IMSI),
        ]))
        .avp(nasreq::FRAMED_IP_ADDRESS.ipv4_octets(Ipv4Addr::new(10, 46, 0, 1)))
        .avp(gx::IP_CAN_TYPE.enumerated(gx::ip_can_type::TGPP_EPS))
        .avp(gx::RAT_TYPE.enumerated(gx::rat_type::EUTRAN))
        .avp(nasreq::CALLED_STATION_ID.utf8("ims"));
    let cca = pgw.request(ccr).await.expect("a CCA");
    assert_eq!(cca.result_code(), Some(rc::DIAMETER_SUCCESS), "{cca:?}");

    let af = diameter_peer(AF_HOST, AF_REALM, rx::APP_ID, BSF_HOST, bsf_rx).await;
    let rx_sid = af.new_session_id();
    let aar = Message::request(rx::APP_ID, rx::CMD_AA)
        .session_id_avp(&rx_sid)
        .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
        .origin(AF_HOST, AF_REALM)
        .destination(BSF_REALM, None)
        .avp(nasreq::FRAMED_IP_ADDRESS.ipv4_octets(UE_IP))
        .avp(dcca::SUBSCRIPTION_ID.grouped(vec![
            dcca::SUBSCRIPTION_ID_TYPE.enumerated(dcca::subscription_id_type::END_USER_E164),
            dcca::SUBSCRIPTION_ID_DATA.utf8(MSISDN),
        ]));
    let aaa = af.request(aar).await.expect("an AAA");
    assert_eq!(aaa.result_code(), Some(rc::DIAMETER_SUCCESS), "{aaa:?}");
    assert_eq!(aaa.origin_host(), Some(PCF_HOST), "the PCF answered through the BSF");

    // --- Everything each NF copied arrives, once: as many as it counted, sequences 0..n.
    let nfs = [
        ("NRF", NRF_ID, &nrf),
        ("UDR", UDR_ID, &udr),
        ("BSF", BSF_ID, &bsf),
        ("PCF", PCF_ID, &pcf),
    ];
    let mut counted = Vec::new();
    for (nf, _, running) in &nfs {
        counted.push((*nf, metrics_total(running).await));
    }
    all.until("every copy counted", |got| {
        counted.iter().all(|(nf, n)| got.iter().filter(|c| c.nf_type() == *nf).count() as u64 >= *n)
    })
    .await;
    all.settle().await;
    let copies = all.got.clone();
    for (nf, id, running) in &nfs {
        let mine = of(&copies, nf);
        let n = metrics_total(running).await;
        assert!(n > 0, "{nf} copied something");
        assert_eq!(mine.len() as u64, n, "{nf}: every copy it counted, once");
        let seqs: Vec<u64> = mine.iter().map(|c| c.sequence).collect();
        assert_eq!(
            seqs,
            (0..n).collect::<Vec<_>>(),
            "{nf}: nothing lost, nothing repeated, in order"
        );
        for x in &mine {
            assert_eq!(x.nf_instance(), *id, "{}", summary(x));
        }
    }
    assert!(copies.iter().all(|c| ["NRF", "UDR", "BSF", "PCF"].contains(&c.nf_type())));

    // Every transaction: one request copy and at most one answer copy, on the same side, with
    // the same method, path, service and operation, the answer no earlier than the request.
    let mut by_tx: BTreeMap<(&str, u64), Vec<&Copy>> = BTreeMap::new();
    for x in &copies {
        by_tx.entry((x.nf_type(), x.transaction)).or_default().push(x);
    }
    for ((nf, tx), xs) in &by_tx {
        let what = format!(
            "{nf} transaction {tx}: {:#?}",
            xs.iter().map(|c| summary(c)).collect::<Vec<_>>()
        );
        let reqs: Vec<&&Copy> = xs.iter().filter(|c| c.trigger.is_request()).collect();
        let ans: Vec<&&Copy> = xs.iter().filter(|c| !c.trigger.is_request()).collect();
        assert_eq!(reqs.len(), 1, "{what}");
        assert!(ans.len() <= 1, "{what}");
        let q = reqs[0];
        assert_eq!(q.status, 0, "{what}");
        if let Some(a) = ans.first() {
            let pair = (q.trigger, a.trigger);
            assert!(
                pair == (TriggerPoint::IngressRequest, TriggerPoint::IngressResponse)
                    || pair == (TriggerPoint::EgressRequest, TriggerPoint::EgressResponse),
                "{what}"
            );
            assert!(a.timestamp_ns >= q.timestamp_ns && a.sequence > q.sequence, "{what}");
            assert_eq!(
                (a.service(), a.operation(), a.protocol),
                (q.service(), q.operation(), q.protocol),
                "{what}"
            );
            assert_ne!(a.status, 0, "{what}");
            match q.protocol {
                Protocol::Http2 => {
                    assert_eq!((a.method(), a.path()), (q.method(), q.path()), "{what}");
                    assert_eq!(a.stream_id, q.stream_id, "{what}");
                    assert_eq!(
                        a.header(":status"),
                        Some(a.status.to_string().as_bytes()),
                        "{what}"
                    );
                }
                Protocol::Diameter => {
                    assert_eq!(a.stream_id, q.stream_id, "the hop-by-hop id: {what}");
                    let (mq, ma) =
                        (Message::decode(q.body()).unwrap(), Message::decode(a.body()).unwrap());
                    assert_eq!(mq.hop_by_hop_id(), ma.hop_by_hop_id(), "{what}");
                    assert_eq!(ma.any_result_code(), Some(a.status), "{what}");
                }
            }
        }
        if q.protocol == Protocol::Http2 {
            assert_eq!(q.header(":method"), Some(q.method().as_bytes()), "{what}");
            assert_eq!(q.header(":path"), Some(q.path().as_bytes()), "{what}");
            assert_eq!(q.service(), q.path().split('/').nth(1).unwrap(), "{what}");
            match q.trigger {
                TriggerPoint::IngressRequest => {
                    assert_eq!(q.stream_id, 0, "hyper does not expose a served stream's id");
                    assert!(!q.operation().is_empty(), "the route's operation: {what}");
                    assert!(q.peer().starts_with("127.0.0.1:"), "{what}");
                }
                _ => {
                    assert_eq!(q.stream_id % 2, 1, "the NF's own h2 stream: {what}");
                    assert_eq!(q.operation(), "", "the client is not told the operation");
                }
            }
        }
    }

    // NRF: subscribe, register, discover, heartbeat, with the bytes on the wire; the
    // notification it sent the AMF and the AMF's 204.
    let nrf_copies: Vec<Copy> = of(&copies, "NRF").into_iter().cloned().collect();
    assert_eq!(nrf_copies.len(), 10, "{:#?}", summaries(&nrf_copies));
    let nrf_op = |op: &'static str, t: TriggerPoint| {
        one(&nrf_copies, op, move |c| c.operation() == op && c.trigger == t)
    };
    let reg = nrf_op("Nnrf_NFManagement_NFRegister", TriggerPoint::IngressRequest);
    let reg_a = nrf_op("Nnrf_NFManagement_NFRegister", TriggerPoint::IngressResponse);
    assert_eq!(
        (reg.service(), reg.method(), reg.path()),
        ("nnrf-nfm", "PUT", register_path.as_str())
    );
    assert_eq!((reg.session_id(), reg_a.session_id()), (SMF_ID, SMF_ID));
    assert_eq!(&reg.body()[..], &profile[..]);
    assert_eq!(reg.header("content-type"), Some(&b"application/json"[..]));
    assert_eq!(reg_a.status, 201);
    assert_eq!(reg_a.body(), register_answer);
    assert!(reg_a.header("location").is_some_and(|l| l.ends_with(register_path.as_bytes())));
    let disc = nrf_op("Nnrf_NFDiscovery_NFDiscover", TriggerPoint::IngressRequest);
    let disc_a = nrf_op("Nnrf_NFDiscovery_NFDiscover", TriggerPoint::IngressResponse);
    assert_eq!((disc.service(), disc.method(), disc.path()), ("nnrf-disc", "GET", disc_path));
    assert_eq!(disc.body().len(), 0);
    assert_eq!((disc_a.status, disc_a.body()), (200, disc_answer.clone()));
    assert_eq!(disc_a.header("content-type"), Some(&b"application/json"[..]));
    let hb = nrf_op("Nnrf_NFManagement_NFUpdate", TriggerPoint::IngressRequest);
    let hb_a = nrf_op("Nnrf_NFManagement_NFUpdate", TriggerPoint::IngressResponse);
    assert_eq!((hb.method(), hb.session_id()), ("PATCH", SMF_ID));
    assert_eq!(&hb.body()[..], &heartbeat[..]);
    assert_eq!(hb.header("content-type"), Some(&b"application/json-patch+json"[..]));
    assert_eq!(hb_a.status, heartbeat_status as u32);
    let ts: Vec<u64> =
        [reg, reg_a, disc, disc_a, hb, hb_a].iter().map(|c| c.timestamp_ns).collect();
    assert!(ts.windows(2).all(|w| w[0] <= w[1]), "the NRF's copies in time order: {ts:?}");
    let sub = nrf_op("Nnrf_NFManagement_NFStatusSubscribe", TriggerPoint::IngressRequest);
    let sub_a = nrf_op("Nnrf_NFManagement_NFStatusSubscribe", TriggerPoint::IngressResponse);
    assert_eq!((sub.method(), sub.path()), ("POST", "/nnrf-nfm/v1/subscriptions"));
    assert_eq!((sub_a.status, sub_a.session_id()), (201, subscription_id.as_str()));
    let sink_authority = amf_sink.url.trim_start_matches("http://").split('/').next().unwrap();
    let notify = one(&nrf_copies, "the NF_REGISTERED notification", |c| {
        c.trigger == TriggerPoint::EgressRequest
    });
    let notify_a =
        one(&nrf_copies, "the AMF's answer", |c| c.trigger == TriggerPoint::EgressResponse);
    assert_eq!((notify.method(), notify.peer()), ("POST", sink_authority));
    assert_eq!(notify.header(":method"), Some(&b"POST"[..]));
    assert_eq!(notify.header("content-type"), Some(&b"application/json"[..]));
    assert_eq!(serde_json::from_slice::<Value>(&notify.body()).unwrap(), notification);
    assert_eq!((notify_a.status, notify_a.transaction), (204, notify.transaction));
    assert!(reg.timestamp_ns <= notify.timestamp_ns, "notified once registered");

    // The filtered feed: the NRF's ten, nothing else.
    let got =
        nrf_feed.until("the NRF's copies on the filtered feed", |g| g.len() >= 10).await.to_vec();
    nrf_feed.settle().await;
    assert_eq!(nrf_feed.got.len(), 10, "{:#?}", summaries(&nrf_feed.got));
    let seqs: Vec<u64> = got.iter().map(|c| c.sequence).collect();
    assert_eq!(seqs, (0..10).collect::<Vec<_>>());
    assert!(
        got.iter().zip(&nrf_copies).all(|(a, b)| a.record() == b.record()),
        "the same envelopes"
    );

    // UDR: N36 and SOAP ingress, Sh ingress.
    let udr_copies: Vec<Copy> = of(&copies, "UDR").into_iter().cloned().collect();
    let put = one(&udr_copies, "the sm-data PUT", |c| {
        c.trigger == TriggerPoint::IngressRequest && c.method() == "PUT"
    });
    assert_eq!(
        (put.service(), put.operation(), put.path()),
        ("nudr-dr", "Nudr_DataRepository_Update", sm_data_path.as_str())
    );
    assert_eq!(put.supi(), format!("imsi-{IMSI}"));
    assert_eq!(&put.body()[..], &sm_data[..]);
    let put_a = one(&udr_copies, "its answer", |c| {
        c.trigger == TriggerPoint::IngressResponse && c.transaction == put.transaction
    });
    assert_eq!((put_a.status, put_a.supi()), (sm_data_status as u32, put.supi()));
    let soap_q = one(&udr_copies, "the SOAP request", |c| {
        c.trigger == TriggerPoint::IngressRequest && c.service() == "udr-soap"
    });
    assert_eq!(
        (soap_q.operation(), soap_q.method(), soap_q.path()),
        ("UdrProv_Soap", "POST", "/udr-soap/v1")
    );
    assert_eq!(&soap_q.body()[..], soap.as_bytes());
    assert_eq!(soap_q.header("content-type"), Some(&b"text/xml; charset=utf-8"[..]));
    assert!(soap_q.header("soapaction").is_some());
    let soap_a = one(&udr_copies, "the SOAP answer", |c| {
        c.trigger == TriggerPoint::IngressResponse && c.service() == "udr-soap"
    });
    assert_eq!((soap_a.status, soap_a.body()), (200, soap_answer.clone()));
    let sh_q = one(&udr_copies, "the Sh UDR", |c| {
        c.trigger == TriggerPoint::IngressRequest && c.service() == "Sh"
    });
    let sh_a = one(&udr_copies, "the Sh UDA", |c| {
        c.trigger == TriggerPoint::IngressResponse && c.service() == "Sh"
    });
    for x in [sh_q, sh_a] {
        assert_eq!(
            (x.protocol, x.operation(), x.session_id()),
            (Protocol::Diameter, "UDR", sh_sid.as_str())
        );
        assert_eq!((x.header_count(), x.path()), (0, ""));
        assert!(x.peer().starts_with("127.0.0.1:"), "{}", x.peer());
    }
    assert_eq!((sh_q.method(), sh_a.method()), ("UDR", "UDA"));
    assert_eq!(sh_q.gpsi(), format!("msisdn-{MSISDN}"), "Sh's User-Identity MSISDN");
    assert_eq!(sh_a.gpsi(), sh_q.gpsi(), "the UDA names none: its session's");
    assert_eq!((sh_q.status, sh_a.status), (0, 2001));
    assert_eq!(sh_a.body(), uda.to_bytes().unwrap(), "the UDA as on the wire");
    assert_eq!(Message::decode(sh_q.body()).unwrap().session_id(), Some(sh_sid.as_str()));
    assert!(
        udr_copies.iter().all(|c| c.trigger == TriggerPoint::IngressRequest
            || c.trigger == TriggerPoint::IngressResponse),
        "the UDR sent nothing"
    );

    // PCF, ingress: N7 create, Gx CCR-I, Rx AAR.
    let pcf_copies: Vec<Copy> = of(&copies, "PCF").into_iter().cloned().collect();
    let n7 = one(&pcf_copies, "N7 create", |c| {
        c.trigger == TriggerPoint::IngressRequest && c.operation() == "Npcf_SMPolicyControl_Create"
    });
    let n7_a = one(&pcf_copies, "N7 create's answer", |c| {
        c.trigger == TriggerPoint::IngressResponse && c.operation() == "Npcf_SMPolicyControl_Create"
    });
    assert_eq!((n7.service(), n7.method(), n7.path()), ("npcf-smpolicycontrol", "POST", n7_path));
    for x in [n7, n7_a] {
        assert_eq!(
            (x.supi(), x.gpsi()),
            (format!("imsi-{IMSI}").as_str(), format!("msisdn-{MSISDN}").as_str())
        );
    }
    assert_eq!(&n7.body()[..], &context[..]);
    assert_eq!(
        (n7_a.status, n7_a.body(), n7_a.session_id()),
        (201, n7_answer.clone(), sm_policy_id.as_str())
    );
    assert_eq!(n7.header(":scheme"), Some(&b"http"[..]));
    assert!(n7.header(":authority").is_some());
    let gx_q = one(&pcf_copies, "CCR-I", |c| {
        c.trigger == TriggerPoint::IngressRequest && c.service() == "Gx"
    });
    let gx_a = one(&pcf_copies, "CCA-I", |c| {
        c.trigger == TriggerPoint::IngressResponse && c.service() == "Gx"
    });
    for x in [gx_q, gx_a] {
        assert_eq!(
            (x.protocol, x.operation(), x.session_id()),
            (Protocol::Diameter, "CCR-I", gx_sid.as_str())
        );
    }
    assert_eq!(gx_q.supi(), format!("imsi-{IMSI}"));
    assert_eq!(gx_a.supi(), gx_q.supi(), "the CCA names none: its session's");
    assert_eq!((gx_q.status, gx_a.status), (0, 2001));
    assert_eq!(gx_a.body(), cca.to_bytes().unwrap(), "the CCA as on the wire");

    // The PCF's egress, seen from the other side: every request it sent the UDR or the BSF is
    // one the UDR or BSF copied at ingress, byte for byte, and so are their answers.
    let pcf_out: Vec<&Copy> =
        pcf_copies.iter().filter(|c| c.trigger == TriggerPoint::EgressRequest).collect();
    let bsf_copies: Vec<Copy> = of(&copies, "BSF").into_iter().cloned().collect();
    let answer_of = |xs: &[Copy], q: &Copy| -> Option<Copy> {
        xs.iter().find(|c| c.transaction == q.transaction && !c.trigger.is_request()).cloned()
    };
    let mut seen_services = BTreeSet::new();
    for out in &pcf_out {
        let (peer_nf, peer_copies, authority) = match out.service() {
            "nudr-dr" => ("UDR", &udr_copies, udr.base.trim_start_matches("http://").to_owned()),
            "nbsf-management" => ("BSF", &bsf_copies, bsf_sbi.to_string()),
            "Rx" | "Gx" => continue,
            other => panic!("the PCF sent {other}: {}", summary(out)),
        };
        seen_services.insert(out.service().to_owned());
        let inn = one(peer_copies, &format!("{peer_nf}'s copy of {}", summary(out)), |c| {
            c.trigger == TriggerPoint::IngressRequest
                && c.path() == out.path()
                && c.body() == out.body()
        });
        assert_eq!(inn.method(), out.method());
        assert_eq!(inn.supi(), out.supi());
        assert_eq!(out.peer(), authority, "the producer's authority");
        assert!(out.timestamp_ns <= inn.timestamp_ns, "sent before received");
        let (a_out, a_in) = (
            answer_of(&pcf_copies, out).expect("the PCF got an answer"),
            answer_of(peer_copies, inn).unwrap(),
        );
        assert_eq!((a_out.status, a_out.body()), (a_in.status, a_in.body()), "{}", summary(out));
        assert!(a_in.timestamp_ns <= a_out.timestamp_ns, "answered before the answer was read");
        if out.service() == "nudr-dr" && out.method() == "GET" && out.path().ends_with("/sm-data") {
            assert_eq!(a_out.status, 200);
            assert_eq!(serde_json::from_slice::<Value>(&a_out.body()).unwrap(), sm_policy_data());
        }
    }
    assert!(
        seen_services.contains("nudr-dr") && seen_services.contains("nbsf-management"),
        "{seen_services:?}"
    );
    let reg_out = one(&pcf_copies, "the N7 binding's Register", |c| {
        c.trigger == TriggerPoint::EgressRequest
            && c.service() == "nbsf-management"
            && serde_json::from_slice::<Value>(&c.body())
                .is_ok_and(|b| b["ipv4Addr"] == UE_IP.to_string())
    });
    assert_eq!((reg_out.method(), reg_out.path()), ("POST", "/nbsf-management/v1/pcfBindings"));
    assert_eq!(reg_out.peer(), bsf_sbi.to_string());
    assert!(reg_out.header("user-agent").is_some_and(|ua| ua.starts_with(b"PCF-")));
    let reg_in = one(&bsf_copies, "the BSF's Register", |c| {
        c.trigger == TriggerPoint::IngressRequest && c.body() == reg_out.body()
    });
    assert_eq!(reg_in.operation(), "Nbsf_Management_Register");
    assert_eq!(
        (reg_in.supi(), reg_in.gpsi()),
        (format!("imsi-{IMSI}").as_str(), format!("msisdn-{MSISDN}").as_str())
    );
    let reg_in_a = answer_of(&bsf_copies, reg_in).unwrap();
    assert_eq!(reg_in_a.status, 201);
    assert!(!reg_in_a.session_id().is_empty(), "the binding id from the Location");

    // Rx: the AF's AAR at the BSF (ingress), the BSF's AAR to the PCF (egress), the PCF's copy
    // (ingress) of the same bytes, and the AAA back the same way.
    let rx_of = |xs: &[Copy], t: TriggerPoint| -> Copy {
        one(xs, &format!("Rx {}", t.as_str()), |c| {
            c.trigger == t && c.service() == "Rx" && c.session_id() == rx_sid
        })
        .clone()
    };
    let b_in = rx_of(&bsf_copies, TriggerPoint::IngressRequest);
    let b_in_a = rx_of(&bsf_copies, TriggerPoint::IngressResponse);
    let b_out = rx_of(&bsf_copies, TriggerPoint::EgressRequest);
    let b_out_a = rx_of(&bsf_copies, TriggerPoint::EgressResponse);
    let p_in = rx_of(&pcf_copies, TriggerPoint::IngressRequest);
    let p_in_a = rx_of(&pcf_copies, TriggerPoint::IngressResponse);
    for x in [&b_in, &b_in_a, &b_out, &b_out_a, &p_in, &p_in_a] {
        assert_eq!((x.protocol, x.operation()), (Protocol::Diameter, "AAR"), "{}", summary(x));
        assert_eq!(x.gpsi(), format!("msisdn-{MSISDN}"), "the AAR's, and its session's");
    }
    assert_eq!(p_in.body(), b_out.body(), "what the BSF wrote is what the PCF read");
    assert_eq!(p_in_a.body(), b_out_a.body(), "and back");
    assert_eq!(b_in_a.body(), aaa.to_bytes().unwrap(), "the AAA the AF got");
    let forwarded = Message::decode(b_out.body()).unwrap();
    assert_eq!(forwarded.destination_host(), Some(PCF_HOST));
    assert_ne!(b_in.transaction, b_out.transaction, "two transactions at the BSF");
    assert!(b_in.timestamp_ns <= b_out.timestamp_ns && b_out.timestamp_ns <= p_in.timestamp_ns);
    assert!(
        p_in_a.timestamp_ns <= b_out_a.timestamp_ns && b_out_a.timestamp_ns <= b_in_a.timestamp_ns
    );
    assert_eq!((b_in_a.status, b_out_a.status, p_in_a.status), (2001, 2001, 2001));

    // Every Diameter copy's body is a whole message tshark decodes cleanly: the CCA, UDA and
    // AAAs the NFs wrote and the AAR the BSF forwarded among them.
    let wire: Vec<Vec<u8>> = copies
        .iter()
        .filter(|c| c.protocol == Protocol::Diameter)
        .map(|c| c.body().to_vec())
        .collect();
    assert_eq!(wire.len(), 10, "CCR/CCA, UDR/UDA, and the AAR/AAA three times");
    testkit::tshark::tshark_check(&wire);

    drop(smf_sink);
    for node in [as_node, pgw, af] {
        node.shutdown().await;
    }
    bsf.stop().await;
    pcf.stop().await;
    udr.stop().await;
    nrf.stop().await;
    dd.stop().await;
}

/// The repository's default policy project, copied (the PCF may write into it).
fn default_policy(into: &Path) -> std::path::PathBuf {
    fn copy_dir(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                copy_dir(&p, &to.join(e.file_name()));
            } else {
                std::fs::copy(&p, to.join(e.file_name())).unwrap();
            }
        }
    }
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../policies/default"), into);
    into.to_path_buf()
}
