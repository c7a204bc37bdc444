//! A Data Director scenario's run: the consumers started, the scenario's filters and feeds
//! created through the admin API (`PUT /dd-admin/v1/{filters,feeds}/{name}`, the names with
//! the run's tag so a `--target` Data Director used before keeps nothing of another run), the
//! sources' open loop, the drain until the feeds have delivered what was accepted, the feeds
//! and filters deleted again, and the report.
//!
//! A source that is a real NF (`nf`, the kit started it with `[<nf>.copy]` on) is not
//! simulated: the scenario's call mix drives it (the engine's load, [`NfLoad`], run alongside
//! the simulated sources), its offered and accepted copies come from its `/metrics` and the
//! consumers count its copies by NF instance and its own sequence. The report then has both
//! parts: the call mix's procedures and the Data Director's sources and feeds.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use sbi::client::{ClientConfig, SbiClient};
use sbi::observe::ProcessUsage;
use serde_json::{json, Value};
use tokio::time::Instant;

use super::config::{CopySource, FeedDef, FeedKind};
use super::consumer::{self, Consumer, FeedCounters};
use super::kafka::{self, KafkaConsumer};
use super::report::{feed_verdict, DdReport, EndpointRow, FeedRow, SourceRow};
use super::source::{Dispatched, RunClock, Source, SourceSpec};
use crate::engine::RunConfig;
use crate::host;
use crate::report::{GeneratorReport, PreloadReport, Report, Totals};
use crate::stats::{Coarse, SecondReport};

/// A feed of the run: its definition, the name it has in the Data Director, its consumers.
struct Feed<'a> {
    def: &'a FeedDef,
    name: String,
    counters: Arc<FeedCounters>,
    consumers: Vec<Consumer>,
    /// A Kafka feed's consumers (of its topic, the feed's name), instead.
    kafka: Vec<KafkaConsumer>,
}

impl Feed<'_> {
    /// The report's name of each consumer: its address, or its topic and partitions.
    fn endpoints(&self) -> Vec<String> {
        let tcp = self.consumers.iter().map(|c| c.addr.to_string());
        tcp.chain(self.kafka.iter().map(|k| k.label.clone())).collect()
    }
}

/// The Data Director's CPU seconds and RSS MB (when the kit started it), the kit's CPU seconds,
/// the host's steal seconds, the Kafka broker's CPU seconds and RSS MB (when the kit started
/// it).
type Sample = (Option<(f64, f64)>, f64, Option<f64>, Option<(f64, f64)>);

fn usage(pids: &[u32]) -> Option<(f64, f64)> {
    if pids.is_empty() {
        return None;
    }
    let mut cpu = 0.0;
    let mut rss = 0.0;
    for p in pids {
        let u = ProcessUsage::read_pid(*p)?;
        cpu += u.cpu_seconds();
        rss += u.rss_bytes as f64 / 1_048_576.0;
    }
    Some((cpu, rss))
}

fn self_cpu() -> f64 {
    ProcessUsage::read_self().map_or(0.0, |u| u.cpu_seconds())
}

fn sample((pids, broker): &(Vec<u32>, Vec<u32>)) -> Sample {
    (usage(pids), self_cpu(), host::steal_seconds(), usage(broker))
}

/// A tag for this run's names in the Data Director: the start's seconds and the kit's pid, in
/// hex (at most 15 characters: a name of 48 and its tag fit the admin API's 64).
fn run_tag() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!("{:x}-{:x}", secs & 0xff_ffff, std::process::id() & 0xff_ffff)
}

/// Creates or replaces `kind/name` (`filters`, `feeds`) with `body`.
async fn put(client: &SbiClient, base: &str, kind: &str, name: &str, body: &Value) -> Result<()> {
    let url = format!("{base}/dd-admin/v1/{kind}/{name}");
    let r = client.put(&url).json(body).send().await.with_context(|| format!("PUT {url}"))?;
    if !matches!(r.status().as_u16(), 200 | 201) {
        bail!(
            "the Data Director refused {kind} {name} ({}): {}",
            r.status(),
            String::from_utf8_lossy(r.body())
        );
    }
    Ok(())
}

/// The sink object of `def`, its endpoints the consumers; a Kafka feed's, its topic (`topic`,
/// the feed's name in the Data Director: the run's own) on the broker at `bootstrap`.
fn sink(def: &FeedDef, consumers: &[Consumer], topic: &str, bootstrap: Option<&str>) -> Value {
    let mut sink = def.sink.clone();
    sink.insert("type".into(), json!(def.kind.as_str()));
    if def.kind == FeedKind::Kafka {
        sink.insert("topic".into(), json!(topic));
        if let Some(b) = bootstrap {
            sink.insert("bootstrap_servers".into(), json!(b));
        }
        return Value::Object(sink);
    }
    let endpoints: Vec<Value> = consumers
        .iter()
        .zip(&def.weights)
        .map(|(c, w)| match def.kind {
            FeedKind::Http2 => json!({"uri": format!("http://{}/copies", c.addr), "weight": w}),
            _ => json!({"address": c.addr.to_string(), "weight": w}),
        })
        .collect();
    sink.insert("endpoints".into(), Value::Array(endpoints));
    sink.insert("balance".into(), json!(def.balance));
    if def.kind == FeedKind::Tcp {
        sink.insert("delivery".into(), json!(def.delivery));
    }
    Value::Object(sink)
}

