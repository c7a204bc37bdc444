//! The network functions and whether each has landed in this build.

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

/// What `fivecore up` prints and starts, and the ports of DESIGN.md.
pub struct NfInfo {
    pub nf: Nf,
    pub name: &'static str,
    pub sbi_port: u16,
    pub diameter: Option<(&'static str, u16)>,
    /// The issue that delivers it, while it has not landed (None: not filed yet).
    pub issue: Option<u32>,
    pub available: bool,
}

pub const ALL: [NfInfo; 5] = [
    NfInfo {
        nf: Nf::Nrf,
        name: "NRF",
        sbi_port: 7000,
        diameter: None,
        issue: Some(3),
        available: false,
    },
    NfInfo {
        nf: Nf::Udr,
        name: "UDR",
        sbi_port: 7001,
        diameter: Some(("Sh", 3870)),
        issue: Some(7),
        available: false,
    },
    NfInfo {
        nf: Nf::Bsf,
        name: "BSF",
        sbi_port: 7002,
        diameter: Some(("Rx proxy", 3869)),
        issue: Some(6),
        available: false,
    },
    NfInfo {
        nf: Nf::Pcf,
        name: "PCF",
        sbi_port: 7003,
        diameter: Some(("Gx/Rx/Sy/Sd", 3868)),
        issue: None,
        available: false,
    },
    NfInfo {
        nf: Nf::Dd,
        name: "Data Director",
        sbi_port: 7004,
        diameter: None,
        issue: None,
        available: false,
    },
];

pub fn info(nf: Nf) -> &'static NfInfo {
    // ALL lists every variant.
    ALL.iter().find(|i| i.nf == nf).unwrap_or(&ALL[0])
}

pub fn run(nf: Nf, args: &NfArgs) -> ExitCode {
    crate::logging::init(args.log_format);
    if let Some(path) = &args.config {
        // A bad configuration is reported even before the NF lands, so files can be prepared.
        if let Err(e) = crate::config::Config::load(path) {
            eprintln!("fivecore: {e}");
            return ExitCode::from(1);
        }
    }
    let info = info(nf);
    not_landed(&format!("the {}", info.name), info.issue)
}

pub fn not_landed(what: &str, issue: Option<u32>) -> ExitCode {
    let issue = issue.map_or("no issue filed yet".to_owned(), |n| format!("issue #{n}"));
    eprintln!("fivecore: {what} has not landed in this build yet ({issue}); nothing is served.");
    ExitCode::from(NOT_LANDED)
}
