"""A/B timing of the blocking allreduce for comparing two builds of lpmpi side by side.

Run one build per process and alternate them in one sitting, ABBA order (A B B A A B ...)
so that a drift of the machine hits both alike, e.g.::

    for i in $(seq 6); do
      for pp in A B B A; do
        PYTHONPATH=/path/to/build-$pp mpiexec -bind-to core -n 2 python tools/ab_timing.py
      done
    done

Each run prints one ``RES {json}`` line on rank 0: for every size, the median over repetitions
of the slowest rank's time of ``lpmpi.allreduce(x, y)`` (float32, out of place; ``auto``, or
each algorithm named with ``--algorithms``: keys ``SIZE`` and ``SIZE/ALG``), and at 8 B also
mpi4py's ``comm.Allreduce`` (``mpi4py8``).  Compare the medians of the per-pair ratios.
Build both the same way (``pip install --target DIR .``): an editable build lays out and
links differently and measured a few percent apart at 16-64 MiB on the same code.

    python tools/ab_timing.py [--sizes 8,1K,64K,1M,16M,64M] [--algorithms lp,ring]

``python tools/ab_timing.py --summarize LOG`` reads the lines ``A RES {...}`` / ``B RES {...}``
of a log (label each run's output with its build, in run order) and prints, per key, the
median of the per-pair B/A ratios (the i-th A with the i-th B) and their quartiles.
"""
import argparse
import json
import time

import numpy as np
from mpi4py import MPI

import lpmpi

SIZES = "8,16,64,256,1K,4K,16K,64K,256K,1M,4M,16M,64M"


def parse(text):
    units = {"K": 1 << 10, "M": 1 << 20}
    out = []
    for t in text.split(","):
        t = t.strip().upper().removesuffix("IB").removesuffix("B")
        out.append(int(t[:-1]) * units[t[-1]] if t[-1] in units else int(t))
    return out


def summarize(path):
    runs = {"A": [], "B": []}
    with open(path) as f:
        for line in f:
            label, sep, doc = line.partition(" RES ")
            if sep and label.strip() in runs:
                runs[label.strip()].append(json.loads(doc))
    a, b = runs["A"], runs["B"]
    n = min(len(a), len(b))
    print(f"{n} pairs; B/A: median [quartiles] of the per-pair ratios; A and B medians (us)")
    for key in a[0]:
        r = np.array([b[i][key] / a[i][key] for i in range(n)])
        q1, med, q3 = np.percentile(r, [25, 50, 75])
        ta = np.median([x[key] for x in a[:n]]) * 1e6
        tb = np.median([x[key] for x in b[:n]]) * 1e6
        print(f"{key:>14}  B/A {med:.3f} [{q1:.3f} {q3:.3f}]   A {ta:10.2f}   B {tb:10.2f}")


ap = argparse.ArgumentParser()
ap.add_argument("--sizes", default=SIZES)
ap.add_argument("--algorithms", default="")
ap.add_argument("--summarize", metavar="LOG")
args = ap.parse_args()
if args.summarize:
    summarize(args.summarize)
    raise SystemExit(0)
w = MPI.COMM_WORLD
res = {}
algs = [None] + [a for a in args.algorithms.split(",") if a]
for n in parse(args.sizes):
    x = np.ones(max(1, n // 4), np.float32)
    y = np.empty_like(x)
    reps = 2000 if n <= 1024 else 300 if n <= 65536 else 100 if n <= (1 << 20) else 40
    for alg in algs:
        kw = {} if alg is None else {"algorithm": alg}
        for _ in range(3):
            lpmpi.allreduce(x, y, **kw)
        ts = np.empty(reps)
        for r in range(reps):
            w.Barrier()
            t = time.perf_counter()
            lpmpi.allreduce(x, y, **kw)
            ts[r] = time.perf_counter() - t
        mx = np.empty_like(ts)
        w.Allreduce(ts, mx, MPI.MAX)
        res[str(n) if alg is None else f"{n}/{alg}"] = float(np.median(mx))
    if n == 8:
        ts = np.empty(reps)
        for r in range(reps):
            w.Barrier()
            t = time.perf_counter()
            w.Allreduce(x, y)
            ts[r] = time.perf_counter() - t
        mx = np.empty_like(ts)
        w.Allreduce(ts, mx, MPI.MAX)
        res["mpi4py8"] = float(np.median(mx))
if w.rank == 0:
    print("RES", json.dumps(res))
