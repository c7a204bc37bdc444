//! The TOML configuration shared by every subcommand. Each NF reads its own section; settings
//! common to all (identity, logging, the SBI server and client, the store) sit at the top.
//! `config/fivecore.toml` is the annotated example and is parsed by a test.

use std::path::{Path, PathBuf};

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// NF instance id (a UUID per TS 29.510); generated at start when absent.
    pub instance_id: Option<String>,
    /// The SBI server of the NF (`listen`, TLS, HTTP/2, limits, overload).
    pub sbi: sbi::ServerConfig,
    /// The SBI client the NF uses to call others.
    pub client: sbi::client::ClientConfig,
    /// The embedded store (its `path` is placed under `--data-dir` when that flag is given).
    pub store: store::SqliteConfig,
    /// The NRF (docs/nrf.md).
    pub nrf: nrf::NrfConfig,
    /// The BSF (docs/bsf.md).
    pub bsf: bsf::BsfConfig,
    /// The UDR (docs/udr.md).
    pub udr: udr::UdrConfig,
    /// The PCF (docs/pcf.md).
    pub pcf: pcf::PcfConfig,
    /// The Data Director (docs/dd.md).
    pub dd: dd::DdConfig,
    /// The web console (docs/console.md).
    pub console: console::ConsoleConfig,
    /// Traces: trace context on SBI requests, spans exported by OTLP when configured
    /// (docs/telemetry.md). Every NF reads it, under its own `service.name`.
    pub telemetry: telemetry::TelemetryConfig,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("invalid configuration {}: {source}", path.display())]
    Parse { path: PathBuf, source: toml::de::Error },
}

impl Config {
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Read { path: path.into(), source })?;
        Self::parse(&text).map_err(|source| ConfigError::Parse { path: path.into(), source })
    }

    pub fn parse(text: &str) -> Result<Config, toml::de::Error> {
        toml::from_str(text)
    }
}

/// What `--check-config` checks for `nfs`: each NF's own section as the NF checks it at start,
/// its message copy, the SBI server's rate limit, and the store backend (every NF runs on
/// either). One message per fault, naming its section.
pub fn check(config: &Config, nfs: &[crate::nf::Nf]) -> Vec<String> {
    use crate::nf::Nf;
    let mut faults = Vec::new();
    if let Err(e) = config.sbi.rate_limit.validate() {
        faults.push(format!("[sbi.rate_limit]: {e}"));
    }
    for &nf in nfs {
        let name = crate::nf::info(nf).name;
        let (own, copy) = match nf {
            Nf::Nrf => (config.nrf.validate(), Some(&config.nrf.copy)),
            Nf::Bsf => (config.bsf.validate(), Some(&config.bsf.copy)),
            Nf::Udr => (config.udr.validate(), Some(&config.udr.copy)),
            Nf::Pcf => (config.pcf.validate(), Some(&config.pcf.copy)),
            Nf::Dd => (config.dd.validate(), None),
        };
        if let Err(e) = own {
            faults.push(format!("the {name}: {e}"));
        }
        if let Some(Err(bad)) = copy.map(|c| c.validate()) {
            let section = format!("{}.copy", name.to_ascii_lowercase());
            faults.push(format!("the {name}: {}", dd_client::config::describe(&section, &bad)));
        }
        if let Err(e) = config.store.check(true) {
            faults.push(format!("the {name}: [store] {e}"));
        }
    }
    faults
}

