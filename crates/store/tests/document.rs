//! Every `DocumentStore` operation and error path, against SQLite and against a real MariaDB
//! server (one database per test; skipped without MariaDB unless FIVECORE_REQUIRE_MARIADB=1).

mod common;

use common::open_temp;
use store::{DocumentData, DocumentStore, Error, IndexKey};

fn ids(docs: &[store::Document]) -> Vec<&str> {
    docs.iter().map(|d| d.id.as_str()).collect()
}

async fn create_then_get_returns_what_was_written<S: DocumentStore>(store: &S) {
    let data = DocumentData::new(r#"{"supi":"imsi-001"}"#)
        .expires_at(5_000)
        .index("supi", "imsi-001")
        .index("dnn", "internet");
    let created = store.create("bindings", "b1", data).await.expect("created");
    assert_eq!(created.id, "b1");
    assert_eq!(created.version, 1);
    assert_eq!(created.etag(), "\"1\"");
    assert_eq!(created.created_at, created.updated_at);
    assert!(created.created_at > 1_600_000_000_000, "a plausible clock");
    assert_eq!(created.expires_at, Some(5_000));
    // Canonical order, whatever order the caller used.
    assert_eq!(
        created.index,
        vec![IndexKey::new("dnn", "internet"), IndexKey::new("supi", "imsi-001")]
    );

    let got = store.get("bindings", "b1").await.expect("get").expect("present");
    assert_eq!(got, created);
    assert_eq!(got.json::<serde_json::Value>().expect("json")["supi"], "imsi-001");
}

async fn create_twice_fails_with_already_exists_and_keeps_the_first<S: DocumentStore>(store: &S) {
    store.create("c", "x", DocumentData::new("first").index("k", "1")).await.expect("created");
    let err = store
        .create("c", "x", DocumentData::new("second").index("k", "2"))
        .await
        .expect_err("duplicate");
    assert!(matches!(err, Error::AlreadyExists), "{err:?}");
    let got = store.get("c", "x").await.expect("get").expect("present");
    assert_eq!(got.body, b"first");
    assert_eq!(got.index, vec![IndexKey::new("k", "1")]);
    assert!(store.find("c", "k", "2", 10).await.expect("find").is_empty());
}

async fn get_missing_is_none<S: DocumentStore>(store: &S) {
    assert_eq!(store.get("c", "nope").await.expect("get"), None);
}

async fn same_id_in_two_collections_is_two_documents<S: DocumentStore>(store: &S) {
    store.create("a", "x", DocumentData::new("in a")).await.expect("a");
    store.create("b", "x", DocumentData::new("in b")).await.expect("b");
    store.delete("a", "x", None).await.expect("delete a");
    let b = store.get("b", "x").await.expect("get").expect("b stays");
    assert_eq!(b.body, b"in b");
    assert_eq!(store.count("a").await.expect("count"), 0);
    assert_eq!(store.count("b").await.expect("count"), 1);
}

async fn bodies_are_opaque_bytes<S: DocumentStore>(store: &S) {
    let body = vec![0u8, 159, 146, 150, 255];
    store.create("c", "bin", DocumentData::new(body.clone())).await.expect("created");
    let got = store.get("c", "bin").await.expect("get").expect("present");
    assert_eq!(got.body, body);
}

async fn upsert_creates_then_replaces<S: DocumentStore>(store: &S) {
    let first = store
        .upsert("c", "u", DocumentData::new("v1").index("k", "old").expires_at(10))
        .await
        .expect("upsert");
    assert!(first.created);
    assert_eq!(first.document.version, 1);

    let second =
        store.upsert("c", "u", DocumentData::new("v2").index("k", "new")).await.expect("upsert");
    assert!(!second.created);
    assert_eq!(second.document.version, 2);
    assert_eq!(second.document.created_at, first.document.created_at);
    assert!(second.document.updated_at >= first.document.updated_at);
    assert_eq!(second.document.expires_at, None);

    let got = store.get("c", "u").await.expect("get").expect("present");
    assert_eq!(got, second.document);
    assert!(store.find("c", "k", "old", 10).await.expect("find").is_empty());
    assert_eq!(ids(&store.find("c", "k", "new", 10).await.expect("find")), ["u"]);
    assert!(store.scan_expired("c", u64::MAX, 10).await.expect("scan").is_empty());
}

async fn replace_bumps_version_and_swaps_index_entries<S: DocumentStore>(store: &S) {
    let v1 =
        store.create("c", "r", DocumentData::new("v1").index("k", "a")).await.expect("created");

    let v2 = store
        .replace("c", "r", DocumentData::new("v2").index("k", "b"), None)
        .await
        .expect("unconditional replace");
    assert_eq!(v2.version, 2);
    assert_eq!(v2.created_at, v1.created_at);

    let v3 = store
        .replace("c", "r", DocumentData::new("v3").index("k", "c"), Some(2))
        .await
        .expect("conditional replace at the current version");
    assert_eq!(v3.version, 3);
    assert_eq!(v3.etag(), "\"3\"");

    let got = store.get("c", "r").await.expect("get").expect("present");
    assert_eq!(got, v3);
    assert!(store.find("c", "k", "a", 10).await.expect("find").is_empty());
    assert!(store.find("c", "k", "b", 10).await.expect("find").is_empty());
    assert_eq!(ids(&store.find("c", "k", "c", 10).await.expect("find")), ["r"]);
}

async fn replace_with_a_stale_version_reports_the_current_one<S: DocumentStore>(store: &S) {
    store.create("c", "r", DocumentData::new("v1")).await.expect("created");
    store.replace("c", "r", DocumentData::new("v2"), None).await.expect("replaced");
    let err = store
        .replace("c", "r", DocumentData::new("lost update"), Some(1))
        .await
        .expect_err("stale");
    assert!(matches!(err, Error::VersionMismatch { current: 2 }), "{err:?}");
    let got = store.get("c", "r").await.expect("get").expect("present");
    assert_eq!((got.version, got.body.as_slice()), (2, b"v2".as_slice()));
}

async fn replace_missing_is_not_found<S: DocumentStore>(store: &S) {
    for expected in [None, Some(1)] {
        let err = store
            .replace("c", "ghost", DocumentData::new("x"), expected)
            .await
            .expect_err("missing");
        assert!(matches!(err, Error::NotFound), "{expected:?}: {err:?}");
    }
    assert_eq!(store.get("c", "ghost").await.expect("get"), None);
}

async fn delete_removes_document_and_index_entries<S: DocumentStore>(store: &S) {
    store
        .create("c", "d", DocumentData::new("x").index("k", "v").expires_at(1))
        .await
        .expect("created");
    store.delete("c", "d", None).await.expect("deleted");
    assert_eq!(store.get("c", "d").await.expect("get"), None);
    assert!(store.find("c", "k", "v", 10).await.expect("find").is_empty());
    assert!(store.scan_expired("c", 10, 10).await.expect("scan").is_empty());
    // The id is free again, at version 1.
    let again = store.create("c", "d", DocumentData::new("y")).await.expect("re-created");
    assert_eq!(again.version, 1);
}

async fn delete_missing_is_not_found<S: DocumentStore>(store: &S) {
    for expected in [None, Some(3)] {
        let err = store.delete("c", "ghost", expected).await.expect_err("missing");
        assert!(matches!(err, Error::NotFound), "{expected:?}: {err:?}");
    }
}

async fn conditional_delete_checks_the_version<S: DocumentStore>(store: &S) {
    store.create("c", "d", DocumentData::new("x").index("k", "v")).await.expect("created");
    let err = store.delete("c", "d", Some(7)).await.expect_err("stale");
    assert!(matches!(err, Error::VersionMismatch { current: 1 }), "{err:?}");
    assert!(store.get("c", "d").await.expect("get").is_some(), "kept");
    assert_eq!(store.find("c", "k", "v", 10).await.expect("find").len(), 1);

    store.delete("c", "d", Some(1)).await.expect("deleted at version 1");
    assert_eq!(store.get("c", "d").await.expect("get"), None);
}

async fn find_returns_matches_in_id_order_up_to_the_limit<S: DocumentStore>(store: &S) {
    for id in ["p3", "p1", "p2"] {
        store
            .create(
                "profiles",
                id,
                DocumentData::new(id).index("nf-type", "SMF").index("snssai", id),
            )
            .await
            .expect("created");
    }
    store
        .create("profiles", "a1", DocumentData::new("amf").index("nf-type", "AMF"))
        .await
        .expect("created");
    // Same index entry in another collection must not leak in.
    store
        .create("other", "p0", DocumentData::new("x").index("nf-type", "SMF"))
        .await
        .expect("created");

    let smfs = store.find("profiles", "nf-type", "SMF", 10).await.expect("find");
    assert_eq!(ids(&smfs), ["p1", "p2", "p3"]);
    assert_eq!(
        smfs[0].index,
        vec![IndexKey::new("nf-type", "SMF"), IndexKey::new("snssai", "p1")],
        "documents from find carry all their index entries"
    );
    let first_two = store.find("profiles", "nf-type", "SMF", 2).await.expect("find");
    assert_eq!(ids(&first_two), ["p1", "p2"]);
    assert!(store.find("profiles", "nf-type", "SMF", 0).await.expect("find").is_empty());
    assert!(store.find("profiles", "nf-type", "UPF", 10).await.expect("find").is_empty());
    assert!(store.find("profiles", "nf-kind", "SMF", 10).await.expect("find").is_empty());
    assert_eq!(ids(&store.find("profiles", "snssai", "p2", 10).await.expect("find")), ["p2"]);
}

async fn a_document_can_hold_several_values_of_one_index<S: DocumentStore>(store: &S) {
    store
        .create("c", "multi", DocumentData::new("x").index("tac", "1").index("tac", "2"))
        .await
        .expect("created");
    for tac in ["1", "2"] {
        assert_eq!(ids(&store.find("c", "tac", tac, 10).await.expect("find")), ["multi"]);
    }
}

async fn count_counts_one_collection<S: DocumentStore>(store: &S) {
    assert_eq!(store.count("c").await.expect("count"), 0);
    for n in 0..5 {
        store.create("c", &format!("d{n}"), DocumentData::new("x")).await.expect("created");
    }
    store.create("other", "d0", DocumentData::new("x")).await.expect("created");
    assert_eq!(store.count("c").await.expect("count"), 5);
    store.delete("c", "d0", None).await.expect("deleted");
    assert_eq!(store.count("c").await.expect("count"), 4);
}

async fn scan_expired_returns_due_documents_oldest_first<S: DocumentStore>(store: &S) {
    for (id, at) in [
        ("late", Some(30)),
        ("b-early", Some(10)),
        ("mid", Some(20)),
        ("a-early", Some(10)),
        ("never", None),
    ] {
        let mut data = DocumentData::new(id);
        data.expires_at = at;
        store.create("sessions", id, data).await.expect("created");
    }
    store.create("other", "x", DocumentData::new("x").expires_at(1)).await.expect("created");

    let due = store.scan_expired("sessions", 20, 10).await.expect("scan");
    assert_eq!(ids(&due), ["a-early", "b-early", "mid"], "by expiry, ties by id");
    let first = store.scan_expired("sessions", 20, 1).await.expect("scan");
    assert_eq!(ids(&first), ["a-early"]);
    assert!(store.scan_expired("sessions", 9, 10).await.expect("scan").is_empty());
    let all = store.scan_expired("sessions", u64::MAX, 10).await.expect("scan");
    assert_eq!(ids(&all), ["a-early", "b-early", "mid", "late"], "never expiring never listed");
    assert!(store.scan_expired("sessions", 100, 0).await.expect("scan").is_empty());
}

async fn list_pages_through_a_collection_by_id<S: DocumentStore>(store: &S) {
    for n in 0..25 {
        store
            .create("c", &format!("id-{n:02}"), DocumentData::new("x").index("k", "v"))
            .await
            .expect("created");
    }
    store.create("d", "id-00", DocumentData::new("x")).await.expect("created");

    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = store.list("c", after.as_deref(), 10).await.expect("list");
        if page.is_empty() {
            break;
        }
        assert!(page.len() <= 10);
        assert!(page.iter().all(|d| d.index == vec![IndexKey::new("k", "v")]));
        after = page.last().map(|d| d.id.clone());
        seen.extend(page.into_iter().map(|d| d.id));
    }
    let expected: Vec<String> = (0..25).map(|n| format!("id-{n:02}")).collect();
    assert_eq!(seen, expected);
    assert!(store.list("c", None, 0).await.expect("list").is_empty());
    assert_eq!(ids(&store.list("c", Some("id-23"), 10).await.expect("list")), ["id-24"]);
}

