//! `[pcf.copy]`: the PCF's message copies reach a Data Director (a stand-in ingest API on
//! 127.0.0.1, testkit::dd_ingest) over real sockets. An N7 create, the binding it registers at
//! a real BSF, and a Gx CCR-I from a PGW test double arrive at the four trigger points with
//! their metadata: NF type and instance, operation, SUPI, session, status, headers and body.

mod common;

use std::net::Ipv4Addr;
use std::time::Duration;

use common::peers::start_bsf;
use common::wire::*;
use common::*;
use dd_client::{Copy, CopyConfig, Protocol, TriggerPoint};
use diameter::dictionary::{dcca, gx, nasreq};
use diameter::Message;
use pcf::config::BsfConfig;
use pcf::PcfConfig;
use serde_json::Value;
use testkit::dd_ingest::{summary, Ingest};

const T: Duration = Duration::from_secs(10);

/// A CCR-I as a P-GW sends it for UE `imsi` at 10.45.1.`host`.
fn ccr_i(sid: &str, imsi: &str, host: u8) -> Message {
    ccr(sid, 1, 0)
        .avp(dcca::SUBSCRIPTION_ID.grouped(vec![
            dcca::SUBSCRIPTION_ID_TYPE.enumerated(dcca::subscription_id_type::END_USER_IMSI),
            dcca::SUBSCRIPTION_ID_DATA.utf8(imsi),
        ]))
        .avp(nasreq::FRAMED_IP_ADDRESS.ipv4_octets(Ipv4Addr::new(10, 45, 1, host)))
        .avp(gx::IP_CAN_TYPE.enumerated(gx::ip_can_type::TGPP_EPS))
        .avp(gx::RAT_TYPE.enumerated(gx::rat_type::EUTRAN))
        .avp(nasreq::CALLED_STATION_ID.utf8("internet"))
}

fn one<'a>(copies: &'a [Copy], f: impl Fn(&Copy) -> bool, what: &str) -> &'a Copy {
    let found: Vec<&Copy> = copies.iter().filter(|c| f(c)).collect();
    assert_eq!(
        found.len(),
        1,
        "one {what} among {:#?}",
        copies.iter().map(summary).collect::<Vec<_>>()
    );
    found[0]
}

fn json_of(c: &Copy) -> Value {
    serde_json::from_slice(&c.body()).unwrap()
}

