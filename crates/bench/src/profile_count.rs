//! Profiles per discovery answer: the kit counts the `nfInstances` of NFDiscover answers, per
//! procedure and query variant, and sets them beside what the reference's answers held (the
//! NRF guide's Table 4-9, a procedure's `expect_profiles`). An answer with more or fewer
//! profiles than the reference's costs the NRF (and the generator) a different amount of work,
//! so the comparison would no longer be like for like.
//!
//! Parsing every 10-40 KB answer would cost the generator more than the answers themselves, so
//! the first [`ALWAYS`] answers of each variant are counted, then one in [`EVERY`].

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// Answers of a variant counted before sampling starts.
pub const ALWAYS: u64 = 256;
/// After that, one answer in this many.
pub const EVERY: u64 = 32;

/// The profiles of a SearchResult (TS 29.510 §6.2.6.2.2); `None` for a body that is not one.
pub fn count(body: &[u8]) -> Option<usize> {
    #[derive(Deserialize)]
    struct SearchResult {
        #[serde(rename = "nfInstances")]
        nf_instances: Vec<serde::de::IgnoredAny>,
    }
    serde_json::from_slice::<SearchResult>(body).ok().map(|r| r.nf_instances.len())
}

/// The counts of one variant of one procedure: how many answers held how many profiles.
#[derive(Debug, Default)]
pub struct Counts {
    inner: Mutex<CountsInner>,
}

#[derive(Debug, Default)]
struct CountsInner {
    /// Answers seen (counted or not), to sample by.
    seen: u64,
    /// Profiles per answer → answers.
    by_profiles: BTreeMap<usize, u64>,
    /// Answers whose body was no SearchResult.
    unreadable: u64,
}

impl Counts {
    /// Whether the next answer is to be counted (called once per answer, before it is sent for).
    pub fn wanted(&self) -> bool {
        let mut c = self.inner.lock().unwrap();
        c.seen += 1;
        c.seen <= ALWAYS || c.seen.is_multiple_of(EVERY)
    }

    pub fn add(&self, body: &[u8]) {
        let mut c = self.inner.lock().unwrap();
        match count(body) {
            Some(n) => *c.by_profiles.entry(n).or_default() += 1,
            None => c.unreadable += 1,
        }
    }

    /// The summary row of `procedure` / `variant`.
    pub fn row(&self, procedure: &str, variant: &str, expected: Option<usize>) -> ProfileCountRow {
        let c = self.inner.lock().unwrap();
        row(procedure, variant, expected, &c.by_profiles, c.unreadable)
    }
}

/// One line of the report: profiles per answer of one discovery variant.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProfileCountRow {
    pub procedure: String,
    /// The variant's label (its §3.4 combination), empty for a procedure without variants.
    pub variant: String,
    /// What the reference's answers held (`expect_profiles`).
    pub expected: Option<usize>,
    /// Answers counted (sampled, see the module).
    pub answers: u64,
    pub min: Option<usize>,
    pub median: Option<usize>,
    pub max: Option<usize>,
    /// Answers that were not a SearchResult (an error's ProblemDetails).
    pub unreadable: u64,
    /// `false` when a counted answer held other than `expected` profiles (`true` when none was
    /// counted: a variant this run never sent, as a short run at a low rate leaves the rarest).
    pub as_expected: bool,
}

fn row(
    procedure: &str,
    variant: &str,
    expected: Option<usize>,
    by_profiles: &BTreeMap<usize, u64>,
    unreadable: u64,
) -> ProfileCountRow {
    let answers: u64 = by_profiles.values().sum();
    // The lower median: the count the (answers + 1) / 2-th smallest answer held.
    let half = answers.div_ceil(2);
    let mut seen = 0;
    let median = by_profiles.iter().find_map(|(n, k)| {
        seen += k;
        (seen >= half && answers > 0).then_some(*n)
    });
    let (min, max) = (by_profiles.keys().next().copied(), by_profiles.keys().last().copied());
    ProfileCountRow {
        procedure: procedure.to_owned(),
        variant: variant.to_owned(),
        expected,
        answers,
        min,
        median,
        max,
        unreadable,
        as_expected: expected.is_none_or(|e| answers == 0 || (min == Some(e) && max == Some(e))),
    }
}

/// The warning for a row whose answers differ from the reference's.
pub fn warning(r: &ProfileCountRow) -> Option<String> {
    let e = r.expected?;
    let (Some(min), Some(med), Some(max)) = (r.min, r.median, r.max) else { return None };
    if r.as_expected {
        return None;
    }
    let label = if r.variant.is_empty() { String::new() } else { format!(" ({})", r.variant) };
    Some(format!(
        "{}{label}: answers held {min}/{med}/{max} profiles (min/median/max of {}), the reference's {e}",
        r.procedure, r.answers
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_profiles_of_a_search_result() {
        assert_eq!(count(br#"{"validityPeriod":60,"nfInstances":[]}"#), Some(0));
        let body = br#"{"validityPeriod":60,"nfInstances":[{"nfInstanceId":"a","nfServices":[{"nfInstanceId":"x"}]},{"nfInstanceId":"b"}],"nrfSupportedFeatures":"20"}"#;
        assert_eq!(count(body), Some(2));
        assert_eq!(count(br#"{"status":400,"cause":"MANDATORY_QUERY_PARAM_MISSING"}"#), None);
        assert_eq!(count(b"not json"), None);
    }

    #[test]
    fn rows_give_min_median_max_and_judge_against_the_expected_count() {
        let c = Counts::default();
        for n in [6, 6, 6, 12, 1] {
            let body = format!(r#"{{"nfInstances":[{}]}}"#, vec!["{}"; n].join(","));
            c.add(body.as_bytes());
        }
        c.add(b"{}");
        let r = c.row("NFDiscover-AMF", "12: guami", Some(6));
        assert_eq!(
            (r.answers, r.min, r.median, r.max, r.unreadable),
            (5, Some(1), Some(6), Some(12), 1)
        );
        assert!(!r.as_expected);
        let w = warning(&r).unwrap();
        assert!(w.contains("NFDiscover-AMF (12: guami): answers held 1/6/12 profiles"), "{w}");
        assert!(w.contains("the reference's 6"), "{w}");

        let ok = Counts::default();
        ok.add(br#"{"nfInstances":[{},{},{}]}"#);
        let r = ok.row("NFDiscover-CHF", "", Some(3));
        assert!(r.as_expected && warning(&r).is_none(), "{r:?}");
        // No expectation: nothing to judge. None counted (a variant never sent): no verdict.
        assert!(ok.row("x", "", None).as_expected);
        let none = Counts::default().row("NFDiscover-NEF", "", Some(3));
        assert!(none.as_expected && none.median.is_none() && warning(&none).is_none());
        // An even number of answers: the lower median.
        let even = Counts::default();
        for n in [2, 2, 4, 4] {
            even.add(format!(r#"{{"nfInstances":[{}]}}"#, vec!["1"; n].join(",")).as_bytes());
        }
        assert_eq!(even.row("p", "", None).median, Some(2));
    }

    #[test]
    fn the_first_answers_are_all_counted_then_one_in_every() {
        let c = Counts::default();
        let wanted = (0..ALWAYS + 10 * EVERY).filter(|_| c.wanted()).count() as u64;
        assert_eq!(wanted, ALWAYS + 10);
    }
}
