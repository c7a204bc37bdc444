//! The run: preload, the load (open loop at a fixed arrival rate, or closed loop with a fixed
//! number of requests outstanding), sampling, and the numbers of the report.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, IF_MATCH, IF_NONE_MATCH};
use http::Method;
use sbi::client::{ClientConfig, SbiClient};
use sbi::observe::ProcessUsage;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::bindings::{BindingPlan, Preloaded};
use crate::gx::{GxCall, GxSims, GxUpdate};
use crate::h2client::{Answer, Call, Failure, H2Pool, Want};
use crate::host;
use crate::nf_latency;
use crate::pace::Pacer;
use crate::profile::{self, ProfileSpec};
use crate::profile_count;
use crate::report::{
    EgressReport, GeneratorReport, PreloadReport, ProcReport, Report, RxReport, TargetReport,
    Totals,
};
use crate::rx::{self, BoundUes, RxCall, RxSims};
use crate::scenario::{EtagUse, Generators, GxEvent, GxOp, Mix, ProfileSet, RxOp, Scenario};
use crate::sched::{Deck, Picker, Rng, Schedule, Weighted};
use crate::security::{self, Security, TokenSlot};
use crate::sim::RunningSim;
use crate::stats::{self, AnswerCounts, AnswerKind, Latency, ProcStats, Second, SecondReport};
use crate::template::{encode_query_into, Env, Pools, ReqCtx, Template};

/// A send this far behind its intended time counts as late.
const LATE: Duration = Duration::from_millis(10);

pub struct RunConfig {
    pub scenario: Scenario,
    /// Open loop: the arrival rate. Closed loop: only what the Rx session preload is sized by.
    pub rate: f64,
    pub duration_s: f64,
    pub warmup_s: f64,
    pub targets: Vec<TargetReport>,
    pub command: String,
    pub gen_cores: usize,
    pub progress: bool,
    /// Replaces every procedure's p99 bound (`--max-p99-ms`).
    pub max_p99_ms: Option<f64>,
    /// The bindings preloaded before the NF started (or over Nbsf for a `--target` NF).
    pub bindings: Option<Preloaded>,
    /// The Diameter simulators, connected to the NF.
    pub rx: Option<Arc<RxSims>>,
    /// The Sh application servers, connected to the UDR.
    pub sh: Option<Arc<crate::sh::ShSims>>,
    /// The PCEF simulators, connected to the PCRF.
    pub gx: Option<Arc<GxSims>>,
    /// The UDR subscribers preloaded before the UDR started (or over its provisioning API).
    pub udr: Option<crate::udr::UdrPreloaded>,
    /// Closed loop with this many requests outstanding (`--concurrency`, else
    /// `load.concurrency`); `None` is the open loop.
    pub concurrency: Option<usize>,
    /// `--oauth2` / `--tls`: the kit's tokens and TLS client (crate::security).
    pub security: Option<Arc<Security>>,
}

struct Prepared {
    method: Method,
    /// The NF's base URL: the key of its ETags is base and path.
    base: String,
    path: Template,
    variants: Vec<Template>,
    pick_variant: Option<Weighted>,
    body: Option<Template>,
    body_profile: Option<ProfileSet>,
    body_binding: bool,
    rx: Option<RxOp>,
    sh: Option<crate::scenario::ShOp>,
    gx: Option<GxOp>,
    /// What its CCR-Us report (Gx update procedures).
    gx_update: GxUpdate,
    content_type: Option<HeaderValue>,
    /// Sent as given on every request of the procedure (e.g. `SOAPAction`).
    headers: Vec<(HeaderName, HeaderValue)>,
    expect: Vec<u32>,
    produces: Option<String>,
    recycle: Option<String>,
    etag: Option<EtagUse>,
    conns: Arc<H2Pool>,
    /// The access token its requests carry (`--oauth2`, a service that needs one).
    token: Option<Arc<TokenSlot>>,
    /// Profiles per answer, one per variant (one for a procedure without variants), for the
    /// procedures with `expect_profiles`.
    profile_counts: Vec<profile_count::Counts>,
}

/// What one request sends.
enum Work {
    Http {
        /// Path and query.
        path: Bytes,
        body: Option<Bytes>,
        uuid: Option<String>,
        /// Ids taken from pools, for `recycle`.
        taken: Vec<(String, String)>,
        /// `If-Match` / `If-None-Match` value.
        condition: Option<(&'static HeaderName, HeaderValue)>,
        /// The URL its ETag is kept under (scenarios with entity tags only).
        etag_key: Option<String>,
        /// The query variant picked.
        variant: usize,
    },
    Rx(RxCall),
    Sh(crate::sh::ShCall),
    Gx(GxCall),
}

struct Shared {
    procs: Vec<Mutex<ProcStats>>,
    seconds: Mutex<Vec<Second>>,
    measure_from: Duration,
    measure_to: Duration,
    outstanding: AtomicUsize,
    peak_outstanding: AtomicUsize,
    /// The last ETag answered per URL (only when a procedure uses entity tags).
    etags: Option<Mutex<HashMap<String, HeaderValue>>>,
    /// Each procedure's chart group ([`chart_groups`]), and how many groups there are.
    group_of: Vec<usize>,
    groups: usize,
    /// Answers of the measured window by kind, and the latency of those served (2xx): what an
    /// overload run reports as goodput and the p99 of the requests actually served.
    window: Mutex<(AnswerCounts, hdrhistogram::Histogram<u64>)>,
    /// The live figures on `--metrics-listen` (crate::live), when it is on.
    live: Option<Arc<crate::live::RunMetrics>>,
}

impl Shared {
    fn second(&self, idx: usize, f: impl FnOnce(&mut Second)) {
        let mut s = self.seconds.lock().unwrap();
        if s.len() <= idx {
            s.resize_with(idx + 1, Second::default);
        }
        f(&mut s[idx]);
    }

    /// A request leaves now and holds an outstanding slot until [`Shared::record`].
    fn sending(&self) {
        let now_out = self.outstanding.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak_outstanding.fetch_max(now_out, Ordering::Relaxed);
        if let Some(live) = &self.live {
            live.sending();
        }
    }