#[tokio::test]
async fn n7_bsf_and_gx_exchanges_are_copied_at_the_four_trigger_points() {
    let d = tempfile::tempdir().unwrap();
    let ingest = Ingest::start().await;
    let bsf = start_bsf(d.path()).await;
    let config = PcfConfig {
        policy: Some(default_project(&d.path().join("policy"))),
        diameter: diameter_on(),
        bsf: BsfConfig { enabled: true, api_root: Some(bsf.base.clone()), ..BsfConfig::default() },
        copy: CopyConfig { enabled: true, uri: ingest.uri(), ..CopyConfig::default() },
        ..PcfConfig::default()
    };
    let pcf = TestPcf::start_with(d.path(), config).await;

    // N7: the SMF's create.
    let ctx = open5gs_context(1);
    let supi = ctx["supi"].as_str().unwrap().to_owned();
    let r = client().post(&pcf.sm("")).json(&ctx).send().await.unwrap();
    assert_eq!(r.status(), 201, "{}", body(&r));
    let location = r.header("location").unwrap().to_owned();
    let sm_policy_id = location.rsplit('/').next().unwrap().to_owned();

    // Gx: the PGW's CCR-I.
    let wire = Wire::default();
    let pgw = DiameterPeer::pgw(pcf.diameter(), &wire).await;
    let sid = "pgw.epc.example;dd;1";
    let cca = pgw.send(ccr_i(sid, "001010000000001", 1)).await;
    assert_eq!(cca.result_code(), Some(2001));

    let binds = |c: &Copy| c.service() == "nbsf-management" && c.supi() == supi;
    let copies = ingest
        .wait_for(T, |c| {
            c.iter().any(|c| c.trigger == TriggerPoint::EgressResponse && binds(c))
                && c.iter()
                    .any(|c| c.trigger == TriggerPoint::IngressResponse && c.service() == "Gx")
        })
        .await;
    let instance = copies[0].nf_instance().to_owned();
    assert_eq!(instance.len(), 36, "the PCF's nfInstanceId: {instance}");
    for (i, x) in copies.iter().enumerate() {
        assert_eq!((x.nf_type(), x.nf_instance()), ("PCF", instance.as_str()));
        assert_eq!(x.sequence, i as u64, "one sequence per NF instance");
    }

    // N7, ingress.
    let n7 = |t: TriggerPoint| {
        move |c: &Copy| c.trigger == t && c.operation() == "Npcf_SMPolicyControl_Create"
    };
    let req = one(&copies, n7(TriggerPoint::IngressRequest), "N7 create");
    let ans = one(&copies, n7(TriggerPoint::IngressResponse), "N7 create's answer");
    for x in [req, ans] {
        assert_eq!(x.protocol, Protocol::Http2);
        assert_eq!(x.service(), "npcf-smpolicycontrol");
        assert_eq!((x.method(), x.path()), ("POST", "/npcf-smpolicycontrol/v1/sm-policies"));
        assert_eq!(x.supi(), supi);
        assert!(x.peer().starts_with("127.0.0.1:"));
    }
    assert_eq!(req.transaction, ans.transaction);
    assert_eq!((req.status, ans.status), (0, 201));
    assert_eq!((req.session_id(), ans.session_id()), ("", sm_policy_id.as_str()));
    assert_eq!(req.header(":method"), Some(&b"POST"[..]));
    assert_eq!(req.header("content-type"), Some(&b"application/json"[..]));
    assert_eq!(json_of(req), ctx);
    assert_eq!(ans.header(":status"), Some(&b"201"[..]));
    assert_eq!(ans.header("location"), Some(location.as_bytes()));
    assert!(json_of(ans)["sessRules"].is_object(), "the SmPolicyDecision");

    // The binding the create registered at the BSF, egress.
    let out = one(&copies, |c| c.trigger == TriggerPoint::EgressRequest && binds(c), "Register");
    let back = one(&copies, |c| c.trigger == TriggerPoint::EgressResponse && binds(c), "201");
    for x in [out, back] {
        assert_eq!((x.method(), x.path()), ("POST", "/nbsf-management/v1/pcfBindings"));
        assert_eq!(x.peer(), bsf.base.trim_start_matches("http://"));
        assert_eq!(x.stream_id % 2, 1, "the PCF's own h2 stream");
    }
    assert_eq!((out.transaction, out.stream_id), (back.transaction, back.stream_id));
    assert_eq!((out.status, back.status), (0, 201));
    assert_eq!(json_of(out)["supi"], supi.as_str());
    assert!(out.header("user-agent").is_some_and(|ua| ua.starts_with(b"PCF-")));
    let binding_id = back.session_id();
    assert!(!binding_id.is_empty());
    assert!(back.header("location").is_some_and(|l| l.ends_with(binding_id.as_bytes())));

    // Gx, ingress: the wire bytes the PGW sent and the CCA the PCF wrote.
    let gx_in = |t: TriggerPoint| move |c: &Copy| c.trigger == t && c.service() == "Gx";
    let ccr = one(&copies, gx_in(TriggerPoint::IngressRequest), "CCR-I");
    let ans = one(&copies, gx_in(TriggerPoint::IngressResponse), "CCA-I");
    for x in [ccr, ans] {
        assert_eq!(x.protocol, Protocol::Diameter);
        assert_eq!(x.operation(), "CCR-I");
        assert_eq!(x.session_id(), sid);
        assert_eq!(x.header_count(), 0);
        assert_eq!(x.path(), "");
        assert!(x.peer().starts_with("127.0.0.1:"));
    }
    assert_eq!((ccr.method(), ans.method()), ("CCR", "CCA"));
    assert_eq!(ccr.supi(), "imsi-001010000000001");
    assert_eq!((ccr.status, ans.status), (0, 2001));
    assert_eq!(ccr.transaction, ans.transaction);
    let sent = Message::decode(ccr.body()).unwrap();
    assert_eq!(sent.session_id(), Some(sid));
    assert_eq!(sent.command_code(), gx::CMD_CREDIT_CONTROL);
    assert_eq!(ccr.stream_id, sent.hop_by_hop_id());
    let answered = Message::decode(ans.body()).unwrap();
    assert_eq!(answered.result_code(), Some(2001));
    assert_eq!(answered.hop_by_hop_id(), sent.hop_by_hop_id());
    // No CER/CEA or watchdog was copied.
    assert!(copies.iter().all(|c| c.protocol == Protocol::Http2 || c.service() == "Gx"));

    let r = client().get(&format!("{}/metrics", pcf.base)).send().await.unwrap();
    let text = String::from_utf8(r.body().to_vec()).unwrap();
    for t in ["ingress_request", "ingress_response", "egress_request", "egress_response"] {
        let line = format!("dd_copies_total{{trigger=\"{t}\"}} ");
        let n: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix(&line)?.parse().ok())
            .unwrap_or_else(|| panic!("{line} in {text}"));
        assert!(n >= 2.0, "{t}: {n}");
    }
    pgw.node.shutdown().await;
    pcf.stop().await;
    bsf.stop().await;
    ingest.stop();
}
