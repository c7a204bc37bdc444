//! A real OpenLDAP `slapd` for the LDAP tests, started once per test binary: a temp dir with a
//! slapd.conf (mdb backend; core, cosine and inetOrgPerson schemas plus `pcrf.schema` beside this
//! file), the directory loaded with `slapadd`, slapd on 127.0.0.1 on a port the system chose,
//! with its `stats` log (one `SRCH` line per search, one `ACCEPT` per connection) in a file the
//! tests read. A shell started with it holds its PID and a pipe from this process: when the
//! test binary exits, however it exits, the pipe closes and the shell kills slapd by that PID and
//! removes the temp dir.
//!
//! Also [`Proxy`], a TCP relay in front of slapd that a test can make slow or cut, to see the
//! PCF's timeouts and reconnects without disturbing the slapd other tests share.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::OnceCell;

pub const BASE_DN: &str = "ou=subscribers,dc=example,dc=com";
pub const BIND_DN: &str = "cn=pcrf,ou=system,dc=example,dc=com";
pub const BIND_PASSWORD: &str = "pcrf-secret";

/// One subscriber entry: IMSI, MSISDN, class, services, downlink APN-AMBR.
pub struct Sub<'a> {
    pub imsi: &'a str,
    pub msisdn: &'a str,
    pub class: &'a str,
    pub services: &'a [&'a str],
    pub ambr_dl: Option<&'a str>,
}

pub struct Slapd {
    pub url: String,
    pub addr: SocketAddr,
    log: PathBuf,
    // Held until the process exits: its end is what stops slapd.
    _supervisor: Mutex<(Child, ChildStdin)>,
}

static SLAPD: OnceCell<Option<Slapd>> = OnceCell::const_new();

fn find(cmd: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    // /usr/sbin is where Debian puts slapd, and is not on every user's PATH.
    let found = path
        .split(':')
        .chain(["/usr/sbin", "/sbin"])
        .map(|d| Path::new(d).join(cmd))
        .find(|p| p.is_file());
    found
}

