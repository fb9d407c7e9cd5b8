"""Within one launch, blocks of blocking allreduce calls (float32, auto) with the flight recorder
off, on (the default) and the trace on, interleaved (off, on, trace, off, on, trace, ...) after a
barrier each, so that the three see the same machine state.  Per block: the slowest rank's time
per call.  Prints per size the median per call of each and each block's ratio to the "off" block
just before it (median [min, max] over the repetitions).
    mpiexec -n 2 python docs/results/issue41/interleaved.py [TRACE_DIR] [REPS]"""
import statistics
import sys
import tempfile
import time

import numpy as np
from mpi4py import MPI

import lpmpi
from lpmpi import _core

w = MPI.COMM_WORLD
tdir = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="lpmpi-il-")
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 12


def mode(m):
    if m == "off":
        _core._configure_flight(0, "", 0)
    else:
        _core._configure_flight(256, "", 0)
    if m == "trace":
        _core._trace_configure(tdir, 10 ** 9)
    else:
        _core._trace_close()


for nbytes, calls in ((8, 8000), (65536, 800)):
    x = np.ones(nbytes // 4, np.float32)
    y = np.empty_like(x)
    for _ in range(calls):
        lpmpi.allreduce(x, y)
    t = {"off": [], "on": [], "trace": []}
    for _ in range(reps):
        for m in ("off", "on", "trace"):
            mode(m)
            w.Barrier()
            t0 = time.perf_counter()
            for _ in range(calls):
                lpmpi.allreduce(x, y)
            dt = w.allreduce((time.perf_counter() - t0) / calls * 1e6, op=MPI.MAX)
            t[m].append(dt)
    mode("on")
    if w.rank == 0:
        for m in ("off", "on", "trace"):
            r = [a / b for a, b in zip(t[m], t["off"])]
            print(f"RESULT {nbytes} {m} {statistics.median(t[m]):.3f} us  ratio x{statistics.median(r):.3f} "
                  f"[{min(r):.3f}, {max(r):.3f}]", flush=True)