async fn list_orders_ids_by_bytes<S: DocumentStore>(store: &S) {
    for id in ["b", "B", "a", "é", "10", "9"] {
        store.create("c", id, DocumentData::new("x")).await.expect("created");
    }
    let all = store.list("c", None, 10).await.expect("list");
    assert_eq!(ids(&all), ["10", "9", "B", "a", "b", "é"]);
}

async fn invalid_keys_are_rejected_before_reaching_the_engine<S: DocumentStore>(store: &S) {
    let long_id = "x".repeat(store::document::MAX_ID_LEN + 1);
    let checks = [
        store.create("", "x", DocumentData::new("x")).await.map(|_| ()),
        store.create("c", "", DocumentData::new("x")).await.map(|_| ()),
        store.upsert("c", &long_id, DocumentData::new("x")).await.map(|_| ()),
        store.replace("c", "x", DocumentData::new("x").index("", "v"), None).await.map(|_| ()),
        store.create("c", "x", DocumentData::new("x").expires_at(u64::MAX)).await.map(|_| ()),
        store.get("c\0", "x").await.map(|_| ()),
        store.delete("c", "", None).await,
        store.find("c", "", "v", 1).await.map(|_| ()),
        store.count("").await.map(|_| ()),
        store.scan_expired("", 0, 1).await.map(|_| ()),
        store.list("", None, 1).await.map(|_| ()),
    ];
    for (n, result) in checks.into_iter().enumerate() {
        assert!(matches!(result, Err(Error::InvalidArgument(_))), "check {n}: {result:?}");
    }
}

