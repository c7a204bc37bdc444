//! Helpers the Data Director's tests share.
#![allow(dead_code)]

pub mod consumers;

use std::path::Path;

/// The Data Director's `[store]` for a test's state directory: the SQLite file `dd.db` in it, or
/// the MariaDB database it names (`testkit::backends::state_dir` within `mariadb::` tests).
pub fn store_config(dir: &Path) -> store::SqliteConfig {
    let sqlite = store::SqliteConfig { readers: 1, ..store::SqliteConfig::new(dir.join("dd.db")) };
    match testkit::backends::mysql_url(dir) {
        Some(url) => on_mysql(sqlite, &url),
        None => sqlite,
    }
}

/// `config` on the MySQL database at `url` (the log stays beside `config.path`).
pub fn on_mysql(config: store::SqliteConfig, url: &str) -> store::SqliteConfig {
    store::SqliteConfig {
        backend: store::Backend::Mysql,
        url: vec![url.to_owned()],
        pool_size: 4,
        ..config
    }
}

/// [`testkit::on_both_backends!`] on a two-worker runtime, as the Data Director's end-to-end
/// tests run (feeds, aggregation and the ingest API at once).
#[macro_export]
macro_rules! on_both_backends_mt {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name().await;
                }
            )*
        }
        mod mariadb {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    if testkit::backends::use_mariadb() {
                        super::$name().await;
                    }
                }
            )*
        }
    };
}
