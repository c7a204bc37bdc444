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
    // The BSF registers with the NRF of this process unless `[bsf.nrf]` says otherwise; its
    // instance id is its own (the configured one is the NRF's).
    let mut bsf_config = nf::bsf_run_config(&config, Some(&args.data_dir));
    bsf_config.store.path = args.data_dir.join("bsf.db");
    bsf_config.sbi.listen = SocketAddr::from(([127, 0, 0, 1], nf::info(nf::Nf::Bsf).sbi_port));
    bsf_config.instance_id = None;
    if bsf_config.bsf.nrf.is_none() {
        bsf_config.bsf.nrf = Some(nrf_client::NrfClientConfig {
            api_roots: vec![format!("http://{}", nrf_config.sbi.listen)],
            ..Default::default()
        });
    }
    let result = runtime.block_on(async move {
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let (stop_nrf_tx, stop_nrf_rx) = tokio::sync::watch::channel(false);
        let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        let mut nrf = tokio::spawn(nrf::run(nrf_config, stopped(stop_nrf_rx)));
        let mut bsf = tokio::spawn(bsf::run(bsf_config, stopped(stop_rx)));
        tokio::select! {
            () = shutdown_signal() => {}
            // An NF that stops on its own (a port in use) stops `up`.
            r = &mut nrf => {
                let _ = stop_tx.send(true);
                let _ = stop_nrf_tx.send(true);
                let _ = bsf.await;
                return r.map_err(|e| e.to_string())?.map_err(|e| format!("NRF: {e}"));
            }
            r = &mut bsf => {
                let _ = stop_tx.send(true);
                let _ = stop_nrf_tx.send(true);
                let _ = nrf.await;
                return r.map_err(|e| e.to_string())?.map_err(|e| format!("BSF: {e}"));
            }
        }
        let _ = stop_tx.send(true);
        // The BSF first: it deregisters from the NRF while the NRF still serves.
        let b =
            bsf.await.map_err(|e| e.to_string()).and_then(|r| r.map_err(|e| format!("BSF: {e}")));
        let _ = stop_nrf_tx.send(true);
        let n = nrf.await.map_err(|e| e.to_string())?.map_err(|e| format!("NRF: {e}"));
        b.and(n)
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fivecore up: {e}");
            ExitCode::from(1)
        }
    }
}

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
