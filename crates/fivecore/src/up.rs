//! `fivecore up`: every NF of this build in one process on its default port.

use std::process::ExitCode;

use crate::cli::UpArgs;
use crate::nf::{self, NOT_LANDED};

pub fn run(args: &UpArgs) -> ExitCode {
    crate::logging::init(args.log_format);
    if let Some(path) = &args.config {
        if let Err(e) = crate::config::Config::load(path) {
            eprintln!("fivecore: {e}");
            return ExitCode::from(1);
        }
    }
    println!("{}", endpoint_table());
    let available = nf::ALL.iter().filter(|i| i.available).count();
    if available == 0 {
        eprintln!(
            "fivecore up: no network function has landed in this build yet; nothing is served."
        );
        return ExitCode::from(NOT_LANDED);
    }
    // Reached once an NF issue lands and marks its NF available; each NF then starts here and
    // shares the shutdown signal below.
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("fivecore up: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(shutdown_signal());
    ExitCode::SUCCESS
}

/// The table `up` prints: every NF, its ports, and whether this build serves it.
pub fn endpoint_table() -> String {
    let mut out =
        String::from("NF             SBI                     Diameter                  status\n");
    for i in nf::ALL.iter() {
        let sbi = format!("http://127.0.0.1:{}", i.sbi_port);
        let dia =
            i.diameter.map_or("-".to_owned(), |(app, port)| format!("127.0.0.1:{port} ({app})"));
        let status = if i.available {
            "serving".to_owned()
        } else {
            i.issue.map_or("not landed".to_owned(), |n| format!("not landed (issue #{n})"))
        };
        out.push_str(&format!("{:<14} {:<23} {:<25} {}\n", i.name, sbi, dia, status));
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
