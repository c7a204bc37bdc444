//! `fivecore bench`: replays the reference call models against fivecore and reports side by side
//! with the reference's published figures. See docs/bench.md.

pub mod bindings;
pub mod bulk_load;
pub mod dd;
pub mod engine;
pub mod gx;
pub mod h2client;
pub mod host;
pub mod live;
pub mod nf_latency;
pub mod nfproc;
pub mod overload;
pub mod pace;
pub mod profile;
pub mod profile_count;
pub mod replay;
pub mod report;
pub mod rx;
pub mod scenario;
pub mod sched;
pub mod security;
pub mod sh;
pub mod sim;
mod sim_amf;
mod sim_h2;
pub mod sim_ldap;
mod sim_node;
pub mod sim_ocs;
pub mod sim_tdf;
pub mod soak;
pub mod stats;
pub mod template;
pub mod udr;
#[cfg(test)]
mod xml_check;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::report::TargetReport;
use crate::scenario::Scenario;

/// Flags of `fivecore bench`: a scenario run, or one of the kit's tools.
#[derive(Args, Debug, Clone, Default)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub command: Option<BenchCommand>,
    /// Scenario name (see --list) or path to a scenario .toml file.
    pub scenario: Option<String>,
    /// List the scenarios, one line each.
    #[arg(long)]
    pub list: bool,
    /// Offered rate, requests/s (default: the scenario's reference rate).
    #[arg(long, conflicts_with = "scale")]
    pub rate: Option<f64>,
    /// Offered rate as a fraction of the scenario's reference rate.
    #[arg(long)]
    pub scale: Option<f64>,
    /// Measured seconds (after the warm-up).
    #[arg(long, value_name = "S")]
    pub duration: Option<f64>,
    /// Warm-up seconds (load sent, not measured).
    #[arg(long, value_name = "S")]
    pub warmup: Option<f64>,
    /// Use a running NF instead of starting one: NF=URL (repeatable), e.g. nrf=http://10.0.0.5:8000;
    /// its Diameter port as NF-diameter=HOST:PORT, e.g. bsf-diameter=10.0.0.5:3869.
    #[arg(long, value_name = "NF=URL")]
    pub target: Vec<String>,
    /// Preloaded PCF bindings (default: the scenario's reference count times its scale).
    #[arg(long, value_name = "N")]
    pub bindings: Option<u64>,
    /// Preloaded UDR subscribers: SLF entries, EIR equipment or policy data UEs (default: the
    /// reference's count times the scenario's scale); in a scenario with an LDAP directory
    /// (simulator kind `ldap`) and no UDR preload, the subscribers the directory holds and the
    /// requests draw from (default: `[generators] supi_count`).
    #[arg(long, value_name = "N")]
    pub subscribers: Option<u64>,
    /// Replace every procedure's p99 bound (smoke runs of a debug build on a shared machine,
    /// where scheduling noise decides p99; the report says so).
    #[arg(long, value_name = "MS")]
    pub max_p99_ms: Option<f64>,
    /// Pin the NFs the kit starts to these CPUs (taskset list, e.g. 0-1); `NF=LIST` pins that
    /// NF alone, and the flag repeats (`--nf-cpus pcf=1 --nf-cpus 0`: the PCF on CPU 1, the
    /// other NFs on CPU 0), so an NF can be measured on a core of its own.
    #[arg(long, value_name = "[NF=]LIST")]
    pub nf_cpus: Vec<String>,
    /// Limit each NF the kit starts to this many cores (a cgroup CPU quota, e.g. 0.5), so that
    /// twice its capacity is within the generator's reach; measure the capacity with the same
    /// quota. Needs write access to the cgroup tree.
    #[arg(long, value_name = "CORES")]
    pub nf_cpu_quota: Option<f64>,
    /// Run the scenario's NFs in one `fivecore up` process on one data directory (the lab
    /// shape; a soak of the whole core) instead of one process each. --nf-cpus then takes a
    /// plain CPU list (the process's).
    #[arg(long, conflicts_with = "nf_cpu_quota")]
    pub up: bool,
    /// Pin the generator (and its simulators) to these CPUs.
    #[arg(long, value_name = "LIST")]
    pub gen_cpus: Option<String>,
    /// Closed loop with N requests outstanding at all times (overrides the scenario's
    /// load.concurrency): no arrival schedule, the rate is an outcome.
    #[arg(long, value_name = "N")]
    pub concurrency: Option<usize>,
    /// HTTP/2 connections per NF, exactly (overrides load.connections and fixes the pool: no
    /// more are opened when their streams are all in use).
    #[arg(long, value_name = "N")]
    pub connections: Option<usize>,
    /// Open loop: requests outstanding at most (overrides load.max_outstanding).
    #[arg(long, value_name = "N")]
    pub max_outstanding: Option<usize>,
    /// Per-request timeout, ms (overrides load.timeout_ms).
    #[arg(long, value_name = "MS")]
    pub timeout_ms: Option<u64>,
    /// A request that times out closes its connection and the next request opens a new one, as
    /// consumers that give up and reconnect do (sets load.reconnect).
    #[arg(long)]
    pub reconnect: bool,
    /// Open loop: seconds at a lower rate after the measured window, to time the recovery
    /// (overrides load.cooldown_s).
    #[arg(long, value_name = "S")]
    pub cooldown: Option<f64>,
    /// The cool-down rate as a fraction of the rate (overrides load.cooldown_scale; default 0.25:
    /// half the capacity after a run at twice it).
    #[arg(long, value_name = "F")]
    pub cooldown_scale: Option<f64>,
    /// Report directory (default bench-out/<scenario>-<timestamp>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Executable started for the NFs (default: this executable).
    #[arg(long, value_name = "PATH", hide = true)]
    pub nf_exe: Option<PathBuf>,
    /// No progress output on stderr.
    #[arg(long)]
    pub quiet: bool,
    /// A scenario that needs Kafka: run its broker from this installed Kafka (its `libs`)
    /// rather than from the jars scripts/kafka/fetch.sh fetched (also FIVECORE_KAFKA_HOME).
    #[arg(long, value_name = "DIR")]
    pub kafka_home: Option<PathBuf>,
    /// A scenario that needs Kafka: the client port of the broker the kit starts (default: one
    /// the system chooses).
    #[arg(long, value_name = "PORT", conflicts_with = "kafka_bootstrap")]
    pub kafka_port: Option<u16>,
    /// A scenario that needs Kafka: use this running broker (HOST:PORT) instead of starting
    /// one; its CPU is then not reported.
    #[arg(long, value_name = "HOST:PORT")]
    pub kafka_bootstrap: Option<String>,
    /// Serve the run's live figures (answers and latency per procedure, requests outstanding)
    /// in Prometheus text on http://ADDR/metrics while it lasts (deploy/grafana/fivecore-bench.json).
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// The NFs the kit starts require OAuth2 access tokens; the kit registers as a consumer at
    /// the NRF (the scenario's, or one it starts for tokens), asks it for a token per service
    /// before the load and sends it with every request (docs/bench.md, "Access tokens and TLS").
    #[arg(long)]
    pub oauth2: bool,
    /// The NFs the kit starts serve TLS only and require client certificates (a lab PKI made
    /// with `fivecore cert`); the kit connects over TLS with its own certificate.
    #[arg(long)]
    pub tls: bool,
}

