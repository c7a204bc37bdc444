//! Configuration of the store: the embedded SQLite engine (the default) and the MySQL-protocol
//! backend (`backend = "mysql"`).

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::error::{Error, Result};

/// Settings of the embedded SQLite store (`[store]` in an NF's config file).
///
/// Every field has a default, so an empty table is a valid configuration.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SqliteConfig {
    /// Path of the database file. The `-wal` and `-shm` files live next to
    /// it, so its directory must be writable. Default: `fivecore.db`.
    pub path: PathBuf,

    /// When a commit is considered durable. Default: `full`.
    ///
    /// - `full`: the WAL is fsynced at every commit. An acknowledged write
    ///   survives a process kill, an OS crash and a power loss.
    /// - `normal`: the WAL is fsynced only at checkpoints. An acknowledged
    ///   write survives a process kill (`kill -9`), because it already sits in
    ///   the OS page cache, but the last commits may be lost on power loss or
    ///   an OS crash. The database itself never corrupts.
    pub synchronous: Synchronous,

    /// How long a connection waits for a lock held by another process (a
    /// backup tool, the `sqlite3` shell) before failing, in milliseconds.
    /// Default: 5000.
    pub busy_timeout_ms: u64,

    /// The writer's page cache, in MiB. Default: 16. SQLite keeps every connection's cache
    /// in one process-wide pool bounded by the sum of their sizes, and a connection at its own
    /// size takes the pool's least recently used page: a busy writer can grow past this on the
    /// budget of readers and idle stores (docs/store.md, "Memory").
    pub cache_size_mib: u64,

    /// Each reader's page cache, in MiB; the total is `readers *
    /// reader_cache_size_mib`. A reader's cache is emptied whenever it starts
    /// a read after another commit (under a steady write load, before almost
    /// every read), at a cost that grows with what it held, so a write-heavy
    /// NF may want it smaller than the writer's. Default: 16.
    pub reader_cache_size_mib: u64,

    /// Size of the memory map used for reads, in MiB (0 disables it). The
    /// map is shared by all connections through the OS page cache.
    /// Default: 256.
    pub mmap_size_mib: u64,

    /// The most memory SQLite may hold in this process, every store together, in MiB: beyond
    /// it the page caches give back their least recently used pages instead of growing (SQLite's
    /// soft heap limit). Process-wide: in `fivecore up` the one `[store]` section sets it for
    /// every NF. 0: no limit but the page-cache pool's (the sum of every connection's cache
    /// size, docs/store.md "Memory"). Default: 128.
    pub memory_limit_mib: u64,

    /// Number of reader threads, each with its own read-only connection.
    /// Default: 4.
    pub readers: usize,

    /// Largest number of write jobs committed in one transaction (group
    /// commit). Default: 512.
    pub max_batch: usize,

    /// Under concurrent load (the previous batch had more than one write),
    /// how long after a commit the writer waits before it commits a partial
    /// batch, in microseconds (0: never waits). Writes arriving meanwhile
    /// join the batch, so one fsync and one WAL append are shared by more
    /// writes and readers rebuild their page caches after fewer commits. A
    /// write reaching a store that has not committed for this long, or a lone
    /// caller's next write, commits at once. Unset: the NF's default (see
    /// [`SqliteConfig::commit_delay()`]): 0 for the BSF, whose writes are
    /// its latency-critical path and whose lookups do not go through the
    /// readers, 1000 for the others.
    pub commit_delay_us: Option<u64>,

    /// Copy WAL frames into the database file on a checkpointer thread of
    /// its own, at low priority, instead of inside the commit that fills the
    /// WAL (SQLite's way, which holds every queued write until the database
    /// file is written and synced). Unset: the NF's default (see
    /// [`SqliteConfig::background_checkpoint()`]): on for the BSF, whose core has idle time
    /// left at its highest rate; off for an NF that keeps its core nearly
    /// busy (the UDR's T4c mix), where a low-priority checkpointer starves
    /// and the writer ends up copying a long WAL in one go.
    pub background_checkpoint: Option<bool>,

    /// WAL frames (pages) waiting to be copied into the database file that
    /// start a checkpoint. Default: 1000 (SQLite's).
    pub checkpoint_pages: u32,

    /// Capacity of the write queue and of the read queue. When a queue is
    /// full, callers wait (asynchronously) for room: back-pressure instead of
    /// unbounded memory. Default: 4096.
    pub queue_capacity: usize,

    /// Which backend keeps the state: `sqlite` (default: the keys above) or
    /// `mysql` (MariaDB / Galera, MySQL NDB: the keys below, see
    /// [`MysqlConfig`]). An NF that does not support `mysql` yet refuses it.
    pub backend: Backend,

    /// `mysql` only: the URL of each database node, `mysql://user:password@host:port/database`
    /// (one string, or a list for a cluster: a lost node fails over to the next).
    #[serde(deserialize_with = "one_or_many")]
    pub url: Vec<String>,

    /// `mysql` only: most connections open to one node. Default: 16.
    pub pool_size: usize,

    /// `mysql` only: how long opening a connection may take before the node is
    /// given up for the next, in milliseconds. Default: 2000.
    pub connect_timeout_ms: u64,

    /// `mysql` only: how long one attempt of a store call (its statements and
    /// `COMMIT`) may take, in milliseconds. Default: 10000.
    pub query_timeout_ms: u64,
}