/// The call mix that drives a scenario's real NFs (the engine's run), started with the copy
/// sources once the feeds exist.
pub type NfLoad = Pin<Box<dyn Future<Output = Result<Report>> + Send>>;

/// Runs a Data Director scenario against the Data Director of `cfg.targets` (`dd`); `nf_load`
/// drives the real NFs among its sources.
pub async fn run(cfg: RunConfig, nf_load: Option<NfLoad>) -> Result<Report> {
    let s = &cfg.scenario;
    let d = s.dd.as_ref().context("not a Data Director scenario (no [dd])")?;
    let target = cfg.targets.iter().find(|t| t.nf == "dd").context("no target for dd")?;
    let base = target.url.clone();
    let broker = cfg.targets.iter().find(|t| t.nf == "kafka");
    let bootstrap = broker.map(|t| t.url.as_str());
    if d.feeds.iter().any(|f| f.kind == FeedKind::Kafka) && bootstrap.is_none() {
        bail!("{}: a Kafka feed needs a broker (a target named kafka)", s.name);
    }
    let pids = (target.pid.into_iter().collect(), broker.and_then(|t| t.pid).into_iter().collect());
    let admin = SbiClient::new(&ClientConfig::default()).context("building the SBI client")?;
    let tag = run_tag();

    // The consumers first: the feeds name them.
    let mut feeds = Vec::new();
    for def in &d.feeds {
        let counters = FeedCounters::new(def.weights.len(), d.sources.len());
        let mut consumers = Vec::new();
        for i in 0..def.weights.len() {
            consumers.push(match def.kind {
                FeedKind::Tcp => {
                    consumer::tcp(counters.clone(), i, def.delivery == "acknowledged").await?
                }
                FeedKind::Http2 => consumer::http2(counters.clone(), i).await?,
                // After the feed: it creates the topic.
                FeedKind::Kafka => break,
            });
        }
        let name = format!("{}-{tag}", def.name);
        feeds.push(Feed { def, name, counters, consumers, kafka: Vec::new() });
    }
    let filter_name = |n: &str| format!("{n}-{tag}");
    let mut created_filters = Vec::new();
    let mut created_feeds = Vec::new();
    let setup = async {
        for f in &d.filters {
            let name = filter_name(&f.name);
            put(&admin, &base, "filters", &name, &json!({"name": name, "filter": f.filter}))
                .await?;
            created_filters.push(name);
        }
        for f in &mut feeds {
            let sink = sink(f.def, &f.consumers, &f.name, bootstrap);
            let mut body = json!({"name": f.name, "sink": sink, "start": "latest"});
            if let Some(x) = &f.def.filter {
                body["filter"] = json!(filter_name(x));
            }
            put(&admin, &base, "feeds", &f.name, &body).await?;
            created_feeds.push(f.name.clone());
            if let (FeedKind::Kafka, Some(b)) = (f.def.kind, bootstrap) {
                f.kafka = kafka_consumers(b, &f.name, f.def.weights.len(), &f.counters).await?;
            }
        }
        anyhow::Ok(())
    };
    let setup = setup.await;
    let result = match setup {
        Ok(()) => load(&cfg, &base, pids, &feeds, nf_load).await,
        Err(e) => Err(e),
    };
    // A --target Data Director keeps no feed of this run pushing to consumers that are gone.
    let mut cleanup = Vec::new();
    for (kind, names) in [("feeds", &created_feeds), ("filters", &created_filters)] {
        for n in names {
            let url = format!("{base}/dd-admin/v1/{kind}/{n}");
            match admin.delete(&url).send().await {
                Ok(r) if r.status().as_u16() == 204 => {}
                Ok(r) => cleanup.push(format!("DELETE {url}: {}", r.status())),
                Err(e) => cleanup.push(format!("DELETE {url}: {e}")),
            }
        }
    }
    let mut report = result?;
    if !cleanup.is_empty() {
        report.warnings.push(format!(
            "the run's feeds and filters were not all deleted: {}",
            cleanup.join("; ")
        ));
    }
    Ok(report)
}

