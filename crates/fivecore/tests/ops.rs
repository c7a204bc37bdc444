//! What an operator deploys beside the binary (deploy/, docs/operations.md), checked against
//! the real thing:
//! - every metric the Grafana dashboards, the alert rules and docs/operations.md name is on the
//!   /metrics of real NFs (`fivecore up` with traffic, a Data Director fed with copies, the
//!   kit's `--metrics-listen`), and every metric the NFs expose is documented, with its type;
//! - the alert rules pass `promtool check rules` and their unit tests (`promtool test rules`);
//! - the Helm chart passes `helm lint` and renders (`helm template`) with several values files,
//!   and the fivecore TOML it renders for each NF is accepted by the NF's own configuration
//!   check (`fivecore <nf> --check-config`), while a bad setting is refused.
//!
//! promtool (Debian `prometheus`) and helm (the Go module) are installed by ./test.sh; without
//! them their tests print why and pass, unless FIVECORE_REQUIRE_PROMTOOL=1 /
//! FIVECORE_REQUIRE_HELM=1.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn fivecore() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fivecore"))
}

/// The external tool `name`, or `None` (and a line saying why) when it is missing and not
/// required by `FIVECORE_REQUIRE_<TOOL>=1`.
fn tool(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths).map(|d| d.join(name)).find(|p| p.is_file())
    });
    if found.is_none() {
        let var = format!("FIVECORE_REQUIRE_{}", name.to_ascii_uppercase());
        assert!(
            std::env::var(&var).as_deref() != Ok("1"),
            "{name} is required ({var}=1) but not on PATH"
        );
        eprintln!("skipped: {name} is not installed (./test.sh installs it)");
    }
    found
}

fn run(cmd: &mut Command) -> (bool, String, String) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn temp_dir(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fivecore-ops-{what}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

// === metric names in PromQL ===

/// The metric names a PromQL expression reads: identifiers that are not functions, keywords,
/// label names (in braces or in by/without/on/ignoring/group lists), strings, durations or
/// Grafana variables.
fn promql_metrics(expr: &str) -> BTreeSet<String> {
    const KEYWORDS: [&str; 16] = [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "and",
        "or",
        "unless",
        "bool",
        "offset",
        "sum",
        "min",
        "max",
        "avg",
        "count",
    ];
    let b = expr.as_bytes();
    let mut out = BTreeSet::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'"' || c == b'\'' {
            // A string: skip it.
            i += 1;
            while i < b.len() && b[i] != c {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c == b'{' {
            // Label matchers.
            while i < b.len() && b[i] != b'}' {
                if b[i] == b'"' {
                    i += 1;
                    while i < b.len() && b[i] != b'"' {
                        i += if b[i] == b'\\' { 2 } else { 1 };
                    }
                }
                i += 1;
            }
            i += 1;
        } else if c == b'[' {
            // A range or subquery duration.
            while i < b.len() && b[i] != b']' {
                i += 1;
            }
            i += 1;
        } else if c == b'$' {
            // A Grafana variable.
            i += 1;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
        } else if c.is_ascii_digit() || (c == b'.' && i + 1 < b.len() && b[i + 1].is_ascii_digit())
        {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.') {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == b'_' || c == b':' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b':') {
                i += 1;
            }
            let word = &expr[start..i];
            let rest = expr[i..].trim_start();
            if rest.starts_with('(') {
                if ["by", "without", "on", "ignoring", "group_left", "group_right"].contains(&word)
                {
                    // A list of label names.
                    i += expr[i..].find(')').map_or(expr.len() - i, |p| p + 1);
                } else if word == "label_values" {
                    // label_values(metric{...}, label): only the metric.
                    let inner = &expr[i..];
                    let open = inner.find('(').unwrap() + 1;
                    let comma = inner.rfind(',').unwrap_or(inner.len() - 1);
                    out.extend(promql_metrics(&inner[open..comma]));
                    i += inner.find(')').map_or(inner.len(), |p| p + 1);
                }
                // Any other word before '(' is a function or an aggregation.
            } else if !KEYWORDS.contains(&word) && word != "inf" && word != "nan" {
                out.insert(word.to_owned());
            }
        } else {
            i += 1;
        }
    }
    out
}

#[test]
fn promql_names_are_read_as_metrics_only() {
    let m = promql_metrics(
        r#"histogram_quantile(0.99, sum by (operation, le) (rate(sbi_request_duration_seconds_bucket{nf="bsf",instance=~"$instance"}[$__rate_interval])))
          / on (nf, instance) group_left sum(up{x="a b"}) > 0.5 and store_queued_writes offset 5m"#,
    );
    let want: BTreeSet<String> =
        ["sbi_request_duration_seconds_bucket", "up", "store_queued_writes"]
            .map(String::from)
            .into();
    assert_eq!(m, want);
    assert_eq!(
        promql_metrics(r#"label_values(process_resident_memory_bytes{nf="nrf"}, instance)"#),
        ["process_resident_memory_bytes".to_owned()].into()
    );
}

/// Every PromQL expression of the dashboards (panel targets and variable queries).
fn dashboard_exprs() -> BTreeMap<String, Vec<String>> {
    let dir = repo().join("deploy/grafana");
    let mut all = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let mut exprs = Vec::new();
        collect_exprs(&v, &mut exprs);
        assert!(exprs.len() > 5, "{}: {} queries", path.display(), exprs.len());
        all.insert(path.file_name().unwrap().to_string_lossy().into_owned(), exprs);
    }
    assert!(all.len() >= 6, "dashboards: {:?}", all.keys());
    all
}

fn collect_exprs(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("expr" | "definition", serde_json::Value::String(s)) => out.push(s.clone()),
                    _ => collect_exprs(x, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect_exprs(x, out)),
        _ => {}
    }
}

