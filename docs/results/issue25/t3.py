import numpy as np
from mpi4py import MPI

import lpmpi

w = MPI.COMM_WORLD; me = w.Get_rank()
x = np.arange(100000, dtype=np.float32)
try:
    y = lpmpi.allreduce(x)
    print(me, "result ok" if np.array_equal(y, 2*x) else "WRONG", flush=True)
except Exception as e:
    print(me, type(e).__name__, e, flush=True)