/// `n` consumers of the Kafka feed's topic `topic`, its partitions shared among them.
async fn kafka_consumers(
    bootstrap: &str,
    topic: &str,
    n: usize,
    counters: &Arc<FeedCounters>,
) -> Result<Vec<KafkaConsumer>> {
    let (b, t) = (bootstrap.to_string(), topic.to_string());
    let parts =
        tokio::task::spawn_blocking(move || kafka::partitions(&b, &t, Duration::from_secs(30)))
            .await??;
    let mut out = Vec::new();
    for (i, p) in kafka::split(&parts, n).iter().enumerate() {
        out.push(kafka::consume(bootstrap, topic, p, counters.clone(), i)?);
    }
    Ok(out)
}

/// The Data Director's PIDs and the broker's, when the kit started them.
type Pids = (Vec<u32>, Vec<u32>);

/// A real NF's copier counters (`dd_copies_total`, `dd_copies_dropped_total`) on its
/// `/metrics`.
#[derive(Debug, Clone, Copy, Default)]
struct CopyCounts {
    /// Copies kept for the Data Director: the NF's sequence counts these.
    copies: u64,
    /// Dropped before they were kept (buffer full, too long, the copier stopping).
    dropped: u64,
    /// Kept, then refused by the Data Director for good.
    rejected: u64,
}

impl CopyCounts {
    fn offered(&self) -> u64 {
        self.copies + self.dropped
    }

    fn accepted(&self) -> u64 {
        self.copies.saturating_sub(self.rejected)
    }

    fn since(&self, a: &CopyCounts) -> CopyCounts {
        CopyCounts {
            copies: self.copies.saturating_sub(a.copies),
            dropped: self.dropped.saturating_sub(a.dropped),
            rejected: self.rejected.saturating_sub(a.rejected),
        }
    }

    /// The counters in a Prometheus text exposition.
    fn parse(text: &str) -> Result<CopyCounts> {
        let mut c = CopyCounts::default();
        let mut seen = false;
        for line in text.lines() {
            let Some((name, value)) = line.rsplit_once(' ') else { continue };
            let v = || -> Result<u64> {
                Ok(value.parse::<f64>().with_context(|| format!("metric line {line:?}"))? as u64)
            };
            if name.starts_with("dd_copies_total{") {
                c.copies += v()?;
                seen = true;
            } else if name == "dd_copies_dropped_total{reason=\"rejected\"}" {
                c.rejected += v()?;
            } else if name.starts_with("dd_copies_dropped_total{") {
                c.dropped += v()?;
            }
        }
        if !seen {
            bail!("no dd_copies_total: is its [<nf>.copy] enabled?");
        }
        Ok(c)
    }
}

/// A source that is a real NF: its definition, its index among the sources and its apiRoot.
struct RealSource<'a> {
    def: &'a CopySource,
    index: usize,
    url: String,
}

