//! The NFs' own latency: the latency histograms on each NF's `/metrics` (SBI operations,
//! Diameter commands) read at the start and at the end of the measured window.
//!
//! The kit's per-procedure latencies are end to end: they include the generator's own queueing
//! (and, in the open loop, any lateness of a send). These rows are what the NF measured from a
//! request reaching it to its answer, the reference's "NF latency" rows. Quantiles are
//! interpolated inside a bucket, as Prometheus' `histogram_quantile` does; the share at or under
//! 5 ms is exact, 5 ms being a bucket boundary of the NFs' histograms.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

/// The histogram families read, and how a row is named from their labels.
const FAMILIES: [&str; 3] =
    ["sbi_request_duration_seconds", "diameter_request_duration_seconds", OWN_FAMILY];

/// The SBI operations' latency less the time they waited on other NFs (an NRF's SLF query or
/// forwarded discovery): the `excl_waits` columns of the SBI family's row with the same labels.
const OWN_FAMILY: &str = "sbi_request_own_duration_seconds";

/// The bound whose share is reported exactly, seconds.
const UNDER: f64 = 0.005;

/// One NF's histograms at one instant: series key (family and labels) to cumulative bucket
/// counts by upper bound.
#[derive(Debug, Clone, Default)]
pub struct Scrape {
    nf: String,
    series: BTreeMap<(String, String), Vec<(f64, f64)>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct NfLatencyRow {
    pub nf: String,
    /// The SBI service operation, or the Diameter command (`AAR`, `STR`, ...).
    pub operation: String,
    /// Requests answered in the window.
    pub count: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Percent of the answers given in 5 ms or less.
    pub under_5ms_pct: f64,
    /// The same less the time the NF waited on other NFs (SBI operations of a fivecore NF that
    /// publishes it); equal to the above for operations that wait on nobody.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub excl_waits: Option<Quantiles>,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Quantiles {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub under_5ms_pct: f64,
}

impl Quantiles {
    /// Of cumulative bucket counts; `None` without answers.
    fn of(buckets: &[(f64, f64)]) -> Option<Self> {
        let count = buckets.last().map_or(0.0, |x| x.1);
        if count < 1.0 {
            return None;
        }
        let under = buckets.iter().find(|x| x.0 == UNDER).map_or(f64::NAN, |x| x.1);
        Some(Quantiles {
            p50_ms: quantile(buckets, 0.5) * 1e3,
            p99_ms: quantile(buckets, 0.99) * 1e3,
            under_5ms_pct: under / count * 100.0,
        })
    }
}

/// `GET <url>/metrics`; `None` when the NF does not answer (an external target that is not
/// fivecore): the report then has no rows for it.
pub async fn scrape(client: &sbi::client::SbiClient, nf: &str, url: &str) -> Option<Scrape> {
    let r = client
        .get(&format!("{url}{}", sbi::observe::METRICS_PATH))
        .max_rsp_time(Duration::from_secs(2))
        .send()
        .await
        .ok()?;
    if !r.status().is_success() {
        return None;
    }
    Some(parse(nf, std::str::from_utf8(r.body()).ok()?))
}

/// Reads the `_bucket` lines of [`FAMILIES`] from Prometheus text.
pub fn parse(nf: &str, text: &str) -> Scrape {
    let mut series: BTreeMap<(String, String), Vec<(f64, f64)>> = BTreeMap::new();
    for line in text.lines() {
        let Some(family) = FAMILIES
            .iter()
            .find(|f| line.strip_prefix(**f).is_some_and(|rest| rest.starts_with("_bucket{")))
        else {
            continue;
        };
        let Some((labels, value)) = line[family.len() + "_bucket{".len()..].rsplit_once("} ")
        else {
            continue;
        };
        let Ok(value) = value.trim().parse::<f64>() else { continue };
        let mut le = None;
        let mut rest = Vec::new();
        for pair in split_labels(labels) {
            match pair.split_once('=') {
                Some(("le", v)) => le = Some(v.trim_matches('"')),
                Some((k, v)) => rest.push((k, v.trim_matches('"'))),
                None => {}
            }
        }
        let Some(le) =
            le.and_then(|l| if l == "+Inf" { Some(f64::INFINITY) } else { l.parse().ok() })
        else {
            continue;
        };
        rest.sort();
        let key = rest.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",");
        series.entry(((*family).to_owned(), key)).or_default().push((le, value));
    }
    for b in series.values_mut() {
        b.sort_by(|x, y| x.0.total_cmp(&y.0));
    }
    Scrape { nf: nf.to_owned(), series }
}

