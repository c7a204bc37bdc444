//! The report: `report.json` (tools), `report.md` (docs), `report.html` (self-contained, inline
//! SVG charts drawn here, no JavaScript).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use crate::bindings::BindingsReport;
use crate::rx::peer::PeerReport;
use crate::scenario::{Criteria, Reference};
use crate::stats::{Latency, SecondReport};

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub scenario: String,
    pub description: String,
    pub command: String,
    pub started_at: String,
    pub fivecore_version: String,
    /// Requests per second offered (all procedures); in the closed loop, sent in the measured
    /// window (an outcome, not a setting).
    pub rate: f64,
    /// `rate` / the scenario's full-scale rate.
    pub scale: f64,
    pub duration_s: f64,
    pub warmup_s: f64,
    /// `open loop` (a fixed arrival rate, latency from each request's due time) or `closed
    /// loop` (`concurrency` requests outstanding, latency from each actual send).
    pub load_mode: String,
    pub concurrency: Option<usize>,
    /// `--oauth2` / `--tls`: the mode and what the kit checked of it (crate::security).
    pub security: crate::security::SecurityReport,
    /// The most HTTP/2 connections open to one NF (the pool grows past the scenario's while
    /// every connection has all the streams the NF allows in use, unless fixed).
    pub connections: usize,
    /// `nf=url`, and whether the kit started it.
    pub targets: Vec<TargetReport>,
    pub preload: PreloadReport,
    pub procedures: Vec<ProcReport>,
    pub egress: Vec<EgressReport>,
    pub totals: Totals,
    pub generator: GeneratorReport,
    pub reference: Option<Reference>,
    /// The Diameter side, when the scenario has one.
    pub rx: Option<RxReport>,
    /// The Diameter Sh application servers (UDR T3).
    pub sh: Option<crate::sh::ShReport>,
    /// The simulated PCEFs (Gx).
    pub gx: Option<crate::gx::GxReport>,
    /// What the NFs measured themselves, per operation, from their `/metrics` histograms over
    /// the measured window (crate::nf_latency); empty when the targets do not publish them.
    pub nf_latency: Vec<crate::nf_latency::NfLatencyRow>,
    /// Profiles per discovery answer, per procedure and variant, beside the reference's
    /// (crate::profile_count).
    pub profile_counts: Vec<crate::profile_count::ProfileCountRow>,
    /// Steal time over the measured window and the latency of its quiet seconds (crate::host).
    pub host: Option<crate::host::HostReport>,
    pub timeline: Vec<SecondReport>,
    /// Answers by kind, served latency, silent seconds, recovery after a cool-down.
    pub overload: crate::overload::OverloadReport,
    pub criteria_passed: bool,
    pub failures: Vec<String>,
    pub warnings: Vec<String>,
    /// A Data Director scenario's sources, feeds and cost (crate::dd), in place of the
    /// procedures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dd: Option<crate::dd::report::DdReport>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TargetReport {
    pub nf: String,
    pub url: String,
    pub started_by_kit: bool,
    pub pid: Option<u32>,
    pub cpus: Option<String>,
    /// Cores the NF was limited to (cgroup CPU quota), if any.
    pub cpu_quota: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct PreloadReport {
    pub profiles: usize,
    pub subscriptions: usize,
    /// Profiles and subscriptions, over HTTP.
    pub seconds: f64,
    pub bindings: Option<BindingsReport>,
    /// UDR subscribers (SLF entries, EIR equipment, policy data).
    pub udr: Option<crate::udr::UdrReport>,
    /// Rx sessions opened (AAR-I) before the load, and how long that took.
    pub rx_sessions: u64,
    pub rx_sessions_seconds: f64,
    /// Gx sessions opened (CCR-I) before the load, and how long that took.
    pub gx_sessions: u64,
    pub gx_sessions_seconds: f64,
    /// Heartbeats per second the kit sent besides the mix's, so that the NRF suspends no
    /// preloaded profile (crate::engine's `keep_alive_rate`), and how many were not answered 2xx.
    pub keep_alive_tps: f64,
    pub keep_alive_failed: u64,
}

