#!/usr/bin/env python3
"""Median over runs of the per-run medians in results/*-run*.txt."""
import glob, re, statistics, collections
res = collections.defaultdict(list)
for f in sorted(glob.glob('results/bench-run*.txt') + glob.glob('results/compile-run*.txt')):
    for line in open(f):
        m = re.match(r'RESULT (\S+)\s+(\S+)\s+(\S+)\s+median_ns=(\d+)', line)
        if m:
            res[(m[1], m[2], m[3])].append(int(m[4]))
print(f"{'engine':9} {'expr':20} {'variant':8} {'median_of_runs_ns':>18}  per-run medians")
for k, v in res.items():
    print(f"{k[0]:9} {k[1]:20} {k[2]:8} {statistics.median(v):18.0f}  {v}")
mem = collections.defaultdict(list)
for f in sorted(glob.glob('results/mem-run*.txt')):
    for line in open(f):
        m = re.match(r'MEM (\S+)\s+(.+?)\s+rss_total_kib=\d+ delta_per_instance_kib=([\d.-]+)', line)
        if m:
            mem[(m[1], m[2])].append(float(m[3]))
print()
for k, v in mem.items():
    print(f"MEM {k[0]:6} {k[1]:28} median KiB/instance {statistics.median(v):8.1f}  runs {v}")
