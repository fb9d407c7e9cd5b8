import time

import numpy as np
from mpi4py import MPI

import lpmpi

w = MPI.COMM_WORLD; me = w.rank
n = (64 << 20) // 4
src = np.random.default_rng(me).standard_normal(n).astype(np.float32)
buf = src.copy(); out = np.empty_like(src)
def call(form):
    buf[:] = src
    w.Barrier(); t = time.perf_counter()
    if form == "oop": lpmpi.allreduce(buf, out, algorithm="lp", chunk_bytes=512 << 10)
    else: lpmpi.allreduce(lpmpi.IN_PLACE, buf, algorithm="lp", chunk_bytes=512 << 10)
    return (time.perf_counter() - t) * 1e3
seqs = {"alternating": [], "inpl-block": [], "alternating2": [], "inpl-block2": []}
for name in seqs:
    if name.startswith("alternating"):
        for r in range(6):
            call("oop"); seqs[name].append(call("inpl"))
    else:
        for r in range(6):
            seqs[name].append(call("inpl"))
if me == 0:
    print(" | ".join(f"{k}: " + " ".join(f"{x:.1f}" for x in v) for k, v in seqs.items()), flush=True)
