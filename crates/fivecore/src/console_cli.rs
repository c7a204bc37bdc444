//! `fivecore console hash-password`, and the console beside an NF run alone.

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::process::ExitCode;

use crate::cli::ConsoleCommand;

pub fn run(command: &ConsoleCommand) -> ExitCode {
    match command {
        ConsoleCommand::HashPassword => {
            let mut line = String::new();
            if let Err(e) = std::io::stdin().lock().read_line(&mut line) {
                eprintln!("fivecore console hash-password: cannot read standard input: {e}");
                return ExitCode::from(1);
            }
            let password = line.trim_end_matches(['\n', '\r']);
            if password.is_empty() {
                eprintln!("fivecore console hash-password: give the password on standard input");
                return ExitCode::from(1);
            }
            match console::password::hash(password) {
                Ok(h) => {
                    let _ = writeln!(std::io::stdout(), "{h}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("fivecore console hash-password: {e}");
                    ExitCode::from(1)
                }
            }
        }
    }
}

/// The console's API root for an NF bound to `addr` (loopback when bound to every address).
pub fn nf_url(sbi: &sbi::ServerConfig, addr: SocketAddr) -> String {
    let scheme = if sbi.tls.is_some() { "https" } else { "http" };
    format!("{scheme}://{}", crate::up::reachable(addr))
}

/// The console of a process whose `[console]` enables it, bound before anything is announced;
/// `None` when it is off. With no users configured, `generate_admin` creates `admin` with a
/// random password, logged once (`up`); otherwise nobody could log in, which is refused.
pub async fn bind(
    config: &console::ConsoleConfig,
    listen: SocketAddr,
    generate_admin: bool,
) -> Result<console::Console, String> {
    let mut config = config.clone();
    if generate_admin {
        let generated = tokio::task::spawn_blocking(move || {
            let pw = console::ensure_admin(&mut config).map_err(|e| e.to_string())?;
            Ok::<_, String>((config, pw))
        })
        .await
        .map_err(|e| e.to_string())??;
        config = generated.0;
        if let Some(pw) = generated.1 {
            tracing::warn!(
                user = "admin",
                password = %pw,
                "console: no [[console.users]] configured: created user admin with this \
                 password (shown only now; configure users, docs/console.md)"
            );
        }
    } else if config.users.is_empty() {
        return Err("console: [console] enabled without [[console.users]]: nobody could log in \
                    (docs/console.md)"
            .into());
    }
    console::Console::bind(&config, listen).await.map_err(|e| e.to_string())
}
