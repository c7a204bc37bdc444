//! With `[pcf.bsf] enabled`, an SM policy association with a UE address is bound at a real BSF
//! (found through the configured apiRoot), so a consumer finds this PCF by the UE's address;
//! the delete removes the binding. A BSF that cannot be reached fails no SM create.

mod common;

use common::peers::start_bsf;
use common::*;
use pcf::config::{BsfConfig, DiameterConfig, OnUnreachable, UdrConfig};
use pcf::PcfConfig;
use serde_json::{json, Value};
use testkit::specs::Specs;

fn metrics(text: &str, line: &str) -> bool {
    text.lines().any(|l| l == line)
}

#[tokio::test]
async fn an_association_is_bound_at_the_bsf_and_unbound_at_delete() {
    let specs = Specs::load(&["TS29521_Nbsf_Management", "TS29571_CommonData"]);
    let d = tempfile::tempdir().unwrap();
    let peer = start_bsf(d.path()).await;
    let bsf = peer.base.clone();
    let config = PcfConfig {
        policy: Some(default_project(&d.path().join("policy"))),
        bsf: BsfConfig { enabled: true, api_root: Some(bsf.clone()), ..BsfConfig::default() },
        ..PcfConfig::default()
    };
    let pcf = TestPcf::start_with(d.path(), config).await;
    let c = client();
    let ctx = open5gs_context(11);
    let r = c.post(&pcf.sm("")).json(&ctx).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 201, "{}", body(&r));
    let loc = r.header("location").unwrap().to_string();

    // A consumer (an AF, the Rx proxy) finds this PCF by the UE's address.
    let find = format!("{bsf}/nbsf-management/v1/pcfBindings?ipv4Addr=10.45.0.11");
    let r = c.get(&find).send().await.unwrap();
    let binding: Value = body(&r);
    assert_eq!(r.status().as_u16(), 200, "{binding}");
    specs.assert_valid("TS29521_Nbsf_Management", "PcfBinding", &binding);
    assert_eq!(binding["supi"], ctx["supi"]);
    assert_eq!(binding["dnn"], "internet");
    assert_eq!(binding["snssai"], json!({"sst": 1}));
    let port: u64 = pcf.base.rsplit(':').next().unwrap().parse().unwrap();
    assert_eq!(binding["pcfIpEndPoints"][0]["port"], port);
    assert!(binding["pcfId"].is_string());
    // No Diameter side ([pcf.diameter] off): nothing for an Rx proxy to route to.
    assert!(binding.get("pcfDiamHost").is_none(), "{binding}");

    // The UE gets another address (an update with a new ipv4Address): the binding moves with
    // it, and the old address finds nothing.
    let r = c
        .post(&format!("{loc}/update"))
        .json(&json!({"repPolicyCtrlReqTriggers": ["UE_IP_CH"], "ipv4Address": "10.45.9.11",
            "relIpv4Address": "10.45.0.11"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{}", body(&r));
    let r = c.get(&find).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 204, "the old address is still bound: {}", body(&r));
    let moved = format!("{bsf}/nbsf-management/v1/pcfBindings?ipv4Addr=10.45.9.11");
    let r = c.get(&moved).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200, "{}", body(&r));
    assert_eq!(body(&r)["supi"], ctx["supi"]);
    // An update that leaves the address alone leaves the binding alone.
    let r = c
        .post(&format!("{loc}/update"))
        .json(&json!({"repPolicyCtrlReqTriggers": ["RAT_TY_CH"], "ratType": "EUTRA"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{}", body(&r));

    // Deleted with the association.
    let r = c.post(&format!("{loc}/delete")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 204);
    let r = c.get(&moved).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 204, "{}", body(&r));

    // A session without a UE address has nothing to bind.
    let mut no_addr = open5gs_context(12);
    no_addr.as_object_mut().unwrap().remove("ipv4Address");
    let r = c.post(&pcf.sm("")).json(&no_addr).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 201);

    // The BSF goes away: the SMF's sessions still get their policy.
    peer.stop().await;
    let r = c.post(&pcf.sm("")).json(&open5gs_context(13)).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 201, "{}", body(&r));
    let text = String::from_utf8(
        c.get(&format!("{}/metrics", pcf.base)).send().await.unwrap().body().to_vec(),
    )
    .unwrap();
    for line in [
        "pcf_bsf_bindings_total{operation=\"register\",result=\"ok\"} 2",
        "pcf_bsf_bindings_total{operation=\"deregister\",result=\"ok\"} 2",
        "pcf_bsf_bindings_total{operation=\"register\",result=\"failed\"} 1",
    ] {
        assert!(metrics(&text, line), "{line} not in {text}");
    }
    pcf.stop().await;
}

