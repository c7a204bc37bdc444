//! A real single-node Kafka broker (KRaft, broker and controller in one JVM) for the Data
//! Director's Kafka tests, started once per test binary by the first test that asks.
//!
//! The jars are Kafka 4.3.1 and its dependencies from Maven Central, listed in
//! `scripts/kafka/pom.xml` and copied by `scripts/kafka/fetch.sh` into
//! `target/kafka-4.3.1/libs` of the workspace (or `$FIVECORE_KAFKA_LIBS`); when they are absent
//! and Maven is installed, the first test fetches them. The storage is formatted with
//! `kafka.tools.StorageTool` against a static controller quorum (one voter, no `--standalone`),
//! then the broker listens on 127.0.0.1 on two ports the system chose (client and controller).
//!
//! The recipe (storage format, configuration, the supervising shell that stops the broker by its
//! PID when this process exits, however it exits) is `fivecore-kafka-broker`'s, shared with
//! `fivecore bench`; this module adds the test binaries' one shared broker and the fetch.
//!
//! Without Java or the jars the tests are skipped, with a line saying why, unless
//! `FIVECORE_REQUIRE_KAFKA=1` (./test.sh fetches the jars and sets it), where they fail.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

pub use kafka_broker::{cpu_seconds, Broker, VERSION};

static BROKER: OnceLock<Option<Broker>> = OnceLock::new();

/// The shared broker, started by the first caller (blocking, a few seconds); `None` when Java
/// or the jars cannot be had (the test is then skipped; it fails instead under
/// `FIVECORE_REQUIRE_KAFKA=1`). Never dropped: its supervisor stops it when the binary exits.
pub fn broker() -> Option<&'static Broker> {
    BROKER
        .get_or_init(|| match prerequisites() {
            Ok((java, libs)) => {
                let parent = std::env::temp_dir();
                match kafka_broker::start(&kafka_broker::Options::new(java, libs, parent)) {
                    Ok(b) => Some(b),
                    Err(e) => panic!("{e}"),
                }
            }
            Err(why) => {
                assert!(
                    std::env::var("FIVECORE_REQUIRE_KAFKA").as_deref() != Ok("1"),
                    "FIVECORE_REQUIRE_KAFKA=1 but {why}"
                );
                eprintln!("skipped: {why}");
                None
            }
        })
        .as_ref()
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Where the broker's jars are (or go).
pub fn libs_dir() -> PathBuf {
    match std::env::var_os("FIVECORE_KAFKA_LIBS") {
        Some(d) => PathBuf::from(d),
        None => kafka_broker::fetched_libs(&workspace()),
    }
}

fn prerequisites() -> Result<(PathBuf, PathBuf), String> {
    let java = kafka_broker::java()?;
    let libs = libs_dir();
    if !libs.join(".complete").is_file() {
        if kafka_broker::on_path("mvn").is_none() {
            return Err(format!(
                "the Kafka {VERSION} jars are not in {} and Maven (mvn) is not installed to fetch \
                 them (scripts/kafka/fetch.sh)",
                libs.display()
            ));
        }
        eprintln!("fetching the Kafka {VERSION} jars into {} (Maven)", libs.display());
        let out = Command::new("bash")
            .arg(workspace().join("scripts/kafka/fetch.sh"))
            .arg(&libs)
            .output()
            .map_err(|e| format!("scripts/kafka/fetch.sh: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "scripts/kafka/fetch.sh failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    Ok((java, libs))
}
