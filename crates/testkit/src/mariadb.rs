//! Real MariaDB servers for the MySQL-protocol store tests, from Debian's `mariadb-server` and
//! `galera-4`: one server ([`server`]) and a three-node Galera cluster ([`cluster`]), each
//! started once per test binary by the first test that asks and shared by its tests (each test
//! makes its own database with [`Server::database`] / [`Cluster::database`]).
//!
//! Everything listens on 127.0.0.1 only, on ports the system chose, with data in a temporary
//! directory. As for the Kafka broker, a shell started with each `mariadbd` holds its PID and a
//! pipe from this process: when the test binary exits, however it exits, the pipe closes and
//! the shell stops the server by that PID (SIGTERM, then SIGKILL after 20 s) and removes its
//! data. The tests connect as `root` without a password over TCP (the data directory is made
//! with `--auth-root-authentication-method=normal`).
//!
//! Without `mariadbd` the tests are skipped, with a line saying why, unless
//! `FIVECORE_REQUIRE_MARIADB=1` (./test.sh installs the packages and sets it), where they fail.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

const MARIADBD: &str = "/usr/sbin/mariadbd";
const GALERA: &str = "/usr/lib/galera/libgalera_smm.so";

/// One running `mariadbd`.
pub struct Server {
    /// Its client port on 127.0.0.1.
    pub port: u16,
    /// Its PID (for SIGKILL in failover tests, and its CPU time).
    pub pid: u32,
    log: PathBuf,
    // Held until the process exits: its end is what stops the server.
    _supervisor: Mutex<(Child, ChildStdin)>,
}

/// A three-node Galera cluster on loopback.
pub struct Cluster {
    pub nodes: Vec<Server>,
}

static SERVER: OnceLock<Option<Server>> = OnceLock::new();
static CLUSTER: OnceLock<Option<Cluster>> = OnceLock::new();
static DATABASES: AtomicU64 = AtomicU64::new(0);

/// The shared single server, started by the first caller (blocking, about 3 s); `None` when
/// MariaDB is not installed (the test is then skipped; it fails instead under
/// `FIVECORE_REQUIRE_MARIADB=1`).
pub fn server() -> Option<&'static Server> {
    SERVER
        .get_or_init(|| {
            available().then(|| {
                let dir = temp_dir();
                let base = free_base(1);
                let data = dir.join("n1");
                install_db(&dir, &data);
                let s = start(&dir, &data, base, &[]);
                wait_until(&s, "SELECT 1", "1");
                s
            })
        })
        .as_ref()
}

/// The shared Galera cluster, started by the first caller (blocking, about 10-15 s: the
/// second and third nodes copy the first one's data by `rsync` state transfer); `None` as for
/// [`server`].
pub fn cluster() -> Option<&'static Cluster> {
    CLUSTER
        .get_or_init(|| {
            if !available() {
                return None;
            }
            assert!(
                Path::new(GALERA).is_file(),
                "mariadbd is installed but not Galera ({GALERA}): install Debian's galera-4"
            );
            let dir = temp_dir();
            let base = free_base(3);
            let gcomm = (0..3)
                .map(|i| format!("127.0.0.1:{}", base + 10 * i))
                .collect::<Vec<_>>()
                .join(",");
            let node = |i: u16, first: bool| {
                let data = dir.join(format!("n{}", i + 1));
                if first {
                    install_db(&dir, &data);
                } else {
                    std::fs::create_dir(&data).unwrap();
                    // As root, the rsync daemon that receives the state transfer runs as
                    // nobody: the joiner's data directory must be its.
                    if is_root() {
                        chown_nobody(&data);
                    }
                }
                let b = base + 10 * i;
                let mut args = vec![
                    "--wsrep-on=ON".to_owned(),
                    format!("--wsrep-provider={GALERA}"),
                    format!("--wsrep-cluster-address=gcomm://{gcomm}"),
                    format!("--wsrep-node-address=127.0.0.1:{b}"),
                    format!("--wsrep-node-name=n{}", i + 1),
                    "--wsrep-cluster-name=fivecore-test".to_owned(),
                    format!("--wsrep-sst-receive-address=127.0.0.1:{}", b + 2),
                    "--wsrep-sst-method=rsync".to_owned(),
                    // A killed node is evicted within about 2 s (the defaults take 15 s),
                    // during which the others hold commits.
                    format!(
                        "--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:{b};\
                         ist.recv_addr=127.0.0.1:{};gcache.size=16M;evs.keepalive_period=PT0.2S;\
                         evs.suspect_timeout=PT1S;evs.inactive_check_period=PT0.3S;\
                         evs.inactive_timeout=PT2S;evs.install_timeout=PT2S",
                        b + 1
                    ),
                    "--binlog-format=ROW".to_owned(),
                    "--innodb-autoinc-lock-mode=2".to_owned(),
                ];
                if first {
                    args.push("--wsrep-new-cluster".to_owned());
                }
                start(&dir, &data, b + 3, &args)
            };
            let first = node(0, true);
            wait_until(&first, "SHOW STATUS LIKE 'wsrep_ready'", "ON");
            let mut nodes = vec![first];
            for i in 1..3 {
                let n = node(i, false);
                wait_until(&n, "SHOW STATUS LIKE 'wsrep_local_state_comment'", "Synced");
                nodes.push(n);
            }
            Some(Cluster { nodes })
        })
        .as_ref()
}

