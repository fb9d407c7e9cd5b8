import os
import sys
import time

import numpy as np
from mpi4py import MPI

import lpmpi

w = MPI.COMM_WORLD; me = w.Get_rank()
lpmpi.progress_thread(True) if hasattr(lpmpi, "progress_thread") else None
x = np.ones(1 << 20, dtype=np.float32)
req = lpmpi.iallreduce(x, algorithm="ring")
t = time.time()
pid = os.fork()
if pid == 0:
    sys.exit(0)          # a normal exit: atexit handlers, MPI_Finalize
_, status = os.waitpid(pid, 0)
dt = time.time() - t
assert np.array_equal(req.wait(), 2 * x)
for i in range(20):
    assert np.array_equal(lpmpi.allreduce(x), 2 * x)
print(me, f"child exited in {dt:.2f}s status {status}; parent did 20 more", flush=True)
