//! A real single-node Kafka broker (KRaft, broker and controller in one JVM) for the Data
//! Director's Kafka tests, started once per test binary by the first test that asks.
//!
//! The jars are Kafka 4.3.1 and its dependencies from Maven Central, listed in
//! `scripts/kafka/pom.xml` and copied by `scripts/kafka/fetch.sh` into
//! `target/kafka-4.3.1/libs` of the workspace (or `$FIVECORE_KAFKA_LIBS`); when they are absent
//! and Maven is installed, the first test fetches them. The storage is formatted with
//! `kafka.tools.StorageTool` against a static controller quorum (one voter, no `--standalone`),
//! then the broker listens on 127.0.0.1 on two ports the system chose (client and controller).
//!
//! A shell started with it holds the JVM's PID and a pipe from this process: when the test
//! binary exits, however it exits, the pipe closes and the shell stops the broker by that PID
//! (SIGTERM, then SIGKILL after 20 s) and removes its directory.
//!
//! Without Java or the jars the tests are skipped, with a line saying why, unless
//! `FIVECORE_REQUIRE_KAFKA=1` (./test.sh fetches the jars and sets it), where they fail.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The Kafka version of `scripts/kafka/pom.xml`.
pub const VERSION: &str = "4.3.1";

/// Any fixed id will do (16 bytes in URL-safe base64, "fivecore-dd-kafk"): every broker formats
/// its own temporary directory.
const CLUSTER_ID: &str = "Zml2ZWNvcmUtZGQta2Fmaw";

pub struct Broker {
    /// `127.0.0.1:port`, for `bootstrap.servers`.
    pub bootstrap: String,
    /// The broker JVM's PID (for its CPU time).
    pub pid: u32,
    log: PathBuf,
    // Held until the process exits: its end is what stops the broker.
    _supervisor: Mutex<(Child, ChildStdin)>,
}

static BROKER: OnceLock<Option<Broker>> = OnceLock::new();

/// The shared broker, started by the first caller (blocking, a few seconds); `None` when Java
/// or the jars cannot be had (the test is then skipped; it fails instead under
/// `FIVECORE_REQUIRE_KAFKA=1`).
pub fn broker() -> Option<&'static Broker> {
    BROKER
        .get_or_init(|| match prerequisites() {
            Ok((java, libs)) => Some(start(&java, &libs)),
            Err(why) => {
                assert!(
                    std::env::var("FIVECORE_REQUIRE_KAFKA").as_deref() != Ok("1"),
                    "FIVECORE_REQUIRE_KAFKA=1 but {why}"
                );
                eprintln!("skipped: {why}");
                None
            }
        })
        .as_ref()
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Where the broker's jars are (or go).
pub fn libs_dir() -> PathBuf {
    match std::env::var_os("FIVECORE_KAFKA_LIBS") {
        Some(d) => PathBuf::from(d),
        None => workspace().join(format!("target/kafka-{VERSION}/libs")),
    }
}

fn on_path(cmd: &str) -> Option<PathBuf> {
    std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .map(|d| Path::new(d).join(cmd))
        .find(|p| p.is_file())
}

