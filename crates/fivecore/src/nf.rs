//! The network functions and whether each has landed in this build.

use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;

use crate::cli::NfArgs;

/// Exit status of a subcommand whose NF is not part of this build yet: nothing pretends to serve.
pub const NOT_LANDED: u8 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nf {
    Nrf,
    Udr,
    Bsf,
    Pcf,
    Dd,
}

/// Where the stores go when `--data-dir` is not given: the same for `fivecore up` and for each
/// NF subcommand, so an NF run alone serves the state `up` left (and the other way round).
pub const DEFAULT_DATA_DIR: &str = "fivecore-data";

/// What `fivecore up` prints and starts, and the ports of DESIGN.md: the one place that gives
/// each NF its default SBI port and database file, read by `up`, by `fivecore <nf>` and by the
/// NFs' bulk-load commands.
pub struct NfInfo {
    pub nf: Nf,
    pub name: &'static str,
    pub sbi_port: u16,
    /// The NF's database file under the data directory.
    pub db_file: &'static str,
    pub diameter: Option<(&'static str, u16)>,
    /// Whether this build serves the Diameter side yet (the SBI side may land first).
    pub diameter_served: bool,
    /// The issue that delivers it, while it has not landed (None: not filed yet).
    pub issue: Option<u32>,
    pub available: bool,
}

pub const ALL: [NfInfo; 5] = [
    NfInfo {
        nf: Nf::Nrf,
        name: "NRF",
        sbi_port: 7000,
        db_file: "nrf.db",
        diameter: None,
        diameter_served: false,
        issue: Some(3),
        available: true,
    },
    NfInfo {
        nf: Nf::Udr,
        name: "UDR",
        sbi_port: 7001,
        db_file: "udr.db",
        diameter: Some(("Sh", 3870)),
        diameter_served: true,
        issue: Some(7),
        available: true,
    },
    NfInfo {
        nf: Nf::Bsf,
        name: "BSF",
        sbi_port: 7002,
        db_file: "bsf.db",
        diameter: Some(("Rx proxy", 3869)),
        diameter_served: true,
        issue: Some(6),
        available: true,
    },
    NfInfo {
        nf: Nf::Pcf,
        name: "PCF",
        sbi_port: 7003,
        db_file: "pcf.db",
        // Gx and Rx when `[pcf.diameter]` enables it; Sy and Sd are issue #23's next steps.
        diameter: Some(("Gx, Rx", 3868)),
        diameter_served: true,
        issue: Some(23),
        available: true,
    },
    NfInfo {
        nf: Nf::Dd,
        name: "Data Director",
        sbi_port: 7004,
        db_file: "dd.db",
        diameter: None,
        diameter_served: false,
        issue: Some(24),
        available: true,
    },
];

/// `--data-dir` of the bulk-load commands, or [`DEFAULT_DATA_DIR`]: the store the NF serves from.
pub fn data_dir(given: Option<&Path>) -> std::path::PathBuf {
    given.unwrap_or(Path::new(DEFAULT_DATA_DIR)).to_path_buf()
}

pub fn info(nf: Nf) -> &'static NfInfo {
    // ALL lists every variant.
    ALL.iter().find(|i| i.nf == nf).unwrap_or(&ALL[0])
}

pub fn run(nf: Nf, args: &NfArgs) -> ExitCode {
    crate::logging::init(args.log_format);
    let config = match &args.config {
        Some(path) => match crate::config::Config::load(path) {
            Ok(c) => c,
            Err(e) => {
                // A bad configuration is reported even for NFs not landed, so files can be prepared.
                eprintln!("fivecore: {e}");
                return ExitCode::from(1);
            }
        },
        None => crate::config::Config::default(),
    };
    let info = info(nf);
    if args.check_config {
        return crate::config::report_check(&config, &[nf]);
    }
    if !info.available {
        return not_landed(&format!("the {}", info.name), info.issue);
    }
    let dir = &args.data_dir;
    if let Err(e) = std::fs::create_dir_all(dir) {
        eprintln!("fivecore: cannot create {}: {e}", dir.display());
        return ExitCode::from(1);
    }
    match nf {
        Nf::Nrf => {
            let mut run = nrf_run_config(&config, Some(dir));
            if let Some(listen) = args.listen {
                run.sbi.listen = listen;
            }
            let console = nf_console(&config, Nf::Nrf, &run.sbi);
            serve_until_signal("NRF", console, |stop| nrf::run(run, stop))
        }
        Nf::Bsf => {
            let mut run = bsf_run_config(&config, Some(dir));
            if let Some(listen) = args.listen {
                run.sbi.listen = listen;
            }
            let console = nf_console(&config, Nf::Bsf, &run.sbi);
            serve_until_signal("BSF", console, |stop| bsf::run(run, stop))
        }
        Nf::Udr => {
            let mut run = udr_run_config(&config, Some(dir));
            if let Some(listen) = args.listen {
                run.sbi.listen = listen;
            }
            let console = nf_console(&config, Nf::Udr, &run.sbi);
            serve_until_signal("UDR", console, |stop| udr::run(run, stop))
        }
        Nf::Pcf => {
            let mut run = pcf_run_config(&config, Some(dir));
            if let Some(listen) = args.listen {
                run.sbi.listen = listen;
            }
            let console = nf_console(&config, Nf::Pcf, &run.sbi);
            serve_until_signal("PCF", console, |stop| pcf::run(run, stop))
        }
        Nf::Dd => {
            let mut run = dd_run_config(&config, Some(dir));
            if let Some(listen) = args.listen {
                run.sbi.listen = listen;
            }
            let console = nf_console(&config, Nf::Dd, &run.sbi);
            serve_until_signal("Data Director", console, |stop| dd::run(run, stop))
        }
    }
}

