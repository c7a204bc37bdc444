#!/usr/bin/env bash
# Cross-check of the benchmark kit against h2load (issue #4, docs/BENCHMARKS.md): the same HTTP/2
# operation against the same NRF, kit and h2load alternating, each pinned to the generator CPU.
#
# - open loop: the same fixed rate (h2load --rps). h2load sends each connection's requests in
#   bursts, so only the throughput is comparable, not the latency.
# - closed loop: the same connections and requests outstanding (h2load -c C -m M, the kit
#   --concurrency C*M over C connections), no rate: throughput and latency must both agree.
#
# Prints one line per run, then the medians over the rounds.
#
#   scripts/bench-xcheck.sh [RATE] [ROUNDS] [SECONDS]     (defaults 2000 3 20)
#   env: FIVECORE (binary), NF_CPU (1), GEN_CPU (0), PORT (17100), QUERY (discovery query),
#        MODE (open, closed or both; default both), STREAMS (closed loop: outstanding per
#        connection, h2load -m; default 16)
set -euo pipefail
RATE=${1:-2000}
ROUNDS=${2:-3}
SECS=${3:-20}
FIVECORE=${FIVECORE:-./target/release/fivecore}
NF_CPU=${NF_CPU:-1}
GEN_CPU=${GEN_CPU:-0}
PORT=${PORT:-17100}
QUERY=${QUERY:-target-nf-type=UDM&requester-nf-type=AMF}
MODE=${MODE:-both}
STREAMS=${STREAMS:-16}
CONNS=4
case "$MODE" in open|closed|both) ;; *) echo "MODE must be open, closed or both"; exit 2;; esac
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
outstanding=$((CONNS * STREAMS))
url="http://127.0.0.1:$PORT/nnrf-disc/v1/nf-instances?$QUERY"

# One kit run; its line goes to stdout and to $work/<tag>.tsv (req/s, mean ms) for the medians.
kit() {
  local tag=$1 r=$2; shift 2
  taskset -c "$GEN_CPU" "$FIVECORE" bench "$work/xcheck.toml" --target "nrf=http://127.0.0.1:$PORT" \
      --gen-cpus "$GEN_CPU" --quiet --out "$work/$tag$r" "$@" >"$work/$tag$r.log" 2>&1 || cat "$work/$tag$r.log"
  python3 - "$work/$tag$r/report.json" "$r" "$tag" >>"$work/$tag.tsv" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); p = r["procedures"][0]; l = p["latency"]
print(f"{r['totals']['achieved_tps']}\t{l['mean_ms']}\t{l['p50_ms']}")
print(f"round {sys.argv[2]} {sys.argv[3]:<13} {r['totals']['achieved_tps']:9.1f} req/s  mean {l['mean_ms']:.3f} ms  p50 {l['p50_ms']:.3f} ms  p99 {l['p99_ms']:.3f} ms  gen CPU {r['generator']['cpu_pct']:.0f}%  ({r['load_mode']}, peak outstanding {r['generator']['peak_outstanding']})", file=sys.stderr)
PY
}

# One h2load run; its line goes to stdout and to $work/<tag>.tsv.
h2() {
  local tag=$1 r=$2; shift 2
  taskset -c "$GEN_CPU" h2load "$@" "$url" >"$work/$tag$r.txt" 2>&1 || true
  python3 - "$work/$tag$r.txt" "$r" "$tag" >>"$work/$tag.tsv" <<'PY'
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
print(f"{rps}\t{ms(m.group(3))}\t")
print(f"round {sys.argv[2]} {sys.argv[3]:<13} {rps:9.1f} req/s  mean {ms(m.group(3)):.3f} ms  (min {ms(m.group(1)):.3f}, max {ms(m.group(2)):.3f}, sd {ms(m.group(4)):.3f}; {ok} 2xx)", file=sys.stderr)
PY
}

for r in $(seq "$ROUNDS"); do
  if [ "$MODE" != closed ]; then
    kit kit-open "$r" 2>&1
    h2 h2load-open "$r" -c "$CONNS" -m 100 --rps "$per_conn" -n "$total" 2>&1
  fi
  if [ "$MODE" != open ]; then
    kit kit-closed "$r" --concurrency "$outstanding" 2>&1
    h2 h2load-closed "$r" -c "$CONNS" -m "$STREAMS" -D "$SECS" --warm-up-time 2 2>&1
  fi
done

echo "medians over $ROUNDS rounds (closed loop: $CONNS connections x $STREAMS = $outstanding outstanding):"
for tag in kit-open h2load-open kit-closed h2load-closed; do
  [ -f "$work/$tag.tsv" ] || continue
  python3 - "$work/$tag.tsv" "$tag" <<'PY'
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().splitlines() if l.strip()]
rps = statistics.median(float(x[0]) for x in rows)
mean = statistics.median(float(x[1]) for x in rows)
print(f"  {sys.argv[2]:<13} {rps:9.1f} req/s  mean {mean:.3f} ms")
PY
done
if [ "$MODE" != open ]; then
  python3 - "$work/kit-closed.tsv" "$work/h2load-closed.tsv" <<'PY'
import statistics, sys
def med(path, i):
    return statistics.median(float(l.split("\t")[i]) for l in open(path).read().splitlines() if l.strip())
for name, i in (("throughput", 0), ("mean latency", 1)):
    k, h = med(sys.argv[1], i), med(sys.argv[2], i)
    d = (k - h) / h * 100
    print(f"  closed loop {name}: kit {k:.3f} vs h2load {h:.3f} ({d:+.1f} %){'' if abs(d) <= 10 else '  MORE THAN 10 % APART'}")
PY
fi
