//! Mutual TLS between Diameter nodes over real sockets on 127.0.0.1 (crate::tls): TLS from the
//! first byte, client certificates of the CA required, the certificate naming the Origin-Host,
//! and certificates renewed without a restart. The PKI is made here with rcgen, in a temp dir.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use diameter::dictionary::{base, rx};
use diameter::transport::FrameReader;
use diameter::{
    result_code as rc, ApplicationId, DiameterNode, Message, NodeConfig, PeerConfig, PeerState,
    TlsConfig, Transport, VENDOR_3GPP,
};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const T: Duration = Duration::from_secs(10);
const LOCAL: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 0);
const SERVER: &str = "pcrf.test";
const REALM: &str = "test";
const CLIENT: &str = "af.test";

fn init_log() {
    let _ =
        tracing_subscriber::fmt().with_env_filter("diameter=debug").with_test_writer().try_init();
}

/// A lab CA writing its certificates into a directory.
struct Ca {
    dir: PathBuf,
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Ca {
    fn new(dir: &Path, name: &str) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name.push(DnType::CommonName, name);
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        let cert = p.self_signed(&key).unwrap();
        let dir = dir.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        write(&dir.join("ca.crt"), &cert.pem());
        Ca { dir, cert, key }
    }

    fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// A certificate naming `dns`, for server and client use, written as `<stem>.crt/.key`
    /// (replacing the files a node may be reading). Returns the certificate's DER.
    fn issue(&self, stem: &str, dns: &str) -> Vec<u8> {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(vec![dns.to_owned()]).unwrap();
        p.distinguished_name.push(DnType::CommonName, dns);
        p.extended_key_usages =
            vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        let cert = p.signed_by(&key, &self.cert, &self.key).unwrap();
        write(&self.dir.join(format!("{stem}.key")), &key.serialize_pem());
        write(&self.dir.join(format!("{stem}.crt")), &cert.pem());
        cert.der().to_vec()
    }

    /// The TLS section of a node using `<stem>.crt/.key` and trusting `trust`'s CA.
    fn tls(&self, stem: &str, trust: &Ca) -> TlsConfig {
        TlsConfig::new(
            self.dir.join(format!("{stem}.crt")),
            self.dir.join(format!("{stem}.key")),
            trust.ca_file(),
        )
    }
}

/// Replaces a file whole (write, then rename), as a certificate renewal tool does.
fn write(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A TLS-only server (`plain_listen = false`) answering Rx requests with 2001.
async fn tls_server(mut tls: TlsConfig) -> DiameterNode {
    tls.listen = Some(LOCAL);
    tls.plain_listen = false;
    let mut c = NodeConfig::new(SERVER, REALM);
    c.listen = Some(LOCAL);
    c.accept_unknown_peers = true;
    c.applications = vec![ApplicationId::tgpp(rx::APP_ID)];
    c.apply_tls(&tls).unwrap();
    DiameterNode::builder(c)
        .handler(rx::APP_ID, |req: Message| async move {
            Message::answer_to(&req).result_code_avp(rc::DIAMETER_SUCCESS)
        })
        .start()
        .await
        .unwrap()
}

/// A node connecting to the server over TLS.
async fn tls_client(host: &str, tls: &TlsConfig, server: SocketAddr) -> DiameterNode {
    let mut c = NodeConfig::new(host, "af");
    c.applications = vec![ApplicationId::tgpp(rx::APP_ID)];
    c.peers = vec![PeerConfig::connect(SERVER, server).transport(Transport::Tls)];
    c.reconnect_min = Duration::from_millis(100);
    c.reconnect_max = Duration::from_millis(300);
    c.apply_tls(tls).unwrap();
    DiameterNode::builder(c).start().await.unwrap()
}

fn str_req(node: &DiameterNode) -> Message {
    Message::request(rx::APP_ID, rx::CMD_SESSION_TERMINATION)
        .session_id_avp(&node.new_session_id())
        .origin(node.origin_host(), node.origin_realm())
        .destination(REALM, None)
        .avp(base::AUTH_APPLICATION_ID.u32(rx::APP_ID))
        .avp(base::TERMINATION_CAUSE.enumerated(1))
}

fn cer(host: &str) -> Message {
    Message::request(base::APP_ID, base::CMD_CAPABILITIES_EXCHANGE)
        .ids(1, 1)
        .origin(host, "af")
        .avp(base::HOST_IP_ADDRESS.address(Ipv4Addr::LOCALHOST.into()))
        .avp(base::VENDOR_ID.u32(0))
        .avp(base::PRODUCT_NAME.utf8("raw"))
        .avp(diameter::builders::vendor_specific_auth_app(VENDOR_3GPP, rx::APP_ID))
}

/// `diameter_connections_refused_total{reason}` of a node.
fn refused(node: &DiameterNode, reason: &str) -> u64 {
    let mut r = prometheus_client::registry::Registry::default();
    node.register_metrics(&mut r);
    let mut s = String::new();
    prometheus_client::encoding::text::encode(&mut s, &r).unwrap();
    let key = format!("diameter_connections_refused_total{{reason=\"{reason}\"}} ");
    s.lines().find_map(|l| l.strip_prefix(&key)).map_or(0, |n| n.parse().unwrap())
}

/// A raw TLS client of the server: its own rustls configuration (a client certificate or
/// none), so that what the server does with each is seen directly.
struct Raw {
    reader: FrameReader,
    writer: tokio::io::WriteHalf<tokio_rustls::client::TlsStream<TcpStream>>,
    server_cert: Vec<u8>,
}

async fn raw_tls(
    addr: SocketAddr,
    ca: &Path,
    client: Option<(PathBuf, PathBuf)>,
) -> std::io::Result<Raw> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let b = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots);
    let config = match client {
        Some((cert, key)) => b
            .with_client_auth_cert(
                CertificateDer::pem_file_iter(cert).unwrap().map(Result::unwrap).collect(),
                PrivateKeyDer::from_pem_file(key).unwrap(),
            )
            .unwrap(),
        None => b.with_no_client_auth(),
    };
    let tcp = TcpStream::connect(addr).await?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from(SERVER).unwrap(), tcp)
        .await?;
    let server_cert = tls.get_ref().1.peer_certificates().unwrap()[0].to_vec();
    let (r, writer) = tokio::io::split(tls);
    Ok(Raw { reader: FrameReader::new(Box::new(r)), writer, server_cert })
}

