//! The PCF's store schema moves on without losing what an older database holds: a database made
//! before `pcf-0010` (the subscriber tables rebuilt WITHOUT ROWID) keeps every subscriber's
//! state variables, UDR subscription and CHF subscription when the PCF opens it; one made before
//! `pcf-0013` (no index of SM associations by subscriber) keeps its sessions, and a
//! subscriber's subscription still goes with its last.

use pcf::store::sqlite::MIGRATIONS;
use std::sync::Arc;

use pcf::store::{PcfStore, Resident, SqlitePcfStore};
use rusqlite::params;
use serde_json::json;

#[tokio::test]
async fn subscriber_state_survives_the_move_to_without_rowid_tables() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pcf.db");
    {
        let db = store::SqliteStore::open(store::SqliteConfig::new(&path)).await.unwrap();
        let before: Vec<_> =
            MIGRATIONS.iter().take_while(|m| !m.id.starts_with("pcf-0010")).cloned().collect();
        assert_eq!(before.len(), 9, "pcf-0010 follows the nine migrations a PCF of s22 had");
        db.migrate(before).await.unwrap();
        db.write(|tx| {
            for i in 0..3 {
                let supi = format!("imsi-00101000000000{i}");
                tx.execute(
                    "INSERT INTO pcf_ssv (supi, json) VALUES (?1, ?2)",
                    params![
                        supi,
                        serde_json::to_vec(&json!({"lastDnn": "internet", "n": i})).unwrap()
                    ],
                )?;
                tx.execute(
                    "INSERT INTO pcf_udr_subscription (supi, uri) VALUES (?1, ?2)",
                    params![supi, format!("http://udr/subs/{i}")],
                )?;
                tx.execute(
                    "INSERT INTO pcf_chf_subscription (supi, uri, statuses) VALUES (?1, ?2, ?3)",
                    params![
                        supi,
                        format!("http://chf/subs/{i}"),
                        serde_json::to_vec(&json!({"data-cap": "valid"})).unwrap()
                    ],
                )?;
            }
            Ok(())
        })
        .await
        .unwrap();
        db.close().await.unwrap();
    }

    let db = store::SqliteStore::open(store::SqliteConfig::new(&path)).await.unwrap();
    let pcf_store = SqlitePcfStore::on(db.clone()).await.unwrap();
    for i in 0..3 {
        let supi = format!("imsi-00101000000000{i}");
        let kept = pcf_store.subscriber(&supi).await.unwrap();
        assert_eq!(kept.ssv.get("n"), Some(&json!(i)), "{supi}'s state variables");
        assert_eq!(kept.udr_subscription.as_deref(), Some(format!("http://udr/subs/{i}").as_str()));
    }
    let mut chf = pcf_store.chf_subscriptions().await.unwrap();
    chf.sort_by(|a, b| a.supi.cmp(&b.supi));
    assert_eq!(chf.len(), 3);
    assert_eq!(chf[2].uri, "http://chf/subs/2");
    assert_eq!(chf[2].statuses.get("data-cap"), Some(&json!("valid")));

    // The tables are keyed by the SUPI alone now, and still refuse a second row for one SUPI.
    let (without_rowid, duplicate_refused) = db
        .write(|tx| {
            let sql: String = tx.query_row(
                "SELECT sql FROM sqlite_schema WHERE name = 'pcf_udr_subscription'",
                [],
                |r| r.get(0),
            )?;
            let dup = tx
                .execute(
                    "INSERT INTO pcf_udr_subscription (supi, uri) VALUES ('imsi-001010000000000', 'x')",
                    [],
                )
                .is_err();
            Ok((sql.contains("WITHOUT ROWID"), dup))
        })
        .await
        .unwrap();
    assert!(without_rowid);
    assert!(duplicate_refused);
}

#[tokio::test]
async fn sm_sessions_survive_the_supi_index_drop_and_end_subscriptions_with_the_last() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pcf.db");
    {
        let db = store::SqliteStore::open(store::SqliteConfig::new(&path)).await.unwrap();
        let before: Vec<_> =
            MIGRATIONS.iter().take_while(|m| !m.id.starts_with("pcf-0013")).cloned().collect();
        assert_eq!(before.len(), 12, "pcf-0013 follows the twelve migrations a PCF of s25 had");
        db.migrate(before).await.unwrap();
        db.write(|tx| {
            for (id, supi) in [("gx:a", "imsi-1"), ("gx:b", "imsi-1"), ("gx:c", "imsi-2")] {
                tx.execute(
                    "INSERT INTO pcf_sm_policy (sm_policy_id, supi, context, decision,
                     policy_version, updated_ms, binding_uri) VALUES (?1, ?2, ?3, ?4, '1', 1, NULL)",
                    params![id, supi, br#"{"dnn":"internet"}"#.to_vec(), b"{}".to_vec()],
                )?;
            }
            for (supi, uri) in [("imsi-1", "http://udr/subs/1"), ("imsi-2", "http://udr/subs/2")] {
                tx.execute(
                    "INSERT INTO pcf_udr_subscription (supi, uri) VALUES (?1, ?2)",
                    params![supi, uri],
                )?;
            }
            Ok(())
        })
        .await
        .unwrap();
        db.close().await.unwrap();
    }

    let db = store::SqliteStore::open(store::SqliteConfig::new(&path)).await.unwrap();
    let durable = Arc::new(SqlitePcfStore::on(db.clone()).await.unwrap());
    let indexes: i64 = db
        .read(|c| {
            Ok(c.query_row(
                "SELECT COUNT(*) FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'pcf_sm_policy'
                 AND sql IS NOT NULL",
                [],
                |r| r.get(0),
            )?)
        })
        .await
        .unwrap();
    assert_eq!(indexes, 0, "no index by subscriber left on pcf_sm_policy");
    let r = Resident::load(durable.clone()).await.unwrap();
    assert_eq!(r.sm_of("imsi-1").await.unwrap().len(), 2);
    assert_eq!(r.get_sm("gx:a").await.unwrap().unwrap().context, br#"{"dnn":"internet"}"#);

    let first = r.delete_sm("gx:a").await.unwrap().unwrap();
    assert_eq!(first.udr_subscription, None, "imsi-1 still has gx:b");
    let last = r.delete_sm("gx:b").await.unwrap().unwrap();
    assert_eq!(last.udr_subscription.as_deref(), Some("http://udr/subs/1"));
    assert!(r.subscriber("imsi-1").await.unwrap().udr_subscription.is_none());
    // Without memory in front, the durable store finds the subscriber's last by itself.
    let alone = durable.delete_sm("gx:c").await.unwrap().unwrap();
    assert_eq!(alone.udr_subscription.as_deref(), Some("http://udr/subs/2"));
    assert_eq!(durable.count_sm().await.unwrap(), 0);
}
