//! Latency histograms (HdrHistogram, microseconds) and the per-second timeline.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Highest latency recorded exactly: 10 minutes; anything above is clamped to it.
const MAX_US: u64 = 600_000_000;

pub fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_US, 3).expect("valid histogram bounds")
}

pub fn record(h: &mut Histogram<u64>, us: u64) {
    h.saturating_record(us.clamp(1, MAX_US));
}

/// Latency summary in milliseconds.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Latency {
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
}

impl Latency {
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Self::default();
        }
        let ms = |us: u64| us as f64 / 1000.0;
        Self {
            p50_ms: ms(h.value_at_quantile(0.50)),
            p90_ms: ms(h.value_at_quantile(0.90)),
            p95_ms: ms(h.value_at_quantile(0.95)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            max_ms: ms(h.max()),
            mean_ms: h.mean() / 1000.0,
        }
    }
}

/// Outcomes of one procedure in the measured window.
#[derive(Debug, Clone)]
pub struct ProcStats {
    pub hist: Histogram<u64>,
    /// Answers with an expected status.
    pub ok: u64,
    /// Requests sent (answered or not).
    pub sent: u64,
    /// Requests not sent because a pool they take from was empty (not failures).
    pub skipped: u64,
    /// Outcome counts: HTTP status, or `timeout` / `transport`.
    pub outcomes: BTreeMap<String, u64>,
}

impl Default for ProcStats {
    fn default() -> Self {
        Self { hist: new_hist(), ok: 0, sent: 0, skipped: 0, outcomes: BTreeMap::new() }
    }
}

impl ProcStats {
    pub fn success_rate(&self) -> f64 {
        if self.sent == 0 {
            1.0
        } else {
            self.ok as f64 / self.sent as f64
        }
    }

    /// True when every answer is "no such resource/method" (404, 405, 501) and there was one:
    /// the NF does not serve this procedure.
    pub fn looks_unserved(&self) -> bool {
        let answered: u64 =
            self.outcomes.iter().filter(|(k, _)| k.parse::<u16>().is_ok()).map(|(_, v)| v).sum();
        let unserved: u64 =
            ["404", "405", "501"].iter().filter_map(|k| self.outcomes.get(*k)).sum();
        answered > 0 && unserved == answered
    }
}

/// Steps per doubling of a [`Coarse`] histogram: bounds 2^(1/16) (4.4 %) apart.
const COARSE_STEPS: f64 = 16.0;
/// Buckets of a [`Coarse`] histogram: 1 µs to 2^32 µs (71 minutes).
const COARSE_BUCKETS: usize = 32 * COARSE_STEPS as usize + 1;

/// A small latency histogram (µs, bounds 4.4 % apart, 2 KB) for one chart line in one second,
/// where an HdrHistogram per line and second (160 KB) would not do.
#[derive(Debug, Clone)]
pub struct Coarse {
    counts: Box<[u32]>,
    total: u64,
}

impl Default for Coarse {
    fn default() -> Self {
        Self { counts: vec![0; COARSE_BUCKETS].into_boxed_slice(), total: 0 }
    }
}

impl Coarse {
    fn bucket(us: u64) -> usize {
        let b = ((us.max(1) as f64).log2() * COARSE_STEPS).ceil() as usize;
        b.min(COARSE_BUCKETS - 1)
    }

    pub fn record(&mut self, us: u64) {
        self.counts[Self::bucket(us)] += 1;
        self.total += 1;
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Adds `other`'s counts (one chart line of several, a second of several feeds).
    pub fn merge(&mut self, other: &Coarse) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.total += other.total;
    }

