//! NFs started as child processes: `<fivecore> <nf> --listen 127.0.0.1:<port> --data-dir <tmp>`,
//! optionally under `taskset -c LIST` and a CPU quota (a cgroup of its own); stopped with
//! SIGTERM, then SIGKILL.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

pub struct ChildNf {
    pub nf: String,
    pub url: String,
    pub child: Child,
    _data_dir: tempfile::TempDir,
    pub log_path: PathBuf,
    /// Removed after the child has been stopped (fields drop after `Drop::drop`).
    _quota: Option<CpuQuota>,
}

/// A cgroup limiting one NF to a share of a core (`--nf-cpu-quota`), so that twice its
/// capacity is within reach of a load generator on one core: the NF's capacity is measured
/// under the same quota. cgroup v2 (`cpu.max`) or v1 (`cpu.cfs_quota_us`); needs write access
/// to the cgroup tree (root, or a delegated subtree).
pub struct CpuQuota {
    dir: PathBuf,
}

impl CpuQuota {
    /// A short period (the kernel's default is 100 ms): at a quarter of a core, a 100 ms period
    /// froze the NF for 75 ms at a time, which its clients saw as latency spikes; 10 ms spreads
    /// the same share evenly.
    const PERIOD_US: u64 = 10_000;

    /// Creates the cgroup, sets `cores` (e.g. 0.5) and moves `pid` into it.
    pub fn apply(pid: u32, cores: f64) -> Result<Self> {
        if !cores.is_finite() || cores <= 0.0 {
            bail!("--nf-cpu-quota must be > 0 (cores)");
        }
        let quota = ((cores * Self::PERIOD_US as f64) as u64).max(1000);
        let name = format!("fivecore-bench-{pid}");
        let v2 = Path::new("/sys/fs/cgroup/cgroup.controllers");
        let (dir, file, value) = if v2.exists() {
            (
                Path::new("/sys/fs/cgroup").join(&name),
                "cpu.max",
                format!("{quota} {}", Self::PERIOD_US),
            )
        } else {
            (Path::new("/sys/fs/cgroup/cpu").join(&name), "cpu.cfs_quota_us", quota.to_string())
        };
        std::fs::create_dir(&dir).with_context(|| {
            format!(
                "creating cgroup {} (--nf-cpu-quota needs write access to the cgroup tree)",
                dir.display()
            )
        })?;
        let q = CpuQuota { dir };
        if file == "cpu.cfs_quota_us" {
            std::fs::write(q.dir.join("cpu.cfs_period_us"), Self::PERIOD_US.to_string())?;
        }
        std::fs::write(q.dir.join(file), value)
            .with_context(|| format!("setting {}/{file}", q.dir.display()))?;
        std::fs::write(q.dir.join("cgroup.procs"), pid.to_string())
            .with_context(|| format!("moving pid {pid} into {}", q.dir.display()))?;
        Ok(q)
    }
}

impl Drop for CpuQuota {
    fn drop(&mut self) {
        // The NF has exited: the cgroup is empty and can go.
        let _ = std::fs::remove_dir(&self.dir);
    }
}

impl ChildNf {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, up to 5 s to exit, then SIGKILL.
    pub fn stop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        // SAFETY: kill(2) on the pid of our own child, which has not been reaped yet.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ChildNf {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A port for an NF to listen on, free now and below the kernel's ephemeral range. A port the
/// kernel picks for bind(0) comes from that range, which outgoing connections also draw from: in
/// the time between picking it and the NF binding it (a preload can take seconds), one of the
/// kit's or another test's connections could take it ("Address already in use").
pub fn free_port() -> Result<u16> {
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|p| p.parse::<u16>().ok()))
        .unwrap_or(32768);
    const FIRST: u16 = 10_000;
    if low > FIRST + 1000 {
        // A random start, so concurrent runs do not all try the same ports first.
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
            ^ std::process::id().rotate_left(16);
        let span = u32::from(low - FIRST);
        for i in 0..span.min(2000) {
            let port = FIRST + ((seed.wrapping_add(i.wrapping_mul(7919))) % span) as u16;
            if let Ok(l) = TcpListener::bind(("127.0.0.1", port)) {
                return Ok(l.local_addr()?.port());
            }
        }
    }
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A fresh data directory for `nf`, removed when dropped. The NF's own bulk-load command
/// preloads state into it before [`spawn`] (crate::bulk_load).
pub fn data_dir(nf: &str) -> Result<tempfile::TempDir> {
    Ok(tempfile::Builder::new().prefix(&format!("fivecore-bench-{nf}-")).tempdir()?)
}

/// Writes the configuration file of `nf` (the whole file: `[<nf>]` and any shared sections)
/// to `<log_dir>/<nf>.toml`, for `--config` of the NF and of its bulk-load command.
pub fn write_config(
    log_dir: &Path,
    nf: &str,
    root: Option<&toml::Table>,
) -> Result<Option<PathBuf>> {
    let Some(root) = root else { return Ok(None) };
    let path = log_dir.join(format!("{nf}.toml"));
    std::fs::write(&path, toml::to_string(root)?)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(Some(path))
}

/// Starts `exe <nf> --listen .. --data-dir .. [--config FILE]`; its output goes to
/// `<log_dir>/<nf>.log`. It is started from the calling thread, whose CPU affinity it inherits
/// (so call it from an unpinned thread).
pub fn spawn(
    exe: &Path,
    nf: &str,
    (cpus, quota): (Option<&str>, Option<f64>),
    log_dir: &Path,
    config: Option<&Path>,
    data_dir: tempfile::TempDir,
) -> Result<ChildNf> {
    let port = free_port()?;
    let listen = ["--listen".to_string(), format!("127.0.0.1:{port}")];
    start(exe, nf, &listen, (cpus, quota), log_dir, config, data_dir, port)
}

