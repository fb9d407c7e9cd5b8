"""The ring allreduce at given message and chunk sizes: 3 interleaved repetitions, each the median
per call of the slowest rank (barrier before every call).

    LPMPI_NODE_TRANSPORT=shm|cma|mpi mpiexec -n 2 python tools/transport_ab.py 524288,1048576 262144,65536

argv[1]: message sizes in bytes (float32); argv[2]: chunk sizes in bytes.  Used for the transport
comparisons of docs/performance-archive.md (issue 14, the shared-memory transport).
"""
import sys
import time

import numpy as np
from mpi4py import MPI

import lpmpi

w = MPI.COMM_WORLD
sizes = [int(s) for s in sys.argv[1].split(",")]
chunks = [int(s) for s in sys.argv[2].split(",")]
for nb in sizes:
    x = np.ones(nb // 4, np.float32)
    y = np.empty_like(x)
    res: dict[int, list[float]] = {}
    for _ in range(3):
        for cb in chunks:
            for _ in range(2):
                lpmpi.allreduce(x, y, algorithm="ring", chunk_bytes=cb)
            ts = []
            for _ in range(max(5, (1 << 26) // nb // 2)):
                w.Barrier()
                t = time.perf_counter()
                lpmpi.allreduce(x, y, algorithm="ring", chunk_bytes=cb)
                ts.append(time.perf_counter() - t)
            res.setdefault(cb, []).append(w.allreduce(float(np.median(ts)), op=MPI.MAX))
    if w.rank == 0:
        print(nb, " ".join(f"{cb >> 10}K:{np.median(v) * 1e6:.0f}us" for cb, v in res.items()), flush=True)