impl Raw {
    /// Sends `m`; the next message back, `None` when the server closed or the read failed.
    async fn exchange(&mut self, m: &Message) -> Option<Message> {
        self.writer.write_all(&m.to_bytes().unwrap()).await.ok()?;
        match tokio::time::timeout(T, self.reader.next()).await.expect("no answer in time") {
            Ok(Some(b)) => Some(Message::decode(b).unwrap()),
            _ => None,
        }
    }
}

#[tokio::test]
async fn cer_cea_and_requests_over_mutual_tls() {
    init_log();
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    ca.issue("server", SERVER);
    ca.issue("client", CLIENT);
    let s = tls_server(ca.tls("server", &ca)).await;
    assert_eq!(s.local_addr(), None, "plain_listen = false: no plain listener");
    let addr = s.tls_local_addr().unwrap();
    let c = tls_client(CLIENT, &ca.tls("client", &ca), addr).await;
    assert!(c.wait_open(SERVER, T).await, "the TLS peer opens");
    assert!(s.wait_peer(CLIENT, T, |st| st == PeerState::ROpen).await);
    let caps = c.peers()[0].capabilities.clone().unwrap();
    assert!(caps.inband_security.is_empty(), "no Inband-Security-Id over TLS: {caps:?}");
    for _ in 0..3 {
        let a = c.request(str_req(&c)).await.unwrap();
        assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS));
        assert_eq!(a.origin_host(), Some(SERVER));
    }
    assert!(c.disconnect(SERVER, 0).await, "DPR/DPA over TLS");
    assert_eq!(refused(&s, "tls_handshake") + refused(&s, "peer_identity"), 0);
}

#[tokio::test]
async fn clients_without_a_certificate_of_the_ca_fail_the_handshake() {
    init_log();
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let other = Ca::new(dir.path(), "other");
    ca.issue("server", SERVER);
    other.issue("client", CLIENT);
    let s = tls_server(ca.tls("server", &ca)).await;
    let addr = s.tls_local_addr().unwrap();

    // No certificate: the server ends the handshake; no CEA ever comes.
    match raw_tls(addr, &ca.ca_file(), None).await {
        Err(_) => {}
        Ok(mut raw) => assert!(raw.exchange(&cer(CLIENT)).await.is_none(), "served without a cert"),
    }
    // A certificate of another CA, from a node that trusts the server: never opens.
    let c = tls_client(CLIENT, &other.tls("client", &ca), addr).await;
    assert!(!c.wait_open(SERVER, Duration::from_secs(2)).await, "another CA's client opened");
    assert_eq!(s.peer_state(CLIENT), None, "the server never saw a CER");
    assert!(refused(&s, "tls_handshake") >= 2, "handshake failures counted");
    c.shutdown().await;

    // The other way: a server whose certificate is not of the CA the client trusts.
    let s2 = tls_server(other.tls("client", &other)).await;
    let c2 = tls_client(CLIENT, &ca.tls("server", &ca), s2.tls_local_addr().unwrap()).await;
    assert!(!c2.wait_open(SERVER, Duration::from_secs(2)).await);
    assert!(refused(&c2, "tls_handshake") >= 1, "counted at the client");
}

