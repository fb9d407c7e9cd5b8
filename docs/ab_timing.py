"""A/B timing of the blocking allreduce for comparing two builds of lpmpi side by side.

Run one build per process and alternate them (A B A B ...) in one sitting, e.g.::

    for i in $(seq 10); do
      for pp in /path/to/build-A /path/to/build-B; do
        PYTHONPATH=$pp mpiexec -bind-to core -n 2 python docs/ab_timing.py
      done
    done

Each run prints one ``RES {json}`` line on rank 0: for every size, the median over repetitions
of the slowest rank's time of ``lpmpi.allreduce(x, y)`` (float32, out of place), and at 8 B
also mpi4py's ``comm.Allreduce`` (``mpi4py8``).  Compare the medians of the per-pair ratios.
Build both the same way (``pip install --target DIR .``): an editable build lays out and
links differently and measured a few percent apart at 16-64 MiB on the same code.
"""
import json
import time

import numpy as np
from mpi4py import MPI

import lpmpi

w = MPI.COMM_WORLD
sizes = [8, 1024, 65536, 1 << 20, 16 << 20, 64 << 20]
res = {}
for n in sizes:
    x = np.ones(n // 4, np.float32)
    y = np.empty_like(x)
    reps = 2000 if n <= 1024 else 300 if n <= 65536 else 40
    for _ in range(3):
        lpmpi.allreduce(x, y)
    ts = np.empty(reps)
    for r in range(reps):
        w.Barrier()
        t = time.perf_counter()
        lpmpi.allreduce(x, y)
        ts[r] = time.perf_counter() - t
    mx = np.empty_like(ts)
    w.Allreduce(ts, mx, MPI.MAX)
    res[n] = float(np.median(mx))
    if n == 8:
        for r in range(reps):
            w.Barrier()
            t = time.perf_counter()
            w.Allreduce(x, y)
            ts[r] = time.perf_counter() - t
        w.Allreduce(ts, mx, MPI.MAX)
        res["mpi4py8"] = float(np.median(mx))
if w.rank == 0:
    print("RES", json.dumps(res))
