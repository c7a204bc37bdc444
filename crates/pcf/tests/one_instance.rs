//! On MySQL one PCF instance serves from one database (docs/pcf.md, "On MySQL"): a second
//! instance started while the first serves is refused, naming the reason; the first one's stop
//! releases the database, so the next starts at once and finds every session; an instance
//! killed without releasing it holds it only until its lease expires.

mod common;

use common::*;
use pcf::PcfConfig;

/// Rows of `pcf_owner` in the database of `dir`.
fn owners(dir: &std::path::Path) -> String {
    let url = testkit::backends::mysql_url(dir).unwrap();
    let db = url.rsplit('/').next().unwrap().to_string();
    let server = testkit::mariadb::server().unwrap();
    server.client(&format!("SELECT COUNT(*) FROM {db}.pcf_owner")).unwrap().trim().to_string()
}

#[tokio::test]
async fn a_second_instance_is_refused_and_a_stopped_or_killed_one_gives_the_database_up() {
    if !testkit::backends::use_mariadb() {
        return;
    }
    let d = state_dir();
    let config = || PcfConfig {
        policy: Some(d.path().join("policy")),
        instance_lease_ms: 1000,
        ..PcfConfig::default()
    };
    default_project(&d.path().join("policy"));
    let a = TestPcf::start_with(d.path(), config()).await;
    let c = client();
    let r = c.post(&a.sm("")).json(&open5gs_context(1)).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 201, "{}", body(&r));
    let loc = r.header("location").unwrap().to_string();
    let path = loc[loc.find("/npcf").unwrap()..].to_string();

    // A second instance on the same database, while the first serves and renews its lease.
    let refused = pcf::bind(run_config(d.path(), config())).await.err().expect("refused");
    let why = refused.to_string();
    assert!(
        why.contains("another PCF instance") && why.contains("one instance per database"),
        "{why}"
    );

    // Stopped, the first releases the database: the next takes it and has the session.
    a.stop().await;
    assert_eq!(owners(d.path()), "0", "the stop released the lease");
    let b = TestPcf::start_with(d.path(), config()).await;
    assert_eq!(owners(d.path()), "1");
    let r = c.get(&format!("{}{path}", b.base)).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200, "{}", body(&r));

    // Killed, it leaves its lease behind: the next instance waits for it to expire.
    b.kill().await;
    assert_eq!(owners(d.path()), "1", "a killed instance releases nothing");
    let c2 = TestPcf::start_with(d.path(), config()).await;
    let r = c.get(&format!("{}{path}", c2.base)).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200, "{}", body(&r));
    c2.stop().await;
}
