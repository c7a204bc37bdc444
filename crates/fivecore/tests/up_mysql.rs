//! `fivecore up` with `[store] backend = "mysql"` (issue #25): all five NFs start on one real
//! MariaDB database (`testkit::mariadb`, started once for this test binary), each takes one
//! request (an NRF registration, a BSF binding, UDR policy data, a PCF SM policy, a Data
//! Director feed), their rows are in MariaDB, no SQLite file is made, and everything is still
//! served after `up` is killed with SIGKILL and started again. Skipped without MariaDB unless
//! `FIVECORE_REQUIRE_MARIADB=1`.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sbi::client::{ClientConfig, SbiClient};
use serde_json::{json, Value};

/// `up` on the configuration at `config`, its data (the Data Director's log) in `data`.
fn start_up(config: &Path, data: &Path, stderr: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_fivecore"))
        .args(["up", "--port-base", "0", "--config", config.to_str().unwrap()])
        .args(["--data-dir", data.to_str().unwrap(), "--log-format", "json"])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(stderr).unwrap())
        .spawn()
        .unwrap()
}

/// Kills the child (SIGKILL, by its PID) when dropped, so a failed test leaves none behind.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The SBI port of each NF from the table `up` prints once every NF is bound.
fn up_ports(child: &mut Child, stderr: &Path) -> BTreeMap<&'static str, u16> {
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut ports = BTreeMap::new();
    loop {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap() == 0 {
            let log = std::fs::read_to_string(stderr).unwrap_or_default();
            panic!("up ended before its table ({ports:?}): {log}");
        }
        if line.starts_with("Every SBI port") {
            return ports;
        }
        for (name, nf) in [
            ("NRF", "nrf"),
            ("UDR", "udr"),
            ("BSF", "bsf"),
            ("PCF", "pcf"),
            ("Data Director", "dd"),
        ] {
            if let Some(rest) = line.strip_prefix(name) {
                if let Some(at) = rest.find("http://127.0.0.1:") {
                    let p = &rest[at + "http://127.0.0.1:".len()..];
                    let port = p[..p.find(|c: char| !c.is_ascii_digit()).unwrap()].parse().unwrap();
                    ports.insert(nf, port);
                }
            }
        }
    }
}

async fn send(
    c: &SbiClient,
    method: &str,
    url: &str,
    body: Option<&Value>,
) -> (u16, Value, String) {
    let req = match method {
        "POST" => c.post(url),
        "PUT" => c.put(url),
        _ => c.get(url),
    };
    let req = match body {
        Some(b) => req.json(b),
        None => req,
    };
    let r = req.send().await.unwrap();
    let location = r.header("location").unwrap_or("").to_owned();
    (r.status().as_u16(), serde_json::from_slice(r.body()).unwrap_or(Value::Null), location)
}

