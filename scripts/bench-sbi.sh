#!/usr/bin/env bash
# SBI framework overhead: h2load against a trivial GET through the full fivecore layer stack and
# against bare hyper, in the same run, on the same pinned core. Prints both and the ratio.
#   scripts/bench-sbi.sh [ROUNDS] [REQUESTS]
# Needs h2load (Debian package nghttp2-client). Server on CPU 1, h2load on CPU 0.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
REQUESTS=${2:-400000}
command -v h2load >/dev/null || { echo "install nghttp2-client for h2load" >&2; exit 1; }
cargo build --release -q -p fivecore-sbi --example bench_server
BIN=target/release/examples/bench_server
taskset -c 1 "$BIN" stack 127.0.0.1:18080 & STACK=$!
taskset -c 1 "$BIN" bare 127.0.0.1:18081 & BARE=$!
trap 'kill $STACK $BARE 2>/dev/null' EXIT
sleep 1
# Server CPU time (user+system, clock ticks) from /proc: steal time on a noisy VM does not count,
# so CPU per request is a steadier figure than wall-clock requests per second.
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)
run() { # pid url -> "rps cpu_us_per_request"
    local t0 t1 out r
    t0=$(ticks "$1")
    out=$(taskset -c 0 h2load -c 16 -m 100 -n "$REQUESTS" "$2" 2>/dev/null)
    t1=$(ticks "$1")
    r=$(awk '/^finished in/ { gsub(",", "", $4); print $4 }' <<<"$out")
    awk -v r="$r" -v t="$((t1 - t0))" -v hz="$HZ" -v n="$REQUESTS" \
        'BEGIN { printf "%.0f %.2f", r, t * 1e6 / hz / n }'
}
S=http://127.0.0.1:18080/nbench/v1/ping
B=http://127.0.0.1:18081/nbench/v1/ping
run $STACK $S >/dev/null # warm-up
run $BARE $B >/dev/null
echo "round stack_rps bare_rps rps_ratio stack_cpu_us/req bare_cpu_us/req cpu_ratio(bare/stack)"
for i in $(seq "$ROUNDS"); do
    # Alternate the order so drift on a noisy machine hits both alike.
    if [ $((i % 2)) -eq 1 ]; then s=$(run $STACK $S); b=$(run $BARE $B)
    else b=$(run $BARE $B); s=$(run $STACK $S); fi
    read -r srps scpu <<<"$s"
    read -r brps bcpu <<<"$b"
    awk -v i="$i" -v sr="$srps" -v br="$brps" -v sc="$scpu" -v bc="$bcpu" \
        'BEGIN { printf "%d %s %s %.3f %s %s %.3f\n", i, sr, br, sr / br, sc, bc, bc / sc }'
done
