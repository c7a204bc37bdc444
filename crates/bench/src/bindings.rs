//! The PCF bindings a BSF scenario starts with (`[preload.bindings]`).
//!
//! A BSF the kit starts gets them from its own bulk-load command, `fivecore bsf preload`, run
//! on the BSF's data directory before the BSF starts (crate::bulk_load): the kit streams one
//! JSON line per binding, `{"bindingId":…,"pcfBinding":{…}}`, into its standard input and reads
//! the summary line it prints. A BSF given with `--target` gets them over
//! Nbsf_Management_Register, 64 at a time. Binding `i` is [`BindingFactory::document`]`(i)`
//! with id [`BindingFactory::binding_id`]`(i)`, so the kit names any preloaded binding (the
//! deletable ones, the UEs an AAR addresses) without reading anything back. The Binding
//! Create procedure registers binding `preloaded + request sequence number`, a UE address no
//! binding holds yet.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use sbi::client::SbiClient;
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;

use crate::bulk_load;
use crate::engine::progress_bar;
use crate::rx::BoundUes;
use crate::scenario::Scenario;
use crate::sched::Rng;

/// The port PCF bindings give as the PCF's SBI endpoint (the PCF's default, docs/DESIGN.md);
/// the BSF only stores it.
const PCF_SBI_PORT: u16 = 7003;

/// The method of a preload by the BSF's own bulk-load command, as the report names it.
pub const PRELOAD_COMMAND: &str = "fivecore bsf preload";

/// Exit status of `fivecore bsf preload` when it skipped bad rows.
const SKIPPED_ROWS: i32 = 3;

/// A PCF the bindings name.
#[derive(Debug, Clone)]
pub struct PcfIdentity {
    /// `pcfDiamHost`: where the Rx proxy sends the AAR of this PCF's UEs.
    pub diam_host: String,
    pub diam_realm: String,
    pub fqdn: String,
    /// `pcfId` (an NfInstanceId).
    pub instance_id: String,
    /// `pcfIpEndPoints`.
    pub sbi_addr: Ipv4Addr,
    pub sbi_port: u16,
}