    /// The `q` quantile, ms: the upper bound of its bucket (at most 4.4 % above the truth).
    pub fn quantile_ms(&self, q: f64) -> Option<f64> {
        let rank = ((q * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, n) in self.counts.iter().enumerate() {
            seen += u64::from(*n);
            if seen >= rank {
                return Some(2f64.powf(b as f64 / COARSE_STEPS) / 1000.0);
            }
        }
        None
    }
}

/// One second of the run (by completion time, except `offered`: by intended send time).
#[derive(Debug, Clone)]
pub struct Second {
    pub offered: u64,
    pub completed: u64,
    pub errors: u64,
    /// Answers by kind, whatever the procedure expected (an overload run reads these).
    pub answers: AnswerCounts,
    pub hist: Histogram<u64>,
    /// Latency per chart group of procedures (crate::engine's `groups`).
    pub groups: Vec<Coarse>,
}

impl Default for Second {
    fn default() -> Self {
        Self {
            offered: 0,
            completed: 0,
            errors: 0,
            answers: AnswerCounts::default(),
            hist: new_hist(),
            groups: Vec::new(),
        }
    }
}

/// What came back for a request, by kind: what an overload run must tell apart (served, shed
/// with 503, failed otherwise, no answer at all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerKind {
    /// HTTP 2xx, or a Diameter answer the procedure expected.
    Served,
    /// HTTP 503 (shed).
    Shed,
    /// HTTP 5xx other than 503.
    OtherServerError,
    /// Any other answer (4xx, 3xx, an unexpected Diameter result).
    Other,
    /// Timed out after it was sent.
    Timeout,
    /// Never sent: held in the client by the NF's SETTINGS_MAX_CONCURRENT_STREAMS (or a
    /// connection being opened) until it timed out or its connection closed.
    NotSent,
    Transport,
}

#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct AnswerCounts {
    pub http_2xx: u64,
    pub http_503: u64,
    pub http_5xx_other: u64,
    pub other: u64,
    pub timeout: u64,
    /// Never sent: held in the client (the NF's stream limit) until it timed out or its
    /// connection closed.
    pub not_sent: u64,
    pub transport: u64,
}

impl AnswerCounts {
    pub fn add(&mut self, kind: AnswerKind) {
        match kind {
            AnswerKind::Served => self.http_2xx += 1,
            AnswerKind::Shed => self.http_503 += 1,
            AnswerKind::OtherServerError => self.http_5xx_other += 1,
            AnswerKind::Other => self.other += 1,
            AnswerKind::Timeout => self.timeout += 1,
            AnswerKind::NotSent => self.not_sent += 1,
            AnswerKind::Transport => self.transport += 1,
        }
    }

    pub fn merge(&mut self, o: &AnswerCounts) {
        self.http_2xx += o.http_2xx;
        self.http_503 += o.http_503;
        self.http_5xx_other += o.http_5xx_other;
        self.other += o.other;
        self.timeout += o.timeout;
        self.not_sent += o.not_sent;
        self.transport += o.transport;
    }

    /// Answers of any kind (a timeout or a transport failure is no answer).
    pub fn answered(&self) -> u64 {
        self.http_2xx + self.http_503 + self.http_5xx_other + self.other
    }

    pub fn total(&self) -> u64 {
        self.answered() + self.timeout + self.not_sent + self.transport
    }
}