/// The Diameter simulators and the Rx sessions of the run.
#[derive(Debug, Clone, Serialize, Default)]
pub struct RxReport {
    /// What each simulated AF and PCF received.
    pub peers: Vec<PeerReport>,
    pub sessions_open_at_end: u64,
    /// Most Rx sessions open at once.
    pub sessions_peak: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProcReport {
    pub name: String,
    pub row: String,
    /// Share of the offered mix, percent.
    pub share_pct: f64,
    /// Offered rate, requests/s.
    pub offered_tps: f64,
    pub sent: u64,
    pub ok: u64,
    pub skipped: u64,
    pub success_rate: f64,
    pub latency: Latency,
    pub outcomes: std::collections::BTreeMap<String, u64>,
    /// `served`, or `not served by this build` (an optional feature answered only 404/405/501).
    pub status: String,
    pub criteria: Criteria,
    /// `pass`, `FAIL: ...`, `n/a (...)`.
    pub verdict: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct EgressReport {
    pub name: String,
    pub row: String,
    pub simulator: String,
    pub sim_latency_ms: u64,
    pub expected_tps: f64,
    pub observed: u64,
    pub observed_tps: f64,
    pub status: String,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct Totals {
    /// Measured wall seconds (the duration, excluding warm-up).
    pub wall_s: f64,
    /// Answers with an expected status per second, all procedures.
    pub achieved_tps: f64,
    /// `achieved_tps` plus notifications received by the sinks: how the reference counts.
    pub achieved_tps_with_notify: f64,
    pub transactions: u64,
    /// NF CPU seconds in the measured window (sum over the NFs), when the kit started them.
    pub nf_cpu_s: Option<f64>,
    /// `nf_cpu_s / wall_s`.
    pub nf_cores_used: Option<f64>,
    pub nf_cpu_us_per_tx: Option<f64>,
    /// `achieved_tps / nf_cores_used`.
    pub tps_per_core: Option<f64>,
    pub nf_rss_max_mb: Option<f64>,
    /// Latency of all procedures named `<reference.latency_procedure>*` together (one merged
    /// histogram), to set beside the reference's latency.
    pub reference_latency: Option<Latency>,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct GeneratorReport {
    pub cpu_s: f64,
    /// Percent of one core (includes the in-process simulators).
    pub cpu_pct: f64,
    pub cores: usize,
    pub max_outstanding: usize,
    pub peak_outstanding: usize,
    /// Times a send waited for an outstanding slot.
    pub slot_waits: u64,
    /// Sends more than 10 ms behind their intended time.
    pub late_sends: u64,
    /// Requests due but never sent: the generator gave up at the end of the run plus the
    /// request timeout, all outstanding slots still taken.
    pub unsent: u64,
    pub max_lag_ms: f64,
    pub saturated: bool,
}

pub fn write_all(r: &Report, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("report.json"), serde_json::to_string_pretty(r)?)?;
    std::fs::write(dir.join("report.md"), markdown(r))?;
    std::fs::write(dir.join("report.html"), html(r))?;
    Ok(())
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or("n/a".into(), |v| format!("{v:.prec$}"))
}

/// What our used cores hold, in the side-by-side rows.
const OUR_CORES: &str = "the NF process, including its embedded store";
/// What they hold in a Data Director scenario.
const OUR_DD_CORES: &str = "the Data Director process: ingest, NF topics and MAIN on disk, aggregation, filters, feeds; not the kit's sources and consumers";
/// Ours, when the kit started a Kafka broker for the scenario.
const OUR_DD_KAFKA_CORES: &str = "the Data Director process and the Kafka broker the kit started (its topics); not the kit's sources and consumers";
/// What the reference's used cores hold when the scenario does not say.
const THEIR_USED_CORES: &str = "its NF pods (not its database tier, not sidecars)";

/// TPS per core: `tps / cores`, when there are cores.
pub fn per_core(tps: f64, cores: Option<f64>) -> Option<f64> {
    cores.filter(|c| *c > 0.0).map(|c| tps / c)
}

/// Our TPS counted as the reference counts its own: with the notifications the NF sent when
/// its figure includes them, without otherwise.
pub fn counted_tps(r: &Report) -> f64 {
    match &r.reference {
        Some(rf) if rf.counts_notifications => r.totals.achieved_tps_with_notify,
        _ => r.totals.achieved_tps,
    }
}

/// The reference's used cores: as given, or its TPS over its TPS per used core.
pub fn reference_used_cores(rf: &Reference) -> Option<f64> {
    rf.used_cores.or_else(|| rf.tps_per_used_core.filter(|t| *t > 0.0).map(|t| rf.tps_achieved / t))
}

/// The side-by-side rows: (what, ours, reference). Like for like first: CPU per used core on
/// both sides, each saying what its cores hold; the reference's per requested core second.
pub fn comparison(r: &Report) -> Vec<(String, String, String)> {
    let Some(rf) = &r.reference else { return Vec::new() };
    let t = &r.totals;
    let tps = counted_tps(r);
    // A Data Director scenario counts messages (copies) per second.
    let (unit, our_cores) = match &r.dd {
        Some(dd) if dd.kafka_cpu_s.is_some() => ("MPS", OUR_DD_KAFKA_CORES),
        Some(_) => ("MPS", OUR_DD_CORES),
        None => ("TPS", OUR_CORES),
    };
    let their_used = reference_used_cores(rf);
    let their_per_used = rf.tps_per_used_core.or_else(|| per_core(rf.tps_achieved, their_used));
    let used_include = rf.used_cores_include.as_deref().unwrap_or(THEIR_USED_CORES);
    let requested_include =
        rf.requested_include.as_deref().unwrap_or("requested cores of its whole NF deployment");
    let notify = if r.dd.is_some() {
        "copies the ingest API accepted; the reference's ingress MPS"
    } else if rf.counts_notifications {
        "answered OK plus the notifications the NF sent, as the reference counts"
    } else {
        "answered OK; notifications the NF sent are not counted, as the reference's figure leaves them out"
    };
    let scale = if (r.scale - 1.0).abs() > 1e-9 {
        format!(
            "; this run at {:.4} of the reference's offered rate ({:.1}/s offered){}",
            r.scale,
            r.rate,
            if r.concurrency.is_some() { ", closed loop: the rate an outcome" } else { "" }
        )
    } else {
        String::new()
    };
    let mut rows = vec![
        (
            format!("{unit} per used core (ours: {our_cores}; reference: {used_include})"),
            opt(per_core(tps, t.nf_cores_used), 0),
            their_per_used.map_or("n/a (no utilisation published)".into(), |v| format!("{v:.0}")),
        ),
        (
            format!("CPU cores used (ours: {our_cores}; reference: {used_include})"),
            opt(t.nf_cores_used, 3),
            opt(their_used, 1),
        ),
        (
            format!(
                "{unit} per requested core (reference: {requested_include}; ours requests none)"
            ),
            "n/a".into(),
            format!("{:.0}", rf.tps_per_core),
        ),
        (
            format!("CPU cores requested (reference: {requested_include})"),
            "n/a".into(),
            format!("{:.0}", rf.cpu_requested),
        ),
        (
            format!("{unit} achieved ({notify}{scale})"),
            format!("{tps:.1}"),
            format!("{:.0}", rf.tps_achieved),
        ),
    ];
    if let Some(dd) = &r.dd {
        rows.push((
            "CPU µs per copy (ours: the Data Director process per ingested copy; reference: its used cores over its MPS)".into(),
            opt(dd.dd_cpu_us_per_copy, 2),
            opt(their_used.map(|c| c * 1e6 / rf.tps_achieved), 1),
        ));
        for f in &dd.feeds {
            if let Some(theirs) = f.reference_e2e_avg_ms {
                let ours = match f.delivered {
                    0 => "n/a".into(),
                    _ => format!("{:.2} ({:.2})", f.e2e.mean_ms, f.e2e.p99_ms),
                };
                rows.push((
                    format!("feed {} E2E mean ms (ours: mean (p99))", f.name),
                    ours,
                    format!("{theirs}"),
                ));
            }
        }
    }
    let notified = t.achieved_tps_with_notify - t.achieved_tps;
    if notified > 0.0 || rf.notifications_tps.is_some() {
        rows.push((
            format!("notifications sent per second (counted at the simulators{scale})"),
            format!("{notified:.1}"),
            opt(rf.notifications_tps, 0),
        ));
    }
    if let Some(name) = &rf.latency_procedure {
        let l = t.reference_latency.as_ref();
        let pct = [
            ("p50", l.map(|l| l.p50_ms), rf.latency_p50_ms),
            ("p90", l.map(|l| l.p90_ms), rf.latency_p90_ms),
            ("p95", l.map(|l| l.p95_ms), rf.latency_p95_ms),
            ("p99", l.map(|l| l.p99_ms), rf.latency_p99_ms),
        ];
        for (what, ours, theirs) in pct {
            if let Some(theirs) = theirs {
                rows.push((format!("{name} {what} ms"), opt(ours, 2), format!("{theirs:.0}")));
            }
        }
    }
    for p in &r.procedures {
        let Some(theirs) = rf.mean_latency_ms.get(&p.name) else { continue };
        let ours = if p.sent > 0 {
            format!("{:.2} ({:.2})", p.latency.mean_ms, p.latency.p99_ms)
        } else {
            "n/a".into()
        };
        rows.push((format!("{} mean ms (ours: mean (p99))", p.name), ours, format!("{theirs}")));
    }
    rows.push(("Duration".into(), format!("{:.0} s", r.duration_s), rf.duration.clone()));
    rows
}

/// The security mode, in one line of the report's header.
fn security_line(sec: &crate::security::SecurityReport) -> String {
    let mut line = format!("- security: {}", sec.mode);
    match sec.mode.as_str() {
        "plain" => line.push_str(" (no access tokens, h2c)"),
        _ => {
            if let Some(id) = &sec.consumer_instance {
                let tokens: Vec<String> = sec
                    .tokens
                    .iter()
                    .map(|t| {
                        format!("{} ({}, {} renewed)", t.service, t.target_nf_type, t.renewals)
                    })
                    .collect();
                let _ = write!(
                    line,
                    "; the kit is {} {id}, tokens from {}: {}",
                    sec.consumer_nf_type.as_deref().unwrap_or("?"),
                    sec.token_issuer.as_deref().unwrap_or("?"),
                    tokens.join(", ")
                );
                if let Some(p) = &sec.no_token_probe {
                    let _ = write!(line, "; {} without a token: {}", p.procedure, p.status);
                }
            }
            if sec.mode.contains("tls") {
                let _ = write!(
                    line,
                    "; mutual TLS: {} full and {} resumed handshakes; a reconnect: {}; a client without a certificate: {}",
                    sec.tls_full_handshakes,
                    sec.tls_resumed_handshakes,
                    sec.tls_reconnect_probe.as_deref().unwrap_or("?"),
                    sec.tls_no_certificate_probe.as_deref().unwrap_or("?")
                );
            }
        }
    }
    line
}

pub fn markdown(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# fivecore bench: {}\n\n{}\n", r.scenario, r.description);
    let _ = writeln!(
        s,
        "- command: `{}`\n- started: {} · fivecore {}",
        r.command, r.started_at, r.fivecore_version
    );
    match r.concurrency {
        _ if r.dd.is_some() => {
            let _ = writeln!(s, "- open loop: {:.1} copies/s offered (scale {:.4} of the reference's MPS) by simulated NFs over {} HTTP/2 connections to the ingest API, each copy timestamped when it was due, {:.0} s measured after {:.0} s warm-up", r.rate, r.scale, r.connections, r.duration_s, r.warmup_s);
        }
        Some(n) => {
            let _ = writeln!(s, "- closed loop: {n} requests outstanding over up to {} HTTP/2 connections per NF, {:.2}/s sent (scale {:.4} of the reference; an outcome, not a setting), latency from each actual send, {:.0} s measured after {:.0} s warm-up", r.connections, r.rate, r.scale, r.duration_s, r.warmup_s);
        }
        None => {
            let _ = writeln!(s, "- open loop: offered rate {:.2}/s (scale {:.4} of the reference) over up to {} HTTP/2 connections per NF, latency from each request's due time, {:.0} s measured after {:.0} s warm-up", r.rate, r.scale, r.connections, r.duration_s, r.warmup_s);
        }
    }
    let _ = writeln!(s, "{}", security_line(&r.security));
    for t in &r.targets {
        let how = if t.started_by_kit {
            format!(
                "started by the kit, pid {}, cpus {}{}",
                t.pid.unwrap_or(0),
                t.cpus.as_deref().unwrap_or("any"),
                t.cpu_quota
                    .map_or(String::new(), |q| format!(", limited to {q} cores (cgroup quota)"))
            )
        } else {
            "external".into()
        };
        let _ = writeln!(s, "- {} at {} ({how})", t.nf, t.url);
    }
    if r.preload.profiles + r.preload.subscriptions > 0 {
        let _ = writeln!(
            s,
            "- preload: {} profiles, {} subscriptions in {:.1} s",
            r.preload.profiles, r.preload.subscriptions, r.preload.seconds
        );
    }
    if r.preload.keep_alive_tps > 0.0 {
        let _ = writeln!(
            s,
            "- keep-alive: {:.1} heartbeats/s besides the mix's, not measured (at this rate the mix's heartbeats would let the NRF suspend preloaded profiles); {} not answered 2xx",
            r.preload.keep_alive_tps, r.preload.keep_alive_failed
        );
    }
    if let Some(b) = &r.preload.bindings {
        let _ = write!(
            s,
            "- preload: {} bindings by {} in {:.1} s ({:.0}/s)",
            b.count,
            b.method,
            b.seconds,
            b.count as f64 / b.seconds.max(1e-9)
        );
        if let (Some(i), Some(mb)) = (b.index_seconds, b.db_mb) {
            let _ = write!(s, ", of which {i:.1} s building indexes; database {mb:.0} MB");
        }
        let _ = writeln!(s);
    }
    if let Some(u) = &r.preload.udr {
        let _ = write!(
            s,
            "- preload: {} {} by {} in {:.1} s ({:.0}/s)",
            u.count,
            u.kind,
            u.method,
            u.seconds,
            u.count as f64 / u.seconds.max(1e-9)
        );
        if u.subscriptions > 0 {
            let _ = write!(s, ", with {} subs-to-notify subscriptions", u.subscriptions);
        }
        if let Some(mb) = u.db_mb {
            let _ = write!(s, "; database {mb:.0} MB");
        }
        if let Some(t) = u.etag_read_seconds {
            let _ = write!(s, "; sm-data ETags read over Nudr in {t:.1} s");
        }
        let _ = writeln!(s);
    }
    if r.preload.gx_sessions > 0 {
        let _ = writeln!(
            s,
            "- preload: {} Gx sessions opened (CCR-I) in {:.1} s",
            r.preload.gx_sessions, r.preload.gx_sessions_seconds
        );
    }
    if r.preload.rx_sessions > 0 {
        let _ = writeln!(
            s,
            "- preload: {} Rx sessions opened (AAR-I) in {:.1} s",
            r.preload.rx_sessions, r.preload.rx_sessions_seconds
        );
    }
    let _ = writeln!(
        s,
        "\n**Result: {}**\n",
        if r.criteria_passed { "success criteria met" } else { "success criteria MISSED" }
    );
    for f in &r.failures {
        let _ = writeln!(s, "- FAIL: {f}");
    }
    for w in &r.warnings {
        let _ = writeln!(s, "- warning: {w}");
    }
    if let Some(h) = &r.host {
        let _ = write!(
            s,
            "\nHost steal: {:.1} % of a CPU on average, {:.0} % in the worst second; {} of {} measured seconds quiet (at most {} %)",
            h.steal_pct_mean, h.steal_pct_max, h.quiet_seconds, h.measured_seconds, crate::host::QUIET_STEAL_PCT
        );
        if let Some(q) = &h.quiet_latency {
            let _ = write!(
                s,
                ", all procedures in them p50 {:.2} ms, p99 {:.2} ms",
                q.p50_ms, q.p99_ms
            );
        }
        let _ = writeln!(s, ".");
    }
    if let Some(dd) = &r.dd {
        dd.markdown(&mut s);
    }
    // A Data Director scenario's procedures are the call mix that drives its real NFs.
    if r.dd.is_none() || !r.procedures.is_empty() {
        let _ = writeln!(s, "\n## Procedures\n\n| procedure | row | share % | offered/s | sent | ok | skipped | success % | p50 ms | p90 ms | p95 ms | p99 ms | max ms | status | verdict |\n|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|---|");
    }
    for p in &r.procedures {
        let l = &p.latency;
        let _ = if p.sent == 0 {
            writeln!(
                s,
                "| {} | {} | {:.4} | {:.3} | 0 | 0 | {} | – | – | – | – | – | – | {} | {} |",
                p.name, p.row, p.share_pct, p.offered_tps, p.skipped, p.status, p.verdict
            )
        } else {
            writeln!(
                s,
                "| {} | {} | {:.4} | {:.3} | {} | {} | {} | {:.3} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {} | {} |",
                p.name, p.row, p.share_pct, p.offered_tps, p.sent, p.ok, p.skipped, p.success_rate * 100.0, l.p50_ms, l.p90_ms, l.p95_ms, l.p99_ms, l.max_ms, p.status, p.verdict
            )
        };
    }
    if !r.profile_counts.is_empty() {
        let _ = writeln!(s, "\n## Profiles per discovery answer\n\nThe `nfInstances` of the 200 answers, per query variant: the first {} answers of each, then one in {} (crate::profile_count), beside what the reference's answers held (NRF guide Table 4-9).\n\n| procedure | variant | answers counted | min | median | max | reference | |\n|---|---|--:|--:|--:|--:|--:|---|", crate::profile_count::ALWAYS, crate::profile_count::EVERY);
    }
    for c in &r.profile_counts {
        let n = |v: Option<usize>| v.map_or("–".to_owned(), |v| v.to_string());
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            c.procedure,
            c.variant,
            c.answers,
            n(c.min),
            n(c.median),
            n(c.max),
            n(c.expected),
            match (c.answers, c.as_expected) {
                (0, _) => "none counted",
                (_, true) if c.expected.is_some() => "as the reference",
                (_, true) => "",
                (_, false) => "DIFFERS",
            }
        );
    }
    if !r.nf_latency.is_empty() {
        let _ = writeln!(s, "\n## NF own latency\n\nWhat each NF measured from a request reaching it to its answer, read from its `/metrics` histograms over the measured window. Each quantile falls in a bucket (its bounds in brackets); the estimate inside it never exceeds the client's same quantile over the kit's procedures of that operation (a request's time in the NF is part of what the client saw), marked * where that bound moved it below plain interpolation; the share at or under 5 ms is exact. The procedure latencies above also hold the generator's own queueing. The last three columns leave out the time the NF waited on other NFs (an NRF's SLF query or forwarded discovery; the simulators add the reference's delays there); \"-\" where the NF does not publish it.\n\n| NF | operation | answers | p50 ms | p99 ms | client p50 / p99 ms | ≤ 5 ms % | less waits: p50 ms | p99 ms | ≤ 5 ms % |\n|---|---|--:|--:|--:|--:|--:|--:|--:|--:|");
    }
    for l in &r.nf_latency {
        let bucket = |b: (f64, Option<f64>)| match b.1 {
            Some(u) => format!("({}, {}]", fmt_num(b.0), fmt_num(u)),
            None => format!("({}, +Inf)", fmt_num(b.0)),
        };
        let mark = if l.bounded_by_client { "*" } else { "" };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.3}{mark} {} | {:.2}{mark} {} | {} | {:.2} | {} |",
            l.nf,
            l.operation,
            l.count,
            l.p50_ms,
            bucket(l.p50_bucket_ms),
            l.p99_ms,
            bucket(l.p99_bucket_ms),
            match (l.client_p50_ms, l.client_p99_ms) {
                (Some(a), Some(b)) => format!("{a:.3} / {b:.2}"),
                _ => "– (no procedure maps to it)".to_owned(),
            },
            l.under_5ms_pct,
            l.excl_waits.map_or_else(
                || "- | - | -".to_owned(),
                |q| format!("{:.3} | {:.2} | {:.2}", q.p50_ms, q.p99_ms, q.under_5ms_pct)
            )
        );
    }
    if !r.egress.is_empty() {
        let _ = writeln!(s, "\n## Traffic the NF sends (counted at the simulators)\n\n| what | row | simulator | added latency ms | expected/s | received | received/s | status |\n|---|---|---|--:|--:|--:|--:|---|");
    }
    for e in &r.egress {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.3} | {} | {:.3} | {} |",
            e.name,
            e.row,
            e.simulator,
            e.sim_latency_ms,
            e.expected_tps,
            e.observed,
            e.observed_tps,
            e.status
        );
    }
    if let Some(rx) = &r.rx {
        let _ = writeln!(s, "\n## Diameter peers (simulated, connected to the NF)\n\n| simulator | kind | Origin-Host | added latency ms | AAR received | STR received | RAR received | other received |\n|---|---|---|--:|--:|--:|--:|--:|");
        for p in &rx.peers {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                p.name,
                p.kind,
                p.origin_host,
                p.latency_ms,
                p.received_aar,
                p.received_str,
                p.received_rar,
                p.received_other
            );
        }
        let _ = writeln!(
            s,
            "\nRx sessions open: {} at the end, {} at most.",
            rx.sessions_open_at_end, rx.sessions_peak
        );
    }
    if let Some(gx) = &r.gx {
        let _ = writeln!(s, "\n## Diameter Gx PCEFs (simulated, connected to the PCRF)\n\n| simulator | Origin-Host | added latency ms | RAR received (answered 2001) | ASR received | other received |\n|---|---|--:|--:|--:|--:|");
        for p in &gx.peers {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} |",
                p.name,
                p.origin_host,
                p.latency_ms,
                p.received_rar,
                p.received_asr,
                p.received_other
            );
        }
        let _ = writeln!(
            s,
            "\nGx sessions open: {} at the end, {} at most; rules reported ACTIVE in CCR-Us: {}.",
            gx.sessions_open_at_end, gx.sessions_peak, gx.rules_reported
        );
    }
    if let Some(sh) = &r.sh {
        let _ = writeln!(s, "\n## Diameter Sh application servers (simulated, connected to the UDR)\n\n| simulator | Origin-Host | added latency ms | PNR received (answered 2001) | other received |\n|---|---|--:|--:|--:|");
        for p in &sh.peers {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} |",
                p.name, p.origin_host, p.latency_ms, p.received_pnr, p.received_other
            );
        }
        let _ = writeln!(
            s,
            "\nSh users: {}; no longer updated (a PUR without answer or out of sync): {}.",
            sh.users, sh.pur_users_lost
        );
    }
    let t = &r.totals;
    let _ = writeln!(s, "\n## Efficiency\n\n| figure | value |\n|---|--:|");
    if r.dd.is_none() {
        let _ = writeln!(s, "| transactions (ok, measured window) | {} |", t.transactions);
        let _ = writeln!(s, "| achieved TPS | {:.2} |", t.achieved_tps);
        let _ = writeln!(s, "| NF CPU seconds | {} |", opt(t.nf_cpu_s, 3));
        let _ = writeln!(s, "| NF cores used (CPU s / wall s) | {} |", opt(t.nf_cores_used, 3));
        let _ = writeln!(s, "| NF CPU µs per transaction | {} |", opt(t.nf_cpu_us_per_tx, 1));
        let _ = writeln!(s, "| TPS per NF core used | {} |", opt(t.tps_per_core, 0));
    }
    let _ = writeln!(s, "| NF RSS max MB | {} |", opt(t.nf_rss_max_mb, 1));
    let g = &r.generator;
    let _ = writeln!(
        s,
        "| generator CPU % of one core (incl. simulators) | {:.1} (of {} cores) |",
        g.cpu_pct, g.cores
    );
    let _ = writeln!(
        s,
        "| generator max lag ms / late sends / slot waits / never sent | {:.2} / {} / {} / {} |",
        g.max_lag_ms, g.late_sends, g.slot_waits, g.unsent
    );
    let _ = writeln!(
        s,
        "| peak outstanding / limit | {} / {} |",
        g.peak_outstanding, g.max_outstanding
    );
    let cmp = comparison(r);
    if let Some(rf) = &r.reference {
        let _ = writeln!(s, "\n## Side by side with the reference ({})\n\n| figure | fivecore (this run) | reference |\n|---|--:|--:|", rf.scenario);
        for (a, b, c) in &cmp {
            let _ = writeln!(s, "| {a} | {b} | {c} |");
        }
        for n in &rf.notes {
            let _ = writeln!(s, "\n- {n}");
        }
    }
    if r.overload.notable() {
        r.overload.markdown(&r.timeline, &mut s);
    }
    crate::soak::markdown(&r.timeline, &mut s);
    s
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A chart series: name, colour, points (x, y).
pub type Series<'a> = (&'a str, &'a str, Vec<(f64, f64)>);

