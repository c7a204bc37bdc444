//! TLS on the PCF's Gx with a real peer: Debian's freeDiameter (`freeDiameterd`) connects to
//! `fivecore pcf` over TLS from the first byte (RFC 6733 §2.1, freeDiameter's default for a
//! peer without `No_TLS` or `TLS_old_method`), both ends presenting certificates of a lab PKI
//! made by `fivecore cert`, and relays a PGW's CCR-I to it. The PCF's plain listener is off
//! (`plain_listen = false`), so an answer can only have come over TLS.
//!
//! Skipped (with a message) when freeDiameterd is not installed, unless
//! FIVECORE_REQUIRE_FREEDIAMETER=1 (set by ./test.sh, which installs it).

use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use diameter::dictionary::{base, dcca, gx};
use diameter::{
    result_code as rc, ApplicationId, DiameterNode, Message, NodeConfig, PeerConfig, Route,
    RouteAction,
};
use testkit::freediameter::{self as fd, Credentials, Peer, HOST as FD_HOST};

const T: Duration = Duration::from_secs(20);
const PCF_HOST: &str = "pcrf.fivecore.test";
const PCF_REALM: &str = "fivecore.test";
const PGW_HOST: &str = "pgw.epc.test";
const PGW_REALM: &str = "epc.test";

