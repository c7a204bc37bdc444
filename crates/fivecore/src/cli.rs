//! Command line: `fivecore <up|nrf|udr|bsf|pcf|dd|backup|restore|policy|cert|bench|version>`.

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
    Udr(UdrArgs),
    /// Binding Support Function (TS 29.521) and the Diameter Rx proxy.
    Bsf(BsfArgs),
    /// Policy Control Function and the 4G PCRF (Gx, Rx, Sy, Sd).
    Pcf(NfArgs),
    /// Data Director: SBI message copies into xDRs and feeds.
    Dd(NfArgs),
    /// Online backup of the NFs' embedded stores while they run (docs/backup.md).
    Backup(BackupArgs),
    /// Restore the NFs' stores from a backup, while no NF runs on them (docs/backup.md).
    Restore(RestoreArgs),
    /// Policy projects: check, test, dry-run and replay before deploying (docs/policy.md).
    Policy(PolicyArgs),
    /// The web console's tools (docs/console.md).
    Console(ConsoleArgs),
    /// A lab PKI for mutual TLS: a CA and NF certificates (docs/security.md).
    Cert(crate::cert::CertArgs),
    /// Replay the reference call models against fivecore and report side by side.
    Bench(Box<BenchArgs>),
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
    /// SBI address to listen on, overriding the configuration (default: 127.0.0.1 and the NF's
    /// port of `fivecore up`: NRF 7000, UDR 7001, BSF 7002; port 0: one chosen by the system).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Directory of the embedded store (the NF's database inside: nrf.db, udr.db, bsf.db, the
    /// files `fivecore up` uses).
    #[arg(long, value_name = "DIR", default_value = crate::nf::DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
    /// Log line format.
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Check the configuration as this NF would read it at start (every setting it uses, its
    /// store backend), say what is wrong, and exit (0: valid, 1: not) without serving.
    #[arg(long)]
    pub check_config: bool,
}

#[derive(Args, Debug, Clone)]
pub struct UpArgs {
    /// TOML configuration file (see config/fivecore.toml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Directory of the embedded store (one database per NF inside it).
    #[arg(long, value_name = "DIR", default_value = crate::nf::DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
    /// The NRF's SBI port; the UDR listens on the next one, the BSF on the one after (7000,
    /// 7001, 7002 by default). 0: every SBI port chosen by the system (the table printed once
    /// every NF is bound says which). The Diameter ports are `[bsf.rx] listen` and
    /// `[udr.sh] listen` of --config.
    #[arg(long, value_name = "PORT", default_value_t = crate::nf::ALL[0].sbi_port,
        value_parser = clap::value_parser!(u16).range(0..=65531))]
    pub port_base: u16,
    /// Log line format.
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Check the configuration as every NF of `up` would read it, say what is wrong, and exit
    /// (0: valid, 1: not) without serving.
    #[arg(long)]
    pub check_config: bool,
}

/// `fivecore udr`: serves the UDR (the NF flags), or runs one of its tools.
#[derive(Args, Debug, Clone)]
#[command(args_conflicts_with_subcommands = true)]
pub struct UdrArgs {
    #[command(subcommand)]
    pub command: Option<UdrCommand>,
    #[command(flatten)]
    pub nf: NfArgs,
}

#[derive(Subcommand, Debug, Clone)]
pub enum UdrCommand {
    /// Bulk-load SLF or EIR entries (CSV or JSON lines), policy data, Sh profiles or policy data
    /// subscriptions (JSON lines) into the UDR's store (docs/udr.md);
    /// a UDR may be serving from it meanwhile.
    Import(ImportArgs),
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImportKind {
    /// SLF entries: subscriber identities and their NF groups.
    Slf,
    /// 5G-EIR entries: IMEIs and IMEI ranges with their status.
    Eir,
    /// Policy data: one UE's PolicyDataProfile a line, `{"ueId": …, "amData": …, …}` (JSON lines).
    Policy,
    /// Sh profiles: one a line, what SOAP `CreateShProfile` takes, `{"publicIdentities": […],
    /// "msisdns": […], "imsUserState": "REGISTERED", …}` (JSON lines).
    Sh,
    /// Policy data subscriptions: `{"subsId": …, "subscription": {PolicyDataSubscription}}` a
    /// line (JSON lines); a UDR started afterwards loads them like its own.
    PolicySubscriptions,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImportFormat {
    Csv,
    Jsonl,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnBadRow {
    /// Stop at the first bad row (the rows before it stay imported).
    Stop,
    /// Report the bad row and go on.
    Skip,
}

#[derive(Args, Debug, Clone)]
pub struct ImportArgs {
    /// What the rows are.
    #[arg(long, value_enum)]
    pub kind: ImportKind,
    /// Row format; by default taken from FILE's extension (.csv; .jsonl or .ndjson).
    #[arg(long, value_enum)]
    pub format: Option<ImportFormat>,
    /// TOML configuration file: its [store] settings apply.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Directory of the UDR's store (`udr.db` inside), as given to `fivecore udr --data-dir`
    /// [default: fivecore-data, as for `fivecore udr`].
    #[arg(long, value_name = "DIR", conflicts_with = "db")]
    pub data_dir: Option<PathBuf>,
    /// The database file itself.
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// What a bad row does.
    #[arg(long, value_enum, default_value = "stop")]
    pub on_bad_row: OnBadRow,
    /// Rows per transaction.
    #[arg(long, value_name = "N", default_value_t = udr::import::DEFAULT_BATCH_ROWS,
        value_parser = clap::value_parser!(usize))]
    pub batch: usize,
    /// The file to import; `-` reads standard input.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
}

/// `fivecore bsf`: serves the BSF (the NF flags), or runs one of its tools.
#[derive(Args, Debug, Clone)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BsfArgs {
    #[command(subcommand)]
    pub command: Option<BsfCommand>,
    #[command(flatten)]
    pub nf: NfArgs,
}

