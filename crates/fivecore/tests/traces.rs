//! Traces across real NFs (issue #27, docs/telemetry.md): a UDR, a BSF and a PCF run here on
//! 127.0.0.1 with `[telemetry.otlp]` toward an OTLP/HTTP receiver in the test, which decodes
//! their protobuf as a collector does. An SMF's SM policy create (Npcf_SMPolicyControl_Create:
//! the PCF reads the subscriber's policy data at the UDR and registers the binding at the BSF)
//! sent in a trace the SMF started yields one trace: the PCF's server span is the SMF span's
//! child, and each of the UDR's and BSF's server spans is the child of the PCF client span that
//! called it, each NF under its own `service.name`.

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use sbi::client::{ClientConfig, SbiClient};
use serde_json::json;
use telemetry::{OtlpConfig, TelemetryConfig};
use testkit::otlp::{OtlpReceiver, Span, CLIENT, SERVER};
use tokio::sync::oneshot;

const T: Duration = Duration::from_secs(15);
const TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const SMF_SPAN: &str = "b7ad6b7169203331";

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
}

fn store(dir: &Path, name: &str) -> store::SqliteConfig {
    store::SqliteConfig { readers: 1, ..store::SqliteConfig::new(dir.join(name)) }
}

fn sbi_with(telemetry: &TelemetryConfig) -> sbi::ServerConfig {
    sbi::ServerConfig { telemetry: telemetry.clone(), ..sbi::ServerConfig::default() }
}

fn client() -> SbiClient {
    SbiClient::new(&ClientConfig { request_timeout_ms: 5000, ..ClientConfig::default() }).unwrap()
}

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

