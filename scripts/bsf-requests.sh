# Nbsf requests of the BSF measurement scripts (sourced by bench-bsf-compare.sh and
# bench-bsf-instructions.sh). Binding i: UE 10.x.y.z, a SUPI and GPSI of its own, DNN
# "internet", S-NSSAI 1/000001, one of two PCFs (FQDN, SBI endpoint, Diameter identity).

# curl before 8.0 breaks a reused h2c prior-knowledge connection: every request after a
# connection's first fails with exit 16, "Error in the HTTP2 framing layer" (curl/curl#10634,
# fixed by #10643 in 8.0; Debian 12 ships 7.88.1), whatever the server. The POSTs below reuse
# their 64 connections, so refuse such a curl rather than measure a few requests.
bsf_check_curl() {
    local v
    v=$(curl --version | awk 'NR == 1 { print $2 }')
    case $v in
    [0-7].*)
        echo "curl $v reuses h2c prior-knowledge connections wrongly (curl/curl#10634):" \
            "all but each connection's first POST would fail; install curl >= 8.0" >&2
        return 1
        ;;
    esac
}

# FIRST COUNT BINDINGS_URL -> a curl config (-K) POSTing those bindings over h2c, each answer's
# status on its own line of curl's standard output.
bsf_bodies() {
    awk -v first="$1" -v n="$2" -v url="$3" 'BEGIN {
        for (i = first; i < first + n; i++) {
            ip = sprintf("10.%d.%d.%d", 1 + int(i / 65536), int(i / 256) % 256, i % 256)
            pcf = sprintf("pcf%d.example.org", i % 2)
            body = sprintf("{\\\"supi\\\":\\\"imsi-00101%010d\\\",\\\"gpsi\\\":\\\"msisdn-3361%07d\\\"," \
                "\\\"ipv4Addr\\\":\\\"%s\\\",\\\"dnn\\\":\\\"internet\\\"," \
                "\\\"snssai\\\":{\\\"sst\\\":1,\\\"sd\\\":\\\"000001\\\"}," \
                "\\\"pcfFqdn\\\":\\\"%s\\\",\\\"pcfIpEndPoints\\\":[{\\\"ipv4Address\\\":\\\"192.0.2.%d\\\",\\\"port\\\":7777}]," \
                "\\\"pcfDiamHost\\\":\\\"%s\\\",\\\"pcfDiamRealm\\\":\\\"example.org\\\"}",
                i, i, ip, pcf, 1 + i % 2, pcf)
            # "next" between operations only: one after the last is an operation without a URL.
            if (i > first) print "next"
            printf "url = \"%s\"\nsilent\nhttp2-prior-knowledge\nheader = \"content-type: application/json\"\n", url
            printf "data = \"%s\"\noutput = \"/dev/null\"\nwrite-out = \"%%{http_code}\\n\"\n", body
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

# CONFIG [CPU] -> the POSTs of a bsf_bodies config (64 at once; --parallel-immediate: curl 7.88 waiting
# to multiplex h2c with prior knowledge failed all but the first, exit 16), then a
# tally of the answers' status codes ("131072 201; ").
bsf_post() {
    local pin=()
    [ -n "${2:-}" ] && pin=(taskset -c "$2")
    "${pin[@]}" curl -s -Z --parallel-immediate --parallel-max 64 -K "$1" | sort | uniq -c | awk '{ printf "%s %s; ", $1, $2 }'
}