/// Label pairs; values are the NFs' operation names and numbers, never a quoted comma.
fn split_labels(labels: &str) -> impl Iterator<Item = &str> {
    labels.split(',').map(str::trim).filter(|p| !p.is_empty())
}

/// The rows of the window from `start` to `end` (one scrape per NF each), busiest first.
pub fn rows(start: &[Scrape], end: &[Scrape]) -> Vec<NfLatencyRow> {
    let mut out = Vec::new();
    for e in end {
        let s = start.iter().find(|s| s.nf == e.nf);
        let window = |family: &str, key: &str| -> Option<Vec<(f64, f64)>> {
            let buckets = e.series.get(&(family.to_owned(), key.to_owned()))?;
            let before = s.and_then(|s| s.series.get(&(family.to_owned(), key.to_owned())));
            Some(
                buckets
                    .iter()
                    .map(|&(le, c)| {
                        let c0 =
                            before.and_then(|b| b.iter().find(|x| x.0 == le)).map_or(0.0, |x| x.1);
                        (le, (c - c0).max(0.0))
                    })
                    .collect(),
            )
        };
        for (family, key) in e.series.keys() {
            if family == OWN_FAMILY {
                continue;
            }
            let Some(delta) = window(family, key) else { continue };
            let Some(q) = Quantiles::of(&delta) else { continue };
            let excl_waits = if family.starts_with("sbi") {
                window(OWN_FAMILY, key).and_then(|d| Quantiles::of(&d))
            } else {
                None
            };
            out.push(NfLatencyRow {
                nf: e.nf.clone(),
                operation: operation_name(family, key),
                count: delta.last().map_or(0.0, |x| x.1) as u64,
                p50_ms: q.p50_ms,
                p99_ms: q.p99_ms,
                under_5ms_pct: q.under_5ms_pct,
                excl_waits,
            });
        }
    }
    out.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.operation.cmp(&b.operation)));
    out
}

/// The `q` quantile of cumulative `buckets`, linear inside the bucket it falls in; the largest
/// finite bound when it falls in `+Inf`.
fn quantile(buckets: &[(f64, f64)], q: f64) -> f64 {
    let total = buckets.last().map_or(0.0, |x| x.1);
    let rank = q * total;
    let (mut lower, mut below) = (0.0, 0.0);
    for &(le, cum) in buckets {
        if cum >= rank {
            if le.is_infinite() {
                return lower;
            }
            let inside = cum - below;
            return if inside > 0.0 { lower + (le - lower) * (rank - below) / inside } else { le };
        }
        (lower, below) = (le, cum);
    }
    lower
}

