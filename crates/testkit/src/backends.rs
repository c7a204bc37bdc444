//! Running an NF's tests on both store backends: SQLite and the shared MariaDB server
//! ([`crate::mariadb::server`]).
//!
//! A test is an `async fn()` of its file that starts its NFs on [`state_dir`]s;
//! [`on_both_backends!`](crate::on_both_backends) runs it as `sqlite::<name>` and
//! `mariadb::<name>`. The second one calls [`use_mariadb`] first, so the test's state
//! directories then name a new database of the server ([`mysql_url`]) instead of holding the
//! SQLite file: an NF restarted on the same directory finds its state on either backend, and
//! two NFs started on one directory share one database.

use std::cell::Cell;
use std::path::Path;

thread_local! {
    /// Whether this test thread's NFs keep their state on MariaDB (set by [`use_mariadb`]).
    static MARIADB: Cell<bool> = const { Cell::new(false) };
}

/// The file of a [`state_dir`] naming its database.
const URL_FILE: &str = "mysql-url";

/// From now on, this test thread's [`state_dir`]s name a new database of the shared MariaDB
/// server (started by the first caller). False when MariaDB is not installed and not required:
/// the test is then skipped.
pub fn use_mariadb() -> bool {
    let on = crate::mariadb::server().is_some();
    MARIADB.with(|m| m.set(on));
    on
}

/// Where a test's NF keeps its state: a temporary directory for the SQLite file, which on
/// MariaDB (see [`use_mariadb`]) holds the URL of a new database (`prefix` names it) instead.
pub fn state_dir(prefix: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    if MARIADB.with(|m| m.get()) {
        let server = crate::mariadb::server().expect("MariaDB started");
        std::fs::write(dir.path().join(URL_FILE), server.database(prefix)).unwrap();
    }
    dir
}

/// The database URL a [`state_dir`] holds, or `None` for a SQLite one.
pub fn mysql_url(dir: &Path) -> Option<String> {
    std::fs::read_to_string(dir.join(URL_FILE)).ok()
}

/// Runs each named test (an `async fn()` of the file) on both store backends, as
/// `sqlite::<name>` and `mariadb::<name>` (skipped without MariaDB, see
/// [`use_mariadb`](crate::backends::use_mariadb)).
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name().await;
                }
            )*
        }
        mod mariadb {
            $(
                #[tokio::test]
                async fn $name() {
                    if $crate::backends::use_mariadb() {
                        super::$name().await;
                    }
                }
            )*
        }
    };
}
