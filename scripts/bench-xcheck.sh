#!/usr/bin/env bash
# Cross-check of the benchmark kit against h2load (issue #4, docs/BENCHMARKS.md): the same HTTP/2
# operation at the same fixed rate against the same NRF, kit and h2load alternating, each pinned
# to the generator CPU. Prints one line per run: requests/s, mean and p50 latency (ms).
#
#   scripts/bench-xcheck.sh [RATE] [ROUNDS] [SECONDS]     (defaults 2000 3 20)
#   env: FIVECORE (binary), NF_CPU (1), GEN_CPU (0), PORT (17100), QUERY (discovery query)
set -euo pipefail
RATE=${1:-2000}
ROUNDS=${2:-3}
SECS=${3:-20}
FIVECORE=${FIVECORE:-./target/release/fivecore}
NF_CPU=${NF_CPU:-1}
GEN_CPU=${GEN_CPU:-0}
PORT=${PORT:-17100}
QUERY=${QUERY:-target-nf-type=UDM&requester-nf-type=AMF}
CONNS=4
command -v h2load >/dev/null || { echo "h2load is missing (apt-get install nghttp2-client)"; exit 1; }
work=$(mktemp -d)
cleanup() { [ -n "${nrf:-}" ] && kill "$nrf" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

taskset -c "$NF_CPU" "$FIVECORE" nrf --listen "127.0.0.1:$PORT" --data-dir "$work/nrf" >"$work/nrf.log" 2>&1 &
nrf=$!
for _ in $(seq 50); do curl -s --http2-prior-knowledge -o /dev/null "http://127.0.0.1:$PORT/nnrf-nfm/v1/nf-instances" && break; sleep 0.2; done

# The scenario, at this rate and duration, with the query given.
python3 - "$RATE" "$SECS" "$QUERY" scripts/bench-xcheck-disc.toml >"$work/xcheck.toml" <<'PY'
import re, sys
rate, secs, query, path = sys.argv[1:5]
t = open(path).read()
t = re.sub(r"(?m)^rate = .*", f"rate = {rate}", t)
t = re.sub(r"(?m)^tps = .*", f"tps = {rate}", t)
t = re.sub(r"(?m)^duration_s = .*", f"duration_s = {secs}", t)
t = re.sub(r"(?m)^query = .*", lambda m: f'query = "{query}"', t)
print(t, end="")
PY
# Preload (the kit registers the profiles on its first run; later runs register again: replace).
"$FIVECORE" bench "$work/xcheck.toml" --target "nrf=http://127.0.0.1:$PORT" --duration 1 --warmup 0 \
    --quiet --out "$work/preload" >/dev/null 2>&1 || true

per_conn=$(python3 -c "print($RATE / $CONNS)")
total=$(python3 -c "print(int($RATE * $SECS))")
for r in $(seq "$ROUNDS"); do
  taskset -c "$GEN_CPU" "$FIVECORE" bench "$work/xcheck.toml" --target "nrf=http://127.0.0.1:$PORT" \
      --gen-cpus "$GEN_CPU" --quiet --out "$work/kit$r" >"$work/kit$r.log" 2>&1 || cat "$work/kit$r.log"
  python3 - "$work/kit$r/report.json" "$r" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); p = r["procedures"][0]; l = p["latency"]
print(f"round {sys.argv[2]} kit    {r['totals']['achieved_tps']:9.1f} req/s  mean {l['mean_ms']:.3f} ms  p50 {l['p50_ms']:.3f} ms  p99 {l['p99_ms']:.3f} ms  gen CPU {r['generator']['cpu_pct']:.0f}%  send lag max {r['generator']['max_lag_ms']:.2f} ms")
PY
  taskset -c "$GEN_CPU" h2load -c "$CONNS" -m 100 --rps "$per_conn" -n "$total" \
      "http://127.0.0.1:$PORT/nnrf-disc/v1/nf-instances?$QUERY" >"$work/h2load$r.txt" 2>&1 || true
  python3 - "$work/h2load$r.txt" "$r" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
rps = float(re.search(r"finished in [\d.]+s, ([\d.]+) req/s", t).group(1))
m = re.search(r"time for request:\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", t)
def ms(v):
    for unit, f in (("us", 1e-3), ("ms", 1.0), ("s", 1e3)):
        if v.endswith(unit):
            return float(v[: -len(unit)]) * f
    return float(v)
ok = re.search(r"status codes: (\d+) 2xx", t).group(1)
print(f"round {sys.argv[2]} h2load {rps:9.1f} req/s  mean {ms(m.group(3)):.3f} ms  (min {ms(m.group(1)):.3f}, max {ms(m.group(2)):.3f}, sd {ms(m.group(4)):.3f}; {ok} 2xx)")
PY
done