/// The NRF's run configuration from the file: SBI port 7000 unless one is configured, and its
/// database `nrf.db` (or the configured `[store] path` when not the default) under `data_dir`
/// when given.
pub fn nrf_run_config(config: &crate::config::Config, data_dir: Option<&Path>) -> nrf::RunConfig {
    let (sbi, store) = nf_sbi_and_store(config, Nf::Nrf, data_dir);
    nrf::RunConfig {
        nrf: config.nrf.clone(),
        sbi,
        client: config.client.clone(),
        store,
        instance_id: config.instance_id.clone(),
    }
}

/// The UDR's run configuration from the file: its SBI port is 7001 unless one is configured,
/// and its database is `udr.db` (or the configured `[store] path` when not the default) under
/// `data_dir` when given.
pub fn udr_run_config(config: &crate::config::Config, data_dir: Option<&Path>) -> udr::RunConfig {
    let (sbi, store) = nf_sbi_and_store(config, Nf::Udr, data_dir);
    udr::RunConfig {
        udr: config.udr.clone(),
        sbi,
        client: config.client.clone(),
        store,
        instance_id: config.instance_id.clone(),
    }
}

/// The PCF's run configuration from the file: its SBI port is 7003 unless one is configured,
/// and its database is `pcf.db` (or the configured `[store] path` when not the default) under
/// `data_dir` when given; without `[pcf] policy`, the built-in default project beside it.
pub fn pcf_run_config(config: &crate::config::Config, data_dir: Option<&Path>) -> pcf::RunConfig {
    let (sbi, store) = nf_sbi_and_store(config, Nf::Pcf, data_dir);
    pcf::RunConfig {
        pcf: config.pcf.clone(),
        sbi,
        client: config.client.clone(),
        store,
        instance_id: config.instance_id.clone(),
    }
}

/// The Data Director's run configuration from the file: its port is 7004 unless one is
/// configured, its database (the admin API's feeds, filters, correlations) `dd.db` and its log
/// `dd-log/` under `data_dir` when given.
pub fn dd_run_config(config: &crate::config::Config, data_dir: Option<&Path>) -> dd::RunConfig {
    let (sbi, store) = nf_sbi_and_store(config, Nf::Dd, data_dir);
    let mut dd = config.dd.clone();
    if let (Some(dir), Some(log)) = (data_dir, dd.log_dir.as_mut()) {
        if log.is_relative() {
            *log = dir.join(&*log);
        }
    }
    dd::RunConfig {
        dd,
        sbi,
        client: config.client.clone(),
        store,
        instance_id: config.instance_id.clone(),
    }
}

/// The SBI listener and store of an NF: the NF's default port ([`ALL`]) unless one is
/// configured, and its `db_file` (or the configured `[store] path` when not the default) under
/// `data_dir` when given.
pub(crate) fn nf_sbi_and_store(
    config: &crate::config::Config,
    nf: Nf,
    data_dir: Option<&Path>,
) -> (sbi::ServerConfig, store::SqliteConfig) {
    let mut store = config.store.clone();
    if store.path == store::SqliteConfig::default().path {
        store.path = info(nf).db_file.into();
    }
    if let Some(dir) = data_dir {
        store.path = dir.join(&store.path);
    }
    let mut sbi = config.sbi.clone();
    sbi.telemetry = config.telemetry.clone();
    if sbi.listen.port() == 0 {
        sbi.listen.set_port(info(nf).sbi_port);
    }
    (sbi, store)
}