async fn copy_counts(client: &SbiClient, real: &[RealSource<'_>]) -> Result<Vec<CopyCounts>> {
    let mut out = Vec::new();
    for r in real {
        let url = format!("{}/metrics", r.url);
        let resp = client.get(&url).send().await.with_context(|| format!("GET {url}"))?;
        if resp.status().as_u16() != 200 {
            bail!("GET {url}: {}", resp.status());
        }
        let text = String::from_utf8_lossy(resp.body());
        out.push(
            CopyCounts::parse(&text).with_context(|| format!("source {}: {url}", r.def.name))?,
        );
    }
    Ok(out)
}

/// The load, the drain and the numbers.
async fn load(
    cfg: &RunConfig,
    base: &str,
    pids: Pids,
    feeds: &[Feed<'_>],
    nf_load: Option<NfLoad>,
) -> Result<Report> {
    let s = &cfg.scenario;
    let d = s.dd.as_ref().expect("checked by run");
    let scale = cfg.rate / s.load.rate;
    let timeout = Duration::from_millis(s.load.timeout_ms);
    let mut sources = Vec::new();
    let mut real = Vec::new();
    for (i, def) in d.sources.iter().enumerate() {
        if let Some(nf) = &def.nf {
            let t = cfg.targets.iter().find(|t| &t.nf == nf);
            let t = t.with_context(|| format!("source {}: no target for {nf}", def.name))?;
            real.push(RealSource { def, index: i, url: t.url.clone() });
            continue;
        }
        let src = Source::new(SourceSpec {
            def,
            dd: d,
            index: i,
            rate: def.mps * scale,
            base_url: base,
            generators: &s.generators,
            timeout,
        })?;
        src.open().await.with_context(|| format!("source {}: connecting to {base}", def.name))?;
        sources.push(Arc::new(src));
    }
    if real.is_empty() != nf_load.is_none() {
        bail!("{}: a real NF source needs the call mix that drives it, and only it", s.name);
    }
    // What the real NFs copied before (a preload, an earlier run): their run starts after it.
    let client = SbiClient::new(&ClientConfig::default()).context("building the SBI client")?;
    let before = copy_counts(&client, &real).await?;
    for (r, c) in real.iter().zip(&before) {
        for f in feeds {
            f.counters.expect_nf(r.index, &r.def.nf_type, c.copies);
        }
    }
    let lead = Duration::from_millis(50);
    let epoch_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .context("the clock is before 1970")?
        .as_nanos() as u64
        + lead.as_nanos() as u64;
    let clock = RunClock {
        start: Instant::now() + lead,
        epoch_ns,
        measure_from: Duration::from_secs_f64(cfg.warmup_s),
        measure_to: Duration::from_secs_f64(cfg.warmup_s + cfg.duration_s),
    };
    for f in feeds {
        f.counters.start(clock);
    }
    let secs = cfg.warmup_s + cfg.duration_s;

    // Once a second: the Data Director's CPU and RSS, the kit's CPU, steal; and at the two ends
    // of the measured window.
    let samples: Arc<Mutex<Vec<Sample>>> = Arc::default();
    let marks: Arc<Mutex<[Option<Sample>; 2]>> = Arc::default();
    let sampler = {
        let (samples, marks) = (samples.clone(), marks.clone());
        let progress = cfg.progress.then(|| {
            let sources = sources.clone();
            let counters: Vec<(String, Arc<FeedCounters>)> =
                feeds.iter().map(|f| (f.def.name.clone(), f.counters.clone())).collect();
            move |tick: u64| progress_line(tick, &sources, &counters)
        });
        let ends = [clock.start + clock.measure_from, clock.start + clock.measure_to];
        tokio::spawn(async move {
            samples.lock().unwrap().push(sample(&pids));
            let mut tick = 1u64;
            let mut next_mark = 0;
            loop {
                let tick_at = clock.start + Duration::from_secs(tick);
                if next_mark < 2 && ends[next_mark] <= tick_at {
                    tokio::time::sleep_until(ends[next_mark]).await;
                    marks.lock().unwrap()[next_mark] = Some(sample(&pids));
                    next_mark += 1;
                    continue;
                }
                tokio::time::sleep_until(tick_at).await;
                samples.lock().unwrap().push(sample(&pids));
                if let Some(p) = &progress {
                    eprintln!("{}", p(tick));
                }
                tick += 1;
            }
        })
    };

    // The real NFs' counters at the two ends of the measured window.
    let real_marks = {
        let targets: Vec<(String, String)> =
            real.iter().map(|r| (r.def.name.clone(), r.url.clone())).collect();
        let ends = [clock.start + clock.measure_from, clock.start + clock.measure_to];
        let client = client.clone();
        tokio::spawn(async move {
            let mut marks = Vec::new();
            for end in ends {
                tokio::time::sleep_until(end).await;
                let mut at = Vec::new();
                for (name, url) in &targets {
                    let url = format!("{url}/metrics");
                    let r = client.get(&url).send().await.with_context(|| format!("GET {url}"));
                    let text = r.map(|r| String::from_utf8_lossy(r.body()).into_owned());
                    at.push(
                        text.and_then(|t| CopyCounts::parse(&t)).with_context(|| name.clone())?,
                    );
                }
                marks.push(at);
            }
            anyhow::Ok(marks)
        })
    };
    let gen_cpu_start = self_cpu();
    let nf_task = nf_load.map(tokio::spawn);
    let mut tasks = Vec::new();
    for src in &sources {
        tasks.push(tokio::spawn(src.clone().run(clock, secs, timeout)));
    }
    let mut dispatched = Vec::new();
    for t in tasks {
        dispatched.push(t.await??);
    }
    let nf_report = match nf_task {
        Some(t) => Some(t.await?.context("the call mix driving the real NFs")?),
        None => None,
    };
    let load_wall = clock.start.elapsed().as_secs_f64().max(1e-9);
    let gen_cpu = self_cpu() - gen_cpu_start;
    let real_marks = if real.is_empty() {
        real_marks.abort();
        Vec::new()
    } else {
        real_marks.await??
    };
    let after = copy_counts(&client, &real).await?;
    let real_totals: Vec<CopyCounts> = after.iter().zip(&before).map(|(a, b)| a.since(b)).collect();
    let accepted: u64 = sources.iter().map(|s| s.all.accepted.load(Ordering::Relaxed)).sum::<u64>()
        + real_totals.iter().map(|c| c.accepted()).sum::<u64>();
    let (drain_s, drained) = drain(feeds, accepted, Duration::from_secs_f64(d.drain_s)).await;
    // The marks are in the past by now, unless the window outlasted the load (it cannot).
    tokio::time::sleep(Duration::from_millis(20)).await;
    sampler.abort();

    let samples = samples.lock().unwrap().clone();
    let marks = *marks.lock().unwrap();
    let (cpu, drain) = ((gen_cpu, load_wall), (drain_s, drained));
    let real = RealRun { sources: &real, window: &real_marks, totals: &real_totals };
    let dd = report(cfg, feeds, &sources, &real, &dispatched, &samples, &marks, cpu, drain)?;
    Ok(match nf_report {
        Some(nf) => with_call_mix(dd, nf),
        None => dd,
    })
}

/// The real NF sources of a run, their counters at the window's two ends and over the run.
struct RealRun<'a> {
    sources: &'a [RealSource<'a>],
    window: &'a [Vec<CopyCounts>],
    totals: &'a [CopyCounts],
}

