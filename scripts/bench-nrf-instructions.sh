#!/usr/bin/env bash
# Instructions per NRF discovery under callgrind (repeatable on a noisy machine): the NRF under
# valgrind, six SMF profiles registered, then h2load sends N discoveries; prints
# (instructions of N + 64 discoveries - instructions of 64) / N.
#   scripts/bench-nrf-instructions.sh [BINARY] [N]   (defaults: target/release/fivecore, 20000)
# ALLOWED='"SMF","NEF","AF","AMF"' gives each profile and its service that allowedNfTypes (the
# requester, an AMF, is allowed), as the reference's PCF profiles restrict their services.
set -euo pipefail
ALLOWED=${ALLOWED:-}
allowed() { [ -n "$ALLOWED" ] && printf '"allowedNfTypes":[%s],' "$ALLOWED" || true; }
BIN=${1:-target/release/fivecore}
N=${2:-20000}
for t in valgrind h2load curl; do command -v $t >/dev/null || { echo "install $t" >&2; exit 1; }; done
OUT=$(mktemp -d)
run() { # requests -> instructions
    local n=$1 port=$((30000 + RANDOM % 20000)) data
    data=$(mktemp -d -p "$OUT")
    valgrind --tool=callgrind --callgrind-out-file="$OUT/$n.out" "$BIN" nrf --listen "127.0.0.1:$port" \
        --data-dir "$data" >"$OUT/$n.log" 2>&1 </dev/null &
    local pid=$!
    for _ in $(seq 200); do curl -sf "http://127.0.0.1:$port/healthz/ready" >/dev/null && break; sleep 0.2; done
    for i in 1 2 3 4 5 6; do
        local id="5b1d7a6e-2c3f-4d4e-8f90-a1b2c3d4e5f$i"
        curl -sf -X PUT -H 'content-type: application/json' \
            "http://127.0.0.1:$port/nnrf-nfm/v1/nf-instances/$id" \
            -d "{\"nfInstanceId\":\"$id\",$(allowed)\"nfType\":\"SMF\",\"nfStatus\":\"REGISTERED\",\"ipv4Addresses\":[\"10.0.0.$i\"],\"heartBeatTimer\":3600,\"nfServices\":[{$(allowed)\"serviceInstanceId\":\"s$i\",\"serviceName\":\"nsmf-pdusession\",\"versions\":[{\"apiVersionInUri\":\"v1\",\"apiFullVersion\":\"1.0.0\"}],\"scheme\":\"http\",\"nfServiceStatus\":\"REGISTERED\"}]}" >/dev/null
    done
    h2load -c 4 -m 16 -n "$n" \
        "http://127.0.0.1:$port/nnrf-disc/v1/nf-instances?target-nf-type=SMF&requester-nf-type=AMF" \
        | grep -E '^requests:' >&2
    kill -TERM $pid; wait $pid 2>/dev/null || true
    awk '/^summary:|^totals:/ { print $2; exit }' "$OUT/$n.out"
}
base=$(run 64)
total=$(run $((N + 64)))
echo "$(( (total - base) / N )) instructions per discovery ($BIN)"
rm -rf "$OUT"