fn operation_name(family: &str, key: &str) -> String {
    let label = |name: &str| {
        key.split(',').find_map(|kv| kv.strip_prefix(name)?.strip_prefix('=')).unwrap_or("")
    };
    if family.starts_with("diameter") {
        // The dictionary's short name of the request (AAR, STR, UDR, ...) for its application.
        let (app, cmd) = (label("application"), label("command"));
        return match (app.parse(), cmd.parse()) {
            (Ok(a), Ok(c)) => diameter::dictionary::command(a, c).map(|d| d.abbrev.0.to_owned()),
            _ => None,
        }
        .unwrap_or_else(|| format!("Diameter {app}/{cmd}"));
    }
    label("operation").to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(ops: &[(&str, [u64; 4])], diameter: bool) -> String {
        let mut s = String::from("# HELP sbi_request_duration_seconds x\n");
        for (op, c) in ops {
            for (le, n) in ["0.001", "0.005", "0.01", "+Inf"].iter().zip(c) {
                s += &format!(
                    "sbi_request_duration_seconds_bucket{{le=\"{le}\",operation=\"{op}\"}} {n}\n"
                );
            }
            s += &format!("sbi_request_duration_seconds_count{{operation=\"{op}\"}} {}\n", c[3]);
            // Less the waits: every answer under 1 ms.
            for le in ["0.001", "0.005", "0.01", "+Inf"] {
                s += &format!(
                    "sbi_request_own_duration_seconds_bucket{{le=\"{le}\",operation=\"{op}\"}} {}\n",
                    c[3]
                );
            }
        }
        if diameter {
            s += "diameter_request_duration_seconds_bucket{le=\"0.005\",application=\"16777236\",command=\"265\"} 7\n";
            s += "diameter_request_duration_seconds_bucket{le=\"+Inf\",application=\"16777236\",command=\"265\"} 8\n";
        }
        s
    }

    #[test]
    fn window_rows_come_from_bucket_deltas() {
        let a = parse(
            "nrf",
            &text(&[("NFDiscover", [10, 10, 10, 10]), ("NFRegister", [1, 1, 1, 1])], false),
        );
        // In the window: 100 answers, 50 under 1 ms, 49 in (1, 5] ms, 1 in (5, 10] ms.
        let b = parse(
            "nrf",
            &text(&[("NFDiscover", [60, 109, 110, 110]), ("NFRegister", [1, 1, 1, 1])], true),
        );
        let r = rows(&[a], &[b]);
        assert_eq!(r.len(), 2, "{r:?}");
        let d = &r[0];
        assert_eq!((d.nf.as_str(), d.operation.as_str(), d.count), ("nrf", "NFDiscover", 100));
        assert!((d.p50_ms - 1.0).abs() < 1e-9, "{d:?}");
        // Rank 99 is the last of the 49 in (1, 5] ms.
        assert!((d.p99_ms - 5.0).abs() < 1e-9, "{d:?}");
        assert!((d.under_5ms_pct - 99.0).abs() < 1e-9);
        let own = d.excl_waits.expect("the own family pairs with the SBI row");
        assert!((own.p99_ms - 0.99).abs() < 1e-9, "{own:?}");
        assert_eq!(own.under_5ms_pct, 100.0);
        // NFRegister did not move: no row. The Diameter series, absent at the start, counts
        // from zero.
        assert_eq!(r[1].operation, "AAR");
        assert_eq!(
            operation_name("diameter_request_duration_seconds", "application=4,command=99"),
            "Diameter 4/99"
        );
        assert_eq!(r[1].count, 8);
        assert_eq!(r[1].excl_waits, None);
    }

    /// The share "at or under 5 ms" is exact only if every NF histogram has 5 ms as a bound.
    #[test]
    fn the_nfs_histograms_share_their_bounds_and_5_ms_is_one() {
        use diameter::metrics::LATENCY_BUCKETS as DIAMETER;
        use sbi::layer::metrics::LATENCY_BUCKETS as SBI;
        assert_eq!(SBI, DIAMETER);
        assert!(SBI.contains(&UNDER));
    }

    #[test]
    fn a_quantile_past_the_last_bound_is_that_bound() {
        let b = [(0.001, 0.0), (0.005, 0.0), (f64::INFINITY, 10.0)];
        assert_eq!(quantile(&b, 0.5), 0.005);
        let b = [(0.001, 4.0), (0.005, 8.0), (f64::INFINITY, 8.0)];
        assert!((quantile(&b, 0.5) - 0.001).abs() < 1e-12);
        assert!((quantile(&b, 0.25) - 0.0005).abs() < 1e-12);
    }
}
