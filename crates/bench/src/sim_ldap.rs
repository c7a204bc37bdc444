//! The LDAP directory simulator (kind `ldap`): a real OpenLDAP `slapd` on 127.0.0.1, loaded with
//! one entry per subscriber of the scenario's `[generators]` range, for the PCF's `[pcf.ldap]`
//! (`{sim_addr:NAME}` is its address). A real server rather than an LDAP responder of the kit's
//! own: the PCF's pool, filters and attribute handling then meet the directory operators run.
//!
//! Start: a temporary directory with a slapd.conf (mdb backend; core and cosine schemas plus
//! `sim_ldap/pcrf.schema`, a copy of the PCF tests' schema: the kit depends on no NF crate), the
//! entries generated as LDIF and streamed into one `slapadd -q` (a bulk load: 50,000 entries in
//! 0.9 s here), then slapd with its `stats` log in a file. A shell started with it holds
//! its PID and a pipe from the kit: when the simulator is dropped, or the kit exits however it
//! exits, the pipe closes and the shell kills slapd by that PID and removes the directory.
//!
//! Counting: slapd logs one `SRCH base=` line per search; a thread reads the log as it grows and
//! adds them to the simulator's `received` and `items`, so an egress row counts the searches the
//! directory served, independently of what the PCF says it asked.

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::scenario::{Generators, Simulator};
use crate::sim::SimCounters;

/// The suffix, where the subscribers are, and the PCF's bind identity (`[pcf.ldap]`).
pub const SUFFIX: &str = "dc=example,dc=com";
pub const BASE_DN: &str = "ou=subscribers,dc=example,dc=com";
pub const BIND_DN: &str = "cn=pcrf,ou=system,dc=example,dc=com";
pub const BIND_PASSWORD: &str = "pcrf-secret";

const SCHEMA: &str = include_str!("sim_ldap/pcrf.schema");

/// The profile of subscriber `msin`: its class and services, by `msin % 4` (a quarter gold with
/// video and voice, half silver, one of them with video, a quarter bronze without services),
/// so a project's class and service rules all fire under load.
pub fn profile(msin: u64) -> (&'static str, &'static [&'static str]) {
    match msin % 4 {
        0 => ("gold", &["video", "voice"]),
        1 => ("silver", &["video"]),
        2 => ("silver", &[]),
        _ => ("bronze", &[]),
    }
}

/// A running slapd. Dropping it stops slapd (by PID) and removes its files.
pub struct Directory {
    pub addr: SocketAddr,
    /// Entries loaded: one per subscriber.
    pub subscribers: u64,
    stop: Arc<AtomicBool>,
    tail: Option<std::thread::JoinHandle<()>>,
    // Closing the shell's stdin is what stops slapd.
    supervisor: Option<(Child, ChildStdin)>,
}

impl Drop for Directory {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some((mut child, stdin)) = self.supervisor.take() {
            drop(stdin);
            let _ = child.wait();
        }
        if let Some(t) = self.tail.take() {
            let _ = t.join();
        }
    }
}

/// Where `cmd` is: PATH, then /usr/sbin and /sbin (Debian's place for slapd, not on every
/// user's PATH).
fn find(cmd: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/usr/sbin", "/sbin"])
        .map(|d| Path::new(d).join(cmd))
        .find(|p| p.is_file());
    found
}

