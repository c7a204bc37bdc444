//! `fivecore backup` and `fivecore restore` as an operator uses them (docs/backup.md): real NF
//! processes taking writes over HTTP/2 while the backup runs, killed with SIGKILL, their stores
//! restored into a fresh directory and served again.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn fivecore(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fivecore")).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn test_dir(name: &str) -> String {
    let dir = std::env::temp_dir().join(format!("fivecore-backup-{}/{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.to_string_lossy().into_owned()
}

/// Diameter ports chosen by the system, so no test binds a fixed port.
fn config(dir: &str) -> String {
    let path = format!("{dir}/fivecore.toml");
    std::fs::write(
        &path,
        "[bsf.rx]\nlisten = \"127.0.0.1:0\"\n\n[udr.sh]\nlisten = \"127.0.0.1:0\"\n",
    )
    .unwrap();
    path
}

/// A running `fivecore <nf>` and its SBI address.
struct Nf {
    child: Child,
    addr: String,
}

impl Nf {
    fn start(nf: &str, data: &str, config: &str) -> Nf {
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let child = Command::new(env!("CARGO_BIN_EXE_fivecore"))
            .args([nf, "--listen", &addr, "--data-dir", data, "--config", config])
            .args(["--log-format", "json"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut nf = Nf { child, addr };
        nf.wait_ready();
        nf
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn wait_ready(&mut self) {
        use std::io::{Read, Write};
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                let mut err = String::new();
                if let Some(e) = self.child.stderr.as_mut() {
                    let _ = e.read_to_string(&mut err);
                }
                panic!("fivecore exited early ({status}): {err}");
            }
            if let Ok(mut s) = std::net::TcpStream::connect(&self.addr) {
                let _ = s.write_all(
                    b"GET /healthz/ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                );
                let mut answer = String::new();
                let _ = s.read_to_string(&mut answer);
                if answer.starts_with("HTTP/1.1 200") {
                    return;
                }
            }
            assert!(Instant::now() < deadline, "{} not ready", self.addr);
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn kill_9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    fn sigterm(mut self) {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
        assert_eq!(self.child.wait().unwrap().code(), Some(0));
    }
}

/// One acknowledged write: what to read back, and when its answer came.
#[derive(Clone, Debug)]
struct Acked {
    at: Instant,
    key: String,
}

type Log = Arc<Mutex<Vec<Acked>>>;

async fn send(
    client: &sbi::client::SbiClient,
    method: &str,
    url: &str,
    body: String,
) -> Option<(u16, Option<String>)> {
    let req = match method {
        "PUT" => client.put(url),
        _ => client.post(url),
    };
    let r = req.header("content-type", "application/json").body(body).send().await.ok()?;
    Some((r.status().as_u16(), r.header("location").map(str::to_owned)))
}

/// Writes to `nf` until `stop`, logging each acknowledged one: `make(n)` gives the method,
/// path, body and the key to read it back by (None: the Location header).
fn writer(
    rt: &tokio::runtime::Runtime,
    client: &sbi::client::SbiClient,
    base: String,
    stop: Arc<AtomicBool>,
    log: Log,
    make: impl Fn(u32) -> (&'static str, String, String, Option<String>) + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    let client = client.clone();
    rt.spawn(async move {
        let mut n = 0u32;
        while !stop.load(Ordering::Relaxed) {
            n += 1;
            let (method, path, body, key) = make(n);
            match send(&client, method, &format!("{base}{path}"), body).await {
                Some((201, location)) => {
                    let key = key.or(location).expect("a key or a Location");
                    log.lock().unwrap().push(Acked { at: Instant::now(), key });
                }
                // Killed under the request: not acknowledged.
                _ => break,
            }
        }
    })
}

fn before(log: &Log, t: Instant) -> Vec<Acked> {
    log.lock().unwrap().iter().filter(|a| a.at < t).cloned().collect()
}

fn during(log: &Log, from: Instant, to: Instant) -> usize {
    log.lock().unwrap().iter().filter(|a| a.at > from && a.at < to).count()
}

fn binding(t: u32, n: u32) -> String {
    format!(
        r#"{{"ipv4Addr":"10.{t}.{}.{}","supi":"imsi-00101{t}{n:09}","dnn":"internet","snssai":{{"sst":1}},"pcfFqdn":"pcf{n}.example.com"}}"#,
        n / 250,
        n % 250 + 1
    )
}

fn nrf_profile(id: &str) -> String {
    format!(
        r#"{{"nfInstanceId":"{id}","nfType":"PCF","nfStatus":"REGISTERED","heartBeatTimer":300,"ipv4Addresses":["192.0.2.10"]}}"#
    )
}

/// A BSF, a UDR, a PCF and an NRF on one data directory take a steady stream of writes; the
/// backup runs in the middle of it; the NFs are killed with SIGKILL; the backup is restored
/// into a fresh directory and the NFs started on it: every write acknowledged before the
/// backup started is there, read through each NF's API, and the NFs take writes again.
#[test]
fn a_backup_taken_mid_stream_restores_every_write_acknowledged_before_it() {
    let dir = test_dir("mid-stream");
    let (data, out, fresh) =
        (format!("{dir}/data"), format!("{dir}/backup"), format!("{dir}/restored"));
    let config = config(&dir);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = sbi::client::SbiClient::new(&sbi::client::ClientConfig::default()).unwrap();
    let names = ["bsf", "udr", "pcf", "nrf"];
    let nfs: Vec<Nf> = names.iter().map(|nf| Nf::start(nf, &data, &config)).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let logs: Vec<Log> = names.iter().map(|_| Log::default()).collect();
    let mut tasks = Vec::new();
    for t in 0..3u32 {
        tasks.push(writer(&rt, &client, nfs[0].url(""), stop.clone(), logs[0].clone(), move |n| {
            let ip = format!("10.{t}.{}.{}", n / 250, n % 250 + 1);
            ("POST", "/nbsf-management/v1/pcfBindings".into(), binding(t, n), Some(ip))
        }));
        tasks.push(writer(&rt, &client, nfs[1].url(""), stop.clone(), logs[1].clone(), move |n| {
            let id = format!("imsi-00102{t}{n:09}");
            let body = format!(r#"{{"subscriberIds":["{id}"],"nfGroupIds":{{"UDM":"udm-{t}"}}}}"#);
            ("POST", "/udr-prov/v1/slf-entries".into(), body, Some(id))
        }));
        tasks.push(writer(&rt, &client, nfs[2].url(""), stop.clone(), logs[2].clone(), move |n| {
            let body = format!(
                r#"{{"supi":"imsi-00103{t}{n:09}","pduSessionId":1,"pduSessionType":"IPV4","dnn":"internet","sliceInfo":{{"sst":1}},"notificationUri":"http://127.0.0.1:9/smf"}}"#
            );
            ("POST", "/npcf-smpolicycontrol/v1/sm-policies".into(), body, None)
        }));
        tasks.push(writer(&rt, &client, nfs[3].url(""), stop.clone(), logs[3].clone(), move |n| {
            let id = format!("4947a69a-f61b-4bc1-{t:04}-{n:012}");
            ("PUT", format!("/nnrf-nfm/v1/nf-instances/{id}"), nrf_profile(&id), Some(id))
        }));
    }
    std::thread::sleep(Duration::from_millis(1500));

    // Small steps with pauses: the copy spans many steps while the writes go on.
    let started = Instant::now();
    let (code, stdout, err) = fivecore(&[
        "backup",
        "--config",
        &config,
        "--data-dir",
        &data,
        "--out",
        &out,
        "--step-pages",
        "4",
        "--pause-ms",
        "2",
    ]);
    let ended = Instant::now();
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("backup complete"), "{stdout}");
    std::thread::sleep(Duration::from_millis(300));
    for nf in nfs {
        nf.kill_9();
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = rt.block_on(t);
    }
    for (name, log) in names.iter().zip(&logs) {
        assert!(before(log, started).len() >= 10, "{name}: too few writes before the backup");
        assert!(during(log, started, ended) > 0, "{name}: no write acknowledged during the backup");
    }
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(format!("{out}/manifest.json")).unwrap()).unwrap();
    let files: Vec<&str> = manifest["stores"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["file"].as_str().unwrap())
        .collect();
    for db in ["nrf.db", "udr.db", "bsf.db", "pcf.db"] {
        assert!(files.contains(&db), "{db} not in the backup: {manifest}");
    }
    for s in manifest["stores"].as_array().unwrap() {
        assert_eq!(s["integrityCheck"], "ok");
        assert_eq!(s["sha256"].as_str().unwrap().len(), 64);
        assert!(!s["migrations"].as_array().unwrap().is_empty(), "{s}");
    }

    let (code, stdout, err) =
        fivecore(&["restore", "--from", &out, "--config", &config, "--data-dir", &fresh]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("restored") && stdout.contains("bsf.db"), "{stdout}");
    let nfs: Vec<Nf> = names.iter().map(|nf| Nf::start(nf, &fresh, &config)).collect();
    let get = |url: String| {
        let r = rt.block_on(client.get(&url).send()).unwrap();
        (r.status().as_u16(), String::from_utf8_lossy(r.body()).into_owned())
    };
    for a in before(&logs[0], started) {
        let (status, body) =
            get(nfs[0].url(&format!("/nbsf-management/v1/pcfBindings?ipv4Addr={}", a.key)));
        assert_eq!(status, 200, "binding {} acknowledged before the backup, not restored", a.key);
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["ipv4Addr"], a.key.as_str(), "{body}");
        assert!(v["pcfFqdn"].as_str().unwrap().ends_with(".example.com"), "{body}");
    }
    for a in before(&logs[1], started) {
        let (status, body) = get(nfs[1].url(&format!("/udr-prov/v1/slf-entries/{}", a.key)));
        assert_eq!(status, 200, "SLF entry {} not restored", a.key);
        assert!(body.contains(&a.key), "{body}");
    }
    for a in before(&logs[2], started) {
        let path = &a.key[a.key.find("/npcf-").expect("a PCF location")..];
        let (status, body) = get(nfs[2].url(path));
        assert_eq!(status, 200, "SM policy {path} not restored: {body}");
    }
    for a in before(&logs[3], started) {
        let (status, body) = get(nfs[3].url(&format!("/nnrf-nfm/v1/nf-instances/{}", a.key)));
        assert_eq!(status, 200, "NF profile {} not restored: {body}", a.key);
    }
    // And they take writes again.
    let new = binding(9, 1);
    let r = rt.block_on(send(&client, "POST", &nfs[0].url("/nbsf-management/v1/pcfBindings"), new));
    assert_eq!(r.map(|r| r.0), Some(201));
    let slf = r#"{"subscriberIds":["imsi-001049000000001"],"nfGroupIds":{"UDM":"udm-9"}}"#;
    let r = rt.block_on(send(&client, "POST", &nfs[1].url("/udr-prov/v1/slf-entries"), slf.into()));
    assert_eq!(r.map(|r| r.0), Some(201));
    for nf in nfs {
        nf.sigterm();
    }
}

/// Replaces the backup file's SHA-256 and size in the manifest with the file's own.
fn reseal(out: &str, file: &str) {
    let bytes = std::fs::read(format!("{out}/{file}")).unwrap();
    let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    let path = format!("{out}/manifest.json");
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    for s in m["stores"].as_array_mut().unwrap() {
        if s["file"] == file {
            s["sha256"] = hex.clone().into();
            s["bytes"] = bytes.len().into();
        }
    }
    std::fs::write(&path, serde_json::to_vec(&m).unwrap()).unwrap();
}

fn copy_dir(from: &str, to: &str) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), Path::new(to).join(e.file_name())).unwrap();
    }
}