/// The binding is registered while the UDR is read, before the decision: a create then refused
/// (no UDR answers, `on_unreachable = reject`) removes it again, and leaves nothing at the BSF.
#[tokio::test]
async fn a_refused_create_leaves_no_binding() {
    let d = tempfile::tempdir().unwrap();
    let peer = start_bsf(d.path()).await;
    let bsf = peer.base.clone();
    let config = PcfConfig {
        policy: Some(default_project(&d.path().join("policy"))),
        bsf: BsfConfig { enabled: true, api_root: Some(bsf.clone()), ..BsfConfig::default() },
        udr: UdrConfig {
            api_root: Some("http://127.0.0.1:1".into()),
            on_unreachable: OnUnreachable::Reject,
            ..UdrConfig::default()
        },
        ..PcfConfig::default()
    };
    let pcf = TestPcf::start_with(d.path(), config).await;
    let c = client();
    let r = c.post(&pcf.sm("")).json(&open5gs_context(21)).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 503, "{}", body(&r));
    let find = format!("{bsf}/nbsf-management/v1/pcfBindings?ipv4Addr=10.45.0.21");
    let r = c.get(&find).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 204, "the refused session is still bound: {}", body(&r));
    let text = String::from_utf8(
        c.get(&format!("{}/metrics", pcf.base)).send().await.unwrap().body().to_vec(),
    )
    .unwrap();
    for line in [
        "pcf_bsf_bindings_total{operation=\"register\",result=\"ok\"} 1",
        "pcf_bsf_bindings_total{operation=\"deregister\",result=\"ok\"} 1",
    ] {
        assert!(metrics(&text, line), "{line} not in {text}");
    }
    pcf.stop().await;
    peer.stop().await;
}

/// With `[pcf.diameter]` on (Gx and Rx served), the binding names the PCF's Diameter identity,
/// which the BSF's Rx proxy routes an AF's AAR by (TS 29.521 PcfBinding `pcfDiamHost`,
/// `pcfDiamRealm`; the reference's 3.5.1 runs with binding on).
#[tokio::test]
async fn a_pcf_serving_diameter_is_bound_with_its_diameter_identity() {
    let specs = Specs::load(&["TS29521_Nbsf_Management", "TS29571_CommonData"]);
    let d = tempfile::tempdir().unwrap();
    let peer = start_bsf(d.path()).await;
    let bsf = peer.base.clone();
    let config = PcfConfig {
        policy: Some(default_project(&d.path().join("policy"))),
        bsf: BsfConfig { enabled: true, api_root: Some(bsf.clone()), ..BsfConfig::default() },
        diameter: DiameterConfig {
            enabled: true,
            listen: "127.0.0.1:0".parse().unwrap(),
            origin_host: "pcf1.epc.example".into(),
            origin_realm: "epc.example".into(),
            ..DiameterConfig::default()
        },
        ..PcfConfig::default()
    };
    let pcf = TestPcf::start_with(d.path(), config).await;
    let c = client();
    let r = c.post(&pcf.sm("")).json(&open5gs_context(12)).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 201, "{}", body(&r));
    let find = format!("{bsf}/nbsf-management/v1/pcfBindings?ipv4Addr=10.45.0.12");
    let r = c.get(&find).send().await.unwrap();
    let binding: Value = body(&r);
    assert_eq!(r.status().as_u16(), 200, "{binding}");
    specs.assert_valid("TS29521_Nbsf_Management", "PcfBinding", &binding);
    assert_eq!(binding["pcfDiamHost"], "pcf1.epc.example");
    assert_eq!(binding["pcfDiamRealm"], "epc.example");
}
