//! SQLite's memory from Rust's global allocator (store::sqlite::alloc): installed before SQLite's
//! first use in this test binary, a store works on it, its memory is counted, and the count
//! falls back when the store closes.

use store::sqlite::alloc;
use store::{SqliteConfig, SqliteStore};

#[tokio::test]
async fn sqlite_allocates_through_the_global_allocator_and_is_counted() {
    // Nothing in this binary used SQLite yet: this is its only test.
    assert_eq!(alloc::used_bytes(), None);
    alloc::install().expect("installed before SQLite's first use");
    alloc::install().expect("a second call does nothing");
    let before = alloc::used_bytes().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = SqliteStore::open(SqliteConfig::new(dir.path().join("t.db"))).await.unwrap();
    db.write(|tx| {
        tx.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)")?;
        for id in 0..2000 {
            tx.execute("INSERT INTO t (id, v) VALUES (?1, zeroblob(4000))", [id])?;
        }
        Ok(())
    })
    .await
    .unwrap();
    let open = alloc::used_bytes().unwrap();
    // The writer's page cache holds much of the 8 MB just written.
    assert!(open > before + 1_000_000, "{before} -> {open}");
    let sum: i64 = db
        .read(|c| Ok(c.query_row("SELECT sum(length(v)) FROM t", [], |r| r.get(0))?))
        .await
        .unwrap();
    assert_eq!(sum, 2000 * 4000);
    db.close().await.unwrap();
    drop(db);
    let closed = alloc::used_bytes().unwrap();
    assert!(closed < open / 4, "{open} -> {closed} after close");
}
