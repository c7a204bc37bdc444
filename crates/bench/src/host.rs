//! The host under the run: on a virtual machine the hypervisor can take the CPUs away (steal
//! time, `/proc/stat`). A second with steal has the NF and the generator stopped at random for
//! milliseconds, which shows in every procedure's tail at once, whatever the NF does. The report
//! gives the steal per second and the latency of the seconds without it beside the overall
//! figures, so a reader can tell the NF's tail from the host's.

use serde::Serialize;

use crate::stats::{self, Latency, Second, SecondReport};

/// At most this much steal, percent of one CPU, makes a second "quiet": one 10 ms tick of the
/// kernel's accounting in a second is 1 %, and an idle host still shows one now and then.
pub const QUIET_STEAL_PCT: f64 = 2.0;

/// Mean steal, percent of one CPU, above which the report warns that the tails include it.
pub const WARN_STEAL_PCT: f64 = 5.0;

#[derive(Debug, Clone, Serialize, Default)]
pub struct HostReport {
    /// Mean steal over the measured seconds, percent of one CPU (all CPUs summed).
    pub steal_pct_mean: f64,
    /// The worst measured second.
    pub steal_pct_max: f64,
    pub measured_seconds: usize,
    /// Measured seconds with at most [`QUIET_STEAL_PCT`] steal.
    pub quiet_seconds: usize,
    /// All procedures together, answers completed in the quiet seconds.
    pub quiet_latency: Option<Latency>,
}

/// Seconds of CPU the hypervisor has taken from this machine since boot (all CPUs), or `None`
/// where there is no `/proc/stat` or it has no steal column.
pub fn steal_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let ticks = parse_steal_ticks(&stat)?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| ticks as f64 / hz as f64)
}

/// The steal column (the 8th number) of the aggregate `cpu` line.
fn parse_steal_ticks(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    line.split_whitespace().nth(8)?.parse().ok()
}

/// The host's share of the measured window; `None` when steal was not readable.
pub fn report(timeline: &[SecondReport], seconds: &[Second]) -> Option<HostReport> {
    // The last second (the drain after the load) has no sample after it: no steal figure.
    let measured: Vec<(usize, f64)> = timeline
        .iter()
        .enumerate()
        .filter(|(_, t)| !t.warmup)
        .filter_map(|(i, t)| t.steal_pct.map(|s| (i, s)))
        .collect();
    if measured.is_empty() {
        return None;
    }
    let mut quiet = stats::new_hist();
    let mut quiet_seconds = 0;
    for &(i, steal) in &measured {
        // Steal comes in whole ticks: 2.000000001 % is two of them.
        if steal <= QUIET_STEAL_PCT + 1e-6 {
            quiet_seconds += 1;
            if let Some(sec) = seconds.get(i) {
                // Both come from new_hist(): same bounds, so adding cannot fail.
                let _ = quiet.add(&sec.hist);
            }
        }
    }
    Some(HostReport {
        steal_pct_mean: measured.iter().map(|x| x.1).sum::<f64>() / measured.len() as f64,
        steal_pct_max: measured.iter().map(|x| x.1).fold(0.0, f64::max),
        measured_seconds: measured.len(),
        quiet_seconds,
        quiet_latency: (!quiet.is_empty()).then(|| Latency::of(&quiet)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_steal_column_of_the_cpu_line() {
        let stat = "cpu  4705 150 1120 16250 520 0 30 77 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n";
        assert_eq!(parse_steal_ticks(stat), Some(77));
        assert_eq!(parse_steal_ticks("cpu  1 2 3\n"), None);
        assert_eq!(parse_steal_ticks("intr 5\n"), None);
        // This machine's own /proc/stat, when there is one, parses.
        if std::path::Path::new("/proc/stat").exists() {
            assert!(steal_seconds().is_some());
        }
    }

    #[test]
    fn quiet_seconds_and_their_latency() {
        let second = |us: u64| {
            let mut s = Second::default();
            for _ in 0..100 {
                stats::record(&mut s.hist, us);
            }
            s
        };
        // A warm-up second, then 1 ms answers in quiet seconds and 50 ms ones in a stolen one.
        let seconds = vec![second(90_000), second(1_000), second(50_000), second(1_000)];
        let t =
            |warmup, steal| SecondReport { warmup, steal_pct: Some(steal), ..Default::default() };
        let timeline = vec![t(true, 0.0), t(false, 0.0), t(false, 40.0), t(false, 2.0)];
        let h = report(&timeline, &seconds).unwrap();
        assert_eq!((h.measured_seconds, h.quiet_seconds), (3, 2));
        assert!((h.steal_pct_mean - 14.0).abs() < 1e-9 && h.steal_pct_max == 40.0, "{h:?}");
        let q = h.quiet_latency.unwrap();
        assert!((q.p99_ms - 1.0).abs() < 0.01, "{q:?}");
        // A second without a figure is left out; none at all: no host report.
        let mut partial = timeline.clone();
        partial[3].steal_pct = None;
        assert_eq!(report(&partial, &seconds).unwrap().measured_seconds, 2);
        let unknown = vec![SecondReport::default()];
        assert!(report(&unknown, &seconds).is_none());
    }
}