fn prerequisites() -> Result<(PathBuf, PathBuf), String> {
    let java = std::env::var_os("JAVA_HOME")
        .map(|h| PathBuf::from(h).join("bin/java"))
        .filter(|p| p.is_file())
        .or_else(|| on_path("java"))
        .ok_or("no Java (java on PATH or JAVA_HOME) to run the Kafka broker")?;
    let libs = libs_dir();
    if !libs.join(".complete").is_file() {
        if on_path("mvn").is_none() {
            return Err(format!(
                "the Kafka {VERSION} jars are not in {} and Maven (mvn) is not installed to fetch \
                 them (scripts/kafka/fetch.sh)",
                libs.display()
            ));
        }
        eprintln!("fetching the Kafka {VERSION} jars into {} (Maven)", libs.display());
        let out = Command::new("bash")
            .arg(workspace().join("scripts/kafka/fetch.sh"))
            .arg(&libs)
            .output()
            .map_err(|e| format!("scripts/kafka/fetch.sh: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "scripts/kafka/fetch.sh failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    Ok((java, libs))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn properties(dir: &Path, port: u16, controller: u16) -> String {
    format!(
        "process.roles=broker,controller\n\
         node.id=1\n\
         controller.quorum.voters=1@127.0.0.1:{controller}\n\
         listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}\n\
         advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n\
         controller.listener.names=CONTROLLER\n\
         inter.broker.listener.name=PLAINTEXT\n\
         listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n\
         log.dirs={data}\n\
         num.partitions=1\n\
         auto.create.topics.enable=false\n\
         offsets.topic.replication.factor=1\n\
         offsets.topic.num.partitions=4\n\
         transaction.state.log.replication.factor=1\n\
         transaction.state.log.min.isr=1\n\
         share.coordinator.state.topic.replication.factor=1\n\
         share.coordinator.state.topic.min.isr=1\n\
         group.initial.rebalance.delay.ms=0\n",
        data = dir.join("data").display(),
    )
}

const LOG4J2: &str = "rootLogger.level = INFO\n\
    rootLogger.appenderRef.file.ref = FILE\n\
    appender.file.type = File\n\
    appender.file.name = FILE\n\
    appender.file.fileName = ${sys:kafka.logs.dir}/server.log\n\
    appender.file.layout.type = PatternLayout\n\
    appender.file.layout.pattern = [%d] %p %m (%c)%n\n";

fn start(java: &Path, libs: &Path) -> Broker {
    let dir = tempfile::Builder::new().prefix("fivecore-kafka").tempdir().unwrap().keep();
    std::fs::write(dir.join("log4j2.properties"), LOG4J2).unwrap();
    let classpath = format!("{}/*", libs.display());
    let jvm = |main: &str| {
        let mut c = Command::new(java);
        c.arg("-Xms512m")
            .arg("-Xmx1g")
            .arg("-XX:+UseG1GC")
            .arg("-XX:MaxGCPauseMillis=20")
            .arg("-Djava.awt.headless=true")
            .arg(format!("-Dkafka.logs.dir={}", dir.display()))
            .arg(format!("-Dlog4j2.configurationFile={}", dir.join("log4j2.properties").display()))
            .arg("-cp")
            .arg(&classpath)
            .arg(main);
        c
    };
    let conf = dir.join("server.properties");
    let log = dir.join("server.log");
    let stdout = dir.join("stdout.log");
    // The ports are chosen by the system for a moment's listener, then given to the broker (the
    // controller's must be in the quorum's configuration before it starts); another process
    // taking one in between makes the broker exit, and the next pair is tried.
    for _ in 0..5 {
        let (port, controller) = (free_port(), free_port());
        let _ = std::fs::remove_dir_all(dir.join("data"));
        std::fs::write(&conf, properties(&dir, port, controller)).unwrap();
        let format = jvm("kafka.tools.StorageTool")
            .args(["format", "--cluster-id", CLUSTER_ID, "--config"])
            .arg(&conf)
            .output()
            .unwrap();
        assert!(
            format.status.success(),
            "kafka-storage format: {}{}",
            String::from_utf8_lossy(&format.stdout),
            String::from_utf8_lossy(&format.stderr)
        );
        let mut cmd = jvm("kafka.Kafka");
        cmd.arg(&conf);
        let script = format!(
            "{cmd} >'{out}' 2>&1 </dev/null &\n\
             pid=$!\necho $pid\nread _\nkill $pid 2>/dev/null\n\
             i=0; while kill -0 $pid 2>/dev/null && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done\n\
             kill -9 $pid 2>/dev/null\nwait $pid\nrm -rf '{dir}'\n",
            cmd = shell_words(&cmd),
            out = stdout.display(),
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
        let deadline = Instant::now() + Duration::from_secs(90);
        while Instant::now() < deadline {
            let started = std::fs::read_to_string(&log).unwrap_or_default();
            if started.contains("Kafka Server started") {
                return Broker {
                    bootstrap: format!("127.0.0.1:{port}"),
                    pid,
                    log,
                    _supervisor: Mutex::new((child, stdin)),
                };
            }
            if !Path::new(&format!("/proc/{pid}")).exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        drop(stdin);
        let _ = child.wait();
    }
    panic!(
        "the Kafka broker did not start; its output: {}\nits log: {}",
        std::fs::read_to_string(&stdout).unwrap_or_default(),
        tail(&std::fs::read_to_string(&log).unwrap_or_default(), 40)
    );
}

/// The command line of `cmd` for `sh -c`, each word single-quoted.
fn shell_words(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|w| format!("'{}'", w.to_string_lossy().replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

impl Broker {
    /// The last `n` lines of the broker's log, for a failing assertion.
    pub fn tail(&self, n: usize) -> String {
        tail(&std::fs::read_to_string(&self.log).unwrap_or_default(), n)
    }

    /// CPU time the broker's JVM has used so far (user + system), in seconds.
    pub fn cpu_seconds(&self) -> f64 {
        cpu_seconds(self.pid)
    }
}

/// CPU time process `pid` has used so far (user + system, all its threads), in seconds.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start after its ')'.
    let fields: Vec<&str> =
        stat.rsplit_once(')').map(|(_, r)| r.split_whitespace().collect()).unwrap_or_default();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    // utime and stime are fields 14 and 15 of proc_pid_stat(5); the state, field 3, is first.
    (ticks(11) + ticks(12)) as f64 / clock_ticks() as f64
}

fn clock_ticks() -> u64 {
    static TICKS: OnceLock<u64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .unwrap_or(100)
    })
}