/// One report of a run with a call mix: the Data Director's (its sources, feeds, CPU and
/// timeline of copies) with the call mix's procedures, egress and preload, and the failures and
/// warnings of both.
fn with_call_mix(mut dd: Report, nf: Report) -> Report {
    dd.preload = nf.preload;
    dd.procedures = nf.procedures;
    dd.egress = nf.egress;
    dd.nf_latency = nf.nf_latency;
    dd.criteria_passed &= nf.criteria_passed;
    dd.failures.extend(nf.failures.into_iter().map(|f| format!("call mix: {f}")));
    dd.warnings.extend(nf.warnings.into_iter().map(|w| format!("call mix: {w}")));
    dd.warnings.push(format!(
        "the call mix driving the real NFs: {:.1} TPS achieved of {:.1} offered",
        nf.totals.achieved_tps, nf.rate
    ));
    dd
}

/// One progress line for second `tick` (just ended).
fn progress_line(
    tick: u64,
    sources: &[Arc<Source>],
    feeds: &[(String, Arc<FeedCounters>)],
) -> String {
    let i = tick as usize - 1;
    let (mut offered, mut accepted, mut refused) = (0, 0, 0);
    for s in sources {
        if let Some(x) = s.seconds.lock().unwrap().get(i) {
            offered += x.offered;
            accepted += x.accepted;
            refused += x.refused + x.failed;
        }
    }
    let mut line = format!(
        "[{tick:>4}s] copies offered {offered:>7}/s accepted {accepted:>7}/s refused/failed {refused:>5}"
    );
    for (name, c) in feeds {
        let (n, e2e) = c.second(i).unwrap_or_default();
        let p99 = e2e.quantile_ms(0.99).unwrap_or(0.0);
        line.push_str(&format!(" | {name} {n}/s E2E p99 {p99:.2} ms"));
    }
    line
}

