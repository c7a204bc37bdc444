//! The PCF bindings a BSF scenario starts with (`[preload.bindings]`).
//!
//! A BSF the kit starts gets them written straight into its store file before it starts
//! (`bsf::preload`: the rows Register would store, millions per minute); a BSF given with
//! `--target` gets them over Nbsf_Management_Register, 64 at a time. Binding `i` is
//! `BindingFactory::document(i)`; the Binding Create procedure registers binding
//! `preloaded + request sequence number`, a UE address no binding holds yet.

use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bsf::preload::{self, BindingFactory, PcfIdentity, Progress};
use sbi::client::SbiClient;
use serde::Serialize;
use tokio::sync::Semaphore;

use crate::engine::progress_bar;
use crate::rx::BoundUes;
use crate::scenario::Scenario;
use crate::sched::Rng;

/// The database file of `fivecore bsf --data-dir DIR` (crates/fivecore/src/nf.rs).
pub const BSF_STORE_FILE: &str = "bsf.db";

/// The port PCF bindings give as the PCF's SBI endpoint (the PCF's default, docs/DESIGN.md);
/// the BSF only stores it.
const PCF_SBI_PORT: u16 = 7003;

/// What to preload.
#[derive(Clone)]
pub struct BindingPlan {
    /// NF holding the bindings.
    pub nf: String,
    pub factory: Arc<BindingFactory>,
    /// Bindings preloaded.
    pub count: u64,
    /// The last `deletable` of them go into `pool` for Binding Delete; Rx never uses them.
    pub deletable: u64,
    pub pool: Option<String>,
}

/// How the preload went, for the report.
#[derive(Debug, Clone, Serialize, Default)]
pub struct BindingsReport {
    pub count: u64,
    /// `store file` (written before the NF started) or `Nbsf Register` (over HTTP).
    pub method: String,
    pub seconds: f64,
    /// Of which building the secondary indexes (store file only).
    pub index_seconds: Option<f64>,
    /// The NF's database file afterwards (store file only).
    pub db_mb: Option<f64>,
}

/// A finished preload: what the run needs to act on the bindings.
#[derive(Clone)]
pub struct Preloaded {
    pub plan: BindingPlan,
    pub report: BindingsReport,
    /// Ids of the deletable bindings, for `plan.pool`.
    pub deletable_ids: Vec<String>,
}

impl Preloaded {
    /// The UEs whose bindings stay for the whole run.
    pub fn bound_ues(&self) -> BoundUes {
        BoundUes {
            factory: self.plan.factory.clone(),
            count: self.plan.count - self.plan.deletable,
        }
    }
}

impl BindingPlan {
    /// The plan of `s`, with `count` bindings instead of the scenario's default when given.
    pub fn new(s: &Scenario, count: Option<u64>) -> Result<Option<BindingPlan>> {
        let Some(b) = &s.preload.bindings else { return Ok(None) };
        let count = count.unwrap_or_else(|| b.default_count());
        if count < 2 {
            bail!("at least 2 bindings must be preloaded");
        }
        let mut rng = Rng::new(s.generators.seed ^ 0xb1d1);
        let mut pcfs = Vec::new();
        for name in &b.pcf_sims {
            let sim = s.simulators.iter().find(|x| &x.name == name).context("pcf simulator")?;
            let host = sim.origin_host.clone().context("pcf simulator origin_host")?;
            pcfs.push(PcfIdentity {
                diam_realm: sim.origin_realm.clone().context("pcf simulator origin_realm")?,
                fqdn: host.clone(),
                diam_host: host,
                instance_id: rng.uuid(),
                sbi_addr: Ipv4Addr::LOCALHOST,
                sbi_port: PCF_SBI_PORT,
            });
        }
        let factory = BindingFactory {
            supi_prefix: s.generators.supi_prefix.clone(),
            msin_first: s.generators.supi_first,
            msisdn_prefix: b.msisdn_prefix.clone(),
            ipv4_first: b.ipv4_first,
            ipv6: b.dual_stack,
            ipv6_base: "2001:db8::".parse().expect("IPv6 documentation prefix"),
            dnn: b.dnn.clone(),
            sst: b.sst,
            sd: b.sd.clone(),
            pcfs,
            seed: s.generators.seed,
        };
        // A small run keeps most bindings for the Rx procedures.
        let deletable = if b.pool.is_some() { b.deletable.min(count / 4).max(1) } else { 0 };
        Ok(Some(BindingPlan {
            nf: b.nf.clone(),
            factory: Arc::new(factory),
            count,
            deletable,
            pool: b.pool.clone(),
        }))
    }