/// Prints the outcome of [`check`] (faults on stderr, one line on stdout when valid).
pub fn report_check(config: &Config, nfs: &[crate::nf::Nf]) -> std::process::ExitCode {
    use std::io::Write;
    let faults = check(config, nfs);
    for f in &faults {
        eprintln!("fivecore: invalid configuration: {f}");
    }
    if !faults.is_empty() {
        return std::process::ExitCode::from(1);
    }
    let names: Vec<&str> = nfs.iter().map(|n| crate::nf::info(*n).name).collect();
    let _ = writeln!(std::io::stdout(), "configuration valid for the {}", names.join(", "));
    std::process::ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn example_config_parses() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/fivecore.toml");
        let cfg = Config::load(&path).unwrap();
        assert_eq!(cfg.sbi.overload.max_in_flight, 4096);
        assert_eq!(cfg.sbi.overload, sbi::layer::overload::OverloadConfig::default());
        assert_eq!(cfg.client, sbi::client::ClientConfig::default());
        assert_eq!(cfg.store.max_batch, store::SqliteConfig::default().max_batch);
        assert_eq!(cfg.nrf, nrf::NrfConfig::default());
        assert_eq!(cfg.bsf, bsf::BsfConfig::default());
        assert_eq!(cfg.udr, udr::UdrConfig::default());
        assert_eq!(cfg.pcf.copy, pcf::PcfConfig::default().copy);
        assert_eq!(cfg.console.session_idle_secs, Some(console::config::DEFAULT_IDLE_SECS));
        assert_eq!(cfg.console.session_max_secs, Some(console::config::DEFAULT_MAX_SECS));
        assert!(cfg.console.users.is_empty() && cfg.console.enabled.is_none());
        assert_eq!(cfg.telemetry, telemetry::TelemetryConfig::default());
    }

    #[test]
    fn console_users_and_roles_parse() {
        let cfg = Config::parse(
            "[console]\nenabled = true\nlisten = \"127.0.0.1:7999\"\n[[console.users]]\n\
             name = \"v\"\npassword_hash = \"$argon2id$x\"\nrole = \"read-only\"\n\
             [console.nfs]\nbsf = \"http://10.0.0.2:7002\"",
        )
        .unwrap();
        assert_eq!(cfg.console.users[0].role, console::Role::ReadOnly);
        assert_eq!(cfg.console.nfs.bsf.as_deref(), Some("http://10.0.0.2:7002"));
        assert_eq!(crate::nf::up_console_listen(&cfg, 7000).port(), 7999);
        let default = Config::parse("").unwrap();
        assert_eq!(crate::nf::up_console_listen(&default, 7000).port(), 7010);
        assert_eq!(crate::nf::up_console_listen(&default, 17000).port(), 17010);
        assert_eq!(crate::nf::up_console_listen(&default, 0).port(), 0);
        assert!(Config::parse(
            "[console]\n[[console.users]]\nname = \"x\"\npassword_hash = \"h\"\nrole = \"root\""
        )
        .is_err());
    }

    #[test]
    fn the_bsf_checkpoints_off_its_writer_unless_told_otherwise() {
        let dir = Some(Path::new("/var/lib/fivecore"));
        let cfg = Config::parse("").unwrap();
        assert_eq!(crate::nf::bsf_run_config(&cfg, dir).store.background_checkpoint, Some(true));
        assert!(!cfg.store.background_checkpoint());
        let off = Config::parse("[store]\nbackground_checkpoint = false").unwrap();
        assert_eq!(crate::nf::bsf_run_config(&off, dir).store.background_checkpoint, Some(false));
    }

    #[test]
    fn the_bsf_commits_without_delay_unless_told_otherwise() {
        let dir = Some(Path::new("/var/lib/fivecore"));
        let cfg = Config::parse("").unwrap();
        assert_eq!(crate::nf::bsf_run_config(&cfg, dir).store.commit_delay(), Duration::ZERO);
        assert_eq!(cfg.store.commit_delay(), Duration::from_millis(1));
        let set = Config::parse("[store]\ncommit_delay_us = 500").unwrap();
        assert_eq!(
            crate::nf::bsf_run_config(&set, dir).store.commit_delay(),
            Duration::from_micros(500)
        );
    }

    #[test]
    fn an_nf_alone_and_up_share_the_default_ports_and_database_files() {
        use crate::nf::{self, Nf};
        let cfg = Config::parse("").unwrap();
        let dir = Path::new(nf::DEFAULT_DATA_DIR);
        let alone = [
            (
                nf::nrf_run_config(&cfg, Some(dir)).sbi.listen,
                nf::nrf_run_config(&cfg, Some(dir)).store.path,
            ),
            (
                nf::udr_run_config(&cfg, Some(dir)).sbi.listen,
                nf::udr_run_config(&cfg, Some(dir)).store.path,
            ),
            (
                nf::bsf_run_config(&cfg, Some(dir)).sbi.listen,
                nf::bsf_run_config(&cfg, Some(dir)).store.path,
            ),
            (
                nf::pcf_run_config(&cfg, Some(dir)).sbi.listen,
                nf::pcf_run_config(&cfg, Some(dir)).store.path,
            ),
        ];
        let expected = [(7000, "nrf.db"), (7001, "udr.db"), (7002, "bsf.db"), (7003, "pcf.db")];
        for (n, ((listen, path), (port, db))) in
            [Nf::Nrf, Nf::Udr, Nf::Bsf, Nf::Pcf].into_iter().zip(alone.into_iter().zip(expected))
        {
            assert_eq!(listen.to_string(), format!("127.0.0.1:{port}"));
            assert_eq!(path, dir.join(db));
            // `up` (default --port-base) puts the NF on the same address.
            assert_eq!(nf::up_listen(&cfg, n, nf::ALL[0].sbi_port), listen);
            assert_eq!(nf::info(n).db_file, db);
        }
        assert_eq!(nf::up_listen(&cfg, Nf::Bsf, 17000).port(), 17002);
        assert_eq!(nf::up_listen(&cfg, Nf::Udr, 0).port(), 0);
        // A configured port or store file still wins for an NF alone.
        let set =
            Config::parse("[sbi]\nlisten = \"0.0.0.0:9000\"\n[store]\npath = \"x.db\"").unwrap();
        let run = nf::nrf_run_config(&set, None);
        assert_eq!((run.sbi.listen.port(), run.store.path), (9000, "x.db".into()));
        assert_eq!(nf::up_listen(&set, Nf::Nrf, 7000).to_string(), "0.0.0.0:7000");
    }

    #[test]
    fn check_config_names_each_fault_and_takes_mysql_for_every_nf() {
        use crate::nf::Nf;
        let mysql = Config::parse(
            "[store]\nbackend = \"mysql\"\nurl = \"mysql://u:p@127.0.0.1:3306/fivecore\"",
        )
        .unwrap();
        assert!(check(&mysql, &crate::nf::ALL.map(|i| i.nf)).is_empty());
        let no_url = Config::parse("[store]\nbackend = \"mysql\"").unwrap();
        assert!(check(&no_url, &[Nf::Bsf])[0].contains("url"));
        assert!(check(&Config::default(), &crate::nf::ALL.map(|i| i.nf)).is_empty());
        let copy = Config::parse("[bsf.copy]\nenabled = true\nbatch_size = 0").unwrap();
        let faults = check(&copy, &[Nf::Bsf]);
        assert!(faults.len() == 1 && faults[0].contains("batch_size"), "{faults:?}");
    }

    #[test]
    fn the_telemetry_section_reaches_every_nf() {
        let cfg = Config::parse(
            "[telemetry]\nsample_ratio = 0.5\n[telemetry.otlp]\nendpoint = \"http://c:4318\"",
        )
        .unwrap();
        let dir = Some(Path::new("/var/lib/fivecore"));
        for sbi in [
            crate::nf::nrf_run_config(&cfg, dir).sbi,
            crate::nf::udr_run_config(&cfg, dir).sbi,
            crate::nf::bsf_run_config(&cfg, dir).sbi,
            crate::nf::pcf_run_config(&cfg, dir).sbi,
            crate::nf::dd_run_config(&cfg, dir).sbi,
        ] {
            assert_eq!(sbi.telemetry, cfg.telemetry);
            assert_eq!(
                sbi.telemetry.otlp.as_ref().unwrap().traces_url(),
                "http://c:4318/v1/traces"
            );
        }
        assert!(Config::parse("[telemetry.otlp]\nendpoint = \"http://c\"\nqueue = 1").is_err());
        // Only the top-level section: the SBI server's own table has no telemetry.
        assert!(Config::parse("[sbi.telemetry]\nsample_ratio = 1.0").is_err());
    }

    #[test]
    fn unknown_settings_are_rejected() {
        assert!(Config::parse("[sbi]\nlisten_addr = \"127.0.0.1:1\"").is_err());
        assert!(Config::parse("[nrf]\nheartbeat = 3").is_err());
        assert!(Config::parse("[bsf]\non_existing = \"reject\"").is_err());
        assert!(Config::parse("[udr]\nslf_enabled = true").is_err());
    }
}
