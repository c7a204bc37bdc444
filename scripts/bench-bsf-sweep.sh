#!/usr/bin/env bash
# Every BSF scenario of the kit, one after another, at one rate and binding count, then one
# summary table (docs/BENCHMARKS.md). NF on NF_CPU, generator on GEN_CPU, release build.
#
#   scripts/bench-bsf-sweep.sh RATE BINDINGS [DURATION] [OUT]   (defaults: 60 s, /tmp/bsf-sweep)
#   env: FIVECORE (binary), NF_CPU (1), GEN_CPU (0), WARMUP (10), SCENARIOS (default: all bsf-*)
set -uo pipefail
RATE=${1:?rate}
BINDINGS=${2:?bindings}
DURATION=${3:-60}
OUT=${4:-/tmp/bsf-sweep}
FIVECORE=${FIVECORE:-./target/release/fivecore}
SCENARIOS=${SCENARIOS:-$(ls scenarios/bsf-*.toml | xargs -n1 basename | sed 's/\.toml$//' | sort -V)}
mkdir -p "$OUT"
dirs=()
for s in $SCENARIOS; do
  echo "$(date +%T) $s" >&2
  "$FIVECORE" bench "$s" --rate "$RATE" --bindings "$BINDINGS" --duration "$DURATION" \
      --warmup "${WARMUP:-10}" --nf-cpus "${NF_CPU:-1}" --gen-cpus "${GEN_CPU:-0}" --quiet \
      --out "$OUT/$s" >"$OUT/$s.log" 2>&1 || echo "  $s: criteria missed or run failed (see $OUT/$s.log)" >&2
  [ -f "$OUT/$s/report.json" ] && dirs+=("$OUT/$s")
done
python3 "$(dirname "$0")/bench-summary.py" "${dirs[@]}"
