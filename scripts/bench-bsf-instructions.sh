#!/usr/bin/env bash
# Instructions per Nbsf request under callgrind, per operation (repeatable on a noisy machine):
# PRELOAD bindings POSTed to the BSF running natively, then the BSF under callgrind on a copy of
# that store, and N requests of each phase with callgrind's counters dumped after each:
#   create    POST of N new bindings
#   discover  GET pcfBindings?ipv4Addr= of N preloaded bindings (h2load, 4 x 16 streams)
#   replace   POST again of N preloaded bindings (same UE address, DNN, S-NSSAI: replaced)
# The POSTs go through `fivecore bench replay` (4 connections x 16 streams), the binary FIVECORE
# (default target/release/fivecore).
# Each figure is the phase's instructions (every thread of the BSF) / N.
#   scripts/bench-bsf-instructions.sh [BINARY] [N] [PRELOAD] [BSF-SECTION-AS-JSON]
#   (defaults: target/release/bsf_server, 20000, 131072, none)
# BINARY is `cargo build --profile bench -p fivecore-bsf --bin bsf_server`'s (bsf_server
# ADDR DATA_DIR [BSF-SECTION-AS-JSON]). STORE=DIR keeps the preloaded store in DIR for another run
# (a binary of another build, same schema) instead of preloading again.
set -euo pipefail
BIN=${1:-target/release/bsf_server}
N=${2:-20000}
PRELOAD=${3:-131072}
CONF=${4:-}
for t in valgrind callgrind_control h2load curl; do
    command -v $t >/dev/null || { echo "install $t (h2load: nghttp2-client)" >&2; exit 1; }
done
[ "$N" -le "$PRELOAD" ] || { echo "N must not exceed PRELOAD" >&2; exit 1; }
# shellcheck source=scripts/bsf-requests.sh
. "$(dirname "$0")/bsf-requests.sh"
bsf_check_fivecore
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

wait_ready() { # port pid
    for _ in $(seq 600); do
        curl -sf "http://127.0.0.1:$1/healthz/ready" >/dev/null && return 0
        kill -0 "$2" 2>/dev/null || { echo "the BSF exited" >&2; return 1; }
        sleep 0.5
    done
    echo "the BSF did not become ready" >&2
    return 1
}

# NAME ROOT REQUESTS: the POSTs, their answers on stderr; a request without an answer ends the run
# (a phase's count would be wrong).
posts() {
    local r
    r=$(bsf_post "$2" "$3") || { echo "$1: the client failed (answers: ${r:-none})" >&2; exit 1; }
    echo "$1: $r" >&2
}

STORE=${STORE:-}
if [ -z "$STORE" ] || [ ! -e "$STORE/bsf.db" ]; then
    STORE=${STORE:-$OUT/preloaded}
    mkdir -p "$STORE"
    port=$((30000 + RANDOM % 20000))
    "$BIN" "127.0.0.1:$port" "$STORE" ${CONF:+"$CONF"} >"$OUT/preload.log" 2>&1 </dev/null &
    pid=$!
    wait_ready $port $pid
    bsf_bodies 0 "$PRELOAD" >"$OUT/preload.jsonl"
    posts preload "http://127.0.0.1:$port" "$OUT/preload.jsonl"
    kill -TERM $pid; wait $pid 2>/dev/null || true
fi

data="$OUT/data"
cp -a "$STORE" "$data"
port=$((30000 + RANDOM % 20000))
root="http://127.0.0.1:$port"
url="$root/nbsf-management/v1/pcfBindings"
valgrind --tool=callgrind --callgrind-out-file="$OUT/cg.out" "$BIN" "127.0.0.1:$port" "$data" ${CONF:+"$CONF"} \
    >"$OUT/bsf.log" 2>&1 </dev/null &
pid=$!
wait_ready $port $pid
bsf_bodies "$PRELOAD" "$N" >"$OUT/create.jsonl"
bsf_urls 0 "$N" "$url" >"$OUT/get.txt"
bsf_bodies 0 "$N" >"$OUT/replace.jsonl"

dump() { # -> instructions since the last dump
    # Callgrind takes the command when the program runs, so a request wakes an idle BSF.
    callgrind_control -d "$pid" >/dev/null &
    local ctl=$!
    sleep 1
    curl -s "http://127.0.0.1:$port/healthz/live" >/dev/null || true
    wait $ctl
    local f
    f=$(ls -t "$OUT"/cg.out.* | head -1)
    awk '/^summary:|^totals:/ { print $2; exit }' "$f"
}
dump >/dev/null
posts create "$root" "$OUT/create.jsonl"
create=$(dump)
h2load -c 4 -m 16 -n "$N" -i "$OUT/get.txt" | grep -E '^(requests|status codes):' >&2
discover=$(dump)
posts replace "$root" "$OUT/replace.jsonl"
replace=$(dump)
kill -TERM $pid; wait $pid 2>/dev/null || true
echo "instructions per request ($BIN, $PRELOAD preloaded, $N each):" \
    "create $((create / N)), discover $((discover / N)), replace $((replace / N))"