/// What restore refuses, each with its exit status and a message naming the reason: a running
/// NF on the directory, a backup without its manifest, a truncated or damaged file, a newer
/// schema; and what backup refuses: the MySQL backend, a directory without stores, a used
/// `--out`. Once the NF is stopped, the restore goes through and the NF serves the backup.
#[test]
fn restore_refuses_a_running_nf_a_damaged_backup_and_a_newer_schema() {
    let dir = test_dir("refusals");
    let (data, out) = (format!("{dir}/data"), format!("{dir}/backup"));
    let config = config(&dir);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = sbi::client::SbiClient::new(&sbi::client::ClientConfig::default()).unwrap();
    let bsf = Nf::start("bsf", &data, &config);
    let bindings = bsf.url("/nbsf-management/v1/pcfBindings");
    let r = rt.block_on(send(&client, "POST", &bindings, binding(1, 1))).unwrap();
    assert_eq!(r.0, 201);
    let (code, _, err) = fivecore(&["backup", "--data-dir", &data, "--out", &out, "--nf", "bsf"]);
    assert_eq!(code, 0, "{err}");
    // Written after the backup: gone once it is restored.
    let r = rt.block_on(send(&client, "POST", &bindings, binding(1, 2))).unwrap();
    assert_eq!(r.0, 201);

    let (code, _, err) = fivecore(&["backup", "--data-dir", &data, "--out", &out]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not an empty directory"), "{err}");
    let (code, _, err) =
        fivecore(&["backup", "--data-dir", &format!("{dir}/none"), "--out", &format!("{dir}/b2")]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no NF store"), "{err}");
    let mysql = format!("{dir}/mysql.toml");
    std::fs::write(&mysql, "[store]\nbackend = \"mysql\"\nurl = \"mysql://u:p@127.0.0.1:1/db\"\n")
        .unwrap();
    for cmd in [
        vec!["backup", "--config", &mysql, "--data-dir", &data, "--out", &format!("{dir}/b3")],
        vec!["restore", "--config", &mysql, "--data-dir", &data, "--from", &out],
    ] {
        let (code, _, err) = fivecore(&cmd);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("mariabackup") && err.contains("mysqldump"), "{err}");
    }

    let (code, _, err) = fivecore(&["restore", "--from", &out, "--data-dir", &data]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("in use") && err.contains("bsf.db"), "{err}");

    let fresh = format!("{dir}/fresh");
    let broken = format!("{dir}/broken");
    copy_dir(&out, &broken);
    let db = format!("{broken}/bsf.db");
    let len = std::fs::metadata(&db).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&db).unwrap().set_len(len / 2).unwrap();
    let (code, _, err) = fivecore(&["restore", "--from", &broken, "--data-dir", &fresh]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("corrupt or truncated"), "{err}");
    assert!(!Path::new(&format!("{fresh}/bsf.db")).exists(), "nothing restored");
    // Damaged in place, the manifest resealed: SQLite's check finds it.
    std::fs::copy(format!("{out}/bsf.db"), &db).unwrap();
    // Every page's header after the first: no valid b-tree page is left.
    let mut bytes = std::fs::read(&db).unwrap();
    for page in bytes.chunks_mut(4096).skip(1) {
        page[..16].fill(0xa5);
    }
    std::fs::write(&db, &bytes).unwrap();
    reseal(&broken, "bsf.db");
    let (code, _, err) = fivecore(&["restore", "--from", &broken, "--data-dir", &fresh]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("integrity") || err.contains("malformed"), "{err}");
    // A newer fivecore's schema.
    std::fs::copy(format!("{out}/bsf.db"), &db).unwrap();
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute("INSERT INTO store_migrations (id, applied_at) VALUES ('bsf-9999-future', 1)", [])
        .unwrap();
    reseal(&broken, "bsf.db");
    let (code, _, err) = fivecore(&["restore", "--from", &broken, "--data-dir", &fresh]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("newer schema") && err.contains("bsf-9999-future"), "{err}");
    std::fs::remove_file(format!("{broken}/manifest.json")).unwrap();
    let (code, _, err) = fivecore(&["restore", "--from", &broken, "--data-dir", &fresh]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("no manifest.json"), "{err}");

    // Killed (its last commits only in its WAL), the BSF's store is restored over the one it
    // left: the binding written after the backup is gone, the one before it is there, and the
    // BSF takes writes again.
    bsf.kill_9();
    assert!(Path::new(&format!("{data}/bsf.db-wal")).exists());
    let (code, _, err) = fivecore(&["restore", "--from", &out, "--data-dir", &data]);
    assert_eq!(code, 0, "{err}");
    let bsf = Nf::start("bsf", &data, &config);
    let find = |ip: &str| {
        let url = bsf.url(&format!("/nbsf-management/v1/pcfBindings?ipv4Addr={ip}"));
        rt.block_on(client.get(&url).send()).unwrap().status().as_u16()
    };
    assert_eq!(find("10.1.0.2"), 200);
    assert_eq!(find("10.1.0.3"), 204);
    let r = rt.block_on(send(
        &client,
        "POST",
        &bsf.url("/nbsf-management/v1/pcfBindings"),
        binding(1, 3),
    ));
    assert_eq!(r.map(|r| r.0), Some(201));
    bsf.sigterm();
}
