#!/usr/bin/env python3
"""One Markdown table for several `fivecore bench` runs (docs/BENCHMARKS.md).

    scripts/bench-summary.py OUT_DIR [OUT_DIR ...]

Each OUT_DIR is a `--out` directory holding report.json. Prints, per run: scenario, offered
and achieved TPS, NF CPU microseconds per transaction, TPS per NF core used, generator CPU,
whether the generator was saturated, the host's steal (and how many measured seconds were
quiet, with their p99 over all procedures), the criteria verdict, then per procedure p50/p99 (ms),
the NFs' own latency per operation (from their /metrics, when the report has it), and last the
command that produced each run.
"""
import json
import sys
from pathlib import Path


def load(d):
    with open(Path(d) / "report.json") as f:
        return json.load(f)


def main(dirs):
    if not dirs:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    runs = [(d, load(d)) for d in dirs]
    print("| run | scenario | offered TPS | achieved TPS | NF µs/tx | TPS per NF core | gen CPU | host steal (quiet s, their p99) | criteria |")
    print("|---|---|--:|--:|--:|--:|--:|---|---|")
    for d, r in runs:
        t, g = r["totals"], r["generator"]
        gen = f"{g['cpu_pct']:.0f} %" + (" (saturated)" if g.get("saturated") else "")
        verdict = "pass" if r.get("criteria_passed") else "FAIL"
        h = r.get("host")
        steal = "n/a"
        if h:
            q = h.get("quiet_latency")
            steal = (f"{h['steal_pct_mean']:.1f} % ({h['quiet_seconds']}/{h['measured_seconds']} s"
                     + (f", {q['p99_ms']:.2f} ms)" if q else ")"))
        print(
            f"| {Path(d).name} | {r['scenario']} | {r['rate']:.0f} | {t['achieved_tps']:.0f} "
            f"| {t['nf_cpu_us_per_tx']:.1f} | {t['tps_per_core']:.0f} | {gen} | {steal} | {verdict} |"
        )
    print()
    print("| run | procedure | share | p50 ms | p99 ms | max ms | success |")
    print("|---|---|--:|--:|--:|--:|--:|")
    for d, r in runs:
        for p in r["procedures"]:
            lat = p["latency"]
            print(
                f"| {Path(d).name} | {p['name']} | {p['share_pct']:.1f} % | {lat['p50_ms']:.2f} "
                f"| {lat['p99_ms']:.2f} | {lat['max_ms']:.1f} | {100 * p['success_rate']:.3f} % |"
            )
    own = [(d, l) for d, r in runs for l in r.get("nf_latency") or []]
    if own:
        print()
        print(
            "| run | NF | operation (own latency) | answers | p50 ms | p99 ms | <= 5 ms "
            "| less waits on other NFs: p50 ms | p99 ms | <= 5 ms |"
        )
        print("|---|---|---|--:|--:|--:|--:|--:|--:|--:|")
        for d, l in own:
            x = l.get("excl_waits")
            less = (
                f"{x['p50_ms']:.3f} | {x['p99_ms']:.2f} | {x['under_5ms_pct']:.2f} %" if x else "- | - | -"
            )
            print(
                f"| {Path(d).name} | {l['nf']} | {l['operation']} | {l['count']} | {l['p50_ms']:.3f} "
                f"| {l['p99_ms']:.2f} | {l['under_5ms_pct']:.2f} % | {less} |"
            )
    print()
    for d, r in runs:
        pre = r.get("preload") or {}
        b = pre.get("bindings")
        extra = f" (preload: {b['count']} bindings in {b['seconds']:.0f} s, {b['db_mb'] / 1024:.1f} GiB)" if b else ""
        print(f"- {Path(d).name}: `{r['command']}`{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
