#!/usr/bin/env bash
# Runs every test of fivecore: formatting, lints, and the whole test suite.
# Installs what the tests need when it is missing, so it works on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")"

log() { printf '\n==> %s\n' "$*" >&2; }

# --- what the tests need -----------------------------------------------------------------
APT_UPDATED=0
need_deb() { # need_deb <command> <debian package>
    command -v "$1" >/dev/null 2>&1 && return 0
    install_deb "$2" "$1"
}
install_deb() { # install_deb <debian package> <what it is for>
    log "installing Debian package $1 (for $2)"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    if [ "$APT_UPDATED" -eq 0 ]; then
        $sudo apt-get update -qq >/dev/null
        APT_UPDATED=1
    fi
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$1" >/dev/null
}

if ! command -v cargo >/dev/null 2>&1; then
    echo "cargo not found: install Rust stable with rustup (https://rustup.rs) first" >&2
    exit 1
fi
for component in rustfmt clippy; do
    if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1; then
        log "installing rustup component $component"
        rustup component add "$component"
    fi
done
need_deb cc gcc          # rusqlite builds SQLite from source
need_deb python3 python3 # scripts/check-deps.py reads Cargo's dependency graph
need_deb openssl openssl # TLS tests write their own certificates with rcgen; openssl for debugging
need_deb tshark tshark   # Wireshark's dissector checks our Diameter messages (crates/diameter/tests)
need_deb freeDiameterd freediameter # Diameter interop peer and relay (crates/diameter/tests/freediameter.rs), TLS peer (crates/fivecore/tests/diameter_tls.rs)
export FIVECORE_REQUIRE_FREEDIAMETER=1
# Packages whose postinst starts a system service (slapd, MariaDB) through invoke-rc.d, which
# a container without an init system may fail (failing the install): a policy-rc.d refusing
# every start is put in place for the install unless one is there already. The tests start their
# own servers.
install_service_debs() { # install_service_debs <what it is for> <debian package>...
    local what="$1" sudo="" policy_rc_d="" pkg
    shift
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
        $sudo chmod +x /usr/sbin/policy-rc.d
        policy_rc_d=/usr/sbin/policy-rc.d
    fi
    for pkg in "$@"; do install_deb "$pkg" "$what"; done
    if [ -n "$policy_rc_d" ]; then $sudo rm -f "$policy_rc_d"; fi
}
# OpenLDAP's slapd, the directory the PCRF's LDAP tests (crates/pcf/tests/ldap.rs) and the kit's
# ldap simulator (crates/bench/src/sim_ldap.rs, the pcrf-data-7.5k smoke run) start.
if ! command -v slapd >/dev/null 2>&1 && [ ! -x /usr/sbin/slapd ]; then
    install_service_debs slapd slapd
fi
export FIVECORE_REQUIRE_SLAPD=1
# MariaDB and Galera for the MySQL-protocol store's tests (crates/store/tests/{document,galera}.rs,
# the BSF's, the NRF's, the UDR's, the PCF's and the Data Director's tests on MySQL, `fivecore up` on
# MySQL in crates/fivecore/tests/up_mysql.rs): testkit::mariadb starts its own servers; rsync is the
# Galera state transfer.
if [ ! -x /usr/sbin/mariadbd ] || [ ! -f /usr/lib/galera/libgalera_smm.so ] || ! command -v rsync >/dev/null 2>&1; then
    install_service_debs "the MySQL-protocol store tests" mariadb-server galera-4 rsync
fi
export FIVECORE_REQUIRE_MARIADB=1
# A stock SOAP client reads docs/udr.wsdl in strict mode (crates/udr/tests/soap_zeep.rs)
if ! python3 -c "import zeep" >/dev/null 2>&1; then
    python3 -m pip --version >/dev/null 2>&1 || need_deb pip3 python3-pip
    log "installing Python package zeep (for crates/udr/tests/soap_zeep.rs)"
    # Debian marks its Python as externally managed (PEP 668); older pips ignore the variable.
    PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --quiet zeep
fi
export FIVECORE_REQUIRE_ZEEP=1
# The Data Director's Kafka mode: rdkafka builds librdkafka (and a static libcurl) from source
# with cmake, against OpenSSL for SSL and SASL/SCRAM; its tests (crates/dd/tests/kafka.rs) start
# a real Kafka broker from Maven Central jars (scripts/kafka/pom.xml), run by Java.
need_deb cmake cmake
need_deb pkg-config pkg-config
pkg-config --exists openssl || install_deb libssl-dev "OpenSSL's headers"
need_deb java default-jre-headless
need_deb mvn maven
log "Kafka broker jars (scripts/kafka/fetch.sh, skipped when present)"
scripts/kafka/fetch.sh
export FIVECORE_REQUIRE_KAFKA=1
# The web console's browser tests (crates/fivecore/tests/console_browser.rs) drive a real headless
# Chromium through chromedriver; the console's vendored scripts are checked against their sums.
need_deb chromium chromium
need_deb chromedriver chromium-driver
export FIVECORE_REQUIRE_CHROMIUM=1
scripts/console/fetch-vendor.sh --check >/dev/null
# promtool (Debian's prometheus package) checks and unit-tests deploy/prometheus/alerts.yml
# (crates/fivecore/tests/ops.rs); its postinst starts a service, hence the policy-rc.d guard.
if ! command -v promtool >/dev/null 2>&1; then
    install_service_debs "promtool (deploy/prometheus)" prometheus