/// The kit's tools besides the scenario runs.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum BenchCommand {
    /// Send the requests of a JSON Lines file, each once, over HTTP/2 to any server, and count
    /// the answers by status (docs/bench.md, "Replaying a request file").
    Replay(replay::ReplayArgs),
}

/// Runs `fivecore bench`: 0 when the success criteria are met, 1 when missed, 2 on a usage or
/// setup error.
pub fn run(args: BenchArgs) -> ExitCode {
    match run_inner(args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("fivecore bench: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// One line per built-in scenario.
pub fn list() -> Result<String> {
    let mut s = String::new();
    let all = Scenario::builtin()?;
    let width = all.iter().map(|sc| sc.name.len()).max().unwrap_or(0);
    for sc in all {
        s.push_str(&format!("{:<width$} {}\n", sc.name, sc.description));
    }
    Ok(s)
}

fn run_inner(args: BenchArgs) -> Result<bool> {
    if let Some(BenchCommand::Replay(r)) = &args.command {
        return replay::run(r);
    }
    if args.list {
        // Not print!: it panics when stdout is a closed pipe (`fivecore bench --list | head`).
        let _ = std::io::Write::write_all(&mut std::io::stdout(), list()?.as_bytes());
        return Ok(true);
    }
    let Some(name) = args.scenario.clone() else {
        bail!("name a scenario (see `fivecore bench --list`)")
    };
    if let Some(addr) = args.metrics_listen {
        let bound = live::serve(addr)?;
        eprintln!("fivecore bench: live metrics on http://{bound}/metrics");
    }
    let mut scenario = Scenario::load(&name)?;
    if let Some(d) = scenario.dd.as_mut() {
        if args.concurrency.is_some() || args.reconnect || args.cooldown.is_some() {
            bail!("--concurrency, --reconnect and --cooldown: a Data Director scenario's sources are open loop, without them");
        }
        // The copy sources' own: connections to the ingest API and POSTs in flight, each.
        d.connections = args.connections.unwrap_or(d.connections);
        d.max_in_flight = args.max_outstanding.unwrap_or(d.max_in_flight);
    }
    let load = &mut scenario.load;
    load.connections = args.connections.unwrap_or(load.connections);
    load.fixed_connections |= args.connections.is_some();
    load.max_outstanding = args.max_outstanding.unwrap_or(load.max_outstanding);
    load.timeout_ms = args.timeout_ms.unwrap_or(load.timeout_ms);
    load.reconnect |= args.reconnect;
    load.cooldown_s = args.cooldown.unwrap_or(load.cooldown_s);
    load.cooldown_scale = args.cooldown_scale.unwrap_or(load.cooldown_scale);
    if load.connections == 0 || load.max_outstanding == 0 || load.timeout_ms == 0 {
        bail!("--connections, --max-outstanding and --timeout-ms must be > 0");
    }
    if load.cooldown_s < 0.0 || !(load.cooldown_scale > 0.0 && load.cooldown_scale <= 10.0) {
        bail!("--cooldown must be >= 0 and --cooldown-scale in (0, 10]");
    }
    let plan = bindings::BindingPlan::new(&scenario, args.bindings)?;
    if args.bindings.is_some() && plan.is_none() {
        bail!("--bindings: scenario {} preloads no bindings", scenario.name);
    }
    let udr_plan = udr::UdrPlan::new(&scenario, args.subscribers)?;
    if let Some(u) = &udr_plan {
        // `{supi}`, `{gpsi}` and `{imei}` name preloaded subscribers (never a deletable one).
        scenario.generators.supi_count = u.drawn();
    } else if let Some(n) = args.subscribers {
        // A directory (kind `ldap`) holds the generators' range: the flag sizes both.
        if n == 0 || !scenario.simulators.iter().any(|x| x.kind == scenario::SimKind::Ldap) {
            bail!(
                "--subscribers: scenario {} preloads no UDR subscribers and has no directory, or N is 0",
                scenario.name
            );
        }
        scenario.generators.supi_count = n;
    }
    let rate = match (args.rate, args.scale) {
        (Some(r), _) => r,
        (None, Some(f)) => scenario.load.rate * f,
        (None, None) => scenario.default_rate(),
    };
    if !(rate > 0.0 && rate.is_finite()) {
        bail!("the rate must be > 0");
    }
    if args.max_p99_ms.is_some_and(|ms| ms.is_nan() || ms <= 0.0) {
        bail!("--max-p99-ms must be > 0");
    }
    if args.concurrency == Some(0) {
        bail!("--concurrency must be > 0");
    }
    let concurrency = args.concurrency.or(scenario.load.concurrency);
    let duration_s = args.duration.unwrap_or(scenario.load.duration_s);
    let warmup_s = args.warmup.unwrap_or(scenario.load.warmup_s);
    if duration_s <= 0.0 || warmup_s < 0.0 {
        bail!("--duration must be > 0 and --warmup >= 0");
    }
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from("bench-out").join(format!(
            "{}-{}",
            scenario.name,
            chrono::Utc::now().format("%Y%m%dT%H%M%SZ")
        ))
    });
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;

    // Targets given with --target; the other NFs are started below.
    let mut targets = Vec::new();
    for t in &args.target {
        let (nf, url) =
            t.split_once('=').with_context(|| format!("--target {t}: expected NF=URL"))?;
        if nf.ends_with(DIAMETER_TARGET) {
            continue;
        }
        targets.push(TargetReport {
            nf: nf.into(),
            url: url.trim_end_matches('/').into(),
            started_by_kit: false,
            pid: None,
            cpus: None,
            cpu_quota: None,
        });
    }
    check_nf_cpus(&args.nf_cpus, &scenario.nfs)?;
    let modes = security::Modes { oauth2: args.oauth2, tls: args.tls };
    if modes.any() && (!targets.is_empty() || args.up || scenario.dd.is_some()) {
        bail!("--oauth2 and --tls configure the NFs the kit starts one per process: not with --target, --up or a Data Director scenario");
    }
    if args.up && args.nf_cpus.iter().any(|e| e.contains('=')) {
        bail!("--up runs the NFs in one process: --nf-cpus takes a plain CPU list");
    }
    let exe = match &args.nf_exe {
        Some(p) => p.clone(),
        None => std::env::current_exe()?,
    };
    let security = match modes.any() {
        true => Some(Arc::new(security::Security::prepare(modes, &exe, &out)?)),
        false => None,
    };
    // The generator's runtime threads are pinned with --gen-cpus; the main thread is not, so the
    // NFs it starts do not inherit the generator's CPUs.
    let gen_cores = match &args.gen_cpus {
        Some(l) => nfproc::parse_cpu_list(l)?.len(),
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.worker_threads(gen_cores.max(1)).enable_all();
    if let Some(list) = args.gen_cpus.clone() {
        builder.on_thread_start(move || {
            if let Err(e) = nfproc::pin_self(&list) {
                eprintln!("fivecore bench: {e:#}");
            }
        });
    }
    let rt = builder.build()?;
    let command = std::iter::once("fivecore".to_string())
        .chain(std::env::args().skip(1))
        .collect::<Vec<_>>()
        .join(" ");
    let progress = !args.quiet;
    // Before the NFs: a Kafka-mode Data Director's configuration names the broker.
    let kafka = match dd::kafka::needed(&scenario) {
        true => {
            let t = std::time::Instant::now();
            let k = dd::kafka::start(&dd::kafka::KafkaOptions {
                home: args.kafka_home.clone(),
                bootstrap: args.kafka_bootstrap.clone(),
                port: args.kafka_port,
            })?;
            if progress {
                eprintln!("Kafka broker at {} ({:.1} s)", k.bootstrap(), t.elapsed().as_secs_f64());
            }
            targets.push(TargetReport {
                nf: "kafka".into(),
                url: k.bootstrap().to_string(),
                started_by_kit: k.pid().is_some(),
                pid: k.pid(),
                cpus: None,
                cpu_quota: None,
            });
            Some(k)
        }
        false => None,
    };
    let mut children = Vec::new();
    let run = async {
        let http_sims: Vec<_> =
            scenario.simulators.iter().filter(|x| !x.kind.is_diameter()).cloned().collect();
        let t = std::time::Instant::now();
        let sims = sim::start_all(&http_sims, &scenario.generators).await?;
        if progress && http_sims.iter().any(|x| x.kind == scenario::SimKind::Ldap) {
            eprintln!(
                "simulators started in {:.1} s (the LDAP directory loaded with {} subscribers)",
                t.elapsed().as_secs_f64(),
                scenario.generators.supi_count
            );
        }
        let mut vars: HashMap<String, String> =
            sims.iter().map(|s| (format!("{{sim:{}}}", s.name), s.base_url())).collect();
        if let Some(k) = &kafka {
            vars.insert(dd::kafka::BOOTSTRAP_VAR.into(), k.bootstrap().to_string());
        }
        // An OCS or a TDF is reached at its address (`[[pcf.sy.ocs]]`, `[[pcf.sd.tdf]] addr`),
        // not a URL.
        vars.extend(sims.iter().map(|s| (format!("{{sim_addr:{}}}", s.name), s.addr.to_string())));
        let diameter_nf = scenario.diameter.as_ref().map(|d| d.nf.clone());
        let mut diameter_addr = match &diameter_nf {
            Some(nf) => diameter_target(&args.target, nf)?,
            None => None,
        };
        let mut preloaded = None;
        let mut udr_preloaded = None;
        let sim_urls: Vec<(String, String)> =
            sims.iter().map(|s| (s.name.clone(), s.base_url())).collect();
        // Every kit-started NF with a Diameter port (`{diameter_addr}` in its configuration, or
        // the `[diameter]` NF) gets its address before any NF starts, so that another NF's
        // configuration can name it, `{diameter_addr:NAME}` (a BSF's `[[bsf.rx.peers]]`: the
        // PCF), whichever of the two starts first.
        let mut diameter_addrs = HashMap::new();
        for nf in &scenario.nfs {
            if targets.iter().any(|t| &t.nf == nf) {
                continue;
            }
            if diameter_nf.as_ref() == Some(nf) || scenario.uses_diameter_addr(nf) {
                let addr = format!("127.0.0.1:{}", nfproc::free_port()?);
                vars.insert(scenario::diameter_addr_of(nf), addr.clone());
                diameter_addrs.insert(nf.clone(), addr);
            }
        }
        // --up: the kit's NFs in one `fivecore up` process on one data directory, each NF's
        // configuration merged into one file; their ports known before any configuration is
        // written, so one NF's may name another's (`{nf:udr}`).
        let up = match args.up {
            true => {
                let base = nfproc::free_port_run()?;
                for nf in scenario.nfs.iter().filter(|nf| !targets.iter().any(|t| &t.nf == *nf)) {
                    let port = base + nfproc::up_port_offset(nf)?;
                    vars.insert(format!("{{nf:{nf}}}"), format!("http://127.0.0.1:{port}"));
                }
                Some((base, nfproc::data_dir("up")?, toml::Table::new()))
            }
            false => None,
        };
        let mut up = up;
        // --oauth2 without an NRF in the scenario: one only to issue tokens, neither measured
        // nor a target.
        let mut issuer_url = None;
        if let Some(sec) = security.as_ref().filter(|x| x.modes().oauth2) {
            if !scenario.nfs.iter().any(|nf| nf == "nrf") {
                let name = security::DEFAULT_ISSUER;
                let config = nfproc::write_config(&out, name, Some(&sec.issuer_config()?))?;
                let mut c = nfproc::spawn(
                    &exe,
                    name,
                    (None, None),
                    &out,
                    config.as_deref(),
                    nfproc::data_dir(name)?,
                )?;
                c.url = c.url.replacen("http://", &format!("{}://", sec.scheme()), 1);
                issuer_url = Some(c.url.clone());
                children.push(c);
            }
        }
        for nf in &scenario.nfs {
            if targets.iter().any(|t| &t.nf == nf) {
                continue;
            }
            let own_dir = match up {
                Some(_) => None,
                None => Some(nfproc::data_dir(nf)?),
            };
            let dir_path = match (&own_dir, &up) {
                (Some(d), _) => d.path().to_path_buf(),
                (None, Some((_, d, _))) => d.path().to_path_buf(),
                (None, None) => unreachable!("a data directory of its own or up's"),
            };
            match diameter_addrs.get(nf) {
                Some(addr) => {
                    vars.insert(scenario::DIAMETER_ADDR.into(), addr.clone());
                    if diameter_nf.as_ref() == Some(nf) {
                        diameter_addr = Some(addr.parse()?);
                    }
                }
                None => {
                    vars.remove(scenario::DIAMETER_ADDR);
                }
            }
            // The bulk-load commands get the NF's own configuration: the same store.
            let mut table = nf_config_file(&scenario, nf, &vars);
            if let Some(sec) = &security {
                let exempt = security::non_3gpp_services(
                    scenario
                        .procedures
                        .iter()
                        .filter(|p| p.nf.as_ref().unwrap_or(&scenario.nfs[0]) == nf)
                        .map(|p| p.path.as_str()),
                );
                sec.configure_nf(nf, table.get_or_insert_with(toml::Table::new), &exempt)?;
            }
            if let (Some((_, _, merged)), Some(t)) = (up.as_mut(), table.as_ref()) {
                merge_config(merged, t, nf)?;
            }
            let config_name = match up {
                Some(_) => format!("up-{nf}"),
                None => nf.clone(),
            };
            let config = nfproc::write_config(&out, &config_name, table.as_ref())?;
            if let Some(plan) = plan.as_ref().filter(|p| &p.nf == nf) {
                preloaded =
                    Some(plan.preload_command(&exe, &dir_path, config.as_deref(), progress).await?);
                settle_disk(progress).await?;
            }
            if let Some(plan) = udr_plan.as_ref().filter(|p| &p.nf == nf) {
                let loaded = plan
                    .preload_command(&exe, &dir_path, config.as_deref(), &sim_urls, progress)
                    .await?;
                udr_preloaded = Some(loaded);
                settle_disk(progress).await?;
            }
            let Some(dir) = own_dir else { continue };
            let mut c = nfproc::spawn(
                &exe,
                nf,
                (cpus_for(&args.nf_cpus, nf), args.nf_cpu_quota),
                &out,
                config.as_deref(),
                dir,
            )?;
            if let Some(sec) = &security {
                c.url = c.url.replacen("http://", &format!("{}://", sec.scheme()), 1);
            }
            // The NFs after this one may name it in their configuration (a PCF's UDR).
            vars.insert(format!("{{nf:{nf}}}"), c.url.clone());
            targets.push(TargetReport {
                nf: nf.clone(),
                url: c.url.clone(),
                started_by_kit: true,
                pid: Some(c.pid()),
                cpus: cpus_for(&args.nf_cpus, nf).map(str::to_string),
                cpu_quota: args.nf_cpu_quota,
            });
            children.push(c);
        }
        let ready_client = sbi::client::SbiClient::new(&match &security {
            Some(sec) => sec.client_config(Default::default()),
            None => Default::default(),
        })?;
        // A UDR started on preloaded policy data subscriptions loads them all before it is
        // ready (a million take a while).
        // So does a BSF with the Rx proxy's binding index (ten million bindings: ~30 s).
        let ready_wait = if udr_plan.is_some() || plan.is_some() { 600 } else { 30 };
        if let Some((base, dir, mut merged)) = up {
            up_diameter_ports(&mut merged)?;
            let config = nfproc::write_config(&out, "up", Some(&merged))?;
            let cpus = cpus_for(&args.nf_cpus, "up");
            let mut c = nfproc::spawn_up(&exe, cpus, &out, config.as_deref(), dir, base)?;
            let own: Vec<String> = scenario
                .nfs
                .iter()
                .filter(|nf| !targets.iter().any(|t| &t.nf == *nf))
                .cloned()
                .collect();
            for nf in own {
                let url = format!("http://127.0.0.1:{}", base + nfproc::up_port_offset(&nf)?);
                nfproc::wait_ready_at(&mut c, &url, &ready_client, Duration::from_secs(ready_wait))
                    .await?;
                targets.push(TargetReport {
                    nf,
                    url,
                    started_by_kit: true,
                    pid: Some(c.pid()),
                    cpus: cpus.map(str::to_string),
                    cpu_quota: None,
                });
            }
            children.push(c);
        }
        for c in children.iter_mut().filter(|c| c.nf != "up") {
            nfproc::wait_ready(c, &ready_client, Duration::from_secs(ready_wait)).await?;
        }
        if let Some(sec) = security.as_ref().filter(|x| x.modes().oauth2) {
            let (url, own) = match &issuer_url {
                Some(u) => (u.clone(), true),
                None => (
                    targets.iter().find(|t| t.nf == "nrf").context("no NRF target")?.url.clone(),
                    false,
                ),
            };
            sec.start_consumer(&url, own).await?;
        }
        if let (Some(plan), None) = (&plan, &preloaded) {
            let url = targets.iter().find(|t| t.nf == plan.nf).context("bindings target")?;
            preloaded = Some(plan.preload_http(&url.url, &ready_client, progress).await?);
        }
        if let (Some(plan), None) = (&udr_plan, &udr_preloaded) {
            let url = targets.iter().find(|t| t.nf == plan.nf).context("subscribers target")?;
            udr_preloaded =
                Some(plan.preload_http(&url.url, &ready_client, &sim_urls, progress).await?);
        }
        if let Some(u) = udr_preloaded.as_mut() {
            read_etags(&scenario, u, &targets, &ready_client, progress).await?;
        }
        let (rx, gx) = match (&scenario.diameter, diameter_addr) {
            (Some(d), None) => {
                bail!("--target {0}: give its Diameter port too ({0}-diameter=HOST:PORT)", d.nf)
            }
            (Some(_), Some(addr)) => start_diameter_sims(&scenario, addr).await?,
            (None, _) => (None, None),
        };
        let sh = start_sh(&scenario, diameter_addr, udr_plan.as_ref()).await?;
        let cfg = engine::RunConfig {
            scenario: scenario.clone(),
            rate,
            duration_s,
            warmup_s,
            targets: targets.clone(),
            command,
            gen_cores,
            progress,
            max_p99_ms: args.max_p99_ms,
            bindings: preloaded,
            rx: rx.clone(),
            sh: sh.clone(),
            gx: gx.clone(),
            udr: udr_preloaded,
            concurrency,
            security: security.clone(),
        };
        // On a runtime thread (pinned with --gen-cpus), not on this one.
        let report = match cfg.scenario.dd {
            Some(_) => {
                let mut cfg = cfg;
                let nf_load = call_mix(&mut cfg, sims);
                tokio::spawn(dd::run::run(cfg, nf_load)).await?
            }
            None => tokio::spawn(engine::run(cfg, sims)).await?,
        };
        if let Some(rx) = rx {
            rx.shutdown().await;
        }
        if let Some(sh) = sh {
            sh.shutdown().await;
        }
        if let Some(gx) = gx {
            gx.shutdown().await;
        }
        if let Some(sec) = &security {
            sec.shutdown().await;
        }
        report
    };
    // Interrupted, the run is dropped and the NFs it started are stopped below, as after a
    // finished run: a kit stopped by Ctrl-C or SIGTERM must not leave its `fivecore up` running.
    let result = rt.block_on(async {
        tokio::select! {
            r = run => r,
            signal = interrupted() => Err(anyhow::anyhow!("{signal} received: run abandoned, the NFs the kit started are stopped")),
        }
    });
    for c in children.iter_mut() {
        c.stop();
    }
    // After the Data Director, whose Kafka clients would otherwise retry against it.
    if let Some(k) = &kafka {
        k.stop();
    }
    let report = result?;
    report::write_all(&report, &out)?;
    eprintln!("{}", summary(&report));
    eprintln!("report: {}", out.join("report.html").display());
    Ok(report.criteria_passed)
}

/// Completes on SIGINT or SIGTERM with the signal's name; never where neither can be watched.
async fn interrupted() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    match (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) {
        (Ok(mut int), Ok(mut term)) => tokio::select! {
            _ = int.recv() => "SIGINT",
            _ = term.recv() => "SIGTERM",
        },
        _ => std::future::pending().await,
    }
}

/// The call mix that drives a Data Director scenario's real NFs (its procedures), if it has
/// one: the engine's run against the NFs (not the Data Director), at the scale of the copies.
/// Its preloaded data go with it; its progress lines are the Data Director run's.
fn call_mix(cfg: &mut engine::RunConfig, sims: Vec<sim::RunningSim>) -> Option<dd::run::NfLoad> {
    if cfg.scenario.procedures.is_empty() {
        return None;
    }
    let mut scenario = cfg.scenario.clone();
    scenario.dd = None;
    scenario.nfs.retain(|n| n != "dd");
    scenario.load.rate = scenario.total_tps();
    let rate = scenario.load.rate * cfg.rate / cfg.scenario.load.rate;
    let c = engine::RunConfig {
        scenario,
        rate,
        duration_s: cfg.duration_s,
        warmup_s: cfg.warmup_s,
        targets: cfg.targets.iter().filter(|t| t.nf != "dd" && t.nf != "kafka").cloned().collect(),
        command: cfg.command.clone(),
        gen_cores: cfg.gen_cores,
        progress: false,
        max_p99_ms: cfg.max_p99_ms,
        bindings: cfg.bindings.take(),
        rx: cfg.rx.clone(),
        sh: cfg.sh.clone(),
        gx: cfg.gx.clone(),
        udr: cfg.udr.take(),
        concurrency: None,
        security: cfg.security.clone(),
    };
    Some(Box::pin(engine::run(c, sims)))
}

/// Adds `nf`'s configuration to the one file of `fivecore up` (--up): sections meet, values
/// that two NFs set differently are an error (one process has one `[sbi]`).
fn merge_config(into: &mut toml::Table, from: &toml::Table, nf: &str) -> Result<()> {
    fn merge(into: &mut toml::Table, from: &toml::Table, path: &str, nf: &str) -> Result<()> {
        for (k, v) in from {
            let key = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
            match (into.get_mut(k), v) {
                (None, _) => {
                    into.insert(k.clone(), v.clone());
                }
                (Some(toml::Value::Table(a)), toml::Value::Table(b)) => merge(a, b, &key, nf)?,
                (Some(a), b) if a == b => {}
                (Some(_), _) => bail!(
                    "--up: {nf}'s configuration sets {key} differently from another NF of the \
                     scenario; one `fivecore up` process has one"
                ),
            }
        }
        Ok(())
    }
    merge(into, from, "", nf)
}

/// `fivecore up` runs the BSF's Rx proxy and the UDR's Sh server whether the scenario uses them
/// or not: on free ports unless the scenario names them, so a run does not depend on 3869 and
/// 3870 being free.
fn up_diameter_ports(config: &mut toml::Table) -> Result<()> {
    for (nf, section) in [("bsf", "rx"), ("udr", "sh")] {
        let t = config
            .entry(nf)
            .or_insert_with(|| toml::Value::Table(toml::Table::new()))
            .as_table_mut()
            .with_context(|| format!("[{nf}] is not a table"))?
            .entry(section)
            .or_insert_with(|| toml::Value::Table(toml::Table::new()))
            .as_table_mut()
            .with_context(|| format!("[{nf}.{section}] is not a table"))?;
        if !t.contains_key("listen") {
            t.insert("listen".into(), format!("127.0.0.1:{}", nfproc::free_port()?).into());
        }
    }
    Ok(())
}

/// The configuration file of a kit-started NF: `[<nf>]` from `nf_config.<nf>`, the shared
/// sections (`[sbi]`, `[store]`...) from `nf_sections.<nf>`, placeholders filled in.
fn nf_config_file(s: &Scenario, nf: &str, vars: &HashMap<String, String>) -> Option<toml::Table> {
    let mut root = s.nf_sections.get(nf).map(|t| render_config(t, vars)).unwrap_or_default();
    if let Some(t) = s.nf_config.get(nf) {
        root.insert(nf.to_string(), toml::Value::Table(render_config(t, vars)));
    }
    if nf == "nrf" && !s.preload.profiles.is_empty() {
        // The preloaded profiles keep the heartBeatTimer they propose (profile.rs) unless the
        // scenario says otherwise.
        if let toml::Value::Table(t) =
            root.entry("nrf").or_insert_with(|| toml::Value::Table(toml::Table::new()))
        {
            t.entry("heartbeat_max_secs")
                .or_insert(toml::Value::Integer(profile::HEARTBEAT_TIMER_SECS.into()));
        }
    }
    (!root.is_empty()).then_some(root)
}

/// The Gx PCEFs and the Rx AFs / PCFs of a scenario that has them, connected to the NF's
/// Diameter port at `addr` (the PCEFs first: a voice mix's AFs bind to their sessions).
async fn start_diameter_sims(
    s: &Scenario,
    addr: std::net::SocketAddr,
) -> Result<(Option<Arc<rx::RxSims>>, Option<Arc<gx::GxSims>>)> {
    let gx = match gx::GxSims::wanted(s) {
        true => Some(Arc::new(gx::GxSims::start(s, addr).await?)),
        false => None,
    };
    let rx = match rx::RxSims::wanted(s) {
        true => Some(Arc::new(rx::RxSims::start(s, addr).await?)),
        false => None,
    };
    Ok((rx, gx))
}

/// The Sh application servers of a scenario that has them, connected to the UDR's Sh port.
async fn start_sh(
    s: &Scenario,
    addr: Option<std::net::SocketAddr>,
    plan: Option<&udr::UdrPlan>,
) -> Result<Option<Arc<sh::ShSims>>> {
    if !sh::ShSims::wanted(s) {
        return Ok(None);
    }
    let (Some(addr), Some(plan)) = (addr, plan) else {
        bail!("the Sh simulators need the UDR's Sh address and its preloaded Sh profiles")
    };
    Ok(Some(Arc::new(sh::ShSims::start(s, addr, plan).await?)))
}

/// `--target <nf>-diameter=HOST:PORT`: a running NF's Diameter address.
const DIAMETER_TARGET: &str = "-diameter";

fn diameter_target(targets: &[String], nf: &str) -> Result<Option<std::net::SocketAddr>> {
    let key = format!("{nf}{DIAMETER_TARGET}");
    for t in targets {
        if let Some((k, v)) = t.split_once('=') {
            if k == key {
                let addr =
                    v.parse().with_context(|| format!("--target {t}: expected HOST:PORT"))?;
                return Ok(Some(addr));
            }
        }
    }
    Ok(None)
}

/// Replaces placeholders (`{sim:NAME}` → the simulator's URL, `{nf:NAME}` → the URL of an NF
/// the kit started before this one, `{diameter_addr}` → the Diameter address the kit picked for
/// this NF, `{diameter_addr:NAME}` → the one it picked for NF NAME) in the
/// string values of an NF configuration.
pub fn render_config(t: &toml::Table, vars: &HashMap<String, String>) -> toml::Table {
    fn walk(v: &toml::Value, vars: &HashMap<String, String>) -> toml::Value {
        match v {
            toml::Value::String(s) => {
                let mut s = s.clone();
                for (placeholder, value) in vars {
                    s = s.replace(placeholder, value);
                }
                toml::Value::String(s)
            }
            toml::Value::Array(a) => toml::Value::Array(a.iter().map(|v| walk(v, vars)).collect()),
            toml::Value::Table(t) => {
                toml::Value::Table(t.iter().map(|(k, v)| (k.clone(), walk(v, vars))).collect())
            }
            other => other.clone(),
        }
    }
    t.iter().map(|(k, v)| (k.clone(), walk(v, vars))).collect()
}

fn summary(r: &report::Report) -> String {
    let verdict =
        if r.criteria_passed { "success criteria met" } else { "success criteria MISSED" };
    let mut s = match &r.dd {
        Some(dd) => format!(
            "{}: {:.1} copies/s accepted of {:.1} offered; Data Director CPU {} µs/copy{}; {verdict}",
            r.scenario,
            dd.ingested_mps,
            r.rate,
            dd.dd_cpu_us_per_copy.map_or("n/a".into(), |v| format!("{v:.2}")),
            dd.kafka_cores_used.map_or(String::new(), |c| format!(", Kafka broker {c:.3} cores")),
        ),
        None => format!(
            "{}: {:.1} TPS achieved of {:.1} offered; NF CPU {} µs/transaction; {verdict}",
            r.scenario,
            r.totals.achieved_tps,
            r.rate,
            r.totals.nf_cpu_us_per_tx.map_or("n/a".into(), |v| format!("{v:.0}")),
        ),
    };
    for f in &r.failures {
        s.push_str(&format!("\n  FAIL {f}"));
    }
    for w in &r.warnings {
        s.push_str(&format!("\n  warning: {w}"));
    }
    s
}

/// Runs a scenario against given targets (`nf` → URL, `<nf>-diameter` → HOST:PORT) from inside
/// an async context (tests, tools): starts the simulators, registers the scenario's bindings
/// over Nbsf, runs, writes the report into `out`.
pub async fn run_against(
    mut scenario: Scenario,
    targets: Vec<(String, String)>,
    rate: f64,
    duration_s: f64,
    warmup_s: f64,
    out: &std::path::Path,
) -> Result<report::Report> {
    if scenario.dd.is_some() {
        let cfg = engine::RunConfig {
            targets: targets
                .into_iter()
                .map(|(nf, url)| TargetReport {
                    nf,
                    url,
                    started_by_kit: false,
                    pid: None,
                    cpus: None,
                    cpu_quota: None,
                })
                .collect(),
            command: "run_against".into(),
            gen_cores: 1,
            progress: false,
            max_p99_ms: None,
            bindings: None,
            rx: None,
            sh: None,
            gx: None,
            udr: None,
            concurrency: None,
            security: None,
            scenario,
            rate,
            duration_s,
            warmup_s,
        };
        let r = dd::run::run(cfg, None).await?;
        report::write_all(&r, out)?;
        return Ok(r);
    }
    let http_sims: Vec<_> =
        scenario.simulators.iter().filter(|x| !x.kind.is_diameter()).cloned().collect();
    let sims = sim::start_all(&http_sims, &scenario.generators).await?;
    let flags: Vec<String> = targets.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let diameter_addr = match &scenario.diameter {
        Some(d) => diameter_target(&flags, &d.nf)?,
        None => None,
    };
    let targets: Vec<TargetReport> = targets
        .into_iter()
        .filter(|(nf, _)| !nf.ends_with(DIAMETER_TARGET))
        .map(|(nf, url)| TargetReport {
            nf,
            url,
            started_by_kit: false,
            pid: None,
            cpus: None,
            cpu_quota: None,
        })
        .collect();
    let mut preloaded = None;
    if let Some(plan) = bindings::BindingPlan::new(&scenario, None)? {
        let t = targets.iter().find(|t| t.nf == plan.nf).context("no target for the bindings")?;
        let client = sbi::client::SbiClient::new(&Default::default())?;
        preloaded = Some(plan.preload_http(&t.url, &client, false).await?);
    }
    let mut udr_preloaded = None;
    if let Some(plan) = udr::UdrPlan::new(&scenario, None)? {
        scenario.generators.supi_count = plan.drawn();
        let t = targets.iter().find(|t| t.nf == plan.nf).context("no target for the UDR")?;
        let client = sbi::client::SbiClient::new(&Default::default())?;
        let sim_urls: Vec<(String, String)> =
            sims.iter().map(|s| (s.name.clone(), s.base_url())).collect();
        let mut u = plan.preload_http(&t.url, &client, &sim_urls, false).await?;
        read_etags(&scenario, &mut u, &targets, &client, false).await?;
        udr_preloaded = Some(u);
    }
    let (rx, gx) = match (&scenario.diameter, diameter_addr) {
        (Some(d), None) => bail!("no {}{DIAMETER_TARGET} target", d.nf),
        (Some(_), Some(addr)) => start_diameter_sims(&scenario, addr).await?,
        (None, _) => (None, None),
    };
    let sh = start_sh(&scenario, diameter_addr, udr_preloaded.as_ref().map(|u| &u.plan)).await?;
    let concurrency = scenario.load.concurrency;
    let cfg = engine::RunConfig {
        scenario,
        rate,
        duration_s,
        warmup_s,
        targets,
        command: "run_against".into(),
        gen_cores: 1,
        progress: false,
        max_p99_ms: None,
        bindings: preloaded,
        rx: rx.clone(),
        sh: sh.clone(),
        gx: gx.clone(),
        udr: udr_preloaded,
        concurrency,
        security: None,
    };
    let r = engine::run(cfg, sims).await;
    if let Some(rx) = rx {
        rx.shutdown().await;
    }
    if let Some(sh) = sh {
        sh.shutdown().await;
    }
    if let Some(gx) = gx {
        gx.shutdown().await;
    }
    let r = r?;
    report::write_all(&r, out)?;
    Ok(r)
}

/// Reads the preloaded sm-data's ETags from the UDR when the scenario uses entity tags.
async fn read_etags(
    s: &Scenario,
    u: &mut udr::UdrPreloaded,
    targets: &[TargetReport],
    client: &sbi::client::SbiClient,
    progress: bool,
) -> Result<()> {
    let uses_etags = s.procedures.iter().any(|p| p.etag.is_some());
    if !uses_etags || u.plan.kind != scenario::UdrKind::PolicySmData {
        return Ok(());
    }
    let t = targets.iter().find(|t| t.nf == u.plan.nf).context("subscribers target")?;
    u.read_etags(&t.url, client, progress).await
}

/// A preload by the NF's bulk-load command leaves up to gigabytes of dirty pages in the page cache. Written
/// back by the kernel during the measured run, they queue in front of the NF's own commits and
/// its fsyncs take tens of milliseconds (seen as p99s of 20-70 ms in runs right after a
/// 10M-binding preload), so the run starts once they are on disk.
async fn settle_disk(progress: bool) -> Result<()> {
    let t = std::time::Instant::now();
    // SAFETY: sync(2) takes no arguments and cannot fail.
    tokio::task::spawn_blocking(|| unsafe { libc::sync() }).await?;
    if progress {
        eprintln!("preload written to disk in {:.1} s", t.elapsed().as_secs_f64());
    }
    Ok(())
}

/// The CPUs `--nf-cpus` gives `nf`: its own `NF=LIST`, else a bare LIST, else none.
fn cpus_for<'a>(entries: &'a [String], nf: &str) -> Option<&'a str> {
    entries
        .iter()
        .find_map(|e| e.strip_prefix(nf).and_then(|rest| rest.strip_prefix('=')))
        .or_else(|| entries.iter().find(|e| !e.contains('=')).map(String::as_str))
}