/// The shared slapd, started by the first test that asks; None (the test is skipped, with a
/// note) when slapd is not installed, unless `FIVECORE_REQUIRE_SLAPD=1` (./test.sh installs it
/// and sets it), where it fails.
pub async fn slapd(subs: fn() -> Vec<Sub<'static>>) -> Option<&'static Slapd> {
    SLAPD
        .get_or_init(|| async move {
            let (Some(slapd), Some(slapadd)) = (find("slapd"), find("slapadd")) else {
                assert!(
                    std::env::var("FIVECORE_REQUIRE_SLAPD").as_deref() != Ok("1"),
                    "FIVECORE_REQUIRE_SLAPD=1 but slapd is not installed (Debian package slapd)"
                );
                eprintln!("skipped: slapd not installed (Debian package slapd)");
                return None;
            };
            let entries = subs();
            let ldif = ldif(&entries);
            Some(tokio::task::spawn_blocking(move || start(&slapd, &slapadd, &ldif)).await.unwrap())
        })
        .await
        .as_ref()
}

fn ldif(subs: &[Sub]) -> String {
    let mut s = format!(
        "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\no: example\ndc: example\n\n\
         dn: ou=system,dc=example,dc=com\nobjectClass: organizationalUnit\nou: system\n\n\
         dn: {BIND_DN}\nobjectClass: person\nobjectClass: simpleSecurityObject\ncn: pcrf\nsn: pcrf\n\
         userPassword: {BIND_PASSWORD}\n\n\
         dn: {BASE_DN}\nobjectClass: organizationalUnit\nou: subscribers\n\n"
    );
    for sub in subs {
        s.push_str(&format!(
            "dn: uid={imsi},{BASE_DN}\nobjectClass: inetOrgPerson\nobjectClass: pcrfSubscriber\n\
             uid: {imsi}\ncn: {imsi}\nsn: {imsi}\nimsi: {imsi}\nmsisdn: {msisdn}\npcrfClass: {class}\n",
            imsi = sub.imsi,
            msisdn = sub.msisdn,
            class = sub.class
        ));
        for svc in sub.services {
            s.push_str(&format!("pcrfService: {svc}\n"));
        }
        if let Some(a) = sub.ambr_dl {
            s.push_str(&format!("pcrfAmbrDownlink: {a}\n"));
        }
        s.push('\n');
    }
    s
}

fn start(slapd: &Path, slapadd: &Path, ldif: &str) -> Slapd {
    let dir = tempfile::Builder::new().prefix("fivecore-slapd").tempdir().unwrap().keep();
    let schema = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/ldap/pcrf.schema");
    std::fs::create_dir_all(dir.join("db")).unwrap();
    let conf = dir.join("slapd.conf");
    std::fs::write(
        &conf,
        format!(
            "include /etc/ldap/schema/core.schema\n\
             include /etc/ldap/schema/cosine.schema\n\
             include /etc/ldap/schema/inetorgperson.schema\n\
             include {schema}\n\
             modulepath /usr/lib/ldap\nmoduleload back_mdb\n\
             pidfile {dir}/slapd.pid\n\
             database mdb\nmaxsize 104857600\nsuffix \"dc=example,dc=com\"\n\
             rootdn \"cn=admin,dc=example,dc=com\"\ndirectory {dir}/db\nindex imsi,msisdn eq\n\
             access to attrs=userPassword by anonymous auth by * none\n\
             access to * by dn.exact=\"{BIND_DN}\" read by * none\n",
            schema = schema.display(),
            dir = dir.display(),
        ),
    )
    .unwrap();
    let data = dir.join("data.ldif");
    std::fs::write(&data, ldif).unwrap();
    let out = Command::new(slapadd).arg("-f").arg(&conf).arg("-l").arg(&data).output().unwrap();
    assert!(out.status.success(), "slapadd: {}", String::from_utf8_lossy(&out.stderr));
    let log = dir.join("slapd.log");
    // The port is chosen by the system for a moment's listener, then given to slapd (it cannot
    // report a port it chose itself); another process taking it in between makes slapd exit,
    // and the next port is tried.
    for _ in 0..5 {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let url = format!("ldap://127.0.0.1:{port}");
        let script = format!(
            "'{slapd}' -f '{conf}' -h '{url}/' -d stats >'{log}' 2>&1 </dev/null &\n\
             pid=$!\necho $pid\nread _\nkill $pid 2>/dev/null\nwait $pid\nrm -rf '{dir}'\n",
            slapd = slapd.display(),
            conf = conf.display(),
            log = log.display(),
            dir = dir.display(),
        );
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(&script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let pid: u32 = line.trim().parse().unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        for _ in 0..100 {
            if std::net::TcpStream::connect(addr).is_ok() {
                return Slapd { url, addr, log, _supervisor: Mutex::new((child, stdin)) };
            }
            if !Path::new(&format!("/proc/{pid}")).exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        drop(stdin);
        let _ = child.wait();
    }
    panic!("slapd did not start; its log: {}", std::fs::read_to_string(&log).unwrap_or_default());
}

impl Slapd {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Searches slapd logged whose filter is exactly `filter`.
    pub fn searches(&self, filter: &str) -> usize {
        let needle = format!(" filter=\"{filter}\"");
        self.log().lines().filter(|l| l.contains(" SRCH base=") && l.ends_with(&needle)).count()
    }

    /// Appends to the log so a failing assertion can show it.
    pub fn tail(&self, n: usize) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

/// A relay from a loopback port to slapd: counts connections (and the most open at once),
/// delays slapd's answers by `delay_ms` when set, and can cut every connection it relays.
pub struct Proxy {
    pub url: String,
    pub accepted: Arc<AtomicU64>,
    pub max_open: Arc<AtomicU64>,
    pub delay_ms: Arc<AtomicU64>,
    tasks: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    pub async fn start(to: SocketAddr) -> Proxy {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ldap://{}", l.local_addr().unwrap());
        let accepted = Arc::new(AtomicU64::new(0));
        let max_open = Arc::new(AtomicU64::new(0));
        let open = Arc::new(AtomicU64::new(0));
        let delay_ms = Arc::new(AtomicU64::new(0));
        let tasks: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>> = Arc::default();
        let (a, m, o, d, t) =
            (accepted.clone(), max_open.clone(), open.clone(), delay_ms.clone(), tasks.clone());
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = l.accept().await {
                a.fetch_add(1, Ordering::SeqCst);
                let now = o.fetch_add(1, Ordering::SeqCst) + 1;
                m.fetch_max(now, Ordering::SeqCst);
                let (o, d) = (o.clone(), d.clone());
                t.lock().unwrap().push(tokio::spawn(async move {
                    // Dropped when the relay ends or is cut (an aborted task drops its future).
                    let _open = Open(o);
                    if let Ok(server) = TcpStream::connect(to).await {
                        relay(client, server, d).await;
                    }
                }));
            }
        });
        Proxy { url, accepted, max_open, delay_ms, tasks, accept }
    }

    /// Closes every connection relayed so far (as a directory restart would).
    pub fn cut(&self) {
        for t in self.tasks.lock().unwrap().drain(..) {
            t.abort();
        }
    }
}

struct Open(Arc<AtomicU64>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

async fn relay(client: TcpStream, server: TcpStream, delay_ms: Arc<AtomicU64>) {
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let up = async move {
        let mut buf = vec![0u8; 16384];
        while let Ok(n) = cr.read(&mut buf).await {
            if n == 0 || sw.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
    };
    let down = async move {
        let mut buf = vec![0u8; 16384];
        while let Ok(n) = sr.read(&mut buf).await {
            if n == 0 {
                break;
            }
            let d = delay_ms.load(Ordering::SeqCst);
            if d > 0 {
                tokio::time::sleep(Duration::from_millis(d)).await;
            }
            if cw.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
    };
    tokio::select! { _ = up => {}, _ = down => {} }
}
