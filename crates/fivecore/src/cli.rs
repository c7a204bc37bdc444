//! Command line: `fivecore <up|nrf|udr|bsf|pcf|dd|bench|version>`.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Parser, Debug)]
#[command(
    name = "fivecore",
    version,
    about = "An open, fast 5G core control plane: NRF, UDR, BSF, PCF/PCRF and Data Director"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run every available NF in one process on its default port, with the embedded store.
    Up(UpArgs),
    /// Network Repository Function (TS 29.510).
    Nrf(NfArgs),
    /// Unified Data Repository: policy data, SLF, 5G-EIR, provisioning, Diameter Sh.
    Udr(NfArgs),
    /// Binding Support Function (TS 29.521) and the Diameter Rx proxy.
    Bsf(NfArgs),
    /// Policy Control Function and the 4G PCRF (Gx, Rx, Sy, Sd).
    Pcf(NfArgs),
    /// Data Director: SBI message copies into xDRs and feeds.
    Dd(NfArgs),
    /// Replay the reference call models against fivecore and report side by side.
    Bench(BenchArgs),
    /// Print the version.
    Version,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// Flags every NF subcommand takes.
#[derive(Args, Debug, Clone)]
pub struct NfArgs {
    /// TOML configuration file (see config/fivecore.toml for every setting).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// SBI address to listen on, overriding the configuration.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Directory of the embedded store.
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Log line format.
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
}

#[derive(Args, Debug, Clone)]
pub struct UpArgs {
    /// TOML configuration file (see config/fivecore.toml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Directory of the embedded store (one database per NF inside it).
    #[arg(long, value_name = "DIR", default_value = "fivecore-data")]
    pub data_dir: PathBuf,
    /// Log line format.
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
}

/// Flags of `fivecore bench` (defined with the kit, in `crates/bench`).
pub use bench::BenchArgs;
