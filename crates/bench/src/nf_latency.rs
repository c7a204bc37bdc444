//! The NFs' own latency: the latency histograms on each NF's `/metrics` (SBI operations,
//! Diameter commands) read at the start and at the end of the measured window.
//!
//! The kit's per-procedure latencies are end to end: they include the generator's own queueing
//! (and, in the open loop, any lateness of a send). These rows are what the NF measured from a
//! request reaching it to its answer, the reference's "NF latency" rows. Each quantile is given
//! with the bounds of the bucket it falls in and an estimate inside them; the share at or under
//! 5 ms is exact, 5 ms being a bucket boundary of the NFs' histograms.
//!
//! The estimate: a request's time in the NF is part of the time the client saw for it, so the
//! NF's quantile is at most the client's same quantile over the same requests (the kit's
//! procedures that map to the operation, [`maps_to`]). Linear interpolation inside a wide bucket
//! (as Prometheus' `histogram_quantile` does) can land above that (a 2 ms client p99 read as
//! 4.4 ms in the (2, 5] ms bucket); the estimate is therefore interpolated inside the part of
//! the bucket the client's quantile leaves possible, never above it.

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
    /// `tokio_alive_tasks` of the NF's process, when it publishes it (a soak's leak check).
    alive_tasks: Option<u64>,
}

impl Scrape {
    pub fn nf(&self) -> &str {
        &self.nf
    }

    pub fn alive_tasks(&self) -> Option<u64> {
        self.alive_tasks
    }
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
    /// The bounds of the buckets p50 and p99 fall in, ms (`None`: +Inf).
    pub p50_bucket_ms: (f64, Option<f64>),
    pub p99_bucket_ms: (f64, Option<f64>),
    /// The client's p50 and p99 over the kit's procedures of this operation, which bound the
    /// NF's; `None` when no procedure maps to it.
    pub client_p50_ms: Option<f64>,
    pub client_p99_ms: Option<f64>,
    /// Whether the client's quantiles moved an estimate below the bucket's interpolation.
    pub bounded_by_client: bool,
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
    /// Of cumulative bucket counts, each quantile at most the client's (`client`: p50 and p99,
    /// ms); `None` without answers.
    fn of(buckets: &[(f64, f64)], client: Option<(f64, f64)>) -> Option<Self> {
        let count = buckets.last().map_or(0.0, |x| x.1);
        if count < 1.0 {
            return None;
        }
        let under = buckets.iter().find(|x| x.0 == UNDER).map_or(f64::NAN, |x| x.1);
        Some(Quantiles {
            p50_ms: estimate(in_bucket(buckets, 0.5), client.map(|c| c.0)).0,
            p99_ms: estimate(in_bucket(buckets, 0.99), client.map(|c| c.1)).0,
            under_5ms_pct: under / count * 100.0,
        })
    }
}

/// Where a quantile falls: its bucket's bounds (ms) and its rank's fraction of the way through
/// the bucket.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InBucket {
    pub lower_ms: f64,
    /// `INFINITY` for the +Inf bucket.
    pub upper_ms: f64,
    pub fraction: f64,
}

/// The estimate of a quantile (ms) and whether the client's bound moved it: linear inside the
/// bucket, or inside `[lower, client]` when the client's quantile cuts the bucket; the client's
/// quantile itself when it is below the bucket (the two counted different requests), and the
/// lower bound for the +Inf bucket.
pub fn estimate(b: InBucket, client_ms: Option<f64>) -> (f64, bool) {
    let upper = b.upper_ms;
    let top = match client_ms {
        Some(c) if c < upper => c,
        _ if upper.is_infinite() => return (b.lower_ms, false),
        _ => return (b.lower_ms + (upper - b.lower_ms) * b.fraction, false),
    };
    let interpolated =
        if upper.is_finite() { b.lower_ms + (upper - b.lower_ms) * b.fraction } else { b.lower_ms };
    if top < b.lower_ms {
        return (top, true);
    }
    let bounded = b.lower_ms + (top - b.lower_ms) * b.fraction;
    (bounded, bounded < interpolated)
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
    let mut alive_tasks = None;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("tokio_alive_tasks ") {
            alive_tasks = v.trim().parse().ok();
            continue;
        }
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
    Scrape { nf: nf.to_owned(), series, alive_tasks }
}

/// Label pairs; values are the NFs' operation names and numbers, never a quoted comma.
fn split_labels(labels: &str) -> impl Iterator<Item = &str> {
    labels.split(',').map(str::trim).filter(|p| !p.is_empty())
}

