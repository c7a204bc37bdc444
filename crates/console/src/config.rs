//! `[console]`: where the console listens, who may log in, and which NFs it talks to.

use std::net::SocketAddr;

use serde::Deserialize;

/// The console's section of the configuration file (docs/console.md).
#[derive(Debug, Clone, Deserialize, Default, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct ConsoleConfig {
    /// Serve the console. Unset: on in `fivecore up`, off for an NF run alone.
    pub enabled: Option<bool>,
    /// Its own HTTP port. Unset: 127.0.0.1:7010 (`up`: the NRF's port + 10).
    pub listen: Option<SocketAddr>,
    /// A session ends after this many seconds without a request. Default 1800.
    pub session_idle_secs: Option<u64>,
    /// A session ends this long after its log-in, active or not. Default 43200 (12 h).
    pub session_max_secs: Option<u64>,
    /// Who may log in. `up` with none creates `admin` with a random password, logged once.
    pub users: Vec<UserConfig>,
    /// The NFs' API roots (`http://host:port`). `up` fills in the NFs it started; an NF run
    /// alone fills in itself.
    pub nfs: NfUrls,
    /// The SBI client the console calls the NFs with.
    pub client: Option<sbi::client::ClientConfig>,
}

/// One account: its name, an argon2 PHC hash of its password (`fivecore console
/// hash-password`), and its role.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    pub name: String,
    pub password_hash: String,
    pub role: Role,
}

/// What a logged-in user may do: read-only users read, admins also change.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    ReadOnly,
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::ReadOnly => "read-only",
            Role::Admin => "admin",
        }
    }
}

/// API roots of the NFs the console shows; an NF left out is shown as not configured.
#[derive(Debug, Clone, Deserialize, Default, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct NfUrls {
    pub nrf: Option<String>,
    pub udr: Option<String>,
    pub bsf: Option<String>,
    pub pcf: Option<String>,
    pub dd: Option<String>,
}

pub const DEFAULT_LISTEN: &str = "127.0.0.1:7010";
pub const DEFAULT_IDLE_SECS: u64 = 1800;
pub const DEFAULT_MAX_SECS: u64 = 43_200;

impl ConsoleConfig {
    pub fn listen_or_default(&self) -> SocketAddr {
        self.listen.unwrap_or_else(|| DEFAULT_LISTEN.parse().expect("a valid constant address"))
    }
}
