#!/usr/bin/env bash
# Clean release build of each sizes/<name> crate in its own target dir; records
# wall/user/sys build time and binary size (as built and stripped).
# Usage: ./build_sizes.sh [rounds]   (results appended to results/build_sizes.txt)
set -euo pipefail
cd "$(dirname "$0")"
ROUNDS=${1:-1}
out=results/build_sizes.txt
for r in $(seq 1 "$ROUNDS"); do
  for n in base rhai qjs cel; do
    td=$PWD/target/size-$n
    rm -rf "$td"
    (cd sizes/$n && cargo fetch -q)
    start=$(date +%s.%N)
    ( cd sizes/$n && /usr/bin/time -f "%e %U %S" -o "$td.time" cargo build --release -j 2 --offline -q --target-dir "$td" )
    bin=$td/release/size-$n
    cp "$bin" "$bin.stripped"; strip "$bin.stripped"
    read wall user sys < "$td.time"
    echo "BUILD round=$r crate=$n wall_s=$wall user_s=$user sys_s=$sys bin_bytes=$(stat -c %s "$bin") stripped_bytes=$(stat -c %s "$bin.stripped") run=$("$bin")" | tee -a $out
  done
done
