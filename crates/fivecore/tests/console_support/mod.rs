//! What the console tests share: `fivecore up` as a process with console users, and a small
//! HTTP/1.1 client like a browser's (cookies by hand).

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

pub const ADMIN_PW: &str = "admin-pw-1";
pub const VIEWER_PW: &str = "viewer-pw-1";

/// `fivecore console hash-password` of `pw`.
pub fn hash(pw: &str) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fivecore"))
        .args(["console", "hash-password"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(format!("{pw}\n").as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let h = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert!(h.starts_with("$argon2id$"), "{h}");
    h
}

/// A `fivecore up` of this test binary. It runs under a small shell watchdog that kills it by
/// PID when our end of its standard input closes, so it stops even when a test panics or the
/// test binary exits without dropping it.
pub struct Up {
    pub pid: u32,
    pub nrf: u16,
    pub udr: u16,
    pub bsf: u16,
    pub pcf: u16,
    pub dd: u16,
    pub console: u16,
    pub dir: std::path::PathBuf,
    watchdog: Option<ChildStdin>,
    /// The watchdog shell, reaped once it has stopped `up`.
    shell: std::process::Child,
}

impl Up {
    /// `up` on system-chosen ports with `[console]` settings `console_extra` (users appended).
    pub fn start(name: &str, console_extra: &str) -> Up {
        let dir = std::env::temp_dir().join(format!("fivecore-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("up.toml");
        std::fs::write(
            &config,
            format!(
                "[bsf.rx]\nlisten = \"127.0.0.1:0\"\n\n[udr.sh]\nlisten = \"127.0.0.1:0\"\n\n\
                 [console]\n{console_extra}\n\n\
                 [[console.users]]\nname = \"admin\"\npassword_hash = \"{}\"\nrole = \"admin\"\n\n\
                 [[console.users]]\nname = \"viewer\"\npassword_hash = \"{}\"\nrole = \"read-only\"\n",
                hash(ADMIN_PW),
                hash(VIEWER_PW)
            ),
        )
        .unwrap();
        let script = "\"$0\" up --config \"$1\" --data-dir \"$2\" --port-base 0 2>\"$2/up.log\" </dev/null &\n\
                      pid=$!\necho \"pid $pid\"\nread _\nkill $pid 2>/dev/null\n\
                      i=0; while kill -0 $pid 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done\n\
                      kill -9 $pid 2>/dev/null\nwait $pid";
        // Before the shell starts: it opens `up.log` in the data directory.
        std::fs::create_dir_all(dir.join("data")).unwrap();
        let mut child = Command::new("sh")
            .args(["-c", script, env!("CARGO_BIN_EXE_fivecore")])
            .arg(&config)
            .arg(dir.join("data"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let watchdog = child.stdin.take().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut lines = Vec::new();
        loop {
            let mut line = String::new();
            let n = out.read_line(&mut line).unwrap();
            let log = std::fs::read_to_string(dir.join("data/up.log")).unwrap_or_default();
            assert!(n > 0, "up ended: {lines:?}\n{log}");
            let last = line.starts_with("Every SBI port");
            lines.push(line);
            if last {
                break;
            }
        }
        let pid: u32 = lines[0].trim().strip_prefix("pid ").unwrap().parse().unwrap();
        let port = |row: &str| -> u16 {
            let line = lines
                .iter()
                .find(|l| l.starts_with(row))
                .unwrap_or_else(|| panic!("{row}: {lines:?}"));
            let at = line.find("http://127.0.0.1:").unwrap() + "http://127.0.0.1:".len();
            let rest = &line[at..];
            rest[..rest.find(|c: char| !c.is_ascii_digit()).unwrap()].parse().unwrap()
        };
        let up = Up {
            pid,
            nrf: port("NRF"),
            udr: port("UDR"),
            bsf: port("BSF"),
            pcf: port("PCF"),
            dd: port("Data Director"),
            console: port("Console"),
            dir,
            watchdog: Some(watchdog),
            shell: child,
        };
        for p in [up.nrf, up.udr, up.bsf, up.pcf, up.dd] {
            let deadline = Instant::now() + Duration::from_secs(30);
            while http("GET", p, "/healthz/ready", &[], None).status != 200 {
                assert!(Instant::now() < deadline, "port {p} not ready");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        up
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("data/up.log")).unwrap_or_default()
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        // The watchdog's stdin closes with us: it stops `up` by its PID.
        let _ = Command::new("kill").arg(self.pid.to_string()).status();
        drop(self.watchdog.take());
        let _ = self.shell.wait();
    }
}

#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    /// `name=value` of the Set-Cookie header.
    pub fn cookie(&self) -> String {
        self.header("set-cookie").unwrap().split(';').next().unwrap().to_owned()
    }
}

/// One HTTP/1.1 request, `Connection: close`, as a browser would send it.
pub fn http(
    method: &str,
    port: u16,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Answer {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return Answer { status: 0, headers: vec![], body: String::new() };
    };
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut req =
        format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(b) = body {
        req.push_str(&format!("Content-Length: {}\r\n", b.len()));
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("content-type")) {
            req.push_str("Content-Type: application/json\r\n");
        }
    }
    req.push_str("\r\n");
    req.push_str(body.unwrap_or(""));
    if s.write_all(req.as_bytes()).is_err() {
        return Answer { status: 0, headers: vec![], body: String::new() };
    }
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let Some((head, rest)) = text.split_once("\r\n\r\n") else {
        return Answer { status: 0, headers: vec![], body: text };
    };
    let mut lines = head.lines();
    let status =
        lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|s| s.parse().ok()).unwrap_or(0);
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let chunked = headers.iter().any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked { dechunk(rest) } else { rest.to_owned() };
    Answer { status, headers, body }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}
