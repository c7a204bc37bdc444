#!/usr/bin/env bash
# Runs every measurement; expects target/release/script-bench built with
#   cargo build --release -j 2 --target-dir target
# Usage: ./run_bench.sh [runs]    (default 3 runs of the timing benchmarks)
set -euo pipefail
cd "$(dirname "$0")"
B=./target/release/script-bench
RUNS=${1:-3}
mkdir -p results
# Wait until the machine is idle (both CPUs >= 90% idle over 3 s), so runs are
# not taken while another job (e.g. a build) shares the 2 CPUs.
wait_idle() {
  while true; do
    read -r _ u1 n1 s1 i1 w1 q1 sq1 st1 _ < /proc/stat; sleep 3
    read -r _ u2 n2 s2 i2 w2 q2 sq2 st2 _ < /proc/stat
    busy=$(( (u2+n2+s2+q2+sq2+st2) - (u1+n1+s1+q1+sq1+st1) )); idle=$(( (i2+w2) - (i1+w1) ))
    if [ $(( idle * 100 / (busy + idle) )) -ge 90 ]; then break; fi
    echo "$(date -u +%T) waiting for idle CPUs (busy=$busy idle=$idle)" >&2
  done
}
$B check | tee results/check.txt
for r in $(seq 1 "$RUNS"); do
  for e in rhai qjs qjs-text cel; do
    wait_idle
    echo "# run=$r engine=$e start=$(date -u +%T) load=$(cut -d' ' -f1-3 /proc/loadavg)" >> results/bench-run$r.txt
    taskset -c 0 $B bench $e | tee -a results/bench-run$r.txt
  done
  for e in rhai qjs cel; do
    wait_idle
    taskset -c 0 $B compile $e | tee -a results/compile-run$r.txt
    taskset -c 0 $B mem $e 200 | tee -a results/mem-run$r.txt
  done
done
: > results/sandbox.txt
for t in loop loop_ops strdouble arraypush arraystr nest mapgrow mapgrow_prod mapbig_prod mapbig_ops mapbig_ops100k recursion padstr padarr; do
  wait_idle; (ulimit -v 8000000; /usr/bin/time -f "SANDBOX rhai  $t process maxrss_kib=%M exit=%x" taskset -c 0 $B sandbox rhai $t 2>&1 || true) | tee -a results/sandbox.txt
done
for t in loop regex strdouble strrepeat arraypush objpush objpush_fn recursion bigrepeat bigarray; do
  wait_idle; (/usr/bin/time -f "SANDBOX qjs   $t process maxrss_kib=%M exit=%x" taskset -c 0 $B sandbox qjs $t 2>&1 || true) | tee -a results/sandbox.txt
done
for t in nest4 nest5 nest6 nest7 strconcat; do
  wait_idle; (ulimit -v 8000000; /usr/bin/time -f "SANDBOX cel   $t process maxrss_kib=%M exit=%x" taskset -c 0 $B sandbox cel $t 2>&1 || true) | tee -a results/sandbox.txt
done
wait_idle; $B access 2>&1 | tee results/access.txt
: > results/threads-runs.txt
for i in 1 2 3; do for v in 1 0; do
  wait_idle; echo "# run=$i RHAI_INTERN=$v load=$(cut -d' ' -f1 /proc/loadavg)" >> results/threads-runs.txt
  RHAI_INTERN=$v $B threads | tee -a results/threads-runs.txt
done; done
