//! A real single-node Kafka broker (KRaft, broker and controller in one JVM) on 127.0.0.1, for
//! the Data Director's Kafka tests (crates/testkit/src/kafka.rs) and for `fivecore bench`'s
//! Kafka scenarios (crates/bench/src/dd/kafka.rs).
//!
//! The jars are Kafka 4.3.1 and its dependencies from Maven Central, listed in
//! `scripts/kafka/pom.xml` and copied by `scripts/kafka/fetch.sh` into
//! `target/kafka-4.3.1/libs` of the workspace; an installed Kafka's `libs` directory serves as
//! well. The storage is formatted with `kafka.tools.StorageTool` against a static controller
//! quorum (one voter, no `--standalone`), then the broker listens on 127.0.0.1 on a client port
//! (given, or chosen by the system) and a controller port (chosen by the system).
//!
//! A shell started with it holds the JVM's PID and a pipe from this process: when the pipe
//! closes ([`Broker::stop`], the broker dropped, or this process exiting however it exits) the
//! shell stops the broker by that PID (SIGTERM, then SIGKILL after 20 s) and removes the
//! broker's directory.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The Kafka version of `scripts/kafka/pom.xml`.
pub const VERSION: &str = "4.3.1";

/// Any fixed id will do (16 bytes in URL-safe base64, "fivecore-dd-kafk"): every broker formats
/// its own directory.
const CLUSTER_ID: &str = "Zml2ZWNvcmUtZGQta2Fmaw";

/// `target/kafka-<VERSION>/libs` under `workspace`: where `scripts/kafka/fetch.sh` puts the jars.
pub fn fetched_libs(workspace: &Path) -> PathBuf {
    workspace.join(format!("target/kafka-{VERSION}/libs"))
}

/// Whether `libs` holds a broker's jars: a complete fetch (`.complete`, written last by
/// `scripts/kafka/fetch.sh`) or an installed Kafka's `libs` (its server jar).
pub fn libs_ready(libs: &Path) -> bool {
    if libs.join(".complete").is_file() {
        return true;
    }
    std::fs::read_dir(libs).is_ok_and(|d| {
        d.filter_map(|e| e.ok()).any(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.starts_with("kafka_2.") && n.ends_with(".jar") && !n.contains("-test")
                || n.starts_with("kafka-server-") && n.ends_with(".jar")
        })
    })
}

/// `cmd` on `PATH`.
pub fn on_path(cmd: &str) -> Option<PathBuf> {
    std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .map(|d| Path::new(d).join(cmd))
        .find(|p| p.is_file())
}

/// The `java` of `JAVA_HOME`, else the one on `PATH`.
pub fn java() -> Result<PathBuf, String> {
    std::env::var_os("JAVA_HOME")
        .map(|h| PathBuf::from(h).join("bin/java"))
        .filter(|p| p.is_file())
        .or_else(|| on_path("java"))
        .ok_or_else(|| "no Java (java on PATH or JAVA_HOME) to run the Kafka broker".into())
}

/// How to start a broker.
#[derive(Debug, Clone)]
pub struct Options {
    pub java: PathBuf,
    /// The jars (`<dir>/*` is the classpath).
    pub libs: PathBuf,
    /// The broker's directory (configuration, data, logs) is made in here, and removed when the
    /// broker stops.
    pub parent: PathBuf,
    /// The client port; `None`: one the system chooses.
    pub port: Option<u16>,
    /// JVM heap, MiB (`-Xms` half of it).
    pub heap_mib: u32,
}

impl Options {
    pub fn new(java: PathBuf, libs: PathBuf, parent: PathBuf) -> Options {
        Options { java, libs, parent, port: None, heap_mib: 1024 }
    }
}

pub struct Broker {
    /// `127.0.0.1:port`, for `bootstrap.servers`.
    pub bootstrap: String,
    /// The broker JVM's PID (for its CPU time and RSS).
    pub pid: u32,
    /// The broker's directory (removed when it stops).
    pub dir: PathBuf,
    log: PathBuf,
    // Its end (stdin closed) is what stops the broker.
    supervisor: Mutex<Option<(Child, ChildStdin)>>,
}

fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port on 127.0.0.1: {e}"))
}

/// The broker's configuration. Segments of 128 MiB checked for retention every 10 s (not 1 GiB
/// every 5 minutes): a benchmark's topics at 100 MB/s and more keep about their retention on
/// disk, not minutes more.
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
         group.initial.rebalance.delay.ms=0\n\
         log.segment.bytes=134217728\n\
         log.retention.check.interval.ms=10000\n",
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

/// Starts a broker (blocking, a few seconds) and waits until it says it started.
pub fn start(o: &Options) -> Result<Broker, String> {
    let dir = unique_dir(&o.parent)?;
    let r = start_in(o, &dir);
    if r.is_err() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    r
}

fn unique_dir(parent: &Path) -> Result<PathBuf, String> {
    std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    for i in 0..1000u32 {
        let d = parent.join(format!("fivecore-kafka-{}-{i}", std::process::id()));
        match std::fs::create_dir(&d) {
            Ok(()) => return Ok(d),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("{}: {e}", d.display())),
        }
    }
    Err(format!("no free directory name in {}", parent.display()))
}