#[derive(Subcommand, Debug, Clone)]
pub enum BsfCommand {
    /// Bulk-load PCF bindings (JSON lines) into the BSF's store (docs/bsf.md); no BSF may be
    /// serving from it meanwhile.
    Preload(PreloadArgs),
}

#[derive(Args, Debug, Clone)]
pub struct PreloadArgs {
    /// TOML configuration file: its [store] settings apply.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Directory of the BSF's store (`bsf.db` inside), as given to `fivecore bsf --data-dir`
    /// [default: fivecore-data, as for `fivecore bsf`].
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// JSON lines, one binding each: `{"bindingId": …, "pcfBinding": {…}}` or a bare
    /// PcfBinding; `-` reads standard input.
    #[arg(long, value_name = "FILE", default_value = "-")]
    pub input: PathBuf,
    /// What a bad line does.
    #[arg(long, value_enum, default_value = "stop")]
    pub on_bad_row: OnBadRow,
    /// Progress on stderr even when it is not a terminal.
    #[arg(long)]
    pub progress: bool,
}

/// The NFs whose stores `backup` and `restore` take.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreNf {
    Nrf,
    Udr,
    Bsf,
    Pcf,
    Dd,
}

#[derive(Args, Debug, Clone)]
pub struct BackupArgs {
    /// TOML configuration file: its [store] settings say where each store is (and whether it
    /// is on MySQL, which this command does not back up).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The NFs' data directory, as given to `fivecore up` or `fivecore <nf> --data-dir`.
    #[arg(long, value_name = "DIR", default_value = crate::nf::DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
    /// The backup directory to make (it must not exist, or be empty).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Only these NFs' stores (comma-separated); default: every store found in the data directory.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub nf: Vec<StoreNf>,
    /// Database pages copied per step (4 KiB each).
    #[arg(long, value_name = "N", default_value_t = store::sqlite::backup::Pace::default().pages)]
    pub step_pages: u32,
    /// Pause between two steps, in milliseconds: the disk and CPU left to the running NF.
    #[arg(long, value_name = "MS",
        default_value_t = store::sqlite::backup::Pace::default().pause.as_millis() as u64)]
    pub pause_ms: u64,
}

#[derive(Args, Debug, Clone)]
pub struct RestoreArgs {
    /// The backup directory (`fivecore backup --out`).
    #[arg(long, value_name = "DIR")]
    pub from: PathBuf,
    /// TOML configuration file: its [store] settings say where each store goes.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The data directory the NFs will run on (created when missing).
    #[arg(long, value_name = "DIR", default_value = crate::nf::DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
    /// Only these NFs' stores (comma-separated); default: every store of the backup.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub nf: Vec<StoreNf>,
}

#[derive(Args, Debug, Clone)]
pub struct ConsoleArgs {
    #[command(subcommand)]
    pub command: ConsoleCommand,
}

#[derive(Subcommand, Debug, Clone)]
pub enum ConsoleCommand {
    /// Reads a password (the first line of standard input) and prints its argon2id PHC string,
    /// for `password_hash` of a `[[console.users]]` entry.
    HashPassword,
}

/// Flags of `fivecore bench` (defined with the kit, in `crates/bench`).
pub use bench::BenchArgs;

#[derive(Args, Debug, Clone)]
pub struct PolicyArgs {
    #[command(subcommand)]
    pub command: PolicyCommand,
}

#[derive(Subcommand, Debug, Clone)]
pub enum PolicyCommand {
    /// Parse and check a project; every error names its file and line. Exit 1 on errors.
    Check {
        /// The project directory (project.toml inside).
        dir: PathBuf,
    },
    /// Run the project's own test cases (tests/*.toml): pass or fail per case, exit 1 on a failure.
    Test { dir: PathBuf },
    /// Dry run of one request: the decision, and which rules, table rows and scripts fired.
    Eval {
        dir: PathBuf,
        /// The request, JSON (or TOML by extension).
        #[arg(long, value_name = "FILE")]
        request: PathBuf,
        /// Subscriber data, JSON or TOML.
        #[arg(long, value_name = "FILE")]
        subscriber: Option<PathBuf>,
        /// Subscriber state variables, a JSON or TOML object.
        #[arg(long, value_name = "FILE")]
        ssv: Option<PathBuf>,
        /// Accumulated usage per monitoring key (`{"monthly": {"volUsage": 1000}}`), a JSON or
        /// TOML object; without it the evaluation monitors no usage (`usage exists` is false).
        #[arg(long, value_name = "FILE")]
        usage: Option<PathBuf>,
        /// SM, AM, UE, PA, GX or SY.
        #[arg(long, default_value = "SM")]
        service: String,
        /// The requesting node.
        #[arg(long, default_value = "")]
        node: String,
        /// The time to evaluate at (RFC 3339; default: now).
        #[arg(long)]
        now: Option<String>,
    },
    /// Evaluate recorded requests (JSON lines) under two versions; report every decision that
    /// differs. Exit 1 when any differs.
    Replay {
        old: PathBuf,
        new: PathBuf,
        #[arg(long, value_name = "FILE")]
        sessions: PathBuf,
    },
}