/// Waits until every unfiltered feed has every accepted copy and the feeds are quiet, or the
/// feeds have been quiet for 3 s, or `max`: (seconds waited, every unfiltered feed complete).
async fn drain(feeds: &[Feed<'_>], accepted: u64, max: Duration) -> (f64, bool) {
    let t0 = Instant::now();
    let received =
        || -> u64 { feeds.iter().map(|f| f.counters.received.load(Ordering::Relaxed)).sum() };
    let (mut last, mut changed) = (received(), t0);
    loop {
        let complete = feeds
            .iter()
            .filter(|f| f.def.unfiltered())
            .all(|f| f.counters.totals().distinct.iter().sum::<u64>() >= accepted);
        let now = Instant::now();
        let got = received();
        if got != last {
            (last, changed) = (got, now);
        }
        let quiet = now - changed;
        if (complete && quiet >= Duration::from_secs(1))
            || quiet >= Duration::from_secs(3)
            || now - t0 >= max
        {
            return ((now - t0).as_secs_f64(), complete);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[allow(clippy::too_many_arguments)]
fn report(
    cfg: &RunConfig,
    feeds: &[Feed<'_>],
    sources: &[Arc<Source>],
    real: &RealRun<'_>,
    dispatched: &[Dispatched],
    samples: &[Sample],
    marks: &[Option<Sample>; 2],
    (gen_cpu, load_wall): (f64, f64),
    (drain_s, drained): (f64, bool),
) -> Result<Report> {
    let s = &cfg.scenario;
    let d = s.dd.as_ref().expect("checked by run");
    let wall = cfg.duration_s;
    let mut failures = Vec::new();
    let mut warnings = Vec::new();
    let mut criteria = s.criteria.clone();
    if let Some(ms) = cfg.max_p99_ms {
        criteria.max_p99_ms = ms;
        warnings.push(format!("the scenario's E2E p99 bounds were replaced by --max-p99-ms {ms}: latency was not judged by them"));
    }

    let mut source_rows = Vec::new();
    for src in sources {
        let w = &src.window;
        let n = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        let offered = n(&w.offered);
        let accepted = n(&w.accepted);
        let success = if offered == 0 { 1.0 } else { accepted as f64 / offered as f64 };
        let verdict = if offered == 0 {
            "n/a (none offered)".to_string()
        } else if success < criteria.min_success_rate {
            let v = format!(
                "FAIL: accepted {:.3}% < {:.3}% ({} refused with 503, {} failed, {} dropped)",
                success * 100.0,
                criteria.min_success_rate * 100.0,
                n(&w.refused),
                n(&w.failed),
                n(&w.dropped)
            );
            failures.push(format!("source {}: {v}", src.name));
            v
        } else {
            "pass".into()
        };
        source_rows.push(SourceRow {
            name: src.name.clone(),
            nf_type: src.nf_type.clone(),
            trigger_points: src.trigger_points.clone(),
            message_bytes: src.message_bytes,
            offered_mps: src.rate,
            offered,
            sent: n(&w.sent),
            accepted,
            accepted_mps: accepted as f64 / wall,
            refused: n(&w.refused),
            refused_batches: n(&w.refused_batches),
            failed: n(&w.failed),
            dropped: n(&w.dropped),
            posts: n(&w.posts),
            success_rate: success,
            post_latency: src.post_latency(),
            connections: src.connections(),
            accepted_total: n(&src.all.accepted),
            verdict,
        });
    }
    for (i, r) in real.sources.iter().enumerate() {
        let w = match (real.window.first(), real.window.get(1)) {
            (Some(a), Some(b)) => b[i].since(&a[i]),
            _ => CopyCounts::default(),
        };
        let (offered, accepted) = (w.offered(), w.accepted());
        let success = if offered == 0 { 1.0 } else { accepted as f64 / offered as f64 };
        let verdict = if offered == 0 {
            let v = "FAIL: the NF copied nothing in the window".to_string();
            failures.push(format!("source {}: {v}", r.def.name));
            v
        } else if success < criteria.min_success_rate {
            let v = format!(
                "FAIL: accepted {:.3}% < {:.3}% ({} dropped by the NF's copier, {} refused for good)",
                success * 100.0,
                criteria.min_success_rate * 100.0,
                w.dropped,
                w.rejected
            );
            failures.push(format!("source {}: {v}", r.def.name));
            v
        } else {
            "pass".into()
        };
        source_rows.push(SourceRow {
            name: r.def.name.clone(),
            nf_type: r.def.nf_type.clone(),
            trigger_points: r.def.trigger_points.clone(),
            message_bytes: r.def.message_bytes,
            offered_mps: r.def.mps * cfg.rate / s.load.rate,
            offered,
            sent: w.copies,
            accepted,
            accepted_mps: accepted as f64 / wall,
            refused: 0,
            refused_batches: 0,
            failed: w.rejected,
            dropped: w.dropped,
            posts: 0,
            success_rate: success,
            post_latency: Default::default(),
            connections: 0,
            accepted_total: real.totals[i].accepted(),
            verdict,
        });
    }
    let accepted_total: u64 = source_rows.iter().map(|r| r.accepted_total).sum();
    let mut feed_rows = Vec::new();
    for f in feeds {
        let t = f.counters.totals();
        let distinct: u64 = t.distinct.iter().sum();
        let endpoints = f
            .endpoints()
            .into_iter()
            .zip(&f.def.weights)
            .zip(&t.per_endpoint)
            .map(|((address, w), n)| EndpointRow {
                address,
                weight: *w,
                copies: *n,
                share_pct: *n as f64 * 100.0 / t.received.max(1) as f64,
            })
            .collect();
        let share = distinct as f64 / accepted_total.max(1) as f64;
        let mut row = FeedRow {
            name: f.def.name.clone(),
            kind: f.def.kind.as_str().into(),
            filter: f.def.filter.clone(),
            balance: f.def.balance.clone(),
            delivery: f.def.delivery.clone(),
            endpoints,
            expected_share: f.def.expected_share,
            delivered: t.window_copies,
            delivered_mps: t.window_copies as f64 / wall,
            delivered_mb_s: t.window_bytes as f64 / wall / 1e6,
            e2e: t.e2e,
            received_total: t.received,
            distinct_total: distinct,
            duplicates: t.duplicates,
            malformed: t.malformed,
            foreign: t.foreign,
            nf_instances: t.instances.clone(),
            accepted_total,
            share,
            success_rate: f.def.unfiltered().then_some(share.min(1.0)),
            reference_mps: f.def.reference_mps,
            reference_e2e_avg_ms: f.def.reference_e2e_avg_ms,
            criteria: {
                let mut c = f.def.criteria.clone().unwrap_or_else(|| s.criteria.clone());
                if let Some(ms) = cfg.max_p99_ms {
                    c.max_p99_ms = ms;
                }
                c
            },
            verdict: String::new(),
        };
        let (verdict, fails) = feed_verdict(&row);
        failures.extend(fails.into_iter().map(|x| format!("feed {}: {x}", row.name)));
        row.verdict = verdict;
        if t.malformed + t.foreign > 0 {
            warnings.push(format!(
                "feed {}: {} frames were no copy envelope, {} copies came from no source of this run",
                row.name, t.malformed, t.foreign
            ));
        }
        feed_rows.push(row);
    }
    if !drained {
        warnings.push(format!(
            "after {drain_s:.1} s of drain an unfiltered feed still lacked accepted copies"
        ));
    }

    // The Data Director's CPU over the window.
    let window_accepted: u64 = source_rows.iter().map(|r| r.accepted).sum();
    let dd_cpu_s = match marks {
        [Some((Some(a), _, _, _)), Some((Some(b), _, _, _))] => Some(b.0 - a.0),
        _ => None,
    };
    let kafka_cpu_s = match marks {
        [Some((_, _, _, Some(a))), Some((_, _, _, Some(b)))] => Some(b.0 - a.0),
        _ => None,
    };
    let kafka_rss_max_mb = samples.iter().filter_map(|x| x.3.map(|u| u.1)).reduce(f64::max);
    let dd_cores = dd_cpu_s.map(|c| c / wall);
    let kafka_cores = kafka_cpu_s.map(|c| c / wall);
    // The reference's D6 counts its Kafka brokers' cores with its data path's: so do ours.
    let used_cores = match (dd_cores, kafka_cores) {
        (Some(a), Some(b)) => Some(a + b),
        (a, None) => a,
        (None, Some(_)) => None,
    };
    let ingested_mps = window_accepted as f64 / wall;
    let dd = DdReport {
        batch: d.batch,
        linger_ms: d.linger_ms,
        sources: source_rows,
        feeds: feed_rows,
        ingested_mps,
        dd_cpu_s,
        dd_cores_used: dd_cores,
        dd_cpu_us_per_copy: dd_cpu_s
            .filter(|_| window_accepted > 0)
            .map(|c| c * 1e6 / window_accepted as f64),
        mps_per_used_core: dd_cores.filter(|c| *c > 0.0).map(|c| ingested_mps / c),
        kafka_cpu_s,
        kafka_cores_used: kafka_cores,
        kafka_rss_max_mb,
        used_cores_with_kafka: used_cores.filter(|_| kafka_cores.is_some()),
        mps_per_used_core_with_kafka: used_cores
            .filter(|c| *c > 0.0 && kafka_cores.is_some())
            .map(|c| ingested_mps / c),
        drain_s,
        drained,
    };
    if dd_cpu_s.is_none() {
        warnings.push("the Data Director's CPU is not known (external --target): CPU per copy and MPS per core are n/a".into());
    }

    // The timeline: copies per second, E2E of all feeds' arrivals, CPU.
    let secs = (cfg.warmup_s + cfg.duration_s).ceil() as usize;
    let mut timeline = Vec::new();
    for i in 0..secs {
        let (mut offered, mut accepted, mut errors) = (0, 0, 0);
        for src in sources {
            if let Some(x) = src.seconds.lock().unwrap().get(i) {
                offered += x.offered;
                accepted += x.accepted;
                errors += x.refused + x.failed;
            }
        }
        let mut all = Coarse::default();
        let mut group_p99_ms = std::collections::BTreeMap::new();
        for f in feeds {
            if let Some((_, c)) = f.counters.second(i) {
                all.merge(&c);
                if let Some(p99) = c.quantile_ms(0.99) {
                    group_p99_ms.insert(format!("{} E2E", f.def.name), p99);
                }
            }
        }
        let q = |x: f64| all.quantile_ms(x).unwrap_or(0.0);
        let (nf_cpu_pct, nf_rss_mb, gen_cpu_pct, steal_pct) =
            match (samples.get(i), samples.get(i + 1)) {
                (Some(a), Some(b)) => {
                    let nf = a.0.zip(b.0).map(|(x, y)| ((y.0 - x.0) * 100.0, y.1));
                    let steal = a.2.zip(b.2).map(|(x, y)| (y - x) * 100.0);
                    (nf.map(|x| x.0), nf.map(|x| x.1), Some((b.1 - a.1) * 100.0), steal)
                }
                _ => (None, None, None, None),
            };
        timeline.push(SecondReport {
            t: i as u64 + 1,
            warmup: ((i + 1) as f64) <= cfg.warmup_s,
            offered,
            achieved: accepted,
            errors,
            p50_ms: q(0.5),
            p90_ms: q(0.9),
            p99_ms: q(0.99),
            max_ms: q(1.0),
            nf_cpu_pct,
            nf_rss_mb,
            gen_cpu_pct,
            steal_pct,
            group_p99_ms,
            ..SecondReport::default()
        });
    }
    let host = host::report(&timeline, &[]);
    if let Some(h) = host.as_ref().filter(|h| h.steal_pct_mean > host::WARN_STEAL_PCT) {
        warnings.push(format!(
            "the host took {:.1} % of a CPU on average (steal, up to {:.0} % in one second): every latency tail includes it",
            h.steal_pct_mean, h.steal_pct_max
        ));
    }

    let gen_cpu_pct = gen_cpu / load_wall * 100.0;
    let slot_waits: u64 = dispatched.iter().map(|x| x.slot_waits).sum();
    let late_sends: u64 = dispatched.iter().map(|x| x.late_sends).sum();
    let unsent: u64 = dispatched.iter().map(|x| x.unsent).sum();
    let batches: u64 = sources.iter().map(|x| x.all.posts.load(Ordering::Relaxed)).sum();
    let max_lag = dispatched.iter().map(|x| x.max_lag).max().unwrap_or_default();
    let saturated = slot_waits > 0
        || (late_sends >= 10 && late_sends as f64 > 0.01 * batches as f64)
        || gen_cpu_pct > 85.0 * cfg.gen_cores as f64;
    if saturated {
        warnings.push(format!(
            "the kit was saturated or held back ({late_sends} batches >10 ms late, {slot_waits} waits for a POST slot, CPU {gen_cpu_pct:.0}% of one core on {} cores): the figures understate what the Data Director can do, or its answers were slow",
            cfg.gen_cores
        ));
    }
    if unsent > 0 {
        failures.push(format!("{unsent} batches due were never sent: every POST slot stayed taken past the end of the run"));
    }
    let peak: usize = sources.iter().map(|x| x.peak_in_flight.load(Ordering::Relaxed)).sum();
    let totals = Totals {
        wall_s: wall,
        achieved_tps: ingested_mps,
        achieved_tps_with_notify: ingested_mps,
        transactions: window_accepted,
        nf_cpu_s: dd_cpu_s.map(|c| c + kafka_cpu_s.unwrap_or(0.0)),
        nf_cores_used: used_cores,
        nf_cpu_us_per_tx: dd.dd_cpu_us_per_copy,
        tps_per_core: used_cores.filter(|c| *c > 0.0).map(|c| ingested_mps / c),
        nf_rss_max_mb: timeline.iter().filter_map(|t| t.nf_rss_mb).reduce(f64::max),
        reference_latency: None,
    };
    Ok(Report {
        scenario: s.name.clone(),
        description: s.description.clone(),
        command: cfg.command.clone(),
        started_at: chrono::Utc::now().to_rfc3339(),
        fivecore_version: env!("CARGO_PKG_VERSION").into(),
        rate: cfg.rate,
        scale: cfg.rate / s.load.rate,
        duration_s: cfg.duration_s,
        warmup_s: cfg.warmup_s,
        load_mode: "open loop".into(),
        security: Default::default(),
        concurrency: None,
        connections: sources.iter().map(|x| x.connections()).sum(),
        targets: cfg.targets.clone(),
        preload: PreloadReport::default(),
        procedures: Vec::new(),
        egress: Vec::new(),
        totals,
        generator: GeneratorReport {
            cpu_s: gen_cpu,
            cpu_pct: gen_cpu_pct,
            cores: cfg.gen_cores,
            max_outstanding: d.max_in_flight * sources.len(),
            peak_outstanding: peak,
            slot_waits,
            late_sends,
            unsent,
            max_lag_ms: max_lag.as_secs_f64() * 1000.0,
            saturated,
        },
        reference: s.reference.clone(),
        rx: None,
        sh: None,
        gx: None,
        nf_latency: Vec::new(),
        profile_counts: Vec::new(),
        host,
        timeline,
        overload: Default::default(),
        criteria_passed: failures.is_empty(),
        failures,
        warnings,
        dd: Some(dd),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_real_nfs_copier_counters_are_read_from_its_metrics() {
        let text = "# HELP dd_copies Messages copied.\n# TYPE dd_copies counter\n\
            dd_copies_total{trigger=\"ingress_request\"} 7\n\
            dd_copies_total{trigger=\"ingress_response\"} 6\n\
            dd_copies_dropped_total{reason=\"buffer_full\"} 2\n\
            dd_copies_dropped_total{reason=\"rejected\"} 1\n\
            dd_copy_batches_total{result=\"delivered\"} 3\n# EOF\n";
        let c = CopyCounts::parse(text).unwrap();
        assert_eq!((c.copies, c.dropped, c.rejected), (13, 2, 1));
        assert_eq!((c.offered(), c.accepted()), (15, 12));
        let later = CopyCounts { copies: 20, dropped: 2, rejected: 1 };
        assert_eq!(later.since(&c).accepted(), 7);
        // An NF without [<nf>.copy]: no counters, which is an error, not zero copies.
        assert!(CopyCounts::parse("process_cpu_seconds_total 1\n").is_err());
    }
}
