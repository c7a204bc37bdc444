//! What only the MySQL backend has, on a real MariaDB server (skipped without MariaDB unless
//! FIVECORE_REQUIRE_MARIADB=1): migrations under instances starting at once, and what a bad
//! configuration is told.

use store::{DocumentData, DocumentStore, Error, MysqlConfig, MysqlMigration, MysqlStore};

static NF_MIGRATIONS: &[MysqlMigration] = &[
    MysqlMigration::new(
        "test-0001-t",
        &["CREATE TABLE IF NOT EXISTS t (k VARBINARY(16) NOT NULL PRIMARY KEY, n BIGINT NOT NULL)"],
    ),
    MysqlMigration::new(
        "test-0002-row",
        &["INSERT INTO t (k, n) VALUES ('runs', 1) ON DUPLICATE KEY UPDATE n = n + 1"],
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_starting_at_once_apply_each_migration_once() {
    let Some(server) = tokio::task::spawn_blocking(testkit::mariadb::server).await.unwrap() else {
        return;
    };
    let url = server.database("migrate_once");
    let opens = (0..4).map(|_| {
        let url = url.clone();
        tokio::spawn(async move {
            let store = MysqlStore::open(MysqlConfig::new([url])).await.expect("opens");
            let applied = store.migrate(NF_MIGRATIONS).await.expect("migrates");
            store.close().await;
            applied
        })
    });
    let mut applied = 0;
    for o in opens.collect::<Vec<_>>() {
        applied += o.await.unwrap();
    }
    assert_eq!(applied, NF_MIGRATIONS.len(), "each migration applied by one instance");
    let db = url.rsplit('/').next().unwrap();
    // The second migration is not idempotent on purpose: run twice, it would count 2.
    assert_eq!(server.client(&format!("SELECT n FROM `{db}`.t")).unwrap().trim(), "1");
    let recorded = server.client(&format!("SELECT COUNT(*) FROM `{db}`.store_migrations")).unwrap();
    // The store's own two (documents, the change feed) and the two above.
    assert_eq!(recorded.trim(), "4", "the store's own two and the two above");
}

#[tokio::test]
async fn an_unreachable_database_is_an_error_not_a_hang() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut config = MysqlConfig::new([format!("mysql://root@127.0.0.1:{port}/none")]);
    config.connect_timeout = std::time::Duration::from_millis(200);
    let started = std::time::Instant::now();
    let err = MysqlStore::open(config).await.err().expect("nothing listens there");
    assert!(matches!(err, Error::Backend(_)), "{err:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "{:?}", started.elapsed());
    let bad = MysqlStore::open(MysqlConfig::new(["postgres://x/y"])).await.err().expect("bad url");
    assert!(matches!(bad, Error::InvalidArgument(_)), "{bad:?}");
}

#[tokio::test]
async fn a_closed_store_says_so() {
    let Some(server) = tokio::task::spawn_blocking(testkit::mariadb::server).await.unwrap() else {
        return;
    };
    let store = MysqlStore::open(MysqlConfig::new([server.database("closed")])).await.unwrap();
    store.create("c", "a", DocumentData::new("x")).await.expect("open store writes");
    store.close().await;
    let err = store.get("c", "a").await.expect_err("closed");
    assert!(matches!(err, Error::Closed), "{err:?}");
}