#[tokio::test]
async fn a_certificate_must_name_the_origin_host() {
    init_log();
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    ca.issue("server", SERVER);
    ca.issue("impostor", "impostor.test");
    ca.issue("client", CLIENT);
    let s = tls_server(ca.tls("server", &ca)).await;
    let addr = s.tls_local_addr().unwrap();
    let files =
        |stem: &str| Some((ca.dir.join(format!("{stem}.crt")), ca.dir.join(format!("{stem}.key"))));

    // A valid certificate of the CA, naming another host than the CER's Origin-Host: 3010, closed.
    let mut raw = raw_tls(addr, &ca.ca_file(), files("impostor")).await.unwrap();
    let cea = raw.exchange(&cer(CLIENT)).await.expect("a CEA");
    assert_eq!(cea.result_code(), Some(rc::DIAMETER_UNKNOWN_PEER));
    assert!(cea.header.flags & diameter::header::FLAG_ERROR != 0, "E bit on 3010");
    assert!(raw.exchange(&cer(CLIENT)).await.is_none(), "the connection is closed");
    assert_eq!(refused(&s, "peer_identity"), 1);
    assert_eq!(s.peer_state(CLIENT), None);
    // The same path with the host's own certificate is served.
    let mut raw = raw_tls(addr, &ca.ca_file(), files("client")).await.unwrap();
    let cea = raw.exchange(&cer(CLIENT)).await.expect("a CEA");
    assert_eq!(cea.result_code(), Some(rc::DIAMETER_SUCCESS));

    // Outbound: a server whose certificate names another host than the peer we connect to is
    // refused by the client's handshake.
    let wrong = tls_server(ca.tls("impostor", &ca)).await;
    let c = tls_client("af2.test", &ca.tls("client", &ca), wrong.tls_local_addr().unwrap()).await;
    assert!(!c.wait_open(SERVER, Duration::from_secs(2)).await);
    assert!(refused(&c, "tls_handshake") >= 1);
}

#[tokio::test]
async fn renewed_certificates_are_used_by_the_next_connections_without_a_restart() {
    init_log();
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let other = Ca::new(dir.path(), "other");
    let first = ca.issue("server", SERVER);
    ca.issue("client", CLIENT);
    let mut tls = ca.tls("server", &ca);
    tls.reload_secs = 1;
    let s = tls_server(tls).await;
    let addr = s.tls_local_addr().unwrap();
    let client_files = Some((ca.dir.join("client.crt"), ca.dir.join("client.key")));

    // The server's certificate renewed: a connection opened before keeps going, the next ones
    // get the new certificate.
    let mut old = raw_tls(addr, &ca.ca_file(), client_files.clone()).await.unwrap();
    assert_eq!(old.server_cert, first);
    assert_eq!(old.exchange(&cer(CLIENT)).await.unwrap().result_code(), Some(2001));
    let renewed = ca.issue("server", SERVER);
    assert_ne!(renewed, first);
    let deadline = tokio::time::Instant::now() + T;
    loop {
        let raw = raw_tls(addr, &ca.ca_file(), client_files.clone()).await.unwrap();
        if raw.server_cert == renewed {
            break;
        }
        assert_eq!(raw.server_cert, first);
        assert!(tokio::time::Instant::now() < deadline, "the renewed certificate never served");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let dwr = Message::request(base::APP_ID, base::CMD_DEVICE_WATCHDOG)
        .ids(2, 2)
        .origin(CLIENT, "af")
        .avp(base::ORIGIN_STATE_ID.u32(1));
    let dwa = old.exchange(&dwr).await.expect("the old connection still answers");
    assert_eq!((dwa.command_code(), dwa.result_code()), (base::CMD_DEVICE_WATCHDOG, Some(2001)));

    // A client's own certificate renewed: one of another CA is refused, the renewed one (of the
    // server's CA) opens the peer, without restarting the client.
    other.issue("client", CLIENT);
    let mut ctls = other.tls("client", &ca);
    ctls.reload_secs = 1;
    let c = tls_client(CLIENT, &ctls, addr).await;
    assert!(!c.wait_open(SERVER, Duration::from_secs(1)).await);
    let cert = std::fs::read_to_string(ca.dir.join("client.crt")).unwrap();
    let key = std::fs::read_to_string(ca.dir.join("client.key")).unwrap();
    // The key first, then the certificate: between the two the set does not load and the old
    // one stays in force.
    write(&other.dir.join("client.key"), &key);
    write(&other.dir.join("client.crt"), &cert);
    assert!(c.wait_open(SERVER, T).await, "the renewed client certificate is used");
    let a = c.request(str_req(&c)).await.unwrap();
    assert_eq!(a.result_code(), Some(2001));
}
