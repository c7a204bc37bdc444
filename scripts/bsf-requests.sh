# Nbsf requests of the BSF measurement scripts (sourced by bench-bsf-compare.sh and
# bench-bsf-instructions.sh). Binding i: UE 10.x.y.z, a SUPI and GPSI of its own, DNN
# "internet", S-NSSAI 1/000001, one of two PCFs (FQDN, SBI endpoint, Diameter identity).
#
# The POSTs go through `fivecore bench replay` (docs/bench.md, "Replaying a request file"), the
# kit's own HTTP/2 client: each body differs, which h2load cannot send, and Debian 12's curl 7.88
# fails every request after the first on a reused h2c prior-knowledge connection
# (curl/curl#10634). The binary is $FIVECORE (default target/release/fivecore; any build of it
# will do: the client is not what is measured).
FIVECORE=${FIVECORE:-target/release/fivecore}

bsf_check_fivecore() {
    "$FIVECORE" bench replay --help >/dev/null 2>&1 && return 0
    echo "no fivecore with 'bench replay' at $FIVECORE: build it (cargo build --release -p fivecore)" \
        "or set FIVECORE" >&2
    return 1
}

# FIRST COUNT -> the POSTs of those bindings, one request a line (JSON Lines, the format of
# `fivecore bench replay --requests`).
bsf_bodies() {
    awk -v first="$1" -v n="$2" 'BEGIN {
        for (i = first; i < first + n; i++) {
            ip = sprintf("10.%d.%d.%d", 1 + int(i / 65536), int(i / 256) % 256, i % 256)
            pcf = sprintf("pcf%d.example.org", i % 2)
            printf "{\"method\":\"POST\",\"path\":\"/nbsf-management/v1/pcfBindings\",\"body\":" \
                "{\"supi\":\"imsi-00101%010d\",\"gpsi\":\"msisdn-3361%07d\"," \
                "\"ipv4Addr\":\"%s\",\"dnn\":\"internet\"," \
                "\"snssai\":{\"sst\":1,\"sd\":\"000001\"}," \
                "\"pcfFqdn\":\"%s\",\"pcfIpEndPoints\":[{\"ipv4Address\":\"192.0.2.%d\",\"port\":7777}]," \
                "\"pcfDiamHost\":\"%s\",\"pcfDiamRealm\":\"example.org\"}}\n",
                i, i, ip, pcf, 1 + i % 2, pcf
        }
    }'
}

# FIRST COUNT BINDINGS_URL -> Discovery URLs by those bindings' IPv4 addresses, one a line.
bsf_urls() {
    awk -v first="$1" -v n="$2" -v url="$3" 'BEGIN {
        for (i = first; i < first + n; i++)
            printf "%s?ipv4Addr=10.%d.%d.%d\n", url, 1 + int(i / 65536), int(i / 256) % 256, i % 256
    }'
}

# SERVER_ROOT REQUESTS [CPU] -> the requests of a bsf_bodies file (4 connections x 16 streams, as
# the GETs through h2load), then the tally of the answers' status codes and the wall time
# ("131072 201; wall 2.315 s"); fails when a request got no answer.
bsf_post() {
    "$FIVECORE" bench replay --url "$1" --requests "$2" --connections 4 --concurrency 64 \
        ${3:+--cpus "$3"}
}
