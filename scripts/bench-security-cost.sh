#!/usr/bin/env bash
# What access tokens and mutual TLS cost the NF per request (issue #26): rounds of the NRF
# discovery mix (nrf-5k) and the BSF S9 mix (bsf-s9-54k-25m) in four modes each — plain,
# --oauth2, --tls, --oauth2 --tls — the modes' order turning every round so that none always
# runs first or last, at one fixed rate per mix, the NF on NF_CPU and the generator on GEN_CPU.
# Prints the NF's CPU µs per transaction of every run, then per mix and mode the median over
# the rounds and its difference from plain (docs/bench.md, "Access tokens and TLS").
#
#   scripts/bench-security-cost.sh [ROUNDS] [NRF_RATE] [BSF_RATE] [DURATION] [OUT]
#       defaults: 3 rounds, 2000/s, 5000/s, 30 s, bench-out/security-cost-<UTC time>
#   env: FIVECORE (binary, default ./target/release/fivecore), NF_CPU (1), GEN_CPU (0),
#        WARMUP (5), BINDINGS (BSF preload, 100000), MIXES ("nrf bsf"), EXTRA (more flags
#        for every run, e.g. "--max-p99-ms 1000" for a debug build)
set -uo pipefail
ROUNDS=${1:-3}
NRF_RATE=${2:-2000}
BSF_RATE=${3:-5000}
DURATION=${4:-30}
OUT=${5:-bench-out/security-cost-$(date -u +%Y%m%dT%H%M%SZ)}
FIVECORE=${FIVECORE:-./target/release/fivecore}
MODES=(plain oauth2 tls oauth2+tls)
mkdir -p "$OUT"

flags() { # the kit's flags of a mode
  case "$1" in
    plain) ;;
    oauth2) echo --oauth2 ;;
    tls) echo --tls ;;
    oauth2+tls) echo --oauth2 --tls ;;
  esac
}

for r in $(seq 1 "$ROUNDS"); do
  for mix in ${MIXES:-nrf bsf}; do
    case "$mix" in
      nrf) args=(nrf-5k --rate "$NRF_RATE") ;;
      bsf) args=(bsf-s9-54k-25m --rate "$BSF_RATE" --bindings "${BINDINGS:-100000}") ;;
      *) echo "unknown mix $mix (nrf, bsf)" >&2; exit 2 ;;
    esac
    for k in 0 1 2 3; do
      mode=${MODES[$(( (k + r - 1) % 4 ))]}
      dir="$OUT/$mix-$mode-r$r"
      echo "$(date -u +%T) round $r: $mix $mode" >&2
      # shellcheck disable=SC2046,SC2086
      "$FIVECORE" bench "${args[@]}" --duration "$DURATION" --warmup "${WARMUP:-5}" \
          --nf-cpus "${NF_CPU:-1}" --gen-cpus "${GEN_CPU:-0}" $(flags "$mode") ${EXTRA:-} \
          --quiet --out "$dir" >"$dir.log" 2>&1
      case $? in
        0) ;;
        1) echo "  $mix $mode: success criteria missed (figures kept; see $dir.log)" >&2 ;;
        *) echo "  $mix $mode: the run failed (see $dir.log)" >&2; tail -n 5 "$dir.log" >&2 ;;
      esac
    done
  done
done

python3 - "$OUT" <<'EOF'
import json, pathlib, re, statistics, sys

out = pathlib.Path(sys.argv[1])
runs = {}
print("| run | mode (report) | achieved TPS | NF CPU µs/tx | worst procedure p99 ms | criteria |")
print("|---|---|--:|--:|--:|---|")
for d in sorted(p for p in out.iterdir() if (p / "report.json").exists()):
    m = re.fullmatch(r"(\w+)-(.+)-r(\d+)", d.name)
    if not m:
        continue
    r = json.loads((d / "report.json").read_text())
    us = r["totals"].get("nf_cpu_us_per_tx")
    p99 = max((p["latency"]["p99_ms"] for p in r["procedures"] if p["sent"]), default=float("nan"))
    mode = r.get("security", {}).get("mode", "?")
    if mode != m.group(2):
        print(f"(!) {d.name}: the report says mode {mode}", file=sys.stderr)
    print(f"| {d.name} | {mode} | {r['totals']['achieved_tps']:.1f} | "
          f"{us if us is None else round(us, 2)} | {p99:.2f} | "
          f"{'pass' if r['criteria_passed'] else 'FAIL'} |")
    if us is not None:
        runs.setdefault((m.group(1), mode), []).append(us)
print()
print("| mix | mode | rounds | median NF CPU µs/tx | vs plain µs | vs plain % |")
print("|---|---|--:|--:|--:|--:|")
for mix in ("nrf", "bsf"):
    base = runs.get((mix, "plain"))
    base_med = statistics.median(base) if base else None
    for mode in ("plain", "oauth2", "tls", "oauth2+tls"):
        v = runs.get((mix, mode))
        if not v:
            continue
        med = statistics.median(v)
        dus = "" if base_med is None else f"{med - base_med:+.2f}"
        dpc = "" if not base_med else f"{100 * (med - base_med) / base_med:+.1f}"
        print(f"| {mix} | {mode} | {len(v)} | {med:.2f} | {dus} | {dpc} |")
EOF