/// Every `expr:` of the alert rules (their value, across the YAML block scalars).
fn alert_exprs() -> Vec<String> {
    let text = std::fs::read_to_string(repo().join("deploy/prometheus/alerts.yml")).unwrap();
    let doc: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    let mut out = Vec::new();
    for group in doc["groups"].as_sequence().unwrap() {
        for rule in group["rules"].as_sequence().unwrap() {
            out.push(rule["expr"].as_str().unwrap().to_owned());
        }
    }
    assert!(out.len() >= 10, "{} rules", out.len());
    out
}

// === the metrics the real NFs expose ===

/// One metric family of a /metrics page: its type, and the sample names that type makes.
#[derive(Debug, Clone, PartialEq)]
struct Family {
    kind: String,
}

fn sample_names(name: &str, kind: &str) -> Vec<String> {
    match kind {
        "counter" => vec![format!("{name}_total")],
        "histogram" => ["_bucket", "_sum", "_count"].map(|s| format!("{name}{s}")).into(),
        "info" => vec![format!("{name}_info")],
        _ => vec![name.to_owned()],
    }
}

/// The families a /metrics page declares (`# TYPE`), by name.
fn families(page: &str) -> BTreeMap<String, Family> {
    page.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| {
            let (name, kind) = l.split_once(' ').unwrap();
            (name.to_owned(), Family { kind: kind.to_owned() })
        })
        .collect()
}

