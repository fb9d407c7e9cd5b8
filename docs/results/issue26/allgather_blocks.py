import time

import numpy as np
from mpi4py import MPI

import lpmpi

w = MPI.COMM_WORLD
for nb in (1 << 20, 4 << 20, 64 << 20):
    x = np.ones(nb // 4 // w.size, np.float32); out = np.empty(nb // 4, np.float32)
    res = {}
    for rnd in range(3):
        for alg in ("native", "auto", "ring", "mpi4py"):
            ts = []
            for i in range(20 if nb < (64 << 20) else 5):
                w.Barrier(); t = time.perf_counter()
                if alg == "mpi4py": w.Allgather(x, out)
                else: lpmpi.allgather(x, out, algorithm=alg)
                ts.append(time.perf_counter() - t)
            res.setdefault(alg, []).append(sorted(ts)[len(ts) // 2] * 1e6)
    if w.rank == 0: print(nb >> 20, "MiB", {k: [round(v) for v in vs] for k, vs in res.items()}, flush=True)
