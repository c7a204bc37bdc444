#!/usr/bin/env bash
# SBI framework overhead in instructions per request (valgrind callgrind counts instructions, so
# the figure is repeatable on a noisy machine): the same h2load run against the full fivecore
# layer stack and against bare hyper. User-space instructions only; both do the same syscalls.
#   scripts/bench-sbi-instructions.sh [REQUESTS]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-20000}
command -v valgrind >/dev/null || { echo "install valgrind" >&2; exit 1; }
command -v h2load >/dev/null || { echo "install nghttp2-client for h2load" >&2; exit 1; }
cargo build --release -q -p fivecore-sbi --example bench_server
BIN=target/release/examples/bench_server
OUT=$(mktemp -d)
measure() { # mode port -> instructions for 1 connection setup + N requests, minus an idle run
    local mode=$1 port=$2 n=$3
    valgrind --tool=callgrind --callgrind-out-file="$OUT/$mode-$n.out" "$BIN" "$mode" "127.0.0.1:$port" \
        >"$OUT/$mode-$n.log" 2>&1 </dev/null &
    local pid=$!
    for _ in $(seq 100); do
        h2load -n 1 -c 1 "http://127.0.0.1:$port/nbench/v1/ping" 2>/dev/null | grep -q ' 1 succeeded' && break
        sleep 0.2
    done
    if [ "$n" -gt 0 ]; then
        h2load -c 16 -m 100 -n "$n" "http://127.0.0.1:$port/nbench/v1/ping" | grep -E '^requests:' >&2
    fi
    kill -TERM $pid; wait $pid 2>/dev/null || true
    awk '/^summary:|^totals:/ { print $2; exit }' "$OUT/$mode-$n.out"
}
for mode in ${MODES:-stack bare}; do
    base=$(measure $mode $((20000 + RANDOM % 20000)) 0)
    full=$(measure $mode $((20000 + RANDOM % 20000)) "$N")
    echo "$mode $(( (full - base) / N ))"
done | tee "$OUT/result.txt"
awk '{ v[$1] = $2 } END { printf "instructions per request: stack %d, bare %d, bare/stack %.3f\n", v["stack"], v["bare"], v["bare"] / v["stack"] }' "$OUT/result.txt"
