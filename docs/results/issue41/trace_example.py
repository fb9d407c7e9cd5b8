"""The trace of docs/figures/trace_example.png: a few training-like steps at P = 2 (a bucketed
gradient allreduce of several sizes, a parameter allgather, a bcast), rank 1 slower at computing
in every fourth step.
    LPMPI_TRACE=/tmp/tr mpiexec -n 2 python docs/results/issue41/trace_example.py
    lpmpi-trace /tmp/tr --png docs/figures/trace_example.png"""
import time

import numpy as np
from mpi4py import MPI

import lpmpi

w = MPI.COMM_WORLD
buckets = [np.ones(n, np.float32) for n in (1 << 10, 1 << 14, 1 << 18, 1 << 20)]
shard = np.ones(1 << 16, np.float32)
for step in range(40):
    time.sleep(0.0005 + (0.002 if w.rank == 1 and step % 4 == 0 else 0))   # "compute"
    for b in buckets:
        lpmpi.allreduce(lpmpi.IN_PLACE, b)
    lpmpi.allgather(shard)
    lpmpi.bcast(np.ones(256, np.float32), root=0)