/// A line chart as inline SVG: `series` = (name, colour, points (x, y)).
pub fn svg_line_chart(title: &str, y_label: &str, series: &[Series]) -> String {
    svg_chart(title, y_label, series, None)
}

/// The run's time axis: warm-up seconds, then measured seconds.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub warmup_s: f64,
    pub end_s: f64,
}

/// A line chart as inline SVG, with the warm-up shaded and the measured window's ends marked
/// when `window` is given.
pub fn svg_chart(title: &str, y_label: &str, series: &[Series], window: Option<Window>) -> String {
    let (w, h, ml, mr, mt, mb) = (720.0, 260.0, 60.0, 150.0, 28.0, 36.0);
    let pts = series.iter().flat_map(|s| s.2.iter());
    let (mut xmax, mut ymax) = (1.0f64, 0.0f64);
    for &(x, y) in pts {
        xmax = xmax.max(x);
        ymax = ymax.max(y);
    }
    if let Some(win) = window {
        xmax = xmax.max(win.end_s);
    }
    let ymax = nice_ceil(ymax);
    let sx = |x: f64| ml + x / xmax * (w - ml - mr);
    let sy = |y: f64| mt + (1.0 - y / ymax) * (h - mt - mb);
    let mut s = String::new();
    let _ = write!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="{t}"><rect width="{w}" height="{h}" fill="#fff"/><text x="{ml}" y="18" font-size="14" font-weight="bold">{t}</text>"##,
        t = esc(title)
    );
    if let Some(win) = window {
        let (x0, x1, x2) = (sx(0.0), sx(win.warmup_s), sx(win.end_s));
        let (top, bottom) = (mt, h - mb);
        if win.warmup_s > 0.0 {
            let _ = write!(
                s,
                r##"<rect x="{x0:.1}" y="{top}" width="{:.1}" height="{:.1}" fill="#f2f2f2"/><text x="{:.1}" y="{:.1}" font-size="10" fill="#777">warm-up</text>"##,
                x1 - x0,
                bottom - top,
                x0 + 3.0,
                top + 10.0
            );
        }
        for x in [x1, x2] {
            let _ = write!(
                s,
                r##"<line x1="{x:.1}" x2="{x:.1}" y1="{top}" y2="{bottom}" stroke="#999" stroke-dasharray="4 3"/>"##
            );
        }
        let _ = write!(
            s,
            r##"<text x="{:.1}" y="{:.1}" font-size="10" fill="#777" text-anchor="middle">measured</text>"##,
            (x1 + x2) / 2.0,
            top + 10.0
        );
    }
    for k in 0..=4 {
        let y = ymax * k as f64 / 4.0;
        let py = sy(y);
        let _ = write!(
            s,
            r##"<line x1="{ml}" x2="{x2}" y1="{py:.1}" y2="{py:.1}" stroke="#ddd"/><text x="{tx}" y="{ty:.1}" font-size="11" text-anchor="end">{y}</text>"##,
            x2 = w - mr,
            tx = ml - 4.0,
            ty = py + 4.0,
            y = fmt_num(y)
        );
    }
    let step = nice_ceil(xmax / 5.0).max(1.0);
    for k in 0..=((xmax / step).floor() as usize) {
        let x = step * k as f64;
        let _ = write!(
            s,
            r#"<text x="{px:.1}" y="{py}" font-size="11" text-anchor="middle">{x:.0}s</text>"#,
            px = sx(x),
            py = h - mb + 16.0
        );
    }
    let _ = write!(
        s,
        r#"<text x="14" y="{y}" font-size="11" transform="rotate(-90 14 {y})" text-anchor="middle">{l}</text>"#,
        y = h / 2.0,
        l = esc(y_label)
    );
    let _ = write!(
        s,
        r##"<line x1="{ml}" x2="{ml}" y1="{mt}" y2="{yb}" stroke="#333"/><line x1="{ml}" x2="{xr}" y1="{yb}" y2="{yb}" stroke="#333"/>"##,
        yb = h - mb,
        xr = w - mr
    );
    for (i, (name, colour, points)) in series.iter().enumerate() {
        if !points.is_empty() {
            let d: Vec<String> =
                points.iter().map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y))).collect();
            let _ = write!(
                s,
                r#"<polyline fill="none" stroke="{colour}" stroke-width="1.8" points="{}"/>"#,
                d.join(" ")
            );
        }
        let ly = mt + 14.0 + 18.0 * i as f64;
        let _ = write!(
            s,
            r#"<rect x="{x}" y="{y}" width="12" height="3" fill="{colour}"/><text x="{tx}" y="{ty}" font-size="12">{n}</text>"#,
            x = w - mr + 10.0,
            y = ly - 4.0,
            tx = w - mr + 28.0,
            ty = ly,
            n = esc(name)
        );
    }
    s.push_str("</svg>");
    s
}