/// The backends `[store] backend` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// The embedded store ([`crate::SqliteStore`]).
    #[default]
    Sqlite,
    /// A MySQL-protocol server or cluster ([`crate::MysqlStore`]).
    Mysql,
}

/// Settings of the MySQL-protocol backend, built from `[store]` by
/// [`SqliteConfig::mysql`] or directly (tests, tools).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MysqlConfig {
    /// One URL per node, tried in this order; the first is used until it fails.
    pub urls: Vec<String>,
    /// Most connections open to one node.
    pub pool_size: usize,
    /// See [`SqliteConfig::connect_timeout_ms`].
    pub connect_timeout: Duration,
    /// See [`SqliteConfig::query_timeout_ms`].
    pub query_timeout: Duration,
    /// Reads wait until the node has applied every write the cluster
    /// committed before them (Galera `wsrep_sync_wait = 1`), so a reader on
    /// one node sees a write committed through another. Off by default: an
    /// instance reads through the node it writes through, which already
    /// shows its own writes. Ignored by a server without Galera.
    pub causal_reads: bool,
}

impl MysqlConfig {
    /// Default settings for the nodes at `urls`.
    pub fn new<S: Into<String>>(urls: impl IntoIterator<Item = S>) -> Self {
        Self {
            urls: urls.into_iter().map(Into::into).collect(),
            pool_size: default_pool_size(),
            connect_timeout: Duration::from_millis(default_connect_timeout_ms()),
            query_timeout: Duration::from_millis(default_query_timeout_ms()),
            causal_reads: false,
        }
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if self.urls.is_empty() {
            return Err(invalid("backend = \"mysql\" needs url (one or several node URLs)"));
        }
        if self.urls.iter().any(|u| !u.starts_with("mysql://")) {
            return Err(invalid("url must start with mysql://"));
        }
        if self.pool_size == 0 {
            return Err(invalid("pool_size must be at least 1"));
        }
        if self.connect_timeout.is_zero() || self.query_timeout.is_zero() {
            return Err(invalid("connect_timeout_ms and query_timeout_ms must be at least 1"));
        }
        Ok(())
    }
}

fn one_or_many<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    })
}

/// SQLite `PRAGMA synchronous` values the store accepts. `OFF` is not offered:
/// it would break the rule that an acknowledged write survives a process kill
/// during a checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Synchronous {
    /// fsync the WAL at every commit.
    #[default]
    Full,
    /// fsync only at checkpoints.
    Normal,
}

impl Synchronous {
    pub(crate) fn pragma_value(self) -> &'static str {
        match self {
            Self::Full => "FULL",
            Self::Normal => "NORMAL",
        }
    }
}

impl Default for SqliteConfig {
    fn default() -> Self {
        Self {
            path: default_path(),
            synchronous: Synchronous::default(),
            busy_timeout_ms: default_busy_timeout_ms(),
            cache_size_mib: default_cache_size_mib(),
            reader_cache_size_mib: default_reader_cache_size_mib(),
            mmap_size_mib: default_mmap_size_mib(),
            memory_limit_mib: default_memory_limit_mib(),
            readers: default_readers(),
            max_batch: default_max_batch(),
            commit_delay_us: None,
            background_checkpoint: None,
            checkpoint_pages: default_checkpoint_pages(),
            queue_capacity: default_queue_capacity(),
            backend: Backend::default(),
            url: Vec::new(),
            pool_size: default_pool_size(),
            connect_timeout_ms: default_connect_timeout_ms(),
            query_timeout_ms: default_query_timeout_ms(),
        }
    }
}

