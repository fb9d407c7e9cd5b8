import numpy as np
from mpi4py import MPI

import lpmpi

w = MPI.COMM_WORLD; me = w.Get_rank()
a = np.ones(4); b = np.full(4, 100.0); ra = np.zeros(4); rb = np.zeros(4)
A = lpmpi.allreduce_init(a, ra); B = lpmpi.allreduce_init(b, rb)
order = (A, B) if me == 0 else (B, A)
try:
    for q in order: q.start()
    for q in order: q.wait()
    print(me, "A ->", ra[0], "B ->", rb[0], flush=True)
except Exception as e:
    print(me, type(e).__name__, e, flush=True)