/// Every `NF=LIST` of `--nf-cpus` names an NF of the scenario (a typo would leave it unpinned).
fn check_nf_cpus(entries: &[String], nfs: &[String]) -> Result<()> {
    for e in entries {
        if let Some((nf, _)) = e.split_once('=') {
            if !nfs.iter().any(|n| n == nf) {
                bail!("--nf-cpus {e}: the scenario starts no NF {nf} (it has {nfs:?})");
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nf_cpus_per_nf_or_for_all() {
        let e = vec!["pcf=1".to_string(), "0".to_string()];
        assert_eq!(cpus_for(&e, "pcf"), Some("1"));
        assert_eq!(cpus_for(&e, "udr"), Some("0"));
        assert_eq!(cpus_for(&["0-1".to_string()], "bsf"), Some("0-1"));
        assert_eq!(cpus_for(&["pcf=1".to_string()], "udr"), None);
        assert_eq!(cpus_for(&[], "udr"), None);
        let nfs = vec!["udr".to_string(), "pcf".to_string()];
        assert!(check_nf_cpus(&e, &nfs).is_ok());
        assert!(check_nf_cpus(&["pfc=1".to_string()], &nfs).is_err());
    }

    #[test]
    fn up_merges_the_nfs_configurations() {
        let mut into = toml::Table::new();
        let bsf: toml::Table = toml::from_str("[bsf.rx]\nenabled = true\n[sbi]\nmax = 1").unwrap();
        let udr: toml::Table = toml::from_str("[udr]\nx = 2\n[sbi]\nmax = 1").unwrap();
        merge_config(&mut into, &bsf, "bsf").unwrap();
        merge_config(&mut into, &udr, "udr").unwrap();
        assert_eq!(into["sbi"]["max"].as_integer(), Some(1));
        assert_eq!(into["udr"]["x"].as_integer(), Some(2));
        let other: toml::Table = toml::from_str("[sbi]\nmax = 2").unwrap();
        let e = merge_config(&mut into, &other, "nrf").unwrap_err().to_string();
        assert!(e.contains("sbi.max"), "{e}");
        up_diameter_ports(&mut into).unwrap();
        assert!(into["bsf"]["rx"]["listen"].as_str().unwrap().starts_with("127.0.0.1:"));
        assert_eq!(into["bsf"]["rx"]["enabled"].as_bool(), Some(true));
        assert!(into["udr"]["sh"]["listen"].as_str().is_some());
    }

    #[test]
    fn nf_config_gets_simulator_urls() {
        let t: toml::Table =
            toml::from_str("a = 1\n[forwarding]\npeers = [\"{sim:peer}\"]").unwrap();
        let sims = HashMap::from([("{sim:peer}".to_string(), "http://127.0.0.1:9".to_string())]);
        let r = render_config(&t, &sims);
        assert_eq!(r["forwarding"]["peers"][0].as_str(), Some("http://127.0.0.1:9"));
        assert_eq!(r["a"].as_integer(), Some(1));
    }

    #[test]
    fn an_nrf_the_kit_starts_keeps_the_preloaded_profiles_heartbeat_timer() {
        let vars = HashMap::new();
        for name in ["nrf-5k", "nrf-51.6k"] {
            let mut s = Scenario::load(name).unwrap();
            let root = nf_config_file(&s, "nrf", &vars).unwrap();
            let max = root["nrf"]["heartbeat_max_secs"].as_integer();
            assert_eq!(max, Some(i64::from(profile::HEARTBEAT_TIMER_SECS)), "{name}");
            // What the scenario sets is kept.
            assert_eq!(root["nrf"]["max_subscriptions"].as_integer(), Some(1100), "{name}");
            s.nf_config.get_mut("nrf").unwrap().insert("heartbeat_max_secs".into(), 60.into());
            let root = nf_config_file(&s, "nrf", &vars).unwrap();
            assert_eq!(root["nrf"]["heartbeat_max_secs"].as_integer(), Some(60), "{name}");
        }
        // Not for the other NFs.
        let s = Scenario::load("bsf-s2-30k").unwrap();
        let bsf = nf_config_file(&s, "bsf", &vars).unwrap_or_default();
        assert!(!bsf.contains_key("nrf"));
    }

    #[test]
    fn list_has_one_line_per_scenario() {
        let l = list().unwrap();
        assert_eq!(l.lines().count(), scenario::BUILTIN.len());
    }
}
