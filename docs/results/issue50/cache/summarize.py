"""Summarize docs/results/issue50/cache/run.sh's output: per size and run kind (tuner off, run 1
from an empty cache, run 2 from run 1's cache), the median [range] over pairs of the
first-64 cost (calls 2-65 over 64 x the settled median, minus 1), the exploring calls, and
MPI's own / settled.    python summarize.py DATADIR"""
import glob
import json
import os
import statistics
import sys

d = sys.argv[1]
runs = {}
for f in sorted(glob.glob(os.path.join(d, "pair*_run*.json"))):
    kind = f.rsplit("_run", 1)[1][:-5]
    for r in json.load(open(f))["rows"]:
        runs.setdefault((r["nbytes"], kind), []).append(r)
cpu = open(os.path.join(d, "cpu.txt")).read().strip() if os.path.exists(os.path.join(d, "cpu.txt")) else "?"
print(f"# {cpu}; P = 2, MPICH, no table; {len(glob.glob(os.path.join(d, 'pair*_runoff.json')))} pairs (odd pinned)")
print("| size | run | first-64 cost | exploring calls | MPI's own / settled |")
print("|---|---|---|---|---|")
fmt = lambda xs, f: f"{f(statistics.median(xs))} [{f(min(xs))}, {f(max(xs))}]"
for nb in sorted({k[0] for k in runs}):
    for kind, label in (("off", "tuner off"), ("1", "run 1 (empty cache)"), ("2", "run 2 (from run 1's cache)")):
        rs = runs.get((nb, kind), [])
        if not rs:
            continue
        ex = [r["explore_calls"] for r in rs if r["explore_calls"] is not None]
        print(f"| {nb} | {label} | {fmt([r['first64_cost'] for r in rs], lambda v: f'{v:+.0%}')} | "
              f"{fmt(ex, str) if ex else '-'} | {fmt([r['native_us'] / r['settled_us'] for r in rs], lambda v: f'{v:.2f}')} |")
