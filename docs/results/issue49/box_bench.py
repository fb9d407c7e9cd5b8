"""Compressed allreduce across the cluster in a box (issue 49): time and bytes on the NICs of
float32 SUM allreduce, uncompressed auto against compression bf16 / int8 / int4, in rotated
blocks of calls within one launch (each block after a barrier; a call's time is the slowest
rank's).  Run under the box's launcher:

    lpmpi-cluster run --layout 2,2 -- python box_bench.py [SIZES_MIB] [REPS]

Prints one JSON line (rank 0): per size and mode the median time (s) and the bytes each node's
NIC sent per call (read from its eth0 inside the node), and the result's error against the
uncompressed one.
"""
import json
import sys
import time

import numpy as np
from mpi4py import MPI

import lpmpi

W = MPI.COMM_WORLD
P, ME = W.size, W.rank
node = W.Split_type(MPI.COMM_TYPE_SHARED)
leader = node.rank == 0
sizes = [int(s) for s in (sys.argv[1] if len(sys.argv) > 1 else "16,64").split(",")]
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
MODES = [None, "bf16", "int8", "int4"]


def tx():
    try:
        with open("/sys/class/net/eth0/statistics/tx_bytes") as f:
            return int(f.read())
    except OSError:
        return 0


out = {"P": P, "nodes": W.allreduce(1 if leader else 0), "sizes_mib": sizes, "reps": reps, "results": {}}
for mib in sizes:
    n = (mib << 20) // 4
    x = np.random.default_rng(ME).standard_normal(n).astype(np.float32)
    y = np.empty_like(x)
    times = {str(m): [] for m in MODES}
    nic = {str(m): [] for m in MODES}
    ref = lpmpi.allreduce(x)
    err = {}
    for m in MODES:                                   # warm-up (plans, connections)
        lpmpi.allreduce(x, y, compression=m)
        if m:
            err[m] = float(np.max(np.abs(y - ref)) / np.max(np.abs(ref)))
    for r in range(reps):
        order = MODES[r % len(MODES):] + MODES[:r % len(MODES)]
        for m in order:
            W.Barrier()
            b0 = tx()
            t = time.perf_counter()
            lpmpi.allreduce(x, y, compression=m)
            dt = W.allreduce(time.perf_counter() - t, op=MPI.MAX)
            sent = tx() - b0 if leader else 0
            times[str(m)].append(dt)
            nic[str(m)].append(max(W.allgather(sent)))
    out["results"][mib] = {m: {"median_s": float(np.median(times[m])), "min_s": float(np.min(times[m])),
                               "max_s": float(np.max(times[m])), "nic_bytes": int(np.median(nic[m]))}
                           for m in times}
    out["results"][mib]["rel_err"] = err
if ME == 0:
    print(json.dumps(out), flush=True)
