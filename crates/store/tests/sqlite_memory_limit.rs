//! `[store] memory_limit_mib`: SQLite's soft heap limit bounds what the page caches hold in the
//! process, however large their own sizes; with no limit the same work grows them far past it.
//! One test in its own binary: the limit and the count are process-wide.

use store::sqlite::alloc;
use store::{SqliteConfig, SqliteStore};

const MIB: u64 = 1024 * 1024;

/// Writes 24 MB in pages the writer keeps cached, then reads it all back; SQLite's memory then.
async fn fill(dir: &std::path::Path, memory_limit_mib: u64) -> u64 {
    let config = SqliteConfig {
        memory_limit_mib,
        cache_size_mib: 256,
        reader_cache_size_mib: 256,
        // Reads through the page cache, not the map, so the readers' caches fill too.
        mmap_size_mib: 0,
        ..SqliteConfig::new(dir.join(format!("limit-{memory_limit_mib}.db")))
    };
    let db = SqliteStore::open(config).await.unwrap();
    assert_eq!(alloc::soft_limit(), memory_limit_mib * MIB);
    db.write(|tx| Ok(tx.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)")?))
        .await
        .unwrap();
    for chunk in 0..6 {
        db.write(move |tx| {
            for id in chunk * 1000..(chunk + 1) * 1000 {
                tx.execute("INSERT INTO t (id, v) VALUES (?1, zeroblob(4000))", [id])?;
            }
            Ok(())
        })
        .await
        .unwrap();
    }
    let sum: i64 = db
        .read(|c| Ok(c.query_row("SELECT sum(length(v)) FROM t", [], |r| r.get(0))?))
        .await
        .unwrap();
    assert_eq!(sum, 6000 * 4000, "every write kept");
    let held = alloc::used_bytes().unwrap();
    db.close().await.unwrap();
    held
}

#[tokio::test]
async fn the_soft_limit_bounds_sqlite_memory_across_stores() {
    alloc::install().expect("installed before SQLite's first use");
    let dir = tempfile::tempdir().unwrap();
    let bounded = fill(dir.path(), 4).await;
    // The limit is soft: pages in use by a statement stay, and SQLite's other allocations
    // (schemas, statements) count too.
    assert!(bounded < 6 * MIB, "held {bounded} bytes under a 4 MiB limit");
    let unbounded = fill(dir.path(), 0).await;
    eprintln!("SQLite held {bounded} bytes with a 4 MiB limit, {unbounded} with none");
    assert!(
        unbounded > 16 * MIB,
        "held only {unbounded} bytes with no limit: the test cannot tell"
    );
}