/// The p99 (ms) of everything the NF answered between two scrapes, all operations together
/// (SBI and Diameter: their buckets share their bounds), bounded by the client's p99 over the
/// same time (`client_p99_ms`); `None` when it answered nothing.
pub fn p99_between(a: &Scrape, b: &Scrape, client_p99_ms: Option<f64>) -> Option<f64> {
    let mut merged: BTreeMap<u64, f64> = BTreeMap::new();
    for ((family, key), buckets) in &b.series {
        if family == OWN_FAMILY {
            continue;
        }
        let before = a.series.get(&(family.clone(), key.clone()));
        for &(le, c) in buckets {
            let c0 = before.and_then(|x| x.iter().find(|y| y.0 == le)).map_or(0.0, |y| y.1);
            *merged.entry(le.to_bits()).or_default() += (c - c0).max(0.0);
        }
    }
    let mut buckets: Vec<(f64, f64)> =
        merged.into_iter().map(|(le, c)| (f64::from_bits(le), c)).collect();
    buckets.sort_by(|x, y| x.0.total_cmp(&y.0));
    if buckets.last().is_none_or(|x| x.1 < 1.0) {
        return None;
    }
    Some(estimate(in_bucket(&buckets, 0.99), client_p99_ms).0)
}

/// Whether the kit's procedure `procedure` (with its `nf_operation`, when the scenario names
/// one) is a request of the NF's `operation` (the row's name): the named operation, else the
/// operation's last `_` part equal to the procedure's name up to its first `-` or space, case
/// aside (`NFDiscover-UDM` is `Nnrf_NFDiscovery_NFDiscover`, `AAR-I` is `AAR`).
pub fn maps_to(procedure: &str, nf_operation: Option<&str>, operation: &str) -> bool {
    if let Some(named) = nf_operation {
        return named == operation;
    }
    let op = operation.rsplit('_').next().unwrap_or(operation);
    let name = procedure.split(['-', ' ']).next().unwrap_or(procedure);
    !name.is_empty() && op.eq_ignore_ascii_case(name)
}

/// The client's p50 and p99 (ms) of an NF's operation: `client(nf, operation)`.
pub type ClientQuantiles<'a> = dyn Fn(&str, &str) -> Option<(f64, f64)> + 'a;

/// The rows of the window from `start` to `end` (one scrape per NF each), busiest first; each
/// quantile bounded by the client's (`client`).
pub fn rows(start: &[Scrape], end: &[Scrape], client: &ClientQuantiles) -> Vec<NfLatencyRow> {
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
            let operation = operation_name(family, key);
            let seen = client(&e.nf, &operation);
            let Some(q) = Quantiles::of(&delta, seen) else { continue };
            let excl_waits = if family.starts_with("sbi") {
                window(OWN_FAMILY, key).and_then(|d| Quantiles::of(&d, seen))
            } else {
                None
            };
            let (b50, b99) = (in_bucket(&delta, 0.5), in_bucket(&delta, 0.99));
            let bounds = |b: InBucket| (b.lower_ms, b.upper_ms.is_finite().then_some(b.upper_ms));
            let moved = estimate(b50, seen.map(|c| c.0)).1 || estimate(b99, seen.map(|c| c.1)).1;
            out.push(NfLatencyRow {
                nf: e.nf.clone(),
                operation,
                count: delta.last().map_or(0.0, |x| x.1) as u64,
                p50_ms: q.p50_ms,
                p99_ms: q.p99_ms,
                p50_bucket_ms: bounds(b50),
                p99_bucket_ms: bounds(b99),
                client_p50_ms: seen.map(|c| c.0),
                client_p99_ms: seen.map(|c| c.1),
                bounded_by_client: moved,
                under_5ms_pct: q.under_5ms_pct,
                excl_waits,
            });
        }
    }
    out.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.operation.cmp(&b.operation)));
    out
}

/// The bucket of cumulative `buckets` (bounds in seconds) the `q` quantile falls in, and how far
/// through it, by rank.
fn in_bucket(buckets: &[(f64, f64)], q: f64) -> InBucket {
    let total = buckets.last().map_or(0.0, |x| x.1);
    let rank = q * total;
    let (mut lower, mut below) = (0.0, 0.0);
    for &(le, cum) in buckets {
        if cum >= rank {
            let inside = cum - below;
            let fraction = if inside > 0.0 { (rank - below) / inside } else { 1.0 };
            return InBucket { lower_ms: lower * 1e3, upper_ms: le * 1e3, fraction };
        }
        (lower, below) = (le, cum);
    }
    InBucket { lower_ms: lower * 1e3, upper_ms: f64::INFINITY, fraction: 0.0 }
}

