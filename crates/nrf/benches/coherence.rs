//! How long a change made at one NRF instance takes to reach another's profile view (the one
//! discovery serves from) on a shared MySQL-protocol database: the change feed's propagation
//! delay (docs/store.md, "Several instances on one database").
//!
//! `cargo bench -p fivecore-nrf --bench coherence` runs it on one MariaDB server;
//! `-- galera` on the three-node Galera cluster, the instances on two nodes. Each of N
//! registrations, updates and deregistrations is timed from the writer's answer until the other
//! instance's view shows it (polled in-process every 0.5 ms); prints the median, p99 and maximum.
//! MariaDB is started by testkit (the tests' recipe); without it the bench says so and exits.

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::*;
use nrf::NrfConfig;
use serde_json::json;

const N: u32 = 200;

fn on(url: &str) -> store::SqliteConfig {
    store::SqliteConfig {
        backend: store::Backend::Mysql,
        url: vec![url.to_owned()],
        pool_size: 4,
        ..store::SqliteConfig::new("unused.db")
    }
}

async fn until(
    nrf: &TestNrf,
    key: &str,
    check: impl Fn(Option<&nrf::context::Entry>) -> bool,
) -> Duration {
    let start = Instant::now();
    loop {
        if check(nrf.nrf.entry(key).as_deref()) {
            return start.elapsed();
        }
        assert!(start.elapsed() < Duration::from_secs(10), "{key}: never propagated");
        tokio::time::sleep(Duration::from_micros(500)).await;
    }
}

fn report(what: &str, mut d: Vec<Duration>) {
    d.sort();
    let at = |q: f64| d[((d.len() as f64 * q).ceil() as usize).clamp(1, d.len()) - 1];
    println!(
        "{what:<12} n={:<4} median {:>6.1} ms  p99 {:>6.1} ms  max {:>6.1} ms",
        d.len(),
        at(0.5).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
        d[d.len() - 1].as_secs_f64() * 1e3
    );
}

fn main() {
    let galera = std::env::args().any(|a| a == "galera");
    let urls: Vec<String> = if galera {
        match testkit::mariadb::cluster() {
            Some(c) => c.database("nrf_coherence_bench"),
            None => return println!("coherence bench: MariaDB/Galera not installed; skipped"),
        }
    } else {
        match testkit::mariadb::server() {
            Some(s) => {
                let u = s.database("nrf_coherence_bench");
                vec![u.clone(), u]
            }
            None => return println!("coherence bench: MariaDB not installed; skipped"),
        }
    };
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let a = TestNrf::start_on(on(&urls[0]), NrfConfig::default()).await;
        let b = TestNrf::start_on(on(&urls[1]), NrfConfig::default()).await;
        let c = client();
        let (mut reg, mut upd, mut dereg) = (Vec::new(), Vec::new(), Vec::new());
        for n in 0..N {
            let id = uuid(1000 + n);
            let url = a.nfm(&format!("/nf-instances/{id}"));
            assert_eq!(put(&c, &url, &profile(&id, "UDM")).await.status(), 201);
            reg.push(until(&b, &id, |e| e.is_some()).await);
            let r = patch(&c, &url, &json!([{"op": "add", "path": "/priority", "value": 5}])).await;
            assert_eq!(r.status(), 200);
            upd.push(until(&b, &id, |e| e.is_some_and(|e| e.value["priority"] == 5)).await);
            assert_eq!(c.delete(&url).send().await.unwrap().status(), 204);
            dereg.push(until(&b, &id, |e| e.is_none()).await);
            // Changes spread over time, not back to back: each one meets the poll at a
            // different phase.
            tokio::time::sleep(Duration::from_millis(7)).await;
        }
        println!(
            "NRF change propagation between two instances ({}):",
            if galera { "Galera, two nodes" } else { "one MariaDB" }
        );
        report("register", reg);
        report("update", upd);
        report("deregister", dereg);
        a.stop().await;
        b.stop().await;
    });
}
