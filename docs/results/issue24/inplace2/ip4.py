import time

import numpy as np
from mpi4py import MPI

import lpmpi

w = MPI.COMM_WORLD; me = w.rank
n = (64 << 20) // 4
src = np.random.default_rng(me).standard_normal(n).astype(np.float32)
buf = src.copy(); out = np.empty_like(src)
cfgs = [("lp", 512 << 10), ("lp", 8 << 20), ("ring", 512 << 10), ("ring", 1 << 20), ("be", None)]
res = {}
for rep in range(5):
    for alg, ch in cfgs:
        for form in ("oop", "inpl"):
            buf[:] = src
            w.Barrier(); t = time.perf_counter()
            if form == "oop": lpmpi.allreduce(buf, out, algorithm=alg, chunk_bytes=ch)
            else: lpmpi.allreduce(lpmpi.IN_PLACE, buf, algorithm=alg, chunk_bytes=ch)
            res.setdefault((alg, ch, form), []).append(time.perf_counter() - t)
if me == 0:
    print(" ".join(f"{a}/{(c or 0) >> 10}K:{sorted(res[(a,c,'oop')])[2]*1e3:.1f}/{sorted(res[(a,c,'inpl')])[2]*1e3:.1f}" for a, c in cfgs), flush=True)