fn fmt_num(v: f64) -> String {
    if v >= 100.0 || v == 0.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// Rounds up to 1, 2 or 5 times a power of ten (at least a tiny positive number).
pub fn nice_ceil(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if v <= m * p * (1.0 + 1e-9) {
            return m * p;
        }
    }
    10.0 * p
}

fn md_table_to_html(md: &str) -> String {
    // The report's Markdown tables, re-rendered: headers, separator, rows.
    let mut out = String::new();
    let mut in_table = false;
    for line in md.lines() {
        if line.starts_with('|') {
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            if cells.iter().all(|c| c.chars().all(|ch| ch == '-' || ch == ':')) {
                continue;
            }
            if !in_table {
                out.push_str("<table><tr>");
                for c in &cells {
                    let _ = write!(out, "<th>{}</th>", esc(c));
                }
                out.push_str("</tr>");
                in_table = true;
            } else {
                out.push_str("<tr>");
                for c in &cells {
                    let cls = if c.starts_with("FAIL") {
                        " class=\"fail\""
                    } else if c.starts_with("not served") {
                        " class=\"ns\""
                    } else {
                        ""
                    };
                    let _ = write!(out, "<td{cls}>{}</td>", esc(c.trim_matches('`')));
                }
                out.push_str("</tr>");
            }
            continue;
        }
        if in_table {
            out.push_str("</table>\n");
            in_table = false;
        }
        if let Some(h) = line.strip_prefix("## ") {
            let _ = writeln!(out, "<h2>{}</h2>", esc(h));
        } else if let Some(h) = line.strip_prefix("# ") {
            let _ = writeln!(out, "<h1>{}</h1>", esc(h));
        } else if let Some(li) = line.strip_prefix("- ") {
            let _ = writeln!(out, "<p class=\"li\">• {}</p>", esc(&li.replace('`', "")));
        } else if !line.trim().is_empty() {
            let _ = writeln!(out, "<p>{}</p>", esc(&line.replace("**", "")));
        }
    }
    if in_table {
        out.push_str("</table>\n");
    }
    out
}

