"""One launch: per-call time of a blocking allreduce (float32, auto) at 8 B and 64 KiB, rank 0's
median over 15 batches (after a warm-up), printed as `RESULT <bytes> <us>`."""
import time

import numpy as np
from mpi4py import MPI

import lpmpi

w = MPI.COMM_WORLD
for nbytes, calls in ((8, 30000), (65536, 3000)):
    x = np.ones(nbytes // 4, np.float32)
    y = np.empty_like(x)
    for _ in range(calls // 10):
        lpmpi.allreduce(x, y)
    per = []
    for _ in range(15):
        w.Barrier()
        t = time.perf_counter()
        for _ in range(calls // 15):
            lpmpi.allreduce(x, y)
        per.append((time.perf_counter() - t) / (calls // 15) * 1e6)
    if w.rank == 0:
        print(f"RESULT {nbytes} {sorted(per)[7]:.3f}", flush=True)
