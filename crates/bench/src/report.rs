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
    /// What the NFs measured themselves, per operation, from their `/metrics` histograms over
    /// the measured window (crate::nf_latency); empty when the targets do not publish them.
    pub nf_latency: Vec<crate::nf_latency::NfLatencyRow>,
    /// Steal time over the measured window and the latency of its quiet seconds (crate::host).
    pub host: Option<crate::host::HostReport>,
    pub timeline: Vec<SecondReport>,
    /// Answers by kind, served latency, silent seconds, recovery after a cool-down.
    pub overload: crate::overload::OverloadReport,
    pub criteria_passed: bool,
    pub failures: Vec<String>,
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TargetReport {
    pub nf: String,
    pub url: String,
    pub started_by_kit: bool,
    pub pid: Option<u32>,
    pub cpus: Option<String>,
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

/// The side-by-side rows: (what, ours, reference).
pub fn comparison(r: &Report) -> Vec<(String, String, String)> {
    let Some(rf) = &r.reference else { return Vec::new() };
    let t = &r.totals;
    let mut rows = vec![
        (
            "TPS achieved (answered OK, plus notifications received)".into(),
            format!("{:.1}", t.achieved_tps_with_notify),
            format!("{:.0}", rf.tps_achieved),
        ),
        (
            "CPU cores (ours: used; reference: requested)".into(),
            opt(t.nf_cores_used, 3),
            format!("{:.0}", rf.cpu_requested),
        ),
        (
            "TPS per core (ours: per NF core used)".into(),
            opt(t.tps_per_core, 0),
            match rf.tps_per_used_core {
                Some(u) => format!("{:.0} (per requested), ~{u:.0} (per used)", rf.tps_per_core),
                None => format!("{:.0} (per requested)", rf.tps_per_core),
            },
        ),
    ];
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

pub fn markdown(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# fivecore bench: {}\n\n{}\n", r.scenario, r.description);
    let _ = writeln!(
        s,
        "- command: `{}`\n- started: {} · fivecore {}",
        r.command, r.started_at, r.fivecore_version
    );
    match r.concurrency {
        Some(n) => {
            let _ = writeln!(s, "- closed loop: {n} requests outstanding, {:.2}/s sent (scale {:.4} of the reference; an outcome, not a setting), latency from each actual send, {:.0} s measured after {:.0} s warm-up", r.rate, r.scale, r.duration_s, r.warmup_s);
        }
        None => {
            let _ = writeln!(s, "- open loop: offered rate {:.2}/s (scale {:.4} of the reference), latency from each request's due time, {:.0} s measured after {:.0} s warm-up", r.rate, r.scale, r.duration_s, r.warmup_s);
        }
    }
    for t in &r.targets {
        let how = if t.started_by_kit {
            format!(
                "started by the kit, pid {}, cpus {}",
                t.pid.unwrap_or(0),
                t.cpus.as_deref().unwrap_or("any")
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
    let _ = writeln!(s, "\n## Procedures\n\n| procedure | row | share % | offered/s | sent | ok | skipped | success % | p50 ms | p90 ms | p95 ms | p99 ms | max ms | status | verdict |\n|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|---|");
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
    if !r.nf_latency.is_empty() {
        let _ = writeln!(s, "\n## NF own latency\n\nWhat each NF measured from a request reaching it to its answer, read from its `/metrics` histograms over the measured window (quantiles interpolated inside a bucket; the share at or under 5 ms is exact). The procedure latencies above also hold the generator's own queueing. The last three columns leave out the time the NF waited on other NFs (an NRF's SLF query or forwarded discovery; the simulators add the reference's delays there); \"-\" where the NF does not publish it.\n\n| NF | operation | answers | p50 ms | p99 ms | ≤ 5 ms % | less waits: p50 ms | p99 ms | ≤ 5 ms % |\n|---|---|--:|--:|--:|--:|--:|--:|--:|");
    }
    for l in &r.nf_latency {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.3} | {:.2} | {:.2} | {} |",
            l.nf,
            l.operation,
            l.count,
            l.p50_ms,
            l.p99_ms,
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
    let _ = writeln!(s, "| transactions (ok, measured window) | {} |", t.transactions);
    let _ = writeln!(s, "| achieved TPS | {:.2} |", t.achieved_tps);
    let _ = writeln!(s, "| NF CPU seconds | {} |", opt(t.nf_cpu_s, 3));
    let _ = writeln!(s, "| NF cores used (CPU s / wall s) | {} |", opt(t.nf_cores_used, 3));
    let _ = writeln!(s, "| NF CPU µs per transaction | {} |", opt(t.nf_cpu_us_per_tx, 1));
    let _ = writeln!(s, "| TPS per NF core used | {} |", opt(t.tps_per_core, 0));
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
    s
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A chart series: name, colour, points (x, y).
pub type Series<'a> = (&'a str, &'a str, Vec<(f64, f64)>);

/// A line chart as inline SVG: `series` = (name, colour, points (x, y)).
pub fn svg_line_chart(title: &str, y_label: &str, series: &[Series]) -> String {
    let (w, h, ml, mr, mt, mb) = (720.0, 260.0, 60.0, 150.0, 28.0, 36.0);
    let pts = series.iter().flat_map(|s| s.2.iter());
    let (mut xmax, mut ymax) = (1.0f64, 0.0f64);
    for &(x, y) in pts {
        xmax = xmax.max(x);
        ymax = ymax.max(y);
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

pub fn html(r: &Report) -> String {
    let tl = &r.timeline;
    let series = |f: &dyn Fn(&SecondReport) -> Option<f64>| -> Vec<(f64, f64)> {
        tl.iter().filter_map(|s| f(s).map(|v| (s.t as f64, v))).collect()
    };
    let throughput = svg_line_chart(
        "Throughput",
        "requests/s",
        &[
            ("offered", "#888", series(&|s| Some(s.offered as f64))),
            ("achieved", "#1f77b4", series(&|s| Some(s.achieved as f64))),
            ("errors", "#d62728", series(&|s| Some(s.errors as f64))),
        ],
    );
    let latency = svg_line_chart(
        match r.concurrency {
            Some(_) => "Latency percentiles (closed loop: from each actual send)",
            None => "Latency percentiles (from intended send time)",
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
    let rss =
        svg_line_chart("NF memory", "RSS MB", &[("NF RSS", "#17becf", series(&|s| s.nf_rss_mb))]);
    let body = md_table_to_html(&markdown(r));
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>fivecore bench {name}</title><style>\
body{{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}}table{{border-collapse:collapse;margin:1em 0;font-size:13px}}\
td,th{{border:1px solid #ccc;padding:3px 6px;text-align:right}}td:first-child,th:first-child{{text-align:left}}\
.fail{{background:#fdd}}.ns{{background:#eee;color:#555}}p.li{{margin:.2em 0}}svg{{margin:.5em 0;border:1px solid #eee}}</style></head><body>\n\
{body}\n<h2>Charts</h2>\n{throughput}\n{latency}\n{cpu}\n{rss}\n</body></html>\n",
        name = esc(&r.scenario)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