fn available() -> bool {
    if Path::new(MARIADBD).is_file() {
        return true;
    }
    let why = format!("MariaDB is not installed ({MARIADBD}: Debian's mariadb-server)");
    assert!(
        std::env::var("FIVECORE_REQUIRE_MARIADB").as_deref() != Ok("1"),
        "FIVECORE_REQUIRE_MARIADB=1 but {why}"
    );
    eprintln!("skipped: {why}");
    false
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| o.stdout.trim_ascii() == b"0").unwrap_or(false)
}

fn chown_nobody(path: &Path) {
    let ok = Command::new("chown").arg("nobody:nogroup").arg(path).status().unwrap().success();
    assert!(ok, "chown nobody {}", path.display());
}

/// A temporary directory others (the state transfer's `nobody`) may enter.
fn temp_dir() -> PathBuf {
    let dir = tempfile::Builder::new().prefix("fivecore-mariadb").tempdir().unwrap().keep();
    let ok = Command::new("chmod").arg("0755").arg(&dir).status().unwrap().success();
    assert!(ok, "chmod {}", dir.display());
    dir
}

/// A base port whose `10 * nodes` following ports are all free on 127.0.0.1 now: node `i`
/// uses `base + 10 i` (Galera), `+ 1` (incremental state transfer), `+ 2` (rsync state
/// transfer) and `+ 3` (clients). Another process may take one before the server binds it: the
/// start then fails, as for the Kafka broker's ports.
fn free_base(nodes: u16) -> u16 {
    for _ in 0..50 {
        let p = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let base = p - p % 10;
        if base < 1024 || u32::from(base) + 10 * u32::from(nodes) > 65535 {
            continue;
        }
        let all_free =
            (0..10 * nodes).all(|k| std::net::TcpListener::bind(("127.0.0.1", base + k)).is_ok());
        if all_free {
            return base;
        }
    }
    panic!("no free range of {} ports on 127.0.0.1", 10 * nodes);
}

fn user_args() -> Vec<String> {
    // mariadbd refuses to run as root unless told to.
    if is_root() {
        vec!["--user=root".to_owned()]
    } else {
        Vec::new()
    }
}

