//! `fivecore`: one binary, one subcommand per network function, `up` to run them all.

mod backup;
mod bsf_preload;
mod cert;
mod cli;
mod config;
mod console_cli;
mod logging;
mod nf;
mod policy_cli;
mod restore;
mod udr_import;
mod up;

use std::process::ExitCode;

use clap::Parser;

use cli::{BsfCommand, Cli, Command, UdrCommand};

/// Every NF and the kit allocate per message (HTTP/2 frames, JSON, Diameter buffers) from
/// several threads; glibc's malloc spent ~17 % of the kit generator's CPU in its bins and
/// consolidation (perf, BENCHMARKS.md). mimalloc's per-thread free lists make that a few %.
#[cfg(not(any(feature = "system-allocator", feature = "heap-stats")))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

// Always compiled, so its test runs in every build; used by `--features heap-stats`.
#[cfg_attr(not(feature = "heap-stats"), allow(dead_code))]
mod heap_stats;

#[cfg(all(feature = "heap-stats", not(feature = "system-allocator")))]
#[global_allocator]
static GLOBAL: heap_stats::Counting<mimalloc::MiMalloc> = heap_stats::Counting(mimalloc::MiMalloc);

#[cfg(all(feature = "heap-stats", feature = "system-allocator"))]
#[global_allocator]
static GLOBAL: heap_stats::Counting<std::alloc::System> = heap_stats::Counting(std::alloc::System);

fn main() -> ExitCode {
    // First, while this is the only thread: SQLite's memory from mimalloc too (why in
    // store::sqlite::alloc). Refused only if SQLite had been used already, which nothing before
    // this line does.
    if let Err(e) = store::sqlite::alloc::install() {
        eprintln!("fivecore: SQLite keeps its own allocator: {e}");
    }
    #[cfg(feature = "heap-stats")]
    heap_stats::log_every(std::time::Duration::from_secs(60));
    let cli = Cli::parse();
    match cli.command {
        Command::Version => {
            use std::io::Write;
            // Not println!: it panics when stdout is a closed pipe.
            let _ = writeln!(std::io::stdout(), "fivecore {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Command::Up(args) => up::run(&args),
        Command::Nrf(args) => nf::run(nf::Nf::Nrf, &args),
        Command::Udr(args) => match &args.command {
            Some(UdrCommand::Import(import)) => udr_import::run(import),
            None => nf::run(nf::Nf::Udr, &args.nf),
        },
        Command::Bsf(args) => match &args.command {
            Some(BsfCommand::Preload(preload)) => bsf_preload::run(preload),
            None => nf::run(nf::Nf::Bsf, &args.nf),
        },
        Command::Pcf(args) => nf::run(nf::Nf::Pcf, &args),
        Command::Dd(args) => nf::run(nf::Nf::Dd, &args),
        Command::Backup(args) => backup::run(&args),
        Command::Restore(args) => restore::run(&args),
        Command::Policy(args) => policy_cli::run(&args.command),
        Command::Cert(args) => cert::run(&args),
        Command::Console(args) => console_cli::run(&args.command),
        Command::Bench(args) => bench::run(*args),
    }
}