/// The BSF's run configuration from the file: its SBI port is 7002 unless one is configured,
/// and its database is `bsf.db` (or the configured `[store] path` when not the default) under
/// `data_dir` when given.
pub fn bsf_run_config(config: &crate::config::Config, data_dir: Option<&Path>) -> bsf::RunConfig {
    let (sbi, mut store) = nf_sbi_and_store(config, Nf::Bsf, data_dir);
    // Checkpoints off the writer: the binding create/delete p99 at 10M bindings (docs/store.md).
    store.background_checkpoint.get_or_insert(true);
    // No commit delay: at S9's 1,125 writes/s a 1 ms delay shared an fsync between ~1.3 writes
    // and added ~1 ms to the writes' p99 (docs/BENCHMARKS.md, s16); the BSF's Rx lookups are
    // in memory, so fewer reader cache rebuilds would buy it nothing.
    store.commit_delay_us.get_or_insert(0);
    bsf::RunConfig {
        bsf: config.bsf.clone(),
        sbi,
        client: config.client.clone(),
        store,
        instance_id: config.instance_id.clone(),
    }
}

/// The SBI address `fivecore up` gives `nf`: the configured `[sbi] listen` host with the NF's
/// default port, shifted by `port_base` (the NRF's port; 0: every port chosen by the system).
pub fn up_listen(config: &crate::config::Config, nf: Nf, port_base: u16) -> SocketAddr {
    let port = match port_base {
        0 => 0,
        base => base.saturating_add(info(nf).sbi_port - ALL[0].sbi_port),
    };
    SocketAddr::new(config.sbi.listen.ip(), port)
}

/// The console of an NF run alone, when `[console] enabled = true`: it reaches the NF itself
/// unless `[console.nfs]` names it, and the other NFs `[console.nfs]` names.
fn nf_console(
    config: &crate::config::Config,
    nf: Nf,
    sbi: &sbi::ServerConfig,
) -> Option<console::ConsoleConfig> {
    if config.console.enabled != Some(true) {
        return None;
    }
    let mut c = config.console.clone();
    let own = crate::console_cli::nf_url(sbi, sbi.listen);
    let slot = match nf {
        Nf::Nrf => &mut c.nfs.nrf,
        Nf::Udr => &mut c.nfs.udr,
        Nf::Bsf => &mut c.nfs.bsf,
        Nf::Pcf => &mut c.nfs.pcf,
        Nf::Dd => &mut c.nfs.dd,
    };
    slot.get_or_insert(own);
    Some(c)
}

/// The console's address in `up`: `[console] listen` when set, else the configured `[sbi]
/// listen` host on the NRF's port + 10 (7010), shifted with `--port-base` (0: chosen by the system).
pub fn up_console_listen(config: &crate::config::Config, port_base: u16) -> SocketAddr {
    if let Some(listen) = config.console.listen {
        return listen;
    }
    let port = match port_base {
        0 => 0,
        base => base.saturating_add(10),
    };
    SocketAddr::new(config.sbi.listen.ip(), port)
}

/// Runs one NF on a fresh runtime until SIGINT/SIGTERM: exit 0 after a clean stop, 1 on error.
/// Runs `serve` with a future that completes on SIGINT or SIGTERM, watched from the runtime's
/// start (before the NF binds), so no signal finds the process without its handler.
fn serve_until_signal<E: std::fmt::Display, F: std::future::Future<Output = Result<(), E>>>(
    name: &str,
    console: Option<console::ConsoleConfig>,
    serve: impl FnOnce(std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>) -> F,
) -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("fivecore: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let run = async {
        let signal = crate::up::shutdown_signal();
        let console = match &console {
            Some(c) => {
                let listen = c.listen_or_default();
                Some(crate::console_cli::bind(c, listen, false).await?)
            }
            None => None,
        };
        let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
        let console = console.map(|c| {
            tracing::info!(addr = %c.local_addr(), "console serving");
            tokio::spawn(c.serve(async move {
                let _ = stop_rx.wait_for(|s| *s).await;
            }))
        });
        let r = serve(Box::pin(signal)).await.map_err(|e| e.to_string());
        let _ = stop_tx.send(true);
        if let Some(task) = console {
            let _ = task.await;
        }
        r
    };
    match runtime.block_on(run) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fivecore: the {name} failed: {e}");
            ExitCode::from(1)
        }
    }
}

pub fn not_landed(what: &str, issue: Option<u32>) -> ExitCode {
    let issue = issue.map_or("no issue filed yet".to_owned(), |n| format!("issue #{n}"));
    eprintln!("fivecore: {what} has not landed in this build yet ({issue}); nothing is served.");
    ExitCode::from(NOT_LANDED)
}
