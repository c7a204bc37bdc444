#!/usr/bin/env bash
# UDR SLF lookups alone (issue #7: "SLF lookups over at least 10 million subscribers"), with
# h2load: N subscribers imported, the UDR pinned to NF_CPU and ready (identity index loaded),
# then rounds of closed-loop h2load on GEN_CPU over random subscribers. Prints per round:
# lookups/s, UDR CPU µs per lookup (/proc/PID/stat), lookups per second per UDR core, and the
# p50/p99/max latency of every lookup (h2load --log-file).
#
#   scripts/bench-slf-h2load.sh [N] [CONNS] [STREAMS] [SECONDS] [ROUNDS]   (10000000 4 8 20 3)
#   env: FIVECORE (binary), NF_CPU (1), GEN_CPU (0), PORT (17300), WORK (a directory with room
#        for the CSV and the store: about 2 GB at 10M), NF_TYPES (UDM)
set -euo pipefail
N=${1:-10000000}
CONNS=${2:-4}
STREAMS=${3:-8}
SECS=${4:-20}
ROUNDS=${5:-3}
FIVECORE=$(realpath "${FIVECORE:-./target/release/fivecore}")
NF_CPU=${NF_CPU:-1}
GEN_CPU=${GEN_CPU:-0}
PORT=${PORT:-17300}
command -v h2load >/dev/null || { echo "h2load is missing (apt-get install nghttp2-client)"; exit 1; }
work=$(mktemp -d -p "${WORK:-/tmp}" slf-h2load.XXXXXX)
cleanup() { [ -n "${udr:-}" ] && kill "$udr" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

# N subscribers: IMSI and MSISDN, four NF groups each.
python3 - "$N" >"$work/slf.csv" <<'PY'
import sys
n = int(sys.argv[1])
w = sys.stdout.write
w("subscriberIds,UDM,AUSF,PCF,UDR\n")
for i in range(n):
    g = i % 4
    w(f"imsi-00101{i:010d};msisdn-336{i:08d},udm-{g},ausf-{g},pcf-{g},udr-{g}\n")
PY
t0=$(date +%s.%N)
"$FIVECORE" udr import --kind slf --data-dir "$work/udr" "$work/slf.csv" >"$work/import.log" 2>&1
echo "import: $N subscribers in $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s, store $(du -sm "$work/udr" | cut -f1) MB"
rm -f "$work/slf.csv"

taskset -c "$NF_CPU" "$FIVECORE" udr --listen "127.0.0.1:$PORT" --data-dir "$work/udr" >"$work/udr.log" 2>&1 &
udr=$!
t0=$(date +%s.%N)
until curl -sf --http2-prior-knowledge -o /dev/null "http://127.0.0.1:$PORT/healthz/ready"; do
  kill -0 "$udr" 2>/dev/null || { cat "$work/udr.log"; exit 1; }
  sleep 0.2
done
echo "ready (identity index loaded) after $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s, UDR RSS $(awk '/VmRSS/ {print int($2/1024)}' /proc/$udr/status) MB"

# 200,000 random subscribers, a quarter of them by MSISDN.
python3 - "$N" "$PORT" "${NF_TYPES:-UDM}" >"$work/uris.txt" <<'PY'
import random, sys
n, port, types = int(sys.argv[1]), sys.argv[2], sys.argv[3]
rnd = random.Random(7)
for _ in range(200000):
    i = rnd.randrange(n)
    sid = f"msisdn-336{i:08d}" if rnd.random() < 0.25 else f"imsi-00101{i:010d}"
    print(f"http://127.0.0.1:{port}/nudr-group-id-map/v1/nf-group-ids?nf-type={types}&subscriberId={sid}")
PY

ticks() { awk '{print $14 + $15}' "/proc/$udr/stat"; }
for r in $(seq "$ROUNDS"); do
  c0=$(ticks)
  taskset -c "$GEN_CPU" h2load -c "$CONNS" -m "$STREAMS" -D "$SECS" -i "$work/uris.txt" \
      --log-file="$work/lat$r.tsv" >"$work/h2load$r.txt" 2>&1 || true
  c1=$(ticks)
  python3 - "$work/h2load$r.txt" "$work/lat$r.tsv" "$r" "$c0" "$c1" "$(getconf CLK_TCK)" <<'PY'
import re, sys
out, log, r, c0, c1, hz = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
t = open(out).read()
rps = float(re.search(r"finished in [\d.]+s, ([\d.]+) req/s", t).group(1))
lat, ok = [], 0
for line in open(log):
    f = line.split("\t")
    if len(f) >= 3:
        lat.append(int(f[2]))
        ok += f[1].startswith("2")
lat.sort()
pct = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] / 1000
cpu_us = (c1 - c0) * 1e6 / hz / max(ok, 1)
print(f"round {r}: {rps:9.0f} lookups/s  {ok} 2xx of {len(lat)}  UDR CPU {cpu_us:5.1f} µs/lookup "
      f"= {1e6 / cpu_us:7.0f} lookups/s per core  p50 {pct(0.5):.3f} ms  p99 {pct(0.99):.3f} ms  max {lat[-1] / 1000:.1f} ms")
PY
done
