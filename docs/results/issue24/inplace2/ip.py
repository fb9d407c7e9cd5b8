import sys
import time

import numpy as np
from mpi4py import MPI

import lpmpi

w = MPI.COMM_WORLD; me = w.rank
n = (64 << 20) // 4
rng = np.random.default_rng(me)
src = rng.standard_normal(n).astype(np.float32)
buf = src.copy(); out = np.empty_like(src)
res = {}
for chunk in (128 << 10, 512 << 10, 2 << 20, 8 << 20):
    for form in ("oop", "inpl"):
        ts = []
        for rep in range(6):
            buf[:] = src
            w.Barrier(); t = time.perf_counter()
            if form == "oop": lpmpi.allreduce(buf, out, algorithm=sys.argv[1], chunk_bytes=chunk)
            else: lpmpi.allreduce(lpmpi.IN_PLACE, buf, algorithm=sys.argv[1], chunk_bytes=chunk)
            ts.append(time.perf_counter() - t)
        res[(chunk, form)] = sorted(ts)[len(ts)//2] * 1e3
if me == 0:
    print(" ".join(f"{c >> 10}K:{res[(c,'oop')]:.1f}/{res[(c,'inpl')]:.1f}" for c in (128 << 10, 512 << 10, 2 << 20, 8 << 20)), flush=True)