/// Colours of the chart lines per procedure group, then of the NFs' own latency.
const PALETTE: [&str; 8] =
    ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

pub fn html(r: &Report) -> String {
    let tl = &r.timeline;
    let series = |f: &dyn Fn(&SecondReport) -> Option<f64>| -> Vec<(f64, f64)> {
        tl.iter().filter_map(|s| f(s).map(|v| (s.t as f64, v))).collect()
    };
    let win = Some(Window { warmup_s: r.warmup_s, end_s: r.warmup_s + r.duration_s });
    let svg_line_chart = |title: &str, y: &str, series: &[Series]| svg_chart(title, y, series, win);
    // One line per procedure group (client side, end to end), one per NF for its own time.
    let mut groups: Vec<String> = Vec::new();
    let mut nfs: Vec<String> = Vec::new();
    for sec in tl {
        for g in sec.group_p99_ms.keys() {
            if !groups.contains(g) {
                groups.push(g.clone());
            }
        }
        for n in sec.nf_own_p99_ms.keys() {
            if !nfs.contains(n) {
                nfs.push(n.clone());
            }
        }
    }
    let names: Vec<String> = groups
        .iter()
        .map(|g| format!("{g} p99"))
        .chain(nfs.iter().map(|n| format!("{n} own p99")))
        .collect();
    let mut lines: Vec<Series> = Vec::new();
    for (i, g) in groups.iter().enumerate() {
        lines.push((
            &names[i],
            PALETTE[i % PALETTE.len()],
            series(&|s| s.group_p99_ms.get(g).copied()),
        ));
    }
    for (j, n) in nfs.iter().enumerate() {
        let i = groups.len() + j;
        lines.push((
            &names[i],
            PALETTE[i % PALETTE.len()],
            series(&|s| s.nf_own_p99_ms.get(n).copied()),
        ));
    }
    let dd = r.dd.is_some();
    let per_group = svg_line_chart(
        match dd {
            true => "End-to-end latency p99 per feed (NF timestamp to arrival at the consumer)",
            false => {
                "Latency p99 per procedure group (client) and the NFs' own p99 (their /metrics)"
            }
        },
        "ms",
        &lines,
    );
    let throughput = svg_line_chart(
        match dd {
            true => "Copies: offered, accepted by the ingest API, refused or failed",
            false => "Throughput",
        },
        match dd {
            true => "copies/s",
            false => "requests/s",
        },
        &[
            ("offered", "#888", series(&|s| Some(s.offered as f64))),
            ("achieved", "#1f77b4", series(&|s| Some(s.achieved as f64))),
            ("errors", "#d62728", series(&|s| Some(s.errors as f64))),
        ],
    );
    let latency = svg_line_chart(
        match r.concurrency {
            _ if dd => "End-to-end latency percentiles, all feeds together (coarse: 4.4 % buckets)",
            Some(_) => {
                "Latency percentiles, all procedures together (closed loop: from each actual send)"
            }
            None => "Latency percentiles, all procedures together (from intended send time)",
        },
        "ms",
        &[
            ("p50", "#2ca02c", series(&|s| (s.achieved > 0).then_some(s.p50_ms))),
            ("p90", "#ff7f0e", series(&|s| (s.achieved > 0).then_some(s.p90_ms))),
            ("p99", "#d62728", series(&|s| (s.achieved > 0).then_some(s.p99_ms))),
        ],
    );
    let cpu = svg_line_chart(
        "CPU",
        "% of one core",
        &[
            ("NF CPU", "#9467bd", series(&|s| s.nf_cpu_pct)),
            ("generator CPU", "#8c564b", series(&|s| s.gen_cpu_pct)),
        ],
    );
    let rss = svg_line_chart(
        "NF memory",
        "RSS MB",
        &[
            ("NF RSS", "#17becf", series(&|s| s.nf_rss_mb)),
            ("anonymous", "#d62728", series(&|s| s.nf_rss_anon_mb)),
            ("file-backed", "#7f7f7f", series(&|s| s.nf_rss_file_mb)),
        ],
    );
    let body = md_table_to_html(&markdown(r));
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>fivecore bench {name}</title><style>\
body{{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}}table{{border-collapse:collapse;margin:1em 0;font-size:13px}}\
td,th{{border:1px solid #ccc;padding:3px 6px;text-align:right}}td:first-child,th:first-child{{text-align:left}}\
.fail{{background:#fdd}}.ns{{background:#eee;color:#555}}p.li{{margin:.2em 0}}svg{{margin:.5em 0;border:1px solid #eee}}</style></head><body>\n\
{body}\n<h2>Charts</h2>\n<p>Shaded: the warm-up; between the dashed lines: the measured window.</p>\n{throughput}\n{per_group}\n{latency}\n{cpu}\n{rss}\n</body></html>\n",
        name = esc(&r.scenario)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report of `tps` OK answers/s and `notified` notifications/s on `cores` NF cores, at
    /// `scale`, against the reference `rf`.
    fn report(tps: f64, notified: f64, cores: f64, scale: f64, rf: Reference) -> Report {
        Report {
            scenario: "s".into(),
            description: String::new(),
            command: String::new(),
            started_at: String::new(),
            fivecore_version: String::new(),
            rate: 1000.0 * scale,
            scale,
            duration_s: 10.0,
            warmup_s: 2.0,
            load_mode: "open loop".into(),
            security: Default::default(),
            concurrency: None,
            connections: 4,
            targets: Vec::new(),
            preload: PreloadReport::default(),
            procedures: Vec::new(),
            egress: Vec::new(),
            totals: Totals {
                achieved_tps: tps,
                achieved_tps_with_notify: tps + notified,
                nf_cores_used: Some(cores),
                ..Totals::default()
            },
            generator: GeneratorReport::default(),
            reference: Some(rf),
            rx: None,
            sh: None,
            gx: None,
            nf_latency: Vec::new(),
            profile_counts: Vec::new(),
            host: None,
            timeline: Vec::new(),
            overload: Default::default(),
            criteria_passed: true,
            failures: Vec::new(),
            warnings: Vec::new(),
            dd: None,
        }
    }

    fn reference(counts_notifications: bool) -> Reference {
        Reference {
            scenario: "N1".into(),
            tps_achieved: 54091.0,
            cpu_requested: 700.0,
            tps_per_core: 77.0,
            tps_per_used_core: None,
            used_cores: Some(389.9),
            used_cores_include: Some("all NRF pods".into()),
            requested_include: None,
            counts_notifications,
            notifications_tps: Some(750.0),
            latency_procedure: None,
            latency_p50_ms: None,
            latency_p90_ms: None,
            latency_p95_ms: None,
            latency_p99_ms: None,
            mean_latency_ms: Default::default(),
            duration: "48 h".into(),
            notes: Vec::new(),
        }
    }

    #[test]
    fn side_by_side_leads_with_cpu_per_used_core_on_both_sides() {
        // The NRF guide counts notifications: ours too, 900 + 100 per 0.5 core = 2000.
        let r = report(900.0, 100.0, 0.5, 0.01, reference(true));
        let rows = comparison(&r);
        let (what, ours, theirs) = &rows[0];
        assert!(what.starts_with("TPS per used core"), "{what}");
        assert!(what.contains("embedded store") && what.contains("all NRF pods"), "{what}");
        // 54091 / 389.9 = 138.7 per used core.
        assert_eq!((ours.as_str(), theirs.as_str()), ("2000", "139"));
        assert_eq!((rows[1].1.as_str(), rows[1].2.as_str()), ("0.500", "389.9"));
        assert!(rows[2].0.starts_with("TPS per requested core"));
        assert_eq!(rows[2].2, "77");
        let tps = rows.iter().find(|r| r.0.starts_with("TPS achieved")).unwrap();
        assert_eq!(tps.1, "1000.0");
        assert!(tps.0.contains("plus the notifications") && tps.0.contains("0.0100"), "{}", tps.0);
        let notify = rows.iter().find(|r| r.0.starts_with("notifications")).unwrap();
        assert_eq!((notify.1.as_str(), notify.2.as_str()), ("100.0", "750"));

        // A guide that leaves notifications out (UDR T4a, T4c): so do we. Full scale: no scale
        // is named. The used cores derive from TPS per used core when not given.
        let mut rf = reference(false);
        (rf.used_cores, rf.tps_per_used_core, rf.used_cores_include) = (None, Some(102.0), None);
        rf.tps_achieved = 10_000.0;
        let rows = comparison(&report(900.0, 100.0, 0.5, 1.0, rf));
        assert_eq!((rows[0].1.as_str(), rows[0].2.as_str()), ("1800", "102"));
        assert!(rows[0].0.contains("not its database tier, not sidecars"), "{}", rows[0].0);
        assert_eq!(rows[1].2, "98.0");
        let tps = rows.iter().find(|r| r.0.starts_with("TPS achieved")).unwrap();
        assert_eq!(tps.1, "900.0");
        assert!(tps.0.contains("not counted") && !tps.0.contains("this run at"), "{}", tps.0);
    }

    #[test]
    fn charts_mark_the_warm_up_and_the_measured_window() {
        let w = Window { warmup_s: 2.0, end_s: 12.0 };
        let svg = svg_chart("t", "ms", &[("a", "#000", vec![(1.0, 1.0), (12.0, 2.0)])], Some(w));
        assert!(svg.contains("warm-up") && svg.contains("measured"), "{svg}");
        assert_eq!(svg.matches("stroke-dasharray").count(), 2);
        let mut r = report(10.0, 0.0, 0.1, 1.0, reference(false));
        r.timeline = (1..=12)
            .map(|t| SecondReport {
                t,
                warmup: t <= 2,
                group_p99_ms: [("NFDiscover".to_owned(), 3.0), ("NFRegister".to_owned(), 9.0)]
                    .into_iter()
                    .collect(),
                nf_own_p99_ms: [("nrf".to_owned(), 1.0)].into_iter().collect(),
                ..SecondReport::default()
            })
            .collect();
        let html = html(&r);
        for line in ["NFDiscover p99", "NFRegister p99", "nrf own p99"] {
            assert!(html.contains(line), "{line}");
        }
    }

    #[test]
    fn nice_ceilings() {
        assert_eq!(nice_ceil(0.0), 1.0);
        assert_eq!(nice_ceil(7.0), 10.0);
        assert_eq!(nice_ceil(10.0), 10.0);
        assert_eq!(nice_ceil(101.0), 200.0);
        assert_eq!(nice_ceil(0.3), 0.5);
    }

    #[test]
    fn svg_chart_is_well_formed_and_scaled() {
        let svg = svg_line_chart("T <x>", "ms", &[("a", "#000", vec![(0.0, 0.0), (10.0, 50.0)])]);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(svg.contains("T &lt;x&gt;"));
        // x = 10 maps to the right edge of the plot (720 - 150), y = 50 = ymax maps to the top (28).
        assert!(svg.contains("570.0,28.0"), "{svg}");
        assert!(!svg.contains("<script"));
    }
}
