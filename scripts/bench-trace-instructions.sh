#!/usr/bin/env bash
# What traces cost the SBI server, in instructions per request (valgrind callgrind: repeatable on a
# noisy machine): the bench_server example (a GET through the whole layer stack) under callgrind,
# loaded by the client_bench example (16 requests in flight), in four modes:
#   off         no [telemetry.otlp], no traceparent         (the default: must cost nothing)
#   propagate   no [telemetry.otlp], every request with a traceparent (passed on as it came)
#   otlp        a server span per request, exported to a stand-in collector (python3, 200 to all)
#   otlp-parent the same, each request continuing the caller's trace
# Each figure is (instructions at N requests - instructions at 0) / N.
#   scripts/bench-trace-instructions.sh [REQUESTS] [BIN_DIR]
# BIN_DIR holds bench_server and client_bench (default: built here with the bench profile).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-20000}
BIN=${2:-}
command -v valgrind >/dev/null || { echo "install valgrind" >&2; exit 1; }
if [ -z "$BIN" ]; then
    cargo build --profile bench -q -p fivecore-sbi --example bench_server --example client_bench
    BIN=${CARGO_TARGET_DIR:-target}/release/examples
fi
OUT=$(mktemp -d)
SINK_PORT=$((40000 + RANDOM % 10000))
python3 - "$SINK_PORT" <<'PY' &
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200); self.send_header("content-length", "0"); self.end_headers()
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
SINK=$!
trap 'kill $SINK 2>/dev/null || true' EXIT
TP=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
measure() { # mode n -> server instructions
    local mode=$1 n=$2 port=$((20000 + RANDOM % 20000)) otlp="" tp=""
    case $mode in otlp*) otlp="http://127.0.0.1:$SINK_PORT" ;; esac
    case $mode in propagate|otlp-parent) tp=$TP ;; esac
    OTLP_ENDPOINT=$otlp valgrind --tool=callgrind --callgrind-out-file="$OUT/$mode-$n.out" \
        "$BIN/bench_server" stack "127.0.0.1:$port" >"$OUT/$mode-$n.log" 2>&1 </dev/null &
    local pid=$!
    for _ in $(seq 150); do
        "$BIN/client_bench" "http://127.0.0.1:$port/nbench/v1/ping" 1 1 2>/dev/null && break
        sleep 0.2
    done
    [ "$n" -gt 0 ] && TRACEPARENT=$tp "$BIN/client_bench" "http://127.0.0.1:$port/nbench/v1/ping" "$n" 16
    # Let a last batch of spans go out before the process ends.
    [ -n "$otlp" ] && sleep 2
    kill -TERM $pid; wait $pid 2>/dev/null || true
    awk '/^summary:|^totals:/ { print $2; exit }' "$OUT/$mode-$n.out"
}
for mode in ${MODES:-off propagate otlp otlp-parent}; do
    base=$(measure "$mode" 0)
    full=$(measure "$mode" "$N")
    echo "$mode $(( (full - base) / N ))"
done | tee "$OUT/result.txt"
