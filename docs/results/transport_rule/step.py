"""A training-like step: write the input (untimed), allreduce out of place (algorithm ring, the
pick at these sizes), then read the result (y.sum()).  Median over reps of the slowest rank.

    mpiexec -n 2 python step.py 1,2,12,16,20,24,28 30 TAG    # sizes in MiB, reps, a label
"""
import sys
import time

import numpy as np
from mpi4py import MPI

import lpmpi

comm = MPI.COMM_WORLD; r = comm.Get_rank()
sizes = [int(float(s) * (1 << 20)) for s in sys.argv[1].split(",")]
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 30
tag = sys.argv[3] if len(sys.argv) > 3 else ""
for n in sizes:
    x = np.ones(n // 4, np.float32); y = np.empty_like(x)
    call, step = [], []
    for k in range(reps + 3):
        x.fill(float(r + k))                     # backward's writes
        comm.Barrier()
        t0 = time.perf_counter()
        lpmpi.allreduce(x, y, comm=comm, algorithm="ring")
        t1 = time.perf_counter()
        s = float(y.sum(dtype=np.float32))      # the optimizer reads the result
        t2 = time.perf_counter()
        c = comm.allreduce(t1 - t0, op=MPI.MAX); st = comm.allreduce(t2 - t0, op=MPI.MAX)
        if k >= 3:
            call.append(c); step.append(st)
    if r == 0:
        print(f"{tag} {n >> 20}MiB call {np.median(call)*1e3:.3f} step {np.median(step)*1e3:.3f} ms", flush=True)
