//! The overload view of a run (issue #20): what came back, by kind, in the measured window
//! (goodput, the share shed with 503, any other 5xx), the latency of the requests actually
//! served, the seconds in which nothing at all was answered, and, after a cool-down at a lower
//! rate, how long the NF took to answer that rate in full again.

use std::fmt::Write as _;

use serde::Serialize;

use crate::stats::{AnswerCounts, Latency, SecondReport};

/// A second counts as recovered when this share of what was due in it was served (2xx).
const RECOVERED_SHARE: f64 = 0.99;

#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct OverloadReport {
    /// Answers to the requests due in the measured window, by kind.
    pub answers: AnswerCounts,
    /// 2xx answers received per second of the measured window (by arrival, not by due time: a
    /// client that queues what the NF cannot take gets its answers later, and counting them
    /// against the seconds they were due would show a rate the NF never served).
    pub goodput_tps: f64,
    /// Shares of all requests of the window: shed (503), other 5xx, no answer (timeout or
    /// transport failure; a request that never left the client is counted apart, in
    /// `not_sent_share`: the NF never saw it).
    pub shed_share: f64,
    pub other_5xx_share: f64,
    pub unanswered_share: f64,
    pub not_sent_share: f64,
    /// Latency of the served (2xx) requests only.
    pub served_latency: Latency,
    /// Seconds of the measured window in which no answer of any kind arrived, and the longest
    /// run of them.
    pub silent_seconds: u64,
    pub longest_silence_s: u64,
    /// With a cool-down: its length and rate, and the seconds from its start to the first second
    /// from which on only 2xx answers arrived, at least 99 % of what was due (`None`: never).
    pub cooldown_s: f64,
    pub cooldown_rate: f64,
    pub recovery_s: Option<u64>,
}

impl OverloadReport {
    /// `timeline` seconds are 1-based (`t` = end of the second); `measured` is [warm-up, end).
    pub fn new(
        answers: AnswerCounts,
        served_latency: Latency,
        timeline: &[SecondReport],
        (warmup_s, duration_s): (f64, f64),
        (cooldown_s, cooldown_rate): (f64, f64),
    ) -> Self {
        let total = answers.total().max(1) as f64;
        let measured: Vec<&SecondReport> = timeline
            .iter()
            .filter(|s| s.t as f64 > warmup_s && s.t as f64 <= warmup_s + duration_s)
            .collect();
        let mut silent = 0;
        let mut run = 0;
        let mut longest = 0;
        for s in &measured {
            if s.answers.answered() == 0 {
                silent += 1;
                run += 1;
                longest = longest.max(run);
            } else {
                run = 0;
            }
        }
        let recovery_s = (cooldown_s > 0.0)
            .then(|| {
                let from = (warmup_s + duration_s).ceil() as u64;
                // The last second is cut short by the end of the run: leave it out.
                let end = (warmup_s + duration_s + cooldown_s).floor() as u64;
                let after: Vec<&SecondReport> =
                    timeline.iter().filter(|s| s.t > from && s.t <= end).collect();
                // Recovered from second i on: nothing but 2xx answers from then to the end, and
                // the 2xx of those seconds together at least 99 % of what was due in them (an
                // answer late by a few ms lands in the next second; a second in which nothing
                // could be sent, all slots still held, is not recovered).
                let clean =
                    |s: &SecondReport| s.offered > 0 && s.answers.total() == s.answers.http_2xx;
                let first_dirty_from_end = after.iter().rposition(|s| !clean(s));
                let from_i = first_dirty_from_end.map_or(0, |i| i + 1);
                let rest = &after[from_i..];
                let served: u64 = rest.iter().map(|s| s.answers.http_2xx).sum();
                let due: u64 = rest.iter().map(|s| s.offered).sum();
                (!rest.is_empty() && served as f64 >= RECOVERED_SHARE * due as f64)
                    .then(|| rest[0].t - 1 - from)
            })
            .flatten();
        let received_2xx: u64 = measured.iter().map(|s| s.answers.http_2xx).sum();
        OverloadReport {
            goodput_tps: received_2xx as f64 / (measured.len() as f64).max(1.0),
            shed_share: answers.http_503 as f64 / total,
            other_5xx_share: answers.http_5xx_other as f64 / total,
            unanswered_share: (answers.timeout + answers.transport) as f64 / total,
            not_sent_share: answers.not_sent as f64 / total,
            answers,
            served_latency,
            silent_seconds: silent,
            longest_silence_s: longest,
            cooldown_s,
            cooldown_rate,
            recovery_s,
        }
    }

    /// Worth a section of its own: something was shed, failed or went unanswered, or the run
    /// was an overload run (cool-down).
    pub fn notable(&self) -> bool {
        let a = &self.answers;
        a.http_503 + a.http_5xx_other + a.timeout + a.not_sent + a.transport > 0
            || self.cooldown_s > 0.0
    }

