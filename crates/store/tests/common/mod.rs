//! Helpers shared by the integration tests.

#![allow(dead_code)] // each test binary uses a different subset

use std::path::Path;
use std::time::Duration;

use store::{MysqlConfig, MysqlStore, SqliteConfig, SqliteStore};
use tempfile::TempDir;

/// A store in a fresh temporary directory; keep the `TempDir` alive.
pub async fn open_temp() -> (TempDir, SqliteStore) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = open_at(&dir.path().join("test.db")).await;
    (dir, store)
}

/// A store on a new database of the shared MariaDB server (started by the first caller);
/// `None` when MariaDB is not installed and not required.
pub async fn open_mariadb(name: &str) -> Option<MysqlStore> {
    let server = tokio::task::spawn_blocking(testkit::mariadb::server).await.expect("start")?;
    let url = server.database(name);
    Some(MysqlStore::open(MysqlConfig::new([url])).await.expect("store opens"))
}

pub async fn open_at(path: &Path) -> SqliteStore {
    SqliteStore::open(SqliteConfig::new(path)).await.expect("store opens")
}

/// Waits until `n` write jobs sit in the writer's queue, so the next batch is
/// known to contain them all.
pub async fn wait_for_queued_writes(store: &SqliteStore, n: u64) {
    for _ in 0..500 {
        if store.stats().queued_writes >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("only {} writes queued, expected {n}", store.stats().queued_writes);
}

/// Holds the writer thread inside a job until the returned gate is dropped,
/// so that jobs queue up behind it. Returns once the writer is held.
pub async fn hold_writer(
    store: &SqliteStore,
) -> (std::sync::mpsc::Sender<()>, tokio::task::JoinHandle<()>) {
    let (held_tx, held_rx) = tokio::sync::oneshot::channel();
    let (gate, gate_rx) = std::sync::mpsc::channel::<()>();
    let writer = store.clone();
    let task = tokio::spawn(async move {
        writer
            .write(move |_| {
                let _ = held_tx.send(());
                // Returns when the test drops the gate.
                let _ = gate_rx.recv();
                Ok(())
            })
            .await
            .expect("holding job commits");
    });
    held_rx.await.expect("writer picked up the holding job");
    (gate, task)
}