fn install_db(dir: &Path, data: &Path) {
    let out = Command::new("mariadb-install-db")
        .arg("--no-defaults")
        .arg(format!("--datadir={}", data.display()))
        .args(user_args())
        .args(["--auth-root-authentication-method=normal", "--skip-test-db"])
        .arg("--innodb-log-file-size=4M")
        .current_dir(dir)
        .output()
        .expect("mariadb-install-db runs");
    assert!(
        out.status.success(),
        "mariadb-install-db: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn start(dir: &Path, data: &Path, port: u16, extra: &[String]) -> Server {
    let name = data.file_name().unwrap().to_string_lossy().into_owned();
    let log = dir.join(format!("{name}.err"));
    let mut cmd = Command::new(MARIADBD);
    cmd.arg("--no-defaults")
        .args(user_args())
        .arg(format!("--datadir={}", data.display()))
        .arg(format!("--socket={}", dir.join(format!("{name}.sock")).display()))
        .arg(format!("--pid-file={}", dir.join(format!("{name}.pid")).display()))
        .arg(format!("--log-error={}", log.display()))
        .arg(format!("--port={port}"))
        .args(["--bind-address=127.0.0.1", "--skip-name-resolve"])
        // Small and quick: the tests' data is tiny.
        .args(["--innodb-log-file-size=4M", "--innodb-buffer-pool-size=32M"])
        .args(["--performance-schema=OFF", "--max-connections=500"])
        .args(extra);
    let script = format!(
        "{cmd} >'{out}' 2>&1 </dev/null &\n\
         pid=$!\necho $pid\nread _\nkill $pid 2>/dev/null\n\
         i=0; while kill -0 $pid 2>/dev/null && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done\n\
         kill -9 $pid 2>/dev/null\nwait $pid\nrm -rf '{data}' '{dir}/{name}'.*\nrmdir '{dir}' 2>/dev/null\n",
        cmd = shell_words(&cmd),
        out = dir.join(format!("{name}.out")).display(),
        data = data.display(),
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
    Server { port, pid, log, _supervisor: Mutex::new((child, stdin)) }
}

/// Waits (up to 60 s) until `query` on `s` prints a line ending in `want`.
fn wait_until(s: &Server, query: &str, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if let Ok(out) = s.client(query) {
            if out.lines().any(|l| l.trim_end().ends_with(want)) {
                return;
            }
        }
        assert!(
            Path::new(&format!("/proc/{}", s.pid)).exists(),
            "mariadbd exited; its log:\n{}",
            s.tail(40)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("mariadbd not ready ({query} -> {want}); its log:\n{}", s.tail(40));
}

impl Server {
    /// Runs SQL with the `mariadb` client; its output (tab-separated, no headers).
    pub fn client(&self, sql: &str) -> Result<String, String> {
        let out = Command::new("mariadb")
            .args(["--no-defaults", "-uroot", "-h127.0.0.1", "-N", "-B"])
            .arg(format!("-P{}", self.port))
            .arg("-e")
            .arg(sql)
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// Makes a new database and returns its URL (`prefix` helps reading the server's logs).
    pub fn database(&self, prefix: &str) -> String {
        let name = new_name(prefix);
        self.client(&format!("CREATE DATABASE `{name}`")).expect("CREATE DATABASE");
        self.url(&name)
    }

    /// The URL of database `name` on this server.
    pub fn url(&self, name: &str) -> String {
        format!("mysql://root@127.0.0.1:{}/{name}", self.port)
    }

    /// Kills the server at once (SIGKILL by its PID), as a crash would.
    pub fn kill(&self) {
        let ok = Command::new("kill").args(["-9", &self.pid.to_string()]).status().unwrap();
        assert!(ok.success(), "kill -9 {}", self.pid);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Path::new(&format!("/proc/{}/stat", self.pid)).exists()
            && !std::fs::read_to_string(format!("/proc/{}/stat", self.pid))
                .unwrap_or_default()
                .contains(") Z")
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The last `n` lines of the server's error log, for a failing assertion.
    pub fn tail(&self, n: usize) -> String {
        let s = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

impl Cluster {
    /// Makes a new database (replicated to every node) and returns its URL on each node.
    pub fn database(&self, prefix: &str) -> Vec<String> {
        let name = new_name(prefix);
        self.nodes[0].client(&format!("CREATE DATABASE `{name}`")).expect("CREATE DATABASE");
        self.nodes.iter().map(|n| n.url(&name)).collect()
    }
}

/// A database name unique to this process and call.
fn new_name(prefix: &str) -> String {
    let n = DATABASES.fetch_add(1, Ordering::Relaxed);
    let clean: String =
        prefix.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).take(40).collect();
    format!("{clean}_{}_{n}", std::process::id())
}

/// The command line of `cmd` for `sh -c`, each word single-quoted.
fn shell_words(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|w| format!("'{}'", w.to_string_lossy().replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ")
}