/// The `q` quantile of cumulative `buckets`, seconds, linear inside its bucket; the largest
/// finite bound when it falls in `+Inf` (Prometheus' `histogram_quantile`).
#[cfg(test)]
fn quantile(buckets: &[(f64, f64)], q: f64) -> f64 {
    estimate(in_bucket(buckets, q), None).0 / 1e3
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
        let r = rows(&[a], &[b], &|_, _| None);
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

    /// The NF's quantile is never above the client's over the same requests: inside a wide
    /// bucket the estimate is interpolated below the client's, never above.
    #[test]
    fn the_nfs_quantile_never_exceeds_the_clients() {
        // p99 in (2, 5] ms, 90 % of the way through: 4.7 ms by plain interpolation.
        let b = InBucket { lower_ms: 2.0, upper_ms: 5.0, fraction: 0.9 };
        assert_eq!(estimate(b, None), (2.0 + 3.0 * 0.9, false));
        assert_eq!(estimate(b, Some(7.0)), (2.0 + 3.0 * 0.9, false), "the client's is above");
        // The client saw 2.4 ms: the NF's p99 is in (2, 2.4].
        let (est, moved) = estimate(b, Some(2.4));
        assert!(moved && (est - (2.0 + 0.4 * 0.9)).abs() < 1e-12 && est <= 2.4, "{est}");
        // The client's below the bucket (different requests counted): the client's.
        assert_eq!(estimate(b, Some(1.5)), (1.5, true));
        // +Inf: the last bound, or inside (last bound, client].
        let inf = InBucket { lower_ms: 5000.0, upper_ms: f64::INFINITY, fraction: 0.5 };
        assert_eq!(estimate(inf, None), (5000.0, false));
        assert_eq!(estimate(inf, Some(6000.0)), (5500.0, false));

        // Whole rows: a discovery p99 in (200, 500] ms by interpolation 469 ms, the client's
        // 310 ms (SLF and peer NRF 150 ms each): the row says 310 at most, and its bucket.
        let text = |n: [u64; 3]| {
            let mut s = String::new();
            for (le, c) in ["0.2", "0.5", "+Inf"].iter().zip(n) {
                s += &format!(
                    "sbi_request_duration_seconds_bucket{{le=\"{le}\",operation=\"Nnrf_NFDiscovery_NFDiscover\"}} {c}\n"
                );
            }
            s
        };
        let (a, b) = (parse("nrf", &text([0, 0, 0])), parse("nrf", &text([88, 100, 100])));
        let plain = rows(std::slice::from_ref(&a), std::slice::from_ref(&b), &|_, _| None);
        assert!((plain[0].p99_ms - 475.0).abs() < 1e-9, "{:?}", plain[0]);
        let client = |nf: &str, op: &str| {
            (nf == "nrf" && op == "Nnrf_NFDiscovery_NFDiscover").then_some((160.0, 310.0))
        };
        let r = &rows(&[a], &[b], &client)[0];
        assert!(r.p99_ms <= 310.0 && r.p99_ms >= 200.0 && r.bounded_by_client, "{r:?}");
        assert_eq!(r.p99_bucket_ms, (200.0, Some(500.0)));
        assert_eq!((r.client_p50_ms, r.client_p99_ms), (Some(160.0), Some(310.0)));
        assert!(r.p50_ms <= 160.0, "{r:?}");
    }

    #[test]
    fn procedures_map_to_the_nfs_operations() {
        let op = "Nnrf_NFDiscovery_NFDiscover";
        assert!(maps_to("NFDiscover-UDM", None, op));
        assert!(!maps_to("NFDeregister", None, op));
        assert!(maps_to("NFStatusUnSubscribe", None, "Nnrf_NFManagement_NFStatusUnsubscribe"));
        assert!(maps_to("AAR-I", None, "AAR") && maps_to("STR", None, "STR"));
        // Named: only the named operation, whatever the name says.
        let update = "Nnrf_NFManagement_NFUpdate";
        assert!(maps_to("NFHeartbeat", Some(update), update));
        assert!(!maps_to(
            "DELETE Subscription",
            Some("Nudr_DataRepository_Unsubscribe"),
            "Nudr_DataRepository_Delete"
        ));
    }

    #[test]
    fn a_seconds_p99_merges_every_operation_and_stays_under_the_clients() {
        let line = |op: &str, le: &str, c: u64| {
            format!("sbi_request_duration_seconds_bucket{{le=\"{le}\",operation=\"{op}\"}} {c}\n")
        };
        let at = |x: u64, y: u64| {
            let mut s = String::new();
            for (le, f) in [("0.001", 0), ("0.005", 1), ("+Inf", 1)] {
                s += &line("A", le, x * f);
                s += &line("B", le, y * f);
            }
            parse("nrf", &s)
        };
        // 100 answers in (1, 5] ms between the two scrapes, 60 of A and 40 of B.
        let (a, b) = (at(10, 10), at(70, 50));
        let p99 = p99_between(&a, &b, None).unwrap();
        assert!((p99 - (1.0 + 4.0 * 0.99)).abs() < 1e-9, "{p99}");
        assert!((p99_between(&a, &b, Some(2.0)).unwrap() - 1.99).abs() < 1e-9);
        assert_eq!(p99_between(&a, &a, None), None, "nothing answered");
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