#[tokio::test]
async fn sqlite_invalid_keys_do_not_reach_the_writer() {
    let (_dir, store) = open_temp().await;
    invalid_keys_are_rejected_before_reaching_the_engine(&store).await;
    assert_eq!(store.stats().writes, 0, "nothing reached the writer");
}

/// The trait is usable generically, as NF code will use it.
async fn roundtrip<S: DocumentStore>(store: &S) -> store::Result<u64> {
    let doc = store.create("g", "1", DocumentData::new("x")).await?;
    let doc = store.replace("g", "1", DocumentData::new("y"), Some(doc.version)).await?;
    Ok(doc.version)
}

async fn works_through_a_generic_bound_from_spawned_tasks<S>(store: &S)
where
    S: DocumentStore + Clone + 'static,
{
    let store = store.clone();
    let handle = tokio::spawn(async move { roundtrip(&store).await });
    assert_eq!(handle.await.expect("task").expect("roundtrip"), 2);
}

/// Runs each contract check against both backends: `sqlite::<name>` and `mariadb::<name>`.
macro_rules! on_every_backend {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    let (_dir, store) = super::common::open_temp().await;
                    super::$name(&store).await;
                }
            )*
        }
        mod mariadb {
            $(
                #[tokio::test]
                async fn $name() {
                    let Some(store) = super::common::open_mariadb(stringify!($name)).await else {
                        return;
                    };
                    super::$name(&store).await;
                    store.close().await;
                }
            )*
        }
    };
}

on_every_backend!(
    create_then_get_returns_what_was_written,
    create_twice_fails_with_already_exists_and_keeps_the_first,
    get_missing_is_none,
    same_id_in_two_collections_is_two_documents,
    bodies_are_opaque_bytes,
    upsert_creates_then_replaces,
    replace_bumps_version_and_swaps_index_entries,
    replace_with_a_stale_version_reports_the_current_one,
    replace_missing_is_not_found,
    delete_removes_document_and_index_entries,
    delete_missing_is_not_found,
    conditional_delete_checks_the_version,
    find_returns_matches_in_id_order_up_to_the_limit,
    a_document_can_hold_several_values_of_one_index,
    count_counts_one_collection,
    scan_expired_returns_due_documents_oldest_first,
    list_pages_through_a_collection_by_id,
    list_orders_ids_by_bytes,
    works_through_a_generic_bound_from_spawned_tasks,
    invalid_keys_are_rejected_before_reaching_the_engine,
);
