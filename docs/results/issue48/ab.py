"""One launch of issue 48's A/B (docs/results/issue48/run_ab.sh): per-call time of the calls the
change touches, medians of blocks of calls, the slowest rank's; one line of JSON from rank 0.

    mpiexec -n 2 python ab.py TAG
"""
import json
import os
import sys
import time

import numpy as np
from mpi4py import MPI

import lpmpi

c = MPI.COMM_WORLD
CASES = [  # (name, function, bytes)
    ("auto", "allreduce", "auto", 8), ("native", "allreduce", "native", 8),
    ("lp", "allreduce", "lp", 8), ("lp", "allreduce", "lp", 4096), ("lp", "allreduce", "lp", 65536),
    ("native-nb", "iallreduce", "native", 8), ("auto", "allreduce", "auto", 65536),
    ("bcast-auto", "bcast", "auto", 8),
]
res = {}
for rep in range(7):
    for name, fn, alg, n in CASES:
        x = np.ones(max(1, n // 4), np.float32)
        y = np.empty_like(x)
        def call(fn=fn, alg=alg, x=x, y=y):
            if fn == "allreduce":
                lpmpi.allreduce(x, y, algorithm=alg)
            elif fn == "iallreduce":
                lpmpi.iallreduce(x, y, algorithm=alg).wait()
            else:
                lpmpi.bcast(x, algorithm=alg)
        it = 2000 if n <= 4096 else 400
        for _ in range(20):
            call()
        c.Barrier()
        t = time.perf_counter()
        for _ in range(it):
            call()
        dt = c.allreduce((time.perf_counter() - t) / it * 1e6, op=MPI.MAX)
        res.setdefault(f"{name}:{n}", []).append(dt)
if c.rank == 0:
    print(json.dumps({"tag": sys.argv[1], "lpmpi": os.path.dirname(lpmpi.__file__),
                      "us": {k: float(np.median(v)) for k, v in res.items()}}), flush=True)