/// Where `fivecore up --port-base B` serves each NF: B plus the NF's offset (NRF, UDR, BSF,
/// PCF, Data Director: the order of their default ports 7000-7004, docs/ARCHITECTURE.md).
pub fn up_port_offset(nf: &str) -> Result<u16> {
    Ok(match nf {
        "nrf" => 0,
        "udr" => 1,
        "bsf" => 2,
        "pcf" => 3,
        "dd" => 4,
        other => bail!("--up: `fivecore up` does not serve {other}"),
    })
}

/// Ports `up` may take after its base (its NFs' SBI ports and room for the ports it adds).
pub const UP_PORT_SPAN: u16 = 16;

/// A base port with [`UP_PORT_SPAN`] free ports from it, below the ephemeral range.
pub fn free_port_run() -> Result<u16> {
    for _ in 0..200 {
        let base = free_port()?;
        if base.checked_add(UP_PORT_SPAN).is_none() {
            continue;
        }
        if (1..UP_PORT_SPAN).all(|i| TcpListener::bind(("127.0.0.1", base + i)).is_ok()) {
            return Ok(base);
        }
    }
    bail!("no {UP_PORT_SPAN} consecutive free ports for `fivecore up`")
}

/// Starts `exe up --port-base .. --data-dir .. [--config FILE]`: every NF of the build in one
/// process, as an operator runs the core in a lab; its output goes to `<log_dir>/up.log`. Its
/// `url` is the NRF's; the others are at [`up_port_offset`] from it.
pub fn spawn_up(
    exe: &Path,
    cpus: Option<&str>,
    log_dir: &Path,
    config: Option<&Path>,
    data_dir: tempfile::TempDir,
    port_base: u16,
) -> Result<ChildNf> {
    let flags = ["--port-base".to_string(), port_base.to_string()];
    start(exe, "up", &flags, (cpus, None), log_dir, config, data_dir, port_base)
}

#[allow(clippy::too_many_arguments)]
fn start(
    exe: &Path,
    subcommand: &str,
    flags: &[String],
    (cpus, quota): (Option<&str>, Option<f64>),
    log_dir: &Path,
    config: Option<&Path>,
    data_dir: tempfile::TempDir,
    port: u16,
) -> Result<ChildNf> {
    let nf = subcommand;
    let log_path = log_dir.join(format!("{nf}.log"));
    let log = std::fs::File::create(&log_path)
        .with_context(|| format!("creating {}", log_path.display()))?;
    let mut cmd = match cpus {
        Some(list) => {
            let mut c = Command::new("taskset");
            c.arg("-c").arg(list).arg(exe);
            c
        }
        None => Command::new(exe),
    };
    cmd.arg(nf).args(flags).arg("--data-dir").arg(data_dir.path());
    if let Some(path) = config {
        cmd.arg("--config").arg(path);
    }
    cmd.stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
    let mut child = cmd.spawn().with_context(|| format!("starting {} {nf}", exe.display()))?;
    let quota = match quota.map(|q| CpuQuota::apply(child.id(), q)).transpose() {
        Ok(q) => q,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
    };
    Ok(ChildNf {
        nf: nf.to_string(),
        url: format!("http://127.0.0.1:{port}"),
        child,
        _data_dir: data_dir,
        log_path,
        _quota: quota,
    })
}

/// Waits until `GET <url>/healthz/ready` answers 200, or the child exits, or `timeout`.
pub async fn wait_ready(
    nf: &mut ChildNf,
    client: &sbi::client::SbiClient,
    timeout: Duration,
) -> Result<()> {
    let base = nf.url.clone();
    wait_ready_at(nf, &base, client, timeout).await
}

/// As [`wait_ready`], for one of the NFs a child serves at `base` (`fivecore up` serves several).
pub async fn wait_ready_at(
    nf: &mut ChildNf,
    base: &str,
    client: &sbi::client::SbiClient,
    timeout: Duration,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let url = format!("{base}/healthz/ready");
    loop {
        if let Some(status) = nf.child.try_wait()? {
            let log = std::fs::read_to_string(&nf.log_path).unwrap_or_default();
            let tail: String = log
                .lines()
                .rev()
                .take(5)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n");
            bail!(
                "`fivecore {}` exited before it was ready ({status}); its last output:\n{tail}",
                nf.nf
            );
        }
        if let Ok(r) = client.get(&url).max_rsp_time(Duration::from_millis(500)).send().await {
            if r.status().is_success() {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            bail!("`fivecore {}` not ready at {url} after {timeout:?}", nf.nf);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Pins the calling thread (and the threads and processes it creates later) to a CPU list like
/// `0-3,6`.
pub fn pin_self(list: &str) -> Result<()> {
    let cpus = parse_cpu_list(list)?;
    // SAFETY: cpu_set_t is plain data; CPU_SET writes within it for indices < CPU_SETSIZE,
    // which parse_cpu_list guarantees.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            bail!("sched_setaffinity({list}): {}", std::io::Error::last_os_error());
        }
    }
    Ok(())
}

pub fn parse_cpu_list(list: &str) -> Result<Vec<usize>> {
    let mut out = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<usize>()?, b.parse::<usize>()?),
            None => {
                let a = part.parse::<usize>()?;
                (a, a)
            }
        };
        if a > b || b >= 1024 {
            bail!("bad CPU range {part}");
        }
        out.extend(a..=b);
    }
    if out.is_empty() {
        bail!("empty CPU list");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-2,5").unwrap(), vec![0, 1, 2, 5]);
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("").is_err());
    }
}
