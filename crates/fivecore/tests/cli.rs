//! The `fivecore` binary as a user meets it.

use std::process::{Command, Stdio};

fn fivecore(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fivecore")).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn version_and_help() {
    let (code, out, _) = fivecore(&["version"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("fivecore "));
    for sub in ["up", "nrf", "udr", "bsf", "pcf", "dd", "bench", "version"] {
        let (code, out, _) = fivecore(&[sub, "--help"]);
        assert_eq!(code, 0, "{sub} --help");
        assert!(out.contains("Usage: fivecore"), "{sub}: {out}");
    }
    let (_, out, _) = fivecore(&["bsf", "--help"]);
    for flag in ["--config", "--listen", "--data-dir", "--log-format", "preload"] {
        assert!(out.contains(flag), "bsf --help lacks {flag}");
    }
    let (_, out, _) = fivecore(&["bsf", "preload", "--help"]);
    for flag in ["--config", "--data-dir", "--input", "--on-bad-row", "--progress"] {
        assert!(out.contains(flag), "bsf preload --help lacks {flag}");
    }
}

/// A configuration putting `up`'s Diameter ports on ports the system chooses (with
/// `--port-base 0` for the SBI ports), so no test binds a fixed port: `./test.sh` runs while the
/// README's `fivecore up` holds 7000-7002, 3869 and 3870.
/// Each `up` of a test has its own file (`<data>-up.toml`): the tests run at once.
fn ephemeral_up_config(data: &str, extra: &str) -> String {
    let path = format!("{data}-up.toml");
    std::fs::write(
        &path,
        format!(
            "[bsf.rx]\nlisten = \"127.0.0.1:0\"\n\n[udr.sh]\nlisten = \"127.0.0.1:0\"\n{extra}"
        ),
    )
    .unwrap();
    path
}

/// `fivecore up` on ports the system chooses, stdout and stderr on pipes.
fn spawn_up(data: &str) -> std::process::Child {
    spawn_up_with(data, "")
}

/// `spawn_up` with more configuration appended to the ephemeral one.
fn spawn_up_with(data: &str, extra: &str) -> std::process::Child {
    let config = ephemeral_up_config(data, extra);
    Command::new(env!("CARGO_BIN_EXE_fivecore"))
        .args(["up", "--port-base", "0", "--config", &config])
        .args(["--data-dir", data, "--log-format", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A port of the endpoint table: the one after `prefix` (`http://127.0.0.1:` or `127.0.0.1:`)
/// in the column of `row`.
fn table_port(row: &str, prefix: &str, nth: usize) -> u16 {
    let at = row.match_indices(prefix).nth(nth).unwrap_or_else(|| panic!("{prefix}: {row}")).0;
    let rest = &row[at + prefix.len()..];
    rest[..rest.find(|c: char| !c.is_ascii_digit()).unwrap()].parse().unwrap()
}

/// The lines `up` prints up to its endpoint table's last.
fn up_table(child: &mut std::process::Child) -> Vec<String> {
    use std::io::BufRead;
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "stdout ended: {lines:?}");
        let last = line.starts_with("Every SBI port");
        lines.push(line);
        if last {
            return lines;
        }
    }
}

#[test]
fn up_prints_its_endpoints_once_bound_and_stops_on_sigterm() {
    let dir = tempfile_dir();
    let data = format!("{dir}/up");
    let mut child = spawn_up(&data);
    let lines = up_table(&mut child);
    let table = lines.concat();
    assert!(
        lines[0].starts_with("fivecore up: starting the NRF, UDR, BSF, PCF, Data Director"),
        "{table}"
    );
    let row = |nf: &str| {
        lines.iter().find(|l| l.starts_with(nf)).unwrap_or_else(|| panic!("{nf}: {table}")).clone()
    };
    let (nrf, udr, bsf, pcf) = (row("NRF"), row("UDR"), row("BSF"), row("PCF"));
    let dd = row("Data Director");
    let sbi = [nrf.as_str(), &udr, &bsf, &pcf, &dd].map(|r| table_port(r, "http://127.0.0.1:", 0));
    let sh = table_port(&udr, "127.0.0.1:", 1);
    let rx = table_port(&bsf, "127.0.0.1:", 1);
    assert!(udr.contains("(Sh)") && bsf.contains("(Rx proxy)"), "{table}");
    for r in [&nrf, &udr, &bsf, &pcf, &dd] {
        assert!(r.trim_end().ends_with("serving"), "{r}");
    }
    assert!(table.contains("/healthz/ready"), "{table}");
    // "serving" is printed once every port is bound: each accepts at once, no retry.
    for port in sbi.iter().chain([&sh, &rx]) {
        assert!(*port != 0 && !(7000..=7004).contains(port) && !(3868..=3870).contains(port));
        std::net::TcpStream::connect(("127.0.0.1", *port))
            .unwrap_or_else(|e| panic!("port {port} of the table not bound: {e}\n{table}"));
    }
    for port in sbi {
        wait_ready(&mut child, port);
    }
    // The UDR and the BSF registered with the NRF of the process, on its chosen port.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = sbi::client::SbiClient::new(&sbi::client::ClientConfig::default()).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    for nf_type in ["UDR", "BSF", "PCF"] {
        let url = format!("http://127.0.0.1:{}/nnrf-nfm/v1/nf-instances?nf-type={nf_type}", sbi[0]);
        loop {
            let r = rt.block_on(client.get(&url).send()).unwrap();
            if r.status() == 200 && String::from_utf8_lossy(r.body()).contains("/nf-instances/") {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{nf_type} not registered");
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
    // The PCF decides with the built-in default project, written beside its database.
    let ctx = serde_json::json!({"supi": "imsi-001010000000001", "pduSessionId": 1,
        "pduSessionType": "IPV4", "dnn": "internet", "sliceInfo": {"sst": 1},
        "notificationUri": "http://127.0.0.1:9/notify"});
    let url = format!("http://127.0.0.1:{}/npcf-smpolicycontrol/v1/sm-policies", sbi[3]);
    let r = rt.block_on(client.post(&url).json(&ctx).send()).unwrap();
    assert_eq!(r.status(), 201, "{}", String::from_utf8_lossy(r.body()));
    assert!(String::from_utf8_lossy(r.body()).contains("sessRules"));
    sigterm(&child);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    for db in ["nrf.db", "bsf.db", "udr.db", "pcf.db", "policy-default/project.toml"] {
        assert!(std::path::Path::new(&format!("{data}/{db}")).exists(), "{db}");
    }
}

/// `fivecore up | head -1`: the reader goes away after the first line, before the table is
/// written. `up` must not panic on the failed write (EPIPE: Rust ignores SIGPIPE); it says so on
/// stderr, keeps serving, and exits 0 on SIGTERM.
#[test]
fn up_keeps_serving_when_its_stdout_is_closed() {
    use std::io::BufRead;
    let dir = tempfile_dir();
    let mut child = spawn_up(&format!("{dir}/up-pipe"));
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert!(first.starts_with("fivecore up: starting"), "{first}");
    drop(stdout);
    // The logs on stderr: the NRF's address, then the failed write of the table.
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || {
        for line in stderr.lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut log = Vec::new();
    let mut nrf_port = None;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    // Both lines, in either order: the servers log "listening" when they start serving, which
    // may come after the table's failed write.
    while nrf_port.is_none() || !log.iter().any(|l: &String| l.contains("stdout closed")) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let line = rx.recv_timeout(left).unwrap_or_else(|e| panic!("{e}: {log:#?}"));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        if v["message"] == "SBI server listening" && v["nf"] == "NRF" {
            let addr: std::net::SocketAddr = v["addr"].as_str().unwrap().parse().unwrap();
            nrf_port = Some(addr.port());
        }
        log.push(line);
    }
    assert!(log.iter().all(|l| !l.contains("panicked")), "{log:#?}");
    // Still serving after the failed write.
    let port = nrf_port.unwrap_or_else(|| panic!("no NRF address logged: {log:#?}"));
    wait_ready(&mut child, port);
    sigterm(&child);
    let status = child.wait().unwrap();
    let rest: Vec<String> = rx.try_iter().collect();
    assert!(rest.iter().all(|l| !l.contains("panicked")), "{rest:#?}");
    assert_eq!(status.code(), Some(0), "{rest:#?}");
}

/// `fivecore nrf|udr|bsf` with neither --listen nor --data-dir: the port and database file of
/// `fivecore up` (7000 nrf.db, 7001 udr.db, 7002 bsf.db, under ./fivecore-data). Skipped for an
/// NF whose port is taken (the README's `fivecore up` may be running).
#[test]
fn an_nf_alone_listens_on_its_default_port_with_its_default_database() {
    for (nf, port, db) in
        [("nrf", 7000, "nrf.db"), ("udr", 7001, "udr.db"), ("bsf", 7002, "bsf.db")]
    {
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_err() {
            eprintln!("skipped: 127.0.0.1:{port} is in use, `fivecore {nf}` alone not checked");
            continue;
        }
        let cwd = format!("{}/alone-{nf}", tempfile_dir());
        std::fs::create_dir_all(&cwd).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_fivecore"))
            .args([nf, "--log-format", "json"])
            .current_dir(&cwd)
            .env("HOME", &cwd)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_ready(&mut child, port);
        sigterm(&child);
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let path = std::path::Path::new(&cwd).join("fivecore-data").join(db);
        assert!(path.exists(), "{nf}: no {}", path.display());
    }
}

#[test]
fn udr_serves_slf_lookups_and_stops_on_sigterm() {
    let dir = tempfile_dir();
    let data = format!("{dir}/udr-data");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut child = spawn_nf("udr", &listen, &data);
    wait_ready(&mut child, port);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = sbi::client::SbiClient::new(&sbi::client::ClientConfig::default()).unwrap();
    let url = format!(
        "http://{listen}/nudr-group-id-map/v1/nf-group-ids?nf-type=UDM&subscriberId=imsi-001010000000001"
    );
    let r = rt.block_on(client.get(&url).send()).unwrap();
    assert_eq!(r.status(), 404);
    assert!(String::from_utf8_lossy(r.body()).contains("USER_NOT_FOUND"));
    sigterm(&child);
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert!(std::path::Path::new(&format!("{data}/udr.db")).exists());
}

/// `[store] backend = "mysql"` in --config: `fivecore udr import` loads into the MariaDB
/// database and `fivecore udr` serves from it (no SQLite file made). Skipped without MariaDB
/// unless FIVECORE_REQUIRE_MARIADB=1.
#[test]
fn udr_and_its_import_run_on_mysql_by_configuration() {
    let Some(server) = testkit::mariadb::server() else { return };
    let dir = tempfile_dir();
    let config = format!("{dir}/mysql.toml");
    let url = server.database("udr_cli");
    std::fs::write(&config, format!("[store]\nbackend = \"mysql\"\nurl = \"{url}\"\n")).unwrap();
    let slf = format!("{dir}/slf.csv");
    std::fs::write(&slf, "subscriberIds,UDM\nimsi-001010000000001;msisdn-33600000001,udm-1\n")
        .unwrap();
    let data = format!("{dir}/udr-mysql");
    let args = ["udr", "import", "--config", &config, "--kind", "slf", "--data-dir", &data, &slf];
    let (code, _, err) = fivecore(&args);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("2 identities new"), "{err}");

    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_fivecore"))
        .args(["udr", "--config", &config, "--listen", &listen, "--data-dir", &data])
        .args(["--log-format", "json"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_ready(&mut child, port);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = sbi::client::SbiClient::new(&sbi::client::ClientConfig::default()).unwrap();
    let url = format!(
        "http://{listen}/nudr-group-id-map/v1/nf-group-ids?nf-type=UDM&subscriberId=msisdn-33600000001"
    );
    let r = rt.block_on(client.get(&url).send()).unwrap();
    assert_eq!(r.status(), 200, "{}", String::from_utf8_lossy(r.body()));
    assert!(String::from_utf8_lossy(r.body()).contains("udm-1"));
    sigterm(&child);
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert!(!std::path::Path::new(&format!("{data}/udr.db")).exists(), "a SQLite file on MySQL");
}

#[test]
fn udr_import_loads_files_and_stdin_while_a_udr_serves() {
    let dir = tempfile_dir();
    let data = format!("{dir}/udr-import");
    let slf = format!("{dir}/slf.csv");
    std::fs::write(
        &slf,
        "subscriberIds,UDM,PCF\nimsi-001010000000001;msisdn-33600000001,udm-1,pcf-1\n\
         imsi-001010000000002,udm-2,\n",
    )
    .unwrap();
    let (code, out, err) = fivecore(&["udr", "import", "--kind", "slf", "--data-dir", &data, &slf]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("imported 2 rows") && err.contains("3 identities new"), "{err}");
    let summary: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON line");
    assert_eq!((summary["rows"].as_u64(), summary["bad"].as_u64()), (Some(2), Some(0)), "{out}");
    assert_eq!(summary["slfIdentitiesNew"], 3, "{out}");
    let bad = format!("{dir}/bad.csv");
    std::fs::write(&bad, "subscriberIds,UDM\nimsi-001010000000003,udm-3\nimsi-12,udm\n").unwrap();
    let (code, _, err) = fivecore(&["udr", "import", "--kind", "slf", "--data-dir", &data, &bad]);
    assert_eq!(code, 1, "stops at the bad row: {err}");
    assert!(err.contains("line 3: /subscriberIds/0") && err.contains("stopped"), "{err}");
    let args =
        ["udr", "import", "--kind", "slf", "--on-bad-row", "skip", "--data-dir", &data, &bad];
    let (code, _, err) = fivecore(&args);
    assert_eq!(code, 3, "bad rows skipped: {err}");
    let (code, _, err) = fivecore(&["udr", "import", "--kind", "eir", "--data-dir", &data, "-"]);
    assert_eq!(code, 1);
    assert!(err.contains("--format"), "{err}");

    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut child = spawn_nf("udr", &listen, &data);
    wait_ready(&mut child, port);
    // EIR rows from stdin into the store the UDR is serving from.
    let mut import = Command::new(env!("CARGO_BIN_EXE_fivecore"))
        .args(["udr", "import", "--kind", "eir", "--format", "jsonl", "--db"])
        .arg(format!("{data}/udr.db"))
        .arg("-")
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = import.stdin.take().unwrap();
        stdin.write_all(b"{\"imei\":\"352099001761481\",\"status\":\"BLACKLISTED\"}\n").unwrap();
    }
    let out = import.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));

    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = sbi::client::SbiClient::new(&sbi::client::ClientConfig::default()).unwrap();
    let get = |path: &str| {
        let r = rt.block_on(client.get(&format!("http://{listen}{path}")).send()).unwrap();
        (r.status().as_u16(), String::from_utf8_lossy(r.body()).into_owned())
    };
    let (status, body) =
        get("/nudr-group-id-map/v1/nf-group-ids?nf-type=UDM,PCF&subscriberId=msisdn-33600000001");
    assert_eq!((status, body.as_str()), (200, r#"{"PCF":"pcf-1","UDM":"udm-1"}"#));
    let (status, body) =
        get("/nudr-group-id-map/v1/nf-group-ids?nf-type=UDM&subscriberId=imsi-001010000000003");
    assert_eq!((status, body.as_str()), (200, r#"{"UDM":"udm-3"}"#));
    let (status, body) = get("/n5g-eir-eic/v1/equipment-status?pei=imeisv-3520990017614801");
    assert_eq!((status, body.as_str()), (200, r#"{"status":"BLACKLISTED"}"#));
    sigterm(&child);
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

#[test]
fn bsf_serves_stops_on_sigterm_and_keeps_bindings() {
    let dir = tempfile_dir();
    let data = format!("{dir}/bsf-data");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let start = || spawn_nf("bsf", &listen, &data);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = sbi::client::SbiClient::new(&sbi::client::ClientConfig::default()).unwrap();
    let mut child = start();
    wait_ready(&mut child, port);
    let binding = r#"{"ipv4Addr":"10.9.9.9","dnn":"internet","snssai":{"sst":1},"pcfFqdn":"pcf.example.com"}"#;
    let url = format!("http://{listen}/nbsf-management/v1/pcfBindings");
    let r = rt
        .block_on(client.post(&url).header("content-type", "application/json").body(binding).send())
        .unwrap();
    assert_eq!(r.status(), 201);
    sigterm(&child);
    assert_eq!(child.wait_with_output().unwrap().status.code(), Some(0));
    assert!(std::path::Path::new(&format!("{data}/bsf.db")).exists());

    let mut child = start();
    wait_ready(&mut child, port);
    let r = rt.block_on(client.get(&format!("{url}?ipv4Addr=10.9.9.9")).send()).unwrap();
    assert_eq!(r.status(), 200, "the binding survived the restart");
    sigterm(&child);
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

/// A PcfBinding line for `fivecore bsf preload`, UE address 10.7.0.`i`.
fn preload_line(i: u32) -> String {
    format!(
        r#"{{"bindingId":"pre-{i}","pcfBinding":{{"ipv4Addr":"10.7.0.{i}","dnn":"internet","snssai":{{"sst":1}},"pcfFqdn":"pcf{i}.example.com"}}}}"#
    )
}

fn preload(args: &[&str], input: &str) -> (i32, String, String) {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_fivecore"))
        .args(["bsf", "preload"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The summary line's counts.
fn preloaded(stdout: &str) -> (u64, u64) {
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one JSON line: {stdout}");
    let v: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    for k in ["seconds", "indexSeconds", "dbBytes"] {
        assert!(v[k].is_number(), "{k}: {stdout}");
    }
    (v["bindings"].as_u64().unwrap(), v["skipped"].as_u64().unwrap())
}

#[test]
fn bsf_preload_loads_bindings_a_bsf_then_finds() {
    let dir = tempfile_dir();
    let data = format!("{dir}/bsf-preload");
    let file = format!("{dir}/bindings.jsonl");
    // Binding 2 comes twice: the later line (PCF pcf9) replaces the first. Line 4 is bare.
    let bare = r#"{"ipv4Addr":"10.7.0.4","dnn":"internet","snssai":{"sst":1},"pcfFqdn":"bare.example.com"}"#;
    let lines = [preload_line(1), preload_line(2), preload_line(3), bare.to_owned()];
    let again = preload_line(2).replace("pcf2.", "pcf9.");
    std::fs::write(&file, lines.join("\n") + "\n" + &again + "\n").unwrap();
    let (code, out, err) = fivecore(&["bsf", "preload", "--data-dir", &data, "--input", &file]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(preloaded(&out), (5, 0));
    // More from stdin, on top.
    let (code, out, err) = preload(&["--data-dir", &data], &(preload_line(5) + "\n"));
    assert_eq!((code, preloaded(&out)), (0, (1, 0)), "{err}");

    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut child = spawn_nf("bsf", &listen, &data);
    wait_ready(&mut child, port);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = sbi::client::SbiClient::new(&sbi::client::ClientConfig::default()).unwrap();
    let url = format!("http://{listen}/nbsf-management/v1/pcfBindings");
    let find = |ip: &str| {
        let r = rt.block_on(client.get(&format!("{url}?ipv4Addr={ip}")).send()).unwrap();
        let body = String::from_utf8_lossy(r.body()).into_owned();
        (r.status().as_u16(), body)
    };
    for (ip, pcf) in [
        ("10.7.0.1", "pcf1.example.com"),
        ("10.7.0.2", "pcf9.example.com"),
        ("10.7.0.4", "bare.example.com"),
        ("10.7.0.5", "pcf5.example.com"),
    ] {
        let (status, body) = find(ip);
        assert_eq!(status, 200, "{ip}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["pcfFqdn"], pcf, "{ip}");
    }
    assert_eq!(find("10.7.0.6").0, 204);
    // A preloaded binding is a binding like any other: Deregister by its id.
    let r = rt.block_on(client.delete(&format!("{url}/pre-3")).send()).unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(find("10.7.0.3").0, 204);
    // The store is in use now: a preload refuses it.
    let (code, _, err) = preload(&["--data-dir", &data], &(preload_line(7) + "\n"));
    assert_eq!(code, 1);
    assert!(err.contains("in use"), "{err}");
    sigterm(&child);
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

#[test]
fn bsf_preload_stops_at_or_skips_a_bad_line() {
    let dir = tempfile_dir();
    let data = format!("{dir}/bsf-preload-bad");
    let input = [
        preload_line(1),
        preload_line(2),
        r#"{"bindingId":"pre-x","pcfBinding":{"ipv4Addr":"10.7.0.300","dnn":"internet","snssai":{"sst":1},"pcfFqdn":"p.example.com"}}"#.to_owned(),
        preload_line(4),
        "not json".to_owned(),
        preload_line(6),
    ]
    .join("\n");
    let (code, out, err) = preload(&["--data-dir", &data], &input);
    assert_eq!(code, 1, "stops at the bad line: {err}");
    assert!(err.contains("line 3") && err.contains("ipv4Addr"), "{err}");
    assert_eq!(preloaded(&out), (2, 1), "the lines before it are loaded");
    let (code, out, err) = preload(&["--data-dir", &data, "--on-bad-row", "skip"], &input);
    assert_eq!(code, 3, "bad lines skipped: {err}");
    assert!(err.contains("line 3: ") && err.contains("line 5: not JSON"), "{err}");
    assert_eq!(preloaded(&out), (4, 2));
}

#[test]
fn nrf_registers_stops_on_sigterm_and_keeps_profiles() {
    let dir = tempfile_dir();
    let data = format!("{dir}/nrf-data");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let id = "5b1d7a6e-2c3f-4d4e-8f90-a1b2c3d4e5f6";
    let url = format!("http://{listen}/nnrf-nfm/v1/nf-instances/{id}");
    let start = || spawn_nf("nrf", &listen, &data);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = sbi::client::SbiClient::new(&sbi::client::ClientConfig::default()).unwrap();

    let mut child = start();
    wait_ready(&mut child, port);
    let profile = format!(
        r#"{{"nfInstanceId":"{id}","nfType":"BSF","nfStatus":"REGISTERED","fqdn":"bsf.example"}}"#
    );
    let r = rt
        .block_on(client.put(&url).header("content-type", "application/json").body(profile).send())
        .unwrap();
    assert_eq!(r.status(), 201);
    sigterm(&child);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));

    let mut child = start();
    wait_ready(&mut child, port);
    let r = rt.block_on(client.get(&url).send()).unwrap();
    assert_eq!(r.status(), 200, "the profile survived the restart");
    assert!(String::from_utf8_lossy(r.body()).contains("bsf.example"));
    sigterm(&child);
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Waits until /healthz/ready answers 200 on `port` (the child must not have exited).
/// `fivecore NF --listen LISTEN --data-dir DATA` with JSON logs on a pipe (for `wait_ready`).
fn spawn_nf(nf: &str, listen: &str, data: &str) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_fivecore"))
        .args([nf, "--listen", listen, "--data-dir", data, "--log-format", "json"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn wait_ready(child: &mut std::process::Child, port: u16) {
    use std::io::{Read, Write};
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            if let Some(e) = child.stderr.as_mut() {
                let _ = e.read_to_string(&mut err);
            }
            panic!("fivecore exited early ({status}): {err}");
        }
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            let _ =
                s.write_all(b"GET /healthz/ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
            let mut answer = String::new();
            let _ = s.read_to_string(&mut answer);
            if answer.starts_with("HTTP/1.1 200") {
                return;
            }
        }
        assert!(std::time::Instant::now() < deadline, "fivecore not ready on port {port}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn sigterm(child: &std::process::Child) {
    let ok = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(ok.success());
}

#[test]
fn a_bad_configuration_is_an_error() {
    let dir = tempfile_dir();
    let path = format!("{dir}/bad.toml");
    std::fs::write(&path, "[sbi]\nlisten = \"not an address\"\n").unwrap();
    let (code, _, err) = fivecore(&["nrf", "--config", &path]);
    assert_eq!(code, 1);
    assert!(err.contains("invalid configuration") && err.contains("listen"), "{err}");
    let (code, _, err) = fivecore(&["up", "--config", "/nonexistent/fivecore.toml"]);
    assert_eq!(code, 1);
    assert!(err.contains("cannot read"), "{err}");
    // The example configuration is valid: the NRF starts with it (and stops on SIGTERM).
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/fivecore.toml");
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_fivecore"))
        .args(["nrf", "--config", example, "--listen", &format!("127.0.0.1:{port}")])
        .args(["--data-dir", &format!("{dir}/example")])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_ready(&mut child, port);
    sigterm(&child);
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

fn tempfile_dir() -> String {
    let dir = std::env::temp_dir().join(format!("fivecore-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.to_string_lossy().into_owned()
}

/// A PCF killed with SIGKILL while SMFs create and update associations keeps every one it
/// acknowledged: each 201 is answered only after the association's commit (docs/pcf.md, State).
#[test]
fn pcf_keeps_every_acknowledged_association_through_kill_9() {
    let dir = tempfile_dir();
    let data = format!("{dir}/pcf-data");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut child = spawn_nf("pcf", &listen, &data);
    wait_ready(&mut child, port);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = sbi::client::SbiClient::new(&sbi::client::ClientConfig::default()).unwrap();
    let url = format!("http://{listen}/npcf-smpolicycontrol/v1/sm-policies");
    let acked = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let smfs: Vec<_> = (0..8u32)
        .map(|smf| {
            let (client, url, acked, stop) =
                (client.clone(), url.clone(), acked.clone(), stop.clone());
            rt.spawn(async move {
                let mut n = 0u32;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    n += 1;
                    let body = format!(
                        r#"{{"supi":"imsi-0010100{smf:02}{n:06}","pduSessionId":1,"pduSessionType":"IPV4","dnn":"internet","sliceInfo":{{"sst":1}},"notificationUri":"http://127.0.0.1:9/smf"}}"#
                    );
                    let sent = client
                        .post(&url)
                        .header("content-type", "application/json")
                        .body(body)
                        .send()
                        .await;
                    match sent {
                        Ok(r) if r.status() == 201 => {
                            let loc = r.header("location").unwrap().to_string();
                            acked.lock().unwrap().push(loc);
                        }
                        // Killed under the request: not acknowledged, nothing to find.
                        _ => break,
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(700));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for s in smfs {
        let _ = rt.block_on(s);
    }
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() >= 8, "only {} creates acknowledged before the kill", acked.len());

    let mut child = spawn_nf("pcf", &listen, &data);
    wait_ready(&mut child, port);
    for loc in &acked {
        let r = rt.block_on(client.get(loc).send()).unwrap();
        assert_eq!(r.status(), 200, "{loc} was acknowledged, then lost to kill -9");
    }
    sigterm(&child);
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

/// A PCF killed with SIGKILL while SMFs report usage (N7 updates with accuUsageReports) keeps
/// every report it acknowledged: each 200 is answered only after the new totals' commit, with
/// the decision they made (docs/pcf.md, "Usage monitoring"). After the restart, each
/// subscriber's next session is granted the High project's cap less exactly what was
/// acknowledged (plus, at most, the one report in flight at the kill).
#[test]
fn pcf_keeps_every_acknowledged_usage_report_through_kill_9() {
    const REPORT: u64 = 1_000_000;
    const CAP: u64 = 10_000_000_000;
    let dir = tempfile_dir();
    let data = format!("{dir}/pcf-usage-data");
    let config = format!("{dir}/pcf-usage.toml");
    let high = concat!(env!("CARGO_MANIFEST_DIR"), "/../../policies/high");
    std::fs::write(&config, format!("[pcf]\npolicy = \"{high}\"\n[pcf.usage]\nenabled = true\n"))
        .unwrap();
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let spawn = || {
        Command::new(env!("CARGO_BIN_EXE_fivecore"))
            .args(["pcf", "--config", &config, "--listen", &listen, "--data-dir", &data])
            .args(["--log-format", "json"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut child = spawn();
    wait_ready(&mut child, port);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = sbi::client::SbiClient::new(&sbi::client::ClientConfig::default()).unwrap();
    let url = format!("http://{listen}/npcf-smpolicycontrol/v1/sm-policies");
    let (c, u) = (client.clone(), url.clone());
    let create = move |supi: String| {
        let (client, url) = (c.clone(), u.clone());
        async move {
            let body = format!(
                r#"{{"supi":"{supi}","pduSessionId":1,"pduSessionType":"IPV4","dnn":"internet","sliceInfo":{{"sst":1}},"notificationUri":"http://127.0.0.1:9/smf","servingNetwork":{{"mcc":"001","mnc":"02"}}}}"#
            );
            let r = client
                .post(&url)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 201);
            let v: serde_json::Value = serde_json::from_slice(r.body()).unwrap();
            let left = v["umDecs"]["monthly"]["volumeThreshold"].as_u64().expect("monitored");
            (r.header("location").unwrap().to_string(), left)
        }
    };
    let supis: Vec<String> = (0..4).map(|i| format!("imsi-00102000000{i:04}")).collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let smfs: Vec<_> = supis
        .iter()
        .map(|supi| {
            let (client, stop, create) = (client.clone(), stop.clone(), create.clone());
            let supi = supi.clone();
            rt.spawn(async move {
                let (loc, left) = create(supi).await;
                assert_eq!(left, CAP);
                let body = format!(
                    r#"{{"repPolicyCtrlReqTriggers":["US_RE"],"accuUsageReports":[{{"refUmIds":"monthly","volUsage":{REPORT}}}]}}"#
                );
                let mut acked = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let sent = client
                        .post(&format!("{loc}/update"))
                        .header("content-type", "application/json")
                        .body(body.clone())
                        .send()
                        .await;
                    match sent {
                        Ok(r) if r.status() == 200 => acked += 1,
                        // Killed under the request: not acknowledged.
                        _ => break,
                    }
                }
                acked
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let acked: Vec<u64> = smfs.into_iter().map(|s| rt.block_on(s).unwrap()).collect();
    assert!(acked.iter().all(|n| *n >= 1), "reports acknowledged before the kill: {acked:?}");

    let mut child = spawn();
    wait_ready(&mut child, port);
    for (supi, n) in supis.iter().zip(&acked) {
        let (_, left) = rt.block_on(create(supi.clone()));
        let used = CAP - left;
        assert!(
            used == n * REPORT || used == (n + 1) * REPORT,
            "{supi}: {n} reports acknowledged, {used} octets kept"
        );
    }
    sigterm(&child);
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

/// `up` with `[sbi.oauth2] required = true`: a consumer without a token is refused at the PCF and
/// the BSF; one with the NRF's token is served, and the PCF's own calls (NRF discovery, the
/// BSF binding) carry the tokens it asked the NRF for (the BSF would refuse them otherwise).
#[test]
fn up_with_access_tokens_required_serves_token_holders_only() {
    let dir = tempfile_dir();
    let data = format!("{dir}/up-oauth2");
    let mut child = spawn_up_with(&data, "\n[sbi.oauth2]\nrequired = true\n");
    let lines = up_table(&mut child);
    let port = |nf: &str| {
        let row = lines.iter().find(|l| l.starts_with(nf)).unwrap();
        table_port(row, "http://127.0.0.1:", 0)
    };
    let (nrf, bsf, pcf) = (port("NRF"), port("BSF"), port("PCF"));
    for p in [nrf, bsf, pcf] {
        wait_ready(&mut child, p);
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = sbi::client::SbiClient::new(&sbi::client::ClientConfig::default()).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    // Registration needs no token (nnrf-nfm is exempt).
    for nf_type in ["BSF", "PCF"] {
        let url = format!("http://127.0.0.1:{nrf}/nnrf-nfm/v1/nf-instances?nf-type={nf_type}");
        while !String::from_utf8_lossy(rt.block_on(client.get(&url).send()).unwrap().body())
            .contains("/nf-instances/")
        {
            assert!(std::time::Instant::now() < deadline, "{nf_type} not registered");
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
    let ctx = serde_json::json!({"supi": "imsi-001010000000002", "pduSessionId": 1,
        "pduSessionType": "IPV4", "dnn": "internet", "sliceInfo": {"sst": 1},
        "ipv4Address": "10.45.0.7", "notificationUri": "http://127.0.0.1:9/notify"});
    let create = format!("http://127.0.0.1:{pcf}/npcf-smpolicycontrol/v1/sm-policies");
    let r = rt.block_on(client.post(&create).json(&ctx).send()).unwrap();
    assert_eq!(r.status(), 401, "{}", String::from_utf8_lossy(r.body()));
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));

    // An SMF registers, asks the NRF for tokens, and is served.
    let smf = "5a3c4c9e-0000-4000-8000-00000000051f";
    let profile = serde_json::json!({"nfInstanceId": smf, "nfType": "SMF",
        "nfStatus": "REGISTERED", "ipv4Addresses": ["127.0.0.1"]});
    let url = format!("http://127.0.0.1:{nrf}/nnrf-nfm/v1/nf-instances/{smf}");
    assert_eq!(rt.block_on(client.put(&url).json(&profile).send()).unwrap().status(), 201);
    let token = |target: &str, scope: &str| {
        let form = format!(
            "grant_type=client_credentials&nfInstanceId={smf}&nfType=SMF&targetNfType={target}&scope={scope}"
        );
        let r = rt
            .block_on(
                client
                    .post(&format!("http://127.0.0.1:{nrf}/oauth2/token"))
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(form)
                    .send(),
            )
            .unwrap();
        assert_eq!(r.status(), 200, "{}", String::from_utf8_lossy(r.body()));
        let v: serde_json::Value = r.json().unwrap();
        format!("Bearer {}", v["access_token"].as_str().unwrap())
    };
    let r = rt
        .block_on(
            client
                .post(&create)
                .header("authorization", token("PCF", "npcf-smpolicycontrol"))
                .json(&ctx)
                .send(),
        )
        .unwrap();
    assert_eq!(r.status(), 201, "{}", String::from_utf8_lossy(r.body()));

    // The PCF registered the session's binding at the BSF, which requires tokens too.
    let find = format!("http://127.0.0.1:{bsf}/nbsf-management/v1/pcfBindings?ipv4Addr=10.45.0.7");
    assert_eq!(rt.block_on(client.get(&find).send()).unwrap().status(), 401);
    let bsf_token = token("BSF", "nbsf-management");
    loop {
        let r = rt
            .block_on(client.get(&find).header("authorization", bsf_token.clone()).send())
            .unwrap();
        if r.status() == 200 {
            assert!(String::from_utf8_lossy(r.body()).contains("imsi-001010000000002"));
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no binding at the BSF: {}", r.status());
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    sigterm(&child);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

/// `fivecore cert` makes a lab PKI an NF serves mutual TLS with: the BSF's certificate (with
/// its instance id as urn:uuid in the subjectAltName) accepted by a client trusting the CA, and
/// a PCF certificate of the same CA accepted as a client certificate; a client without one
/// refused.
#[test]
fn cert_makes_a_lab_pki_for_mutual_tls() {
    let dir = tempfile_dir();
    let pki = format!("{dir}/pki");
    let (code, out, err) = fivecore(&["cert", "ca", "--out", &pki]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("ca.crt"), "{out}");
    let bsf_id = "5a3c4c9e-0000-4000-8000-000000000b5f";
    let (code, out, err) =
        fivecore(&["cert", "nf", "--ca", &pki, "--nf-type", "BSF", "--instance-id", bsf_id]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("urn:uuid:{bsf_id}")), "{out}");
    let (code, out, err) = fivecore(&["cert", "nf", "--ca", &pki, "--nf-type", "PCF"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("instance_id = \""), "a new instance id is printed: {out}");
    let mode = std::fs::metadata(format!("{pki}/pcf.key")).unwrap().permissions();
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777, 0o600);
    // A bad CA directory is a clear error.
    let (code, _, err) = fivecore(&["cert", "nf", "--ca", "/nonexistent", "--nf-type", "UDR"]);
    assert_eq!(code, 1);
    assert!(err.contains("/nonexistent/ca.crt"), "{err}");

    let port = free_port();
    let config = format!("{dir}/bsf-tls.toml");
    std::fs::write(
        &config,
        format!(
            "instance_id = \"{bsf_id}\"\n[sbi.tls]\ncert = \"{pki}/bsf.crt\"\nkey = \"{pki}/bsf.key\"\nclient_ca = \"{pki}/ca.crt\"\n"
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_fivecore"))
        .args(["bsf", "--listen", &format!("127.0.0.1:{port}"), "--config", &config])
        .args(["--data-dir", &format!("{dir}/bsf-data"), "--log-format", "json"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let tls = |with_cert: bool| sbi::client::ClientConfig {
        tls: sbi::client::TlsClientConfig {
            ca_files: vec![format!("{pki}/ca.crt").into()],
            cert_file: with_cert.then(|| format!("{pki}/pcf.crt").into()),
            key_file: with_cert.then(|| format!("{pki}/pcf.key").into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let with_cert = sbi::client::SbiClient::new(&tls(true)).unwrap();
    let url = format!("https://localhost:{port}/healthz/live");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        match rt.block_on(with_cert.get(&url).send()) {
            Ok(r) => {
                assert_eq!(r.status(), 200);
                break;
            }
            Err(e) => {
                assert!(child.try_wait().unwrap().is_none(), "the BSF exited");
                assert!(std::time::Instant::now() < deadline, "no mTLS answer: {e}");
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
    }
    let without = sbi::client::SbiClient::new(&tls(false)).unwrap();
    assert!(rt.block_on(without.get(&url).send()).is_err(), "no client certificate: refused");
    sigterm(&child);
    assert_eq!(child.wait().unwrap().code(), Some(0));
}
