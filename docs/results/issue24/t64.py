import os
import sys
import time

import numpy as np
from mpi4py import MPI

import lpmpi

w = MPI.COMM_WORLD
nb = int(sys.argv[1]) if len(sys.argv) > 1 else 64 << 20
alg = sys.argv[2] if len(sys.argv) > 2 else "ring"
cb = int(sys.argv[3]) if len(sys.argv) > 3 else 131072
reps = int(sys.argv[4]) if len(sys.argv) > 4 else 10
inplace = len(sys.argv) > 5 and sys.argv[5] == "inplace"
rng = np.random.default_rng(w.rank)
x = rng.random(nb // 4, dtype=np.float32)
y = np.empty_like(x)
kw = {} if alg == "auto" else {"algorithm": alg, "chunk_bytes": cb}
if alg == "native":
    f = lambda: w.Allreduce(x, y)
else:
    f = (lambda: lpmpi.allreduce(lpmpi.IN_PLACE, x, **kw)) if inplace else (lambda: lpmpi.allreduce(x, y, **kw))
f(); f()
ts = []
for _ in range(reps):
    w.Barrier()
    t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
m = w.allreduce(float(np.median(ts)), op=MPI.MAX)
if w.rank == 0:
    print(f"{alg}{'/ip' if inplace else ''} {nb>>20}MiB cpu={os.sched_getaffinity(0)} med={m*1e6:.1f}us min={min(ts)*1e6:.1f} max={max(ts)*1e6:.1f}", flush=True)