fi
export FIVECORE_REQUIRE_PROMTOOL=1
# helm lints and renders deploy/helm/fivecore (crates/fivecore/tests/ops.rs). Not a Debian
# package: built from its Go module into a cache kept between runs (a cold build took ~400 s on
# the 2-core machine under load), skipped when present.
HELM_VERSION=v3.22.0
HELM_BIN="${XDG_CACHE_HOME:-$HOME/.cache}/fivecore/helm-$HELM_VERSION"
if ! command -v helm >/dev/null 2>&1 && [ ! -x "$HELM_BIN/helm" ]; then
    # Debian's golang-go (1.19) is too old for helm's module; Go 1.21+ fetches the toolchain the
    # module asks for (GOTOOLCHAIN=auto) from the module proxy.
    if ! command -v go >/dev/null 2>&1; then
        echo "go not found: install Go 1.21 or later (https://go.dev/doc/install) to build helm" >&2
        exit 1
    fi
    log "building helm $HELM_VERSION from its Go module (for deploy/helm)"
    mkdir -p "$HELM_BIN"
    GOBIN="$HELM_BIN" go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
fi
[ -x "$HELM_BIN/helm" ] && export PATH="$HELM_BIN:$PATH"
export FIVECORE_REQUIRE_HELM=1

# --- checks ------------------------------------------------------------------------------
export CARGO_TERM_COLOR=never
export CARGO_INCREMENTAL=0

log "cargo fmt --check"
cargo fmt --all -- --check

# check-deps.py reads `cargo metadata --offline`: on a fresh machine the registry must be fetched
# first (the builds below would fetch it anyway).
log "cargo fetch"
cargo fetch --locked

log "dependency rules (scripts/check-deps.py)"
python3 scripts/check-deps.py --self-test
python3 scripts/check-deps.py

log "cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

log "cargo test"
cargo test --workspace --locked

# --- fuzzing (fuzz/README.md) -------------------------------------------------------------
# cargo test replayed every corpus and regression input through its target on stable
# (fuzz/tests/replay.rs). Here libFuzzer runs each target for a few seconds from that corpus,
# with AddressSanitizer, which needs nightly Rust and cargo-fuzz: both are installed when
# missing; when they cannot be (rustup's server unreachable), the replay is what ran, and the
# output says so. New inputs go to a temporary directory, not into the repository's corpus.
# The instrumented build is optimised (cargo fuzz's default, with debug assertions) but without
# the release profile's LTO, debug info or single codegen unit; `run` is given the same settings,
# or it would build everything again. Opt-in (FIVECORE_FUZZ=1) until a cold instrumented build
# is shown to fit CI's budget: on the loaded 2-core machine this one had used 26 CPU-minutes
# and not finished after 97 minutes (docs/security.md, "Fuzzing").
FUZZ_SECONDS="${FUZZ_SECONDS:-5}"
FUZZ_BUILD=(--features libfuzzer --codegen-units 16)
fuzz() { # fuzz <build|run> ARGS...: cargo +nightly fuzz with the CI build settings
    CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_DEBUG=0 \
        cargo +nightly fuzz "$1" "${FUZZ_BUILD[@]}" "${@:2}"
}
fuzz_tools() {
    rustup run nightly rustc --version >/dev/null 2>&1 ||
        { log "installing Rust nightly (for cargo-fuzz)"; rustup toolchain install nightly --profile minimal >/dev/null; } || return 1
    cargo fuzz --version >/dev/null 2>&1 ||
        { log "installing cargo-fuzz"; cargo install --locked --quiet cargo-fuzz; } || return 1
}
if [ "${FIVECORE_FUZZ:-0}" != 1 ]; then
    log "fuzzing: corpus and regressions replayed on stable (cargo test: fuzz/tests/replay.rs);"\
        "libFuzzer runs with FIVECORE_FUZZ=1 ./test.sh"
elif fuzz_tools; then
    log "fuzzing: building the targets with libFuzzer and AddressSanitizer (cargo +nightly fuzz)"
    fuzz build >/dev/null 2>&1 || fuzz build
    log "fuzzing: each target for ${FUZZ_SECONDS}s under libFuzzer"
    fuzz_tmp="$(mktemp -d)"
    for t in $(cargo fuzz list); do
        mkdir -p "$fuzz_tmp/$t"
        if ! fuzz run "$t" "$fuzz_tmp/$t" "fuzz/corpus/$t" "fuzz/regressions/$t" -- \
            -max_total_time="$FUZZ_SECONDS" -timeout=10 -print_final_stats=1 \
            >"$fuzz_tmp/$t.log" 2>&1; then
            tail -n 60 "$fuzz_tmp/$t.log" >&2
            echo "fuzz target $t failed: keep the crashing input (fuzz/artifacts/$t/) under" \
                "fuzz/regressions/$t/ once fixed (fuzz/README.md)" >&2
            exit 1
        fi
        printf '%-12s %s\n' "$t" "$(grep -m1 -o 'Done [0-9]* runs in [0-9]* second(s)' "$fuzz_tmp/$t.log")"
    done
    rm -rf "$fuzz_tmp"
else
    log "fuzzing: nightly Rust or cargo-fuzz could not be installed, libFuzzer runs SKIPPED;"\
        "every corpus and regression input replays on stable instead"
    cargo test --locked -p fivecore-fuzz --test replay
fi

log "all tests passed"
