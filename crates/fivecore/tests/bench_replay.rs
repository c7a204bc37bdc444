//! `fivecore bench replay` end to end: a request file sent to a `fivecore bsf` started here, and
//! to a server that closes its connections (a raw socket speaking just enough HTTP/2).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn replay(url: &str, requests: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fivecore"))
        .args(["bench", "replay", "--url", url, "--requests"])
        .arg(requests)
        .args(extra)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A BSF started by the test, killed (by its PID) when dropped.
struct Bsf {
    child: Child,
    addr: SocketAddr,
}

impl Bsf {
    fn start(data: &Path) -> Bsf {
        Self::start_with(data, &[])
    }

    fn start_with(data: &Path, extra: &[&str]) -> Bsf {
        let addr = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_fivecore"))
            .args(["bsf", "--listen", &addr.to_string(), "--data-dir"])
            .arg(data)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut bsf = Bsf { child, addr };
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            assert!(bsf.child.try_wait().unwrap().is_none(), "the BSF exited");
            assert!(Instant::now() < deadline, "the BSF is not listening after 60 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        bsf
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Bsf {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Binding `i` as scripts/bsf-requests.sh writes it.
fn create(i: u32) -> String {
    format!(
        r#"{{"method":"POST","path":"/nbsf-management/v1/pcfBindings","body":{{"supi":"imsi-00101{i:010}","ipv4Addr":"10.9.0.{i}","dnn":"internet","snssai":{{"sst":1,"sd":"000001"}},"pcfFqdn":"pcf{i}.example.org"}}}}"#
    )
}

#[test]
fn replay_counts_a_bsfs_answers_by_status_and_writes_each_location() {
    let dir = tempfile::tempdir().unwrap();
    let bsf = Bsf::start(&dir.path().join("bsf"));
    // Lines 1-5 create bindings, line 6 lacks every UE address (400), a blank line is skipped,
    // line 8 finds binding 3 by its address (200), line 9 a GET without a match (204).
    let mut lines: Vec<String> = (1..=5).map(create).collect();
    lines.push(
        r#"{"method":"POST","path":"/nbsf-management/v1/pcfBindings","body":{"dnn":"internet","snssai":{"sst":1},"pcfFqdn":"pcf.example.org"}}"#
            .into(),
    );
    lines.push(String::new());
    lines.push(
        r#"{"method":"GET","path":"/nbsf-management/v1/pcfBindings?ipv4Addr=10.9.0.3","headers":{"Accept":"application/json"}}"#
            .into(),
    );
    lines.push(
        r#"{"method":"GET","path":"/nbsf-management/v1/pcfBindings?ipv4Addr=10.9.9.9"}"#.into(),
    );
    let file = dir.path().join("requests.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let answers = dir.path().join("answers.txt");
    let out = replay(
        &bsf.url(),
        &file,
        &["--connections", "2", "--concurrency", "4", "--answers", answers.to_str().unwrap()],
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let tally = stdout.split("wall").next().unwrap();
    assert_eq!(tally, "1 200; 5 201; 1 204; 1 400; ", "{stdout}");
    // One outcome per request, by its line in the file; the 201s carry their binding's URI.
    let mut rows: Vec<(u64, String, String)> = std::fs::read_to_string(&answers)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            assert_eq!(f.len(), 3, "{l}");
            (f[0].parse().unwrap(), f[1].to_string(), f[2].to_string())
        })
        .collect();
    rows.sort();
    let lines_and_status: Vec<(u64, &str)> = rows.iter().map(|r| (r.0, r.1.as_str())).collect();
    assert_eq!(
        lines_and_status,
        [
            (1, "201"),
            (2, "201"),
            (3, "201"),
            (4, "201"),
            (5, "201"),
            (6, "400"),
            (8, "200"),
            (9, "204")
        ]
    );
    let prefix = format!("{}/nbsf-management/v1/pcfBindings/", bsf.url());
    for (line, status, location) in &rows {
        assert_eq!(location.starts_with(&prefix), status == "201", "line {line}: {location}");
    }
    // The binding each Location names is the one its line created: deleting line 3's, binding 3
    // is found no more, binding 4 still is (in file order on one connection).
    let (_, _, loc3) = &rows[2];
    let delete = format!(r#"{{"method":"DELETE","path":"{}"}}"#, &loc3[bsf.url().len()..]);
    let find = |i: u32| {
        format!(
            r#"{{"method":"GET","path":"/nbsf-management/v1/pcfBindings?ipv4Addr=10.9.0.{i}"}}"#
        )
    };
    std::fs::write(&file, [delete, find(3), find(4)].join("\n")).unwrap();
    let out =
        replay(&bsf.url(), &file, &["--concurrency", "1", "--answers", answers.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&answers).unwrap(), "1 204 -\n2 204 -\n3 200 -\n");

    // --expect: an answer of another status fails the run, its tally still printed.
    std::fs::write(&file, create(7) + "\n" + &create(7) + "\n").unwrap();
    let out = replay(&bsf.url(), &file, &["--expect", "400", "--concurrency", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("2 201; wall "), "{}", text(&out.stdout));
    assert!(text(&out.stderr).contains("2 answer(s) with a status other than [400]"));
}

#[test]
fn a_line_that_is_not_a_request_is_refused_by_number_before_anything_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    // A listener that counts connections: the replay must not even connect.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let file = dir.path().join("requests.jsonl");
    for (bad, why) in [
        (r#"{"method":"POST","path":"/a","body":{"x":1}"#, "not a request"),
        ("not json at all", "not a request"),
        (r#"{"method":"GET","url":"/a"}"#, "unknown field `url`"),
        (r#"{"method":"GET","path":"a"}"#, "must start with /"),
    ] {
        let content = [create(1), create(2), bad.to_string(), create(4)].join("\n");
        std::fs::write(&file, content).unwrap();
        let out = replay(&url, &file, &[]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("requests.jsonl line 3: "), "{stderr}");
        assert!(stderr.contains(why), "{stderr}");
        assert!(out.stdout.is_empty());
        assert_eq!(
            listener.accept().map_err(|e| e.kind()).unwrap_err(),
            std::io::ErrorKind::WouldBlock,
            "the replay connected"
        );
    }
    // Nothing listens at all: a setup error, before any request.
    drop(listener);
    std::fs::write(&file, create(1)).unwrap();
    let out = replay(&url, &file, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("connecting to"), "{}", text(&out.stderr));
}

/// An HTTP/2 server on a raw socket that takes `accepts` connections, each: the client's
/// preface, its SETTINGS answered, then closed as soon as a request's HEADERS arrive.
fn closing_server(accepts: usize) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for _ in 0..accepts {
            let (mut s, _) = listener.accept().unwrap();
            let mut preface = [0u8; 24];
            s.read_exact(&mut preface).unwrap();
            // Our SETTINGS (empty: the defaults) and the ACK of the client's.
            s.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 4, 1, 0, 0, 0, 0]).unwrap();
            loop {
                let mut head = [0u8; 9];
                if s.read_exact(&mut head).is_err() {
                    break;
                }
                let len =
                    usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
                let mut payload = vec![0u8; len];
                if s.read_exact(&mut payload).is_err() || head[3] == 0x1 {
                    break;
                }
            }
        }
        // The listener closes here: reconnecting fails.
    });
    addr
}

#[test]
fn a_server_that_closes_the_connection_makes_the_replay_fail() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("requests.jsonl");
    std::fs::write(&file, [create(1), create(2), create(3)].join("\n")).unwrap();
    // The first connection (opened before the replay starts) and one reopened after its request
    // failed: two requests without an answer, and the third never sent (the server is gone).
    let addr = closing_server(2);
    let answers = dir.path().join("answers.txt");
    let out = replay(
        &format!("http://{addr}"),
        &file,
        &["--concurrency", "1", "--answers", answers.to_str().unwrap()],
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.starts_with("2 error; 1 not-sent; wall "), "{stdout}");
    assert!(stderr.contains("3 request(s) got no answer"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&answers).unwrap(), "1 error -\n2 error -\n");
}

fn fivecore(args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_fivecore")).args(args).output().unwrap();
    assert!(out.status.success(), "fivecore {args:?}: {}", text(&out.stderr));
}

#[test]
fn an_https_url_is_replayed_over_mutual_tls() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    let pki_s = pki.to_str().unwrap();
    fivecore(&["cert", "ca", "--out", pki_s]);
    fivecore(&["cert", "nf", "--ca", pki_s, "--nf-type", "BSF"]);
    fivecore(&["cert", "nf", "--ca", pki_s, "--nf-type", "PCF"]);
    let config = dir.path().join("bsf.toml");
    let f = |name: &str| pki.join(name).display().to_string();
    std::fs::write(
        &config,
        format!(
            "[sbi.tls]\ncert = {:?}\nkey = {:?}\nclient_ca = {:?}\n",
            f("bsf.crt"),
            f("bsf.key"),
            f("ca.crt")
        ),
    )
    .unwrap();
    let bsf = Bsf::start_with(&dir.path().join("bsf"), &["--config", config.to_str().unwrap()]);
    let file = dir.path().join("requests.jsonl");
    std::fs::write(&file, [create(1), create(2)].join("\n")).unwrap();
    let url = format!("https://{}", bsf.addr);
    let (ca, cert, key) = (f("ca.crt"), f("pcf.crt"), f("pcf.key"));
    let out =
        replay(&url, &file, &["--ca", &ca, "--cert", &cert, "--key", &key, "--expect", "201"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("2 201; wall "), "{}", text(&out.stdout));
    // The BSF requires a client certificate: without one it ends the connection (in TLS 1.3
    // the client's side of the handshake completes first), so no request is answered.
    let out = replay(&url, &file, &["--ca", &ca]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("2 error; wall "), "{}", text(&out.stdout));
    // An https URL needs the CA to trust.
    let out = replay(&url, &file, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("needs --ca"), "{}", text(&out.stderr));
}