fn http_get(port: u16, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

fn http_send(port: u16, method: &str, path: &str, body: &str) -> u16 {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn wait_ready(child: &mut Child, port: u16) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            if let Some(e) = child.stderr.as_mut() {
                let _ = e.read_to_string(&mut err);
            }
            panic!("fivecore exited early ({status}): {err}");
        }
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            && http_get(port, "/healthz/ready").starts_with("HTTP/1.1 200")
        {
            return;
        }
        assert!(Instant::now() < deadline, "not ready on port {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Stops a child started by this test with SIGTERM (SIGKILL if it lingers), by its PID.
struct Stop(Child);

impl Drop for Stop {
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.0.try_wait() {
            return;
        }
        let _ = Command::new("kill").args(["-TERM", &self.0.id().to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The ports of the table `fivecore up` prints: SBI per NF, in the table's order.
fn up_ports(child: &mut Child) -> BTreeMap<String, u16> {
    use std::io::BufRead;
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut ports = BTreeMap::new();
    loop {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "up ended: {ports:?}");
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
                    ports.insert(nf.to_owned(), port);
                }
            }
        }
    }
}

/// The NFs of `fivecore up` (Diameter on for the UDR, BSF and PCF, with a configured peer that
/// is not there; every NF copying to a separate Data Director), after a little traffic through
/// each and a few errors: every family each one declares, by NF ("dd" is `up`'s Data Director,
/// "dd-fed" the one the copies reach).
fn real_metrics() -> BTreeMap<String, BTreeMap<String, Family>> {
    let dir = temp_dir("metrics");
    let dd_port = free_port();
    let mut dd = Stop(
        fivecore()
            .args(["dd", "--listen", &format!("127.0.0.1:{dd_port}")])
            .args(["--data-dir", dir.join("dd").to_str().unwrap(), "--log-format", "json"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    wait_ready(&mut dd.0, dd_port);
    let copy = |nf: &str| {
        format!(
            "\n[{nf}.copy]\nenabled = true\nuri = \"http://127.0.0.1:{dd_port}\"\nlinger_ms = 1\n"
        )
    };
    let config = format!(
        "[bsf.rx]\nlisten = \"127.0.0.1:0\"\n\n[udr.sh]\nenabled = true\nlisten = \"127.0.0.1:0\"\n\
         \n[pcf.diameter]\nenabled = true\nlisten = \"127.0.0.1:0\"\n\
         \n[sbi.rate_limit]\nenabled = true\nper_consumer_rps = 100000.0\n{}{}{}{}",
        copy("nrf"),
        copy("udr"),
        copy("bsf"),
        copy("pcf")
    );
    let config_path = dir.join("up.toml");
    std::fs::write(&config_path, config).unwrap();
    let mut up = Stop(
        fivecore()
            .args(["up", "--port-base", "0", "--config", config_path.to_str().unwrap()])
            .args(["--data-dir", dir.join("up").to_str().unwrap(), "--log-format", "json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let ports = up_ports(&mut up.0);
    assert_eq!(ports.len(), 5, "{ports:?}");
    for port in ports.values() {
        wait_ready(&mut up.0, *port);
    }
    // Traffic: an answer and an error or two per NF.
    let binding = r#"{"supi":"imsi-001010000000001","ipv4Addr":"10.45.0.7","dnn":"internet","snssai":{"sst":1},"pcfFqdn":"pcf.example.com"}"#;
    assert_eq!(http_send(ports["bsf"], "POST", "/nbsf-management/v1/pcfBindings", binding), 201);
    assert_eq!(http_send(ports["bsf"], "POST", "/nbsf-management/v1/pcfBindings", "{}"), 400);
    assert_eq!(
        http_send(ports["bsf"], "GET", "/nbsf-management/v1/pcfBindings?ipv4Addr=10.45.0.7", ""),
        200
    );
    assert_eq!(
        http_send(
            ports["nrf"],
            "GET",
            "/nnrf-disc/v1/nf-instances?target-nf-type=BSF&requester-nf-type=PCF",
            ""
        ),
        200
    );
    assert_eq!(http_send(ports["nrf"], "GET", "/no/such/api", ""), 404);
    assert_eq!(
        http_send(
            ports["udr"],
            "GET",
            "/nudr-group-id-map/v1/nf-group-ids?nf-type=UDM&subscriberId=imsi-001010000000009",
            ""
        ),
        404
    );
    let sm = r#"{"supi":"imsi-001010000000001","pduSessionId":1,"pduSessionType":"IPV4","dnn":"internet","sliceInfo":{"sst":1},"notificationUri":"http://127.0.0.1:9/notify"}"#;
    assert_eq!(http_send(ports["pcf"], "POST", "/npcf-smpolicycontrol/v1/sm-policies", sm), 201);
    // The copies reach the Data Director before its page is read.
    let deadline = Instant::now() + Duration::from_secs(20);
    while {
        let page = http_get(dd_port, "/metrics");
        !page.contains("dd_ingest_copies_total{topic=\"bsf\"} ")
            || page.contains("dd_ingest_copies_total{topic=\"bsf\"} 0\n")
    } {
        assert!(Instant::now() < deadline, "{}", http_get(dd_port, "/metrics"));
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut all: BTreeMap<String, BTreeMap<String, Family>> = ports
        .iter()
        .map(|(nf, port)| (nf.clone(), families(&http_get(*port, "/metrics"))))
        .collect();
    all.insert("dd-fed".into(), families(&http_get(dd_port, "/metrics")));
    all.insert("bench".into(), bench_metrics());
    all
}

/// What `fivecore bench --metrics-listen` serves while a short run lasts (the NRF the kit
/// starts itself); the run then ends on its own, stopping its NRF.
fn bench_metrics() -> BTreeMap<String, Family> {
    let dir = temp_dir("bench");
    let port = free_port();
    let mut bench = Stop(
        fivecore()
            .args(["bench", "nrf-5k", "--rate", "50", "--duration", "5", "--warmup", "1"])
            .args(["--max-p99-ms", "1000", "--quiet", "--out", dir.to_str().unwrap()])
            .args(["--metrics-listen", &format!("127.0.0.1:{port}")])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = bench.0.try_wait().unwrap() {
            let mut err = String::new();
            let _ = bench.0.stderr.as_mut().unwrap().read_to_string(&mut err);
            panic!("bench ended ({status}) before its metrics were read: {err}");
        }
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            let page = http_get(port, "/metrics");
            if page.contains("bench_requests_total{procedure=") {
                let status = bench.0.wait().unwrap();
                assert!(status.code().is_some(), "bench: {status}");
                return families(&page);
            }
        }
        assert!(Instant::now() < deadline, "no bench figures on :{port}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The metrics table of docs/operations.md: name -> (type, the row's text).
fn documented() -> BTreeMap<String, (String, String)> {
    let doc = std::fs::read_to_string(repo().join("docs/operations.md")).unwrap();
    let start = doc.find("<!-- metrics-table-start -->").expect("metrics table start marker");
    let end = doc.find("<!-- metrics-table-end -->").expect("metrics table end marker");
    let mut rows = BTreeMap::new();
    for line in doc[start..end].lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let name = cells[1].trim_matches('`').to_owned();
        assert!(
            rows.insert(name.clone(), (cells[2].to_owned(), line.to_owned())).is_none(),
            "{name} documented twice"
        );
    }
    assert!(rows.len() > 40, "{} metrics documented", rows.len());
    rows
}

/// Whether `name` is a string in the crates' sources (a metric only some configurations show).
fn in_sources(name: &str) -> bool {
    fn walk(dir: &Path, needle: &str) -> bool {
        std::fs::read_dir(dir).unwrap().any(|e| {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, needle)
            } else {
                p.extension().is_some_and(|x| x == "rs")
                    && std::fs::read_to_string(&p).unwrap().contains(needle)
            }
        })
    }
    walk(&repo().join("crates"), &format!("\"{name}\""))
}

#[test]
fn dashboards_alerts_and_docs_name_only_metrics_the_real_nfs_expose() {
    let (ok, _, err) =
        run(Command::new("python3").arg(repo().join("scripts/gen-dashboards.py")).arg("--check"));
    assert!(ok, "{err}");
    let real = real_metrics();
    // Every sample name each NF's page can carry.
    let mut exposed: BTreeSet<String> = ["up".to_owned()].into(); // Prometheus's own
    let mut kinds: BTreeMap<String, String> = BTreeMap::new();
    for fams in real.values() {
        for (name, f) in fams {
            exposed.extend(sample_names(name, &f.kind));
            kinds.insert(name.clone(), f.kind.clone());
        }
    }
    // The NF-specific families are where they belong.
    for (nf, family) in [
        ("bsf", "diameter_peers"),
        ("udr", "diameter_answers"),
        ("pcf", "policy_evaluations"),
        ("udr", "udr_policy_data_notifications_delivered"),
        ("dd-fed", "dd_feed_messages"),
        ("dd-fed", "dd_ingest_copies"),
        ("bsf", "dd_copies_dropped"),
        ("bsf", "store_commit_duration_seconds"),
        ("bsf", "store_sqlite_memory_bytes"),
        ("bsf", "store_sqlite_memory_limit_bytes"),
        ("nrf", "nf_ready"),
        ("bench", "bench_latency_seconds"),
    ] {
        assert!(real[nf].contains_key(family), "{nf} lacks {family}: {:?}", real[nf].keys());
    }
    let mut missing = Vec::new();
    for (board, exprs) in dashboard_exprs() {
        for e in exprs {
            for m in promql_metrics(&e) {
                if !exposed.contains(&m) {
                    missing.push(format!("{board}: {m} (in {e})"));
                }
            }
        }
    }
    for e in alert_exprs() {
        for m in promql_metrics(&e) {
            if !exposed.contains(&m) {
                missing.push(format!("alerts.yml: {m} (in {e})"));
            }
        }
    }
    assert!(missing.is_empty(), "metrics no NF exposes:\n{}", missing.join("\n"));

    // docs/operations.md documents every family, with its type; a documented family that no NF
    // showed here must be one of the configuration-dependent ones the sources define.
    let docs = documented();
    let mut faults = Vec::new();
    for (name, kind) in &kinds {
        match docs.get(name) {
            None => faults.push(format!("{name} ({kind}) is not in docs/operations.md")),
            Some((doc_kind, _)) if doc_kind != kind => {
                faults.push(format!("{name}: documented as {doc_kind}, exposed as {kind}"))
            }
            Some(_) => {}
        }
    }
    for (name, (_, row)) in &docs {
        if !(kinds.contains_key(name) || (row.contains("only with") && in_sources(name))) {
            faults.push(format!("{name} is documented but no NF exposes it: {row}"));
        }
    }
    assert!(faults.is_empty(), "docs/operations.md:\n{}", faults.join("\n"));
}

// === promtool ===

#[test]
fn alert_rules_pass_promtool_and_their_unit_tests() {
    let Some(promtool) = tool("promtool") else { return };
    let dir = repo().join("deploy/prometheus");
    let (ok, out, err) =
        run(Command::new(&promtool).args(["check", "rules", "alerts.yml"]).current_dir(&dir));
    assert!(ok && out.contains("SUCCESS"), "{out}{err}");
    let (ok, out, err) =
        run(Command::new(&promtool).args(["check", "config", "prometheus.yml"]).current_dir(&dir));
    assert!(ok, "{out}{err}");
    let (ok, out, err) =
        run(Command::new(&promtool).args(["test", "rules", "alerts_test.yml"]).current_dir(&dir));
    assert!(ok && out.contains("SUCCESS"), "{out}{err}");
    // The unit tests can fail: a rule that no longer fires as they expect is caught.
    let broken = temp_dir("rules");
    let rules = std::fs::read_to_string(dir.join("alerts.yml")).unwrap();
    std::fs::write(broken.join("alerts.yml"), rules.replace("nf_ready == 0", "nf_ready == 2"))
        .unwrap();
    std::fs::copy(dir.join("alerts_test.yml"), broken.join("alerts_test.yml")).unwrap();
    let (ok, out, err) = run(Command::new(&promtool)
        .args(["test", "rules", "alerts_test.yml"])
        .current_dir(&broken));
    assert!(!ok && format!("{out}{err}").contains("FivecoreNfNotReady"), "{out}{err}");
}

// === helm ===

/// The chart rendered with `values` (files under the chart, then `--set` pairs): its documents.
fn helm_template(
    helm: &Path,
    values: &[&str],
    sets: &[&str],
) -> Result<Vec<serde_yaml::Value>, String> {
    let chart = repo().join("deploy/helm/fivecore");
    let mut cmd = Command::new(helm);
    cmd.args(["template", "fivecore"]).arg(&chart);
    for v in values {
        cmd.arg("-f").arg(chart.join(v));
    }
    for s in sets {
        cmd.args(["--set", s]);
    }
    let (ok, out, err) = run(&mut cmd);
    if !ok {
        return Err(err);
    }
    Ok(serde_yaml::Deserializer::from_str(&out)
        .map(|d| serde_yaml::Value::deserialize(d).unwrap())
        .filter(|v| !v.is_null())
        .collect())
}

use serde::Deserialize;

fn of_kind<'a>(docs: &'a [serde_yaml::Value], kind: &str) -> Vec<&'a serde_yaml::Value> {
    docs.iter().filter(|d| d["kind"].as_str() == Some(kind)).collect()
}

fn name_of(d: &serde_yaml::Value) -> &str {
    d["metadata"]["name"].as_str().unwrap()
}

/// `fivecore <nf> --config FILE --check-config` on `toml`: exit success, and what it said.
fn check_config(nf: &str, toml: &str) -> (bool, String) {
    let dir = temp_dir(&format!("check-{nf}"));
    let path = dir.join("fivecore.toml");
    std::fs::write(&path, toml).unwrap();
    let (ok, out, err) =
        run(fivecore().args([nf, "--config", path.to_str().unwrap(), "--check-config"]));
    (ok, format!("{out}{err}"))
}

/// For each StatefulSet of the rendered chart, the TOML its init container assembles (the
/// ConfigMap, plus the store Secret's when it mounts one), checked by the NF it runs.
fn check_rendered(docs: &[serde_yaml::Value]) -> Vec<String> {
    let configmaps: BTreeMap<&str, &str> = of_kind(docs, "ConfigMap")
        .into_iter()
        .map(|c| (name_of(c), c["data"]["fivecore.toml"].as_str().unwrap()))
        .collect();
    let secrets: BTreeMap<&str, &str> = of_kind(docs, "Secret")
        .into_iter()
        .map(|s| (name_of(s), s["stringData"]["store.toml"].as_str().unwrap()))
        .collect();
    let mut nfs = Vec::new();
    for sts in of_kind(docs, "StatefulSet") {
        let spec = &sts["spec"]["template"]["spec"];
        let nf = spec["containers"][0]["args"][0].as_str().unwrap().to_owned();
        let volumes = spec["volumes"].as_sequence().unwrap();
        let cm = volumes.iter().find_map(|v| v["configMap"]["name"].as_str()).unwrap();
        let mut toml = configmaps[cm].to_owned();
        let init = spec["initContainers"][0]["args"][0].as_str().unwrap();
        if let Some(secret) = volumes.iter().find_map(|v| v["secret"]["secretName"].as_str()) {
            assert!(init.contains("/etc/fivecore/store/store.toml"), "{init}");
            toml.push('\n');
            toml.push_str(secrets[secret]);
        } else {
            assert!(!init.contains("store.toml"), "{init}");
        }
        assert!(
            init.contains(&format!(
                "fivecore {nf} --config /run/fivecore/fivecore.toml --check-config"
            )),
            "{init}"
        );
        let (ok, said) = check_config(&nf, &toml);
        assert!(ok, "the {nf}'s rendered configuration is refused: {said}\n{toml}");
        nfs.push(nf);
    }
    nfs
}

#[test]
fn the_helm_chart_lints_renders_and_its_configuration_is_what_fivecore_accepts() {
    let Some(helm) = tool("helm") else { return };
    let chart = repo().join("deploy/helm/fivecore");
    for values in [
        None,
        Some("ci/mysql-values.yaml"),
        Some("ci/bsf-only-values.yaml"),
        Some("ci/pcf-diameter-values.yaml"),
    ] {
        let mut cmd = Command::new(&helm);
        cmd.args(["lint", "--strict"]).arg(&chart);
        if let Some(v) = values {
            cmd.arg("-f").arg(chart.join(v));
        }
        let (ok, out, err) = run(&mut cmd);
        assert!(ok, "helm lint {values:?}: {out}{err}");
    }

    // Defaults: every NF a StatefulSet on its own PVC, probed on its health endpoints.
    let docs = helm_template(&helm, &[], &[]).unwrap();
    let nfs = check_rendered(&docs);
    assert_eq!(nfs, ["nrf", "udr", "bsf", "pcf", "dd"]);
    for sts in of_kind(&docs, "StatefulSet") {
        let c = &sts["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz/live");
        assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/healthz/ready");
        assert_eq!(c["ports"][0]["name"], "sbi");
        assert!(c["args"]
            .as_sequence()
            .unwrap()
            .iter()
            .any(|a| a.as_str().is_some_and(|a| a.starts_with("$(POD_IP):"))));
        assert_eq!(sts["spec"]["volumeClaimTemplates"][0]["metadata"]["name"], "data");
        assert_eq!(sts["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"], true);
    }
    assert!(of_kind(&docs, "Secret").is_empty() && of_kind(&docs, "ServiceMonitor").is_empty());
    let udr_cm =
        of_kind(&docs, "ConfigMap").into_iter().find(|c| name_of(c).ends_with("-udr")).unwrap();
    let udr_toml = udr_cm["data"]["fivecore.toml"].as_str().unwrap();
    assert!(
        udr_toml.contains("[udr.nrf]\napi_roots = [\"http://fivecore-nrf:7000\"]"),
        "{udr_toml}"
    );
    let bsf_svc =
        of_kind(&docs, "Service").into_iter().find(|s| name_of(s) == "fivecore-bsf").unwrap();
    let ports: Vec<i64> = bsf_svc["spec"]["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|p| p["port"].as_i64().unwrap())
        .collect();
    assert_eq!(ports, [7002, 3869]);

    // MySQL: every NF on the cluster (the Secret's [store]), two replicas each; no PVC but the
    // Data Director's, for its message log alone (its own size); a ServiceMonitor per NF
    // labelling its series.
    let docs = helm_template(&helm, &["ci/mysql-values.yaml"], &[]).unwrap();
    assert_eq!(check_rendered(&docs), ["nrf", "udr", "bsf", "pcf", "dd"]);
    for sts in of_kind(&docs, "StatefulSet") {
        let name = name_of(sts);
        assert_eq!(sts["spec"]["replicas"], 2, "{name}");
        let volumes = sts["spec"]["template"]["spec"]["volumes"].as_sequence().unwrap();
        assert!(volumes.iter().any(|v| v["name"] == "store-secret"), "{name}");
        let data_is_empty_dir =
            volumes.iter().any(|v| v["name"] == "data" && v["emptyDir"].is_mapping());
        if name == "fivecore-dd" {
            let claim = &sts["spec"]["volumeClaimTemplates"][0];
            assert_eq!(claim["metadata"]["name"], "data");
            assert_eq!(claim["spec"]["resources"]["requests"]["storage"], "10Gi");
            assert!(!data_is_empty_dir);
        } else {
            assert!(sts["spec"]["volumeClaimTemplates"].is_null(), "{name}");
            assert!(data_is_empty_dir, "{name}");
        }
    }
    // The Kafka mode's Data Director keeps nothing on disk.
    let docs =
        helm_template(&helm, &["ci/mysql-values.yaml"], &["dd.log.volume=emptyDir"]).unwrap();
    let dd =
        of_kind(&docs, "StatefulSet").into_iter().find(|s| name_of(s) == "fivecore-dd").unwrap();
    assert!(dd["spec"]["volumeClaimTemplates"].is_null());
    let docs = helm_template(&helm, &["ci/mysql-values.yaml"], &[]).unwrap();
    let secret = of_kind(&docs, "Secret")[0]["stringData"]["store.toml"].as_str().unwrap();
    assert!(
        secret.contains("backend = \"mysql\"") && secret.contains("galera-2.galera:3306"),
        "{secret}"
    );
    let monitors = of_kind(&docs, "ServiceMonitor");
    assert_eq!(monitors.len(), 5);
    for m in monitors {
        let relabel = &m["spec"]["endpoints"][0]["relabelings"][0];
        assert_eq!(relabel["targetLabel"], "nf");
        assert!(name_of(m).ends_with(relabel["replacement"].as_str().unwrap()));
    }

    // The BSF alone: no NRF to register with, its own tuning accepted.
    let docs = helm_template(&helm, &["ci/bsf-only-values.yaml"], &[]).unwrap();
    assert_eq!(check_rendered(&docs), ["bsf"]);
    let toml = of_kind(&docs, "ConfigMap")[0]["data"]["fivecore.toml"].as_str().unwrap();
    assert!(!toml.contains("[bsf.nrf]") && toml.contains("max_age_secs = 2592000"), "{toml}");
    assert_eq!(
        check_rendered(&helm_template(&helm, &["ci/pcf-diameter-values.yaml"], &[]).unwrap()).len(),
        5
    );

    // What must not pass: a second replica of any NF on SQLite (each would keep its own state),
    // several PCFs on MySQL not sharing the database, a log volume of no known kind, and a
    // setting fivecore does not know, which the NF's configuration check refuses.
    for nf in ["nrf", "udr", "bsf", "pcf", "dd"] {
        let err = helm_template(&helm, &[], &[&format!("{nf}.replicas=2")]).unwrap_err();
        assert!(err.contains(&format!("{nf}.replicas > 1 needs store.backend=mysql")), "{err}");
    }
    let err = helm_template(&helm, &["ci/mysql-values.yaml"], &["pcf.toml="]).unwrap_err();
    assert!(err.contains("shared_database"), "{err}");
    let err = helm_template(&helm, &[], &["dd.log.volume=hostPath"]).unwrap_err();
    assert!(err.contains("dd.log.volume"), "{err}");
    let err = helm_template(&helm, &[], &["store.backend=mysql"]).unwrap_err();
    assert!(err.contains("store.mysql.existingSecret"), "{err}");
    let docs =
        helm_template(&helm, &["ci/bsf-only-values.yaml"], &["bsf.toml=[bsf.notify]\nbogus = 1"])
            .unwrap();
    let toml = of_kind(&docs, "ConfigMap")[0]["data"]["fivecore.toml"].as_str().unwrap().to_owned();
    let (ok, said) = check_config("bsf", &toml);
    assert!(!ok && said.contains("bogus"), "{said}");
}

#[test]
fn the_container_configuration_is_valid_for_up() {
    let path = repo().join("deploy/container/fivecore.toml");
    let (ok, out, err) =
        run(fivecore().args(["up", "--config", path.to_str().unwrap(), "--check-config"]));
    assert!(ok, "{out}{err}");
    assert!(out.contains("configuration valid for the NRF, UDR, BSF, PCF, Data Director"), "{out}");
    let file = std::fs::read_to_string(repo().join("deploy/container/Containerfile")).unwrap();
    for must in [
        "USER 10001",
        "ENTRYPOINT [\"fivecore\"]",
        "EXPOSE 7000 7001 7002 7003 7004 3868 3869 3870",
        "deploy/container/fivecore.toml",
    ] {
        assert!(file.contains(must), "Containerfile lacks {must}");
    }
}