    /// The report.md section: the summary, then the answers of every second.
    pub fn markdown(&self, timeline: &[SecondReport], out: &mut String) {
        let a = &self.answers;
        let l = &self.served_latency;
        let _ = writeln!(
            out,
            "\n## Answers by kind (overload view)\n\nRequests due in the measured window: {} answered 2xx (goodput: {:.1} 2xx received per second of the window), {} shed with 503 ({:.2} %), {} other 5xx ({:.2} %), {} other answers, {} timed out, {} transport failures ({:.2} % unanswered); {} never sent ({:.2} %: held in the client by the NF's stream limit until they timed out or their connection closed; the NF never saw them). Served (2xx) latency p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms. Seconds without any answer: {} (longest run {} s).",
            a.http_2xx,
            self.goodput_tps,
            a.http_503,
            self.shed_share * 100.0,
            a.http_5xx_other,
            self.other_5xx_share * 100.0,
            a.other,
            a.timeout,
            a.transport,
            self.unanswered_share * 100.0,
            a.not_sent,
            self.not_sent_share * 100.0,
            l.p50_ms,
            l.p99_ms,
            l.max_ms,
            self.silent_seconds,
            self.longest_silence_s
        );
        if self.cooldown_s > 0.0 {
            let _ = writeln!(
                out,
                "\nCool-down: {:.0} s at {:.1}/s after the measured window; {}.",
                self.cooldown_s,
                self.cooldown_rate,
                match self.recovery_s {
                    Some(s) => format!(
                        "every second from {s} s after it on served at least 99 % of what was due"
                    ),
                    None =>
                        "the NF never served 99 % of what was due in every second to the end".into(),
                }
            );
        }
        let _ = writeln!(
            out,
            "\n| s | phase | offered | 2xx | 503 | other 5xx | other | timeout | not sent | transport | p99 ms (all answers) |\n|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
        );
        for s in timeline {
            let x = &s.answers;
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} |",
                s.t,
                s.phase(),
                s.offered,
                x.http_2xx,
                x.http_503,
                x.http_5xx_other,
                x.other,
                x.timeout,
                x.not_sent,
                x.transport,
                s.p99_ms
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Second `t` of a run with 1 s of warm-up and 4 s measured.
    fn sec(t: u64, offered: u64, ok: u64, shed: u64) -> SecondReport {
        SecondReport {
            t,
            warmup: t <= 1,
            cooldown: t > 5,
            offered,
            answers: AnswerCounts { http_2xx: ok, http_503: shed, ..Default::default() },
            ..Default::default()
        }
    }

    #[test]
    fn silences_shares_and_recovery() {
        // 1 s warm-up, 4 s measured (t = 2..=5), 4 s cool-down (t = 6..=9).
        let tl = vec![
            sec(1, 100, 100, 0),
            sec(2, 100, 50, 50),
            sec(3, 100, 0, 0),
            sec(4, 100, 0, 0),
            sec(5, 100, 50, 50),
            sec(6, 25, 10, 15),
            sec(7, 25, 25, 0),
            sec(8, 25, 25, 0),
            sec(9, 25, 25, 0),
        ];
        let answers =
            AnswerCounts { http_2xx: 100, http_503: 100, timeout: 200, ..Default::default() };
        let r = OverloadReport::new(answers, Latency::default(), &tl, (1.0, 4.0), (4.0, 25.0));
        assert_eq!((r.silent_seconds, r.longest_silence_s), (2, 2));
        assert_eq!(r.goodput_tps, 25.0);
        // Goodput is what arrived in the window's seconds: requests due in it but answered
        // after it (a client queueing the excess) do not raise it.
        let queued = AnswerCounts { http_2xx: 400, ..Default::default() };
        let q = OverloadReport::new(queued, Latency::default(), &tl, (1.0, 4.0), (4.0, 25.0));
        assert_eq!(q.goodput_tps, 25.0);
        assert_eq!((r.shed_share, r.unanswered_share), (0.25, 0.5));
        // t = 6 (the first cool-down second) fell short, t = 7 on were whole: 1 s.
        assert_eq!(r.recovery_s, Some(1));
        assert!(r.notable());
        // A late answer moving to the next second is no relapse.
        let mut jitter = tl.clone();
        jitter[6] = sec(7, 25, 20, 0);
        jitter[7] = sec(8, 25, 30, 0);
        let r = OverloadReport::new(answers, Latency::default(), &jitter, (1.0, 4.0), (4.0, 25.0));
        assert_eq!(r.recovery_s, Some(1));
        // Nothing sent in the last second (all slots still held): not recovered.
        let mut unsent = tl.clone();
        unsent[8] = sec(9, 0, 0, 0);
        let r = OverloadReport::new(answers, Latency::default(), &unsent, (1.0, 4.0), (4.0, 25.0));
        assert_eq!(r.recovery_s, None);
        // Still shedding in the last second: never recovered.
        let mut bad = tl.clone();
        bad[8] = sec(9, 25, 20, 5);
        let r = OverloadReport::new(answers, Latency::default(), &bad, (1.0, 4.0), (4.0, 25.0));
        assert_eq!(r.recovery_s, None);
        // Whole from the first cool-down second.
        let mut good = tl;
        good[5] = sec(6, 25, 25, 0);
        let r = OverloadReport::new(answers, Latency::default(), &good, (1.0, 4.0), (4.0, 25.0));
        assert_eq!(r.recovery_s, Some(0));
        let mut md = String::new();
        r.markdown(&good, &mut md);
        assert!(md.contains("| 3 | measured | 100 | 0 | 0 |"), "{md}");
        assert!(md.contains("| 6 | cool-down | 25 | 25 |"), "{md}");
    }
}