fn fivecore(args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_fivecore")).args(args).output().unwrap();
    assert!(out.status.success(), "fivecore {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The PCF process, killed by its PID when dropped (its log printed if the test failed).
struct Pcf(Child);

impl Drop for Pcf {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        if std::thread::panicking() {
            let mut log = String::new();
            if let Some(e) = self.0.stderr.as_mut() {
                let _ = e.read_to_string(&mut log);
            }
            eprintln!("---- fivecore pcf log ----\n{}", &log[log.len().saturating_sub(8000)..]);
        }
    }
}

fn wait_ready(pcf: &mut Pcf, port: u16) {
    use std::io::Write;
    let deadline = std::time::Instant::now() + T;
    loop {
        assert!(pcf.0.try_wait().unwrap().is_none(), "fivecore pcf exited early");
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            let _ =
                s.write_all(b"GET /healthz/ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
            let mut answer = String::new();
            let _ = s.read_to_string(&mut answer);
            if answer.starts_with("HTTP/1.1 200") {
                return;
            }
        }
        assert!(std::time::Instant::now() < deadline, "fivecore pcf not ready on {port}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn ccr_i(pgw: &DiameterNode) -> Message {
    Message::request(gx::APP_ID, gx::CMD_CREDIT_CONTROL)
        .session_id_avp(&pgw.new_session_id())
        .avp(base::AUTH_APPLICATION_ID.u32(gx::APP_ID))
        .origin(PGW_HOST, PGW_REALM)
        .destination(PCF_REALM, None)
        .avp(dcca::CC_REQUEST_TYPE.enumerated(1))
        .avp(dcca::CC_REQUEST_NUMBER.u32(0))
        .avp(diameter::builders::subscription_id(
            dcca::subscription_id_type::END_USER_IMSI,
            "001010000000001",
        ))
        .avp(
            diameter::dictionary::nasreq::FRAMED_IP_ADDRESS
                .ipv4_octets(Ipv4Addr::new(10, 45, 0, 9)),
        )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn freediameter_reaches_the_pcfs_gx_over_mutual_tls() {
    let Some(bin) = fd::binary_or_skip() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pki = d.join("pki");
    let pki_s = pki.to_str().unwrap();
    // The lab PKI: the PCF's certificate names its Diameter identity, freeDiameter's its own.
    fivecore(&["cert", "ca", "--out", pki_s]);
    fivecore(&["cert", "nf", "--ca", pki_s, "--nf-type", "PCF", "--dns", PCF_HOST]);
    fivecore(&["cert", "nf", "--ca", pki_s, "--nf-type", "PCEF", "--dns", FD_HOST, "--name", "fd"]);

    let (sbi, tls_port) = (free_port(), free_port());
    let config = d.join("pcf.toml");
    std::fs::write(
        &config,
        format!(
            "[pcf.diameter]\nenabled = true\nlisten = \"127.0.0.1:{plain}\"\n\
             origin_host = \"{PCF_HOST}\"\norigin_realm = \"{PCF_REALM}\"\n\
             [pcf.diameter.tls]\ncert = \"{pki_s}/pcf.crt\"\nkey = \"{pki_s}/pcf.key\"\n\
             ca = \"{pki_s}/ca.crt\"\nlisten = \"127.0.0.1:{tls_port}\"\nplain_listen = false\n",
            plain = free_port(),
        ),
    )
    .unwrap();
    let mut pcf = Pcf(Command::new(env!("CARGO_BIN_EXE_fivecore"))
        .args(["pcf", "--listen", &format!("127.0.0.1:{sbi}"), "--config"])
        .arg(&config)
        .arg("--data-dir")
        .arg(d.join("pcf-data"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap());
    wait_ready(&mut pcf, sbi);

    // The PGW: our node, reached by freeDiameter on plain TCP, routing the PCF's realm to it.
    let mut c = NodeConfig::new(PGW_HOST, PGW_REALM);
    c.listen = Some(SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 0));
    c.applications = vec![ApplicationId::tgpp(gx::APP_ID)];
    c.peers = vec![PeerConfig::accept(FD_HOST)];
    c.routes = vec![Route::new(PCF_REALM, RouteAction::Relay(vec![FD_HOST.into()]))];
    let pgw = DiameterNode::builder(c).start().await.unwrap();

    let (cert, key, ca) = (pki.join("fd.crt"), pki.join("fd.key"), pki.join("ca.crt"));
    let _fd = fd::start_with(
        &bin,
        Some(&Credentials { cert: &cert, key: &key, ca: &ca }),
        &[
            Peer { host: PGW_HOST, addr: pgw.local_addr().unwrap(), tls: false },
            Peer { host: PCF_HOST, addr: SocketAddr::from(([127, 0, 0, 1], tls_port)), tls: true },
        ],
    );
    assert!(pgw.wait_open(FD_HOST, T).await, "freeDiameterd connects to the PGW");
    // freeDiameterd answers 3002 until its TLS connection to the PCF is open.
    let deadline = tokio::time::Instant::now() + T;
    let cca = loop {
        let a =
            tokio::time::timeout(T, pgw.request(ccr_i(&pgw))).await.expect("timed out").unwrap();
        if a.result_code() != Some(rc::DIAMETER_UNABLE_TO_DELIVER) {
            break a;
        }
        assert!(tokio::time::Instant::now() < deadline, "never routed to the PCF over TLS: {a:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(cca.result_code(), Some(rc::DIAMETER_SUCCESS), "{cca:?}");
    assert_eq!(cca.origin_host(), Some(PCF_HOST));
    assert_eq!(cca.get_u32(&dcca::CC_REQUEST_TYPE), Some(1));

    // A freeDiameter with a certificate of another CA (naming its identity: freeDiameter will
    // not start with a certificate that does not) is refused at the handshake, and counted.
    let pki2 = d.join("pki2");
    let pki2_s = pki2.to_str().unwrap();
    fivecore(&["cert", "ca", "--out", pki2_s]);
    fivecore(&[
        "cert",
        "nf",
        "--ca",
        pki2_s,
        "--nf-type",
        "PCEF",
        "--dns",
        FD_HOST,
        "--name",
        "fd",
    ]);
    let (cert, key, ca2) = (pki2.join("fd.crt"), pki2.join("fd.key"), pki2.join("ca.crt"));
    let _stranger = fd::start_with(
        &bin,
        Some(&Credentials { cert: &cert, key: &key, ca: &ca2 }),
        &[Peer { host: PCF_HOST, addr: SocketAddr::from(([127, 0, 0, 1], tls_port)), tls: true }],
    );
    let deadline = std::time::Instant::now() + T;
    loop {
        let page = http_get(sbi, "/metrics");
        if page.contains("diameter_connections_refused_total{reason=\"tls_handshake\"}") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no handshake refusal counted: {page}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The first freeDiameter's connection is not disturbed.
    let a = tokio::time::timeout(T, pgw.request(ccr_i(&pgw))).await.expect("timed out").unwrap();
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS));
}

fn http_get(port: u16, path: &str) -> String {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer
}