impl SqliteConfig {
    /// Default settings for the database at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into(), ..Self::default() }
    }

    /// The MySQL backend's settings from this table's `mysql` keys, checked.
    pub fn mysql(&self) -> Result<MysqlConfig> {
        let config = MysqlConfig {
            urls: self.url.clone(),
            pool_size: self.pool_size,
            connect_timeout: Duration::from_millis(self.connect_timeout_ms),
            query_timeout: Duration::from_millis(self.query_timeout_ms),
            causal_reads: false,
        };
        config.validate()?;
        Ok(config)
    }

    /// Checks this table as an NF opening it would: MySQL's keys when `backend = "mysql"` and
    /// the NF supports it (`mysql_supported`), otherwise SQLite's (refusing `mysql`).
    pub fn check(&self, mysql_supported: bool) -> Result<()> {
        match self.backend {
            Backend::Mysql if mysql_supported => self.mysql().map(drop),
            _ => self.validate(),
        }
    }

    pub(crate) fn validate(&self) -> Result<()> {
        // An NF that opens SQLite for a configuration naming MySQL does not support MySQL yet:
        // it must not start and keep its state in a local file the operator did not ask for.
        if self.backend != Backend::Sqlite {
            return Err(invalid("backend = \"mysql\" is not supported by this NF yet"));
        }
        if self.path.as_os_str().is_empty() {
            return Err(invalid("path must not be empty"));
        }
        // Readers cannot see a private in-memory database of the writer.
        if self.path.as_os_str() == ":memory:" {
            return Err(invalid("path must be a file, not :memory:"));
        }
        if self.readers == 0 {
            return Err(invalid("readers must be at least 1"));
        }
        if self.max_batch == 0 {
            return Err(invalid("max_batch must be at least 1"));
        }
        // Longer would hold every acknowledgement for longer than any caller waits.
        if self.commit_delay_us.is_some_and(|us| us > 1_000_000) {
            return Err(invalid("commit_delay_us must be at most 1000000 (1 s)"));
        }
        if self.checkpoint_pages == 0 {
            return Err(invalid("checkpoint_pages must be at least 1"));
        }
        if self.queue_capacity == 0 {
            return Err(invalid("queue_capacity must be at least 1"));
        }
        Ok(())
    }

    /// Whether checkpoints run on the checkpointer thread: as configured,
    /// else off.
    pub fn background_checkpoint(&self) -> bool {
        self.background_checkpoint.unwrap_or(false)
    }

    /// The commit delay: as configured, else 1 ms.
    pub fn commit_delay(&self) -> Duration {
        Duration::from_micros(self.commit_delay_us.unwrap_or(DEFAULT_COMMIT_DELAY_US))
    }

    pub(crate) fn busy_timeout(&self) -> Duration {
        Duration::from_millis(self.busy_timeout_ms)
    }

    /// The writer's `PRAGMA cache_size` (a negative number means KiB).
    pub(crate) fn cache_size_pragma(&self) -> i64 {
        cache_size_pragma(self.cache_size_mib)
    }

    /// A reader's `PRAGMA cache_size`.
    pub(crate) fn reader_cache_size_pragma(&self) -> i64 {
        cache_size_pragma(self.reader_cache_size_mib)
    }

    /// SQLite's soft heap limit in bytes (0: none).
    pub(crate) fn memory_limit_bytes(&self) -> i64 {
        i64::try_from(self.memory_limit_mib.saturating_mul(1024 * 1024)).unwrap_or(i64::MAX)
    }

    pub(crate) fn mmap_size_bytes(&self) -> i64 {
        let bytes = self.mmap_size_mib.saturating_mul(1024 * 1024);
        i64::try_from(bytes).unwrap_or(i64::MAX)
    }
}

fn cache_size_pragma(mib: u64) -> i64 {
    let kib = mib.saturating_mul(1024);
    -i64::try_from(kib).unwrap_or(i64::MAX)
}

fn invalid(msg: &str) -> Error {
    Error::InvalidArgument(format!("store config: {msg}"))
}

fn default_path() -> PathBuf {
    PathBuf::from("fivecore.db")
}

fn default_busy_timeout_ms() -> u64 {
    5000
}

fn default_cache_size_mib() -> u64 {
    16
}

fn default_reader_cache_size_mib() -> u64 {
    16
}

