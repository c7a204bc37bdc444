//! How long an SLF entry written at one UDR instance takes to reach another's in-memory identity
//! index on a shared MariaDB database: the change feed's propagation delay plus the index's
//! drain (docs/store.md, "Several instances on one database"; docs/udr.md).
//!
//! `cargo bench -p fivecore-udr --bench coherence`: N entries created, re-grouped, then
//! deleted at one instance through the provisioning API, each timed from the writer's answer
//! until the other's index answers the new state, polled in-process every 0.5 ms; prints
//! median, p99 and maximum. MariaDB is started by testkit (the tests' recipe); without it the
//! bench says so and exits.

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::*;
use http::Method;
use serde_json::json;
use udr::UdrConfig;

const N: u32 = 200;

/// Waits until `b`'s index holds `want` (the UDM group, `None`: unknown) for `id`.
async fn until(b: &TestUdr, id: &str, want: Option<&str>) -> Duration {
    let start = Instant::now();
    loop {
        if let Some(now) = b.udr.slf.indexed(id) {
            if now.as_ref().and_then(|g| g.get("UDM")).map(String::as_str) == want {
                return start.elapsed();
            }
        }
        assert!(start.elapsed() < Duration::from_secs(10), "{id}: never propagated");
        tokio::time::sleep(Duration::from_micros(500)).await;
    }
}

fn report(what: &str, mut d: Vec<Duration>) {
    d.sort();
    let at = |q: f64| d[((d.len() as f64 * q).ceil() as usize).clamp(1, d.len()) - 1];
    println!(
        "{what:<8} n={:<4} median {:>6.1} ms  p99 {:>6.1} ms  max {:>6.1} ms",
        d.len(),
        at(0.5).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
        d[d.len() - 1].as_secs_f64() * 1e3
    );
}

fn main() {
    if !testkit::backends::use_mariadb() {
        return println!("coherence bench: MariaDB not installed; skipped");
    }
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let dir = state_dir();
        let a = TestUdr::start_as(dir.path(), UdrConfig::default(), Some("a".repeat(8))).await;
        let b = TestUdr::start_as(dir.path(), UdrConfig::default(), Some("b".repeat(8))).await;
        while b.udr.slf.index_size().is_none() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let c = client();
        let (mut created, mut changed, mut deleted) = (Vec::new(), Vec::new(), Vec::new());
        let create = a.url("/udr-prov/v1/slf-entries");
        for n in 0..N {
            let imsi = format!("imsi-00101{n:010}");
            let entry = json!({"subscriberIds": [imsi], "nfGroupIds": {"UDM": "udm-1"}});
            let r = send_json(&c, Method::POST, &create, Some(&entry)).await;
            assert_eq!(r.status(), 201);
            created.push(until(&b, &imsi, Some("udm-1")).await);
            let url = a.url(&format!("/udr-prov/v1/slf-entries/{imsi}"));
            let group = format!("udm-{}", n % 8);
            let entry = json!({"subscriberIds": [imsi], "nfGroupIds": {"UDM": group}});
            assert!(send_json(&c, Method::PUT, &url, Some(&entry)).await.status().is_success());
            changed.push(until(&b, &imsi, Some(&group)).await);
            assert_eq!(delete(&c, &url).await.status(), 204);
            deleted.push(until(&b, &imsi, None).await);
            tokio::time::sleep(Duration::from_millis(7)).await;
        }
        println!("UDR SLF entry propagation to another instance's identity index (one MariaDB):");
        report("create", created);
        report("change", changed);
        report("delete", deleted);
        a.stop().await;
        b.stop().await;
    });
}
