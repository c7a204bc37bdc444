//! How long a binding written at one BSF instance takes to reach another's Rx UE address index
//! on a shared MariaDB database: the change feed's propagation delay (docs/store.md, "Several
//! instances on one database").
//!
//! `cargo bench -p fivecore-bsf --bench coherence`: N bindings created, then deleted, at one
//! instance, each timed from the writer's answer until the other's index answers for (or no
//! longer knows) the UE address, polled in-process every 0.5 ms; prints median, p99 and maximum.
//! MariaDB is started by testkit (the tests' recipe); without it the bench says so and exits.

#[path = "../tests/common/mod.rs"]
mod common;

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use bsf::config::RxConfig;
use bsf::ue_address_index::Answer;
use bsf::BsfConfig;
use common::*;

const N: u32 = 200;

async fn until(b: &TestBsf, ip: Ipv4Addr, present: bool) -> Duration {
    let ix = b.bsf.store.index().expect("index on").clone();
    let start = Instant::now();
    loop {
        if matches!(ix.find_v4(ip, None), Answer::Pcf(_)) == present {
            return start.elapsed();
        }
        assert!(start.elapsed() < Duration::from_secs(10), "{ip}: never propagated");
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
    let config = BsfConfig {
        rx: RxConfig {
            enabled: true,
            listen: "127.0.0.1:0".parse().unwrap(),
            binding_index: true,
            ..RxConfig::default()
        },
        ..BsfConfig::default()
    };
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let dir = state_dir();
        let a = TestBsf::start(dir.path(), config.clone()).await;
        let b = TestBsf::start(dir.path(), config).await;
        let ix = b.bsf.store.index().unwrap().clone();
        while !ix.is_ready() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let c = client();
        let (mut created, mut deleted) = (Vec::new(), Vec::new());
        for n in 0..N {
            let ip = Ipv4Addr::new(10, 0, (n / 256) as u8, (n % 256) as u8);
            let r = post(&c, &a.url("/pcfBindings"), &binding(n)).await;
            assert_eq!(r.status(), 201);
            created.push(until(&b, ip, true).await);
            let loc = r.header("location").unwrap().to_owned();
            assert_eq!(delete(&c, &loc).await.status(), 204);
            deleted.push(until(&b, ip, false).await);
            tokio::time::sleep(Duration::from_millis(7)).await;
        }
        println!("BSF binding propagation to another instance's Rx index (one MariaDB):");
        report("create", created);
        report("delete", deleted);
        a.stop().await;
        b.stop().await;
    });
}
