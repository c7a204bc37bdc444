//! Resources over time (issue #27's soak): the measured window cut into minutes, each with its
//! rate, success, p99 and the NF processes' memory, descriptors, threads and runtime tasks, and
//! whether any of the last four grew from the first minutes to the last. A leak shows as growth
//! at a steady rate; a run shorter than a few minutes has too few points to say.

use std::fmt::Write;

use serde::Serialize;

use crate::stats::SecondReport;

/// Runs measured for less than this get no table: a minute of points says nothing about drift.
pub const MIN_MINUTES: usize = 3;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Minute {
    /// Minutes since the measured window began (1 = the first).
    pub minute: usize,
    pub seconds: usize,
    pub achieved_per_s: f64,
    /// Answers counted as success over answers and failures in the minute, percent.
    pub success_pct: f64,
    /// The worst second's p99 in the minute.
    pub max_p99_ms: f64,
    /// At the minute's last second.
    pub rss_mb: Option<f64>,
    /// The RSS split: anonymous (heap, stacks) and file-backed (mapped files), MiB.
    pub rss_anon_mb: Option<f64>,
    pub rss_file_mb: Option<f64>,
    pub open_fds: Option<u64>,
    pub threads: Option<u64>,
    pub tasks: Option<u64>,
}

/// The measured seconds of `timeline` (warm-up and cool-down left out), per minute.
pub fn minutes(timeline: &[SecondReport]) -> Vec<Minute> {
    let measured: Vec<&SecondReport> =
        timeline.iter().filter(|s| !s.warmup && !s.cooldown).collect();
    measured
        .chunks(60)
        .enumerate()
        .map(|(i, secs)| {
            let last = secs[secs.len() - 1];
            let achieved: u64 = secs.iter().map(|s| s.achieved).sum();
            let errors: u64 = secs.iter().map(|s| s.errors).sum();
            let success_pct = match achieved + errors {
                0 => 0.0,
                n => achieved as f64 * 100.0 / n as f64,
            };
            Minute {
                minute: i + 1,
                seconds: secs.len(),
                achieved_per_s: achieved as f64 / secs.len() as f64,
                success_pct,
                max_p99_ms: secs.iter().map(|s| s.p99_ms).fold(0.0, f64::max),
                rss_mb: last.nf_rss_mb,
                rss_anon_mb: last.nf_rss_anon_mb,
                rss_file_mb: last.nf_rss_file_mb,
                open_fds: last.nf_open_fds,
                threads: last.nf_threads,
                // The NFs of one `fivecore up` report one runtime's count each: the largest.
                tasks: last.nf_tasks.values().copied().max(),
            }
        })
        .collect()
}

/// Growth of a figure from the first minutes to the last (means of the first and last thirds,
/// so one noisy minute does not decide), relative to the first; None without enough points.
pub fn growth(values: &[f64]) -> Option<f64> {
    if values.len() < MIN_MINUTES {
        return None;
    }
    let third = values.len() / 3;
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let first = mean(&values[..third]);
    let last = mean(&values[values.len() - third..]);
    (first > 0.0).then(|| (last - first) / first)
}