fn start_in(o: &Options, dir: &Path) -> Result<Broker, String> {
    let io = |what: &str, e: std::io::Error| format!("{what}: {e}");
    std::fs::write(dir.join("log4j2.properties"), LOG4J2)
        .map_err(|e| io("log4j2.properties", e))?;
    let classpath = format!("{}/*", o.libs.display());
    let jvm = |main: &str| {
        let mut c = Command::new(&o.java);
        c.arg(format!("-Xms{}m", o.heap_mib / 2))
            .arg(format!("-Xmx{}m", o.heap_mib))
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
    // The system-chosen ports are taken from a moment's listener, then given to the broker (the
    // controller's must be in the quorum's configuration before it starts); another process
    // taking one in between makes the broker exit, and the next ports are tried. A given client
    // port is tried once: it failing is the answer.
    let attempts = if o.port.is_some() { 1 } else { 5 };
    let mut last = String::new();
    for _ in 0..attempts {
        let port = match o.port {
            Some(p) => p,
            None => free_port()?,
        };
        let controller = free_port()?;
        let _ = std::fs::remove_dir_all(dir.join("data"));
        std::fs::write(&conf, properties(dir, port, controller))
            .map_err(|e| io("server.properties", e))?;
        let format = jvm("kafka.tools.StorageTool")
            .args(["format", "--cluster-id", CLUSTER_ID, "--config"])
            .arg(&conf)
            .output()
            .map_err(|e| io(&format!("{}", o.java.display()), e))?;
        if !format.status.success() {
            return Err(format!(
                "kafka-storage format: {}{}",
                String::from_utf8_lossy(&format.stdout),
                String::from_utf8_lossy(&format.stderr)
            ));
        }
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
            .map_err(|e| io("sh", e))?;
        let stdin = child.stdin.take().expect("piped");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped"))
            .read_line(&mut line)
            .map_err(|e| io("the broker's supervisor", e))?;
        let pid: u32 =
            line.trim().parse().map_err(|_| format!("the broker's supervisor said {line:?}"))?;
        let deadline = Instant::now() + Duration::from_secs(90);
        while Instant::now() < deadline {
            let started = std::fs::read_to_string(&log).unwrap_or_default();
            if started.contains("Kafka Server started") {
                return Ok(Broker {
                    bootstrap: format!("127.0.0.1:{port}"),
                    pid,
                    dir: dir.to_path_buf(),
                    log,
                    supervisor: Mutex::new(Some((child, stdin))),
                });
            }
            if !Path::new(&format!("/proc/{pid}")).exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // The supervisor stops the JVM and removes the directory: keep what tells why first.
        let out = std::fs::read_to_string(&stdout).unwrap_or_default();
        let logged = tail(&std::fs::read_to_string(&log).unwrap_or_default(), 40);
        drop(stdin);
        let _ = child.wait();
        last = format!("the Kafka broker did not start; its output: {out}\nits log: {logged}");
        std::fs::create_dir_all(dir).map_err(|e| io(&dir.display().to_string(), e))?;
        std::fs::write(dir.join("log4j2.properties"), LOG4J2)
            .map_err(|e| io("log4j2.properties", e))?;
    }
    Err(last)
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

    /// Stops the broker by its PID and removes its directory; returns once both are done.
    pub fn stop(&self) {
        let taken = self.supervisor.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some((mut child, stdin)) = taken {
            drop(stdin);
            let _ = child.wait();
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.stop();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jars_are_recognised_by_a_complete_fetch_or_a_server_jar() {
        let d = std::env::temp_dir().join(format!("fivecore-kafka-libs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        assert!(!libs_ready(&d));
        std::fs::write(d.join("kafka-clients-4.3.1.jar"), b"").unwrap();
        assert!(!libs_ready(&d), "a client jar is no broker");
        std::fs::write(d.join("kafka_2.13-4.3.1.jar"), b"").unwrap();
        assert!(libs_ready(&d));
        std::fs::remove_file(d.join("kafka_2.13-4.3.1.jar")).unwrap();
        std::fs::write(d.join(".complete"), b"").unwrap();
        assert!(libs_ready(&d));
        assert!(!libs_ready(&d.join("absent")));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn the_configuration_names_both_ports_and_the_data_directory() {
        let p = properties(Path::new("/x"), 9092, 9093);
        assert!(p.contains("listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"));
        assert!(p.contains("controller.quorum.voters=1@127.0.0.1:9093"));
        assert!(p.contains("log.dirs=/x/data\n"));
    }

    #[test]
    fn cpu_seconds_of_this_process_grow_and_of_no_process_are_zero() {
        let me = std::process::id();
        let t0 = cpu_seconds(me);
        let mut x = 0u64;
        let until = Instant::now() + Duration::from_millis(100);
        while Instant::now() < until {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        assert!(x != 1);
        assert!(cpu_seconds(me) > t0);
        assert_eq!(cpu_seconds(u32::MAX), 0.0);
    }
}