/// Loads and starts the directory of `sim` with the subscribers of `g` (blocking: slapadd of a
/// large range takes seconds; call it off the runtime's workers).
pub fn start(
    sim: &Simulator,
    g: &Generators,
    counters: Arc<SimCounters>,
) -> std::io::Result<Directory> {
    let err = |m: String| std::io::Error::other(format!("simulator {}: {m}", sim.name));
    let (Some(slapd), Some(slapadd)) = (find("slapd"), find("slapadd")) else {
        return Err(err(
            "slapd and slapadd not found on PATH or in /usr/sbin: install OpenLDAP (Debian package slapd)"
                .into(),
        ));
    };
    let dir = tempfile::Builder::new().prefix("fivecore-bench-ldap").tempdir()?.keep();
    let loaded = load(&dir, &slapadd, g).map_err(|e| err(format!("{e}")));
    let dir_guard = RemoveOnError(Some(dir.clone()));
    loaded?;
    let log = dir.join("slapd.log");
    // The port is chosen by the system for a moment's listener, then given to slapd (it cannot
    // report a port it chose itself); another process taking it in between makes slapd exit,
    // and the next port is tried.
    for _ in 0..5 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let script = format!(
            "'{slapd}' -f '{conf}' -h 'ldap://{addr}/' -d stats >'{log}' 2>&1 </dev/null &\n\
             pid=$!\necho $pid\nread _\nkill $pid 2>/dev/null\nwait $pid\nrm -rf '{dir}'\n",
            slapd = slapd.display(),
            conf = dir.join("slapd.conf").display(),
            log = log.display(),
            dir = dir.display(),
        );
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(&script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let stdin = child.stdin.take().expect("piped");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line)?;
        let pid: u32 = line.trim().parse().map_err(|_| err(format!("no slapd PID: {line:?}")))?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if std::net::TcpStream::connect(addr).is_ok() {
                std::mem::forget(dir_guard);
                let stop = Arc::new(AtomicBool::new(false));
                let tail = {
                    let (stop, log) = (stop.clone(), log.clone());
                    std::thread::Builder::new()
                        .name("bench-ldap-log".into())
                        .spawn(move || count_searches(&log, &counters, &stop))?
                };
                return Ok(Directory {
                    addr,
                    subscribers: g.supi_count,
                    stop,
                    tail: Some(tail),
                    supervisor: Some((child, stdin)),
                });
            }
            if !Path::new(&format!("/proc/{pid}")).exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        drop(stdin);
        let _ = child.wait();
    }
    let tail = std::fs::read_to_string(&log).unwrap_or_default();
    let tail: Vec<&str> =
        tail.lines().rev().take(20).collect::<Vec<_>>().into_iter().rev().collect();
    Err(err(format!("slapd did not start; its log:\n{}", tail.join("\n"))))
}

/// Removes the directory unless forgotten (once the shell owns it).
struct RemoveOnError(Option<PathBuf>);

