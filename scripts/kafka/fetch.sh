#!/usr/bin/env bash
# Copies the jars of a single-node Kafka broker (scripts/kafka/pom.xml: Kafka 4.3.1 and its
# dependencies from Maven Central, plus log4j's slf4j binding) into one directory, for the Data
# Director's Kafka tests (crates/testkit/src/kafka.rs). Idempotent: does nothing when the
# directory is complete. Usage: scripts/kafka/fetch.sh [DIR]  (default target/kafka-4.3.1/libs)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dest="${1:-$root/target/kafka-4.3.1/libs}"
[ -f "$dest/.complete" ] && exit 0
# Copied beside the destination and renamed when whole, so an interrupted fetch is never taken
# for a complete one.
tmp="$dest.tmp.$$"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$(dirname "$dest")"
mvn -q -B -f "$root/scripts/kafka/pom.xml" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$tmp"
touch "$tmp/.complete"
rm -rf "$dest"
mv "$tmp" "$dest"
