#!/usr/bin/env bash
# The same Nbsf_Management sequence against ANY Nbsf server (fivecore's BSF, Open5GS's bsfd, ...),
# given by its URL and its PID: CPU microseconds per request of that process, per operation, read
# from /proc/PID/stat before and after each phase, and its RSS after each phase (issue #28).
#
#   scripts/bench-bsf-compare.sh URL PID [BINDINGS] [GETS]
#       URL       the server's SBI root, h2c with prior knowledge: http://127.0.0.1:7002
#       PID       the server's process (its threads are pinned to SERVER_CPU, default 1;
#                 the clients run on CLIENT_CPU, default 0)
#       BINDINGS  default 131072; GETS default BINDINGS
#
# Phases, each on a server holding what the phases before it left:
#   create    POST pcfBindings, BINDINGS distinct bindings (UE IPv4 address, SUPI, GPSI, DNN,
#             S-NSSAI, the PCF's FQDN, endpoint and Diameter identity): the preload itself
#   discover  GET pcfBindings?ipv4Addr=, each binding's address (every answer must be 200)
#   replace   POST again of the same BINDINGS bindings (same UE address, DNN and S-NSSAI: the
#             server replaces the existing binding)
# The POSTs go through `fivecore bench replay` (the kit's HTTP/2 client, 4 connections x 16
# streams: each body differs, which h2load cannot send), the GETs through h2load
# (nghttp2-client, 4 connections x 16 streams). FIVECORE names the fivecore binary (default
# target/release/fivecore); the client runs on CLIENT_CPU, so its build does not change the figures.
#
# fivecore:  cargo build --profile bench -p fivecore-bsf --bin bsf_server
#            target/release/bsf_server 127.0.0.1:7002 "$(mktemp -d)" &
#            scripts/bench-bsf-compare.sh http://127.0.0.1:7002 $!
#            (or `fivecore bsf --data-dir D`, the same store settings, and its PID)
# Open5GS:   docs/BENCHMARKS.md, "Comparing with another BSF" (open5gs-nrfd, then open5gs-bsfd,
#            then this script with the bsfd's SBI address and `pidof open5gs-bsfd`).
set -euo pipefail
URL=${1:?usage: $0 URL PID [BINDINGS] [GETS]}
PID=${2:?usage: $0 URL PID [BINDINGS] [GETS]}
N=${3:-131072}
GETS=${4:-$N}
SERVER_CPU=${SERVER_CPU:-1}
CLIENT_CPU=${CLIENT_CPU:-0}
for t in h2load taskset awk; do
    command -v $t >/dev/null || { echo "install $t (h2load: nghttp2-client)" >&2; exit 1; }
done
[ -r "/proc/$PID/stat" ] || { echo "no process $PID" >&2; exit 1; }
URL=${URL%/}
BINDINGS="$URL/nbsf-management/v1/pcfBindings"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
HZ=$(getconf CLK_TCK)

taskset -a -cp "$SERVER_CPU" "$PID" >/dev/null
# utime + stime of every thread of the process, in clock ticks (fields 14 and 15; the command
# name in parentheses may hold spaces, so count from after it).
ticks() { sed 's/^.*) //' "/proc/$PID/stat" | awk '{ print $12 + $13 }'; }
rss_mb() { awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$PID/status"; }

# shellcheck source=scripts/bsf-requests.sh
. "$(dirname "$0")/bsf-requests.sh"
bsf_check_fivecore
posts() { bsf_post "$URL" "$1" "$CLIENT_CPU"; }

phase() { # name requests command... : runs it, prints CPU per request and RSS
    local name=$1 n=$2 before after result
    shift 2
    before=$(ticks)
    # A client that fails (set -e would end the script here without a word) says so.
    if ! result=$("$@"); then
        echo "$name: the client failed (answers: ${result:-none})" >&2
        exit 1
    fi
    after=$(ticks)
    awk -v name="$name" -v n="$n" -v t=$((after - before)) -v hz="$HZ" -v rss="$(rss_mb)" -v r="$result" \
        'BEGIN { printf "%-9s %8d requests  %7.2f s CPU  %7.1f us/request  RSS %s MB  (%s)\n",
                 name, n, t / hz, t / hz * 1e6 / n, rss, r }'
}

bsf_bodies 0 "$N" >"$OUT/create.jsonl"
bsf_urls 0 "$GETS" "$BINDINGS" >"$OUT/get.txt"
echo "server $PID on CPU $SERVER_CPU, clients on CPU $CLIENT_CPU; RSS before: $(rss_mb) MB"
phase create "$N" posts "$OUT/create.jsonl"
# h2load counts 2xx, and 204 (no binding) is one: the first and last bindings must be found.
for u in "$(head -1 "$OUT/get.txt")" "$(tail -1 "$OUT/get.txt")"; do
    printf '{"method":"GET","path":"%s"}\n' "${u#"$URL"}"
done >"$OUT/check.jsonl"
if ! found=$("$FIVECORE" bench replay --url "$URL" --requests "$OUT/check.jsonl" --expect 200 2>/dev/null); then
    echo "the first and last bindings were not both found (answers: ${found:-none})" >&2
    exit 1
fi
gets() {
    taskset -c "$CLIENT_CPU" h2load -c 4 -m 16 -n "$GETS" -i "$OUT/get.txt" |
        awk '/^status codes:/ { sub(/^status codes: /, ""); print }'
}
phase discover "$GETS" gets
phase replace "$N" posts "$OUT/create.jsonl"