fn one<'a>(spans: &'a [Span], what: &str, pick: impl Fn(&Span) -> bool) -> &'a Span {
    let found: Vec<&Span> = spans.iter().filter(|s| pick(s)).collect();
    assert_eq!(found.len(), 1, "one {what} in {spans:#?}");
    found[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sm_policy_create_is_one_trace_across_the_pcf_udr_and_bsf() {
    let receiver = OtlpReceiver::start().await;
    let telemetry = TelemetryConfig {
        otlp: Some(OtlpConfig { interval_ms: 50, ..OtlpConfig::new(receiver.endpoint()) }),
        ..TelemetryConfig::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();

    let run = udr::RunConfig {
        udr: udr::UdrConfig::default(),
        sbi: sbi_with(&telemetry),
        client: ClientConfig::default(),
        store: store(d, "udr.db"),
        instance_id: Some("5f3a1e2c-0000-4000-8000-00000000a001".into()),
    };
    let bound = udr::bind(run).await.expect("the UDR starts");
    let udr = Running::spawn(bound.local_addr(), |rx| {
        bound.serve(async move {
            let _ = rx.await;
        })
    });
    let run = bsf::RunConfig {
        bsf: bsf::BsfConfig::default(),
        sbi: sbi_with(&telemetry),
        client: ClientConfig::default(),
        store: store(d, "bsf.db"),
        instance_id: Some("5f3a1e2c-0000-4000-8000-00000000b001".into()),
    };
    let bound = bsf::bind(run).await.expect("the BSF starts");
    let bsf = Running::spawn(bound.local_addr(), |rx| {
        bound.serve(async move {
            let _ = rx.await;
        })
    });
    let run = pcf::RunConfig {
        pcf: pcf::PcfConfig {
            policy: Some(default_policy(&d.join("policy"))),
            udr: pcf::config::UdrConfig {
                api_root: Some(udr.base.clone()),
                ..pcf::config::UdrConfig::default()
            },
            bsf: pcf::config::BsfConfig {
                enabled: true,
                api_root: Some(bsf.base.clone()),
                ..pcf::config::BsfConfig::default()
            },
            ..pcf::PcfConfig::default()
        },
        sbi: sbi_with(&telemetry),
        client: ClientConfig::default(),
        store: store(d, "pcf.db"),
        instance_id: Some("5f3a1e2c-0000-4000-8000-00000000c001".into()),
    };
    let bound = pcf::bind(run).await.expect("the PCF starts");
    let pcf = Running::spawn(bound.local_addr(), |rx| {
        bound.serve(async move {
            let _ = rx.await;
        })
    });

    // An Open5GS SMF's SmPolicyContextData, in a trace the SMF started.
    let c = client();
    let r = c
        .post(&format!("{}/npcf-smpolicycontrol/v1/sm-policies", pcf.base))
        .header("traceparent", format!("00-{TRACE}-{SMF_SPAN}-01"))
        .json(&json!({
            "supi": "imsi-999700000000001",
            "pduSessionId": 1,
            "pduSessionType": "IPV4",
            "dnn": "internet",
            "notificationUri": "http://127.0.0.4:7777/nsmf-callback/v1/sm-policy-notify/1",
            "accessType": "3GPP_ACCESS",
            "ratType": "NR",
            "servingNetwork": {"mcc": "999", "mnc": "70"},
            "ipv4Address": "10.45.0.1",
            "subsSessAmbr": {"uplink": "1 Gbps", "downlink": "2 Gbps"},
            "subsDefQos": {"5qi": 9, "arp": {"priorityLevel": 8, "preemptCap": "NOT_PREEMPT",
                "preemptVuln": "NOT_PREEMPTABLE"}, "priorityLevel": 8},
            "sliceInfo": {"sst": 1},
            "suppFeat": "4000000"
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201, "{:?}", r.body());

    let register_seen = |s: &[Span]| {
        s.iter().any(|s| s.service == "fivecore-bsf" && s.name == "Nbsf_Management_Register")
            && s.iter().any(|s| s.service == "fivecore-udr" && s.kind == SERVER)
            && s.iter().any(|s| s.name == "Npcf_SMPolicyControl_Create")
    };
    let spans = receiver.wait_for(T, register_seen).await;
    let trace: Vec<Span> = spans.into_iter().filter(|s| s.trace_id == TRACE).collect();

    let create = one(&trace, "SM create", |s| s.name == "Npcf_SMPolicyControl_Create");
    assert_eq!((create.service.as_str(), create.kind), ("fivecore-pcf", SERVER));
    assert_eq!(create.parent_span_id, SMF_SPAN, "continues the SMF's trace");
    assert_eq!(create.attr("http.response.status_code"), Some("201"));
    assert_eq!(create.attr("http.route"), Some("/npcf-smpolicycontrol/v1/sm-policies"));
    let pcf_calls: Vec<&Span> =
        trace.iter().filter(|s| s.service == "fivecore-pcf" && s.kind == CLIENT).collect();
    assert!(pcf_calls.iter().all(|s| s.parent_span_id == create.span_id), "{pcf_calls:#?}");

    // The UDR's and the BSF's server spans, each the child of the PCF call that reached it.
    let caller_of = |s: &Span| pcf_calls.iter().find(|c| c.span_id == s.parent_span_id).copied();
    let register = one(&trace, "binding register", |s| s.name == "Nbsf_Management_Register");
    assert_eq!((register.service.as_str(), register.kind), ("fivecore-bsf", SERVER));
    let call = caller_of(register).unwrap_or_else(|| panic!("no PCF call parents {register:#?}"));
    assert_eq!(call.name, "POST nbsf-management");
    assert_eq!(call.attr("http.response.status_code"), register.attr("http.response.status_code"));
    let udr_spans: Vec<&Span> =
        trace.iter().filter(|s| s.service == "fivecore-udr" && s.kind == SERVER).collect();
    assert!(!udr_spans.is_empty(), "{trace:#?}");
    for s in &udr_spans {
        let call = caller_of(s).unwrap_or_else(|| panic!("no PCF call parents {s:#?}"));
        assert_eq!(call.name.split(' ').nth(1), Some("nudr-dr"), "{call:#?}");
        assert!(s.name.starts_with("Nudr_DataRepository_"), "{s:#?}");
    }
    for (svc, id) in [
        ("fivecore-pcf", "5f3a1e2c-0000-4000-8000-00000000c001"),
        ("fivecore-udr", "5f3a1e2c-0000-4000-8000-00000000a001"),
        ("fivecore-bsf", "5f3a1e2c-0000-4000-8000-00000000b001"),
    ] {
        let s = trace.iter().find(|s| s.service == svc).unwrap();
        assert_eq!(s.resource["service.instance.id"], id);
    }

    // Each NF counts what it exported on its /metrics.
    for nf in [&pcf, &udr, &bsf] {
        let m = c.get(&format!("{}/metrics", nf.base)).send().await.unwrap();
        let text = String::from_utf8(m.body().to_vec()).unwrap();
        let exported: u64 = text
            .lines()
            .find_map(|l| l.strip_prefix("otlp_spans_exported_total "))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{text}"));
        assert!(exported > 0, "{text}");
    }
    pcf.stop().await;
    bsf.stop().await;
    udr.stop().await;
}