impl AnswerKind {
    pub fn of_status(code: u16) -> Self {
        match code {
            200..=299 => AnswerKind::Served,
            503 => AnswerKind::Shed,
            500..=599 => AnswerKind::OtherServerError,
            _ => AnswerKind::Other,
        }
    }
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct SecondReport {
    /// Seconds since the load started.
    pub t: u64,
    pub warmup: bool,
    /// After the measured window, at the cool-down rate.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cooldown: bool,
    pub offered: u64,
    pub achieved: u64,
    pub errors: u64,
    /// Answers that arrived in this second, by kind.
    pub answers: AnswerCounts,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// NF CPU, percent of one core (sum over the NFs), when known.
    pub nf_cpu_pct: Option<f64>,
    pub nf_rss_mb: Option<f64>,
    /// Generator process CPU, percent of one core (includes the in-process simulators).
    pub gen_cpu_pct: Option<f64>,
    /// CPU time the hypervisor took from the machine (steal), percent of one CPU summed over
    /// the CPUs, when the kernel reports it (crate::host).
    pub steal_pct: Option<f64>,
    /// p99 of each group of procedures answered in this second (by group name), ms.
    pub group_p99_ms: BTreeMap<String, f64>,
    /// p99 the NFs measured themselves in this second, all their SBI operations together (by
    /// NF), ms, from their `/metrics` read once a second; never above the second's `p99_ms`.
    pub nf_own_p99_ms: BTreeMap<String, f64>,
    /// Open file descriptors and OS threads of the NF processes (summed), read from /proc at
    /// the end of the second: what grows over a soak when something leaks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nf_open_fds: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nf_threads: Option<u64>,
    /// The NF processes' resident memory by kind at the end of the second, MiB: anonymous
    /// (heap and stacks, where a leak shows) and file-backed (mapped files: SQLite's memory map
    /// fills up to its size as pages are first read, then stays).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nf_rss_anon_mb: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nf_rss_file_mb: Option<f64>,
    /// Tasks alive on each NF's runtime (`tokio_alive_tasks` of its /metrics), by NF; the NFs
    /// of one `fivecore up` share one runtime and report the same number.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub nf_tasks: BTreeMap<String, u64>,
}

impl SecondReport {
    pub fn phase(&self) -> &'static str {
        match (self.warmup, self.cooldown) {
            (true, _) => "warm-up",
            (_, true) => "cool-down",
            _ => "measured",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_known_distribution() {
        let mut h = new_hist();
        for us in 1..=10_000u64 {
            record(&mut h, us * 10); // 10 µs .. 100 ms, uniform
        }
        let l = Latency::of(&h);
        assert!((l.p50_ms - 50.0).abs() < 0.1, "{l:?}");
        assert!((l.p90_ms - 90.0).abs() < 0.1);
        assert!((l.p99_ms - 99.0).abs() < 0.1);
        assert!((l.max_ms - 100.0).abs() < 0.1);
        assert!((l.mean_ms - 50.005).abs() < 0.1);
        assert_eq!(Latency::of(&new_hist()), Latency::default());
        record(&mut h, u64::MAX);
        assert!(h.max() >= MAX_US);
    }

    #[test]
    fn coarse_quantiles_are_within_their_step() {
        let mut c = Coarse::default();
        assert!(c.is_empty() && c.quantile_ms(0.99).is_none());
        for us in 1..=1000u64 {
            c.record(us * 10); // 10 µs .. 10 ms
        }
        let p99 = c.quantile_ms(0.99).unwrap();
        assert!((9.9..=9.9 * 1.045).contains(&p99), "{p99}");
        let p50 = c.quantile_ms(0.5).unwrap();
        assert!((5.0..=5.0 * 1.045).contains(&p50), "{p50}");
        c.record(u64::MAX);
        assert!(c.quantile_ms(1.0).unwrap() > 4e6);
        // Merged, the counts add up: the median of two halves is between them.
        let (mut low, mut high) = (Coarse::default(), Coarse::default());
        (1..=100u64).for_each(|us| low.record(us));
        (1001..=1100u64).for_each(|us| high.record(us));
        low.merge(&high);
        assert!((0.1..=1.05).contains(&low.quantile_ms(0.5).unwrap()));
        assert!(low.quantile_ms(0.99).unwrap() >= 1.0);
    }

    #[test]
    fn success_rate_and_unserved_detection() {
        let mut p = ProcStats { sent: 4, ok: 3, ..Default::default() };
        assert_eq!(p.success_rate(), 0.75);
        assert!(!p.looks_unserved());
        p.outcomes.insert("404".into(), 3);
        p.outcomes.insert("timeout".into(), 1);
        assert!(p.looks_unserved());
        p.outcomes.insert("200".into(), 1);
        assert!(!p.looks_unserved());
        assert_eq!(ProcStats::default().success_rate(), 1.0);
    }
}