/// Above what the soak mix's busiest writer (the UDR's, T4c over 250K subscribers) settles at
/// in `fivecore up`, and below the 400 MiB the five stores' caches would otherwise allow.
fn default_memory_limit_mib() -> u64 {
    128
}

fn default_mmap_size_mib() -> u64 {
    256
}

fn default_readers() -> usize {
    4
}

fn default_max_batch() -> usize {
    512
}

/// [`SqliteConfig::commit_delay_us`] when unset.
const DEFAULT_COMMIT_DELAY_US: u64 = 1000;

fn default_checkpoint_pages() -> u32 {
    1000
}

fn default_queue_capacity() -> usize {
    4096
}

fn default_pool_size() -> usize {
    16
}

fn default_connect_timeout_ms() -> u64 {
    2000
}

fn default_query_timeout_ms() -> u64 {
    10_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_table_gives_defaults() {
        let config: SqliteConfig = parse("");
        assert_eq!(config, SqliteConfig::default());
        assert_eq!(config.synchronous, Synchronous::Full);
        assert!(config.validate().is_ok());
    }

    #[test]
    fn fields_parse_and_unknown_ones_are_rejected() {
        let config = parse("path = \"/var/lib/x.db\"\nsynchronous = \"normal\"\nreaders = 2\n");
        assert_eq!(config.path, PathBuf::from("/var/lib/x.db"));
        assert_eq!(config.synchronous, Synchronous::Normal);
        assert_eq!(config.readers, 2);
        assert_eq!(config.max_batch, default_max_batch());
        assert_eq!(parse("commit_delay_us = 0").commit_delay(), Duration::ZERO);
        assert_eq!(parse("").commit_delay(), Duration::from_millis(1));

        assert!(toml::from_str::<SqliteConfig>("readerz = 2").is_err());
        assert!(toml::from_str::<SqliteConfig>("synchronous = \"off\"").is_err());
    }

    #[test]
    fn validation_rejects_unusable_values() {
        for bad in [
            SqliteConfig { readers: 0, ..SqliteConfig::default() },
            SqliteConfig { max_batch: 0, ..SqliteConfig::default() },
            SqliteConfig { queue_capacity: 0, ..SqliteConfig::default() },
            SqliteConfig { commit_delay_us: Some(1_000_001), ..SqliteConfig::default() },
            SqliteConfig::new(":memory:"),
            SqliteConfig::new(""),
            SqliteConfig { backend: Backend::Mysql, ..SqliteConfig::default() },
        ] {
            assert!(matches!(bad.validate(), Err(Error::InvalidArgument(_))), "{bad:?}");
        }
    }

    #[test]
    fn pragma_units() {
        let config = SqliteConfig {
            cache_size_mib: 2,
            reader_cache_size_mib: 3,
            mmap_size_mib: 1,
            ..SqliteConfig::default()
        };
        assert_eq!(config.cache_size_pragma(), -2048);
        assert_eq!(config.reader_cache_size_pragma(), -3072);
        assert_eq!(config.mmap_size_bytes(), 1024 * 1024);
    }

    #[test]
    fn mysql_keys_parse_one_url_or_a_list() {
        assert_eq!(parse("").backend, Backend::Sqlite);
        let one = parse("backend = \"mysql\"\nurl = \"mysql://u@127.0.0.1:3306/fc\"");
        assert_eq!(one.backend, Backend::Mysql);
        let mysql = one.mysql().expect("valid");
        assert_eq!(mysql.urls, ["mysql://u@127.0.0.1:3306/fc"]);
        assert_eq!((mysql.pool_size, mysql.query_timeout), (16, Duration::from_secs(10)));
        let many = parse(
            "backend = \"mysql\"\nurl = [\"mysql://a/fc\", \"mysql://b/fc\"]\npool_size = 4\n\
             connect_timeout_ms = 500\nquery_timeout_ms = 3000",
        );
        let mysql = many.mysql().expect("valid");
        assert_eq!(mysql.urls.len(), 2);
        assert_eq!(mysql.connect_timeout, Duration::from_millis(500));
        assert!(toml::from_str::<SqliteConfig>("backend = \"oracle\"").is_err());
        for bad in ["", "url = \"postgres://x\"", "url = \"mysql://x/d\"\npool_size = 0"] {
            assert!(parse(bad).mysql().is_err(), "{bad}");
        }
    }

    fn parse(text: &str) -> SqliteConfig {
        toml::from_str(text).expect("valid config")
    }
}
