//! The BSF's Rx proxy over mutual TLS (`[bsf.rx.tls]`, docs/security.md): an AF connects to the
//! BSF's TLS-only listener, the BSF connects to the PCF with `tls = true`, each presenting a
//! certificate of one lab CA naming its Diameter identity; an AAR reaches the PCF through both
//! TLS connections and its AAA comes back.

mod common;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use diameter::dictionary::{base, nasreq, rx};
use diameter::{
    result_code as rc, ApplicationId, DiameterNode, Message, NodeConfig, PeerConfig, Route,
    RouteAction, TlsConfig, Transport,
};
use rcgen::{BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, KeyPair};
use serde_json::json;

use bsf::BsfConfig;
use common::*;

const T: Duration = Duration::from_secs(10);
const BSF_HOST: &str = "bsf.test.example";
const BSF_REALM: &str = "test.example";
const AF_HOST: &str = "pcscf.ims.example";
const PCF_HOST: &str = "pcf1.pcf.example";
const PCF_REALM: &str = "pcf.example";

/// A CA in `dir` and a certificate per host (`<host>.crt`, `<host>.key`) naming it.
fn pki(dir: &Path, hosts: &[&str]) {
    let ca_key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = p.self_signed(&ca_key).unwrap();
    std::fs::write(dir.join("ca.crt"), ca.pem()).unwrap();
    for host in hosts {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(vec![host.to_string()]).unwrap();
        p.extended_key_usages =
            vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        let cert = p.signed_by(&key, &ca, &ca_key).unwrap();
        std::fs::write(dir.join(format!("{host}.crt")), cert.pem()).unwrap();
        std::fs::write(dir.join(format!("{host}.key")), key.serialize_pem()).unwrap();
    }
}

fn tls(dir: &Path, host: &str) -> TlsConfig {
    let mut t = TlsConfig::new(
        dir.join(format!("{host}.crt")),
        dir.join(format!("{host}.key")),
        dir.join("ca.crt"),
    );
    t.listen = Some(SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 0));
    t.plain_listen = false;
    t
}

/// A Diameter node answering Rx requests with 2001: the PCF (TLS listener, the BSF connects
/// to it) or the AF (connects to the BSF over TLS).
async fn node(host: &str, realm: &str, tls: &TlsConfig, bsf: Option<SocketAddr>) -> DiameterNode {
    let mut c = NodeConfig::new(host, realm);
    c.applications = vec![ApplicationId::tgpp(rx::APP_ID)];
    c.accept_unknown_peers = true;
    c.reconnect_min = Duration::from_millis(50);
    c.reconnect_max = Duration::from_millis(200);
    if let Some(addr) = bsf {
        c.peers = vec![PeerConfig::connect(BSF_HOST, addr).transport(Transport::Tls)];
        c.routes = vec![Route::new("*", RouteAction::Relay(vec![BSF_HOST.into()]))];
    }
    c.apply_tls(tls).unwrap();
    if bsf.is_some() {
        c.tls_listen = None;
    }
    let (h, r) = (host.to_owned(), realm.to_owned());
    DiameterNode::builder(c)
        .handler(rx::APP_ID, move |req: Message| {
            let (h, r) = (h.clone(), r.clone());
            async move { Message::answer_to(&req).result_code_avp(rc::DIAMETER_SUCCESS).origin(&h, &r) }
        })
        .start()
        .await
        .unwrap()
}

#[tokio::test]
async fn an_aar_crosses_the_bsf_over_mutual_tls_both_ways() {
    let certs = tempfile::tempdir().unwrap();
    let d = certs.path();
    pki(d, &[BSF_HOST, AF_HOST, PCF_HOST]);
    let pcf = node(PCF_HOST, PCF_REALM, &tls(d, PCF_HOST), None).await;
    let pcf_tls = pcf.tls_local_addr().unwrap();

    // The operator's shape of the configuration.
    let p = |f: &str| d.join(f).display().to_string();
    let config: BsfConfig = toml::from_str(&format!(
        "[rx]\nenabled = true\nlisten = \"127.0.0.1:0\"\norigin_host = \"{BSF_HOST}\"\n\
         origin_realm = \"{BSF_REALM}\"\n\
         [rx.tls]\ncert = \"{}\"\nkey = \"{}\"\nca = \"{}\"\nlisten = \"127.0.0.1:0\"\n\
         plain_listen = false\n\
         [[rx.peers]]\nhost = \"{PCF_HOST}\"\naddr = \"{pcf_tls}\"\ntls = true\n",
        p(&format!("{BSF_HOST}.crt")),
        p(&format!("{BSF_HOST}.key")),
        p("ca.crt"),
    ))
    .unwrap();
    config.validate().unwrap();
    let dir = state_dir();
    let b = TestBsf::start(dir.path(), config).await;
    assert_eq!(b.rx, None, "plain_listen = false: no plain Rx listener");
    let bsf_tls = b.rx_tls.expect("the TLS listener");
    assert!(pcf.wait_open(BSF_HOST, T).await, "the BSF connects to the PCF over TLS");

    let af = node(AF_HOST, "ims.example", &tls(d, AF_HOST), Some(bsf_tls)).await;
    assert!(af.wait_open(BSF_HOST, T).await, "the AF connects to the BSF over TLS");
    let mut body = binding(7);
    body["pcfDiamHost"] = json!(PCF_HOST);
    body["pcfDiamRealm"] = json!(PCF_REALM);
    let r = post(&client(), &b.url("/pcfBindings"), &body).await;
    assert_eq!(r.status().as_u16(), 201);
    let aar = Message::request(rx::APP_ID, rx::CMD_AA)
        .session_id_avp(&af.new_session_id())
        .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
        .origin(AF_HOST, "ims.example")
        .destination(BSF_REALM, None)
        .avp(nasreq::FRAMED_IP_ADDRESS.ipv4_octets(Ipv4Addr::new(10, 0, 0, 7)));
    let aaa = tokio::time::timeout(T, af.request(aar)).await.unwrap().unwrap();
    assert_eq!(aaa.result_code(), Some(rc::DIAMETER_SUCCESS), "{aaa:?}");
    assert_eq!(aaa.origin_host(), Some(PCF_HOST));
    b.stop().await;
}