/// The Markdown section, or nothing for a run of fewer than [`MIN_MINUTES`] measured minutes.
pub fn markdown(timeline: &[SecondReport], s: &mut String) {
    let rows = minutes(timeline);
    let full = rows.iter().filter(|m| m.seconds == 60).count();
    if full < MIN_MINUTES {
        return;
    }
    let _ = writeln!(s, "\n## Resources over time (per measured minute)\n\nThe NF processes' memory, open descriptors, OS threads and runtime tasks at the end of each minute: a figure that grows while the rate is steady is a leak. RSS is split into anonymous memory (heap and stacks: where a leak shows) and file-backed pages (mapped files such as SQLite's memory map, which fill up to the map's size as the database is read and then stay). Growth compares the means of the first and last thirds of the minutes.\n\n| minute | achieved/s | success % | worst p99 ms | RSS MB | anon MB | file MB | open fds | threads | tasks |\n|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    let o = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
    let mb = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    for m in &rows {
        let _ = writeln!(
            s,
            "| {} | {:.0} | {:.3} | {:.1} | {} | {} | {} | {} | {} | {} |",
            m.minute,
            m.achieved_per_s,
            m.success_pct,
            m.max_p99_ms,
            mb(m.rss_mb),
            mb(m.rss_anon_mb),
            mb(m.rss_file_mb),
            o(m.open_fds),
            o(m.threads),
            o(m.tasks)
        );
    }
    let series = |f: &dyn Fn(&Minute) -> Option<f64>| -> Option<Vec<f64>> {
        rows.iter().filter(|m| m.seconds == 60).map(f).collect()
    };
    let _ = writeln!(s, "\n| figure | growth first → last third |\n|---|--:|");
    for (name, v) in [
        ("RSS", series(&|m| m.rss_mb)),
        ("RSS anonymous", series(&|m| m.rss_anon_mb)),
        ("RSS file-backed", series(&|m| m.rss_file_mb)),
        ("open fds", series(&|m| m.open_fds.map(|v| v as f64))),
        ("threads", series(&|m| m.threads.map(|v| v as f64))),
        ("runtime tasks", series(&|m| m.tasks.map(|v| v as f64))),
    ] {
        let g = v.as_deref().and_then(growth);
        let _ = writeln!(
            s,
            "| {name} | {} |",
            g.map_or("-".into(), |g| format!("{:+.1} %", g * 100.0))
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sec(t: u64, warmup: bool, rss: f64, fds: u64, tasks: u64) -> SecondReport {
        SecondReport {
            t,
            warmup,
            achieved: 100,
            errors: if t == 70 { 1 } else { 0 },
            p99_ms: t as f64 / 100.0,
            nf_rss_mb: Some(rss),
            nf_rss_anon_mb: Some(rss - 20.0 + t as f64 / 60.0),
            nf_rss_file_mb: Some(20.0 - t as f64 / 60.0),
            nf_open_fds: Some(fds),
            nf_threads: Some(8),
            nf_tasks: [("nrf".to_string(), tasks), ("bsf".to_string(), tasks)]
                .into_iter()
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn minutes_of_the_measured_window() {
        // 10 s of warm-up, then 3 minutes and 5 s; the fds grow in the last minute.
        let tl: Vec<_> =
            (1..=195).map(|t| sec(t, t <= 10, 50.0, if t > 130 { 40 } else { 30 }, 12)).collect();
        let m = minutes(&tl);
        assert_eq!(m.len(), 4);
        assert_eq!(m[0].seconds, 60);
        assert_eq!(m[3].seconds, 5);
        assert_eq!(m[0].achieved_per_s, 100.0);
        // Second 70 had one failure among 6000 + 1 answers.
        assert!((m[0].success_pct - 6000.0 * 100.0 / 6001.0).abs() < 1e-9, "{}", m[0].success_pct);
        assert_eq!(m[1].success_pct, 100.0);
        assert_eq!(m[0].max_p99_ms, 0.7);
        assert_eq!(m[2].open_fds, Some(40));
        assert_eq!(m[0].tasks, Some(12));
        let mut s = String::new();
        markdown(&tl, &mut s);
        assert!(s.contains("| 3 | 100 | 100.000 |"), "{s}");
        assert!(s.contains("| open fds | +33.3 % |"), "{s}");
        assert!(s.contains("| RSS | +0.0 % |"), "{s}");
        // The split moves while the sum stays: anonymous up a minute's MB each minute.
        let anon = m[0].rss_anon_mb.unwrap();
        assert!((anon - (30.0 + 70.0 / 60.0)).abs() < 1e-9, "{anon}");
        assert!(s.contains("| RSS anonymous | +"), "{s}");
        assert!(s.contains("| RSS file-backed | -"), "{s}");
    }

    #[test]
    fn too_short_a_run_has_no_table() {
        let tl: Vec<_> = (1..=120).map(|t| sec(t, false, 50.0, 30, 12)).collect();
        let mut s = String::new();
        markdown(&tl, &mut s);
        assert!(s.is_empty(), "{s}");
        assert_eq!(growth(&[1.0, 2.0]), None);
        assert_eq!(growth(&[1.0, 1.0, 2.0]), Some(1.0));
    }
}
