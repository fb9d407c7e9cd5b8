import resource
import time

import numpy as np
from mpi4py import MPI

import lpmpi

w = MPI.COMM_WORLD; me = w.rank
n = (64 << 20) // 4
src = np.random.default_rng(me).standard_normal(n).astype(np.float32)
buf = src.copy(); out = np.empty_like(src)
res = {}
for form in ("oop", "inpl", "oop", "inpl"):
    ts = []
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for rep in range(6):
        buf[:] = src
        w.Barrier(); t = time.perf_counter()
        if form == "oop": lpmpi.allreduce(buf, out, algorithm="lp", chunk_bytes=512 << 10)
        else: lpmpi.allreduce(lpmpi.IN_PLACE, buf, algorithm="lp", chunk_bytes=512 << 10)
        ts.append(time.perf_counter() - t)
    f1 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    res.setdefault(form, []).append((sorted(ts)[3] * 1e3, f1 - f0))
thp = open("/proc/self/smaps_rollup").read()
ah = [l for l in thp.splitlines() if l.startswith("AnonHugePages")][0].split()[1]
print(me, " ".join(f"{k}:{v[1][0]:.1f}ms/{v[1][1]}flt" for k, v in res.items()), f"AnonHuge={ah}kB", flush=True)