/// How binding number `i` looks: every binding differs by its UE addresses, SUPI, GPSI and id,
/// and names PCF `i % pcfs.len()`.
#[derive(Debug, Clone)]
pub struct BindingFactory {
    /// MCC + MNC of the SUPIs: binding `i` has `imsi-<prefix><msin_first + i, 10 digits>`.
    pub supi_prefix: String,
    pub msin_first: u64,
    /// GPSI `msisdn-<prefix><msin_first + i, 10 digits>`.
    pub msisdn_prefix: String,
    /// UE IPv4 address of binding 0; binding `i` has this address + `i` (modulo 2^32).
    pub ipv4_first: Ipv4Addr,
    /// With an IPv6 prefix too (dual stack): `<ipv6_base + i>::/64`.
    pub ipv6: bool,
    /// The first /64 (its high 64 bits count up).
    pub ipv6_base: Ipv6Addr,
    pub dnn: String,
    pub sst: u8,
    pub sd: Option<String>,
    pub pcfs: Vec<PcfIdentity>,
    /// Seed of the binding ids.
    pub seed: u64,
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

impl BindingFactory {
    /// The UE's IPv4 address in binding `i`.
    pub fn ue_ipv4(&self, i: u64) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.ipv4_first).wrapping_add(i as u32))
    }

    /// The MSISDN of binding `i` (its GPSI's digits).
    pub fn msisdn(&self, i: u64) -> String {
        format!("{}{:010}", self.msisdn_prefix, self.msin_first + i)
    }

    /// The PCF (index into `pcfs`) binding `i` names.
    pub fn pcf_index(&self, i: u64) -> usize {
        (i % self.pcfs.len().max(1) as u64) as usize
    }

    /// The id of preloaded binding `i`: a version 4 UUID, random-looking, fixed by the seed
    /// (the same ids the BSF's in-process preload gave before the kit moved off it).
    pub fn binding_id(&self, i: u64) -> String {
        let mut s = String::with_capacity(36);
        self.push_binding_id(i, &mut s);
        s
    }

    fn push_binding_id(&self, i: u64, out: &mut String) {
        let a = splitmix(self.seed ^ i.wrapping_mul(0xD6E8_FEB8_6659_FD93));
        let b = splitmix(a ^ i);
        crate::sched::push_uuid_v4(a, b, out);
    }

    /// The PcfBinding a PCF would register for binding `i` (TS 29.521 §5.6.2.2), as JSON.
    pub fn document(&self, i: u64) -> String {
        let mut s = String::with_capacity(512);
        self.push_document(i, &mut s);
        s
    }

    /// The document written straight into `out`: millions are streamed to the BSF's preload,
    /// so no `serde_json::Value` per binding.
    fn push_document(&self, i: u64, out: &mut String) {
        let msin = self.msin_first + i;
        out.push_str("{\"supi\":\"imsi-");
        push_json_text(out, &self.supi_prefix);
        let _ = write!(out, "{msin:010}\",\"gpsi\":\"msisdn-");
        push_json_text(out, &self.msisdn_prefix);
        let _ = write!(out, "{msin:010}\",\"ipv4Addr\":\"{}\",\"dnn\":\"", self.ue_ipv4(i));
        push_json_text(out, &self.dnn);
        let _ = write!(out, "\",\"snssai\":{{\"sst\":{}", self.sst);
        if let Some(sd) = &self.sd {
            out.push_str(",\"sd\":\"");
            push_json_text(out, sd);
            out.push('"');
        }
        out.push('}');
        if self.ipv6 {
            let net = u128::from(self.ipv6_base).wrapping_add(u128::from(i) << 64);
            let _ = write!(out, ",\"ipv6Prefix\":\"{}/64\"", Ipv6Addr::from(net));
        }
        if let Some(p) = self.pcfs.get(self.pcf_index(i)) {
            out.push_str(",\"pcfFqdn\":\"");
            push_json_text(out, &p.fqdn);
            let _ = write!(
                out,
                "\",\"pcfIpEndPoints\":[{{\"ipv4Address\":\"{}\",\"port\":{}}}],\"pcfDiamHost\":\"",
                p.sbi_addr, p.sbi_port
            );
            push_json_text(out, &p.diam_host);
            out.push_str("\",\"pcfDiamRealm\":\"");
            push_json_text(out, &p.diam_realm);
            out.push_str("\",\"pcfId\":\"");
            push_json_text(out, &p.instance_id);
            out.push('"');
        }
        out.push('}');
    }

    /// The line `fivecore bsf preload` reads for binding `i`:
    /// `{"bindingId":"<id>","pcfBinding":{…}}` and a newline.
    pub fn push_preload_line(&self, i: u64, out: &mut String) {
        out.push_str("{\"bindingId\":\"");
        self.push_binding_id(i, out);
        out.push_str("\",\"pcfBinding\":");
        self.push_document(i, out);
        out.push_str("}\n");
    }
}

/// `s` as the inside of a JSON string (RFC 8259 §7): quote, backslash and control characters
/// escaped. The scenario's names are plain ASCII; this keeps any other name valid JSON.
pub(crate) fn push_json_text(out: &mut String, s: &str) {
    if !s.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20) {
        out.push_str(s);
        return;
    }
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
}

/// The line `fivecore bsf preload` prints on stdout when it is done.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PreloadSummary {
    bindings: u64,
    skipped: u64,
    #[serde(rename = "seconds")]
    _seconds: f64,
    index_seconds: f64,
    db_bytes: u64,
}

