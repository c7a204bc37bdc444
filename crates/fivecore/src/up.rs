//! `fivecore up`: every NF of this build in one process on its default port.

use std::net::SocketAddr;
use std::process::ExitCode;

use crate::cli::UpArgs;
use crate::nf::{self, NOT_LANDED};

pub fn run(args: &UpArgs) -> ExitCode {
    crate::logging::init(args.log_format);
    let config = match &args.config {
        Some(path) => match crate::config::Config::load(path) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("fivecore: {e}");
                return ExitCode::from(1);
            }
        },
        None => crate::config::Config::default(),
    };
    println!("{}", endpoint_table());
    let available = nf::ALL.iter().filter(|i| i.available).count();
    if available == 0 {
        eprintln!(
            "fivecore up: no network function has landed in this build yet; nothing is served."
        );
        return ExitCode::from(NOT_LANDED);
    }
    if let Err(e) = std::fs::create_dir_all(&args.data_dir) {
        eprintln!("fivecore up: cannot create {}: {e}", args.data_dir.display());
        return ExitCode::from(1);
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("fivecore up: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    // Each available NF on its default port with its own database under --data-dir; one
    // shutdown signal stops them all.
    let mut nrf_config = nf::nrf_run_config(&config, Some(&args.data_dir));
    nrf_config.store.path = args.data_dir.join("nrf.db");
    nrf_config.sbi.listen = SocketAddr::from(([127, 0, 0, 1], nf::info(nf::Nf::Nrf).sbi_port));
    // The other NFs register with the NRF of this process unless their `[<nf>.nrf]` says
    // otherwise; their instance ids are their own (the configured one is the NRF's).
    let own_nrf = || nrf_client::NrfClientConfig {
        api_roots: vec![format!("http://{}", nrf_config.sbi.listen)],
        ..Default::default()
    };
    let local = |n: nf::Nf| SocketAddr::from(([127, 0, 0, 1], nf::info(n).sbi_port));
    let mut bsf_config = nf::bsf_run_config(&config, Some(&args.data_dir));
    bsf_config.store.path = args.data_dir.join("bsf.db");
    bsf_config.sbi.listen = local(nf::Nf::Bsf);
    bsf_config.instance_id = None;
    bsf_config.bsf.nrf.get_or_insert_with(own_nrf);
    // The whole core: the BSF's Rx proxy runs too (on `[bsf.rx] listen`, 3869 by default).
    bsf_config.bsf.rx.enabled = true;
    let mut udr_config = nf::udr_run_config(&config, Some(&args.data_dir));
    udr_config.store.path = args.data_dir.join("udr.db");
    udr_config.sbi.listen = local(nf::Nf::Udr);
    udr_config.instance_id = None;
    udr_config.udr.nrf.get_or_insert_with(own_nrf);
    // And the UDR's Diameter Sh server (on `[udr.sh] listen`, 3870 by default).
    udr_config.udr.sh.enabled = true;
    let result = runtime.block_on(async move {
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let (stop_nrf_tx, stop_nrf_rx) = tokio::sync::watch::channel(false);
        let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        // Each NF reports when it stops, so one that stops on its own (a port in use) stops `up`.
        let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let spawn = |name: &'static str, fut: BoxedNf| {
            let done = done_tx.clone();
            tokio::spawn(async move {
                let r = fut.await.map_err(|e| format!("{name}: {e}"));
                let _ = done.send(());
                r
            })
        };
        let nrf = spawn(
            "NRF",
            Box::pin(async move {
                nrf::run(nrf_config, stopped(stop_nrf_rx)).await.map_err(|e| e.to_string())
            }),
        );
        let others = [
            spawn(
                "BSF",
                Box::pin({
                    let stop = stopped(stop_rx.clone());
                    async move { bsf::run(bsf_config, stop).await.map_err(|e| e.to_string()) }
                }),
            ),
            spawn(
                "UDR",
                Box::pin({
                    let stop = stopped(stop_rx.clone());
                    async move { udr::run(udr_config, stop).await.map_err(|e| e.to_string()) }
                }),
            ),
        ];
        tokio::select! {
            () = shutdown_signal() => {}
            _ = done_rx.recv() => {}
        }
        // The others first: they deregister from the NRF while the NRF still serves.
        let _ = stop_tx.send(true);
        let mut result = Ok(());
        for task in others {
            let r = task.await.map_err(|e| e.to_string()).and_then(|r| r);
            result = result.and(r);
        }
        let _ = stop_nrf_tx.send(true);
        let n = nrf.await.map_err(|e| e.to_string()).and_then(|r| r);
        result.and(n)
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fivecore up: {e}");
            ExitCode::from(1)
        }
    }
}

type BoxedNf = std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send>>;

/// The table `up` prints: every NF, its ports, and whether this build serves it.
pub fn endpoint_table() -> String {
    let mut out = String::from(
        "NF             SBI                     Diameter                      status\n",
    );
    for i in nf::ALL.iter() {
        let sbi = format!("http://127.0.0.1:{}", i.sbi_port);
        let dia = match i.diameter {
            None => "-".to_owned(),
            Some((app, port)) if i.diameter_served => format!("127.0.0.1:{port} ({app})"),
            Some((app, _)) => format!("- ({app} to come)"),
        };
        let status = if i.available {
            "serving".to_owned()
        } else {
            i.issue.map_or("not landed".to_owned(), |n| format!("not landed (issue #{n})"))
        };
        out.push_str(&format!("{:<14} {:<23} {:<29} {}\n", i.name, sbi, dia, status));
    }
    out.push_str("Every SBI port also serves /metrics, /healthz/live and /healthz/ready.");
    out
}

/// Completes on SIGINT or SIGTERM, whichever comes first.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch SIGTERM; only Ctrl-C stops fivecore");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT received, stopping"),
        _ = term.recv() => tracing::info!("SIGTERM received, stopping"),
    }
}
