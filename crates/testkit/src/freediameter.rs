//! Debian's freeDiameter (`freeDiameterd`, package `freediameter`) as a real Diameter peer for
//! interop tests: started on 127.0.0.1 only with its configuration in a temp dir, connecting to
//! the peers it is given, and killed by its PID when dropped (its log is printed if the test
//! panicked). Tests call [`binary_or_skip`] first and skip when it is `None`; `./test.sh`
//! installs freeDiameter and sets `FIVECORE_REQUIRE_FREEDIAMETER=1`, so there a missing
//! `freeDiameterd` fails the test instead of skipping it.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// freeDiameterd's Diameter identity and realm.
pub const HOST: &str = "fd.fdrealm";
pub const REALM: &str = "fdrealm";

/// The `freeDiameterd` executable on `PATH`, if installed.
pub fn binary() -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join("freeDiameterd"))
        .find(|p| p.is_file())
}

/// [`binary`], or `None` after printing that the test is skipped; panics instead when
/// `FIVECORE_REQUIRE_FREEDIAMETER=1` (the suite installed it: a skip would hide a broken set-up).
pub fn binary_or_skip() -> Option<PathBuf> {
    let bin = binary();
    if bin.is_none() {
        assert!(
            std::env::var("FIVECORE_REQUIRE_FREEDIAMETER").as_deref() != Ok("1"),
            "FIVECORE_REQUIRE_FREEDIAMETER=1 but freeDiameterd is not installed"
        );
        println!("skipped: freeDiameterd not installed (Debian package freediameter)");
    }
    bin
}

fn extension_dir() -> Option<PathBuf> {
    ["/usr/lib/x86_64-linux-gnu/freeDiameter", "/usr/lib/freeDiameter"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.join("dict_nasreq.fdx").is_file())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A running freeDiameterd; killed by PID on drop.
pub struct FreeDiameter {
    child: Child,
    dir: tempfile::TempDir,
}

impl Drop for FreeDiameter {
    fn drop(&mut self) {
        let _ = self.child.kill(); // SIGKILL to this PID only
        let _ = self.child.wait();
        if std::thread::panicking() {
            if let Ok(log) = std::fs::read_to_string(self.dir.path().join("fd.log")) {
                eprintln!(
                    "---- freeDiameterd log ----\n{}",
                    &log[log.len().saturating_sub(8000)..]
                );
            }
        }
    }
}

/// Starts `bin` as [`HOST`] in [`REALM`], connecting (without TLS) to each `(host, addr)`.
pub fn start(bin: &Path, connect_to: &[(&str, SocketAddr)]) -> FreeDiameter {
    let peers: Vec<Peer> =
        connect_to.iter().map(|(host, addr)| Peer { host, addr: *addr, tls: false }).collect();
    start_with(bin, None, &peers)
}

/// A peer freeDiameterd connects to.
pub struct Peer<'a> {
    pub host: &'a str,
    pub addr: SocketAddr,
    /// TLS from the first byte (freeDiameter's RFC 6733 way, its `SecPort` kind of connection),
    /// else `No_TLS`.
    pub tls: bool,
}

/// freeDiameterd's TLS credentials (PEM files): `TLS_Cred` and `TLS_CA`. Its certificate
/// should name [`HOST`] (a fivecore node checks that it names the Origin-Host of its CER).
pub struct Credentials<'a> {
    pub cert: &'a Path,
    pub key: &'a Path,
    pub ca: &'a Path,
}

/// Starts `bin` as [`HOST`] in [`REALM`] with `tls` credentials (a self-signed certificate
/// when `None`), connecting to each peer.
pub fn start_with(bin: &Path, tls: Option<&Credentials>, connect_to: &[Peer]) -> FreeDiameter {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, ca) = match tls {
        Some(c) => (c.cert.to_owned(), c.key.to_owned(), c.ca.to_owned()),
        None => {
            let ck = rcgen::generate_simple_self_signed(vec![HOST.to_string()]).unwrap();
            std::fs::write(dir.path().join("cert.pem"), ck.cert.pem()).unwrap();
            std::fs::write(dir.path().join("key.pem"), ck.key_pair.serialize_pem()).unwrap();
            (dir.path().join("cert.pem"), dir.path().join("key.pem"), dir.path().join("cert.pem"))
        }
    };
    let mut conf = format!(
        "Identity = \"{HOST}\";\nRealm = \"{REALM}\";\nPort = {};\nSecPort = {};\n\
         ListenOn = \"127.0.0.1\";\nNo_SCTP;\nNo_IPv6;\nTcTimer = 1;\nTwTimer = 6;\n\
         TLS_Cred = \"{}\", \"{}\";\nTLS_CA = \"{}\";\n",
        free_port(),
        free_port(),
        cert.display(),
        key.display(),
        ca.display()
    );
    if let Some(ext) = extension_dir() {
        for e in ["dict_nasreq.fdx", "dict_dcca.fdx", "dict_dcca_3gpp.fdx"] {
            if ext.join(e).is_file() {
                conf += &format!("LoadExtension = \"{}\";\n", ext.join(e).display());
            }
        }
    }
    for p in connect_to {
        conf += &format!(
            "ConnectPeer = \"{}\" {{ ConnectTo = \"127.0.0.1\"; Port = {};{} }};\n",
            p.host,
            p.addr.port(),
            if p.tls { "" } else { " No_TLS;" }
        );
    }
    std::fs::write(dir.path().join("fd.conf"), &conf).unwrap();
    let log = std::fs::File::create(dir.path().join("fd.log")).unwrap();
    let child = Command::new(bin)
        .arg("-c")
        .arg(dir.path().join("fd.conf"))
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("start freeDiameterd");
    FreeDiameter { child, dir }
}