impl Drop for RemoveOnError {
    fn drop(&mut self) {
        if let Some(d) = self.0.take() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// Writes the schema and slapd.conf into `dir` and bulk-loads the entries with slapadd.
fn load(dir: &Path, slapadd: &Path, g: &Generators) -> std::io::Result<()> {
    std::fs::create_dir_all(dir.join("db"))?;
    std::fs::write(dir.join("pcrf.schema"), SCHEMA)?;
    // mdb maps its file at this size up front (sparse): room for ~2 KiB an entry, well above
    // the ~0.8 KiB measured with the equality index on imsi. objectClass is indexed too:
    // back-mdb ORs every subtree filter with (objectClass=referral), and without that index the
    // OR's candidates are every entry, so each search scanned the directory (63 ms at 100,000
    // entries; 0.5 ms with it).
    let maxsize = 64 * 1024 * 1024 + g.supi_count.saturating_mul(2048);
    std::fs::write(
        dir.join("slapd.conf"),
        format!(
            "include /etc/ldap/schema/core.schema\n\
             include /etc/ldap/schema/cosine.schema\n\
             include {dir}/pcrf.schema\n\
             modulepath /usr/lib/ldap\nmoduleload back_mdb\n\
             pidfile {dir}/slapd.pid\n\
             database mdb\nmaxsize {maxsize}\nsuffix \"{SUFFIX}\"\n\
             rootdn \"cn=admin,{SUFFIX}\"\ndirectory {dir}/db\nindex objectClass eq\nindex imsi eq\n\
             access to attrs=userPassword by anonymous auth by * none\n\
             access to * by dn.exact=\"{BIND_DN}\" read by * none\n",
            dir = dir.display(),
        ),
    )?;
    let mut child = Command::new(slapadd)
        .arg("-q")
        .arg("-f")
        .arg(dir.join("slapd.conf"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let written = {
        let mut w = std::io::BufWriter::with_capacity(1 << 20, child.stdin.take().expect("piped"));
        ldif(&mut w, g).and_then(|_| w.flush())
    };
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    let status = child.wait()?;
    if !status.success() || written.is_err() {
        return Err(std::io::Error::other(format!("slapadd failed ({status}): {}", stderr.trim())));
    }
    Ok(())
}

/// The LDIF: the suffix, the PCF's bind entry, the subscribers' branch, then one entry per
/// subscriber: `uid=<IMSI>`, `imsi`, `msisdn` (`gpsi_prefix` + MSIN, as the PCEFs send it) and
/// the [`profile`].
fn ldif(w: &mut impl Write, g: &Generators) -> std::io::Result<()> {
    write!(
        w,
        "dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\no: example\ndc: example\n\n\
         dn: ou=system,{SUFFIX}\nobjectClass: organizationalUnit\nou: system\n\n\
         dn: {BIND_DN}\nobjectClass: person\nobjectClass: simpleSecurityObject\ncn: pcrf\nsn: pcrf\n\
         userPassword: {BIND_PASSWORD}\n\n\
         dn: {BASE_DN}\nobjectClass: organizationalUnit\nou: subscribers\n\n"
    )?;
    for msin in g.supi_first..g.supi_first + g.supi_count {
        let imsi = format!("{}{msin:010}", g.supi_prefix);
        let (class, services) = profile(msin);
        write!(
            w,
            "dn: uid={imsi},{BASE_DN}\nobjectClass: account\nobjectClass: pcrfSubscriber\n\
             uid: {imsi}\nimsi: {imsi}\nmsisdn: {}{msin:010}\npcrfClass: {class}\n",
            g.gpsi_prefix
        )?;
        for s in services {
            writeln!(w, "pcrfService: {s}")?;
        }
        writeln!(w)?;
    }
    Ok(())
}

/// Follows slapd's log until `stop`, counting its `SRCH base=` lines (one per search).
fn count_searches(log: &Path, counters: &SimCounters, stop: &AtomicBool) {
    const NEEDLE: &[u8] = b" SRCH base=";
    let mut at = 0u64;
    let mut partial: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        if let Ok(mut f) = std::fs::File::open(log) {
            if f.seek(SeekFrom::Start(at)).is_ok() {
                while let Ok(n) = f.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    at += n as u64;
                    partial.extend_from_slice(&buf[..n]);
                    // Whole lines only: a line half written is counted with its end.
                    let Some(end) = partial.iter().rposition(|&b| b == b'\n') else { continue };
                    let found = partial[..end]
                        .split(|&b| b == b'\n')
                        .filter(|l| l.windows(NEEDLE.len()).any(|w| w == NEEDLE))
                        .count() as u64;
                    counters.received.fetch_add(found, Ordering::Relaxed);
                    counters.items.fetch_add(found, Ordering::Relaxed);
                    partial.drain(..=end);
                }
            }
        }
        if stopping {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::SimKind;

    fn generators(first: u64, count: u64) -> Generators {
        let mut g: Generators = toml::from_str("").unwrap();
        g.supi_first = first;
        g.supi_count = count;
        g
    }

    #[test]
    fn the_ldif_has_one_entry_per_subscriber_with_its_profile() {
        let mut out = Vec::new();
        ldif(&mut out, &generators(40, 4)).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.matches("objectClass: pcrfSubscriber").count(), 4);
        assert!(text.contains(&format!(
            "dn: uid=001010000000040,{BASE_DN}\nobjectClass: account\nobjectClass: pcrfSubscriber\n\
             uid: 001010000000040\nimsi: 001010000000040\nmsisdn: 330000000040\npcrfClass: gold\n\
             pcrfService: video\npcrfService: voice\n\n"
        )));
        assert!(text.contains("imsi: 001010000000043\nmsisdn: 330000000043\npcrfClass: bronze\n\n"));
        assert!(!text.contains("001010000000044"));
    }

    /// A real slapd: loaded, searched over a raw LDAP connection (anonymous and bound), its
    /// searches counted from its log, and gone (process and files) once dropped. Skipped with a
    /// note when slapd is not installed, unless `FIVECORE_REQUIRE_SLAPD=1` (./test.sh sets it).
    #[test]
    fn slapd_serves_the_generated_subscribers_and_its_searches_are_counted() {
        if find("slapd").is_none() {
            assert!(
                std::env::var("FIVECORE_REQUIRE_SLAPD").as_deref() != Ok("1"),
                "FIVECORE_REQUIRE_SLAPD=1 but slapd is not installed (Debian package slapd)"
            );
            eprintln!("skipped: slapd not installed (Debian package slapd)");
            return;
        }
        let sim: Simulator =
            toml::from_str("name = \"ldap\"\nkind = \"ldap\"\nlatency_ms = 0\n").unwrap();
        assert_eq!(sim.kind, SimKind::Ldap);
        let counters = Arc::new(SimCounters::default());
        let d = start(&sim, &generators(0, 1000), counters.clone()).unwrap();
        let mut c = std::net::TcpStream::connect(d.addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        // Bound as the PCF: the entry of 001010000000005 (silver, video).
        let got = ber::bind_and_search(&mut c, BIND_DN, BIND_PASSWORD, "001010000000005");
        assert!(got.contains("pcrfClass") && got.contains("silver") && got.contains("video"));
        // Anonymous: the access rules give it nothing; still a search slapd served.
        let mut c2 = std::net::TcpStream::connect(d.addr).unwrap();
        c2.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let got = ber::bind_and_search(&mut c2, "", "", "001010000000005");
        assert!(!got.contains("silver"), "{got}");
        let deadline = Instant::now() + Duration::from_secs(5);
        while counters.items.load(Ordering::Relaxed) < 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(counters.items.load(Ordering::Relaxed), 2);
        let addr = d.addr;
        drop(d);
        assert!(std::net::TcpStream::connect(addr).is_err(), "slapd stopped");
    }

    /// Just enough BER (RFC 4511) for the test: a simple bind, then an equality search on
    /// `imsi`, returning what came back as lossy text.
    mod ber {
        use std::io::{Read, Write};

        fn tlv(tag: u8, body: &[u8]) -> Vec<u8> {
            let mut v = vec![tag];
            if body.len() < 128 {
                v.push(body.len() as u8);
            } else {
                v.extend_from_slice(&[0x82, (body.len() >> 8) as u8, body.len() as u8]);
            }
            v.extend_from_slice(body);
            v
        }

        fn message(id: u8, op: Vec<u8>) -> Vec<u8> {
            tlv(0x30, &[tlv(0x02, &[id]), op].concat())
        }

        fn read_message(c: &mut std::net::TcpStream) -> Vec<u8> {
            let mut head = [0u8; 2];
            c.read_exact(&mut head).unwrap();
            let len = if head[1] & 0x80 == 0 {
                usize::from(head[1])
            } else {
                let mut n = vec![0u8; usize::from(head[1] & 0x7f)];
                c.read_exact(&mut n).unwrap();
                n.iter().fold(0, |a, &b| a << 8 | usize::from(b))
            };
            let mut body = vec![0u8; len];
            c.read_exact(&mut body).unwrap();
            body
        }

        pub fn bind_and_search(
            c: &mut std::net::TcpStream,
            dn: &str,
            password: &str,
            imsi: &str,
        ) -> String {
            let bind = tlv(
                0x60,
                &[tlv(0x02, &[3]), tlv(0x04, dn.as_bytes()), tlv(0x80, password.as_bytes())]
                    .concat(),
            );
            c.write_all(&message(1, bind)).unwrap();
            let a = read_message(c);
            // BindResponse (0x61) whose resultCode (an ENUMERATED) is 0.
            assert!(a.windows(5).any(|w| w == [0x61, w[1], 0x0a, 0x01, 0x00]), "{a:?}");
            let filter = tlv(0xa3, &[tlv(0x04, b"imsi"), tlv(0x04, imsi.as_bytes())].concat());
            let search = tlv(
                0x63,
                &[
                    tlv(0x04, super::BASE_DN.as_bytes()),
                    tlv(0x0a, &[2]),
                    tlv(0x0a, &[0]),
                    tlv(0x02, &[0]),
                    tlv(0x02, &[5]),
                    tlv(0x01, &[0]),
                    filter,
                    tlv(0x30, &[]),
                ]
                .concat(),
            );
            c.write_all(&message(2, search)).unwrap();
            let mut got = Vec::new();
            loop {
                let m = read_message(c);
                got.extend_from_slice(&m);
                // SearchResultDone (0x65) ends it.
                if m.get(3) == Some(&0x65) {
                    break;
                }
            }
            String::from_utf8_lossy(&got).into_owned()
        }
    }
}
