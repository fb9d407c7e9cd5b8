"""Eager allreduce on numpy arrays, lpmpi against MPICH (mpi4py), out of place into a kept
buffer and into a fresh one, P = 2: mpiexec -n 2 python eager.py"""
import statistics
import time

import numpy as np
from mpi4py import MPI

import lpmpi

c = MPI.COMM_WORLD
for nb in (8, 1 << 20, 16 << 20):
    x = np.ones(max(1, nb // 4), np.float32)
    y = np.empty_like(x)
    rows = {"lpmpi oop": lambda x=x, y=y: lpmpi.allreduce(x, y),
            "mpi oop": lambda x=x, y=y: c.Allreduce(x, y),
            "lpmpi fresh": lambda x=x: lpmpi.allreduce(x),
            "mpi fresh": lambda x=x: c.Allreduce(x, np.empty_like(x))}
    res = {}
    for _ in range(5):
        for name, fn in rows.items():
            k = min(5000, max(3, int(0.05 / (1e-6 + nb * 1e-9))))
            c.Barrier()
            t0 = time.perf_counter()
            for _ in range(k):
                fn()
            res.setdefault(name, []).append(c.allreduce((time.perf_counter() - t0) / k, op=MPI.MAX))
    if c.rank == 0:
        print(nb, {k: round(statistics.median(v) * 1e6, 1) for k, v in res.items()})
