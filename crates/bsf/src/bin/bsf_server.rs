//! The BSF alone, with the store settings and allocator of `fivecore bsf`, for the per-request
//! measurements of scripts/bench-bsf-instructions.sh (callgrind) and scripts/bench-bsf-compare.sh:
//! building the `fivecore` binary with optimisations builds every NF and the Data Director's
//! librdkafka, this builds the BSF's crates only (a binary, not an example: an example would
//! build every dev-dependency too).
//!
//!     bsf_server ADDR DATA_DIR [BSF-SECTION-AS-JSON]
//!
//! Serves Nbsf on ADDR with its store `DATA_DIR/bsf.db` until SIGTERM or SIGINT. The optional
//! third argument is the `[bsf]` section's keys as JSON (docs/bsf.md), e.g.
//! `{"discovery_index":false}`.

use std::path::PathBuf;
use std::process::ExitCode;

// As the fivecore binary (crates/fivecore/src/main.rs): measured with the allocator it ships.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(addr), Some(dir)) = (args.first(), args.get(1)) else {
        eprintln!("usage: bsf_server ADDR DATA_DIR [BSF-SECTION-AS-JSON]");
        return ExitCode::from(2);
    };
    let bsf: bsf::BsfConfig = match args.get(2) {
        Some(json) => match serde_json::from_str(json) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("bsf_server: {json}: {e}");
                return ExitCode::from(2);
            }
        },
        None => bsf::BsfConfig::default(),
    };
    let listen = match addr.parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("bsf_server: {addr}: {e}");
            return ExitCode::from(2);
        }
    };
    let sbi = sbi::ServerConfig { listen, ..sbi::ServerConfig::default() };
    // What `fivecore bsf` sets (crates/fivecore/src/nf.rs, bsf_run_config).
    let store = store::SqliteConfig {
        background_checkpoint: Some(true),
        commit_delay_us: Some(0),
        ..store::SqliteConfig::new(PathBuf::from(dir).join("bsf.db"))
    };
    let run = bsf::RunConfig {
        bsf,
        sbi,
        client: sbi::client::ClientConfig::default(),
        store,
        instance_id: None,
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("bsf_server: {e}");
            return ExitCode::from(1);
        }
    };
    let served = runtime.block_on(bsf::run(run, async {
        use tokio::signal::unix::{signal, SignalKind};
        match (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) {
            (Ok(mut term), Ok(mut int)) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
            }
            _ => std::future::pending::<()>().await,
        }
    }));
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bsf_server: {e}");
            ExitCode::from(1)
        }
    }
}