async fn ready(c: &SbiClient, ports: &BTreeMap<&'static str, u16>) {
    let deadline = Instant::now() + Duration::from_secs(60);
    for port in ports.values() {
        let url = format!("http://127.0.0.1:{port}/healthz/ready");
        while c.get(&url).send().await.map(|r| r.status().as_u16()).unwrap_or(0) != 200 {
            assert!(Instant::now() < deadline, "port {port} not ready");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

const AMF: &str = "6f3c2b1a-0d4e-4f5a-8b7c-9d0e1f2a3b4c";
const SUPI: &str = "imsi-001010000000077";

#[test]
fn up_runs_every_nf_on_mysql_and_a_sigkill_loses_nothing_acknowledged() {
    let Some(server) = testkit::mariadb::server() else { return };
    let dir = tempfile::tempdir().unwrap();
    let url = server.database("up_mysql");
    let db = url.rsplit('/').next().unwrap().to_owned();
    let config = dir.path().join("up.toml");
    // Diameter on ports of the system's choosing; the PCF's lease short, so the start after the
    // SIGKILL does not wait the default 10 s for the killed instance's lease.
    std::fs::write(
        &config,
        format!(
            "[store]\nbackend = \"mysql\"\nurl = \"{url}\"\n\n[bsf.rx]\nlisten = \"127.0.0.1:0\"\n\
             \n[udr.sh]\nlisten = \"127.0.0.1:0\"\n\n[pcf]\ninstance_lease_ms = 1500\n\
             \n[console]\nenabled = false\n"
        ),
    )
    .unwrap();
    let data = dir.path().join("up");
    let stderr = dir.path().join("up.log");
    let mut up = Killed(start_up(&config, &data, &stderr));
    let ports = up_ports(&mut up.0, &stderr);
    assert_eq!(ports.len(), 5, "{ports:?}");
    let base = |nf: &str| format!("http://127.0.0.1:{}", ports[nf]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let c = SbiClient::new(&ClientConfig { request_timeout_ms: 30_000, ..ClientConfig::default() })
        .unwrap();

    let sm_policy = rt.block_on(async {
        ready(&c, &ports).await;
        let profile = json!({"nfInstanceId": AMF, "nfType": "AMF", "nfStatus": "REGISTERED",
                             "ipv4Addresses": ["10.0.0.7"]});
        let nrf = format!("{}/nnrf-nfm/v1/nf-instances/{AMF}", base("nrf"));
        let (s, v, _) = send(&c, "PUT", &nrf, Some(&profile)).await;
        assert_eq!(s, 201, "NRF register: {v}");
        let binding = json!({"supi": SUPI, "ipv4Addr": "10.45.0.77", "dnn": "internet",
                             "snssai": {"sst": 1}, "pcfFqdn": "pcf.example.com"});
        let bsf = format!("{}/nbsf-management/v1/pcfBindings", base("bsf"));
        let (s, v, _) = send(&c, "POST", &bsf, Some(&binding)).await;
        assert_eq!(s, 201, "BSF binding: {v}");
        let sm_data = json!({"smPolicySnssaiData": {"1": {"snssai": {"sst": 1},
            "smPolicyDnnData": {"internet": {"dnn": "internet"}}}}});
        let udr = format!("{}/nudr-dr/v2/policy-data/ues/{SUPI}/sm-data", base("udr"));
        let (s, v, _) = send(&c, "PUT", &udr, Some(&sm_data)).await;
        assert!(s == 201 || s == 204, "UDR policy data: {s} {v}");
        let sm = json!({"supi": SUPI, "pduSessionId": 1, "pduSessionType": "IPV4",
                        "dnn": "internet", "sliceInfo": {"sst": 1},
                        "notificationUri": "http://127.0.0.1:9/notify"});
        let pcf = format!("{}/npcf-smpolicycontrol/v1/sm-policies", base("pcf"));
        let (s, v, location) = send(&c, "POST", &pcf, Some(&sm)).await;
        assert_eq!(s, 201, "PCF SM create: {v}");
        let feed = json!({"name": "up-feed",
                          "sink": {"type": "tcp", "endpoints": [{"address": "127.0.0.1:9"}]}});
        let dd = format!("{}/dd-admin/v1/feeds", base("dd"));
        let (s, v, _) = send(&c, "POST", &dd, Some(&feed)).await;
        assert_eq!(s, 201, "DD feed: {v}");
        location.rsplit('/').next().unwrap().to_owned()
    });

    // Every answer above was given after its commit: the rows are in MariaDB now.
    let count = |sql: &str| -> u64 {
        let out = server.client(&format!("USE `{db}`; {sql}")).unwrap();
        out.trim().parse().unwrap_or_else(|_| panic!("{sql}: {out}"))
    };
    let rows = [
        (
            "NRF",
            format!(
                "SELECT COUNT(*) FROM documents WHERE collection = 'nrf_profiles' AND id = '{AMF}'"
            ),
        ),
        ("BSF", format!("SELECT COUNT(*) FROM bsf_pcf_binding WHERE supi = '{SUPI}'")),
        ("UDR", format!("SELECT COUNT(*) FROM udr_policy_data WHERE id = '{SUPI}'")),
        ("PCF", format!("SELECT COUNT(*) FROM pcf_sm_policy WHERE supi = '{SUPI}'")),
        (
            "DD",
            "SELECT COUNT(*) FROM documents WHERE collection = 'dd_feeds' AND id = 'up-feed'"
                .to_owned(),
        ),
    ];
    for (nf, sql) in &rows {
        assert_eq!(count(sql), 1, "the {nf}'s row is not in MariaDB: {sql}");
    }
    for file in ["nrf.db", "bsf.db", "udr.db", "pcf.db", "dd.db"] {
        assert!(!data.join(file).exists(), "{file} made on MySQL");
    }

    // SIGKILL, then `up` again on the same database: every NF serves what it acknowledged.
    up.0.kill().unwrap();
    up.0.wait().unwrap();
    let mut up = Killed(start_up(&config, &data, &stderr));
    let ports = up_ports(&mut up.0, &stderr);
    let base = |nf: &str| format!("http://127.0.0.1:{}", ports[nf]);
    rt.block_on(async {
        ready(&c, &ports).await;
        let (s, v, _) =
            send(&c, "GET", &format!("{}/nnrf-nfm/v1/nf-instances/{AMF}", base("nrf")), None).await;
        assert_eq!((s, v["nfType"].as_str()), (200, Some("AMF")), "NRF: {v}");
        let q = format!("{}/nbsf-management/v1/pcfBindings?ipv4Addr=10.45.0.77", base("bsf"));
        let (s, v, _) = send(&c, "GET", &q, None).await;
        assert_eq!((s, v["supi"].as_str()), (200, Some(SUPI)), "BSF: {v}");
        let udr = format!("{}/nudr-dr/v2/policy-data/ues/{SUPI}/sm-data", base("udr"));
        let (s, v, _) = send(&c, "GET", &udr, None).await;
        assert_eq!(s, 200, "UDR: {v}");
        assert_eq!(v["smPolicySnssaiData"]["1"]["snssai"]["sst"], 1, "UDR: {v}");
        let pcf = format!("{}/npcf-smpolicycontrol/v1/sm-policies/{sm_policy}", base("pcf"));
        let (s, v, _) = send(&c, "GET", &pcf, None).await;
        assert_eq!(s, 200, "PCF: {v}");
        let (s, v, _) =
            send(&c, "GET", &format!("{}/dd-admin/v1/feeds/up-feed", base("dd")), None).await;
        assert_eq!((s, v["name"].as_str()), (200, Some("up-feed")), "DD: {v}");
    });
    // A graceful stop this time.
    let ok = Command::new("kill").args(["-TERM", &up.0.id().to_string()]).status().unwrap();
    assert!(ok.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = up.0.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "up did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}: {}", std::fs::read_to_string(&stderr).unwrap_or_default());
}