    /// One answer (or failure) of procedure `pi`, timed from `from` (its due time in the open
    /// loop, its send in the closed loop), ends its outstanding slot.
    fn record(
        &self,
        pi: usize,
        measured: bool,
        from: Instant,
        start: Instant,
        (ok, outcome, kind): (bool, &str, AnswerKind),
    ) {
        let done_at = Instant::now();
        let lat_us = done_at.saturating_duration_since(from).as_micros() as u64;
        let done_sec = done_at.saturating_duration_since(start).as_secs() as usize;
        if let Some(live) = &self.live {
            live.answered(pi, ok, Duration::from_micros(lat_us));
        }
        self.second(done_sec, |x| {
            x.completed += u64::from(ok);
            x.errors += u64::from(!ok);
            x.answers.add(kind);
            stats::record(&mut x.hist, lat_us);
            if x.groups.len() < self.groups {
                x.groups.resize_with(self.groups, Default::default);
            }
            x.groups[self.group_of[pi]].record(lat_us);
        });
        if measured {
            let mut w = self.window.lock().unwrap();
            w.0.add(kind);
            if kind == AnswerKind::Served {
                stats::record(&mut w.1, lat_us);
            }
        }
        if measured {
            let mut ps = self.procs[pi].lock().unwrap();
            ps.sent += 1;
            ps.ok += u64::from(ok);
            match ps.outcomes.get_mut(outcome) {
                Some(n) => *n += 1,
                None => {
                    ps.outcomes.insert(outcome.to_owned(), 1);
                }
            }
            stats::record(&mut ps.hist, lat_us);
        }
        self.outstanding.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Everything requests are made from: shared by the dispatcher (open loop) or the slots
/// (closed loop) and the tasks that send.
struct Maker {
    prepared: Vec<Prepared>,
    generators: Generators,
    instances: HashMap<String, Vec<String>>,
    pools: Arc<Pools>,
    sim_urls: HashMap<String, String>,
    /// The preloaded bindings' plan (`body_binding` documents).
    bindings: Option<BindingPlan>,
    rx: Option<Arc<RxSims>>,
    sh: Option<Arc<crate::sh::ShSims>>,
    gx: Option<Arc<GxSims>>,
    bound_ues: Option<BoundUes>,
    shared: Arc<Shared>,
    start: Instant,
}

impl Maker {
    /// Request `n`, of procedure `pi`; `None` when it has nothing to act on yet (an empty
    /// pool, no idle Rx session): skipped, not failed.
    fn make(&self, pi: usize, n: u64, rng: &mut Rng) -> Result<Option<Work>> {
        let p = &self.prepared[pi];
        let work = match (p.rx, &self.rx, &self.bound_ues) {
            _ if p.sh.is_some() => match (p.sh, &self.sh) {
                (Some(op), Some(sh)) => sh.prepare(op, rng).map(Work::Sh),
                _ => bail!("an Sh procedure without Sh simulators"),
            },
            _ if p.gx.is_some() => match (p.gx, &self.gx) {
                (Some(op), Some(gx)) => gx.prepare(op, &p.gx_update, rng).map(Work::Gx),
                _ => bail!("a Gx procedure without PCEF simulators"),
            },
            (Some(op), Some(rx), Some(ues)) => rx.prepare(op, ues, rng).map(Work::Rx),
            (Some(_), _, _) => bail!("an Rx procedure without Diameter simulators or bindings"),
            (None, _, _) => {
                let g = &self.generators;
                let env = Env {
                    supi_prefix: &g.supi_prefix,
                    supi_first: g.supi_first,
                    supi_count: g.supi_count,
                    gpsi_prefix: &g.gpsi_prefix,
                    imei_first: g.imei_first,
                    ue_ipv4_first: g.ue_ipv4_first,
                    instances: &self.instances,
                    pools: &self.pools,
                    sims: &self.sim_urls,
                };
                let mut ctx = ReqCtx::new(n, n);
                let rendered = render_http(p, &env, &mut ctx, rng, n, self.bindings.as_ref());
                if rendered.is_none() {
                    // Put back what a half-rendered request took.
                    for (pool, id) in ctx.taken.drain(..) {
                        self.pools.push(&pool, id);
                    }
                }
                rendered.map(|(path, body, variant)| {
                    let etag_key = self.shared.etags.as_ref().map(|_| format!("{}{path}", p.base));
                    let condition = match p.etag {
                        None => None,
                        Some(EtagUse::IfNoneMatchAny) => {
                            Some((&IF_NONE_MATCH, HeaderValue::from_static("*")))
                        }
                        Some(EtagUse::IfMatch) => self
                            .shared
                            .etags
                            .as_ref()
                            .zip(etag_key.as_ref())
                            .and_then(|(e, k)| e.lock().unwrap().get(k).cloned())
                            .map(|tag| (&IF_MATCH, tag)),
                    };
                    Work::Http {
                        path: Bytes::from(path),
                        body,
                        uuid: ctx.uuid.take(),
                        taken: std::mem::take(&mut ctx.taken),
                        condition,
                        etag_key,
                        variant,
                    }
                })
            }
        };
        Ok(work)
    }

    /// Sends `work`, waits for its answer, keeps the pools and ETags, and records the outcome
    /// with latency from `from`.
    async fn execute(&self, pi: usize, work: Work, measured: bool, from: Instant) {
        let p = &self.prepared[pi];
        let shared = &self.shared;
        match work {
            Work::Rx(call) => {
                let rx = self.rx.as_ref().expect("Rx work comes with the simulators");
                let (ok, outcome) = call.send(rx, &p.expect).await;
                let kind = diameter_kind(ok, &outcome);
                shared.record(pi, measured, from, self.start, (ok, &outcome, kind));
            }
            Work::Sh(call) => {
                let sh = self.sh.as_ref().expect("Sh work comes with the simulators");
                let (ok, outcome) = call.send(sh, &p.expect).await;
                let kind = diameter_kind(ok, &outcome);
                shared.record(pi, measured, from, self.start, (ok, &outcome, kind));
            }
            Work::Gx(call) => {
                let gx = self.gx.as_ref().expect("Gx work comes with the simulators");
                let (ok, outcome) = call.send(gx, &p.expect).await;
                let kind = diameter_kind(ok, &outcome);
                shared.record(pi, measured, from, self.start, (ok, &outcome, kind));
            }
            Work::Http { path, body, uuid, taken, condition, etag_key, variant } => {
                let counts = p.profile_counts.get(variant).filter(|c| c.wanted());
                let want = Want {
                    etag: etag_key.is_some(),
                    location: p.produces.is_some(),
                    body: counts.is_some(),
                };
                let conditional = condition.as_ref().map(|(name, _)| name.as_str());
                let rsp = p
                    .conns
                    .pick()
                    .send(Call {
                        method: &p.method,
                        path,
                        body,
                        content_type: p.content_type.as_ref(),
                        headers: &p.headers,
                        condition,
                        authorization: p.token.as_ref().map(|t| t.get()),
                        want,
                    })
                    .await;
                let kind = match &rsp {
                    Ok(r) => AnswerKind::of_status(r.status),
                    Err(Failure::Timeout) => AnswerKind::Timeout,
                    Err(Failure::NotSent) => AnswerKind::NotSent,
                    Err(Failure::Transport) => AnswerKind::Transport,
                };
                let (ok, outcome) = match &rsp {
                    Ok(r) => {
                        let code = r.status;
                        let label = match (conditional, p.etag) {
                            (Some(name), _) => Cow::Owned(format!("{code} {name}")),
                            (None, Some(_)) => Cow::Owned(format!("{code} unconditional")),
                            (None, None) => status_label(code),
                        };
                        (p.expect.contains(&u32::from(code)), label)
                    }
                    Err(Failure::Timeout) => (false, Cow::Borrowed("timeout")),
                    Err(Failure::NotSent) => (false, Cow::Borrowed("timeout before sending")),
                    Err(Failure::Transport) => (false, Cow::Borrowed("transport")),
                };
                if let (Some(counts), Ok(Answer { status: 200, body: Some(b), .. })) =
                    (counts, &rsp)
                {
                    counts.add(b);
                }
                if let (Some(etags), Some(key), Ok(r)) = (&shared.etags, etag_key, &rsp) {
                    keep_etag(etags, key, r, &p.method);
                }
                if ok {
                    if let Some(pool) = &p.recycle {
                        for (_, id) in taken {
                            self.pools.push(pool, id);
                        }
                    }
                    if let (Some(pool), Ok(r)) = (&p.produces, &rsp) {
                        let id = r
                            .location
                            .as_ref()
                            .and_then(|l| l.to_str().ok())
                            .and_then(|l| l.rsplit('/').next())
                            .map(str::to_string)
                            .or(uuid);
                        if let Some(id) = id {
                            self.pools.push(pool, id);
                        }
                    }
                }
                shared.record(pi, measured, from, self.start, (ok, &outcome, kind));
            }
        }
    }
}

/// Where an egress row's count comes from: the row's counter of a simulator started before the
/// NFs (a notification sink: the notifications; an OCS: its Initial SLRs or STRs; a directory:
/// its searches), or the RARs a Diameter simulator received (a PCEF: the PCRF's Gx RARs; an AF:
/// its Rx RARs).
#[derive(Clone)]
enum EgressCount {
    Http(Arc<crate::sim::SimCounters>, crate::scenario::EgressCounter),
    Rx(Arc<crate::rx::peer::PeerCounters>),
    Gx(Arc<crate::gx::peer::PcefCounters>),
}

impl EgressCount {
    fn now(&self) -> u64 {
        match self {
            EgressCount::Http(c, which) => match which {
                crate::scenario::EgressCounter::Items => c.items.load(Ordering::Relaxed),
                crate::scenario::EgressCounter::Created => c.created.load(Ordering::Relaxed),
                crate::scenario::EgressCounter::Deleted => c.deleted.load(Ordering::Relaxed),
            },
            EgressCount::Rx(c) => c.rar.load(Ordering::Relaxed),
            EgressCount::Gx(c) => c.rar.load(Ordering::Relaxed),
        }
    }

    /// Anything received at all (a feature this build does not serve receives nothing).
    fn ever(&self) -> u64 {
        match self {
            EgressCount::Http(c, _) => c.received.load(Ordering::Relaxed),
            _ => self.now(),
        }
    }
}

/// One count per `[[egress]]` row of `s`, in its order.
fn egress_counts(
    s: &Scenario,
    sims: &[RunningSim],
    rx: Option<&RxSims>,
    gx: Option<&GxSims>,
) -> Result<Vec<EgressCount>> {
    s.egress
        .iter()
        .map(|e| {
            if let Some(x) = sims.iter().find(|x| x.name == e.sim) {
                return Ok(EgressCount::Http(x.counters.clone(), e.counter));
            }
            if let Some(p) = rx.and_then(|r| r.afs.iter().chain(&r.pcfs).find(|p| p.name == e.sim))
            {
                return Ok(EgressCount::Rx(p.counters.clone()));
            }
            if let Some(p) = gx.and_then(|g| g.pcefs.iter().find(|p| p.name == e.sim)) {
                return Ok(EgressCount::Gx(p.counters.clone()));
            }
            bail!("egress {}: simulator {} is not running", e.name, e.sim)
        })
        .collect()
}

/// A Diameter exchange has no HTTP status: the expected result counts as served.
fn diameter_kind(ok: bool, outcome: &str) -> AnswerKind {
    match (ok, outcome) {
        (true, _) => AnswerKind::Served,
        (false, "timeout") => AnswerKind::Timeout,
        _ => AnswerKind::Other,
    }
}

/// The ETag a successful answer carries is the one the next conditional request names; a
/// deleted resource has none.
fn keep_etag(etags: &Mutex<HashMap<String, HeaderValue>>, key: String, r: &Answer, m: &Method) {
    if !(200..300).contains(&r.status) {
        return;
    }
    let mut etags = etags.lock().unwrap();
    match &r.etag {
        _ if m == Method::DELETE => {
            etags.remove(&key);
        }
        Some(tag) => {
            etags.insert(key, tag.clone());
        }
        None => {}
    }
}

fn clients(n: usize, timeout_ms: u64, sec: Option<&Security>) -> Result<Vec<SbiClient>> {
    let cfg = ClientConfig {
        request_timeout_ms: timeout_ms,
        user_agent: Some("fivecore-bench".into()),
        ..ClientConfig::default()
    };
    let cfg = match sec {
        Some(sec) => sec.client_config(cfg),
        None => cfg,
    };
    (0..n).map(|_| SbiClient::new(&cfg).context("building the SBI client")).collect()
}

pub(crate) fn progress_bar(label: &str, done: usize, total: usize) {
    let width = 40;
    let filled = (done * width).checked_div(total).unwrap_or(width).min(width);
    eprint!("\r{label} [{}{}] {done}/{total}", "#".repeat(filled), ".".repeat(width - filled));
    let _ = std::io::stderr().flush();
}

/// What, method, URL, body, expected statuses, pool for the created id.
type PreloadJob = (String, Method, String, Bytes, Vec<u16>, Option<String>);
/// NF (CPU seconds, RSS MB), when known.
type Usage = Option<(f64, f64)>;
/// Once a second: the NFs' usage, the generator's CPU seconds, the host's steal seconds.
type Sample = (Usage, f64, Option<f64>);
/// NF usage, generator CPU seconds, simulator receive counters.
type Snapshot = (Usage, f64, Vec<u64>);

/// Preloads profiles and subscriptions; returns preloaded instance ids by label.
async fn preload(
    s: &Scenario,
    (base, subs_base): (&str, &str),
    client: &SbiClient,
    running: &[RunningSim],
    pools: &Pools,
    rng: &mut Rng,
    progress: bool,
) -> Result<(HashMap<String, Vec<String>>, PreloadReport)> {
    let sims: HashMap<String, String> =
        running.iter().map(|x| (x.name.clone(), x.base_url())).collect();
    let sims = &sims;
    let sim_addrs: HashMap<String, (String, u16)> = running
        .iter()
        .map(|x| (x.name.clone(), (x.addr.ip().to_string(), x.addr.port())))
        .collect();
    let t0 = std::time::Instant::now();
    let mut instances: HashMap<String, Vec<String>> = HashMap::new();
    let subs = s.preload.subscriptions.as_ref().map_or(0, |x| x.count);
    let total = s.preload.profiles.iter().map(|p| p.count).sum::<usize>() + subs;
    let mut jobs: Vec<PreloadJob> = Vec::with_capacity(total);
    for set in &s.preload.profiles {
        let services = if set.services.is_empty() {
            profile::default_services(&set.nf_type)
        } else {
            set.services.clone()
        };
        let endpoint = set.endpoint_sim.as_ref().and_then(|n| sim_addrs.get(n).cloned());
        for i in 0..set.count {
            let id = rng.uuid();
            let size = set.size_bytes[0]
                + rng.below((set.size_bytes[1] - set.size_bytes[0] + 1) as u64) as usize;
            let spec = ProfileSpec {
                nf_type: &set.nf_type,
                label: set.label(),
                index: i,
                target_size: size,
                services: &services,
                endpoint: endpoint.clone(),
            };
            let body = serde_json::to_vec(&profile::build(&spec, &id, rng))?;
            let url = format!("{base}/nnrf-nfm/v1/nf-instances/{id}");
            instances.entry(set.label().to_string()).or_default().push(id);
            jobs.push((
                format!("profile {}", set.label()),
                Method::PUT,
                url,
                body.into(),
                vec![200, 201],
                None,
            ));
        }
    }
    if let Some(sub) = &s.preload.subscriptions {
        let t = Template::parse(&sub.body)?;
        let empty = Pools::default();
        let env = Env {
            supi_prefix: &s.generators.supi_prefix,
            supi_first: s.generators.supi_first,
            supi_count: s.generators.supi_count,
            gpsi_prefix: &s.generators.gpsi_prefix,
            imei_first: s.generators.imei_first,
            ue_ipv4_first: s.generators.ue_ipv4_first,
            instances: &instances,
            pools: &empty,
            sims,
        };
        let pin_subscriber = t.uses_ue_ipv4();
        for i in 0..sub.count {
            let mut ctx = ReqCtx::new(i as u64, i as u64);
            if pin_subscriber {
                // The Rx load names the UE at {ue_ipv4} of index i by this subscriber's MSISDN
                // (crate::rx::BoundUes), so the association must hold the same one.
                ctx.subscriber = Some(rx::ue_msin(&s.generators, i as u64));
            }
            let body = t
                .render(&env, &mut ctx, rng, false)
                .context("subscription body template needs a pool")?;
            jobs.push((
                "subscription".into(),
                Method::POST,
                format!("{subs_base}{}", sub.path),
                body.into(),
                vec![201],
                sub.pool.clone(),
            ));
        }
    }
    let done = Arc::new(AtomicUsize::new(0));
    let ticker = (progress && total > 0).then(|| {
        let done = done.clone();
        tokio::spawn(async move {
            loop {
                progress_bar("preload", done.load(Ordering::Relaxed), total);
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    });
    let sem = Arc::new(Semaphore::new(32));
    let mut set = tokio::task::JoinSet::new();
    for (what, method, url, body, expect, pool) in jobs {
        let permit = sem.clone().acquire_owned().await?;
        let client = client.clone();
        let done_job = done.clone();
        set.spawn(async move {
            let _permit = permit;
            let register = method == Method::PUT;
            let rsp = client
                .request(method, &url)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await;
            done_job.fetch_add(1, Ordering::Relaxed);
            match rsp {
                Ok(r) if expect.contains(&r.status().as_u16()) => {
                    let id =
                        r.header("location").and_then(|l| l.rsplit('/').next()).map(str::to_string);
                    Ok((pool, id, if register { granted_heartbeat(r.body()) } else { None }))
                }
                Ok(r) => Err(anyhow::anyhow!(
                    "preload {what}: {url} answered {}: {}",
                    r.status(),
                    String::from_utf8_lossy(r.body())
                )),
                Err(e) => Err(anyhow::anyhow!("preload {what}: {url}: {e}")),
            }
        });
    }
    let mut shortest_heartbeat: Option<u64> = None;
    while let Some(r) = set.join_next().await {
        let (pool, id, heartbeat) = r??;
        if let (Some(pool), Some(id)) = (pool, id) {
            pools.push(&pool, id);
        }
        if let Some(h) = heartbeat {
            shortest_heartbeat = Some(shortest_heartbeat.map_or(h, |s| s.min(h)));
        }
    }
    if let Some(t) = ticker {
        t.abort();
        progress_bar("preload", total, total);
        eprintln!();
    }
    if let Some(granted) =
        shortest_heartbeat.filter(|g| *g < u64::from(profile::HEARTBEAT_TIMER_SECS))
    {
        eprintln!(
            "warning: the NRF granted the preloaded profiles a heartBeatTimer of {granted} s \
             (asked {} s): a profile the mix's heartbeats miss for longer (plus the NRF's grace) \
             is SUSPENDED and drops out of discovery; start that NRF with [nrf] \
             heartbeat_max_secs = {} (docs/bench.md)",
            profile::HEARTBEAT_TIMER_SECS,
            profile::HEARTBEAT_TIMER_SECS,
        );
    }
    let profiles = instances.values().map(Vec::len).sum();
    Ok((
        instances,
        PreloadReport {
            profiles,
            subscriptions: subs,
            seconds: t0.elapsed().as_secs_f64(),
            ..PreloadReport::default()
        },
    ))
}

/// The heartBeatTimer an NRF granted in its answer to a profile PUT (NFRegister).
fn granted_heartbeat(body: &[u8]) -> Option<u64> {
    serde_json::from_slice::<serde_json::Value>(body).ok()?.get("heartBeatTimer")?.as_u64()
}

fn usage(pids: &[u32]) -> Usage {
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

/// What grows over a soak when something leaks, read from /proc at the end of each second:
/// the NF processes' open descriptors, threads and resident memory by kind, summed.
#[derive(Debug, Clone, Copy, Default)]
struct Leaks {
    fds: Option<u64>,
    threads: Option<u64>,
    /// Anonymous (heap, stacks) and file-backed (mapped files) resident memory, MiB.
    rss_anon_mb: Option<f64>,
    rss_file_mb: Option<f64>,
}

/// [`Leaks`] of the NF processes (a figure is None when any process's is unreadable).
fn leaks_of(pids: &[u32]) -> Leaks {
    if pids.is_empty() {
        return Leaks::default();
    }
    let mut fds = Some(0);
    let mut threads = Some(0);
    let mut split = Some((0u64, 0u64));
    for p in pids {
        let id = p.to_string();
        fds = fds.zip(sbi::observe::open_fds(&id)).map(|(a, b)| a + b);
        threads = threads.zip(ProcessUsage::read_pid(*p).map(|u| u.threads)).map(|(a, b)| a + b);
        split = split
            .zip(sbi::observe::RssSplit::read(&id))
            .map(|((a, f), r)| (a + r.anon_bytes, f + r.file_bytes));
    }
    let mb = |b: u64| b as f64 / 1_048_576.0;
    Leaks {
        fds,
        threads,
        rss_anon_mb: split.map(|(a, _)| mb(a)),
        rss_file_mb: split.map(|(_, f)| mb(f)),
    }
}

fn self_cpu() -> f64 {
    ProcessUsage::read_self().map_or(0.0, |u| u.cpu_seconds())
}

/// Runs the scenario; the simulators stay up until it returns.
pub async fn run(cfg: RunConfig, sims: Vec<RunningSim>) -> Result<Report> {
    let sims = &sims[..];
    let s = &cfg.scenario;
    let url_of = |nf: &str| cfg.targets.iter().find(|t| t.nf == nf).map(|t| t.url.clone());
    let first_nf = &s.nfs[0];
    let base0 = url_of(first_nf).with_context(|| format!("no target for {first_nf}"))?;
    let mut pids: Vec<u32> = cfg.targets.iter().filter_map(|t| t.pid).collect();
    // `--up`: the NFs share one process, counted once.
    pids.sort_unstable();
    pids.dedup();
    let sim_urls: HashMap<String, String> =
        sims.iter().map(|x| (x.name.clone(), x.base_url())).collect();
    let mut rng = Rng::new(s.generators.seed);
    let pools = Arc::new(Pools::default());
    let sec = cfg.security.as_deref();
    let pre_client = clients(1, s.load.timeout_ms, sec)?.remove(0);
    let subs_nf = s.preload.subscriptions.as_ref().and_then(|x| x.nf.clone());
    let subs_base = match &subs_nf {
        Some(nf) => url_of(nf).with_context(|| format!("no target for {nf}"))?,
        None => base0.clone(),
    };
    let (instances, mut preload_report) =
        preload(s, (&base0, &subs_base), &pre_client, sims, &pools, &mut rng, cfg.progress).await?;
    if let Some(b) = &cfg.bindings {
        if let Some(pool) = &b.plan.pool {
            for id in &b.deletable_ids {
                pools.push(pool, id.clone());
            }
        }
        preload_report.bindings = Some(b.report.clone());
    }
    if let Some(u) = &cfg.udr {
        if let Some(pool) = &u.plan.pool {
            for id in &u.deletable_ids {
                pools.push(pool, id.clone());
            }
        }
        if let Some(pool) = &u.plan.absent_pool {
            for id in u.plan.absent_ids() {
                pools.push(pool, id);
            }
        }
        if let Some(pool) = &u.plan.subscription_pool {
            for id in &u.deletable_subscriptions {
                pools.push(pool, id.clone());
            }
        }
        preload_report.udr = Some(u.report.clone());
    }
    // Gx sessions first: a voice mix's AAR-Is bind to them.
    if let (Some(gx), Some(d)) = (&cfg.gx, &s.diameter) {
        let uses_sessions = s
            .procedures
            .iter()
            .any(|p| matches!(p.gx, Some(GxOp::CcrUpdate | GxOp::CcrTerminate)) && p.tps > 0.0)
            || s.binds_rx_to_gx();
        let initial = s.procedures.iter().filter(|p| p.gx == Some(GxOp::CcrInitial));
        let expect = initial.clone().next().map_or(vec![2001], |p| p.expect.clone());
        let rate = initial.map(|p| p.tps).sum::<f64>() / s.total_tps() * cfg.rate;
        if uses_sessions {
            let n = ((rate * d.gx_session_hold_s).ceil() as u64).max(64);
            let t0 = std::time::Instant::now();
            gx.open_sessions(n, &mut rng, &expect).await?;
            preload_report.gx_sessions = n;
            preload_report.gx_sessions_seconds = t0.elapsed().as_secs_f64();
        }
    }
    let bound_ues = match (&cfg.bindings, s.diameter.as_ref().and_then(|d| d.answer_host.as_ref()))
    {
        (Some(b), _) => Some(b.bound_ues()),
        (None, Some(_)) if s.binds_rx_to_gx() => {
            cfg.gx.clone().map(|gx| BoundUes::gx_sessions(&s.generators, gx))
        }
        // The validated scenario has preloaded subscriptions with {ue_ipv4}, each created (201)
        // before we get here, and kept for the whole run.
        (None, Some(_)) => s
            .preload
            .subscriptions
            .as_ref()
            .map(|sub| BoundUes::associations(&s.generators, sub.count as u64)),
        (None, None) => None,
    };
    if let (Some(rx), Some(ues), Some(d)) = (&cfg.rx, &bound_ues, &s.diameter) {
        let uses_sessions = s
            .procedures
            .iter()
            .any(|p| matches!(p.rx, Some(RxOp::AarUpdate | RxOp::Str | RxOp::Rar)) && p.tps > 0.0);
        let initial = s.procedures.iter().filter(|p| p.rx == Some(RxOp::AarInitial));
        let expect = initial.clone().next().map_or(vec![2001], |p| p.expect.clone());
        let aar_i_rate = initial.map(|p| p.tps).sum::<f64>() / s.total_tps() * cfg.rate;
        if uses_sessions {
            let n = ((aar_i_rate * d.session_hold_s).ceil() as u64).max(64);
            let t0 = std::time::Instant::now();
            rx.open_sessions(n, ues, &mut rng, &expect).await?;
            preload_report.rx_sessions = n;
            preload_report.rx_sessions_seconds = t0.elapsed().as_secs_f64();
        }
    }

    // Prepare the procedures.
    let mut by_nf: HashMap<String, Arc<H2Pool>> = HashMap::new();
    let mut prepared = Vec::new();
    for p in &s.procedures {
        let nf = p.nf.clone().unwrap_or_else(|| first_nf.clone());
        let base = url_of(&nf).with_context(|| format!("no target for {nf}"))?;
        let conns = match by_nf.get(&nf) {
            Some(c) => c.clone(),
            None => {
                let timeout = Duration::from_millis(s.load.timeout_ms);
                let c = Arc::new(
                    H2Pool::growing(
                        &base,
                        s.load.connections,
                        max_connections(&s.load, cfg.concurrency),
                        timeout,
                        s.load.reconnect,
                    )?
                    .with_tls(sec.and_then(Security::tls)),
                );
                // Only NFs with HTTP procedures are connected to.
                if s.procedures.iter().any(|q| {
                    q.rx.is_none()
                        && q.sh.is_none()
                        && q.gx.is_none()
                        && q.nf.as_ref().unwrap_or(first_nf) == &nf
                }) {
                    c.open().await.with_context(|| format!("connecting to {nf} at {base}"))?;
                }
                by_nf.insert(nf.clone(), c.clone());
                c
            }
        };
        let weights: Vec<f64> = p.variants.iter().map(|v| v.weight).collect();
        // Asked for before the load, outside the measured requests.
        let token = match (sec, p.rx.is_none() && p.sh.is_none() && p.gx.is_none()) {
            (Some(sec), true) => sec.slot_for(security::service_of(&p.path)).await?,
            _ => None,
        };
        prepared.push(Prepared {
            // An Rx or Sh procedure sends no HTTP request: its method is never used.
            method: match (p.rx, p.sh, p.gx) {
                (None, None, None) => Method::from_bytes(p.method.as_bytes())?,
                _ => Method::POST,
            },
            base,
            path: Template::parse(&p.path)?,
            variants: p
                .variants
                .iter()
                .map(|v| Template::parse(&v.query))
                .collect::<Result<_>>()?,
            pick_variant: Weighted::new(&weights),
            body: p.body.as_deref().map(Template::parse).transpose()?,
            body_profile: p
                .body_profile
                .as_ref()
                .and_then(|l| s.preload.profiles.iter().find(|x| x.label() == l).cloned()),
            body_binding: p.body_binding,
            rx: p.rx,
            sh: p.sh,
            gx: p.gx,
            gx_update: GxUpdate {
                event: p.event_trigger.map(|e| match e {
                    GxEvent::UserLocationChange => {
                        crate::gx::messages::UpdateEvent::UserLocationChange
                    }
                    GxEvent::RatChange => crate::gx::messages::UpdateEvent::RatChange,
                }),
                usage: p.usage_report.as_ref().map(|u| crate::gx::messages::UsageReport {
                    monitoring_key: u.monitoring_key.clone(),
                    input_octets: u.input_octets,
                    output_octets: u.output_octets,
                }),
            },
            headers: p
                .headers
                .iter()
                .map(|(k, v)| {
                    Ok((HeaderName::from_bytes(k.as_bytes())?, HeaderValue::from_str(v)?))
                })
                .collect::<Result<_>>()
                .with_context(|| format!("{}: headers", p.name))?,
            content_type: p
                .content_type
                .as_deref()
                .map(HeaderValue::from_str)
                .transpose()
                .with_context(|| format!("{}: content_type", p.name))?,
            expect: p.expect.clone(),
            produces: p.produces.clone(),
            recycle: p.recycle.clone(),
            etag: p.etag,
            conns,
            token,
            profile_counts: match p.expect_profiles {
                Some(_) => (0..p.variants.len().max(1)).map(|_| Default::default()).collect(),
                None => Vec::new(),
            },
        });
    }
    let tps: Vec<f64> = s.procedures.iter().map(|p| p.tps).collect();
    let pick = match s.load.mix {
        Mix::Random => Weighted::new(&tps).map(Picker::Random),
        Mix::ShuffledDeck => Deck::new(&tps).map(Picker::Deck),
    }
    .context("no procedure has tps > 0")?;
    let chart = chart_groups(s);
    let shared = Arc::new(Shared {
        procs: s.procedures.iter().map(|_| Mutex::new(ProcStats::default())).collect(),
        seconds: Mutex::new(Vec::new()),
        measure_from: Duration::from_secs_f64(cfg.warmup_s),
        measure_to: Duration::from_secs_f64(cfg.warmup_s + cfg.duration_s),
        outstanding: AtomicUsize::new(0),
        peak_outstanding: AtomicUsize::new(0),
        etags: s.procedures.iter().any(|p| p.etag.is_some()).then(Mutex::default),
        group_of: chart.1.clone(),
        groups: chart.0.len(),
        window: Mutex::new((AnswerCounts::default(), stats::new_hist())),
        live: crate::live::run(
            &s.procedures.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
            if cfg.concurrency.is_some() { 0.0 } else { cfg.rate },
        ),
    });
    // The ETags of the preloaded data, as a client that had read it would hold them.
    if let (Some(etags), Some(u)) = (&shared.etags, &cfg.udr) {
        let udr_base =
            url_of(&u.plan.nf).with_context(|| format!("no target for {}", u.plan.nf))?;
        let mut map = etags.lock().unwrap();
        for (path, tag) in &u.etags {
            let tag = HeaderValue::from_str(tag).context("a preloaded ETag")?;
            map.insert(format!("{udr_base}{path}"), tag);
        }
    }
    let http_pools: Vec<Arc<H2Pool>> = by_nf.values().cloned().collect();
    let mut maker = Maker {
        prepared,
        generators: s.generators.clone(),
        instances,
        pools: pools.clone(),
        sim_urls,
        bindings: cfg.bindings.as_ref().map(|b| b.plan.clone()),
        rx: cfg.rx.clone(),
        sh: cfg.sh.clone(),
        gx: cfg.gx.clone(),
        bound_ues,
        shared: shared.clone(),
        start: Instant::now(),
    };
    if let Some(sec) = sec {
        probe_security(&maker, s, sec, &base0, &mut rng).await?;
    }
    let token_keeper = cfg.security.as_ref().and_then(Security::keep_tokens);
    let start = Instant::now() + Duration::from_millis(20);
    let keep_alive_tps = keep_alive_rate(s, cfg.rate, preload_report.profiles);
    let keep_alive_failed = Arc::new(AtomicU64::new(0));
    let keep_alive = (keep_alive_tps > 0.0).then(|| {
        let ids: Vec<String> = maker.instances.values().flatten().cloned().collect();
        let end = start + Duration::from_secs_f64(cfg.warmup_s + cfg.duration_s);
        let failed = keep_alive_failed.clone();
        let (client, base) = (pre_client.clone(), base0.clone());
        tokio::spawn(keep_alive_loop(client, base, ids, keep_alive_tps, end, failed))
    });
    preload_report.keep_alive_tps = keep_alive_tps;
    maker.start = start;
    let maker = Arc::new(maker);
    // The cool-down (open loop only) follows the measured window.
    let cooldown_s = if cfg.concurrency.is_none() { s.load.cooldown_s.max(0.0) } else { 0.0 };
    let secs_total = (cfg.warmup_s + cfg.duration_s + cooldown_s).ceil() as usize;

    // Sampler: once a second, NF and generator CPU/RSS, and the progress line.
    let samples: Arc<Mutex<Vec<Sample>>> = Arc::new(Mutex::new(Vec::new()));
    // With each sample: the NF processes' open descriptors, threads and memory by kind.
    let leaks: Arc<Mutex<Vec<Leaks>>> = Arc::default();
    // The NFs' histograms with each sample: their own latency per second on the chart.
    let tick_scrapes: Arc<Mutex<Vec<Vec<nf_latency::Scrape>>>> = Arc::default();
    let window: Arc<Mutex<[Option<Snapshot>; 2]>> = Arc::new(Mutex::new([None, None]));
    // The NFs' latency histograms at the same two marks (crate::nf_latency).
    let nf_hists: Arc<Mutex<[Vec<nf_latency::Scrape>; 2]>> = Arc::default();
    let scraper = SbiClient::new(&match sec {
        Some(sec) => sec.client_config(ClientConfig::default()),
        None => ClientConfig::default(),
    })
    .context("building the SBI client")?;
    let nf_urls: Vec<(String, String)> =
        cfg.targets.iter().map(|t| (t.nf.clone(), t.url.clone())).collect();
    let sim_counters = egress_counts(s, sims, cfg.rx.as_deref(), cfg.gx.as_deref())?;
    let done_flag = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (samples, shared, pids, window, done_flag, sim_counters) = (
            samples.clone(),
            shared.clone(),
            pids.clone(),
            window.clone(),
            done_flag.clone(),
            sim_counters.clone(),
        );
        let nf_hists = nf_hists.clone();
        let tick_scrapes = tick_scrapes.clone();
        let leaks = leaks.clone();
        let progress = cfg.progress;
        let warmup = cfg.warmup_s;
        let end = cfg.warmup_s + cfg.duration_s;
        tokio::spawn(async move {
            samples.lock().unwrap().push((usage(&pids), self_cpu(), host::steal_seconds()));
            leaks.lock().unwrap().push(leaks_of(&pids));
            let first = scrape_each(&scraper, &nf_urls).await;
            // Once a second only the NFs that publish histograms: a target that does not must
            // not hold the sampler up.
            let live: Vec<(String, String)> = nf_urls
                .iter()
                .filter(|(nf, _)| first.iter().any(|x| x.nf() == nf))
                .cloned()
                .collect();
            tick_scrapes.lock().unwrap().push(first);
            let snap = || {
                (
                    usage(&pids),
                    self_cpu(),
                    sim_counters.iter().map(EgressCount::now).collect::<Vec<_>>(),
                )
            };
            let mut marks = [(warmup, 0usize), (end, 1usize)];
            marks.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut tick = 1u64;
            let mut next_mark = 0;
            loop {
                let tick_at = start + Duration::from_secs(tick);
                let mark_at = marks.get(next_mark).map(|m| start + Duration::from_secs_f64(m.0));
                match mark_at {
                    Some(m) if m <= tick_at => {
                        tokio::time::sleep_until(m).await;
                        let at = marks[next_mark].1;
                        window.lock().unwrap()[at] = Some(snap());
                        let got = scrape_each(&scraper, &nf_urls).await;
                        nf_hists.lock().unwrap()[at] = got;
                        next_mark += 1;
                        continue;
                    }
                    _ => tokio::time::sleep_until(tick_at).await,
                }
                samples.lock().unwrap().push((usage(&pids), self_cpu(), host::steal_seconds()));
                leaks.lock().unwrap().push(leaks_of(&pids));
                let got = scrape_each(&scraper, &live).await;
                tick_scrapes.lock().unwrap().push(got);
                if progress {
                    let idx = tick as usize - 1;
                    let mut line = String::new();
                    shared.second(idx, |sec| {
                        let l = Latency::of(&sec.hist);
                        line = format!(
                            "[{tick:>4}s{}] offered {:>7}/s achieved {:>7}/s errors {:>5} (503 {}, timeout {}, not sent {}) p50 {:>8.2} ms p99 {:>8.2} ms",
                            if (tick as f64) <= warmup { " warm-up" } else { "" },
                            sec.offered,
                            sec.completed,
                            sec.errors,
                            sec.answers.http_503,
                            sec.answers.timeout,
                            sec.answers.not_sent,
                            l.p50_ms,
                            l.p99_ms
                        );
                    });
                    eprintln!("{line}");
                }
                if done_flag.load(Ordering::Relaxed) == 1 && next_mark >= marks.len() {
                    break;
                }
                tick += 1;
            }
        })
    };

    let gen_cpu_start = self_cpu();
    let secs = cfg.warmup_s + cfg.duration_s;
    let d = match cfg.concurrency {
        None => {
            let schedule = Schedule {
                rate: cfg.rate,
                step: (cooldown_s > 0.0).then_some((secs, cfg.rate * s.load.cooldown_scale)),
            };
            let all = secs + cooldown_s;
            open_loop(&maker, pick, rng, schedule, all, s.load.max_outstanding, s.load.timeout_ms)
                .await?
        }
        Some(n) => closed_loop(&maker, pick, &mut rng, n, secs, s.load.timeout_ms).await?,
    };
    let Dispatched { total, max_out, slot_waits, late_sends, unsent, max_lag } = d;
    if let Some(k) = keep_alive {
        k.abort();
    }
    if let Some(k) = token_keeper {
        k.abort();
    }
    preload_report.keep_alive_failed = keep_alive_failed.load(Ordering::Relaxed);
    let load_wall = start.elapsed().as_secs_f64().max(1e-9);
    let gen_cpu = self_cpu() - gen_cpu_start;
    done_flag.store(1, Ordering::Relaxed);
    let _ = tokio::time::timeout(Duration::from_secs(3), sampler).await;

    // Numbers.
    let samples = samples.lock().unwrap().clone();
    let leaks = std::mem::take(&mut *leaks.lock().unwrap());
    let tick_scrapes = std::mem::take(&mut *tick_scrapes.lock().unwrap());
    let seconds = std::mem::take(&mut *shared.seconds.lock().unwrap());
    let mut timeline = Vec::new();
    for (i, sec) in seconds.iter().enumerate().take(secs_total.max(1) + 1) {
        let l = Latency::of(&sec.hist);
        let (nf_cpu_pct, nf_rss_mb, gen_cpu_pct, steal_pct) =
            match (samples.get(i), samples.get(i + 1)) {
                (Some(a), Some(b)) => {
                    let nf = a.0.zip(b.0).map(|(x, y)| ((y.0 - x.0) * 100.0, y.1));
                    let steal = a.2.zip(b.2).map(|(x, y)| (y - x) * 100.0);
                    (nf.map(|x| x.0), nf.map(|x| x.1), Some((b.1 - a.1) * 100.0), steal)
                }
                _ => (None, None, None, None),
            };
        let group_p99_ms = chart
            .0
            .iter()
            .zip(&sec.groups)
            .filter_map(|(name, h)| Some((name.clone(), h.quantile_ms(0.99)?)))
            .collect();
        let client_p99 = (!sec.hist.is_empty()).then_some(l.p99_ms);
        let mut nf_own_p99_ms = std::collections::BTreeMap::new();
        let nf_tasks = tick_scrapes
            .get(i + 1)
            .map(|b| b.iter().filter_map(|x| Some((x.nf().to_owned(), x.alive_tasks()?))).collect())
            .unwrap_or_default();
        let leak = leaks.get(i + 1).copied().unwrap_or_default();
        if let (Some(a), Some(b)) = (tick_scrapes.get(i), tick_scrapes.get(i + 1)) {
            for end in b {
                let Some(begin) = a.iter().find(|x| x.nf() == end.nf()) else { continue };
                if let Some(p99) = nf_latency::p99_between(begin, end, client_p99) {
                    nf_own_p99_ms.insert(end.nf().to_owned(), p99);
                }
            }
        }
        timeline.push(SecondReport {
            t: i as u64 + 1,
            warmup: ((i + 1) as f64) <= cfg.warmup_s,
            cooldown: (i as f64) >= cfg.warmup_s + cfg.duration_s,
            offered: sec.offered,
            achieved: sec.completed,
            errors: sec.errors,
            answers: sec.answers,
            p50_ms: l.p50_ms,
            p90_ms: l.p90_ms,
            p99_ms: l.p99_ms,
            max_ms: l.max_ms,
            nf_cpu_pct,
            nf_rss_mb,
            gen_cpu_pct,
            steal_pct,
            group_p99_ms,
            nf_own_p99_ms,
            nf_open_fds: leak.fds,
            nf_threads: leak.threads,
            nf_rss_anon_mb: leak.rss_anon_mb,
            nf_rss_file_mb: leak.rss_file_mb,
            nf_tasks,
        });
    }
    let host = host::report(&timeline, &seconds);
    let total_tps = s.total_tps();
    // The closed loop's rate is an outcome: what it sent in the measured window.
    let rate = match cfg.concurrency {
        None => cfg.rate,
        Some(_) => {
            let sent: u64 = shared.procs.iter().map(|p| p.lock().unwrap().sent).sum();
            sent as f64 / cfg.duration_s
        }
    };
    let mut failures = Vec::new();
    let mut warnings = Vec::new();
    let mut procedures = Vec::new();
    let mut transactions = 0;
    let ref_proc = s.reference.as_ref().and_then(|r| r.latency_procedure.clone());
    let mut ref_hist = stats::new_hist();
    for (pi, p) in s.procedures.iter().enumerate() {
        let ps = shared.procs[pi].lock().unwrap().clone();
        if ref_proc.as_deref().is_some_and(|r| p.name.starts_with(r)) {
            ref_hist.add(&ps.hist).context("merging histograms")?;
        }
        let mut criteria = s.criteria_for(p);
        if let Some(ms) = cfg.max_p99_ms {
            criteria.max_p99_ms = ms;
        }
        let lat = Latency::of(&ps.hist);
        transactions += ps.ok;
        let unserved = p.optional_feature.is_some() && ps.ok == 0 && ps.looks_unserved();
        let status = if unserved {
            format!(
                "not served by this build ({})",
                p.optional_feature.as_deref().unwrap_or_default()
            )
        } else {
            "served".to_string()
        };
        let verdict = if unserved {
            "n/a (not served by this build)".to_string()
        } else if ps.sent == 0 {
            "n/a (none sent)".to_string()
        } else {
            let mut v = Vec::new();
            if ps.success_rate() < criteria.min_success_rate {
                v.push(format!(
                    "success {:.3}% < {:.3}%",
                    ps.success_rate() * 100.0,
                    criteria.min_success_rate * 100.0
                ));
            }
            if lat.p99_ms > criteria.max_p99_ms {
                v.push(format!("p99 {:.2} ms > {:.0} ms", lat.p99_ms, criteria.max_p99_ms));
            }
            if v.is_empty() {
                "pass".to_string()
            } else {
                let outcomes: Vec<String> =
                    ps.outcomes.iter().map(|(k, n)| format!("{k}: {n}")).collect();
                failures.push(format!(
                    "{}: {} (outcomes {})",
                    p.name,
                    v.join(", "),
                    outcomes.join(", ")
                ));
                format!("FAIL: {}", v.join(", "))
            }
        };
        procedures.push(ProcReport {
            name: p.name.clone(),
            row: p.row.clone(),
            share_pct: p.tps / total_tps * 100.0,
            offered_tps: p.tps / total_tps * rate,
            sent: ps.sent,
            ok: ps.ok,
            skipped: ps.skipped,
            success_rate: ps.success_rate(),
            latency: lat,
            outcomes: ps.outcomes.clone(),
            status,
            criteria,
            verdict,
        });
    }
    let win = window.lock().unwrap().clone();
    let measured_wall = cfg.duration_s;
    let scale = rate / s.load.rate;
    let mut egress = Vec::new();
    let mut notify_tps = 0.0;
    for (ei, e) in s.egress.iter().enumerate() {
        let observed = match (&win[0], &win[1]) {
            (Some(a), Some(b)) => b.2[ei].saturating_sub(a.2[ei]),
            _ => 0,
        };
        let ever = sim_counters[ei].ever();
        let observed_tps = observed as f64 / measured_wall;
        let sim = s.simulators.iter().find(|x| x.name == e.sim).context("egress simulator")?;
        if sim.kind == crate::scenario::SimKind::NotificationSink {
            notify_tps += observed_tps;
        }
        egress.push(EgressReport {
            name: e.name.clone(),
            row: e.row.clone(),
            simulator: e.sim.clone(),
            sim_latency_ms: sim.latency_ms,
            expected_tps: e.tps * scale,
            observed,
            observed_tps,
            status: if ever == 0 {
                format!("not served by this build ({})", e.feature)
            } else {
                "observed".into()
            },
        });
    }
    let achieved_tps = transactions as f64 / measured_wall;
    let nf_cpu_s = match (&win[0], &win[1]) {
        (Some((Some(a), _, _)), Some((Some(b), _, _))) => Some(b.0 - a.0),
        _ => None,
    };
    let nf_cores_used = nf_cpu_s.map(|c| c / measured_wall);
    let totals = Totals {
        wall_s: measured_wall,
        achieved_tps,
        achieved_tps_with_notify: achieved_tps + notify_tps,
        transactions,
        nf_cpu_s,
        nf_cores_used,
        nf_cpu_us_per_tx: nf_cpu_s
            .filter(|_| transactions > 0)
            .map(|c| c * 1e6 / transactions as f64),
        tps_per_core: nf_cores_used.filter(|c| *c > 0.0).map(|c| achieved_tps / c),
        reference_latency: (!ref_hist.is_empty()).then(|| Latency::of(&ref_hist)),
        nf_rss_max_mb: timeline.iter().filter_map(|t| t.nf_rss_mb).reduce(f64::max),
    };
    let gen_cpu_pct = gen_cpu / load_wall * 100.0;
    let late_share = late_sends as f64 / total.max(1) as f64;
    let saturated = slot_waits > 0
        || (late_sends >= 10 && late_share > 0.01)
        || gen_cpu_pct > 85.0 * cfg.gen_cores as f64;
    if saturated {
        warnings.push(format!(
            "the generator was saturated ({late_sends} sends >10 ms late, {slot_waits} waits for one of {max_out} outstanding slots, CPU {gen_cpu_pct:.0}% of one core on {} cores): the figures understate what the NF can do",
            cfg.gen_cores
        ));
    }
    if unsent > 0 {
        failures.push(format!(
            "{unsent} of {total} requests due were never sent: answers were so slow that all {max_out} outstanding slots stayed taken past the end of the run"
        ));
    }
    if let Some(ms) = cfg.max_p99_ms {
        warnings.push(format!(
            "the scenario's p99 bounds were replaced by --max-p99-ms {ms}: latency was not judged by them"
        ));
    }
    if let Some(h) = host.as_ref().filter(|h| h.steal_pct_mean > host::WARN_STEAL_PCT) {
        warnings.push(format!(
            "the host took {:.1} % of a CPU on average (steal, up to {:.0} % in one second): every latency tail includes it; {} of {} seconds were quiet",
            h.steal_pct_mean, h.steal_pct_max, h.quiet_seconds, h.measured_seconds
        ));
    }
    if preload_report.keep_alive_failed > 0 {
        warnings.push(format!(
            "{} keep-alive heartbeats were not answered 2xx: preloaded profiles may have been suspended",
            preload_report.keep_alive_failed
        ));
    }
    if nf_cpu_s.is_none() {
        warnings.push(
            "NF CPU is not known (external --target): CPU per transaction and TPS per core are n/a"
                .into(),
        );
    }
    for p in &procedures {
        if p.skipped > 0 {
            warnings.push(format!(
                "{}: {} requests skipped (nothing created yet to act on)",
                p.name, p.skipped
            ));
        }
    }
    let mut profile_counts = Vec::new();
    for (p, prep) in s.procedures.iter().zip(&maker.prepared) {
        for (vi, counts) in prep.profile_counts.iter().enumerate() {
            let label = p.variants.get(vi).map_or("", |v| v.label.as_str());
            let row = counts.row(&p.name, label, p.expect_profiles);
            warnings.extend(profile_count::warning(&row));
            profile_counts.push(row);
        }
    }
    if total == 0 {
        bail!("the rate and duration give no request to send");
    }
    Ok(Report {
        scenario: s.name.clone(),
        description: s.description.clone(),
        command: cfg.command.clone(),
        started_at: chrono::Utc::now().to_rfc3339(),
        fivecore_version: env!("CARGO_PKG_VERSION").into(),
        rate,
        scale,
        load_mode: match cfg.concurrency {
            None => "open loop".into(),
            Some(_) => "closed loop".into(),
        },
        concurrency: cfg.concurrency,
        security: cfg.security.as_ref().map(|x| x.report()).unwrap_or_default(),
        connections: http_pools.iter().map(|p| p.active()).max().unwrap_or(0),
        duration_s: cfg.duration_s,
        warmup_s: cfg.warmup_s,
        targets: cfg.targets.clone(),
        preload: preload_report,
        procedures,
        egress,
        totals,
        generator: GeneratorReport {
            cpu_s: gen_cpu,
            cpu_pct: gen_cpu_pct,
            cores: cfg.gen_cores,
            max_outstanding: max_out,
            peak_outstanding: shared.peak_outstanding.load(Ordering::Relaxed),
            slot_waits,
            late_sends,
            unsent,
            max_lag_ms: max_lag.as_secs_f64() * 1000.0,
            saturated,
        },
        reference: s.reference.clone(),
        rx: cfg.rx.as_ref().map(|r| RxReport {
            peers: r.reports(),
            sessions_open_at_end: r.sessions.open(),
            sessions_peak: r.sessions.peak(),
        }),
        sh: cfg.sh.as_ref().map(|s| s.report()),
        gx: cfg.gx.as_ref().map(|g| g.report()),
        profile_counts,
        nf_latency: {
            let h = nf_hists.lock().unwrap();
            // The client's quantiles over the procedures of an operation bound the NF's.
            let client = |nf: &str, op: &str| -> Option<(f64, f64)> {
                let mut merged = stats::new_hist();
                for (pi, p) in s.procedures.iter().enumerate() {
                    // A Diameter procedure goes to the NF of `[diameter]` (the PCF of an SM +
                    // Rx mix whose first NF is the UDR), unless it names one.
                    let diameter_nf = s.diameter.as_ref().map(|d| d.nf.as_str());
                    let default_nf = match p.rx.is_some() || p.sh.is_some() || p.gx.is_some() {
                        true => diameter_nf.unwrap_or(first_nf),
                        false => first_nf,
                    };
                    let of_nf = p.nf.as_deref().unwrap_or(default_nf) == nf;
                    if of_nf && nf_latency::maps_to(&p.name, p.nf_operation.as_deref(), op) {
                        merged.add(&shared.procs[pi].lock().unwrap().hist).ok()?;
                    }
                }
                (!merged.is_empty()).then(|| {
                    let l = Latency::of(&merged);
                    (l.p50_ms, l.p99_ms)
                })
            };
            nf_latency::rows(&h[0], &h[1], &client)
        },
        host,
        overload: {
            let w = shared.window.lock().unwrap();
            crate::overload::OverloadReport::new(
                w.0,
                Latency::of(&w.1),
                &timeline,
                (cfg.warmup_s, cfg.duration_s),
                (cooldown_s, cfg.rate * s.load.cooldown_scale),
            )
        },
        timeline,
        criteria_passed: failures.is_empty(),
        failures,
        warnings,
        dd: None,
    })
}

/// Heartbeats per second the preloaded NF profiles need besides the mix's: the NRF suspends a
/// profile it has not heard of for its heartbeat timer (plus a grace), and the mix's heartbeats
/// scale with the run's rate (52/s at 51.6K keep 260 profiles alive; at `--scale 0.01` one
/// comes every 500 s), after which discovery answers lose profiles. Each profile is refreshed
/// twice per timer: what the mix gives at this rate is subtracted.
fn keep_alive_rate(s: &Scenario, rate: f64, profiles: usize) -> f64 {
    let heartbeats: f64 =
        s.procedures.iter().filter(|p| p.name.starts_with("NFHeartbeat")).map(|p| p.tps).sum();
    if profiles == 0 || heartbeats == 0.0 {
        return 0.0;
    }
    let mix = heartbeats / s.total_tps() * rate;
    let needed = profiles as f64 * 2.0 / f64::from(profile::HEARTBEAT_TIMER_SECS);
    (needed - mix).max(0.0)
}

/// Sends `tps` heartbeats per second to the preloaded profiles `ids` in turn until `end`,
/// outside the mix and unmeasured; counts those not answered 2xx.
/// What the security modes promise, checked as a consumer meets it before the load: with
/// `--oauth2` a request of the mix without a token is refused (401), else the run stops (its
/// figures would not be those of token checking); with `--tls` a client without a certificate
/// is refused and a new connection resumes its TLS session (both reported).
async fn probe_security(
    maker: &Maker,
    s: &Scenario,
    sec: &Security,
    base0: &str,
    rng: &mut Rng,
) -> Result<()> {
    if sec.modes().oauth2 {
        // A procedure with a token that takes nothing from a pool (the request is refused before
        // any handler, so it creates nothing either).
        let pi = maker
            .prepared
            .iter()
            .enumerate()
            .position(|(i, p)| {
                let q = &s.procedures[i];
                p.token.is_some()
                    && !q.path.contains("{take:")
                    && !q.body.as_deref().unwrap_or("").contains("{take:")
            })
            .context("--oauth2: no procedure of the mix calls a service that needs a token")?;
        let p = &maker.prepared[pi];
        let Some(Work::Http { path, body, condition, .. }) = maker.make(pi, 0, rng)? else {
            bail!("--oauth2: the probe request of {} was not made", s.procedures[pi].name);
        };
        let status = p
            .conns
            .pick()
            .send(Call {
                method: &p.method,
                path,
                body,
                content_type: p.content_type.as_ref(),
                headers: &p.headers,
                condition,
                authorization: None,
                want: Want::default(),
            })
            .await
            .map(|a| a.status)
            .map_err(|e| anyhow::anyhow!("--oauth2: the request without a token: {e:?}"))?;
        sec.record_no_token_probe(&s.procedures[pi].name, status);
        if status != 401 {
            bail!(
                "--oauth2: {} without a token was answered {status}, not 401: the NF does not require tokens",
                s.procedures[pi].name
            );
        }
    }
    if sec.modes().tls {
        sec.probe_tls(base0).await?;
    }
    Ok(())
}

async fn keep_alive_loop(
    client: SbiClient,
    base: String,
    ids: Vec<String>,
    tps: f64,
    end: Instant,
    failed: Arc<AtomicU64>,
) {
    let body = Bytes::from_static(br#"[{"op":"replace","path":"/nfStatus","value":"REGISTERED"}]"#);
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / tps));
    for id in ids.iter().cycle() {
        if tick.tick().await >= end {
            return;
        }
        // Each on its own task: a slow answer must not lower the rate.
        let (client, failed, body) = (client.clone(), failed.clone(), body.clone());
        let url = format!("{base}/nnrf-nfm/v1/nf-instances/{id}");
        tokio::spawn(async move {
            let rsp = client
                .request(Method::PATCH, &url)
                .header("content-type", "application/json-patch+json")
                .body(body)
                .send()
                .await;
            if !rsp.is_ok_and(|r| r.status().is_success()) {
                failed.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
}

/// Each NF's latency histograms (`nf`, `url`), those that answer.
async fn scrape_each(scraper: &SbiClient, urls: &[(String, String)]) -> Vec<nf_latency::Scrape> {
    let mut got = Vec::new();
    for (nf, url) in urls {
        got.extend(nf_latency::scrape(scraper, nf, url).await);
    }
    got
}

/// What the load loop did, for the generator's report.
struct Dispatched {
    /// Requests due (open loop) or sent (closed loop).
    total: u64,
    max_out: usize,
    slot_waits: u64,
    late_sends: u64,
    unsent: u64,
    max_lag: Duration,
}

/// Open loop: request `n` is due at `start + n / rate`, whatever the answers do; each is sent
/// by a task of its own, and its latency runs from its due time.
async fn open_loop(
    maker: &Arc<Maker>,
    mut pick: Picker,
    mut rng: Rng,
    schedule: Schedule,
    secs: f64,
    max_out: usize,
    timeout_ms: u64,
) -> Result<Dispatched> {
    let shared = &maker.shared;
    let start = maker.start;
    let total = schedule.total(secs);
    let sem = Arc::new(Semaphore::new(max_out));
    let mut slot_waits = 0u64;
    let mut late_sends = 0u64;
    let mut max_lag = Duration::ZERO;
    // A generator that fell this far behind (all slots taken by slow answers) stops: the
    // requests still due are counted as never sent, and the run fails.
    let give_up = start + Duration::from_secs_f64(secs) + Duration::from_millis(timeout_ms);
    let mut unsent = 0u64;
    let mut pacer = Pacer::new().context("the dispatcher's timer")?;
    for n in 0..total {
        let due_off = schedule.due(n);
        let due = start + due_off;
        pacer.until(due).await?;
        let permit = match sem.clone().try_acquire_owned() {
            Ok(p) => Some(p),
            Err(_) => {
                slot_waits += 1;
                tokio::time::timeout_at(give_up, sem.clone().acquire_owned())
                    .await
                    .ok()
                    .transpose()?
            }
        };
        let Some(permit) = permit.filter(|_| Instant::now() < give_up) else {
            unsent = total - n;
            break;
        };
        shared.second(due_off.as_secs() as usize, |x| x.offered += 1);
        let lag = Instant::now().saturating_duration_since(due);
        if lag > LATE {
            late_sends += 1;
        }
        max_lag = max_lag.max(lag);
        let pi = pick.pick(&mut rng);
        let measured = due_off >= shared.measure_from && due_off < shared.measure_to;
        let Some(work) = maker.make(pi, n, &mut rng)? else {
            if measured {
                shared.procs[pi].lock().unwrap().skipped += 1;
            }
            continue;
        };
        shared.sending();
        // Latency runs from the due time, or from the send when the pacer let it leave a few
        // µs early: never shorter than it was.
        let from = due.min(Instant::now());
        let maker = maker.clone();
        tokio::spawn(async move {
            let _permit = permit;
            maker.execute(pi, work, measured, from).await;
        });
    }
    // Drain: every permit back, or the timeout passed.
    let drain = Duration::from_millis(timeout_ms + 2000);
    let all = tokio::time::timeout(drain, sem.acquire_many(max_out as u32)).await;
    if all.is_err() {
        eprintln!(
            "warning: {} requests still outstanding after the drain timeout",
            shared.outstanding.load(Ordering::Relaxed)
        );
    }
    Ok(Dispatched { total, max_out, slot_waits, late_sends, unsent, max_lag })
}

/// Closed loop: `slots` requests outstanding at all times; each slot sends its next request
/// when the answer to its previous one arrives, until the run's end. The rate is an outcome,
/// and latency runs from the actual send. Each slot draws from its own random stream and deck
/// (a deck keeps its shares exact per slot).
async fn closed_loop(
    maker: &Arc<Maker>,
    pick: Picker,
    rng: &mut Rng,
    slots: usize,
    secs: f64,
    timeout_ms: u64,
) -> Result<Dispatched> {
    let end = maker.start + Duration::from_secs_f64(secs);
    let seq = Arc::new(AtomicU64::new(0));
    let sent = Arc::new(AtomicU64::new(0));
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..slots {
        let (maker, seq, sent) = (maker.clone(), seq.clone(), sent.clone());
        let (mut pick, mut rng) = (pick.clone(), Rng::new(rng.next_u64()));
        set.spawn(async move {
            let shared = &maker.shared;
            tokio::time::sleep_until(maker.start).await;
            loop {
                let now = Instant::now();
                if now >= end {
                    return Ok::<_, anyhow::Error>(());
                }
                let off = now - maker.start;
                let pi = pick.pick(&mut rng);
                let measured = off >= shared.measure_from && off < shared.measure_to;
                let n = seq.fetch_add(1, Ordering::Relaxed);
                let Some(work) = maker.make(pi, n, &mut rng)? else {
                    if measured {
                        shared.procs[pi].lock().unwrap().skipped += 1;
                    }
                    // Nothing to act on yet: the other slots make it; don't spin meanwhile.
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    continue;
                };
                shared.second(off.as_secs() as usize, |x| x.offered += 1);
                sent.fetch_add(1, Ordering::Relaxed);
                shared.sending();
                let sent_at = Instant::now();
                maker.execute(pi, work, measured, sent_at).await;
            }
        });
    }
    // Each slot's last request ends within its timeout.
    let drain = end + Duration::from_millis(timeout_ms + 2000);
    loop {
        match tokio::time::timeout_at(drain, set.join_next()).await {
            Ok(Some(r)) => r??,
            Ok(None) => break,
            Err(_) => {
                eprintln!(
                    "warning: {} requests still outstanding after the drain timeout",
                    maker.shared.outstanding.load(Ordering::Relaxed)
                );
                set.abort_all();
                break;
            }
        }
    }
    Ok(Dispatched {
        total: sent.load(Ordering::Relaxed),
        max_out: slots,
        slot_waits: 0,
        late_sends: 0,
        unsent: 0,
        max_lag: Duration::ZERO,
    })
}

/// Lines of the latency chart: procedures grouped by their name up to the first `-` or space
/// (`NFDiscover-UDM` and `NFDiscover-SMF` are `NFDiscover`, `AAR-I` and `AAR-U` are `AAR`), the
/// busiest [`CHART_GROUPS`] - 1 on lines of their own and the rest together as `other`.
/// Returns the group names and each procedure's group.
fn chart_groups(s: &Scenario) -> (Vec<String>, Vec<usize>) {
    let key = |name: &str| name.split(['-', ' ']).next().unwrap_or(name).to_owned();
    let mut tps: Vec<(String, f64)> = Vec::new();
    for p in &s.procedures {
        let k = key(&p.name);
        match tps.iter_mut().find(|x| x.0 == k) {
            Some(x) => x.1 += p.tps,
            None => tps.push((k, p.tps)),
        }
    }
    tps.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut names: Vec<String> = tps.iter().map(|x| x.0.clone()).collect();
    if names.len() > CHART_GROUPS {
        names.truncate(CHART_GROUPS - 1);
        names.push("other".into());
    }
    let of = s
        .procedures
        .iter()
        .map(|p| {
            let k = key(&p.name);
            names.iter().position(|n| *n == k).unwrap_or(names.len() - 1)
        })
        .collect();
    (names, of)
}

/// Latency lines on the chart at most (a legend line each).
const CHART_GROUPS: usize = 6;

/// The outcome label of an HTTP status, without allocating for the usual ones.
fn status_label(code: u16) -> Cow<'static, str> {
    Cow::Borrowed(match code {
        200 => "200",
        201 => "201",
        204 => "204",
        400 => "400",
        403 => "403",
        404 => "404",
        500 => "500",
        503 => "503",
        _ => return Cow::Owned(code.to_string()),
    })
}

/// The path (with its query) and body of an HTTP procedure's request; `None` when a generator
/// has nothing to draw from (an empty pool).
fn render_http(
    p: &Prepared,
    env: &Env,
    ctx: &mut ReqCtx,
    rng: &mut Rng,
    n: u64,
    bindings: Option<&BindingPlan>,
) -> Option<(String, Option<Bytes>, usize)> {
    let mut url = p.path.render(env, ctx, rng, true)?;
    let mut variant = 0;
    if let Some(w) = &p.pick_variant {
        variant = w.pick(rng);
        let q = p.variants[variant].render(env, ctx, rng, false)?;
        url.push('?');
        encode_query_into(&q, &mut url);
    }
    let body = match (&p.body, &p.body_profile) {
        (Some(b), _) => Some(Bytes::from(b.render(env, ctx, rng, false)?)),
        (None, Some(set)) => {
            let id = ctx.uuid(rng);
            let services = if set.services.is_empty() {
                profile::default_services(&set.nf_type)
            } else {
                set.services.clone()
            };
            let spec = ProfileSpec {
                nf_type: &set.nf_type,
                label: set.label(),
                index: n as usize,
                target_size: set.size_bytes[0],
                services: &services,
                endpoint: None,
            };
            Some(Bytes::from(serde_json::to_vec(&profile::build(&spec, &id, rng)).ok()?))
        }
        // A binding for a UE address no other binding holds: past the preloaded ones, one
        // per request sequence number.
        (None, None) if p.body_binding => {
            let b = bindings?;
            Some(Bytes::from(b.factory.document(b.count + n)))
        }
        _ => None,
    };
    Some((url, body, variant))
}

/// The most connections the kit opens to one NF: the scenario's for a fixed pool; else enough
/// for every request it may have outstanding even if the NF allowed only 16 streams per
/// connection (the pool opens them only while the open ones have all their streams in use).
pub fn max_connections(load: &crate::scenario::Load, concurrency: Option<usize>) -> usize {
    if load.fixed_connections {
        return load.connections;
    }
    let outstanding = concurrency.unwrap_or(load.max_outstanding);
    load.connections.max(outstanding.div_ceil(16).min(1024))
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_pool_may_grow_to_fit_what_may_be_outstanding_unless_fixed() {
        let mut load: crate::scenario::Load =
            toml::from_str("rate = 1\nduration_s = 1\nwarmup_s = 0\nmax_outstanding = 4096")
                .unwrap();
        load.connections = 4;
        assert_eq!(max_connections(&load, None), 256);
        assert_eq!(max_connections(&load, Some(32)), 4);
        load.fixed_connections = true;
        assert_eq!(max_connections(&load, Some(100_000)), 4);
    }

    use super::*;

    #[test]
    fn keep_alive_makes_up_what_the_mixs_heartbeats_lack_at_this_rate() {
        let s = Scenario::load("nrf-51.6k").unwrap();
        // Full scale: 52/s of heartbeats keep 260 profiles (2 per hour each needed) alive.
        assert_eq!(keep_alive_rate(&s, s.load.rate, 260), 0.0);
        // At 0.1 %: 0.052/s from the mix, the rest (of 0.144/s) from the kit.
        let timer = f64::from(profile::HEARTBEAT_TIMER_SECS);
        let k = keep_alive_rate(&s, s.load.rate * 0.001, 260);
        assert!((k - (260.0 * 2.0 / timer - 0.052)).abs() < 0.005, "{k}");
        assert_eq!(keep_alive_rate(&s, 1.0, 0), 0.0, "nothing preloaded");
        let bsf = Scenario::load("bsf-s9-54k-25m").unwrap();
        assert_eq!(keep_alive_rate(&bsf, 10.0, 0), 0.0, "no heartbeats in the mix");
    }

    #[test]
    fn chart_groups_put_the_busiest_on_lines_of_their_own() {
        let s = Scenario::load("nrf-51.6k").unwrap();
        let (names, of) = chart_groups(&s);
        assert_eq!(names.len(), CHART_GROUPS);
        assert_eq!(names[0], "NFDiscover");
        assert_eq!(names.last().unwrap(), "other");
        for (p, g) in s.procedures.iter().zip(&of) {
            if p.name.starts_with("NFDiscover-") {
                assert_eq!(*g, 0, "{}", p.name);
            }
        }
        let bsf = Scenario::load("bsf-s9-54k-25m").unwrap();
        let (names, _) = chart_groups(&bsf);
        assert!(names.contains(&"AAR".to_owned()) && names.contains(&"Binding".to_owned()));
    }
}