    /// Writes the bindings into the store file at `path` (the NF is not running yet).
    pub async fn preload_file(&self, path: &Path, progress: bool) -> Result<Preloaded> {
        let p = Arc::new(Progress::default());
        let ticker = progress.then(|| spawn_ticker(p.clone(), self.count));
        let done = preload::preload(path, self.factory.clone(), 0..self.count, p.clone()).await;
        if let Some(t) = ticker {
            t.abort();
            progress_bar(
                "preload bindings",
                p.rows.load(Ordering::Relaxed) as usize,
                self.count as usize,
            );
            eprintln!();
        }
        let done = done.with_context(|| format!("preloading bindings into {}", path.display()))?;
        let ids = (self.count - self.deletable..self.count).map(|i| self.factory.binding_id(i));
        Ok(Preloaded {
            plan: self.clone(),
            report: BindingsReport {
                count: done.bindings,
                method: "store file".into(),
                seconds: done.seconds,
                index_seconds: Some(done.index_seconds),
                db_mb: Some(done.db_bytes as f64 / 1_048_576.0),
            },
            deletable_ids: ids.collect(),
        })
    }

    /// Registers the bindings over Nbsf at `base` (an NF the kit did not start).
    pub async fn preload_http(
        &self,
        base: &str,
        client: &SbiClient,
        progress: bool,
    ) -> Result<Preloaded> {
        let t0 = Instant::now();
        let p = Arc::new(Progress::default());
        let ticker = progress.then(|| spawn_ticker(p.clone(), self.count));
        let url = format!("{base}/nbsf-management/v1/pcfBindings");
        let sem = Arc::new(Semaphore::new(64));
        let mut set = tokio::task::JoinSet::new();
        let mut result = Ok(());
        let mut ids = Vec::with_capacity(self.deletable as usize);
        for i in 0..self.count {
            let permit = sem.clone().acquire_owned().await?;
            let body = serde_json::to_vec(&self.factory.document(i))?;
            let (client, url, p) = (client.clone(), url.clone(), p.clone());
            set.spawn(async move {
                let _permit = permit;
                let r = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await;
                p.rows.fetch_add(1, Ordering::Relaxed);
                match r {
                    Ok(r) if r.status() == 201 => Ok((i, r.header("location").map(str::to_owned))),
                    Ok(r) => Err(anyhow::anyhow!(
                        "preload binding {i}: {url} answered {}: {}",
                        r.status(),
                        String::from_utf8_lossy(r.body())
                    )),
                    Err(e) => Err(anyhow::anyhow!("preload binding {i}: {url}: {e}")),
                }
            });
            while let Some(r) = set.try_join_next() {
                collect(r?, self, &mut ids, &mut result);
            }
            if result.is_err() {
                break;
            }
        }
        while let Some(r) = set.join_next().await {
            collect(r?, self, &mut ids, &mut result);
        }
        if let Some(t) = ticker {
            t.abort();
            progress_bar(
                "preload bindings",
                p.rows.load(Ordering::Relaxed) as usize,
                self.count as usize,
            );
            eprintln!();
        }
        result?;
        Ok(Preloaded {
            plan: self.clone(),
            report: BindingsReport {
                count: self.count,
                method: "Nbsf Register".into(),
                seconds: t0.elapsed().as_secs_f64(),
                index_seconds: None,
                db_mb: None,
            },
            deletable_ids: ids,
        })
    }
}

/// Keeps the id (Location's last segment) of a deletable binding; remembers the first error.
fn collect(
    r: Result<(u64, Option<String>)>,
    plan: &BindingPlan,
    ids: &mut Vec<String>,
    result: &mut Result<()>,
) {
    match r {
        Ok((i, loc)) if i >= plan.count - plan.deletable => {
            if let Some(id) = loc.as_deref().and_then(|l| l.rsplit('/').next()) {
                ids.push(id.to_owned());
            }
        }
        Ok(_) => {}
        Err(e) => {
            if result.is_ok() {
                *result = Err(e);
            }
        }
    }
}

fn spawn_ticker(p: Arc<Progress>, total: u64) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            if p.indexing.load(Ordering::Relaxed) {
                progress_bar("preload bindings (building indexes)", total as usize, total as usize);
            } else {
                progress_bar(
                    "preload bindings",
                    p.rows.load(Ordering::Relaxed) as usize,
                    total as usize,
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}