impl PreloadSummary {
    /// The last line of `stdout` that is the summary.
    fn find(stdout: &str) -> Option<PreloadSummary> {
        stdout.lines().rev().find_map(|l| serde_json::from_str(l.trim()).ok())
    }
}

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
    /// `fivecore bsf preload` (the BSF's bulk-load command, run before the BSF started) or
    /// `Nbsf Register` (over HTTP).
    pub method: String,
    /// Wall seconds, the command's start to its exit (or the first Register to the last).
    pub seconds: f64,
    /// Of which building the secondary indexes (bulk-load command only, as it reports).
    pub index_seconds: Option<f64>,
    /// The NF's database afterwards (bulk-load command only, as it reports).
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
        BoundUes::bindings(self.plan.factory.clone(), self.plan.count - self.plan.deletable)
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

    /// Preloads the bindings with `<exe> bsf preload` on the data directory `data_dir` of a
    /// BSF that is not running yet, `config` being the configuration file the BSF will be
    /// started with. The lines are generated on a thread of the kit's while the command loads
    /// them. Every binding must be loaded: a skipped one (exit 3) fails the run, since the
    /// procedures name bindings by index.
    pub async fn preload_command(
        &self,
        exe: &Path,
        data_dir: &Path,
        config: Option<&Path>,
        progress: bool,
    ) -> Result<Preloaded> {
        let mut args: Vec<OsString> = vec!["bsf".into(), "preload".into(), "--data-dir".into()];
        args.push(data_dir.into());
        if let Some(c) = config {
            args.push("--config".into());
            args.push(c.into());
        }
        args.extend(["--input", "-", "--on-bad-row", "stop"].map(OsString::from));
        if progress {
            args.push("--progress".into());
        }
        let (factory, count) = (self.factory.clone(), self.count);
        let done = bulk_load::run(exe, &args, progress, move |w| {
            // About 1 MB of lines per write: one String reused, no value per binding.
            let mut buf = String::with_capacity(1 << 20);
            for i in 0..count {
                factory.push_preload_line(i, &mut buf);
                if buf.len() >= (1 << 20) - 1024 {
                    w.write_all(buf.as_bytes())?;
                    buf.clear();
                }
            }
            w.write_all(buf.as_bytes())
        })
        .await?;
        let shown = bulk_load::command_line(exe, &args);
        match done.code() {
            0 => {}
            SKIPPED_ROWS => {
                return Err(bulk_load::failure(&format!("`{shown}` skipped bindings:"), &done))
            }
            _ => return Err(bulk_load::failure(&format!("`{shown}`"), &done)),
        }
        let summary = PreloadSummary::find(&done.stdout).with_context(|| {
            format!("`{shown}` printed no summary line; its stdout: {:?}", done.stdout)
        })?;
        if summary.bindings != self.count || summary.skipped != 0 {
            bail!(
                "`{shown}` loaded {} bindings ({} skipped) of {}",
                summary.bindings,
                summary.skipped,
                self.count
            );
        }
        let ids = (self.count - self.deletable..self.count).map(|i| self.factory.binding_id(i));
        Ok(Preloaded {
            plan: self.clone(),
            report: BindingsReport {
                count: summary.bindings,
                method: PRELOAD_COMMAND.into(),
                seconds: done.seconds,
                index_seconds: Some(summary.index_seconds),
                db_mb: Some(summary.db_bytes as f64 / 1_048_576.0),
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
        let p = Arc::new(AtomicU64::new(0));
        let ticker = progress.then(|| spawn_ticker(p.clone(), self.count));
        let url = format!("{base}/nbsf-management/v1/pcfBindings");
        let sem = Arc::new(Semaphore::new(64));
        let mut set = tokio::task::JoinSet::new();
        let mut result = Ok(());
        let mut ids = Vec::with_capacity(self.deletable as usize);
        for i in 0..self.count {
            let permit = sem.clone().acquire_owned().await?;
            let body = self.factory.document(i).into_bytes();
            let (client, url, p) = (client.clone(), url.clone(), p.clone());
            set.spawn(async move {
                let _permit = permit;
                let r = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await;
                p.fetch_add(1, Ordering::Relaxed);
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
                p.load(Ordering::Relaxed) as usize,
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

fn spawn_ticker(p: Arc<AtomicU64>, total: u64) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            progress_bar("preload bindings", p.load(Ordering::Relaxed) as usize, total as usize);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn factory() -> BindingFactory {
        BindingFactory {
            supi_prefix: "00101".into(),
            msin_first: 7,
            msisdn_prefix: "33".into(),
            ipv4_first: Ipv4Addr::new(10, 0, 0, 1),
            ipv6: true,
            ipv6_base: "2001:db8::".parse().unwrap(),
            dnn: "IMS".into(),
            sst: 1,
            sd: Some("00000A".into()),
            pcfs: ["pcf1", "pcf2"]
                .iter()
                .map(|h| PcfIdentity {
                    diam_host: format!("{h}.pcf.example"),
                    diam_realm: "pcf.example".into(),
                    fqdn: format!("{h}.pcf.example"),
                    instance_id: format!("{h}-id"),
                    sbi_addr: Ipv4Addr::new(192, 0, 2, 1),
                    sbi_port: 7003,
                })
                .collect(),
            seed: 42,
        }
    }

    /// The ids and documents are those the BSF's in-process preload (`bsf::preload`) made for
    /// the same factory, recorded before the kit moved off it: runs stay comparable.
    #[test]
    fn ids_and_documents_are_stable() {
        let f = factory();
        let ids = [
            (0, "bdd73226-2feb-4e95-97e1-faba65107204"),
            (1, "3b944787-4709-475e-8420-177f7cdbf6c3"),
            (12_345, "6309969f-bc34-4383-bffc-cc41ac35017f"),
            (9_999_999, "696650be-fb4f-437d-9f57-d6cdbf5c5179"),
        ];
        for (i, id) in ids {
            assert_eq!(f.binding_id(i), id);
        }
        let doc: Value = serde_json::from_str(&f.document(12_345)).unwrap();
        assert_eq!(
            doc,
            json!({"dnn":"IMS","gpsi":"msisdn-330000012352","ipv4Addr":"10.0.48.58",
                "ipv6Prefix":"2001:db8:0:3039::/64","pcfDiamHost":"pcf2.pcf.example",
                "pcfDiamRealm":"pcf.example","pcfFqdn":"pcf2.pcf.example","pcfId":"pcf2-id",
                "pcfIpEndPoints":[{"ipv4Address":"192.0.2.1","port":7003}],
                "snssai":{"sd":"00000A","sst":1},"supi":"imsi-001010000012352"})
        );
        let single = BindingFactory { ipv6: false, sd: None, pcfs: Vec::new(), ..factory() };
        let doc: Value = serde_json::from_str(&single.document(0)).unwrap();
        assert_eq!(
            doc,
            json!({"dnn":"IMS","gpsi":"msisdn-330000000007","ipv4Addr":"10.0.0.1",
                "snssai":{"sst":1},"supi":"imsi-001010000000007"})
        );
    }

    /// Every line is what `fivecore bsf preload` reads: one JSON object a line with the
    /// binding's id and its PcfBinding, nothing else.
    #[test]
    fn preload_lines_follow_the_commands_contract() {
        let f = factory();
        let mut buf = String::new();
        for i in 0..1000 {
            f.push_preload_line(i, &mut buf);
        }
        let mut seen = std::collections::HashSet::new();
        for (i, line) in buf.split_terminator('\n').enumerate() {
            let v: Value = serde_json::from_str(line).unwrap();
            let o = v.as_object().unwrap();
            assert_eq!(o.len(), 2, "{line}");
            let id = o["bindingId"].as_str().unwrap();
            assert_eq!(id, f.binding_id(i as u64));
            assert_eq!((id.len(), &id[14..15]), (36, "4"), "a version 4 UUID: {id}");
            assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"), "RFC 9562 variant: {id}");
            assert!(seen.insert(id.to_owned()), "ids are distinct");
            let doc: Value = serde_json::from_str(&f.document(i as u64)).unwrap();
            assert_eq!(o["pcfBinding"], doc);
        }
        assert_eq!(seen.len(), 1000);
        assert!(buf.ends_with("}\n"));
    }

    #[test]
    fn names_with_quotes_stay_valid_json() {
        let f = BindingFactory { dnn: "a\"b\\c\u{1}".into(), ..factory() };
        let doc: Value = serde_json::from_str(&f.document(3)).unwrap();
        assert_eq!(doc["dnn"], "a\"b\\c\u{1}");
    }

    #[test]
    fn the_summary_line_is_found_after_other_output() {
        let out = "loading\n{\"bindings\":1000,\"skipped\":0,\"seconds\":0.5,\"indexSeconds\":0.1,\
                   \"dbBytes\":1048576}\n";
        let s = PreloadSummary::find(out).unwrap();
        assert_eq!((s.bindings, s.skipped, s.db_bytes), (1000, 0, 1_048_576));
        assert_eq!(s.index_seconds, 0.1);
        assert!(PreloadSummary::find("no summary\n").is_none());
    }

    #[test]
    fn the_plan_names_its_deletable_bindings_by_index() {
        let s = Scenario::load("bsf-s1-15k-gr2").unwrap();
        let plan = BindingPlan::new(&s, Some(100)).unwrap().unwrap();
        assert!(plan.deletable > 0 && plan.deletable <= 25);
        let again = BindingPlan::new(&s, Some(100)).unwrap().unwrap();
        assert_eq!(plan.factory.binding_id(99), again.factory.binding_id(99));
        assert_eq!(plan.factory.document(5), again.factory.document(5), "the same every run");
    }
}
